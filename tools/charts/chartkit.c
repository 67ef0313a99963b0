/* chartkit.c — see chartkit.h. */
#include "chartkit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "palette.h"

int ck_open(Figure *f, const char *path, FigFormat fmt, const FigSpec *spec, int def_w, int def_h, int min_w, int min_h,
            char *err, size_t errlen) {
    int w, h;
    if (figspec_pixels(spec, def_w, def_h, min_w, min_h, &w, &h, err, errlen)) return -1;
    return fig_open(f, path, fmt, w, h, spec->dpi, spec->font_scale, err, errlen);
}

double ck_title(Figure *f, const ChartSet *cs, const char *title, const char *extra) {
    double pad = fig_pt(f, 8);
    char sum[600] = "", line[800], fitted[800];
    double ts = CK_TITLE;   /* a column's width: a smaller type (to 8.5 pt), then cut; never past the edge */
    while (ts > 8.5 && fig_text_w(f, ts, FONT_BOLD, title) > f->w - 2 * pad) ts -= 0.5;
    fig_fit_text(f, fitted, sizeof fitted, title, ts, FONT_BOLD, f->w - 2 * pad);
    Box t = fig_text(f, pad, fig_pt(f, 6), TA_LEFT | TA_TOP, ts, FONT_BOLD, COLOUR_TEXT, fitted);
    RunMeta *m = malloc((size_t)(cs->n > 0 ? cs->n : 1) * sizeof *m);
    int k = 0;
    for (int i = 0; m && i < cs->n; i++)
        if (cs->run[i].log) m[k++] = cs->run[i].meta;
    if (m && k) runmeta_summary(m, k, sum, sizeof sum);
    free(m);
    snprintf(line, sizeof line, "%s%s%s", sum, *sum && extra && *extra ? " \xC2\xB7 " : "", extra ? extra : "");
    if (!*line) return t.y1 + fig_pt(f, 4);
    double avail = f->w - 2 * pad;
    if (*sum && extra && *extra && fig_text_w(f, CK_SUB, FONT_REGULAR, line) > avail) {
        /* too long for one line: the configuration, then what the chart shows, each on its own line
           (cut from the middle only if one alone is still too long) */
        fig_fit_text(f, fitted, sizeof fitted, sum, CK_SUB, FONT_REGULAR, avail);
        Box s1 = fig_text(f, pad, t.y1 + fig_pt(f, 1), TA_LEFT | TA_TOP, CK_SUB, FONT_REGULAR, COLOUR_MUTED, fitted);
        fig_fit_text(f, fitted, sizeof fitted, extra, CK_SUB, FONT_REGULAR, avail);
        Box s2 = fig_text(f, pad, s1.y1 + fig_pt(f, 1), TA_LEFT | TA_TOP, CK_SUB, FONT_REGULAR, COLOUR_MUTED, fitted);
        return s2.y1 + fig_pt(f, 4);
    }
    fig_fit_text(f, fitted, sizeof fitted, line, CK_SUB, FONT_REGULAR, avail);
    Box s = fig_text(f, pad, t.y1 + fig_pt(f, 1), TA_LEFT | TA_TOP, CK_SUB, FONT_REGULAR, COLOUR_MUTED, fitted);
    return s.y1 + fig_pt(f, 4);
}

double ck_method_legend(Figure *f, const ChartSet *cs, double x, double y, double max_w) {
    double h = fig_text_h(f, CK_LABEL), ms = 7, gap = fig_pt(f, 12), cx = x;
    char seen[32][64];
    int ns = 0;
    for (int i = 0; i < cs->n && ns < 32; i++) {
        const char *m = cs->run[i].method;
        int dup = 0;
        for (int k = 0; k < ns && !dup; k++) dup = !strcmp(seen[k], m);
        if (dup) continue;
        snprintf(seen[ns++], sizeof seen[0], "%s", m);
        double w = fig_pt(f, ms) + fig_pt(f, 3) + fig_text_w(f, CK_LABEL, FONT_REGULAR, m);
        if (cx > x && cx + w > x + max_w) { cx = x; y += h + fig_pt(f, 2); }
        MethodStyle st = method_style(m);
        fig_marker(f, st.marker, cx + fig_pt(f, ms) / 2, y + h / 2, ms, st.colour, COLOUR_BG, 0, m);
        fig_text(f, cx + fig_pt(f, ms) + fig_pt(f, 3), y, TA_LEFT | TA_TOP, CK_LABEL, FONT_REGULAR, st.colour, m);
        cx += w + gap;
    }
    return y + h + fig_pt(f, 4);
}

double ck_slot_fs(Figure *f, const char *const *names, int n, double slot) {
    int upright = 0;
    double fs = CK_LABEL;
    for (int i = 0; i < n; i++)
        if (fig_text_w(f, CK_LABEL, FONT_REGULAR, names[i]) > slot - fig_pt(f, 3)) upright = 1;
    /* upright labels side by side: a type no taller than a slot, so that neighbours never overlap */
    while (upright && fs > 4.5 && fig_text_h(f, fs) > slot * 0.98) fs -= 0.5;
    return fs;
}

