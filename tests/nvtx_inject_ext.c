/* nvtx_inject_ext.c — an NVTX *extension* injection library that records the memory and counter
   calls a program makes, and refuses the memory calls that compute-sanitizer refuses, so that tests
   can check them without compute-sanitizer, Nsight or a GPU.

   Load it like a tool: NVTX_INJECTION64_PATH=/path/libnvtx_inject_ext.so. NVTX calls
   InitializeInjectionNvtxExtension once per extension module (nvtxDetail/nvtxExtInit.h); we fill the
   slots of the memory module (nvToolsExtMem.h) and of the counters module (nvToolsExtCounters.h).
   Every captured call appends one line to a text record that the test reads in-process through
   nvtx_inject_ext_record() (dlopen the same path, dlsym):
       heap+ <base> <bytes>        nvtxMemHeapRegister (a pool: usage SUB_ALLOCATOR)
       heap- <base>                nvtxMemHeapUnregister (its regions go with it)
       region+ <ptr> <bytes> in <base>   nvtxMemRegionsRegister, one line per region, <base>: its heap
       region- <ptr>               nvtxMemRegionsUnregister (by pointer or by handle)
       name <ptr> <text>           nvtxMemRegionsName (ASCII names)
       invalid <call>: <why>       a call refused, as compute-sanitizer refuses it ("Call to <call>
                                   failed: One or more of the parameters is invalid"); nothing of it
                                   is recorded otherwise
       counter <id> <name>         nvtxCounterRegister
       sample <id> <value>         nvtxCounterSampleInt64
   Checked on every memory call, as the header documents each field and as compute-sanitizer's NVTX
   guide uses them: extCompatID == NVTX_EXT_COMPATID_MEM, structSize == sizeof the batch or
   descriptor, element sizes == sizeof the element type, counts >= 1, non-NULL arrays; a heap is a
   SUB_ALLOCATOR of NVTX_MEM_TYPE_VIRTUAL_ADDRESS with a nvtxMemVirtualRangeDesc_t of non-zero size,
   overlapping no other heap; a region's regionType is NVTX_MEM_TYPE_VIRTUAL_ADDRESS and its heap one
   that nvtxMemHeapRegister returned (NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE is refused: compute-sanitizer
   knows regions only as suballocations of a registered pool), lying inside that heap and overlapping
   no live region; unregistering names a live region by a known reference type; a name's reference
   type is POINTER (or HANDLE of a live region), its message type ASCII, pointer and text non-NULL.
   It does not implement the core NVTX callbacks (ranges: tests/nvtx_inject.c does), so with only this
   library attached, core NVTX calls are no-ops. It is a test fixture, not a profiler. */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>
#include <nvtx3/nvToolsExtCounters.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char *record;
static size_t record_len, record_cap;
static uint64_t next_counter = NVTX_COUNTER_ID_DYNAMIC_START;

static void note(const char *fmt, ...) {
    char line[512];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof line) n = sizeof line - 1;
    pthread_mutex_lock(&lock);
    if (record_len + (size_t)n + 2 > record_cap) {
        size_t cap = record_cap ? 2 * record_cap : 4096;
        while (cap < record_len + (size_t)n + 2) cap *= 2;
        char *p = realloc(record, cap);
        if (!p) { pthread_mutex_unlock(&lock); return; }
        record = p;
        record_cap = cap;
    }
    memcpy(record + record_len, line, (size_t)n);
    record_len += (size_t)n;
    record[record_len++] = '\n';
    record[record_len] = 0;
    pthread_mutex_unlock(&lock);
}

/* What the test reads: every captured call so far, one per line ("" when none). */
EXPORT const char *nvtx_inject_ext_record(void) { return record ? record : ""; }

/* Forget what was captured so far (the test checks one step at a time). */
EXPORT void nvtx_inject_ext_clear(void) {
    pthread_mutex_lock(&lock);
    record_len = 0;
    if (record) record[0] = 0;
    pthread_mutex_unlock(&lock);
}

/* ---- memory extension ---- */

/* The tool's view of heaps and regions, under `state` (note() takes `lock`, never `state`). */
static pthread_mutex_t state = PTHREAD_MUTEX_INITIALIZER;

