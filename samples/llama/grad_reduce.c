/* grad_reduce.c — the gradient reduction unit by unit inside the backward (grad_reduce.h),
   at llama.h's gradient units (block l's nine tensors; the final norm and lm_head; the embedding):
     --zero 2: at every physical batch, each unit's gradient is reduce-scattered as soon as the unit is
        done (scope "reduce_scatter") and this rank's part added into its slice, grads/<name>.shard
        (fp32, the slice's size, zeroed at each step's zero_grad); the unit's full-size buffers
        (grads/<name>) exist only from the unit's begin to its done: allocated zeroed when the
        backward (or book-keeping's formation after it) begins the unit, freed once packed. A rank
        never holds the whole model's gradient: at most the slices plus the units in progress (one,
        or with a tied lm_head the tied matrix too, from the head's begin to the embedding's done).
     --zero 0, several ranks: the all-reduce of each unit at the last physical batch of the step
        (scope "allreduce"), the units that ran no backward there (a Poisson batch with no rows,
        DP's one-sample shortcut) at the step's grad_reduce_step, in the same order on every rank.
   OVERLAP (DPMEM_COMM_OVERLAP, default 1): a unit's collective is started non-blocking (MPI_Ireduce_
   scatter_block, MPI_Iallreduce) and the backward goes on; completions are polled (MPI_Test) at every
   unit event and waited for at the bucket's reuse and before the update (grad_reduce_step).
   Two buckets (comm/shard_bucket or comm/allreduce_bucket, and comm/overlap_bucket) take turns; results
   are applied in the order the collectives started, so DPMEM_COMM_OVERLAP=0 (each collective waited
   at once, one bucket) computes the same bits. On a device (NCCL, samples/llama/comm_nccl.c) the same: a
   collective runs on NCCL's communication stream while the backward's kernels go on on the compute stream,
   and its completion (an event, polled at the unit events) is waited for at the bucket's reuse and before
   the update. The order of the collectives is the units' (head, L-1 .. 0, embedding) on every rank.
   A FAILED RUN (grad_reduce_free): a round still in flight is waited for (within DPMEM_COMM_TIMEOUT:
   the other ranks run the same collectives) before its bucket is freed; one that cannot complete (a peer
   gone, the timeout) leaves its bucket allocated, as MPI or NCCL may still write there: the job ends.
   Plan backend: the same allocations and frees, no collective. */
#include "grad_reduce.h"
#include "dpmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GQ_SLOTS 2

typedef struct {
    float *buf;            /* the bucket */
    int owned;             /* allocated here (comm/overlap_bucket) */
    DistRound round;       /* the round in it (dist.h): sharded, rank by rank; its cap: floats (per rank) it may hold */
    int busy;
    CommRequest req;
} Slot;

typedef struct GradQueue {
    int sharded, overlap, n_slots, next;
    Slot slot[GQ_SLOTS];
    unsigned char *reduced;   /* --zero 0: [unit] reduced in this step */
} GradQueue;

static void set_grad(LlamaModel *m, int i, float *g) {
    *llama_tensor(&m->dw, &m->params[i]) = g;
    if (m->cfg.tie_embeddings && m->params[i].which == W_EMBED_TOKENS) m->dw.lm_head = g;
}

/* The rounds' two ends: the gradients (whole, every rank's slice of them at lo), this rank's slice of the sum. */
static void *grad_at(void *user, int i, int r, size_t lo) {
    const Dist *d = user;
    (void)r;
    return *llama_tensor(&d->model->dw, &d->model->params[i]) + lo;
}
static void *grad_slice_at(void *user, int i, int r, size_t lo) {
    const Dist *d = user;
    (void)r; (void)lo;
    return d->shard->g[i];
}

/* A round's bucket ready: rank by rank (sharded) or whole (all-reduce), from the gradients. */
static int pack(Dist *d, Slot *sl) {
    const DistSide grads = { grad_at, d, DIST_COPY };
    return dist_round_move(d, &sl->round, sl->buf, KDT_F32, DIST_ALL, &grads, 1);
}

/* A completed round: this rank's sums into its slices (sharded: added) or back into the gradients. */
static int apply(Dist *d, Slot *sl) {
    const DistSide to = d->queue->sharded ? (DistSide){ grad_slice_at, d, DIST_ADD } : (DistSide){ grad_at, d, DIST_COPY };
    return dist_round_move(d, &sl->round, sl->buf, KDT_F32, DIST_OWN, &to, 0);
}

static const char *scope_name(const GradQueue *q) { return q->sharded ? "reduce_scatter" : "allreduce"; }
static const char *what_of(const GradQueue *q) { return q->sharded ? "the gradient reduce-scatter" : "the gradient all-reduce"; }

