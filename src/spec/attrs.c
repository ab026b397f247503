/* attrs.c: table-driven parsing of layer attributes (see attrs.h). */
#include "spec/attrs.h"

#include <float.h>
#include <limits.h>
#include <string.h>

const char *const dl_layer_common_keys[] = {"name", "type", "inputs", "stage", "split", "share", "init_std", NULL};

static void set_default(const struct dl_attr_desc *d, void *attr)
{
    char *p = (char *)attr + d->offset;
    switch (d->type) {
    case DL_ATTR_INT:
    case DL_ATTR_BOOL:
    case DL_ATTR_ENUM:
        *(int *)p = (int)d->def;
        break;
    case DL_ATTR_INT2:
        ((int *)p)[0] = ((int *)p)[1] = (int)d->def;
        break;
    case DL_ATTR_FLOAT:
        *(double *)p = d->def;
        break;
    }
}

void dl_attrs_defaults(const struct dl_op_kind *op, void *attr)
{
    for (int i = 0; i < op->n_attrs; i++)
        set_default(&op->attrs[i], attr);
}

static int parse_one(const struct dl_attr_desc *d, const struct dl_ynode *v, const char *what,
                     void *attr, struct dl_error *err)
{
    char *p = (char *)attr + d->offset;
    long lv;
    long lo = d->min < (double)INT_MIN ? INT_MIN : (long)d->min;
    long hi = d->max > (double)INT_MAX ? INT_MAX : (long)d->max;
    switch (d->type) {
    case DL_ATTR_INT:
        if (dl_y_int(v, what, lo, hi, &lv, err))
            return DL_ERR_SPEC;
        *(int *)p = (int)lv;
        return DL_OK;
    case DL_ATTR_INT2:
        if (v->kind == DL_Y_SEQ) {
            if (v->n != 2)
                return dl_yerrorf(err, DL_ERR_SPEC, v, "%s: expected an integer or a list [height, width], "
                                  "found a list of %d items", what, v->n);
            for (int k = 0; k < 2; k++) {
                if (dl_y_int(v->items[k], what, lo, hi, &lv, err))
                    return DL_ERR_SPEC;
                ((int *)p)[k] = (int)lv;
            }
            return DL_OK;
        }
        if (dl_y_int(v, what, lo, hi, &lv, err))
            return DL_ERR_SPEC;
        ((int *)p)[0] = ((int *)p)[1] = (int)lv;
        return DL_OK;
    case DL_ATTR_FLOAT:
        return dl_y_float(v, what, d->min, d->max, (double *)p, err);
    case DL_ATTR_BOOL:
        return dl_y_bool(v, what, (int *)p, err);
    case DL_ATTR_ENUM:
        return dl_y_enum(v, what, d->choices, (int *)p, err);
    }
    return dl_errorf(err, DL_ERR_INTERNAL, "bad attribute type");
}

int dl_attrs_parse(const struct dl_op_kind *op, const struct dl_ynode *layer, const char *layer_name,
                   void *attr, struct dl_error *err)
{
    char what[256];
    snprintf(what, sizeof what, "layer '%s' (%s)", layer_name, op->name);
    const char *keys[64];
    int nk = 0;
    for (int i = 0; i < op->n_attrs && nk < 63; i++)
        keys[nk++] = op->attrs[i].key;
    keys[nk] = NULL;
    if (dl_y_check_keys(layer, what, dl_layer_common_keys, keys, err))
        return DL_ERR_SPEC;
    dl_attrs_defaults(op, attr);
    for (int i = 0; i < op->n_attrs; i++) {
        const struct dl_attr_desc *d = &op->attrs[i];
        const struct dl_ynode *v = dl_ymap_get(layer, d->key);
        if (!v) {
            if (d->required)
                return dl_yerrorf(err, DL_ERR_SPEC, layer, "%s: missing required key '%s' (%s)", what,
                                  d->key, d->doc);
            continue;
        }
        char kwhat[300];
        snprintf(kwhat, sizeof kwhat, "%s, key '%s'", what, d->key);
        if (parse_one(d, v, kwhat, attr, err))
            return DL_ERR_SPEC;
    }
    if (op->check && op->check(attr, err)) {
        char msg[sizeof err->msg];
        memcpy(msg, err->msg, sizeof msg);
        return dl_yerrorf(err, DL_ERR_SPEC, layer, "%s: %s", what, msg);
    }
    return DL_OK;
}

int dl_attrs_from_string(const struct dl_op_kind *op, const char *yaml, void *attr,
                         struct dl_error *err)
{
    struct dl_ydoc *doc;
    int rc = dl_yaml_load_string("<attributes>", yaml, &doc, err);
    if (rc)
        return rc;
    if (!doc->root)
        rc = dl_errorf(err, DL_ERR_SPEC, "<attributes>: empty");
    else
        rc = dl_attrs_parse(op, doc->root, "test", attr, err);
    dl_ydoc_free(doc);
    return rc;
}

void dl_attrs_print_doc(FILE *f, const struct dl_op_kind *op)
{
    if (op->max_inputs == op->min_inputs)
        fprintf(f, "%s: %s (inputs: %d)\n", op->name, op->summary, op->min_inputs);
    else if (op->max_inputs >= DL_MAX_INPUTS)
        fprintf(f, "%s: %s (inputs: %d or more)\n", op->name, op->summary, op->min_inputs);
    else
        fprintf(f, "%s: %s (inputs: %d to %d)\n", op->name, op->summary, op->min_inputs, op->max_inputs);
    for (int i = 0; i < op->n_attrs; i++) {
        const struct dl_attr_desc *d = &op->attrs[i];
        fprintf(f, "  %-18s ", d->key);
        switch (d->type) {
        case DL_ATTR_INT: fprintf(f, "integer"); break;
        case DL_ATTR_INT2: fprintf(f, "integer or [h, w]"); break;
        case DL_ATTR_FLOAT: fprintf(f, "number"); break;
        case DL_ATTR_BOOL: fprintf(f, "true|false"); break;
        case DL_ATTR_ENUM:
            for (int c = 0; d->choices[c]; c++)
                fprintf(f, "%s%s", c ? "|" : "", d->choices[c]);
            break;
        }
        if (d->required)
            fprintf(f, ", required");
        else if (d->type == DL_ATTR_ENUM)
            fprintf(f, ", default %s", d->choices[(int)d->def]);
        else if (d->type == DL_ATTR_BOOL)
            fprintf(f, ", default %s", d->def != 0 ? "true" : "false");
        else
            fprintf(f, ", default %g", d->def);
        fprintf(f, ": %s\n", d->doc);
    }
}
