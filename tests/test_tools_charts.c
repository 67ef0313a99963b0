/* test_tools_charts.c — dpmem-charts on results folders written here (results.csv as the suite writes
   it, and logs of four methods with known bytes: tests/test_tools_common.h's synthlog):

   - every chart in PNG, SVG and PDF: the SVG parses as XML (python3's xml.etree) with the page's size,
     the PDF has one page and its fonts embedded (pdfinfo, pdffonts);
   - colours by method: in two folders that list the methods in different orders, with other methods
     among them, each method's markers are in that method's colour (tools/charts/palette.c), so a method looks
     the same in both; the palette itself: the six methods apart under simulated colour blindness,
     every method apart from every category, names of runs mapped to their method;
   - no two labels overlap in any chart (the boxes each figure records under DPMEM_LAYOUT), also at a
     paper's size (--size 7x3in --dpi 300);
   - an OOM run is marked in the breakdown (hatching), the tradeoff and the timeline;
   - plan runs and runs whose step time is empty or absent in results.csv: no tradeoff point (no
     tradeoff chart when none has one), timelines on an axis of allocation events;
   - a sweep: log axes when the values span 10x, a method without a phase named, coinciding lines
     named, the OOM run at its value;
   - the task: a classifier's runs (META config.task classify, config.num_labels) are titled
     "· classify (K=3) ·" in every chart; runs of both tasks in one chart name both; LM runs nothing;
   - bad input: an unknown format, a folder without results.csv, a log missing. */
#include "test_tools_png.h"
#include "charts/axes.h"

#include <math.h>

/* ---- logs -------------------------------------------------------------------------------------- */

/* A run's log: model 2 MiB of params, grads and optimizer each; per step, activations of act_mib
   (forward), then the method's own buffer (extra_cat, extra_mib) in backward (or in a "clip" scope
   inside it), optimizer_step. One step takes step_ms. plan: config.device plan. oom_at_step >= 0:
   an OOM event in that step's backward (asking 64 MiB), and the log stops there (closed). */
typedef struct {
    const char *run, *seq;
    double act_mib, extra_mib;
    const char *extra_cat;
    int clip_scope;            /* the extra buffer lives in a "clip" scope */
    double step_ms;
    int plan, oom_at_step;
    double mem_limit_mib;
    const char *device;        /* config.device; NULL: "cpu" (config.backend is always cpu) */
    const char *task;          /* config.task ("classify": with config.num_labels 3); NULL: none (an older log) */
    const char *method;        /* config.method (as the trainers write it); NULL: none (a program of one's own) */
} RunLog;

static void run_log(const char *path, RunLog r) {
    SynthLog S;
    synth_init(&S, 65536, T0);
    synth_thread(&S, 1, T0, 1111, "main");
    char b[64];
    synth_meta(&S, 1, T0, "run", r.run);
    synth_meta(&S, 1, T0, "config.model", "tiny");
    synth_meta(&S, 1, T0, "config.dim", "64");
    synth_meta(&S, 1, T0, "config.n_layers", "2");
    if (r.task) synth_meta(&S, 1, T0, "config.task", r.task);
    if (r.method) synth_meta(&S, 1, T0, "config.method", r.method);
    if (r.task && !strcmp(r.task, "classify")) synth_meta(&S, 1, T0, "config.num_labels", "3");
    synth_meta(&S, 1, T0, "config.seq_len", r.seq ? r.seq : "64");
    synth_meta(&S, 1, T0, "config.batch_size", "2");
    synth_meta(&S, 1, T0, "config.grad_accum", "2");
    synth_meta(&S, 1, T0, "config.precision", "fp32");
    synth_meta(&S, 1, T0, "config.device", r.plan ? "plan" : r.device ? r.device : "cpu");
    synth_meta(&S, 1, T0, "config.backend", r.plan ? "plan" : "cpu");
    if (r.plan) synth_meta(&S, 1, T0, "config.plan_for", "cpu");
    snprintf(b, sizeof b, "%.0f", (r.mem_limit_mib > 0 ? r.mem_limit_mib : 20000) * MiB);
    synth_meta(&S, 1, T0, "config.mem_limit", b);
    uint64_t t = T0 + MS, step = (uint64_t)(r.step_ms * MS);
    synth_begin(&S, 1, t, "model_creation");
    synth_alloc(&S, 1, t + 1, "params/w", 0, 0x1000, 2 * MiB);
    synth_alloc(&S, 1, t + 2, "grads/w", 0, 0x2000, 2 * MiB);
    synth_alloc(&S, 1, t + 3, "optimizer/m", 0, 0x3000, 2 * MiB);
    synth_end(&S, 1, t + 4, "model_creation");
    t += MS;
    for (int s = 0; s < 3; s++, t += step) {
        uint64_t act = (uint64_t)(r.act_mib * MiB), ext = (uint64_t)(r.extra_mib * MiB);
        synth_begin(&S, 1, t, "step");
        synth_begin(&S, 1, t + 1, "forward");
        synth_alloc(&S, 1, t + step / 10, "activations/h", 0, 0x4000, act);
        synth_end(&S, 1, t + step / 4, "forward");
        synth_begin(&S, 1, t + step / 4 + 1, "backward");
        if (r.clip_scope) synth_begin(&S, 1, t + step / 3, "clip");
        if (s == r.oom_at_step) {
            synth_oom(&S, 1, t + step / 2, "per_sample_grads/w", 0, 64 * MiB, 0, 0, r.clip_scope ? "clip" : "backward", "activations", act, act);
            synth_close(&S, 1, t + step / 2 + 1);
            synth_save(&S, path);
            synth_release(&S);
            return;
        }
        if (ext) synth_alloc(&S, 1, t + step / 2, r.extra_cat, 0, 0x5000, ext);
        if (ext) synth_free(&S, 1, t + step * 6 / 10, r.extra_cat, 0, 0x5000, ext);
        if (r.clip_scope) synth_end(&S, 1, t + step * 6 / 10 + 1, "clip");
        synth_free(&S, 1, t + step * 7 / 10, "activations/h", 0, 0x4000, act);
        synth_end(&S, 1, t + step * 8 / 10, "backward");
        synth_begin(&S, 1, t + step * 8 / 10 + 1, "optimizer_step");
        synth_end(&S, 1, t + step * 9 / 10, "optimizer_step");
        synth_end(&S, 1, t + step - 1, "step");
    }
    synth_close(&S, 1, t);
    synth_save(&S, path);
    synth_release(&S);
}

/* results.csv as tools/run_experiments writes it (the columns the charts read, and some they do not). */
typedef struct { const char *exp, *value, *status, *step_ms; } Row;
static void results_csv(const char *dir, const char *key, const Row *rows, int n, int with_step_col) {
    char path[600];
    snprintf(path, sizeof path, "%s/results.csv", dir);
    FILE *f = fopen(path, "w");
    if (!f) { CHECK(0, "cannot write %s", path); return; }
    fprintf(f, "experiment,sweep_key,sweep_value,status,exit,epsilon,delta,run,file,closed%s,peak_bytes\n", with_step_col ? ",step_mean_ms" : "");
    for (int i = 0; i < n; i++) {
        char run[128];
        snprintf(run, sizeof run, "%s%s%s%s", rows[i].exp, *rows[i].value ? "-" : "", *rows[i].value ? key : "", rows[i].value);
        int ok = !strcmp(rows[i].status, "ok");
        fprintf(f, "%s,%s,%s,%s,%d,,,%s,%s%s%s%s,1", rows[i].exp, *rows[i].value ? key : "", rows[i].value, rows[i].status, ok ? 0 : 3,
                ok ? run : "", ok ? dir : "", ok ? "/" : "", ok ? run : "", ok ? ".log" : "");
        if (with_step_col) fprintf(f, ",%s", rows[i].step_ms);
        fprintf(f, ",\n");
    }
    fclose(f);
}

static void mkdir_p(const char *d) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", d);
    if (system(cmd)) CHECK(0, "mkdir %s", d);
}

/* ---- the palette ------------------------------------------------------------------------------- */

