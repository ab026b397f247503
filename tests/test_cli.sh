#!/bin/sh
# test_cli.sh: the dltrain command as a user runs it: help and version on
# every subcommand, exit status 2 with file:line:col for a bad network file or
# option, a short real training run on Fashion-MNIST that learns, identical
# losses for the same seed, and the JSON-lines metrics file; big batches
# whose last training or test batch is partial, and outputs that are FIFOs,
# devices, symbolic links or directories (issue 40).
. "$top_srcdir/tests/tap.sh"
tap_plan 55

for cmd in "" "train" "check" "plan"; do
    expect_status 0 "dltrain $cmd --help" -- $DLTRAIN $cmd --help
    expect_output "Usage: dltrain" "dltrain $cmd --help prints usage"
    expect_status 0 "dltrain $cmd --version" -- $DLTRAIN $cmd --version
done

cat > "$TMPDIR_TEST/bad.yaml" <<'YAML'
input: {shape: [1, 28, 28], classes: 10}
layers:
  - {name: conv1, type: conv, filters: 6, kernal: 5}
loss: softmax_cross_entropy
YAML
expect_status 2 "a bad network file exits with status 2" -- $DLTRAIN --net "$TMPDIR_TEST/bad.yaml"
expect_output "bad.yaml:3:43: layer 'conv1' \(conv\): unknown key 'kernal'" "the message names file:line:col, layer and key"
expect_status 2 "check of a bad network file exits with status 2" -- $DLTRAIN check --net "$TMPDIR_TEST/bad.yaml"
expect_status 2 "a bad option value exits with status 2" -- $DLTRAIN --net "$top_srcdir/nets/lenet5.yaml" --batch 0
expect_output "--batch 0: train.batch: expected an integer in \[1, [0-9]+\], found 0" "the message names the option, the key and the value"
# Every size option reads sizes the same way (core/parse.h): --bucket-bytes
# once refused the MiB units that --workspace-limit took.
expect_status 0 "--bucket-bytes 25MiB is a size like any other" -- \
    $DLTRAIN --net "$top_srcdir/nets/lenet5.yaml" --bucket-bytes 25MiB --max-steps 1 --limit-test 64 --quiet
expect_status 2 "a bad size exits with status 2" -- $DLTRAIN --net "$top_srcdir/nets/lenet5.yaml" --bucket-bytes 25MiBs
expect_output "^dltrain: --bucket-bytes: expected a size in bytes .*, found '25MiBs'" "the message names the option and the value"
expect_status 2 "a size that is not a whole number of bytes exits with status 2" -- \
    $DLTRAIN --net "$top_srcdir/nets/lenet5.yaml" --workspace-limit 0.1K
expect_output "^dltrain: --workspace-limit: expected a whole number of bytes, found '0.1K'" "the message names the option"
expect_status 1 "a missing dataset folder is a run-time error" -- \
    $DLTRAIN --net "$top_srcdir/nets/lenet5.yaml" --data "$TMPDIR_TEST/nowhere" --max-steps 1
expect_output "nowhere" "the message names the folder"

expect_status 0 "dltrain check lenet5" -- $DLTRAIN check --net "$top_srcdir/nets/lenet5.yaml"
expect_output "total: 61706 trainable parameters" "lenet5 has 61706 parameters"

# The default thread count: the process's CPUs, shared among the ranks a
# launcher says it started on this node unless they are bound to their own.
ncpu=$(nproc)
share=$((ncpu / 2)); [ "$share" -ge 1 ] || share=1
expect_status 0 "two unbound ranks on the node share its CPUs" -- \
    env OMPI_COMM_WORLD_LOCAL_SIZE=2 $DLTRAIN --net "$top_srcdir/nets/lenet5.yaml" --max-steps 1 --limit-test 64
expect_output ", $share threads?," "each gets $share of the $ncpu CPUs"
expect_status 0 "a rank bound to one CPU uses one thread" -- \
    env OMPI_COMM_WORLD_LOCAL_SIZE=2 taskset -c 0 $DLTRAIN --net "$top_srcdir/nets/lenet5.yaml" --max-steps 1 --limit-test 64
expect_output ", 1 thread," "its one CPU"