double ck_slot_labels(Figure *f, const char *const *names, const double *cx, int n, double slot, double y, int draw) {
    int upright = 0;
    double longest = 0, fs = ck_slot_fs(f, names, n, slot);
    for (int i = 0; i < n; i++)
        if (fig_text_w(f, CK_LABEL, FONT_REGULAR, names[i]) > slot - fig_pt(f, 3)) upright = 1;
    for (int i = 0; i < n; i++) {
        double w = fig_text_w(f, fs, FONT_REGULAR, names[i]);
        if (w > longest) longest = w;
    }
    double maxlen = fig_pt(f, 110);
    if (longest > maxlen) longest = maxlen;
    if (!draw) return fig_pt(f, 4) + (upright ? longest : fig_text_h(f, fs));
    for (int i = 0; i < n; i++) {
        char t[160];
        fig_fit_text(f, t, sizeof t, names[i], fs, FONT_REGULAR, upright ? maxlen : slot);
        if (upright) fig_text_rot(f, cx[i], y + fig_pt(f, 4), TA_CENTER | TA_TOP, fs, FONT_REGULAR, COLOUR_TEXT, t);
        else fig_text(f, cx[i], y + fig_pt(f, 4), TA_CENTER | TA_TOP, fs, FONT_REGULAR, COLOUR_TEXT, t);
    }
    return fig_pt(f, 4) + (upright ? longest : fig_text_h(f, fs));
}

void ck_oom_bar(Figure *f, double x0, double y0, double x1, double y1, const char *run) {
    fig_rect(f, x0, y0, x1, y1, COLOUR_BG);
    fig_hatch(f, x0, y0, x1, y1, COLOUR_OOM, 3.5, 0.8);
    fig_rect_outline(f, x0, y0, x1, y1, COLOUR_OOM, 1.0);
    Box b = fig_text(f, (x0 + x1) / 2, y0 - fig_pt(f, 2), TA_CENTER | TA_BOTTOM, CK_LABEL, FONT_BOLD, COLOUR_OOM, "OOM");
    char what[160];
    snprintf(what, sizeof what, "oom %s", run);
    fig_record(f, (Box){ x0, b.y0, x1, y1 }, BOX_MARK, what);
}

/* The note's lines within w: words wrapped at spaces, a word longer than a line cut from its middle.
   Each line into lines[k] (at most max); returns how many it takes. */
static int note_lines(Figure *f, const char *text, double w, char lines[][800], int max) {
    int n = 0;
    const char *p = text;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        char line[800] = "";
        size_t len = 0;
        const char *q = p;
        while (*q) {   /* add words while the line fits */
            const char *e = strchr(q, ' ');
            size_t wl = e ? (size_t)(e - q) : strlen(q);
            char t[800];
            size_t sep = len ? 1 : 0, take = wl < sizeof t - 1 - len - sep ? wl : sizeof t - 1 - len - sep;
            if (len + sep >= sizeof t - 1) break;   /* (a line of 800 bytes: never wider than a page) */
            memcpy(t, line, len);
            if (sep) t[len] = ' ';
            memcpy(t + len + sep, q, take);
            t[len + sep + take] = 0;
            if (len && fig_text_w(f, CK_NOTE, FONT_REGULAR, t) > w) break;
            memcpy(line, t, len + sep + take + 1);
            len = strlen(line);
            q += wl;
            while (*q == ' ') q++;
        }
        if (n < max) fig_fit_text(f, lines[n], sizeof lines[0], line, CK_NOTE, FONT_REGULAR, w);
        n++;
        p = q;
    }
    return n;
}

int ck_note_lines(Figure *f, const char *text) {
    char lines[8][800];
    return text && *text ? note_lines(f, text, f->w - 2 * fig_pt(f, 8), lines, 8) : 0;
}

void ck_note(Figure *f, double y, const char *text) {
    if (!text || !*text) return;
    char fitted[800];
    fig_fit_text(f, fitted, sizeof fitted, text, CK_NOTE, FONT_REGULAR, f->w - 2 * fig_pt(f, 8));
    fig_text(f, fig_pt(f, 8), y, TA_LEFT | TA_BOTTOM, CK_NOTE, FONT_REGULAR, COLOUR_MUTED, fitted);
}

void ck_note_wrapped(Figure *f, double y, const char *text, int max_lines) {
    if (!text || !*text) return;
    char lines[8][800];
    int n = note_lines(f, text, f->w - 2 * fig_pt(f, 8), lines, 8);
    if (max_lines > 8) max_lines = 8;
    if (n > max_lines) n = max_lines;
    double lh = fig_text_h(f, CK_NOTE);
    for (int i = 0; i < n; i++)   /* the last line at y, the others above it */
        fig_text(f, fig_pt(f, 8), y - (n - 1 - i) * lh, TA_LEFT | TA_BOTTOM, CK_NOTE, FONT_REGULAR, COLOUR_MUTED, lines[i]);
}
