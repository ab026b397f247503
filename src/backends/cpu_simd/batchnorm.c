/* batchnorm.c: the "simd" batch normalisation kernel, the default for
 * batchnorm, on NCHW, nChw8c or nChw16c as its input arrives.  Its batch
 * statistics and backward's two sums per channel are accumulated in double,
 * as the reference op and PyTorch on CPUs do.  oneDNN 2.6 (the previous
 * default) sums a channel's N*H*W values in one float register; on raw
 * images a third of a channel's (x - mean)^2 are one value (the exact-zero
 * background), whose rounding then never averages out, and at batch 64 its
 * variance was 1-2e-4 off, which moved gradients by 1e-3..1e-2 (issue 18).
 *
 * A plane is a sample's channel in NCHW, its block of B = 8 or 16 channels
 * otherwise (an [N, C] batch of vectors is read as the blocked layout it
 * also is when 8 divides C).  The loops (batchnorm_loops.c) see a plane as
 * runs of 16 floats whose lane j belongs to channel j % B of the block
 * (NCHW: every lane to the plane's channel).  A unit of work is one channel
 * block over a chunk of samples (chunk from the shapes alone); each is
 * summed by one thread into its own slots, which are then added in chunk
 * order, so results do not depend on the thread count.  Honours --sync-bn's
 * hook (sync_stats), as the reference does; can apply a fused ReLU. */
#include "backends/cpu_simd/simd.h"

#include <math.h>
#include <stdlib.h>

#include "backends/attr.h"
#include "ops/kinds.h"

enum { BN_WEIGHT, BN_BIAS, BN_RUNNING_MEAN, BN_RUNNING_VAR };
enum { LANES = DL_SIMD_BN_LANES };
enum { UNIT_FLOATS = 4096 };                        /* at least this many floats per unit of work (or a whole chunk) */
enum { NORMALIZE_PARAMS = 3, GRADIENT_PARAMS = 5 }; /* rows of q in simd.h's dl_simd_bn_normalize, _input_gradient */

struct simd_bn {
    int C, block; /* block: channels per plane, 1 (NCHW), 8 or 16 */
    int CB;       /* planes per sample */
    long len;     /* floats per plane */
    int chunk;    /* samples per unit of work */
    int mb;
    int relu;     /* a fused ReLU (kernel.h) */
    double eps, momentum;
};

/* ---------------------------------------------------------------- units */
/* Where a call's scratch lives in the workspace. */
struct scratch {
    double *sums;    /* two per channel, then the count of values per channel */
    double *slots;   /* two per unit and channel of its block: 2 x chunks x CB x block */
    double *means;   /* lane table of the means: CB x 16 */
    double *staging; /* per channel, one row per elementwise parameter */
    float *params;   /* lane tables of the elementwise parameters: CB x K x 16 */
};

/* Bytes of scratch for mb samples, and the pointers into ws when given. */
static size_t scratch_of(const struct simd_bn *b, int mb, int backward, void *ws, struct scratch *s)
{
    size_t C = (size_t)b->C, lanes = (size_t)b->CB * LANES, per_chunk = (size_t)b->CB * (size_t)b->block;
    size_t K = backward ? GRADIENT_PARAMS : NORMALIZE_PARAMS;
    size_t n_sums = 2 * C + 1, n_slots = 2 * (size_t)mb * per_chunk;
    size_t doubles = n_sums + n_slots + lanes + K * C;
    if (ws) {
        s->sums = ws;
        s->slots = s->sums + n_sums;
        s->means = s->slots + n_slots;
        s->staging = s->means + lanes;
        s->params = (float *)(s->staging + K * C);
    }
    return doubles * sizeof *s->sums + K * lanes * sizeof *s->params;
}

/* Unit u of a call: a channel block over a chunk of samples. */
struct unit {
    int cb, chunk, count;
    long at; /* first float */
};

static struct unit unit_of(const struct simd_bn *b, int batch, long u)
{
    struct unit w = {.cb = (int)(u % b->CB), .chunk = (int)(u / b->CB)};
    int n0 = w.chunk * b->chunk;
    w.count = batch - n0 < b->chunk ? batch - n0 : b->chunk;
    w.at = ((long)n0 * b->CB + w.cb) * b->len;
    return w;
}

