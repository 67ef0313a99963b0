/* safetensors.c — the safetensors reader (mmap + checked header) and writer. See safetensors.h.

   The header is parsed with cJSON (Debian libcjson-dev) from a NUL-terminated copy, so that the JSON
   parser never sees the mapping itself and cannot read past it. Every number from the header is
   checked (an integer, 0 <= x <= 2^53) before it takes part in any arithmetic, and products are
   computed with overflow checks. Not handled: big-endian hosts (the build is x86-64/aarch64 LE). */
#include "safetensors.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "file_errors.h"

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

static int cmp_begin(const void *a, const void *b) {
    const SafeTensor *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}
static int cmp_name_ptr(const void *a, const void *b) {
    return strcmp((*(const SafeTensor *const *)a)->name, (*(const SafeTensor *const *)b)->name);
}

static void free_parsed(SafeTensors *st) {
    for (int i = 0; i < st->n; i++) free(st->tensors[i].name);
    for (int i = 0; i < st->n_meta; i++) { free(st->meta_keys[i]); free(st->meta_values[i]); }
    free(st->tensors);
    free(st->meta_keys);
    free(st->meta_values);
    st->tensors = NULL; st->meta_keys = st->meta_values = NULL;
    st->n = st->n_meta = 0;
}

/* One tensor entry of the header: {"dtype": .., "shape": [..], "data_offsets": [b, e]}. */
static int parse_entry(const cJSON *e, SafeTensor *t, const char *label, char *err, size_t errlen) {
    Shown shown = show(t->name);
    const char *nm = shown.s;
    if (!cJSON_IsObject(e)) return fail(err, errlen, "%s: tensor '%s': header entry is not an object", label, nm);
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

int safetensors_parse(SafeTensors *st, const void *file, size_t file_bytes, const char *label, char *err,
                      size_t errlen) {
    const unsigned char *p = file;
    memset(st, 0, sizeof *st);
    if (file_bytes < 8)
        return fail(err, errlen, "%s: truncated: %zu bytes, not even the 8-byte header length", label, file_bytes);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | p[i];
    if (hlen > SAFETENSORS_MAX_HEADER)
        return fail(err, errlen, "%s: header length %llu exceeds the 100 MB limit (not a safetensors file?)", label,
                    (unsigned long long)hlen);
    if (hlen > file_bytes - 8)
        return fail(err, errlen, "%s: truncated: header of %llu bytes but only %zu bytes follow the length", label,
                    (unsigned long long)hlen, file_bytes - 8);
    if (hlen < 2 || p[8] != '{') return fail(err, errlen, "%s: header does not start with '{'", label);
    if (memchr(p + 8, 0, hlen)) return fail(err, errlen, "%s: header contains a NUL byte", label);
    size_t data_bytes = file_bytes - 8 - hlen;
    const unsigned char *data = p + 8 + hlen;

    char *text = malloc(hlen + 1); /* a NUL-terminated copy: the JSON parser never touches the mapping */
    if (!text) return fail(err, errlen, "%s: out of memory for a %llu-byte header", label, (unsigned long long)hlen);
    memcpy(text, p + 8, hlen);
    text[hlen] = 0;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, hlen + 1, &end, 1);
    if (!root) {
        long at = end ? (long)(end - text) : -1;
        free(text);
        return fail(err, errlen, "%s: header is not valid JSON (near byte %ld)", label, at);
    }
    free(text);
    if (!cJSON_IsObject(root)) { cJSON_Delete(root); return fail(err, errlen, "%s: header is not a JSON object", label); }

    int n_items = cJSON_GetArraySize(root), rc = -1;
    st->tensors = calloc((size_t)n_items + 1, sizeof *st->tensors);
    SafeTensor **byname = calloc((size_t)n_items + 1, sizeof *byname);
    if (!st->tensors || !byname) { fail(err, errlen, "%s: out of memory", label); goto done; }
    const cJSON *e;
    int seen_meta = 0;
    cJSON_ArrayForEach(e, root) {
        if (!e->string) { fail(err, errlen, "%s: header entry without a name", label); goto done; }
        if (strcmp(e->string, "__metadata__") == 0) {
            if (seen_meta++) { fail(err, errlen, "%s: __metadata__ appears twice", label); goto done; }
            if (!cJSON_IsObject(e)) { fail(err, errlen, "%s: __metadata__ is not an object", label); goto done; }
            int nm = cJSON_GetArraySize(e);
            st->meta_keys = calloc((size_t)nm + 1, sizeof(char *));
            st->meta_values = calloc((size_t)nm + 1, sizeof(char *));
            if (!st->meta_keys || !st->meta_values) { fail(err, errlen, "%s: out of memory", label); goto done; }
            const cJSON *m;
            cJSON_ArrayForEach(m, e) {
                if (!cJSON_IsString(m) || !m->string) {
                    fail(err, errlen, "%s: __metadata__ value of '%s' is not a string", label,
                         show(m->string ? m->string : "?").s);
                    goto done;
                }
                st->meta_keys[st->n_meta] = strdup(m->string);
                st->meta_values[st->n_meta] = strdup(m->valuestring);
                st->n_meta++;
                if (!st->meta_keys[st->n_meta - 1] || !st->meta_values[st->n_meta - 1]) {
                    fail(err, errlen, "%s: out of memory", label);
                    goto done;
                }
            }
            continue;
        }
        SafeTensor *t = &st->tensors[st->n];
        t->name = strdup(e->string);
        if (!t->name) { fail(err, errlen, "%s: out of memory", label); goto done; }
        st->n++;
        if (parse_entry(e, t, label, err, errlen)) goto done;
    }
    for (int i = 0; i < st->n; i++) byname[i] = &st->tensors[i];
    qsort(byname, (size_t)st->n, sizeof *byname, cmp_name_ptr);
    for (int i = 1; i < st->n; i++)
        if (strcmp(byname[i - 1]->name, byname[i]->name) == 0) {
            fail(err, errlen, "%s: tensor '%s' appears twice in the header", label, show(byname[i]->name).s);
            goto done;
        }
    /* The ranges, sorted, must tile [0, data_bytes) exactly: no hole, no overlap, nothing past the end. */
    qsort(st->tensors, (size_t)st->n, sizeof *st->tensors, cmp_begin);
    uint64_t expect = 0;
    for (int i = 0; i < st->n; i++) {
        SafeTensor *t = &st->tensors[i];
        if (t->begin != expect) {
            if (t->begin < expect)
                fail(err, errlen, "%s: tensor '%s': data_offsets [%llu, %llu] overlap the previous tensor's data",
                     label, show(t->name).s, (unsigned long long)t->begin, (unsigned long long)t->end);
            else
                fail(err, errlen, "%s: tensor '%s': data_offsets [%llu, %llu] leave a hole after byte %llu", label,
                     show(t->name).s, (unsigned long long)t->begin, (unsigned long long)t->end,
                     (unsigned long long)expect);
            goto done;
        }
        if (t->end > data_bytes) {
            fail(err, errlen, "%s: tensor '%s': data_offsets [%llu, %llu] run past the end of the file "
                 "(%zu data bytes): truncated?", label, show(t->name).s, (unsigned long long)t->begin,
                 (unsigned long long)t->end, data_bytes);
            goto done;
        }
        t->data = data + t->begin;
        expect = t->end;
    }
    if (expect != data_bytes) {
        fail(err, errlen, "%s: %llu bytes after the last tensor's data are not covered by any tensor", label,
             (unsigned long long)(data_bytes - expect));
        goto done;
    }
    rc = 0;
done:
    free(byname);
    cJSON_Delete(root);
    if (rc) free_parsed(st);
    return rc;
}

