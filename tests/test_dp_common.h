/* test_dp_common.h — what the DP end-to-end tests share: a CHECK that counts failures and prints
   file:line with a message, and run(), which runs a built program and captures its output. */
#ifndef TEST_DP_COMMON_H
#define TEST_DP_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static int failures = 0;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                               printf(__VA_ARGS__); printf("\n"); } } while (0)

static inline const char *build_dir(void) { const char *b = getenv("DPMEM_BUILD"); return b && *b ? b : "build"; }

/* Runs "<build>/<prog> args", stdout+stderr into out (n bytes); returns the exit status. */
static inline int run(const char *prog, const char *args, char *out, size_t n) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s/%s %s 2>&1", build_dir(), prog, args);
    FILE *p = popen(cmd, "r");
    if (!p) { out[0] = 0; return -1; }
    size_t len = fread(out, 1, n - 1, p);
    out[len] = 0;
    while (fgetc(p) != EOF) {}
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif
