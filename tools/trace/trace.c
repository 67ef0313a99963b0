/* trace.c — see trace.h. */
#include "trace.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "read/json_out.h"
#include "read/scopestack.h"

#define MAX_DEPTH 64
#define GPU_TID_BASE 1000000u


static void us(FILE *f, uint64_t rel_ns) { fprintf(f, "%" PRIu64 ".%03u", rel_ns / 1000, (unsigned)(rel_ns % 1000)); }

/* A track of the trace: one OS thread. Its name is the last one the program gave it
   (dpmem_thread_name), else "thread N", N its tid (the kit's thread index for the first OS thread
   of an index); written once per track, after the events, when every name is known. */
typedef struct { uint32_t tid; char name[256]; } Track;

static void thread_name(FILE *f, uint64_t pid, uint32_t tid, const char *name) {
    fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%" PRIu64 ",\"tid\":%u,\"args\":{\"name\":", pid, tid);
    json_write_string(f, name);
    fputs("}}", f);
}

static const char *track_name(const Track *k, char *buf, size_t n) {
    if (*k->name) return k->name;
    snprintf(buf, n, "thread %u", k->tid);
    return buf;
}

/* One log's process as it is written (write_process): the tracks of its threads, the live bytes for the
   counters, the open scopes. A thread index is one OS thread at a time: a thread that exits hands its
   index (and chunk) to the next new one, which announces itself by a THREAD event. Each OS thread gets
   its own track: the first keeps the index as its tid, each later one a fresh tid above every index. */
typedef struct {
    const DpmemLog *L;
    FILE *f;
    uint64_t pid, origin;
    uint64_t *live, total;           /* per category (n_cats: untagged), and their sum */
    ScopeStacks st;                  /* per thread: the name ids of its open scopes */
    uint32_t *tid, next_tid;         /* per thread slot: the tid of its current track */
    uint32_t *track, n_tracks, cap_tracks;   /* per thread slot: its current track */
    Track *tracks;
    uint64_t *os_tid;                /* per thread slot: its OS thread, once named */
    uint8_t *named;                  /* per thread slot: a THREAD event came */
    int gpu_named[64];               /* a GPU track of that thread index has events */
    int oom;
} Proc;

static void proc_free(Proc *P) {
    free(P->live); free(P->tid); free(P->track); free(P->tracks); free(P->os_tid); free(P->named);
    scopestacks_free(&P->st);
}

/* 0, or -1 (everything freed) when memory ran out. */
static int proc_init(Proc *P, const DpmemLog *L, FILE *f, uint64_t pid, uint64_t origin) {
    memset(P, 0, sizeof *P);
    P->L = L; P->f = f; P->pid = pid; P->origin = origin;
    P->live = calloc(L->n_cats + 1, sizeof *P->live);
    if (!P->live || scopestacks_init(&P->st, L->n_threads, sizeof(uint32_t), MAX_DEPTH)) { proc_free(P); return -1; }
    P->next_tid = 1;
    P->tid = malloc((L->n_threads + 1) * sizeof *P->tid);
    P->track = malloc((L->n_threads + 1) * sizeof *P->track);
    P->n_tracks = L->n_threads; P->cap_tracks = L->n_threads + 1;
    P->tracks = calloc(P->cap_tracks, sizeof *P->tracks);
    P->os_tid = calloc(L->n_threads + 1, sizeof *P->os_tid);
    P->named = calloc(L->n_threads + 1, 1);
    if (!P->tid || !P->track || !P->tracks || !P->os_tid || !P->named) { proc_free(P); return -1; }
    for (uint32_t t = 0; t < L->n_threads; t++) {
        P->tid[t] = L->threads[t].index;
        P->track[t] = t;
        P->tracks[t].tid = P->tid[t];
        if (L->threads[t].index >= P->next_tid) P->next_tid = L->threads[t].index + 1;
    }
    return 0;
}

/* THREAD: a new OS thread on this index gets a new track; the name (a later one replaces an earlier
   one; none keeps it) is written with the tracks at the end. */
static void on_thread(Proc *P, const DpmemEvent *e) {
    uint64_t os = dpmem_ev_u64(e, 0);
    if (P->named[e->slot] && os != P->os_tid[e->slot] && P->next_tid < GPU_TID_BASE) {
        if (P->n_tracks == P->cap_tracks) {
            Track *g = realloc(P->tracks, 2 * P->cap_tracks * sizeof *g);
            if (!g) { P->oom = 1; return; }
            P->tracks = g;
            P->cap_tracks *= 2;
        }
        P->tid[e->slot] = P->next_tid++;
        P->tracks[P->n_tracks] = (Track){ .tid = P->tid[e->slot] };
        P->track[e->slot] = P->n_tracks++;
    }
    const char *nm = (const char *)e->p + 8;
    if (*nm) snprintf(P->tracks[P->track[e->slot]].name, sizeof P->tracks[0].name, "%.*s", (int)(e->n > 8 ? e->n - 8 : 0), nm);
    P->named[e->slot] = 1;
    P->os_tid[e->slot] = os;
}

