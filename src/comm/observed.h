/* observed.h: a communicator that forwards every call to another and tells
 * an observer when each blocking call begins and ends: the stall watchdog
 * (parallel/watchdog.c) and the flight recorder (comm/flight.c) watch a
 * rank's communicators through it, one wrapper each. */
#ifndef DL_COMM_OBSERVED_H
#define DL_COMM_OBSERVED_H

#include "comm/comm.h"

struct dl_comm_observer {
    /* Before a blocking call: what it is ("allreduce", "receive", ...),
     * the group rank it sends to or waits for (-1: the whole group) and
     * its bytes (this rank's part); returns a token for leave. */
    long (*enter)(void *ctx, const char *call, int peer, size_t bytes);
    void (*leave)(void *ctx, long token);
    /* Frees ctx when the wrapper closes (NULL: ctx is not the wrapper's). */
    void (*destroy)(void *ctx);
};

/* Replaces *c by a communicator that forwards to it and reports to o
 * (ctx).  owns: closing the wrapper closes *c too (else *c stays the
 * caller's, to close after the wrapper).  On error *c is unchanged. */
int dl_comm_observe(struct dl_comm **c, const struct dl_comm_observer *o, void *ctx, int owns, struct dl_error *err);

/* The communicator a wrapper forwards to (c itself when c is none). */
struct dl_comm *dl_comm_observed_inner(struct dl_comm *c);

/* The context with which o observes c (c or a wrapper it forwards to),
 * NULL when o does not. */
void *dl_comm_observer_ctx(struct dl_comm *c, const struct dl_comm_observer *o);

#endif
