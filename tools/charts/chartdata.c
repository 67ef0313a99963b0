/* chartdata.c — see chartdata.h. */
#include "chartdata.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "read/csvread.h"
#include "palette.h"

/* The OOM post-mortem of a run: the first OOM event's request and live bytes by category. */
static void read_oom(ChartRun *r) {
    const RunStats *rs = r->rs;
    if (!rs || !rs->n_oom || !rs->oom[0]) return;
    const DpmemLog *L = r->log;
    DpmemEvent e;
    runstats_oom_event(rs, 0, &e);
    r->oom_cat = calloc((size_t)L->n_cats + 1, sizeof *r->oom_cat);
    if (!r->oom_cat) return;
    r->have_oom = 1;
    r->oom_request = dpmem_ev_u64(&e, 0);
    uint64_t device_total = dpmem_ev_u64(&e, 16);
    uint32_t ns = dpmem_ev_u32(&e, 24), nc = dpmem_ev_u32(&e, 28), q = 40 + (ns * 4 + 7) / 8 * 8;
    for (uint32_t i = 0; i < nc && q + 16 * i + 16 <= e.n; i++) {
        int32_t c = dpmem_log_category_index(L, dpmem_log_string(L, dpmem_ev_u32(&e, q + 16 * i)));
        uint64_t live = dpmem_ev_u64(&e, q + 16 * i + 8);
        r->oom_cat[c >= 0 ? (uint32_t)c : L->n_cats] += live;
        r->oom_live += live;
    }
    if (!(r->limit > 0) && device_total) r->limit = (double)device_total;
}

/* The fields every source fills the same way, from the log. */
static void from_log(ChartRun *r, const DpmemLog *L, const RunStats *rs) {
    r->log = L;
    r->rs = rs;
    runmeta_of(&r->meta, L);
    r->limit = r->meta.mem_limit;
    r->step_ms = r->step_lo_ms = r->step_hi_ms = r->trust_bound_pct = NAN;
    if (rs && !r->meta.plan && runstats_step_mean_ns(rs) > 0) {
        r->step_ms = runstats_step_mean_ns(rs) / 1e6;
        snprintf(r->step_what, sizeof r->step_what, "mean");
    }
    read_oom(r);
}

/* The one config.* key in which the runs differ, when every value is a number: dpmem-report's
   sweep (a suite's sweep comes with its key in results.csv). */
static const char *sweep_key_of(RunStats **runs, int n) {
    if (n < 2) return NULL;
    const char *found = NULL;
    const DpmemLog *L0 = runs[0]->log;
    for (int i = 0; i < n; i++) {
        const DpmemLog *L = runs[i]->log;
        for (uint32_t m = 0; m < L->n_meta; m++) {
            const char *k = dpmem_log_string(L, L->meta[m].key);
            if (strncmp(k, "config.", 7) != 0) continue;
            const char *v0 = dpmem_log_meta(L0, k);
            int differs = 0;
            for (int j = 0; j < n && !differs; j++) {
                const char *vj = dpmem_log_meta(runs[j]->log, k);
                differs = !v0 || !vj || strcmp(v0, vj) != 0;
            }
            if (!differs || (found && strcmp(found, k) == 0)) continue;
            if (found) return NULL;   /* two keys differ: not a one-value sweep */
            found = k;
        }
    }
    if (!found) return NULL;
    for (int j = 0; j < n; j++) {
        const char *v = dpmem_log_meta(runs[j]->log, found);
        char *end;
        if (!v || !*v || (strtod(v, &end), *end)) return NULL;
    }
    return found;
}

