/* test_tools_trace.c — dpmem-trace on the known log: the JSON parses (python3's json), and has the
   expected thread names, scope slices (names, counts, timestamps in µs), GPU slices, counter tracks
   per category with the right maximum, allocation and snapshot instants; a cut log still gives
   balanced slices; one thread_name per track, the program's name for it, else "thread N"; bad input
   gets a one-line error. */
#include "test_tools_common.h"

static int has(const char *hay, const char *needle) { return hay && strstr(hay, needle) != NULL; }

/* Thread names as the kit writes them: a thread announced unnamed at its first event and named
   later (dpmem_thread_name) on the same OS thread, a thread never named, and an index that a second
   OS thread takes over (a new track). One thread_name per track: the last name given, else
   "thread N". The old trace named the first "T1" (the later name was dropped) and wrote the unnamed
   one's entry twice. */
static void check_thread_names(void) {
    const char *path = tt_path("threads.log");
    SynthLog S;
    synth_init(&S, 65536, T0);
    synth_thread(&S, 1, T0, 1111, "");
    synth_begin(&S, 1, T0 + 1 * MS, "setup");
    synth_end(&S, 1, T0 + 2 * MS, "setup");
    synth_thread(&S, 1, T0 + 3 * MS, 1111, "main");
    synth_thread(&S, 2, T0 + 4 * MS, 2222, "");
    synth_begin(&S, 2, T0 + 5 * MS, "work");
    synth_end(&S, 2, T0 + 6 * MS, "work");
    synth_thread(&S, 3, T0 + 7 * MS, 3333, "loader");
    synth_begin(&S, 3, T0 + 8 * MS, "load");
    synth_end(&S, 3, T0 + 9 * MS, "load");
    synth_thread(&S, 3, T0 + 10 * MS, 4444, "");   /* index 3 taken over by another OS thread, never named */
    synth_begin(&S, 3, T0 + 11 * MS, "load");
    synth_end(&S, 3, T0 + 12 * MS, "load");
    synth_close(&S, 1, T0 + 13 * MS);
    synth_save(&S, path);
    synth_release(&S);
    CHECK(tt_run("dpmem-trace", "'%s' -o '%s'", path, tt_path("threads.json")) == 0, "dpmem-trace threads.log");
    static const char script[] =
        "import json, sys, collections\n"
        "ev = json.load(open(sys.argv[1]))['traceEvents']\n"
        "m = [(e['tid'], e['args']['name']) for e in ev if e['ph'] == 'M' and e['name'] == 'thread_name']\n"
        "c = collections.Counter(t for t, _ in m)\n"
        "assert all(n == 1 for n in c.values()), ('a thread_name repeated', m)\n"
        "assert dict(m) == {1: 'main', 2: 'thread 2', 3: 'loader', 4: 'thread 4'}, m\n"
        "assert sorted((e['tid'], e['name']) for e in ev if e['ph'] == 'B') == [(1, 'setup'), (2, 'work'), (3, 'load'), (4, 'load')]\n"
        "print('ok')\n";
    CHECK(tt_python("threads.py", script, tt_path("threads.json"), "-") == 0, "thread names (see above)");
}

