/* axes.h — value axes of every chart: a linear scale on 1-2-5 steps (from 0, or zoomed on the
   data), or a log10 scale when the values span orders of magnitude, for bytes (B/KiB/MiB/GiB), times
   (ns/us/ms/s), ratios or plain numbers; the value -> pixel mapping, and the drawing of grid, ticks,
   tick labels and the axis title. Linear axes put the unit in the title ("peak memory (MiB)") and
   plain numbers on the ticks; log axes label each decade with its unit ("1 KiB", "10 MiB").

   The timeline's memory axis keeps whole pixels (axes_h: the height of a value, rounded), so a test
   can predict the row of every stacked area exactly. */
#ifndef AXES_H
#define AXES_H

#include "figure.h"
#include "read/units.h"

typedef enum { VAL_BYTES, VAL_TIME, VAL_PLAIN, VAL_RATIO } ValueKind;

typedef struct {
    ValueKind kind;
    int log;                  /* log10 scale (lo > 0) */
    double lo, hi;            /* values at the ends */
    double p0, p1;            /* pixels of lo and hi (a y axis: p0 is the bottom row, larger) */
    Unit u;                   /* linear: the unit of the ticks and title */
    double step;              /* linear: tick step, in u */
} Scale;

/* A linear scale over [min, max] on nice steps: from 0 (bars, stacks) or zoomed to the data with a
   little margin (scatter, lines). ticks: about how many. */
void   scale_linear(Scale *s, ValueKind k, double min, double max, int ticks, int from_zero);
/* A log10 scale over [min, max] (both > 0), widened to whole decades when they are near. */
void   scale_log(Scale *s, ValueKind k, double min, double max);
/* Log when max/min >= ratio (and min > 0), else linear (zoomed unless from_zero). */
void   scale_auto(Scale *s, ValueKind k, double min, double max, double ratio, int from_zero);
void   scale_place(Scale *s, double p0, double p1);
double scale_px(const Scale *s, double v);   /* clamped to a little beyond the ends */
/* The axis title with its unit: "peak memory (MiB)", "peak memory (log scale)". */
void   scale_title(const Scale *s, const char *what, char *out, size_t n);

/* Grid, ticks and labels. The left axis at x from y = p0 up to p1, grid lines to grid_x1; the bottom
   axis at y, grid up to grid_y0. title may be NULL. Label size in points. */
void   axis_left(Figure *f, const Scale *s, double x, double grid_x1, const char *title, double size_pt);
void   axis_bottom(Figure *f, const Scale *s, double y, double grid_y0, const char *title, double size_pt);

/* The timeline's memory axis: 0 to a nice top over max (at least 4% headroom), whole pixels. */
typedef struct {
    int x0, y0, x1, y1;       /* plot rectangle: columns [x0,x1), rows [y0,y1); y1 is the zero line */
    double ymax;              /* value at y0, in bytes */
    Scale s;
} Axes;
void axes_scale(Axes *a, double max);
int  axes_h(const Axes *a, double v);           /* height in pixels of v: round(v/ymax*(y1-y0)) */
int  axes_y(const Axes *a, double v);           /* row of v: y1 - axes_h(v) */

#endif
