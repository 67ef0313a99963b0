/* test_kit_hostile.c — the kit (dpmem.h) under hostile conditions (issue 13): nothing lost, nothing
   misattributed, nothing hangs. Each case runs in a fresh process (this program again, with the
   case's name), since some leave the kit's state changed for good (a full string table):

   strings     ~1.05M distinct strings fill the string table: a new tag counts as category "overflow",
               never as another category (a 5000-byte ghost/late was counted as params), no query
               crashes (strcmp on a NULL name), totals stay exact, one WARN and one stderr line.
   categories  5000 categories: a snapshot and an OOM event list the largest and sum the others into
               an "overflow" row (snapshots were cut at 2000 without a word): rows add up to the total.
   long        category names of 300 and 2000 bytes: the kit and the log (which keeps 1024) agree.
   two_runs    a second process on the log path (explicit open: refused with one line; DPMEM_LOG: its
               own file, said where; a forked child: refused): the first run's log is intact (it died
               of SIGBUS when the second truncated it).
   cycles      300 dpmem_open/dpmem_close cycles with a writer thread running: the address space does
               not grow (each cycle leaked its mapping: 1.2 MB).
   full_disk   posix_fallocate fails (this program's own, below): events are dropped and counted, the
               disk is not asked again on every event (each try under the lock: 1000x slower), the log
               ends with a CLOSE event and says how many were dropped, and when space comes back a WARN
               event says so and events are written again.
   env_vs_open DPMEM_LOG=env.log on a program that calls dpmem_open(run.log): one log and one line (env.log
               was left beside it with 2 events, silently), or, after events of its own, env.log keeps them.
   threads     5000 short-lived threads: the log stays small (a 64 KiB chunk each: 328 MB), in time
               order (a thread's first events looked "backwards"), every scope counted. */
#include <stdint.h>
/* The skewed_clock case's clock: while on, every fourth reading is 20 us behind the one before, as a
   thread moved to a CPU whose TSC lags reads it (vCPUs of a VM). */
static int skew_on;
static uint64_t skew_n;
static int skew_clock(uint64_t *t) {
    if (!__atomic_load_n(&skew_on, __ATOMIC_RELAXED)) return 0;
    uint64_t n = __atomic_add_fetch(&skew_n, 1, __ATOMIC_RELAXED);
    *t = 4000000000000ull + n * 1000 - (n % 4 == 3 ? 20000 : 0);
    return 1;
}
#define DPMEM_TEST_CLOCK skew_clock
#define DPMEM_IMPLEMENTATION
#define DPMEM_NO_NVTX
#include "dpmem.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "read/dpmem_read.h"
#include "test_tools_common.h"

/* ---- a disk that can be made full: this program's posix_fallocate replaces the C library's for
   the kit compiled in above ---- */
static int disk_full;
static long fallocate_calls_full;
int posix_fallocate(int fd, off_t off, off_t len) {
    if (__atomic_load_n(&disk_full, __ATOMIC_RELAXED)) {
        __atomic_add_fetch(&fallocate_calls_full, 1, __ATOMIC_RELAXED);
        return ENOSPC;
    }
    return fallocate(fd, 0, off, len) == 0 ? 0 : errno;
}

/* ---- reading a log back ---- */
typedef struct { uint64_t count[DPMEM_EV_TYPES]; } Counts;
static int read_log(const char *path, DpmemLog *L) {
    char err[512];
    if (dpmem_log_open(L, path, err, sizeof err) != 0) { CHECK(0, "%s", err); return -1; }
    return 0;
}
static uint64_t string_count(const DpmemLog *L, const char *s) {   /* events named by the string s */
    int32_t i = dpmem_log_find_string(L, s);
    uint64_t n = 0;
    DpmemIter it;
    DpmemEvent e;
    if (i < 0 || dpmem_iter_begin(&it, L) != 0) return 0;
    while (dpmem_iter_next(&it, &e))   /* (THREAD's id is a thread index, CLOSE's and DEVICE's 0) */
        n += e.type != DPMEM_EV_STRING && e.type != DPMEM_EV_THREAD && e.id == L->string_ids[i];
    dpmem_iter_end(&it);
    return n;
}
/* Reads the log back: closed, no event of a thread before its previous one, and the scope `scope`
   begun and ended n times. */
