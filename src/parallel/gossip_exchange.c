/* gossip_exchange.c: one mixing step of gossip, point to point (see
 * gossip_exchange.h). */
#include "parallel/gossip_exchange.h"

#include <stdlib.h>
#include <string.h>

#include "comm/tags.h"
#include "core/clock.h"

int dl_gossip_exchange_init(struct dl_gossip_exchange *x, struct dl_comm *c, enum dl_topology t, size_t n,
                            struct dl_error *err)
{
    memset(x, 0, sizeof *x);
    x->comm = c;
    x->topology = t;
    x->n = n;
    x->max_peers = dl_mixing_max_peers(t, c->size);
    size_t k = (size_t)x->max_peers, floats = n ? n : 1;
    x->own = dl_calloc(floats, sizeof *x->own, err);
    x->heard = x->own ? dl_calloc(floats * k, sizeof *x->heard, err) : NULL;
    x->offsets = x->heard ? dl_calloc(k, sizeof *x->offsets, err) : NULL;
    x->reqs = x->offsets ? dl_calloc(2 * k, sizeof *x->reqs, err) : NULL;
    if (!x->reqs) {
        dl_gossip_exchange_free(x);
        return DL_ERR_NOMEM;
    }
    return DL_OK;
}

void dl_gossip_exchange_free(struct dl_gossip_exchange *x)
{
    if (x->in_flight) { /* let the transfers end before their buffers go */
        struct dl_error ignored;
        dl_comm_waitall(x->comm, x->reqs, 2 * x->peers, &ignored);
    }
    free(x->own);
    free(x->heard);
    free(x->offsets);
    free(x->reqs);
    memset(x, 0, sizeof *x);
}

int dl_gossip_exchange_start(struct dl_gossip_exchange *x, long step, struct dl_error *err)
{
    struct dl_comm *c = x->comm;
    x->peers = dl_mixing_offsets(x->topology, c->size, step, x->offsets, x->max_peers);
    size_t bytes = sizeof *x->own * x->n;
    x->started = dl_clock_now();
    x->in_flight = 1;
    int rc = DL_OK;
    for (int k = 0; k < x->peers && !rc; k++) {
        int from = (c->rank - x->offsets[k] + c->size) % c->size;
        rc = c->ops->irecv(c, x->heard + (size_t)k * x->n, bytes, from, DL_TAG_GOSSIP, &x->reqs[k], err);
    }
    for (int k = 0; k < x->peers && !rc; k++) {
        int to = (c->rank + x->offsets[k]) % c->size;
        rc = c->ops->isend(c, x->own, bytes, to, DL_TAG_GOSSIP, &x->reqs[x->peers + k], err);
    }
    return rc;
}

int dl_gossip_exchange_wait(struct dl_gossip_exchange *x, struct dl_error *err)
{
    int rc = dl_comm_waitall(x->comm, x->reqs, 2 * x->peers, err);
    x->in_flight = 0;
    return rc;
}

void dl_gossip_exchange_combine(const struct dl_gossip_exchange *x, size_t lo, size_t hi, float *out,
                                int keep_local_change)
{
    double each = dl_mixing_weight(x->peers);
    for (size_t i = lo; i < hi; i++) {
        double acc = x->own[i];
        for (int k = 0; k < x->peers; k++)
            acc += x->heard[(size_t)k * x->n + i];
        acc *= each;
        if (keep_local_change)
            acc += (double)out[i - lo] - x->own[i];
        out[i - lo] = (float)acc;
    }
}

size_t dl_gossip_exchange_bytes(const struct dl_gossip_exchange *x)
{
    return sizeof *x->own * x->n * (size_t)x->peers;
}
