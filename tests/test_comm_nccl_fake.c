/* test_comm_nccl_fake.c — samples/llama/comm_nccl.c's streams, events and requests, on every machine: linked
   with a fake CUDA runtime and a fake NCCL defined here (no GPU, no libcudart, no libnccl), which log each
   call with the stream it names and let the test decide when a collective completes, fails or never ends.
   Checked, for each kind of collective (all-reduce, reduce-scatter, fp32 and bf16 all-gathers), through
   comm.h's comm_device_start / comm_request_test / comm_request_wait as samples/llama/grad_reduce.c uses them:
     - the order of the calls: an event recorded on the compute (legacy default) stream, the communication
       stream made to wait on it, the collective enqueued on the communication stream (never the compute
       stream: that would serialise it with the backward's kernels), its completion event recorded there;
       the communication stream created non-blocking (a blocking one synchronises with the legacy stream);
     - the buffers in NCCL's in-place layout: the reduce-scatter's result at rank r's part, the all-gathers'
       input there (2 bytes an element for bf16);
     - a test finds it in flight (done 0, pending) until the collective completes, then done, the request
       free, and the compute stream waits on the completion event;
     - a collective that never completes: the wait returns -1 after DPMEM_COMM_TIMEOUT with a line naming it,
       the communicator aborted, the request still pending (its buffer must not be freed), and a second wait
       returns at once; NCCL's async error (a peer gone): -1, the line, the communicator aborted;
     - --zero 3's gather of unequal slices (comm_device_allgatherv_start): a group of in-place broadcasts, one
       a rank, on the communication stream, completed by comm_request_wait as the others;
     - META comm.backend = nccl once the communicator is made; the blocking collectives are a start and a
       wait (the same calls).
   Returns non-zero on any failure. */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "samples/llama/comm.h"

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

/* ---- the fakes ----------------------------------------------------------------------------------------- */

static char calls[4096];   /* "op(stream) ..." since the last clear */
static void logc(const char *fmt, const char *a, const char *b) {
    size_t n = strlen(calls);
    snprintf(calls + n, sizeof calls - n, fmt, a, b);
}
struct CUstream_st { int nonblocking; };
struct CUevent_st { int on_comm, made; };
static struct CUstream_st comm_stream;
static struct CUevent_st events[64];
static int n_events, collective_done, async_failed, aborted, stream_creates;
static void *last_send, *last_recv;

static const char *sname(cudaStream_t s) { return s == NULL ? "compute" : s == &comm_stream ? "comm" : "other"; }

cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest) { *least = 0; *greatest = -5; return cudaSuccess; }
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned int flags, int priority) {
    comm_stream.nonblocking = (flags & cudaStreamNonBlocking) != 0 && priority == -5;
    stream_creates++;
    *s = &comm_stream;
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
    (void)flags;
    if (n_events == 64) return cudaErrorMemoryAllocation;
    events[n_events].made = 1;
    *e = &events[n_events++];
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) { e->on_comm = s == &comm_stream; logc("record(%s) ", sname(s), ""); return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
    (void)flags;
    logc("wait(%s on %s) ", sname(s), e->on_comm ? "comm" : "compute");
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) { e->made = 0; return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t s) { (void)s; return cudaSuccess; }
cudaError_t cudaEventQuery(cudaEvent_t e) { return !e->on_comm || collective_done ? cudaSuccess : cudaErrorNotReady; }
const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "a CUDA error"; }

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) { memset(id, 0, sizeof *id); return ncclSuccess; }
ncclResult_t ncclCommInitRank(ncclComm_t *c, int n, ncclUniqueId id, int rank) {
    (void)id; (void)n; (void)rank;
    *c = (ncclComm_t)&comm_stream;
    aborted = 0;
    logc("init ", "", "");
    return ncclSuccess;
}
ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c, cudaStream_t st) {
    (void)n; (void)t; (void)op; (void)c;
    last_send = (void *)s; last_recv = r;
    logc("allreduce(%s) ", sname(st), "");
    return ncclSuccess;
}
ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c, cudaStream_t st) {
    (void)n; (void)t; (void)op; (void)c;
    last_send = (void *)s; last_recv = r;
    logc("reduce_scatter(%s) ", sname(st), "");
    return ncclSuccess;
}
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st) {
    (void)n; (void)c;
    last_send = (void *)s; last_recv = r;
    logc(t == ncclBfloat16 ? "allgather_bf16(%s) " : "allgather(%s) ", sname(st), "");
    return ncclSuccess;
}
ncclResult_t ncclGroupStart(void) { logc("group( ", "", ""); return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) { logc(") ", "", ""); return ncclSuccess; }
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st) {
    (void)t; (void)c;
    char what[64];
    snprintf(what, sizeof what, "%d:%zu:%s", root, n, s == r ? "in place" : "copy");
    logc("broadcast(%s %s) ", what, sname(st));
    return ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *e) { (void)c; *e = async_failed ? ncclRemoteError : ncclSuccess; return ncclSuccess; }
