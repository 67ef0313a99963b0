/* cost.c — the plan's time ledger: each op's FLOPs and bytes at its shapes, per phase (cost.h). */
#include "cost.h"

#include "dpmem.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const kcost_phase_names[KC_PH_N] = { "data", "forward", "loss", "backward", "clip", "noise",
                                                 "optimizer_step", "zero_grad", "allreduce", "other" };

void kcost_ledger_init(KCostLedger *l) { memset(l, 0, sizeof *l); l->last_n = -1; }

void kcost_ledger_free(KCostLedger *l) {
    free(l->e);
    free(l->slot);
    memset(l, 0, sizeof *l);
}

/* the scope names that are phases: the table's, then the collectives' own, "step" last */
static void intern_ids(KCostLedger *l) {
    static const char *const extra[] = { "reduce_scatter", "all_gather" };
    for (int i = 0; i < KC_PH_OTHER; i++) l->ids[i] = dpmem_intern(kcost_phase_names[i]);
    for (int i = 0; i < 2; i++) l->ids[KC_PH_OTHER + i] = dpmem_intern(extra[i]);
    l->ids[15] = dpmem_intern("step");
    l->ids_ready = 1;
}

int kcost_phase_now(KCostLedger *l) {
    if (!l->ids_ready) intern_ids(l);
    uint32_t st[KCOST_STACK];
    const int n = dpmem_scope_stack(st, KCOST_STACK);
    int same_stack = n == l->last_n;
    for (int i = n - 1; same_stack && i >= 0; i--) same_stack = st[i] == l->last_stack[i];
    if (same_stack) return l->last_phase;   /* as the last op's */
    int in_step = 0, ph = -1;
    for (int i = n - 1; i >= 0 && !in_step; i--) {   /* innermost first: the first phase scope wins */
        in_step = st[i] == l->ids[15];
        for (int k = 0; ph < 0 && k < KC_PH_OTHER + 2; k++)
            if (st[i] == l->ids[k]) ph = k >= KC_PH_OTHER ? KC_PH_ALLREDUCE : k;
    }
    l->last_n = n;
    memcpy(l->last_stack, st, (size_t)n * sizeof *st);
    l->last_phase = !in_step ? -1 : ph < 0 ? KC_PH_OTHER : ph;
    return l->last_phase;
}

static unsigned long long hash_entry(int kind, int phase, const int *key, double flops, double bytes) {
    unsigned long long h = 1469598103934665603ull;
    const unsigned long long v[4] = { (unsigned)kind, (unsigned)phase, (unsigned long long)flops, (unsigned long long)bytes };
    for (int i = 0; i < 4; i++) h = (h ^ v[i]) * 1099511628211ull;
    for (int i = 0; i < 8; i++) h = (h ^ (unsigned)key[i]) * 1099511628211ull;
    h ^= h >> 33; h *= 0xff51afd7ed558ccdull; h ^= h >> 33;   /* the slot takes the low bits: mix the high ones in */
    return h;
}

static int same(const KCostEntry *e, int kind, int phase, const int *key, double flops, double bytes) {
    if (e->kind != kind || e->phase != phase || e->flops != flops || e->bytes != bytes) return 0;
    for (int i = 0; i < 8; i++)   /* (a loop: memcmp's call costs more than the 8 ints) */
        if (e->key[i] != key[i]) return 0;
    return 1;
}

static int grow(KCostLedger *l) {
    const int cap = l->cap ? 2 * l->cap : 256;
    KCostEntry *e = realloc(l->e, (size_t)cap * sizeof *e);
    int *slot = malloc((size_t)cap * 2 * sizeof *slot);
    if (!e || !slot) { if (e) l->e = e; free(slot); return -1; }
    l->e = e; l->cap = cap;
    free(l->slot);
    l->slot = slot; l->n_slot = cap * 2;
    for (int i = 0; i < l->n_slot; i++) slot[i] = -1;
    for (int i = 0; i < l->n; i++) {
        const KCostEntry *x = &l->e[i];
        unsigned long long h = hash_entry(x->kind, x->phase, x->key, x->flops, x->bytes);
        int s = (int)(h & (unsigned long long)(l->n_slot - 1));
        while (slot[s] >= 0) s = (s + 1) & (l->n_slot - 1);
        slot[s] = i;
    }
    return 0;
}

