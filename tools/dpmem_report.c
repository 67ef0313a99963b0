/* dpmem_report.c — dpmem-report: the numbers of one or more runs as text (summary.txt style), CSV,
   JSON and charts.

   Per run: peak, the breakdown at the peak, per-scope times and memory deltas, snapshots, the largest
   buffers, OOM post-mortems, and the health checks. Across runs: a comparison table against a
   baseline run. CSV and JSON come from one table of columns (so they carry the same numbers; the
   schema is in docs/TOOLS.md). The computing is tools/runstats.c, the charts tools/charts.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "charts.h"
#include "dpmem_read.h"
#include "io_guard.h"
#include "json_out.h"
#include "namemap.h"
#include "ranks.h"
#include "runstats.h"
#include "timeline.h"
#include "units.h"

#define MAX_RUNS 64

static int fail(const char *msg, const char *arg) {
    fprintf(stderr, "dpmem-report: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    return 2;
}

static void usage(FILE *f) {
    fprintf(f,
        "usage: dpmem-report a.log [b.log ...] [--baseline NAME] [--csv F] [--json F] [--charts DIR]\n"
        "  --baseline NAME  the run the others are compared with (its run name or file; default: the first)\n"
        "  --csv F, --json F  one row / object per run (schema: docs/TOOLS.md)\n"
        "  --charts DIR     breakdown.png, tradeoff.png, timeline.png (and sweep.png) into DIR\n"
        "  -q               no text report on stdout (with --csv/--json/--charts)\n");
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

typedef struct { char *text; int is_str; } Cell;   /* text NULL: missing */
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

static void csv_field(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\n\r")) { fputs(s, f); return; }
    fputc('"', f);
    for (; *s; s++) { if (*s == '"') fputc('"', f); fputc(*s, f); }
    fputc('"', f);
}
static int write_csv(const Table *t, const char *path) {
    FILE *f = fopen(path, "w");
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
    return fclose(f) ? -1 : 0;
}

static int write_json(const Table *t, const char *path) {
    FILE *f = fopen(path, "w");
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
            else if (cell->is_str) json_write_string(f, cell->text);
            else fputs(cell->text, f);
        }
        fputs(r + 1 < t->n_rows ? "},\n" : "}\n", f);
    }
    fputs("]\n", f);
    return fclose(f) ? -1 : 0;
}

/* ---- text ---- */


static double ms(double ns) { return ns / 1e6; }

static void print_oom(const RunStats *r, uint32_t k) {
    const DpmemLog *L = r->log;
    DpmemEvent e;
    runstats_oom_event(r, k, &e);
    char b1[32], b2[32], b3[32];
    printf("  OOM: %s requested for %s (%s)", fmt_bytes(b1, sizeof b1, (double)dpmem_ev_u64(&e, 0)),
           dpmem_log_string(L, e.id), dpmem_space_name(e.aux));
    if (dpmem_ev_u64(&e, 16))   /* device_total 0: the writer had no device figures */
        printf("; device used %s of %s", fmt_bytes(b2, sizeof b2, (double)dpmem_ev_u64(&e, 8)),
               fmt_bytes(b3, sizeof b3, (double)dpmem_ev_u64(&e, 16)));
    printf("\n");
    uint32_t ns = dpmem_ev_u32(&e, 24), nc = dpmem_ev_u32(&e, 28), nt = dpmem_ev_u32(&e, 32);
    uint32_t q = 40 + (ns * 4 + 7) / 8 * 8;
    printf("       in scope:");
    for (uint32_t i = 0; i < ns; i++) printf("%s%s", i ? " > " : " ", dpmem_log_string(L, dpmem_ev_u32(&e, 40 + 4 * i)));
    printf("%s\n       live:", ns ? "" : " (none)");
    for (uint32_t i = 0; i < nc; i++)
        printf(" %s %s%s", dpmem_log_string(L, dpmem_ev_u32(&e, q + 16 * i)), fmt_bytes(b1, sizeof b1, (double)dpmem_ev_u64(&e, q + 16 * i + 8)), i + 1 < nc ? "," : "");
    printf("\n       largest:");
    for (uint32_t i = 0; i < nt; i++)
        printf(" %s %s%s", dpmem_log_string(L, dpmem_ev_u32(&e, q + 16 * nc + 16 * i)),
               fmt_bytes(b1, sizeof b1, (double)dpmem_ev_u64(&e, q + 16 * nc + 16 * i + 8)), i + 1 < nt ? "," : "");
    printf("\n");
}

