/* checkpoint.c — Hugging Face LLaMA checkpoints <-> LlamaModel (see checkpoint.h). */
#include "checkpoint.h"
#include "dpmem.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>
#include "file_errors.h"
#include "common/io_guard.h"



static void join(char *out, size_t n, const char *dir, const char *file) {
    size_t k = strlen(dir);
    snprintf(out, n, "%s%s%s", dir, k && dir[k - 1] == '/' ? "" : "/", file);
}

/* ---- config ------------------------------------------------------------------------------------ */

int ckpt_read_config(const char *dir, LlamaConfig *model, HFConfig *hf_out, char *err, size_t errlen) {
    char path[4096];
    join(path, sizeof path, dir, "config.json");
    HFConfig hf;
    if (hf_config_read(&hf, path, err, errlen)) return -1;
    /* in 64 bits: 65538 x 65536 wrapped to 131072 in int and passed as a model of head_dim 2 */
    if ((long long)hf.head_dim * hf.num_attention_heads != hf.hidden_size)
        return fail(err, errlen, "%s: head_dim %d x num_attention_heads %d != hidden_size %d: the trainer needs "
                    "head_dim = hidden_size / num_attention_heads", path, hf.head_dim, hf.num_attention_heads,
                    hf.hidden_size);
    snprintf(model->preset, sizeof model->preset, "hf");
    model->vocab_size = hf.vocab_size;
    model->dim = hf.hidden_size;
    model->n_layers = hf.num_hidden_layers;
    model->n_heads = hf.num_attention_heads;
    model->n_kv_heads = hf.num_key_value_heads;
    model->ffn_dim = hf.intermediate_size;
    model->tie_embeddings = hf.tie_word_embeddings;
    model->rope_theta = (float)hf.rope_theta;
    model->norm_eps = (float)hf.rms_norm_eps;
    model->rope_factor = hf.rope_llama3 ? (float)hf.rope_factor : 0.0f;
    model->rope_low_freq_factor = hf.rope_llama3 ? (float)hf.rope_low_freq_factor : 0.0f;
    model->rope_high_freq_factor = hf.rope_llama3 ? (float)hf.rope_high_freq_factor : 0.0f;
    model->rope_original_max_pos = hf.rope_llama3 ? hf.rope_original_max_position_embeddings : 0;
    model->max_pos = hf.max_position_embeddings;
    model->task = hf.classify ? LLAMA_TASK_CLASSIFY : LLAMA_TASK_LM;   /* --task classify on a causal LM: a new score head */
    model->num_labels = hf.classify ? hf.num_labels : 0;
    model->pad_id = hf.pad_token_id;
    if (hf_out) *hf_out = hf;
    return 0;
}

void ckpt_hf_config_from(const LlamaConfig *c, int max_position_embeddings, HFConfig *hf) {
    memset(hf, 0, sizeof *hf);
    hf->hidden_size = c->dim;
    hf->intermediate_size = c->ffn_dim;
    hf->num_hidden_layers = c->n_layers;
    hf->num_attention_heads = c->n_heads;
    hf->num_key_value_heads = c->n_kv_heads;
    hf->head_dim = c->dim / c->n_heads;
    hf->vocab_size = c->vocab_size;
    hf->max_position_embeddings = max_position_embeddings;
    /* the model keeps these as floats: written as the shortest decimals that read back the same */
    hf->rms_norm_eps = hf_shortest_float(c->norm_eps);
    hf->rope_theta = hf_shortest_float(c->rope_theta);
    hf->tie_word_embeddings = c->tie_embeddings;
    hf->rope_llama3 = c->rope_factor > 0;
    hf->rope_factor = hf_shortest_float(c->rope_factor);
    hf->rope_low_freq_factor = hf_shortest_float(c->rope_low_freq_factor);
    hf->rope_high_freq_factor = hf_shortest_float(c->rope_high_freq_factor);
    hf->rope_original_max_position_embeddings = c->rope_original_max_pos;
    hf->bos_token_id = hf->eos_token_id = -1;
    hf->pad_token_id = c->pad_id;
    hf->classify = c->task == LLAMA_TASK_CLASSIFY;
    hf->num_labels = hf->classify ? c->num_labels : 0;
}

/* ---- weights ----------------------------------------------------------------------------------- */

static int add_file(CkptWeights *w, const char *path, char *err, size_t errlen) {
    SafeTensors *f = realloc(w->files, (size_t)(w->n_files + 1) * sizeof *f);
    if (!f) return fail(err, errlen, "%s: out of memory", path);
    w->files = f;
    if (safetensors_open(&w->files[w->n_files], path, err, errlen)) return -1;
    w->n_files++;
    return 0;
}

static const char *base_name(const char *path) {
    const char *p = strrchr(path, '/');
    return p ? p + 1 : path;
}

static int cmp_entry(const void *a, const void *b) {
    const CkptEntry *x = a, *y = b;
    int c = strcmp(x->tensor->name, y->tensor->name);
    return c ? c : (x->file > y->file) - (x->file < y->file);
}

/* Every tensor of every file, sorted by name: lookups by binary search (an index of 10^5 entries is
   linear-logarithmic, not quadratic), and a tensor in two files is found next to itself. */
