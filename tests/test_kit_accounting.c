/* test_kit_accounting.c — live, peak and at-peak bytes per category for scripted alloc/free
   sequences, bad frees, re-tags, memory spaces, snapshots, META, the OOM post-mortem, and that
   replaying the log's ALLOC/FREE events gives exactly the kit's own numbers. */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "check.h"
#include "logread.h"

#include <fcntl.h>
#include <unistd.h>

/* Fake, never-dereferenced addresses: the kit only records them. */
#define P(n) ((const void *)(uintptr_t)(0x10000u * (n)))

static int cat_index(const LogFile *lf, const char **names, int *n, uint32_t tag) {
    const char *t = log_str(lf, tag);
    const char *slash = strchr(t, '/');
    size_t len = slash ? (size_t)(slash - t) : strlen(t);
    for (int i = 0; i < *n; i++) if (strlen(names[i]) == len && !strncmp(names[i], t, len)) return i;
    char *copy = (char *)malloc(len + 1); memcpy(copy, t, len); copy[len] = 0;
    names[*n] = copy;
    return (*n)++;
}

/* A layer's close hook runs before the CLOSE event and can still write. */
static int hook_calls;
static void on_close(void *user) { hook_calls++; dpmem_log_device_sample(123, *(size_t *)user); }

int main(void) {
    char path[512], errpath[512], err[1024];
    static size_t total_for_hook = 456;
    dpmem_set_close_hook(on_close, &total_for_hook);
    test_path(path, sizeof path, "accounting.log");
    test_path(errpath, sizeof errpath, "accounting.stderr");
    dpmem_meta("run", "accounting-test");   /* before open: must still reach the log */
    CHECK(dpmem_open(path) == 0);
    dpmem_meta_int("config.seq_len", 17);

    /* A scripted sequence with hand-computed totals. */
    dpmem_tag_alloc(P(1), 1000, "params/wq");
    dpmem_tag_alloc(P(2), 500, "grads/wq");
    dpmem_tag_alloc(P(3), 3000, "activations/h");
    CHECK_EQ_U(dpmem_live_bytes(NULL), 4500);
    CHECK_EQ_U(dpmem_peak_bytes(NULL), 4500);
    CHECK_EQ_U(dpmem_tag_free(P(3)), 3000);
    dpmem_tag_alloc(P(4), 2000, "activations/g");
    CHECK_EQ_U(dpmem_live_bytes(NULL), 3500);
    CHECK_EQ_U(dpmem_peak_bytes(NULL), 4500);               /* the peak stays */
    CHECK_EQ_U(dpmem_peak_bytes("activations"), 3000);      /* the category's own high-water mark */
    CHECK_EQ_U(dpmem_live_bytes("activations"), 2000);
    dpmem_tag_alloc(P(5), 4000, "optimizer/m");             /* total 7500: a new peak */
    CHECK_EQ_U(dpmem_peak_bytes(NULL), 7500);
    CHECK_EQ_U(dpmem_bytes_at_peak("params"), 1000);
    CHECK_EQ_U(dpmem_bytes_at_peak("grads"), 500);
    CHECK_EQ_U(dpmem_bytes_at_peak("activations"), 2000);   /* not its own peak of 3000 */
    CHECK_EQ_U(dpmem_bytes_at_peak("optimizer"), 4000);
    CHECK_EQ_U(dpmem_bytes_at_peak("nonexistent"), 0);
    dpmem_snapshot("after_optimizer");

    /* Bad frees: a warning each, counters untouched. */
    CHECK_EQ_U(dpmem_tag_free(P(99)), 0);
    CHECK_EQ_U(dpmem_tag_free(P(3)), 0);                    /* already freed */
    CHECK_EQ_U(dpmem_live_bytes(NULL), 7500);
    CHECK_EQ_U(dpmem_tag_free(NULL), 0);                    /* like free(NULL): no warning */

    /* Re-tag of a live address: the old record is replaced (and a warning written). */
    dpmem_tag_alloc(P(4), 2500, "activations/g2");
    CHECK_EQ_U(dpmem_live_bytes("activations"), 2500);
    CHECK_EQ_U(dpmem_live_bytes(NULL), 8000);
    CHECK_EQ_U(dpmem_tag_bytes(P(4)), 2500);
    CHECK_EQ_U(dpmem_bytes_at_peak("activations"), 2500);   /* 8000 is the new peak */

    /* A tag with no '/' is its own category; spaces are counted apart. */
    dpmem_tag_alloc_space(P(6), 300, "workspace", DPMEM_DEVICE);
    dpmem_tag_alloc_space(P(7), 200, "ghost/layers.0.aaT", DPMEM_PINNED);
    CHECK_EQ_U(dpmem_live_bytes("workspace"), 300);
    CHECK_EQ_U(dpmem_live_bytes_in(DPMEM_DEVICE), 300);
    CHECK_EQ_U(dpmem_live_bytes_in(DPMEM_PINNED), 200);
    CHECK_EQ_U(dpmem_live_bytes_in(DPMEM_HOST), 8000);

    /* Category iteration: the order of first use. */
    const char *expect[] = { "params", "grads", "activations", "optimizer", "workspace", "ghost" };
    CHECK_EQ_U(dpmem_category_count(), 6);
    for (int i = 0; i < 6; i++) CHECK(dpmem_category_name(i) && !strcmp(dpmem_category_name(i), expect[i]));
    CHECK(dpmem_category_name(6) == NULL);

    /* Per-phase peaks. */
    dpmem_reset_peak();
    CHECK_EQ_U(dpmem_peak_bytes(NULL), 8500);
    CHECK_EQ_U(dpmem_peak_bytes("activations"), 2500);

    /* The OOM post-mortem, with its stderr report captured. */
    fflush(stderr);
    int saved = dup(2), fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    {
        DPMEM_SCOPE("step");
        DPMEM_SCOPE("backward");
        dpmem_oom((size_t)2 << 30, "ghost/layers.7.ggT", DPMEM_DEVICE, (size_t)79 << 30, (size_t)80 << 30);
    }
    fflush(stderr); dup2(saved, 2); close(fd); close(saved);
    FILE *ef = fopen(errpath, "r");
    char report[4096] = {0};
    CHECK(ef && fread(report, 1, sizeof report - 1, ef) > 0);
    if (ef) fclose(ef);
    CHECK(strstr(report, "OOM in backward: asked 2.0 GiB for ghost/layers.7.ggT; live:") != NULL);
    CHECK(strstr(report, "optimizer 3.9 KiB") != NULL);
    CHECK(strstr(report, "device 79.0 GiB used of 80.0 GiB") != NULL);
    CHECK(strstr(report, "largest: optimizer/m 3.9 KiB") != NULL);

    size_t live = dpmem_live_bytes(NULL), peak = dpmem_peak_bytes(NULL);
    dpmem_close();
    dpmem_close();                 /* a second close does nothing (and runs no hook) */
    CHECK_EQ_U(hook_calls, 1);

    /* The log says the same. */
    LogFile lf;
    CHECK(log_read(path, &lf, err, sizeof err) == 0);
    CHECK(lf.closed);
    const char *names[16]; int ncat = 0;
    uint64_t clive[16] = {0}, total = 0, maxtotal = 0, last_ts = 0;
    int metas = 0, warns_unknown = 0, warns_retag = 0, snapshots = 0, ooms = 0, device_before_close = 0, closes = 0;
    for (size_t i = 0; i < lf.nev; i++) {
        const LogEvent *e = &lf.ev[i];
        if (e->type == 6 || e->type == 7) {
            CHECK(e->ts > last_ts); last_ts = e->ts;           /* strictly increasing */
            int c = cat_index(&lf, names, &ncat, e->id);
            uint64_t bytes = lr_u64(e->payload + 8);
            if (e->type == 6) { clive[c] += bytes; total += bytes; } else { clive[c] -= bytes; total -= bytes; }
            if (total > maxtotal) maxtotal = total;
        } else if (e->type == 3) {
            const char *k = log_str(&lf, e->id), *v = log_str(&lf, lr_u32(e->payload));
            metas += (!strcmp(k, "run") && !strcmp(v, "accounting-test")) + (!strcmp(k, "config.seq_len") && !strcmp(v, "17"));
        } else if (e->type == 8) {
            warns_unknown += !strcmp(log_str(&lf, e->id), "free of an unknown or already freed address");
            warns_retag += !strcmp(log_str(&lf, e->id), "address tagged again without a free");
        } else if (e->type == 9) {
            snapshots++;
            CHECK(!strcmp(log_str(&lf, e->id), "after_optimizer"));
            CHECK_EQ_U(lr_u32(e->payload + 24), 4);            /* four categories then */
            CHECK(!strcmp(log_str(&lf, lr_u32(e->payload + 32 + 16 * 3)), "optimizer"));
            CHECK_EQ_U(lr_u64(e->payload + 40 + 16 * 3), 4000);
            CHECK_EQ_U(lr_u64(e->payload + 40 + 16 * 2), 2000); /* activations */
        } else if (e->type == 12) {
            device_before_close += !closes && lr_u64(e->payload) == 123 && lr_u64(e->payload + 8) == 456;
        } else if (e->type == 13) {
            closes++;
        } else if (e->type == 11) {
            ooms++;
            CHECK(!strcmp(log_str(&lf, e->id), "ghost/layers.7.ggT"));
            CHECK_EQ_U(e->aux, DPMEM_DEVICE);
            CHECK_EQ_U(lr_u64(e->payload), (uint64_t)2 << 30);
            CHECK_EQ_U(lr_u64(e->payload + 16), (uint64_t)80 << 30);
            uint32_t nstack = lr_u32(e->payload + 24), ncats = lr_u32(e->payload + 28), ntop = lr_u32(e->payload + 32);
            CHECK_EQ_U(nstack, 2); CHECK_EQ_U(ncats, 6); CHECK_EQ_U(ntop, 6);   /* six live buffers */
            CHECK(!strcmp(log_str(&lf, lr_u32(e->payload + 40)), "step"));
            CHECK(!strcmp(log_str(&lf, lr_u32(e->payload + 44)), "backward"));
            const uint8_t *top = e->payload + 40 + 8 + 16 * ncats;   /* stack: 2 ids = 8 bytes */
            CHECK(!strcmp(log_str(&lf, lr_u32(top)), "optimizer/m"));
            CHECK_EQ_U(lr_u64(top + 8), 4000);
        }
    }
    CHECK_EQ_U(metas, 2);
    CHECK_EQ_U(warns_unknown, 2);
    CHECK_EQ_U(warns_retag, 1);
    CHECK_EQ_U(snapshots, 1);
    CHECK_EQ_U(ooms, 1);
    CHECK_EQ_U(device_before_close, 1);
    CHECK_EQ_U(closes, 1);
    CHECK_EQ_U(total, live);
    CHECK_EQ_U(maxtotal, 8500);    /* the log's own peak (reset_peak is not logged) */
    CHECK(peak == 8500);
    for (int i = 0; i < ncat; i++) CHECK_EQ_U(clive[i], dpmem_live_bytes(names[i]));
    log_free(&lf);
    for (int i = 0; i < ncat; i++) free((void *)names[i]);

    /* Totals past 2^63 (what the tools call forged): such an allocation is not counted (a warning),
       so the totals never wrap: four of 2^62 bytes summed to 0 before (a plan of 3.2e19 bytes said 1.8e19). */
    size_t before = dpmem_live_bytes(NULL);
    for (int i = 0; i < 4; i++) dpmem_tag_alloc(P(200 + i), (size_t)1 << 62, "huge/x");
    CHECK_EQ_U(dpmem_live_bytes("huge"), (uint64_t)1 << 62);
    CHECK_EQ_U(dpmem_live_bytes(NULL), before + ((uint64_t)1 << 62));
    CHECK_EQ_U(dpmem_tag_bytes(P(201)), 0);                 /* not recorded: its free is a warning, not a wrap */
    dpmem_tag_alloc(P(210), ((size_t)1 << 63) - ((size_t)1 << 62) - before - 1, "huge/y");   /* up to 2^63 - 1: counted */
    CHECK_EQ_U(dpmem_live_bytes(NULL), ((uint64_t)1 << 63) - 1);
    for (int i = 0; i < 4; i++) dpmem_tag_free(P(200 + i));
    dpmem_tag_free(P(210));
    CHECK_EQ_U(dpmem_live_bytes(NULL), before);
    return check_exit("test_kit_accounting");
}