int chartset_from_stats(ChartSet *cs, RunStats **runs, int n, char *err, size_t errlen) {
    memset(cs, 0, sizeof *cs);
    cs->run = calloc((size_t)(n > 0 ? n : 1), sizeof *cs->run);
    if (!cs->run) { snprintf(err, errlen, "out of memory"); return -1; }
    cs->n = n;
    cs->base = -1;
    const char *key = sweep_key_of(runs, n);
    if (key) snprintf(cs->sweep_key, sizeof cs->sweep_key, "%s", key + 7);
    char common[64] = "";
    for (int i = 0; i < n; i++) {
        ChartRun *r = &cs->run[i];
        snprintf(r->name, sizeof r->name, "%s", runs[i]->name);
        method_of_log(runs[i]->log, r->name, r->method, sizeof r->method);
        if (i == 0) snprintf(common, sizeof common, "%s", r->method);
        else if (strcmp(common, r->method)) snprintf(common, sizeof common, "runs");
        r->status = runs[i]->n_oom ? RUN_OOM : RUN_OK;
        from_log(r, runs[i]->log, runs[i]);
        if (key) snprintf(r->value, sizeof r->value, "%s", dpmem_log_meta(runs[i]->log, key));
    }
    /* a sweep of dpmem-report's logs is one series: the runs differ in the swept value only */
    for (int i = 0; key && i < n; i++) snprintf(cs->run[i].method, sizeof cs->run[i].method, "%s", common);
    return 0;
}

/* Opens and reduces one log into the set's own arrays. */
static int open_log(ChartSet *cs, const char *path, char *err, size_t errlen) {
    DpmemLog *L = &cs->logs[cs->n_logs];
    if (dpmem_log_open(L, path, err, errlen)) return -1;
    dpmem_log_warn(L, "dpmem-charts");
    if (runstats_compute(&cs->stats[cs->n_logs], L)) {
        snprintf(err, errlen, "%s", dpmem_log_error(L) ? dpmem_log_error(L) : "out of memory");
        dpmem_log_close(L);
        return -1;
    }
    cs->n_logs++;
    return 0;
}

int chartset_from_logs(ChartSet *cs, const char *const *paths, int n, char *err, size_t errlen) {
    memset(cs, 0, sizeof *cs);
    ChartSet tmp = { 0 };
    tmp.logs = calloc((size_t)n, sizeof *tmp.logs);
    tmp.stats = calloc((size_t)n, sizeof *tmp.stats);
    RunStats **rp = calloc((size_t)n, sizeof *rp);
    if (!tmp.logs || !tmp.stats || !rp) { free(tmp.logs); free(tmp.stats); free(rp); snprintf(err, errlen, "out of memory"); return -1; }
    for (int i = 0; i < n; i++) {
        if (open_log(&tmp, paths[i], err, errlen)) { free(rp); chartset_free(&tmp); return -1; }
        rp[i] = &tmp.stats[i];
    }
    int rc = chartset_from_stats(cs, rp, n, err, errlen);
    free(rp);
    cs->logs = tmp.logs; cs->stats = tmp.stats; cs->n_logs = tmp.n_logs;
    if (rc) chartset_free(cs);
    return rc;
}

/* ---- a results folder ----------------------------------------------------------------------- */

static int exists(const char *p) { return p && *p && access(p, R_OK) == 0; }

/* The first column of the list that the row fills with a number; NAN when none. */
static double first_number(const Csv *c, int row, const char *const *cols, int n, int *which) {
    for (int i = 0; i < n; i++) {
        const char *v = csv_get(c, row, csv_col(c, cols[i]));
        char *end;
        double x = *v ? strtod(v, &end) : NAN;
        if (*v && !*end && isfinite(x)) { if (which) *which = i; return x; }
    }
    return NAN;
}

