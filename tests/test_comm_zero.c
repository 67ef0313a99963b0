/* test_comm_zero.c — sharded training state over MPI (--zero 1|2|3, samples/llama/shard.h) through the samples
   as a user runs them. The model is the tiny one reshaped so that no tensor divides evenly among 4
   ranks (V=1001, C=70, F=173: every matrix and norm leaves a remainder of 2), and its embedding and
   lm_head are larger than a rank's part of a 1 MiB bucket (DPMEM_COMM_BUCKET_MB=1 in one case: the
   collectives run in several rounds, pieces of one tensor in each). Each run trains 3 steps with
   AdamW (whose m and v are what --zero 1 shards) and saves the model (f32). For each case:
     - N ranks with --zero 1, 2 and 3 (LoRA and --poisson too) train bit for bit the weights of N ranks
       without sharding
       (the same sums, the same noise z(seed, step, i) added to coordinate i by the rank that owns it,
       the same elementwise update; the reduce-scatter adds the ranks' parts in the all-reduce's
       order: OpenMPI's both do for these sizes, and 2 ranks' sum a + b has one order anyway) where a
       rank runs one physical batch a step; with several, --zero 2 (which reduce-scatters each
       physical batch's sum into the slices; so does 3) equals them to <= 1e-6 of the largest weight, and
       those equal one process with the same logical batch to ≤ 1e-6 relative to the largest weight
       (the backward's sums over samples run in another order: ≤ 1e-6, not bit for bit), while the
       update itself (lr 0 against lr 1e-2) is far larger; σ > 0 in the DP cases;
     - every rank holds the same parameters (the trainer's comm.params_hash check prints it), and the
       hash (of the gathered model) is the unsharded ranks'; the saved model.safetensors is the
       unsharded ranks' file byte for byte (cmp): under bf16 the GEMM weights' fp32 masters are
       sharded and --save gathers them tensor by tensor;
     - --init-from the one process's checkpoint (vanilla bf16, 2 and 4 ranks): the sharded resumed run
       saves the unsharded resumed run's file, and its plan equals its peak;
     - the plan (--device plan --ranks N --zero S --save, its log) equals rank 0's measured peak byte
       for byte, and every other rank's peak is at most it (rank 0 holds the most: the remainder's
       floats);
     - at the peak, the optimizer category is exactly 8 bytes per float of rank 0's slices (its m
       and v), summed from the shapes here; and the params category is the unsharded plan's less
       4 bytes x (the GEMM weights' floats - rank 0's slices of them) under bf16 (the sharded fp32
       masters), the unsharded plan's under fp32 (the master is the parameter);
     - the grads category is the whole model's under --zero 1,
       and under --zero 2 and 3 4 bytes per float of rank 0's slices plus at most one gradient unit's
       full-size buffers (a block, the final norm with lm_head, or the embedding: llama.h), exactly;
     - --zero 3 with LoRA (fp32: merged, re-merged on the weight gathered whole; bf16: the base in bf16 alone,
       its bf16 slices gathered): the frozen base's bytes at rank 0's peak = its slices of the GEMM weights
       (4 or 2 bytes each) + the embedding and the RMSNorm weights whole + the GEMM weights gathered there (none,
       a unit's, or two consecutive units' with the prefetch), exactly; --init-from keeps the slices only (the
       resumed run = unsharded);
     - --zero 3 with --poisson: a rank whose physical batch drew no row runs it on padding rows of weight 0 (every
       unit's gathers as the others run them): a step where one rank's batch is empty and the other's is not
       happens (the ranks' dp.poisson_empty_batches differ), and the saved model is --zero 2's byte for byte (whose
       empty batches only reduce-scatter zeros: the same sums in the same order);
     - --zero 3: params at the peak = 4 x rank 0's slices + 4 x the RMSNorm weights whole (+ a tied
       matrix whole, and its bf16 copy under bf16), exactly; params + grads + optimizer <= the unsharded
       run's / N + what is held whole + one unit's gradient + rank 0's remainder (the memory goal); the
       gathered weights (comm/gathered/<name>, from rank 0's measured trace) are at most two consecutive
       units' at any time and the largest such pair at their most (the unit computing and the next one's
       gather in flight: the prefetch; one unit's under DPMEM_ZERO3_PREFETCH=0, which trains the same bits),
       and at the peak none, one unit's or such a pair; rank 0's trace has comm/gathered/<name> (the
       gathers go straight there: no comm/gather_bucket);
     - the reduction overlapped with the backward (the default) = the serial one (DPMEM_COMM_OVERLAP=0),
       bit for bit, at --zero 0 and 2; a tied lm_head; Poisson sampling (empty physical batches);
     - --zero 2 --ranks 1 without mpirun (a job of one rank, the prepared GPU script's NCCL check) = one
       process, bit for bit;
     - bad input: --zero without mpirun outside a plan, ranks with different --zero, --zero 4, ranks with different DPMEM_COMM_BUCKET_MB, DPMEM_COMM_OVERLAP or DPMEM_ZERO3_PREFETCH: one line naming
       it, a non-zero exit, no hang;
     - a rank that dies: killed mid-run under --zero 2; killed inside --zero 3's weight gathers and inside
       --save's gathers (tests/mpi_die_at.c preloaded: SIGKILL at its Nth all-gather): a non-zero exit, the
       dead rank named, no hang, and the checkpoint the save was replacing intact with no half file left;
       a rank out of memory in the backward with a reduce-scatter in flight: its error and exit code 3.
   SKIP (77) when mpirun is missing. Binaries through DPMEM_BUILD; mpirun may run as root here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dp/poisson_capacity.h"
#include "test_dp_common.h"
#include "test_saved_model.h"
#include "test_mpi_launch.h"

static char last_hash[64];   /* rank 0's comm.params_hash of the last train() of several ranks */

#define C 70
#define F 173
#define L 2
static const char *SHAPE = "--model tiny --vocab 1001 --dim 70 --heads 5 --kv-heads 5 --ffn 173";
#define COMMON_FLAGS "--seq-len 16 --steps 3 --threads 1 --seed 5 --optimizer adamw --weight-decay 0.1 --warmup-steps 0 --batch-size 8"
static const char *COMMON = COMMON_FLAGS " --quiet";
/* a plan's breakdown at the peak is read from its output: not --quiet, which keeps the peak's total only */
static const char *PLAN_COMMON = COMMON_FLAGS;

static long long peak_of(const char *text) {
    const char *p = strstr(text, "peak tagged memory: ");
    return p ? atoll(p + 20) : -1;
}
static long long category_at_peak(const char *text, const char *cat) {
    char key[64];
    snprintf(key, sizeof key, "\n  %s ", cat);
    const char *p = strstr(text, key);
    return p ? atoll(p + strlen(key)) : -1;
}

