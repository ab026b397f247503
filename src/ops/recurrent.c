/* recurrent.c: the recurrent layers' shared part (recurrent.h): attributes,
 * shapes, parameters, and the reference forward and backward through time
 * over layers and directions, which call a kind's cell for each step.
 *
 * Per sample, a sequence is stored [C][T] (core/shape.h).  Layer l's output
 * Y_l [D H][T] (D directions) is the next layer's input: the last layer's is
 * the output tensor, the others' are saved, and so are each step's cell
 * values (recurrent.h's ext), so backward recomputes nothing:
 *   saved = Y_0 .. Y_{L-2} ([N][D H][T] each), then
 *           ext [L][D][N][T][extra H].
 * With dropout in training, layer l > 0 reads a copy of Y_{l-1} with the
 * dropped outputs zeroed and the others scaled, [N][D H][T] after ext, and
 * its input's gradient is masked by the same factors on the way down.
 * Backward (backpropagation through time), per sample, from the last layer
 * down and from each direction's last step back: dh_t = dY[t] + the next
 * step's W_hh^T dah + dhp; weight gradients dW_ih += dax x_t^T, dW_hh +=
 * dah h_{t-1}^T, db_ih += dax, db_hh += dah; dx_t = W_ih^T dax, the gradient
 * of the layer below's output.  Samples run in parallel in forward; backward
 * runs them in order (their weight gradients add up in one tensor), so the
 * result does not depend on the thread count.  Sums in double. */
#include "ops/recurrent.h"

#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "ops/vec.h"

static const char *const rnn_nonlinearities[] = {"tanh", "relu", NULL};

const struct dl_attr_desc dl_rnn_attrs[] = {
    {.key = "hidden", .type = DL_ATTR_INT, .offset = offsetof(struct dl_rnn_attr, hidden), .required = 1, .min = 1,
     .max = 1 << 16, .doc = "hidden units H (PyTorch hidden_size): the output has H features a direction"},
    {.key = "layers", .type = DL_ATTR_INT, .offset = offsetof(struct dl_rnn_attr, layers), .def = 1, .min = 1,
     .max = 64, .doc = "stacked layers, each reading the one below's output (PyTorch num_layers)"},
    {.key = "bidirectional", .type = DL_ATTR_BOOL, .offset = offsetof(struct dl_rnn_attr, bidirectional), .def = 0,
     .doc = "also run each layer from the last step back; the output is [T, 2H], forward features first"},
    {.key = "bias", .type = DL_ATTR_BOOL, .offset = offsetof(struct dl_rnn_attr, bias), .def = 1,
     .doc = "learn the biases bias_ih and bias_hh"},
    {.key = "dropout", .type = DL_ATTR_FLOAT, .offset = offsetof(struct dl_rnn_attr, dropout), .def = 0, .min = 0,
     .max = 1, .doc = "in training, the probability of zeroing each output of a layer below the last, in [0, 1)"},
    {.key = "nonlinearity", .type = DL_ATTR_ENUM, .offset = offsetof(struct dl_rnn_attr, nonlinearity),
     .def = DL_RNN_TANH, .choices = rnn_nonlinearities, .doc = "tanh or relu (PyTorch nn.RNN's nonlinearity)"},
};
_Static_assert(sizeof dl_rnn_attrs / sizeof dl_rnn_attrs[0] == DL_RNN_ALL_ATTRS, "recurrent.h's count");

int dl_rnn_check(const void *attr, struct dl_error *err)
{
    const struct dl_rnn_attr *a = attr;
    if (a->dropout >= 1)
        return dl_errorf(err, DL_ERR_SPEC, "key 'dropout': expected a number in [0, 1), found %g "
                         "(1 would drop every output)", a->dropout);
    return DL_OK;
}

static int dirs(const struct dl_rnn_attr *a)
{
    return a->bidirectional ? 2 : 1;
}

int dl_rnn_infer(const void *attr, int n_in, const struct dl_shape *in, struct dl_shape *out,
                 struct dl_error *err)
{
    const struct dl_rnn_attr *a = attr;
    char buf[48];
    if (dl_shape_rank(in[0]) != 2 || in[0].dtype != DL_F32)
        return dl_errorf(err, DL_ERR_SPEC, "expected a sequence [T, C] of features, found %s",
                         dl_shape_str(in[0], buf, sizeof buf));
    *out = dl_shape_seq(in[0].h, dirs(a) * a->hidden, DL_F32);
    return DL_OK;
}

/* Layer l's input features. */
static int layer_in(const struct dl_rnn_attr *a, int C, int l)
{
    return l ? dirs(a) * a->hidden : C;
}

