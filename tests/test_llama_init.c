/* test_llama_init.c — the initial weights, drawn by the init_normal op from kernels/noise.h's stream.
   1. The CPU op: every value of tensors of odd sizes (inside one Philox block, one batch of 256, across
      the 16384-value chunks the threads share) equals (float)(std · noise_normal(seed, stream, i)), the
      stream's scalar definition, bit for bit, on 1 and on 2 threads.
   2. The model: every matrix of the tiny model equals 0.02 · z(seed, llama_init_stream(name), i) bit for
      bit, every norm weight is 1; a tensor's values depend on the seed and its name alone (the same
      layers.0/1 with 2 or 3 layers, the same embed_tokens tied or not; another seed, other values);
      llama_init_stream puts "INIT" in the step's high word and gives every tensor of the largest
      presets its own stream.
   3. A plan for CUDA: building the model allocates no host memory at all (the device's weights are
      drawn on the device; the host staging buffer workspace/init_staging is gone).
   The GPU twin against this one: tests/test_cuda_kernels.cu (group init). Prints the CPU op's speed. */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "llama/train.h"
#include "noise.h"
#include "check.h"
#include "cuda/kernels_cuda.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t bits_differ(const float *x, size_t n, double std, uint64_t seed, uint64_t stream, size_t *first_bad) {
    uint64_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const float want = (float)(std * noise_normal(seed, stream, i));
        if (memcmp(&x[i], &want, sizeof want) != 0) {
            if (!bad && first_bad) *first_bad = i;
            bad++;
        }
    }
    return bad;
}

static void test_op(void) {
    const size_t sizes[] = { 1, 3, 4, 5, 255, 256, 257, 1000, 16384, 16384 + 7, 3 * 16384 + 1, 100003 };
    const uint64_t seed = 0x1234567890abcdefull, stream = 0x494E4954deadbeefull;
    for (int nt = 1; nt <= 2; nt++) {
        KBackend kb;
        kbackend_cpu_init(&kb, nt);
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            const size_t n = sizes[s];
            float *x = kbuf_alloc(&kb, n * sizeof *x, "params/x");
            CHECK(x != NULL);
            if (!x) continue;
            for (size_t i = 0; i < n; i++) x[i] = NAN;   /* every value must be written */
            CHECK(init_normal(&kb, x, n, 0.02, seed, stream) == 0);
            size_t at = 0;
            uint64_t bad = bits_differ(x, n, 0.02, seed, stream, &at);
            if (bad) fprintf(stderr, "  %d thread(s), n = %zu: %llu values differ from noise_normal's, first at %zu\n",
                             nt, n, (unsigned long long)bad, at);
            CHECK(bad == 0);
            kbuf_free(&kb, x);
        }
        /* another std scales the same z */
        float *y = kbuf_alloc(&kb, 1001 * sizeof *y, "params/y");
        CHECK(init_normal(&kb, y, 1001, 1.0, 7, 9) == 0);
        CHECK(bits_differ(y, 1001, 1.0, 7, 9, NULL) == 0);
        kbuf_free(&kb, y);
        kbackend_destroy(&kb);
    }
}

static int build_tiny(LlamaModel *m, KBackend *kb, int L, int tied, unsigned long long seed) {
    TrainConfig c;
    config_defaults(&c);
    config_preset(&c, "tiny");
    c.model.n_layers = L;
    c.model.tie_embeddings = tied;
    kbackend_cpu_init(kb, 2);
    if (llama_build(m, kb, &c.model, 1, 8, "adamw", seed, NULL, NULL) != 0) {
        fprintf(stderr, "build: %s\n", kbackend_error(kb));
        return -1;
    }
    return 0;
}

static const float *tensor_named(LlamaModel *m, const char *name) {
    for (int i = 0; i < m->n_params; i++)
        if (!strcmp(m->params[i].name, name)) return *llama_tensor(&m->w, &m->params[i]);
    return NULL;
}

