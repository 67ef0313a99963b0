/* figure.c — see figure.h. The stb_image_write implementation is compiled here and only here. */
#include "figure.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <strings.h>
#include <unistd.h>

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>

#include "fonts.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-braces"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO
#include "stb_image_write.h"
#pragma GCC diagnostic pop

#define MAX_PX 16384

/* ---- sizes and formats ---------------------------------------------------------------------- */

int figspec_parse_size(FigSpec *s, const char *text) {
    char *end;
    errno = 0;
    double w = strtod(text, &end);
    if (end == text || *end != 'x' || errno || !(w > 0) || !isfinite(w)) return -1;
    const char *t = end + 1;
    double h = strtod(t, &end);
    if (end == t || errno || !(h > 0) || !isfinite(h)) return -1;
    const char *u = *end ? end : "px";
    if (strcmp(u, "px") && strcmp(u, "in") && strcmp(u, "cm") && strcmp(u, "mm") && strcmp(u, "pt")) return -1;
    s->w = w; s->h = h;
    snprintf(s->unit, sizeof s->unit, "%s", u);
    return 0;
}

int figspec_pixels(const FigSpec *s, int def_w, int def_h, int min_w, int min_h, int *w, int *h, char *err, size_t errlen) {
    double dpi = s->dpi > 0 ? s->dpi : FIG_DEFAULT_DPI, fw, fh;
    if (s->w > 0 && s->h > 0) {
        double per = !strcmp(s->unit, "in") ? dpi : !strcmp(s->unit, "cm") ? dpi / 2.54 : !strcmp(s->unit, "mm") ? dpi / 25.4
                   : !strcmp(s->unit, "pt") ? dpi / 72 : 1;
        fw = s->w * per; fh = s->h * per;
    } else { fw = def_w * dpi / FIG_DEFAULT_DPI; fh = def_h * dpi / FIG_DEFAULT_DPI; }
    if (!(fw <= MAX_PX && fh <= MAX_PX)) { snprintf(err, errlen, "figure of %.0fx%.0f px is too large (at most %dx%d: a smaller --size or --dpi)", fw, fh, MAX_PX, MAX_PX); return -1; }
    *w = (int)lround(fw); *h = (int)lround(fh);
    /* the minimum is in pixels at 144 dpi, scaled like the default */
    int mw = (int)ceil(min_w * dpi / FIG_DEFAULT_DPI), mh = (int)ceil(min_h * dpi / FIG_DEFAULT_DPI);
    if (*w < mw || *h < mh) {
        snprintf(err, errlen, "figure of %dx%d px is too small for this chart: at least %dx%d px at %.0f dpi (--size)", *w, *h, mw, mh, dpi);
        return -1;
    }
    return 0;
}

const char *fig_format_ext(FigFormat f) { return f == FIG_SVG ? "svg" : f == FIG_PDF ? "pdf" : "png"; }

int fig_format_of(const char *path, const char *forced, FigFormat *f, char *err, size_t errlen) {
    const char *ext = forced;
    if (!ext) {
        const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
        ext = dot && (!slash || dot > slash) ? dot + 1 : "";
    }
    if (!strcasecmp(ext, "png")) *f = FIG_PNG;
    else if (!strcasecmp(ext, "svg")) *f = FIG_SVG;
    else if (!strcasecmp(ext, "pdf")) *f = FIG_PDF;
    else {
        if (forced) snprintf(err, errlen, "unknown format '%s' (png, svg or pdf)", forced);
        else if (!*ext) snprintf(err, errlen, "%s: no extension to choose the format by (.png, .svg or .pdf)", path);
        else snprintf(err, errlen, "%s: unknown output format '.%s' (.png, .svg or .pdf)", path, ext);
        return -1;
    }
    return 0;
}

/* ---- opening and closing -------------------------------------------------------------------- */

