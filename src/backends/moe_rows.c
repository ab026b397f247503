/* moe_rows.c: rows to the experts' ranks and back (see moe_rows.h). */
#include "backends/moe_rows.h"

#include <stdlib.h>
#include <string.h>

int dl_moe_rows_count(const struct dl_expert_group *g, const int *offset, long E, int *received,
                      struct dl_error *err)
{
    int R = g->size;
    long EL = E / R;
    int *sent = malloc(sizeof *sent * (size_t)E);
    size_t *bytes = malloc(sizeof *bytes * (size_t)(2 * R));
    if (!sent || !bytes) {
        free(sent), free(bytes);
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory for the experts' counts");
    }
    for (long e = 0; e < E; e++)
        sent[e] = offset[e + 1] - offset[e];
    size_t *at = bytes + R;
    for (int r = 0; r < R; r++)
        bytes[r] = sizeof *sent * (size_t)EL, at[r] = sizeof *sent * (size_t)(r * EL);
    int rc = g->alltoallv(g->ctx, sent, bytes, at, received, bytes, at, err);
    free(sent), free(bytes);
    return rc;
}

long dl_moe_rows_received(const int *received, long E)
{
    long n = 0;
    for (long i = 0; i < E; i++)
        n += received[i];
    return n;
}

void dl_moe_rows_first(const int *received, int ranks, long EL, long *first)
{
    first[0] = 0;
    for (long j = 0; j < EL; j++) {
        first[j + 1] = first[j];
        for (int s = 0; s < ranks; s++)
            first[j + 1] += received[s * EL + j];
    }
}

/* Copies rows between the source-major layout (as they travel: rank s's
 * rows, by its experts) and the expert-major one, either way. */
static void reorder(const int *received, int ranks, long EL, long width, float *source_major, float *expert_major,
                    int to_expert_major)
{
    long at = 0; /* in the source-major layout */
    for (int s = 0; s < ranks; s++)
        for (long j = 0; j < EL; j++) {
            long n = received[s * EL + j], e = 0; /* e: where (j, s) starts expert-major */
            for (long i = 0; i < j; i++)
                for (int q = 0; q < ranks; q++)
                    e += received[q * EL + i];
            for (int q = 0; q < s; q++)
                e += received[q * EL + j];
            size_t bytes = sizeof(float) * (size_t)(n * width);
            if (to_expert_major)
                memcpy(expert_major + e * width, source_major + at * width, bytes);
            else
                memcpy(source_major + at * width, expert_major + e * width, bytes);
            at += n;
        }
}

/* The byte counts and offsets of rows of width floats: this rank's own (by
 * its offsets) and what it receives (by received, source-major). */
static void plan_bytes(int R, long EL, const int *offset, const int *received, long width, size_t *sb, size_t *sa,
                       size_t *rb, size_t *ra)
{
    size_t row = sizeof(float) * (size_t)width, got = 0;
    for (int r = 0; r < R; r++) {
        sa[r] = row * (size_t)offset[r * EL];
        sb[r] = row * (size_t)(offset[(r + 1) * EL] - offset[r * EL]);
        size_t n = 0;
        for (long j = 0; j < EL; j++)
            n += (size_t)received[r * EL + j];
        ra[r] = got, rb[r] = row * n;
        got += rb[r];
    }
}

static int exchange(const struct dl_expert_group *g, const int *offset, const int *received, long E,
                    const float *rows, long width, float *out, int back, struct dl_error *err)
{
    int R = g->size;
    long EL = E / R, n = dl_moe_rows_received(received, E);
    size_t *b = malloc(sizeof *b * (size_t)(4 * R));
    float *travel = malloc(sizeof *travel * (size_t)(n * width > 0 ? n * width : 1));
    if (!b || !travel) {
        free(b), free(travel);
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory for the experts' rows");
    }
    size_t *sb = b, *sa = b + R, *rb = b + 2 * R, *ra = b + 3 * R;
    plan_bytes(R, EL, offset, received, width, sb, sa, rb, ra);
    int rc;
    if (!back) {
        rc = g->alltoallv(g->ctx, rows, sb, sa, travel, rb, ra, err);
        if (!rc)
            reorder(received, R, EL, width, travel, out, 1);
    } else {
        reorder(received, R, EL, width, travel, (float *)rows, 0);
        rc = g->alltoallv(g->ctx, travel, rb, ra, out, sb, sa, err);
    }
    free(b), free(travel);
    return rc;
}

int dl_moe_rows_dispatch(const struct dl_expert_group *g, const int *offset, const int *received, long E,
                         const float *rows, long width, float *out, struct dl_error *err)
{
    return exchange(g, offset, received, E, rows, width, out, 0, err);
}

int dl_moe_rows_return(const struct dl_expert_group *g, const int *offset, const int *received, long E,
                       const float *rows, long width, float *out, struct dl_error *err)
{
    return exchange(g, offset, received, E, rows, width, out, 1, err);
}
