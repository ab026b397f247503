/* signals.h: graceful stop on SIGTERM, SIGINT and SIGUSR1.  The handlers only
 * record the signal; the training loop polls dl_signals_pending() after each
 * step, writes a checkpoint and exits with DL_EXIT_PREEMPTED.  SIGUSR1 is
 * what Slurm sends with `#SBATCH --signal=USR1@SECONDS` before the time
 * limit; the batch script then requeues the job, which continues with
 * --resume.  A second SIGINT (Ctrl-C twice) kills at once. */
#ifndef DL_SIGNALS_H
#define DL_SIGNALS_H

/* Exit status after a signal-triggered checkpoint was written: 75, EX_TEMPFAIL
 * of sysexits.h ("temporary failure; the user is invited to retry"): run the
 * same command again with --resume to continue.  When the checkpoint could not
 * be written the status is 1 as for any run-time failure. */
#define DL_EXIT_PREEMPTED 75

/* Installs the handlers (sigaction, SA_RESTART so that blocking I/O is not
 * interrupted) and clears any pending signal.  Returns 0, or -1 with errno. */
int dl_signals_install(void);
/* Restores the handlers found at install time. */
void dl_signals_uninstall(void);

/* The first signal received since install/clear (SIGTERM, SIGINT or
 * SIGUSR1), or 0.  Async-signal-safe to call anywhere. */
int dl_signals_pending(void);
void dl_signals_clear(void);

/* "SIGTERM", "SIGINT", "SIGUSR1", or "signal" for any other. */
const char *dl_signal_name(int sig);

#endif
