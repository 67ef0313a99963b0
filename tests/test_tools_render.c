/* test_tools_render.c — dpmem-render on the known log (tests/test_tools_common.h): the pixels of the
   stacked areas at the peak column and elsewhere, the scope lanes, the background where nothing is,
   the peak label, --by name, --compare, a cut log, and bad input; the device-used line (markers, line,
   axis, legend; with a window, --by name, --size and --compare; dense snapshots, several in one column),
   and host logs drawn exactly as without it. PNGs are decoded with stb_image.
   Set DPMEM_KEEP=1 to keep the pictures under $DPMEM_BUILD/test-out/render. */
#include "test_tools_common.h"

#include "palette.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-function"
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#include "stb_image.h"
#pragma GCC diagnostic pop

typedef struct { int x0, y0, x1, y1; double ymax, from, to; unsigned long long peak; int peak_col, lanes; } Layout;
typedef struct { int panel, lane, y0, y1; } Lane;

static int read_layout(const char *out, int panel, Layout *L, Lane *lanes, int max_lanes) {
    char *s = tt_slurp(out, NULL);
    if (!s) return -1;
    int found = -1, nl = 0;
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        int p;
        Lane ln;
        if (sscanf(line, "panel %d", &p) == 1 && p == panel) {
            if (sscanf(line, "panel %d plot %d %d %d %d ymax %lf from %lf to %lf peak %llu col %d lanes %d", &p, &L->x0, &L->y0,
                       &L->x1, &L->y1, &L->ymax, &L->from, &L->to, &L->peak, &L->peak_col, &L->lanes) == 11)
                found = 0;
        } else if (sscanf(line, "lane %d %d %d %d", &ln.panel, &ln.lane, &ln.y0, &ln.y1) == 4 && ln.panel == panel && nl < max_lanes)
            lanes[nl++] = ln;
    }
    free(s);
    return found;
}

