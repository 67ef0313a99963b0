/* test_ckpt_model.c — Hugging Face checkpoints <-> the LLaMA model (samples/llama/checkpoint.c).

   Without arguments:
   - Round trip: a random tiny model (GQA, untied; then tied with llama3 rope scaling) saved with
     ckpt_save and loaded into a model built from another seed has bit-identical parameters and the
     identical loss on a fixed batch, and its config.json reads back to the same LlamaConfig. A BF16
     save loads back as the BF16 rounding of every parameter.
   - Memory: the load is tagged: the `checkpoint` category peaks at exactly the mapped file's size
     on a host backend, and at file + largest tensor (the staging buffer) on a device-space backend,
     and nothing of it stays live afterwards.
   - LoRA: adapter_model.safetensors has PEFT's names, shapes and the adapters' values, and
     adapter_config.json says LORA, r, lora_alpha and the target modules.
   - A save that fails (EFBIG) or whose writer is killed leaves the checkpoint that was there whole; one that
     succeeds keeps the directory's other files, its permissions, a symlink to it.
   - Bad checkpoints, each refused with one line naming the file and the tensor: no config.json, no
     weights, a config that does not match the model, a missing tensor (also an untied lm_head), a
     wrong shape, a tensor the model does not have, an integer dtype, a truncated file, an index
     pointing outside the directory or at a shard that lacks the tensor.
   With `--hf DIR` (tests/test_ckpt_hf.sh, after tests/test_ckpt_hf_layout.py wrote DIR): the
   checkpoint in Hugging Face's own layout loads into the expected configuration and parameter
   table, every element equals the writer's formula, and the loss equals DIR/expected.txt, computed
   independently by a pure-Python forward pass with transformers' semantics. */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"

#include "llama/checkpoint.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures = 0;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                               printf(__VA_ARGS__); printf("\n"); } } while (0)

enum { B = 2, T = 8 };

static LlamaConfig tiny_config(int tie, int llama3) {
    LlamaConfig c;
    memset(&c, 0, sizeof c);
    snprintf(c.preset, sizeof c.preset, "test");
    c.vocab_size = 61; c.dim = 32; c.n_layers = 2; c.n_heads = 4; c.n_kv_heads = 2; c.ffn_dim = 48;
    c.tie_embeddings = tie; c.rope_theta = 10000.0f; c.norm_eps = 1e-6f;
    if (llama3) { c.rope_theta = 500000.0f; c.rope_factor = 8; c.rope_low_freq_factor = 1; c.rope_high_freq_factor = 4; c.rope_original_max_pos = 64; }
    return c;
}

static int build(LlamaModel *m, KBackend *kb, const LlamaConfig *c, unsigned long long seed) {
    if (llama_build(m, kb, c, B, T, "sgd", seed, NULL, NULL) != 0) {
        printf("FAIL: llama_build: %s\n", kbackend_error(kb));
        return -1;
    }
    return 0;
}

static double loss_of(LlamaModel *m) {
    int tok[2 * B * T];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            tok[b * T + t] = (b * 7 + t * 3 + 1) % m->V;
            tok[B * T + b * T + t] = (b * 7 + (t + 1) * 3 + 1) % m->V;
        }
    double loss = NAN;
    kbuf_upload(m->kb, m->tokens, tok, sizeof(int) * B * T);
    kbuf_upload(m->kb, m->targets, tok + B * T, sizeof(int) * B * T);
    if (llama_forward(m) != 0 || llama_loss(m, &loss) != 0) printf("FAIL: forward: %s\n", kbackend_error(m->kb));
    return loss;
}

static int same_params(LlamaModel *a, LlamaModel *b, int verbose) {
    for (int i = 0; i < a->n_params; i++) {
        const ParamInfo *p = &a->params[i];
        if (memcmp(*llama_tensor(&a->w, p), *llama_tensor(&b->w, &b->params[i]), p->numel * sizeof(float)) != 0) {
            if (verbose) printf("  %s differs\n", p->hf_name);
            return 0;
        }
    }
    return 1;
}

static void test_round_trip(const char *root, int tie, int llama3) {
    char dir[512], err[CKPT_ERR];
    snprintf(dir, sizeof dir, "%s/rt_%d%d", root, tie, llama3);
    LlamaConfig c = tiny_config(tie, llama3);
    KBackend kb;
    kbackend_cpu_init(&kb, 1);
    LlamaModel a, b;
    if (build(&a, &kb, &c, 1) || build(&b, &kb, &c, 2)) return;
    CHECK(!same_params(&a, &b, 0), "two seeds gave the same parameters");
    double la = loss_of(&a);
    CHECK(ckpt_save(&a, dir, ST_F32, NULL, err, sizeof err) == 0, "save: %s", err);
    LlamaConfig back;
    memset(&back, 0, sizeof back);
    CHECK(ckpt_read_config(dir, &back, NULL, err, sizeof err) == 0, "read config: %s", err);
    CHECK(back.dim == c.dim && back.n_layers == c.n_layers && back.n_heads == c.n_heads && back.n_kv_heads == c.n_kv_heads &&
          back.ffn_dim == c.ffn_dim && back.vocab_size == c.vocab_size && back.tie_embeddings == c.tie_embeddings &&
          back.rope_theta == c.rope_theta && back.norm_eps == c.norm_eps && back.rope_factor == c.rope_factor &&
          back.rope_low_freq_factor == c.rope_low_freq_factor && back.rope_high_freq_factor == c.rope_high_freq_factor &&
          back.rope_original_max_pos == c.rope_original_max_pos, "config.json does not read back to the model's config");
    CHECK(ckpt_load(&b, dir, err, sizeof err) == 0, "load: %s", err);
    CHECK(same_params(&a, &b, 1), "tie %d llama3 %d: loaded parameters differ from the saved ones", tie, llama3);
    double lb = loss_of(&b);
    CHECK(la == lb, "tie %d llama3 %d: loss %.9g after the round trip, %.9g before", tie, llama3, lb, la);

    /* BF16: every parameter comes back as its bf16 rounding. */
    CHECK(ckpt_save(&a, dir, ST_BF16, NULL, err, sizeof err) == 0, "bf16 save: %s", err);
    CHECK(ckpt_load(&b, dir, err, sizeof err) == 0, "bf16 load: %s", err);
    int bad = 0;
    for (int i = 0; i < a.n_params; i++) {
        const float *x = *llama_tensor(&a.w, &a.params[i]), *y = *llama_tensor(&b.w, &b.params[i]);
        for (size_t k = 0; k < a.params[i].numel; k++)
            bad += y[k] != safetensors_bf16_to_f32(safetensors_f32_to_bf16(x[k]));
    }
    CHECK(bad == 0, "%d parameters are not the bf16 rounding of the saved ones", bad);
    llama_free(&a);
    llama_free(&b);
    kbackend_destroy(&kb);
}

