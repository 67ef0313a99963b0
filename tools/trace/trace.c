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

/* One log's process: its name, its threads' names and every event, as pid, with times from origin.
   first: the first process of the file (no separator before it). */
static int write_process(const DpmemLog *L, FILE *f, const TraceOptions *o, uint64_t pid, uint64_t origin, int first) {
    uint32_t nc = L->n_cats;
    uint64_t *live = calloc(nc + 1, sizeof *live), total = 0;
    ScopeStacks st = { 0 };   /* per thread: the name ids of its open scopes */
    if (!live || scopestacks_init(&st, L->n_threads, sizeof(uint32_t), MAX_DEPTH)) { free(live); scopestacks_free(&st); return -1; }
    char name[128];
    const char *run = dpmem_log_run_name(L, name, sizeof name);
    fprintf(f, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%" PRIu64 ",\"args\":{\"name\":", first ? "" : ",\n", pid);
    char pname[200];
    snprintf(pname, sizeof pname, "dpmem: %s", run);
    json_write_string(f, pname);
    fputs("}}", f);
    /* A thread index is one OS thread at a time: a thread that exits hands its index (and chunk) to
       the next new one, which announces itself by a THREAD event. Each OS thread gets its own track:
       the first keeps the index as its tid, each later one a fresh tid above every index. Threads
       without a THREAD event are named here; the others at their THREAD event. */
    uint32_t *tid = malloc((L->n_threads + 1) * sizeof *tid), next_tid = 1;
    uint32_t *track = malloc((L->n_threads + 1) * sizeof *track), n_tracks = L->n_threads, cap_tracks = L->n_threads + 1;
    Track *tracks = calloc(cap_tracks, sizeof *tracks);
    uint64_t *os_tid = calloc(L->n_threads + 1, sizeof *os_tid);
    uint8_t *named = calloc(L->n_threads + 1, 1);
#define TRACE_FREE() do { free(live); free(tid); free(track); free(tracks); free(os_tid); free(named); scopestacks_free(&st); } while (0)
    if (!tid || !track || !tracks || !os_tid || !named) { TRACE_FREE(); return -1; }
    for (uint32_t t = 0; t < L->n_threads; t++) {
        tid[t] = L->threads[t].index;
        track[t] = t;
        tracks[t].tid = tid[t];
        if (L->threads[t].index >= next_tid) next_tid = L->threads[t].index + 1;
    }
    DpmemIter it;
    if (dpmem_iter_begin(&it, L)) { TRACE_FREE(); return -1; }
    int oom = 0;
    DpmemEvent e;
    uint64_t last = 0;
    int gpu_named[64] = { 0 };
    while (dpmem_iter_next(&it, &e)) {
        uint64_t rel = e.ts >= origin ? e.ts - origin : 0;
        last = rel;
        switch (e.type) {
        case DPMEM_EV_THREAD: {
            uint64_t os = dpmem_ev_u64(&e, 0);
            if (named[e.slot] && os != os_tid[e.slot] && next_tid < GPU_TID_BASE) {   /* a new OS thread on this index: a new track */
                if (n_tracks == cap_tracks) {
                    Track *g = realloc(tracks, 2 * cap_tracks * sizeof *g);
                    if (!g) { oom = 1; break; }
                    tracks = g;
                    cap_tracks *= 2;
                }
                tid[e.slot] = next_tid++;
                tracks[n_tracks] = (Track){ .tid = tid[e.slot] };
                track[e.slot] = n_tracks++;
            }
            const char *nm = (const char *)e.p + 8;   /* a later name replaces an earlier one; none keeps it */
            if (*nm) snprintf(tracks[track[e.slot]].name, sizeof tracks[0].name, "%.*s", (int)(e.n > 8 ? e.n - 8 : 0), nm);
            named[e.slot] = 1;
            os_tid[e.slot] = os;
            break;
        }
        case DPMEM_EV_BEGIN: case DPMEM_EV_END: {
            if (e.type == DPMEM_EV_BEGIN) {
                uint32_t *o = scopestack_push(&st, e.slot, &oom);
                if (o) *o = e.id;
            } else {
                void *o;
                if (!scopestack_pop(&st, e.slot, &o)) break;   /* an END without its BEGIN (cut at the start): skip */
            }
            fprintf(f, ",\n{\"ph\":\"%s\",\"name\":", e.type == DPMEM_EV_BEGIN ? "B" : "E");
            json_write_string(f, dpmem_log_string(L, e.id));
            fprintf(f, ",\"cat\":\"scope\",\"pid\":%" PRIu64 ",\"tid\":%u,\"ts\":", pid, tid[e.slot]);
            us(f, rel);
            fputc('}', f);
            break;
        }
        case DPMEM_EV_ALLOC: case DPMEM_EV_FREE: {
            uint64_t bytes = dpmem_ev_u64(&e, 8);
            int32_t c = dpmem_log_category(L, e.id);
            uint32_t ci = c < 0 ? nc : (uint32_t)c;
            if (e.type == DPMEM_EV_ALLOC) { live[ci] += bytes; total += bytes; }
            else { uint64_t d = bytes < live[ci] ? bytes : live[ci]; live[ci] -= d; total -= d; }
            if (!o->no_allocs) {
                fprintf(f, ",\n{\"ph\":\"i\",\"s\":\"t\",\"name\":\"%s ", e.type == DPMEM_EV_ALLOC ? "alloc" : "free");
                json_write_escaped(f, dpmem_log_string(L, e.id));
                fprintf(f, "\",\"cat\":\"memory\",\"pid\":%" PRIu64 ",\"tid\":%u,\"ts\":", pid, tid[e.slot]);
                us(f, rel);
                fprintf(f, ",\"args\":{\"bytes\":%" PRIu64 ",\"address\":\"0x%" PRIx64 "\",\"space\":\"%s\"}}", bytes, dpmem_ev_u64(&e, 0), dpmem_space_name(e.aux));
            }
            fprintf(f, ",\n{\"ph\":\"C\",\"name\":");
            char cn[300];
            snprintf(cn, sizeof cn, "live %s", c < 0 ? "?" : L->cats[c]);
            json_write_string(f, cn);
            fprintf(f, ",\"pid\":%" PRIu64 ",\"ts\":", pid);
            us(f, rel);
            fprintf(f, ",\"args\":{\"bytes\":%" PRIu64 "}},\n{\"ph\":\"C\",\"name\":\"live total\",\"pid\":%" PRIu64 ",\"ts\":", live[ci], pid);
            us(f, rel);
            fprintf(f, ",\"args\":{\"bytes\":%" PRIu64 "}}", total);
            break;
        }
        case DPMEM_EV_GPU_TIME: {
            uint32_t thread = dpmem_ev_u32(&e, 0);
            uint64_t b = dpmem_ev_u64(&e, 8), g = dpmem_ev_u64(&e, 16);
            uint64_t brel = b >= origin ? b - origin : 0;
            if (thread < 64) gpu_named[thread] = 1;
            fprintf(f, ",\n{\"ph\":\"X\",\"name\":");
            json_write_string(f, dpmem_log_string(L, e.id));
            fprintf(f, ",\"cat\":\"gpu\",\"pid\":%" PRIu64 ",\"tid\":%u,\"ts\":", pid, GPU_TID_BASE + (thread % GPU_TID_BASE));
            us(f, brel);
            fputs(",\"dur\":", f);
            us(f, g);
            fputc('}', f);
            break;
        }
        case DPMEM_EV_SNAPSHOT: {
            fprintf(f, ",\n{\"ph\":\"i\",\"s\":\"g\",\"name\":");
            char sn[300];
            snprintf(sn, sizeof sn, "snapshot %s", dpmem_log_string(L, e.id));
            json_write_string(f, sn);
            fprintf(f, ",\"cat\":\"snapshot\",\"pid\":%" PRIu64 ",\"tid\":%u,\"ts\":", pid, tid[e.slot]);
            us(f, rel);
            fprintf(f, ",\"args\":{\"device_used\":%" PRIu64 ",\"device_total\":%" PRIu64 ",\"device_tracked\":%" PRIu64, dpmem_ev_u64(&e, 0),
                    dpmem_ev_u64(&e, 8), dpmem_ev_u64(&e, 16));
            for (uint32_t i = 0, n = dpmem_ev_u32(&e, 24); i < n; i++) {
                char k[300];
                snprintf(k, sizeof k, "live %s", dpmem_log_string(L, dpmem_ev_u32(&e, 32 + 16 * i)));
                fputc(',', f);
                json_write_string(f, k);
                fprintf(f, ":%" PRIu64, dpmem_ev_u64(&e, 32 + 16 * i + 8));
            }
            fputs("}}", f);
            break;
        }
        case DPMEM_EV_WARN: case DPMEM_EV_OOM: {
            fprintf(f, ",\n{\"ph\":\"i\",\"s\":\"p\",\"name\":");
            char wn[300];
            snprintf(wn, sizeof wn, "%s %s", e.type == DPMEM_EV_WARN ? "warning:" : "OOM:", dpmem_log_string(L, e.id));
            json_write_string(f, wn);
            fprintf(f, ",\"cat\":\"health\",\"pid\":%" PRIu64 ",\"tid\":%u,\"ts\":", pid, tid[e.slot]);
            us(f, rel);
            if (e.type == DPMEM_EV_WARN) fprintf(f, ",\"args\":{\"value\":%" PRIu64 "}}", dpmem_ev_u64(&e, 0));
            else fprintf(f, ",\"args\":{\"requested\":%" PRIu64 ",\"device_used\":%" PRIu64 ",\"device_total\":%" PRIu64 ",\"space\":\"%s\"}}",
                         dpmem_ev_u64(&e, 0), dpmem_ev_u64(&e, 8), dpmem_ev_u64(&e, 16), dpmem_space_name(e.aux));
            break;
        }
        case DPMEM_EV_DEVICE:
            fprintf(f, ",\n{\"ph\":\"C\",\"name\":\"device used\",\"pid\":%" PRIu64 ",\"ts\":", pid);
            us(f, rel);
            fprintf(f, ",\"args\":{\"bytes\":%" PRIu64 "}}", dpmem_ev_u64(&e, 0));
            break;
        default: break;
        }
    }
    dpmem_iter_end(&it);
    /* Scopes open at a cut end at the last event, so that every B has its E. */
    for (uint32_t t = 0; t < L->n_threads; t++)
        for (uint32_t d = scopestack_depth(&st, t); d-- > 0;) {
            fprintf(f, ",\n{\"ph\":\"E\",\"name\":");
            json_write_string(f, d < MAX_DEPTH ? dpmem_log_string(L, *(const uint32_t *)scopestack_at(&st, t, d)) : "?");
            fprintf(f, ",\"cat\":\"scope\",\"pid\":%" PRIu64 ",\"tid\":%u,\"ts\":", pid, tid[t]);
            us(f, last);
            fputs(",\"args\":{\"cut\":true}}", f);
        }
    /* One name per track, now that every THREAD event has been read; a GPU track after its thread. */
    char buf[260], gn[280];
    for (uint32_t k = 0; k < n_tracks; k++) thread_name(f, pid, tracks[k].tid, track_name(&tracks[k], buf, sizeof buf));
    for (uint32_t g = 0; g < 64; g++) {
        if (!gpu_named[g]) continue;
        const char *who = NULL;
        for (uint32_t k = 0; k < n_tracks && !who; k++)
            if (tracks[k].tid == g) who = track_name(&tracks[k], buf, sizeof buf);
        if (!who) { snprintf(buf, sizeof buf, "thread %u", g); who = buf; }
        snprintf(gn, sizeof gn, "GPU (%s)", who);
        thread_name(f, pid, GPU_TID_BASE + g, gn);
    }
    TRACE_FREE();
#undef TRACE_FREE
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
