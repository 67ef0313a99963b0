/* test_comm_zero_drop.c — --zero 3 over 2 ranks with a sample dropped on one rank only (issue 39): ghost
   two-pass clipping in fp32 (untied, no checkpointing, no LoRA) runs its second backward on the first's
   activations with no second forward (`again`), but a rank whose physical batch holds a sample with a norm
   that is not finite (c_b = 0: it adds exactly nothing) runs a forward again for its weighted backward.
   Under --zero 3 every forward all-gathers each unit's weights on every rank at once, so the ranks agree
   on it (samples/dp/dp_sgd.c): one drop on any rank and every rank runs the forward again.
   The model: the tiny shape, loaded with --init-from --allow-nonfinite from a checkpoint whose embedding
   row X (the last token) is NaN; the data: a token file where X is read by one row alone, row 5 of step 1,
   which rank 1 holds (each rank takes its consecutive share of the step's 8 rows: rank 1 rows 4..7).
   Checked: rank 1 logs one sample dropped and rank 0 none (dp.dropped_samples); the --zero 3 run
   ends (DPMEM_COMM_TIMEOUT=20, timeout 120: no hang; before the fix rank 1's forward gathers met rank 0's
   backward ones, of other sizes, and the job died in MPI: exit 134 or 139) with exit 0; its saved model is the unsharded 2 ranks' byte for byte (cmp: the rank without a
   drop ran the forward and a second backward with again = 0, the same bits as `again`'s); every weight is
   finite but row X of the embedding, which stays NaN (no gradient reaches it; its update keeps the NaN).
   The same agreement where again_fits differs by rank (attention's backward scratch grows with the CPU threads,
   which each rank sets): rank 0 with --threads 1 (`again`), rank 1 with 2 (a forward again), no NaN: --zero 3
   ends with exit 0 and saves the unsharded run's file (before the fix the job died in mismatched gathers).
   SKIP (77) when mpirun is missing. Binaries through DPMEM_BUILD. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_dp_common.h"
#include "test_saved_model.h"
#include "test_mpi_launch.h"

#define V 1001
#define DIM 70
#define T 48   /* ghost's Grams (2·B·T² floats at B = 4) above attention's backward scratch (one thread): `again` fits */
#define ROWS 24   /* 3 steps of 8 */
#define X (V - 1)
static const char *SHAPE = "--model tiny --vocab 1001 --dim 70 --heads 5 --kv-heads 5 --ffn 173 --seq-len 48";

/* The first float of tensor `name` in a saved model (its data_offsets[0] / 4), or -1. */
static long tensor_at(const Model *m, const char *name) {
    char key[128];
    snprintf(key, sizeof key, "\"%s\"", name);
    m->head[m->nhead] = 0;
    const char *p = strstr(m->head, key), *o = p ? strstr(p, "\"data_offsets\"") : NULL;
    long a = -1;
    if (!o || sscanf(o, "\"data_offsets\":[%ld", &a) != 1 || a % 4) return -1;
    return a / 4;
}

/* base/model.safetensors with embedding row X NaN (written back in place: the test's own file). */
static int poison(long *row) {
    char dir[256], path[300];
    snprintf(dir, sizeof dir, "%s/base", tmp);
    Model m;
    if (load(dir, &m)) return -1;
    const long at = tensor_at(&m, "model.embed_tokens.weight");
    CHECK(at >= 0 && (size_t)at + (size_t)V * DIM <= m.n, "base: no model.embed_tokens.weight of %d x %d in the header", V, DIM);
    if (at < 0) { unload(&m); return -1; }
    *row = at + (long)X * DIM;
    for (int k = 0; k < DIM; k++) m.w[*row + k] = NAN;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "wb");
    const uint64_t h = m.nhead;
    const int ok = f && fwrite(&h, 8, 1, f) == 1 && fwrite(m.head, 1, m.nhead, f) == m.nhead && fwrite(m.w, 4, m.n, f) == m.n;
    if (f && fclose(f)) { unload(&m); return -1; }
    unload(&m);
    CHECK(ok, "cannot write %s", path);
    return ok ? 0 : -1;
}

/* tokens.bin (llm.c uint16): ROWS rows of T + 1 (row i: tokens i·T .. i·T + T), X only at row 5's position 3. */
static int tokens(void) {
    char path[300];
    snprintf(path, sizeof path, "%s/tokens.bin", tmp);
    int32_t hdr[256] = { 20240520, 1, ROWS * T + 1 };
    uint16_t tok[ROWS * T + 1];
    uint64_t st = 7;
    for (int i = 0; i < ROWS * T + 1; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (uint16_t)((st >> 33) % X);   /* never X */
    }
    tok[5 * T + 3] = X;
    FILE *f = fopen(path, "wb");
    const int ok = f && fwrite(hdr, sizeof hdr, 1, f) == 1 && fwrite(tok, sizeof tok, 1, f) == 1;
    if (f && fclose(f)) return -1;
    CHECK(ok, "cannot write %s", path);
    return ok ? 0 : -1;
}

