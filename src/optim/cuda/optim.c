/* optim/cuda/optim.c: the optimizers' update loops on a GPU (optim.h's
 * algorithms with device DL_DEVICE_CUDA; built --with-cuda, never run on a
 * GPU so far): weights, gradients and state in device memory, the same
 * per-step constants as the host's loops, each weight updated by the rule
 * the host applies (optim_kernels.cu).  A failed launch is returned as
 * DL_ERR_INTERNAL. */
#include "optim/cuda/optim_cuda.h"

#include "backends/cuda/cuda.h"
#include "optim/cuda/optim_kernels.h"

static int launched(int status)
{
    return status ? DL_ERR_INTERNAL : DL_OK;
}

static int sgd_step(const struct dl_optim_spec *s, double lr, long t, dl_real *w, const dl_real *g, dl_real *buf,
                    long n, long stride)
{
    return launched(dl_cuda_sgd(w, g, buf, n, (dl_real)s->weight_decay, (dl_real)s->momentum, s->nesterov,
                                (dl_real)lr));
}

static int adagrad_step(const struct dl_optim_spec *s, double lr, long t, dl_real *w, const dl_real *g,
                        dl_real *sum, long n, long stride)
{
    return launched(dl_cuda_adagrad(w, g, sum, n, s->weight_decay, s->eps, lr));
}

static int rmsprop_step(const struct dl_optim_spec *s, double lr, long t, dl_real *w, const dl_real *g,
                        dl_real *state, long n, long stride)
{
    return launched(dl_cuda_rmsprop(w, g, state, state + stride, n, s->weight_decay, s->alpha, s->eps, s->momentum, lr));
}

static int adam_update(const struct dl_optim_spec *s, double lr, long t, dl_real *w, const dl_real *g,
                       dl_real *state, long n, long stride, int decoupled)
{
    double c1, c2, shrink;
    dl_optim_adam_corrections(s, lr, t, &c1, &c2, &shrink);
    return launched(dl_cuda_adam(w, g, state, state + stride, n, decoupled, s->beta1, s->beta2, c1, c2, s->weight_decay,
                                 shrink, s->eps, lr));
}

static int adam_step(const struct dl_optim_spec *s, double lr, long t, dl_real *w, const dl_real *g, dl_real *state,
                     long n, long stride)
{
    return adam_update(s, lr, t, w, g, state, n, stride, 0);
}

static int adamw_step(const struct dl_optim_spec *s, double lr, long t, dl_real *w, const dl_real *g, dl_real *state,
                      long n, long stride)
{
    return adam_update(s, lr, t, w, g, state, n, stride, 1);
}

#define CUDA_OPTIM(SYM, NAME, SLOTS, STEP, KIND)                                                  \
    const struct dl_optim_algo SYM = {.name = NAME, .state_vectors = SLOTS, .step = STEP, .kind = KIND, \
                                      .device = DL_DEVICE_CUDA};
CUDA_OPTIM(dl_optim_sgd_cuda, "sgd", 1, sgd_step, DL_OPTIM_SGD)
CUDA_OPTIM(dl_optim_adagrad_cuda, "adagrad", 1, adagrad_step, DL_OPTIM_ADAGRAD)
CUDA_OPTIM(dl_optim_rmsprop_cuda, "rmsprop", 2, rmsprop_step, DL_OPTIM_RMSPROP)
CUDA_OPTIM(dl_optim_adam_cuda, "adam", 2, adam_step, DL_OPTIM_ADAM)
CUDA_OPTIM(dl_optim_adamw_cuda, "adamw", 2, adamw_step, DL_OPTIM_ADAMW)
