/* netfile.c: the network-file schema.  Reads the top-level sections (input,
 * data, train, parallel), has expand.c turn layers, blocks and loss into
 * declarations, and hands them to dl_graph_build(); `--set` overrides and
 * unused keys. */
#include "spec/netfile.h"

#include <stdlib.h>
#include <string.h>

#include "core/device_kind.h"
#include "spec/datafile.h"
#include "spec/expand.h"

const char *const dl_optim_names[] = {"sgd", "adagrad", "rmsprop", "adam", "adamw", "lars", "lamb", "muon", NULL};
const char *const dl_lr_scaling_names[] = {"none", "linear", "sqrt", NULL};
const char *const dl_no_decay_names[] = {"bias", "norm", "embedding", NULL};
const char *const dl_sched_names[] = {"constant", "step", "cosine", "wsd", NULL};
const char *const dl_parallel_names[] = {"auto", "none", "data", "model", "pipeline", "hybrid", NULL};
const char *const dl_recompute_names[] = {"none", "selective", "full", NULL};

void dl_net_defaults(struct dl_net *net)
{
    memset(net, 0, sizeof *net);
    snprintf(net->name, sizeof net->name, "net");
    dl_data_defaults(&net->data);
    net->train.batch = 64;
    net->train.epochs = 1;
    net->train.seed = 1;
    struct dl_optim_spec *o = &net->train.optim;
    o->kind = DL_OPTIM_SGD;
    o->lr = 0.01;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->alpha = 0.99;
    o->eps = 1e-8;
    o->trust_coefficient = 0.001;
    net->train.sched.kind = DL_SCHED_CONSTANT;
    net->train.sched.gamma = 0.1;
    net->train.sched.step_epochs = 30;
    net->train.sched.decay_fraction = 0.2;
    net->parallel.kind = DL_PAR_AUTO;
}

/* ------------------------------------------------------------ small sections */
/* The dtypes a network's input may have: f32 values, i32 token ids. */
#define INPUT_DTYPES (DL_DTYPE_BIT(DL_F32) | DL_DTYPE_BIT(DL_I32))

/* input.dtype (f32 when absent), located in the file when it is not one of
 * INPUT_DTYPES. */
static int parse_input_dtype(const struct dl_ynode *m, enum dl_dtype *dtype, struct dl_error *err)
{
    const struct dl_ynode *d = dl_ymap_get(m, "dtype");
    const char *name;
    struct dl_error bad = {0};
    *dtype = DL_F32;
    if (!d)
        return DL_OK;
    if (dl_y_string(d, "input.dtype", &name, err))
        return DL_ERR_SPEC;
    if (dl_dtype_parse_among("input.dtype", dl_short(name).s, INPUT_DTYPES, dtype, &bad))
        return dl_yerrorf(err, DL_ERR_SPEC, d, "%s", bad.msg);
    return DL_OK;
}

