/* fonts.c — see fonts.h. */
#include "fonts.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cairo-ft.h>
#include <cairo.h>
#include <ft2build.h>
#include FT_FREETYPE_H

#ifndef DPMEM_FONT_PREFIX
#define DPMEM_FONT_PREFIX ""   /* the Makefile's $(DEPS), for packages unpacked with dpkg -x */
#endif

/* Regular and bold file of each family, in order of preference (paths of the Debian packages). */
static const char *const families[][2] = {
    { "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf" },
    { "/usr/share/fonts/truetype/liberation2/LiberationSans-Regular.ttf", "/usr/share/fonts/truetype/liberation2/LiberationSans-Bold.ttf" },
    { "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf", "/usr/share/fonts/truetype/liberation/LiberationSans-Bold.ttf" },
};

static FT_Library ft;
static cairo_font_face_t *faces[2];
static const cairo_user_data_key_t ft_key;

static void release(void) {
    for (int i = 0; i < 2; i++)
        if (faces[i]) cairo_font_face_destroy(faces[i]);
    faces[0] = faces[1] = NULL;
    cairo_debug_reset_static_data();   /* cairo's font caches let go of the faces: FT_Done_Face runs */
    if (ft) FT_Done_FreeType(ft);
    ft = NULL;
}

static void done_face(void *face) { FT_Done_Face((FT_Face)face); }

static cairo_font_face_t *load(const char *path, char *err, size_t errlen) {
    FT_Face face;
    int e = FT_New_Face(ft, path, 0, &face);
    if (e) { snprintf(err, errlen, "%s: cannot load the font (FreeType error %d)", path, e); return NULL; }
    cairo_font_face_t *cf = cairo_ft_font_face_create_for_ft_face(face, 0);
    if (cairo_font_face_status(cf) ||
        cairo_font_face_set_user_data(cf, &ft_key, face, done_face)) {
        snprintf(err, errlen, "%s: cairo cannot use the font", path);
        cairo_font_face_destroy(cf);
        FT_Done_Face(face);
        return NULL;
    }
    return cf;
}

int fonts_get(cairo_font_face_t **regular, cairo_font_face_t **bold, char *err, size_t errlen) {
    if (faces[0]) { *regular = faces[0]; *bold = faces[1]; return 0; }
    char reg[1024] = "", bld[1024] = "";
    const char *env = getenv("DPMEM_FONT"), *env_bold = getenv("DPMEM_FONT_BOLD");
    if (env && *env) {
        snprintf(reg, sizeof reg, "%s", env);
        snprintf(bld, sizeof bld, "%s", env_bold && *env_bold ? env_bold : env);
        if (access(reg, R_OK)) { snprintf(err, errlen, "DPMEM_FONT=%s: no such font file", env); return -1; }
    } else {
        for (size_t i = 0; i < sizeof families / sizeof families[0] && !reg[0]; i++)
            for (int pre = 0; pre < 2 && !reg[0]; pre++) {
                /* under $(DEPS) a path /usr/share/... is $(DEPS)/share/... (DEPS ends in /usr) */
                char r[1024], b[1024];
                snprintf(r, sizeof r, "%s%s", pre ? DPMEM_FONT_PREFIX : "", pre ? families[i][0] + 4 : families[i][0]);
                snprintf(b, sizeof b, "%s%s", pre ? DPMEM_FONT_PREFIX : "", pre ? families[i][1] + 4 : families[i][1]);
                if ((pre && !DPMEM_FONT_PREFIX[0]) || access(r, R_OK)) continue;
                snprintf(reg, sizeof reg, "%s", r);
                snprintf(bld, sizeof bld, "%s", access(b, R_OK) ? r : b);
            }
        if (!reg[0]) {
            snprintf(err, errlen, "no font to draw with: install fonts-dejavu-core (%s) or fonts-liberation2, or set DPMEM_FONT to a .ttf",
                     families[0][0]);
            return -1;
        }
    }
    if (!ft) {
        if (FT_Init_FreeType(&ft)) { ft = NULL; snprintf(err, errlen, "FreeType does not start"); return -1; }
        atexit(release);
    }
    faces[0] = load(reg, err, errlen);
    if (faces[0]) faces[1] = load(bld, err, errlen);
    if (!faces[0] || !faces[1]) {
        if (faces[0]) cairo_font_face_destroy(faces[0]);
        faces[0] = NULL;
        return -1;
    }
    *regular = faces[0]; *bold = faces[1];
    return 0;
}
