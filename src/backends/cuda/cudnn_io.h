/* cuda/cudnn_io.h: a cuDNN kernel instance's handle and the descriptors of
 * its layer's input 0 and output (NCHW float, mb samples), made and freed
 * in one place for every cuDNN kernel (conv.c, eltwise.c, pool.c). */
#ifndef DL_BACKENDS_CUDA_CUDNN_IO_H
#define DL_BACKENDS_CUDA_CUDNN_IO_H

#include <cudnn.h>

#include "graph/graph.h"

struct dl_cudnn_io {
    cudnnHandle_t h;
    cudnnTensorDescriptor_t x, y;
};

/* Handle and descriptors for l at mb samples; DL_ERR_UNSUPPORTED naming the
 * layer and kernel when cuDNN refuses (no GPU, say); io is left empty then. */
int dl_cudnn_io_init(struct dl_cudnn_io *io, const struct dl_layer *l, int mb, const char *kernel,
                     struct dl_error *err);
void dl_cudnn_io_free(struct dl_cudnn_io *io);

/* A zeroed instance of `bytes` whose first member is a struct dl_cudnn_io,
 * initialised for l at mb samples; NULL with *rc and err set on failure. */
void *dl_cudnn_io_new(size_t bytes, const struct dl_layer *l, int mb, const char *kernel, int *rc,
                      struct dl_error *err);

#endif
