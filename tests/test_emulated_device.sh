#!/bin/sh
# test_emulated_device.sh: training on a device without host memory, proven
# without a GPU.  --device emulated (backends/device_emulated.c) keeps every
# block of the executor and the optimizer behind mprotect, so host code that
# reads or writes them without the device's copies dies by SIGSEGV; its
# kernels are the CPU's, so a run on it must equal the CPU run bit for bit:
# the losses of every step, the test results, the checkpoint files (copied
# out through the device) and --dump-weights; a checkpoint resumes on it
# (copied in), from its own file and from the CPU's; a diverging run names
# the same first non-finite layer (numerics checks copied out); a bf16 run
# (its casts the device's) equals the CPU's bf16 run; and under
# mpirun, data parallelism on 2 ranks (gradient buckets staged through host
# buffers) equals the CPU's 2 ranks, and so do 2 tensor ranks (the loss's
# classes split) and 2 pipeline stages (communication steps staged through
# host mirrors).  The batch of each step is read and its copy queued
# while the step before it computes (the trace shows when).  A layer split
# by height or by samples over 2 tensor ranks (its slices, halos and
# gathers staged, its weight gradients summed in a host copy) equals the
# same on the CPU.  What it cannot run yet (strategies other than sync) is
# refused with status 2.
. "$top_srcdir/tests/tap.sh"
NET="$top_srcdir/nets/lenet5.yaml"
# 10 steps of 64 samples, a checkpoint after steps 5 and 10
B="--net $NET --limit-train 640 --limit-test 200 --epochs 1 --threads 1 --quiet --checkpoint-every 5"
tap_plan 35

losses() { # FILE [FIRST_GLOBAL_STEP]: the step losses and the epoch's train and test results
    /usr/bin/python3 -c '
import json, sys
first = int(sys.argv[2]) if len(sys.argv) > 2 else 0
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["event"] == "step" and r["global_step"] >= first:
        print(r["global_step"], repr(r["loss"]))
    elif r["event"] == "epoch":
        print("epoch", repr(r["train_loss"]), repr(r["test_loss"]), repr(r["test_accuracy"]))' "$@"
}

# one process: every step, the files written
expect_status 0 "a CPU run" -- $DLTRAIN $B --checkpoint-dir "$TMPDIR_TEST/cpu" --metrics "$TMPDIR_TEST/cpu.jsonl" \
    --dump-weights "$TMPDIR_TEST/cpu.bin"
expect_status 0 "the same run on the emulated device" -- $DLTRAIN $B --device emulated \
    --checkpoint-dir "$TMPDIR_TEST/emu" --metrics "$TMPDIR_TEST/emu.jsonl" --dump-weights "$TMPDIR_TEST/emu.bin"
n=$(losses "$TMPDIR_TEST/cpu.jsonl" | grep -c '^[0-9]')
[ "$n" -eq 10 ] && [ "$(losses "$TMPDIR_TEST/cpu.jsonl")" = "$(losses "$TMPDIR_TEST/emu.jsonl")" ]
tap_result $? "the losses of its $n steps and the test results equal the CPU run's, bit for bit"
for s in 5 10; do
    f=$(printf 'ckpt-%010d.safetensors' $s)
    [ -s "$TMPDIR_TEST/cpu/$f" ] && cmp -s "$TMPDIR_TEST/cpu/$f" "$TMPDIR_TEST/emu/$f"
    tap_result $? "its checkpoint after step $s is the CPU run's, byte for byte"
done
[ -s "$TMPDIR_TEST/cpu.bin" ] && cmp -s "$TMPDIR_TEST/cpu.bin" "$TMPDIR_TEST/emu.bin"
tap_result $? "--dump-weights writes the CPU run's final weights"

# bf16: the casts between dtypes and their gradients are the device's own
# (device.h's cast), checked by the emulated device as every copy is
expect_status 0 "--precision bf16 on the emulated device" -- $DLTRAIN $B --precision bf16 --device emulated \
    --metrics "$TMPDIR_TEST/bf16-emu.jsonl"
$DLTRAIN $B --precision bf16 --metrics "$TMPDIR_TEST/bf16-cpu.jsonl" > /dev/null 2>&1 &&
    [ "$(losses "$TMPDIR_TEST/bf16-cpu.jsonl")" = "$(losses "$TMPDIR_TEST/bf16-emu.jsonl")" ]
tap_result $? "  its losses and test results equal the CPU's bf16 run, bit for bit"

