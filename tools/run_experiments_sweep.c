/* run_experiments_sweep.c — run-experiments-sweep: the sweep chart of tools/run_experiments. One
   panel for the peak, one for the peak relative to vanilla's at the same value, and one per phase (its memory delta: the most it adds over what was
   live when it began), memory against the swept value, one line per experiment, so the methods are
   compared in one picture whatever the swept setting (dpmem-report's sweep.png needs exactly one
   config.* key to differ, which a LoRA-rank or physical-batch sweep does not give).

   usage: run-experiments-sweep -o sweep.png --key NAME EXPERIMENT:VALUE:LOG ...
   Not here: running anything, or numbers (the logs are read with tools/dpmem_read.c and reduced with
   tools/runstats.c, exactly as dpmem-report does, so the points are the report's numbers). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpmem_read.h"
#include "io_guard.h"
#include "outpath.h"
#include "palette.h"
#include "raster.h"
#include "runstats.h"
#include "units.h"

#define MAX_POINTS 256
#define MAX_EXPS 16
#define T2 2

typedef struct { const char *exp; double value; uint64_t peak; uint64_t phase[8]; const char *log; } Point;

static const char *PHASES[] = { "forward", "backward", "per_sample_norms", "clip", "optimizer_step", "step" };
#define N_PHASES (int)(sizeof PHASES / sizeof PHASES[0])

/* The same colour for an experiment in every sweep picture. */
static Rgb exp_colour(const char *e) {
    static const struct { const char *name; Rgb c; } t[] = {
        { "vanilla", { 110, 110, 110 } }, { "dpsgd", { 214, 39, 40 } }, { "ghost", { 44, 160, 44 } },
        { "flash", { 148, 103, 189 } }, { "mixed", { 255, 127, 14 } }, { "lora", { 140, 86, 75 } } };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(e, t[i].name) == 0) return t[i].c;
    unsigned h = 2166136261u;
    for (const char *s = e; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return RGB((uint8_t)(40 + h % 160), (uint8_t)(40 + (h >> 8) % 160), (uint8_t)(40 + (h >> 16) % 160));
}

