/* test_comm_mpi.c — data-parallel training over MPI (samples/llama/comm.h) through the samples as a user
   runs them: `mpirun -np 2 build/train_X ...` against the same logical batch in one process.
   Each run trains 3 steps of the tiny model (1 thread a rank) with plain SGD at lr 1 and saves it
   (f32); u = max|w_1 − w_0| is the single process's update (w_0: the same run at lr 0), and
     - σ = 0, every --norm × --clip, vanilla, LoRA, Poisson sampling (a token file) and a tied model:
       max|w_2ranks − w_1| ≤ 1e-4·u (fp32 sums in another order; a rank's shard lost, doubled or
       not clipped moves the weights by ~u);
     - σ = 1: the ranks hold identical parameters (the trainer checks a hash of them and says so) and
       they equal the single process's (≤ 1e-4·u): the noise is added once, the same stream;
     - the plan of one rank (--device plan --ranks 2) is rank 0's measured peak, byte for byte;
     - per-rank logs run.rank0.log, run.rank1.log with META comm.rank / comm.world_size; the merged
       report's per-rank peaks, max and sum equal each log's own report; one trace with a process
       per rank; the suite's --ranks 2 --plan --check exact for vanilla, dpsgd, flash and LoRA;
     - a rank that fails (rank 1 out of memory: its own --mem-limit) or is killed (a CPU-time limit:
       SIGKILL) ends the job with a non-zero exit within seconds, and rank 0's log stays readable;
     - bad command lines: --ranks that is not the job's size, --ranks without mpirun outside a plan,
       a batch that does not divide among the ranks; ranks started with another --heads (the same
       parameter count), --precision, --checkpoint-activations, noise multiplier or noise seed stop
       before the first step, each naming the field and its own value; --secure-seed on 2 ranks
       ends with identical parameters (rank 0's seed is the job's).
   SKIP (77) when mpirun is missing. Binaries through DPMEM_BUILD; mpirun may run as root here
   (OMPI_ALLOW_RUN_AS_ROOT*); LeakSanitizer is off in the ranks (OpenMPI's own allocations at exit). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_dp_common.h"
#include "test_saved_model.h"
#include "test_mpi_launch.h"

static const char *MPIRUN = "mpirun --oversubscribe -np 2";

/* A command line from a format with three strings (tests/test_mpi_launch.h's sh). */
static int shf(const char *fmt, const char *a, const char *b, const char *c) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, fmt, a, b, c);
    return sh(cmd);
}

static const char *COMMON = "--model tiny --seq-len 16 --steps 3 --threads 1 --seed 5 --optimizer sgd --weight-decay 0 "
                            "--warmup-steps 0 --quiet --save-dtype f32";

/* prog with args, in one process (np 1) or two ranks, saved as tmp/name; 0 and the model, or -1. */
static int train(const char *prog, const char *args, int np, const char *name, Model *m) {
    char line[2048];
    snprintf(line, sizeof line, "%s%s%s/%s %s --save %s", np > 1 ? MPIRUN : "", np > 1 ? " " : "", B, prog, COMMON, name);
    int rc = shf("%s %s%s", line, args, "");
    CHECK(rc == 0, "%s %s (np %d): exit %d\n%.3000s", prog, args, np, rc, out);
    if (rc) return -1;
    char dir[256];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    return load(dir, m);
}

/* The same configuration in one process and in two ranks: weights within 1e-4 of the update. */
static void same(const char *prog, const char *args, const char *what) {
    Model w0, w1, w2;
    char a0[1024];
    snprintf(a0, sizeof a0, "%s --lr 0", args);
    if (train(prog, a0, 1, "w0", &w0)) return;
    if (train(prog, args, 1, "w1", &w1)) { unload(&w0); return; }
    if (train(prog, args, 2, "w2", &w2)) { unload(&w0); unload(&w1); return; }
    const double u = maxdiff(&w1, &w0), e = maxdiff(&w2, &w1);
    CHECK(u > 1e-4, "%s: the update is %g (the comparison would say nothing)", what, u);
    CHECK(e >= 0 && e <= 1e-4 * u, "%s: 2 ranks vs 1 process: max |w2 - w1| = %g, update %g", what, e, u);
    if (e >= 0 && e <= 1e-4 * u) printf("ok   %-44s 2 ranks = 1 process: max diff %.3g, update %.3g\n", what, e, u);
    unload(&w0); unload(&w1); unload(&w2);
}

static long long peak_of(const char *text) {
    const char *p = strstr(text, "peak tagged memory: ");
    return p ? atoll(p + 20) : -1;
}

