/* attr.h: a kernel's view of a layer's attributes, read through the op
 * kind's attribute table (key -> offset and type), so that backends share the
 * ops' schema without copying their private structs; plus the convolution
 * and pooling geometry every fast kernel derives from them.  A kernel can
 * only read keys its layer's kind declares: anything else stops the program
 * (a renamed key in an op file fails every test that runs the kernel instead
 * of silently changing what the kernel computes). */
#ifndef DL_BACKENDS_ATTR_H
#define DL_BACKENDS_ATTR_H

#include "graph/graph.h"

/* Attribute key of layer l as an int (INT, BOOL, ENUM: i must be 0; INT2:
 * element i, 0 = height, 1 = width) or as a double (FLOAT).  A key that l's
 * kind does not declare with such a type, or an i out of range, is a
 * programming error: a message naming the kind and the key on stderr, then
 * abort(). */
int dl_attr_int(const struct dl_layer *l, const char *key, int i);
double dl_attr_float(const struct dl_layer *l, const char *key);
/* An ENUM key's value as the name of its choice ("tanh"). */
const char *dl_attr_choice(const struct dl_layer *l, const char *key);

/* A convolution in the ops' notation (src/ops/conv.c), with the right padding
 * that makes oneDNN's output size equal PyTorch's floor rounding. */
struct dl_conv_geom {
    int C, H, W, K, P, Q, R, S;
    int sh, sw, ph, pw, dh, dw;   /* dilation 1 = ordinary */
    int pr_h, pr_w;               /* padding at the bottom and right */
    int G, Cg, Kg, bias;
};
struct dl_conv_geom dl_conv_geom(const struct dl_layer *l);

/* Window geometry of a pooling layer as one kernel, stride, left and right
 * padding, and what the window computes.  One function per kind (each reads
 * the keys its kind declares); they return 0 when the layer is not
 * expressible as uniform windows (adaptive pooling with uneven windows). */
struct dl_pool_geom {
    int kh, kw, sh, sw, ph, pw, pr_h, pr_w;
    int max;         /* 1: the window's maximum, 0: its average */
    int exclude_pad; /* average: divisor without padding */
};
typedef int dl_pool_geom_fn(const struct dl_layer *l, struct dl_pool_geom *pg);
int dl_maxpool_geom(const struct dl_layer *l, struct dl_pool_geom *pg);
int dl_avgpool_geom(const struct dl_layer *l, struct dl_pool_geom *pg);
int dl_global_avgpool_geom(const struct dl_layer *l, struct dl_pool_geom *pg);

#endif
