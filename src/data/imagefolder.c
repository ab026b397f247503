/* imagefolder.c: listing an image folder or a list file into one string
 * arena (ImageNet's 1.28 million paths are one allocation, not a million),
 * and the sample source that reads a file and runs the transform on it. */
#include "data/imagefolder.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/transform.h"

#define MAX_FILE_BYTES (256L << 20)
#define MAX_DEPTH 16

void dl_file_list_free(struct dl_file_list *l)
{
    if (!l)
        return;
    free(l->offset);
    free(l->names);
    free(l->labels);
    if (l->class_names)
        for (int i = 0; i < l->classes; i++)
            free(l->class_names[i]);
    free(l->class_names);
    memset(l, 0, sizeof *l);
}

/* ------------------------------------------------------------ growing the list */

struct builder {
    struct dl_file_list *l;
    long cap_n, cap_names, used;
};

static int add_file(struct builder *b, const char *path, int label, struct dl_error *err)
{
    struct dl_file_list *l = b->l;
    size_t len = strlen(path) + 1;
    if (l->n == b->cap_n) {
        long cap = b->cap_n ? 2 * b->cap_n : 1024;
        long *o = realloc(l->offset, (size_t)cap * sizeof *o);
        int *lb = o ? realloc(l->labels, (size_t)cap * sizeof *lb) : NULL;
        if (o)
            l->offset = o;
        if (!lb)
            return dl_errorf(err, DL_ERR_NOMEM, "out of memory listing %ld files", l->n);
        l->labels = lb;
        b->cap_n = cap;
    }
    if (b->used + (long)len > b->cap_names) {
        long cap = b->cap_names ? 2 * b->cap_names : 1 << 16;
        while (cap < b->used + (long)len)
            cap *= 2;
        char *nm = realloc(l->names, (size_t)cap);
        if (!nm)
            return dl_errorf(err, DL_ERR_NOMEM, "out of memory listing %ld files", l->n);
        l->names = nm;
        b->cap_names = cap;
    }
    memcpy(l->names + b->used, path, len);
    l->offset[l->n] = b->used;
    l->labels[l->n] = label;
    l->n++;
    b->used += (long)len;
    return DL_OK;
}

/* ------------------------------------------------------------ folder mode */

static int has_image_extension(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot)
        return 0;
    static const char *const ext[] = {".jpg", ".jpeg", ".png"};
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++)
        if (strcasecmp(dot, ext[i]) == 0)
            return 1;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted entries of dir (no hidden ones), split into folders and files. */
static int read_sorted(const char *dir, char ***dirs, int *nd, char ***files, int *nf, struct dl_error *err)
{
    *dirs = *files = NULL;
    *nd = *nf = 0;
    DIR *d = opendir(dir);
    if (!d)
        return dl_errorf(err, DL_ERR_IO, "%s: cannot open the folder: %s", dir, strerror(errno));
    int capd = 0, capf = 0, rc = DL_OK;
    struct dirent *e;
    while ((e = readdir(d)) && !rc) {
        if (e->d_name[0] == '.')
            continue;
        char path[DL_PATH_MAX * 2];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path) {
            rc = dl_errorf(err, DL_ERR_DATA, "%s/%s: path too long", dir, e->d_name);
            break;
        }
        struct stat st;
        if (stat(path, &st) != 0)
            continue; /* a dangling link: nothing to read */
        int is_dir = S_ISDIR(st.st_mode);
        if (!is_dir && !(S_ISREG(st.st_mode) && has_image_extension(e->d_name)))
            continue;
        char ***arr = is_dir ? dirs : files;
        int *n = is_dir ? nd : nf, *cap = is_dir ? &capd : &capf;
        if (*n == *cap) {
            int c = *cap ? 2 * *cap : 64;
            char **a = realloc(*arr, (size_t)c * sizeof *a);
            if (!a) {
                rc = dl_errorf(err, DL_ERR_NOMEM, "out of memory reading %s", dir);
                break;
            }
            *arr = a;
            *cap = c;
        }
        (*arr)[*n] = dl_strdup(e->d_name, err);
        if (!(*arr)[*n])
            rc = DL_ERR_NOMEM;
        else
            (*n)++;
    }
    closedir(d);
    if (*dirs)
        qsort(*dirs, (size_t)*nd, sizeof **dirs, cmp_str);
    if (*files)
        qsort(*files, (size_t)*nf, sizeof **files, cmp_str);
    return rc;
}

static void free_names(char **a, int n)
{
    for (int i = 0; i < n; i++)
        free(a[i]);
    free(a);
}

