/* eval.c — held-out evaluation (see eval.h). */
#include "eval.h"
#include "dpmem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int train_eval_open(TrainEval *e, const TrainState *s, int dp) {
    const TrainConfig *c = s->cfg;
    memset(e, 0, sizeof *e);
    if (!c->eval_path) return 0;
    e->path = c->eval_path; e->every = c->eval_every;
    if (!kbackend_computes(s->kb)) {
        if (!c->quiet) printf("note: no evaluation on the plan backend (it computes nothing); --eval-data %s not read\n", e->path);
        return 0;
    }
    const int classify = c->model.task == LLAMA_TASK_CLASSIFY;
    if (data_open_task(&e->data, e->path, c->model.vocab_size, c->seq_len, (uint64_t)c->seed,
                       classify ? c->model.num_labels : 0, c->model.pad_id) != 0) return -1;
    e->active = 1;
    dpmem_meta("eval.data", e->path);
    dpmem_meta_int("eval.rows", (long long)data_rows(&e->data, c->seq_len));
    dpmem_meta_int("eval.every", e->every);
    if (dp) {
        dpmem_meta_int("eval.outside_epsilon", 1);
        if (c->quiet < 2)
            printf("note: the evaluation on %s is outside DP-SGD's guarantee (its ε counts the training steps only): "
                   "its results are that data's, private unless the data is public\n", e->path);
    }
    return 0;
}

/* The forward over every row of the file: the mean loss over its rows' loss terms, and (classify) how many
   rows' pooled logits pick their label. */
static int eval_pass(TrainEval *e, TrainState *s, double *mean_loss, size_t *right, size_t *rows_out) {
    const TrainConfig *c = s->cfg;
    LlamaModel *m = &s->model;
    const int B = c->batch_size, T = c->seq_len, N = B * T, per = llama_loss_positions(m);
    const int classify = c->model.task == LLAMA_TASK_CLASSIFY, K = m->HV;
    const size_t rows = data_rows(&e->data, T);
    float *loss = malloc((size_t)B * per * sizeof *loss), *pooled = classify ? malloc((size_t)B * K * sizeof *pooled) : NULL;
    int rc = -1;
    double sum = 0;
    *right = 0;
    if (!loss || (classify && !pooled)) { snprintf(s->kb->err, sizeof s->kb->err, "out of host memory (evaluation)"); goto out; }
    for (size_t r0 = 0; r0 < rows; r0 += (size_t)B) {
        const int real = rows - r0 < (size_t)B ? (int)(rows - r0) : B;
        for (int b = 0; b < B; b++)   /* (past the file's end: its first rows, not counted) */
            data_row(&e->data, b < real ? r0 + (size_t)b : (size_t)b, s->batch_host + (size_t)b * T, s->batch_host + N + (size_t)b * T, T);
        double batch_mean;
        if (kbuf_upload(s->kb, m->tokens, s->batch_host, (size_t)N * sizeof(int)) ||
            kbuf_upload(s->kb, m->targets, s->batch_host + N, (size_t)N * sizeof(int)) || llama_forward(m) ||
            llama_loss(m, &batch_mean) || kbuf_download(s->kb, loss, m->acts.losses, (size_t)B * per * sizeof *loss) ||
            (classify && kbuf_download(s->kb, pooled, m->pooled, (size_t)B * K * sizeof *pooled))) goto out;
        for (int b = 0; b < real; b++) {
            for (int p = 0; p < per; p++) sum += loss[(size_t)b * per + p];
            int best = 0;
            for (int k = 1; classify && k < K; k++) if (pooled[(size_t)b * K + k] > pooled[(size_t)b * K + best]) best = k;
            *right += classify && best == s->batch_host[N + (size_t)b * T];
        }
    }
    *mean_loss = sum / ((double)rows * per);
    *rows_out = rows;
    rc = 0;
out:
    free(loss); free(pooled);
    return rc;
}

int train_eval_after_step(TrainEval *e, TrainState *s, int steps_done) {
    const TrainConfig *c = s->cfg;
    if (!e->active || !((e->every > 0 && steps_done % e->every == 0) || steps_done == c->steps)) return 0;
    DPMEM_SCOPE("eval");
    double loss = 0;
    size_t right = 0, rows = 0;
    if (eval_pass(e, s, &loss, &right, &rows) != 0) return -1;
    char rec[96];
    snprintf(rec, sizeof rec, "%d %.17g", steps_done, loss);
    dpmem_meta("eval.loss", rec);
    const int classify = c->model.task == LLAMA_TASK_CLASSIFY;
    const double acc = rows ? (double)right / (double)rows : 0, ppl = exp(loss);
    snprintf(rec, sizeof rec, "%d %.17g", steps_done, classify ? acc : ppl);
    dpmem_meta(classify ? "eval.accuracy" : "eval.perplexity", rec);
    if (c->quiet < 2) {
        if (classify) printf("eval after step %d: loss %.6f, accuracy %.2f %% (%zu of %zu rows of %s)\n", steps_done, loss, 100 * acc,
                             right, rows, e->path);
        else printf("eval after step %d: loss %.6f, perplexity %.4f (%zu rows of %s)\n", steps_done, loss, ppl, rows, e->path);
        fflush(stdout);
    }
    return 0;
}

void train_eval_close(TrainEval *e) {
    if (e->active) data_close(&e->data);
    e->active = 0;
}
