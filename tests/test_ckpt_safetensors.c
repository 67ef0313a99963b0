/* test_ckpt_safetensors.c — the safetensors reader and writer (samples/llama/safetensors.c).

   Checks: F16/BF16 conversions on known bit patterns (ties to even, subnormals, overflow to inf, NaN)
   and all 65536 halves round-trip; the writer's exact layout (little-endian length, header padded
   with spaces to 8 bytes, offsets contiguous, data bytes as expected) and a read-back of F32/BF16/F16
   tensors and metadata; then a table of corrupted files, each rejected with a message naming the
   file and, where there is one, the tensor: every truncation of a valid file, a header length past
   the file or over 100 MB, a header not starting with '{', invalid JSON, a NUL in the header, offsets
   past the end, overlapping tensors, a hole, a size that does not match shape x dtype, an unknown
   dtype, a duplicate name, bad shapes (also 64.0 and 8E0, which the reference refuses), a header that
   is not UTF-8, trailing bytes, a non-string metadata value, a missing file.
   Every corrupted image is parsed from a buffer of exactly its size, so ASan flags any over-read.
   A forged 20 MB header (one shape of 10^7 dimensions) is refused without the memory a JSON tree of
   it would take (cJSON's tree cost gigabytes at 100 MB), and a header of 200000 tensors is looked up
   by name in log time. safetensors_to_f32_finite finds the first NaN/inf/F64-beyond-fp32 at every
   position its passes treat apart, for F32, BF16, F16 and F64, writing safetensors_to_f32's floats. */
#include "llama/safetensors.h"

#include <math.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                               printf(__VA_ARGS__); printf("\n"); } } while (0)

static float bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static void test_conversions(void) {
    struct { float f; uint16_t h; } f16[] = {
        {1.0f, 0x3c00}, {-2.0f, 0xc000}, {65504.0f, 0x7bff}, {65519.0f, 0x7bff}, {65520.0f, 0x7c00},
        {1e9f, 0x7c00}, {0x1p-24f, 0x0001}, {0x1p-25f, 0x0000}, {0x1.8p-25f, 0x0001}, {0x1p-14f, 0x0400},
        {0x1.ffcp-15f, 0x0400} /* rounds up into the smallest normal */, {1.0f + 0x1p-11f, 0x3c00} /* tie, even */,
        {1.0f + 0x3p-11f, 0x3c02} /* tie, odd rounds up */, {0.0f, 0x0000}, {-0.0f, 0x8000},
        {0.333251953125f, 0x3555},
    };
    for (size_t i = 0; i < sizeof f16 / sizeof f16[0]; i++) {
        uint16_t h = safetensors_f32_to_f16(f16[i].f);
        CHECK(h == f16[i].h, "f32_to_f16(%a) = 0x%04x, want 0x%04x", f16[i].f, h, f16[i].h);
    }
    CHECK(safetensors_f16_to_f32(0x7bff) == 65504.0f, "f16 max");
    CHECK(safetensors_f16_to_f32(0x0001) == 0x1p-24f, "f16 smallest subnormal");
    CHECK(safetensors_f16_to_f32(0x83ff) == -0x1.ff8p-15f, "f16 largest negative subnormal");
    CHECK(isinf(safetensors_f16_to_f32(0xfc00)) && safetensors_f16_to_f32(0xfc00) < 0, "f16 -inf");
    CHECK(isnan(safetensors_f16_to_f32(0x7e00)), "f16 NaN");
    CHECK(isnan(safetensors_f16_to_f32(safetensors_f32_to_f16(NAN))), "f32 NaN -> f16 stays NaN");
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = safetensors_f16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        if (safetensors_f32_to_f16(f) != h) bad++;
    }
    CHECK(bad == 0, "%d halves do not round-trip through f32", bad);

    struct { uint32_t f; uint16_t h; } bf[] = {
        {0x3f800000u, 0x3f80}, {0x3f808000u, 0x3f80} /* tie, even stays */, {0x3f818000u, 0x3f82} /* tie, odd up */,
        {0x3f808001u, 0x3f81}, {0x7f7fffffu, 0x7f80} /* max float rounds to inf */, {0x80000000u, 0x8000},
        {0x00000001u, 0x0000}, {0xc0490fdbu, 0xc049} /* -pi */,
    };
    for (size_t i = 0; i < sizeof bf / sizeof bf[0]; i++) {
        uint16_t h = safetensors_f32_to_bf16(bits_f(bf[i].f));
        CHECK(h == bf[i].h, "f32_to_bf16(0x%08x) = 0x%04x, want 0x%04x", bf[i].f, h, bf[i].h);
    }
    CHECK(safetensors_bf16_to_f32(0x3f80) == 1.0f && safetensors_bf16_to_f32(0xc049) == bits_f(0xc0490000u),
          "bf16 -> f32");
    CHECK(isnan(safetensors_bf16_to_f32(safetensors_f32_to_bf16(bits_f(0x7f800001u)))),
          "a signalling NaN must not become inf in bf16");
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz + 1);
    *n = fread(b, 1, (size_t)sz, f);
    fclose(f);
    return b;
}

