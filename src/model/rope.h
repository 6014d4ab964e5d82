/* rope.h — rotary position embeddings' inverse frequencies as transformers computes them for
 * Gemma 4: "default" (all D/2 pairs) and "proportional" (the first floor(partial*D/2) pairs,
 * frequencies over the full D), rotate-half pairing (i, i + D/2). */
#ifndef G4_ROPE_H
#define G4_ROPE_H

#include "io/hfconfig.h"
#include "kernels/kernels.h"

/* inv_freq [D/2] in float32 exactly as transformers builds it; malloc'ed. */
float *g4_rope_inv_freq(const g4_rope_params *rp, int D);
/* The table of one position and the rotation (exact, and --numerics ggml's) are kernels:
 * kernels.h g4_rope_table / g4_rope_apply and the table's rope_table / rope_apply. */

#endif
