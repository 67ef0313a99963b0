/* config.c — presets, flag parsing and validation for the sample trainers (see config.h). */
#include "config.h"
#include "checkpoint.h"
#include "comm.h"
#include "data.h"
#include "dpmem.h"
#include "kernels.h"

#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int llama_ffn_dim(int dim) {
    long long hidden = 2 * (4 * (long long)dim) / 3, f = 256 * ((hidden + 255) / 256);
    return f <= INT_MAX ? (int)f : -1;   /* -1: no int holds it (config_validate refuses a dim that large) */
}

/* A preset's model; F = 0: LLaMA's FFN rule from C; NKV = 0: as NH. The Llama-3.2 presets are the
   published config.json of meta-llama/Llama-3.2-1B and -3B (tied embeddings, GQA with 8 KV heads,
   llama3 RoPE scaling): 1,235,814,400 and 3,212,749,824 parameters. The Llama-3 and 3.1 presets are
   those of meta-llama/Meta-Llama-3-8B, -70B, Llama-3.1-8B and -70B (untied, GQA with 8 KV heads; 3.1
   adds llama3 RoPE scaling to 128K positions): 8,030,261,248 and 70,553,706,496 parameters, the shapes
   docs/SCALING.md plans (8b and 70b name the 3.1 ones). */
typedef struct {
    const char *name; int V, C, L, NH, NKV, F, tie, T, B;
    float theta, eps, rope_factor, rope_low, rope_high; int rope_orig, max_pos;
} Preset;
static const Preset PRESETS[] = {
    { "tiny",        1000,   64,  2,  4, 0,    0, 0,    64, 4, 10000.0f, 1e-6f, 0, 0, 0, 0, 0 },
    { "small",       32000,  512, 4,  8, 0,    0, 0,   128, 4, 10000.0f, 1e-6f, 0, 0, 0, 0, 0 },
    { "medium",      32000, 1024, 8, 16, 0,    0, 0,   256, 4, 10000.0f, 1e-6f, 0, 0, 0, 0, 0 },
    { "1b",          32000, 2048, 20, 16, 0,   0, 0, 16384, 1, 10000.0f, 1e-6f, 0, 0, 0, 0, 0 },
    { "3b",          32000, 3200, 26, 32, 0,   0, 0,  2048, 1, 10000.0f, 1e-6f, 0, 0, 0, 0, 0 },
    { "llama3.2-1b", 128256, 2048, 16, 32, 8, 8192, 1, 2048, 1, 500000.0f, 1e-5f, 32.0f, 1.0f, 4.0f, 8192, 131072 },
    { "llama3.2-3b", 128256, 3072, 28, 24, 8, 8192, 1, 2048, 1, 500000.0f, 1e-5f, 32.0f, 1.0f, 4.0f, 8192, 131072 },
    { "llama3-8b",   128256, 4096, 32, 32, 8, 14336, 0, 2048, 1, 500000.0f, 1e-5f, 0, 0, 0, 0, 8192 },
    { "llama3-70b",  128256, 8192, 80, 64, 8, 28672, 0, 2048, 1, 500000.0f, 1e-5f, 0, 0, 0, 0, 8192 },
    { "llama3.1-8b", 128256, 4096, 32, 32, 8, 14336, 0, 2048, 1, 500000.0f, 1e-5f, 8.0f, 1.0f, 4.0f, 8192, 131072 },
    { "llama3.1-70b", 128256, 8192, 80, 64, 8, 28672, 0, 2048, 1, 500000.0f, 1e-5f, 8.0f, 1.0f, 4.0f, 8192, 131072 },
};
/* Short names for the shapes people plan (bench/plan_scaling.sh's --models): the preset each stands for. */
static const char *const ALIASES[][2] = { { "8b", "llama3.1-8b" }, { "70b", "llama3.1-70b" } };

const char *config_preset_names(void) {
    return "tiny, small, medium, 1b, 3b, llama3.2-1b, llama3.2-3b, llama3-8b, llama3-70b, llama3.1-8b (8b), llama3.1-70b (70b)";
}

/* The preset of a name or alias; NULL if none. */
static const Preset *preset_named(const char *name) {
    for (size_t i = 0; i < sizeof ALIASES / sizeof *ALIASES; i++)
        if (!strcmp(name, ALIASES[i][0])) name = ALIASES[i][1];
    for (size_t i = 0; i < sizeof PRESETS / sizeof *PRESETS; i++)
        if (!strcmp(PRESETS[i].name, name)) return &PRESETS[i];
    return NULL;
}

/* A named preset whose shape flags changed it (--dim, --vocab, ...): "custom", the preset it started from
   kept in preset_from (META config.model_from). The same shape given in flags keeps the name. */
