/* checkpoint.h — Hugging Face LLaMA checkpoints for the sample trainers: `--init-from DIR` and
   `--save DIR`.

   A checkpoint directory is what transformers' save_pretrained writes for a LlamaForCausalLM:
       config.json                      (hf_config.h)
       model.safetensors                or model.safetensors.index.json + its shards
   and, for LoRA, PEFT's adapter_model.safetensors + adapter_config.json.

   Names: the model's ParamInfo.hf_name is the checkpoint name ("model.layers.3.self_attn.q_proj.weight");
   shapes are transformers' ([out, in] for linear layers, [C] for norms). The rotary convention is
   the same as transformers' (rotate-half), so q_proj/k_proj load as they are, without permutation.
   Tied models: lm_head.weight may be absent (it is embed_tokens); if present it is ignored, as
   transformers ignores it. Tensors the model does not have are an error (a config that does not
   match its weights), except the rotary_emb.inv_freq buffers old conversions left behind.

   Precision: F32, BF16, F16 (and F64) tensors are converted to the trainer's fp32. On a host backend
   straight into the parameter buffers; on a device backend through one host staging buffer (the
   largest tensor), tagged `checkpoint/staging`. The mapped files are tagged `checkpoint/mmap:<file>`
   while they are mapped, and the whole load runs in the scope `checkpoint_load` (saving:
   `checkpoint_save`), so the load is a phase of its own in every report.

   Errors: 0, or -1 with a one-line message naming the file and the tensor in `err`.
   A model whose fp32 masters are sharded over the ranks (--zero under bf16) loads each rank's slice
   (and the whole bf16 copy) one tensor at a time through workspace/checkpoint.fp32, and saves through
   ckpt_save_gathered, one tensor gathered at a time.
   Not here: optimizer state (checkpoints hold weights only), tokenizers (docs/CHECKPOINTS.md shows how
   to make token files with the model's own tokenizer), saving in shards (one model.safetensors). */
#ifndef CHECKPOINT_H
#define CHECKPOINT_H

#include <stddef.h>

#include "hf_config.h"
#include "llama.h"
#include "lora.h"
#include "safetensors.h"

#define CKPT_ERR 640

/* DIR/config.json -> the model fields of a LlamaConfig (dim, layers, heads, kv heads, ffn, vocab,
   tie, rope_theta, norm_eps, llama3 rope scaling). Refuses what the trainer cannot run
   (head_dim != hidden_size / num_attention_heads). hf may be NULL. */
int ckpt_read_config(const char *dir, LlamaConfig *model, HFConfig *hf, char *err, size_t errlen);
/* The HF config that describes a LlamaConfig (for --save). */
void ckpt_hf_config_from(const LlamaConfig *model, int max_position_embeddings, HFConfig *hf);

/* The weights of a directory: one file or the shards of an index, all mapped; every tensor by name. */
typedef struct { const SafeTensor *tensor; int file; } CkptEntry;
typedef struct {
    int n_files;
    SafeTensors *files;
    CkptEntry *index;        /* all tensors, sorted by name */
    size_t n_index;
} CkptWeights;
int ckpt_weights_open(CkptWeights *w, const char *dir, char *err, size_t errlen);
/* The tensor `name` and the file holding it (for messages); NULL if absent. */
const SafeTensor *ckpt_weights_find(const CkptWeights *w, const char *name, const SafeTensors **file);
void ckpt_weights_close(CkptWeights *w);

/* Before the model is built: DIR/config.json against cfg, and every tensor's name, shape and dtype
   against the parameters cfg describes (a config.json whose shapes lie about its weights fails here,
   not after gigabytes were allocated). On success the weights stay open in w (their files, for the
   caller's path checks): close them with ckpt_weights_close. */
int ckpt_check(const LlamaConfig *cfg, const char *dir, CkptWeights *w, char *err, size_t errlen);

/* --init-from: checks DIR/config.json against the model's config, then loads every parameter.
   On the plan backend nothing is written, but names and shapes are still checked; a plan of a
   directory with config.json but no weights (a user plans before downloading them) checks the
   config alone (ckpt_has_weights says which). */
int ckpt_load(LlamaModel *m, const char *dir, char *err, size_t errlen);
/* The same; a NaN or infinite value in any tensor (or an F64 beyond fp32's range) is an error naming
   the tensor and the element unless allow_nonfinite (--allow-nonfinite); ckpt_load refuses them. */