static int chunks_of(const struct simd_bn *b, int batch)
{
    return (batch + b->chunk - 1) / b->chunk;
}

static long units_of(const struct simd_bn *b, int batch)
{
    return (long)chunks_of(b, batch) * b->CB;
}

/* Channel of lane j in channel block cb (C or more: a blocked layout's padding). */
static int lane_channel(const struct simd_bn *b, int cb, int j)
{
    return b->block == 1 ? cb : cb * b->block + j % b->block;
}

/* t[cb][j] = v[lane_channel(cb, j)], 0 for padding channels. */
static void lane_table(const struct simd_bn *b, const double *v, double *t)
{
    for (int cb = 0; cb < b->CB; cb++)
        for (int j = 0; j < LANES; j++) {
            int ch = lane_channel(b, cb, j);
            t[cb * LANES + j] = ch < b->C ? v[ch] : 0;
        }
}

/* The same for K per-channel rows v[k][C], as floats: q[cb][k][j]. */
static void lane_params(const struct simd_bn *b, int K, const double *v, float *q)
{
    for (int cb = 0; cb < b->CB; cb++)
        for (int k = 0; k < K; k++)
            for (int j = 0; j < LANES; j++) {
                int ch = lane_channel(b, cb, j);
                q[(cb * K + k) * LANES + j] = ch < b->C ? (float)v[k * b->C + ch] : 0;
            }
}

/* The 16 lane sums of a unit into its slots: one per channel of its block. */
static void fold_lanes(const struct simd_bn *b, const double *lanes, double *slots)
{
    switch (b->block) {
    case 16:
        for (int j = 0; j < LANES; j++)
            slots[j] = lanes[j];
        break;
    case 8:
        for (int j = 0; j < 8; j++)
            slots[j] = lanes[j] + lanes[j + 8];
        break;
    default: { /* NCHW: every lane is the plane's channel */
        double t[4];
        for (int j = 0; j < 4; j++)
            t[j] = (lanes[j] + lanes[j + 4]) + (lanes[j + 8] + lanes[j + 12]);
        slots[0] = (t[0] + t[1]) + (t[2] + t[3]);
    }
    }
}

/* out[c] = sum over chunks of the slots of channel c, in chunk order. */
static void add_chunks(const struct simd_bn *b, int chunks, const double *slots, double *out)
{
    long per_chunk = (long)b->CB * b->block;
    for (int c = 0; c < b->C; c++)
        out[c] = slots[c];
    for (int k = 1; k < chunks; k++)
        for (int c = 0; c < b->C; c++)
            out[c] += slots[k * per_chunk + c];
}

/* Two sums per channel, into out1 and out2: of x - m and (x - m)^2, or
 * (with_dy) of dy and dy * (x - m); m per lane in s->means. */
static void channel_sums(const struct simd_bn *b, const struct dl_op_call *c, int with_dy,
                         const struct scratch *s, double *out1, double *out2)
{
    long units = units_of(b, c->batch), per_chunk = (long)b->CB * b->block, stride = b->CB * b->len;
    int chunks = chunks_of(b, c->batch);
    double *slots2 = s->slots + chunks * per_chunk;
    #pragma omp parallel for schedule(static)
    for (long u = 0; u < units; u++) {
        struct unit w = unit_of(b, c->batch, u);
        const double *m = s->means + w.cb * LANES;
        double s1[LANES], s2[LANES];
        if (with_dy)
            dl_simd_bn_sum_dy(b->len, w.count, stride, dl_tensor_const_f32(&c->in[0]) + w.at,
                              dl_tensor_const_f32(&c->dout) + w.at, b->relu ? dl_tensor_f32(&c->out) + w.at : NULL, m,
                              s1, s2);
        else
            dl_simd_bn_sum_x(b->len, w.count, stride, dl_tensor_const_f32(&c->in[0]) + w.at, m, s1, s2);
        long slot = w.chunk * per_chunk + (long)w.cb * b->block;
        fold_lanes(b, s1, s->slots + slot);
        fold_lanes(b, s2, slots2 + slot);
    }
    add_chunks(b, chunks, s->slots, out1);
    add_chunks(b, chunks, slots2, out2);
}

