/* dist.c — the ranks' collectives on backend buffers, the bucket and its rounds (see dist.h). Not here:
   which tensors (shard.c: the slices; grad_reduce.c: the gradients; dp_sgd.c: LoRA's). */
#include "dist.h"
#include "dpmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static DistSettings settings_from_env(void) {
    DistSettings st;
    const char *e = getenv("DPMEM_COMM_BUCKET_MB");
    long mb = e && *e ? atol(e) : 16;
    if (mb < 1) mb = 1;
    st.bucket_floats = (size_t)mb * (1u << 20) / sizeof(float);
    e = getenv("DPMEM_COMM_OVERLAP");
    st.overlap = !(e && *e == '0');
    e = getenv("DPMEM_ZERO3_PREFETCH");
    st.zero3_prefetch = !(e && *e == '0');
    return st;
}

void dist_init(Dist *d, KBackend *kb, LlamaModel *m, int zero, int grad_accum, double *comm_s) {
    memset(d, 0, sizeof *d);
    d->kb = kb; d->model = m; d->zero = zero; d->grad_accum = grad_accum; d->comm_s = comm_s;
    d->set = settings_from_env();
}

void dist_time(const Dist *d, uint64_t t0) {
    if (d->comm_s) *d->comm_s += (double)(dpmem_now_ns() - t0) * 1e-9;
}

/* A device buffer's collective where no NCCL is linked: -1 with the error; else 0. */
static int no_nccl(Dist *d, const char *what) {
    if (d->kb->space == 0 || comm_device_start) return 0;
    snprintf(d->kb->err, sizeof d->kb->err, "%s: this program has no NCCL for device buffers (build with the CUDA toolkit's NCCL)", what);
    return -1;
}

int dist_allgatherv_start(Dist *d, void *buf, const size_t *lo, const size_t *len, size_t elem, const char *what, CommRequest *r) {
    memset(r, 0, sizeof *r);
    if (no_nccl(d, what)) return -1;
    return d->kb->space == 0 ? comm_allgatherv_start(&g_comm, buf, lo, len, elem, what, r)
                             : comm_device_allgatherv_start(&g_comm, buf, lo, len, elem, what, r);
}

int dist_collective(Dist *d, CommOp op, void *buf, size_t count, const char *what, CommRequest *r) {
    if (r) memset(r, 0, sizeof *r);
    if (no_nccl(d, what)) return -1;
    if (d->kb->space != 0) {
        CommRequest own;
        if (comm_device_start(&g_comm, op, buf, count, what, r ? r : &own)) return -1;
        return r ? 0 : comm_request_wait(&g_comm, &own);
    }
    if (r && (op == COMM_ALLREDUCE || op == COMM_REDUCE_SCATTER))
        return op == COMM_ALLREDUCE ? comm_allreduce_start(&g_comm, buf, count, what, r) : comm_reduce_scatter_start(&g_comm, buf, count, what, r);
    if (r) { snprintf(d->kb->err, sizeof d->kb->err, "%s: no non-blocking host collective of this kind", what); return -1; }
    switch (op) {
    case COMM_ALLREDUCE:      return comm_allreduce_float(&g_comm, buf, count, what);
    case COMM_REDUCE_SCATTER: return comm_reduce_scatter_float(&g_comm, buf, count, what);
    case COMM_ALLGATHER:      return comm_allgather_float(&g_comm, buf, count, what);
    case COMM_ALLGATHER_BF16: return comm_allgather_bf16(&g_comm, buf, count, what);
    }
    return -1;
}

int dist_bucket_alloc(Dist *d, size_t floats, const char *tag) {
    d->bucket_n = floats;
    return (d->bucket = kbuf_alloc(d->kb, floats * sizeof(float), tag)) ? 0 : -1;
}

int dist_bucket_prepare(Dist *d) {
    if (g_comm.world <= 1 || d->bucket) return 0;
    const LlamaModel *m = d->model;
    size_t total = 0;
    for (int i = 0; i < m->n_params; i++) total += m->params[i].trainable ? m->params[i].numel : 0;
    if (total == 0) return 0;   /* LoRA: the adapters' sum allocates it when it first runs */
    return dist_bucket_alloc(d, total < d->set.bucket_floats ? total : d->set.bucket_floats, "comm/allreduce_bucket");
}

void dist_bucket_free(Dist *d) {
    kbuf_free(d->kb, d->bucket);
    d->bucket = NULL;
    d->bucket_n = 0;
}

size_t dist_slice0(size_t n, int world) {
    size_t lo, len;
    llama_slice(n, world, 0, &lo, &len);
    return len;
}

int dist_round_add(DistRound *r, int i, size_t n, size_t *a) {
    const size_t len0 = r->world > 1 ? dist_slice0(n, r->world) : n;
    const size_t k = r->cap - r->used < len0 - *a ? r->cap - r->used : len0 - *a;
    r->pc[r->n++] = (DistPiece){ i, n, *a, k, r->used };
    r->used += k; *a += k;
    return r->used == r->cap || r->n == r->max;
}

