/* dp_device.c — where the DP-SGD strategy's kernels run and its buffers live (dp_sgd_impl.h): every
   DP kernel call through dp_run (the CUDA twin, the CPU's fp32 kernel, or the CPU's kernel one sample
   at a time on bf16 rows widened exactly), the errors, the tagged allocations.
   Built with DP_HAVE_CUDA where the program links the CUDA backend (mk/dp.mk); without it a CUDA
   backend cannot exist in the process (dp_sgd_init refuses one), and the GPU calls are never reached. */
#include "dp_sgd_impl.h"
#include "noise.h"
#include "cuda/kernels_cuda.h"   /* plain C: the GPU twins' declarations */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int dp_fail(DpSgd *d, const char *fmt, const char *what) {
    snprintf(d->kb->err, sizeof d->kb->err, fmt, what);
    return -1;
}

/* DP_GPU(call): a call to a `_cuda` kernel, compiled only where the program links them. Reached only
   when d->cuda is set, which needs a CUDA backend, which needs the same link. */
#ifdef DP_HAVE_CUDA
#define DP_GPU(call) (call)
#else
#define DP_GPU(call) dp_no_gpu_kernels()
static void dp_no_gpu_kernels(void) {
    fprintf(stderr, "error: DP-SGD on a CUDA backend in a program built without the DP CUDA kernels\n");
    exit(1);
}
#endif

/* The noise's parameters at a step (the fused update's: kernels/dp_kernels.h's DpNoise). */
static DpNoise dp_noise_of(const DpSgd *d, uint64_t step) {
    const DpNoise nz = { .sigma = d->sigma, .max_grad_norm = d->cfg.max_grad_norm, .logical_batch = d->logical_batch,
                         .seed = d->seed, .step = step };
    return nz;
}

int dp_widen_open(DpSgd *d, Widen *w, int T, int din, int dout) {
    w->a = w->g = NULL;
    if (d->dt != KDT_BF16 || d->gpu) return 0;
    if (din > 0 && !(w->a = kbuf_alloc(d->kb, (size_t)T * din * sizeof(float), "workspace/dp_widen.A"))) return -1;
    if (!(w->g = kbuf_alloc(d->kb, (size_t)T * dout * sizeof(float), "workspace/dp_widen.G"))) {
        kbuf_free(d->kb, w->a); w->a = NULL;
        return -1;
    }
    return 0;
}

void dp_widen_close(DpSgd *d, Widen *w) { kbuf_free(d->kb, w->g); kbuf_free(d->kb, w->a); w->a = w->g = NULL; }

void dp_widen_sample(DpSgd *d, Widen *w, const float *A, const float *G, int b, int T, int din, int dout) {
    if (A) widen_buffer(d->kb, w->a, kact_at(A, (size_t)b * T * din, KDT_BF16), (size_t)T * din);
    widen_buffer(d->kb, w->g, kact_at(G, (size_t)b * T * dout, KDT_BF16), (size_t)T * dout);
}

float *dp_alloc_floats(DpSgd *d, size_t floats, const char *cat, const char *name, const char *suffix) {
    char tag[160];
    snprintf(tag, sizeof tag, "%s/%s%s", cat, name, suffix);
    if (floats > SIZE_MAX / sizeof(float)) {   /* kbuf_alloc refuses over 1 EiB; this product must not wrap first */
        snprintf(d->kb->err, sizeof d->kb->err, "%s: %zu floats do not fit a 64-bit byte count", tag, floats);
        return NULL;
    }
    return kbuf_alloc(d->kb, floats * sizeof(float), tag);
}

float *dp_alloc_act(DpSgd *d, size_t elems, const char *cat, const char *name, const char *suffix) {
    char tag[160];
    snprintf(tag, sizeof tag, "%s/%s%s", cat, name, suffix);
    return kbuf_alloc(d->kb, elems * KDT_SIZE(d->dt), tag);
}

/* (the per-sample gradient GEMMs and Gram products write with beta = 0; the copies of G are whole) */
float *dp_alloc_written(DpSgd *d, size_t bytes, const char *cat, const char *name, const char *suffix) {
    char tag[160];
    snprintf(tag, sizeof tag, "%s/%s%s", cat, name, suffix);
    return kbuf_alloc_overwritten(d->kb, bytes, tag);
}

