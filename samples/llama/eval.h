/* eval.h — held-out evaluation for the training loop (--eval-data FILE [--eval-every N]): after every N
   optimizer steps (N = 0: after the last only) the model's forward runs over EVERY row of FILE, in
   batches of the training batch size (the last batch filled with the file's first rows, which are not
   counted), and the mean loss over those rows is printed and logged, with the accuracy of the pooled
   logits' argmax against the labels (--task classify) or the perplexity exp(loss) (a causal LM).
   FILE is read as --data is (data.h: a labelled file for classify, a token file otherwise) with the
   model's vocabulary, sequence length, labels and pad id.

   META (tools/dpmem_report shows them): eval.data, eval.rows, eval.every; per evaluation
   eval.loss "S L" (after step S), eval.accuracy "S A" (a fraction) or eval.perplexity "S P".

   PRIVACY: an evaluation reads FILE outside DP-SGD; the ε the DP trainers print counts the training
   steps only. Its results are private data's unless FILE is public: a DP run says so once, and META
   eval.outside_epsilon = 1.

   Not here: the loop (train.c calls train_eval_open, train_eval_after_step, train_eval_close). No
   evaluation on the plan backend (it computes nothing: said once). */
#ifndef EVAL_H
#define EVAL_H

#include "train.h"

typedef struct {
    DataLoader data;
    const char *path;
    int every, active;
} TrainEval;

/* Opens --eval-data (nothing to do without it): 0, or -1 after a one-line error. dp: the run is DP. */
int train_eval_open(TrainEval *e, const TrainState *s, int dp);
/* After optimizer step `steps_done` (1-based): evaluates when due (every N steps, and after the last). */
int train_eval_after_step(TrainEval *e, TrainState *s, int steps_done);
void train_eval_close(TrainEval *e);

#endif
