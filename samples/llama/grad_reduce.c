/* grad_reduce.c — the gradient reduction unit by unit inside the backward (train.h: train_grad_reduce_*),
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
        DP's one-sample shortcut) at the loop's train_allreduce_grads, in the same order on every rank.
   OVERLAP (DPMEM_COMM_OVERLAP, default 1): a unit's collective is started non-blocking (MPI_Ireduce_
   scatter_block, MPI_Iallreduce) and the backward goes on; completions are polled (MPI_Test) at every
   unit event and waited for at the bucket's reuse and before the update (train_allreduce_grads).
   Two buckets (comm/shard_bucket or comm/allreduce_bucket, and comm/overlap_bucket) take turns; results
   are applied in the order the collectives started, so DPMEM_COMM_OVERLAP=0 (each collective waited
   at once, one bucket) computes the same bits. On a device (NCCL, samples/llama/comm_nccl.c) the same: a
   collective runs on NCCL's communication stream while the backward's kernels go on on the compute stream,
   and its completion (an event, polled at the unit events) is waited for at the bucket's reuse and before
   the update. The order of the collectives is the units' (head, L-1 .. 0, embedding) on every rank.
   A FAILED RUN (train_grad_reduce_free): a round still in flight is waited for (within DPMEM_COMM_TIMEOUT:
   the other ranks run the same collectives) before its bucket is freed; one that cannot complete (a peer
   gone, the timeout) leaves its bucket allocated, as MPI or NCCL may still write there: the job ends.
   Plan backend: the same allocations and frees, no collective. */
#include "train.h"
#include "shard.h"
#include "comm.h"
#include "dpmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GQ_SLOTS 2

/* Positions [a, a + k) of tensor i (sharded: of every rank's slice of it) at offset `at` of the bucket
   (sharded: of each rank's part). */
typedef struct { int i; size_t a, k, at; } Part;

typedef struct {
    float *buf;            /* the bucket */
    int owned;             /* allocated here (comm/overlap_bucket) */
    size_t cap;            /* floats (sharded: per rank) a round in it may hold */
    size_t used;           /* floats (sharded: per rank) of the round in it */
    Part *parts;
    int n_parts, busy;
    CommRequest req;
} Slot;

typedef struct ShardGradQueue {
    int sharded, overlap, n_slots, next;
    Slot slot[GQ_SLOTS];
    unsigned char *reduced;   /* --zero 0: [unit] reduced in this step */
} GradQueue;

static GradQueue *queue(const TrainState *s) { return s->shard ? s->shard->q : s->grad_queue; }

static void set_grad(LlamaModel *m, int i, float *g) {
    *llama_tensor(&m->dw, &m->params[i]) = g;
    if (m->cfg.tie_embeddings && m->params[i].which == W_EMBED_TOKENS) m->dw.lm_head = g;
}

/* A round's bucket ready: rank by rank (sharded) or whole (all-reduce), from the gradients. */
static int pack(TrainState *s, Slot *sl) {
    if (!kbackend_computes(s->kb)) return 0;
    LlamaModel *m = &s->model;
    GradQueue *q = queue(s);
    const int world = q->sharded ? g_comm.world : 1;
    for (int r = 0; r < world; r++)
        for (int k = 0; k < sl->n_parts; k++) {
            const Part *p = &sl->parts[k];
            size_t lo = 0, len = m->params[p->i].numel;
            if (q->sharded) llama_slice(len, world, r, &lo, &len);
            if (p->a >= len) continue;
            const size_t n = len - p->a < p->k ? len - p->a : p->k;
            if (copy_buffer(s->kb, sl->buf + (size_t)r * sl->used + p->at, *llama_tensor(&m->dw, &m->params[p->i]) + lo + p->a, n)) return -1;
        }
    return 0;
}

/* A completed round: this rank's sums into its slices (sharded: added) or back into the gradients. */
static int apply(TrainState *s, Slot *sl) {
    if (!kbackend_computes(s->kb)) return 0;
    LlamaModel *m = &s->model;
    GradQueue *q = queue(s);
    for (int k = 0; k < sl->n_parts; k++) {
        const Part *p = &sl->parts[k];
        if (q->sharded) {
            const size_t len = s->shard->len[p->i];
            if (p->a >= len) continue;
            const size_t n = len - p->a < p->k ? len - p->a : p->k;
            if (add_inplace(s->kb, s->shard->g[p->i] + p->a, sl->buf + (size_t)g_comm.rank * sl->used + p->at, n)) return -1;
        } else if (copy_buffer(s->kb, *llama_tensor(&m->dw, &m->params[p->i]) + p->a, sl->buf + p->at, p->k)) return -1;
    }
    return 0;
}

