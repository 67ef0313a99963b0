/* dpmem_report.c — dpmem-report: the numbers of one or more runs as text (summary.txt style), CSV,
   JSON and charts.

   Per run: peak, the breakdown at the peak, per-scope times and memory (largest rise, net change), snapshots, the largest
   buffers, OOM post-mortems, and the health checks. Across runs: a comparison table against a
   baseline run. CSV and JSON come from one table of columns (so they carry the same numbers; the
   schema is in docs/TOOLS.md). Every time is a median with its min, quartiles and max over the timed
   steps (the warm-up steps left out, and said); a plan-backend run has no time at all. An output
   flag given "-" writes to stdout (and the text report then stays off stdout). The computing is
   tools/read/runstats.c (and steplog.c: the per-step loss and sample norms), the charts tools/charts/charts.c. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "charts/charts.h"
#include "read/dpmem_read.h"
#include "common/io_guard.h"
#include "read/json_out.h"
#include "read/shown.h"
#include "read/namemap.h"
#include "read/outpath.h"
#include "read/ranks.h"
#include "read/runstats.h"
#include "read/steplog.h"
#include "charts/timeline.h"
#include "read/threadsteps.h"
#include "read/units.h"

#define MAX_RUNS 1024   /* (the suite gives every process of a --repeat sweep at once)*/

static int fail(const char *msg, const char *arg) {
    fprintf(stderr, "dpmem-report: %s%s%s\n", shown(msg), arg ? ": " : "", arg ? shown(arg) : "");
    return 2;
}

static void usage(FILE *f) {
    fprintf(f,
        "usage: dpmem-report a.log [b.log ...] [--baseline NAME] [--csv F] [--json F] [--dp-detail] [--charts DIR] [--warmup N]\n"
        "  --baseline NAME  the run the others are compared with (its run name or file; default: the first)\n"
        "  --csv F, --json F  one row / object per run (schema: docs/TOOLS.md); F = - writes to stdout\n"
        "  --dp-detail      the CSV/JSON also carry the per-layer and per-sample DP records: dp.layer.<param>,\n"
        "                   dp.io.<param>, and sample_step, sample_norm, sample_clip (every logged per-sample norm)\n"
        "  --charts DIR     breakdown.png, tradeoff.png, timeline.png (and sweep.png) into DIR\n"
        "  --warmup N       steps left out of every time statistic (default: the log's META\n"
        "                   timing.warmup_steps, which the trainers write; else 1)\n"
        "  -q               no text report on stdout (with --csv/--json/--charts)\n"
        "Times are medians with min, quartiles and max over the timed steps; a plan run has none.\n");
}

/* ---- names shared by all runs: categories and scopes ---- */

typedef struct { const char **v; int n, cap; NameMap seen; } Names;
static int names_add(Names *s, const char *x) {
    int32_t k = namemap_put(&s->seen, x, strlen(x), s->n);
    if (k < 0) return -1;
    if (k != s->n) return 0;   /* there already */
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 32;
        const char **v = realloc(s->v, (size_t)s->cap * sizeof *v);
        if (!v) return -1;
        s->v = v;
    }
    s->v[s->n++] = x;
    return 0;
}
static int cmp_cat_name(const void *a, const void *b) {
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    int kx = dpmem_known_category(x), ky = dpmem_known_category(y);
    if (kx >= 0 || ky >= 0) return kx < 0 ? 1 : ky < 0 ? -1 : (kx > ky) - (kx < ky);
    return strcmp(x, y);
}
static int scope_rank(const char *s) {
    static const char *order[] = { "step", "data", "forward", "backward", "per_sample_norms", "clip", "noise", "optimizer_step" };
    for (int i = 0; i < (int)(sizeof order / sizeof order[0]); i++)
        if (strcmp(s, order[i]) == 0) return i;
    return 100;
}
static int cmp_scope_name(const void *a, const void *b) {
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    int rx = scope_rank(x), ry = scope_rank(y);
    return rx != ry ? (rx > ry) - (rx < ry) : strcmp(x, y);
}

static const ScopeStats *scope_of(const RunStats *r, const char *name) {
    int32_t i = dpmem_log_find_string(r->log, name);
    return i >= 0 && r->scopes[i].count ? &r->scopes[i] : NULL;
}

/* ---- the table behind CSV and JSON ---- */

enum { CELL_NUM = 0, CELL_STR = 1, CELL_LIST = 2 };   /* a list: numbers separated by spaces (a JSON array) */
typedef struct { char *text; int is_str; } Cell;   /* text NULL: missing; is_str: CELL_* */
typedef struct { char **cols; int n_cols, cap_cols; Cell *cells; int n_rows; NameMap by_name; } Table;

