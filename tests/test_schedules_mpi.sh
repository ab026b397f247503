#!/bin/sh
# test_schedules_mpi.sh: every pipeline schedule (gpipe, 1f1b, interleaved:2,
# zb-h1) trains like one process under mpirun with real processes: LeNet-5
# and the MLP (default kernels, whose weight gradients zb-h1 defers) and a
# small ResNet (batch norm, skip connections across stage cuts, one of them
# between two stages of one rank under interleaved:2) on pp=2, tp=2,pp=2
# and pp=4, each against one process with the same chunks: every step's
# loss within 1e-5 relative and the final weights within 1e-5 of the
# largest after 20 steps (tests/grid_runs.sh).  zb-h1 on one process (the
# backward split, deferred weight passes) against 1f1b.  Refused with exit
# status 2 and a message: interleaved chunks not a multiple of the pipeline
# ranks, more virtual stages than layers, interleaved on one pipeline rank,
# interleaved:1.  `dltrain bench pipeline` simulates every schedule on
# measured stage times: no simulated step beats perfect balance.
. "$top_srcdir/tests/tap.sh"
if [ ! -x "$(command -v mpirun)" ] || ! "$DLTRAIN" --help >/dev/null 2>&1; then
    echo "1..0 # SKIP mpirun or dltrain not available"; exit 0
fi
T="$TMPDIR_TEST"
. "$top_srcdir/tests/grid_runs.sh"
tap_plan 50

SCHEDULES="gpipe 1f1b interleaved:2 zb-h1"

# schedules NET REF RANKS GRID ARGS...: every schedule of $SCHEDULES on GRID against
# REF (grid() sets name, ref and n: these are the s_ ones).
schedules() {
    s_net=$1 s_ref=$2 s_n=$3 s_grid=$4
    shift 4
    for s in $SCHEDULES; do
        grid "$s_net-$s_grid-$s" "$s_ref" "$s_n" "$@" --grid "$s_grid" --pipeline-schedule "$s"
    done
}

LENET="--net $top_srcdir/nets/lenet5.yaml --limit-train 1280 --limit-test 200 --epochs 1 --threads 1 --quiet \
--pipeline-chunks 4"
run 1 lenet1 $LENET; tap_result $? "LeNet-5 on one process, 4 chunks"
grid lenet-zb-h1 lenet1 1 $LENET --pipeline-schedule zb-h1
schedules lenet lenet1 2 pp=2 $LENET
schedules lenet lenet1 4 tp=2,pp=2 $LENET
schedules lenet lenet1 4 pp=4 $LENET

MLP="--net $top_srcdir/nets/mlp.yaml --limit-train 640 --limit-test 200 --epochs 1 --batch 32 --threads 1 --quiet \
--pipeline-chunks 4"
run 1 mlp1 $MLP; tap_result $? "MLP on one process, 4 chunks"
schedules mlp mlp1 2 pp=2 $MLP
schedules mlp mlp1 4 tp=2,pp=2 $MLP
SCHEDULES="gpipe 1f1b zb-h1" schedules mlp mlp1 4 pp=4 $MLP

# The small ResNet, cut automatically or, where 4 stages are wanted, by
# stage keys that put its first skip (stem -> a_add) from stage 0 to
# stage 2: across a rank on pp=4, within rank 0 on pp=2 x interleaved:2.
small_resnet "$T/resnet.yaml"
sed -e 's/name: a1, type: conv/name: a1, stage: 1, type: conv/' -e 's/name: a2, type: conv/name: a2, stage: 2, type: conv/' \
    -e 's/name: down, type: conv/name: down, stage: 3, type: conv/' "$T/resnet.yaml" > "$T/resnet4.yaml"
RESNET="--threads 1 --quiet --kernel all=reference --pipeline-chunks 4"
run 1 resnet1 --net "$T/resnet.yaml" $RESNET; tap_result $? "small ResNet on one process, 4 chunks"
SCHEDULES="gpipe 1f1b zb-h1" schedules resnet resnet1 2 pp=2 --net "$T/resnet.yaml" $RESNET
grid resnet4-pp=2-interleaved:2 resnet1 2 --net "$T/resnet4.yaml" $RESNET --grid pp=2 --pipeline-schedule interleaved:2
SCHEDULES="gpipe 1f1b zb-h1" schedules resnet resnet1 4 tp=2,pp=2 --net "$T/resnet.yaml" $RESNET
grid resnet4-tp=2,pp=2-interleaved:2 resnet1 4 --net "$T/resnet4.yaml" $RESNET --grid tp=2,pp=2 \
    --pipeline-schedule interleaved:2
SCHEDULES="gpipe 1f1b zb-h1" schedules resnet4 resnet1 4 pp=4 --net "$T/resnet4.yaml" $RESNET
grid resnet-pp=4-interleaved:2 resnet1 4 --net "$T/resnet.yaml" $RESNET --grid pp=4 --pipeline-schedule interleaved:2

# What the schedules refuse: exit 2 and say why, before training.
MPI2="mpirun --oversubscribe -np 2"
expect_status 2 "interleaved chunks not a multiple of the pipeline ranks" -- $MPI2 $DLTRAIN $LENET \
    --parallel pipeline --pipeline-chunks 3 --pipeline-schedule interleaved:2
expect_output "--pipeline-chunks 3 with --pipeline-schedule interleaved:2 on 2 pipeline ranks: the chunks must be a \
multiple of the pipeline ranks" "the message names the chunks, V, the ranks and the rule"
expect_status 2 "more virtual stages than layers" -- mpirun --oversubscribe -np 4 $DLTRAIN $MLP --grid pp=4 \
    --pipeline-schedule interleaved:2
expect_output "4 pipeline ranks x 2 virtual stages \(interleaved:2\) = 8 stages, but the network has 6 layers before its \
loss: at most 6 stages \(V <= 1\)" "the message names the ranks, V, the layers and the largest V"
expect_status 2 "interleaved on one pipeline rank" -- $DLTRAIN $LENET --pipeline-schedule interleaved:2
expect_output "needs at least 2 pipeline ranks" "the message says why"
expect_status 2 "interleaved:1" -- $DLTRAIN $LENET --pipeline-schedule interleaved:1
expect_output "--pipeline-schedule interleaved:V: expected V, the virtual stages per rank, an integer in \[2," \
    "the message gives the range"

# dltrain bench pipeline: a row per schedule, interleaved refused for 6
# chunks on 4 ranks; a simulated step never takes less than the one-process
# step shared perfectly by the ranks (its bound, whatever the timings).
expect_status 0 "bench pipeline simulates the schedules" -- $DLTRAIN bench pipeline --net "$top_srcdir/nets/lenet5.yaml" \
    --batch 24 --ranks 4 --pipeline-chunks 6 --steps 3 --threads 1 \
    --schedules gpipe,1f1b,zb-h1,interleaved:2 --send-latency 0.01
expect_output "interleaved:2 +refused: --pipeline-chunks 6 with --pipeline-schedule interleaved:2 on 4" \
    "a schedule that refuses the chunks is named with the reason"
echo "$OUT" | awk '/perfect balance on 4 ranks/ { bound = $(NF - 1) + 0 }
    /^(gpipe|1f1b|zb-h1) / { rows++; if ($4 + 0.0015 < bound || $5 < 0 || $5 >= 1) bad++ }
    END { printf "# %d rows, balance bound %.3f ms\n", rows, bound; exit !(rows == 3 && bound > 0 && !bad) }'
tap_result $? "three rows, each at least the perfect-balance step time, bubble in [0, 1)"
