#!/bin/sh
# test_tune_net_isa.sh: test_tune_net again with oneDNN held to older
# instruction sets (ONEDNN_MAX_CPU_ISA), so that every CI machine also runs
# the tuner tests on the kernels, layouts and workspaces another machine
# would have: under SSE4.1 the convolutions need tens of KiB of workspace
# where AVX2 needs none, as AVX-512 machines' do.  The tests derive their
# limits and tolerances from what the kernels report, so they must hold
# under each.
. "$top_srcdir/tests/tap.sh"
tap_plan 2
for isa in SSE41 AVX; do
    ONEDNN_MAX_CPU_ISA=$isa CMOCKA_MESSAGE_OUTPUT=STDOUT "$top_builddir/tests/test_tune_net" > "$TMPDIR_TEST/$isa.log" 2>&1
    status=$?
    [ $status -ne 0 ] && sed 's/^/# /' "$TMPDIR_TEST/$isa.log"
    tap_result $status "test_tune_net with ONEDNN_MAX_CPU_ISA=$isa"
done
