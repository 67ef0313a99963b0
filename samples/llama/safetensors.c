/* safetensors.c — the safetensors reader (mmap + checked header) and writer. See safetensors.h.

   The header is parsed with cJSON (Debian libcjson-dev), one entry at a time from NUL-terminated
   copies, so that the JSON parser never sees the mapping itself and cannot read past it, and a
   forged header costs what its bytes cost, not a tree of gigabytes. Every number from the header is
   checked (an integer, 0 <= x <= 2^53) before it takes part in any arithmetic, and products are
   computed with overflow checks. Not handled: big-endian hosts (the build is x86-64/aarch64 LE). */
#include "safetensors.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "file_errors.h"
#include "common/io_guard.h"
#include "common/utf8.h"

/* ---------------------------------------------------------------------------------------------- */
/* dtypes */

static const struct { const char *name; size_t size; } dtypes[ST_DTYPE_COUNT] = {
    [ST_BOOL] = {"BOOL", 1}, [ST_U8] = {"U8", 1},   [ST_I8] = {"I8", 1},     [ST_I16] = {"I16", 2},
    [ST_U16] = {"U16", 2},   [ST_F16] = {"F16", 2}, [ST_BF16] = {"BF16", 2}, [ST_I32] = {"I32", 4},
    [ST_U32] = {"U32", 4},   [ST_F32] = {"F32", 4}, [ST_F64] = {"F64", 8},   [ST_I64] = {"I64", 8},
    [ST_U64] = {"U64", 8},
};

const char *safetensors_dtype_name(SafeTensorsDtype d) {
    return (unsigned)d < ST_DTYPE_COUNT ? dtypes[d].name : "?";
}
size_t safetensors_dtype_size(SafeTensorsDtype d) { return (unsigned)d < ST_DTYPE_COUNT ? dtypes[d].size : 0; }
int safetensors_dtype_from_name(const char *name) {
    for (int i = 0; i < ST_DTYPE_COUNT; i++)
        if (strcmp(name, dtypes[i].name) == 0) return i;
    return -1;
}

/* ---------------------------------------------------------------------------------------------- */
/* scalar conversions */

float safetensors_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t safetensors_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* NaN stays a quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);                                         /* round to nearest even */
    return (uint16_t)(u >> 16);
}

float safetensors_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0) {
        float v = ldexpf((float)m, -24); /* zero or subnormal */
        return sign ? -v : v;
    }
    if (e == 31) u = sign | 0x7f800000u | (m << 13);
    else u = sign | ((e + 112u) << 23) | (m << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t safetensors_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0)); /* inf, NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (a < 0x38800000u) {                                   /* below 2^-14: a half subnormal */
        if (a <= 0x33000000u) return (uint16_t)sign;         /* <= 2^-25 rounds to zero (a tie goes even) */
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126u - e;
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = (a - 0x38000000u) >> 13, rem = a & 0x1fffu; /* rebias the exponent 127 -> 15 */
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;
    return (uint16_t)(sign | r);
}

/* ---------------------------------------------------------------------------------------------- */
/* reading */



#define MAX_EXACT 9007199254740992.0 /* 2^53: doubles are exact integers up to here */

static int json_u64(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return 0;
    double d = j->valuedouble;
    if (!(d >= 0 && d <= MAX_EXACT) || d != floor(d)) return 0;
    *out = (uint64_t)d;
    return 1;
}

