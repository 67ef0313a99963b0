/* test_dp_cuda.c — the DP samples' plan for the CUDA target is that of the CUDA path (runs everywhere,
   no GPU needed). For every --norm × --clip (and LoRA, and Poisson sampling) it plans one step of the
   tiny model twice, `--device plan --plan-for cpu` and `--device plan --plan-for cuda`, reads both
   dpmem logs and asserts, on the DP buffers (tags norms/, per_sample_grads/, ghost/, bk/, lora/):
     - the CUDA plan has no ghost/<param>.tile (the GPU flash kernel keeps its tiles on chip), and the
       CPU plan has them wherever flash ran (so the comparison below is not vacuous);
     - apart from those tiles, the two plans allocate the same tags, sizes, in the same order (mixed's
       streamed per-sample gradients, `.stream`, hold one sample per CPU thread, one on the GPU);
     - every DP buffer of the CUDA plan is in device memory (space 1): no host-side scratch;
     - under --precision bf16 the CPU plan widens A and G (workspace/dp_widen.*), the CUDA plan never;
   and that `--plan-for cuda` no longer stops with an error. The GPU run itself is
   tests/test_dp_cuda_gpu.c. Binaries through DPMEM_BUILD (default "build"). */
#include "logread.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_dp_common.h"


typedef struct { char tag[160]; uint64_t bytes; uint32_t space; } Alloc;

static const char *g_extra_tag = NULL;   /* read_allocs also counts tags with this prefix (in g_extra) */
static int g_extra;

static int dp_tag(const char *t) {
    static const char *pre[] = { "norms/", "per_sample_grads/", "ghost/", "bk/", "lora/" };
    if (g_extra_tag && !strncmp(t, g_extra_tag, strlen(g_extra_tag))) { g_extra++; return 0; }
    for (size_t i = 0; i < sizeof pre / sizeof *pre; i++)
        if (!strncmp(t, pre[i], strlen(pre[i]))) return 1;
    return 0;
}

static int ends_with(const char *t, const char *suffix) {
    size_t n = strlen(t), k = strlen(suffix);
    return n > k && !strcmp(t + n - k, suffix);
}
static int is_tile(const char *t) { return ends_with(t, ".tile"); }

/* Both plans run with --threads 2 and the tiny model's batch of 4: the CPU streams mixed's per-sample
   gradients two samples at a time (one per thread), the GPU one at a time. */
enum { PLAN_THREADS = 2, TINY_BATCH = 4 };

/* The DP allocations of a log, in order; the count, or -1. */
static int read_allocs(const char *path, Alloc *out, int cap) {
    LogFile lf;
    char err[256];
    if (log_read(path, &lf, err, sizeof err)) { printf("FAIL reading %s: %s\n", path, err); failures++; log_free(&lf); return -1; }
    int n = 0;
    for (size_t i = 0; i < lf.nev; i++) {
        const LogEvent *e = &lf.ev[i];
        if (e->type != 6 || e->payload_bytes < 16) continue;
        const char *t = log_str(&lf, e->id);
        if (!dp_tag(t)) continue;
        if (n == cap) { printf("FAIL %s: more than %d DP allocations\n", path, cap); failures++; break; }
        snprintf(out[n].tag, sizeof out[n].tag, "%s", t);
        out[n].bytes = lr_u64(e->payload + 8);
        out[n].space = e->aux;
        n++;
    }
    log_free(&lf);
    return n;
}

enum { CAP = 4096 };
static Alloc cpu[CAP], gpu[CAP];

/* One configuration: prog with args, planned for both targets, compared. expect_tiles: the CPU plan
   must have flash tiles. Under --precision bf16 the CPU plan also widens A and G
   (workspace/dp_widen.*) and the CUDA plan must not (its kernels read bf16). */