static cairo_status_t write_stream(void *closure, const unsigned char *data, unsigned int length) {
    return fwrite(data, 1, length, (FILE *)closure) == length ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

static cairo_font_face_t *face_regular, *face_bold;

double fig_pt(const Figure *f, double pt) { return pt * f->px_per_pt; }
double fig_fpt(const Figure *f, double pt) { return pt * f->px_per_pt * f->font_scale; }

int fig_open(Figure *f, const char *path, FigFormat format, int w, int h, double dpi, double font_scale, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    if (w < 1 || h < 1 || w > MAX_PX || h > MAX_PX) { snprintf(err, errlen, "figure of %dx%d px is out of range", w, h); return -1; }
    if (fonts_get(&face_regular, &face_bold, err, errlen)) return -1;
    f->format = format; f->w = w; f->h = h;
    f->dpi = dpi > 0 ? dpi : FIG_DEFAULT_DPI;
    f->px_per_pt = f->dpi / 72.0;
    f->font_scale = font_scale > 0 ? font_scale : 1.0;
    if (path) {
        f->path = strdup(path);
        f->out_is_stdout = !strcmp(path, "-");
        /* A regular file (or a new one) is written beside path and renamed over it, so that a reader
           never sees half a picture; anything else that exists (/dev/null, a FIFO, a terminal) is
           written in place: renamed over, /dev/null would become a regular file (as root). */
        struct stat st;
        const int in_place = !f->out_is_stdout && stat(path, &st) == 0 && !S_ISREG(st.st_mode);
        if (f->path && !f->out_is_stdout && !in_place) {   /* beside path: the rename stays on one file system */
            size_t n = strlen(path) + 32;
            f->tmp = malloc(n);
            if (f->tmp) snprintf(f->tmp, n, "%s.partial-%ld", path, (long)getpid());
        }
        f->out = f->out_is_stdout ? stdout : in_place ? fopen(path, "wb") : f->tmp ? fopen(f->tmp, "wb") : NULL;
        if (!f->path || !f->out) {
            snprintf(err, errlen, "%s: cannot write: %s", path,
                     f->path && (f->tmp || f->out_is_stdout || in_place) ? strerror(errno) : "out of memory");
            free(f->path);
            free(f->tmp);
            f->path = f->tmp = NULL;
            return -1;
        }
    }
    double wpt = w * 72.0 / f->dpi, hpt = h * 72.0 / f->dpi;
    if (!path || format == FIG_PNG) f->surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, w, h);
    else if (format == FIG_SVG) f->surface = cairo_svg_surface_create_for_stream(write_stream, f->out, wpt, hpt);
    else {
        f->surface = cairo_pdf_surface_create_for_stream(write_stream, f->out, wpt, hpt);
        cairo_pdf_surface_set_metadata(f->surface, CAIRO_PDF_METADATA_CREATOR, "dpmem");
    }
    f->cr = cairo_create(f->surface);
    if (cairo_status(f->cr)) {
        snprintf(err, errlen, "%s: cairo cannot make a %dx%d figure: %s", path ? path : "figure", w, h, cairo_status_to_string(cairo_status(f->cr)));
        fig_discard(f);
        return -1;
    }
    if (path && format != FIG_PNG) cairo_scale(f->cr, 72.0 / f->dpi, 72.0 / f->dpi);
    /* Metrics unhinted: a label is as wide in the PDF as in the PNG, whatever the dpi. */
    cairo_font_options_t *fo = cairo_font_options_create();
    cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF);
    cairo_font_options_set_hint_style(fo, CAIRO_HINT_STYLE_SLIGHT);
    cairo_font_options_set_antialias(fo, CAIRO_ANTIALIAS_GRAY);
    cairo_set_font_options(f->cr, fo);
    cairo_font_options_destroy(fo);
    cairo_set_source_rgb(f->cr, 1, 1, 1);
    cairo_paint(f->cr);
    return 0;
}

static void free_boxes(Figure *f) {
    for (int i = 0; i < f->n_boxes; i++) free(f->boxes[i].what);
    free(f->boxes);
    f->boxes = NULL;
    f->n_boxes = f->cap_boxes = 0;
}