static int read_closed_in_order(const char *path, DpmemLog *L, const char *scope, uint64_t n) {
    if (read_log(path, L)) return -1;
    CHECK(L->closed && !L->backwards, "closed %d, %llu events backwards in time", L->closed, (unsigned long long)L->backwards);
    CHECK(string_count(L, scope) == 2 * n, "%llu '%s' scope events of %llu", (unsigned long long)string_count(L, scope), scope,
          (unsigned long long)(2 * n));
    return 0;
}
static size_t stderr_lines(const char *path, const char *want) {
    char *s = tt_slurp(path, NULL);
    size_t n = 0;
    for (char *p = s; p && (p = strstr(p, want)); p++) n++;
    free(s);
    return n;
}

/* ---- the cases (each in its own process) ---- */

static int case_strings(const char *log) {
    static char params[16], late[16], after[16];
    if (dpmem_open(log) != 0) return 1;
    dpmem_tag_alloc(params, 100, "params/w");
    char s[64];
    uint32_t last = 0;
    for (int i = 0; i < 1100000; i++) { snprintf(s, sizeof s, "scope.%d", i); last = dpmem_intern(s); }
    CHECK(last != 0 && dpmem_string(last) && !strcmp(dpmem_string(last), "overflow"), "a string past the table is 'overflow'");
    dpmem_tag_alloc(late, 5000, "ghost/late");          /* its category finds no room */
    dpmem_tag_alloc(after, 7, "params/after");          /* a new tag of a known category: no room either */
    CHECK(dpmem_live_bytes("params") == 100, "params %zu, want 100 (bytes misattributed)", dpmem_live_bytes("params"));
    CHECK(dpmem_live_bytes("ghost") == 0, "ghost %zu", dpmem_live_bytes("ghost"));
    CHECK(dpmem_live_bytes("overflow") == 5007, "overflow %zu, want 5007", dpmem_live_bytes("overflow"));
    CHECK(dpmem_live_bytes(NULL) == 5107 && dpmem_peak_bytes(NULL) == 5107, "total %zu", dpmem_live_bytes(NULL));
    size_t sum = 0;
    for (int i = 0; i < dpmem_category_count(); i++) {   /* every name queryable (a NULL name crashed) */
        const char *c = dpmem_category_name(i);
        CHECK(c != NULL, "category %d has no name", i);
        if (c) sum += dpmem_live_bytes(c);
    }
    CHECK(sum == 5107, "categories add up to %zu, want 5107", sum);
    { DPMEM_SCOPE_DYN("a scope named after the table is full"); dpmem_meta("key.after", "value.after"); }
    dpmem_snapshot("full");
    dpmem_tag_free(late);
    dpmem_tag_free(after);
    dpmem_tag_free(params);
    CHECK(dpmem_live_bytes(NULL) == 0, "live %zu after the frees", dpmem_live_bytes(NULL));
    dpmem_close();
    DpmemLog L;
    if (read_log(log, &L)) return 1;
    CHECK(L.closed && !L.corrupt, "log not closed or corrupt");
    int32_t o = dpmem_log_category_index(&L, "overflow"), g = dpmem_log_category_index(&L, "ghost");
    CHECK(o >= 0 && g < 0, "log categories: overflow %d ghost %d", o, g);
    CHECK(string_count(&L, "string table full: new tags count as category overflow") == 1, "one WARN event");
    dpmem_log_close(&L);
    int rc = tt_run("dpmem-report", "'%s' --csv '%s'", log, tt_path("strings.csv"));
    char *csv = tt_slurp(tt_path("strings.csv"), NULL), *out = tt_slurp(tt_path("out.txt"), NULL);
    CHECK(rc == 0 && csv && strstr(csv, "5107"), "the report's peak is not 5107");
    CHECK(out && strstr(out, "WARNING: 1 WARN event in the log, 1 distinct:") &&
          strstr(out, "    1x, first at ") && strstr(out, " ms: string table full: new tags count as category overflow\n"),
          "the report does not name the warning:\n%s", out ? out : "");
    free(csv); free(out);
    return 0;
}