/* Completes slot sl (waits: block; else polls once, *done says) and applies it. */
static int complete(Dist *d, Slot *sl, int block, int *done) {
    GradQueue *q = d->queue;
    *done = 1;
    if (!sl->busy) return 0;
    const uint64_t t0 = dpmem_now_ns();
    int rc = 0;
    if (block) rc = comm_request_wait(&g_comm, &sl->req);
    else rc = comm_request_test(&g_comm, &sl->req, done);
    if (rc == 0 && *done) {
        DPMEM_SCOPE(scope_name(q));
        rc = apply(d, sl);
        sl->busy = 0;
    }
    dist_time(d, t0);
    return rc;
}

/* Every round in flight whose collective is done, oldest first, stopping at the first that is not
   (the sums are applied in the order the collectives started). */
static int progress(Dist *d) {
    GradQueue *q = d->queue;
    for (int k = 0; k < q->n_slots; k++) {
        Slot *sl = &q->slot[(q->next + k) % q->n_slots];
        if (!sl->busy) continue;
        int done = 0;
        if (complete(d, sl, 0, &done)) return -1;
        if (!done) break;
    }
    return 0;
}

static int wait_all(Dist *d) {
    GradQueue *q = d->queue;
    for (int k = 0; k < q->n_slots; k++) {
        int done;
        if (complete(d, &q->slot[(q->next + k) % q->n_slots], 1, &done)) return -1;
    }
    return 0;
}

/* The round in slot `next`: packed, its collective started (and with no overlap finished at once). */
static int launch(Dist *d) {
    GradQueue *q = d->queue;
    Slot *sl = &q->slot[q->next];
    const uint64_t t0 = dpmem_now_ns();
    int rc = 0;
    memset(&sl->req, 0, sizeof sl->req);
    {
        DPMEM_SCOPE(scope_name(q));
        const size_t count = sl->round.used;
        rc = pack(d, sl);
        if (rc == 0 && kbackend_computes(d->kb)) {
            rc = dist_collective(d, q->sharded ? COMM_REDUCE_SCATTER : COMM_ALLREDUCE, sl->buf, count, what_of(q), &sl->req);
            sl->busy = rc == 0;
        } else if (rc == 0) sl->busy = 1;   /* plan: nothing moves; applied (a no-op) at its completion */
    }
    dist_time(d, t0);
    q->next = (q->next + 1) % q->n_slots;
    if (rc) return -1;
    if (!q->overlap || !kbackend_computes(d->kb)) {
        int done;
        return complete(d, sl, 1, &done);
    }
    return 0;
}

/* Unit u's gradients through the buckets in rounds. */
static int reduce_unit(Dist *d, int u) {
    GradQueue *q = d->queue;
    LlamaModel *m = d->model;
    Slot *sl = NULL;
    for (int i = 0; i < m->n_params; i++) {
        if (!m->params[i].trainable || llama_grad_unit(m, i) != u || !*llama_tensor(&m->dw, &m->params[i])) continue;
        const size_t n = m->params[i].numel, len0 = q->sharded ? dist_slice0(n, g_comm.world) : n;
        for (size_t a = 0; a < len0;) {
            if (!sl) {   /* the next bucket, once its last round is done */
                sl = &q->slot[q->next];
                int done;
                if (complete(d, sl, 1, &done)) return -1;
                sl->round.used = 0; sl->round.n = 0;
            }
            if (dist_round_add(&sl->round, i, n, &a)) { if (launch(d)) return -1; sl = NULL; }
        }
    }
    if (sl && sl->round.used && launch(d)) return -1;
    return 0;
}

static int unit_begin(void *user, int u) {
    Dist *d = user;
    GradQueue *q = d->queue;
    if (progress(d)) return -1;
    if (!q->sharded) return 0;
    LlamaModel *m = d->model;
    for (int i = 0; i < m->n_params; i++) {
        const ParamInfo *p = &m->params[i];
        if (!p->trainable || !llama_unit_writes(m, u, i) || *llama_tensor(&m->dw, p)) continue;
        char tag[160];
        snprintf(tag, sizeof tag, "grads/%s", p->name);
        float *g = kbuf_alloc(d->kb, p->numel * sizeof(float), tag);
        if (!g) return -1;
        set_grad(m, i, g);
        if (fill_buffer(d->kb, g, 0.0f, p->numel)) return -1;
    }
    return 0;
}

