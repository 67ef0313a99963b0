/* dpmem_trace.c — dpmem-trace: a log as Chrome Trace Event JSON for ui.perfetto.dev and
   chrome://tracing; several logs (the ranks of a data-parallel run: run.rank0.log run.rank1.log ...)
   as one trace with a process each. The conversion is tools/trace/trace.c; this file is the command line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "read/shown.h"
#include "read/dpmem_read.h"
#include "common/io_guard.h"
#include "trace/trace.h"

#define MAX_LOGS 256

static int fail(const char *msg, const char *arg) {
    fprintf(stderr, "dpmem-trace: %s%s%s\n", shown(msg), arg ? ": " : "", arg ? shown(arg) : "");
    return 2;
}

int main(int argc, char **argv) {
    const char *in[MAX_LOGS], *out = NULL;
    int n = 0;
    TraceOptions o = { 0 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: dpmem-trace run.log [more.log ...] -o run.json [--no-allocs]\n"
                   "  several logs (e.g. the ranks of a data-parallel run) become one trace, a process each\n"
                   "  -o FILE       the JSON to write ('-': stdout)\n"
                   "  --no-allocs   no instant event per allocation (the counters stay)\n");
            return 0;
        } else if (!strcmp(a, "-o")) { if (i + 1 >= argc) return fail("-o needs a file", NULL); out = argv[++i]; }
        else if (!strcmp(a, "--no-allocs")) o.no_allocs = 1;
        else if (a[0] == '-' && a[1]) return fail("unknown option", a);
        else if (n == MAX_LOGS) return fail("too many logs (at most 256)", a);
        else in[n++] = a;
    }
    if (!n) return fail("no log given (usage: dpmem-trace run.log -o run.json)", NULL);
    if (!out) return fail("no output file: give -o run.json", NULL);
    IoPath io[MAX_LOGS + 1];
    for (int i = 0; i < n; i++) io[i] = (IoPath){ in[i], "log", 0 };
    io[n] = (IoPath){ out, "-o", 1 };
    char e[1024];
    if (io_check_outputs(io, n + 1, e, sizeof e)) return fail(e, NULL);
    DpmemLog *logs = calloc((size_t)n, sizeof *logs);
    const DpmemLog **lp = calloc((size_t)n, sizeof *lp);
    if (!logs || !lp) { free(logs); free(lp); return fail("out of memory", NULL), 1; }
    char err[512];
    int opened = 0, rc = 0;
    for (; opened < n; opened++) {
        if (dpmem_log_open(&logs[opened], in[opened], err, sizeof err)) { fprintf(stderr, "dpmem-trace: %s\n", shown(err)); rc = -1; break; }
        dpmem_log_warn(&logs[opened], "dpmem-trace");
        lp[opened] = &logs[opened];
    }
    FILE *f = NULL;
    if (rc == 0 && !(f = strcmp(out, "-") ? fopen(out, "w") : stdout)) { fail("cannot write", out); rc = -1; }
    if (rc == 0) {
        static char buf[1 << 20];
        setvbuf(f, buf, _IOFBF, sizeof buf);
        rc = trace_write_many(lp, n, f, &o);
        if (f != stdout ? fclose(f) : fflush(f)) rc = -1;
        const char *changed = NULL;
        for (int i = 0; i < n && !changed; i++) changed = dpmem_log_error(&logs[i]);
        if (changed) {   /* a log changed under us: what was written is not the log */
            fprintf(stderr, "dpmem-trace: %s\n", shown(changed));
            if (f != stdout) remove(out);
            rc = -1;
        } else if (rc) fprintf(stderr, "dpmem-trace: %s: cannot write\n", shown(out));
    }
    for (int i = 0; i < opened; i++) dpmem_log_close(&logs[i]);
    free(logs); free(lp);
    return rc ? 1 : 0;
}