/* dp.dropped_samples in rank r's log of run `name` (-1: none logged). */
static long dropped(const char *name, int r) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/dpmem-trace %s.rank%d.log -o - | grep -o '\"dp.dropped_samples\":\"\\?[0-9]*' | tr -dc 0-9", B, name, r);
    return sh(cmd) == 0 && out[0] ? atol(out) : -1;
}

int main(void) {
    const int begun = mpi_test_begin("test_comm_zero_drop", "--zero 3 with a sample dropped on one rank");
    if (begun) return begun;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s/train_vanilla %s --threads 1 --steps 1 --lr 0 --quiet --save base", B, SHAPE);
    int rc = sh(cmd);
    CHECK(rc == 0, "the base checkpoint: exit %d\n%.2000s", rc, out);
    long row = -1;
    if (rc || poison(&row) || tokens()) { mpi_test_end(); printf("test_comm_zero_drop: %d failures\n", failures + 1); return 1; }

    const char *args = "--steps 3 --seed 5 --optimizer adamw --lr 1e-2 --weight-decay 0.1 --warmup-steps 0 --batch-size 8 --quiet "
                       "--clip twopass --noise-multiplier 1 --max-grad-norm 0.1 --noise-seed 11 --init-from base --allow-nonfinite "
                       "--data tokens.bin";
    const char *names[2] = { "r2", "z3" };
    int ok[2] = { 0, 0 };
    for (int z = 0; z < 2; z++) {
        snprintf(cmd, sizeof cmd, "DPMEM_COMM_TIMEOUT=20 timeout 120 mpirun --oversubscribe -np 2 %s/train_ghost %s --threads 1 %s --zero %d "
                 "--save %s --log %s.log", B, SHAPE, args, 3 * z, names[z], names[z]);
        rc = sh(cmd);
        CHECK(rc == 0, "ghost+twopass fp32, 2 ranks --zero %d, a NaN sample on rank 1: exit %d (want 0, no hang)\n%.3000s", 3 * z, rc, out);
        ok[z] = rc == 0;
        if (!ok[z]) continue;
        const long d0 = dropped(names[z], 0), d1 = dropped(names[z], 1);
        CHECK(d0 == 0 && d1 == 1, "--zero %d: dp.dropped_samples rank 0 %ld, rank 1 %ld (want 0 and 1: one sample dropped, on rank 1)",
              3 * z, d0, d1);
    }
    if (ok[0] && ok[1]) {
        rc = sh("cmp r2/model.safetensors z3/model.safetensors");
        CHECK(rc == 0, "--zero 3: model.safetensors differs from the unsharded 2 ranks' file: %s", out);
        Model m;
        char dir[256];
        snprintf(dir, sizeof dir, "%s/z3", tmp);
        if (load(dir, &m) == 0) {
            size_t bad = 0, nan_row = 0;
            for (size_t i = 0; i < m.n; i++) {
                const int in_row = (long)i >= row && (long)i < row + DIM;
                if (in_row) nan_row += isnan(m.w[i]) != 0;
                else bad += !isfinite(m.w[i]);
            }
            CHECK(bad == 0 && nan_row == DIM, "--zero 3's model: %zu weights not finite outside embedding row %d (want 0), %zu of its %d "
                  "NaN (want all)", bad, X, nan_row, DIM);
            unload(&m);
        }
        if (!failures) printf("ok   ghost+twopass fp32 2 ranks --zero 3, one NaN sample on rank 1 (dropped): no hang, = unsharded file for "
                              "file, every weight finite but the NaN embedding row\n");
    }
    /* again_fits is the rank's own (attention's backward scratch grows with the threads): rank 0 with one thread
       keeps the activations (`again`), rank 1 with two runs the forward again; no NaN. --zero 3 = unsharded. */
    const char *mixed = "--steps 2 --seed 5 --lr 1e-2 --batch-size 8 --quiet --clip twopass --noise-multiplier 1 --max-grad-norm 0.1 "
                        "--noise-seed 11";
    for (int z = 0; z < 2; z++) {
        snprintf(cmd, sizeof cmd, "DPMEM_COMM_TIMEOUT=20 timeout 120 mpirun --oversubscribe -np 1 %s/train_ghost %s %s --threads 1 --zero %d "
                 "--save t%d : -np 1 %s/train_ghost %s %s --threads 2 --zero %d --save t%d", B, SHAPE, mixed, 3 * z, z, B, SHAPE, mixed, 3 * z, z);
        rc = sh(cmd);
        CHECK(rc == 0, "ghost+twopass fp32, 2 ranks --zero %d, --threads 1 and 2: exit %d (want 0, no hang)\n%.3000s", 3 * z, rc, out);
        ok[z] = rc == 0;
    }
    if (ok[0] && ok[1]) {
        rc = sh("cmp t0/model.safetensors t1/model.safetensors");
        CHECK(rc == 0, "--threads 1 and 2, --zero 3: model.safetensors differs from the unsharded run's: %s", out);
        if (rc == 0) printf("ok   ghost+twopass fp32 2 ranks --zero 3, --threads 1 and 2 (again_fits differs): no hang, = unsharded file "
                            "for file\n");
    }
    mpi_test_end();
    if (failures) { printf("test_comm_zero_drop: %d failures\n", failures); return 1; }
    printf("test_comm_zero_drop: OK\n");
    return 0;
}
