/* dp_norms.cu — DP-SGD's per-sample gradient norms and clipping on the GPU, with the contracts of
   kernels/dp_kernels.h (norm2[b] += ‖g_b‖², device pointers) and the same DpIO accounting, so that
   tests/test_cuda_kernels.cu can hold each against its kernels/cpu/dp_*.c twin.

     direct   psg[b] = g_bᵀ a_b for all b in one strided-batched cuBLAS GEMM, then Σ psg².
     ghost    both Gram matrices of every sample by two batched GEMMs (gram [2,B,T,T]), then ⟨·,·⟩.
     flash    block rows of R time steps (R from kcuda_flash_rows: a fixed byte budget): for row I two
              strided-batched GEMMs form a_I a_{0..I}ᵀ and g_I g_{0..I}ᵀ [R × (I+1)R] for every
              sample into the scratch (tensor cores for bf16 operands), one kernel adds
              w·Σ ga∘gg (w = 2 off the diagonal block) into fixed partial slots; the partials are
              added in order at the end. The scratch is [2, B, R, T] + partials, never T×T.
     embedding  one warp per position t: lanes compare token t with 32 earlier tokens at a time
              (ballot), the warp dots g_t with each match.
     rmsnorm  psg[b] = Σ_t dout·inp·rstd: 32 columns × 32 row groups a block, the groups' sums in order.
     tied     the cross term of a tied embedding (dp_norms_tied.c): U = D A, D[t,s] = dlogits_s[tok_t],
              D's block rows gathered into the scratch and multiplied by cuBLAS; then
              2 Σ_t g_bt·u_bt per sample.
   Per-sample sums (except flash's, which are fixed-order partials) are added in double into a
   module accumulator (double atomics: the order of additions may vary between runs by a double
   ulp, invisible after rounding to the float norm2), then one kernel adds them into norm2 and
   clears the accumulator.
   Book-keeping: dw += Σ_b c_b g_bᵀ a_b as B cuBLAS GEMMs with alpha = c_b, from the factors on the
   host (samples with c_b = 0, e.g. a non-finite gradient, are skipped exactly as on the CPU): the
   `_hostc` entry takes them from the caller, who reads them back once per physical batch rather than
   once per layer (each read waits for the whole queue); the plain entry reads them back itself.
   The per-sample sums of squares run about 8 blocks per SM, float4 loads where aligned (dot_parts).

   bf16 activations (the `_dt` entries): the GEMMs take bf16 operands with CUBLAS_COMPUTE_32F (bf16
   products are exact in fp32), the other kernels load bf16 and compute as in fp32; psg, Gram
   matrices, norms and sums stay fp32/double. The fp32 entries are the `_dt` ones with KDT_F32.
   Precision: every GEMM here is full fp32 whatever DPMEM_CUDA_GEMM says. The privacy guarantee rests
   on ‖c_b g_b‖ ≤ C; a norm measured with TF32 or bf16 inputs (relative error ~1e-3 / ~1e-2) could
   let a clipped per-sample gradient exceed C by that much (docs/CUDA_BACKEND.md, "Precision of
   the DP kernels"). With fp32 activations flash's Grams are plain fp32 GEMMs (CUDA cores).

   Not here: the choice of method per layer (samples/dp/dp_norms.c, dp_mixed_uses_gram), the choice of
   R (kernels_cuda.h, a pure function of the shapes: the plan for cuda uses it too), a fused
   CUTLASS kernel that would keep the Gram blocks on chip, more than KCUDA_MAX_B samples per call. */
#include "cuda_common.cuh"
#include "ops_cuda.h"
#include "storage.cuh"

#include <math.h>

static __device__ double g_acc[KCUDA_MAX_B];

static void check_b(int B, const char *what) {
    if (B > KCUDA_MAX_B) {
        fprintf(stderr, "%s (cuda): %d samples in one call, at most %d (KCUDA_MAX_B)\n", what, B, KCUDA_MAX_B);
        exit(EXIT_FAILURE);
    }
}

