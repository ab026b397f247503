/* machine.c: collective costs on a machine of nodes (see machine.h): the
 * calibrated model within a node, a ring over the slowest link across. */
#include "planner/machine.h"

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

/* A number above 0 followed by one of the units (each with its factor); 0
 * when the text is not exactly that. */
static int number_with_unit(const char *text, const char *const *units, const double *factor, double *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || !(v > 0) || v > 1e300)
        return 0;
    for (int i = 0; units[i]; i++)
        if (strcmp(end, units[i]) == 0) {
            *out = v * factor[i];
            return 1;
        }
    return 0;
}

int dl_machine_parse_time(const char *what, const char *text, double *seconds, struct dl_error *err)
{
    static const char *const units[] = {"s", "ms", "us", "ns", NULL};
    static const double factor[] = {1, 1e-3, 1e-6, 1e-9};
    if (number_with_unit(text, units, factor, seconds))
        return DL_OK;
    return dl_errorf(err, DL_ERR_SPEC, "%s: expected a time above 0 with its unit (s, ms, us, ns) such as 5us, "
                     "found '%s'", what, text);
}

int dl_machine_parse_rate(const char *what, const char *text, double *bytes_per_s, struct dl_error *err)
{
    static const char *const units[] = {"B/s", "KB/s", "MB/s", "GB/s", "Gbit/s", NULL};
    static const double factor[] = {1, 1e3, 1e6, 1e9, 1e9 / 8};
    if (number_with_unit(text, units, factor, bytes_per_s))
        return DL_OK;
    return dl_errorf(err, DL_ERR_SPEC, "%s: expected a rate above 0 with its unit (B/s, KB/s, MB/s, GB/s, "
                     "Gbit/s) such as 12.5GB/s, found '%s'", what, text);
}

int dl_machine_parse_link(const char *opt, const char *text, double *alpha, double *beta, double *gamma,
                          struct dl_error *err)
{
    char copy[256];
    if (strlen(text) >= sizeof copy)
        return dl_errorf(err, DL_ERR_SPEC, "%s: value too long", opt);
    strcpy(copy, text);
    double a = -1, bw = -1, add = -1;
    for (char *save = NULL, *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        double *slot = NULL;
        if (eq) {
            *eq = 0;
            slot = !strcmp(item, "alpha") ? &a : !strcmp(item, "bw") ? &bw
                 : gamma && !strcmp(item, "add") ? &add : NULL;
        }
        if (!slot || *slot >= 0) {
            if (eq)
                *eq = '=';
            return dl_errorf(err, DL_ERR_SPEC, "%s: expected alpha=TIME (s, ms, us, ns) and bw=RATE (B/s, KB/s, "
                             "MB/s, GB/s, Gbit/s)%s, each once, e.g. alpha=5us,bw=12.5GB/s; found '%s' in '%s'", opt,
                             gamma ? " and optionally add=RATE" : "", item, text);
        }
        char what[64];
        snprintf(what, sizeof what, "%s %s", opt, item);
        int rc = slot == &a ? dl_machine_parse_time(what, eq + 1, slot, err)
                            : dl_machine_parse_rate(what, eq + 1, slot, err);
        if (rc)
            return rc;
    }
    if (a < 0 || bw < 0)
        return dl_errorf(err, DL_ERR_SPEC, "%s: expected both alpha= and bw=, found '%s'", opt, text);
    *alpha = a;
    *beta = 1 / bw;
    if (gamma && add > 0)
        *gamma = 1 / add;
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

double dl_machine_send(const struct dl_machine *m, int crosses, double bytes)
{
    if (crosses)
        return m->link_alpha + bytes * m->link_beta;
    return m->node.alpha + bytes * dl_cost_beta(&m->node, 2, 2, bytes);
}
