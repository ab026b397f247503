/* torch_step.c: dltrain's side of the PyTorch cross-check (test_torch.sh).
 *   torch_step init NET CKPT
 *       writes NET's initial weights and running statistics as a checkpoint
 *   torch_step step NET CKPT BATCH OUT [OP=KERNEL...]
 *       loads CKPT, runs one training step on BATCH (safetensors: x F32
 *       [N, C, H, W], y I32 [N]; for token ids, x I32 [N, T] and y I32
 *       [N, T], a label per position) with the given kernel choices (as --kernel;
 *       "no-fusion" as --no-fusion, "precision=bf16" as --precision bf16), then
 *       one evaluation forward, and writes
 *       OUT (safetensors): grad.<layer>.<param> for every trainable parameter,
 *       <layer>.<param> for every running statistic after the step, the
 *       training loss, the evaluation logits and loss, and the training
 *       forward's discrete decisions in graph order: dropout.<layer> and
 *       relu.<layer> (outputs: nonzero where kept), maxpool_input.<layer>
 *       (the values max pooling <layer> chose its winners from).  A network
 *       file with data.document_mask runs with document masking (the
 *       batch's labels after a separator are the loss's ignored ones).
 *   torch_step steps NET CKPT BATCH OUT STEPS
 *       loads CKPT, takes STEPS optimizer steps on the whole of BATCH each
 *       with NET's train.optimizer at its constant lr (its no_decay runs and,
 *       for lars and lamb, its parameter tensors given as the trainer gives
 *       them: train/no_decay.h, train/param_spans.h), and writes OUT: every
 *       trainable parameter's weights as <layer>.<param>, and the steps'
 *       losses as loss (F64 [STEPS]).
 * One thread unless DL_TORCH_THREADS says otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/layout.h"
#include "core/threads.h"
#include "io/safetensors.h"
#include "spec/netfile.h"
#include "train/checkpoint.h"
#include "train/no_decay.h"
#include "train/param_spans.h"

#define MAX_OUT 512

static int die(const char *what, const struct dl_error *err)
{
    fprintf(stderr, "torch_step: %s: %s\n", what, err->msg);
    return 1;
}

/* The tensors of OUT: names and data live until the file is written. */
struct out {
    struct dl_st_tensor t[MAX_OUT];
    char name[MAX_OUT][128];
    int n;
};

static void out_add(struct out *o, const char *prefix, const char *name, enum dl_st_dtype dt, const void *data,
                    int ndim, const int64_t *shape)
{
    if (o->n == MAX_OUT) {
        fprintf(stderr, "torch_step: more than %d tensors\n", MAX_OUT);
        exit(1);
    }
    struct dl_st_tensor *t = &o->t[o->n];
    snprintf(o->name[o->n], sizeof o->name[o->n], "%s%s", prefix, name);
    t->name = o->name[o->n++];
    t->dtype = dt;
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->data = data;
}

/* Every parameter of the graph: trainable ones' gradients as grad.<layer>.<param>,
 * state (running statistics and counters) as <layer>.<param>; or, weights
 * set, the trainable ones' weights as <layer>.<param> alone. */
static void add_params(struct out *o, const struct dl_exec *e, int weights)
{
    for (int i = 0; i < e->g->n; i++) {
        const struct dl_layer *l = &e->g->layers[i];
        for (int j = 0; j < l->n_params; j++) {
            const struct dl_param_desc *p = &l->param[j];
            if (p->shares || (weights && !p->trainable)) /* tied: its gradient is summed in the owner's */
                continue;
            char name[128];
            int64_t shape[4];
            snprintf(name, sizeof name, "%s.%s", l->name, p->name);
            for (int d = 0; d < p->ndim; d++)
                shape[d] = p->dims[d];
            if (weights)
                out_add(o, "", name, DL_ST_F32, e->param[i][j], p->ndim, shape);
            else if (p->trainable)
                out_add(o, "grad.", name, DL_ST_F32, e->dparam[i][j], p->ndim, shape);
            else /* running statistics, and counters (batch norm's num_batches_tracked, i64) */
                out_add(o, "", name, p->dtype == DL_I64 ? DL_ST_I64 : DL_ST_F32, e->param[i][j], p->ndim, shape);
        }
    }
}