/* rank 0's floats of a tensor of n among w ranks: n/w, one more where a remainder is left */
static long long slice0(long long n, int w) { return n / w + (n % w ? 1 : 0); }
/* The GEMM weights of the shape above (lm_head unless tied, and every block's 7 projections), whole or
   rank 0's slices (w > 1): under bf16 their fp32 masters are what --zero shards (the tied matrix stays
   whole: the embedding lookup reads its master) */
static long long gemm_floats(int V, int w, int tied) {
    long long t = tied ? 0 : slice0((long long)V * C, w);
    for (int l = 0; l < L; l++) t += 4 * slice0((long long)C * C, w) + 3 * slice0((long long)C * F, w);
    return t;
}
/* rank 0's floats over every trainable tensor of the shape above, vocabulary V */
static long long rank0_floats(int V, int w, int tied) {
    long long t = (tied ? 1 : 2) * slice0((long long)V * C, w) + slice0(C, w);   /* embed_tokens, lm_head, norm */
    for (int l = 0; l < L; l++)
        t += 2 * slice0(C, w) + 4 * slice0((long long)C * C, w) + 3 * slice0((long long)C * F, w);
    return t;
}

/* The gradient units of the shape above (llama.h; untied): block l's nine tensors, the final norm and
   lm_head, the embedding; vocabulary V. */
/* One gradient unit's floats (llama.h: a block; the final norm and lm_head; the embedding); with a tied
   lm_head the tied matrix stays live from the head's unit to the embedding's, beside a block's. */
static int is_unit_floats(long long n, int V, int tied) {
    const long long block = 2LL * C + 4LL * C * C + 3LL * C * F, vc = (long long)V * C;
    return n == block || n == (long long)C + vc || n == vc || (tied && (n == block + vc || n == (long long)C));
}

/* From a log's trace (its allocations and frees, one event a line): the live total at its first peak, the
   bytes of the buffers tagged comm/gathered/ live then, and their most at any time (-1 on failure). */
static void gathered_at_peak(const char *log, long long *peak, long long *gathered, long long *most) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s/dpmem-trace %s -o - | awk '/\"name\":\"(alloc|free) / {"
             " match($0, /\"name\":\"[a-z]+ [^\"]*\"/); split(substr($0, RSTART + 8, RLENGTH - 9), w, \" \");"
             " match($0, /\"bytes\":[0-9]+/); b = substr($0, RSTART + 8, RLENGTH - 8) + 0;"
             " match($0, /\"address\":\"[^\"]*\"/); a = substr($0, RSTART + 11, RLENGTH - 12);"
             " if (w[1] == \"alloc\") { live[a] = b; tag[a] = w[2]; t += b; if (index(w[2], \"comm/gathered/\") == 1) g += b;"
             " if (g > gm) gm = g; if (t > best) { best = t; gb = g } }"
             " else if (a in live) { t -= live[a]; if (index(tag[a], \"comm/gathered/\") == 1) g -= live[a]; delete live[a] } }"
             " END { printf \"%%.0f %%.0f %%.0f\\n\", best, gb, gm }'", B, log);
    *peak = *gathered = *most = -1;
    if (sh(cmd) == 0 && sscanf(out, "%lld %lld %lld", peak, gathered, most) != 3) *peak = *gathered = *most = -1;
}

/* One run: np ranks (np 1: one process, no mpirun) with --zero z, saved as name, logged as name.log. */
static int run_one(const char *prog, const char *args, int np, int z, const char *env, const char *name) {
    char cmd[4096];
    if (np == 1 && z == 0) snprintf(cmd, sizeof cmd, "%s %s/%s %s %s %s --save %s", env, B, prog, SHAPE, COMMON, args, name);
    else snprintf(cmd, sizeof cmd, "%s timeout 300 mpirun --oversubscribe -np %d %s/%s %s %s %s --zero %d --save %s --log %s.log",
                  env, np, B, prog, SHAPE, COMMON, args, z, name, name);
    return sh(cmd);
}

static int train(const char *prog, const char *args, int np, int z, const char *env, const char *name, Model *m) {
    int rc = run_one(prog, args, np, z, env, name);
    CHECK(rc == 0, "%s %s (np %d, zero %d): exit %d\n%.3000s", prog, args, np, z, rc, out);
    if (rc) return -1;
    if (np > 1) {   /* (the trainer fails when the ranks' hashes differ:) every rank logged the same one */
        char first[64] = "", cmd[1024];
        for (int r = 0; r < np; r++) {
            snprintf(cmd, sizeof cmd, "%s/dpmem-trace %s.rank%d.log -o - | grep -o '\"comm.params_hash\":\"[0-9a-f]*\"'", B, name, r);
            int rc2 = sh(cmd);
            CHECK(rc2 == 0 && strlen(out) > 20 && strlen(out) < 60 && (r == 0 || !strcmp(out, first)), "%s np %d zero %d: rank %d's params hash '%s' "
                  "(rank 0's '%s')", prog, np, z, r, out, first);
            if (r == 0) snprintf(first, sizeof first, "%.60s", out);
        }
        snprintf(last_hash, sizeof last_hash, "%s", first);
    }
    char dir[256];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    return load(dir, m);
}

static double maxabs(const Model *m) {
    double a = 0;
    for (size_t i = 0; i < m->n; i++) a = fabs(m->w[i]) > a ? fabs(m->w[i]) : a;
    return a;
}

