/* test_dp_train.c — DP-SGD end to end on random tiny LLaMAs (samples/dp/dp_sgd.c through the real
   model's backward hooks), against per-sample references obtained by running each sample ALONE
   through the same model (batch 1, loss scale 1/T): g_b, ‖g_b‖² (squares summed in double).

   Checked, for direct, ghost, flash and mixed norms with twopass and bk clipping, on two configs
   (GQA with T = 17, B = 3; multi-head with T = 33, B = 4; two seeds each):
     - the per-sample norms equal the references;
     - the clipped sum Σ_b min(1, C/(‖g_b‖+1e-6)) g_b left in the gradients equals the reference
       sum (C chosen so that some samples clip and some do not);
     - with C huge and σ = 0 the DP gradient after before_update equals the vanilla gradient;
     - logical batch 8 as 1×8, 2×4 and 8×1 physical batches gives the same update;
     - a physical batch of 1 (the shortcut) clips the ordinary gradient by the same factor;
     - Poisson sampling draws the rows of the documented stream, pads the last physical batch with
       rows that contribute nothing, and the update is Σ_b c_b g_b / L over the drawn rows;
     - memory: direct's per_sample_grads peak is B·|θ_trainable|·4 bytes exactly; ghost's Gram
       buffers are 2·B·T²·4 bytes; flash's `ghost` peak is one 2·R² tile and no T×T buffer;
       book-keeping keeps exactly B·IC·OC per-sample floats for layers with IC ≤ T and a B·T·OC
       copy of G for the others (and the embedding), none for lm_head.
   Also with tied embeddings (lm_head = embed_tokens, Llama-3.2's layout), where the reference's
   per-sample gradient of the tied matrix is e_b + h_b and its norm carries the cross term.
   Tolerances: both sides are float32 computations of the same quantities that differ only in
   summation order and batching (per-sample GEMMs vs batched ones, Gram sums vs direct sums). A
   float32 sum of K terms has relative error ≤ K·u (u = 6e-8) of the sum of magnitudes; with K up to
   a few hundred here and a backward chain of ~30 ops, the worst case is ~1e-3; observed differences
   are below 4e-7 relative (of the norm², or of the largest gradient entry). The checks use 1e-5 for
   norms and clipped sums (1e-4 where two full DP runs are compared): a margin of ~25x over what is
   seen, while any method error (off-diagonal tiles counted once: 1 %, a layer's bk sum skipped,
   a wrong loss scale) is orders of magnitude larger; each of those was tried and fails this test. */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "dp/dp_sgd.h"
#include <Random123/philox.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0, checks = 0;
#define CHECK(cond, ...) do { checks++; if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                               printf(__VA_ARGS__); printf("\n"); } } while (0)

#include "test_dp_rig.h"

static size_t n_trainable(const LlamaModel *m) {
    size_t n = 0;
    for (int i = 0; i < m->n_params; i++) if (m->params[i].trainable) n += m->params[i].numel;
    return n;
}

/* The model's gradients as one flat double vector. */
static void grads_flat(LlamaModel *m, double *out) {
    size_t k = 0;
    for (int i = 0; i < m->n_params; i++) {
        const float *g = *llama_tensor(&m->dw, &m->params[i]);
        for (size_t j = 0; j < m->params[i].numel; j++) out[k++] = g[j];
    }
}

/* Per-sample references: g_b of each row alone, flat [rows][P], and ‖g_b‖². */
static void reference(const LlamaConfig *mc, int T, int rows, const int *tok, const int *tgt, uint64_t seed,
                      double *g, double *norm2, size_t P) {
    Rig r;
    rig_config(&r.cfg, mc, 1, T, "sgd");
    rig_open(&r, seed, NULL);
    for (int b = 0; b < rows; b++) {
        llama_zero_grad(&r.s.model);
        rig_rows(&r, tok, tgt, b);
        if (train_forward(&r.s) || train_backward_scaled(&r.s, NULL, 1.0f / llama_loss_positions(&r.s.model))) {
            printf("FAIL: reference run\n"); exit(1);
        }
        grads_flat(&r.s.model, g + (size_t)b * P);
        norm2[b] = 0;
        for (size_t k = 0; k < P; k++) norm2[b] += g[(size_t)b * P + k] * g[(size_t)b * P + k];
    }
    rig_close(&r);
}

