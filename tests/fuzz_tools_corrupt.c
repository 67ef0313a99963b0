/* fuzz_tools_corrupt.c — the corruption test: thousands of truncated and randomly mutated logs
   through every reader (tests/fuzz_tools_exercise.h) in this process, and a subset through the three
   binaries, which must exit 0 (read, maybe with a warning) or 1 (one-line error): never a crash, a
   sanitizer report, a hang, or JSON that does not parse. Deterministic (seed 1; DPMEM_FUZZ_SEED and
   DPMEM_FUZZ_CASES change it). Under the sanitizers it runs fewer cases so that it takes seconds. */
#include "test_tools_common.h"

#include <signal.h>

#include "fuzz_tools_exercise.h"

#if defined(__SANITIZE_ADDRESS__)
#define DEFAULT_CASES 1000
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DEFAULT_CASES 1000
#endif
#endif
#ifndef DEFAULT_CASES
#define DEFAULT_CASES 2500
#endif

static uint64_t rng_state = 1;
static uint64_t rnd(void) {   /* xorshift64* */
    rng_state ^= rng_state >> 12; rng_state ^= rng_state << 25; rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}
static uint64_t below(uint64_t n) { return n ? rnd() % n : 0; }

/* Everything a reader can meet: all event types, an unknown type, 70 nested scopes (past the
   readers' depth limit), an END without BEGIN, a FREE without ALLOC, an id with no STRING, 3 threads. */
static void odd_log(const char *path) {
    SynthLog S;
    synth_init(&S, 1024, T0);
    synth_thread(&S, 1, T0, 1, "main");
    synth_meta(&S, 1, T0, "run", "odd \"quoted\"\n\x01");
    synth_end(&S, 2, T0 + 1, "never-begun");
    synth_free(&S, 3, T0 + 2, "grads/orphan", 1, 0xdead, 4096);
    for (int d = 0; d < 70; d++) synth_begin(&S, 1, T0 + 10 + (uint64_t)d, d % 2 ? "inner" : "outer");
    synth_alloc(&S, 1, T0 + 100, "ghost/x", 1, 0x1000, 3 << 20);
    synth_alloc(&S, 2, T0 + 101, "nocategory", 0, 0x2000, 1 << 20);
    synth_warn(&S, 1, T0 + 102, "free of an unknown pointer", 0xbeef);
    synth_device(&S, 3, T0 + 103, 8 << 20, 80ull << 30);
    synth_gpu_time(&S, 1, T0 + 104, "outer", 1, T0 + 10, 50);
    synth_gpu_time(&S, 1, T0 + 105, "outer", 77, T0 - 5, 50);   /* a thread that does not exist, a ts before t0 */
    synth_oom(&S, 1, T0 + 107, "activations/h", 1, 1ull << 40, 79ull << 30, 80ull << 30, "outer", "activations", 3 << 20, 3 << 20);
    synth_event(&S, 1, 200, 7, 12345, T0 + 108, "future", 7);   /* an unknown type: skipped by its length */
    synth_alloc(&S, 1, T0 + 109, "ghost/x", 1, 0x3000, 1 << 20);
    synth_event(&S, 1, 4, 0, 999999, T0 + 110, NULL, 0);          /* BEGIN of an id with no STRING */
    const char *cats[2] = { "ghost", "zzz-unknown" };
    uint64_t live[2] = { 4 << 20, 7 };
    synth_snapshot(&S, 2, T0 + 111, "snap", 9 << 20, 80ull << 30, 4 << 20, 2, cats, live);
    synth_close(&S, 1, T0 + 200);
    synth_save(&S, path);
    synth_release(&S);
}

static void mutate(uint8_t *b, size_t *n, size_t cap) {
    static const uint32_t interesting[] = { 0, 1, 2, 0xff, 0xffff, 0x10000, 0x7fffffff, 0x80000000u, 0xffffffffu, 0x4B435044u, 4096, 65536 };
    switch (below(7)) {
    case 0: *n = below(*n + 1); break;                                   /* truncated anywhere */
    case 1: *n = 4096 + below(*n > 4096 ? *n - 4096 : 1); break;          /* truncated in the chunks */
    case 2: for (int k = 0, m = 1 + (int)below(8); k < m; k++) b[below(*n)] ^= (uint8_t)(1u << below(8)); break;
    case 3: for (int k = 0, m = 1 + (int)below(4); k < m && *n > 4096; k++) b[4096 + below(*n - 4096)] = (uint8_t)rnd(); break;
    case 4: {                                                            /* an interesting word, aligned */
        if (*n < 8) break;
        size_t off = below(*n / 4) * 4;
        if (below(2) && *n > 4100) off = 4096 + below((*n - 4096) / 8) * 8;   /* an event head or id */
        uint32_t v = interesting[below(sizeof interesting / sizeof interesting[0])];
        if (off + 4 <= *n) synth_put32(b + off, v);
        break;
    }
    case 5: {                                                            /* a garbage or copied chunk appended */
        size_t add = 512;
        if (*n + add > cap) break;
        if (below(2)) for (size_t i = 0; i < add; i++) b[*n + i] = (uint8_t)rnd();
        else if (*n >= 4096 + add) memcpy(b + *n, b + 4096 + below((*n - 4096) / add) * add, add);
        *n += add;
        break;
    }
    default: for (int k = 0, m = 1 + (int)below(3); k < m && *n > 16; k++) b[16 + below(*n - 16)] = (uint8_t)rnd(); break;
    }
}