void fig_discard(Figure *f) {
    if (f->cr) cairo_destroy(f->cr);
    if (f->surface) { cairo_surface_finish(f->surface); cairo_surface_destroy(f->surface); }
    if (f->out && !f->out_is_stdout) fclose(f->out);
    if (f->tmp) unlink(f->tmp);   /* not renamed: an error, nothing is left behind */
    free(f->tmp);
    free(f->path);
    free_boxes(f);
    memset(f, 0, sizeof *f);
}

/* A short write sets the stream's error flag, which write_png checks. */
static void png_write_func(void *context, void *data, int size) {
    size_t written = fwrite(data, 1, (size_t)size, (FILE *)context);
    (void)written;
}

/* cairo's ARGB32 is premultiplied, one native-endian uint32 per pixel: un-premultiply, reorder to RGBA. */
static int write_png(Figure *f) {
    cairo_surface_flush(f->surface);
    const unsigned char *data = cairo_image_surface_get_data(f->surface);
    int stride = cairo_image_surface_get_stride(f->surface);
    unsigned char *rgba = malloc((size_t)f->w * f->h * 4);
    if (!data || !rgba) { free(rgba); return -1; }
    for (int y = 0; y < f->h; y++) {
        const uint32_t *row = (const uint32_t *)(data + (size_t)y * stride);
        unsigned char *o = rgba + (size_t)y * f->w * 4;
        for (int x = 0; x < f->w; x++, o += 4) {
            uint32_t p = row[x];
            unsigned a = p >> 24, r = (p >> 16) & 255, g = (p >> 8) & 255, b = p & 255;
            if (a && a < 255) { r = (r * 255 + a / 2) / a; g = (g * 255 + a / 2) / a; b = (b * 255 + a / 2) / a; }
            o[0] = (unsigned char)(r > 255 ? 255 : r); o[1] = (unsigned char)(g > 255 ? 255 : g);
            o[2] = (unsigned char)(b > 255 ? 255 : b); o[3] = (unsigned char)a;
        }
    }
    int ok = stbi_write_png_to_func(png_write_func, f->out, f->w, f->h, 4, rgba, f->w * 4);
    free(rgba);
    return ok && !ferror(f->out) ? 0 : -1;
}

static void write_layout(const Figure *f) {
    const char *lp = getenv("DPMEM_LAYOUT");
    if (!lp || !*lp || !f->path) return;
    FILE *o = fopen(lp, "a");
    if (!o) return;
    fprintf(o, "figure %s %d %d\n", f->path, f->w, f->h);
    for (int i = 0; i < f->n_boxes; i++) {
        const FigBox *b = &f->boxes[i];
        fprintf(o, "%s %.2f %.2f %.2f %.2f %s\n", b->kind == BOX_TEXT ? "text" : "mark", b->b.x0, b->b.y0, b->b.x1, b->b.y1, b->what);
    }
    fclose(o);
}

int fig_close(Figure *f, char *err, size_t errlen) {
    int rc = 0;
    if (f->failed) { snprintf(err, errlen, "out of memory while drawing"); rc = -1; }
    if (rc == 0 && f->path) {
        if (f->format == FIG_PNG) rc = write_png(f);
        else {
            cairo_destroy(f->cr);
            f->cr = NULL;
            cairo_surface_finish(f->surface);
            rc = cairo_surface_status(f->surface) ? -1 : 0;
        }
        if (f->out && !f->out_is_stdout) {
            if (fclose(f->out)) rc = -1;
        } else if (f->out && fflush(f->out)) rc = -1;
        f->out = NULL;
        if (rc == 0 && f->tmp && rename(f->tmp, f->path)) rc = -1;
        else if (rc == 0 && f->tmp) { free(f->tmp); f->tmp = NULL; }
        if (rc) snprintf(err, errlen, "%s: cannot write the %s", f->path, f->format == FIG_PNG ? "PNG" : f->format == FIG_SVG ? "SVG" : "PDF");
        else write_layout(f);
    }
    fig_discard(f);
    return rc;
}

