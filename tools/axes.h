/* axes.h — a value axis from 0 to a nice number: the scale (1-2-5 steps, binary byte units or plain
   numbers, headroom over the maximum), the value -> pixel mapping every chart and timeline uses (so
   the tests can predict a pixel exactly), and the drawing of grid, ticks, labels and axis lines. */
#ifndef AXES_H
#define AXES_H

#include "raster.h"
#include "units.h"

typedef struct {
    int x0, y0, x1, y1;   /* plot rectangle: columns [x0,x1), rows [y0,y1); y1 is the zero line */
    double ymax;          /* value at y0, in bytes (or plain units) */
    double step;          /* tick step, in u */
    Unit u;
} Axes;

void axes_scale(Axes *a, double max, int is_bytes);  /* ymax >= 1.04 max, on a tick */
int  axes_h(const Axes *a, double v);                 /* height in pixels of v: round(v/ymax*(y1-y0)) */
int  axes_y(const Axes *a, double v);                 /* row of v: y1 - axes_h(v) */
void axes_draw_y(Image *im, const Axes *a);           /* grid, ticks, "<v> <unit>" labels, both axis lines */

#endif
