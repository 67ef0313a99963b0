/* test_blas_core.c — OpenBLAS's core (kernels/cpu/blas_core.h): the choice from canned /proc/cpuinfo
   text and core names (an AVX-512 VM's CPU with no model, on which Debian's OpenBLAS 0.3.21 takes
   Prescott; AVX2 only; a CPU OpenBLAS knows; no AVX; "avx512fp16" is not "avx512f"), a value already in
   the environment kept (never replaced, nor anything re-executed), and a trainer's header and META
   naming the core in use and where it came from (build/train_vanilla with OPENBLAS_CORETYPE=Haswell
   set before it, and with nothing set). Exits 0 on pass, 1 on failure. */
#include "cpu/blas_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0;
#define CHECK(cond, ...) do { if (!(cond)) { printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); failures++; } } while (0)

static int same(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

/* the VM: an Intel CPU reporting no model, flags with AVX-512 and BF16 */
static const char XEON_VM[] =
    "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\nmodel name\t: Intel(R) Xeon(R) Processor\n"
    "flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht syscall "
    "nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology cpuid tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 "
    "sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm abm 3dnowprefetch fsgsbase bmi1 hle avx2 smep "
    "bmi2 erms invpcid rtm avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni avx512bw avx512vl xsaveopt "
    "xsavec xgetbv1 xsaves avx_vnni avx512_bf16 wbnoinvd arat avx512vbmi umip pku ospke waitpkg avx512_vbmi2 gfni vaes "
    "vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq rdpid cldemote movdiri movdir64b md_clear serialize tsxldtrk "
    "amx_bf16 avx512_fp16 amx_tile amx_int8 arch_capabilities\nbugs\t\t: spectre_v1\n\nprocessor\t: 1\nflags\t\t: fpu\n";
static const char SKX[] = "model name\t: Intel(R) Xeon(R) CPU\nflags\t\t: sse sse2 ssse3 fma sse4_1 avx avx2 avx512f avx512dq avx512cd avx512bw avx512vl\n";
static const char HSW[] = "model name\t: Intel(R) Core(TM)\nflags\t\t: sse sse2 ssse3 fma sse4_1 sse4_2 avx avx2 bmi2\n";
static const char AVX_ONLY[] = "flags\t\t: sse sse2 ssse3 sse4_1 sse4_2 avx\n";
static const char FP16_NOT_F[] = "flags\t\t: sse2 avx avx512fp16 avx512cdx avx512bw avx512dq avx512vl\n";   /* no avx512f, no avx2 */
static const char ARM[] = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp\n";

static void check_pick(void) {
    CHECK(same(blas_core_pick(XEON_VM, "Prescott", NULL), "Cooperlake"), "AVX-512 + BF16 on Prescott: %s", blas_core_pick(XEON_VM, "Prescott", NULL));
    CHECK(same(blas_core_pick(SKX, "Prescott", NULL), "SkylakeX"), "AVX-512 on Prescott");
    CHECK(same(blas_core_pick(SKX, "Nehalem", NULL), "SkylakeX"), "AVX-512 on Nehalem");
    CHECK(same(blas_core_pick(HSW, "Prescott", NULL), "Haswell"), "AVX2 on Prescott");
    CHECK(same(blas_core_pick(HSW, "Sandybridge", NULL), "Haswell"), "AVX2 on Sandybridge");
    CHECK(same(blas_core_pick(HSW, "prescott", NULL), "Haswell"), "core names in any case");
    /* nothing to change */
    CHECK(blas_core_pick(XEON_VM, "Prescott", "Prescott") == NULL, "a preset OPENBLAS_CORETYPE is kept");
    CHECK(blas_core_pick(XEON_VM, "Prescott", "") == NULL, "an empty preset OPENBLAS_CORETYPE is kept too");
    CHECK(blas_core_pick(XEON_VM, "SkylakeX", NULL) == NULL, "a core with AVX-512 kernels stays");
    CHECK(blas_core_pick(XEON_VM, "Haswell", NULL) == NULL, "OpenBLAS's own AVX2 choice stays");
    CHECK(blas_core_pick(SKX, "Zen", NULL) == NULL, "Zen stays");
    CHECK(blas_core_pick(HSW, "Excavator", NULL) == NULL, "an AMD core of its own stays");
    CHECK(blas_core_pick(AVX_ONLY, "Prescott", NULL) == NULL, "no AVX2: nothing better known");
    CHECK(blas_core_pick(FP16_NOT_F, "Prescott", NULL) == NULL, "avx512fp16/avx512cdx are not avx512f/avx512cd");
    CHECK(blas_core_pick(ARM, "ARMV8", NULL) == NULL, "not x86: no choice");
    CHECK(blas_core_pick("", "Prescott", NULL) == NULL && blas_core_pick(NULL, "Prescott", NULL) == NULL, "no cpuinfo");
    CHECK(blas_core_pick(SKX, NULL, NULL) == NULL, "no core name");
    CHECK(blas_core_pick("flagsy: avx2 fma\n", "Prescott", NULL) == NULL, "only a line named flags counts");
}

/* In this process: a preset value stays as it is, and nothing is asked for beside it. */
static void check_preset_kept(void) {
    setenv("OPENBLAS_CORETYPE", "Haswell", 1);
    unsetenv("DPMEM_BLAS_CORE");
    CHECK(blas_core_prefer() == 0, "blas_core_prefer with OPENBLAS_CORETYPE set");
    CHECK(same(getenv("OPENBLAS_CORETYPE"), "Haswell") && !getenv("DPMEM_BLAS_CORE"), "the preset was replaced: %s", getenv("OPENBLAS_CORETYPE"));
    char buf[160];
    CHECK(!strcmp(blas_core_source(buf, sizeof buf), "OPENBLAS_CORETYPE=Haswell set before the run"), "source: %s", buf);
    unsetenv("OPENBLAS_CORETYPE");
    CHECK(!strcmp(blas_core_source(buf, sizeof buf), "OpenBLAS's own choice"), "source: %s", buf);
}

/* A trainer's header and META: the core in use and where it came from. */
static void check_trainer(void) {
    const char *B = getenv("DPMEM_BUILD") ? getenv("DPMEM_BUILD") : "build";
    char cmd[4096], line[4096];
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char log[512];
    snprintf(log, sizeof log, "%s/test_blas_core.%d.log", tmp, (int)getpid());
    for (int preset = 1; preset >= 0; preset--) {
        snprintf(cmd, sizeof cmd, "%s %s/train_vanilla --steps 1 --threads 1 --log '%s' 2>&1 && python3 -c "
                 "\"import sys; sys.path.insert(0, 'python/dpmem'); import logread; m = logread.read(sys.argv[1]).meta; "
                 "print('META', m.get('blas.core'), '|', m.get('blas.core_from'))\" '%s'",
                 preset ? "OPENBLAS_CORETYPE=Haswell" : "env -u OPENBLAS_CORETYPE -u DPMEM_BLAS_CORE", B, log, log);
        if ((size_t)snprintf(NULL, 0, "%s", cmd) >= sizeof cmd - 1) { CHECK(0, "command too long"); return; }
        FILE *p = popen(cmd, "r");
        int header = 0, meta = 0;
        while (p && fgets(line, sizeof line, p)) {
            if (strstr(line, "train_vanilla: tiny model")) {
                header = preset ? strstr(line, "cpu backend (OpenBLAS core Haswell, OPENBLAS_CORETYPE=Haswell set before the run)") != NULL
                                : strstr(line, "cpu backend (OpenBLAS core ") != NULL;
                if (!header) printf("  header: %s", line);
            }
            if (!strncmp(line, "META ", 5)) {
                meta = preset ? !strcmp(line, "META Haswell | OPENBLAS_CORETYPE=Haswell set before the run\n")
                              : strncmp(line, "META None", 9) != 0;
                if (!meta) printf("  %s", line);
            }
        }
        int rc = p ? pclose(p) : -1;
        CHECK(rc == 0 && header && meta, "%s: train_vanilla's header or META (exit %d, header %d, meta %d)", preset ? "preset Haswell" : "nothing set", rc, header, meta);
    }
    remove(log);
}

/* On a CPU OpenBLAS does not know (LD_PRELOAD: it says Prescott until OPENBLAS_CORETYPE is set): the
   trainer sets the core this CPU's flags allow, executes itself again once, and says so. */
static void check_reexec(void) {
    const char *B = getenv("DPMEM_BUILD") ? getenv("DPMEM_BUILD") : "build";
    static char info[32768];
    FILE *f = fopen("/proc/cpuinfo", "r");
    size_t n = f ? fread(info, 1, sizeof info - 1, f) : 0;
    if (f) fclose(f);
    info[n] = 0;
    const char *want = blas_core_pick(info, "Prescott", NULL);
    char cmd[2048], line[4096], expect[256];
    const char *asan = getenv("ASAN_OPTIONS");
    snprintf(cmd, sizeof cmd, "env -u OPENBLAS_CORETYPE -u DPMEM_BLAS_CORE LD_PRELOAD=%s/tests/libfake_corename.so "
             "ASAN_OPTIONS=%s%sverify_asan_link_order=0 %s/train_vanilla --steps 1 --threads 1 2>&1", B, asan ? asan : "", asan ? ":" : "", B);
    if (want) snprintf(expect, sizeof expect, "cpu backend (OpenBLAS core %s, set by dpmem: OpenBLAS took Prescott on this CPU)", want);
    else snprintf(expect, sizeof expect, "cpu backend (OpenBLAS core Prescott, OpenBLAS's own choice)");
    FILE *p = popen(cmd, "r");
    int header = 0;
    while (p && fgets(line, sizeof line, p)) {
        if (strstr(line, "train_vanilla: tiny model")) { header = strstr(line, expect) != NULL; if (!header) printf("  header: %s", line); }
        else if (strstr(line, "error") || strstr(line, "ERROR")) printf("  %s", line);
    }
    int rc = p ? pclose(p) : -1;
    CHECK(rc == 0 && header, "re-executed with the core of this CPU (%s): exit %d, want '%s'", want ? want : "none known", rc, expect);
}

int main(void) {
    check_pick();
    check_preset_kept();
    check_trainer();
    check_reexec();
    if (failures) { printf("%d check(s) failed\n", failures); return 1; }
    printf("blas core: all checks passed\n");
    return 0;
}