/* Physical batches of the last dp_run whose two-pass second backward reused the first's activations. */
static long again_batches;
/* >= 0: dp_run makes this row of the embedding NaN (a sample that reads it has a NaN norm) */
static int poison_token = -1;
/* Work counted through the backend's table (test_shortcut_work): the scale and fill calls of the physical batches. */
static int count_ops;
static long batch_ops, scale_calls, fill_calls;
static KOps counting_ops;
static void counting_scale(KBackend *b, float *x, float s, size_t n) { scale_calls++; kops_cpu.scale(b, x, s, n); }
static void counting_fill(KBackend *b, float *x, float v, size_t n) { fill_calls++; kops_cpu.fill(b, x, v, n); }

/* One DP logical step over `rows` rows in physical batches of P_phys; returns the final gradient
   (after before_update) in out, the last physical batch's norms in norm2 (if non-NULL), and the
   clipped sum before the noise step in pre (if non-NULL). */
static void dp_run(const LlamaConfig *mc, int T, int rows, int P_phys, const int *tok, const int *tgt, uint64_t seed,
                   DpNorm norm, DpClip clip, double C, int tile, double *out, float *norm2, double *pre,
                   size_t *peak_psg, size_t *peak_ghost, size_t *peak_bk) {
    Rig r;
    DpConfig dp;
    DpSgd d;
    TrainStrategy st;
    rig_config(&r.cfg, mc, rows, T, "sgd");
    dp_config_defaults(&dp, norm, clip);
    dp.max_grad_norm = C; dp.noise_multiplier = 0; dp.max_physical_batch = P_phys; dp.flash_tile = tile;
    if (dp_sgd_prepare(&d, &st, &dp, &r.cfg, "test")) { printf("FAIL: dp_sgd_prepare\n"); exit(1); }
    rig_open(&r, seed, NULL);
    if (poison_token >= 0) r.s.model.w.embed_tokens[(size_t)poison_token * mc->dim] = NAN;
    if (count_ops) {
        counting_ops = kops_cpu;
        counting_ops.scale = counting_scale;
        counting_ops.fill = counting_fill;
        r.kb.ops = &counting_ops;
    }
    if (dp_sgd_init(&d, &r.s)) { printf("FAIL: dp_sgd_init: %s\n", kbackend_error(&r.kb)); exit(1); }
    llama_zero_grad(&r.s.model);
    dpmem_reset_peak();
    scale_calls = fill_calls = 0;
    size_t psg0 = dpmem_live_bytes("per_sample_grads"), gh0 = dpmem_live_bytes("ghost"), bk0 = dpmem_live_bytes("bk");
    for (int p = 0; p < rows / P_phys; p++) {
        r.s.micro = p;
        rig_rows(&r, tok, tgt, p * P_phys);
        if (dp_sgd_physical_batch(&d, &r.s)) { printf("FAIL: physical batch: %s\n", kbackend_error(&r.kb)); exit(1); }
    }
    batch_ops = scale_calls + fill_calls;
    if (peak_psg) *peak_psg = dpmem_peak_bytes("per_sample_grads") - psg0;
    if (peak_ghost) *peak_ghost = dpmem_peak_bytes("ghost") - gh0;
    if (peak_bk) *peak_bk = dpmem_peak_bytes("bk") - bk0;
    again_batches = d.backward_again;
    if (norm2) memcpy(norm2, d.norm2, (size_t)P_phys * sizeof(float));
    if (pre) grads_flat(&r.s.model, pre);
    r.s.step = 0;
    if (dp_sgd_before_update(&d, &r.s)) { printf("FAIL: before_update\n"); exit(1); }
    grads_flat(&r.s.model, out);
    dp_sgd_destroy(&d, &r.s);
    rig_close(&r);
}

static double max_abs(const double *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

static double max_diff(const double *x, const double *y, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i] - y[i]));
    return m;
}

