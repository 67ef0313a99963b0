/* palette.h — the colours of categories and scopes, the same in every picture the tools draw: a
   fixed table for the known names, a stable colour from a hash of the name for the others. */
#ifndef PALETTE_H
#define PALETTE_H

#include "raster.h"

Rgb category_colour(const char *name);
Rgb scope_colour(const char *name);
/* A buffer (a whole tag, "category/name"): its category's colour shifted by a hash of the name, so
   that two buffers of one category differ but stay near their category. */
Rgb buffer_colour(const char *tag);

#define COLOUR_BG     RGB(255, 255, 255)
#define COLOUR_AXIS   RGB(60, 60, 60)
#define COLOUR_GRID   RGB(228, 228, 228)
#define COLOUR_TEXT   RGB(20, 20, 20)
#define COLOUR_MUTED  RGB(110, 110, 110)
#define COLOUR_PEAK   RGB(200, 0, 0)
#define COLOUR_SNAP   RGB(40, 40, 40)
/* The timeline's device-used line: dark violet, drawn over the mid-light areas. A green of 0 is out of
   reach of every category, buffer and scope colour (their green channels are all 87 or more), so no
   series can be mistaken for it. */
#define COLOUR_DEVICE RGB(110, 0, 150)

#endif