int main(void) {
    alarm(300);   /* a hang fails the test instead of stalling the suite */
    tt_mkdir("fuzz");
    const char *e = getenv("DPMEM_FUZZ_SEED");
    rng_state = e ? strtoull(e, NULL, 10) | 1 : 1;
    e = getenv("DPMEM_FUZZ_CASES");
    long cases = e ? atol(e) : DEFAULT_CASES;
    tt_known_log(tt_path("known.log"), (KnownLog){ .leaky = 1, .chunk_bytes = 512 });
    tt_known_log(tt_path("big-chunks.log"), (KnownLog){ 0 });
    odd_log(tt_path("odd.log"));
    size_t n[3];
    char *base[3] = { tt_slurp(tt_path("known.log"), &n[0]), tt_slurp(tt_path("big-chunks.log"), &n[1]), tt_slurp(tt_path("odd.log"), &n[2]) };
    if (!base[0] || !base[1] || !base[2]) { fprintf(stderr, "cannot read the base logs\n"); return 1; }
    /* the base logs themselves open cleanly */
    for (int i = 0; i < 3; i++) CHECK(fuzz_exercise((const uint8_t *)base[i], n[i], NULL, NULL) == 1, "base log %d rejected", i);
    FILE *sink = fopen("/dev/null", "w");
    size_t cap = 0;
    for (int i = 0; i < 3; i++) if (n[i] > cap) cap = n[i];
    cap += 8192;
    uint8_t *buf = malloc(cap);
    if (!buf || !sink) return 1;
    long opened = 0, via_binaries = 0, json_files = 0;
    char cmd[4096];
    for (long c = 0; c < cases; c++) {
        int which = (int)below(3);
        size_t len = n[which];
        memcpy(buf, base[which], len);
        for (int k = 0, m = 1 + (int)below(3); k < m; k++) mutate(buf, &len, cap);
        opened += fuzz_exercise(buf, len, sink, c % 97 == 0 ? "/dev/null" : NULL);
        if (c % 60 == 0) {   /* the real programs, end to end */
            FILE *f = fopen(tt_path("case.log"), "wb");
            if (!f || fwrite(buf, 1, len, f) != len) { CHECK(0, "cannot write a case"); if (f) fclose(f); continue; }
            fclose(f);
            const char *runs[3][2] = { { "dpmem-report", "'%s/case.log' --csv '%s/case.csv' --json '%s/case%ld.json'" },
                                       { "dpmem-render", "'%s/case.log' -o '%s/case.png' --by name" },
                                       { "dpmem-trace", "'%s/case.log' -o '%s/trace%ld.json'" } };
            for (int r = 0; r < 3; r++) {
                char args[1024];
                if (r == 0) snprintf(args, sizeof args, runs[r][1], tt_dir, tt_dir, tt_dir, via_binaries);
                else if (r == 1) snprintf(args, sizeof args, runs[r][1], tt_dir, tt_dir);
                else snprintf(args, sizeof args, runs[r][1], tt_dir, tt_dir, via_binaries);
                snprintf(cmd, sizeof cmd, "ASAN_OPTIONS=exitcode=86 UBSAN_OPTIONS=exitcode=86:halt_on_error=1 timeout 30 %s/%s %s >/dev/null 2>'%s/case.err'",
                         tt_build(), runs[r][0], args, tt_dir);
                int st = system(cmd), rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
                char *err = tt_slurp(tt_path("case.err"), NULL);
                CHECK(rc == 0 || rc == 1, "case %ld: %s exit %d (86: sanitizer, 124: hang)\n%s", c, runs[r][0], rc, err ? err : "");
                if (rc == 1) CHECK(err && strchr(err, '\n') == err + strlen(err) - 1, "case %ld: %s: not one line on stderr: %s", c, runs[r][0], err ? err : "");
                free(err);
            }
            via_binaries++;
            json_files = via_binaries;
        }
    }
    /* every JSON the binaries wrote parses */
    if (system("python3 -c 1 >/dev/null 2>&1") == 0 && json_files) {
        snprintf(cmd, sizeof cmd,
                 "python3 -c \"import json,glob,sys\nn=0\nfor p in glob.glob(sys.argv[1]+'/*.json'):\n json.load(open(p)); n+=1\nprint(n)\" '%s' >'%s/py.txt' 2>&1",
                 tt_dir, tt_dir);
        int rc = system(cmd);
        char *out = tt_slurp(tt_path("py.txt"), NULL);
        CHECK(rc == 0, "a JSON output does not parse: %s", out ? out : "");
        free(out);
    }
    printf("%ld mutated logs, %ld opened (the rest rejected with one line), %ld through the binaries\n", cases, opened, via_binaries);
    CHECK(opened > cases / 10 && opened < cases, "mutations too weak or too strong: %ld of %ld opened", opened, cases);
    fclose(sink);
    free(buf);
    for (int i = 0; i < 3; i++) free(base[i]);
    if (tt_failures) { fprintf(stderr, "%d check(s) failed\n", tt_failures); return 1; }
    return 0;
}
