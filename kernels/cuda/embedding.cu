/* embedding.cu — token embedding lookup and its backward on the GPU. The backward gives each thread
   one column of the table and walks all N rows in order, a group of rows in flight at once
   (embedding_walk.h): no atomics, so the result is the same bits every run and equals the CPU's order
   of additions; no scratch. Book-keeping DP reuses the scatter
   with a per-sample weight (kcuda_embedding_scatter). A token outside [0, V) reads and writes nothing
   (the forward's row is zeros) and is counted on the device: kcuda_bad_tokens() reads the count where
   the caller synchronises anyway (no read-back per launch).
   Not here: sorting tokens for very large N (the column walk is fast enough for N = B·T ≤ ~64k). */
#include "cuda_common.cuh"
#include "ops_cuda.h"
#include "storage.cuh"
#include "embedding_walk.h"

/* rows given a token outside [0, V) since the last kcuda_bad_tokens() (a row counts once, not per column) */
__device__ unsigned long long kcuda_bad_token_rows;

/* out (fp32 or bf16: E) = rows of the fp32 table (V rows) */
template <typename E>
__global__ void embedding_forward_kernel(E *out, const int *tokens, const float *wte, int N, int C, int V) {
    size_t total = (size_t)N * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / C, c = i % C;
        const int t = tokens[n];
        if (t < 0 || t >= V) {
            st(out, i, 0.0f);
            if (c == 0) atomicAdd(&kcuda_bad_token_rows, 1ull);
            continue;
        }
        st(out, i, wte[(size_t)t * C + c]);
    }
}

/* Column c of the table, rows in order (embedding_walk.h: a group of rows in flight at once); w == NULL:
   weight 1, else w[n / T]. dout fp32 or bf16 (E). */
struct LoadElement {
    template <typename E> __device__ __forceinline__ float operator()(const E *p, size_t i) const { return ld(p, i); }
};
template <typename E>
__global__ void embedding_scatter_kernel(float *dwte, const int *tokens, const E *dout, const float *w,
                                         int N, int T, int C, int V) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const int bad = embedding_walk_column(dwte, tokens, dout, w, N, T, C, V, c, LoadElement());
    if (bad && c == 0) atomicAdd(&kcuda_bad_token_rows, (unsigned long long)bad);
}

unsigned long long kcuda_bad_tokens(void) {
    unsigned long long n = 0, zero = 0;
    cudaCheck(cudaMemcpyFromSymbol(&n, kcuda_bad_token_rows, sizeof n));
    if (n) cudaCheck(cudaMemcpyToSymbol(kcuda_bad_token_rows, &zero, sizeof zero));
    return n;
}

/* The embedding forward has no V in the ops table (kernels.h): the table's rows are not known here, so
   the forward's bound is INT_MAX; the backward's V checks the same tokens before any write. */
void embedding_forward_cuda(KBackend *b, float *out, const int *tokens, const float *wte, int N, int C) {
    (void)b;
    embedding_forward_kernel<<<kcuda_blocks((size_t)N * C, 256), 256>>>(out, tokens, wte, N, C, INT_MAX);
    cudaLaunchCheck();
}

void kcuda_embedding_scatter_dt(float *dwte, const int *tokens, const void *dout, const float *w, int N, int T, int C,
                                int V, KDtype dt) {
    if (N <= 0 || C <= 0) return;
    if (dt == KDT_BF16) embedding_scatter_kernel<<<(C + 127) / 128, 128>>>(dwte, tokens, (const uint16_t *)dout, w, N, T, C, V);
    else embedding_scatter_kernel<<<(C + 127) / 128, 128>>>(dwte, tokens, (const float *)dout, w, N, T, C, V);
    cudaLaunchCheck();
}

void kcuda_embedding_scatter(float *dwte, const int *tokens, const float *dout, const float *w, int N, int T, int C, int V) {
    kcuda_embedding_scatter_dt(dwte, tokens, dout, w, N, T, C, V, KDT_F32);
}

void embedding_backward_cuda(KBackend *b, float *dwte, const int *tokens, const float *dout, int N, int C, int V,
                             void *scratch) {
    (void)b; (void)scratch;
    kcuda_embedding_scatter(dwte, tokens, dout, NULL, N, 1, C, V);
}

void embedding_forward_bf16_cuda(KBackend *b, void *out, const int *tokens, const float *wte, int N, int C) {
    (void)b;
    embedding_forward_kernel<<<kcuda_blocks((size_t)N * C, 256), 256>>>((uint16_t *)out, tokens, wte, N, C, INT_MAX);
    cudaLaunchCheck();
}
void embedding_backward_bf16_cuda(KBackend *b, float *dwte, const int *tokens, const void *dout, int N, int C, int V,
                                  void *scratch) {
    (void)b; (void)scratch;
    kcuda_embedding_scatter_dt(dwte, tokens, dout, NULL, N, 1, C, V, KDT_BF16);
}