# A short real run: 4000 Fashion-MNIST images, one epoch, 1000 test images.
RUN="$DLTRAIN --net $top_srcdir/nets/lenet5.yaml --epochs 1 --limit-train 4000 --limit-test 1000 --threads 2 --log-every 10"
expect_status 0 "a short LeNet-5 run on Fashion-MNIST" -- $RUN --metrics "$TMPDIR_TEST/m.jsonl"
echo "$OUT" > "$TMPDIR_TEST/run1.txt"
acc=$(echo "$OUT" | sed -n 's/^final: test accuracy \([0-9.]*\)%.*/\1/p')
echo "# test accuracy after 4000 samples: $acc%"
[ -n "$acc" ] && awk "BEGIN { exit !($acc > 50) }"; tap_result $? "it learns: test accuracy above 50% (chance: 10%; got $acc%)"
/usr/bin/python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
steps = [l for l in lines if l["event"] == "step"]
epochs = [l for l in lines if l["event"] == "epoch"]
assert len(steps) == 63 and len(epochs) == 1, (len(steps), len(epochs))
assert steps[-1]["loss"] < steps[0]["loss"]
' "$TMPDIR_TEST/m.jsonl"; tap_result $? "the metrics file holds one JSON line per step and per epoch"
[ ! -e "$TMPDIR_TEST/m.jsonl.partial" ]; tap_result $? "the metrics file was renamed into place"

expect_status 0 "the same run again" -- $RUN
losses() { grep '^epoch .* step' "$1" | sed 's/.*loss \([0-9.]*\).*/\1/'; }
echo "$OUT" > "$TMPDIR_TEST/run2.txt"
[ -n "$(losses "$TMPDIR_TEST/run1.txt")" ] && \
    [ "$(losses "$TMPDIR_TEST/run1.txt")" = "$(losses "$TMPDIR_TEST/run2.txt")" ]
tap_result $? "the same seed gives the same loss sequence"
expect_status 0 "a run with another seed" -- $RUN --seed 2
echo "$OUT" > "$TMPDIR_TEST/run3.txt"
[ "$(losses "$TMPDIR_TEST/run1.txt")" != "$(losses "$TMPDIR_TEST/run3.txt")" ]
tap_result $? "another seed gives other losses"