/* A registered heap; its address is the handle given out. */
typedef struct heap { uintptr_t base; size_t bytes; int live; } heap;
typedef struct region { uintptr_t ptr; size_t bytes; heap *in; } region;
#define MAX_HEAPS 256
static heap heaps[MAX_HEAPS];
static int nheaps;
static region *regions;                    /* live regions (unordered) */
static size_t nregions, cap_regions;

static heap *known_heap(nvtxMemHeapHandle_t h) {   /* under lock */
    for (int i = 0; i < nheaps; i++)
        if ((nvtxMemHeapHandle_t)&heaps[i] == h && heaps[i].live) return &heaps[i];
    return NULL;
}

static long find_region(uintptr_t p) {            /* under lock */
    for (size_t i = 0; i < nregions; i++)
        if (regions[i].ptr == p) return (long)i;
    return -1;
}

static int batch_header_ok(const char *call, uint16_t compat, uint16_t size, size_t want) {
    if (compat != NVTX_EXT_COMPATID_MEM) { note("invalid %s: extCompatID 0x%x, want 0x%x", call, compat, NVTX_EXT_COMPATID_MEM); return 0; }
    if (size != want) { note("invalid %s: structSize %u, want %zu", call, size, want); return 0; }
    return 1;
}

static nvtxMemHeapHandle_t mem_heap_register(nvtxDomainHandle_t domain, nvtxMemHeapDesc_t const *d) {
    const nvtxMemVirtualRangeDesc_t *r;
    nvtxMemHeapHandle_t h = NULL;
    (void)domain;
    if (!d) { note("invalid nvtxMemHeapRegister: NULL descriptor"); return NULL; }
    if (!batch_header_ok("nvtxMemHeapRegister", d->extCompatID, d->structSize, sizeof(nvtxMemHeapDesc_t))) return NULL;
    if (d->usage != NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR) { note("invalid nvtxMemHeapRegister: usage %u", d->usage); return NULL; }
    if (d->type != NVTX_MEM_TYPE_VIRTUAL_ADDRESS) { note("invalid nvtxMemHeapRegister: type %u", d->type); return NULL; }
    if (d->typeSpecificDescSize != sizeof(nvtxMemVirtualRangeDesc_t) || !d->typeSpecificDesc) {
        note("invalid nvtxMemHeapRegister: typeSpecificDescSize %zu, want %zu", d->typeSpecificDescSize, sizeof(nvtxMemVirtualRangeDesc_t));
        return NULL;
    }
    r = (const nvtxMemVirtualRangeDesc_t *)d->typeSpecificDesc;
    if (!r->ptr || !r->size) { note("invalid nvtxMemHeapRegister: empty range"); return NULL; }
    pthread_mutex_lock(&state);
    for (int i = 0; i < nheaps; i++)
        if (heaps[i].live && (uintptr_t)r->ptr < heaps[i].base + heaps[i].bytes && heaps[i].base < (uintptr_t)r->ptr + r->size) {
            pthread_mutex_unlock(&state);
            note("invalid nvtxMemHeapRegister: %p overlaps a live heap", r->ptr);
            return NULL;
        }
    if (nheaps < MAX_HEAPS) {
        heaps[nheaps].base = (uintptr_t)r->ptr;
        heaps[nheaps].bytes = r->size;
        heaps[nheaps].live = 1;
        h = (nvtxMemHeapHandle_t)&heaps[nheaps++];
    }
    pthread_mutex_unlock(&state);
    if (h) note("heap+ %p %zu", r->ptr, r->size);
    else note("invalid nvtxMemHeapRegister: fixture full");
    return h;
}

static void mem_heap_unregister(nvtxDomainHandle_t domain, nvtxMemHeapHandle_t h) {
    heap *hp;
    (void)domain;
    pthread_mutex_lock(&state);
    hp = known_heap(h);
    if (hp) {
        hp->live = 0;
        for (size_t i = 0; i < nregions;)            /* its regions go with it */
            if (regions[i].in == hp) regions[i] = regions[--nregions];
            else i++;
    }
    pthread_mutex_unlock(&state);
    if (hp) note("heap- %p", (void *)hp->base);
    else note("invalid nvtxMemHeapUnregister: %p is not a registered heap", (void *)h);
}

