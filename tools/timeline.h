/* timeline.h — one or more logs drawn as memory timelines, one panel above the other on a shared
   time axis and a shared memory scale: live bytes per category (or per buffer) as stacked areas, the
   scopes as coloured bands in lanes above the plot (one sub-lane per nesting depth and thread), the
   peak marked with its value, snapshots as thin dotted marks, the device's used memory (device_used
   of the snapshots that have device figures) as a line with a marker per snapshot, a legend with the
   breakdown at the peak, ticks and labels. Used by dpmem-render and by dpmem-report --charts.

   However many events a log holds, the replay keeps one column per pixel (the maximum of the total
   in that column and the breakdown at that maximum, so a peak is never lost by aggregation): memory
   is bounded by the picture, not by the log. */
#ifndef TIMELINE_H
#define TIMELINE_H

#include <stddef.h>

#include "dpmem_read.h"

typedef struct {
    int width, height;        /* the whole image, pixels */
    double from_ns, to_ns;    /* window, relative to each log's t0; to_ns <= from_ns: whole span */
    int by_name;              /* series = the top_n buffers (tags) by their peak, the rest as "other" */
    int top_n;
    int verbose;              /* print the layout on stdout ("panel ...", "lane ...", "device ...": for tests) */
    int no_device_line;       /* leave out the device-used line (snapshots' device_used, when device_total > 0) */
} TimelineOptions;

/* Draws and writes the PNG (png_path NULL: draws only, for the fuzzers). 0, or -1 with a one-line reason in err. */
int timeline_render(const DpmemLog *logs, int n_logs, const TimelineOptions *o, const char *png_path,
                    char *err, size_t errlen);

#endif
