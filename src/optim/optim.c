/* optim.c: picks the update loops for an optimizer spec on a device (the
 * one registry of them: the host's, then the GPU's in a --with-cuda build)
 * and owns the optimizer's state in that device's memory. */
#include "optim/optim.h"

#include "config.h"

#include <stddef.h>

#if !defined(DL_REAL_DOUBLE) && defined(DL_HAVE_CUDA)
#include "optim/cuda/optim_cuda.h"
#endif

static const struct dl_optim_algo *const algos[] = {
    &dl_optim_sgd, &dl_optim_adagrad, &dl_optim_rmsprop, &dl_optim_adam, &dl_optim_adamw,
#if !defined(DL_REAL_DOUBLE) && defined(DL_HAVE_CUDA)
    DL_CUDA_OPTIM_ALGOS
#endif
    NULL,
};

const struct dl_optim_algo *dl_optim_algo_find(enum dl_optim_kind kind, enum dl_device_kind device)
{
    for (int i = 0; algos[i]; i++)
        if (algos[i]->kind == kind && algos[i]->device == device)
            return algos[i];
    return NULL;
}

int dl_optim_state_vectors(const struct dl_optim_spec *spec)
{
    const struct dl_optim_algo *a = dl_optim_algo_find(spec->kind, DL_DEVICE_CPU);
    return a ? a->state_vectors : -1;
}

double dl_optim_param_bytes(const struct dl_optim_spec *spec, double trainable, double state)
{
    int vectors = spec ? dl_optim_state_vectors(spec) : 1;
    return 4.0 * ((2.0 + (vectors > 0 ? vectors : 0)) * trainable + state);
}

int dl_optim_keeps_state(const struct dl_optim_spec *spec)
{
    const struct dl_optim_algo *a = dl_optim_algo_find(spec->kind, DL_DEVICE_CPU);
    return a && a->state_vectors > 0 && !(a == &dl_optim_sgd && spec->momentum == 0);
}

int dl_optim_init_on(struct dl_optim *o, const struct dl_optim_spec *spec, long n, const struct dl_device *device,
                     struct dl_error *err)
{
    o->algo = dl_optim_algo_find(spec->kind, device->kernels);
    o->state = NULL;
    o->device = device;
    if (!o->algo)
        return dl_optim_algo_find(spec->kind, DL_DEVICE_CPU)
                   ? dl_errorf(err, DL_ERR_UNSUPPORTED, "optimizer %d has no update loops on %s in this build",
                               (int)spec->kind, device->name)
                   : dl_errorf(err, DL_ERR_SPEC, "unknown optimizer %d", (int)spec->kind);
    o->spec = *spec;
    o->n = n;
    o->t = 0;
    size_t bytes = sizeof(dl_real) * (size_t)(n > 0 ? n : 1) *
                   (size_t)(o->algo->state_vectors ? o->algo->state_vectors : 1);
    o->state = device->alloc(bytes, err);
    if (!o->state)
        return DL_ERR_NOMEM;
    int rc = device->fill(o->state, 0, bytes, err);
    if (rc)
        dl_optim_free(o);
    return rc;
}

int dl_optim_init(struct dl_optim *o, const struct dl_optim_spec *spec, long n, struct dl_error *err)
{
    return dl_optim_init_on(o, spec, n, &dl_device_host, err);
}

void dl_optim_free(struct dl_optim *o)
{
    (o->device ? o->device : &dl_device_host)->free(o->state);
    o->state = NULL;
}

int dl_optim_step(struct dl_optim *o, double lr, dl_real *w, const dl_real *g)
{
    const struct dl_device *dev = o->device ? o->device : &dl_device_host;
    o->t++;
    dl_device_work_begin(dev);
    int rc = o->algo->step(&o->spec, lr, o->t, w, g, o->state, o->n);
    dl_device_work_end(dev);
    return rc;
}
