/* test_kit_oom.c — the OOM post-mortem with more live buffers than it lists: the OOM event names
   exactly the 10 largest, largest first, whatever order they were allocated in; buffers of equal size
   by tag name (their order followed the table's slots, i.e. the addresses, so the same OOM read
   differently run to run: the docs' post-mortem could not be checked against its command). */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "check.h"
#include "logread.h"

enum { N = 15 };

int main(void) {
    char path[512], err[1024];
    test_path(path, sizeof path, "oom.log");
    CHECK(dpmem_open(path) == 0);
    /* sizes 1000·k for k in a scrambled order of 1..15 */
    static const int order[N] = { 7, 15, 2, 11, 4, 13, 9, 1, 14, 6, 10, 3, 12, 5, 8 };
    char tags[N][32];
    for (int i = 0; i < N; i++) {
        snprintf(tags[i], sizeof tags[i], "activations/b%d", order[i]);
        dpmem_tag_alloc((const void *)(uintptr_t)(0x1000u * (unsigned)(i + 1)), 1000u * (unsigned)order[i], tags[i]);
    }
    fflush(stderr);
    FILE *saved = stderr;
    stderr = fopen("/dev/null", "w");              /* the report itself is checked elsewhere */
    { DPMEM_SCOPE("forward"); dpmem_oom(1u << 20, "activations/big", DPMEM_HOST, 0, 0); }
    fclose(stderr); stderr = saved;
    dpmem_close();

    LogFile lf;
    CHECK(log_read(path, &lf, err, sizeof err) == 0);
    int ooms = 0;
    for (size_t i = 0; i < lf.nev; i++) {
        const LogEvent *e = &lf.ev[i];
        if (e->type != 11) continue;
        ooms++;
        uint32_t nstack = lr_u32(e->payload + 24), ncat = lr_u32(e->payload + 28), ntop = lr_u32(e->payload + 32);
        CHECK_EQ_U(nstack, 1);
        CHECK_EQ_U(ncat, 1);
        CHECK_EQ_U(ntop, 10);
        const uint8_t *top = e->payload + 40 + 8 + 16 * ncat;
        for (uint32_t k = 0; k < ntop; k++) {
            char want[32];
            snprintf(want, sizeof want, "activations/b%u", 15 - k);
            CHECK(!strcmp(log_str(&lf, lr_u32(top + 16 * k)), want));
            CHECK_EQ_U(lr_u64(top + 16 * k + 8), 1000u * (15 - k));
        }
    }
    CHECK_EQ_U(ooms, 1);
    log_free(&lf);

    /* 12 buffers of one size, tagged in a scrambled order at scrambled addresses: the 10 listed are
       the first 10 names, in name order */
    for (int i = 0; i < N; i++) dpmem_tag_free((const void *)(uintptr_t)(0x1000u * (unsigned)(i + 1)));
    test_path(path, sizeof path, "oom_ties.log");
    CHECK(dpmem_open(path) == 0);
    static const int names[12] = { 9, 3, 11, 0, 7, 5, 1, 10, 4, 8, 2, 6 };
    char ttags[12][32];
    for (int i = 0; i < 12; i++) {
        snprintf(ttags[i], sizeof ttags[i], "ties/t%02d", names[i]);
        dpmem_tag_alloc((const void *)(uintptr_t)(0x100000u + 0x7000u * (unsigned)((i * 5) % 12)), 4096, ttags[i]);
    }
    fflush(stderr);
    saved = stderr;
    stderr = fopen("/dev/null", "w");
    dpmem_oom(1u << 20, "ties/big", DPMEM_HOST, 0, 0);
    fclose(stderr); stderr = saved;
    dpmem_close();
    CHECK(log_read(path, &lf, err, sizeof err) == 0);
    ooms = 0;
    for (size_t i = 0; i < lf.nev; i++) {
        const LogEvent *e = &lf.ev[i];
        if (e->type != 11) continue;
        ooms++;
        uint32_t nstack = lr_u32(e->payload + 24), ncat = lr_u32(e->payload + 28), ntop = lr_u32(e->payload + 32);
        CHECK_EQ_U(ntop, 10);
        const uint8_t *top2 = e->payload + 40 + ((4 * nstack + 7) & ~7u) + 16 * ncat;   /* stack padded to 8 */
        for (uint32_t k = 0; k < ntop; k++) {
            char want[32];
            snprintf(want, sizeof want, "ties/t%02u", k);
            CHECK(!strcmp(log_str(&lf, lr_u32(top2 + 16 * k)), want));
            CHECK_EQ_U(lr_u64(top2 + 16 * k + 8), 4096);
        }
    }
    CHECK_EQ_U(ooms, 1);
    log_free(&lf);
    return check_exit("test_kit_oom");
}
