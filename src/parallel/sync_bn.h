/* sync_bn.h: synchronised batch normalisation across data-parallel ranks.
 * The batch-norm op asks for per-channel sums over every rank's samples
 * (struct dl_op_call.sync_sum); this provides them on a communicator of its
 * own (so that it never interleaves with the gradient allreduces running on
 * the communication thread), as an allgather of doubles summed in rank
 * order: exact, and the same on every rank. */
#ifndef DL_SYNC_BN_H
#define DL_SYNC_BN_H

#include "comm/comm.h"

struct dl_sync_bn;

int dl_sync_bn_create(struct dl_comm *world, struct dl_sync_bn **out, struct dl_error *err);
void dl_sync_bn_free(struct dl_sync_bn *s);
/* The dl_op_call.sync_sum function (ctx = the struct dl_sync_bn). */
void dl_sync_bn_sum(void *ctx, double *v, int n);
/* The first failure of a sum, if any (the op interface cannot report it). */
int dl_sync_bn_status(const struct dl_sync_bn *s, struct dl_error *err);

#endif
