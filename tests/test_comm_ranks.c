/* test_comm_ranks.c — the numbers a multi-rank run prints are the job's, and a rank started differently is
   refused before the first step (issue 44: items 1, 2, 3, 6, 7; issue 46: item 7). Two ranks under mpirun:
   - the phase table adds up: under --zero 3 the weight gathers inside the forward are in "allreduce" only,
     so every row's minimum (the rest of the step, "other", included) is >= 0 (flash and vanilla, --zero 3);
   - one figure for the collectives' time: dpmem-report's ranks table shows for rank 0 the trainer's own
     "allreduce" median (META timing.allreduce_ms), not a scope's (vanilla --zero 0, overlapped);
   - a --poisson run's loss and its per-sample norm statistics are the job's: the 2 ranks print what one
     process over the same rows prints (each rank's mean weighted by its rows; before, the mean of the ranks'
     means and rank 0's own norms);
   - tools/run_experiments --ranks 2 --zero 3 --plan --check without --threads (nor OMP_NUM_THREADS) plans the
     threads each rank mpirun starts gets (its CPU binding), not the planning process's: exact, byte for byte;
   - --save given to rank 0 alone under --zero 3 (every rank gathers there), --print-params on one rank, and
     ranks started from two different --init-from checkpoints (--zero 1) each end in one line naming the
     option, exit 1, before the first step (DPMEM_COMM_TIMEOUT=20 bounds what used to stall; the spliced
     model used to be saved with exit 0).
   SKIP (77) when mpirun is missing. Binaries through DPMEM_BUILD. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_dp_common.h"
#include "test_mpi_launch.h"

static const char *SMALL = "--model tiny --seq-len 32 --batch-size 8 --threads 1";

/* The phase table's row `name` in out: its median and min (ms). 0, or -1 when absent. */
static int phase_row(const char *text, const char *name, double *median, double *min) {
    char key[40];
    snprintf(key, sizeof key, "\n  %-16s ", name);
    const char *p = strstr(text, key);
    return p && sscanf(p + strlen(key), "%lf %lf", median, min) == 2 ? 0 : -1;
}

/* Every row of the table at least 0 (the rows add up to the step: "other" is what is left). */
static void check_rows(const char *prog, const char *what) {
    static const char *const rows[] = { "data", "forward", "loss", "backward", "clip", "noise", "optimizer_step", "zero_grad",
                                        "allreduce", "other" };
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "DPMEM_COMM_TIMEOUT=20 timeout 300 mpirun --oversubscribe -np 2 %s/%s %s --steps 5 %s", B, prog, SMALL, what);
    const int rc = sh(cmd);
    CHECK(rc == 0, "%s %s: exit %d\n%.2000s", prog, what, rc, out);
    if (rc) return;
    int bad = 0;
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        double med, min;
        if (phase_row(out, rows[k], &med, &min)) { CHECK(!strcmp(rows[k], "clip") || !strcmp(rows[k], "noise"), "%s: no row %s", prog, rows[k]); continue; }
        CHECK(min >= 0, "%s %s: the phase table's %s has min %.3f ms (< 0: a time counted in two rows)\n%.2500s", prog, what, rows[k], min, out);
        bad += min < 0;
    }
    if (!bad) printf("ok   %s 2 ranks %s: every phase row >= 0 (other too)\n", prog, what);
}

/* "loss: X (step 1)" and "mean per-sample norm Y, Z%" of a run's output. */
static int loss_and_norm(const char *text, double *loss, double *norm, double *clipped) {
    const char *l = strstr(text, "\nloss: "), *n = strstr(text, "mean per-sample norm ");
    return l && n && sscanf(l, "\nloss: %lf", loss) == 1 && sscanf(n, "mean per-sample norm %lf, %lf%%", norm, clipped) == 2 ? 0 : -1;
}

static void check_poisson(void) {
    const char *a = "--steps 2 --poisson --noise-seed 3";
    char cmd[1024];
    double l1, n1, c1, l2, n2, c2;
    snprintf(cmd, sizeof cmd, "%s/train_flash %s %s", B, SMALL, a);
    int rc = sh(cmd);
    CHECK(rc == 0 && loss_and_norm(out, &l1, &n1, &c1) == 0, "one process --poisson: exit %d, no loss or norms\n%.2000s", rc, out);
    if (rc) return;
    snprintf(cmd, sizeof cmd, "DPMEM_COMM_TIMEOUT=20 timeout 300 mpirun --oversubscribe -np 2 %s/train_flash %s %s", B, SMALL, a);
    rc = sh(cmd);
    CHECK(rc == 0 && loss_and_norm(out, &l2, &n2, &c2) == 0, "2 ranks --poisson: exit %d, no loss or norms\n%.2000s", rc, out);
    if (rc) return;
    /* printed with 6 decimals (loss) and 4 digits (norm): the same rows' sums in another order */
    CHECK(fabs(l1 - l2) <= 2e-6, "--poisson: 2 ranks print loss %.6f at step 1, one process over the same rows %.6f", l2, l1);
    CHECK(fabs(n1 - n2) <= 1e-3 * n1 && c1 == c2, "--poisson: 2 ranks print mean per-sample norm %.4g (%.0f%% clipped), one process "
          "%.4g (%.0f%%)", n2, c2, n1, c1);
    if (fabs(l1 - l2) <= 2e-6 && fabs(n1 - n2) <= 1e-3 * n1) printf("ok   --poisson 2 ranks: loss %.6f and mean norm %.4g, one process's\n", l2, n2);
}