static size_t file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (size_t)sb.st_size : 0;
}

static void test_memory(const char *root) {
    char dir[512], path[600], err[CKPT_ERR];
    snprintf(dir, sizeof dir, "%s/mem", root);
    LlamaConfig c = tiny_config(0, 0);
    for (int device = 0; device < 2; device++) {
        KBackend kb;
        kbackend_cpu_init(&kb, 1);
        if (device) kb.space = DPMEM_DEVICE; /* the staging path, on host memory */
        LlamaModel m;
        if (build(&m, &kb, &c, 3)) return;
        if (!device) CHECK(ckpt_save(&m, dir, ST_F32, NULL, err, sizeof err) == 0, "save: %s", err);
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        size_t fsize = file_size(path), largest = 0;
        for (int i = 0; i < m.n_params; i++) if (m.params[i].numel > largest) largest = m.params[i].numel;
        size_t peak0 = dpmem_peak_bytes("checkpoint");
        CHECK(ckpt_load(&m, dir, err, sizeof err) == 0, "load: %s", err);
        size_t want = fsize + (device ? largest * sizeof(float) : 0);
        CHECK(dpmem_peak_bytes("checkpoint") == (want > peak0 ? want : peak0),
              "%s backend: checkpoint peak %zu bytes, want the mapping %zu%s", device ? "device" : "host",
              dpmem_peak_bytes("checkpoint"), fsize, device ? " + the staging buffer" : "");
        CHECK(dpmem_live_bytes("checkpoint") == 0, "%zu checkpoint bytes still live after the load",
              dpmem_live_bytes("checkpoint"));
        llama_free(&m);
        kbackend_destroy(&kb);
    }
}

