/* yaml.h: a YAML document as a small tree in which every node remembers its
 * file, line and column, so that every error about a network file can point at
 * the exact spot.  Parsed with libyaml; aliases, tags and nesting deeper than
 * DL_YAML_MAX_DEPTH are rejected with a located message. */
#ifndef DL_YAML_H
#define DL_YAML_H

#include "core/error.h"

#define DL_YAML_MAX_DEPTH 64

enum dl_ynode_kind { DL_Y_SCALAR, DL_Y_SEQ, DL_Y_MAP };

struct dl_ynode {
    enum dl_ynode_kind kind;
    const char *file;        /* owned by the document */
    int line, col;           /* 1-based */
    char *str;               /* scalar text (NULL for collections) */
    int quoted;              /* scalar was written in quotes: always a string */
    int n;                   /* number of items (seq) or pairs (map) */
    struct dl_ynode **keys;  /* map: key scalars (with their own locations) */
    struct dl_ynode **items; /* seq: items; map: values */
};

struct dl_ydoc {
    char *file;
    struct dl_ynode *root;   /* NULL for an empty document */
};

int dl_yaml_load_file(const char *path, struct dl_ydoc **out, struct dl_error *err);
/* `name` is used as the file name in messages. */
int dl_yaml_load_string(const char *name, const char *text, struct dl_ydoc **out,
                        struct dl_error *err);
void dl_ydoc_free(struct dl_ydoc *doc);

/* Deep copy; every unquoted scalar "$name" is replaced by the text of
 * args[name] when args (a map) has it, and a product of integers and such
 * arguments holding integers ("$width*3", "4*$width") by its value.  The
 * copy keeps the original locations. */
struct dl_ynode *dl_ynode_clone(const struct dl_ynode *n, const struct dl_ynode *args,
                                struct dl_error *err);
void dl_ynode_free(struct dl_ynode *n);

/* Sets the node at path to value (which the tree owns afterwards, also on
 * failure): path is keys joined by '.'; in a mapping a key missing on the
 * way is added (with an empty mapping below it), in a list a key picks the
 * item whose `name` is the key, or the item of that index (0-based).  Nodes
 * made here take `label` as their file, line 0.  Errors (DL_ERR_SPEC) start
 * with label and say where the path left the document. */
int dl_ydoc_set(struct dl_ydoc *doc, const char *path, struct dl_ynode *value, const char *label,
                struct dl_error *err);

/* Every node of n (keys included) takes file `label` and line 0, which
 * dl_yerrorf writes as "label: " alone (a value from the command line). */
void dl_ynode_relabel(struct dl_ynode *n, const char *label);

/* Map lookup; NULL when absent or when map is not a map. */
const struct dl_ynode *dl_ymap_get(const struct dl_ynode *map, const char *key);

/* "file:line:col: " + message; returns code. */
int dl_yerrorf(struct dl_error *err, int code, const struct dl_ynode *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Human name of a node's kind for "expected X, found Y" messages. */
const char *dl_ynode_kind_name(const struct dl_ynode *n);

/* Typed scalar readers.  Each rejects the wrong kind or a malformed or
 * out-of-range value with "file:line:col: <what>: expected ..., found ...". */
int dl_y_int(const struct dl_ynode *n, const char *what, long min, long max, long *out,
             struct dl_error *err);
int dl_y_float(const struct dl_ynode *n, const char *what, double min, double max, double *out,
               struct dl_error *err);
int dl_y_bool(const struct dl_ynode *n, const char *what, int *out, struct dl_error *err);
int dl_y_string(const struct dl_ynode *n, const char *what, const char **out, struct dl_error *err);
/* Index of the scalar in the NULL-terminated choices, or an error listing them. */
int dl_y_enum(const struct dl_ynode *n, const char *what, const char *const *choices, int *out,
              struct dl_error *err);
/* Checks that every key of map is in the NULL-terminated allowed lists (up to
 * two lists, the second may be NULL); the error names the unknown key and the
 * allowed ones. */
int dl_y_check_keys(const struct dl_ynode *map, const char *what, const char *const *allowed,
                    const char *const *allowed2, struct dl_error *err);

/* map[key] (NULL when absent), with "what.key" written to name for messages. */
const struct dl_ynode *dl_ymap_key(const struct dl_ynode *map, const char *key, const char *what, char *name,
                                   size_t size);

/* Optional keys of a map: each reads map[key] with the typed reader above
 * (naming it "what.key" in messages) and leaves *out alone when the key is
 * absent.  dl_ymap_path copies a string of fewer than size bytes. */
int dl_ymap_int(const struct dl_ynode *map, const char *key, const char *what, long min, long max,
                long *out, struct dl_error *err);
int dl_ymap_float(const struct dl_ynode *map, const char *key, const char *what, double min,
                  double max, double *out, struct dl_error *err);
int dl_ymap_bool(const struct dl_ynode *map, const char *key, const char *what, int *out,
                 struct dl_error *err);
int dl_ymap_enum(const struct dl_ynode *map, const char *key, const char *what,
                 const char *const *choices, int *out, struct dl_error *err);
int dl_ymap_path(const struct dl_ynode *map, const char *key, const char *what, char *out,
                 size_t size, struct dl_error *err);

#endif
