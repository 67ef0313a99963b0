/* test_cuda_ops_plan.c — the CUDA target as the plan backend sees it, checked without a GPU: the
   scratch of every op for odd shapes (exact bytes, from the kernels' own formulas), and the tagged
   allocation sequence of a plan run for CUDA (cublas/workspace first, each op's workspace/... scratch
   allocated and freed around it, none where the CUDA op needs none). The GPU test
   (test_cuda_kernels.cu) then holds a real CUDA run to the same trace.
   Not here: anything that runs a kernel. */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "kernels.h"
#include "kernels_cuda.h"
#include "check.h"

#include <string.h>

typedef struct { char tag[64]; size_t bytes; int is_alloc; } Ev;
typedef struct { Ev ev[64]; int n; } Trace;

static void record(void *user, const char *tag, size_t bytes, int is_alloc) {
    Trace *t = user;
    if (t->n == 64) return;
    snprintf(t->ev[t->n].tag, sizeof t->ev[t->n].tag, "%s", tag);
    t->ev[t->n].bytes = bytes;
    t->ev[t->n].is_alloc = is_alloc;
    t->n++;
}

#define CHECK_EV(tr, i, tg, b, alloc) do { \
    CHECK((i) < (tr).n); \
    if ((i) < (tr).n) { CHECK(strcmp((tr).ev[i].tag, (tg)) == 0); CHECK_EQ_U((tr).ev[i].bytes, (b)); \
                        CHECK_EQ_U((tr).ev[i].is_alloc, (alloc)); } } while (0)

