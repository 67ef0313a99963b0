/* attention.cu — causal grouped-query attention on the GPU, flash-style: nothing of size T×T is ever
   stored. Layout as kernels.h: q, out [B,T,NH,HS]; k, v [B,T,NKV,HS]; lse [B,NH,T]; scores scaled by
   1/sqrt(HS); query head h reads kv head h / (NH/NKV).

   Forward: a block owns ATT_ROWS consecutive query rows of one (sequence, head), one warp per row.
   Tiles of ATT_KT = 32 keys and values go through shared memory (each read once per block, not once
   per row); lane j scores key j of the tile (dot product in the CPU's order), the warp keeps the
   running max m and denominator l (online softmax) and each lane accumulates HS/32 output dims in
   registers. Only out and lse = m + log l leave the chip.
   Backward (FlashAttention-2's split, probabilities recomputed from q, k and lse):
     delta = rowsum(dout ∘ out)                     [B,NH,T] scratch, as the CPU
     dq: per query row, stream key tiles:          ds = p (dout·v − delta) / sqrt(HS), dq += ds k
     dk, dv: per key row, stream query tiles of every head of its group (i ≥ j):
                                                   dv += p dout, dk += ds q
   Each output row has exactly one owner warp: no atomics, deterministic, dq/dk/dv overwritten.

   Limits: HS ≤ 128 (4 registers per lane; shared memory stays under the default 48 KiB), fp32 CUDA
   cores (no tensor cores yet: at T = 16384 this is the step's slowest kernel, see docs/CUDA_BACKEND.md).
   Not here: masks other than causal, dropout, KV cache. */
#include "cuda_common.cuh"
#include "ops_cuda.h"

#define ATT_KT   32   /* keys (or queries) per shared-memory tile: one per lane */
#define ATT_ROWS 8    /* rows per block: one per warp */
#define ATT_MAX_HS 128
#define FULL 0xffffffffu

/* Row stride of the tiles that lane j reads row j of. When HS % 4 == 0 rows are read as float4
   (one 128-bit shared load per 4 FMAs) and the pad keeps each group of 8 lanes on distinct banks:
   (HSP/4) odd. Otherwise scalar reads and a pad of 1. */
__host__ __device__ __forceinline__ int att_hsp(int HS) {
    return HS % 4 ? HS + 1 : HS + (HS % 8 ? 8 : 4);
}

/* a·b over HS floats, summed in index order (the CPU's order); float4 reads when HS % 4 == 0 (both
   rows 16-byte aligned then: every tile offset and stride is a multiple of 4 floats). */
__device__ __forceinline__ float att_dot(const float *a, const float *b, int HS) {
    float s = 0.0f;
    if (HS % 4 == 0) {
        const float4 *a4 = (const float4 *)a, *b4 = (const float4 *)b;
        for (int d = 0; d < HS / 4; d++) {
            float4 x = a4[d], y = b4[d];
            s += x.x * y.x; s += x.y * y.y; s += x.z * y.z; s += x.w * y.w;
        }
    } else {
        for (int d = 0; d < HS; d++) s += a[d] * b[d];
    }
    return s;
}

