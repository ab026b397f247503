/* chart.c: line charts through cairo (see chart.h).  The one #ifdef on cairo
 * lives here. */
#include "plot/chart.h"

#include "config.h"

#include <stdio.h>
#include <string.h>

#ifdef DL_HAVE_CAIRO
#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>
#include <math.h>

#include "io/atomic_file.h"

/* Matplotlib's "tab10", which readers of papers know. */
static const double palette[10][3] = {
    {0.122, 0.467, 0.706}, {1.000, 0.498, 0.055}, {0.173, 0.627, 0.173}, {0.839, 0.153, 0.157},
    {0.580, 0.404, 0.741}, {0.549, 0.337, 0.294}, {0.890, 0.467, 0.761}, {0.498, 0.498, 0.498},
    {0.737, 0.741, 0.133}, {0.090, 0.745, 0.812}};

enum { MAX_TICKS = 24, FONT = 13, TITLE_FONT = 18 };
/* A panel's margins around its plot area (the left one fits the y labels). */
enum { PANEL_TOP = 30, PANEL_BOTTOM = 46, PANEL_RIGHT = 14, PANEL_LEFT = 70 };

struct axis {
    double lo, hi;
    int log;
};

/* Where v falls on the axis, 0 at lo and 1 at hi. */
static double axis_at(const struct axis *a, double v)
{
    if (a->log)
        return (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo));
    return (v - a->lo) / (a->hi - a->lo);
}

/* Tick step of a linear axis: 1, 2 or 5 times a power of ten, about 5 ticks. */
static double linear_step(double lo, double hi)
{
    double raw = (hi - lo) / 5, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

static int ticks(const struct axis *a, double *t)
{
    int n = 0;
    if (a->log) {
        int d0 = (int)floor(log10(a->lo) + 1e-9), d1 = (int)ceil(log10(a->hi) - 1e-9);
        static const double few[] = {1, 2, 5}, one[] = {1};
        const double *m = d1 - d0 <= 2 ? few : one;
        int nm = d1 - d0 <= 2 ? 3 : 1, every = (d1 - d0) / 8 + 1;
        for (int d = d0; d <= d1; d += every)
            for (int i = 0; i < nm && n < MAX_TICKS; i++) {
                double v = m[i] * pow(10, d);
                if (v >= a->lo * (1 - 1e-9) && v <= a->hi * (1 + 1e-9))
                    t[n++] = v;
            }
        return n;
    }
    double step = linear_step(a->lo, a->hi);
    for (double v = ceil(a->lo / step - 1e-9) * step; v <= a->hi + step * 1e-9 && n < MAX_TICKS; v += step)
        t[n++] = fabs(v) < step * 1e-9 ? 0 : v;
    return n;
}

/* A tick label: SI suffixes for large numbers (12k, 3.5M), exponents for tiny ones. */
static void tick_label(double v, char *buf, size_t n)
{
    static const char *const suffix[] = {"", "k", "M", "G", "T", "P"};
    double m = fabs(v);
    int k = 0;
    while (m >= 1e4 && k < 5)
        m /= 1000, v /= 1000, k++;
    if (m != 0 && m < 1e-3)
        snprintf(buf, n, "%.0e", v);
    else
        snprintf(buf, n, "%.4g%s", v, suffix[k]);
}

/* The range of the finite (and, for a log axis, positive) values of x or y
 * over the series; returns 0 when there is none. */
static int data_range(const struct dl_chart_panel *p, int want_y, int positive, double *lo, double *hi)
{
    int any = 0;
    for (int s = 0; s < p->n_series; s++)
        for (int i = 0; i < p->series[s].n; i++) {
            double v = want_y ? p->series[s].y[i] : p->series[s].x[i];
            double other = want_y ? p->series[s].x[i] : p->series[s].y[i];
            if (!isfinite(v) || !isfinite(other) || (positive && v <= 0))
                continue;
            if (!any || v < *lo)
                *lo = v;
            if (!any || v > *hi)
                *hi = v;
            any = 1;
        }
    return any;
}

static void set_color(cairo_t *cr, int color, double alpha)
{
    const double *c = palette[(color % 10 + 10) % 10];
    cairo_set_source_rgba(cr, c[0], c[1], c[2], alpha);
}

static void text_at(cairo_t *cr, double x, double y, const char *s, double align_x, double align_y)
{
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    cairo_move_to(cr, x - align_x * e.width - e.x_bearing, y - align_y * e.height - e.y_bearing);
    cairo_show_text(cr, s);
}

/* The x axis's grid lines and tick labels under the plot area (px, py, pw, ph). */
static void x_ticks(cairo_t *cr, const struct axis *ax, double px, double py, double pw, double ph)
{
    double t[MAX_TICKS];
    char label[32];
    cairo_set_line_width(cr, 1);
    int n = ticks(ax, t);
    for (int i = 0; i < n; i++) {
        double x = px + pw * axis_at(ax, t[i]);
        cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
        cairo_move_to(cr, x, py), cairo_line_to(cr, x, py + ph), cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        tick_label(t[i], label, sizeof label);
        text_at(cr, x, py + ph + 6, label, 0.5, 0);
    }
}

/* A panel's title over its box, from x0 across w. */
static void panel_title(cairo_t *cr, const struct dl_chart_panel *p, double x0, double y0, double w)
{
    cairo_set_font_size(cr, FONT + 1);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, x0 + w / 2, y0 + 6, p->title, 0.5, 0);
    cairo_set_font_size(cr, FONT);
}