int dist_round_move(Dist *d, const DistRound *r, void *b, KDtype dt, int ranks, const DistSide *t, int pack) {
    if (!kbackend_computes(d->kb)) return 0;
    for (int q = 0; q < r->world; q++) {
        if (!(ranks & (q == r->rank ? DIST_OWN : DIST_OTHERS))) continue;
        for (int k = 0; k < r->n; k++) {
            const DistPiece *p = &r->pc[k];
            size_t lo = 0, len = p->n;
            if (r->world > 1) llama_slice(p->n, r->world, q, &lo, &len);
            if (p->a >= len) continue;
            const size_t n = len - p->a < p->k ? len - p->a : p->k;
            void *x = t->at(t->user, p->i, q, lo);
            if (!x) continue;
            float *xt = t->how == DIST_DOWNLOAD ? (float *)((char *)x + p->a * KDT_SIZE(dt)) : kact_at(x, p->a, dt);
            float *bt = kact_at(b, (size_t)q * r->used + p->at, dt);
            int rc;
            if (!pack && t->how == DIST_DOWNLOAD) rc = kbuf_download(d->kb, xt, bt, n * KDT_SIZE(dt));
            else if (!pack && t->how == DIST_ADD) rc = add_inplace(d->kb, xt, bt, n);
            else if (dt == KDT_F32) rc = copy_buffer(d->kb, pack ? bt : xt, pack ? xt : bt, n);
            else rc = copy_ex(d->kb, dt, pack ? bt : xt, pack ? xt : bt, n);
            if (rc) return -1;
        }
    }
    return 0;
}

int dist_rounds(Dist *d, const DistRounds *sp) {
    if (!kbackend_computes(d->kb)) return 0;
    const uint64_t t0 = dpmem_now_ns();
    DistRound r = { .max = sp->max, .cap = sp->cap, .world = sp->world, .rank = sp->world > 1 ? g_comm.rank : 0 };
    if (!(r.pc = malloc((size_t)sp->max * sizeof *r.pc))) {
        snprintf(d->kb->err, sizeof d->kb->err, "out of host memory (%s)", sp->what);
        return -1;
    }
    int i = 0, rc = 0;
    size_t a = 0;
    while (rc == 0) {
        r.n = 0; r.used = 0;
        while (i < sp->count) {   /* the round: as much as fits of the items from i, position a on */
            const size_t n = sp->items(sp->user, i);
            if (n == 0 || a >= (sp->world > 1 ? dist_slice0(n, sp->world) : n)) { i++; a = 0; continue; }
            if (dist_round_add(&r, i, n, &a)) break;
        }
        if (r.used == 0) break;
        rc = dist_round_move(d, &r, d->bucket, sp->dt, sp->in_ranks, &sp->in, 1);
        if (rc == 0) rc = dist_collective(d, sp->op, d->bucket, r.used, sp->what, NULL);
        if (rc == 0 && sp->out.at) rc = dist_round_move(d, &r, d->bucket, sp->dt, sp->out_ranks, &sp->out, 0);
    }
    free(r.pc);
    dist_time(d, t0);
    return rc;
}

int dist_sum_host(Dist *d, double *v, int n, const char *what) {
    if (g_comm.world <= 1 || !kbackend_computes(d->kb)) return 0;
    const uint64_t t0 = dpmem_now_ns();
    const int rc = comm_allreduce_double(&g_comm, v, (size_t)n, what);
    dist_time(d, t0);
    return rc;
}

/* ---- the bucketed list all-reduce ---------------------------------------------------------------------- */

typedef struct { float *const *bufs; const size_t *ns; } List;
static size_t list_item(void *user, int i) { const List *l = user; return l->bufs[i] ? l->ns[i] : 0; }
static void *list_at(void *user, int i, int r, size_t lo) { (void)r; (void)lo; return ((const List *)user)->bufs[i]; }

int dist_allreduce(Dist *d, float *const *bufs, const size_t *ns, int count, const char *what) {
    if (g_comm.world <= 1) return 0;
    DPMEM_SCOPE("allreduce");
    size_t total = 0;
    for (int i = 0; i < count; i++) total += bufs[i] ? ns[i] : 0;
    if (total == 0) return 0;
    if (!d->bucket && dist_bucket_alloc(d, total < d->set.bucket_floats ? total : d->set.bucket_floats, "comm/allreduce_bucket")) return -1;
    List l = { bufs, ns };
    const DistRounds sp = { COMM_ALLREDUCE, what, KDT_F32, 1, d->bucket_n, count, count, list_item, &l, DIST_ALL, DIST_ALL,
                            { list_at, &l, DIST_COPY }, { list_at, &l, DIST_COPY } };
    return dist_rounds(d, &sp);
}
