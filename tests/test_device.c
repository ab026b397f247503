/* test_device.c: the devices of backends/device.h.  One source, two
 * programs: test_device runs the cases on the host device and checks what
 * dl_device_open answers for each kind in this build (a build without
 * --with-cuda names that; a CUDA build names a missing driver or device
 * exactly when the CUDA runtime, asked directly, finds none);
 * test_device_cuda (built --with-cuda, TEST_ON_CUDA) runs the same cases on
 * the GPU and, where cudaGetDeviceCount finds none, reports itself skipped
 * with dl_device_open's reason (a TAP plan of 1..0 # SKIP), never passed.
 * test_device also reads the launcher's local rank, which picks the GPU, and
 * checks that kernel choice follows the device.  test_device_emulated
 * (TEST_ON_EMULATED) runs the cases on the emulated device and checks what
 * makes it a testing aid: copies (and copies ahead, from pinned memory the
 * host touches freely) refuse a side in the wrong memory, and the
 * host touching its memory outside a copy or a work window dies by SIGSEGV
 * (in a child process).
 *
 * Each case checks bytes through copies back to the host, and the clock
 * against host clock readings taken before the first mark and after the
 * device has reached the last. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"

#include "backends/device.h"
#include "backends/kernel.h"
#include "backends/reference/reference.h"
#include "core/clock.h"
#include "core/threads.h"
#include "spec/netfile.h"

#ifdef DL_HAVE_CUDA
#include <cuda_runtime.h>

#include "backends/cuda/cuda.h"
#endif

#if defined TEST_ON_CUDA
#define KIND DL_DEVICE_CUDA
#elif defined TEST_ON_EMULATED
#define KIND DL_DEVICE_EMULATED
#else
#define KIND DL_DEVICE_CPU
#define TEST_ON_HOST
#endif

static const struct dl_device *dev;

/* Sizes that are not multiples of anything, and none at all. */
static const size_t sizes[] = {0, 1, 3, 64, 1000, 4099, 1 << 20};

static void allocations_are_aligned_and_freed(void **state)
{
    (void)state;
    struct dl_error err = {0};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = dev->alloc(sizes[i], &err);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % DL_DEVICE_ALIGN, 0);
        dev->free(p);
    }
    dev->free(NULL);
}

/* host pattern -> device -> (within, at an offset) device -> host; fill. */
static void copies_and_fills_move_the_bytes(void **state)
{
    (void)state;
    struct dl_error err = {0};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i], off = n / 3;
        unsigned char *host = malloc(n + 1), *back = malloc(n + 1);
        assert_non_null(host);
        assert_non_null(back);
        for (size_t j = 0; j < n; j++)
            host[j] = (unsigned char)(j * 131 + 7);
        unsigned char *a = dev->alloc(n, &err), *b = dev->alloc(n, &err);
        assert_non_null(a);
        assert_non_null(b);
        assert_int_equal(dev->copy(a, host, n, DL_COPY_TO_DEVICE, &err), DL_OK);
        assert_int_equal(dev->fill(b, 0x5a, n, &err), DL_OK);
        assert_int_equal(dev->copy(b + off, a, n - off, DL_COPY_WITHIN, &err), DL_OK);
        memset(back, 0, n + 1);
        assert_int_equal(dev->copy(back, b, n, DL_COPY_TO_HOST, &err), DL_OK);
        assert_int_equal(dev->sync(&err), DL_OK);
        for (size_t j = 0; j < n; j++)
            if (back[j] != (j < off ? 0x5a : host[j - off]))
                fail_msg("%zu bytes: byte %zu is %d, expected %d", n, j, back[j], j < off ? 0x5a : host[j - off]);
        dev->free(a);
        dev->free(b);
        free(host);
        free(back);
    }
}

/* The input batch's way in: from pinned host memory on the copy stream,
 * after a mark the kernels' stream recorded behind a fill of the same
 * buffer (the copy must land after the fill), and a kernel queued after
 * wait_mark reads what was copied (accumulate into a second buffer). */