static int build_index(CkptWeights *w, const char *dir, char *err, size_t errlen) {
    size_t n = 0;
    for (int i = 0; i < w->n_files; i++) n += (size_t)w->files[i].n;
    w->index = malloc((n ? n : 1) * sizeof *w->index);
    if (!w->index) return fail(err, errlen, "%s: out of memory", dir);
    for (int i = 0; i < w->n_files; i++)
        for (int t = 0; t < w->files[i].n; t++) w->index[w->n_index++] = (CkptEntry){ &w->files[i].tensors[t], i };
    qsort(w->index, w->n_index, sizeof *w->index, cmp_entry);
    for (size_t k = 1; k < w->n_index; k++)   /* a tensor in two shards is ambiguous */
        if (strcmp(w->index[k - 1].tensor->name, w->index[k].tensor->name) == 0)
            return fail(err, errlen, "%s: tensor '%s' is in both %s and %s", dir, show(w->index[k].tensor->name).s,
                        show_path(w->files[w->index[k - 1].file].path).s, show_path(w->files[w->index[k].file].path).s);
    return 0;
}

typedef struct { const char *tensor, *shard; } IndexPair;
static int cmp_shard(const void *a, const void *b) {
    return strcmp(((const IndexPair *)a)->shard, ((const IndexPair *)b)->shard);
}

/* model.safetensors.index.json: {"metadata": {...}, "weight_map": {"tensor": "shard file", ...}}. */
static int open_index(CkptWeights *w, const char *dir, const char *index_path, char *err, size_t errlen) {
    enum { LIMIT = 64 << 20 };
    char *text;
    size_t n;
    if (io_read_file(index_path, LIMIT, &text, &n, err, errlen)) return -1;
    cJSON *root = memchr(text, 0, n) ? NULL : cJSON_ParseWithLengthOpts(text, n + 1, NULL, 1);
    free(text);
    if (!root) return fail(err, errlen, "%s: not valid JSON", index_path);
    int rc = -1;
    IndexPair *pairs = NULL;
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map"), *e;
    if (!cJSON_IsObject(map) || cJSON_GetArraySize(map) == 0) {
        fail(err, errlen, "%s: no \"weight_map\" object", index_path);
        goto done;
    }
    size_t np = 0;
    pairs = malloc((size_t)cJSON_GetArraySize(map) * sizeof *pairs);
    if (!pairs) { fail(err, errlen, "%s: out of memory", index_path); goto done; }
    cJSON_ArrayForEach(e, map) {
        if (!cJSON_IsString(e) || !e->string) {
            fail(err, errlen, "%s: weight_map value of '%s' is not a file name", index_path, show(e->string).s);
            goto done;
        }
        const char *shard = e->valuestring;
        /* A shard is a file in DIR: no path, no parent directory, nothing hidden. */
        int control = 0;   /* ESC, BEL ...: a name that would drive the terminal of whoever reads an error */
        for (const char *c = shard; *c; c++) control |= (unsigned char)*c < 0x20 || *c == 0x7f;
        if (!shard[0] || strchr(shard, '/') || shard[0] == '.' || strlen(shard) > 255 || control) {
            fail(err, errlen, "%s: tensor '%s': shard name \"%s\" is not a plain file name in the directory",
                 index_path, show(e->string).s, show(shard).s);
            goto done;
        }
        pairs[np++] = (IndexPair){ e->string, shard };
    }
    /* Each distinct shard once (sorted, so that 10^5 entries naming a few shards cost n log n). */
    IndexPair *by_shard = malloc(np * sizeof *by_shard);
    if (!by_shard) { fail(err, errlen, "%s: out of memory", index_path); goto done; }
    memcpy(by_shard, pairs, np * sizeof *pairs);
    qsort(by_shard, np, sizeof *by_shard, cmp_shard);
    for (size_t i = 0; i < np; i++) {
        if (i && strcmp(by_shard[i].shard, by_shard[i - 1].shard) == 0) continue;
        char path[4096];
        join(path, sizeof path, dir, by_shard[i].shard);
        if (add_file(w, path, err, errlen)) { free(by_shard); goto done; }
    }
    free(by_shard);
    if (build_index(w, dir, err, errlen)) goto done;
    /* Every tensor is where the index says it is. */
    for (size_t i = 0; i < np; i++) {
        const SafeTensors *file = NULL;
        if (!ckpt_weights_find(w, pairs[i].tensor, &file)) {
            fail(err, errlen, "%s: tensor '%s' is listed in %s but no shard holds it", index_path, show(pairs[i].tensor).s,
                 show(pairs[i].shard).s);
            goto done;
        }
        if (strcmp(base_name(file->path), pairs[i].shard) != 0) {
            fail(err, errlen, "%s: tensor '%s' is listed in %s but found in %s", index_path, show(pairs[i].tensor).s,
                 show(pairs[i].shard).s, show_path(file->path).s);
            goto done;
        }
    }
    rc = 0;
done:
    free(pairs);
    cJSON_Delete(root);
    return rc;
}

int ckpt_weights_open(CkptWeights *w, const char *dir, char *err, size_t errlen) {
    memset(w, 0, sizeof *w);
    char single[4096], index[4096];
    join(single, sizeof single, dir, "model.safetensors");
    join(index, sizeof index, dir, "model.safetensors.index.json");
    struct stat sb;
    int rc;
    if (stat(single, &sb) == 0) rc = add_file(w, single, err, errlen) || build_index(w, dir, err, errlen) ? -1 : 0;
    else if (stat(index, &sb) == 0) rc = open_index(w, dir, index, err, errlen);
    else rc = fail(err, errlen, "%s: neither model.safetensors nor model.safetensors.index.json is there", dir);
    if (rc) ckpt_weights_close(w);
    return rc;
}