int main(void) {
    tt_mkdir("trace");
    if (system("python3 -c 1 >/dev/null 2>&1") != 0) { printf("SKIP: no python3 to parse the trace JSON\n"); return 77; }
    check_thread_names();
    tt_known_log(tt_path("known.log"), (KnownLog){ .chunk_bytes = 512 });
    tt_known_log(tt_path("cut.log"), (KnownLog){ .no_close = 1 });
    int rc = tt_run("dpmem-trace", "'%s' -o '%s'", tt_path("known.log"), tt_path("known.json"));
    CHECK(rc == 0, "exit %d", rc);
    rc = tt_run("dpmem-trace", "'%s' -o '%s'", tt_path("cut.log"), tt_path("cut.json"));
    char *err = tt_slurp(tt_path("err.txt"), NULL);
    CHECK(rc == 0 && has(err, "not closed cleanly"), "cut log: exit %d, stderr %s", rc, err ? err : "");
    free(err);
    static const char script[] =
        "import json, sys, collections\n"
        "t = json.load(open(sys.argv[1]))\n"
        "ev = t['traceEvents']\n"
        "names = {e['tid']: e['args']['name'] for e in ev if e['ph'] == 'M' and e['name'] == 'thread_name'}\n"
        "assert names[1] == 'main' and names[2] == 'loader' and names[1000001] == 'GPU (main)', names\n"
        "assert t['otherData']['run'] == 'known' and t['otherData']['config.seq_len'] == '128'\n"
        "B = [e for e in ev if e['ph'] == 'B']; E = [e for e in ev if e['ph'] == 'E']\n"
        "c = collections.Counter((e['name'], e['tid']) for e in B)\n"
        "assert c == {('step', 1): 3, ('forward', 1): 3, ('backward', 1): 3, ('optimizer_step', 1): 3, ('data', 2): 3}, c\n"
        "assert len(E) == len(B)\n"
        "fw = sorted(e['ts'] for e in B if e['name'] == 'forward')\n"
        "assert fw == [3000.0, 13000.0, 23000.0], fw\n"
        "gpu = [e for e in ev if e['ph'] == 'X']\n"
        "assert len(gpu) == 3 and all(e['dur'] == 2500.0 and e['name'] == 'forward' for e in gpu), gpu\n"
        "assert sorted(e['ts'] for e in gpu) == fw\n"
        "C = collections.defaultdict(list)\n"
        "for e in ev:\n"
        "    if e['ph'] == 'C': C[e['name']].append(e['args']['bytes'])\n"
        "assert max(C['live total']) == 471859200 and max(C['live activations']) == 209715200, C.keys()\n"
        "assert max(C['live per_sample_grads']) == 52428800 and C['live params'] == [104857600]\n"
        "al = [e for e in ev if e['ph'] == 'i' and e['name'] == 'alloc activations/h']\n"
        "assert len(al) == 3 and al[0]['args'] == {'bytes': 209715200, 'address': '0x20000', 'space': 'device'}, al[:1]\n"
        "sn = [e for e in ev if e['ph'] == 'i' and e['name'].startswith('snapshot ')]\n"
        "assert [e['name'] for e in sn] == ['snapshot after step 0', 'snapshot after step 1', 'snapshot after step 2']\n"
        "assert sn[1]['args']['device_used'] == 108 * 2**20 and sn[1]['args']['live params'] == 100 * 2**20\n"
        "ts = [e['ts'] for e in ev if 'ts' in e and e['ph'] != 'X']\n"
        "assert ts == sorted(ts), 'events not in time order'\n"
        "u = json.load(open(sys.argv[2]))['traceEvents']\n"
        "assert len([e for e in u if e['ph'] == 'B']) == len([e for e in u if e['ph'] == 'E'])\n"
        "assert json.load(open(sys.argv[2]))['otherData']['closed'] is False\n"
        "print('ok')\n";
    CHECK(tt_python("check.py", script, tt_path("known.json"), tt_path("cut.json")) == 0, "the trace JSON is not as expected (see above)");
    /* bad input */
    FILE *f = fopen(tt_path("garbage.log"), "wb");
    for (int i = 0; f && i < 3000; i++) fputc(i * 37 & 0xff, f);
    if (f) fclose(f);
    const char *bad[][2] = { { "'%s/garbage.log' -o x.json", "not a dpmem log" }, { "'%s/none.log' -o x.json", "No such file" },
                             { "'%s/known.log'", "no output file" }, { "'%s/known.log' -o x.json --zap", "unknown option" } };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) tt_expect_error("dpmem-trace", bad[i][0], bad[i][1]);
    if (tt_failures) { fprintf(stderr, "%d check(s) failed\n", tt_failures); return 1; }
    printf("trace: all checks passed\n");
    return 0;
}
