/* classify.h — the sequence-classification head's loss, as transformers' LlamaForSequenceClassification
   computes it: the `score` head (K, C, no bias) runs on every position (logits [B, T, K], as there), the
   logits of each row's LAST NON-PADDING token are pooled, and the loss is the cross-entropy of those B
   rows against the rows' labels, averaged over the batch.

   The last non-padding token (transformers' rule): the largest t with tokens[b, t] != pad_id, or 0
   when the whole row is padding; with no pad token (pad_id < 0) the last position T - 1. Right padding
   (a row's tokens, then pad_id to T) puts it on the row's last real token.

   Labels travel in the model's targets buffer: every target position of a classify row holds the
   row's label (data.h), so label b = targets[b·T].

   Everything here runs on kernels.h ops (copies and the cross-entropy on B rows of K): the same code
   on the CPU, on CUDA and on the plan backend (which computes nothing: the positions read back as 0).
   Not here: the score head's GEMMs and its gradient hook (llama.c, as lm_head's with V = K). */
#ifndef CLASSIFY_H
#define CLASSIFY_H

#include "kernels.h"

/* last[b]: row b's pooled position (see above). tokens: host [B, T]. */
void classify_last_positions(int *last, const int *tokens, int B, int T, int pad_id);

/* From the device's tokens and targets [B, T]: last[] (host [B]) and labels (device [B]); host_stage:
   host scratch of 2·B·T ints. 0, or -1 with kbackend_error (a label outside 0..K-1). */
int classify_prepare(KBackend *kb, int *last, int *labels, int *host_stage, const int *tokens, const int *targets,
                     int B, int T, int K, int pad_id);

/* losses[b] (device [B]) = CE of the pooled logits of row b; logits [B·T, K] fp32; pooled: fp32 [B, K] scratch. */
int classify_loss_forward(KBackend *kb, float *losses, float *pooled, const float *logits, const int *labels,
                          const int *last, int B, int T, int K);

/* In place: logits [B·T, K] become dlogits of loss_scale · Σ_b w_b CE_b: zero except the pooled rows,
   which get (softmax - onehot) · loss_scale · w_b (w: device [B] or NULL). pooled: fp32 [B, K] scratch. */
int classify_loss_backward(KBackend *kb, float *logits, float *pooled, const int *labels, const int *last,
                           float loss_scale, const float *sample_weight, int B, int T, int K);

/* The pad token's embedding row learns nothing, as nn.Embedding(padding_idx=pad_id) in transformers'
   LlamaModel: the rows of d (the embedding's output gradient, [B·T, C] of dtype dt) at the positions
   whose token is pad_id are zeroed before the embedding's backward and its DP hook, so that neither the
   gradient nor a per-sample gradient (its norm) has a pad position's part. tokens: host [B, T] (after
   classify_prepare: its host_stage). Runs of pads are zeroed whole (right padding: one call a row). */
int classify_zero_pad_rows(KBackend *kb, KDtype dt, float *d, const int *tokens, int B, int T, int C, int pad_id);

#endif
