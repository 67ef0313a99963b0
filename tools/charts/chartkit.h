/* chartkit.h — what the charts (breakdown, tradeoff, sweep) draw the same way: the font sizes, the
   title with the runs' configuration under it, the row of method markers, a run's name under its
   slot (turned upright when the names do not fit side by side), the OOM mark, a figure opened at the
   chart's default size or the user's. */
#ifndef CHARTKIT_H
#define CHARTKIT_H

#include "chartdata.h"
#include "figure.h"

#define CK_TITLE 11.0
#define CK_SUB 8.5
#define CK_PANEL 9.5
#define CK_AXIS 8.5
#define CK_TICK 8.0
#define CK_LABEL 8.0
#define CK_NOTE 7.5

/* Opens the chart's figure: the user's size (spec) or def_w x def_h px at 144 dpi. */
int  ck_open(Figure *f, const char *path, FigFormat fmt, const FigSpec *spec, int def_w, int def_h, int min_w, int min_h,
             char *err, size_t errlen);
/* Title (bold) and, under it, what the runs share (model, T, B, precision, device, date) and extra
   (may be NULL). Returns the y below them. */
double ck_title(Figure *f, const ChartSet *cs, const char *title, const char *extra);
/* The methods of the set (first appearance order), each its marker and name, in rows from (x, y)
   within max_w. Returns the y below. */
double ck_method_legend(Figure *f, const ChartSet *cs, double x, double y, double max_w);
/* The names under slots of width slot centred at cx[i] below the axis at y: side by side, or upright
   when one does not fit. Returns the height they take (compute with draw 0 first). */
double ck_slot_labels(Figure *f, const char *const *names, const double *cx, int n, double slot, double y, int draw);
/* The type ck_slot_labels gives those names (upright ones shrink to fit their slots). */
double ck_slot_fs(Figure *f, const char *const *names, int n, double slot);
/* An OOM mark: diagonal hatching in a red outline over [x0,x1]x[y0,y1] and "OOM" above it, recorded
   as a mark named "oom <run>". */
void ck_oom_bar(Figure *f, double x0, double y0, double x1, double y1, const char *run);
/* The runs' notes in one line at the bottom ("not shown: dpsgd (OOM)"), or nothing. */
void ck_note(Figure *f, double y, const char *text);
/* The same wrapped at spaces into at most max_lines lines (8), the last line's bottom at y;
   ck_note_lines: how many lines the whole note takes. */
void ck_note_wrapped(Figure *f, double y, const char *text, int max_lines);
int  ck_note_lines(Figure *f, const char *text);

#endif
