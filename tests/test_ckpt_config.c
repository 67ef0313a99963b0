/* test_ckpt_config.c — Hugging Face config.json (samples/llama/hf_config.c) and the llama3 rope frequencies.

   Checks: Llama-3.2-1B's published config.json parses to its exact fields (GQA 32/8, head_dim 64,
   tied embeddings, eps 1e-5, theta 5e5, llama3 scaling 32/1/4/8192); defaults follow transformers
   (kv heads = heads, head_dim = C/NH, eps 1e-6, theta 1e4, no tie); the 32 inverse frequencies of
   Llama 3.2 equal the values transformers' _compute_llama3_parameters gives (computed offline with
   the same torch.where steps in float64 and pasted here), covering the high, medium and low bands,
   both from hf_config_rope_inv_freq and from the kernels' krope_inv_freq (fp32, kernels.h);
   without scaling they are theta^(-2i/d); write -> read is the identity; transformers v5's
   rope_parameters layout reads the same; a write that fails (a file-size limit) leaves the old file
   whole; a key given twice takes its last value (Python's json); and unsupported or broken configs
   (architectures not a list, a rope type that is not a known name, rope_parameters not an object)
   are refused with one line naming the file and the field. */
#include "llama/hf_config.h"
#include "kernels.h" /* krope_inv_freq: what the rope kernels use */

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>

static int failures = 0;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                               printf(__VA_ARGS__); printf("\n"); } } while (0)

/* meta-llama/Llama-3.2-1B config.json, verbatim fields. */
static const char *llama32_1b =
    "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"attention_bias\": false,\n  \"attention_dropout\": 0.0,\n"
    "  \"bos_token_id\": 128000,\n  \"eos_token_id\": 128001,\n  \"head_dim\": 64,\n  \"hidden_act\": \"silu\",\n"
    "  \"hidden_size\": 2048,\n  \"initializer_range\": 0.02,\n  \"intermediate_size\": 8192,\n"
    "  \"max_position_embeddings\": 131072,\n  \"mlp_bias\": false,\n  \"model_type\": \"llama\",\n"
    "  \"num_attention_heads\": 32,\n  \"num_hidden_layers\": 16,\n  \"num_key_value_heads\": 8,\n"
    "  \"pretraining_tp\": 1,\n  \"rms_norm_eps\": 1e-05,\n  \"rope_scaling\": {\n    \"factor\": 32.0,\n"
    "    \"high_freq_factor\": 4.0,\n    \"low_freq_factor\": 1.0,\n    \"original_max_position_embeddings\": 8192,\n"
    "    \"rope_type\": \"llama3\"\n  },\n  \"rope_theta\": 500000.0,\n  \"tie_word_embeddings\": true,\n"
    "  \"torch_dtype\": \"bfloat16\",\n  \"transformers_version\": \"4.45.0.dev0\",\n  \"use_cache\": true,\n"
    "  \"vocab_size\": 128256\n}\n";

/* transformers' llama3 inverse frequencies for theta 5e5, d 64, factor 32, low 1, high 4, old 8192:
   i < 15 high band (kept), 15..17 medium (blended), >= 18 low (divided by 32). */
static const double want_llama3[32] = {
    1.000000000e+00, 6.636012377e-01, 4.403666027e-01, 2.922278226e-01,
    1.939227447e-01, 1.286873734e-01, 8.539710029e-02, 5.666962145e-02,
    3.760603093e-02, 2.495540867e-02, 1.656044008e-02, 1.098952853e-02,
    7.292664737e-03, 4.839421346e-03, 3.211445995e-03, 1.290547928e-03,
    4.295567966e-04, 9.708287803e-05, 1.946163818e-05, 1.291476719e-05,
    8.570255490e-06, 5.687232150e-06, 3.774054294e-06, 2.504467101e-06,
    1.661967468e-06, 1.102883669e-06, 7.318749675e-07, 4.856731343e-07,
    3.222932930e-07, 2.138742282e-07, 1.419272025e-07, 9.418306725e-08,
};

