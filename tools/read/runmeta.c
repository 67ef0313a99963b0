/* runmeta.c — see runmeta.h. */
#include "runmeta.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long meta_long(const DpmemLog *L, const char *key) {
    const char *v = dpmem_log_meta(L, key);
    char *end;
    long x = v ? strtol(v, &end, 10) : 0;
    return v && *v && !*end && x > 0 ? x : 0;
}

static void copy(char *out, size_t n, const char *s) { snprintf(out, n, "%s", s ? s : ""); }

void runmeta_of(RunMeta *m, const DpmemLog *L) {
    memset(m, 0, sizeof *m);
    const char *model = dpmem_log_meta(L, "config.model");
    long dim = meta_long(L, "config.dim"), layers = meta_long(L, "config.n_layers");
    long vocab = meta_long(L, "config.vocab_size"), heads = meta_long(L, "config.n_heads");
    long kv = meta_long(L, "config.n_kv_heads"), ffn = meta_long(L, "config.ffn_dim");
    /* a shape of the flags' own (no preset's): all its dimensions */
    if (model && !strcmp(model, "custom") && dim && layers && vocab && heads && kv && ffn)
        snprintf(m->model, sizeof m->model, "custom (V=%ld C=%ld L=%ld NH=%ld NKV=%ld F=%ld)", vocab, dim, layers, heads, kv, ffn);
    else if (model && dim && layers) snprintf(m->model, sizeof m->model, "%.40s (dim %ld, %ld layers)", model, dim, layers);
    else copy(m->model, sizeof m->model, model);
    const char *task = dpmem_log_meta(L, "config.task");
    if (task && strcmp(task, "lm")) {
        long k = meta_long(L, "config.num_labels");
        if (!strcmp(task, "classify") && k) snprintf(m->task, sizeof m->task, "classify (K=%ld)", k);
        else copy(m->task, sizeof m->task, task);
    }
    copy(m->seq, sizeof m->seq, dpmem_log_meta(L, "config.seq_len"));
    /* DP runs say it; vanilla runs B as physical batches accumulated */
    m->b_logical = meta_long(L, "dp.logical_batch");
    m->b_physical = meta_long(L, "dp.physical_batch");
    if (!m->b_logical) {
        long b = meta_long(L, "config.batch_size"), acc = meta_long(L, "config.grad_accum");
        m->b_physical = b;
        m->b_logical = b * (acc ? acc : 1);
    }
    copy(m->precision, sizeof m->precision, dpmem_log_meta(L, "config.precision"));
    const char *ck = dpmem_log_meta(L, "config.checkpoint_activations");
    m->ckpt = ck ? atoi(ck) != 0 : -1;
    const char *dev = dpmem_log_meta(L, "config.device"), *pf = dpmem_log_meta(L, "config.plan_for");
    m->plan = dev && !strcmp(dev, "plan");
    if (m->plan) snprintf(m->device, sizeof m->device, "plan for %.20s", pf ? pf : "?");
    else {   /* "auto" says what was asked; the backend says what ran */
        const char *be = dpmem_log_meta(L, "config.backend");
        copy(m->device, sizeof m->device, dev && !strcmp(dev, "auto") && be && *be ? be : dev);
    }
    const char *ml = dpmem_log_meta(L, "config.mem_limit");
    m->mem_limit = ml ? strtod(ml, NULL) : 0;
    if (L->start_unix_ns) {
        time_t t = (time_t)(L->start_unix_ns / 1000000000ull);
        struct tm tm;
        if (gmtime_r(&t, &tm)) strftime(m->date, sizeof m->date, "%Y-%m-%d %H:%M UTC", &tm);
    }
}

#define SEP " \xC2\xB7 "   /* " · " */

static void add(char *out, size_t len, size_t *k, const char *s) {
    if (*k >= len) return;
    *k += (size_t)snprintf(out + *k, len - *k, "%s%s", *k ? SEP : "", s);
}

/* The task: said when it is not the causal LM, or when the runs differ in it (each task once). */
static void add_tasks(const RunMeta *m, int n, char *out, size_t len, size_t *k) {
    char b[200] = "tasks: ";
    int kinds = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = !strcmp(m[j].task, m[i].task);
        if (seen) continue;
        size_t at = strlen(b);
        snprintf(b + at, sizeof b - at, "%s%s", kinds++ ? ", " : "", *m[i].task ? m[i].task : "causal LM");
    }
    if (kinds > 1) add(out, len, k, b);
    else if (kinds == 1 && *m[0].task) add(out, len, k, m[0].task);
}

void runmeta_summary(const RunMeta *m, int n, char *out, size_t len) {
    size_t k = 0;
    char b[96];
    out[0] = 0;
    int same_model = 1, same_seq = 1, same_b = 1, same_prec = 1, same_ck = 1, same_dev = 1;
    for (int i = 1; i < n; i++) {
        same_model &= !strcmp(m[i].model, m[0].model);
        same_seq &= !strcmp(m[i].seq, m[0].seq);
        same_b &= m[i].b_logical == m[0].b_logical && m[i].b_physical == m[0].b_physical;
        same_prec &= !strcmp(m[i].precision, m[0].precision);
        same_ck &= m[i].ckpt == m[0].ckpt;
        same_dev &= !strcmp(m[i].device, m[0].device);
    }
    if (n < 1) return;
    if (same_model && *m[0].model) add(out, len, &k, m[0].model);
    add_tasks(m, n, out, len, &k);
    if (same_seq && *m[0].seq) { snprintf(b, sizeof b, "T=%s", m[0].seq); add(out, len, &k, b); }
    if (same_b && m[0].b_logical) {
        if (m[0].b_physical && m[0].b_physical != m[0].b_logical) snprintf(b, sizeof b, "B=%ld (physical %ld)", m[0].b_logical, m[0].b_physical);
        else snprintf(b, sizeof b, "B=%ld", m[0].b_logical);
        add(out, len, &k, b);
    }
    if (same_prec && *m[0].precision) add(out, len, &k, m[0].precision);
    if (same_ck && m[0].ckpt == 1) add(out, len, &k, "activations checkpointed");
    if (same_dev && *m[0].device) add(out, len, &k, m[0].device);
    if (*m[0].date) {
        snprintf(b, sizeof b, "%.*s", n == 1 ? 31 : 10, m[0].date);
        add(out, len, &k, b);
    }
}
