/* fuzz_image.c: fuzz target for the image decoders and transforms: the
 * input's first 4 bytes choose the channels (1 or 3), the JPEG scale M/8,
 * a region of the scaled image and the transform (random-resized or centre,
 * its seed); the rest is the file.  Runs the header probe, a region decode
 * and the whole transform to a small input, as the decode threads do. */
#include <stdlib.h>

#include "data/image_decode.h"
#include "data/transform.h"
#include "fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    int channels = data[0] & 1 ? 3 : 1, m = 1 + (data[0] >> 1) % 8;
    const uint8_t *file = data + 4;
    size_t len = size - 4;
    struct dl_error err = {0};
    struct dl_image_info info;
    if (dl_image_probe(file, len, &info, &err) != DL_OK)
        return 0;
    struct dl_image img;
    int x0 = data[1] % 64, y0 = data[2] % 64, w = 1 + data[3] % 97, h = 1 + data[1] % 89;
    if (dl_image_decode(file, len, info.format == DL_IMAGE_JPEG ? m : 8, x0, y0, w, h, channels, &img, &err) ==
        DL_OK)
        dl_image_free(&img);
    struct dl_transform_spec t = {.crop = data[0] & 2 ? DL_CROP_CENTER : DL_CROP_RANDOM_RESIZED,
                                  .scale = {0.08, 1.0}, .ratio = {0.75, 4.0 / 3.0}, .resize = 8.0 / 7.0,
                                  .flip = 1};
    struct dl_shape shape = {channels, 13, 17};
    float mean[3] = {0.5f, 0.5f, 0.5f}, std[3] = {0.25f, 0.25f, 0.25f};
    float *out = malloc(sizeof *out * (size_t)dl_shape_count(shape));
    struct dl_rng rng;
    dl_rng_seed(&rng, data[2]);
    if (out)
        dl_transform_image(file, len, &t, shape, mean, std, &rng, 1, out, &err);
    free(out);
    return 0;
}