void kcost_record(KCostLedger *l, KCostKind kind, const int *key, double flops, double bytes, double n) {
    if (!l || n <= 0) return;
    const int phase = kcost_phase_now(l);
    if (phase >= 0) kcost_record_at(l, phase, kind, key, flops, bytes, n);
}

void kcost_record_at(KCostLedger *l, int phase, KCostKind kind, const int *key, double flops, double bytes, double n) {
    if (!l || n <= 0 || phase < 0 || phase >= KC_PH_N) return;
    int k[8] = { 0 };
    if (key) memcpy(k, key, sizeof k);
    if (l->n >= l->cap && grow(l)) return;   /* (out of host memory: the entry is lost) */
    unsigned long long h = hash_entry((int)kind, phase, k, flops, bytes);
    int s = (int)(h & (unsigned long long)(l->n_slot - 1));
    while (l->slot[s] >= 0) {
        KCostEntry *e = &l->e[l->slot[s]];
        if (same(e, (int)kind, phase, k, flops, bytes)) { e->calls += n; return; }
        s = (s + 1) & (l->n_slot - 1);
    }
    KCostEntry *e = &l->e[l->n];
    e->kind = (int)kind; e->phase = phase; memcpy(e->key, k, sizeof k);
    e->flops = flops; e->bytes = bytes; e->calls = n;
    l->slot[s] = l->n++;
}

/* ---- the formulas ------------------------------------------------------------------------------ */
void kcost_gemm(KCostLedger *l, int ta, int tb, int M, int N, int K, int batch, int ab_size, int c_size, int beta_nonzero) {
    if (!l || M <= 0 || N <= 0 || batch <= 0) return;
    const double m = M, n = N, k = K > 0 ? K : 0, b = batch;
    const int key[8] = { ta, tb, M, N, K, batch, ab_size, 0 };
    kcost_record(l, KC_GEMM, key, 2 * m * n * k * b, ((m * k + k * n) * ab_size + m * n * c_size * (1 + (beta_nonzero != 0))) * b, 1);
}

void kcost_attention(KCostLedger *l, int backward, int B, int T, int NH, int NKV, int HS, int elem) {
    if (!l || B <= 0 || T <= 0) return;
    /* causal: T(T+1)/2 (query, key) pairs per head; forward QKᵀ and PV (2 GEMMs, 2·HS flops a pair each)
       and the softmax's exp; backward recomputes S and P and runs 5 GEMMs (2.5 forwards) */
    const double pairs = (double)B * NH * T * (T + 1) / 2.0;
    const double flops = pairs * (backward ? 10.0 * HS + 3 : 4.0 * HS + 2);
    const double q = (double)B * T * NH * HS, kv = (double)B * T * NKV * HS, lse = (double)B * NH * T * 4;
    const double bytes = backward ? (3 * q + 2 * kv) * elem + (q + 2 * kv) * elem + lse   /* q, o, do, k, v; dq, dk, dv */
                                  : (q + 2 * kv) * elem + q * elem + lse;                 /* q, k, v; o, lse */
    const int key[8] = { B, T, NH, NKV, HS, elem, 0, 0 };
    kcost_record(l, backward ? KC_ATTN_B : KC_ATTN_F, key, flops, bytes, 1);
}

void kcost_elementwise(KCostLedger *l, size_t n, int reads, int writes, int elem, double flops_per) {
    if (!l || n == 0) return;
    kcost_record(l, KC_MEM, NULL, flops_per * (double)n, (double)n * (reads + writes) * elem, 1);
}

void kcost_bytes(KCostLedger *l, double bytes) {
    if (l) kcost_record(l, KC_MEM, NULL, 0, bytes, 1);
}

void kcost_loop(KCostLedger *l, double flops, double bytes) {
    if (l) kcost_record(l, KC_LOOP, NULL, flops, bytes, 1);
}

