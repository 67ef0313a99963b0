/* test_dp_cuda_gpu.c — DP-SGD on the GPU (`--device cuda`) against the CPU, through the samples as a
   user runs them. Needs a CUDA device: without one (or in a build whose trainers have no CUDA
   backend, e.g. SAN=1) it prints one SKIP line and exits 77.
   One step of the tiny model with plain SGD (lr 10, so that the update is far above float rounding),
   GEMMs in full fp32 (DPMEM_CUDA_GEMM=fp32), the model saved as f32 safetensors and compared tensor
   by tensor, with u = max|w_cpu − w₀| the size of the CPU's update (w₀: the same run at lr 0; the
   device's lr-0 run equals it within a float ulp: the weights are drawn on the device from the CPU's stream):
     - every --norm × --clip, plus Poisson sampling and LoRA, with σ = 0 and C = 0.01 (every sample
       clipped, so each per-sample norm sets its sample's weight in the update): max|w_gpu − w_cpu|
       ≤ 1e-3·u, and the printed mean per-sample norm and clipped share agree (the norms themselves);
     - σ = 0, C = 1e6 (nothing clipped): DP on the GPU equals train_vanilla on the GPU (≤ 1e-3·u);
     - σ = 1, same --noise-seed: the GPU's noise is the CPU's (≤ 1e-3·u, where different noise is ~u), for
       Philox and for --secure-noise (ChaCha20 on the grid, with Poisson's draws);
     - a sample with a NaN embedding row (--allow-nonfinite) adds exactly nothing, every norm × clip
       and the batch-1 shortcut (nonfinite);
     - the levers: --checkpoint-activations on the GPU against the CPU's plain run (≤ 1e-3·u), and
       --precision bf16 on both (≤ 3e-2·u: each side rounds its own fp32 sums to bf16).
   DP_CUDA_TEST_DEVICE=cpu runs the "GPU" side on the CPU: it checks this test's own logic on a
   machine without a GPU (then every difference is 0). Binaries through DPMEM_BUILD. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "test_dp_common.h"
#include "test_saved_model.h"

static const char *dev = "cuda";
static char tmp[64];

/* One step of prog on device d with the given extra args, saved under tmp/name; its output in out. */
static int step(const char *prog, const char *d, const char *extra, const char *name, Model *m, char *out, size_t n) {
    char args[1536];
    /* the DP runs' noise from one given seed (the default draws one from getrandom()) */
    snprintf(args, sizeof args, "--model tiny --steps 1 --seed 7 --optimizer sgd --lr 10 --weight-decay 0 "
             "--warmup-steps 0 --device %s --save %s/%s --save-dtype f32 %s %s", d, tmp, name,
             strcmp(prog, "train_vanilla") ? "--noise-seed 7" : "", extra);
    int rc = run(prog, args, out, n);
    CHECK(rc == 0, "%s %s: exit %d: %.2000s", prog, args, rc, out);
    if (rc) return -1;
    char dir[256];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    return load(dir, m);
}

/* "mean per-sample norm X, Y% of samples clipped" of the DP summary */
static int stats(const char *out, double *norm, double *clipped) {
    const char *p = strstr(out, "mean per-sample norm ");
    return p && sscanf(p, "mean per-sample norm %lf, %lf%%", norm, clipped) == 2 ? 0 : -1;
}

static Model w0, w0_tied;   /* the initial weights, untied and tied (the layouts differ) */

/* The CPU run with `extra`, the device run with `extra` and `dev_extra`; the weights within tol·u,
   the mean per-sample norm within stol (relative). */
static void compare_tol(const char *prog, const char *what, const char *extra, const char *dev_extra, int check_stats,
                        double tol, double stol) {
    static char oc[65536], og[65536], ed[1024];
    Model c, g;
    snprintf(ed, sizeof ed, "%s %s", extra, dev_extra);
    if (step(prog, "cpu", extra, "cpu", &c, oc, sizeof oc)) return;
    if (step(prog, dev, ed, "dev", &g, og, sizeof og)) { unload(&c); return; }
    double u = maxdiff(&c, strstr(extra, "--tie-embeddings") ? &w0_tied : &w0), e = maxdiff(&c, &g);
    CHECK(u > 1e-5, "%s %s: the CPU's update is %g (the comparison would say nothing)", prog, what, u);
    CHECK(e >= 0 && e <= tol * u, "%s %s: max |w_%s - w_cpu| = %g, update %g", prog, what, dev, e, u);
    if (check_stats) {
        double nc, cc, ng, cg;
        if (stats(oc, &nc, &cc) || stats(og, &ng, &cg)) CHECK(0, "%s %s: no per-sample norm statistics printed", prog, what);
        else {
            CHECK(fabs(nc - ng) <= stol * nc && nc > 0, "%s %s: mean per-sample norm cpu %g, %s %g", prog, what, nc, dev, ng);
            CHECK(cc == cg, "%s %s: clipped share cpu %g%%, %s %g%%", prog, what, cc, dev, cg);
        }
    }
    unload(&c); unload(&g);
}