static int parse_input(const struct dl_ynode *m, struct dl_shape *shape, int *classes, struct dl_error *err)
{
    static const char *const keys[] = {"shape", "dtype", "classes", NULL};
    if (dl_y_check_keys(m, "input", keys, NULL, err))
        return DL_ERR_SPEC;
    enum dl_dtype dtype;
    if (parse_input_dtype(m, &dtype, err))
        return DL_ERR_SPEC;
    int ids = !dl_dtype_traits(dtype)->is_float; /* token ids: a list [T] of positions */
    const struct dl_ynode *s = dl_ymap_get(m, "shape");
    if (!s)
        return dl_yerrorf(err, DL_ERR_SPEC, m, "input: missing required key 'shape' ([C, H, W], [T, C] or [features]; "
                          "[T] for token ids with dtype: i32)");
    if (s->kind != DL_Y_SEQ || s->n < 1 || s->n > 3)
        return dl_yerrorf(err, DL_ERR_SPEC, s, "input.shape: expected a list [C, H, W], [T, C] or [features], found "
                          "%s%s", dl_ynode_kind_name(s), s->kind == DL_Y_SEQ ? " of another length" : "");
    if (ids && s->n != 1)
        return dl_yerrorf(err, DL_ERR_SPEC, s, "input.shape: token ids (dtype: i32) are a list [T] of positions, "
                          "found a list of %d", s->n);
    long v[3] = {1, 1, 1};
    for (int i = 0; i < s->n; i++)
        if (dl_y_int(s->items[i], "input.shape", 1, 1 << 20, &v[i], err))
            return DL_ERR_SPEC;
    if (ids)
        *shape = dl_shape_seq((int)v[0], 1, dtype);
    else if (s->n == 2)
        *shape = dl_shape_seq((int)v[0], (int)v[1], dtype);
    else
        *shape = (struct dl_shape){(int)v[0], (int)v[1], (int)v[2]}; /* rank as its dims say (shape.h) */
    if (dl_shape_count(*shape) > (1L << 30))
        return dl_yerrorf(err, DL_ERR_SPEC, s, "input.shape: more than 2^30 values per sample");
    long c = 0;
    const struct dl_ynode *cn = dl_ymap_get(m, "classes");
    if (!cn)
        return dl_yerrorf(err, DL_ERR_SPEC, m, "input: missing required key 'classes' (number of labels)");
    if (dl_y_int(cn, "input.classes", 2, 1 << 24, &c, err))
        return DL_ERR_SPEC;
    *classes = (int)c;
    return DL_OK;
}

static int parse_optimizer(const struct dl_ynode *m, struct dl_optim_spec *o, struct dl_error *err)
{
    static const char *const keys[] = {"type", "lr", "momentum", "nesterov", "weight_decay", "beta1",
                                       "beta2", "alpha", "eps", "no_decay", "trust_coefficient", NULL};
    if (dl_y_check_keys(m, "train.optimizer", keys, NULL, err))
        return DL_ERR_SPEC;
    int kind = (int)o->kind;
    if (dl_ymap_enum(m, "type", "train.optimizer", dl_optim_names, &kind, err) ||
        dl_ymap_float(m, "lr", "train.optimizer", 0, 1e6, &o->lr, err) ||
        dl_ymap_float(m, "momentum", "train.optimizer", 0, 0.999999, &o->momentum, err) ||
        dl_ymap_bool(m, "nesterov", "train.optimizer", &o->nesterov, err) ||
        dl_ymap_float(m, "weight_decay", "train.optimizer", 0, 1e3, &o->weight_decay, err) ||
        dl_ymap_float(m, "beta1", "train.optimizer", 0, 0.999999, &o->beta1, err) ||
        dl_ymap_float(m, "beta2", "train.optimizer", 0, 0.999999999, &o->beta2, err) ||
        dl_ymap_float(m, "alpha", "train.optimizer", 0, 0.999999999, &o->alpha, err) ||
        dl_ymap_float(m, "eps", "train.optimizer", 1e-30, 1, &o->eps, err) ||
        dl_ymap_float(m, "trust_coefficient", "train.optimizer", 1e-12, 1e6, &o->trust_coefficient, err))
        return DL_ERR_SPEC;
    o->kind = (enum dl_optim_kind)kind;
    if (o->kind == DL_OPTIM_MUON && !dl_ymap_get(m, "momentum")) /* torch.optim.Muon's defaults */
        o->momentum = 0.95;
    if (o->kind == DL_OPTIM_MUON && !dl_ymap_get(m, "nesterov"))
        o->nesterov = 1;
    const struct dl_ynode *nd = dl_ymap_get(m, "no_decay");
    if (nd && nd->kind != DL_Y_SEQ)
        return dl_yerrorf(err, DL_ERR_SPEC, nd, "train.optimizer.no_decay: expected a list of bias, norm, "
                          "embedding (such as [bias, norm]), found %s", dl_ynode_kind_name(nd));
    if (nd)
        o->no_decay = 0;
    for (int i = 0; nd && i < nd->n; i++) {
        int bit;
        if (dl_y_enum(nd->items[i], "train.optimizer.no_decay", dl_no_decay_names, &bit, err))
            return DL_ERR_SPEC;
        o->no_decay |= 1u << bit;
    }
    if (o->nesterov && ((o->kind != DL_OPTIM_SGD && o->kind != DL_OPTIM_MUON) || o->momentum <= 0))
        return dl_yerrorf(err, DL_ERR_SPEC, dl_ymap_get(m, "nesterov"),
                          "train.optimizer.nesterov: needs type sgd or muon with momentum > 0");
    return DL_OK;
}

