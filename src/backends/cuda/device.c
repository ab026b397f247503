/* cuda/device.c: the CUDA device of device.h (built --with-cuda only).
 * Memory is cudaMalloc'd on the current GPU; copies and fills go through the
 * CUDA runtime with unified addressing, so one call serves every direction;
 * marks are CUDA events on the default stream, so the clock measures what
 * the GPU ran between two marks.  The input batch comes in from pinned
 * host memory on a copy stream of its own, ordered with the kernels'
 * stream by events (copy_ahead, wait_mark).  dl_cuda_device_open() tells a missing
 * driver from a machine without GPUs and makes local_rank's GPU current. */
#include "backends/cuda/cuda.h"

#include <stdio.h>

#include <cuda_runtime.h>

#include "backends/cuda/device_kernels.h"
#include <cublas_v2.h>
#include <cudnn.h>

static int cuda_fail(struct dl_error *err, cudaError_t r, const char *what)
{
    return dl_errorf(err, r == cudaErrorMemoryAllocation ? DL_ERR_NOMEM : DL_ERR_INTERNAL, "cuda: %s failed: %s",
                     what, cudaGetErrorString(r));
}

static void *cuda_alloc(size_t bytes, struct dl_error *err)
{
    void *p = NULL;
    cudaError_t r = cudaMalloc(&p, bytes ? bytes : DL_DEVICE_ALIGN); /* 256-byte aligned */
    if (r != cudaSuccess) {
        dl_errorf(err, DL_ERR_NOMEM, "cuda: out of device memory (%zu bytes: %s)", bytes, cudaGetErrorString(r));
        return NULL;
    }
    return p;
}

static void cuda_free(void *p)
{
    if (p)
        cudaFree(p);
}

static int cuda_copy(void *dst, const void *src, size_t bytes, enum dl_copy_dir dir, struct dl_error *err)
{
    static const enum cudaMemcpyKind kind[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                               cudaMemcpyDeviceToDevice};
    cudaError_t r = bytes ? cudaMemcpy(dst, src, bytes, kind[dir]) : cudaSuccess;
    return r == cudaSuccess ? DL_OK : cuda_fail(err, r, "cudaMemcpy");
}

static int cuda_copy_rows(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                          size_t rows, struct dl_error *err)
{
    cudaError_t r = rows && width ? cudaMemcpy2D(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDeviceToDevice)
                                  : cudaSuccess;
    return r == cudaSuccess ? DL_OK : cuda_fail(err, r, "cudaMemcpy2D");
}

static int cuda_fill(void *dst, int byte, size_t bytes, struct dl_error *err)
{
    cudaError_t r = bytes ? cudaMemset(dst, byte, bytes) : cudaSuccess;
    return r == cudaSuccess ? DL_OK : cuda_fail(err, r, "cudaMemset");
}

/* f32 or bf16 (device_kernels.cu); other dtypes have no sums. */
static int arith_dtype(enum dl_dtype dtype, const char *what, struct dl_error *err)
{
    return dtype == DL_F32 || dtype == DL_BF16
               ? DL_OK
               : dl_errorf(err, DL_ERR_INTERNAL, "no %s of %s values on the GPU", what, dl_dtype_name(dtype));
}

static int cuda_accumulate(void *dst, const void *src, long n, enum dl_dtype dtype, struct dl_error *err)
{
    int rc = arith_dtype(dtype, "sum", err);
    cudaError_t r = rc ? cudaSuccess : (cudaError_t)dl_cuda_accumulate(dst, src, n, dtype == DL_BF16);
    return rc ? rc : r == cudaSuccess ? DL_OK : cuda_fail(err, r, "accumulate launch");
}

static int cuda_scale(void *x, long n, dl_real f, enum dl_dtype dtype, struct dl_error *err)
{
    int rc = arith_dtype(dtype, "scaling", err);
    cudaError_t r = rc ? cudaSuccess : (cudaError_t)dl_cuda_scale(x, n, f, dtype == DL_BF16);
    return rc ? rc : r == cudaSuccess ? DL_OK : cuda_fail(err, r, "scale launch");
}

static int cuda_cast(void *dst, enum dl_dtype to, const void *src, enum dl_dtype from, long n, int add,
                     struct dl_error *err)
{
    int r = dl_cuda_cast(dst, (int)to, src, (int)from, n, add);
    if (r < 0)
        return dl_errorf(err, DL_ERR_INTERNAL, "no cast from %s to %s on the GPU%s", dl_dtype_name(from),
                         dl_dtype_name(to), add ? " (added)" : "");
    return r == cudaSuccess ? DL_OK : cuda_fail(err, (cudaError_t)r, "cast launch");
}

static int cuda_sync(struct dl_error *err)
{
    cudaError_t r = cudaDeviceSynchronize();
    return r == cudaSuccess ? DL_OK : cuda_fail(err, r, "cudaDeviceSynchronize");
}