template <int DM>
__global__ void __launch_bounds__(ATT_ROWS * 32)
attention_forward_kernel(float *out, float *lse, const float *q, const float *k, const float *v,
                         int T, int NH, int NKV, int HS, float scale) {
    extern __shared__ float4 sm4[];              /* float4: 16-byte aligned base */
    float *sm = (float *)sm4;
    const int HSP = att_hsp(HS);                 /* padded: lane j reads row j without bank conflicts */
    float *ks = sm, *vs = ks + ATT_KT * HSP, *qs = vs + ATT_KT * HS;
    const int bb = blockIdx.z, h = blockIdx.y, kh = h / (NH / NKV);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int row0 = blockIdx.x * ATT_ROWS, i = row0 + warp;
    const int last = min(row0 + ATT_ROWS, T) - 1;
    const size_t qstr = (size_t)NH * HS, kstr = (size_t)NKV * HS;
    const float *kb = k + (size_t)bb * T * kstr + (size_t)kh * HS, *vb = v + (size_t)bb * T * kstr + (size_t)kh * HS;
    float *qr = qs + warp * HS;
    if (i < T)
        for (int d = lane; d < HS; d += 32) qr[d] = q[((size_t)bb * T + i) * qstr + (size_t)h * HS + d];
    float acc[DM];
    for (int r = 0; r < DM; r++) acc[r] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int j0 = 0; j0 <= last; j0 += ATT_KT) {
        __syncthreads();                         /* the previous tile is consumed; qs is visible */
        for (int e = threadIdx.x; e < ATT_KT * HS; e += blockDim.x) {
            int jj = e / HS, d = e % HS, j = j0 + jj;
            ks[jj * HSP + d] = j < T ? kb[(size_t)j * kstr + d] : 0.0f;
            vs[jj * HS + d] = j < T ? vb[(size_t)j * kstr + d] : 0.0f;
        }
        __syncthreads();
        if (i >= T || j0 > i) continue;          /* warp-uniform */
        const int j = j0 + lane;
        float s = -INFINITY;
        if (j <= i) s = att_dot(qr, ks + lane * HSP, HS) * scale;
        float mnew = fmaxf(m, kcuda_warp_max(s)); /* finite: key j0 ≤ i is in the tile */
        float corr = expf(m - mnew);              /* 0 on the first tile (m = -inf) */
        float p = j <= i ? expf(s - mnew) : 0.0f;
        l = l * corr + kcuda_warp_sum(p);
        for (int r = 0; r < DM; r++) acc[r] *= corr;
        const int nval = min(ATT_KT, i - j0 + 1);
        for (int jj = 0; jj < nval; jj++) {
            float pj = __shfl_sync(FULL, p, jj);
            for (int r = 0; r < DM; r++) {
                int d = lane + 32 * r;
                if (d < HS) acc[r] += pj * vs[jj * HS + d];
            }
        }
        m = mnew;
    }
    if (i < T) {
        float *o = out + ((size_t)bb * T + i) * qstr + (size_t)h * HS;
        for (int r = 0; r < DM; r++) {
            int d = lane + 32 * r;
            if (d < HS) o[d] = acc[r] / l;
        }
        if (lane == 0) lse[((size_t)bb * NH + h) * T + i] = m + logf(l);
    }
}

/* delta[b,h,t] = dout·out over the head's HS dims; one warp per (b, t, h) row. */
__global__ void attention_delta_kernel(float *delta, const float *dout, const float *out, int B, int T, int NH, int HS) {
    size_t row = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (row >= (size_t)B * T * NH) return;       /* whole warps leave together */
    const float *a = dout + row * HS, *c = out + row * HS;
    float s = 0.0f;
    for (int d = lane; d < HS; d += 32) s += a[d] * c[d];
    s = kcuda_warp_sum(s);
    int h = (int)(row % NH);
    size_t bt = row / NH;
    int t = (int)(bt % T), bb = (int)(bt / T);
    if (lane == 0) delta[((size_t)bb * NH + h) * T + t] = s;
}

template <int DM>
__global__ void __launch_bounds__(ATT_ROWS * 32)
attention_backward_dq_kernel(float *dq, const float *dout, const float *q, const float *k, const float *v,
                             const float *lse, const float *delta, int T, int NH, int NKV, int HS, float scale) {
    extern __shared__ float4 sm4[];
    float *sm = (float *)sm4;
    const int HSP = att_hsp(HS);
    float *ks = sm, *vs = ks + ATT_KT * HSP, *qs = vs + ATT_KT * HSP, *ds_ = qs + ATT_ROWS * HS;
    const int bb = blockIdx.z, h = blockIdx.y, kh = h / (NH / NKV);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int row0 = blockIdx.x * ATT_ROWS, i = row0 + warp;
    const int last = min(row0 + ATT_ROWS, T) - 1;
    const size_t qstr = (size_t)NH * HS, kstr = (size_t)NKV * HS;
    const float *kb = k + (size_t)bb * T * kstr + (size_t)kh * HS, *vb = v + (size_t)bb * T * kstr + (size_t)kh * HS;
    float *qr = qs + warp * HS, *dor = ds_ + warp * HS;
    float L = 0.0f, D = 0.0f;
    if (i < T) {
        size_t r = ((size_t)bb * T + i) * qstr + (size_t)h * HS;
        for (int d = lane; d < HS; d += 32) { qr[d] = q[r + d]; dor[d] = dout[r + d]; }
        L = lse[((size_t)bb * NH + h) * T + i];
        D = delta[((size_t)bb * NH + h) * T + i];
    }
    float acc[DM];
    for (int r = 0; r < DM; r++) acc[r] = 0.0f;
    for (int j0 = 0; j0 <= last; j0 += ATT_KT) {
        __syncthreads();
        for (int e = threadIdx.x; e < ATT_KT * HS; e += blockDim.x) {
            int jj = e / HS, d = e % HS, j = j0 + jj;
            ks[jj * HSP + d] = j < T ? kb[(size_t)j * kstr + d] : 0.0f;
            vs[jj * HSP + d] = j < T ? vb[(size_t)j * kstr + d] : 0.0f;
        }
        __syncthreads();
        if (i >= T || j0 > i) continue;
        const int j = j0 + lane;
        float ds = 0.0f;
        if (j <= i) {
            float sdot = att_dot(qr, ks + lane * HSP, HS), pdot = att_dot(dor, vs + lane * HSP, HS);
            float p = expf(sdot * scale - L);
            ds = p * (pdot - D) * scale;
        }
        const int nval = min(ATT_KT, i - j0 + 1);
        for (int jj = 0; jj < nval; jj++) {
            float dsj = __shfl_sync(FULL, ds, jj);
            for (int r = 0; r < DM; r++) {
                int d = lane + 32 * r;
                if (d < HS) acc[r] += dsj * ks[jj * HSP + d];
            }
        }
    }
    if (i < T) {
        float *o = dq + ((size_t)bb * T + i) * qstr + (size_t)h * HS;
        for (int r = 0; r < DM; r++) {
            int d = lane + 32 * r;
            if (d < HS) o[d] = acc[r];
        }
    }
}

