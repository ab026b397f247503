/* batch_ahead.c: the training batches read, and on a device without host
 * memory copied, one step ahead (see batch_ahead.h). */
#include "train/batch_ahead.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static int alloc_slot(struct dl_batch_ahead *ba, struct dl_batch_slot *s, int max_local, struct dl_error *err)
{
    const struct dl_device *dev = ba->device;
    size_t bytes = (size_t)max_local * ba->sample_bytes;
    size_t labels = (size_t)max_local * (size_t)dl_dataset_positions(ba->batcher->ds);
    if (!ba->ahead) { /* the executors read the host's buffers in place */
        s->x = dl_calloc(bytes ? bytes : 1, 1, err);
        s->y = dl_calloc(labels ? labels : 1, sizeof *s->y, err);
        return s->x && s->y ? DL_OK : DL_ERR_NOMEM;
    }
    s->x = dev->pinned_alloc(bytes, err);
    s->y = s->x ? dev->pinned_alloc(sizeof *s->y * labels, err) : NULL;
    s->x_device = s->y ? dev->alloc(bytes, err) : NULL;
    s->y_device = s->x_device ? dev->alloc(sizeof *s->y * labels, err) : NULL;
    return s->y_device ? DL_OK : DL_ERR_NOMEM;
}

int dl_batch_ahead_init(struct dl_batch_ahead *ba, struct dl_batcher *batcher, const struct dl_device *device,
                        int max_local, struct dl_shape input, struct dl_trace *trace, struct dl_error *err)
{
    memset(ba, 0, sizeof *ba);
    ba->batcher = batcher;
    ba->device = device;
    ba->ahead = !device->host_memory;
    ba->sample_bytes = dl_dtype_value_size(input.dtype) * (size_t)dl_shape_count(input);
    ba->trace = trace;
    int rc = DL_OK;
    for (int i = 0; i < 1 + ba->ahead && !rc; i++)
        rc = alloc_slot(ba, &ba->slot[i], max_local, err);
    for (int i = 0; i < 2 && ba->ahead && !rc; i++) {
        rc = device->mark_init(&ba->slot[i].copied, err);
        if (!rc)
            rc = device->mark_init(&ba->slot[i].read, err);
        ba->marks = 1;
    }
    if (rc)
        dl_batch_ahead_free(ba);
    return rc;
}

void dl_batch_ahead_free(struct dl_batch_ahead *ba)
{
    const struct dl_device *dev = ba->device;
    for (int i = 0; dev && i < 2; i++) {
        struct dl_batch_slot *s = &ba->slot[i];
        if (!ba->ahead) {
            free(s->x);
            free(s->y);
            continue;
        }
        if (ba->marks) { /* a copy still queued from the pinned buffers ends first */
            struct dl_error ignored = {0};
            dev->mark_sync(&s->copied, &ignored);
            dev->mark_release(&s->copied);
            dev->mark_release(&s->read);
        }
        dev->pinned_free(s->x);
        dev->pinned_free(s->y);
        dev->free(s->x_device);
        dev->free(s->y_device);
    }
    memset(ba, 0, sizeof *ba);
}

void dl_batch_ahead_reset(struct dl_batch_ahead *ba)
{
    ba->held = 0;
}

/* Reads the batcher's next batch into slot s and, without host memory,
 * queues its copy behind the kernels that last read the slot's device
 * buffers. */
static int read_into(struct dl_batch_ahead *ba, struct dl_batch_slot *s, struct dl_error *err)
{
    const struct dl_device *dev = ba->device;
    int rc = ba->ahead ? dev->mark_sync(&s->copied, err) : DL_OK; /* its last copy has left the host buffers */
    if (rc)
        return rc;
    s->n = dl_batcher_next(ba->batcher, s->x, s->y);
    s->global = ba->batcher->last_global;
    s->offset = dl_batcher_last_offset(ba->batcher);
    s->label_norm = ba->batcher->last_label_norm;
    if (!ba->ahead || s->n <= 0)
        return DL_OK;
    double t0 = dl_trace_now(ba->trace);
    rc = dev->copy_ahead(s->x_device, s->x, ba->sample_bytes * (size_t)s->n, &s->read, &s->copied, err);
    if (!rc)
        rc = dev->copy_ahead(s->y_device, s->y, sizeof *s->y * (size_t)s->n * (size_t)dl_dataset_positions(ba->batcher->ds),
                             &s->read, &s->copied, err);
    if (dl_trace_on(ba->trace))
        dl_trace_span(ba->trace, DL_TRACE_DATA, "batch copy to device", t0);
    return rc;
}

int dl_batch_ahead_next(struct dl_batch_ahead *ba, const struct dl_batch_slot **slot, struct dl_error *err)
{
    int rc = DL_OK;
    if (ba->held) {
        ba->cur = 1 - ba->cur;
        ba->held = 0;
    } else {
        rc = read_into(ba, &ba->slot[ba->cur], err);
    }
    struct dl_batch_slot *s = &ba->slot[ba->cur];
    if (!rc && s->n < 0) { /* a sample could not be read */
        *err = ba->batcher->error;
        rc = err->code ? err->code : DL_ERR_INTERNAL;
    }
    if (!rc && ba->ahead && s->n > 0) /* the step's kernels start when its batch is there */
        rc = ba->device->wait_mark(&s->copied, err);
    *slot = s;
    return rc ? -1 : s->n;
}

int dl_batch_ahead_prefetch(struct dl_batch_ahead *ba, struct dl_error *err)
{
    if (!ba->ahead || ba->held)
        return DL_OK;
    ba->held = 1;
    return read_into(ba, &ba->slot[1 - ba->cur], err);
}

int dl_batch_ahead_release(struct dl_batch_ahead *ba, struct dl_error *err)
{
    return ba->ahead ? ba->device->mark_record(&ba->slot[ba->cur].read, err) : DL_OK;
}

long dl_batch_ahead_cursor(const struct dl_batch_ahead *ba)
{
    return ba->batcher->step - (ba->held && ba->slot[1 - ba->cur].n > 0);
}
