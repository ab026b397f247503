/* test_data.c: the IDX reader (round trips and every kind of damaged file),
 * dataset loading (IDX paths, MNIST-style folders, the real Fashion-MNIST when
 * installed, synthetic data, normalisation with training statistics), the
 * batcher (coverage, seeded order, data-parallel shards, drop_last, seek),
 * the batcher over a sample source on decode threads (order, seeds, seek,
 * unreadable samples, range reading), CIFAR-100 and image-folder listings.
 * Fixture files are written at run time into a temporary folder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "config.h"
#include "core/rng.h"
#include "data/batcher.h"
#include "data/permutation.h"
#include "data/cifar.h"
#include "data/dataset.h"
#include "data/idx.h"
#include "data/imagefolder.h"
#include "data/token_file.h"
#include "data/token_windows.h"

struct fixture {
    char dir[512];
};

/* ---------------------------------------------------------------- helpers */

/* Writes an IDX header (magic, ndim dims) followed by len data bytes, plain or
 * gzipped.  len may disagree with the dims, to make damaged files. */
static void write_idx(const char *path, int gz, uint32_t magic, int ndim, const uint32_t *dims,
                      const unsigned char *data, size_t len)
{
    unsigned char h[4 + 4 * 4];
    size_t hn = 0;
    uint32_t words[5] = {magic};
    for (int i = 0; i < ndim; i++)
        words[1 + i] = dims[i];
    for (int i = 0; i < 1 + ndim; i++) {
        h[hn++] = (unsigned char)(words[i] >> 24);
        h[hn++] = (unsigned char)(words[i] >> 16);
        h[hn++] = (unsigned char)(words[i] >> 8);
        h[hn++] = (unsigned char)words[i];
    }
    if (gz) {
        gzFile f = gzopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(gzwrite(f, h, (unsigned)hn), (int)hn);
        if (len)
            assert_int_equal(gzwrite(f, data, (unsigned)len), (int)len);
        assert_int_equal(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(h, 1, hn, f), hn);
        if (len)
            assert_int_equal(fwrite(data, 1, len, f), len);
        assert_int_equal(fclose(f), 0);
    }
}

/* Images N x H x W with pixel i = (i * 7 + salt) mod 256, labels i mod classes. */
static void write_pair(const char *images, const char *labels, int gz, uint32_t n, uint32_t h,
                       uint32_t w, int classes, int salt)
{
    size_t len = (size_t)n * h * w;
    unsigned char *px = malloc(len), *lb = malloc(n);
    assert_non_null(px);
    assert_non_null(lb);
    for (size_t i = 0; i < len; i++)
        px[i] = (unsigned char)((i * 7 + (size_t)salt) % 256);
    for (uint32_t i = 0; i < n; i++)
        lb[i] = (unsigned char)(i % (uint32_t)classes);
    uint32_t dims[3] = {n, h, w};
    write_idx(images, gz, DL_IDX_MAGIC_IMAGES, 3, dims, px, len);
    write_idx(labels, gz, DL_IDX_MAGIC_LABELS, 1, dims, lb, n);
    free(px);
    free(lb);
}

static const char *fpath(void **state, const char *name, char *buf, size_t n)
{
    struct fixture *fx = *state;
    snprintf(buf, n, "%s/%s", fx->dir, name);
    return buf;
}

/* Asserts that the error has the given code and that its message contains
 * every one of the NULL-terminated strings that follow. */
static void expect_error(int rc, const struct dl_error *err, int code, ...)
{
    if (rc != code || err->code != code)
        fail_msg("expected status %d, got %d: %s", code, rc, rc ? err->msg : "(no error)");
    va_list ap;
    va_start(ap, code);
    for (const char *s; (s = va_arg(ap, const char *));)
        if (!strstr(err->msg, s))
            fail_msg("message \"%s\" lacks \"%s\"", err->msg, s);
    va_end(ap);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof *fx);
    if (!fx)
        return -1;
    const char *tmp = getenv("TMPDIR");
    snprintf(fx->dir, sizeof fx->dir, "%s/test_data.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(fx->dir)) {
        free(fx);
        return -1;
    }
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    nftw(fx->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(fx);
    return 0;
}

/* ---------------------------------------------------------------- IDX reader */

static void idx_round_trip(void **state)
{
    char ip[600], lp[600];
    for (int gz = 0; gz < 2; gz++) {
        fpath(state, gz ? "rt-img.gz" : "rt-img", ip, sizeof ip);
        fpath(state, gz ? "rt-lab.gz" : "rt-lab", lp, sizeof lp);
        write_pair(ip, lp, gz, 5, 3, 4, 10, 1);
        struct dl_idx img, lab;
        struct dl_error err = {0};
        assert_int_equal(dl_idx_read_pair(ip, lp, 10, &img, &lab, &err), DL_OK);
        assert_int_equal(img.ndim, 3);
        assert_int_equal(img.dims[0], 5);
        assert_int_equal(img.dims[1], 3);
        assert_int_equal(img.dims[2], 4);
        assert_int_equal(img.size, 60);
        for (size_t i = 0; i < 60; i++)
            assert_int_equal(img.data[i], (i * 7 + 1) % 256);
        assert_int_equal(lab.ndim, 1);
        assert_int_equal(lab.size, 5);
        for (int i = 0; i < 5; i++)
            assert_int_equal(lab.data[i], i);
        dl_idx_free(&img);
        dl_idx_free(&lab);
        assert_null(img.data);
    }
    /* A file larger than the first read chunk (1 MiB) exercises buffer growth. */
    fpath(state, "big.gz", ip, sizeof ip);
    fpath(state, "big-lab.gz", lp, sizeof lp);
    write_pair(ip, lp, 1, 3000, 28, 28, 10, 3);
    struct dl_idx img;
    struct dl_error err = {0};
    assert_int_equal(dl_idx_read(ip, 3, &img, &err), DL_OK);
    assert_int_equal(img.size, 3000 * 784);
    for (size_t i = 0; i < img.size; i += 997)
        assert_int_equal(img.data[i], (i * 7 + 3) % 256);
    dl_idx_free(&img);
}

static void idx_missing_file(void **state)
{
    char p[600];
    fpath(state, "no-such-file", p, sizeof p);
    struct dl_idx img;
    struct dl_error err = {0};
    expect_error(dl_idx_read(p, 3, &img, &err), &err, DL_ERR_IO, p, "cannot open", NULL);
    assert_null(img.data);
}

static void idx_bad_magic(void **state)
{
    char p[600], lp[600];
    unsigned char px[4] = {0};
    uint32_t dims[3] = {1, 2, 2};
    for (int gz = 0; gz < 2; gz++) {
        fpath(state, gz ? "magic.gz" : "magic", p, sizeof p);
        write_idx(p, gz, 0x00000804u, 3, dims, px, 4);
        struct dl_idx img;
        struct dl_error err = {0};
        expect_error(dl_idx_read(p, 3, &img, &err), &err, DL_ERR_DATA, p, "0x00000804",
                     "0x00000803", NULL);
    }
    /* A labels file given where images are expected, and vice versa. */
    fpath(state, "ok-img", p, sizeof p);
    fpath(state, "ok-lab", lp, sizeof lp);
    write_pair(p, lp, 0, 2, 2, 2, 2, 0);
    struct dl_idx a, b;
    struct dl_error err = {0};
    expect_error(dl_idx_read_pair(lp, p, 2, &a, &b, &err), &err, DL_ERR_DATA, lp,
                 "0x00000801", "expected 0x00000803", NULL);
    /* Float IDX (type 0x0d) is not unsigned bytes. */
    write_idx(p, 0, 0x00000d03u, 3, dims, px, 4);
    expect_error(dl_idx_read(p, 3, &a, &err), &err, DL_ERR_DATA, p, "0x00000d03", NULL);
}