int chartset_from_results(ChartSet *cs, const char *dir, char *err, size_t errlen) {
    memset(cs, 0, sizeof *cs);
    char path[4096];
    snprintf(path, sizeof path, "%s/results.csv", dir);
    Csv c;
    cs->base = -1;
    if (csv_read(&c, path, err, errlen)) return -1;
    int rows = c.n_rows - 1;
    cs->run = calloc((size_t)(rows > 0 ? rows : 1), sizeof *cs->run);
    cs->logs = calloc((size_t)(rows > 0 ? rows : 1), sizeof *cs->logs);
    cs->stats = calloc((size_t)(rows > 0 ? rows : 1), sizeof *cs->stats);
    if (!cs->run || !cs->logs || !cs->stats) { csv_free(&c); chartset_free(cs); snprintf(err, errlen, "out of memory"); return -1; }
    int c_exp = csv_col(&c, "experiment"), c_run = csv_col(&c, "run"), c_file = csv_col(&c, "file"), c_status = csv_col(&c, "status");
    int c_key = csv_col(&c, "sweep_key"), c_val = csv_col(&c, "sweep_value");
    if (c_exp < 0 && c_run < 0) { csv_free(&c); chartset_free(cs); snprintf(err, errlen, "%s: neither an experiment nor a run column: not the suite's results table", path); return -1; }
    static const char *const times[] = { "step_median_ms", "step_mean_ms" };
    /* the rounds' min..max first (--repeat N: the time is their median, the steps' quartiles are the
       first round's), then a process's own spread */
    static const char *const spread[][2] = { { "step_median_ms_repeat_min", "step_median_ms_repeat_max" }, { "step_q1_ms", "step_q3_ms" },
                                             { "step_p25_ms", "step_p75_ms" }, { "step_min_ms", "step_max_ms" } };
    int c_rep = csv_col(&c, "repeats"), c_trust = csv_col(&c, "step_vs_baseline_trust");
    static const char *const bound_col[] = { "step_vs_baseline_trust_bound_pct" };
    for (int row = 1; row < c.n_rows; row++) {
        const char *exp = csv_get(&c, row, c_exp), *run = csv_get(&c, row, c_run), *status = csv_get(&c, row, c_status);
        const char *key = csv_get(&c, row, c_key), *val = csv_get(&c, row, c_val), *file = csv_get(&c, row, c_file);
        if (!*exp) exp = run;
        if (!*exp || !strcmp(status, "missing") || !strcmp(status, "skipped")) continue;   /* never ran */
        RunStatus st = !*status || !strcmp(status, "ok") ? RUN_OK : !strcmp(status, "oom") ? RUN_OOM : RUN_FAILED;
        int dup = -1;
        for (int k = 0; k < cs->n && dup < 0; k++)
            if (!strcmp(cs->run[k].name, exp) && !strcmp(cs->run[k].value, val)) dup = k;
        if (dup >= 0 && (cs->run[dup].status == RUN_OK || st != RUN_OK)) continue;   /* a repeat: the first that ran */
        if (*key) snprintf(cs->sweep_key, sizeof cs->sweep_key, "%s", key);
        /* the log: as the table names it, moved with the folder, by run name, by experiment */
        char cand[4][4096];
        const char *base = strrchr(file, '/');
        snprintf(cand[0], sizeof cand[0], "%s", file);
        snprintf(cand[1], sizeof cand[1], "%s/%s", dir, base ? base + 1 : file);
        snprintf(cand[2], sizeof cand[2], "%s/%s.log", dir, run);
        if (*val) snprintf(cand[3], sizeof cand[3], "%s/%s-%s%s.log", dir, exp, key, val);
        else snprintf(cand[3], sizeof cand[3], "%s/%s.log", dir, exp);
        const char *logpath = NULL;
        for (int k = 0; k < 4 && !logpath; k++)
            if ((k != 1 || *file) && (k != 2 || *run) && exists(cand[k])) logpath = cand[k];
        if (!logpath && st == RUN_OK) {
            snprintf(err, errlen, "%s: the log of %s%s%s is not in %s (results.csv says file '%s')", path, exp, *val ? " at " : "", val, dir, file);
            csv_free(&c);
            chartset_free(cs);
            return -1;
        }
        ChartRun *r = dup >= 0 ? &cs->run[dup] : &cs->run[cs->n];
        if (dup >= 0) { free(r->oom_cat); memset(r, 0, sizeof *r); }
        snprintf(r->name, sizeof r->name, "%s", exp);
        snprintf(r->method, sizeof r->method, "%s", exp);
        snprintf(r->value, sizeof r->value, "%s", val);
        r->status = st;
        r->step_ms = r->step_lo_ms = r->step_hi_ms = r->trust_bound_pct = NAN;
        if (logpath) {
            if (open_log(cs, logpath, err, errlen)) { csv_free(&c); chartset_free(cs); return -1; }
            from_log(r, &cs->logs[cs->n_logs - 1], &cs->stats[cs->n_logs - 1]);
        }
        /* the table's step time wins over the log's (it may be a median without warm-up); an empty
           or absent one means the run has no time (a plan run) */
        int which = 0;
        double t = first_number(&c, row, times, 2, &which);
        r->step_ms = r->meta.plan || st != RUN_OK ? NAN : t;
        if (isfinite(r->step_ms)) {
            snprintf(r->step_what, sizeof r->step_what, "%s", which == 0 ? "median" : "mean");
            r->repeats = c_rep >= 0 ? atoi(csv_get(&c, row, c_rep)) : 0;
            if (r->repeats < 2) r->repeats = 0;
            snprintf(r->trust, sizeof r->trust, "%s", c_trust >= 0 ? csv_get(&c, row, c_trust) : "");
            r->trust_bound_pct = first_number(&c, row, bound_col, 1, NULL);
            for (size_t k = 0; k < sizeof spread / sizeof spread[0] && !isfinite(r->step_lo_ms); k++) {
                double lo = first_number(&c, row, &spread[k][0], 1, NULL), hi = first_number(&c, row, &spread[k][1], 1, NULL);
                static const char *const what[] = { "min..max over the rounds", "q1..q3 over the steps", "p25..p75 over the steps",
                                                     "min..max over the steps" };
                if (isfinite(lo) && isfinite(hi) && lo <= r->step_ms && r->step_ms <= hi) {
                    r->step_lo_ms = lo; r->step_hi_ms = hi;
                    snprintf(r->step_spread, sizeof r->step_spread, "%s", what[k]);
                }
            }
        }
        if (dup < 0) cs->n++;
    }
    csv_free(&c);
    if (cs->n == 0) { chartset_free(cs); snprintf(err, errlen, "%s: no run in the table", path); return -1; }
    return 0;
}

