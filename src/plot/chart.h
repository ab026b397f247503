/* chart.h: line charts drawn with cairo into an SVG, PDF or PNG file (by the
 * name's extension), for `dltrain plot`: a grid of panels, each with its
 * axes (linear or logarithmic, ticks at 1, 2 and 5 times powers of ten),
 * grid lines and series (or stacked horizontal bars), and one legend under
 * them naming each colour.
 * The file is written to a temporary name and renamed (io/atomic_file.h).
 * The build has charts when configure found cairo; without it
 * dl_chart_render refuses with DL_ERR_SPEC. */
#ifndef DL_CHART_H
#define DL_CHART_H

#include <stddef.h>

#include "core/error.h"

enum dl_chart_style {
    DL_CHART_LINE,    /* a solid line */
    DL_CHART_FAINT,   /* a thin, pale line (raw values under a smoothed one) */
    DL_CHART_MARKED   /* a thick line with a dot at every point (few points: evaluations) */
};

struct dl_chart_series {
    int color;                  /* palette index: one colour per run */
    enum dl_chart_style style;
    const double *x, *y;        /* n points; a non-finite y breaks the line */
    int n;
};

/* Horizontal bars, one row each, of parts stacked left to right (part j in
 * palette colour color0 + j); the x axis is linear from 0. */
struct dl_chart_bars {
    int rows, parts;
    int color0;                 /* the first part's palette colour (the others follow) */
    const char *const *row_labels;
    const double *values;       /* rows x parts, row-major; negative or non-finite parts count as 0 */
};

struct dl_chart_panel {
    const char *title, *xlabel, *ylabel;
    int log_y;                  /* 1: logarithmic; 0: linear; -1: logarithmic when the positive
                                   values span more than a factor of 20 */
    const struct dl_chart_series *series;
    int n_series;
    const struct dl_chart_bars *bars; /* a bar panel instead of series (NULL: series) */
};

/* The legend: what each colour is (a run's label). */
struct dl_chart_legend {
    const char *const *labels;
    int n;
    const char *note;           /* a line after the colours (the styles' meaning), or NULL */
};

/* Draws n panels in rows of cols under title into path (.svg, .pdf or .png;
 * width in pixels, the height follows).  Errors name the file. */
int dl_chart_render(const char *path, const char *title, const struct dl_chart_panel *panels, int n, int cols,
                    const struct dl_chart_legend *legend, int width, struct dl_error *err);

/* A table of text (the tuner's plan): a header row, then rows striped for
 * reading, those marked highlighted in a pale colour. */
struct dl_chart_table {
    int rows, cols;
    const char *const *header;  /* cols */
    const char *const *cells;   /* rows x cols, row-major */
    const int *highlight;       /* rows: 1 highlights the row (NULL: none) */
    const int *right;           /* cols: 1 aligns the column right, for numbers (NULL: all left) */
};

/* Draws the table under title, then n_notes lines of notes, into path (.svg,
 * .pdf or .png); the columns are as wide as their text. */
int dl_chart_render_table(const char *path, const char *title, const struct dl_chart_table *t,
                          const char *const *notes, int n_notes, struct dl_error *err);

/* What the build draws charts with, for --version: "cairo 1.16.0", or "no (...)". */
void dl_chart_libraries(char *buf, size_t n);

#endif
