/* readback.c: the executor's memory as the host reads it (see exec.h):
 * where it lives, and values of it the host may read -- in place on a
 * device with host memory, copied out through the device otherwise (the
 * trainer's numerics checks; gather.c's checkpoints and --dump-weights). */
#include "exec/exec_impl.h"

#include <stdlib.h>

const struct dl_device *dl_exec_device(const struct dl_exec *e)
{
    return e->impl && e->impl->device ? e->impl->device : &dl_device_host;
}

const dl_real *dl_exec_host_values(const struct dl_exec *e, const dl_real *p, long n, dl_real **buf, long *cap,
                                   struct dl_error *err)
{
    const struct dl_device *dev = dl_exec_device(e);
    if (dev->host_memory)
        return p;
    if (n > *cap || !*buf) {
        dl_real *grown = realloc(*buf, sizeof *grown * (size_t)(n > 0 ? n : 1));
        if (!grown) {
            dl_errorf(err, DL_ERR_NOMEM, "out of memory (%ld values copied out of %s)", n, dev->name);
            return NULL;
        }
        *buf = grown;
        *cap = n > 0 ? n : 1;
    }
    if (n > 0 && dev->copy(*buf, p, sizeof *p * (size_t)n, DL_COPY_TO_HOST, err))
        return NULL;
    return *buf;
}