static int case_categories(const char *log) {
    enum { N = 5000 };
    static char buf[N], own[4];
    if (dpmem_open(log) != 0) return 1;
    dpmem_tag_alloc(own, 3, "overflow/mine");   /* a category of that name already: one "overflow" row still */
    uint64_t total = 3;
    for (int i = 0; i < N; i++) {
        char tag[32];
        snprintf(tag, sizeof tag, "c%04d/x", i);
        dpmem_tag_alloc(buf + i, (size_t)i + 1, tag);
        total += (uint64_t)i + 1;
    }
    dpmem_snapshot("all");
    dpmem_oom(12345, "c0000/x", DPMEM_HOST, 0, 0);
    CHECK(dpmem_live_bytes("overflow") == 3, "the kit's overflow category holds %zu, want 3", dpmem_live_bytes("overflow"));
    for (int i = 0; i < N; i++) dpmem_tag_free(buf + i);
    dpmem_tag_free(own);
    dpmem_close();
    DpmemLog L;
    if (read_log(log, &L)) return 1;
    DpmemIter it;
    DpmemEvent e;
    int snaps = 0, ooms = 0;
    if (dpmem_iter_begin(&it, &L) != 0) return 1;
    while (dpmem_iter_next(&it, &e)) {
        if (e.type != DPMEM_EV_SNAPSHOT && e.type != DPMEM_EV_OOM) continue;
        uint32_t n, at;
        if (e.type == DPMEM_EV_SNAPSHOT) { n = dpmem_ev_u32(&e, 24); at = 32; snaps++; }
        else { n = dpmem_ev_u32(&e, 28); at = 40 + (dpmem_ev_u32(&e, 24) * 4 + 7) / 8 * 8; ooms++; }
        uint64_t sum = 0, smallest = UINT64_MAX, overflow = 0;
        int overflow_rows = 0;
        for (uint32_t k = 0; k < n; k++) {
            uint64_t live = dpmem_ev_u64(&e, at + 16 * k + 8);
            sum += live;
            if (!strcmp(dpmem_log_string(&L, dpmem_ev_u32(&e, at + 16 * k)), "overflow")) { overflow = live; overflow_rows++; }
            else if (live < smallest) smallest = live;
        }
        CHECK(overflow_rows == 1, "%d rows named overflow", overflow_rows);
        CHECK(sum == total, "%s rows add up to %llu of %llu", e.type == DPMEM_EV_SNAPSHOT ? "SNAPSHOT" : "OOM",
              (unsigned long long)sum, (unsigned long long)total);
        /* the largest categories are listed: c(N-n+1) .. c(N-1) hold N-n+2 .. N bytes, the rest summed
           with the 3 bytes of the category "overflow" */
        CHECK(n > 2000 && smallest == (uint64_t)(N - n + 2) && overflow == (uint64_t)(N - n + 1) * (N - n + 2) / 2 + 3,
              "rows %u: smallest listed %llu, overflow %llu", n, (unsigned long long)smallest, (unsigned long long)overflow);
    }
    dpmem_iter_end(&it);
    CHECK(snaps == 1 && ooms == 1, "%d snapshots, %d OOM events", snaps, ooms);
    CHECK(string_count(&L, "more categories than an event holds: the smallest summed as overflow") == 1, "one WARN event");
    dpmem_log_close(&L);
    return 0;
}

static int case_long(const char *log) {
    static char a[8], b[8];
    char tag300[400], tag2000[2100];
    memset(tag300, 'a', 300); strcpy(tag300 + 300, "/w");
    memset(tag2000, 'b', 2000); strcpy(tag2000 + 2000, "/w");
    if (dpmem_open(log) != 0) return 1;
    dpmem_tag_alloc(a, 100, tag300);
    dpmem_tag_alloc(b, 200, tag2000);
    char cat300[301];
    memcpy(cat300, tag300, 300); cat300[300] = 0;
    CHECK(dpmem_live_bytes(cat300) == 100, "the kit counts %zu under the 300-byte category, want 100", dpmem_live_bytes(cat300));
    int n = dpmem_category_count();
    char kit_names[2][1100] = { "", "" };
    for (int i = 0; i < n && i < 2; i++) snprintf(kit_names[i], sizeof kit_names[i], "%s", dpmem_category_name(i));
    dpmem_close();
    DpmemLog L;
    if (read_log(log, &L)) return 1;
    CHECK(n == 2 && L.n_cats == 2, "categories: kit %d, log %u", n, L.n_cats);
    for (int i = 0; i < 2; i++)
        CHECK(dpmem_log_category_index(&L, kit_names[i]) >= 0, "the kit's category of %zu bytes is not the log's", strlen(kit_names[i]));
    CHECK(strlen(kit_names[1]) == 1024, "the 2000-byte category is %zu bytes in the kit, 1024 in the log", strlen(kit_names[1]));
    dpmem_log_close(&L);
    return 0;
}

