/* attrs.h: fills an op's attribute struct from a layer's YAML mapping, driven
 * by the op kind's attribute table (struct dl_attr_desc).  This is the network
 * file's per-layer schema: the same table gives defaults, ranges, messages and
 * the documentation printed by `dltrain help layers`. */
#ifndef DL_ATTRS_H
#define DL_ATTRS_H

#include <stdio.h>

#include "ops/op.h"
#include "spec/yaml.h"

/* Keys every layer may carry besides its op's attributes. */
extern const char *const dl_layer_common_keys[];

/* Parses layer (a mapping) into attr (op->attr_size bytes, zeroed by the
 * caller): defaults first, then given keys, then op->check().  Unknown keys,
 * wrong types and out-of-range values are errors located at the offending
 * node and naming the layer. */
int dl_attrs_parse(const struct dl_op_kind *op, const struct dl_ynode *layer, const char *layer_name,
                   void *attr, struct dl_error *err);

/* Sets every attribute to its default (for tests and programmatic use). */
void dl_attrs_defaults(const struct dl_op_kind *op, void *attr);

/* Parses a one-line YAML mapping such as "{filters: 8, kernel: 3}" for op
 * (tests and benchmarks); attr must hold op->attr_size bytes. */
int dl_attrs_from_string(const struct dl_op_kind *op, const char *yaml, void *attr,
                         struct dl_error *err);

/* Prints the attribute table of one op kind (used for help and man pages). */
void dl_attrs_print_doc(FILE *f, const struct dl_op_kind *op);

#endif
