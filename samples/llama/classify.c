/* classify.c — the sequence-classification loss (see classify.h): pooled positions, labels, and the
   cross-entropy of the pooled rows, forward and backward, on kernels.h ops.
   Not here: the score GEMMs and hooks (llama.c), the labelled data format (data.c). */
#include "classify.h"

#include <stdio.h>

void classify_last_positions(int *last, const int *tokens, int B, int T, int pad_id) {
    for (int b = 0; b < B; b++) {
        int at = pad_id < 0 ? T - 1 : 0;
        for (int t = T - 1; pad_id >= 0 && t >= 0; t--)
            if (tokens[(size_t)b * T + t] != pad_id) { at = t; break; }
        last[b] = at;
    }
}

int classify_prepare(KBackend *kb, int *last, int *labels, int *host_stage, const int *tokens, const int *targets,
                     int B, int T, int K, int pad_id) {
    const size_t N = (size_t)B * T;
    int *tok = host_stage, *tgt = host_stage + N;
    if (kbuf_download(kb, tok, tokens, N * sizeof(int)) || kbuf_download(kb, tgt, targets, N * sizeof(int))) return -1;
    classify_last_positions(last, tok, B, T, pad_id);
    for (int b = 0; b < B; b++) {
        tgt[b] = tgt[(size_t)b * T];   /* the row's label (b·T >= b: read before it is overwritten) */
        if (tgt[b] < 0 || tgt[b] >= K) {
            snprintf(kb->err, sizeof kb->err, "row %d of the batch has label %d, outside 0..%d (--num-labels %d)", b, tgt[b], K - 1, K);
            return -1;
        }
    }
    return kbuf_upload(kb, labels, tgt, (size_t)B * sizeof(int));
}

int classify_zero_pad_rows(KBackend *kb, KDtype dt, float *d, const int *tokens, int B, int T, int C, int pad_id) {
    if (pad_id < 0) return 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T;) {
            if (tokens[(size_t)b * T + t] != pad_id) { t++; continue; }
            int end = t;
            while (end < T && tokens[(size_t)b * T + end] == pad_id) end++;
            if (zero_ex(kb, dt, kact_at(d, ((size_t)b * T + (size_t)t) * (size_t)C, dt), (size_t)(end - t) * (size_t)C)) return -1;
            t = end;
        }
    return 0;
}

/* pooled[b] <-> logits[b, last[b]] */
static int pool(KBackend *kb, float *pooled, float *logits, const int *last, int B, int T, int K, int to_logits) {
    for (int b = 0; b < B; b++) {
        float *row = logits + ((size_t)b * T + (size_t)last[b]) * K, *p = pooled + (size_t)b * K;
        if (copy_ex(kb, KDT_F32, to_logits ? row : p, to_logits ? p : row, (size_t)K)) return -1;
    }
    return 0;
}

int classify_loss_forward(KBackend *kb, float *losses, float *pooled, const float *logits, const int *labels,
                          const int *last, int B, int T, int K) {
    if (pool(kb, pooled, (float *)logits, last, B, T, K, 0)) return -1;
    return crossentropy_forward(kb, losses, pooled, labels, B, K);
}

int classify_loss_backward(KBackend *kb, float *logits, float *pooled, const int *labels, const int *last,
                           float loss_scale, const float *sample_weight, int B, int T, int K) {
    if (pool(kb, pooled, logits, last, B, T, K, 0)) return -1;
    if (crossentropy_backward(kb, pooled, labels, loss_scale, sample_weight, B, 1, K)) return -1;
    if (zero_ex(kb, KDT_F32, logits, (size_t)B * T * K)) return -1;
    return pool(kb, pooled, logits, last, B, T, K, 1);
}
