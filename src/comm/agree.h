/* agree.h: one message per job.  What every rank of a job would print (a
 * bad option or network file, which every rank reads the same) is printed
 * by one rank, and every rank exits with the same status: the ranks compare
 * hashes of their messages, and a message is printed by the lowest rank
 * that holds it, naming that rank only when not every rank holds it (a
 * rank-specific failure).  The status is the lowest failing rank's. */
#ifndef DL_COMM_AGREE_H
#define DL_COMM_AGREE_H

#include <stdint.h>

#include "comm/comm.h"

/* What one rank does with its message. */
struct dl_agreement {
    int status; /* the job's status: the lowest failing rank's (0: none failed, or none heard of) */
    int print;  /* 1: print this rank's message (its lowest holder; never an empty message) */
    int named;  /* 1: not every rank holds this message, so its printer names its rank */
    int all;    /* dl_agree_failed: every rank failed and was heard from (each will exit by itself) */
};

/* FNV-1a of text; 0 for NULL or "" (no message). */
uint64_t dl_agree_hash(const char *text);

/* Every rank of comm calls this, at the same point, with its status (0:
 * fine) and its message's hash: one allgather. */
int dl_agree_all(struct dl_comm *comm, int status, uint64_t hash, struct dl_agreement *out, struct dl_error *err);

/* Only the ranks that failed (status != 0) call this, at any time: each
 * sends its status and hash to every rank and listens for the others'
 * until all have failed or timeout_s has passed; the decision is taken
 * over the ranks heard from (a rank not heard from has not failed, or
 * failed too late: named is 1).  When `all` is 1 every message has
 * arrived and every send completed; when it is 0 the caller should end
 * the job (comm->ops->abort) after printing, since the ranks not heard
 * from may wait for this one (and messages to them are still in flight). */
void dl_agree_failed(struct dl_comm *comm, int status, uint64_t hash, double timeout_s, struct dl_agreement *out);

#endif
