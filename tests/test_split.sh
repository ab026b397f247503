#!/bin/sh
# test_split.sh: the class-split loss and height (spatial) splits in training
# under mpirun, each against one process on the same data (tests/
# grid_runs.sh: every step's loss within 1e-5 relative, the gathered
# weights within 1e-5 of the largest, after 20 steps).  LeNet-5 on tp=2
# reads its 10 classes split (dltrain check --grid says so) and equals one
# process as does the gather that split: none on the loss keeps; 7 classes
# on 2 ranks keep the last layer whole and say it once.  A small network of
# two height-split convolutions with batch norm on 18 rows (bands of 9 on 2
# ranks, 4-5 on 4), on tp=2, tp=4, tp=2 x pp=2 and, with --sync-bn, on
# dp=2 x tp=2, and without batch norm on the default kernels on tp=4;
# layers that cannot be split by height exit 2 naming the layer and the
# rule.  Krizhevsky's hybrid (`split: batch`): two convolutions with batch
# norm and pooling on each tensor rank's share of the samples, then fc
# layers column/row, on tp=2, tp=3 (32 samples: shares of 10, 11, 11),
# tp=2 x pp=2 (2 chunks) and, with --sync-bn, on dp=2 x tp=2, and without batch norm on the default
# kernels on tp=3; a chunk too small to give every rank a sample and a
# batch-split loss exit 2.
. "$top_srcdir/tests/tap.sh"
skip_without_mpirun
T="$TMPDIR_TEST"
tap_plan 40
. "$top_srcdir/tests/grid_runs.sh"

# ---------------------------------------------------------------- class-split loss
sed 's/^loss: softmax_cross_entropy$/loss: {type: softmax_cross_entropy, split: none}/' \
    "$top_srcdir/nets/lenet5.yaml" > "$T/lenet-gather.yaml"
COMMON="--limit-train 1280 --limit-test 200 --epochs 1 --threads 1 --quiet"
expect_status 0 "dltrain check --grid tp=2 on LeNet-5" -- $DLTRAIN check --net "$top_srcdir/nets/lenet5.yaml" --grid tp=2
expect_output "^11 +loss +0 +classes \(no gather\)" "the loss reads its classes split"
expect_status 0 "dltrain check --grid tp=2 with split: none on the loss" -- $DLTRAIN check --net "$T/lenet-gather.yaml" \
    --grid tp=2
expect_output "^11 +loss +0 +whole; input 0: gathered" "split: none gathers the logits"
run 1 lenet1 --net "$top_srcdir/nets/lenet5.yaml" $COMMON; tap_result $? "LeNet-5 on one process"
grid lenet-tp2-classes lenet1 2 --net "$top_srcdir/nets/lenet5.yaml" $COMMON --parallel model
grid lenet-tp2-gather lenet1 2 --net "$T/lenet-gather.yaml" $COMMON --parallel model

cat > "$T/odd.yaml" <<'YAML'
input: {shape: [12, 1, 1], classes: 7}
data: {dataset: synthetic, train_samples: 640, test_samples: 64}
layers:
  - {name: f1, type: fc, units: 16}
  - {name: a1, type: tanh}
  - {name: f2, type: fc, units: 8}
  - {name: a2, type: relu}
  - {name: f3, type: fc, units: 7}
loss: softmax_cross_entropy
train: {batch: 32, epochs: 1, optimizer: {type: sgd, lr: 0.1, momentum: 0.9}}
YAML
run 1 odd1 --net "$T/odd.yaml" --threads 1 --quiet; tap_result $? "7 classes on one process"
grid odd-tp2 odd1 2 --net "$T/odd.yaml" --threads 1 --quiet --parallel model
n=$(grep -c "layer 'f3' stays whole on every tensor rank" "$T/odd-tp2.txt")
[ "$n" -eq 1 ]; tap_result $? "7 classes on 2 ranks: the last layer stays whole, said once (said $n times)"