/* ---- shapes --------------------------------------------------------------------------------- */

static void source(Figure *f, Rgb c) { cairo_set_source_rgb(f->cr, c.r / 255.0, c.g / 255.0, c.b / 255.0); }

static void stroke_style(Figure *f, Rgb c, double width_pt, int dash) {
    source(f, c);
    double w = fig_pt(f, width_pt);
    cairo_set_line_width(f->cr, w);
    cairo_set_line_join(f->cr, CAIRO_LINE_JOIN_ROUND);
    if (dash == 1) { double d[2] = { 4 * w, 2.5 * w }; cairo_set_dash(f->cr, d, 2, 0); cairo_set_line_cap(f->cr, CAIRO_LINE_CAP_BUTT); }
    else if (dash == 2) { double d[2] = { 0, 2.5 * w }; cairo_set_dash(f->cr, d, 2, 0); cairo_set_line_cap(f->cr, CAIRO_LINE_CAP_ROUND); }
    else { cairo_set_dash(f->cr, NULL, 0, 0); cairo_set_line_cap(f->cr, CAIRO_LINE_CAP_BUTT); }
}

void fig_rect(Figure *f, double x0, double y0, double x1, double y1, Rgb c) {
    if (!(x1 > x0) || !(y1 > y0)) return;
    source(f, c);
    cairo_rectangle(f->cr, x0, y0, x1 - x0, y1 - y0);
    cairo_fill(f->cr);
}

void fig_rect_outline(Figure *f, double x0, double y0, double x1, double y1, Rgb c, double width_pt) {
    stroke_style(f, c, width_pt, 0);
    cairo_rectangle(f->cr, x0, y0, x1 - x0, y1 - y0);
    cairo_stroke(f->cr);
}

void fig_line(Figure *f, double x0, double y0, double x1, double y1, Rgb c, double width_pt, int dash) {
    stroke_style(f, c, width_pt, dash);
    cairo_move_to(f->cr, x0, y0);
    cairo_line_to(f->cr, x1, y1);
    cairo_stroke(f->cr);
    cairo_set_dash(f->cr, NULL, 0, 0);
}

void fig_polyline(Figure *f, const double *xy, int n, Rgb c, double width_pt, int dash) {
    if (n < 2) return;
    stroke_style(f, c, width_pt, dash);
    cairo_move_to(f->cr, xy[0], xy[1]);
    for (int i = 1; i < n; i++) cairo_line_to(f->cr, xy[2 * i], xy[2 * i + 1]);
    cairo_stroke(f->cr);
    cairo_set_dash(f->cr, NULL, 0, 0);
}

void fig_polygon(Figure *f, const double *xy, int n, Rgb c) {
    if (n < 3) return;
    source(f, c);
    cairo_move_to(f->cr, xy[0], xy[1]);
    for (int i = 1; i < n; i++) cairo_line_to(f->cr, xy[2 * i], xy[2 * i + 1]);
    cairo_close_path(f->cr);
    cairo_fill(f->cr);
}

void fig_clip(Figure *f, double x0, double y0, double x1, double y1) {
    cairo_save(f->cr);
    cairo_rectangle(f->cr, x0, y0, x1 - x0, y1 - y0);
    cairo_clip(f->cr);
}
void fig_unclip(Figure *f) { cairo_restore(f->cr); }

void fig_hatch(Figure *f, double x0, double y0, double x1, double y1, Rgb c, double spacing_pt, double width_pt) {
    if (!(x1 > x0) || !(y1 > y0)) return;
    fig_clip(f, x0, y0, x1, y1);
    stroke_style(f, c, width_pt, 0);
    double s = fig_pt(f, spacing_pt), h = y1 - y0;
    for (double k = x0 - h; k < x1; k += s) {
        cairo_move_to(f->cr, k, y1);
        cairo_line_to(f->cr, k + h, y0);
    }
    cairo_stroke(f->cr);
    fig_unclip(f);
}