static int cmp_str_ptr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int cmp_begin(const void *a, const void *b) {
    const SafeTensor *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static void free_parsed(SafeTensors *st) {
    for (int i = 0; i < st->n; i++) free(st->tensors[i].name);
    for (int i = 0; i < st->n_meta; i++) { free(st->meta_keys[i]); free(st->meta_values[i]); }
    free(st->tensors);
    free(st->by_name);
    free(st->meta_keys);
    free(st->meta_values);
    st->tensors = NULL; st->by_name = NULL; st->meta_keys = st->meta_values = NULL;
    st->n = st->n_meta = 0;
}

/* One tensor entry of the header: {"dtype": .., "shape": [..], "data_offsets": [b, e]}. */
static int parse_entry(const cJSON *e, SafeTensor *t, const char *label, char *err, size_t errlen) {
    Shown shown = show(t->name);
    const char *nm = shown.s;
    if (!cJSON_IsObject(e)) return fail(err, errlen, "%s: tensor '%s': header entry is not an object", label, nm);
    /* A field given twice: cJSON would take the first, Python's json the last, the reference parser
       (serde) refuses it. Two readers must never see two different tensors: refuse it too. */
    for (const cJSON *a = e->child; a; a = a->next)
        for (const cJSON *b = a->next; b; b = b->next)
            if (a->string && b->string && strcmp(a->string, b->string) == 0)
                return fail(err, errlen, "%s: tensor '%s': field \"%s\" appears twice in its header entry", label, nm,
                            show(a->string).s);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt)) return fail(err, errlen, "%s: tensor '%s': missing \"dtype\"", label, nm);
    int d = safetensors_dtype_from_name(dt->valuestring);
    if (d < 0)
        return fail(err, errlen, "%s: tensor '%s': unknown or unsupported dtype \"%s\"", label, nm,
                    show(dt->valuestring).s);
    t->dtype = (SafeTensorsDtype)d;
    if (!cJSON_IsArray(sh)) return fail(err, errlen, "%s: tensor '%s': missing \"shape\" array", label, nm);
    int nd = cJSON_GetArraySize(sh);
    if (nd > SAFETENSORS_MAX_DIMS)
        return fail(err, errlen, "%s: tensor '%s': %d dimensions (at most %d supported)", label, nm, nd,
                    SAFETENSORS_MAX_DIMS);
    t->ndim = nd;
    size_t numel = 1;
    int k = 0;
    const cJSON *dim;
    cJSON_ArrayForEach(dim, sh) {
        uint64_t v;
        if (!json_u64(dim, &v))
            return fail(err, errlen, "%s: tensor '%s': shape[%d] is not a non-negative integer", label, nm, k);
        t->shape[k++] = (int64_t)v;
        if (__builtin_mul_overflow(numel, (size_t)v, &numel))
            return fail(err, errlen, "%s: tensor '%s': shape overflows", label, nm);
    }
    t->numel = numel;
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || !json_u64(cJSON_GetArrayItem(off, 0), &t->begin) ||
        !json_u64(cJSON_GetArrayItem(off, 1), &t->end))
        return fail(err, errlen, "%s: tensor '%s': \"data_offsets\" must be two non-negative integers", label, nm);
    if (t->end < t->begin)
        return fail(err, errlen, "%s: tensor '%s': data_offsets [%llu, %llu] end before begin", label, nm,
                    (unsigned long long)t->begin, (unsigned long long)t->end);
    size_t want;
    if (__builtin_mul_overflow(numel, dtypes[d].size, &want))
        return fail(err, errlen, "%s: tensor '%s': shape x dtype size overflows", label, nm);
    if (want != t->end - t->begin)
        return fail(err, errlen, "%s: tensor '%s': data_offsets cover %llu bytes but %zu %s elements need %zu",
                    label, nm, (unsigned long long)(t->end - t->begin), numel, dtypes[d].name, want);
    t->nbytes = want;
    return 0;
}

/* ---- the header, one entry at a time ----
   cJSON builds a tree of ~100 bytes per value before anything can be checked, so a forged 100 MB
   header of one huge shape cost gigabytes. Instead a linear pre-scan (no allocation) walks the
   top-level object and finds each entry's key and value, counting the value's elements; each value
   is then parsed by cJSON alone, from a copy, and only if it is the size a real entry can be. Every
   byte still goes through cJSON, so what is valid JSON does not change. */

typedef struct { const char *t; size_t n, i; } Scan;

static void scan_ws(Scan *s) {
    while (s->i < s->n && (s->t[s->i] == ' ' || s->t[s->i] == '\t' || s->t[s->i] == '\n' || s->t[s->i] == '\r')) s->i++;
}
static int scan_string(Scan *s) {   /* at '"': to just past the closing quote; -1 if there is none */
    for (s->i++; s->i < s->n;) {
        char c = s->t[s->i++];
        if (c == '\\') s->i++;
        else if (c == '"') return 0;
    }
    return -1;
}
/* One value, whatever it holds; *values: its elements (an upper bound of the nodes cJSON makes). */
static int scan_value(Scan *s, size_t *values) {
    if (s->i >= s->n) return -1;
    char c = s->t[s->i];
    *values = 1;
    if (c == '"') return scan_string(s);
    if (c == '{' || c == '[') {
        size_t depth = 0;
        while (s->i < s->n) {
            c = s->t[s->i];
            if (c == '"') { if (scan_string(s)) return -1; continue; }
            if (c == '{' || c == '[') depth++;
            else if (c == '}' || c == ']') { if (--depth == 0) { s->i++; return 0; } }
            if (c == ',' || c == ':' || c == '{' || c == '[') ++*values;
            s->i++;
        }
        return -1;
    }
    size_t from = s->i;
    while (s->i < s->n && !strchr(",}] \t\n\r", s->t[s->i])) s->i++;
    return s->i > from ? 0 : -1;
}

