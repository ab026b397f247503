/* mixing.c: the gossip topologies as offset sets and their mixing matrices
 * (see mixing.h). */
#include "parallel/mixing.h"

#include <string.h>

const char *const dl_topology_names[DL_TOPO_COUNT] = {"ring", "exp", "one-peer-exp", "complete"};

int dl_topology_parse(const char *option, const char *name, enum dl_topology *out, struct dl_error *err)
{
    for (int t = 0; t < DL_TOPO_COUNT; t++)
        if (strcmp(name, dl_topology_names[t]) == 0) {
            *out = (enum dl_topology)t;
            return DL_OK;
        }
    return dl_errorf(err, DL_ERR_SPEC, "%s: expected a topology ring, exp, one-peer-exp or complete, found '%s'",
                     option, name);
}

/* ceil(log2 p): the rounds of one-peer-exp. */
static int ceil_log2(int p)
{
    int k = 0;
    while ((1L << k) < p)
        k++;
    return k;
}

int dl_mixing_max_peers(enum dl_topology t, int p)
{
    switch (t) {
    case DL_TOPO_RING: return p > 2 ? 2 : 1;
    case DL_TOPO_EXP: return ceil_log2(p); /* 1, 2, ..., 2^k < p */
    case DL_TOPO_ONE_PEER_EXP: return 1;
    case DL_TOPO_COMPLETE:
    case DL_TOPO_COUNT: break;
    }
    return p - 1;
}

int dl_mixing_period(enum dl_topology t, int p)
{
    return t == DL_TOPO_ONE_PEER_EXP ? ceil_log2(p) : 1;
}

int dl_mixing_offsets(enum dl_topology t, int p, long step, int *offsets, int max)
{
    int n = 0;
    switch (t) {
    case DL_TOPO_RING:
        offsets[n++] = 1;
        if (p > 2 && n < max)
            offsets[n++] = p - 1;
        break;
    case DL_TOPO_EXP:
        for (long d = 1; d < p && n < max; d *= 2)
            offsets[n++] = (int)d;
        break;
    case DL_TOPO_ONE_PEER_EXP:
        offsets[n++] = 1 << (int)(step % ceil_log2(p));
        break;
    case DL_TOPO_COMPLETE:
    case DL_TOPO_COUNT:
        for (int d = 1; d < p && n < max; d++)
            offsets[n++] = d;
        break;
    }
    return n;
}

double dl_mixing_weight(int peers)
{
    return 1.0 / (peers + 1);
}

void dl_mixing_matrix(enum dl_topology t, int p, long step, double *w)
{
    int offsets[DL_MIXING_MAX_RANKS];
    int n = dl_mixing_offsets(t, p, step, offsets, DL_MIXING_MAX_RANKS);
    double each = dl_mixing_weight(n);
    memset(w, 0, sizeof *w * (size_t)p * (size_t)p);
    for (int i = 0; i < p; i++) {
        w[(size_t)i * (size_t)p + (size_t)i] += each;
        for (int k = 0; k < n; k++)
            w[(size_t)i * (size_t)p + (size_t)((i - offsets[k] + p) % p)] += each;
    }
}
