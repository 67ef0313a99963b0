/* raster.c — see raster.h. The stb implementations are compiled here and only here. */
#include "raster.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Third-party headers: their warnings are theirs, ours stay -Werror. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-braces"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#include "stb_easy_font.h"
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include "stb_image_write.h"
#pragma GCC diagnostic pop

int image_new(Image *im, int w, int h, Rgb bg) {
    im->w = im->h = 0; im->px = NULL;
    if (w < 1 || h < 1 || w > 16384 || h > 16384) return -1;
    im->px = malloc((size_t)w * h * 3);
    if (!im->px) return -1;
    im->w = w; im->h = h;
    for (size_t i = 0; i < (size_t)w * h; i++) {
        im->px[3 * i] = bg.r; im->px[3 * i + 1] = bg.g; im->px[3 * i + 2] = bg.b;
    }
    return 0;
}

void image_free(Image *im) { free(im->px); im->px = NULL; im->w = im->h = 0; }

int px_clamp(double v, int lo, int hi) {
    if (!(v >= lo)) return lo;   /* also NaN */
    if (v >= hi) return hi;
    return (int)v;
}

void fill_rect(Image *im, int x0, int y0, int x1, int y1, Rgb c) {
    if (x0 < 0) x0 = 0;
    if (y0 < 0) y0 = 0;
    if (x1 > im->w) x1 = im->w;
    if (y1 > im->h) y1 = im->h;
    for (int y = y0; y < y1; y++) {
        uint8_t *p = im->px + ((size_t)y * im->w + x0) * 3;
        for (int x = x0; x < x1; x++, p += 3) { p[0] = c.r; p[1] = c.g; p[2] = c.b; }
    }
}

void hline(Image *im, int x0, int x1, int y, Rgb c) {
    if (x1 < x0) { int t = x0; x0 = x1; x1 = t; }
    fill_rect(im, x0, y, x1 + 1, y + 1, c);
}
void vline(Image *im, int x, int y0, int y1, Rgb c) {
    if (y1 < y0) { int t = y0; y0 = y1; y1 = t; }
    fill_rect(im, x, y0, x + 1, y1 + 1, c);
}
void dashed_vline(Image *im, int x, int y0, int y1, Rgb c) {
    if (y1 < y0) { int t = y0; y0 = y1; y1 = t; }
    for (int y = y0; y <= y1; y += 6) vline(im, x, y, y + 3 < y1 ? y + 3 : y1, c);
}
void rect_outline(Image *im, int x0, int y0, int x1, int y1, Rgb c) {
    hline(im, x0, x1, y0, c); hline(im, x0, x1, y1, c);
    vline(im, x0, y0, y1, c); vline(im, x1, y0, y1, c);
}

void draw_line(Image *im, int x0, int y0, int x1, int y1, Rgb c) {
    int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1, dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1, err = dx + dy;
    for (int guard = 0; guard < 40000; guard++) {
        fill_rect(im, x0, y0, x0 + 1, y0 + 1, c);
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * err;
        if (e2 >= dy) { err += dy; x0 += sx; }
        if (e2 <= dx) { err += dx; y0 += sy; }
    }
}

/* stb_easy_font emits quads; each is an axis-aligned rectangle in font units. */
/* stb_easy_font indexes its table by (char - 32): only printable ASCII may reach it (log strings
   are untrusted bytes; anything else becomes '?'). Newlines too, so text stays on one line. */
static void printable(char *out, size_t n, const char *s) {
    size_t k = 0;
    for (; *s && k + 1 < n; s++) out[k++] = *s >= 32 && *s <= 126 ? *s : '?';
    out[k] = 0;
}

void draw_text(Image *im, int x, int y, const char *s, int scale, Rgb c) {
    static char vbuf[64 * 1024];
    char tmp[512];
    printable(tmp, sizeof tmp, s);
    int quads = stb_easy_font_print(0, 0, tmp, NULL, vbuf, sizeof vbuf);
    for (int q = 0; q < quads; q++) {
        const float *v0 = (const float *)(vbuf + q * 64), *v2 = (const float *)(vbuf + q * 64 + 32);
        int qx0 = x + (int)lroundf(v0[0] * scale), qy0 = y + (int)lroundf(v0[1] * scale);
        int qx1 = x + (int)lroundf(v2[0] * scale), qy1 = y + (int)lroundf(v2[1] * scale);
        fill_rect(im, qx0, qy0, qx1, qy1, c);
    }
}

int text_width(const char *s, int scale) {
    char tmp[512];
    printable(tmp, sizeof tmp, s);
    return stb_easy_font_width(tmp) * scale;
}

int text_height(int scale) { return 7 * scale; }

int image_write_png(const Image *im, const char *path) {
    return stbi_write_png(path, im->w, im->h, 3, im->px, im->w * 3) ? 0 : -1;
}