/* ---------------------------------------------------------------- kernel */
static int bn_create(const struct dl_layer *l, const struct dl_kernel_config *cfg, void **inst,
                     struct dl_error *err)
{
    struct simd_bn *b = dl_calloc(1, sizeof *b, err);
    if (!b)
        return DL_ERR_NOMEM;
    struct dl_shape s = l->in_shape[0];
    long hw = (long)s.h * s.w;
    b->C = s.c;
    b->block = dl_layout_block(cfg->in[0]);
    if (b->block == 1 && hw == 1 && s.c % 8 == 0)
        b->block = s.c % 16 == 0 ? 16 : 8;
    b->CB = (s.c + b->block - 1) / b->block;
    b->len = hw * b->block;
    b->chunk = (int)((UNIT_FLOATS + b->len - 1) / b->len);
    b->chunk = b->chunk < cfg->mb ? b->chunk : cfg->mb;
    b->mb = cfg->mb;
    b->relu = cfg->relu;
    b->eps = dl_attr_float(l, "eps");
    b->momentum = dl_attr_float(l, "momentum");
    *inst = b;
    return DL_OK;
}

static void bn_destroy(void *inst)
{
    free(inst);
}

/* mean[C], inv_std[C] and the count of values per channel over every rank */
static size_t bn_saved(const void *inst)
{
    const struct simd_bn *b = inst;
    return sizeof(double) * (2 * (size_t)b->C + 1);
}

static size_t bn_ws(const void *inst, enum dl_dir dir)
{
    const struct simd_bn *b = inst;
    return dir == DL_DIR_BACKWARD_WEIGHTS ? 0 : scratch_of(b, b->mb, dir == DL_DIR_BACKWARD_DATA, NULL, NULL);
}

/* The statistics forward normalised with: the batch's (saved) or the running ones. */
static void used_statistics(const struct simd_bn *b, const struct dl_op_call *c, double *mean, double *inv_std)
{
    const double *saved = (const double *)c->saved;
    for (int ch = 0; ch < b->C; ch++) {
        mean[ch] = c->training ? saved[ch] : c->param[BN_RUNNING_MEAN][ch];
        inv_std[ch] = c->training ? saved[b->C + ch] : 1 / sqrt((double)c->param[BN_RUNNING_VAR][ch] + b->eps);
    }
}

/* Batch mean and inverse standard deviation into saved, running statistics
 * updated.  One pass sums d = x - K and d^2 per channel, K the running mean
 * (0 when the sums are added over ranks, whose running means could differ):
 * in double, var = E[d^2] - E[d]^2 loses only (mean - K)^2 / var times
 * double's precision. */
static void batch_statistics(const struct simd_bn *b, const struct dl_op_call *c, const struct scratch *s)
{
    int C = b->C;
    double *saved = (double *)c->saved, *sums = s->sums, *shift = s->staging;
    float *rm = c->param[BN_RUNNING_MEAN], *rv = c->param[BN_RUNNING_VAR];
    for (int ch = 0; ch < C; ch++)
        shift[ch] = c->sync_sum ? 0 : rm[ch];
    lane_table(b, shift, s->means);
    channel_sums(b, c, 0, s, sums, sums + C);
    sums[2 * C] = (double)c->batch * (double)(b->len / b->block);
    if (c->sync_sum)
        c->sync_sum(c->sync_ctx, sums, 2 * C + 1);
    double M = sums[2 * C];
    for (int ch = 0; ch < C; ch++) {
        double d = sums[ch] / M, var = sums[C + ch] / M - d * d;
        var = var > 0 ? var : 0;
        saved[ch] = shift[ch] + d;
        saved[C + ch] = 1 / sqrt(var + b->eps);
        rm[ch] = (float)((1 - b->momentum) * rm[ch] + b->momentum * saved[ch]);
        if (M > 1) /* the unbiased variance (PyTorch's); undefined for one value */
            rv[ch] = (float)((1 - b->momentum) * rv[ch] + b->momentum * var * M / (M - 1));
    }
    saved[2 * C] = M;
}

