/* dpmem_render.c — dpmem-render: one log (or several, --compare) to a memory timeline, as PNG, SVG or
   PDF (by the output's extension).

   The drawing is tools/charts/timeline.c; this file is the command line. It does not compute tables (that is
   dpmem-report) and does not export traces (dpmem-trace). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "read/shown.h"
#include "read/args.h"
#include "read/outpath.h"
#include "read/dpmem_read.h"
#include "charts/figure.h"
#include "common/io_guard.h"
#include "charts/timeline.h"

#define MAX_LOGS 16

static void usage(FILE *f) {
    fprintf(f,
        "usage: dpmem-render run.log -o run.png [options]\n"
        "       dpmem-render --compare a.log b.log ... -o cmp.png [options]\n"
        "  -o FILE            the picture to write (required): .png, .svg or .pdf\n"
        "  --format png|svg|pdf  the format, whatever the extension (-o - writes to stdout)\n"
        "  --size WxH         size: pixels (default 1400x600, 1400x(460 per log) with --compare),\n"
        "                     or 7x3in, 17x8cm, 180x80mm, 504x216pt\n"
        "  --dpi N            pixels per inch of the PNG (default 144); sizes in in/cm/mm/pt keep their size\n"
        "  --font-scale X     every text X times its size (default 1)\n"
        "  --from T, --to T   time window from the log's start (1.5s, 200ms, 30us, 10ns; bare = s)\n"
        "  --by category|name stack by category (default) or by buffer: the --top N largest tags\n"
        "  --top N            buffers shown with --by name (default 8), the rest as \"other\"\n"
        "  --compare          the logs are drawn one above the other, each on its own time axis\n"
        "  --shared-time      with --compare: one time axis for all (the longest run's span)\n"
        "  --events           x = allocation events instead of time (always so for a plan log)\n"
        "  --no-device-line   leave out the device-used line (snapshots with cudaMemGetInfo figures)\n"
        "  -v                 print the layout (plot rectangle, scales) on stdout\n");
}

static int fail(const char *msg, const char *arg) {
    fprintf(stderr, "dpmem-render: %s%s%s\n", shown(msg), arg ? ": " : "", arg ? shown(arg) : "");
    return 2;
}

int main(int argc, char **argv) {
    const char *out = NULL, *paths[MAX_LOGS];
    int n = 0, compare = 0;
    TimelineOptions o = { .top_n = 8 };
    FigSpec spec = { 0 };
    double from = 0, to = 0;
    int have_from = 0, have_to = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "-o")) { if (!has_val) return fail("-o needs a file", NULL); out = argv[++i]; }
        else if (!strcmp(a, "--size")) {
            if (!has_val || figspec_parse_size(&spec, argv[++i])) return fail("bad --size (want WxH: 1400x600 pixels, or 7x3in, 17x8cm, 180x80mm, 504x216pt)", has_val ? argv[i] : NULL);
        } else if (!strcmp(a, "--dpi")) {
            long v;
            if (!has_val || parse_int(argv[++i], 18, 2400, &v)) return fail("bad --dpi (want 18..2400)", has_val ? argv[i] : NULL);
            spec.dpi = (double)v;
        } else if (!strcmp(a, "--font-scale")) {
            char *end;
            double v = has_val ? strtod(argv[++i], &end) : 0;
            if (!has_val || *end || !(v >= 0.25 && v <= 4)) return fail("bad --font-scale (want 0.25..4)", has_val ? argv[i] : NULL);
            spec.font_scale = v;
        } else if (!strcmp(a, "--format")) {
            if (!has_val) return fail("--format needs png, svg or pdf", NULL);
            spec.format = argv[++i];
        } else if (!strcmp(a, "--from")) {
            if (!has_val || parse_duration(argv[++i], &from)) return fail("bad --from (want a duration such as 1.5s or 200ms)", has_val ? argv[i] : NULL);
            have_from = 1;
        } else if (!strcmp(a, "--to")) {
            if (!has_val || parse_duration(argv[++i], &to)) return fail("bad --to (want a duration such as 1.5s or 200ms)", has_val ? argv[i] : NULL);
            have_to = 1;
        } else if (!strcmp(a, "--by")) {
            if (!has_val) return fail("--by needs category or name", NULL);
            a = argv[++i];
            if (!strcmp(a, "category")) o.by_name = 0;
            else if (!strcmp(a, "name")) o.by_name = 1;
            else return fail("bad --by (want category or name)", a);
        } else if (!strcmp(a, "--top")) {
            long v;
            if (!has_val || parse_int(argv[++i], 1, 64, &v)) return fail("bad --top (want 1..64)", has_val ? argv[i] : NULL);
            o.top_n = (int)v;
        } else if (!strcmp(a, "--compare")) compare = 1;
        else if (!strcmp(a, "--shared-time")) o.shared_time = 1;
        else if (!strcmp(a, "--events")) o.events = 1;
        else if (!strcmp(a, "-v")) o.verbose = 1;
        else if (!strcmp(a, "--no-device-line")) o.no_device_line = 1;
        else if (a[0] == '-' && a[1]) return fail("unknown option", a);
        else {
            if (n == MAX_LOGS) return fail("too many logs (at most 16)", NULL);
            paths[n++] = a;
        }
    }
    if (n == 0) { usage(stderr); return 2; }
    if (!out) return fail("no output file: give -o run.png", NULL);
    if (n > 1 && !compare) return fail("several logs given: add --compare to draw them one above the other", NULL);
    if (have_from || have_to) {
        if (have_to && !(to > from)) return fail("empty time window: --to must be after --from", NULL);
        o.from_ns = from;
        o.to_ns = have_to ? to : 0;   /* --from alone: to each log's end */
    }
    {   /* -o must not be one of the logs */
        IoPath io[MAX_LOGS + 1];
        for (int i = 0; i < n; i++) io[i] = (IoPath){ paths[i], "log", 0 };
        io[n] = (IoPath){ out, "-o", 1 };
        char e[1024];
        if (io_check_outputs(io, n + 1, e, sizeof e)) return fail(e, NULL);
    }
    {
        char e[512];
        if (!strcmp(out, "-") && !spec.format) spec.format = "png";   /* -o -: a PNG on stdout unless --format says */
        if (fig_format_of(out, spec.format, &o.format, e, sizeof e)) return fail(e, NULL);
        if (figspec_pixels(&spec, 1400, n > 1 ? 460 * n : 600, TIMELINE_MIN_W, TIMELINE_MIN_H * n, &o.width, &o.height, e, sizeof e))
            return fail(e, NULL);
        o.dpi = spec.dpi;
        o.font_scale = spec.font_scale;
    }

    DpmemLog logs[MAX_LOGS];
    char err[512];
    for (int i = 0; i < n; i++) {
        if (dpmem_log_open(&logs[i], paths[i], err, sizeof err)) {
            fprintf(stderr, "dpmem-render: %s\n", shown(err));
            while (i-- > 0) dpmem_log_close(&logs[i]);
            return 1;
        }
        dpmem_log_warn(&logs[i], "dpmem-render");
    }
    /* the folder of -o is made when missing, as dpmem-charts -o and run_experiments --out make theirs */
    int rc = outpath_mkdirs_for(out, err, sizeof err);
    if (rc == 0) rc = timeline_render(logs, n, &o, out, err, sizeof err);
    if (rc) fprintf(stderr, "dpmem-render: %s\n", shown(err));
    for (int i = 0; i < n; i++) dpmem_log_close(&logs[i]);
    return rc ? 1 : 0;
}
