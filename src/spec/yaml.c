/* yaml.c: libyaml event stream -> struct dl_ynode tree with locations, plus
 * typed, located readers for scalars.  This is the only file that includes
 * <yaml.h>. */
#include "spec/yaml.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

int dl_yerrorf(struct dl_error *err, int code, const struct dl_ynode *at, const char *fmt, ...)
{
    if (!err)
        return code;
    char msg[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (at && at->line == 0)
        return dl_errorf(err, code, "%s: %s", at->file, msg);
    if (at)
        return dl_errorf(err, code, "%s:%d:%d: %s", at->file, at->line, at->col, msg);
    return dl_errorf(err, code, "%s", msg);
}

const char *dl_ynode_kind_name(const struct dl_ynode *n)
{
    if (!n)
        return "nothing";
    switch (n->kind) {
    case DL_Y_SCALAR: return "a scalar";
    case DL_Y_SEQ: return "a list";
    case DL_Y_MAP: return "a mapping";
    }
    return "?";
}

void dl_ynode_free(struct dl_ynode *n)
{
    if (!n)
        return;
    for (int i = 0; i < n->n; i++) {
        if (n->keys)
            dl_ynode_free(n->keys[i]);
        dl_ynode_free(n->items[i]);
    }
    free(n->keys);
    free(n->items);
    free(n->str);
    free(n);
}

void dl_ynode_relabel(struct dl_ynode *n, const char *label)
{
    if (!n)
        return;
    n->file = label;
    n->line = n->col = 0;
    for (int i = 0; i < n->n; i++) {
        if (n->keys)
            dl_ynode_relabel(n->keys[i], label);
        dl_ynode_relabel(n->items[i], label);
    }
}

/* A node made for dl_ydoc_set: a mapping, or the scalar key text. */
static struct dl_ynode *made_node(enum dl_ynode_kind kind, const char *key, int key_len, const char *label,
                                  struct dl_error *err)
{
    struct dl_ynode *n = dl_calloc(1, sizeof *n, err);
    if (!n)
        return NULL;
    n->kind = kind;
    n->file = label;
    if (key && !(n->str = strndup(key, (size_t)key_len))) {
        free(n);
        dl_errorf(err, DL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return n;
}

/* Appends key: value to map m (owning both). */
static int map_add(struct dl_ynode *m, struct dl_ynode *key, struct dl_ynode *value, struct dl_error *err)
{
    struct dl_ynode **keys = realloc(m->keys, sizeof *keys * (size_t)(m->n + 1));
    if (keys)
        m->keys = keys;
    struct dl_ynode **items = keys ? realloc(m->items, sizeof *items * (size_t)(m->n + 1)) : NULL;
    if (!items)
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory");
    m->items = items;
    m->keys[m->n] = key;
    m->items[m->n++] = value;
    return DL_OK;
}

/* A segment of a --set key, shortened for messages. */
static struct dl_short short_seg(const char *seg, int len)
{
    char *copy = strndup(seg, (size_t)len);
    struct dl_short s = dl_short(copy ? copy : "");
    free(copy);
    return s;
}

/* Where a node is, for messages: "file:line:col" or the label. */
static const char *where(const struct dl_ynode *n, char *buf, size_t size)
{
    if (n->line)
        snprintf(buf, size, "%s:%d:%d", n->file, n->line, n->col);
    else
        snprintf(buf, size, "%s", n->file);
    return buf;
}

int dl_ydoc_set(struct dl_ydoc *doc, const char *path, struct dl_ynode *value, const char *label,
                struct dl_error *err)
{
    struct dl_ynode **slot = &doc->root;
    const char *seg = path;
    char loc[600];
    int rc = DL_OK;
    for (;;) {
        const char *dot = strchr(seg, '.');
        int len = dot ? (int)(dot - seg) : (int)strlen(seg);
        if (len == 0) {
            rc = dl_errorf(err, DL_ERR_SPEC, "%s: expected KEY=VALUE with KEY such as train.optimizer.lr, found "
                           "an empty key in '%s'", label, dl_short(path).s);
            break;
        }
        struct dl_ynode *n = *slot;
        if (!n) { /* an empty document: a mapping */
            if (!(n = *slot = made_node(DL_Y_MAP, NULL, 0, label, err))) {
                rc = DL_ERR_NOMEM;
                break;
            }
        }
        struct dl_ynode **next = NULL;
        if (n->kind == DL_Y_MAP) {
            for (int i = 0; i < n->n && !next; i++)
                if ((int)strlen(n->keys[i]->str) == len && strncmp(n->keys[i]->str, seg, (size_t)len) == 0)
                    next = &n->items[i];
            if (!next) {
                struct dl_ynode *key = made_node(DL_Y_SCALAR, seg, len, label, err);
                struct dl_ynode *below = key && dot ? made_node(DL_Y_MAP, NULL, 0, label, err) : NULL;
                if (!key || (dot && !below) || map_add(n, key, below, err)) {
                    dl_ynode_free(key);
                    dl_ynode_free(below);
                    rc = DL_ERR_NOMEM;
                    break;
                }
                next = &n->items[n->n - 1];
            }
        } else if (n->kind == DL_Y_SEQ) {
            char *end;
            long index = strtol(seg, &end, 10);
            for (int i = 0; i < n->n && !next; i++) {
                const struct dl_ynode *name = dl_ymap_get(n->items[i], "name");
                if (name && name->kind == DL_Y_SCALAR && (int)strlen(name->str) == len &&
                    strncmp(name->str, seg, (size_t)len) == 0)
                    next = &n->items[i];
            }
            if (!next && end == seg + len && index >= 0 && index < n->n)
                next = &n->items[index];
            if (!next) {
                struct dl_short name = short_seg(seg, len);
                rc = dl_errorf(err, DL_ERR_SPEC, "%s: '%s' of '%s': the list at %s has no item named '%s' and "
                               "%d items (0 to %d)", label, name.s, dl_short(path).s, where(n, loc, sizeof loc),
                               name.s, n->n, n->n - 1);
                break;
            }
        } else {
            rc = dl_errorf(err, DL_ERR_SPEC, "%s: '%s' of '%s': %s is a scalar, not a mapping or list", label,
                           short_seg(seg, len).s, dl_short(path).s, where(n, loc, sizeof loc));
            break;
        }
        if (!dot) {
            dl_ynode_free(*next);
            *next = value;
            return DL_OK;
        }
        slot = next;
        seg = dot + 1;
    }
    dl_ynode_free(value);
    return rc;
}

void dl_ydoc_free(struct dl_ydoc *doc)
{
    if (!doc)
        return;
    dl_ynode_free(doc->root);
    free(doc->file);
    free(doc);
}

/* ------------------------------------------------------------ tree building */
struct builder {
    yaml_parser_t parser;
    const char *file;
    struct dl_error *err;
};

static struct dl_ynode *new_node(struct builder *b, enum dl_ynode_kind kind, yaml_mark_t mark)
{
    struct dl_ynode *n = dl_calloc(1, sizeof *n, b->err);
    if (!n)
        return NULL;
    n->kind = kind;
    n->file = b->file;
    n->line = (int)mark.line + 1;
    n->col = (int)mark.column + 1;
    return n;
}

static int push_child(struct builder *b, struct dl_ynode *parent, struct dl_ynode *key,
                      struct dl_ynode *child)
{
    struct dl_ynode **items = realloc(parent->items, sizeof *items * (parent->n + 1));
    if (!items)
        return dl_errorf(b->err, DL_ERR_NOMEM, "out of memory reading %s", b->file);
    parent->items = items;
    if (parent->kind == DL_Y_MAP) {
        struct dl_ynode **keys = realloc(parent->keys, sizeof *keys * (parent->n + 1));
        if (!keys)
            return dl_errorf(b->err, DL_ERR_NOMEM, "out of memory reading %s", b->file);
        parent->keys = keys;
        parent->keys[parent->n] = key;
    }
    parent->items[parent->n++] = child;
    return DL_OK;
}

static int parse_error(struct builder *b)
{
    yaml_parser_t *p = &b->parser;
    yaml_mark_t m = p->problem_mark;
    if (p->error == YAML_MEMORY_ERROR)
        return dl_errorf(b->err, DL_ERR_NOMEM, "out of memory reading %s", b->file);
    if (p->error == YAML_READER_ERROR)
        return dl_errorf(b->err, DL_ERR_SPEC, "%s: %s (byte offset %zu)", b->file,
                         p->problem ? p->problem : "unreadable input", p->problem_offset);
    const char *ctx = p->context ? p->context : "";
    return dl_errorf(b->err, DL_ERR_SPEC, "%s:%d:%d: YAML syntax error: %s%s%s", b->file,
                     (int)m.line + 1, (int)m.column + 1, p->problem ? p->problem : "invalid YAML",
                     *ctx ? " " : "", ctx);
}

/* Parses one node whose first event is ev (already taken); depth guards the
 * recursion against hostile nesting. */
static int build_node(struct builder *b, yaml_event_t *ev, int depth, struct dl_ynode **out);

static int build_collection(struct builder *b, struct dl_ynode *n, int depth)
{
    yaml_event_type_t end = n->kind == DL_Y_MAP ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&b->parser, &ev))
            return parse_error(b);
        if (ev.type == end) {
            yaml_event_delete(&ev);
            return DL_OK;
        }
        struct dl_ynode *key = NULL, *val = NULL;
        int rc = build_node(b, &ev, depth + 1, n->kind == DL_Y_MAP ? &key : &val);
        if (rc)
            return rc;
        if (n->kind == DL_Y_MAP) {
            if (key->kind != DL_Y_SCALAR) {
                rc = dl_yerrorf(b->err, DL_ERR_SPEC, key, "mapping keys must be plain names, found %s",
                                dl_ynode_kind_name(key));
                dl_ynode_free(key);
                return rc;
            }
            for (int i = 0; i < n->n; i++)
                if (strcmp(n->keys[i]->str, key->str) == 0) {
                    rc = dl_yerrorf(b->err, DL_ERR_SPEC, key, "duplicate key '%s' (first given at line %d)",
                                    dl_short(key->str).s, n->keys[i]->line);
                    dl_ynode_free(key);
                    return rc;
                }
            yaml_event_t vev;
            if (!yaml_parser_parse(&b->parser, &vev)) {
                dl_ynode_free(key);
                return parse_error(b);
            }
            rc = build_node(b, &vev, depth + 1, &val);
            if (rc) {
                dl_ynode_free(key);
                return rc;
            }
        }
        rc = push_child(b, n, key, val);
        if (rc) {
            dl_ynode_free(key);
            dl_ynode_free(val);
            return rc;
        }
    }
}

