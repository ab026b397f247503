/* job_output.h: what the ranks of a job print once (comm/agree.h).  Under a
 * parallel launcher, stderr is captured while every rank parses its options
 * and loads the network (messages every rank would print alike), then the
 * ranks agree and the lowest holder of each message prints it, naming its
 * rank only when not every rank holds it.  A single process prints at once. */
#ifndef DL_CLI_JOB_OUTPUT_H
#define DL_CLI_JOB_OUTPUT_H

#include "comm/agree.h"

struct dl_job_output {
    int saved_fd;  /* stderr while it is captured, else -1 */
    int capture_fd;
};

/* Captures stderr when a parallel launcher started this process. */
void dl_job_output_capture(struct dl_job_output *o);

/* Ends the capture; returns what was written (malloc'd, "" when nothing;
 * NULL when nothing was captured: a single process, which printed). */
char *dl_job_output_release(struct dl_job_output *o);

/* Prints text (lines "dltrain: ...") on stderr when a says this rank
 * prints, with "rank R: " after each line's "PROG: " when a->named. */
void dl_job_output_print(const char *text, int rank, const struct dl_agreement *a);

/* The seconds failed ranks wait for one another (dl_agree_failed). */
#define DL_JOB_AGREE_SECONDS 5.0

#endif
