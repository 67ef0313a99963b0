/* dpmem_charts.c — dpmem-charts: the charts of a results folder of tools/run_experiments (its
   results.csv and each run's log), or of some logs, as PNG, SVG and/or PDF at the size a paper
   wants: breakdown, tradeoff, timeline and, for a sweep, sweep (tools/charts/charts.h).

   The drawing is tools/charts/charts.c and the chart_*.c files; what a run is, tools/charts/chartdata.c. This file
   is the command line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "read/shown.h"
#include "read/args.h"
#include "read/outpath.h"
#include "charts/chartdata.h"
#include "charts/charts.h"
#include "charts/figure.h"
#include "common/io_guard.h"

#define MAX_LOGS 64

static void usage(FILE *f) {
    fprintf(f,
        "usage: dpmem-charts RESULTS_DIR [options]      (a results folder of tools/run_experiments)\n"
        "       dpmem-charts a.log b.log ... -o DIR [options]\n"
        "  -o DIR             where the charts go, made when missing (default: RESULTS_DIR itself)\n"
        "  --format LIST      png, svg, pdf or a comma list of them (default: png)\n"
        "  --size WxH         every chart's size, the timeline's included (its panels share the height): pixels at the dpi,\n"
        "                     or 7x3in, 17x8cm, 180x80mm, 504x216pt (default: each chart's own, at 144 dpi)\n"
        "  --dpi N            pixels per inch of the PNGs (default 144)\n"
        "  --font-scale X     every text X times its size (default 1)\n"
        "  --only LIST        some of breakdown, tradeoff, timeline, sweep (each at its own --size)\n"
        "  --baseline NAME    the run the others are divided by (default: vanilla at the same value)\n"
        "  -q                 no \"wrote ...\" lines\n"
        "writes breakdown, tradeoff (when a run has a step time), timeline and, with a sweep, sweep.\n");
}

static int fail(const char *msg, const char *arg) {
    fprintf(stderr, "dpmem-charts: %s%s%s\n", shown(msg), arg ? ": " : "", arg ? shown(arg) : "");
    return 2;
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int main(int argc, char **argv) {
    const char *out = NULL, *paths[MAX_LOGS], *formats = "png", *baseline = NULL;
    int n = 0;
    ChartOptions o = { 0 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "-o")) { if (!has_val) return fail("-o needs a directory", NULL); out = argv[++i]; }
        else if (!strcmp(a, "--format")) { if (!has_val) return fail("--format needs png, svg, pdf or a list", NULL); formats = argv[++i]; }
        else if (!strcmp(a, "--only")) {
            if (!has_val || !(o.only = charts_mask(argv[++i]))) return fail("bad --only (want breakdown, tradeoff, timeline, sweep or a list)", has_val ? argv[i] : NULL);
        } else if (!strcmp(a, "--baseline")) { if (!has_val) return fail("--baseline needs a run name", NULL); baseline = argv[++i]; }
        else if (!strcmp(a, "--size")) {
            if (!has_val || figspec_parse_size(&o.spec, argv[++i])) return fail("bad --size (want WxH: 1400x600 pixels, or 7x3in, 17x8cm, 180x80mm, 504x216pt)", has_val ? argv[i] : NULL);
        } else if (!strcmp(a, "--dpi")) {
            long v;
            if (!has_val || parse_int(argv[++i], 18, 2400, &v)) return fail("bad --dpi (want 18..2400)", has_val ? argv[i] : NULL);
            o.spec.dpi = (double)v;
        } else if (!strcmp(a, "--font-scale")) {
            char *end;
            double v = has_val ? strtod(argv[++i], &end) : 0;
            if (!has_val || *end || !(v >= 0.25 && v <= 4)) return fail("bad --font-scale (want 0.25..4)", has_val ? argv[i] : NULL);
            o.spec.font_scale = v;
        } else if (!strcmp(a, "-q")) o.quiet = 1;
        else if (a[0] == '-' && a[1]) return fail("unknown option", a);
        else {
            if (n == MAX_LOGS) return fail("too many logs (at most 64)", NULL);
            paths[n++] = a;
        }
    }
    if (n == 0) { usage(stderr); return 2; }
    /* the formats: png,svg,pdf */
    char list[64], e[1024];
    snprintf(list, sizeof list, "%s", formats);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        FigFormat fm;
        if (o.n_formats == 3 || fig_format_of("", tok, &fm, e, sizeof e)) return fail(o.n_formats == 3 ? "--format: at most three formats" : e, NULL);
        for (int k = 0; k < o.n_formats; k++) if (o.formats[k] == fm) return fail("--format names a format twice", formats);
        o.formats[o.n_formats++] = fm;
    }
    if (!o.n_formats) return fail("--format names no format", formats);
    int results = n == 1 && is_dir(paths[0]);
    if (!results) {
        for (int i = 0; i < n; i++) if (is_dir(paths[i])) return fail("give one results folder, or logs", paths[i]);
        if (!out) return fail("no output folder: give -o DIR", NULL);
    }
    if (!out) out = paths[0];

    ChartSet cs;
    int rc = results ? chartset_from_results(&cs, paths[0], e, sizeof e) : chartset_from_logs(&cs, paths, n, e, sizeof e);
    if (rc) { fprintf(stderr, "dpmem-charts: %s\n", shown(e)); return 1; }
    /* -o DIR is made when missing (with the folders above it), as run_experiments makes --out: once
       the logs have been read, so that a bad log leaves no empty folder behind */
    if (outpath_mkdirs(out, e, sizeof e)) { chartset_free(&cs); return fail("-o", e); }
    if (baseline) {
        cs.base = -1;
        for (int i = 0; i < cs.n && cs.base < 0; i++)
            if (!strcmp(cs.run[i].name, baseline) && cs.run[i].status == RUN_OK) cs.base = i;
        if (cs.base < 0) { chartset_free(&cs); return fail("--baseline: no run of that name completed", baseline); }
    }
    {   /* no chart may be a log */
        IoPath io[MAX_LOGS * 2 + 16];
        char cp[12][4096];
        int k = 0, c = 0;
        for (int i = 0; i < cs.n_logs && k < MAX_LOGS * 2; i++) io[k++] = (IoPath){ cs.logs[i].path, "log", 0 };
        static const char *const names[4] = { "breakdown", "tradeoff", "timeline", "sweep" };
        for (int f = 0; f < o.n_formats; f++)
            for (int j = 0; j < 4; j++, c++) {
                snprintf(cp[c], sizeof cp[c], "%s/%s.%s", out, names[j], fig_format_ext(o.formats[f]));
                io[k++] = (IoPath){ cp[c], "a chart", 1 };
            }
        if (io_check_outputs(io, k, e, sizeof e)) { chartset_free(&cs); return fail(e, NULL); }
    }
    rc = charts_draw(&cs, out, &o, e, sizeof e);
    if (rc) fprintf(stderr, "dpmem-charts: %s\n", shown(e));
    chartset_free(&cs);
    return rc ? 1 : 0;
}
