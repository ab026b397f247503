/* expand.c: the layers of a network file as declarations (see expand.h):
 * block instances expanded with their arguments substituted and their
 * names composed, layer mappings read through each op's attribute table. */
#include "spec/expand.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/attrs.h"

#define MAX_BLOCK_DEPTH 8
#define MAX_LAYERS 100000

static int keep_clone(struct dl_expander *x, struct dl_ynode *c)
{
    if (x->n_owned == x->cap_owned) {
        int cap = x->cap_owned ? 2 * x->cap_owned : 16;
        struct dl_ynode **o = realloc(x->owned, sizeof *o * (size_t)cap);
        if (!o) {
            dl_ynode_free(c);
            return dl_errorf(x->err, DL_ERR_NOMEM, "out of memory expanding blocks");
        }
        x->owned = o;
        x->cap_owned = cap;
    }
    x->owned[x->n_owned++] = c;
    return DL_OK;
}

static char *qualify(const char *prefix, const char *name, struct dl_error *err)
{
    size_t n = strlen(prefix) + strlen(name) + 1;
    char *s = dl_calloc(n, 1, err);
    if (s)
        snprintf(s, n, "%s%s", prefix, name);
    return s;
}

static struct dl_layer_decl *new_decl(struct dl_expander *x, const struct dl_ynode *at)
{
    if (x->n >= MAX_LAYERS) {
        dl_yerrorf(x->err, DL_ERR_SPEC, at, "more than %d layers", MAX_LAYERS);
        return NULL;
    }
    if (x->n == x->cap) {
        int cap = x->cap ? 2 * x->cap : 64;
        struct dl_layer_decl *d = realloc(x->decls, sizeof *d * (size_t)cap);
        if (!d) {
            dl_errorf(x->err, DL_ERR_NOMEM, "out of memory reading layers");
            return NULL;
        }
        x->decls = d;
        x->cap = cap;
    }
    struct dl_layer_decl *d = &x->decls[x->n++];
    memset(d, 0, sizeof *d);
    d->loc = (struct dl_loc){at->file, at->line, at->col};
    d->block = x->block;
    return d;
}

/* Resolves one name written in a layer's inputs: "input" means the scope's
 * input; other names are local to the scope (block instance). */
static char *scope_name(const char *prefix, const char *scope_input, const char *name, struct dl_error *err)
{
    if (strcmp(name, "input") == 0)
        return dl_strdup(scope_input, err);
    return qualify(prefix, name, err);
}

