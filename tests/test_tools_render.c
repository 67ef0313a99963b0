/* test_tools_render.c — dpmem-render on the known log (tests/test_tools_common.h): the pixels of the
   stacked areas at the peak column and elsewhere, the scope lanes, the background where nothing is,
   the peak label, --by name, --compare, a cut log, and bad input. PNGs are decoded with stb_image.
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
    check_bad_input();
    if (tt_failures) { fprintf(stderr, "%d check(s) failed\n", tt_failures); return 1; }
    printf("render: all checks passed\n");
    return 0;
}