static const char *scope_name(const GradQueue *q) { return q->sharded ? "reduce_scatter" : "allreduce"; }
static const char *what_of(const GradQueue *q) { return q->sharded ? "the gradient reduce-scatter" : "the gradient all-reduce"; }

/* Completes slot sl (waits: block; else polls once, *done says) and applies it. */
static int complete(TrainState *s, Slot *sl, int block, int *done) {
    GradQueue *q = queue(s);
    *done = 1;
    if (!sl->busy) return 0;
    const uint64_t t0 = dpmem_now_ns();
    int rc = 0;
    if (block) rc = comm_request_wait(&g_comm, &sl->req);
    else rc = comm_request_test(&g_comm, &sl->req, done);
    if (rc == 0 && *done) {
        DPMEM_SCOPE(scope_name(q));
        rc = apply(s, sl);
        sl->busy = 0;
    }
    train_phase_add(s, TRAIN_PH_ALLREDUCE, t0);
    return rc;
}

/* Every round in flight whose collective is done, oldest first, stopping at the first that is not
   (the sums are applied in the order the collectives started). */
static int progress(TrainState *s) {
    GradQueue *q = queue(s);
    for (int k = 0; k < q->n_slots; k++) {
        Slot *sl = &q->slot[(q->next + k) % q->n_slots];
        if (!sl->busy) continue;
        int done = 0;
        if (complete(s, sl, 0, &done)) return -1;
        if (!done) break;
    }
    return 0;
}

static int wait_all(TrainState *s) {
    GradQueue *q = queue(s);
    for (int k = 0; k < q->n_slots; k++) {
        int done;
        if (complete(s, &q->slot[(q->next + k) % q->n_slots], 1, &done)) return -1;
    }
    return 0;
}

/* The round in slot `next`: packed, its collective started (and with no overlap finished at once). */
static int launch(TrainState *s) {
    GradQueue *q = queue(s);
    Slot *sl = &q->slot[q->next];
    const uint64_t t0 = dpmem_now_ns();
    int rc = 0;
    memset(&sl->req, 0, sizeof sl->req);
    {
        DPMEM_SCOPE(scope_name(q));
        const size_t count = sl->used;
        rc = pack(s, sl);
        if (rc == 0 && kbackend_computes(s->kb)) {
            rc = train_collective(s, q->sharded ? COMM_REDUCE_SCATTER : COMM_ALLREDUCE, sl->buf, count, what_of(q), &sl->req);
            sl->busy = rc == 0;
        } else if (rc == 0) sl->busy = 1;   /* plan: nothing moves; applied (a no-op) at its completion */
    }
    train_phase_add(s, TRAIN_PH_ALLREDUCE, t0);
    q->next = (q->next + 1) % q->n_slots;
    if (rc) return -1;
    if (!q->overlap || !kbackend_computes(s->kb)) {
        int done;
        return complete(s, sl, 1, &done);
    }
    return 0;
}

/* Unit u's gradients through the buckets in rounds. */
static int reduce_unit(TrainState *s, int u) {
    GradQueue *q = queue(s);
    LlamaModel *m = &s->model;
    Slot *sl = NULL;
    for (int i = 0; i < m->n_params; i++) {
        if (!m->params[i].trainable || llama_grad_unit(m, i) != u || !*llama_tensor(&m->dw, &m->params[i])) continue;
        size_t lo0 = 0, len0 = m->params[i].numel;
        if (q->sharded) llama_slice(len0, g_comm.world, 0, &lo0, &len0);   /* rank 0's: the longest */
        for (size_t a = 0; a < len0;) {
            if (!sl) {   /* the next bucket, once its last round is done */
                sl = &q->slot[q->next];
                int done;
                if (complete(s, sl, 1, &done)) return -1;
                sl->used = 0; sl->n_parts = 0;
            }
            const size_t k = sl->cap - sl->used < len0 - a ? sl->cap - sl->used : len0 - a;
            sl->parts[sl->n_parts++] = (Part){ i, a, k, sl->used };
            sl->used += k; a += k;
            if (sl->used == sl->cap || sl->n_parts == m->n_params) { if (launch(s)) return -1; sl = NULL; }
        }
    }
    if (sl && sl->used && launch(s)) return -1;
    return 0;
}