static void mem_regions_register(nvtxDomainHandle_t domain, nvtxMemRegionsRegisterBatch_t const *b) {
    heap *hp;
    (void)domain;
    if (!b) { note("invalid nvtxMemRegionsRegister: NULL batch"); return; }
    if (!batch_header_ok("nvtxMemRegionsRegister", b->extCompatID, b->structSize, sizeof(nvtxMemRegionsRegisterBatch_t))) return;
    if (b->regionType != NVTX_MEM_TYPE_VIRTUAL_ADDRESS) { note("invalid nvtxMemRegionsRegister: regionType %u", b->regionType); return; }
    if (b->regionCount < 1 || !b->regionDescElements || b->regionDescElementSize != sizeof(nvtxMemVirtualRangeDesc_t)) {
        note("invalid nvtxMemRegionsRegister: %zu regions of %zu B (want %zu B each)", b->regionCount, b->regionDescElementSize,
             sizeof(nvtxMemVirtualRangeDesc_t));
        return;
    }
    pthread_mutex_lock(&state);
    hp = known_heap(b->heap);
    if (!hp)
        note("invalid nvtxMemRegionsRegister: heap %p is not one nvtxMemHeapRegister returned%s", (void *)b->heap,
             b->heap == NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE ? " (the process-wide heap holds no regions for compute-sanitizer)" : "");
    for (size_t i = 0; hp && i < b->regionCount; i++) {
        const nvtxMemVirtualRangeDesc_t *r =
            (const nvtxMemVirtualRangeDesc_t *)((const char *)b->regionDescElements + i * b->regionDescElementSize);
        uintptr_t p = (uintptr_t)r->ptr;
        int clash = 0;
        if (!r->size || p < hp->base || r->size > hp->bytes || p - hp->base > hp->bytes - r->size) {
            note("invalid nvtxMemRegionsRegister: %p + %zu is not inside its heap", r->ptr, r->size);
            continue;
        }
        for (size_t k = 0; k < nregions && !clash; k++)
            clash = p < regions[k].ptr + regions[k].bytes && regions[k].ptr < p + r->size;
        if (clash) { note("invalid nvtxMemRegionsRegister: %p overlaps a live region", r->ptr); continue; }
        if (nregions == cap_regions) {
            size_t cap = cap_regions ? 2 * cap_regions : 1024;
            region *g = realloc(regions, cap * sizeof *g);
            if (!g) { note("invalid nvtxMemRegionsRegister: fixture out of memory"); continue; }
            regions = g;
            cap_regions = cap;
        }
        regions[nregions].ptr = p;
        regions[nregions].bytes = r->size;
        regions[nregions++].in = hp;
        if (b->regionHandleElementsOut) b->regionHandleElementsOut[i] = (nvtxMemRegionHandle_t)r->ptr;
        note("region+ %p %zu in %p", r->ptr, r->size, (void *)hp->base);
    }
    pthread_mutex_unlock(&state);
}

static void mem_regions_unregister(nvtxDomainHandle_t domain, nvtxMemRegionsUnregisterBatch_t const *b) {
    (void)domain;
    if (!b) { note("invalid nvtxMemRegionsUnregister: NULL batch"); return; }
    if (!batch_header_ok("nvtxMemRegionsUnregister", b->extCompatID, b->structSize, sizeof(nvtxMemRegionsUnregisterBatch_t))) return;
    if (b->refType != NVTX_MEM_REGION_REF_TYPE_POINTER && b->refType != NVTX_MEM_REGION_REF_TYPE_HANDLE) {
        note("invalid nvtxMemRegionsUnregister: refType %u", b->refType);
        return;
    }
    if (b->refCount < 1 || !b->refElements || b->refElementSize != sizeof(nvtxMemRegionRef_t)) {
        note("invalid nvtxMemRegionsUnregister: %zu references of %zu B (want %zu B each)", b->refCount, b->refElementSize,
             sizeof(nvtxMemRegionRef_t));
        return;
    }
    for (size_t i = 0; i < b->refCount; i++) {
        const nvtxMemRegionRef_t *r = (const nvtxMemRegionRef_t *)((const char *)b->refElements + i * b->refElementSize);
        const void *p = b->refType == NVTX_MEM_REGION_REF_TYPE_POINTER ? r->pointer : (const void *)r->handle;
        long k;
        pthread_mutex_lock(&state);
        k = find_region((uintptr_t)p);
        if (k >= 0) regions[k] = regions[--nregions];
        pthread_mutex_unlock(&state);
        if (k >= 0) note("region- %p", p);
        else note("invalid nvtxMemRegionsUnregister: no region at %p", p);
    }
}

