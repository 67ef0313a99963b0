/* test_dp_cuda.c — the DP samples' plan for the CUDA target is that of the CUDA path (runs everywhere,
   no GPU needed). For every --norm × --clip (and LoRA, and Poisson sampling) it plans one step of the
   tiny model twice, `--device plan --plan-for cpu` and `--device plan --plan-for cuda`, reads both
   dpmem logs and asserts, on the DP buffers (tags norms/, per_sample_grads/, ghost/, bk/, lora/):
     - the two plans allocate the same tags, sizes, in the same order (mixed's streamed per-sample
       gradients, `.stream`, hold one sample per CPU thread, one on the GPU), except the sizes of the
       flash scratch (ghost/<param>.tile) and of the tied gather (ghost/lm_head.tied.tile): the CPU's
       come from --flash-tile and its threads, the GPU's are its block rows (kcuda_flash_rows,
       kcuda_tied_rows) and must be exactly kcuda_flash_floats / kcuda_tied_cross_floats of them;
       the CPU plan has tiles wherever flash ran (so the comparison is not vacuous);
     - those size functions at 1b shapes (T = 4096 and 16384, B = 1 and 64, fp32 and bf16) against
       hand-computed bytes: the scratch is the block rows' (bounded by the budget), never T²;
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
#include "cuda/kernels_cuda.h"   /* plain C: the GPU scratch sizes the plan for cuda uses */


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
enum { PLAN_THREADS = 2, TINY_BATCH = 4, TINY_T = 64 };

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
    snprintf(a, sizeof a, "--model tiny --steps 2 --quiet --threads 2 --device plan --plan-for cpu --noise-seed 5 --log %s %s", lc, args);
    int rc = run(prog, a, out, sizeof out);
    CHECK(rc == 0, "%s %s: exit %d: %s", prog, a, rc, out);
    snprintf(a, sizeof a, "--model tiny --steps 2 --quiet --threads 2 --device plan --plan-for cuda --noise-seed 5 --log %s %s", lg, args);
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
    /* the GPU's scratch for the tiny model (T = 64, batch 4): one block row, R = T */
    const KDtype dt = bf16 ? KDT_BF16 : KDT_F32;
    const uint64_t flash_b = 4 * (uint64_t)kcuda_flash_floats(TINY_BATCH, TINY_T, kcuda_flash_rows(TINY_BATCH, TINY_T));
    const uint64_t tied_b = 4 * (uint64_t)kcuda_tied_cross_floats(TINY_BATCH, TINY_T, kcuda_tied_rows(TINY_BATCH, TINY_T, dt), dt);
    int tiles = 0, gtiles = 0, j = 0, dp = 0;
    for (int i = 0; i < ng; i++) {
        CHECK(gpu[i].space == 1, "%s %s: %s in memory space %u in the CUDA plan, not the device", prog, args, gpu[i].tag, gpu[i].space);
        if (!is_tile(gpu[i].tag)) continue;
        gtiles++;
        const uint64_t want = ends_with(gpu[i].tag, ".tied.tile") ? tied_b : flash_b;
        CHECK(gpu[i].bytes == want, "%s %s: the CUDA plan's %s is %llu bytes, the GPU kernel's scratch is %llu", prog, args,
              gpu[i].tag, (unsigned long long)gpu[i].bytes, (unsigned long long)want);
    }
    for (int i = 0; i < nc; i++) {
        dp++;
        if (is_tile(cpu[i].tag)) tiles++;
        if (j >= ng) { CHECK(0, "%s %s: the CUDA plan lacks %s (%llu bytes)", prog, args, cpu[i].tag, (unsigned long long)cpu[i].bytes); break; }
        const uint64_t per_thread = ends_with(cpu[i].tag, ".stream") ? (PLAN_THREADS < TINY_BATCH ? PLAN_THREADS : TINY_BATCH) : 1;
        if (strcmp(cpu[i].tag, gpu[j].tag) || (!is_tile(cpu[i].tag) && cpu[i].bytes != per_thread * gpu[j].bytes)) {
            CHECK(0, "%s %s: DP allocation %d: cpu %s %llu bytes, cuda %s %llu bytes", prog, args, i, cpu[i].tag,
                  (unsigned long long)cpu[i].bytes, gpu[j].tag, (unsigned long long)gpu[j].bytes);
            break;
        }
        j++;
    }
    if (j == dp) CHECK(j == ng, "%s %s: the CUDA plan has %d DP allocations more than the CPU plan (first: %s)",
                       prog, args, ng - j, j < ng ? gpu[j].tag : "");
    CHECK(gtiles == tiles, "%s %s: %d tiles in the CUDA plan, %d in the CPU plan", prog, args, gtiles, tiles);
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
            /* the tiny model at T=64, physical batch 4: mixed takes flash for down (256 wide; dp_mixed.c) */
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
    /* the GPU's block rows at 1b shapes, by hand: both Gram blocks of B samples are 2·B·R·T floats and
       must fit 64 MiB; R a multiple of 64 (at least 64) or T; the partials 2·B·ceil(T/R)·256 floats */
    CHECK(kcuda_flash_rows(1, 4096) == 2048, "flash rows B=1 T=4096: %d, want 2048", kcuda_flash_rows(1, 4096));
    CHECK(kcuda_flash_floats(1, 4096, 2048) == 2ull * 2048 * 4096 + 2 * 2 * 256, "flash floats B=1 T=4096: %zu",
          kcuda_flash_floats(1, 4096, 2048));
    CHECK(kcuda_flash_rows(1, 16384) == 512, "flash rows B=1 T=16384: %d, want 512", kcuda_flash_rows(1, 16384));
    CHECK(kcuda_flash_floats(1, 16384, 512) == 2ull * 512 * 16384 + 2 * 32 * 256, "flash floats B=1 T=16384: %zu",
          kcuda_flash_floats(1, 16384, 512));
    CHECK(kcuda_flash_rows(3, 1000) == 1000, "flash rows B=3 T=1000 (all of T fits): %d", kcuda_flash_rows(3, 1000));
    CHECK(kcuda_flash_rows(64, 4096) == 64, "flash rows B=64 T=4096 (one quantum, over the budget): %d", kcuda_flash_rows(64, 4096));
    CHECK(kcuda_flash_rows(5, 3000) == 512, "flash rows B=5 T=3000 (559 rows fit: 512): %d",
          kcuda_flash_rows(5, 3000));
    CHECK(kcuda_flash_floats(2, 100, 30) == 2ull * 2 * 30 * 100 + 2 * 2 * 4 * 256, "flash floats B=2 T=100 R=30: %zu",
          kcuda_flash_floats(2, 100, 30));
    CHECK(kcuda_flash_floats(2, 100, 500) == kcuda_flash_floats(2, 100, 100), "flash floats: R clamped to T");
    CHECK(kcuda_tied_rows(1, 4096, KDT_BF16) == 4096 && kcuda_tied_cross_floats(1, 4096, 4096, KDT_BF16) == 4096ull * 4096 / 2,
          "tied rows/floats B=1 T=4096 bf16: %d %zu", kcuda_tied_rows(1, 4096, KDT_BF16), kcuda_tied_cross_floats(1, 4096, 4096, KDT_BF16));
    CHECK(kcuda_tied_rows(1, 16384, KDT_F32) == 1024 && kcuda_tied_cross_floats(1, 16384, 1024, KDT_F32) == 1024ull * 16384,
          "tied rows/floats B=1 T=16384 fp32: %d", kcuda_tied_rows(1, 16384, KDT_F32));
    CHECK(kcuda_tied_cross_floats(1, 3, 3, KDT_BF16) == 5, "tied floats: 9 bf16 values round up to 5 floats");
    char out[8192];
    /* an impossible CUDA config: more samples than the GPU norm kernels take, one line */
    int rc = run("train_dpsgd", "--model tiny --steps 1 --quiet --device plan --plan-for cuda --batch-size 5000 --seq-len 4", out, sizeof out);
    CHECK(rc != 0 && strstr(out, "KCUDA") == NULL && strstr(out, "at most 4096 samples") != NULL,
          "--batch-size 5000 planned for cuda: exit %d: %s", rc, out);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("note: could not remove %s\n", dir);
    if (failures) { printf("test_dp_cuda: %d failures\n", failures); return 1; }
    printf("test_dp_cuda: OK (8 norm x clip, Poisson, 3 LoRA, 4 under bf16 or checkpointing: the CUDA plan's DP buffers are the CPU plan's, its tiles the GPU's block rows, all on the device; no widening on the GPU)\n");
    return 0;
}
