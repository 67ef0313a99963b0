/* hf_config.h — a Hugging Face LlamaForCausalLM config.json: read (with cJSON), check, write back, and
   the rotary inverse frequencies it implies (plain, or with Llama 3.1/3.2's "llama3" scaling).

   Reading accepts what transformers' LlamaConfig accepts for the architecture we train: a decoder of
   RMSNorm, GQA attention without biases and a SiLU-gated MLP. Anything else (another architecture, a
   bias, another activation, a rope_scaling type other than "default"/"llama3") is refused with a
   one-line error naming the file and the field, rather than loaded and trained wrongly. Fields
   transformers defaults are defaulted the same way (num_key_value_heads = num_attention_heads,
   head_dim = hidden_size / num_attention_heads, rms_norm_eps 1e-6, rope_theta 10000, ...). Both the
   classic layout (rope_theta + rope_scaling) and transformers v5's rope_parameters are read.

   What it does not do: tokenizer files, generation_config.json, quantization configs. */
#ifndef HF_CONFIG_H
#define HF_CONFIG_H

#include <stddef.h>

/* Bounds of what is read (far above any real model: Llama 3.1 405B has 126 layers and a 128256
   vocabulary). They keep every product of two sizes inside 64-bit arithmetic and the parameter
   table small; a config outside them is refused naming the field. */
#define HF_MAX_DIM (1 << 24)
#define HF_MAX_LAYERS 4096

typedef struct {
    int hidden_size;              /* C */
    int intermediate_size;        /* the MLP's hidden width */
    int num_hidden_layers;        /* L */
    int num_attention_heads;      /* NH */
    int num_key_value_heads;      /* NKV (GQA: NH % NKV == 0) */
    int head_dim;                 /* HD; NH * HD need not equal C */
    int vocab_size;               /* V */
    int max_position_embeddings;
    double rms_norm_eps;
    double rope_theta;
    int tie_word_embeddings;      /* lm_head shares embed_tokens */
    int rope_llama3;              /* rope_scaling {"rope_type": "llama3", ...} */
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_original_max_position_embeddings;
    int rope_parameters;          /* read from transformers v5's "rope_parameters" (theta inside it): written back so */
    char torch_dtype[16];         /* "bfloat16", "float32", "float16" ("" if absent) */
    int bos_token_id, eos_token_id; /* -1 if absent; of a list, its first */
    /* bos/eos as given, an integer or a list of them (Llama 3.x Instruct's eos_token_id [128001, 128008,
       128009]: its stop tokens), written back as it was ("" if absent, malformed or over 255 characters:
       then the integer above is) */
    char bos_token_json[256], eos_token_json[256];
    int pad_token_id;             /* -1 if absent */
    int classify;                 /* architectures: LlamaForSequenceClassification (else LlamaForCausalLM) */
    int num_labels;               /* classify: the entries of id2label (transformers' num_labels), else num_labels, else 2 */
} HFConfig;

/* Returns 0, or -1 with a one-line message in err. `label` names the source in messages. */
int hf_config_read(HFConfig *c, const char *path, char *err, size_t errlen);
int hf_config_parse(HFConfig *c, const char *json, size_t len, const char *label, char *err, size_t errlen);

/* The shortest decimal that reads back as f (1e-06 for 1e-6f, not 9.99999997475243e-07): what a
   float field of the model (the RMSNorm epsilon, RoPE's theta and factors) is written as. */
double hf_shortest_float(float f);

/* Writes config.json as transformers writes a LlamaConfig (LlamaForCausalLM, or with classify
   LlamaForSequenceClassification with id2label/label2id LABEL_i and pad_token_id; model_type "llama");
   the RoPE fields as they were read (rope_parameters, or rope_theta and rope_scaling). */
int hf_config_write(const HFConfig *c, const char *path, char *err, size_t errlen);

/* inv_freq[i], i < head_dim/2: 1 / theta^(2i/head_dim), then, with llama3 scaling, transformers'
   _compute_llama3_parameters: low frequencies (wavelength > original_max_position_embeddings /
   low_freq_factor) divided by factor, high ones (wavelength < .../high_freq_factor) kept, and those in
   between interpolated smoothly. (llama3 scaling leaves the attention factor at 1.) */
void hf_config_rope_inv_freq(const HFConfig *c, float *inv_freq);

#endif /* HF_CONFIG_H */