static void test_lora(const char *root) {
    char dir[256], path[600], err[CKPT_ERR];
    snprintf(dir, sizeof dir, "%s/lora", root);
    float a0[2 * 5], b0[3 * 2], a1[2 * 5], b1[4 * 2];
    for (int i = 0; i < 10; i++) { a0[i] = (float)i * 0.5f; a1[i] = -(float)i; }
    for (int i = 0; i < 6; i++) b0[i] = 100.0f + (float)i;
    for (int i = 0; i < 8; i++) b1[i] = 200.0f + (float)i;
    CkptLoraAdapter ad[2] = {
        {"layers.0.self_attn.q_proj", 5, 3, 2, a0, b0},
        {"layers.1.self_attn.v_proj", 5, 4, 2, a1, b1},
    };
    KBackend kb;
    kbackend_cpu_init(&kb, 1);
    CHECK(ckpt_save_lora(ad, 2, NULL, &kb, 16.0f, "meta-llama/Llama-3.2-1B", dir, err, sizeof err) == 0, "lora save: %s", err);
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    SafeTensors st;
    CHECK(safetensors_open(&st, path, err, sizeof err) == 0, "adapter file: %s", err);
    const SafeTensor *t = safetensors_find(&st, "base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight");
    float out[10];
    CHECK(st.n == 4 && t && t->ndim == 2 && t->shape[0] == 4 && t->shape[1] == 2 &&
          safetensors_to_f32(&st, t, out, 8, err, sizeof err) == 0 && memcmp(out, b1, sizeof b1) == 0,
          "lora_B of layers.1 v_proj: name, shape [out, r] or values");
    t = safetensors_find(&st, "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
    CHECK(t && t->shape[0] == 2 && t->shape[1] == 5 && safetensors_to_f32(&st, t, out, 10, err, sizeof err) == 0 &&
          memcmp(out, a0, sizeof a0) == 0, "lora_A of layers.0 q_proj: shape [r, in] or values");
    CHECK(safetensors_meta(&st, "format") && !strcmp(safetensors_meta(&st, "format"), "pt"), "format metadata");
    safetensors_close(&st);
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    FILE *f = fopen(path, "rb");
    char text[4096] = "";
    if (f) { size_t n = fread(text, 1, sizeof text - 1, f); text[n] = 0; fclose(f); }
    cJSON *j = cJSON_Parse(text);
    const cJSON *tm = cJSON_GetObjectItem(j, "target_modules");
    CHECK(j && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "peft_type")), "LORA") &&
          cJSON_GetNumberValue(cJSON_GetObjectItem(j, "r")) == 2 &&
          cJSON_GetNumberValue(cJSON_GetObjectItem(j, "lora_alpha")) == 16 && cJSON_GetArraySize(tm) == 2 &&
          !strcmp(cJSON_GetArrayItem(tm, 0)->valuestring, "q_proj") && !strcmp(cJSON_GetArrayItem(tm, 1)->valuestring, "v_proj") &&
          !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "task_type")), "CAUSAL_LM"),
          "adapter_config.json: %s", text);
    cJSON_Delete(j);
    /* From lora.h's adapters: alpha = scale * r. */
    LoraAdapter la;
    memset(&la, 0, sizeof la);
    snprintf(la.name, sizeof la.name, "layers.0.self_attn.q_proj");
    la.IC = 5; la.OC = 3; la.r = 2; la.scale = 4.0f; la.A = a0; la.B = b0;
    char sub[560];
    snprintf(sub, sizeof sub, "%s/adapter", dir);
    CHECK(ckpt_save_lora_adapters(&la, 1, NULL, &kb, NULL, sub, err, sizeof err) == 0, "lora.h save: %s", err);
    snprintf(path, sizeof path, "%s/adapter_config.json", sub);
    f = fopen(path, "rb");
    text[0] = 0;
    if (f) { size_t n = fread(text, 1, sizeof text - 1, f); text[n] = 0; fclose(f); }
    j = cJSON_Parse(text);
    CHECK(j && cJSON_GetNumberValue(cJSON_GetObjectItem(j, "lora_alpha")) == 8, "alpha from scale x r: %s", text);
    cJSON_Delete(j);
    /* A save that fails on adapter_config.json (a file-size limit that adapter_model.safetensors fits
       under) leaves the one already there whole: it is written aside and renamed, not truncated. */
    struct stat sm, sc;
    char model[600];
    snprintf(model, sizeof model, "%s/adapter_model.safetensors", sub);
    CHECK(stat(model, &sm) == 0 && stat(path, &sc) == 0 && sc.st_size > sm.st_size,
          "test bug: adapter_config.json (%lld B) should be larger than the adapter weights (%lld B)",
          (long long)sc.st_size, (long long)sm.st_size);
    la.scale = 16.0f;
    struct rlimit old_lim, lim;
    getrlimit(RLIMIT_FSIZE, &old_lim);
    lim = old_lim;
    lim.rlim_cur = (rlim_t)sm.st_size;
    void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);   /* the write fails with EFBIG instead of a kill */
    setrlimit(RLIMIT_FSIZE, &lim);
    int rc = ckpt_save_lora_adapters(&la, 1, NULL, &kb, NULL, sub, err, sizeof err);
    setrlimit(RLIMIT_FSIZE, &old_lim);
    signal(SIGXFSZ, old_sig);
    CHECK(rc == -1 && strstr(err, "adapter_config.json") && strstr(err, "write failed"),
          "a save over the file-size limit: rc %d, %s", rc, err);
    f = fopen(path, "rb");
    char after[4096] = "";
    if (f) { size_t n = fread(after, 1, sizeof after - 1, f); after[n] = 0; fclose(f); }
    CHECK(strcmp(after, text) == 0, "a failed save changed adapter_config.json (%zu bytes, was %zu)", strlen(after),
          strlen(text));
    kbackend_destroy(&kb);
}

/* Rewrites DIR/model.safetensors (F32) without `drop`, with `extra` added, with `reshape`'s two dims
   swapped; returns 0. */
static int rewrite(const char *dir, const char *drop, const char *extra, const char *reshape) {
    char path[600], err[CKPT_ERR];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    SafeTensors st;
    if (safetensors_open(&st, path, err, sizeof err)) { printf("FAIL: %s\n", err); return -1; }
    SafeTensorsWrite *w = calloc((size_t)st.n + 1, sizeof *w);
    float **bufs = calloc((size_t)st.n + 1, sizeof *bufs);
    int n = 0;
    for (int i = 0; i < st.n; i++) {
        const SafeTensor *t = &st.tensors[i];
        if (drop && !strcmp(t->name, drop)) continue;
        bufs[n] = malloc(t->numel * sizeof(float) + 4);
        safetensors_to_f32(&st, t, bufs[n], t->numel, err, sizeof err);
        w[n] = (SafeTensorsWrite){strdup(t->name), ST_F32, t->ndim, {t->shape[0], t->shape[1]}, bufs[n]};
        if (reshape && !strcmp(t->name, reshape)) { w[n].shape[0] = t->shape[1]; w[n].shape[1] = t->shape[0]; }
        n++;
    }
    if (extra) { w[n] = (SafeTensorsWrite){strdup(extra), ST_F32, 1, {1}, bufs[0]}; n++; }
    int slots = st.n + 1;
    safetensors_close(&st);
    int rc = safetensors_write(path, w, n, NULL, NULL, 0, err, sizeof err);
    for (int i = 0; i < n; i++) free((char *)w[i].name);
    for (int i = 0; i < slots; i++) free(bufs[i]);
    free(w); free(bufs);
    return rc;
}

/* Rewrites DIR/model.safetensors with every tensor as F64 (written here: the writer keeps to float
   types the trainer saves) and element `at` of `poison` set to v. */