const SafeTensor *ckpt_weights_find(const CkptWeights *w, const char *name, const SafeTensors **file) {
    size_t lo = 0, hi = w->n_index;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(w->index[mid].tensor->name, name);
        if (c == 0) { if (file) *file = &w->files[w->index[mid].file]; return w->index[mid].tensor; }
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

void ckpt_weights_close(CkptWeights *w) {
    for (int i = 0; i < w->n_files; i++) safetensors_close(&w->files[i]);
    free(w->files);
    free(w->index);
    memset(w, 0, sizeof *w);
}

/* ---- load -------------------------------------------------------------------------------------- */

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void shape_str(char *out, size_t n, const SafeTensor *t) {
    size_t k = (size_t)snprintf(out, n, "[");
    for (int d = 0; d < t->ndim && k < n; d++)
        k += (size_t)snprintf(out + k, n - k, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (k < n) snprintf(out + k, n - k, "]");
}

/* The model's config and the checkpoint's must describe the same network. */
static int check_config(const LlamaModel *m, const char *dir, char *err, size_t errlen) {
    LlamaConfig want;
    memset(&want, 0, sizeof want);
    if (ckpt_read_config(dir, &want, NULL, err, errlen)) return -1;
    const LlamaConfig *c = &m->cfg;
    struct { const char *name; long have, want; } f[] = {
        {"hidden_size", c->dim, want.dim}, {"num_hidden_layers", c->n_layers, want.n_layers},
        {"num_attention_heads", c->n_heads, want.n_heads}, {"num_key_value_heads", c->n_kv_heads, want.n_kv_heads},
        {"intermediate_size", c->ffn_dim, want.ffn_dim}, {"vocab_size", c->vocab_size, want.vocab_size},
        /* a classifier has no lm_head to tie (llama_describe): the base's flag is the base's business */
        {"tie_word_embeddings", c->task == LLAMA_TASK_CLASSIFY ? want.tie_embeddings : c->tie_embeddings, want.tie_embeddings},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].have != f[i].want)
            return fail(err, errlen, "%s/config.json: %s is %ld but the model was built with %ld", dir, f[i].name,
                        f[i].want, f[i].have);
    return 0;
}

int ckpt_has_weights(const char *dir) {
    char single[4096], index[4096];
    join(single, sizeof single, dir, "model.safetensors");
    join(index, sizeof index, dir, "model.safetensors.index.json");
    struct stat sb;
    return stat(single, &sb) == 0 || stat(index, &sb) == 0;
}

/* Classify's score head, which a causal LM's checkpoint does not have (llama.c initialises it from the seed). */
static int new_score(const LlamaModel *m, const ParamInfo *p) {
    return m->cfg.task == LLAMA_TASK_CLASSIFY && p->which == W_LM_HEAD;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* config.json, and every tensor's name, shape and dtype, against the model m describes (its table of
   parameters is all it needs: nothing is allocated for them). On success the weights stay open in w
   and *largest is the largest parameter's element count. */
static int verify(const LlamaModel *m, const char *dir, CkptWeights *w, size_t *largest, char *err, size_t errlen) {
    if (check_config(m, dir, err, errlen)) return -1;
    if (ckpt_weights_open(w, dir, err, errlen)) return -1;
    const char **names = malloc(((size_t)m->n_params + 1) * sizeof *names);
    if (!names) { ckpt_weights_close(w); return fail(err, errlen, "%s: out of memory", dir); }
    /* Every parameter is there, with its shape and a float dtype; nothing else is. */
    *largest = 0;
    for (int i = 0; i < m->n_params; i++) {
        const ParamInfo *p = &m->params[i];
        names[i] = p->hf_name;
        const SafeTensors *file = NULL;
        const SafeTensor *t = ckpt_weights_find(w, p->hf_name, &file);
        if (!t && new_score(m, p)) continue;   /* a causal LM's checkpoint under a new classifier: score from the seed */
        if (!t) { fail(err, errlen, "%s: tensor '%s' is missing from the checkpoint", dir, p->hf_name); goto bad; }
        int ok = p->rows == 1 ? (t->ndim == 1 && t->shape[0] == p->cols)
                              : (t->ndim == 2 && t->shape[0] == p->rows && t->shape[1] == p->cols);
        if (!ok) {
            char sh[128];
            shape_str(sh, sizeof sh, t);
            if (p->rows == 1) fail(err, errlen, "%s: tensor '%s': shape %s, the model expects [%d]", show_path(file->path).s, p->hf_name, sh, p->cols);
            else fail(err, errlen, "%s: tensor '%s': shape %s, the model expects [%d, %d]", show_path(file->path).s, p->hf_name, sh,
                      p->rows, p->cols);
            goto bad;
        }
        if (t->dtype != ST_F32 && t->dtype != ST_BF16 && t->dtype != ST_F16 && t->dtype != ST_F64) {
            fail(err, errlen, "%s: tensor '%s': dtype %s is not a float type the trainer can load (F32, BF16, F16)",
                 show_path(file->path).s, p->hf_name, safetensors_dtype_name(t->dtype));
            goto bad;
        }
        if (p->numel > *largest) *largest = p->numel;
    }
    qsort(names, (size_t)m->n_params, sizeof *names, cmp_str);
    for (size_t k = 0; k < w->n_index; k++) {
        const char *name = w->index[k].tensor->name;
        if (bsearch(&name, names, (size_t)m->n_params, sizeof *names, cmp_str) || ends_with(name, ".rotary_emb.inv_freq")) continue;
        if (m->cfg.tie_embeddings && strcmp(name, "lm_head.weight") == 0) continue; /* tied: transformers ignores it */
        if (m->cfg.task == LLAMA_TASK_CLASSIFY && strcmp(name, "lm_head.weight") == 0) continue; /* an LM's head: unused, as there */
        fail(err, errlen, "%s: tensor '%s' has no place in the model built from config.json (a config that "
             "does not match its weights?)", show_path(w->files[w->index[k].file].path).s, show(name).s);
        goto bad;
    }
    free(names);
    return 0;
bad:
    free(names);
    ckpt_weights_close(w);
    return -1;
}

int ckpt_check(const LlamaConfig *cfg, const char *dir, CkptWeights *w, char *err, size_t errlen) {
    LlamaModel m;
    if (llama_describe(&m, cfg, 1, 1) != 0) return fail(err, errlen, "%s: out of host memory for the parameter table", dir);
    size_t largest;
    int rc = verify(&m, dir, w, &largest, err, errlen);
    llama_free(&m);
    return rc;
}

/* A plan's host buffer: tagged at an address of the plan's own (never dereferenced, never handed out
   again), as the run's malloc'd buffer is tagged. Untag with DPMEM_TAG_FREE. */
static const void *plan_host(KBackend *kb, size_t bytes, const char *tag) {
    const void *fake = (const void *)(uintptr_t)kb->next_fake;
    kb->next_fake += ((uint64_t)bytes + 255) / 256 * 256 + 256;
    dpmem_tag_alloc_space(fake, bytes, tag, DPMEM_HOST);
    return fake;
}

int ckpt_load(LlamaModel *m, const char *dir, char *err, size_t errlen) {
    return ckpt_load_allowing(m, dir, 0, err, errlen);
}

int ckpt_load_allowing(LlamaModel *m, const char *dir, int allow_nonfinite, char *err, size_t errlen) {
    DPMEM_SCOPE("checkpoint_load");
    /* plan from config.json alone: nothing to check beyond the config, nothing mapped */
    if (!kbackend_computes(m->kb) && !ckpt_has_weights(dir)) return check_config(m, dir, err, errlen);
    CkptWeights w;
    size_t largest = 0;
    if (verify(m, dir, &w, &largest, err, errlen)) return -1;
    for (int i = 0; i < w.n_files; i++) { /* the mapped files, while they are mapped */
        char tag[300];
        snprintf(tag, sizeof tag, "checkpoint/mmap:%s", base_name(w.files[i].path));
        if (w.files[i].map) dpmem_tag_alloc_space(w.files[i].map, w.files[i].map_bytes, tag, DPMEM_HOST);
    }
    int rc = -1;
    float *staging = NULL, *widened = NULL;
    int direct = m->kb->space == DPMEM_HOST;
    if (!kbackend_computes(m->kb)) { /* plan: checked, nothing written; a device target's staging is tagged */
        if (!direct) {
            DPMEM_TAG_FREE(plan_host(m->kb, largest * sizeof(float), "checkpoint/staging"));
        }
        for (int i = 0; i < m->n_params; i++) {   /* the one-tensor fp32 buffer of each tensor loaded through it */
            const ParamInfo *p = &m->params[i];
            if (!ckpt_weights_find(&w, p->hf_name, NULL) || !(llama_bf16_only(m, p) || llama_held_sliced(m, p))) continue;
            if (!(widened = kbuf_alloc(m->kb, p->numel * sizeof(float), "workspace/checkpoint.fp32"))) {
                fail(err, errlen, "%s: no room to load '%s': %s", dir, p->hf_name, kbackend_error(m->kb));
                goto done;
            }
            kbuf_free(m->kb, widened);
            widened = NULL;
        }
        rc = 0;
        goto done;
    }
    if (!direct) {
        staging = malloc(largest * sizeof(float));
        if (!staging) { fail(err, errlen, "%s: out of host memory for a %zu-byte staging buffer", dir, largest * 4); goto done; }
        dpmem_tag_alloc_space(staging, largest * sizeof(float), "checkpoint/staging", DPMEM_HOST);
    }
    for (int i = 0; i < m->n_params; i++) {
        const ParamInfo *p = &m->params[i];
        const SafeTensors *file = NULL;
        const SafeTensor *t = ckpt_weights_find(&w, p->hf_name, &file);
        if (!t) continue;   /* score, new (verify allowed only that): its initialisation stays */
        float *dst = *llama_tensor(&m->w, p);
        /* a tensor kept in bf16 alone (llama.h), or whose fp32 master is sharded over the ranks (this rank
           holds its slice and the whole bf16 copy: llama_master_sharded), or held as this rank's slice alone
           (--zero 3: llama_held_sliced, a frozen base's too): loaded in fp32 into a backend buffer of this one
           tensor, then rounded into its bf16 copy (and its slice kept: rounded, for a base kept in bf16) */
        const int sliced = llama_held_sliced(m, p);
        if ((llama_bf16_only(m, p) || sliced) && !(dst = widened = kbuf_alloc(m->kb, p->numel * sizeof(float), "workspace/checkpoint.fp32"))) {
            fail(err, errlen, "%s: no room to load '%s': %s", dir, p->hf_name, kbackend_error(m->kb));
            goto done;
        }
        float *vals = direct ? dst : staging;
        size_t bad = p->numel;
        if (allow_nonfinite ? safetensors_to_f32(file, t, vals, p->numel, err, errlen)
                            : safetensors_to_f32_finite(file, t, vals, p->numel, &bad, err, errlen)) goto done;
        if (bad < p->numel) {   /* a NaN weight trained to "loss -nan" and exit 0 */
            double was = vals[bad];
            if (t->dtype == ST_F64) memcpy(&was, (const unsigned char *)t->data + 8 * bad, 8);
            if (isfinite(was))
                fail(err, errlen, "%s: tensor '%s': element %zu is %g, beyond fp32's range (--allow-nonfinite loads it as "
                     "infinity)", show_path(file->path).s, p->hf_name, bad, was);
            else
                fail(err, errlen, "%s: tensor '%s': element %zu is %s (--allow-nonfinite loads it anyway)", show_path(file->path).s,
                     p->hf_name, bad, isnan(was) ? "NaN" : was > 0 ? "+inf" : "-inf");
            goto done;
        }
        if (!direct && kbuf_upload(m->kb, dst, staging, p->numel * sizeof(float))) {
            fail(err, errlen, "%s: upload of '%s' failed: %s", dir, p->hf_name, kbackend_error(m->kb));
            goto done;
        }
        if (widened) {
            size_t lo, len;
            llama_slice(p->numel, m->shard_world, m->shard_rank, &lo, &len);
            float *x16 = *llama_tensor(&m->w16, p);   /* (NULL: --zero 3 keeps the slice alone) */
            if ((x16 && narrow_buffer(m->kb, x16, widened, p->numel)) ||
                (sliced && len && (llama_slice_dt(m, p) == KDT_BF16 ? narrow_buffer(m->kb, *llama_tensor(&m->wsh, p), widened + lo, len)
                                                                   : copy_buffer(m->kb, *llama_tensor(&m->wsh, p), widened + lo, len)))) {
                fail(err, errlen, "%s: rounding '%s' to bf16 failed: %s", dir, p->hf_name, kbackend_error(m->kb));
                goto done;
            }
            kbuf_free(m->kb, widened);
            widened = NULL;
        }
    }
    rc = 0;
done:
    kbuf_free(m->kb, widened);
    if (staging) { DPMEM_TAG_FREE(staging); free(staging); }
    for (int i = 0; i < w.n_files; i++)
        if (w.files[i].map) DPMEM_TAG_FREE(w.files[i].map);
    ckpt_weights_close(&w);
    return rc;
}

/* ---- save -------------------------------------------------------------------------------------- */

static int make_dir(const char *dir, char *err, size_t errlen) {
    if (mkdir(dir, 0777) == 0 || errno == EEXIST) {
        struct stat sb;
        if (stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)) return 0;
        return fail(err, errlen, "%s: exists and is not a directory", dir);
    }
    return fail(err, errlen, "%s: cannot create the directory: %s", dir, strerror(errno));
}

