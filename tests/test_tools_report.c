/* test_tools_report.c — dpmem-report on the known logs (tests/test_tools_common.h): the text report's
   numbers against hand-computed values, CSV and JSON parsed by python3's csv and json modules and
   compared with the text and with each other, the health warnings (leak, untracked growth), the
   baseline, the charts (decoded, category colours present), the sweep chart only for a one-value
   sweep, a cut log, bad input, and names that are UTF-8, not UTF-8 or hold control characters
   (JSON and trace in UTF-8, the text report escaped). */
#include "test_tools_png.h"

static int has(const char *hay, const char *needle) { return hay && strstr(hay, needle) != NULL; }

static long count_in(const char *png, Rgb c) {
    Png P;
    if (load(&P, png)) return -1;
    long n = count_colour(&P, 0, 0, P.w, P.h, c);
    stbi_image_free(P.px);
    return n;
}

/* A CUDA run's untracked device memory grows by the memory pool's cached blocks (META cuda.alloc=pool):
   the report says so as a note, not as a warning of fragmentation; with cudaMalloc (sync) it warns. */
static void check_pool_note(void) {
    const char *pooled = tt_path("pooled.log"), *sync = tt_path("sync.log");
    tt_known_log(pooled, (KnownLog){ .leaky = 1, .run = "pooled", .cuda_alloc = "pool" });
    tt_known_log(sync, (KnownLog){ .leaky = 1, .run = "sync", .cuda_alloc = "sync" });
    CHECK(tt_run("dpmem-report", "'%s'", pooled) == 0, "dpmem-report pooled");
    char *out = tt_slurp(tt_path("out.txt"), NULL);
    CHECK(has(out, "  note: untracked device memory grew from 0 B to 16.00 MiB across the snapshots: the CUDA backend's memory pool keeps freed blocks"),
          "the pool's cache is a note: %s", out ? out : "");
    CHECK(!has(out, "WARNING: untracked device memory"), "no fragmentation warning with the pool");
    free(out);
    CHECK(tt_run("dpmem-report", "'%s'", sync) == 0, "dpmem-report sync");
    out = tt_slurp(tt_path("out.txt"), NULL);
    CHECK(has(out, "  WARNING: untracked device memory grew from 0 B to 16.00 MiB across the snapshots (fragmentation"),
          "cudaMalloc runs still warn");
    free(out);
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
    /* Hand-computed: peak 100+100+200+50 MiB at 18 ms; scopes from the known timestamps; a scope's max rise
       and net (forward 101 -> 300 MiB in each of 3 steps: +597; backward 300 -> 200: -300). */
    const char *want[] = {
        "peak total: 450.00 MiB (471859200 bytes) at 18.000 ms",
        "  params                      104857600       100.00   22.2%         100.00",
        "  activations                 209715200       200.00   44.4%         200.00",
        "  per_sample_grads             52428800        50.00   11.1%          50.00",
        /* per step, over steps 2..3 (the first is the default warm-up): median min q1 q3 max */
        "step time (ms, the 'step' scope over steps 2..3 (1 warm-up step left out: default)): median 10.000, min 10.000, q1 10.000, q3 10.000, max 10.000",
        "  step                          3       30.000      10.000      10.000      10.000      10.000      10.000            -        350.00        0.00",
        "  forward                       3        9.000       3.000       3.000       3.000       3.000       3.000        2.500        199.00      597.00",
        "  backward                      3       12.000       4.000       4.000       4.000       4.000       4.000            -        150.00     -300.00",
        "  optimizer_step                3        4.500       1.500       1.500       1.500       1.500       1.500            -          0.00     -300.00",
        "  data                          3        3.000       1.000       1.000       1.000       1.000       1.000            -          1.00        0.00",
        "  activations/h                                 209715200     200.00   device        3",
        "  input/batch                                     1048576       1.00     host        3",
        "peak total: 451.00 MiB (472907776 bytes) at 18.000 ms",
        "  ok: live bytes at the end of 'step' show no rising trend (3 steps)",
        "  WARNING: live bytes at the end of 'step' keep rising: +1.00 MiB from the end of step 2 to the end of step 3 (1.00 MiB per step): a leak?",
        "    the tags that grew from the end of step 2 to the end of the last step (allocations and frees between):",
        "    activations/leak                         +1.00 MiB    (2.00 MiB -> 3.00 MiB; 1 allocs, 0 frees)",
        "  WARNING: untracked device memory grew from 0 B to 16.00 MiB across the snapshots",
        "== comparison (baseline: known;",
        "  leaky                    451.00    1.002       100.00       100.00       201.00        50.00",
        "       10.000    1.000  [ 1.000,  1.000]",
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
        "        elif isinstance(j, list): assert [float(x) for x in v.split()] == j, (k, v, j)\n"
        "        else: assert float(v) == float(j), (k, v, j)\n"
        "k, l = objs\n"
        "want = {'run': 'known', 'peak_bytes': 471859200, 'peak_ms': 18.0, 'steps': 3, 'step_mean_ms': 10.0,\n"
        "        'warmup_steps': 1, 'timed_steps': 2, 'step_median_ms': 10.0, 'step_ms': [10.0, 10.0, 10.0], 'no_time': 0,\n"
        "        'scope.forward.median_ms': 3.0, 'scope.data.q3_ms': 1.000001, 'step_vs_baseline': 1.0, 'leak_tags': None,\n"
        "        'at_peak.params': 104857600, 'at_peak.grads': 104857600, 'at_peak.activations': 209715200,\n"
        "        'at_peak.per_sample_grads': 52428800, 'scope.forward.gpu_mean_ms': 2.5, 'scope.forward.count': 3,\n"
        "        'scope.step.mem_max_rise_bytes': 350 * 2**20, 'leak': 0, 'untracked_growth': 1,\n"
        "        'untracked_last_bytes': 16 * 2**20, 'end_live_bytes': 100 * 2**20, 'config.seq_len': '128',\n"
        "        'peak_vs_baseline': 1.0, 'closed': 1, 'scope.step.gpu_mean_ms': None}\n"
        "for key, v in want.items(): assert k[key] == v, (key, k[key], v)\n"
        "assert l['leak'] == 1 and l['leak_per_step_bytes'] == 2**20, l['leak']\n"
        "assert l['leak_tags'] == 'activations/leak:+1048576', l['leak_tags']\n"
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


/* A log whose steps differ: 50, 10, 30, 20 ms; inside them "clip" runs 1 ms, 1+2 ms, not at all, 4 ms
   (its time per step), "forward" 2 ms each; "model_creation" (7 ms) before the steps; the per-step
   records (train.loss, dp.sample_norms); two distinct warnings. meta_warmup: META timing.warmup_steps
   ("" for none), plan: META config.device plan. */
static void timed_log(const char *path, const char *meta_warmup, int plan) {
    SynthLog S;
    synth_init(&S, 65536, T0);
    synth_thread(&S, 1, T0, 1111, "main");
    synth_meta(&S, 1, T0, "run", plan ? "planned" : "timed");
    synth_meta(&S, 1, T0, "config.batch_size", "4");
    synth_meta(&S, 1, T0, "config.device", plan ? "plan" : "cpu");
    synth_meta(&S, 1, T0, "dp.norm", "flash");
    synth_meta(&S, 1, T0, "dp.max_grad_norm", "1");
    synth_meta(&S, 1, T0, "dp.logical_batch", "8");
    synth_meta(&S, 1, T0, "dp.physical_batch", "4");
    synth_meta(&S, 1, T0, "dp.layer.lm_head", "flash");   /* per layer: not a table column */
    if (*meta_warmup) synth_meta(&S, 1, T0, "timing.warmup_steps", meta_warmup);
    synth_begin(&S, 1, T0 + 1 * MS, "model_creation");
    synth_alloc(&S, 1, T0 + 2 * MS, "params/w", 0, 0x1000, 4 * MiB);
    synth_warn(&S, 1, T0 + 5 * MS, "free of an unknown pointer", 0xdead);
    synth_end(&S, 1, T0 + 8 * MS, "model_creation");
    static const uint64_t dur[4] = { 50, 10, 30, 20 };
    static const char *const loss[4] = { "1 7.5", "2 7.25", "3 7.125", "4 7.0625" };
    uint64_t b = T0 + 10 * MS;
    for (int k = 0; k < 4; k++) {
        synth_begin(&S, 1, b, "step");
        synth_begin(&S, 1, b + 1 * MS, "forward");
        synth_end(&S, 1, b + 3 * MS, "forward");
        if (k == 0 || k == 1) { synth_begin(&S, 1, b + 4 * MS, "clip"); synth_end(&S, 1, b + 5 * MS, "clip"); }
        if (k == 1) { synth_begin(&S, 1, b + 6 * MS, "clip"); synth_end(&S, 1, b + 8 * MS, "clip"); }
        if (k == 3) { synth_begin(&S, 1, b + 4 * MS, "clip"); synth_end(&S, 1, b + 8 * MS, "clip"); }
        if (k == 0) synth_meta(&S, 1, b + 9 * MS, "dp.sample_norms", "1 0 0.5 1 2 0.5");
        if (k == 1) synth_meta(&S, 1, b + 9 * MS, "dp.sample_norms", "2 0 4 0.25");
        if (k == 0) synth_warn(&S, 1, b + 9 * MS, "non-finite values in grads/x at step 2 after backward", 3);
        if (k == 1) synth_warn(&S, 1, b + 9 * MS, "non-finite values in grads/x at step 2 after backward", 3);
        synth_meta(&S, 1, b + dur[k] * MS - 1, "train.loss", loss[k]);
        synth_end(&S, 1, b + dur[k] * MS, "step");
        b += dur[k] * MS;
    }
    synth_free(&S, 1, b + 1 * MS, "params/w", 0, 0x1000, 4 * MiB);
    synth_close(&S, 1, b + 2 * MS);
    synth_save(&S, path);
    synth_release(&S);
}

static void check_times_and_records(void) {
    timed_log(tt_path("timed.log"), "", 0);
    int rc = tt_run("dpmem-report", "'%s'", tt_path("timed.log"));
    char *out = tt_slurp(tt_path("out.txt"), NULL);
    /* steps 2..4 take 10, 30, 20 ms: median 20, quartiles 15 and 25 (linear between ranks); clip's
       time per step 3, 0, 4 ms; model_creation is outside the steps: its one instance */
    const char *want[] = {
        "step time (ms, the 'step' scope over steps 2..4 (1 warm-up step left out: default)): median 20.000, min 10.000, q1 15.000, q3 25.000, max 30.000",
        "  clip                          4        8.000       3.000       0.000       1.500       3.500       4.000",
        "  forward                       4        8.000       2.000       2.000       2.000       2.000       2.000",
        "  model_creation                1        7.000       7.000       7.000       7.000       7.000       7.000",
        "   settings: dp.norm=flash dp.max_grad_norm=1 dp.logical_batch=8 dp.physical_batch=4\n",
        "  WARNING: 3 WARN events in the log, 2 distinct:\n",
        "    1x, first at 5.000 ms: free of an unknown pointer\n",
        "    2x, first at 19.000 ms: non-finite values in grads/x at step 2 after backward\n",
        "before that step's update): step 1 7.5 -> step 4 7.0625 (4 steps logged)\n",
        "per-sample gradient norms (META dp.sample_norms: 3 samples of 2 steps; C = 1;",
        "  clipped (factor < 1): 2 of 3 (66.7%); clip factor min 0.25, median 0.5, max 1\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) CHECK(rc == 0 && has(out, want[i]), "timed report lacks: %s", want[i]);
    CHECK(!has(out, "dp.layer."), "a per-layer META key in the settings line");
    free(out);

    /* --warmup 0: all four steps (median of 10, 20, 30, 50 = 25); META timing.warmup_steps 2: steps 3..4 */
    rc = tt_run("dpmem-report", "'%s' --warmup 0", tt_path("timed.log"));
    out = tt_slurp(tt_path("out.txt"), NULL);
    CHECK(rc == 0 && has(out, "over steps 1..4 (0 warm-up steps left out: --warmup)): median 25.000, min 10.000, q1 17.500, q3 35.000, max 50.000"),
          "--warmup 0:\n%s", out ? out : "");
    free(out);
    timed_log(tt_path("timed2.log"), "2", 0);
    rc = tt_run("dpmem-report", "'%s'", tt_path("timed2.log"));
    out = tt_slurp(tt_path("out.txt"), NULL);
    CHECK(rc == 0 && has(out, "over steps 3..4 (2 warm-up steps left out: META timing.warmup_steps)): median 25.000, min 20.000"),
          "META timing.warmup_steps 2:\n%s", out ? out : "");
    free(out);

    /* --csv - and --json -: the table on stdout (and no file named '-'), with the per-step lists */
    char cmd[5000], here[1024];
    if (!getcwd(here, sizeof here)) snprintf(here, sizeof here, ".");
    const char *B = tt_build();
    char bin[2048];
    snprintf(bin, sizeof bin, "%s%s%s/dpmem-report", B[0] == '/' ? "" : here, B[0] == '/' ? "" : "/", B);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' timed.log --csv - > stdout.csv && '%s' timed.log --json - > stdout.json", tt_dir, bin, bin);
    CHECK(system(cmd) == 0, "%s failed", cmd);
    struct stat st;
    CHECK(stat(tt_path("-"), &st) != 0, "--csv - wrote a file named '-'");
    static const char script[] =
        "import csv, json, sys\n"
        "r = list(csv.DictReader(open(sys.argv[1])))[0]\n"
        "o = json.load(open(sys.argv[2]))[0]\n"
        "assert float(r['step_median_ms']) == 20.0 and o['step_median_ms'] == 20.0, (r['step_median_ms'], o['step_median_ms'])\n"
        "assert o['step_ms'] == [50.0, 10.0, 30.0, 20.0] and r['step_ms'] == '50.000000 10.000000 30.000000 20.000000', o['step_ms']\n"
        "assert (o['step_q1_ms'], o['step_q3_ms'], o['step_min_ms'], o['step_max_ms']) == (15.0, 25.0, 10.0, 30.0)\n"
        "assert (o['scope.clip.median_ms'], o['scope.clip.q1_ms'], o['scope.clip.min_ms']) == (3.0, 1.5, 0.0), o['scope.clip.median_ms']\n"
        "assert o['loss'] == [7.5, 7.25, 7.125, 7.0625] and o['loss_first'] == 7.5 and o['loss_last'] == 7.0625\n"
        "assert o['dp.norm'] == 'flash' and o['dp.max_grad_norm'] == 1 and 'dp.layer.lm_head' not in o\n"
        "assert o['batch_logical'] == 8 and o['batch_physical'] == 4 and o['warnings'] == 3\n"
        "assert o['first_warning'] == 'free of an unknown pointer'\n"
        "assert o['sample_norms'] == 3 and o['sample_norm_median'] == 2.0 and abs(o['sample_clipped_fraction'] - 2 / 3) < 1e-6\n"
        "assert not any(k.startswith('dp.io.') or k in ('sample_step', 'sample_norm', 'sample_clip') for k in o)\n"
        "print('ok')\n";
    CHECK(tt_python("stdout.py", script, tt_path("stdout.csv"), tt_path("stdout.json")) == 0, "--csv - / --json -: see above");
    /* --dp-detail: the per-layer META (dp.layer.<param>, dp.io.<param>) and every logged sample's step, norm and clip
       factor (dp.sample_norms) in the CSV and the JSON alike; without it neither (the schema's default) */
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' timed.log --dp-detail --csv detail.csv --json detail.json -q", tt_dir, bin);
    CHECK(system(cmd) == 0, "%s failed", cmd);
    static const char detail_script[] =
        "import csv, json, sys\n"
        "r = list(csv.DictReader(open(sys.argv[1])))[0]\n"
        "o = json.load(open(sys.argv[2]))[0]\n"
        "assert o['dp.layer.lm_head'] == 'flash' and r['dp.layer.lm_head'] == 'flash', (o.get('dp.layer.lm_head'), r.get('dp.layer.lm_head'))\n"
        "assert o['sample_step'] == [1, 1, 2] and r['sample_step'] == '1 1 2', (o['sample_step'], r['sample_step'])\n"
        "assert o['sample_norm'] == [0.5, 2.0, 4.0] and r['sample_norm'] == '0.5 2 4', (o['sample_norm'], r['sample_norm'])\n"
        "assert o['sample_clip'] == [1.0, 0.5, 0.25] and r['sample_clip'] == '1 0.5 0.25', (o['sample_clip'], r['sample_clip'])\n"
        "assert list(o) == list(r), 'CSV and JSON keys differ'\n"
        "assert 'dp.sample_norms' not in o and o['sample_norms'] == 3\n"
        "print('ok')\n";
    CHECK(tt_python("detail.py", detail_script, tt_path("detail.csv"), tt_path("detail.json")) == 0, "--dp-detail: see above");
    tt_expect_error("dpmem-report", "'%s/timed.log' --dp-detail", "--dp-detail adds columns to the CSV/JSON: give --csv F or --json F");
    tt_expect_error("dpmem-report", "'%s/timed.log' --csv - --json -", "only one output can be standard output");
    tt_expect_error("dpmem-report", "'%s/timed.log' --charts -", "--charts needs a directory");
    tt_expect_error("dpmem-report", "'%s/timed.log' --warmup x", "--warmup needs a number");

    /* dpmem-render -o -: the PNG on stdout */
    snprintf(bin, sizeof bin, "%s%s%s/dpmem-render", B[0] == '/' ? "" : here, B[0] == '/' ? "" : "/", B);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' timed.log -o - > stdout.png", tt_dir, bin);
    CHECK(system(cmd) == 0 && count_in(tt_path("stdout.png"), category_colour("params")) > 100 && stat(tt_path("-"), &st) != 0,
          "dpmem-render -o - gave no PNG on stdout");

    /* a plan: no time at all (the planner's own is not a step time) */
    timed_log(tt_path("plan.log"), "", 1);
    rc = tt_run("dpmem-report", "'%s' -q --json '%s'", tt_path("plan.log"), tt_path("plan.json"));
    static const char plan_script[] =
        "import json, sys\n"
        "o = json.load(open(sys.argv[1]))[0]\n"
        "for k in ('step_median_ms', 'step_mean_ms', 'step_ms', 'span_ms', 'peak_ms', 'scope.clip.total_ms', 'scope.clip.median_ms', 'step_vs_baseline'):\n"
        "    assert o[k] is None, (k, o[k])\n"
        "assert o['no_time'] == 1 and o['peak_bytes'] == 4 * 2**20 and o['scope.clip.count'] == 4\n"
        "print('ok')\n";
    CHECK(rc == 0 && tt_python("plan.py", plan_script, tt_path("plan.json"), "-") == 0, "plan run: times present");
    rc = tt_run("dpmem-report", "'%s'", tt_path("plan.log"));
    out = tt_slurp(tt_path("out.txt"), NULL);
    CHECK(rc == 0 && has(out, "nothing ran, so the run has no time") && !has(out, "step time") && !has(out, " at 0.") &&
          has(out, "  clip                          4            -           -           -           -           -           -"),
          "plan text report:\n%s", out ? out : "");
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

/* Names that are not plain ASCII (issue 27): UTF-8 goes into JSON as UTF-8 (the same string as in the
   CSV; it was "\u00c3\u00a9", which reads back as "cafÃ©"), a byte that is not UTF-8 as U+FFFD; in the
   text report control characters are escaped: an ESC sequence in a scope name does not reach the
   terminal, a newline in a category does not forge a health line. dpmem-trace's JSON the same. */
static void check_names(void) {
    const char *path = tt_path("names.log");
    SynthLog S;
    synth_init(&S, 65536, T0);
    synth_thread(&S, 1, T0, 1111, "main");
    synth_meta(&S, 1, T0, "run", "caf\xc3\xa9");
    synth_meta(&S, 1, T0, "config.note", "x\n  ok: forged config");
    for (int k = 0; k < 3; k++) {
        uint64_t b = T0 + (uint64_t)(1 + 10 * k) * MS;
        synth_begin(&S, 1, b, "step");
        synth_begin(&S, 1, b + 1 * MS, "\x1b[31mred\x1b]0;title\x07");
        synth_alloc(&S, 1, b + 2 * MS, "caf\xc3\xa9/w", 0, 0x1000, 4 * MiB);
        synth_alloc(&S, 1, b + 2 * MS, "bad\xff/w", 0, 0x2000, 2 * MiB);
        synth_alloc(&S, 1, b + 2 * MS, "x\n  ok: forged health line/w", 0, 0x3000, 1 * MiB);
        synth_alloc(&S, 1, b + 2 * MS, "c1\xc2\x9b" "31m/w", 0, 0x4000, 1 * MiB);
        synth_free(&S, 1, b + 3 * MS, "caf\xc3\xa9/w", 0, 0x1000, 4 * MiB);
        synth_free(&S, 1, b + 3 * MS, "bad\xff/w", 0, 0x2000, 2 * MiB);
        synth_free(&S, 1, b + 3 * MS, "x\n  ok: forged health line/w", 0, 0x3000, 1 * MiB);
        synth_free(&S, 1, b + 3 * MS, "c1\xc2\x9b" "31m/w", 0, 0x4000, 1 * MiB);
        synth_end(&S, 1, b + 4 * MS, "\x1b[31mred\x1b]0;title\x07");
        synth_end(&S, 1, b + 5 * MS, "step");
    }
    synth_close(&S, 1, T0 + 40 * MS);
    synth_save(&S, path);
    synth_release(&S);
    int rc = tt_run("dpmem-report", "'%s' --csv '%s' --json '%s'", path, tt_path("names.csv"), tt_path("names.json"));
    CHECK(rc == 0, "names: exit %d", rc);
    size_t n = 0;
    char *out = tt_slurp(tt_path("out.txt"), &n), *js = tt_slurp(tt_path("names.json"), NULL);
    int ctl = 0;
    for (size_t i = 0; out && i < n; i++) ctl += ((unsigned char)out[i] < 0x20 && out[i] != '\n') || out[i] == 0x7f;
    CHECK(out && ctl == 0, "the text report holds %d control bytes (an ESC sequence reaches the terminal)", ctl);
    CHECK(out && !strstr(out, "\n  ok: forged") && strstr(out, "x\\x0a  ok: forged health line") && strstr(out, "\\x1b[31mred\\x1b]0;title\\x07") &&
          strstr(out, "== run: caf\xc3\xa9  (") && strstr(out, "bad\\xff") && strstr(out, "c1\\xc2\\x9b31m") &&
          strstr(out, "config: note=x\\x0a  ok: forged config"),
          "the text report does not escape the names as expected:\n%s", out ? out : "");
    CHECK(js && strstr(js, "\"run\": \"caf\xc3\xa9\"") && strstr(js, "\"at_peak.caf\xc3\xa9\"") && strstr(js, "\"at_peak.bad\xef\xbf\xbd\"") &&
          !strstr(js, "\\u00c3") && strstr(js, "\"at_peak.x\\u000a  ok: forged health line\""),
          "JSON: UTF-8 not written as UTF-8, or an invalid byte not U+FFFD:\n%.1500s", js ? js : "");
    free(out); free(js);
    static const char script[] =
        "import csv, json, sys\n"
        "rows = list(csv.DictReader(open(sys.argv[1], encoding='utf-8', errors='replace', newline='')))\n"
        "objs = json.load(open(sys.argv[2], encoding='utf-8'))\n"
        "assert list(rows[0].keys()) == list(objs[0].keys()), (list(rows[0].keys()), list(objs[0].keys()))\n"
        "o = objs[0]\n"
        "assert o['run'] == rows[0]['run'] == 'caf\\u00e9', (o['run'], rows[0]['run'])\n"
        "assert o['at_peak.caf\\u00e9'] == 4 * 2**20 and o['at_peak.bad\\ufffd'] == 2 * 2**20, o\n"
        "print('ok')\n";
    CHECK(tt_python("names.py", script, tt_path("names.csv"), tt_path("names.json")) == 0, "names: CSV and JSON disagree (see above)");
    rc = tt_run("dpmem-trace", "'%s' -o '%s'", path, tt_path("names.trace.json"));
    char *tr = tt_slurp(tt_path("names.trace.json"), NULL);
    CHECK(rc == 0 && tr && strstr(tr, "\"alloc caf\xc3\xa9/w\"") && strstr(tr, "\"alloc bad\xef\xbf\xbd/w\"") && !strstr(tr, "\\u00c3") &&
          strstr(tr, "\"name\":\"\\u001b[31mred\\u001b]0;title\\u0007\""), "trace: names not UTF-8 / escaped:\n%.1500s", tr ? tr : "");
    free(tr);
    static const char tscript[] =
        "import json, sys\n"
        "t = json.load(open(sys.argv[1], encoding='utf-8'))\n"
        "ev = t['traceEvents'] if isinstance(t, dict) else t\n"
        "names = {e.get('name') for e in ev}\n"
        "assert 'alloc caf\\u00e9/w' in names and 'alloc bad\\ufffd/w' in names, sorted(n for n in names if n)[:20]\n"
        "print('ok')\n";
    CHECK(tt_python("trace.py", tscript, tt_path("names.trace.json"), "-") == 0, "trace: the JSON does not read back the names (see above)");
}

/* A run of `steps` steps: each step allocates and frees 64 MiB of activations; `kept(s)` bytes of
   cache/warm (warm-up) and of leak/kv (the leak) stay allocated in step s (1-based), never freed. */
typedef struct { const char *name; int steps; uint64_t warm[40], leak[40]; } LeakRun;
static void leak_log(const char *path, const LeakRun *L) {
    SynthLog S;
    synth_init(&S, 65536, T0);
    synth_thread(&S, 1, T0, 1111, "main");
    synth_meta(&S, 1, T0, "run", L->name);
    synth_alloc(&S, 1, T0 + 1 * MS, "params/w", 1, 0x10000, 10 * MiB);
    for (int s = 1; s <= L->steps; s++) {
        uint64_t b = T0 + 10 * (uint64_t)s * MS;
        synth_begin(&S, 1, b, "step");
        synth_alloc(&S, 1, b + 1 * MS, "activations/h", 1, 0x20000, 64 * MiB);
        if (L->warm[s]) synth_alloc(&S, 1, b + 2 * MS, "cache/warm", 1, 0x100000 + (uint64_t)s * 0x1000, L->warm[s]);
        if (L->leak[s]) synth_alloc(&S, 1, b + 3 * MS, "leak/kv", 1, 0x200000 + (uint64_t)s * 0x1000, L->leak[s]);
        synth_free(&S, 1, b + 4 * MS, "activations/h", 1, 0x20000, 64 * MiB);
        synth_end(&S, 1, b + 5 * MS, "step");
    }
    synth_close(&S, 1, T0 + 10 * (uint64_t)(L->steps + 1) * MS);
    synth_save(&S, path);
    synth_release(&S);
}

/* The leak check judges a trend: periodic, slow and bursty leaks that go on to the end are found, with
   their total growth from the reference step (the largest power of two at or below half the steps)
   and the tag; a warm-up (growth that stops), a one-off late allocation and live bytes that go up and
   down are not. The old check (growth at every step) missed all three leaks. */
static void check_leak_trends(void) {
    LeakRun runs[6] = { { "periodic", 30, { 0 }, { 0 } }, { "slow", 30, { 0 }, { 0 } }, { "bursty", 30, { 0 }, { 0 } },
                        { "warmup", 30, { 0 }, { 0 } }, { "oneoff", 30, { 0 }, { 0 } }, { "wobble", 30, { 0 }, { 0 } } };
    for (int s = 3; s <= 30; s += 3) runs[0].leak[s] = 1 * MiB;          /* 1 MiB every third step */
    for (int s = 1; s <= 30; s++) runs[1].leak[s] = 4096;                 /* 4 KiB every step */
    runs[2].leak[4] = runs[2].leak[11] = runs[2].leak[19] = runs[2].leak[27] = 8 * MiB;   /* bursts */
    for (int s = 1; s <= 5; s++) runs[3].warm[s] = 2 * MiB;               /* warms up over 5 steps */
    runs[3].warm[1] = 6 * MiB;
    runs[4].leak[20] = 8 * MiB;                                          /* one late allocation */
    /* wobble (written below): a 5-step warm-up, then 3 MiB allocated in every fifth step from step 8
       on and freed in the next: live bytes that go up and down */
    const char *names[6];
    char args[1024] = "";
    for (int i = 0; i < 6; i++) {
        char f[64];
        snprintf(f, sizeof f, "%s.log", runs[i].name);
        names[i] = tt_path(f);
        if (i == 5) {   /* the wobble: allocated in step s, freed in step s + 1 */
            SynthLog S;
            synth_init(&S, 65536, T0);
            synth_thread(&S, 1, T0, 1111, "main");
            synth_meta(&S, 1, T0, "run", "wobble");
            synth_alloc(&S, 1, T0 + 1 * MS, "params/w", 1, 0x10000, 10 * MiB);
            for (int s = 1; s <= 30; s++) {
                uint64_t b = T0 + 10 * (uint64_t)s * MS;
                synth_begin(&S, 1, b, "step");
                if (s <= 5) synth_alloc(&S, 1, b + 2 * MS, "cache/warm", 1, 0x100000 + (uint64_t)s * 0x1000, 1 * MiB);
                if (s >= 9 && s % 5 == 4) synth_free(&S, 1, b + 1 * MS, "cache/tmp", 1, 0x300000, 3 * MiB);
                if (s >= 8 && s % 5 == 3) synth_alloc(&S, 1, b + 3 * MS, "cache/tmp", 1, 0x300000, 3 * MiB);
                synth_end(&S, 1, b + 5 * MS, "step");
            }
            synth_close(&S, 1, T0 + 320 * MS);
            synth_save(&S, names[i]);
            synth_release(&S);
        } else leak_log(names[i], &runs[i]);
        size_t k = strlen(args);
        snprintf(args + k, sizeof args - k, " '%s'", names[i]);
    }
    int rc = tt_run("dpmem-report", "%s -q --csv '%s'", args, tt_path("leaks.csv"));
    CHECK(rc == 0, "dpmem-report on the leak logs: exit %d", rc);
    rc = tt_run("dpmem-report", "%s", args);
    char *out = tt_slurp(tt_path("out.txt"), NULL);
    /* 30 steps: the reference step is 8 (the largest power of two <= 15). From the end of step 8 to
       the end of step 30 (22 steps): periodic 10 - 2 = 8 MiB (the leaks of steps 9, 12, ..., 30), slow
       22 x 4 KiB = 88 KiB, bursty 3 x 8 MiB = 24 MiB (steps 11, 19, 27). */
    const char *want[] = {
        "== run: periodic",
        "  WARNING: live bytes at the end of 'step' keep rising: +8.00 MiB from the end of step 8 to the end of step 30 (372.36 KiB per step): a leak?",
        "    the tags that grew from the end of step 8 to the end of the last step (allocations and frees between):",
        "    leak/kv                                  +8.00 MiB    (2.00 MiB -> 10.00 MiB; 8 allocs, 0 frees)",
        "  WARNING: live bytes at the end of 'step' keep rising: +88.00 KiB from the end of step 8 to the end of step 30 (4.00 KiB per step): a leak?",
        "    leak/kv                                  +88.00 KiB   (32.00 KiB -> 120.00 KiB; 22 allocs, 0 frees)",
        "  WARNING: live bytes at the end of 'step' keep rising: +24.00 MiB from the end of step 8 to the end of step 30 (1.09 MiB per step): a leak?",
        "    leak/kv                                  +24.00 MiB   (8.00 MiB -> 32.00 MiB; 3 allocs, 0 frees)",
        "  ok: live bytes at the end of 'step' show no rising trend (30 steps)",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) CHECK(has(out, want[i]), "leak report lacks: %s\n%s", want[i], out ? out : "");
    /* exactly the three leaks are flagged, each in its own run's section */
    const char *sec[7];
    for (int i = 0; i < 6; i++) {
        char h[64];
        snprintf(h, sizeof h, "== run: %s", runs[i].name);
        sec[i] = out ? strstr(out, h) : NULL;
        CHECK(sec[i] != NULL, "no section for %s", runs[i].name);
    }
    sec[6] = out ? out + strlen(out) : NULL;
    for (int i = 0; i < 6 && out; i++) {
        if (!sec[i]) continue;
        const char *end = out + strlen(out);
        for (int j = 0; j < 6; j++) if (sec[j] && sec[j] > sec[i] && sec[j] < end) end = sec[j];
        const char *w = strstr(sec[i], "a leak?");
        int flagged = w && w < end;
        CHECK(flagged == (i < 3), "%s: %s", runs[i].name, flagged ? "flagged as a leak" : "leak not found");
        const char *ok = strstr(sec[i], "show no rising trend (30 steps)");
        CHECK((ok && ok < end) == (i >= 3), "%s: the ok line %s", runs[i].name, i >= 3 ? "is missing" : "is there beside a leak");
    }
    free(out);
    /* the CSV: the verdict, the growth, the reference step and the tags, per run */
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import csv,sys; r={x['run']: x for x in csv.DictReader(open(sys.argv[1]))}; "
             "print(' '.join('%%s:%%s:%%s:%%s:%%s' %% (k, r[k]['leak'], r[k]['leak_growth_bytes'], r[k]['leak_from_step'], r[k]['leak_tags']) "
             "for k in ('periodic','slow','bursty','warmup','oneoff','wobble')))\" '%s' > '%s'",
             tt_path("leaks.csv"), tt_path("leaks.txt"));
    CHECK(system(cmd) == 0, "python3 on leaks.csv");
    char *csv = tt_slurp(tt_path("leaks.txt"), NULL);
    CHECK(has(csv, "periodic:1:8388608:8:leak/kv:+8388608 slow:1:90112:8:leak/kv:+90112 bursty:1:25165824:8:leak/kv:+25165824 "
                   "warmup:0:0:0: oneoff:0:0:0: wobble:0:0:0:"), "leaks.csv: %s", csv ? csv : "(none)");
    free(csv);
}

/* Bytes of leak/kv kept in step s (1-based) of 1,000 in each run of check_late_leaks. */
static uint64_t late_kept(int run, int s) {
    switch (run) {
    case 0: return 1024;                                          /* early: 1 KiB every step */
    case 1: return s >= 400 ? 1024 : 0;                           /* mid-run: from step 400 */
    case 2: return s >= 701 ? 1024 : 0;                           /* the last 300 steps (issue 36) */
    case 3: return s >= 951 ? 1024 : 0;                           /* the last 50 */
    case 4: return s >= 800 && s % 10 == 0 ? 64 * 1024 : 0;       /* bursts in the last fifth */
    case 5: return s >= 601 && s <= 700 ? 1024 : 0;               /* plateau: 100 steps of growth, then none */
    case 6: return !(s & (s - 1)) ? 1 * MiB : 0;                  /* warm-up that slows: steps 1, 2, 4, ..., 512 */
    default: return s >= 998 ? 1 * MiB : 0;                       /* the last three steps: too few to judge */
    }
}

/* A leak is judged from its own beginning, so one that starts late in a long run is found like one
   that starts early (the old rule, measured from the reference step 256 of 1,000, missed a leak that
   began after step 629 and took a 100-step plateau from step 601 for a leak). Each leak is reported
   from the later of the tag snapshots (steps 256 and 512) at or before its beginning. */
static void check_late_leaks(void) {
    static const char *names[] = { "early", "mid", "late", "last50", "lateburst", "plateau", "slowwarm", "lastfew" };
    enum { RUNS = sizeof names / sizeof names[0], STEPS = 1000 };
    char args[2048] = "";
    for (int i = 0; i < RUNS; i++) {
        char f[64];
        snprintf(f, sizeof f, "late_%s.log", names[i]);
        const char *path = tt_path(f);
        SynthLog S;
        synth_init(&S, 65536, T0);
        synth_thread(&S, 1, T0, 1111, "main");
        synth_meta(&S, 1, T0, "run", names[i]);
        synth_alloc(&S, 1, T0 + 1 * MS, "params/w", 1, 0x10000, 10 * MiB);
        for (int s = 1; s <= STEPS; s++) {
            uint64_t b = T0 + 10 * (uint64_t)s * MS, kept = late_kept(i, s);
            synth_begin(&S, 1, b, "step");
            synth_alloc(&S, 1, b + 1 * MS, "activations/h", 1, 0x20000, 64 * MiB);
            if (kept) synth_alloc(&S, 1, b + 3 * MS, i == 6 ? "cache/warm" : "leak/kv", 1, 0x1000000 + (uint64_t)s * 0x1000, kept);
            synth_free(&S, 1, b + 4 * MS, "activations/h", 1, 0x20000, 64 * MiB);
            synth_end(&S, 1, b + 5 * MS, "step");
        }
        synth_close(&S, 1, T0 + 10 * (uint64_t)(STEPS + 1) * MS);
        synth_save(&S, path);
        synth_release(&S);
        size_t k = strlen(args);
        snprintf(args + k, sizeof args - k, " '%s'", path);
    }
    CHECK(tt_run("dpmem-report", "%s -q --csv '%s'", args, tt_path("late.csv")) == 0, "dpmem-report on the late leak logs");
    CHECK(tt_run("dpmem-report", "%s", args) == 0, "dpmem-report on the late leak logs (text)");
    char *out = tt_slurp(tt_path("out.txt"), NULL);
    /* the run: 300 KiB from the end of step 512 over 488 steps */
    CHECK(has(out, "  WARNING: live bytes at the end of 'step' keep rising: +300.00 KiB from the end of step 512 to the end of step 1000 "
                   "(629 B per step): a leak?"), "the late leak's warning: %s", out ? out : "");
    CHECK(has(out, "    leak/kv                                  +300.00 KiB  (0 B -> 300.00 KiB; 300 allocs, 0 frees)"),
          "the late leak's tag: %s", out ? out : "");
    free(out);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import csv,sys; r={x['run']: x for x in csv.DictReader(open(sys.argv[1]))}; "
             "print(' '.join('%%s:%%s:%%s:%%s:%%s' %% (k, r[k]['leak'], r[k]['leak_growth_bytes'], r[k]['leak_from_step'], r[k]['leak_tags']) "
             "for k in sys.argv[2:]))\" '%s' %s > '%s'",
             tt_path("late.csv"), "early mid late last50 lateburst plateau slowwarm lastfew", tt_path("late.txt"));
    CHECK(system(cmd) == 0, "python3 on late.csv");
    char *csv = tt_slurp(tt_path("late.txt"), NULL);
    /* early: 744 steps x 1 KiB after step 256; mid: steps 400..1000 (601); late: 701..1000 (300);
       last50: 951..1000; lateburst: 21 x 64 KiB (steps 800, 810, ..., 1000) */
    CHECK(has(csv, "early:1:761856:256:leak/kv:+761856 mid:1:615424:256:leak/kv:+615424 late:1:307200:512:leak/kv:+307200 "
                   "last50:1:51200:512:leak/kv:+51200 lateburst:1:1376256:512:leak/kv:+1376256 "
                   "plateau:0:0:0: slowwarm:0:0:0: lastfew:0:0:0:"), "late.csv: %s", csv ? csv : "(none)");
    free(csv);
}

/* A scope's memory: its largest rise and its net change are two columns, named so. "release" frees
   32 MiB (max rise 0, net -32 MiB); "grow" allocates 8 MiB, frees it and keeps 2 MiB, twice (max rise
   8 MiB, net +4 MiB over its two instances). The old single "mem delta" column showed 0.00 for the
   free and hid the net change. */
static void check_scope_memory(void) {
    const char *path = tt_path("scopemem.log");
    SynthLog S;
    synth_init(&S, 65536, T0);
    synth_thread(&S, 1, T0, 1111, "main");
    synth_meta(&S, 1, T0, "run", "scopemem");
    synth_alloc(&S, 1, T0 + 1 * MS, "activations/big", 1, 0x10000, 32 * MiB);
    synth_begin(&S, 1, T0 + 2 * MS, "release");
    synth_free(&S, 1, T0 + 3 * MS, "activations/big", 1, 0x10000, 32 * MiB);
    synth_end(&S, 1, T0 + 4 * MS, "release");
    for (uint64_t k = 0; k < 2; k++) {
        uint64_t b = T0 + (10 + 10 * k) * MS;
        synth_begin(&S, 1, b, "grow");
        synth_alloc(&S, 1, b + 1 * MS, "activations/tmp", 1, 0x20000, 8 * MiB);
        synth_free(&S, 1, b + 2 * MS, "activations/tmp", 1, 0x20000, 8 * MiB);
        synth_alloc(&S, 1, b + 3 * MS, "cache/kept", 1, 0x30000 + k * 0x1000, 2 * MiB);
        synth_end(&S, 1, b + 4 * MS, "grow");
    }
    synth_close(&S, 1, T0 + 40 * MS);
    synth_save(&S, path);
    synth_release(&S);
    CHECK(tt_run("dpmem-report", "'%s' --csv '%s' --json '%s'", path, tt_path("sm.csv"), tt_path("sm.json")) == 0, "dpmem-report scopemem");
    char *out = tt_slurp(tt_path("out.txt"), NULL);
    CHECK(has(out, "max rise MiB     net MiB") && !has(out, "mem delta"), "the columns are named for what they are: %s", out ? out : "");
    CHECK(has(out, "(max rise: the most the live total rose above its value at the scope's start, in one instance; "
                   "net: the live total at its end less at its start, summed over its instances)"), "the report says what the columns are");
    CHECK(has(out, "            -          0.00      -32.00\n"), "release: max rise 0, net -32 MiB: %s", out ? out : "");
    CHECK(has(out, "            -          8.00        4.00\n"), "grow: max rise 8 MiB, net +4 MiB");
    free(out);
    static const char script[] =
        "import csv, json, sys\n"
        "r = list(csv.DictReader(open(sys.argv[1])))[0]\n"
        "o = json.load(open(sys.argv[2]))[0]\n"
        "want = {'scope.release.mem_max_rise_bytes': 0, 'scope.release.mem_net_bytes': -32 * 2**20,\n"
        "        'scope.grow.mem_max_rise_bytes': 8 * 2**20, 'scope.grow.mem_net_bytes': 4 * 2**20}\n"
        "for k, v in want.items(): assert o[k] == v and int(r[k]) == v, (k, o[k], r[k], v)\n"
        "assert not any('mem_delta' in k for k in o), 'the old ambiguous key is gone'\n"
        "print('ok')\n";
    CHECK(tt_python("scopemem.py", script, tt_path("sm.csv"), tt_path("sm.json")) == 0, "CSV/JSON scope memory (see above)");
}

/* Two workers, one after the other on one thread index, each running its own 4 steps (issue 38):
   each thread's steps its own, with its own warm-up and its own name; and a small run's tables read
   in the units its values need (11048 B is 10.79 KiB, not 0.01 MiB; a 2 µs scope 2.000 µs, not
   0.002 ms), the header naming each column's unit. */
static void check_threads_and_units(void) {
    const char *log = tt_path("workers.log");
    tt_workers_log(log);
    int rc = tt_run("dpmem-report", "'%s' --csv '%s'", log, tt_path("workers.csv"));
    char *out = tt_slurp(tt_path("out.txt"), NULL);
    CHECK(rc == 0, "workers: exit %d", rc);
    const char *want[] = {
        "step time per thread (2 threads ran 'step', each its own steps; each thread's first 1 step left out):",
        "  T2 worker-0                   4 steps, steps 2..4 timed (\xC2\xB5s): median 110.000, min 100.000, q1 105.000, q3 115.000, max 120.000",
        "  T3 worker-1                   4 steps, steps 2..4 timed (\xC2\xB5s): median 210.000, min 200.000, q1 205.000, q3 215.000, max 220.000",
        "every thread's steps in the order they ended",
        /* the breakdown: KiB (the median of 96 KiB, 11048, 22096, 8192 and 48 bytes is 11048) */
        "  category                        bytes          KiB   share   own peak KiB",
        "  params                          11048        10.79    7.9%          10.79",   /* of 139688 bytes at the peak */
        "  norms                              48         0.05    0.0%           0.05",
        /* the scopes: times in µs, memory in KiB */
        "total \xC2\xB5s",
        /* forward: 2 µs in worker-0's steps, 3 in worker-1's; each leaves its activations (7 x 64 KiB + 96) */
        "  forward                       8       20.000       3.000       2.000       2.000       3.000       3.000            -         96.00      544.00",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) CHECK(has(out, want[i]), "workers: the report lacks: %s\n%s", want[i], out ? out : "");
    CHECK(!has(out, "0.01") || !has(out, "params                          11048         0.01"), "workers: params read as 0.01 MiB");
    free(out);
}

/* The ranks of a small data-parallel run: the peaks in KiB, the times in µs (their header says so), not
   0.01 MiB and 0.004 ms; 4 bytes in a KiB column read "<0.01", not 0.00. */
static void check_ranks_units(void) {
    char path[2][600];
    for (int r = 0; r < 2; r++) {
        SynthLog S;
        synth_init(&S, 65536, T0);
        synth_thread(&S, 1, T0, 1111, "main");
        synth_meta(&S, 1, T0, "run", "dp2");
        synth_meta(&S, 1, T0, "comm.world_size", "2");
        synth_meta(&S, 1, T0, "comm.rank", r ? "1" : "0");
        synth_alloc(&S, 1, T0 + 1000, "params/w", 1, 0x1000, 11048 + 1000 * (uint64_t)r);
        synth_alloc(&S, 1, T0 + 1500, "noise/x", 1, 0x2000, 4);   /* 4 B: not zero, though 0.00 KiB */
        uint64_t t = T0 + 10000;
        for (int s = 0; s < 3; s++) {   /* steps of 200 µs, an allreduce of 4 µs in each */
            synth_begin(&S, 1, t, "step");
            synth_begin(&S, 1, t + 100000, "allreduce");
            synth_end(&S, 1, t + 104000, "allreduce");
            synth_end(&S, 1, t + 200000, "step");
            t += 201000;
        }
        synth_close(&S, 1, t);
        snprintf(path[r], sizeof path[r], "%s", tt_path(r ? "dp2.rank1.log" : "dp2.rank0.log"));
        synth_save(&S, path[r]);
        synth_release(&S);
    }
    int rc = tt_run("dpmem-report", "'%s' '%s'", path[0], path[1]);
    char *out = tt_slurp(tt_path("out.txt"), NULL);
    const char *want[] = {
        "  rank           peak bytes     peak KiB      step \xC2\xB5s   allreduce \xC2\xB5s",
        "  0                   11052        10.79      200.000          4.000",
        "  sum                 23104        22.56            -              -   (the job's memory)",
        "  noise                               4        <0.01    0.0%          <0.01",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) CHECK(rc == 0 && has(out, want[i]), "ranks: lacks: %s\n%s", want[i], out ? out : "");
    free(out);
}

int main(void) {
    tt_mkdir("report");
    if (system("python3 -c 1 >/dev/null 2>&1") != 0) { printf("SKIP: no python3 to parse the CSV and JSON\n"); return 77; }
    check_text_and_exports();
    check_threads_and_units();
    check_ranks_units();
    check_pool_note();
    check_scope_memory();
    check_leak_trends();
    check_late_leaks();
    check_sweep();
    check_oom();
    check_times_and_records();
    check_bad_input();
    check_names();
    if (tt_failures) { fprintf(stderr, "%d check(s) failed\n", tt_failures); return 1; }
    printf("report: all checks passed\n");
    return 0;
}