/* safetensors_write_fetched: tensors without data fetched one at a time (a sharded model gathered tensor
   by tensor) give the file safetensors_write gives; a fetch that fails writes nothing and names the tensor. */
typedef struct { const float *const *src; int calls, fail_at; float buf[8]; } FetchState;
static int fetch_one(void *user, int i, const float **data) {
    FetchState *f = user;
    f->calls++;
    if (i == f->fail_at) return -1;
    memcpy(f->buf, f->src[i], sizeof f->buf);   /* into one buffer, reused by the next fetch */
    *data = f->buf;
    return 0;
}

static void test_write_fetched(const char *dir) {
    char p1[512], p2[512], err[SAFETENSORS_ERR];
    snprintf(p1, sizeof p1, "%s/whole.safetensors", dir);
    snprintf(p2, sizeof p2, "%s/fetched.safetensors", dir);
    float a[8] = {1, -2, 3.5f, 0.1f, 65504, -0.0f, 7, 8}, b[8] = {1.0f, 1.0f + 0x1p-8f, 0.3f, 0, 0, 0, 0, 0};
    const float *src[2] = { a, b };
    SafeTensorsWrite w[2] = { {"x.weight", ST_F32, 2, {2, 4}, a}, {"y.weight", ST_BF16, 1, {3}, b} };
    const char *mk[] = {"format"}, *mv[] = {"pt"};
    CHECK(safetensors_write(p1, w, 2, mk, mv, 1, err, sizeof err) == 0, "write: %s", err);
    w[0].data = w[1].data = NULL;
    FetchState f = { src, 0, -1, {0} };
    CHECK(safetensors_write_fetched(p2, w, 2, mk, mv, 1, fetch_one, &f, err, sizeof err) == 0 && f.calls == 2,
          "write_fetched: %s (%d fetches)", err, f.calls);
    size_t n1 = 0, n2 = 0;
    unsigned char *i1 = slurp(p1, &n1), *i2 = slurp(p2, &n2);
    CHECK(i1 && i2 && n1 == n2 && memcmp(i1, i2, n1) == 0, "fetched file (%zu bytes) differs from the whole one (%zu)", n2, n1);
    free(i1); free(i2);
    unlink(p2);
    f = (FetchState){ src, 0, 1, {0} };
    CHECK(safetensors_write_fetched(p2, w, 2, mk, mv, 1, fetch_one, &f, err, sizeof err) == -1 && strstr(err, "'y.weight'") &&
          strstr(err, "nothing written") && access(p2, F_OK) != 0, "a failed fetch: err '%s', the file %s", err,
          access(p2, F_OK) == 0 ? "exists" : "absent");
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", p2);
    CHECK(access(tmp, F_OK) != 0, "a failed fetch left %s", tmp);
    unlink(p1);
}

