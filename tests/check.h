/* check.h — the tests' assertions: each failed check prints file:line and what differed, and
   check_exit() turns any failure into a non-zero exit code (llm.c's test forgets this; we do not). */
#ifndef CHECK_H
#define CHECK_H
#include <stdio.h>
#include <stdlib.h>

static int check_failures;
static int check_count;

/* Counters are atomic: tests check from several threads at once. */
#define CHECK__COUNT(v) __atomic_fetch_add(&(v), 1, __ATOMIC_RELAXED)
#define CHECK(cond) do { CHECK__COUNT(check_count); if (!(cond)) { CHECK__COUNT(check_failures); \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECK_EQ_U(a, b) do { unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b); \
    CHECK__COUNT(check_count); if (a_ != b_) { CHECK__COUNT(check_failures); \
    fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%llu != %llu)\n", __FILE__, __LINE__, #a, #b, a_, b_); } } while (0)

static inline int check_exit(const char *name) {
    if (check_failures) { fprintf(stderr, "%s: %d of %d checks failed\n", name, check_failures, check_count); return 1; }
    printf("%s: all %d checks passed\n", name, check_count);
    return 0;
}

/* Where tests put their files: $DPMEM_BUILD/tmp (made by the Makefile). */
static inline const char *test_path(char *buf, size_t n, const char *name) {
    const char *b = getenv("DPMEM_BUILD");
    snprintf(buf, n, "%s/tmp/%s", b && *b ? b : "build", name);
    return buf;
}
#endif