static void name_custom_shape(LlamaConfig *m) {
    const Preset *p = preset_named(m->preset);
    if (!p) return;   /* "hf" (--init-from's config.json) or a name set in code */
    if (m->vocab_size == p->V && m->dim == p->C && m->n_layers == p->L && m->n_heads == p->NH &&
        m->n_kv_heads == (p->NKV ? p->NKV : p->NH) && m->ffn_dim == (p->F ? p->F : llama_ffn_dim(p->C)) &&
        m->tie_embeddings == p->tie) return;
    snprintf(m->preset_from, sizeof m->preset_from, "%s", p->name);
    snprintf(m->preset, sizeof m->preset, "custom");
}

int config_preset(TrainConfig *c, const char *name) {
    const Preset *found = preset_named(name);
    for (size_t i = 0; found && i < sizeof PRESETS / sizeof *PRESETS; i++) {
        const Preset *p = &PRESETS[i];
        if (p != found) continue;
        LlamaConfig *m = &c->model;
        snprintf(m->preset, sizeof m->preset, "%s", p->name);
        m->preset_from[0] = 0;
        m->vocab_size = p->V; m->dim = p->C; m->n_layers = p->L;
        m->n_heads = p->NH; m->n_kv_heads = p->NKV ? p->NKV : p->NH; m->ffn_dim = p->F ? p->F : llama_ffn_dim(p->C);
        m->tie_embeddings = p->tie;
        m->rope_theta = p->theta; m->norm_eps = p->eps;
        m->rope_factor = p->rope_factor; m->rope_low_freq_factor = p->rope_low; m->rope_high_freq_factor = p->rope_high;
        m->rope_original_max_pos = p->rope_orig; m->max_pos = p->max_pos;
        c->seq_len = p->T; c->batch_size = p->B;
        return 0;
    }
    return -1;
}

void config_defaults(TrainConfig *c) {
    memset(c, 0, sizeof *c);
    config_preset(c, "tiny");
    c->steps = 20; c->warmup_steps = 0; c->grad_accum = 1; c->seed = 1337; c->timing_warmup = 1;
    c->lr = 3e-4f; c->weight_decay = 0.0f; c->beta1 = 0.9f; c->beta2 = 0.95f; c->adam_eps = 1e-8f;
    snprintf(c->optimizer, sizeof c->optimizer, "adamw");
    snprintf(c->device, sizeof c->device, "auto");
    snprintf(c->plan_for, sizeof c->plan_for, "cpu");
    snprintf(c->save_dtype, sizeof c->save_dtype, "f32");
    c->run_name = "train";
    c->model.pad_id = -1;
}

void config_usage(const char *prog, const char *extra_usage) {
    printf("usage: %s [flags]\n"
           "  --model tiny|small|medium|1b|3b|llama3.2-1b|llama3.2-3b|llama3-8b|llama3-70b|llama3.1-8b|llama3.1-70b|8b|70b\n"
           "                   preset (tiny: V=1000 C=64 L=2 NH=4; llama3*: the published Llama-3, 3.1 and 3.2 shapes, GQA;\n"
           "                   8b, 70b: llama3.1-8b, -70b); flags below override it\n"
           "  --vocab N --dim N --layers N --heads N --kv-heads N --ffn N --tie-embeddings (a shape they change is named\n"
           "                   custom: the header and the log give its dimensions and the preset it started from)\n"
           "  --batch-size N  --seq-len N  --steps N  --warmup-steps N (learning rate)  --grad-accum N (physical batches per step)\n"
           "  --timing-warmup N (steps left out of the time statistics: 1; the log says how many)\n"
           "  --peak-tflops X (the device's dense peak in TFLOP/s for the MFU line; default: the GPU's from a table)\n"
           "  --ranks N (data parallel: under mpirun -np N each rank takes 1/N of --batch-size; without mpirun,\n"
           "           with --device plan, the plan of one rank)\n"
           "  --zero 0|1|2|3 (sharded state over the ranks: 1 AdamW's m and v, 2 also the reduced gradients, 3 also\n"
           "           the GEMM weights, gathered unit by unit for each use; each rank updates its slice: samples/llama/shard.h)\n"
           "  --lr X  --weight-decay X  --optimizer adamw|sgd  --seed N  --threads N\n"
           "  --device auto|cpu|cuda|plan  --plan-for cpu|cuda  --mem-limit BYTES (e.g. 2G)\n"
           "  --plan-profile cpu|h100|h200|a100 (-ib: InfiniBand links) the device a plan's predicted step time is for\n"
           "           (default: this machine's CPU, measured once, for --plan-for cpu; h100 for cuda)\n"
           "  --data FILE (llm.c .bin of uint16/uint32 tokens, else the file's bytes as tokens; default synthetic)\n"
           "  --precision fp32|bf16 (bf16: mixed precision, fp32 master weights and optimizer state)\n"
           "  --checkpoint-activations (keep each block's input only; recompute the block in the backward)\n"
           "  --task lm|classify (classify: LlamaForSequenceClassification, a score head on each row's last non-pad token)\n"
           "  --num-labels K (classify's labels, >= 2)  --pad-id P (classify's padding token; default: none, the last position;\n"
           "           a labelled --data file's header gives both: a flag that disagrees with it is refused)\n"
           "  --eval-data FILE [--eval-every N] (held-out rows, read as --data: loss and accuracy (classify) or perplexity,\n"
           "           after every N steps and the last; printed and in the log; under DP outside ε unless FILE is public)\n"
           "  --init-from DIR (Hugging Face LLaMA checkpoint: config.json + model.safetensors; sets the model)\n"
           "  --allow-nonfinite (load a checkpoint's NaN/inf values; by default they are an error naming the tensor)\n"
           "  --save DIR (write the trained model as a Hugging Face checkpoint)  --save-dtype f32|bf16|f16\n"
           "  --log FILE (dpmem log)  --run-name NAME (the run's name in the log and charts)\n"
           "  --print-params  --check-finite  --verbose (per-layer lines)  --help\n"
           "  --quiet (only what the run is for: the loss, a DP run's epsilon, the peak; no header, progress or tables)\n%s",
           prog, extra_usage ? extra_usage : "");
}

