/* unblock.c: a weight gradient's way back from oneDNN's 16 x 16 blocked
 * layout to the executor's, summed in.  oneDNN's backward-weights
 * convolutions (f32 and bf16, on AVX-512) write dW as ABcd16b16a: blocks of
 * 16 output by 16 input channels, [K/16][C/16][R][S][16 c][16 k].  oneDNN
 * 2.6's reorder back to [K, C, R, S] with a sum is slow when a row of the
 * destination (C R S floats) spans a multiple of 4 KiB, as in ResNet-50's
 * 1x1 convolutions of 1024 and 2048 channels: 3.5 ms for 512 x 2048 where
 * this loop, which writes each destination row in order from a block row
 * of the source that stays in cache, takes 0.5 (2 threads, Zen 4).
 * common.c's backward-weights pass uses it there. */
#include "backends/cpu_onednn/unblock.h"

#include <stddef.h>

/* 1 when blocked is ABcd16b16a (or AB16b16a) f32 of user's dims, user plain
 * f32, and a row of user spans a multiple of 4 KiB. */
int dl_dnnl_unblock16_wanted(const dnnl_memory_desc_t *blocked, const dnnl_memory_desc_t *user,
                             struct dl_dnnl_unblock16 *u)
{
    int nd = user->ndims;
    if ((nd != 2 && nd != 4) || user->data_type != dnnl_f32 || blocked->data_type != dnnl_f32)
        return 0;
    long k = user->dims[0], c = user->dims[1], rs = nd == 4 ? user->dims[2] * user->dims[3] : 1;
    if (k % 16 || c % 16 || (c * rs * (long)dnnl_data_type_size(user->data_type)) % 4096)
        return 0;
    dnnl_memory_desc_t want, plain;
    if (dnnl_memory_desc_init_by_tag(&want, nd, user->dims, dnnl_f32, nd == 4 ? dnnl_ABcd16b16a : dnnl_AB16b16a) ||
        dnnl_memory_desc_init_by_tag(&plain, nd, user->dims, dnnl_f32, nd == 4 ? dnnl_abcd : dnnl_ab) ||
        !dnnl_memory_desc_equal(&want, blocked) || !dnnl_memory_desc_equal(&plain, user))
        return 0;
    *u = (struct dl_dnnl_unblock16){k, c, rs};
    return 1;
}

/* A static clone behind the public function (clang exports a public
 * target_clones function only as NAME.ifunc). */
__attribute__((target_clones("avx512f", "avx2", "default")))
static void unblock16_add(const struct dl_dnnl_unblock16 *u, const float *restrict src, float *restrict dst)
{
    long k = u->k, c = u->c, rs = u->rs;
    #pragma omp parallel for schedule(static)
    for (long kb = 0; kb < k / 16; kb++) {
        const float *panel = src + (size_t)kb * 16 * (size_t)(c * rs); /* the block row: 16 output channels */
        for (long o = 0; o < 16; o++) {
            float *row = dst + (size_t)(kb * 16 + o) * (size_t)(c * rs);
            for (long cb = 0; cb < c / 16; cb++)
                for (long t = 0; t < rs; t++) {
                    const float *block = panel + (size_t)(cb * rs + t) * 256;
                    for (long i = 0; i < 16; i++)
                        row[(cb * 16 + i) * rs + t] += block[i * 16 + o];
                }
        }
    }
}

void dl_dnnl_unblock16_add(const struct dl_dnnl_unblock16 *u, const float *src, float *dst)
{
    unblock16_add(u, src, dst);
}