/* The trainer's allreduce median (rank 0's table) against dpmem-report's ranks table for rank 0. */
static void check_report(void) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "DPMEM_COMM_TIMEOUT=20 timeout 300 mpirun --oversubscribe -np 2 %s/train_vanilla %s --steps 5 --log dp.log", B, SMALL);
    int rc = sh(cmd);
    double med, min;
    CHECK(rc == 0 && phase_row(out, "allreduce", &med, &min) == 0, "vanilla 2 ranks --log: exit %d, no allreduce row\n%.2000s", rc, out);
    if (rc) return;
    snprintf(cmd, sizeof cmd, "%s/dpmem-report dp.rank0.log dp.rank1.log", B);
    rc = sh(cmd);
    const char *t = strstr(out, "== ranks of"), *h = t ? strstr(t, "allreduce ") : NULL;
    char unit[8] = "";
    double v = -1;
    const char *r0 = h ? strstr(h, "\n  0 ") : NULL;
    if (h) sscanf(h, "allreduce %7s", unit);
    if (r0) sscanf(r0, "\n  0 %*s %*s %*s %lf", &v);
    const double scale = !strcmp(unit, "ms") ? 1 : !strcmp(unit, "s") ? 1e3 : !strcmp(unit, "\xC2\xB5s") ? 1e-3 : !strcmp(unit, "ns") ? 1e-6 : 0;
    CHECK(rc == 0 && scale > 0 && v >= 0, "dpmem-report: exit %d, no ranks table with rank 0's allreduce\n%.3000s", rc, out);
    if (rc || !(scale > 0) || v < 0) return;
    CHECK(fabs(v * scale - med) <= 1e-3 * med + 1.1e-3 * (scale >= 1 ? scale : 1), "rank 0's allreduce: the trainer's table %.3f ms, "
          "dpmem-report's %.3f %s (want one figure)\n%.3000s", med, v, unit, out);
    if (fabs(v * scale - med) <= 1e-3 * med + 1.1e-3 * (scale >= 1 ? scale : 1))
        printf("ok   rank 0's allreduce: the trainer's %.3f ms = dpmem-report's %.3f %s\n", med, v, unit);
}

static void check_suite_threads(void) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd %s && env -u OMP_NUM_THREADS DPMEM_BUILD=%s sh tools/run_experiments --build %s --model tiny --seq-len 64 "
             "--batch-size 4 --physical-batch 2 --steps 1 --ranks 2 --zero 3 --plan --check --tolerance 0 --device cpu --quiet "
             "--out %s/suite flash >/dev/null; cat %s/suite/check.txt", getenv("PWD") ? getenv("PWD") : ".", B, B, tmp, tmp);
    const int rc = sh(cmd);
    CHECK(strstr(out, "flash ") && strstr(out, "  exact"), "run_experiments --ranks 2 --zero 3 --plan --check (no --threads): exit %d, "
          "the plan of rank 0 is not its measured peak byte for byte:\n%.2000s", rc, out);
    if (strstr(out, "  exact")) printf("ok   run_experiments --ranks 2 --zero 3 --plan --check, no --threads: exact\n");
}

/* A job whose two ranks differ: exit 1, one line naming `option`, before the first step, no model saved. */
static void check_refused(const char *cmd, const char *option, const char *what) {
    const int rc = sh(cmd);
    const char *e = strstr(out, "the ranks disagree on ");
    CHECK(rc == 1 && e && !strncmp(e + strlen("the ranks disagree on "), option, strlen(option)) && !strstr(out, "step 1/") &&
          !strstr(out, "hold identical parameters"), "%s: exit %d (want 1), want 'the ranks disagree on %s' before any step\n%.2500s",
          what, rc, option, out);
    if (rc == 1 && e) printf("ok   %s: refused before the first step (%s)\n", what, option);
}

int main(void) {
    const int begin = mpi_test_begin("test_comm_ranks", "the multi-rank figures and refusals");
    if (begin) return begin;
    check_rows("train_flash", "--zero 3 --noise-seed 1");
    check_rows("train_vanilla", "--zero 3 --precision bf16");
    check_poisson();
    check_report();
    check_suite_threads();
    char cmd[2048];
    const char *pre = "DPMEM_COMM_TIMEOUT=20 timeout 120 mpirun --oversubscribe";
    snprintf(cmd, sizeof cmd, "%s -np 1 %s/train_vanilla %s --steps 1 --zero 3 --save saved : -np 1 %s/train_vanilla %s --steps 1 --zero 3",
             pre, B, SMALL, B, SMALL);
    check_refused(cmd, "--save", "--save on rank 0 alone, --zero 3");
    CHECK(sh("test ! -e saved/config.json") == 0, "--save on rank 0 alone: saved/config.json was written");
    snprintf(cmd, sizeof cmd, "%s -np 1 %s/train_vanilla %s --steps 1 --print-params : -np 1 %s/train_vanilla %s --steps 1", pre, B, SMALL, B, SMALL);
    check_refused(cmd, "--print-params", "--print-params on rank 0 alone");
    snprintf(cmd, sizeof cmd, "%s/train_vanilla %s --steps 1 --seed 1 --quiet --save c1 && %s/train_vanilla %s --steps 1 --seed 2 --quiet --save c2",
             B, SMALL, B, SMALL);
    int rc = sh(cmd);
    CHECK(rc == 0, "the two checkpoints: exit %d\n%.2000s", rc, out);
    snprintf(cmd, sizeof cmd, "%s -np 1 %s/train_vanilla %s --steps 1 --zero 1 --init-from c1 --save spliced : -np 1 %s/train_vanilla %s "
             "--steps 1 --zero 1 --init-from c2 --save spliced", pre, B, SMALL, B, SMALL);
    if (rc == 0) check_refused(cmd, "--init-from's weights", "--init-from c1 and c2, --zero 1");
    mpi_test_end();
    if (failures) { printf("test_comm_ranks: %d failures\n", failures); return 1; }
    printf("test_comm_ranks: OK\n");
    return 0;
}