static int unit_done(void *user, int u) {
    Dist *d = user;
    GradQueue *q = d->queue;
    if (!q->sharded) {   /* the all-reduce: once a step, at its last physical batch */
        if (d->micro != d->grad_accum - 1 || q->reduced[u]) return progress(d);
        q->reduced[u] = 1;
    }
    if (reduce_unit(d, u) || progress(d)) return -1;
    if (!q->sharded) return 0;
    LlamaModel *m = d->model;   /* packed: the full-size buffers go */
    for (int i = m->n_params - 1; i >= 0; i--) {
        float *g = *llama_tensor(&m->dw, &m->params[i]);
        if (!g || llama_grad_unit(m, i) != u) continue;
        kbuf_free(d->kb, g);
        set_grad(m, i, NULL);
    }
    return 0;
}

/* --zero 3 (the weights held sliced): each unit's weights gathered before its use, the next unit's prefetched */
static void weight_gathers(LlamaModel *m) {
    if (!llama_params_sharded(m)) return;
    m->units.gather = shard_gather_unit;
    m->units.release = shard_release_unit;
    m->units.prefetch = shard_prefetch_unit;
}

int grad_reduce_init(Dist *d) {
    const int sharded = d->shard && d->shard->stage >= 2;
    const int overlap = d->set.overlap;
    if (!sharded && !(g_comm.world > 1 && overlap && d->bucket && !d->shard)) return 0;
    LlamaModel *m = d->model;
    GradQueue *q = calloc(1, sizeof *q);
    if (!q) { snprintf(d->kb->err, sizeof d->kb->err, "out of host memory (the gradient queue)"); return -1; }
    d->queue = q;
    q->sharded = sharded; q->overlap = overlap; q->n_slots = overlap ? GQ_SLOTS : 1;
    const int units = llama_grad_units(m);
    if (!(q->reduced = calloc((size_t)units, 1))) { snprintf(d->kb->err, sizeof d->kb->err, "out of host memory (the gradient queue)"); return -1; }
    for (int k = 0; k < q->n_slots; k++) {
        q->slot[k].round = (DistRound){ .max = m->n_params, .world = sharded ? g_comm.world : 1, .rank = sharded ? g_comm.rank : 0 };
        if (!(q->slot[k].round.pc = malloc(((size_t)m->n_params + 1) * sizeof(DistPiece)))) {
            snprintf(d->kb->err, sizeof d->kb->err, "out of host memory (the gradient queue)");
            return -1;
        }
    }
    if (sharded) {
        Shard *h = d->shard;
        if (!(h->g = calloc((size_t)m->n_params, sizeof *h->g))) {
            snprintf(d->kb->err, sizeof d->kb->err, "out of host memory (the gradient slices)");
            return -1;
        }
        for (int i = 0; i < m->n_params; i++) {
            const ParamInfo *p = &m->params[i];
            if (!p->trainable || h->len[i] == 0) continue;
            char tag[160];
            snprintf(tag, sizeof tag, "grads/%s.shard", p->name);
            if (!(h->g[i] = kbuf_alloc(d->kb, h->len[i] * sizeof(float), tag)) || fill_buffer(d->kb, h->g[i], 0.0f, h->len[i])) return -1;
        }
    }
    if (!d->bucket) {   /* nothing trainable (LoRA): no unit has a gradient of the model to reduce */
        m->units = (LlamaUnitHooks){ .user = d };
        weight_gathers(m);   /* (its frozen base's, under --zero 3) */
        return 0;
    }
    /* the loop's bucket, and for the overlap a second one of the largest round a unit needs (the
       largest unit's floats, sharded: rank 0's, the longest slices; at most the loop's bucket) */
    const size_t world = sharded ? (size_t)g_comm.world : 1, cap0 = d->bucket_n / world;
    size_t largest = 0;
    for (int u = 0; u < units; u++) {
        size_t n = 0;
        for (int i = 0; i < m->n_params; i++) {
            if (!m->params[i].trainable || llama_grad_unit(m, i) != u) continue;
            n += sharded ? dist_slice0(m->params[i].numel, g_comm.world) : m->params[i].numel;
        }
        if (n > largest) largest = n;
    }
    q->slot[0].buf = d->bucket;
    q->slot[0].round.cap = cap0;
    for (int k = 1; k < q->n_slots; k++) {
        q->slot[k].round.cap = largest < cap0 ? largest : cap0;
        if (!(q->slot[k].buf = kbuf_alloc(d->kb, q->slot[k].round.cap * world * sizeof(float), "comm/overlap_bucket"))) return -1;
        q->slot[k].owned = 1;
    }
    m->units = (LlamaUnitHooks){ .user = d, .begin = unit_begin, .done = unit_done };
    weight_gathers(m);
    return 0;
}