/* The plot area's frame and the x axis's label above the box's bottom. */
static void panel_frame(cairo_t *cr, const struct dl_chart_panel *p, double px, double py, double pw, double ph,
                        double bottom)
{
    cairo_set_line_width(cr, 1);
    cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
    cairo_rectangle(cr, px, py, pw, ph), cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, px + pw / 2, bottom - 4, p->xlabel, 0.5, 1);
}

static double part(const struct dl_chart_bars *b, int row, int j)
{
    double v = b->values[row * b->parts + j];
    return isfinite(v) && v > 0 ? v : 0;
}

/* A bar panel in the box (x0, y0, w, h): rows top to bottom, labelled on the left. */
static void draw_bars(cairo_t *cr, const struct dl_chart_panel *p, double x0, double y0, double w, double h)
{
    const struct dl_chart_bars *b = p->bars;
    cairo_set_font_size(cr, FONT);
    double left = PANEL_LEFT;
    for (int r = 0; r < b->rows; r++) {
        cairo_text_extents_t e;
        cairo_text_extents(cr, b->row_labels[r], &e);
        left = fmax(left, e.x_advance + 16);
    }
    double px = x0 + left, py = y0 + PANEL_TOP, pw = w - left - PANEL_RIGHT, ph = h - PANEL_TOP - PANEL_BOTTOM;
    panel_title(cr, p, x0, y0, w);
    double most = 0;
    for (int r = 0; r < b->rows; r++) {
        double sum = 0;
        for (int j = 0; j < b->parts; j++)
            sum += part(b, r, j);
        most = fmax(most, sum);
    }
    struct axis ax = {0, most > 0 ? most : 1, 0};
    ax.hi = ceil(ax.hi / linear_step(0, ax.hi)) * linear_step(0, ax.hi);
    x_ticks(cr, &ax, px, py, pw, ph);
    double row_h = ph / (b->rows > 0 ? b->rows : 1);
    for (int r = 0; r < b->rows; r++) {
        double y = py + row_h * r + row_h * 0.15, bh = row_h * 0.7, x = px;
        for (int j = 0; j < b->parts; j++) {
            double bw = pw * part(b, r, j) / ax.hi;
            set_color(cr, b->color0 + j, 1);
            cairo_rectangle(cr, x, y, bw, bh);
            cairo_fill(cr);
            x += bw;
        }
        cairo_set_source_rgb(cr, 0, 0, 0);
        text_at(cr, px - 8, y + bh / 2, b->row_labels[r], 1, 0.5);
    }
    panel_frame(cr, p, px, py, pw, ph, y0 + h);
}

