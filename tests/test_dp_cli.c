/* test_dp_cli.c — the DP samples as a user runs them (build/train_dpsgd, train_ghost, train_flash,
   train_lora): a short run prints ε and stores it in the log (the exact value the accountant gives
   for the run's σ, sampling, steps, δ is found among the log's strings, under the key dp.epsilon):
   batches in order are accounted with no amplification (q = 1, one step per pass over the data that
   the run touches), the subsampled figure printed beside it labelled as --poisson's; with --poisson
   ε is the subsampled one (issue 37's command checked both ways); the noise seed is drawn from
   getrandom() by default (two runs save different weights) and --noise-seed makes it reproducible
   (the same weights, and a line saying ε holds only while the seed is secret); σ from
   --target-epsilon reaches the target within 0.01; --print-params of train_lora shows the base
   frozen and the adapters; every ε names its adjacency (issue 45: zero-out and replace-one, the
   accountant at σ and σ/2, for runs in order; add/remove for --poisson) and --adjacency picks the
   headline and --target-epsilon's; --secure-noise is named, logged, reproducible with --noise-seed and
   accounted for its grid; bad flags and impossible configurations give a one-line error and a
   non-zero exit. Binaries are found through DPMEM_BUILD (default "build"). */
#include "dp/accountant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_dp_common.h"


/* 1 if the two files have the same bytes (and both exist). */
static int same_file(const char *a, const char *b) {
    FILE *f = fopen(a, "rb"), *g = fopen(b, "rb");
    int same = f && g, x = 0, y = 0;
    while (same && (x = fgetc(f)) == (y = fgetc(g)) && x != EOF) {}
    same = same && x == y;
    if (f) fclose(f);
    if (g) fclose(g);
    return same;
}

/* 1 if the file contains the bytes s (with its NUL: a whole string of the log). */
static int file_has_string(const char *path, const char *s) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(n > 0 ? (size_t)n : 1);
    size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    size_t k = strlen(s) + 1;
    int found = 0;
    for (size_t i = 0; buf && i + k <= got && !found; i++) found = memcmp(buf + i, s, k) == 0;
    free(buf);
    return found;
}

