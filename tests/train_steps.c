/* train_steps.c: see train_steps.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "train_steps.h"

void train_steps(struct dl_exec *e, int classes, int batch, int steps, double *loss, float **weights, long *n)
{
    long count = (long)batch * dl_shape_count(e->g->input);
    float *x = malloc(sizeof *x * (size_t)count);
    int *y = malloc(sizeof *y * (size_t)batch);
    assert_non_null(x);
    assert_non_null(y);
    struct dl_rng r;
    dl_rng_seed(&r, 9);
    for (int s = 0; s < steps; s++) {
        int b = s == steps - 1 ? batch - 3 : batch;
        for (long i = 0; i < count; i++)
            x[i] = (float)dl_rng_normal(&r);
        for (int k = 0; k < batch; k++)
            y[k] = (int)dl_rng_below(&r, (uint64_t)classes);
        dl_exec_zero_grad(e);
        dl_exec_forward(e, x, y, b, 1);
        loss[s] = dl_exec_loss_sum(e) / b;
        dl_exec_backward(e);
        assert_int_equal(e->status, 0);
        for (long i = 0; i < e->n_weights; i++)
            e->weights[i] -= 0.05f * e->dweights[i];
    }
    *n = e->n_weights;
    *weights = malloc(sizeof **weights * (size_t)e->n_weights);
    assert_non_null(*weights);
    memcpy(*weights, e->weights, sizeof **weights * (size_t)e->n_weights);
    free(x);
    free(y);
}
