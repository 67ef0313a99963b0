/* allreduce.c — the training loop's sum across ranks (samples/llama/comm.h): the tensors are packed into
   one bucket (comm/allreduce_bucket: at most DPMEM_COMM_BUCKET_MB, default 16 MiB, on the backend's
   device, tagged so that its memory shows in every tool), summed in place by MPI (host memory) or
   NCCL (device memory), and unpacked: fewer and larger collectives, as PyTorch DDP's buckets do.
   The bucket is allocated with the model (train_allreduce_prepare; by the first sum where the model
   has nothing trainable: LoRA) and lives until train_allreduce_free; the plan backend
   allocates it too (its planned peak includes it) and sums nothing. With one rank nothing happens.
   Scope "allreduce". Under --zero the bucket is samples/llama/shard.c's comm/shard_bucket (allocated
   before this one would be), and --zero 2 reduce-scatters the gradients there instead. Not here: which tensors (train.c: the trainable gradients; dp_sgd.c: LoRA's). */
#include "train.h"
#include "comm.h"
#include "shard.h"
#include "dpmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t train_comm_bucket_floats(void) {
    const char *e = getenv("DPMEM_COMM_BUCKET_MB");
    long mb = e && *e ? atol(e) : 16;
    if (mb < 1) mb = 1;
    return (size_t)mb * (1u << 20) / sizeof(float);
}

int train_comm_overlap(void) {
    const char *e = getenv("DPMEM_COMM_OVERLAP");
    return !(e && *e == '0');
}

int train_zero3_prefetch(void) {
    const char *e = getenv("DPMEM_ZERO3_PREFETCH");
    return !(e && *e == '0');
}

/* A device buffer's collective where no NCCL is linked: -1 with the error; else 0. */
static int no_nccl(TrainState *s, const char *what) {
    if (s->kb->space == 0 || comm_device_start) return 0;
    snprintf(s->kb->err, sizeof s->kb->err, "%s: this program has no NCCL for device buffers (build with the CUDA toolkit's NCCL)", what);
    return -1;
}

int train_allgatherv_start(TrainState *s, void *buf, const size_t *lo, const size_t *len, size_t elem, const char *what, CommRequest *r) {
    memset(r, 0, sizeof *r);
    if (no_nccl(s, what)) return -1;
    return s->kb->space == 0 ? comm_allgatherv_start(&g_comm, buf, lo, len, elem, what, r)
                             : comm_device_allgatherv_start(&g_comm, buf, lo, len, elem, what, r);
}

int train_collective(TrainState *s, CommOp op, void *buf, size_t count, const char *what, CommRequest *r) {
    if (r) memset(r, 0, sizeof *r);
    if (no_nccl(s, what)) return -1;
    if (s->kb->space != 0) {
        CommRequest own;
        if (comm_device_start(&g_comm, op, buf, count, what, r ? r : &own)) return -1;
        return r ? 0 : comm_request_wait(&g_comm, &own);
    }
    if (r && (op == COMM_ALLREDUCE || op == COMM_REDUCE_SCATTER))
        return op == COMM_ALLREDUCE ? comm_allreduce_start(&g_comm, buf, count, what, r) : comm_reduce_scatter_start(&g_comm, buf, count, what, r);
    if (r) { snprintf(s->kb->err, sizeof s->kb->err, "%s: no non-blocking host collective of this kind", what); return -1; }
    switch (op) {
    case COMM_ALLREDUCE:      return comm_allreduce_float(&g_comm, buf, count, what);
    case COMM_REDUCE_SCATTER: return comm_reduce_scatter_float(&g_comm, buf, count, what);
    case COMM_ALLGATHER:      return comm_allgather_float(&g_comm, buf, count, what);
    case COMM_ALLGATHER_BF16: return comm_allgather_bf16(&g_comm, buf, count, what);
    }
    return -1;
}

static int sum_bucket(TrainState *s, size_t n, const char *what) {
    if (!kbackend_computes(s->kb)) return 0;
    return train_collective(s, COMM_ALLREDUCE, s->comm_bucket, n, what, NULL);
}

/* A position in a list of tensors (NULL ones skipped). */
typedef struct { float *const *bufs; const size_t *ns; int count, i; size_t off; } Cursor;

/* k floats between the tensors at the cursor and the bucket (pack: into the bucket), advancing it. */
static int transfer(TrainState *s, Cursor *c, size_t k, int pack) {
    for (size_t u = 0; u < k && c->i < c->count;) {
        if (!c->bufs[c->i] || c->off == c->ns[c->i]) { c->i++; c->off = 0; continue; }
        const size_t m = c->ns[c->i] - c->off < k - u ? c->ns[c->i] - c->off : k - u;
        float *t = c->bufs[c->i] + c->off, *b = s->comm_bucket + u;
        if (kbackend_computes(s->kb) && copy_buffer(s->kb, pack ? b : t, pack ? t : b, m)) return -1;
        u += m; c->off += m;
    }
    return 0;
}

/* The loss printed is the mean over the ranks. */
static int loss_mean(TrainState *s) {
    if (g_comm.world <= 1 || !kbackend_computes(s->kb)) return 0;
    double l = s->loss;
    int rc = comm_allreduce_double(&g_comm, &l, 1, "the loss all-reduce");
    s->loss = l / g_comm.world;
    return rc;
}