static void copies_ahead_land_in_order(void **state)
{
    (void)state;
    struct dl_error err = {0};
    enum { N = 4099 };
    float *pinned = dev->pinned_alloc(sizeof(float) * N, &err), back[N];
    assert_non_null(pinned);
    for (int i = 0; i < N; i++)
        pinned[i] = (float)(i % 97) + 0.5f; /* the host writes pinned memory as its own */
    float *d = dev->alloc(sizeof(float) * N, &err), *sum = dev->alloc(sizeof(float) * N, &err);
    assert_non_null(d);
    assert_non_null(sum);
    struct dl_device_mark filled, copied;
    assert_int_equal(dev->mark_init(&filled, &err), DL_OK);
    assert_int_equal(dev->mark_init(&copied, &err), DL_OK);
    assert_int_equal(dev->fill(sum, 0, sizeof(float) * N, &err), DL_OK);
    assert_int_equal(dev->fill(d, 0x7f, sizeof(float) * N, &err), DL_OK);
    assert_int_equal(dev->mark_record(&filled, &err), DL_OK);
    assert_int_equal(dev->copy_ahead(d, pinned, sizeof(float) * N, &filled, &copied, &err), DL_OK);
    assert_int_equal(dev->wait_mark(&copied, &err), DL_OK);
    assert_int_equal(dev->accumulate(sum, d, N, DL_F32, &err), DL_OK);
    assert_int_equal(dev->mark_sync(&copied, &err), DL_OK);
    assert_int_equal(dev->copy(back, sum, sizeof back, DL_COPY_TO_HOST, &err), DL_OK);
    assert_int_equal(dev->sync(&err), DL_OK);
    for (int i = 0; i < N; i++)
        if (back[i] != pinned[i])
            fail_msg("value %d is %g, expected the copied %g", i, back[i], pinned[i]);
    dev->mark_release(&filled);
    dev->mark_release(&copied);
    dev->free(d);
    dev->free(sum);
    dev->pinned_free(pinned);
}

/* accumulate adds src into dst on the device: read back, each value is
 * the sum the host computes (small integers and halves: exact in float). */
static void accumulate_adds(void **state)
{
    (void)state;
    struct dl_error err = {0};
    enum { N = 1000 };
    dl_real x[N], y[N], back[N];
    for (int i = 0; i < N; i++)
        x[i] = (dl_real)(i % 37) - 18, y[i] = (dl_real)(i % 11) * (dl_real)0.5;
    dl_real *a = dev->alloc(sizeof x, &err), *b = dev->alloc(sizeof y, &err);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(dev->copy(a, x, sizeof x, DL_COPY_TO_DEVICE, &err), DL_OK);
    assert_int_equal(dev->copy(b, y, sizeof y, DL_COPY_TO_DEVICE, &err), DL_OK);
    assert_int_equal(dev->accumulate(a, b, N - 1, DL_F32, &err), DL_OK); /* the last value left alone */
    assert_int_equal(dev->copy(back, a, sizeof back, DL_COPY_TO_HOST, &err), DL_OK);
    for (int i = 0; i < N; i++)
        if (back[i] != (i < N - 1 ? x[i] + y[i] : x[i]))
            fail_msg("value %d is %g, expected %g", i, (double)back[i], (double)(i < N - 1 ? x[i] + y[i] : x[i]));
    dev->free(a);
    dev->free(b);
}

/* scale multiplies in place: read back, each value is the host's product
 * (exact: small integers times a power of two). */
static void scale_multiplies(void **state)
{
    (void)state;
    struct dl_error err = {0};
    enum { N = 1000 };
    dl_real x[N], back[N];
    for (int i = 0; i < N; i++)
        x[i] = (dl_real)(i % 37) - 18;
    dl_real *a = dev->alloc(sizeof x, &err);
    assert_non_null(a);
    assert_int_equal(dev->copy(a, x, sizeof x, DL_COPY_TO_DEVICE, &err), DL_OK);
    assert_int_equal(dev->scale(a, N - 1, (dl_real)0.25, DL_F32, &err), DL_OK); /* the last value left alone */
    assert_int_equal(dev->copy(back, a, sizeof back, DL_COPY_TO_HOST, &err), DL_OK);
    for (int i = 0; i < N; i++)
        if (back[i] != (i < N - 1 ? x[i] * (dl_real)0.25 : x[i]))
            fail_msg("value %d is %g, expected %g", i, (double)back[i], (double)(i < N - 1 ? x[i] / 4 : x[i]));
    dev->free(a);
}

