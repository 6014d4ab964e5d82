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

/* --numerics ggml: ggml_rope_cache_init as llama.cpp runs it (ext_factor 0, freq_scale 1,
 * mscale 1): theta starts at pos and is multiplied by theta_scale = powf(base, -2.0f/D) once per
 * pair in float; pairs that transformers leaves unrotated (inv_freq 0: the proportional RoPE of
 * full layers) get llama.cpp's converter's freq factor 1e30 (theta / 1e30, cos 1, sin ~0). */
void g4_rope_table_ggml(float base, const float *inv_freq, int D, int pos, float *cs) {
    const int half = D / 2;
    const float theta_scale = powf(base, -2.0f / (float)D);
    float theta = (float)pos;
    for (int i = 0; i < half; i++) {
        const float t = inv_freq[i] == 0.0f ? theta / 1e30f : theta;
        sincosf(t, &cs[half + i], &cs[i]);
        theta *= theta_scale;
    }
}

/* rotate_pairs<float> (GGML_ROPE_TYPE_NEOX) as GCC contracts it in ggml-cpu (disassembled at
 * d32676d7): x0*cos - x1*sin and x0*sin + x1*cos, each with one FMA over the other rounded product. */
void g4_rope_apply_ggml(float *x, const float *cs, int D) {
    const int half = D / 2;
    const float *c = cs, *s = cs + half;
    for (int i = 0; i < half; i++) {
        const float x0 = x[i], x1 = x[i + half];
        x[i] = fmaf(x0, c[i], -(x1 * s[i]));
        x[i + half] = fmaf(x0, s[i], x1 * c[i]);
    }
}