static void marker_path(cairo_t *cr, MarkerShape m, double x, double y, double r) {
    static const double pi = 3.14159265358979323846;
    int n = 0;
    double start = -pi / 2, inner = 0;
    switch (m) {
    case MK_CIRCLE: cairo_new_sub_path(cr); cairo_arc(cr, x, y, r * 0.9, 0, 2 * pi); cairo_close_path(cr); return;
    case MK_SQUARE: r *= 0.82; cairo_rectangle(cr, x - r, y - r, 2 * r, 2 * r); return;
    case MK_TRI_UP: n = 3; y += r * 0.15; break;
    case MK_TRI_DOWN: n = 3; start = pi / 2; y -= r * 0.15; break;
    case MK_TRI_LEFT: n = 3; start = pi; x += r * 0.15; break;
    case MK_TRI_RIGHT: n = 3; start = 0; x -= r * 0.15; break;
    case MK_DIAMOND: n = 4; break;
    case MK_PENTAGON: n = 5; r *= 0.95; break;
    case MK_HEXAGON: n = 6; r *= 0.92; start = 0; break;
    case MK_STAR: n = 5; inner = 0.45; r *= 1.1; break;
    case MK_PLUS: case MK_CROSS: {
        double t = r * 0.32, a = m == MK_CROSS ? pi / 4 : 0;
        /* a 12-corner cross, rotated for the X */
        const double px[12] = { -t, t, t, r, r, t, t, -t, -t, -r, -r, -t }, py[12] = { -r, -r, -t, -t, t, t, r, r, t, t, -t, -t };
        for (int i = 0; i < 12; i++) {
            double u = px[i] * cos(a) - py[i] * sin(a), v = px[i] * sin(a) + py[i] * cos(a);
            if (i == 0) cairo_move_to(cr, x + u, y + v); else cairo_line_to(cr, x + u, y + v);
        }
        cairo_close_path(cr);
        return;
    }
    default: n = 4; break;
    }
    int k = inner > 0 ? 2 * n : n;
    for (int i = 0; i < k; i++) {
        double rr = inner > 0 && (i & 1) ? r * inner : r, a = start + 2 * pi * i / k;
        if (i == 0) cairo_move_to(cr, x + rr * cos(a), y + rr * sin(a));
        else cairo_line_to(cr, x + rr * cos(a), y + rr * sin(a));
    }
    cairo_close_path(cr);
}

void fig_marker(Figure *f, MarkerShape m, double x, double y, double size_pt, Rgb fill, Rgb edge, int hollow, const char *what) {
    double r = fig_pt(f, size_pt) / 2;
    marker_path(f->cr, m, x, y, r);
    if (hollow) stroke_style(f, fill, size_pt * 0.16, 0);   /* no fill: a marker under it stays visible */
    else {
        source(f, fill);
        cairo_fill_preserve(f->cr);
        stroke_style(f, edge, size_pt * 0.09, 0);
    }
    cairo_stroke(f->cr);
    char rec[160];   /* a hollow marker's centre is white: say so, for whoever checks its colour */
    snprintf(rec, sizeof rec, "%s%s", hollow ? "hollow " : "", what ? what : "marker");
    fig_record(f, (Box){ x - r, y - r, x + r, y + r }, BOX_MARK, rec);
}

/* ---- text ----------------------------------------------------------------------------------- */

