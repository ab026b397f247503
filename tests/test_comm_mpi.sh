#!/bin/sh
# test_comm_mpi.sh: runs tests/test_comm_mpi under `mpirun --oversubscribe`
# for every rank count from 1 to 8 (the 64 MiB vector only at 4 ranks, to
# keep the time down), as one TAP stream (tests/mpi_tap.sh).  Without an
# MPI build (no test binary) the whole test is skipped.
: "${top_builddir:=.}" "${top_srcdir:=.}"
. "$top_srcdir/tests/mpi_tap.sh" "$top_builddir/tests/test_comm_mpi"
for p in 1 2 3 4 5 6 7 8; do
    if [ "$p" -eq 4 ]; then mpi_tap_run "$p" --big; else mpi_tap_run "$p"; fi
done
mpi_tap_end
