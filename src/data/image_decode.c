/* image_decode.c: the JPEG and PNG decoders behind dl_image_decode.  Both
 * libraries report errors by longjmp out of a callback; everything they
 * allocate is released on that path too.  Rows come out in the file's own
 * channels (grey, RGB, CMYK) and one row converter brings them to the
 * channels asked for, with PIL's formulas, so tests can compare with PIL. */
#include "data/image_decode.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>
#include <png.h>

/* libjpeg allocates for a progressive file a coefficient buffer of the whole
 * image; this bounds what one (hostile) file may make it allocate. */
#define JPEG_MAX_MEMORY (1L << 30)

void dl_image_free(struct dl_image *img)
{
    if (!img)
        return;
    free(img->px);
    memset(img, 0, sizeof *img);
}

static int size_ok(long w, long h)
{
    return w >= 1 && h >= 1 && w <= DL_IMAGE_MAX_SIDE && h <= DL_IMAGE_MAX_SIDE &&
           w * h <= DL_IMAGE_MAX_PIXELS;
}

static int size_error(struct dl_error *err, const char *what, long w, long h)
{
    return dl_errorf(err, DL_ERR_DATA, "%s of %ldx%ld pixels: expected 1..%d per side and at most %ld pixels",
                     what, w, h, DL_IMAGE_MAX_SIDE, DL_IMAGE_MAX_PIXELS);
}

/* ------------------------------------------------------------ channel conversion */

/* Native row layouts: 1 grey, 3 RGB, 4 CMYK as libjpeg returns it (Adobe
 * files store it inverted, `inverted`). */
struct row_format {
    int c;
    int inverted;
};

/* PIL's MULDIV255: a * b / 255 rounded. */
static unsigned muldiv255(unsigned a, unsigned b)
{
    unsigned t = a * b + 128;
    return ((t >> 8) + t) >> 8;
}