/* Copies base/name to dir/name when base has it (written aside, then renamed). */
static int copy_if_present(const char *base, const char *dir, const char *name, char *err, size_t errlen) {
    char from[4096], to[4096], tmp[4200];
    join(from, sizeof from, base, name);
    join(to, sizeof to, dir, name);
    FILE *in = fopen(from, "rb");
    if (!in) return errno == ENOENT ? 0 : fail(err, errlen, "%s: cannot open: %s", from, strerror(errno));
    snprintf(tmp, sizeof tmp, "%s.tmp", to);
    FILE *out = fopen(tmp, "wb");
    if (!out) { fclose(in); return fail(err, errlen, "%s: cannot create: %s", tmp, strerror(errno)); }
    char buf[1 << 16];
    size_t n;
    int ok = 1;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
    ok = ok && !ferror(in);
    fclose(in);
    if (fclose(out) != 0) ok = 0;
    if (!ok || rename(tmp, to) != 0) {
        unlink(tmp);
        return fail(err, errlen, "%s: copy to %s failed", from, to);
    }
    return 0;
}

static const char *torch_dtype_of(SafeTensorsDtype d) {
    return d == ST_BF16 ? "bfloat16" : d == ST_F16 ? "float16" : "float32";
}

/* A plan of --save: the buffers the save would hold (a host staging buffer of `staging` bytes, 0: none;
   each bf16-only tensor's fp32 widening on the backend, one at a time; a gathered save, g: each sliced
   tensor's gather as the gatherer plans it), nothing written. */
