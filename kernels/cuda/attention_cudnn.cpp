/* attention_cudnn.cpp — causal GQA attention on bf16 storage through cuDNN's fused flash attention
   (the graph API of cuDNN's C++ frontend, as llm.c's cudnn_att.cpp), for --precision bf16 on CUDA.
   q [B,T,NH,HS], k and v [B,T,NKV,HS], out [B,T,NH,HS] bf16; lse [B,NH,T] fp32, the natural log of
   each row's softmax denominator over scores scaled by 1/sqrt(HS): cuDNN's "Stats", the same quantity
   attention.cu and the CPU save (tests/test_cuda_kernels.cu compares both with the CPU).
   One graph per shape and direction, built on first use and cached for the process. The workspace is
   the caller's (kbuf_alloc'd scratch, kcuda_attention_cudnn_workspace bytes, a bound that keeps plans
   exact): an engine asking for more stops the run with one line naming both sizes.
   The backward is cuDNN's default algorithm, which sums dQ with atomics (not the same bits every run,
   unlike every other op here): its deterministic one asked for 8 KiB of workspace per query row at
   T = 4096 (537 MB a layer for the 1b preset on an H200, cuDNN 9.19; T/256 partial dQ rows each), 16×
   what the default needs, growing with T.
   Host code only, compiled by the C++ compiler (the frontend's headers are host C++17).
   Not here: fp32 attention (attention.cu), dropout, padding masks, a KV cache. */
#include <cudnn_frontend.h>
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <stdio.h>
#include <stdlib.h>
#include <tuple>

#include "kernels_cuda.h"
#include "ops_cuda.h"

namespace fe = cudnn_frontend;

static void cudnn_fe_check(fe::error_t e, const char *what, const char *file, int line) {
    if (e.is_good()) return;
    fprintf(stderr, "[cuDNN ERROR] at %s:%d: %s: %s\n", file, line, what, e.get_message().c_str());
    exit(EXIT_FAILURE);
}
#define cudnnFECheck(expr, what) cudnn_fe_check((expr), (what), __FILE__, __LINE__)

static void cudnn_check(cudnnStatus_t st, const char *file, int line) {
    if (st == CUDNN_STATUS_SUCCESS) return;
    fprintf(stderr, "[cuDNN ERROR] at %s:%d: %s (%d)\n", file, line, cudnnGetErrorString(st), (int)st);
    exit(EXIT_FAILURE);
}
#define cudnnCheck(st) cudnn_check((st), __FILE__, __LINE__)

enum { UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_DO, UID_DQ, UID_DK, UID_DV };

static cudnnHandle_t g_handle = NULL;
static size_t g_asked[2];

static cudnnHandle_t handle(void) {
    if (!g_handle) cudnnCheck(cudnnCreate(&g_handle));
    return g_handle;
}

typedef std::tuple<int, int, int, int, int, int> Key;   /* B, T, NH, NKV, HS, backward */
static std::map<Key, std::shared_ptr<fe::graph::Graph>> g_graphs;

/* [B, heads, T, HS] as cuDNN sees a [B, T, heads, HS] buffer */
static fe::graph::Tensor_attributes bthd(const char *name, int64_t uid, int64_t B, int64_t H, int64_t T, int64_t HS) {
    return fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({B, H, T, HS})
        .set_stride({T * H * HS, HS, H * HS, 1});
}
static fe::graph::Tensor_attributes stats(int64_t B, int64_t NH, int64_t T) {
    return fe::graph::Tensor_attributes().set_name("stats").set_uid(UID_STATS).set_dim({B, NH, T, 1})
        .set_stride({NH * T, T, 1, 1}).set_data_type(fe::DataType_t::FLOAT);
}

static std::shared_ptr<fe::graph::Graph> build(int B, int T, int NH, int NKV, int HS, int backward, fe::error_t *status) {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    const float scale = 1.0f / sqrtf((float)HS);
    auto Q = g->tensor(bthd("q", UID_Q, B, NH, T, HS));
    auto K = g->tensor(bthd("k", UID_K, B, NKV, T, HS));
    auto V = g->tensor(bthd("v", UID_V, B, NKV, T, HS));
    if (!backward) {
        auto opt = fe::graph::SDPA_attributes().set_name("attention_forward").set_generate_stats(true)
                       .set_attn_scale(scale)
                       .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
        auto [O, S] = g->sdpa(Q, K, V, opt);
        O->set_output(true).set_uid(UID_O).set_dim({B, NH, T, HS}).set_stride({(int64_t)T * NH * HS, HS, (int64_t)NH * HS, 1});
        S->set_output(true).set_uid(UID_STATS).set_dim({B, NH, T, 1}).set_stride({(int64_t)NH * T, T, 1, 1})
            .set_data_type(fe::DataType_t::FLOAT);
    } else {
        auto O = g->tensor(bthd("o", UID_O, B, NH, T, HS));
        auto dO = g->tensor(bthd("do", UID_DO, B, NH, T, HS));
        auto S = g->tensor(stats(B, NH, T));
        auto opt = fe::graph::SDPA_backward_attributes().set_name("attention_backward").set_attn_scale(scale)
                       .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0)
                       .set_deterministic_algorithm(false);   /* see the top of the file */
        auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, S, opt);
        dQ->set_output(true).set_uid(UID_DQ).set_dim({B, NH, T, HS}).set_stride({(int64_t)T * NH * HS, HS, (int64_t)NH * HS, 1});
        dK->set_output(true).set_uid(UID_DK).set_dim({B, NKV, T, HS}).set_stride({(int64_t)T * NKV * HS, HS, (int64_t)NKV * HS, 1});
        dV->set_output(true).set_uid(UID_DV).set_dim({B, NKV, T, HS}).set_stride({(int64_t)T * NKV * HS, HS, (int64_t)NKV * HS, 1});
    }
    *status = g->build(handle(), {fe::HeurMode_t::A});
    return g;
}

