/* test_tools_render.c — dpmem-render on the known log (tests/test_tools_common.h): the pixels of the
   stacked areas at the peak column and elsewhere, the scope lanes, the background where nothing is,
   the peak label, the title, the legends (categories at the peak, phases), --by name, --compare (each
   run its own time axis; --shared-time), a cut log, and bad input (a window beyond the log's end, an
   unknown extension, no font); the device-used line (markers, line, axis, legend; with a window,
   --by name, --size and --compare; dense snapshots, several in one column), and host logs drawn
   exactly as without it; a plan log on an axis of allocation events; a classifier's log titled with its
   task (alone, and --compare'd with a causal LM's; a title line too wide breaks after a whole item,
   never cut); SVG and PDF outputs; no two
   labels overlapping (the boxes each figure records under DPMEM_LAYOUT). PNGs are decoded with
   stb_image. Areas, bands and markers sit on whole pixels, so their colours are exact.
   Set DPMEM_KEEP=1 to keep the pictures under $DPMEM_BUILD/test-out/render. */
#include "test_tools_png.h"

#include <math.h>

typedef struct { int x0, y0, x1, y1; double ymax, from, to; unsigned long long peak; int peak_col, lanes; char axis[16]; int legend_x; } Layout;
typedef struct { int panel, lane, y0, y1; } Lane;

static int read_layout(const char *out, int panel, Layout *L, Lane *lanes, int max_lanes) {
    char *s = tt_slurp(out, NULL);
    if (!s) return -1;
    int found = -1, nl = 0;
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        int p, lx, ly;
        Lane ln;
        if (sscanf(line, "panel %d", &p) == 1 && p == panel) {
            if (sscanf(line, "panel %d plot %d %d %d %d ymax %lf from %lf to %lf peak %llu col %d lanes %d axis %15s", &p, &L->x0, &L->y0,
                       &L->x1, &L->y1, &L->ymax, &L->from, &L->to, &L->peak, &L->peak_col, &L->lanes, L->axis) == 12)
                found = 0;
        } else if (sscanf(line, "legend %d %d %d", &p, &lx, &ly) == 3 && p == panel) L->legend_x = lx;
        else if (sscanf(line, "lane %d %d %d %d", &ln.panel, &ln.lane, &ln.y0, &ln.y1) == 4 && ln.panel == panel && nl < max_lanes)
            lanes[nl++] = ln;
    }
    free(s);
    return found;
}

/* Pixel height of v bytes, exactly as the renderer computes it. */
static int hpx(double v, const Layout *L) {
    double h = v / L->ymax * (L->y1 - L->y0) + 0.5;
    return h < 0 ? 0 : (int)h;
}
static int col_of(const Layout *L, double rel_ns) {
    int c = (int)((rel_ns - L->from) * (L->x1 - L->x0) / (L->to - L->from));
    return L->x0 + c;
}


/* Renders the picture again with DPMEM_LAYOUT set and checks what it records: no two texts overlap,
   a text equal to `title`, one starting like `sub` (when not NULL), all inside the picture. */
static void check_texts(const char *png, const char *title, const char *sub_prefix, int single) {
    (void)single;
    TtBox *b;
    int n = tt_layout_load(tt_path("layout.txt"), &b);
    CHECK(n > 10, "%s: %d texts and marks recorded under DPMEM_LAYOUT", png, n);
    CHECK(tt_text_overlaps(b, n, png) == 0, "%s: labels overlap (above)", png);
    CHECK(tt_layout_find(b, n, png, 't', title), "%s: no title \"%s\"", png, title);
    int sub = 0;
    for (int i = 0; i < n && sub_prefix; i++) sub |= b[i].kind == 't' && !strcmp(b[i].fig, png) && !strncmp(b[i].what, sub_prefix, strlen(sub_prefix));
    CHECK(!sub_prefix || sub, "%s: no line \"%s...\" under the title", png, sub_prefix ? sub_prefix : "");
    free(b);
}

static void check_single(void) {
    const char *log = tt_path("known.log"), *png = tt_path("known.png");
    tt_known_log(log, (KnownLog){ .chunk_bytes = 512 });   /* small chunks: many, interleaved threads */
    remove(tt_path("layout.txt"));
    setenv("DPMEM_LAYOUT", tt_path("layout.txt"), 1);
    int rc = tt_run("dpmem-render", "'%s' -o '%s' -v", log, png);
    unsetenv("DPMEM_LAYOUT");
    CHECK(rc == 0, "dpmem-render exit %d", rc);
    Layout L;
    Lane lanes[8] = { 0 };
    CHECK(read_layout(tt_path("out.txt"), 0, &L, lanes, 8) == 0, "no layout line on stdout");
    Png P;
    if (load(&P, png)) { CHECK(0, "cannot decode %s", png); return; }
    CHECK(P.w == 1400 && P.h == 600, "size %dx%d, want the default 1400x600", P.w, P.h);
    CHECK(L.peak == 450 * MiB, "peak %llu, want 450 MiB", L.peak);
    CHECK(L.from == 0, "the known log's axis starts at %.3f ms, want 0 (its first event 1 ms in: no lead-in to leave out)", L.from / MS);
    CHECK(L.ymax >= 450.0 * MiB * 1.04 && L.ymax <= 600.0 * MiB, "y axis top %.0f not just above the peak", L.ymax);
    /* The peak column: params, grads, activations, per_sample_grads stacked in that order. */
    int x = L.x0 + L.peak_col;
    CHECK(abs(x - col_of(&L, 18.0 * MS)) <= 1, "peak column %d, want %d (18 ms)", x, col_of(&L, 18.0 * MS));
    struct { const char *cat; double lo, hi; } stack[] = {
        { "params", 0, 100 }, { "grads", 100, 200 }, { "activations", 200, 400 }, { "per_sample_grads", 400, 450 },
    };
    for (int i = 0; i < 4; i++) {
        int ylo = L.y1 - hpx(stack[i].lo * MiB, &L), yhi = L.y1 - hpx(stack[i].hi * MiB, &L);
        CHECK_RGB(&P, x, (ylo + yhi) / 2, category_colour(stack[i].cat), stack[i].cat);
        CHECK_RGB(&P, x, yhi, category_colour(stack[i].cat), "top row of the segment");
        CHECK_RGB(&P, x, ylo - 1, category_colour(stack[i].cat), "bottom row of the segment");
    }
    int top = L.y1 - hpx(450.0 * MiB, &L);
    Rgb above = pix(&P, x, top - 1);
    CHECK(!same(above, category_colour("per_sample_grads")) && !same(above, category_colour("activations")),
          "the stack at the peak column is taller than 450 MiB");
    /* 3 ms into step 0 (5 ms): params 100 + activations 200, nothing else. */
    int x5 = col_of(&L, 5.0 * MS);
    CHECK_RGB(&P, x5, L.y1 - hpx(50.0 * MiB, &L), category_colour("params"), "params at 5 ms");
    CHECK_RGB(&P, x5, L.y1 - hpx(250.0 * MiB, &L), category_colour("activations"), "activations at 5 ms");
    Rgb a5 = pix(&P, x5, L.y1 - hpx(330.0 * MiB, &L));
    CHECK(same(a5, COLOUR_BG) || same(a5, COLOUR_GRID), "above 300 MiB at 5 ms should be empty, got %d,%d,%d", a5.r, a5.g, a5.b);
    /* Before the first allocation (0.5 ms) the plot is empty. */
    Rgb e = pix(&P, col_of(&L, 0.5 * MS), L.y1 - 3);
    CHECK(same(e, COLOUR_BG), "background at 0.5 ms, got %d,%d,%d", e.r, e.g, e.b);
    /* Scope lanes: the main thread's step (depth 0) and forward (depth 1), the loader's data. */
    CHECK(L.lanes == 3, "%d scope lanes, want 3 (main: 2 depths, loader: 1)", L.lanes);
    /* (the first row of a band: a band's name is centred in it, clear of that row) */
    CHECK_RGB(&P, col_of(&L, 14.5 * MS), lanes[0].y0, scope_colour("step"), "step band");
    CHECK_RGB(&P, col_of(&L, 13.5 * MS), lanes[1].y0, scope_colour("forward"), "forward band");
    CHECK_RGB(&P, col_of(&L, 16.5 * MS), lanes[1].y0, scope_colour("backward"), "backward band");
    CHECK_RGB(&P, col_of(&L, 12.8 * MS), lanes[2].y0, scope_colour("data"), "data band (loader thread)");
    CHECK_RGB(&P, col_of(&L, 0.5 * MS), lanes[1].y0, COLOUR_BG, "no scope before the first step");
    CHECK_RGB(&P, col_of(&L, 14.5 * MS), lanes[0].y1, COLOUR_BG, "a band is lanes' height minus a gap: the row after it is empty");
    /* The peak label is red, in the row above the plot. */
    int red = 0;
    for (int yy = L.y0 - 24; yy < L.y0; yy++)
        for (int xx = L.x0; xx < L.x1; xx++) red += same(pix(&P, xx, yy), COLOUR_PEAK);
    CHECK(red > 50, "no peak label above the plot (%d red pixels)", red);
    /* Legend swatches for the four categories present, right of the plot. */
    int sw = 0;
    CHECK(L.legend_x > L.x1, "legend at x %d, not right of the plot (%d)", L.legend_x, L.x1);
    for (int i = 0; i < 4; i++)
        for (int yy = L.y0; yy < P.h; yy++)
            if (same(pix(&P, L.legend_x + 5, yy), category_colour(stack[i].cat))) { sw++; break; }
    CHECK(sw == 4, "%d of 4 legend swatches", sw);
    /* The title (dark text) in the top rows: the run's name, and what a reader must know. */
    int dark = 0;
    for (int yy = 0; yy < 30; yy++)
        for (int xx = 0; xx < 300; xx++) dark += same(pix(&P, xx, yy), COLOUR_TEXT);
    CHECK(dark > 100, "no title");
    stbi_image_free(P.px);
    check_texts(png, "known", "tiny \xC2\xB7 T=128 \xC2\xB7 2023-11-14 22:13 UTC", 1);

    /* A time window: 10..20 ms. The peak (18 ms) is inside; the column of 18 ms moves. */
    rc = tt_run("dpmem-render", "'%s' -o '%s' -v --from 10ms --to 20ms --size 1000x500", log, tt_path("window.png"));
    CHECK(rc == 0, "window: exit %d", rc);
    Layout W;
    CHECK(read_layout(tt_path("out.txt"), 0, &W, lanes, 8) == 0 && W.from == 10.0 * MS && W.to == 20.0 * MS &&
              W.peak == 450 * MiB, "window layout wrong (from %.0f to %.0f peak %llu)", W.from, W.to, W.peak);
    if (load(&P, tt_path("window.png")) == 0) {
        CHECK(P.w == 1000 && P.h == 500, "window size %dx%d", P.w, P.h);
        /* 11.5 ms: grads of step 0 freed (11 ms), step 1 not begun: only params. */
        int xw = col_of(&W, 11.5 * MS);
        CHECK_RGB(&P, xw, W.y1 - hpx(50.0 * MiB, &W), category_colour("params"), "params at 11.5 ms");
        Rgb a = pix(&P, xw, W.y1 - hpx(150.0 * MiB, &W));
        CHECK(same(a, COLOUR_BG) || same(a, COLOUR_GRID), "only params at 10.5 ms");
        stbi_image_free(P.px);
    }
}

