/* cifar.c: CIFAR binary batches into one pixel array and one label array.
 * The files' sizes decide the record count, so a truncated or padded file is
 * an error before anything is allocated for it. */
#include "data/cifar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/imagefolder.h"

void dl_cifar_free(struct dl_cifar *c)
{
    if (!c)
        return;
    free(c->pixels);
    free(c->labels);
    memset(c, 0, sizeof *c);
}

/* Appends the records of one file. */
static int read_batch(const char *path, int label_bytes, int limit_label, struct dl_cifar *c,
                      struct dl_error *err)
{
    unsigned char *buf;
    size_t len;
    int rc = dl_read_file(path, &buf, &len, err);
    if (rc)
        return rc;
    size_t rec = (size_t)label_bytes + DL_CIFAR_SAMPLE_BYTES;
    if (len == 0 || len % rec) {
        free(buf);
        return dl_errorf(err, DL_ERR_DATA, "%s: %zu bytes is not a whole number of %zu-byte records", path, len,
                         rec);
    }
    long n = (long)(len / rec);
    unsigned char *px = realloc(c->pixels, (size_t)(c->n + n) * DL_CIFAR_SAMPLE_BYTES);
    if (px)
        c->pixels = px;
    int *lb = px ? realloc(c->labels, (size_t)(c->n + n) * sizeof *lb) : NULL;
    if (!lb) {
        free(buf);
        return dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory", path);
    }
    c->labels = lb;
    for (long i = 0; i < n; i++) {
        const unsigned char *r = buf + (size_t)i * rec;
        int label = r[label_bytes - 1];
        if (label >= limit_label) {
            free(buf);
            return dl_errorf(err, DL_ERR_DATA, "%s: record %ld has label %d: expected 0..%d", path, i, label,
                             limit_label - 1);
        }
        c->labels[c->n + i] = label;
        memcpy(c->pixels + (size_t)(c->n + i) * DL_CIFAR_SAMPLE_BYTES, r + label_bytes, DL_CIFAR_SAMPLE_BYTES);
    }
    c->n += n;
    free(buf);
    return DL_OK;
}

int dl_cifar_read(const char *dir, int hundred, int train, int classes, struct dl_cifar *out,
                  struct dl_error *err)
{
    memset(out, 0, sizeof *out);
    int own = hundred ? 100 : 10;
    if (classes < own)
        return dl_errorf(err, DL_ERR_DATA, "CIFAR-%d has %d classes but the network has %d outputs", own, own,
                         classes);
    char path[4200];
    int rc = DL_OK;
    if (hundred) {
        snprintf(path, sizeof path, "%s/%s", dir, train ? "train.bin" : "test.bin");
        rc = read_batch(path, 2, own, out, err);
    } else if (train) {
        for (int i = 1; !rc && i <= 5; i++) {
            snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir, i);
            rc = read_batch(path, 1, own, out, err);
        }
    } else {
        snprintf(path, sizeof path, "%s/test_batch.bin", dir);
        rc = read_batch(path, 1, own, out, err);
    }
    if (rc)
        dl_cifar_free(out);
    return rc;
}
