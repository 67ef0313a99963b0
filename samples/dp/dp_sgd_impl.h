/* dp_sgd_impl.h — what the files of the DP-SGD strategy share, not its interface (that is dp_sgd.h).
   The files, each calling only those above it in this list:
     dp_device.c  where a DP kernel runs (dp_run: the CUDA twin, the CPU's fp32 kernel, the CPU on bf16
                  activations widened one sample at a time) and the strategy's tagged buffers
     dp_report.c  what the strategy prints and logs: the banner, META dp.*, the per-layer choice,
                  the per-sample statistics, ε and the summary
     dp_clip.c    clip factors, the clipped sums Σ_b c_b g_b (book-keeping's unit loop), the kept state
     dp_norms.c   the weight-gradient hook: per-sample norms of linear layers, RMSNorm, the embedding,
                  a tied lm_head, LoRA's adapters
     dp_lora.c    LoRA's adapters: built, merged, their optimizer step, saved
     dp_sgd.c     the TrainStrategy: prepare, init, one physical batch, the noise, destroy */
#ifndef DP_SGD_IMPL_H
#define DP_SGD_IMPL_H

#include "dp_sgd.h"

#include <stddef.h>
#include <stdint.h>

/* ---- dp_device.c --------------------------------------------------------------------------------- */

/* A one-line error into the backend's err (fmt with one %s); -1. */
int dp_fail(DpSgd *d, const char *fmt, const char *what);

/* CPU with bf16 activations: the fp32 kernels of kernels/cpu see one sample at a time, its rows of A
   and G widened (exactly) into two workspace buffers, T·d_in and T·d_out floats
   (workspace/dp_widen.A, .G). Only on the CPU target: the GPU kernels read bf16 themselves.
   w->g is NULL where nothing is widened (fp32, or the GPU). */
typedef struct { float *a, *g; } Widen;
int  dp_widen_open(DpSgd *d, Widen *w, int T, int din, int dout);
void dp_widen_close(DpSgd *d, Widen *w);
/* Sample b's rows of A [B,T,din] (if given) and G [B,T,dout] into w. */
void dp_widen_sample(DpSgd *d, Widen *w, const float *A, const float *G, int b, int T, int din, int dout);

/* The DP kernels, each run where the backend is: its `_cuda` twin on device pointers (the GPU reads
   bf16 itself), the fp32 kernel of kernels/cpu over the whole batch, or, on the CPU with bf16
   activations, that kernel once per sample on its rows widened (w->g set: dp_widen_open). */
typedef enum {
    DPK_LINEAR_DIRECT,      /* every sample's G_bᵀA_b (sample 0's at psg, the others at psg_rest) and its norm */
    DPK_LINEAR_STREAMED,    /* the same, B at a time into scratch, kept only for the norm (mixed) */
    DPK_LINEAR_GHOST,       /* the two Gram matrices of each sample in scratch [B, 2, T, T] */
    DPK_LINEAR_FLASH,       /* Gram tiles in scratch: R rows (the GPU's block rows, or --flash-tile), nt threads */
    DPK_RMSNORM,            /* psg [B, C] = Σ_t dout·inp·rstd, and its norms */
    DPK_EMBEDDING,          /* by token equality; with u, a tied matrix's cross term 2⟨e_b, h_b⟩ too */
    DPK_EMBEDDING_DIRECT,   /* the scattered per-sample gradients psg [B, V, C], and their norms */
    DPK_TIED_U,             /* a tied lm_head's u [B, T, C] (scratch: the T×T gather, R rows, nt threads) */
    DPK_PSG_NORMS,          /* norms of psg [B, per] */
    DPK_SUM_PSG,            /* dw += Σ_b c_b psg_b */
    DPK_SUM_PSG_FIRST,      /* dw (sample 0's gradient) = c_0 dw + Σ_{b≥1} c_b psg_b */
    DPK_SUM_PSG_EMBEDDING,  /* the embedding's: the CPU adds the tokens' rows only */
    DPK_SUM_BK,             /* dw += Gᵀdiag(c)A (c from the host on the GPU: c_host) */
    DPK_SUM_BK_EMBEDDING,   /* dw += the tokens' rows of diag(c)G */
    DPK_FACTORS,            /* c = min(1, C/(‖g_b‖+1e-6)) from norm2; under bf16 with the margin */
    DPK_NOISE,              /* dw = (dw + N(0, σ²C²)) / L: n coordinates at offset, the step's stream */
    DPK_NOISY_ADAMW,        /* DPK_NOISE's dw, then AdamW of p, m, v with it, in one pass (dw keeps the clipped sum) */
} DpOp;