/* The plan of one rank of np with --zero z against each rank's measured peak (the logs of `name`). */
static void plan_matches(const char *prog, const char *args, int np, int z, const char *env, const char *name, const char *what,
                         int vocab) {
    char cmd[4096];
    /* planned with --save as the runs were (its buffers come after the summary: the plan's log has them) */
    snprintf(cmd, sizeof cmd, "%s %s/%s %s %s %s --device plan --ranks %d --zero %d --save planned --log planned.log", env, B, prog, SHAPE,
             PLAN_COMMON, args, np, z);
    int rc = sh(cmd);
    const long long shown = peak_of(out), opt = category_at_peak(out, "optimizer");
    CHECK(rc == 0 && shown > 0, "%s: plan np %d zero %d: exit %d\n%.2000s", what, np, z, rc, out);
    const int tied = strstr(args, "--tie-embeddings") != NULL;
    static char summary[sizeof out];
    snprintf(summary, sizeof summary, "%s", out);
    snprintf(cmd, sizeof cmd, "%s/dpmem-report planned.log | sed -n 's/^peak total: .*(\\([0-9]*\\) bytes).*/\\1/p'", B);
    const long long planned = sh(cmd) == 0 ? atoll(out) : -1;
    CHECK(planned >= shown, "%s: plan np %d zero %d: the plan's log peaks at %lld bytes, its summary %lld", what, np, z, planned, shown);
    snprintf(out, sizeof out, "%s", summary);
    if (vocab) {
        const long long want = 8 * rank0_floats(vocab, np, tied);
        CHECK(opt == want, "%s: plan np %d zero %d: optimizer at the peak %lld bytes, want 8 x rank 0's %lld floats = %lld",
              what, np, z, opt, rank0_floats(vocab, np, tied), want);
        /* the memory goal of --zero 2: at the peak the gradients are rank 0's slices (grads/<name>.shard) and at
           most one gradient unit's full-size buffers (the unit being formed), never the whole model's */
        const long long grads = category_at_peak(out, "grads"), slices = 4 * rank0_floats(vocab, np, tied), full = grads - slices;
        if (z >= 2) {
            CHECK(grads >= slices && (full == 0 || (full % 4 == 0 && is_unit_floats(full / 4, vocab, tied))),
                  "%s: plan np %d zero %d: grads at the peak %lld bytes: rank 0's slices are %lld, the rest %lld is not one unit's",
                  what, np, z, grads, slices, full);
            if (!failures) printf("ok   %-40s np %d zero %d: grads at the peak = slices %lld + one unit's %lld bytes\n", what, np, z,
                                  slices, full);
        } else {
            const long long whole = 4 * rank0_floats(vocab, 1, tied);
            CHECK(grads == whole, "%s: plan np %d zero %d: grads at the peak %lld bytes, want the whole model's %lld", what, np, z,
                  grads, whole);
        }
    }
    if (vocab) {   /* the params category against the same ranks' unsharded plan */
        const long long params = category_at_peak(out, "params");
        snprintf(cmd, sizeof cmd, "%s %s/%s %s %s %s --device plan --ranks %d", env, B, prog, SHAPE, PLAN_COMMON, args, np);
        int rc0 = sh(cmd);
        const long long params0 = category_at_peak(out, "params");
        const long long state0 = params0 + category_at_peak(out, "grads") + category_at_peak(out, "optimizer");
        const int bf16 = strstr(args, "--precision bf16") != NULL;
        const long long saved = bf16 ? 4 * (gemm_floats(vocab, 1, tied) - gemm_floats(vocab, np, tied)) : 0;
        if (z == 3) {
            /* --zero 3: every weight rank 0's fp32 slice alone (the GEMM weights, an untied embedding), whole only
               the RMSNorm weights (C floats each) and a tied matrix (its master, and under bf16 its bf16 copy: the
               lookup reads the one, lm_head's GEMM the other); the gathered weights are comm/gathered/<name> */
            const long long vc = (long long)vocab * C, norms = 2LL * L + 1;
            const long long whole = norms * C + (tied ? vc : 0), whole_slices = norms * slice0(C, np) + (tied ? slice0(vc, np) : 0);
            const long long want = 4 * (rank0_floats(vocab, np, tied) - whole_slices + whole) + (tied && bf16 ? 2 * vc : 0);
            CHECK(rc0 == 0 && params == want, "%s: plan np %d zero 3: params at the peak %lld bytes, want rank 0's slices and the "
                  "norms%s whole: %lld", what, np, params, tied ? " and the tied matrix" : "", want);
            /* the memory goal: params + grads + optimizer at the peak <= 1/N of the unsharded run's, plus what is held
               whole (above), plus the one gradient unit in progress (grads: --zero 2's), plus rank 0's remainder
               (at most one float of each of the 3 + 9L tensors, 16 bytes each) */
            const long long grads = category_at_peak(summary, "grads"), full = grads - 4 * rank0_floats(vocab, np, tied);
            const long long state = params + grads + category_at_peak(summary, "optimizer");
            const long long bound = state0 / np + 4 * whole + (tied && bf16 ? 2 * vc : 0) + full + 16 * (3 + 9LL * L);
            CHECK(state <= bound, "%s: plan np %d zero 3: params+grads+optimizer at the peak %lld bytes > %lld (unsharded %lld / %d, "
                  "+ %lld whole, + one unit's gradient %lld)", what, np, state, bound, state0, np, 4 * whole, full);
            if (params == want && state <= bound)
                printf("ok   %-40s np %d zero 3: params %lld = slices + norms%s whole; params+grads+optimizer %lld <= %lld / %d + "
                       "%lld whole + one unit's gradient %lld\n", what, np, params, tied ? ", tied matrix" : "", state, state0, np,
                       4 * whole + (tied && bf16 ? 2 * vc : 0), full);
            /* the gathered weights (comm/gathered/<name>) in rank 0's measured log: at most two consecutive units' at
               any time (the one computing and the next, prefetched: forward L+1, 0 .. L-1, L; backward L, L-1 .. 0), and
               that many at some time (their most = the largest pair's); one unit's at most with the prefetch off. At
               the peak, whatever the peak's moment holds of those: none (a peak outside the gathers, e.g. book-keeping's
               formation after the backward), one unit's (block 0's backward: nothing left to prefetch) or a pair. A
               unit's gathered bytes: a block's 7 GEMM weights and an untied lm_head in the GEMMs' type, an untied
               embedding in fp32 (its lookup reads fp32); a tied matrix is held whole, never gathered. */
            const long long es = bf16 ? 2 : 4, blk = es * (4LL * C * C + 3LL * C * F), head = tied ? 0 : es * vc, emb = tied ? 0 : 4 * vc;
            const long long pair[3] = { emb + blk, 2 * blk, blk + head }, one[3] = { emb, blk, head };
            const int pf = !strstr(env, "DPMEM_ZERO3_PREFETCH=0");
            long long most_want = 0;
            for (int k = 0; k < 3; k++) most_want = (pf ? pair[k] : one[k]) > most_want ? (pf ? pair[k] : one[k]) : most_want;
            char log0[128];
            snprintf(log0, sizeof log0, "%s.rank0.log", name);
            long long tpeak, gath, most;
            gathered_at_peak(log0, &tpeak, &gath, &most);
            int at = gath == 0;   /* what the peak holds: none, one unit's, or (prefetch) a pair */
            for (int k = 0; k < 3; k++) at |= gath == one[k] || (pf && gath == pair[k]);
            CHECK(tpeak > 0 && most == most_want && at, "%s: np %d zero 3%s: comm/gathered/ at rank 0's peak (%lld bytes) %lld bytes, "
                  "their most %lld: want none, one unit's%s there, and the most %lld (a block %lld, the head %lld, the embedding %lld)",
                  what, np, pf ? "" : " (prefetch off)", tpeak, gath, most, pf ? " or two consecutive units'" : "", most_want, blk, head, emb);
            if (tpeak > 0 && most == most_want && at)
                printf("ok   %-40s np %d zero 3: gathered weights %s: at most %lld bytes (%s), at the peak %lld (%s)\n", what, np,
                       pf ? "prefetched" : "not prefetched", most, pf ? "the largest two consecutive units'" : "the largest unit's", gath,
                       gath == 0 ? "none" : gath == blk + head ? "the head's + a block's" : gath == 2 * blk ? "two blocks'" :
                       gath == emb + blk ? "the embedding's + a block's" : "one unit's");
        } else
            CHECK(rc0 == 0 && params > 0 && params == params0 - saved, "%s: plan np %d zero %d: params at the peak %lld bytes, unsharded "
                  "%lld: want %lld less (%s)", what, np, z, params, params0, saved,
                  bf16 ? "4 bytes x the GEMM weights' floats but rank 0's slices" : "fp32: the master is the parameter, nothing saved");
        if (z < 3 && bf16 && params == params0 - saved)
            printf("ok   %-40s np %d zero %d: params %lld = unsharded %lld - 4 x (%lld - %lld) GEMM floats\n", what, np, z, params,
                   params0, gemm_floats(vocab, 1, tied), gemm_floats(vocab, np, tied));
    }
    long long max = -1;
    for (int r = 0; r < np; r++) {
        snprintf(cmd, sizeof cmd, "%s/dpmem-report %s.rank%d.log | sed -n 's/^peak total: .*(\\([0-9]*\\) bytes).*/\\1/p'", B, name, r);
        rc = sh(cmd);
        const long long peak = rc == 0 ? atoll(out) : -1;
        CHECK(peak > 0 && (r == 0 ? peak == planned : peak <= planned), "%s: np %d zero %d: rank %d measured %lld bytes, plan %lld",
              what, np, z, r, peak, planned);
        if (peak > max) max = peak;
    }
    if (max == planned) printf("ok   %-40s np %d zero %d: plan = rank 0's peak = %lld bytes (the most of %d ranks)\n", what, np, z,
                               planned, np);
}

