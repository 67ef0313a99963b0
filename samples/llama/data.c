/* data.c — the token loader (see data.h). The whole token stream is read into host memory once and
   tagged input/token_file; synthetic data needs no buffer (a row is drawn from its index). */
#include "data.h"
#include "dpmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/io_guard.h"

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A labelled file (data.h) already read into raw: its records into d. */
static int open_labelled(DataLoader *d, const char *path, const unsigned char *raw, size_t size, int T) {
    int32_t h[6];
    memcpy(h, raw, sizeof h);
    if (h[1] != 1 || h[2] < 1 || h[3] < 1 || h[4] < 2) {
        fprintf(stderr, "error: labelled data file '%s': bad header (version %d, rows %d, row length %d, labels %d)\n",
                path, h[1], h[2], h[3], h[4]);
        return -1;
    }
    const size_t n = (size_t)h[2], R = (size_t)h[3];
    if ((size - 1024) / 4 / (R + 1) < n) {
        fprintf(stderr, "error: labelled data file '%s' is truncated: header says %zu rows of %zu tokens, %zu bytes follow it\n",
                path, n, R, size - 1024);
        return -1;
    }
    if (h[4] != d->num_labels) {
        fprintf(stderr, "error: labelled data file '%s' has %d labels, the model %d (--num-labels %d)\n", path, h[4], d->num_labels, h[4]);
        return -1;
    }
    if (h[5] != d->pad_id) {
        fprintf(stderr, "error: labelled data file '%s' pads with token %d, the model with %d (--pad-id %d)\n", path, h[5], d->pad_id, h[5]);
        return -1;
    }
    if ((size_t)T > R && d->pad_id < 0) {
        fprintf(stderr, "error: labelled data file '%s' has rows of %zu tokens and no pad token: --seq-len %d cannot be padded\n", path, R, T);
        return -1;
    }
    d->tokens = malloc(n * R * sizeof *d->tokens);
    d->labels = malloc(n * sizeof *d->labels);
    if (!d->tokens || !d->labels) { fprintf(stderr, "error: out of host memory for %zu labelled rows\n", n); return -1; }
    const unsigned char *p = raw + 1024;
    for (size_t i = 0; i < n; i++) {
        int32_t v;
        memcpy(&v, p + 4 * i * (R + 1), 4);
        if (v < 0 || v >= d->num_labels) {
            fprintf(stderr, "error: labelled data file '%s': row %zu has label %d, outside 0..%d\n", path, i, v, d->num_labels - 1);
            return -1;
        }
        d->labels[i] = v;
        for (size_t t = 0; t < R; t++) {
            memcpy(&v, p + 4 * (i * (R + 1) + 1 + t), 4);
            if (v < 0 || v >= d->vocab) {
                fprintf(stderr, "error: labelled data file '%s': row %zu token %zu is %d, outside the vocabulary 0..%d\n",
                        path, i, t, v, d->vocab - 1);
                return -1;
            }
            d->tokens[i * R + t] = v;
        }
    }
    d->n_rows = n; d->row_len = R; d->n_tokens = n * R;
    /* --seq-len below the rows' length cuts the rows with a real token past it: said once, with how many */
    size_t cut = 0;
    for (size_t i = 0; (size_t)T < R && i < n; i++) {
        size_t t = R;
        while (t > (size_t)T && d->tokens[i * R + t - 1] == d->pad_id) t--;
        cut += t > (size_t)T;
    }
    if (cut) {
        fprintf(stderr, "note: --seq-len %d cuts %zu of the %zu rows of '%s' (rows of up to %zu tokens): their tokens past %d are "
                "not read, and each is classified at its token %d\n", T, cut, n, path, R, T, T);
        char v[160];
        snprintf(v, sizeof v, "%zu of %zu rows of %.100s", cut, n, path);
        dpmem_meta("data.rows_cut", v);
    }
    DPMEM_TAG_ALLOC(d->tokens, n * R * sizeof *d->tokens, "input/token_file");
    DPMEM_TAG_ALLOC(d->labels, n * sizeof *d->labels, "input/labels_file");
    if (snprintf(d->desc, sizeof d->desc, "%.40s (labelled, %zu rows of %zu, %d labels)", path, n, R, d->num_labels) < 0)
        d->desc[0] = 0;   /* (a long name is cut: the description is for the header line) */
    return 0;
}