static double lin(double c) { c /= 255; return c <= 0.04045 ? c / 12.92 : pow((c + 0.055) / 1.055, 2.4); }
static double unlin(double c) { c = c < 0 ? 0 : c > 1 ? 1 : c; return 255 * (c <= 0.0031308 ? 12.92 * c : 1.055 * pow(c, 1 / 2.4) - 0.055); }
/* sRGB -> CIE L*a*b* (D65) */
static void lab(const double rgb[3], double out[3]) {
    double r = lin(rgb[0]), g = lin(rgb[1]), b = lin(rgb[2]);
    double X = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, Y = 0.2126 * r + 0.7152 * g + 0.0722 * b,
           Z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883;
#define F(t) ((t) > 0.008856 ? cbrt(t) : 7.787 * (t) + 16.0 / 116)
    out[0] = 116 * F(Y) - 16; out[1] = 500 * (F(X) - F(Y)); out[2] = 200 * (F(Y) - F(Z));
#undef F
}
/* Machado, Oliveira and Fernandes (2009), severity 1: deuteranopia, protanopia, tritanopia. */
static const double cvd[3][3][3] = {
    { { 0.367322, 0.860646, -0.227968 }, { 0.280085, 0.672501, 0.047413 }, { -0.011820, 0.042940, 0.968881 } },
    { { 0.152286, 1.052583, -0.204868 }, { 0.114503, 0.786281, 0.099216 }, { -0.003882, -0.048116, 1.051998 } },
    { { 1.255528, -0.076749, -0.178779 }, { -0.078411, 0.930809, 0.147602 }, { 0.004733, 0.691367, 0.303900 } },
};
/* a and b in CIELAB as seen under normal vision (mode 0) or one of the simulations (1..3) */
static void seen_lab(Rgb a, Rgb b, int mode, double la[3], double lb[3]) {
    double x[3] = { a.r, a.g, a.b }, y[3] = { b.r, b.g, b.b };
    if (mode) {
        double l1[3] = { lin(x[0]), lin(x[1]), lin(x[2]) }, l2[3] = { lin(y[0]), lin(y[1]), lin(y[2]) };
        for (int i = 0; i < 3; i++) {
            const double *m = cvd[mode - 1][i];
            x[i] = unlin(m[0] * l1[0] + m[1] * l1[1] + m[2] * l1[2]);
            y[i] = unlin(m[0] * l2[0] + m[1] * l2[1] + m[2] * l2[2]);
        }
    }
    lab(x, la); lab(y, lb);
}
static double delta_e(Rgb a, Rgb b, int mode) {   /* mode 0: normal vision, 1..3: the simulations */
    double lx[3], ly[3];
    seen_lab(a, b, mode, lx, ly);
    return sqrt((lx[0] - ly[0]) * (lx[0] - ly[0]) + (lx[1] - ly[1]) * (lx[1] - ly[1]) + (lx[2] - ly[2]) * (lx[2] - ly[2]));
}

/* CIEDE2000 (Sharma, Wu and Dalal 2005) between two colours, under normal vision (mode 0) or a simulation. */
static double de2000(Rgb a, Rgb b, int mode) {
    double p[3], q[3];
    seen_lab(a, b, mode, p, q);
    const double rad = M_PI / 180, c7 = pow(25, 7);
    double C1 = hypot(p[1], p[2]), C2 = hypot(q[1], q[2]), Cb = (C1 + C2) / 2;
    double G = 0.5 * (1 - sqrt(pow(Cb, 7) / (pow(Cb, 7) + c7)));
    double a1 = (1 + G) * p[1], a2 = (1 + G) * q[1], C1p = hypot(a1, p[2]), C2p = hypot(a2, q[2]);
    double h1 = C1p ? fmod(atan2(p[2], a1) / rad + 360, 360) : 0, h2 = C2p ? fmod(atan2(q[2], a2) / rad + 360, 360) : 0;
    double dL = q[0] - p[0], dC = C2p - C1p, dh = 0;
    if (C1p > 0 && C2p > 0) { dh = h2 - h1; if (dh > 180) dh -= 360; else if (dh < -180) dh += 360; }
    double dH = 2 * sqrt(C1p * C2p) * sin(dh / 2 * rad), Lb = (p[0] + q[0]) / 2, Cbp = (C1p + C2p) / 2, hb = h1 + h2;
    if (C1p > 0 && C2p > 0) hb = fabs(h1 - h2) <= 180 ? (h1 + h2) / 2 : (h1 + h2 < 360 ? (h1 + h2 + 360) / 2 : (h1 + h2 - 360) / 2);
    double T = 1 - 0.17 * cos((hb - 30) * rad) + 0.24 * cos(2 * hb * rad) + 0.32 * cos((3 * hb + 6) * rad) - 0.20 * cos((4 * hb - 63) * rad);
    double dth = 30 * exp(-pow((hb - 275) / 25, 2)), RC = 2 * sqrt(pow(Cbp, 7) / (pow(Cbp, 7) + c7));
    double SL = 1 + 0.015 * pow(Lb - 50, 2) / sqrt(20 + pow(Lb - 50, 2)), SC = 1 + 0.045 * Cbp, SH = 1 + 0.015 * Cbp * T;
    double RT = -sin(2 * dth * rad) * RC;
    return sqrt(pow(dL / SL, 2) + pow(dC / SC, 2) + pow(dH / SH, 2) + RT * (dC / SC) * (dH / SH));
}

/* Every two colours that can meet in one figure are told apart (issue 49: comm and workspace were
   near-identical teals, step and zero_grad one beige, clip, checkpoint_save and dp_setup close greens):
   the categories (comm too, which --zero 3 plots stack beside workspace) and the phases each at least
   10 CIEDE2000 from each other under normal vision; those that touch in a picture (categories stacked
   one on the other, comm and workspace; step and every phase inside it, phases one after the other)
   at least 5 also under simulated deuteranopia and protanopia; every phase 15 CIE76 from every category. */
static void check_palette_pairs(void) {
    static const char *const cats[] = { "params", "grads", "optimizer", "activations", "per_sample_grads", "norms", "ghost", "bk",
                                        "lora", "noise", "workspace", "input", "untracked", "comm" };
    static const char *const ph[] = { "step", "data", "forward", "loss", "backward", "clip", "per_sample_norms", "second_backward", "noise",
                                      "optimizer_step", "zero_grad", "model_creation", "dp_setup", "checkpoint_load", "checkpoint_save",
                                      "recompute", "allreduce", "all_gather", "reduce_scatter", "eval" };
    const int nc = (int)(sizeof cats / sizeof cats[0]), np = (int)(sizeof ph / sizeof ph[0]);
    for (int i = 0; i < nc; i++)
        for (int j = i + 1; j < nc; j++) {
            double d = de2000(category_colour(cats[i]), category_colour(cats[j]), 0);
            CHECK(d >= 10, "categories %s and %s are %.1f CIEDE2000 apart; want >= 10", cats[i], cats[j], d);
        }
    for (int i = 0; i < np; i++)
        for (int j = i + 1; j < np; j++) {
            double d = de2000(scope_colour(ph[i]), scope_colour(ph[j]), 0);
            CHECK(d >= 10, "phases %s and %s are %.1f CIEDE2000 apart; want >= 10", ph[i], ph[j], d);
        }
    static const char *const touch_c[][2] = { { "params", "grads" }, { "grads", "optimizer" }, { "optimizer", "activations" },
        { "activations", "per_sample_grads" }, { "per_sample_grads", "norms" }, { "norms", "ghost" }, { "ghost", "bk" }, { "bk", "lora" },
        { "lora", "noise" }, { "noise", "workspace" }, { "workspace", "input" }, { "input", "untracked" }, { "workspace", "comm" },
        { "input", "comm" }, { "untracked", "comm" } };
    static const char *const touch_p[][2] = { { "data", "forward" }, { "forward", "loss" }, { "loss", "backward" }, { "backward", "clip" },
        { "clip", "noise" }, { "noise", "optimizer_step" }, { "optimizer_step", "zero_grad" }, { "backward", "second_backward" },
        { "clip", "second_backward" }, { "clip", "per_sample_norms" }, { "backward", "per_sample_norms" }, { "forward", "recompute" },
        { "backward", "recompute" }, { "model_creation", "dp_setup" }, { "dp_setup", "step" }, { "step", "checkpoint_save" },
        { "checkpoint_load", "model_creation" }, { "backward", "reduce_scatter" }, { "forward", "all_gather" }, { "backward", "all_gather" },
        { "backward", "allreduce" }, { "allreduce", "optimizer_step" }, { "step", "eval" }, { "clip", "checkpoint_save" },
        { "clip", "dp_setup" }, { "checkpoint_save", "dp_setup" } };
    for (int mode = 1; mode <= 2; mode++) {
        for (size_t k = 0; k < sizeof touch_c / sizeof touch_c[0]; k++) {
            double d = de2000(category_colour(touch_c[k][0]), category_colour(touch_c[k][1]), mode);
            CHECK(d >= 5, "categories %s and %s (stacked together) are %.1f CIEDE2000 apart under simulated %s; want >= 5", touch_c[k][0],
                  touch_c[k][1], d, mode == 1 ? "deuteranopia" : "protanopia");
        }
        for (size_t k = 0; k < sizeof touch_p / sizeof touch_p[0]; k++) {
            double d = de2000(scope_colour(touch_p[k][0]), scope_colour(touch_p[k][1]), mode);
            CHECK(d >= 5, "phases %s and %s (side by side) are %.1f CIEDE2000 apart under simulated %s; want >= 5", touch_p[k][0],
                  touch_p[k][1], d, mode == 1 ? "deuteranopia" : "protanopia");
        }
        for (int i = 1; i < np; i++) {   /* step's band lies over every phase's */
            double d = de2000(scope_colour("step"), scope_colour(ph[i]), mode);
            CHECK(d >= 5, "step and %s are %.1f CIEDE2000 apart under simulated %s; want >= 5", ph[i], d, mode == 1 ? "deuteranopia" : "protanopia");
        }
    }
    for (int i = 0; i < np; i++)
        for (int c = 0; c < nc; c++) {
            double d = delta_e(scope_colour(ph[i]), category_colour(cats[c]), 0);
            CHECK(d >= 15, "phase %s comes within %.1f CIE76 of category %s; want >= 15", ph[i], d, cats[c]);
        }
}