int train_allreduce_prepare(TrainState *s) {
    if (g_comm.world <= 1 || s->comm_bucket) return 0;
    size_t total = 0;
    for (int i = 0; i < s->model.n_params; i++) total += s->model.params[i].trainable ? s->model.params[i].numel : 0;
    if (total == 0) return 0;   /* LoRA: the adapters' sum allocates it when it first runs */
    const size_t cap = train_comm_bucket_floats();
    s->comm_bucket_n = total < cap ? total : cap;
    return (s->comm_bucket = kbuf_alloc(s->kb, s->comm_bucket_n * sizeof(float), "comm/allreduce_bucket")) ? 0 : -1;
}

int train_allreduce(TrainState *s, float *const *bufs, const size_t *ns, int count, const char *what) {
    if (g_comm.world <= 1) return 0;
    DPMEM_SCOPE("allreduce");
    size_t total = 0;
    for (int i = 0; i < count; i++) total += bufs[i] ? ns[i] : 0;
    if (total == 0) return 0;
    if (!s->comm_bucket) {
        const size_t cap = train_comm_bucket_floats();
        s->comm_bucket_n = total < cap ? total : cap;
        if (!(s->comm_bucket = kbuf_alloc(s->kb, s->comm_bucket_n * sizeof(float), "comm/allreduce_bucket"))) return -1;
    }
    Cursor in = { bufs, ns, count, 0, 0 }, out = in;
    for (size_t done = 0; done < total;) {
        const size_t k = total - done < s->comm_bucket_n ? total - done : s->comm_bucket_n;
        if (transfer(s, &in, k, 1) || sum_bucket(s, k, what) || transfer(s, &out, k, 0)) return -1;
        done += k;
    }
    return 0;
}

int train_allreduce_grads(TrainState *s) {
    if (train_grad_reduce_active(s)) {   /* reduced unit by unit in the backward (grad_reduce.c): the rest, and the waits */
        const double t = s->phase_s[TRAIN_PH_ALLREDUCE];   /* (timed by the loop around this call, not twice) */
        const int rc = train_grad_reduce_finish(s);
        s->phase_s[TRAIN_PH_ALLREDUCE] = t;
        return rc ? -1 : loss_mean(s);
    }
    if (s->shard && s->shard->stage >= 2) {   /* --zero 2 with nothing of the model trainable */
        if (shard_reduce_scatter_grads(s)) return -1;
        return loss_mean(s);
    }
    if (g_comm.world <= 1) return 0;
    LlamaModel *m = &s->model;
    float **bufs = malloc((size_t)m->n_params * sizeof *bufs);
    size_t *ns = malloc((size_t)m->n_params * sizeof *ns);
    if (!bufs || !ns) { free(bufs); free(ns); snprintf(s->kb->err, sizeof s->kb->err, "out of host memory (all-reduce)"); return -1; }
    for (int i = 0; i < m->n_params; i++) {
        bufs[i] = m->params[i].trainable ? *llama_tensor(&m->dw, &m->params[i]) : NULL;
        ns[i] = m->params[i].numel;
    }
    int rc = train_allreduce(s, bufs, ns, m->n_params, "the gradient all-reduce");
    free(bufs); free(ns);
    return rc ? rc : loss_mean(s);
}

void train_allreduce_free(TrainState *s) {
    kbuf_free(s->kb, s->comm_bucket);
    s->comm_bucket = NULL;
    s->comm_bucket_n = 0;
}

int train_check_ranks_agree(TrainState *s) {
    if (g_comm.world <= 1 || !g_comm.mpi || !kbackend_computes(s->kb)) return 0;
    DPMEM_SCOPE("allreduce");
    LlamaModel *m = &s->model;
    uint64_t h = 1469598103934665603ull;                 /* FNV-1a over every parameter's bytes */
    float *host = NULL;
    size_t cap = 0;
    for (int i = 0; i < m->n_params; i++) {
        const size_t n = m->params[i].numel;
        if (n > cap) {
            float *p = realloc(host, n * sizeof *host);
            if (!p) { free(host); snprintf(s->kb->err, sizeof s->kb->err, "out of host memory (parameter check)"); return -1; }
            host = p; cap = n;
        }
        /* a tensor kept in bf16 alone (llama.h): its 2-byte values, and its unmerged adapter's A and B; a
           sharded master (--zero: shard.h), or any tensor held sliced (--zero 3, a frozen base's: in its own type),
           gathered whole, one tensor at a time: the unsharded run's hash */
        const int only = llama_bf16_only(m, &m->params[i]);
        const float *src = only ? *llama_tensor(&m->w16, &m->params[i]) : *llama_tensor(&m->w, &m->params[i]);
        const size_t bytes = n * (only ? 2 : sizeof *host);
        if (llama_held_sliced(m, &m->params[i]) ? shard_gather_master(s, i, host) : kbuf_download(s->kb, host, src, bytes)) {
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
            if (kbuf_download(s->kb, host, ab[j], nab[j] * sizeof *host)) { free(host); return -1; }
            for (size_t k = 0; k < nab[j] * sizeof *host; k++) h = (h ^ b[k]) * 1099511628211ull;
        }
    }
    free(host);
    char hex[24];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    dpmem_meta("comm.params_hash", hex);
    if (comm_check_same(&g_comm, (long long)h, "the parameters after training (every rank must hold the same model)")) return -1;
    if (!s->cfg->quiet) printf("all %d ranks hold identical parameters (hash %s)\n", g_comm.world, hex);
    return 0;
}
