/* vec.h: the vector kernels the reference conv and fc are built from: dot
 * products and y += a*x, singly and four at a time.  `omp simd` because gcc
 * -O2 does not vectorise loops of unknown length on its own; the order of a
 * dot product's partial sums then depends on the vector width fixed at
 * compile time, never on the number of threads. */
#ifndef DL_OPS_VEC_H
#define DL_OPS_VEC_H

#include "core/real.h"

/* Dot products sum blocks of DL_VEC_BLOCK products in dl_real (vector lanes,
 * no conversions) and add the block sums in double, so a sum over a whole
 * image plane or batch keeps its digits at close to float speed. */
#define DL_VEC_BLOCK 64

/* sum_i x[i]*y[i]. */
static inline double dl_vec_dot(const dl_real *restrict x, const dl_real *restrict y, long n)
{
    double s = 0;
    for (long i0 = 0; i0 < n; i0 += DL_VEC_BLOCK) {
        long i1 = n - i0 < DL_VEC_BLOCK ? n : i0 + DL_VEC_BLOCK;
        dl_real f = 0;
        #pragma omp simd reduction(+ : f)
        for (long i = i0; i < i1; i++)
            f += x[i] * y[i];
        s += f;
    }
    return s;
}

/* y[i] += a*x[i]; x and y must not overlap. */
static inline void dl_vec_axpy(dl_real *restrict y, dl_real a, const dl_real *restrict x, long n)
{
    #pragma omp simd
    for (long i = 0; i < n; i++)
        y[i] += a * x[i];
}

/* y[i] += a[0]*x[0][i] + a[1]*x[1][i] + a[2]*x[2][i] + a[3]*x[3][i]: four
 * axpys in one pass, so y is loaded and stored once instead of four times.
 * The additions happen in the same order, so the bits equal four axpys. */
static inline void dl_vec_axpy4(dl_real *restrict y, const dl_real a[4], const dl_real *const x[4], long n)
{
    const dl_real a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
    const dl_real *restrict x0 = x[0], *restrict x1 = x[1], *restrict x2 = x[2], *restrict x3 = x[3];
    #pragma omp simd
    for (long i = 0; i < n; i++)
        y[i] = y[i] + a0 * x0[i] + a1 * x1[i] + a2 * x2[i] + a3 * x3[i];
}

/* s[j] = sum_i x[j][i]*y[i] for j < 4: four dot products sharing the loads
 * of y. */
static inline void dl_vec_dot4(double s[4], const dl_real *const x[4], const dl_real *restrict y, long n)
{
    const dl_real *restrict x0 = x[0], *restrict x1 = x[1], *restrict x2 = x[2], *restrict x3 = x[3];
    s[0] = s[1] = s[2] = s[3] = 0;
    for (long i0 = 0; i0 < n; i0 += DL_VEC_BLOCK) {
        long i1 = n - i0 < DL_VEC_BLOCK ? n : i0 + DL_VEC_BLOCK;
        dl_real f0 = 0, f1 = 0, f2 = 0, f3 = 0;
        #pragma omp simd reduction(+ : f0, f1, f2, f3)
        for (long i = i0; i < i1; i++) {
            f0 += x0[i] * y[i];
            f1 += x1[i] * y[i];
            f2 += x2[i] * y[i];
            f3 += x3[i] * y[i];
        }
        s[0] += f0;
        s[1] += f1;
        s[2] += f2;
        s[3] += f3;
    }
}

#endif
