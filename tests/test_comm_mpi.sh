#!/bin/sh
# test_comm_mpi.sh: runs tests/test_comm_mpi under `mpirun --oversubscribe`
# for every rank count from 1 to 8 (the 64 MiB vector only at 4 ranks, to
# keep the time down) and numbers its "ok - ..." lines into one TAP stream.
# Without an MPI build (no test binary) the whole test is skipped.
. "${top_srcdir:-.}/tests/mpi_tap.sh"
mpi_tap_init "$top_builddir/tests/test_comm_mpi"
for p in 1 2 3 4 5 6 7 8; do
    big=""
    [ "$p" -eq 4 ] && big=--big
    mpi_run "$p" $big
done
mpi_done
