/* cost.h — the time a planned step takes: what each op of the plan costs (FLOPs, bytes read and
   written, calls), summed per phase of the trainer's table, and a device profile that turns those
   into seconds.

   THE LEDGER. The plan backend (backend_plan.c) records every op it is asked to run, at its real
   shapes, into the KCostLedger hung on the backend (KBackend.cost; NULL: nothing recorded, the plan
   costs what it did). Each record goes to the phase of the innermost open dpmem scope that names one
   (data, forward, loss, backward, clip, noise, optimizer_step, zero_grad, allreduce, as the trainer's
   table; reduce_scatter and all_gather count as allreduce; "recompute" is inside backward); ops
   outside a "step" scope (building the model, initialising it) are not recorded. Records of the
   same kind, shape and phase are merged (a count), so a plan's ledger holds a few hundred entries.

   WHAT AN OP COSTS. flops: multiply-adds count 2; exp, division, sqrt count 1 (a roofline, not an
   instruction count). bytes: each operand read once and each output written once, at its storage
   type (what a GPU kernel moves to and from global memory; caches are not modelled). The formulas
   are kcost_* below, one per op; tests/test_plan_cost.c checks them on known shapes.

   THE TIME OF AN OP (kcost_predict): the roofline, max(flops / rate, bytes / bandwidth), plus the
   profile's per-call overhead, where rate depends on the kind: GEMMs (and the GEMMs inside the DP
   norm kernels), attention, and the other compute loops each have their own. A profile with
   measured shapes (the CPU's, kernels/plan/profile.c) uses the measured time of a GEMM or attention
   call at exactly that shape instead. A collective costs its ring bytes over the link (kcost_comm).

   Not here: the profiles and the CPU's calibration (profile.c), the trainer's report (samples/llama/
   plan_time.c). */
#ifndef KCOST_H
#define KCOST_H

#include <stddef.h>

/* What limits an op. */
typedef enum {
    KC_GEMM = 0,    /* a (batched) GEMM: key = transA, transB, M, N, K, batch, operand type */
    KC_ATTN_F,      /* attention forward: key = B, T, NH, NKV, HS, storage type */
    KC_ATTN_B,      /* attention backward: the same key */
    KC_LOOP,        /* a compute loop of the project's own (cross-entropy's exp, the DP tiles): loop rate */
    KC_MEM,         /* element-wise, copies, norms, the optimizer: memory bound */
    KC_COMM,        /* a collective: bytes over the link (flops = 0; key[0] = the kind, key[1] = ranks) */
    KC_DP,          /* a DP kernel on a linear layer (kernels/dp_kernels.h): key = KCostDpWay, B, T, IC, OC, R, elem */
    KC_KINDS
} KCostKind;

/* The phases of the trainer's table (samples/llama/train.h's TrainPhase order), then the rest of the step. */
enum { KC_PH_DATA, KC_PH_FORWARD, KC_PH_LOSS, KC_PH_BACKWARD, KC_PH_CLIP, KC_PH_NOISE, KC_PH_OPTIMIZER,
       KC_PH_ZERO_GRAD, KC_PH_ALLREDUCE, KC_PH_OTHER, KC_PH_N };
extern const char *const kcost_phase_names[KC_PH_N];

/* Collectives (KC_COMM's key[0]). */
enum { KC_ALLREDUCE = 0, KC_REDUCE_SCATTER = 1, KC_ALLGATHER = 2 };

typedef struct KCostEntry {
    int kind, phase;
    int key[8];              /* the shape, for the kinds that are timed by shape */
    double flops, bytes;     /* of one call */
    double calls;
} KCostEntry;

enum { KCOST_STACK = 64 };   /* scope depth looked at */
typedef struct KCostLedger {
    KCostEntry *e;
    int n, cap;
    int *slot; int n_slot;   /* open-addressing index into e (n_slot a power of two) */
    unsigned ids[16];        /* dpmem_intern ids of the phase scopes, and of "step" (ids[15]) */
    int ids_ready;
    unsigned last_stack[KCOST_STACK]; int last_n, last_phase;   /* the scope stack of the last record, its phase */
    int steps;               /* "step" scopes the plan ran (the caller sets it) */
    /* Who times the KC_DP entries and the fused noisy_adamw on the CPU (the DP layer, which links its
       kernels; NULL: the roofline, and noisy_adamw as its noise and AdamW halves): seconds of one call of
       e's shape, or < 0. */
    double (*bench_dp)(const struct KCostEntry *e, int nthreads);
} KCostLedger;