static void check_palette(void) {
    static const char *const six[] = { "vanilla", "dpsgd", "ghost", "flash", "mixed", "lora" };
    static const char *const more[] = { "ghost+bk", "flash+twopass", "direct+twopass", "mixed+twopass" };
    static const char *const cats[] = { "params", "grads", "optimizer", "activations", "per_sample_grads", "norms", "ghost", "bk",
                                        "lora", "noise", "workspace", "input", "untracked", "comm" };
    double worst6 = 1e9, worst_cat = 1e9;
    for (int mode = 0; mode < 4; mode++) {
        for (int i = 0; i < 6; i++)
            for (int j = i + 1; j < 6; j++) {
                double d = delta_e(method_style(six[i]).colour, method_style(six[j]).colour, mode);
                if (d < worst6) worst6 = d;
            }
        for (int i = 0; i < 10; i++)
            for (int c = 0; c < 14; c++) {
                double d = delta_e(method_style(i < 6 ? six[i] : more[i - 6]).colour, category_colour(cats[c]), mode);
                if (d < worst_cat) worst_cat = d;
            }
    }
    CHECK(worst6 >= 16.5, "the six methods' colours come within %.1f CIE76 of each other (normal or simulated colour blindness); want >= 16.5", worst6);
    CHECK(worst_cat >= 14, "a method's colour comes within %.1f of a category's; want >= 14 (they must not be read as each other)", worst_cat);
    /* the timeline's phase bands and the categories' areas: a forward band must not read as params */
    static const char *const phases[] = { "step", "forward", "backward", "clip", "per_sample_norms", "noise", "optimizer_step", "data",
                                          "eval", "model_creation", "loss" };
    double worst_phase = 1e9, worst_pp = 1e9;
    for (int i = 0; i < 11; i++) {
        for (int c = 0; c < 14; c++) {
            double d = delta_e(scope_colour(phases[i]), category_colour(cats[c]), 0);
            if (d < worst_phase) worst_phase = d;
        }
        for (int j = i + 1; j < 11; j++) {
            double d = delta_e(scope_colour(phases[i]), scope_colour(phases[j]), 0);
            if (d < worst_pp) worst_pp = d;
        }
    }
    CHECK(worst_phase >= 15, "a phase's colour comes within %.1f CIE76 of a category's; want >= 15", worst_phase);
    CHECK(worst_pp >= 12, "two phases' colours come within %.1f CIE76 of each other; want >= 12", worst_pp);
    for (int i = 0; i < 10; i++)
        for (int j = i + 1; j < 10; j++) {
            MethodStyle a = method_style(i < 6 ? six[i] : more[i - 6]), b = method_style(j < 6 ? six[j] : more[j - 6]);
            CHECK(!same(a.colour, b.colour) && a.marker != b.marker, "methods %d and %d share a colour or a marker", i, j);
        }
    MethodStyle g = method_style("ghost"), u1 = method_style("a-new-method"), u2 = method_style("a-new-method");
    CHECK(same(method_style("ghost+twopass").colour, g.colour) && same(method_style("direct+bk").colour, method_style("dpsgd").colour),
          "the combinations that are the suite's methods do not look like them");
    CHECK(same(u1.colour, u2.colour) && u1.marker == u2.marker && !u1.known, "an unknown method's style is not stable");
}

/* A program of one's own (issue 49, the README's example): its log named "ghost-T1024" has no
   config.method, so it is not the DP method ghost (its name is not read as one: not ghost's colour and
   marker); a trainer's log says its method (config.method ghost+twopass: ghost's style, whatever its
   name). From that one log the tradeoff's axes run from zero to the point, not a hair's breadth around
   it (19.9995..20.0015 MiB, 0..1.5 ms for a 0.0003 ms step). */
static void check_own_program(void) {
    const char *d = tt_path("own");
    mkdir_p(d);
    char own[600], mine[600];
    snprintf(own, sizeof own, "%s/ghost-T1024.log", d);
    snprintf(mine, sizeof mine, "%s/mine.log", d);
    run_log(own, (RunLog){ .run = "ghost-T1024", .act_mib = 16, .step_ms = 10, .oom_at_step = -1 });
    run_log(mine, (RunLog){ .run = "mine", .method = "ghost+twopass", .act_mib = 16, .step_ms = 10, .oom_at_step = -1 });
    char m[64];
    DpmemLog L;
    char e[256];
    if (dpmem_log_open(&L, own, e, sizeof e) == 0) {
        method_of_log(&L, "ghost-T1024", m, sizeof m);
        CHECK(!strcmp(m, "ghost-T1024") && !method_style(m).known, "ghost-T1024 without config.method is styled as method '%s'", m);
        dpmem_log_close(&L);
    } else CHECK(0, "%s", e);
    if (dpmem_log_open(&L, mine, e, sizeof e) == 0) {
        method_of_log(&L, "mine", m, sizeof m);
        CHECK(!strcmp(m, "ghost"), "a log with config.method ghost+twopass is styled as '%s', want ghost", m);
        dpmem_log_close(&L);
    } else CHECK(0, "%s", e);
    char out[700];
    snprintf(out, sizeof out, "'%s' -o '%s/charts' --only tradeoff", own, d);
    TtBox *b;
    int n, rc;
    remove(tt_path("layout.txt"));
    setenv("DPMEM_LAYOUT", tt_path("layout.txt"), 1);
    rc = tt_run("dpmem-charts", "%s", out);
    unsetenv("DPMEM_LAYOUT");
    n = tt_layout_load(tt_path("layout.txt"), &b);
    char png[700];
    snprintf(png, sizeof png, "%s/charts/tradeoff.png", d);
    CHECK(rc == 0 && tt_layout_find(b, n, png, 'm', "ghost-T1024") && !tt_layout_find(b, n, png, 'm', "ghost"),
          "tradeoff of ghost-T1024: exit %d, or its point is not its own (a ghost marker)", rc);
    free(b);
    Scale s;
    scale_auto(&s, VAL_BYTES, 20.0 * MiB, 20.0 * MiB, 10, 0);
    CHECK(s.lo == 0 && s.hi >= 20.0 * MiB * 1.04 && s.hi <= 30.0 * MiB, "one value, 20 MiB: the axis runs %.6g..%.6g MiB, want 0 to just above 20",
          s.lo / MiB, s.hi / MiB);
    scale_auto(&s, VAL_TIME, 300, 300, 10, 0);   /* 0.0003 ms, in ns */
    CHECK(s.lo == 0 && s.hi >= 300 * 1.04 && s.hi <= 450, "one value, 300 ns: the axis runs %.6g..%.6g ns, want 0 to just above 300", s.lo, s.hi);
}

