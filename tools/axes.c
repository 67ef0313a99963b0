/* axes.c — see axes.h. */
#include "axes.h"

#include <math.h>
#include <stdio.h>

#include "palette.h"

#define LABEL_SCALE 2

void axes_scale(Axes *a, double max, int is_bytes) {
    if (!(max > 0)) max = is_bytes ? 1024 : 1;
    a->u = is_bytes ? byte_unit(max) : (Unit){ 1, "" };
    double m = max / a->u.div;
    a->step = nice_step(m, 5);
    double top = ceil(m / a->step * (1 + 1e-12)) * a->step;
    if (top < m * 1.04) top += a->step;   /* headroom: the maximum never touches the frame */
    a->ymax = top * a->u.div;
}

int axes_h(const Axes *a, double v) { return px_clamp(v / a->ymax * (a->y1 - a->y0) + 0.5, 0, a->y1 - a->y0); }
int axes_y(const Axes *a, double v) { return a->y1 - axes_h(a, v); }

void axes_draw_y(Image *im, const Axes *a) {
    char b[48], c[64];
    double top = a->ymax / a->u.div;
    for (double v = 0; v <= top * (1 + 1e-9); v += a->step) {
        int y = axes_y(a, v * a->u.div);
        if (v > 0) hline(im, a->x0, a->x1 - 1, y, COLOUR_GRID);
        hline(im, a->x0 - 5, a->x0 - 1, y, COLOUR_AXIS);
        fmt_tick(b, sizeof b, v, a->step);
        snprintf(c, sizeof c, "%s%s%s", b, *a->u.name ? " " : "", a->u.name);
        draw_text(im, a->x0 - 8 - text_width(c, LABEL_SCALE), y - text_height(LABEL_SCALE) / 2, c, LABEL_SCALE, COLOUR_TEXT);
    }
    vline(im, a->x0 - 1, a->y0, a->y1, COLOUR_AXIS);
    hline(im, a->x0 - 1, a->x1, a->y1, COLOUR_AXIS);
}
