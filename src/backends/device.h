/* device.h: where buffers live and how time is measured there.  A device is
 * a table of functions (as ggml's buffer types): allocate, free, copy,
 * fill, wait for queued work, and a clock of marks recorded in its own
 * order of work (the host's monotonic clock; CUDA events on a GPU, which
 * time what the GPU did rather than when the host queued it).  The host
 * device serves the executor's arena and the tuner's measurements today;
 * the CUDA device (backends/cuda/device.c, built --with-cuda) implements the
 * same table, and callers choose one through dl_device_open(), never
 * through #ifdef.
 *
 * Pointers returned by alloc are in the device's memory: only that device's
 * functions (and kernels of that device) may touch them; copy() moves bytes
 * between host memory and the device, or within the device. */
#ifndef DL_BACKENDS_DEVICE_H
#define DL_BACKENDS_DEVICE_H

#include <stddef.h>

#include "core/device_kind.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/real.h"

/* The devices --device and the network file's train.device name
 * (core/device_kind.h).  The emulated device is a testing aid
 * (device_emulated.c): host memory that the host may touch only through
 * the device's table, so that a run on it takes every path a GPU without
 * host memory takes, with CPU kernels. */

#define DL_DEVICE_ALIGN 64 /* bytes: every allocation is aligned to at least this */

enum dl_copy_dir {
    DL_COPY_TO_DEVICE,   /* host memory -> device memory */
    DL_COPY_TO_HOST,     /* device memory -> host memory */
    DL_COPY_WITHIN       /* device memory -> device memory */
};

/* A point on a device's clock: a host clock reading, or the device's own
 * record of it (a CUDA event). */
struct dl_device_mark {
    double seconds; /* the host: dl_clock_now() when recorded, < 0 before */
    void *event;    /* a device: its event handle */
};