/* what each named op moves and computes an element, at fp32: the formulas the plan backend used inline */
const KCostOpInfo kcost_op_info[KCO_N] = {
    [KCO_OTHER] = { "other", KC_MEM, 0, 0 },
    [KCO_FILL] = { "fill", KC_MEM, 4, 0 },            [KCO_COPY] = { "copy", KC_MEM, 8, 0 },
    [KCO_ADD] = { "add", KC_MEM, 12, 1 },             [KCO_SCALE] = { "scale", KC_MEM, 8, 1 },
    [KCO_REDUCE] = { "reduce", KC_MEM, 4, 2 },        /* sum, sumsq, count_nonfinite */
    [KCO_EMB_F] = { "embedding_forward", KC_MEM, 8, 0 }, [KCO_EMB_B] = { "embedding_backward", KC_MEM, 12, 1 },
    [KCO_RMS_F] = { "rmsnorm_forward", KC_MEM, 8, 4 }, [KCO_RMS_B] = { "rmsnorm_backward", KC_MEM, 16, 8 },
    [KCO_ROPE] = { "rope", KC_MEM, 8, 3 },            /* forward and backward alike */
    [KCO_SWI_F] = { "swiglu_forward", KC_MEM, 12, 5 }, [KCO_SWI_B] = { "swiglu_backward", KC_MEM, 20, 10 },
    [KCO_CE_F] = { "crossentropy_forward", KC_LOOP, 4, 3 },   /* an element: one logit */
    [KCO_CE_B] = { "crossentropy_backward", KC_LOOP, 8, 4 },
    [KCO_ADAMW] = { "adamw", KC_MEM, 28, 15 },        [KCO_SGD] = { "sgd", KC_MEM, 12, 3 },
    [KCO_WIDEN] = { "widen", KC_MEM, 6, 0 },          [KCO_NARROW] = { "narrow", KC_MEM, 6, 0 },   /* bf16 <-> fp32 */
    [KCO_NOISE] = { "noise", KC_LOOP, 8, 40 },        /* Philox + Box-Muller, g read and written */
    [KCO_NOISY_ADAMW] = { "noisy_adamw", KC_LOOP, 28, 55 },   /* the fused update: the noise inside AdamW's pass */
};

static double op_elem_bytes(int op, int elem) {
    const double b = kcost_op_info[op].bytes;
    return op == KCO_WIDEN || op == KCO_NARROW || elem >= 4 ? b : b * elem / 4.0;
}

void kcost_op(KCostLedger *l, KCostOp op, int elem, size_t rows, int inner, int extra) {
    if (!l || rows == 0 || inner <= 0 || op <= KCO_OTHER || op >= KCO_N) return;
    const int key[8] = { (int)op, elem, rows > INT_MAX ? INT_MAX : (int)rows, inner, extra, 0, 0, 0 };
    const double n = (double)rows * inner;
    kcost_record(l, (KCostKind)kcost_op_info[op].kind, key, kcost_op_info[op].flops * n, op_elem_bytes(op, elem) * n, 1);
}

double kcost_op_elements(const KCostEntry *e) {
    if ((e->kind != KC_MEM && e->kind != KC_LOOP) || e->key[0] <= KCO_OTHER || e->key[0] >= KCO_N) return 0;
    const double b = op_elem_bytes(e->key[0], e->key[1]);
    return b > 0 ? e->bytes / b : 0;
}

double kcost_comm_bytes(int kind, double bytes, int ranks) {
    if (ranks <= 1) return 0;
    const double f = (double)(ranks - 1) / ranks;
    return kind == KC_ALLREDUCE ? 2 * f * bytes : f * bytes;
}

void kcost_comm(KCostLedger *l, int phase, int kind, double bytes, int ranks, int calls) {
    if (!l || ranks <= 1 || bytes <= 0) return;
    if (calls < 1) calls = 1;
    const int key[8] = { kind, ranks, 0, 0, 0, 0, 0, 0 };
    kcost_record_at(l, phase, KC_COMM, key, 0, kcost_comm_bytes(kind, bytes / calls, ranks), calls);
}

/* ---- the DP kernels ---------------------------------------------------------------------------- */
/* the parts of a DP kernel's call (KC_DP), each as a GEMM or a pass would record it: kind, flops, bytes, and
   for a GEMM its operands' element size */