/* Runs this program again for a helper case: its exit status (128 + signal when killed). */
static const char *self_path;
static int run_self(const char *env, const char *name, const char *log, const char *err_file) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s timeout 60 '%s' %s '%s' '%s' 2>'%s'", env, self_path, name, log, tt_dir, err_file);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static void first_run_writes(int n) {
    static char buf[64];
    for (int i = 0; i < n; i++) { DPMEM_SCOPE("first"); dpmem_tag_alloc(buf, 64, "params/x"); dpmem_tag_free(buf); }
}

/* The first run writes its log; meanwhile others open the same path, and it writes on after each. */
static int case_two_runs(const char *log) {
    if (dpmem_open(log) != 0) return 1;
    first_run_writes(20000);
    /* another process, dpmem_open: refused with one line, the first run's pid named */
    int rc = run_self("", "second_open", log, tt_path("second_open.err"));
    char want[64];
    snprintf(want, sizeof want, "process %ld", (long)getpid());
    CHECK(rc == 0 && stderr_lines(tt_path("second_open.err"), "is writing it") == 1 && stderr_lines(tt_path("second_open.err"), want) == 1,
          "a second dpmem_open on the path: exit %d (0: refused with one line naming %s)", rc, want);
    first_run_writes(20000);
    /* another process, DPMEM_LOG: its own file beside it, said where */
    char env[700];
    snprintf(env, sizeof env, "DPMEM_LOG='%s'", log);
    rc = run_self(env, "second_env", log, tt_path("second_env.err"));
    char *err = tt_slurp(tt_path("second_env.err"), NULL), *at = err ? strstr(err, "this process logs to ") : NULL;
    char alt[600] = "";
    if (at) sscanf(at + strlen("this process logs to "), "%599[^\n]", alt);
    CHECK(rc == 0 && alt[0], "DPMEM_LOG on a path being written: exit %d, stderr: %s", rc, err ? err : "");
    free(err);
    first_run_writes(20000);
    /* a forked child of the writer (the kit closes the log in a child): refused too */
    pid_t pid = fork();
    if (pid == 0) _exit(dpmem_open(log) == -1 ? 0 : 1);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a forked child opened the parent's log");
    first_run_writes(20000);
    dpmem_close();
    DpmemLog L;
    if (read_log(log, &L)) return 1;
    CHECK(L.closed && !L.corrupt && L.pid == (uint64_t)getpid(), "the first run's log is not its own, whole and closed");
    CHECK(string_count(&L, "first") == 2 * 80000, "the first run's log holds %llu scope events of 160000",
          (unsigned long long)string_count(&L, "first"));
    dpmem_log_close(&L);
    if (alt[0] && read_log(alt, &L) == 0) {
        CHECK(L.closed && string_count(&L, "second") == 2, "the second run's own log");
        dpmem_log_close(&L);
    }
    /* once the first run closed its log, the path is free again */
    rc = run_self("", "reopen", log, tt_path("reopen.err"));
    CHECK(rc == 0, "reopening the path after the first run closed it: exit %d", rc);
    return 0;
}
static int case_second_open(const char *log) { return dpmem_open(log) == -1 ? 0 : 1; }
static int case_second_env(const char *log) {
    (void)log;
    { DPMEM_SCOPE("second"); }
    return dpmem_logging() ? 0 : 1;
}
static int case_reopen(const char *log) {
    if (dpmem_open(log) != 0) return 1;
    { DPMEM_SCOPE("reopened"); }
    dpmem_close();
    return 0;
}

/* DPMEM_LOG=env.log on a program that opens its own log: one log, and one line that says which. The
   program's dpmem_open first: no env.log at all (it was left with 2 events, silently); after events
   of its own: env.log keeps those and ends, said once. */
