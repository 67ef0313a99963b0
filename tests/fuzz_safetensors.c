/* fuzz_safetensors.c — a deterministic mutation fuzzer for the safetensors header parser and the
   config.json parser, short enough for `make test` (a few seconds; run under ASan+UBSan by `make
   sanitize`, which is where it earns its keep).

   Seeds are valid files (several dtypes, metadata, zero-size and scalar tensors, a padded header, a
   Llama config). Each iteration applies 1–4 mutations — bit flips, bytes set to JSON punctuation,
   a number in the header replaced by an extreme one (0, 2^53, 2^64, -1, 1e308, 3.5, ...), a
   truncation, an insertion or deletion with or without fixing the length field, a new length field —
   and parses the result from a heap buffer of exactly its size, so that any read past the "mapping"
   is an ASan error. When a mutant is accepted, the test checks what acceptance promises: every tensor
   lies inside the data region, the ranges tile it, sizes equal shape × dtype, and every float tensor
   converts (reading all of its bytes). Also checks that at least some mutants are accepted and some
   refused (a fuzzer whose mutants all fail at byte 0 tests nothing).

   FUZZ_ITERS=n overrides the iteration count (default 100000); FUZZ_SEED=n the PRNG seed.
   The libFuzzer twin is tests/fuzz_safetensors_libfuzzer.c. */
#include "llama/hf_config.h"
#include "llama/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12; rng_state ^= rng_state << 25; rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}
static size_t below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

static size_t make_image(unsigned char *out, const char *json, size_t data_bytes) {
    size_t hl = strlen(json);
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(out + 8, json, hl);
    for (size_t i = 0; i < data_bytes; i++) out[8 + hl + i] = (unsigned char)(rnd() >> 56);
    return 8 + hl + data_bytes;
}

static const char *numbers[] = {"0", "1", "2", "7", "8", "12", "4294967295", "4294967296", "9007199254740992",
                                "9007199254740993", "18446744073709551615", "18446744073709551616", "-1", "-0",
                                "1e308", "1e400", "3.5", "1E2", "0.0", "100000000", "104857600", "2147483647"};
static const char punct[] = "{}[]\":,-.eE0123456789 \\\0\xff";

/* One mutation of buf (len bytes, capacity cap). Returns the new length. */
static size_t mutate(unsigned char *buf, size_t len, size_t cap) {
    size_t hl = 0;
    for (int i = 7; i >= 0 && len >= 8; i--) hl = hl << 8 | buf[i];
    switch (below(7)) {
    case 0: if (len) buf[below(len)] ^= (unsigned char)(1u << below(8)); return len;
    case 1: if (len) buf[below(len)] = (unsigned char)punct[below(sizeof punct - 1)]; return len;
    case 2: { /* replace a run of digits in the header by an extreme number; fix the length field */
        if (len < 9 || hl == 0 || hl > len - 8) return len;
        size_t start = 8 + below(hl), a = start;
        while (a < 8 + hl && !(buf[a] >= '0' && buf[a] <= '9')) a++;
        if (a >= 8 + hl) return len;
        size_t b = a;
        while (b < 8 + hl && ((buf[b] >= '0' && buf[b] <= '9') || buf[b] == '-')) b++;
        const char *num = numbers[below(sizeof numbers / sizeof numbers[0])];
        size_t k = strlen(num);
        if (len - (b - a) + k > cap) return len;
        memmove(buf + a + k, buf + b, len - b);
        memcpy(buf + a, num, k);
        len = len - (b - a) + k;
        hl = hl - (b - a) + k;
        for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(hl >> (8 * i));
        return len;
    }
    case 3: return below(len + 1); /* truncate */
    case 4: { /* insert punctuation, fixing the length field half of the time */
        if (len + 1 > cap || len < 9) return len;
        size_t at = 8 + below(len - 8);
        memmove(buf + at + 1, buf + at, len - at);
        buf[at] = (unsigned char)punct[below(sizeof punct - 1)];
        if ((rnd() & 1) && at < 8 + hl) { hl++; for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(hl >> (8 * i)); }
        return len + 1;
    }
    case 5: { /* delete a byte */
        if (len < 9) return len;
        size_t at = 8 + below(len - 8);
        memmove(buf + at, buf + at + 1, len - at - 1);
        if ((rnd() & 1) && at < 8 + hl && hl) { hl--; for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(hl >> (8 * i)); }
        return len - 1;
    }
    default: { /* a new header length */
        if (len < 8) return len;
        uint64_t v = below(4) == 0 ? rnd() : below(4) == 0 ? (uint64_t)len - 8 + below(3) : hl + below(5) - 2;
        for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(v >> (8 * i));
        return len;
    }
    }
}

static int failures = 0;