/* vocab: AdamW over the model's tensors of that vocabulary (0: SGD, or LoRA's adapters only);
   vs1: compared with one process too (AdamW without noise is not: below); phys: a DP trainer's
   --max-physical-batch-size (0: the whole share at once), accum: --grad-accum; resume: also --init-from
   the one process's checkpoint, sharded against unsharded */
typedef struct { const char *prog, *args, *what, *env; int four, vocab, vs1, phys, accum, resume; } Case;

/* Physical batches a rank runs per step (the logical batch is 8). --zero 2 reduce-scatters each one's
   sum as its backward goes (DeepSpeed's ZeRO-2 does at every micro-step): with more than one, the
   slices add the ranks' sums batch by batch where the unsharded ranks add the batches first and
   then the ranks, another order: equal to <= 1e-6, not bit for bit. */
static int micro_of(const Case *k, int np) {
    if (strstr(k->args, "--poisson"))   /* dp_sgd.c: room for a rank's rows of COMMON's 3 steps (poisson_capacity.h), in physical batches */
        return (int)((dp_poisson_capacity(8.0 / np, 3, np) + k->phys - 1) / k->phys);
    return (k->accum ? k->accum : 1) * (k->phys ? 8 / np / k->phys : 1);
}


/* rank 0's log of a sharded run: its collectives are scopes, their bucket a tagged buffer */
static void scopes_check(const char *name, int z, const char *what) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/dpmem-trace %s.rank0.log -o - | grep -o '\"name\":\"[a-z_]*\"\\|comm/[a-z_]*' | sort -u | tr '\\n' ' '",
             B, name);
    int rc = sh(cmd);
    CHECK(rc == 0 && strstr(out, "\"name\":\"all_gather\"") && strstr(out, "comm/shard_bucket") &&
          strstr(out, z >= 2 ? "\"name\":\"reduce_scatter\"" : "\"name\":\"allreduce\""),
          "%s --zero %d: rank 0's trace lacks its collectives' scopes or comm/shard_bucket: %s", what, z, out);
    /* --zero 3: each unit's weights gathered straight into comm/gathered/<name> (no bucket of their own) */
    CHECK(z < 3 || (strstr(out, "comm/gathered") && !strstr(out, "comm/gather_bucket")),
          "%s --zero 3: rank 0's trace lacks comm/gathered/<name> or has comm/gather_bucket: %s", what, out);
}

/* --zero 3 with LoRA: the frozen base at rank 0's measured peak = rank 0's slices of the GEMM weights (bf16: 2
   bytes each, the slices of the base kept in bf16 alone; fp32: 4) + the embedding (bf16 alone under bf16: C is
   even) and the RMSNorm weights whole (params, its log's breakdown), + the GEMM weights gathered whole there
   (comm/gathered/<name>, from its trace: none, one unit's, or the unit computing and the next one's in flight:
   a block's seven, lm_head), exactly; and at most the largest two consecutive units' at any time (a block's
   and lm_head's: merged LoRA's re-merge and --save gather one tensor at a time). */
static void lora_base_check(const char *name, int np, int bf16, const char *what) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/dpmem-report %s.rank0.log", B, name);
    if (sh(cmd) != 0) { CHECK(0, "%s: dpmem-report %s.rank0.log failed: %.1000s", what, name, out); return; }
    const long long params = category_at_peak(out, "params");
    const int e = bf16 ? 2 : 4;
    const long long vc = 1001LL * C, norms = (2LL * L + 1) * C;
    const long long slices = e * gemm_floats(1001, np, 0), whole = (long long)e * vc + 4 * norms;
    CHECK(params == slices + whole, "%s: %d ranks --zero 3: params at the peak %lld bytes, want rank 0's slices %lld + the embedding "
          "and norms whole %lld = %lld", what, np, params, slices, whole, slices + whole);
    const long long block = (long long)e * (4LL * C * C + 3LL * C * F), head = (long long)e * vc;
    char log0[128];
    snprintf(log0, sizeof log0, "%s.rank0.log", name);
    long long tpeak, gath, most;
    gathered_at_peak(log0, &tpeak, &gath, &most);
    const int at = gath == 0 || gath == block || gath == head || gath == 2 * block || gath == block + head;
    CHECK(tpeak > 0 && at && most == block + head, "%s: %d ranks --zero 3: the frozen base gathered at rank 0's peak %lld bytes (want none, "
          "a block's %lld, lm_head's %lld or two consecutive units'), at most %lld (want a block's and lm_head's, %lld)", what, np, gath,
          block, head, most, block + head);
    if (params == slices + whole && tpeak > 0 && at && most == block + head)
        printf("ok   %-40s np %d zero 3: frozen base at the peak = slices %lld + embedding and norms %lld + gathered %lld (%s); at most "
               "%lld gathered\n", what, np, slices, whole, gath, gath == 0 ? "none" : gath == head ? "lm_head" : gath == block ? "a block" :
               gath == 2 * block ? "two blocks" : "a block and lm_head", most);
}