int dl_rnn_params(const void *attr, const struct dl_shape *in, int gates, struct dl_param_desc *p)
{
    const struct dl_rnn_attr *a = attr;
    int D = dirs(a), H = a->hidden, GH = gates * H, per = a->bias ? 4 : 2;
    if (p)
        for (int l = 0; l < a->layers; l++)
            for (int d = 0; d < D; d++) {
                struct dl_param_desc *q = p + (l * D + d) * per;
                const char *sfx = d ? "_reverse" : "";
                int I = layer_in(a, in[0].c, l);
                int dims[4][2] = {{GH, I}, {GH, H}, {GH, 0}, {GH, 0}};
                const char *names[4] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
                for (int j = 0; j < per; j++) {
                    q[j] = (struct dl_param_desc){.ndim = j < 2 ? 2 : 1, .dims = {dims[j][0], dims[j][1]},
                                                  .count = (long)dims[j][0] * (j < 2 ? dims[j][1] : 1),
                                                  .init = DL_INIT_UNIFORM_FAN_IN, .fan_in = H, .trainable = 1};
                    snprintf(q[j].name, sizeof q[j].name, "%s_l%d%s", names[j], l, sfx);
                }
            }
    return a->layers * D * per;
}

long dl_rnn_saved_size(const void *attr, int batch, const struct dl_shape *in, int extra)
{
    const struct dl_rnn_attr *a = attr;
    long T = in[0].h, DH = (long)dirs(a) * a->hidden;
    return (a->layers - 1L) * batch * DH * T * (a->dropout > 0 ? 2 : 1) + (long)a->layers * batch * DH * T * extra;
}

int dl_rnn_dropping(const struct dl_op_call *c)
{
    const struct dl_rnn_attr *a = c->attr;
    return c->training && a->dropout > 0 && a->layers > 1;
}

double dl_rnn_dropout_factor(const struct dl_op_call *c, int l, long n, long i)
{
    const struct dl_rnn_attr *a = c->attr;
    uint64_t sample = dl_rng_hash(dl_rng_hash(c->key, (uint64_t)l), (uint64_t)(c->sample0 + n));
    return dl_rng_hash_uniform(sample, (uint64_t)i) >= a->dropout ? 1 / (1 - a->dropout) : 0;
}

double dl_rnn_flops(const void *attr, const struct dl_shape *in, int gates)
{
    const struct dl_rnn_attr *a = attr;
    double f = 0, GH = (double)gates * a->hidden;
    for (int l = 0; l < a->layers; l++)
        f += dirs(a) * 2.0 * GH * (layer_in(a, in[0].c, l) + a->hidden);
    return f * in[0].h;
}

/* Where one call's tensors are: dimensions, and the arrays of layer l. */
struct rnn_view {
    const struct dl_rnn_attr *a;
    const struct dl_rnn_cell *cell;
    long N, T, C, H, D, G;
    int per; /* parameters a layer and direction */
};

static struct rnn_view view_of(const struct dl_op_call *c, const struct dl_rnn_cell *cell)
{
    const struct dl_rnn_attr *a = c->attr;
    return (struct rnn_view){.a = a, .cell = cell, .N = c->batch, .T = c->in[0].shape.h, .C = c->in[0].shape.c,
                             .H = a->hidden, .D = dirs(a), .G = cell->gates, .per = a->bias ? 4 : 2};
}

/* Layer l's output, [N][D H][T]: saved, or the output tensor for the last. */
static dl_real *layer_out(const struct dl_op_call *c, const struct rnn_view *v, int l)
{
    if (l == v->a->layers - 1)
        return dl_tensor_f32(&c->out);
    return c->saved + (long)l * v->N * v->D * v->H * v->T;
}

/* Layer l > 0's input in training with dropout, [N][D H][T]: after the
 * outputs and the cell values in saved. */
static dl_real *dropped(const struct dl_op_call *c, const struct rnn_view *v, int l)
{
    long DHT = v->D * v->H * v->T, L = v->a->layers;
    return c->saved + (L - 1) * v->N * DHT + L * v->N * DHT * v->cell->extra + (l - 1) * v->N * DHT;
}

/* Layer l's input, [N][I][T]. */
static const dl_real *layer_input(const struct dl_op_call *c, const struct rnn_view *v, int l)
{
    return !l ? dl_tensor_const_f32(&c->in[0]) : dl_rnn_dropping(c) ? dropped(c, v, l) : layer_out(c, v, l - 1);
}

