/* shard.c — the sharded training state of --zero 1|2|3 (see shard.h): the slices, their AdamW state,
   and the collectives: reduce-scatter of the gradients and all-gather of the parameters, in rounds
   through the bucket comm/shard_bucket; --zero 3's gathers of a unit's weights straight into
   comm/gathered/<name>, the next unit's prefetched. Not here: the transport (comm.c, comm_nccl.c), the
   update itself (train.c's optimizer step, on the ranges train_grad_range gives). */
#include "shard.h"
#include "train.h"
#include "checkpoint.h"
#include "comm.h"
#include "dpmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One piece of a round: positions [a, a + k) of tensor i's slices (of every rank; a shorter slice
   contributes what it has), at offset `at` of each rank's part of the bucket. */
typedef struct { int i; size_t a, k, at; } Piece;

void train_grad_range(const TrainState *s, int i, size_t *lo, size_t *n) {
    if (s->shard) { *lo = s->shard->lo[i]; *n = s->shard->len[i]; return; }
    *lo = 0;
    *n = s->model.params[i].numel;
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
    size_t per_rank = train_comm_bucket_floats() / (size_t)h->world;
    if (per_rank < 1) per_rank = 1;
    if (per_rank > (size_t)1 << 30) per_rank = (size_t)1 << 30;   /* MPI counts are int */
    if (longest) {   /* (nothing trainable in the model, LoRA: no gradient to reduce, no slice to update) */
        s->comm_bucket_n = (per_rank < longest ? per_rank : longest) * (size_t)h->world;
        if (!(s->comm_bucket = kbuf_alloc(s->kb, s->comm_bucket_n * sizeof(float), "comm/shard_bucket"))) return -1;
    }
    if (!llama_params_sharded(m)) return 0;
    /* --zero 3: each tensor's gather in flight, the slices of the one being started */
    h->prefetch = train_zero3_prefetch();
    h->pf_unit = -1;
    h->req = calloc((size_t)m->n_params, sizeof *h->req);
    h->vlo = calloc((size_t)h->world, sizeof *h->vlo);
    h->vlen = calloc((size_t)h->world, sizeof *h->vlen);
    if (!h->req || !h->vlo || !h->vlen) { snprintf(s->kb->err, sizeof s->kb->err, "out of host memory (the gathers)"); return -1; }
    return 0;
}

static void settle_gathers(TrainState *s);