static int declare_layer(struct dl_expander *x, const struct dl_ynode *item, const struct dl_ynode *list, int index,
                         const char *prefix, const char *scope_input, const char *prev, char **last)
{
    const struct dl_ynode *tn = dl_ymap_get(item, "type");
    if (!tn)
        return dl_yerrorf(x->err, DL_ERR_SPEC, item, "layer: missing key 'type' (or 'block')");
    const char *type;
    if (dl_y_string(tn, "layer type", &type, x->err))
        return DL_ERR_SPEC;
    const struct dl_op_kind *k = dl_op_find(type);
    if (!k) {
        char known[700];
        size_t used = 0;
        for (int i = 0; dl_op_kinds[i] && used < sizeof known; i++)
            used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", dl_op_kinds[i]->name);
        return dl_yerrorf(x->err, DL_ERR_SPEC, tn, "unknown layer type '%s' (known types: %s)", type, known);
    }
    char local[160];
    const struct dl_ynode *nn = dl_ymap_get(item, "name");
    if (nn) {
        const char *s;
        if (dl_y_string(nn, "layer name", &s, x->err))
            return DL_ERR_SPEC;
        if (!*s || strlen(s) >= sizeof local || strpbrk(s, " \t"))
            return dl_yerrorf(x->err, DL_ERR_SPEC, nn, "layer name: expected a non-empty name without spaces "
                              "of at most %zu characters, found '%s'", sizeof local - 1, s);
        snprintf(local, sizeof local, "%s", s);
    } else { /* automatic name: type + its count among unnamed layers of this list */
        int count = 1;
        for (int i = 0; i < index; i++) {
            const struct dl_ynode *t2 = dl_ymap_get(list->items[i], "type");
            count += !dl_ymap_get(list->items[i], "name") && t2 && t2->kind == DL_Y_SCALAR &&
                     strcmp(t2->str, type) == 0;
        }
        snprintf(local, sizeof local, "%s%d", type, count);
    }
    struct dl_layer_decl *d = new_decl(x, item);
    if (!d)
        return x->err->code;
    d->kind = k;
    d->name = qualify(prefix, local, x->err);
    d->attr = dl_calloc(1, k->attr_size, x->err);
    if (!d->name || !d->attr)
        return DL_ERR_NOMEM;
    if (dl_attrs_parse(k, item, d->name, d->attr, x->err))
        return DL_ERR_SPEC;
    long stage = -1;
    int split = DL_SPLIT_AUTO;
    const struct dl_ynode *sn = dl_ymap_get(item, "stage"), *pn = dl_ymap_get(item, "split");
    char what[2][200];
    snprintf(what[0], sizeof what[0], "layer '%s', key 'stage'", d->name);
    snprintf(what[1], sizeof what[1], "layer '%s', key 'split'", d->name);
    if ((sn && dl_y_int(sn, what[0], 0, 1 << 20, &stage, x->err)) ||
        (pn && dl_y_enum(pn, what[1], dl_split_names, &split, x->err)))
        return DL_ERR_SPEC;
    d->stage = (int)stage;
    d->split = (enum dl_split)split;
    const struct dl_ynode *is = dl_ymap_get(item, "init_std");
    char what_std[200];
    snprintf(what_std, sizeof what_std, "layer '%s', key 'init_std'", d->name);
    if (is && dl_y_float(is, what_std, 1e-12, 1e6, &d->init_std, x->err))
        return DL_ERR_SPEC;
    const struct dl_ynode *sh = dl_ymap_get(item, "share");
    if (sh && sh->kind != DL_Y_MAP)
        return dl_yerrorf(x->err, DL_ERR_SPEC, sh, "layer '%s', key 'share': expected a mapping {PARAMETER: LAYER} "
                          "(such as {weight: wte}), found %s", d->name, dl_ynode_kind_name(sh));
    if (sh && sh->n > 0 && !(d->share = dl_calloc((size_t)sh->n, sizeof *d->share, x->err)))
        return DL_ERR_NOMEM;
    for (int i = 0; sh && i < sh->n; i++) {
        const char *from;
        if (dl_y_string(sh->items[i], "share", &from, x->err))
            return DL_ERR_SPEC;
        struct dl_share_decl *sd = &d->share[i];
        d->n_share = i + 1;
        sd->param = dl_strdup(sh->keys[i]->str, x->err);
        sd->layer = qualify(prefix, from, x->err);
        if (!sd->param || !sd->layer)
            return DL_ERR_NOMEM;
        sd->loc = (struct dl_loc){sh->items[i]->file, sh->items[i]->line, sh->items[i]->col};
    }
    const struct dl_ynode *in = dl_ymap_get(item, "inputs");
    if (in) {
        const struct dl_ynode *one[1] = {in};
        const struct dl_ynode *const *names = in->kind == DL_Y_SEQ ? (const struct dl_ynode *const *)in->items : one;
        int count = in->kind == DL_Y_SEQ ? in->n : 1;
        if (count > DL_MAX_INPUTS)
            return dl_yerrorf(x->err, DL_ERR_SPEC, in, "layer '%s': at most %d inputs, found %d", d->name,
                              DL_MAX_INPUTS, count);
        for (int i = 0; i < count; i++) {
            const char *s;
            if (dl_y_string(names[i], "inputs", &s, x->err))
                return DL_ERR_SPEC;
            d->inputs[i] = scope_name(prefix, scope_input, s, x->err);
            if (!d->inputs[i])
                return DL_ERR_NOMEM;
            d->input_loc[i] = (struct dl_loc){names[i]->file, names[i]->line, names[i]->col};
            d->n_in = i + 1;
        }
    } else {
        d->inputs[0] = dl_strdup(prev, x->err);
        if (!d->inputs[0])
            return DL_ERR_NOMEM;
        d->n_in = 1;
    }
    *last = d->name;
    return DL_OK;
}

/* Builds the argument map of one block instance: the block's declared
 * arguments with their defaults, overridden by `args`, then by `over`. */
static struct dl_ynode *instance_args(struct dl_expander *x, const struct dl_ynode *block_args,
                                      const struct dl_ynode *args, const struct dl_ynode *over,
                                      const char *block_name)
{
    char what[160];
    snprintf(what, sizeof what, "arguments of block '%s'", block_name);
    if (block_args && block_args->kind != DL_Y_MAP) {
        dl_yerrorf(x->err, DL_ERR_SPEC, block_args, "block '%s': args: expected a mapping of names to defaults "
                   "(such as {width: 64}), found %s", block_name, dl_ynode_kind_name(block_args));
        return NULL;
    }
    const char *names[64];
    int n = 0;
    for (int i = 0; block_args && i < block_args->n && n < 63; i++)
        names[n++] = block_args->keys[i]->str;
    names[n] = NULL;
    if ((args && dl_y_check_keys(args, what, names, NULL, x->err)) ||
        (over && dl_y_check_keys(over, what, names, NULL, x->err)))
        return NULL;
    if (!block_args)
        return NULL;
    struct dl_ynode *m = dl_ynode_clone(block_args, NULL, x->err);
    if (!m)
        return NULL;
    for (int i = 0; i < m->n; i++) {
        const struct dl_ynode *v = over ? dl_ymap_get(over, m->keys[i]->str) : NULL;
        if (!v && args)
            v = dl_ymap_get(args, m->keys[i]->str);
        if (!v)
            continue;
        struct dl_ynode *c = dl_ynode_clone(v, NULL, x->err);
        if (!c) {
            dl_ynode_free(m);
            return NULL;
        }
        dl_ynode_free(m->items[i]);
        m->items[i] = c;
    }
    return m;
}

