#!/bin/sh
# test_strategy_mpi.sh: runs tests/test_strategy_mpi (the consistency
# strategies against their serial counterparts) under mpirun on 2, 3 and 5
# ranks: one and two parameter servers with one to four workers, and an
# odd number of ranks for the allreduces; gossip and EASGD again on 4 ranks
# (one-peer-exp's whole period on a power of two).  Skipped without an MPI build.
. "${top_srcdir:-.}/tests/mpi_tap.sh"
mpi_tap_init "$top_builddir/tests/test_strategy_mpi"
for p in 2 3 5; do
    mpi_run "$p"
done
mpi_run 4 decentralized
mpi_done
