#!/bin/sh
# test_moe_ep.sh: expert parallelism as a user meets it (issue 44): --grid
# ep=E spreads each moe layer's experts over E ranks within the data group
# (the dense layers data-parallel over all of dp x ep), the rows travelling
# to their experts' ranks by all-to-all-v and back.  On 4 ranks, dp=2 x
# ep=2, ep=4, ep=2 x tp=2 and ep=2 x pp=2 each equal one process within
# 1e-5 over 20 steps (losses and weights); with a capacity factor the same
# choices are dropped as on one process; gradient-norm clipping sums the
# experts' squares over the expert group; an evaluation whose slices need
# different batch counts on the ranks of an expert group still ends, with
# one process's test loss; checkpoints reshard both ways (ep=2 x dp=2 to
# one process, one process to ep=4); check prints each rank's block of the
# experts and counts only it; the dense weights alone cross the data
# group (the bytes sent); bad grids exit 2 with the reason.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/text_corpus.sh"
skip_without_mpirun
T="$TMPDIR_TEST"
tap_plan 23
. "$top_srcdir/tests/grid_runs.sh"
text_corpus "$top_builddir/tests/text-corpus" || { echo "Bail out! no text to train on"; exit 1; }
TEXT="$top_builddir/tests/text-corpus"
MOE="--net $top_srcdir/nets/moe-tiny.yaml --data $TEXT --threads 1 --max-steps 20 --limit-test 64"

run 1 moe-one $MOE
tap_result $? "moe-tiny on one process (the reference)"
grid moe-dp2-ep2 moe-one 4 $MOE --grid dp=2,ep=2
grep -q "grid dp=4 (2 x ep=2 expert ranks) x tp=1 x pp=1" "$T/moe-dp2-ep2.txt"
tap_result $? "  the banner names the expert ranks"
grid moe-ep4 moe-one 4 $MOE --grid ep=4
grid moe-ep2-tp2 moe-one 4 $MOE --grid ep=2,tp=2
grid moe-ep2-pp2 moe-one 4 $MOE --grid ep=2,pp=2
# only the dense weights (41,792 of 140,096) are summed over the data group;
# each expert's over the ranks holding it (none other at ep=4)
/usr/bin/python3 - "$T/moe-ep4.txt" "$T/moe-dp2-ep2.txt" <<'PY'
import re, sys
def sent(f):
    m = re.search(r"([0-9.]+) MB sent by rank 0", open(f).read())
    return float(m.group(1)) if m else -1
# a ring's 2 (P - 1) / P x 4 bytes a weight, 20 steps
dense = 2 * 3 / 4 * 4 * 41792 * 20 / 1e6
both = dense + 2 * 1 / 2 * 4 * (140096 - 41792) / 2 * 20 / 1e6
a, b = sent(sys.argv[1]), sent(sys.argv[2])
print("# ep=4: %.2f MB sent (dense weights only: %.2f); dp=2 x ep=2: %.2f (with the experts' halves over 2: %.2f)"
      % (a, dense, b, both))
sys.exit(0 if abs(a - dense) < 0.06 and abs(b - both) < 0.06 else 1)
PY
tap_result $? "  only the dense weights cross the data group; the experts' over their replicas"

run 1 moe-cap-one $MOE --set args.capacity_factor=0.5
grid moe-cap-ep2 moe-cap-one 4 $MOE --set args.capacity_factor=0.5 --grid dp=2,ep=2
/usr/bin/python3 - "$T/moe-cap-one.jsonl" "$T/moe-cap-ep2.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(f) if '"step"' in l] for f in sys.argv[1:3])
ok = len(a) == len(b) == 20 and all(abs(x["expert_dropped"] - y["expert_dropped"]) < 1e-9 and
                                    abs(x["expert_max_load"] - y["expert_max_load"]) < 1e-9 for x, y in zip(a, b))
print("# dropped at step 20: %.4f on one process, %.4f on dp=2 x ep=2" % (a[-1]["expert_dropped"], b[-1]["expert_dropped"]))
sys.exit(0 if ok and a[-1]["expert_dropped"] > 0.3 else 1)
PY
tap_result $? "  with capacity 0.5 the same share is dropped every step and the same expert is as loaded"
run 1 moe-clip-one $MOE --clip-grad-norm 0.05
grid moe-clip-ep2 moe-clip-one 4 $MOE --clip-grad-norm 0.05 --grid dp=2,ep=2

# 50 test samples over 4 data ranks: 12, 13, 12, 13, so 3 or 4 batches of 4
run 1 moe-eval-one $MOE --max-steps 5 --limit-test 50 && run 4 moe-eval-ep4 $MOE --max-steps 5 --limit-test 50 --grid ep=4
/usr/bin/python3 - "$T/moe-eval-one.txt" "$T/moe-eval-ep4.txt" <<'PY'
import re, sys
def loss(f):
    m = re.search(r"^final: .*test loss ([0-9.]+)", open(f).read(), re.M)
    return float(m.group(1)) if m else -1
a, b = loss(sys.argv[1]), loss(sys.argv[2])
print("# test loss %.4f on one process, %.4f on ep=4" % (a, b))
sys.exit(0 if a > 0 and abs(a - b) <= 1e-4 else 1)
PY
tap_result $? "an evaluation whose slices take 3 and 4 batches on an expert group's ranks ends with one process's test loss"

run 4 moe-ep-ck $MOE --grid dp=2,ep=2 --checkpoint-dir "$T/ck" --checkpoint-every 10 &&
    run 1 moe-ep-on-one $MOE --resume "$T/ck/ckpt-0000000010.safetensors" && resumed moe-one moe-ep-on-one
tap_result $? "a dp=2 x ep=2 checkpoint (the experts gathered) resumed on one process continues its run"
run 1 moe-one-ck $MOE --checkpoint-dir "$T/ck1" --checkpoint-every 10 &&
    run 4 moe-one-on-ep $MOE --grid ep=4 --resume "$T/ck1/ckpt-0000000010.safetensors" && resumed moe-one moe-one-on-ep
tap_result $? "one process's checkpoint resumed on ep=4 (each rank its expert)"

expect_status 0 "check --grid dp=2,ep=2" -- $DLTRAIN check $MOE --grid dp=2,ep=2
expect_output "^11 +model\\.layers\\.0\\.block_sparse_moe +0 +whole; experts 0-1 of 4 +24832$" \
    "  each rank holds 2 of the 4 experts: the router's 256 and half of 49,152 expert weights"

MPI4="timeout 120 mpirun --oversubscribe -np 4"
expect_status 2 "ep=3 of 4 experts" -- timeout 120 mpirun --oversubscribe -np 3 $DLTRAIN $MOE --grid ep=3 --batch 15
expect_output "block_sparse_moe' \\(moe\\): its experts do not divide into ep=3 equal blocks" "  is refused, naming the layer"
expect_status 2 "ep=2 on a network without experts" -- \
    $MPI4 $DLTRAIN --net "$top_srcdir/nets/llama-tiny.yaml" --data "$TEXT" --grid ep=2
expect_output "no layer with experts" "  is refused"
expect_status 2 "a batch of 18 over dp=2 x ep=2" -- $MPI4 $DLTRAIN $MOE --grid dp=2,ep=2 --batch 18
expect_output "the batch \\(18\\) must divide evenly over the 4 data-parallel ranks" "  is refused"
expect_status 2 "--zero 1 with ep=4" -- $MPI4 $DLTRAIN $MOE --grid ep=4 --zero 1
expect_output "--zero 1: not with expert ranks" "  is refused"
exit 0