typedef struct {
    DpOp op;
    float *norm2;             /* [B] squared norms, added into (DPK_FACTORS: read) */
    const float *A, *G;       /* the hook's input [B,T,din] and output gradient [B,T,dout], of type dt */
    const float *rstd;        /* RMSNorm's [B,T] */
    const int *tokens;        /* [B,T] */
    float *psg, *psg_rest;    /* per-sample gradients */
    float *scratch;           /* Gram matrices, tiles, the tied gather */
    float *u;                 /* a tied lm_head's u */
    float *dw;                /* the clipped sum, or the gradient the noise goes into */
    const float *c;           /* [B] clip factors (backend) */
    int B, T, din, dout, V, R, nt;
    size_t per;               /* DPK_PSG_NORMS, DPK_SUM_PSG*: floats per sample; DPK_NOISE: coordinates */
    uint64_t step, offset;    /* DPK_NOISE, DPK_NOISY_ADAMW */
    float *p, *m, *v;         /* DPK_NOISY_ADAMW: the parameters and AdamW's state */
    const DpAdamW *opt;       /* DPK_NOISY_ADAMW */
    KDtype dt;
    DpIO *io;
} DpKernel;
/* w: the widening buffers (NULL where the op reads no activations). 0, or -1 after the backend's error. */
int dp_run(DpSgd *d, Widen *w, const DpKernel *k);

/* Tagged "<cat>/<name><suffix>" buffers of the backend: `floats` fp32 values (zeroed); `elems` of the
   activations' type; `bytes` that the next kernel writes before anything reads them (no zero-fill
   on the GPU: kbuf_alloc_overwritten). NULL after the backend's error. */
float *dp_alloc_floats(DpSgd *d, size_t floats, const char *cat, const char *name, const char *suffix);
float *dp_alloc_act(DpSgd *d, size_t elems, const char *cat, const char *name, const char *suffix);
float *dp_alloc_written(DpSgd *d, size_t bytes, const char *cat, const char *name, const char *suffix);

/* --quiet, or DpConfig.quiet_dp (the benchmarks'): the strategy prints nothing (s NULL: no loop to ask, print). */
static inline int dp_quiet(const DpSgd *d, const TrainState *s) {
    return s && (s->cfg->quiet || d->cfg.quiet_dp);
}
/* What a run is for stays under --quiet (ε, what was dropped): silent only for the benchmarks
   (quiet_dp) and on ranks other than 0 (quiet 2). */
static inline int dp_quiet_result(const DpSgd *d, const TrainState *s) {
    return s && (s->cfg->quiet >= 2 || d->cfg.quiet_dp);
}

/* ---- dp_report.c --------------------------------------------------------------------------------- */

/* The banner (unless quiet) and the run's META dp.*, once the settings are resolved. */
void dp_report_setup(DpSgd *d, TrainState *s);
/* Each layer's method and norm IO (META dp.layer.*, dp.io.*; printed per the flags), after the first
   physical batch. */
void dp_report_choice(DpSgd *d);
/* The summary's statistics from norm2 (on the GPU: read back, in chunks) and c_host; --log-sample-norms. */
int  dp_collect_stats(DpSgd *d, int B);
/* At the end: ε, the statistics, the Poisson counts (META dp.*; printed unless quiet). */
void dp_report_summary(DpSgd *d, const TrainState *s);

/* ---- dp_clip.c ----------------------------------------------------------------------------------- */

/* c_b from norm2 (d->c), then read back to the host (d->c_host). */
void dp_compute_factors(DpSgd *d, int B);
int  dp_read_factors(DpSgd *d, int B);
/* dW += Σ_b c_b g_b of one tensor from what its hook kept (per-sample gradients, or A and G). */
int  dp_sum_clipped(DpSgd *d, DpParamState *p, float *dw, const int *tokens, int V);
/* Book-keeping: every tensor's clipped sum, unit by unit in the backward's order. */
int  dp_clip_units(DpSgd *d);
/* A physical batch of one sequence: its gradient is its per-sample gradient; the clip is one scale. */
int  dp_shortcut_clip(DpSgd *d, TrainState *s);
/* Frees what the hooks kept for the clipped sums (not what they borrowed). */
void dp_free_kept(DpSgd *d);

/* ---- dp_plan_bench.c ------------------------------------------------------------------------------ */
/* Seconds of one call of a KC_DP entry's kernel on the CPU, or < 0 (KCostLedger.bench_dp). */
struct KCostEntry;
double dp_plan_bench(const struct KCostEntry *e, int nthreads);

/* ---- dp_fused.c ---------------------------------------------------------------------------------- */

/* At init, after the adapters: d->fused (DPMEM_FUSED_UPDATE, the optimizer, the noise's twin) and d->flat.
   0, or -1 after a one-line error (a DPMEM_FUSED_UPDATE other than 0 or 1). */
int  dp_fused_setup(DpSgd *d, TrainState *s);
/* The noise and AdamW of n coordinates at flat index `offset` in one pass (wd: the weight decay). 0, or -1. */
int  dp_fused_adamw(DpSgd *d, TrainState *s, float *w, float *g, float *m, float *v, size_t n, uint64_t offset, float wd);

/* ---- dp_lora.c ----------------------------------------------------------------------------------- */

int  dp_lora_setup(DpSgd *d, TrainState *s);
/* The adapters' clipped sums added across ranks (several ranks only). */
int  dp_lora_allreduce(DpSgd *d, TrainState *s);
/* The adapters' optimizer step (scope "optimizer_step"). */
int  dp_lora_step(DpSgd *d, TrainState *s);

#endif