static void test_config(const char *name, const LlamaConfig *mc, int B, int T, uint64_t seed) {
    /* data: B rows for the method checks, 8 for physical batching */
    const int rows = 8;
    int *tok = xcalloc((size_t)rows * T, sizeof(int)), *tgt = xcalloc((size_t)rows * T, sizeof(int));
    uint64_t st = seed * 7919 + 17;
    for (int i = 0; i < rows * T; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int)((st >> 33) % (uint64_t)mc->vocab_size);
        tgt[i] = (int)((st >> 13) % (uint64_t)mc->vocab_size);
    }
    if (mc->task == LLAMA_TASK_CLASSIFY)   /* a label per row; rows right-padded by 0, 2, 4 tokens */
        for (int r = 0; r < rows; r++)
            for (int t = 0; t < T; t++) {
                tgt[r * T + t] = tgt[r * T] % mc->num_labels;
                if (mc->pad_id >= 0 && t >= T - 2 * (r % 3)) tok[r * T + t] = mc->pad_id;
            }
    LlamaModel probe;
    llama_describe(&probe, mc, B, T);
    const size_t P = n_trainable(&probe);
    llama_free(&probe);
    const int tied = mc->tie_embeddings && mc->task != LLAMA_TASK_CLASSIFY;   /* classify's score is never tied */
    double *g = xcalloc((size_t)rows * P, 8), *rn = xcalloc(rows, 8);
    reference(mc, T, rows, tok, tgt, seed, g, rn, P);

    /* C at the median of the first B norms: some clip, some do not */
    double sorted[8];
    for (int b = 0; b < B; b++) sorted[b] = sqrt(rn[b]);
    for (int i = 0; i < B; i++) for (int j = i + 1; j < B; j++) if (sorted[j] < sorted[i]) { double t = sorted[i]; sorted[i] = sorted[j]; sorted[j] = t; }
    double C = sorted[B / 2] * 0.999;
    double *want = xcalloc(P, 8), *out = xcalloc(P, 8), *pre = xcalloc(P, 8), *vanilla = xcalloc(P, 8);
    for (int b = 0; b < B; b++) {
        double c = fmin(1.0, C / (sqrt(rn[b]) + 1e-6));
        for (size_t k = 0; k < P; k++) want[k] += c * g[(size_t)b * P + k];
    }
    double scale = max_abs(want, P);
    float norm2[8];
    for (int norm = 0; norm < 4; norm++)
        for (int clip = 0; clip < 2; clip++) {
            size_t peak_psg = 0, peak_ghost = 0, peak_bk = 0;
            int tile = 8;
            dp_run(mc, T, B, B, tok, tgt, seed, (DpNorm)norm, (DpClip)clip, C, tile, out, norm2, pre, &peak_psg, &peak_ghost, &peak_bk);
            char what[128];
            snprintf(what, sizeof what, "%s seed %llu %s+%s", name, (unsigned long long)seed,
                     dp_norm_name((DpNorm)norm), dp_clip_name((DpClip)clip));
            for (int b = 0; b < B; b++)
                CHECK(fabs(norm2[b] - rn[b]) <= 1e-5 * rn[b], "%s: norm² of sample %d %.8g, alone %.8g", what, b, norm2[b], rn[b]);
            double e = max_diff(pre, want, P);
            CHECK(e <= 1e-5 * scale, "%s: clipped sum off by %.3g (scale %.3g)", what, e, scale);
            {   /* ghost's two-pass runs its second backward on the first's activations exactly where
                   attention's backward scratch (one thread here) is no larger than the two Grams */
                KBackend kb;
                kbackend_cpu_init(&kb, 1);
                const KShape sh = { .B = B, .T = T, .NH = mc->n_heads, .NKV = mc->n_kv_heads, .HS = mc->dim / mc->n_heads };
                const int fits = kcpu_scratch_bytes(&kb, KOP_ATTENTION_BACKWARD, &sh) <= dp_linear_ghost_floats(B, T) * sizeof(float);
                kbackend_destroy(&kb);
                const long want_again = norm == DP_NORM_GHOST && clip == DP_CLIP_TWOPASS && !tied && fits;
                CHECK(again_batches == want_again, "%s: %ld second backwards on the first's activations, want %ld",
                      what, again_batches, want_again);
            }
            for (size_t k = 0; k < P; k++) pre[k] /= B;      /* σ = 0: the update is the sum / L */
            CHECK(max_diff(out, pre, P) <= 1e-7 * scale, "%s: before_update with sigma 0 must only divide by L", what);
            /* memory */
            const int R = tile < T ? tile : T;
            /* tied: u [B, T, C] of the cross term lives from lm_head's hook to the embedding's, beside
               the other layers' Gram matrices or tiles (its gather: T² for ghost, R² for flash, freed
               before them) */
            const size_t tied_u = tied ? (size_t)B * T * mc->dim * 4 : 0;
            const size_t rms = (size_t)B * mc->dim * 4 * (2 * mc->n_layers + 1);   /* RMSNorm psg, all methods */
            if (norm == DP_NORM_DIRECT)
                CHECK(peak_psg == (size_t)B * P * 4 || (clip == DP_CLIP_TWOPASS && peak_psg < (size_t)B * P * 4),
                      "%s: per_sample_grads peak %zu, want B*|theta|*4 = %zu", what, peak_psg, (size_t)B * P * 4);
            if (norm == DP_NORM_DIRECT && clip == DP_CLIP_BK)
                CHECK(peak_psg == (size_t)B * P * 4, "%s: per_sample_grads peak %zu, want %zu", what, peak_psg, (size_t)B * P * 4);
            if (norm == DP_NORM_GHOST)
                CHECK(peak_ghost == 2 * (size_t)B * T * T * 4 + tied_u, "%s: ghost peak %zu, want 2*B*T*T*4 (+ B*T*C*4 tied) = %zu",
                      what, peak_ghost, 2 * (size_t)B * T * T * 4 + tied_u);
            if (norm == DP_NORM_FLASH) {
                /* one tile pair (the rig runs one thread) and a double per (sample, row of tiles);
                   lm_head always takes the tiles (its G is borrowed, never per-sample gradients) */
                const size_t want_tile = (2 * (size_t)B * ((T + R - 1) / R) + 2 * (size_t)R * R) * 4 + tied_u;
                CHECK(peak_ghost == want_tile, "%s: ghost peak %zu, want 2*B*ceil(T/R) + 2*R*R floats = %zu", what, peak_ghost,
                      want_tile);
                if (clip == DP_CLIP_TWOPASS)
                    CHECK(peak_psg <= rms, "%s: per_sample_grads peak %zu above the RMSNorm vectors %zu", what, peak_psg, rms);
            }
            if ((norm == DP_NORM_FLASH || norm == DP_NORM_GHOST) && clip == DP_CLIP_BK) {
                /* book-keeping keeps per-sample gradients where IC <= T (smaller than a copy of G),
                   sample 0's in the still-zero dW (one physical batch per step here), G copies
                   elsewhere; lm_head's G is the model's own retained buffer */
                LlamaModel pm;
                llama_describe(&pm, mc, B, T);
                size_t want_psg = rms, want_bk = (size_t)B * T * mc->dim * 4;   /* the embedding's G */
                for (int i = 0; i < pm.n_params; i++) {
                    const ParamInfo *q = &pm.params[i];
                    if (q->kind != HOOK_LINEAR || q->which == W_LM_HEAD) continue;
                    if (q->cols <= T) want_psg += (size_t)(B - 1) * q->numel * 4;
                    else want_bk += (size_t)B * T * q->rows * 4;
                }
                llama_free(&pm);
                CHECK(peak_psg == want_psg, "%s: per_sample_grads peak %zu, want %zu", what, peak_psg, want_psg);
                CHECK(peak_bk == want_bk, "%s: bk peak %zu, want %zu", what, peak_bk, want_bk);
            }
        }
    /* C huge, σ = 0: the vanilla step */
    {
        Rig r;
        rig_config(&r.cfg, mc, B, T, "sgd");
        rig_open(&r, seed, NULL);
        llama_zero_grad(&r.s.model);
        rig_rows(&r, tok, tgt, 0);
        if (train_forward(&r.s) || train_backward_scaled(&r.s, NULL, 1.0f / ((float)B * llama_loss_positions(&r.s.model)))) {
            printf("FAIL: vanilla\n"); exit(1);
        }
        grads_flat(&r.s.model, vanilla);
        rig_close(&r);
        double vs = max_abs(vanilla, P);
        for (int norm = 0; norm < 4; norm++)
            for (int clip = 0; clip < 2; clip++) {
                dp_run(mc, T, B, B, tok, tgt, seed, (DpNorm)norm, (DpClip)clip, 1e30, 64, out, NULL, NULL, NULL, NULL, NULL);
                double e = max_diff(out, vanilla, P);
                CHECK(e <= 1e-4 * vs, "%s seed %llu %s+%s, C huge, sigma 0: differs from the vanilla gradient by %.3g (scale %.3g)",
                      name, (unsigned long long)seed, dp_norm_name((DpNorm)norm), dp_clip_name((DpClip)clip), e, vs);
            }
    }
    /* physical batching: logical 8 as 1x8, 2x4, 8x1 */
    {
        double *ref8 = xcalloc(P, 8);
        double C8 = sqrt(rn[0]) * 0.9;
        for (int b = 0; b < rows; b++) {
            double c = fmin(1.0, C8 / (sqrt(rn[b]) + 1e-6));
            for (size_t k = 0; k < P; k++) ref8[k] += c * g[(size_t)b * P + k] / rows;
        }
        double s8 = max_abs(ref8, P);
        const int phys[3] = { 8, 4, 1 };
        /* mixed+bk at physical 1 keeps the per-sample gradients of the layers whose norm is direct */
        const DpNorm norms[4] = { DP_NORM_FLASH, DP_NORM_GHOST, DP_NORM_DIRECT, DP_NORM_MIXED };
        const DpClip clips[4] = { DP_CLIP_BK, DP_CLIP_TWOPASS, DP_CLIP_BK, DP_CLIP_BK };
        for (int k = 0; k < 4; k++)
            for (int p = 0; p < 3; p++) {
                dp_run(mc, T, rows, phys[p], tok, tgt, seed, norms[k], clips[k], C8, 8, out, NULL, NULL, NULL, NULL, NULL);
                double e = max_diff(out, ref8, P);
                CHECK(e <= 1e-4 * s8, "%s: logical 8 as physical %dx%d (%s+%s) off by %.3g (scale %.3g)", name,
                      8 / phys[p], phys[p], dp_norm_name(norms[k]), dp_clip_name(clips[k]), e, s8);
            }
        free(ref8);
    }
    /* physical batch of 1, no accumulation: the shortcut */
    {
        double C1 = sqrt(rn[2]) * 0.5;
        dp_run(mc, T, 1, 1, tok + 2 * T, tgt + 2 * T, seed, DP_NORM_GHOST, DP_CLIP_TWOPASS, C1, 8, out, norm2, NULL, NULL, NULL, NULL);
        double c = fmin(1.0, C1 / (sqrt(rn[2]) + 1e-6));
        double e = 0, s1 = 0;
        for (size_t k = 0; k < P; k++) { e = fmax(e, fabs(out[k] - c * g[2 * P + k])); s1 = fmax(s1, fabs(c * g[2 * P + k])); }
        CHECK(fabs(norm2[0] - rn[2]) <= 1e-4 * rn[2] && e <= 1e-4 * s1, "%s: batch-1 shortcut: norm² %.8g vs %.8g, grad off by %.3g",
              name, norm2[0], rn[2], e);
    }
    free(tok); free(tgt); free(g); free(rn); free(want); free(out); free(pre); free(vanilla);
}

