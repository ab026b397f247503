/* seq_rows.h: a batch of sequences, stored [N][C][T] (core/shape.h), as the
 * matrix of its positions' feature rows that the GEMM kernels multiply, and
 * back.  Row (n, t) is row n sn + t st: sample-major (sn = T, st = 1: the
 * mixture of experts) or time-major (sn = 1, st = N: the recurrent layers,
 * whose steps are then blocks of N rows). */
#ifndef DL_BACKENDS_CPU_BLAS_SEQ_ROWS_H
#define DL_BACKENDS_CPU_BLAS_SEQ_ROWS_H

/* rows[n sn + t st][k] = x[n][k][t] (back = 0), or the reverse copy (back = 1). */
static inline void dl_seq_rows(float *rows, float *x, long N, long C, long T, long sn, long st, int back)
{
    /* strides of n, k and t in the rows and in the samples */
    const long r[3] = {sn * C, 1, st * C}, s[3] = {C * T, T, 1};
    float *dst = back ? x : rows;
    const float *src = back ? rows : x;
    const long *ds = back ? s : r, *ss = back ? r : s;
    #pragma omp parallel for schedule(static)
    for (long n = 0; n < N; n++)
        for (long k = 0; k < C; k++)
            for (long t = 0; t < T; t++)
                dst[n * ds[0] + k * ds[1] + t * ds[2]] = src[n * ss[0] + k * ss[1] + t * ss[2]];
}

#endif
