/* cuda/cudnn_io.h: a cuDNN kernel instance's handle and the descriptors of
 * its layer's input 0 and output (NCHW, mb samples, in the kernel's dtype:
 * float, or bfloat16 for a bf16 kernel), made and freed in one place for
 * every cuDNN kernel (conv.c, eltwise.c, pool.c, batchnorm.c, join.c). */
#ifndef DL_BACKENDS_CUDA_CUDNN_IO_H
#define DL_BACKENDS_CUDA_CUDNN_IO_H

#include <cudnn.h>

#include "core/dtype.h"
#include "graph/graph.h"

struct dl_cudnn_io {
    cudnnHandle_t h;
    cudnnTensorDescriptor_t x, y;
};

/* cuDNN's data type for a kernel's dtype: CUDNN_DATA_BFLOAT16 for bf16,
 * else CUDNN_DATA_FLOAT. */
cudnnDataType_t dl_cudnn_dtype(enum dl_dtype dt);

/* Handle and descriptors for l at mb samples in dtype dt (a kernel
 * config's dtype); DL_ERR_UNSUPPORTED naming the layer and kernel when
 * cuDNN refuses (no GPU, say); io is left empty then. */
int dl_cudnn_io_init(struct dl_cudnn_io *io, const struct dl_layer *l, int mb, enum dl_dtype dt, const char *kernel,
                     struct dl_error *err);
void dl_cudnn_io_free(struct dl_cudnn_io *io);

/* A zeroed instance of `bytes` whose first member is a struct dl_cudnn_io,
 * initialised for l at mb samples in dtype dt; NULL with *rc and err set
 * on failure. */
void *dl_cudnn_io_new(size_t bytes, const struct dl_layer *l, int mb, enum dl_dtype dt, const char *kernel, int *rc,
                      struct dl_error *err);

#endif