/* Poisson sampling on a data set of 12 rows, logical batch 4 (q = 1/3), physical batches of 2: the
   rows drawn are those of the documented stream (recomputed here), each row the T+1 tokens at i·T
   (data.h: the one definition of a row, also the sequential batches'), padding rows contribute
   nothing, and the update is Σ_b c_b g_b / L over exactly the drawn rows. */
static void test_poisson(const LlamaConfig *mc, int T, uint64_t seed) {
    const int N = 12, L = 4, P = 2;
    int *stream = xcalloc((size_t)N * T + 1, sizeof(int));
    uint64_t st = seed * 104729 + 3;
    for (int i = 0; i < N * T + 1; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        stream[i] = (int)((st >> 33) % (uint64_t)mc->vocab_size);
    }
    {   /* the sequential batches read the same rows: row i at token i·T, then around again */
        DataLoader dl;
        memset(&dl, 0, sizeof dl);
        dl.tokens = stream; dl.n_tokens = (size_t)N * T + 1;
        int *in = xcalloc((size_t)(N + 2) * T, sizeof(int)), *tg = xcalloc((size_t)(N + 2) * T, sizeof(int)), same = data_rows(&dl, T) == (size_t)N;
        data_next(&dl, in, tg, N + 2, T);
        for (int i = 0; same && i < N + 2; i++)
            for (int t = 0; t < T; t++) same &= in[i * T + t] == stream[(i % N) * T + t] && tg[i * T + t] == stream[(i % N) * T + t + 1];
        CHECK(same, "data_next: %zu rows; rows 0..%d must be stream[i·T ...] (then around)", data_rows(&dl, T), N + 1);
        free(in); free(tg);
    }
    for (int step = 0; step < 3; step++) {
        Rig r;
        DpConfig dp;
        DpSgd d;
        TrainStrategy strat;
        rig_config(&r.cfg, mc, L, T, "sgd");
        dp_config_defaults(&dp, DP_NORM_FLASH, step == 1 ? DP_CLIP_TWOPASS : DP_CLIP_BK);
        dp.poisson = 1; dp.max_physical_batch = P; dp.noise_multiplier = 0; dp.seed = seed; dp.seed_given = 1; dp.flash_tile = 8;
        dp.max_grad_norm = 0.5;
        if (dp_sgd_prepare(&d, &strat, &dp, &r.cfg, "poisson")) { printf("FAIL: prepare\n"); exit(1); }
        rig_open(&r, seed, NULL);
        r.s.data.synthetic = 0; r.s.data.tokens = stream; r.s.data.n_tokens = (size_t)N * T + 1;
        if (dp_sgd_init(&d, &r.s)) { printf("FAIL: init: %s\n", kbackend_error(&r.kb)); exit(1); }
        CHECK(d.dataset_size == N && fabs(d.sample_rate - (double)L / N) < 1e-15, "Poisson: dataset %ld rows, q %g",
              d.dataset_size, d.sample_rate);
        llama_zero_grad(&r.s.model);
        r.s.step = step;
        for (r.s.micro = 0; r.s.micro < r.cfg.grad_accum; r.s.micro++)
            if (dp_sgd_physical_batch(&d, &r.s)) { printf("FAIL: Poisson batch: %s\n", kbackend_error(&r.kb)); exit(1); }
        /* the documented draw */
        long want_rows[12], n_want = 0;
        for (long i = 0; i < N; i++) {
            philox4x32_ctr_t c = {{ (uint32_t)i, 0, (uint32_t)step, 0x504F4953u }};
            philox4x32_key_t k = {{ (uint32_t)seed, (uint32_t)(seed >> 32) }};
            if (philox4x32(c, k).v[0] < (uint32_t)(4294967296.0 * L / N)) want_rows[n_want++] = i;
        }
        int same = d.n_rows == n_want;
        for (long i = 0; same && i < n_want; i++) same = d.rows[i] == want_rows[i];
        CHECK(same, "Poisson step %d: drew %ld rows, the stream says %ld", step, d.n_rows, n_want);
        r.s.step = step;
        if (dp_sgd_before_update(&d, &r.s)) { printf("FAIL: before_update\n"); exit(1); }
        LlamaModel probe;
        llama_describe(&probe, mc, 1, T);
        const size_t Pn = n_trainable(&probe);
        llama_free(&probe);
        double *out = xcalloc(Pn, 8), *want = xcalloc(Pn, 8);
        grads_flat(&r.s.model, out);
        dp_sgd_destroy(&d, &r.s);
        rig_close(&r);
        if (n_want) {
            int *tok = xcalloc((size_t)n_want * T, sizeof(int)), *tgt = xcalloc((size_t)n_want * T, sizeof(int));
            for (long j = 0; j < n_want; j++)
                for (int t = 0; t < T; t++) {
                    tok[j * T + t] = stream[want_rows[j] * T + t];
                    tgt[j * T + t] = stream[want_rows[j] * T + t + 1];
                }
            double *g = xcalloc((size_t)n_want * Pn, 8), *rn = xcalloc(n_want, 8);
            reference(mc, T, (int)n_want, tok, tgt, seed, g, rn, Pn);
            for (long j = 0; j < n_want; j++) {
                double c = fmin(1.0, 0.5 / (sqrt(rn[j]) + 1e-6));
                for (size_t k = 0; k < Pn; k++) want[k] += c * g[(size_t)j * Pn + k] / L;
            }
            free(tok); free(tgt); free(g); free(rn);
        }
        double sc = max_abs(want, Pn), e = max_diff(out, want, Pn);
        CHECK(e <= 1e-5 * (sc + 1e-30) || (sc == 0 && e == 0), "Poisson step %d (%ld rows): update off by %.3g (scale %.3g)",
              step, n_want, e, sc);
        free(out); free(want);
    }
    free(stream);
}