static void test_write_read(const char *dir) {
    char path[512], err[SAFETENSORS_ERR];
    snprintf(path, sizeof path, "%s/t.safetensors", dir);
    float a[6] = {1, -2, 3.5f, 0.1f, 65504, -0.0f}, b[3] = {1.0f, 1.0f + 0x1p-8f, 0.3f}, c[2] = {0.333251953125f, -1};
    SafeTensorsWrite w[3] = {
        {"model.layers.0.self_attn.q_proj.weight", ST_F32, 2, {2, 3}, a},
        {"model.norm.weight", ST_BF16, 1, {3}, b},
        {"weird \"name\"\\", ST_F16, 2, {1, 2}, c},
    };
    const char *mk[] = {"format"}, *mv[] = {"pt"};
    CHECK(safetensors_write(path, w, 3, mk, mv, 1, err, sizeof err) == 0, "write: %s", err);
    size_t n = 0;
    unsigned char *img = slurp(path, &n);
    CHECK(img != NULL, "cannot read back %s", path);
    if (!img) return;
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | img[i];
    CHECK(hl % 8 == 0, "header length %llu is not a multiple of 8", (unsigned long long)hl);
    CHECK(n == 8 + hl + 24 + 6 + 4, "file is %zu bytes, want %llu", n, (unsigned long long)(8 + hl + 34));
    CHECK(img[8] == '{' && (img[8 + hl - 1] == ' ' || img[8 + hl - 1] == '}'), "header framing");
    const char *want_json = "{\"__metadata__\":{\"format\":\"pt\"},\"model.layers.0.self_attn.q_proj.weight\":"
                            "{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},\"model.norm.weight\":"
                            "{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[24,30]},\"weird \\\"name\\\"\\\\\":"
                            "{\"dtype\":\"F16\",\"shape\":[1,2],\"data_offsets\":[30,34]}}";
    CHECK(hl >= strlen(want_json) && memcmp(img + 8, want_json, strlen(want_json)) == 0,
          "header text differs:\n%.*s\nwant\n%s", (int)hl, (const char *)img + 8, want_json);
    const unsigned char *d = img + 8 + hl;
    float a0;
    memcpy(&a0, d + 8, 4);
    CHECK(a0 == 3.5f, "F32 data at offset 8 is %g", a0);
    CHECK(d[24] == 0x80 && d[25] == 0x3f && d[26] == 0x80 && d[27] == 0x3f, "BF16 bytes (1 and 1+2^-8 tie -> 1)");
    CHECK(d[30] == 0x55 && d[31] == 0x35 && d[32] == 0x00 && d[33] == 0xbc, "F16 bytes");
    free(img);

    SafeTensors st;
    CHECK(safetensors_open(&st, path, err, sizeof err) == 0, "open: %s", err);
    CHECK(st.n == 3, "%d tensors", st.n);
    CHECK(safetensors_meta(&st, "format") && strcmp(safetensors_meta(&st, "format"), "pt") == 0, "metadata");
    const SafeTensor *t = safetensors_find(&st, "model.norm.weight");
    float out[6];
    CHECK(t && t->dtype == ST_BF16 && t->ndim == 1 && t->shape[0] == 3 && t->begin == 24 && t->end == 30,
          "norm tensor entry");
    if (t && safetensors_to_f32(&st, t, out, 3, err, sizeof err) == 0)
        CHECK(out[0] == 1 && out[1] == 1 && out[2] == bits_f(0x3e9a0000u), "bf16 values %g %g %a", out[0], out[1], out[2]);
    t = safetensors_find(&st, "model.layers.0.self_attn.q_proj.weight");
    CHECK(t && safetensors_to_f32(&st, t, out, 6, err, sizeof err) == 0 && memcmp(out, a, sizeof a) == 0, "f32 values");
    CHECK(t && safetensors_to_f32(&st, t, out, 5, err, sizeof err) == -1 && strstr(err, "q_proj"),
          "a wrong element count is refused: %s", err);
    t = safetensors_find(&st, "weird \"name\"\\");
    CHECK(t && safetensors_to_f32(&st, t, out, 2, err, sizeof err) == 0 && out[0] == 0.333251953125f && out[1] == -1,
          "f16 values under an escaped name");
    CHECK(safetensors_find(&st, "nope") == NULL, "find of a missing name");
    safetensors_close(&st);
    unlink(path);
}

