/* hf_config.c — config.json of a Hugging Face LLaMA, read and written with cJSON. See hf_config.h. */
#include "hf_config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "file_errors.h"
#include "common/io_guard.h"



#define MAX_DIM HF_MAX_DIM

/* o[key] as Python's json reads it: of a key given twice, the last value (cJSON's lookup returns the
   first, so a config with "hidden_size" twice meant another model here than in transformers). */
static const cJSON *item(const cJSON *o, const char *key) {
    const cJSON *found = NULL, *e;
    if (!cJSON_IsObject(o)) return NULL;
    cJSON_ArrayForEach(e, o)
        if (e->string && strcmp(e->string, key) == 0) found = e;
    return found;
}

/* An integer field: absent -> def (or an error if def < 0), else a whole number in [lo, hi]. */
static int get_int_in(const cJSON *o, const char *key, int def, int lo, int hi, int *out, const char *label, char *err,
                      size_t errlen) {
    const cJSON *j = item(o, key);
    if (!j || cJSON_IsNull(j)) {
        if (def < 0) return fail(err, errlen, "%s: missing \"%s\"", label, key);
        *out = def;
        return 0;
    }
    if (!cJSON_IsNumber(j) || j->valuedouble != floor(j->valuedouble) || j->valuedouble < lo ||
        j->valuedouble > hi)
        return fail(err, errlen, "%s: \"%s\" must be an integer in [%d, %d]", label, key, lo, hi);
    *out = (int)j->valuedouble;
    return 0;
}
static int get_int(const cJSON *o, const char *key, int def, int lo, int *out, const char *label, char *err,
                   size_t errlen) {
    return get_int_in(o, key, def, lo, MAX_DIM, out, label, err, errlen);
}

/* A number in [lo, hi]: the ranges keep a value that is stored as a float (rms_norm_eps, rope_theta,
   the rope scaling factors) finite and non-zero there, instead of training to garbage. */
static int get_double_in(const cJSON *o, const char *key, double def, double lo, double hi, double *out,
                         const char *label, char *err, size_t errlen) {
    const cJSON *j = item(o, key);
    if (!j || cJSON_IsNull(j)) {
        if (def < 0) return fail(err, errlen, "%s: missing \"%s\"", label, key);
        *out = def;
        return 0;
    }
    if (!cJSON_IsNumber(j) || !(j->valuedouble >= lo && j->valuedouble <= hi))
        return fail(err, errlen, "%s: \"%s\" must be a number in [%g, %g]", label, key, lo, hi);
    *out = j->valuedouble;
    return 0;
}

static int get_bool(const cJSON *o, const char *key, int def, int *out, const char *label, char *err, size_t errlen) {
    const cJSON *j = item(o, key);
    if (!j || cJSON_IsNull(j)) { *out = def; return 0; }
    if (!cJSON_IsBool(j)) return fail(err, errlen, "%s: \"%s\" must be true or false", label, key);
    *out = cJSON_IsTrue(j);
    return 0;
}

static int is_token_id(const cJSON *j) {
    return cJSON_IsNumber(j) && j->valuedouble >= 0 && j->valuedouble <= 2147483647.0;
}

/* bos/eos/pad: an integer, or a list of them (Llama 3.x Instruct models): the first is returned (-1: none),
   and, given json, the value as it was (the whole list) for writing back. */
static int get_token_id(const cJSON *o, const char *key, char *json, size_t jsonlen) {
    const cJSON *j = item(o, key), *first = cJSON_IsArray(j) ? cJSON_GetArrayItem(j, 0) : j, *e;
    if (json) json[0] = 0;
    if (!is_token_id(first)) return -1;
    int whole = 1;
    if (cJSON_IsArray(j)) cJSON_ArrayForEach(e, j) whole &= is_token_id(e);
    char *text = whole && json ? cJSON_PrintUnformatted(j) : NULL;
    if (text && strlen(text) < jsonlen) memcpy(json, text, strlen(text) + 1);
    free(text);
    return (int)first->valuedouble;
}

