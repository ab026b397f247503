/* trace_steps.c: the executor's steps as --trace events (io/trace.h).  At
 * set-up every step gets, per direction, the name and kind its event
 * carries (a layer's name with its kernel or micro-batch plan; a reorder
 * with its layouts; a tensor-parallel collective; a pipeline send or
 * receive naming the tensor that travels), made once into the recorder's
 * strings; a recorded run then appends one event per step and direction
 * without formatting anything. */
#include "exec/exec_impl.h"

#include <stdio.h>

#include "io/trace.h"

/* What a communication step does in each direction (NULL: nothing). */
static void comm_names(const struct dl_exec_impl *m, struct dl_exec_step *s)
{
    int src_grad = s->src >= 0 && m->tensors[s->src].needs_grad;
    switch (s->kind) {
    case DL_STEP_TP: {
        /* every kind of plan/shard.h's enum dl_tp_in, forward and backward */
        static const char *const fwd[] = {
            [DL_TP_IN_AS_IS] = NULL, [DL_TP_IN_SLICE] = "tp slice", [DL_TP_IN_GATHER] = "tp allgather",
            [DL_TP_IN_SLICE_ROWS] = "tp slice rows", [DL_TP_IN_GATHER_ROWS] = "tp allgather rows",
            [DL_TP_IN_HALO] = "tp halo rows", [DL_TP_IN_GATHER_BATCH] = "tp allgather samples",
            [DL_TP_IN_SLICE_BATCH] = "tp slice samples"};
        static const char *const bwd[] = {
            [DL_TP_IN_AS_IS] = "tp allreduce gradient", [DL_TP_IN_SLICE] = "tp allgather gradient",
            [DL_TP_IN_GATHER] = "tp slice gradient", [DL_TP_IN_SLICE_ROWS] = "tp allgather rows gradient",
            [DL_TP_IN_GATHER_ROWS] = "tp slice rows gradient", [DL_TP_IN_HALO] = "tp halo rows gradient",
            [DL_TP_IN_GATHER_BATCH] = "tp slice samples gradient",
            [DL_TP_IN_SLICE_BATCH] = "tp allgather samples gradient"};
        _Static_assert(sizeof fwd / sizeof *fwd == DL_TP_IN_SLICE_BATCH + 1 && sizeof bwd == sizeof fwd,
                       "a name for every tensor-parallel input kind");
        s->trace.name[0] = s->tp_in == DL_TP_IN_SLICE_ROWS && m->tensors[s->src].partial ? "tp reduce-scatter rows"
                                                                                            : fwd[s->tp_in];
        if (!src_grad)
            break;
        s->trace.name[1] = s->tp_in == DL_TP_IN_GATHER && s->tp_sum_grad        ? "tp reduce-scatter gradient"
                           : s->tp_in == DL_TP_IN_GATHER_ROWS && s->tp_sum_grad ? "tp reduce-scatter rows gradient"
                                                                                : bwd[s->tp_in];
        break;
    }
    case DL_STEP_ALLREDUCE:
        s->trace.name[0] = "tp allreduce";
        break;
    case DL_STEP_RECV:
        s->trace.name[0] = "recv activation";
        s->trace.kind[0] = DL_TRACE_RECV;
        if (m->tensors[s->out].needs_grad) {
            s->trace.name[1] = "send gradient";
            s->trace.kind[1] = DL_TRACE_SEND;
        }
        break;
    case DL_STEP_SEND:
        s->trace.name[0] = "send activation";
        s->trace.kind[0] = DL_TRACE_SEND;
        if (src_grad) {
            s->trace.name[1] = "recv gradient";
            s->trace.kind[1] = DL_TRACE_RECV;
        }
        break;
    default:
        break;
    }
}

/* The kernel(s) of a layer step: forward's, backward's, and the parts of
 * its micro-batch plan per direction. */
