/* image_tool.c: the decoder and transforms on the command line, for
 * tests/test_images.py, which compares what they write with PIL and
 * torchvision on the same files.
 *   image_tool decode FILE M C         -> "W H C\n" + the scaled image's bytes
 *   image_tool box FILE C OW OH X Y W H FLIP DCT -> C x OH x OW floats (raw, [0, 1]);
 *                                  FLIP bit 0: mirror, bit 1: clip to the box (crop, then resize)
 *   image_tool boxes W H OW OH KIND SEED N -> N lines "x y w h flip"; KIND: eval, train
 *                                  or train:S (area fractions S..1)
 *   image_tool batches DIR C SIZE BATCH THREADS RANKS EPOCH -> every rank's batches, raw floats + labels
 *                                  (IMAGE_TOOL_BAD=fail: --bad-samples fail; warnings on stderr) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/batcher.h"
#include "data/dataset.h"
#include "data/image_decode.h"
#include "data/imagefolder.h"
#include "data/transform.h"
#include "spec/datafile.h"

static int fail(const struct dl_error *e)
{
    fprintf(stderr, "image_tool: %s\n", e->msg);
    return 1;
}

/* Reads path and its header; exits on failure. */
static unsigned char *read_image(const char *path, size_t *len, struct dl_image_info *info)
{
    unsigned char *buf;
    struct dl_error e = {0};
    if (dl_read_file(path, &buf, len, &e) || dl_image_probe(buf, *len, info, &e))
        exit(fail(&e));
    return buf;
}

static int cmd_decode(char **argv)
{
    size_t len;
    struct dl_error e = {0};
    struct dl_image_info info;
    struct dl_image img;
    unsigned char *buf = read_image(argv[0], &len, &info);
    if (dl_image_decode(buf, len, atoi(argv[1]), 0, 0, 0, 0, atoi(argv[2]), &img, &e))
        return fail(&e);
    printf("%d %d %d\n", img.w, img.h, img.c);
    for (int y = 0; y < img.h; y++)
        fwrite(img.px + (size_t)y * img.stride, 1, (size_t)img.w * (size_t)img.c, stdout);
    dl_image_free(&img);
    free(buf);
    return 0;
}

static int cmd_box(char **argv)
{
    size_t len;
    struct dl_error e = {0};
    struct dl_image_info info;
    unsigned char *buf = read_image(argv[0], &len, &info);
    struct dl_shape shape = {atoi(argv[1]), atoi(argv[3]), atoi(argv[2])};
    struct dl_crop_box box = {atof(argv[4]), atof(argv[5]), atof(argv[6]), atof(argv[7]), atoi(argv[8]) & 1,
                              atoi(argv[8]) >> 1};
    float mean[3] = {0, 0, 0}, std[3] = {1, 1, 1};
    float *out = calloc((size_t)dl_shape_count(shape), sizeof *out);
    if (dl_transform_image_box(buf, len, &info, &box, shape, mean, std, atoi(argv[9]), out, &e))
        return fail(&e);
    fwrite(out, sizeof *out, (size_t)dl_shape_count(shape), stdout);
    free(out);
    free(buf);
    return 0;
}

static int cmd_boxes(char **argv)
{
    struct dl_data_spec d;
    dl_data_defaults(&d);
    struct dl_transform_spec *t = strncmp(argv[4], "train", 5) == 0 ? &d.train_transform : &d.eval_transform;
    if (strncmp(argv[4], "train:", 6) == 0) /* train:S: area fractions [S, 1] */
        t->scale[0] = atof(argv[4] + 6);
    struct dl_rng rng;
    dl_rng_seed(&rng, strtoull(argv[5], NULL, 10));
    for (int i = 0; i < atoi(argv[6]); i++) {
        struct dl_crop_box b;
        dl_transform_box(t, atoi(argv[0]), atoi(argv[1]), atoi(argv[2]), atoi(argv[3]), &rng, &b);
        printf("%.6f %.6f %.6f %.6f %d\n", b.x, b.y, b.w, b.h, b.flip | b.clip << 1);
    }
    return 0;
}

static void print_warning(void *ctx, const char *msg)
{
    fprintf(stderr, "rank %d: %s\n", *(int *)ctx, msg);
}

/* Every rank's batches of one epoch, concatenated per step in rank order. */
static int cmd_batches(char **argv)
{
    struct dl_data_spec d;
    dl_data_defaults(&d);
    d.kind = DL_DATASET_IMAGEFOLDER;
    snprintf(d.dir, sizeof d.dir, "%s", argv[0]);
    d.threads = atoi(argv[4]);
    const char *bad = getenv("IMAGE_TOOL_BAD");
    d.bad_samples = bad && strcmp(bad, "fail") == 0 ? DL_BAD_FAIL : DL_BAD_SKIP;
    int ranks = atoi(argv[5]), batch = atoi(argv[3]);
    struct dl_shape shape = {atoi(argv[1]), atoi(argv[2]), atoi(argv[2])};
    struct dl_error e = {0};
    struct dl_dataset ds;
    if (dl_dataset_load(&d, 1, shape, 10, 7, &ds, &e))
        return fail(&e);
    struct dl_batcher *b = calloc((size_t)ranks, sizeof *b);
    int *rank_ids = calloc((size_t)ranks, sizeof *rank_ids);
    for (int r = 0; r < ranks; r++) {
        if (dl_batcher_init(&b[r], &ds, batch, r, ranks, 1, 7, 0, &e))
            return fail(&e);
        rank_ids[r] = r;
        dl_batcher_set_warning(&b[r], print_warning, &rank_ids[r]);
    }
    size_t count = (size_t)dl_shape_count(shape);
    float *x = calloc((size_t)batch * count, sizeof *x);
    int *y = calloc((size_t)batch, sizeof *y);
    for (int r = 0; r < ranks; r++)
        dl_batcher_start_epoch(&b[r], atol(argv[6]));
    /* Per step: every rank's inputs in rank order, then their labels (the
     * layout of one process's batch). */
    for (;;) {
        int total = 0;
        for (int r = 0; r < ranks; r++) {
            int n = dl_batcher_next(&b[r], x + (size_t)total * count, y + total);
            if (n < 0)
                return fail(&b[r].error);
            total += n;
        }
        if (!total)
            break;
        fwrite(x, sizeof *x, (size_t)total * count, stdout);
        fwrite(y, sizeof *y, (size_t)total, stdout);
    }
    for (int r = 0; r < ranks; r++)
        dl_batcher_free(&b[r]);
    dl_dataset_free(&ds);
    free(b);
    free(rank_ids);
    free(x);
    free(y);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "decode") == 0)
        return cmd_decode(argv + 2);
    if (argc == 12 && strcmp(argv[1], "box") == 0)
        return cmd_box(argv + 2);
    if (argc == 9 && strcmp(argv[1], "boxes") == 0)
        return cmd_boxes(argv + 2);
    if (argc == 9 && strcmp(argv[1], "batches") == 0)
        return cmd_batches(argv + 2);
    fprintf(stderr, "usage: see the comment at the top of tests/image_tool.c\n");
    return 2;
}