static int fail(const char *msg, const char *arg) {
    fprintf(stderr, "run-experiments-sweep: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    return 2;
}

/* The value a panel plots for a point: its peak (which -1), its peak over vanilla's at the same
   value (which -2; 0 when there is no such vanilla run), or a phase's memory delta. */
static double point_value(const Point *pts, int np, int i, int which) {
    if (which == -1) return (double)pts[i].peak;
    if (which >= 0) return (double)pts[i].phase[which];
    for (int k = 0; k < np; k++)
        if (!strcmp(pts[k].exp, "vanilla") && pts[k].value == pts[i].value && pts[k].peak)
            return (double)pts[i].peak / (double)pts[k].peak;
    return 0;
}

/* One panel: axes, a line per experiment through its points in value order. */
static void panel(Image *im, int x0, int y0, int w, int h, const char *title, const Point *pts, int np, int which,
                  const char **exps, int ne, double xmin, double xmax, int log2x, const char *xlabel) {
    double maxv = 0;
    for (int i = 0; i < np; i++) {
        double v = point_value(pts, np, i, which);
        if (v > maxv) maxv = v;
    }
    int ax0 = x0 + 110, ax1 = x0 + w - 20, ay0 = y0 + 34, ay1 = y0 + h - 46;
    draw_text(im, (ax0 + ax1) / 2 - text_width(title, T2) / 2, y0 + 6, title, T2, COLOUR_TEXT);
    Unit u = which == -2 ? (Unit){ 1, "x" } : byte_unit(maxv > 0 ? maxv : 1024);
    double m = (maxv > 0 ? maxv : 1024) / u.div, step = nice_step(m, 4);
    double ymax = ceil(m / step * (1 + 1e-12)) * step;
    if (ymax < m * 1.04) ymax += step;
    char b[64], c[80];
    for (double v = 0; v <= ymax * (1 + 1e-9); v += step) {
        int y = ay1 - px_clamp(v / ymax * (ay1 - ay0), 0, ay1 - ay0);
        if (v > 0) hline(im, ax0, ax1, y, COLOUR_GRID);
        hline(im, ax0 - 5, ax0 - 1, y, COLOUR_AXIS);
        fmt_tick(b, sizeof b, v, step);
        snprintf(c, sizeof c, which == -2 ? "%s%s" : "%s %s", b, u.name);
        draw_text(im, ax0 - 8 - text_width(c, T2), y - text_height(T2) / 2, c, T2, COLOUR_TEXT);
    }
    vline(im, ax0 - 1, ay0, ay1, COLOUR_AXIS);
    hline(im, ax0 - 1, ax1, ay1, COLOUR_AXIS);
    /* x ticks: every distinct value, skipped where labels would touch */
    double xs[MAX_POINTS];
    int nx = 0;
    for (int i = 0; i < np; i++) {
        int seen = 0;
        for (int k = 0; k < nx; k++) seen |= xs[k] == pts[i].value;
        if (!seen) xs[nx++] = pts[i].value;
    }
    for (int i = 1; i < nx; i++)
        for (int j = i; j > 0 && xs[j - 1] > xs[j]; j--) { double t = xs[j]; xs[j] = xs[j - 1]; xs[j - 1] = t; }
#define XPX(v) (ax0 + 10 + px_clamp(((log2x ? log2(v) : (v)) - xmin) / (xmax - xmin) * (ax1 - ax0 - 20), 0, ax1 - ax0 - 20))
#define YPX(v) (ay1 - px_clamp((v) / (ymax * u.div) * (ay1 - ay0), 0, ay1 - ay0))
    int last_end = -1000;
    for (int k = 0; k < nx; k++) {
        int x = XPX(xs[k]);
        snprintf(b, sizeof b, "%g", xs[k]);
        vline(im, x, ay1, ay1 + 5, COLOUR_AXIS);
        int tw = text_width(b, T2);
        if (x - tw / 2 > last_end + 6) { draw_text(im, x - tw / 2, ay1 + 10, b, T2, COLOUR_TEXT); last_end = x + tw / 2; }
    }
    draw_text(im, ax1 - text_width(xlabel, 1), ay1 + 32, xlabel, 1, COLOUR_MUTED);
    for (int e = 0; e < ne; e++) {
        Rgb col = exp_colour(exps[e]);
        int px = -1, py = -1;
        for (int k = 0; k < nx; k++)
            for (int i = 0; i < np; i++) {
                if (strcmp(pts[i].exp, exps[e]) || pts[i].value != xs[k]) continue;
                double v = point_value(pts, np, i, which);
                if (which == -2 && v == 0) continue;   /* no vanilla run at this value */
                int x = XPX(pts[i].value), y = YPX(v);
                if (px >= 0) draw_line(im, px, py, x, y, col);
                /* markers shrink with the experiment's index: coinciding points show as nested squares */
                int r = ne - e + 1 < 7 ? ne - e + 1 : 7;
                fill_rect(im, x - r, y - r, x + r + 1, y + r + 1, col);
                px = x; py = y;
            }
    }
#undef XPX
#undef YPX
}

int main(int argc, char **argv) {
    const char *out = NULL, *key = NULL;
    Point pts[MAX_POINTS];
    const char *exps[MAX_EXPS];
    int np = 0, ne = 0, rc = 0;
    char err[512];
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-o") || !strcmp(a, "--key")) {
            if (i + 1 >= argc) return fail("needs a value", a);
            if (a[1] == 'o') out = argv[++i]; else key = argv[++i];
            continue;
        }
        if (a[0] == '-') return fail("unknown option", a);
        if (np == MAX_POINTS) return fail("too many runs (at most 256)", NULL);
        /* EXPERIMENT:VALUE:LOG (the log path may itself hold ':') */
        const char *c1 = strchr(a, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        char *end;
        if (!c1 || !c2 || c1 == a) return fail("expected EXPERIMENT:VALUE:LOG", a);
        double v = strtod(c1 + 1, &end);
        if (end != c2 || !(v > 0) || !isfinite(v)) return fail("the value must be a positive number", a);
        static char names[MAX_POINTS][64];
        snprintf(names[np], sizeof names[np], "%.*s", (int)(c1 - a), a);
        DpmemLog L;
        if (dpmem_log_open(&L, c2 + 1, err, sizeof err)) { fprintf(stderr, "run-experiments-sweep: %s\n", err); rc = 1; break; }
        RunStats rs;
        if (runstats_compute(&rs, &L)) {
            fprintf(stderr, "run-experiments-sweep: %s%s\n", dpmem_log_error(&L) ? dpmem_log_error(&L) : c2 + 1,
                    dpmem_log_error(&L) ? "" : ": out of memory");
            dpmem_log_close(&L);
            rc = 1;
            break;
        }
        Point *p = &pts[np];
        memset(p, 0, sizeof *p);
        p->exp = names[np]; p->value = v; p->peak = rs.peak; p->log = c2 + 1;
        for (int k = 0; k < N_PHASES; k++)
            for (uint32_t s = 0; s < L.n_strings; s++)
                if (rs.scopes[s].count && !strcmp(L.strings[s], PHASES[k])) p->phase[k] = rs.scopes[s].mem_delta;
        runstats_free(&rs);
        dpmem_log_close(&L);
        int seen = 0;
        for (int e = 0; e < ne; e++) seen |= !strcmp(exps[e], names[np]);
        if (!seen) { if (ne == MAX_EXPS) return fail("too many experiments (at most 16)", NULL); exps[ne++] = names[np]; }
        np++;
    }
    if (rc) return rc;
    if (!out || !key || np == 0) return fail("usage: run-experiments-sweep -o sweep.png --key NAME EXPERIMENT:VALUE:LOG ...", NULL);
    {
        IoPath io[MAX_POINTS + 1];
        for (int i = 0; i < np; i++) io[i] = (IoPath){ pts[i].log, "log", 0 };
        io[np] = (IoPath){ out, "-o", 1 };
        if (io_check_outputs(io, np + 1, err, sizeof err)) return fail(err, NULL);
    }

    /* x range; log2 scale when every value is a power of two (sequence lengths, batches, ranks) */
    int log2x = 1;
    double xmin = INFINITY, xmax = -INFINITY;
    for (int i = 0; i < np; i++) {
        if (fabs(log2(pts[i].value) - round(log2(pts[i].value))) > 1e-9) log2x = 0;
    }
    for (int i = 0; i < np; i++) {
        double x = log2x ? log2(pts[i].value) : pts[i].value;
        if (x < xmin) xmin = x;
        if (x > xmax) xmax = x;
    }
    if (xmax <= xmin) xmax = xmin + 1;
    /* panels: the peak, then each phase that adds memory in some run */
    int which[2 + N_PHASES], npanels = 0, have_vanilla = 0;
    for (int e = 0; e < ne; e++) have_vanilla |= !strcmp(exps[e], "vanilla");
    which[npanels++] = -1;
    if (have_vanilla && ne > 1) which[npanels++] = -2;
    for (int k = 0; k < N_PHASES; k++) {
        int any = 0;
        for (int i = 0; i < np; i++) any |= pts[i].phase[k] != 0;
        if (any) which[npanels++] = k;
    }
    int cols = npanels < 3 ? npanels : 3, rows = (npanels + cols - 1) / cols;
    int pw = 460, ph = 330, W = cols * pw + 20, H = rows * ph + 90;
    Image im;
    if (image_new(&im, W, H, COLOUR_BG)) return fail("out of memory", NULL);
    char title[160];
    snprintf(title, sizeof title, "Memory vs %s%s: the peak, and what each phase adds over what was live when it began", key, log2x ? " (log2 scale)" : "");
    draw_text(&im, 20, 12, title, T2, COLOUR_TEXT);
    int lx = 20;   /* legend: one swatch per experiment */
    for (int e = 0; e < ne; e++) {
        fill_rect(&im, lx, 44, lx + 14, 58, exp_colour(exps[e]));
        draw_text(&im, lx + 20, 45, exps[e], T2, COLOUR_TEXT);
        lx += 20 + text_width(exps[e], T2) + 24;
    }
    for (int p = 0; p < npanels; p++) {
        char t[64];
        snprintf(t, sizeof t, "%s", which[p] == -1 ? "peak (total)" : which[p] == -2 ? "peak / vanilla's" : PHASES[which[p]]);
        panel(&im, 10 + (p % cols) * pw, 80 + (p / cols) * ph, pw, ph, t, pts, np, which[p], exps, ne, xmin, xmax, log2x, key);
    }
    OutPath op;   /* -o -: the PNG to stdout */
    if (outpath_begin(&op, out, ".png", err, sizeof err)) rc = fail(err, NULL);
    else {
        int bad = image_write_png(&im, op.path) != 0;
        if (outpath_finish(&op, !bad, err, sizeof err) && !bad) rc = fail(err, NULL);
        else rc = bad ? fail("cannot write the PNG", out) : 0;
    }
    image_free(&im);
    return rc;
}