static void write_scope(Proc *P, const DpmemEvent *e, uint64_t rel) {
    FILE *f = P->f;
    if (e->type == DPMEM_EV_BEGIN) {
        uint32_t *o = scopestack_push(&P->st, e->slot, &P->oom);
        if (o) *o = e->id;
    } else {
        void *o;
        if (!scopestack_pop(&P->st, e->slot, &o)) return;   /* an END without its BEGIN (cut at the start): skip */
    }
    fprintf(f, ",\n{\"ph\":\"%s\",\"name\":", e->type == DPMEM_EV_BEGIN ? "B" : "E");
    json_write_string(f, dpmem_log_string(P->L, e->id));
    fprintf(f, ",\"cat\":\"scope\",\"pid\":%" PRIu64 ",\"tid\":%u,\"ts\":", P->pid, P->tid[e->slot]);
    us(f, rel);
    fputc('}', f);
}

/* ALLOC, FREE: an instant event (unless --no-allocs) and the counters of its category and the total. */
static void write_memory(Proc *P, const DpmemEvent *e, uint64_t rel, const TraceOptions *o) {
    FILE *f = P->f;
    const DpmemLog *L = P->L;
    uint64_t bytes = dpmem_ev_u64(e, 8);
    int32_t c = dpmem_log_category(L, e->id);
    uint32_t ci = c < 0 ? L->n_cats : (uint32_t)c;
    if (e->type == DPMEM_EV_ALLOC) { P->live[ci] += bytes; P->total += bytes; }
    else { uint64_t d = bytes < P->live[ci] ? bytes : P->live[ci]; P->live[ci] -= d; P->total -= d; }
    if (!o->no_allocs) {
        fprintf(f, ",\n{\"ph\":\"i\",\"s\":\"t\",\"name\":\"%s ", e->type == DPMEM_EV_ALLOC ? "alloc" : "free");
        json_write_escaped(f, dpmem_log_string(L, e->id));
        fprintf(f, "\",\"cat\":\"memory\",\"pid\":%" PRIu64 ",\"tid\":%u,\"ts\":", P->pid, P->tid[e->slot]);
        us(f, rel);
        fprintf(f, ",\"args\":{\"bytes\":%" PRIu64 ",\"address\":\"0x%" PRIx64 "\",\"space\":\"%s\"}}", bytes, dpmem_ev_u64(e, 0), dpmem_space_name(e->aux));
    }
    fprintf(f, ",\n{\"ph\":\"C\",\"name\":");
    char cn[300];
    snprintf(cn, sizeof cn, "live %s", c < 0 ? "?" : L->cats[c]);
    json_write_string(f, cn);
    fprintf(f, ",\"pid\":%" PRIu64 ",\"ts\":", P->pid);
    us(f, rel);
    fprintf(f, ",\"args\":{\"bytes\":%" PRIu64 "}},\n{\"ph\":\"C\",\"name\":\"live total\",\"pid\":%" PRIu64 ",\"ts\":", P->live[ci], P->pid);
    us(f, rel);
    fprintf(f, ",\"args\":{\"bytes\":%" PRIu64 "}}", P->total);
}

static void write_gpu_time(Proc *P, const DpmemEvent *e) {
    FILE *f = P->f;
    uint32_t thread = dpmem_ev_u32(e, 0);
    uint64_t b = dpmem_ev_u64(e, 8), g = dpmem_ev_u64(e, 16);
    uint64_t brel = b >= P->origin ? b - P->origin : 0;
    if (thread < 64) P->gpu_named[thread] = 1;
    fprintf(f, ",\n{\"ph\":\"X\",\"name\":");
    json_write_string(f, dpmem_log_string(P->L, e->id));
    fprintf(f, ",\"cat\":\"gpu\",\"pid\":%" PRIu64 ",\"tid\":%u,\"ts\":", P->pid, GPU_TID_BASE + (thread % GPU_TID_BASE));
    us(f, brel);
    fputs(",\"dur\":", f);
    us(f, g);
    fputc('}', f);
}

