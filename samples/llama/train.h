/* train.h — THE training loop of the sample trainers, written once. The vanilla trainer runs it as
   is; a DP trainer plugs a TrainStrategy into it (clipping, noise, logical vs physical batches) and
   LoRA plugs in a `frozen` predicate, without copying the loop.

   One optimizer step (all inside a scope "step"):
       for each of grad_accum physical batches:
           scope "data"      next batch of tokens, uploaded to the backend
           strategy->physical_batch(user, s)       default: train_forward(s); train_backward(s, NULL)
       scope "allreduce"   several ranks (mpirun): the gradients summed over them (grad_reduce.h's
                           grad_reduce_step); under --zero 0 and 2 the sums start inside the backward,
                           unit by unit as it finishes them (grad_reduce.c: scopes "allreduce" /
                           "reduce_scatter" inside "backward"), and here the loop waits for the last
                           (--zero 2: each rank its slice's sum, shard.h; --zero 1: the serial all-reduce here)
       strategy->before_update(user, s)            e.g. add noise, divide by the logical batch
       scope "optimizer_step"  AdamW/SGD on every trainable tensor (lr: linear warmup, cosine to 10%),
                           or strategy->update where it fuses its work into the pass (DP's noise)
                           (--zero 1|2: this rank's slices; then scope "all_gather", the parameters;
                           bf16: a sharded master's slice, rounded into its bf16 copy, which is gathered)
       scope "zero_grad"       gradients := 0
   train_forward opens the scopes "forward" and "loss"; train_backward opens "backward". Building the
   model (params, grads, optimizer state) is the scope "model_creation". A DP strategy's scopes
   "clip" (the per-sample norms inside the backward, the factors and clipped sums after it) and
   "noise" are timed by train_phase_add, so the closing table has them as their own columns.

   WHAT THE LOOP PRINTS AND LOGS. Each step's loss (the mean over that step's batch, of the forward
   before that step's update; with several physical batches, their mean over their rows; with several ranks,
   the job's: each rank's mean weighted by its rows, grad_reduce_step) goes into the log at full
   precision (META train.loss, "STEP LOSS"; tools/read/steplog.h); the summary prints the first and the
   last, and says so. Each step's time per phase is kept; the summary's table gives median, min,
   quartiles and max over the timed steps, the first --timing-warmup steps (1) left out (META
   timing.warmup_steps). Snapshots at the phase boundaries: after_model_creation, after_step_1, end.

   HOW A DP STRATEGY USES IT (per-sample clipping):
     - Norms: give train_backward a GradHooks whose weight_grad(user, args) is called at every weight
       gradient of the backward (q,k,v,o,gate,up,down per block, lm_head, the embedding, each RMSNorm
       weight) with args->A (the layer's saved input [B,T,d_in]; for RMSNorm the norm's input x, with
       args->rstd, x̂ = x·rstd), args->G (gradient of the layer's output [B,T,d_out]; valid during the
       call only) and args->dW. Accumulate each sample's squared norm there (kernels/cpu/dp_*).
       Return 0 to let the backward add GᵀA into dW as usual, 1 to skip it.
     - Two-pass (Opacus ghost clipping): in physical_batch, train_forward; train_backward with hooks
       that only collect norms and return 1 (no dW); compute c_b on the device; train_forward again and
       train_backward with hooks.loss_weights = c (device [B]): the ordinary gradient is then
       Σ_b c_b g_b. (train_forward frees what the first backward kept.)
     - Book-keeping (Bu et al.): hooks return GRAD_HOOK_SKIP_DW | GRAD_HOOK_KEEP_A so that the saved
       input A stays allocated after the backward (until llama_release_saved or the next forward),
       and copy G (it lives in a reused buffer), tagged e.g. `bk/layers.3.q_proj.G`; every activation
       no hook asked for is freed as the backward passes it, with or without
       --checkpoint-activations. (hooks.retain_saved = 1 keeps every saved activation instead: the
       whole forward on top of what the hooks keep, 3.1 GB over vanilla's peak at 1b T=4096.)
     - Under --precision bf16, args->A and args->G are bf16 (args->dt): read them with the GPU `_dt`
       kernels or widen them (dp_sgd.c widens one sample at a time on the CPU).
       After the backward, with c_b known, form dW += Gᵀdiag(c)A per layer yourself, then call
       llama_release_saved(&s->model).
     - Noise: before_update, once per optimizer step after all grad_accum physical batches; or inside
       the optimizer's pass through `update` (the loop asks it for each tensor, s->calls_update says it
       will: samples/dp/dp_fused.c runs noise and AdamW in one pass).
       The loss is scaled by s->loss_scale = 1/(B·T·grad_accum) in the default path (a mean over the
       logical batch); a strategy that clips per sample will usually pass its own scale (1/T: per-
       sample mean loss) to train_backward_scaled and divide by the logical batch size itself.
     - Its own buffers: allocate them in init with kbuf_alloc(s->kb, bytes, "ghost/...") or
       "per_sample_grads/...", so they appear in the memory breakdown; free them in destroy.
   The loop's check-finite, progress line, summary and the log's META are shared by all trainers.

   Not here: the model (llama.h), the DP math (dp_*), argument parsing (config.h). */