static int cuda_mark_init(struct dl_device_mark *m, struct dl_error *err)
{
    cudaEvent_t e = NULL;
    *m = (struct dl_device_mark){.seconds = -1};
    cudaError_t r = cudaEventCreate(&e);
    if (r != cudaSuccess)
        return cuda_fail(err, r, "cudaEventCreate");
    m->event = e;
    return DL_OK;
}

static int cuda_mark_record(struct dl_device_mark *m, struct dl_error *err)
{
    cudaError_t r = cudaEventRecord((cudaEvent_t)m->event, 0);
    if (r != cudaSuccess)
        return cuda_fail(err, r, "cudaEventRecord");
    m->seconds = 0; /* recorded: the time itself is the event's */
    return DL_OK;
}

static int cuda_mark_elapsed(const struct dl_device_mark *from, const struct dl_device_mark *to, double *seconds,
                             struct dl_error *err)
{
    if (from->seconds < 0 || to->seconds < 0)
        return dl_errorf(err, DL_ERR_INTERNAL, "cuda clock: elapsed time asked of a mark never recorded");
    cudaError_t r = cudaEventSynchronize((cudaEvent_t)to->event);
    if (r != cudaSuccess)
        return cuda_fail(err, r, "cudaEventSynchronize");
    float ms = 0;
    r = cudaEventElapsedTime(&ms, (cudaEvent_t)from->event, (cudaEvent_t)to->event);
    if (r != cudaSuccess)
        return cuda_fail(err, r, "cudaEventElapsedTime");
    *seconds = ms * 1e-3;
    return DL_OK;
}

static void cuda_mark_release(struct dl_device_mark *m)
{
    if (m->event)
        cudaEventDestroy((cudaEvent_t)m->event);
    *m = (struct dl_device_mark){.seconds = -1};
}

static void *cuda_pinned_alloc(size_t bytes, struct dl_error *err)
{
    void *p = NULL;
    cudaError_t r = cudaHostAlloc(&p, bytes ? bytes : DL_DEVICE_ALIGN, cudaHostAllocDefault);
    if (r != cudaSuccess) {
        dl_errorf(err, DL_ERR_NOMEM, "cuda: no pinned host memory (%zu bytes: %s)", bytes, cudaGetErrorString(r));
        return NULL;
    }
    return p;
}

static void cuda_pinned_free(void *p)
{
    if (p)
        cudaFreeHost(p);
}

/* The copy stream, made on first use on the current GPU: non-blocking, so
 * that it does not wait for the default stream the kernels run on. */
static cudaStream_t copy_stream;

static int cuda_copy_ahead(void *dst, const void *src, size_t bytes, const struct dl_device_mark *after,
                           struct dl_device_mark *done, struct dl_error *err)
{
    cudaError_t r = copy_stream ? cudaSuccess : cudaStreamCreateWithFlags(&copy_stream, cudaStreamNonBlocking);
    if (r != cudaSuccess)
        return cuda_fail(err, r, "cudaStreamCreateWithFlags (the copy stream)");
    if (after && after->seconds >= 0) {
        r = cudaStreamWaitEvent(copy_stream, (cudaEvent_t)after->event, 0);
        if (r != cudaSuccess)
            return cuda_fail(err, r, "cudaStreamWaitEvent (the copy stream)");
    }
    r = bytes ? cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, copy_stream) : cudaSuccess;
    if (r != cudaSuccess)
        return cuda_fail(err, r, "cudaMemcpyAsync (the copy stream)");
    r = cudaEventRecord((cudaEvent_t)done->event, copy_stream);
    if (r != cudaSuccess)
        return cuda_fail(err, r, "cudaEventRecord (the copy stream)");
    done->seconds = 0;
    return DL_OK;
}

static int cuda_wait_mark(const struct dl_device_mark *m, struct dl_error *err)
{
    cudaError_t r = m->seconds >= 0 ? cudaStreamWaitEvent(0, (cudaEvent_t)m->event, 0) : cudaSuccess;
    return r == cudaSuccess ? DL_OK : cuda_fail(err, r, "cudaStreamWaitEvent");
}

static int cuda_mark_sync(const struct dl_device_mark *m, struct dl_error *err)
{
    cudaError_t r = m->seconds >= 0 ? cudaEventSynchronize((cudaEvent_t)m->event) : cudaSuccess;
    return r == cudaSuccess ? DL_OK : cuda_fail(err, r, "cudaEventSynchronize");
}

/* The GPU dl_cuda_device_open made current, for the other threads. */
static int opened;

static void cuda_bind_thread(void)
{
    cudaSetDevice(opened);
}

/* "NAME, cuDNN MAJOR.MINOR.PATCH" of the current GPU: filled when a device
 * is opened, or on first use from the runtime's current device. */
