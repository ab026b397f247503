/* tokens.c: token-file datasets (see tokens.h). */
#include "data/tokens.h"

#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "data/text.h"
#include "data/token_file.h"

/* The files of one split: --data's file itself, or the matches of pattern in
 * its folder in name order (glob sorts them). */
static int split_files(const struct dl_data_spec *spec, const char *pattern, glob_t *g, int *is_file,
                       struct dl_error *err)
{
    struct stat st;
    memset(g, 0, sizeof *g);
    if (!spec->dir[0])
        return dl_errorf(err, DL_ERR_SPEC, "%s: no token files given: pass --data DIR (its %s and %s files) or "
                         "--data FILE", spec->name, DL_TOKENS_TRAIN_FILES, DL_TOKENS_VAL_FILES);
    if (stat(spec->dir, &st) != 0)
        return dl_errorf(err, DL_ERR_IO, "%s: %s: %s", spec->name, spec->dir, strerror(errno));
    *is_file = !S_ISDIR(st.st_mode);
    if (*is_file)
        return DL_OK;
    char full[2 * DL_PATH_MAX + 2];
    snprintf(full, sizeof full, "%s/%s", spec->dir, pattern);
    int r = glob(full, 0, NULL, g);
    if (r == GLOB_NOSPACE)
        return dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory listing %s", spec->name, full);
    return DL_OK; /* GLOB_NOMATCH leaves gl_pathc 0 */
}

static const char *train_pattern(const struct dl_data_spec *spec)
{
    return spec->train_files[0] ? spec->train_files : DL_TOKENS_TRAIN_FILES;
}

static const char *val_pattern(const struct dl_data_spec *spec)
{
    return spec->val_files[0] ? spec->val_files : DL_TOKENS_VAL_FILES;
}

/* Appends path's tokens to s; each must be below `below`. */
static int read_file(const char *path, struct dl_token_stream *s, int below, int id_limit, struct dl_error *err)
{
    long first = s->n;
    int rc = dl_token_file_read(path, s, NULL, err);
    for (long i = first; !rc && i < s->n; i++)
        if (s->id[i] >= below)
            rc = dl_errorf(err, DL_ERR_DATA, "%s: token %ld is %d, not an id below %d (the network's %s)", path,
                           i - first, s->id[i], below,
                           below == id_limit ? "vocabulary: its embedding's vocab" : "input.classes");
    return rc;
}

/* The token stream of a split: lo..hi of s are its ids, each below `below`. */
static int read_split(const struct dl_data_spec *spec, int train, int below, int id_limit, struct dl_token_stream *s,
                      long *lo, long *hi, struct dl_error *err)
{
    glob_t tg, vg;
    int is_file = 0, rc = split_files(spec, train_pattern(spec), &tg, &is_file, err);
    if (!rc && !is_file)
        rc = split_files(spec, val_pattern(spec), &vg, &is_file, err);
    else
        memset(&vg, 0, sizeof vg);
    if (!rc && !is_file && tg.gl_pathc == 0)
        rc = dl_errorf(err, DL_ERR_DATA, "%s: no training token file in %s (looked for %s)", spec->name, spec->dir,
                       train_pattern(spec));
    int whole = is_file || vg.gl_pathc == 0; /* the test split is the end of the training files */
    if (!rc && is_file)
        rc = read_file(spec->dir, s, below, id_limit, err);
    else if (!rc) {
        const glob_t *g = train || whole ? &tg : &vg;
        for (size_t i = 0; !rc && i < g->gl_pathc; i++)
            rc = read_file(g->gl_pathv[i], s, below, id_limit, err);
    }
    *lo = 0, *hi = s->n;
    if (!rc && whole) {
        long cut = s->n - (long)((double)s->n * spec->validation);
        *lo = train ? 0 : cut, *hi = train ? cut : s->n;
    }
    if (!is_file) {
        globfree(&tg);
        globfree(&vg);
    }
    return rc;
}

int dl_tokens_load(const struct dl_data_spec *spec, int train, int T, int id_limit, int classes, long limit,
                   struct dl_dataset *ds, struct dl_error *err)
{
    struct dl_token_stream s = {0};
    long lo, hi;
    int below = id_limit > 0 && id_limit < classes ? id_limit : classes;
    int rc = read_split(spec, train, below, id_limit, &s, &lo, &hi, err);
    if (!rc)
        rc = dl_text_windows(s.id + lo, hi - lo, T, limit, train ? "training" : "validation", spec->dir, ds, err);
    dl_token_stream_free(&s);
    return rc;
}

int dl_tokens_check(const struct dl_data_spec *spec, struct dl_error *err)
{
    glob_t tg;
    int is_file = 0, rc = split_files(spec, train_pattern(spec), &tg, &is_file, err);
    if (rc)
        return rc;
    long count;
    int width;
    if (is_file)
        return dl_token_file_header(spec->dir, &count, &width, err);
    if (tg.gl_pathc == 0)
        rc = dl_errorf(err, DL_ERR_DATA, "%s: no training token file in %s (looked for %s)", spec->name, spec->dir,
                       train_pattern(spec));
    for (size_t i = 0; !rc && i < tg.gl_pathc; i++)
        rc = dl_token_file_header(tg.gl_pathv[i], &count, &width, err);
    globfree(&tg);
    return rc;
}
