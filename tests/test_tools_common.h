/* test_tools_common.h — what the tools' tests share: the known synthetic logs (every byte count and
   timestamp chosen, so that pixels and numbers have hand-computable values), running a tool binary
   from $DPMEM_BUILD, and a CHECK that counts failures. Test-only. */
#ifndef TEST_TOOLS_COMMON_H
#define TEST_TOOLS_COMMON_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "read/synthlog.h"

static int tt_failures = 0;
#define CHECK(cond, ...)                                                                            \
    do {                                                                                            \
        if (!(cond)) {                                                                              \
            tt_failures++;                                                                          \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                         \
            fprintf(stderr, __VA_ARGS__);                                                           \
            fputc('\n', stderr);                                                                    \
        }                                                                                           \
    } while (0)

#define MiB (1024ull * 1024ull)
#define MS  1000000ull                 /* ns */
#define T0  1000000000ull              /* the writer clock at open, in every known log */

static inline const char *tt_build(void) {
    const char *b = getenv("DPMEM_BUILD");
    return b && *b ? b : "build";
}

/* A fresh directory for this test's files (kept when DPMEM_KEEP is set, for looking at PNGs). */
static char tt_dir[256];
static inline void tt_mkdir(const char *name) {
    snprintf(tt_dir, sizeof tt_dir, "%s/test-out/%s", tt_build(), name);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", tt_dir, tt_dir);
    if (system(cmd) != 0) { fprintf(stderr, "cannot make %s\n", tt_dir); exit(2); }
}
static inline const char *tt_path(const char *file) {
    static char buf[32][512];   /* a ring: a path stays valid for the next 31 calls */
    static int k = 0;
    k = (k + 1) % 32;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tt_dir, file);
    return buf[k];
}

/* Runs "$DPMEM_BUILD/<tool> args", stdout to out.txt and stderr to err.txt in tt_dir; exit status. */
static inline int tt_run(const char *tool, const char *fmt, ...) {
    char args[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    const char *limit = getenv("DPMEM_TOOL_TIMEOUT");   /* seconds; a test of hangs sets it lower */
    snprintf(cmd, sizeof cmd, "timeout %s %s/%s %s >'%s/out.txt' 2>'%s/err.txt'", limit && *limit ? limit : "60", tt_build(), tool,
             args, tt_dir, tt_dir);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* Runs "$DPMEM_BUILD/<tool> <args>" (args may hold up to three %s: tt_dir) and checks that it fails the way bad
   input must: exit 1 or 2, exactly one line on stderr, containing want. */
#define tt_expect_error(tool, args, want) tt_expect_error_at(__FILE__, __LINE__, tool, args, want)
static inline char *tt_slurp(const char *path, size_t *len);
static inline void tt_expect_error_at(const char *file, int line, const char *tool, const char *args, const char *want) {
    int rc = tt_run(tool, args, tt_dir, tt_dir, tt_dir);
    char errpath[600];
    snprintf(errpath, sizeof errpath, "%s/err.txt", tt_dir);
    char *e = tt_slurp(errpath, NULL);
    int lines = 0;
    for (char *q = e; q && *q; q++) lines += *q == '\n';
    if (!(rc >= 1 && rc <= 2 && e && strstr(e, want) && lines == 1)) {
        tt_failures++;
        fprintf(stderr, "FAIL %s:%d: %s %s: exit %d, stderr: %s(want one line with \"%s\")\n", file, line, tool, args, rc, e ? e : "", want);
    }
    free(e);
}

/* Writes script to tt_dir/name and runs python3 on it with two arguments; 0 when it printed "ok". */
static inline int tt_python(const char *name, const char *script, const char *arg1, const char *arg2) {
    char path[600], outp[600], cmd[2048];
    snprintf(path, sizeof path, "%s/%s", tt_dir, name);
    snprintf(outp, sizeof outp, "%s/%s.out", tt_dir, name);
    FILE *f = fopen(path, "w");
    if (!f || fputs(script, f) < 0 || fclose(f) != 0) return -1;
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s' '%s' >'%s' 2>&1", path, arg1, arg2, outp);
    int rc = system(cmd);
    char *out = tt_slurp(outp, NULL);
    int ok = rc == 0 && out && strstr(out, "ok\n");
    if (!ok) fprintf(stderr, "python3 %s failed:\n%s\n", name, out ? out : "(no output)");
    free(out);
    return ok ? 0 : -1;
}

/* The whole file as a NUL-terminated string (NULL if it cannot be read). */
static inline char *tt_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (!s || fread(s, 1, (size_t)n, f) != (size_t)n) { fclose(f); free(s); return NULL; }
    s[n] = 0;
    fclose(f);
    if (len) *len = (size_t)n;
    return s;
}

/* The layout a figure records when DPMEM_LAYOUT names a file (tools/charts/figure.h): per figure, the box of
   every text ('t') and mark ('m': markers, OOM marks). */
typedef struct { char fig[512]; char kind; double x0, y0, x1, y1; char what[160]; } TtBox;

static inline int tt_layout_load(const char *path, TtBox **out) {
    char *s = tt_slurp(path, NULL), fig[512] = "";
    int n = 0, cap = 0;
    *out = NULL;
    if (!s) return 0;
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        TtBox b = { .kind = 0 };
        int w, h, at = 0;
        if (sscanf(line, "figure %511s %d %d", fig, &w, &h) == 3) continue;
        char kind[8];
        if (sscanf(line, "%7s %lf %lf %lf %lf %n", kind, &b.x0, &b.y0, &b.x1, &b.y1, &at) < 5 || !at) continue;
        b.kind = kind[0] == 't' ? 't' : 'm';
        snprintf(b.fig, sizeof b.fig, "%s", fig);
        snprintf(b.what, sizeof b.what, "%s", line + at);
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            TtBox *nb = realloc(*out, (size_t)cap * sizeof *nb);
            if (!nb) break;
            *out = nb;
        }
        (*out)[n++] = b;
    }
    free(s);
    return n;
}

