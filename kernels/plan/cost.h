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
    KC_KINDS
} KCostKind;

/* The phases of the trainer's table (samples/llama/train.h's TrainPhase order), then the rest of the step. */
enum { KC_PH_DATA, KC_PH_FORWARD, KC_PH_LOSS, KC_PH_BACKWARD, KC_PH_CLIP, KC_PH_NOISE, KC_PH_OPTIMIZER,
       KC_PH_ZERO_GRAD, KC_PH_ALLREDUCE, KC_PH_OTHER, KC_PH_N };
extern const char *const kcost_phase_names[KC_PH_N];

/* Collectives (KC_COMM's key[0]). */
enum { KC_ALLREDUCE = 0, KC_REDUCE_SCATTER = 1, KC_ALLGATHER = 2 };

typedef struct {
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
/* a collective of `bytes` (each rank's buffer) over `ranks` ranks: ring traffic per rank
   2(N-1)/N·S for an all-reduce, (N-1)/N·S for a reduce-scatter or an all-gather of S in all */
double kcost_comm_bytes(int kind, double bytes, int ranks);
/* ... in `calls` collectives of bytes/calls each (a bucket, a unit), at a phase */
void kcost_comm(KCostLedger *l, int phase, int kind, double bytes, int ranks, int calls);

/* ---- the DP kernels (kernels/dp_kernels.h), at their shapes --------------------------------- */
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
    double comm_overlap;     /* share of the backward's collectives hidden behind the backward (0..1) */
    double peak[2];          /* the datasheet's dense peak flop/s, tf32 and bf16 (GPU presets: for the MFU; 0 on the CPU) */
    char link_source[128];   /* how link_bw and link_s were had (the CPU's: measured by plan_comm_probe under mpirun) */
    KCostTimed *timed; int n_timed, cap_timed;   /* measured shapes (CPU) */
} KCostProfile;

/* One call of e's shape as the profile measured it: that shape, or one that differs from it in a single
   size in which the time is linear (a GEMM's M, N, K or batch; attention's batch), scaled, the nearest
   such; < 0 when the profile has neither. */
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
/* Times each GEMM and attention shape of the ledger the profile has not measured yet (up to a size
   cap) on the CPU backend: the number added. exact 0: not a shape that a measured one scales to
   (kcost_timed_seconds; fewer measurements, for many plans of one model at many batch sizes). */
int  kcost_profile_measure(KCostProfile *p, const KCostLedger *l, int nthreads, int exact);
/* The cache file: written aside and renamed into place; load: 0, or -1 (missing or not one). */
int  kcost_profile_save(const KCostProfile *p, const char *path);
int  kcost_profile_load(KCostProfile *p, const char *path);

#endif
