#!/bin/sh
# test_decentralized.sh: gossip and EASGD from the command line.  On 4 ranks
# with real Fashion-MNIST, gossip:complete (every rank mixes with everyone,
# 1/4 each, point to point) trains exactly like local-sgd:1 (an allreduce
# average after every step): the same losses within 1e-6 (measured 6.5e-7:
# the average's roundings differ, a float allreduce against a double sum)
# and final weights within 1e-5 (measured 4.9e-6, as sync's tests allow); its metrics carry bytes_sent = 3 neighbours x the model's
# floats x 4 and a consensus distance of 0, while gossip:ring's is positive
# and its bytes_sent 2 x the model.  Bad values (an unknown topology, TAU 0,
# ALPHA out of range, ALPHA x workers > 1, gossip or easgd-async on one rank,
# --gossip-overlap without gossip, checkpoints of these modes) exit with status 2 and a message naming the option and what
# it accepts; `dltrain check --consistency gossip:exp --ranks 8` prints the
# mixing matrix.  The step-by-step checks of every topology and of EASGD
# against their formulas are in test_strategy_mpi.
. "$top_srcdir/tests/tap.sh"
tap_plan 28

expect_status 2 "an unknown topology is refused" -- $DLTRAIN train --net "$top_srcdir/nets/mlp.yaml" \
    --consistency gossip:star
expect_output "--consistency gossip:TOPOLOGY: expected a topology ring, exp, one-peer-exp or complete, found 'star'" \
    "the message names the option and the topologies"
expect_status 2 "easgd:0 is refused" -- $DLTRAIN train --net "$top_srcdir/nets/mlp.yaml" --consistency easgd:0
expect_output "easgd:TAU\[,ALPHA\] TAU: expected an integer in \[1, 1000000\], found '0'" "the message names TAU and its range"
expect_status 2 "easgd:2,1.5 is refused" -- $DLTRAIN train --net "$top_srcdir/nets/mlp.yaml" --consistency easgd:2,1.5
expect_output "ALPHA: expected a number in \[0, 1\], found '1.5'" "the message names ALPHA and its range"
expect_status 2 "easgd:2,0 is refused" -- $DLTRAIN train --net "$top_srcdir/nets/mlp.yaml" --consistency easgd:2,0
expect_status 2 "gossip on one rank is refused" -- $DLTRAIN train --net "$top_srcdir/nets/mlp.yaml" \
    --consistency gossip:ring --limit-train 64 --limit-test 64 --quiet
expect_output "--consistency gossip:ring: expected 2 to 4096 ranks, found 1" "the message says why"
expect_status 2 "--gossip-overlap without gossip is refused" -- $DLTRAIN train --net "$top_srcdir/nets/mlp.yaml" \
    --gossip-overlap --limit-train 64 --limit-test 64 --quiet
expect_output "--gossip-overlap: only with --consistency gossip:TOPOLOGY" "the message says with what"
expect_status 2 "easgd-async on one rank is refused" -- $DLTRAIN train --net "$top_srcdir/nets/mlp.yaml" \
    --consistency easgd-async:2 --limit-train 64 --limit-test 64 --quiet
expect_output "--consistency easgd-async:2: expected 2 ranks or more \(a server and a worker\)" "the message says why"
expect_status 2 "easgd-async's ALPHA x workers > 1 is refused" -- $DLTRAIN check --consistency easgd-async:2,0.5 --ranks 4
expect_output "ALPHA x workers must be at most 1.*0.5 x 3 = 1.5" "the message counts the workers (ranks less the server)"
expect_status 0 "check prints gossip:exp's mixing matrix on 8 ranks" -- $DLTRAIN check --consistency gossip:exp --ranks 8
expect_output "^ 0.2500      0      0      0 0.2500      0 0.2500 0.2500$" \
    "row 0 of exp on 8 ranks: itself and ranks 7, 6 and 4, 1/4 each"