static int rewrite_f64(const char *dir, const char *poison, size_t at, double v) {
    char path[600], err[CKPT_ERR], *head = NULL;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    SafeTensors st;
    if (safetensors_open(&st, path, err, sizeof err)) { printf("FAIL: %s\n", err); return -1; }
    size_t cap = 256 + (size_t)st.n * 200, hn = 0, total = 0;
    head = malloc(cap);
    hn += (size_t)snprintf(head + hn, cap - hn, "{");
    for (int i = 0; i < st.n; i++) {   /* st.tensors are in data order */
        const SafeTensor *t = &st.tensors[i];
        hn += (size_t)snprintf(head + hn, cap - hn, "%s\"%s\":{\"dtype\":\"F64\",\"shape\":[", i ? "," : "", t->name);
        for (int d = 0; d < t->ndim; d++) hn += (size_t)snprintf(head + hn, cap - hn, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        hn += (size_t)snprintf(head + hn, cap - hn, "],\"data_offsets\":[%zu,%zu]}", total, total + t->numel * 8);
        total += t->numel * 8;
    }
    hn += (size_t)snprintf(head + hn, cap - hn, "}");
    double *data = malloc(total + 8);
    size_t off = 0;
    for (int i = 0; i < st.n; i++) {
        const SafeTensor *t = &st.tensors[i];
        float *f = malloc(t->numel * sizeof(float) + 4);
        safetensors_to_f32(&st, t, f, t->numel, err, sizeof err);
        for (size_t k = 0; k < t->numel; k++) data[off + k] = !strcmp(t->name, poison) && k == at ? v : f[k];
        off += t->numel;
        free(f);
    }
    safetensors_close(&st);
    FILE *out = fopen(path, "wb");
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hn >> (8 * i));
    int ok = out && fwrite(len8, 1, 8, out) == 8 && fwrite(head, 1, hn, out) == hn && fwrite(data, 1, total, out) == total;
    if (out && fclose(out)) ok = 0;
    free(head); free(data);
    return ok ? 0 : -1;
}

static void expect_fail(LlamaModel *m, const char *dir, const char *what, const char *sub1, const char *sub2) {
    char err[CKPT_ERR] = "";
    int rc = ckpt_load(m, dir, err, sizeof err);
    CHECK(rc == -1, "%s: accepted", what);
    CHECK(strstr(err, sub1) && (!sub2 || strstr(err, sub2)) && !strchr(err, '\n'),
          "%s: want one line with '%s'%s%s: %s", what, sub1, sub2 ? " and " : "", sub2 ? sub2 : "", err);
}

static void write_text(const char *dir, const char *file, const char *text) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "wb");
    if (f) { fputs(text, f); fclose(f); }
}

/* A file's bytes (malloc'ed, *n set), or NULL. */
static char *slurp(const char *dir, const char *file, size_t *n) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long k = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = k >= 0 ? malloc((size_t)k + 1) : NULL;
    *n = b ? fread(b, 1, (size_t)k, f) : 0;
    fclose(f);
    return b;
}

/* The names in dir, sorted, space-separated ("" for none). */
static void listing(const char *dir, char *out, size_t n) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "ls -A '%s' 2>/dev/null | tr '\\n' ' '", dir);
    FILE *p = popen(cmd, "r");
    size_t k = p ? fread(out, 1, n - 1, p) : 0;
    out[k] = 0;
    if (p) pclose(p);
}

/* issue 44: a save that fails replaced config.json first, so the old weights were left beside a new config and
   the checkpoint there no longer loaded. Every file of a save is now written into a stage beside the directory
   and swapped in whole: a write that fails (EFBIG under a file-size limit) or a writer killed in the middle (by
   SIGXFSZ) leaves the old checkpoint byte for byte, the files it had beside it, and no stage; a save that
   succeeds keeps those files (a log, a subdirectory) and the directory's permissions. */
