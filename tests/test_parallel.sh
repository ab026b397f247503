#!/bin/sh
# test_parallel.sh: data-parallel training under mpirun with real processes
# and real Fashion-MNIST.  Synchronous training on 4 ranks must equal 1 rank
# with the same global batch (every allreduce algorithm, small buckets,
# with and without overlap), and so must 3 and 6 ranks (uneven slices of the
# batch: 22+21+21 and 11x4+10x2), with and without overlap; the parameter
# server must respect the SSP
# staleness bound when a rank is slowed; a stalled or killed rank must end the
# whole job with a message that names it, leaving no process behind.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/rank_faults.sh"
skip_without_mpirun
MPI="mpirun --oversubscribe -np 4"
NET="$top_srcdir/nets/lenet5.yaml"
BASE="--net $NET --limit-train 3200 --limit-test 500 --epochs 1 --threads 1 --quiet"
tap_plan 47

# compare M1 W1 M2 W2: per-step losses within 1e-5 relative, weights within 1e-5.
compare() {
    /usr/bin/python3 - "$@" <<'PY'
import json, sys
import numpy as np
m1, w1, m2, w2 = sys.argv[1:5]
a = np.array([json.loads(l)["loss"] for l in open(m1) if '"step"' in l])
b = np.array([json.loads(l)["loss"] for l in open(m2) if '"step"' in l])
assert len(a) == 50 and len(b) == 50, (len(a), len(b))
rel = np.max(np.abs(a - b) / np.abs(a))
x, y = np.fromfile(w1, dtype=np.float32), np.fromfile(w2, dtype=np.float32)
assert x.size == y.size == 61706, (x.size, y.size)
wd = np.max(np.abs(x - y))
print("# max relative loss difference %.3g over 50 steps, max weight difference %.3g" % (rel, wd))
sys.exit(0 if rel <= 1e-5 and wd <= 1e-5 else 1)
PY
}

expect_status 0 "serial reference run (batch 64, 50 steps)" -- \
    $DLTRAIN $BASE --metrics "$TMPDIR_TEST/m1.jsonl" --dump-weights "$TMPDIR_TEST/w1.bin"
for algo in auto ring rabenseifner recursive_doubling tree ps native; do
    expect_status 0 "4 ranks, sync, --allreduce $algo" -- $MPI $DLTRAIN $BASE --allreduce $algo \
        --metrics "$TMPDIR_TEST/m4.jsonl" --dump-weights "$TMPDIR_TEST/w4.bin"
    compare "$TMPDIR_TEST/m1.jsonl" "$TMPDIR_TEST/w1.bin" "$TMPDIR_TEST/m4.jsonl" "$TMPDIR_TEST/w4.bin"
    tap_result $? "4 ranks x batch 16 with $algo equal 1 rank x batch 64 (losses and weights within 1e-5)"
done
expect_status 0 "4 ranks, 16 KiB buckets overlapping backward" -- $MPI $DLTRAIN $BASE --bucket-bytes 16K \
    --allreduce ring --metrics "$TMPDIR_TEST/m4.jsonl" --dump-weights "$TMPDIR_TEST/w4.bin"
compare "$TMPDIR_TEST/m1.jsonl" "$TMPDIR_TEST/w1.bin" "$TMPDIR_TEST/m4.jsonl" "$TMPDIR_TEST/w4.bin"
tap_result $? "many small buckets sent during backward give the same training"

expect_status 0 "4 ranks, allreduce after backward (--no-overlap)" -- $MPI $DLTRAIN $BASE --no-overlap \
    --bucket-bytes 64K --allreduce ring --metrics "$TMPDIR_TEST/m4.jsonl" --dump-weights "$TMPDIR_TEST/w4.bin"
compare "$TMPDIR_TEST/m1.jsonl" "$TMPDIR_TEST/w1.bin" "$TMPDIR_TEST/m4.jsonl" "$TMPDIR_TEST/w4.bin"
tap_result $? "--no-overlap gives the same training"

# Rank counts that are not powers of two: each rank's slice of a batch of
# 64 is uneven, so its gradient's share of the sum is too.
for run in "3 rabenseifner" "3 recursive_doubling --no-overlap" "6 ring" "6 tree --no-overlap"; do
    set -- $run
    expect_status 0 "$1 ranks, --allreduce $2${3:+ $3}" -- mpirun --oversubscribe -np $1 $DLTRAIN $BASE --allreduce $2 $3 \
        --bucket-bytes 64K --metrics "$TMPDIR_TEST/mp.jsonl" --dump-weights "$TMPDIR_TEST/wp.bin"
    compare "$TMPDIR_TEST/m1.jsonl" "$TMPDIR_TEST/w1.bin" "$TMPDIR_TEST/mp.jsonl" "$TMPDIR_TEST/wp.bin"
    tap_result $? "$1 ranks with $2 ${3:-overlapping backward} equal 1 rank x batch 64 (within 1e-5)"
done

# Synchronised batch normalisation: statistics over the global batch.
cat > "$TMPDIR_TEST/bn.yaml" <<'YAML'
input: {shape: [1, 28, 28], classes: 10}
layers:
  - {name: conv1, type: conv, filters: 8, kernel: 3, pad: 1, bias: false}
  - {name: bn1, type: batchnorm}
  - {type: relu}
  - {type: maxpool, kernel: 2}
  - {name: conv2, type: conv, filters: 16, kernel: 3, pad: 1, bias: false}
  - {name: bn2, type: batchnorm}
  - {type: relu}
  - {type: global_avgpool}
  - {name: fc, type: fc, units: 10}
