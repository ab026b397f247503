/* cuda/cudnn_io.c: what every cuDNN kernel of one layer starts from: a
 * cuDNN handle and the NCHW descriptors of its input and output for mb
 * samples in the kernel's dtype (cudnn_io.h). */
#include "backends/cuda/cudnn_io.h"

#include <stdlib.h>

cudnnDataType_t dl_cudnn_dtype(enum dl_dtype dt)
{
    return dt == DL_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

static void describe_nchw(cudnnTensorDescriptor_t *d, int mb, struct dl_shape s, enum dl_dtype dt, cudnnStatus_t *st)
{
    if (*st == CUDNN_STATUS_SUCCESS)
        *st = cudnnCreateTensorDescriptor(d);
    if (*st == CUDNN_STATUS_SUCCESS)
        *st = cudnnSetTensor4dDescriptor(*d, CUDNN_TENSOR_NCHW, dl_cudnn_dtype(dt), mb, s.c, s.h, s.w);
}

int dl_cudnn_io_init(struct dl_cudnn_io *io, const struct dl_layer *l, int mb, enum dl_dtype dt, const char *kernel,
                     struct dl_error *err)
{
    *io = (struct dl_cudnn_io){0};
    cudnnStatus_t st = cudnnCreate(&io->h);
    if (st != CUDNN_STATUS_SUCCESS)
        io->h = NULL;
    describe_nchw(&io->x, mb, l->in_shape[0], dt, &st);
    describe_nchw(&io->y, mb, l->out_shape, dt, &st);
    if (st == CUDNN_STATUS_SUCCESS)
        return DL_OK;
    dl_cudnn_io_free(io);
    return dl_errorf(err, DL_ERR_UNSUPPORTED, "layer '%s' (kernel %s): cuDNN handle or descriptors: %s", l->name,
                     kernel, cudnnGetErrorString(st));
}

void *dl_cudnn_io_new(size_t bytes, const struct dl_layer *l, int mb, enum dl_dtype dt, const char *kernel, int *rc,
                      struct dl_error *err)
{
    struct dl_cudnn_io *io = dl_calloc(1, bytes, err);
    *rc = io ? dl_cudnn_io_init(io, l, mb, dt, kernel, err) : DL_ERR_NOMEM;
    if (*rc) {
        free(io);
        return NULL;
    }
    return io;
}

void dl_cudnn_io_free(struct dl_cudnn_io *io)
{
    if (io->y)
        cudnnDestroyTensorDescriptor(io->y);
    if (io->x)
        cudnnDestroyTensorDescriptor(io->x);
    if (io->h)
        cudnnDestroy(io->h);
    *io = (struct dl_cudnn_io){0};
}