# ---------------------------------------------------------------- height
cat > "$T/height.yaml" <<'YAML'
input: {shape: [3, 18, 12], classes: 6}
data: {dataset: synthetic, train_samples: 640, test_samples: 64}
layers:
  - {name: c1, type: conv, filters: 8, kernel: 3, pad: 1, bias: false, split: height}
  - {name: bn1, type: batchnorm}
  - {name: r1, type: relu}
  - {name: c2, type: conv, filters: 8, kernel: 5, pad: 2}
  - {name: bn2, type: batchnorm}
  - {name: r2, type: relu}
  - {name: pool, type: maxpool, kernel: 2, stride: 2}
  - {name: f1, type: fc, units: 6}
loss: softmax_cross_entropy
train: {batch: 32, epochs: 1, optimizer: {type: sgd, lr: 0.05, momentum: 0.9}}
YAML
# Reference kernels: one process would run batch norm through oneDNN, which
# rounds otherwise than the reference kernel a band's batch norm needs
# (statistics summed over the group); measured 3e-5 apart after 20 steps,
# within 1.2e-6 with the reference kernels on both sides.
HEIGHT="--net $T/height.yaml --threads 1 --quiet --kernel all=reference"
expect_status 0 "dltrain check --grid tp=4 on the height network" -- $DLTRAIN check --net "$T/height.yaml" --grid tp=4
expect_output "^0 +c1 +0 +height, halo 1; input 0: rows sliced" "c1 is split by height with a halo of 1 row"
expect_output "^3 +c2 +0 +height, halo 2" "c2 keeps the bands with a halo of 2 rows"
run 1 height1 $HEIGHT; tap_result $? "height network on one process"
grid height-tp2 height1 2 $HEIGHT --parallel model
grid height-tp4 height1 4 $HEIGHT --parallel model
grid height-dp2-tp2-syncbn height1 4 $HEIGHT --grid dp=2,tp=2 --sync-bn
run 1 height1-chunks $HEIGHT --pipeline-chunks 2; tap_result $? "height network on one process, 2 chunks"
grid height-tp2-pp2 height1-chunks 4 $HEIGHT --grid tp=2,pp=2 --pipeline-chunks 2

# Without batch norm, the default kernels (the direct convolution with its
# ReLU fused, oneDNN's) run the bands: within 5.5e-7 of one process.
sed '/type: batchnorm/d' "$T/height.yaml" > "$T/height-nobn.yaml"
run 1 height-nobn1 --net "$T/height-nobn.yaml" --threads 1 --quiet
tap_result $? "height network without batch norm on one process, default kernels"
grid height-nobn-tp4 height-nobn1 4 --net "$T/height-nobn.yaml" --threads 1 --quiet --parallel model

# What cannot be split by height: exit 2 naming the layer and the rule.
sed 's/kernel: 5, pad: 2}/kernel: 5, pad: 2, stride: 2, split: height}/' "$T/height.yaml" > "$T/strided.yaml"
expect_status 2 "a stride-2 convolution with split: height" -- mpirun --oversubscribe -np 2 $DLTRAIN \
    --net "$T/strided.yaml" --threads 1 --quiet --parallel model
expect_output "layer 'c2' \(conv\), split height: only stride-1 'same' convolutions" "the message names the layer and the rule"

# ---------------------------------------------------------------- batch (samples)
cat > "$T/batch.yaml" <<'YAML'
input: {shape: [3, 12, 12], classes: 6}
data: {dataset: synthetic, train_samples: 640, test_samples: 64}
layers:
  - {name: c1, type: conv, filters: 8, kernel: 3, pad: 1, bias: false, split: batch}
  - {name: bn1, type: batchnorm}
  - {name: r1, type: relu}
  - {name: p1, type: maxpool, kernel: 2, stride: 2}
  - {name: c2, type: conv, filters: 8, kernel: 3, pad: 1, split: batch}
  - {name: r2, type: relu}
  - {name: f1, type: fc, units: 16}
  - {name: a1, type: relu}
  - {name: f2, type: fc, units: 6}