/* A valid image: two F32 tensors "a" [2] at [0,8) and "b" [1] at [8,12), header unpadded. */
static size_t image(unsigned char *out, const char *json, size_t data_bytes) {
    size_t hl = strlen(json);
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(out + 8, json, hl);
    for (size_t i = 0; i < data_bytes; i++) out[8 + hl + i] = (unsigned char)(i * 7);
    return 8 + hl + data_bytes;
}

/* Parses exactly n bytes from a private heap copy (ASan sees any over-read) and expects failure with
   every one of the given substrings in the message. */
static void expect_reject(const unsigned char *img, size_t n, const char *what, const char *sub1, const char *sub2) {
    unsigned char *copy = malloc(n ? n : 1);
    memcpy(copy, img, n);
    SafeTensors st;
    char err[SAFETENSORS_ERR] = "";
    int rc = safetensors_parse(&st, copy, n, "bad.safetensors", err, sizeof err);
    CHECK(rc == -1, "%s: accepted", what);
    if (rc == 0) safetensors_close(&st);
    CHECK(strstr(err, "bad.safetensors") != NULL, "%s: message does not name the file: %s", what, err);
    CHECK(!sub1 || strstr(err, sub1), "%s: message lacks '%s': %s", what, sub1, err);
    CHECK(!sub2 || strstr(err, sub2), "%s: message lacks '%s': %s", what, sub2, err);
    CHECK(strchr(err, '\n') == NULL, "%s: message is not one line", what);
    free(copy);
}

