/* graph.c: resolves layer inputs by name, orders layers topologically
 * (Kahn's algorithm; a leftover layer means a cycle, reported with the path),
 * infers every output shape, describes every parameter and ties the shared
 * ones (`share:`) to the earlier layer's. */
#include "graph/graph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int loc_errorf(struct dl_error *err, const struct dl_loc *loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int loc_errorf(struct dl_error *err, const struct dl_loc *loc, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (loc && loc->file)
        return dl_errorf(err, DL_ERR_SPEC, "%s:%d:%d: %s", loc->file, loc->line, loc->col, msg);
    return dl_errorf(err, DL_ERR_SPEC, "%s", msg);
}

const char *const dl_split_names[] = {"auto", "none", "column", "row", "filters", "channels", "height", "batch", NULL};

int dl_graph_find(const struct dl_graph *g, const char *name)
{
    for (int i = 0; i < g->n; i++)
        if (strcmp(g->layers[i].name, name) == 0)
            return i;
    return -1;
}

static int decl_find(const struct dl_layer_decl *d, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(d[i].name, name) == 0)
            return i;
    return -1;
}

void dl_graph_free(struct dl_graph *g)
{
    for (int i = 0; i < g->n; i++) {
        free(g->layers[i].name);
        free(g->layers[i].attr);
        free(g->layers[i].param);
    }
    free(g->layers);
    memset(g, 0, sizeof *g);
}

void dl_layer_decls_free(struct dl_layer_decl *d, int n)
{
    for (int i = 0; i < n; i++) {
        free(d[i].name);
        free(d[i].attr);
        d[i].name = NULL;
        d[i].attr = NULL;
        for (int k = 0; k < d[i].n_in; k++) {
            free(d[i].inputs[k]);
            d[i].inputs[k] = NULL;
        }
        for (int k = 0; k < d[i].n_share; k++) {
            free(d[i].share[k].param);
            free(d[i].share[k].layer);
        }
        free(d[i].share);
        d[i].share = NULL;
        d[i].n_share = 0;
    }
}

/* One `share: {PARAM: LAYER}` entry of a layer, by graph index. */
struct share_req {
    char param[sizeof ((struct dl_param_desc *)0)->name];
    int owner;
    struct dl_loc loc;
};

/* The share entries of each decl (req[i]: d[i].n_share of them, in one
 * array of every decl's, req0[i] the first), the owner found by name (by
 * decl index until the order is known). */
static int resolve_shares(const struct dl_layer_decl *d, int n, struct share_req *req, const int *req0,
                          struct dl_error *err)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < d[i].n_share; k++) {
            const struct dl_share_decl *sd = &d[i].share[k];
            struct share_req *r = &req[req0[i] + k];
            const struct dl_loc *loc = sd->loc.file ? &sd->loc : &d[i].loc;
            int j = decl_find(d, n, sd->layer);
            if (j < 0)
                return loc_errorf(err, loc, "layer '%s' (%s): share: '%s' is not the name of any layer", d[i].name,
                                  d[i].kind->name, sd->layer);
            if (j == i)
                return loc_errorf(err, loc, "layer '%s' (%s): share: a layer cannot share its own parameter",
                                  d[i].name, d[i].kind->name);
            if (strlen(sd->param) >= sizeof r->param)
                return loc_errorf(err, loc, "layer '%s' (%s): share: no parameter is named '%s'", d[i].name,
                                  d[i].kind->name, sd->param);
            strcpy(r->param, sd->param);
            r->owner = j;
            r->loc = *loc;
        }
    return DL_OK;
}

static int param_find(const struct dl_layer *l, const char *name)
{
    for (int j = 0; j < l->n_params; j++)
        if (strcmp(l->param[j].name, name) == 0)
            return j;
    return -1;
}