static double *acc_ptr(void) {
    static void *p = NULL;                       /* the symbol's address is fixed: looked up once */
    if (!p) cudaCheck(cudaGetSymbolAddress(&p, g_acc));
    return (double *)p;
}

/* Blocks per sample for a memory-bound pass of `n` loads per sample over B samples: about 8 blocks of
   256 threads per SM in all (the device's own count), so that enough loads are in flight to cover the
   memory's latency (256 blocks for one sample reached a fraction of the bandwidth on an H100), and
   never more blocks than there is work for. */
static unsigned dot_parts(size_t n, int B) {
    static int sms = 0;
    if (!sms) {
        int dev = 0;
        cudaCheck(cudaGetDevice(&dev));
        cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    }
    size_t want = ((size_t)8 * sms + (size_t)B - 1) / (size_t)B, most = (n + 255) / 256;
    size_t parts = want < most ? want : most;
    return (unsigned)(parts ? parts : 1);
}

__global__ void acc_finalize_kernel(float *norm2, double *acc, int B) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < B) { norm2[b] += (float)acc[b]; acc[b] = 0.0; }
}
static void acc_finalize(float *norm2, int B) {
    acc_finalize_kernel<<<(B + 127) / 128, 128>>>(norm2, acc_ptr(), B);
    cudaLaunchCheck();
}

/* acc[b] += Σ_k x[b·P + k]·y[b·P + k] (y == NULL: x²), grid (parts, B). vec: P % 4 == 0 and both
   arrays 16-byte aligned, so every sample's row is too: one float4 of each per iteration. */
__global__ void per_sample_dot_kernel(double *acc, const float *x, const float *y, size_t P, int vec) {
    __shared__ double sh[32];
    const float *xb = x + blockIdx.y * P, *yb = y ? y + blockIdx.y * P : NULL;
    const size_t start = blockIdx.x * (size_t)blockDim.x + threadIdx.x, step = (size_t)gridDim.x * blockDim.x;
    double s = 0.0;
    if (vec) {
        const float4 *x4 = (const float4 *)xb, *y4 = (const float4 *)yb;
        for (size_t k = start; k < P / 4; k += step) {
            const float4 u = x4[k], v = y4 ? y4[k] : u;
            s += (double)u.x * v.x + (double)u.y * v.y + (double)u.z * v.z + (double)u.w * v.w;
        }
    } else
        for (size_t k = start; k < P; k += step) s += (double)xb[k] * (yb ? yb[k] : xb[k]);
    s = kcuda_block_sum_d(s, sh);
    if (threadIdx.x == 0) atomicAdd(&acc[blockIdx.y], s);
}
static void per_sample_dot(const float *x, const float *y, size_t P, int B) {
    const int vec = P % 4 == 0 && (uintptr_t)x % 16 == 0 && (!y || (uintptr_t)y % 16 == 0);
    per_sample_dot_kernel<<<dim3(dot_parts(vec ? P / 4 : P, B), B), 256>>>(acc_ptr(), x, y, P, vec);
    cudaLaunchCheck();
}

void dp_linear_norms_direct_cuda(float *norm2, float *psg, const float *a, const float *g,
                                 int B, int T, int IC, int OC, DpIO *io) {
    dp_linear_norms_direct_cuda_dt(norm2, psg, a, g, B, T, IC, OC, KDT_F32, io);
}

void dp_linear_norms_direct_cuda_dt(float *norm2, float *psg, const float *a, const float *g,
                                    int B, int T, int IC, int OC, KDtype dt, DpIO *io) {
    check_b(B, "dp_linear_norms_direct");
    if (B <= 0) return;   /* as the CPU loop: a grid with gridDim.y = 0 is an invalid launch */
    size_t per = (size_t)OC * IC;
    kcuda_gemm_ex_fp32acc(1, 0, OC, IC, T, 1.0f, g, OC, (long long)T * OC, a, IC, (long long)T * IC,
                          0.0f, psg, IC, (long long)per, B, dt, KDT_F32);
    per_sample_dot(psg, NULL, per, B);
    acc_finalize(norm2, B);
    if (io) {
        io->read += (uint64_t)B * T * (IC + OC) * 4 + (uint64_t)B * per * 4;
        io->written += (uint64_t)B * per * 4 + (uint64_t)B * 4;
    }
}

