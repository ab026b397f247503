/* layout.h: memory layouts of activations and the reorders between them.
 * PLAIN is NCHW (the graph's edges, the reference ops).  BLOCK8 and BLOCK16
 * are oneDNN's nChw8c (AVX2) and nChw16c (AVX-512): channels in blocks of
 * 8 or 16 innermost, the last block padded with zeros, so a sample holds
 * ceil(C/b)*b*H*W values.  Gradients use the layout of their tensor. */
#ifndef DL_BACKENDS_LAYOUT_H
#define DL_BACKENDS_LAYOUT_H

#include "core/layout.h"
#include "core/real.h"
#include "core/shape.h"

/* Values per sample of shape s stored in layout l (padding included). */
long dl_layout_count(enum dl_layout l, struct dl_shape s);

/* Channels per block: 1 (plain), 8 or 16. */
int dl_layout_block(enum dl_layout l);

/* 1 when both layouts place every value of s at the same index (a == b, or
 * vectors (C,1,1) with C a multiple of both blocks): a reorder is a no-op. */
int dl_layout_same(enum dl_layout a, enum dl_layout b, struct dl_shape s);

/* dst = src (accumulate = 0) or dst += src (accumulate = 1) for n samples of
 * shape s, converting from layout from to layout to (one of them PLAIN, or
 * both the same memory: see dl_layout_same).  Padding of a blocked
 * destination is written as zeros (or left as it is when accumulating). */
void dl_layout_reorder(const dl_real *src, enum dl_layout from, dl_real *dst, enum dl_layout to, int n,
                       struct dl_shape s, int accumulate);
/* The same for values of dtype: f32 (dl_real, as above) or bf16, whose
 * accumulation adds in f32 and rounds once. */
void dl_layout_reorder_dtype(const void *src, enum dl_layout from, void *dst, enum dl_layout to, int n,
                             struct dl_shape s, int accumulate, enum dl_dtype dtype);

#endif