static void idx_truncated(void **state)
{
    char p[600];
    unsigned char px[200];
    memset(px, 9, sizeof px);
    uint32_t dims[3] = {10, 4, 4}; /* promises 160 bytes */
    for (int gz = 0; gz < 2; gz++) {
        fpath(state, gz ? "trunc.gz" : "trunc", p, sizeof p);
        write_idx(p, gz, DL_IDX_MAGIC_IMAGES, 3, dims, px, 100);
        struct dl_idx img;
        struct dl_error err = {0};
        expect_error(dl_idx_read(p, 3, &img, &err), &err, DL_ERR_DATA, p, "truncated", "160",
                     "found 100", NULL);
        /* Too long is as wrong as too short. */
        write_idx(p, gz, DL_IDX_MAGIC_IMAGES, 3, dims, px, 170);
        expect_error(dl_idx_read(p, 3, &img, &err), &err, DL_ERR_DATA, p, "160", "170",
                     "10 extra", NULL);
    }
    /* A header cut short: magic and one of three dimensions. */
    fpath(state, "short-header", p, sizeof p);
    write_idx(p, 0, DL_IDX_MAGIC_IMAGES, 1, dims, NULL, 0);
    struct dl_idx img;
    struct dl_error err = {0};
    expect_error(dl_idx_read(p, 3, &img, &err), &err, DL_ERR_DATA, p, "16-byte", "found 8",
                 NULL);
    /* An empty file. */
    fpath(state, "empty", p, sizeof p);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    fclose(f);
    expect_error(dl_idx_read(p, 1, &img, &err), &err, DL_ERR_DATA, p, "found 0", NULL);
    /* A gzip stream cut in the middle of its compressed data. */
    fpath(state, "cut.gz", p, sizeof p);
    unsigned char big[5000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (unsigned char)(i * 131 % 251);
    uint32_t bd[3] = {5, 1000, 1};
    write_idx(p, 1, DL_IDX_MAGIC_IMAGES, 3, bd, big, sizeof big);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(truncate(p, st.st_size / 2), 0);
    expect_error(dl_idx_read(p, 3, &img, &err), &err, DL_ERR_DATA, p, "truncated", "5000",
                 NULL);
    assert_null(img.data);
}

/* Writes <tag>-img (n_images of 2x2, plain) and <tag>-lab (the given labels,
 * gzipped if gz) and returns their paths in ip and lp (600 bytes each). */
static void write_labelled(void **state, const char *tag, int gz, uint32_t n_images,
                           const unsigned char *labels, uint32_t n_labels, char *ip, char *lp)
{
    char name[64];
    snprintf(name, sizeof name, "%s-img", tag);
    fpath(state, name, ip, 600);
    snprintf(name, sizeof name, "%s-lab%s", tag, gz ? ".gz" : "");
    fpath(state, name, lp, 600);
    write_pair(ip, lp, 0, n_images, 2, 2, 3, 0);
    write_idx(lp, gz, DL_IDX_MAGIC_LABELS, 1, &n_labels, labels, n_labels);
}

static void idx_count_mismatch(void **state)
{
    char ip[600], lp[600];
    const unsigned char lb[4] = {0, 1, 2, 0};
    write_labelled(state, "cm", 0, 5, lb, 4, ip, lp);
    struct dl_idx img, lab;
    struct dl_error err = {0};
    expect_error(dl_idx_read_pair(ip, lp, 3, &img, &lab, &err), &err, DL_ERR_DATA, lp, ip,
                 "4 labels", "5 images", NULL);
    assert_null(img.data);
    assert_null(lab.data);
}

static void idx_label_out_of_range(void **state)
{
    char ip[600], lp[600];
    const unsigned char lb[4] = {0, 1, 10, 2};
    write_labelled(state, "lr", 1, 4, lb, 4, ip, lp);
    struct dl_idx img, lab;
    struct dl_error err = {0};
    assert_int_equal(dl_idx_read_pair(ip, lp, 11, &img, &lab, &err), DL_OK);
    dl_idx_free(&img);
    dl_idx_free(&lab);
    expect_error(dl_idx_read_pair(ip, lp, 10, &img, &lab, &err), &err, DL_ERR_DATA, lp,
                 "label 10 of sample 2", "0..9", NULL);
}

static void idx_huge_dims(void **state)
{
    char p[600];
    struct dl_idx img;
    struct dl_error err = {0};
    /* 2^96 bytes: rejected from the header alone. */
    uint32_t huge[3] = {0xffffffffu, 0xffffffffu, 0xffffffffu};
    fpath(state, "huge", p, sizeof p);
    write_idx(p, 0, DL_IDX_MAGIC_IMAGES, 3, huge, NULL, 0);
    expect_error(dl_idx_read(p, 3, &img, &err), &err, DL_ERR_DATA, p, "4294967295", NULL);
    /* 10^12 bytes: plausible to the header, but a 16-byte file (plain or
     * gzipped) must fail without allocating for the promise. */
    uint32_t big[3] = {1000000u, 1000u, 1000u};
    for (int gz = 0; gz < 2; gz++) {
        fpath(state, gz ? "big-promise.gz" : "big-promise", p, sizeof p);
        write_idx(p, gz, DL_IDX_MAGIC_IMAGES, 3, big, (const unsigned char *)"abc", 3);
        expect_error(dl_idx_read(p, 3, &img, &err), &err, DL_ERR_DATA, p, "truncated",
                     "1000000000000", "found 3", NULL);
    }
    /* A zero dimension is no dataset. */
    uint32_t zero[3] = {3, 0, 28};
    fpath(state, "zero", p, sizeof p);
    write_idx(p, 0, DL_IDX_MAGIC_IMAGES, 3, zero, NULL, 0);
    expect_error(dl_idx_read(p, 3, &img, &err), &err, DL_ERR_DATA, p, "dimension 1 is 0",
                 NULL);
}

/* ---------------------------------------------------------------- datasets */

static void dataset_idx_paths(void **state)
{
    struct dl_data_spec spec = {.kind = DL_DATASET_IDX};
    fpath(state, "ds-train-img", spec.train_images, sizeof spec.train_images);
    fpath(state, "ds-train-lab", spec.train_labels, sizeof spec.train_labels);
    fpath(state, "ds-test-img.gz", spec.test_images, sizeof spec.test_images);
    fpath(state, "ds-test-lab.gz", spec.test_labels, sizeof spec.test_labels);
    write_pair(spec.train_images, spec.train_labels, 0, 20, 4, 3, 5, 0);
    write_pair(spec.test_images, spec.test_labels, 1, 7, 4, 3, 5, 11);
    struct dl_shape s = {1, 4, 3};
    struct dl_dataset tr, te;
    struct dl_error err = {0};
    assert_int_equal(dl_dataset_load(&spec, 1, s, 5, 0, &tr, &err), DL_OK);
    assert_int_equal(tr.n, 20);
    assert_true(dl_shape_eq(tr.shape, s));
    assert_int_equal(tr.classes, 5);
    assert_string_equal(tr.name, "idx train");
    assert_null(tr.mean);
    for (long i = 0; i < 20 * 12; i++)
        assert_float_equal(tr.x[i], (float)((i * 7) % 256) / 255.0f, 1e-7);
    for (long i = 0; i < 20; i++)
        assert_int_equal(tr.y[i], i % 5);
    assert_int_equal(dl_dataset_load(&spec, 0, s, 5, 0, &te, &err), DL_OK);
    assert_int_equal(te.n, 7);
    assert_float_equal(te.x[1], 18.0f / 255.0f, 1e-7);
    dl_dataset_free(&tr);
    dl_dataset_free(&te);

    spec.limit_train = 6;
    spec.limit_test = 100; /* more than there are: no effect */
    assert_int_equal(dl_dataset_load(&spec, 1, s, 5, 0, &tr, &err), DL_OK);
    assert_int_equal(tr.n, 6);
    assert_int_equal(tr.y[5], 0);
    assert_int_equal(dl_dataset_load(&spec, 0, s, 5, 0, &te, &err), DL_OK);
    assert_int_equal(te.n, 7);
    dl_dataset_free(&tr);
    dl_dataset_free(&te);

    /* The network's input shape must match the files. */
    struct dl_shape rgb = {3, 32, 32};
    expect_error(dl_dataset_load(&spec, 1, rgb, 5, 0, &tr, &err), &err, DL_ERR_DATA,
                 "network input is 3x32x32", "images are 1x4x3", spec.train_images, NULL);
    assert_null(tr.x);
    struct dl_shape flat = {12, 1, 1};
    expect_error(dl_dataset_load(&spec, 1, flat, 5, 0, &tr, &err), &err, DL_ERR_DATA,
                 "network input is 12 but", "1x4x3", NULL);
    /* Labels 0..4 do not fit a 4-class network. */
    expect_error(dl_dataset_load(&spec, 1, s, 4, 0, &tr, &err), &err, DL_ERR_DATA,
                 spec.train_labels, "label 4", "0..3", NULL);
    spec.test_labels[0] = '\0';
    expect_error(dl_dataset_load(&spec, 0, s, 5, 0, &te, &err), &err, DL_ERR_SPEC, "idx test",
                 NULL);
}

static void dataset_mnist_folder(void **state)
{
    struct fixture *fx = *state;
    struct dl_data_spec spec = {.kind = DL_DATASET_MNIST};
    snprintf(spec.dir, sizeof spec.dir, "%s/mnist", fx->dir);
    assert_int_equal(mkdir(spec.dir, 0700), 0);
    char ip[1200], lp[1200];
    /* Training files plain, test files gzipped: both forms are found. */
    snprintf(ip, sizeof ip, "%s/train-images-idx3-ubyte", spec.dir);
    snprintf(lp, sizeof lp, "%s/train-labels-idx1-ubyte", spec.dir);
    write_pair(ip, lp, 0, 30, 28, 28, 10, 0);
    snprintf(ip, sizeof ip, "%s/t10k-images-idx3-ubyte.gz", spec.dir);
    snprintf(lp, sizeof lp, "%s/t10k-labels-idx1-ubyte.gz", spec.dir);
    write_pair(ip, lp, 1, 10, 28, 28, 10, 5);
    struct dl_shape s = {1, 28, 28};
    struct dl_dataset ds;
    struct dl_error err = {0};
    assert_int_equal(dl_dataset_load(&spec, 1, s, 10, 0, &ds, &err), DL_OK);
    assert_int_equal(ds.n, 30);
    assert_string_equal(ds.name, "mnist train");
    dl_dataset_free(&ds);
    assert_int_equal(dl_dataset_load(&spec, 0, s, 10, 0, &ds, &err), DL_OK);
    assert_int_equal(ds.n, 10);
    assert_float_equal(ds.x[0], 5.0f / 255.0f, 1e-7);
    dl_dataset_free(&ds);

    /* A missing file is named, with both names tried. */
    assert_int_equal(remove(lp), 0);
    expect_error(dl_dataset_load(&spec, 0, s, 10, 0, &ds, &err), &err, DL_ERR_IO,
                 "t10k-labels-idx1-ubyte nor", "t10k-labels-idx1-ubyte.gz", "--data DIR", NULL);
    /* MNIST has no default folder. */
    spec.dir[0] = '\0';
    expect_error(dl_dataset_load(&spec, 1, s, 10, 0, &ds, &err), &err, DL_ERR_SPEC, "mnist",
                 "--data DIR", NULL);
    /* A missing Fashion-MNIST folder says how to get it. */
    spec.kind = DL_DATASET_FASHION_MNIST;
    snprintf(spec.dir, sizeof spec.dir, "%s/absent", fx->dir);
    expect_error(dl_dataset_load(&spec, 1, s, 10, 0, &ds, &err), &err, DL_ERR_IO, spec.dir,
                 "install the Debian package dataset-fashion-mnist or pass --data DIR", NULL);
    assert_null(ds.x);
}

static void dataset_normalize_with_training_stats(void **state)
{
    struct dl_data_spec spec = {.kind = DL_DATASET_IDX, .normalize = 1};
    fpath(state, "nm-train-img", spec.train_images, sizeof spec.train_images);
    fpath(state, "nm-train-lab", spec.train_labels, sizeof spec.train_labels);
    fpath(state, "nm-test-img", spec.test_images, sizeof spec.test_images);
    fpath(state, "nm-test-lab", spec.test_labels, sizeof spec.test_labels);
    write_pair(spec.train_images, spec.train_labels, 0, 50, 5, 5, 3, 0);
    write_pair(spec.test_images, spec.test_labels, 0, 9, 5, 5, 3, 100);
    /* The training statistics, computed here independently. */
    double s = 0, s2 = 0;
    for (long i = 0; i < 50 * 25; i++) {
        double v = (double)((i * 7) % 256) / 255.0;
        s += v;
        s2 += v * v;
    }
    double mean = s / 1250, sd = sqrt(s2 / 1250 - mean * mean);
    struct dl_shape sh = {1, 5, 5};
    struct dl_dataset tr, te;
    struct dl_error err = {0};
    assert_int_equal(dl_dataset_load(&spec, 1, sh, 3, 0, &tr, &err), DL_OK);
    assert_non_null(tr.mean);
    assert_float_equal(tr.mean[0], mean, 1e-5);
    assert_float_equal(tr.std[0], sd, 1e-5);
    double t = 0, t2 = 0;
    for (long i = 0; i < 1250; i++) {
        t += tr.x[i];
        t2 += (double)tr.x[i] * tr.x[i];
    }
    assert_float_equal(t / 1250, 0.0, 1e-5);
    assert_float_equal(t2 / 1250, 1.0, 1e-4);
    /* The test split uses the training statistics, not its own. */
    assert_int_equal(dl_dataset_load(&spec, 0, sh, 3, 0, &te, &err), DL_OK);
    assert_float_equal(te.mean[0], tr.mean[0], 0);
    assert_float_equal(te.std[0], tr.std[0], 0);
    for (long i = 0; i < 9 * 25; i++) {
        double raw = (double)((i * 7 + 100) % 256) / 255.0;
        assert_float_equal(te.x[i], (raw - mean) / sd, 1e-4);
    }
    dl_dataset_free(&tr);
    dl_dataset_free(&te);
}

static void fashion_mnist_real(void **state)
{
    (void)state;
    struct stat st;
    if (stat(DL_FASHION_MNIST_DIR, &st) != 0)
        skip();
    struct dl_data_spec spec = {.kind = DL_DATASET_FASHION_MNIST};
    struct dl_shape s = {1, 28, 28};
    struct dl_error err = {0};
    for (int train = 1; train >= 0; train--) {
        struct dl_dataset ds;
        int rc = dl_dataset_load(&spec, train, s, 10, 0, &ds, &err);
        if (rc != DL_OK)
            fail_msg("%s", err.msg);
        long n = train ? 60000 : 10000;
        assert_int_equal(ds.n, n);
        assert_true(dl_shape_eq(ds.shape, s));
        long per_class[10] = {0};
        for (long i = 0; i < ds.n; i++) {
            assert_true(ds.y[i] >= 0 && ds.y[i] < 10);
            per_class[ds.y[i]]++;
        }
        for (int k = 0; k < 10; k++)
            assert_int_equal(per_class[k], n / 10);
        double sum = 0;
        float lo = 1, hi = 0;
        for (long i = 0; i < ds.n * 784; i++) {
            sum += ds.x[i];
            lo = ds.x[i] < lo ? ds.x[i] : lo;
            hi = ds.x[i] > hi ? ds.x[i] : hi;
        }
        assert_float_equal(lo, 0.0f, 0);
        assert_float_equal(hi, 1.0f, 0);
        /* Fashion-MNIST's well-known pixel mean is 0.2860 (train), 0.2868 (test). */
        assert_float_equal(sum / ((double)ds.n * 784), train ? 0.2860 : 0.2868, 5e-4);
        dl_dataset_free(&ds);
    }
    /* Normalised, the training split has mean 0 and std 1 (known std 0.3530). */
    spec.normalize = 1;
    spec.limit_test = 100;
    struct dl_dataset te;
    assert_int_equal(dl_dataset_load(&spec, 0, s, 10, 0, &te, &err), DL_OK);
    assert_int_equal(te.n, 100);
    assert_float_equal(te.mean[0], 0.2860, 5e-4);
    assert_float_equal(te.std[0], 0.3530, 5e-4);
    dl_dataset_free(&te);
    /* And a network that wants other images is told what the files hold. */
    struct dl_shape rgb = {3, 32, 32};
    struct dl_dataset ds;
    expect_error(dl_dataset_load(&spec, 1, rgb, 10, 0, &ds, &err), &err, DL_ERR_DATA,
                 "network input is 3x32x32 but fashion-mnist train images are 1x28x28", NULL);
}

static int same_data(const struct dl_dataset *a, const struct dl_dataset *b, long n)
{
    long count = dl_shape_count(a->shape);
    return memcmp(a->x, b->x, (size_t)(n * count) * sizeof(float)) == 0 &&
           memcmp(a->y, b->y, (size_t)n * sizeof(int)) == 0;
}

static void synthetic_deterministic(void **state)
{
    (void)state;
    struct dl_data_spec spec = {.kind = DL_DATASET_SYNTHETIC, .synthetic_train = 300,
                                .synthetic_test = 100};
    struct dl_shape s = {3, 4, 5};
    struct dl_dataset a, b, c, t;
    struct dl_error err = {0};
    assert_int_equal(dl_dataset_load(&spec, 1, s, 7, 42, &a, &err), DL_OK);
    assert_int_equal(dl_dataset_load(&spec, 1, s, 7, 42, &b, &err), DL_OK);
    assert_int_equal(dl_dataset_load(&spec, 1, s, 7, 43, &c, &err), DL_OK);
    assert_int_equal(dl_dataset_load(&spec, 0, s, 7, 42, &t, &err), DL_OK);
    assert_int_equal(a.n, 300);
    assert_int_equal(t.n, 100);
    assert_string_equal(a.name, "synthetic train");
    assert_true(same_data(&a, &b, 300));
    assert_false(same_data(&a, &c, 100));
    assert_false(same_data(&a, &t, 100));
    int seen[7] = {0};
    double s1 = 0, s2 = 0;
    for (long i = 0; i < a.n; i++) {
        assert_true(a.y[i] >= 0 && a.y[i] < 7);
        seen[a.y[i]]++;
    }
    for (long i = 0; i < a.n * 60; i++) {
        s1 += a.x[i];
        s2 += (double)a.x[i] * a.x[i];
    }
    for (int k = 0; k < 7; k++)
        assert_true(seen[k] > 20);
    /* Per-element class means of +-0.45 average out only roughly. */
    assert_float_equal(s1 / (a.n * 60), 0.0, 0.08);
    assert_float_equal(s2 / (a.n * 60), 1.0, 0.03);
    /* A limit takes a prefix of the same stream. */
    spec.limit_train = 50;
    dl_dataset_free(&b);
    assert_int_equal(dl_dataset_load(&spec, 1, s, 7, 42, &b, &err), DL_OK);
    assert_int_equal(b.n, 50);
    assert_true(same_data(&a, &b, 50));
    dl_dataset_free(&a);
    dl_dataset_free(&b);
    dl_dataset_free(&c);
    dl_dataset_free(&t);
    /* Unspecified counts take the documented defaults; negative ones fail. */
    struct dl_data_spec d = {.kind = DL_DATASET_SYNTHETIC};
    assert_int_equal(dl_dataset_load(&d, 0, s, 2, 1, &a, &err), DL_OK);
    assert_int_equal(a.n, DL_SYNTHETIC_DEFAULT_TEST);
    dl_dataset_free(&a);
    d.synthetic_train = -1;
    expect_error(dl_dataset_load(&d, 1, s, 2, 1, &a, &err), &err, DL_ERR_SPEC, "-1", NULL);
}

/* The labels follow the inputs: class centroids of the training split
 * classify the test split far above chance (1/10). */
static void synthetic_learnable(void **state)
{
    (void)state;
    struct dl_data_spec spec = {.kind = DL_DATASET_SYNTHETIC, .synthetic_train = 1000,
                                .synthetic_test = 500};
    struct dl_shape s = {1, 8, 8};
    enum { K = 10, D = 64 };
    struct dl_dataset tr, te;
    struct dl_error err = {0};
    assert_int_equal(dl_dataset_load(&spec, 1, s, K, 5, &tr, &err), DL_OK);
    assert_int_equal(dl_dataset_load(&spec, 0, s, K, 5, &te, &err), DL_OK);
    double cen[K][D] = {{0}};
    int cnt[K] = {0};
    for (long i = 0; i < tr.n; i++) {
        cnt[tr.y[i]]++;
        for (int j = 0; j < D; j++)
            cen[tr.y[i]][j] += tr.x[i * D + j];
    }
    for (int k = 0; k < K; k++)
        for (int j = 0; j < D; j++)
            cen[k][j] /= cnt[k] ? cnt[k] : 1;
    long right = 0;
    for (long i = 0; i < te.n; i++) {
        int best = 0;
        double bd = INFINITY;
        for (int k = 0; k < K; k++) {
            double d2 = 0;
            for (int j = 0; j < D; j++)
                d2 += (te.x[i * D + j] - cen[k][j]) * (te.x[i * D + j] - cen[k][j]);
            if (d2 < bd) {
                bd = d2;
                best = k;
            }
        }
        right += best == te.y[i];
    }
    assert_true(right > te.n * 9 / 10);
    dl_dataset_free(&tr);
    dl_dataset_free(&te);
}

/* ---------------------------------------------------------------- batcher */

/* n samples of shape 2x1x1: sample i is (i, -i), label i mod 3. */
static void make_counting(struct dl_dataset *ds, long n)
{
    memset(ds, 0, sizeof *ds);
    ds->n = n;
    ds->shape = (struct dl_shape){2, 1, 1};
    ds->classes = 3;
    ds->x = calloc((size_t)n * 2, sizeof *ds->x);
    ds->y = calloc((size_t)n, sizeof *ds->y);
    assert_non_null(ds->x);
    assert_non_null(ds->y);
    for (long i = 0; i < n; i++) {
        ds->x[2 * i] = (float)i;
        ds->x[2 * i + 1] = (float)-i;
        ds->y[i] = (int)(i % 3);
    }
    snprintf(ds->name, sizeof ds->name, "counting");
}

/* Runs one epoch and writes the sample ids in order into ids; returns how
 * many were produced and stores the batch sizes in sizes[]. */
static long run_epoch(struct dl_batcher *b, long epoch, int *ids, int *sizes)
{
    float x[2 * 64];
    int y[64];
    long total = 0, step = 0;
    dl_batcher_start_epoch(b, epoch);
    for (int got; (got = dl_batcher_next(b, x, y)) > 0; step++) {
        assert_true(got <= dl_batcher_max_local(b));
        if (sizes)
            sizes[step] = got;
        for (int i = 0; i < got; i++) {
            int id = (int)x[2 * i];
            assert_float_equal(x[2 * i + 1], -(float)id, 0);
            assert_int_equal(y[i], id % 3);
            ids[total++] = id;
        }
    }
    assert_int_equal(step, dl_batcher_steps_per_epoch(b));
    assert_int_equal(dl_batcher_next(b, x, y), 0);
    return total;
}

static void batcher_epochs(void **state)
{
    (void)state;
    struct dl_dataset ds;
    make_counting(&ds, 103);
    struct dl_batcher b, b2, b3;
    struct dl_error err = {0};
    assert_int_equal(dl_batcher_init(&b, &ds, 10, 0, 1, 1, 9, 0, &err), DL_OK);
    assert_int_equal(dl_batcher_steps_per_epoch(&b), 11);
    int e0[103], e1[103], again[103], sizes[11], seen[103] = {0};
    assert_int_equal(run_epoch(&b, 0, e0, sizes), 103);
    for (int i = 0; i < 10; i++)
        assert_int_equal(sizes[i], 10);
    assert_int_equal(sizes[10], 3);
    for (int i = 0; i < 103; i++)
        seen[e0[i]]++;
    for (int i = 0; i < 103; i++)
        assert_int_equal(seen[i], 1);
    assert_int_equal(run_epoch(&b, 1, e1, NULL), 103);
    assert_true(memcmp(e0, e1, sizeof e0) != 0);
    int moved = 0;
    for (int i = 0; i < 103; i++)
        moved += e0[i] != i;
    assert_true(moved > 80);
    /* The same seed gives the same order, whatever happened before. */
    assert_int_equal(dl_batcher_init(&b2, &ds, 10, 0, 1, 1, 9, 0, &err), DL_OK);
    assert_int_equal(run_epoch(&b2, 1, again, NULL), 103);
    assert_memory_equal(e1, again, sizeof e1);
    assert_int_equal(run_epoch(&b, 0, again, NULL), 103);
    assert_memory_equal(e0, again, sizeof e0);
    /* Another seed, another order; no shuffle, the file order. */
    assert_int_equal(dl_batcher_init(&b3, &ds, 10, 0, 1, 1, 10, 0, &err), DL_OK);
    assert_int_equal(run_epoch(&b3, 0, again, NULL), 103);
    assert_true(memcmp(e0, again, sizeof e0) != 0);
    dl_batcher_free(&b3);
    assert_int_equal(dl_batcher_init(&b3, &ds, 10, 0, 1, 0, 9, 0, &err), DL_OK);
    assert_int_equal(run_epoch(&b3, 4, again, NULL), 103);
    for (int i = 0; i < 103; i++)
        assert_int_equal(again[i], i);
    dl_batcher_free(&b);
    dl_batcher_free(&b2);
    dl_batcher_free(&b3);
    dl_dataset_free(&ds);
}

/* Concatenating the p ranks' slices of every step, in rank order, gives the
 * 1-rank batch of that step. */
static void check_shards(long n, int batch, int p, int drop_last)
{
    struct dl_dataset ds;
    make_counting(&ds, n);
    struct dl_error err = {0};
    struct dl_batcher one, ranks[8];
    assert_int_equal(dl_batcher_init(&one, &ds, batch, 0, 1, 1, 77, drop_last, &err), DL_OK);
    for (int r = 0; r < p; r++)
        assert_int_equal(dl_batcher_init(&ranks[r], &ds, batch, r, p, 1, 77, drop_last, &err),
                         DL_OK);
    long steps = dl_batcher_steps_per_epoch(&ranks[0]);
    long rest = n % batch;
    long want_one = n / batch + (rest > 0 && !drop_last);
    assert_int_equal(dl_batcher_steps_per_epoch(&one), want_one);
    /* A leftover smaller than p is dropped on p ranks, so nobody idles. */
    assert_int_equal(steps, n / batch + (rest >= p && !drop_last));
    float x1[2 * 64], xr[2 * 64];
    int y1[64], yr[64];
    for (long epoch = 0; epoch < 3; epoch++) {
        dl_batcher_start_epoch(&one, epoch);
        for (int r = 0; r < p; r++)
            dl_batcher_start_epoch(&ranks[r], epoch);
        for (long s = 0; s < steps; s++) {
            int g = dl_batcher_next(&one, x1, y1), off = 0;
            for (int r = 0; r < p; r++) {
                int got = dl_batcher_next(&ranks[r], xr, yr);
                assert_true(got >= 1);
                assert_true(got <= dl_batcher_max_local(&ranks[r]));
                assert_int_equal(ranks[r].last_global, g);
                assert_memory_equal(xr, x1 + 2 * off, (size_t)got * 2 * sizeof(float));
                assert_memory_equal(yr, y1 + off, (size_t)got * sizeof(int));
                off += got;
            }
            assert_int_equal(off, g);
        }
        for (int r = 0; r < p; r++)
            assert_int_equal(dl_batcher_next(&ranks[r], xr, yr), 0);
    }
    dl_batcher_free(&one);
    for (int r = 0; r < p; r++)
        dl_batcher_free(&ranks[r]);
    dl_dataset_free(&ds);
}

static void batcher_shards(void **state)
{
    (void)state;
    check_shards(103, 16, 4, 0); /* leftover 7 >= 4 ranks: kept and split */
    check_shards(103, 10, 4, 0); /* slices of 2, 3, 2, 3; leftover 3 < 4: dropped */
    check_shards(103, 10, 3, 0); /* leftover 3 split 1, 1, 1 */
    check_shards(103, 16, 4, 1);
    check_shards(96, 16, 4, 0);  /* no leftover */
    check_shards(50, 7, 7, 0);   /* one sample per rank */
}

static void batcher_drop_last(void **state)
{
    (void)state;
    struct dl_dataset ds;
    make_counting(&ds, 103);
    struct dl_batcher b;
    struct dl_error err = {0};
    assert_int_equal(dl_batcher_init(&b, &ds, 10, 0, 1, 1, 3, 1, &err), DL_OK);
    assert_int_equal(dl_batcher_steps_per_epoch(&b), 10);
    int ids[103], sizes[10], seen[103] = {0};
    assert_int_equal(run_epoch(&b, 2, ids, sizes), 100);
    for (int i = 0; i < 10; i++)
        assert_int_equal(sizes[i], 10);
    for (int i = 0; i < 100; i++)
        assert_int_equal(++seen[ids[i]], 1);
    dl_batcher_free(&b);
    /* Too few samples for one batch, and a batch smaller than the ranks. */
    expect_error(dl_batcher_init(&b, &ds, 200, 0, 1, 1, 3, 1, &err), &err, DL_ERR_SPEC,
                 "103 samples", "200", NULL);
    assert_null(b.perm);
    expect_error(dl_batcher_init(&b, &ds, 3, 0, 4, 1, 3, 0, &err), &err, DL_ERR_SPEC,
                 "batch size 3", "4 data-parallel ranks", NULL);
    dl_dataset_free(&ds);
}

/* data/permutation.h on sizes from 1 up: every position maps to a distinct
 * element below n; the seed decides the order (the same seed, the same;
 * another, another), which is far from the identity. */
static void permutation_is_a_seeded_bijection(void **state)
{
    (void)state;
    static const uint64_t sizes[] = {1, 2, 3, 7, 100, 4097, 12345};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        uint64_t n = sizes[c];
        unsigned char *seen = calloc(n, 1);
        assert_non_null(seen);
        struct dl_permutation p, again, other;
        dl_permutation_init(&p, n, 42);
        dl_permutation_init(&again, n, 42);
        dl_permutation_init(&other, n, 43);
        uint64_t fixed = 0, differ = 0;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t x = dl_permutation_at(&p, i);
            assert_true(x < n);
            assert_int_equal(seen[x]++, 0);
            assert_int_equal(dl_permutation_at(&again, i), x);
            differ += dl_permutation_at(&other, i) != x;
            fixed += x == i;
        }
        if (n >= 100)
            assert_true(fixed < n / 20 && differ > n / 2);
        free(seen);
    }
}

