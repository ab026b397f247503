/* machine_file.c: the machine file of `dltrain plan --machine` (see
 * machine_file.h), read through the located YAML tree (spec/yaml.h); the
 * links' times and rates through core/parse.h's parsers, as the options'. */
#include "planner/machine_file.h"

#include <stdio.h>
#include <string.h>

#include "core/parse.h"
#include "planner/machine.h"
#include "spec/yaml.h"

/* One value of a link (what "machine.link.alpha"): a scalar, a time (is_time)
 * or a rate of core/parse.h's grammar, its error located at the value. */
static int link_value(const struct dl_ynode *n, const char *what, int is_time, double *out, struct dl_error *err)
{
    if (n->kind != DL_Y_SCALAR)
        return dl_yerrorf(err, DL_ERR_SPEC, n, "%s: expected a %s such as %s, found %s", what,
                          is_time ? "time" : "rate", is_time ? "5us" : "12.5GB/s", dl_ynode_kind_name(n));
    struct dl_error inner = {0};
    if (is_time ? dl_parse_duration(what, n->str, DL_LINK_MAX_ALPHA, out, &inner)
                : dl_parse_rate(what, n->str, out, &inner))
        return dl_yerrorf(err, DL_ERR_SPEC, n, "%s", inner.msg);
    return DL_OK;
}

/* map[key], when there: {alpha: TIME, bw: RATE} and, with gamma not NULL,
 * an optional add: RATE; sets *have. */
static int read_link(const struct dl_ynode *root, const char *key, double *alpha, double *beta, double *gamma,
                     int *have, struct dl_error *err)
{
    static const char *const keys[] = {"alpha", "bw", NULL};
    static const char *const add_key[] = {"add", NULL};
    const struct dl_ynode *link = dl_ymap_get(root, key);
    if (!link)
        return DL_OK;
    char what[32], name[48];
    snprintf(what, sizeof what, "machine.%s", key);
    if (dl_y_check_keys(link, what, keys, gamma ? add_key : NULL, err))
        return DL_ERR_SPEC;
    const struct dl_ynode *a = dl_ymap_get(link, "alpha"), *bw = dl_ymap_get(link, "bw");
    if (!a || !bw)
        return dl_yerrorf(err, DL_ERR_SPEC, link, "%s: expected both alpha and bw, e.g. {alpha: 5us, bw: 12.5GB/s}, "
                          "found %s", what, a ? "no bw" : bw ? "no alpha" : "neither");
    double rate;
    snprintf(name, sizeof name, "%s.alpha", what);
    if (link_value(a, name, 1, alpha, err))
        return DL_ERR_SPEC;
    snprintf(name, sizeof name, "%s.bw", what);
    if (link_value(bw, name, 0, &rate, err))
        return DL_ERR_SPEC;
    *beta = 1 / rate;
    const struct dl_ynode *add = gamma ? dl_ymap_get(link, "add") : NULL;
    if (add) {
        snprintf(name, sizeof name, "%s.add", what);
        if (link_value(add, name, 0, &rate, err))
            return DL_ERR_SPEC;
        *gamma = 1 / rate;
    }
    *have = 1;
    return DL_OK;
}

/* A key the file must have, or an error at the mapping naming it. */
static int required(const struct dl_ynode *root, const char *key, const char *example, struct dl_error *err)
{
    if (dl_ymap_get(root, key))
        return DL_OK;
    return dl_yerrorf(err, DL_ERR_SPEC, root, "machine.%s: expected it (e.g. %s), found no such key", key, example);
}

static int read_machine(const struct dl_ynode *root, struct dl_machine_file *m, struct dl_error *err)
{
    static const char *const keys[] = {"name", "nodes", "ranks_per_node", "cores_per_node", "flops", "node_link",
                                       "link", NULL};
    if (dl_y_check_keys(root, "machine", keys, NULL, err) || required(root, "nodes", "nodes: 4", err) ||
        required(root, "ranks_per_node", "ranks_per_node: 8", err))
        return DL_ERR_SPEC;
    long nodes = 0, per_node = 0, cores = 0;
    if (dl_ymap_path(root, "name", "machine", m->name, sizeof m->name, err) ||
        dl_ymap_int(root, "nodes", "machine", 1, DL_MACHINE_MAX_RANKS, &nodes, err) ||
        dl_ymap_int(root, "ranks_per_node", "machine", 1, DL_MACHINE_MAX_RANKS, &per_node, err) ||
        dl_ymap_int(root, "cores_per_node", "machine", 1, DL_MACHINE_MAX_RANKS, &cores, err) ||
        dl_ymap_float(root, "flops", "machine", DL_MACHINE_MIN_FLOPS, DL_MACHINE_MAX_FLOPS, &m->flops, err))
        return DL_ERR_SPEC;
    m->nodes = (int)nodes;
    m->ranks_per_node = (int)per_node;
    m->cores_per_node = (int)cores;
    if ((long long)m->nodes * m->ranks_per_node > DL_MACHINE_MAX_RANKS)
        return dl_yerrorf(err, DL_ERR_SPEC, dl_ymap_get(root, "nodes"), "machine.nodes: expected nodes x "
                          "ranks_per_node at most %d, found %d x %d", DL_MACHINE_MAX_RANKS, m->nodes,
                          m->ranks_per_node);
    if (read_link(root, "node_link", &m->node_alpha, &m->node_beta, &m->node_gamma, &m->have_node_link, err) ||
        read_link(root, "link", &m->link_alpha, &m->link_beta, NULL, &m->have_link, err))
        return DL_ERR_SPEC;
    if (m->nodes > 1 && !m->have_link)
        return dl_yerrorf(err, DL_ERR_SPEC, dl_ymap_get(root, "nodes"), "machine.link: needed when nodes > 1 "
                          "(found nodes: %d), e.g. link: {alpha: 5us, bw: 12.5GB/s}", m->nodes);
    return DL_OK;
}

int dl_machine_file_load(const char *path, struct dl_machine_file *m, struct dl_error *err)
{
    memset(m, 0, sizeof *m);
    struct dl_ydoc *doc = NULL;
    int rc = dl_yaml_load_file(path, &doc, err);
    if (rc == DL_ERR_IO) { /* cannot be opened: a bad --machine, as a bad value */
        if (err)
            err->code = DL_ERR_SPEC;
        return DL_ERR_SPEC;
    }
    if (rc)
        return rc;
    if (!doc->root)
        rc = dl_errorf(err, DL_ERR_SPEC, "%s:1:1: machine: expected a mapping with nodes and ranks_per_node, found "
                       "an empty file", path);
    else
        rc = read_machine(doc->root, m, err);
    dl_ydoc_free(doc);
    return rc;
}
