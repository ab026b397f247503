#!/bin/sh
# test_exec_device_mpi.sh: runs tests/test_exec_device_mpi (a tensor
# group's communication steps on the emulated device, staged through host
# memory or in place over a communicator of device buffers, against the
# host) on 2 ranks, as one TAP stream (tests/mpi_tap.sh).  Skipped without MPI.
. "${top_srcdir:-.}/tests/mpi_tap.sh"
mpi_tap_init "$top_builddir/tests/test_exec_device_mpi"
mpi_run 2
mpi_done