static void check_by_name_and_compare(void) {
    const char *log = tt_path("known.log"), *leaky = tt_path("leaky.log");
    tt_known_log(leaky, (KnownLog){ .leaky = 1, .run = "leaky" });
    {   /* a run twice as long: the known log's steps, then 30 ms more of one allocation */
        SynthLog S;
        synth_init(&S, 65536, T0);
        synth_thread(&S, 1, T0, 1111, "main");
        synth_meta(&S, 1, T0, "run", "long");
        synth_alloc(&S, 1, T0 + 1 * MS, "params/w", 1, 0x10000, 100 * MiB);
        synth_free(&S, 1, T0 + 65 * MS, "params/w", 1, 0x10000, 100 * MiB);
        synth_close(&S, 1, T0 + 66 * MS);
        synth_save(&S, tt_path("long.log"));
        synth_release(&S);
    }
    int rc = tt_run("dpmem-render", "'%s' -o '%s' -v --by name --top 2", log, tt_path("byname.png"));
    CHECK(rc == 0, "--by name: exit %d", rc);
    Layout L;
    Lane lanes[8];
    Png P;
    if (read_layout(tt_path("out.txt"), 0, &L, lanes, 8) == 0 && load(&P, tt_path("byname.png")) == 0) {
        /* top 2 buffers by peak: activations/h (200 MiB), then params/w or grads/w (100 MiB); at 5 ms
           params/w (bottom) and activations/h differ in colour, and the rest is grey "other". */
        int x = L.x0 + L.peak_col;
        Rgb lo = pix(&P, x, L.y1 - hpx(50.0 * MiB, &L)), mid = pix(&P, x, L.y1 - hpx(300.0 * MiB, &L));
        CHECK(!same(lo, mid) && !same(lo, COLOUR_BG) && !same(mid, COLOUR_BG), "--by name: buffers not told apart");
        Rgb top = pix(&P, x, L.y1 - hpx(440.0 * MiB, &L));
        CHECK(same(top, RGB(190, 190, 190)), "--by name: per_sample_grads/w should be in \"other\" (grey), got %d,%d,%d", top.r, top.g, top.b);
        stbi_image_free(P.px);
    } else CHECK(0, "--by name: no layout or PNG");

    /* --compare: each run on its own time axis (known spans 33 ms, leaky too plus its leak's events),
       one memory scale; --shared-time: one time axis as well. */
    Layout A, B;
    rc = tt_run("dpmem-render", "--compare '%s' '%s' -o '%s' -v --shared-time", log, tt_path("long.log"), tt_path("shared.png"));
    CHECK(rc == 0 && read_layout(tt_path("out.txt"), 0, &A, lanes, 8) == 0 && read_layout(tt_path("out.txt"), 1, &B, lanes, 8) == 0 &&
              A.to == B.to && A.to > 60.0 * MS, "--shared-time: the panels' time axes differ (%.0f, %.0f), or exit %d", A.to, B.to, rc);
    rc = tt_run("dpmem-render", "--compare '%s' '%s' -o '%s' -v", log, tt_path("long.log"), tt_path("own.png"));
    CHECK(rc == 0 && read_layout(tt_path("out.txt"), 0, &A, lanes, 8) == 0 && read_layout(tt_path("out.txt"), 1, &B, lanes, 8) == 0 &&
              A.to < 34.0 * MS && B.to > 60.0 * MS && A.ymax == B.ymax, "--compare: each run should have its own time axis (%.0f, %.0f) and one memory scale", A.to, B.to);
    rc = tt_run("dpmem-render", "--compare '%s' '%s' -o '%s' -v", log, leaky, tt_path("compare.png"));
    CHECK(rc == 0, "--compare: exit %d", rc);
    if (read_layout(tt_path("out.txt"), 0, &A, lanes, 8) == 0 && read_layout(tt_path("out.txt"), 1, &B, lanes, 8) == 0 &&
        load(&P, tt_path("compare.png")) == 0) {
        CHECK(P.h == 920, "--compare height %d, want 2 x 460", P.h);
        CHECK(B.y0 > A.y1 && A.x0 == B.x0 && A.x1 == B.x1 && A.ymax == B.ymax, "panels do not share the plot's columns and memory scale");
        /* The leaky run keeps 1 MiB per step: at 32 ms its stack holds params + 3 MiB. */
        int x = col_of(&B, 32.5 * MS);
        CHECK_RGB(&P, x, B.y1 - hpx(100.0 * MiB, &B) - 1, category_colour("activations"), "leaked activations at 32.5 ms");
        CHECK_RGB(&P, x, A.y1 - hpx(100.0 * MiB, &A) - 1, COLOUR_BG, "no leak in the first run");
        stbi_image_free(P.px);
    } else CHECK(0, "--compare: no layout or PNG");
}

