/* rope.h — rotary position embeddings as transformers computes them for Gemma 4: "default"
 * (all D/2 pairs) and "proportional" (the first floor(partial*D/2) pairs, frequencies over the
 * full D), rotate-half pairing (i, i + D/2). */
#ifndef G4_ROPE_H
#define G4_ROPE_H

#include "io/hfconfig.h"

/* inv_freq [D/2] in float32 exactly as transformers builds it; malloc'ed. */
float *g4_rope_inv_freq(const g4_rope_params *rp, int D);
/* cs [D]: cos of pos*inv_freq[i] in [0, D/2), sin in [D/2, D). */
void g4_rope_table(const float *inv_freq, int D, int pos, float *cs);
/* Rotates one head x [D] in place with the table from g4_rope_table. */
void g4_rope_apply(float *x, const float *cs, int D);

/* --numerics ggml: llama.cpp's RoPE cache (ggml_rope_cache_init) for one position, same layout
 * as g4_rope_table; base is the layer type's rope theta. */
void g4_rope_table_ggml(float base, const float *inv_freq, int D, int pos, float *cs);
/* ... and ggml's NEOX rotation (rotate_pairs<float>, with its FMA contractions). */
void g4_rope_apply_ggml(float *x, const float *cs, int D);

#endif
