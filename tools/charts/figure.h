/* figure.h — the one drawing surface behind every picture the tools write: cairo (anti-aliased
   shapes, a real font from Debian, vector output), with the format chosen by the output's extension:
   .png (cairo's ARGB32 image, un-premultiplied and written by stb_image_write), .svg and .pdf (cairo's
   own surfaces, fonts embedded). A clear one-line error for any other extension.

   Coordinates are pixels of the PNG the figure would be at its dpi: a figure of 7x3 in at 144 dpi is
   1008x432 px, font sizes are points (1/72 in) scaled by dpi/72 and --font-scale. A vector output is
   the same drawing on a page of the same size in points, so what a test measures on the PNG is what
   the PDF shows.

   Every text drawn is recorded with its box (the font's ascent to descent, the advance width), and so
   are markers and OOM marks: label placement asks the figure where there is room, and when the
   environment variable DPMEM_LAYOUT names a file, each figure appends its boxes there at close
   ("figure PATH W H", "text X0 Y0 X1 Y1 STRING", "mark KIND X0 Y0 X1 Y1 NAME") so that a test can
   check that no two labels overlap.

   It knows nothing of logs, runs or charts. */
#ifndef FIGURE_H
#define FIGURE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct { uint8_t r, g, b; } Rgb;
#define RGB(r, g, b) ((Rgb){ (r), (g), (b) })

typedef enum { FIG_PNG, FIG_SVG, FIG_PDF } FigFormat;

/* The size the user asked for: --size WxH (bare numbers are pixels at the dpi; or in, cm, mm, pt),
   --dpi, --font-scale. Zero fields: the chart's default (its pixels at 144 dpi). */
typedef struct {
    double w, h;              /* in `unit` */
    char unit[4];             /* "px", "in", "cm", "mm", "pt" */
    double dpi;               /* 0: 144 */
    double font_scale;        /* 0: 1 */
    const char *format;       /* "png", "svg", "pdf", or NULL: from the output's extension */
} FigSpec;

#define FIG_DEFAULT_DPI 144.0

/* "1400x600", "7x3in", "17.8x8cm": 0, or -1 (bad syntax, not positive). */
int  figspec_parse_size(FigSpec *s, const char *text);
/* The pixel size of a figure whose default is def_w x def_h px at 144 dpi: the asked size at the
   asked dpi, or the default scaled to the dpi. 0, or -1 with the reason (over 16384 px, under min). */
int  figspec_pixels(const FigSpec *s, int def_w, int def_h, int min_w, int min_h, int *w, int *h, char *err, size_t errlen);
/* The format of a path ("-" and extension-less paths need s->format). 0, or -1 with a one-line error. */
int  fig_format_of(const char *path, const char *forced, FigFormat *f, char *err, size_t errlen);
const char *fig_format_ext(FigFormat f);

typedef enum { BOX_TEXT, BOX_MARK } BoxKind;
typedef struct { double x0, y0, x1, y1; } Box;
typedef struct { Box b; BoxKind kind; char *what; } FigBox;

typedef enum { FONT_REGULAR, FONT_BOLD } FontWeight;
/* Text anchors: horizontal left/centre/right, vertical top/middle/baseline/bottom of the box. */
enum { TA_LEFT = 0, TA_CENTER = 1, TA_RIGHT = 2, TA_TOP = 0, TA_MIDDLE = 4, TA_BASELINE = 8, TA_BOTTOM = 12 };

typedef enum {
    MK_CIRCLE, MK_SQUARE, MK_TRI_UP, MK_DIAMOND, MK_TRI_DOWN, MK_HEXAGON, MK_STAR, MK_PENTAGON,
    MK_TRI_LEFT, MK_TRI_RIGHT, MK_PLUS, MK_CROSS, MK_COUNT
} MarkerShape;

struct _cairo;
struct _cairo_surface;

typedef struct {
    FigFormat format;
    char *path;               /* NULL: drawn only (fuzzers, layout passes) */
    int w, h;                 /* pixels */
    double dpi, px_per_pt, font_scale;
    struct _cairo_surface *surface;
    struct _cairo *cr;
    FILE *out;                /* the output stream: a temporary file beside path, renamed to it at close */
    char *tmp;                /* that temporary file (NULL: stdout, or nothing written) */
    int out_is_stdout;
    FigBox *boxes;
    int n_boxes, cap_boxes;
    int failed;               /* out of memory while recording: reported at close */
} Figure;