/* bos/eos into o: as they were read (a list stays a list), else the integer. */
static void put_token_id(cJSON *o, const char *key, int id, const char *json) {
    if (id < 0) return;
    cJSON *v = json[0] ? cJSON_Parse(json) : NULL;
    cJSON_AddItemToObject(o, key, v ? v : cJSON_CreateNumber(id));
}

/* The rope scaling object (rope_scaling, or rope_parameters in transformers v5). */
static int parse_rope(HFConfig *c, const cJSON *rs, const char *what, const char *label, char *err, size_t errlen) {
    if (!rs || cJSON_IsNull(rs)) return 0;
    if (!cJSON_IsObject(rs)) return fail(err, errlen, "%s: \"%s\" must be an object or null", label, what);
    const cJSON *ty = item(rs, "rope_type");
    if (!ty) ty = item(rs, "type"); /* the older spelling */
    if (ty && !cJSON_IsString(ty)) {   /* transformers looks a number up as a name, and finds none */
        char *text = cJSON_PrintUnformatted(ty);
        fail(err, errlen, "%s: %s type %s is not supported (only \"default\" and \"llama3\")", label, what,
             text ? show(text).s : "?");
        free(text);
        return -1;
    }
    const char *type = ty ? ty->valuestring : "default";
    if (strcmp(type, "default") == 0) return 0;
    if (strcmp(type, "llama3") != 0)
        return fail(err, errlen, "%s: %s type \"%s\" is not supported (only \"default\" and \"llama3\")",
                    label, what, show(type).s);
    c->rope_llama3 = 1;
    if (get_double_in(rs, "factor", -1, 1, 1e6, &c->rope_factor, label, err, errlen) ||
        get_double_in(rs, "low_freq_factor", -1, 1e-6, 1e6, &c->rope_low_freq_factor, label, err, errlen) ||
        get_double_in(rs, "high_freq_factor", -1, 1e-6, 1e6, &c->rope_high_freq_factor, label, err, errlen) ||
        get_int(rs, "original_max_position_embeddings", -1, 1, &c->rope_original_max_position_embeddings, label, err,
                errlen))
        return -1;
    if (!(c->rope_high_freq_factor > c->rope_low_freq_factor))
        return fail(err, errlen, "%s: %s high_freq_factor (%g) must exceed low_freq_factor (%g)", label, what,
                    c->rope_high_freq_factor, c->rope_low_freq_factor);
    return 0;
}