/* One panel in the box (x0, y0, w, h). */
static void draw_panel(cairo_t *cr, const struct dl_chart_panel *p, double x0, double y0, double w, double h)
{
    if (p->bars) {
        draw_bars(cr, p, x0, y0, w, h);
        return;
    }
    double px = x0 + PANEL_LEFT, py = y0 + PANEL_TOP, pw = w - PANEL_LEFT - PANEL_RIGHT,
           ph = h - PANEL_TOP - PANEL_BOTTOM;
    panel_title(cr, p, x0, y0, w);
    struct axis ax = {0, 1, 0}, ay = {0, 1, 0};
    int have = data_range(p, 0, 0, &ax.lo, &ax.hi);
    double ylo = 0, yhi = 1, plo = 0, phi = 1;
    int have_y = have && data_range(p, 1, 0, &ylo, &yhi);
    int have_pos = have && data_range(p, 1, 1, &plo, &phi);
    ay.log = p->log_y == 1 ? have_pos : p->log_y == -1 ? have_pos && plo == ylo && phi > 20 * plo : 0;
    if (ay.log) {
        ay.lo = pow(10, floor(log10(plo) * 10) / 10), ay.hi = pow(10, ceil(log10(phi) * 10) / 10);
        if (ay.hi <= ay.lo)
            ay.lo /= 2, ay.hi *= 2;
    } else if (have_y) {
        if (yhi == ylo)
            ylo -= fabs(ylo) > 0 ? fabs(ylo) * 0.1 : 1, yhi += fabs(yhi) > 0 ? fabs(yhi) * 0.1 : 1;
        double step = linear_step(ylo, yhi);
        ay.lo = floor(ylo / step) * step, ay.hi = ceil(yhi / step) * step;
    }
    if (have && ax.hi == ax.lo)
        ax.lo -= 1, ax.hi += 1;
    /* the frame, grid and tick labels */
    double t[MAX_TICKS];
    char label[32];
    cairo_set_line_width(cr, 1);
    int n = have_y ? ticks(&ay, t) : 0;
    for (int i = 0; i < n; i++) {
        double y = py + ph * (1 - axis_at(&ay, t[i]));
        cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
        cairo_move_to(cr, px, y), cairo_line_to(cr, px + pw, y), cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        tick_label(t[i], label, sizeof label);
        text_at(cr, px - 6, y, label, 1, 0.5);
    }
    if (have)
        x_ticks(cr, &ax, px, py, pw, ph);
    panel_frame(cr, p, px, py, pw, ph, y0 + h);
    cairo_save(cr);
    cairo_move_to(cr, x0 + 4, py + ph / 2);
    cairo_rotate(cr, -M_PI / 2);
    cairo_text_extents_t e;
    cairo_text_extents(cr, p->ylabel, &e);
    cairo_rel_move_to(cr, -e.width / 2, e.height);
    cairo_show_text(cr, p->ylabel);
    cairo_restore(cr);
    if (!have_y) {
        cairo_set_source_rgb(cr, 0.5, 0.5, 0.5);
        text_at(cr, px + pw / 2, py + ph / 2, "no data", 0.5, 0.5);
        return;
    }
    /* the series, clipped to the frame */
    cairo_save(cr);
    cairo_rectangle(cr, px, py, pw, ph);
    cairo_clip(cr);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    for (int s = 0; s < p->n_series; s++) {
        const struct dl_chart_series *se = &p->series[s];
        set_color(cr, se->color, se->style == DL_CHART_FAINT ? 0.3 : 1);
        cairo_set_line_width(cr, se->style == DL_CHART_FAINT ? 1 : se->style == DL_CHART_MARKED ? 2.2 : 1.6);
        int pen = 0;
        for (int i = 0; i < se->n; i++) {
            double v = se->y[i];
            if (!isfinite(v) || !isfinite(se->x[i]) || (ay.log && v <= 0)) {
                pen = 0;
                continue;
            }
            double x = px + pw * axis_at(&ax, se->x[i]), y = py + ph * (1 - axis_at(&ay, v));
            if (pen)
                cairo_line_to(cr, x, y);
            else
                cairo_move_to(cr, x, y);
            pen = 1;
        }
        cairo_stroke(cr);
        if (se->style != DL_CHART_MARKED)
            continue;
        for (int i = 0; i < se->n; i++)
            if (isfinite(se->y[i]) && isfinite(se->x[i]) && !(ay.log && se->y[i] <= 0)) {
                cairo_arc(cr, px + pw * axis_at(&ax, se->x[i]), py + ph * (1 - axis_at(&ay, se->y[i])), 3.2, 0,
                          2 * M_PI);
                cairo_fill(cr);
            }
    }
    cairo_restore(cr);
}

/* The legend's height for this width (its entries wrap into rows). */
static double legend_layout(cairo_t *cr, const struct dl_chart_legend *lg, double width, int draw, double y0)
{
    if (!lg || lg->n == 0)
        return 0;
    cairo_set_font_size(cr, FONT);
    double x = 20, y = y0 + 10, row = 22;
    for (int i = 0; i < lg->n; i++) {
        cairo_text_extents_t e;
        cairo_text_extents(cr, lg->labels[i], &e);
        double need = 30 + e.x_advance + 24;
        if (x + need > width - 10 && x > 20)
            x = 20, y += row;
        if (draw) {
            set_color(cr, i, 1);
            cairo_set_line_width(cr, 3);
            cairo_move_to(cr, x, y + row / 2), cairo_line_to(cr, x + 24, y + row / 2), cairo_stroke(cr);
            cairo_set_source_rgb(cr, 0, 0, 0);
            text_at(cr, x + 30, y + row / 2, lg->labels[i], 0, 0.5);
        }
        x += need;
    }
    if (lg->note) {
        y += row;
        if (draw) {
            cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
            text_at(cr, 20, y + row / 2, lg->note, 0, 0.5);
        }
    }
    return y + row + 8 - y0;
}