int data_open(DataLoader *d, const char *path, int vocab, int T, uint64_t seed) {
    return data_open_task(d, path, vocab, T, seed, 0, -1);
}

int data_open_task(DataLoader *d, const char *path, int vocab, int T, uint64_t seed, int num_labels, int pad_id) {
    memset(d, 0, sizeof *d);
    d->vocab = vocab;
    d->num_labels = num_labels; d->pad_id = pad_id;
    d->rng = seed * 0x9E3779B97F4A7C15ull + 17;
    if (!path) { d->synthetic = 1; snprintf(d->desc, sizeof d->desc, "synthetic (uniform random tokens%s)", num_labels ? ", labels" : ""); return 0; }
    /* A regular file only (a FIFO would block, a directory has no tokens), read to its end as a
       stream (a pseudo-file's size reads 0). */
    char e[600];
    int fd;
    struct stat st;
    if (io_open_input(path, &fd, &st, e, sizeof e)) {
        const char *why = strncmp(e, path, strlen(path)) == 0 && e[strlen(path)] == ':' ? e + strlen(path) + 2 : e;
        fprintf(stderr, "error: cannot open data file '%s': %s\n", path, why);
        return -1;
    }
    close(fd);
    unsigned char *raw;
    size_t got;
    if (io_read_file(path, (size_t)1 << 40, (char **)&raw, &got, e, sizeof e)) { fprintf(stderr, "error: data file %s\n", e); return -1; }
    if (got == 0) { fprintf(stderr, "error: data file '%s' is empty\n", path); free(raw); return -1; }
    long size = (long)got;
    int32_t hdr[3] = { 0, 0, 0 };
    if (size >= 1024) memcpy(hdr, raw, sizeof hdr);
    size_t width = 0, n = 0;
    const char *kind = "raw bytes";
    if ((hdr[0] == DATA_LABELLED_MAGIC) != (num_labels > 0)) {
        fprintf(stderr, num_labels ? "error: --task classify reads a labelled token file (magic %d: tools/make_tokens.py --labels); '%s' is not one\n"
                                   : "error: a causal LM trains on token files; '%2$s' is a labelled one (magic %1$d): give --task classify\n",
                DATA_LABELLED_MAGIC, path);
        free(raw); return -1;
    }
    if (num_labels) {
        int rc = open_labelled(d, path, raw, (size_t)size, T);
        free(raw);
        if (rc) { free(d->tokens); free(d->labels); d->tokens = NULL; d->labels = NULL; }
        return rc;
    }
    if (hdr[0] == 20240520 || hdr[0] == 20240801) {
        width = hdr[0] == 20240520 ? 2 : 4;
        kind = width == 2 ? "llm.c uint16" : "llm.c uint32";
        if (hdr[2] < 0 || (size_t)(size - 1024) < (size_t)hdr[2] * width) {
            fprintf(stderr, "error: data file '%s' is truncated: header says %d tokens, %ld bytes follow it\n",
                    path, hdr[2], size - 1024);
            free(raw); return -1;
        }
        n = (size_t)hdr[2];
    } else {
        if (vocab < 256) {
            fprintf(stderr, "error: '%s' has no llm.c header, so its bytes are the tokens, which needs --vocab >= 256 (have %d)\n", path, vocab);
            free(raw); return -1;
        }
        width = 1; n = (size_t)size;
    }
    if (n < (size_t)T + 1) {
        fprintf(stderr, "error: data file '%s' has %zu tokens, fewer than seq-len + 1 = %d\n", path, n, T + 1);
        free(raw); return -1;
    }
    d->tokens = malloc(n * sizeof *d->tokens);
    if (!d->tokens) { fprintf(stderr, "error: out of host memory for %zu tokens\n", n); free(raw); return -1; }
    const unsigned char *p = raw + (width == 1 ? 0 : 1024);
    for (size_t i = 0; i < n; i++) {
        uint32_t t;
        if (width == 1) t = p[i];
        else if (width == 2) { uint16_t u; memcpy(&u, p + 2 * i, 2); t = u; }
        else memcpy(&t, p + 4 * i, 4);
        if (t >= (uint32_t)vocab) {
            fprintf(stderr, "error: data file '%s': token %u at index %zu is >= the vocabulary size %d\n", path, t, i, vocab);
            free(raw); free(d->tokens); d->tokens = NULL; return -1;
        }
        d->tokens[i] = (int)t;
    }
    free(raw);
    d->n_tokens = n;
    DPMEM_TAG_ALLOC(d->tokens, n * sizeof *d->tokens, "input/token_file");
    snprintf(d->desc, sizeof d->desc, "%.48s (%s, %zu tokens)", path, kind, n);
    return 0;
}

