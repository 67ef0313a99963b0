/* test_tools_report.c — dpmem-report on the known logs (tests/test_tools_common.h): the text report's
   numbers against hand-computed values, CSV and JSON parsed by python3's csv and json modules and
   compared with the text and with each other, the health warnings (leak, untracked growth), the
   baseline, the charts (decoded, category colours present), the sweep chart only for a one-value
   sweep, a cut log, and bad input. */
#include "test_tools_png.h"

static int has(const char *hay, const char *needle) { return hay && strstr(hay, needle) != NULL; }

static long count_in(const char *png, Rgb c) {
    Png P;
    if (load(&P, png)) return -1;
    long n = count_colour(&P, 0, 0, P.w, P.h, c);
    stbi_image_free(P.px);
    return n;
}

static void check_text_and_exports(void) {
    const char *known = tt_path("known.log"), *leaky = tt_path("leaky.log");
    tt_known_log(known, (KnownLog){ 0 });
    tt_known_log(leaky, (KnownLog){ .leaky = 1, .run = "leaky" });
    remove(tt_path("layout.txt"));
    setenv("DPMEM_LAYOUT", tt_path("layout.txt"), 1);
    int rc = tt_run("dpmem-report", "'%s' '%s' --csv '%s' --json '%s' --charts '%s'", known, leaky, tt_path("r.csv"),
                    tt_path("r.json"), tt_path("charts"));
    unsetenv("DPMEM_LAYOUT");
    CHECK(rc == 0, "exit %d", rc);
    char *out = tt_slurp(tt_path("out.txt"), NULL);
    /* Hand-computed: peak 100+100+200+50 MiB at 18 ms; scopes from the known timestamps. */
    const char *want[] = {
        "peak total: 450.00 MiB (471859200 bytes) at 18.000 ms",
        "  params                      104857600       100.00   22.2%         100.00",
        "  activations                 209715200       200.00   44.4%         200.00",
        "  per_sample_grads             52428800        50.00   11.1%          50.00",
        "  step                          3       30.000       10.000       10.000            -         350.00",
        "  forward                       3        9.000        3.000        3.000        2.500         199.00",
        "  backward                      3       12.000        4.000        4.000            -         150.00",
        "  optimizer_step                3        4.500        1.500        1.500            -           0.00",
        "  data                          3        3.000        1.000        1.000            -           1.00",
        "  activations/h                                 209715200     200.00   device        3",
        "  input/batch                                     1048576       1.00     host        3",
        "peak total: 451.00 MiB (472907776 bytes) at 18.000 ms",
        "  ok: live bytes at the end of 'step' do not keep growing (3 steps)",
        "  WARNING: live bytes at the end of 'step' grew in each of the last 2 steps, by 1.00 MiB per step: a leak?",
        "  WARNING: untracked device memory grew from 0 B to 16.00 MiB across the snapshots",
        "== comparison (baseline: known;",
        "  leaky                    451.00    1.002       100.00       100.00       201.00        50.00",
        "activations +1.00 untracked +8.00",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) CHECK(has(out, want[i]), "text report lacks: %s", want[i]);
    /* the leak warning belongs to the leaky run only */
    const char *second = out ? strstr(out, "== run: leaky") : NULL;
    const char *leakw = out ? strstr(out, "a leak?") : NULL;
    CHECK(second && leakw && leakw > second, "leak warning not (only) in the leaky run");
    free(out);

    /* CSV and JSON: same columns, same numbers, and the hand-computed ones. */
    static const char script[] =
        "import csv, json, sys\n"
        "rows = list(csv.DictReader(open(sys.argv[1])))\n"
        "objs = json.load(open(sys.argv[2]))\n"
        "assert len(rows) == 2 and len(objs) == 2, (len(rows), len(objs))\n"
        "for r, o in zip(rows, objs):\n"
        "    assert list(r.keys()) == list(o.keys()), 'CSV and JSON columns differ'\n"
        "    for k, v in r.items():\n"
        "        j = o[k]\n"
        "        if j is None: assert v == '', (k, v)\n"
        "        elif isinstance(j, str): assert v == j, (k, v, j)\n"
        "        else: assert float(v) == float(j), (k, v, j)\n"
        "k, l = objs\n"
        "want = {'run': 'known', 'peak_bytes': 471859200, 'peak_ms': 18.0, 'steps': 3, 'step_mean_ms': 10.0,\n"
        "        'at_peak.params': 104857600, 'at_peak.grads': 104857600, 'at_peak.activations': 209715200,\n"
        "        'at_peak.per_sample_grads': 52428800, 'scope.forward.gpu_mean_ms': 2.5, 'scope.forward.count': 3,\n"
        "        'scope.step.mem_delta_bytes': 350 * 2**20, 'leak': 0, 'untracked_growth': 1,\n"
        "        'untracked_last_bytes': 16 * 2**20, 'end_live_bytes': 100 * 2**20, 'config.seq_len': '128',\n"
        "        'peak_vs_baseline': 1.0, 'closed': 1, 'scope.step.gpu_mean_ms': None}\n"
        "for key, v in want.items(): assert k[key] == v, (key, k[key], v)\n"
        "assert l['leak'] == 1 and l['leak_per_step_bytes'] == 2**20, l['leak']\n"
        "assert l['peak_bytes'] == 472907776 and l['overhead.activations'] == 2**20\n"
        "assert abs(l['peak_vs_baseline'] - 472907776 / 471859200) < 1e-6\n"
        "assert abs(k['scope.backward.total_ms'] - 11.999994) < 1e-9\n"
        "print('ok')\n";
    CHECK(tt_python("check.py", script, tt_path("r.csv"), tt_path("r.json")) == 0, "CSV/JSON do not carry the expected numbers (see above)");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "python3 -m json.tool '%s' >/dev/null", tt_path("r.json"));
    CHECK(system(cmd) == 0, "python3 -m json.tool rejects the JSON");

    /* Charts: decoded, with every category's colour in the breakdown, both runs in the tradeoff (a
       point in each run's colour, keyed by its name), no label over another. */
    const char *cats[] = { "params", "grads", "activations", "per_sample_grads" };
    for (int i = 0; i < 4; i++)
        CHECK(count_in(tt_path("charts/breakdown.png"), category_colour(cats[i])) > 500, "breakdown.png lacks %s", cats[i]);
    CHECK(count_in(tt_path("charts/timeline.png"), category_colour("activations")) > 5000, "timeline.png lacks activations");
    TtBox *bx;
    int nb = tt_layout_load(tt_path("layout.txt"), &bx);
    CHECK(tt_method_marks(bx, nb, tt_path("charts/tradeoff.png"), "known") == 1 && tt_method_marks(bx, nb, tt_path("charts/tradeoff.png"), "leaky") == 1,
          "tradeoff.png lacks a run's point in the run's colour");
    static const char *const charts[] = { "breakdown.png", "tradeoff.png", "timeline.png" };
    for (int i = 0; i < 3; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", tt_path("charts"), charts[i]);
        CHECK(tt_text_overlaps(bx, nb, p) == 0, "%s: labels overlap (above)", charts[i]);
    }
    free(bx);
    struct stat st;
    CHECK(stat(tt_path("charts/sweep.png"), &st) != 0, "sweep.png written though no config value differs");

    /* --baseline by run name: now 'known' is measured against 'leaky'. */
    rc = tt_run("dpmem-report", "'%s' '%s' --baseline leaky -q --json '%s'", tt_path("known.log"), tt_path("leaky.log"), tt_path("b.json"));
    char *js = tt_slurp(tt_path("b.json"), NULL);
    CHECK(rc == 0 && has(js, "\"peak_vs_baseline\": 0.997783"), "--baseline leaky: %s", js ? js : "(none)");
    free(js);
    char *o = tt_slurp(tt_path("out.txt"), NULL);
    CHECK(o && o[0] == 0, "-q printed a report");
    free(o);
}