static void test_failed_save(const char *root) {
    char dir[512], err[CKPT_ERR], have[1024], want[1024];
    snprintf(dir, sizeof dir, "%s/whole", root);
    LlamaConfig c = tiny_config(0, 0), other = tiny_config(0, 0);
    other.ffn_dim = 64;   /* a save whose config does not describe the old weights */
    KBackend kb;
    kbackend_cpu_init(&kb, 1);
    LlamaModel a, b, back;
    if (build(&a, &kb, &c, 21) || build(&b, &kb, &other, 22) || build(&back, &kb, &c, 23)) return;
    CHECK(ckpt_save(&a, dir, ST_F32, NULL, err, sizeof err) == 0, "save: %s", err);
    write_text(dir, "run.log", "the log beside the checkpoint\n");
    char sub[600];
    snprintf(sub, sizeof sub, "%s/adapter", dir);
    mkdir(sub, 0777);
    write_text(sub, "adapter_config.json", "{}\n");
    chmod(dir, 0750);
    size_t nc0, nw0;
    char *cfg0 = slurp(dir, "config.json", &nc0), *w0 = slurp(dir, "model.safetensors", &nw0);
    CHECK(cfg0 && w0 && nw0 > 20000, "test bug: the first save wrote %zu bytes of weights", w0 ? nw0 : 0);
    listing(dir, want, sizeof want);
    for (int how = 0; cfg0 && w0 && how < 2; how++) {
        /* 0: the write fails with EFBIG (SIGXFSZ ignored); 1: a child is killed by SIGXFSZ in the middle of it */
        struct rlimit old_lim, lim;
        getrlimit(RLIMIT_FSIZE, &old_lim);
        lim = old_lim;
        lim.rlim_cur = (rlim_t)(nw0 / 2);   /* config.json fits, the weights do not */
        int rc;
        if (how == 0) {
            void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);
            setrlimit(RLIMIT_FSIZE, &lim);
            rc = ckpt_save(&b, dir, ST_F32, NULL, err, sizeof err);
            setrlimit(RLIMIT_FSIZE, &old_lim);
            signal(SIGXFSZ, old_sig);
            CHECK(rc == -1 && strstr(err, "model.safetensors: write failed: File too large") && !strchr(err, '\n'),
                  "a save over the file-size limit: rc %d, %s", rc, err);
        } else {
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) {
                signal(SIGXFSZ, SIG_DFL);
                setrlimit(RLIMIT_FSIZE, &lim);
                ckpt_save(&b, dir, ST_F32, NULL, err, sizeof err);
                _exit(0);
            }
            int st = 0;
            waitpid(pid, &st, 0);
            CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGXFSZ, "the child saving over the limit was not killed by SIGXFSZ (status %d)", st);
            snprintf(err, sizeof err, "rm -rf '%s'.tmp.*", dir);   /* what a killed writer leaves: its stage, beside */
            CHECK(system(err) == 0, "test bug: %s", err);
        }
        size_t nc1 = 0, nw1 = 0;
        char *cfg1 = slurp(dir, "config.json", &nc1), *w1 = slurp(dir, "model.safetensors", &nw1);
        CHECK(cfg1 && nc1 == nc0 && memcmp(cfg0, cfg1, nc0) == 0, "%s: config.json is no longer the old one (%zu bytes, was %zu):\n%.400s",
              how ? "a killed save" : "a failed save", nc1, nc0, cfg1 ? cfg1 : "(none)");
        CHECK(w1 && nw1 == nw0 && memcmp(w0, w1, nw0) == 0, "%s: model.safetensors is no longer the old one", how ? "a killed save" : "a failed save");
        free(cfg1); free(w1);
        CHECK(ckpt_load(&back, dir, err, sizeof err) == 0 && same_params(&a, &back, 1), "%s: the old checkpoint does not load back: %s",
              how ? "a killed save" : "a failed save", err);
        listing(dir, have, sizeof have);
        CHECK(!strcmp(have, want), "%s: the directory holds '%s', want '%s'", how ? "a killed save" : "a failed save", have, want);
        listing(root, have, sizeof have);
        CHECK(!strstr(have, ".tmp."), "%s: a stage left beside the directory: %s", how ? "a killed save" : "a failed save", have);
    }
    /* the save that succeeds: the new checkpoint, the other files kept, the permissions too; a directory that holds
       the stage's first name already (someone's own) is left alone */
    char taken[600];
    snprintf(taken, sizeof taken, "%s.tmp.%ld", dir, (long)getpid());
    mkdir(taken, 0777);
    write_text(taken, "mine.txt", "not the saver's\n");
    CHECK(ckpt_save(&b, dir, ST_F32, NULL, err, sizeof err) == 0, "the save after the failed ones: %s", err);
    size_t nm = 0;
    char *mine = slurp(taken, "mine.txt", &nm);
    CHECK(mine && nm == 16, "the save used (and emptied) a directory that held its stage's name");
    free(mine);
    snprintf(err, sizeof err, "rm -rf '%s'", taken);
    CHECK(system(err) == 0, "test bug: %s", err);
    LlamaConfig got;
    memset(&got, 0, sizeof got);
    CHECK(ckpt_read_config(dir, &got, NULL, err, sizeof err) == 0 && got.ffn_dim == 64, "the new config: ffn %d %s", got.ffn_dim, err);
    listing(dir, have, sizeof have);
    CHECK(!strcmp(have, want), "a save over the directory: it holds '%s', want '%s'", have, want);
    size_t nl = 0, na = 0;
    char *log = slurp(dir, "run.log", &nl), *ad = slurp(sub, "adapter_config.json", &na);
    CHECK(log && nl == 30 && ad && na == 3, "the files beside the checkpoint were not kept (run.log %zu bytes, adapter/ %zu)", nl, na);
    free(log); free(ad);
    struct stat sb;
    CHECK(stat(dir, &sb) == 0 && (sb.st_mode & 07777) == 0750, "the directory's mode is %o, was 750", (unsigned)(sb.st_mode & 07777));
    listing(root, have, sizeof have);
    CHECK(!strstr(have, ".tmp.") && !strstr(have, ".old."), "a save left something beside the directory: %s", have);
    /* through a symlink: the link stays a link, its target gets the checkpoint */
    char link[600];
    snprintf(link, sizeof link, "%s/via", root);
    CHECK(symlink("whole", link) == 0 && ckpt_save(&a, link, ST_F32, NULL, err, sizeof err) == 0, "a save through a symlink: %s", err);
    CHECK(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode) && ckpt_load(&back, dir, err, sizeof err) == 0 && same_params(&a, &back, 1),
          "a save through a symlink did not keep the link or write its target: %s", err);
    /* into the working directory ("--save ."): the process stays in the directory that holds the checkpoint */
    char here[1024], cwd[1024];
    CHECK(getcwd(here, sizeof here) && chdir(dir) == 0 && ckpt_save(&b, ".", ST_F32, NULL, err, sizeof err) == 0, "--save .: %s", err);
    CHECK(getcwd(cwd, sizeof cwd) && access("config.json", R_OK) == 0 && ckpt_read_config(".", &got, NULL, err, sizeof err) == 0 &&
          got.ffn_dim == 64, "after --save . the working directory lost the checkpoint: %s", err);
    CHECK(chdir(here) == 0, "test bug: chdir back");
    free(cfg0); free(w0);
    llama_free(&a); llama_free(&b); llama_free(&back);
    kbackend_destroy(&kb);
}