static int parse_int_in(const char *flag, const char *v, int lo, int hi, int *out) {
    if (!v) { fprintf(stderr, "error: %s needs a value\n", flag); return -1; }
    char *end; errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || errno || x < lo || x > hi) {
        if (hi == INT_MAX) fprintf(stderr, "error: %s needs an integer >= %d, got '%s'\n", flag, lo, v ? v : "");
        else fprintf(stderr, "error: %s needs an integer in [%d, %d], got '%s'\n", flag, lo, hi, v ? v : "");
        return -1;
    }
    *out = (int)x;
    return 0;
}
static int parse_int(const char *flag, const char *v, int lo, int *out) { return parse_int_in(flag, v, lo, INT_MAX, out); }

static int parse_float(const char *flag, const char *v, float *out) {
    if (!v) { fprintf(stderr, "error: %s needs a value\n", flag); return -1; }
    char *end; errno = 0;
    double x = v ? strtod(v, &end) : 0;
    if (!v || !*v || *end || errno || !(x >= 0) || x > 1e30) {
        fprintf(stderr, "error: %s needs a non-negative number, got '%s'\n", flag, v ? v : "");
        return -1;
    }
    *out = (float)x;
    return 0;
}

/* A device's peak: a positive finite number of TFLOP/s (at most 10^6: no device is within 1000x of it). */
static int parse_tflops(const char *flag, const char *v, double *out) {
    if (!v) { fprintf(stderr, "error: %s needs a value\n", flag); return -1; }
    char *end; errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || errno || !(x > 0) || x > 1e6) {
        fprintf(stderr, "error: %s needs a positive number of TFLOP/s (at most 1e6), got '%s'\n", flag, v);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_choice(const char *flag, const char *v, const char *const *choices, char *out, size_t n) {
    if (!v) { fprintf(stderr, "error: %s needs a value\n", flag); return -1; }
    for (int i = 0; v && choices[i]; i++)
        if (strcmp(v, choices[i]) == 0) { snprintf(out, n, "%s", v); return 0; }
    fprintf(stderr, "error: %s must be one of", flag);
    for (int i = 0; choices[i]; i++) fprintf(stderr, " %s", choices[i]);
    fprintf(stderr, ", got '%s'\n", v ? v : "");
    return -1;
}

/* --task classify on a labelled --data file: K and the pad id from its header (data.h) where the flags
   (or --init-from's classifier) did not give them; a flag that disagrees with the file is refused. */
static int labels_from_file(TrainConfig *c) {
    int k = 0, pad = -1;
    if (data_labelled_header(c->data_path, &k, &pad) <= 0) return 0;   /* not one (or unreadable): data_open says so */
    LlamaConfig *m = &c->model;
    if (c->num_labels_given && m->num_labels != k) {
        fprintf(stderr, "error: --num-labels %d, but %s holds %d labels (its header): leave --num-labels out or give %d\n",
                m->num_labels, c->data_path, k, k);
        return -1;
    }
    if (c->pad_id_given && m->pad_id != pad) {
        char with[32] = "no token";
        if (pad >= 0) snprintf(with, sizeof with, "token %d", pad);
        fprintf(stderr, "error: --pad-id %d, but %s pads with %s (its header): leave --pad-id out%s\n", m->pad_id, c->data_path,
                with, pad < 0 ? " (its rows are of one length)" : " or give that token");
        return -1;
    }
    if (!c->num_labels_given && (!c->init_from || m->num_labels < 2)) m->num_labels = k;
    if (!c->pad_id_given && !c->init_from) m->pad_id = pad;
    return 0;
}

int config_parse(TrainConfig *c, int argc, char **argv, ConfigExtraFn extra, void *user, const char *extra_usage) {
    /* The preset first, wherever it is, so that the other flags override it. */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strncmp(a, "--model=", 8) == 0) v = a + 8;
        else if (strcmp(a, "--model") == 0) v = i + 1 < argc ? argv[i + 1] : "";
        if (v && config_preset(c, v) != 0) {
            fprintf(stderr, "error: unknown --model '%s' (%s)\n", v, config_preset_names());
            return -1;
        }
    }
    /* Then a checkpoint's config.json, which replaces the preset's model (other flags still override). */
    int ffn_given = 0, dim_given = 0;   /* the FFN width follows --dim by LLaMA's rule unless given */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strncmp(a, "--init-from=", 12) == 0) v = a + 12;
        else if (strcmp(a, "--init-from") == 0) v = i + 1 < argc ? argv[i + 1] : "";
        if (!v) continue;
        char err[CKPT_ERR];
        if (!*v) { fprintf(stderr, "error: --init-from needs a checkpoint directory\n"); return -1; }
        if (ckpt_read_config(v, &c->model, NULL, err, sizeof err) != 0) { fprintf(stderr, "error: %s\n", err); return -1; }
        c->init_from = v;
        c->model.no_init = 1; /* the random initialisation would be overwritten by the load */
        ffn_given = 1;
    }
    for (int i = 1; i < argc; i++) {
        char flagbuf[64];
        const char *a = argv[i], *v = NULL;
        if (strncmp(a, "--", 2) != 0) { fprintf(stderr, "error: unexpected argument '%s' (see --help)\n", a); return -1; }
        const char *eq = strchr(a, '=');
        if (eq) {
            size_t n = (size_t)(eq - a);
            if (n >= sizeof flagbuf) n = sizeof flagbuf - 1;
            memcpy(flagbuf, a, n); flagbuf[n] = 0; a = flagbuf; v = eq + 1;
        }
        /* switches: a value given to one ("--print-params=0") is an error, not a silent "on" */
        if (eq && (!strcmp(a, "--help") || !strcmp(a, "--print-params") || !strcmp(a, "--check-finite") ||
                   !strcmp(a, "--allow-nonfinite") ||
                   !strcmp(a, "--tie-embeddings") || !strcmp(a, "--quiet") || !strcmp(a, "--verbose") ||
                   !strcmp(a, "--checkpoint-activations"))) {
            fprintf(stderr, "error: %s is a switch and takes no value (got '%s'): give it alone to turn it on\n", a, v);
            return -1;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { config_usage(argv[0], extra_usage); return 1; }
        if (!strcmp(a, "--print-params")) { c->print_params = 1; continue; }
        if (!strcmp(a, "--check-finite")) { c->check_finite = 1; continue; }
        if (!strcmp(a, "--allow-nonfinite")) { c->allow_nonfinite = 1; continue; }
        if (!strcmp(a, "--tie-embeddings")) { c->model.tie_embeddings = 1; continue; }
        if (!strcmp(a, "--quiet")) { c->quiet = 1; continue; }
        if (!strcmp(a, "--verbose")) { c->verbose = 1; continue; }
        if (!strcmp(a, "--checkpoint-activations")) { c->model.checkpoint_activations = 1; continue; }
        int took_next = 0;
        if (!v) { v = i + 1 < argc ? argv[i + 1] : NULL; took_next = 1; }
        int rc = 0;
        static const char *const opts[] = { "adamw", "sgd", NULL };
        static const char *const devs[] = { "auto", "cpu", "cuda", "plan", NULL };
        static const char *const targets[] = { "cpu", "cuda", NULL };
        if (!strcmp(a, "--model")) rc = 0;
        /* model sizes: bounded as config.json's are (hf_config.h), so that every size product fits */
        else if (!strcmp(a, "--vocab")) rc = parse_int_in(a, v, 2, HF_MAX_DIM, &c->model.vocab_size);
        else if (!strcmp(a, "--dim")) { rc = parse_int_in(a, v, 2, HF_MAX_DIM, &c->model.dim); dim_given = 1; }
        else if (!strcmp(a, "--layers")) rc = parse_int_in(a, v, 1, HF_MAX_LAYERS, &c->model.n_layers);
        else if (!strcmp(a, "--heads")) rc = parse_int_in(a, v, 1, HF_MAX_DIM, &c->model.n_heads);
        else if (!strcmp(a, "--kv-heads")) rc = parse_int_in(a, v, 1, HF_MAX_DIM, &c->model.n_kv_heads);
        else if (!strcmp(a, "--ffn")) { rc = parse_int_in(a, v, 1, HF_MAX_DIM, &c->model.ffn_dim); ffn_given = 1; }
        else if (!strcmp(a, "--batch-size")) rc = parse_int(a, v, 1, &c->batch_size);
        else if (!strcmp(a, "--seq-len")) rc = parse_int(a, v, 1, &c->seq_len);
        else if (!strcmp(a, "--ranks")) rc = parse_int(a, v, 1, &c->ranks);
        else if (!strcmp(a, "--zero")) rc = parse_int_in(a, v, 0, 3, &c->zero);
        else if (!strcmp(a, "--steps")) rc = parse_int(a, v, 0, &c->steps);
        else if (!strcmp(a, "--warmup-steps")) rc = parse_int(a, v, 0, &c->warmup_steps);
        else if (!strcmp(a, "--timing-warmup")) rc = parse_int(a, v, 0, &c->timing_warmup);
        else if (!strcmp(a, "--peak-tflops")) rc = parse_tflops(a, v, &c->peak_tflops);
        else if (!strcmp(a, "--grad-accum")) rc = parse_int(a, v, 1, &c->grad_accum);
        else if (!strcmp(a, "--seed")) rc = parse_int(a, v, 0, &c->seed);
        else if (!strcmp(a, "--threads")) rc = parse_int_in(a, v, 1, 4096, &c->threads);   /* libgomp crashed at 100000 */
        else if (!strcmp(a, "--lr")) rc = parse_float(a, v, &c->lr);
        else if (!strcmp(a, "--weight-decay")) rc = parse_float(a, v, &c->weight_decay);
        else if (!strcmp(a, "--optimizer")) rc = parse_choice(a, v, opts, c->optimizer, sizeof c->optimizer);
        else if (!strcmp(a, "--device")) rc = parse_choice(a, v, devs, c->device, sizeof c->device);
        else if (!strcmp(a, "--plan-for")) rc = parse_choice(a, v, targets, c->plan_for, sizeof c->plan_for);
        else if (!strcmp(a, "--plan-profile")) {
            static const char *const profiles[] = { "cpu", "h100", "h200", "a100", "h100-ib", "h200-ib", "a100-ib", NULL };
            rc = parse_choice(a, v, profiles, c->plan_profile, sizeof c->plan_profile);
        }
        else if (!strcmp(a, "--precision")) {
            static const char *const precs[] = { "fp32", "bf16", NULL };
            char p[8];
            if (!(rc = parse_choice(a, v, precs, p, sizeof p))) c->model.precision = !strcmp(p, "bf16");
        }
        else if (!strcmp(a, "--task")) {
            static const char *const tasks[] = { "lm", "classify", NULL };
            char t[16];
            if (!(rc = parse_choice(a, v, tasks, t, sizeof t))) c->model.task = !strcmp(t, "classify") ? LLAMA_TASK_CLASSIFY : LLAMA_TASK_LM;
        }
        else if (!strcmp(a, "--num-labels")) { rc = parse_int_in(a, v, 2, HF_MAX_DIM, &c->model.num_labels); c->num_labels_given = 1; }
        else if (!strcmp(a, "--pad-id")) { rc = parse_int_in(a, v, 0, HF_MAX_DIM, &c->model.pad_id); c->pad_id_given = 1; }
        else if (!strcmp(a, "--data")) { if (!v || !*v) { fprintf(stderr, "error: --data needs a file name\n"); return -1; } c->data_path = v; }
        else if (!strcmp(a, "--eval-data")) { if (!v || !*v) { fprintf(stderr, "error: --eval-data needs a file name\n"); return -1; } c->eval_path = v; }
        else if (!strcmp(a, "--eval-every")) rc = parse_int(a, v, 1, &c->eval_every);
        else if (!strcmp(a, "--init-from")) rc = 0;
        else if (!strcmp(a, "--save")) {
            if (!v || !*v || !strcmp(v, "-")) { fprintf(stderr, "error: --save needs a directory%s\n", v && !strcmp(v, "-") ? " (a checkpoint is several files: not '-', standard output)" : ""); return -1; }
            c->save_dir = v;
        }
        else if (!strcmp(a, "--save-dtype")) { static const char *const dts[] = { "f32", "bf16", "f16", NULL }; rc = parse_choice(a, v, dts, c->save_dtype, sizeof c->save_dtype); }
        else if (!strcmp(a, "--log")) {
            if (!v || !*v || !strcmp(v, "-")) { fprintf(stderr, "error: --log needs a file name%s\n", v && !strcmp(v, "-") ? " (the log is written through a memory mapping of its file: not '-', standard output)" : ""); return -1; }
            c->log_path = v;
        }
        else if (!strcmp(a, "--run-name")) { if (!v || !*v) { fprintf(stderr, "error: --run-name needs a name\n"); return -1; } c->run_name = v; }
        else if (!strcmp(a, "--mem-limit")) {
            if (!v) { fprintf(stderr, "error: --mem-limit needs a value\n"); return -1; }
            c->mem_limit = parse_bytes(v);
            if (c->mem_limit <= 0) { fprintf(stderr, "error: --mem-limit needs a size such as 2G or 512M, got '%s'\n", v ? v : ""); return -1; }
        } else {
            int r = extra ? extra(user, a, v) : 0;
            if (r < 0) return -1;
            if (r == 0) { fprintf(stderr, "error: unknown flag '%s' (see --help)\n", a); return -1; }
            if (r == 1) { if (eq) { fprintf(stderr, "error: %s takes no value\n", a); return -1; } continue; }
        }
        if (rc) return -1;
        if (!v) { fprintf(stderr, "error: %s needs a value\n", a); return -1; }
        if (took_next) i++;
    }
    if (!ffn_given && dim_given) {
        c->model.ffn_dim = llama_ffn_dim(c->model.dim);
        if (c->model.ffn_dim > HF_MAX_DIM || c->model.ffn_dim < 1) {
            fprintf(stderr, "error: --dim %d gives an FFN width of 8/3 x %d, more than %d: give --ffn\n", c->model.dim,
                    c->model.dim, HF_MAX_DIM);
            return -1;
        }
    }
    name_custom_shape(&c->model);
    if (c->model.task == LLAMA_TASK_CLASSIFY && c->data_path && labels_from_file(c) != 0) return -1;
    if (config_validate(c)) return -1;
    return config_split_ranks(c);
}

