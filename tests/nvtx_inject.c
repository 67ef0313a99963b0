/* nvtx_inject.c — an NVTX injection library that records range pushes and pops, for the tests.

   This is how Nsight Systems sees a program: NVTX dlopen()s the library named by
   NVTX_INJECTION64_PATH at its first call and asks it to fill in the function table. We implement
   the calls dpmem makes (DomainCreateA, DomainRegisterStringA, DomainRangePushEx, DomainRangePop)
   and let the test read back what was captured through nvtx_capture_*(). It does no profiling. */
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef struct { char kind; char name[64]; uint32_t color; unsigned long thread; char domain[32]; } Capture;

enum { MAX_CAPTURES = 1 << 16, MAX_HANDLES = 1024 };
static Capture captures[MAX_CAPTURES];
static int ncaptures;
static char domains[MAX_HANDLES][32]; static int ndomains;
static char strings[MAX_HANDLES][64]; static int nstrings;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* Handles are 1-based indexes disguised as pointers (NVTX treats them as opaque). */
static nvtxDomainHandle_t my_domain_create(const char *name) {
    pthread_mutex_lock(&mu);
    int i = ndomains < MAX_HANDLES ? ndomains++ : MAX_HANDLES - 1;
    snprintf(domains[i], sizeof domains[i], "%s", name);
    pthread_mutex_unlock(&mu);
    return (nvtxDomainHandle_t)(uintptr_t)(i + 1);
}

static nvtxStringHandle_t my_register_string(nvtxDomainHandle_t d, const char *s) {
    (void)d;
    pthread_mutex_lock(&mu);
    int i = nstrings < MAX_HANDLES ? nstrings++ : MAX_HANDLES - 1;
    snprintf(strings[i], sizeof strings[i], "%s", s);
    pthread_mutex_unlock(&mu);
    return (nvtxStringHandle_t)(uintptr_t)(i + 1);
}

static void record(char kind, nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    pthread_mutex_lock(&mu);
    if (ncaptures < MAX_CAPTURES) {
        Capture *c = &captures[ncaptures++];
        memset(c, 0, sizeof *c);
        c->kind = kind;
        c->thread = (unsigned long)pthread_self();
        uintptr_t di = (uintptr_t)d;
        if (di >= 1 && di <= (uintptr_t)ndomains) snprintf(c->domain, sizeof c->domain, "%s", domains[di - 1]);
        if (a) {
            c->color = a->colorType == NVTX_COLOR_ARGB ? a->color : 0;
            if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED) {
                uintptr_t si = (uintptr_t)a->message.registered;
                if (si >= 1 && si <= (uintptr_t)nstrings) snprintf(c->name, sizeof c->name, "%s", strings[si - 1]);
            } else if (a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii) {
                snprintf(c->name, sizeof c->name, "%s", a->message.ascii);
            }
        }
    }
    pthread_mutex_unlock(&mu);
}
static int my_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) { record('P', d, a); return 0; }
static int my_pop(nvtxDomainHandle_t d) { record('O', d, NULL); return 0; }
static int my_push_a(const char *msg) {
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.messageType = NVTX_MESSAGE_TYPE_ASCII; a.message.ascii = msg;
    record('P', NULL, &a);
    return 0;
}
static int my_pop_plain(void) { record('O', NULL, NULL); return 0; }

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
    const NvtxExportTableCallbacks *cb = (const NvtxExportTableCallbacks *)get(NVTX_ETID_CALLBACKS);
    if (!cb) return 0;
    NvtxFunctionTable core2 = NULL, core = NULL;
    unsigned int n2 = 0, n = 0;
    if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &n2) || !core2) return 0;
    *core2[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)my_domain_create;
    *core2[NVTX_CBID_CORE2_DomainRegisterStringA] = (NvtxFunctionPointer)my_register_string;
    *core2[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)my_push_ex;
    *core2[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)my_pop;
    if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &n) && core) {
        *core[NVTX_CBID_CORE_RangePushA] = (NvtxFunctionPointer)my_push_a;
        *core[NVTX_CBID_CORE_RangePop] = (NvtxFunctionPointer)my_pop_plain;
    }
    return 1;
}

/* For the test: what was captured. */
int nvtx_capture_count(void) { return ncaptures; }
const char *nvtx_capture_get(int i, char *kind, uint32_t *color, unsigned long *thread, const char **domain) {
    *kind = captures[i].kind; *color = captures[i].color; *thread = captures[i].thread; *domain = captures[i].domain;
    return captures[i].name;
}