template <int DM>
__global__ void __launch_bounds__(ATT_ROWS * 32)
attention_backward_dkv_kernel(float *dk, float *dv, const float *dout, const float *q, const float *k, const float *v,
                              const float *lse, const float *delta, int T, int NH, int NKV, int HS, float scale) {
    extern __shared__ float4 sm4[];
    float *sm = (float *)sm4;
    const int HSP = att_hsp(HS);
    float *qs = sm, *dos = qs + ATT_KT * HSP, *kr_ = dos + ATT_KT * HSP, *vr_ = kr_ + ATT_ROWS * HS;
    float *Ls = vr_ + ATT_ROWS * HS, *Ds = Ls + ATT_KT;
    const int bb = blockIdx.z, kh = blockIdx.y, group = NH / NKV;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int row0 = blockIdx.x * ATT_ROWS, j = row0 + warp;
    const size_t qstr = (size_t)NH * HS, kstr = (size_t)NKV * HS;
    float *kr = kr_ + warp * HS, *vr = vr_ + warp * HS;
    if (j < T) {
        size_t r = ((size_t)bb * T + j) * kstr + (size_t)kh * HS;
        for (int d = lane; d < HS; d += 32) { kr[d] = k[r + d]; vr[d] = v[r + d]; }
    }
    float adk[DM], adv[DM];
    for (int r = 0; r < DM; r++) adk[r] = adv[r] = 0.0f;
    for (int h = kh * group; h < (kh + 1) * group; h++) {
        const float *qb = q + (size_t)bb * T * qstr + (size_t)h * HS, *db = dout + (size_t)bb * T * qstr + (size_t)h * HS;
        const float *lb = lse + ((size_t)bb * NH + h) * T, *deb = delta + ((size_t)bb * NH + h) * T;
        for (int i0 = row0; i0 < T; i0 += ATT_KT) {  /* queries i ≥ j ≥ row0 see these keys */
            __syncthreads();
            for (int e = threadIdx.x; e < ATT_KT * HS; e += blockDim.x) {
                int ii = e / HS, d = e % HS, i = i0 + ii;
                qs[ii * HSP + d] = i < T ? qb[(size_t)i * qstr + d] : 0.0f;
                dos[ii * HSP + d] = i < T ? db[(size_t)i * qstr + d] : 0.0f;
            }
            if (threadIdx.x < ATT_KT) {
                int i = i0 + threadIdx.x;
                Ls[threadIdx.x] = i < T ? lb[i] : 0.0f;
                Ds[threadIdx.x] = i < T ? deb[i] : 0.0f;
            }
            __syncthreads();
            if (j >= T) continue;                    /* warp-uniform */
            const int i = i0 + lane;
            float p = 0.0f, ds = 0.0f;
            if (i < T && i >= j) {
                float sdot = att_dot(qs + lane * HSP, kr, HS), pdot = att_dot(dos + lane * HSP, vr, HS);
                p = expf(sdot * scale - Ls[lane]);
                ds = p * (pdot - Ds[lane]) * scale;
            }
            for (int ii = 0; ii < ATT_KT; ii++) {
                float pi = __shfl_sync(FULL, p, ii), dsi = __shfl_sync(FULL, ds, ii);
                for (int r = 0; r < DM; r++) {
                    int d = lane + 32 * r;
                    if (d < HS) { adv[r] += pi * dos[ii * HSP + d]; adk[r] += dsi * qs[ii * HSP + d]; }
                }
            }
        }
    }
    if (j < T) {
        size_t r0 = ((size_t)bb * T + j) * kstr + (size_t)kh * HS;
        for (int r = 0; r < DM; r++) {
            int d = lane + 32 * r;
            if (d < HS) { dk[r0 + d] = adk[r]; dv[r0 + d] = adv[r]; }
        }
    }
}