static void check_sweep(void) {
    const char *p[3] = { tt_path("s64.log"), tt_path("s128.log"), tt_path("s256.log") };
    const char *sl[3] = { "64", "128", "256" };
    for (int i = 0; i < 3; i++) tt_known_log(p[i], (KnownLog){ .run = sl[i], .seq_len = sl[i], .act_mib = 50ull << i });
    remove(tt_path("layout.txt"));
    setenv("DPMEM_LAYOUT", tt_path("layout.txt"), 1);
    int rc = tt_run("dpmem-report", "'%s' '%s' '%s' --charts '%s' --csv '%s'", p[0], p[1], p[2], tt_path("sweep"), tt_path("s.csv"));
    unsetenv("DPMEM_LAYOUT");
    CHECK(rc == 0, "sweep: exit %d", rc);
    struct stat st;
    CHECK(stat(tt_path("sweep/sweep.png"), &st) == 0, "no sweep.png for a seq_len sweep");
    /* the forward phase's delta grows with seq_len: 49, 99, 199 MiB (activations minus the freed batch) */
    char *csv = tt_slurp(tt_path("s.csv"), NULL);
    CHECK(has(csv, ",51380224,") && has(csv, ",103809024,") && has(csv, ",208666624,"), "forward deltas 49/99/199 MiB not in the CSV");
    free(csv);
    /* one line (the runs differ in seq_len only): a point at each of the three values in every panel,
       and the legend's marker */
    TtBox *bx;
    int nb = tt_layout_load(tt_path("layout.txt"), &bx);
    char sp[600];
    snprintf(sp, sizeof sp, "%s/sweep.png", tt_path("sweep"));
    int pts = tt_method_marks(bx, nb, sp, "runs");
    CHECK(pts >= 7 && (pts - 1) % 3 == 0, "sweep.png: %d markers of the one series (want 3 per panel and the legend's)", pts);
    CHECK(tt_text_overlaps(bx, nb, sp) == 0, "sweep.png: labels overlap (above)");
    free(bx);
}

