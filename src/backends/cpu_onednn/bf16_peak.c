/* bf16_peak.c: whether oneDNN computes bf16 natively on this CPU, and the
 * machine's measured bf16 GEMM rate, what a bf16 run's
 * GFLOP/s are a share of (bench step --precision bf16): oneDNN's matmul on
 * n x n bf16 operands into f32, as the bf16 kernels accumulate, the median
 * of a few runs on the threads in use.  0 where oneDNN has no JIT bf16
 * matmul (CPUs without AVX-512: only its reference code, which is no peak). */
#include "backends/cpu_onednn/bf16_peak.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu_onednn/common.h"
#include "core/clock.h"
#include "core/dtype.h"

double dl_dnnl_bf16_gemm_gflops(int n, int reps, const char **impl)
{
    *impl = "none";
    dnnl_memory_desc_t a, b, c;
    dnnl_dims_t d = {n, n};
    dnnl_memory_desc_init_by_tag(&a, 2, d, dnnl_bf16, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&b, 2, d, dnnl_bf16, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&c, 2, d, dnnl_f32, dnnl_ab);
    dnnl_matmul_desc_t md;
    struct dl_dnnl_prim p = {0};
    struct dl_error err = {0};
    static const int args[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, 0};
    if (reps < 1 || dnnl_matmul_desc_init(&md, &a, &b, NULL, &c) != dnnl_success ||
        dl_dnnl_prim_init(&p, &md, NULL, args, &err))
        return 0;
    const char *name = "";
    dnnl_primitive_desc_query(p.pd, dnnl_query_impl_info_str, 0, &name);
    static char kept[64];
    snprintf(kept, sizeof kept, "%s", name);
    size_t nn = (size_t)n * (size_t)n;
    dl_bf16 *x = malloc(nn * sizeof *x), *w = malloc(nn * sizeof *w);
    float *y = malloc(nn * sizeof *y);
    void *scratch = p.scratch ? malloc(p.scratch) : NULL;
    double t[16], gflops = 0;
    if (x && w && y && (scratch || !p.scratch) && strncmp(kept, "ref", 3) != 0) {
        for (size_t i = 0; i < nn; i++)
            x[i] = w[i] = dl_f32_to_bf16((float)(i % 7) * 0.25f);
        void *ptr[3] = {x, w, y};
        reps = reps > 16 ? 16 : reps;
        dl_dnnl_prim_run(&p, ptr, scratch); /* warm-up */
        for (int r = 0; r < reps; r++) {
            double t0 = dl_clock_now();
            dl_dnnl_prim_run(&p, ptr, scratch);
            t[r] = dl_clock_now() - t0;
        }
        gflops = 2.0 * n * (double)n * n / dl_median(t, reps) / 1e9;
        *impl = kept;
    }
    free(x), free(w), free(y), free(scratch);
    dl_dnnl_prim_free(&p);
    return gflops;
}

int dl_dnnl_bf16_native(void)
{
    unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    return (isa & (unsigned)dnnl_cpu_isa_avx512_core_bf16) == (unsigned)dnnl_cpu_isa_avx512_core_bf16;
}
