/* transform.c: crop boxes (torchvision's rules, on the project's RNG) and the
 * decode-then-resample path of one image.  The box is chosen on the full
 * image; decoding at DCT scale M/8 shrinks the image by sW / W, so the box is
 * mapped to those coordinates and the decoder asked for the rows and columns
 * the resampling filter reads. */
#include "data/transform.h"

#include <math.h>

#include "data/resample.h"

static double uniform(struct dl_rng *rng, double lo, double hi)
{
    return lo + (hi - lo) * (double)dl_rng_uniform(rng);
}

static void random_resized_box(const struct dl_transform_spec *t, int W, int H, struct dl_rng *rng,
                               struct dl_crop_box *box)
{
    double area = (double)W * H, lr0 = log(t->ratio[0]), lr1 = log(t->ratio[1]);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * uniform(rng, t->scale[0], t->scale[1]);
        double aspect = exp(uniform(rng, lr0, lr1));
        /* Python's round (ties to even), as torchvision. */
        long w = (long)nearbyint(sqrt(target * aspect)), h = (long)nearbyint(sqrt(target / aspect));
        if (w > 0 && w <= W && h > 0 && h <= H) {
            box->y = (double)dl_rng_below(rng, (uint64_t)(H - h + 1));
            box->x = (double)dl_rng_below(rng, (uint64_t)(W - w + 1));
            box->w = (double)w;
            box->h = (double)h;
            return;
        }
    }
    double in_ratio = (double)W / H;
    long w = W, h = H;
    if (in_ratio < t->ratio[0])
        h = (long)nearbyint(w / t->ratio[0]);
    else if (in_ratio > t->ratio[1])
        w = (long)nearbyint(h * t->ratio[1]);
    box->w = (double)w;
    box->h = (double)h;
    box->x = (double)((W - w) / 2);
    box->y = (double)((H - h) / 2);
}

/* Resize so that the shorter side is R (the longer int(R * long / short), as
 * torchvision), then the out_w x out_h centre (offsets rounded as
 * CenterCrop, ties to even like Python's round): expressed as the box of the
 * original that lands there. */
static void center_box(const struct dl_transform_spec *t, int W, int H, int out_w, int out_h,
                       struct dl_crop_box *box)
{
    int side = out_w > out_h ? out_w : out_h;
    long R = (long)nearbyint(side * t->resize);
    long rw, rh;
    if (W <= H) {
        rw = R;
        rh = (long)((double)R * H / W);
    } else {
        rh = R;
        rw = (long)((double)R * W / H);
    }
    double sx = (double)W / rw, sy = (double)H / rh;
    box->x = nearbyint((rw - out_w) / 2.0) * sx;
    box->y = nearbyint((rh - out_h) / 2.0) * sy;
    box->w = out_w * sx;
    box->h = out_h * sy;
}

void dl_transform_box(const struct dl_transform_spec *t, int W, int H, int out_w, int out_h,
                      struct dl_rng *rng, struct dl_crop_box *box)
{
    if (t->crop == DL_CROP_RANDOM_RESIZED)
        random_resized_box(t, W, H, rng, box);
    else
        center_box(t, W, H, out_w, out_h, box);
    box->clip = t->crop == DL_CROP_RANDOM_RESIZED;
    box->flip = t->flip ? (int)dl_rng_below(rng, 2) : 0;
}

int dl_transform_image(const unsigned char *buf, size_t len, const struct dl_transform_spec *t,
                       struct dl_shape shape, const float *mean, const float *std, struct dl_rng *rng,
                       int dct_scaling, float *out, struct dl_error *err)
{
    struct dl_image_info info;
    int rc = dl_image_probe(buf, len, &info, err);
    if (rc)
        return rc;
    struct dl_crop_box box;
    dl_transform_box(t, info.w, info.h, shape.w, shape.h, rng, &box);
    return dl_transform_image_box(buf, len, &info, &box, shape, mean, std, dct_scaling, out, err);
}

int dl_transform_image_box(const unsigned char *buf, size_t len, const struct dl_image_info *ip,
                           const struct dl_crop_box *bp, struct dl_shape shape, const float *mean,
                           const float *std, int dct_scaling, float *out, struct dl_error *err)
{
    struct dl_image_info info = *ip;
    struct dl_crop_box box = *bp;
    int rc;
    /* Smallest scale at which the box still has at least the input's size. */
    int m = dct_scaling ? dl_image_scale_for(&info, shape.w * info.w / box.w, shape.h * info.h / box.h) : 8;
    int sw = (int)(((long)info.w * m + 7) / 8), sh = (int)(((long)info.h * m + 7) / 8);
    double fx = (double)sw / info.w, fy = (double)sh / info.h;
    double bx = box.x * fx, by = box.y * fy, bw = box.w * fx, bh = box.h * fy;
    int lim[4] = {0, sw, 0, sh};
    if (box.clip) {
        lim[0] = (int)floor(bx);
        lim[1] = (int)ceil(bx + bw - 1e-9);
        lim[2] = (int)floor(by);
        lim[3] = (int)ceil(by + bh - 1e-9);
        lim[1] = lim[1] > sw ? sw : lim[1] <= lim[0] ? lim[0] + 1 : lim[1];
        lim[3] = lim[3] > sh ? sh : lim[3] <= lim[2] ? lim[2] + 1 : lim[3];
    }
    int x0, x1, y0, y1;
    dl_resample_span(bx, bw, shape.w, lim[0], lim[1], &x0, &x1);
    dl_resample_span(by, bh, shape.h, lim[2], lim[3], &y0, &y1);
    /* libjpeg's fancy chroma upsampling treats the edges of a cropped
     * region as the image's edges: a margin keeps the pixels used exact. */
    const int margin = 16;
    x0 = x0 > margin ? x0 - margin : 0;
    x1 = x1 < sw - margin ? x1 + margin : sw;
    struct dl_image img;
    rc = dl_image_decode(buf, len, m, x0, y0, x1 - x0, y1 - y0, shape.c, &img, err);
    if (rc)
        return rc;
    if (img.full_w != sw || img.full_h != sh)
        rc = dl_errorf(err, DL_ERR_INTERNAL, "decoded at %dx%d, expected %dx%d", img.full_w, img.full_h, sw, sh);
    else
        rc = dl_resample_box(&img, bx, by, bw, bh, lim, shape.w, shape.h, box.flip, mean, std, out, err);
    dl_image_free(&img);
    return rc;
}