void dp_linear_norms_ghost_cuda(float *norm2, float *gram, const float *a, const float *g,
                                int B, int T, int IC, int OC, DpIO *io) {
    dp_linear_norms_ghost_cuda_dt(norm2, gram, a, g, B, T, IC, OC, KDT_F32, io);
}

void dp_linear_norms_ghost_cuda_dt(float *norm2, float *gram, const float *a, const float *g,
                                   int B, int T, int IC, int OC, KDtype dt, DpIO *io) {
    check_b(B, "dp_linear_norms_ghost");
    if (B <= 0) return;   /* as the CPU loop: a grid with gridDim.y = 0 is an invalid launch */
    size_t tt = (size_t)T * T;
    float *ga = gram, *gg = gram + (size_t)B * tt;
    kcuda_gemm_ex_fp32acc(0, 1, T, T, IC, 1.0f, a, IC, (long long)T * IC, a, IC, (long long)T * IC, 0.0f, ga, T,
                          (long long)tt, B, dt, KDT_F32);
    kcuda_gemm_ex_fp32acc(0, 1, T, T, OC, 1.0f, g, OC, (long long)T * OC, g, OC, (long long)T * OC, 0.0f, gg, T,
                          (long long)tt, B, dt, KDT_F32);
    per_sample_dot(ga, gg, tt, B);
    acc_finalize(norm2, B);
    if (io) {
        io->read += (uint64_t)B * T * (IC + OC) * 4 + 2 * (uint64_t)B * tt * 4;
        io->written += 2 * (uint64_t)B * tt * 4 + (uint64_t)B * 4;
    }
}

/* ---- flash: Gram matrices in block rows, by cuBLAS ---------------------------------------------
   Block row I (rows i0 = I·R .. i0+ri of sample b, w = i0 + ri) of both Gram matrices:
     ga[b] = a_b[i0:i0+ri] · a_b[0:w]ᵀ, gg[b] = g_b[i0:i0+ri] · g_b[0:w]ᵀ   (ri × w, row-major, ld w),
   each one strided-batched GEMM over the B samples (stride R·T floats in the scratch). Its columns
   below i0 are the off-diagonal blocks J < I (weight 2: the Gram matrices are symmetric, the blocks
   above the diagonal are never formed); columns i0..w the diagonal block, formed whole (weight 1).
   Operands of dt (bf16: exact products), CUBLAS_COMPUTE_32F, fp32 Gram entries: no TF32 here. */

/* part[(b·nI + I)·P + x] = Σ over rows r ≡ x (mod P) of Σ_c w_c · ga[r,c] · gg[r,c], in double
   (w_c = 2 for c < i0, else 1); grid (P, B). Rows are read as float4 where every row start is 16-byte
   aligned (vec: the scratch is, w and the sample stride are multiples of 4), else as floats. Each
   thread's columns and the block reduction have a fixed order, and vec is a function of the shapes
   and of the scratch's alignment only: the same bits every run. */
