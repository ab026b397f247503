#!/bin/sh
# test_exec_mpi.sh: runs tests/test_exec_mpi (one executor step of every
# tensor x pipeline grid against one process) on 1 to 4 ranks, as one TAP
# stream (tests/mpi_tap.sh).  Skipped without MPI.
. "${top_srcdir:-.}/tests/mpi_tap.sh"
mpi_tap_init "$top_builddir/tests/test_exec_mpi"
for p in 1 2 3 4; do
    mpi_run "$p"
done
mpi_done
