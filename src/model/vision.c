/* vision.c — Gemma 4 unified's vision embedder (placeholder while the loader grows). */
#include "gemma4c.h"

g4_status g4_image_embed(const g4_model *m, const g4_image *im, float *out) {
    (void)m; (void)im; (void)out;
    return g4_fail(G4_ERR_INPUT, "vision embedder not implemented");
}