/* A class folder: its files, then its subfolders, each sorted. */
static int walk_class(struct builder *b, const char *dir, int label, int depth, struct dl_error *err)
{
    if (depth > MAX_DEPTH)
        return dl_errorf(err, DL_ERR_DATA, "%s: folders nested more than %d deep", dir, MAX_DEPTH);
    char **dirs, **files;
    int nd, nf;
    int rc = read_sorted(dir, &dirs, &nd, &files, &nf, err);
    char path[DL_PATH_MAX * 2];
    for (int i = 0; !rc && i < nf; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        rc = add_file(b, path, label, err);
    }
    for (int i = 0; !rc && i < nd; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, dirs[i]);
        rc = walk_class(b, path, label, depth + 1, err);
    }
    free_names(dirs, nd);
    free_names(files, nf);
    return rc;
}

static int read_folder(const char *root, const struct dl_file_list *like, struct dl_file_list *out,
                       struct dl_error *err)
{
    char **dirs, **files;
    int nd, nf;
    int rc = read_sorted(root, &dirs, &nd, &files, &nf, err);
    free_names(files, nf);
    if (rc) {
        free_names(dirs, nd);
        return rc;
    }
    if (nd == 0) {
        free_names(dirs, nd);
        return dl_errorf(err, DL_ERR_DATA, "%s: no class folders (expected one subfolder per class)", root);
    }
    struct builder b = {out, 0, 0, 0};
    for (int i = 0; !rc && i < nd; i++) {
        int label = i;
        if (like && like->class_names) {
            label = -1;
            for (int k = 0; k < like->classes; k++)
                if (strcmp(like->class_names[k], dirs[i]) == 0)
                    label = k;
            if (label < 0) {
                rc = dl_errorf(err, DL_ERR_DATA, "%s/%s: class '%s' is not in the training split", root, dirs[i],
                               dirs[i]);
                break;
            }
        }
        char path[DL_PATH_MAX * 2];
        snprintf(path, sizeof path, "%s/%s", root, dirs[i]);
        rc = walk_class(&b, path, label, 1, err);
    }
    if (!rc && like && like->class_names) { /* the training split's names and numbering */
        out->classes = like->classes;
        out->class_names = dl_calloc((size_t)like->classes, sizeof *out->class_names, err);
        for (int k = 0; out->class_names && k < like->classes; k++)
            out->class_names[k] = dl_strdup(like->class_names[k], err);
        free_names(dirs, nd);
    } else { /* sorted: index = label */
        out->class_names = dirs;
        out->classes = nd;
    }
    return rc;
}

int dl_file_list_classes(const char *root, struct dl_file_list *out, struct dl_error *err)
{
    memset(out, 0, sizeof *out);
    char **dirs, **files;
    int nd, nf;
    int rc = read_sorted(root, &dirs, &nd, &files, &nf, err);
    free_names(files, nf);
    if (!rc && nd == 0)
        rc = dl_errorf(err, DL_ERR_DATA, "%s: no class folders (expected one subfolder per class)", root);
    if (rc) {
        free_names(dirs, nd);
        return rc;
    }
    out->class_names = dirs;
    out->classes = nd;
    return DL_OK;
}

/* ------------------------------------------------------------ list-file mode */

static int read_list(const char *list, struct dl_file_list *out, struct dl_error *err)
{
    FILE *f = fopen(list, "r");
    if (!f)
        return dl_errorf(err, DL_ERR_IO, "%s: cannot open the list file: %s", list, strerror(errno));
    char base[DL_PATH_MAX];
    snprintf(base, sizeof base, "%s", list);
    char *slash = strrchr(base, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(base, sizeof base, ".");
    struct builder b = {out, 0, 0, 0};
    char line[DL_PATH_MAX * 2];
    int rc = DL_OK, lineno = 0, maxlabel = -1;
    while (!rc && fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            rc = dl_errorf(err, DL_ERR_DATA, "%s:%d: line too long", list, lineno);
            break;
        }
        while (len && isspace((unsigned char)line[len - 1]))
            line[--len] = '\0';
        char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        if (!*p || *p == '#')
            continue;
        char *sp = p + strlen(p);
        while (sp > p && !isspace((unsigned char)sp[-1]))
            sp--;
        char *end;
        errno = 0;
        long label = sp > p ? strtol(sp, &end, 10) : -1;
        if (sp == p || *end || errno || label < 0 || label > (1 << 24)) {
            rc = dl_errorf(err, DL_ERR_DATA, "%s:%d: expected 'path label' with an integer label >= 0, found '%s'",
                           list, lineno, p);
            break;
        }
        while (sp > p && isspace((unsigned char)sp[-1]))
            *--sp = '\0';
        char path[DL_PATH_MAX * 3];
        snprintf(path, sizeof path, "%s%s%s", *p == '/' ? "" : base, *p == '/' ? "" : "/", p);
        rc = add_file(&b, path, (int)label, err);
        if (label > maxlabel)
            maxlabel = (int)label;
    }
    fclose(f);
    out->classes = maxlabel + 1;
    return rc;
}

