/* image_decode.h: JPEG (libjpeg-turbo) and PNG (libpng) files in memory to
 * 8-bit pixels, grey or RGB.  A JPEG can be decoded at a reduced size with
 * the decoder's DCT scaling (M/8 of the full size, M = 1..8) and only over a
 * region, which is how a random crop is decoded without paying for the whole
 * photo.  Any damaged or hostile input gives an error, never a crash. */
#ifndef DL_IMAGE_DECODE_H
#define DL_IMAGE_DECODE_H

#include <stddef.h>

#include "core/error.h"

/* Largest width or height accepted (and width x height <= 2^28 pixels). */
#define DL_IMAGE_MAX_SIDE 65535
#define DL_IMAGE_MAX_PIXELS (1L << 28)

enum dl_image_format { DL_IMAGE_JPEG, DL_IMAGE_PNG };

/* An image (or a decoded region of one): h rows of w pixels of c bytes (1:
 * grey, 3: RGB), interleaved, rows `stride` bytes apart.  x0, y0 place the
 * region in the scaled image of size full_w x full_h. */
struct dl_image {
    int w, h, c;
    size_t stride;
    unsigned char *px;
    int x0, y0;
    int full_w, full_h;
};

/* What the header says: format, size and the channels decoding gives (1 for
 * grey files, 3 for everything else: RGB, palette, CMYK). */
struct dl_image_info {
    enum dl_image_format format;
    int w, h, c;
};

int dl_image_probe(const unsigned char *buf, size_t len, struct dl_image_info *info,
                   struct dl_error *err);

/* The scale numerator M (scaled size = ceil(size * M / 8)) that JPEG decoding
 * would use so that the scaled image is at least min_w x min_h: the smallest
 * such M, or 8 when even the full size is smaller.  PNG decodes at M = 8. */
int dl_image_scale_for(const struct dl_image_info *info, double min_w, double min_h);

/* Decodes buf at scale M/8 (PNG: M must be 8).  Only the rows and columns of
 * the region [x0, x0 + w) x [y0, y0 + h) of the scaled image are guaranteed
 * to be present (the decoder may return more: out->x0 etc. say what it
 * returned); w = 0 or h = 0 means the whole image.  channels (1 or 3) is the
 * number wanted: grey is repeated to RGB, RGB becomes luminance L = 0.299 R +
 * 0.587 G + 0.114 B (PIL's integer formula), CMYK is converted to RGB.
 * Errors (DL_ERR_DATA) say what is wrong with the data; on error *out is
 * empty. */
int dl_image_decode(const unsigned char *buf, size_t len, int scale_m, int x0, int y0, int w,
                    int h, int channels, struct dl_image *out, struct dl_error *err);

void dl_image_free(struct dl_image *img);

#endif