static int parse_schedule(const struct dl_ynode *m, struct dl_sched_spec *s, struct dl_error *err)
{
    static const char *const keys[] = {"type", "step_epochs", "gamma", "min_lr", "warmup_epochs", "decay_fraction",
                                       NULL};
    if (dl_y_check_keys(m, "train.schedule", keys, NULL, err))
        return DL_ERR_SPEC;
    int kind = (int)s->kind;
    if (dl_ymap_enum(m, "type", "train.schedule", dl_sched_names, &kind, err) ||
        dl_ymap_float(m, "step_epochs", "train.schedule", 1e-6, 1e9, &s->step_epochs, err) ||
        dl_ymap_float(m, "gamma", "train.schedule", 0, 1, &s->gamma, err) ||
        dl_ymap_float(m, "min_lr", "train.schedule", 0, 1e6, &s->min_lr, err) ||
        dl_ymap_float(m, "warmup_epochs", "train.schedule", 0, 1e9, &s->warmup_epochs, err) ||
        dl_ymap_float(m, "decay_fraction", "train.schedule", 0, 1, &s->decay_fraction, err))
        return DL_ERR_SPEC;
    s->kind = (enum dl_sched_kind)kind;
    return DL_OK;
}

static int parse_train(const struct dl_ynode *m, struct dl_train_spec *t, struct dl_error *err)
{
    static const char *const keys[] = {"batch", "epochs", "max_steps", "seed", "device", "optimizer", "schedule",
                                       "clip_grad_norm", "precision", "lr_scaling", "reference_batch", NULL};
    if (dl_y_check_keys(m, "train", keys, NULL, err))
        return DL_ERR_SPEC;
    long batch = t->batch, epochs = t->epochs, seed = (long)t->seed, reference = t->reference_batch;
    int device = (int)t->device, scaling = (int)t->lr_scaling;
    if (dl_ymap_int(m, "batch", "train", 1, 1 << 24, &batch, err) ||
        dl_ymap_int(m, "epochs", "train", 1, 1 << 24, &epochs, err) ||
        dl_ymap_int(m, "max_steps", "train", 0, 1L << 40, &t->max_steps, err) ||
        dl_ymap_int(m, "seed", "train", 0, 1L << 62, &seed, err) ||
        dl_ymap_enum(m, "device", "train", dl_device_names, &device, err) ||
        dl_ymap_enum(m, "precision", "train", dl_train_precision_names, &t->precision, err) ||
        dl_ymap_float(m, "clip_grad_norm", "train", 0, 1e12, &t->clip_grad_norm, err) ||
        dl_ymap_enum(m, "lr_scaling", "train", dl_lr_scaling_names, &scaling, err) ||
        dl_ymap_int(m, "reference_batch", "train", 1, 1 << 24, &reference, err))
        return DL_ERR_SPEC;
    if (scaling != DL_LR_SCALING_NONE && reference == 0)
        return dl_yerrorf(err, DL_ERR_SPEC, dl_ymap_get(m, "lr_scaling"), "train.lr_scaling: %s scaling needs "
                          "train.reference_batch (--reference-batch N), the batch that train.optimizer.lr was "
                          "chosen for", dl_lr_scaling_names[scaling]);
    t->lr_scaling = (enum dl_lr_scaling)scaling;
    t->reference_batch = (int)reference;
    t->batch = (int)batch;
    t->epochs = (int)epochs;
    t->device = (enum dl_device_kind)device;
    t->seed = (uint64_t)seed;
    const struct dl_ynode *o = dl_ymap_get(m, "optimizer");
    if (o && parse_optimizer(o, &t->optim, err))
        return DL_ERR_SPEC;
    const struct dl_ynode *s = dl_ymap_get(m, "schedule");
    if (s && parse_schedule(s, &t->sched, err))
        return DL_ERR_SPEC;
    return DL_OK;
}