/* A sample whose norm is not finite adds exactly nothing, on every path (issue 37): 4 rows, row 2
   reads a token whose embedding row holds a NaN (as --allow-nonfinite loads it); no other row reads
   it (untied: lm_head's row of that token is finite). For every norm × clip the clipped sum equals the
   other three's Σ c_b g_b (their references, each alone, on a clean model) and the update after
   before_update (σ = 0) is that sum / 4, every value finite; the NaN row's own physical batch of 1
   (the shortcut) and a 2×2 split of the same batch likewise. Before the fix, two-pass's weighted
   second backward gave 0 · NaN = NaN in most of the update, and the shortcut NaN everywhere. */
static void test_nonfinite(const LlamaConfig *mc, int T, uint64_t seed) {
    const int B = 4, bad = 2, X = mc->vocab_size - 1;
    int *tok = xcalloc((size_t)B * T, sizeof(int)), *tgt = xcalloc((size_t)B * T, sizeof(int));
    uint64_t st = seed * 31337 + 5;
    for (int i = 0; i < B * T; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int)((st >> 33) % (uint64_t)(mc->vocab_size - 1));   /* never X */
        tgt[i] = (int)((st >> 13) % (uint64_t)mc->vocab_size);
    }
    tok[bad * T + 3] = tok[bad * T + T - 1] = X;
    LlamaModel probe;
    llama_describe(&probe, mc, B, T);
    const size_t P = n_trainable(&probe);
    llama_free(&probe);
    double *g = xcalloc((size_t)B * P, 8), *rn = xcalloc(B, 8), *want = xcalloc(P, 8), *out = xcalloc(P, 8), *pre = xcalloc(P, 8);
    reference(mc, T, B, tok, tgt, seed, g, rn, P);
    const double C = sqrt(rn[0]) * 0.999;                /* sample 0 clips */
    for (int b = 0; b < B; b++) {
        if (b == bad) continue;
        const double c = fmin(1.0, C / (sqrt(rn[b]) + 1e-6));
        for (size_t k = 0; k < P; k++) want[k] += c * g[(size_t)b * P + k];
    }
    const double scale = max_abs(want, P);
    float norm2[4];
    poison_token = X;
    for (int norm = 0; norm < 4; norm++)
        for (int clip = 0; clip < 2; clip++)
            for (int phys = 4; phys >= 2; phys -= 2) {
                dp_run(mc, T, B, phys, tok, tgt, seed, (DpNorm)norm, (DpClip)clip, C, 8, out, norm2, pre, NULL, NULL, NULL);
                size_t nonfinite = 0;
                for (size_t k = 0; k < P; k++) nonfinite += !isfinite(out[k]) || !isfinite(pre[k]);
                double e = nonfinite ? INFINITY : max_diff(pre, want, P), e2 = 0;
                for (size_t k = 0; k < P; k++) e2 = fmax(e2, fabs(out[k] - pre[k] / B));
                CHECK(nonfinite == 0 && e <= 1e-5 * scale && e2 <= 1e-7 * scale,
                      "NaN sample, %s+%s as %dx%d: %zu of %zu values not finite; the sum is off the other three's by %.3g, the "
                      "update off sum/4 by %.3g (scale %.3g)", dp_norm_name((DpNorm)norm), dp_clip_name((DpClip)clip), B / phys, phys,
                      nonfinite, P, e, e2, scale);
                if (phys == 4) CHECK(!isfinite(norm2[bad]), "the NaN sample's norm² is %g, want not finite", norm2[bad]);
            }
    /* the shortcut: the NaN row alone in a physical batch of 1 */
    dp_run(mc, T, 1, 1, tok + bad * T, tgt + bad * T, seed, DP_NORM_GHOST, DP_CLIP_TWOPASS, C, 8, out, NULL, NULL, NULL, NULL, NULL);
    size_t nonzero = 0;
    for (size_t k = 0; k < P; k++) nonzero += out[k] != 0.0;
    CHECK(nonzero == 0, "NaN sample alone (physical batch 1): %zu of %zu values are not exactly 0", nonzero, P);
    poison_token = -1;
    free(tok); free(tgt); free(g); free(rn); free(want); free(out); free(pre);
}

