/* threads.h: the one thread-count setting (--threads) that governs OpenMP
 * loops in the project's own ops and the libraries' thread pools. */
#ifndef DL_THREADS_H
#define DL_THREADS_H

/* Cores this process may run on (sched_getaffinity), at least 1. */
int dl_threads_available(void);
/* The node's online cores, whatever this process is bound to (a rank that
 * mpirun bound to one core sees one available). */
int dl_threads_node_cores(void);
/* Ranks of this job on this node according to the launcher (1: none). */
int dl_threads_local_ranks(void);

/* This process's rank among them, from the same launchers' environment
 * (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID); -1 when none
 * says.  It picks this rank's GPU. */
int dl_threads_local_rank(void);
/* The default thread count: the available cores shared among the ranks of
 * the node that can see them (at least 1), so that 4 unbound ranks on a
 * 2-core node do not run 8 spinning OpenMP threads. */
int dl_threads_default(void);
/* Sets the thread count everywhere; n <= 0 means dl_threads_default(). */
void dl_threads_set(int n);
int dl_threads_get(void);

#endif