static void print_run(const RunStats *r, const Names *cats) {
    const DpmemLog *L = r->log;
    char b1[32], b2[32];
    printf("== run: %s  (%s)\n", r->name, L->path);
    int any = 0;
    for (uint32_t i = 0; i < L->n_meta; i++) {
        const char *k = dpmem_log_string(L, L->meta[i].key);
        if (strncmp(k, "config.", 7) || dpmem_log_meta(L, k) != dpmem_log_string(L, L->meta[i].value)) continue;
        printf("%s%s=%s", any++ ? " " : "   config: ", k + 7, dpmem_log_string(L, L->meta[i].value));
    }
    if (any) printf("\n");
    printf("   %llu events over %.3f ms; %s\n", (unsigned long long)L->n_events, ms((double)r->span_ns),
           L->corrupt ? "CORRUPT: read up to the first bad byte" : L->closed ? "closed cleanly" : "NOT closed cleanly (cut): read up to the cut");
    printf("peak total: %s (%llu bytes) at %.3f ms\n", fmt_bytes(b1, sizeof b1, (double)r->peak), (unsigned long long)r->peak,
           ms((double)r->peak_ts));
    printf("breakdown at the peak:\n  %-22s %14s %12s %7s %14s\n", "category", "bytes", "MiB", "share", "own peak MiB");
    for (int c = 0; c < cats->n; c++) {
        int32_t i = dpmem_log_category_index(L, cats->v[c]);
        uint64_t v = i < 0 ? 0 : r->at_peak[i], own = i < 0 ? 0 : r->cat_peak[i];
        if (!own) continue;
        printf("  %-22s %14llu %12.2f %6.1f%% %14.2f\n", cats->v[c], (unsigned long long)v, v / 1048576.0,
               r->peak ? 100.0 * (double)v / (double)r->peak : 0.0, own / 1048576.0);
    }
    if (r->cat_peak[L->n_cats]) {   /* tags whose STRING the log lacks: their bytes are in the peak all the same */
        uint64_t v = r->at_peak[L->n_cats];
        printf("  %-22s %14llu %12.2f %6.1f%% %14.2f\n", "? (tag unknown)", (unsigned long long)v, v / 1048576.0,
               r->peak ? 100.0 * (double)v / (double)r->peak : 0.0, r->cat_peak[L->n_cats] / 1048576.0);
    }
    printf("scopes:\n  %-22s %8s %12s %12s %12s %12s %14s\n", "name", "count", "total ms", "mean ms", "max ms", "gpu mean ms", "mem delta MiB");
    Names sc = { 0 };
    for (uint32_t i = 0; i < L->n_strings; i++)
        if (r->scopes[i].count || r->scopes[i].gpu_count) names_add(&sc, L->strings[i]);
    if (sc.n) qsort(sc.v, (size_t)sc.n, sizeof *sc.v, cmp_scope_name);
    for (int k = 0; k < sc.n; k++) {
        int32_t i = dpmem_log_find_string(L, sc.v[k]);
        if (i < 0) continue;
        const ScopeStats *s = &r->scopes[i];
        char gpu[32] = "-", total[32] = "-", mean[32] = "-", max[32] = "-";
        if (s->gpu_count) snprintf(gpu, sizeof gpu, "%.3f", ms((double)s->gpu_total_ns / (double)s->gpu_count));
        if (!L->backwards) {   /* else the times are wrong: the health check says why */
            snprintf(total, sizeof total, "%.3f", ms((double)s->total_ns));
            snprintf(mean, sizeof mean, "%.3f", s->count ? ms((double)s->total_ns / (double)s->count) : 0.0);
            snprintf(max, sizeof max, "%.3f", ms((double)s->max_ns));
        }
        printf("  %-22s %8llu %12s %12s %12s %12s %14.2f\n", sc.v[k], (unsigned long long)s->count, total, mean, max, gpu,
               s->mem_delta / 1048576.0);
    }
    free(sc.v);
    namemap_free(&sc.seen);
    if (r->n_snaps) {
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
        printf("snapshots (MiB):\n  %-20s %10s", "label", "t ms");
        for (uint32_t c = 0; c < n_col; c++) printf(" %12.12s", L->cats[cat_at[c]]);
        if (r->has_device) printf(" %12s %12s", "untracked", "dev used");
        printf("   change vs previous\n");
        for (uint32_t i = 0; row && i < r->n_snaps; i++) {
            const SnapStats *s = &r->snaps[i];
            memcpy(prev, row, n_col * sizeof *row);
            memset(row, 0, n_col * sizeof *row);
            for (uint32_t k = 0; k < s->n; k++) row[col[s->cat[k]] - 1] = s->live[k];
            printf("  %-20.20s %10.3f", s->label, ms((double)s->ts));
            for (uint32_t c = 0; c < n_col; c++) printf(" %12.2f", row[c] / 1048576.0);
            uint64_t u = s->device_used > s->device_tracked ? s->device_used - s->device_tracked : 0;
            if (r->has_device) {
                if (s->device_total) printf(" %12.2f %12.2f", u / 1048576.0, s->device_used / 1048576.0);
                else printf(" %12s %12s", "-", "-");
            }
            printf("  ");
            if (i == 0) printf(" -");
            else {
                int changed = 0;
                for (uint32_t c = 0; c < n_col; c++) {
                    double d = ((double)row[c] - (double)prev[c]) / 1048576.0;
                    if (d != 0) { printf(" %s %+.2f", L->cats[cat_at[c]], d); changed = 1; }
                }
                const SnapStats *p = &r->snaps[i - 1];
                if (s->device_total && p->device_total) {
                    uint64_t pu = p->device_used > p->device_tracked ? p->device_used - p->device_tracked : 0;
                    if (u != pu) { printf(" untracked %+.2f", ((double)u - (double)pu) / 1048576.0); changed = 1; }
                }
                if (!changed) printf(" none");
            }
            printf("\n");
        }
        free(col); free(cat_at); free(row);
    }
    if (r->n_top) {
        printf("largest buffers (top %u by their largest allocation):\n  %-40s %14s %10s %8s %8s\n", r->n_top, "tag", "bytes", "MiB", "space", "allocs");
        for (uint32_t i = 0; i < r->n_top; i++)
            printf("  %-40s %14llu %10.2f %8s %8llu\n", L->strings[r->top[i].tag], (unsigned long long)r->top[i].bytes,
                   r->top[i].bytes / 1048576.0, dpmem_space_name(r->top[i].space), (unsigned long long)r->top[i].allocs);
    }
    for (uint32_t i = 0; i < r->n_oom && i < 4; i++) print_oom(r, i);
    printf("health:\n");
    if (L->backwards)   /* the merged order and every duration are then wrong: say so, print none */
        printf("  ERROR: timestamps go backwards %llu times (first at byte %llu): scope times and the leak check are left out\n",
               (unsigned long long)L->backwards, (unsigned long long)L->backwards_offset);
    if (r->unnamed_events)
        printf("  ERROR: %llu ALLOC/FREE events name tags the log never defines (lost STRING events): %s at the peak has no category ('?' above)\n",
               (unsigned long long)r->unnamed_events, fmt_bytes(b1, sizeof b1, (double)r->at_peak[L->n_cats]));
    if (L->backwards) {}
    else if (!r->step_scope) printf("  - no repeated scope (\"step\"): no leak check\n");
    else if (r->leak)
        printf("  WARNING: live bytes at the end of '%s' grew in each of the last %llu steps, by %s per step: a leak?\n",
               r->step_scope, (unsigned long long)(r->n_steps - 1), fmt_bytes(b1, sizeof b1, (double)r->leak_per_step));
    else printf("  ok: live bytes at the end of '%s' do not keep growing (%llu steps)\n", r->step_scope, (unsigned long long)r->n_steps);
    if (r->untracked_growth)
        printf("  WARNING: untracked device memory grew from %s to %s across the snapshots (fragmentation or an uninstrumented allocator)\n",
               fmt_bytes(b1, sizeof b1, (double)r->untracked_first), fmt_bytes(b2, sizeof b2, (double)r->untracked_last));
    else if (r->has_device) printf("  ok: untracked device memory does not keep growing\n");
    if (r->too_large)
        printf("  ERROR: %llu allocations left out: they would carry the total past 2^64 bytes (a forged or corrupt log)\n",
               (unsigned long long)r->too_large);
    if (r->n_warn) {   /* what the writer warned of, by message */
        printf("  WARNING: %llu WARN events in the log:", (unsigned long long)r->n_warn);
        for (uint32_t k = 0; k < r->n_warn_kinds; k++)
            printf("%s '%s' x%llu", k ? "," : "", dpmem_log_string(L, r->warn_kinds[k].id), (unsigned long long)r->warn_kinds[k].count);
        printf("%s\n", r->n_warn_kinds == RS_WARN_KINDS ? ", ..." : "");
    }
    if (r->unbalanced_frees) printf("  WARNING: %llu frees of more bytes than were live in their category\n", (unsigned long long)r->unbalanced_frees);
    if (r->n_oom) printf("  WARNING: %llu out-of-memory event(s)\n", (unsigned long long)r->n_oom);
    printf("\n");
}

