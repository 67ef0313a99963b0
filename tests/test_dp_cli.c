/* test_dp_cli.c — the DP samples as a user runs them (build/train_dpsgd, train_ghost, train_flash,
   train_lora): a short run prints ε and stores it in the log (the exact value the accountant gives
   for the run's σ, q, steps, δ is found among the log's strings, under the key dp.epsilon); σ from
   --target-epsilon reaches the target within 0.01; --print-params of train_lora shows the base
   frozen and the adapters; bad flags and impossible configurations give a one-line error and a
   non-zero exit. Binaries are found through DPMEM_BUILD (default "build"). */
#include "dp/accountant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_dp_common.h"


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
        double eps = accountant_epsilon_for(1.3, 0.04, 2, 1e-5, NULL);
        snprintf(want, sizeof want, "%.9g", eps);
        char line[64];
        snprintf(line, sizeof line, "epsilon = %.4f", eps);
        CHECK(rc == 0 && strstr(out, line), "%s: rc %d, want '%s' in:\n%s", progs[i], rc, line, out);
        CHECK(file_has_string(log, "dp.epsilon") && file_has_string(log, want),
              "%s: the log must hold dp.epsilon = %s", progs[i], want);
        CHECK(file_has_string(log, "dp.noise_multiplier") && file_has_string(log, "1.3"), "%s: dp.noise_multiplier", progs[i]);
    }
    /* the noise seed: the trainer's --seed by default, --noise-seed overrides it */
    {
        static char o1[1 << 16], o2[1 << 16], o3[1 << 16];
        const char *base = "--model tiny --seq-len 16 --steps 2 --batch-size 4 --quiet --noise-multiplier 5 --optimizer sgd --lr 0.05";
        snprintf(args, sizeof args, "%s --seed 7", base);
        int r1 = run("train_flash", args, o1, sizeof o1);
        snprintf(args, sizeof args, "%s --seed 7 --noise-seed 99", base);
        int r2 = run("train_flash", args, o2, sizeof o2);
        snprintf(args, sizeof args, "%s --seed 99 --noise-seed 99", base);
        int r3 = run("train_flash", args, o3, sizeof o3);
        const char *l1 = strstr(o1, "\nloss: "), *l2 = strstr(o2, "\nloss: "), *l3 = strstr(o3, "\nloss: ");   /* "loss: A (step 1) -> B (step 2)" */
        const char *e1 = l1 ? strstr(l1, "-> ") : NULL, *e2 = l2 ? strstr(l2, "-> ") : NULL, *e3 = l3 ? strstr(l3, "-> ") : NULL;
        CHECK(r1 == 0 && r2 == 0 && r3 == 0 && e1 && e2 && e3 && atof(e1 + 3) != atof(e2 + 3),
              "--noise-seed must change the noise (final losses %s / %s)", e1 ? e1 : "?", e2 ? e2 : "?");
        (void)e3;
    }
    /* σ from the target ε */
    int rc = run("train_flash", "--model tiny --seq-len 16 --steps 3 --batch-size 4 --target-epsilon 2 --dataset-size 50",
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