/* How many pairs of texts of figure fig overlap (their boxes share area); prints the first few. */
static inline int tt_text_overlaps(const TtBox *b, int n, const char *fig) {
    int bad = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            const TtBox *p = &b[i], *q = &b[j];
            if (p->kind != 't' || q->kind != 't' || strcmp(p->fig, fig) || strcmp(q->fig, fig)) continue;
            if (p->x0 < q->x1 && q->x0 < p->x1 && p->y0 < q->y1 && q->y0 < p->y1 && bad++ < 3)
                fprintf(stderr, "  %s: \"%s\" overlaps \"%s\"\n", fig, p->what, q->what);
        }
    return bad;
}

/* The first record of figure fig (any figure when NULL) of that kind whose text is what; NULL if none. */
static inline const TtBox *tt_layout_find(const TtBox *b, int n, const char *fig, char kind, const char *what) {
    for (int i = 0; i < n; i++)
        if (b[i].kind == kind && (!fig || !strcmp(b[i].fig, fig)) && !strcmp(b[i].what, what)) return &b[i];
    return NULL;
}

/* Whether figure fig has a text containing part. */
static inline int tt_layout_has(const TtBox *b, int n, const char *fig, const char *part) {
    for (int i = 0; i < n; i++)
        if (b[i].kind == 't' && !strcmp(b[i].fig, fig) && strstr(b[i].what, part)) return 1;
    return 0;
}

/* The known log. Times in ms from T0; thread 1 "main" trains, thread 2 "loader" loads batches.

     1 ms            ALLOC params/w 100 MiB (device)
     step s = 0,1,2, base b = 2 + 10 s:
       b             BEGIN step                 b+0.5  (T2) BEGIN data, ALLOC input/batch 1 MiB
       b+1           BEGIN forward              b+1.5  (T2) FREE input/batch, END data
       b+2           ALLOC activations/h 200 MiB
       b+4           END forward, BEGIN backward
       b+5           ALLOC grads/w 100 MiB
       b+6           (s = 1 only) ALLOC per_sample_grads/w 50 MiB, FREE at b+6.5
       b+7           FREE activations/h
       b+8           END backward, BEGIN optimizer_step
       b+9           FREE grads/w
       b+9.5         END optimizer_step
       b+10 - 1 ns   SNAPSHOT "after step s" (device used = tracked + 8 MiB × s)
       b+10          END step (the next step begins at the same ns)
       (leaky: also ALLOC activations/leak 1 MiB at b+9.7, never freed)
     33 ms           CLOSE (unless cut)
   GPU_TIME for each forward: 2.5 ms.
   Peak: 450 MiB at 18 ms (params 100, grads 100, activations 200, per_sample_grads 50). */