/* Every number in an array of a tensor entry (shape, data_offsets) written as an integer: "64.0" and
   "6.4e1" are doubles that cJSON reads as 64, but no size (the reference implementation reads them
   as usize and refuses them). t[0..n) is the entry's text, whose strings the pre-scan has already
   found closed. 0, or -1 with the offending number's text in bad. */
static int entry_numbers_plain(const char *t, size_t n, char *bad, size_t badlen) {
    int depth = 0;
    for (size_t i = 0; i < n;) {
        char c = t[i];
        if (c == '"') {   /* skip a string */
            for (i++; i < n && t[i] != '"'; i++) if (t[i] == '\\') i++;
            i++;
            continue;
        }
        if (c == '{' || c == '[') depth++;
        else if (c == '}' || c == ']') depth--;
        else if (depth >= 2 && (c == '-' || (c >= '0' && c <= '9'))) {
            size_t j = i;
            while (j < n && !strchr(",]} \t\n\r", t[j])) j++;
            for (size_t k = i; k < j; k++)   /* (a sign is left to the range check's message) */
                if (t[k] == '.' || t[k] == 'e' || t[k] == 'E') {
                    snprintf(bad, badlen, "%.*s", (int)(j - i > 32 ? 32 : j - i), t + i);
                    return -1;
                }
            i = j;
            continue;
        }
        i++;
    }
    return 0;
}

/* cJSON on a copy of t[0..n) (NUL-terminated: the parser never reads the mapping); *at: where it
   stopped, relative to t. */
static cJSON *parse_piece(const char *t, size_t n, char **buf, size_t *cap, long *at) {
    if (n + 1 > *cap) {
        size_t nc = *cap ? *cap : 256;
        while (nc < n + 1) nc *= 2;
        char *b = realloc(*buf, nc);
        if (!b) { *at = -1; return NULL; }
        *buf = b; *cap = nc;
    }
    memcpy(*buf, t, n);
    (*buf)[n] = 0;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(*buf, n + 1, &end, 1);
    *at = end ? (long)(end - *buf) : -1;
    return j;
}

/* Entries a real header needs: a tensor's dtype, at most 8 dimensions and 2 offsets are 15 elements
   in under 1 KB; metadata is string pairs. Past these a header is forged (or not a header). */
enum { TENSOR_MAX_VALUES = 64, TENSOR_MAX_BYTES = 64 << 10, METADATA_MAX_VALUES = 1 << 17 };

/* The 8-byte length and what a header must be before it is parsed: within the file and the limit,
   an object, no NUL byte, valid UTF-8. 0 with *hlen, or -1 after the error. */
static int check_header(const unsigned char *p, size_t file_bytes, const char *label, uint64_t *hlen, char *err,
                        size_t errlen) {
    if (file_bytes < 8)
        return fail(err, errlen, "%s: truncated: %zu bytes, not even the 8-byte header length", label, file_bytes);
    uint64_t h = 0;
    for (int i = 7; i >= 0; i--) h = h << 8 | p[i];
    if (h > SAFETENSORS_MAX_HEADER)
        return fail(err, errlen, "%s: header length %llu exceeds the 100 MB limit (not a safetensors file?)", label,
                    (unsigned long long)h);
    if (h > file_bytes - 8)
        return fail(err, errlen, "%s: truncated: header of %llu bytes but only %zu bytes follow the length", label,
                    (unsigned long long)h, file_bytes - 8);
    if (h < 2 || p[8] != '{') return fail(err, errlen, "%s: header does not start with '{'", label);
    if (memchr(p + 8, 0, h)) return fail(err, errlen, "%s: header contains a NUL byte", label);
    size_t bad_at;
    if (!utf8_valid(p + 8, (size_t)h, &bad_at))   /* the reference refuses it (from_utf8) */
        return fail(err, errlen, "%s: header is not valid UTF-8 (byte 0x%02x at header byte %zu)", label,
                    p[8 + bad_at], bad_at);
    *hlen = h;
    return 0;
}

/* __metadata__: string pairs, each key once (readers would disagree on a repeated key's value, as on a
   tensor's field). 0, or -1 after the error. */
