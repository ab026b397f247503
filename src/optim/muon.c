/* muon.c: Muon (K. Jordan et al. 2024, as torch.optim.Muon): a hidden
 * layer's weight matrix (struct dl_optim_span's rows > 0) takes momentum
 * orthogonalised by Newton-Schulz iterations, every other parameter tensor
 * (biases, norms, embeddings, the output layer) AdamW's step:
 *   b = mu b + (1 - mu) g;  u = g + mu (b - g) (Nesterov) or b
 *   X = u / ||u||_F  (transposed when it has more rows than columns)
 *   5 times: A = X X^T;  X = a X + (b A + c A A) X   (a, b, c = 3.4445, -4.7750, 2.0315)
 *   w *= 1 - lr wd;  w -= lr sqrt(max(1, rows / cols)) X
 * The products are single-precision GEMMs on oneDNN's sgemm (PyTorch runs
 * them in bf16).  A tensor no_decay leaves out (adapt 0) is not decayed.
 * State: the momentum buffer (slot 0) of a matrix, AdamW's two moments of
 * the others. */
#include "optim/optim.h"
#include "optim/update_rules.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu_blas/gemm.h"

#define NS_STEPS 5
static const double ns_a = 3.4445, ns_b = -4.7750, ns_c = 2.0315, ns_eps = 1e-7;

/* x (r x c, r <= c) orthogonalised in place; work: 2 r r + r c values. */
static void newton_schulz(float *x, long r, long c, float *work)
{
    float *a = work, *b = a + r * r, *y = b + r * r;
    double sq = 0;
    for (long i = 0; i < r * c; i++)
        sq += (double)x[i] * x[i];
    double norm = sqrt(sq) > ns_eps ? sqrt(sq) : ns_eps;
    for (long i = 0; i < r * c; i++)
        x[i] = (float)(x[i] / norm);
    for (int k = 0; k < NS_STEPS; k++) {
        dl_sgemm(DL_GEMM_DNNL, 0, 1, r, r, c, 1, x, c, x, c, 0, a, r);                   /* A = X X^T */
        memcpy(b, a, sizeof *b * (size_t)(r * r));
        dl_sgemm(DL_GEMM_DNNL, 0, 0, r, r, r, (float)ns_c, a, r, a, r, (float)ns_b, b, r); /* b A + c A A */
        memcpy(y, x, sizeof *y * (size_t)(r * c));
        dl_sgemm(DL_GEMM_DNNL, 0, 0, r, c, r, 1, b, r, x, c, (float)ns_a, y, c);          /* a X + B X */
        memcpy(x, y, sizeof *x * (size_t)(r * c));
    }
}

static int matrix_step(const struct dl_optim_spec *s, double lr, dl_real *w, const dl_real *g, dl_real *buf, long n,
                       long rows, int adapt)
{
    long cols = n / rows, r = rows < cols ? rows : cols, c = rows < cols ? cols : rows;
    float *x = malloc(sizeof *x * (size_t)(n + 2 * r * r + r * c));
    if (!x)
        return DL_ERR_NOMEM;
    const double mu = s->momentum;
    for (long i = 0; i < n; i++) {
        buf[i] = (dl_real)(buf[i] + (1 - mu) * (g[i] - buf[i]));
        float u = s->nesterov ? (float)(g[i] + mu * (buf[i] - g[i])) : buf[i];
        long row = i / cols, col = i % cols;
        x[rows <= cols ? i : col * rows + row] = u; /* r x c: transposed when taller than wide */
    }
    newton_schulz(x, r, c, x + n);
    const double scale = lr * sqrt(rows > cols ? (double)rows / (double)cols : 1.0);
    const double shrink = adapt ? 1 - lr * s->weight_decay : 1;
    for (long i = 0; i < n; i++) {
        long row = i / cols, col = i % cols;
        w[i] = (dl_real)(w[i] * shrink - scale * x[rows <= cols ? i : col * rows + row]);
    }
    free(x);
    return DL_OK;
}

static int muon_step(const struct dl_optim_spec *s, double lr, long t, dl_real *restrict w,
                     const dl_real *restrict g, dl_real *restrict state, long n, long stride, int adapt, long rows)
{
    if (rows > 1 && n / rows > 1 && n % rows == 0)
        return matrix_step(s, lr, w, g, state, n, rows, adapt);
    dl_real *m = state, *v = state + stride; /* AdamW's */
    double c1, c2, shrink;
    struct dl_optim_spec plain = *s;
    if (!adapt)
        plain.weight_decay = 0;
    dl_optim_adam_corrections(&plain, lr, t, &c1, &c2, &shrink);
    for (long i = 0; i < n; i++)
        dl_rule_adam(&w[i], g[i], &m[i], &v[i], 1, s->beta1, s->beta2, c1, c2, plain.weight_decay, shrink, s->eps, lr);
    return DL_OK;
}

const struct dl_optim_algo dl_optim_muon = {.name = "muon", .state_vectors = 2, .tensor_step = muon_step,
                                            .kind = DL_OPTIM_MUON};
