/* fonts.h — the font every picture is drawn with: DejaVu Sans (Debian's fonts-dejavu-core), else
   Liberation Sans (fonts-liberation2), found at their fixed Debian paths (under $(DEPS) too, for a
   build from unpacked packages) or named by the environment variable DPMEM_FONT (a TrueType file;
   DPMEM_FONT_BOLD for its bold face, else the same file). Loaded once with FreeType and handed to
   cairo; released at exit, so that leak checkers see nothing of it.

   Not here: choosing sizes or drawing (tools/charts/figure.c). */
#ifndef FONTS_H
#define FONTS_H

#include <stddef.h>

struct _cairo_font_face;

/* The regular and bold faces. 0, or -1 with a one-line reason naming the package to install. */
int fonts_get(struct _cairo_font_face **regular, struct _cairo_font_face **bold, char *err, size_t errlen);

#endif
