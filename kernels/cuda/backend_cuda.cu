/* backend_cuda.cu — the CUDA backend: device memory (the stream-ordered pool; kbuf_alloc tags it in
   the DEVICE space), synchronous transfers, the cuBLAS handle and its tagged workspace, fp32 GEMMs
   through cuBLAS (TF32 tensor cores by default; full fp32, or bf16 tensor cores with the fp32
   tensors as master weights, on request), and the table of CUDA ops.
   Row-major GEMMs map onto column-major cuBLAS by computing Cᵀ = op(B)ᵀ op(A)ᵀ: swap the operands,
   swap M and N, keep the leading dimensions.
   Not here: the ops themselves (one file each beside this one), scratch sizes (scratch_cuda.c). */
#include "cuda_common.cuh"
#include "cuda_no_device.h"
#include "ops_cuda.h"
#include "dpmem.h"

#include <string.h>

static cublasHandle_t g_cublas = NULL;
static void *g_workspace = NULL;   /* the workspace cuBLAS holds: taken back before it is freed */
static int g_prec = KCUDA_GEMM_TF32;
static __device__ float g_one = 1.0f;

cublasHandle_t kcuda_cublas(void) {
    if (!g_cublas) cublasCheck(cublasCreate(&g_cublas));
    return g_cublas;
}
cublasComputeType_t kcuda_compute_type(void) {
    return g_prec == KCUDA_GEMM_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
         : g_prec == KCUDA_GEMM_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F;
}
void kcuda_set_gemm_precision(int p) { g_prec = p == KCUDA_GEMM_FP32 || p == KCUDA_GEMM_BF16 ? p : KCUDA_GEMM_TF32; }
int  kcuda_gemm_precision(void) { return g_prec; }
const char *kcuda_gemm_precision_name(void) {
    return g_prec == KCUDA_GEMM_TF32 ? "tf32" : g_prec == KCUDA_GEMM_BF16 ? "bf16" : "fp32";
}
void kcuda_set_tf32(int on) { g_prec = on ? KCUDA_GEMM_TF32 : KCUDA_GEMM_FP32; }
int  kcuda_tf32(void) { return g_prec == KCUDA_GEMM_TF32; }

const float *kcuda_device_one(void) {
    void *p = NULL;
    cudaCheck(cudaGetSymbolAddress(&p, g_one));
    return (const float *)p;
}

void kcuda_sync_check(const char *where) {
    cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) {
        fprintf(stderr, "[CUDA ERROR] %s: %s (%s)\n", where, cudaGetErrorString(err), cudaGetErrorName(err));
        exit(EXIT_FAILURE);
    }
}

int kcuda_device_available(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) { (void)cudaGetLastError(); return 0; }
    return n > 0;
}

/* Device memory comes from the device's stream-ordered pool (cudaMallocAsync / cudaFreeAsync on the
   default stream, freed blocks kept for reuse: release threshold = all): neither call waits for the
   device, where cudaFree synchronizes it and cudaMalloc costs tens of microseconds to milliseconds, and
   the model allocates and frees every activation each step. kbuf_alloc still tags every allocation at
   its own size, so tagged bytes and plans are unchanged; what the pool holds beyond the live bytes is
   device memory nobody tagged (kcuda_pool_reserved, the trainer prints it). DPMEM_CUDA_ALLOC=sync
   goes back to cudaMalloc/cudaFree (to measure what the pool saves). Blocks are zero-filled on the
   stream (kernels.h does not ask for it; a reused block would otherwise hold the last user's bytes). */
static int g_pool = -1;                          /* -1: not read yet */
static unsigned long long g_allocs, g_frees;     /* calls since the start, for the per-step count */

static cudaMemPool_t default_pool(void) {
    int dev = 0;
    cudaMemPool_t mp;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaDeviceGetDefaultMemPool(&mp, dev));
    return mp;
}

static int use_pool(void) {
    if (g_pool < 0) {
        const char *e = getenv("DPMEM_CUDA_ALLOC");
        g_pool = !(e && !strcmp(e, "sync"));
        unsigned long long keep = ~0ull;   /* freed blocks stay in the pool until kbackend_destroy */
        if (g_pool) cudaCheck(cudaMemPoolSetAttribute(default_pool(), cudaMemPoolAttrReleaseThreshold, &keep));
    }
    return g_pool;
}