/* bf16 values summed and scaled on the device are rounded once from the
 * f32 result, to nearest even, as core/bf16.h's cast rounds on the host:
 * read back, every value has the cast's bits, on random values, sums that
 * fall halfway between two bf16 values, sums past bf16's largest
 * (infinity) and NaN.  The buffers are exactly 2 bytes a value, so a
 * device that took them for floats reads past them (the emulated device
 * refuses that).  An i32 sum or scaling is refused. */
static void bf16_sums_and_scales_round_once(void **state)
{
    (void)state;
    struct dl_error err = {0};
    enum { N = 4096 };
    static dl_bf16 x[N], y[N], back[N];
    uint64_t r = 0x9e3779b97f4a7c15ULL;
    for (int i = 0; i < N; i++) {
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (dl_bf16)(r >> 48), y[i] = (dl_bf16)(r >> 32);
        if (i % 4 == 1) /* halfway: x + 2^-8 x (its last bit's half) */
            y[i] = dl_f32_to_bf16(dl_bf16_to_f32(x[i]) / 256);
    }
    x[0] = dl_f32_to_bf16(3e38f), y[0] = dl_f32_to_bf16(3e38f); /* to infinity */
    x[3] = 0x7fc1;                                               /* NaN */
    dl_bf16 *a = dev->alloc(sizeof x, &err), *b = dev->alloc(sizeof y, &err);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(dev->copy(a, x, sizeof x, DL_COPY_TO_DEVICE, &err), DL_OK);
    assert_int_equal(dev->copy(b, y, sizeof y, DL_COPY_TO_DEVICE, &err), DL_OK);
    assert_int_equal(dev->accumulate(a, b, N, DL_BF16, &err), DL_OK);
    assert_int_equal(dev->copy(back, a, sizeof back, DL_COPY_TO_HOST, &err), DL_OK);
    int rounded_up = 0;
    for (int i = 0; i < N; i++) {
        float sum = dl_bf16_to_f32(x[i]) + dl_bf16_to_f32(y[i]);
        uint32_t bits;
        memcpy(&bits, &sum, sizeof bits);
        rounded_up += i % 4 == 1 && dl_f32_to_bf16(sum) != (dl_bf16)(bits >> 16); /* not the truncation */
        if (back[i] != dl_f32_to_bf16(sum))
            fail_msg("sum %d: %#06x + %#06x is %#06x, expected %#06x", i, x[i], y[i], back[i], dl_f32_to_bf16(sum));
    }
    assert_true(rounded_up > 0); /* the halfway sums took the rounding's path */
    assert_true(isinf(dl_bf16_to_f32(back[0])) && isnan(dl_bf16_to_f32(back[3])));
    float f = 0.3f;
    assert_int_equal(dev->scale(b, N, (dl_real)f, DL_BF16, &err), DL_OK);
    assert_int_equal(dev->copy(back, b, sizeof back, DL_COPY_TO_HOST, &err), DL_OK);
    for (int i = 0; i < N; i++)
        if (back[i] != dl_f32_to_bf16(dl_bf16_to_f32(y[i]) * f))
            fail_msg("scaled %d: %#06x * 0.3 is %#06x, expected %#06x", i, y[i], back[i],
                     dl_f32_to_bf16(dl_bf16_to_f32(y[i]) * f));
    assert_int_equal(dev->accumulate(a, b, 2, DL_I32, &err), DL_ERR_INTERNAL);
    assert_int_equal(dev->scale(a, 2, 1, DL_I32, &err), DL_ERR_INTERNAL);
    dev->free(a);
    dev->free(b);
}

/* cast converts in the device's memory as core/dtype.h's dl_cast and
 * dl_cast_add do on the host, bit for bit: f32 -> bf16 (to nearest even,
 * halfway values among them), bf16 -> f32, i32 -> f32, and bf16 added into
 * f32 and f32 into bf16 (the sum rounded once); exactly-sized buffers (the
 * emulated device refuses a read past them); a pair the host lacks (f32
 * -> i32) is refused. */
