/* common.c: engine, stream, descriptors and primitive plumbing shared by the
 * oneDNN kernels (see common.h). */
#include "backends/cpu_onednn/common.h"

#include <pthread.h>
#include <string.h>

static dnnl_engine_t engine;
static dnnl_stream_t stream;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void make_engine(void)
{
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) == dnnl_success)
        dnnl_stream_create(&stream, engine, dnnl_stream_default_flags);
}

dnnl_engine_t dl_dnnl_engine(void)
{
    pthread_once(&once, make_engine);
    return engine;
}

dnnl_stream_t dl_dnnl_stream(void)
{
    pthread_once(&once, make_engine);
    return stream;
}

int dl_dnnl_check(dnnl_status_t st, const char *what, struct dl_error *err)
{
    if (st == dnnl_success)
        return DL_OK;
    if (st == dnnl_out_of_memory)
        return dl_errorf(err, DL_ERR_NOMEM, "oneDNN %s: out of memory", what);
    return dl_errorf(err, DL_ERR_UNSUPPORTED, "oneDNN %s: %s", what,
                     st == dnnl_unimplemented ? "no implementation for these shapes" : "invalid arguments");
}

void dl_dnnl_md(dnnl_memory_desc_t *md, int n, struct dl_shape s, enum dl_layout l)
{
    dnnl_dims_t d = {n, s.c, s.h, s.w};
    dnnl_format_tag_t tag = l == DL_LAYOUT_BLOCK16 ? dnnl_nChw16c : l == DL_LAYOUT_BLOCK8 ? dnnl_nChw8c : dnnl_nchw;
    dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, tag);
}

int dl_dnnl_layout_of(const dnnl_memory_desc_t *md, int n, struct dl_shape s)
{
    for (int l = 0; l < DL_N_LAYOUTS; l++) {
        dnnl_memory_desc_t m;
        dl_dnnl_md(&m, n, s, (enum dl_layout)l);
        if (dnnl_memory_desc_equal(&m, md))
            return l;
    }
    return -1;
}

int dl_dnnl_pd(dnnl_primitive_desc_t *pd, const void *op_desc, const_dnnl_primitive_desc_t hint)
{
    dnnl_primitive_attr_t attr;
    if (dnnl_primitive_attr_create(&attr) != dnnl_success)
        return dnnl_out_of_memory;
    dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    dnnl_status_t st = dnnl_primitive_desc_create(pd, op_desc, attr, dl_dnnl_engine(), hint);
    dnnl_primitive_attr_destroy(attr);
    return st;
}

const dnnl_memory_desc_t *dl_dnnl_prim_md(const struct dl_dnnl_prim *p, int arg)
{
    return dnnl_primitive_desc_query_md(p->pd, dnnl_query_exec_arg_md, arg);
}

size_t dl_dnnl_prim_bytes(const struct dl_dnnl_prim *p, int arg)
{
    const dnnl_memory_desc_t *md = dl_dnnl_prim_md(p, arg);
    return md ? dnnl_memory_desc_get_size(md) : 0;
}

int dl_dnnl_prim_adopt(struct dl_dnnl_prim *p, const int *args, struct dl_error *err)
{
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(p->pd, dnnl_query_scratchpad_md, 0);
    p->scratch = smd ? dnnl_memory_desc_get_size(smd) : 0;
    int rc = dl_dnnl_check(dnnl_primitive_create(&p->prim, p->pd), "primitive creation", err);
    for (int i = 0; !rc && args[i]; i++) {
        if (p->n == DL_DNNL_MAX_ARGS - 1)
            return dl_errorf(err, DL_ERR_INTERNAL, "too many oneDNN arguments");
        p->arg[p->n] = args[i];
        rc = dl_dnnl_check(dnnl_memory_create(&p->mem[p->n], dl_dnnl_prim_md(p, args[i]), dl_dnnl_engine(),
                                              DNNL_MEMORY_NONE), "memory", err);
        p->n++;
    }
    if (!rc && p->scratch) {
        p->arg[p->n] = DNNL_ARG_SCRATCHPAD;
        rc = dl_dnnl_check(dnnl_memory_create(&p->mem[p->n], smd, dl_dnnl_engine(), DNNL_MEMORY_NONE),
                           "scratchpad", err);
        p->n++;
    }
    return rc;
}

int dl_dnnl_prim_init(struct dl_dnnl_prim *p, const void *op_desc, const_dnnl_primitive_desc_t hint,
                      const int *args, struct dl_error *err)
{
    memset(p, 0, sizeof *p);
    int rc = dl_dnnl_check(dl_dnnl_pd(&p->pd, op_desc, hint), "primitive descriptor", err);
    return rc ? rc : dl_dnnl_prim_adopt(p, args, err);
}

int dl_dnnl_reorder_init(struct dl_dnnl_prim *p, const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *dst,
                         int accumulate, struct dl_error *err)
{
    memset(p, 0, sizeof *p);
    dnnl_primitive_attr_t attr;
    dnnl_post_ops_t po;
    if (dnnl_primitive_attr_create(&attr) != dnnl_success || dnnl_post_ops_create(&po) != dnnl_success)
        return dl_errorf(err, DL_ERR_NOMEM, "oneDNN reorder: out of memory");
    dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (accumulate) {
        dnnl_post_ops_append_sum(po, 1.0f);
        dnnl_primitive_attr_set_post_ops(attr, po);
    }
    dnnl_status_t st = dnnl_reorder_primitive_desc_create(&p->pd, src, dl_dnnl_engine(), dst, dl_dnnl_engine(), attr);
    dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    int rc = dl_dnnl_check(st, "reorder", err);
    static const int args[] = {DNNL_ARG_FROM, DNNL_ARG_TO, 0};
    return rc ? rc : dl_dnnl_prim_adopt(p, args, err);
}

void dl_dnnl_prim_free(struct dl_dnnl_prim *p)
{
    for (int i = 0; i < p->n; i++)
        if (p->mem[i])
            dnnl_memory_destroy(p->mem[i]);
    if (p->prim)
        dnnl_primitive_destroy(p->prim);
    if (p->pd)
        dnnl_primitive_desc_destroy(p->pd);
    memset(p, 0, sizeof *p);
}

void dl_dnnl_prim_run(const struct dl_dnnl_prim *p, void *const *ptr, void *scratch)
{
    dnnl_exec_arg_t a[DL_DNNL_MAX_ARGS];
    for (int i = 0; i < p->n; i++) {
        dnnl_memory_set_data_handle_v2(p->mem[i], p->arg[i] == DNNL_ARG_SCRATCHPAD ? scratch : ptr[i],
                                       dl_dnnl_stream());
        a[i] = (dnnl_exec_arg_t){p->arg[i], p->mem[i]};
    }
    dnnl_primitive_execute(p->prim, dl_dnnl_stream(), p->n, a);
    dnnl_stream_wait(dl_dnnl_stream());
}

void dl_dnnl_follow_layouts(const struct dl_layer *l, const enum dl_layout *offered, enum dl_layout *in,
                            enum dl_layout *out)
{
    for (int i = 0; i < l->n_in; i++)
        in[i] = offered[0];
    *out = offered[0];
}
