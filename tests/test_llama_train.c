/* test_llama_train.c — the loop trains, and its strategy interface does what train.h promises.
   1. Loss falls: the tiny model on a small repetitive token file (an llm.c uint16 .bin, a cycle of 40
      distinct tokens, so each next token is determined by the current one) goes from ln(1000) ≈ 6.9
      to below 0.5 within 150 steps (lr 3e-3, B=4, T=32).
   2. Physical batches: grad_accum = 2 with B = 2 gives the same training as B = 4 in one batch
      (same rows, same loss scale): the losses of 4 steps agree to 1e-4.
   3. --check-finite: a NaN planted in a weight stops the run after the optimizer step with exit code
      4 and names the tensor.
   Not here: gradients (test_llama_grad), memory (test_llama_memory). */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "llama/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0;

typedef struct { double losses[512]; int n; int poison; } Recorder;

/* A strategy that only watches: the default forward/backward, recording each physical batch's loss. */
static int record_batch(void *user, TrainState *s) {
    Recorder *r = user;
    if (train_forward(s) || train_backward(s, NULL)) return -1;
    if (r->n < 512) r->losses[r->n++] = s->loss;
    return 0;
}
static int poison(void *user, TrainState *s) {
    Recorder *r = user;
    if (r->poison && s->step == 1) s->model.w.layers[1].gate_proj[3] = NAN;
    return 0;
}

static int run(TrainConfig *c, Recorder *r, int with_poison) {
    TrainStrategy st = { .name = "recorder", .user = r, .physical_batch = record_batch,
                         .before_update = with_poison ? poison : NULL };
    return train_run(c, &st);
}

static const char *write_token_file(void) {
    static char path[64];
    snprintf(path, sizeof path, "/tmp/dpmem_test_tokens_%d.bin", (int)getpid());
    FILE *f = fopen(path, "wb");
    int32_t hdr[256] = { 20240520, 1, 4000 };
    uint16_t tok[4000];
    for (int i = 0; i < 4000; i++) tok[i] = (uint16_t)((i % 40) * 23 + 7);   /* 40 distinct ids < 1000 */
    fwrite(hdr, sizeof hdr, 1, f);
    fwrite(tok, sizeof tok, 1, f);
    fclose(f);
    return path;
}

int main(int argc, char **argv) {
    (void)argc;
    train_prefer_passive_omp(argv);
    const char *data = write_token_file();
    TrainConfig c;
    config_defaults(&c);
    c.data_path = data; c.batch_size = 4; c.seq_len = 32; c.steps = 150; c.lr = 3e-3f; c.threads = 1;
    c.quiet = 1; c.run_name = "test_llama_train";
    Recorder r = { .n = 0 };
    int rc = run(&c, &r, 0);
    double first = r.losses[0], last = 0;
    for (int i = r.n - 10; i < r.n; i++) last += r.losses[i] / 10;
    if (rc != 0 || r.n != 150 || !(fabs(first - log(1000.0)) < 0.5) || !(last < 0.5)) {
        printf("FAIL training: exit %d, %d steps, loss %.4f -> %.4f (want ~6.91 -> < 0.5)\n", rc, r.n, first, last); failures++;
    } else printf("ok   loss falls: %.4f -> %.4f (mean of the last 10 of 150 steps)\n", first, last);

    /* physical batches */
    TrainConfig c1 = c, c2 = c;
    c1.steps = c2.steps = 4;
    c2.batch_size = 2; c2.grad_accum = 2;
    Recorder r1 = { .n = 0 }, r2 = { .n = 0 };
    int rc1 = run(&c1, &r1, 0), rc2 = run(&c2, &r2, 0);
    double worst = 0;
    for (int s = 0; s < 4; s++) worst = fmax(worst, fabs(r1.losses[s] - 0.5 * (r2.losses[2 * s] + r2.losses[2 * s + 1])));
    if (rc1 || rc2 || r2.n != 8 || worst > 1e-4) { printf("FAIL grad_accum 2x2 vs 1x4: exits %d %d, %d batches, max loss diff %g\n", rc1, rc2, r2.n, worst); failures++; }
    else printf("ok   grad_accum=2 x B=2 trains like B=4 (max loss difference %.2g over 4 steps)\n", worst);

    /* check-finite */
    TrainConfig c3 = c;
    c3.steps = 4; c3.check_finite = 1;
    Recorder r3 = { .poison = 1 };
    int rc3 = run(&c3, &r3, 1);
    if (rc3 != 4 || r3.n != 2) { printf("FAIL --check-finite: exit %d after %d batches (want 4 after 2)\n", rc3, r3.n); failures++; }
    else printf("ok   --check-finite stopped at step 2 with exit 4\n");
    remove(data);
    if (failures) { printf("%d check(s) failed\n", failures); return 1; }
    printf("all training checks passed\n");
    return 0;
}