/* The largest |a - b| over the values finite in both, and how many are not finite in a and in b. */
static double finite_diff(const Model *a, const Model *b, size_t *bad_a, size_t *bad_b) {
    double d = 0;
    *bad_a = *bad_b = 0;
    if (a->n != b->n) return -1;
    for (size_t i = 0; i < a->n; i++) {
        *bad_a += !isfinite(a->w[i]);
        *bad_b += !isfinite(b->w[i]);
        if (isfinite(a->w[i]) && isfinite(b->w[i])) d = fmax(d, fabs((double)a->w[i] - b->w[i]));
    }
    return d;
}

/* A sample whose norm is not finite adds exactly 0 on the device too (issue 37): w0 with one NaN in
   token 7's embedding row (loaded with --allow-nonfinite), data whose rows 0 and 2 read token 7 (raw
   bytes, rows of 8). Every norm × clip at batch 4: the only value not finite is that NaN, and the
   rest equals the CPU's (which tests/test_dp_train checks against the other samples' references);
   a physical batch of 1 (the shortcut) on row 0 alone leaves every finite weight exactly as loaded. */
static void nonfinite(const char *const *norms, const char *const *clips) {
    static char out[65536];
    char path[256], extra[768];
    snprintf(path, sizeof path, "%s/data.bin", tmp);
    FILE *f = fopen(path, "wb");
    unsigned char bytes[65];
    for (int i = 0; i < 65; i++) bytes[i] = (unsigned char)('a' + (i * 7) % 26);
    bytes[3] = bytes[19] = 7;
    CHECK(f && fwrite(bytes, 1, sizeof bytes, f) == sizeof bytes, "cannot write %s", path);
    if (f) fclose(f);
    /* the poisoned checkpoint: w0's header and data, token 7's first embedding value NaN */
    const char *e = strstr(w0.head, "\"model.embed_tokens.weight\""), *sh = e ? strstr(e, "\"shape\":[") : NULL,
               *off = e ? strstr(e, "\"data_offsets\":[") : NULL;
    long V = 0, C = 0, start = -1;
    if (!sh || sscanf(sh, "\"shape\":[%ld,%ld]", &V, &C) != 2 || !off || sscanf(off, "\"data_offsets\":[%ld", &start) != 1 || V < 8) {
        CHECK(0, "no model.embed_tokens.weight in the saved header");
        return;
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/nan && cp %s/w0/config.json %s/nan/", tmp, tmp, tmp);
    CHECK(system(cmd) == 0, "%s", cmd);
    snprintf(path, sizeof path, "%s/nan/model.safetensors", tmp);
    f = fopen(path, "wb");
    const uint64_t nh = w0.nhead;
    const float saved = w0.w[start / 4 + 7 * C];
    w0.w[start / 4 + 7 * C] = NAN;
    CHECK(f && fwrite(&nh, 8, 1, f) == 1 && fwrite(w0.head, 1, w0.nhead, f) == w0.nhead && fwrite(w0.w, 4, w0.n, f) == w0.n,
          "cannot write %s", path);
    if (f) fclose(f);
    Model c, g;
    size_t bc, bg, b0;
    for (int n = 0; n < 4; n++)
        for (int k = 0; k < 2; k++) {
            snprintf(extra, sizeof extra, "--init-from %s/nan --allow-nonfinite --data %s/data.bin --seq-len 8 --batch-size 4 "
                     "--noise-multiplier 0 --max-grad-norm 0.01 --norm %s --clip %s", tmp, tmp, norms[n], clips[k]);
            if (step("train_dpsgd", "cpu", extra, "nan_cpu", &c, out, sizeof out)) continue;
            if (step("train_dpsgd", dev, extra, "nan_dev", &g, out, sizeof out)) { unload(&c); continue; }
            const double u = finite_diff(&c, &w0, &bc, &b0), d = finite_diff(&g, &c, &bg, &bc);
            CHECK(bc == 1 && bg == 1 && u > 1e-5 && d >= 0 && d <= 1e-3 * u,
                  "NaN sample, --norm %s --clip %s on %s: %zu (cpu) and %zu (%s) values not finite, want 1; max |w_%s - w_cpu| %g, update %g",
                  norms[n], clips[k], dev, bc, bg, dev, dev, d, u);
            unload(&c); unload(&g);
        }
    snprintf(extra, sizeof extra, "--init-from %s/nan --allow-nonfinite --data %s/data.bin --seq-len 8 --batch-size 1 "
             "--noise-multiplier 0 --max-grad-norm 0.01 --norm ghost --clip twopass", tmp, tmp);
    if (step("train_dpsgd", dev, extra, "nan_one", &g, out, sizeof out) == 0) {
        const double d = finite_diff(&g, &w0, &bg, &b0);
        CHECK(bg == 1 && d == 0, "NaN sample alone (physical batch 1) on %s: %zu values not finite, finite weights moved by %g; want 1, 0",
              dev, bg, d);
        unload(&g);
    }
    w0.w[start / 4 + 7 * C] = saved;
}

static void compare(const char *prog, const char *what, const char *extra, int check_stats) {
    compare_tol(prog, what, extra, "", check_stats, 1e-3, 2e-3);
}

int main(void) {
    const char *e = getenv("DP_CUDA_TEST_DEVICE");
    if (e && *e) dev = e;
    static char out[65536];
    if (!strcmp(dev, "cuda")) {
        if (system("nvidia-smi -L >/dev/null 2>&1") != 0) {
            printf("SKIP test_dp_cuda_gpu: no CUDA device here: DP-SGD --device cuda vs cpu (norms, clipped step, noise) not checked\n");
            return 77;
        }
        int rc = run("train_ghost", "--model tiny --steps 1 --quiet --device cuda", out, sizeof out);
        if (rc != 0 && strstr(out, "built without")) {
            printf("SKIP test_dp_cuda_gpu: the trainers of this build have no CUDA backend (SAN=1 or no nvcc): DP on the GPU not checked\n");
            return 77;
        }
        CHECK(rc == 0, "train_ghost --device cuda: exit %d: %.2000s", rc, out);
    }
    setenv("DPMEM_CUDA_GEMM", "fp32", 1);
    snprintf(tmp, sizeof tmp, "/tmp/test_dp_cuda_gpu.XXXXXX");
    if (!mkdtemp(tmp)) { printf("FAIL: mkdtemp\n"); return 1; }
    if (step("train_dpsgd", "cpu", "--lr 0 --noise-multiplier 0", "w0", &w0, out, sizeof out)) goto done;
    if (step("train_dpsgd", "cpu", "--lr 0 --noise-multiplier 0 --tie-embeddings", "w0t", &w0_tied, out, sizeof out)) goto done;

    {   /* the initial weights are drawn on the device from the CPU's stream (init_normal): at lr 0 the
           device saves the CPU's w0. Both compute noise.h's z; their double libm may differ by an ulp,
           which moves a float by at most one ulp in rare ties: |w| < 0.25 (12 sigma) gives 1.5e-8. */
        Model w0d;
        if (step("train_dpsgd", dev, "--lr 0 --noise-multiplier 0", "w0dev", &w0d, out, sizeof out) == 0) {
            const double d = maxdiff(&w0, &w0d);
            CHECK(d >= 0 && d <= 1.5e-8, "initial weights on %s vs the CPU: max |difference| %g", dev, d);
            unload(&w0d);
        }
    }
    static const char *norms[] = { "direct", "ghost", "flash", "mixed" };
    static const char *clips[] = { "bk", "twopass" };
    char what[128], extra[512];
    Model van, dp;
    Model *vp = NULL;
    if (step("train_vanilla", dev, "", "vanilla", &van, out, sizeof out) == 0) vp = &van;
    for (int n = 0; n < 4; n++)
        for (int c = 0; c < 2; c++) {
            snprintf(what, sizeof what, "--norm %s --clip %s", norms[n], clips[c]);
            snprintf(extra, sizeof extra, "%s --noise-multiplier 0 --max-grad-norm 0.01", what);
            compare("train_dpsgd", what, extra, 1);
            /* C huge, σ 0: vanilla SGD (on the same device) */
            snprintf(extra, sizeof extra, "%s --noise-multiplier 0 --max-grad-norm 1e6", what);
            if (vp && step("train_dpsgd", dev, extra, "huge", &dp, out, sizeof out) == 0) {
                double u = maxdiff(vp, &w0), d = maxdiff(vp, &dp);
                CHECK(u > 1e-5 && d >= 0 && d <= 1e-3 * u, "%s, C 1e6, sigma 0 on %s: max |w_dp - w_vanilla| = %g, update %g", what, dev, d, u);
                unload(&dp);
            }
        }
    /* tied embeddings: the cross term on the GPU (its u kernel, the dot) against the CPU */
    compare("train_dpsgd", "--tie-embeddings --norm flash --clip bk", "--tie-embeddings --norm flash --clip bk --noise-multiplier 0 --max-grad-norm 0.01", 1);
    compare("train_dpsgd", "--tie-embeddings --norm direct --clip twopass", "--tie-embeddings --norm direct --clip twopass --noise-multiplier 0 --max-grad-norm 0.01", 1);
    compare("train_flash", "--poisson", "--noise-multiplier 0 --max-grad-norm 0.01 --poisson --batch-size 8 --max-physical-batch-size 4", 1);
    compare("train_lora", "LoRA flash bk", "--noise-multiplier 0 --max-grad-norm 0.01 --norm flash --clip bk --lora-rank 4", 1);
    compare("train_lora", "LoRA ghost twopass", "--noise-multiplier 0 --max-grad-norm 0.01 --norm ghost --clip twopass --lora-rank 4", 1);
    /* the levers. Checkpointing on the device only: the same arithmetic as the CPU's plain run.
       bf16 on both: each side rounds its own fp32 sums to bf16, and a value near a rounding boundary
       can land one bf16 ulp (2^-8 relative) apart, which the following ops carry on; 3e-2·u and 2e-2
       on the norms leave room for that and none for a method error (a sample unclipped, a layer
       skipped: O(u)). */
    for (int n = 0; n < 4; n++) {
        const int c = n % 2;   /* direct+bk, ghost+twopass, flash+bk, mixed+twopass */
        snprintf(what, sizeof what, "--norm %s --clip %s, checkpointed on the device", norms[n], clips[c]);
        snprintf(extra, sizeof extra, "--norm %s --clip %s --noise-multiplier 0 --max-grad-norm 0.01", norms[n], clips[c]);
        compare_tol("train_dpsgd", what, extra, "--checkpoint-activations", 1, 1e-3, 2e-3);
        snprintf(what, sizeof what, "--norm %s --clip %s --precision bf16", norms[n], clips[c]);
        snprintf(extra, sizeof extra, "--norm %s --clip %s --noise-multiplier 0 --max-grad-norm 0.01 --precision bf16", norms[n], clips[c]);
        compare_tol("train_dpsgd", what, extra, "", 1, 3e-2, 2e-2);
    }
    compare_tol("train_lora", "LoRA flash bk, bf16, checkpointed", "--noise-multiplier 0 --max-grad-norm 0.01 --norm flash --clip bk "
                "--lora-rank 4 --precision bf16 --checkpoint-activations", "", 1, 3e-2, 2e-2);
    /* the noise: σ 1, the same seed on both devices */
    compare("train_dpsgd", "ghost bk, sigma 1", "--norm ghost --clip bk --noise-multiplier 1 --max-grad-norm 0.01", 1);
    compare("train_lora", "LoRA, sigma 1", "--norm direct --clip bk --noise-multiplier 1 --max-grad-norm 0.01 --lora-rank 4", 0);
    /* --secure-noise (ChaCha20 on the grid; its Poisson draws too): the device's values are the CPU's bit for bit */
    compare("train_dpsgd", "ghost bk, sigma 1, --secure-noise", "--norm ghost --clip bk --noise-multiplier 1 --max-grad-norm 0.01 --secure-noise", 1);
    compare("train_flash", "--poisson --secure-noise", "--noise-multiplier 1 --max-grad-norm 0.01 --poisson --secure-noise --batch-size 8 "
            "--max-physical-batch-size 4", 1);
    nonfinite(norms, clips);
    if (vp) unload(vp);
    unload(&w0); unload(&w0_tied);
done:;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmp);
    if (failures) { printf("test_dp_cuda_gpu: %d failures (device %s)\n", failures, dev); return 1; }
    printf("test_dp_cuda_gpu: OK (device %s vs cpu: 8 norm x clip, Poisson, LoRA; vanilla at C huge; the same noise, Philox and secure; a NaN sample dropped)\n", dev);
    return 0;
}