/* An anchor (&name) or an explicit tag (!!str, !name, !) on a node:
 * DL_ERR_SPEC at its place.  The schema reads plain values only: an alias
 * would stand for a node given elsewhere, and a tag would change how a
 * scalar reads without the schema seeing it (`units: !!str 7`). */
static int refuse_properties(struct builder *b, const yaml_event_t *ev)
{
    const yaml_char_t *anchor = NULL, *tag = NULL;
    if (ev->type == YAML_SCALAR_EVENT)
        anchor = ev->data.scalar.anchor, tag = ev->data.scalar.tag;
    else if (ev->type == YAML_SEQUENCE_START_EVENT)
        anchor = ev->data.sequence_start.anchor, tag = ev->data.sequence_start.tag;
    else if (ev->type == YAML_MAPPING_START_EVENT)
        anchor = ev->data.mapping_start.anchor, tag = ev->data.mapping_start.tag;
    int line = (int)ev->start_mark.line + 1, col = (int)ev->start_mark.column + 1;
    if (anchor)
        return dl_errorf(b->err, DL_ERR_SPEC, "%s:%d:%d: expected a plain value, found the YAML anchor &%s (anchors "
                         "and aliases are not accepted: write the value out)", b->file, line, col,
                         dl_short((const char *)anchor).s);
    static const char core[] = "tag:yaml.org,2002:"; /* what !! stands for */
    const char *t = (const char *)tag;
    int is_core = t && strncmp(t, core, sizeof core - 1) == 0;
    if (t)
        return dl_errorf(b->err, DL_ERR_SPEC, "%s:%d:%d: expected a plain value, found the YAML tag %s%s (tags are "
                         "not accepted: write the value without it)", b->file, line, col, is_core ? "!!" : "",
                         dl_short(is_core ? t + sizeof core - 1 : t).s);
    return DL_OK;
}