/* More samples than DL_BATCHER_ARRAY_MAX: no array of indices; one epoch
 * gives every sample once, 2 ranks' slices make the 1-rank batches, a
 * seek lands on the same batch, and the next epoch has another order. */
static void batcher_large_shuffle(void **state)
{
    (void)state;
    long n = DL_BATCHER_ARRAY_MAX + 1001;
    enum { B = 4096 };
    struct dl_dataset ds;
    make_counting(&ds, n);
    struct dl_error err = {0};
    struct dl_batcher one, half[2], sought;
    assert_int_equal(dl_batcher_init(&one, &ds, B, 0, 1, 1, 7, 0, &err), DL_OK);
    assert_null(one.perm);
    for (int r = 0; r < 2; r++)
        assert_int_equal(dl_batcher_init(&half[r], &ds, B, r, 2, 1, 7, 0, &err), DL_OK);
    unsigned char *seen = calloc((size_t)n, 1);
    float *x = malloc(sizeof *x * 2 * B), *xr = malloc(sizeof *xr * 2 * B), first[2 * B];
    int y[B], yr[B];
    assert_true(seen && x && xr);
    long total = 0;
    for (long s = 0; s < dl_batcher_steps_per_epoch(&one); s++) {
        int g = dl_batcher_next(&one, x, y);
        assert_true(g > 0);
        if (s == 0)
            memcpy(first, x, sizeof first);
        for (int i = 0; i < g; i++)
            assert_int_equal(seen[(long)x[2 * i]]++, 0);
        total += g;
        for (int r = 0, off = 0; s < 3 && r < 2; r++) { /* the ranks' slices, the first steps */
            int got = dl_batcher_next(&half[r], xr, yr);
            assert_memory_equal(xr, x + 2 * off, sizeof *xr * 2 * (size_t)got);
            off += got;
        }
        if (s == 500) {
            assert_int_equal(dl_batcher_init(&sought, &ds, B, 0, 1, 1, 7, 0, &err), DL_OK);
            assert_int_equal(dl_batcher_seek(&sought, 0, 500, &err), DL_OK);
            assert_int_equal(dl_batcher_next(&sought, xr, yr), g);
            assert_memory_equal(xr, x, sizeof *x * 2 * (size_t)g);
            dl_batcher_free(&sought);
        }
    }
    assert_int_equal(total, n);
    dl_batcher_start_epoch(&one, 1);
    assert_int_equal(dl_batcher_next(&one, x, y), B);
    assert_true(memcmp(x, first, sizeof first) != 0);
    free(seen), free(x), free(xr);
    dl_batcher_free(&one);
    for (int r = 0; r < 2; r++)
        dl_batcher_free(&half[r]);
    dl_dataset_free(&ds);
}

