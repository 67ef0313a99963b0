/* comm.c — ranks and collectives over MPI (see comm.h). Built with HAVE_MPI where mpicc was found
   (mk/comm.mk); without it a process is always one rank and a launcher's environment is refused.
   Collectives are non-blocking calls completed by polling (MPI_Test), so that a wait can end: a rank
   that died would otherwise leave the others blocked in MPI_Allreduce forever. */
#include "comm.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef HAVE_MPI
#include <mpi.h>
#endif
#if defined(HAVE_MPI) && defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

Comm g_comm = { 0, 1, 0, 0, 0, 600.0, "none" };
int (*comm_device_start)(Comm *c, CommOp op, void *dev, size_t count, const char *what, CommRequest *r) = NULL;
int (*comm_device_test)(Comm *c, CommRequest *r, int *done) = NULL;
int (*comm_device_wait)(Comm *c, CommRequest *r) = NULL;
int (*comm_device_allgatherv_start)(Comm *c, void *dev, const size_t *lo, const size_t *len, size_t elem, const char *what,
                                    CommRequest *r) = NULL;

static const char *launcher_env(void) {
    static const char *const names[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", NULL };
    for (int i = 0; names[i]; i++)
        if (getenv(names[i])) return names[i];
    return NULL;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int comm_init(Comm *c) {
    if (c->mpi) return 0;
    const char *to = getenv("DPMEM_COMM_TIMEOUT");
    if (to && *to) {
        char *end;
        double v = strtod(to, &end);
        if (*end || !(v > 0)) { fprintf(stderr, "error: DPMEM_COMM_TIMEOUT must be a number of seconds, got '%s'\n", to); return -1; }
        c->timeout_s = v;
    }
    const char *env = launcher_env();
    if (!env) return 0;
#ifdef HAVE_MPI
    int provided = 0;
#ifdef __SANITIZE_ADDRESS__
    /* MPI_Init loads plugins, keeps some of what they allocate and unloads the ones it does not
       select: those stacks end in unloaded code that no suppression can name. */
    __lsan_disable();
#endif
    int init_rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
#ifdef __SANITIZE_ADDRESS__
    __lsan_enable();
#endif
    if (init_rc != MPI_SUCCESS) {
        fprintf(stderr, "error: launched by an MPI launcher (%s is set) but MPI_Init failed\n", env);
        return -1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->world);
    MPI_Comm node;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &c->local_rank);
        MPI_Comm_free(&node);
    }
    c->mpi = 1;
    c->backend = "mpi";
    return 0;
#else
    fprintf(stderr, "error: launched by an MPI launcher (%s is set), but this build has no MPI "
            "(install OpenMPI, e.g. apt-get install libopenmpi-dev, and rebuild)\n", env);
    return -1;
#endif
}

void comm_plan_ranks(Comm *c, int ranks) {
    if (c->mpi || ranks <= 1) return;
    c->world = ranks;
    c->rank = 0;
    c->planned = 1;
}

#if defined(HAVE_MPI) && defined(__SANITIZE_ADDRESS__)
/* What OpenMPI and PMIx allocate once and never free: not ours to report in a sanitized build
   (a library anywhere in the allocation's stack). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) {
    return "leak:libmpi.so\nleak:libopen-pal.so\nleak:libopen-rte.so\nleak:libpmix.so\n"
           "leak:/openmpi/lib/\nleak:libhwloc.so\nleak:libevent\n";
}
#endif

void comm_finalize(Comm *c) {
#ifdef HAVE_MPI
#ifdef __SANITIZE_ADDRESS__
    /* Our leaks are checked here, before MPI_Finalize: it unloads OpenMPI's plugins, and what they
       never freed would then be reported from unknown modules at exit (the check runs only once). */
    if (c->mpi) __lsan_do_leak_check();
#endif
    if (c->mpi) MPI_Finalize();
#endif
    c->mpi = 0;
}

void comm_abort(Comm *c, int code) {
#ifdef HAVE_MPI
    if (c->mpi) MPI_Abort(MPI_COMM_WORLD, code);
#endif
    (void)c;
    exit(code);
}

#ifdef HAVE_MPI
/* Completes a request within the timeout; a few milliseconds of spinning (latency), then polls with
   short sleeps (so a waiting rank leaves the core to the ranks still computing). */