#ifndef TRAIN_H
#define TRAIN_H

#include "config.h"
#include "data.h"
#include "grad_reduce.h"
#include "llama.h"

typedef struct TrainState {
    const TrainConfig *cfg;
    KBackend *kb;
    LlamaModel model;
    DataLoader data;
    int step;               /* 0-based index of the optimizer step in progress */
    int micro;              /* physical batch within the step, 0 .. grad_accum-1 */
    double loss;            /* mean loss of the last train_forward (0 on the plan backend) */
    float lr;               /* learning rate of this step */
    float loss_scale;       /* 1/(B*T*grad_accum): the default backward's loss scale */
    int *batch_host;        /* host staging: inputs [B*T], then targets [B*T] */
    int nonfinite;          /* set when --check-finite found NaN/Inf */
    double phase_s[9];      /* seconds spent in each TrainPhase so far (backward without the clip inside it) */
    double loss_sum;        /* this step's forwards: the sum of their losses weighted by their rows, and the rows */
    long loss_n;
    int data_rows;          /* rows of this physical batch that are data (Poisson sampling pads the rest with
                               rows that count for nothing): s->loss is theirs; 0: every row */
    Dist dist;              /* the ranks (samples/llama/dist.h): the bucket, the slices (shard.h), the reduction in
                               flight (grad_reduce.h); its time sink is phase_s[TRAIN_PH_ALLREDUCE], its micro is ours */
    int calls_update;       /* the loop calls strategy->update at each tensor's optimizer step (train_run sets it before
                               init; 0 where a test or a wrapper drives the strategy: it must then do its work itself) */
} TrainState;

typedef struct TrainStrategy {
    const char *name;       /* "vanilla", "ghost", ... (META config.method) */
    void *user;
    int  (*init)(void *user, TrainState *s);           /* after model_creation; may be NULL */
    int  (*physical_batch)(void *user, TrainState *s); /* NULL: forward, loss, plain backward */
    int  (*before_update)(void *user, TrainState *s);  /* NULL: nothing */
    /* The optimizer step of trainable tensor i's range (shard_view: n floats; w, g, m, v there, m and v NULL
       under SGD; wd its weight decay), run by the strategy where it fuses its own work into the pass (DP: the
       noise, samples/dp/dp_fused.c): 1 it ran it, 0 the loop's update runs, -1 error. NULL: never. */
    int  (*update)(void *user, TrainState *s, int i, float *w, float *g, float *m, float *v, size_t n, float wd);
    void (*destroy)(void *user, TrainState *s);        /* may be NULL */
    int  (*frozen)(void *user, const ParamInfo *p);    /* NULL: all trainable */
    int  (*save)(void *user, TrainState *s, const char *dir); /* after --save wrote the model (LoRA: the adapters); may be NULL */
    void (*fields)(void *user, const TrainState *s, ConfigFields *f); /* after init: the strategy's settings the ranks
                                                                          must agree on (config.h); may be NULL */
    KTraceFn trace;         /* optional: sees every backend allocation and free (tests, tools) */
    void *trace_user;
} TrainStrategy;

/* The CUDA backend, when the program links samples/llama/train_cuda.c and kernels/cuda (mk/trainer.mk does
   for build/train_vanilla where nvcc exists): NULL otherwise. --device auto picks CUDA when
   train_cuda_available() says a device is there. --plan-for cuda needs only kernels/cuda/scratch_cuda.c. */
extern int (*train_cuda_backend_init)(KBackend *b);
extern int (*train_cuda_available)(void);

/* Call first thing in main() (before MPI_Init: each rank decides alike, on its own): sets what the
   libraries read only at load time and re-executes the program once when it set anything.
   - unless OMP_WAIT_POLICY is set, "passive": idle OpenMP threads sleep instead of spinning, 2x faster
     steps on a shared 2-core machine (small model: 1.6 s -> 0.7 s), nothing lost when idle;
     OMP_WAIT_POLICY=active in the environment keeps spinning;
   - unless OPENBLAS_CORETYPE is set, the OpenBLAS core the CPU has when OpenBLAS fell back to a
     generic one (kernels/cpu/blas_core.h: Prescott's SSE3 kernels on an AVX-512 CPU it does not know,
     about 4x slower). The core in use is in the run's header and META blas.core. */