int config_split_ranks(TrainConfig *c) {
    if (comm_init(&g_comm)) return -1;
    if (g_comm.mpi) {
        if (c->ranks && c->ranks != g_comm.world) {
            fprintf(stderr, "error: --ranks %d, but the job has %d ranks (mpirun -np)\n", c->ranks, g_comm.world);
            return -1;
        }
    } else if (c->zero && strcmp(c->device, "plan") != 0 && c->ranks != 1) {
        /* (--ranks 1 asks for a job of one rank on purpose: its collectives run, NCCL's on a GPU) */
        fprintf(stderr, "error: --zero %d shards the training state over the ranks of an MPI job: launch it with mpirun "
                "-np N (or plan one rank with --device plan --ranks N; --ranks 1: a job of one rank)\n", c->zero);
        return -1;
    } else if (c->ranks > 1) {
        if (strcmp(c->device, "plan") != 0) {
            fprintf(stderr, "error: --ranks %d without mpirun plans only (--device plan); to train, launch "
                    "mpirun -np %d ... instead\n", c->ranks, c->ranks);
            return -1;
        }
        comm_plan_ranks(&g_comm, c->ranks);
    }
    if (g_comm.world > 1) {
        if (c->batch_size % g_comm.world) {
            fprintf(stderr, "error: --batch-size %d does not divide among %d ranks (each rank takes an equal share)\n",
                    c->batch_size, g_comm.world);
            return -1;
        }
        c->batch_size /= g_comm.world;
        if (g_comm.rank > 0 && !c->quiet) c->quiet = 2;   /* rank 0 speaks for the job; errors still print */
    }
    return 0;
}

