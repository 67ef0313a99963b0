/* test_kit_nvtx.c — scopes reach NVTX for real: the test loads our capture library the way Nsight
   Systems loads its own (NVTX_INJECTION64_PATH) and checks the ranges it received: names (registered
   strings), nesting, the "dpmem" domain, a stable ARGB colour per name, one stack per thread. No
   log is open: NVTX ranges do not depend on logging. */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "check.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>

static void step(void) {
    DPMEM_SCOPE("step");
    { DPMEM_SCOPE("forward"); }
    {
        DPMEM_SCOPE("backward");
        { DPMEM_SCOPE("clip"); }
    }
}

static void *other_thread(void *arg) {
    (void)arg;
    DPMEM_SCOPE("worker");
    { DPMEM_SCOPE("noise"); }
    return NULL;
}

int main(void) {
    char rel[512], lib[PATH_MAX];
    const char *b = getenv("DPMEM_BUILD");
    snprintf(rel, sizeof rel, "%s/tests/libnvtx_inject.so", b && *b ? b : "build");
    if (!realpath(rel, lib)) { fprintf(stderr, "missing %s\n", rel); return 1; }
    setenv("NVTX_INJECTION64_PATH", lib, 1);   /* before the kit's first NVTX call */

    step();
    step();
    pthread_t th;
    pthread_create(&th, NULL, other_thread, NULL);
    pthread_join(th, NULL);
    CHECK(!dpmem_logging());

    void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    CHECK(h != NULL);
    if (!h) return check_exit("test_kit_nvtx");
    int (*count)(void) = (int (*)(void))dlsym(h, "nvtx_capture_count");
    const char *(*get)(int, char *, uint32_t *, unsigned long *, const char **) =
        (const char *(*)(int, char *, uint32_t *, unsigned long *, const char **))dlsym(h, "nvtx_capture_get");
    CHECK(count && get);
    if (!count || !get) return check_exit("test_kit_nvtx");

    /* main thread: two steps of P step, P forward, O, P backward, P clip, O, O, O */
    const char *expect[] = { "step", "forward", "", "backward", "clip", "", "", "" };
    const char expect_kind[] = { 'P', 'P', 'O', 'P', 'P', 'O', 'O', 'O' };
    unsigned long main_thread = (unsigned long)pthread_self();
    uint32_t color_of_step = 0, color_of_clip = 0;
    int k = 0, others = 0, other_depth = 0, other_max = 0, other_ok = 1;
    char other_names[2][64] = {{0}};
    for (int i = 0; i < count(); i++) {
        char kind; uint32_t color; unsigned long thread; const char *domain;
        const char *name = get(i, &kind, &color, &thread, &domain);
        CHECK(!strcmp(domain, "dpmem"));
        if (thread != main_thread) {
            others++;
            if (kind == 'P') { if (other_depth < 2) snprintf(other_names[other_depth], 64, "%s", name); other_depth++; }
            else other_depth--;
            if (other_depth < 0) other_ok = 0;
            if (other_depth > other_max) other_max = other_depth;
            continue;
        }
        int j = k % 8;
        CHECK_EQ_U(kind, expect_kind[j]);
        if (kind == 'P') {
            CHECK(!strcmp(name, expect[j]));
            CHECK_EQ_U(color >> 24, 0xFF);            /* opaque ARGB */
            if (!strcmp(name, "step")) { if (!color_of_step) color_of_step = color; CHECK_EQ_U(color, color_of_step); }
            if (!strcmp(name, "clip")) { if (!color_of_clip) color_of_clip = color; CHECK_EQ_U(color, color_of_clip); }
        }
        k++;
    }
    CHECK_EQ_U(k, 16);
    CHECK_EQ_U(others, 4);
    CHECK(other_ok && other_depth == 0 && other_max == 2);
    CHECK(!strcmp(other_names[0], "worker") && !strcmp(other_names[1], "noise"));
    return check_exit("test_kit_nvtx");
}