/* Reads epoch 3 of a 2-rank slice, then checks that a fresh batcher seeked
 * to step 5 (after reading one batch of epoch 0 when busy: for a source,
 * batches are then being decoded) continues identically; returns it. */
static void seek_continues(struct dl_dataset *ds, int busy, struct dl_batcher *b)
{
    struct dl_batcher a;
    struct dl_error err = {0};
    assert_int_equal(dl_batcher_init(&a, ds, 8, 1, 2, 1, 5, 0, &err), DL_OK);
    float xa[8][8], xb[8];
    int ya[8][4], yb[4];
    dl_batcher_start_epoch(&a, 3);
    for (int s = 0; s < 8; s++)
        assert_int_equal(dl_batcher_next(&a, xa[s], ya[s]), 4);
    assert_int_equal(a.epoch, 3);
    assert_int_equal(a.step, 8);
    assert_int_equal(dl_batcher_init(b, ds, 8, 1, 2, 1, 5, 0, &err), DL_OK);
    if (busy)
        assert_int_equal(dl_batcher_next(b, xb, yb), 4);
    assert_int_equal(dl_batcher_seek(b, 3, 5, &err), DL_OK);
    for (int s = 5; s < 8; s++) {
        assert_int_equal(dl_batcher_next(b, xb, yb), 4);
        assert_memory_equal(xb, xa[s], sizeof xb);
        assert_memory_equal(yb, ya[s], sizeof yb);
    }
    assert_int_equal(dl_batcher_next(b, xb, yb), 0);
    dl_batcher_free(&a);
}

