#!/bin/sh
# test_tied.sh: weight tying (`share: {PARAM: LAYER}`, issue 27), a
# language model whose output layer is the token embedding's matrix, on real
# text (tests/text_corpus.sh): check counts the tied matrix once and says
# so; the checkpoint holds it once, under the embedding's name, and a run
# resumed from it matches the uninterrupted one; 2 data-parallel ranks with
# one gradient bucket per layer (the embedding's bucket must wait for the
# head's share of its gradient) train as one process, and so do 2 pipeline
# stages with two tied layers in one of them, and 2 stages cutting between
# the tied layers (a copy on the head's rank, its gradient summed with the
# embedding's), which dltrain plan ranks among the layouts that run; every
# malformed share is refused, located.  The gradient itself is checked
# against finite differences in test_exec and against PyTorch's tied model
# in test_torch.sh (bigram_tied).
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
. "$top_srcdir/tests/grid_runs.sh"
T="$TMPDIR_TEST"
tap_plan 31
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
TEXT="$top_builddir/tests/text-corpus"

# vocabulary 256, width 24: the embedding is [256, 24], the head's weight
# [256 units, 24 inputs] the same matrix
cat > "$T/tied.yaml" <<'YAML'
name: tied
input: {shape: [32], dtype: i32, classes: 256}
data: {dataset: text}
layers:
  - {name: wte, type: embedding, vocab: 256, dim: 24}
  - {name: fc1, type: fc, units: 24}
  - {name: act, type: relu}
  - {name: head, type: fc, units: 256, share: {weight: wte}}
loss: softmax_cross_entropy
train: {batch: 16, seed: 3, optimizer: {type: adam, lr: 0.01}}
YAML
TIED="--net $T/tied.yaml --data $TEXT --threads 1"

expect_status 0 "check a network whose head shares the embedding's weight" -- $DLTRAIN check $TIED
# wte 256*24, fc1 24*24 + 24, head: its bias only
expect_output "^total: $((256 * 24 + 24 * 24 + 24 + 256)) trainable parameters" "the tied matrix is counted once"
expect_output "^3 +head +fc .* 256 " "the head's own parameters are its bias"
expect_output "^tied: head.weight is wte.weight \\(counted once\\)" "check says which parameter is whose"

expect_status 0 "dltrain help layers" -- $DLTRAIN help layers
expect_output "^  share    weight tying, \\{PARAMETER: LAYER\\}" "  documents the share key"

# checkpoints: the matrix once; resuming continues the same run
expect_status 0 "20 steps with a checkpoint at step 10" -- \
    $DLTRAIN $TIED --max-steps 20 --limit-test 64 --checkpoint-dir "$T/ck" --checkpoint-every 10 \
    --dump-weights "$T/whole.bin"
/usr/bin/python3 - "$T/ck/ckpt-0000000010.safetensors" <<'PY'
import json, struct, sys
f = open(sys.argv[1], "rb")
names = set(json.loads(f.read(struct.unpack("<Q", f.read(8))[0])))
want = {"wte.weight", "fc1.weight", "fc1.bias", "head.bias"}
print("# tensors: %s" % " ".join(sorted(n for n in names if not n.startswith(("optim.", "rng.", "__")))))
sys.exit(0 if want <= names and "head.weight" not in names and "optim.head.weight.exp_avg" not in names else 1)
PY
tap_result $? "the checkpoint holds wte.weight and no head.weight (nor its optimizer state)"
rm -f "$T/ck/ckpt-0000000020.safetensors"
expect_status 0 "resume from step 10" -- \
    $DLTRAIN $TIED --max-steps 20 --limit-test 64 --checkpoint-dir "$T/ck" --resume --dump-weights "$T/resumed.bin"
cmp -s "$T/whole.bin" "$T/resumed.bin"
tap_result $? "the resumed run ends with the uninterrupted run's weights, bit for bit"
/usr/bin/python3 -c "
import os, sys
sys.exit(0 if os.path.getsize('$T/whole.bin') == 4 * ($((256 * 24 + 24 * 24 + 24 + 256))) else 1)"
tap_result $? "--dump-weights writes every stored weight once"

# data parallelism, gradient buckets of one layer each
if command -v mpirun >/dev/null 2>&1; then
    run 1 tied1 $TIED --max-steps 30 --limit-test 64 --bucket-bytes 1K &&
        grid tied-dp2 tied1 2 $TIED --max-steps 30 --limit-test 64 --bucket-bytes 1K
    # ALBERT's sharing: two layers of one [64, 64] weight, both in pipeline stage 1
    cat > "$T/albert.yaml" <<'YAML'
