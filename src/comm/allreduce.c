/* allreduce.c: the registry of allreduce algorithms (names, functions and
 * cost formulas), "native" (the backend's own allreduce) and "auto" (the
 * algorithm the cost model predicts to be fastest for this size). */
#include "comm/allreduce.h"

#include "comm/flight.h"

#include <string.h>

#include "comm/flight.h"

static int native(struct dl_comm *c, float *buf, size_t n, const struct dl_allreduce_opts *opts,
                  struct dl_error *err)
{
    return c->ops->allreduce(c, buf, DL_F32, n, err);
}

static int automatic(struct dl_comm *c, float *buf, size_t n,
                     const struct dl_allreduce_opts *opts, struct dl_error *err)
{
    return dl_allreduce_choose(c, n, opts)->run(c, buf, n, opts, err);
}

static const struct dl_allreduce_algo algos[] = {
    {"ring", "ring reduce-scatter + allgather, pipelined in segments", dl_allreduce_ring,
     dl_cost_ring},
    {"recursive_doubling", "butterfly: lg p swaps of the whole vector",
     dl_allreduce_recursive_doubling, dl_cost_recursive_doubling},
    {"rabenseifner", "recursive halving reduce-scatter + recursive doubling allgather",
     dl_allreduce_rabenseifner, dl_cost_rabenseifner},
    {"tree", "binomial tree reduce to rank 0 + binomial tree broadcast", dl_allreduce_tree,
     dl_cost_tree},
    {"ps", "parameter server: shards to server ranks, summed, sent back", dl_allreduce_ps,
     dl_cost_ps},
    {"native", "the backend's own allreduce (MPI_Allreduce, ncclAllReduce)", native, NULL},
    {"auto", "the cheapest algorithm by the alpha-beta-gamma cost model", automatic, NULL},
};
enum { n_algos = sizeof algos / sizeof algos[0] };

const struct dl_allreduce_algo *dl_allreduce_at(int i)
{
    return i >= 0 && i < n_algos ? &algos[i] : NULL;
}

const struct dl_allreduce_algo *dl_allreduce_find(const char *name)
{
    if (!name)
        return NULL;
    if (strcmp(name, "rd") == 0 || strcmp(name, "butterfly") == 0)
        name = "recursive_doubling";
    for (int i = 0; i < n_algos; i++)
        if (strcmp(algos[i].name, name) == 0)
            return &algos[i];
    return NULL;
}

const struct dl_allreduce_algo *dl_allreduce_choose(const struct dl_comm *c, size_t n,
                                                    const struct dl_allreduce_opts *opts)
{
    struct dl_cost_params defaults;
    const struct dl_cost_params *cp = opts ? opts->cost : NULL;
    if (!cp) {
        dl_cost_defaults(&defaults);
        cp = &defaults;
    }
    const struct dl_allreduce_algo *best = NULL;
    double best_t = 0;
    for (int i = 0; i < n_algos; i++) {
        if (!algos[i].cost)
            continue;
        double t = algos[i].cost(cp, c->size, (double)n * dl_dtype_size(DL_F32), opts);
        if (!best || t < best_t)
            best = &algos[i], best_t = t;
    }
    return best;
}

struct algo_call {
    const struct dl_allreduce_algo *algo;
    const struct dl_allreduce_opts *opts;
};

static int run_f32(struct dl_comm *c, float *buf, size_t n, void *ctx, struct dl_error *err)
{
    const struct algo_call *a = ctx;
    return a->algo->run(c, buf, n, a->opts, err);
}

int dl_allreduce(struct dl_comm *c, const char *name, void *buf, enum dl_dtype dtype, size_t n,
                 const struct dl_allreduce_opts *opts, struct dl_error *err)
{
    const struct dl_allreduce_algo *a = dl_allreduce_find(name);
    if (!a)
        return dl_errorf(err, DL_ERR_SPEC,
                         "unknown allreduce algorithm '%s' (expected ring, recursive_doubling,"
                         " rabenseifner, tree, ps, native or auto)", name ? name : "(null)");
    if (a->run == native) /* the backend sums the dtype itself */
        return c->ops->allreduce(c, buf, dtype, n, err);
    struct algo_call call = {a, opts};
    long id = dl_flight_begin(c, "sum (allreduce)", n * dl_dtype_size(dtype));
    int rc = dl_comm_sum_as_f32(c, buf, dtype, n, run_f32, &call, err);
    dl_flight_end(c, id);
    return rc;
}