static void print_comparison(RunStats **runs, int n, int base, const Names *cats) {
    const RunStats *b = runs[base];
    double bt = runstats_step_mean_ns(b);
    printf("== comparison (baseline: %s; memory at each run's peak, MiB)\n", b->name);
    printf("  %-20s %10s %8s", "run", "peak", "x base");
    for (int c = 0; c < cats->n; c++) printf(" %12.12s", cats->v[c]);
    printf(" %12s %8s\n", "step ms", "x base");
    for (int i = 0; i < n; i++) {
        const RunStats *r = runs[i];
        printf("  %-20.20s %10.2f %8.3f", r->name, r->peak / 1048576.0, b->peak ? (double)r->peak / (double)b->peak : 0.0);
        for (int c = 0; c < cats->n; c++) printf(" %12.2f", runstats_at_peak(r, cats->v[c]) / 1048576.0);
        double t = runstats_step_mean_ns(r);
        if (t > 0) printf(" %12.3f", ms(t));
        else printf(" %12s", "-");
        if (t > 0 && bt > 0) printf(" %8.3f\n", t / bt);
        else printf(" %8s\n", "-");
    }
    printf("  overhead vs baseline (MiB at the peak):\n");
    for (int i = 0; i < n; i++) {
        if (i == base) continue;
        printf("  %-20.20s %+10.2f %8s", runs[i]->name, ((double)runs[i]->peak - (double)b->peak) / 1048576.0, "");
        for (int c = 0; c < cats->n; c++)
            printf(" %+12.2f", ((double)runstats_at_peak(runs[i], cats->v[c]) - (double)runstats_at_peak(b, cats->v[c])) / 1048576.0);
        printf("\n");
    }
    printf("\n");
}

