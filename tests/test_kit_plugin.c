/* test_kit_plugin.c — a second copy of the kit in a dlopen'd library (issue 13, item 15), both with
   DPMEM_LOG: they wrote one file at once and the log was corrupt (the report read 4 of ~1.6M events).

   Built twice. Without -rdynamic the program's copy of the kit is not visible to the plugin, which
   uses its own: the second copy to open the log finds it locked by this process, says so in one line
   (naming -rdynamic) and writes its own file beside it; both logs are whole. With -rdynamic
   (-DRDYNAMIC) the plugin's calls bind to the program's copy: one kit, one log with everything.
   Each run happens in a child process (this program with "run"), whose stderr is kept. */
#define DPMEM_IMPLEMENTATION
#define DPMEM_NO_NVTX
#include "dpmem.h"

#include <dlfcn.h>

#include "read/dpmem_read.h"
#include "test_tools_common.h"

#ifdef RDYNAMIC
#define NAME "kit_plugin_rdynamic"
#else
#define NAME "kit_plugin"
#endif

static int run(const char *plugin) {
    static char buf[3000];
    { DPMEM_SCOPE("host"); dpmem_tag_alloc(buf, sizeof buf, "host/buf"); }
    void *h = dlopen(plugin, RTLD_NOW);
    if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
    int (*work)(void) = (int (*)(void))dlsym(h, "plugin_work");
    if (!work) { fprintf(stderr, "dlsym: %s\n", dlerror()); return 1; }
    int peak = 0;
    for (int i = 0; i < 100; i++) peak = work();
    dpmem_tag_free(buf);
    dpmem_close();   /* the plugin's copy, if it has its own log, closes it at exit (it stays loaded) */
    printf("plugin peak %d host peak %zu\n", peak, dpmem_peak_bytes(NULL));
    return 0;
}

static uint64_t scopes(const DpmemLog *L, const char *name) {
    int32_t i = dpmem_log_find_string(L, name);
    uint64_t n = 0;
    DpmemIter it;
    DpmemEvent e;
    if (i < 0 || dpmem_iter_begin(&it, L) != 0) return 0;
    while (dpmem_iter_next(&it, &e)) n += e.type == DPMEM_EV_BEGIN && e.id == L->string_ids[i];
    dpmem_iter_end(&it);
    return n;
}

static void check_log(const char *path, const char *what, const char *cats, uint64_t host, uint64_t plugin) {
    DpmemLog L;
    char err[512];
    if (dpmem_log_open(&L, path, err, sizeof err) != 0) { CHECK(0, "%s: %s", what, err); return; }
    CHECK(L.closed && !L.corrupt, "%s: closed %d, corrupt %d (%s)", what, L.closed, L.corrupt, L.why);
    char got[64] = "";
    for (uint32_t c = 0; c < L.n_cats; c++) { strcat(got, c ? "," : ""); strncat(got, L.cats[c], 20); }
    CHECK(!strcmp(got, cats), "%s: categories %s, want %s", what, got, cats);
    CHECK(scopes(&L, "host") == host && scopes(&L, "plugin") == plugin, "%s: scopes host %llu plugin %llu, want %llu %llu", what,
          (unsigned long long)scopes(&L, "host"), (unsigned long long)scopes(&L, "plugin"), (unsigned long long)host,
          (unsigned long long)plugin);
    dpmem_log_close(&L);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "run")) return run(argv[2]);
    tt_mkdir(NAME);
    const char *log = tt_path("run.log");
    char plugin[600], cmd[2400];
    snprintf(plugin, sizeof plugin, "%s/tests/libkit_plugin.so", tt_build());
    snprintf(cmd, sizeof cmd, "DPMEM_LOG='%s' timeout 60 '%s' run '%s' >'%s' 2>'%s'", log, argv[0], plugin, tt_path("out.txt"),
             tt_path("err.txt"));
    int rc = system(cmd);
    char *out = tt_slurp(tt_path("out.txt"), NULL), *err = tt_slurp(tt_path("err.txt"), NULL);
    CHECK(rc == 0, "the run: status %d, stderr: %s", rc, err ? err : "");
#ifdef RDYNAMIC
    /* one copy of the kit: one log, one set of counters */
    CHECK(err && !err[0], "stderr: %s", err ? err : "");
    CHECK(out && strstr(out, "plugin peak 4000 host peak 4000"), "out: %s", out ? out : "");
    check_log(log, "the one log", "host,plugin", 1, 100);
#else
    /* two copies: the second says so once, names -rdynamic, and writes its own file */
    const char *at = err ? strstr(err, "this copy logs to ") : NULL;
    char alt[600] = "";
    if (at) sscanf(at + strlen("this copy logs to "), "%599[^\n]", alt);
    int lines = 0;
    for (const char *p = err; p && *p; p++) lines += *p == '\n';
    CHECK(lines == 1 && strstr(err, "another copy of dpmem in this process") && strstr(err, "-rdynamic") && alt[0],
          "stderr: %s", err ? err : "");
    CHECK(out && strstr(out, "plugin peak 1000 host peak 3000"), "out: %s", out ? out : "");
    check_log(log, "the program's log", "host", 1, 0);
    if (alt[0]) check_log(alt, "the plugin's log", "plugin", 0, 100);
#endif
    free(out); free(err);
    if (tt_failures) { fprintf(stderr, "%d check(s) failed\n", tt_failures); return 1; }
    printf("%s: all checks passed\n", NAME);
    return 0;
}
