/* shard.c — the sharded training state of --zero 1|2|3 (see shard.h): the slices, their AdamW state,
   and the collectives: reduce-scatter of the gradients and all-gather of the parameters, in rounds
   through the bucket comm/shard_bucket (dist.h's dist_rounds); --zero 3's gathers of a unit's weights
   straight into comm/gathered/<name>, the next unit's prefetched; the gathered model for --save and the
   params hash. Not here: the transport (comm.c, comm_nccl.c), the bucket rounds (dist.c), the update
   itself (train.c's optimizer step, on the parts shard_view gives). */
#include "shard.h"
#include "checkpoint.h"
#include "dpmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ShardView shard_view(const Dist *d, int i) {
    const Shard *h = d->shard;
    LlamaModel *m = d->model;
    const ParamInfo *p = &m->params[i];
    ShardView v = { 0, p->numel, NULL, NULL, NULL };
    if (h) { v.lo = h->lo[i]; v.n = h->len[i]; v.m = h->m[i]; v.v = h->v[i]; }
    else { v.m = *llama_tensor(&m->m, p); v.v = *llama_tensor(&m->v, p); }
    if (h && h->g) v.g = h->g[i];
    else if (*llama_tensor(&m->dw, p)) v.g = *llama_tensor(&m->dw, p) + v.lo;
    return v;
}

static float *alloc_named(KBackend *kb, size_t floats, const char *name, const char *suffix) {
    char tag[160];
    snprintf(tag, sizeof tag, "optimizer/%s%s", name, suffix);
    return kbuf_alloc(kb, (floats ? floats : 1) * sizeof(float), tag);
}

int shard_init(Dist *d, int adam) {
    if (d->zero <= 0) return 0;
    LlamaModel *m = d->model;
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
        snprintf(d->kb->err, sizeof d->kb->err, "out of host memory (the shards)");
        return -1;
    }
    h->stage = d->zero; h->world = g_comm.world; h->rank = g_comm.rank; h->n = m->n_params;
    d->shard = h;
    size_t longest = 0;   /* rank 0's floats over all tensors: a bucket holding them all needs one round */
    for (int i = 0; i < m->n_params; i++) {
        const ParamInfo *p = &m->params[i];
        if (!p->trainable) continue;
        longest += dist_slice0(p->numel, h->world);
        llama_slice(p->numel, h->world, h->rank, &h->lo[i], &h->len[i]);
        if (!adam || h->len[i] == 0) continue;
        if (!(h->m[i] = alloc_named(d->kb, h->len[i], p->name, ".exp_avg")) ||
            !(h->v[i] = alloc_named(d->kb, h->len[i], p->name, ".exp_avg_sq")))
            return -1;
        if (fill_buffer(d->kb, h->m[i], 0.0f, h->len[i]) || fill_buffer(d->kb, h->v[i], 0.0f, h->len[i])) return -1;
    }
    size_t per_rank = d->set.bucket_floats / (size_t)h->world;
    if (per_rank < 1) per_rank = 1;
    if (per_rank > (size_t)1 << 30) per_rank = (size_t)1 << 30;   /* MPI counts are int */
    if (longest) {   /* (nothing trainable in the model, LoRA: no gradient to reduce, no slice to update) */
        if (dist_bucket_alloc(d, (per_rank < longest ? per_rank : longest) * (size_t)h->world, "comm/shard_bucket")) return -1;
    }
    if (!llama_params_sharded(m)) return 0;
    /* --zero 3: each tensor's gather in flight, the slices of the one being started */
    h->prefetch = d->set.zero3_prefetch;
    h->pf_unit = -1;
    h->req = calloc((size_t)m->n_params, sizeof *h->req);
    h->vlo = calloc((size_t)h->world, sizeof *h->vlo);
    h->vlen = calloc((size_t)h->world, sizeof *h->vlen);
    if (!h->req || !h->vlo || !h->vlen) { snprintf(d->kb->err, sizeof d->kb->err, "out of host memory (the gathers)"); return -1; }
    return 0;
}

