/* checkpoint_dir.c: naming, discovery, rotation and scheduling of the
 * checkpoints in one folder (see checkpoint_dir.h). */
#include "train/checkpoint_dir.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/parse.h"
#include "train/checkpoint.h"

#define PREFIX "ckpt-"
#define SUFFIX ".safetensors"

int dl_checkpoint_path(char *out, size_t n, const char *dir, long global_step, struct dl_error *err)
{
    int len = snprintf(out, n, "%s/" PREFIX "%010ld" SUFFIX, dir, global_step);
    if (len < 0 || (size_t)len >= n)
        return dl_errorf(err, DL_ERR_IO, "%s: checkpoint folder name too long", dir);
    return DL_OK;
}

/* Step of a checkpoint file name, -1 for other names; *tmp is set for the
 * temporary files of an interrupted write (NAME.tmp.PID.N). */
static long name_step(const char *name, int *tmp)
{
    *tmp = 0;
    if (strncmp(name, PREFIX, strlen(PREFIX)) != 0)
        return -1;
    const char *p = name + strlen(PREFIX), *q = p;
    while (*q >= '0' && *q <= '9')
        q++;
    if (q == p || q - p > 18 || strncmp(q, SUFFIX, strlen(SUFFIX)) != 0)
        return -1;
    const char *rest = q + strlen(SUFFIX);
    if (*rest) {
        if (strncmp(rest, ".tmp.", 5) != 0)
            return -1;
        *tmp = 1;
    }
    return strtol(p, NULL, 10);
}

struct found_file {
    long step;
    char name[256];
};

static int newest_first(const void *a, const void *b)
{
    const struct found_file *x = a, *y = b;
    return x->step < y->step ? 1 : x->step > y->step ? -1 : strcmp(x->name, y->name);
}

/* The checkpoints (want_tmp = 0) or temporary files (1) of dir, newest first. */
static int list_dir(const char *dir, int want_tmp, struct found_file **out, int *count, struct dl_error *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return dl_errorf(err, DL_ERR_IO, "%s: cannot read the checkpoint folder: %s", dir, strerror(errno));
    int n = 0, cap = 16;
    struct found_file *list = malloc(sizeof *list * (size_t)cap);
    struct dirent *de;
    while (list && (de = readdir(d)) != NULL) {
        int tmp;
        long step = name_step(de->d_name, &tmp);
        if (step < 0 || tmp != want_tmp || strlen(de->d_name) >= sizeof list->name)
            continue;
        if (n == cap) {
            struct found_file *bigger = realloc(list, sizeof *list * (size_t)(cap *= 2));
            if (!bigger) {
                free(list);
                list = NULL;
                break;
            }
            list = bigger;
        }
        list[n].step = step;
        snprintf(list[n].name, sizeof list[n].name, "%s", de->d_name);
        n++;
    }
    closedir(d);
    if (!list)
        return dl_errorf(err, DL_ERR_NOMEM, "%s: out of memory listing the folder", dir);
    qsort(list, (size_t)n, sizeof *list, newest_first);
    *out = list;
    *count = n;
    return DL_OK;
}

int dl_checkpoint_find_latest(const char *dir, char *path_out, size_t n, int *found, char *warnings, size_t wn,
                              struct dl_error *err)
{
    struct found_file *list;
    int count;
    *found = 0;
    if (warnings && wn)
        warnings[0] = 0;
    int rc = list_dir(dir, 0, &list, &count, err);
    if (rc)
        return rc;
    for (int i = 0; i < count && !*found; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, list[i].name);
        struct dl_checkpoint_meta meta;
        struct dl_error why = {0};
        if (dl_checkpoint_probe(path, &meta, &why) == DL_OK) {
            if (strlen(path) >= n) {
                rc = dl_errorf(err, DL_ERR_IO, "%s: path too long", path);
                break;
            }
            snprintf(path_out, n, "%s", path);
            *found = 1;
        } else if (warnings && wn) {
            size_t len = strlen(warnings);
            snprintf(warnings + len, wn - len, "%s: skipped: %s\n", path, why.msg);
        }
    }
    free(list);
    return rc;
}

int dl_checkpoint_rotate(const char *dir, int keep, int *removed, struct dl_error *err)
{
    if (removed)
        *removed = 0;
    if (keep < 1)
        return dl_errorf(err, DL_ERR_SPEC, "--keep %d: expected at least 1", keep);
    for (int want_tmp = 0; want_tmp < 2; want_tmp++) {
        struct found_file *list;
        int count, rc = list_dir(dir, want_tmp, &list, &count, err);
        if (rc)
            return rc;
        for (int i = want_tmp ? 0 : keep; i < count; i++) {
            char path[2048];
            snprintf(path, sizeof path, "%s/%s", dir, list[i].name);
            if (unlink(path) != 0 && errno != ENOENT) {
                rc = dl_errorf(err, DL_ERR_IO, "%s: cannot remove an old checkpoint: %s", path, strerror(errno));
                break;
            }
            if (removed)
                ++*removed;
        }
        free(list);
        if (rc)
            return rc;
    }
    return DL_OK;
}

int dl_checkpoint_parse_every(const char *text, struct dl_checkpoint_every *every, struct dl_error *err)
{
    memset(every, 0, sizeof *every);
    size_t n = strlen(text);
    struct dl_error detail;
    if (n && isdigit((unsigned char)text[n - 1]) /* no unit: a number of steps */
            ? !dl_parse_long("--checkpoint-every", text, 1, 1000000000000000L, &every->steps, &detail)
            : !dl_parse_seconds("--checkpoint-every", text, 1e9, &every->seconds, &detail))
        return DL_OK;
    return dl_errorf(err, DL_ERR_SPEC, "--checkpoint-every: expected a number of steps (500) or a time "
                     "(90s, 15m, 2h), found '%s'", text);
}

int dl_checkpoint_due(const struct dl_checkpoint_every *every, long steps_since, double seconds_since)
{
    if (every->steps > 0 && steps_since >= every->steps)
        return 1;
    return every->seconds > 0 && seconds_since >= every->seconds;
}
