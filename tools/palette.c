/* palette.c — see palette.h. Category colours follow the fixed category order of dpmem_read.h. */
#include "palette.h"

#include <string.h>

#include "dpmem_read.h"

/* params, grads, optimizer, activations, per_sample_grads, norms, ghost, bk, lora, noise, workspace,
   input, untracked: Tableau-like, chosen so that neighbours in the stack differ in hue. */
static const Rgb category_table[] = {
    { 78, 121, 167 }, { 242, 142, 43 }, { 89, 161, 79 }, { 225, 87, 89 }, { 176, 122, 161 },
    { 118, 183, 178 }, { 237, 201, 72 }, { 255, 157, 167 }, { 156, 117, 95 }, { 31, 119, 180 },
    { 23, 190, 207 }, { 188, 189, 34 }, { 150, 150, 150 },
};

static uint32_t fnv1a(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

/* A saturated, mid-light colour from a hash (HSV with s = 0.55, v = 0.85). */
static Rgb hashed_colour(const char *name) {
    uint32_t h = fnv1a(name);
    int sector = (int)(h % 360) / 60, f = (int)(h % 60);
    int v = 217, p = 98, q = v - (v - p) * f / 60, t = p + (v - p) * f / 60;
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
    return k >= 0 ? category_table[k] : hashed_colour(name);
}

Rgb buffer_colour(const char *tag) {
    const char *slash = strchr(tag, '/');
    char cat[64];
    size_t len = slash ? (size_t)(slash - tag) : strlen(tag);
    if (len >= sizeof cat) len = sizeof cat - 1;
    memcpy(cat, tag, len); cat[len] = 0;
    Rgb c = category_colour(cat), h = hashed_colour(tag);
    return RGB((uint8_t)((2 * c.r + h.r) / 3), (uint8_t)((2 * c.g + h.g) / 3), (uint8_t)((2 * c.b + h.b) / 3));
}

/* Scopes: the DP-SGD phases get fixed, light colours (the lane sits above the stacked areas and should
   not compete with them); anything else is hashed. */
Rgb scope_colour(const char *name) {
    static const struct { const char *name; Rgb c; } fixed[] = {
        { "step", { 200, 200, 200 } },     { "forward", { 161, 201, 244 } },
        { "backward", { 255, 180, 130 } }, { "clip", { 141, 229, 161 } },
        { "per_sample_norms", { 208, 187, 255 } }, { "noise", { 255, 159, 155 } },
        { "optimizer_step", { 222, 187, 155 } }, { "data", { 250, 176, 228 } },
        { "eval", { 207, 207, 207 } },
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (strcmp(name, fixed[i].name) == 0) return fixed[i].c;
    Rgb c = hashed_colour(name);
    return RGB((uint8_t)((c.r + 255) / 2), (uint8_t)((c.g + 255) / 2), (uint8_t)((c.b + 255) / 2));
}