/* The device line's log. Times in ms from T0, one thread:
     1 ms                  ALLOC params/w 100 MiB
     step s = 0,1,2, b = 2 + 10 s: BEGIN step at b, ALLOC activations/h 200 MiB at b+2, FREE at b+6,
                           SNAPSHOT "after step s" at b+8 (10, 20, 30 ms): device used = used[s],
                           device_total = 80 GiB when device is set, else 0; tracked 100 MiB
                           END step at b+9
     25 ms                 (in step 2) SNAPSHOT "host view": used 5 GiB but device_total 0 (no device
                           figures: not drawn)
     33 ms                 CLOSE
   Tagged peak: 300 MiB. */
typedef struct { int device; uint64_t used[3]; const char *run; } DevLog;
static const double dev_snap_ms[3] = { 10, 20, 30 };

static void dev_log(const char *path, DevLog d) {
    SynthLog S;
    synth_init(&S, 65536, T0);
    synth_thread(&S, 1, T0, 1111, "main");
    synth_meta(&S, 1, T0, "run", d.run);
    synth_alloc(&S, 1, T0 + 1 * MS, "params/w", 1, 0x10000, 100 * MiB);
    const char *cats[1] = { "params" };
    uint64_t live[1] = { 100 * MiB };
    for (int s = 0; s < 3; s++) {
        uint64_t b = T0 + (2 + 10 * (uint64_t)s) * MS;
        synth_begin(&S, 1, b, "step");
        synth_alloc(&S, 1, b + 2 * MS, "activations/h", 1, 0x20000, 200 * MiB);
        if (s == 2) synth_snapshot(&S, 1, T0 + 25 * MS, "host view", 5ull * 1024 * MiB, 0, 0, 1, cats, live);
        synth_free(&S, 1, b + 6 * MS, "activations/h", 1, 0x20000, 200 * MiB);
        char label[32];
        snprintf(label, sizeof label, "after step %d", s);
        synth_snapshot(&S, 1, b + 8 * MS, label, d.used[s], d.device ? 80ull * 1024 * MiB : 0, 100 * MiB, 1, cats, live);
        synth_end(&S, 1, b + 9 * MS, "step");
    }
    synth_close(&S, 1, T0 + 33 * MS);
    synth_save(&S, path);
    synth_release(&S);
}

/* "device P snapshots N max B legend X Y" of panel P in the -v output; 0 when found. */
static int read_device(const char *out, int panel, int *n, unsigned long long *max, int *lx, int *ly) {
    char *s = tt_slurp(out, NULL);
    if (!s) return -1;
    int found = -1, p;
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n"))
        if (sscanf(line, "device %d snapshots %d max %llu legend %d %d", &p, n, max, lx, ly) == 5 && p == panel) found = 0;
    free(s);
    return found;
}

/* The row of used bytes and the marker there: a 7x7 square in the line's colour in a white ring. */
static void check_marker(const Png *P, const Layout *L, double ms, uint64_t used, const char *what) {
    int x = col_of(L, ms * MS), y = L->y1 - hpx((double)used, L);
    char w[96];
    snprintf(w, sizeof w, "%s: marker at %.0f ms (%llu MiB)", what, ms, (unsigned long long)(used / MiB));
    CHECK_RGB(P, x, y, COLOUR_DEVICE, w);
    for (int k = 0; k < 4; k++) {
        int dx = k & 1 ? 3 : -3, dy = k & 2 ? 3 : -3;
        CHECK_RGB(P, x + dx, y + dy, COLOUR_DEVICE, w);
        CHECK_RGB(P, x + (dx > 0 ? 4 : -4), y + (dy > 0 ? 4 : -4), COLOUR_BG, "the marker's white ring");
    }
}

/* Midway between two markers, the row timeline.c computes for a straight segment: ya + (yb - ya)(x - xa)
   / (xb - xa), rounded half away from zero. The line (1.25 pt, 2.5 px at 144 dpi, anti-aliased) runs
   through that row's centre within half a pixel, so the row is wholly the line's colour; nothing of
   that colour 3 rows off. */
static void check_segment(const Png *P, const Layout *L, double ms_a, uint64_t ua, double ms_b, uint64_t ub, const char *what) {
    int xa = col_of(L, ms_a * MS), ya = L->y1 - hpx((double)ua, L), xb = col_of(L, ms_b * MS), yb = L->y1 - hpx((double)ub, L);
    int x = (xa + xb) / 2;
    long long n = (long long)(yb - ya) * (x - xa), d = xb - xa;
    int y = ya + (int)(n >= 0 ? (2 * n + d) / (2 * d) : -((-2 * n + d) / (2 * d)));
    char w[96];
    snprintf(w, sizeof w, "%s: line between %.0f and %.0f ms", what, ms_a, ms_b);
    CHECK(xb - xa > 20 && abs(yb - ya) < xb - xa, "%s: the segment is not a long, shallow one (test set-up)", w);
    CHECK_RGB(P, x, y, COLOUR_DEVICE, w);
    CHECK(!same(pix(P, x, y + 3), COLOUR_DEVICE) && !same(pix(P, x, y - 3), COLOUR_DEVICE), "%s: line thicker than 5 rows or misplaced", w);
}