__global__ void flash_rows_kernel(double *part, const float *ga, const float *gg, size_t stride,
                                  int ri, int w, int i0, int I, int nI, int vec) {
    __shared__ double sh[32];
    const int b = blockIdx.y;
    const float *xa = ga + (size_t)b * stride, *xg = gg + (size_t)b * stride;
    double s = 0.0;
    for (int r = blockIdx.x; r < ri; r += gridDim.x) {
        const float *ra = xa + (size_t)r * w, *rg = xg + (size_t)r * w;
        double off = 0.0, diag = 0.0;
        if (vec) {
            const float4 *ra4 = (const float4 *)ra, *rg4 = (const float4 *)rg;
            for (int q = threadIdx.x; q < w / 4; q += blockDim.x) {
                const float4 x = ra4[q], y = rg4[q];
                const double p[4] = { (double)x.x * y.x, (double)x.y * y.y, (double)x.z * y.z, (double)x.w * y.w };
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    if (4 * q + j < i0) off += p[j]; else diag += p[j];
                }
            }
        } else {
            for (int c = threadIdx.x; c < w; c += blockDim.x) {
                const double p = (double)ra[c] * (double)rg[c];
                if (c < i0) off += p; else diag += p;
            }
        }
        s += 2.0 * off + diag;
    }
    s = kcuda_block_sum_d(s, sh);
    if (threadIdx.x == 0) part[((size_t)b * nI + I) * gridDim.x + blockIdx.x] = s;
}

/* norm2[b] += Σ_k part[b·n + k], in a fixed order; one block per sample. */
__global__ void flash_finalize_kernel(float *norm2, const double *part, int n) {
    __shared__ double sh[32];
    const double *pb = part + (size_t)blockIdx.x * n;
    double s = 0.0;
    for (int k = threadIdx.x; k < n; k += blockDim.x) s += pb[k];
    s = kcuda_block_sum_d(s, sh);
    if (threadIdx.x == 0) norm2[blockIdx.x] += (float)s;
}

void dp_linear_norms_flash_cuda(float *norm2, float *tile, const float *a, const float *g,
                                int B, int T, int IC, int OC, int R, DpIO *io) {
    dp_linear_norms_flash_cuda_dt(norm2, tile, a, g, B, T, IC, OC, R, KDT_F32, io);
}

void dp_linear_norms_flash_cuda_dt(float *norm2, float *tile, const float *a, const float *g,
                                   int B, int T, int IC, int OC, int R, KDtype dt, DpIO *io) {
    check_b(B, "dp_linear_norms_flash");
    if (B <= 0 || T <= 0) return;
    if (!tile) {
        fprintf(stderr, "dp_linear_norms_flash (cuda): no scratch (kcuda_flash_floats(B, T, R) floats are needed)\n");
        exit(EXIT_FAILURE);
    }
    R = kcuda_clamp_rows(T, R);
    const int nI = (T + R - 1) / R, P = KCUDA_FLASH_PARTS;
    const size_t stride = (size_t)R * T, e = KDT_SIZE(dt);
    float *ga = tile, *gg = tile + (size_t)B * stride;
    double *part = (double *)(tile + 2 * (size_t)B * stride);   /* 8-byte aligned: 2·B·R·T floats before it */
    const char *ac = (const char *)a, *gc = (const char *)g;
    const int aligned = (uintptr_t)tile % 16 == 0 && stride % 4 == 0;   /* then ga, gg, every sample's block too */
    for (int I = 0; I < nI; I++) {
        const int i0 = I * R, ri = T - i0 < R ? T - i0 : R, w = i0 + ri;
        kcuda_gemm_ex_fp32acc(0, 1, ri, w, IC, 1.0f, ac + (size_t)i0 * IC * e, IC, (long long)T * IC,
                              a, IC, (long long)T * IC, 0.0f, ga, w, (long long)stride, B, dt, KDT_F32);
        kcuda_gemm_ex_fp32acc(0, 1, ri, w, OC, 1.0f, gc + (size_t)i0 * OC * e, OC, (long long)T * OC,
                              g, OC, (long long)T * OC, 0.0f, gg, w, (long long)stride, B, dt, KDT_F32);
        flash_rows_kernel<<<dim3(P, B), 256>>>(part, ga, gg, stride, ri, w, i0, I, nI, aligned && w % 4 == 0);
        cudaLaunchCheck();
    }
    flash_finalize_kernel<<<B, 256>>>(norm2, part, nI * P);
    cudaLaunchCheck();
    if (io) {   /* per block row: rows i0..i0+ri and 0..w of a and g read (the GEMMs' two operands),
                   both Gram blocks written and read back, the partials written and read; the norms */
        uint64_t rd = 0, wr = 0;
        for (int i0 = 0; i0 < T; i0 += R) {
            const uint64_t ri = (uint64_t)(T - i0 < R ? T - i0 : R), w = (uint64_t)i0 + ri;
            rd += (ri + w) * (uint64_t)(IC + OC) * 4 + 2 * ri * w * 4;
            wr += 2 * ri * w * 4;
        }
        const uint64_t parts = (uint64_t)nI * P * 8;
        io->read += (uint64_t)B * (rd + parts);
        io->written += (uint64_t)B * (wr + parts + 4);
    }
}

