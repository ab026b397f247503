/* vec8.h: what the cpu_simd loops over 8 floats share: GCC's vector types
 * (the loops are compiled for AVX2 and for the baseline, GCC picking at
 * load time: CLONE), loads and stores that need no alignment, a lane
 * select, and exp in float on 8 lanes (Cephes' expf: range reduction by
 * ln 2 in two parts, degree-5 minimax polynomial, within 2 ulp; below
 * -87.3 it is 0). */
#ifndef DL_BACKENDS_CPU_SIMD_VEC8_H
#define DL_BACKENDS_CPU_SIMD_VEC8_H

typedef float v8 __attribute__((vector_size(32)));
typedef float v8f __attribute__((vector_size(32), aligned(4))); /* unaligned */
typedef int v8i __attribute__((vector_size(32)));
typedef double v8d __attribute__((vector_size(64)));
#define LD8(p) (*(const v8f *)(p))
#define ST8(p, v) (*(v8f *)(p) = (v))
/* a where mask (lanes of -1), else b */
#define SEL(mask, a, b) ((v8)(((v8i)(a) & (mask)) | ((v8i)(b) & ~(mask))))
#define INLINE static inline __attribute__((always_inline))
/* the loops, for AVX2 and for the baseline (GCC picks at load time) */
#define CLONE __attribute__((target_clones("avx2", "default"))) static

/* y = exp(x) on 8 lanes: x = n ln2 + r, |r| <= ln2 / 2, exp(r) by Cephes'
 * polynomial, 2^n from the exponent bits.  A macro, not a function: no
 * call passes a vector (GCC and clang refuse AVX vector arguments in the
 * baseline clone). */
#define EXP8(y, x)                                                                                             \
    do {                                                                                                       \
        const v8 x_ = (x), top_ = (v8){0} + 88.3762626647949f, bottom_ = (v8){0} - 87.3365447505531f;          \
        v8 lo_ = SEL(x_ > top_, top_, x_);                                                                     \
        lo_ = SEL(lo_ < bottom_, bottom_, lo_);                                                                \
        v8i under_ = x_ < bottom_;                                                                             \
        v8 t_ = lo_ * 1.44269504088896341f + 0.5f;                                                             \
        v8i n_ = __builtin_convertvector(t_, v8i); /* toward zero */                                          \
        n_ += __builtin_convertvector(n_, v8) > t_; /* floor: -1 where that rounded a negative t up */         \
        v8 fn_ = __builtin_convertvector(n_, v8);                                                              \
        v8 r_ = lo_ - fn_ * 0.693359375f;                                                                      \
        r_ = r_ - fn_ * -2.12194440e-4f;                                                                       \
        v8 p_ = (v8){0} + 1.9875691500E-4f;                                                                    \
        p_ = p_ * r_ + 1.3981999507E-3f;                                                                       \
        p_ = p_ * r_ + 8.3334519073E-3f;                                                                       \
        p_ = p_ * r_ + 4.1665795894E-2f;                                                                       \
        p_ = p_ * r_ + 1.6666665459E-1f;                                                                       \
        p_ = p_ * r_ + 5.0000001201E-1f;                                                                       \
        p_ = p_ * r_ * r_ + r_ + 1.0f;                                                                         \
        v8i bits_ = (n_ + 127) << 23;                                                                          \
        (y) = (v8)((v8i)(p_ * (v8)bits_) & ~under_);                                                           \
    } while (0)

#endif