void chartset_free(ChartSet *cs) {
    for (int i = 0; cs->run && i < cs->n; i++) free(cs->run[i].oom_cat);
    for (int i = 0; i < cs->n_logs; i++) { runstats_free(&cs->stats[i]); dpmem_log_close(&cs->logs[i]); }
    free(cs->run); free(cs->logs); free(cs->stats);
    memset(cs, 0, sizeof *cs);
}

/* ---- questions the charts ask --------------------------------------------------------------- */

int chartset_baseline(const ChartSet *cs, int i) {
    if (cs->base >= 0 && cs->base < cs->n) return cs->base;
    for (int k = 0; k < cs->n; k++)
        if (cs->run[k].status == RUN_OK && cs->run[k].rs && !strcmp(cs->run[k].method, "vanilla") && !strcmp(cs->run[k].value, cs->run[i].value)) return k;
    for (int k = 0; k < cs->n; k++)
        if (cs->run[k].status == RUN_OK && cs->run[k].rs && !strcmp(cs->run[k].value, cs->run[i].value)) return k;
    return -1;
}

uint64_t chartrun_at_peak(const ChartRun *r, const char *category) {
    if (!r->rs) return 0;
    if (r->status != RUN_OK) {
        int32_t c = dpmem_log_category_index(r->log, category);
        return r->have_oom && c >= 0 ? r->oom_cat[c] : 0;
    }
    return runstats_at_peak(r->rs, category);
}

uint64_t chartrun_own_peak(const ChartRun *r, const char *category) {
    if (!r->rs) return 0;
    int32_t c = dpmem_log_category_index(r->log, category);
    return c >= 0 ? r->rs->cat_peak[c] : 0;
}

int chartset_categories(const ChartSet *cs, const char **out, int max, int own) {
    int n = 0;
    for (int i = 0; i < cs->n; i++) {
        const DpmemLog *L = cs->run[i].log;
        for (uint32_t c = 0; L && c < L->n_cats; c++) {
            uint64_t v = own ? chartrun_own_peak(&cs->run[i], L->cats[c]) : chartrun_at_peak(&cs->run[i], L->cats[c]);
            if (!v) continue;
            int seen = 0;
            for (int k = 0; k < n && !seen; k++) seen = !strcmp(out[k], L->cats[c]);
            if (!seen && n < max) out[n++] = L->cats[c];
        }
    }
    /* the fixed order: the known categories first, the others by name */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0; j--) {
            int a = dpmem_known_category(out[j - 1]), b = dpmem_known_category(out[j]);
            int gt = (a < 0 && b >= 0) || (a >= 0 && b >= 0 && a > b) || (a < 0 && b < 0 && strcmp(out[j - 1], out[j]) > 0);
            if (!gt) break;
            const char *t = out[j]; out[j] = out[j - 1]; out[j - 1] = t;
        }
    return n;
}