/* One warp per position t of sample b: Σ_{u ≤ t, tok_u = tok_t} w·(g_t·g_u). */
template <typename E>
__global__ void embedding_norms_kernel(double *acc, const int *tokens, const E *g, int T, int C) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, b = blockIdx.y;
    const int t = blockIdx.x * (blockDim.x / 32) + warp;
    if (t >= T) return;                         /* whole warps leave together */
    const int *tok = tokens + (size_t)b * T;
    const E *gb = g + (size_t)b * T * C, *gt = gb + (size_t)t * C;
    const int me = tok[t];
    double s = 0.0;
    for (int u0 = 0; u0 <= t; u0 += 32) {
        int u = u0 + lane;
        unsigned match = __ballot_sync(0xffffffffu, u <= t && tok[u <= t ? u : t] == me);
        while (match) {
            int bit = __ffs(match) - 1;
            match &= match - 1;
            int uu = u0 + bit;
            const E *gu = gb + (size_t)uu * C;
            double d = 0.0;
            for (int i = lane; i < C; i += 32) d += (double)ld(gt, i) * ld(gu, i);
            d = kcuda_warp_sum_d(d);
            s += (uu == t ? 1.0 : 2.0) * d;
        }
    }
    if (lane == 0) atomicAdd(&acc[b], s);
}

void dp_embedding_norms_cuda(float *norm2, const int *tokens, const float *g, int B, int T, int C, DpIO *io) {
    dp_embedding_norms_cuda_dt(norm2, tokens, g, B, T, C, KDT_F32, io);
}

void dp_embedding_norms_cuda_dt(float *norm2, const int *tokens, const float *g, int B, int T, int C, KDtype dt, DpIO *io) {
    check_b(B, "dp_embedding_norms");
    if (B <= 0 || T <= 0) return;
    if (dt == KDT_BF16) embedding_norms_kernel<<<dim3((T + 7) / 8, B), 256>>>(acc_ptr(), tokens, (const uint16_t *)g, T, C);
    else embedding_norms_kernel<<<dim3((T + 7) / 8, B), 256>>>(acc_ptr(), tokens, g, T, C);
    cudaLaunchCheck();
    acc_finalize(norm2, B);
    if (io) { io->read += (uint64_t)B * T * (C + 1) * 4; io->written += (uint64_t)B * 4; }
}

/* Tied embeddings' cross term (dp_norms_tied.c): U = D A per sample, D[t,s] = dlogits_s[tok_t], in
   block rows of R: rows i0..i0+ri of D gathered into the scratch (type of dlogits: exact), then
   U[i0:i0+ri] = D_I · A by one strided-batched GEMM over the samples (fp32 accumulation, no TF32). */
template <typename E>
__global__ void tied_gather_kernel(E *d, const int *tokens, const E *dlogits, int T, int V, int i0, size_t stride) {
    const int r = blockIdx.x, b = blockIdx.y;
    const int tok = tokens[(size_t)b * T + i0 + r];
    const E *lg = dlogits + (size_t)b * T * V;
    E *row = d + (size_t)b * stride + (size_t)r * T;
    for (int s = threadIdx.x; s < T; s += blockDim.x) row[s] = lg[(size_t)s * V + tok];
}