static void bn_forward(void *inst, const struct dl_kernel_args *a)
{
    const struct simd_bn *b = inst;
    const struct dl_op_call *c = &a->c;
    int C = b->C;
    struct scratch s;
    scratch_of(b, c->batch, 0, a->workspace, &s);
    if (c->training)
        batch_statistics(b, c, &s);
    double *mean = s.staging, *scale = s.staging + C, *shift = s.staging + 2 * C, inv_std[C];
    used_statistics(b, c, mean, inv_std);
    for (int ch = 0; ch < C; ch++) {
        scale[ch] = (float)(c->param[BN_WEIGHT][ch] * inv_std[ch]);
        shift[ch] = c->param[BN_BIAS][ch];
    }
    lane_params(b, NORMALIZE_PARAMS, s.staging, s.params);
    long units = units_of(b, c->batch), stride = b->CB * b->len;
    #pragma omp parallel for schedule(static)
    for (long u = 0; u < units; u++) {
        struct unit w = unit_of(b, c->batch, u);
        dl_simd_bn_normalize(b->len, w.count, stride, dl_tensor_const_f32(&c->in[0]) + w.at,
                             s.params + w.cb * NORMALIZE_PARAMS * LANES, b->relu, dl_tensor_f32(&c->out) + w.at);
    }
}

/* Weight and bias gradients (this rank's share: the gradient allreduce adds
 * the others'); in training mode the input gradient uses the means of dy and
 * dy * xhat over every rank's values with --sync-bn. */
static void bn_backward(void *inst, const struct dl_kernel_args *a)
{
    const struct simd_bn *b = inst;
    const struct dl_op_call *c = &a->c;
    int C = b->C;
    struct scratch s;
    scratch_of(b, c->batch, 1, a->workspace, &s);
    double *k = s.staging, *mdy = k + C, *mean = mdy + C, *inv_std = mean + C, *mdx = inv_std + C;
    used_statistics(b, c, mean, inv_std);
    lane_table(b, mean, s.means);
    double *sums = s.sums; /* sum dy, then sum dy * xhat */
    channel_sums(b, c, 1, &s, sums, sums + C);
    for (int ch = 0; ch < C; ch++) {
        sums[C + ch] *= inv_std[ch];
        if (c->dparam[BN_WEIGHT])
            c->dparam[BN_WEIGHT][ch] += (float)sums[C + ch];
        if (c->dparam[BN_BIAS])
            c->dparam[BN_BIAS][ch] += (float)sums[ch];
    }
    if (!c->din[0].data)
        return;
    double M = (double)c->batch * (double)(b->len / b->block);
    if (c->training && c->sync_sum) {
        c->sync_sum(c->sync_ctx, sums, 2 * C);
        M = ((const double *)c->saved)[2 * C];
    }
    for (int ch = 0; ch < C; ch++) {
        k[ch] = (float)(c->param[BN_WEIGHT][ch] * inv_std[ch]);
        mdy[ch] = c->training ? (float)(sums[ch] / M) : 0;
        mdx[ch] = c->training ? (float)(sums[C + ch] / M) : 0;
    }
    lane_params(b, GRADIENT_PARAMS, s.staging, s.params);
    long units = units_of(b, c->batch), stride = b->CB * b->len;
    #pragma omp parallel for schedule(static)
    for (long u = 0; u < units; u++) {
        struct unit w = unit_of(b, c->batch, u);
        dl_simd_bn_input_gradient(b->len, w.count, stride, dl_tensor_const_f32(&c->in[0]) + w.at,
                                  dl_tensor_const_f32(&c->dout) + w.at, b->relu ? dl_tensor_f32(&c->out) + w.at : NULL,
                                  s.params + w.cb * GRADIENT_PARAMS * LANES, dl_tensor_f32(&c->din[0]) + w.at);
    }
}

const struct dl_kernel dl_kernel_simd_batchnorm = {
    .name = "simd", .backend = "cpu_simd", .op = &dl_op_batchnorm, .whole_batch = 1, .sync_stats = 1, .fuses_relu = 1,
    .layouts = dl_kernel_follow_layouts, .create = bn_create, .destroy = bn_destroy,
    .workspace_bytes = bn_ws, .saved_bytes = bn_saved, .forward = bn_forward, .backward_data = bn_backward,
};