static int store_metadata(SafeTensors *st, const cJSON *val, const char *label, char *err, size_t errlen) {
    if (!cJSON_IsObject(val)) return fail(err, errlen, "%s: __metadata__ is not an object", label);
    int nm = cJSON_GetArraySize(val);
    st->meta_keys = calloc((size_t)nm + 1, sizeof(char *));
    st->meta_values = calloc((size_t)nm + 1, sizeof(char *));
    if (!st->meta_keys || !st->meta_values) return fail(err, errlen, "%s: out of memory", label);
    const cJSON *m;
    cJSON_ArrayForEach(m, val) {
        if (!cJSON_IsString(m) || !m->string)
            return fail(err, errlen, "%s: __metadata__ value of '%s' is not a string", label, show(m->string ? m->string : "?").s);
        st->meta_keys[st->n_meta] = strdup(m->string);
        st->meta_values[st->n_meta] = strdup(m->valuestring);
        st->n_meta++;
        if (!st->meta_keys[st->n_meta - 1] || !st->meta_values[st->n_meta - 1]) return fail(err, errlen, "%s: out of memory", label);
    }
    char **keys = malloc(((size_t)st->n_meta + 1) * sizeof *keys);
    if (!keys) return fail(err, errlen, "%s: out of memory", label);
    memcpy(keys, st->meta_keys, (size_t)st->n_meta * sizeof *keys);
    qsort(keys, (size_t)st->n_meta, sizeof *keys, cmp_str_ptr);
    for (int i = 1; i < st->n_meta; i++)
        if (strcmp(keys[i - 1], keys[i]) == 0) {
            fail(err, errlen, "%s: __metadata__ key '%s' appears twice", label, show(keys[i]).s);
            free(keys);
            return -1;
        }
    free(keys);
    return 0;
}

/* Tensor `name` from its header entry val, appended to st->tensors (*cap: their room). 0, or -1 after the error. */
static int add_tensor(SafeTensors *st, int *cap, const char *name, const cJSON *val, const char *label, char *err,
                      size_t errlen) {
    if (st->n == *cap) {
        int nc = *cap ? 2 * *cap : 64;
        SafeTensor *t = realloc(st->tensors, (size_t)nc * sizeof *t);
        if (!t) return fail(err, errlen, "%s: out of memory", label);
        st->tensors = t; *cap = nc;
    }
    SafeTensor *t = &st->tensors[st->n];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    if (!t->name) return fail(err, errlen, "%s: out of memory", label);
    st->n++;
    return parse_entry(val, t, label, err, errlen);
}

static int cmp_name_idx(const void *a, const void *b, void *arg);

/* Names: sorted (an index for safetensors_find), and unique; the ranges, sorted, tile [0, data_bytes)
   exactly: no hole, no overlap, nothing past the end. Each tensor's data pointer set. 0, or -1 after the error. */
static int index_tensors(SafeTensors *st, const unsigned char *data, size_t data_bytes, const char *label, char *err,
                         size_t errlen) {
    if (st->n) qsort(st->tensors, (size_t)st->n, sizeof *st->tensors, cmp_begin);
    st->by_name = malloc(((size_t)st->n + 1) * sizeof *st->by_name);
    if (!st->by_name) return fail(err, errlen, "%s: out of memory", label);
    for (int i = 0; i < st->n; i++) st->by_name[i] = i;
    if (st->n) qsort_r(st->by_name, (size_t)st->n, sizeof *st->by_name, cmp_name_idx, st);
    for (int i = 1; i < st->n; i++)
        if (strcmp(st->tensors[st->by_name[i - 1]].name, st->tensors[st->by_name[i]].name) == 0)
            return fail(err, errlen, "%s: tensor '%s' appears twice in the header", label, show(st->tensors[st->by_name[i]].name).s);
    uint64_t expect = 0;
    for (int i = 0; i < st->n; i++) {
        SafeTensor *t = &st->tensors[i];
        if (t->begin < expect)
            return fail(err, errlen, "%s: tensor '%s': data_offsets [%llu, %llu] overlap the previous tensor's data",
                        label, show(t->name).s, (unsigned long long)t->begin, (unsigned long long)t->end);
        if (t->begin > expect)
            return fail(err, errlen, "%s: tensor '%s': data_offsets [%llu, %llu] leave a hole after byte %llu", label,
                        show(t->name).s, (unsigned long long)t->begin, (unsigned long long)t->end,
                        (unsigned long long)expect);
        if (t->end > data_bytes)
            return fail(err, errlen, "%s: tensor '%s': data_offsets [%llu, %llu] run past the end of the file "
                        "(%zu data bytes): truncated?", label, show(t->name).s, (unsigned long long)t->begin,
                        (unsigned long long)t->end, data_bytes);
        t->data = data + t->begin;
        expect = t->end;
    }
    if (expect != data_bytes)
        return fail(err, errlen, "%s: %llu bytes after the last tensor's data are not covered by any tensor", label,
                    (unsigned long long)(data_bytes - expect));
    return 0;
}

