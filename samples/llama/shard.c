/* shard.c — the sharded training state of --zero 1|2 (see shard.h): the slices, their AdamW state,
   and the two collectives, reduce-scatter of the gradients and all-gather of the parameters, in
   rounds through the bucket comm/shard_bucket. Not here: the transport (comm.c, comm_nccl.c), the
   update itself (train.c's optimizer step, on the ranges train_grad_range gives). */
#include "shard.h"
#include "train.h"
#include "comm.h"
#include "dpmem.h"

#include <stdio.h>
#include <stdlib.h>

/* One piece of a round: positions [a, a + k) of tensor i's slices (of every rank; a shorter slice
   contributes what it has), at offset `at` of each rank's part of the bucket. */
typedef struct { int i; size_t a, k, at; } Piece;

void shard_slice(size_t n, int world, int rank, size_t *lo, size_t *len) {
    const size_t w = world > 0 ? (size_t)world : 1, r = (size_t)rank, q = n / w, rem = n % w;
    *lo = r * q + (r < rem ? r : rem);
    *len = q + (r < rem ? 1 : 0);
}

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
        shard_slice(p->numel, h->world, 0, &lo0, &len0);
        longest += len0;
        shard_slice(p->numel, h->world, h->rank, &h->lo[i], &h->len[i]);
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
    return (s->comm_bucket = kbuf_alloc(s->kb, s->comm_bucket_n * sizeof(float), "comm/shard_bucket")) ? 0 : -1;
}

void shard_free(TrainState *s) {
    Shard *h = s->shard;
    if (!h) return;
    for (int i = h->n - 1; i >= 0; i--) {
        kbuf_free(s->kb, h->v[i]);
        kbuf_free(s->kb, h->m[i]);
    }
    free(h->lo); free(h->len); free(h->m); free(h->v);
    free(h);
    s->shard = NULL;
}

static int collective(TrainState *s, int gather, size_t count, const char *what) {
    if (s->kb->space == 0)
        return gather ? comm_allgather_float(&g_comm, s->comm_bucket, count, what)
                      : comm_reduce_scatter_float(&g_comm, s->comm_bucket, count, what);
    int (*dev)(Comm *, float *, size_t, const char *) = gather ? comm_device_allgather : comm_device_reduce_scatter;
    if (!dev) {
        snprintf(s->kb->err, sizeof s->kb->err, "%s: this program has no NCCL for device buffers (build with the CUDA "
                 "toolkit's NCCL)", what);
        return -1;
    }
    return dev(&g_comm, s->comm_bucket, count, what);
}

/* Rank r's part of piece q into (pack) or out of the bucket, between it and tensor set t. */
static int move(TrainState *s, LlamaTensors *t, const Piece *q, int r, size_t stride, int pack) {
    const ParamInfo *p = &s->model.params[q->i];
    size_t lo, len;
    shard_slice(p->numel, s->shard->world, r, &lo, &len);
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
            shard_slice(m->params[i].numel, h->world, 0, &lo0, &len0);
            if (!m->params[i].trainable || a >= len0) { i++; a = 0; continue; }
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

int shard_allgather_params(TrainState *s) {
    if (!s->shard || !s->comm_bucket || !kbackend_computes(s->kb)) return 0;
    DPMEM_SCOPE("all_gather");
    return rounds(s, 1, "the parameter all-gather");
}
