/* host_memory.c — the CPU backend's buffers: 64-byte aligned host memory, with the memory of freed
   blocks kept for the next requests, whatever their sizes.

   Why: a training step allocates and frees the same activations, gradients and scratch every step.
   Given back to the kernel, every large one came back as fresh pages on the next step: a page
   fault and a page of zeros per 4 KiB (clear_page was 4-9 % of a step of `small` here) and, as the
   buffers were zero-filled on top, a second write of every byte. Kept, they cost nothing.

   How: a block of 256 KiB or more is a whole number of pages mapped on its own (mmap), its first
   64 bytes a header with the size asked for. When it is freed its pages are kept, as a range of
   addresses; adjacent kept ranges merge (the kernel tends to place new mappings next to each
   other, and blocks carved from one range are adjacent). A request takes the smallest kept range
   that holds it, and what it does not use stays kept. So memory freed by one kind of buffer serves
   another: direct's per-sample gradients (freed at the clip) become the next step's activations,
   whose memory becomes the per-sample gradients again in the backward. (The cache before this one
   reused a block only for a request of nearly its size: direct faulted in ~0.7 GiB anew per step,
   11 % of its CPU time in the kernel.)

   A request that no kept range holds takes the largest one grown by mremap (its pages move along,
   no copy and no fault: only the growth is fresh; direct's logits and embedding slices at `medium`
   each found 430-490 of their 500 MiB this way, and 750 MiB mapped anew per step became 40);
   where the kernel refuses (a range made of several mappings) the block is mapped anew.

   Bound: the handed-out blocks plus the kept ranges never exceed the high-water mark of the
   handed-out ones (in pages; nearly the backend's peak as kbuf_alloc counts it, plus a page per
   block): with a block grown or mapped anew, kept memory is unmapped, the smallest ranges first (a
   large one costs the most to fault in again), the last of them only in part, until the new block
   fits under that mark. Caching never raises what the backend holds above its own peak, and the
   tagged accounting (kbuf_alloc) does not see it at all.
   Blocks below 256 KiB go to glibc (its free lists reuse them without page faults).
   Buffers are NOT zeroed (kernels.h: "need not be zeroed"): every user fills what it reads (under
   the sanitizers they come filled with NaN bytes, so that the suite catches a reader that does not;
   under AddressSanitizer the kept ranges and each block's slack are poisoned, so that a use after
   free or past the end of a block is caught although the memory is still mapped).
   Not thread-safe, like kbuf_alloc (the model allocates on one thread).
   Not here: the tags and the memory limit (kernels.c). */
#include "kernels_cpu.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define KCPU_ALIGN 64
/* Blocks below this go straight back to glibc (its free lists reuse them without page faults). */
#define KCPU_KEEP_MIN ((size_t)256 << 10)

typedef struct { char *base; size_t len; } KcpuRange;   /* whole pages */
typedef struct {
    KcpuRange *kept;        /* by address, no two adjacent (they merge) */
    int n, cap;
    size_t kept_bytes, live_bytes, high_water;
    size_t fresh_bytes;     /* mapped anew, in all */
} KcpuCache;

static KcpuCache *cache_of(KBackend *b) {
    if (!b->priv) b->priv = calloc(1, sizeof(KcpuCache));
    return b->priv;
}

/* A large block's length: its header and its bytes, in whole pages. */
static size_t block_length(size_t rounded) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (rounded + KCPU_ALIGN + page - 1) / page * page;
}

static void unmap(char *p, size_t len) {
    UNPOISON(p, len);                            /* the shadow must not outlive the mapping */
    munmap(p, len);
}

static void remove_at(KcpuCache *c, int i) {
    c->n--;
    memmove(c->kept + i, c->kept + i + 1, (size_t)(c->n - i) * sizeof *c->kept);
}

/* Keeps [p, p+len): merged with its neighbours, or inserted in address order. Returns -1 (nothing
   kept) when the list cannot grow. */
static int keep_range(KcpuCache *c, char *p, size_t len) {
    int i = 0;
    while (i < c->n && c->kept[i].base < p) i++;            /* the first range above p */
    const int left = i > 0 && c->kept[i - 1].base + c->kept[i - 1].len == p;
    const int right = i < c->n && p + len == c->kept[i].base;
    POISON(p, len);
    if (left && right) {
        c->kept[i - 1].len += len + c->kept[i].len;
        remove_at(c, i);
    } else if (left) {
        c->kept[i - 1].len += len;
    } else if (right) {
        c->kept[i].base = p;
        c->kept[i].len += len;
    } else {
        if (c->n == c->cap) {
            int cap = c->cap ? 2 * c->cap : 64;
            KcpuRange *k = realloc(c->kept, (size_t)cap * sizeof *k);
            if (!k) return -1;
            c->kept = k; c->cap = cap;
        }
        memmove(c->kept + i + 1, c->kept + i, (size_t)(c->n - i) * sizeof *c->kept);
        c->kept[i] = (KcpuRange){ p, len };
        c->n++;
    }
    c->kept_bytes += len;
    return 0;
}