static int case_env_vs_open(const char *log) {
    char env_log[620], env[700], errf[2][620];
    snprintf(env_log, sizeof env_log, "%s.env.log", log);
    snprintf(env, sizeof env, "DPMEM_LOG='%s'", env_log);
    const char *helpers[2] = { "program_open_first", "program_open_late" };
    for (int k = 0; k < 2; k++) {
        unlink(env_log);
        snprintf(errf[k], sizeof errf[k], "%s.%s.err", log, helpers[k]);
        int rc = run_self(env, helpers[k], log, errf[k]);
        CHECK(rc == 0, "%s: exit %d", helpers[k], rc);
        DpmemLog L;
        if (read_log(log, &L) == 0) {
            CHECK(L.closed && string_count(&L, "program") == 2, "%s: the program's log lacks its scope", helpers[k]);
            dpmem_log_close(&L);
        }
        struct stat st;
        if (k == 0) {
            CHECK(stat(env_log, &st) != 0, "dpmem_open first: DPMEM_LOG's %s was created beside the program's log", env_log);
            CHECK(stderr_lines(errf[k], "is not used: the program opens its own log") == 1, "dpmem_open first: not said once");
        } else {
            if (read_log(env_log, &L) == 0) {
                CHECK(L.closed && string_count(&L, "early") == 2, "dpmem_open late: DPMEM_LOG's log lost the events before it");
                dpmem_log_close(&L);
            } else CHECK(0, "dpmem_open late: DPMEM_LOG's log is gone");
            CHECK(stderr_lines(errf[k], "ends here, with the events before it") == 1, "dpmem_open late: not said once");
        }
    }
    return 0;
}
static int case_program_open_first(const char *log) {
    if (dpmem_open(log) != 0) return 1;
    { DPMEM_SCOPE("program"); }
    dpmem_close();
    return 0;
}
static int case_program_open_late(const char *log) {
    { DPMEM_SCOPE("early"); }
    return case_program_open_first(log);
}

static long vm_size_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f)) if (!strncmp(line, "VmSize:", 7)) kb = atol(line + 7);
    if (f) fclose(f);
    return kb;
}
static int writer_stop;
static void *writer(void *arg) {
    (void)arg;
    static char buf[64];
    while (!__atomic_load_n(&writer_stop, __ATOMIC_RELAXED)) { DPMEM_SCOPE("writer"); dpmem_tag_alloc(buf, 64, "params/w"); dpmem_tag_free(buf); }
    return NULL;
}
static int case_cycles(const char *log) {
    static char buf[64];
    pthread_t th;
    if (pthread_create(&th, NULL, writer, NULL) != 0) return 1;
    long first = 0;
    for (int i = 0; i < 300; i++) {
        if (dpmem_open(log) != 0) return 1;
        { DPMEM_SCOPE("cycle"); dpmem_tag_alloc(buf, 64, "params/c"); dpmem_tag_free(buf); }
        dpmem_close();
        if (i == 9) first = vm_size_kb();
    }
    long last = vm_size_kb();
    __atomic_store_n(&writer_stop, 1, __ATOMIC_RELAXED);
    pthread_join(th, NULL);
    CHECK(first > 0 && last - first < 16 * 1024, "VmSize %ld kB after 10 open/close cycles, %ld kB after 300", first, last);
    return 0;
}

static void *full_worker(void *arg) {
    (void)arg;
    char buf[64];
    for (int i = 0; i < 20000; i++) { DPMEM_SCOPE("iter"); dpmem_tag_alloc(buf, 64, "activations/x"); dpmem_tag_free(buf); }
    return NULL;
}
static int case_full_disk(const char *log) {
    char buf[64];
    if (dpmem_open(log) != 0) return 1;
    { DPMEM_SCOPE("iter"); dpmem_tag_alloc(buf, 64, "activations/x"); dpmem_tag_free(buf); }   /* the strings */
    uint32_t main_thread = dpmem_thread_index();
    __atomic_store_n(&disk_full, 1, __ATOMIC_RELAXED);
    pthread_t th[8];
    for (int i = 0; i < 8; i++) if (pthread_create(&th[i], NULL, full_worker, NULL) != 0) return 1;
    for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
    long calls = __atomic_load_n(&fallocate_calls_full, __ATOMIC_RELAXED);
    __atomic_store_n(&disk_full, 0, __ATOMIC_RELAXED);
    /* the disk is asked a few times (a back-off; up to 3 sizes each), not for every one of 640000 events */
    CHECK(calls <= 100, "posix_fallocate called %ld times on the full disk", calls);
    CHECK(dpmem_live_bytes(NULL) == 0 && dpmem_peak_bytes(NULL) >= 64 && dpmem_peak_bytes(NULL) <= 8 * 64,
          "counters: live %zu peak %zu", dpmem_live_bytes(NULL), dpmem_peak_bytes(NULL));
    usleep(1100000);   /* past the longest back-off: the next chunk finds space again */
    for (int i = 0; i < 5000; i++) { DPMEM_SCOPE("after"); dpmem_tag_alloc(buf, 64, "activations/x"); dpmem_tag_free(buf); }
    dpmem_close();
    DpmemLog L;
    if (read_log(log, &L)) return 1;
    uint64_t workers = 0;
    DpmemIter it;
    DpmemEvent e;
    if (dpmem_iter_begin(&it, &L) != 0) return 1;
    while (dpmem_iter_next(&it, &e))
        workers += e.thread != main_thread && (e.type == DPMEM_EV_BEGIN || e.type == DPMEM_EV_END || e.type == DPMEM_EV_ALLOC || e.type == DPMEM_EV_FREE);
    dpmem_iter_end(&it);
    CHECK(L.closed && L.close_dropped > 0 && L.header_dropped == L.close_dropped, "CLOSE %d, dropped: CLOSE %llu, header %llu",
          L.closed, (unsigned long long)L.close_dropped, (unsigned long long)L.header_dropped);
    CHECK(workers + L.close_dropped == 8 * 20000 * 4, "events written %llu + dropped %llu != 640000", (unsigned long long)workers,
          (unsigned long long)L.close_dropped);
    CHECK(string_count(&L, "after") == 10000 && string_count(&L, "log events dropped: no space to write them (the value: how many so far)") == 1,
          "after the disk had space again: scope events %llu, WARN events %llu", (unsigned long long)string_count(&L, "after"),
          (unsigned long long)string_count(&L, "log events dropped: no space to write them (the value: how many so far)"));
    dpmem_log_close(&L);
    return 0;
}