/* Timing (issue 45): the batch-1 shortcut clips the ordinary gradient by one scale; it skipped that pass
   where the factor was 1 (the sample not clipped), so the step's duration told whether the one sample's
   norm exceeded C. Now the same work runs either way: the physical batch's scale and fill calls through
   the backend's table are as many for an unclipped sample (C huge) as for a clipped one, and for a
   dropped one (c = 0: a fill instead of a scale). */
static void test_shortcut_work(const LlamaConfig *mc, int T, uint64_t seed) {
    int *tok = xcalloc((size_t)T + 1, sizeof(int)), *tgt = xcalloc((size_t)T + 1, sizeof(int));
    for (int t = 0; t < T; t++) { tok[t] = (7 * t + 3) % mc->vocab_size; tgt[t] = (5 * t + 1) % mc->vocab_size; }
    const size_t P = llama_param_count(mc);
    double *clipped = xcalloc(P, sizeof(double)), *plain = xcalloc(P, sizeof(double));
    count_ops = 1;
    dp_run(mc, T, 1, 1, tok, tgt, seed, DP_NORM_GHOST, DP_CLIP_TWOPASS, 1e-4, 8, clipped, NULL, NULL, NULL, NULL, NULL);
    const long ops_clipped = batch_ops;
    dp_run(mc, T, 1, 1, tok, tgt, seed, DP_NORM_GHOST, DP_CLIP_TWOPASS, 1e9, 8, plain, NULL, NULL, NULL, NULL, NULL);
    const long ops_plain = batch_ops;
    poison_token = tok[0];
    dp_run(mc, T, 1, 1, tok, tgt, seed, DP_NORM_GHOST, DP_CLIP_TWOPASS, 1.0, 8, clipped, NULL, NULL, NULL, NULL, NULL);
    const long ops_dropped = batch_ops;
    poison_token = -1;
    count_ops = 0;
    CHECK(ops_plain == ops_clipped && ops_dropped == ops_clipped && ops_clipped > 0,
          "batch-1 shortcut: %ld scale/fill calls for an unclipped sample, %ld for a clipped one, %ld for a dropped one: "
          "the step's work (and duration) must not say which", ops_plain, ops_clipped, ops_dropped);
    free(tok); free(tgt); free(clipped); free(plain);
}