int dl_file_list_read(const char *root, const char *list, const struct dl_file_list *like,
                      struct dl_file_list *out, struct dl_error *err)
{
    memset(out, 0, sizeof *out);
    int rc = root ? read_folder(root, like, out, err) : read_list(list, out, err);
    if (!rc && out->n == 0)
        rc = dl_errorf(err, DL_ERR_DATA, "%s: no images (*.jpg, *.jpeg, *.png) found", root ? root : list);
    if (rc)
        dl_file_list_free(out);
    return rc;
}

void dl_file_list_thin(struct dl_file_list *l, long keep)
{
    if (keep <= 0 || keep >= l->n)
        return;
    for (long i = 0; i < keep; i++) {
        long src = (long)((double)i * (double)l->n / (double)keep);
        l->offset[i] = l->offset[src];
        l->labels[i] = l->labels[src];
    }
    l->n = keep;
}

/* ------------------------------------------------------------ reading files */

int dl_read_file(const char *path, unsigned char **buf, size_t *len, struct dl_error *err)
{
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return dl_errorf(err, DL_ERR_DATA, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > MAX_FILE_BYTES) {
        close(fd);
        return dl_errorf(err, DL_ERR_DATA, "%s: not a regular file of at most %ld bytes", path, MAX_FILE_BYTES);
    }
    size_t size = (size_t)st.st_size;
    unsigned char *b = dl_calloc(size ? size : 1, 1, err);
    if (!b) {
        close(fd);
        return DL_ERR_NOMEM;
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, b + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = errno;
            close(fd);
            free(b);
            return dl_errorf(err, DL_ERR_DATA, "%s: read failed after %zu of %zu bytes: %s", path, got, size,
                             r < 0 ? strerror(e) : "file shrank");
        }
        got += (size_t)r;
    }
    close(fd);
    *buf = b;
    *len = size;
    return DL_OK;
}

/* ------------------------------------------------------------ the source */

struct folder_source {
    struct dl_sample_source base;
    struct dl_file_list files;
    struct dl_transform_spec transform;
    struct dl_shape shape;
    float mean[3], std[3];
};

static int folder_load(const struct dl_sample_source *s, long i, uint64_t aug_seed, float *x,
                       struct dl_error *err)
{
    const struct folder_source *fs = (const struct folder_source *)s;
    const char *path = dl_file_list_path(&fs->files, i);
    unsigned char *buf;
    size_t len;
    int rc = dl_read_file(path, &buf, &len, err);
    if (rc)
        return rc;
    struct dl_rng rng;
    dl_rng_seed(&rng, aug_seed);
    rc = dl_transform_image(buf, len, &fs->transform, fs->shape, fs->mean, fs->std, &rng, 1, x, err);
    free(buf);
    if (rc)
        dl_error_prefix(err, "%s", path);
    return rc;
}

static void folder_free(struct dl_sample_source *s)
{
    struct folder_source *fs = (struct folder_source *)s;
    dl_file_list_free(&fs->files);
    free(fs);
}

static const struct dl_sample_source_ops folder_ops = {folder_load, folder_free};

int dl_imagefolder_source(struct dl_file_list *files, const struct dl_transform_spec *t,
                          struct dl_shape shape, const float *mean, const float *std,
                          struct dl_sample_source **out, struct dl_error *err)
{
    *out = NULL;
    if (shape.c != 1 && shape.c != 3)
        return dl_errorf(err, DL_ERR_SPEC, "image folders make 1- or 3-channel inputs, the network takes %d channels",
                         shape.c);
    struct folder_source *fs = dl_calloc(1, sizeof *fs, err);
    if (!fs)
        return DL_ERR_NOMEM;
    fs->base.ops = &folder_ops;
    fs->files = *files;
    memset(files, 0, sizeof *files);
    fs->transform = *t;
    fs->shape = shape;
    for (int c = 0; c < shape.c; c++) {
        fs->mean[c] = mean[c];
        fs->std[c] = std[c];
    }
    *out = &fs->base;
    return DL_OK;
}
