/* staging.c: communication steps on a device without host memory (see
 * exec_impl.h).  comm_steps.c's and tp_*.c's steps are host code: slices, gathers and
 * sums over the tensor group and pipeline messages loop over tensors and
 * hand them to a communicator that works in host memory.  On such a
 * device, every buffer a step may read or write -- its source's and its
 * output's values and gradients, a send's scratch, the workspace it uses
 * -- is copied to a host mirror (one grown buffer per executor), the
 * step runs on the mirrors, and what the direction writes is copied back
 * (forward: the output's values; backward: the source's gradient, and the
 * output's, which a sum over the group or a send's zeroing changes in
 * place): buffers the planner lets share memory with those (one dead by
 * then) are never written back over them.  Whole buffers are staged (for
 * max_batch samples).  Every communication step is synchronous (a send
 * copies what it sends into its outbox before it returns), so nothing
 * reads a mirror after the step.  With a tensor group's communicator of
 * device buffers (NCCL), the steps dl_exec_comm_in_place names are not
 * staged: they run on the device's memory (tp_steps.c). */
#include "exec/exec_impl.h"

#include <stdlib.h>

#define MAX_STAGED 6 /* src data and grad, out data and grad, a scratch, the workspace */

struct staged {
    void *device;  /* its device memory, restored afterwards */
    size_t bytes;
    size_t offset; /* of its mirror in the staging buffer */
    int written;   /* copied back after the step */
};

/* Adds p (bytes of device memory; NULL: none) to the list, once per
 * address: pointers to one buffer share its mirror. */
static void add(struct staged *list, int *n, void *p, size_t bytes, int written)
{
    if (!p || !bytes)
        return;
    for (int i = 0; i < *n; i++)
        if (list[i].device == p) {
            if (bytes > list[i].bytes)
                list[i].bytes = bytes;
            list[i].written |= written;
            return;
        }
    list[(*n)++] = (struct staged){p, bytes, 0, written};
}

/* Points every place that holds a staged buffer's device address at its
 * mirror (to_mirror) or back. */
static void swap(struct dl_exec_impl *m, struct dl_exec_step *s, struct dl_exec_tensor *t[2],
                 const struct staged *list, int n, unsigned char *base, int to_mirror)
{
    for (int i = 0; i < n; i++) {
        void *from = to_mirror ? list[i].device : base + list[i].offset;
        void *to = to_mirror ? base + list[i].offset : list[i].device;
        for (int k = 0; k < 2; k++) {
            if (t[k]->data == from)
                t[k]->data = to;
            if (t[k]->grad == from)
                t[k]->grad = to;
        }
        if (s->scratch[0] == from)
            s->scratch[0] = to;
        if (m->mem.workspace == from)
            m->mem.workspace = to;
    }
}

void dl_exec_comm_staged(struct dl_exec *e, struct dl_exec_step *s, int backward)
{
    struct dl_exec_impl *m = e->impl;
    const struct dl_device *dev = m->device;
    if (dev->host_memory || dl_exec_comm_in_place(e, s)) {
        (backward ? dl_exec_comm_backward : dl_exec_comm_forward)(e, s);
        return;
    }
    /* its source and output (a receive has no source, a send no output:
     * then both are the one it has) */
    int src = s->src >= 0 ? s->src : s->out, out = s->out >= 0 ? s->out : s->src;
    struct dl_exec_tensor *t[2] = {&m->tensors[src], &m->tensors[out]};
    struct staged list[MAX_STAGED];
    int n = 0;
    for (int k = 0; k < 2; k++) { /* k = 1: the output */
        size_t bytes = dl_exec_bytes(t[k], e->max_batch);
        add(list, &n, t[k]->data, bytes, !backward && k == 1 && s->out >= 0);
        add(list, &n, t[k]->grad, bytes, backward);
    }
    if (s->kind == DL_STEP_SEND && s->via_scratch[0])
        add(list, &n, s->scratch[0], dl_exec_bytes(t[0], e->max_batch), 0);
    add(list, &n, m->mem.workspace, dl_exec_tp_workspace(e, s, e->max_batch), 0);
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        list[i].offset = total;
        total += (list[i].bytes + DL_DEVICE_ALIGN - 1) / DL_DEVICE_ALIGN * DL_DEVICE_ALIGN;
    }
    if (total > m->io.staging_bytes) {
        free(m->io.staging);
        m->io.staging_bytes = 0;
        if (!(m->io.staging = dl_calloc(1, total, &e->err))) {
            e->status = DL_ERR_NOMEM;
            return;
        }
        m->io.staging_bytes = total;
    }
    unsigned char *base = m->io.staging;
    int rc = DL_OK;
    for (int i = 0; i < n && !rc; i++)
        rc = dev->copy(base + list[i].offset, list[i].device, list[i].bytes, DL_COPY_TO_HOST, &e->err);
    if (rc) {
        e->status = rc;
        return;
    }
    swap(m, s, t, list, n, base, 1);
    (backward ? dl_exec_comm_backward : dl_exec_comm_forward)(e, s);
    swap(m, s, t, list, n, base, 0);
    for (int i = 0; i < n && !rc; i++)
        if (list[i].written)
            rc = dev->copy(list[i].device, base + list[i].offset, list[i].bytes, DL_COPY_TO_DEVICE, &e->err);
    if (rc && !e->status)
        e->status = rc;
}
