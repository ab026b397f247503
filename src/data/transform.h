/* transform.h: an encoded image (JPEG or PNG bytes) to one network input:
 * the crop box chosen by the transform spec (random-resized or centre), the
 * smallest JPEG DCT scale that still covers it, decoding of only that
 * region, resampling to the input size, flip and normalisation.  The random
 * choices come from the rng passed in, so a sample's result depends only on
 * how that rng was seeded, not on which thread runs it. */
#ifndef DL_TRANSFORM_H
#define DL_TRANSFORM_H

#include "core/error.h"
#include "core/rng.h"
#include "core/shape.h"
#include "data/image_decode.h"
#include "spec/netspec.h"

/* A box of the full-size image (pixels; x, y its top-left corner).  clip:
 * the box is cut out before resizing (random-resized-crop), so resampling
 * reads nothing outside it; 0: the image is resized, then cropped (centre). */
struct dl_crop_box {
    double x, y, w, h;
    int flip;
    int clip;
};

/* The box of a W x H image that becomes an out_w x out_h input
 * (torchvision's RandomResizedCrop.get_params: 10 tries, then the centre
 * crop of the image clamped to the ratio range; or Resize + CenterCrop). */
void dl_transform_box(const struct dl_transform_spec *t, int W, int H, int out_w, int out_h,
                      struct dl_rng *rng, struct dl_crop_box *box);

/* The whole transform: buf/len (JPEG or PNG) -> out (shape.c planes of
 * shape.h x shape.w floats, normalised with mean/std over [0, 1] pixel
 * values).  dct_scaling 0 decodes JPEGs at full size (for tests). */
int dl_transform_image(const unsigned char *buf, size_t len, const struct dl_transform_spec *t,
                       struct dl_shape shape, const float *mean, const float *std, struct dl_rng *rng,
                       int dct_scaling, float *out, struct dl_error *err);

/* The same for a given box of the image described by info (from
 * dl_image_probe on buf). */
int dl_transform_image_box(const unsigned char *buf, size_t len, const struct dl_image_info *info,
                           const struct dl_crop_box *box, struct dl_shape shape, const float *mean,
                           const float *std, int dct_scaling, float *out, struct dl_error *err);

#endif