# Issue 40: a big batch whose last training or test batch is smaller runs
# to the end and sees every sample.  The executor sizes each layer's saved
# memory for the whole batch; im2col convolution (conv=dnnl-gemm and
# conv=openblas, LeNet-5's conv2 by default on some CPUs) keeps the unfolded
# inputs of at most 279 of conv2's samples (16 MiB), and once kept all of a
# partial batch's but none of a whole one's ("state for 272 samples exceeds
# the plan for 512").  Last batches of 272 (the 10000 test images), 279 and
# 280 samples, the default kernels and openblas.  Stdout and the metrics
# file only: the epoch's samples are its seconds times its samples/s.
partial_batches() { # DESCRIPTION TRAIN TEST OPTIONS...
    desc=$1; train=$2; test=$3; shift 3
    $DLTRAIN --net "$top_srcdir/nets/lenet5.yaml" --epochs 1 --threads 2 "$@" --limit-train "$train" \
        --limit-test "$test" --metrics "$TMPDIR_TEST/p.jsonl" > "$TMPDIR_TEST/p.out" 2> "$TMPDIR_TEST/p.err"
    got=$?
    [ "$got" -eq 0 ] || { echo "# exit status $got"; sed 's/^/#   /' "$TMPDIR_TEST/p.err" | head -5; }
    [ "$got" -eq 0 ]; tap_result $? "$desc exits 0"
    seen=$(/usr/bin/python3 -c '
import json, sys
e = [json.loads(l) for l in open(sys.argv[1]) if "\"epoch\"" in l][-1]
print(round(e["seconds"] * e["samples_per_s"]))' "$TMPDIR_TEST/p.jsonl" 2>/dev/null)
    tested=$(sed -n 's/^final: test accuracy .* (\([0-9]*\) samples).*/\1/p' "$TMPDIR_TEST/p.out")
    echo "# $seen training samples seen, $tested tested"
    [ "$seen" = "$train" ] && [ "$tested" = "$test" ]
    tap_result $? "  it trains on all $train samples and tests all $test"
}
partial_batches "--batch 512 --limit-train 1024 (a last test batch of 272)" 1024 10000 --batch 512
partial_batches "--batch 512, last batches of 279 (training) and 280 (test)" 791 792 --batch 512
partial_batches "--batch 512, last batches of 280 (training) and 279 (test)" 792 791 --batch 512
partial_batches "--batch 512 --kernel conv=openblas, last batches of 279 and 280" 791 792 --batch 512 \
    --kernel conv=openblas
# Outputs that are not regular files (issue 40): a FIFO or a device is
# written through and stays what it was, a symbolic link is followed (its
# target written whole, the link kept), a directory is refused; a full device
# fails the run with status 1.  Without the mknod privilege the full device
# case is skipped: the system's /dev/full is never given (the old code, run
# as root, replaced it).
T="$TMPDIR_TEST"
SHORT="$DLTRAIN --net $top_srcdir/nets/lenet5.yaml --max-steps 2 --limit-test 64 --threads 1 --quiet"
mkfifo "$T/fifo"
cat "$T/fifo" > "$T/fifo.out" &
reader=$!
timeout 60 $SHORT --metrics "$T/fifo" > /dev/null 2> "$T/fifo.err"; st=$?
timeout 10 sh -c "while kill -0 $reader 2>/dev/null; do sleep 0.05; done"
kill $reader 2> /dev/null # a reader whose FIFO was replaced waits for ever
[ $st -eq 0 ] && [ "$(grep -c '"event":"step"' "$T/fifo.out")" -eq 2 ] && [ -p "$T/fifo" ] && \
    [ ! -e "$T/fifo.partial" ]
tap_result $? "--metrics FIFO: its reader gets the JSON lines, and it stays a FIFO (status $st)"
timeout 60 $SHORT --metrics /dev/stdout > "$T/stdout.txt" 2> /dev/null
[ $? -eq 0 ] && [ "$(grep -c '^{"event":"step"' "$T/stdout.txt")" -eq 2 ] && grep -q '^final: ' "$T/stdout.txt"
tap_result $? "--metrics /dev/stdout writes the JSON lines into stdout's file among the other lines"
echo old > "$T/weights.bin"
ln -s weights.bin "$T/link.bin"
ln -s sub/new.bin "$T/dangling.bin"
mkdir "$T/sub"
timeout 60 $SHORT --dump-weights "$T/link.bin" > /dev/null && timeout 60 $SHORT --dump-weights "$T/dangling.bin" > /dev/null
[ $? -eq 0 ] && [ -L "$T/link.bin" ] && [ -L "$T/dangling.bin" ] && [ "$(wc -c < "$T/weights.bin")" -eq 246824 ] && \
    cmp -s "$T/weights.bin" "$T/sub/new.bin"
tap_result $? "--dump-weights through a symbolic link (and a dangling one) writes the file it names and keeps the link"
if mknod "$T/full" c 1 7 2> /dev/null; then
    timeout 60 $SHORT --metrics "$T/full" > /dev/null 2> "$T/full.err"; st=$?
    [ $st -eq 1 ] && grep -q "full: cannot write: No space left on device" "$T/full.err" && [ -c "$T/full" ]
    tap_result $? "--metrics on a full device: status 1 (got $st), a message naming it, and it stays a device"
else
    tap_result 0 "# SKIP mknod is not permitted here"
fi
mkdir "$T/dir"
timeout 60 $SHORT --metrics "$T/dir" > /dev/null 2> "$T/dir.err"; st=$?
[ $st -eq 1 ] && grep -q "dir: cannot write it: it is a directory, not a file" "$T/dir.err" && [ -d "$T/dir" ]
tap_result $? "--metrics on a directory: status 1 (got $st) and a message saying what it is"
mkfifo "$T/trace"
cat "$T/trace" > "$T/trace.out" &
reader=$!
timeout 60 $SHORT --trace "$T/trace" > /dev/null 2>&1; st=$?
timeout 10 sh -c "while kill -0 $reader 2>/dev/null; do sleep 0.05; done"
kill $reader 2> /dev/null # a reader whose FIFO was replaced waits for ever
[ $st -eq 0 ] && grep -q '"traceEvents"' "$T/trace.out" && [ -p "$T/trace" ]
tap_result $? "--trace FIFO: checked at the start without opening it, written at the end (status $st)"

# Inputs that are not regular files: a FIFO given to --init-from or --resume
# is refused at once (status 1, as a device is), never waited on (where a
# blocking open ignored SIGINT and SIGTERM); a symbolic link to a checkpoint
# resumes.
mkfifo "$T/in.fifo"
for opt in --init-from --resume; do
    timeout -k 5 20 $SHORT $opt "$T/in.fifo" > /dev/null 2> "$T/in.err"; st=$?
    [ $st -eq 1 ] && grep -q "in.fifo: not a regular file" "$T/in.err"
    tap_result $? "$opt FIFO: refused at once with status 1 (got $st) and a message naming it"
done
timeout 60 $SHORT --checkpoint-dir "$T/ck" --checkpoint-every 2 > /dev/null 2>&1
ln -s "$(ls "$T"/ck/*.safetensors | tail -1)" "$T/ck.link"
timeout 60 $SHORT --max-steps 3 --resume "$T/ck.link" > "$T/resumed.txt" 2> /dev/null
[ $? -eq 0 ] && grep -q "after 3 steps" "$T/resumed.txt"
tap_result $? "--resume through a symbolic link to a checkpoint"
