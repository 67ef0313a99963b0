/* timeline.h — one or more logs drawn as memory timelines, one panel above the other, each on its own
   time axis (the run's whole span) unless shared_time, all on one memory scale: live bytes per
   category (or per buffer) as stacked areas, the scopes as coloured bands in lanes above the plot (one
   sub-lane per nesting depth and thread; repeated instances of one scope, such as per-layer clip
   bands, grouped and named "clip x22"), the peak marked with its value, snapshots as dotted marks,
   the device's used memory (device_used of the snapshots that have device figures) as a line with a
   marker per snapshot, a legend with the breakdown at the peak and one with the phases' colours, a
   title with what a reader must know (run, model, T, B, precision, device, date).

   A plan log (config.device = plan) has no time: its panel is drawn on an axis of allocation events
   (the n-th ALLOC or FREE), and says so in its title. So does `events`, for any log.

   However many events a log holds, the replay keeps one column per pixel (the maximum of the total
   in that column and the breakdown at that maximum, so a peak is never lost by aggregation): memory
   is bounded by the picture, not by the log. Used by dpmem-render and by the charts. */
#ifndef TIMELINE_H
#define TIMELINE_H

#include <stddef.h>

#include "read/dpmem_read.h"
#include "figure.h"

typedef struct {
    int width, height;        /* the whole image, pixels */
    double dpi, font_scale;   /* 0: 144 and 1 */
    FigFormat format;
    double from_ns, to_ns;    /* window, relative to each log's t0; to_ns <= from_ns: each run's whole span */
    int shared_time;          /* one time axis for every panel (the longest span) */
    int events;               /* x = allocation events instead of time, for every log */
    int by_name;              /* series = the top_n buffers (tags) by their peak, the rest as "other" */
    int top_n;
    int verbose;              /* print the layout on stdout ("panel ...", "lane ...", "device ...": for tests) */
    int no_device_line;       /* leave out the device-used line (snapshots' device_used, when device_total > 0) */
    int columns;              /* panels in this many columns, down each column in turn (0: one) */
    int compact;              /* a small figure: each panel's title on one line (its configuration only where
                                 it fits beside the name), lanes down to 5 pt, plots down to 24 pt */
} TimelineOptions;

/* The smallest image a panel needs, in pixels at 144 dpi. */
#define TIMELINE_MIN_W 560
#define TIMELINE_MIN_H 200
#define TIMELINE_MIN_CELL_W 480   /* a column's width with columns > 1 */
#define TIMELINE_MIN_COMPACT_H 120

/* Draws and writes the picture (path NULL: draws only, for the fuzzers). 0, or -1 with a one-line
   reason in err (a window beyond a log's end, a picture too small, an unwritable file). */
int timeline_render(const DpmemLog *logs, int n_logs, const TimelineOptions *o, const char *path,
                    char *err, size_t errlen);

#endif