int main(void) {
    LlamaConfig a = { .preset = "test", .vocab_size = 61, .dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                      .ffn_dim = 48, .tie_embeddings = 0, .rope_theta = 10000.0f, .norm_eps = 1e-6f };
    LlamaConfig b = { .preset = "test", .vocab_size = 37, .dim = 24, .n_layers = 1, .n_heads = 2, .n_kv_heads = 2,
                      .ffn_dim = 40, .tie_embeddings = 0, .rope_theta = 10000.0f, .norm_eps = 1e-6f };
    /* tied embeddings (Llama-3.2's layout): the matrix's per-sample gradient is e_b + h_b, whose norm
       has the cross term 2<e_b, h_b>; the reference (each sample alone through the tied model) has it */
    LlamaConfig ta = a, tb = b;
    ta.tie_embeddings = tb.tie_embeddings = 1;
    for (uint64_t seed = 1; seed <= 2; seed++) {
        test_config("GQA C32 T17 B3", &a, 3, 17, seed);
        test_config("MHA C24 T33 B4", &b, 4, 33, seed);
        test_config("tied GQA C32 T17 B3", &ta, 3, 17, seed);
        test_config("tied MHA C24 T33 B4", &tb, 4, 33, seed);
        test_config("MHA C24 T48 B4", &b, 4, 48, seed);   /* ghost's Grams above attention's scratch: no second forward */
        test_poisson(&a, 17, seed);
    }
    test_nonfinite(&a, 17, 1);
    test_shortcut_work(&a, 17, 3);
    /* sequence classification (LlamaForSequenceClassification): the score head (K x C) on each row's last
       non-pad token, one loss term per sample; padded rows, and the tied preset's layout (score untied) */
    LlamaConfig ca = a, cb = tb;
    ca.task = cb.task = LLAMA_TASK_CLASSIFY;
    ca.num_labels = 3; ca.pad_id = 0;
    cb.num_labels = 2; cb.pad_id = -1;
    test_config("classify GQA C32 T17 B3 K3 pad 0", &ca, 3, 17, 1);
    test_config("classify tied MHA C24 T33 B4 K2 no pad", &cb, 4, 33, 2);
    if (failures) { printf("%d of %d checks failed\n", failures, checks); return 1; }
    printf("dp train: %d checks passed\n", checks);
    return 0;
}
