/* cuda/embedding_kernels.h: the CUDA kernels of the lookup tables
 * (embedding_kernels.cu, compiled by nvcc), behind plain C functions so
 * that embedding.c needs no CUDA language.  Sequences are N samples of
 * [C][T] (core/shape.h: feature k of position t at k T + t), token ids N
 * samples of T int32 values, tables row-major [rows][C]; every pointer is
 * device memory.  Each returns 0, or the CUDA error (a cudaError_t) of the
 * launch. */
#ifndef DL_BACKENDS_CUDA_EMBEDDING_KERNELS_H
#define DL_BACKENDS_CUDA_EMBEDDING_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y[n][k][t] = w[ids[n][t] - row0][k] for an id among the table's vocab
 * rows [row0, row0 + vocab), else 0 (ops/embedding.c). */
int dl_cuda_embedding_forward(const int32_t *ids, int N, long T, long C, long row0, long vocab, const float *w,
                              float *y);
/* dw[ids[n][t] - row0][k] += dy[n][k][t] over samples, then positions, in
 * order: one thread per feature, so no two threads add into one value and
 * the sums are the reference's, bit for bit (no atomics). */
int dl_cuda_embedding_backward(const int32_t *ids, const float *dy, int N, long T, long C, long row0, long vocab,
                               float *dw);

/* y[n][k][t] = x[n][k][t] + w[p0 + t][k] (ops/position_embedding.c). */
int dl_cuda_position_embedding_forward(const float *x, int N, long T, long C, long p0, const float *w, float *y);
/* dw[p0 + t][k] += sum over n of dy[n][k][t], in double in sample order,
 * one thread per (position, feature). */
int dl_cuda_position_embedding_backward(const float *dy, int N, long T, long C, long p0, float *dw);

#ifdef __cplusplus
}
#endif

#endif
