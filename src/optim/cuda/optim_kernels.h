/* optim/cuda/optim_kernels.h: the optimizers' update loops on a GPU
 * (optim_kernels.cu, compiled by nvcc), one thread per weight applying
 * optim/update_rules.h's rule, behind plain C functions for optim/cuda/optim.c.
 * Every pointer is device memory; each returns 0, or the CUDA error (a
 * cudaError_t) of the launch. */
#ifndef DL_BACKENDS_CUDA_OPTIM_KERNELS_H
#define DL_BACKENDS_CUDA_OPTIM_KERNELS_H

#ifdef __cplusplus
extern "C" {
#endif

/* SGD: buf unused without momentum (mu 0). */
int dl_cuda_sgd(float *w, const float *g, float *buf, long n, float wd, float mu, int nesterov, float rate);
int dl_cuda_adagrad(float *w, const float *g, float *sum, long n, double wd, double eps, double lr);
/* RMSProp: buf unused without momentum (mu 0). */
int dl_cuda_rmsprop(float *w, const float *g, float *v, float *buf, long n, double wd, double alpha, double eps,
                    double mu, double lr);
int dl_cuda_adam(float *w, const float *g, float *m, float *v, long n, int decoupled, double b1, double b2, double c1,
                 double c2, double wd, double shrink, double eps, double lr);

#ifdef __cplusplus
}
#endif

#endif