/* The op on the GPU, the whole batch at once on device pointers. */
static int run_gpu(DpSgd *d, const DpKernel *k) {
    const int B = k->B, T = k->T, din = k->din, dout = k->dout;
    const KDtype dt = k->dt;
    switch (k->op) {
    case DPK_LINEAR_DIRECT:
        if (k->psg_rest == k->psg + (size_t)din * dout) {   /* one buffer: one call */
            DP_GPU(dp_linear_norms_direct_cuda_dt(k->norm2, k->psg, k->A, k->G, B, T, din, dout, dt, k->io));
            break;
        }
        DP_GPU(dp_linear_norms_direct_cuda_dt(k->norm2, k->psg, k->A, k->G, 1, T, din, dout, dt, k->io));
        if (B > 1) DP_GPU(dp_linear_norms_direct_cuda_dt(k->norm2 + 1, k->psg_rest, kact_at(k->A, (size_t)T * din, dt),
                                                         kact_at(k->G, (size_t)T * dout, dt), B - 1, T, din, dout, dt, k->io));
        break;
    case DPK_LINEAR_STREAMED:
        DP_GPU(dp_linear_norms_direct_cuda_dt(k->norm2, k->scratch, k->A, k->G, B, T, din, dout, dt, k->io));
        break;
    case DPK_LINEAR_GHOST: DP_GPU(dp_linear_norms_ghost_cuda_dt(k->norm2, k->scratch, k->A, k->G, B, T, din, dout, dt, k->io)); break;
    case DPK_LINEAR_FLASH:
        DP_GPU(dp_linear_norms_flash_cuda_dt(k->norm2, k->scratch, k->A, k->G, B, T, din, dout, k->R, dt, k->io));
        break;
    case DPK_RMSNORM: DP_GPU(dp_rmsnorm_norms_direct_cuda_dt(k->norm2, k->psg, k->G, k->A, k->rstd, B, T, dout, dt)); break;
    case DPK_EMBEDDING:
        DP_GPU(dp_embedding_norms_cuda_dt(k->norm2, k->tokens, k->G, B, T, dout, dt, k->io));
        if (k->u) DP_GPU(dp_tied_cross_dot_cuda_dt(k->norm2, k->G, k->u, B, T, dout, dt, k->io));
        break;
    case DPK_EMBEDDING_DIRECT:
        /* no scatter-into-psg twin on the GPU: each sample's rows by the backend's embedding backward (its
           scratch, if any, is the target's and so in the plan), the norms by token equality (the same sum:
           ‖scatter(g_b)‖² = Σ_{t,s} [tok_t = tok_s] g_t·g_s) */
        if (fill_buffer(d->kb, k->psg, 0.0f, (size_t)B * k->V * dout)) return -1;
        for (int b = 0; b < B; b++)
            if (embedding_backward_ex(d->kb, dt, k->psg + (size_t)b * k->V * dout, k->tokens + (size_t)b * T,
                                      kact_at(k->G, (size_t)b * T * dout, dt), T, dout, k->V)) return -1;
        DP_GPU(dp_embedding_norms_cuda_dt(k->norm2, k->tokens, k->G, B, T, dout, dt, k->io));
        break;
    case DPK_TIED_U:
        DP_GPU(dp_tied_cross_u_cuda_dt(k->u, k->scratch, k->tokens, k->G, k->A, B, T, din, dout, k->R, dt, k->io));
        break;
    case DPK_PSG_NORMS: DP_GPU(dp_psg_norms_cuda(k->norm2, k->psg, B, k->per)); break;
    case DPK_SUM_PSG: case DPK_SUM_PSG_EMBEDDING: DP_GPU(dp_clipped_sum_cuda(k->dw, k->psg, k->c, B, k->per)); break;
    case DPK_SUM_PSG_FIRST: DP_GPU(dp_clipped_sum_first_cuda(k->dw, k->psg, k->c, B, k->per)); break;
    case DPK_SUM_BK:   /* the factors from the host: the GEMMs' alpha */
        DP_GPU(dp_linear_clipped_grad_bk_hostc_cuda_dt(k->dw, k->A, k->G, d->c_host, B, T, din, dout, dt));
        break;
    case DPK_SUM_BK_EMBEDDING: DP_GPU(dp_embedding_clipped_grad_bk_cuda_dt(k->dw, k->tokens, k->G, k->c, B, T, dout, k->V, dt)); break;
    case DPK_FACTORS:
        if (d->dt == KDT_BF16) DP_GPU(dp_clip_factors_safe_cuda(d->c, k->norm2, B, (float)d->cfg.max_grad_norm, DP_BF16_CLIP_MARGIN));
        else DP_GPU(dp_clip_factors_cuda(d->c, k->norm2, B, (float)d->cfg.max_grad_norm));
        break;
    case DPK_NOISE:
        if (d->cfg.secure_noise)   /* ChaCha20 on the grid (kernels/secure_noise.h) */
            DP_GPU(secure_noise_privatize_cuda(k->dw, k->per, d->sigma, d->cfg.max_grad_norm, d->logical_batch, d->key.k, k->step, k->offset));
        else DP_GPU(noise_privatize_cuda(k->dw, k->per, d->sigma, d->cfg.max_grad_norm, d->logical_batch, d->seed, k->step, k->offset));
        break;
    case DPK_NOISY_ADAMW: {
        const DpNoise nz = dp_noise_of(d, k->step);
        if (d->cfg.secure_noise) DP_GPU(secure_noisy_adamw_cuda(k->p, k->dw, k->m, k->v, k->per, k->offset, &nz, d->key.k, k->opt));
        else DP_GPU(dp_noisy_adamw_cuda(k->p, k->dw, k->m, k->v, k->per, k->offset, &nz, k->opt, 0));
        (void)nz;   /* (without DP_HAVE_CUDA the calls are not compiled) */
        break;
    }
    }
    return 0;
}