typedef struct {
    int leaky, no_close;
    uint32_t chunk_bytes;      /* 0: 65536 */
    const char *run, *seq_len; /* NULL: "known", "128" */
    uint64_t act_mib;          /* activations/h; 0: 200 */
    const char *cuda_alloc;    /* META cuda.alloc (the CUDA backend's "pool" or "sync"); NULL: none */
    const char *task;          /* META config.task (with "classify": config.num_labels 3); NULL: none */
    const char *model;         /* META config.model; NULL: "tiny" */
    const char *shape[6];      /* META config.vocab_size, dim, n_layers, n_heads, n_kv_heads, ffn_dim; NULL: none */
} KnownLog;

static inline void tt_known_log(const char *path, KnownLog k) {
    SynthLog S;
    synth_init(&S, k.chunk_bytes ? k.chunk_bytes : 65536, T0);
    synth_thread(&S, 1, T0, 1111, "main");
    synth_meta(&S, 1, T0, "run", k.run ? k.run : "known");
    if (k.cuda_alloc) synth_meta(&S, 1, T0, "cuda.alloc", k.cuda_alloc);
    synth_meta(&S, 1, T0, "config.model", k.model ? k.model : "tiny");
    static const char *const shape_keys[6] = { "config.vocab_size", "config.dim", "config.n_layers", "config.n_heads",
                                                "config.n_kv_heads", "config.ffn_dim" };
    for (int i = 0; i < 6; i++)
        if (k.shape[i]) synth_meta(&S, 1, T0, shape_keys[i], k.shape[i]);
    if (k.task) synth_meta(&S, 1, T0, "config.task", k.task);
    if (k.task && !strcmp(k.task, "classify")) synth_meta(&S, 1, T0, "config.num_labels", "3");
    synth_meta(&S, 1, T0, "config.seq_len", k.seq_len ? k.seq_len : "128");
    synth_thread(&S, 2, T0 + 100, 2222, "loader");
    synth_alloc(&S, 1, T0 + 1 * MS, "params/w", 1, 0x10000, 100 * MiB);
    uint64_t leaked = 0;
    for (int s = 0; s < 3; s++) {
        uint64_t b = T0 + (2 + 10 * (uint64_t)s) * MS;
        synth_begin(&S, 1, b, "step");
        synth_begin(&S, 2, b + MS / 2, "data");
        synth_alloc(&S, 2, b + MS / 2 + 1, "input/batch", 0, 0x90000, 1 * MiB);
        synth_begin(&S, 1, b + 1 * MS, "forward");
        synth_free(&S, 2, b + 3 * MS / 2, "input/batch", 0, 0x90000, 1 * MiB);
        synth_end(&S, 2, b + 3 * MS / 2 + 1, "data");
        uint64_t act = (k.act_mib ? k.act_mib : 200) * MiB;
        synth_alloc(&S, 1, b + 2 * MS, "activations/h", 1, 0x20000, act);
        synth_end(&S, 1, b + 4 * MS, "forward");
        synth_gpu_time(&S, 1, b + 4 * MS + 1, "forward", 1, b + 1 * MS, 5 * MS / 2);
        synth_begin(&S, 1, b + 4 * MS + 2, "backward");
        synth_alloc(&S, 1, b + 5 * MS, "grads/w", 1, 0x30000, 100 * MiB);
        if (s == 1) {
            synth_alloc(&S, 1, b + 6 * MS, "per_sample_grads/w", 1, 0x40000, 50 * MiB);
            synth_free(&S, 1, b + 13 * MS / 2, "per_sample_grads/w", 1, 0x40000, 50 * MiB);
        }
        synth_free(&S, 1, b + 7 * MS, "activations/h", 1, 0x20000, act);
        synth_end(&S, 1, b + 8 * MS, "backward");
        synth_begin(&S, 1, b + 8 * MS + 1, "optimizer_step");
        synth_free(&S, 1, b + 9 * MS, "grads/w", 1, 0x30000, 100 * MiB);
        synth_end(&S, 1, b + 19 * MS / 2, "optimizer_step");
        if (k.leaky) {
            synth_alloc(&S, 1, b + 97 * MS / 10, "activations/leak", 1, 0x50000 + (uint64_t)s * 0x1000, 1 * MiB);
            leaked += 1 * MiB;
        }
        char label[32];
        snprintf(label, sizeof label, "after step %d", s);
        const char *cats[2] = { "params", "activations" };
        uint64_t live[2] = { 100 * MiB, leaked };
        uint64_t tracked = 100 * MiB + leaked;
        synth_snapshot(&S, 1, b + 10 * MS - 1, label, tracked + 8 * MiB * (uint64_t)s, 80ull * 1024 * MiB, tracked, k.leaky ? 2 : 1, cats, live);
        synth_end(&S, 1, b + 10 * MS, "step");
    }
    if (!k.no_close) synth_close(&S, 1, T0 + 33 * MS);
    synth_save(&S, path);
    synth_release(&S);
}