static int plan_save(const LlamaModel *m, size_t staging, const CkptGather *g, char *err, size_t errlen) {
    const void *fake = staging ? plan_host(m->kb, staging, "checkpoint/staging") : NULL;
    int rc = 0;
    for (int i = 0; rc == 0 && i < m->n_params; i++) {
        if (g && llama_held_sliced(m, &m->params[i])) {
            if (g->gather(g->user, i, NULL)) rc = fail(err, errlen, "no room to gather '%s': %s", m->params[i].hf_name, kbackend_error(m->kb));
            continue;
        }
        if (!llama_bf16_only(m, &m->params[i])) continue;
        float *x = kbuf_alloc(m->kb, m->params[i].numel * sizeof(float), "workspace/checkpoint.fp32");
        if (!x) rc = fail(err, errlen, "no room to widen '%s': %s", m->params[i].hf_name, kbackend_error(m->kb));
        kbuf_free(m->kb, x);
    }
    if (fake) DPMEM_TAG_FREE(fake);
    return rc;
}

/* config.json (and the base's tokenizer files) for --save into DIR, written to DIR's stage (io_dir_stage). */
static int save_config(const LlamaModel *m, const char *stage, const char *dir, SafeTensorsDtype dtype, const char *base,
                       char *err, size_t errlen) {
    HFConfig hf;
    ckpt_hf_config_from(&m->cfg, m->cfg.max_pos > 0 ? m->cfg.max_pos : (m->T > 2048 ? m->T : 2048), &hf);
    snprintf(hf.torch_dtype, sizeof hf.torch_dtype, "%s", torch_dtype_of(dtype));
    if (base) { /* what the model struct does not carry: token ids; the tokenizer files */
        HFConfig b;
        char bpath[4096];
        join(bpath, sizeof bpath, base, "config.json");
        if (hf_config_read(&b, bpath, err, errlen)) return -1;
        hf.bos_token_id = b.bos_token_id;
        hf.eos_token_id = b.eos_token_id;
        memcpy(hf.bos_token_json, b.bos_token_json, sizeof hf.bos_token_json);   /* a list kept a list */
        memcpy(hf.eos_token_json, b.eos_token_json, sizeof hf.eos_token_json);
        hf.rope_parameters = b.rope_parameters;   /* the RoPE fields in the form they were read */
        /* a value the model holds as a float: the base's own decimal when it is the same float */
        double *mine[5] = { &hf.rms_norm_eps, &hf.rope_theta, &hf.rope_factor, &hf.rope_low_freq_factor, &hf.rope_high_freq_factor };
        const double theirs[5] = { b.rms_norm_eps, b.rope_theta, b.rope_factor, b.rope_low_freq_factor, b.rope_high_freq_factor };
        for (int i = 0; i < 5; i++) if ((float)*mine[i] == (float)theirs[i]) *mine[i] = theirs[i];
        char rb[PATH_MAX], rd[PATH_MAX];
        int same = realpath(base, rb) && realpath(dir, rd) && strcmp(rb, rd) == 0; /* saving over the base */
        static const char *const files[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                            "tokenizer.model", "generation_config.json"};
        for (size_t i = 0; !same && i < sizeof files / sizeof files[0]; i++)   /* (saving over the base: kept by the stage) */
            if (copy_if_present(base, stage, files[i], err, errlen)) return -1;
    }
    char path[4160];
    join(path, sizeof path, stage, "config.json");
    return hf_config_write(&hf, path, err, errlen);
}