void train_prefer_passive_omp(char **argv);

/* Runs the whole trainer: backend, log, model, steps, summary. Returns the process exit code:
   0 ok, 1 bad input or internal error, 3 out of memory (--mem-limit or the device), 4 non-finite
   values under --check-finite. Errors are one line on stderr. */
int train_run(const TrainConfig *cfg, const TrainStrategy *strategy);

/* The phases of a step, as the summary's table shows them. */
typedef enum { TRAIN_PH_DATA, TRAIN_PH_FORWARD, TRAIN_PH_LOSS, TRAIN_PH_BACKWARD, TRAIN_PH_CLIP, TRAIN_PH_NOISE,
               TRAIN_PH_OPTIMIZER, TRAIN_PH_ZERO_GRAD, TRAIN_PH_ALLREDUCE, TRAIN_PH_N } TrainPhase;
/* Adds the time since t0 (dpmem_now_ns) to a phase: for a strategy's own phases (clip, noise). */
void train_phase_add(TrainState *s, TrainPhase ph, uint64_t t0);

/* ---- the phase table from GPU time (samples/llama/train_gpu_time.c) ----------------------------------
   On a GPU the host's clock measures launches, not work (the host runs ahead and then waits where it
   reads a result back: the loss). There the table, the step time and tokens/s come from the GPU time
   of the same scopes, as dpmem_cuda.h measures it with CUDA events (DPMEM_CUDA_TIMING, on by default
   in the trainers) and hands it over (dpmem_cuda_on_gpu_time): a phase's time in a step is the sum of
   the GPU times of the scopes of its name opened directly inside "step", except "clip", which also
   counts inside "backward" and is then taken out of the backward's (the host table's rule); the
   step's time is its "step" scope's, GPU idle time inside it included. The k-th "step" scope to
   end is step k: the times of a step arrive before its own. */
typedef struct TrainGpuTime {
    uint32_t step_id, backward_id, clip_id, ids[TRAIN_PH_N];   /* dpmem_intern ids of the scope names */
    double cur[TRAIN_PH_N];                 /* the step whose "step" scope has not ended yet, seconds */
    double (*rows)[TRAIN_PH_N + 1];         /* ended steps: seconds per phase, then the step's */
    int cap, n;                             /* rows kept (the first cap steps); steps ended */
} TrainGpuTime;
/* 0, or -1 (out of host memory: a line on stderr). names[ph]: each phase's scope name. */
int  train_gpu_time_init(TrainGpuTime *g, int cap, const char *const names[TRAIN_PH_N]);
/* One scope's GPU time (name and enclosing scope as dpmem_intern ids; parent 0: none). Never calls dpmem. */
void train_gpu_time_add(TrainGpuTime *g, uint32_t name_id, uint32_t parent_id, uint64_t gpu_ns);
void train_gpu_time_free(TrainGpuTime *g);
/* Set by samples/llama/train_cuda.c once the CUDA backend runs with the kit's GPU timing on (NULL otherwise,
   and then the table is the host's): start(g) sends every scope's GPU time to g from now on
   (start(NULL) stops), flush() waits for the GPU and delivers every time still pending. */
extern int  (*train_gpu_timer_start)(TrainGpuTime *g);
extern void (*train_gpu_timer_flush)(void);
/* The device's name and the precision of the model's GEMMs ("bf16", "tf32", "fp32"), for the MFU's
   peak (samples/llama/mfu.h); set by samples/llama/train_cuda.c with the CUDA backend, NULL otherwise. */
extern const char *(*train_device_name)(void);
extern const char *(*train_device_gemm)(const TrainConfig *c);

/* For strategies: forward + loss (scopes "forward", "loss"), sets s->loss. */
int train_forward(TrainState *s);
/* Backward (scope "backward") with the default loss scale, then --check-finite on the gradients. */
int train_backward(TrainState *s, const GradHooks *hooks);
int train_backward_scaled(TrainState *s, const GradHooks *hooks, float loss_scale);
/* llama_backward_rescaled (DP two-pass), timed and checked as a backward. */
int train_backward_rescaled(TrainState *s, const GradHooks *hooks, float loss_scale, const float *sample_scale, int again);
/* --check-finite on every trainable tensor of `which` (grads or params); phase names the check. */
int train_check_finite(TrainState *s, int grads, const char *phase);

#endif