static int parse_parallel(const struct dl_ynode *m, struct dl_parallel_spec *p, struct dl_error *err)
{
    static const char *const keys[] = {"strategy", "dp", "ep", "tp", "pp", "micro_batches", "stages",
                                       "sequence_parallel", "zero", "recompute", NULL};
    if (dl_y_check_keys(m, "parallel", keys, NULL, err))
        return DL_ERR_SPEC;
    int kind = (int)p->kind;
    long dp = p->dp, ep = p->ep, tp = p->tp, pp = p->pp, mb = p->micro_batches, zero = p->zero;
    if (dl_ymap_enum(m, "strategy", "parallel", dl_parallel_names, &kind, err) ||
        dl_ymap_int(m, "dp", "parallel", 1, 1 << 20, &dp, err) || dl_ymap_int(m, "tp", "parallel", 1, 1 << 20, &tp, err) ||
        dl_ymap_int(m, "pp", "parallel", 1, 1 << 20, &pp, err) || dl_ymap_int(m, "ep", "parallel", 1, 1 << 20, &ep, err) ||
        dl_ymap_int(m, "micro_batches", "parallel", 1, 1 << 20, &mb, err) ||
        dl_ymap_bool(m, "sequence_parallel", "parallel", &p->sequence_parallel, err) ||
        dl_ymap_int(m, "zero", "parallel", 0, 3, &zero, err) ||
        dl_ymap_enum(m, "recompute", "parallel", dl_recompute_names, &p->recompute, err))
        return DL_ERR_SPEC;
    p->zero = (int)zero;
    p->kind = (enum dl_parallel_kind)kind;
    p->dp = (int)dp;
    p->ep = (int)ep;
    p->tp = (int)tp;
    p->pp = (int)pp;
    p->micro_batches = (int)mb;
    return DL_OK;
}

/* parallel.stages: [names]: the layers that begin stages 1, 2, ... (stage 0
 * begins at the first layer), as if each had its `stage:` key. */
static int apply_stage_list(const struct dl_ynode *list, struct dl_layer_decl *decls, int n, struct dl_error *err)
{
    if (list->kind != DL_Y_SEQ || list->n == 0)
        return dl_yerrorf(err, DL_ERR_SPEC, list, "parallel.stages: expected a list of the layers that begin "
                          "stages 1, 2, ... (stage 0 begins at the first layer), found %s", dl_ynode_kind_name(list));
    for (int k = 0; k < list->n; k++) {
        const char *name;
        if (dl_y_string(list->items[k], "parallel.stages", &name, err))
            return DL_ERR_SPEC;
        int i = 0;
        while (i < n && strcmp(decls[i].name, name) != 0)
            i++;
        if (i == n)
            return dl_yerrorf(err, DL_ERR_SPEC, list->items[k], "parallel.stages: no layer is named '%s' (layer "
                              "names as dltrain check prints them)", name);
        if (decls[i].stage >= 0)
            return dl_yerrorf(err, DL_ERR_SPEC, list->items[k], "parallel.stages: layer '%s' already has a "
                              "'stage:' key; give the cuts one way", name);
        decls[i].stage = k + 1;
    }
    return DL_OK;
}

