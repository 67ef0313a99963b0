/* ranks.c — per-rank tables of data-parallel runs (see ranks.h). */
#include "ranks.h"
#include "shown.h"
#include "units.h"

#include <stdlib.h>
#include <string.h>

static int meta_int(const RunStats *r, const char *key, int dflt) {
    const char *v = dpmem_log_meta(r->log, key);
    return v && *v ? atoi(v) : dflt;
}

/* Median time (ns) of the scope named `name` in a run (per timed step), 0 when it has none. */
static double scope_median_ns(const RunStats *r, const char *name) {
    for (uint32_t s = 0; s < r->log->n_strings; s++)
        if (r->scopes[s].count && !strcmp(r->log->strings[s], name)) return r->scopes[s].times.median;
    return 0;
}

/* A rank's allreduce time per step (ns): the trainer's own phase "allreduce" where its log says it (META
   timing.allreduce_ms: every collective's time, waits included, the median its table prints), else the
   median of the scope "allreduce" (*from_phase 0). */
static double allreduce_ns(const RunStats *r, int *from_phase) {
    const char *v = dpmem_log_meta(r->log, "timing.allreduce_ms");
    char *end = NULL;
    const double ms = v && *v ? strtod(v, &end) : 0;
    *from_phase = v && *v && end && !*end && ms >= 0;
    return *from_phase ? ms * 1e6 : scope_median_ns(r, "allreduce");
}

/* The table's units, chosen from its values (units.h): one for the peaks, one for the times. */
typedef struct { Unit mem, time; } RankUnits;

static void row(FILE *out, const RankUnits *u, const char *label, uint64_t peak, double step_ns, double ar_ns) {
    char m[32], s[32], a[32];
    fprintf(out, "  %-8s %16llu %12s %12s %14s\n", label, (unsigned long long)peak, fmt_in_unit(m, sizeof m, (double)peak, u->mem, 1),
            fmt_in_unit(s, sizeof s, step_ns, u->time, 0), fmt_in_unit(a, sizeof a, ar_ns, u->time, 0));
}

/* "NAME UNIT" right-aligned in w terminal columns (a UTF-8 "µs" is one column, two bytes). */
static void head(FILE *out, const char *name, const char *unit, int w) {
    char h[64];
    int cols = 0;
    snprintf(h, sizeof h, "%s %s", name, unit);
    for (const char *p = h; *p; p++) cols += ((unsigned char)*p & 0xC0) != 0x80;
    fprintf(out, " %*s%s", w > cols ? w - cols : 0, "", h);
}

void ranks_print(RunStats **runs, int n, FILE *out) {
    char *done = calloc((size_t)n, 1);
    if (!done) return;
    for (int i = 0; i < n; i++) {
        const int world = meta_int(runs[i], "comm.world_size", 1);
        if (done[i] || world < 2) continue;
        const char *run = dpmem_log_meta(runs[i]->log, "run");
        int *member = calloc((size_t)world, sizeof *member);   /* index+1 of each rank's run */
        if (!member) break;
        int present = 0, dup = 0;
        for (int j = i; j < n; j++) {
            const char *rj = dpmem_log_meta(runs[j]->log, "run");
            if (done[j] || meta_int(runs[j], "comm.world_size", 1) != world || (run ? !rj || strcmp(run, rj) : rj != NULL)) continue;
            const int rank = meta_int(runs[j], "comm.rank", -1);
            done[j] = 1;
            if (rank < 0 || rank >= world) continue;
            if (member[rank]) { dup = 1; continue; }
            member[rank] = j + 1;
            present++;
        }
        fprintf(out, "\n== ranks of %s: %d of %d ranks' logs%s\n", run ? shown(run) : "(unnamed run)", present, world,
                present < world ? " (the job's sums below lack the missing ranks)" : "");
        if (dup) fprintf(out, "   warning: two logs claim the same rank (logs of two jobs?): the first of each is used\n");
        double mv[2 * 64 + 1], tv[2 * 64];   /* the units: from the ranks' peaks (and their sum), steps and allreduces */
        size_t nm = 0, ntv = 0;
        uint64_t total = 0;
        int phase = 0, from_phase;
        for (int r = 0; r < world; r++) {
            if (!member[r]) continue;
            const RunStats *s = runs[member[r] - 1];
            total += s->peak;
            if (nm < 128) mv[nm++] = (double)s->peak;
            if (ntv < 128) { tv[ntv++] = runstats_step_median_ns(s); tv[ntv++] = allreduce_ns(s, &from_phase); }
            phase |= from_phase;
        }
        mv[nm++] = (double)total;
        RankUnits u = { byte_unit_col(mv, nm), time_unit_col(tv, ntv) };
        fprintf(out, "  %-8s %16s", "rank", "peak bytes");
        head(out, "peak", u.mem.name, 12); head(out, "step", u.time.name, 12); head(out, "allreduce", u.time.name, 14);
        fprintf(out, "\n");
        fprintf(out, "  (times: medians per step over the timed steps)\n");
        if (phase) fprintf(out, "  (allreduce: the trainer's phase of that name, as its table prints it: every collective's time, waits "
                                "included; META timing.allreduce_ms)\n");
        uint64_t max_peak = 0, sum_peak = 0;
        double max_step = 0, max_ar = 0;
        for (int r = 0; r < world; r++) {
            if (!member[r]) continue;
            const RunStats *s = runs[member[r] - 1];
            const double step = runstats_step_median_ns(s), ar = allreduce_ns(s, &from_phase);
            char label[16];
            snprintf(label, sizeof label, "%d", r);
            row(out, &u, label, s->peak, step, ar);
            if (s->peak > max_peak) max_peak = s->peak;
            sum_peak += s->peak;
            if (step > max_step) max_step = step;
            if (ar > max_ar) max_ar = ar;
        }
        row(out, &u, "max", max_peak, max_step, max_ar);
        char sm[32];
        fprintf(out, "  %-8s %16llu %12s %12s %14s   (the job's memory)\n", "sum", (unsigned long long)sum_peak,
                fmt_in_unit(sm, sizeof sm, (double)sum_peak, u.mem, 1), "-", "-");
        free(member);
    }
    free(done);
}