static int col_index(Table *t, const char *name) {
    int32_t i = namemap_get(&t->by_name, name, strlen(name));
    if (i >= 0) return i;
    if (t->n_cols == t->cap_cols) return -1;
    t->cols[t->n_cols] = strdup(name);
    if (!t->cols[t->n_cols]) return -1;
    if (namemap_put(&t->by_name, t->cols[t->n_cols], strlen(name), t->n_cols) < 0) { free(t->cols[t->n_cols]); return -1; }
    return t->n_cols++;
}
static void put(Table *t, int row, const char *col, int is_str, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void put(Table *t, int row, const char *col, int is_str, const char *fmt, ...) {
    int c = col_index(t, col);
    if (c < 0) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    Cell *cell = &t->cells[(size_t)row * t->cap_cols + c];
    free(cell->text);
    cell->text = strdup(buf);
    cell->is_str = is_str;
}
/* A list cell of n numbers v[i] * scale printed with fmt ("%.6f"), at most 100000 of them. */
static void put_list(Table *t, int row, const char *col, const double *v, size_t n, double scale, const char *fmt) {
    int c = col_index(t, col);
    if (c < 0) return;
    if (n > 100000) n = 100000;
    char *text = malloc(32 * n + 1), *q = text;
    if (!text) return;
    *q = 0;
    for (size_t i = 0; i < n; i++) {
        if (i) *q++ = ' ';
        q += snprintf(q, 32, fmt, v[i] * scale);
    }
    Cell *cell = &t->cells[(size_t)row * t->cap_cols + c];
    free(cell->text);
    cell->text = text;
    cell->is_str = CELL_LIST;
}

static void csv_field(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\n\r")) { fputs(s, f); return; }
    fputc('"', f);
    for (; *s; s++) { if (*s == '"') fputc('"', f); fputc(*s, f); }
    fputc('"', f);
}
static int write_csv(const Table *t, const char *path) {
    FILE *f = outpath_fopen(path);
    if (!f) return -1;
    for (int c = 0; c < t->n_cols; c++) { if (c) fputc(',', f); csv_field(f, t->cols[c]); }
    fputc('\n', f);
    for (int r = 0; r < t->n_rows; r++) {
        for (int c = 0; c < t->n_cols; c++) {
            if (c) fputc(',', f);
            const Cell *cell = &t->cells[(size_t)r * t->cap_cols + c];
            if (cell->text) csv_field(f, cell->text);
        }
        fputc('\n', f);
    }
    return outpath_fclose(f);
}

static int write_json(const Table *t, const char *path) {
    FILE *f = outpath_fopen(path);
    if (!f) return -1;
    fputs("[\n", f);
    for (int r = 0; r < t->n_rows; r++) {
        fputs("  {", f);
        for (int c = 0; c < t->n_cols; c++) {
            const Cell *cell = &t->cells[(size_t)r * t->cap_cols + c];
            if (c) fputs(", ", f);
            json_write_string(f, t->cols[c]);
            fputs(": ", f);
            if (!cell->text) fputs("null", f);
            else if (cell->is_str == CELL_STR) json_write_string(f, cell->text);
            else if (cell->is_str == CELL_LIST) {
                fputc('[', f);
                for (const char *q = cell->text; *q; q++) fputs(*q == ' ' ? ", " : (char[2]){ *q, 0 }, f);
                fputc(']', f);
            } else fputs(cell->text, f);
        }
        fputs(r + 1 < t->n_rows ? "},\n" : "}\n", f);
    }
    fputs("]\n", f);
    return outpath_fclose(f);
}

/* ---- text ---- */


static double ms(double ns) { return ns / 1e6; }

static void print_oom(const RunStats *r, uint32_t k) {
    const DpmemLog *L = r->log;
    DpmemEvent e;
    runstats_oom_event(r, k, &e);
    char b1[32], b2[32], b3[32];
    printf("  OOM: %s requested for %s (%s)", fmt_bytes(b1, sizeof b1, (double)dpmem_ev_u64(&e, 0)),
           shown(dpmem_log_string(L, e.id)), dpmem_space_name(e.aux));
    if (dpmem_ev_u64(&e, 16))   /* device_total 0: the writer had no device figures */
        printf("; device used %s of %s", fmt_bytes(b2, sizeof b2, (double)dpmem_ev_u64(&e, 8)),
               fmt_bytes(b3, sizeof b3, (double)dpmem_ev_u64(&e, 16)));
    printf("\n");
    uint32_t ns = dpmem_ev_u32(&e, 24), nc = dpmem_ev_u32(&e, 28), nt = dpmem_ev_u32(&e, 32);
    uint32_t q = 40 + (ns * 4 + 7) / 8 * 8;
    printf("       in scope:");
    for (uint32_t i = 0; i < ns; i++) printf("%s%s", i ? " > " : " ", shown(dpmem_log_string(L, dpmem_ev_u32(&e, 40 + 4 * i))));
    printf("%s\n       live:", ns ? "" : " (none)");
    for (uint32_t i = 0; i < nc; i++)
        printf(" %s %s%s", shown(dpmem_log_string(L, dpmem_ev_u32(&e, q + 16 * i))), fmt_bytes(b1, sizeof b1, (double)dpmem_ev_u64(&e, q + 16 * i + 8)), i + 1 < nc ? "," : "");
    printf("\n       largest:");
    for (uint32_t i = 0; i < nt; i++)
        printf(" %s %s%s", shown(dpmem_log_string(L, dpmem_ev_u32(&e, q + 16 * nc + 16 * i))),
               fmt_bytes(b1, sizeof b1, (double)dpmem_ev_u64(&e, q + 16 * nc + 16 * i + 8)), i + 1 < nt ? "," : "");
    printf("\n");
}

/* A per-layer DP record: dp.layer.<param> (the norm method of that parameter), dp.io.<param> (its norm IO bytes). */
static int layer_key(const char *k) { return !strncmp(k, "dp.layer.", 9) || !strncmp(k, "dp.io.", 6); }

/* A META key the tables carry besides config.*: the DP settings and results, LoRA's, the timing's,
   the job's size; not the per-layer (layer_key: with --dp-detail) or per-step (dp.sample_norms: the
   sample_* columns) ones. */
static int settings_key(const char *k) {
    if (layer_key(k) || !strcmp(k, "dp.sample_norms")) return 0;
    return !strncmp(k, "dp.", 3) || !strncmp(k, "lora.", 5) || !strncmp(k, "timing.", 7) || !strcmp(k, "comm.world_size");
}

/* The META keys of a log with a prefix test, each once (its last value), in the order first written. */
static void print_meta_line(const DpmemLog *L, const char *label, int (*want)(const char *), int skip_prefix) {
    int any = 0;
    for (uint32_t i = 0; i < L->n_meta; i++) {
        const char *k = dpmem_log_string(L, L->meta[i].key);
        if (!want(k) || dpmem_log_meta(L, k) != dpmem_log_string(L, L->meta[i].value)) continue;
        printf("%s%s=%s", any++ ? " " : label, shown(k + skip_prefix), shown(dpmem_log_string(L, L->meta[i].value)));
    }
    if (any) printf("\n");
}
static int config_key(const char *k) { return !strncmp(k, "config.", 7); }

/* "steps 2..3 (1 warm-up step left out: META timing.warmup_steps)" */
static void timed_steps_phrase(char *b, size_t n, const RunStats *r) {
    unsigned long long first = (unsigned long long)r->warmup + 1, last = r->step.n + (unsigned long long)r->warmup;
    char range[64];
    if (first == last) snprintf(range, sizeof range, "step %llu", first);
    else snprintf(range, sizeof range, "steps %llu..%llu", first, last);
    snprintf(b, n, "%s (%d warm-up step%s left out: %s)", range, r->warmup, r->warmup == 1 ? "" : "s",
             !strcmp(r->warmup_from, "asked") ? "--warmup" : r->warmup_from);
}

/* s right-aligned in w columns of the terminal (a UTF-8 "µs" is one column, two bytes). */
static void rjust(const char *s, int w) {
    int cols = 0;
    for (const char *p = s; *p; p++) cols += ((unsigned char)*p & 0xC0) != 0x80;
    printf("%*s%s", w > cols ? w - cols : 0, "", s);
}
/* " NAME UNIT" right-aligned in w columns, after a space. */
static void head(const char *name, const char *unit, int w) {
    char h[96];
    snprintf(h, sizeof h, "%s%s%s", name, *name && *unit ? " " : "", unit);
    printf(" ");
    rjust(h, w);
}

/* The per-sample norms a DP run logged with --log-sample-norms, as a histogram against C. */
static void print_norms(const RunStats *r, const StepLog *sl) {
    if (!sl->n_norms) return;
    const char *cs = dpmem_log_meta(r->log, "dp.max_grad_norm");
    double C = cs ? atof(cs) : 0, hi = 0;
    size_t clipped = 0;
    for (size_t i = 0; i < sl->n_norms; i++) { if (sl->norm[i] > hi) hi = sl->norm[i]; clipped += sl->clip[i] < 1; }
    if (C > hi) hi = C;
    enum { BINS = 16, BAR = 40 };
    double w = hi > 0 ? hi / BINS : 1;
    size_t count[BINS] = { 0 }, most = 0;
    for (size_t i = 0; i < sl->n_norms; i++) {
        int k = (int)(sl->norm[i] / w);
        count[k < 0 ? 0 : k >= BINS ? BINS - 1 : k]++;
    }
    for (int k = 0; k < BINS; k++) if (count[k] > most) most = count[k];
    printf("per-sample gradient norms (META dp.sample_norms: %zu samples of %u steps; C = %s; '|' marks the bin of C):\n",
           sl->n_norms, sl->norm_steps, cs ? shown(cs) : "?");
    for (int k = 0; k < BINS; k++) {
        int bar = most ? (int)((count[k] * BAR + most - 1) / most) : 0;
        printf("  [%10.4g, %10.4g) %8zu %c ", k * w, (k + 1) * w, count[k], C >= k * w && C < (k + 1) * w ? '|' : ' ');
        for (int j = 0; j < bar; j++) putchar('#');
        putchar('\n');
    }
    double *c = malloc(sl->n_norms * sizeof *c);
    if (c) {
        memcpy(c, sl->clip, sl->n_norms * sizeof *c);
        TimeStats t = timestats_of(c, sl->n_norms);
        printf("  clipped (factor < 1): %zu of %zu (%.1f%%); clip factor min %.4g, median %.4g, max %.4g\n", clipped, sl->n_norms,
               100.0 * (double)clipped / (double)sl->n_norms, t.min, t.median, t.max);
        free(c);
    }
}

/* The run's header: its name, settings, events and peak. */
static void print_run_head(const RunStats *r) {
    const DpmemLog *L = r->log;
    char b1[32];
    printf("== run: %s  (%s)\n", shown(r->name), shown(L->path));
    print_meta_line(L, "   config: ", config_key, 7);
    print_meta_line(L, "   settings: ", settings_key, 0);
    if (r->no_time)
        printf("   %llu events; %s; a plan (backend plan): nothing ran, so the run has no time (the planner's own is not shown)\n",
               (unsigned long long)L->n_events,
               L->corrupt ? "CORRUPT: read up to the first bad byte" : L->closed ? "closed cleanly" : "NOT closed cleanly (cut): read up to the cut");
    else
        printf("   %llu events over %.3f ms; %s\n", (unsigned long long)L->n_events, ms((double)r->span_ns),
               L->corrupt ? "CORRUPT: read up to the first bad byte" : L->closed ? "closed cleanly" : "NOT closed cleanly (cut): read up to the cut");
    if (r->no_time) printf("peak total: %s (%llu bytes)\n", fmt_bytes(b1, sizeof b1, (double)r->peak), (unsigned long long)r->peak);
    else printf("peak total: %s (%llu bytes) at %.3f ms\n", fmt_bytes(b1, sizeof b1, (double)r->peak), (unsigned long long)r->peak,
                ms((double)r->peak_ts));
}

/* The breakdown at the peak: the categories with bytes at some time, then tags whose STRING the log lacks
   (their bytes are in the peak all the same); each column in the unit its values read best in. */
static void print_breakdown(const RunStats *r, const Names *cats) {
    const DpmemLog *L = r->log;
    int n = 0;
    double *at = malloc((size_t)(cats->n + 1) * 2 * sizeof *at), *own = at ? at + cats->n + 1 : NULL;
    int32_t *idx = malloc((size_t)(cats->n + 1) * 2 * sizeof *idx), *ci = idx ? idx + cats->n + 1 : NULL;
    for (int c = 0; at && idx && c <= cats->n; c++) {
        int32_t i = c == cats->n ? (int32_t)L->n_cats : dpmem_log_category_index(L, cats->v[c]);
        if (i < 0 || !r->cat_peak[i]) continue;
        at[n] = (double)r->at_peak[i]; own[n] = (double)r->cat_peak[i]; ci[n] = i; idx[n++] = c;
    }
    Unit ua = byte_unit_col(at, (size_t)n), uo = byte_unit_col(own, (size_t)n);
    printf("breakdown at the peak:\n  %-22s", "category");
    head("bytes", "", 14); head("", ua.name, 12); head("share", "", 7); head("own peak", uo.name, 14);
    printf("\n");
    for (int k = 0; k < n; k++) {
        char a[32], o[32];
        printf("  %-22s %14llu %12s %6.1f%% %14s\n", idx[k] == cats->n ? "? (tag unknown)" : shown(cats->v[idx[k]]),
               (unsigned long long)r->at_peak[ci[k]],
               fmt_in_unit(a, sizeof a, at[k], ua, 1), r->peak ? 100.0 * at[k] / (double)r->peak : 0.0, fmt_in_unit(o, sizeof o, own[k], uo, 1));
    }
    free(at); free(idx);
}

/* The step time over the timed steps, and each thread's when several ran steps. */
static void print_step_times(const RunStats *r, int timed) {
    const DpmemLog *L = r->log;
    char phrase[160] = "";
    if (r->step.n) timed_steps_phrase(phrase, sizeof phrase, r);
    ThreadSteps ts = { 0 };   /* several threads ran steps: each its own (the line above pools them) */
    int per_thread = timed && r->step_scope && (L->n_threads > 1 || L->count[DPMEM_EV_THREAD] > 1) &&
                     threadsteps_compute(&ts, L, r->step_scope, r->warmup) == 0 && ts.n > 1;
    if (timed && r->step.n) {
        double v[5] = { r->step.median, r->step.min, r->step.q1, r->step.q3, r->step.max };
        Unit u = time_unit_col(v, 5);
        char c[5][32];
        for (int k = 0; k < 5; k++) fmt_in_unit(c[k], sizeof c[k], v[k], u, 0);
        printf("step time (%s, the '%s' scope over %s%s): median %s, min %s, q1 %s, q3 %s, max %s\n", u.name, shown(r->step_scope), phrase,
               per_thread ? ", every thread's steps in the order they ended" : "", c[0], c[1], c[2], c[3], c[4]);
    } else if (timed && r->step_scope)
        printf("step time: no step left to time ('%s' ran %llu times, %d warm-up step%s left out)\n", shown(r->step_scope),
               (unsigned long long)r->scopes[dpmem_log_find_string(L, r->step_scope)].count, r->warmup, r->warmup == 1 ? "" : "s");
    if (per_thread) {
        printf("step time per thread (%u threads ran '%s', each its own steps; each thread's first %d step%s left out):\n", ts.n,
               shown(r->step_scope), r->warmup, r->warmup == 1 ? "" : "s");
        for (uint32_t k = 0; k < ts.n; k++) {
            const ThreadStepStats *t = &ts.th[k];
            char lab[96], range[64], c[5][32];
            tracks_label(&ts.tracks, t->track, lab, sizeof lab);
            unsigned long long first = (unsigned long long)r->warmup + 1, last = (unsigned long long)r->warmup + t->step.n;
            if (!t->step.n) snprintf(range, sizeof range, "none timed");
            else if (first == last) snprintf(range, sizeof range, "step %llu timed", first);
            else snprintf(range, sizeof range, "steps %llu..%llu timed", first, last);
            printf("  %-24s %6llu steps, %s", shown(lab), (unsigned long long)t->n_steps, range);
            if (t->step.n) {
                double v[5] = { t->step.median, t->step.min, t->step.q1, t->step.q3, t->step.max };
                Unit u = time_unit_col(v, 5);
                for (int q = 0; q < 5; q++) fmt_in_unit(c[q], sizeof c[q], v[q], u, 0);
                printf(" (%s): median %s, min %s, q1 %s, q3 %s, max %s", u.name, c[0], c[1], c[2], c[3], c[4]);
            }
            printf("\n");
        }
    }
    threadsteps_free(&ts);
}

/* Every scope's count, times and memory. */
static void print_scopes(const RunStats *r, int timed) {
    const DpmemLog *L = r->log;
    if (timed)
        printf("scopes (each time column in its own unit; inside '%s': the scope's time in each step, over the timed steps; elsewhere: each "
               "instance; a scope's time includes the scopes nested in it):\n", r->step_scope ? shown(r->step_scope) : "step");
    else printf("scopes:\n");
    printf("  (max rise: the most the live total rose above its value at the scope's start, in one instance; "
           "net: the live total at its end less at its start, summed over its instances)\n");
    Names sc = { 0 };
    for (uint32_t i = 0; i < L->n_strings; i++)
        if (r->scopes[i].count || r->scopes[i].gpu_count) names_add(&sc, L->strings[i]);
    if (sc.n) qsort(sc.v, (size_t)sc.n, sizeof *sc.v, cmp_scope_name);
    /* the columns' values first, to choose each column's unit: total, median, min, q1, q3, max, gpu mean, rise, net */
    enum { C_TOTAL, C_MED, C_MIN, C_Q1, C_Q3, C_MAX, C_GPU, C_RISE, C_NET, N_COL };
    double *cv = malloc((size_t)(sc.n ? sc.n : 1) * N_COL * sizeof *cv);
    int *known = malloc((size_t)(sc.n ? sc.n : 1) * N_COL * sizeof *known);
    const ScopeStats **ss = malloc((size_t)(sc.n ? sc.n : 1) * sizeof *ss);
    int rows = 0;
    for (int k = 0; cv && known && ss && k < sc.n; k++) {
        int32_t i = dpmem_log_find_string(L, sc.v[k]);
        if (i < 0) continue;
        const ScopeStats *s = &r->scopes[i];
        const TimeStats *t = &s->times;
        double *v = cv + (size_t)rows * N_COL;
        int *kn = known + (size_t)rows * N_COL;
        /* min and max: of the timed values, else (more instances than kept) of every instance */
        const double vals[N_COL] = { (double)s->total_ns, t->median, t->n ? t->min : (double)s->min_ns, t->q1, t->q3,
                                     t->n ? t->max : (double)s->max_ns, s->gpu_count ? (double)s->gpu_total_ns / (double)s->gpu_count : 0,
                                     (double)s->mem_rise, (double)s->mem_net };
        const int kv[N_COL] = { timed, timed && t->n, timed && s->count, timed && t->n, timed && t->n, timed && s->count,
                                s->gpu_count && !r->no_time, 1, 1 };
        memcpy(v, vals, sizeof vals);
        memcpy(kn, kv, sizeof kv);
        ss[rows] = s;
        sc.v[rows++] = sc.v[k];
    }
    Unit cu[N_COL];
    double *col = malloc((size_t)(rows ? rows : 1) * sizeof *col);
    for (int c = 0; c < N_COL; c++) {
        size_t m = 0;
        for (int k = 0; col && k < rows; k++) if (known[(size_t)k * N_COL + c]) col[m++] = cv[(size_t)k * N_COL + c];
        cu[c] = c >= C_RISE ? byte_unit_col(col, col ? m : 0) : time_unit_col(col, col ? m : 0);
    }
    free(col);
    static const char *const cname[N_COL] = { "total", "median", "min", "q1", "q3", "max", "gpu mean", "max rise", "net" };
    static const int cw[N_COL] = { 12, 11, 11, 11, 11, 11, 12, 13, 11 };
    printf("  %-22s %8s", "name", "count");
    for (int c = 0; c < N_COL; c++) head(cname[c], cu[c].name, cw[c]);
    printf("\n");
    for (int k = 0; k < rows; k++) {
        printf("  %-22s %8llu", shown(sc.v[k]), (unsigned long long)ss[k]->count);
        for (int c = 0; c < N_COL; c++) {
            char b[48];
            if (known[(size_t)k * N_COL + c]) fmt_in_unit(b, sizeof b, cv[(size_t)k * N_COL + c], cu[c], c >= C_RISE);
            else snprintf(b, sizeof b, "-");
            printf(" %*s", cw[c], b);
        }
        printf("\n");
    }
    free(cv); free(known); free(ss);
    free(sc.v);
    namemap_free(&sc.seen);
}

/* The snapshots: a row each, its categories' live bytes and the change from the one before. */
static void print_snapshots(const RunStats *r) {
    const DpmemLog *L = r->log;
    if (!r->n_snaps) return;
    /* Columns: the categories some snapshot lists, in the log's order; a snapshot's values
       scattered into a row of them (snapshots are sparse: the log may hold 10^5 categories). */
    uint32_t *col = calloc(L->n_cats + 1, sizeof *col), n_col = 0;   /* category -> column + 1 */
    for (uint32_t i = 0; col && i < r->n_snaps; i++)
        for (uint32_t k = 0; k < r->snaps[i].n; k++) col[r->snaps[i].cat[k]] = 1;
    uint32_t *cat_at = malloc((L->n_cats + 1) * sizeof *cat_at);
    for (uint32_t c = 0; col && cat_at && c < L->n_cats; c++)
        if (col[c]) { cat_at[n_col] = c; col[c] = ++n_col; }
    uint64_t *row = calloc(2 * (size_t)n_col + 2, sizeof *row), *prev = row ? row + n_col + 1 : NULL;
    if (!col || !cat_at || !row) { printf("snapshots: out of memory\n"); n_col = 0; }
    /* one unit for every byte of the table (its rows are read across and down), one for its times */
    double *bv = malloc(((size_t)r->n_snaps * (n_col + 2) + 1) * sizeof *bv), *tv = malloc(((size_t)r->n_snaps + 1) * sizeof *tv);
    size_t nb = 0;
    for (uint32_t i = 0; bv && tv && i < r->n_snaps; i++) {
        const SnapStats *s = &r->snaps[i];
        tv[i] = (double)s->ts;
        for (uint32_t k = 0; k < s->n; k++) bv[nb++] = (double)s->live[k];
        if (s->device_total) {
            bv[nb++] = (double)(s->device_used > s->device_tracked ? s->device_used - s->device_tracked : 0);
            bv[nb++] = (double)s->device_used;
        }
    }
    Unit ub = byte_unit_col(bv, bv ? nb : 0), ut = time_unit_col(tv, tv ? r->n_snaps : 0);
    free(bv); free(tv);
    char tu[16];
    snprintf(tu, sizeof tu, "t %s", ut.name);
    printf("snapshots (%s):\n  %-20s ", ub.name, "label");
    rjust(tu, 10);
    for (uint32_t c = 0; c < n_col; c++) printf(" %12.12s", shown(L->cats[cat_at[c]]));
    if (r->has_device) printf(" %12s %12s", "untracked", "dev used");
    printf("   change vs previous\n");
    for (uint32_t i = 0; row && i < r->n_snaps; i++) {
        const SnapStats *s = &r->snaps[i];
        memcpy(prev, row, n_col * sizeof *row);
        memset(row, 0, n_col * sizeof *row);
        for (uint32_t k = 0; k < s->n; k++) row[col[s->cat[k]] - 1] = s->live[k];
        char c1[48], c2[48];
        printf("  %-20.20s %10s", shown(s->label), fmt_in_unit(c1, sizeof c1, (double)s->ts, ut, 0));
        for (uint32_t c = 0; c < n_col; c++) printf(" %12s", fmt_in_unit(c1, sizeof c1, (double)row[c], ub, 1));
        uint64_t u = s->device_used > s->device_tracked ? s->device_used - s->device_tracked : 0;
        if (r->has_device) {
            if (s->device_total) printf(" %12s %12s", fmt_in_unit(c1, sizeof c1, (double)u, ub, 1), fmt_in_unit(c2, sizeof c2, (double)s->device_used, ub, 1));
            else printf(" %12s %12s", "-", "-");
        }
        printf("  ");
        if (i == 0) printf(" -");
        else {
            int changed = 0;
            for (uint32_t c = 0; c < n_col; c++) {
                double d = ((double)row[c] - (double)prev[c]) / ub.div;
                if (d != 0) { printf(ub.div == 1 ? " %s %+.0f" : " %s %+.2f", shown(L->cats[cat_at[c]]), d); changed = 1; }
            }
            const SnapStats *p = &r->snaps[i - 1];
            if (s->device_total && p->device_total) {
                uint64_t pu = p->device_used > p->device_tracked ? p->device_used - p->device_tracked : 0;
                if (u != pu) { printf(ub.div == 1 ? " untracked %+.0f" : " untracked %+.2f", ((double)u - (double)pu) / ub.div); changed = 1; }
            }
            if (!changed) printf(" none");
        }
        printf("\n");
    }
    free(col); free(cat_at); free(row);
}

/* The health checks: clocks, lost strings, the leak check, untracked device memory, WARN and OOM events. */
static void print_health(const RunStats *r) {
    const DpmemLog *L = r->log;
    char b1[32], b2[32];
    printf("health:\n");
    if (L->backwards)   /* the merged order and every duration are then wrong: say so, print none */
        printf("  ERROR: timestamps go backwards %llu times (first at byte %llu): scope times and the leak check are left out\n",
               (unsigned long long)L->backwards, (unsigned long long)L->backwards_offset);
    if (r->unnamed_events)
        printf("  ERROR: %llu ALLOC/FREE events name tags the log never defines (lost STRING events): %s at the peak has no category ('?' above)\n",
               (unsigned long long)r->unnamed_events, fmt_bytes(b1, sizeof b1, (double)r->at_peak[L->n_cats]));
    if (L->backwards) {}
    else if (!r->step_scope) printf("  - no repeated scope (\"step\"): no leak check\n");
    else if (r->leak) {
        printf("  WARNING: live bytes at the end of '%s' keep rising: +%s from the end of step %llu to the end of step %llu "
               "(%s per step): a leak?\n", shown(r->step_scope), fmt_bytes(b1, sizeof b1, (double)r->leak_growth),
               (unsigned long long)r->leak_from_step, (unsigned long long)r->leak_steps, fmt_bytes(b2, sizeof b2, (double)r->leak_per_step));
        if (r->n_grew) printf("    the tags that grew from the end of step %llu to the end of the last step (allocations and frees between):\n",
                              (unsigned long long)r->leak_from_step);
        for (uint32_t i = 0; i < r->n_grew; i++) {
            const TagGrowth *g = &r->grew[i];
            char b3[32];
            printf("    %-40s +%-11s (%s -> %s; %llu allocs, %llu frees)\n", shown(L->strings[g->tag]),
                   fmt_bytes(b1, sizeof b1, (double)(g->to - g->from)), fmt_bytes(b2, sizeof b2, (double)g->from),
                   fmt_bytes(b3, sizeof b3, (double)g->to), (unsigned long long)g->allocs, (unsigned long long)g->frees);
        }
    }
    else printf("  ok: live bytes at the end of '%s' show no rising trend (%llu steps)\n", shown(r->step_scope), (unsigned long long)r->n_steps);
    const char *pool = dpmem_log_meta(L, "cuda.alloc");
    if (r->untracked_growth && pool && !strcmp(pool, "pool"))
        /* the CUDA backend's stream-ordered pool keeps freed blocks (docs/CUDA_BACKEND.md): device
           memory no tag holds, which grows to the largest step's working set and then stays */
        printf("  note: untracked device memory grew from %s to %s across the snapshots: the CUDA backend's memory pool "
               "keeps freed blocks for reuse (META cuda.alloc=pool; DPMEM_CUDA_ALLOC=sync gives them back at once)\n",
               fmt_bytes(b1, sizeof b1, (double)r->untracked_first), fmt_bytes(b2, sizeof b2, (double)r->untracked_last));
    else if (r->untracked_growth)
        printf("  WARNING: untracked device memory grew from %s to %s across the snapshots (fragmentation or an uninstrumented allocator)\n",
               fmt_bytes(b1, sizeof b1, (double)r->untracked_first), fmt_bytes(b2, sizeof b2, (double)r->untracked_last));
    else if (r->has_device) printf("  ok: untracked device memory does not keep growing\n");
    if (r->too_large)
        printf("  ERROR: %llu allocations left out: they would carry the total past 2^64 bytes (a forged or corrupt log)\n",
               (unsigned long long)r->too_large);
    if (r->n_warn) {
        printf("  WARNING: %llu WARN event%s in the log, %u distinct:\n", (unsigned long long)r->n_warn, r->n_warn == 1 ? "" : "s", r->n_warns);
        for (uint32_t i = 0; i < r->n_warns; i++) {
            const WarnStats *w = &r->warns[i];
            char when[48] = "";
            if (!r->no_time) snprintf(when, sizeof when, ", first at %.3f ms", ms((double)w->first_ts));
            printf("    %llux%s: %s\n", (unsigned long long)w->count, when, w->msg < 0 ? "? (message not in the log)" : shown(L->strings[w->msg]));
        }
    }
    if (r->unbalanced_frees) printf("  WARNING: %llu frees of more bytes than were live in their category\n", (unsigned long long)r->unbalanced_frees);
    if (r->n_oom) printf("  WARNING: %llu out-of-memory event(s)\n", (unsigned long long)r->n_oom);
}

static void print_run(const RunStats *r, const Names *cats) {
    const int timed = !r->no_time && !r->log->backwards;   /* backwards clocks: the times are wrong, the health check says why */
    print_run_head(r);
    print_breakdown(r, cats);
    print_step_times(r, timed);
    print_scopes(r, timed);
    StepLog sl;
    if (steplog_read(&sl, r->log) == 0) {
        if (sl.n_loss)
            printf("loss (META train.loss: each step's mean over its batch, before that step's update): step %u %.9g -> step %u %.9g (%zu steps logged)\n",
                   sl.step[0], sl.loss[0], sl.step[sl.n_loss - 1], sl.loss[sl.n_loss - 1], sl.n_loss);
        print_norms(r, &sl);
        steplog_free(&sl);
    }
    print_snapshots(r);
    if (r->n_top) {
        double bv[RS_TOP];
        for (uint32_t i = 0; i < r->n_top; i++) bv[i] = (double)r->top[i].bytes;
        Unit ub = byte_unit_col(bv, r->n_top);
        printf("largest buffers (top %u by their largest allocation):\n  %-40s %14s %10s %8s %8s\n", r->n_top, "tag", "bytes", ub.name, "space", "allocs");
        for (uint32_t i = 0; i < r->n_top; i++) {
            char c[48];
            printf("  %-40s %14llu %10s %8s %8llu\n", shown(r->log->strings[r->top[i].tag]), (unsigned long long)r->top[i].bytes,
                   fmt_in_unit(c, sizeof c, bv[i], ub, 1), dpmem_space_name(r->top[i].space), (unsigned long long)r->top[i].allocs);
        }
    }
    for (uint32_t i = 0; i < r->n_oom && i < 4; i++) print_oom(r, i);
    print_health(r);
    printf("\n");
}

static void print_comparison(RunStats **runs, int n, int base, const Names *cats) {
    const RunStats *b = runs[base];
    /* each column in the unit its values read best in (the second header row names them) */
    int nc = cats->n + 1;   /* the peak, then the categories */
    double *v = malloc((size_t)(n ? n : 1) * (size_t)(2 * nc + 1) * sizeof *v), *t = v ? v + (size_t)n * nc : NULL, *o = t ? t + n : NULL;
    Unit *u = malloc((size_t)(2 * nc) * sizeof *u), ut = { 1e6, "ms" };
    if (!v || !u) { free(v); free(u); printf("== comparison: out of memory\n"); return; }
    size_t nt = 0;
    for (int i = 0; i < n; i++) {
        v[(size_t)i * nc] = (double)runs[i]->peak;
        o[(size_t)i * nc] = (double)runs[i]->peak - (double)b->peak;
        for (int c = 0; c < cats->n; c++) {
            v[(size_t)i * nc + 1 + c] = (double)runstats_at_peak(runs[i], cats->v[c]);
            o[(size_t)i * nc + 1 + c] = v[(size_t)i * nc + 1 + c] - (double)runstats_at_peak(b, cats->v[c]);
        }
        if (runstats_step_median_ns(runs[i]) > 0) t[nt++] = runstats_step_median_ns(runs[i]);
    }
    double *col = malloc((size_t)(n ? n : 1) * sizeof *col);
    for (int c = 0; c < nc; c++) {
        size_t m = 0, q = 0;
        for (int i = 0; col && i < n; i++) col[m++] = v[(size_t)i * nc + c];
        u[c] = byte_unit_col(col, col ? m : 0);
        for (int i = 0; col && i < n; i++) if (i != base) col[q++] = o[(size_t)i * nc + c];
        u[nc + c] = byte_unit_col(col, col ? q : 0);
    }
    free(col);
    if (nt) ut = time_unit_col(t, nt);
    printf("== comparison (baseline: %s; memory at each run's peak, each column in the unit under its name; step: the median over each "
           "run's timed steps, x base a ratio of medians [from q1/q3 to q3/q1])\n", shown(b->name));
    printf("  %-20s %10s %8s", "run", "peak", "x base");
    for (int c = 0; c < cats->n; c++) printf(" %12.12s", shown(cats->v[c]));
    printf(" %12s %8s %17s\n", "step", "x base", "[spread]");
    printf("  %-20s", "");
    head("", u[0].name, 10);
    printf(" %8s", "");
    for (int c = 0; c < cats->n; c++) head("", u[1 + c].name, 12);
    head("", ut.name, 12);
    printf("\n");
    for (int i = 0; i < n; i++) {
        const RunStats *r = runs[i];
        char cell[48];
        printf("  %-20.20s %10s %8.3f", shown(r->name), fmt_in_unit(cell, sizeof cell, v[(size_t)i * nc], u[0], 1),
               b->peak ? (double)r->peak / (double)b->peak : 0.0);
        for (int c = 0; c < cats->n; c++) printf(" %12s", fmt_in_unit(cell, sizeof cell, v[(size_t)i * nc + 1 + c], u[1 + c], 1));
        double tm = runstats_step_median_ns(r), lo, hi;
        double x = r->no_time || b->no_time ? 0 : timestats_ratio(&r->step, &b->step, &lo, &hi);
        if (tm > 0) printf(" %12s", fmt_in_unit(cell, sizeof cell, tm, ut, 0));
        else printf(" %12s", "-");
        if (x > 0) printf(" %8.3f  [%6.3f, %6.3f]\n", x, lo, hi);
        else printf(" %8s %17s\n", "-", "");
    }
    printf("  overhead vs baseline (at the peak):\n  %-20s", "");
    head("", u[nc].name, 10);
    printf(" %8s", "");
    for (int c = 0; c < cats->n; c++) head("", u[nc + 1 + c].name, 12);
    printf("\n");
    for (int i = 0; i < n; i++) {
        if (i == base) continue;
        printf("  %-20.20s", shown(runs[i]->name));
        for (int c = 0; c < nc; c++) {
            char cell[48], sg[52];
            double d = o[(size_t)i * nc + c];
            fmt_in_unit(cell, sizeof cell, d, u[nc + c], 1);
            snprintf(sg, sizeof sg, "%s%s", d >= 0 ? "+" : "", cell);
            printf(c ? " %12s" : " %10s %8s", sg, "");
        }
        printf("\n");
    }
    free(v); free(u);
    printf("\n");
}

static long long meta_ll(const DpmemLog *L, const char *key, long long dflt) {
    const char *v = dpmem_log_meta(L, key);
    char *end;
    long long x = v && *v ? strtoll(v, &end, 10) : dflt;
    return v && *v && !*end ? x : dflt;
}

/* A META value as a JSON number when it is one, else as a string. */
static void put_meta(Table *t, int row, const char *key, const char *v) {
    char *end;
    double x = v && *v ? strtod(v, &end) : 0;
    int num = v && *v && !*end && isfinite(x) && strspn(v, "+-0123456789.eE") == strlen(v);
    put(t, row, key, num ? CELL_NUM : CELL_STR, "%s", v ? v : "");
}

/* The time columns of a TimeStats: PREFIX_median_ms, _min_ms, _q1_ms, _q3_ms, _max_ms (empty: no time). */
static void put_times(Table *t, int row, const char *prefix, const TimeStats *ts, int known) {
    static const char *const f[5] = { "median_ms", "min_ms", "q1_ms", "q3_ms", "max_ms" };
    const double v[5] = { ts->median, ts->min, ts->q1, ts->q3, ts->max };
    char col[300];
    for (int k = 0; k < 5; k++) {
        snprintf(col, sizeof col, "%.280s%s", prefix, f[k]);
        if (known && ts->n) put(t, row, col, 0, "%.6f", ms(v[k]));
        else col_index(t, col);
    }
}

/* --dp-detail's per-sample columns: every logged sample's step, norm and clip factor, in the log's order. */
static void put_samples(Table *t, int row, const StepLog *sl) {
    double *steps = sl->n_norms ? malloc(sl->n_norms * sizeof *steps) : NULL;
    for (size_t i = 0; steps && i < sl->n_norms; i++) steps[i] = sl->norm_step[i];
    if (steps) put_list(t, row, "sample_step", steps, sl->n_norms, 1.0, "%.0f");
    else col_index(t, "sample_step");
    if (steps) put_list(t, row, "sample_norm", sl->norm, sl->n_norms, 1.0, "%.17g");
    else col_index(t, "sample_norm");
    if (steps) put_list(t, row, "sample_clip", sl->clip, sl->n_norms, 1.0, "%.17g");
    else col_index(t, "sample_clip");
    free(steps);
}

static void fill_row(Table *t, int row, const RunStats *r, const RunStats *b, const Names *cats, const Names *scopes, int detail) {
    const DpmemLog *L = r->log;
    const int timed = !r->no_time && !L->backwards;
    char col[300];
    put(t, row, "run", 1, "%s", r->name);
    put(t, row, "file", 1, "%s", L->path);
    put(t, row, "closed", 0, "%d", L->closed);
    put(t, row, "corrupt", 0, "%d", L->corrupt);
    put(t, row, "events", 0, "%llu", (unsigned long long)L->n_events);
    put(t, row, "no_time", 0, "%d", r->no_time);
    if (timed) put(t, row, "span_ms", 0, "%.6f", ms((double)r->span_ns));
    else col_index(t, "span_ms");
    put(t, row, "peak_bytes", 0, "%llu", (unsigned long long)r->peak);
    if (timed) put(t, row, "peak_ms", 0, "%.6f", ms((double)r->peak_ts));
    else col_index(t, "peak_ms");
    if (b->peak) put(t, row, "peak_vs_baseline", 0, "%.6f", (double)r->peak / (double)b->peak);
    else col_index(t, "peak_vs_baseline");
    put(t, row, "steps", 0, "%llu", (unsigned long long)r->n_steps);
    put(t, row, "warmup_steps", 0, "%d", r->warmup);
    put(t, row, "timed_steps", 0, "%zu", timed ? r->step.n : (size_t)0);
    put_times(t, row, "step_", &r->step, timed);
    if (timed && r->step.n) put(t, row, "step_mean_ms", 0, "%.6f", ms(r->step.mean));
    else col_index(t, "step_mean_ms");
    if (timed && r->step_ns && r->n_steps) put_list(t, row, "step_ms", r->step_ns, r->n_steps < RS_MAX_STEPS ? r->n_steps : RS_MAX_STEPS, 1e-6, "%.6f");
    else col_index(t, "step_ms");
    double lo, hi, x = timed && !b->no_time ? timestats_ratio(&r->step, &b->step, &lo, &hi) : 0;
    if (x > 0) {
        put(t, row, "step_vs_baseline", 0, "%.6f", x);
        put(t, row, "step_vs_baseline_lo", 0, "%.6f", lo);
        put(t, row, "step_vs_baseline_hi", 0, "%.6f", hi);
    } else { col_index(t, "step_vs_baseline"); col_index(t, "step_vs_baseline_lo"); col_index(t, "step_vs_baseline_hi"); }
    /* the batch: logical (sequences per optimizer step, the job's) and physical (per forward/backward, per rank) */
    long long world = meta_ll(L, "comm.world_size", 1), pb = meta_ll(L, "config.batch_size", -1), ga = meta_ll(L, "config.grad_accum", 1);
    long long logical = meta_ll(L, "dp.logical_batch", pb > 0 ? pb * ga * world : -1), physical = meta_ll(L, "dp.physical_batch", pb);
    if (logical > 0) put(t, row, "batch_logical", 0, "%lld", logical);
    else col_index(t, "batch_logical");
    if (physical > 0) put(t, row, "batch_physical", 0, "%lld", physical);
    else col_index(t, "batch_physical");
    put(t, row, "end_live_bytes", 0, "%llu", (unsigned long long)r->end_live);
    for (int c = 0; c < cats->n; c++) {
        snprintf(col, sizeof col, "at_peak.%s", cats->v[c]);
        put(t, row, col, 0, "%llu", (unsigned long long)runstats_at_peak(r, cats->v[c]));
    }
    for (int c = 0; c < cats->n; c++) {
        snprintf(col, sizeof col, "overhead.%s", cats->v[c]);
        put(t, row, col, 0, "%lld", (long long)runstats_at_peak(r, cats->v[c]) - (long long)runstats_at_peak(b, cats->v[c]));
    }
    for (int k = 0; k < scopes->n; k++) {
        const ScopeStats *s = scope_of(r, scopes->v[k]);
        char prefix[280];
        snprintf(prefix, sizeof prefix, "scope.%.260s.", scopes->v[k]);
        snprintf(col, sizeof col, "%scount", prefix);
        if (s) put(t, row, col, 0, "%llu", (unsigned long long)s->count);
        else col_index(t, col);
        snprintf(col, sizeof col, "%stotal_ms", prefix);
        if (s && timed) put(t, row, col, 0, "%.6f", ms((double)s->total_ns));
        else col_index(t, col);
        snprintf(col, sizeof col, "%smean_ms", prefix);
        if (s && timed) put(t, row, col, 0, "%.6f", s->count ? ms((double)s->total_ns / (double)s->count) : 0.0);
        else col_index(t, col);
        put_times(t, row, prefix, s ? &s->times : &(TimeStats){ 0 }, s && timed);
        snprintf(col, sizeof col, "%sgpu_mean_ms", prefix);
        if (s && s->gpu_count && !r->no_time) put(t, row, col, 0, "%.6f", ms((double)s->gpu_total_ns / (double)s->gpu_count));
        else col_index(t, col);
        snprintf(col, sizeof col, "%smem_max_rise_bytes", prefix);
        if (s) put(t, row, col, 0, "%llu", (unsigned long long)s->mem_rise);
        else col_index(t, col);
        snprintf(col, sizeof col, "%smem_net_bytes", prefix);
        if (s) put(t, row, col, 0, "%lld", (long long)s->mem_net);
        else col_index(t, col);
    }
    put(t, row, "snapshots", 0, "%u", r->n_snaps);
    put(t, row, "warnings", 0, "%llu", (unsigned long long)r->n_warn);
    if (r->n_warns && r->warns[0].msg >= 0) put(t, row, "first_warning", 1, "%s", L->strings[r->warns[0].msg]);
    else col_index(t, "first_warning");
    put(t, row, "ooms", 0, "%llu", (unsigned long long)r->n_oom);
    /* the first OOM: what was asked, for what, where, and what was live against which limit */
    static const char *const oom_cols[] = { "oom.requested_bytes", "oom.tag", "oom.space", "oom.scope", "oom.live_bytes",
                                            "oom.device_used_bytes", "oom.limit_bytes" };
    if (r->n_oom) {
        DpmemEvent e;
        runstats_oom_event(r, 0, &e);
        uint32_t ns = dpmem_ev_u32(&e, 24), nc = dpmem_ev_u32(&e, 28), q = 40 + (ns * 4 + 7) / 8 * 8;
        uint64_t live_sum = 0, dev_total = dpmem_ev_u64(&e, 16);
        for (uint32_t i = 0; i < nc; i++) live_sum += dpmem_ev_u64(&e, q + 16 * i + 8);
        char stack[512] = "";
        size_t k = 0;
        for (uint32_t i = 0; i < ns && k < sizeof stack - 1; i++)
            k += (size_t)snprintf(stack + k, sizeof stack - k, "%s%s", i ? ">" : "", dpmem_log_string(L, dpmem_ev_u32(&e, 40 + 4 * i)));
        put(t, row, oom_cols[0], 0, "%llu", (unsigned long long)dpmem_ev_u64(&e, 0));
        put(t, row, oom_cols[1], 1, "%s", dpmem_log_string(L, e.id));
        put(t, row, oom_cols[2], 1, "%s", dpmem_space_name(e.aux));
        put(t, row, oom_cols[3], 1, "%s", stack);
        put(t, row, oom_cols[4], 0, "%llu", (unsigned long long)live_sum);
        if (dev_total) put(t, row, oom_cols[5], 0, "%llu", (unsigned long long)dpmem_ev_u64(&e, 8));
        else col_index(t, oom_cols[5]);
        long long limit = dev_total ? (long long)dev_total : meta_ll(L, "config.mem_limit", 0);
        if (limit > 0) put(t, row, oom_cols[6], 0, "%lld", limit);
        else col_index(t, oom_cols[6]);
    } else for (int i = 0; i < 7; i++) col_index(t, oom_cols[i]);
    put(t, row, "leak", 0, "%d", r->leak);
    put(t, row, "leak_per_step_bytes", 0, "%llu", (unsigned long long)r->leak_per_step);
    put(t, row, "leak_growth_bytes", 0, "%llu", (unsigned long long)r->leak_growth);
    put(t, row, "leak_from_step", 0, "%llu", (unsigned long long)r->leak_from_step);
    if (r->n_grew) {   /* "tag:+bytes ..." */
        char grew[1000] = "";
        size_t k = 0;
        for (uint32_t i = 0; i < r->n_grew && k < sizeof grew - 1; i++)
            k += (size_t)snprintf(grew + k, sizeof grew - k, "%s%s:+%llu", i ? " " : "", L->strings[r->grew[i].tag],
                                  (unsigned long long)(r->grew[i].to - r->grew[i].from));
        put(t, row, "leak_tags", 1, "%s", grew);
    } else col_index(t, "leak_tags");
    put(t, row, "untracked_growth", 0, "%d", r->untracked_growth);
    if (r->has_device) {
        put(t, row, "untracked_first_bytes", 0, "%llu", (unsigned long long)r->untracked_first);
        put(t, row, "untracked_last_bytes", 0, "%llu", (unsigned long long)r->untracked_last);
    } else { col_index(t, "untracked_first_bytes"); col_index(t, "untracked_last_bytes"); }
    StepLog sl;
    int have_sl = steplog_read(&sl, L) == 0;
    if (have_sl && sl.n_loss) {
        put(t, row, "loss_first", 0, "%.17g", sl.loss[0]);
        put(t, row, "loss_last", 0, "%.17g", sl.loss[sl.n_loss - 1]);
        put_list(t, row, "loss", sl.loss, sl.n_loss, 1.0, "%.17g");
    } else { col_index(t, "loss_first"); col_index(t, "loss_last"); col_index(t, "loss"); }
    if (have_sl && sl.n_norms) {
        put(t, row, "sample_norms", 0, "%zu", sl.n_norms);
        size_t clipped = 0;
        for (size_t i = 0; i < sl.n_norms; i++) clipped += sl.clip[i] < 1;
        TimeStats ns = timestats_of(sl.norm, sl.n_norms);   /* (sorts the copy steplog made) */
        put(t, row, "sample_norm_median", 0, "%.9g", ns.median);
        put(t, row, "sample_clipped_fraction", 0, "%.6f", (double)clipped / (double)sl.n_norms);
    } else { col_index(t, "sample_norms"); col_index(t, "sample_norm_median"); col_index(t, "sample_clipped_fraction"); }
    if (detail) put_samples(t, row, have_sl ? &sl : &(StepLog){ 0 });
    if (have_sl) steplog_free(&sl);
    for (uint32_t i = 0; i < L->n_meta; i++) {
        const char *k = dpmem_log_string(L, L->meta[i].key);
        if (strncmp(k, "config.", 7) == 0) put(t, row, k, 1, "%s", dpmem_log_meta(L, k) ? dpmem_log_meta(L, k) : "");
    }
    for (uint32_t i = 0; i < L->n_meta; i++) {
        const char *k = dpmem_log_string(L, L->meta[i].key);
        if (settings_key(k) || (detail && layer_key(k))) put_meta(t, row, k, dpmem_log_meta(L, k));
    }
}

int main(int argc, char **argv) {
    const char *paths[MAX_RUNS], *baseline = NULL, *csv = NULL, *json = NULL, *charts = NULL;
    int n = 0, quiet = 0, warmup = -1, detail = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--baseline")) { if (!has_val) return fail("--baseline needs a run name", NULL); baseline = argv[++i]; }
        else if (!strcmp(a, "--csv")) { if (!has_val) return fail("--csv needs a file", NULL); csv = argv[++i]; }
        else if (!strcmp(a, "--json")) { if (!has_val) return fail("--json needs a file", NULL); json = argv[++i]; }
        else if (!strcmp(a, "--charts")) { if (!has_val) return fail("--charts needs a directory", NULL); charts = argv[++i]; }
        else if (!strcmp(a, "--warmup")) {
            char *end;
            long v = has_val ? strtol(argv[i + 1], &end, 10) : -1;
            if (!has_val || !*argv[i + 1] || *end || v < 0 || v > 1000000000L) return fail("--warmup needs a number of steps >= 0", has_val ? argv[i + 1] : NULL);
            warmup = (int)v; i++;
        }
        else if (!strcmp(a, "-q")) quiet = 1;
        else if (!strcmp(a, "--dp-detail")) detail = 1;
        else if (a[0] == '-' && a[1]) return fail("unknown option", a);
        else {
            if (n == MAX_RUNS) return fail("too many logs (at most 1024)", NULL);
            paths[n++] = a;
        }
    }
    if (n == 0) { usage(stderr); return 2; }
    if (detail && !csv && !json) return fail("--dp-detail adds columns to the CSV/JSON: give --csv F or --json F", NULL);
    if (outpath_is_stdout(charts)) return fail("--charts needs a directory: standard output ('-') cannot hold several PNGs", NULL);
    if (outpath_is_stdout(csv) && outpath_is_stdout(json)) return fail("--csv - and --json -: only one output can be standard output", NULL);
    if (outpath_is_stdout(csv) || outpath_is_stdout(json)) quiet = 1;   /* stdout carries that table alone */
    {   /* no output may be an input (or another output): check before anything is opened */
        IoPath io[MAX_RUNS + 7];
        int k = 0;
        char chart_path[4][4096];
        static const char *const chart_names[4] = { "breakdown.png", "tradeoff.png", "timeline.png", "sweep.png" };
        for (int i = 0; i < n; i++) io[k++] = (IoPath){ paths[i], "log", 0 };
        io[k++] = (IoPath){ csv, "--csv", 1 };
        io[k++] = (IoPath){ json, "--json", 1 };
        for (int c = 0; charts && c < 4; c++) {
            snprintf(chart_path[c], sizeof chart_path[c], "%s/%s", charts, chart_names[c]);
            io[k++] = (IoPath){ chart_path[c], "--charts", 1 };
        }
        char e[1024];
        if (io_check_outputs(io, k, e, sizeof e)) return fail(e, NULL);
    }

    DpmemLog *logs = calloc((size_t)n, sizeof *logs);
    RunStats **runs = calloc((size_t)n, sizeof *runs);
    if (!logs || !runs) return fail("out of memory", NULL);
    char err[512];
    int rc = 0, opened = 0, computed = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        if (dpmem_log_open(&logs[i], paths[i], err, sizeof err)) { fprintf(stderr, "dpmem-report: %s\n", shown(err)); rc = 1; break; }
        opened++;
        dpmem_log_warn(&logs[i], "dpmem-report");
        runs[i] = malloc(sizeof *runs[i]);
        if (!runs[i] || runstats_compute_ex(runs[i], &logs[i], warmup)) {
            if (dpmem_log_error(&logs[i])) fprintf(stderr, "dpmem-report: %s\n", shown(dpmem_log_error(&logs[i])));
            else fprintf(stderr, "dpmem-report: %s: out of memory\n", shown(paths[i]));
            rc = 1;
            break;
        }
        computed++;
    }
    int base = 0;
    if (rc == 0 && baseline) {
        base = -1;
        for (int i = 0; i < n && base < 0; i++)
            if (!strcmp(runs[i]->name, baseline) || !strcmp(paths[i], baseline)) base = i;
        if (base < 0) { fprintf(stderr, "dpmem-report: --baseline %s: no run of that name\n", shown(baseline)); rc = 2; }
    }
    Names cats = { 0 }, scopes = { 0 };
    Table t = { 0 };
    if (rc == 0) {
        for (int i = 0; i < n; i++) {
            for (uint32_t c = 0; c < logs[i].n_cats; c++) if (runs[i]->cat_peak[c]) names_add(&cats, logs[i].cats[c]);
            for (uint32_t s = 0; s < logs[i].n_strings; s++) if (runs[i]->scopes[s].count) names_add(&scopes, logs[i].strings[s]);
        }
        if (cats.n) qsort(cats.v, (size_t)cats.n, sizeof *cats.v, cmp_cat_name);
        if (scopes.n) qsort(scopes.v, (size_t)scopes.n, sizeof *scopes.v, cmp_scope_name);
        if (!quiet) {
            for (int i = 0; i < n; i++) print_run(runs[i], &cats);
            ranks_print(runs, n, stdout);
            if (n > 1) print_comparison(runs, n, base, &cats);
        }
        if (csv || json) {
            t.cap_cols = 128 + 2 * cats.n + 10 * scopes.n + 64;
            for (int i = 0; i < n; i++) t.cap_cols += (int)logs[i].n_meta;
            t.cols = calloc((size_t)t.cap_cols, sizeof *t.cols);
            t.cells = calloc((size_t)t.cap_cols * n, sizeof *t.cells);
            if (!t.cols || !t.cells) { fprintf(stderr, "dpmem-report: out of memory\n"); rc = 1; }
            for (int i = 0; rc == 0 && i < n; i++) fill_row(&t, i, runs[i], runs[base], &cats, &scopes, detail);
            t.n_rows = n;
            if (rc == 0 && csv && write_csv(&t, csv)) { fprintf(stderr, "dpmem-report: %s: cannot write\n", shown(csv)); rc = 1; }
            if (rc == 0 && json && write_json(&t, json)) { fprintf(stderr, "dpmem-report: %s: cannot write\n", shown(json)); rc = 1; }
        }
        if (rc == 0 && charts) {
            mkdir(charts, 0777);
            struct stat st;
            if (stat(charts, &st) || !S_ISDIR(st.st_mode)) { fprintf(stderr, "dpmem-report: --charts %s: not a directory\n", shown(charts)); rc = 1; }
            else if (charts_write(runs, n, base, cats.v, cats.n, scopes.v, scopes.n, charts, err, sizeof err)) {
                fprintf(stderr, "dpmem-report: %s\n", shown(err));
                rc = 1;
            }
        }
    }
    for (int c = 0; c < t.n_cols; c++) free(t.cols[c]);
    for (size_t k = 0; t.cells && k < (size_t)t.cap_cols * n; k++) free(t.cells[k].text);
    free(t.cols); free(t.cells); free(cats.v); free(scopes.v);
    namemap_free(&t.by_name); namemap_free(&cats.seen); namemap_free(&scopes.seen);
    for (int i = 0; i < computed; i++) runstats_free(runs[i]);
    for (int i = 0; i < n; i++) free(runs[i]);
    for (int i = 0; i < opened; i++) dpmem_log_close(&logs[i]);
    free(runs); free(logs);
    return rc;
}