static void fill_row(Table *t, int row, const RunStats *r, const RunStats *b, const Names *cats, const Names *scopes) {
    const DpmemLog *L = r->log;
    put(t, row, "run", 1, "%s", r->name);
    put(t, row, "file", 1, "%s", L->path);
    put(t, row, "closed", 0, "%d", L->closed);
    put(t, row, "corrupt", 0, "%d", L->corrupt);
    put(t, row, "events", 0, "%llu", (unsigned long long)L->n_events);
    put(t, row, "span_ms", 0, "%.6f", ms((double)r->span_ns));
    put(t, row, "peak_bytes", 0, "%llu", (unsigned long long)r->peak);
    put(t, row, "peak_ms", 0, "%.6f", ms((double)r->peak_ts));
    if (b->peak) put(t, row, "peak_vs_baseline", 0, "%.6f", (double)r->peak / (double)b->peak);
    else col_index(t, "peak_vs_baseline");
    put(t, row, "steps", 0, "%llu", (unsigned long long)r->n_steps);
    double st = runstats_step_mean_ns(r), bt = runstats_step_mean_ns(b);
    if (st > 0) put(t, row, "step_mean_ms", 0, "%.6f", ms(st));
    else col_index(t, "step_mean_ms");
    if (st > 0 && bt > 0) put(t, row, "step_vs_baseline", 0, "%.6f", st / bt);
    else col_index(t, "step_vs_baseline");
    put(t, row, "end_live_bytes", 0, "%llu", (unsigned long long)r->end_live);
    char col[300];
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
        const char *fields[] = { "count", "total_ms", "mean_ms", "max_ms", "gpu_mean_ms", "mem_delta_bytes" };
        for (int f = 0; f < 6; f++) {
            snprintf(col, sizeof col, "scope.%s.%s", scopes->v[k], fields[f]);
            if (!s || (f == 4 && !s->gpu_count)) { col_index(t, col); continue; }
            switch (f) {
            case 0: put(t, row, col, 0, "%llu", (unsigned long long)s->count); break;
            case 1: put(t, row, col, 0, "%.6f", ms((double)s->total_ns)); break;
            case 2: put(t, row, col, 0, "%.6f", s->count ? ms((double)s->total_ns / (double)s->count) : 0.0); break;
            case 3: put(t, row, col, 0, "%.6f", ms((double)s->max_ns)); break;
            case 4: put(t, row, col, 0, "%.6f", ms((double)s->gpu_total_ns / (double)s->gpu_count)); break;
            default: put(t, row, col, 0, "%llu", (unsigned long long)s->mem_delta); break;
            }
        }
    }
    put(t, row, "snapshots", 0, "%u", r->n_snaps);
    put(t, row, "warnings", 0, "%llu", (unsigned long long)r->n_warn);
    put(t, row, "ooms", 0, "%llu", (unsigned long long)r->n_oom);
    put(t, row, "leak", 0, "%d", r->leak);
    put(t, row, "leak_per_step_bytes", 0, "%llu", (unsigned long long)r->leak_per_step);
    put(t, row, "untracked_growth", 0, "%d", r->untracked_growth);
    if (r->has_device) {
        put(t, row, "untracked_first_bytes", 0, "%llu", (unsigned long long)r->untracked_first);
        put(t, row, "untracked_last_bytes", 0, "%llu", (unsigned long long)r->untracked_last);
    } else { col_index(t, "untracked_first_bytes"); col_index(t, "untracked_last_bytes"); }
    for (uint32_t i = 0; i < L->n_meta; i++) {
        const char *k = dpmem_log_string(L, L->meta[i].key);
        if (strncmp(k, "config.", 7) == 0) put(t, row, k, 1, "%s", dpmem_log_meta(L, k) ? dpmem_log_meta(L, k) : "");
    }
}