/* Two workers run one after the other on one thread index, as the kit logs them (a thread that exits
   hands its index to the next new one, which announces itself by a THREAD event): worker-0 (OS thread
   2001) then worker-1 (2002) on index 2, beside main (index 1). Each runs 4 steps of its own, a slow
   first one (a warm-up) then three: worker-0's steps last 300, 100, 110, 120 µs, worker-1's 500, 200,
   210, 220; in each, forward (2 µs for worker-0, 3 for worker-1) allocates activations/h of 64 KiB
   (96 KiB in worker-1's third step: the peak), freed at the step's end. A small run: params/w 11048 B,
   optimizer/m 22096 B, grads/w 8 KiB, norms/n 48 B live at the peak; bk/b 4 KiB and per_sample_grads/p
   2 KiB allocated and freed before it (none at the peak). */
static inline void tt_workers_log(const char *path) {
    SynthLog S;
    synth_init(&S, 65536, T0);
    synth_thread(&S, 1, T0, 1111, "main");
    synth_meta(&S, 1, T0, "run", "workers");
    synth_alloc(&S, 1, T0 + 1000, "params/w", 1, 0x10000, 11048);
    synth_alloc(&S, 1, T0 + 2000, "optimizer/m", 1, 0x11000, 22096);
    synth_alloc(&S, 1, T0 + 3000, "grads/w", 1, 0x12000, 8192);
    synth_alloc(&S, 1, T0 + 4000, "bk/b", 1, 0x13000, 4096);
    synth_free(&S, 1, T0 + 5000, "bk/b", 1, 0x13000, 4096);
    synth_alloc(&S, 1, T0 + 6000, "per_sample_grads/p", 1, 0x14000, 2048);
    synth_free(&S, 1, T0 + 7000, "per_sample_grads/p", 1, 0x14000, 2048);
    synth_alloc(&S, 1, T0 + 8000, "norms/n", 1, 0x15000, 48);
    static const uint64_t us[2][4] = { { 300, 100, 110, 120 }, { 500, 200, 210, 220 } };
    uint64_t t = T0 + 10 * 1000;
    for (int w = 0; w < 2; w++) {
        synth_thread(&S, 2, t, 2001 + (uint64_t)w, w ? "worker-1" : "worker-0");
        for (int s = 0; s < 4; s++) {
            uint64_t len = us[w][s] * 1000, act = (w == 1 && s == 2 ? 96 : 64) * 1024;
            synth_begin(&S, 2, t, "step");
            synth_begin(&S, 2, t + 10000, "forward");
            synth_alloc(&S, 2, t + 11000, "activations/h", 1, 0x20000, act);
            synth_end(&S, 2, t + 10000 + (uint64_t)(2 + w) * 1000, "forward");
            synth_free(&S, 2, t + len - 1000, "activations/h", 1, 0x20000, act);
            synth_end(&S, 2, t + len, "step");
            t += len + 1000;
        }
        t += 20 * 1000;
    }
    synth_close(&S, 1, t);
    synth_save(&S, path);
    synth_release(&S);
}

#endif
