/* shard.c — the sharded training state of --zero 1|2 (see shard.h): the slices, their AdamW state,
   and the two collectives, reduce-scatter of the gradients and all-gather of the parameters, in
   rounds through the bucket comm/shard_bucket. Not here: the transport (comm.c, comm_nccl.c), the
   update itself (train.c's optimizer step, on the ranges train_grad_range gives). */
#include "shard.h"
#include "train.h"
#include "checkpoint.h"
#include "comm.h"
#include "dpmem.h"

#include <stdio.h>
#include <stdlib.h>

/* One piece of a round: positions [a, a + k) of tensor i's slices (of every rank; a shorter slice
   contributes what it has), at offset `at` of each rank's part of the bucket. */
typedef struct { int i; size_t a, k, at; } Piece;

void train_grad_range(const TrainState *s, int i, size_t *lo, size_t *n) {
    if (s->shard) { *lo = s->shard->lo[i]; *n = s->shard->len[i]; return; }
    *lo = 0;
    *n = s->model.params[i].numel;
}

static size_t bucket_cap_floats(void) {   /* as allreduce.c's: DPMEM_COMM_BUCKET_MB, default 16 MiB */
    const char *e = getenv("DPMEM_COMM_BUCKET_MB");
    long mb = e && *e ? atol(e) : 16;
    if (mb < 1) mb = 1;
    return (size_t)mb * (1u << 20) / sizeof(float);
}

static float *alloc_named(KBackend *kb, size_t floats, const char *name, const char *suffix) {
    char tag[160];
    snprintf(tag, sizeof tag, "optimizer/%s%s", name, suffix);
    return kbuf_alloc(kb, (floats ? floats : 1) * sizeof(float), tag);
}

int shard_init(TrainState *s) {
    const TrainConfig *c = s->cfg;
    if (c->zero <= 0) return 0;
    LlamaModel *m = &s->model;
    Shard *h = calloc(1, sizeof *h);
    if (h) {
        h->lo = calloc((size_t)m->n_params, sizeof *h->lo);
        h->len = calloc((size_t)m->n_params, sizeof *h->len);
        h->m = calloc((size_t)m->n_params, sizeof *h->m);
        h->v = calloc((size_t)m->n_params, sizeof *h->v);
    }
    if (!h || !h->lo || !h->len || !h->m || !h->v) {
        if (h) { free(h->lo); free(h->len); free(h->m); free(h->v); }
        free(h);
        snprintf(s->kb->err, sizeof s->kb->err, "out of host memory (the shards)");
        return -1;
    }
    h->stage = c->zero; h->world = g_comm.world; h->rank = g_comm.rank; h->n = m->n_params;
    s->shard = h;
    const int adam = !strcmp(c->optimizer, "adamw");
    size_t longest = 0;   /* rank 0's floats over all tensors: a bucket holding them all needs one round */
    for (int i = 0; i < m->n_params; i++) {
        const ParamInfo *p = &m->params[i];
        if (!p->trainable) continue;
        size_t lo0, len0;
        llama_slice(p->numel, h->world, 0, &lo0, &len0);
        longest += len0;
        llama_slice(p->numel, h->world, h->rank, &h->lo[i], &h->len[i]);
        if (!adam || h->len[i] == 0) continue;
        if (!(h->m[i] = alloc_named(s->kb, h->len[i], p->name, ".exp_avg")) ||
            !(h->v[i] = alloc_named(s->kb, h->len[i], p->name, ".exp_avg_sq")))
            return -1;
        if (fill_buffer(s->kb, h->m[i], 0.0f, h->len[i]) || fill_buffer(s->kb, h->v[i], 0.0f, h->len[i])) return -1;
    }
    if (longest == 0) return 0;   /* nothing trainable in the model (LoRA): nothing to gather */
    size_t per_rank = bucket_cap_floats() / (size_t)h->world;
    if (per_rank < 1) per_rank = 1;
    if (per_rank > longest) per_rank = longest;
    if (per_rank > (size_t)1 << 30) per_rank = (size_t)1 << 30;   /* MPI counts are int */
    s->comm_bucket_n = per_rank * (size_t)h->world;
    if (!(s->comm_bucket = kbuf_alloc(s->kb, s->comm_bucket_n * sizeof(float), "comm/shard_bucket"))) return -1;
    if (!llama_params_sharded(m)) return 0;
    size_t widest = 0;   /* --zero 3: rank 0's slice of the largest gathered tensor, at most the bucket's part */
    for (int i = 0; i < m->n_params; i++) {
        size_t lo0, len0;
        if (!llama_master_sharded(m, &m->params[i])) continue;
        llama_slice(m->params[i].numel, h->world, 0, &lo0, &len0);
        if (len0 > widest) widest = len0;
    }
    if (widest > per_rank) widest = per_rank;
    h->gb_n = (widest ? widest : 1) * (size_t)h->world;
    return (h->gb = kbuf_alloc(s->kb, h->gb_n * sizeof(float), "comm/gather_bucket")) ? 0 : -1;
}

