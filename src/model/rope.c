/* rope.c — RoPE inverse frequencies from the config (see rope.h); mirrors
 * _compute_default_rope_parameters / _compute_proportional_rope_parameters in transformers. The
 * per-position table and the rotation are kernels (kernels/cpu/rope.c). */
#include "model/rope.h"

#include <math.h>
#include <stdlib.h>

float *g4_rope_inv_freq(const g4_rope_params *rp, int D) {
    const int half = D / 2;
    float *f = calloc((size_t)half, sizeof(float));
    if (!f) return NULL;
    /* python: int(partial * D // 2) — floor of the float product over 2 */
    int n_rot = rp->type == G4_ROPE_PROPORTIONAL ? (int)floor(rp->partial_rotary_factor * D / 2.0) : half;
    if (n_rot > half) n_rot = half;
    for (int i = 0; i < n_rot; i++) {
        /* torch: 1.0 / (base ** (arange(0, .., 2).float() / D)), all in float32 */
        float e = (float)(2 * i) / (float)D;
        f[i] = 1.0f / powf((float)rp->theta, e);
        if (rp->type == G4_ROPE_PROPORTIONAL) f[i] /= (float)rp->factor;
    }
    return f;
}