/* An OOM post-mortem is printed in full. */
static void check_oom(void) {
    SynthLog S;
    synth_init(&S, 65536, T0);
    synth_begin(&S, 1, T0 + 1, "outer");
    synth_alloc(&S, 1, T0 + 2, "activations/h", 1, 0x1000, 3 * MiB);
    synth_oom(&S, 1, T0 + 3, "activations/h", 1, 1024ull * 1024 * MiB, 79ull * 1024 * MiB, 80ull * 1024 * MiB, "outer", "activations",
              3 * MiB, 3 * MiB);
    synth_save(&S, tt_path("oom.log"));
    synth_release(&S);
    int rc = tt_run("dpmem-report", "'%s'", tt_path("oom.log"));
    char *out = tt_slurp(tt_path("out.txt"), NULL);
    const char *want[] = { "  OOM: 1024.00 GiB requested for activations/h (device); device used 79.00 GiB of 80.00 GiB\n",
                           "       in scope: outer\n", "       live: activations 3.00 MiB\n", "       largest: activations/h 3.00 MiB\n",
                           "  WARNING: 1 out-of-memory event(s)\n" };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) CHECK(rc == 0 && has(out, want[i]), "OOM report lacks: %s", want[i]);
    free(out);

    /* A host OOM (a CPU run's --mem-limit) has no device figures: none are printed. */
    synth_init(&S, 65536, T0);
    synth_alloc(&S, 1, T0 + 2, "activations/h", 0, 0x1000, 3 * MiB);
    synth_oom(&S, 1, T0 + 3, "activations/g", 0, 4 * MiB, 0, 0, "forward", "activations", 3 * MiB, 3 * MiB);
    synth_save(&S, tt_path("oom_host.log"));
    synth_release(&S);
    rc = tt_run("dpmem-report", "'%s'", tt_path("oom_host.log"));
    out = tt_slurp(tt_path("out.txt"), NULL);
    CHECK(rc == 0 && has(out, "  OOM: 4.00 MiB requested for activations/g (host)\n") && !has(out, "device used"),
          "host OOM report:\n%s", out ? out : "");
    free(out);
}

static void check_bad_input(void) {
    tt_known_log(tt_path("cut.log"), (KnownLog){ .no_close = 1 });   /* a run that died after its last step */
    int rc = tt_run("dpmem-report", "'%s'", tt_path("cut.log"));
    char *out = tt_slurp(tt_path("out.txt"), NULL), *err = tt_slurp(tt_path("err.txt"), NULL);
    CHECK(rc == 0 && has(out, "NOT closed cleanly") && has(err, "not closed cleanly") && has(out, "peak total: 450.00 MiB"),
          "cut log: exit %d\n%s%s", rc, out ? out : "", err ? err : "");
    free(out); free(err);
    FILE *f = fopen(tt_path("garbage.log"), "wb");
    for (int i = 0; f && i < 5000; i++) fputc((i * 131) & 0xff, f);
    if (f) fclose(f);
    struct { const char *args, *want; } bad[] = {
        { "'%s/garbage.log'", "not a dpmem log" }, { "'%s/nope.log'", "No such file" },
        { "'%s/known.log' --baseline nobody", "no run of that name" }, { "'%s/known.log' --frobnicate", "unknown option" },
        { "'%s/known.log' --csv /nonexistent-dir/x.csv", "cannot write" }, { "'%s/known.log' --json", "--json needs a file" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) tt_expect_error("dpmem-report", bad[i].args, bad[i].want);
}

int main(void) {
    tt_mkdir("report");
    if (system("python3 -c 1 >/dev/null 2>&1") != 0) { printf("SKIP: no python3 to parse the CSV and JSON\n"); return 77; }
    check_text_and_exports();
    check_sweep();
    check_oom();
    check_bad_input();
    if (tt_failures) { fprintf(stderr, "%d check(s) failed\n", tt_failures); return 1; }
    printf("report: all checks passed\n");
    return 0;
}
