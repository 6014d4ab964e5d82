/* rope.c — RoPE tables and rotation (see rope.h); mirrors _compute_default_rope_parameters /
 * _compute_proportional_rope_parameters and apply_rotary_pos_emb in transformers. */
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

void g4_rope_table(const float *inv_freq, int D, int pos, float *cs) {
    const int half = D / 2;
    for (int i = 0; i < half; i++) {
        float a = (float)pos * inv_freq[i];   /* float32 product, as torch computes freqs */
        cs[i] = cosf(a);
        cs[half + i] = sinf(a);
    }
}

void g4_rope_apply(float *x, const float *cs, int D) {
    const int half = D / 2;
    const float *c = cs, *s = cs + half;
    for (int i = 0; i < half; i++) {
        float x1 = x[i], x2 = x[i + half];
        x[i] = x1 * c[i] - x2 * s[i];          /* x*cos + rotate_half(x)*sin, first half  */
        x[i + half] = x2 * c[i] + x1 * s[i];   /* second half */
    }
}