/* ---- a results folder ---------------------------------------------------------------------------- */

static const char *const FORMATS[3] = { "png", "svg", "pdf" };

/* Runs dpmem-charts on dir (extra options), with DPMEM_LAYOUT; the boxes into *b. */
static int charts(const char *dir, const char *opts, TtBox **b, int *n) {
    remove(tt_path("layout.txt"));
    setenv("DPMEM_LAYOUT", tt_path("layout.txt"), 1);
    int rc = tt_run("dpmem-charts", "'%s' %s", dir, opts);
    unsetenv("DPMEM_LAYOUT");
    *n = tt_layout_load(tt_path("layout.txt"), b);
    return rc;
}

static void chart_path(char *out, size_t n, const char *dir, const char *chart, const char *ext) {
    snprintf(out, n, "%s/%s.%s", dir, chart, ext);
}

static void check_vector(const char *dir, const char *chart, double w_pt, double h_pt) {
    char svg[600], pdf[600], cmd[1600], want[64];
    chart_path(svg, sizeof svg, dir, chart, "svg");
    chart_path(pdf, sizeof pdf, dir, chart, "pdf");
    static const char script[] =
        "import sys, xml.etree.ElementTree as ET\n"
        "root = ET.parse(sys.argv[1]).getroot()\n"
        "w, h = sys.argv[2].split('x')\n"
        "assert root.tag == '{http://www.w3.org/2000/svg}svg', root.tag\n"
        "assert (root.get('width'), root.get('height')) == (w + 'pt', h + 'pt'), (root.get('width'), root.get('height'), w, h)\n"
        "assert len([e for e in root.iter() if e.tag.endswith('}use')]) > 50\n"
        "print('ok')\n";
    snprintf(want, sizeof want, "%gx%g", w_pt, h_pt);
    CHECK(tt_python("svg.py", script, svg, want) == 0, "%s: not an SVG of %s pt with its text", svg, want);
    snprintf(cmd, sizeof cmd, "pdfinfo '%s' > '%s' 2>&1 && pdffonts '%s' > '%s' 2>&1", pdf, tt_path("info.txt"), pdf, tt_path("fonts.txt"));
    CHECK(system(cmd) == 0, "%s: pdfinfo/pdffonts fail", pdf);
    char *info = tt_slurp(tt_path("info.txt"), NULL), *fonts = tt_slurp(tt_path("fonts.txt"), NULL), page[80];
    snprintf(page, sizeof page, "Page size:       %g x %g pts", w_pt, h_pt);
    CHECK(info && strstr(info, "Pages:           1\n") && strstr(info, page), "%s: pdfinfo says %s", pdf, info ? info : "");
    int emb = 0, bad = 0;
    for (char *line = fonts ? strtok(fonts, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        if (!strstr(line, "TrueType") && !strstr(line, "Type ")) continue;
        if (strstr(line, " yes yes ") || strstr(line, " yes no ")) emb++; else bad++;
    }
    CHECK(emb >= 1 && bad == 0, "%s: %d fonts embedded, %d not", pdf, emb, bad);
    free(info); free(fonts);
}

static void check_folders(void) {
    const char *d1 = tt_path("r1"), *d2 = tt_path("r2");
    mkdir_p(d1);
    mkdir_p(d2);
    char p[600];
    /* folder 1: vanilla, dpsgd, ghost, flash (OOM at 24 MiB) */
    RunLog v = { .run = "vanilla", .act_mib = 10, .step_ms = 10, .oom_at_step = -1 };
    RunLog dp = { .run = "dpsgd", .act_mib = 10, .extra_cat = "per_sample_grads/w", .extra_mib = 6, .clip_scope = 1, .step_ms = 14, .oom_at_step = -1 };
    RunLog gh = { .run = "ghost", .act_mib = 10, .extra_cat = "ghost/gram", .extra_mib = 3, .clip_scope = 1, .step_ms = 25, .oom_at_step = -1 };
    RunLog fl = { .run = "flash", .act_mib = 10, .step_ms = 12, .oom_at_step = 1, .mem_limit_mib = 24 };
    /* mixed: dpsgd's bytes and time, so that its tradeoff point lies on dpsgd's and a label must move */
    RunLog mx = dp;
    mx.run = "mixed";
    RunLog *logs1[5] = { &v, &dp, &gh, &fl, &mx };
    for (int i = 0; i < 5; i++) { snprintf(p, sizeof p, "%s/%s.log", d1, logs1[i]->run); run_log(p, *logs1[i]); }
    Row r1[5] = { { "vanilla", "", "ok", "10.0" }, { "dpsgd", "", "ok", "14.0" }, { "ghost", "", "ok", "25.0" }, { "flash", "", "oom", "" },
                  { "mixed", "", "ok", "14.0" } };
    results_csv(d1, "", r1, 5, 1);
    /* folder 2: other methods first, the same ones in another order, no OOM */
    RunLog gb = { .run = "ghost+bk", .act_mib = 12, .extra_cat = "bk/h", .extra_mib = 4, .step_ms = 16, .oom_at_step = -1 };
    RunLog nw = { .run = "newmethod", .act_mib = 9, .step_ms = 11, .oom_at_step = -1 };
    RunLog *logs2[5] = { &gb, &gh, &nw, &dp, &v };
    for (int i = 0; i < 5; i++) { snprintf(p, sizeof p, "%s/%s.log", d2, logs2[i]->run); run_log(p, *logs2[i]); }
    Row r2[5] = { { "ghost+bk", "", "ok", "16" }, { "ghost", "", "ok", "25" }, { "newmethod", "", "ok", "11" }, { "dpsgd", "", "ok", "14" },
                  { "vanilla", "", "ok", "10" } };
    results_csv(d2, "", r2, 5, 1);

    TtBox *b1, *b2;
    int n1, n2;
    int rc = charts(d1, "--format png,svg,pdf", &b1, &n1);
    CHECK(rc == 0, "dpmem-charts %s: exit %d", d1, rc);
    rc = charts(d2, "", &b2, &n2);
    CHECK(rc == 0, "dpmem-charts %s: exit %d", d2, rc);
    static const char *const names[3] = { "breakdown", "tradeoff", "timeline" };
    for (int c = 0; c < 3; c++) {
        for (int k = 0; k < 3; k++) {
            chart_path(p, sizeof p, d1, names[c], FORMATS[k]);
            struct stat st;
            CHECK(stat(p, &st) == 0 && st.st_size > 2000, "%s missing or tiny", p);
            CHECK(tt_text_overlaps(b1, n1, p) == 0, "%s: labels overlap (above)", p);
        }
        chart_path(p, sizeof p, d2, names[c], "png");
        CHECK(tt_text_overlaps(b2, n2, p) == 0, "%s: labels overlap (above)", p);
    }
    /* every method's markers in its own colour, in both folders: the same method, the same colour */
    static const char *const both[] = { "vanilla", "dpsgd", "ghost" };
    for (int c = 0; c < 2; c++)
        for (int m = 0; m < 3; m++) {
            char q1[600], q2[600];
            chart_path(q1, sizeof q1, d1, names[c], "png");
            chart_path(q2, sizeof q2, d2, names[c], "png");
            int k1 = tt_method_marks(b1, n1, q1, both[m]), k2 = tt_method_marks(b2, n2, q2, both[m]);
            CHECK(k1 >= 1 && k2 >= 1, "%s: %s's markers %d in folder 1, %d in folder 2 (-1: another colour)", names[c], both[m], k1, k2);
        }
    chart_path(p, sizeof p, d1, "tradeoff", "png");
    CHECK(tt_layout_find(b1, n1, p, 'm', "hollow mixed") && tt_layout_find(b1, n1, p, 't', "mixed") && tt_layout_find(b1, n1, p, 't', "dpsgd"),
          "tradeoff: mixed on dpsgd's point is not drawn hollow over it, or a name is missing");
    chart_path(p, sizeof p, d2, "breakdown", "png");
    CHECK(tt_method_marks(b2, n2, p, "ghost+bk") >= 2 && tt_method_marks(b2, n2, p, "newmethod") >= 2, "breakdown: the other methods' markers");
    /* the OOM run: marked in all three charts; in the breakdown twice (its bar in a, its ratio in b),
       both hatched in the OOM colour */
    for (int c = 0; c < 3; c++) {
        chart_path(p, sizeof p, d1, names[c], "png");
        int marks = 0;
        Png P;
        int loaded = load(&P, p) == 0;
        for (int i = 0; i < n1; i++) {
            const TtBox *o = &b1[i];
            if (o->kind != 'm' || strcmp(o->fig, p) || strcmp(o->what, "oom flash")) continue;
            marks++;
            if (c == 0 && loaded)
                CHECK(count_colour(&P, (int)o->x0, (int)o->y0, (int)o->x1 + 1, (int)o->y1 + 1, COLOUR_OOM) > 20, "breakdown: an OOM mark is not hatched");
        }
        if (loaded) stbi_image_free(P.px);
        CHECK(marks == (c == 0 ? 2 : 1), "%s: %d OOM marks for flash, want %d", p, marks, c == 0 ? 2 : 1);
    }
    chart_path(p, sizeof p, d1, "breakdown", "png");
    CHECK(tt_layout_find(b1, n1, p, 't', "memory limit 24.00 MiB"), "breakdown: the OOM run's limit is not named");
    CHECK(tt_layout_find(b1, n1, p, 't', "tiny (dim 64, 2 layers) \xC2\xB7 T=64 \xC2\xB7 B=4 (physical 2) \xC2\xB7 fp32 \xC2\xB7 cpu \xC2\xB7 2023-11-14"),
          "breakdown: the title line lacks model, T, B, precision, device or date");
    chart_path(p, sizeof p, d1, "tradeoff", "png");
    CHECK(tt_layout_find(b1, n1, p, 't', "step time (ms)") && tt_layout_find(b1, n1, p, 't', "peak memory (MiB)"), "tradeoff: axis titles with units");
    CHECK(tt_layout_find(b1, n1, p, 't', "Peak memory vs step time"), "tradeoff: no title");
    /* vector outputs: 1800x700 px at 144 dpi is 900x350 pt */
    check_vector(d1, "breakdown", 900, 350);
    check_vector(d1, "tradeoff", 575, 390);
    free(b1);
    free(b2);

    /* a paper's sizes at 300 dpi: the breakdown across two columns (7x5 in, c under a and b), the
       tradeoff in one (3.4x2.6 in), the timeline across two; nothing overlaps, pixels as asked */
    const char *d3 = tt_path("r1-paper");
    mkdir_p(d3);
    struct { const char *chart, *size; int w, h; } paper[] = {
        { "breakdown", "7x5in", 2100, 1500 }, { "tradeoff", "3.4x2.6in", 1020, 780 }, { "timeline", "7x9in", 2100, 2700 } };   /* the timeline: the whole figure */
    for (int c = 0; c < 3; c++) {
        char opts[700];
        snprintf(opts, sizeof opts, "-o '%s' --only %s --size %s --dpi 300 --font-scale 0.9", d3, paper[c].chart, paper[c].size);
        rc = charts(d1, opts, &b1, &n1);
        CHECK(rc == 0, "--only %s --size %s --dpi 300: exit %d", paper[c].chart, paper[c].size, rc);
        chart_path(p, sizeof p, d3, paper[c].chart, "png");
        Png P;
        if (load(&P, p) == 0) {
            CHECK(P.w == paper[c].w && P.h == paper[c].h, "%s: %dx%d, want %dx%d", p, P.w, P.h, paper[c].w, paper[c].h);
            stbi_image_free(P.px);
        } else CHECK(0, "%s does not decode", p);
        CHECK(tt_text_overlaps(b1, n1, p) == 0, "%s: labels overlap at %s (above)", p, paper[c].size);
        free(b1);
    }
    char bad_out[700];   /* a folder that cannot be made: under a file */
    snprintf(bad_out, sizeof bad_out, "--only sweep,breakdown -o '%s/results.csv/x'", d1);
    rc = charts(d1, bad_out, &b1, &n1);
    CHECK(rc == 2, "--only with -o a folder that cannot be made: exit %d, want 2", rc);
    free(b1);
}

/* Plan runs, and runs whose step time results.csv leaves empty or lacks: no tradeoff point. */
static void check_no_time(void) {
    const char *d = tt_path("plan"), *e = tt_path("nocol");
    mkdir_p(d);
    mkdir_p(e);
    char p[600];
    RunLog v = { .run = "vanilla", .act_mib = 10, .step_ms = 1, .plan = 1, .oom_at_step = -1 };
    RunLog g = { .run = "ghost", .act_mib = 10, .extra_cat = "ghost/gram", .extra_mib = 3, .clip_scope = 1, .step_ms = 1, .plan = 1, .oom_at_step = -1 };
    snprintf(p, sizeof p, "%s/vanilla.log", d); run_log(p, v);
    snprintf(p, sizeof p, "%s/ghost.log", d); run_log(p, g);
    Row rows[2] = { { "vanilla", "", "ok", "" }, { "ghost", "", "ok", "" } };
    results_csv(d, "", rows, 2, 1);
    TtBox *b;
    int n;
    int rc = charts(d, "", &b, &n);
    char *out = tt_slurp(tt_path("out.txt"), NULL);
    struct stat st;
    snprintf(p, sizeof p, "%s/tradeoff.png", d);
    CHECK(rc == 0 && stat(p, &st) != 0 && out && strstr(out, "tradeoff.png: no run has a step time"),
          "plan runs: exit %d; a tradeoff chart written, or not said so: %s", rc, out ? out : "");
    snprintf(p, sizeof p, "%s/timeline.png", d);
    CHECK(tt_layout_find(b, n, p, 't', "allocation events (the n-th ALLOC or FREE)"), "plan runs: the timeline is not on an event axis");
    free(out);
    free(b);
    /* timed logs, but results.csv without a step time column: the table says they have none */
    v.plan = g.plan = 0;
    snprintf(p, sizeof p, "%s/vanilla.log", e); run_log(p, v);
    snprintf(p, sizeof p, "%s/ghost.log", e); run_log(p, g);
    results_csv(e, "", rows, 2, 0);
    rc = charts(e, "", &b, &n);
    snprintf(p, sizeof p, "%s/tradeoff.png", e);
    CHECK(rc == 0 && stat(p, &st) != 0, "no step column: exit %d, or a tradeoff chart drawn", rc);
    free(b);
    /* one run with a time, one without: one point, and the note names the other */
    Row mixed[2] = { { "vanilla", "", "ok", "3.5" }, { "ghost", "", "ok", "" } };
    results_csv(e, "", mixed, 2, 1);
    rc = charts(e, "", &b, &n);
    CHECK(rc == 0 && tt_method_marks(b, n, p, "vanilla") == 1 && tt_method_marks(b, n, p, "ghost") == 0 &&
              tt_layout_find(b, n, p, 't', "No point: ghost (no step time). Dashed: vanilla's values."),
          "one run without time: exit %d, or its point drawn, or not named", rc);
    free(b);
}

/* A seq-len sweep: vanilla (no clip), flash and mixed (the same bytes: coinciding), flash OOM at 1024. */
static void check_sweep(void) {
    const char *d = tt_path("sweep");
    mkdir_p(d);
    static const char *const T[3] = { "64", "256", "1024" };
    Row rows[9];
    static char runs[9][64];
    int k = 0;
    for (int m = 0; m < 3; m++)
        for (int t = 0; t < 3; t++) {
            const char *method = m == 0 ? "vanilla" : m == 1 ? "flash" : "mixed";
            double act = atof(T[t]) / 8;   /* 8 .. 128 MiB: spans 16x */
            RunLog r = { .run = runs[k], .seq = T[t], .act_mib = act, .extra_cat = m ? "bk/h" : NULL, .extra_mib = m ? act / 4 : 0,
                         .clip_scope = m != 0, .step_ms = 5, .oom_at_step = m == 1 && t == 2 ? 0 : -1, .mem_limit_mib = 150 };
            snprintf(runs[k], sizeof runs[k], "%s-seq-len%s", method, T[t]);
            char p[600];
            snprintf(p, sizeof p, "%s/%s.log", d, runs[k]);
            run_log(p, r);
            rows[k] = (Row){ method, T[t], r.oom_at_step >= 0 ? "oom" : "ok", "5" };
            k++;
        }
    /* mixed at 1024 ran: flash and mixed coincide where both ran */
    results_csv(d, "seq-len", rows, 9, 1);
    TtBox *b;
    int n;
    int rc = charts(d, "--format png,pdf", &b, &n);
    char p[600];
    snprintf(p, sizeof p, "%s/sweep.png", d);
    CHECK(rc == 0, "sweep: exit %d", rc);
    CHECK(tt_text_overlaps(b, n, p) == 0, "sweep.png: labels overlap (above)");
    CHECK(tt_layout_find(b, n, p, 't', "peak memory (log scale)"), "sweep.png: the peak panel is not on a log axis (16x range)");
    CHECK(tt_layout_has(b, n, p, "vanilla: no clip phase"), "sweep.png: vanilla's missing clip phase not named");
    CHECK(tt_layout_find(b, n, p, 't', "seq-len (log2 scale)"), "sweep.png: the x axis is not log2 for powers of two");
    CHECK(tt_layout_find(b, n, p, 'm', "oom flash"), "sweep.png: flash's OOM at 1024 not marked");
    CHECK(tt_layout_has(b, n, p, "mixed = flash"), "sweep.png: mixed lying on flash is not named");
    /* vanilla's points in its colour; mixed, on flash, hollow and larger over it (both visible) */
    CHECK(tt_method_marks(b, n, p, "vanilla") >= 3 && tt_method_marks(b, n, p, "flash") >= 3 && tt_layout_find(b, n, p, 'm', "hollow mixed"),
          "sweep.png: the methods' points");
    /* the sweep's breakdown: each bar and row named with its value, the panel saying so */
    snprintf(p, sizeof p, "%s/breakdown.png", d);
    int named = 0;
    for (int m = 0; m < 3; m++)
        for (int t = 0; t < 3; t++) {
            char want[64];
            snprintf(want, sizeof want, "%s %s", m == 0 ? "vanilla" : m == 1 ? "flash" : "mixed", T[t]);
            int k = 0;
            for (int i = 0; i < n; i++) k += b[i].kind == 't' && !strcmp(b[i].fig, p) && !strcmp(b[i].what, want);
            named += k == 2;   /* a's bar and b's row */
        }
    CHECK(named == 9 && tt_layout_has(b, n, p, "(bars: method, seq-len)"), "breakdown.png of a sweep: %d of 9 runs named with their value", named);
    CHECK(tt_text_overlaps(b, n, p) == 0, "breakdown.png of a sweep: labels overlap (above)");
    free(b);
}

/* What a reviewer asked of the charts (issue: numbers and pictures a reader can trust):
   - a log whose config.device is "auto" is titled with the backend that ran (cpu), never "auto";
   - breakdown c: the category rows are names without category swatches (its markers are the
     methods' colours), and a log axis over 9 decades labels evenly spaced decades up to the GiB ones;
   - the timeline: one time axis for every panel (labelled once, under the last), --size the whole
     figure (a PDF of 7x9in is 504x648 pt), a size too small for the panels refused with the least. */
static void check_reviewer(void) {
    const char *d = tt_path("review");
    mkdir_p(d);
    char p[600];
    RunLog v = { .run = "vanilla", .act_mib = 65536, .step_ms = 10, .oom_at_step = -1, .device = "auto" };   /* 64 GiB */
    RunLog g = { .run = "ghost", .act_mib = 65536, .extra_cat = "norms/n", .extra_mib = 48.0 / MiB, .clip_scope = 1, .step_ms = 40,
                 .oom_at_step = -1, .device = "auto" };   /* 48 B of norms: the own peaks span 48 B .. 64 GiB */
    snprintf(p, sizeof p, "%s/vanilla.log", d); run_log(p, v);
    snprintf(p, sizeof p, "%s/ghost.log", d); run_log(p, g);
    Row rows[2] = { { "vanilla", "", "ok", "10" }, { "ghost", "", "ok", "40" } };
    results_csv(d, "", rows, 2, 1);
    TtBox *b;
    int n;
    int rc = charts(d, "--format png,pdf", &b, &n);
    CHECK(rc == 0, "review: exit %d", rc);
    static const char *const names[3] = { "breakdown", "tradeoff", "timeline" };
    for (int c = 0; c < 3; c++) {
        chart_path(p, sizeof p, d, names[c], "png");
        int auto_seen = 0, cpu_seen = 0;
        for (int i = 0; i < n; i++) {
            if (b[i].kind != 't' || strcmp(b[i].fig, p)) continue;
            auto_seen |= strstr(b[i].what, " auto ") != NULL || strstr(b[i].what, "\xC2\xB7 auto") != NULL;
            cpu_seen |= strstr(b[i].what, "\xC2\xB7 cpu \xC2\xB7") != NULL;
        }
        CHECK(!auto_seen && cpu_seen, "%s: the title says the device was auto (%d) or not cpu (%d)", p, auto_seen, cpu_seen);
    }
    /* breakdown c: no swatch of a category's colour left of its row's name */
    chart_path(p, sizeof p, d, "breakdown", "png");
    const TtBox *cn = NULL, *ca = NULL;   /* c's row names: the rightmost of each (a's legend has them too) */
    for (int i = 0; i < n; i++) {
        if (b[i].kind != 't' || strcmp(b[i].fig, p)) continue;
        if (!strcmp(b[i].what, "norms") && (!cn || b[i].x0 > cn->x0)) cn = &b[i];
        if (!strcmp(b[i].what, "activations") && (!ca || b[i].x0 > ca->x0)) ca = &b[i];
    }
    Png P;
    if (cn && ca && load(&P, p) == 0) {
        long sw = count_colour(&P, (int)cn->x0 - 40, (int)cn->y0, (int)cn->x0, (int)cn->y1, category_colour("norms")) +
                  count_colour(&P, (int)ca->x0 - 40, (int)ca->y0, (int)ca->x0, (int)ca->y1, category_colour("activations"));
        CHECK(sw == 0, "breakdown c: %ld pixels of category swatches beside its row names", sw);
        stbi_image_free(P.px);
    } else CHECK(0, "breakdown: no row named norms/activations, or no PNG");
    /* c's axis labels: byte sizes evenly spaced (one ratio between neighbours), reaching the GiB */
    double lv[32];
    int nl = 0;
    const TtBox *ct = tt_layout_find(b, n, p, 't', "own peak (log scale)");
    for (int i = 0; ct && i < n && nl < 32; i++) {
        if (b[i].kind != 't' || strcmp(b[i].fig, p) || b[i].y1 > ct->y0 + 1 || b[i].y0 < ct->y0 - 40 || b[i].x1 < ct->x0 - 200) continue;
        double x;
        char u[16];
        if (sscanf(b[i].what, "%lf %15s", &x, u) != 2) continue;
        double m = !strcmp(u, "B") ? 1 : !strcmp(u, "KiB") ? 1024.0 : !strcmp(u, "MiB") ? MiB : !strcmp(u, "GiB") ? 1024.0 * MiB : -1;
        if (m > 0) lv[nl++] = x * m;
    }
    int even = nl >= 3;
    for (int i = 2; i < nl; i++) even &= fabs(log(lv[i] / lv[i - 1]) - log(lv[1] / lv[0])) < 0.03;
    CHECK(even && lv[nl - 1] >= 1024.0 * MiB, "breakdown c: %d axis labels, evenly spaced %d, the largest %.0f bytes (want evenly spaced decades up to the GiB)",
          nl, even, nl ? lv[nl - 1] : 0);
    /* the timeline: one time axis for both panels (40 ms steps of ghost against 10 of vanilla): its
       title once, under the last panel, and its ticks reaching past the longer run's 120 ms */
    chart_path(p, sizeof p, d, "timeline", "png");
    int titles = 0;
    double top_tick = 0;
    for (int i = 0; i < n; i++) {
        if (b[i].kind != 't' || strcmp(b[i].fig, p) || strncmp(b[i].what, "time since the log opened", 25)) continue;
        titles++;
        for (int j = 0; j < n; j++)
            if (b[j].kind == 't' && !strcmp(b[j].fig, p) && b[j].y1 <= b[i].y0 + 1 && b[j].y0 >= b[i].y0 - 40 && atof(b[j].what) > top_tick)
                top_tick = atof(b[j].what);
    }
    CHECK(titles == 1 && top_tick >= 120, "timeline: %d time axis titles (want one, shared), ticks up to %.0f ms (want >= 120)", titles, top_tick);
    free(b);
    /* --size is the whole figure's: 7x9in as a PDF is 504x648 pt */
    const char *d2 = tt_path("review-pdf");
    mkdir_p(d2);
    char opts[700];
    snprintf(opts, sizeof opts, "-o '%s' --only timeline --format pdf --size 7x9in", d2);
    rc = charts(d, opts, &b, &n);
    free(b);
    char pdf[600], cmd[1400];
    chart_path(pdf, sizeof pdf, d2, "timeline", "pdf");
    snprintf(cmd, sizeof cmd, "pdfinfo '%s' 2>&1 | grep -q 'Page size: *504 x 648 pts'", pdf);
    CHECK(rc == 0 && system(cmd) == 0, "timeline --size 7x9in: exit %d, not a 504x648 pt page", rc);
    /* the README's paper size: three runs in a 7x5in PDF (it came out 7x15in, then was refused) */
    const char *d3 = tt_path("review-3");
    mkdir_p(d3);
    RunLog three[3] = { { .run = "vanilla", .act_mib = 10, .step_ms = 10, .oom_at_step = -1 },
                        { .run = "dpsgd", .act_mib = 10, .extra_cat = "per_sample_grads/w", .extra_mib = 6, .clip_scope = 1, .step_ms = 14, .oom_at_step = -1 },
                        { .run = "ghost", .act_mib = 10, .extra_cat = "ghost/gram", .extra_mib = 3, .clip_scope = 1, .step_ms = 25, .oom_at_step = -1 } };
    for (int i = 0; i < 3; i++) { snprintf(p, sizeof p, "%s/%s.log", d3, three[i].run); run_log(p, three[i]); }
    Row r3[3] = { { "vanilla", "", "ok", "10" }, { "dpsgd", "", "ok", "14" }, { "ghost", "", "ok", "25" } };
    results_csv(d3, "", r3, 3, 1);
    rc = charts(d3, "--only timeline --format pdf,png --size 7x5in", &b, &n);
    chart_path(pdf, sizeof pdf, d3, "timeline", "pdf");
    snprintf(cmd, sizeof cmd, "pdfinfo '%s' 2>&1 | grep -q 'Page size: *504 x 360 pts'", pdf);
    CHECK(rc == 0 && system(cmd) == 0, "timeline of 3 runs at --size 7x5in: exit %d, or not a 504x360 pt page", rc);
    chart_path(p, sizeof p, d3, "timeline", "png");
    CHECK(tt_text_overlaps(b, n, p) == 0, "%s: labels overlap at 7x5in (above)", p);
    free(b);
    /* 7x2in holds two panels since they may go side by side in a smaller type (issue 38); 7x1in does not,
       and the error says the least height that does */
    tt_expect_error("dpmem-charts", "'%s/review' -o '%s/review-pdf' --only timeline --size 7x1in",
                    "timeline of 2 runs: 1008x144 px is too small for its panels: at least 1008x216 px at 144 dpi (7.00x1.50in) (--size)");
}

static void check_bad_input(void) {
    mkdir_p(tt_path("empty"));
    mkdir_p(tt_path("nolog"));
    Row r[1] = { { "vanilla", "", "ok", "1" } };
    results_csv(tt_path("nolog"), "", r, 1, 1);
    struct { const char *args, *want; } bad[] = {
        { "'%s/r1' --format jpg", "unknown format 'jpg' (png, svg or pdf)" },
        { "'%s/r1' --format png,png", "--format names a format twice" },
        { "'%s/empty'", "empty/results.csv: No such file" },
        { "'%s/nolog'", "the log of vanilla is not in" },
        { "'%s/r1/vanilla.log'", "no output folder: give -o DIR" },
        { "'%s/r1' -o '%s/r1/vanilla.log'", "r1/vanilla.log: not a directory" },
        { "'%s/r1' --size 0x3in", "bad --size" },
        { "'%s/r1' --bogus", "unknown option" }, { "'%s/r1' --only colours", "bad --only" },
        { "'%s/r1' --baseline nobody", "--baseline: no run of that name completed" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) tt_expect_error("dpmem-charts", bad[i].args, bad[i].want);
    /* a chart must not overwrite a log: a log named breakdown.png, charts into its folder */
    mkdir_p(tt_path("clash"));
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cp '%s/r1/vanilla.log' '%s/clash/breakdown.png'", tt_dir, tt_dir);
    CHECK(system(cmd) == 0, "cp");
    tt_expect_error("dpmem-charts", "'%s/clash/breakdown.png' -o '%s/clash'", "same file");
    /* -o DIR that is not there yet is made, with the folders above it (issue 49), as run_experiments
       makes --out */
    int rc = tt_run("dpmem-charts", "'%s/r1/vanilla.log' -o '%s/made/by/charts' -q", tt_dir, tt_dir);
    struct stat st;
    CHECK(rc == 0 && stat(tt_path("made/by/charts/breakdown.png"), &st) == 0 && st.st_size > 0,
          "charts of a log into a new folder -o made/by/charts: exit %d, or no breakdown.png there", rc);
}

/* A paper's sizes (issue 38): a results folder of the demo's eight methods written whole at a page's
   width (7x5in) and a tall column (3.5x8.5in), in PDF and PNG: every chart drawn, no label over
   another, the breakdown's run names at least 6 pt, its c markers not hidden under one another (ghost's
   under ghost+bk's: at most a third of one covered by another), its a's upright title within the plot;
   a sweep's seven panels at both sizes; a page at a column's width and 2.6 in high holds the tradeoff,
   and the breakdown and the timeline of eight runs say the least size that holds them. */
static void check_paper_sizes(void) {
    const char *d = tt_path("paper8");
    mkdir_p(d);
    static const char *const m[8] = { "vanilla", "dpsgd", "ghost", "ghost+bk", "flash", "flash+twopass", "mixed", "lora" };
    static const double extra[8] = { 0, 6, 3, 3, 0, 0, 0.5, 0 };
    static const char *const cat[8] = { NULL, "per_sample_grads/w", "ghost/gram", "ghost/gram", NULL, NULL, "bk/h", NULL };
    Row rows[8];
    char ms[8][16];
    for (int i = 0; i < 8; i++) {
        char p[600];
        RunLog r = { .run = m[i], .act_mib = i == 7 ? 8 : 10, .extra_cat = cat[i], .extra_mib = extra[i], .clip_scope = extra[i] > 0,
                     .step_ms = 10 + 3 * i, .oom_at_step = -1 };
        snprintf(p, sizeof p, "%s/%s.log", d, m[i]);
        run_log(p, r);
        snprintf(ms[i], sizeof ms[i], "%.1f", 10 + 0.4 * i);   /* close together: the names crowd the tradeoff */
        rows[i] = (Row){ m[i], "", "ok", ms[i] };
    }
    results_csv(d, "", rows, 8, 1);
    static const char *const sizes[2] = { "7x5in", "3.5x8.5in" };
    static const char *const names[3] = { "breakdown", "tradeoff", "timeline" };
    for (int z = 0; z < 2; z++) {
        char out[600], opts[800], p[700];
        snprintf(out, sizeof out, "%s/%s", d, sizes[z]);
        mkdir_p(out);
        snprintf(opts, sizeof opts, "-o '%s' --format png,pdf --size %s", out, sizes[z]);
        TtBox *b;
        int n, rc = charts(d, opts, &b, &n);
        CHECK(rc == 0, "8 runs at --size %s: exit %d", sizes[z], rc);
        for (int c = 0; c < 3; c++)
            for (int k = 0; k < 2; k++) {
                struct stat st;
                snprintf(p, sizeof p, "%s/%s.%s", out, names[c], k ? "pdf" : "png");
                CHECK(stat(p, &st) == 0 && st.st_size > 2000, "--size %s: %s missing", sizes[z], p);
                if (!k) CHECK(tt_text_overlaps(b, n, p) == 0, "%s: labels overlap (above)", p);
            }
        snprintf(p, sizeof p, "%s/breakdown.png", out);
        /* the run names (a's bars, b's rows) at least 6 pt: 6 pt DejaVu is 14 px from ascent to descent at 144 dpi */
        double least = 1e9;
        for (int i = 0; i < n; i++) {
            if (b[i].kind != 't' || strcmp(b[i].fig, p)) continue;
            for (int r = 0; r < 8; r++)
                if (!strcmp(b[i].what, m[r])) {
                    double h = fmin(b[i].x1 - b[i].x0, b[i].y1 - b[i].y0);
                    if (h < least) least = h;
                }
        }
        CHECK(least >= 13.5 && least < 1e9, "%s: a run's name in %.1f px type (under 6 pt)", p, least);
        /* c's markers: below c's title, none more than a third covered by another */
        const TtBox *ct = tt_layout_find(b, n, p, 't', "c. Each category's own peak");
        int marks = 0, hidden = 0;
        for (int i = 0; ct && i < n; i++) {
            if (b[i].kind != 'm' || strcmp(b[i].fig, p) || b[i].y0 < ct->y1) continue;
            marks++;
            for (int j = i + 1; j < n; j++) {
                if (b[j].kind != 'm' || strcmp(b[j].fig, p) || b[j].y0 < ct->y1) continue;
                double ox = fmin(b[i].x1, b[j].x1) - fmax(b[i].x0, b[j].x0), oy = fmin(b[i].y1, b[j].y1) - fmax(b[i].y0, b[j].y0);
                double area = fmin((b[i].x1 - b[i].x0) * (b[i].y1 - b[i].y0), (b[j].x1 - b[j].x0) * (b[j].y1 - b[j].y0));
                if (ox > 0 && oy > 0 && ox * oy > area / 3) hidden++;
            }
        }
        CHECK(ct && marks >= 8 * 4 && hidden == 0, "%s: c has %d markers, %d pairs one over the other", p, marks, hidden);
        free(b);
    }
    /* the sweep of check_sweep (7 panels): a page's width and a tall column hold them too */
    for (int z = 0; z < 2; z++) {
        char out[600], opts[800], p[700];
        snprintf(out, sizeof out, "%s/sweep-%s", d, sizes[z]);
        mkdir_p(out);
        snprintf(opts, sizeof opts, "-o '%s' --only sweep --format png,pdf --size %s", out, sizes[z]);
        TtBox *b;
        int n, rc = charts(tt_path("sweep"), opts, &b, &n);
        snprintf(p, sizeof p, "%s/sweep.png", out);
        CHECK(rc == 0 && tt_text_overlaps(b, n, p) == 0 && tt_layout_find(b, n, p, 't', "clip"), "sweep at --size %s: exit %d, or labels overlap (above)",
              sizes[z], rc);
        free(b);
    }
    /* a column's width, 2.6 in high: the tradeoff fits; eight runs' breakdown and timeline do not, and say
       the least height that holds them */
    char opts[800];
    snprintf(opts, sizeof opts, "-o '%s/7x5in' --only tradeoff --format pdf --size 3.5x2.6in", d);
    TtBox *b;
    int n, rc = charts(d, opts, &b, &n);
    char tp[700];
    snprintf(tp, sizeof tp, "%s/7x5in/tradeoff.pdf", d);
    int over = 0;   /* no name over a point, a spread bar or a ring (the type shrinks until each finds room) */
    for (int i = 0; i < n; i++) {
        if (b[i].kind != 't' || strcmp(b[i].fig, tp)) continue;
        for (int j = 0; j < n; j++)
            if (b[j].kind == 'm' && !strcmp(b[j].fig, tp) && b[i].x0 < b[j].x1 && b[j].x0 < b[i].x1 && b[i].y0 < b[j].y1 && b[j].y0 < b[i].y1) {
                over++;
                fprintf(stderr, "  tradeoff at 3.5x2.6in: \"%s\" over %s\n", b[i].what, b[j].what);
            }
    }
    free(b);
    CHECK(rc == 0 && over == 0, "tradeoff at 3.5x2.6in: exit %d, %d names over a point or bar", rc, over);
    /* all the charts at that size: the tradeoff written, the two others refused, in one line */
    char col[600], cmd[1600];
    snprintf(col, sizeof col, "%s/col", d);
    mkdir_p(col);
    snprintf(cmd, sizeof cmd, "'%s/dpmem-charts' '%s' -o '%s' --format pdf --size 3.5x2.6in > '%s' 2>&1", tt_build(), d, col, tt_path("col.txt"));
    rc = system(cmd);
    char *said = tt_slurp(tt_path("col.txt"), NULL);
    snprintf(tp, sizeof tp, "%s/tradeoff.pdf", col);
    struct stat st;
    CHECK(rc != 0 && stat(tp, &st) == 0 && said && strstr(said, "breakdown: 504x374 px is too small") && strstr(said, "; timeline of 8 runs: 504x374 px"),
          "3.5x2.6in, all charts: exit %d, the tradeoff written or not, the refusals said in one line: %s", rc, said ? said : "");
    free(said);
    tt_expect_error("dpmem-charts", "'%s/paper8' -o '%s/paper8/7x5in' --only breakdown --size 3.5x2.6in",
                    "breakdown: 504x374 px is too small for its panels (8 runs, 7 categories): at least 504x");
    tt_expect_error("dpmem-charts", "'%s/paper8' -o '%s/paper8/7x5in' --only timeline --size 3.5x2.6in",
                    "timeline of 8 runs: 504x374 px is too small for its panels: at least 504x");
}

/* The task in the titles: a folder of classify runs, then one of a classify run beside a causal-LM run
   (config.task lm). The count of texts holding the wanted phrase per chart: breakdown and tradeoff
   their title line, the timeline each run's panel title. */
static int texts_with(const TtBox *b, int n, const char *fig, const char *phrase) {
    int k = 0;
    for (int i = 0; i < n; i++) k += b[i].kind == 't' && !strcmp(b[i].fig, fig) && strstr(b[i].what, phrase) != NULL;
    return k;
}

static void check_task(void) {
    static const char *const names[3] = { "breakdown", "tradeoff", "timeline" };
    const char *cls = "\xC2\xB7 classify (K=3) \xC2\xB7", *both = "\xC2\xB7 tasks: classify (K=3), causal LM \xC2\xB7";
    char p[600];
    for (int mixed = 0; mixed < 2; mixed++) {
        const char *d = tt_path(mixed ? "task-mixed" : "task-classify");
        mkdir_p(d);
        RunLog v = { .run = "vanilla", .act_mib = 8, .step_ms = 10, .oom_at_step = -1, .task = "classify" };
        RunLog g = { .run = "ghost", .act_mib = 8, .extra_cat = "norms/n", .extra_mib = 1, .clip_scope = 1, .step_ms = 20,
                     .oom_at_step = -1, .task = mixed ? "lm" : "classify" };
        snprintf(p, sizeof p, "%s/vanilla.log", d); run_log(p, v);
        snprintf(p, sizeof p, "%s/ghost.log", d); run_log(p, g);
        Row rows[2] = { { "vanilla", "", "ok", "10" }, { "ghost", "", "ok", "20" } };
        results_csv(d, "", rows, 2, 1);
        TtBox *b;
        int n, rc = charts(d, "--format png", &b, &n);
        CHECK(rc == 0, "%s: exit %d", d, rc);
        for (int c = 0; c < 3; c++) {
            chart_path(p, sizeof p, d, names[c], "png");
            const int k_cls = texts_with(b, n, p, cls), k_both = texts_with(b, n, p, both), k_lm = texts_with(b, n, p, "causal LM");
            if (c == 2)   /* the timeline: a panel per run, each titled with its own task (the LM run's with none) */
                CHECK(k_cls == (mixed ? 1 : 2) && k_lm == 0, "%s: %d panel titles say \"%s\" (want %d), %d say causal LM (want 0)", p, k_cls, cls,
                      mixed ? 1 : 2, k_lm);
            else if (mixed) CHECK(k_both == 1 && k_cls == 0, "%s: the title line names both tasks %d times (want 1), classify alone %d", p, k_both, k_cls);
            else CHECK(k_cls == 1 && k_lm == 0, "%s: the title line says \"%s\" %d times (want 1), causal LM %d", p, cls, k_cls, k_lm);
        }
        free(b);
    }
}

int main(void) {
    tt_mkdir("charts");
    check_palette();
    check_palette_pairs();
    check_own_program();
    check_folders();
    check_no_time();
    check_sweep();
    check_reviewer();
    check_task();
    check_paper_sizes();
    check_bad_input();
    if (tt_failures) { fprintf(stderr, "%d check(s) failed\n", tt_failures); return 1; }
    printf("charts: all checks passed\n");
    return 0;
}