static int parse_net(struct dl_net *net, struct dl_error *err)
{
    const struct dl_ynode *root = net->doc->root;
    if (!root || root->kind != DL_Y_MAP)
        return dl_yerrorf(err, DL_ERR_SPEC, root, "%s: expected a mapping with keys input, layers, loss, found %s",
                          net->doc->file, dl_ynode_kind_name(root));
    static const char *const keys[] = {"name", "description", "args", "input", "data", "blocks", "layers", "loss",
                                       "train", "parallel", NULL};
    if (dl_y_check_keys(root, "network file", keys, NULL, err))
        return DL_ERR_SPEC;
    /* description: any value, for the reader alone */
    const struct dl_ynode *n = dl_ymap_get(root, "name");
    if (n) {
        const char *s;
        if (dl_y_string(n, "name", &s, err))
            return DL_ERR_SPEC;
        snprintf(net->name, sizeof net->name, "%s", s);
    }
    struct dl_shape input = {0, 0, 0};
    int classes = 0;
    const struct dl_ynode *in = dl_ymap_get(root, "input");
    if (!in)
        return dl_yerrorf(err, DL_ERR_SPEC, root, "network file: missing required key 'input'");
    if (parse_input(in, &input, &classes, err))
        return DL_ERR_SPEC;
    const struct dl_ynode *sec;
    if ((sec = dl_ymap_get(root, "data")) && dl_data_section_parse(sec, &net->data, err))
        return DL_ERR_SPEC;
    if ((sec = dl_ymap_get(root, "train")) && parse_train(sec, &net->train, err))
        return DL_ERR_SPEC;
    if ((sec = dl_ymap_get(root, "parallel")) && parse_parallel(sec, &net->parallel, err))
        return DL_ERR_SPEC;
    const struct dl_ynode *blocks = dl_ymap_get(root, "blocks");
    if (blocks && blocks->kind != DL_Y_MAP)
        return dl_yerrorf(err, DL_ERR_SPEC, blocks, "blocks: expected a mapping of block names, found %s",
                          dl_ynode_kind_name(blocks));
    const struct dl_ynode *layers = dl_ymap_get(root, "layers");
    if (!layers)
        return dl_yerrorf(err, DL_ERR_SPEC, root, "network file: missing required key 'layers'");
    if (layers->kind != DL_Y_SEQ || layers->n == 0)
        return dl_yerrorf(err, DL_ERR_SPEC, layers, "layers: expected a non-empty list");
    const struct dl_ynode *loss = dl_ymap_get(root, "loss");
    if (!loss)
        return dl_yerrorf(err, DL_ERR_SPEC, root, "network file: missing required key 'loss' "
                          "(for example: loss: softmax_cross_entropy)");
    struct dl_expander x = {.blocks = blocks, .err = err, .block = -1};
    char *last = NULL;
    int rc = dl_expand_list(&x, layers, "", "input", 0, &last);
    if (!rc)
        rc = dl_expand_loss(&x, loss, last);
    const struct dl_ynode *stages = (sec = dl_ymap_get(root, "parallel")) ? dl_ymap_get(sec, "stages") : NULL;
    if (!rc && stages)
        rc = apply_stage_list(stages, x.decls, x.n, err);
    if (!rc)
        rc = dl_graph_build(x.decls, x.n, input, classes, &net->graph, err);
    else /* dl_graph_build frees them on its own paths */
        dl_layer_decls_free(x.decls, x.n);
    free(x.decls);
    for (int i = 0; i < x.n_owned; i++)
        dl_ynode_free(x.owned[i]);
    free(x.owned);
    return rc;
}

static void free_set_docs(struct dl_net *net)
{
    for (int i = 0; i < net->n_set_docs; i++)
        dl_ydoc_free(net->set_docs[i]);
    net->n_set_docs = 0;
}

/* The file's top-level `args:` put in every other top-level section (not
 * in `blocks:`, whose `$name`s are their own arguments): five numbers
 * (`$width`, `$width*4`, ...) can size a whole network. */
static int apply_file_args(struct dl_net *net, struct dl_error *err)
{
    struct dl_ynode *root = net->doc->root;
    const struct dl_ynode *args = dl_ymap_get(root, "args");
    if (!args)
        return DL_OK;
    if (args->kind != DL_Y_MAP)
        return dl_yerrorf(err, DL_ERR_SPEC, args, "args: expected a mapping of names to values (such as {width: "
                          "64}), found %s", dl_ynode_kind_name(args));
    for (int i = 0; i < root->n; i++) {
        if (strcmp(root->keys[i]->str, "args") == 0 || strcmp(root->keys[i]->str, "blocks") == 0)
            continue;
        struct dl_ynode *c = dl_ynode_clone(root->items[i], args, err);
        if (!c)
            return DL_ERR_NOMEM;
        dl_ynode_free(root->items[i]);
        root->items[i] = c;
    }
    return DL_OK;
}