/* DPMEM_CUDA_POISON=1: kbuf_alloc_overwritten's buffers are NaN bytes, not left as they were: a reader that
   counts on zeros (or on anything) then fails its test (gpu_session.sh runs test_dp_cuda_gpu so). */
static int poison_overwritten(void) {
    static int v = -1;
    if (v < 0) { const char *e = getenv("DPMEM_CUDA_POISON"); v = e && *e && strcmp(e, "0") != 0; }
    return v;
}

static void *cuda_alloc(KBackend *b, size_t bytes) {
    void *p = NULL;
    g_allocs++;
    if (use_pool()) {
        cudaError_t err = cudaMallocAsync(&p, bytes, 0);
        if (err == cudaErrorMemoryAllocation) {      /* the pool's cached blocks back to the device, once */
            (void)cudaGetLastError();
            cudaCheck(cudaDeviceSynchronize());
            cudaCheck(cudaMemPoolTrimTo(default_pool(), 0));
            err = cudaMallocAsync(&p, bytes, 0);
        }
        if (err == cudaErrorMemoryAllocation) { (void)cudaGetLastError(); return NULL; }  /* kbuf_alloc reports it */
        cudaCheck(err);
    } else {
        cudaError_t err = cudaMalloc(&p, bytes);
        if (err == cudaErrorMemoryAllocation) { (void)cudaGetLastError(); return NULL; }
        cudaCheck(err);
    }
    /* zeros, as cudaMalloc'd memory used to read here (one write pass), unless the caller writes it all first */
    if (!b->overwritten) cudaCheck(cudaMemsetAsync(p, 0, bytes, 0));
    else if (poison_overwritten()) cudaCheck(cudaMemsetAsync(p, 0xFF, bytes, 0));
    return p;
}
static void cuda_free(KBackend *b, void *p) {
    (void)b;
    g_frees++;
    if (p == g_workspace) {
        /* kbackend_destroy frees the workspace last (it is the backend's first allocation): the backend
           is going away, so the handle goes with it. Kept alive, cuBLAS would hold a dangling workspace,
           and the handle's own device memory would still be allocated at exit, which compute-sanitizer
           --leak-check full (test_cuda_ops_sanitize.sh) reports as leaks. The next kbackend_cuda_init
           (or a DP GEMM) creates a new handle. */
        if (g_cublas) cublasCheck(cublasDestroy(g_cublas));
        g_cublas = NULL;
        kcuda_attention_cudnn_release();
        g_workspace = NULL;
    }
    if (use_pool()) {
        cudaCheck(cudaFreeAsync(p, 0));
        if (!g_workspace) {                          /* the backend is gone: give the pool's blocks back */
            cudaCheck(cudaDeviceSynchronize());
            cudaCheck(cudaMemPoolTrimTo(default_pool(), 0));
        }
    } else {
        cudaCheck(cudaFree(p));
    }
}