static void settle_gathers(Dist *d);

void shard_free(Dist *d) {
    Shard *h = d->shard;
    if (!h) return;
    settle_gathers(d);
    for (int i = h->n - 1; i >= 0; i--) {
        kbuf_free(d->kb, h->v[i]);
        kbuf_free(d->kb, h->m[i]);
    }
    free(h->lo); free(h->len); free(h->m); free(h->v);
    free(h->req); free(h->vlo); free(h->vlen);
    free(h);
    d->shard = NULL;
}

/* The trainable tensors' slices as items of bucket rounds (dist.h), in the model's tensor set t. */
typedef struct { Dist *d; LlamaTensors *t; int gather; } Slices;
static size_t slices_item(void *user, int i) {
    const Slices *x = user;
    const ParamInfo *p = &x->d->model->params[i];
    /* (a sharded master's bf16 copy is gathered by gather_copies instead) */
    return !p->trainable || (x->gather && llama_master_sharded(x->d->model, p)) ? 0 : p->numel;
}
static void *slices_at(void *user, int i, int r, size_t lo) {
    const Slices *x = user;
    (void)r;
    return *llama_tensor(x->t, &x->d->model->params[i]) + lo;
}
static size_t copies_item(void *user, int i) {
    const Slices *x = user;
    const ParamInfo *p = &x->d->model->params[i];
    return llama_master_sharded(x->d->model, p) ? p->numel : 0;
}
static void *copies_at(void *user, int i, int r, size_t lo) {
    const Slices *x = user;
    (void)r;
    return kact_at(*llama_tensor(&x->d->model->w16, &x->d->model->params[i]), lo, KDT_BF16);
}

/* Every trainable tensor's slices through the bucket in rounds: gather (params: this rank's slices
   out, every other rank's in) or reduce-scatter (grads: every rank's slice out, this rank's in). */
static int rounds(Dist *d, int gather, const char *what) {
    LlamaModel *m = d->model;
    Slices x = { d, gather ? &m->w : &m->dw, gather };
    const DistSide side = { slices_at, &x, DIST_COPY };
    const DistRounds sp = { gather ? COMM_ALLGATHER : COMM_REDUCE_SCATTER, what, KDT_F32, d->shard->world,
                            d->bucket_n / (size_t)d->shard->world, m->n_params + 1, m->n_params, slices_item, &x,
                            gather ? DIST_OWN : DIST_ALL, gather ? DIST_OTHERS : DIST_OWN, side, side };
    return dist_rounds(d, &sp);
}

int shard_reduce_scatter_grads(Dist *d) {
    if (!d->shard || !d->bucket || !kbackend_computes(d->kb)) return 0;
    DPMEM_SCOPE("reduce_scatter");
    return rounds(d, 0, "the gradient reduce-scatter");
}

/* ---- the sharded fp32 masters (--zero under bf16: llama.h's llama_master_sharded) ---------------------- */

/* The bf16 copies of the sharded masters, every rank's slices to every rank, in rounds through the
   bucket read as 16-bit elements (twice a round's floats; at most 64 pieces a round): each rank rounded its
   own slices in the optimizer step; half an fp32 gather's bytes. */
static int gather_copies(Dist *d) {
    Slices x = { d, NULL, 1 };
    const DistSide side = { copies_at, &x, DIST_COPY };
    const DistRounds sp = { COMM_ALLGATHER_BF16, "the bf16 copies' all-gather", KDT_BF16, d->shard->world,
                            2 * (d->bucket_n / (size_t)d->shard->world), 64, d->model->n_params, copies_item, &x,
                            DIST_OWN, DIST_OTHERS, side, side };
    return dist_rounds(d, &sp);
}