static void test_bad(const char *root) {
    char dir[512], path[600], err[CKPT_ERR];
    snprintf(dir, sizeof dir, "%s/bad", root);
    LlamaConfig c = tiny_config(0, 0);
    KBackend kb;
    kbackend_cpu_init(&kb, 1);
    LlamaModel m;
    if (build(&m, &kb, &c, 4)) return;
    expect_fail(&m, dir, "no directory", "config.json", "No such file");
    {   /* head_dim x heads in 64 bits: 65538 x 65536 wrapped in int to hidden_size 131072 (head_dim 2 planned) */
        char hd[512];
        LlamaConfig got;
        snprintf(hd, sizeof hd, "%s/hd", root);
        mkdir(hd, 0777);
        write_text(hd, "config.json", "{\"hidden_size\": 131072, \"intermediate_size\": 64, \"num_hidden_layers\": 1, "
                   "\"num_attention_heads\": 65536, \"head_dim\": 65538, \"vocab_size\": 10}");
        int rc = ckpt_read_config(hd, &got, NULL, err, sizeof err);
        CHECK(rc == -1 && strstr(err, "head_dim 65538 x num_attention_heads 65536 != hidden_size 131072"),
              "a head_dim whose product with the heads overflows int: rc %d, %s", rc, rc ? err : "");
    }
    CHECK(ckpt_save(&m, dir, ST_F32, NULL, err, sizeof err) == 0, "save: %s", err);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    expect_fail(&m, dir, "no weights", "neither model.safetensors", dir);

    #define RESAVE() CHECK(ckpt_save(&m, dir, ST_F32, NULL, err, sizeof err) == 0, "save: %s", err)
    RESAVE();
    LlamaConfig other = c;
    other.ffn_dim = 64;
    LlamaModel m2;
    if (build(&m2, &kb, &other, 4) == 0) {
        expect_fail(&m2, dir, "config mismatch", "intermediate_size", "config.json");
        llama_free(&m2);
    }
    rewrite(dir, "model.layers.1.mlp.up_proj.weight", NULL, NULL);
    expect_fail(&m, dir, "missing tensor", "model.layers.1.mlp.up_proj.weight", "missing");
    RESAVE();
    rewrite(dir, "lm_head.weight", NULL, NULL);
    expect_fail(&m, dir, "untied model without lm_head", "'lm_head.weight'", "missing");
    RESAVE();
    rewrite(dir, NULL, NULL, "model.layers.0.self_attn.k_proj.weight");
    expect_fail(&m, dir, "transposed k_proj", "model.safetensors: tensor 'model.layers.0.self_attn.k_proj.weight'",
                "shape [32, 16], the model expects [16, 32]");
    RESAVE();
    rewrite(dir, NULL, "model.layers.2.mlp.up_proj.weight", NULL);
    expect_fail(&m, dir, "a third layer", "'model.layers.2.mlp.up_proj.weight'", "no place");
    RESAVE();
    rewrite(dir, NULL, "model.evil\nname", NULL);
    expect_fail(&m, dir, "a name with a newline", "'model.evil?name'", "no place");
    RESAVE();
    rewrite(dir, NULL, "model.layers.0.self_attn.rotary_emb.inv_freq", NULL);
    CHECK(ckpt_load(&m, dir, err, sizeof err) == 0, "an old rotary_emb.inv_freq buffer must be ignored: %s", err);

    /* An integer dtype: patch "F32" to "I32" in the header of model.norm.weight (same length). */
    RESAVE();
    FILE *f = fopen(path, "r+b");
    char head[8192] = "";
    size_t n = f ? fread(head, 1, sizeof head - 1, f) : 0;
    char *p = n ? strstr(head + 8, "\"model.norm.weight\":{\"dtype\":\"F32\"") : NULL;
    if (p) { fseek(f, (long)(p - head) + (long)strlen("\"model.norm.weight\":{\"dtype\":\""), SEEK_SET); fputc('I', f); }
    if (f) fclose(f);
    CHECK(p != NULL, "test bug: model.norm.weight not found in the header");
    expect_fail(&m, dir, "I32 norm", "'model.norm.weight'", "I32");

    /* Values that are not finite, or an F64 beyond fp32's range, name the tensor and the element at
       load (they trained to "loss -nan" with exit 0); ckpt_load_allowing(.., 1, ..) loads them. Loaded
       into m3: a failed load leaves what it had written (the trainer stops), and m saves the good
       checkpoint again between the cases. */
    LlamaModel m3;
    if (build(&m3, &kb, &c, 5) == 0) {
        RESAVE();
        CHECK(rewrite_f64(dir, "model.layers.0.mlp.down_proj.weight", 0, 0.25) == 0 &&
              ckpt_load(&m3, dir, err, sizeof err) == 0, "an all-F64 checkpoint: %s", err);
        RESAVE();
        CHECK(rewrite_f64(dir, "model.layers.1.self_attn.q_proj.weight", 5, NAN) == 0, "test bug: F64 rewrite");
        expect_fail(&m3, dir, "a NaN weight", "tensor 'model.layers.1.self_attn.q_proj.weight': element 5 is NaN",
                    "--allow-nonfinite");
        RESAVE();
        CHECK(rewrite_f64(dir, "model.norm.weight", 7, -INFINITY) == 0, "test bug: F64 rewrite");
        expect_fail(&m3, dir, "an infinite weight", "tensor 'model.norm.weight': element 7 is -inf", NULL);
        RESAVE();
        CHECK(rewrite_f64(dir, "model.embed_tokens.weight", 11, 1e300) == 0, "test bug: F64 rewrite");
        expect_fail(&m3, dir, "an F64 beyond fp32", "tensor 'model.embed_tokens.weight': element 11 is 1e+300",
                    "beyond fp32's range");
        CHECK(ckpt_load_allowing(&m3, dir, 1, err, sizeof err) == 0, "--allow-nonfinite refused the load: %s", err);
        float *emb = *llama_tensor(&m3.w, &m3.params[0]);
        CHECK(!strcmp(m3.params[0].hf_name, "model.embed_tokens.weight") && isinf(emb[11]) && emb[11] > 0,
              "an F64 of 1e300 loaded as %g, want +inf", (double)emb[11]);
        /* F32 NaN too (the file as the trainer writes it) */
        RESAVE();
        float *q = *llama_tensor(&m.w, &m.params[1]);
        float keep = q[2];
        q[2] = NAN;
        RESAVE();
        q[2] = keep;
        char want[200];
        snprintf(want, sizeof want, "tensor '%s': element 2 is NaN", m.params[1].hf_name);
        expect_fail(&m3, dir, "an F32 NaN", want, NULL);
        llama_free(&m3);
    }

    RESAVE();
    size_t size = file_size(path);
    CHECK(truncate(path, (off_t)size - 10) == 0, "truncate");
    expect_fail(&m, dir, "truncated file", "model.safetensors", "truncated");

    /* A sharded checkpoint whose index misbehaves. */
    RESAVE();
    char shard[600];
    snprintf(shard, sizeof shard, "%s/model-00001-of-00001.safetensors", dir);
    rename(path, shard);
    write_text(dir, "model.safetensors.index.json",
               "{\"metadata\":{},\"weight_map\":{\"model.norm.weight\":\"../model-00001-of-00001.safetensors\"}}");
    expect_fail(&m, dir, "index escaping the directory", "model.safetensors.index.json", "not a plain file name");
    write_text(dir, "model.safetensors.index.json",
               "{\"metadata\":{},\"weight_map\":{\"model.ghost.weight\":\"model-00001-of-00001.safetensors\"}}");
    expect_fail(&m, dir, "index naming a tensor no shard has", "'model.ghost.weight'", "no shard holds it");
    write_text(dir, "model.safetensors.index.json", "{\"weight_map\": 3}");
    expect_fail(&m, dir, "index without a map", "model.safetensors.index.json", "weight_map");
    write_text(dir, "model.safetensors.index.json", "{\"weight_map\":{\"model.norm.weight\":\"model-00009.safetensors\"}}");
    expect_fail(&m, dir, "index naming a missing shard", "model-00009.safetensors", "No such file");
    /* The index done right loads. */
    SafeTensors st;
    if (safetensors_open(&st, shard, err, sizeof err) == 0) {
        cJSON *j = cJSON_CreateObject(), *map = cJSON_AddObjectToObject(j, "weight_map");
        for (int i = 0; i < st.n; i++) cJSON_AddStringToObject(map, st.tensors[i].name, "model-00001-of-00001.safetensors");
        char *text = cJSON_Print(j);
        write_text(dir, "model.safetensors.index.json", text);
        free(text);
        cJSON_Delete(j);
        safetensors_close(&st);
        CHECK(ckpt_load(&m, dir, err, sizeof err) == 0, "a valid index is refused: %s", err);
    }
    /* A shard whose name drives a terminal (ESC ] title BEL, ESC [ colour), named by the index and
       really there, holding an I32 norm: no control byte reaches the message (it was printed raw in
       the dtype/shape/"no place" errors, issue 36). */
    {
        const char *evil = "model-\x1b]0;pwned\x07\x1b[31m-00001.safetensors";
        char evil_path[700];
        snprintf(evil_path, sizeof evil_path, "%s/%s", dir, evil);
        CHECK(rename(shard, evil_path) == 0, "test bug: rename to the evil shard name");
        FILE *ef = fopen(evil_path, "r+b");
        char ehead[8192] = "";
        size_t en = ef ? fread(ehead, 1, sizeof ehead - 1, ef) : 0;
        char *ep = en ? strstr(ehead + 8, "\"model.norm.weight\":{\"dtype\":\"F32\"") : NULL;
        if (ep) { fseek(ef, (long)(ep - ehead) + (long)strlen("\"model.norm.weight\":{\"dtype\":\""), SEEK_SET); fputc('I', ef); }
        if (ef) fclose(ef);
        CHECK(ep != NULL, "test bug: model.norm.weight not found in the shard's header");
        SafeTensors es;
        if (safetensors_open(&es, evil_path, err, sizeof err) == 0) {
            cJSON *j = cJSON_CreateObject(), *map = cJSON_AddObjectToObject(j, "weight_map");
            for (int i = 0; i < es.n; i++) cJSON_AddStringToObject(map, es.tensors[i].name, evil);
            char *text = cJSON_Print(j);
            write_text(dir, "model.safetensors.index.json", text);
            free(text);
            cJSON_Delete(j);
            safetensors_close(&es);
        } else CHECK(0, "test bug: the evil shard does not open: %s", err);
        err[0] = 0;
        CHECK(ckpt_load(&m, dir, err, sizeof err) == -1, "an index naming a shard with ESC/BEL: accepted");
        int raw = 0;
        for (const char *c = err; *c; c++) raw |= (unsigned char)*c < 0x20 || *c == 0x7f;
        CHECK(!raw && strstr(err, "model-?]0;pwned??[31m-00001.safetensors"),
              "a shard named with ESC/BEL reaches the message raw or unnamed: %s", err);
        unlink(evil_path);
    }
    llama_free(&m);
    kbackend_destroy(&kb);
}

