/* attention.h: what attention's kernels share with its reference op
 * (ops/attention.c): the dropout factor of one attention weight, a
 * function of its place, so every kernel draws the reference's mask; and
 * the keys a query sees under the causal and document masks. */
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

/* The keys query t of a sample of T positions sees: [*lo, returned end).
 * doc is the sample's document starts (struct dl_op_call's doc_start;
 * NULL: one document): the keys of the query's own document, those up to
 * t only when causal (a block-causal mask under both). */
static inline long dl_attention_keys(const int *doc, long T, long t, int causal, long *lo)
{
    *lo = doc ? doc[t] : 0;
    if (causal)
        return t + 1;
    long end = t + 1;
    while (doc && end < T && doc[end] == doc[t])
        end++;
    return doc ? end : T;
}

#endif
