/* sample.c: drawing tokens from a sequence network (see sample.h). */
#include "train/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int dl_sampler_init(struct dl_sampler *z, int classes, double temperature, int top_k, uint64_t seed,
                    struct dl_error *err)
{
    memset(z, 0, sizeof *z);
    z->temperature = temperature;
    z->top_k = top_k;
    z->classes = classes;
    dl_rng_seed(&z->rng, seed);
    z->p = dl_calloc((size_t)classes, sizeof *z->p, err);
    z->order = z->p ? dl_calloc((size_t)classes, sizeof *z->order, err) : NULL;
    if (!z->order) {
        dl_sampler_free(z);
        return DL_ERR_NOMEM;
    }
    return DL_OK;
}

void dl_sampler_free(struct dl_sampler *z)
{
    free(z->p);
    free(z->order);
    z->p = NULL;
    z->order = NULL;
}

static const float *sort_scores;

/* Higher scores first, then lower ids. */
static int by_score(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    float x = sort_scores[i], y = sort_scores[j];
    return x < y ? 1 : x > y ? -1 : (i > j) - (i < j);
}

int dl_sampler_draw(struct dl_sampler *z, const float *s)
{
    int C = z->classes, best = 0;
    for (int k = 1; k < C; k++)
        best = s[k] > s[best] ? k : best;
    if (z->temperature == 0)
        return best;
    int K = z->top_k > 0 && z->top_k < C ? z->top_k : C;
    for (int k = 0; k < C; k++)
        z->order[k] = k;
    if (K < C) {
        sort_scores = s;
        qsort(z->order, (size_t)C, sizeof *z->order, by_score);
    }
    double sum = 0;
    for (int i = 0; i < K; i++)
        sum += z->p[i] = exp(((double)s[z->order[i]] - s[best]) / z->temperature);
    double u = dl_rng_uniform(&z->rng) * sum;
    for (int i = 0; i < K; i++) {
        if (u < z->p[i])
            return z->order[i];
        u -= z->p[i];
    }
    return z->order[K - 1];
}

int dl_sample_window_scores(struct dl_exec *e, int T, const int32_t *ids, long n, int32_t *window, int *labels,
                            float *scores, struct dl_error *err)
{
    long first = n > T ? n - T : 0, used = n - first;
    memset(window, 0, sizeof *window * (size_t)T);
    memset(labels, 0, sizeof *labels * (size_t)T);
    memcpy(window, &ids[first], sizeof *window * (size_t)used);
    dl_exec_forward(e, window, labels, 1, 0); /* the executor's input: T values of its dtype, i32 */
    if (e->status)
        return dl_errorf(err, e->status, "%s", e->err.msg);
    return dl_exec_scores_at(e, 0, (int)used - 1, scores, err);
}

void dl_sample_emit(FILE *f, const struct dl_bpe *b, int32_t id)
{
    if (!b) {
        fputc(id, f);
        return;
    }
    size_t len;
    const unsigned char *bytes = dl_bpe_bytes(b, id, &len);
    if (bytes)
        fwrite(bytes, 1, len, f);
}