static void cast_as_the_host(void **state)
{
    (void)state;
    struct dl_error err = {0};
    enum { N = 777 };
    static float f[N], g[N], back_f[N], want_f[N];
    static dl_bf16 h[N], back_h[N], want_h[N];
    static int32_t k[N];
    uint64_t r = 12345;
    for (int i = 0; i < N; i++) {
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        uint32_t u = (uint32_t)(r >> 32) & 0xbfffffffu; /* no NaN, no infinity */
        memcpy(&f[i], &u, sizeof u);
        if (i % 5 == 0) /* halfway between two bf16 values */
            u = (u & 0xffff0000u) | 0x8000u, memcpy(&f[i], &u, sizeof u);
        g[i] = (float)(i % 13) - 6.5f;
        k[i] = (int32_t)(r >> 40) - (1 << 23);
    }
    float *df = dev->alloc(sizeof f, &err), *dg = dev->alloc(sizeof g, &err);
    dl_bf16 *dh = dev->alloc(sizeof h, &err);
    int32_t *dk = dev->alloc(sizeof k, &err);
    assert_true(df && dg && dh && dk);
    assert_int_equal(dev->copy(df, f, sizeof f, DL_COPY_TO_DEVICE, &err), DL_OK);
    assert_int_equal(dev->copy(dg, g, sizeof g, DL_COPY_TO_DEVICE, &err), DL_OK);
    assert_int_equal(dev->copy(dk, k, sizeof k, DL_COPY_TO_DEVICE, &err), DL_OK);
    assert_int_equal(dev->cast(dh, DL_BF16, df, DL_F32, N, 0, &err), DL_OK); /* f32 -> bf16 */
    assert_int_equal(dev->copy(back_h, dh, sizeof back_h, DL_COPY_TO_HOST, &err), DL_OK);
    assert_int_equal(dl_cast(f, DL_F32, want_h, DL_BF16, N, &err), DL_OK);
    assert_memory_equal(back_h, want_h, sizeof want_h);
    assert_int_equal(dev->cast(df, DL_F32, dh, DL_BF16, N, 0, &err), DL_OK); /* bf16 -> f32 */
    assert_int_equal(dev->copy(back_f, df, sizeof back_f, DL_COPY_TO_HOST, &err), DL_OK);
    assert_int_equal(dl_cast(want_h, DL_BF16, want_f, DL_F32, N, &err), DL_OK);
    assert_memory_equal(back_f, want_f, sizeof want_f);
    assert_int_equal(dev->cast(dg, DL_F32, dh, DL_BF16, N, 1, &err), DL_OK); /* bf16 added into f32 */
    assert_int_equal(dev->copy(back_f, dg, sizeof back_f, DL_COPY_TO_HOST, &err), DL_OK);
    memcpy(want_f, g, sizeof g);
    assert_int_equal(dl_cast_add(want_h, DL_BF16, want_f, DL_F32, N, &err), DL_OK);
    assert_memory_equal(back_f, want_f, sizeof want_f);
    assert_int_equal(dev->cast(dh, DL_BF16, dg, DL_F32, N, 1, &err), DL_OK); /* f32 added into bf16 */
    assert_int_equal(dev->copy(back_h, dh, sizeof back_h, DL_COPY_TO_HOST, &err), DL_OK);
    assert_int_equal(dl_cast_add(want_f, DL_F32, want_h, DL_BF16, N, &err), DL_OK);
    assert_memory_equal(back_h, want_h, sizeof want_h);
    assert_int_equal(dev->cast(df, DL_F32, dk, DL_I32, N, 0, &err), DL_OK); /* i32 -> f32 */
    assert_int_equal(dev->copy(back_f, df, sizeof back_f, DL_COPY_TO_HOST, &err), DL_OK);
    for (int i = 0; i < N; i++)
        assert_true(back_f[i] == (float)k[i]);
    assert_int_equal(dev->cast(dk, DL_I32, df, DL_F32, N, 0, &err), DL_ERR_INTERNAL);
    dev->free(df), dev->free(dg), dev->free(dh), dev->free(dk);
}

/* copy_rows moves rows of width bytes between pitches (the sample blocks
 * of exec/comm_steps.c): read back, each row of dst holds its row of src
 * and the gaps between rows keep their fill. */