/* Valid UTF-8 without control characters; anything else becomes '?'. */
static void clean_utf8(char *out, size_t n, const char *s) {
    size_t k = 0;
    const unsigned char *p = (const unsigned char *)s;
    while (*p && k + 5 < n) {
        unsigned c = *p;
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        int ok = len > 0;
        uint32_t cp = len == 1 ? c : len == 2 ? c & 31 : len == 3 ? c & 15 : c & 7;
        for (int i = 1; ok && i < len; i++) {
            ok = (p[i] & 0xC0) == 0x80;
            cp = cp << 6 | (p[i] & 63);
        }
        if (ok) ok = !(len == 2 && cp < 0x80) && !(len == 3 && cp < 0x800) && !(len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) &&
                     !(cp >= 0xD800 && cp <= 0xDFFF) && cp >= 32 && cp != 127 && !(cp >= 0x80 && cp < 0xA0);
        if (!ok) { out[k++] = '?'; p++; continue; }
        memcpy(out + k, p, (size_t)len);
        k += (size_t)len; p += len;
    }
    out[k] = 0;
}

static void set_font(Figure *f, double size_pt, FontWeight wt) {
    cairo_set_font_face(f->cr, wt == FONT_BOLD ? face_bold : face_regular);
    cairo_set_font_size(f->cr, fig_fpt(f, size_pt));
}

double fig_text_w(Figure *f, double size_pt, FontWeight wt, const char *s) {
    char t[1024];
    clean_utf8(t, sizeof t, s);
    set_font(f, size_pt, wt);
    cairo_text_extents_t e;
    cairo_text_extents(f->cr, t, &e);
    return e.x_advance;
}

double fig_text_h(Figure *f, double size_pt) {
    set_font(f, size_pt, FONT_REGULAR);
    cairo_font_extents_t fe;
    cairo_font_extents(f->cr, &fe);
    return fe.ascent + fe.descent;
}

static Box text_at(Figure *f, double x, double y, int anchor, double size_pt, FontWeight wt, Rgb c, const char *s, int vertical) {
    char t[1024];
    clean_utf8(t, sizeof t, s);
    set_font(f, size_pt, wt);
    cairo_font_extents_t fe;
    cairo_text_extents_t te;
    cairo_font_extents(f->cr, &fe);
    cairo_text_extents(f->cr, t, &te);
    double tw = te.x_advance, th = fe.ascent + fe.descent;
    double bw = vertical ? th : tw, bh = vertical ? tw : th;
    int ha = anchor & 3, va = anchor & 12;
    double left = x - (ha == TA_CENTER ? bw / 2 : ha == TA_RIGHT ? bw : 0);
    double top = va == TA_TOP ? y : va == TA_MIDDLE ? y - bh / 2 : va == TA_BOTTOM ? y - bh : y - (vertical ? bh : fe.ascent);
    source(f, c);
    if (vertical) {
        cairo_save(f->cr);
        cairo_translate(f->cr, left + fe.ascent, top + bh);
        cairo_rotate(f->cr, -3.14159265358979323846 / 2);
        cairo_move_to(f->cr, 0, 0);
        cairo_show_text(f->cr, t);
        cairo_restore(f->cr);
    } else {
        cairo_move_to(f->cr, left, top + fe.ascent);
        cairo_show_text(f->cr, t);
    }
    Box b = { left, top, left + bw, top + bh };
    if (*t) fig_record(f, b, BOX_TEXT, t);
    return b;
}

Box fig_text(Figure *f, double x, double y, int anchor, double size_pt, FontWeight wt, Rgb c, const char *s) {
    return text_at(f, x, y, anchor, size_pt, wt, c, s, 0);
}
Box fig_text_rot(Figure *f, double x, double y, int anchor, double size_pt, FontWeight wt, Rgb c, const char *s) {
    return text_at(f, x, y, anchor, size_pt, wt, c, s, 1);
}