int hf_config_parse(HFConfig *c, const char *json, size_t len, const char *label, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    char *text = malloc(len + 1); /* cJSON gets a NUL-terminated copy */
    if (!text) return fail(err, errlen, "%s: out of memory", label);
    memcpy(text, json, len);
    text[len] = 0;
    if (memchr(text, 0, len)) { free(text); return fail(err, errlen, "%s: contains a NUL byte: not JSON", label); }
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(text, len + 1, &end, 1);
    if (!o) {
        long at = end ? (long)(end - text) : -1;
        free(text);
        return fail(err, errlen, "%s: not valid JSON (near byte %ld)", label, at);
    }
    free(text);
    int rc = -1;
    if (!cJSON_IsObject(o)) { fail(err, errlen, "%s: not a JSON object", label); goto done; }

    const cJSON *arch = item(o, "architectures");
    if (arch && !cJSON_IsNull(arch) && !cJSON_IsArray(arch)) {   /* a list in transformers; an object is not one */
        fail(err, errlen, "%s: \"architectures\" must be a list of class names", label);
        goto done;
    }
    if (arch && !cJSON_IsNull(arch)) {
        const cJSON *a;
        int ok = 0;
        const char *first = "?";
        cJSON_ArrayForEach(a, arch) {
            if (cJSON_IsString(a)) {
                if (first[0] == '?') first = a->valuestring;
                if (strcmp(a->valuestring, "LlamaForCausalLM") == 0) ok = 1;
                if (strcmp(a->valuestring, "LlamaForSequenceClassification") == 0) ok = c->classify = 1;
            }
        }
        if (!ok) {
            fail(err, errlen, "%s: architecture \"%s\" is not supported (only LlamaForCausalLM, LlamaForSequenceClassification)",
                 label, show(first).s);
            goto done;
        }
    }
    const cJSON *mt = item(o, "model_type");
    if (mt && !(cJSON_IsString(mt) && strcmp(mt->valuestring, "llama") == 0)) {
        fail(err, errlen, "%s: model_type \"%s\" is not supported (only \"llama\")", label,
             cJSON_IsString(mt) ? show(mt->valuestring).s : "?");
        goto done;
    }
    const cJSON *act = item(o, "hidden_act");
    if (act && !(cJSON_IsString(act) && strcmp(act->valuestring, "silu") == 0)) {
        fail(err, errlen, "%s: hidden_act \"%s\" is not supported (only \"silu\")", label,
             cJSON_IsString(act) ? show(act->valuestring).s : "?");
        goto done;
    }
    int attn_bias, mlp_bias;
    if (get_bool(o, "attention_bias", 0, &attn_bias, label, err, errlen) ||
        get_bool(o, "mlp_bias", 0, &mlp_bias, label, err, errlen))
        goto done;
    if (attn_bias || mlp_bias) {
        fail(err, errlen, "%s: %s is true: biases are not supported", label, attn_bias ? "attention_bias" : "mlp_bias");
        goto done;
    }

    if (get_int(o, "hidden_size", -1, 1, &c->hidden_size, label, err, errlen) ||
        get_int(o, "intermediate_size", -1, 1, &c->intermediate_size, label, err, errlen) ||
        get_int_in(o, "num_hidden_layers", -1, 1, HF_MAX_LAYERS, &c->num_hidden_layers, label, err, errlen) ||
        get_int(o, "num_attention_heads", -1, 1, &c->num_attention_heads, label, err, errlen) ||
        get_int(o, "vocab_size", -1, 1, &c->vocab_size, label, err, errlen) ||
        get_int(o, "num_key_value_heads", c->num_attention_heads, 1, &c->num_key_value_heads, label, err, errlen) ||
        get_int(o, "max_position_embeddings", 2048, 1, &c->max_position_embeddings, label, err, errlen) ||
        get_bool(o, "tie_word_embeddings", 0, &c->tie_word_embeddings, label, err, errlen) ||
        get_double_in(o, "rms_norm_eps", 1e-6, 1e-30, 1, &c->rms_norm_eps, label, err, errlen))
        goto done;
    if (c->hidden_size % c->num_attention_heads && !item(o, "head_dim")) {
        fail(err, errlen, "%s: hidden_size %d is not a multiple of num_attention_heads %d and no head_dim is given",
             label, c->hidden_size, c->num_attention_heads);
        goto done;
    }
    if (get_int(o, "head_dim", c->hidden_size / c->num_attention_heads, 2, &c->head_dim, label, err, errlen)) goto done;
    if (c->head_dim % 2) { fail(err, errlen, "%s: head_dim %d is odd: rotary embeddings need pairs", label, c->head_dim); goto done; }
    if (c->num_attention_heads % c->num_key_value_heads) {
        fail(err, errlen, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", label,
             c->num_attention_heads, c->num_key_value_heads);
        goto done;
    }

    /* rope: the classic fields, or transformers v5's rope_parameters (theta inside it). */
    const cJSON *rp = item(o, "rope_parameters");
    if (rp && !cJSON_IsNull(rp) && !cJSON_IsObject(rp)) {   /* not silently the default RoPE */
        fail(err, errlen, "%s: \"rope_parameters\" must be an object or null", label);
        goto done;
    }
    if (cJSON_IsObject(rp)) {
        c->rope_parameters = 1;
        if (get_double_in(rp, "rope_theta", 10000.0, 1, 1e12, &c->rope_theta, label, err, errlen) ||
            parse_rope(c, rp, "rope_parameters", label, err, errlen))
            goto done;
    } else {
        if (get_double_in(o, "rope_theta", 10000.0, 1, 1e12, &c->rope_theta, label, err, errlen) ||
            parse_rope(c, item(o, "rope_scaling"), "rope_scaling", label, err, errlen))
            goto done;
    }
    const cJSON *td = item(o, "torch_dtype");
    if (!td) td = item(o, "dtype");
    if (cJSON_IsString(td)) snprintf(c->torch_dtype, sizeof c->torch_dtype, "%s", td->valuestring);
    c->bos_token_id = get_token_id(o, "bos_token_id", c->bos_token_json, sizeof c->bos_token_json);
    c->eos_token_id = get_token_id(o, "eos_token_id", c->eos_token_json, sizeof c->eos_token_json);
    c->pad_token_id = get_token_id(o, "pad_token_id", NULL, 0);
    if (c->classify) {   /* transformers: num_labels is len(id2label) when that is given, 2 by default */
        const cJSON *ids = item(o, "id2label");
        if (cJSON_IsObject(ids)) c->num_labels = cJSON_GetArraySize(ids);
        else if (get_int_in(o, "num_labels", 2, 2, HF_MAX_DIM, &c->num_labels, label, err, errlen)) goto done;
        if (c->num_labels < 2 || c->num_labels > HF_MAX_DIM) {
            fail(err, errlen, "%s: id2label has %d labels: the classifier needs 2 or more", label, c->num_labels);
            goto done;
        }
    }
    rc = 0;
done:
    cJSON_Delete(o);
    return rc;
}

