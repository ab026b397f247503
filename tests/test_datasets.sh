#!/bin/sh
# test_datasets.sh: datasets as a user names them.  Dataset files found by
# name (datasets/NAME.yaml) and their errors; a small ResNet learns a
# generated image folder past chance; data-parallel training on an image
# folder equals serial training (each rank decodes only its slices); list
# files; CIFAR binaries (and a truncated one); prepare-imagenet on miniature
# tarballs; --max-steps reports the epoch the run ended in; --net NAME.yaml.
. "$top_srcdir/tests/tap.sh"
PY=/usr/bin/python3
if ! $PY -c "import PIL, numpy" 2>/dev/null || [ ! -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    echo "1..0 # SKIP python3-pil or dataset-fashion-mnist missing (tools/deps installs them)"; exit 0
fi
tap_plan 28
TINY="$top_srcdir/tests/nets/resnet-tiny.yaml"
D="$TMPDIR_TEST/folder"
$PY "$top_srcdir/tests/make_image_set.py" "$D" --per-class 50 --val-per-class 20 --bad >/dev/null

# Names.
expect_status 2 "an unknown dataset name exits with status 2" -- $DLTRAIN check --net "$TINY" --dataset nosuch
expect_output "dataset 'nosuch': no dataset file nosuch.yaml \(looked in .*datasets.*\) and no format of that name \(fashion-mnist, .*imagefolder, text, tokens, npy, csv\)" \
    "the message says where it looked and lists the formats"
expect_status 2 "--dataset imagenet with a 10-class network exits with status 2" -- \
    $DLTRAIN --net "$TINY" --dataset imagenet --data "$TMPDIR_TEST/nowhere" --max-steps 1
expect_output "imagenet train: the dataset has 1000 classes but the network only 10 outputs" \
    "imagenet.yaml is found by name and its class count checked against the network"
cat > "$TMPDIR_TEST/bad-ds.yaml" <<'YAML'
format: imagefolder
train: {crop: random-resized, scale: [0.9, 0.2]}
YAML
expect_status 2 "a dataset file with a reversed range exits with status 2" -- \
    $DLTRAIN check --net "$TINY" --dataset "$TMPDIR_TEST/bad-ds.yaml"
expect_output "bad-ds.yaml:2:8: dataset.train: scale and ratio are \[low, high\] ranges" "the message locates it"
cat > "$TMPDIR_TEST/bad-key.yaml" <<'YAML'
format: imagefolder
mean: [0.5, 0.5, 0.5]
stdev: [0.2, 0.2, 0.2]
YAML
expect_status 2 "an unknown key in a dataset file exits with status 2" -- \
    $DLTRAIN check --net "$TINY" --dataset "$TMPDIR_TEST/bad-key.yaml"
expect_output "bad-key.yaml:3:1: dataset: unknown key 'stdev'" "the message names the key"

# --net NAME.yaml, as the README writes it, finds the shipped network.
expect_status 0 "--net resnet18.yaml from another folder finds the shipped file" -- \
    sh -c "cd '$TMPDIR_TEST' && DLTRAIN_DATADIR='$top_srcdir' '$DLTRAIN' check --net resnet18.yaml --dataset imagenet --data '$D'"
expect_output "total: 11689512 trainable parameters" "ResNet-18"

# Learning on the generated folder (50 images per class, 4 unreadable files).
expect_status 0 "resnet-tiny trains on a generated image folder" -- \
    $DLTRAIN --net "$TINY" --data "$D" --epochs 5 --threads 2 --data-threads 2
acc=$(echo "$OUT" | sed -n 's/^final: test accuracy \([0-9.]*\)%.*/\1/p')
[ -n "$acc" ] && awk "BEGIN { exit !($acc > 25) }"; tap_result $? "it learns: test accuracy $acc% > 25% (chance: 10%)"
n=$(echo "$OUT" | grep -c "warning: imagefolder train: skipped: .*/bad-")
[ "$n" -eq 4 ]; tap_result $? "each of the 4 unreadable files is named once ($n)"
expect_output "4 unreadable samples skipped so far" "and counted"
expect_status 1 "--bad-samples fail stops at the first" -- \
    $DLTRAIN --net "$TINY" --data "$D" --epochs 1 --threads 2 --bad-samples fail
expect_output "bad-.*--bad-samples fail" "naming the file"

# --max-steps ends the run in its first epoch: the report says so.
expect_status 0 "a 2-step run" -- $DLTRAIN --net "$TINY" --data "$D" --max-steps 2 --limit-test 40
expect_output "^epoch 1/4 done" "reports epoch 1 of 4"
echo "$OUT" | grep -q "^epoch 4/4 done"; [ $? -ne 0 ]; tap_result $? "not epoch 4/4"

# List files: the same images through DIR/train.txt and DIR/val.txt.
L="$TMPDIR_TEST/list"
mkdir -p "$L"
for split in train val; do
    (cd "$D/$split" && i=0 && for c in *; do for f in "$c"/*; do echo "../folder/$split/$f $i"; done; i=$((i + 1)); done) > "$L/$split.txt"
done
expect_status 0 "list files train as the folder does" -- $DLTRAIN --net "$TINY" --data "$L" --max-steps 3 --limit-test 40 --seed 3
l1=$(echo "$OUT" | sed -n 's/^final: .*test loss \([0-9.]*\).*/\1/p')
$DLTRAIN --net "$TINY" --data "$D" --max-steps 3 --limit-test 40 --seed 3 > "$TMPDIR_TEST/f.txt" 2>&1
l2=$(sed -n 's/^final: .*test loss \([0-9.]*\).*/\1/p' "$TMPDIR_TEST/f.txt")
[ -n "$l1" ] && [ "$l1" = "$l2" ]; tap_result $? "same test loss ($l1 vs $l2)"

# Data-parallel training on the folder equals serial training.
if command -v mpirun >/dev/null; then
    cat > "$TMPDIR_TEST/nobn.yaml" <<'YAML'
input: {shape: [3, 32, 32], classes: 10}
data: {dataset: imagefolder}
layers:
  - {name: conv1, type: conv, filters: 8, kernel: 3, pad: 1}
  - {type: relu}
  - {type: maxpool, kernel: 2}
  - {name: fc, type: fc, units: 10}
loss: softmax_cross_entropy
train: {batch: 24, epochs: 1, optimizer: {type: sgd, lr: 0.05, momentum: 0.9}}
YAML
    BASE="--net $TMPDIR_TEST/nobn.yaml --data $D --max-steps 6 --limit-test 40 --threads 1 --data-threads 2"
    $DLTRAIN $BASE --dump-weights "$TMPDIR_TEST/w1.bin" > /dev/null 2>&1
    expect_status 0 "3 ranks train on the folder" -- \
        mpirun --oversubscribe -np 3 $DLTRAIN $BASE --dump-weights "$TMPDIR_TEST/w3.bin"
    $PY -c "
import numpy as np, sys
a, b = np.fromfile('$TMPDIR_TEST/w1.bin', np.float32), np.fromfile('$TMPDIR_TEST/w3.bin', np.float32)
d = np.abs(a - b).max() if a.size == b.size and a.size > 0 else 1
print('# max weight difference %.3g over %d weights' % (d, a.size)); sys.exit(int(d > 1e-5))"
    tap_result $? "3 ranks x 8 samples equal 1 rank x 24 after 6 steps (weights within 1e-5)"
else
    tap_result 0 "# SKIP mpirun missing"; tap_result 0 "# SKIP mpirun missing"
fi

# CIFAR binaries.
C="$TMPDIR_TEST/cifar"
mkdir -p "$C"
$PY - "$C" <<'PY'
import numpy as np, sys
rng = np.random.default_rng(0)
for name, n in [("data_batch_%d.bin" % i, 40) for i in range(1, 6)] + [("test_batch.bin", 30)]:
    rec = np.zeros((n, 3073), np.uint8)
    rec[:, 0] = rng.integers(0, 10, n)
    rec[:, 1:] = rng.integers(0, 256, (n, 3072))
    rec.tofile(sys.argv[1] + "/" + name)
PY
expect_status 0 "cifar10 binaries train" -- $DLTRAIN --net "$TINY" --dataset cifar10 --data "$C" --max-steps 2
expect_output "200 training samples, 30 test samples|200 train.*30 test" "with every record of the six files"
head -c 5000 "$C/data_batch_3.bin" > "$C/t" && mv "$C/t" "$C/data_batch_3.bin"
expect_status 1 "a truncated batch file is an error" -- $DLTRAIN --net "$TINY" --dataset cifar10 --data "$C" --max-steps 1
expect_output "data_batch_3.bin: 5000 bytes is not a whole number of 3073-byte records" "naming the file"

# prepare-imagenet on miniature archives.
I="$TMPDIR_TEST/inet"
mkdir -p "$I/src/n01440764" "$I/src/n01443537" "$I/val"
cp "$D/train/00-tshirt/00000.jpg" "$I/src/n01440764/n01440764_1.JPEG"
cp "$D/train/01-trouser/00000.jpg" "$I/src/n01443537/n01443537_7.JPEG"
(cd "$I/src" && tar -cf ../n01440764.tar -C n01440764 . && tar -cf ../n01443537.tar -C n01443537 .)
(cd "$I" && tar -cf train.tar n01440764.tar n01443537.tar)
cp "$D/val/00-tshirt/00000.jpg" "$I/val/ILSVRC2012_val_00000001.JPEG"
cp "$D/val/01-trouser/00000.jpg" "$I/val/ILSVRC2012_val_00000002.JPEG"
(cd "$I/val" && tar -cf ../val.tar .)
printf 'ILSVRC2012_val_00000001.JPEG n01443537\nILSVRC2012_val_00000002 n01440764\n' > "$I/labels.txt"
$top_srcdir/datasets/prepare-imagenet "$I/train.tar" "$I/val.tar" "$I/labels.txt" "$I/out" >/dev/null 2>&1
[ -f "$I/out/train/n01440764/n01440764_1.JPEG" ] && [ -f "$I/out/train/n01443537/n01443537_7.JPEG" ] &&
    [ -f "$I/out/val/n01443537/ILSVRC2012_val_00000001.JPEG" ] && [ -f "$I/out/val/n01440764/ILSVRC2012_val_00000002.JPEG" ]
tap_result $? "prepare-imagenet lays the tarballs out as train/WNID and val/WNID"
exit $((tap_failed > 0))
