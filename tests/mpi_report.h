/* mpi_report.h: the verdicts of the C tests that run under mpirun
 * (test_comm_mpi, test_strategy_mpi): every rank gives its own, and rank 0
 * prints one "ok - P=<ranks> ..." or "not ok - ..." line for the whole job,
 * which tests/mpi_tap.sh numbers into a TAP stream. */
#ifndef DL_TESTS_MPI_REPORT_H
#define DL_TESTS_MPI_REPORT_H

#include "comm/comm.h"

/* Agrees on one verdict over the ranks of world (ok only when ok on every
 * rank) and prints it on rank 0 with what, and detail when it failed here.
 * Returns the common verdict (1: ok). */
int mpi_report(struct dl_comm *world, int ok, const char *what, const char *detail);

#endif