static int layer_details(struct dl_exec *e, struct dl_exec_step *s, struct dl_error *err)
{
    char buf[512], a[200], b[200];
    snprintf(buf, sizeof buf, "%s%s", s->kernel->name, s->cfg.relu ? " + relu" : "");
    s->trace.detail[0] = s->trace.detail[1] = dl_trace_intern(e->trace, buf, err);
    if (!s->trace.detail[0])
        return DL_ERR_NOMEM;
    const struct dl_mbplan_layer *p = s->mbplan;
    if (!p)
        return DL_OK;
    if (p->dir[DL_DIR_FORWARD].n) {
        dl_mbplan_dir_str(&p->dir[DL_DIR_FORWARD], a, sizeof a);
        if (!(s->trace.plan[0] = dl_trace_intern(e->trace, a, err)))
            return DL_ERR_NOMEM;
    }
    if (p->dir[DL_DIR_BACKWARD_DATA].n || p->dir[DL_DIR_BACKWARD_WEIGHTS].n) {
        a[0] = b[0] = 0;
        if (p->dir[DL_DIR_BACKWARD_DATA].n)
            dl_mbplan_dir_str(&p->dir[DL_DIR_BACKWARD_DATA], a, sizeof a);
        if (p->dir[DL_DIR_BACKWARD_WEIGHTS].n)
            dl_mbplan_dir_str(&p->dir[DL_DIR_BACKWARD_WEIGHTS], b, sizeof b);
        snprintf(buf, sizeof buf, "data: %s; weights: %s", a[0] ? a : s->trace.detail[1], b[0] ? b : "-");
        if (!(s->trace.plan[1] = dl_trace_intern(e->trace, buf, err)))
            return DL_ERR_NOMEM;
    }
    return DL_OK;
}

int dl_exec_trace_prepare(struct dl_exec *e, struct dl_error *err)
{
    struct dl_exec_impl *m = e->impl;
    for (int i = 0; i < m->n_steps; i++) {
        struct dl_exec_step *s = &m->steps[i];
        const char *consumer = e->g->layers[s->timed_layer].name;
        s->trace.kind[0] = s->trace.kind[1] = DL_TRACE_TENSOR_COMM;
        s->trace.tensor = NULL;
        s->trace.count = s->out >= 0 ? m->tensors[s->out].count : s->src >= 0 ? m->tensors[s->src].count : 0;
        int rc = DL_OK;
        if (s->kind == DL_STEP_LAYER) {
            s->trace.kind[0] = s->trace.kind[1] = DL_TRACE_LAYER;
            s->trace.name[0] = dl_trace_intern(e->trace, e->g->layers[s->layer].name, err);
            s->trace.name[1] = m->tensors[s->out].needs_grad ? s->trace.name[0] : NULL;
            rc = s->trace.name[0] ? layer_details(e, s, err) : DL_ERR_NOMEM;
        } else if (s->kind == DL_STEP_REORDER) {
            char buf[64];
            const struct dl_exec_tensor *from = &m->tensors[s->src], *to = &m->tensors[s->out];
            int cast = from->shape.dtype != to->shape.dtype; /* a cast: a reorder between dtypes */
            snprintf(buf, sizeof buf, "%s -> %s",
                     cast ? dl_dtype_name(from->shape.dtype) : dl_layout_names[from->layout],
                     cast ? dl_dtype_name(to->shape.dtype) : dl_layout_names[to->layout]);
            s->trace.kind[0] = s->trace.kind[1] = DL_TRACE_REORDER;
            s->trace.name[0] = cast ? "cast" : "reorder";
            s->trace.name[1] = from->needs_grad ? s->trace.name[0] : NULL;
            s->trace.detail[0] = s->trace.detail[1] = dl_trace_intern(e->trace, buf, err);
            s->trace.tensor = dl_trace_intern(e->trace, consumer, err);
            rc = s->trace.detail[0] && s->trace.tensor ? DL_OK : DL_ERR_NOMEM;
        } else {
            comm_names(m, s);
            int travelling = s->kind == DL_STEP_RECV || s->kind == DL_STEP_SEND;
            s->trace.tensor = dl_trace_intern(e->trace, travelling ? e->g->layers[s->peer_layer].name : consumer, err);
            rc = s->trace.tensor ? DL_OK : DL_ERR_NOMEM;
        }
        if (rc)
            return rc;
    }
    return DL_OK;
}

void dl_exec_trace_step(struct dl_exec *e, const struct dl_exec_step *s, int backward, double t0)
{
    if (!s->trace.name[backward])
        return;
    struct dl_trace_event ev = {.t0 = t0, .t1 = dl_clock_now(), .name = s->trace.name[backward],
                                .detail = s->trace.detail[backward], .tensor = s->trace.tensor,
                                .chunk = e->run.chunk, .peer = -1, .index = -1, .kind = s->trace.kind[backward],
                                .dir = backward ? DL_TRACE_BACKWARD : DL_TRACE_FORWARD};
    if (s->trace.plan[backward] && e->run.batch == e->impl->mbplan.batch)
        ev.detail = s->trace.plan[backward];
    if (s->kind != DL_STEP_LAYER && s->kind != DL_STEP_REORDER)
        ev.bytes = (long)sizeof(dl_real) * e->run.batch * s->trace.count;
    if (s->kind == DL_STEP_RECV || s->kind == DL_STEP_SEND)
        ev.peer = s->peer;
    dl_trace_add(e->trace, DL_TRACE_COMPUTE, &ev);
}