static void write_snapshot(Proc *P, const DpmemEvent *e, uint64_t rel) {
    FILE *f = P->f;
    fprintf(f, ",\n{\"ph\":\"i\",\"s\":\"g\",\"name\":");
    char sn[300];
    snprintf(sn, sizeof sn, "snapshot %s", dpmem_log_string(P->L, e->id));
    json_write_string(f, sn);
    fprintf(f, ",\"cat\":\"snapshot\",\"pid\":%" PRIu64 ",\"tid\":%u,\"ts\":", P->pid, P->tid[e->slot]);
    us(f, rel);
    fprintf(f, ",\"args\":{\"device_used\":%" PRIu64 ",\"device_total\":%" PRIu64 ",\"device_tracked\":%" PRIu64, dpmem_ev_u64(e, 0),
            dpmem_ev_u64(e, 8), dpmem_ev_u64(e, 16));
    for (uint32_t i = 0, n = dpmem_ev_u32(e, 24); i < n; i++) {
        char k[300];
        snprintf(k, sizeof k, "live %s", dpmem_log_string(P->L, dpmem_ev_u32(e, 32 + 16 * i)));
        fputc(',', f);
        json_write_string(f, k);
        fprintf(f, ":%" PRIu64, dpmem_ev_u64(e, 32 + 16 * i + 8));
    }
    fputs("}}", f);
}

/* WARN, OOM: an instant event of the process. */
static void write_health(Proc *P, const DpmemEvent *e, uint64_t rel) {
    FILE *f = P->f;
    fprintf(f, ",\n{\"ph\":\"i\",\"s\":\"p\",\"name\":");
    char wn[300];
    snprintf(wn, sizeof wn, "%s %s", e->type == DPMEM_EV_WARN ? "warning:" : "OOM:", dpmem_log_string(P->L, e->id));
    json_write_string(f, wn);
    fprintf(f, ",\"cat\":\"health\",\"pid\":%" PRIu64 ",\"tid\":%u,\"ts\":", P->pid, P->tid[e->slot]);
    us(f, rel);
    if (e->type == DPMEM_EV_WARN) fprintf(f, ",\"args\":{\"value\":%" PRIu64 "}}", dpmem_ev_u64(e, 0));
    else fprintf(f, ",\"args\":{\"requested\":%" PRIu64 ",\"device_used\":%" PRIu64 ",\"device_total\":%" PRIu64 ",\"space\":\"%s\"}}",
                 dpmem_ev_u64(e, 0), dpmem_ev_u64(e, 8), dpmem_ev_u64(e, 16), dpmem_space_name(e->aux));
}

/* Scopes open at a cut end at the last event (last), so that every B has its E; then one name per
   track, now that every THREAD event has been read, and a GPU track after its thread. */
static void finish_tracks(Proc *P, uint64_t last) {
    FILE *f = P->f;
    const DpmemLog *L = P->L;
    for (uint32_t t = 0; t < L->n_threads; t++)
        for (uint32_t d = scopestack_depth(&P->st, t); d-- > 0;) {
            fprintf(f, ",\n{\"ph\":\"E\",\"name\":");
            json_write_string(f, d < MAX_DEPTH ? dpmem_log_string(L, *(const uint32_t *)scopestack_at(&P->st, t, d)) : "?");
            fprintf(f, ",\"cat\":\"scope\",\"pid\":%" PRIu64 ",\"tid\":%u,\"ts\":", P->pid, P->tid[t]);
            us(f, last);
            fputs(",\"args\":{\"cut\":true}}", f);
        }
    char buf[260], gn[280];
    for (uint32_t k = 0; k < P->n_tracks; k++) thread_name(f, P->pid, P->tracks[k].tid, track_name(&P->tracks[k], buf, sizeof buf));
    for (uint32_t g = 0; g < 64; g++) {
        if (!P->gpu_named[g]) continue;
        const char *who = NULL;
        for (uint32_t k = 0; k < P->n_tracks && !who; k++)
            if (P->tracks[k].tid == g) who = track_name(&P->tracks[k], buf, sizeof buf);
        if (!who) { snprintf(buf, sizeof buf, "thread %u", g); who = buf; }
        snprintf(gn, sizeof gn, "GPU (%s)", who);
        thread_name(f, P->pid, GPU_TID_BASE + g, gn);
    }
}

/* One log's process: its name, its threads' names and every event, as pid, with times from origin.
   first: the first process of the file (no separator before it). */
