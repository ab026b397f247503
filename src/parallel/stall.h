/* stall.h: stall detection for collective steps.  Every rank tells rank 0
 * (and rank 0 tells rank 1) that it reached a step's gradient exchange, with a
 * tiny non-blocking message.  While a rank waits for the exchange, it polls:
 * after warn_s seconds rank 0 (rank 1 about rank 0) reports which ranks have
 * not arrived and in which step; after timeout_s the wait fails with that
 * message, and the trainer aborts the whole job instead of hanging forever. */
#ifndef DL_STALL_H
#define DL_STALL_H

#include "comm/comm.h"

struct dl_stall;

/* warn is called with a one-line message (rank 0 or 1 only); may be NULL. */
int dl_stall_create(struct dl_comm *c, double warn_s, double timeout_s,
                    void (*warn)(void *ctx, const char *msg), void *warn_ctx, struct dl_stall **out,
                    struct dl_error *err);
/* Announces that this rank reached the exchange of step (1-based). */
int dl_stall_arrive(struct dl_stall *s, long step, struct dl_error *err);
/* Poll function for dl_grad_sync_end (ctx = the struct dl_stall). */
int dl_stall_poll(void *ctx, double waited_s, struct dl_error *err);
/* Sends the final message and drains the others' (collective: every rank). */
int dl_stall_finish(struct dl_stall *s, struct dl_error *err);
void dl_stall_free(struct dl_stall *s);

#endif