static int expand_block(struct dl_expander *x, const struct dl_ynode *item, const char *prefix, const char *prev,
                        int depth, char **last)
{
    static const char *const keys[] = {"name", "block", "repeat", "args", "first", NULL};
    if (dl_y_check_keys(item, "block use", keys, NULL, x->err))
        return DL_ERR_SPEC;
    if (depth >= MAX_BLOCK_DEPTH)
        return dl_yerrorf(x->err, DL_ERR_SPEC, item, "blocks nested deeper than %d (does a block use itself?)",
                          MAX_BLOCK_DEPTH);
    const struct dl_ynode *nn = dl_ymap_get(item, "name");
    const char *name;
    if (!nn)
        return dl_yerrorf(x->err, DL_ERR_SPEC, item, "block use: missing key 'name' (instance names compose "
                          "as name.index.layer)");
    if (dl_y_string(nn, "block use name", &name, x->err))
        return DL_ERR_SPEC;
    long repeat = 1;
    const struct dl_ynode *rn = dl_ymap_get(item, "repeat");
    if (rn && dl_y_int(rn, "block use repeat", 1, 10000, &repeat, x->err))
        return DL_ERR_SPEC;
    const struct dl_ynode *args = dl_ymap_get(item, "args");
    const struct dl_ynode *first = dl_ymap_get(item, "first");
    if (args && args->kind != DL_Y_MAP)
        return dl_yerrorf(x->err, DL_ERR_SPEC, args, "block use args: expected a mapping, found %s",
                          dl_ynode_kind_name(args));
    static const char *const first_keys[] = {"block", "args", NULL};
    if (first && dl_y_check_keys(first, "block use first", first_keys, NULL, x->err))
        return DL_ERR_SPEC;
    const char *cur_input = prev;
    for (long r = 0; r < repeat; r++) {
        const struct dl_ynode *bn = dl_ymap_get(item, "block");
        const struct dl_ynode *over = NULL;
        if (r == 0 && first) {
            if (dl_ymap_get(first, "block"))
                bn = dl_ymap_get(first, "block");
            over = dl_ymap_get(first, "args");
        }
        const char *block_name;
        if (!bn)
            return dl_yerrorf(x->err, DL_ERR_SPEC, item, "block use: missing key 'block'");
        if (dl_y_string(bn, "block", &block_name, x->err))
            return DL_ERR_SPEC;
        const struct dl_ynode *def = dl_ymap_get(x->blocks, block_name);
        if (!def)
            return dl_yerrorf(x->err, DL_ERR_SPEC, bn, "unknown block '%s' (define it under 'blocks:')", block_name);
        static const char *const def_keys[] = {"args", "layers", "output", NULL};
        char what[160];
        snprintf(what, sizeof what, "block '%s'", block_name);
        if (dl_y_check_keys(def, what, def_keys, NULL, x->err))
            return DL_ERR_SPEC;
        const struct dl_ynode *layers = dl_ymap_get(def, "layers");
        if (!layers || layers->kind != DL_Y_SEQ || layers->n == 0)
            return dl_yerrorf(x->err, DL_ERR_SPEC, def, "block '%s': expected a non-empty list 'layers'", block_name);
        struct dl_ynode *iargs = instance_args(x, dl_ymap_get(def, "args"), args, over, block_name);
        if (!iargs && x->err->code)
            return x->err->code;
        struct dl_ynode *body = dl_ynode_clone(layers, iargs, x->err);
        dl_ynode_free(iargs);
        if (!body || keep_clone(x, body))
            return x->err->code ? x->err->code : DL_ERR_NOMEM;
        char inst[200];
        if (rn)
            snprintf(inst, sizeof inst, "%s%s.%ld.", prefix, name, r);
        else
            snprintf(inst, sizeof inst, "%s%s.", prefix, name);
        char *out = NULL;
        int outer = x->block; /* this instance's layers are block blocks_made (the innermost instance) */
        x->block = x->blocks_made++;
        int rc = dl_expand_list(x, body, inst, cur_input, depth + 1, &out);
        x->block = outer;
        if (rc)
            return rc;
        const struct dl_ynode *on = dl_ymap_get(def, "output");
        if (on) {
            const char *s;
            if (dl_y_string(on, "block output", &s, x->err))
                return DL_ERR_SPEC;
            char *q = qualify(inst, s, x->err);
            int found = -1;
            for (int i = 0; q && i < x->n; i++)
                if (strcmp(x->decls[i].name, q) == 0)
                    found = i;
            free(q);
            if (found < 0)
                return dl_yerrorf(x->err, DL_ERR_SPEC, on, "block '%s': output '%s' is not a layer of the block",
                                  block_name, s);
            out = x->decls[found].name;
        }
        cur_input = out;
    }
    *last = (char *)cur_input;
    return DL_OK;
}

