#!/bin/sh
# test_hybrid.sh: tensor, pipeline and hybrid parallelism under mpirun with
# real processes, each grid against one process training on the same data
# with the same chunks (--pipeline-chunks M on one process: the same
# batch-norm statistics per chunk, the same gradient accumulation): every
# step's loss within 1e-5 relative and the final weights (gathered from the
# shards by --dump-weights) within 1e-5 of the largest weight, after 20
# steps.  LeNet-5 and the MLP on Fashion-MNIST over every grid of 2 and 4
# ranks and one of 8, a small ResNet (batch norm split by channels, skip
# connections across stage cuts) and AlexNet at 63x63 (dropout on split
# features, the large fc layers split column/row) on synthetic data; what a
# grid cannot do exits 2 naming why; a stalled or killed rank of a tp=2 x
# pp=2 grid ends the job, named.  Every schedule on pp=2, tp=2,pp=2 and
# pp=4: test_schedules_mpi.sh.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/rank_faults.sh"
skip_without_mpirun
T="$TMPDIR_TEST"
tap_plan 44

. "$top_srcdir/tests/grid_runs.sh"

LENET="--net $top_srcdir/nets/lenet5.yaml --limit-train 1280 --limit-test 200 --epochs 1 --threads 1 --quiet"
run 1 lenet1 $LENET --pipeline-chunks 4; tap_result $? "LeNet-5 on one process, 4 chunks"
grid lenet-tp2 lenet1 2 $LENET --pipeline-chunks 4 --parallel model
grid lenet-pp2 lenet1 2 $LENET --pipeline-chunks 4 --parallel pipeline
grid lenet-dp2-tp2 lenet1 4 $LENET --pipeline-chunks 4 --grid dp=2,tp=2
grid lenet-tp2-pp2 lenet1 4 $LENET --pipeline-chunks 4 --grid tp=2,pp=2
grid lenet-dp2-pp2 lenet1 4 $LENET --pipeline-chunks 4 --grid dp=2,pp=2
grid lenet-pp4 lenet1 4 $LENET --pipeline-chunks 4 --grid pp=4
grid lenet-tp4 lenet1 4 $LENET --pipeline-chunks 4 --grid tp=4
grid lenet-dp2-tp2-pp2 lenet1 8 $LENET --pipeline-chunks 4 --grid dp=2,tp=2,pp=2
run 1 lenet-acc $LENET --pipeline-chunks 8 && run 1 lenet-plain $LENET && compare lenet-acc lenet-plain lenet-acc
tap_result $? "--pipeline-chunks 8 on one process accumulates the gradient of the whole batch"
run 1 lenet-gpipe1 $LENET --pipeline-chunks 4 --pipeline-schedule gpipe && compare lenet-gpipe1 lenet1 lenet-gpipe1
tap_result $? "gpipe on one process (4 executors sharing the parameters) as 1f1b (one)"

MLP="--net $top_srcdir/nets/mlp.yaml --limit-train 640 --limit-test 200 --epochs 1 --batch 32 --threads 1 --quiet"
run 1 mlp1 $MLP --pipeline-chunks 2; tap_result $? "MLP on one process, 2 chunks"
grid mlp-tp4 mlp1 4 $MLP --pipeline-chunks 2 --grid tp=4
grid mlp-tp2-pp2 mlp1 4 $MLP --pipeline-chunks 2 --grid tp=2,pp=2

# A small ResNet: batch norm, a residual block and a projection shortcut;
# with three stages from stage keys, the block's skip goes from stage 0
# straight to stage 2 across stage 1.
small_resnet "$T/resnet.yaml"
sed -e 's/name: a1, type: conv/name: a1, stage: 1, type: conv/' -e 's/name: a2, type: conv/name: a2, stage: 2, type: conv/' \
    "$T/resnet.yaml" > "$T/resnet3.yaml"
# Reference kernels: the fast ones round a layer of 4 channels (a tensor
# rank's part) otherwise than one of 8, and through batch norm that grows
# past 1e-5 in 20 steps (measured: 1e-8 for 8 steps, then a ReLU flips);
# with the reference kernels every step agrees within 4e-8.
RESNET="--net $T/resnet.yaml --threads 1 --quiet --kernel all=reference"
run 1 resnet1 $RESNET --pipeline-chunks 4; tap_result $? "small ResNet on one process, 4 chunks"
grid resnet-tp2 resnet1 2 $RESNET --pipeline-chunks 4 --parallel model
grid resnet-pp2 resnet1 2 $RESNET --pipeline-chunks 4 --parallel pipeline
grid resnet-pp3-skip resnet1 3 --net "$T/resnet3.yaml" --threads 1 --quiet --kernel all=reference --pipeline-chunks 4 \
    --parallel pipeline
grid resnet-tp2-pp2 resnet1 4 $RESNET --pipeline-chunks 4 --grid tp=2,pp=2

# AlexNet as shipped but at 63x63 (the classifier keeps its 9216-4096-4096 fc layers).
sed -e 's/shape: \[3, 224, 224\], classes: 1000/shape: [3, 63, 63], classes: 10/' -e 's/units: 1000/units: 10/' \
    "$top_srcdir/nets/alexnet.yaml" > "$T/alexnet.yaml"
ALEX="--net $T/alexnet.yaml --batch 8 --max-steps 20 --threads 1 --quiet"
run 1 alex1 $ALEX --pipeline-chunks 2; tap_result $? "AlexNet at 63x63 on one process, 2 chunks"
grid alex-tp2-pp2 alex1 4 $ALEX --pipeline-chunks 2 --grid tp=2,pp=2