int safetensors_parse(SafeTensors *st, const void *file, size_t file_bytes, const char *label, char *err,
                      size_t errlen) {
    const unsigned char *p = file;
    ShownPath shown_label = show_path(label);   /* a shard's path holds a name from the index file */
    label = shown_label.s;
    memset(st, 0, sizeof *st);
    uint64_t hlen = 0;
    if (check_header(p, file_bytes, label, &hlen, err, errlen)) return -1;
    size_t data_bytes = file_bytes - 8 - hlen;
    const unsigned char *data = p + 8 + hlen;

    Scan sc = { (const char *)p + 8, (size_t)hlen, 1 };
    char *buf = NULL;
    size_t buf_cap = 0;
    int rc = -1, cap_tensors = 0, seen_meta = 0;
    cJSON *key = NULL, *val = NULL;
    long at = 0;
    for (int first = 1;; first = 0) {   /* "key": value, ... } */
        scan_ws(&sc);
        if (first && sc.i < sc.n && sc.t[sc.i] == '}') { sc.i++; break; }
        size_t k0 = sc.i, values;
        if (sc.i >= sc.n || sc.t[sc.i] != '"' || scan_string(&sc)) { at = (long)k0; goto bad_json; }
        size_t k1 = sc.i;
        scan_ws(&sc);
        if (sc.i >= sc.n || sc.t[sc.i] != ':') { at = (long)sc.i; goto bad_json; }
        sc.i++;
        scan_ws(&sc);
        size_t v0 = sc.i;
        if (scan_value(&sc, &values)) { at = (long)sc.i; goto bad_json; }
        size_t v1 = sc.i;
        key = parse_piece(sc.t + k0, k1 - k0, &buf, &buf_cap, &at);
        if (!cJSON_IsString(key)) { at += at >= 0 ? (long)k0 : 0; goto bad_json; }
        const char *name = key->valuestring;
        int is_meta = strcmp(name, "__metadata__") == 0;
        if (!is_meta && (values > TENSOR_MAX_VALUES || v1 - v0 > TENSOR_MAX_BYTES)) {
            fail(err, errlen, "%s: tensor '%s': header entry of %zu bytes and %zu elements: a tensor needs a dtype, at "
                 "most %d dimensions and 2 offsets (a forged header?)", label, show(name).s, v1 - v0, values,
                 SAFETENSORS_MAX_DIMS);
            goto done;
        }
        if (is_meta && values > METADATA_MAX_VALUES) {
            fail(err, errlen, "%s: __metadata__ has %zu elements, more than the %d a header can sensibly hold", label,
                 values, METADATA_MAX_VALUES);
            goto done;
        }
        val = parse_piece(sc.t + v0, v1 - v0, &buf, &buf_cap, &at);
        if (!val) { at += at >= 0 ? (long)v0 : 0; goto bad_json; }
        char bad[40];
        if (!is_meta && entry_numbers_plain(sc.t + v0, v1 - v0, bad, sizeof bad)) {
            fail(err, errlen, "%s: tensor '%s': %s in its shape or data_offsets is not an integer", label, show(name).s,
                 show(bad).s);
            goto done;
        }
        if (is_meta && seen_meta++) { fail(err, errlen, "%s: __metadata__ appears twice", label); goto done; }
        if (is_meta ? store_metadata(st, val, label, err, errlen) : add_tensor(st, &cap_tensors, name, val, label, err, errlen))
            goto done;
        cJSON_Delete(key); cJSON_Delete(val);
        key = val = NULL;
        scan_ws(&sc);
        if (sc.i < sc.n && sc.t[sc.i] == ',') { sc.i++; continue; }
        if (sc.i < sc.n && sc.t[sc.i] == '}') { sc.i++; break; }
        at = (long)sc.i;
        goto bad_json;
    }
    scan_ws(&sc);
    if (sc.i != sc.n) { at = (long)sc.i; goto bad_json; }
    rc = index_tensors(st, data, data_bytes, label, err, errlen);
    goto done;
bad_json:
    fail(err, errlen, "%s: header is not valid JSON (near byte %ld)", label, at);
done:
    cJSON_Delete(key); cJSON_Delete(val);
    free(buf);
    if (rc) free_parsed(st);
    return rc;
}