static void *short_lived(void *arg) {
    static char buf[8][64];
    int i = (int)(intptr_t)arg;
    DPMEM_SCOPE("work");
    dpmem_tag_alloc(buf[i & 7], 64, "activations/t");
    dpmem_tag_free(buf[i & 7]);
    return NULL;
}
static void *exits_in_scope(void *arg) {
    (void)arg;
    dpmem_range_push("open at exit");   /* never popped: this thread's chunk must not go to the next */
    return NULL;
}
static int case_threads(const char *log) {
    if (dpmem_open(log) != 0) return 1;
    pthread_t th[8];
    for (int i = 0; i < 2000; i++) {
        if (pthread_create(&th[0], NULL, i == 1000 ? exits_in_scope : short_lived, (void *)(intptr_t)i) != 0) return 1;
        pthread_join(th[0], NULL);
    }
    for (int r = 0; r < 250; r++) {
        for (int i = 0; i < 8; i++) if (pthread_create(&th[i], NULL, short_lived, (void *)(intptr_t)i) != 0) return 1;
        for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
    }
    dpmem_close();
    struct stat st;
    CHECK(stat(log, &st) == 0 && st.st_size < 4 * 1024 * 1024, "a log of %lld bytes for 4000 short threads", (long long)st.st_size);
    DpmemLog L;
    if (read_closed_in_order(log, &L, "work", 3999)) return 1;
    /* nothing follows the unclosed range on its thread */
    DpmemIter it;
    DpmemEvent e;
    uint32_t open_thread = 0, after = 0;
    int32_t open_id = dpmem_log_find_string(&L, "open at exit");
    if (open_id < 0 || dpmem_iter_begin(&it, &L) != 0) { CHECK(0, "no 'open at exit' scope"); return 1; }
    while (dpmem_iter_next(&it, &e)) {
        if (e.type == DPMEM_EV_BEGIN && e.id == L.string_ids[open_id]) open_thread = e.thread;
        else if (open_thread && e.thread == open_thread && e.type == DPMEM_EV_BEGIN) after++;
    }
    dpmem_iter_end(&it);
    CHECK(open_thread && after == 0, "%u scopes of other threads nested in the range left open at a thread's exit", after);
    dpmem_log_close(&L);
    return 0;
}

/* A clock that steps back by 20 us every fourth reading: each thread's events still come out in time
   order (the kit keeps a thread's stamps from stepping back), ALLOC/FREE stamps still strictly
   increase, and the report's replay by time gives the exact peak. */
