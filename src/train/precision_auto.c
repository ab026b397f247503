/* precision_auto.c: a network's step timed in fp32 and in bf16 on this
 * machine, for train.precision auto and the slow-bf16 warning
 * (precision_auto.h). */
#include "train/precision_auto.h"

#include <stdio.h>
#include <stdlib.h>

#include "backends/kernel.h"
#include "core/clock.h"
#include "graph/random_batch.h"

#define PROBE_STEPS 5      /* at least */
#define PROBE_MAX_STEPS 25 /* at most, while a precision's steps add up to less than */
#define PROBE_ENOUGH_MS 50
#define PROBE_MAX_BATCH 16
/* A bf16 warm-up step this many times fp32's is not run again (the
 * reference bf16 code on a CPU without AVX-512 can take minutes for a large
 * network): it stands for bf16's time. */
#define PROBE_GIVE_UP 10

/* An executor of g computing in `precision` (base's other options). */
static int init_exec(struct dl_exec *e, const struct dl_graph *g, int batch, const struct dl_exec_options *base,
                     enum dl_dtype precision, struct dl_error *err)
{
    struct dl_kernel_choices kernels = {0};
    struct dl_exec_options o = {0};
    if (base)
        o = *base;
    if (o.kernels)
        kernels = *o.kernels;
    kernels.precision = precision;
    o.kernels = &kernels;
    o.trace = NULL;
    return dl_exec_init(e, g, batch, 1, &o, err);
}

/* Milliseconds of one step of e (zero grad, forward, backward) on x, y. */
static double step_ms(struct dl_exec *e, int batch, const void *x, const int *y)
{
    double t0 = dl_clock_now();
    dl_exec_zero_grad(e);
    dl_exec_forward(e, x, y, batch, 1);
    dl_exec_backward(e);
    return 1e3 * (dl_clock_now() - t0);
}

/* The fastest of each precision's steps, taken in turns after a warm-up
 * step of each, so that neither gets the machine's quieter moments: the
 * least disturbed by other processes (precision_auto.h). */
static int time_both(const struct dl_graph *g, int batch, const struct dl_exec_options *base, const void *x,
                     const int *y, double *f32_ms, double *bf16_ms, struct dl_error *err)
{
    struct dl_exec e[2];
    int rc = init_exec(&e[0], g, batch, base, DL_F32, err);
    if (rc)
        return rc;
    if ((rc = init_exec(&e[1], g, batch, base, DL_BF16, err)) != 0) {
        dl_exec_free(&e[0]);
        return rc;
    }
    double best[2] = {0, 0}, spent[2] = {0, 0}, warm[2] = {step_ms(&e[0], batch, x, y), step_ms(&e[1], batch, x, y)};
    int bf16_alone = warm[1] > PROBE_GIVE_UP * warm[0];
    for (int s = 0; s < PROBE_MAX_STEPS && (s < PROBE_STEPS || spent[0] < PROBE_ENOUGH_MS); s++)
        for (int k = 0; k < 2 - bf16_alone; k++) {
            double ms = step_ms(&e[k], batch, x, y);
            best[k] = s == 0 || ms < best[k] ? ms : best[k];
            spent[k] += ms;
        }
    *f32_ms = best[0];
    *bf16_ms = bf16_alone ? warm[1] : best[1];
    dl_exec_free(&e[0]);
    dl_exec_free(&e[1]);
    return DL_OK;
}

int dl_precision_probe(const struct dl_graph *g, int batch, const struct dl_exec_options *base,
                       struct dl_comm *comm, struct dl_precision_probe *p, struct dl_error *err)
{
    /* rc travels with the figures, so that a rank 0 that failed fails them all */
    struct {
        double f32_ms, bf16_ms;
        int batch, native, rc;
        char msg[sizeof err->msg];
    } m = {0, 0, batch < 1 ? 1 : batch > PROBE_MAX_BATCH ? PROBE_MAX_BATCH : batch, dl_kernel_bf16_native(), DL_OK, ""};
    if (!comm || comm->rank == 0) {
        void *x = NULL;
        int *y = NULL;
        struct dl_error mine = {0};
        m.rc = dl_graph_random_batch(g, m.batch, &x, &y, &mine);
        if (!m.rc)
            m.rc = time_both(g, m.batch, base, x, y, &m.f32_ms, &m.bf16_ms, &mine);
        free(x), free(y);
        snprintf(m.msg, sizeof m.msg, "%s", mine.msg);
    }
    int rc = comm && comm->size > 1 ? comm->ops->bcast(comm, &m, sizeof m, 0, err) : DL_OK;
    if (rc)
        return rc;
    if (m.rc)
        return dl_errorf(err, m.rc, "timing a step in fp32 and bf16: %s", m.msg);
    *p = (struct dl_precision_probe){m.f32_ms, m.bf16_ms, m.batch, m.native};
    return DL_OK;
}

enum dl_dtype dl_precision_faster(const struct dl_precision_probe *p)
{
    return p->bf16_ms < p->f32_ms ? DL_BF16 : DL_F32;
}

int dl_precision_slow(const struct dl_precision_probe *p)
{
    return !p->native && p->bf16_ms > p->f32_ms;
}

int dl_precision_resolve(int precision, const struct dl_graph *g, int batch, const struct dl_exec_options *base,
                         struct dl_comm *comm, enum dl_dtype *out, struct dl_precision_probe *p, struct dl_error *err)
{
    *p = (struct dl_precision_probe){0};
    *out = precision == DL_PRECISION_AUTO ? DL_F32 : (enum dl_dtype)precision;
    int probe = precision == DL_PRECISION_AUTO || (precision == DL_BF16 && !dl_kernel_bf16_native());
    int rc = probe ? dl_precision_probe(g, batch, base, comm, p, err) : DL_OK;
    if (!rc && precision == DL_PRECISION_AUTO)
        *out = dl_precision_faster(p);
    return rc;
}

void dl_precision_describe(const struct dl_precision_probe *p, int was_auto, char *buf, size_t size)
{
    const char *cpu = p->native ? "native bf16" : "no native bf16 (AVX512-BF16 or AMX)";
    if (was_auto)
        snprintf(buf, size, "precision auto: %s (a step of %d samples took %.2f ms in bf16, %.2f ms in fp32 on this "
                 "machine: %s)", dl_dtype_table[dl_precision_faster(p)].precision, p->batch, p->bf16_ms, p->f32_ms, cpu);
    else
        snprintf(buf, size, "--precision bf16 on a CPU with %s: a step of %d samples took %.2f ms in bf16 "
                 "against %.2f ms in fp32 on this machine, %.1fx slower; --precision auto picks the faster",
                 cpu, p->batch, p->bf16_ms, p->f32_ms, p->f32_ms > 0 ? p->bf16_ms / p->f32_ms : 0);
}