loss: softmax_cross_entropy
train: {batch: 32, epochs: 1, optimizer: {type: sgd, lr: 0.05, momentum: 0.9}}
YAML
# Reference kernels, as for the height network (batch norm on a share sums
# its statistics over the group through the reference kernel).
BATCH="--net $T/batch.yaml --threads 1 --quiet --kernel all=reference"
expect_status 0 "dltrain check --grid tp=2 on the batch network" -- $DLTRAIN check --net "$T/batch.yaml" --grid tp=2
expect_output "^0 +c1 +0 +batch share; input 0: batch sliced" "c1 runs on a share of the samples sliced from the batch"
expect_output "^6 +f1 +0 +outputs; input 0: batch gathered" "f1 (column-parallel) reads the shares gathered"
run 1 batch1 $BATCH; tap_result $? "batch network on one process"
grid batch-tp2 batch1 2 $BATCH --parallel model
grid batch-tp3-uneven batch1 3 $BATCH --parallel model
grid batch-dp2-tp2-syncbn batch1 4 $BATCH --grid dp=2,tp=2 --sync-bn
run 1 batch1-chunks $BATCH --pipeline-chunks 2; tap_result $? "batch network on one process, 2 chunks"
grid batch-tp2-pp2 batch1-chunks 4 $BATCH --grid tp=2,pp=2 --pipeline-chunks 2
sed '/type: batchnorm/d' "$T/batch.yaml" > "$T/batch-nobn.yaml"
run 1 batch-nobn1 --net "$T/batch-nobn.yaml" --threads 1 --quiet
tap_result $? "batch network without batch norm on one process, default kernels"
grid batch-nobn-tp3 batch-nobn1 3 --net "$T/batch-nobn.yaml" --threads 1 --quiet --parallel model

# A chunk that leaves a tensor rank without a sample, a batch-split loss: exit 2.
sed 's/batch: 32,/batch: 2,/' "$T/batch.yaml" > "$T/batch-small.yaml"
expect_status 2 "split: batch, 2 samples on 3 tensor ranks" -- mpirun --oversubscribe -np 3 $DLTRAIN \
    --net "$T/batch-small.yaml" --threads 1 --quiet --parallel model
expect_output "layer 'c1', split batch: a chunk of 2 samples cannot give each of the 3 tensor ranks a share" \
    "the message names the layer, the chunk and the tensor ranks"
sed 's/^loss: softmax_cross_entropy$/loss: {type: softmax_cross_entropy, split: batch}/' "$T/batch.yaml" \
    > "$T/batch-loss.yaml"
expect_status 2 "split: batch on the loss" -- mpirun --oversubscribe -np 2 $DLTRAIN \
    --net "$T/batch-loss.yaml" --threads 1 --quiet --parallel model
expect_output "layer 'loss' \(softmax_cross_entropy\), split batch: a loss reads the whole batch" \
    "the message names the loss and the rule"

# --trace names every kind of tensor-parallel step: the bands and halos of
# a height split and the shares of a batch split (each kind once had no
# name, and writing the trace read past the table of names).
for kind in height batch; do
    case $kind in
    height) want="tp allgather rows|tp halo rows" ;;
    batch) want="tp allgather samples|tp slice samples" ;;
    esac
    mpirun --oversubscribe -np 2 $DLTRAIN --net "$T/$kind.yaml" --threads 1 --quiet --parallel model --max-steps 3 \
        --trace "$T/$kind-trace.json" > "$T/$kind-trace.txt" 2>&1
    ok=$?
    for name in $(echo "$want" | tr ' |' '_ '); do
        grep -q "\"name\":\"$(echo "$name" | tr _ ' ')\"" "$T/$kind-trace.json" || ok=1
    done
    tap_result $ok "--trace of split: $kind on tp=2 is written and names its steps ($want)"
done