static void check_accepted(const SafeTensors *st, const unsigned char *base, size_t len, long iter) {
    size_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | base[i];
    const unsigned char *data = base + 8 + hl, *end = base + len;
    uint64_t expect = 0;
    for (int i = 0; i < st->n; i++) {
        const SafeTensor *t = &st->tensors[i];
        const unsigned char *p = t->data;
        int ok = p >= data && p + t->nbytes <= end && t->begin == expect &&
                 t->nbytes == t->numel * safetensors_dtype_size(t->dtype) && t->end - t->begin == t->nbytes;
        if (!ok) { failures++; printf("FAIL iteration %ld: accepted tensor '%s' violates the invariants\n", iter, t->name); }
        expect = t->end;
        if (ok && (t->dtype == ST_F32 || t->dtype == ST_BF16 || t->dtype == ST_F16 || t->dtype == ST_F64) &&
            t->numel <= (1u << 20)) {
            float *tmp = malloc(t->numel * sizeof(float) + 1);
            char err[SAFETENSORS_ERR];
            if (safetensors_to_f32(st, t, tmp, t->numel, err, sizeof err) != 0) {
                failures++;
                printf("FAIL iteration %ld: conversion of accepted tensor failed: %s\n", iter, err);
            }
            free(tmp);
        }
    }
    if (data + expect != end) { failures++; printf("FAIL iteration %ld: accepted ranges do not cover the data\n", iter); }
}

int main(void) {
    long iters = getenv("FUZZ_ITERS") ? atol(getenv("FUZZ_ITERS")) : 100000;
    if (getenv("FUZZ_SEED")) rng_state = strtoull(getenv("FUZZ_SEED"), NULL, 0) * 0x9e3779b97f4a7c15ull + 1;
    enum { CAP = 4096 };
    static unsigned char seeds[6][CAP];
    size_t seed_len[6];
    seed_len[0] = make_image(seeds[0], "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                                       "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12);
    seed_len[1] = make_image(seeds[1], "{\"__metadata__\":{\"format\":\"pt\"},\"model.embed_tokens.weight\":"
                                       "{\"dtype\":\"BF16\",\"shape\":[3,2],\"data_offsets\":[0,12]},"
                                       "\"model.norm.weight\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[12,16]}}   ",
                             16);
    seed_len[2] = make_image(seeds[2], "{\"z\":{\"dtype\":\"BF16\",\"shape\":[0,5],\"data_offsets\":[0,0]},"
                                       "\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]},"
                                       "\"i\":{\"dtype\":\"I64\",\"shape\":[1,1],\"data_offsets\":[8,16]}}", 16);
    seed_len[3] = make_image(seeds[3], "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
                                       "\"a\":{\"dtype\":\"U8\",\"shape\":[2,4],\"data_offsets\":[0,8]}}", 12);
    seed_len[4] = make_image(seeds[4], "{}", 0);
    const char *config = "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,\"intermediate_size\":160,"
                         "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":16,"
                         "\"vocab_size\":97,\"rms_norm_eps\":1e-05,\"rope_theta\":500000.0,\"rope_scaling\":{\"factor\":"
                         "32.0,\"high_freq_factor\":4.0,\"low_freq_factor\":1.0,\"original_max_position_embeddings\":"
                         "8192,\"rope_type\":\"llama3\"},\"tie_word_embeddings\":true,\"max_position_embeddings\":131072}";
    seed_len[5] = strlen(config);
    memcpy(seeds[5], config, seed_len[5]);

    long accepted = 0, refused = 0, cfg_ok = 0, cfg_bad = 0;
    unsigned char work[CAP];
    for (long it = 0; it < iters; it++) {
        int s = (int)below(6);
        size_t len = seed_len[s];
        memcpy(work, seeds[s], len);
        int k = 1 + (int)below(4);
        for (int m = 0; m < k; m++) len = mutate(work, len, CAP);
        unsigned char *exact = malloc(len ? len : 1); /* exactly len bytes: ASan catches over-reads */
        memcpy(exact, work, len);
        char err[SAFETENSORS_ERR];
        if (s == 5) {
            HFConfig c;
            if (hf_config_parse(&c, (const char *)exact, len, "config.json", err, sizeof err) == 0) {
                cfg_ok++;
                if (c.head_dim <= 0 || c.head_dim % 2 || c.num_attention_heads % c.num_key_value_heads) {
                    failures++;
                    printf("FAIL iteration %ld: accepted config violates its checks\n", it);
                }
                float inv[1024];
                if (c.head_dim / 2 <= 1024) hf_config_rope_inv_freq(&c, inv);
            } else {
                cfg_bad++;
                if (!strstr(err, "config.json") || strchr(err, '\n')) {
                    failures++;
                    printf("FAIL iteration %ld: config error is not one line naming the file: %s\n", it, err);
                }
            }
        } else {
            SafeTensors st;
            if (safetensors_parse(&st, exact, len, "fuzz.safetensors", err, sizeof err) == 0) {
                accepted++;
                check_accepted(&st, exact, len, it);
                safetensors_close(&st);
            } else {
                refused++;
                if (!strstr(err, "fuzz.safetensors") || strchr(err, '\n')) {
                    failures++;
                    printf("FAIL iteration %ld: error is not one line naming the file: %s\n", it, err);
                }
            }
        }
        free(exact);
        if (failures > 20) break;
    }
    if (iters >= 1000 && (accepted < iters / 100 || refused < iters / 10 || cfg_ok == 0 || cfg_bad == 0)) {
        failures++;
        printf("FAIL: mutants accepted %ld, refused %ld, configs accepted %ld, refused %ld: the mutations are "
               "not exploring\n", accepted, refused, cfg_ok, cfg_bad);
    }
    printf("fuzz: %ld iterations: safetensors accepted %ld, refused %ld; configs accepted %ld, refused %ld\n", iters,
           accepted, refused, cfg_ok, cfg_bad);
    if (failures) { printf("%d failure(s)\n", failures); return 1; }
    return 0;
}