/* The end of --save's writing into stage: on success DIR is swapped for it whole; on failure DIR is as
   it was and the stage is removed. Returns rc, or -1 when the swap fails. */
static int save_finish(int rc, const char *stage, const char *dir, char *err, size_t errlen) {
    if (rc == 0 && io_dir_commit(stage, dir, err, errlen) == 0) return 0;
    io_dir_abandon(stage);
    return -1;
}

static void tensor_shape(SafeTensorsWrite *t, const ParamInfo *p, SafeTensorsDtype dtype) {
    t->name = p->hf_name;
    t->dtype = dtype;
    if (p->rows == 1) { t->ndim = 1; t->shape[0] = p->cols; }
    else { t->ndim = 2; t->shape[0] = p->rows; t->shape[1] = p->cols; }
}

int ckpt_save(const LlamaModel *m, const char *dir, SafeTensorsDtype dtype, const char *base, char *err,
              size_t errlen) {
    DPMEM_SCOPE("checkpoint_save");
    if (dtype != ST_F32 && dtype != ST_BF16 && dtype != ST_F16)
        return fail(err, errlen, "%s: can only save F32, BF16 or F16", dir);
    int any_bf16_only = 0;
    for (int i = 0; i < m->n_params; i++) any_bf16_only |= llama_bf16_only(m, &m->params[i]);
    /* a host backend's tensors are written from where they are, but for those kept in bf16 alone */
    int direct = m->kb->space == DPMEM_HOST && !any_bf16_only, rc = -1;
    if (!kbackend_computes(m->kb)) return plan_save(m, direct ? 0 : m->bytes_params, NULL, err, errlen);   /* no values to save */
    /* every file into a stage beside DIR, swapped in whole at the end: a save that fails (a full disk, a
       killed process) leaves the checkpoint that was there, never its weights beside a new config */
    char path[4160], stage[4096];
    if (io_dir_stage(dir, stage, sizeof stage, err, errlen)) return -1;
    SafeTensorsWrite *t = calloc((size_t)m->n_params, sizeof *t);
    float *staging = NULL, *widened = NULL;
    if (!t) { fail(err, errlen, "%s: out of memory", dir); goto done; }
    if (save_config(m, stage, dir, dtype, base, err, errlen)) goto done;
    if (!direct) { /* a device backend: the whole model through one host buffer */
        staging = malloc(m->bytes_params);
        if (!staging) { fail(err, errlen, "%s: out of host memory for a %zu-byte staging buffer", dir, m->bytes_params); goto done; }
        dpmem_tag_alloc_space(staging, m->bytes_params, "checkpoint/staging", DPMEM_HOST);
    }
    size_t off = 0;
    for (int i = 0; i < m->n_params; i++) {
        const ParamInfo *p = &m->params[i];
        const float *src = *llama_tensor((LlamaTensors *)&m->w, p);
        if (llama_bf16_only(m, p)) {
            /* widened into fp32, with its unmerged LoRA adapter (if any) merged there: the saved tensor
               is W₀ + s·B·A as in an fp32 run's; the model keeps its bf16 base */
            LoraAdapter *l = m->lora ? m->lora[i] : NULL;
            if (!(widened = kbuf_alloc(m->kb, p->numel * sizeof(float), "workspace/checkpoint.fp32")) ||
                widen_buffer(m->kb, widened, *llama_tensor((LlamaTensors *)&m->w16, p), p->numel) ||
                (l && lora_merge(l, m->kb, widened, 1.0f))) {
                fail(err, errlen, "%s: widening '%s' failed: %s", dir, p->hf_name, kbackend_error(m->kb));
                goto done;
            }
            src = widened;
        }
        if (!direct) {
            kbuf_download(m->kb, staging + off, src, p->numel * sizeof(float));
            src = staging + off;
            off += p->numel;
        }
        kbuf_free(m->kb, widened);
        widened = NULL;
        tensor_shape(&t[i], p, dtype);
        t[i].data = src;
    }
    const char *mk[] = {"format"}, *mv[] = {"pt"};
    join(path, sizeof path, stage, "model.safetensors");
    rc = safetensors_write(path, t, m->n_params, mk, mv, 1, err, errlen);
done:
    kbuf_free(m->kb, widened);
    if (staging) { DPMEM_TAG_FREE(staging); free(staging); }
    free(t);
    return save_finish(rc, stage, dir, err, errlen);
}

