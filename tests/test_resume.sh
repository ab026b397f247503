#!/bin/sh
# test_resume.sh: checkpoints as a user meets them.  A run stopped by SIGUSR1
# or SIGTERM writes a checkpoint and exits with status 75; --resume continues
# it bit-identically (the same losses as an uninterrupted run); a 4-rank
# data-parallel run resumes on 2 ranks; a diverging run stops with a message
# naming the first non-finite layer and writes no checkpoint for that step,
# and one whose last update leaves a test loss of NaN fails too (status 1);
# a checkpoint whose metadata was tampered with is refused, naming the key,
# and weights holding a NaN (--resume, --init-from) naming the tensor.
. "$top_srcdir/tests/tap.sh"
NET="$top_srcdir/nets/lenet5.yaml"
B="--net $NET --limit-train 6400 --limit-test 500 --epochs 2 --threads 1 --quiet"
D="$TMPDIR_TEST/ckpt"
tap_plan 29

losses_from() { # FILE FIRST_GLOBAL_STEP: losses of the steps from FIRST on
    /usr/bin/python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["event"] == "step" and r["global_step"] >= int(sys.argv[2]):
        print(repr(r["loss"]))' "$1" "$2"
}

expect_status 0 "an uninterrupted run" -- $DLTRAIN $B --metrics "$TMPDIR_TEST/a.jsonl"

$DLTRAIN $B --checkpoint-dir "$D" --checkpoint-every 30 --keep 2 --metrics "$TMPDIR_TEST/b.jsonl" \
    --debug-hold-at-step 70 > "$TMPDIR_TEST/b.txt" 2>&1 &
pid=$!
stop_after "$TMPDIR_TEST/b.jsonl" 70 USR1 $pid
wait $pid; st=$?
[ $st -eq 75 ]; tap_result $? "SIGUSR1: the run writes a checkpoint and exits with status 75 (got $st)"
grep -q "stopped by a signal after step 71: checkpoint" "$TMPDIR_TEST/b.txt"; tap_result $? "it stops after the step the signal arrived in and says where the checkpoint is"
n=$(ls "$D" | grep -c '^ckpt-.*\.safetensors$')
[ "$n" -eq 2 ]; tap_result $? "--keep 2 leaves two checkpoints ($n)"
last=$(ls "$D" | sort | tail -1 | sed 's/ckpt-0*\([0-9]*\)\.safetensors/\1/')
echo "# stopped after step $last"

expect_status 0 "--resume continues from the newest checkpoint" -- \
    $DLTRAIN $B --checkpoint-dir "$D" --resume --metrics "$TMPDIR_TEST/c.jsonl"
expect_output "resuming from .*ckpt-0*$last\.safetensors: step $last" "it names the checkpoint and the step"
[ -n "$last" ] && [ "$(losses_from "$TMPDIR_TEST/a.jsonl" $((last + 1)))" = "$(losses_from "$TMPDIR_TEST/c.jsonl" $((last + 1)))" ] \
    && [ -n "$(losses_from "$TMPDIR_TEST/c.jsonl" $((last + 1)))" ]
tap_result $? "the resumed losses equal the uninterrupted run's, bit for bit"

rm -rf "$D"
$DLTRAIN $B --checkpoint-dir "$D" --metrics "$TMPDIR_TEST/t.jsonl" --debug-hold-at-step 20 > "$TMPDIR_TEST/t.txt" 2>&1 &
pid=$!
stop_after "$TMPDIR_TEST/t.jsonl" 20 TERM $pid
wait $pid; st=$?
[ $st -eq 75 ] && ls "$D" | grep -q '^ckpt-0*21\.safetensors$'; tap_result $? "SIGTERM also checkpoints (step 21) and exits with 75 (got $st)"

