/* palette.c — see palette.h. Category colours follow the fixed category order of dpmem_read.h. */
#include "palette.h"

#include <stdio.h>
#include <string.h>

#include "read/dpmem_read.h"

/* params, grads, optimizer, activations, per_sample_grads, norms, ghost, bk, lora, noise, workspace,
   input, untracked: the Tableau hues the tools always used (blue params, orange grads, red
   activations...), mixed 42% towards white so that no method colour can be read as a category. */
static const Rgb category_table[] = {
    { 152, 177, 204 }, { 247, 189, 132 }, { 159, 200, 153 }, { 238, 158, 159 }, { 209, 178, 200 },
    { 176, 213, 210 }, { 245, 224, 149 }, { 255, 198, 204 }, { 198, 175, 162 }, { 193, 167, 217 },
    { 120, 217, 227 }, { 216, 217, 127 }, { 194, 194, 194 },
};

static uint32_t fnv1a(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

/* A light colour from a hash (HSV with s = 0.4, v = 0.9): the same name, the same colour. */
static Rgb hashed_light(uint32_t h) {
    int sector = (int)(h % 360) / 60, f = (int)(h % 60);
    int v = 230, p = 138, q = v - (v - p) * f / 60, t = p + (v - p) * f / 60;
    switch (sector) {
    case 0: return RGB(v, t, p);
    case 1: return RGB(q, v, p);
    case 2: return RGB(p, v, t);
    case 3: return RGB(p, q, v);
    case 4: return RGB(t, p, v);
    default: return RGB(v, p, q);
    }
}

Rgb category_colour(const char *name) {
    int k = dpmem_known_category(name);
    return k >= 0 ? category_table[k] : hashed_light(fnv1a(name));
}

Rgb buffer_colour(int i) {
    /* ColorBrewer Set3: twelve light colours that differ from each other */
    static const Rgb t[] = { { 141, 211, 199 }, { 255, 237, 111 }, { 190, 186, 218 }, { 251, 128, 114 }, { 128, 177, 211 },
                             { 253, 180, 98 },  { 179, 222, 105 }, { 252, 205, 229 }, { 204, 235, 197 }, { 188, 128, 189 },
                             { 255, 255, 179 }, { 217, 217, 217 } };
    return i < 12 ? t[i] : hashed_light((uint32_t)i * 2654435761u);
}

/* Scopes: the DP-SGD phases get fixed, light colours (the lane sits above the stacked areas and should
   not compete with them), each at least 15 CIE76 from every category's colour and 12 from each other
   (a forward band must not read as params, nor noise as activations); anything else is hashed. */
Rgb scope_colour(const char *name) {
    static const struct { const char *name; Rgb c; } fixed[] = {
        { "step", { 240, 225, 210 } },     { "forward", { 165, 210, 255 } },
        { "backward", { 240, 195, 165 } }, { "clip", { 150, 240, 165 } },
        { "per_sample_norms", { 240, 180, 255 } }, { "noise", { 255, 180, 225 } },
        { "optimizer_step", { 225, 210, 165 } }, { "data", { 255, 210, 255 } },
        { "eval", { 240, 225, 240 } }, { "model_creation", { 210, 225, 255 } },
        { "loss", { 210, 240, 165 } },
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (strcmp(name, fixed[i].name) == 0) return fixed[i].c;
    Rgb c = hashed_light(fnv1a(name));
    return RGB((uint8_t)((c.r + 255) / 2), (uint8_t)((c.g + 255) / 2), (uint8_t)((c.b + 255) / 2));
}

/* ---- methods -------------------------------------------------------------------------------- */

static const struct { const char *name; Rgb c; MarkerShape m; } methods[] = {
    /* Okabe-Ito (vanilla a dark grey, lora Tol's indigo): the six of the suite */
    { "vanilla", { 51, 51, 51 }, MK_CIRCLE },      { "dpsgd", { 213, 94, 0 }, MK_SQUARE },
    { "ghost", { 0, 114, 178 }, MK_TRI_UP },       { "flash", { 0, 158, 115 }, MK_DIAMOND },
    { "mixed", { 170, 51, 119 }, MK_TRI_DOWN },    { "lora", { 51, 34, 136 }, MK_HEXAGON },
    /* the other norm x clip combinations (Paul Tol's muted set) */
    { "ghost+bk", { 140, 81, 10 }, MK_TRI_RIGHT }, { "flash+twopass", { 17, 119, 51 }, MK_PENTAGON },
    { "direct+twopass", { 153, 153, 51 }, MK_STAR }, { "mixed+twopass", { 136, 34, 85 }, MK_TRI_LEFT },
};
/* names that are the same method as one above */
static const struct { const char *alias, *name; } aliases[] = {
    { "ghost+twopass", "ghost" }, { "direct+bk", "dpsgd" }, { "flash+bk", "flash" }, { "mixed+bk", "mixed" },
    { "dpsgd+bk", "dpsgd" }, { "dpsgd+twopass", "direct+twopass" }, { "direct", "dpsgd" }, { "lora+mixed+bk", "lora" },
};
static const Rgb fallback_colour[] = { { 0, 0, 0 }, { 0, 68, 136 }, { 238, 119, 51 }, { 204, 51, 17 }, { 85, 85, 85 } };
static const MarkerShape fallback_marker[] = { MK_CROSS, MK_PLUS, MK_STAR, MK_PENTAGON, MK_TRI_LEFT, MK_TRI_RIGHT, MK_SQUARE };

MethodStyle method_style(const char *method) {
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcmp(method, aliases[i].alias)) { method = aliases[i].name; break; }
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (!strcmp(method, methods[i].name)) return (MethodStyle){ methods[i].c, methods[i].m, 1 };
    uint32_t h = fnv1a(method);
    return (MethodStyle){ fallback_colour[h % 5], fallback_marker[(h / 5) % 7], 0 };
}

void method_of_log(const DpmemLog *L, const char *run, char *out, size_t n) {
    const char *m = dpmem_log_meta(L, "config.method");
    if (!m || !*m) { snprintf(out, n, "%s", run); return; }   /* not a method: keyed by the whole name */
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcmp(m, aliases[i].alias)) { m = aliases[i].name; break; }
    snprintf(out, n, "%s", m);
}