static int cmp_name_idx(const void *a, const void *b, void *arg) {
    const SafeTensors *st = arg;
    return strcmp(st->tensors[*(const int *)a].name, st->tensors[*(const int *)b].name);
}

int safetensors_open(SafeTensors *st, const char *path, char *err, size_t errlen) {
    memset(st, 0, sizeof *st);
    int fd;
    struct stat sb;
    if (io_open_input(path, &fd, &sb, err, errlen)) return -1;   /* a FIFO is refused, not waited on */
    size_t size = (size_t)sb.st_size;
    void *map = NULL;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            close(fd);
            return fail(err, errlen, "%s: mmap of %zu bytes failed: %s", show_path(path).s, size, strerror(errno));
        }
    }
    close(fd);
    static const unsigned char empty[1];
    if (safetensors_parse(st, map ? map : empty, size, path, err, errlen)) {
        if (map) munmap(map, size);
        memset(st, 0, sizeof *st);
        return -1;
    }
    st->map = map;
    st->map_bytes = size;
    st->path = strdup(path);
    if (!st->path) { safetensors_close(st); return fail(err, errlen, "%s: out of memory", path); }
    return 0;
}

void safetensors_close(SafeTensors *st) {
    free_parsed(st);
    if (st->map) munmap(st->map, st->map_bytes);
    free(st->path);
    memset(st, 0, sizeof *st);
}

const SafeTensor *safetensors_find(const SafeTensors *st, const char *name) {
    int lo = 0, hi = st->n;   /* binary search in the name order */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(st->tensors[st->by_name[mid]].name, name);
        if (c == 0) return &st->tensors[st->by_name[mid]];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const char *safetensors_meta(const SafeTensors *st, const char *key) {
    for (int i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], key) == 0) return st->meta_values[i];
    return NULL;
}

/* s (n elements of dtype d, maybe unaligned: read through memcpy) into dst; -1 for a dtype that is
   not a float type. */
static int convert(const unsigned char *s, SafeTensorsDtype d, float *dst, size_t n) {
    switch (d) {
    case ST_F32: if (n) memcpy(dst, s, n * 4); return 0;
    case ST_BF16:
        for (size_t i = 0; i < n; i++) { uint16_t h; memcpy(&h, s + 2 * i, 2); dst[i] = safetensors_bf16_to_f32(h); }
        return 0;
    case ST_F16:
        for (size_t i = 0; i < n; i++) { uint16_t h; memcpy(&h, s + 2 * i, 2); dst[i] = safetensors_f16_to_f32(h); }
        return 0;
    case ST_F64:   /* beyond fp32's range becomes +-inf, explicitly (the plain conversion is undefined there) */
        for (size_t i = 0; i < n; i++) {
            double v;
            memcpy(&v, s + 8 * i, 8);
            dst[i] = v > FLT_MAX ? INFINITY : v < -FLT_MAX ? -INFINITY : (float)v;
        }
        return 0;
    default:
        return -1;
    }
}

/* convert(), and 1 when some value is not a finite float (exponent bits all ones in the source; an
   F64 beyond fp32's range): checked in the same loop, so the check costs no memory traffic. F32 is
   copied 16 values at a time without a branch (GCC's -O2 vectorizes a loop of known length): as fast
   as memcpy. */