static void copy_rows_moves_the_rows(void **state)
{
    (void)state;
    struct dl_error err = {0};
    enum { ROWS = 7, WIDTH = 12, SRC_PITCH = 40, DST_PITCH = 20 };
    unsigned char host[ROWS * SRC_PITCH], back[ROWS * DST_PITCH];
    for (size_t j = 0; j < sizeof host; j++)
        host[j] = (unsigned char)(j * 131 + 7);
    unsigned char *a = dev->alloc(sizeof host, &err), *b = dev->alloc(sizeof back, &err);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(dev->copy(a, host, sizeof host, DL_COPY_TO_DEVICE, &err), DL_OK);
    assert_int_equal(dev->fill(b, 0x5a, sizeof back, &err), DL_OK);
    assert_int_equal(dev->copy_rows(b, DST_PITCH, a + 3, SRC_PITCH, WIDTH, ROWS, &err), DL_OK);
    assert_int_equal(dev->copy_rows(b, DST_PITCH, a, SRC_PITCH, WIDTH, 0, &err), DL_OK); /* nothing */
    assert_int_equal(dev->copy(back, b, sizeof back, DL_COPY_TO_HOST, &err), DL_OK);
    for (int r = 0; r < ROWS; r++)
        for (int j = 0; j < DST_PITCH; j++) {
            int expect = j < WIDTH ? host[r * SRC_PITCH + 3 + j] : 0x5a;
            if (back[r * DST_PITCH + j] != expect)
                fail_msg("row %d byte %d is %d, expected %d", r, j, back[r * DST_PITCH + j], expect);
        }
    dev->free(a);
    dev->free(b);
}

/* Two marks around work on the device: their distance is at least 0 and at
 * most the host time from before the first to after the device reached
 * the second; a mark never recorded is refused. */
static void marks_lie_within_the_host_interval(void **state)
{
    (void)state;
    struct dl_error err = {0};
    struct dl_device_mark a, b, never;
    assert_int_equal(dev->mark_init(&a, &err), DL_OK);
    assert_int_equal(dev->mark_init(&b, &err), DL_OK);
    assert_int_equal(dev->mark_init(&never, &err), DL_OK);
    size_t n = (size_t)64 << 20;
    void *p = dev->alloc(n, &err);
    assert_non_null(p);
    double before = dl_clock_now();
    assert_int_equal(dev->mark_record(&a, &err), DL_OK);
    assert_int_equal(dev->fill(p, 1, n, &err), DL_OK);
    assert_int_equal(dev->mark_record(&b, &err), DL_OK);
    assert_int_equal(dev->sync(&err), DL_OK);
    double after = dl_clock_now();
    double t = -1;
    assert_int_equal(dev->mark_elapsed(&a, &b, &t, &err), DL_OK);
    printf("# %s: 64 MiB fill %.3g s between marks, %.3g s on the host clock around them\n", dev->name, t,
           after - before);
    assert_true(t >= 0);
    assert_true(t <= after - before + 1e-6); /* CUDA events resolve about half a microsecond */
    assert_int_equal(dev->mark_elapsed(&never, &b, &t, &err), DL_ERR_INTERNAL);
    assert_int_equal(dev->mark_elapsed(&a, &never, &t, &err), DL_ERR_INTERNAL);
    dev->mark_release(&a);
    dev->mark_release(&b);
    dev->mark_release(&never);
    dev->free(p);
}

static void describes_itself(void **state)
{
    (void)state;
    assert_int_equal(dev->kind, KIND);
    assert_string_equal(dev->name, dl_device_names[KIND]);
    assert_true(strlen(dev->describe()) > 0);
#ifdef TEST_ON_CUDA
    int current = -1;
    struct cudaDeviceProp prop;
    assert_int_equal(cudaGetDevice(&current), cudaSuccess);
    assert_int_equal(cudaGetDeviceProperties(&prop, current), cudaSuccess);
    assert_non_null(strstr(dev->describe(), prop.name));
    assert_non_null(strstr(dev->describe(), "cuDNN"));
#endif
}