static cairo_status_t write_out(void *closure, const unsigned char *data, unsigned int len)
{
    return dl_atomic_write(closure, data, len, NULL) ? CAIRO_STATUS_WRITE_ERROR : CAIRO_STATUS_SUCCESS;
}

/* What a figure draws, and the drawing. */
struct figure {
    const char *title;
    const struct dl_chart_panel *panels;
    int n, cols;
    const struct dl_chart_legend *legend;
    double width, panel_h, title_h;
};

static void draw_figure(cairo_t *cr, const void *ctx)
{
    const struct figure *f = ctx;
    cairo_set_font_size(cr, TITLE_FONT);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, f->width / 2, 12, f->title, 0.5, 0);
    double panel_w = f->width / f->cols;
    for (int i = 0; i < f->n; i++)
        draw_panel(cr, &f->panels[i], panel_w * (i % f->cols), f->title_h + f->panel_h * (i / f->cols), panel_w,
                   f->panel_h);
    legend_layout(cr, f->legend, f->width, 1, f->title_h + f->panel_h * ((f->n + f->cols - 1) / f->cols));
}

/* A scratch context for measuring text before the page's size is known. */
static cairo_t *measuring(void)
{
    cairo_surface_t *scratch = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1);
    cairo_t *cr = cairo_create(scratch);
    cairo_surface_destroy(scratch); /* the context keeps a reference */
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    return cr;
}

/* Draws a w x h page on white into path, in the format of its extension,
 * written atomically. */
static int render_to(const char *path, double w, double h, void (*draw_fn)(cairo_t *, const void *), const void *ctx,
                     struct dl_error *err)
{
    const char *dot = strrchr(path, '.');
    int kind = !dot ? -1 : !strcmp(dot, ".svg") ? 0 : !strcmp(dot, ".pdf") ? 1 : !strcmp(dot, ".png") ? 2 : -1;
    if (kind < 0)
        return dl_errorf(err, DL_ERR_SPEC, "%s: the name must end in .svg, .pdf or .png (the format)", path);
    struct dl_atomic_file af;
    int rc = dl_atomic_open(&af, path, NULL, err);
    if (rc)
        return rc;
    cairo_surface_t *surface =
        kind == 0   ? cairo_svg_surface_create_for_stream(write_out, &af, w, h)
        : kind == 1 ? cairo_pdf_surface_create_for_stream(write_out, &af, w, h)
                    : cairo_image_surface_create(CAIRO_FORMAT_ARGB32, (int)ceil(w), (int)ceil(h));
    cairo_t *cr = cairo_create(surface);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    draw_fn(cr, ctx);
    cairo_status_t st = cairo_status(cr);
    cairo_destroy(cr);
    if (st == CAIRO_STATUS_SUCCESS && kind == 2)
        st = cairo_surface_write_to_png_stream(surface, write_out, &af);
    cairo_surface_finish(surface);
    if (st == CAIRO_STATUS_SUCCESS)
        st = cairo_surface_status(surface);
    cairo_surface_destroy(surface);
    if (st != CAIRO_STATUS_SUCCESS) {
        dl_atomic_abort(&af);
        return dl_errorf(err, DL_ERR_IO, "%s: cairo: %s", path, cairo_status_to_string(st));
    }
    return dl_atomic_commit(&af, err);
}

int dl_chart_render(const char *path, const char *title, const struct dl_chart_panel *panels, int n, int cols,
                    const struct dl_chart_legend *legend, int width, struct dl_error *err)
{
    if (cols < 1)
        cols = 1;
    double panel_w = (double)width / cols;
    struct figure f = {title, panels, n, cols, legend, width, fmin(fmax(panel_w * 0.62, 240), 440), 44};
    cairo_t *cr = measuring();
    double h = f.title_h + f.panel_h * ((n + cols - 1) / cols) + legend_layout(cr, legend, f.width, 0, 0) + 6;
    cairo_destroy(cr);
    return render_to(path, f.width, h, draw_figure, &f, err);
}