# --parallel hybrid without a grid (the command dltrain is introduced with):
# the planner's best layout with two of dp, tp and pp above 1, printed once;
# it trains as one process does with the same chunks.  The same from the
# network file's `parallel: {strategy: hybrid}`.  (--plan-flops 1e12: the
# choice does not depend on this machine's timings, and the best layout of
# all is tp=4, so the planner must look past it.)
# hybrid NAME ARGS...: runs on 4 ranks; checks the printed grid and compares.
hybrid() {
    name=$1
    shift
    run 4 "$name" "$@" --plan-flops 1e12 || return 1
    line=$(grep '^parallel hybrid: ' "$T/$name.txt")
    echo "# $line" | cut -c1-150
    [ "$(grep -c '^parallel hybrid: ' "$T/$name.txt")" -eq 1 ] || { echo "# not printed once"; return 1; }
    dims=$(echo "$line" | sed -n 's/^parallel hybrid: --grid dp=\([0-9]*\),tp=\([0-9]*\),pp=\([0-9]*\) .*/\1 \2 \3/p')
    above=0
    for d in $dims; do [ "$d" -gt 1 ] && above=$((above + 1)); done
    [ "$above" -ge 2 ] || { echo "# grid '$dims' splits fewer than two ways"; return 1; }
    chunks=$(echo "$line" | sed -n 's/.* --pipeline-chunks \([0-9]*\) .*/\1/p')
    [ -f "$T/lenet-c$chunks.jsonl" ] || run 1 "lenet-c$chunks" $LENET --pipeline-chunks "$chunks" || return 1
    compare "$name" "lenet-c$chunks" "$name"
}
hybrid lenet-hybrid $LENET --parallel hybrid
tap_result $? "--parallel hybrid on 4 ranks, no grid: a two-way layout, printed once, as one process"
sed 's/^parallel: .*/parallel: {strategy: hybrid}/' "$top_srcdir/nets/lenet5.yaml" > "$T/lenet-hybrid.yaml"
grep -q '^parallel: {strategy: hybrid}' "$T/lenet-hybrid.yaml" &&
    hybrid lenet-hybrid-file $(echo "$LENET" | sed "s|--net [^ ]*|--net $T/lenet-hybrid.yaml|")
tap_result $? "parallel: {strategy: hybrid} in the file, no grid: the same"
cmp -s "$T/lenet-hybrid.bin" "$T/lenet-hybrid-file.bin"
tap_result $? "both chose the same layout and ended with the same weights"
# A grid in the file still wins over the planner.
sed 's/^parallel: .*/parallel: {strategy: hybrid, tp: 2, pp: 2}/' "$top_srcdir/nets/lenet5.yaml" > "$T/lenet-grid.yaml"
expect_status 0 "a grid in the network file wins" -- mpirun --oversubscribe -np 4 $DLTRAIN \
    $(echo "$LENET" | sed "s|--net [^ ]*|--net $T/lenet-grid.yaml|" | sed 's/--quiet//') --max-steps 2
echo "$OUT" | grep -q 'grid dp=1 x tp=2 x pp=2' && ! echo "$OUT" | grep -q '^parallel hybrid: '
tap_result $? "its dp=1 x tp=2 x pp=2, no plan"
# One process: nothing to split, said once, and it trains.
expect_status 0 "--parallel hybrid on one process trains" -- $DLTRAIN $LENET --parallel hybrid --max-steps 2
[ "$(echo "$OUT" | grep -c "hybrid' on one process: nothing to split")" -eq 1 ]
tap_result $? "and says once that there is nothing to split"

# What a grid cannot do: exit 2 and say why, before training.
MPI2="mpirun --oversubscribe -np 2"
expect_status 2 "a grid that does not match the ranks" -- $MPI2 $DLTRAIN $LENET --grid dp=3
expect_output "dp=3 x tp=1 x pp=1 = 3 ranks, but 2 are running" "the message gives the product and the ranks"
expect_status 2 "fewer chunks than stages" -- $MPI2 $DLTRAIN $LENET --parallel pipeline --pipeline-chunks 1
expect_output "chunks" "the message names the chunks"
expect_status 2 "an asynchronous parameter server on a pipeline" -- $MPI2 $DLTRAIN $LENET --parallel pipeline \
    --consistency async
expect_output "sync only" "the message says what works"
expect_status 2 "an unknown schedule" -- $DLTRAIN $LENET --pipeline-schedule zigzag
expect_output "--pipeline-schedule" "the message names the option"

# A stalled rank of a tp=2 x pp=2 grid: rank 2 sleeps 10 minutes in step 1;
# the ranks blocked in its tensor and pipeline groups' calls warn after 1 s
# and end the job after 4 s, naming the group (or the peer) that holds rank 2.
with_rank_2='(ranks ([0-9]+, )*2(, [0-9]+)*\)|(from|to) rank 2 )'
stall_a_rank grid-stall "warning: rank [0-9] .* has waited 1 s in .*$with_rank_2 in step 1" \
    "stall: rank [0-9] .* has waited 4 s in .*$with_rank_2.*aborting the job" \
    mpirun --oversubscribe -np 4 $DLTRAIN $LENET --grid tp=2,pp=2 --debug-slow-rank 2:600000 --stall-warning 1 \
    --stall-timeout 4 --metrics "$T/grid-stall.jsonl"

# A rank of a tp=2 x pp=2 grid killed mid-pipeline.
kill_a_rank grid-kill mpirun --oversubscribe -np 4 $DLTRAIN --net "$top_srcdir/nets/lenet5.yaml" --epochs 5 \
    --threads 1 --quiet --grid tp=2,pp=2 --metrics "$T/grid-kill.jsonl"