static int build_node(struct builder *b, yaml_event_t *ev, int depth, struct dl_ynode **out)
{
    int rc = DL_OK;
    struct dl_ynode *n = NULL;
    *out = NULL;
    if (depth > DL_YAML_MAX_DEPTH) {
        rc = dl_errorf(b->err, DL_ERR_SPEC, "%s:%d:%d: nesting deeper than %d levels", b->file,
                       (int)ev->start_mark.line + 1, (int)ev->start_mark.column + 1, DL_YAML_MAX_DEPTH);
        yaml_event_delete(ev);
        return rc;
    }
    if ((rc = refuse_properties(b, ev))) {
        yaml_event_delete(ev);
        return rc;
    }
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        n = new_node(b, DL_Y_SCALAR, ev->start_mark);
        if (n) {
            n->str = dl_strdup((const char *)ev->data.scalar.value, b->err);
            n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
            if (!n->str)
                rc = DL_ERR_NOMEM;
        } else
            rc = DL_ERR_NOMEM;
        break;
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT:
        n = new_node(b, ev->type == YAML_MAPPING_START_EVENT ? DL_Y_MAP : DL_Y_SEQ, ev->start_mark);
        if (!n) {
            rc = DL_ERR_NOMEM;
            break;
        }
        yaml_event_delete(ev);
        rc = build_collection(b, n, depth);
        if (rc) {
            dl_ynode_free(n);
            return rc;
        }
        *out = n;
        return DL_OK;
    case YAML_ALIAS_EVENT:
        rc = dl_errorf(b->err, DL_ERR_SPEC, "%s:%d:%d: expected a plain value, found the YAML alias *%s (anchors "
                       "and aliases are not accepted: write the value out)", b->file, (int)ev->start_mark.line + 1,
                       (int)ev->start_mark.column + 1, dl_short((const char *)ev->data.alias.anchor).s);
        break;
    default:
        rc = dl_errorf(b->err, DL_ERR_SPEC, "%s:%d:%d: unexpected YAML event", b->file,
                       (int)ev->start_mark.line + 1, (int)ev->start_mark.column + 1);
        break;
    }
    yaml_event_delete(ev);
    if (rc) {
        dl_ynode_free(n);
        return rc;
    }
    *out = n;
    return DL_OK;
}