static void check_config(const char *dir, const char *prog, const char *args, int expect_tiles) {
    const int bf16 = strstr(args, "bf16") != NULL;
    char a[1024], out[8192], lc[512], lg[512];
    snprintf(lc, sizeof lc, "%s/cpu.log", dir);
    snprintf(lg, sizeof lg, "%s/cuda.log", dir);
    unlink(lc); unlink(lg);
    snprintf(a, sizeof a, "--model tiny --steps 2 --quiet --threads 2 --device plan --plan-for cpu --log %s %s", lc, args);
    int rc = run(prog, a, out, sizeof out);
    CHECK(rc == 0, "%s %s: exit %d: %s", prog, a, rc, out);
    snprintf(a, sizeof a, "--model tiny --steps 2 --quiet --threads 2 --device plan --plan-for cuda --log %s %s", lg, args);
    rc = run(prog, a, out, sizeof out);
    CHECK(rc == 0, "%s %s: exit %d: %s", prog, a, rc, out);
    if (rc) return;
    g_extra_tag = "workspace/dp_widen."; g_extra = 0;
    int nc = read_allocs(lc, cpu, CAP);
    const int widen_cpu = g_extra;
    g_extra = 0;
    int ng = read_allocs(lg, gpu, CAP);
    const int widen_gpu = g_extra;
    g_extra_tag = NULL;
    if (nc < 0 || ng < 0) return;
    CHECK(widen_gpu == 0, "%s %s: the CUDA plan widens A or G %d times (the GPU kernels read bf16)", prog, args, widen_gpu);
    CHECK(bf16 ? widen_cpu > 0 : widen_cpu == 0, "%s %s: the CPU plan widens %d times", prog, args, widen_cpu);
    int tiles = 0, j = 0, dp = 0;
    for (int i = 0; i < ng; i++) {
        CHECK(!is_tile(gpu[i].tag), "%s %s: the CUDA plan allocates %s (the GPU kernel needs no tile)", prog, args, gpu[i].tag);
        CHECK(gpu[i].space == 1, "%s %s: %s in memory space %u in the CUDA plan, not the device", prog, args, gpu[i].tag, gpu[i].space);
    }
    for (int i = 0; i < nc; i++) {
        if (is_tile(cpu[i].tag)) { tiles++; continue; }
        dp++;
        if (j >= ng) { CHECK(0, "%s %s: the CUDA plan lacks %s (%llu bytes)", prog, args, cpu[i].tag, (unsigned long long)cpu[i].bytes); break; }
        const uint64_t per_thread = ends_with(cpu[i].tag, ".stream") ? (PLAN_THREADS < TINY_BATCH ? PLAN_THREADS : TINY_BATCH) : 1;
        if (strcmp(cpu[i].tag, gpu[j].tag) || cpu[i].bytes != per_thread * gpu[j].bytes) {
            CHECK(0, "%s %s: DP allocation %d: cpu %s %llu bytes, cuda %s %llu bytes", prog, args, i, cpu[i].tag,
                  (unsigned long long)cpu[i].bytes, gpu[j].tag, (unsigned long long)gpu[j].bytes);
            break;
        }
        j++;
    }
    if (j == dp) CHECK(j == ng, "%s %s: the CUDA plan has %d DP allocations more than the CPU plan (first: %s)",
                       prog, args, ng - j, j < ng ? gpu[j].tag : "");
    CHECK(dp >= 3, "%s %s: only %d DP allocations in the CPU plan", prog, args, dp);
    if (expect_tiles) CHECK(tiles > 0, "%s %s: no flash tile in the CPU plan", prog, args);
    else CHECK(tiles == 0, "%s %s: %d flash tiles in the CPU plan of a method without them", prog, args, tiles);
}

int main(void) {
    char dir[] = "/tmp/test_dp_cuda.XXXXXX";
    if (!mkdtemp(dir)) { printf("FAIL: mkdtemp\n"); return 1; }
    static const char *norms[] = { "direct", "ghost", "flash", "mixed" };
    static const char *clips[] = { "bk", "twopass" };
    char args[256];
    for (int n = 0; n < 4; n++)
        for (int c = 0; c < 2; c++) {
            snprintf(args, sizeof args, "--norm %s --clip %s", norms[n], clips[c]);
            /* the tiny model at T=64: mixed takes flash for the MLP (2T² ≤ 64·256), direct elsewhere */
            check_config(dir, "train_dpsgd", args, n >= 2);
        }
    check_config(dir, "train_flash", "--poisson --batch-size 8 --max-physical-batch-size 4", 1);
    check_config(dir, "train_lora", "--norm flash --clip twopass --lora-rank 4", 1);
    /* under bk every adapter keeps its per-sample gradients (B·r·d is small), so no tile */
    check_config(dir, "train_lora", "--norm flash --clip bk --lora-rank 4", 0);
    check_config(dir, "train_lora", "--norm ghost --clip twopass --lora-rank 4", 0);
    /* the levers: bf16 (its G copies are bf16 on both targets), checkpointing */
    check_config(dir, "train_dpsgd", "--norm flash --clip bk --precision bf16", 1);
    check_config(dir, "train_dpsgd", "--norm ghost --clip twopass --precision bf16 --checkpoint-activations", 0);
    /* tied embeddings: the cross term's u on both targets; its T×T gather (a .tile) on the CPU only */
    check_config(dir, "train_dpsgd", "--norm direct --clip bk --tie-embeddings", 0);
    check_config(dir, "train_dpsgd", "--norm ghost --clip twopass --tie-embeddings", 1);
    check_config(dir, "train_dpsgd", "--norm flash --clip bk --tie-embeddings --precision bf16", 1);
    check_config(dir, "train_dpsgd", "--norm mixed --clip twopass --tie-embeddings --checkpoint-activations", 1);
    check_config(dir, "train_dpsgd", "--norm mixed --clip bk --checkpoint-activations", 1);
    check_config(dir, "train_lora", "--norm flash --clip twopass --lora-rank 4 --precision bf16 --checkpoint-activations", 1);
    char out[8192];
    /* an impossible CUDA config: more samples than the GPU norm kernels take, one line */
    int rc = run("train_dpsgd", "--model tiny --steps 1 --quiet --device plan --plan-for cuda --batch-size 5000 --seq-len 4", out, sizeof out);
    CHECK(rc != 0 && strstr(out, "KCUDA") == NULL && strstr(out, "at most 4096 samples") != NULL,
          "--batch-size 5000 planned for cuda: exit %d: %s", rc, out);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("note: could not remove %s\n", dir);
    if (failures) { printf("test_dp_cuda: %d failures\n", failures); return 1; }
    printf("test_dp_cuda: OK (8 norm x clip, Poisson, 3 LoRA, 4 under bf16 or checkpointing: the CUDA plan's DP buffers are the CPU plan's minus flash tiles, all on the device; no widening on the GPU)\n");
    return 0;
}