#ifdef TEST_ON_HOST
/* What dl_device_open answers for CUDA in this build, against the runtime
 * asked directly: every refusal is DL_ERR_SPEC, names --device cuda and
 * says what is missing. */
static void cuda_is_refused_with_what_is_missing(void **state)
{
    (void)state;
    struct dl_error err = {0};
    const struct dl_device *d = NULL;
    int rc = dl_device_open(DL_DEVICE_CUDA, 0, &d, &err);
    printf("# dl_device_open(cuda): %s\n", rc ? err.msg : d->describe());
#ifdef DL_HAVE_CUDA
    int count = 0, driver = 0;
    cudaError_t r = cudaGetDeviceCount(&count);
    cudaDriverGetVersion(&driver);
    if (r == cudaSuccess && count > 0) {
        assert_int_equal(rc, DL_OK);
        assert_int_equal(d->kind, DL_DEVICE_CUDA);
        return;
    }
    assert_int_equal(rc, DL_ERR_SPEC);
    assert_null(d);
    assert_non_null(strstr(err.msg, "--device cuda: "));
    if (driver == 0)
        assert_non_null(strstr(err.msg, "no CUDA driver"));
    else if (r == cudaErrorNoDevice || count == 0)
        assert_non_null(strstr(err.msg, "no CUDA device"));
#else
    assert_int_equal(rc, DL_ERR_SPEC);
    assert_null(d);
    assert_non_null(strstr(err.msg, "--device cuda: "));
    assert_non_null(strstr(err.msg, "built without --with-cuda"));
#endif
}

/* The local rank that picks a rank's GPU, from each launcher's variable
 * (Open MPI first), and -1 when none says or the value is not a number. */
static void local_rank_from_the_launcher(void **state)
{
    (void)state;
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};
    for (int i = 0; i < 3; i++)
        unsetenv(vars[i]);
    assert_int_equal(dl_threads_local_rank(), -1);
    setenv("SLURM_LOCALID", "5", 1);
    assert_int_equal(dl_threads_local_rank(), 5);
    setenv("MPI_LOCALRANKID", "2", 1);
    assert_int_equal(dl_threads_local_rank(), 2);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
    assert_int_equal(dl_threads_local_rank(), 3);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3x", 1); /* not a number: the next variable says */
    assert_int_equal(dl_threads_local_rank(), 2);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1); /* the first rank of a node: a rank like any other */
    assert_int_equal(dl_threads_local_rank(), 0);
    for (int i = 0; i < 3; i++)
        unsetenv(vars[i]);
}

/* Kernel choice takes only kernels of the choices' device: the reference
 * (a host kernel) and the same kernel declared to run on CUDA each serve
 * their own device alone, and with CUDA choices the default is a CUDA
 * kernel or none, never the host's reference. */
static void kernel_choice_follows_the_device(void **state)
{
    (void)state;
    struct dl_net net;
    struct dl_error err = {0};
    assert_int_equal(dl_net_load_string("t.yaml", "input: {shape: [3, 5, 5], classes: 2}\nlayers:\n"
                                        "  - {type: conv, filters: 2, kernel: 3, name: t}\n"
                                        "  - {type: fc, units: 2}\nloss: softmax_cross_entropy\n",
                                        &net, &err), 0);
    const struct dl_layer *l = &net.graph.layers[0];
    struct dl_kernel on_cuda = dl_kernel_reference;
    on_cuda.device = DL_DEVICE_CUDA;
    struct dl_kernel_choices host = {0}, cuda = {.device = DL_DEVICE_CUDA};
    assert_true(dl_kernel_usable(&dl_kernel_reference, l, NULL));
    assert_true(dl_kernel_usable(&dl_kernel_reference, l, &host));
    assert_false(dl_kernel_usable(&dl_kernel_reference, l, &cuda));
    assert_false(dl_kernel_usable(&on_cuda, l, NULL));
    assert_false(dl_kernel_usable(&on_cuda, l, &host));
    assert_true(dl_kernel_usable(&on_cuda, l, &cuda));
    for (int i = 0; i < net.graph.n; i++) {
        const struct dl_kernel *k = dl_kernel_select(&net.graph.layers[i], &cuda);
        assert_true(!k || k->device == DL_DEVICE_CUDA);
        assert_int_equal(dl_kernel_select(&net.graph.layers[i], &host)->device, DL_DEVICE_CPU);
    }
    dl_net_free(&net);
}

