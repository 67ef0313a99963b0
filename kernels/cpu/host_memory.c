/* host_memory.c — the CPU backend's buffers: 64-byte aligned host memory, with the blocks that are
   freed kept for the next request of (nearly) the same size.

   Why: a training step allocates and frees the same activations, gradients and scratch every step.
   Given back to glibc, every large one came back as fresh pages from the kernel on the next step: a
   page fault and a page of zeros per 4 KiB (clear_page was 4-9 % of a step of `small` here) and, as
   the buffers were zero-filled on top, a second write of every byte. Kept, they cost nothing.
   A kept block is reused for a request of its size or up to 1/8 smaller (the smallest that fits):
   a step repeats its sizes. Blocks under 256 KiB are not kept (glibc's free lists reuse them
   without page faults).

   Bound: the live blocks plus the kept ones never exceed the high-water mark of the live ones
   (blocks of 256 KiB or more, in block sizes: nearly the backend's peak as kbuf_alloc counts it):
   before a new block is allocated, kept blocks are freed, the smallest first (a large one costs the
   most to fault in again), until it fits under that mark. Caching never raises what the backend holds above its own peak, and the
   tagged accounting (kbuf_alloc) does not see it at all. With it a `small` vanilla, ghost, flash
   or mixed step allocates nothing anew after the first step; direct, whose per-sample gradients are
   never live together with the activations they replace, still allocates ~0.7 GiB anew per step.
   Buffers are NOT zeroed (kernels.h: "need not be zeroed"): every user fills what it reads (under
   the sanitizers they come filled with NaN bytes, so that the suite catches a reader that does not).
   Not thread-safe, like kbuf_alloc (the model allocates on one thread).
   Not here: the tags and the memory limit (kernels.c). */
#include "kernels_cpu.h"

#include <stdlib.h>
#include <string.h>

#define KCPU_ALIGN 64
/* Blocks below this go straight back to glibc (its free lists reuse them without page faults). */
#define KCPU_KEEP_MIN ((size_t)256 << 10)
/* Every block starts with a header of one alignment unit that holds its rounded size. */
typedef struct { void *base; size_t bytes; } KcpuBlock;
typedef struct {
    KcpuBlock *kept;        /* oldest first */
    int n, cap;
    size_t kept_bytes, live_bytes, high_water;
    size_t fresh_bytes;     /* allocated anew (not from the kept blocks), in all */
} KcpuCache;

static KcpuCache *cache_of(KBackend *b) {
    if (!b->priv) b->priv = calloc(1, sizeof(KcpuCache));
    return b->priv;
}

/* Gives back kept block i. */
static void drop(KcpuCache *c, int i) {
    free(c->kept[i].base);
    c->kept_bytes -= c->kept[i].bytes;
    c->n--;
    for (int j = i; j < c->n; j++) c->kept[j] = c->kept[j + 1];
}

/* The kept block to give back first: the smallest (a large one costs the most to fault in again). */
static int victim(const KcpuCache *c) {
    int v = 0;
    for (int i = 1; i < c->n; i++) if (c->kept[i].bytes < c->kept[v].bytes) v = i;
    return v;
}

/* Under the sanitizers (make sanitize) every block handed out is filled with NaN bytes first, so
   that a reader that counts on zeroed memory fails the suite instead of passing by luck. */
#if defined(__SANITIZE_ADDRESS__) || defined(KCPU_POISON_ALLOC)
#define KCPU_POISON 1
#else
#define KCPU_POISON 0
#endif

static void *hand_out(void *base, size_t rounded) {
    void *p = (char *)base + KCPU_ALIGN;
    if (KCPU_POISON) memset(p, 0xFF, rounded);
    return p;
}

static void *fresh_block(size_t bytes) {
    void *base = aligned_alloc(KCPU_ALIGN, bytes + KCPU_ALIGN);
    if (base) *(size_t *)base = bytes;
    return base;
}

void *kcpu_alloc(KBackend *b, size_t bytes) {
    KcpuCache *c = cache_of(b);
    if (!c || bytes > SIZE_MAX / 2) return NULL;
    const size_t rounded = (bytes + KCPU_ALIGN - 1) / KCPU_ALIGN * KCPU_ALIGN;
    if (rounded < KCPU_KEEP_MIN) {               /* small: glibc's own free lists do this well */
        void *base = fresh_block(rounded);
        return base ? hand_out(base, rounded) : NULL;
    }
    int best = -1;                               /* the smallest kept block that fits within 1/8 */
    for (int i = 0; i < c->n; i++)
        if (c->kept[i].bytes >= rounded && c->kept[i].bytes - rounded <= rounded / 8 &&
            (best < 0 || c->kept[i].bytes < c->kept[best].bytes)) best = i;
    if (best >= 0) {
        KcpuBlock k = c->kept[best];
        c->kept_bytes -= k.bytes;
        c->n--;
        for (int j = best; j < c->n; j++) c->kept[j] = c->kept[j + 1];
        c->live_bytes += k.bytes;
        return hand_out(k.base, rounded);
    }
    const size_t live = c->live_bytes + rounded;
    if (live > c->high_water) c->high_water = live;
    while (c->n > 0 && c->kept_bytes > c->high_water - live) drop(c, victim(c));
    void *base = fresh_block(rounded);
    while (!base && c->n > 0) {                  /* out of memory: give back everything kept, then retry */
        while (c->n > 0) drop(c, 0);
        base = fresh_block(rounded);
    }
    if (!base) return NULL;
    c->live_bytes = live;
    c->fresh_bytes += rounded;
    return hand_out(base, rounded);
}

void kcpu_free(KBackend *b, void *p) {
    if (!p) return;
    KcpuCache *c = b->priv;
    void *base = (char *)p - KCPU_ALIGN;
    const size_t size = *(size_t *)base;
    if (!c || size < KCPU_KEEP_MIN) { free(base); return; }
    c->live_bytes -= size;
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        KcpuBlock *k = realloc(c->kept, (size_t)cap * sizeof *k);
        if (!k) { free(base); return; }
        c->kept = k; c->cap = cap;
    }
    c->kept[c->n++] = (KcpuBlock){ base, size };
    c->kept_bytes += size;
}

void kcpu_cache_stats(const KBackend *b, size_t *kept, size_t *live, size_t *high_water, size_t *fresh) {
    const KcpuCache *c = b->priv;
    *kept = c ? c->kept_bytes : 0;
    *live = c ? c->live_bytes : 0;
    *high_water = c ? c->high_water : 0;
    *fresh = c ? c->fresh_bytes : 0;
}

void kcpu_release(KBackend *b) {
    KcpuCache *c = b->priv;
    if (!c) return;
    while (c->n > 0) drop(c, 0);
    free(c->kept);
    free(c);
    b->priv = NULL;
}
