/* timeline_replay.h — the data of one timeline panel: a log replayed once (twice with --by name: the
   first pass finds the largest buffers) into per-pixel columns of live bytes by series, scope lanes,
   snapshots and device-used samples. tools/charts/timeline.c draws from it; nothing here draws.

   The x position of an event is its time since the log's t0, or with `events` the number of ALLOC
   and FREE events before it (a plan log's clock means nothing). */
#ifndef TIMELINE_REPLAY_H
#define TIMELINE_REPLAY_H

#include <stdint.h>

#include "read/dpmem_read.h"
#include "read/threadtracks.h"
#include "figure.h"

#define TL_MAX_LANES 8
#define TL_MAX_SNAPS 512

typedef struct {
    int n_series;
    const char **names;
    Rgb *colour;
    int32_t *series_of;           /* per string index: the series of that tag */
    int W;                        /* columns */
    int events;                   /* x is allocation events, not time */
    double from, to;              /* the window: ns (or events) relative to t0 */
    uint64_t *col_total;          /* per column: max total (UINT64_MAX: no data) */
    uint64_t *col_break;          /* per column × series: the breakdown at that max */
    uint64_t peak, *peak_break;
    uint64_t peak_at;             /* relative to t0 (ns or events) */
    int peak_col;
    int n_lanes;
    uint32_t lane_key[TL_MAX_LANES]; /* thread track << 8 | depth: one OS thread a track, two threads that
                                     shared an index one after the other two (read/threadtracks.h) */
    ThreadTracks tracks;          /* the log's OS threads, named (after the replay) */
    int32_t *lane_name;           /* per lane × column: string index of the scope there, or -1 */
    uint8_t *lane_begin;          /* per lane × column: how many scopes begin here (at most 255) */
    int n_snaps;
    int snap_col[TL_MAX_SNAPS];
    const char *snap_label[TL_MAX_SNAPS];
    /* device_used of the snapshots with device figures (device_total > 0), per column: the first, the
       last, the smallest and the largest in that column (UINT64_MAX: none there). NULL: not drawn. */
    uint64_t *dev_first, *dev_last, *dev_lo, *dev_hi;
    int n_dev, n_dev_cols;        /* such snapshots in the window; columns that hold one */
    uint64_t dev_max;
    /* the first OOM event in the window: where, what was live, what it asked for and for which tag */
    int has_oom, oom_col;
    uint64_t oom_at, oom_live, oom_request;
    const char *oom_tag;
    uint64_t too_large;           /* ALLOCs left out: they would carry the total past 2^64 bytes */
    char **owned;                 /* names this panel allocated */
    int n_owned;
} Panel;

/* The span of a log on its x axis: ns from t0 to the last event, or its ALLOC + FREE count. */
double panel_span(const DpmemLog *L, int events);
/* ns from t0 to the first event a timeline draws (a scope, an allocation or release, a snapshot, an
   OOM, a device sample), 0 when there is none: what passed between opening the log and that (the
   program's own start-up, its META) has nothing to draw. */
double panel_lead_in(const DpmemLog *L);
/* Builds the panel of L over [from, to) in W columns. 0, or -1 (out of memory, or the log could not
   be read to its end: dpmem_log_error says why). */
int  panel_build(Panel *p, const DpmemLog *L, int by_name, int top_n, int device_line, int events, double from,
                 double to, int W);
void panel_free(Panel *p);

#endif