static int write_process(const DpmemLog *L, FILE *f, const TraceOptions *o, uint64_t pid, uint64_t origin, int first) {
    Proc P;
    if (proc_init(&P, L, f, pid, origin)) return -1;
    char name[128];
    const char *run = dpmem_log_run_name(L, name, sizeof name);
    fprintf(f, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%" PRIu64 ",\"args\":{\"name\":", first ? "" : ",\n", pid);
    char pname[200];
    snprintf(pname, sizeof pname, "dpmem: %s", run);
    json_write_string(f, pname);
    fputs("}}", f);
    DpmemIter it;
    if (dpmem_iter_begin(&it, L)) { proc_free(&P); return -1; }
    DpmemEvent e;
    uint64_t last = 0;
    while (dpmem_iter_next(&it, &e)) {
        uint64_t rel = e.ts >= origin ? e.ts - origin : 0;
        last = rel;
        switch (e.type) {
        case DPMEM_EV_THREAD: on_thread(&P, &e); break;
        case DPMEM_EV_BEGIN: case DPMEM_EV_END: write_scope(&P, &e, rel); break;
        case DPMEM_EV_ALLOC: case DPMEM_EV_FREE: write_memory(&P, &e, rel, o); break;
        case DPMEM_EV_GPU_TIME: write_gpu_time(&P, &e); break;
        case DPMEM_EV_SNAPSHOT: write_snapshot(&P, &e, rel); break;
        case DPMEM_EV_WARN: case DPMEM_EV_OOM: write_health(&P, &e, rel); break;
        case DPMEM_EV_DEVICE:
            fprintf(f, ",\n{\"ph\":\"C\",\"name\":\"device used\",\"pid\":%" PRIu64 ",\"ts\":", pid);
            us(f, rel);
            fprintf(f, ",\"args\":{\"bytes\":%" PRIu64 "}}", dpmem_ev_u64(&e, 0));
            break;
        default: break;
        }
    }
    dpmem_iter_end(&it);
    finish_tracks(&P, last);
    const int oom = P.oom;
    proc_free(&P);
    return ferror(f) || oom || dpmem_log_error(L) ? -1 : 0;
}

/* The process id of log i of n: a data-parallel rank's is rank + 1 (Perfetto orders processes by
   it), a lone log's its writer's pid; index + 1 where those would collide. */
static uint64_t pid_of(const DpmemLog *const *logs, int n, int i) {
    const char *w = dpmem_log_meta(logs[i], "comm.world_size"), *r = dpmem_log_meta(logs[i], "comm.rank");
    uint64_t pid = w && atoi(w) > 1 && r ? (uint64_t)atoi(r) + 1 : logs[i]->pid ? logs[i]->pid : 1;
    for (int j = 0; j < n; j++) {
        if (j == i) continue;
        const char *wj = dpmem_log_meta(logs[j], "comm.world_size"), *rj = dpmem_log_meta(logs[j], "comm.rank");
        uint64_t pj = wj && atoi(wj) > 1 && rj ? (uint64_t)atoi(rj) + 1 : logs[j]->pid ? logs[j]->pid : 1;
        if (pj == pid) return (uint64_t)i + 1;
    }
    return pid;
}

int trace_write_many(const DpmemLog *const *logs, int n, FILE *f, const TraceOptions *o) {
    if (n < 1) return -1;
    const DpmemLog *L = logs[0];
    char name[128];
    fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"run\":", f);
    json_write_string(f, dpmem_log_run_name(L, name, sizeof name));
    for (uint32_t i = 0; i < L->n_meta; i++) {
        const char *k = dpmem_log_string(L, L->meta[i].key);
        if (dpmem_log_meta(L, k) != dpmem_log_string(L, L->meta[i].value) || !strcmp(k, "run")) continue;   /* last wins */
        fputc(',', f);
        json_write_string(f, k);
        fputc(':', f);
        json_write_string(f, dpmem_log_string(L, L->meta[i].value));
    }
    int closed = 1;
    uint64_t origin = L->t0;   /* several logs (the ranks of one machine): one clock, CLOCK_MONOTONIC-based */
    for (int i = 0; i < n; i++) { closed &= logs[i]->closed != 0; if (logs[i]->t0 < origin) origin = logs[i]->t0; }
    fprintf(f, ",\"closed\":%s", closed ? "true" : "false");
    if (n > 1) fprintf(f, ",\"logs\":%d", n);
    fputs("},\n\"traceEvents\":[\n", f);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = write_process(logs[i], f, o, n > 1 ? pid_of(logs, n, i) : (L->pid ? L->pid : 1), origin, i == 0);
    fputs("\n]}\n", f);
    return rc || ferror(f) ? -1 : 0;
}

int trace_write(const DpmemLog *L, FILE *f, const TraceOptions *o) { return trace_write_many(&L, 1, f, o); }
