/* attention.h: what attention's kernels share with its reference op
 * (ops/attention.c): the dropout factor of one attention weight, a
 * function of its place, so every kernel draws the reference's mask. */
#ifndef DL_OPS_ATTENTION_H
#define DL_OPS_ATTENTION_H

#include <stdint.h>

/* 0 or 1/(1 - rate): weight (query t, key s) of head h of the sample with
 * index `sample` in the mini-batch, for a call's key and T positions.  A
 * training call with rate 0, or an inference call, keeps everything (1). */
double dl_attention_kept(uint64_t key, long sample, long h, long t, long s, long T, double rate);

/* The whole layer's index of the first head of a layer's attributes: 0,
 * or where a tensor rank's part of the heads starts (its dropout draws
 * the whole layer's masks for its heads). */
long dl_attention_first_head(const void *attr);

/* The heads of k and v of a layer's attributes (grouped-query attention:
 * kv_heads, or heads when it is 0). */
int dl_attention_kv_heads(const void *attr);

#endif
