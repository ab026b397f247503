/* idx.h: reader for IDX files, the format of MNIST and Fashion-MNIST (a
 * big-endian header of magic + dimension sizes, then unsigned bytes), raw or
 * gzip-compressed.  Every header field is checked against the data actually
 * present, so a damaged or hostile file yields an error, never a crash or a
 * huge allocation. */
#ifndef DL_IDX_H
#define DL_IDX_H

#include <stddef.h>

#include "core/error.h"

#define DL_IDX_MAX_DIMS 4
#define DL_IDX_MAGIC_IMAGES 0x00000803u /* unsigned bytes, 3 dims: N x H x W */
#define DL_IDX_MAGIC_LABELS 0x00000801u /* unsigned bytes, 1 dim: N */

struct dl_idx {
    int ndim;
    long dims[DL_IDX_MAX_DIMS]; /* dims[0] is the sample count */
    unsigned char *data;        /* dims[0] x ... x dims[ndim-1] bytes, row-major */
    size_t size;                /* number of bytes in data */
};

/* Reads an unsigned-byte IDX file with exactly ndim dimensions (1..4) from
 * path, which may be plain or gzipped.  Errors: DL_ERR_IO when the file
 * cannot be opened, DL_ERR_DATA for a bad magic number, a zero or oversized
 * dimension, a truncated or overlong file, or a corrupt gzip stream; the
 * message starts with the path.  On error *out is left empty. */
int dl_idx_read(const char *path, int ndim, struct dl_idx *out, struct dl_error *err);

/* The header alone: ndim and dims, size; data NULL (nothing to free). */
int dl_idx_read_header(const char *path, int ndim, struct dl_idx *out, struct dl_error *err);

/* Reads an images file (N x H x W) and its labels file (N), and checks that
 * both hold the same N and that every label is in [0, classes). */
int dl_idx_read_pair(const char *images_path, const char *labels_path, int classes,
                     struct dl_idx *images, struct dl_idx *labels, struct dl_error *err);

void dl_idx_free(struct dl_idx *idx);

#endif
