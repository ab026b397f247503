/* resample.c: separable antialiased bilinear resampling (PIL's
 * precompute_coeffs: output i of a span centred at b0 + (i + 0.5) * scale
 * takes the input pixels within `support` = max(scale, 1) of its centre,
 * weighted by the triangle 1 - |d| / max(scale, 1) and normalised).  PIL
 * rounds to 8 bits between the two passes; this keeps floats, so values
 * agree within one level. */
#include "data/resample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The taps of one axis: for output i, weights w[i * ksize + k] of inputs
 * first[i] + k, k < count[i]. */
struct taps {
    int ksize;
    int *first, *count;
    float *w;
};

static void taps_free(struct taps *t)
{
    free(t->first);
    free(t->count);
    free(t->w);
}

static double triangle(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Input range [lo, hi) of output i (PIL's xmin / xmax, clipped to the
 * limits [lim0, lim1)). */
static void tap_range(double b0, double scale, double support, int i, int lim0, int lim1, int *lo, int *hi)
{
    double center = b0 + (i + 0.5) * scale;
    int a = (int)(center - support + 0.5), b = (int)(center + support + 0.5);
    *lo = a < lim0 ? lim0 : a > lim1 ? lim1 : a;
    *hi = b > lim1 ? lim1 : b < *lo ? *lo : b;
}

void dl_resample_span(double b0, double len, int n, int lim0, int lim1, int *lo, int *hi)
{
    double scale = len / n, support = scale > 1.0 ? scale : 1.0;
    int unused;
    tap_range(b0, scale, support, 0, lim0, lim1, lo, &unused);
    tap_range(b0, scale, support, n - 1, lim0, lim1, &unused, hi);
}

/* Taps for n outputs from the span [b0, b0 + len) of an axis, reading only
 * pixels in [lim0, lim1), of which [avail_lo, avail_hi) are present; indices
 * are made relative to avail_lo. */
static int make_taps(double b0, double len, int n, int lim0, int lim1, int avail_lo, int avail_hi, struct taps *t,
                     struct dl_error *err)
{
    double scale = len / n, filterscale = scale > 1.0 ? scale : 1.0, support = filterscale;
    t->ksize = (int)ceil(support) * 2 + 1;
    t->first = dl_calloc((size_t)n, sizeof *t->first, err);
    t->count = dl_calloc((size_t)n, sizeof *t->count, err);
    t->w = dl_calloc((size_t)n * (size_t)t->ksize, sizeof *t->w, err);
    if (!t->first || !t->count || !t->w)
        return DL_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        int lo, hi;
        tap_range(b0, scale, support, i, lim0, lim1, &lo, &hi);
        if (lo < avail_lo || hi > avail_hi)
            return dl_errorf(err, DL_ERR_INTERNAL, "resample: output %d reads pixels %d..%d, only %d..%d decoded",
                             i, lo, hi - 1, avail_lo, avail_hi - 1);
        if (hi - lo > t->ksize)
            hi = lo + t->ksize;
        double center = b0 + (i + 0.5) * scale, sum = 0;
        float *w = t->w + (size_t)i * (size_t)t->ksize;
        for (int x = lo; x < hi; x++) {
            double v = triangle((x - center + 0.5) / filterscale);
            w[x - lo] = (float)v;
            sum += v;
        }
        for (int x = lo; x < hi && sum > 0; x++)
            w[x - lo] = (float)(w[x - lo] / sum);
        t->first[i] = lo - avail_lo;
        t->count[i] = hi - lo;
    }
    return DL_OK;
}

/* y += a x over n floats.  `omp simd` because gcc -O2 does not vectorise
 * loops of unknown length by itself (see ops/vec.h); this is the vertical
 * pass's whole work. */
static void axpy(float *restrict y, float a, const float *restrict x, size_t n)
{
    #pragma omp simd
    for (size_t i = 0; i < n; i++)
        y[i] += a * x[i];
}

/* One row of RGB pixels through the horizontal taps: the three channels
 * share each weight, so they are summed in one pass over the taps (the
 * generic loop's per-channel passes made this the hottest loop of image
 * decoding). */
static void horizontal_rgb(const struct taps *th, const unsigned char *src, int out_w, float *dst)
{
    for (int x = 0; x < out_w; x++) {
        const float *w = th->w + (size_t)x * (size_t)th->ksize;
        const unsigned char *px = src + (size_t)th->first[x] * 3;
        float r = 0, g = 0, b = 0;
        for (int k = 0; k < th->count[x]; k++, px += 3) {
            r += w[k] * px[0];
            g += w[k] * px[1];
            b += w[k] * px[2];
        }
        dst[3 * x] = r;
        dst[3 * x + 1] = g;
        dst[3 * x + 2] = b;
    }
}