void shard_free(TrainState *s) {
    Shard *h = s->shard;
    if (!h) return;
    kbuf_free(s->kb, h->gb);
    for (int i = h->n - 1; i >= 0; i--) {
        kbuf_free(s->kb, h->v[i]);
        kbuf_free(s->kb, h->m[i]);
    }
    free(h->lo); free(h->len); free(h->m); free(h->v);
    free(h);
    s->shard = NULL;
}

static int collective(TrainState *s, int gather, size_t count, const char *what) {
    return train_collective(s, gather ? COMM_ALLGATHER : COMM_REDUCE_SCATTER, s->comm_bucket, count, what, NULL);
}

/* Rank r's part of piece q into (pack) or out of the bucket, between it and tensor set t. */
static int move(TrainState *s, LlamaTensors *t, const Piece *q, int r, size_t stride, int pack) {
    const ParamInfo *p = &s->model.params[q->i];
    size_t lo, len;
    llama_slice(p->numel, s->shard->world, r, &lo, &len);
    if (q->a >= len) return 0;
    const size_t k = len - q->a < q->k ? len - q->a : q->k;
    float *x = *llama_tensor(t, p) + lo + q->a, *b = s->comm_bucket + (size_t)r * stride + q->at;
    return copy_buffer(s->kb, pack ? b : x, pack ? x : b, k);
}

/* Every trainable tensor's slices through the bucket in rounds: gather (params: this rank's slices
   out, every other rank's in) or reduce-scatter (grads: every rank's slice out, this rank's in). */
static int rounds(TrainState *s, int gather, const char *what) {
    Shard *h = s->shard;
    LlamaModel *m = &s->model;
    LlamaTensors *t = gather ? &m->w : &m->dw;
    const size_t cap = s->comm_bucket_n / (size_t)h->world;
    Piece *pc = malloc(((size_t)m->n_params + 1) * sizeof *pc);
    if (!pc) { snprintf(s->kb->err, sizeof s->kb->err, "out of host memory (%s)", what); return -1; }
    int i = 0, rc = 0;
    size_t a = 0;
    while (rc == 0) {
        size_t used = 0;
        int np = 0;
        while (i < m->n_params && used < cap) {   /* the round: rank 0's positions (the longest slices) */
            size_t lo0, len0;
            llama_slice(m->params[i].numel, h->world, 0, &lo0, &len0);
            /* (a sharded master's bf16 copy is gathered by gather_copies instead) */
            if (!m->params[i].trainable || (gather && llama_master_sharded(m, &m->params[i])) || a >= len0) { i++; a = 0; continue; }
            const size_t k = cap - used < len0 - a ? cap - used : len0 - a;
            pc[np++] = (Piece){ i, a, k, used };
            used += k; a += k;
        }
        if (used == 0) break;
        for (int r = 0; r < h->world && rc == 0; r++) {
            if (gather && r != h->rank) continue;
            for (int q = 0; q < np && rc == 0; q++) rc = move(s, t, &pc[q], r, used, 1);
        }
        if (rc == 0) rc = collective(s, gather, used, what);
        for (int r = 0; r < h->world && rc == 0; r++) {
            if (gather ? r == h->rank : r != h->rank) continue;
            for (int q = 0; q < np && rc == 0; q++) rc = move(s, t, &pc[q], r, used, 0);
        }
    }
    free(pc);
    return rc;
}

int shard_reduce_scatter_grads(TrainState *s) {
    if (!s->shard || !s->comm_bucket || !kbackend_computes(s->kb)) return 0;
    DPMEM_SCOPE("reduce_scatter");
    return rounds(s, 0, "the gradient reduce-scatter");
}

/* ---- the sharded fp32 masters (--zero under bf16: llama.h's llama_master_sharded) ---------------------- */