/* Layer i's output in f32, plain layout (NCHW), into a new buffer. */
static float *plain_output(const struct dl_exec *e, int i)
{
    const struct dl_layer *l = &e->g->layers[i];
    long n = (long)e->run.batch * dl_layout_count(DL_LAYOUT_PLAIN, l->out_shape);
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) {
        fprintf(stderr, "torch_step: out of memory\n");
        exit(1);
    }
    const struct dl_tensor *a = &e->act[i];
    if (a->shape.dtype != DL_F32) { /* a bf16 output: to plain layout, then widened */
        void *b = malloc((size_t)n * dl_dtype_size(a->shape.dtype));
        if (!b) {
            fprintf(stderr, "torch_step: out of memory\n");
            exit(1);
        }
        dl_layout_reorder_dtype(a->data, a->layout, b, DL_LAYOUT_PLAIN, e->run.batch, l->out_shape, 0,
                                a->shape.dtype);
        dl_cast(b, a->shape.dtype, v, DL_F32, n, NULL);
        free(b);
    } else
        dl_layout_reorder(dl_tensor_const_f32(a), a->layout, v, DL_LAYOUT_PLAIN, e->run.batch, l->out_shape, 0);
    return v;
}

/* A copy of layer i's output (NCHW) as a tensor of OUT named prefix + name. */
static float *add_output(struct out *o, const struct dl_exec *e, int i, const char *prefix, const char *name)
{
    const struct dl_layer *l = &e->g->layers[i];
    float *v = plain_output(e, i);
    int64_t shape[4] = {e->run.batch, l->out_shape.c, l->out_shape.h, l->out_shape.w};
    out_add(o, prefix, name, DL_ST_F32, v, 4, shape);
    return v;
}

/* BATCH's x and y (see the usage), copied out of the mapped file for
 * alignment's sake (x: values of the input's dtype, f32 or int32_t token
 * ids) into *xs and *ys (malloc'd), *n samples; 0, or 1 said. */
static int read_batch(const struct dl_net *net, const char *batch_path, void **xs, int **ys, int *n)
{
    struct dl_error err = {0};
    struct dl_st_file bf;
    if (dl_st_open(batch_path, &bf, &err))
        return die(batch_path, &err);
    const struct dl_st_entry *x = dl_st_find(&bf, "x"), *y = dl_st_find(&bf, "y");
    const struct dl_shape in = net->graph.input;
    int P = net->graph.positions, rc = 0;
    if (in.dtype == DL_I32) { /* token ids [N, T], a label per position [N, T] */
        if (!x || !y || x->dtype != DL_ST_I32 || y->dtype != DL_ST_I32 || x->ndim != 2 || y->ndim != 2 ||
            x->shape[0] != y->shape[0] || x->shape[1] != in.h || y->shape[1] != P) {
            fprintf(stderr, "torch_step: %s: want x I32 [N, %d] and y I32 [N, %d]\n", batch_path, in.h, P);
            rc = 1;
        }
    } else if (!x || !y || x->dtype != DL_ST_F32 || y->dtype != DL_ST_I32 || x->ndim != 4 || y->ndim != 1 ||
               x->shape[0] != y->shape[0] || x->shape[1] != in.c || x->shape[2] != in.h || x->shape[3] != in.w) {
        fprintf(stderr, "torch_step: %s: want x F32 [N, %d, %d, %d] and y I32 [N]\n", batch_path, in.c, in.h, in.w);
        rc = 1;
    }
    if (!rc) {
        size_t xbytes = x->count * dl_dtype_value_size(in.dtype);
        *n = (int)x->shape[0];
        *xs = malloc(xbytes);
        *ys = malloc(y->count * sizeof **ys);
        rc = !*xs || !*ys;
        if (!rc) {
            memcpy(*xs, x->data, xbytes);
            memcpy(*ys, y->data, y->count * sizeof **ys);
        }
    }
    dl_st_close(&bf);
    return rc;
}