int dl_resample_box(const struct dl_image *img, double bx, double by, double bw, double bh, const int *limits,
                    int out_w, int out_h, int flip, const float *mean, const float *std, float *out,
                    struct dl_error *err)
{
    int lim[4] = {0, img->full_w, 0, img->full_h};
    if (limits)
        memcpy(lim, limits, sizeof lim);
    if (out_w < 1 || out_h < 1 || !(bw > 0) || !(bh > 0))
        return dl_errorf(err, DL_ERR_INTERNAL, "resample: box %gx%g to %dx%d", bw, bh, out_w, out_h);
    struct taps th = {0}, tv = {0};
    int c = img->c;
    float *rows = NULL;
    int rc = make_taps(bx, bw, out_w, lim[0], lim[1], img->x0, img->x0 + img->w, &th, err);
    if (!rc)
        rc = make_taps(by, bh, out_h, lim[2], lim[3], img->y0, img->y0 + img->h, &tv, err);
    /* Horizontal pass over the rows the vertical pass reads. */
    int r0 = 0, r1 = 0;
    if (!rc) {
        r0 = tv.first[0];
        r1 = tv.first[out_h - 1] + tv.count[out_h - 1];
        for (int i = 0; i < out_h; i++) { /* spans are monotone, but be exact */
            if (tv.first[i] < r0)
                r0 = tv.first[i];
            if (tv.first[i] + tv.count[i] > r1)
                r1 = tv.first[i] + tv.count[i];
        }
        rows = dl_calloc((size_t)(r1 - r0 > 0 ? r1 - r0 : 1) * (size_t)out_w * (size_t)c, sizeof *rows, err);
        if (!rows)
            rc = DL_ERR_NOMEM;
    }
    if (rc) {
        taps_free(&th);
        taps_free(&tv);
        free(rows);
        return rc;
    }
    for (int y = r0; y < r1; y++) {
        const unsigned char *src = img->px + (size_t)y * img->stride;
        float *dst = rows + (size_t)(y - r0) * (size_t)out_w * (size_t)c;
        if (c == 3)
            horizontal_rgb(&th, src, out_w, dst);
        else
            for (int x = 0; x < out_w; x++) {
                const float *w = th.w + (size_t)x * (size_t)th.ksize;
                const unsigned char *px = src + (size_t)th.first[x] * (size_t)c;
                for (int ch = 0; ch < c; ch++) {
                    float a = 0;
                    for (int k = 0; k < th.count[x]; k++)
                        a += w[k] * px[k * c + ch];
                    dst[x * c + ch] = a;
                }
            }
    }
    /* Vertical pass, normalisation and flip. */
    size_t plane = (size_t)out_w * (size_t)out_h;
    float scale[3], shift[3];
    for (int ch = 0; ch < c; ch++) {
        scale[ch] = 1.0f / (255.0f * std[ch]);
        shift[ch] = -mean[ch] / std[ch];
    }
    size_t row_len = (size_t)out_w * (size_t)c;
    float *acc = dl_calloc(row_len, sizeof *acc, err);
    if (!acc) {
        taps_free(&th);
        taps_free(&tv);
        free(rows);
        return DL_ERR_NOMEM;
    }
    for (int y = 0; y < out_h; y++) {
        const float *w = tv.w + (size_t)y * (size_t)tv.ksize;
        memset(acc, 0, row_len * sizeof *acc);
        for (int k = 0; k < tv.count[y]; k++)
            axpy(acc, w[k], rows + (size_t)(tv.first[y] + k - r0) * row_len, row_len);
        for (int ch = 0; ch < c; ch++) {
            float *o = out + (size_t)ch * plane + (size_t)y * (size_t)out_w;
            const float *a = acc + ch;
            if (flip)
                for (int x = 0; x < out_w; x++)
                    o[out_w - 1 - x] = a[x * c] * scale[ch] + shift[ch];
            else
                for (int x = 0; x < out_w; x++)
                    o[x] = a[x * c] * scale[ch] + shift[ch];
        }
    }
    free(acc);
    taps_free(&th);
    taps_free(&tv);
    free(rows);
    return DL_OK;
}