/* The bf16 copies of the sharded masters, every rank's slices to every rank, in rounds through the
   bucket read as 16-bit elements (twice a round's floats): each rank rounded its own slices in the
   optimizer step; half an fp32 gather's bytes. */
static int gather_copies(TrainState *s) {
    Shard *h = s->shard;
    LlamaModel *m = &s->model;
    const size_t cap = 2 * (s->comm_bucket_n / (size_t)h->world);   /* bf16 elements a rank, a round */
    const char *what = "the bf16 copies' all-gather";
    int i = 0, rc = 0;
    size_t a = 0;
    while (rc == 0) {
        Piece pc[64];   /* a round's pieces (a full round goes on in the next) */
        size_t used = 0;
        int np = 0;
        while (i < m->n_params && used < cap && np < 64) {
            const ParamInfo *p = &m->params[i];
            size_t lo0, len0;
            llama_slice(p->numel, h->world, 0, &lo0, &len0);
            if (!llama_master_sharded(m, p) || a >= len0) { i++; a = 0; continue; }
            const size_t k = cap - used < len0 - a ? cap - used : len0 - a;
            pc[np++] = (Piece){ i, a, k, used };
            used += k; a += k;
        }
        if (used == 0) break;
        for (int pass = 0; pass < 2 && rc == 0; pass++)   /* 0: this rank's parts in; 1: the others' out */
            for (int r = 0; r < h->world && rc == 0; r++) {
                if ((pass == 0) != (r == h->rank)) continue;
                for (int q = 0; q < np && rc == 0; q++) {
                    const ParamInfo *p = &m->params[pc[q].i];
                    size_t lo, len;
                    llama_slice(p->numel, h->world, r, &lo, &len);
                    if (pc[q].a >= len) continue;
                    const size_t k = len - pc[q].a < pc[q].k ? len - pc[q].a : pc[q].k;
                    float *x = kact_at(*llama_tensor(&m->w16, p), lo + pc[q].a, KDT_BF16);
                    float *b = kact_at(s->comm_bucket, (size_t)r * used + pc[q].at, KDT_BF16);
                    rc = copy_ex(s->kb, KDT_BF16, pass ? x : b, pass ? b : x, k);
                }
                if (pass == 0 && rc == 0) rc = train_collective(s, COMM_ALLGATHER_BF16, s->comm_bucket, used, what, NULL);
            }
    }
    return rc;
}

int shard_allgather_params(TrainState *s) {
    if (!s->shard || !s->comm_bucket || !kbackend_computes(s->kb)) return 0;
    DPMEM_SCOPE("all_gather");
    int rc = rounds(s, 1, "the parameter all-gather");
    /* (--zero 3 keeps no whole bf16 copy: each unit's gather rounds the fp32 slices afresh) */
    return rc || llama_params_sharded(&s->model) ? rc : gather_copies(s);
}

/* ---- --zero 3: a unit's sharded weights gathered whole for one use ------------------------------------- */

/* Tensor i's slices into dst (numel elements of the GEMMs' type: fp32, or bf16 rounded from each rank's
   fp32 slice by its owner, RNE as the forward's cast), through the bucket in rounds of rank 0's positions. */
static int gather_whole(TrainState *s, int i, float *dst, KDtype dt) {
    Shard *h = s->shard;
    LlamaModel *m = &s->model;
    const ParamInfo *p = &m->params[i];
    const float *mine = *llama_tensor(&m->wsh, p);
    float *const bucket = h->gb;
    const size_t cap = (dt == KDT_BF16 ? 2 : 1) * (h->gb_n / (size_t)h->world);   /* elements a rank, a round */
    size_t lo0, len0, lo, len;
    llama_slice(p->numel, h->world, 0, &lo0, &len0);
    llama_slice(p->numel, h->world, h->rank, &lo, &len);
    for (size_t a = 0; a < len0; a += cap) {
        const size_t k = len0 - a < cap ? len0 - a : cap;
        float *b = kact_at(bucket, (size_t)h->rank * k, dt);
        const size_t n = a < len ? (len - a < k ? len - a : k) : 0;
        if (n && (dt == KDT_BF16 ? narrow_buffer(s->kb, b, mine + a, n) : copy_buffer(s->kb, b, mine + a, n))) return -1;
        if (train_collective(s, dt == KDT_BF16 ? COMM_ALLGATHER_BF16 : COMM_ALLGATHER, bucket, k, "the unit's weight gather", NULL))
            return -1;
        for (int r = 0; r < h->world; r++) {
            size_t lr, nr;
            llama_slice(p->numel, h->world, r, &lr, &nr);
            if (a < nr && copy_ex(s->kb, dt, kact_at(dst, lr + a, dt), kact_at(bucket, (size_t)r * k, dt), nr - a < k ? nr - a : k))
                return -1;
        }
    }
    return 0;
}