/* The saved cell values of layer l, direction d, sample n, step t. */
static dl_real *ext_at(const struct dl_op_call *c, const struct rnn_view *v, int l, int d, long n, long t)
{
    long base = (v->a->layers - 1L) * v->N * v->D * v->H * v->T;
    return c->saved + base + ((((long)l * v->D + d) * v->N + n) * v->T + t) * v->cell->extra * v->H;
}

/* The step of direction d that comes s steps after its first, and the one
 * before it. */
static long step_t(const struct rnn_view *v, int d, long s)
{
    return d ? v->T - 1 - s : s;
}

static long prev_t(int d, long t)
{
    return d ? t + 1 : t - 1;
}

/* x[k] = X[k][t] for k < n (a [n][T] array). */
static void gather(dl_real *x, const dl_real *X, long n, long T, long t)
{
    for (long k = 0; k < n; k++)
        x[k] = X[k * T + t];
}

/* y[g] = b[g] + W[g] . x for g < GH (W [GH][n]). */
static void affine(double *y, const dl_real *W, const dl_real *b, const dl_real *x, long GH, long n)
{
    for (long g = 0; g < GH; g++)
        y[g] = (b ? (double)b[g] : 0) + dl_vec_dot(W + g * n, x, n);
}

static void forward_sample(const struct dl_op_call *c, const struct rnn_view *v, long n, dl_real *x, dl_real *hp,
                           double *ax, double *ah, double *h)
{
    for (int l = 0; l < v->a->layers; l++) {
        long I = layer_in(v->a, (int)v->C, l);
        if (l && dl_rnn_dropping(c)) {
            const dl_real *y = layer_out(c, v, l - 1) + n * I * v->T;
            dl_real *p = dropped(c, v, l) + n * I * v->T;
            for (long i = 0; i < I * v->T; i++)
                p[i] = (dl_real)((double)y[i] * dl_rnn_dropout_factor(c, l, n, i));
        }
        const dl_real *X = layer_input(c, v, l) + n * I * v->T;
        for (int d = 0; d < v->D; d++) {
            dl_real *const *p = c->param + (l * v->D + d) * v->per;
            dl_real *Y = layer_out(c, v, l) + (n * v->D + d) * v->H * v->T;
            for (long s = 0; s < v->T; s++) {
                long t = step_t(v, d, s), tp = prev_t(d, t);
                gather(x, X, I, v->T, t);
                if (s)
                    gather(hp, Y, v->H, v->T, tp);
                else
                    memset(hp, 0, sizeof *hp * (size_t)v->H);
                affine(ax, p[0], v->a->bias ? p[2] : NULL, x, v->G * v->H, I);
                affine(ah, p[1], v->a->bias ? p[3] : NULL, hp, v->G * v->H, v->H);
                v->cell->forward(v->a, (int)v->H, ax, ah, hp, s ? ext_at(c, v, l, d, n, tp) : NULL,
                                 ext_at(c, v, l, d, n, t), h);
                for (long j = 0; j < v->H; j++)
                    Y[j * v->T + t] = (dl_real)h[j];
            }
        }
    }
}

/* Scratch of a forward or backward: x[I], hp[H], h[H] in dl_real; ax, ah
 * [G H], dh, carry, dhp [H], dx [I] in double. */
struct rnn_scratch {
    dl_real *x, *hp, *h;
    double *ax, *ah, *dh, *carry, *dhp, *dx;
};

static void *scratch_new(const struct rnn_view *v, struct rnn_scratch *s)
{
    long I = v->C > v->D * v->H ? v->C : v->D * v->H, GH = v->G * v->H;
    size_t reals = (size_t)(I + 2 * v->H), doubles = (size_t)(2 * GH + 3 * v->H + I);
    double *mem = malloc(sizeof(double) * doubles + sizeof(dl_real) * reals);
    if (!mem)
        return NULL;
    s->ax = mem, s->ah = s->ax + GH, s->dh = s->ah + GH, s->carry = s->dh + v->H, s->dhp = s->carry + v->H;
    s->dx = s->dhp + v->H;
    s->x = (dl_real *)(s->dx + I), s->hp = s->x + I, s->h = s->hp + v->H;
    return mem;
}

void dl_rnn_forward(const struct dl_op_call *c, const struct dl_rnn_cell *cell)
{
    struct rnn_view v = view_of(c, cell);
    #pragma omp parallel
    {
        struct rnn_scratch s;
        void *mem = scratch_new(&v, &s);
        double *h = mem ? malloc(sizeof *h * (size_t)v.H) : NULL;
        #pragma omp for schedule(static)
        for (long n = 0; n < v.N; n++)
            if (h)
                forward_sample(c, &v, n, s.x, s.hp, s.ax, s.ah, h);
        free(h);
        free(mem);
    }
}

