/* palette.c — see palette.h. Category colours follow the fixed category order of dpmem_read.h. */
#include "palette.h"

#include <stdio.h>
#include <string.h>

#include "read/dpmem_read.h"

/* params, grads, optimizer, activations, per_sample_grads, norms, ghost, bk, lora, noise, workspace,
   input, untracked: light tints of the hues the tools always used (blue params, orange grads, green
   optimizer, red activations...), moved (issue 49) until every two of them, comm included, are at
   least 10 CIEDE2000 apart, and those stacked next to each other (and comm, workspace) at least 5
   under simulated deuteranopia and protanopia (Machado et al. 2009), none read as a method's colour
   (14 CIE76 under normal vision and each simulation): tests/test_tools_charts.c checks it all. */
static const Rgb category_table[] = {
    { 120, 181, 253 }, { 217, 164, 109 }, { 123, 202, 167 }, { 255, 150, 160 }, { 210, 158, 180 },
    { 173, 204, 213 }, { 255, 211, 143 }, { 250, 203, 234 }, { 204, 174, 165 }, { 207, 154, 232 },
    { 128, 249, 234 }, { 223, 215, 125 }, { 194, 194, 194 },
};
/* categories the kit does not fix but the trainers use: comm (the --zero 3 gathers and buckets) */
static const struct { const char *name; Rgb c; } category_more[] = { { "comm", { 59, 225, 254 } } };

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
    if (k >= 0) return category_table[k];
    for (size_t i = 0; i < sizeof category_more / sizeof category_more[0]; i++)
        if (!strcmp(name, category_more[i].name)) return category_more[i].c;
    return hashed_light(fnv1a(name));
}

Rgb buffer_colour(int i) {
    /* ColorBrewer Set3: twelve light colours that differ from each other */
    static const Rgb t[] = { { 141, 211, 199 }, { 255, 237, 111 }, { 190, 186, 218 }, { 251, 128, 114 }, { 128, 177, 211 },
                             { 253, 180, 98 },  { 179, 222, 105 }, { 252, 205, 229 }, { 204, 235, 197 }, { 188, 128, 189 },
                             { 255, 255, 179 }, { 217, 217, 217 } };
    return i < 12 ? t[i] : hashed_light((uint32_t)i * 2654435761u);
}

/* Scopes: every phase the trainers and dpmem.torch open gets a fixed, light colour (the lane sits above
   the stacked areas and should not compete with them): every two at least 10 CIEDE2000 apart, those
   that touch in a timeline (step and each phase inside it, phases one after the other) at least 5
   under simulated deuteranopia and protanopia, each at least 15 CIE76 from every category's colour
   (a forward band must not read as params, nor noise as activations); anything else is hashed. */
Rgb scope_colour(const char *name) {
    static const struct { const char *name; Rgb c; } fixed[] = {
        { "step", { 249, 219, 219 } }, { "data", { 233, 233, 255 } }, { "forward", { 85, 202, 253 } },
        { "loss", { 203, 232, 157 } }, { "backward", { 252, 167, 137 } }, { "clip", { 139, 255, 178 } },
        { "per_sample_norms", { 255, 192, 255 } }, { "second_backward", { 115, 206, 207 } },
        { "noise", { 253, 159, 199 } }, { "optimizer_step", { 196, 189, 134 } }, { "zero_grad", { 250, 208, 176 } },
        { "model_creation", { 190, 182, 213 } }, { "dp_setup", { 231, 255, 224 } },
        { "checkpoint_load", { 249, 241, 219 } }, { "checkpoint_save", { 180, 202, 173 } },
        { "recompute", { 194, 255, 250 } }, { "allreduce", { 180, 180, 255 } }, { "all_gather", { 255, 186, 187 } },
        { "reduce_scatter", { 177, 214, 255 } }, { "eval", { 234, 249, 250 } },
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