static char description[320];

static void describe_current(int dev)
{
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess)
        snprintf(prop.name, sizeof prop.name, "GPU %d (properties unavailable)", dev);
    size_t v = cudnnGetVersion();
    snprintf(description, sizeof description, "%s, cuDNN %zu.%zu.%zu", prop.name, v / 10000, v / 100 % 100, v % 100);
}

void dl_cuda_libraries(char *buf, size_t size)
{
    int runtime = 0, driver = 0, cublas = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver); /* 0 without a driver */
    cublasGetProperty(MAJOR_VERSION, &cublas);
    int cublas_minor = 0, cublas_patch = 0;
    cublasGetProperty(MINOR_VERSION, &cublas_minor);
    cublasGetProperty(PATCH_LEVEL, &cublas_patch);
    size_t v = cudnnGetVersion();
    char drv[32] = "none";
    if (driver)
        snprintf(drv, sizeof drv, "%d.%d", driver / 1000, driver % 1000 / 10);
    snprintf(buf, size, "CUDA runtime %d.%d, cuDNN %zu.%zu.%zu, cuBLAS %d.%d.%d (driver: %s)", runtime / 1000,
             runtime % 1000 / 10, v / 10000, v / 100 % 100, v % 100, cublas, cublas_minor, cublas_patch, drv);
}

static const char *cuda_describe(void)
{
    int dev = 0;
    if (!description[0])
        describe_current(cudaGetDevice(&dev) == cudaSuccess ? dev : 0);
    return description;
}

const struct dl_device dl_device_cuda = {
    .name = "cuda",
    .kind = DL_DEVICE_CUDA,
    .kernels = DL_DEVICE_CUDA,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy = cuda_copy,
    .copy_rows = cuda_copy_rows,
    .fill = cuda_fill,
    .accumulate = cuda_accumulate,
    .scale = cuda_scale,
    .cast = cuda_cast,
    .sync = cuda_sync,
    .mark_init = cuda_mark_init,
    .mark_record = cuda_mark_record,
    .mark_elapsed = cuda_mark_elapsed,
    .mark_release = cuda_mark_release,
    .pinned_alloc = cuda_pinned_alloc,
    .pinned_free = cuda_pinned_free,
    .copy_ahead = cuda_copy_ahead,
    .wait_mark = cuda_wait_mark,
    .mark_sync = cuda_mark_sync,
    .bind_thread = cuda_bind_thread,
    .comm = "nccl",
    .describe = cuda_describe,
};

int dl_cuda_count_verdict(int status, int driver, int count, struct dl_error *err)
{
    cudaError_t r = (cudaError_t)status;
    if (r != cudaSuccess && r != cudaErrorNoDevice && driver == 0)
        return dl_errorf(err, DL_ERR_SPEC, "no CUDA driver (libcuda) on this machine (cudaGetDeviceCount: %s)",
                         cudaGetErrorString(r));
    if (r == cudaErrorInsufficientDriver || r == cudaErrorCompatNotSupportedOnDevice)
        return dl_errorf(err, DL_ERR_SPEC, "the CUDA driver (version %d.%d) cannot run this build (CUDA runtime "
                         "%d.%d): %s", driver / 1000, driver % 1000 / 10, CUDART_VERSION / 1000,
                         CUDART_VERSION % 1000 / 10, cudaGetErrorString(r));
    if (r != cudaSuccess && r != cudaErrorNoDevice)
        return dl_errorf(err, DL_ERR_SPEC, "cudaGetDeviceCount failed: %s", cudaGetErrorString(r));
    if (r == cudaErrorNoDevice || count <= 0)
        return dl_errorf(err, DL_ERR_SPEC, "no CUDA device (the driver is loaded but cudaGetDeviceCount finds none)");
    return DL_OK;
}

int dl_cuda_device_count(int *count, struct dl_error *err)
{
    int n = 0, driver = 0;
    cudaError_t r = cudaGetDeviceCount(&n);
    cudaDriverGetVersion(&driver); /* 0 when no driver is loaded */
    int rc = dl_cuda_count_verdict((int)r, driver, n, err);
    *count = rc ? 0 : n;
    return rc;
}

int dl_cuda_device_open(int local_rank, const struct dl_device **out, struct dl_error *err)
{
    int count = 0;
    int rc = dl_cuda_device_count(&count, err);
    if (rc)
        return rc;
    int dev = (local_rank > 0 ? local_rank : 0) % count;
    cudaError_t r = cudaSetDevice(dev);
    if (r != cudaSuccess)
        return dl_errorf(err, DL_ERR_SPEC, "cudaSetDevice(%d) for local rank %d failed: %s", dev, local_rank,
                         cudaGetErrorString(r));
    describe_current(dev);
    opened = dev;
    *out = &dl_device_cuda;
    return DL_OK;
}
