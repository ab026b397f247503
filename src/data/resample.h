/* resample.h: a box of an 8-bit image to a network input of floats, with
 * PIL's bilinear filter (a triangle widened by the reduction factor when
 * shrinking, so downscaling averages instead of aliasing: what torchvision's
 * Resize and RandomResizedCrop do on PIL images), in one separable pass per
 * axis, with the horizontal flip and the normalisation folded in. */
#ifndef DL_RESAMPLE_H
#define DL_RESAMPLE_H

#include "core/error.h"
#include "data/image_decode.h"

/* Rows or columns of the full (scaled) image that resampling the span
 * [b0, b0 + len) to n outputs reads: [*lo, *hi), clipped to [lim0, lim1). */
void dl_resample_span(double b0, double len, int n, int lim0, int lim1, int *lo, int *hi);

/* Writes out[c][y][x] (img->c planes of out_h x out_w) = (v / 255 - mean[c])
 * / std[c] where v is the filtered value of the box (bx, by, bw, bh) of the
 * full image, in that image's coordinates; img must hold every pixel that
 * dl_resample_span names for the box.  The filter reads only columns
 * limits[0]..limits[1]-1 and rows limits[2]..limits[3]-1 (NULL: the image):
 * the box's own, for a crop followed by a resize (PIL then sees only the
 * crop), the image's for a resize followed by a crop.  flip mirrors the
 * output left-right. */
int dl_resample_box(const struct dl_image *img, double bx, double by, double bw, double bh, const int *limits,
                    int out_w, int out_h, int flip, const float *mean, const float *std, float *out,
                    struct dl_error *err);

#endif
