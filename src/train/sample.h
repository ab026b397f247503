/* sample.h: drawing tokens from a sequence network (token ids in, a loss
 * at every position), for dltrain generate and for the samples that
 * training prints (--sample-every): the scores of the last position of a
 * window through an executor, turned into a token by temperature, top-k
 * and a seeded draw, and tokens turned back into text (bytes for a network
 * of 256 classes, GPT-2's BPE otherwise). */
#ifndef DL_TRAIN_SAMPLE_H
#define DL_TRAIN_SAMPLE_H

#include <stdint.h>
#include <stdio.h>

#include "core/rng.h"
#include "data/bpe.h"
#include "exec/exec.h"

struct dl_sampler {
    double temperature; /* 0: the most likely token */
    int top_k;          /* 0: every token */
    int classes;
    struct dl_rng rng;
    double *p;  /* [classes] */
    int *order; /* [classes] */
};

int dl_sampler_init(struct dl_sampler *z, int classes, double temperature, int top_k, uint64_t seed,
                    struct dl_error *err);
void dl_sampler_free(struct dl_sampler *z);

/* A token drawn from the scores s[0..classes). */
int dl_sampler_draw(struct dl_sampler *z, const float *s);

/* The scores after ids[0..n) (n >= 1): the last T of them through e's
 * network of input [T] (i32; later positions padded with 0, which a causal
 * network never reads) on sample 0, read at the last real position.
 * window and labels: scratch of T. */
int dl_sample_window_scores(struct dl_exec *e, int T, const int32_t *ids, long n, int32_t *window, int *labels,
                            float *scores, struct dl_error *err);

/* Writes token id's text to f: the byte itself without a vocabulary, the
 * vocabulary's bytes otherwise. */
void dl_sample_emit(FILE *f, const struct dl_bpe *b, int32_t id);

#endif