int shard_allgather_params(Dist *d) {
    if (!d->shard || !d->bucket || !kbackend_computes(d->kb)) return 0;
    DPMEM_SCOPE("all_gather");
    int rc = rounds(d, 1, "the parameter all-gather");
    /* (--zero 3 keeps no whole bf16 copy: each unit's gather rounds the fp32 slices afresh) */
    return rc || llama_params_sharded(d->model) ? rc : gather_copies(d);
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
   every rank's slice to every rank non-blocking (dist.h: dist_allgatherv_start, MPI or NCCL) into *req. */
static int tensor_gather_start(Dist *d, int i, float *x, KDtype dt, CommRequest *req) {
    Shard *h = d->shard;
    LlamaModel *m = d->model;
    const ParamInfo *p = &m->params[i];
    const char *what = "the unit's weight gather";
    for (int r = 0; r < h->world; r++) llama_slice(p->numel, h->world, r, &h->vlo[r], &h->vlen[r]);
    const size_t lo = h->vlo[h->rank], n = h->vlen[h->rank];
    const float *mine = *llama_tensor(&m->wsh, p);
    if (n && (llama_slice_dt(m, p) == dt ? copy_ex(d->kb, dt, kact_at(x, lo, dt), mine, n) : narrow_buffer(d->kb, kact_at(x, lo, dt), mine, n)))
        return -1;
    return dist_allgatherv_start(d, x, h->vlo, h->vlen, KDT_SIZE(dt), what, req);
}

/* Unit u's gathers started, straight into their destinations: each sharded tensor's comm/gathered/<name>
   allocated and its gather started (tensor_gather_start). */
static int gather_start(Dist *d, int u) {
    Shard *h = d->shard;
    LlamaModel *m = d->model;
    for (int i = 0; i < m->n_params; i++) {
        if (!in_unit(m, i, u)) continue;
        const ParamInfo *p = &m->params[i];
        const KDtype dt = gathered_dt(m, p);
        char tag[160];
        snprintf(tag, sizeof tag, "comm/gathered/%s", p->name);
        float *x = kbuf_alloc(d->kb, p->numel * KDT_SIZE(dt), tag);
        if (!x) return -1;
        *gathered_slot(m, p) = x;
        if (kbackend_computes(d->kb) && tensor_gather_start(d, i, x, dt, &h->req[i])) return -1;
    }
    h->pf_unit = u;
    return 0;
}

/* A run that failed with --zero 3 gathers in flight (a prefetch): each waited for (within DPMEM_COMM_TIMEOUT: the
   other ranks run the same gathers) before llama_free frees its destination; one that cannot complete (a peer
   gone, the timeout) leaves its destination allocated, as MPI or NCCL may still write there: the job ends. */
static void settle_gathers(Dist *d) {
    Shard *h = d->shard;
    LlamaModel *m = d->model;
    for (int i = 0; h->req && i < m->n_params; i++) {
        if (!comm_request_pending(&h->req[i])) continue;
        (void)comm_request_wait(&g_comm, &h->req[i]);
        if (comm_request_pending(&h->req[i])) *gathered_slot(m, &m->params[i]) = NULL;
    }
}

/* Unit u's gathers (started by gather_start) complete. */
static int gather_wait(Dist *d, int u) {
    Shard *h = d->shard;
    LlamaModel *m = d->model;
    h->pf_unit = -1;
    for (int i = 0; i < m->n_params && kbackend_computes(d->kb); i++)
        if (in_unit(m, i, u) && comm_request_wait(&g_comm, &h->req[i]))
            return -1;
    return 0;
}

int shard_gather_unit(void *user, int u) {
    Dist *d = user;
    Shard *h = d->shard;
    DPMEM_SCOPE("all_gather");
    const uint64_t t0 = dpmem_now_ns();
    int rc = 0;
    if (h->pf_unit >= 0 && h->pf_unit != u) {   /* llama.c's order and its prefetches disagree: a bug */
        snprintf(d->kb->err, sizeof d->kb->err, "--zero 3: unit %d's weights were prefetched, unit %d's are wanted", h->pf_unit, u);
        rc = -1;
    }
    if (rc == 0 && h->pf_unit != u) rc = gather_start(d, u);   /* not prefetched: the first unit of a pass, or prefetch off */
    if (rc == 0) rc = gather_wait(d, u);
    dist_time(d, t0);
    return rc;
}

int shard_prefetch_unit(void *user, int u) {
    Dist *d = user;
    Shard *h = d->shard;
    if (!h->prefetch) return 0;
    if (h->pf_unit >= 0) {
        snprintf(d->kb->err, sizeof d->kb->err, "--zero 3: unit %d's prefetch asked while unit %d's is in flight", u, h->pf_unit);
        return -1;
    }
    DPMEM_SCOPE("all_gather");
    const uint64_t t0 = dpmem_now_ns();
    const int rc = gather_start(d, u);
    dist_time(d, t0);
    return rc;
}

int shard_release_unit(void *user, int u) {
    Dist *d = user;
    LlamaModel *m = d->model;
    for (int i = m->n_params - 1; i >= 0; i--) {
        if (!in_unit(m, i, u)) continue;
        kbuf_free(d->kb, *gathered_slot(m, &m->params[i]));
        *gathered_slot(m, &m->params[i]) = NULL;
    }
    return 0;
}

int shard_masters(const Dist *d) {
    for (int i = 0; d->shard && i < d->model->n_params; i++)
        if (llama_held_sliced(d->model, &d->model->params[i])) return 1;
    return 0;
}

float *shard_gather_tensor(Dist *d, int i) {
    const ParamInfo *p = &d->model->params[i];
    const KDtype dt = llama_slice_dt(d->model, p);
    char tag[160];
    snprintf(tag, sizeof tag, "comm/gathered/%s", p->name);
    DPMEM_SCOPE("all_gather");
    float *x = kbuf_alloc(d->kb, p->numel * KDT_SIZE(dt), tag);
    CommRequest req;
    memset(&req, 0, sizeof req);
    if (x && kbackend_computes(d->kb) && (tensor_gather_start(d, i, x, dt, &req) || comm_request_wait(&g_comm, &req))) {
        if (!comm_request_pending(&req)) kbuf_free(d->kb, x);   /* (one that cannot complete: MPI or NCCL may still write there) */
        return NULL;
    }
    return x;
}

/* Tensor i's fp32 master as the one item of bucket rounds: this rank's slice in, every rank's out to host. */
typedef struct { Dist *d; int i; float *host; } Master;
static size_t master_item(void *user, int i) {
    const Master *x = user;
    return i == x->i ? x->d->model->params[i].numel : 0;
}
static void *master_mine(void *user, int i, int r, size_t lo) {
    const Master *x = user;
    (void)r; (void)lo;
    return *llama_tensor(&x->d->model->wsh, &x->d->model->params[i]);
}
static void *master_host(void *user, int i, int r, size_t lo) {
    (void)i; (void)r;
    return ((Master *)user)->host + lo;
}

int shard_gather_master(Dist *d, int i, float *host) {
    if (llama_base_sharded(d->model, &d->model->params[i])) {   /* its values in its slice type (bf16: 2 bytes each; plan: the buffer) */
        const ParamInfo *p = &d->model->params[i];
        float *x = shard_gather_tensor(d, i);
        const int rc = !x || (host && kbuf_download(d->kb, host, x, p->numel * KDT_SIZE(llama_slice_dt(d->model, p))));
        kbuf_free(d->kb, x);
        return rc ? -1 : 0;
    }
    if (!kbackend_computes(d->kb)) return 0;
    DPMEM_SCOPE("all_gather");
    Master x = { d, i, host };
    const DistRounds sp = { COMM_ALLGATHER, "the master's gather", KDT_F32, d->shard->world, d->bucket_n / (size_t)d->shard->world,
                            1, d->model->n_params, master_item, &x, DIST_OWN, DIST_ALL,
                            { master_mine, &x, DIST_COPY }, { host ? master_host : NULL, &x, DIST_DOWNLOAD } };
    return dist_rounds(d, &sp);
}

static int gather_for_save(void *user, int i, float *host) {
    Dist *d = user;
    LlamaModel *m = d->model;
    const ParamInfo *p = &m->params[i];
    if (!llama_base_sharded(m, p) || llama_slice_dt(m, p) != KDT_BF16) return shard_gather_master(d, i, host);
    /* a base kept in bf16 alone: as checkpoint.c's ckpt_save, widened into fp32 with its unmerged adapter merged there
       (plan: the two buffers) */
    float *x = shard_gather_tensor(d, i), *wide = x ? kbuf_alloc(d->kb, p->numel * sizeof(float), "workspace/checkpoint.fp32") : NULL;
    LoraAdapter *l = m->lora ? m->lora[i] : NULL;
    const int rc = !wide || (kbackend_computes(d->kb) && (widen_buffer(d->kb, wide, x, p->numel) || (l && lora_merge(l, d->kb, wide, 1.0f)) ||
                                                          (host && kbuf_download(d->kb, host, wide, p->numel * sizeof(float)))));
    kbuf_free(d->kb, wide);
    kbuf_free(d->kb, x);
    return rc ? -1 : 0;
}

int shard_save(Dist *d, const char *dir, SafeTensorsDtype dtype, const char *base, char *err, size_t errlen) {
    const CkptGather g = { gather_for_save, d, g_comm.rank == 0 };
    return ckpt_save_gathered(d->model, dir, dtype, base, &g, err, errlen);
}

int shard_check_ranks_agree(Dist *d, int quiet) {
    if (g_comm.world <= 1 || !g_comm.mpi || !kbackend_computes(d->kb)) return 0;
    DPMEM_SCOPE("allreduce");
    LlamaModel *m = d->model;
    uint64_t h = 1469598103934665603ull;                 /* FNV-1a over every parameter's bytes */
    float *host = NULL;
    size_t cap = 0;
    for (int i = 0; i < m->n_params; i++) {
        const size_t n = m->params[i].numel;
        if (n > cap) {
            float *p = realloc(host, n * sizeof *host);
            if (!p) { free(host); snprintf(d->kb->err, sizeof d->kb->err, "out of host memory (parameter check)"); return -1; }
            host = p; cap = n;
        }
        /* a tensor kept in bf16 alone (llama.h): its 2-byte values, and its unmerged adapter's A and B; a
           sharded master (--zero: shard.h), or any tensor held sliced (--zero 3, a frozen base's: in its own type),
           gathered whole, one tensor at a time: the unsharded run's hash */
        const int only = llama_bf16_only(m, &m->params[i]);
        const float *src = only ? *llama_tensor(&m->w16, &m->params[i]) : *llama_tensor(&m->w, &m->params[i]);
        const size_t bytes = n * (only ? 2 : sizeof *host);
        if (llama_held_sliced(m, &m->params[i]) ? shard_gather_master(d, i, host) : kbuf_download(d->kb, host, src, bytes)) {
            free(host);
            return -1;
        }
        const unsigned char *b = (const unsigned char *)host;
        for (size_t k = 0; k < bytes; k++) h = (h ^ b[k]) * 1099511628211ull;
        const LoraAdapter *l = m->lora ? m->lora[i] : NULL;
        const float *ab[2] = { l ? l->A : NULL, l ? l->B : NULL };
        const size_t nab[2] = { l ? (size_t)l->r * l->IC : 0, l ? (size_t)l->OC * l->r : 0 };
        for (int j = 0; j < 2; j++) {   /* r·IC, OC·r ≤ the base's numel: host holds them */
            if (!ab[j]) continue;
            if (kbuf_download(d->kb, host, ab[j], nab[j] * sizeof *host)) { free(host); return -1; }
            for (size_t k = 0; k < nab[j] * sizeof *host; k++) h = (h ^ b[k]) * 1099511628211ull;
        }
    }
    free(host);
    char hex[24];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    dpmem_meta("comm.params_hash", hex);
    if (comm_check_same(&g_comm, (long long)h, "the parameters after training (every rank must hold the same model)")) return -1;
    if (!quiet) printf("all %d ranks hold identical parameters (hash %s)\n", g_comm.world, hex);
    return 0;
}