int dl_expand_list(struct dl_expander *x, const struct dl_ynode *list, const char *prefix,
                   const char *scope_input, int depth, char **last)
{
    if (list->kind != DL_Y_SEQ)
        return dl_yerrorf(x->err, DL_ERR_SPEC, list, "layers: expected a list, found %s", dl_ynode_kind_name(list));
    const char *prev = scope_input;
    for (int i = 0; i < list->n; i++) {
        const struct dl_ynode *item = list->items[i];
        if (item->kind != DL_Y_MAP)
            return dl_yerrorf(x->err, DL_ERR_SPEC, item, "layer: expected a mapping such as {type: relu}, found %s",
                              dl_ynode_kind_name(item));
        char *out = NULL;
        int rc = dl_ymap_get(item, "block") || (!dl_ymap_get(item, "type") && dl_ymap_get(item, "first"))
                     ? expand_block(x, item, prefix, prev, depth, &out)
                     : declare_layer(x, item, list, i, prefix, scope_input, prev, &out);
        if (rc)
            return rc;
        prev = out;
    }
    *last = (char *)prev;
    return DL_OK;
}

int dl_expand_loss(struct dl_expander *x, const struct dl_ynode *ln, const char *prev)
{
    /* `loss: softmax_cross_entropy` or `loss: {type: ..., inputs: ..., ...}` */
    struct dl_ynode *m = NULL;
    const struct dl_ynode *item = ln;
    if (ln->kind == DL_Y_SCALAR) {
        char text[200];
        snprintf(text, sizeof text, "{type: %s}", ln->str);
        struct dl_ydoc *tmp;
        if (dl_yaml_load_string(ln->file, text, &tmp, x->err) || !tmp->root)
            return dl_yerrorf(x->err, DL_ERR_SPEC, ln, "loss: expected a loss type such as softmax_cross_entropy");
        m = tmp->root;
        tmp->root = NULL;
        dl_ydoc_free(tmp);
        m->line = ln->line; /* point messages at the original scalar */
        m->col = ln->col;
        m->file = ln->file;
        for (int i = 0; i < m->n; i++) {
            m->keys[i]->file = m->items[i]->file = ln->file;
            m->keys[i]->line = m->items[i]->line = ln->line;
            m->keys[i]->col = m->items[i]->col = ln->col;
        }
        if (keep_clone(x, m))
            return DL_ERR_NOMEM;
        item = m;
    } else if (ln->kind != DL_Y_MAP)
        return dl_yerrorf(x->err, DL_ERR_SPEC, ln, "loss: expected a loss type or a mapping, found %s",
                          dl_ynode_kind_name(ln));
    const struct dl_ynode *tn = dl_ymap_get(item, "type");
    if (tn && tn->kind == DL_Y_SCALAR) {
        const struct dl_op_kind *k = dl_op_find(tn->str);
        if (k && !k->is_loss)
            return dl_yerrorf(x->err, DL_ERR_SPEC, tn, "loss: '%s' is a layer type, not a loss (expected "
                              "softmax_cross_entropy, or mse or l1 for float targets)", tn->str);
    }
    struct dl_ynode seq = {.kind = DL_Y_SEQ, .file = item->file, .line = item->line, .col = item->col, .n = 1,
                           .items = (struct dl_ynode **)&item};
    char *out;
    int rc = dl_expand_list(x, &seq, "", prev, 0, &out);
    if (rc)
        return rc;
    struct dl_layer_decl *d = &x->decls[x->n - 1];
    if (!dl_ymap_get(item, "name")) {
        free(d->name);
        d->name = dl_strdup("loss", x->err);
        if (!d->name)
            return DL_ERR_NOMEM;
    }
    if (!d->kind->is_loss)
        return dl_yerrorf(x->err, DL_ERR_SPEC, item, "loss: '%s' is not a loss", d->kind->name);
    return DL_OK;
}