# resume: the newest checkpoint left is step 5's
for d in cpu emu; do
    mkdir -p "$TMPDIR_TEST/r-$d"
    cp "$TMPDIR_TEST/$d/ckpt-0000000005.safetensors" "$TMPDIR_TEST/r-$d/"
done
expect_status 0 "--resume on the emulated device from its own step-5 checkpoint" -- $DLTRAIN $B --device emulated \
    --checkpoint-dir "$TMPDIR_TEST/r-emu" --resume --metrics "$TMPDIR_TEST/r-emu.jsonl"
expect_output "resuming from .*ckpt-0*5\.safetensors: step 5" "it resumes after step 5"
[ "$(losses "$TMPDIR_TEST/cpu.jsonl" 6)" = "$(losses "$TMPDIR_TEST/r-emu.jsonl" 6)" ] \
    && [ "$(losses "$TMPDIR_TEST/r-emu.jsonl" 6 | grep -c '^[0-9]')" -eq 5 ]
tap_result $? "steps 6 to 10 and the test results equal the uninterrupted CPU run's"
cmp -s "$TMPDIR_TEST/cpu/ckpt-0000000010.safetensors" "$TMPDIR_TEST/r-emu/ckpt-0000000010.safetensors"
tap_result $? "the resumed run's step-10 checkpoint is the CPU run's"
expect_status 0 "--resume on the emulated device from the CPU run's step-5 checkpoint" -- $DLTRAIN $B \
    --device emulated --checkpoint-dir "$TMPDIR_TEST/r-cpu" --resume --metrics "$TMPDIR_TEST/r-cpu.jsonl"
cmp -s "$TMPDIR_TEST/cpu/ckpt-0000000010.safetensors" "$TMPDIR_TEST/r-cpu/ckpt-0000000010.safetensors"
tap_result $? "it ends with the CPU run's step-10 checkpoint"

# a diverging run: the first non-finite value found through copies
expect_status 1 "a diverging CPU run stops" -- $DLTRAIN $B --lr 1e6 --no-skip-nonfinite
cpu_msg=$(echo "$OUT" | grep 'first non-finite value')
expect_status 1 "the same run on the emulated device stops" -- $DLTRAIN $B --lr 1e6 --device emulated --no-skip-nonfinite
emu_msg=$(echo "$OUT" | grep 'first non-finite value')
echo "# $emu_msg"
[ -n "$cpu_msg" ] && [ "$cpu_msg" = "$emu_msg" ]
tap_result $? "with the CPU run's message (step, loss, first non-finite layer and value)"

# the input batch a step ahead: batch k+1 is read and its copy to the device
# queued before step k's kernels end (in the trace: a copy stamped step k
# that starts before step k's last layer ends; one copy per batch)
expect_status 0 "a traced run on the emulated device" -- $DLTRAIN $B --device emulated --trace "$TMPDIR_TEST/emu.json"
/usr/bin/python3 -c '
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
copies = sorted((e["args"]["step"], e["ts"]) for e in ev if e.get("name") == "batch copy to device")
layer_end = {}
for e in ev:
    if e.get("cat") == "layer":
        k = e["args"]["step"]
        layer_end[k] = max(layer_end.get(k, 0), e["ts"] + e["dur"])
N = max(layer_end)
per = [sum(1 for k, _ in copies if k == s) for s in range(1, N + 1)]
want = [2] + [1] * (N - 2) + [0]
print("# steps", N, "copies per step", per)
ahead = all(max(t for k, t in copies if k == s) < layer_end[s] for s in range(1, N))
sys.exit(0 if N == 10 and per == want and ahead else 1)' "$TMPDIR_TEST/emu.json"
tap_result $? "the copy of each next batch is queued before the step before it ends its kernels"

if ! command -v mpirun >/dev/null; then
    for i in $(seq 1 16); do echo "ok $((tap_n + 1)) # SKIP no mpirun"; tap_n=$((tap_n + 1)); done
    exit $((tap_failed > 0))
fi
MPI="mpirun --oversubscribe -np 2"
expect_status 0 "2 data-parallel CPU ranks" -- $MPI $DLTRAIN $B --checkpoint-dir "$TMPDIR_TEST/dp-cpu" \
    --metrics "$TMPDIR_TEST/dp-cpu.jsonl"
expect_status 0 "2 data-parallel ranks on the emulated device" -- $MPI $DLTRAIN $B --device emulated \
    --checkpoint-dir "$TMPDIR_TEST/dp-emu" --metrics "$TMPDIR_TEST/dp-emu.jsonl"