/* --zero 3 with --poisson: the ranks ran different numbers of physical batches with no row drawn
   (dp.poisson_empty_batches, each rank's log): at some step one rank's batch was empty while another's had
   rows, and the collectives still matched (the run finished, its weights checked above). Such a batch runs
   on padding rows of weight 0: zero gradients reduce-scattered where --zero 2 reduce-scatters zeros without
   running the model, the same sums in the same order: the saved model is --zero 2's file byte for byte. */
static void poisson_empty_check(const char *name, int np, const char *what) {
    char z2[512];
    snprintf(z2, sizeof z2, "cmp z2_%d/model.safetensors %s/model.safetensors", np, name);
    const int same = sh(z2) == 0;
    CHECK(same, "%s: %d ranks --zero 3: model.safetensors differs from --zero 2's (the empty batches' zero gradients): %s", what, np,
          out);
    if (same) printf("ok   %-40s np %d zero 3: = --zero 2 file for file (its empty batches run on padding rows)\n", what, np);
    long long first = -1;
    int differ = 0;
    for (int r = 0; r < np; r++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "%s/dpmem-trace %s.rank%d.log -o - | grep -o '\"dp.poisson_empty_batches\":\"\\?[0-9]*' | tr -dc 0-9",
                 B, name, r);
        const long long n = sh(cmd) == 0 && out[0] ? atoll(out) : -1;
        CHECK(n >= 0, "%s: %d ranks --zero 3: rank %d's log has no dp.poisson_empty_batches: %s", what, np, r, out);
        if (r == 0) first = n; else differ |= n != first;
    }
    CHECK(differ, "%s: %d ranks --zero 3: every rank ran %lld empty physical batches: no step had one rank's batch empty and "
          "another's not (the case checks nothing; change the seed)", what, np, first);
    if (differ) printf("ok   %-40s np %d zero 3: ranks with different empty physical batches (rank 0: %lld) stay in step\n", what,
                       np, first);
}

static void check_case(const Case *k) {
    Model w0, w1;
    char a0[1024];
    snprintf(a0, sizeof a0, "%s --lr 0", k->args);
    if (train(k->prog, a0, 1, 0, k->env, "w0", &w0)) return;
    if (train(k->prog, k->args, 1, 0, k->env, "w1", &w1)) { unload(&w0); return; }
    const double u = maxdiff(&w1, &w0), big = maxabs(&w1);
    {   /* --ranks 1: a job of one rank without mpirun (the collectives over one rank): the same bits */
        Model w;
        char a1[1024];
        snprintf(a1, sizeof a1, "%s --ranks 1 --zero 2", k->args);
        if (train(k->prog, a1, 1, 0, k->env, "one", &w) == 0) {
            if (micro_of(k, 1) == 1)
                CHECK(maxdiff(&w, &w1) == 0, "%s: --zero 2 --ranks 1 vs 1 process: max diff %g (want bit for bit)", k->what, maxdiff(&w, &w1));
            else   /* each physical batch's sum added into the slice: another order than the backward's accumulation */
                CHECK(maxdiff(&w, &w1) <= 1e-6 * maxabs(&w1), "%s: --zero 2 --ranks 1 vs 1 process, %d physical batches: max diff %g "
                      "(want <= 1e-6 of %g)", k->what, micro_of(k, 1), maxdiff(&w, &w1), maxabs(&w1));
            unload(&w);
        }
    }
    CHECK(u > 1e-4 * big, "%s: the update is %g of weights up to %g (the comparison would say nothing)", k->what, u, big);
    for (int np = 2; np <= (k->four ? 4 : 2); np += 2) {
        Model wr, wz;
        char name[64];
        snprintf(name, sizeof name, "r%d", np);
        if (train(k->prog, k->args, np, 0, k->env, name, &wr)) continue;
        char hash_r[64];
        snprintf(hash_r, sizeof hash_r, "%s", last_hash);
        for (int z = 1; z <= 3; z++) {
            snprintf(name, sizeof name, "z%d_%d", z, np);
            if (train(k->prog, k->args, np, z, k->env, name, &wz)) continue;
            if (k->vocab) scopes_check(name, z, k->what);
            if (z == 3 && strstr(k->prog, "lora")) lora_base_check(name, np, strstr(k->args, "--precision bf16") != NULL, k->what);
            if (z == 3 && strstr(k->args, "--poisson")) poisson_empty_check(name, np, k->what);
            const double bits = maxdiff(&wz, &wr), rel = maxdiff(&wz, &w1) / big;
            const int exact = z == 1 || micro_of(k, np) == 1;   /* the same order of the sums (micro_of) */
            if (exact) CHECK(bits == 0, "%s: %d ranks --zero %d vs %d ranks unsharded: max diff %g (want bit for bit)", k->what, np, z, np, bits);
            else CHECK(bits <= 1e-6 * big, "%s: %d ranks --zero %d vs %d ranks unsharded, %d physical batches a rank: max diff %g (want <= "
                       "1e-6 of %g)", k->what, np, z, np, micro_of(k, np), bits, big);
            if (exact) {   /* the files themselves and the hash: the same order of the sums only */
                /* the files themselves (a sharded master is gathered tensor by tensor to rank 0), and the hash of
                   the gathered model = the unsharded ranks' */
                char cmd[512];
                snprintf(cmd, sizeof cmd, "cmp r%d/model.safetensors %s/model.safetensors", np, name);
                int same = sh(cmd) == 0;
                CHECK(same, "%s: %d ranks --zero %d: model.safetensors differs from the unsharded ranks' file: %s", k->what, np, z, out);
                CHECK(!strcmp(last_hash, hash_r), "%s: %d ranks --zero %d: params hash %s, unsharded %s", k->what, np, z, last_hash, hash_r);
                if (k->resume) {   /* --init-from the one process's checkpoint: sharded = unsharded, file for file */
                    char a2[1200], n0[64], n1[64];
                    snprintf(a2, sizeof a2, "%s --init-from w1", k->args);
                    snprintf(n0, sizeof n0, "i0_%d", np);
                    snprintf(n1, sizeof n1, "i%d_%d", z, np);
                    Model i0, i1;
                    if (z == 1 && train(k->prog, a2, np, 0, k->env, n0, &i0) == 0) unload(&i0);
                    if (train(k->prog, a2, np, z, k->env, n1, &i1) == 0) {
                        snprintf(cmd, sizeof cmd, "cmp %s/model.safetensors %s/model.safetensors && ! cmp -s %s/model.safetensors "
                                 "w1/model.safetensors", n0, n1, n1);
                        int rc2 = sh(cmd);
                        CHECK(rc2 == 0, "%s: %d ranks --zero %d --init-from: the saved model differs from the unsharded resumed "
                              "run's (or equals the checkpoint it started from): %s", k->what, np, z, out);
                        if (rc2 == 0) printf("ok   %-36s %d ranks --zero %d --init-from = unsharded resumed, file for file\n", k->what, np, z);
                        unload(&i1);
                        plan_matches(k->prog, a2, np, z, k->env, n1, "  resumed", 0);   /* the load's one-tensor buffer planned too */
                    }
                }
            }
            CHECK(!k->vs1 || (rel >= 0 && rel <= 1e-6), "%s: %d ranks --zero %d vs 1 process: max diff %g relative to the largest weight %g",
                  k->what, np, z, rel, big);
            if (!exact && bits <= 1e-6 * big)
                printf("ok   %-36s %d ranks --zero %d = %d ranks to %.2g relative (%d physical batches a rank: another order)%s\n",
                       k->what, np, z, np, bits / big, micro_of(k, np), k->vs1 ? "; vs 1 process too" : "");
            else if (bits == 0 && k->vs1 && rel >= 0 && rel <= 1e-6)
                printf("ok   %-36s %d ranks --zero %d = %d ranks bit for bit; vs 1 process %.2g relative (update %.2g)\n", k->what,
                       np, z, np, rel, u / big);
            else if (bits == 0) printf("ok   %-36s %d ranks --zero %d = %d ranks bit for bit (update %.2g)\n", k->what, np, z, np, u / big);
            unload(&wz);
            plan_matches(k->prog, k->args, np, z, k->env, name, k->what, k->vocab);
        }
        unload(&wr);
    }
    unload(&w0); unload(&w1);
}

