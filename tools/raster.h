/* raster.h — the little drawing library behind every PNG the tools write: an RGB image, filled
   rectangles, lines, text (stb_easy_font's bitmap font, scaled by whole pixels) and PNG output
   (stb_image_write). No anti-aliasing, on purpose: every pixel has an exact, testable colour.

   It does not lay anything out (charts and timelines do that) and knows nothing of logs. */
#ifndef RASTER_H
#define RASTER_H

#include <stdint.h>

typedef struct { uint8_t r, g, b; } Rgb;
typedef struct { int w, h; uint8_t *px; } Image;   /* px: w*h*3 bytes, row-major, top row first */

#define RGB(r, g, b) ((Rgb){ (r), (g), (b) })

int  image_new(Image *im, int w, int h, Rgb bg);    /* 0, or -1 (size out of range / no memory) */
void image_free(Image *im);
void fill_rect(Image *im, int x0, int y0, int x1, int y1, Rgb c);  /* [x0,x1) × [y0,y1), clipped */
void hline(Image *im, int x0, int x1, int y, Rgb c);               /* [x0,x1] */
void vline(Image *im, int x, int y0, int y1, Rgb c);               /* [y0,y1] */
void dashed_vline(Image *im, int x, int y0, int y1, Rgb c);
void draw_line(Image *im, int x0, int y0, int x1, int y1, Rgb c);
void rect_outline(Image *im, int x0, int y0, int x1, int y1, Rgb c);

/* Text: the font is 6 px per character and 7 px high at scale 1 (plus descenders). */
void draw_text(Image *im, int x, int y, const char *s, int scale, Rgb c);
int  text_width(const char *s, int scale);
int  text_height(int scale);

int  image_write_png(const Image *im, const char *path);           /* 0, or -1 */

/* Clamps a double to an int pixel coordinate without undefined behaviour (NaN -> lo). */
int  px_clamp(double v, int lo, int hi);

#endif