int main(void) {
    static char out[1 << 16];
    char args[512], log[256], want[64];
    const char *progs[] = { "train_dpsgd", "train_ghost", "train_flash", "train_lora" };
    snprintf(log, sizeof log, "%s/test-out/dp_cli.log", build_dir());
    char mk[300];
    snprintf(mk, sizeof mk, "mkdir -p %s/test-out", build_dir());
    if (system(mk) != 0) { printf("FAIL: cannot create %s/test-out\n", build_dir()); return 1; }

    for (int i = 0; i < 4; i++) {
        remove(log);
        snprintf(args, sizeof args, "--model tiny --seq-len 16 --steps 2 --batch-size 4 --max-physical-batch-size 2 "
                 "--noise-multiplier 1.3 --dataset-size 100 --log %s", log);
        int rc = run(progs[i], args, out, sizeof out);
        /* 2 steps of 4 rows in order out of 100: each row in at most one step, no amplification */
        double eps = accountant_epsilon_for(1.3, 1.0, 1, 1e-5, NULL), eps_p = accountant_epsilon_for(1.3, 0.04, 2, 1e-5, NULL);
        snprintf(want, sizeof want, "%.9g", eps);
        char line[64], line_p[96];
        snprintf(line, sizeof line, "epsilon = %.4f", eps);
        snprintf(line_p, sizeof line_p, "with --poisson, sample rate 0.04: %.4f)", eps_p);
        CHECK(rc == 0 && strstr(out, line) && strstr(out, "no sampling amplification") && strstr(out, line_p),
              "%s: rc %d, want '%s' and '%s' in:\n%s", progs[i], rc, line, line_p, out);
        CHECK(file_has_string(log, "dp.epsilon") && file_has_string(log, want) && file_has_string(log, "sequential"),
              "%s: the log must hold dp.epsilon = %s (sequential)", progs[i], want);
        CHECK(strstr(out, "not covered by epsilon (computed on the private data without noise): the training loss") != NULL,
              "%s: the run must say which figures epsilon does not cover", progs[i]);
        CHECK(file_has_string(log, "dp.noise_multiplier") && file_has_string(log, "1.3"), "%s: dp.noise_multiplier", progs[i]);
    }
    /* the noise seed: from getrandom() by default (two runs, the same --seed: different noised weights,
       for bk and two-pass, with and without Poisson, whose draw shares the seed); --noise-seed N: the
       same weights twice, and one line saying the printed ε holds only while N is secret */
    {
        static char o[4][1 << 16];
        const char *modes[] = { "--clip bk", "--clip twopass --poisson --dataset-size 64" };
        for (int mode = 0; mode < 2; mode++) {
            char file[4][512], cmd[1024];
            int r[4];
            for (int k = 0; k < 4; k++) {
                const char *b = build_dir();
                snprintf(file[k], sizeof file[k], "%.200s/test-out/dp_cli_seed%d/model.safetensors", b, k);
                remove(file[k]);
                remove(log);
                snprintf(cmd, sizeof cmd, "--model tiny --seq-len 16 --steps 2 --batch-size 4 --noise-multiplier 5 --optimizer sgd "
                         "--lr 0.05 --seed 7 %s %s --save %.200s/test-out/dp_cli_seed%d --log %.250s", modes[mode],
                         k >= 2 ? "--noise-seed 99" : "", b, k, log);
                r[k] = run("train_flash", cmd, o[k], sizeof o[k]);
                CHECK(r[k] == 0, "train_flash %s: rc %d\n%s", cmd, r[k], o[k]);
                CHECK(file_has_string(log, k >= 2 ? "given" : "getrandom"), "%s: META dp.noise_seed must say where the seed came from",
                      cmd);
            }
            CHECK(!same_file(file[0], file[1]), "%s: two runs without --noise-seed saved the same weights (the noise is predictable)",
                  modes[mode]);
            CHECK(same_file(file[2], file[3]), "%s: two runs with --noise-seed 99 must save the same weights", modes[mode]);
            const char *say = "--noise-seed given: the noise";
            CHECK(!strstr(o[0], say) && strstr(o[2], say) && !strstr(strstr(o[2], say) + 1, say) &&
                  strstr(o[2], "the epsilon printed holds only while that seed is secret"),
                  "%s: --noise-seed must say once that epsilon holds only while the seed is secret:\n%s", modes[mode], o[2]);
        }
    }
    int rc;
    /* issue 37's command: 100 steps of 8 rows in order over 800 rows use each row once (no
       amplification: one Gaussian mechanism, ε 4.7285), where the subsampled bound at q = 0.01 says
       1.2141 and holds only with --poisson, which then prints it */
    {
        const char *cmd = "--model tiny --seq-len 4 --batch-size 8 --dataset-size 800 --steps 100 --noise-multiplier 1 --threads 1";
        char line[64];
        rc = run("train_flash", cmd, out, sizeof out);
        snprintf(line, sizeof line, "epsilon = %.4f at", accountant_epsilon_for(1.0, 1.0, 1, 1e-5, NULL));
        CHECK(rc == 0 && strstr(out, line) && strstr(out, "each row in at most 1 of them") && strstr(out, "with --poisson, sample rate 0.01: 1.2141)"),
              "train_flash %s: rc %d, want '%s' (4.7285), labelled Poisson 1.2141:\n%s", cmd, rc, line, out);
        snprintf(args, sizeof args, "%s --poisson", cmd);
        rc = run("train_flash", args, out, sizeof out);
        snprintf(line, sizeof line, "epsilon = %.4f at", accountant_epsilon_for(1.0, 0.01, 100, 1e-5, NULL));
        CHECK(rc == 0 && strstr(out, "epsilon = 1.2141 at") && strstr(out, line) && strstr(out, "(Poisson sampling;"),
              "train_flash %s: rc %d, want '%s':\n%s", args, rc, line, out);
        /* 25 steps of 8 over 80 rows: around 2.5 times, each row in at most 3 steps */
        rc = run("train_flash", "--model tiny --seq-len 4 --batch-size 8 --dataset-size 80 --steps 25 --noise-multiplier 1 --threads 1",
                 out, sizeof out);
        snprintf(line, sizeof line, "epsilon = %.4f at", accountant_epsilon_for(1.0, 1.0, 3, 1e-5, NULL));
        CHECK(rc == 0 && strstr(out, line) && strstr(out, "each row in at most 3 of them"), "25 steps of 8 over 80 rows: want '%s':\n%s", line, out);
    }
    /* issue 45: every ε names its adjacency. Issue 37's command in order: zero-out (sensitivity C, the
       accountant at σ = 1: 4.7285) first, replace-one (2C: at σ/2, 10.7255) beside it, both logged; with
       --adjacency replace-one the headline is replace-one's, also for 3 uses of each row; --poisson's
       figure is add/remove; --target-epsilon under replace-one finds twice zero-out's σ */
    {
        const char *cmd = "--model tiny --seq-len 4 --batch-size 8 --dataset-size 800 --steps 100 --noise-multiplier 1 --threads 1";
        const double z1 = accountant_epsilon_for(1.0, 1.0, 1, 1e-5, NULL), r1 = accountant_epsilon_for(0.5, 1.0, 1, 1e-5, NULL);
        char line[160], line_r[160], want_r[64];
        remove(log);
        snprintf(args, sizeof args, "%s --log %s", cmd, log);
        rc = run("train_flash", args, out, sizeof out);
        snprintf(line, sizeof line, "epsilon = %.4f at delta = 1e-05 after 100 steps under zero-out adjacency (", z1);
        snprintf(line_r, sizeof line_r, "; replace-one adjacency (one row's contents replaced by any other, sensitivity 2C): epsilon %.4f (", r1);
        snprintf(want_r, sizeof want_r, "%.9g", r1);
        CHECK(rc == 0 && fabs(z1 - 4.7285) < 5e-5 && fabs(r1 - 10.7255) < 5e-5 && strstr(out, line) && strstr(out, line_r),
              "train_flash %s: want '%s' and '%s':\n%s", cmd, line, line_r, out);
        CHECK(file_has_string(log, "dp.adjacency") && file_has_string(log, "zero-out") && file_has_string(log, "dp.epsilon_replace_one") &&
              file_has_string(log, want_r) && file_has_string(log, "dp.epsilon_zero_out"),
              "the log must hold dp.adjacency zero-out and dp.epsilon_replace_one = %s", want_r);
        snprintf(args, sizeof args, "%s --adjacency replace-one", cmd);
        rc = run("train_flash", args, out, sizeof out);
        snprintf(line, sizeof line, "epsilon = %.4f at delta = 1e-05 after 100 steps under replace-one adjacency (", r1);
        snprintf(line_r, sizeof line_r, "; zero-out adjacency (one row replaced by one that contributes nothing, sensitivity C): epsilon %.4f (", z1);
        CHECK(rc == 0 && strstr(out, line) && strstr(out, line_r), "train_flash %s: want '%s' and '%s':\n%s", args, line, line_r, out);
        rc = run("train_flash", "--model tiny --seq-len 4 --batch-size 8 --dataset-size 80 --steps 25 --noise-multiplier 1 --threads 1 "
                 "--adjacency replace-one", out, sizeof out);
        snprintf(line, sizeof line, "epsilon = %.4f at", accountant_epsilon_for(0.5, 1.0, 3, 1e-5, NULL));
        CHECK(rc == 0 && strstr(out, line) && strstr(out, "under replace-one adjacency"), "replace-one, 3 uses: want '%s':\n%s", line, out);
        snprintf(args, sizeof args, "%s --poisson", cmd);
        rc = run("train_flash", args, out, sizeof out);
        CHECK(rc == 0 && strstr(out, "epsilon = 1.2141 at delta = 1e-05 after 100 steps under add/remove adjacency (one row added or removed, "
                                     "sensitivity C"), "--poisson's epsilon must say add/remove:\n%s", out);
        double sig[2] = { 0, 0 };
        for (int k = 0; k < 2; k++) {
            rc = run("train_flash", k ? "--model tiny --seq-len 16 --steps 3 --batch-size 4 --target-epsilon 3 --dataset-size 50 --adjacency replace-one"
                                      : "--model tiny --seq-len 16 --steps 3 --batch-size 4 --target-epsilon 3 --dataset-size 50", out, sizeof out);
            const char *sg = strstr(out, "sigma=");
            const char *ep = strstr(out, "epsilon = ");
            sig[k] = sg ? atof(sg + 6) : -1;
            CHECK(rc == 0 && ep && atof(ep + 10) <= 3.0 && atof(ep + 10) > 2.99 && strstr(out, k ? "under replace-one" : "under zero-out"),
                  "--target-epsilon 3 (%s): rc %d\n%s", k ? "replace-one" : "zero-out", rc, out);
        }
        CHECK(sig[0] > 0 && fabs(sig[1] - 2 * sig[0]) <= 1e-4 * sig[1], "--target-epsilon under replace-one: sigma %g, want twice %g", sig[1], sig[0]);
    }
    /* --secure-noise: named on the configuration line and the epsilon line (Philox's runs name theirs), META dp.noise;
       reproducible with --noise-seed, different without, and not Philox's noise; its ε is the accountant's at
       σC / (C + Λ√d) (the grid's rounding): just above Philox's figure, by less than 1e-4 relative at tiny's size */
    {
        static char o[4][1 << 16];
        char file[4][512], cmd[1024];
        const char *b = build_dir();
        for (int k = 0; k < 4; k++) {
            snprintf(file[k], sizeof file[k], "%.200s/test-out/dp_cli_secure%d/model.safetensors", b, k);
            remove(file[k]);
            remove(log);
            snprintf(cmd, sizeof cmd, "--model tiny --seq-len 16 --steps 2 --batch-size 4 --noise-multiplier 5 --optimizer sgd --lr 0.05 "
                     "--seed 7 --dataset-size 100 %s %s --save %.200s/test-out/dp_cli_secure%d --log %.250s",
                     k == 3 ? "" : "--secure-noise", k >= 1 ? "--noise-seed 99" : "", b, k, log);
            rc = run("train_flash", cmd, o[k], sizeof o[k]);
            CHECK(rc == 0 && strstr(o[k], k == 3 ? "noise: Philox4x32-10 (a statistical generator; --secure-noise: ChaCha20 on a grid)"
                                                  : "noise: ChaCha20 (256-bit key) on a grid of 2^-28 sigma*C (--secure-noise)"),
                  "train_flash %s: rc %d, the noise must be named:\n%s", cmd, rc, o[k]);
            CHECK(file_has_string(log, "dp.noise") && file_has_string(log, k == 3 ? "philox" : "chacha20-grid"), "%s: META dp.noise", cmd);
            if (k == 1) {
                /* tiny has 259392 trainable parameters; σC = 5: Λ = 2^(2 - 28); the accountant at 5 / (1 + Λ√d), one use */
                const double e_secure = accountant_epsilon_for(5.0 / (1.0 + 0x1p-26 * sqrt(259392.0)), 1.0, 1, 1e-5, NULL),
                             e_philox = accountant_epsilon_for(5.0, 1.0, 1, 1e-5, NULL);
                char want[64];
                snprintf(want, sizeof want, "%.9g", e_secure);
                CHECK(file_has_string(log, want) && e_secure > e_philox && e_secure < e_philox * (1 + 1e-4),
                      "--secure-noise: the log's dp.epsilon must be %s (Philox's %.9g)", want, e_philox);
            }
        }
        CHECK(!same_file(file[0], file[1]), "--secure-noise: a drawn key and --noise-seed 99 saved the same weights");
        CHECK(same_file(file[1], file[2]), "--secure-noise --noise-seed 99 twice must save the same weights");
        CHECK(!same_file(file[2], file[3]), "--secure-noise and Philox with one --noise-seed must add different noise");
        snprintf(args, sizeof args, "--model tiny --seq-len 16 --steps 2 --batch-size 4 --poisson --dataset-size 64 --secure-noise --log %s", log);
        rc = run("train_flash", args, out, sizeof out);
        CHECK(rc == 0 && strstr(out, "under add/remove adjacency") && strstr(out, "ChaCha20"), "--secure-noise --poisson: rc %d\n%s", rc, out);
    }
    /* σ from the target ε */
    rc = run("train_flash", "--model tiny --seq-len 16 --steps 3 --batch-size 4 --target-epsilon 2 --dataset-size 50",
                 out, sizeof out);
    const char *e = strstr(out, "epsilon = ");
    double eps = e ? atof(e + 10) : -1;
    CHECK(rc == 0 && eps <= 2.0 && eps > 1.99, "--target-epsilon 2: rc %d, epsilon %g\n%s", rc, eps, out);
    /* no effective noise: ε must be +inf, never small (σ=1e-160 printed "epsilon = 2.0855", 1e-170 "-inf") */
    const char *tiny_sigma[] = { "1e-160", "1e-170", "1e-300" };
    for (int k = 0; k < 3; k++) {
        snprintf(args, sizeof args, "--model tiny --seq-len 16 --steps 2 --batch-size 4 --noise-multiplier %s", tiny_sigma[k]);
        rc = run("train_dpsgd", args, out, sizeof out);
        e = strstr(out, "epsilon = ");
        eps = e ? strtod(e + 10, NULL) : -1;
        CHECK(rc == 0 && eps == INFINITY, "--noise-multiplier %s: rc %d, epsilon must be inf, got %g\n%s",
              tiny_sigma[k], rc, eps, out);
    }
    /* LoRA's parameter table */
    rc = run("train_lora", "--model tiny --print-params --lora-rank 4 --lora-targets q,down", out, sizeof out);
    CHECK(rc == 0 && strstr(out, "layers.1.mlp.down_proj.lora_B.weight") && strstr(out, "(64, 4)") &&
          strstr(out, "layers.0.self_attn.q_proj.lora_A.weight") && !strstr(out, "v_proj.lora_A") &&
          strstr(out, "LoRA trainable 3584 parameters"),
          "train_lora --print-params:\n%s", out);
    /* tied embeddings: DP-LoRA freezes the tied matrix and runs; full DP trains it with every method */
    rc = run("train_lora", "--model tiny --steps 2 --tie-embeddings --lora-rank 4", out, sizeof out);
    CHECK(rc == 0 && strstr(out, "epsilon = "), "train_lora --tie-embeddings: rc %d\n%s", rc, out);
    {
        const char *tied[][2] = { { "train_dpsgd", "" }, { "train_ghost", "" }, { "train_flash", "" },
                                  { "train_flash", "--norm mixed" }, { "train_flash", "--norm ghost --clip bk" },
                                  { "train_flash", "--norm flash --clip twopass --precision bf16 --checkpoint-activations" } };
        for (size_t k = 0; k < sizeof tied / sizeof tied[0]; k++) {
            snprintf(args, sizeof args, "--model tiny --seq-len 16 --steps 2 --batch-size 4 --tie-embeddings %s", tied[k][1]);
            rc = run(tied[k][0], args, out, sizeof out);
            CHECK(rc == 0 && strstr(out, "epsilon = ") && strstr(out, "(lm_head is tied)"),
                  "full DP on tied embeddings: %s %s: rc %d\n%s", tied[k][0], args, rc, out);
        }
    }
    /* bad input */
    const struct { const char *prog, *args, *says; } bad[] = {
        { "train_flash", "--norm bogus", "--norm" },
        { "train_ghost", "--clip", "--clip" },
        { "train_dpsgd", "--batch-size 6 --max-physical-batch-size 4", "multiple" },
        { "train_flash", "--noise-multiplier 1 --target-epsilon 2", "not both" },
        { "train_lora", "--lora-rank 0", "--lora-rank" },
        { "train_lora", "--lora-targets q,x", "--lora-targets" },
        { "train_flash", "--max-grad-norm -1", "--max-grad-norm" },
        { "train_flash", "--model tiny --steps 1 --dataset-size 2 --batch-size 4", "fewer than the batch" },
        { "train_flash", "--model tiny --steps 10 --batch-size 4 --target-epsilon 0.000001 --delta 1e-12", "epsilon" },
        { "train_flash", "--model tiny --steps 1 --batch-size 4 --poisson --dataset-size 1000000000000", "--dataset-size" },
        /* above the data's rows (issue 37): rows past the end would be real rows again */
        { "train_flash", "--model tiny --steps 1 --batch-size 4 --dataset-size 65537", "above the data's 65536 rows" },
        { "train_flash", "--noise-seed 3 --secure-seed", "not both" },
        { "train_flash", "--adjacency replace-one --poisson", "--adjacency replace-one" },
        { "train_flash", "--adjacency add-remove", "--adjacency" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        rc = run(bad[k].prog, bad[k].args, out, sizeof out);
        int lines = 0;
        for (const char *p = out; *p; p++) lines += *p == '\n';
        CHECK(rc != 0 && strstr(out, "error") && strstr(out, bad[k].says) && lines == 1,
              "%s %s: want one error line mentioning '%s', got rc %d:\n%s", bad[k].prog, bad[k].args, bad[k].says, rc, out);
    }
    remove(log);
    if (failures) { printf("%d check(s) failed\n", failures); return 1; }
    printf("dp cli: all checks passed\n");
    return 0;
}