static int parse(HFConfig *c, const char *json, char *err, size_t n) {
    return hf_config_parse(c, json, strlen(json), "config.json", err, n);
}

static void expect_reject(const char *json, const char *sub, const char *what) {
    HFConfig c;
    char err[512] = "";
    int rc = parse(&c, json, err, sizeof err);
    CHECK(rc == -1, "%s: accepted", what);
    CHECK(strstr(err, "config.json") && strstr(err, sub) && !strchr(err, '\n'),
          "%s: message should be one line naming config.json and '%s': %s", what, sub, err);
}

/* The 1B config with one field's text replaced. */
static char *variant(const char *from, const char *to) {
    static char buf[4096];
    const char *p = strstr(llama32_1b, from);
    if (!p) { printf("FAIL: test bug, '%s' not in the config\n", from); exit(1); }
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(p - llama32_1b), llama32_1b, to, p + strlen(from));
    return buf;
}

int main(void) {
    HFConfig c;
    char err[512];
    CHECK(parse(&c, llama32_1b, err, sizeof err) == 0, "Llama-3.2-1B config refused: %s", err);
    CHECK(c.hidden_size == 2048 && c.intermediate_size == 8192 && c.num_hidden_layers == 16 &&
          c.num_attention_heads == 32 && c.num_key_value_heads == 8 && c.head_dim == 64 && c.vocab_size == 128256 &&
          c.max_position_embeddings == 131072, "sizes");
    CHECK(c.rms_norm_eps == 1e-5 && c.rope_theta == 500000.0 && c.tie_word_embeddings == 1, "eps, theta, tie");
    CHECK(c.rope_llama3 && c.rope_factor == 32 && c.rope_low_freq_factor == 1 && c.rope_high_freq_factor == 4 &&
          c.rope_original_max_position_embeddings == 8192, "rope_scaling");
    CHECK(strcmp(c.torch_dtype, "bfloat16") == 0 && c.bos_token_id == 128000 && c.eos_token_id == 128001,
          "dtype and token ids");

    float inv[32];
    hf_config_rope_inv_freq(&c, inv);
    for (int i = 0; i < 32; i++)
        CHECK(fabs(inv[i] - want_llama3[i]) <= 2e-6 * want_llama3[i], "llama3 inv_freq[%d] = %.9e, want %.9e", i,
              inv[i], want_llama3[i]);
    /* The kernels' fp32 version of the same frequencies (kernels.h, used by rope_forward). */
    KRope kr = {500000.0f, 32.0f, 1.0f, 4.0f, 8192.0f};
    for (int i = 0; i < 32; i++) {
        float k = krope_inv_freq(kr, i, 64);
        CHECK(fabs(k - want_llama3[i]) <= 2e-6 * want_llama3[i], "krope_inv_freq(%d) = %.9e, want %.9e", i, k,
              want_llama3[i]);
    }
    kr.factor = 0;
    CHECK(krope_inv_freq(kr, 20, 64) == 1.0f / powf(500000.0f, 40.0f / 64.0f), "krope without scaling");
    HFConfig plain = c;
    plain.rope_llama3 = 0;
    float base[32];
    hf_config_rope_inv_freq(&plain, base);
    for (int i = 0; i < 32; i++) {
        double w = pow(500000.0, -2.0 * i / 64);
        CHECK(fabs(base[i] - w) <= 1e-6 * w, "plain inv_freq[%d] = %.9e, want %.9e", i, base[i], w);
    }
    CHECK(inv[3] == base[3] && fabs(inv[25] * 32 - base[25]) <= 1e-6 * base[25] && inv[16] < base[16] &&
          inv[16] > base[16] / 32, "bands: high kept, low divided by 32, medium in between");

    /* Defaults, as transformers' LlamaConfig. */
    const char *minimal = "{\"hidden_size\":96,\"intermediate_size\":256,\"num_hidden_layers\":3,"
                          "\"num_attention_heads\":6,\"vocab_size\":100}";
    CHECK(parse(&c, minimal, err, sizeof err) == 0, "minimal config refused: %s", err);
    CHECK(c.num_key_value_heads == 6 && c.head_dim == 16 && c.rms_norm_eps == 1e-6 && c.rope_theta == 10000 &&
          !c.tie_word_embeddings && !c.rope_llama3 && c.max_position_embeddings == 2048 && c.bos_token_id == -1,
          "defaults: kv %d hd %d eps %g theta %g", c.num_key_value_heads, c.head_dim, c.rms_norm_eps, c.rope_theta);

    /* transformers v5 writes rope_parameters instead of rope_theta + rope_scaling. */
    const char *v5 = "{\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":1,\"num_attention_heads\":4,"
                     "\"vocab_size\":50,\"rope_parameters\":{\"rope_type\":\"llama3\",\"rope_theta\":500000.0,\"factor\":"
                     "8.0,\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192}}";
    CHECK(parse(&c, v5, err, sizeof err) == 0 && c.rope_llama3 && c.rope_theta == 500000.0 && c.rope_factor == 8,
          "rope_parameters layout: %s", err);

    /* A float field is written as the shortest decimal that reads back as the same float. */
    CHECK(hf_shortest_float(1e-6f) == 1e-6 && hf_shortest_float(1e-5f) == 1e-5 && hf_shortest_float(500000.0f) == 500000.0 &&
          hf_shortest_float(0.1f) == 0.1 && hf_shortest_float(32.0f) == 32.0 && (float)hf_shortest_float(1.0f / 3) == 1.0f / 3,
          "shortest decimals: %.17g %.17g %.17g", hf_shortest_float(1e-6f), hf_shortest_float(1e-5f), hf_shortest_float(0.1f));

    /* Round trip through a file. */
    char dir[] = "/tmp/test_ckpt_cfg_XXXXXX", path[256];
    if (!mkdtemp(dir)) { printf("FAIL: mkdtemp\n"); return 1; }
    snprintf(path, sizeof path, "%s/config.json", dir);
    HFConfig a, b;
    parse(&a, llama32_1b, err, sizeof err);
    CHECK(hf_config_write(&a, path, err, sizeof err) == 0, "write: %s", err);
    CHECK(hf_config_read(&b, path, err, sizeof err) == 0, "read back: %s", err);
    CHECK(memcmp(&a, &b, sizeof a) == 0, "write -> read changed the config");
    a.rope_llama3 = 0; a.tie_word_embeddings = 0; a.bos_token_id = a.eos_token_id = -1;
    memset(a.bos_token_json, 0, sizeof a.bos_token_json);
    memset(a.eos_token_json, 0, sizeof a.eos_token_json);
    a.rope_factor = a.rope_low_freq_factor = a.rope_high_freq_factor = 0; a.rope_original_max_position_embeddings = 0;
    CHECK(hf_config_write(&a, path, err, sizeof err) == 0 && hf_config_read(&b, path, err, sizeof err) == 0 &&
          memcmp(&a, &b, sizeof a) == 0, "round trip without scaling: %s", err);
    /* a v5 config is written back as v5: rope_parameters, no rope_scaling, no rope_theta beside it */
    CHECK(parse(&a, v5, err, sizeof err) == 0 && a.rope_parameters == 1, "v5 read: %s", err);
    snprintf(a.torch_dtype, sizeof a.torch_dtype, "float32");   /* (what is written when the config had none) */
    CHECK(hf_config_write(&a, path, err, sizeof err) == 0 && hf_config_read(&b, path, err, sizeof err) == 0 &&
          memcmp(&a, &b, sizeof a) == 0, "v5 round trip: %s", err);
    {
        FILE *f = fopen(path, "r");
        char text[4096] = "";
        size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
        text[n] = 0;
        if (f) fclose(f);
        CHECK(strstr(text, "\"rope_parameters\"") && !strstr(text, "\"rope_scaling\"") && strstr(text, "\"rope_theta\"") &&
              strstr(text, "\"rope_theta\"") > strstr(text, "\"rope_parameters\"") && strstr(text, "\"llama3\""),
              "a v5 config written in another form:\n%s", text);
    }
    {   /* A list-valued eos_token_id (Llama 3.x Instruct's stop tokens) is written back as the list, not cut to its
           first; an integer stays an integer. */
        char text[4096] = "";
        CHECK(parse(&a, variant("\"eos_token_id\": 128001", "\"eos_token_id\": [6, 7]"), err, sizeof err) == 0 &&
              a.eos_token_id == 6 && a.bos_token_id == 128000, "eos [6, 7]: eos %d bos %d %s", a.eos_token_id, a.bos_token_id, err);
        CHECK(hf_config_write(&a, path, err, sizeof err) == 0 && hf_config_read(&b, path, err, sizeof err) == 0 &&
              memcmp(&a, &b, sizeof a) == 0, "eos [6, 7] round trip: %s", err);
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
        text[n] = 0;
        if (f) fclose(f);
        cJSON *o = cJSON_Parse(text);
        const cJSON *eos = cJSON_GetObjectItemCaseSensitive(o, "eos_token_id"), *bos = cJSON_GetObjectItemCaseSensitive(o, "bos_token_id");
        CHECK(cJSON_IsArray(eos) && cJSON_GetArraySize(eos) == 2 && cJSON_GetArrayItem(eos, 0)->valuedouble == 6 &&
              cJSON_GetArrayItem(eos, 1)->valuedouble == 7 && cJSON_IsNumber(bos) && bos->valuedouble == 128000,
              "eos [6, 7] written as another value (want the list; bos the integer):\n%s", text);
        cJSON_Delete(o);
    }
    {   /* A write that fails (a file-size limit: the same as a full disk) leaves the old config.json whole
           (written aside and renamed; it was truncated in place), and nothing beside it. */
        FILE *f = fopen(path, "rb");
        char before[4096] = "", after[4096] = "";
        size_t n = f ? fread(before, 1, sizeof before - 1, f) : 0;
        if (f) fclose(f);
        CHECK(n > 200, "test bug: config.json is %zu bytes", n);
        struct rlimit old_lim, lim;
        getrlimit(RLIMIT_FSIZE, &old_lim);
        lim = old_lim;
        lim.rlim_cur = 100;
        void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);   /* EFBIG instead of a kill */
        parse(&a, llama32_1b, err, sizeof err);
        setrlimit(RLIMIT_FSIZE, &lim);
        int rc = hf_config_write(&a, path, err, sizeof err);
        setrlimit(RLIMIT_FSIZE, &old_lim);
        signal(SIGXFSZ, old_sig);
        CHECK(rc == -1 && strstr(err, "config.json: write failed") && !strchr(err, '\n'), "write over the limit: rc %d, %s",
              rc, err);
        f = fopen(path, "rb");
        size_t m = f ? fread(after, 1, sizeof after - 1, f) : 0;
        if (f) fclose(f);
        CHECK(m == n && memcmp(before, after, n) == 0, "a failed write left config.json %zu bytes, was %zu", m, n);
        DIR *dd = opendir(dir);
        int entries = 0;
        for (struct dirent *e; dd && (e = readdir(dd));) entries += e->d_name[0] != '.';
        if (dd) closedir(dd);
        CHECK(entries == 1, "a failed write left %d files in the directory, want config.json alone", entries);
    }
    unlink(path);
    snprintf(path, sizeof path, "%s/none.json", dir);
    CHECK(hf_config_read(&b, path, err, sizeof err) == -1 && strstr(err, "none.json") && strstr(err, "No such file"),
          "missing file: %s", err);
    rmdir(dir);

    /* Refusals. */
    expect_reject(variant("LlamaForCausalLM", "MistralForCausalLM"), "MistralForCausalLM", "another architecture");
    expect_reject(variant("\"llama\"", "\"qwen2\""), "qwen2", "another model_type");
    expect_reject(variant("\"silu\"", "\"gelu\""), "gelu", "another activation");
    expect_reject(variant("\"attention_bias\": false", "\"attention_bias\": true"), "attention_bias", "biases");
    expect_reject(variant("\"llama3\"", "\"yarn\""), "yarn", "yarn scaling");
    expect_reject(variant("\"num_key_value_heads\": 8", "\"num_key_value_heads\": 5"), "num_key_value_heads", "GQA");
    expect_reject(variant("\"head_dim\": 64", "\"head_dim\": 63"), "head_dim", "odd head_dim");
    expect_reject(variant("\"hidden_size\": 2048,", ""), "hidden_size", "missing hidden_size");
    expect_reject(variant("\"hidden_size\": 2048", "\"hidden_size\": -2048"), "hidden_size", "negative size");
    expect_reject(variant("\"hidden_size\": 2048", "\"hidden_size\": 20.5"), "hidden_size", "fractional size");
    expect_reject(variant("\"vocab_size\": 128256", "\"vocab_size\": 1e12"), "vocab_size", "absurd size");
    expect_reject(variant("\"high_freq_factor\": 4.0", "\"high_freq_factor\": 1.0"), "high_freq_factor", "high <= low");
    expect_reject(variant("\"factor\": 32.0,", ""), "factor", "llama3 without factor");
    expect_reject(variant("\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": \"small\""), "rms_norm_eps", "eps as text");
    expect_reject(variant("\"tie_word_embeddings\": true", "\"tie_word_embeddings\": 1"), "tie_word_embeddings",
                  "tie as a number");
    expect_reject(variant("\"vocab_size\": 128256\n", "\"vocab_size\": 128256,\n"), "JSON", "trailing comma");
    /* Read as Python's json and transformers read it (issue 27): a key given twice takes its last value. */
    {
        char dup[4096];
        snprintf(dup, sizeof dup, "%s", variant("\"hidden_size\": 2048,", "\"hidden_size\": 2048, \"hidden_size\": 1024,"));
        CHECK(parse(&c, dup, err, sizeof err) == 0 && c.hidden_size == 1024, "duplicate hidden_size: %d, want the last (1024): %s",
              c.hidden_size, err);
        snprintf(dup, sizeof dup, "%s", variant("\"rope_type\": \"llama3\"", "\"rope_type\": \"llama3\", \"factor\": 8.0"));
        CHECK(parse(&c, dup, err, sizeof err) == 0 && c.rope_factor == 8, "duplicate rope factor: %g, want the last (8): %s",
              c.rope_factor, err);
        snprintf(dup, sizeof dup, "%s", variant("\"model_type\": \"llama\"", "\"model_type\": \"llama\", \"model_type\": \"qwen2\""));
        expect_reject(dup, "qwen2", "model_type given twice, the last another model");
    }
    expect_reject(variant("[\"LlamaForCausalLM\"]", "{\"a\": \"LlamaForCausalLM\"}"), "architectures", "architectures as an object");
    expect_reject(variant("[\"LlamaForCausalLM\"]", "\"LlamaForCausalLM\""), "architectures", "architectures as a string");
    expect_reject(variant("\"rope_type\": \"llama3\"", "\"rope_type\": 5"), "rope_scaling type 5", "a numeric rope type");
    expect_reject(variant("\"rope_type\": \"llama3\"", "\"type\": [\"llama3\"]"), "rope_scaling type [\"llama3\"]",
                  "a list as the older type key");
    expect_reject("{\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":1,\"num_attention_heads\":4,"
                  "\"vocab_size\":50,\"rope_parameters\":\"x\"}", "\"rope_parameters\" must be an object", "rope_parameters as text");
    expect_reject("{\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":1,\"num_attention_heads\":4,"
                  "\"vocab_size\":50,\"rope_parameters\":{\"rope_type\":\"yarn\",\"factor\":4.0}}", "rope_parameters type \"yarn\"",
                  "yarn in rope_parameters");
    expect_reject("[1, 2]", "object", "an array");
    expect_reject("", "JSON", "empty file");

    if (failures) { printf("%d check(s) failed\n", failures); return 1; }
    printf("config: Llama-3.2-1B fields, defaults, llama3 rope frequencies, round trip, refusals OK\n");
    return 0;
}
