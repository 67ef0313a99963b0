/* palette.h — the colours of every picture the tools draw, the same in every picture and every
   results folder:

   - categories (params, grads, activations, ...): light tints (CIE L* >= 70), a fixed table in the
     categories' fixed order (and comm), a stable colour from a hash of the name for the others;
     stacked areas and bars are drawn in them; every two fixed ones distinguishable (palette.c says
     how far apart, under normal and simulated colour-blind vision);
   - methods (vanilla, dpsgd, ghost, flash, mixed, lora and the norm+clip combinations such as
     ghost+bk or flash+twopass), keyed by the method's NAME, never by a run's position: darker
     colours from the Okabe-Ito and Paul Tol colour-blind-safe sets, each with its own marker shape.
     The six main methods stay at least 17 CIE76 units apart under normal vision and simulated
     deuteranopia, protanopia and tritanopia (Machado et al. 2009), and every method colour at least
     14 from every category colour (tests/test_tools_charts.c checks both). Unknown names get a
     stable colour and marker from a fallback list, chosen by a hash of the name;
   - scopes (the timeline's phase bands) and the buffers of --by name: their own light colours.

   A method's marker is what tells two methods apart where colours alone would not (print, some
   colour blindness), so every chart that shows a method shows its marker. */
#ifndef PALETTE_H
#define PALETTE_H

#include <stddef.h>

#include "figure.h"
#include "read/dpmem_read.h"

Rgb category_colour(const char *name);
Rgb scope_colour(const char *name);
/* The i-th of n buffers of a --by name stack: distinct light colours (not tied to the category:
   buffers of one category must still differ). */
Rgb buffer_colour(int i);

typedef struct { Rgb colour; MarkerShape marker; int known; } MethodStyle;
/* The style of a method by name: "ghost+twopass" is "ghost" (the same method), "direct+bk" is
   "dpsgd", "flash+bk" is "flash", "mixed+bk" is "mixed". */
MethodStyle method_style(const char *method);
/* The method a log ran, as the palette names it: its META config.method (the trainers write it:
   "ghost+twopass" is "ghost", "lora+mixed+bk" "lora"), never read from its run name (a program's
   "ghost-T1024" is not the DP method ghost); without config.method the run name itself, which is a
   method only when it is exactly one. */
void method_of_log(const DpmemLog *L, const char *run, char *out, size_t n);

#define COLOUR_BG      RGB(255, 255, 255)
#define COLOUR_AXIS    RGB(60, 60, 60)
#define COLOUR_GRID    RGB(228, 228, 228)
#define COLOUR_TEXT    RGB(20, 20, 20)
#define COLOUR_MUTED   RGB(100, 100, 100)
#define COLOUR_PEAK    RGB(200, 0, 0)
#define COLOUR_SNAP    RGB(40, 40, 40)
#define COLOUR_OTHER   RGB(190, 190, 190)   /* "other" series */
#define COLOUR_UNKNOWN RGB(120, 120, 120)   /* "?": tags whose STRING the log lost */
#define COLOUR_OOM     RGB(178, 24, 43)     /* OOM hatching and label */
/* The timeline's device-used line: dark violet, drawn over the light areas. A green of 0 is out of
   reach of every category, buffer and scope colour, so no series can be mistaken for it. */
#define COLOUR_DEVICE  RGB(110, 0, 150)

#endif