/* PIL's L = (19595 R + 38470 G + 7471 B + 2^15) >> 16. */
static unsigned char luminance(unsigned r, unsigned g, unsigned b)
{
    return (unsigned char)((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
}

/* PIL's CMYK -> RGB: channel = (255 - k) - (c (255 - k)) / 255, on the
 * true (not inverted) ink values. */
static void cmyk_to_rgb(const unsigned char *in, int inverted, unsigned char *rgb)
{
    unsigned k = inverted ? 255u - in[3] : in[3], nk = 255u - k;
    for (int i = 0; i < 3; i++) {
        unsigned c = inverted ? 255u - in[i] : in[i];
        rgb[i] = (unsigned char)(nk - muldiv255(c, nk));
    }
}

static void convert_row(const unsigned char *in, struct row_format f, unsigned char *out, int out_c,
                        int n)
{
    if (f.c == out_c) {
        memcpy(out, in, (size_t)n * (size_t)out_c);
        return;
    }
    for (int x = 0; x < n; x++) {
        unsigned char rgb[3];
        if (f.c == 1)
            rgb[0] = rgb[1] = rgb[2] = in[x];
        else if (f.c == 3)
            memcpy(rgb, in + 3 * x, 3);
        else
            cmyk_to_rgb(in + 4 * x, f.inverted, rgb);
        if (out_c == 1)
            out[x] = luminance(rgb[0], rgb[1], rgb[2]);
        else
            memcpy(out + 3 * x, rgb, 3);
    }
}

/* Allocates out for a w x h region at (x0, y0) of a full_w x full_h image. */
static int alloc_image(struct dl_image *out, int x0, int y0, int w, int h, int full_w, int full_h,
                       int c, struct dl_error *err)
{
    *out = (struct dl_image){.w = w, .h = h, .c = c, .stride = (size_t)w * (size_t)c, .x0 = x0, .y0 = y0,
                             .full_w = full_w, .full_h = full_h};
    out->px = dl_calloc(out->stride * (size_t)h, 1, err);
    return out->px ? DL_OK : DL_ERR_NOMEM;
}

/* Clamps the requested region to the image; w or h 0 = everything. */
static void clamp_region(int full_w, int full_h, int *x0, int *y0, int *w, int *h)
{
    if (*w <= 0 || *h <= 0) {
        *x0 = *y0 = 0;
        *w = full_w;
        *h = full_h;
    }
    if (*x0 < 0)
        *x0 = 0;
    if (*y0 < 0)
        *y0 = 0;
    if (*x0 > full_w - 1)
        *x0 = full_w - 1;
    if (*y0 > full_h - 1)
        *y0 = full_h - 1;
    if (*w > full_w - *x0)
        *w = full_w - *x0;
    if (*h > full_h - *y0)
        *h = full_h - *y0;
}

/* ------------------------------------------------------------ JPEG */

struct jpeg_fail {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
};

static void jpeg_on_error(j_common_ptr cinfo)
{
    struct jpeg_fail *f = (struct jpeg_fail *)cinfo->err;
    cinfo->err->format_message(cinfo, f->msg);
    longjmp(f->jump, 1);
}

/* Warnings are not printed; a premature end of data (a truncated file,
 * which libjpeg would fill with grey) is an error, as in PIL. */
static void jpeg_on_message(j_common_ptr cinfo, int level)
{
    if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF)
        jpeg_on_error(cinfo);
}

static int is_jpeg(const unsigned char *buf, size_t len)
{
    return len >= 3 && buf[0] == 0xFF && buf[1] == 0xD8 && buf[2] == 0xFF;
}

static int is_png(const unsigned char *buf, size_t len)
{
    return len >= 8 && png_sig_cmp(buf, 0, 8) == 0;
}

/* Sets up a decompressor on buf and reads the header.  libjpeg's errors
 * longjmp to f->jump (with the message in f->msg): the caller has called
 * setjmp on it. */
static void jpeg_begin(struct jpeg_decompress_struct *cinfo, struct jpeg_fail *f,
                       const unsigned char *buf, size_t len)
{
    cinfo->err = jpeg_std_error(&f->pub);
    f->pub.error_exit = jpeg_on_error;
    f->pub.emit_message = jpeg_on_message;
    jpeg_create_decompress(cinfo);
    cinfo->mem->max_memory_to_use = JPEG_MAX_MEMORY;
    jpeg_mem_src(cinfo, buf, (unsigned long)len);
    jpeg_read_header(cinfo, TRUE);
}

static int jpeg_native_channels(J_COLOR_SPACE cs)
{
    return cs == JCS_GRAYSCALE ? 1 : cs == JCS_CMYK || cs == JCS_YCCK ? 4 : 3;
}

static int jpeg_probe(const unsigned char *buf, size_t len, struct dl_image_info *info,
                      struct dl_error *err)
{
    struct jpeg_decompress_struct cinfo;
    struct jpeg_fail f;
    if (setjmp(f.jump)) {
        jpeg_destroy_decompress(&cinfo);
        return dl_errorf(err, DL_ERR_DATA, "bad JPEG: %s", f.msg);
    }
    jpeg_begin(&cinfo, &f, buf, len);
    info->format = DL_IMAGE_JPEG;
    info->w = (int)cinfo.image_width;
    info->h = (int)cinfo.image_height;
    info->c = jpeg_native_channels(cinfo.jpeg_color_space) == 1 ? 1 : 3;
    jpeg_destroy_decompress(&cinfo);
    return DL_OK;
}

static int jpeg_decode(const unsigned char *buf, size_t len, int scale_m, int x0, int y0, int w,
                       int h, int channels, struct dl_image *out, struct dl_error *err)
{
    struct jpeg_decompress_struct cinfo;
    struct jpeg_fail f;
    unsigned char *volatile row = NULL;
    if (setjmp(f.jump)) {
        jpeg_destroy_decompress(&cinfo);
        free(row);
        dl_image_free(out);
        return dl_errorf(err, DL_ERR_DATA, "bad JPEG: %s", f.msg);
    }
    jpeg_begin(&cinfo, &f, buf, len);
    if (!size_ok(cinfo.image_width, cinfo.image_height)) {
        jpeg_destroy_decompress(&cinfo);
        return size_error(err, "JPEG", cinfo.image_width, cinfo.image_height);
    }
    struct row_format rf = {jpeg_native_channels(cinfo.jpeg_color_space), 0};
    cinfo.out_color_space = rf.c == 1 ? JCS_GRAYSCALE : rf.c == 4 ? JCS_CMYK : JCS_RGB;
    cinfo.scale_num = (unsigned)scale_m;
    cinfo.scale_denom = 8;
    jpeg_start_decompress(&cinfo);
    rf.inverted = rf.c == 4 && cinfo.saw_Adobe_marker;
    int fw = (int)cinfo.output_width, fh = (int)cinfo.output_height;
    clamp_region(fw, fh, &x0, &y0, &w, &h);
    /* Columns: the decoder widens the region to whole iMCUs. */
    JDIMENSION cx = (JDIMENSION)x0, cw = (JDIMENSION)w;
    if (cw < (JDIMENSION)fw)
        jpeg_crop_scanline(&cinfo, &cx, &cw);
    row = dl_calloc((size_t)cw * (size_t)rf.c, 1, err);
    if (!row || alloc_image(out, (int)cx, y0, (int)cw, h, fw, fh, channels, err) != DL_OK) {
        jpeg_destroy_decompress(&cinfo);
        free(row);
        return DL_ERR_NOMEM;
    }
    if (y0 > 0)
        jpeg_skip_scanlines(&cinfo, (JDIMENSION)y0);
    for (int y = 0; y < h; y++) {
        JSAMPROW rp = row;
        if (jpeg_read_scanlines(&cinfo, &rp, 1) != 1) {
            jpeg_destroy_decompress(&cinfo);
            free(row);
            dl_image_free(out);
            return dl_errorf(err, DL_ERR_DATA, "bad JPEG: row %d of %d missing", y0 + y, fh);
        }
        convert_row(row, rf, out->px + (size_t)y * out->stride, channels, (int)cw);
    }
    free(row);
    jpeg_destroy_decompress(&cinfo); /* rows after the region are never decoded */
    return DL_OK;
}

/* ------------------------------------------------------------ PNG */

struct png_reader {
    const unsigned char *buf;
    size_t len, pos;
    char msg[256];
};

static void png_on_error(png_structp png, png_const_charp msg)
{
    struct png_reader *r = png_get_error_ptr(png);
    snprintf(r->msg, sizeof r->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

static void png_read_mem(png_structp png, png_bytep data, png_size_t n)
{
    struct png_reader *r = png_get_io_ptr(png);
    if (n > r->len - r->pos)
        png_error(png, "file truncated");
    memcpy(data, r->buf + r->pos, n);
    r->pos += n;
}

/* Creates the reader, reads the header and sets the transforms that bring
 * every PNG to 8-bit grey or RGB the way PIL's convert does (palette to RGB,
 * low bit depths scaled to 0..255, 16 bits to the high byte, alpha dropped). */
static void png_begin(png_structp png, png_infop info)
{
    png_set_user_limits(png, DL_IMAGE_MAX_SIDE, DL_IMAGE_MAX_SIDE);
    png_set_chunk_malloc_max(png, 64u << 20);
    png_set_read_fn(png, png_get_error_ptr(png), png_read_mem);
    png_read_info(png, info);
    int type = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    if (type == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if ((type & PNG_COLOR_MASK_COLOR) == 0 && depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16)
        png_set_strip_16(png);
    if (type & PNG_COLOR_MASK_ALPHA)
        png_set_strip_alpha(png);
}

static int png_channels(png_structp png, png_infop info)
{
    return png_get_color_type(png, info) & PNG_COLOR_MASK_COLOR ? 3 : 1;
}

static int png_decode(const unsigned char *buf, size_t len, int x0, int y0, int w, int h,
                      int channels, struct dl_image_info *probe, struct dl_image *out,
                      struct dl_error *err)
{
    struct png_reader r = {buf, len, 0, ""};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &r, png_on_error, png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    unsigned char *volatile native = NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return dl_errorf(err, DL_ERR_NOMEM, "PNG: out of memory");
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        free(native);
        dl_image_free(out);
        return dl_errorf(err, DL_ERR_DATA, "bad PNG: %s", r.msg);
    }
    png_begin(png, info);
    long fw = (long)png_get_image_width(png, info), fh = (long)png_get_image_height(png, info);
    if (!size_ok(fw, fh)) {
        png_destroy_read_struct(&png, &info, NULL);
        return size_error(err, "PNG", fw, fh);
    }
    struct row_format rf = {png_channels(png, info), 0};
    if (probe) {
        *probe = (struct dl_image_info){DL_IMAGE_PNG, (int)fw, (int)fh, rf.c};
        png_destroy_read_struct(&png, &info, NULL);
        return DL_OK;
    }
    int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    clamp_region((int)fw, (int)fh, &x0, &y0, &w, &h);
    size_t native_stride = (size_t)fw * (size_t)rf.c;
    /* Interlaced files need the whole image; others are read row by row and
     * stop after the region. */
    int rows = passes > 1 ? (int)fh : 1;
    native = dl_calloc(native_stride * (size_t)rows, 1, err);
    if (!native || alloc_image(out, x0, y0, w, h, (int)fw, (int)fh, channels, err) != DL_OK) {
        png_destroy_read_struct(&png, &info, NULL);
        free(native);
        return DL_ERR_NOMEM;
    }
    if (passes > 1) {
        for (int p = 0; p < passes; p++)
            for (long y = 0; y < fh; y++)
                png_read_row(png, native + (size_t)y * native_stride, NULL);
        for (int y = 0; y < h; y++)
            convert_row(native + (size_t)(y0 + y) * native_stride + (size_t)x0 * (size_t)rf.c, rf,
                        out->px + (size_t)y * out->stride, channels, w);
    } else {
        for (int y = 0; y < y0 + h; y++) {
            png_read_row(png, native, NULL);
            if (y >= y0)
                convert_row(native + (size_t)x0 * (size_t)rf.c, rf, out->px + (size_t)(y - y0) * out->stride,
                            channels, w);
        }
    }
    free(native);
    png_destroy_read_struct(&png, &info, NULL);
    return DL_OK;
}

/* ------------------------------------------------------------ entry points */

int dl_image_probe(const unsigned char *buf, size_t len, struct dl_image_info *info,
                   struct dl_error *err)
{
    memset(info, 0, sizeof *info);
    if (is_jpeg(buf, len))
        return jpeg_probe(buf, len, info, err);
    if (is_png(buf, len))
        return png_decode(buf, len, 0, 0, 0, 0, 1, info, NULL, err);
    return dl_errorf(err, DL_ERR_DATA, "not a JPEG or PNG file (%zu bytes%s)", len,
                     len ? "; unknown signature" : "");
}

int dl_image_scale_for(const struct dl_image_info *info, double min_w, double min_h)
{
    if (info->format != DL_IMAGE_JPEG)
        return 8;
    for (int m = 1; m < 8; m++) {
        /* libjpeg's scaled size: ceil(size * m / 8). */
        long sw = ((long)info->w * m + 7) / 8, sh = ((long)info->h * m + 7) / 8;
        if (sw >= min_w && sh >= min_h)
            return m;
    }
    return 8;
}

int dl_image_decode(const unsigned char *buf, size_t len, int scale_m, int x0, int y0, int w,
                    int h, int channels, struct dl_image *out, struct dl_error *err)
{
    memset(out, 0, sizeof *out);
    if (channels != 1 && channels != 3)
        return dl_errorf(err, DL_ERR_INTERNAL, "image decode: %d channels asked: expected 1 or 3", channels);
    if (scale_m < 1 || scale_m > 8)
        return dl_errorf(err, DL_ERR_INTERNAL, "image decode: scale %d/8: expected 1..8", scale_m);
    if (is_jpeg(buf, len))
        return jpeg_decode(buf, len, scale_m, x0, y0, w, h, channels, out, err);
    if (is_png(buf, len)) {
        if (scale_m != 8)
            return dl_errorf(err, DL_ERR_INTERNAL, "image decode: PNG has no scaled decoding");
        return png_decode(buf, len, x0, y0, w, h, channels, NULL, out, err);
    }
    return dl_errorf(err, DL_ERR_DATA, "not a JPEG or PNG file (%zu bytes%s)", len,
                     len ? "; unknown signature" : "");
}
