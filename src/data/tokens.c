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

/* Maps path's tokens after those of w. */
static int map_file(const char *path, struct dl_token_windows *w, struct dl_error *err)
{
    long count;
    int width, rc = dl_token_file_header(path, &count, &width, err);
    return rc ? rc : dl_token_windows_add(w, path, 4 * DL_TOKEN_FILE_HEADER_INTS, width, count, err);
}

/* The token stream of a split: w's files, [*lo, *hi) of them the split. */
static int map_split(const struct dl_data_spec *spec, int train, struct dl_token_windows *w, long *lo, long *hi,
                     struct dl_error *err)
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
        rc = map_file(spec->dir, w, err);
    else if (!rc) {
        const glob_t *g = train || whole ? &tg : &vg;
        for (size_t i = 0; !rc && i < g->gl_pathc; i++)
            rc = map_file(g->gl_pathv[i], w, err);
    }
    long n = w->n_files ? w->start[w->n_files] : 0;
    *lo = 0, *hi = n;
    if (!rc && whole) {
        long cut = n - (long)((double)n * spec->validation);
        *lo = train ? 0 : cut, *hi = train ? cut : n;
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
    long lo, hi;
    struct dl_token_windows *w = dl_calloc(1, sizeof *w, err);
    int rc = w ? map_split(spec, train, w, &lo, &hi, err) : DL_ERR_NOMEM;
    if (rc) {
        dl_token_windows_free(w);
        return rc;
    }
    return dl_text_windows(w, lo, hi, T, id_limit, classes, limit, train ? "training" : "validation", spec->dir, ds,
                           err);
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