int main(void) {
    /* B=2, T=17, NH=4, NKV=2, HS=24, C=67, V=101: odd on purpose. */
    KShape att = { .B = 2, .T = 17, .NH = 4, .NKV = 2, .HS = 24 };
    KBackend dummy;
    memset(&dummy, 0, sizeof dummy);
    CHECK_EQ_U(kcuda_scratch_bytes(&dummy, KOP_ATTENTION_FORWARD, &att), 0);
    CHECK_EQ_U(kcuda_scratch_bytes(&dummy, KOP_ATTENTION_BACKWARD, &att), 2 * 4 * 17 * 4);
    KShape rms = { .B = 34, .T = 1, .C = 67 };
    CHECK_EQ_U(kcuda_scratch_bytes(&dummy, KOP_RMSNORM_BACKWARD, &rms), 34 * 67 * 4);   /* N < 64 parts */
    KShape rms_big = { .B = 16384, .T = 1, .C = 2048 };
    CHECK_EQ_U(kcuda_scratch_bytes(&dummy, KOP_RMSNORM_BACKWARD, &rms_big), 64 * 2048 * 4);
    KShape red = { .n = 12345 };
    CHECK_EQ_U(kcuda_scratch_bytes(&dummy, KOP_REDUCE, &red), 257 * 8);
    KShape ce = { .B = 34, .T = 1, .V = 101 };
    CHECK_EQ_U(kcuda_scratch_bytes(&dummy, KOP_CROSSENTROPY_FORWARD, &ce), 0);
    CHECK_EQ_U(kcuda_scratch_bytes(&dummy, KOP_CROSSENTROPY_BACKWARD, &ce), 0);
    KShape emb = { .B = 34, .T = 1, .C = 67, .V = 101 };
    CHECK_EQ_U(kcuda_scratch_bytes(&dummy, KOP_EMBEDDING_BACKWARD, &emb), 0);
    /* The 1B preset at T = 16384 (NH 32, HS 64): the attention backward's delta is 2 MiB per sequence. */
    KShape big = { .B = 1, .T = 16384, .NH = 32, .NKV = 8, .HS = 64 };
    CHECK_EQ_U(kcuda_scratch_bytes(&dummy, KOP_ATTENTION_BACKWARD, &big), (size_t)16384 * 32 * 4);

    /* bf16 operands: cuBLAS GemmEx takes them as they are, no scratch (the CPU widens blocks) */
    KShape gx = { .M = 700, .N = 600, .K = 1030, .ab = KDT_BF16, .c = KDT_BF16 };
    CHECK_EQ_U(kcuda_scratch_bytes(&dummy, KOP_GEMM_EX, &gx), 0);

    /* A plan run for CUDA: the same calls the model makes, buffers never touched. */
    KBackend kb;
    Trace tr = { .n = 0 };
    CHECK(kbackend_cuda_plan_init(&kb) == 0);
    CHECK(kb.kind == KB_PLAN);
    CHECK(kb.space == DPMEM_DEVICE);
    CHECK(strcmp(kb.target->name, "cuda") == 0);
    CHECK_EQ_U(kb.live, KCUDA_CUBLAS_WORKSPACE);
    kb.trace = record; kb.trace_user = &tr;
    float *x = kbuf_alloc(&kb, 34 * 67 * 4, "activations/x");
    double s;
    CHECK(reduce_sum(&kb, x, 34 * 67, &s) == 0);
    CHECK(rmsnorm_backward(&kb, x, x, x, x, x, x, 34, 67) == 0);
    CHECK(attention_forward(&kb, x, x, x, x, x, 2, 17, 4, 2, 24) == 0);
    CHECK(attention_backward(&kb, x, x, x, x, x, x, x, x, x, 2, 17, 4, 2, 24) == 0);
    CHECK(crossentropy_forward(&kb, x, x, (const int *)x, 34, 101) == 0);
    CHECK(embedding_backward(&kb, x, (const int *)x, x, 34, 67, 101) == 0);
    kbuf_free(&kb, x);
    CHECK_EQ_U(tr.n, 8);
    CHECK_EV(tr, 0, "activations/x", 34 * 67 * 4, 1);
    CHECK_EV(tr, 1, "workspace/reduce", 257 * 8, 1);
    CHECK_EV(tr, 2, "workspace/reduce", 0, 0);
    CHECK_EV(tr, 3, "workspace/rmsnorm_backward", 34 * 67 * 4, 1);
    CHECK_EV(tr, 4, "workspace/rmsnorm_backward", 0, 0);
    CHECK_EV(tr, 5, "workspace/attn_backward", 2 * 4 * 17 * 4, 1);
    CHECK_EV(tr, 6, "workspace/attn_backward", 0, 0);
    CHECK_EV(tr, 7, "activations/x", 0, 0);
    CHECK_EQ_U(kb.peak, KCUDA_CUBLAS_WORKSPACE + 34 * 67 * 4 + 34 * 67 * 4);
    kbackend_destroy(&kb);
    CHECK_EQ_U(kb.live, 0);

    /* --precision bf16 on the CUDA target: every op on bf16 storage (KOps.bf16_native), no fp32 twins
       (workspace/widen.*); attention through cuDNN with the bound of kcuda_attention_cudnn_workspace:
       per query row 4 B forward (+ 1 MiB), (3·HS + 2)·4 B backward (+ 1 MiB), whatever the GPU (the
       first H200 run's cuDNN 9.19 asked 256 B forward and 8·HS + 4 B per query row backward). */
    KShape att16 = att;
    att16.ab = KDT_BF16;
    const size_t rows = 2 * 4 * 17;
    CHECK_EQ_U(kcuda_scratch_bytes(&dummy, KOP_ATTENTION_FORWARD, &att16), rows * 4 + (1u << 20));
    CHECK_EQ_U(kcuda_scratch_bytes(&dummy, KOP_ATTENTION_BACKWARD, &att16), rows * (3 * 24 + 2) * 4 + (1u << 20));
    KShape big16 = big;
    big16.ab = KDT_BF16;
    CHECK(kcuda_scratch_bytes(&dummy, KOP_ATTENTION_BACKWARD, &big16) >= (size_t)16384 * 32 * (8 * 64 + 4));
    CHECK(kops_cuda_target.bf16_native == 1 && kops_cpu.bf16_native == 0);
    KBackend k16, c16;
    Trace t16 = { .n = 0 }, tc = { .n = 0 };
    CHECK(kbackend_cuda_plan_init(&k16) == 0);
    kbackend_plan_init(&c16, &kops_cpu, 2);
    k16.trace = record; k16.trace_user = &t16;
    c16.trace = record; c16.trace_user = &tc;
    KBackend *both[2] = { &k16, &c16 };
    for (int i = 0; i < 2; i++) {
        KBackend *b = both[i];
        float *y = kbuf_alloc(b, 34 * 96 * 2, "activations/y");
        CHECK(rmsnorm_forward_ex(b, KDT_BF16, y, y, y, y, 34, 67, 1e-5f) == 0);
        CHECK(swiglu_forward_ex(b, KDT_BF16, y, y, y, 34 * 67) == 0);
        CHECK(rope_forward_ex(b, KDT_BF16, y, 2, 17, 4, 24, (KRope){ 10000.0f, 0, 0, 0, 0 }) == 0);
        CHECK(attention_forward_ex(b, KDT_BF16, y, y, y, y, y, 2, 17, 4, 2, 24) == 0);
        CHECK(attention_backward_ex(b, KDT_BF16, y, y, y, y, y, y, y, y, y, 2, 17, 4, 2, 24) == 0);
        kbuf_free(b, y);
    }
    CHECK_EQ_U(t16.n, 6);
    CHECK_EV(t16, 0, "activations/y", 34 * 96 * 2, 1);
    CHECK_EV(t16, 1, "workspace/attn_forward", rows * 4 + (1u << 20), 1);
    CHECK_EV(t16, 2, "workspace/attn_forward", 0, 0);
    CHECK_EV(t16, 3, "workspace/attn_backward", rows * (3 * 24 + 2) * 4 + (1u << 20), 1);
    CHECK_EV(t16, 4, "workspace/attn_backward", 0, 0);
    int cpu_twins = 0;
    for (int i = 0; i < tc.n; i++) cpu_twins += tc.ev[i].is_alloc && !strncmp(tc.ev[i].tag, "workspace/widen.", 16);
    CHECK(cpu_twins >= 4 + 8);   /* the CPU widens: two twins for RMSNorm, three SwiGLU, one RoPE, 4 + 8 attention */
    kbackend_destroy(&k16);
    kbackend_destroy(&c16);

    /* A memory limit below the workspace: the first allocation fails with a message, not a crash. */
    KBackend lim;
    kbackend_plan_init(&lim, &kops_cuda_target, 1);
    lim.mem_limit = 1 << 20;
    CHECK(kcuda_alloc_cublas_workspace(&lim) == NULL);
    CHECK(strstr(kbackend_error(&lim), "cublas/workspace") != NULL);
    kbackend_destroy(&lim);
    return check_exit("test_cuda_ops_plan");
}