void dp_tied_cross_u_cuda_dt(float *u, float *scratch, const int *tokens, const float *dlogits, const float *a,
                             int B, int T, int C, int V, int R, KDtype dt, DpIO *io) {
    check_b(B, "dp_tied_cross_u");
    if (B <= 0 || T <= 0) return;
    if (!scratch) {
        fprintf(stderr, "dp_tied_cross_u (cuda): no scratch (kcuda_tied_cross_floats(B, T, R, dt) floats are needed)\n");
        exit(EXIT_FAILURE);
    }
    R = kcuda_clamp_rows(T, R);
    const size_t stride = (size_t)R * T;
    for (int i0 = 0; i0 < T; i0 += R) {
        const int ri = T - i0 < R ? T - i0 : R;
        if (dt == KDT_BF16)
            tied_gather_kernel<<<dim3(ri, B), 256>>>((uint16_t *)scratch, tokens, (const uint16_t *)dlogits, T, V, i0, stride);
        else tied_gather_kernel<<<dim3(ri, B), 256>>>(scratch, tokens, dlogits, T, V, i0, stride);
        cudaLaunchCheck();
        kcuda_gemm_ex_fp32acc(0, 0, ri, C, T, 1.0f, scratch, T, (long long)stride, a, C, (long long)T * C,
                              0.0f, u + (size_t)i0 * C, C, (long long)T * C, B, dt, KDT_F32);
    }
    if (io) {   /* the CPU's figure (dp_norms_tied.c): D gathered once per block row, A read per block row */
        const uint64_t nblk = (uint64_t)((T + R - 1) / R);
        io->read += (uint64_t)B * nblk * T * 4 + (uint64_t)B * T * (T + 1) * 4 + (uint64_t)B * nblk * T * C * 4;
        io->written += (uint64_t)B * T * C * 4;
    }
}

/* acc[b] += 2 Σ_k g[b·P + k]·u[b·P + k], grid (parts, B). */
template <typename E>
__global__ void tied_cross_dot_kernel(double *acc, const E *g, const float *u, size_t P) {
    __shared__ double sh[32];
    const E *gb = g + blockIdx.y * P;
    const float *ub = u + blockIdx.y * P;
    double s = 0.0;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < P; k += (size_t)gridDim.x * blockDim.x)
        s += (double)ld(gb, k) * ub[k];
    s = kcuda_block_sum_d(s, sh);
    if (threadIdx.x == 0) atomicAdd(&acc[blockIdx.y], 2.0 * s);
}

void dp_tied_cross_dot_cuda_dt(float *norm2, const float *g, const float *u, int B, int T, int C, KDtype dt, DpIO *io) {
    check_b(B, "dp_tied_cross_dot");
    if (B <= 0 || T <= 0) return;
    const size_t P = (size_t)T * C;
    const unsigned parts = dot_parts(P, B);
    if (dt == KDT_BF16) tied_cross_dot_kernel<<<dim3(parts, B), 256>>>(acc_ptr(), (const uint16_t *)g, u, P);
    else tied_cross_dot_kernel<<<dim3(parts, B), 256>>>(acc_ptr(), g, u, P);
    cudaLaunchCheck();
    acc_finalize(norm2, B);
    if (io) { io->read += 2 * (uint64_t)B * P * 4; io->written += (uint64_t)B * 4; }
}

void dp_psg_norms_cuda(float *norm2, const float *psg, int B, size_t P) {
    check_b(B, "dp_psg_norms");
    if (B <= 0) return;
    per_sample_dot(psg, NULL, P, B);
    acc_finalize(norm2, B);
}