typedef struct { unsigned char *px; int w, h; } Png;
static Rgb pix(const Png *p, int x, int y) {
    if (x < 0 || y < 0 || x >= p->w || y >= p->h) return RGB(1, 2, 3);
    const unsigned char *q = p->px + ((size_t)y * p->w + x) * 3;
    return RGB(q[0], q[1], q[2]);
}
static int same(Rgb a, Rgb b) { return a.r == b.r && a.g == b.g && a.b == b.b; }
static int load(Png *p, const char *path) {
    int comp;
    p->px = stbi_load(path, &p->w, &p->h, &comp, 3);
    return p->px ? 0 : -1;
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

#define CHECK_RGB(png, x, y, want, what)                                                            \
    do {                                                                                            \
        Rgb got_ = pix(png, x, y), want_ = (want);                                                  \
        CHECK(same(got_, want_), "%s at (%d,%d): got %d,%d,%d want %d,%d,%d", what, x, y, got_.r,   \
              got_.g, got_.b, want_.r, want_.g, want_.b);                                           \
    } while (0)

static void check_single(void) {
    const char *log = tt_path("known.log"), *png = tt_path("known.png");
    tt_known_log(log, (KnownLog){ .chunk_bytes = 512 });   /* small chunks: many, interleaved threads */
    int rc = tt_run("dpmem-render", "'%s' -o '%s' -v", log, png);
    CHECK(rc == 0, "dpmem-render exit %d", rc);
    Layout L;
    Lane lanes[8] = { 0 };
    CHECK(read_layout(tt_path("out.txt"), 0, &L, lanes, 8) == 0, "no layout line on stdout");
    Png P;
    if (load(&P, png)) { CHECK(0, "cannot decode %s", png); return; }
    CHECK(P.w == 1400 && P.h == 600, "size %dx%d, want the default 1400x600", P.w, P.h);
    CHECK(L.peak == 450 * MiB, "peak %llu, want 450 MiB", L.peak);
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
    CHECK_RGB(&P, col_of(&L, 14.5 * MS), (lanes[0].y0 + lanes[0].y1) / 2 - 5, scope_colour("step"), "step band");
    CHECK_RGB(&P, col_of(&L, 13.5 * MS), lanes[1].y0 + 1, scope_colour("forward"), "forward band");
    CHECK_RGB(&P, col_of(&L, 16.5 * MS), lanes[1].y0 + 1, scope_colour("backward"), "backward band");
    CHECK_RGB(&P, col_of(&L, 12.8 * MS), lanes[2].y0 + 1, scope_colour("data"), "data band (loader thread)");
    CHECK_RGB(&P, col_of(&L, 0.5 * MS), lanes[1].y0 + 1, COLOUR_BG, "no scope before the first step");
    /* The peak label is red, in the row above the plot. */
    int red = 0;
    for (int yy = L.y0 - 24; yy < L.y0; yy++)
        for (int xx = L.x0; xx < L.x1; xx++) red += same(pix(&P, xx, yy), COLOUR_PEAK);
    CHECK(red > 50, "no peak label above the plot (%d red pixels)", red);
    /* Legend swatches for the four categories present. */
    int sw = 0;
    for (int i = 0; i < 4; i++)
        for (int yy = L.y0; yy < P.h; yy++)
            if (same(pix(&P, L.x1 + 25, yy), category_colour(stack[i].cat))) { sw++; break; }
    CHECK(sw == 4, "%d of 4 legend swatches", sw);
    /* The title (dark text) in the top rows. */
    int dark = 0;
    for (int yy = 0; yy < 26; yy++)
        for (int xx = 0; xx < 300; xx++) dark += same(pix(&P, xx, yy), COLOUR_TEXT);
    CHECK(dark > 100, "no title");
    stbi_image_free(P.px);

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

    rc = tt_run("dpmem-render", "--compare '%s' '%s' -o '%s' -v", log, leaky, tt_path("compare.png"));
    CHECK(rc == 0, "--compare: exit %d", rc);
    Layout A, B;
    if (read_layout(tt_path("out.txt"), 0, &A, lanes, 8) == 0 && read_layout(tt_path("out.txt"), 1, &B, lanes, 8) == 0 &&
        load(&P, tt_path("compare.png")) == 0) {
        CHECK(P.h == 920, "--compare height %d, want 2 x 460", P.h);
        CHECK(B.y0 > A.y1 && A.x0 == B.x0 && A.x1 == B.x1 && A.ymax == B.ymax && A.to == B.to, "panels do not share the axes");
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

/* Pixels of the region where text s is drawn at (x, y) that differ from the same text drawn alone on
   the background (raster.c's own draw_text): 0 when exactly that label is there. */
static int text_mismatches(const Png *P, int x, int y, const char *s, int scale, Rgb c) {
    Image im;
    int w = text_width(s, scale), h = text_height(scale), bad = 0;
    if (image_new(&im, w, h, COLOUR_BG)) return -1;
    draw_text(&im, 0, 0, s, scale, c);
    for (int j = 0; j < h; j++)
        for (int i = 0; i < w; i++) {
            const uint8_t *q = im.px + ((size_t)j * w + i) * 3;
            bad += !same(pix(P, x + i, y + j), RGB(q[0], q[1], q[2]));
        }
    image_free(&im);
    return bad;
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
   / (xb - xa), rounded half away from zero; the line is that row and the one above, nothing 2 rows off. */
static void check_segment(const Png *P, const Layout *L, double ms_a, uint64_t ua, double ms_b, uint64_t ub, const char *what) {
    int xa = col_of(L, ms_a * MS), ya = L->y1 - hpx((double)ua, L), xb = col_of(L, ms_b * MS), yb = L->y1 - hpx((double)ub, L);
    int x = (xa + xb) / 2;
    long long n = (long long)(yb - ya) * (x - xa), d = xb - xa;
    int y = ya + (int)(n >= 0 ? (2 * n + d) / (2 * d) : -((-2 * n + d) / (2 * d)));
    char w[96];
    snprintf(w, sizeof w, "%s: line between %.0f and %.0f ms", what, ms_a, ms_b);
    CHECK(xb - xa > 20 && abs(yb - ya) < xb - xa, "%s: the segment is not a long, shallow one (test set-up)", w);
    CHECK_RGB(P, x, y, COLOUR_DEVICE, w);
    CHECK_RGB(P, x, y - 1, COLOUR_DEVICE, w);
    CHECK(!same(pix(P, x, y + 2), COLOUR_DEVICE) && !same(pix(P, x, y - 3), COLOUR_DEVICE), "%s: line thicker than 2 rows or misplaced", w);
}

static int count_colour(const Png *P, int x0, int y0, int x1, int y1, Rgb c) {
    int n = 0;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) n += same(pix(P, x, y), c);
    return n;
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
    int rc = tt_run("dpmem-render", "'%s' -o '%s' -v", dev, tt_path("device.png"));
    CHECK(rc == 0, "device log: exit %d", rc);
    if (read_layout(tt_path("out.txt"), 0, &L, lanes, 8) == 0 && read_device(tt_path("out.txt"), 0, &n, &max, &lx, &ly) == 0 &&
        load(&P, tt_path("device.png")) == 0) {
        CHECK(n == 3 && max == a[2], "device line: %d snapshots, max %llu; want 3 (the one without device figures left out), 700 MiB", n, max);
        CHECK(L.ymax == 800.0 * MiB && L.ymax >= 700.0 * MiB * 1.04, "y axis top %.0f, want 800 MiB (above device used 700 MiB)", L.ymax);
        CHECK(L.peak == 300 * MiB, "tagged peak %llu, want 300 MiB", L.peak);
        CHECK(text_mismatches(&P, L.x0 - 8 - text_width("800 MiB", 2), L.y0 - text_height(2) / 2, "800 MiB", 2, COLOUR_TEXT) == 0,
              "the y axis' top label is not \"800 MiB\"");
        for (int s = 0; s < 3; s++) check_marker(&P, &L, dev_snap_ms[s], a[s], "device");
        check_segment(&P, &L, 10, a[0], 20, a[1], "device");
        check_segment(&P, &L, 20, a[1], 30, a[2], "device");
        /* Nothing before the first snapshot or after the last; no marker at the snapshot without figures. */
        CHECK(count_colour(&P, L.x0, L.y0, col_of(&L, 10.0 * MS) - 4, L.y1, COLOUR_DEVICE) == 0, "device line before the first snapshot");
        CHECK(count_colour(&P, col_of(&L, 30.0 * MS) + 4, L.y0, L.x1, L.y1, COLOUR_DEVICE) == 0, "device line after the last snapshot");
        int x25 = col_of(&L, 25.0 * MS), y25 = L.y1 - hpx(475.0 * MiB, &L);   /* the segment's row there, roughly */
        CHECK(count_colour(&P, x25 - 3, L.y0, x25 + 4, y25 - 6, COLOUR_DEVICE) == 0 &&
              count_colour(&P, x25 - 3, y25 + 6, x25 + 4, L.y1, COLOUR_DEVICE) == 0, "a mark at the snapshot without device figures");
        /* Legend: the swatch (a piece of line with a marker) and "device used", at the top of the legend. */
        CHECK(lx == L.x1 + 20 && ly == L.y0, "legend at %d,%d, want %d,%d", lx, ly, L.x1 + 20, L.y0);
        CHECK_RGB(&P, L.x1 + 20 + 7, L.y0 + 7, COLOUR_DEVICE, "legend swatch: marker");
        CHECK_RGB(&P, L.x1 + 20 + 3, L.y0 + 3, COLOUR_BG, "legend swatch: ring");
        CHECK_RGB(&P, L.x1 + 20, L.y0 + 7, COLOUR_DEVICE, "legend swatch: line, left end");
        CHECK_RGB(&P, L.x1 + 20 + 14, L.y0 + 6, COLOUR_DEVICE, "legend swatch: line, right end");
        CHECK(text_mismatches(&P, L.x1 + 40, L.y0 + 1, "device used", 2, COLOUR_TEXT) == 0, "no \"device used\" in the legend");
        CHECK(text_mismatches(&P, L.x1 + 40, L.y0 + 1 + text_height(2) + 4, "(cudaMemGetInfo), largest", 1, COLOUR_MUTED) == 0,
              "no \"(cudaMemGetInfo)\" under it");
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
        { "'%s/known.log' -o /nonexistent-dir/x.png", "cannot write" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) tt_expect_error("dpmem-render", bad[i].args, bad[i].want);
}

int main(void) {
    tt_mkdir("render");
    check_single();
    check_by_name_and_compare();
    check_device_line();
    check_device_dense();
    check_host_unchanged();
    check_bad_input();
    if (tt_failures) { fprintf(stderr, "%d check(s) failed\n", tt_failures); return 1; }
    printf("render: all checks passed\n");
    return 0;
}