typedef struct { int kind, elem; double flops, bytes; } DpPart;
static int dp_parts(const int *key, DpPart part[3]) {
    const int way = key[0], B = key[1], T = key[2], IC = key[3], OC = key[4], R = key[5], elem = key[6];
    const double b = B, t = T, ic = IC, oc = OC;
    switch (way) {
        case KCD_DIRECT:   /* psg_b = G_bᵀ A_b [OC, IC], then Σ psg² */
            part[0] = (DpPart){ KC_GEMM, elem, 2 * oc * ic * t * b, ((oc * t + t * ic) * elem + oc * ic * 4) * b };
            part[1] = (DpPart){ KC_MEM, 4, 2 * b * ic * oc, b * ic * oc * 4 };
            return 2;
        case KCD_GHOST:    /* A_b A_bᵀ and G_b G_bᵀ (syrk: the lower half), then ⟨·,·⟩ over T×T */
            part[0] = (DpPart){ KC_GEMM, elem, b * t * t * ic, b * t * ic * elem + b * t * t * 4 };
            part[1] = (DpPart){ KC_GEMM, elem, b * t * t * oc, b * t * oc * elem + b * t * t * 4 };
            part[2] = (DpPart){ KC_MEM, 4, 2 * b * t * t, b * t * t * 2 * 4 };
            return 3;
        case KCD_FLASH: {  /* tile pairs j ≤ i of R rows (R ≥ T: one), each a_i a_jᵀ and g_i g_jᵀ and their dot, on chip */
            const double r = R > 0 && R < T ? R : T, nt = ceil(t / r), pairs = nt * (nt + 1) / 2;
            part[0] = (DpPart){ KC_GEMM, elem, b * pairs * (2.0 * r * r * (ic + oc) + 2.0 * r * r), b * t * (ic + oc) * elem * nt };
            return 1;
        }
        default:           /* KCD_BK: dW += Σ_b c_b G_bᵀ A_b, C read and written */
            part[0] = (DpPart){ KC_GEMM, elem, 2 * oc * ic * t * b, ((oc * t + t * ic) * elem + oc * ic * 4 * 2) * b };
            return 1;
    }
}

static void record_dp(KCostLedger *l, int way, int B, int T, int IC, int OC, int R, int elem) {
    if (!l || B <= 0 || T <= 0) return;
    const int key[8] = { way, B, T, IC, OC, way == KCD_FLASH ? (R > 0 && R < T ? R : T) : 0, elem, 0 };
    DpPart part[3];
    double flops = 0, bytes = 0;
    for (int i = 0, n = dp_parts(key, part); i < n; i++) { flops += part[i].flops; bytes += part[i].bytes; }
    kcost_record(l, KC_DP, key, flops, bytes, 1);
}

void kcost_dp_linear_norms(KCostLedger *l, int way, int B, int T, int IC, int OC, int R, int elem) {
    record_dp(l, way == 0 ? KCD_DIRECT : way == 1 ? KCD_GHOST : KCD_FLASH, B, T, IC, OC, R, elem);
}

void kcost_dp_clipped_bk(KCostLedger *l, int B, int T, int IC, int OC, int elem) {
    record_dp(l, KCD_BK, B, T, IC, OC, 0, elem);
}

void kcost_dp_clipped_sum(KCostLedger *l, int B, size_t P) {
    if (!l) return;
    kcost_record(l, KC_MEM, NULL, 2.0 * B * (double)P, ((double)B + 2) * (double)P * 4, 1);   /* psg read; dW read, written */
}

/* ---- prediction -------------------------------------------------------------------------------- */
/* The measured time of one call of e's shape: exact, or scaled from a measured shape that differs in one
   size alone where the time is linear in it (a GEMM's M, N, K or batch; attention's batch), the nearest
   such; < 0 when there is none. */
/* a named op: the same op, row length and extra at the nearest rows, scaled by the elements */
static double timed_op_seconds(const KCostProfile *p, const KCostEntry *e) {
    const double n = kcost_op_elements(e);
    double best = -1, dist = 0;
    for (int i = 0; i < p->n_timed; i++) {
        const KCostTimed *t = &p->timed[i];
        if (t->kind != e->kind || t->key[0] != e->key[0] || t->key[1] != e->key[1] || t->key[3] != e->key[3] ||
            t->key[4] != e->key[4] || t->key[2] <= 0)
            continue;
        if (t->key[2] == e->key[2]) return t->seconds;
        const double r = n / ((double)t->key[2] * t->key[3]), d = r > 1 ? r : 1 / r;
        if (best < 0 || d < dist) { best = t->seconds * r; dist = d; }
    }
    return best;
}

double kcost_timed_seconds(const KCostProfile *p, const KCostEntry *e) {
    if (kcost_op_elements(e) > 0) return timed_op_seconds(p, e);
    double best = -1, dist = 0;
    for (int i = 0; i < p->n_timed; i++) {
        const KCostTimed *t = &p->timed[i];
        if (t->kind != e->kind) continue;
        if (!memcmp(t->key, e->key, sizeof e->key)) return t->seconds;
        int differ = -1, n = 0;
        for (int k = 0; k < 8; k++)
            if (t->key[k] != e->key[k]) { differ = k; n++; }
        const int linear = e->kind == KC_GEMM ? differ >= 2 && differ <= 5
                         : e->kind == KC_DP ? differ == 1
                         : (e->kind == KC_ATTN_F || e->kind == KC_ATTN_B) && differ == 0;
        if (n != 1 || !linear || t->key[differ] <= 0) continue;
        const double r = (double)e->key[differ] / t->key[differ], d = r > 1 ? r : 1 / r;
        if (best < 0 || d < dist) { best = t->seconds * r; dist = d; }
    }
    return best;
}

