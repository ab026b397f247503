/* agree.c: one message per job (see agree.h). */
#include "comm/agree.h"

#include <stdlib.h>

#include "comm/tags.h"
#include "core/clock.h"

uint64_t dl_agree_hash(const char *text)
{
    if (!text || !*text)
        return 0;
    uint64_t h = 14695981039346656037ull;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return h ? h : 1;
}

/* A rank's report. */
struct report {
    int64_t status;
    uint64_t hash;
};

/* The decision of rank `me` over the reports of n ranks (heard[r]: rank r's
 * report is known; world: the communicator's size). */
static void decide(const struct report *r, const int *heard, int n, int me, int world, struct dl_agreement *out)
{
    int lowest = -1, holders = 0, first_holder = -1;
    for (int k = 0; k < n; k++) {
        if (!heard[k])
            continue;
        if (r[k].status && lowest < 0)
            lowest = k;
        if (r[k].hash == r[me].hash) {
            holders++;
            if (first_holder < 0)
                first_holder = k;
        }
    }
    out->status = lowest >= 0 ? (int)r[lowest].status : 0;
    out->print = r[me].hash != 0 && first_holder == me;
    out->named = holders < world;
    out->all = 1;
}

int dl_agree_all(struct dl_comm *comm, int status, uint64_t hash, struct dl_agreement *out, struct dl_error *err)
{
    int n = comm->size;
    struct report mine = {status, hash};
    struct report *all = malloc(sizeof *all * (size_t)n);
    int *heard = malloc(sizeof *heard * (size_t)n);
    if (!all || !heard) {
        free(all), free(heard);
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory (the ranks' %d reports)", n);
    }
    int rc = comm->ops->allgather(comm, &mine, all, sizeof mine, err);
    if (!rc) {
        for (int k = 0; k < n; k++)
            heard[k] = 1;
        decide(all, heard, n, comm->rank, n, out);
    }
    free(all), free(heard);
    return rc;
}

void dl_agree_failed(struct dl_comm *comm, int status, uint64_t hash, double timeout_s, struct dl_agreement *out)
{
    int n = comm->size, me = comm->rank;
    *out = (struct dl_agreement){status, hash != 0, n > 1, n == 1};
    if (n == 1)
        return;
    /* One allocation: the requests, the reports (index n: this rank's, the
     * send buffer) and the ranks heard from. */
    size_t bytes = 2 * sizeof(struct dl_comm_req) * (size_t)n + sizeof(struct report) * (size_t)(n + 1) +
                   sizeof(int) * (size_t)n;
    struct dl_comm_req *sends = calloc(1, bytes), *recvs = sends + n;
    if (!sends)
        return;
    struct report *all = (struct report *)(recvs + n);
    int *heard = (int *)(all + n + 1);
    all[n] = (struct report){status, hash};
    all[me] = all[n];
    heard[me] = 1;
    struct dl_error err = {0};
    int ok = 1, waiting = 0;
    for (int k = 0; ok && k < n; k++) {
        if (k == me)
            continue;
        ok = !comm->ops->isend(comm, &all[n], sizeof all[n], k, DL_TAG_AGREE, &sends[k], &err) &&
             !comm->ops->irecv(comm, &all[k], sizeof all[k], k, DL_TAG_AGREE, &recvs[k], &err);
        waiting += ok;
    }
    double deadline = dl_clock_now() + timeout_s;
    while (ok && waiting > 0 && dl_clock_now() < deadline) {
        for (int k = 0; ok && k < n; k++) {
            int done = 0;
            if (recvs[k].active)
                ok = !comm->ops->test(comm, &recvs[k], &done, &err);
            if (ok && done) {
                heard[k] = 1;
                waiting--;
            }
        }
        if (ok && waiting > 0)
            dl_clock_sleep(1e-3);
    }
    if (!ok)
        return; /* as set first: print, named, not all; the buffers stay (requests may be in flight) */
    decide(all, heard, n, me, n, out);
    out->all = waiting == 0;
    if (!out->all)
        return; /* the job ends: receives and sends still in flight keep their buffers */
    for (int k = 0; k < n; k++) /* every rank posted its receives: the sends are matched */
        if (sends[k].active)
            comm->ops->wait(comm, &sends[k], &err);
    free(sends);
}
