/* device.c: dl_device_open, the one place that knows which devices this
 * build has (the host and the emulated testing aid always; the CUDA device
 * only --with-cuda: its #ifdef lives here, as the communication backends'
 * lives in comm/comm.c). */
#include "backends/device.h"

#include "config.h"

#include <stdio.h>

#ifdef DL_HAVE_CUDA
#include "backends/cuda/cuda.h"
#endif

const struct dl_device *dl_device_get(enum dl_device_kind kind)
{
#ifdef DL_HAVE_CUDA
    if (kind == DL_DEVICE_CUDA)
        return &dl_device_cuda;
#endif
    return kind == DL_DEVICE_CPU ? &dl_device_host : kind == DL_DEVICE_EMULATED ? &dl_device_emulated : NULL;
}

int dl_device_open(enum dl_device_kind kind, int local_rank, const struct dl_device **out, struct dl_error *err)
{
    *out = NULL;
    if (kind != DL_DEVICE_CUDA) {
        *out = dl_device_get(kind);
        return DL_OK;
    }
#ifdef DL_HAVE_CUDA
    int rc = dl_cuda_device_open(local_rank, out, err);
    if (rc)
        dl_error_prefix(err, "--device cuda");
    return rc;
#else
    (void)local_rank;
    return dl_errorf(err, DL_ERR_SPEC, "--device cuda: this dltrain was built without --with-cuda (configure "
                     "--with-cuda[=DIR] with the CUDA Toolkit, cuDNN and NCCL installed)");
#endif
}

void dl_device_libraries(char *buf, size_t size)
{
#ifdef DL_HAVE_CUDA
    dl_cuda_libraries(buf, size);
#else
    snprintf(buf, size, "CUDA: not built (configure --with-cuda)");
#endif
}