/* dW[g] += a[g] x for g < GH (W [GH][n]); db += a. */
static void outer_add(dl_real *dW, dl_real *db, const double *a, const dl_real *x, long GH, long n)
{
    for (long g = 0; g < GH; g++) {
        if (dW)
            dl_vec_axpy(dW + g * n, (dl_real)a[g], x, n);
        if (db)
            db[g] += (dl_real)a[g];
    }
}

/* y[k] += sum_g W[g][k] a[g] for k < n. */
static void transpose_add(double *y, const dl_real *W, const double *a, long GH, long n)
{
    for (long g = 0; g < GH; g++)
        for (long k = 0; k < n; k++)
            y[k] += (double)W[g * n + k] * a[g];
}

/* Direction d of layer l of sample n: adds the weights' gradients, and the
 * input's into dX ([I][T], when not NULL), from dY ([D H][T], this
 * direction's H rows read). */
static void backward_direction(const struct dl_op_call *c, const struct rnn_view *v, struct rnn_scratch *s,
                               int l, int d, long n, const dl_real *dY, dl_real *dX)
{
    long I = layer_in(v->a, (int)v->C, l), H = v->H, T = v->T, GH = v->G * H;
    const dl_real *X = layer_input(c, v, l) + n * I * T;
    const dl_real *Y = layer_out(c, v, l) + (n * v->D + d) * H * T;
    dl_real *const *p = c->param + (l * v->D + d) * v->per;
    dl_real *const *dp = c->dparam + (l * v->D + d) * v->per;
    double *next = malloc(sizeof *next * (size_t)H); /* h_t's gradient through the next step's W_hh */
    if (!next)
        return;
    memset(next, 0, sizeof *next * (size_t)H);
    memset(s->carry, 0, sizeof *s->carry * (size_t)H);
    dY += d * H * T;
    for (long s_ = T - 1; s_ >= 0; s_--) {
        long t = step_t(v, d, s_), tp = prev_t(d, t);
        for (long j = 0; j < H; j++)
            s->dh[j] = (double)dY[j * T + t] + next[j];
        gather(s->x, X, I, T, t);
        gather(s->h, Y, H, T, t);
        if (s_)
            gather(s->hp, Y, H, T, tp);
        else
            memset(s->hp, 0, sizeof *s->hp * (size_t)H);
        v->cell->backward(v->a, (int)H, s->dh, s->carry, s->hp, s->h, s_ ? ext_at(c, v, l, d, n, tp) : NULL,
                          ext_at(c, v, l, d, n, t), s->ax, s->ah, s->dhp);
        outer_add(dp[0], v->a->bias ? dp[2] : NULL, s->ax, s->x, GH, I);
        outer_add(dp[1], v->a->bias ? dp[3] : NULL, s->ah, s->hp, GH, H);
        if (dX) {
            memset(s->dx, 0, sizeof *s->dx * (size_t)I);
            transpose_add(s->dx, p[0], s->ax, GH, I);
            for (long k = 0; k < I; k++)
                dX[k * T + t] += (dl_real)s->dx[k];
        }
        memcpy(next, s->dhp, sizeof *next * (size_t)H);
        transpose_add(next, p[1], s->ah, GH, H);
    }
    free(next);
}

void dl_rnn_backward(const struct dl_op_call *c, const struct dl_rnn_cell *cell)
{
    struct rnn_view v = view_of(c, cell);
    long T = v.T, DH = v.D * v.H, L = v.a->layers;
    struct rnn_scratch s;
    void *mem = scratch_new(&v, &s);
    /* the gradients of the output of the layer being done and of the one below it */
    dl_real *grads = malloc(sizeof *grads * (size_t)(2 * DH * T));
    if (mem && grads)
        for (long n = 0; n < v.N; n++) {
            const dl_real *dY = dl_tensor_const_f32(&c->dout) + n * DH * T;
            dl_real *bufs[2] = {grads, grads + DH * T};
            for (long l = L - 1; l >= 0; l--) {
                dl_real *dX = l ? bufs[l % 2]
                              : c->din[0].data ? dl_tensor_f32(&c->din[0]) + n * v.C * T : NULL;
                if (dX)
                    memset(dX, 0, sizeof *dX * (size_t)(layer_in(v.a, (int)v.C, (int)l) * T));
                for (int d = 0; d < v.D; d++)
                    backward_direction(c, &v, &s, (int)l, d, n, dY, dX);
                for (long i = 0; l && dl_rnn_dropping(c) && i < DH * T; i++)
                    dX[i] = (dl_real)((double)dX[i] * dl_rnn_dropout_factor(c, (int)l, n, i));
                dY = dX;
            }
        }
    free(grads);
    free(mem);
}
