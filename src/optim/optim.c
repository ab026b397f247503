/* optim.c: picks the algorithm for an optimizer spec and owns its state. */
#include "optim/optim.h"

#include <stdlib.h>

static const struct dl_optim_algo *algo_for(enum dl_optim_kind k)
{
    switch (k) {
    case DL_OPTIM_SGD: return &dl_optim_sgd;
    case DL_OPTIM_ADAGRAD: return &dl_optim_adagrad;
    case DL_OPTIM_RMSPROP: return &dl_optim_rmsprop;
    case DL_OPTIM_ADAM: return &dl_optim_adam;
    case DL_OPTIM_ADAMW: return &dl_optim_adamw;
    }
    return NULL;
}

int dl_optim_state_vectors(const struct dl_optim_spec *spec)
{
    const struct dl_optim_algo *a = algo_for(spec->kind);
    return a ? a->state_vectors : -1;
}

int dl_optim_keeps_state(const struct dl_optim_spec *spec)
{
    const struct dl_optim_algo *a = algo_for(spec->kind);
    return a && a->state_vectors > 0 && !(a == &dl_optim_sgd && spec->momentum == 0);
}

int dl_optim_init(struct dl_optim *o, const struct dl_optim_spec *spec, long n, struct dl_error *err)
{
    o->algo = algo_for(spec->kind);
    if (!o->algo)
        return dl_errorf(err, DL_ERR_SPEC, "unknown optimizer %d", (int)spec->kind);
    o->spec = *spec;
    o->n = n;
    o->t = 0;
    o->state = dl_calloc((size_t)(n > 0 ? n : 1) * (size_t)(o->algo->state_vectors ? o->algo->state_vectors : 1),
                         sizeof(dl_real), err);
    return o->state ? DL_OK : DL_ERR_NOMEM;
}

void dl_optim_free(struct dl_optim *o)
{
    free(o->state);
    o->state = NULL;
}

void dl_optim_step(struct dl_optim *o, double lr, dl_real *w, const dl_real *g)
{
    o->t++;
    o->algo->step(&o->spec, lr, o->t, w, g, o->state, o->n);
}