/* An executor e of net for n samples with CKPT's weights; 0, or 1 said. */
static int load_exec(struct dl_net *net, const char *ckpt, int n, const struct dl_exec_options *eo, struct dl_exec *e)
{
    struct dl_error err = {0};
    struct dl_checkpoint_meta m;
    struct dl_run_view v = {&net->graph, e, NULL};
    if (dl_exec_init(e, &net->graph, n, net->train.seed, eo, &err))
        return die("executor", &err);
    if (dl_checkpoint_load(ckpt, &v, &m, &err)) {
        dl_exec_free(e);
        return die(ckpt, &err);
    }
    return 0;
}

static int step(struct dl_net *net, const char *ckpt, const char *batch_path, const char *out_path, int nk,
                char **kernels)
{
    struct dl_error err = {0};
    struct dl_kernel_choices ch = {0};
    for (int k = 0; k < nk; k++) {
        if (!strcmp(kernels[k], "no-fusion"))
            ch.no_fusion = 1;
        else if (!strcmp(kernels[k], "precision=bf16"))
            ch.precision = DL_BF16;
        else if (dl_kernel_choice_add(&ch, kernels[k], &err))
            return die(kernels[k], &err);
    }
    void *xs;
    int *ys, n;
    if (read_batch(net, batch_path, &xs, &ys, &n))
        return 1;
    struct dl_exec e;
    struct dl_exec_options eo = {.kernels = &ch, .keep_outputs = 1}; /* it reads every output after forward */
    eo.doc_mask = net->data.document_mask >= 0; /* the network file's data.document_mask (labels: the batch's) */
    eo.doc_separator = net->data.document_mask;
    if (load_exec(net, ckpt, n, &eo, &e))
        return 1;

    dl_exec_zero_grad(&e);
    dl_exec_forward(&e, xs, ys, n, 1);
    static struct out o;
    float *kept[MAX_OUT] = {0};
    int n_kept = 0;
    /* The training forward's decisions: dropout masks and ReLU masks (the
     * layers' outputs; a ReLU moved into the pooling after it shows its
     * input, which is positive where the output is), and what each max
     * pooling chose from (its input). */
    for (int i = 0; i < net->graph.n && n_kept + 1 < MAX_OUT; i++) {
        const struct dl_layer *l = &net->graph.layers[i];
        if (!strcmp(l->kind->name, "dropout"))
            kept[n_kept++] = add_output(&o, &e, i, "dropout.", l->name);
        else if (!strcmp(l->kind->name, "relu"))
            kept[n_kept++] = add_output(&o, &e, i, "relu.", l->name);
        else if (!strcmp(l->kind->name, "maxpool") && l->in[0] != DL_GRAPH_INPUT)
            kept[n_kept++] = add_output(&o, &e, l->in[0], "maxpool_input.", l->name);
    }
    dl_exec_backward(&e);
    double train_loss = dl_exec_loss_sum(&e) / n;

    dl_exec_forward(&e, xs, ys, n, 0);
    double eval_loss = dl_exec_loss_sum(&e) / n;
    const struct dl_layer *lg = &net->graph.layers[net->graph.logits];
    long classes = dl_layout_count(DL_LAYOUT_PLAIN, lg->out_shape);
    float *logits = plain_output(&e, net->graph.logits);

    add_params(&o, &e, 0);
    int64_t one = 1, lshape[2] = {n, classes};
    out_add(&o, "", "train.loss", DL_ST_F64, &train_loss, 1, &one);
    out_add(&o, "", "eval.loss", DL_ST_F64, &eval_loss, 1, &one);
    out_add(&o, "", "eval.logits", DL_ST_F32, logits, 2, lshape);
    int rc = dl_st_write(out_path, o.t, o.n, NULL, 0, &err);
    free(logits);
    for (int k = 0; k < n_kept; k++)
        free(kept[k]);
    free(xs);
    free(ys);
    dl_exec_free(&e);
    return rc ? die(out_path, &err) : 0;
}