int config_validate(const TrainConfig *c) {
    const LlamaConfig *m = &c->model;
#define BAD(...) do { fprintf(stderr, "error: " __VA_ARGS__); fputc('\n', stderr); return -1; } while (0)
    if (m->vocab_size < 2) BAD("vocabulary size must be at least 2 (got %d)", m->vocab_size);
    if (m->dim < 2 || m->n_layers < 1 || m->n_heads < 1 || m->n_kv_heads < 1 || m->ffn_dim < 1)
        BAD("dim, layers, heads, kv-heads and ffn must be positive");
    if (m->vocab_size > HF_MAX_DIM) BAD("--vocab %d is more than %d", m->vocab_size, HF_MAX_DIM);
    if (m->dim > HF_MAX_DIM) BAD("--dim %d is more than %d", m->dim, HF_MAX_DIM);
    if (m->ffn_dim > HF_MAX_DIM) BAD("--ffn %d is more than %d", m->ffn_dim, HF_MAX_DIM);
    if (m->n_layers > HF_MAX_LAYERS) BAD("--layers %d is more than %d", m->n_layers, HF_MAX_LAYERS);
    if (m->dim % m->n_heads) BAD("--heads %d does not divide --dim %d", m->n_heads, m->dim);
    if ((m->dim / m->n_heads) % 2) BAD("head size %d (dim %d / heads %d) must be even for RoPE", m->dim / m->n_heads, m->dim, m->n_heads);
    if (m->n_heads % m->n_kv_heads) BAD("--kv-heads %d does not divide --heads %d", m->n_kv_heads, m->n_heads);
    if (m->task == LLAMA_TASK_CLASSIFY && m->num_labels < 2)
        BAD("--task classify needs --num-labels K (K >= 2), or a labelled --data file (its header has K)");
    if (c->eval_every && !c->eval_path) BAD("--eval-every %d needs --eval-data FILE (the held-out rows)", c->eval_every);
    if (c->eval_path && c->zero >= 3)
        BAD("--eval-data with --zero 3: the evaluation's forward would gather the sharded weights outside a step (not supported)");
    if (m->task != LLAMA_TASK_CLASSIFY && m->num_labels) BAD("--num-labels %d is for --task classify", m->num_labels);
    if (m->task == LLAMA_TASK_CLASSIFY && m->pad_id >= m->vocab_size)
        BAD("--pad-id %d is not a token of the vocabulary (size %d)", m->pad_id, m->vocab_size);
    if (c->seq_len < 1) BAD("--seq-len must be at least 1");
    if (c->batch_size < 1) BAD("--batch-size must be at least 1");
    if (c->grad_accum < 1) BAD("--grad-accum must be at least 1");
    if (!(c->lr >= 0)) BAD("--lr must be non-negative");
    /* Sizes must fit the int shapes the kernels take. */
    if ((long long)c->batch_size * c->seq_len > INT_MAX / 4)
        BAD("--batch-size %d x --seq-len %d is %lld tokens, more than the kernels' limit of %d (INT_MAX/4: a batch's "
            "tokens are counted in int)", c->batch_size, c->seq_len, (long long)c->batch_size * c->seq_len, INT_MAX / 4);
    if ((long long)m->vocab_size * m->dim > (long long)INT_MAX * 8)
        BAD("--vocab %d x --dim %d is %lld, more than the kernels' limit of %lld (8 x INT_MAX)", m->vocab_size, m->dim,
            (long long)m->vocab_size * m->dim, (long long)INT_MAX * 8);
    /* And every byte count the model and the plan sum must fit 64 bits with room to spare: the whole
       run's memory (weights, gradients, Adam, bf16 copies, every layer's activations, the logits),
       counted in floating point so that the count itself cannot overflow, must stay under 1 EiB. */
    double C = m->dim, F = m->ffn_dim, V = m->vocab_size, L = m->n_layers, N = (double)c->batch_size * c->seq_len;
    double KD = C / m->n_heads * m->n_kv_heads;
    double params = V * C * (m->tie_embeddings ? 1 : 2) + L * (2 * C * C + 2 * KD * C + 3 * F * C + 2 * C) + C;
    double acts = L * N * (6 * C + 2 * KD + 3 * F + m->n_heads) + N * (2 * C + 2 * V);
    double bytes = 18 * params + 4 * acts;
    if (!(bytes < 0x1p60))
        BAD("this model needs about %.3g bytes, more than 1 EiB: --dim %d --ffn %d --layers %d --vocab %d --batch-size %d "
            "--seq-len %d are too large together", bytes, m->dim, m->ffn_dim, m->n_layers, m->vocab_size, c->batch_size, c->seq_len);
#undef BAD
    return 0;
}