static void mem_regions_name(nvtxDomainHandle_t domain, nvtxMemRegionsNameBatch_t const *b) {
    (void)domain;
    if (!b) { note("invalid nvtxMemRegionsName: NULL batch"); return; }
    if (!batch_header_ok("nvtxMemRegionsName", b->extCompatID, b->structSize, sizeof(nvtxMemRegionsNameBatch_t))) return;
    if (b->regionCount < 1 || !b->regionElements || b->regionElementSize != sizeof(nvtxMemRegionNameDesc_t)) {
        note("invalid nvtxMemRegionsName: %zu names of %zu B (want %zu B each)", b->regionCount, b->regionElementSize,
             sizeof(nvtxMemRegionNameDesc_t));
        return;
    }
    for (size_t i = 0; i < b->regionCount; i++) {
        const nvtxMemRegionNameDesc_t *d =
            (const nvtxMemRegionNameDesc_t *)((const char *)b->regionElements + i * b->regionElementSize);
        const void *p;
        if (d->regionRefType == NVTX_MEM_REGION_REF_TYPE_POINTER) p = d->region.pointer;
        else if (d->regionRefType == NVTX_MEM_REGION_REF_TYPE_HANDLE) {
            long k;
            pthread_mutex_lock(&state);
            k = find_region((uintptr_t)d->region.handle);
            pthread_mutex_unlock(&state);
            if (k < 0) { note("invalid nvtxMemRegionsName: handle %p is no live region", (void *)d->region.handle); continue; }
            p = (const void *)d->region.handle;
        } else { note("invalid nvtxMemRegionsName: regionRefType %u", d->regionRefType); continue; }
        if (d->nameType != NVTX_MESSAGE_TYPE_ASCII || !d->name.ascii || !p) {
            note("invalid nvtxMemRegionsName: nameType %u, pointer %p", d->nameType, p);
            continue;
        }
        note("name %p %s", p, d->name.ascii);
    }
}

/* ---- counters extension ---- */

static uint64_t counter_register(nvtxDomainHandle_t domain, const nvtxCounterAttr_t *a) {
    uint64_t id;
    (void)domain;
    if (!a) return 0;
    pthread_mutex_lock(&lock);
    id = a->counterId != NVTX_COUNTER_ID_NONE ? a->counterId : next_counter++;
    pthread_mutex_unlock(&lock);
    note("counter %llu %s", (unsigned long long)id, a->name ? a->name : "(null)");
    return id;
}

static void counter_sample_int64(nvtxDomainHandle_t domain, uint64_t id, int64_t value) {
    (void)domain;
    note("sample %llu %lld", (unsigned long long)id, (long long)value);
}

static int set_slot(nvtxExtModuleInfo_t *info, size_t cbid, intptr_t fn) {
    if (info->segmentsCount < 1 || info->segments[0].slotCount <= cbid) return 0;
    info->segments[0].functionSlots[cbid] = fn;
    return 1;
}

EXPORT int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t *info) {
    if (!info) return 0;
    if (info->moduleId == NVTX_EXT_MODULEID_MEM) {
        set_slot(info, NVTX3EXT_CBID_nvtxMemHeapRegister, (intptr_t)mem_heap_register);
        set_slot(info, NVTX3EXT_CBID_nvtxMemHeapUnregister, (intptr_t)mem_heap_unregister);
        set_slot(info, NVTX3EXT_CBID_nvtxMemRegionsRegister, (intptr_t)mem_regions_register);
        set_slot(info, NVTX3EXT_CBID_nvtxMemRegionsUnregister, (intptr_t)mem_regions_unregister);
        set_slot(info, NVTX3EXT_CBID_nvtxMemRegionsName, (intptr_t)mem_regions_name);
        note("attached mem");
    } else if (info->moduleId == NVTX_EXT_COUNTERS_MODULEID) {
        set_slot(info, NVTX3EXT_CBID_nvtxCounterRegister, (intptr_t)counter_register);
        set_slot(info, NVTX3EXT_CBID_nvtxCounterSampleInt64, (intptr_t)counter_sample_int64);
        note("attached counters");
    }
    return 1;   /* stay attached; modules we do not know keep no-op slots */
}