static int wait_request(Comm *c, MPI_Request *req, const char *what) {
    const double t0 = now_s();
    for (long k = 0;; k++) {
        int done = 0;
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            fprintf(stderr, "error: rank %d: %s failed in MPI (another rank died?)\n", c->rank, what);
            return -1;
        }
        if (done) return 0;
        const double el = now_s() - t0;
        if (el > c->timeout_s) {
            fprintf(stderr, "error: rank %d: %s did not complete in %.0f s (DPMEM_COMM_TIMEOUT): another rank died "
                    "or is stuck; ending the job\n", c->rank, what, c->timeout_s);
            return -1;
        }
        if (el > 0.002) {
            struct timespec ts = { 0, 100000 };   /* 0.1 ms */
            nanosleep(&ts, NULL);
        }
    }
}

static int allreduce(Comm *c, void *buf, size_t n, MPI_Datatype type, size_t elem, const char *what) {
    /* MPI counts are int: large buffers go in pieces */
    const size_t piece = (size_t)1 << 30;
    for (size_t off = 0; off < n; off += piece) {
        const size_t k = n - off < piece ? n - off : piece;
        MPI_Request req;
        if (MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + off * elem, (int)k, type, MPI_SUM, MPI_COMM_WORLD, &req) != MPI_SUCCESS) {
            fprintf(stderr, "error: rank %d: %s could not start in MPI\n", c->rank, what);
            return -1;
        }
        if (wait_request(c, &req, what)) return -1;
    }
    return 0;
}
#endif

int comm_allreduce_float(Comm *c, float *buf, size_t n, const char *what) {
#ifdef HAVE_MPI
    if (c->mpi && c->world > 1) return allreduce(c, buf, n, MPI_FLOAT, sizeof(float), what);
#endif
    (void)c; (void)buf; (void)n; (void)what;
    return 0;
}

int comm_allreduce_double(Comm *c, double *buf, size_t n, const char *what) {
#ifdef HAVE_MPI
    if (c->mpi && c->world > 1) return allreduce(c, buf, n, MPI_DOUBLE, sizeof(double), what);
#endif
    (void)c; (void)buf; (void)n; (void)what;
    return 0;
}

int comm_reduce_scatter_float(Comm *c, float *buf, size_t count, const char *what) {
#ifdef HAVE_MPI
    if (c->mpi && c->world > 1) {
        if (count > (size_t)1 << 30) { fprintf(stderr, "error: rank %d: %s: %zu floats a rank in one call\n", c->rank, what, count); return -1; }
        MPI_Request req;
        /* in place: the input is the whole buffer, this rank's sum lands at its start */
        if (MPI_Ireduce_scatter_block(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req) != MPI_SUCCESS) {
            fprintf(stderr, "error: rank %d: %s could not start in MPI\n", c->rank, what);
            return -1;
        }
        if (wait_request(c, &req, what)) return -1;
        if (c->rank > 0) memmove(buf + (size_t)c->rank * count, buf, count * sizeof *buf);   /* to this rank's part */
        return 0;
    }
#endif
    (void)c; (void)buf; (void)count; (void)what;
    return 0;
}

#ifdef HAVE_MPI
/* In place: every rank's own part of buf (count elements of type t at rank·count) to every rank. */
static int allgather(Comm *c, void *buf, size_t count, MPI_Datatype t, const char *what) {
    if (count > (size_t)1 << 30) { fprintf(stderr, "error: rank %d: %s: %zu elements a rank in one call\n", c->rank, what, count); return -1; }
    MPI_Request req;
    if (MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, (int)count, t, MPI_COMM_WORLD, &req) != MPI_SUCCESS) {
        fprintf(stderr, "error: rank %d: %s could not start in MPI\n", c->rank, what);
        return -1;
    }
    return wait_request(c, &req, what);
}
#endif

int comm_allgather_float(Comm *c, float *buf, size_t count, const char *what) {
#ifdef HAVE_MPI
    if (c->mpi && c->world > 1) return allgather(c, buf, count, MPI_FLOAT, what);
#endif
    (void)c; (void)buf; (void)count; (void)what;
    return 0;
}

int comm_allgather_bf16(Comm *c, void *buf, size_t count, const char *what) {
#ifdef HAVE_MPI
    if (c->mpi && c->world > 1) return allgather(c, buf, count, MPI_UINT16_T, what);
#endif
    (void)c; (void)buf; (void)count; (void)what;
    return 0;
}

#ifdef HAVE_MPI
static MPI_Request g_requests[COMM_MAX_REQUESTS + 1];   /* [id]; id 0: none */
static int g_request_used[COMM_MAX_REQUESTS + 1];
static int *g_request_vargs[COMM_MAX_REQUESTS + 1];     /* an all-gatherv's counts and displacements (MPI reads them
                                                           until it completes) */
static int free_request_id(void) {
    for (int id = 1; id <= COMM_MAX_REQUESTS; id++) if (!g_request_used[id]) return id;
    return 0;
}
#endif