/* A rank killed inside a chosen all-gather (tests/mpi_die_at.c preloaded into rank 1: SIGKILL at its Nth
   MPI_Iallgather): --zero 3's weight gathers during the first step, and --save's gathers of the sharded tensors
   (the last all-gathers of the run). Each: a non-zero exit within the timeout (no hang: 124 is timeout's), a
   line naming the dead rank (mpirun's, or rank 0's own when it sees the failure first), and for the save
   nothing written half: the checkpoint saved there before is intact (config.json and model.safetensors byte
   for byte: the killed save is of bf16 weights, whose config.json says so, and it once replaced the config
   before the gathers) and no model.safetensors.tmp is left (the writer names its file only once it is whole). */
static void killed_in_gathers(void) {
    const char *shim = "ASAN_OPTIONS=verify_asan_link_order=0 LD_PRELOAD=%s/tests/libmpi_die_at.so";
    char pre[1200], args[1024], cmd[4096];
    snprintf(pre, sizeof pre, shim, B);
    snprintf(args, sizeof args, "%s --seq-len 16 --steps 2 --threads 1 --batch-size 4 --zero 3 --quiet --save-dtype f32 --save kill_save", SHAPE);
    /* the run whole, rank 1 counting its all-gathers; its checkpoint is the one the killed save must not spoil */
    snprintf(cmd, sizeof cmd, "(timeout 120 mpirun --oversubscribe -np 1 %s/train_vanilla %s : -np 1 env DPMEM_TEST_COUNT_GATHERS=1 %s "
             "%s/train_vanilla %s && cp kill_save/model.safetensors kill_saved.safetensors && cp kill_save/config.json kill_saved.json)",
             B, args, pre, B, args);
    int rc = sh(cmd);
    const char *n = strstr(out, "mpi_die_at: ");
    const long gathers = n ? atol(n + 12) : 0;
    /* 2 steps of (forward + backward) x 16 units' gathers, the params hash's 16 tensors, the save's 16 */
    CHECK(rc == 0 && gathers == 96, "--zero 3 with rank 1 counting its all-gathers: exit %d, %ld all-gathers (want 96):\n%.2000s", rc,
          gathers, out);
    if (rc != 0 || gathers < 40) return;
    const long at[2] = { 20, gathers - 2 };   /* step 1's backward; the save's second-to-last tensor */
    const char *where[2] = { "--zero 3's weight gathers", "--save's gathers" };
    snprintf(args, sizeof args, "%s --seq-len 16 --steps 2 --threads 1 --batch-size 4 --zero 3 --quiet --save-dtype bf16 --save kill_save", SHAPE);
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd, "timeout 60 mpirun --oversubscribe -np 1 %s/train_vanilla %s : -np 1 env DPMEM_TEST_DIE_AT_GATHER=%ld %s "
                 "%s/train_vanilla %s", B, args, at[k], pre, B, args);
        rc = sh(cmd);
        const int named = strstr(out, "process rank 1") != NULL || strstr(out, "another rank died") != NULL;
        CHECK(rc != 0 && rc != 124 && strstr(out, "killing this rank at all-gather") && named, "rank 1 killed in %s (all-gather %ld): "
              "exit %d, want non-zero, no hang, a line naming the dead rank:\n%.2000s", where[k], at[k], rc, out);
        if (k == 1) {
            rc = sh("(cmp kill_save/model.safetensors kill_saved.safetensors && cmp kill_save/config.json kill_saved.json && ls kill_save)");
            CHECK(rc == 0 && !strstr(out, ".tmp"), "rank 1 killed in --save's gathers: the checkpoint there was spoilt or a half file "
                  "left (want the earlier config.json and model.safetensors intact, no .tmp): %s", out);
        }
    }
    if (!failures) printf("ok   a rank killed in --zero 3's gathers and in --save's: non-zero exit, the dead rank named, no hang; the "
                          "checkpoint there intact, no half file\n");
}

/* A rank that fails (out of memory: its own --mem-limit) inside the backward of the second physical batch, with
   --zero 2's reduce-scatter of a unit in flight: its failure path waits for the collective (the other rank runs
   it) before freeing the bucket; the job ends with rank 1's error and exit code (3), no hang. */
static void failing_rank_in_flight(void) {
    char args[1024], cmd[4096];
    snprintf(args, sizeof args, "%s --seq-len 16 --steps 3 --threads 1 --batch-size 8 --grad-accum 2 --zero 2 --quiet", SHAPE);
    snprintf(cmd, sizeof cmd, "timeout 60 mpirun --oversubscribe -np 1 %s/train_vanilla %s : -np 1 %s/train_vanilla %s --mem-limit 4900000",
             B, args, B, args);
    int rc = sh(cmd);
    CHECK(rc == 3 && strstr(out, "error: out of memory: workspace/backward.") && strstr(out, "rank 1 of 2 failed (exit 3)"),
          "rank 1 out of memory in the backward, a reduce-scatter in flight: exit %d, want 3 and its error:\n%.2000s", rc, out);
    if (!failures) printf("ok   a rank out of memory with a reduce-scatter in flight: its error, exit 3, no hang\n");
}