static int finish_load(struct dl_net *net, int rc, struct dl_error *err)
{
    if (!rc && net->doc->root && net->doc->root->kind == DL_Y_MAP)
        rc = apply_file_args(net, err);
    if (!rc)
        rc = parse_net(net, err);
    if (rc) {
        dl_ydoc_free(net->doc);
        net->doc = NULL;
        free_set_docs(net);
    }
    return rc;
}

/* `loss: NAME` is short for `loss: {type: NAME}`; a key set below it
 * needs the long form, which this makes of root's loss. */
static int loss_long_form(struct dl_ynode *root, struct dl_error *err)
{
    struct dl_ynode *loss = NULL;
    for (int i = 0; root && root->kind == DL_Y_MAP && i < root->n; i++)
        if (strcmp(root->keys[i]->str, "loss") == 0)
            loss = root->items[i];
    if (!loss || loss->kind != DL_Y_SCALAR)
        return DL_OK;
    struct dl_ynode *type = dl_calloc(1, sizeof *type, err), *name = dl_calloc(1, sizeof *name, err);
    struct dl_ynode **keys = dl_calloc(1, sizeof *keys, err), **items = dl_calloc(1, sizeof *items, err);
    char *str = dl_strdup("type", err);
    if (!type || !name || !keys || !items || !str) {
        free(type), free(name), free(keys), free(items), free(str);
        return DL_ERR_NOMEM;
    }
    *name = *loss; /* the scalar moves under `type`, keeping its place in the file */
    *type = (struct dl_ynode){.kind = DL_Y_SCALAR, .file = loss->file, .line = loss->line, .col = loss->col,
                              .str = str};
    keys[0] = type, items[0] = name;
    *loss = (struct dl_ynode){.kind = DL_Y_MAP, .file = loss->file, .line = loss->line, .col = loss->col, .n = 1,
                              .keys = keys, .items = items};
    return DL_OK;
}

int dl_net_set_parse(const char *text, struct dl_net_set *out, char *buf, size_t size, struct dl_error *err)
{
    const char *eq = strchr(text, '=');
    struct dl_short shown = dl_short(text);
    if (!eq || eq == text)
        return dl_errorf(err, DL_ERR_SPEC, "--set: expected KEY=VALUE (such as train.optimizer.beta2=0.95), found "
                         "'%s'", shown.s);
    size_t klen = (size_t)(eq - text), max = size > sizeof shown.s + 8 ? size - sizeof shown.s - 8 : 0;
    if (klen > max)
        return dl_errorf(err, DL_ERR_SPEC, "--set %s: expected a key of at most %zu characters, found %zu", shown.s,
                         max, klen);
    memcpy(buf, text, klen);
    buf[klen] = '\0';
    char *label = buf + klen + 1;
    snprintf(label, size - klen - 1, "--set %s", shown.s);
    *out = (struct dl_net_set){.key = buf, .value = eq + 1, .label = label};
    return DL_OK;
}

/* The file's keys of its data: section that belong to its dataset, dropped
 * when the command line names another (see dl_net_load_with). */
static void drop_dataset_keys(struct dl_ynode *root)
{
    static const char *const keys[] = {"dir", "mean", "std", "train", "eval", NULL};
    struct dl_ynode *data = (struct dl_ynode *)dl_ymap_get(root, "data");
    if (!data || data->kind != DL_Y_MAP)
        return;
    int kept = 0;
    for (int i = 0; i < data->n; i++) {
        int drop = data->items[i] && data->items[i]->line > 0; /* from the file, not the command line */
        for (int k = 0; drop && keys[k]; k++)
            if (strcmp(data->keys[i]->str, keys[k]) == 0)
                drop = 2;
        if (drop == 2) {
            dl_ynode_free(data->keys[i]);
            dl_ynode_free(data->items[i]);
        } else {
            data->keys[kept] = data->keys[i];
            data->items[kept++] = data->items[i];
        }
    }
    data->n = kept;
}