int grad_reduce_finish(Dist *d) {
    GradQueue *q = d->queue;
    if (!q || !d->model->units.done) return 0;
    LlamaModel *m = d->model;
    if (!q->sharded) {   /* the units whose last physical batch ran no backward here, in the backward's order */
        const int L = m->L, units = llama_grad_units(m);
        for (int k = 0; k < units; k++) {
            const int u = k == 0 ? llama_unit_head(m) : k <= L ? L - k : llama_unit_embed(m);
            if (!q->reduced[u] && reduce_unit(d, u)) return -1;
        }
        memset(q->reduced, 0, (size_t)units);
    }
    return wait_all(d);
}

int grad_reduce_idle(Dist *d) {
    GradQueue *q = d->queue;
    if (!q || !q->sharded || !d->model->units.done) return 0;
    LlamaModel *m = d->model;
    const int L = m->L, units = llama_grad_units(m);
    for (int k = 0; k < units; k++) {
        const int u = k == 0 ? llama_unit_head(m) : k <= L ? L - k : llama_unit_embed(m);
        if (unit_begin(d, u) || unit_done(d, u)) return -1;
    }
    return 0;
}

int grad_reduce_zero(Dist *d) {
    GradQueue *q = d->queue;
    if (!q || !q->sharded) return 0;
    for (int i = 0; i < d->model->n_params; i++)
        if (d->shard->g[i] && fill_buffer(d->kb, d->shard->g[i], 0.0f, d->shard->len[i])) return -1;
    return 0;
}

int grad_reduce_active(const Dist *d) {
    const GradQueue *q = d->queue;
    return q && d->model->units.done ? (q->sharded ? 2 : 1) : 0;
}

void grad_reduce_free(Dist *d) {
    GradQueue *q = d->queue;
    if (!q) return;
    d->model->units = (LlamaUnitHooks){ 0 };
    for (int k = q->n_slots - 1; k >= 0; k--) {
        Slot *sl = &q->slot[k];
        /* a run that failed with a round in flight: the collective may still write into the bucket */
        if (sl->busy && comm_request_pending(&sl->req)) (void)comm_request_wait(&g_comm, &sl->req);
        if (comm_request_pending(&sl->req)) {   /* (the loop's bucket: dist_bucket_free leaves it too) */
            if (!sl->owned) d->bucket = NULL;
        } else if (sl->owned) kbuf_free(d->kb, sl->buf);
        free(sl->round.pc);
    }
    free(q->reduced);
    if (d->shard && d->shard->g) {
        LlamaModel *m = d->model;
        for (int i = m->n_params - 1; i >= 0; i--) {   /* a unit in progress when the run failed */
            float *g = m->dw.layers ? *llama_tensor(&m->dw, &m->params[i]) : NULL;
            if (g) { kbuf_free(d->kb, g); set_grad(m, i, NULL); }
        }
        for (int i = m->n_params - 1; i >= 0; i--) kbuf_free(d->kb, d->shard->g[i]);
        free(d->shard->g);
        d->shard->g = NULL;
    }
    free(q);
    d->queue = NULL;
}

/* The loss printed is the job's: the mean over every rank's rows, each rank's mean weighted by its rows (a Poisson
   batch draws a different number on each rank; a rank that drew none adds nothing). */
static int loss_mean(Dist *d, double *loss, long rows) {
    if (g_comm.world <= 1 || !kbackend_computes(d->kb)) return 0;
    double v[2] = { *loss * (double)rows, (double)rows };
    if (dist_sum_host(d, v, 2, "the loss all-reduce")) return -1;
    if (v[1] > 0) *loss = v[0] / v[1];
    return 0;
}

int grad_reduce_step(Dist *d, double *loss, long rows) {
    if (grad_reduce_active(d))   /* reduced unit by unit in the backward: the rest, and the waits */
        return grad_reduce_finish(d) ? -1 : loss_mean(d, loss, rows);
    if (d->shard && d->shard->stage >= 2) {   /* --zero 2 with nothing of the model trainable */
        if (shard_reduce_scatter_grads(d)) return -1;
        return loss_mean(d, loss, rows);
    }
    if (g_comm.world <= 1) return 0;
    LlamaModel *m = d->model;
    float **bufs = malloc((size_t)m->n_params * sizeof *bufs);
    size_t *ns = malloc((size_t)m->n_params * sizeof *ns);
    if (!bufs || !ns) { free(bufs); free(ns); snprintf(d->kb->err, sizeof d->kb->err, "out of host memory (all-reduce)"); return -1; }
    for (int i = 0; i < m->n_params; i++) {
        bufs[i] = m->params[i].trainable ? *llama_tensor(&m->dw, &m->params[i]) : NULL;
        ns[i] = m->params[i].numel;
    }
    int rc = dist_allreduce(d, bufs, ns, m->n_params, "the gradient all-reduce");
    free(bufs); free(ns);
    return rc ? rc : loss_mean(d, loss, rows);
}