void kcost_ledger_init(KCostLedger *l);
void kcost_ledger_free(KCostLedger *l);
/* Records n calls of one op at the current phase (nothing outside a "step" scope). key: 8 ints or NULL. */
void kcost_record(KCostLedger *l, KCostKind kind, const int *key, double flops, double bytes, double n);
/* The same at a given phase, in or out of a step (the trainer's collectives, which a plan does not run). */
void kcost_record_at(KCostLedger *l, int phase, KCostKind kind, const int *key, double flops, double bytes, double n);
/* The phase the calling thread is in now (KC_PH_*), or -1 outside a "step" scope. */
int kcost_phase_now(KCostLedger *l);

/* ---- the cost formulas, per call (tests/test_plan_cost.c) ------------------------------------ */
/* C[M,N] = op(A) op(B) (+ beta C), batch times, operands ab_size bytes an element, output c_size */
void kcost_gemm(KCostLedger *l, int ta, int tb, int M, int N, int K, int batch, int ab_size, int c_size, int beta_nonzero);
void kcost_attention(KCostLedger *l, int backward, int B, int T, int NH, int NKV, int HS, int elem);
/* a pass over n elements: reads `reads` arrays and writes `writes` arrays of elem bytes each,
   flops_per a floating-point operations per element */
void kcost_elementwise(KCostLedger *l, size_t n, int reads, int writes, int elem, double flops_per);
/* a memory-bound pass of `bytes` in all (conversions, byte copies) */
void kcost_bytes(KCostLedger *l, double bytes);
/* a compute loop of the project's own: flops and bytes given */
void kcost_loop(KCostLedger *l, double flops, double bytes);

/* The backend's element-wise ops and loops by name (a KC_MEM or KC_LOOP entry's key[0]; 0: any other
   pass, the calls above). kcost_op records one over rows × inner elements (inner: the row a kernel works
   on, rmsnorm's and the embedding's C, cross-entropy's V, RoPE's NH·HS with extra = HS; 1 for a flat
   pass) at its storage type (elem bytes: 4, or 2 for the bf16 entries), with the traffic and flops an
   element of kcost_op_info; key = { op, elem, rows (INT_MAX when larger), inner, extra }. A GPU profile
   costs them by the roofline as any pass; the CPU's times each at its sizes (its own kernel, operands
   out of cache, as for the GEMMs), since the loops of rmsnorm, RoPE or AdamW run far from the streaming
   bandwidth, and a tensor under the backend's threshold runs on one thread. */
typedef enum {
    KCO_OTHER = 0, KCO_FILL, KCO_COPY, KCO_ADD, KCO_SCALE, KCO_REDUCE, KCO_EMB_F, KCO_EMB_B, KCO_RMS_F, KCO_RMS_B,
    KCO_ROPE, KCO_SWI_F, KCO_SWI_B, KCO_CE_F, KCO_CE_B, KCO_ADAMW, KCO_SGD, KCO_WIDEN, KCO_NARROW, KCO_NOISE,
    KCO_NOISY_ADAMW, KCO_N
} KCostOp;
typedef struct {
    const char *name;
    int kind;          /* KC_MEM or KC_LOOP */
    double bytes;      /* read and written an element at fp32 (halved for elem 2, except widen and narrow: 6) */
    double flops;      /* an element */
} KCostOpInfo;
extern const KCostOpInfo kcost_op_info[KCO_N];
void kcost_op(KCostLedger *l, KCostOp op, int elem, size_t rows, int inner, int extra);
/* the elements an entry of a named op was recorded for (its bytes over the bytes an element); 0 for others */
double kcost_op_elements(const KCostEntry *e);
/* a collective of `bytes` (each rank's buffer) over `ranks` ranks: ring traffic per rank
   2(N-1)/N·S for an all-reduce, (N-1)/N·S for a reduce-scatter or an all-gather of S in all */
double kcost_comm_bytes(int kind, double bytes, int ranks);
/* ... in `calls` collectives of bytes/calls each (a bucket, a unit), at a phase */
void kcost_comm(KCostLedger *l, int phase, int kind, double bytes, int ranks, int calls);

/* ---- the DP kernels (kernels/dp_kernels.h), at their shapes --------------------------------- */
/* KC_DP's key[0]: the kernel. Each entry's flops and bytes are its parts' (a GEMM, a pass); a profile
   without its time (a GPU's) costs each part by its roofline, as the separate entries they once were. */
typedef enum { KCD_DIRECT = 0, KCD_GHOST = 1, KCD_FLASH = 2, KCD_BK = 3 } KCostDpWay;
/* per-sample norms of a linear layer: way 0 direct (the B per-sample GEMMs, then their squares),
   1 ghost (both T×T Gram matrices of every sample: syrk, half a GEMM's flops; then their dot),
   2 flash (the same Gram sums in R×R tiles, j ≤ i: the Gram matrices never leave the tile) */
void kcost_dp_linear_norms(KCostLedger *l, int way, int B, int T, int IC, int OC, int R, int elem);
/* book-keeping's clipped sum: dW += Σ_b c_b G_bᵀ A_b (one GEMM per sample, or one over all B·T rows
   on a GPU, which scales G by c first) */
