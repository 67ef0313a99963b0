/* test_tools_png.h — what the tools' picture tests share: a PNG decoded with stb_image (the one
   implementation in the test that includes this), a pixel and its exact colour, pixels of a colour in
   a rectangle, the ink of a text in a box, and the markers a chart recorded (DPMEM_LAYOUT) checked
   against the palette: each method's marker, at its centre, in its method's colour. Test-only. */
#ifndef TEST_TOOLS_PNG_H
#define TEST_TOOLS_PNG_H

#include "test_tools_common.h"

#include "charts/palette.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-function"
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#include "stb_image.h"
#pragma GCC diagnostic pop

typedef struct { unsigned char *px; int w, h; } Png;

static inline Rgb pix(const Png *p, int x, int y) {
    if (x < 0 || y < 0 || x >= p->w || y >= p->h) return RGB(1, 2, 3);
    const unsigned char *q = p->px + ((size_t)y * p->w + x) * 3;
    return RGB(q[0], q[1], q[2]);
}
static inline int same(Rgb a, Rgb b) { return a.r == b.r && a.g == b.g && a.b == b.b; }
static inline int load(Png *p, const char *path) {
    int comp;
    p->px = stbi_load(path, &p->w, &p->h, &comp, 3);
    return p->px ? 0 : -1;
}
static inline int count_colour(const Png *P, int x0, int y0, int x1, int y1, Rgb c) {
    int n = 0;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) n += same(pix(P, x, y), c);
    return n;
}
/* Pixels in a box drawn near colour c (within 40 per channel): the ink of a text in that colour. */
static inline int ink_in(const Png *P, double x0, double y0, double x1, double y1, Rgb c) {
    int n = 0;
    for (int y = (int)y0; y < (int)y1; y++)
        for (int x = (int)x0; x < (int)x1; x++) {
            Rgb q = pix(P, x, y);
            n += abs(q.r - c.r) < 40 && abs(q.g - c.g) < 40 && abs(q.b - c.b) < 40;
        }
    return n;
}

#define CHECK_RGB(png, x, y, want, what)                                                            \
    do {                                                                                            \
        Rgb got_ = pix(png, x, y), want_ = (want);                                                  \
        CHECK(same(got_, want_), "%s at (%d,%d): got %d,%d,%d want %d,%d,%d", what, x, y, got_.r,   \
              got_.g, got_.b, want_.r, want_.g, want_.b);                                           \
    } while (0)

/* Every mark of figure png named `method` (the charts name a marker by its method): the pixel at its
   centre is the method's colour (tools/charts/palette.c). Returns how many there are; -1 at the first that
   is not. */
static inline int tt_method_marks(const TtBox *b, int n, const char *png, const char *method) {
    Png P;
    if (load(&P, png)) return -1;
    Rgb want = method_style(method).colour;
    int k = 0;
    for (int i = 0; i < n && k >= 0; i++) {
        if (b[i].kind != 'm' || strcmp(b[i].fig, png) || strcmp(b[i].what, method)) continue;
        Rgb got = pix(&P, (int)((b[i].x0 + b[i].x1) / 2), (int)((b[i].y0 + b[i].y1) / 2));
        if (!same(got, want)) {
            fprintf(stderr, "  %s: the %s marker at (%.0f,%.0f) is %d,%d,%d, want %d,%d,%d\n", png, method, (b[i].x0 + b[i].x1) / 2,
                    (b[i].y0 + b[i].y1) / 2, got.r, got.g, got.b, want.r, want.g, want.b);
            k = -1;
        } else k++;
    }
    stbi_image_free(P.px);
    return k;
}

#endif