static void check_device_line(void) {
    const uint64_t a[3] = { 400 * MiB, 250 * MiB, 700 * MiB }, b[3] = { 150 * MiB, 500 * MiB, 350 * MiB };
    const char *dev = tt_path("device.log"), *dev2 = tt_path("device2.log"), *host = tt_path("host.log");
    dev_log(dev, (DevLog){ .device = 1, .used = { a[0], a[1], a[2] }, .run = "cuda" });
    dev_log(dev2, (DevLog){ .device = 1, .used = { b[0], b[1], b[2] }, .run = "cuda2" });
    dev_log(host, (DevLog){ .device = 0, .used = { a[0], a[1], a[2] }, .run = "host" });
    Layout L;
    Lane lanes[8];
    Png P;
    int n, lx, ly;
    unsigned long long max;
    /* The whole log. The axis must reach 700 MiB (tagged alone: 300 MiB, axis 400 MiB): 800 MiB. */
    remove(tt_path("layout.txt"));
    setenv("DPMEM_LAYOUT", tt_path("layout.txt"), 1);
    int rc = tt_run("dpmem-render", "'%s' -o '%s' -v", dev, tt_path("device.png"));
    unsetenv("DPMEM_LAYOUT");
    CHECK(rc == 0, "device log: exit %d", rc);
    if (read_layout(tt_path("out.txt"), 0, &L, lanes, 8) == 0 && read_device(tt_path("out.txt"), 0, &n, &max, &lx, &ly) == 0 &&
        load(&P, tt_path("device.png")) == 0) {
        CHECK(n == 3 && max == a[2], "device line: %d snapshots, max %llu; want 3 (the one without device figures left out), 700 MiB", n, max);
        CHECK(L.ymax == 800.0 * MiB && L.ymax >= 700.0 * MiB * 1.04, "y axis top %.0f, want 800 MiB (above device used 700 MiB)", L.ymax);
        CHECK(L.peak == 300 * MiB, "tagged peak %llu, want 300 MiB", L.peak);
        TtBox *bx;
        int nb = tt_layout_load(tt_path("layout.txt"), &bx);
        const char *png = tt_path("device.png");
        const TtBox *top = tt_layout_find(bx, nb, png, 't', "800"), *ytitle = tt_layout_find(bx, nb, png, 't', "live tagged memory (MiB)");
        CHECK(top && top->x1 < L.x0 && fabs((top->y0 + top->y1) / 2 - L.y0) <= 1 && ink_in(&P, top->x0, top->y0, top->x1, top->y1, COLOUR_TEXT) > 20,
              "the y axis' top label is not \"800\" beside the plot's top row");
        CHECK(ytitle && ytitle->x1 < L.x0, "no y axis title with the unit (MiB)");
        for (int s = 0; s < 3; s++) check_marker(&P, &L, dev_snap_ms[s], a[s], "device");
        check_segment(&P, &L, 10, a[0], 20, a[1], "device");
        check_segment(&P, &L, 20, a[1], 30, a[2], "device");
        /* Nothing before the first snapshot or after the last; no marker at the snapshot without figures. */
        CHECK(count_colour(&P, L.x0, L.y0, col_of(&L, 10.0 * MS) - 4, L.y1, COLOUR_DEVICE) == 0, "device line before the first snapshot");
        CHECK(count_colour(&P, col_of(&L, 30.0 * MS) + 5, L.y0, L.x1, L.y1, COLOUR_DEVICE) == 0, "device line after the last snapshot");
        int x25 = col_of(&L, 25.0 * MS), y25 = L.y1 - hpx(475.0 * MiB, &L);   /* the segment's row there, roughly */
        CHECK(count_colour(&P, x25 - 3, L.y0, x25 + 4, y25 - 6, COLOUR_DEVICE) == 0 &&
              count_colour(&P, x25 - 3, y25 + 6, x25 + 4, L.y1, COLOUR_DEVICE) == 0, "a mark at the snapshot without device figures");
        /* Legend: the swatch (a piece of line with a marker in its ring) and "device used", at the top of the legend. */
        CHECK(lx > L.x1 && ly >= L.y0 && ly < L.y0 + 30, "legend marker at %d,%d, want right of the plot at its top", lx, ly);
        CHECK_RGB(&P, lx, ly, COLOUR_DEVICE, "legend swatch: marker");
        CHECK_RGB(&P, lx + 3, ly - 3, COLOUR_DEVICE, "legend swatch: marker's corner");
        CHECK_RGB(&P, lx - 4, ly - 4, COLOUR_BG, "legend swatch: ring");
        CHECK_RGB(&P, L.legend_x, ly, COLOUR_DEVICE, "legend swatch: line, left end");
        CHECK_RGB(&P, L.legend_x + 22, ly, COLOUR_DEVICE, "legend swatch: line, right end");
        const TtBox *du = tt_layout_find(bx, nb, png, 't', "device used"), *cu = tt_layout_find(bx, nb, png, 't', "(cudaMemGetInfo), largest");
        CHECK(du && du->x0 > L.legend_x + 22 && du->y0 <= ly && du->y1 >= ly && ink_in(&P, du->x0, du->y0, du->x1, du->y1, COLOUR_TEXT) > 30,
              "no \"device used\" beside the swatch");
        CHECK(cu && du && cu->y0 >= du->y1 && ink_in(&P, cu->x0, cu->y0, cu->x1, cu->y1, COLOUR_MUTED) > 30, "no \"(cudaMemGetInfo), largest\" under it");
        CHECK(tt_layout_find(bx, nb, png, 't', "700.00 MiB"), "the legend lacks the largest device_used (700.00 MiB)");
        free(bx);
        stbi_image_free(P.px);
    } else CHECK(0, "device log: no layout, device line or PNG");

    /* A window with only the first snapshot: its marker, and the axis covers 400 MiB (500), not 700. */
    rc = tt_run("dpmem-render", "'%s' -o '%s' -v --from 0 --to 15ms", dev, tt_path("device-w1.png"));
    if (rc == 0 && read_layout(tt_path("out.txt"), 0, &L, lanes, 8) == 0 && read_device(tt_path("out.txt"), 0, &n, &max, &lx, &ly) == 0 &&
        load(&P, tt_path("device-w1.png")) == 0) {
        CHECK(n == 1 && max == a[0] && L.ymax == 500.0 * MiB, "window 0-15 ms: %d snapshots, max %llu, axis %.0f; want 1, 400 MiB, 500 MiB", n, max, L.ymax);
        check_marker(&P, &L, 10, a[0], "window 0-15 ms");
        stbi_image_free(P.px);
    } else CHECK(0, "window 0-15 ms: exit %d, or no layout, device line or PNG", rc);

    /* --from/--to, --by name --top 1 and --size: the last two snapshots, joined. */
    rc = tt_run("dpmem-render", "'%s' -o '%s' -v --from 15ms --to 35ms --by name --top 1 --size 1000x500", dev, tt_path("device-w2.png"));
    if (rc == 0 && read_layout(tt_path("out.txt"), 0, &L, lanes, 8) == 0 && read_device(tt_path("out.txt"), 0, &n, &max, &lx, &ly) == 0 &&
        load(&P, tt_path("device-w2.png")) == 0) {
        CHECK(P.w == 1000 && P.h == 500 && n == 2 && L.ymax == 800.0 * MiB, "window 15-35 ms: %dx%d, %d snapshots, axis %.0f", P.w, P.h, n, L.ymax);
        check_marker(&P, &L, 20, a[1], "window 15-35 ms, --by name");
        check_marker(&P, &L, 30, a[2], "window 15-35 ms, --by name");
        check_segment(&P, &L, 20, a[1], 30, a[2], "window 15-35 ms, --by name");
        CHECK(count_colour(&P, L.x0, L.y0, col_of(&L, 20.0 * MS) - 4, L.y1, COLOUR_DEVICE) == 0, "window 15-35 ms: a line left of its first snapshot");
        stbi_image_free(P.px);
    } else CHECK(0, "window 15-35 ms: exit %d, or no layout, device line or PNG", rc);

    /* --compare: each panel its own line on the shared axis (700 MiB -> 800 MiB), none in the host panel. */
    rc = tt_run("dpmem-render", "--compare '%s' '%s' '%s' -o '%s' -v", dev, dev2, host, tt_path("device-cmp.png"));
    Layout A, B, C;
    int nb, lxb, lyb;
    unsigned long long maxb;
    if (rc == 0 && read_layout(tt_path("out.txt"), 0, &A, lanes, 8) == 0 && read_layout(tt_path("out.txt"), 1, &B, lanes, 8) == 0 &&
        read_layout(tt_path("out.txt"), 2, &C, lanes, 8) == 0 && read_device(tt_path("out.txt"), 1, &nb, &maxb, &lxb, &lyb) == 0 &&
        load(&P, tt_path("device-cmp.png")) == 0) {
        CHECK(A.ymax == 800.0 * MiB && B.ymax == A.ymax && C.ymax == A.ymax, "--compare: axes %.0f %.0f %.0f, want 800 MiB each", A.ymax, B.ymax, C.ymax);
        CHECK(nb == 3 && maxb == b[1], "--compare: panel 1 has %d snapshots, max %llu", nb, maxb);
        CHECK(read_device(tt_path("out.txt"), 2, &n, &max, &lx, &ly) != 0, "--compare: a device line in the host panel");
        for (int s = 0; s < 3; s++) {
            check_marker(&P, &A, dev_snap_ms[s], a[s], "--compare panel 0");
            check_marker(&P, &B, dev_snap_ms[s], b[s], "--compare panel 1");
        }
        check_segment(&P, &B, 10, b[0], 20, b[1], "--compare panel 1");
        CHECK(count_colour(&P, 0, C.y0 - 60, P.w, P.h, COLOUR_DEVICE) == 0, "--compare: device colour in the host panel");
        stbi_image_free(P.px);
    } else CHECK(0, "--compare: exit %d, or no layouts, device line or PNG", rc);
}

/* Many snapshots, more than columns: 2000 between 2 and 22 ms, device used alternating 300 and 500 MiB.
   Each column holds both values: a vertical run from 300 to 500 MiB, with small (3x3) markers at both
   ends and nothing beyond them. */