static void param_names(const struct dl_layer *l, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = 0;
    for (int j = 0; j < l->n_params && used < cap; j++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", j ? ", " : "", l->param[j].name);
    if (!l->n_params)
        snprintf(buf, cap, "none");
}

static void param_dims_str(const struct dl_param_desc *p, char *buf, size_t cap)
{
    size_t used = (size_t)snprintf(buf, cap, "[");
    for (int k = 0; k < p->ndim && used < cap; k++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%d", k ? ", " : "", p->dims[k]);
    if (used < cap)
        snprintf(buf + used, cap - used, "]");
}

/* The layer key init_std (GPT-2's initialisation): every trainable weight
 * of two or more dims drawn from N(0, init_std), the biases zero; the
 * other parameters (a layer norm's, running statistics) keep the op's. */
static int init_from_std(struct dl_layer *l, struct dl_error *err)
{
    int weights = 0;
    for (int j = 0; j < l->n_params; j++) {
        struct dl_param_desc *p = &l->param[j];
        if (!p->trainable)
            continue;
        if (p->ndim >= 2) {
            p->init = DL_INIT_NORMAL;
            p->std = l->init_std;
            weights++;
        } else if (strcmp(p->name, "bias") == 0) {
            p->init = DL_INIT_ZERO;
        }
    }
    if (!weights)
        return loc_errorf(err, &l->loc, "layer '%s' (%s): init_std: it has no weight matrix to draw (only a layer "
                          "with a weight of two or more dims takes init_std)", l->name, l->kind->name);
    return DL_OK;
}

/* Layer i's shared parameters point at an earlier layer's of the same
 * dims (weight tying); a chain ends at the parameter that has storage. */
static int tie_params(struct dl_graph *g, int i, const struct share_req *req, int n_req, struct dl_error *err)
{
    struct dl_layer *l = &g->layers[i];
    for (int k = 0; k < n_req; k++) {
        const struct share_req *r = &req[k];
        const struct dl_layer *o = &g->layers[r->owner];
        char names[200], a[64], b[64];
        if (r->owner > i)
            return loc_errorf(err, &r->loc, "layer '%s' (%s): share: layer '%s' runs after it; the later of two "
                              "layers declares share: (as a language model's head shares the token embedding's "
                              "weight)", l->name, l->kind->name, o->name);
        int j = param_find(l, r->param), oj = param_find(o, r->param);
        if (j < 0) {
            param_names(l, names, sizeof names);
            return loc_errorf(err, &r->loc, "layer '%s' (%s): share: it has no parameter '%s' (its parameters: %s)",
                              l->name, l->kind->name, r->param, names);
        }
        if (oj < 0) {
            param_names(o, names, sizeof names);
            return loc_errorf(err, &r->loc, "layer '%s' (%s): share: layer '%s' (%s) has no parameter '%s' (its "
                              "parameters: %s)", l->name, l->kind->name, o->name, o->kind->name, r->param, names);
        }
        const struct dl_param_desc *op = &o->param[oj];
        struct dl_param_desc *p = &l->param[j];
        if (!p->trainable || !op->trainable)
            return loc_errorf(err, &r->loc, "layer '%s' (%s): share: '%s' is statistics, not a weight; only weights "
                              "are shared", l->name, l->kind->name, r->param);
        param_dims_str(p, a, sizeof a);
        param_dims_str(op, b, sizeof b);
        if (p->count != op->count || strcmp(a, b) != 0)
            return loc_errorf(err, &r->loc, "layer '%s' (%s): share: its %s is %s but layer '%s''s is %s", l->name,
                              l->kind->name, r->param, a, o->name, b);
        if (p->shares)
            return loc_errorf(err, &r->loc, "layer '%s' (%s): share: '%s' is listed twice", l->name, l->kind->name,
                              r->param);
        p->shares = 1;
        p->share_layer = op->shares ? op->share_layer : r->owner;
        p->share_param = op->shares ? op->share_param : oj;
    }
    return DL_OK;
}

/* Producer index per input of each decl (DL_GRAPH_INPUT for the network
 * input), after checking that every name exists and is not duplicated. */
static int resolve(const struct dl_layer_decl *d, int n, int (*src)[DL_MAX_INPUTS], struct dl_error *err)
{
    for (int i = 0; i < n; i++) {
        int j = decl_find(d, i, d[i].name);
        if (j >= 0)
            return loc_errorf(err, &d[i].loc, "duplicate layer name '%s' (first defined at %s:%d:%d)",
                              d[i].name, d[j].loc.file, d[j].loc.line, d[j].loc.col);
        if (strcmp(d[i].name, "input") == 0)
            return loc_errorf(err, &d[i].loc, "layer name 'input' is reserved for the network input");
    }
    for (int i = 0; i < n; i++) {
        const struct dl_op_kind *k = d[i].kind;
        if (d[i].n_in < k->min_inputs || d[i].n_in > k->max_inputs) {
            if (k->min_inputs == k->max_inputs)
                return loc_errorf(err, &d[i].loc, "layer '%s' (%s): expected %d input%s, found %d", d[i].name,
                                  k->name, k->min_inputs, k->min_inputs == 1 ? "" : "s", d[i].n_in);
            return loc_errorf(err, &d[i].loc, "layer '%s' (%s): expected %d to %d inputs, found %d", d[i].name,
                              k->name, k->min_inputs, k->max_inputs, d[i].n_in);
        }
        for (int k2 = 0; k2 < d[i].n_in; k2++) {
            const char *nm = d[i].inputs[k2];
            if (strcmp(nm, "input") == 0) {
                src[i][k2] = DL_GRAPH_INPUT;
                continue;
            }
            int j = decl_find(d, n, nm);
            if (j < 0)
                return loc_errorf(err, d[i].input_loc[k2].file ? &d[i].input_loc[k2] : &d[i].loc,
                                  "layer '%s' (%s): input '%s' is not the name of any layer", d[i].name,
                                  k->name, nm);
            if (j == i)
                return loc_errorf(err, &d[i].loc, "layer '%s' (%s): a layer cannot be its own input (cycle)",
                                  d[i].name, k->name);
            src[i][k2] = j;
        }
    }
    return DL_OK;
}

static int unfinished_producer(const struct dl_layer_decl *d, int (*src)[DL_MAX_INPUTS], const int *done,
                               int i)
{
    for (int k = 0; k < d[i].n_in; k++)
        if (src[i][k] != DL_GRAPH_INPUT && !done[src[i][k]])
            return src[i][k];
    return i; /* not reached for an unfinished layer */
}

/* Kahn's algorithm, stable: among ready layers, the one declared first goes
 * first, so a file already in order keeps its order. */
static int toposort(const struct dl_layer_decl *d, int n, int (*src)[DL_MAX_INPUTS], int *order,
                    struct dl_error *err)
{
    int *pending = calloc((size_t)n + 1, sizeof *pending);
    int *done = calloc((size_t)n + 1, sizeof *done);
    if (!pending || !done) {
        free(pending);
        free(done);
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory sorting layers");
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < d[i].n_in; k++)
            pending[i] += src[i][k] != DL_GRAPH_INPUT;
    int count = 0;
    while (count < n) {
        int pick = -1;
        for (int i = 0; i < n && pick < 0; i++)
            if (!done[i] && pending[i] == 0)
                pick = i;
        if (pick < 0)
            break;
        done[pick] = 1;
        order[count++] = pick;
        for (int i = 0; i < n; i++)
            for (int k = 0; k < d[i].n_in; k++)
                if (src[i][k] == pick)
                    pending[i]--;
    }
    int rc = DL_OK;
    if (count < n) {
        /* Every unfinished layer waits on an unfinished producer; walking
         * producers from any of them must revisit a layer: that is a cycle. */
        int cur = 0;
        while (done[cur])
            cur++;
        memset(pending, 0, sizeof *pending * (size_t)n); /* reused as "visited" */
        while (!pending[cur]) {
            pending[cur] = 1;
            cur = unfinished_producer(d, src, done, cur);
        }
        int first = cur;
        char path[600] = "";
        size_t used = 0;
        do {
            if (used < sizeof path)
                used += (size_t)snprintf(path + used, sizeof path - used, "%s <- ", d[cur].name);
            cur = unfinished_producer(d, src, done, cur);
        } while (cur != first);
        if (used < sizeof path)
            snprintf(path + used, sizeof path - used, "%s", d[first].name);
        rc = loc_errorf(err, &d[first].loc, "cycle in the layer graph (a <- b: a takes input from b): %s", path);
    }
    free(pending);
    free(done);
    return rc;
}

/* The share entries by layer, in graph order: layer i's are
 * at[first[i] .. first[i] + count[i]), their owners by graph index. */
struct layer_shares {
    struct share_req *at;
    int *first, *count;
};

static void layer_shares_free(struct layer_shares *sh)
{
    free(sh->at);
    free(sh->first);
    free(sh->count);
}

/* Layer l takes over decl dd's name, kind, attributes and keys (its inputs
 * are set by the caller, by graph index). */
static void take_decl(struct dl_layer *l, const struct dl_layer_decl *dd)
{
    l->name = dd->name;
    l->kind = dd->kind;
    l->attr = dd->attr;
    l->loc = dd->loc;
    l->stage = dd->stage;
    l->block = dd->block;
    l->split = dd->split;
    l->init_std = dd->init_std;
    l->n_in = dd->n_in;
}

/* g's layers from the decls in a topological order: inputs resolved by
 * name into graph indices, names and attributes moved over, the share
 * entries by layer into sh (g->n: the layers made, whose names the graph
 * now owns).  The decls are freed whatever happens. */
static int order_layers(struct dl_layer_decl *d, int n, struct dl_graph *g, struct layer_shares *sh,
                        struct dl_error *err)
{
    int (*src)[DL_MAX_INPUTS] = calloc((size_t)n, sizeof *src);
    int *order = calloc((size_t)n, sizeof *order);
    int *pos = calloc((size_t)n, sizeof *pos);
    int *req0 = calloc((size_t)n + 1, sizeof *req0); /* decl i's share entries: req[req0[i]..req0[i + 1]) */
    for (int i = 0; req0 && i < n; i++)
        req0[i + 1] = req0[i] + d[i].n_share;
    int n_req = req0 ? req0[n] : 0;
    struct share_req *req = calloc((size_t)n_req + 1, sizeof *req); /* by decl */
    sh->at = calloc((size_t)n_req + 1, sizeof *sh->at);
    sh->count = calloc((size_t)n, sizeof *sh->count);
    sh->first = calloc((size_t)n, sizeof *sh->first);
    g->layers = calloc((size_t)n, sizeof *g->layers);
    int rc = DL_OK;
    if (!src || !order || !pos || !req0 || !req || !sh->at || !sh->count || !sh->first || !g->layers)
        rc = dl_errorf(err, DL_ERR_NOMEM, "out of memory building the graph");
    if (!rc)
        rc = resolve(d, n, src, err);
    if (!rc)
        rc = resolve_shares(d, n, req, req0, err);
    if (!rc)
        rc = toposort(d, n, src, order, err);
    if (!rc) {
        for (int i = 0; i < n; i++)
            pos[order[i]] = i;
        for (int i = 0, at = 0; i < n; i++) {
            const struct dl_layer_decl *dd = &d[order[i]];
            struct dl_layer *l = &g->layers[i];
            take_decl(l, dd);
            for (int k = 0; k < dd->n_in; k++) {
                int s = src[order[i]][k];
                l->in[k] = s == DL_GRAPH_INPUT ? DL_GRAPH_INPUT : pos[s];
            }
            sh->count[i] = dd->n_share;
            sh->first[i] = at;
            for (int k = 0; k < dd->n_share; k++, at++) {
                sh->at[at] = req[req0[order[i]] + k];
                sh->at[at].owner = pos[sh->at[at].owner];
            }
            g->n = i + 1;
        }
        for (int i = 0; i < n; i++) { /* ownership moved to the graph */
            d[i].name = NULL;
            d[i].attr = NULL;
        }
    }
    dl_layer_decls_free(d, n);
    free(src);
    free(order);
    free(pos);
    free(req);
    free(req0);
    return rc;
}

/* Layer i's input shapes from its producers (the graph input's for
 * DL_GRAPH_INPUT), its producers' consumer counts, and the token ids it
 * reads: only an embedding's first input may hold them (i32). */
static int connect_inputs(struct dl_graph *g, int i, struct dl_error *err)
{
    struct dl_layer *l = &g->layers[i];
    for (int k = 0; k < l->n_in; k++) {
        if (l->in[k] == DL_GRAPH_INPUT) {
            l->in_shape[k] = g->input;
            g->input_consumers++;
        } else {
            l->in_shape[k] = g->layers[l->in[k]].out_shape;
            g->layers[l->in[k]].n_consumers++;
        }
        if (l->in_shape[k].dtype == DL_I32 && (k > 0 || !l->kind->id_limit))
            return loc_errorf(err, &l->loc, "layer '%s' (%s): its input '%s' holds token ids (i32), which only an "
                              "embedding reads", l->name, l->kind->name,
                              l->in[k] == DL_GRAPH_INPUT ? "input" : g->layers[l->in[k]].name);
        if (l->in_shape[k].dtype == DL_I32) {
            int limit = l->kind->id_limit(l->attr);
            g->id_limit = g->id_limit == 0 || limit < g->id_limit ? limit : g->id_limit;
        }
    }
    return DL_OK;
}

/* What op.h's dtype allows a parameter: f32, or an i64 counter. */
static int check_param_dtypes(const struct dl_layer *l, struct dl_error *err)
{
    for (int j = 0; j < l->n_params; j++) {
        const struct dl_param_desc *p = &l->param[j];
        if (p->dtype != DL_F32 && (p->dtype != DL_I64 || p->trainable || p->ndim != 0 || p->count != 1))
            return dl_errorf(err, DL_ERR_INTERNAL, "layer '%s' (%s): parameter '%s' of dtype %s: only f32 "
                             "parameters and scalar i64 counters that are not trained exist", l->name,
                             l->kind->name, p->name, dl_dtype_name(p->dtype));
    }
    return DL_OK;
}

/* Layer i once its producers are described: its input and output shapes,
 * its parameters (tied to their owners' where shared, drawn by init_std
 * where given) and FLOPs; a loss only as the last layer. */
static int describe_layer(struct dl_graph *g, int i, const struct layer_shares *sh, struct dl_error *err)
{
    struct dl_layer *l = &g->layers[i];
    int rc = connect_inputs(g, i, err);
    if (rc)
        return rc;
    struct dl_error e = {0};
    if (l->kind->infer(l->attr, l->n_in, l->in_shape, &l->out_shape, &e))
        return loc_errorf(err, &l->loc, "layer '%s' (%s): %s", l->name, l->kind->name, e.msg);
    if (dl_shape_count(l->out_shape) <= 0 || dl_shape_count(l->out_shape) > (1L << 31)) {
        char b[64];
        return loc_errorf(err, &l->loc, "layer '%s' (%s): output shape %s is empty or too large", l->name,
                          l->kind->name, dl_shape_str(l->out_shape, b, sizeof b));
    }
    l->n_params = dl_op_param_descs(l->kind, l->attr, l->in_shape, l->out_shape, &l->param, err);
    if (l->n_params < 0) {
        l->n_params = 0;
        return DL_ERR_NOMEM;
    }
    rc = check_param_dtypes(l, err);
    if (rc)
        return rc;
    l->flops = l->kind->flops ? l->kind->flops(l->attr, l->in_shape, l->out_shape) : 0;
    rc = tie_params(g, i, sh->at + sh->first[i], sh->count[i], err);
    if (!rc && l->init_std > 0)
        rc = init_from_std(l, err);
    if (!rc && l->kind->is_loss && i != g->n - 1)
        rc = loc_errorf(err, &l->loc, "layer '%s': a loss must be the last layer", l->name);
    return rc;
}

/* The loss (the last layer) and the logits it reads, which must hold
 * `classes` scores per sample or position; every other layer must feed
 * another. */
static int check_loss(struct dl_graph *g, int classes, struct dl_error *err)
{
    g->loss = g->n - 1;
    struct dl_layer *loss = &g->layers[g->loss];
    g->logits = loss->in[0];
    g->float_targets = loss->kind->float_targets;
    g->positions = g->float_targets ? loss->in_shape[0].c /* a target per prediction */
                 : dl_shape_rank(loss->in_shape[0]) == 2 ? loss->in_shape[0].h : 1;
    if (g->logits == DL_GRAPH_INPUT)
        return loc_errorf(err, &loss->loc, "the loss reads the network input directly: there are no layers");
    if (loss->in_shape[0].c != classes && dl_shape_rank(loss->in_shape[0]) == 2)
        return loc_errorf(err, &loss->loc, "the loss input '%s' has %d scores per position but input.classes is %d",
                          g->layers[g->logits].name, loss->in_shape[0].c, classes);
    if (loss->in_shape[0].c != classes)
        return loc_errorf(err, &loss->loc, "the loss input '%s' has %ld values per sample but input.classes is %d",
                          g->layers[g->logits].name, dl_shape_count(loss->in_shape[0]), classes);
    for (int i = 0; i < g->n - 1; i++)
        if (g->layers[i].n_consumers == 0)
            return loc_errorf(err, &g->layers[i].loc,
                              "layer '%s' (%s): its output is never used (every layer but the loss must feed another)",
                              g->layers[i].name, g->layers[i].kind->name);
    return DL_OK;
}

int dl_graph_build(struct dl_layer_decl *d, int n, struct dl_shape input, int classes,
                   struct dl_graph *g, struct dl_error *err)
{
    memset(g, 0, sizeof *g);
    if (n < 1 || !d[n - 1].kind->is_loss) {
        dl_layer_decls_free(d, n);
        return dl_errorf(err, DL_ERR_SPEC, "the network has no loss layer");
    }
    struct layer_shares sh = {0};
    int rc = order_layers(d, n, g, &sh, err);
    g->input = input;
    g->classes = classes;
    for (int i = 0; i < g->n && !rc; i++)
        rc = describe_layer(g, i, &sh, err);
    if (!rc)
        rc = check_loss(g, classes, err);
    layer_shares_free(&sh);
    if (rc)
        dl_graph_free(g);
    return rc;
}

void dl_layer_param_tally(const struct dl_layer *l, double *trainable, double *state)
{
    for (int j = 0; j < l->n_params; j++)
        if ((!l->param[j].shares || l->param[j].replica) && l->param[j].dtype == DL_F32)
            *(l->param[j].trainable ? trainable : state) += (double)l->param[j].count;
}

long dl_layer_counters(const struct dl_layer *l)
{
    long n = 0;
    for (int j = 0; j < l->n_params; j++)
        n += l->param[j].dtype == DL_I64 ? l->param[j].count : 0;
    return n;
}

long dl_layer_param_count(const struct dl_layer *l)
{
    double trainable = 0, state = 0;
    dl_layer_param_tally(l, &trainable, &state);
    return (long)trainable;
}

long dl_graph_param_count(const struct dl_graph *g)
{
    long total = 0;
    for (int i = 0; i < g->n; i++)
        total += dl_layer_param_count(&g->layers[i]);
    return total;
}

long dl_graph_active_param_count(const struct dl_graph *g)
{
    long total = dl_graph_param_count(g);
    for (int i = 0; i < g->n; i++)
        if (g->layers[i].kind->idle_params)
            total -= g->layers[i].kind->idle_params(g->layers[i].attr, g->layers[i].in_shape);
    return total;
}
