/* blas_core.c — see blas_core.h: OpenBLAS's core, and a better one than a generic fallback. */
#include "cpu/blas_core.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Whether the word `w` is one of the space-separated words of `line` (up to its end of line). */
static int has_word(const char *line, const char *w) {
    size_t n = strlen(w);
    for (const char *p = line; *p && *p != '\n';) {
        while (*p == ' ' || *p == '\t') p++;
        const char *q = p;
        while (*q && *q != ' ' && *q != '\t' && *q != '\n') q++;
        if ((size_t)(q - p) == n && !strncmp(p, w, n)) return 1;
        p = q;
    }
    return 0;
}

/* x86 cores without AVX2 kernels, OpenBLAS's fallbacks among them (Prescott for an Intel CPU it does
   not know, Barcelona/Opteron for an AMD one). The AMD cores of their own (Bulldozer ... Excavator,
   Bobcat) and the AVX2-and-better ones (Haswell, Zen, SkylakeX, Cooperlake, SapphireRapids) are
   OpenBLAS's knowing choice and stay. */
static const char *const GENERIC[] = { "Prescott", "Katmai", "Coppermine", "Northwood", "Banias", "Atom", "Core2",
                                       "Penryn", "Dunnington", "Nehalem", "Sandybridge", "Opteron", "Opteron_SSE3",
                                       "Barcelona", "Nano", "Athlon", "Unknown" };

const char *blas_core_pick(const char *cpuinfo, const char *corename, const char *env_coretype) {
    if (env_coretype || !cpuinfo || !corename) return NULL;
    int generic = 0;
    for (size_t i = 0; i < sizeof GENERIC / sizeof GENERIC[0]; i++) generic |= !strcasecmp(corename, GENERIC[i]);
    if (!generic) return NULL;
    const char *f = NULL;   /* the first "flags<spaces>:" line (x86 Linux); ARM's is "Features" */
    for (const char *p = cpuinfo; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, "flags", 5)) continue;
        const char *c = p + 5;
        while (*c == ' ' || *c == '\t') c++;
        if (*c == ':') { f = c + 1; break; }
    }
    if (!f) return NULL;
    if (has_word(f, "avx512f") && has_word(f, "avx512cd") && has_word(f, "avx512bw") && has_word(f, "avx512dq") &&
        has_word(f, "avx512vl"))
        return has_word(f, "avx512_bf16") ? "Cooperlake" : "SkylakeX";
    if (has_word(f, "avx2") && has_word(f, "fma")) return "Haswell";
    return NULL;
}

int blas_core_prefer(void) {
    if (getenv("OPENBLAS_CORETYPE")) return 0;   /* before reading anything: kept as it is */
    static char info[32768];   /* the first CPU's lines are in the first few KiB */
    FILE *fp = fopen("/proc/cpuinfo", "r");
    if (!fp) return 0;
    size_t n = fread(info, 1, sizeof info - 1, fp);
    fclose(fp);
    info[n] = 0;
    const char *was = openblas_get_corename();
    const char *pick = blas_core_pick(info, was, NULL);
    char mark[128];
    if (!pick || (size_t)snprintf(mark, sizeof mark, "%s:%s", was, pick) >= sizeof mark) return 0;
    if (setenv("DPMEM_BLAS_CORE", mark, 1) != 0) return 0;
    if (setenv("OPENBLAS_CORETYPE", pick, 1) != 0) { unsetenv("DPMEM_BLAS_CORE"); return 0; }
    return 1;
}

void blas_core_unprefer(void) {
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("DPMEM_BLAS_CORE");
}

const char *blas_core_name(void) { return openblas_get_corename(); }

const char *blas_core_source(char *buf, size_t n) {
    const char *set = getenv("OPENBLAS_CORETYPE"), *mark = getenv("DPMEM_BLAS_CORE"), *now = openblas_get_corename();
    const char *colon = mark ? strchr(mark, ':') : NULL;
    if (set && colon && !strcmp(colon + 1, set)) {   /* ours: "was:set" */
        if (!strcasecmp(now, set)) snprintf(buf, n, "set by dpmem: OpenBLAS took %.*s on this CPU", (int)(colon - mark), mark);
        else snprintf(buf, n, "dpmem asked for %s, OpenBLAS kept it (not a DYNAMIC_ARCH build?)", set);
    } else if (set) snprintf(buf, n, "OPENBLAS_CORETYPE=%s set before the run", set);
    else snprintf(buf, n, "OpenBLAS's own choice");
    return buf;
}