[ "$(losses "$TMPDIR_TEST/dp-cpu.jsonl" | grep -c '^[0-9]')" -eq 10 ] \
    && [ "$(losses "$TMPDIR_TEST/dp-cpu.jsonl")" = "$(losses "$TMPDIR_TEST/dp-emu.jsonl")" ]
tap_result $? "their losses and test results equal the CPU ranks', bit for bit"
cmp -s "$TMPDIR_TEST/dp-cpu/ckpt-0000000010.safetensors" "$TMPDIR_TEST/dp-emu/ckpt-0000000010.safetensors"
tap_result $? "and so does their final checkpoint"
expect_status 0 "2 ranks on the emulated device with compression and momentum correction" -- $MPI $DLTRAIN $B \
    --device emulated --compress topk:0.1 --momentum 0.9 --metrics "$TMPDIR_TEST/dp-emu-c.jsonl"
$MPI $DLTRAIN $B --compress topk:0.1 --momentum 0.9 --metrics "$TMPDIR_TEST/dp-cpu-c.jsonl" >/dev/null 2>&1
[ "$(losses "$TMPDIR_TEST/dp-cpu-c.jsonl")" = "$(losses "$TMPDIR_TEST/dp-emu-c.jsonl")" ]
tap_result $? "equal to the CPU ranks' too (staged weights for the correction)"
# what it does not run yet
expect_status 2 "--consistency local-sgd:2 on the emulated device: status 2" -- $MPI $DLTRAIN $B --device emulated \
    --consistency local-sgd:2
expect_output "local-sgd on --device emulated" "the message names the strategy and the device"
for grid in tp=2 pp=2; do
    $MPI $DLTRAIN $B --grid $grid --checkpoint-dir "$TMPDIR_TEST/$grid-cpu" --metrics "$TMPDIR_TEST/$grid-cpu.jsonl" \
        >/dev/null 2>&1
    expect_status 0 "--grid $grid on the emulated device" -- $MPI $DLTRAIN $B --grid $grid --device emulated \
        --checkpoint-dir "$TMPDIR_TEST/$grid-emu" --metrics "$TMPDIR_TEST/$grid-emu.jsonl"
    [ "$(losses "$TMPDIR_TEST/$grid-cpu.jsonl" | grep -c '^[0-9]')" -eq 10 ] \
        && [ "$(losses "$TMPDIR_TEST/$grid-cpu.jsonl")" = "$(losses "$TMPDIR_TEST/$grid-emu.jsonl")" ] \
        && cmp -s "$TMPDIR_TEST/$grid-cpu/ckpt-0000000010.safetensors" "$TMPDIR_TEST/$grid-emu/ckpt-0000000010.safetensors"
    tap_result $? "--grid $grid: the losses, test results and final checkpoint equal the CPU ranks'"
done
# conv1 split by height (halo exchange, bands gathered) or by samples
# (shares gathered), its weight gradients summed over the tensor group
for split in height batch; do
    sed "s/^\(  - {name: conv1, type: conv, filters: 6, kernel: 5, pad: 2\)}\$/\1, split: $split}/" \
        "$NET" > "$TMPDIR_TEST/$split.yaml"
    $MPI $DLTRAIN $B --net "$TMPDIR_TEST/$split.yaml" --grid tp=2 --checkpoint-dir "$TMPDIR_TEST/$split-cpu" \
        --metrics "$TMPDIR_TEST/$split-cpu.jsonl" >/dev/null 2>&1
    expect_status 0 "conv1 split by $split over 2 tensor ranks on the emulated device" -- $MPI $DLTRAIN $B \
        --net "$TMPDIR_TEST/$split.yaml" --grid tp=2 --device emulated --checkpoint-dir "$TMPDIR_TEST/$split-emu" \
        --metrics "$TMPDIR_TEST/$split-emu.jsonl"
    grep -q "split: $split" "$TMPDIR_TEST/$split.yaml" \
        && [ "$(losses "$TMPDIR_TEST/$split-cpu.jsonl" | grep -c '^[0-9]')" -eq 10 ] \
        && [ "$(losses "$TMPDIR_TEST/$split-cpu.jsonl")" = "$(losses "$TMPDIR_TEST/$split-emu.jsonl")" ] \
        && cmp -s "$TMPDIR_TEST/$split-cpu/ckpt-0000000010.safetensors" \
            "$TMPDIR_TEST/$split-emu/ckpt-0000000010.safetensors"
    tap_result $? "split by $split: the losses, test results and final checkpoint equal the CPU ranks'"
done
exit $((tap_failed > 0))