#ifdef DL_HAVE_CUDA
/* What each answer of the CUDA runtime becomes, including those this
 * machine cannot give (a driver without a GPU, an old driver, GPUs). */
static void cuda_answers_named(void **state)
{
    (void)state;
    struct dl_error err = {0};
    assert_int_equal(dl_cuda_count_verdict(cudaErrorInsufficientDriver, 0, 0, &err), DL_ERR_SPEC);
    assert_non_null(strstr(err.msg, "no CUDA driver"));
    assert_int_equal(dl_cuda_count_verdict(cudaErrorNoDevice, 13000, 0, &err), DL_ERR_SPEC);
    assert_non_null(strstr(err.msg, "no CUDA device"));
    assert_int_equal(dl_cuda_count_verdict(cudaErrorNoDevice, 0, 0, &err), DL_ERR_SPEC); /* some drivers say so */
    assert_non_null(strstr(err.msg, "no CUDA device"));
    assert_int_equal(dl_cuda_count_verdict(cudaSuccess, 13000, 0, &err), DL_ERR_SPEC);
    assert_non_null(strstr(err.msg, "no CUDA device"));
    assert_int_equal(dl_cuda_count_verdict(cudaErrorInsufficientDriver, 12020, 0, &err), DL_ERR_SPEC);
    assert_non_null(strstr(err.msg, "driver (version 12.2) cannot run this build"));
    assert_int_equal(dl_cuda_count_verdict(cudaSuccess, 13000, 2, &err), DL_OK);
}
#endif

static void cpu_is_the_host(void **state)
{
    (void)state;
    struct dl_error err = {0};
    const struct dl_device *d = NULL;
    assert_int_equal(dl_device_open(DL_DEVICE_CPU, 3, &d, &err), DL_OK);
    assert_ptr_equal(d, &dl_device_host);
}
#endif

#ifdef TEST_ON_EMULATED
static void copies_check_their_sides(void **state)
{
    (void)state;
    struct dl_error err = {0};
    unsigned char host[256] = {0};
    unsigned char *d = dev->alloc(sizeof host, &err);
    assert_non_null(d);
    assert_int_equal(dev->copy(host, d, 16, DL_COPY_TO_DEVICE, &err), DL_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, "copy destination"));
    assert_int_equal(dev->copy(d, host, 16, DL_COPY_TO_DEVICE, &err), DL_OK);
    assert_int_equal(dev->copy(d, host, 16, DL_COPY_TO_HOST, &err), DL_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, "device memory, not host memory"));
    assert_int_equal(dev->copy(host, host + 16, 16, DL_COPY_WITHIN, &err), DL_ERR_INTERNAL);
    assert_int_equal(dev->fill(host, 0, 16, &err), DL_ERR_INTERNAL);
    size_t page = (size_t)sysconf(_SC_PAGESIZE); /* the block is one page: one past it is no block's */
    assert_int_equal(dev->copy(host, d + page - 8, 16, DL_COPY_TO_HOST, &err), DL_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, "not in one device block"));
    assert_int_equal(dev->copy_rows(d, 32, host, 32, 16, 4, &err), DL_ERR_INTERNAL); /* rows: both in the device */
    assert_non_null(strstr(err.msg, "copy source"));
    assert_int_equal(dev->copy_rows(d, page / 2, d, 16, 16, 3, &err), DL_ERR_INTERNAL); /* the last row past it */
    assert_non_null(strstr(err.msg, "not in one device block"));
    assert_int_equal(dev->copy_rows(d + 128, 16, d, 32, 16, 4, &err), DL_OK);
    dev->free(d);
}

/* How a child that touches p (with `windows` work windows open) ends:
 * its exit status, or 128 + the signal. */
