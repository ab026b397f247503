/* device_host.c: the host device of device.h, the memory every CPU kernel
 * works in: posix_memalign'd blocks, memcpy and memset, an OpenMP loop
 * for accumulate, a plain one for scale (bf16 values summed and scaled
 * in f32, rounded once), nothing queued
 * (sync returns at once, a copy ahead is a copy now, pinned memory is its
 * own), and marks that are readings of core/clock.h's
 * monotonic clock.  Also the spellings of the device kinds. */
#include "backends/device.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"


static void *host_alloc(size_t bytes, struct dl_error *err)
{
    void *p = NULL;
    if (posix_memalign(&p, DL_DEVICE_ALIGN, bytes ? bytes : DL_DEVICE_ALIGN)) {
        dl_errorf(err, DL_ERR_NOMEM, "out of memory (%zu bytes of host memory)", bytes);
        return NULL;
    }
    return p;
}

static void host_free(void *p)
{
    free(p);
}

static int host_copy(void *dst, const void *src, size_t bytes, enum dl_copy_dir dir, struct dl_error *err)
{
    (void)dir, (void)err; /* host and device memory are the same here */
    if (bytes)
        memmove(dst, src, bytes);
    return DL_OK;
}

static int host_copy_rows(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                          size_t rows, struct dl_error *err)
{
    (void)err;
    for (size_t r = 0; r < rows; r++)
        memcpy((char *)dst + r * dst_pitch, (const char *)src + r * src_pitch, width);
    return DL_OK;
}

static int host_fill(void *dst, int byte, size_t bytes, struct dl_error *err)
{
    (void)err;
    if (bytes)
        memset(dst, byte, bytes);
    return DL_OK;
}

static int host_accumulate(void *dst, const void *src, long n, enum dl_dtype dtype, struct dl_error *err)
{
    if (dtype != DL_F32)
        return dl_cast_add(src, dtype, dst, dtype, n, err);
    dl_real *d = dst;
    const dl_real *s = src;
    #pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++)
        d[i] += s[i];
    return DL_OK;
}

static int host_scale(void *x, long n, dl_real f, enum dl_dtype dtype, struct dl_error *err)
{
    if (dtype == DL_BF16) {
        dl_bf16 *h = x;
        for (long i = 0; i < n; i++)
            h[i] = dl_f32_to_bf16(dl_bf16_to_f32(h[i]) * (float)f);
        return DL_OK;
    }
    if (dtype != DL_F32)
        return dl_errorf(err, DL_ERR_INTERNAL, "no scaling of %s values", dl_dtype_name(dtype));
    dl_real *v = x;
    for (long i = 0; i < n; i++)
        v[i] *= f;
    return DL_OK;
}

static int host_cast(void *dst, enum dl_dtype to, const void *src, enum dl_dtype from, long n, int add,
                     struct dl_error *err)
{
    return add ? dl_cast_add(src, from, dst, to, n, err) : dl_cast(src, from, dst, to, n, err);
}

static int host_sync(struct dl_error *err)
{
    (void)err;
    return DL_OK;
}

static int host_mark_init(struct dl_device_mark *m, struct dl_error *err)
{
    (void)err;
    *m = (struct dl_device_mark){.seconds = -1};
    return DL_OK;
}

static int host_mark_record(struct dl_device_mark *m, struct dl_error *err)
{
    (void)err;
    m->seconds = dl_clock_now();
    return DL_OK;
}

static int host_mark_elapsed(const struct dl_device_mark *from, const struct dl_device_mark *to, double *seconds,
                             struct dl_error *err)
{
    if (from->seconds < 0 || to->seconds < 0)
        return dl_errorf(err, DL_ERR_INTERNAL, "host clock: elapsed time asked of a mark never recorded");
    *seconds = to->seconds - from->seconds;
    return DL_OK;
}

static void host_mark_release(struct dl_device_mark *m)
{
    m->seconds = -1;
}

/* A copy "ahead" is a copy now: nothing runs beside the host's loops. */
static int host_copy_ahead(void *dst, const void *src, size_t bytes, const struct dl_device_mark *after,
                           struct dl_device_mark *done, struct dl_error *err)
{
    (void)after;
    int rc = host_copy(dst, src, bytes, DL_COPY_TO_DEVICE, err);
    return rc ? rc : host_mark_record(done, err);
}

/* Recorded marks are reached: nothing is queued. */
static int host_wait_mark(const struct dl_device_mark *m, struct dl_error *err)
{
    (void)m, (void)err;
    return DL_OK;
}

static const char *host_describe(void)
{
    return "host";
}

const struct dl_device dl_device_host = {
    .name = "cpu",
    .kind = DL_DEVICE_CPU,
    .kernels = DL_DEVICE_CPU,
    .host_memory = 1,
    .alloc = host_alloc,
    .free = host_free,
    .copy = host_copy,
    .copy_rows = host_copy_rows,
    .fill = host_fill,
    .accumulate = host_accumulate,
    .scale = host_scale,
    .cast = host_cast,
    .sync = host_sync,
    .mark_init = host_mark_init,
    .mark_record = host_mark_record,
    .mark_elapsed = host_mark_elapsed,
    .mark_release = host_mark_release,
    .pinned_alloc = host_alloc,
    .pinned_free = host_free,
    .copy_ahead = host_copy_ahead,
    .wait_mark = host_wait_mark,
    .mark_sync = host_wait_mark,
    .describe = host_describe,
};