# Data parallel: 4 ranks stopped, resumed on 2 ranks; compared with 1 rank.
if command -v mpirun >/dev/null; then
    rm -rf "$D"
    # 50 steps: long runs drift apart chaotically through fp32 reassociation.
    B="--net $NET --limit-train 3200 --limit-test 500 --epochs 1 --threads 1 --quiet"
    $DLTRAIN $B --metrics "$TMPDIR_TEST/a.jsonl" > /dev/null 2>&1
    mpirun --oversubscribe -np 4 $DLTRAIN $B --checkpoint-dir "$D" --metrics "$TMPDIR_TEST/p.jsonl" \
        --debug-hold-at-step 20 > "$TMPDIR_TEST/p.txt" 2>&1 &
    pid=$!
    stop_after "$TMPDIR_TEST/p.jsonl" 20 USR1 $pid
    wait $pid; st=$?
    last=$(ls "$D" | sort | tail -1 | sed 's/ckpt-0*\([0-9]*\)\.safetensors/\1/')
    [ $st -eq 75 ] && [ "$last" = 21 ]
    tap_result $? "4 ranks: SIGUSR1 to mpirun stops every rank after a checkpoint (status $st, step $last)"
    expect_status 0 "the 4-rank checkpoint resumes on 2 ranks" -- mpirun --oversubscribe -np 2 $DLTRAIN $B \
        --checkpoint-dir "$D" --resume --metrics "$TMPDIR_TEST/q.jsonl"
    expect_output "written by 4 ranks" "the message says which layout wrote it"
    /usr/bin/python3 - "$TMPDIR_TEST/a.jsonl" "$TMPDIR_TEST/q.jsonl" "$last" <<'PY'
import json, sys
a, q = ([json.loads(l) for l in open(f) if '"step"' in l] for f in sys.argv[1:3])
first = int(sys.argv[3]) + 1
a = {r["global_step"]: r["loss"] for r in a}
q = [r for r in q if r["global_step"] >= first]
worst = max(abs(r["loss"] - a[r["global_step"]]) / abs(a[r["global_step"]]) for r in q)
print("# 4 -> 2 ranks vs 1 rank: %d steps, max relative loss difference %.3g" % (len(q), worst))
sys.exit(0 if q and worst <= 1e-4 else 1)
PY
    tap_result $? "4 -> 2 ranks continues the same training as 1 rank (within 1e-4)"
else
    for i in 1 2 3 4; do echo "ok $((tap_n + 1)) # SKIP no mpirun"; tap_n=$((tap_n + 1)); done
fi

# A diverging run without the step guard: the message names the step and
# the first non-finite layer (test_step_guard.sh: with it).
rm -rf "$D"
expect_status 1 "a run whose loss becomes NaN stops (--no-skip-nonfinite)" -- $DLTRAIN $B --lr 1e6 \
    --checkpoint-dir "$D" --checkpoint-every 1 --no-skip-nonfinite
expect_output "step [0-9]+: the loss is (nan|inf|-nan)" "the message names the step and the loss"
expect_output "layer '[a-z0-9]+'" "the message names the first non-finite layer"
nan_step=$(echo "$OUT" | sed -n 's/.*step \([0-9]*\): the loss is.*/\1/p' | head -1)
newest=$(ls "$D" 2>/dev/null | sort | tail -1 | sed 's/ckpt-0*\([0-9]*\)\.safetensors/\1/')
[ -n "$nan_step" ] && { [ -z "$newest" ] || [ "$newest" -lt "$nan_step" ]; }
tap_result $? "no checkpoint is written for the diverged step (newest ${newest:-none}, NaN at $nan_step)"

# Two steps at --lr 1e6: both training losses are finite, the weights after
# the last update are finite but so large that the evaluation overflows.
rm -f "$TMPDIR_TEST/w.bin"
$DLTRAIN --net "$NET" --limit-train 128 --limit-test 64 --epochs 1 --threads 1 --lr 1e6 \
    --dump-weights "$TMPDIR_TEST/w.bin" > "$TMPDIR_TEST/nan.out" 2> "$TMPDIR_TEST/nan.err"; st=$?
[ $st -eq 1 ] || sed "s/^/# /" "$TMPDIR_TEST/nan.out" "$TMPDIR_TEST/nan.err"
[ $st -eq 1 ]; tap_result $? "a run whose test loss is NaN exits with status 1 (got $st)"
grep -q "the test loss is -*nan" "$TMPDIR_TEST/nan.err"; tap_result $? "stderr says the test loss is not finite"
! grep -q "test loss" "$TMPDIR_TEST/nan.out" && [ ! -e "$TMPDIR_TEST/w.bin" ]
tap_result $? "no test loss is reported and no --dump-weights file is written"

# Tampered metadata (the data and its checksum untouched): each value is
# checked against what it can be, before anything is loaded.
rm -rf "$D"
expect_status 0 "a short run writes checkpoints" -- $DLTRAIN --net "$NET" --limit-train 128 --limit-test 64 \
    --epochs 1 --threads 1 --quiet --checkpoint-dir "$D" --checkpoint-every 1
