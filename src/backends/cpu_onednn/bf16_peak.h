/* bf16_peak.h: native bf16 or not, and the measured bf16 GEMM rate (bf16_peak.c). */
#ifndef DL_ONEDNN_BF16_PEAK_H
#define DL_ONEDNN_BF16_PEAK_H

/* GFLOP/s of an n x n x n bf16 matmul into f32 on oneDNN (median of reps
 * runs); *impl names oneDNN's implementation.  0 without a JIT one. */
double dl_dnnl_bf16_gemm_gflops(int n, int reps, const char **impl);

/* 1 where oneDNN's effective ISA (ONEDNN_MAX_CPU_ISA included) has
 * AVX512-BF16 (AMX implies it): bf16 products in hardware, not emulated. */
int dl_dnnl_bf16_native(void);

#endif