/* Opens a figure of w x h px at dpi (font sizes scale with dpi/72 * font_scale), white. path NULL:
   nothing is written. 0, or -1 with a one-line reason (the font missing, the file not writable). */
int  fig_open(Figure *f, const char *path, FigFormat format, int w, int h, double dpi, double font_scale,
              char *err, size_t errlen);
/* Writes the output (and the DPMEM_LAYOUT record) and frees everything. The picture is written to a
   temporary file beside path and renamed over path only when complete, so an error never leaves a
   partial picture nor loses the one that was there. 0, or -1 with the reason. */
int  fig_close(Figure *f, char *err, size_t errlen);
/* Frees without writing (after an error elsewhere): path is left as it was. */
void fig_discard(Figure *f);

/* Points -> pixels, and font points -> pixels (font_scale applied). */
double fig_pt(const Figure *f, double pt);
double fig_fpt(const Figure *f, double pt);

/* Shapes. Widths are in points; dash: 0 solid, 1 dashed, 2 dotted. */
void fig_rect(Figure *f, double x0, double y0, double x1, double y1, Rgb c);
void fig_rect_outline(Figure *f, double x0, double y0, double x1, double y1, Rgb c, double width_pt);
void fig_line(Figure *f, double x0, double y0, double x1, double y1, Rgb c, double width_pt, int dash);
void fig_polyline(Figure *f, const double *xy, int n, Rgb c, double width_pt, int dash);
void fig_polygon(Figure *f, const double *xy, int n, Rgb c);
/* Diagonal hatching inside a rectangle (an OOM bar): lines every spacing_pt. */
void fig_hatch(Figure *f, double x0, double y0, double x1, double y1, Rgb c, double spacing_pt, double width_pt);
/* A marker of diameter size_pt centred at (x, y): filled with fill, edged with edge (a white edge
   keeps overlapping markers apart). hollow: the outline only, in fill's colour, so that a marker
   under it still shows. Recorded as a BOX_MARK named what ("hollow what" when hollow). */
void fig_marker(Figure *f, MarkerShape m, double x, double y, double size_pt, Rgb fill, Rgb edge, int hollow, const char *what);
/* Clipping to a rectangle, until fig_unclip. */
void fig_clip(Figure *f, double x0, double y0, double x1, double y1);
void fig_unclip(Figure *f);

/* Text of size_pt at (x, y) by anchor (TA_* | TA_*), rotated 90 degrees counter-clockwise when vertical.
   Bytes that are not valid UTF-8 or are control characters are drawn as '?'. Returns its box,
   which is recorded as a BOX_TEXT. */
Box  fig_text(Figure *f, double x, double y, int anchor, double size_pt, FontWeight wt, Rgb c, const char *s);
Box  fig_text_rot(Figure *f, double x, double y, int anchor, double size_pt, FontWeight wt, Rgb c, const char *s);
double fig_text_w(Figure *f, double size_pt, FontWeight wt, const char *s);
double fig_text_h(Figure *f, double size_pt);   /* ascent + descent */
/* Shortens s (from the middle: "layers.0.mlp…gate" keeps both ends) so that it is at most max_w px wide. */
void fig_fit_text(Figure *f, char *out, size_t n, const char *s, double size_pt, FontWeight wt, double max_w);

/* Recording: a box of another kind (an OOM mark, a legend frame), and the free-space query. */
void fig_record(Figure *f, Box b, BoxKind kind, const char *what);
/* 1 when b overlaps no recorded text or mark and lies inside bounds. */
int  fig_box_free(const Figure *f, Box b, Box bounds);

/* A label near a point (a scatter point's name): tries positions right, left, above, below the point
   at growing distances, keeping clear of every recorded text and mark; draws it, and a thin leader
   line from the point to the label when it had to move away. Returns 1 when a leader was drawn, -1
   when no place was free (drawn beside the point all the same). */
int  fig_label_near(Figure *f, double px, double py, double gap, Box bounds, double size_pt, FontWeight wt, Rgb c,
                    const char *s);

#endif