double kcost_entry_seconds(const KCostProfile *p, const KCostEntry *e) {
    const double t = kcost_timed_seconds(p, e);
    if (t >= 0) return t * e->calls;
    const double n = kcost_op_elements(e);   /* a named op the profile measured: its time an element */
    if (n > 0 && p->op_s[e->key[0]] > 0) return e->calls * (p->call_s + n * p->op_s[e->key[0]]);
    if (e->kind == KC_DP) {   /* its parts, each by its roofline */
        DpPart part[3];
        double sec = 0;
        for (int i = 0, n = dp_parts(e->key, part); i < n; i++) {
            const double rate = part[i].kind == KC_GEMM ? p->gemm_rate[part[i].elem == 2] : 0;
            const double compute = rate > 0 ? part[i].flops / rate : 0, memory = p->mem_bw > 0 ? part[i].bytes / p->mem_bw : 0;
            sec += (compute > memory ? compute : memory) + (part[i].kind == KC_GEMM ? p->gemm_call_s : p->call_s);
        }
        return e->calls * sec;
    }
    const int bf16 = (e->kind == KC_GEMM ? e->key[6] : e->key[5]) == 2;
    double rate = p->loop_rate, call = p->call_s;
    switch (e->kind) {
        case KC_GEMM: rate = p->gemm_rate[bf16]; call = p->gemm_call_s; break;
        case KC_ATTN_F: case KC_ATTN_B: rate = p->attn_rate[bf16]; break;
        case KC_MEM: rate = 0; break;
        case KC_COMM: return e->calls * (p->link_s + (p->link_bw > 0 ? e->bytes / p->link_bw : 0));
        default: break;
    }
    const double compute = rate > 0 ? e->flops / rate : 0, memory = p->mem_bw > 0 ? e->bytes / p->mem_bw : 0;
    return e->calls * ((compute > memory ? compute : memory) + call);
}

double kcost_predict(const KCostProfile *p, const KCostLedger *l, double ph[KC_PH_N]) {
    double tmp[KC_PH_N], total = 0, comm[KC_PH_N] = { 0 };
    if (!ph) ph = tmp;
    for (int i = 0; i < KC_PH_N; i++) ph[i] = 0;
    for (int i = 0; i < l->n; i++) {
        const double s = kcost_entry_seconds(p, &l->e[i]);
        if (l->e[i].kind == KC_COMM) comm[l->e[i].phase] += s;
        ph[l->e[i].phase] += s;
    }
    int ranks = 0;
    double compute = 0;
    for (int i = 0; i < KC_PH_N; i++) { ranks = ranks || comm[i] > 0; compute += ph[i] - comm[i]; }
    /* the collectives inside the forward and the backward (buckets sent as the backward finishes them,
       --zero 3's prefetched gathers) run beside its compute: the share comm_overlap of them is hidden,
       never more than that phase's compute */
    for (int k = KC_PH_FORWARD; k <= KC_PH_BACKWARD; k++) {
        if (k == KC_PH_LOSS || comm[k] <= 0) continue;
        double hide = comm[k] * p->comm_overlap, compute = ph[k] - comm[k];
        if (hide > compute) hide = compute;
        ph[k] -= hide;
    }
    /* with collectives, every rank waits at them for the slowest: its extra compute shows as waiting there */
    if (ranks && p->rank_skew > 1) ph[KC_PH_ALLREDUCE] += (p->rank_skew - 1) * compute;
    for (int i = 0; i < KC_PH_N; i++) total += ph[i];
    return total;
}

void kcost_totals(const KCostLedger *l, double flops[KC_PH_N], double bytes[KC_PH_N]) {
    for (int i = 0; i < KC_PH_N; i++) { if (flops) flops[i] = 0; if (bytes) bytes[i] = 0; }
    for (int i = 0; i < l->n; i++) {
        if (flops) flops[l->e[i].phase] += l->e[i].flops * l->e[i].calls;
        if (bytes) bytes[l->e[i].phase] += l->e[i].bytes * l->e[i].calls;
    }
}
