/* nvtx_inject_ext.c — an NVTX *extension* injection library that records the memory-region and
   counter calls a program makes, so that tests can check them without Nsight or a GPU.

   Load it like a tool: NVTX_INJECTION64_PATH=/path/libnvtx_inject_ext.so. NVTX calls
   InitializeInjectionNvtxExtension once per extension module (nvtxDetail/nvtxExtInit.h); we fill the
   slots of the memory module (nvToolsExtMem.h) and of the counters module (nvToolsExtCounters.h).
   Every captured call appends one line to a text record that the test reads in-process through
   nvtx_inject_ext_record() (dlopen the same path, dlsym):
       region+ <ptr> <bytes>       nvtxMemRegionsRegister, one line per region
       region- <ptr>               nvtxMemRegionsUnregister (by pointer)
       name <ptr> <text>           nvtxMemRegionsName (ASCII names)
       counter <id> <name>         nvtxCounterRegister
       sample <id> <value>         nvtxCounterSampleInt64
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

static void mem_regions_register(nvtxDomainHandle_t domain, nvtxMemRegionsRegisterBatch_t const *b) {
    (void)domain;
    if (!b || b->regionType != NVTX_MEM_TYPE_VIRTUAL_ADDRESS) { note("region+ unsupported"); return; }
    for (size_t i = 0; i < b->regionCount; i++) {
        const nvtxMemVirtualRangeDesc_t *r =
            (const nvtxMemVirtualRangeDesc_t *)((const char *)b->regionDescElements + i * b->regionDescElementSize);
        note("region+ %p %zu", r->ptr, r->size);
        if (b->regionHandleElementsOut) b->regionHandleElementsOut[i] = (nvtxMemRegionHandle_t)(uintptr_t)r->ptr;
    }
}

static void mem_regions_unregister(nvtxDomainHandle_t domain, nvtxMemRegionsUnregisterBatch_t const *b) {
    (void)domain;
    if (!b || b->refType != NVTX_MEM_REGION_REF_TYPE_POINTER) { note("region- unsupported"); return; }
    for (size_t i = 0; i < b->refCount; i++) {
        const nvtxMemRegionRef_t *r = (const nvtxMemRegionRef_t *)((const char *)b->refElements + i * b->refElementSize);
        note("region- %p", r->pointer);
    }
}

static void mem_regions_name(nvtxDomainHandle_t domain, nvtxMemRegionsNameBatch_t const *b) {
    (void)domain;
    if (!b) return;
    for (size_t i = 0; i < b->regionCount; i++) {
        const nvtxMemRegionNameDesc_t *d =
            (const nvtxMemRegionNameDesc_t *)((const char *)b->regionElements + i * b->regionElementSize);
        if (d->regionRefType != NVTX_MEM_REGION_REF_TYPE_POINTER || d->nameType != NVTX_MESSAGE_TYPE_ASCII) {
            note("name unsupported");
            continue;
        }
        note("name %p %s", d->region.pointer, d->name.ascii ? d->name.ascii : "(null)");
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
