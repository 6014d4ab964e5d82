/* rope.c — RoPE kernels: the cos/sin table of one position and the rotation of one head, as
 * transformers computes them (apply_rotary_pos_emb, rotate-half pairs) and as llama.cpp's CPU
 * backend does (--numerics ggml). The inverse frequencies come from the model (model/rope.c). */
#include <math.h>

#include "kernels/kernels.h"

void g4_rope_table(const float *inv_freq, int D, int pos, float *cs) {
    const int half = D / 2;
    for (int i = 0; i < half; i++) {
        float a = (float)pos * inv_freq[i];   /* float32 product, as torch computes freqs */
        cs[i] = cosf(a);
        cs[half + i] = sinf(a);
    }
}

void g4_rope_table_exact(float theta, const float *inv_freq, int D, int pos, float *cs) {
    (void)theta;   /* transformers' table is inv_freq's alone */
    g4_rope_table(inv_freq, D, pos, cs);
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