expect_status 2 "check refuses ALPHA x ranks > 1" -- $DLTRAIN check --consistency easgd:2,0.5 --ranks 4
expect_output "ALPHA x workers must be at most 1.*0.5 x 4 = 2" "the message gives the product"

if [ ! -x "$(command -v mpirun)" ]; then
    for i in $(seq 9); do echo "ok $((tap_n + i)) # SKIP no mpirun"; done
    exit "$tap_failed"
fi
MPI="mpirun --oversubscribe -np 4"
NET="$top_srcdir/nets/lenet5.yaml"
BASE="--net $NET --limit-train 3200 --limit-test 500 --epochs 1 --threads 1 --quiet"
expect_status 2 "checkpoints of gossip are refused" -- $MPI $DLTRAIN train $BASE --consistency gossip:ring \
    --checkpoint-dir "$TMPDIR_TEST/ckpt"
expect_output "checkpoints are not supported with the gossip strategy" "the message names the strategy"

expect_status 0 "4 ranks, local-sgd:1" -- $MPI $DLTRAIN train $BASE --consistency local-sgd:1 \
    --metrics "$TMPDIR_TEST/local.jsonl" --dump-weights "$TMPDIR_TEST/local.bin"
expect_status 0 "4 ranks, gossip:complete" -- $MPI $DLTRAIN train $BASE --consistency gossip:complete \
    --metrics "$TMPDIR_TEST/complete.jsonl" --dump-weights "$TMPDIR_TEST/complete.bin"
expect_status 0 "4 ranks, gossip:ring" -- $MPI $DLTRAIN train $BASE --consistency gossip:ring \
    --metrics "$TMPDIR_TEST/ring.jsonl"

# LeNet-5: 61706 weights and no batch-norm statistics.
/usr/bin/python3 - "$TMPDIR_TEST" "$tap_n" <<'PY'
import json, sys
import numpy as np
d, n = sys.argv[1], int(sys.argv[2])
failed = 0
def result(ok, what):
    global n, failed
    n += 1
    failed += not ok
    print("%s %d - %s" % ("ok" if ok else "not ok", n, what))
def steps(name):
    return [json.loads(l) for l in open("%s/%s.jsonl" % (d, name)) if '"step"' in l]
local, complete, ring = steps("local"), steps("complete"), steps("ring")
a = np.array([s["loss"] for s in local]); b = np.array([s["loss"] for s in complete])
assert len(a) == len(b) == 50, (len(a), len(b))
rel = np.max(np.abs(a - b) / np.abs(a))
x = np.fromfile(d + "/local.bin", dtype=np.float32); y = np.fromfile(d + "/complete.bin", dtype=np.float32)
assert x.size == y.size == 61706, (x.size, y.size)
wd = np.max(np.abs(x - y))
print("# gossip:complete vs local-sgd:1: max relative loss difference %.3g over 50 steps, max weight difference %.3g"
      % (rel, wd))
result(rel <= 1e-6 and wd <= 1e-5, "gossip:complete trains like local-sgd:1 (losses within 1e-6, weights 1e-5)")
bytes_ok = all(s["bytes_sent"] == 3 * 4 * 61706 for s in complete) and all(s["bytes_sent"] == 2 * 4 * 61706 for s in ring)
result(bytes_ok, "bytes_sent: 3 x 4 x 61706 per step on the complete graph, 2 x on the ring")
cd_complete = max(s["consensus_distance"] for s in complete)
cd_ring = min(s["consensus_distance"] for s in ring)
print("# consensus distance: complete at most %.3g, ring at least %.3g" % (cd_complete, cd_ring))
result(cd_complete <= 1e-6, "the complete graph's consensus distance is 0 (within 1e-6)")
result(cd_ring > 1e-7, "the ring's consensus distance is positive")
sys.exit(failed)
PY
tap_failed=$((tap_failed + $?))
exit "$tap_failed"