void kcost_dp_clipped_bk(KCostLedger *l, int B, int T, int IC, int OC, int elem);
/* dW += Σ_b c_b psg_b over P floats */
void kcost_dp_clipped_sum(KCostLedger *l, int B, size_t P);

/* ---- profiles (profile.c) -------------------------------------------------------------------- */
typedef struct { int kind; int key[8]; double seconds; } KCostTimed;

typedef struct KCostProfile {
    char name[32];           /* "cpu", "h100", ... */
    char source[320];        /* where its figures come from, in words */
    char measured[32];       /* the calibration's UTC time ("" for a preset) */
    double gemm_rate[2];     /* flop/s of GEMMs at fp32 (tf32 on a GPU) and bf16 operands, sustained */
    double gemm_call_s;      /* a GEMM call's fixed cost */
    double attn_rate[2];     /* flop/s of attention (fp32, bf16) */
    double loop_rate;        /* flop/s of the other compute loops */
    double mem_bw;           /* bytes/s of a streaming pass */
    double call_s;           /* any other call's fixed cost (a kernel launch, an OpenMP region) */
    double link_bw, link_s;  /* a collective: bytes/s per rank over the link, and each call's latency */
    double op_s[KCO_N];      /* seconds an element of each named op at 2^20 elements (the CPU's, measured; 0: the
                                roofline), for the sizes too large to time (a timed size scales, when there is one) */
    double rank_skew;        /* ranks in step wait for the slowest: its time for the same work over the fastest's (>= 1;
                                the CPU's, measured by plan_comm_probe; 0 or 1: none) */
    double comm_overlap;     /* share of the backward's collectives hidden behind the backward (0..1) */
    double peak[2];          /* the datasheet's dense peak flop/s, tf32 and bf16 (GPU presets: for the MFU; 0 on the CPU) */
    char link_source[128];   /* how link_bw and link_s were had (the CPU's: measured by plan_comm_probe under mpirun) */
    KCostTimed *timed; int n_timed, cap_timed;   /* measured shapes (CPU) */
} KCostProfile;

/* One call of e's shape as the profile measured it: that shape, or one that differs from it in a single
   size in which the time is linear (a GEMM's M, N, K or batch; attention's batch; a named op's rows),
   scaled, the nearest such; < 0 when the profile has neither. */
double kcost_timed_seconds(const KCostProfile *p, const KCostEntry *e);
/* Seconds of one entry (all its calls) on the profile: the measured shape when there is one
   (kcost_timed_seconds), else the roofline plus the overhead. */
double kcost_entry_seconds(const KCostProfile *p, const KCostEntry *e);
/* Seconds per phase (ph[KC_PH_N]) of the whole ledger (all steps), and the total. */
double kcost_predict(const KCostProfile *p, const KCostLedger *l, double ph[KC_PH_N]);
/* Totals of the ledger per phase: flops and bytes (either may be NULL). */
void kcost_totals(const KCostLedger *l, double flops[KC_PH_N], double bytes[KC_PH_N]);

/* A named profile: "h100", "h200", "a100" (datasheet peaks times the efficiencies fitted on the GPU
   results, profile.c says which), or "cpu" (this machine's, measured: kcost_profile_cpu). 0, or -1
   with err set. */
int  kcost_profile_preset(KCostProfile *p, const char *name, char *err, size_t errlen);
void kcost_profile_free(KCostProfile *p);
/* This machine's CPU backend on nthreads threads (<= 0: OpenMP's default), measured now: 0, or -1. */
int  kcost_profile_cpu(KCostProfile *p, int nthreads);
/* Times each GEMM, attention and named op's shape of the ledger the profile has not measured yet (up to
   a size cap) on the CPU backend, and each DP kernel's by l->bench_dp: the number added. exact 0: not a shape that a measured one scales to
   (kcost_timed_seconds; fewer measurements, for many plans of one model at many batch sizes). */
int  kcost_profile_measure(KCostProfile *p, const KCostLedger *l, int nthreads, int exact);
/* For a layer above that times its own kernels (KCostLedger.bench_dp), as the profile times its shapes:
   the copies of the operands to cycle through (each call on fresh ones: what a step meets) for a
   copy of bytes_a_set, and the fastest of 5 to 15 calls of fn, each after setting *set to the next copy. */
int    kcost_cold_sets(double bytes_a_set);
float *kcost_filled(size_t n);   /* n floats in [0, 1), every page touched (malloc'd: free it); NULL when out of memory */
double kcost_time_call(void (*fn)(void *ctx), void *ctx, int *set, int sets);

/* The cache file: written aside and renamed into place; load: 0, or -1 (missing or not one). */
int  kcost_profile_save(const KCostProfile *p, const char *path);
int  kcost_profile_load(KCostProfile *p, const char *path);

#endif