static int load(struct builder *b, struct dl_ydoc *doc)
{
    int rc = DL_OK, docs = 0;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&b->parser, &ev))
            return parse_error(b);
        yaml_event_type_t t = ev.type;
        if (t == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            return DL_OK;
        }
        if (t == YAML_STREAM_START_EVENT || t == YAML_DOCUMENT_END_EVENT) {
            yaml_event_delete(&ev);
            continue;
        }
        if (t == YAML_DOCUMENT_START_EVENT) {
            if (++docs > 1) {
                rc = dl_errorf(b->err, DL_ERR_SPEC, "%s:%d:%d: a network file holds one YAML document, found a second",
                               b->file, (int)ev.start_mark.line + 1, (int)ev.start_mark.column + 1);
                yaml_event_delete(&ev);
                return rc;
            }
            yaml_event_delete(&ev);
            continue;
        }
        rc = build_node(b, &ev, 0, &doc->root);
        if (rc)
            return rc;
    }
}

static int load_with(struct builder *b, const char *name, struct dl_ydoc **out, struct dl_error *err)
{
    struct dl_ydoc *doc = dl_calloc(1, sizeof *doc, err);
    if (!doc)
        return DL_ERR_NOMEM;
    doc->file = dl_strdup(name, err);
    if (!doc->file) {
        free(doc);
        return DL_ERR_NOMEM;
    }
    b->file = doc->file;
    b->err = err;
    int rc = load(b, doc);
    if (rc) {
        dl_ydoc_free(doc);
        return rc;
    }
    *out = doc;
    return DL_OK;
}