/* The checkpoint in Hugging Face's layout written by tests/test_ckpt_hf_layout.py. */
static float value_of(const char *name, size_t k) {
    int h = 0;
    for (const char *p = name; *p; p++) h += (unsigned char)*p;
    h %= 97;
    size_t len = strlen(name);
    int is_norm = (len >= 16 && !strcmp(name + len - 16, "layernorm.weight")) || !strcmp(name, "model.norm.weight");
    if (is_norm) return 1.0f + (float)((int)((k + (size_t)h) % 5) - 2) / 8.0f;
    return (float)((int)((h * 7 + k * 13) % 255) - 127) / 64.0f / 8.0f;
}

static int test_hf(const char *dir) {
    char err[CKPT_ERR], path[600];
    LlamaConfig c;
    memset(&c, 0, sizeof c);
    HFConfig hf;
    if (ckpt_read_config(dir, &c, &hf, err, sizeof err)) { printf("FAIL: %s\n", err); return 1; }
    CHECK(c.vocab_size == 50 && c.dim == 32 && c.n_layers == 2 && c.n_heads == 4 && c.n_kv_heads == 2 && c.ffn_dim == 64 &&
          c.tie_embeddings == 1 && c.norm_eps == 1e-5f && c.rope_theta == 10000.0f && c.rope_factor == 8 &&
          c.rope_low_freq_factor == 1 && c.rope_high_freq_factor == 4 && c.rope_original_max_pos == 64 &&
          c.max_pos == 131072, "the configuration read from %s/config.json", dir);
    KBackend kb;
    kbackend_cpu_init(&kb, 1);
    LlamaModel m;
    if (build(&m, &kb, &c, 5)) return 1;
    CHECK(m.n_params == 20, "%d parameters in the table, want 20 (tied: no lm_head)", m.n_params);
    static const char *const want[] = {
        "model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
        "model.layers.0.self_attn.v_proj.weight", "model.layers.0.self_attn.o_proj.weight",
        "model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.down_proj.weight",
        "model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight",
    };
    static const int rows[] = {50, 32, 16, 16, 32, 64, 64, 32, 1, 1}, cols[] = {32, 32, 32, 32, 32, 32, 32, 64, 32, 32};
    for (int i = 0; i < 10 && i < m.n_params; i++)
        CHECK(!strcmp(m.params[i].hf_name, want[i]) && m.params[i].rows == rows[i] && m.params[i].cols == cols[i],
              "parameter %d: %s (%d, %d), want %s (%d, %d)", i, m.params[i].hf_name, m.params[i].rows, m.params[i].cols,
              want[i], rows[i], cols[i]);
    CHECK(!strcmp(m.params[19].hf_name, "model.norm.weight"), "last parameter %s", m.params[19].hf_name);
    CHECK(ckpt_load(&m, dir, err, sizeof err) == 0, "load: %s", err);
    int bad = 0;
    for (int i = 0; i < m.n_params; i++) {
        const float *x = *llama_tensor(&m.w, &m.params[i]);
        for (size_t k = 0; k < m.params[i].numel; k++)
            if (x[k] != value_of(m.params[i].hf_name, k)) {
                if (bad++ < 3) printf("  %s[%zu] = %g, want %g\n", m.params[i].hf_name, k, x[k], value_of(m.params[i].hf_name, k));
            }
    }
    CHECK(bad == 0, "%d loaded values differ from the writer's", bad);
    snprintf(path, sizeof path, "%s/expected.txt", dir);
    FILE *f = fopen(path, "r");
    double expected = NAN;
    if (!f || fscanf(f, "%lf", &expected) != 1) printf("FAIL: cannot read %s\n", path);
    if (f) fclose(f);
    double loss = loss_of(&m);
    CHECK(fabs(loss - expected) < 2e-5, "loss %.8f, the independent Python forward gives %.8f", loss, expected);
    /* The scaling reaches the kernels: without it the same weights give another loss. */
    m.cfg.rope_factor = 0;
    double plain = loss_of(&m);
    CHECK(fabs(plain - expected) > 1e-4, "loss without llama3 scaling %.8f equals the scaled one", plain);
    llama_free(&m);
    kbackend_destroy(&kb);
    if (failures) { printf("%d check(s) failed\n", failures); return 1; }
    printf("HF layout %s: config, parameter table, every value and the loss (%.6f vs %.6f) OK\n", dir, loss, expected);
    return 0;
}

static void rm_rf(const char *dir) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("note: could not remove %s\n", dir);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--hf")) return test_hf(argv[2]);
    char root[] = "/tmp/test_ckpt_model_XXXXXX";
    if (!mkdtemp(root)) { printf("FAIL: mkdtemp\n"); return 1; }
    test_round_trip(root, 0, 0);
    test_round_trip(root, 1, 1);
    test_memory(root);
    test_lora(root);
    test_failed_save(root);
    test_bad(root);
    rm_rf(root);
    if (failures) { printf("%d check(s) failed\n", failures); return 1; }
    printf("checkpoints: round trips (f32 exact, bf16 rounded), tagged load memory, LoRA/PEFT files, bad checkpoints OK\n");
    return 0;
}