input: {shape: [1, 12, 12], classes: 10}
data: {dataset: synthetic, train_samples: 960, test_samples: 64}
layers:
  - {name: fc1, type: fc, units: 64}
  - {name: a1, type: relu}
  - {name: fc2, type: fc, units: 64}
  - {name: a2, type: tanh}
  - {name: fc3, type: fc, units: 64, share: {weight: fc2}}
  - {name: a3, type: tanh}
  - {name: head, type: fc, units: 10}
loss: softmax_cross_entropy
train: {batch: 32, optimizer: {type: sgd, lr: 0.05, momentum: 0.9}}
YAML
    run 1 albert1 --net "$T/albert.yaml" --threads 1 --max-steps 30 &&
        grid albert-pp2 albert1 2 --net "$T/albert.yaml" --threads 1 --max-steps 30 --grid pp=2 --set "parallel.stages=[a1]"
    # a pipeline cut between the tied layers: the head's rank holds a copy (train/tied.c)
    grid tied-pp2 tied1 2 $TIED --max-steps 30 --limit-test 64 --grid pp=2
    expect_status 0 "dltrain plan on 2 ranks" -- $DLTRAIN plan $TIED --ranks 2
    expect_output "^[0-9]+ +dp=1,tp=1,pp=2 " "  ranks the pipeline among the layouts that run"
    expect_output "^1 +dp=2,tp=1,pp=1 " "  and data parallelism first"
else
    for i in 1 2 3 4 5 6; do echo "ok - # SKIP mpirun not found"; done
fi

# malformed shares, each located at its entry
bad() { # bad NAME LAYER LINE PATTERN DESCRIPTION: the tied network with layer LAYER's line replaced by LINE
    sed "s|^  - {name: $2,.*|$3|" "$T/tied.yaml" > "$T/$1.yaml"
    expect_status 2 "$5" -- $DLTRAIN check --net "$T/$1.yaml" --data "$TEXT"
    expect_output "$4" "  located, saying why"
}
bad nolayer head "  - {name: head, type: fc, units: 256, share: {weight: wtee}}" \
    "nolayer.yaml:8:56: layer 'head' \\(fc\\): share: 'wtee' is not the name of any layer" "a share of no layer"
bad noparam head "  - {name: head, type: fc, units: 256, share: {wieght: wte}}" \
    "noparam.yaml:8:56: layer 'head' \\(fc\\): share: it has no parameter 'wieght' \\(its parameters: weight, bias\\)" \
    "a parameter the layer does not have"
bad dims head "  - {name: head, type: fc, units: 128, share: {weight: wte}}" \
    "dims.yaml:8:56: layer 'head' \\(fc\\): share: its weight is \\[128, 24\\] but layer 'wte''s is \\[256, 24\\]" \
    "a matrix of other dims"
bad self head "  - {name: head, type: fc, units: 256, share: {weight: head}}" \
    "self.yaml:8:56: layer 'head' \\(fc\\): share: a layer cannot share its own parameter" "a layer sharing with itself"
bad later wte "  - {name: wte, type: embedding, vocab: 256, dim: 24, share: {weight: head}}" \
    "later.yaml:5:71: layer 'wte' \\(embedding\\): share: layer 'head' runs after it; the later of two layers declares share:" \
    "the earlier layer sharing the later one's"
bad scalar head "  - {name: head, type: fc, units: 256, share: wte}" \
    "scalar.yaml:8:47: layer 'head', key 'share': expected a mapping \\{PARAMETER: LAYER\\}" "a share that is not a mapping"
# statistics are not weights
cat > "$T/stats.yaml" <<'YAML'
input: {shape: [2, 4, 4], classes: 2}
layers:
  - {name: bn1, type: batchnorm}
  - {name: bn2, type: batchnorm, share: {running_mean: bn1}}
  - {name: fc, type: fc, units: 2}
loss: softmax_cross_entropy
YAML
expect_status 2 "batch-norm statistics shared" -- $DLTRAIN check --net "$T/stats.yaml"
expect_output "stats.yaml:4:56: layer 'bn2' \\(batchnorm\\): share: 'running_mean' is statistics, not a weight" \
    "  located, saying why"
[ $tap_failed -eq 0 ]
