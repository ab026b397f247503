/* csv_table.c: comma-separated numbers (float_table.h): a row per line,
 * every row as wide as the first, an optional header line (the first line,
 * when none of its fields is a number), blank lines and '#' comments
 * skipped.
 * Errors say the file, line and column and what was expected. */
#include "data/float_table.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses the fields of line (NUL-terminated) into v (at most cap; *n
 * found); returns the 1-based column of the first field that is not a
 * number, or 0. */
static long fields(char *line, float *v, long cap, long *n)
{
    *n = 0;
    for (char *p = line;;) {
        char *e;
        errno = 0;
        double d = strtod(p, &e);
        char *q = e;
        while (*q == ' ' || *q == '\t' || *q == '\r')
            q++;
        if (e == p || (*q != ',' && *q != '\0') || errno == ERANGE || !isfinite(d) || fabs(d) > 3.4028234663852886e38)
            return (long)(p - line) + 1;
        if (*n < cap)
            v[*n] = (float)d;
        ++*n;
        if (*q == '\0')
            return 0;
        p = q + 1;
    }
}

/* Whether no field of line is a number: a header line. */
static int no_numbers(const char *line)
{
    for (const char *p = line;; p++) {
        char *e;
        strtod(p, &e);
        if (e != p)
            return 0;
        p = strchr(p, ',');
        if (!p)
            return 1;
    }
}

/* Grows t's values to hold at least need floats. */
static int reserve(struct dl_float_table *t, size_t *cap, size_t need, struct dl_error *err)
{
    if (need <= *cap)
        return DL_OK;
    size_t c = *cap ? *cap : 1024;
    while (c < need)
        c *= 2;
    float *v = realloc(t->v, c * sizeof *v);
    if (!v)
        return dl_errorf(err, DL_ERR_NOMEM, "out of memory reading a CSV file");
    t->v = v, *cap = c;
    return DL_OK;
}

int dl_csv_read(const char *path, struct dl_float_table *out, struct dl_error *err)
{
    memset(out, 0, sizeof *out);
    struct dl_short shown = dl_short(path);
    FILE *f = fopen(path, "r");
    if (!f)
        return dl_errorf(err, DL_ERR_IO, "%s: %s", shown.s, strerror(errno));
    char *line = NULL;
    size_t line_cap = 0, cap = 0;
    long lineno = 0, width = 0;
    int rc = DL_OK, first = 1;
    ssize_t len;
    while (!rc && (len = getline(&line, &line_cap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        const char *s = line + strspn(line, " \t");
        if (!*s || *s == '#')
            continue;
        long n, count = width ? width : (long)(len / 2 + 1); /* fields of a line: at most half its length + 1 */
        if ((rc = reserve(out, &cap, (size_t)(out->rows + 1) * (size_t)count, err)))
            break;
        long bad = fields(line, out->v + out->rows * count, count, &n);
        if (bad && first && no_numbers(line)) { /* a header: every row after it counts */
            first = 0;
            continue;
        }
        first = 0;
        if (bad)
            rc = dl_errorf(err, DL_ERR_SPEC, "%s:%ld:%ld: expected a number, found '%.*s'", shown.s, lineno, bad,
                           (int)strcspn(line + bad - 1, ",") < 40 ? (int)strcspn(line + bad - 1, ",") : 40,
                           line + bad - 1);
        else if (width && n != width)
            rc = dl_errorf(err, DL_ERR_SPEC, "%s:%ld: a row of %ld value%s: expected %ld, as the first row", shown.s,
                           lineno, n, n == 1 ? "" : "s", width);
        else {
            width = n;
            out->rows++;
        }
    }
    int read_error = ferror(f);
    free(line);
    fclose(f);
    if (!rc && read_error)
        rc = dl_errorf(err, DL_ERR_IO, "%s: read error", shown.s);
    if (!rc && out->rows == 0)
        rc = dl_errorf(err, DL_ERR_SPEC, "%s: no rows of numbers", shown.s);
    out->cols = width;
    if (rc)
        dl_float_table_free(out);
    return rc;
}
