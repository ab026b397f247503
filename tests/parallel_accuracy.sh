#!/bin/sh
# parallel_accuracy.sh: what the consistency models and gradient codecs do
# to the accuracy of LeNet-5 on Fashion-MNIST with 4 ranks.  Two sizes:
#   make check (CI):        30000 training images, 1 epoch: guards against
#                           breakage (a broken codec or server ends near 10%):
#                           codecs within 8 points of uncompressed (1-bit is
#                           the slowest starter: 4.3 behind here), ssp/async/
#                           local-sgd >= 70% (measured 75.7, 75.7, 80.6);
#   make check-slow (full): 60000 images, 3 epochs (nets/lenet5.yaml); codecs
#                           within 1.5 points of uncompressed, ssp/async/
#                           local-sgd >= 87% (issue 6's acceptance figures).
# These floors only catch breakage: the codecs, the parameter server, local
# SGD and sync training are tested against their exact counterparts in
# test_comm_mpi, test_strategy_mpi and test_parallel.sh (doc/testing.md).
. "$top_srcdir/tests/tap.sh"
if [ ! -x "$(command -v mpirun)" ] || [ ! -d /usr/share/datasets/fashion-mnist ]; then
    echo "1..0 # SKIP needs mpirun and Debian's dataset-fashion-mnist"; exit 0
fi
MPI="mpirun --oversubscribe -np 4"
if [ "${DLTRAIN_FULL_ACCURACY:-0}" = 1 ]; then
    RUN="--net $top_srcdir/nets/lenet5.yaml --epochs 3 --threads 1 --quiet"
    GAP=1.5; FLOOR=87
else
    RUN="--net $top_srcdir/nets/lenet5.yaml --epochs 1 --limit-train 30000 --threads 1 --quiet"
    GAP=8; FLOOR=70
fi
tap_plan 13

accuracy() { echo "$OUT" | sed -n 's/^final: test accuracy \([0-9.]*\)%.*/\1/p'; }

expect_status 0 "4 ranks, sync, uncompressed" -- $MPI $DLTRAIN $RUN
base=$(accuracy)
echo "# uncompressed: $base%"
for codec in 1bit topk:0.01 qsgd:4; do
    expect_status 0 "4 ranks, --compress $codec" -- $MPI $DLTRAIN $RUN --compress $codec
    acc=$(accuracy)
    echo "# $codec: $acc% (uncompressed $base%)"
    [ -n "$acc" ] && [ -n "$base" ] && awk "BEGIN { exit !($base - $acc <= $GAP) }"
    tap_result $? "$codec ends within $GAP points of uncompressed ($acc% vs $base%)"
done
for mode in ssp:2 async local-sgd:4; do
    expect_status 0 "4 ranks, --consistency $mode" -- $MPI $DLTRAIN $RUN --consistency $mode
    acc=$(accuracy)
    echo "# $mode: $acc%"
    [ -n "$acc" ] && awk "BEGIN { exit !($acc >= $FLOOR) }"
    tap_result $? "$mode reaches at least $FLOOR% ($acc%)"
done