/* A table's layout: its columns' widths, measured. */
struct table_page {
    const char *title;
    const struct dl_chart_table *t;
    const char *const *notes;
    int n_notes;
    double col_w[32], width;
};

enum { ROW_H = 20, TABLE_TOP = 48, MARGIN = 16 };

static void draw_table(cairo_t *cr, const void *ctx)
{
    const struct table_page *pg = ctx;
    const struct dl_chart_table *t = pg->t;
    cairo_set_font_size(cr, TITLE_FONT);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, MARGIN, 12, pg->title, 0, 0);
    cairo_set_font_size(cr, FONT);
    for (int r = -1; r < t->rows; r++) {
        double y = TABLE_TOP + ROW_H * (r + 1), x = MARGIN;
        if (r >= 0 && ((t->highlight && t->highlight[r]) || r % 2)) {
            if (t->highlight && t->highlight[r])
                set_color(cr, 1, 0.25);
            else
                cairo_set_source_rgb(cr, 0.95, 0.95, 0.95);
            cairo_rectangle(cr, MARGIN / 2, y, pg->width - MARGIN, ROW_H);
            cairo_fill(cr);
        }
        cairo_set_source_rgb(cr, 0, 0, 0);
        for (int c = 0; c < t->cols && c < 32; c++) {
            const char *s = r < 0 ? t->header[c] : t->cells[r * t->cols + c];
            int right = t->right && t->right[c];
            text_at(cr, right ? x + pg->col_w[c] - MARGIN : x, y + ROW_H / 2, s, right, 0.5);
            x += pg->col_w[c];
        }
        if (r < 0) {
            cairo_set_line_width(cr, 1);
            cairo_move_to(cr, MARGIN / 2, y + ROW_H), cairo_line_to(cr, pg->width - MARGIN / 2, y + ROW_H);
            cairo_stroke(cr);
        }
    }
    cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
    for (int i = 0; i < pg->n_notes; i++)
        text_at(cr, MARGIN, TABLE_TOP + ROW_H * (t->rows + 1) + 10 + ROW_H * (i + 0.5), pg->notes[i], 0, 0.5);
}

int dl_chart_render_table(const char *path, const char *title, const struct dl_chart_table *t,
                          const char *const *notes, int n_notes, struct dl_error *err)
{
    struct table_page pg = {title, t, notes, n_notes, {0}, 2 * MARGIN};
    cairo_t *cr = measuring();
    cairo_set_font_size(cr, FONT);
    for (int c = 0; c < t->cols && c < 32; c++) {
        for (int r = -1; r < t->rows; r++) {
            cairo_text_extents_t e;
            cairo_text_extents(cr, r < 0 ? t->header[c] : t->cells[r * t->cols + c], &e);
            pg.col_w[c] = fmax(pg.col_w[c], e.x_advance + MARGIN);
        }
        pg.width += pg.col_w[c];
    }
    for (int i = 0; i < n_notes; i++) {
        cairo_text_extents_t e;
        cairo_text_extents(cr, notes[i], &e);
        pg.width = fmax(pg.width, e.x_advance + 2 * MARGIN);
    }
    cairo_set_font_size(cr, TITLE_FONT);
    cairo_text_extents_t e;
    cairo_text_extents(cr, title, &e);
    pg.width = fmax(pg.width, e.x_advance + 2 * MARGIN);
    cairo_destroy(cr);
    double h = TABLE_TOP + ROW_H * (t->rows + 1) + 10 + ROW_H * n_notes + MARGIN;
    return render_to(path, ceil(pg.width), h, draw_table, &pg, err);
}

void dl_chart_libraries(char *buf, size_t n)
{
    snprintf(buf, n, "cairo %s (SVG, PDF, PNG)", cairo_version_string());
}

#else /* no cairo in this build */

int dl_chart_render(const char *path, const char *title, const struct dl_chart_panel *panels, int n, int cols,
                    const struct dl_chart_legend *legend, int width, struct dl_error *err)
{
    return dl_errorf(err, DL_ERR_SPEC, "%s: this dltrain was built without charts (configure finds cairo: "
                     "Debian's libcairo2-dev)", path);
}

int dl_chart_render_table(const char *path, const char *title, const struct dl_chart_table *t,
                          const char *const *notes, int n_notes, struct dl_error *err)
{
    return dl_chart_render(path, title, NULL, 0, 1, NULL, 0, err);
}

void dl_chart_libraries(char *buf, size_t n)
{
    snprintf(buf, n, "no (configure found no cairo)");
}
#endif