#ifdef HAVE_MPI
/* The reduce-scatter's result to this rank's part (MPI leaves it at the buffer's start). */
static void scatter_finish(const Comm *c, const CommRequest *r) {
    if (r->scatter && c->rank > 0) memmove(r->buf + (size_t)c->rank * r->count, r->buf, r->count * sizeof *r->buf);
}
#endif

static int request_start(Comm *c, float *buf, size_t count, int scatter, const char *what, CommRequest *r) {
    memset(r, 0, sizeof *r);
    r->scatter = scatter; r->buf = buf; r->count = count; r->what = what; r->t0 = now_s();
#ifdef HAVE_MPI
    if (c->mpi && c->world > 1) {
        const int id = free_request_id();
        if (!id || count > (size_t)1 << 30) {
            fprintf(stderr, "error: rank %d: %s: %s\n", c->rank, what, id ? "more than 2^30 floats a rank in one call"
                                                                      : "too many collectives in flight");
            return -1;
        }
        const int rc = scatter ? MPI_Ireduce_scatter_block(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &g_requests[id])
                               : MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &g_requests[id]);
        if (rc != MPI_SUCCESS) { fprintf(stderr, "error: rank %d: %s could not start in MPI\n", c->rank, what); return -1; }
        r->id = id;
        g_request_used[id] = 1;
    }
#endif
    (void)c;
    return 0;
}

int comm_reduce_scatter_start(Comm *c, float *buf, size_t count, const char *what, CommRequest *r) {
    return request_start(c, buf, count, 1, what, r);
}
int comm_allreduce_start(Comm *c, float *buf, size_t n, const char *what, CommRequest *r) {
    return request_start(c, buf, n, 0, what, r);
}

int comm_allgatherv_start(Comm *c, void *buf, const size_t *lo, const size_t *len, size_t elem, const char *what, CommRequest *r) {
    memset(r, 0, sizeof *r);
    r->what = what; r->t0 = now_s();
#ifdef HAVE_MPI
    if (c->mpi && c->world > 1) {
        const int id = free_request_id();
        int *v = id ? malloc(2 * (size_t)c->world * sizeof *v) : NULL;
        if (!v) {
            fprintf(stderr, "error: rank %d: %s: %s\n", c->rank, what, id ? "out of host memory" : "too many collectives in flight");
            return -1;
        }
        for (int k = 0; k < c->world; k++) {
            if (len[k] > INT_MAX || lo[k] > (size_t)INT_MAX - len[k]) {
                fprintf(stderr, "error: rank %d: %s: a tensor of more than 2^31 - 1 elements (MPI counts are int)\n", c->rank, what);
                free(v);
                return -1;
            }
            v[k] = (int)len[k];
            v[c->world + k] = (int)lo[k];
        }
        if (MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, v, v + c->world, elem == 2 ? MPI_UINT16_T : MPI_FLOAT,
                            MPI_COMM_WORLD, &g_requests[id]) != MPI_SUCCESS) {
            fprintf(stderr, "error: rank %d: %s could not start in MPI\n", c->rank, what);
            free(v);
            return -1;
        }
        r->id = id;
        g_request_used[id] = 1;
        g_request_vargs[id] = v;
    }
#endif
    (void)c; (void)buf; (void)lo; (void)len; (void)elem;
    return 0;
}