static void test_model(void) {
    const unsigned long long seed = 1234;
    KBackend kb2, kb3, kbt, kbs;
    LlamaModel m2, m3, mt, ms;
    if (build_tiny(&m2, &kb2, 2, 0, seed) || build_tiny(&m3, &kb3, 3, 0, seed) || build_tiny(&mt, &kbt, 2, 1, seed) ||
        build_tiny(&ms, &kbs, 2, 0, seed + 1)) {
        CHECK(0);
        return;
    }
    int matrices = 0, norms = 0;
    for (int i = 0; i < m2.n_params; i++) {
        const ParamInfo *p = &m2.params[i];
        const float *x = *llama_tensor(&m2.w, p);
        if (p->kind == HOOK_RMSNORM) {
            size_t ones = 0;
            for (size_t k = 0; k < p->numel; k++) ones += x[k] == 1.0f;
            CHECK_EQ_U(ones, p->numel);
            norms++;
            continue;
        }
        size_t at = 0;
        uint64_t bad = bits_differ(x, p->numel, 0.02, seed, llama_init_stream(p->name), &at);
        if (bad) fprintf(stderr, "  %s: %llu of %zu values differ, first at %zu\n", p->name, (unsigned long long)bad, p->numel, at);
        CHECK(bad == 0);
        matrices++;
        /* the same tensor in the 3-layer and the tied model; another seed: another tensor */
        const float *y = tensor_named(&m3, p->name), *t = tensor_named(&mt, p->name), *o = tensor_named(&ms, p->name);
        CHECK(y && memcmp(x, y, p->numel * sizeof *x) == 0);
        if (p->which != W_LM_HEAD) CHECK(t && memcmp(x, t, p->numel * sizeof *x) == 0);
        CHECK(o && memcmp(x, o, p->numel * sizeof *x) != 0);
    }
    CHECK_EQ_U(matrices, 1 + 7 * 2 + 1);   /* embed_tokens, 7 per layer, lm_head */
    CHECK_EQ_U(norms, 2 * 2 + 1);
    /* the tied model's lm_head is embed_tokens */
    CHECK(mt.w.lm_head == mt.w.embed_tokens);
    /* statistics of the biggest matrix (embed_tokens: 64 000 values): mean 0 and std 0.02 within 5 standard errors */
    const ParamInfo *e = &m2.params[0];
    double s = 0, s2 = 0;
    for (size_t k = 0; k < e->numel; k++) { s += m2.w.embed_tokens[k]; s2 += (double)m2.w.embed_tokens[k] * m2.w.embed_tokens[k]; }
    const double mean = s / e->numel, sd = sqrt(s2 / e->numel - mean * mean);
    printf("embed_tokens: %zu values, mean %.3g, std %.6f (want 0, 0.02)\n", e->numel, mean, sd);
    CHECK(fabs(mean) < 5 * 0.02 / sqrt((double)e->numel));
    CHECK(fabs(sd - 0.02) < 5 * 0.02 / sqrt(2.0 * e->numel));
    llama_free(&m2); llama_free(&m3); llama_free(&mt); llama_free(&ms);
    kbackend_destroy(&kb2); kbackend_destroy(&kb3); kbackend_destroy(&kbt); kbackend_destroy(&kbs);
}

/* Every tensor name of a preset (untied: lm_head too) gets its own stream, with "INIT" above it. */
static void test_streams(void) {
    static const char *const presets[] = { "3b", "llama3.2-3b", "1b" };
    for (size_t k = 0; k < sizeof presets / sizeof *presets; k++) {
        TrainConfig c;
        config_defaults(&c);
        config_preset(&c, presets[k]);
        c.model.tie_embeddings = 0;
        LlamaModel m;
        CHECK(llama_describe(&m, &c.model, 1, 8) == 0);
        int same = 0;
        for (int i = 0; i < m.n_params; i++) {
            const uint64_t si = llama_init_stream(m.params[i].name);
            CHECK((si >> 32) == 0x494E4954u);
            for (int j = 0; j < i; j++) same += si == llama_init_stream(m.params[j].name);
        }
        printf("%s: %d tensors, %d sharing a stream\n", presets[k], m.n_params, same);
        CHECK(same == 0);
        llama_free(&m);
    }
}

/* Building the 1b model on a plan for CUDA: every byte on the device, none on the host. */
static void test_cuda_plan(void) {
    TrainConfig c;
    config_defaults(&c);
    config_preset(&c, "1b");
    KBackend kb;
    CHECK(kbackend_cuda_plan_init(&kb) == 0);
    dpmem_reset_peak();
    const size_t host0 = dpmem_live_bytes_in(DPMEM_HOST), ws0 = dpmem_peak_bytes("workspace");
    LlamaModel m;
    CHECK(llama_build(&m, &kb, &c.model, 1, 8, "adamw", 1, NULL, NULL) == 0);
    printf("1b planned for cuda: workspace peak %zu bytes during the build, host live %zu\n",
           dpmem_peak_bytes("workspace") - ws0, dpmem_live_bytes_in(DPMEM_HOST) - host0);
    CHECK_EQ_U(dpmem_peak_bytes("workspace"), ws0);   /* was the largest tensor's bytes (init_staging) */
    CHECK_EQ_U(dpmem_live_bytes_in(DPMEM_HOST), host0);
    CHECK(dpmem_live_bytes_in(DPMEM_DEVICE) >= m.bytes_params);
    llama_free(&m);
    kbackend_destroy(&kb);
}

/* Not asserted (a shared machine): ns per value of the CPU op on the backend's threads. */
static void time_op(void) {
    KBackend kb;
    kbackend_cpu_init(&kb, 0);
    const size_t n = (size_t)1 << 24;
    float *x = kbuf_alloc(&kb, n * sizeof *x, "params/big");
    if (!x) return;
    init_normal(&kb, x, n, 0.02, 1, 2);   /* pages touched */
    const uint64_t t0 = dpmem_now_ns();
    init_normal(&kb, x, n, 0.02, 1, 3);
    const double ns = (double)(dpmem_now_ns() - t0) / (double)n;
    printf("init_normal on %d thread(s): %.2f ns per value (a 1B model's 1.16e9 values: %.1f s)\n", kb.nthreads, ns, ns * 1.16);
    kbuf_free(&kb, x);
    kbackend_destroy(&kb);
}

int main(void) {
    test_op();
    test_model();
    test_streams();
    test_cuda_plan();
    time_op();
    return check_exit("test_llama_init");
}