static void batcher_seek(void **state)
{
    (void)state;
    struct dl_dataset ds;
    make_counting(&ds, 64);
    struct dl_batcher b;
    struct dl_error err = {0};
    float xb[8];
    int yb[4];
    seek_continues(&ds, 0, &b);
    assert_int_equal(dl_batcher_seek(&b, 3, 8, &err), DL_OK); /* at epoch end */
    assert_int_equal(dl_batcher_next(&b, xb, yb), 0);
    expect_error(dl_batcher_seek(&b, 3, 9, &err), &err, DL_ERR_DATA, "step 9", "0..8", NULL);
    expect_error(dl_batcher_seek(&b, -1, 0, &err), &err, DL_ERR_DATA, "epoch -1", NULL);
    dl_batcher_free(&b);
    dl_dataset_free(&ds);
}


/* ---------------------------------------------------------------- sample sources */

/* A source whose sample i is (i, a number drawn from its augmentation seed);
 * the indices in `bad` cannot be read (DL_ERR_DATA), `fatal` fails hard. */
struct counting_source {
    struct dl_sample_source base;
    long bad[4];
    int nbad;
    long fatal;
};

static int counting_load(const struct dl_sample_source *s, long i, uint64_t seed, float *x, struct dl_error *err)
{
    const struct counting_source *c = (const struct counting_source *)s;
    for (int k = 0; k < c->nbad; k++)
        if (c->bad[k] == i)
            return dl_errorf(err, DL_ERR_DATA, "sample-%ld: unreadable", i);
    if (i == c->fatal)
        return dl_errorf(err, DL_ERR_NOMEM, "sample-%ld: out of memory", i);
    struct dl_rng r;
    dl_rng_seed(&r, seed);
    x[0] = (float)i;
    x[1] = dl_rng_uniform(&r);
    return DL_OK;
}