static int case_skewed_clock(const char *log) {
    if (dpmem_open(log) != 0) return 1;
    static char buf[3][256];
    __atomic_store_n(&skew_on, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 200; i++) {
        DPMEM_SCOPE("skewed");
        dpmem_tag_alloc(buf[0], 256, "activations/a");
        dpmem_tag_alloc(buf[1], 128, "activations/b");
        dpmem_tag_free(buf[0]);
        dpmem_tag_alloc(buf[2], 64, "grads/c");
        dpmem_tag_free(buf[1]);
        dpmem_tag_free(buf[2]);
    }
    __atomic_store_n(&skew_on, 0, __ATOMIC_RELAXED);
    dpmem_close();
    CHECK(skew_n >= 200 * 8, "the skewed clock was read %llu times, want 8 per iteration (scope, 6 ALLOC/FREE)", (unsigned long long)skew_n);
    DpmemLog L;
    if (read_closed_in_order(log, &L, "skewed", 200)) return 1;
    DpmemIter it;
    DpmemEvent e;
    uint64_t last_alloc = 0, n_alloc = 0, not_increasing = 0;
    int64_t live = 0, peak = 0;
    if (dpmem_iter_begin(&it, &L) != 0) return 1;
    while (dpmem_iter_next(&it, &e)) {
        if (e.type != DPMEM_EV_ALLOC && e.type != DPMEM_EV_FREE) continue;
        not_increasing += n_alloc++ && e.ts <= last_alloc;
        last_alloc = e.ts;
        const int64_t bytes = (int64_t)dpmem_ev_u64(&e, 8);   /* payload: address, bytes */
        live += e.type == DPMEM_EV_ALLOC ? bytes : -bytes;
        if (live > peak) peak = live;
    }
    dpmem_iter_end(&it);
    CHECK(n_alloc == 6 * 200 && not_increasing == 0 && live == 0 && peak == 256 + 128,
          "%llu ALLOC/FREE (want 1200), %llu not after the one before, live %lld, peak %lld (want 384)",
          (unsigned long long)n_alloc, (unsigned long long)not_increasing, (long long)live, (long long)peak);
    dpmem_log_close(&L);
    return 0;
}

typedef struct { const char *name; int (*run)(const char *log); const char *stderr_once[2]; } Case;
static const Case cases[] = {
    { "strings", case_strings, { "dpmem: the string table is full", NULL } },
    { "categories", case_categories, { NULL, NULL } },
    { "long", case_long, { NULL, NULL } },
    { "two_runs", case_two_runs, { NULL, NULL } },
    { "cycles", case_cycles, { NULL, NULL } },
    { "full_disk", case_full_disk, { "dpmem: cannot grow the log", "events could not be written to the log" } },
    { "threads", case_threads, { NULL, NULL } },
    { "skewed_clock", case_skewed_clock, { NULL, NULL } },
    { "env_vs_open", case_env_vs_open, { NULL, NULL } },
    { "second_open", case_second_open, { NULL, NULL } },
    { "second_env", case_second_env, { NULL, NULL } },
    { "reopen", case_reopen, { NULL, NULL } },
    { "program_open_first", case_program_open_first, { NULL, NULL } },
    { "program_open_late", case_program_open_late, { NULL, NULL } },
};
enum { N_MAIN_CASES = 9 };

int main(int argc, char **argv) {
    self_path = argv[0];
    if (argc >= 4) {   /* one case in this fresh process: argv[1] the case, argv[2] its log, argv[3] the test dir */
        snprintf(tt_dir, sizeof tt_dir, "%s", argv[3]);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            if (!strcmp(argv[1], cases[i].name)) { int rc = cases[i].run(argv[2]); return rc || tt_failures ? 1 : 0; }
        return 2;
    }
    tt_mkdir("kit_hostile");
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < N_MAIN_CASES; i++) {
        char log[600], err[620];
        snprintf(log, sizeof log, "%s.log", tt_path(cases[i].name));
        snprintf(err, sizeof err, "%s.err", log);
        int rc = run_self("", cases[i].name, log, err);
        char *e = tt_slurp(err, NULL);
        CHECK(rc == 0, "case %s: exit %d; its stderr:\n%s", cases[i].name, rc, e ? e : "");
        for (int k = 0; k < 2; k++)
            if (cases[i].stderr_once[k])
                CHECK(stderr_lines(err, cases[i].stderr_once[k]) == 1, "case %s: '%s' said %zu times on stderr, want once", cases[i].name,
                      cases[i].stderr_once[k], stderr_lines(err, cases[i].stderr_once[k]));
        if (rc == 0) printf("ok   %s\n", cases[i].name);
        free(e);
    }
    if (tt_failures) { fprintf(stderr, "%d check(s) failed\n", tt_failures); return 1; }
    printf("kit under hostile conditions: all checks passed\n");
    return 0;
}
