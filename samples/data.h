/* data.h — token batches for the sample trainers: an llm.c token file (header of 256 int32: magic
   20240520 with uint16 tokens, or 20240801 with uint32), otherwise the file's raw bytes as tokens
   (vocabulary >= 256), or synthetic random tokens from the seed. Each of the B rows of a batch is
   T+1 consecutive tokens (inputs, and targets shifted by one), walking the file and wrapping around.
   Data parallelism (samples/comm.h): every rank walks the same stream and takes its own consecutive
   share of each step's rows, skipping the others' (data_skip), so N ranks read what one process would.
   Not here: tokenization, shuffling. */
#ifndef DATA_H
#define DATA_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int *tokens;            /* the whole stream as int32 (host) */
    size_t n_tokens;
    size_t pos;             /* next row's start */
    uint64_t rng;           /* synthetic */
    int synthetic, vocab;
    char desc[96];          /* "file.bin (llm.c uint16, 12345 tokens)" */
} DataLoader;

/* 0, or -1 after a one-line error (missing/short/garbage file, token >= vocab). */
int  data_open(DataLoader *d, const char *path, int vocab, int T, uint64_t seed);
/* inputs and targets: host arrays of B*T. */
void data_next(DataLoader *d, int *inputs, int *targets, int B, int T);
/* Passes over `rows` rows exactly as data_next would read them (other ranks' shares of a batch). */
void data_skip(DataLoader *d, long rows, int T);
void data_close(DataLoader *d);
#endif