static void counting_free(struct dl_sample_source *s)
{
    free(s);
}

static const struct dl_sample_source_ops counting_ops = {counting_load, counting_free};

/* n samples made by a counting source on `threads` threads, labels i mod 3. */
static struct counting_source *make_source(struct dl_dataset *ds, long n, int threads)
{
    make_counting(ds, n);
    free(ds->x);
    ds->x = NULL;
    struct counting_source *c = calloc(1, sizeof *c);
    assert_non_null(c);
    c->base.ops = &counting_ops;
    c->fatal = -1;
    ds->source = &c->base;
    ds->threads = threads;
    ds->prefetch = 2;
    return c;
}

/* One epoch's batches of batcher b, concatenated (x pairs, then labels). */
static long read_epoch(struct dl_batcher *b, long epoch, float *x, int *y)
{
    long n = 0;
    int k;
    dl_batcher_start_epoch(b, epoch);
    while ((k = dl_batcher_next(b, x + 2 * n, y + n)) > 0)
        n += k;
    assert_int_equal(k, 0);
    return n;
}

static void source_order_and_seeds(void **state)
{
    (void)state;
    struct dl_dataset mem, src1, src3;
    make_counting(&mem, 61);
    make_source(&src1, 61, 1);
    make_source(&src3, 61, 3);
    struct dl_batcher bm, b1, b3;
    struct dl_error err = {0};
    assert_int_equal(dl_batcher_init(&bm, &mem, 8, 0, 1, 1, 9, 0, &err), DL_OK);
    assert_int_equal(dl_batcher_init(&b1, &src1, 8, 0, 1, 1, 9, 0, &err), DL_OK);
    assert_int_equal(dl_batcher_init(&b3, &src3, 8, 0, 1, 1, 9, 0, &err), DL_OK);
    float xm[122], x1[122], x3[122], x1b[122];
    int ym[61], y1[61], y3[61];
    assert_int_equal(read_epoch(&bm, 2, xm, ym), 61);
    assert_int_equal(read_epoch(&b1, 2, x1, y1), 61);
    assert_int_equal(read_epoch(&b3, 2, x3, y3), 61);
    for (int i = 0; i < 61; i++) {
        assert_true(x1[2 * i] == xm[2 * i]); /* the shuffled order of the in-memory batcher */
        assert_int_equal(y1[i], ym[i]);
    }
    assert_memory_equal(x1, x3, sizeof x1); /* augmentation seeds independent of threads */
    assert_memory_equal(y1, y3, sizeof y1);
    assert_int_equal(read_epoch(&b1, 3, x1b, y1), 61);
    int moved = 0;
    for (int i = 0; i < 61; i++)
        for (int j = 0; j < 61; j++)
            if (x1b[2 * j] == x1[2 * i] && x1b[2 * j + 1] != x1[2 * i + 1])
                moved++;
    assert_int_equal(moved, 61); /* every sample gets new random choices next epoch */
    dl_batcher_free(&bm);
    dl_batcher_free(&b1);
    dl_batcher_free(&b3);
    dl_dataset_free(&mem);
    dl_dataset_free(&src1);
    dl_dataset_free(&src3);
}

static void source_seek(void **state)
{
    (void)state;
    struct dl_dataset ds;
    make_source(&ds, 64, 2);
    struct dl_batcher b;
    seek_continues(&ds, 1, &b);
    dl_batcher_free(&b);
    dl_dataset_free(&ds);
}

struct warnings {
    int n;
    char text[4096];
};

static void collect_warning(void *ctx, const char *msg)
{
    struct warnings *w = ctx;
    w->n++;
    strncat(w->text, msg, sizeof w->text - strlen(w->text) - 2);
    strcat(w->text, "\n");
}

