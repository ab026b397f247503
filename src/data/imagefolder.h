/* imagefolder.h: the samples of an image-folder split (torchvision's
 * ImageFolder layout: one subfolder per class, classes in sorted name order,
 * files *.jpg, *.jpeg, *.png in sorted order, subfolders included; or a list
 * file of "path label" lines), and the sample source that decodes them. */
#ifndef DL_IMAGEFOLDER_H
#define DL_IMAGEFOLDER_H

#include "core/error.h"
#include "data/dataset.h"

struct dl_file_list {
    long n;
    long *offset;      /* path i is names + offset[i] */
    char *names;
    int *labels;
    int classes;       /* class folders found (or largest label + 1) */
    char **class_names; /* folder mode: the sorted class names; NULL for a list file */
};

/* Lists root (a folder of class folders) or reads the list file `list`
 * (paths relative to the list file's folder unless absolute; labels are
 * integers >= 0).  Exactly one of root and list is non-NULL.  With `like`
 * (folder mode), class names map to like's indices (a validation split
 * takes the training split's numbering) and a class unknown there is an
 * error.  An empty split is an error. */
int dl_file_list_read(const char *root, const char *list, const struct dl_file_list *like,
                      struct dl_file_list *out, struct dl_error *err);
void dl_file_list_free(struct dl_file_list *l);

/* Only the sorted class folder names of root (an empty list otherwise). */
int dl_file_list_classes(const char *root, struct dl_file_list *out, struct dl_error *err);

/* Keeps `keep` samples of l evenly spaced over it (every class keeps its
 * share of a class-sorted list). */
void dl_file_list_thin(struct dl_file_list *l, long keep);

static inline const char *dl_file_list_path(const struct dl_file_list *l, long i)
{
    return l->names + l->offset[i];
}

/* The source of a split: takes ownership of *files (left empty).  mean/std
 * have shape.c entries. */
int dl_imagefolder_source(struct dl_file_list *files, const struct dl_transform_spec *t,
                          struct dl_shape shape, const float *mean, const float *std,
                          struct dl_sample_source **out, struct dl_error *err);

/* Reads a whole file (at most 256 MiB) into a new buffer. */
int dl_read_file(const char *path, unsigned char **buf, size_t *len, struct dl_error *err);

#endif
