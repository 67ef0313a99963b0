/* dpmem_trace.c — dpmem-trace: a log as Chrome Trace Event JSON for ui.perfetto.dev and
   chrome://tracing. The conversion is tools/trace.c; this file is the command line. */
#include <stdio.h>
#include <string.h>

#include "dpmem_read.h"
#include "io_guard.h"
#include "trace.h"

static int fail(const char *msg, const char *arg) {
    fprintf(stderr, "dpmem-trace: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    return 2;
}

int main(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    TraceOptions o = { 0 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: dpmem-trace run.log -o run.json [--no-allocs]\n"
                   "  -o FILE       the JSON to write ('-': stdout)\n"
                   "  --no-allocs   no instant event per allocation (the counters stay)\n");
            return 0;
        } else if (!strcmp(a, "-o")) { if (i + 1 >= argc) return fail("-o needs a file", NULL); out = argv[++i]; }
        else if (!strcmp(a, "--no-allocs")) o.no_allocs = 1;
        else if (a[0] == '-' && a[1]) return fail("unknown option", a);
        else if (in) return fail("one log at a time", a);
        else in = a;
    }
    if (!in) return fail("no log given (usage: dpmem-trace run.log -o run.json)", NULL);
    if (!out) return fail("no output file: give -o run.json", NULL);
    IoPath io[2] = { { in, "log", 0 }, { out, "-o", 1 } };
    char e[1024];
    if (io_check_outputs(io, 2, e, sizeof e)) return fail(e, NULL);
    DpmemLog L;
    char err[512];
    if (dpmem_log_open(&L, in, err, sizeof err)) { fprintf(stderr, "dpmem-trace: %s\n", err); return 1; }
    dpmem_log_warn(&L, "dpmem-trace");
    FILE *f = strcmp(out, "-") ? fopen(out, "w") : stdout;
    if (!f) { dpmem_log_close(&L); return fail("cannot write", out), 1; }
    static char buf[1 << 20];
    setvbuf(f, buf, _IOFBF, sizeof buf);
    int rc = trace_write(&L, f, &o);
    if (f != stdout ? fclose(f) : fflush(f)) rc = -1;
    if (dpmem_log_error(&L)) {   /* the log changed under us: what was written is not the log */
        fprintf(stderr, "dpmem-trace: %s\n", dpmem_log_error(&L));
        if (f != stdout) remove(out);
        rc = -1;
    } else if (rc) fprintf(stderr, "dpmem-trace: %s: cannot write\n", out);
    dpmem_log_close(&L);
    return rc ? 1 : 0;
}