void shard_free(TrainState *s) {
    Shard *h = s->shard;
    if (!h) return;
    settle_gathers(s);
    for (int i = h->n - 1; i >= 0; i--) {
        kbuf_free(s->kb, h->v[i]);
        kbuf_free(s->kb, h->m[i]);
    }
    free(h->lo); free(h->len); free(h->m); free(h->v);
    free(h->req); free(h->vlo); free(h->vlen);
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

/* How a gathered weight is read: a GEMM weight in the GEMMs' type (its bf16 copy under bf16), the embedding's
   lookup table in fp32 (the lookup reads the master); and the slot it fills. */
static KDtype gathered_dt(const LlamaModel *m, const ParamInfo *p) { return p->kind == HOOK_LINEAR ? m->dt : KDT_F32; }
static float **gathered_slot(LlamaModel *m, const ParamInfo *p) {
    return llama_tensor(gathered_dt(m, p) == KDT_BF16 ? &m->w16 : &m->w, p);
}
static int in_unit(const LlamaModel *m, int i, int u) {
    return llama_held_sliced(m, &m->params[i]) && llama_grad_unit(m, i) == u;   /* (LoRA: its frozen base's) */
}

/* Tensor i's gather into x (numel elements of type dt) started: this rank's slice put in place (bf16 from an
   fp32 slice: rounded, RNE as the forward's cast; a frozen base kept in bf16 alone: its bf16 slice as it is),
   every rank's slice to every rank non-blocking (train.h: train_allgatherv_start, MPI or NCCL) into *req. */
static int tensor_gather_start(TrainState *s, int i, float *x, KDtype dt, CommRequest *req) {
    Shard *h = s->shard;
    LlamaModel *m = &s->model;
    const ParamInfo *p = &m->params[i];
    const char *what = "the unit's weight gather";
    for (int r = 0; r < h->world; r++) llama_slice(p->numel, h->world, r, &h->vlo[r], &h->vlen[r]);
    const size_t lo = h->vlo[h->rank], n = h->vlen[h->rank];
    const float *mine = *llama_tensor(&m->wsh, p);
    if (n && (llama_slice_dt(m, p) == dt ? copy_ex(s->kb, dt, kact_at(x, lo, dt), mine, n) : narrow_buffer(s->kb, kact_at(x, lo, dt), mine, n)))
        return -1;
    return train_allgatherv_start(s, x, h->vlo, h->vlen, KDT_SIZE(dt), what, req);
}

/* Unit u's gathers started, straight into their destinations: each sharded tensor's comm/gathered/<name>
   allocated and its gather started (tensor_gather_start). */
static int gather_start(TrainState *s, int u) {
    Shard *h = s->shard;
    LlamaModel *m = &s->model;
    for (int i = 0; i < m->n_params; i++) {
        if (!in_unit(m, i, u)) continue;
        const ParamInfo *p = &m->params[i];
        const KDtype dt = gathered_dt(m, p);
        char tag[160];
        snprintf(tag, sizeof tag, "comm/gathered/%s", p->name);
        float *x = kbuf_alloc(s->kb, p->numel * KDT_SIZE(dt), tag);
        if (!x) return -1;
        *gathered_slot(m, p) = x;
        if (kbackend_computes(s->kb) && tensor_gather_start(s, i, x, dt, &h->req[i])) return -1;
    }
    h->pf_unit = u;
    return 0;
}

/* A run that failed with --zero 3 gathers in flight (a prefetch): each waited for (within DPMEM_COMM_TIMEOUT: the
   other ranks run the same gathers) before llama_free frees its destination; one that cannot complete (a peer
   gone, the timeout) leaves its destination allocated, as MPI or NCCL may still write there: the job ends. */
static void settle_gathers(TrainState *s) {
    Shard *h = s->shard;
    LlamaModel *m = &s->model;
    for (int i = 0; h->req && i < m->n_params; i++) {
        if (!comm_request_pending(&h->req[i])) continue;
        (void)comm_request_wait(&g_comm, &h->req[i]);
        if (comm_request_pending(&h->req[i])) *gathered_slot(m, &m->params[i]) = NULL;
    }
}

/* Unit u's gathers (started by gather_start) complete. */
static int gather_wait(TrainState *s, int u) {
    Shard *h = s->shard;
    LlamaModel *m = &s->model;
    h->pf_unit = -1;
    for (int i = 0; i < m->n_params && kbackend_computes(s->kb); i++)
        if (in_unit(m, i, u) && comm_request_wait(&g_comm, &h->req[i]))
            return -1;
    return 0;
}

int shard_gather_unit(void *user, int u) {
    TrainState *s = user;
    Shard *h = s->shard;
    DPMEM_SCOPE("all_gather");
    const uint64_t t0 = dpmem_now_ns();
    int rc = 0;
    if (h->pf_unit >= 0 && h->pf_unit != u) {   /* llama.c's order and its prefetches disagree: a bug */
        snprintf(s->kb->err, sizeof s->kb->err, "--zero 3: unit %d's weights were prefetched, unit %d's are wanted", h->pf_unit, u);
        rc = -1;
    }
    if (rc == 0 && h->pf_unit != u) rc = gather_start(s, u);   /* not prefetched: the first unit of a pass, or prefetch off */
    if (rc == 0) rc = gather_wait(s, u);
    train_phase_add(s, TRAIN_PH_ALLREDUCE, t0);
    return rc;
}

int shard_prefetch_unit(void *user, int u) {
    TrainState *s = user;
    Shard *h = s->shard;
    if (!h->prefetch) return 0;
    if (h->pf_unit >= 0) {
        snprintf(s->kb->err, sizeof s->kb->err, "--zero 3: unit %d's prefetch asked while unit %d's is in flight", u, h->pf_unit);
        return -1;
    }
    DPMEM_SCOPE("all_gather");
    const uint64_t t0 = dpmem_now_ns();
    const int rc = gather_start(s, u);
    train_phase_add(s, TRAIN_PH_ALLREDUCE, t0);
    return rc;
}

int shard_release_unit(void *user, int u) {
    TrainState *s = user;
    LlamaModel *m = &s->model;
    for (int i = m->n_params - 1; i >= 0; i--) {
        if (!in_unit(m, i, u)) continue;
        kbuf_free(s->kb, *gathered_slot(m, &m->params[i]));
        *gathered_slot(m, &m->params[i]) = NULL;
    }
    return 0;
}

int shard_masters(const TrainState *s) {
    for (int i = 0; s->shard && i < s->model.n_params; i++)
        if (llama_held_sliced(&s->model, &s->model.params[i])) return 1;
    return 0;
}

float *shard_gather_tensor(TrainState *s, int i) {
    const ParamInfo *p = &s->model.params[i];
    const KDtype dt = llama_slice_dt(&s->model, p);
    char tag[160];
    snprintf(tag, sizeof tag, "comm/gathered/%s", p->name);
    DPMEM_SCOPE("all_gather");
    float *x = kbuf_alloc(s->kb, p->numel * KDT_SIZE(dt), tag);
    CommRequest req;
    memset(&req, 0, sizeof req);
    if (x && kbackend_computes(s->kb) && (tensor_gather_start(s, i, x, dt, &req) || comm_request_wait(&g_comm, &req))) {
        if (!comm_request_pending(&req)) kbuf_free(s->kb, x);   /* (one that cannot complete: MPI or NCCL may still write there) */
        return NULL;
    }
    return x;
}

int shard_gather_master(TrainState *s, int i, float *host) {
    if (llama_base_sharded(&s->model, &s->model.params[i])) {   /* its values in its slice type (bf16: 2 bytes each; plan: the buffer) */
        const ParamInfo *p = &s->model.params[i];
        float *x = shard_gather_tensor(s, i);
        const int rc = !x || (host && kbuf_download(s->kb, host, x, p->numel * KDT_SIZE(llama_slice_dt(&s->model, p))));
        kbuf_free(s->kb, x);
        return rc ? -1 : 0;
    }
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

static int gather_for_save(void *user, int i, float *host) {
    TrainState *s = user;
    LlamaModel *m = &s->model;
    const ParamInfo *p = &m->params[i];
    if (!llama_base_sharded(m, p) || llama_slice_dt(m, p) != KDT_BF16) return shard_gather_master(s, i, host);
    /* a base kept in bf16 alone: as checkpoint.c's ckpt_save, widened into fp32 with its unmerged adapter merged there
       (plan: the two buffers) */
    float *x = shard_gather_tensor(s, i), *wide = x ? kbuf_alloc(s->kb, p->numel * sizeof(float), "workspace/checkpoint.fp32") : NULL;
    LoraAdapter *l = m->lora ? m->lora[i] : NULL;
    const int rc = !wide || (kbackend_computes(s->kb) && (widen_buffer(s->kb, wide, x, p->numel) || (l && lora_merge(l, s->kb, wide, 1.0f)) ||
                                                          (host && kbuf_download(s->kb, host, wide, p->numel * sizeof(float)))));
    kbuf_free(s->kb, wide);
    kbuf_free(s->kb, x);
    return rc ? -1 : 0;
}

int shard_save(TrainState *s, const char *dir, SafeTensorsDtype dtype, const char *base, char *err, size_t errlen) {
    const CkptGather g = { gather_for_save, s, g_comm.rank == 0 };
    return ckpt_save_gathered(&s->model, dir, dtype, base, &g, err, errlen);
}

