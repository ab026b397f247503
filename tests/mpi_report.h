/* mpi_report.h: one verdict for all ranks of a C test run under mpirun
 * (tests/mpi_tap.sh numbers the lines): ok only when ok on every rank of
 * world; rank 0 prints "ok - P=N what" or "not ok - P=N what: detail
 * (failed on K ranks)", where detail is rank 0's (or says it was fine
 * there). */
#ifndef DL_TESTS_MPI_REPORT_H
#define DL_TESTS_MPI_REPORT_H

#include "comm/comm.h"

void mpi_report(struct dl_comm *world, int ok, const char *what, const char *detail);

#endif