int data_labelled_header(const char *path, int *num_labels, int *pad_id) {
    char e[600];
    int fd;
    struct stat st;
    if (io_open_input(path, &fd, &st, e, sizeof e)) return 0;   /* (a regular file only: a FIFO would block) */
    int32_t h[6];
    const int ok = read(fd, h, sizeof h) == (ssize_t)sizeof h && h[0] == DATA_LABELLED_MAGIC;
    close(fd);
    if (ok) { *num_labels = h[4]; *pad_id = h[5]; }
    return ok;
}

size_t data_rows(const DataLoader *d, int T) {
    if (d->synthetic) return DATA_SYNTHETIC_ROWS;
    if (d->labels) return d->n_rows;
    return d->n_tokens > (size_t)T ? (d->n_tokens - 1) / (size_t)T : 0;
}

void data_row(const DataLoader *d, size_t i, int *inputs, int *targets, int T) {
    const size_t rows = data_rows(d, T);
    i = rows ? i % rows : 0;
    if (d->synthetic) {   /* row i's own stream: the same row whoever asks for it (in order or drawn) */
        uint64_t st = d->rng ^ (i * 0xD1B54A32D192ED03ull);
        int prev = (int)(splitmix64(&st) % (uint64_t)d->vocab);
        for (int t = 0; t < T; t++) {
            int next = (int)(splitmix64(&st) % (uint64_t)d->vocab);
            inputs[t] = prev; targets[t] = next; prev = next;
        }
        if (d->num_labels) for (int t = 0; t < T; t++) targets[t] = targets[0] % d->num_labels;   /* the row's label */
        return;
    }
    if (d->labels) {
        const int *row = d->tokens + i * d->row_len;
        for (int t = 0; t < T; t++) { inputs[t] = (size_t)t < d->row_len ? row[t] : d->pad_id; targets[t] = d->labels[i]; }
        return;
    }
    const int *row = d->tokens + i * (size_t)T;
    for (int t = 0; t < T; t++) { inputs[t] = row[t]; targets[t] = row[t + 1]; }
}

void data_next(DataLoader *d, int *inputs, int *targets, int B, int T) {
    const size_t rows = data_rows(d, T);
    for (int b = 0; b < B; b++) {
        data_row(d, d->row, inputs + (size_t)b * T, targets + (size_t)b * T, T);
        d->row = rows ? (d->row + 1) % rows : 0;
    }
}

void data_skip(DataLoader *d, long rows, int T) {
    const size_t n = data_rows(d, T);
    if (rows > 0 && n) d->row = (d->row + (size_t)rows % n) % n;
}

void data_close(DataLoader *d) {
    if (d->tokens) { DPMEM_TAG_FREE(d->tokens); free(d->tokens); }
    if (d->labels) { DPMEM_TAG_FREE(d->labels); free(d->labels); }
    d->tokens = NULL; d->labels = NULL;
}