static void test_corrupt(const char *dir) {
    static unsigned char img[4096];
    const char *good = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}";
    size_t n = image(img, good, 12);
    SafeTensors st;
    char err[SAFETENSORS_ERR];
    CHECK(safetensors_parse(&st, img, n, "good", err, sizeof err) == 0, "the valid image is refused: %s", err);
    if (st.n == 2) {
        const SafeTensor *b = safetensors_find(&st, "b");
        CHECK(b && b->data == img + n - 4, "tensor b's data pointer");
        safetensors_close(&st);
    }
    for (size_t cut = 0; cut < n; cut++) {
        char what[64];
        snprintf(what, sizeof what, "truncated to %zu bytes", cut);
        expect_reject(img, cut, what, cut < 8 ? "truncated" : cut < 8 + strlen(good) ? "truncated" : "b", NULL);
    }
    /* Header length lies. */
    unsigned char big[16];
    memcpy(big, img, 16);
    big[4] = 0x10; /* 2^36 */
    expect_reject(big, 16, "header length 2^36", "100 MB", NULL);
    memcpy(big, img, 16);
    big[0] = 0xff; big[1] = 0xff; /* 65535 < 100 MB but past the file */
    expect_reject(big, 16, "header length past the file", "truncated", NULL);

    struct { const char *json; size_t data; const char *sub1, *sub2; } cases[] = {
        {"[\"a\"]", 0, "'{'", NULL},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8, "JSON", NULL},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} x", 8, "JSON", NULL},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8, "'a'", "past the end"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "'b'", "overlap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]}}", 16, "'b'", "hole"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "'a'", "hole"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "'a'", "12"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "'a'", "end before begin"},
        {"{\"a\":{\"dtype\":\"Q4_K\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "'a'", "Q4_K"},
        {"{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[8],\"data_offsets\":[0,8]}}", 8, "'a'", "dtype"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "'a'", "shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8, "'a'", "shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8, "'a'", "shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],\"data_offsets\":[0,8]}}", 8, "'a'", "overflow"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,-8]}}", 8, "'a'", "data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,9]}}", 8, "'a'", "data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,1e300]}}", 8, "'a'", "data_offsets"},
        {"{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "'a'", "dtype"},
        {"{\"a\":7}", 0, "'a'", "object"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12, "'a'", "twice"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 9, "1 bytes", NULL},
        {"{\"__metadata__\":{\"format\":7},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
         "format", "string"},
        {"{\"__metadata__\":{\"a\\nb\":7}}", 0, "'a?b'", "string"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", 8, "'a'", "dimensions"},
        /* numbers that cJSON reads as integers but the reference (usize) refuses (issue 27) */
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, "'a'", "2.0 in its shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8E0]}}", 8, "'a'", "8E0 in its shape or data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[64.0, 1],\"data_offsets\":[0,256]}}", 256, "'a'", "64.0"},
        /* a field given twice: cJSON takes the first, Python's json the last: two different tensors (issue 36) */
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"dtype\":\"I32\",\"data_offsets\":[0,8]}}", 8, "'w'",
         "field \"dtype\" appears twice"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "'w'",
         "field \"shape\" appears twice"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"data_offsets\":[0,8]}}", 8, "'w'",
         "field \"data_offsets\" appears twice"},
        {"{\"__metadata__\":{\"format\":\"pt\",\"format\":\"np\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
         8, "__metadata__ key 'format'", "twice"},
        /* a header that is not UTF-8 (a Latin-1 name; an overlong '/'; a surrogate), as the reference refuses */
        {"{\"caf\xe9\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "not valid UTF-8", "0xe9"},
        {"{\"a\xc0\xaf\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "not valid UTF-8", "0xc0"},
        {"{\"a\xed\xa0\x80\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "not valid UTF-8", "0xed"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t m = image(img, cases[i].json, cases[i].data);
        char what[64];
        snprintf(what, sizeof what, "case %zu", i);
        expect_reject(img, m, what, cases[i].sub1, cases[i].sub2);
    }
    /* The file's label (a shard's path, whose name came from an index file) is escaped too. */
    {
        size_t m0 = image(img, "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8);
        SafeTensors st0;
        char err0[SAFETENSORS_ERR] = "";
        CHECK(safetensors_parse(&st0, img, m0, "dir/shard-\x1b]0;t\x07.safetensors", err0, sizeof err0) == -1 &&
              strstr(err0, "dir/shard-?]0;t?.safetensors: tensor 'a'") && !strchr(err0, '\x1b') && !strchr(err0, '\x07'),
              "a label with ESC/BEL reaches the message raw: %s", err0);
    }
    /* A NUL inside the header. */
    size_t m = image(img, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}    ", 8);
    img[8 + 52] = 0;
    expect_reject(img, m, "NUL in header", "NUL", NULL);

    /* Zero-size tensors tile too, and an empty file with "{}" is valid. */
    m = image(img, "{\"z\":{\"dtype\":\"BF16\",\"shape\":[0,5],\"data_offsets\":[0,0]},"
                   "\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4);
    CHECK(safetensors_parse(&st, img, m, "zero", err, sizeof err) == 0, "a zero-size tensor is refused: %s", err);
    if (st.n == 2) {
        CHECK(safetensors_find(&st, "a")->numel == 1 && safetensors_find(&st, "z")->numel == 0, "scalar and empty");
        safetensors_close(&st);
    }
    /* Valid UTF-8 in a name, and a number of a field the reader does not use, are fine. */
    m = image(img, "{\"caf\xc3\xa9 \xf0\x9f\x98\x80\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1.5}}", 8);
    CHECK(safetensors_parse(&st, img, m, "utf8", err, sizeof err) == 0 && st.n == 1 &&
          safetensors_find(&st, "caf\xc3\xa9 \xf0\x9f\x98\x80"), "a UTF-8 name is refused: %s", err);
    safetensors_close(&st);
    m = image(img, "{}", 0);
    CHECK(safetensors_parse(&st, img, m, "empty", err, sizeof err) == 0 && st.n == 0, "\"{}\" is refused: %s", err);
    safetensors_close(&st);

    /* Through the file system: a missing file, an empty file, a truncated file on disk (mmap path). */
    char path[512];
    snprintf(path, sizeof path, "%s/missing.safetensors", dir);
    CHECK(safetensors_open(&st, path, err, sizeof err) == -1 && strstr(err, "missing.safetensors") &&
          strstr(err, "No such file"), "missing file: %s", err);
    snprintf(path, sizeof path, "%s/trunc.safetensors", dir);
    n = image(img, good, 12);
    FILE *f = fopen(path, "wb");
    fwrite(img, 1, n - 3, f);
    fclose(f);
    CHECK(safetensors_open(&st, path, err, sizeof err) == -1 && strstr(err, "trunc.safetensors") &&
          strstr(err, "'b'"), "truncated file on disk: %s", err);
    f = fopen(path, "wb");
    fclose(f);
    CHECK(safetensors_open(&st, path, err, sizeof err) == -1 && strstr(err, "truncated"), "empty file: %s", err);
    unlink(path);
    CHECK(safetensors_open(&st, dir, err, sizeof err) == -1 && strstr(err, "regular file"), "a directory: %s", err);
}

static long maxrss_kib(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_maxrss;
}

static void test_forged_header(void) {
    const size_t dims = 10 * 1000 * 1000;
    const char *head = "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4],\"shape\":[", *tail = "1]}}";
    size_t hl = strlen(head) + 2 * (dims - 1) + strlen(tail), k = 8;
    unsigned char *img = malloc(8 + hl + 4);
    if (!img) { CHECK(0, "out of memory for the forged header"); return; }
    for (int i = 0; i < 8; i++) img[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(img + k, head, strlen(head)); k += strlen(head);
    for (size_t i = 0; i + 1 < dims; i++) { img[k++] = '1'; img[k++] = ','; }
    memcpy(img + k, tail, strlen(tail)); k += strlen(tail);
    memset(img + k, 0, 4);
    long before = maxrss_kib();
    SafeTensors st;
    char err[SAFETENSORS_ERR] = "";
    int rc = safetensors_parse(&st, img, k + 4, "forged.safetensors", err, sizeof err);
    long grew = maxrss_kib() - before;
    CHECK(rc == -1 && strstr(err, "tensor 'a'") && strstr(err, "a tensor needs a dtype, at most 8 dimensions"),
          "a 20 MB shape: rc %d, %s", rc, err);
    CHECK(grew < 64 * 1024, "refusing a 20 MB header took %ld MiB more memory (the header itself is 20 MB)", grew / 1024);
    free(img);

    /* 200000 zero-size tensors: every one found by name, in log time. */
    const int n = 200000;
    char *json = malloc((size_t)n * 64 + 16);
    size_t j = (size_t)sprintf(json, "{");
    for (int i = 0; i < n; i++)
        j += (size_t)sprintf(json + j, "%s\"t%06d\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}", i ? "," : "", i);
    sprintf(json + j, "}");
    img = malloc(8 + strlen(json));
    size_t m = image(img, json, 0);
    rc = safetensors_parse(&st, img, m, "many.safetensors", err, sizeof err);
    CHECK(rc == 0 && st.n == n, "200000 tensors: %s", err);
    int found = 0;
    for (int i = 0; rc == 0 && i < n; i += 997) {
        char name[16];
        snprintf(name, sizeof name, "t%06d", i);
        const SafeTensor *t = safetensors_find(&st, name);
        found += t && strcmp(t->name, name) == 0;
    }
    CHECK(rc != 0 || (found == (n + 996) / 997 && !safetensors_find(&st, "t") && !safetensors_find(&st, "t999999")),
          "lookups by name: %d found", found);
    if (rc == 0) safetensors_close(&st);
    free(img); free(json);
}

/* safetensors_to_f32_finite: the first element that is NaN, inf or (F64) beyond fp32's range, at
   every position that matters to its passes (the first, inside and at the edges of a 16-value group,
   at and across the 4096-value blocks, in the tail), for every float dtype; the floats it writes are
   safetensors_to_f32's; none: n. */
static void test_finite(void) {
    enum { N = 10000 };
    static const size_t at[] = { 0, 7, 15, 16, 4095, 4096, 8191, 9983, 9984, 9999 };
    static const SafeTensorsDtype dts[] = { ST_F32, ST_BF16, ST_F16, ST_F64 };
    static unsigned char raw[8 * N];
    static float a[N], b[N];
    char err[SAFETENSORS_ERR];
    for (size_t d = 0; d < 4; d++) {
        const size_t es = safetensors_dtype_size(dts[d]);
        for (size_t k = 0; k <= sizeof at / sizeof at[0]; k++) {
            for (size_t i = 0; i < N; i++) {   /* finite values; the largest F64 that stays finite */
                float f = (float)((int)(i % 97) - 48) * 0.25f;
                double v = dts[d] == ST_F64 && i == 3 ? 3.4028234663852886e38 : f;
                if (dts[d] == ST_F32) memcpy(raw + 4 * i, &f, 4);
                else if (dts[d] == ST_F64) memcpy(raw + 8 * i, &v, 8);
                else { uint16_t h = dts[d] == ST_BF16 ? safetensors_f32_to_bf16(f) : safetensors_f32_to_f16(f); memcpy(raw + 2 * i, &h, 2); }
            }
            const size_t want = k < sizeof at / sizeof at[0] ? at[k] : N;
            for (size_t j = want; j < N; j += 1234) {   /* the first bad value at `want`, others after it */
                float f = j == want ? (k % 2 ? -INFINITY : NAN) : INFINITY;
                double v = j == want && k % 3 == 2 ? -1e300 : f;   /* an F64 beyond fp32's range */
                if (dts[d] == ST_F32) memcpy(raw + 4 * j, &f, 4);
                else if (dts[d] == ST_F64) memcpy(raw + 8 * j, &v, 8);
                else { uint16_t h = dts[d] == ST_BF16 ? safetensors_f32_to_bf16(f) : safetensors_f32_to_f16(f); memcpy(raw + 2 * j, &h, 2); }
            }
            SafeTensor t = { .name = "x", .dtype = dts[d], .ndim = 1, .shape = { N }, .numel = N, .nbytes = N * es, .data = raw };
            size_t bad = 0;
            int rc = safetensors_to_f32_finite(NULL, &t, a, N, &bad, err, sizeof err);
            CHECK(rc == 0 && bad == want, "%s: first non-finite at %zu, want %zu (%s)", safetensors_dtype_name(dts[d]), bad, want,
                  rc ? err : "");
            CHECK(safetensors_to_f32(NULL, &t, b, N, err, sizeof err) == 0 && memcmp(a, b, sizeof a) == 0,
                  "%s: the checked conversion wrote other floats", safetensors_dtype_name(dts[d]));
        }
    }
    SafeTensor t = { .name = "i", .dtype = ST_I32, .ndim = 1, .shape = { 4 }, .numel = 4, .nbytes = 16, .data = raw };
    size_t bad = 0;
    CHECK(safetensors_to_f32_finite(NULL, &t, a, 4, &bad, err, sizeof err) == -1 && strstr(err, "I32"), "I32 converted: %s", err);
}

int main(void) {
    char dir[] = "/tmp/test_ckpt_st_XXXXXX";
    if (!mkdtemp(dir)) { printf("FAIL: mkdtemp\n"); return 1; }
    test_conversions();
    test_write_read(dir);
    test_write_fetched(dir);
    test_corrupt(dir);
    test_forged_header();
    test_finite();
    rmdir(dir);
    if (failures) { printf("%d check(s) failed\n", failures); return 1; }
    printf("safetensors: conversions, writer layout, read-back and corrupted files OK\n");
    return 0;
}
