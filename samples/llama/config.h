/* config.h — the model and training configuration of the sample trainers: presets, command-line
   flags (each overrides one field of the preset) and their validation. Every trainer parses with
   config_parse; a trainer with its own flags (the DP ones) passes an `extra` callback.
   Not here: the model (llama.h) or the loop (train.h). */
#ifndef CONFIG_H
#define CONFIG_H

typedef struct {
    char preset[16];       /* tiny, small, medium, 1b, 3b, llama3.2-1b, llama3.2-3b, llama3-8b, llama3-70b, llama3.1-8b,
                              llama3.1-70b; "hf" from config.json; "custom": a preset whose shape flags changed it */
    char preset_from[16];  /* custom: the preset it started from ("" otherwise) */
    int vocab_size;        /* V */
    int dim;               /* C */
    int n_layers;          /* L */
    int n_heads;           /* NH */
    int n_kv_heads;        /* NKV (grouped-query attention when < NH) */
    int ffn_dim;           /* F; LLaMA's rule from C when not given */
    int tie_embeddings;    /* lm_head shares embed_tokens */
    float rope_theta;      /* 10000 */
    float norm_eps;        /* RMSNorm epsilon, 1e-6 as transformers' LlamaConfig */
    float rope_factor;     /* llama3 rope scaling (Llama 3.1/3.2; from --init-from's config.json): 0 = none */
    float rope_low_freq_factor, rope_high_freq_factor;
    int rope_original_max_pos;
    int max_pos;           /* max_position_embeddings of --init-from's config (0: unknown), kept for --save */
    int no_init;           /* leave the parameters zero: a checkpoint fills them (--init-from) */
    int precision;         /* --precision: 0 fp32, 1 bf16 (KDT_F32, KDT_BF16 of kernels.h; llama.h says what is bf16) */
    int checkpoint_activations; /* --checkpoint-activations: keep each block's input only, recompute it in the backward */
    int task;              /* --task: LLAMA_TASK_LM (LlamaForCausalLM) or LLAMA_TASK_CLASSIFY (LlamaForSequenceClassification) */
    int num_labels;        /* --num-labels K: classify's score head is (K, C) */
    int pad_id;            /* --pad-id: classify reads each row's last token that is not pad_id; -1: none (the last position) */
    int grads_by_unit;     /* llama_build allocates no gradient buffers: the trainer allocates each gradient unit's
                              when a backward begins it and frees it when the unit is done (--zero 2; llama.h) */
    int params_by_unit;    /* --zero 3: the sharded GEMM weights are held as this rank's slice only and gathered whole
                              for each use of their unit through LlamaUnitHooks.gather/release (llama.h) */
} LlamaConfig;

enum { LLAMA_TASK_LM = 0, LLAMA_TASK_CLASSIFY = 1 };

typedef struct {
    LlamaConfig model;
    int batch_size, seq_len, steps, warmup_steps, grad_accum, seed, threads;
    int timing_warmup;     /* --timing-warmup: steps left out of the time statistics (1; META timing.warmup_steps) */
    double peak_tflops;    /* --peak-tflops: the device's dense peak for the MFU (samples/llama/mfu.h); 0: its table's */
    float lr, weight_decay, beta1, beta2, adam_eps;
    char optimizer[8];     /* adamw, sgd */
    char device[8];        /* auto, cpu, cuda, plan */
    char plan_for[8];      /* cpu, cuda: the target a plan run predicts */
    char plan_profile[16]; /* --plan-profile: the device whose time a plan predicts (kernels/plan/cost.h); "": the target's default */
    const char *data_path; /* NULL: synthetic tokens */
    const char *eval_path; /* --eval-data: held-out rows evaluated after every eval_every steps and the last (eval.h); NULL: none */
    int eval_every;        /* --eval-every N (0: after the last step only) */
    int num_labels_given, pad_id_given;  /* --num-labels, --pad-id given: a labelled --data file's header must agree */
    const char *log_path;  /* NULL: no log (unless DPMEM_LOG is set) */
    const char *init_from; /* Hugging Face checkpoint directory to start from (checkpoint.h); NULL: random init */
    const char *save_dir;  /* where to save the trained model as a Hugging Face checkpoint; NULL: not saved */
    char save_dtype[8];    /* f32, bf16, f16 */
    const char *run_name;  /* META "run" */
    int print_params, check_finite, quiet;   /* quiet: 1 no header/progress (--quiet), 2 no summary either */
    int verbose;           /* --verbose: per-layer lines (a DP method's choice for each layer) */
    int allow_nonfinite;   /* --allow-nonfinite: load a checkpoint's NaN/inf values instead of refusing it */
    long long mem_limit;   /* bytes; 0 = none */
    int ranks;             /* --ranks N: under mpirun it must be the job's size; without a launcher the plan
                              backend plans rank 0 of N. After config_parse, batch_size is the per-rank share
                              of the global --batch-size (samples/llama/comm.h, g_comm: rank and world). */
    int zero;              /* --zero S: ZeRO stage 0 (replicas), 1 (optimizer state sharded) or 2 (and the reduced
                              gradients) over the ranks (samples/llama/shard.h) */
} TrainConfig;

/* A trainer's own flags: return 2 when `flag` took `value`, 1 when it is a switch without value,
   0 when unknown, -1 on a bad value (after printing the one-line error). value may be NULL. */
typedef int (*ConfigExtraFn)(void *user, const char *flag, const char *value);

/* FFN width as LLaMA computes it: 2/3 of 4C, rounded up to a multiple of 256. */
int llama_ffn_dim(int dim);
/* Fills the preset's model fields (and its default batch size and sequence length); -1 if unknown. */
int config_preset(TrainConfig *c, const char *name);
/* The preset names, for messages. */
const char *config_preset_names(void);
void config_defaults(TrainConfig *c);
/* 0: parsed and valid; 1: --help was printed; -1: a one-line error was printed to stderr.
   Joins the MPI job when launched by mpirun (comm_init) and divides --batch-size among the ranks. */
int config_parse(TrainConfig *c, int argc, char **argv, ConfigExtraFn extra, void *user, const char *extra_usage);
/* The checks config_parse ends with (also for configs built in code): 0, or -1 with the error printed. */
int config_validate(const TrainConfig *c);
/* The part of config_parse that joins the job and shares the batch out (for configs built in code). */
int config_split_ranks(TrainConfig *c);
void config_usage(const char *prog, const char *extra_usage);
/* META config.* for every field, and `run`. (config.mem_limit is the limit in force, which only the
   chosen backend knows: train_run writes it.) */
void config_log(const TrainConfig *c);

/* The resolved configuration as named values, for the ranks of a job to compare before the first
   step (comm_check_fields): every field that must agree between ranks, in a fixed order, each
   written exactly ("%.9g" for a float). Paths (--data, --init-from, --log), limits and output
   switches are left out: they may differ between ranks. */
enum { CONFIG_FIELDS_MAX = 96, CONFIG_FIELD_NAME = 40, CONFIG_FIELD_VALUE = 72 };
typedef struct {
    int n;
    char name[CONFIG_FIELDS_MAX][CONFIG_FIELD_NAME];
    char value[CONFIG_FIELDS_MAX][CONFIG_FIELD_VALUE];
} ConfigFields;
void config_field(ConfigFields *f, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The model's shapes, precision, checkpointing, batch, schedule, optimizer and seed. */
void config_fields(const TrainConfig *c, ConfigFields *f);
#endif
