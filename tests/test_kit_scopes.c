/* test_kit_scopes.c — DPMEM_SCOPE closes however its block is left (falling through, return, break,
   continue, goto), leaves the user's loop logic unchanged, nests, keeps one stack per thread, and
   every BEGIN in the log has its END in the right order on its own thread. */
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include "check.h"
#include "logread.h"

#include <pthread.h>

static int depth(void) { uint32_t ids[64]; return dpmem_scope_stack(ids, 64); }

static int with_return(int x) {
    DPMEM_SCOPE("ret");
    if (x > 0) return x * 2;      /* leaves through return */
    return -1;
}

/* Sums 0..9 skipping 3 and stopping at 7: break and continue must act on the user's loop. */
static int with_break_continue(void) {
    int sum = 0, iterations = 0;
    for (int i = 0; i < 10; i++) {
        DPMEM_SCOPE("iter");
        iterations++;
        if (i == 3) continue;
        if (i == 7) break;
        sum += i;
    }
    CHECK_EQ_U(iterations, 8);
    CHECK_EQ_U(depth(), 0);
    return sum;                   /* 0+1+2+4+5+6 = 18 */
}

static int with_while_break(void) {
    int n = 0;
    while (1) {
        DPMEM_SCOPE("while");
        if (++n == 5) break;
    }
    return n;
}

static int with_goto(int fail) {
    int r = 0;
    {
        DPMEM_SCOPE("goto_outer");
        {
            DPMEM_SCOPE("goto_inner");
            if (fail) goto out;   /* leaves two scopes at once */
            r = 1;
        }
        r += 10;
    }
out:
    CHECK_EQ_U(depth(), 0);
    return r;
}

static void *thread_body(void *arg) {
    int id = (int)(intptr_t)arg;
    char name[32];
    snprintf(name, sizeof name, "thread%d", id);
    dpmem_thread_name(name);
    for (int i = 0; i < 1000; i++) {
        DPMEM_SCOPE("t_outer");
        CHECK_EQ_U(depth(), 1);   /* the other thread's scopes are not on this stack */
        {
            DPMEM_SCOPE_DYN(name);
            CHECK_EQ_U(depth(), 2);
        }
    }
    return NULL;
}

int main(void) {
    char path[512], err[1024];
    test_path(path, sizeof path, "scopes.log");
    CHECK(dpmem_open(path) == 0);

    {
        DPMEM_SCOPE("outer");
        CHECK_EQ_U(depth(), 1);
        { DPMEM_SCOPE("inner"); CHECK_EQ_U(depth(), 2); }
        { DPMEM_SCOPE("inner"); CHECK_EQ_U(depth(), 2); }
        uint32_t ids[4];
        CHECK_EQ_U(dpmem_scope_stack(ids, 4), 1);
        CHECK(!strcmp(dpmem_string(ids[0]), "outer"));
    }
    CHECK_EQ_U(depth(), 0);
    CHECK_EQ_U(with_return(21), 42);
    CHECK_EQ_U(depth(), 0);
    CHECK_EQ_U(with_break_continue(), 18);
    CHECK_EQ_U(with_while_break(), 5);
    CHECK_EQ_U(with_goto(1), 0);
    CHECK_EQ_U(with_goto(0), 11);

    dpmem_range_push("explicit");
    CHECK_EQ_U(depth(), 1);
    dpmem_range_pop();
    dpmem_range_pop();            /* one pop too many: a warning, not a crash */
    CHECK_EQ_U(depth(), 0);

    {   /* tags seen for the first time: their STRING and their ALLOC in time order (checked below) */
        static char bufs[4][64];
        static const char *const tags[4] = { "activations/a", "activations/b", "grads/c", "grads/d" };
        for (int k = 0; k < 4; k++) DPMEM_TAG_ALLOC(bufs[k], 64, tags[k]);
        for (int k = 0; k < 4; k++) DPMEM_TAG_FREE(bufs[k]);
    }

    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, thread_body, (void *)(intptr_t)i);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    dpmem_close();

    /* The log: per thread, BEGIN/END pairs nest properly and carry the same name. */
    LogFile lf;
    CHECK(log_read(path, &lf, err, sizeof err) == 0);
    enum { MAXT = 16 };
    uint32_t stack[MAXT][64]; int sp[MAXT] = {0};
    int begins = 0, ends = 0, warn_pop = 0, threads_named = 0, bad_nesting = 0;
    int count_iter = 0, count_goto_inner = 0, count_t0 = 0, count_t1 = 0;
    for (size_t i = 0; i < lf.nev; i++) {
        const LogEvent *e = &lf.ev[i];
        if (e->thread >= MAXT) { bad_nesting++; continue; }
        if (e->type == 4) {
            begins++;
            stack[e->thread][sp[e->thread]++] = e->id;
            const char *n = log_str(&lf, e->id);
            count_iter += !strcmp(n, "iter");
            count_goto_inner += !strcmp(n, "goto_inner");
            count_t0 += !strcmp(n, "thread0");
            count_t1 += !strcmp(n, "thread1");
        } else if (e->type == 5) {
            ends++;
            if (!sp[e->thread] || stack[e->thread][--sp[e->thread]] != e->id) bad_nesting++;
        } else if (e->type == 8) {
            warn_pop += !strcmp(log_str(&lf, e->id), "range pop without a push");
        } else if (e->type == 2) {
            const char *tn = (const char *)e->payload + 8;
            threads_named += !strcmp(tn, "thread0") || !strcmp(tn, "thread1");
        }
    }
    CHECK_EQ_U(bad_nesting, 0);
    /* Each thread's events are in time order in the file: a STRING written for an event (a scope's
       first BEGIN, a tag's first ALLOC) is stamped no later than that event, which took its time
       first (readers flag a thread whose clock goes backwards and then drop every scope time). The
       events are sorted by time here, so the file positions of one thread must rise. (THREAD events
       are written when a thread takes its first chunk, after the event that needed it.) */
    {
        size_t last[MAXT];
        int out_of_order = 0;
        for (int k = 0; k < MAXT; k++) last[k] = 0;
        for (size_t i = 0; i < lf.nev; i++) {
            const LogEvent *e = &lf.ev[i];
            if (e->thread >= MAXT || e->type == 2) continue;
            if (last[e->thread] && e->seq < last[e->thread] - 1) out_of_order++;
            last[e->thread] = e->seq + 1;
        }
        CHECK_EQ_U(out_of_order, 0);
    }
    CHECK_EQ_U(begins, ends);
    /* outer+2 inner, ret, 8 iter, 5 while, 2+2 goto (the failing call opens both), explicit, 2×2000 */
    CHECK_EQ_U(begins, 3 + 1 + 8 + 5 + 4 + 1 + 4000);
    CHECK_EQ_U(count_iter, 8);
    CHECK_EQ_U(count_goto_inner, 2);
    CHECK_EQ_U(count_t0, 1000);
    CHECK_EQ_U(count_t1, 1000);
    CHECK_EQ_U(warn_pop, 1);
    CHECK_EQ_U(threads_named, 2);
    for (int t = 0; t < MAXT; t++) CHECK_EQ_U(sp[t], 0);
    log_free(&lf);
    return check_exit("test_kit_scopes");
}
