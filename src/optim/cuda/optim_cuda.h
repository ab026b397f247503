/* optim/cuda/optim_cuda.h: the optimizers' update loops on the GPU
 * (optim.c here; built --with-cuda, never run on a GPU so far), listed by
 * optim/optim.c's registry after the host's. */
#ifndef DL_OPTIM_CUDA_H
#define DL_OPTIM_CUDA_H

#include "optim/optim.h"

extern const struct dl_optim_algo dl_optim_sgd_cuda, dl_optim_adagrad_cuda, dl_optim_rmsprop_cuda, dl_optim_adam_cuda,
    dl_optim_adamw_cuda;
#define DL_CUDA_OPTIM_ALGOS \
    &dl_optim_sgd_cuda, &dl_optim_adagrad_cuda, &dl_optim_rmsprop_cuda, &dl_optim_adam_cuda, &dl_optim_adamw_cuda,

#endif