tamper() { # IN OUT KEY VALUE: a copy of IN with metadata KEY set to VALUE
    /usr/bin/python3 - "$@" <<'PY'
import json, struct, sys
src, dst, key, value = sys.argv[1:5]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["__metadata__"][key] = value
t = json.dumps(h, separators=(",", ":")).encode()
t += b" " * (-len(t) % 8)
open(dst, "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])
PY
}
C="$D/ckpt-0000000001.safetensors"
for kv in "epoch_correct 1000000000000 expected 0..64 (epoch_seen 64 x 1 label per sample), found 1000000000000" \
          "epoch_seen 1000 expected 0..128 (the samples of an epoch of this run's data), found 1000" \
          "dp 3 expected 0..1 (at most world_size), found 3"; do
    set -- $kv
    key=$1 value=$2; shift 2
    tamper "$C" "$TMPDIR_TEST/t.safetensors" "$key" "$value"
    $DLTRAIN --net "$NET" --limit-train 128 --limit-test 64 --epochs 1 --threads 1 --quiet \
        --resume "$TMPDIR_TEST/t.safetensors" > /dev/null 2> "$TMPDIR_TEST/t.err"; st=$?
    [ $st -eq 1 ] || sed "s/^/# /" "$TMPDIR_TEST/t.err"
    [ $st -eq 1 ] && grep -qF "t.safetensors: metadata '$key': $*" "$TMPDIR_TEST/t.err"
    tap_result $? "metadata '$key' of $value: refused with status 1 (got $st), naming the file, the key and the range"
done
tamper "$C" "$TMPDIR_TEST/t.safetensors" epoch_correct 0
expect_status 0 "a value within its range still resumes" -- $DLTRAIN --net "$NET" --limit-train 128 --limit-test 64 \
    --epochs 1 --threads 1 --quiet --resume "$TMPDIR_TEST/t.safetensors"

# A NaN in the weights (the checksum made to match): refused on loading,
# naming the file, the tensor and the element, with the status of a damaged file.
poison() { # IN OUT TENSOR INDEX: a copy of IN with element INDEX of the F32 TENSOR a NaN
    /usr/bin/python3 - "$@" <<'PY'
import json, struct, sys, zlib
src, dst, name, k = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
b = bytearray(open(src, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
at = 8 + n + h[name]["data_offsets"][0] + 4 * k
b[at:at + 4] = struct.pack("<f", float("nan"))
h["__metadata__"]["dltrain.data_crc32"] = "crc32:%08x" % zlib.crc32(bytes(b[8 + n:]))
t = json.dumps(h, separators=(",", ":")).encode()
t += b" " * (-len(t) % 8)
open(dst, "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])
PY
}
S="--net $NET --limit-train 128 --limit-test 64 --epochs 1 --threads 1 --quiet"
poison "$C" "$TMPDIR_TEST/nan.safetensors" conv2.weight 7
$DLTRAIN $S --resume "$TMPDIR_TEST/nan.safetensors" > /dev/null 2> "$TMPDIR_TEST/n.err"; st=$?
[ $st -eq 1 ] || sed "s/^/# /" "$TMPDIR_TEST/n.err"
[ $st -eq 1 ]; tap_result $? "--resume of a checkpoint with a NaN weight: status 1 (got $st)"
grep -qF "nan.safetensors: tensor 'conv2.weight': element 7 is nan" "$TMPDIR_TEST/n.err"
tap_result $? "  the message names the file, the tensor and the element"
expect_status 0 "dltrain export writes the checkpoint's weights" -- \
    $DLTRAIN export --net "$NET" --checkpoint "$C" -o "$TMPDIR_TEST/w.safetensors"
poison "$TMPDIR_TEST/w.safetensors" "$TMPDIR_TEST/wnan.safetensors" transformer.fc2.bias 3
$DLTRAIN $S --init-from "$TMPDIR_TEST/wnan.safetensors" > /dev/null 2> "$TMPDIR_TEST/n.err"; st=$?
[ $st -eq 1 ] || sed "s/^/# /" "$TMPDIR_TEST/n.err"
[ $st -eq 1 ]; tap_result $? "--init-from weights with a NaN: status 1 (got $st)"
grep -qF "wnan.safetensors: tensor 'transformer.fc2.bias': element 3 is nan" "$TMPDIR_TEST/n.err"
tap_result $? "  the message names the file, the tensor and the element"