void fig_fit_text(Figure *f, char *out, size_t n, const char *s, double size_pt, FontWeight wt, double max_w) {
    char t[512];
    clean_utf8(t, sizeof t, s);
    snprintf(out, n, "%s", t);
    if (fig_text_w(f, size_pt, wt, out) <= max_w) return;
    size_t len = strlen(t);
    /* keep head and tail on character boundaries; drop from the middle until it fits */
    for (size_t drop = 1; drop < len; drop++) {
        size_t head = (len - drop) / 2, tail = len - drop - head;
        while (head > 0 && ((unsigned char)t[head] & 0xC0) == 0x80) head--;
        while (tail > 0 && ((unsigned char)t[len - tail] & 0xC0) == 0x80) tail--;
        snprintf(out, n, "%.*s\xE2\x80\xA6%s", (int)head, t, t + len - tail);
        if (fig_text_w(f, size_pt, wt, out) <= max_w) return;
    }
    snprintf(out, n, "\xE2\x80\xA6");
}

/* ---- recording and placement ---------------------------------------------------------------- */

void fig_record(Figure *f, Box b, BoxKind kind, const char *what) {
    if (f->n_boxes == f->cap_boxes) {
        int cap = f->cap_boxes ? 2 * f->cap_boxes : 64;
        FigBox *nb = realloc(f->boxes, (size_t)cap * sizeof *nb);
        if (!nb) { f->failed = 1; return; }
        f->boxes = nb;
        f->cap_boxes = cap;
    }
    char *w = strdup(what ? what : "");
    if (!w) { f->failed = 1; return; }
    for (char *q = w; *q; q++) if (*q == '\n') *q = ' ';
    f->boxes[f->n_boxes++] = (FigBox){ b, kind, w };
}

static int box_overlap(Box a, Box b) { return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1; }

int fig_box_free(const Figure *f, Box b, Box bounds) {
    if (b.x0 < bounds.x0 || b.y0 < bounds.y0 || b.x1 > bounds.x1 || b.y1 > bounds.y1) return 0;
    for (int i = 0; i < f->n_boxes; i++)
        if (box_overlap(b, f->boxes[i].b)) return 0;
    return 1;
}

int fig_label_near(Figure *f, double px, double py, double gap, Box bounds, double size_pt, FontWeight wt, Rgb c, const char *s) {
    double w = fig_text_w(f, size_pt, wt, s), h = fig_text_h(f, size_pt);
    /* directions: right, left, above, below, then the four diagonals */
    static const double dx[8] = { 1, -1, 0, 0, 1, 1, -1, -1 }, dy[8] = { 0, 0, -1, 1, -1, 1, -1, 1 };
    static const double ring[] = { 1, 2.2, 3.6, 5.2, 7, 9.5, 12.5, 16, 20, 25 };
    for (size_t r = 0; r < sizeof ring / sizeof ring[0]; r++)
        for (int d = 0; d < 8; d++) {
            double dist = gap * ring[r];
            double cx = px + dx[d] * (dist + w / 2), cy = py + dy[d] * (dist + h / 2);
            Box b = { cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2 };
            if (!fig_box_free(f, b, bounds)) continue;
            int leader = r > 0;
            if (leader) {
                /* from the point towards the nearest point of the label's box, stopping short of both */
                double qx = px < b.x0 ? b.x0 : px > b.x1 ? b.x1 : px, qy = py < b.y0 ? b.y0 : py > b.y1 ? b.y1 : py;
                double len = hypot(qx - px, qy - py), s0 = gap * 0.8 / (len > 0 ? len : 1), s1 = 1 - fig_pt(f, 1.5) / (len > 0 ? len : 1);
                if (s1 > s0) fig_line(f, px + (qx - px) * s0, py + (qy - py) * s0, px + (qx - px) * s1, py + (qy - py) * s1, RGB(120, 120, 120), 0.6, 0);
            }
            fig_rect(f, b.x0 - 1, b.y0, b.x1 + 1, b.y1, RGB(255, 255, 255));   /* a halo over grid and lines */
            fig_text(f, b.x0, b.y0, TA_LEFT | TA_TOP, size_pt, wt, c, s);
            return leader;
        }
    fig_text(f, px + gap, py, TA_LEFT | TA_MIDDLE, size_pt, wt, c, s);   /* no room anywhere: beside it */
    return -1;
}