/* Unmaps kept memory, the smallest ranges first and the last one from its end, until at most
   `limit` bytes are kept. */
static void trim_to(KcpuCache *c, size_t limit) {
    while (c->kept_bytes > limit && c->n > 0) {
        int v = 0;
        for (int i = 1; i < c->n; i++) if (c->kept[i].len < c->kept[v].len) v = i;
        const size_t excess = c->kept_bytes - limit;
        KcpuRange *r = &c->kept[v];
        if (r->len <= excess) {
            c->kept_bytes -= r->len;
            unmap(r->base, r->len);
            remove_at(c, v);
        } else {                                 /* excess is whole pages: every length is */
            r->len -= excess;
            c->kept_bytes -= excess;
            unmap(r->base + r->len, excess);
        }
    }
}

/* No kept range holds len bytes: the largest one grown to len by mremap (its pages move with it,
   no copy and no fault; only the growth is fresh), taken out of the kept ones. NULL where the
   kernel refuses (a range made of several mappings). */
static char *grow_largest(KcpuCache *c, size_t len) {
    if (c->n == 0) return NULL;
    int v = 0;
    for (int i = 1; i < c->n; i++) if (c->kept[i].len > c->kept[v].len) v = i;
    KcpuRange r = c->kept[v];
    UNPOISON(r.base, r.len);
    char *p = mremap(r.base, r.len, len, MREMAP_MAYMOVE);
    if (p == MAP_FAILED) { POISON(r.base, r.len); return NULL; }
    remove_at(c, v);
    c->kept_bytes -= r.len;
    c->fresh_bytes += len - r.len;
    return p;
}

/* Under the sanitizers (make sanitize) every block handed out is filled with NaN bytes first, so
   that a reader that counts on zeroed memory fails the suite instead of passing by luck. */
#if defined(__SANITIZE_ADDRESS__) || defined(KCPU_POISON_ALLOC)
#define KCPU_POISON 1
#else
#define KCPU_POISON 0
#endif

static void *hand_out(char *base, size_t rounded) {
    *(size_t *)base = rounded;
    char *p = base + KCPU_ALIGN;
    if (KCPU_POISON) memset(p, 0xFF, rounded);
    return p;
}

void *kcpu_alloc(KBackend *b, size_t bytes) {
    KcpuCache *c = cache_of(b);
    if (!c || bytes > SIZE_MAX / 2) return NULL;
    const size_t rounded = (bytes + KCPU_ALIGN - 1) / KCPU_ALIGN * KCPU_ALIGN;
    if (rounded < KCPU_KEEP_MIN) {               /* small: glibc's own free lists do this well */
        char *base = aligned_alloc(KCPU_ALIGN, rounded + KCPU_ALIGN);
        return base ? hand_out(base, rounded) : NULL;
    }
    const size_t len = block_length(rounded);
    int best = -1;                               /* the smallest kept range that holds it */
    for (int i = 0; i < c->n; i++)
        if (c->kept[i].len >= len && (best < 0 || c->kept[i].len < c->kept[best].len)) best = i;
    char *base;
    if (best >= 0) {
        KcpuRange *r = &c->kept[best];
        base = r->base;
        r->base += len;
        r->len -= len;
        if (r->len == 0) remove_at(c, best);
        c->kept_bytes -= len;
    } else {
        const size_t live = c->live_bytes + len;
        if (live > c->high_water) c->high_water = live;
        base = grow_largest(c, len);
        if (base) {
            trim_to(c, c->high_water - live);
            goto out;
        }
        trim_to(c, c->high_water - live);
        base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED) {                /* out of memory: give back everything kept, then retry */
            trim_to(c, 0);
            base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (base == MAP_FAILED) return NULL;
        }
        c->fresh_bytes += len;
    }
out:
    c->live_bytes += len;
    UNPOISON(base, KCPU_ALIGN + rounded);
    POISON(base + KCPU_ALIGN + rounded, len - KCPU_ALIGN - rounded);
    return hand_out(base, rounded);
}

void kcpu_free(KBackend *b, void *p) {
    if (!p) return;
    KcpuCache *c = b->priv;
    char *base = (char *)p - KCPU_ALIGN;
    const size_t rounded = *(size_t *)base;
    if (rounded < KCPU_KEEP_MIN) { free(base); return; }
    const size_t len = block_length(rounded);
    c->live_bytes -= len;
    if (keep_range(c, base, len)) unmap(base, len);
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
    trim_to(c, 0);
    free(c->kept);
    free(c);
    b->priv = NULL;
}