static void check_device_dense(void) {
    const char *log = tt_path("dense.log"), *png = tt_path("dense.png");
    SynthLog S;
    synth_init(&S, 65536, T0);
    synth_thread(&S, 1, T0, 1111, "main");
    synth_alloc(&S, 1, T0 + 1 * MS, "params/w", 1, 0x10000, 100 * MiB);
    const char *cats[1] = { "params" };
    uint64_t live[1] = { 100 * MiB };
    for (uint64_t k = 0; k < 2000; k++)
        synth_snapshot(&S, 1, T0 + 2 * MS + k * 10000, "s", (k % 2 ? 500 : 300) * MiB, 80ull * 1024 * MiB, 100 * MiB, 1, cats, live);
    synth_close(&S, 1, T0 + 23 * MS);
    synth_save(&S, log);
    synth_release(&S);
    Layout L;
    Lane lanes[8];
    Png P;
    int n, lx, ly;
    unsigned long long max;
    int rc = tt_run("dpmem-render", "'%s' -o '%s' -v", log, png);
    if (rc == 0 && read_layout(tt_path("out.txt"), 0, &L, lanes, 8) == 0 && read_device(tt_path("out.txt"), 0, &n, &max, &lx, &ly) == 0 &&
        load(&P, png) == 0) {
        CHECK(n == 2000 && max == 500 * MiB, "dense: %d snapshots, max %llu", n, max);
        int x = col_of(&L, 12.0 * MS), y3 = L.y1 - hpx(300.0 * MiB, &L), y5 = L.y1 - hpx(500.0 * MiB, &L), y4 = L.y1 - hpx(400.0 * MiB, &L);
        CHECK_RGB(&P, x, y3, COLOUR_DEVICE, "dense: 300 MiB");
        CHECK_RGB(&P, x, y4, COLOUR_DEVICE, "dense: the run between");
        CHECK_RGB(&P, x, y5, COLOUR_DEVICE, "dense: 500 MiB");
        CHECK_RGB(&P, x + 1, y5 + 1, COLOUR_DEVICE, "dense: a 3x3 marker");
        CHECK(!same(pix(&P, x, y5 - 3), COLOUR_DEVICE) && !same(pix(&P, x, y3 + 3), COLOUR_DEVICE) &&
              count_colour(&P, L.x0, L.y0, L.x1, L.y1, COLOUR_BG) > 0, "dense: the line reaches beyond 300..500 MiB");
        CHECK(count_colour(&P, x - 1, y5 - 1, x + 2, y3 + 2, COLOUR_DEVICE) == 3 * (y3 - y5 + 3), "dense: gaps (white marker rings?) in a dense line");
        stbi_image_free(P.px);
    } else CHECK(0, "dense: exit %d, or no layout, device line or PNG", rc);

    /* Three snapshots within 2 ns (one column): 300, 600, 300 MiB, between two at 300 MiB (5, 15 ms).
       The column shows the whole 300..600 MiB run, with a 7x7 marker (in its ring) at each end. */
    synth_init(&S, 65536, T0);
    synth_thread(&S, 1, T0, 1111, "main");
    synth_alloc(&S, 1, T0 + 1 * MS, "params/w", 1, 0x10000, 100 * MiB);
    const uint64_t ts[5] = { 5 * MS, 10 * MS, 10 * MS + 1, 10 * MS + 2, 15 * MS }, used[5] = { 300, 300, 600, 300, 300 };
    for (int k = 0; k < 5; k++) synth_snapshot(&S, 1, T0 + ts[k], "s", used[k] * MiB, 80ull * 1024 * MiB, 100 * MiB, 1, cats, live);
    synth_close(&S, 1, T0 + 20 * MS);
    synth_save(&S, tt_path("onecol.log"));
    synth_release(&S);
    rc = tt_run("dpmem-render", "'%s' -o '%s' -v", tt_path("onecol.log"), tt_path("onecol.png"));
    if (rc == 0 && read_layout(tt_path("out.txt"), 0, &L, lanes, 8) == 0 && load(&P, tt_path("onecol.png")) == 0) {
        int x = col_of(&L, 10.0 * MS), y3 = L.y1 - hpx(300.0 * MiB, &L), y6 = L.y1 - hpx(600.0 * MiB, &L);
        CHECK(x == col_of(&L, 10.0 * MS + 2), "one column: the three snapshots are not in one column (test set-up)");
        CHECK(y3 - y6 > 40 && count_colour(&P, x, y6 + 5, x + 1, y3 - 4, COLOUR_DEVICE) == y3 - y6 - 9,
              "one column: the run 300..600 MiB (between the markers' rings) has gaps");
        check_marker(&P, &L, 10, 600 * MiB, "one column, top");
        check_marker(&P, &L, 10, 300 * MiB, "one column, bottom");
        stbi_image_free(P.px);
    } else CHECK(0, "one column: exit %d, or no layout or PNG", rc);
}

/* A host log (device_total 0 in every snapshot, though device_used is not 0) renders byte for byte as
   with the device line switched off; the switch itself does change a log with device figures. */
static int same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = tt_slurp(a, &na), *y = tt_slurp(b, &nb);
    int eq = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x); free(y);
    return eq;
}
static void check_host_unchanged(void) {
    const char *host = tt_path("host.log"), *host2 = tt_path("host2.log"), *dev = tt_path("device.log");
    const char *on = tt_path("host-on.png"), *off = tt_path("host-off.png");
    dev_log(host, (DevLog){ .device = 0, .used = { 400 * MiB, 250 * MiB, 700 * MiB }, .run = "host" });
    dev_log(host2, (DevLog){ .device = 0, .used = { 900 * MiB, 0, 1 }, .run = "host2" });
    dev_log(dev, (DevLog){ .device = 1, .used = { 400 * MiB, 250 * MiB, 700 * MiB }, .run = "cuda" });
    struct { const char *logs, *opts; int differ; } cases[] = {
        { host, "", 0 },
        { host, "--by name --top 2 --from 5ms --to 31ms --size 900x400", 0 },
        { host, "--compare '%s'", 0 },   /* host2 */
        { dev, "", 1 },                  /* the switch does switch the line off */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char opts[600];
        snprintf(opts, sizeof opts, cases[i].opts, host2);
        int r1 = tt_run("dpmem-render", "'%s' -o '%s' %s", cases[i].logs, on, opts);
        int r2 = tt_run("dpmem-render", "'%s' -o '%s' %s --no-device-line", cases[i].logs, off, opts);
        CHECK(r1 == 0 && r2 == 0, "case %zu: exit %d, %d", i, r1, r2);
        if (cases[i].differ)
            CHECK(!same_file(on, off), "case %zu: --no-device-line changed nothing on a log with device figures", i);
        else
            CHECK(same_file(on, off), "case %zu (%s %s): a host log's PNG differs from its render without the device line", i, cases[i].logs, opts);
    }
}