static fe::graph::Graph &graph(int B, int T, int NH, int NKV, int HS, int backward) {
    Key key(B, T, NH, NKV, HS, backward);
    auto it = g_graphs.find(key);
    if (it != g_graphs.end()) return *it->second;
    fe::error_t st;
    auto g = build(B, T, NH, NKV, HS, backward, &st);
    if (!st.is_good()) {
        fprintf(stderr, "[cuDNN ERROR] no fused attention %s for B=%d T=%d NH=%d NKV=%d HS=%d (cuDNN %zu): %s\n",
                backward ? "backward" : "forward", B, T, NH, NKV, HS, (size_t)cudnnGetVersion(), st.get_message().c_str());
        exit(EXIT_FAILURE);
    }
    int64_t ws = 0;
    cudnnFECheck(g->get_workspace_size(ws), "workspace size");
    const size_t bound = kcuda_attention_cudnn_workspace(B, T, NH, NKV, HS, backward);
    if ((size_t)ws > bound) {
        fprintf(stderr, "[cuDNN ERROR] fused attention %s for B=%d T=%d NH=%d NKV=%d HS=%d asks for %lld B of workspace, "
                        "more than the %zu B the plan allows (kcuda_attention_cudnn_workspace, scratch_cuda.c)\n",
                backward ? "backward" : "forward", B, T, NH, NKV, HS, (long long)ws, bound);
        exit(EXIT_FAILURE);
    }
    g_asked[backward] = (size_t)ws;
    return *(g_graphs[key] = g);
}

extern "C" void kcuda_attention_cudnn_forward(void *out, float *lse, const void *q, const void *k, const void *v,
                                              int B, int T, int NH, int NKV, int HS, void *workspace) {
    if ((size_t)B * T == 0) return;
    fe::graph::Graph &g = graph(B, T, NH, NKV, HS, 0);
    std::unordered_map<fe::graph::Tensor_attributes::uid_t, void *> pack = {
        { UID_Q, (void *)q }, { UID_K, (void *)k }, { UID_V, (void *)v }, { UID_O, out }, { UID_STATS, lse } };
    cudnnFECheck(g.execute(handle(), pack, workspace), "attention forward");
}

extern "C" void kcuda_attention_cudnn_backward(void *dq, void *dk, void *dv, const void *dout, const void *q,
                                               const void *k, const void *v, const void *out, const float *lse,
                                               int B, int T, int NH, int NKV, int HS, void *workspace) {
    if ((size_t)B * T == 0) return;
    fe::graph::Graph &g = graph(B, T, NH, NKV, HS, 1);
    std::unordered_map<fe::graph::Tensor_attributes::uid_t, void *> pack = {
        { UID_Q, (void *)q }, { UID_K, (void *)k }, { UID_V, (void *)v }, { UID_O, (void *)out },
        { UID_DO, (void *)dout }, { UID_STATS, (void *)lse }, { UID_DQ, dq }, { UID_DK, dk }, { UID_DV, dv } };
    cudnnFECheck(g.execute(handle(), pack, workspace), "attention backward");
}

extern "C" size_t kcuda_attention_cudnn_asked(int backward) { return g_asked[backward != 0]; }
extern "C" size_t kcuda_cudnn_version(void) { return (size_t)cudnnGetVersion(); }

/* The graphs and the handle go with the backend (kbackend_destroy): compute-sanitizer's leak check
   would report the handle's device memory at exit otherwise. The next call builds them again. */
extern "C" void kcuda_attention_cudnn_release(void) {
    g_graphs.clear();
    if (g_handle) cudnnCheck(cudnnDestroy(g_handle));
    g_handle = NULL;
}

/* The KOps entries (ops_cuda.h). */
void attention_forward_bf16_cuda(KBackend *b, void *out, float *lse, const void *q, const void *k, const void *v,
                                 int B, int T, int NH, int NKV, int HS, void *scratch) {
    (void)b;
    kcuda_attention_cudnn_forward(out, lse, q, k, v, B, T, NH, NKV, HS, scratch);
}
void attention_backward_bf16_cuda(KBackend *b, void *dq, void *dk, void *dv, const void *dout, const void *q,
                                  const void *k, const void *v, const void *out, const float *lse,
                                  int B, int T, int NH, int NKV, int HS, void *scratch) {
    (void)b;
    kcuda_attention_cudnn_backward(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, HS, scratch);
}
