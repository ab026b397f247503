/* safetensors.h: writer and strict reader of the safetensors format, the
 * tensor file that PyTorch, JAX and NumPy users read: an 8-byte little-endian
 * header length N, N bytes of JSON ({"name": {"dtype", "shape",
 * "data_offsets": [begin, end]}, ..., "__metadata__": {string: string}}),
 * then the data, tensors packed back to back.  The writer adds a CRC-32 of the
 * data section to the metadata and the reader verifies it. */
#ifndef DL_SAFETENSORS_H
#define DL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define DL_ST_MAX_DIMS 8
#define DL_ST_MAX_HEADER (100u << 20) /* the reference implementation's limit */
/* Metadata key holding "crc32:XXXXXXXX", the zlib CRC-32 of the data section
 * (in Python: zlib.crc32(data) with data = the bytes after the header). */
#define DL_ST_CHECKSUM_KEY "dltrain.data_crc32"

enum dl_st_dtype {
    DL_ST_BOOL, DL_ST_U8, DL_ST_I8, DL_ST_F8_E4M3, DL_ST_F8_E5M2, DL_ST_U16, DL_ST_I16,
    DL_ST_F16, DL_ST_BF16, DL_ST_U32, DL_ST_I32, DL_ST_F32, DL_ST_U64, DL_ST_I64, DL_ST_F64,
    DL_ST_N_DTYPES
};

/* "F32", ... and the element size in bytes. */
const char *dl_st_dtype_name(enum dl_st_dtype t);
size_t dl_st_dtype_size(enum dl_st_dtype t);

/* ---------------------------------------------------------------- writing */
struct dl_st_tensor {
    const char *name;
    enum dl_st_dtype dtype;
    int ndim;                        /* 0 = scalar */
    int64_t shape[DL_ST_MAX_DIMS];
    const void *data;                /* product(shape) elements, little-endian */
};

struct dl_st_meta {
    const char *key, *value;
};

/* Writes the tensors in the given order plus the metadata (and the checksum)
 * to path through an atomic file (see io/atomic_file.h): on any error the
 * previous file at path is untouched.  Names must be unique and non-empty. */
int dl_st_write(const char *path, const struct dl_st_tensor *t, int n, const struct dl_st_meta *meta,
                int n_meta, struct dl_error *err);

/* ---------------------------------------------------------------- reading */
struct dl_st_entry {
    char *name;
    enum dl_st_dtype dtype;
    int ndim;
    int64_t shape[DL_ST_MAX_DIMS];
    uint64_t count;                  /* elements */
    uint64_t begin, end;             /* byte offsets in the data section */
    const void *data;                /* into the mapped file */
};

struct dl_st_file {
    char name[1024];                 /* the path, for messages */
    const unsigned char *bytes;      /* the whole file */
    size_t size;
    int mapped;                      /* 1: bytes is an mmap owned by this struct */
    const unsigned char *data;       /* data section */
    size_t data_size;
    int n;
    struct dl_st_entry *t;           /* in data order */
    int n_meta;
    char **meta_key, **meta_value;
    int has_checksum;                /* 1: DL_ST_CHECKSUM_KEY was present and matched */
};

/* Opens and validates path completely: header length within the file, JSON
 * header (jansson; duplicate names rejected), known dtypes, shapes whose size
 * matches the offsets, offsets that tile the data section exactly (no
 * overlap, no gap, nothing outside), string-only metadata, and the checksum
 * when present.  What is not a regular file (a device; a FIFO, not waited
 * on) is refused.  Errors are DL_ERR_IO (cannot read) or DL_ERR_DATA; the
 * message names the file, the tensor and the expected vs found value. */
int dl_st_open(const char *path, struct dl_st_file *f, struct dl_error *err);
/* Same over a buffer the caller keeps alive until dl_st_close. */
int dl_st_open_memory(const char *name, const void *buf, size_t size, struct dl_st_file *f,
                      struct dl_error *err);
void dl_st_close(struct dl_st_file *f);

/* "[d0, d1, ...]" of a shape, for messages (truncated to n bytes). */
void dl_st_shape_str(int ndim, const int64_t *shape, char *buf, size_t n);

/* The tensor or metadata value called name, or NULL. */
const struct dl_st_entry *dl_st_find(const struct dl_st_file *f, const char *name);
const char *dl_st_meta_get(const struct dl_st_file *f, const char *key);

#endif