void config_log(const TrainConfig *c) {
    const LlamaConfig *m = &c->model;
    dpmem_meta("run", c->run_name);
    dpmem_meta("config.model", m->preset);
    if (m->preset_from[0]) dpmem_meta("config.model_from", m->preset_from);
    if (c->init_from) dpmem_meta("config.init_from", c->init_from);
    dpmem_meta_int("config.vocab_size", m->vocab_size);
    dpmem_meta_int("config.dim", m->dim);
    dpmem_meta_int("config.n_layers", m->n_layers);
    dpmem_meta_int("config.n_heads", m->n_heads);
    dpmem_meta_int("config.n_kv_heads", m->n_kv_heads);
    dpmem_meta_int("config.ffn_dim", m->ffn_dim);
    dpmem_meta_int("config.tie_embeddings", m->tie_embeddings);
    dpmem_meta("config.precision", m->precision ? "bf16" : "fp32");
    dpmem_meta_int("config.checkpoint_activations", m->checkpoint_activations);
    dpmem_meta("config.task", m->task == LLAMA_TASK_CLASSIFY ? "classify" : "lm");
    if (m->task == LLAMA_TASK_CLASSIFY) { dpmem_meta_int("config.num_labels", m->num_labels); dpmem_meta_int("config.pad_id", m->pad_id); }
    dpmem_meta_int("config.batch_size", c->batch_size);
    dpmem_meta_int("config.seq_len", c->seq_len);
    dpmem_meta_int("config.steps", c->steps);
    dpmem_meta_int("config.warmup_steps", c->warmup_steps);
    dpmem_meta_int("config.grad_accum", c->grad_accum);
    dpmem_meta_int("config.zero", c->zero);
    dpmem_meta_int("config.seed", c->seed);
    char buf[32];
    snprintf(buf, sizeof buf, "%g", c->lr); dpmem_meta("config.lr", buf);
    snprintf(buf, sizeof buf, "%g", c->weight_decay); dpmem_meta("config.weight_decay", buf);
    dpmem_meta("config.optimizer", c->optimizer);
    dpmem_meta("config.device", c->device);
    if (!strcmp(c->device, "plan")) dpmem_meta("config.plan_for", c->plan_for);
    if (!strcmp(c->device, "plan") && c->plan_profile[0]) dpmem_meta("config.plan_profile", c->plan_profile);
    dpmem_meta("config.data", c->data_path ? c->data_path : "synthetic");
    if (c->eval_path) { dpmem_meta("config.eval_data", c->eval_path); dpmem_meta_int("config.eval_every", c->eval_every); }
    dpmem_meta_int("config.check_finite", c->check_finite);
}