/* ckpt_save_gathered's writer: tensor i's fp32 values into the one-tensor host staging buffer. */
typedef struct {
    const LlamaModel *m;
    const CkptGather *g;
    float *staging;
    char *err;
    size_t errlen;
} Fetch;

static int fetch_tensor(void *user, int i, const float **data) {
    Fetch *f = user;
    const LlamaModel *m = f->m;
    const ParamInfo *p = &m->params[i];
    *data = f->staging;
    if (llama_held_sliced(m, p)) return f->g->gather(f->g->user, i, f->staging);
    const float *src = *llama_tensor((LlamaTensors *)&m->w, p);
    float *widened = NULL;
    if (llama_bf16_only(m, p)) {   /* as ckpt_save: widened, its unmerged adapter merged there */
        LoraAdapter *l = m->lora ? m->lora[i] : NULL;
        if (!(widened = kbuf_alloc(m->kb, p->numel * sizeof(float), "workspace/checkpoint.fp32")) ||
            widen_buffer(m->kb, widened, *llama_tensor((LlamaTensors *)&m->w16, p), p->numel) ||
            (l && lora_merge(l, m->kb, widened, 1.0f))) {
            kbuf_free(m->kb, widened);
            return fail(f->err, f->errlen, "widening '%s' failed: %s", p->hf_name, kbackend_error(m->kb));
        }
        src = widened;
    }
    int rc = kbuf_download(m->kb, f->staging, src, p->numel * sizeof(float));
    kbuf_free(m->kb, widened);
    return rc;
}

int ckpt_save_gathered(const LlamaModel *m, const char *dir, SafeTensorsDtype dtype, const char *base, const CkptGather *g,
                       char *err, size_t errlen) {
    DPMEM_SCOPE("checkpoint_save");
    if (dtype != ST_F32 && dtype != ST_BF16 && dtype != ST_F16)
        return fail(err, errlen, "%s: can only save F32, BF16 or F16", dir);
    size_t largest = 0;
    for (int i = 0; i < m->n_params; i++) largest = m->params[i].numel > largest ? m->params[i].numel : largest;
    if (!kbackend_computes(m->kb)) return g->write ? plan_save(m, largest * sizeof(float), g, err, errlen) : 0;   /* no values */
    if (!g->write) {   /* a rank that does not write: its slices into every gather, in the writer's order */
        for (int i = 0; i < m->n_params; i++)
            if (llama_held_sliced(m, &m->params[i]) && g->gather(g->user, i, NULL))
                return fail(err, errlen, "%s: gathering '%s' failed", dir, m->params[i].hf_name);
        return 0;
    }
    char path[4160], stage[4096];   /* written whole beside DIR, as ckpt_save: a rank killed in the gathers costs nothing */
    if (io_dir_stage(dir, stage, sizeof stage, err, errlen)) return -1;
    SafeTensorsWrite *t = calloc((size_t)m->n_params, sizeof *t);
    Fetch f = { m, g, malloc(largest * sizeof(float)), err, errlen };
    int rc = -1;
    if (!t || !f.staging) { fail(err, errlen, "%s: out of host memory for a %zu-byte staging buffer", dir, largest * 4); goto done; }
    if (save_config(m, stage, dir, dtype, base, err, errlen)) goto done;
    dpmem_tag_alloc_space(f.staging, largest * sizeof(float), "checkpoint/staging", DPMEM_HOST);
    for (int i = 0; i < m->n_params; i++) tensor_shape(&t[i], &m->params[i], dtype);   /* every one fetched */
    const char *mk[] = {"format"}, *mv[] = {"pt"};
    join(path, sizeof path, stage, "model.safetensors");
    rc = safetensors_write_fetched(path, t, m->n_params, mk, mv, 1, fetch_tensor, &f, err, errlen);
    DPMEM_TAG_FREE(f.staging);
done:
    free(f.staging);
    free(t);
    return save_finish(rc, stage, dir, err, errlen);
}

int ckpt_save_lora_adapters(const LoraAdapter *ads, int n, const CkptLoraHead *head, KBackend *kb, const char *base_model,
                            const char *dir, char *err, size_t errlen) {
    if (n <= 0) return fail(err, errlen, "%s: no LoRA adapters to save", dir);
    CkptLoraAdapter *c = calloc((size_t)n, sizeof *c);
    if (!c) return fail(err, errlen, "%s: out of memory", dir);
    for (int i = 0; i < n; i++)
        c[i] = (CkptLoraAdapter){ads[i].name, ads[i].IC, ads[i].OC, ads[i].r, ads[i].A, ads[i].B};
    int rc = ckpt_save_lora(c, n, head, kb, ads[0].scale * (float)ads[0].r, base_model, dir, err, errlen);
    free(c);
    return rc;
}