int dl_yaml_load_file(const char *path, struct dl_ydoc **out, struct dl_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return dl_errorf(err, DL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct builder b;
    memset(&b, 0, sizeof b);
    if (!yaml_parser_initialize(&b.parser)) {
        fclose(f);
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory starting the YAML parser");
    }
    yaml_parser_set_input_file(&b.parser, f);
    int rc = load_with(&b, path, out, err);
    yaml_parser_delete(&b.parser);
    fclose(f);
    return rc;
}

int dl_yaml_load_string(const char *name, const char *text, struct dl_ydoc **out,
                        struct dl_error *err)
{
    struct builder b;
    memset(&b, 0, sizeof b);
    if (!yaml_parser_initialize(&b.parser))
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory starting the YAML parser");
    yaml_parser_set_input_string(&b.parser, (const unsigned char *)text, strlen(text));
    int rc = load_with(&b, name, out, err);
    yaml_parser_delete(&b.parser);
    return rc;
}

/* ------------------------------------------------------------ clone */
/* The value of one factor of a product: an integer, or $name of args
 * holding one.  0: not a factor (the text stays as it is). */
static int factor_value(const char *f, size_t len, const struct dl_ynode *args, long long *v)
{
    char name[128], *end;
    if (len == 0 || len >= sizeof name)
        return 0;
    memcpy(name, f, len);
    name[len] = 0;
    const char *digits = name;
    if (name[0] == '$') {
        const struct dl_ynode *a = dl_ymap_get(args, name + 1);
        if (!a || a->kind != DL_Y_SCALAR || a->quoted)
            return 0;
        digits = a->str;
    }
    errno = 0;
    *v = strtoll(digits, &end, 10);
    return end != digits && *end == 0 && errno == 0;
}

/* "$a*3", "4*$a*$b": the product of integers and integer arguments, as
 * decimal text in buf; NULL when text is no such product (or overflows). */
static const char *product(const char *text, const struct dl_ynode *args, char *buf, size_t size)
{
    if (!strchr(text, '*') || !strchr(text, '$'))
        return NULL;
    long long p = 1;
    for (const char *f = text;;) {
        const char *star = strchr(f, '*');
        size_t len = star ? (size_t)(star - f) : strlen(f);
        long long v;
        if (!factor_value(f, len, args, &v) || __builtin_mul_overflow(p, v, &p))
            return NULL;
        if (!star)
            break;
        f = star + 1;
    }
    snprintf(buf, size, "%lld", p);
    return buf;
}

struct dl_ynode *dl_ynode_clone(const struct dl_ynode *n, const struct dl_ynode *args,
                                struct dl_error *err)
{
    struct dl_ynode *c = dl_calloc(1, sizeof *c, err);
    if (!c)
        return NULL;
    *c = *n;
    c->str = NULL;
    c->keys = NULL;
    c->items = NULL;
    c->n = 0;
    if (n->kind == DL_Y_SCALAR) {
        const char *text = n->str, *prod;
        char buf[32];
        if (args && !n->quoted && text[0] == '$' && dl_ymap_get(args, text + 1)) {
            const struct dl_ynode *a = dl_ymap_get(args, text + 1);
            if (a->kind == DL_Y_SCALAR) {
                text = a->str;
                c->quoted = a->quoted;
            }
        } else if (args && !n->quoted && (prod = product(text, args, buf, sizeof buf))) {
            text = prod;
        }
        c->str = dl_strdup(text, err);
        if (!c->str) {
            free(c);
            return NULL;
        }
        return c;
    }
    c->items = dl_calloc((size_t)n->n, sizeof *c->items, err);
    if (n->kind == DL_Y_MAP)
        c->keys = dl_calloc((size_t)n->n, sizeof *c->keys, err);
    if (!c->items || (n->kind == DL_Y_MAP && !c->keys)) {
        dl_ynode_free(c);
        return NULL;
    }
    for (int i = 0; i < n->n; i++) {
        c->items[i] = dl_ynode_clone(n->items[i], args, err);
        if (n->kind == DL_Y_MAP)
            c->keys[i] = dl_ynode_clone(n->keys[i], NULL, err);
        c->n = i + 1;
        if (!c->items[i] || (n->kind == DL_Y_MAP && !c->keys[i])) {
            dl_ynode_free(c);
            return NULL;
        }
    }
    return c;
}

const struct dl_ynode *dl_ymap_get(const struct dl_ynode *map, const char *key)
{
    if (!map || map->kind != DL_Y_MAP)
        return NULL;
    for (int i = 0; i < map->n; i++)
        if (strcmp(map->keys[i]->str, key) == 0)
            return map->items[i];
    return NULL;
}

/* ------------------------------------------------------------ typed readers */
static int want_scalar(const struct dl_ynode *n, const char *what, const char *expected,
                       struct dl_error *err)
{
    if (n->kind != DL_Y_SCALAR)
        return dl_yerrorf(err, DL_ERR_SPEC, n, "%s: expected %s, found %s", what, expected,
                          dl_ynode_kind_name(n));
    return DL_OK;
}

int dl_y_int(const struct dl_ynode *n, const char *what, long min, long max, long *out,
             struct dl_error *err)
{
    if (want_scalar(n, what, "an integer", err))
        return DL_ERR_SPEC;
    char *end;
    errno = 0;
    long v = strtol(n->str, &end, 10);
    if (n->quoted || end == n->str || *end || errno)
        return dl_yerrorf(err, DL_ERR_SPEC, n, "%s: expected an integer, found '%s'", what,
                          dl_short(n->str).s);
    if (v < min || v > max)
        return dl_yerrorf(err, DL_ERR_SPEC, n, "%s: expected an integer in [%ld, %ld], found %ld",
                          what, min, max, v);
    *out = v;
    return DL_OK;
}

int dl_y_float(const struct dl_ynode *n, const char *what, double min, double max, double *out,
               struct dl_error *err)
{
    if (want_scalar(n, what, "a number", err))
        return DL_ERR_SPEC;
    char *end;
    errno = 0;
    double v = strtod(n->str, &end);
    if (n->quoted || end == n->str || *end || errno || !isfinite(v))
        return dl_yerrorf(err, DL_ERR_SPEC, n, "%s: expected a finite number, found '%s'", what,
                          dl_short(n->str).s);
    if (v < min || v > max)
        return dl_yerrorf(err, DL_ERR_SPEC, n, "%s: expected a number in [%g, %g], found %g", what,
                          min, max, v);
    *out = v;
    return DL_OK;
}

int dl_y_bool(const struct dl_ynode *n, const char *what, int *out, struct dl_error *err)
{
    if (want_scalar(n, what, "true or false", err))
        return DL_ERR_SPEC;
    if (!n->quoted && (!strcasecmp(n->str, "true") || !strcasecmp(n->str, "yes") || !strcmp(n->str, "1"))) {
        *out = 1;
        return DL_OK;
    }
    if (!n->quoted && (!strcasecmp(n->str, "false") || !strcasecmp(n->str, "no") || !strcmp(n->str, "0"))) {
        *out = 0;
        return DL_OK;
    }
    return dl_yerrorf(err, DL_ERR_SPEC, n, "%s: expected true or false, found '%s'", what,
                          dl_short(n->str).s);
}

int dl_y_string(const struct dl_ynode *n, const char *what, const char **out, struct dl_error *err)
{
    if (want_scalar(n, what, "a name", err))
        return DL_ERR_SPEC;
    *out = n->str;
    return DL_OK;
}

static void join_names(const char *const *names, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; names && names[i] && used + 1 < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", names[i]);
}

int dl_y_enum(const struct dl_ynode *n, const char *what, const char *const *choices, int *out,
              struct dl_error *err)
{
    char list[512];
    join_names(choices, list, sizeof list);
    if (n->kind != DL_Y_SCALAR)
        return dl_yerrorf(err, DL_ERR_SPEC, n, "%s: expected one of %s, found %s", what, list,
                          dl_ynode_kind_name(n));
    for (int i = 0; choices[i]; i++)
        if (strcmp(choices[i], n->str) == 0) {
            *out = i;
            return DL_OK;
        }
    return dl_yerrorf(err, DL_ERR_SPEC, n, "%s: expected one of %s, found '%s'", what, list,
                      dl_short(n->str).s);
}

static int in_list(const char *const *list, const char *s)
{
    for (int i = 0; list && list[i]; i++)
        if (strcmp(list[i], s) == 0)
            return 1;
    return 0;
}

int dl_y_check_keys(const struct dl_ynode *map, const char *what, const char *const *allowed,
                    const char *const *allowed2, struct dl_error *err)
{
    if (map->kind != DL_Y_MAP)
        return dl_yerrorf(err, DL_ERR_SPEC, map, "%s: expected a mapping, found %s", what,
                          dl_ynode_kind_name(map));
    for (int i = 0; i < map->n; i++) {
        const char *k = map->keys[i]->str;
        if (in_list(allowed, k) || in_list(allowed2, k))
            continue;
        char l1[512], l2[512];
        join_names(allowed, l1, sizeof l1);
        join_names(allowed2, l2, sizeof l2);
        return dl_yerrorf(err, DL_ERR_SPEC, map->keys[i], "%s: unknown key '%s' (expected one of: %s%s%s)",
                          what, dl_short(k).s, l1, *l2 ? ", " : "", l2);
    }
    return DL_OK;
}

/* ------------------------------------------------------------ optional map keys */
const struct dl_ynode *dl_ymap_key(const struct dl_ynode *map, const char *key, const char *what, char *name,
                                   size_t size)
{
    snprintf(name, size, "%s.%s", what, key);
    return dl_ymap_get(map, key);
}

int dl_ymap_int(const struct dl_ynode *map, const char *key, const char *what, long min, long max, long *out,
                struct dl_error *err)
{
    char w[128];
    const struct dl_ynode *v = dl_ymap_key(map, key, what, w, sizeof w);
    return v ? dl_y_int(v, w, min, max, out, err) : DL_OK;
}

int dl_ymap_float(const struct dl_ynode *map, const char *key, const char *what, double min, double max,
                  double *out, struct dl_error *err)
{
    char w[128];
    const struct dl_ynode *v = dl_ymap_key(map, key, what, w, sizeof w);
    return v ? dl_y_float(v, w, min, max, out, err) : DL_OK;
}

int dl_ymap_bool(const struct dl_ynode *map, const char *key, const char *what, int *out, struct dl_error *err)
{
    char w[128];
    const struct dl_ynode *v = dl_ymap_key(map, key, what, w, sizeof w);
    return v ? dl_y_bool(v, w, out, err) : DL_OK;
}

int dl_ymap_enum(const struct dl_ynode *map, const char *key, const char *what, const char *const *choices,
                 int *out, struct dl_error *err)
{
    char w[128];
    const struct dl_ynode *v = dl_ymap_key(map, key, what, w, sizeof w);
    return v ? dl_y_enum(v, w, choices, out, err) : DL_OK;
}

int dl_ymap_path(const struct dl_ynode *map, const char *key, const char *what, char *out, size_t size,
                 struct dl_error *err)
{
    char w[128];
    const struct dl_ynode *v = dl_ymap_key(map, key, what, w, sizeof w);
    const char *s;
    if (!v)
        return DL_OK;
    if (dl_y_string(v, w, &s, err))
        return DL_ERR_SPEC;
    if (strlen(s) >= size)
        return dl_yerrorf(err, DL_ERR_SPEC, v, "%s: path longer than %zu characters", w, size - 1);
    snprintf(out, size, "%s", s);
    return DL_OK;
}
