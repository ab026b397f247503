/* device_emulated.c: a testing aid (--device emulated), not a place to
 * train.  A device of device.h without host memory (host_memory 0) whose
 * kernels are the host's, so that a run on it takes every path a GPU run
 * takes -- the batch copied in, losses, scores, checkpoints and metrics
 * copied out, communication staged through host buffers -- on a machine
 * without a GPU, and gives the CPU run's numbers bit for bit when nothing
 * is forgotten.
 *
 * It catches host code that touches device memory without a copy: every
 * block is a mapping of its own that stays PROT_NONE except while the
 * device works on it (its copies, fill and accumulate, and between
 * work_begin and work_end, around kernels and optimizer loops).  A host
 * read or write outside those windows faults; the SIGSEGV handler names
 * the block and the process dies by the signal.  copy() also checks that
 * the device side of a copy lies in one of its blocks and the host side
 * in none; a copy ahead of the kernels (the next input batch) is such a
 * copy made at once, from pinned memory that is plain host memory.  A
 * window another thread holds open (the gradient allreduce
 * overlapping backward) hides a touch from that thread while it lasts,
 * so a forgotten copy there is caught when the windows do not overlap. */
#include "backends/device.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_BLOCKS 256 /* an executor holds a handful; pipelines and optimizers a few more */

struct block {
    unsigned char *p;
    size_t bytes; /* mapped: the request rounded up to pages */
};

static struct {
    pthread_mutex_t mu;
    struct block blocks[MAX_BLOCKS];
    int n;
    int open;             /* work windows open (nested, any thread) */
    int handler;          /* 1 once the SIGSEGV handler is installed */
} emu = {.mu = PTHREAD_MUTEX_INITIALIZER};

static size_t page_round(size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (bytes ? bytes + page - 1 : page) / page * page;
}

/* The block holding [p, p + bytes), or -1 (under mu, or in the handler). */
static int block_of(const void *p, size_t bytes)
{
    uintptr_t a = (uintptr_t)p;
    for (int i = 0; i < emu.n; i++) {
        uintptr_t lo = (uintptr_t)emu.blocks[i].p, hi = lo + emu.blocks[i].bytes;
        if (a >= lo && a < hi)
            return a + bytes <= hi ? i : -1;
    }
    return -1;
}

/* 1 when [p, p + bytes) overlaps no block. */
static int outside(const void *p, size_t bytes)
{
    uintptr_t a = (uintptr_t)p, b = a + (bytes ? bytes : 1);
    for (int i = 0; i < emu.n; i++) {
        uintptr_t lo = (uintptr_t)emu.blocks[i].p, hi = lo + emu.blocks[i].bytes;
        if (a < hi && b > lo)
            return 0;
    }
    return 1;
}

static void protect_all(int prot)
{
    for (int i = 0; i < emu.n; i++)
        mprotect(emu.blocks[i].p, emu.blocks[i].bytes, prot);
}

static void on_segv(int sig, siginfo_t *si, void *uctx)
{
    (void)uctx;
    int b = block_of(si->si_addr, 1);
    if (b >= 0) {
        char msg[300];
        int n = snprintf(msg, sizeof msg, "dltrain: host code touched emulated device memory at %p (block of %zu "
                         "bytes at %p) outside a device copy or kernel: a copy to or from the device is missing\n",
                         si->si_addr, emu.blocks[b].bytes, (void *)emu.blocks[b].p);
        if (write(STDERR_FILENO, msg, (size_t)n) < 0)
            n = 0;
    }
    signal(sig, SIG_DFL); /* the access faults again and ends the process by the signal */
}

static void install_handler(void)
{
    if (emu.handler)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    emu.handler = 1;
}

static void work_begin(void)
{
    pthread_mutex_lock(&emu.mu);
    if (emu.open++ == 0)
        protect_all(PROT_READ | PROT_WRITE);
    pthread_mutex_unlock(&emu.mu);
}

