/* attr.h: a kernel's view of a layer's attributes, read through the op
 * kind's attribute table (key -> offset and type), so that backends share the
 * ops' schema without copying their private structs; plus the convolution
 * and pooling geometry every fast kernel derives from them. */
#ifndef DL_BACKENDS_ATTR_H
#define DL_BACKENDS_ATTR_H

#include "graph/graph.h"

/* Attribute key of layer l as an int (INT, BOOL, ENUM: i ignored; INT2:
 * element i) or a double (FLOAT); def when the kind has no such key. */
int dl_attr_int(const struct dl_layer *l, const char *key, int i, int def);
double dl_attr_float(const struct dl_layer *l, const char *key, double def);

/* A convolution in the ops' notation (src/ops/conv.c), with the right padding
 * that makes oneDNN's output size equal PyTorch's floor rounding. */
struct dl_conv_geom {
    int C, H, W, K, P, Q, R, S;
    int sh, sw, ph, pw, dh, dw;   /* dilation 1 = ordinary */
    int pr_h, pr_w;               /* padding at the bottom and right */
    int G, Cg, Kg, bias;
};
struct dl_conv_geom dl_conv_geom(const struct dl_layer *l);

/* Window geometry of maxpool/avgpool/global_avgpool as one kernel, stride,
 * left and right padding; returns 0 when it is not expressible as uniform
 * windows (adaptive pooling with uneven windows). */
struct dl_pool_geom {
    int kh, kw, sh, sw, ph, pw, pr_h, pr_w;
    int exclude_pad; /* avgpool: divisor without padding */
};
int dl_pool_geom(const struct dl_layer *l, struct dl_pool_geom *pg);

#endif