static void source_unreadable(void **state)
{
    (void)state;
    struct dl_dataset ds;
    struct counting_source *c = make_source(&ds, 10, 2);
    c->bad[0] = 4;
    c->bad[1] = 5;
    c->bad[2] = 9;
    c->nbad = 3;
    struct dl_batcher b;
    struct dl_error err = {0};
    struct warnings w = {0};
    assert_int_equal(dl_batcher_init(&b, &ds, 10, 0, 1, 0, 1, 0, &err), DL_OK); /* no shuffle */
    dl_batcher_set_warning(&b, collect_warning, &w);
    float x[20];
    int y[10];
    assert_int_equal(dl_batcher_next(&b, x, y), 10);
    /* 4 and 5 become 6 (the next readable), 9 wraps to 0; labels follow. */
    const int want[10] = {0, 1, 2, 3, 6, 6, 6, 7, 8, 0};
    for (int i = 0; i < 10; i++) {
        assert_true(x[2 * i] == (float)want[i]);
        assert_int_equal(y[i], want[i] % 3);
    }
    assert_int_equal(dl_batcher_bad_samples(&b), 3);
    assert_int_equal(dl_batcher_next(&b, x, y), 0); /* epoch end: the count */
    assert_int_equal(w.n, 4);
    assert_non_null(strstr(w.text, "sample-4: unreadable"));
    assert_non_null(strstr(w.text, "sample-5: unreadable"));
    assert_non_null(strstr(w.text, "sample-9: unreadable"));
    assert_non_null(strstr(w.text, "3 unreadable samples skipped"));
    read_epoch(&b, 1, x, y);
    assert_int_equal(w.n, 4); /* each file is reported once */
    dl_batcher_free(&b);
    /* --bad-samples fail: the batch fails with the sample's message. */
    ds.bad_samples = DL_BAD_FAIL;
    assert_int_equal(dl_batcher_init(&b, &ds, 4, 0, 1, 0, 1, 0, &err), DL_OK);
    assert_int_equal(dl_batcher_next(&b, x, y), 4);
    assert_int_equal(dl_batcher_next(&b, x, y), -1);
    assert_non_null(strstr(b.error.msg, "sample-4: unreadable"));
    assert_non_null(strstr(b.error.msg, "--bad-samples fail"));
    dl_batcher_free(&b);
    /* A hard error stops whatever the policy. */
    ds.bad_samples = DL_BAD_SKIP;
    c->fatal = 2;
    assert_int_equal(dl_batcher_init(&b, &ds, 4, 0, 1, 0, 1, 0, &err), DL_OK);
    assert_int_equal(dl_batcher_next(&b, x, y), -1);
    assert_int_equal(b.error.code, DL_ERR_NOMEM);
    dl_batcher_free(&b);
    dl_dataset_free(&ds);
}

static void range_reader(void **state)
{
    (void)state;
    struct dl_dataset mem, src;
    make_counting(&mem, 23);
    make_source(&src, 23, 2);
    struct dl_batcher bm, bs;
    struct dl_error err = {0};
    assert_int_equal(dl_batcher_init_range(&bm, &mem, 5, 7, 13, &err), DL_OK);
    assert_int_equal(dl_batcher_init_range(&bs, &src, 5, 7, 13, &err), DL_OK);
    const void *xm, *xs;
    const int *ym, *ys;
    int sizes[] = {5, 5, 3, 0}, first = 7;
    for (int k = 0; k < 4; k++) {
        assert_int_equal(dl_batcher_next_view(&bm, &xm, &ym), sizes[k]);
        assert_int_equal(dl_batcher_next_view(&bs, &xs, &ys), sizes[k]);
        if (!sizes[k])
            break;
        assert_ptr_equal(xm, mem.x + 2 * first); /* in memory: no copy */
        const float *decoded = xs;
        for (int i = 0; i < sizes[k]; i++) {
            assert_true(decoded[2 * i] == (float)(first + i));
            assert_int_equal(ys[i], ym[i]);
        }
        first += sizes[k];
    }
    assert_int_equal(first, 20);
    dl_batcher_free(&bm);
    dl_batcher_free(&bs);
    dl_dataset_free(&mem);
    dl_dataset_free(&src);
}

/* ---------------------------------------------------------------- CIFAR */

static void write_bytes(const char *path, const unsigned char *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

static void cifar100_fine_labels(void **state)
{
    struct fixture *fx = *state;
    enum { N = 5, REC = 2 + 3072 };
    static unsigned char buf[N * REC];
    for (int i = 0; i < N; i++) {
        buf[i * REC] = (unsigned char)(i % 20);   /* coarse */
        buf[i * REC + 1] = (unsigned char)(90 + i); /* fine */
        for (int j = 0; j < 3072; j++)
            buf[i * REC + 2 + j] = (unsigned char)(i + j);
    }
    char p[600];
    snprintf(p, sizeof p, "%s/train.bin", fx->dir);
    write_bytes(p, buf, sizeof buf);
    struct dl_cifar c;
    struct dl_error err = {0};
    assert_int_equal(dl_cifar_read(fx->dir, 1, 1, 100, &c, &err), DL_OK);
    assert_int_equal(c.n, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(c.labels[i], 90 + i);
        assert_int_equal(c.pixels[(size_t)i * 3072 + 3071], (unsigned char)(i + 3071));
    }
    dl_cifar_free(&c);
    expect_error(dl_cifar_read(fx->dir, 1, 1, 10, &c, &err), &err, DL_ERR_DATA, "CIFAR-100 has 100 classes",
                 "10 outputs", NULL);
    buf[3 * REC + 1] = 100;
    write_bytes(p, buf, sizeof buf);
    expect_error(dl_cifar_read(fx->dir, 1, 1, 100, &c, &err), &err, DL_ERR_DATA, "train.bin", "record 3",
                 "label 100", NULL);
    write_bytes(p, buf, sizeof buf - 1);
    expect_error(dl_cifar_read(fx->dir, 1, 1, 100, &c, &err), &err, DL_ERR_DATA, "train.bin",
                 "not a whole number of 3074-byte records", NULL);
    expect_error(dl_cifar_read(fx->dir, 1, 0, 100, &c, &err), &err, DL_ERR_DATA, "test.bin", "cannot open", NULL);
}

/* ---------------------------------------------------------------- file lists */

static void file_lists(void **state)
{
    struct fixture *fx = *state;
    char p[700], d[700];
    snprintf(p, sizeof p, "%s/train.txt", fx->dir);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("# comment\na/x 1.jpg 2\n/abs/y.png 0\n\nz.jpg 7\n", f);
    fclose(f);
    struct dl_file_list l;
    struct dl_error err = {0};
    assert_int_equal(dl_file_list_read(NULL, p, NULL, &l, &err), DL_OK);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.classes, 8);
    char want[700];
    snprintf(want, sizeof want, "%s/a/x 1.jpg", fx->dir);
    assert_string_equal(dl_file_list_path(&l, 0), want);
    assert_string_equal(dl_file_list_path(&l, 1), "/abs/y.png");
    assert_int_equal(l.labels[2], 7);
    dl_file_list_free(&l);
    f = fopen(p, "w");
    fputs("a.jpg 1\nb.jpg x\n", f);
    fclose(f);
    expect_error(dl_file_list_read(NULL, p, NULL, &l, &err), &err, DL_ERR_DATA, "train.txt:2",
                 "integer label", NULL);
    /* Folders: classes sorted, validation numbered by the training names. */
    const char *dirs[] = {"tr", "tr/b", "tr/a", "tr/a/sub", "va", "va/b", "va/c"};
    for (int i = 0; i < 7; i++) {
        snprintf(d, sizeof d, "%s/%s", fx->dir, dirs[i]);
        assert_int_equal(mkdir(d, 0777), 0);
    }
    const char *files[] = {"tr/b/1.PNG", "tr/a/2.jpg", "tr/a/sub/3.jpeg", "tr/a/notes.txt", "va/b/4.jpg",
                           "va/c/5.jpg"};
    for (int i = 0; i < 6; i++) {
        snprintf(d, sizeof d, "%s/%s", fx->dir, files[i]);
        write_bytes(d, (const unsigned char *)"x", 1);
    }
    snprintf(d, sizeof d, "%s/tr", fx->dir);
    assert_int_equal(dl_file_list_read(d, NULL, NULL, &l, &err), DL_OK);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.classes, 2);
    assert_string_equal(l.class_names[0], "a");
    assert_non_null(strstr(dl_file_list_path(&l, 0), "tr/a/2.jpg"));
    assert_non_null(strstr(dl_file_list_path(&l, 1), "tr/a/sub/3.jpeg"));
    assert_int_equal(l.labels[2], 1);
    snprintf(d, sizeof d, "%s/va", fx->dir);
    struct dl_file_list v;
    expect_error(dl_file_list_read(d, NULL, &l, &v, &err), &err, DL_ERR_DATA, "class 'c' is not in the training split",
                 NULL);
    dl_file_list_free(&l);
}