loss: softmax_cross_entropy
train: {batch: 64, epochs: 1, optimizer: {type: sgd, lr: 0.05, momentum: 0.9}}
YAML
# Reference kernels throughout: --sync-bn runs the op's reference batch norm,
# and with the fast convolutions around it the different summation orders of
# a 64-sample and a 16-sample batch grow over 50 steps of this net to 2e-4
# (measured), which would hide what is tested here (9.5e-8 with reference).
BN="--net $TMPDIR_TEST/bn.yaml --limit-train 3200 --limit-test 500 --threads 1 --quiet --kernel all=reference"
# max relative per-step loss difference of two metrics files, printed
loss_diff() {
    /usr/bin/python3 -c '
import json, sys
import numpy as np
a, b = ([json.loads(l)["loss"] for l in open(f) if "\"step\"" in l] for f in sys.argv[1:3])
assert len(a) == len(b) == 50, (len(a), len(b))
print("%.3g" % np.max(np.abs(np.array(a) - np.array(b)) / np.abs(np.array(a))))' "$1" "$2"
}
expect_status 0 "serial batch-norm network (reference kernels)" -- \
    $DLTRAIN $BN --metrics "$TMPDIR_TEST/bn1.jsonl"
expect_status 0 "4 ranks with --sync-bn" -- $MPI $DLTRAIN $BN --sync-bn --metrics "$TMPDIR_TEST/bn4s.jsonl"
d=$(loss_diff "$TMPDIR_TEST/bn1.jsonl" "$TMPDIR_TEST/bn4s.jsonl")
echo "# --sync-bn vs serial: $d"
awk "BEGIN { exit !($d <= 1e-5) }"; tap_result $? "--sync-bn on 4 ranks equals 1 rank (max relative loss difference $d)"
# The same with the default batch norm (simd, which sums in double and
# honours the hook too) between the reference convolutions.
BNS="$BN --kernel batchnorm=simd"
expect_status 0 "serial, simd batch norm" -- $DLTRAIN $BNS --metrics "$TMPDIR_TEST/bn1s.jsonl"
expect_status 0 "4 ranks with --sync-bn, simd batch norm" -- \
    $MPI $DLTRAIN $BNS --sync-bn --metrics "$TMPDIR_TEST/bn4ss.jsonl"
d=$(loss_diff "$TMPDIR_TEST/bn1s.jsonl" "$TMPDIR_TEST/bn4ss.jsonl")
echo "# --sync-bn vs serial, simd batch norm: $d"
awk "BEGIN { exit !($d <= 1e-5) }"; tap_result $? "--sync-bn on 4 ranks equals 1 rank with the simd batch norm ($d)"
expect_status 0 "4 ranks with per-rank batch-norm statistics" -- $MPI $DLTRAIN $BN --metrics "$TMPDIR_TEST/bn4.jsonl"
d=$(loss_diff "$TMPDIR_TEST/bn1.jsonl" "$TMPDIR_TEST/bn4.jsonl")
echo "# per-rank statistics vs serial: $d"
awk "BEGIN { exit !($d > 1e-3) }"; tap_result $? "per-rank statistics differ from the global batch's ($d)"

# SSP: rank 3 (a worker) sleeps 30 ms per step; no worker may get more than 2 steps ahead.
expect_status 0 "ssp:2 with a slowed rank" -- $MPI $DLTRAIN $BASE --consistency ssp:2 --debug-slow-rank 3:30
s=$(echo "$OUT" | sed -n 's/^parameter server: largest staleness \([0-9]*\)/\1/p')
echo "# ssp:2 largest staleness: $s"
[ -n "$s" ] && [ "$s" -le 2 ]; tap_result $? "the staleness bound holds (largest $s <= 2)"
expect_status 0 "async with the same slowed rank" -- $MPI $DLTRAIN $BASE --consistency async --debug-slow-rank 3:30
s=$(echo "$OUT" | sed -n 's/^parameter server: largest staleness \([0-9]*\)/\1/p')
echo "# async largest staleness: $s"
[ -n "$s" ] && [ "$s" -gt 2 ]; tap_result $? "without the bound the slowed worker falls behind (largest $s > 2)"

# A rank that stops responding: rank 2 sleeps 10 minutes in its first step.
# Under load other ranks may still be starting when the 1 s warning fires:
# the list must name rank 2, whoever else is in it.
with_rank_2='ranks? ([0-9]+, )*2(, [0-9]+)*'
stall_a_rank stall "$with_rank_2 (has|have) not joined the gradient exchange of step 1" \
    "$with_rank_2 did not join the gradient exchange of step 1 within 4 s" \
    $MPI $DLTRAIN $BASE --debug-slow-rank 2:600000 --stall-warning 1 --stall-timeout 4 --metrics "$TMPDIR_TEST/stall.jsonl"

# A rank that is killed.
kill_a_rank kill $MPI $DLTRAIN --net "$NET" --epochs 5 --threads 1 --quiet --metrics "$TMPDIR_TEST/kill.jsonl"