int main(void) {
    const int begun = mpi_test_begin("test_comm_zero", "sharded state");
    if (begun) return begun;

    /* AdamW without noise magnifies the last bit of a gradient near zero into a whole step (m/√v): the
       sums over samples in another order move such weights by up to lr, so vanilla is compared with one
       process under SGD, and under AdamW with the unsharded ranks only (bit for bit); so is bf16 (a weight
       that differs in its last fp32 bit rounds to another bf16 copy now and then); with noise the
       steps are the noise's, and the DP cases compare with one process under AdamW. The first case
       has a vocabulary of 5001 and a 1 MiB bucket: 4 rounds a collective, the embedding and lm_head cut
       between rounds. The DP cases give --noise-seed (without it each run draws its own seed). */
    static const Case cases[] = {
        { "train_vanilla", "--lr 1e-2 --vocab 5001", "vanilla fp32 adamw, 4 rounds", "DPMEM_COMM_BUCKET_MB=1", 1, 5001, 0, 0, 0, 0 },
        { "train_vanilla", "--lr 1 --optimizer sgd --checkpoint-activations --grad-accum 2", "vanilla fp32 ckpt sgd, 2 accumulated",
          "", 0, 0, 1, 0, 2, 0 },
        { "train_vanilla", "--lr 1e-2 --precision bf16 --checkpoint-activations", "vanilla bf16 ckpt adamw", "", 0, 1001, 0, 0, 0, 0 },
        { "train_flash", "--lr 1e-2 --max-physical-batch-size 2 --noise-multiplier 1 --max-grad-norm 0.1 --noise-seed 11", "flash+bk fp32 sigma 1",
          "", 1, 1001, 1, 2, 0, 0 },
        { "train_ghost", "--lr 1e-2 --clip twopass --precision bf16 --noise-multiplier 0.5 --max-grad-norm 0.1 --noise-seed 11",
          "ghost+twopass bf16 sigma 0.5", "", 0, 1001, 1, 0, 0, 0 },
        /* direct (Opacus's per-sample gradients) with book-keeping, 2 physical batches of 2 at 2 ranks; the serial
           reduction (DPMEM_COMM_OVERLAP=0), which must give the overlapped one's bits */
        { "train_dpsgd", "--lr 1e-2 --max-physical-batch-size 2 --clip bk --noise-multiplier 1 --max-grad-norm 0.1 --noise-seed 11",
          "direct+bk fp32 sigma 1, serial", "DPMEM_COMM_OVERLAP=0", 1, 1001, 1, 2, 0, 0 },
        { "train_flash", "--lr 1e-2 --norm mixed --precision bf16 --checkpoint-activations --noise-multiplier 1 --max-grad-norm 0.1 "
          "--noise-seed 11", "mixed+bk bf16 ckpt sigma 1", "", 1, 1001, 1, 0, 0, 0 },
        { "train_lora", "--lr 1e-2 --lora-rank 4 --noise-multiplier 1 --max-grad-norm 0.1 --noise-seed 11 --checkpoint-activations --check-finite",
          "LoRA flash+bk ckpt sigma 1", "", 1, 0, 1, 0, 0, 1 },
        /* a tied lm_head (its gradient is the embedding's: complete only after the embedding's unit), and
           Poisson sampling (physical batches with no rows on one rank and rows on another: --zero 2 still
           runs every unit's reduce-scatter there, of zeros, or the ranks' collectives would not match) */
        { "train_ghost", "--lr 1e-2 --tie-embeddings --max-physical-batch-size 4 --clip twopass --noise-multiplier 1 --max-grad-norm 0.1 "
          "--noise-seed 11", "ghost+twopass tied fp32 sigma 1", "", 0, 0, 1, 4, 0, 0 },
        { "train_flash", "--lr 1e-2 --poisson --max-physical-batch-size 2 --noise-multiplier 1 --max-grad-norm 0.1 --noise-seed 11",
          "flash+bk poisson fp32 sigma 1", "", 0, 0, 1, 2, 0, 0 },
        /* bf16 with the GEMM weights' fp32 masters sharded: a 1 MiB bucket (4 rounds) and --init-from (resume);
           tied embeddings (the tied matrix's master stays whole); LoRA */
        { "train_vanilla", "--lr 1e-2 --vocab 5001 --precision bf16 --check-finite", "vanilla bf16 adamw, 4 rounds", "DPMEM_COMM_BUCKET_MB=1",
          1, 5001, 0, 0, 0, 1 },
        { "train_flash", "--lr 1e-2 --precision bf16 --tie-embeddings --max-physical-batch-size 2 --noise-multiplier 1 --max-grad-norm 0.1 "
          "--noise-seed 11", "flash+bk bf16 tied sigma 1", "", 0, 1001, 1, 2, 0, 0 },
        { "train_lora", "--lr 1e-2 --lora-rank 4 --precision bf16 --noise-multiplier 1 --max-grad-norm 0.1 --noise-seed 11",
          "LoRA bf16 sigma 1", "", 1, 0, 1, 0, 0, 1 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) check_case(&cases[k]);

    /* the reduction overlapped with the backward (the default) against the serial one (DPMEM_COMM_OVERLAP=0):
       the same collectives of the same buckets, the results applied in the order they started: the same bits,
       sharded (--zero 2, reduce-scatter) and not (--zero 0, the all-reduce of the last physical batch, unit by
       unit against the serial one's whole-model bucket) */
    for (int z = 0; z <= 2; z += 2) {
        const char *args = "--lr 1e-2 --max-physical-batch-size 2 --noise-multiplier 1 --max-grad-norm 0.1 --noise-seed 11";
        Model wo, ws;
        if (train("train_flash", args, 2, z, "", "ov", &wo)) continue;
        if (train("train_flash", args, 2, z, "DPMEM_COMM_OVERLAP=0", "se", &ws) == 0) {
            CHECK(maxdiff(&wo, &ws) == 0, "flash+bk 2 ranks --zero %d: overlapped vs serial reduction: max diff %g (want bit for bit)", z,
                  maxdiff(&wo, &ws));
            if (maxdiff(&wo, &ws) == 0) printf("ok   flash+bk 2 ranks --zero %d: the overlapped reduction = the serial one bit for bit\n", z);
            unload(&ws);
        }
        unload(&wo);
    }

    /* --zero 3's prefetch (the next unit's gather in flight while this one computes, the default) against none
       (DPMEM_ZERO3_PREFETCH=0: each gather completed at once): the same bits moved, the same bits trained; the
       plan without it = its peak, one unit's gathered weights there */
    {
        const char *args = "--lr 1e-2 --precision bf16 --checkpoint-activations --noise-multiplier 1 --max-grad-norm 0.1 --noise-seed 11";
        Model wp, wn;
        if (train("train_flash", args, 2, 3, "", "pf", &wp) == 0) {
            if (train("train_flash", args, 2, 3, "DPMEM_ZERO3_PREFETCH=0", "nopf", &wn) == 0) {
                CHECK(maxdiff(&wp, &wn) == 0 && sh("cmp pf/model.safetensors nopf/model.safetensors") == 0,
                      "flash+bk bf16 ckpt 2 ranks --zero 3: prefetch vs none: max diff %g (want bit for bit)", maxdiff(&wp, &wn));
                if (maxdiff(&wp, &wn) == 0) printf("ok   flash+bk bf16 ckpt 2 ranks --zero 3: the prefetched gathers = none, bit for bit\n");
                unload(&wn);
                plan_matches("train_flash", args, 2, 3, "DPMEM_ZERO3_PREFETCH=0", "nopf", "flash+bk bf16 ckpt, prefetch off", 1001);
            }
            unload(&wp);
        }
    }

    /* the suite: --ranks 2 --zero 2|3 --plan --check, every experiment's plan exact; --zero without --ranks refused */
    {
        char suite[2048];
        const char *root = getenv("PWD") ? getenv("PWD") : ".";
        for (int z = 2; z <= 3; z++) {
            snprintf(suite, sizeof suite, "cd %s && DPMEM_BUILD=%s sh tools/run_experiments --model tiny --seq-len 16 --steps 1 "
                     "--batch-size 4 --physical-batch 2 --threads 1 --ranks 2 --zero %d --plan --check --tolerance 0 --device cpu --quiet "
                     "--out %s/suite%d vanilla flash >/dev/null && cat %s/suite%d/check.txt && grep -c -- '--zero %d' %s/suite%d/*.cmd",
                     root, B, z, tmp, z, tmp, z, z, tmp, z);
            int rc = sh(suite);
            int exact = 0;
            for (const char *q = out; (q = strstr(q, "  exact")); q++) exact++;
            CHECK(rc == 0 && exact == 2 && !strstr(out, "MISMATCH"), "run_experiments --ranks 2 --zero %d --plan --check: exit %d, %d of 2 "
                  "exact:\n%.3000s", z, rc, exact, out);
        }
        snprintf(suite, sizeof suite, "cd %s && DPMEM_BUILD=%s sh tools/run_experiments --model tiny --zero 1 --plan --out %s/suite_norank vanilla",
                 root, B, tmp);
        int rc = sh(suite);
        CHECK(rc != 0 && strstr(out, "--zero 1 shards over ranks: give --ranks N"), "run_experiments --zero without --ranks: exit %d: %s",
              rc, out);
        if (!failures) printf("ok   run_experiments --ranks 2 --zero 2 and 3 --plan --check: vanilla and flash exact; --zero without --ranks refused\n");
    }
    /* bad input */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s/train_flash %s --steps 1 --zero 1", B, SHAPE);
    int rc = sh(cmd);
    CHECK(rc == 1 && strstr(out, "--zero 1 shards the training state over the ranks of an MPI job") && !strchr(strchr(out, '\n') + 1, '\n'),
          "--zero without mpirun: exit %d: %s", rc, out);
    snprintf(cmd, sizeof cmd, "%s/train_vanilla %s --steps 1 --zero 4", B, SHAPE);
    rc = sh(cmd);
    CHECK(rc == 1 && strstr(out, "--zero needs an integer in [0, 3], got '4'"), "--zero 4: exit %d: %s", rc, out);
    snprintf(cmd, sizeof cmd, "timeout 120 mpirun --oversubscribe -np 1 %s/train_flash %s --steps 2 --threads 1 --batch-size 4 --zero 1 : "
             "-np 1 %s/train_flash %s --steps 2 --threads 1 --batch-size 4 --zero 2", B, SHAPE, B, SHAPE);
    rc = sh(cmd);
    CHECK(rc != 0 && rc != 124 && strstr(out, "disagree on --zero (this rank: 1)") && strstr(out, "disagree on --zero (this rank: 2)"),
          "ranks with --zero 1 and 2: exit %d, want both naming --zero:\n%.2000s", rc, out);
    /* ranks whose collectives' settings differ (the bucket's size, the overlap, --zero 3's prefetch) would run
       collectives of other sizes or in another order: stopped before the first step, naming the setting */
    static const char *const envs[][2] = { { "DPMEM_COMM_BUCKET_MB=1", "DPMEM_COMM_BUCKET_MB (this rank: 1 MiB)" },
                                           { "DPMEM_COMM_OVERLAP=0", "DPMEM_COMM_OVERLAP (this rank: 0)" },
                                           { "DPMEM_ZERO3_PREFETCH=0", "DPMEM_ZERO3_PREFETCH (this rank: 0)" } };
    for (int k = 0; k < 3; k++) {
        snprintf(cmd, sizeof cmd, "timeout 120 mpirun --oversubscribe -np 1 env %s %s/train_vanilla %s --steps 2 --threads 1 --batch-size 4 "
                 "--zero 3 : -np 1 %s/train_vanilla %s --steps 2 --threads 1 --batch-size 4 --zero 3", envs[k][0], B, SHAPE, B, SHAPE);
        rc = sh(cmd);
        CHECK(rc != 0 && rc != 124 && strstr(out, envs[k][1]), "ranks with and without %s: exit %d, want one naming it:\n%.2000s",
              envs[k][0], rc, out);
    }
    /* a rank killed mid-run (a CPU-time limit: SIGKILL, in a collective or on its way there): the job ends */
    snprintf(cmd, sizeof cmd, "timeout 60 mpirun --oversubscribe -np 1 %s/train_vanilla %s --steps 100000 --threads 1 --quiet --zero 2 : "
             "-np 1 sh -c 'ulimit -t 2; exec %s/train_vanilla %s --steps 100000 --threads 1 --quiet --zero 2'", B, SHAPE, B, SHAPE);
    rc = sh(cmd);
    CHECK(rc != 0 && rc != 124, "a killed rank under --zero 2: exit %d, want non-zero without a hang:\n%.2000s", rc, out);
    if (!failures) printf("ok   bad input: --zero without mpirun, --zero 4, ranks with different --zero, bucket, overlap or prefetch, a killed rank\n");
    killed_in_gathers();
    failing_rank_in_flight();

    mpi_test_end();
    if (failures) { printf("test_comm_zero: %d failures\n", failures); return 1; }
    printf("test_comm_zero: OK (--zero 1, 2 and 3 on 2 and 4 ranks = unsharded bit for bit, = 1 process to 1e-6, noise included; "
           "plans = rank 0's peak)\n");
    return 0;
}