int ckpt_load_allowing(LlamaModel *m, const char *dir, int allow_nonfinite, char *err, size_t errlen);
/* 1 when DIR holds model.safetensors or model.safetensors.index.json. */
int ckpt_has_weights(const char *dir);

/* --save: DIR/config.json and DIR/model.safetensors (created, tensors as `dtype`: ST_F32, ST_BF16
   or ST_F16; {"format": "pt"} metadata, which transformers requires). Frozen tensors are saved too
   (they are the model). base: the --init-from directory or NULL; from it the config keeps
   bos/eos_token_id and max_position_embeddings, and the tokenizer files (tokenizer.json,
   tokenizer_config.json, special_tokens_map.json, tokenizer.model, generation_config.json) are
   copied, so that DIR is a complete model directory for AutoTokenizer and AutoModelForCausalLM.
   Written whole beside DIR and swapped in (io_guard.h's io_dir_stage): whatever fails, DIR holds the
   checkpoint it held (config and weights) or the new one, never one's config beside the other's weights. */
int ckpt_save(const LlamaModel *m, const char *dir, SafeTensorsDtype dtype, const char *base, char *err,
              size_t errlen);

/* The same from a model whose fp32 masters are sharded over the ranks (--zero under bf16: llama.h's
   llama_master_sharded; --zero 3 every tensor llama_held_sliced names, a LoRA run's frozen base too),
   gathered tensor by tensor: every rank of the job calls it; gather(user, i,
   host) brings tensor i's whole fp32 values into host (numel floats; NULL on a rank that does not
   write: it only sends its slice) and is called for the sliced tensors only, in the model's order, on
   every rank. The rank with write = 1 writes DIR as ckpt_save does, byte for byte the same files,
   through one host buffer of the largest tensor (checkpoint/staging): no rank holds the whole fp32
   model. 0, or -1 with err. */
typedef struct {
    int (*gather)(void *user, int i, float *host);
    void *user;
    int write;
} CkptGather;
int ckpt_save_gathered(const LlamaModel *m, const char *dir, SafeTensorsDtype dtype, const char *base, const CkptGather *g,
                       char *err, size_t errlen);

/* LoRA: DIR/adapter_model.safetensors with PEFT's names
   (base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight [r, in], ...lora_B.weight [out, r])
   and DIR/adapter_config.json (peft_type LORA, r, lora_alpha, target_modules; PEFT's scaling is
   lora_alpha / r). One adapter per adapted linear layer; A and B are on kb's device. The LoRA trainer
   fills these from its LoraAdapter (name, IC, OC, r, A, B). base_model: the --init-from directory
   (or NULL). head: a sequence classifier's score head (--task classify), trained whole beside the
   adapters, or NULL for a causal LM: with it the files are what PEFT writes for
   LoraConfig(task_type="SEQ_CLS"): task_type SEQ_CLS, modules_to_save ["classifier", "score"], and
   the head as base_model.model.score.weight [K, C], so that PeftModel.from_pretrained on a
   LlamaForSequenceClassification of the base gives the trained classifier. */
typedef struct {
    const char *name;        /* the base weight's name without "model." and ".weight": "layers.0.self_attn.q_proj" */
    int in, out, r;
    const float *A, *B;      /* (r, in), (out, r) */
} CkptLoraAdapter;
typedef struct {
    const float *w;          /* score.weight (rows K, cols C), on kb's device */
    int rows, cols;
} CkptLoraHead;
int ckpt_save_lora(const CkptLoraAdapter *adapters, int n, const CkptLoraHead *head, KBackend *kb, float alpha,
                   const char *base_model, const char *dir, char *err, size_t errlen);
/* The same from lora.h's adapters (alpha = scale * r). With LoRA in merged form (lora.h), --save's
   model.safetensors already holds W0 + s·B·A: a complete model. Write the adapters to a SUBDIRECTORY
   (<save>/adapter): transformers, seeing adapter_config.json next to a model, would load the base and
   apply the adapter again on top of the merged weights. */
int ckpt_save_lora_adapters(const LoraAdapter *adapters, int n, const CkptLoraHead *head, KBackend *kb, const char *base_model,
                            const char *dir, char *err, size_t errlen);

#endif /* CHECKPOINT_H */
