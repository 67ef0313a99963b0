/* test_dp_rig.h — the DP end-to-end tests' rig: a tiny LLaMA built on the CPU backend from a config,
   with rows of tokens uploaded on demand and every byte checked freed at the end. The including file
   defines CHECK(cond, fmt, ...) first. */
#ifndef TEST_DP_RIG_H
#define TEST_DP_RIG_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { TrainConfig cfg; KBackend kb; TrainState s; } Rig;

static inline void *xcalloc(size_t n, size_t sz) {
    void *p = calloc(n ? n : 1, sz);
    if (!p) { printf("FAIL: out of memory\n"); exit(1); }
    return p;
}

static inline void rig_config(TrainConfig *c, const LlamaConfig *mc, int B, int T, const char *optimizer) {
    config_defaults(c);
    c->model = *mc;
    c->batch_size = B; c->seq_len = T; c->steps = 1; c->quiet = 1; c->threads = 1;
    snprintf(c->optimizer, sizeof c->optimizer, "%s", optimizer);
}

/* frozen: which parameters get no gradient (LoRA's base), or NULL */
static inline void rig_open(Rig *r, uint64_t seed, int (*frozen)(void *, const ParamInfo *)) {
    kbackend_cpu_init(&r->kb, 1);
    memset(&r->s, 0, sizeof r->s);
    r->s.cfg = &r->cfg; r->s.kb = &r->kb;
    dist_init(&r->s.dist, &r->kb, &r->s.model, 0, 1, &r->s.phase_s[TRAIN_PH_ALLREDUCE]);   /* (one rank: no collective) */
    r->s.data.synthetic = 1;
    if (llama_build(&r->s.model, &r->kb, &r->cfg.model, r->cfg.batch_size, r->cfg.seq_len, r->cfg.optimizer, seed,
                    frozen, NULL)) {
        printf("FAIL: llama_build: %s\n", kbackend_error(&r->kb)); exit(1);
    }
}

static inline void rig_close(Rig *r) {
    llama_free(&r->s.model);
    CHECK(r->kb.live == 0, "%zu bytes left allocated", r->kb.live);
    kbackend_destroy(&r->kb);
}

/* The model's B rows of tokens and targets from row row0 of tok/tgt. */
static inline void rig_rows(Rig *r, const int *tok, const int *tgt, int row0) {
    size_t n = (size_t)r->s.model.B * r->s.model.T, off = (size_t)row0 * r->s.model.T;
    kbuf_upload(&r->kb, r->s.model.tokens, tok + off, n * sizeof(int));
    kbuf_upload(&r->kb, r->s.model.targets, tgt + off, n * sizeof(int));
}

#endif