static void check_bad_input(void) {
    const char *log = tt_path("known.log");
    /* A cut log: renders what it has and says so. */
    size_t n;
    char *bytes = tt_slurp(log, &n);
    FILE *f = fopen(tt_path("cut.log"), "wb");
    if (!bytes || !f || n < 4096 + 512 * 4) { CHECK(0, "cannot copy the log"); free(bytes); if (f) fclose(f); return; }
    fwrite(bytes, 1, 4096 + 512 * 3 + 100, f);   /* mid-chunk, mid-event */
    fclose(f);
    int rc = tt_run("dpmem-render", "'%s' -o '%s'", tt_path("cut.log"), tt_path("cut.png"));
    char *err = tt_slurp(tt_path("err.txt"), NULL);
    CHECK(rc == 0 && err && strstr(err, "not closed cleanly"), "cut log: exit %d, stderr: %s", rc, err ? err : "");
    free(err);
    struct stat st;
    CHECK(stat(tt_path("cut.png"), &st) == 0 && st.st_size > 1000, "cut log: no PNG");
    /* Garbage, empty, missing, wrong version, bad options: one line on stderr, non-zero exit. */
    f = fopen(tt_path("garbage.log"), "wb");
    for (int i = 0; f && i < 10000; i++) fputc((i * 7919) & 0xff, f);
    if (f) fclose(f);
    f = fopen(tt_path("empty.log"), "wb");
    if (f) fclose(f);
    memcpy(bytes + 8, "\x02\0\0\0", 4);
    f = fopen(tt_path("v2.log"), "wb");
    if (f) { fwrite(bytes, 1, n, f); fclose(f); }
    free(bytes);
    struct { const char *args, *want; } bad[] = {
        { "'%s/garbage.log' -o x.png", "not a dpmem log" }, { "'%s/empty.log' -o x.png", "empty file" },
        { "'%s/missing.log' -o x.png", "No such file" }, { "'%s/v2.log' -o x.png", "version 2" },
        { "'%s/known.log' -o x.png --bogus", "unknown option" }, { "'%s/known.log' -o x.png --size 12", "bad --size" },
        { "'%s/known.log' -o x.png --by colour", "bad --by" }, { "'%s/known.log'", "no output" },
        { "'%s/known.log' -o x.png --from 5ms --to 2ms", "empty time window" },
        { "'%s/known.log' -o x.png --size 50x50", "too small" }, { "'%s/known.log' '%s/known.log' -o x.png", "--compare" },
        { "'%s/known.log' -o '%s/known.log/x.png'", "known.log: not a directory" },   /* (a missing folder is made) */
        { "'%s/known.log' -o x.jpg", "x.jpg: unknown output format '.jpg' (.png, .svg or .pdf)" },
        { "'%s/known.log' -o x", "x: no extension to choose the format by" },
        { "'%s/known.log' -o x.png --format gif", "unknown format 'gif'" },
        { "'%s/known.log' -o x.png --from 10s", "--from 10.0 s is at or after the end of known (its events span 33.0 ms)" },
        { "'%s/known.log' -o x.png --from 40ms --to 50ms", "--from 40.0 ms is at or after the end of known" },
        { "'%s/known.log' -o x.png --dpi 0", "bad --dpi" }, { "'%s/known.log' -o x.png --font-scale 9", "bad --font-scale" },
        { "'%s/known.log' -o x.png --size 7x3furlong", "bad --size" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) tt_expect_error("dpmem-render", bad[i].args, bad[i].want);
    /* none of them left a picture, or a piece of one, where it ran */
    struct stat st2;
    CHECK(stat("x.png", &st2) != 0 && stat("x.jpg", &st2) != 0 && stat("x", &st2) != 0, "a failed render left x.png, x.jpg or x in the working directory");
    /* an error after the picture was begun leaves the one that was there, and no temporary file */
    const char *keep = tt_path("keep.png");
    CHECK(tt_run("dpmem-render", "'%s' -o '%s'", log, keep) == 0, "keep.png: not drawn");
    size_t n0 = 0, n1 = 0;
    char *before = tt_slurp(keep, &n0);
    tt_expect_error("dpmem-render", "'%s/known.log' -o '%s/keep.png' --from 40ms", "at or after the end of known");
    char *after = tt_slurp(keep, &n1);
    CHECK(before && after && n0 == n1 && n0 > 1000 && !memcmp(before, after, n0), "a failed render changed the picture that was there");
    free(before); free(after);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q partial", tt_dir);
    CHECK(system(cmd) != 0, "a temporary .partial file was left in %s", tt_dir);
    /* no font: one line naming the package */
    setenv("DPMEM_FONT", "/nonexistent/DejaVuSans.ttf", 1);
    tt_expect_error("dpmem-render", "'%s/known.log' -o x.png", "DPMEM_FONT=/nonexistent/DejaVuSans.ttf: no such font file");
    unsetenv("DPMEM_FONT");
}

/* SVG and PDF: the same picture on a page of the same size in points; the SVG parses as XML (python3's
   xml.etree), the PDF has one page and every font embedded (poppler-utils' pdfinfo and pdffonts);
   --size in inches with --dpi sets the PNG's pixels and the page's points. */
static void check_formats(void) {
    const char *log = tt_path("known.log");
    int rc = tt_run("dpmem-render", "'%s' -o '%s'", log, tt_path("known.svg"));
    CHECK(rc == 0, "SVG: exit %d", rc);
    static const char svg_script[] =
        "import sys, xml.etree.ElementTree as ET\n"
        "root = ET.parse(sys.argv[1]).getroot()\n"
        "assert root.tag == '{http://www.w3.org/2000/svg}svg', root.tag\n"
        "assert (root.get('width'), root.get('height')) == ('700pt', '300pt'), (root.get('width'), root.get('height'))\n"
        "glyphs = [e for e in root.iter() if e.tag.endswith('}symbol')]\n"
        "uses = [e for e in root.iter() if e.tag.endswith('}use')]\n"
        "assert len(glyphs) > 20 and len(uses) > 200, (len(glyphs), len(uses))\n"
        "print('ok')\n";
    CHECK(tt_python("svg.py", svg_script, tt_path("known.svg"), "-") == 0, "the SVG does not parse, or lacks its size or its text (above)");
    rc = tt_run("dpmem-render", "'%s' -o '%s' --size 7x3in --dpi 300", log, tt_path("known.pdf"));
    CHECK(rc == 0, "PDF: exit %d", rc);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "pdfinfo '%s' > '%s' 2>&1 && pdffonts '%s' > '%s' 2>&1", tt_path("known.pdf"), tt_path("pdfinfo.txt"),
             tt_path("known.pdf"), tt_path("pdffonts.txt"));
    CHECK(system(cmd) == 0, "pdfinfo/pdffonts fail on the PDF (poppler-utils installed?)");
    char *info = tt_slurp(tt_path("pdfinfo.txt"), NULL), *fonts = tt_slurp(tt_path("pdffonts.txt"), NULL);
    CHECK(info && strstr(info, "Pages:           1\n") && strstr(info, "Page size:       504 x 216 pts"), "pdfinfo: %s", info ? info : "");
    int emb = 0, not_emb = 0;
    for (char *line = fonts ? strtok(fonts, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        if (!strstr(line, "TrueType") && !strstr(line, "Type")) continue;
        if (strstr(line, " yes yes ") || strstr(line, " yes no ")) emb += strstr(line, "DejaVuSans") || strstr(line, "Liberation") ? 1 : 0;
        else not_emb++;
    }
    CHECK(emb >= 2 && not_emb == 0, "pdffonts: %d embedded DejaVu/Liberation faces, %d not embedded", emb, not_emb);
    free(info); free(fonts);
    rc = tt_run("dpmem-render", "'%s' -o '%s' --size 7x3in --dpi 300", log, tt_path("known300.png"));
    Png P;
    if (rc == 0 && load(&P, tt_path("known300.png")) == 0) {
        CHECK(P.w == 2100 && P.h == 900, "--size 7x3in --dpi 300: %dx%d, want 2100x900", P.w, P.h);
        stbi_image_free(P.px);
    } else CHECK(0, "--size 7x3in --dpi 300: exit %d or no PNG", rc);
}

/* A plan log has no time: its panel is drawn against allocation events and says so; --from is refused. */
static void check_plan(void) {
    SynthLog S;
    synth_init(&S, 65536, T0);
    synth_thread(&S, 1, T0, 1111, "main");
    synth_meta(&S, 1, T0, "run", "planned");
    synth_meta(&S, 1, T0, "config.device", "plan");
    synth_meta(&S, 1, T0, "config.plan_for", "cuda");
    for (int k = 0; k < 10; k++) synth_alloc(&S, 1, T0 + 5 + (uint64_t)k, "activations/a", 1, 0x1000 * (uint64_t)(k + 1), 10 * MiB);
    for (int k = 0; k < 10; k++) synth_free(&S, 1, T0 + 20 + (uint64_t)k, "activations/a", 1, 0x1000 * (uint64_t)(k + 1), 10 * MiB);
    synth_close(&S, 1, T0 + 40);
    synth_save(&S, tt_path("plan.log"));
    synth_release(&S);
    remove(tt_path("layout.txt"));
    setenv("DPMEM_LAYOUT", tt_path("layout.txt"), 1);
    int rc = tt_run("dpmem-render", "'%s' -o '%s' -v", tt_path("plan.log"), tt_path("plan.png"));
    unsetenv("DPMEM_LAYOUT");
    Layout L;
    Lane lanes[8];
    CHECK(rc == 0 && read_layout(tt_path("out.txt"), 0, &L, lanes, 8) == 0, "plan log: exit %d or no layout", rc);
    CHECK(!strcmp(L.axis, "events") && L.from == 0 && L.to > 20 && L.to < 20.1 && L.peak == 100 * MiB && L.peak_col == (int)(9.0 * (L.x1 - L.x0) / L.to),
          "plan log: axis %s from %.1f to %.1f, peak %llu at column %d; want events 0..20, 100 MiB at the 10th (event 9)", L.axis, L.from, L.to, L.peak, L.peak_col);
    TtBox *b;
    int n = tt_layout_load(tt_path("layout.txt"), &b);
    CHECK(tt_layout_find(b, n, tt_path("plan.png"), 't', "allocation events (the n-th ALLOC or FREE)"), "plan log: no event axis title");
    CHECK(tt_layout_find(b, n, tt_path("plan.png"), 't', "plan for cuda \xC2\xB7 2023-11-14 22:13 UTC \xC2\xB7 no time (a plan run): drawn against allocation events"),
          "plan log: the title does not say it has no time");
    CHECK(tt_layout_find(b, n, tt_path("plan.png"), 't', "peak 100.00 MiB at event 9"), "plan log: the peak's place is not an event");
    free(b);
    tt_expect_error("dpmem-render", "'%s/plan.log' -o x.png --from 1ms", "planned has no time (a plan log, or --events): --from/--to do not apply");
}

/* The legend "at the peak" of each size, read from the recorded boxes: the names right of the legend's
   x, below its heading, top to bottom, with the value on their row. */
static int peak_legend(const TtBox *b, int n, const char *png, int legend_x, char names[][64], char values[][32], int max) {
    const TtBox *head = NULL;
    for (int i = 0; i < n; i++)
        if (b[i].kind == 't' && !strcmp(b[i].fig, png) && !strcmp(b[i].what, "at the peak:") && b[i].x0 >= legend_x - 1) head = &b[i];
    if (!head) return 0;
    int k = 0;
    for (double y = head->y1 - 1;;) {   /* the next row below y */
        const TtBox *name = NULL, *val = NULL;
        for (int i = 0; i < n; i++) {
            if (b[i].kind != 't' || strcmp(b[i].fig, png) || b[i].x0 < legend_x - 1 || b[i].y0 <= y + 1) continue;
            if (!name || b[i].y0 < name->y0 - 1 || (fabs(b[i].y0 - name->y0) <= 1 && b[i].x0 < name->x0)) name = &b[i];
        }
        if (!name || k == max) break;
        for (int i = 0; i < n; i++)
            if (b[i].kind == 't' && !strcmp(b[i].fig, png) && &b[i] != name && fabs(b[i].y0 - name->y0) <= 1 && b[i].x0 > name->x1) val = &b[i];
        snprintf(names[k], 64, "%.63s", name->what);
        snprintf(values[k], 32, "%.31s", val ? val->what : "");
        k++;
        y = name->y0;
    }
    return k;
}

/* Two workers one after the other on one thread index (tests/test_tools_common.h), and a small run
   with zero-byte categories (issue 38): each OS thread its own lane, named whole as dpmem-trace names
   it (T2 worker-0, T3 worker-1: worker-1 is not drawn in worker-0's lane under worker-1's name); the
   legend "at the peak" lists what was there largest first, the categories with nothing at the peak
   after them, so that a legend cut short keeps activations (70 % of the peak) and drops the zeros. */
static void check_workers(void) {
    const char *log = tt_path("workers.log"), *png = tt_path("workers.png"), *small = tt_path("workers-small.png");
    tt_workers_log(log);
    remove(tt_path("layout.txt"));
    setenv("DPMEM_LAYOUT", tt_path("layout.txt"), 1);
    int rc = tt_run("dpmem-render", "'%s' -o '%s' -v", log, png);
    Layout L;
    Lane lanes[8];
    int ok = rc == 0 && read_layout(tt_path("out.txt"), 0, &L, lanes, 8) == 0;
    rc |= tt_run("dpmem-render", "'%s' -o '%s' --size 1000x300 -v", log, small);
    Layout Ls;
    ok &= rc == 0 && read_layout(tt_path("out.txt"), 0, &Ls, lanes, 8) == 0;
    unsetenv("DPMEM_LAYOUT");
    CHECK(ok, "workers: exit %d, or no layout", rc);
    if (!ok) return;
    TtBox *b;
    int n = tt_layout_load(tt_path("layout.txt"), &b);
    CHECK(L.lanes == 4, "workers: %d lanes, want 4 (step and forward of each worker: two OS threads on index 2)", L.lanes);
    CHECK(tt_layout_find(b, n, png, 't', "T2 worker-0") && tt_layout_find(b, n, png, 't', "T3 worker-1"),
          "workers: the lanes are not named T2 worker-0 and T3 worker-1 whole (dpmem-trace's names)");
    CHECK(tt_text_overlaps(b, n, png) == 0 && tt_text_overlaps(b, n, small) == 0, "workers: labels overlap (above)");
    char names[32][64], values[32][32];
    int k = peak_legend(b, n, png, L.legend_x, names, values, 32);
    static const char *const want[5] = { "activations", "optimizer", "params", "grads", "norms" };
    int order = k >= 7;
    for (int i = 0; i < 5 && order; i++) order = !strcmp(names[i], want[i]);
    for (int i = 5; i < k && order; i++) order = !strcmp(values[i], "0 B");
    CHECK(order, "workers: the legend at the peak is not largest first, zeros last: %d rows, %s %s, %s %s, %s %s, ...", k, k > 0 ? names[0] : "",
          k > 0 ? values[0] : "", k > 1 ? names[1] : "", k > 1 ? values[1] : "", k > 2 ? names[2] : "", k > 2 ? values[2] : "");
    CHECK(k > 0 && !strcmp(values[0], "96.00 KiB"), "workers: activations %s at the peak, want 96.00 KiB", k > 0 ? values[0] : "none");
    /* cut short: the largest kept, then "…" */
    k = peak_legend(b, n, small, Ls.legend_x, names, values, 32);
    int zeros = 0, acts = 0, more = 0;
    for (int i = 0; i < k; i++) { zeros += !strcmp(values[i], "0 B"); acts += !strcmp(names[i], "activations"); more += !strcmp(names[i], "\xE2\x80\xA6"); }
    CHECK(k >= 2 && acts && !zeros && more && !strcmp(names[0], "activations"),
          "workers at 1000x300: a cut legend (%d rows) keeps activations first (%d), no zero (%d), and says it is cut (%d)", k, acts, zeros, more);
    free(b);
}

/* A sequence classifier's log (META config.task classify, config.num_labels 3): its title line says the
   task after the model, as every chart's does (tools/read/runmeta.h); with --compare, beside a causal-LM
   log (config.task lm), each panel its own (the LM's with none). */
static void check_task(void) {
    const char *log = tt_path("classify.log"), *lm = tt_path("lm.log"), *png = tt_path("classify.png"), *cmp = tt_path("classify-lm.png");
    tt_known_log(log, (KnownLog){ .task = "classify" });
    tt_known_log(lm, (KnownLog){ .task = "lm", .run = "lm" });
    remove(tt_path("layout.txt"));
    setenv("DPMEM_LAYOUT", tt_path("layout.txt"), 1);
    int rc = tt_run("dpmem-render", "'%s' -o '%s'", log, png);
    CHECK(rc == 0, "classify: exit %d", rc);
    check_texts(png, "known", "tiny \xC2\xB7 classify (K=3) \xC2\xB7 T=128 \xC2\xB7 2023-11-14 22:13 UTC", 1);
    rc = tt_run("dpmem-render", "'%s' --compare '%s' -o '%s'", log, lm, cmp);
    unsetenv("DPMEM_LAYOUT");
    CHECK(rc == 0, "classify --compare lm: exit %d", rc);
    TtBox *b;
    int n = tt_layout_load(tt_path("layout.txt"), &b), k_cls = 0, k_lm = 0, k_causal = 0;
    for (int i = 0; i < n; i++) {
        if (b[i].kind != 't' || strcmp(b[i].fig, cmp)) continue;
        k_cls += !strcmp(b[i].what, "tiny \xC2\xB7 classify (K=3) \xC2\xB7 T=128 \xC2\xB7 2023-11-14 22:13 UTC");
        k_lm += !strcmp(b[i].what, "tiny \xC2\xB7 T=128 \xC2\xB7 2023-11-14 22:13 UTC");
        k_causal += strstr(b[i].what, "causal LM") != NULL;
    }
    CHECK(k_cls == 1 && k_lm == 1 && k_causal == 0, "classify --compare lm: %d panel titles name classify (want 1), %d are the LM's plain one (want 1), %d say causal LM (want 0)",
          k_cls, k_lm, k_causal);
    free(b);
    /* a plan of the profiling matrix's shape at the default size: its summary and the plan's note are
       wider than the figure, so they break after a whole item onto a third line, nothing cut ("…") */
    SynthLog S;
    synth_init(&S, 65536, T0);
    synth_thread(&S, 1, T0, 1111, "main");
    static const char *const meta[][2] = { { "run", "lora-seq-len128" }, { "config.model", "llama3.2-3b" }, { "config.dim", "3072" },
                                           { "config.n_layers", "28" }, { "config.task", "classify" }, { "config.num_labels", "3" },
                                           { "config.seq_len", "128" }, { "dp.logical_batch", "32" }, { "dp.physical_batch", "1" },
                                           { "config.precision", "fp32" }, { "config.device", "plan" }, { "config.plan_for", "cuda" } };
    for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++) synth_meta(&S, 1, T0, meta[i][0], meta[i][1]);
    for (int k = 0; k < 10; k++) synth_alloc(&S, 1, T0 + 5 + (uint64_t)k, "activations/a", 1, 0x1000 * (uint64_t)(k + 1), 10 * MiB);
    for (int k = 0; k < 10; k++) synth_free(&S, 1, T0 + 20 + (uint64_t)k, "activations/a", 1, 0x1000 * (uint64_t)(k + 1), 10 * MiB);
    synth_close(&S, 1, T0 + 40);
    synth_save(&S, tt_path("classify-plan.log"));
    synth_release(&S);
    const char *plan_png = tt_path("classify-plan.png");
    remove(tt_path("layout.txt"));
    setenv("DPMEM_LAYOUT", tt_path("layout.txt"), 1);
    rc = tt_run("dpmem-render", "'%s' -o '%s'", tt_path("classify-plan.log"), plan_png);
    unsetenv("DPMEM_LAYOUT");
    CHECK(rc == 0, "classify plan: exit %d", rc);
    n = tt_layout_load(tt_path("layout.txt"), &b);
    int cut = 0;
    for (int i = 0; i < n; i++) cut += b[i].kind == 't' && !strcmp(b[i].fig, plan_png) && strstr(b[i].what, "\xE2\x80\xA6") != NULL;
    CHECK(tt_layout_find(b, n, plan_png, 't', "llama3.2-3b (dim 3072, 28 layers) \xC2\xB7 classify (K=3) \xC2\xB7 T=128 \xC2\xB7 B=32 (physical 1) \xC2\xB7 "
                                             "fp32 \xC2\xB7 plan for cuda \xC2\xB7 2023-11-14 22:13 UTC") &&
              tt_layout_find(b, n, plan_png, 't', "no time (a plan run): drawn against allocation events") && cut == 0,
          "classify plan: the title lines are not the summary and the plan's note whole on two lines (%d texts cut)", cut);
    CHECK(tt_text_overlaps(b, n, plan_png) == 0, "classify plan: labels overlap (above)");
    free(b);
}

