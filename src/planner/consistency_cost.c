/* consistency_cost.c: a data-parallel step's cost under sync, local SGD,
 * EASGD and gossip (see consistency_cost.h). */
#include "planner/consistency_cost.h"

#include "comm/allreduce.h"

double dl_plan_mixing_step(const struct dl_machine *m, enum dl_topology t, int p, long step, double bytes,
                           int *peers)
{
    int offsets[DL_MIXING_MAX_RANKS];
    int n = dl_mixing_offsets(t, p, step, offsets, DL_MIXING_MAX_RANKS);
    if (peers)
        *peers = n;
    double gamma = dl_cost_gamma(&m->node, p, p, bytes), slowest = 0;
    for (long i = 0; i < p; i++) {
        double s = n * bytes * gamma;
        for (int k = 0; k < n; k++)
            s += dl_machine_send(m, !dl_machine_same_node(m, i, (i + offsets[k]) % p), bytes);
        slowest = s > slowest ? s : slowest;
    }
    return slowest;
}

/* Trainable parameters (gradients) and the rest (batch-norm statistics) of g. */
static void count_params(const struct dl_graph *g, double *weights, double *state)
{
    *weights = *state = 0;
    for (int i = 0; i < g->n; i++)
        dl_layer_param_tally(&g->layers[i], weights, state);
}

int dl_plan_consistency(const struct dl_graph *g, const struct dl_layer_times *t, const struct dl_machine *m,
                        const struct dl_parallel_opts *o, int N, int batch, struct dl_consistency_cost *out,
                        struct dl_error *err)
{
    *out = (struct dl_consistency_cost){0};
    if (o->consistency == DL_CONS_SSP || o->consistency == DL_CONS_ASYNC || o->consistency == DL_CONS_EASGD_ASYNC)
        return dl_errorf(err, DL_ERR_SPEC, "--compare-consistency: ssp:S, async and easgd-async (parameter servers) "
                         "are not modelled; expected sync, local-sgd:K, gossip:TOPOLOGY or easgd:TAU[,ALPHA]");
    int rc = dl_parallel_opts_check(o, N, err);
    if (rc)
        return rc;
    if (batch < N)
        return dl_errorf(err, DL_ERR_SPEC, "--compare-consistency: dp=%d needs a mini-batch of at least %d samples, "
                         "found %d", N, N, batch);
    struct dl_tp_view v;
    rc = dl_tp_view_make(g, 1, N, m, &v, err);
    if (rc)
        return rc;
    struct dl_plan_layout l = {.dims = {N, 1, 1}, .schedule = DL_SCHED_1F1B, .chunks = 1, .first = {0, g->n}};
    struct dl_layout_prediction p;
    rc = dl_layout_predict(g, t, &v, m, &l, batch, &p, err);
    dl_tp_view_free(&v);
    if (rc)
        return rc;
    double weights, state;
    count_params(g, &weights, &state);
    double vector = 4.0 * (weights + state), every = 1;
    int crosses = !dl_machine_same_node(m, 0, N - 1);
    out->compute_s = p.makespan_s;
    out->vector_bytes = vector;
    switch (o->consistency) {
    case DL_CONS_SYNC:
        out->vector_bytes = 4.0 * weights;
        out->exchange_s = p.dp_exposed_s;
        out->bytes_sent = N > 1 ? (double)dl_allreduce_ring_bytes(N, (size_t)weights) : 0;
        break;
    case DL_CONS_LOCAL_SGD:
    case DL_CONS_EASGD:
        every = o->consistency == DL_CONS_LOCAL_SGD ? o->local_steps : o->easgd_tau;
        out->exchange_s = dl_machine_allreduce(m, N, crosses, vector) / every;
        out->bytes_sent = (N > 1 ? (double)dl_allreduce_ring_bytes(N, (size_t)(weights + state)) : 0) / every;
        break;
    default: { /* gossip */
        int period = dl_mixing_period(o->topology, N);
        for (long s = 0; s < period; s++) {
            int peers;
            out->exchange_s += dl_plan_mixing_step(m, o->topology, N, s, vector, &peers) / period;
            out->bytes_sent += peers * vector / period;
        }
        break;
    }
    }
    out->step_s = out->compute_s + out->exchange_s;
    return DL_OK;
}