int comm_request_test(Comm *c, CommRequest *r, int *done) {
    *done = 1;
    if (!r->id) return 0;
    if (r->device) return comm_device_test(c, r, done);
#ifdef HAVE_MPI
    int flag = 0;
    if (r->failed) return -1;   /* (said when it failed) */
    if (MPI_Test(&g_requests[r->id], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        fprintf(stderr, "error: rank %d: %s failed in MPI (another rank died?)\n", c->rank, r->what);
        r->failed = 1;
        return -1;
    }
    if (!flag) { *done = 0; return 0; }
    g_request_used[r->id] = 0;
    free(g_request_vargs[r->id]);
    g_request_vargs[r->id] = NULL;
    scatter_finish(c, r);
#endif
    r->id = 0;
    return 0;
}

int comm_request_wait(Comm *c, CommRequest *r) {
    if (r->id && r->device) return comm_device_wait(c, r);   /* (NCCL's: the stream's event, its async error) */
    const double t0 = now_s();   /* the timeout counts while waiting (a poll finds it undone while MPI had no
                                    call to progress it in: the backward may take longer than any timeout) */
    for (long k = 0;; k++) {
        int done = 0;
        if (comm_request_test(c, r, &done)) return -1;
        if (done) return 0;
        const double el = now_s() - t0;
        if (el > c->timeout_s) {
            fprintf(stderr, "error: rank %d: %s did not complete in %.0f s (DPMEM_COMM_TIMEOUT): another rank died "
                    "or is stuck; ending the job\n", c->rank, r->what, c->timeout_s);
            r->failed = 1;
            return -1;
        }
        if (el > 0.002) {   /* as wait_request: spin a little, then leave the core to others */
            struct timespec ts = { 0, 100000 };
            nanosleep(&ts, NULL);
        }
    }
}

int comm_check_same(Comm *c, long long value, const char *what) {
#ifdef HAVE_MPI
    if (c->mpi && c->world > 1) {
        long long mm[2] = { value, -value };
        MPI_Request req;
        if (MPI_Iallreduce(MPI_IN_PLACE, mm, 2, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD, &req) != MPI_SUCCESS ||
            wait_request(c, &req, what))
            return -1;
        if (mm[0] != -mm[1]) {
            fprintf(stderr, "error: rank %d: the ranks disagree on %s (this rank %lld, others between %lld and %lld): "
                    "start every rank with the same flags\n", c->rank, what, value, -mm[1], mm[0]);
            return -1;
        }
    }
#endif
    (void)c; (void)value; (void)what;
    return 0;
}

#ifdef HAVE_MPI
/* FNV-1a of a NUL-terminated string (with its NUL) into h; the result's top bit cleared, so that
   its negation (the MAX-reduction of -h gives the minimum) cannot overflow. */
static uint64_t fnv(uint64_t h, const char *s) {
    do h = (h ^ (unsigned char)*s) * 1099511628211ull; while (*s++);
    return h;
}
static int reduce_max(Comm *c, long long *v, int n, const char *what) {
    MPI_Request req;
    if (MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD, &req) != MPI_SUCCESS) {
        fprintf(stderr, "error: rank %d: %s could not start in MPI\n", c->rank, what);
        return -1;
    }
    return wait_request(c, &req, what);
}
#endif

int comm_check_fields(Comm *c, const char *const *names, const char *const *values, int n) {
#ifdef HAVE_MPI
    if (c->mpi && c->world > 1) {
        const char *what = "the configuration check";
        uint64_t h = 1469598103934665603ull;
        for (int i = 0; i < n; i++) h = fnv(fnv(h, names[i]), values[i]);
        long long all = (long long)(h >> 1), head[4] = { n, -(long long)n, all, -all };
        if (reduce_max(c, head, 4, what)) return -1;
        if (head[0] != -head[1]) {   /* another program, or another version of it, on some rank */
            fprintf(stderr, "error: rank %d: the ranks' configurations have different fields (%d here, %lld to %lld): start "
                    "every rank with the same program\n", c->rank, n, -head[1], head[0]);
            return -1;
        }
        if (head[2] == -head[3]) return 0;
        long long *per = malloc(2 * (size_t)n * sizeof *per);
        if (!per) { fprintf(stderr, "error: rank %d: out of memory (%s)\n", c->rank, what); return -1; }   /* (the others time out) */
        for (int i = 0; i < n; i++) {
            per[2 * i] = (long long)(fnv(fnv(1469598103934665603ull, names[i]), values[i]) >> 1);
            per[2 * i + 1] = -per[2 * i];
        }
        int rc = reduce_max(c, per, 2 * n, what), i = 0;
        while (rc == 0 && i < n && per[2 * i] == -per[2 * i + 1]) i++;
        free(per);
        if (rc) return -1;
        if (i < n) fprintf(stderr, "error: rank %d: the ranks disagree on %s (this rank: %s): start every rank with the same "
                           "%s\n", c->rank, names[i], values[i], strncmp(names[i], "DPMEM_", 6) ? "flags" : "environment setting");
        else fprintf(stderr, "error: rank %d: the ranks' configurations differ (a hash collision of fields?)\n", c->rank);
        return -1;
    }
#endif
    (void)c; (void)names; (void)values; (void)n;
    return 0;
}

int comm_broadcast(Comm *c, void *buf, size_t n, int root, const char *what) {
#ifdef HAVE_MPI
    if (c->mpi && c->world > 1) {
        MPI_Request req;
        if (MPI_Ibcast(buf, (int)n, MPI_BYTE, root, MPI_COMM_WORLD, &req) != MPI_SUCCESS) {
            fprintf(stderr, "error: rank %d: %s could not start in MPI\n", c->rank, what);
            return -1;
        }
        return wait_request(c, &req, what);
    }
#endif
    (void)c; (void)buf; (void)n; (void)root; (void)what;
    return 0;
}

void comm_rank_path(char *out, size_t n, const char *path, int rank) {
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    if (dot && (!slash || dot > slash + 1)) snprintf(out, n, "%.*s.rank%d%s", (int)(dot - path), path, rank, dot);
    else snprintf(out, n, "%s.rank%d", path, rank);
}