/* psg[b, i] = Σ_t dout[b,t,i]·inp[b,t,i]·rstd[b,t] for 32 columns a block: blockDim (32, RMS_PSG_GROUPS),
   group y sums the rows t ≡ y (mod RMS_PSG_GROUPS) in order, then the groups' sums are added in order
   y = 0, 1, ...: the same bits every run. (A thread per column walking all T rows left all but C/256
   blocks of the device idle: at C = 2048, T = 4096 eight SMs read 33 MB per weight, 41 weights a
   sample.) Grid (ceil(C/32), B). */
#define RMS_PSG_GROUPS 32
template <typename E>
__global__ void __launch_bounds__(32 * RMS_PSG_GROUPS, 2)   /* two blocks an SM: at most 32 registers */
rmsnorm_psg_kernel(double *acc, float *psg, const E *dout, const E *inp, const float *rstd, int T, int C) {
    __shared__ float part[RMS_PSG_GROUPS][33];
    const int x = threadIdx.x, y = threadIdx.y, b = blockIdx.y, i = blockIdx.x * 32 + x;
    float s = 0.0f;
    if (i < C)
        for (int t = y; t < T; t += RMS_PSG_GROUPS) {
            size_t r = ((size_t)b * T + t) * C + i;
            s += ld(dout, r) * ld(inp, r) * rstd[(size_t)b * T + t];
        }
    part[y][x] = s;
    __syncthreads();
    if (y != 0) return;
    float tot = 0.0f;
    for (int k = 0; k < RMS_PSG_GROUPS; k++) tot += part[k][x];
    double sq = 0.0;
    if (i < C) { psg[(size_t)b * C + i] = tot; sq = (double)tot * tot; }
    sq = kcuda_warp_sum_d(sq);
    if (x == 0) atomicAdd(&acc[b], sq);
}

void dp_rmsnorm_norms_direct_cuda(float *norm2, float *psg, const float *dout, const float *inp,
                                  const float *rstd, int B, int T, int C) {
    dp_rmsnorm_norms_direct_cuda_dt(norm2, psg, dout, inp, rstd, B, T, C, KDT_F32);
}

void dp_rmsnorm_norms_direct_cuda_dt(float *norm2, float *psg, const float *dout, const float *inp,
                                     const float *rstd, int B, int T, int C, KDtype dt) {
    check_b(B, "dp_rmsnorm_norms_direct");
    if (B <= 0 || C <= 0) return;
    dim3 grid((C + 31) / 32, B), block(32, RMS_PSG_GROUPS);
    if (dt == KDT_BF16)
        rmsnorm_psg_kernel<<<grid, block>>>(acc_ptr(), psg, (const uint16_t *)dout, (const uint16_t *)inp, rstd, T, C);
    else rmsnorm_psg_kernel<<<grid, block>>>(acc_ptr(), psg, dout, inp, rstd, T, C);
    cudaLaunchCheck();
    acc_finalize(norm2, B);
}

__global__ void clip_factors_kernel(float *c, const float *norm2, int B, float max_norm) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    if (!isfinite(norm2[b])) { c[b] = 0.0f; return; }   /* dropped, as the CPU: see dp_clip.c */
    double f = (double)max_norm / (sqrt(fmax((double)norm2[b], 0.0)) + 1e-6);
    c[b] = (float)(f < 1.0 ? f : 1.0);
}

void dp_clip_factors_cuda(float *c, const float *norm2, int B, float max_norm) {
    if (B <= 0) return;
    clip_factors_kernel<<<(B + 127) / 128, 128>>>(c, norm2, B, max_norm);
    cudaLaunchCheck();
}

__global__ void clip_factors_safe_kernel(float *c, const float *norm2, int B, float max_norm, double rel) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    if (!isfinite(norm2[b])) { c[b] = 0.0f; return; }
    double f = (double)max_norm / (sqrt(fmax((double)norm2[b], 0.0)) * (1.0 + rel) + 1e-6);
    if (f >= 1.0) { c[b] = 1.0f; return; }
    c[b] = __double2float_rz(f);   /* rounded toward zero: down, as the CPU's */
}