int hf_config_read(HFConfig *c, const char *path, char *err, size_t errlen) {
    enum { LIMIT = 1 << 20 }; /* real configs are ~1 KB */
    char *buf;
    size_t n;
    /* Read as a stream, and only from a regular file: a FIFO is refused instead of blocking. */
    if (io_read_file(path, LIMIT, &buf, &n, err, errlen)) return -1;
    int rc = hf_config_parse(c, buf, n, path, err, errlen);
    free(buf);
    return rc;
}

int hf_config_write(const HFConfig *c, const char *path, char *err, size_t errlen) {
    cJSON *o = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(o, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString(c->classify ? "LlamaForSequenceClassification" : "LlamaForCausalLM"));
    cJSON_AddBoolToObject(o, "attention_bias", 0);
    cJSON_AddNumberToObject(o, "attention_dropout", 0.0);
    put_token_id(o, "bos_token_id", c->bos_token_id, c->bos_token_json);
    put_token_id(o, "eos_token_id", c->eos_token_id, c->eos_token_json);
    cJSON_AddNumberToObject(o, "head_dim", c->head_dim);
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    cJSON_AddNumberToObject(o, "hidden_size", c->hidden_size);
    if (c->classify) {   /* transformers' default names; num_labels is read back from id2label */
        cJSON *i2l = cJSON_AddObjectToObject(o, "id2label"), *l2i = cJSON_AddObjectToObject(o, "label2id");
        for (int k = 0; k < c->num_labels; k++) {
            char key[16], name[24];
            snprintf(key, sizeof key, "%d", k);
            snprintf(name, sizeof name, "LABEL_%d", k);
            cJSON_AddStringToObject(i2l, key, name);
            cJSON_AddNumberToObject(l2i, name, k);
        }
    }
    cJSON_AddNumberToObject(o, "initializer_range", 0.02);
    cJSON_AddNumberToObject(o, "intermediate_size", c->intermediate_size);
    cJSON_AddNumberToObject(o, "max_position_embeddings", c->max_position_embeddings);
    cJSON_AddBoolToObject(o, "mlp_bias", 0);
    cJSON_AddStringToObject(o, "model_type", "llama");
    cJSON_AddNumberToObject(o, "num_attention_heads", c->num_attention_heads);
    cJSON_AddNumberToObject(o, "num_hidden_layers", c->num_hidden_layers);
    cJSON_AddNumberToObject(o, "num_key_value_heads", c->num_key_value_heads);
    if (c->pad_token_id >= 0) cJSON_AddNumberToObject(o, "pad_token_id", c->pad_token_id);
    cJSON_AddNumberToObject(o, "pretraining_tp", 1);
    cJSON_AddNumberToObject(o, "rms_norm_eps", c->rms_norm_eps);
    if (c->rope_parameters) {   /* transformers v5: theta and the scaling in one object */
        cJSON *rp = cJSON_AddObjectToObject(o, "rope_parameters");
        if (c->rope_llama3) {
            cJSON_AddNumberToObject(rp, "factor", c->rope_factor);
            cJSON_AddNumberToObject(rp, "high_freq_factor", c->rope_high_freq_factor);
            cJSON_AddNumberToObject(rp, "low_freq_factor", c->rope_low_freq_factor);
            cJSON_AddNumberToObject(rp, "original_max_position_embeddings", c->rope_original_max_position_embeddings);
        }
        cJSON_AddNumberToObject(rp, "rope_theta", c->rope_theta);
        cJSON_AddStringToObject(rp, "rope_type", c->rope_llama3 ? "llama3" : "default");
    } else if (c->rope_llama3) {
        cJSON *rs = cJSON_AddObjectToObject(o, "rope_scaling");
        cJSON_AddNumberToObject(rs, "factor", c->rope_factor);
        cJSON_AddNumberToObject(rs, "high_freq_factor", c->rope_high_freq_factor);
        cJSON_AddNumberToObject(rs, "low_freq_factor", c->rope_low_freq_factor);
        cJSON_AddNumberToObject(rs, "original_max_position_embeddings", c->rope_original_max_position_embeddings);
        cJSON_AddStringToObject(rs, "rope_type", "llama3");
    } else {
        cJSON_AddNullToObject(o, "rope_scaling");
    }
    if (!c->rope_parameters) cJSON_AddNumberToObject(o, "rope_theta", c->rope_theta);
    cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_word_embeddings);
    cJSON_AddStringToObject(o, "torch_dtype", c->torch_dtype[0] ? c->torch_dtype : "float32");
    cJSON_AddBoolToObject(o, "use_cache", 1);
    cJSON_AddNumberToObject(o, "vocab_size", c->vocab_size);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text) return fail(err, errlen, "%s: out of memory", path);
    size_t n = strlen(text);
    char *line = realloc(text, n + 2);
    if (!line) { free(text); return fail(err, errlen, "%s: out of memory", path); }
    line[n] = '\n';
    /* aside, then renamed: a failed --save over --init-from leaves the config it read whole */
    int rc = io_replace_file(path, line, n + 1, err, errlen);
    free(line);
    return rc;
}