/* ---------------------------------------------------------------- token windows */

/* Document masking (data.document_mask): the label after a separator is
 * the loss's ignored one, wherever the separator falls (a window's last
 * position, a seam between files), the ids unchanged; off, the same files
 * give the plain next ids. */
static void token_windows_documents(void **state)
{
    struct fixture *fx = *state;
    enum { T = 5, SEP = 50256 };
    /* two files: documents end at index 2, 4 (a window's last position), 6 (a file's last id) and 9 */
    static const int32_t ids[2][6] = {{11, 12, SEP, 13, SEP, 14}, {SEP, 15, 16, SEP, 17, 18}};
    const int32_t *all = ids[0];
    struct dl_token_windows *w = calloc(1, sizeof *w);
    assert_non_null(w);
    struct dl_error err = {0};
    for (int f = 0; f < 2; f++) {
        char path[600];
        snprintf(path, sizeof path, "%s/docs%d.bin", fx->dir, f);
        assert_int_equal(dl_token_file_write(path, ids[f], 6, &err), DL_OK);
        assert_int_equal(dl_token_windows_add(w, path, 4 * DL_TOKEN_FILE_HEADER_INTS, 2, 6, &err), DL_OK);
    }
    assert_int_equal(dl_token_windows_split(w, 0, 12, T, 0, "test", "training", fx->dir, &err), DL_OK);
    assert_int_equal(w->n, 2);
    for (int mask = 0; mask < 2; mask++) {
        w->doc_mask = mask, w->doc_separator = SEP, w->doc_ignored = -100;
        for (long i = 0; i < w->n; i++) {
            int32_t x[T];
            int y[T];
            dl_token_windows_get(w, i, x, y);
            for (int t = 0; t < T; t++) {
                long k = i * T + t;
                assert_int_equal(x[t], all[k]);
                assert_int_equal(y[t], mask && all[k] == SEP ? -100 : all[k + 1]);
            }
        }
    }
    dl_token_windows_free(w);
}

/* A stream of token files read one after another (uint16 files, an empty
 * one, a uint32 one): every window of a split that starts inside the first
 * file is the stream's ids from lo + i*T, its labels the next ids, windows
 * across the seams between files included; an id past a limit is refused
 * naming its file and index, and a text file's byte naming its offset. */
static void token_windows_across_files(void **state)
{
    struct fixture *fx = *state;
    enum { T = 8 };
    static const long len[4] = {37, 0, 41, 23};
    int32_t all[101], *at = all;
    struct dl_token_windows *w = calloc(1, sizeof *w);
    assert_non_null(w);
    struct dl_error err = {0};
    for (int f = 0; f < 4; f++) {
        for (long j = 0; j < len[f]; j++)
            at[j] = f == 3 ? 70000 + (int32_t)(j * 7) : (int32_t)((f * 131 + j * 17) % 50257);
        char path[600];
        snprintf(path, sizeof path, "%s/shard%d.bin", fx->dir, f);
        assert_int_equal(dl_token_file_write(path, at, len[f], &err), DL_OK);
        long count;
        int width;
        assert_int_equal(dl_token_file_header(path, &count, &width, &err), DL_OK);
        assert_int_equal(width, f == 3 ? 4 : 2);
        assert_int_equal(dl_token_windows_add(w, path, 4 * DL_TOKEN_FILE_HEADER_INTS, width, count, &err), DL_OK);
        at += len[f];
    }
    long total = at - all;
    assert_int_equal(w->start[w->n_files], total);
    assert_int_equal(dl_token_windows_split(w, 0, total, 1, 0, "test", "training", fx->dir, &err), DL_OK);
    for (long k = 0; k + 1 < total; k++) { /* windows of one position: every id of the stream, and the next */
        int32_t id;
        int next;
        dl_token_windows_get(w, k, &id, &next);
        assert_int_equal(id, all[k]);
        assert_int_equal(next, all[k + 1]);
    }
    assert_int_equal(dl_token_windows_check(w, 70000 + 7 * 22 + 1, "the limit", &err), DL_OK);
    assert_int_equal(dl_token_windows_split(w, 3, total, T, 0, "test", "training", fx->dir, &err), DL_OK);
    assert_int_equal(w->n, (total - 3 - 1) / T);
    for (long i = 0; i < w->n; i++) {
        int32_t ids[T];
        int y[T];
        dl_token_windows_get(w, i, ids, y);
        for (int t = 0; t < T; t++) {
            assert_int_equal(ids[t], all[3 + i * T + t]);
            assert_int_equal(y[t], all[3 + i * T + t + 1]);
        }
    }
    assert_int_equal(dl_token_windows_check(w, 70000 + 7 * 5, "the limit", &err), DL_ERR_DATA);
    assert_non_null(strstr(err.msg, "shard3.bin: token 5 is 70035, not an id below 70035 (the limit)"));
    assert_int_equal(dl_token_windows_split(w, 0, T, T, 0, "test", "validation", "here", &err), DL_ERR_DATA);
    assert_non_null(strstr(err.msg, "test: the validation split of here has 8 tokens, fewer than one window of 8 + 1"));
    dl_token_windows_free(w);

    char text[600];
    snprintf(text, sizeof text, "%s/text", fx->dir);
    FILE *f = fopen(text, "wb");
    assert_non_null(f);
    fputs("plain \xc3\xa9 text", f);
    fclose(f);
    w = calloc(1, sizeof *w);
    assert_non_null(w);
    assert_int_equal(dl_token_windows_add(w, text, 0, 1, -1, &err), DL_OK);
    assert_int_equal(w->start[1], 13);
    assert_int_equal(dl_token_windows_check(w, 128, "ASCII", &err), DL_ERR_DATA);
    assert_non_null(strstr(err.msg, "text: byte 195 at offset 6 is not a token id below 128 (ASCII)"));
    dl_token_windows_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(idx_round_trip),
        cmocka_unit_test(idx_missing_file),
        cmocka_unit_test(idx_bad_magic),
        cmocka_unit_test(idx_truncated),
        cmocka_unit_test(idx_count_mismatch),
        cmocka_unit_test(idx_label_out_of_range),
        cmocka_unit_test(idx_huge_dims),
        cmocka_unit_test(dataset_idx_paths),
        cmocka_unit_test(dataset_mnist_folder),
        cmocka_unit_test(dataset_normalize_with_training_stats),
        cmocka_unit_test(fashion_mnist_real),
        cmocka_unit_test(synthetic_deterministic),
        cmocka_unit_test(synthetic_learnable),
        cmocka_unit_test(batcher_epochs),
        cmocka_unit_test(batcher_shards),
        cmocka_unit_test(batcher_drop_last),
        cmocka_unit_test(batcher_seek),
        cmocka_unit_test(permutation_is_a_seeded_bijection),
        cmocka_unit_test(batcher_large_shuffle),
        cmocka_unit_test(source_order_and_seeds),
        cmocka_unit_test(source_seek),
        cmocka_unit_test(source_unreadable),
        cmocka_unit_test(range_reader),
        cmocka_unit_test_setup_teardown(cifar100_fine_labels, setup, teardown),
        cmocka_unit_test_setup_teardown(file_lists, setup, teardown),
        cmocka_unit_test_setup_teardown(token_windows_across_files, setup, teardown),
        cmocka_unit_test_setup_teardown(token_windows_documents, setup, teardown),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
