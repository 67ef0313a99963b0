/* safetensors.h — read and write Hugging Face safetensors files, treating every input as hostile.

   The format: 8 bytes little-endian header length N, N bytes of UTF-8 JSON
       {"name": {"dtype": "BF16", "shape": [2048, 512], "data_offsets": [begin, end]}, ...,
        "__metadata__": {"format": "pt"}}
   then the data; offsets are relative to the first byte after the header. Reading follows the
   reference implementation's rules (huggingface/safetensors, tensor.rs): N <= 100 MB, the header
   starts with '{', N + 8 <= file size, the tensors' byte ranges sorted by begin tile the data region
   exactly (first begin 0, each begin = the previous end, last end = the data size: no hole, no
   overlap), and each range's length equals elements × dtype size. Names must be unique.

   The file is mapped read-only (mmap); a SafeTensor's `data` points into the mapping, so nothing is
   copied until the caller converts. Every check happens in safetensors_parse() before any pointer is
   formed: no read past the mapping, whatever the file says.

   A file truncated by another process while it is mapped raises SIGBUS on access, as with any mmap
   reader; checkpoints are not expected to change under a running trainer. A FIFO or a directory is
   refused before any read (common/io_guard.h). The header is bounded by what a real one needs: a
   tensor entry of more than 64 elements or 64 KiB (a dtype, at most 8 dimensions and 2 offsets take
   15) is refused before cJSON builds anything, so a forged 100 MB header costs its bytes, not GBs.

   What it does not do: big-endian hosts, writing anything but F32/BF16/F16 data, or the F8/F4/F6
   dtypes beyond naming them in errors (they are listed as unsupported, not silently misread).

   Errors: every function returns 0 on success or -1 with a one-line message (naming the file and,
   where there is one, the tensor) in the `err` buffer given. */
#ifndef SAFETENSORS_H
#define SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define SAFETENSORS_MAX_HEADER (100u << 20) /* as the reference implementation */
#define SAFETENSORS_MAX_DIMS 8
#define SAFETENSORS_ERR 512                 /* size of an error buffer */

typedef enum {
    ST_BOOL, ST_U8, ST_I8, ST_I16, ST_U16, ST_F16, ST_BF16, ST_I32, ST_U32, ST_F32, ST_F64,
    ST_I64, ST_U64, ST_DTYPE_COUNT
} SafeTensorsDtype;

typedef struct {
    char *name;
    SafeTensorsDtype dtype;
    int ndim;
    int64_t shape[SAFETENSORS_MAX_DIMS];
    size_t numel;          /* product of shape (1 for a scalar) */
    size_t nbytes;         /* end - begin */
    uint64_t begin, end;   /* relative to the data region */
    const void *data;      /* into the mapping (NULL for a parsed-only buffer) */
} SafeTensor;

typedef struct {
    char *path;
    void *map;             /* the whole file, read-only */
    size_t map_bytes;
    int n;                 /* tensors, sorted by begin */
    SafeTensor *tensors;
    int *by_name;          /* indexes into tensors in name order (safetensors_find's binary search) */
    int n_meta;            /* __metadata__ key/value pairs */
    char **meta_keys, **meta_values;
} SafeTensors;

/* dtype <-> name ("BF16"), element size in bytes. safetensors_dtype_from_name returns -1 if unknown. */
const char *safetensors_dtype_name(SafeTensorsDtype d);
int safetensors_dtype_from_name(const char *name);
size_t safetensors_dtype_size(SafeTensorsDtype d);

/* Maps `path` and parses its header. On failure nothing stays open. */
int safetensors_open(SafeTensors *st, const char *path, char *err, size_t errlen);
void safetensors_close(SafeTensors *st);

/* Parses and checks a complete file image already in memory (`file_bytes` bytes, the 8-byte length
   included); `label` names it in errors. Tensor data pointers point into `file`. This is what
   safetensors_open runs on the mapping, and what the fuzz tests drive. */
int safetensors_parse(SafeTensors *st, const void *file, size_t file_bytes, const char *label,
                      char *err, size_t errlen);

const SafeTensor *safetensors_find(const SafeTensors *st, const char *name);
const char *safetensors_meta(const SafeTensors *st, const char *key); /* NULL if absent */

/* Converts a tensor of dtype F32, BF16, F16 or F64 to n floats (n must equal numel). */
int safetensors_to_f32(const SafeTensors *st, const SafeTensor *t, float *dst, size_t n, char *err,
                       size_t errlen);
/* The same, and *first_bad: the first element that is not a finite float (NaN, +-inf, or an F64
   beyond fp32's range, converted to +-inf), n when there is none. Found in the conversion's pass
   (an F32 tensor is copied and checked in one loop; other dtypes a block at a time, checked while
   the block is in the cache). */
int safetensors_to_f32_finite(const SafeTensors *st, const SafeTensor *t, float *dst, size_t n, size_t *first_bad,
                              char *err, size_t errlen);

/* Writing. Each tensor's data is `numel` floats; it is stored as `dtype` (F32, BF16 or F16, rounded
   to nearest even). The header is padded with spaces to a multiple of 8 bytes, as the reference
   writer does, and the tensors are stored in the order given. meta: n_meta key/value strings. */
typedef struct {
    const char *name;
    SafeTensorsDtype dtype;
    int ndim;
    int64_t shape[SAFETENSORS_MAX_DIMS];
    const float *data;
} SafeTensorsWrite;

int safetensors_write(const char *path, const SafeTensorsWrite *tensors, int n, const char *const *meta_keys,
                      const char *const *meta_values, int n_meta, char *err, size_t errlen);
/* The same, a tensor with data NULL fetched just before it is written: fetch(user, i, &data) points data
   at tensor i's values (valid until the next fetch), 0, or -1 (then the file is not written and err
   names the tensor). A writer that holds one tensor at a time (a sharded model
   gathered tensor by tensor: samples/llama/checkpoint.h, ckpt_save_gathered). */
int safetensors_write_fetched(const char *path, const SafeTensorsWrite *tensors, int n, const char *const *meta_keys,
                              const char *const *meta_values, int n_meta, int (*fetch)(void *user, int i, const float **data),
                              void *user, char *err, size_t errlen);

/* Scalar conversions (round to nearest even; NaN stays NaN). */
float safetensors_bf16_to_f32(uint16_t h);
uint16_t safetensors_f32_to_bf16(float f);
float safetensors_f16_to_f32(uint16_t h);
uint16_t safetensors_f32_to_f16(float f);

#endif /* SAFETENSORS_H */