/* How a gathered weight is read: a GEMM weight in the GEMMs' type (its bf16 copy under bf16), the embedding's
   lookup table in fp32 (the lookup reads the master); and the slot it fills. */
static KDtype gathered_dt(const LlamaModel *m, const ParamInfo *p) { return p->kind == HOOK_LINEAR ? m->dt : KDT_F32; }
static float **gathered_slot(LlamaModel *m, const ParamInfo *p) {
    return llama_tensor(gathered_dt(m, p) == KDT_BF16 ? &m->w16 : &m->w, p);
}

int shard_gather_unit(void *user, int u) {
    TrainState *s = user;
    LlamaModel *m = &s->model;
    DPMEM_SCOPE("all_gather");
    const uint64_t t0 = dpmem_now_ns();
    int rc = 0;
    for (int i = 0; i < m->n_params && rc == 0; i++) {
        const ParamInfo *p = &m->params[i];
        if (!llama_master_sharded(m, p) || llama_grad_unit(m, i) != u) continue;
        char tag[160];
        snprintf(tag, sizeof tag, "comm/gathered/%s", p->name);
        float *x = kbuf_alloc(s->kb, p->numel * KDT_SIZE(gathered_dt(m, p)), tag);
        if (!x) { rc = -1; break; }
        *gathered_slot(m, p) = x;
        if (kbackend_computes(s->kb)) rc = gather_whole(s, i, x, gathered_dt(m, p));
    }
    train_phase_add(s, TRAIN_PH_ALLREDUCE, t0);
    return rc;
}

int shard_release_unit(void *user, int u) {
    TrainState *s = user;
    LlamaModel *m = &s->model;
    for (int i = m->n_params - 1; i >= 0; i--) {
        const ParamInfo *p = &m->params[i];
        if (!llama_master_sharded(m, p) || llama_grad_unit(m, i) != u) continue;
        kbuf_free(s->kb, *gathered_slot(m, p));
        *gathered_slot(m, p) = NULL;
    }
    return 0;
}

int shard_masters(const TrainState *s) {
    for (int i = 0; s->shard && i < s->model.n_params; i++)
        if (llama_master_sharded(&s->model, &s->model.params[i])) return 1;
    return 0;
}

int shard_gather_master(TrainState *s, int i, float *host) {
    if (!kbackend_computes(s->kb)) return 0;
    DPMEM_SCOPE("all_gather");
    Shard *h = s->shard;
    LlamaModel *m = &s->model;
    const ParamInfo *p = &m->params[i];
    const float *mine = *llama_tensor(&m->wsh, p);
    const size_t cap = s->comm_bucket_n / (size_t)h->world;
    size_t lo0, len0, lo, len;
    llama_slice(p->numel, h->world, 0, &lo0, &len0);
    llama_slice(p->numel, h->world, h->rank, &lo, &len);
    for (size_t a = 0; a < len0; a += cap) {   /* rounds of rank 0's positions [a, a + k) */
        const size_t k = len0 - a < cap ? len0 - a : cap;
        if (a < len && copy_buffer(s->kb, s->comm_bucket + (size_t)h->rank * k, mine + a, len - a < k ? len - a : k)) return -1;
        if (collective(s, 1, k, "the master's gather")) return -1;
        for (int r = 0; host && r < h->world; r++) {
            size_t lr, nr;
            llama_slice(p->numel, h->world, r, &lr, &nr);
            if (a < nr && kbuf_download(s->kb, host + lr + a, s->comm_bucket + (size_t)r * k, (nr - a < k ? nr - a : k) * sizeof(float)))
                return -1;
        }
    }
    return 0;
}

static int gather_for_save(void *user, int i, float *host) { return shard_gather_master(user, i, host); }

int shard_save(TrainState *s, const char *dir, SafeTensorsDtype dtype, const char *base, char *err, size_t errlen) {
    const CkptGather g = { gather_for_save, s, g_comm.rank == 0 };
    return ckpt_save_gathered(&s->model, dir, dtype, base, &g, err, errlen);
}