double hf_shortest_float(float f) {
    char buf[32];
    for (int digits = 1; digits <= 9; digits++) {   /* 9 significant digits always round-trip a float */
        snprintf(buf, sizeof buf, "%.*g", digits, (double)f);
        double d = strtod(buf, NULL);
        if ((float)d == f) return d;
    }
    return (double)f;
}

void hf_config_rope_inv_freq(const HFConfig *c, float *inv_freq) {
    int half = c->head_dim / 2;
    double pi = 3.14159265358979323846;
    for (int i = 0; i < half; i++) {
        double f = 1.0 / pow(c->rope_theta, (2.0 * i) / c->head_dim);
        if (c->rope_llama3) {
            double old = c->rope_original_max_position_embeddings;
            double low_wavelen = old / c->rope_low_freq_factor, high_wavelen = old / c->rope_high_freq_factor;
            double wavelen = 2 * pi / f;
            if (wavelen > low_wavelen) f = f / c->rope_factor; /* low frequency: stretched by factor */
            else if (wavelen >= high_wavelen) {                 /* medium: blended */
                double s = (old / wavelen - c->rope_low_freq_factor) /
                           (c->rope_high_freq_factor - c->rope_low_freq_factor);
                f = (1 - s) * f / c->rope_factor + s * f;
            }                                                   /* high frequency: kept */
        }
        inv_freq[i] = (float)f;
    }
}