static uint32_t convert_checked(const unsigned char *s, SafeTensorsDtype d, float *dst, size_t n) {
    uint32_t bad = 0;
    size_t i = 0;
    switch (d) {
    case ST_F32:
        for (; i + 16 <= n; i += 16) {
            uint32_t u[16];
            memcpy(u, s + 4 * i, sizeof u);
            for (int j = 0; j < 16; j++) bad |= (u[j] & 0x7f800000u) == 0x7f800000u;
            memcpy(dst + i, u, sizeof u);
        }
        for (; i < n; i++) {
            uint32_t u;
            memcpy(&u, s + 4 * i, sizeof u);
            bad |= (u & 0x7f800000u) == 0x7f800000u;
            memcpy(dst + i, &u, sizeof u);
        }
        return bad;
    case ST_BF16:   /* a bfloat16 is the high half of its float */
        for (; i + 16 <= n; i += 16) {
            uint16_t h[16];
            uint32_t u[16];
            memcpy(h, s + 2 * i, sizeof h);
            for (int j = 0; j < 16; j++) {
                bad |= (h[j] & 0x7f80u) == 0x7f80u;
                u[j] = (uint32_t)h[j] << 16;
            }
            memcpy(dst + i, u, sizeof u);
        }
        for (; i < n; i++) {
            uint16_t h;
            memcpy(&h, s + 2 * i, 2);
            bad |= (h & 0x7f80u) == 0x7f80u;
            dst[i] = safetensors_bf16_to_f32(h);
        }
        return bad;
    case ST_F16:
        for (; i < n; i++) {
            uint16_t h;
            memcpy(&h, s + 2 * i, 2);
            bad |= (h & 0x7c00u) == 0x7c00u;
            dst[i] = safetensors_f16_to_f32(h);
        }
        return bad;
    default:   /* F64: the conversion says it (+-inf beyond the range) */
        convert(s, d, dst, n);
        for (; i < n; i++) bad |= !(fabsf(dst[i]) <= FLT_MAX);
        return bad;
    }
}

static int check_convertible(const SafeTensors *st, const SafeTensor *t, size_t n, char *err, size_t errlen) {
    ShownPath shown_label = show_path(st && st->path ? st->path : "safetensors");
    const char *label = shown_label.s;
    if (n != t->numel)
        return fail(err, errlen, "%s: tensor '%s': %zu elements, expected %zu", label, show(t->name).s, t->numel, n);
    if (!t->data && n) return fail(err, errlen, "%s: tensor '%s': no data", label, show(t->name).s);
    if (t->dtype != ST_F32 && t->dtype != ST_BF16 && t->dtype != ST_F16 && t->dtype != ST_F64)
        return fail(err, errlen, "%s: tensor '%s': dtype %s cannot be converted to floats (F32, BF16, F16 or F64 "
                    "expected)", label, show(t->name).s, safetensors_dtype_name(t->dtype));
    return 0;
}

int safetensors_to_f32(const SafeTensors *st, const SafeTensor *t, float *dst, size_t n, char *err, size_t errlen) {
    if (check_convertible(st, t, n, err, errlen)) return -1;
    return convert(t->data, t->dtype, dst, n);
}

int safetensors_to_f32_finite(const SafeTensors *st, const SafeTensor *t, float *dst, size_t n, size_t *first_bad,
                              char *err, size_t errlen) {
    *first_bad = n;
    if (check_convertible(st, t, n, err, errlen)) return -1;
    if (!convert_checked(t->data, t->dtype, dst, n)) return 0;
    size_t from = 0;   /* (rare: found again, by index) */
    for (size_t i = from; i < n; i++)
        if (!(fabsf(dst[i]) <= FLT_MAX)) { *first_bad = i; break; }
    return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* writing */

/* A growing string. */
typedef struct { char *s; size_t n, cap; int oom; } Buf;
static void buf_put(Buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) { b->oom = 1; return; }
        b->s = p; b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}
static void buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(Buf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0) buf_put(b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}
static void buf_json_string(Buf *b, const char *s) {
    buf_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { char e[2] = {'\\', (char)c}; buf_put(b, e, 2); }
        else if (c < 0x20) buf_printf(b, "\\u%04x", c);
        else buf_put(b, (const char *)&c, 1);
    }
    buf_put(b, "\"", 1);
}

int safetensors_write(const char *path, const SafeTensorsWrite *tensors, int n, const char *const *meta_keys,
                      const char *const *meta_values, int n_meta, char *err, size_t errlen) {
    return safetensors_write_fetched(path, tensors, n, meta_keys, meta_values, n_meta, NULL, NULL, err, errlen);
}

/* An unnamed file in path's folder (O_TMPFILE; NULL where the file system or kernel has none: the caller
   writes a named .tmp instead). */
static FILE *open_unnamed(const char *path, int *anon) {
#ifdef O_TMPFILE
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if ((size_t)(slash - path) < sizeof dir) snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    else return NULL;
    int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "wb");
    if (!f) { close(fd); return NULL; }
    *anon = 1;
    return f;
#else
    (void)path; (void)anon;
    return NULL;
#endif
}

