/* test_kit_late_writer.c — a writer that stalls in the middle of an event while another thread closes
   the log, opens a new one and closes that too (the race behind a rare SEGV in test_kit_hostile's
   "cycles" case under heavy load). The writer had checked the log's generation and taken its place in
   the old log's chunk; dpmem_close keeps a closed log's mapping as anonymous memory, but unmapped it
   at the next close, whatever writer was still inside it: the late store then hit unmapped memory.

   The stall is forced, not hoped for: the kit's test hook DPMEM_TEST_BEFORE_COMMIT (compiled out
   unless a test defines it) parks the writer thread just before its stores, at
     begin    a BEGIN event on the fast path (the writer has a chunk in the log already),
     string   the STRING event of a new thread's first scope (the first space the slow path hands out),
     thread   the THREAD event a new thread writes inside the slow path, after it took its chunk,
   while the main thread closes log A, opens and closes B. Then the writer resumes. Checked: no crash;
   the late store reaches neither file (A and B read back closed, without it); the stalled page stays
   mapped while the writer is inside it, and is unmapped at the next close once the writer is out (the
   address space is still given back). Each case runs in a child process: on the old kit it dies of
   SIGSEGV (or ASan's report of it), which the parent reports. */
#include <stdint.h>
static void before_commit(const void *p, uint32_t type);
#define DPMEM_TEST_BEFORE_COMMIT(p, type) before_commit((p), (type))
#define DPMEM_IMPLEMENTATION
#define DPMEM_NO_NVTX
#include "dpmem.h"
#include "check.h"
#include "logread.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

enum { EV_STRING = 1, EV_THREAD = 2, EV_BEGIN = 4, EV_END = 5, EV_CLOSE = 13 };

/* ---- the stall: the writer thread arms it for itself, for one event type ---- */
static _Thread_local uint32_t stall_on;   /* event type to stall at; 0: none */
static const void *stalled_at;            /* where the writer was about to store */
static sem_t stalled, resume;

static void before_commit(const void *p, uint32_t type) {
    if (!stall_on || type != stall_on) return;
    stall_on = 0;
    stalled_at = p;
    sem_post(&stalled);
    while (sem_wait(&resume) != 0 && errno == EINTR) {}
}

typedef struct { const char *name; uint32_t type; int warm; } Case;
static const Case cases[] = {
    { "begin",  EV_BEGIN,  1 },
    { "string", EV_STRING, 0 },
    { "thread", EV_THREAD, 0 },
};

static void *writer(void *arg) {
    const Case *c = (const Case *)arg;
    if (c->warm) { DPMEM_SCOPE("late"); }   /* its chunk, THREAD and STRING in log A: the next BEGIN is a fast one */
    stall_on = c->type;
    { DPMEM_SCOPE("late"); }                /* parks in before_commit until the main thread says so */
    { DPMEM_SCOPE("late"); }                /* no log is open now: nothing is written */
    return NULL;
}

/* 1 if the page holding p is mapped (mincore fails with ENOMEM on an unmapped range). */
static int mapped(const void *p) {
    unsigned char v;
    void *page = (void *)((uintptr_t)p & ~(uintptr_t)4095);
    return mincore(page, 4096, &v) == 0;
}

static int count_named(const LogFile *lf, uint32_t type, const char *name) {
    int n = 0;
    for (size_t i = 0; i < lf->nev; i++) n += lf->ev[i].type == type && !strcmp(log_str(lf, lf->ev[i].id), name);
    return n;
}

static int has_string(const LogFile *lf, const char *s) {
    for (uint32_t i = 0; i < lf->nstr; i++) if (lf->str[i] && !strcmp(lf->str[i], s)) return 1;
    return 0;
}

static void run_case(const Case *c) {
    char a[512], b[512], cc[512], name[64];
    snprintf(name, sizeof name, "late_writer_%s_A.log", c->name); test_path(a, sizeof a, name);
    snprintf(name, sizeof name, "late_writer_%s_B.log", c->name); test_path(b, sizeof b, name);
    snprintf(name, sizeof name, "late_writer_%s_C.log", c->name); test_path(cc, sizeof cc, name);
    sem_init(&stalled, 0, 0);
    sem_init(&resume, 0, 0);
    if (dpmem_open(a) != 0) _exit(3);
    { DPMEM_SCOPE("main_a"); }
    pthread_t th;
    if (pthread_create(&th, NULL, writer, (void *)c) != 0) _exit(4);
    while (sem_wait(&stalled) != 0 && errno == EINTR) {}
    /* The writer sits between its reservation in log A and its stores. */
    dpmem_close();
    if (dpmem_open(b) != 0) _exit(3);
    { DPMEM_SCOPE("main_b"); }
    dpmem_close();   /* the old kit unmapped A's range here */
    CHECK(mapped(stalled_at));
    sem_post(&resume);
    pthread_join(th, NULL);
    /* The writer is out: the next close gives A's range back. */
    if (dpmem_open(cc) != 0) _exit(3);
    dpmem_close();
    CHECK(!mapped(stalled_at));

    char err[512];
    LogFile la, lb;
    CHECK(log_read(a, &la, err, sizeof err) == 0);
    CHECK(la.closed);
    CHECK_EQ_U(count_named(&la, EV_BEGIN, "main_a"), 1);
    /* the warm scope only; the late event (and, in "string", its STRING) never reached the file */
    CHECK_EQ_U(count_named(&la, EV_BEGIN, "late"), (unsigned)c->warm);
    CHECK_EQ_U(count_named(&la, EV_END, "late"), (unsigned)c->warm);
    CHECK_EQ_U(log_count(&la, EV_THREAD), 1u + (c->type != EV_THREAD));   /* main, and the writer unless stalled there */
    CHECK_EQ_U(has_string(&la, "late"), (unsigned)c->warm);
    CHECK(log_read(b, &lb, err, sizeof err) == 0);
    CHECK(lb.closed);
    CHECK_EQ_U(count_named(&lb, EV_BEGIN, "main_b"), 1);
    CHECK_EQ_U(count_named(&lb, EV_BEGIN, "late") + count_named(&lb, EV_END, "late"), 0);
    CHECK_EQ_U(log_count(&lb, EV_THREAD), 1);
    log_free(&la);
    log_free(&lb);
    remove(a); remove(b); remove(cc);
}

int main(void) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            signal(SIGSEGV, SIG_DFL);
            run_case(&cases[i]);
            _exit(check_failures ? 1 : 0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!ok) {
            if (WIFSIGNALED(status))
                fprintf(stderr, "case %s: the process died of signal %d (%s)\n", cases[i].name, WTERMSIG(status), strsignal(WTERMSIG(status)));
            else
                fprintf(stderr, "case %s: exit %d\n", cases[i].name, WEXITSTATUS(status));
        } else {
            printf("ok   %s\n", cases[i].name);
        }
        CHECK(ok);
    }
    return check_exit("test_kit_late_writer");
}