int main(int argc, char **argv) {
    const char *paths[MAX_RUNS], *baseline = NULL, *csv = NULL, *json = NULL, *charts = NULL;
    int n = 0, quiet = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--baseline")) { if (!has_val) return fail("--baseline needs a run name", NULL); baseline = argv[++i]; }
        else if (!strcmp(a, "--csv")) { if (!has_val) return fail("--csv needs a file", NULL); csv = argv[++i]; }
        else if (!strcmp(a, "--json")) { if (!has_val) return fail("--json needs a file", NULL); json = argv[++i]; }
        else if (!strcmp(a, "--charts")) { if (!has_val) return fail("--charts needs a directory", NULL); charts = argv[++i]; }
        else if (!strcmp(a, "-q")) quiet = 1;
        else if (a[0] == '-' && a[1]) return fail("unknown option", a);
        else {
            if (n == MAX_RUNS) return fail("too many logs (at most 64)", NULL);
            paths[n++] = a;
        }
    }
    if (n == 0) { usage(stderr); return 2; }
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
        if (dpmem_log_open(&logs[i], paths[i], err, sizeof err)) { fprintf(stderr, "dpmem-report: %s\n", err); rc = 1; break; }
        opened++;
        dpmem_log_warn(&logs[i], "dpmem-report");
        runs[i] = malloc(sizeof *runs[i]);
        if (!runs[i] || runstats_compute(runs[i], &logs[i])) {
            if (dpmem_log_error(&logs[i])) fprintf(stderr, "dpmem-report: %s\n", dpmem_log_error(&logs[i]));
            else fprintf(stderr, "dpmem-report: %s: out of memory\n", paths[i]);
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
        if (base < 0) { fprintf(stderr, "dpmem-report: --baseline %s: no run of that name\n", baseline); rc = 2; }
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
            t.cap_cols = 64 + 2 * cats.n + 6 * scopes.n + 64;
            for (int i = 0; i < n; i++) t.cap_cols += (int)logs[i].n_meta;
            t.cols = calloc((size_t)t.cap_cols, sizeof *t.cols);
            t.cells = calloc((size_t)t.cap_cols * n, sizeof *t.cells);
            if (!t.cols || !t.cells) { fprintf(stderr, "dpmem-report: out of memory\n"); rc = 1; }
            for (int i = 0; rc == 0 && i < n; i++) fill_row(&t, i, runs[i], runs[base], &cats, &scopes);
            t.n_rows = n;
            if (rc == 0 && csv && write_csv(&t, csv)) { fprintf(stderr, "dpmem-report: %s: cannot write\n", csv); rc = 1; }
            if (rc == 0 && json && write_json(&t, json)) { fprintf(stderr, "dpmem-report: %s: cannot write\n", json); rc = 1; }
        }
        if (rc == 0 && charts) {
            mkdir(charts, 0777);
            struct stat st;
            if (stat(charts, &st) || !S_ISDIR(st.st_mode)) { fprintf(stderr, "dpmem-report: --charts %s: not a directory\n", charts); rc = 1; }
            else if (charts_write(runs, n, base, cats.v, cats.n, scopes.v, scopes.n, charts, err, sizeof err)) {
                fprintf(stderr, "dpmem-report: %s\n", err);
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
