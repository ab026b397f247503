/* machine.c: collective costs on a machine of nodes (see machine.h): the
 * calibrated model within a node, a ring over the slowest link across. */
#include "planner/machine.h"

#include "core/parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dl_machine_init(struct dl_machine *m, int K, double link_alpha, double link_beta)
{
    *m = (struct dl_machine){.ranks_per_node = K, .link_alpha = link_alpha, .link_beta = link_beta,
                             .compute_scale = 1};
    if (K > 1 && dl_cost_cached(K, &m->node)) {
        m->node_source = "calibrated on this host";
    } else {
        dl_cost_defaults(&m->node);
        m->node_source = "defaults (no calibration cached for this rank count)";
    }
}

void dl_machine_share_cores(struct dl_machine *m, int N, int threads, int cores, int cpu_compute)
{
    int on_node = N < m->ranks_per_node ? N : m->ranks_per_node;
    double demand = (double)on_node * (threads > 0 ? threads : 1);
    m->compute_scale = cores > 0 && demand > cores ? demand / cores : 1;
    m->comm_shares_cores = cpu_compute && cores > 0 && demand + on_node > cores;
}

int dl_machine_parse_link(const char *opt, const char *text, double *alpha, double *beta, double *gamma,
                          struct dl_error *err)
{
    struct dl_link l;
    if (dl_parse_link(opt, text, gamma != NULL, DL_LINK_MAX_ALPHA, &l, err))
        return DL_ERR_SPEC;
    if (!l.has_alpha || !l.has_bw)
        return dl_errorf(err, DL_ERR_SPEC, "%s: expected both alpha= and bw=, found '%s'", opt, text);
    *alpha = l.alpha;
    *beta = 1 / l.bw;
    if (gamma && l.has_add)
        *gamma = 1 / l.add;
    return DL_OK;
}

/* A ring's per-step cost across nodes: each of its p-1 steps moves a
 * p-th of the vector over the link (and, reducing, adds it at the node's
 * speed). */
static double ring_steps(const struct dl_machine *m, int p, double bytes, int reduce)
{
    double piece = bytes / p;
    return (p - 1) * (m->link_alpha + piece * m->link_beta +
                      (reduce ? piece * dl_cost_gamma(&m->node, p, p, bytes) : 0));
}

double dl_machine_allreduce(const struct dl_machine *m, int p, int crosses, double bytes)
{
    if (p <= 1)
        return 0;
    if (crosses) /* reduce-scatter, then allgather */
        return ring_steps(m, p, bytes, 1) + ring_steps(m, p, bytes, 0);
    static const dl_cost_fn algorithms[] = {dl_cost_ring, dl_cost_recursive_doubling, dl_cost_rabenseifner,
                                            dl_cost_tree};
    double best = -1;
    for (size_t i = 0; i < sizeof algorithms / sizeof *algorithms; i++) {
        double t = algorithms[i](&m->node, p, bytes, NULL);
        if (best < 0 || t < best)
            best = t;
    }
    return best;
}

double dl_machine_allgather(const struct dl_machine *m, int p, int crosses, double bytes)
{
    if (p <= 1)
        return 0;
    if (crosses)
        return ring_steps(m, p, bytes, 0);
    return (p - 1) * (m->node.alpha + bytes / p * dl_cost_beta(&m->node, p, p, bytes));
}

double dl_machine_reduce_scatter(const struct dl_machine *m, int p, int crosses, double bytes)
{
    if (p <= 1)
        return 0;
    if (crosses)
        return ring_steps(m, p, bytes, 1);
    return (p - 1) * (m->node.alpha + bytes / p * (dl_cost_beta(&m->node, p, p, bytes) +
                                                   dl_cost_gamma(&m->node, p, p, bytes)));
}

double dl_machine_alltoall(const struct dl_machine *m, int p, int crosses, double bytes)
{
    if (p <= 1)
        return 0;
    double leaving = bytes * (p - 1) / p;
    if (crosses) /* every message waits for the link */
        return (p - 1) * m->link_alpha + leaving * m->link_beta;
    return (p - 1) * m->node.alpha + leaving * dl_cost_beta(&m->node, p, p, bytes);
}

double dl_machine_send(const struct dl_machine *m, int crosses, double bytes)
{
    if (crosses)
        return m->link_alpha + bytes * m->link_beta;
    return m->node.alpha + bytes * dl_cost_beta(&m->node, 2, 2, bytes);
}