int safetensors_open(SafeTensors *st, const char *path, char *err, size_t errlen) {
    memset(st, 0, sizeof *st);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return fail(err, errlen, "%s: not a regular file", path);
    }
    size_t size = (size_t)sb.st_size;
    void *map = NULL;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            close(fd);
            return fail(err, errlen, "%s: mmap of %zu bytes failed: %s", path, size, strerror(errno));
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
    for (int i = 0; i < st->n; i++)
        if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
    return NULL;
}

const char *safetensors_meta(const SafeTensors *st, const char *key) {
    for (int i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], key) == 0) return st->meta_values[i];
    return NULL;
}

int safetensors_to_f32(const SafeTensors *st, const SafeTensor *t, float *dst, size_t n, char *err, size_t errlen) {
    const char *label = st && st->path ? st->path : "safetensors";
    if (n != t->numel)
        return fail(err, errlen, "%s: tensor '%s': %zu elements, expected %zu", label, show(t->name).s, t->numel, n);
    if (!t->data && n) return fail(err, errlen, "%s: tensor '%s': no data", label, show(t->name).s);
    const unsigned char *s = t->data; /* may be unaligned: read through memcpy */
    switch (t->dtype) {
    case ST_F32: if (n) memcpy(dst, s, n * 4); return 0;
    case ST_BF16:
        for (size_t i = 0; i < n; i++) { uint16_t h; memcpy(&h, s + 2 * i, 2); dst[i] = safetensors_bf16_to_f32(h); }
        return 0;
    case ST_F16:
        for (size_t i = 0; i < n; i++) { uint16_t h; memcpy(&h, s + 2 * i, 2); dst[i] = safetensors_f16_to_f32(h); }
        return 0;
    case ST_F64:
        for (size_t i = 0; i < n; i++) { double d; memcpy(&d, s + 8 * i, 8); dst[i] = (float)d; }
        return 0;
    default:
        return fail(err, errlen, "%s: tensor '%s': dtype %s cannot be converted to floats (F32, BF16, F16 or F64 "
                    "expected)", label, show(t->name).s, safetensors_dtype_name(t->dtype));
    }
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
    FILE *f = fopen(tmp, "wb");
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
    for (int i = 0; ok && i < n; i++) {
        const SafeTensorsWrite *t = &tensors[i];
        size_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= (size_t)t->shape[d];
        if (t->dtype == ST_F32) { ok = numel == 0 || fwrite(t->data, 4, numel, f) == numel; continue; }
        for (size_t s = 0; ok && s < numel; s += CHUNK) {
            size_t k = numel - s < CHUNK ? numel - s : CHUNK;
            for (size_t j = 0; j < k; j++)
                stage[j] = t->dtype == ST_BF16 ? safetensors_f32_to_bf16(t->data[s + j])
                                               : safetensors_f32_to_f16(t->data[s + j]);
            ok = fwrite(stage, 2, k, f) == k;
        }
    }
    free(stage);
    if (fclose(f) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        fail(err, errlen, "%s: write failed: %s", path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}