static int steps(struct dl_net *net, const char *ckpt, const char *batch_path, const char *out_path, int count)
{
    struct dl_error err = {0};
    void *xs;
    int *ys, n;
    if (count < 1 || count > 100000 || read_batch(net, batch_path, &xs, &ys, &n))
        return 1;
    struct dl_exec e;
    if (load_exec(net, ckpt, n, NULL, &e))
        return 1;
    const struct dl_optim_spec *spec = &net->train.optim;
    struct dl_exec *one = &e;
    struct dl_optim o;
    if (dl_optim_init(&o, spec, e.n_weights, &err) ||
        dl_no_decay_apply(&one, 1, e.weights, spec->no_decay, &o, NULL, &err) ||
        dl_param_spans_apply(&one, 1, e.weights, &o, NULL, &err))
        return die("optimizer", &err);
    double *loss = malloc(sizeof *loss * (size_t)count);
    if (!loss)
        return 1;
    for (int t = 0; t < count; t++) {
        dl_exec_zero_grad(&e);
        dl_exec_forward(&e, xs, ys, n, 1);
        dl_exec_backward(&e);
        loss[t] = dl_exec_loss_sum(&e) / n;
        dl_optim_step(&o, spec->lr, e.weights, e.dweights);
    }
    static struct out out;
    add_params(&out, &e, 1);
    int64_t shape = count;
    out_add(&out, "", "loss", DL_ST_F64, loss, 1, &shape);
    int rc = dl_st_write(out_path, out.t, out.n, NULL, 0, &err);
    free(loss);
    free(xs);
    free(ys);
    dl_optim_free(&o);
    dl_exec_free(&e);
    return rc ? die(out_path, &err) : 0;
}

int main(int argc, char **argv)
{
    if (argc < 4 || (strcmp(argv[1], "init") && strcmp(argv[1], "step") && strcmp(argv[1], "steps")) ||
        (!strcmp(argv[1], "step") && argc < 6) || (!strcmp(argv[1], "steps") && argc != 7)) {
        fprintf(stderr, "usage: torch_step init NET CKPT | step NET CKPT BATCH OUT [OP=KERNEL...] | "
                        "steps NET CKPT BATCH OUT STEPS\n");
        return 2;
    }
    const char *threads = getenv("DL_TORCH_THREADS");
    dl_threads_set(threads ? atoi(threads) : 1);
    struct dl_error err = {0};
    struct dl_net net;
    if (dl_net_load(argv[2], &net, &err))
        return die(argv[2], &err);
    int rc;
    if (!strcmp(argv[1], "init")) {
        struct dl_exec e;
        struct dl_run_view v = {&net.graph, &e, NULL};
        struct dl_checkpoint_meta m = {.seed = net.train.seed, .world_size = 1, .dp = 1, .tp = 1, .pp = 1};
        if (dl_exec_init(&e, &net.graph, 1, net.train.seed, NULL, &err)) {
            rc = die("executor", &err);
        } else {
            rc = dl_checkpoint_save(argv[3], &v, &m, &err) ? die(argv[3], &err) : 0;
            dl_exec_free(&e);
        }
    } else if (!strcmp(argv[1], "steps")) {
        rc = steps(&net, argv[3], argv[4], argv[5], atoi(argv[6]));
    } else {
        rc = step(&net, argv[3], argv[4], argv[5], argc - 6, argv + 6);
    }
    dl_net_free(&net);
    return rc;
}