int ckpt_save_lora(const CkptLoraAdapter *ad, int n, const CkptLoraHead *head, KBackend *kb, float alpha,
                   const char *base_model, const char *dir, char *err, size_t errlen) {
    DPMEM_SCOPE("checkpoint_save");
    if (n <= 0) return fail(err, errlen, "%s: no LoRA adapters to save", dir);
    size_t total = head ? (size_t)head->rows * head->cols : 0;
    for (int i = 0; i < n; i++) total += (size_t)ad[i].r * ad[i].in + (size_t)ad[i].out * ad[i].r;
    if (!kbackend_computes(kb)) { DPMEM_TAG_FREE(plan_host(kb, total * sizeof(float), "checkpoint/staging")); return 0; }   /* plan */
    if (make_dir(dir, err, errlen)) return -1;
    const int nt = 2 * n + (head != NULL);   /* A and B of each adapter, then the classifier's head */
    SafeTensorsWrite *t = calloc((size_t)nt, sizeof *t);
    char (*names)[160] = calloc((size_t)nt, sizeof *names);
    float *host = malloc(total * sizeof(float) + 1);
    int rc = -1;
    cJSON *cfg = NULL;
    if (!t || !names || !host) { fail(err, errlen, "%s: out of memory", dir); goto done; }
    dpmem_tag_alloc_space(host, total * sizeof(float), "checkpoint/staging", DPMEM_HOST);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        const CkptLoraAdapter *l = &ad[i];
        size_t na = (size_t)l->r * l->in, nb = (size_t)l->out * l->r;
        kbuf_download(kb, host + off, l->A, na * sizeof(float));
        kbuf_download(kb, host + off + na, l->B, nb * sizeof(float));
        /* PEFT: base_model.model.<the base module's name>.lora_A.weight */
        snprintf(names[2 * i], sizeof names[0], "base_model.model.model.%s.lora_A.weight", l->name);
        snprintf(names[2 * i + 1], sizeof names[0], "base_model.model.model.%s.lora_B.weight", l->name);
        t[2 * i] = (SafeTensorsWrite){names[2 * i], ST_F32, 2, {l->r, l->in}, host + off};
        t[2 * i + 1] = (SafeTensorsWrite){names[2 * i + 1], ST_F32, 2, {l->out, l->r}, host + off + na};
        off += na + nb;
    }
    if (head) {   /* PEFT saves a modules_to_save module under its own name: base_model.model.score.weight */
        kbuf_download(kb, host + off, head->w, (size_t)head->rows * head->cols * sizeof(float));
        snprintf(names[2 * n], sizeof names[0], "base_model.model.score.weight");
        t[2 * n] = (SafeTensorsWrite){names[2 * n], ST_F32, 2, {head->rows, head->cols}, host + off};
    }
    char path[4096];
    const char *mk[] = {"format"}, *mv[] = {"pt"};
    join(path, sizeof path, dir, "adapter_model.safetensors");
    if (safetensors_write(path, t, nt, mk, mv, 1, err, errlen)) goto done_tagged;

    /* adapter_config.json: target_modules are the distinct last components (q_proj, v_proj, ...). */
    cfg = cJSON_CreateObject();
    cJSON_AddObjectToObject(cfg, "alpha_pattern");
    cJSON_AddStringToObject(cfg, "base_model_name_or_path", base_model ? base_model : "");
    cJSON_AddStringToObject(cfg, "bias", "none");
    cJSON_AddBoolToObject(cfg, "fan_in_fan_out", 0);
    cJSON_AddBoolToObject(cfg, "inference_mode", 1);
    cJSON_AddBoolToObject(cfg, "init_lora_weights", 1);
    cJSON_AddNullToObject(cfg, "layers_pattern");
    cJSON_AddNullToObject(cfg, "layers_to_transform");
    cJSON_AddNumberToObject(cfg, "lora_alpha", alpha);
    cJSON_AddNumberToObject(cfg, "lora_dropout", 0.0);
    if (head) {   /* PEFT's own list for SEQ_CLS: whichever of the two the model has */
        cJSON *save = cJSON_AddArrayToObject(cfg, "modules_to_save");
        cJSON_AddItemToArray(save, cJSON_CreateString("classifier"));
        cJSON_AddItemToArray(save, cJSON_CreateString("score"));
    } else cJSON_AddNullToObject(cfg, "modules_to_save");
    cJSON_AddStringToObject(cfg, "peft_type", "LORA");
    cJSON_AddNumberToObject(cfg, "r", ad[0].r);
    cJSON_AddObjectToObject(cfg, "rank_pattern");
    cJSON_AddNullToObject(cfg, "revision");
    cJSON *targets = cJSON_AddArrayToObject(cfg, "target_modules");
    for (int i = 0; i < n; i++) {
        if (ad[i].r != ad[0].r) { fail(err, errlen, "%s: adapters of different ranks (%d, %d) cannot share one "
                                       "adapter_config.json", dir, ad[0].r, ad[i].r); goto done_tagged; }
        const char *dot = strrchr(ad[i].name, '.');
        const char *mod = dot ? dot + 1 : ad[i].name;
        int seen = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, targets) seen |= strcmp(e->valuestring, mod) == 0;
        if (!seen) cJSON_AddItemToArray(targets, cJSON_CreateString(mod));
    }
    cJSON_AddStringToObject(cfg, "task_type", head ? "SEQ_CLS" : "CAUSAL_LM");
    cJSON_AddBoolToObject(cfg, "use_dora", 0);
    cJSON_AddBoolToObject(cfg, "use_rslora", 0);
    char *text = cJSON_Print(cfg);
    join(path, sizeof path, dir, "adapter_config.json");
    size_t tn = text ? strlen(text) : 0;
    char *line = text ? realloc(text, tn + 2) : NULL;
    if (!line) { free(text); fail(err, errlen, "%s: out of memory", path); goto done_tagged; }
    line[tn] = '\n';
    int wrc = io_replace_file(path, line, tn + 1, err, errlen);   /* aside, then renamed */
    free(line);
    if (wrc) goto done_tagged;
    rc = 0;
done_tagged:
    DPMEM_TAG_FREE(host);
done:
    cJSON_Delete(cfg);
    free(host);
    free(names);
    free(t);
    return rc;
}