int main(void) {
    const int begun = mpi_test_begin("test_comm_mpi", "data parallelism");
    if (begun) return begun;

    /* a token file for Poisson sampling (it draws rows of the dataset) */
    {
        char path[256];
        snprintf(path, sizeof path, "%s/tok.bin", tmp);
        FILE *f = fopen(path, "wb");
        for (int i = 0; f && i < 4096; i++) fputc((i * 131 + i / 7) % 251, f);
        if (f) fclose(f);
    }
    /* σ = 0: every method, two ranks = one process */
    same("train_vanilla", "--batch-size 4 --lr 1", "vanilla (batch 4)");
    same("train_vanilla", "--batch-size 4 --grad-accum 2 --lr 1", "vanilla (batch 4, 2 accumulated)");
    static const char *norms[] = { "direct", "ghost", "flash", "mixed" }, *clips[] = { "bk", "twopass" };
    char args[512], what[128];
    for (int n = 0; n < 4; n++)
        for (int c = 0; c < 2; c++) {
            snprintf(args, sizeof args, "--norm %s --clip %s --batch-size 8 --max-physical-batch-size 2 --noise-multiplier 0 "
                     "--max-grad-norm 0.1 --lr 1", norms[n], clips[c]);
            snprintf(what, sizeof what, "%s+%s (logical 8, physical 2)", norms[n], clips[c]);
            same("train_dpsgd", args, what);
        }
    same("train_lora", "--lora-rank 4 --batch-size 4 --noise-multiplier 0 --max-grad-norm 0.1 --lr 1", "LoRA (flash+bk)");
    /* bf16: the base in bf16 alone, the adapters unmerged beside it; --save merges them into the saved
       fp32 tensors, and the ranks' hash covers the bf16 base and the adapters */
    same("train_lora", "--lora-rank 4 --precision bf16 --batch-size 4 --noise-multiplier 0 --max-grad-norm 0.1 --lr 1",
         "LoRA bf16 (base in bf16 alone)");
    /* (a given --noise-seed: without one, each run draws its own seed, so its own rows and noise) */
    same("train_flash", "--poisson --data tok.bin --vocab 256 --batch-size 8 --max-physical-batch-size 4 --noise-multiplier 0 "
                        "--max-grad-norm 0.1 --lr 1 --noise-seed 11", "Poisson sampling (token file)");
    same("train_flash", "--tie-embeddings --batch-size 4 --noise-multiplier 0 --max-grad-norm 0.1 --lr 1", "tied embeddings (flash+bk)");
    /* σ = 1: identical on every rank, and the single process's noise */
    same("train_flash", "--batch-size 4 --noise-multiplier 1 --max-grad-norm 0.1 --lr 1 --noise-seed 11", "sigma 1: the same noise as 1 process");
    /* the default seed (getrandom(), rank 0's broadcast): one noise stream for the job */
    int rc = shf("%s %s/train_flash --model tiny --seq-len 16 --steps 2 --threads 1 --batch-size 4 --noise-multiplier 1 --log run.log",
                MPIRUN, B, "");
    CHECK(rc == 0 && strstr(out, "all 2 ranks hold identical parameters (hash "), "sigma 1: no identical-parameters line: %.2000s", out);
    char path[512];
    for (int r = 0; r < 2; r++) {
        snprintf(path, sizeof path, "%s/run.rank%d.log", tmp, r);
        CHECK(access(path, R_OK) == 0, "no per-rank log %s", path);
    }
    char meta_cmd[1024];
    snprintf(meta_cmd, sizeof meta_cmd, "%s/dpmem-trace run.rank1.log -o -", B);
    rc = shf("%s | grep -o '\"comm.[a-z_]*\":\"[^\"]*\"' | tr '\\n' ' '", meta_cmd, "", "");
    CHECK(strstr(out, "\"comm.rank\":\"1\"") && strstr(out, "\"comm.world_size\":\"2\"") && strstr(out, "\"comm.backend\":\"mpi\""),
          "rank 1's log lacks its META comm.*: %s", out);
    /* the merged report: its per-rank rows, max and sum are the per-rank logs' own peaks */
    {
        long long peak[2] = { -1, -1 };
        for (int r = 0; r < 2; r++) {
            char one[512];
            snprintf(one, sizeof one, "%s/dpmem-report run.rank%d.log", B, r);
            rc = shf("%s | sed -n 's/^peak total: .*(\\([0-9]*\\) bytes).*/\\1/p'", one, "", "");
            peak[r] = rc == 0 ? atoll(out) : -1;
        }
        char both[512];
        snprintf(both, sizeof both, "%s/dpmem-report run.rank0.log run.rank1.log", B);
        rc = shf("%s | awk '/^== /{on = /^== ranks of/} on'", both, "", "");
        char want0[64], want1[64], wmax[64], wsum[64];
        snprintf(want0, sizeof want0, "  0        %16lld", peak[0]);
        snprintf(want1, sizeof want1, "  1        %16lld", peak[1]);
        snprintf(wmax, sizeof wmax, "  max      %16lld", peak[0] > peak[1] ? peak[0] : peak[1]);
        snprintf(wsum, sizeof wsum, "  sum      %16lld", peak[0] + peak[1]);
        CHECK(rc == 0 && peak[0] > 0 && peak[1] > 0 && strstr(out, "2 of 2 ranks' logs") && strstr(out, want0) && strstr(out, want1) &&
              strstr(out, wmax) && strstr(out, wsum), "merged report: want rows '%s' '%s' '%s' '%s' in:\n%s", want0, want1, wmax, wsum, out);
        if (!failures) printf("ok   merged report: ranks' peaks %lld and %lld, max and sum as the per-rank logs say\n", peak[0], peak[1]);
        char tr[512];
        snprintf(tr, sizeof tr, "%s/dpmem-trace run.rank0.log run.rank1.log -o -", B);
        rc = shf("%s | grep -o '\"name\":\"dpmem: [^\"]*\"' | sort | tr '\\n' ' '", tr, "", "");
        CHECK(rc == 0 && strstr(out, "dpmem: train_flash [rank 0]") && strstr(out, "dpmem: train_flash [rank 1]"),
              "one trace of both ranks: want a process per rank, got: %s", out);
    }
    /* the suite: --ranks 2 runs every experiment under mpirun; --plan --check: the plan of a rank is exact */
    {
        char suite[1024];
        snprintf(suite, sizeof suite, "cd %s && DPMEM_BUILD=%s sh tools/run_experiments --model tiny --seq-len 16 --steps 1 "
                 "--batch-size 4 --physical-batch 2 --threads 1 --ranks 2 --plan --check --tolerance 0 --device cpu --quiet "
                 "--out %s/suite vanilla dpsgd flash lora >/dev/null && cd %s && cat suite/check.txt suite/flash.measured.ranks.txt",
                 getenv("PWD") ? getenv("PWD") : ".", B, tmp, tmp);
        rc = shf("%s", suite, "", "");
        CHECK(rc == 0 && strstr(out, "lora ") && !strstr(out, "MISMATCH") && strstr(out, "== ranks of flash.measured: 2 of 2"),
              "run_experiments --ranks 2 --plan --check: exit %d\n%.3000s", rc, out);
        int exact = 0;
        for (const char *q = out; (q = strstr(q, "  exact")); q++) exact++;
        CHECK(exact == 4, "run_experiments --ranks 2 --plan --check: %d of 4 experiments exact:\n%.3000s", exact, out);
    }
    /* the plan of one rank = rank 0's measured peak */
    rc = shf("%s %s/train_flash --model tiny --seq-len 32 --batch-size 8 --max-physical-batch-size 2 --steps 2 --threads 1", MPIRUN, B, "");
    long long measured = peak_of(out);
    char plan[512];
    snprintf(plan, sizeof plan, "%s/train_flash --model tiny --seq-len 32 --batch-size 8 --max-physical-batch-size 2 --steps 2 "
             "--threads 1 --device plan --ranks 2", B);
    rc = shf("%s", plan, "", "");
    long long planned = peak_of(out);
    CHECK(rc == 0 && measured > 0 && planned == measured, "plan of one rank %lld bytes, rank 0 measured %lld", planned, measured);
    if (planned == measured && measured > 0) printf("ok   plan of one rank of 2 = rank 0's measured peak = %lld bytes\n", measured);
    /* a rank that fails, and one that is killed: the job ends, rank 0's log is readable */
    rc = shf("timeout 60 mpirun --oversubscribe -np 1 %s/train_flash --model tiny --steps 1000 --threads 1 --quiet --log dead.log : "
            "-np 1 %s/train_flash --model tiny --steps 1000 --threads 1 --quiet --log dead.log --mem-limit 1M", B, B, "");
    CHECK(rc != 0 && rc != 124 && strstr(out, "rank 1 of 2 failed (exit 3)"), "a failing rank: exit %d, want non-zero without a hang "
          "and 'rank 1 of 2 failed':\n%.2000s", rc, out);
    rc = shf("timeout 60 mpirun --oversubscribe -np 1 %s/train_flash --model tiny --steps 100000 --threads 1 --quiet --log killed.log : "
            "-np 1 sh -c 'ulimit -t 2; exec %s/train_flash --model tiny --steps 100000 --threads 1 --quiet --log killed.log'", B, B, "");
    CHECK(rc != 0 && rc != 124, "a killed rank: exit %d, want non-zero without a hang:\n%.2000s", rc, out);
    rc = shf("%s/dpmem-report killed.rank0.log", B, "", "");
    CHECK(rc == 0 && strstr(out, "peak total"), "rank 0's log after rank 1 was killed is not readable: exit %d\n%.1500s", rc, out);
    /* bad command lines */
    rc = shf("%s %s/train_flash --model tiny --steps 1 --ranks 3", MPIRUN, B, "");
    CHECK(rc != 0 && strstr(out, "--ranks 3, but the job has 2 ranks"), "--ranks 3 under -np 2: exit %d: %.1000s", rc, out);
    rc = shf("%s/train_flash --model tiny --steps 1 --ranks 2", B, "", "");
    CHECK(rc == 1 && strstr(out, "plans only (--device plan)"), "--ranks without mpirun: exit %d: %s", rc, out);
    rc = shf("%s %s/train_flash --model tiny --steps 1 --batch-size 3", MPIRUN, B, "");
    CHECK(rc != 0 && strstr(out, "does not divide among 2 ranks"), "--batch-size 3 on 2 ranks: exit %d: %.1000s", rc, out);
    /* ranks started with different configurations stop before the first step, naming the first field
       that differs on each rank (the same parameter count with --heads 8 against 4, and another
       --precision, trained together and said "identical parameters") */
    {
        static const struct { const char *prog, *a, *b, *want0, *want1; } diff[] = {
            { "train_vanilla", "--heads 4 --kv-heads 4", "--heads 8 --kv-heads 8", "disagree on --heads (this rank: 4)",
              "disagree on --heads (this rank: 8)" },
            { "train_vanilla", "--precision fp32", "--precision bf16", "disagree on --precision (this rank: fp32)",
              "disagree on --precision (this rank: bf16)" },
            { "train_vanilla", "--checkpoint-activations", "", "disagree on --checkpoint-activations (this rank: 1)",
              "disagree on --checkpoint-activations (this rank: 0)" },
            { "train_flash", "--noise-multiplier 1", "--noise-multiplier 0.5", "disagree on the noise multiplier (this rank: 1)",
              "disagree on the noise multiplier (this rank: 0.5)" },
            { "train_flash", "--noise-seed 3", "--noise-seed 4", "disagree on --noise-seed (this rank: 3)",
              "disagree on --noise-seed (this rank: 4)" },
        };
        for (size_t k = 0; k < sizeof diff / sizeof diff[0]; k++) {
            char cmd[2048];
            snprintf(cmd, sizeof cmd, "timeout 120 mpirun --oversubscribe -np 1 %s/%s --model tiny --seq-len 16 --steps 2 --threads 1 "
                     "--batch-size 4 %s : -np 1 %s/%s --model tiny --seq-len 16 --steps 2 --threads 1 --batch-size 4 %s",
                     B, diff[k].prog, diff[k].a, B, diff[k].prog, diff[k].b);
            rc = shf("%s", cmd, "", "");
            CHECK(rc != 0 && rc != 124 && strstr(out, diff[k].want0) && strstr(out, diff[k].want1) && !strstr(out, "identical parameters"),
                  "ranks with '%s' and '%s': exit %d, want both ranks naming the field:\n%.2000s", diff[k].a, diff[k].b, rc, out);
        }
    }
    /* --secure-seed: one noise stream for the job (rank 0's seed; each rank drew its own before) */
    rc = shf("%s %s/train_flash --model tiny --seq-len 16 --steps 2 --threads 1 --batch-size 4 --noise-multiplier 1 --secure-seed",
            MPIRUN, B, "");
    CHECK(rc == 0 && strstr(out, "all 2 ranks hold identical parameters (hash "), "--secure-seed on 2 ranks: exit %d:\n%.2000s", rc, out);

    mpi_test_end();
    if (failures) { printf("test_comm_mpi: %d failures\n", failures); return 1; }
    printf("test_comm_mpi: OK (2 ranks = 1 process for vanilla, 8 norm x clip, LoRA, Poisson, tied; the same noise; "
           "plan per rank exact; a failing or killed rank ends the job)\n");
    return 0;
}