void dp_clip_factors_safe_cuda(float *c, const float *norm2, int B, float max_norm, double rel) {
    if (B <= 0) return;
    clip_factors_safe_kernel<<<(B + 127) / 128, 128>>>(c, norm2, B, max_norm, rel);
    cudaLaunchCheck();
}

__global__ void clipped_sum_kernel(float *grad, const float *psg, const float *c, int B, size_t P) {
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < P; k += (size_t)gridDim.x * blockDim.x) {
        float acc = grad[k];
        for (int b = 0; b < B; b++)               /* samples in order, c_b = 0 skipped: as the CPU */
            if (c[b] != 0.0f) acc += c[b] * psg[(size_t)b * P + k];
        grad[k] = acc;
    }
}

void dp_clipped_sum_cuda(float *grad, const float *psg, const float *c, int B, size_t P) {
    if (B <= 0 || P == 0) return;
    clipped_sum_kernel<<<kcuda_blocks(P, 256), 256>>>(grad, psg, c, B, P);
    cudaLaunchCheck();
}

__global__ void clipped_sum_first_kernel(float *grad, const float *rest, const float *c, int B, size_t P) {
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < P; k += (size_t)gridDim.x * blockDim.x) {
        float acc = c[0] != 0.0f ? c[0] * grad[k] : 0.0f;   /* grad holds sample 0's gradient */
        for (int b = 1; b < B; b++)
            if (c[b] != 0.0f) acc += c[b] * rest[(size_t)(b - 1) * P + k];
        grad[k] = acc;
    }
}

void dp_clipped_sum_first_cuda(float *grad, const float *rest, const float *c, int B, size_t P) {
    if (B <= 0 || P == 0) return;
    clipped_sum_first_kernel<<<kcuda_blocks(P, 256), 256>>>(grad, rest, c, B, P);
    cudaLaunchCheck();
}

void dp_linear_clipped_grad_bk_cuda(float *dw, const float *a, const float *g, const float *c,
                                    int B, int T, int IC, int OC) {
    dp_linear_clipped_grad_bk_cuda_dt(dw, a, g, c, B, T, IC, OC, KDT_F32);
}

void dp_linear_clipped_grad_bk_cuda_dt(float *dw, const float *a, const float *g, const float *c,
                                       int B, int T, int IC, int OC, KDtype dt) {
    check_b(B, "dp_linear_clipped_grad_bk");
    if (B <= 0) return;
    float ch[KCUDA_MAX_B];
    cudaCheck(cudaMemcpy(ch, c, (size_t)B * sizeof(float), cudaMemcpyDeviceToHost));
    dp_linear_clipped_grad_bk_hostc_cuda_dt(dw, a, g, ch, B, T, IC, OC, dt);
}

void dp_linear_clipped_grad_bk_hostc_cuda_dt(float *dw, const float *a, const float *g, const float *c_host,
                                             int B, int T, int IC, int OC, KDtype dt) {
    check_b(B, "dp_linear_clipped_grad_bk");
    const size_t e = KDT_SIZE(dt);
    for (int b = 0; b < B; b++) {
        if (c_host[b] == 0.0f) continue;
        kcuda_gemm_ex_fp32acc(1, 0, OC, IC, T, c_host[b], (const char *)g + (size_t)b * T * OC * e, OC, 0,
                              (const char *)a + (size_t)b * T * IC * e, IC, 0, 1.0f, dw, IC, 0, 1, dt, KDT_F32);
    }
}

void dp_embedding_clipped_grad_bk_cuda(float *dwte, const int *tokens, const float *g, const float *c,
                                       int B, int T, int C, int V) {
    kcuda_embedding_scatter(dwte, tokens, g, c, B * T, T, C, V);
}

void dp_embedding_clipped_grad_bk_cuda_dt(float *dwte, const int *tokens, const float *g, const float *c,
                                          int B, int T, int C, int V, KDtype dt) {
    kcuda_embedding_scatter_dt(dwte, tokens, g, c, B * T, T, C, V, dt);
}