void config_field(ConfigFields *f, const char *name, const char *fmt, ...) {
    if (f->n >= CONFIG_FIELDS_MAX) return;   /* (the list is fixed code, far below the bound) */
    snprintf(f->name[f->n], CONFIG_FIELD_NAME, "%s", name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->value[f->n], CONFIG_FIELD_VALUE, fmt, ap);
    va_end(ap);
    f->n++;
}

void config_fields(const TrainConfig *c, ConfigFields *f) {
    const LlamaConfig *m = &c->model;
    config_field(f, "--vocab", "%d", m->vocab_size);
    config_field(f, "--dim", "%d", m->dim);
    config_field(f, "--layers", "%d", m->n_layers);
    config_field(f, "--heads", "%d", m->n_heads);
    config_field(f, "--kv-heads", "%d", m->n_kv_heads);
    config_field(f, "--ffn", "%d", m->ffn_dim);
    config_field(f, "--tie-embeddings", "%d", m->tie_embeddings);
    config_field(f, "rope_theta", "%.9g", (double)m->rope_theta);
    config_field(f, "rms_norm_eps", "%.9g", (double)m->norm_eps);
    config_field(f, "rope_scaling", "%.9g %.9g %.9g %d", (double)m->rope_factor, (double)m->rope_low_freq_factor,
                 (double)m->rope_high_freq_factor, m->rope_original_max_pos);
    config_field(f, "--precision", "%s", m->precision ? "bf16" : "fp32");
    config_field(f, "--checkpoint-activations", "%d", m->checkpoint_activations);
    config_field(f, "--task --num-labels --pad-id", "%d %d %d", m->task, m->num_labels, m->pad_id);
    config_field(f, "the batch (each rank's)", "%d", c->batch_size);
    config_field(f, "--seq-len", "%d", c->seq_len);
    config_field(f, "--grad-accum", "%d", c->grad_accum);
    config_field(f, "--zero", "%d", c->zero);
    config_field(f, "--steps", "%d", c->steps);
    config_field(f, "--warmup-steps", "%d", c->warmup_steps);
    config_field(f, "--seed", "%d", c->seed);
    config_field(f, "--optimizer", "%s", c->optimizer);
    config_field(f, "--lr", "%.9g", (double)c->lr);
    config_field(f, "--weight-decay", "%.9g", (double)c->weight_decay);
    config_field(f, "adam betas, eps", "%.9g %.9g %.9g", (double)c->beta1, (double)c->beta2, (double)c->adam_eps);
    config_field(f, "--data (synthetic or a file)", "%s", c->data_path ? "file" : "synthetic");
    config_field(f, "--check-finite", "%d", c->check_finite);
}