/* A shape of the flags' own (META config.model "custom"): the title gives all its dimensions (it said
   "tiny", the preset the flags started from) */
static void check_custom_shape(void) {
    const char *log = tt_path("custom.log"), *png = tt_path("custom.png");
    tt_known_log(log, (KnownLog){ .model = "custom", .shape = { "128256", "4096", "32", "32", "8", "14336" } });
    remove(tt_path("layout.txt"));
    setenv("DPMEM_LAYOUT", tt_path("layout.txt"), 1);
    int rc = tt_run("dpmem-render", "'%s' -o '%s'", log, png);
    unsetenv("DPMEM_LAYOUT");
    CHECK(rc == 0, "custom shape: exit %d", rc);
    check_texts(png, "known", "custom (V=128256 C=4096 L=32 NH=32 NKV=8 F=14336) \xC2\xB7 T=128 \xC2\xB7 2023-11-14 22:13 UTC", 1);
}

/* A program of one's own (issue 49, the README's example): the log opens (META at T0), then 90 ms pass
   before the first allocation, and its steps take 10 ms: the time axis starts at that first
   allocation (all activity sat in the last tenth of it), still counted from the log's opening; its
   name "ghost-T1024" without config.method puts no ghost marker in the title. The known log, whose
   first event comes 1 ms after its opening (3% of its span), keeps its axis from 0 (check_single). */