static void check_shape(int NH, int NKV, int HS) {
    if (HS < 1 || HS > ATT_MAX_HS || NKV < 1 || NH % NKV != 0) {
        fprintf(stderr, "attention (cuda): unsupported shape NH=%d NKV=%d HS=%d (needs HS <= %d, NH a multiple of NKV)\n",
                NH, NKV, HS, ATT_MAX_HS);
        exit(EXIT_FAILURE);
    }
}

/* Dynamic shared memory above 48 KiB needs an opt-in attribute per kernel; the tile sizes keep every
   kernel under it for HS ≤ 128 (at most 42 KiB). Checked so that a change of the constants fails loudly. */
static void check_smem(size_t bytes) {
    if (bytes > 48 * 1024) {
        fprintf(stderr, "attention (cuda): %zu bytes of shared memory per block exceed 48 KiB (ATT_KT/ATT_ROWS too large)\n", bytes);
        exit(EXIT_FAILURE);
    }
}

#define ATT_DISPATCH(HS, launch) \
    switch (((HS) + 31) / 32) { case 1: launch(1); break; case 2: launch(2); break; case 3: launch(3); break; default: launch(4); }

void attention_forward_cuda(KBackend *b, float *out, float *lse, const float *q, const float *k, const float *v,
                            int B, int T, int NH, int NKV, int HS, void *scratch) {
    (void)b; (void)scratch;
    if (B <= 0 || T <= 0) return;
    check_shape(NH, NKV, HS);
    dim3 grid((T + ATT_ROWS - 1) / ATT_ROWS, NH, B);
    size_t shmem = (size_t)(ATT_KT * att_hsp(HS) + ATT_KT * HS + ATT_ROWS * HS) * sizeof(float);
    float scale = 1.0f / sqrtf((float)HS);
    check_smem(shmem);
#define LAUNCH_F(DM) attention_forward_kernel<DM><<<grid, ATT_ROWS * 32, shmem>>>(out, lse, q, k, v, T, NH, NKV, HS, scale)
    ATT_DISPATCH(HS, LAUNCH_F);
    cudaLaunchCheck();
}

void attention_backward_cuda(KBackend *b, float *dq, float *dk, float *dv, const float *dout, const float *q,
                             const float *k, const float *v, const float *out, const float *lse,
                             int B, int T, int NH, int NKV, int HS, void *scratch) {
    (void)b;
    if (B <= 0 || T <= 0) return;
    check_shape(NH, NKV, HS);
    float *delta = (float *)scratch, scale = 1.0f / sqrtf((float)HS);
    size_t rows = (size_t)B * T * NH;
    attention_delta_kernel<<<(unsigned)((rows * 32 + 255) / 256), 256>>>(delta, dout, out, B, T, NH, HS);
    cudaLaunchCheck();
    dim3 gq((T + ATT_ROWS - 1) / ATT_ROWS, NH, B), gk((T + ATT_ROWS - 1) / ATT_ROWS, NKV, B);
    size_t sq = (size_t)(2 * ATT_KT * att_hsp(HS) + 2 * ATT_ROWS * HS) * sizeof(float);
    size_t sk = (size_t)(2 * ATT_KT * att_hsp(HS) + 2 * ATT_ROWS * HS + 2 * ATT_KT) * sizeof(float);
    check_smem(sq);
    check_smem(sk);
#define LAUNCH_DQ(DM) attention_backward_dq_kernel<DM><<<gq, ATT_ROWS * 32, sq>>>(dq, dout, q, k, v, lse, delta, T, NH, NKV, HS, scale)
#define LAUNCH_DKV(DM) attention_backward_dkv_kernel<DM><<<gk, ATT_ROWS * 32, sk>>>(dk, dv, dout, q, k, v, lse, delta, T, NH, NKV, HS, scale)
    ATT_DISPATCH(HS, LAUNCH_DQ);
    cudaLaunchCheck();
    ATT_DISPATCH(HS, LAUNCH_DKV);
    cudaLaunchCheck();
}
