/* kernel_check.h: helpers of the kernel tests: a one-layer graph from YAML,
 * random tensors, the relative error used by every comparison (max |a-b|
 * over max |b|), and running one kernel on a layer in plain NCHW tensors
 * (reordering to and from the layouts it negotiates, as the executor does,
 * and copying to and from the kernel's device: host memory for CPU kernels,
 * the GPU's for a CUDA kernel). */
#ifndef DL_TESTS_KERNEL_CHECK_H
#define DL_TESTS_KERNEL_CHECK_H

#include "backends/kernel.h"
#include "spec/netfile.h"
#include "layer_params.h"

/* Everything one pass over a layer reads and writes, plain NCHW. */
struct kc_tensors {
    int batch;
    float *x[DL_MAX_INPUTS], *y, *dy, *dx[DL_MAX_INPUTS];
    float *param[TEST_MAX_PARAMS], *dparam[TEST_MAX_PARAMS];
    int *labels;          /* a loss layer's: batch x kc_positions class indices; else NULL */
    const int *doc_start; /* document masking: batch x T document starts (op.h's doc_start); NULL: none */
};

double kc_rel_err(const float *a, const float *b, long n);
void kc_fill(float *v, long n, uint64_t seed);
/* n token ids in [0, limit) (i32 in 4-byte elements: core/shape.h). */
void kc_fill_ids(float *v, long n, int limit, uint64_t seed);
/* Allocates and fills inputs (token ids below the kind's id_limit for an
 * i32 input), parameters (positive variances for batch
 * norm), output gradients, pre-set weight gradients (to check += ) and, for
 * a loss, labels (random classes). */
void kc_alloc(struct kc_tensors *t, const struct dl_layer *l, int batch, uint64_t seed);
/* Labels per sample of layer l: T for a loss on a sequence [T, C] (every 7th
 * of them -100, ignored), else 1. */
long kc_positions(const struct dl_layer *l);
void kc_free(struct kc_tensors *t, const struct dl_layer *l);
/* forward (training mode) then backward of k on l in slices of mb samples,
 * on k's device (DL_ERR_UNSUPPORTED when this build lacks it); slice j's
 * first sample is j * mb of the batch, under one dropout key.  A failure
 * the kernel records (kernel.h's dl_kernel_fail) is printed and returned. */
#define KC_KEY 0x6b636b6579ULL /* the calls' random key (dropout's mask) */
int kc_run(const struct dl_kernel *k, const struct dl_layer *l, struct kc_tensors *t, int mb);
/* The same with input 0's producer offering layout offer (a blocked conv
 * output, say): the kernel negotiates from that. */
int kc_run_offered(const struct dl_kernel *k, const struct dl_layer *l, struct kc_tensors *t, int mb,
                   enum dl_layout offer);
/* The same with a ReLU fused into the kernel when relu is 1 (cfg.relu,
 * kernel.h: t->y gets max(y, 0) and t->dy is that output's gradient). */
int kc_run_fused(const struct dl_kernel *k, const struct dl_layer *l, struct kc_tensors *t, int mb,
                 enum dl_layout offer, int relu);

#ifdef TEST_ON_CUDA
/* Buffers on a kernel's device for a test that lays out its own tensors
 * (test_kernels' bf16 runs on the GPU), through the same copies as kc_run:
 * kc_device_copy makes a copy of `bytes` of host there (zeros when host
 * is NULL; NULL when that fails), kc_device_read copies one back into
 * host, and kc_device_release frees them all, returning DL_ERR_NOMEM when
 * an allocation or copy failed, else DL_OK. */
struct kc_device_bufs *kc_device_bufs_new(const struct dl_kernel *k);
void *kc_device_copy(struct kc_device_bufs *b, const void *host, size_t bytes);
void kc_device_read(struct kc_device_bufs *b, void *host, const void *dev, size_t bytes);
int kc_device_release(struct kc_device_bufs *b);
#endif

#endif