static void work_end(void)
{
    pthread_mutex_lock(&emu.mu);
    if (--emu.open == 0)
        protect_all(PROT_NONE);
    pthread_mutex_unlock(&emu.mu);
}

static void *emu_alloc(size_t bytes, struct dl_error *err)
{
    size_t mapped = page_round(bytes);
    pthread_mutex_lock(&emu.mu);
    void *p = emu.n < MAX_BLOCKS ? mmap(NULL, mapped, emu.open ? PROT_READ | PROT_WRITE : PROT_NONE,
                                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                                 : MAP_FAILED;
    if (p != MAP_FAILED) {
        emu.blocks[emu.n++] = (struct block){p, mapped};
        install_handler();
    }
    int full = emu.n == MAX_BLOCKS;
    pthread_mutex_unlock(&emu.mu);
    if (p == MAP_FAILED) {
        if (full)
            dl_errorf(err, DL_ERR_NOMEM, "emulated device: %zu bytes, but all %d blocks it keeps are in use", bytes,
                      MAX_BLOCKS);
        else
            dl_errorf(err, DL_ERR_NOMEM, "emulated device: out of memory (%zu bytes)", bytes);
        return NULL;
    }
    return p;
}

static void emu_free(void *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&emu.mu);
    int b = block_of(p, 0);
    if (b >= 0) {
        munmap(emu.blocks[b].p, emu.blocks[b].bytes);
        emu.blocks[b] = emu.blocks[--emu.n];
    }
    pthread_mutex_unlock(&emu.mu);
}

/* 0 when [p, p + bytes) is where a copy's side `dev` (1: the device's, 0:
 * the host's) must be; else err says which side is wrong. */
static int check_side(const void *p, size_t bytes, int dev, const char *what, struct dl_error *err)
{
    pthread_mutex_lock(&emu.mu);
    int ok = dev ? block_of(p, bytes) >= 0 : outside(p, bytes);
    pthread_mutex_unlock(&emu.mu);
    if (ok)
        return DL_OK;
    return dl_errorf(err, DL_ERR_INTERNAL, "emulated device: %s %p (%zu bytes) is %s", what, p, bytes,
                     dev ? "not in one device block" : "device memory, not host memory");
}

static int emu_copy(void *dst, const void *src, size_t bytes, enum dl_copy_dir dir, struct dl_error *err)
{
    if (!bytes)
        return DL_OK;
    int rc = check_side(dst, bytes, dir != DL_COPY_TO_HOST, "copy destination", err);
    if (!rc)
        rc = check_side(src, bytes, dir != DL_COPY_TO_DEVICE, "copy source", err);
    if (rc)
        return rc;
    work_begin();
    memmove(dst, src, bytes);
    work_end();
    return DL_OK;
}

static int emu_copy_rows(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                         size_t rows, struct dl_error *err)
{
    if (!rows || !width)
        return DL_OK;
    int rc = check_side(dst, (rows - 1) * dst_pitch + width, 1, "copy destination", err);
    if (!rc)
        rc = check_side(src, (rows - 1) * src_pitch + width, 1, "copy source", err);
    if (rc)
        return rc;
    work_begin();
    rc = dl_device_host.copy_rows(dst, dst_pitch, src, src_pitch, width, rows, err);
    work_end();
    return rc;
}

static int emu_fill(void *dst, int byte, size_t bytes, struct dl_error *err)
{
    int rc = bytes ? check_side(dst, bytes, 1, "fill destination", err) : DL_OK;
    if (rc || !bytes)
        return rc;
    work_begin();
    memset(dst, byte, bytes);
    work_end();
    return DL_OK;
}

static int emu_accumulate(void *dst, const void *src, long n, enum dl_dtype dtype, struct dl_error *err)
{
    size_t bytes = dl_dtype_value_size(dtype) * (size_t)(n > 0 ? n : 0);
    int rc = bytes ? check_side(dst, bytes, 1, "accumulate destination", err) : DL_OK;
    if (!rc && bytes)
        rc = check_side(src, bytes, 1, "accumulate source", err);
    if (rc || !bytes)
        return rc;
    work_begin();
    rc = dl_device_host.accumulate(dst, src, n, dtype, err);
    work_end();
    return rc;
}

