/* test_suite_pngstat.c — a helper of the suite's tests (not a test itself): decodes a PNG with
   stb_image and prints what a test can assert on, so shell tests can check the pictures the suite
   writes. Not here: judging the figure (the tests decide what counts as non-trivial).

   usage: test_suite_pngstat FILE.png [category ...]
   prints: "size W H", "colours N" (distinct RGB values), "ink P" (per cent of pixels that are not
   the white background), then "category NAME PIXELS" for each category named: the pixels drawn in
   that category's colour (tools/charts/palette.c), i.e. whether its bar or area is in the picture.
   Exit 0, or 1 with one line on stderr when the file does not decode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "charts/palette.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-function"
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#include "stb_image.h"
#pragma GCC diagnostic pop

static int cmp_u32(const void *a, const void *b) {
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s FILE.png [category ...]\n", argv[0]); return 2; }
    int w, h, n;
    unsigned char *px = stbi_load(argv[1], &w, &h, &n, 3);
    if (!px) { fprintf(stderr, "%s: not a PNG that decodes (%s)\n", argv[1], stbi_failure_reason()); return 1; }
    size_t np = (size_t)w * (size_t)h, ink = 0;
    unsigned *rgb = malloc(np * sizeof *rgb);
    if (!rgb) { fprintf(stderr, "out of memory\n"); stbi_image_free(px); return 1; }
    for (size_t i = 0; i < np; i++) {
        const unsigned char *p = px + 3 * i;
        rgb[i] = (unsigned)p[0] << 16 | (unsigned)p[1] << 8 | p[2];
        if (rgb[i] != 0xFFFFFFu) ink++;
    }
    printf("size %d %d\n", w, h);
    printf("ink %.2f\n", np ? 100.0 * (double)ink / (double)np : 0.0);
    for (int a = 2; a < argc; a++) {
        Rgb c = category_colour(argv[a]);
        unsigned want = (unsigned)c.r << 16 | (unsigned)c.g << 8 | c.b;
        size_t count = 0;
        for (size_t i = 0; i < np; i++) count += rgb[i] == want;
        printf("category %s %zu\n", argv[a], count);
    }
    qsort(rgb, np, sizeof *rgb, cmp_u32);
    size_t distinct = np ? 1 : 0;
    for (size_t i = 1; i < np; i++) distinct += rgb[i] != rgb[i - 1];
    printf("colours %zu\n", distinct);
    free(rgb);
    stbi_image_free(px);
    return 0;
}