void kcuda_alloc_counts(unsigned long long *allocs, unsigned long long *frees) {
    *allocs = g_allocs; *frees = g_frees;
}
int kcuda_alloc_pooled(void) { return use_pool(); }
size_t kcuda_pool_reserved(size_t *high) {
    unsigned long long cur = 0, hi = 0;
    if (!use_pool()) { if (high) *high = 0; return 0; }
    cudaMemPool_t mp = default_pool();
    cudaCheck(cudaMemPoolGetAttribute(mp, cudaMemPoolAttrReservedMemCurrent, &cur));
    cudaCheck(cudaMemPoolGetAttribute(mp, cudaMemPoolAttrReservedMemHigh, &hi));
    if (high) *high = (size_t)hi;
    return (size_t)cur;
}
static int cuda_meminfo(KBackend *b, size_t *used, size_t *total) {
    (void)b;
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) { (void)cudaGetLastError(); return -1; }
    *used = total_bytes - free_bytes; *total = total_bytes;
    return 0;
}
static void cuda_upload(KBackend *b, void *dst, const void *src, size_t n) {
    (void)b; cudaCheck(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
}
static void cuda_download(KBackend *b, void *dst, const void *src, size_t n) {
    (void)b; cudaCheck(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
}

static void gemm_with(cublasComputeType_t ct, int transA, int transB, int M, int N, int K, float alpha,
                      const float *A, int lda, long long strideA, const float *B, int ldb, long long strideB,
                      float beta, float *C, int ldc, long long strideC, int batch) {
    cublasHandle_t h = kcuda_cublas();
    cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N, opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    /* strideC == 0 with batch > 1 accumulates into one C (the CPU loop allows it): batches in order. */
    int calls = (strideC == 0 && batch > 1) ? batch : 1, per = calls > 1 ? 1 : batch;
    for (int i = 0; i < calls; i++)
        cublasCheck(cublasGemmStridedBatchedEx(h, opB, opA, N, M, K, &alpha,
                                               B + i * strideB, CUDA_R_32F, ldb, strideB,
                                               A + i * strideA, CUDA_R_32F, lda, strideA, &beta,
                                               C, CUDA_R_32F, ldc, strideC, per,
                                               ct, CUBLAS_GEMM_DEFAULT));
}

void gemm_cuda(KBackend *b, int transA, int transB, int M, int N, int K, float alpha,
               const float *A, int lda, long long strideA, const float *B, int ldb, long long strideB,
               float beta, float *C, int ldc, long long strideC, int batch) {
    (void)b;
    gemm_with(kcuda_compute_type(), transA, transB, M, N, K, alpha, A, lda, strideA, B, ldb, strideB,
              beta, C, ldc, strideC, batch);
}

void kcuda_gemm_fp32(int transA, int transB, int M, int N, int K, float alpha,
                     const float *A, int lda, long long strideA, const float *B, int ldb, long long strideB,
                     float beta, float *C, int ldc, long long strideC, int batch) {
    gemm_with(CUBLAS_COMPUTE_32F, transA, transB, M, N, K, alpha, A, lda, strideA, B, ldb, strideB,
              beta, C, ldc, strideC, batch);
}

/* bf16 operands (CUDA_R_16BF) with fp32 accumulation, fp32 or bf16 output: the products of
   --precision bf16. CUBLAS_COMPUTE_32F: bf16 products are exact in fp32, the sums fp32. */
static cudaDataType_t cuda_type(KDtype t) { return t == KDT_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

void kcuda_gemm_ex_fp32acc(int transA, int transB, int M, int N, int K, float alpha,
                           const void *A, int lda, long long strideA, const void *B, int ldb, long long strideB,
                           float beta, void *C, int ldc, long long strideC, int batch, KDtype ab, KDtype c) {
    cublasHandle_t h = kcuda_cublas();
    cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N, opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    const size_t eab = KDT_SIZE(ab), ec = KDT_SIZE(c);
    int calls = (strideC == 0 && batch > 1) ? batch : 1, per = calls > 1 ? 1 : batch;
    for (int i = 0; i < calls; i++)
        cublasCheck(cublasGemmStridedBatchedEx(h, opB, opA, N, M, K, &alpha,
                                               (const char *)B + (size_t)(i * strideB) * eab, cuda_type(ab), ldb, strideB,
                                               (const char *)A + (size_t)(i * strideA) * eab, cuda_type(ab), lda, strideA, &beta,
                                               C, cuda_type(c), ldc, strideC, per,
                                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    (void)ec;
}

void gemm_ex_cuda(KBackend *b, int transA, int transB, int M, int N, int K, float alpha,
                  const void *A, int lda, long long strideA, const void *B, int ldb, long long strideB,
                  float beta, void *C, int ldc, long long strideC, int batch, KDtype ab, KDtype c, void *scratch) {
    (void)b; (void)scratch;
    kcuda_gemm_ex_fp32acc(transA, transB, M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC,
                          batch, ab, c);
}

extern "C" const KOps kops_cuda = {
    .name = "cuda", .space = DPMEM_DEVICE,
    .alloc = cuda_alloc, .free = cuda_free, .meminfo = cuda_meminfo, .upload = cuda_upload, .download = cuda_download,
    .scratch_bytes = kcuda_scratch_bytes,
    .gemm = gemm_cuda, .fill = fill_cuda, .copy = copy_cuda, .add = add_cuda, .scale = scale_cuda,
    .sum = sum_cuda, .sumsq = sumsq_cuda, .count_nonfinite = count_nonfinite_cuda,
    .embedding_forward = embedding_forward_cuda, .embedding_backward = embedding_backward_cuda,
    .rmsnorm_forward = rmsnorm_forward_cuda, .rmsnorm_backward = rmsnorm_backward_cuda,
    .rope_forward = rope_forward_cuda, .rope_backward = rope_backward_cuda,
    .attention_forward = attention_forward_cuda, .attention_backward = attention_backward_cuda,
    .swiglu_forward = swiglu_forward_cuda, .swiglu_backward = swiglu_backward_cuda,
    .crossentropy_forward = crossentropy_forward_cuda, .crossentropy_backward = crossentropy_backward_cuda,
    .adamw = adamw_cuda, .sgd = sgd_cuda,
    .gemm_ex = gemm_ex_cuda, .widen = widen_cuda, .narrow = narrow_cuda, .narrow_inplace = narrow_inplace_cuda,
    .copy_bytes = copy_bytes_cuda, .zero_bytes = zero_bytes_cuda,
    .init_normal = init_normal_cuda,
    .bf16_native = 1,
    .embedding_forward_bf16 = embedding_forward_bf16_cuda, .embedding_backward_bf16 = embedding_backward_bf16_cuda,
    .rmsnorm_forward_bf16 = rmsnorm_forward_bf16_cuda, .rmsnorm_backward_bf16 = rmsnorm_backward_bf16_cuda,
    .rope_forward_bf16 = rope_forward_bf16_cuda, .rope_backward_bf16 = rope_backward_bf16_cuda,
    .attention_forward_bf16 = attention_forward_bf16_cuda, .attention_backward_bf16 = attention_backward_bf16_cuda,
    .swiglu_forward_bf16 = swiglu_forward_bf16_cuda, .swiglu_backward_bf16 = swiglu_backward_bf16_cuda,
};

int kbackend_cuda_init(KBackend *b, int device) {
    memset(b, 0, sizeof *b);
    b->kind = KB_CUDA;
    b->ops = b->target = &kops_cuda;
    b->space = kops_cuda.space;
    b->nthreads = 1;
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess || n == 0) {
        (void)cudaGetLastError();
        char why[160];
        snprintf(b->err, sizeof b->err, "no CUDA device: %s: use --device cpu", kcuda_no_device_reason(err, why, sizeof why));
        return -1;
    }
    if (device >= n) {
        snprintf(b->err, sizeof b->err, "CUDA device %d does not exist (%d found)", device, n);
        return -1;
    }
    if (device >= 0) cudaCheck(cudaSetDevice(device));
    const char *tf = getenv("DPMEM_CUDA_TF32"), *gm = getenv("DPMEM_CUDA_GEMM");
    if (tf && *tf) kcuda_set_tf32(strcmp(tf, "0") != 0);
    if (gm && *gm) {
        if (!strcmp(gm, "fp32")) kcuda_set_gemm_precision(KCUDA_GEMM_FP32);
        else if (!strcmp(gm, "tf32")) kcuda_set_gemm_precision(KCUDA_GEMM_TF32);
        else if (!strcmp(gm, "bf16")) kcuda_set_gemm_precision(KCUDA_GEMM_BF16);
        else {
            snprintf(b->err, sizeof b->err, "DPMEM_CUDA_GEMM must be fp32, tf32 or bf16, got '%s'", gm);
            return -1;
        }
    }
    cublasHandle_t h = kcuda_cublas();
    void *ws = kcuda_alloc_cublas_workspace(b);
    if (!ws) return -1;   /* b->err says out of memory */
    cublasCheck(cublasSetWorkspace(h, ws, KCUDA_CUBLAS_WORKSPACE));
    g_workspace = ws;
    return 0;
}