/* The whole unnamed file given the name tmp (renamed over the path after): 1, or 0 (errno set). */
static int name_unnamed(FILE *f, const char *tmp) {
    if (fflush(f) != 0) return 0;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fileno(f));
    unlink(tmp);   /* (a stale one from an older writer) */
    return linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0;
}

int safetensors_write_fetched(const char *path, const SafeTensorsWrite *tensors, int n, const char *const *meta_keys,
                              const char *const *meta_values, int n_meta, int (*fetch)(void *user, int i, const float **data),
                              void *user, char *err, size_t errlen) {
    Buf h = {0};
    uint64_t off = 0;
    buf_put(&h, "{", 1);
    if (n_meta > 0) {
        buf_put(&h, "\"__metadata__\":{", 16);
        for (int i = 0; i < n_meta; i++) {
            if (i) buf_put(&h, ",", 1);
            buf_json_string(&h, meta_keys[i]);
            buf_put(&h, ":", 1);
            buf_json_string(&h, meta_values[i]);
        }
        buf_put(&h, "}", 1);
    }
    for (int i = 0; i < n; i++) {
        const SafeTensorsWrite *t = &tensors[i];
        if (t->dtype != ST_F32 && t->dtype != ST_BF16 && t->dtype != ST_F16) {
            free(h.s);
            return fail(err, errlen, "%s: tensor '%s': can only write F32, BF16 or F16", path, t->name);
        }
        if (t->ndim < 0 || t->ndim > SAFETENSORS_MAX_DIMS) {
            free(h.s);
            return fail(err, errlen, "%s: tensor '%s': bad rank %d", path, t->name, t->ndim);
        }
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= (uint64_t)t->shape[d];
        uint64_t bytes = numel * safetensors_dtype_size(t->dtype);
        if (n_meta > 0 || i) buf_put(&h, ",", 1);
        buf_json_string(&h, t->name);
        buf_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", safetensors_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++) buf_printf(&h, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        buf_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off, (unsigned long long)(off + bytes));
        off += bytes;
    }
    buf_put(&h, "}", 1);
    while (!h.oom && h.n % 8) buf_put(&h, " ", 1); /* pad so that the data starts 8-byte aligned */
    if (h.oom) { free(h.s); return fail(err, errlen, "%s: out of memory building the header", path); }

    char *tmp = malloc(strlen(path) + 8);
    if (!tmp) { free(h.s); return fail(err, errlen, "%s: out of memory", path); }
    sprintf(tmp, "%s.tmp", path); /* written aside, then renamed: a reader never sees half a file */
    /* and where the file system allows, written with no name at all until it is whole (O_TMPFILE, named by
       linkat at the end): a writer killed mid-write (an MPI job ended by a dead rank, --save's gathers)
       leaves no half file behind, not even the .tmp */
    int anon = 0;
    FILE *f = open_unnamed(path, &anon);
    if (!f) f = fopen(tmp, "wb");
    if (!f) {
        fail(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
        free(h.s); free(tmp);
        return -1;
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
    int ok = fwrite(len8, 1, 8, f) == 8 && fwrite(h.s, 1, h.n, f) == h.n;
    free(h.s);
    enum { CHUNK = 1 << 16 };
    static_assert(CHUNK % 2 == 0, "chunk holds whole elements");
    uint16_t *stage = malloc(CHUNK * sizeof *stage);
    ok = ok && stage;
    int unfetched = -1;
    for (int i = 0; ok && i < n; i++) {
        const SafeTensorsWrite *t = &tensors[i];
        size_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= (size_t)t->shape[d];
        const float *data = t->data;
        if (!data && (!fetch || fetch(user, i, &data) != 0 || !data)) { ok = 0; unfetched = i; break; }
        if (t->dtype == ST_F32) { ok = numel == 0 || fwrite(data, 4, numel, f) == numel; continue; }
        for (size_t s = 0; ok && s < numel; s += CHUNK) {
            size_t k = numel - s < CHUNK ? numel - s : CHUNK;
            for (size_t j = 0; j < k; j++)
                stage[j] = t->dtype == ST_BF16 ? safetensors_f32_to_bf16(data[s + j])
                                               : safetensors_f32_to_f16(data[s + j]);
            ok = fwrite(stage, 2, k, f) == k;
        }
    }
    free(stage);
    if (ok && anon) ok = name_unnamed(f, tmp);
    if (fclose(f) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        if (unfetched >= 0) fail(err, errlen, "%s: tensor '%s' could not be fetched: nothing written", path, tensors[unfetched].name);
        else fail(err, errlen, "%s: write failed: %s", path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}