static void check_lead_in(void) {
    const char *log = tt_path("own.log"), *png = tt_path("own.png");
    SynthLog S;
    synth_init(&S, 65536, T0);
    synth_thread(&S, 1, T0, 1111, "main");
    synth_meta(&S, 1, T0, "run", "ghost-T1024");
    synth_alloc(&S, 1, T0 + 90 * MS, "params/w", 0, 0x1000, 4 * MiB);
    synth_begin(&S, 1, T0 + 91 * MS, "step");
    synth_alloc(&S, 1, T0 + 92 * MS, "activations/h", 0, 0x2000, 16 * MiB);
    synth_free(&S, 1, T0 + 95 * MS, "activations/h", 0, 0x2000, 16 * MiB);
    synth_end(&S, 1, T0 + 99 * MS, "step");
    synth_free(&S, 1, T0 + 100 * MS, "params/w", 0, 0x1000, 4 * MiB);
    synth_close(&S, 1, T0 + 100 * MS);
    synth_save(&S, log);
    synth_release(&S);
    remove(tt_path("layout.txt"));
    setenv("DPMEM_LAYOUT", tt_path("layout.txt"), 1);
    int rc = tt_run("dpmem-render", "'%s' -o '%s' -v", log, png);
    unsetenv("DPMEM_LAYOUT");
    Layout L;
    Lane lanes[8] = { 0 };
    CHECK(rc == 0 && read_layout(tt_path("out.txt"), 0, &L, lanes, 8) == 0 && L.from == 90.0 * MS && L.to > 100.0 * MS && L.to < 101.0 * MS,
          "a 90 ms lead-in before the first allocation: exit %d, the axis runs %.3f..%.3f ms, want 90..100", rc, L.from / MS, L.to / MS);
    TtBox *b;
    int n = tt_layout_load(tt_path("layout.txt"), &b);
    CHECK(n > 0 && !tt_layout_find(b, n, png, 'm', "ghost"), "ghost-T1024 (no config.method) has ghost's marker in its title");
    free(b);
}

int main(void) {
    tt_mkdir("render");
    check_single();
    check_by_name_and_compare();
    check_device_line();
    check_device_dense();
    check_host_unchanged();
    check_bad_input();
    check_formats();
    check_plan();
    check_workers();
    check_task();
    check_custom_shape();
    check_lead_in();
    if (tt_failures) { fprintf(stderr, "%d check(s) failed\n", tt_failures); return 1; }
    printf("render: all checks passed\n");
    return 0;
}
