/* data.h — token batches for the sample trainers: an llm.c token file (header of 256 int32: magic
   20240520 with uint16 tokens, or 20240801 with uint32), otherwise the file's raw bytes as tokens
   (vocabulary >= 256), or synthetic random tokens from the seed.

   ONE DEFINITION OF A ROW (a training sequence, DP's privacy unit), for every trainer and sampling
   mode: row i is the T+1 tokens starting at token i·T (inputs: the first T, targets: the last T),
   so consecutive rows share one token, as llm.c's loader reads them. A file of n tokens has
   (n - 1) / T rows (257 tokens at T = 64: 4 rows); synthetic data has DATA_SYNTHETIC_ROWS rows, row i
   drawn from (seed, i). Sequential batches (every trainer without --poisson) take rows 0, 1, 2, ...
   and wrap around after the last; Poisson sampling (--poisson) takes the rows it draws, by index (a
   --dataset-size larger than the data's rows is refused: samples/dp). The DP sample rate is
   batch / rows. Data parallelism (samples/llama/comm.h): every rank walks the same rows and takes its own
   consecutive share of each step's rows, skipping the others' (data_skip), so N ranks read what one
   process would.
   LABELLED ROWS (--task classify): a labelled token file, magic 20260335: a header of 256 int32
   (magic, version 1, rows n, row length R, labels K, pad id P or -1), then n records of R + 1 int32
   each: the row's label (0..K-1), then its R tokens, right-padded with P (tools/make_tokens.py
   --labels writes it). Row i is record i: inputs its first T tokens (P after its R when T > R), every
   target its label. Synthetic classify rows: row i's tokens as above, every target
   (its stream's next draw) mod K, no padding. The file's K and P must be the model's (--num-labels,
   --pad-id: config_parse takes them from the header where not given); a --seq-len below R cuts the rows
   with a real token past it, said once (META data.rows_cut). A causal LM refuses a labelled file,
   classify any other.
   Not here: tokenization, shuffling. */
#ifndef DATA_H
#define DATA_H
#include <stddef.h>
#include <stdint.h>

#define DATA_SYNTHETIC_ROWS 65536

typedef struct {
    int *tokens;            /* the whole stream as int32 (host) */
    size_t n_tokens;
    size_t row;             /* the next sequential row (data_next) */
    uint64_t rng;           /* synthetic: the seed of every row */
    int synthetic, vocab;
    int num_labels, pad_id; /* classify (num_labels > 0): labelled rows (see above) */
    int *labels;            /* a labelled file: the rows' labels (host [rows]); tokens is then [rows][row_len] */
    size_t n_rows, row_len;
    char desc[96];          /* "file.bin (llm.c uint16, 12345 tokens)" */
} DataLoader;

/* 0, or -1 after a one-line error (missing/short/garbage file, token >= vocab, fewer than T+1 tokens). */
int  data_open(DataLoader *d, const char *path, int vocab, int T, uint64_t seed);
/* data_open for a task: num_labels > 0 reads labelled rows (classify; pad_id the model's, -1 none). */
int  data_open_task(DataLoader *d, const char *path, int vocab, int T, uint64_t seed, int num_labels, int pad_id);
#define DATA_LABELLED_MAGIC 20260335
/* A labelled file's K and pad id from its header: 1 (a labelled file), 0 (another file, or none to read:
   data_open_task says why). */
int  data_labelled_header(const char *path, int *num_labels, int *pad_id);
/* The rows at sequence length T (see above; at least 1 once data_open succeeded). */
size_t data_rows(const DataLoader *d, int T);
/* Row i (taken mod data_rows): inputs and targets, T each. */
void data_row(const DataLoader *d, size_t i, int *inputs, int *targets, int T);
/* The next B rows in order: inputs and targets, host arrays of B*T. */
void data_next(DataLoader *d, int *inputs, int *targets, int B, int T);
/* Passes over `rows` rows exactly as data_next would read them (other ranks' shares of a batch). */
void data_skip(DataLoader *d, long rows, int T);
void data_close(DataLoader *d);
#endif