struct dl_device {
    const char *name;               /* "cpu", "cuda", "emulated" */
    enum dl_device_kind kind;
    /* Whose kernels and optimizer loops run on its memory (kernel.h's
     * device of a kernel): its own kind, or the host's for the emulated
     * device. */
    enum dl_device_kind kernels;
    /* 1 when its pointers are host memory that the host may read and
     * write directly (the host device): an executor then takes the input
     * batch in place and reads losses and scores where they are; 0 (a
     * GPU): only its functions and kernels touch its memory, and the
     * executor copies the batch in and the results out. */
    int host_memory;
    /* A block of bytes (0 allowed: still a distinct pointer to free), zeroed
     * or not; NULL with err filled (DL_ERR_NOMEM) when none is left. */
    void *(*alloc)(size_t bytes, struct dl_error *err);
    void (*free)(void *p);          /* NULL is ignored */
    int (*copy)(void *dst, const void *src, size_t bytes, enum dl_copy_dir dir, struct dl_error *err);
    /* rows blocks of width bytes within the device's memory in one call,
     * row r from src + r * src_pitch to dst + r * dst_pitch (CUDA:
     * cudaMemcpy2D): a block of every sample of a tensor moved at once
     * (exec/tp_steps.c).  No row of dst overlaps a row of src. */
    int (*copy_rows)(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width, size_t rows,
                     struct dl_error *err);
    int (*fill)(void *dst, int byte, size_t bytes, struct dl_error *err);
    /* dst[i] += src[i] for n values of dtype, both in the device's memory
     * (the executor's sum of a gradient from several consumers).  f32
     * values are dl_real (core/dtype.h's dl_dtype_value_size); a bf16 sum is
     * taken in f32 and rounded once (dtype.h's dl_cast_add).  Other dtypes:
     * DL_ERR_INTERNAL. */
    int (*accumulate)(void *dst, const void *src, long n, enum dl_dtype dtype, struct dl_error *err);
    /* x[i] *= f for n values of dtype in the device's memory (a
     * data-parallel gradient bucket scaled where it lives, before a
     * communicator whose buffers are device memory sums it); a bf16
     * product is taken in f32 and rounded once.  Other dtypes:
     * DL_ERR_INTERNAL. */
    int (*scale)(void *x, long n, dl_real f, enum dl_dtype dtype, struct dl_error *err);
    /* n values of src (dtype from) into dst (dtype to), both in the
     * device's memory, as core/dtype.h's dl_cast rounds them (f32 <-> bf16,
     * i32 -> f32 or bf16), or added into dst when add (dl_cast_add: the sum
     * in f32, rounded once to to's dtype): the executor's cast steps and
     * their gradients.  A pair dl_cast lacks: DL_ERR_INTERNAL. */
    int (*cast)(void *dst, enum dl_dtype to, const void *src, enum dl_dtype from, long n, int add,
                struct dl_error *err);
    /* Returns when everything queued on the device so far has finished. */
    int (*sync)(struct dl_error *err);
    /* The clock: initialise a mark, record it at the current point of the
     * device's work, and read the seconds between two recorded marks (this
     * waits for the later one to be reached). */
    int (*mark_init)(struct dl_device_mark *m, struct dl_error *err);
    int (*mark_record)(struct dl_device_mark *m, struct dl_error *err);
    int (*mark_elapsed)(const struct dl_device_mark *from, const struct dl_device_mark *to, double *seconds,
                        struct dl_error *err);
    void (*mark_release)(struct dl_device_mark *m);
    /* Host code is about to run (work_begin) or has run (work_end) this
     * device's kernels, or the host loops that stand for them, on its
     * memory.  A device that guards its memory from the host (the emulated
     * one) opens it in between; calls nest and may come from several
     * threads.  NULL: nothing to do (the host, a GPU); call them through
     * dl_device_work_begin/end. */
    void (*work_begin)(void);
    void (*work_end)(void);
    /* The input batch's way in beside the kernels (train/batch_ahead.c).
     * pinned_alloc: host memory the device copies from without staging it
     * (CUDA: cudaHostAlloc'd, page-locked), which the host reads and
     * writes as its own; pinned_free frees it (NULL is ignored).
     * copy_ahead: queues a copy of bytes from such host memory into the
     * device's memory on a copy stream of its own, which runs while the
     * kernels queued before and after it run: it starts once `after` (a
     * mark recorded on the kernels' stream by mark_record; NULL or never
     * recorded: at once) is reached, and `done` is recorded behind it.
     * wait_mark: kernels queued after this call wait until m is reached
     * (a copy's `done`).  mark_sync: the host waits until m is reached
     * (before it writes the source of a queued copy again).  The host and
     * the emulated device copy at once and wait for nothing. */
    void *(*pinned_alloc)(size_t bytes, struct dl_error *err);
    void (*pinned_free)(void *p);
    int (*copy_ahead)(void *dst, const void *src, size_t bytes, const struct dl_device_mark *after,
                      struct dl_device_mark *done, struct dl_error *err);
    int (*wait_mark)(const struct dl_device_mark *m, struct dl_error *err);
    int (*mark_sync)(const struct dl_device_mark *m, struct dl_error *err);
    /* Makes this device current for the calling thread (CUDA keeps the
     * current GPU per thread): a thread other than the one that opened it
     * calls this before it uses the device.  NULL: nothing to do. */
    void (*bind_thread)(void);
    /* The communication backend whose buffers are this device's memory
     * ("nccl" for CUDA): data parallelism sums its gradient buckets in
     * place over one (parallel/sync.c); NULL: none, they are staged
     * through host memory. */
    const char *comm;
    /* A line naming the hardware for messages and the tuning database's
     * key ("host", or the GPU's name and cuDNN version). */
    const char *(*describe)(void);
};

/* The host: posix_memalign, memcpy, memset, and core/clock.h's clock. */
extern const struct dl_device dl_device_host;

/* The testing aid of device_emulated.c: host_memory 0, CPU kernels. */
extern const struct dl_device dl_device_emulated;

static inline void dl_device_work_begin(const struct dl_device *d)
{
    if (d->work_begin)
        d->work_begin();
}

static inline void dl_device_work_end(const struct dl_device *d)
{
    if (d->work_end)
        d->work_end();
}

/* The table of kind `kind` as it stands (no check, no cudaSetDevice: the
 * device opened last, or the runtime's default), for code that works where
 * a kernel lives (the tuner's measurements); NULL when this build lacks it. */
const struct dl_device *dl_device_get(enum dl_device_kind kind);

/* The device of kind `kind` for the process whose rank on this node is
 * local_rank (< 0: unknown, taken as 0): for CUDA, the GPU local_rank
 * modulo the node's count is made current (cudaSetDevice).  Fails with
 * DL_ERR_SPEC and a message saying what is missing, before anything else is
 * done: a build without --with-cuda, no CUDA driver, or no device. */
int dl_device_open(enum dl_device_kind kind, int local_rank, const struct dl_device **out, struct dl_error *err);

/* The device libraries of this build, for --version: "CUDA runtime 13.0,
 * cuDNN 9.13.0, cuBLAS 13.0.0 (driver: none)" or "CUDA: not built". */
void dl_device_libraries(char *buf, size_t size);

#endif
