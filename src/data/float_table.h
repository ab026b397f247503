/* float_table.h: a table of float32 numbers read from a file, rows x cols,
 * for datasets of float features and regression targets: NumPy's .npy
 * (npy.c) and comma-separated text (csv_table.c).  Both readers refuse
 * what they cannot read exactly with DL_ERR_SPEC and a message naming the
 * file (and its line and column for CSV), expected against found. */
#ifndef DL_FLOAT_TABLE_H
#define DL_FLOAT_TABLE_H

#include "core/error.h"

struct dl_float_table {
    long rows, cols;
    float *v; /* rows x cols, row-major */
};

void dl_float_table_free(struct dl_float_table *t);

/* A .npy file (format versions 1.0, 2.0 and 3.0): dtype '<f4' or '<f8'
 * (float64 rounded to float32), C order, a shape of at least one
 * dimension: rows are its first, cols the product of the others (1 for a
 * 1-D array). */
int dl_npy_read(const char *path, struct dl_float_table *out, struct dl_error *err);

/* A CSV file: one row per line, fields separated by commas, each a number
 * as strtod reads it (surrounding blanks allowed); every row as wide as the
 * first; a first line none of whose fields is a number is a header and
 * skipped; blank lines and lines starting with '#' are skipped. */
int dl_csv_read(const char *path, struct dl_float_table *out, struct dl_error *err);

#endif