/* A YAML double-quoted scalar of text (a set's `string` value). */
static char *quoted(const char *text, struct dl_error *err)
{
    char *q = dl_calloc(1, 2 * strlen(text) + 3, err), *p = q;
    if (!q)
        return NULL;
    *p++ = '"';
    for (const char *t = text; *t; t++) {
        if (*t == '"' || *t == '\\')
            *p++ = '\\';
        *p++ = *t;
    }
    *p = '"';
    return q;
}

/* A set of args.NAME needs NAME among the file's args (a new one would size
 * nothing): DL_ERR_SPEC listing them. */
static int known_arg(const struct dl_net *net, const struct dl_net_set *set, struct dl_error *err)
{
    if (strncmp(set->key, "args.", 5) != 0)
        return DL_OK;
    const struct dl_ynode *root = net->doc->root;
    const struct dl_ynode *args = root && root->kind == DL_Y_MAP ? dl_ymap_get(root, "args") : NULL;
    if (args && args->kind == DL_Y_MAP && dl_ymap_get(args, set->key + 5))
        return DL_OK;
    char names[512] = "";
    for (int i = 0; args && args->kind == DL_Y_MAP && i < args->n; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", args->keys[i]->str);
    return dl_errorf(err, DL_ERR_SPEC, "%s: the network has no argument '%s' (its args: %s)", set->label,
                     dl_short(set->key + 5).s, names[0] ? names : "none");
}

/* One set on net's document. */
static int apply_set(struct dl_net *net, const struct dl_net_set *set, struct dl_error *err)
{
    int known = known_arg(net, set, err);
    if (known)
        return known;
    if (net->n_set_docs == DL_NET_MAX_SETS)
        return dl_errorf(err, DL_ERR_SPEC, "%s: more than %d values from the command line", set->label,
                         DL_NET_MAX_SETS);
    char *text = set->string ? quoted(set->value, err) : NULL;
    if (set->string && !text)
        return DL_ERR_NOMEM;
    struct dl_ydoc *v = NULL;
    int rc = dl_yaml_load_string(set->label, text ? text : set->value, &v, err);
    free(text);
    if (rc)
        return rc;
    net->set_docs[net->n_set_docs++] = v;
    if (!v->root)
        return dl_errorf(err, DL_ERR_SPEC, "%s: expected a value", v->file);
    struct dl_ynode *value = v->root;
    v->root = NULL;
    dl_ynode_relabel(value, v->file);
    rc = strncmp(set->key, "loss.", 5) == 0 ? loss_long_form(net->doc->root, err) : DL_OK;
    if (!rc && strcmp(set->key, "data.dataset") == 0)
        drop_dataset_keys(net->doc->root);
    if (rc)
        dl_ynode_free(value);
    else
        rc = dl_ydoc_set(net->doc, set->key, value, v->file, err);
    return rc;
}

int dl_net_load_with(const char *path, const struct dl_net_set *sets, int n, struct dl_net *net, struct dl_error *err)
{
    dl_net_defaults(net);
    int rc = dl_yaml_load_file(path, &net->doc, err);
    for (int i = 0; !rc && i < n; i++)
        rc = apply_set(net, &sets[i], err);
    return finish_load(net, rc, err);
}

/* Which optimizers and schedules read each key (a key not listed: all). */
struct key_use {
    const char *key;
    const char *used_by; /* for the message */
    unsigned kinds;      /* bit k: kind k reads it */
};

static int check_unused(const struct dl_ynode *m, const char *what, const char *kind_name, int kind,
                        const struct key_use *uses, int n_uses, void (*warn)(void *, const char *), void *ctx,
                        struct dl_error *err)
{
    for (int i = 0; m && m->kind == DL_Y_MAP && i < m->n; i++)
        for (int u = 0; u < n_uses; u++) {
            if (strcmp(m->keys[i]->str, uses[u].key) != 0 || (uses[u].kinds >> kind & 1))
                continue;
            const struct dl_ynode *at = m->items[i];
            if (at->line == 0) /* from the command line: the user asked for something that changes nothing */
                return dl_yerrorf(err, DL_ERR_SPEC, at, "%s.%s: %s does not use it (%s do%s)", what, uses[u].key,
                                  kind_name, uses[u].used_by, strchr(uses[u].used_by, ' ') ? "" : "es");
            if (warn) {
                char msg[768];
                snprintf(msg, sizeof msg, "%s:%d:%d: %s.%s: %s does not use it (%s do%s); ignored", at->file,
                         at->line, at->col, what, uses[u].key, kind_name, uses[u].used_by,
                         strchr(uses[u].used_by, ' ') ? "" : "es");
                warn(ctx, msg);
            }
        }
    return DL_OK;
}

int dl_net_check_unused_keys(const struct dl_net *net, void (*warn)(void *ctx, const char *msg), void *ctx,
                             struct dl_error *err)
{
    enum { SGD = 1 << DL_OPTIM_SGD, ADAGRAD = 1 << DL_OPTIM_ADAGRAD, RMSPROP = 1 << DL_OPTIM_RMSPROP,
           ADAM = 1 << DL_OPTIM_ADAM, ADAMW = 1 << DL_OPTIM_ADAMW, LARS = 1 << DL_OPTIM_LARS,
           LAMB = 1 << DL_OPTIM_LAMB, MUON = 1 << DL_OPTIM_MUON };
    static const struct key_use optim[] = {
        {"momentum", "sgd, rmsprop, lars and muon", SGD | RMSPROP | LARS | MUON},
        {"nesterov", "sgd and muon", SGD | MUON},
        {"beta1", "adam, adamw, lamb and muon", ADAM | ADAMW | LAMB | MUON},
        {"beta2", "adam, adamw, lamb and muon", ADAM | ADAMW | LAMB | MUON},
        {"alpha", "rmsprop", RMSPROP},
        {"eps", "adagrad, rmsprop, adam, adamw, lamb and muon", ADAGRAD | RMSPROP | ADAM | ADAMW | LAMB | MUON},
        {"trust_coefficient", "lars", LARS},
    };
    static const struct key_use sched[] = {
        {"step_epochs", "step", 1 << DL_SCHED_STEP},
        {"gamma", "step", 1 << DL_SCHED_STEP},
        {"min_lr", "cosine and wsd", 1 << DL_SCHED_COSINE | 1 << DL_SCHED_WSD},
        {"decay_fraction", "wsd", 1 << DL_SCHED_WSD},
    };
    const struct dl_ynode *train = net->doc ? dl_ymap_get(net->doc->root, "train") : NULL;
    if (!train)
        return DL_OK;
    int o = (int)net->train.optim.kind, k = (int)net->train.sched.kind;
    if (check_unused(dl_ymap_get(train, "optimizer"), "train.optimizer", dl_optim_names[o], o, optim,
                     (int)(sizeof optim / sizeof *optim), warn, ctx, err) ||
        check_unused(dl_ymap_get(train, "schedule"), "train.schedule", dl_sched_names[k], k, sched,
                     (int)(sizeof sched / sizeof *sched), warn, ctx, err))
        return DL_ERR_SPEC;
    return DL_OK;
}

int dl_net_load(const char *path, struct dl_net *net, struct dl_error *err)
{
    dl_net_defaults(net);
    return finish_load(net, dl_yaml_load_file(path, &net->doc, err), err);
}

int dl_net_load_string(const char *name, const char *text, struct dl_net *net, struct dl_error *err)
{
    dl_net_defaults(net);
    return finish_load(net, dl_yaml_load_string(name, text, &net->doc, err), err);
}

void dl_net_free(struct dl_net *net)
{
    dl_graph_free(&net->graph);
    dl_ydoc_free(net->doc);
    net->doc = NULL;
    free_set_docs(net);
}