/* The op on the CPU: the whole batch (widened 0: b = 0, n = B, A and G the hook's own), or sample b
   alone on its widened rows (widened 1: n = 1, A and G the widening buffers), its outputs at its offsets. */
static void run_cpu(DpSgd *d, const DpKernel *k, int widened, int b, int n, const float *A, const float *G) {
    const int T = k->T, din = k->din, dout = k->dout;
    float *n2 = k->norm2 + b;
    const int *tok = k->tokens ? k->tokens + (size_t)b * T : NULL;
    switch (k->op) {
    case DPK_LINEAR_DIRECT: {
        float *first = b == 0 ? k->psg : k->psg_rest + (size_t)(b - 1) * din * dout;
        dp_linear_norms_direct_split(n2, first, widened ? NULL : k->psg_rest, A, G, n, T, din, dout, k->io);
        break;
    }
    case DPK_LINEAR_STREAMED: dp_linear_norms_direct(n2, k->scratch, A, G, n, T, din, dout, k->io); break;
    case DPK_LINEAR_GHOST:    dp_linear_norms_ghost(n2, k->scratch + 2 * (size_t)b * T * T, A, G, n, T, din, dout, k->io); break;
    case DPK_LINEAR_FLASH:    dp_linear_norms_flash(n2, k->scratch, A, G, n, T, din, dout, k->R, k->nt, k->io); break;
    case DPK_RMSNORM:
        dp_rmsnorm_norms_direct(n2, k->psg + (size_t)b * dout, G, A, k->rstd + (size_t)b * T, n, T, dout);
        break;
    case DPK_EMBEDDING:
        dp_embedding_norms(n2, tok, G, n, T, dout, k->io);
        if (k->u) dp_tied_cross_dot(n2, G, k->u + (size_t)b * T * dout, n, T, dout, k->io);
        break;
    case DPK_EMBEDDING_DIRECT:
        dp_embedding_norms_direct(n2, k->psg + (size_t)b * k->V * dout, tok, G, n, T, dout, k->V);
        break;
    case DPK_TIED_U:
        dp_tied_cross_u(k->u + (size_t)b * T * din, k->scratch, tok, G, A, n, T, din, dout, k->R, k->nt, k->io);
        break;
    case DPK_PSG_NORMS:         dp_psg_norms(k->norm2, k->psg, k->B, k->per); break;
    case DPK_SUM_PSG:           dp_clipped_sum(k->dw, k->psg, k->c, k->B, k->per); break;
    case DPK_SUM_PSG_FIRST:     dp_clipped_sum_first(k->dw, k->psg, k->c, k->B, k->per); break;
    case DPK_SUM_PSG_EMBEDDING: dp_embedding_clipped_sum_direct(k->dw, k->psg, k->tokens, k->c, k->B, T, dout, k->V); break;
    case DPK_SUM_BK:            dp_linear_clipped_grad_bk(k->dw, A, G, k->c + b, n, T, din, dout); break;
    case DPK_SUM_BK_EMBEDDING:  dp_embedding_clipped_grad_bk(k->dw, tok, G, k->c + b, n, T, dout); break;
    case DPK_FACTORS: {
        const float C = (float)d->cfg.max_grad_norm;
        if (d->dt == KDT_BF16) dp_clip_factors_safe(d->c, k->norm2, k->B, C, DP_BF16_CLIP_MARGIN);
        else dp_clip_factors(d->c, k->norm2, k->B, C);
        break;
    }
    case DPK_NOISE:
        if (d->cfg.secure_noise)   /* ChaCha20 on the grid (kernels/secure_noise.h) */
            secure_noise_privatize(k->dw, k->per, d->sigma, d->cfg.max_grad_norm, d->logical_batch, &d->key, k->step, k->offset);
        else noise_privatize(k->dw, k->per, d->sigma, d->cfg.max_grad_norm, d->logical_batch, d->seed, k->step, k->offset);
        break;
    case DPK_NOISY_ADAMW: {   /* Philox only: the CPU has no secure twin (dp_fused_setup keeps the two passes there) */
        const DpNoise nz = dp_noise_of(d, k->step);
        dp_noisy_adamw(k->p, k->dw, k->m, k->v, k->per, k->offset, &nz, k->opt, 0, d->kb->nthreads);
        break;
    }
    }
}

int dp_run(DpSgd *d, Widen *w, const DpKernel *k) {
    if (d->cuda) return run_gpu(d, k);
    if (!w || !w->g) { run_cpu(d, k, 0, 0, k->B, k->A, k->G); return 0; }
    const int sums = k->op == DPK_SUM_BK || k->op == DPK_SUM_BK_EMBEDDING;
    for (int b = 0; b < k->B; b++) {
        if (sums && k->c[b] == 0.0f) continue;   /* dropped (the kernels skip it too): nothing to widen */
        dp_widen_sample(d, w, k->A, k->G, b, k->T, k->din, k->dout);
        run_cpu(d, k, 1, b, 1, w->a, w->g);
    }
    return 0;
}