static int unit_begin(void *user, int u) {
    TrainState *s = user;
    GradQueue *q = queue(s);
    if (progress(s)) return -1;
    if (!q->sharded) return 0;
    LlamaModel *m = &s->model;
    for (int i = 0; i < m->n_params; i++) {
        const ParamInfo *p = &m->params[i];
        if (!p->trainable || !llama_unit_writes(m, u, i) || *llama_tensor(&m->dw, p)) continue;
        char tag[160];
        snprintf(tag, sizeof tag, "grads/%s", p->name);
        float *g = kbuf_alloc(s->kb, p->numel * sizeof(float), tag);
        if (!g) return -1;
        set_grad(m, i, g);
        if (fill_buffer(s->kb, g, 0.0f, p->numel)) return -1;
    }
    return 0;
}

static int unit_done(void *user, int u) {
    TrainState *s = user;
    GradQueue *q = queue(s);
    if (!q->sharded) {   /* the all-reduce: once a step, at its last physical batch */
        if (s->micro != s->cfg->grad_accum - 1 || q->reduced[u]) return progress(s);
        q->reduced[u] = 1;
    }
    if (reduce_unit(s, u) || progress(s)) return -1;
    if (!q->sharded) return 0;
    LlamaModel *m = &s->model;   /* packed: the full-size buffers go */
    for (int i = m->n_params - 1; i >= 0; i--) {
        float *g = *llama_tensor(&m->dw, &m->params[i]);
        if (!g || llama_grad_unit(m, i) != u) continue;
        kbuf_free(s->kb, g);
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

int train_grad_reduce_init(TrainState *s) {
    const int sharded = s->shard && s->shard->stage >= 2;
    const int overlap = train_comm_overlap();
    if (!sharded && !(g_comm.world > 1 && overlap && s->comm_bucket && !s->shard)) return 0;
    LlamaModel *m = &s->model;
    GradQueue *q = calloc(1, sizeof *q);
    if (!q) { snprintf(s->kb->err, sizeof s->kb->err, "out of host memory (the gradient queue)"); return -1; }
    if (s->shard) s->shard->q = q; else s->grad_queue = q;
    q->sharded = sharded; q->overlap = overlap; q->n_slots = overlap ? GQ_SLOTS : 1;
    const int units = llama_grad_units(m);
    if (!(q->reduced = calloc((size_t)units, 1))) { snprintf(s->kb->err, sizeof s->kb->err, "out of host memory (the gradient queue)"); return -1; }
    for (int k = 0; k < q->n_slots; k++)
        if (!(q->slot[k].parts = malloc(((size_t)m->n_params + 1) * sizeof(Part)))) {
            snprintf(s->kb->err, sizeof s->kb->err, "out of host memory (the gradient queue)");
            return -1;
        }
    if (sharded) {
        Shard *h = s->shard;
        if (!(h->g = calloc((size_t)m->n_params, sizeof *h->g))) {
            snprintf(s->kb->err, sizeof s->kb->err, "out of host memory (the gradient slices)");
            return -1;
        }
        for (int i = 0; i < m->n_params; i++) {
            const ParamInfo *p = &m->params[i];
            if (!p->trainable || h->len[i] == 0) continue;
            char tag[160];
            snprintf(tag, sizeof tag, "grads/%s.shard", p->name);
            if (!(h->g[i] = kbuf_alloc(s->kb, h->len[i] * sizeof(float), tag)) || fill_buffer(s->kb, h->g[i], 0.0f, h->len[i])) return -1;
        }
    }
    if (!s->comm_bucket) {   /* nothing trainable (LoRA): no unit has a gradient of the model to reduce */
        m->units = (LlamaUnitHooks){ .user = s };
        weight_gathers(m);   /* (its frozen base's, under --zero 3) */
        return 0;
    }
    /* the loop's bucket, and for the overlap a second one of the largest round a unit needs (the
       largest unit's floats, sharded: rank 0's, the longest slices; at most the loop's bucket) */
    const size_t world = sharded ? (size_t)g_comm.world : 1, cap0 = s->comm_bucket_n / world;
    size_t largest = 0;
    for (int u = 0; u < units; u++) {
        size_t n = 0;
        for (int i = 0; i < m->n_params; i++) {
            if (!m->params[i].trainable || llama_grad_unit(m, i) != u) continue;
            size_t lo0 = 0, len0 = m->params[i].numel;
            if (sharded) llama_slice(len0, g_comm.world, 0, &lo0, &len0);
            n += len0;
        }
        if (n > largest) largest = n;
    }
    q->slot[0].buf = s->comm_bucket;
    q->slot[0].cap = cap0;
    for (int k = 1; k < q->n_slots; k++) {
        q->slot[k].cap = largest < cap0 ? largest : cap0;
        if (!(q->slot[k].buf = kbuf_alloc(s->kb, q->slot[k].cap * world * sizeof(float), "comm/overlap_bucket"))) return -1;
        q->slot[k].owned = 1;
    }
    m->units = (LlamaUnitHooks){ .user = s, .begin = unit_begin, .done = unit_done };
    weight_gathers(m);
    return 0;
}

int train_grad_reduce_finish(TrainState *s) {
    GradQueue *q = queue(s);
    if (!q || !s->model.units.done) return 0;
    LlamaModel *m = &s->model;
    if (!q->sharded) {   /* the units whose last physical batch ran no backward here, in the backward's order */
        const int L = m->L, units = llama_grad_units(m);
        for (int k = 0; k < units; k++) {
            const int u = k == 0 ? llama_unit_head(m) : k <= L ? L - k : llama_unit_embed(m);
            if (!q->reduced[u] && reduce_unit(s, u)) return -1;
        }
        memset(q->reduced, 0, (size_t)units);
    }
    return wait_all(s);
}

int train_grad_reduce_idle(TrainState *s) {
    GradQueue *q = queue(s);
    if (!q || !q->sharded || !s->model.units.done) return 0;
    LlamaModel *m = &s->model;
    const int L = m->L, units = llama_grad_units(m);
    for (int k = 0; k < units; k++) {
        const int u = k == 0 ? llama_unit_head(m) : k <= L ? L - k : llama_unit_embed(m);
        if (unit_begin(s, u) || unit_done(s, u)) return -1;
    }
    return 0;
}

int train_grad_reduce_zero(TrainState *s) {
    GradQueue *q = queue(s);
    if (!q || !q->sharded) return 0;
    for (int i = 0; i < s->model.n_params; i++)
        if (s->shard->g[i] && fill_buffer(s->kb, s->shard->g[i], 0.0f, s->shard->len[i])) return -1;
    return 0;
}

int train_grad_reduce_active(const TrainState *s) {
    const GradQueue *q = queue(s);
    return q && s->model.units.done ? (q->sharded ? 2 : 1) : 0;
}

void train_grad_reduce_free(TrainState *s) {
    GradQueue *q = queue(s);
    if (!q) return;
    s->model.units = (LlamaUnitHooks){ 0 };
    for (int k = q->n_slots - 1; k >= 0; k--) {
        Slot *sl = &q->slot[k];
        /* a run that failed with a round in flight: the collective may still write into the bucket */
        if (sl->busy && comm_request_pending(&sl->req)) (void)comm_request_wait(&g_comm, &sl->req);
        if (comm_request_pending(&sl->req)) {   /* (the loop's bucket: train_allreduce_free / shard_free leave it too) */
            if (!sl->owned) s->comm_bucket = NULL;
        } else if (sl->owned) kbuf_free(s->kb, sl->buf);
        free(sl->parts);
    }
    free(q->reduced);
    if (s->shard && s->shard->g) {
        LlamaModel *m = &s->model;
        for (int i = m->n_params - 1; i >= 0; i--) {   /* a unit in progress when the run failed */
            float *g = m->dw.layers ? *llama_tensor(&m->dw, &m->params[i]) : NULL;
            if (g) { kbuf_free(s->kb, g); set_grad(m, i, NULL); }
        }
        for (int i = m->n_params - 1; i >= 0; i--) kbuf_free(s->kb, s->shard->g[i]);
        free(s->shard->g);
        s->shard->g = NULL;
    }
    free(q);
    if (s->shard) s->shard->q = NULL; else s->grad_queue = NULL;
}

float *train_grad_slice(TrainState *s, int i) {
    size_t lo, n;
    train_grad_range(s, i, &lo, &n);
    if (s->shard && s->shard->g) return s->shard->g[i];
    float *g = *llama_tensor(&s->model.dw, &s->model.params[i]);
    return g ? g + lo : NULL;
}