ncclResult_t ncclCommAbort(ncclComm_t c) { (void)c; aborted++; logc("abort ", "", ""); return ncclSuccess; }
ncclResult_t ncclCommDestroy(ncclComm_t c) { (void)c; return ncclSuccess; }
const char *ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "no error" : "remote process exited or there was a network error"; }

/* ---- the checks ---------------------------------------------------------------------------------------- */

static char stderr_text[4096];
static FILE *err_file;
static void capture_stderr(void) { fflush(stderr); rewind(err_file); if (ftruncate(fileno(err_file), 0)) {} }
static const char *captured(void) {
    fflush(stderr);
    rewind(err_file);
    size_t n = fread(stderr_text, 1, sizeof stderr_text - 1, err_file);
    stderr_text[n] = 0;
    return stderr_text;
}

int main(void) {
    /* stderr into a file the test reads (the lines comm_nccl.c prints) */
    err_file = tmpfile();
    if (!err_file || dup2(fileno(err_file), 2) < 0) { printf("FAIL: no temporary file for stderr\n"); return 1; }
    char logpath[] = "/tmp/test_comm_nccl_fake.XXXXXX";
    int fd = mkstemp(logpath);
    if (fd < 0 || dpmem_open(logpath) != 0) { printf("FAIL: no log\n"); return 1; }
    close(fd);
    dpmem_meta("comm.backend", "none");

    Comm c = { 1, 2, 1, 0, 0, 600.0, "none" };   /* rank 1 of 2 (no MPI: the id broadcast is a no-op) */
    static float buf[2 * 8];
    static const struct { CommOp op; const char *name; int esize; } kinds[] = {
        { COMM_ALLREDUCE, "allreduce", 4 }, { COMM_REDUCE_SCATTER, "reduce_scatter", 4 },
        { COMM_ALLGATHER, "allgather", 4 }, { COMM_ALLGATHER_BF16, "allgather_bf16", 2 },
    };
    CHECK(comm_device_start && comm_device_test && comm_device_wait, "comm_nccl.c did not register its non-blocking collectives");
    if (failures) return 1;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        calls[0] = 0;
        collective_done = 0;
        CommRequest r;
        int rc = comm_device_start(&c, kinds[k].op, buf, 8, kinds[k].name, &r);
        char want[256];
        snprintf(want, sizeof want, "%srecord(compute) wait(comm on compute) %s(comm) record(comm) ", k == 0 ? "init " : "", kinds[k].name);
        CHECK(rc == 0 && !strcmp(calls, want), "%s: start: rc %d, calls '%s', want '%s'", kinds[k].name, rc, calls, want);
        CHECK(comm_request_pending(&r) && r.device, "%s: the started request is not pending", kinds[k].name);
        /* NCCL's layout: rank 1's part at element 8 (bytes 8 x esize) */
        char *mine = (char *)buf + 8 * kinds[k].esize;
        if (kinds[k].op == COMM_ALLREDUCE) CHECK(last_send == buf && last_recv == buf, "allreduce: not in place");
        else if (kinds[k].op == COMM_REDUCE_SCATTER) CHECK(last_send == buf && last_recv == mine, "reduce_scatter: result not at rank 1's part");
        else CHECK(last_send == mine && last_recv == buf, "%s: input not rank 1's part", kinds[k].name);
        calls[0] = 0;
        int done = -1;
        rc = comm_request_test(&c, &r, &done);
        CHECK(rc == 0 && done == 0 && comm_request_pending(&r) && !calls[0], "%s: test in flight: rc %d done %d, calls '%s'", kinds[k].name,
              rc, done, calls);
        collective_done = 1;
        rc = comm_request_test(&c, &r, &done);
        CHECK(rc == 0 && done == 1 && !comm_request_pending(&r) && !strcmp(calls, "wait(compute on comm) "),
              "%s: test once complete: rc %d done %d pending %d, calls '%s' (want the compute stream to wait on the completion)",
              kinds[k].name, rc, done, comm_request_pending(&r), calls);
    }
    CHECK(stream_creates == 1 && comm_stream.nonblocking, "the communication stream: %d made, non-blocking at the highest priority %d",
          stream_creates, comm_stream.nonblocking);
    CHECK(!strcmp(c.backend, "nccl"), "Comm.backend '%s', want nccl", c.backend);
    if (!failures) printf("ok   every collective: on the communication stream after the compute stream's event; test in flight, "
                          "then done with the compute stream waiting on its completion\n");

    /* --zero 3's gather of unequal slices (rank 0: 5 elements, rank 1: 3; bf16): one in-place broadcast a rank,
       grouped, on the communication stream; completed through comm_request_wait */
    {
        calls[0] = 0;
        collective_done = 0;
        const size_t lo[2] = { 0, 5 }, len[2] = { 5, 3 };
        CommRequest r;
        int rc = comm_device_allgatherv_start(&c, buf, lo, len, 2, "the gather", &r);
        const char *want = "record(compute) wait(comm on compute) group( broadcast(0:10:in place comm) broadcast(1:6:in place comm) ) record(comm) ";
        CHECK(rc == 0 && !strcmp(calls, want) && comm_request_pending(&r), "allgatherv: rc %d, calls '%s', want '%s'", rc, calls, want);
        calls[0] = 0;
        collective_done = 1;
        rc = comm_request_wait(&c, &r);
        CHECK(rc == 0 && !comm_request_pending(&r) && !strcmp(calls, "wait(compute on comm) "), "allgatherv's wait: rc %d, calls '%s'", rc, calls);
    }

    /* the blocking form (dist.h's dist_collective with no request): a start and a wait (complete at once here) */
    calls[0] = 0;
    collective_done = 1;
    CommRequest rb;
    int rc = comm_device_start(&c, COMM_REDUCE_SCATTER, buf, 8, "blocking", &rb);
    rc = rc ? rc : comm_request_wait(&c, &rb);
    CHECK(rc == 0 && !strcmp(calls, "record(compute) wait(comm on compute) reduce_scatter(comm) record(comm) wait(compute on comm) "),
          "blocking reduce-scatter: rc %d, calls '%s'", rc, calls);

    /* a collective that never completes: the timeout, the abort, the request left pending, no second wait */
    c.timeout_s = 0.05;
    collective_done = 0;
    CommRequest r;
    capture_stderr();
    rc = comm_device_start(&c, COMM_REDUCE_SCATTER, buf, 8, "the stuck reduce-scatter", &r);
    rc = rc ? rc : comm_request_wait(&c, &r);
    const char *e = captured();
    CHECK(rc == -1 && aborted == 1 && comm_request_pending(&r) && r.failed &&
          strstr(e, "error: rank 1: the stuck reduce-scatter did not complete in 0 s (DPMEM_COMM_TIMEOUT)") && !strchr(strchr(e, '\n') + 1, '\n'),
          "a stuck collective: rc %d, aborted %d, pending %d, failed %d, stderr '%s'", rc, aborted, comm_request_pending(&r), r.failed, e);
    capture_stderr();
    calls[0] = 0;
    rc = comm_request_wait(&c, &r);
    CHECK(rc == -1 && comm_request_pending(&r) && !captured()[0] && !calls[0], "a failed request waited again: rc %d, stderr '%s', calls '%s'",
          rc, stderr_text, calls);

    /* NCCL's async error (a peer gone): -1, one line naming the collective, the communicator aborted */
    c.timeout_s = 600;
    async_failed = 1;
    capture_stderr();
    rc = comm_device_start(&c, COMM_ALLGATHER, buf, 8, "the weight gather", &r);   /* (a new communicator: the last was aborted) */
    int done = -1;
    rc = rc ? rc : comm_request_test(&c, &r, &done);
    e = captured();
    CHECK(rc == -1 && done == 0 && aborted == 1 && comm_request_pending(&r) && strstr(e, "error: rank 1: the weight gather failed in NCCL") &&
          strstr(e, "another rank died?"), "async error: rc %d done %d aborted %d, stderr '%s'", rc, done, aborted, e);
    if (!failures) printf("ok   a stuck collective times out (one line, the communicator aborted, the request left pending, never "
                          "waited again); NCCL's async error ends the wait with its line\n");

    dpmem_close();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "grep -c nccl %s >/dev/null", logpath);   /* the META value is a string in the log */
    CHECK(system(cmd) == 0, "the log has no 'nccl' (META comm.backend)");
    remove(logpath);
    if (failures) { printf("test_comm_nccl_fake: %d failures\n", failures); return 1; }
    printf("test_comm_nccl_fake: OK (comm_nccl.c's requests on a fake CUDA runtime and NCCL)\n");
    return 0;
}
