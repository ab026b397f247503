/* strategy.c: option parsing and the choice of a consistency strategy. */
#include "parallel/strategy.h"

#include <stdlib.h>
#include <string.h>

#include "core/parse.h"

int dl_consistency_parse(const char *text, struct dl_parallel_opts *o, struct dl_error *err)
{
    if (strcmp(text, "sync") == 0) {
        o->consistency = DL_CONS_SYNC;
        return DL_OK;
    }
    if (strcmp(text, "async") == 0) {
        o->consistency = DL_CONS_ASYNC;
        o->staleness = -1;
        return DL_OK;
    }
    if (strncmp(text, "ssp:", 4) == 0) {
        int rc = dl_parse_int("--consistency ssp:S", text + 4, 0, 1000000, &o->staleness, err);
        if (!rc)
            o->consistency = DL_CONS_SSP;
        return rc;
    }
    if (strncmp(text, "local-sgd:", 10) == 0) {
        int rc = dl_parse_int("--consistency local-sgd:K", text + 10, 1, 1000000, &o->local_steps, err);
        if (!rc)
            o->consistency = DL_CONS_LOCAL_SGD;
        return rc;
    }
    return dl_errorf(err, DL_ERR_SPEC, "--consistency: expected sync, ssp:S, async or local-sgd:K, found '%s'", text);
}

int dl_strategy_create(struct dl_comm *c, struct dl_exec *e, struct dl_optim *o,
                       const struct dl_parallel_opts *po, uint64_t seed,
                       void (*warn)(void *ctx, const char *msg), void *warn_ctx,
                       struct dl_strategy **out, struct dl_error *err)
{
    struct dl_strategy *s = dl_calloc(1, sizeof *s, err);
    if (!s)
        return DL_ERR_NOMEM;
    s->comm = c;
    s->exec = e;
    s->optim = o;
    int rc;
    if (c->size == 1)
        rc = dl_strategy_serial(s, err);
    else
        switch (po->consistency) {
        case DL_CONS_SYNC: rc = dl_strategy_sync(s, po, seed, warn, warn_ctx, err); break;
        case DL_CONS_LOCAL_SGD: rc = dl_strategy_local_sgd(s, po, err); break;
        default: rc = dl_strategy_ps_worker(s, po, err); break;
        }
    if (rc) {
        free(s);
        return rc;
    }
    *out = s;
    return DL_OK;
}

void dl_strategy_free(struct dl_strategy *s)
{
    if (!s)
        return;
    if (s->ops && s->ops->destroy)
        s->ops->destroy(s);
    free(s);
}