static int emu_scale(void *x, long n, dl_real f, enum dl_dtype dtype, struct dl_error *err)
{
    size_t bytes = dl_dtype_value_size(dtype) * (size_t)(n > 0 ? n : 0);
    int rc = bytes ? check_side(x, bytes, 1, "scale values", err) : DL_OK;
    if (rc || !bytes)
        return rc;
    work_begin();
    rc = dl_device_host.scale(x, n, f, dtype, err);
    work_end();
    return rc;
}

static int emu_cast(void *dst, enum dl_dtype to, const void *src, enum dl_dtype from, long n, int add,
                    struct dl_error *err)
{
    size_t count = (size_t)(n > 0 ? n : 0);
    int rc = count ? check_side(dst, dl_dtype_size(to) * count, 1, "cast destination", err) : DL_OK;
    if (!rc && count)
        rc = check_side(src, dl_dtype_size(from) * count, 1, "cast source", err);
    if (rc || !count)
        return rc;
    work_begin();
    rc = dl_device_host.cast(dst, to, src, from, n, add, err);
    work_end();
    return rc;
}

/* Nothing is queued; the clock is the host's. */
static int emu_sync(struct dl_error *err)
{
    return dl_device_host.sync(err);
}

static int emu_mark_init(struct dl_device_mark *m, struct dl_error *err)
{
    return dl_device_host.mark_init(m, err);
}

static int emu_mark_record(struct dl_device_mark *m, struct dl_error *err)
{
    return dl_device_host.mark_record(m, err);
}

static int emu_mark_elapsed(const struct dl_device_mark *from, const struct dl_device_mark *to, double *seconds,
                            struct dl_error *err)
{
    return dl_device_host.mark_elapsed(from, to, seconds, err);
}

static void emu_mark_release(struct dl_device_mark *m)
{
    dl_device_host.mark_release(m);
}

/* Pinned host memory is plain host memory, outside every block. */
static void *emu_pinned_alloc(size_t bytes, struct dl_error *err)
{
    return dl_device_host.pinned_alloc(bytes, err);
}

static void emu_pinned_free(void *p)
{
    dl_device_host.pinned_free(p);
}

/* At once, with copy()'s checks: the destination in one block, the source
 * in none. */
static int emu_copy_ahead(void *dst, const void *src, size_t bytes, const struct dl_device_mark *after,
                          struct dl_device_mark *done, struct dl_error *err)
{
    (void)after;
    int rc = emu_copy(dst, src, bytes, DL_COPY_TO_DEVICE, err);
    return rc ? rc : emu_mark_record(done, err);
}

static int emu_wait_mark(const struct dl_device_mark *m, struct dl_error *err)
{
    return dl_device_host.wait_mark(m, err);
}

static const char *emu_describe(void)
{
    return "emulated device (host memory behind mprotect, CPU kernels; a testing aid)";
}

const struct dl_device dl_device_emulated = {
    .name = "emulated",
    .kind = DL_DEVICE_EMULATED,
    .kernels = DL_DEVICE_CPU,
    .host_memory = 0,
    .alloc = emu_alloc,
    .free = emu_free,
    .copy = emu_copy,
    .copy_rows = emu_copy_rows,
    .fill = emu_fill,
    .accumulate = emu_accumulate,
    .scale = emu_scale,
    .cast = emu_cast,
    .sync = emu_sync,
    .mark_init = emu_mark_init,
    .mark_record = emu_mark_record,
    .mark_elapsed = emu_mark_elapsed,
    .mark_release = emu_mark_release,
    .pinned_alloc = emu_pinned_alloc,
    .pinned_free = emu_pinned_free,
    .copy_ahead = emu_copy_ahead,
    .wait_mark = emu_wait_mark,
    .mark_sync = emu_wait_mark,
    .work_begin = work_begin,
    .work_end = work_end,
    .describe = emu_describe,
};