static int touch_in_child(unsigned char *p, int windows)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL); /* cmocka's handler would go on with the tests in the child */
        for (int i = 0; i < windows; i++)
            dl_device_work_begin(dev);
        if (windows > 1)
            dl_device_work_end(dev); /* nested: still open */
        p[0] = (unsigned char)(p[1] + 1);
        _exit(0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

static void host_touch_faults(void **state)
{
    (void)state;
    struct dl_error err = {0};
    unsigned char *d = dev->alloc(100, &err);
    assert_non_null(d);
    assert_int_equal(touch_in_child(d, 0), 128 + SIGSEGV);
    assert_int_equal(touch_in_child(d, 1), 0);
    assert_int_equal(touch_in_child(d, 2), 0);
    /* a window closed again: the memory is guarded as before */
    dl_device_work_begin(dev);
    d[0] = 7;
    dl_device_work_end(dev);
    assert_int_equal(touch_in_child(d, 0), 128 + SIGSEGV);
    unsigned char back = 0;
    assert_int_equal(dev->copy(&back, d, 1, DL_COPY_TO_HOST, &err), DL_OK);
    assert_int_equal(back, 7);
    dev->free(d);
}

/* Pinned memory is host memory the host touches freely; a copy ahead
 * refuses a destination outside the device's blocks, and what it filled
 * stays guarded from the host. */
static void copies_ahead_check_their_sides(void **state)
{
    (void)state;
    struct dl_error err = {0};
    unsigned char *pinned = dev->pinned_alloc(64, &err), *d = dev->alloc(64, &err);
    assert_non_null(pinned);
    assert_non_null(d);
    struct dl_device_mark done;
    assert_int_equal(dev->mark_init(&done, &err), DL_OK);
    assert_int_equal(touch_in_child(pinned, 0), 0);
    assert_int_equal(dev->copy_ahead(pinned, pinned + 32, 16, NULL, &done, &err), DL_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, "copy destination"));
    assert_int_equal(dev->copy_ahead(d, d + 32, 16, NULL, &done, &err), DL_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, "device memory, not host memory"));
    assert_int_equal(dev->copy_ahead(d, pinned, 64, NULL, &done, &err), DL_OK);
    assert_int_equal(touch_in_child(d, 0), 128 + SIGSEGV);
    dev->mark_release(&done);
    dev->free(d);
    dev->pinned_free(pinned);
}

static void emulated_runs_host_kernels(void **state)
{
    (void)state;
    struct dl_error err = {0};
    const struct dl_device *d = NULL;
    assert_int_equal(dl_device_open(DL_DEVICE_EMULATED, 1, &d, &err), DL_OK);
    assert_ptr_equal(d, &dl_device_emulated);
    assert_ptr_equal(dl_device_get(DL_DEVICE_EMULATED), &dl_device_emulated);
    assert_int_equal(d->host_memory, 0);
    assert_int_equal(d->kernels, DL_DEVICE_CPU);
}
#endif

int main(void)
{
    struct dl_error err = {0};
    if (dl_device_open(KIND, 0, &dev, &err)) { /* cmocka's skip() would count as a failure under the TAP driver */
        printf("1..0 # SKIP %s\n", err.msg);
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(allocations_are_aligned_and_freed),
        cmocka_unit_test(copies_and_fills_move_the_bytes),
        cmocka_unit_test(accumulate_adds),
        cmocka_unit_test(scale_multiplies),
        cmocka_unit_test(bf16_sums_and_scales_round_once),
        cmocka_unit_test(cast_as_the_host),
        cmocka_unit_test(copy_rows_moves_the_rows),
        cmocka_unit_test(copies_ahead_land_in_order),
        cmocka_unit_test(marks_lie_within_the_host_interval),
        cmocka_unit_test(describes_itself),
#ifdef TEST_ON_EMULATED
        cmocka_unit_test(copies_check_their_sides),
        cmocka_unit_test(host_touch_faults),
        cmocka_unit_test(copies_ahead_check_their_sides),
        cmocka_unit_test(emulated_runs_host_kernels),
#endif
#ifdef TEST_ON_HOST
        cmocka_unit_test(cuda_is_refused_with_what_is_missing),
        cmocka_unit_test(cpu_is_the_host),
#ifdef DL_HAVE_CUDA
        cmocka_unit_test(cuda_answers_named),
#endif
        cmocka_unit_test(kernel_choice_follows_the_device),
        cmocka_unit_test(local_rank_from_the_launcher),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
