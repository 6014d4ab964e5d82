/* quant_act.c — the int8-activation mode (--act-q8), scalar: activation rows → ggml's Q8_0 /
 * Q8_K / Q8_1 blocks (bit-exact to quantize_row_q8_0_ref / _q8_K_ref / _q8_1_ref in ggml-quants.c), and
 * the quantized-weight × quantized-activation dots mirroring ggml's ggml_vec_dot_*_q8_*_generic
 * (ggml-cpu/quants.c) operation for operation, bit-identical to them as ggml's build compiles
 * them (tests/c/test_quant_act.c). The AVX2 versions are quant_act_avx2.c. */
#include <math.h>
#include <string.h>

#include "base/half.h"
#include "kernels/cpu/quant.h"


/* ggml-cpu.c type_traits_cpu[].vec_dot_type */
g4_act_fmt g4_act_format(g4_dtype wdt) {
    switch (wdt) {
    case G4_DT_Q8_0: case G4_DT_Q4_0: case G4_DT_Q5_0: case G4_DT_IQ4_NL: return G4_ACT_Q8_0;
    case G4_DT_Q4_K: case G4_DT_Q5_K: case G4_DT_Q6_K: case G4_DT_IQ4_XS: case G4_DT_Q3_K: case G4_DT_Q2_K:
        return G4_ACT_Q8_K;
    case G4_DT_Q4_1: case G4_DT_Q5_1: return G4_ACT_Q8_1;
    default: return G4_ACT_NONE;
    }
}

size_t g4_act_row_bytes(g4_dtype wdt, int K) {
    const g4_act_fmt a = g4_act_format(wdt);
    return a == G4_ACT_Q8_0 ? (size_t)(K / 32) * G4_Q8_0_BYTES
         : a == G4_ACT_Q8_1 ? (size_t)(K / 32) * G4_Q8_1_BYTES
         : a == G4_ACT_Q8_K ? (size_t)(K / 256) * sizeof(g4_block_q8_K) : 0;
}

/* quantize_row_q8_0_ref / quantize_row_q8_1_ref: d = amax/127 stored as f16; q = roundf(x * (1/d))
 * (half away from zero), computed with the float d, not its f16 rounding, as ggml does; Q8_1 also
 * s = f16(the quants' integer sum * d) */
static void quantize_q8_0_1(int q8_1, const float *x, int K, uint8_t *y) {
    const int qs = q8_1 ? 4 : 2;
    for (int i = 0; i < K / 32; i++, x += 32, y += q8_1 ? G4_Q8_1_BYTES : G4_Q8_0_BYTES) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) { const float v = fabsf(x[j]); amax = amax > v ? amax : v; }
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            const int8_t q = (int8_t)roundf(x[j] * id);
            y[qs + j] = (uint8_t)q;
            sum += q;
        }
        g4_put_16le(y, g4_f32_to_f16(d));
        if (q8_1) g4_put_16le(y + 2, g4_f32_to_f16((float)sum * d));
    }
}

/* ggml's nearest_int: round to nearest even through the 1.5*2^23 magic (|v| <= 2^22) */
static inline int nearest_int(float v) {
    float f = v + 12582912.f;
    int i;
    memcpy(&i, &f, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* quantize_row_q8_K_ref: iscale = -127/(the value of largest magnitude, first such), q =
 * min(127, nearest_int(iscale*x)), d = 1/iscale (float), bsums = sums of 16 quants */
static void quantize_q8_K(const float *x, int K, g4_block_q8_K *y) {
    for (int i = 0; i < K / 256; i++, x += 256, y++) {
        float max = 0, amax = 0;
        for (int j = 0; j < 256; j++) {
            const float ax = fabsf(x[j]);
            if (ax > amax) { amax = ax; max = x[j]; }
        }
        if (!amax) {
            memset(y, 0, sizeof *y);
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < 256; j++) {
            const int v = nearest_int(iscale * x[j]);
            y->qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < 16; j++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += y->qs[16 * j + l];
            y->bsums[j] = (int16_t)sum;
        }
        y->d = 1 / iscale;
    }
}

void g4_act_quantize(g4_dtype wdt, const float *x, int T, int K, void *dst) {
    const size_t rb = g4_act_row_bytes(wdt, K);
    const g4_act_fmt fmt = g4_act_format(wdt);
    for (int t = 0; t < T; t++) {
        uint8_t *d = (uint8_t *)dst + (size_t)t * rb;
        if (fmt == G4_ACT_Q8_0 || fmt == G4_ACT_Q8_1) quantize_q8_0_1(fmt == G4_ACT_Q8_1, x + (size_t)t * K, K, d);
        else quantize_q8_K(x + (size_t)t * K, K, (g4_block_q8_K *)d);
    }
}

/* ---- dots: one weight row (n elements) · one quantized activation row ---- */

float g4_vec_dot_q8_0_q8_0_ref(int n, const void *vw, const void *vx) {   /* ggml_vec_dot_q8_0_q8_0_generic */
    const uint8_t *w = vw, *x = vx;
    float sumf = 0;
    for (int ib = 0; ib < n / 32; ib++, w += 34, x += 34) {
        int sumi = 0;
        for (int j = 0; j < 32; j++) sumi += (int8_t)w[2 + j] * (int8_t)x[2 + j];
        sumf += sumi * (g4_f16_at(w) * g4_f16_at(x));
    }
    return sumf;
}

float g4_vec_dot_q4_0_q8_0_ref(int n, const void *vw, const void *vx) {   /* ..._q4_0_q8_0_generic */
    const uint8_t *w = vw, *x = vx;
    float sumf = 0;
    for (int ib = 0; ib < n / 32; ib++, w += 18, x += 34) {
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < 16; j++) {
            const int v0 = (w[2 + j] & 0x0F) - 8, v1 = (w[2 + j] >> 4) - 8;
            sumi0 += v0 * (int8_t)x[2 + j];
            sumi1 += v1 * (int8_t)x[2 + j + 16];
        }
        const int sumi = sumi0 + sumi1;
        sumf += sumi * g4_f16_at(w) * g4_f16_at(x);
    }
    return sumf;
}

float g4_vec_dot_q5_0_q8_0_ref(int n, const void *vw, const void *vx) {   /* ..._q5_0_q8_0_generic */
    const uint8_t *w = vw, *x = vx;
    float sumf = 0;
    for (int ib = 0; ib < n / 32; ib++, w += 22, x += 34) {
        uint32_t qh;
        memcpy(&qh, w + 2, 4);
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < 16; j++) {
            const uint8_t xh_0 = (uint8_t)(((qh & (1u << j)) >> j) << 4);
            const uint8_t xh_1 = (uint8_t)((qh & (1u << (j + 16))) >> (j + 12));
            const int32_t x0 = (int8_t)(((w[6 + j] & 0x0F) | xh_0) - 16);
            const int32_t x1 = (int8_t)(((w[6 + j] >> 4) | xh_1) - 16);
            sumi0 += x0 * (int8_t)x[2 + j];
            sumi1 += x1 * (int8_t)x[2 + j + 16];
        }
        const int sumi = sumi0 + sumi1;
        sumf += (g4_f16_at(w) * g4_f16_at(x)) * sumi;
    }
    return sumf;
}

/* ggml_vec_dot_q4_1_q8_1_generic / _q5_1_q8_1_generic: per block the two halves' integer sums of
 * the unsigned quants, sumf += (dx * dy) * sum + m * s; the build contracts that line to
 * sumf + fma(dx * dy, sum, m * s) (its vectors say so) */
static float dot_q41_q51_q8_1(int q5, int n, const void *vw, const void *vx) {
    const uint8_t *w = vw, *x = vx;
    const size_t bb = q5 ? 24 : 20;
    float sumf = 0;
    for (int ib = 0; ib < n / 32; ib++, w += bb, x += G4_Q8_1_BYTES) {
        uint32_t qh = 0;
        if (q5) memcpy(&qh, w + 4, 4);
        const uint8_t *qs = w + (q5 ? 8 : 4);
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < 16; j++) {
            const int x0 = (qs[j] & 0x0F) | (int)((qh >> j) & 1) << 4, x1 = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            sumi0 += x0 * (int8_t)x[4 + j];
            sumi1 += x1 * (int8_t)x[4 + j + 16];
        }
        sumf += fmaf(g4_f16_at(w) * g4_f16_at(x), (float)(sumi0 + sumi1), g4_f16_at(w + 2) * g4_f16_at(x + 2));
    }
    return sumf;
}
float g4_vec_dot_q4_1_q8_1_ref(int n, const void *vw, const void *vx) { return dot_q41_q51_q8_1(0, n, vw, vx); }
float g4_vec_dot_q5_1_q8_1_ref(int n, const void *vw, const void *vx) { return dot_q41_q51_q8_1(1, n, vw, vx); }

/* ggml's generic K-quant dots: a block's 256 products of weight quants a and activation quants q8,
 * in groups of 8 (int16, as ggml stores them) scaled by their sub-block's scale (nsub sub-blocks of
 * 256 / nsub) into 8 int32 lanes: lane l sums the products at l, 8 + l, 16 + l, ... */
static void scaled_lane_sums(const int8_t *q8, const int8_t *a, const int *scale, int nsub, int32_t aux32[8]) {
    int16_t aux16[8];
    for (int j = 0; j < nsub; j++)
        for (int k = 0; k < 256 / nsub / 8; k++, q8 += 8, a += 8) {
            for (int l = 0; l < 8; l++) aux16[l] = (int16_t)(q8[l] * a[l]);
            for (int l = 0; l < 8; l++) aux32[l] += scale[j] * aux16[l];
        }
}

/* ggml's ggml_vec_dot_q4_K_q8_K_generic and ggml_vec_dot_q5_K_q8_K_generic: the same loops, Q5_K's
 * quants with their fifth bit (bit j of qh[l] for sub-block j's weight l) worth 16 */
static float dot_q45_k_q8_k(int q5, int n, const void *vw, const void *vx) {
    const uint8_t *w = vw;
    const g4_block_q8_K *y = vx;
    int8_t aux8[256];
    float sums[8] = {0};
    int32_t aux32[8];
    float sumf = 0;
    const size_t bb = q5 ? 176 : 144;
    for (int i = 0; i < n / 256; i++, w += bb) {
        const uint8_t *q4 = w + (q5 ? 48 : 16), *hm = w + 16;
        const int8_t *q8 = y[i].qs;
        memset(aux32, 0, sizeof aux32);
        int8_t *a = aux8;
        uint8_t m = 1;
        for (int j = 0; j < 4; j++) {
            for (int l = 0; l < 32; l++) a[l] = (int8_t)((q4[l] & 0xF) + (q5 && (hm[l] & m) ? 16 : 0));
            a += 32;
            m = (uint8_t)(m << 1);
            for (int l = 0; l < 32; l++) a[l] = (int8_t)((q4[l] >> 4) + (q5 && (hm[l] & m) ? 16 : 0));
            a += 32;
            m = (uint8_t)(m << 1);
            q4 += 32;
        }
        uint32_t sm[4];
        g4_q4_k_scales(w + 4, sm);
        const uint8_t *scales = (const uint8_t *)sm, *mins = scales + 8;
        int sumi = 0;
        for (int j = 0; j < 16; j++) sumi += y[i].bsums[j] * mins[j / 2];
        int sc8[8];
        for (int j = 0; j < 8; j++) sc8[j] = scales[j];
        scaled_lane_sums(q8, aux8, sc8, 8, aux32);
        /* fmaf: gcc contracts these two into FMAs in ggml's own build (-march=native, GNU C),
         * and with them the result is bit-identical to ggml's (tests/c/test_quant_act.c) */
        const float d = g4_f16_at(w) * y[i].d;
        for (int l = 0; l < 8; l++) sums[l] = fmaf(d, (float)aux32[l], sums[l]);
        const float dmin = g4_f16_at(w + 2) * y[i].d;
        sumf = fmaf(-dmin, (float)sumi, sumf);
    }
    for (int l = 0; l < 8; l++) sumf += sums[l];
    return sumf;
}
float g4_vec_dot_q4_k_q8_k_ref(int n, const void *vw, const void *vx) { return dot_q45_k_q8_k(0, n, vw, vx); }
float g4_vec_dot_q5_k_q8_k_ref(int n, const void *vw, const void *vx) { return dot_q45_k_q8_k(1, n, vw, vx); }

float g4_vec_dot_q6_k_q8_k_ref(int n, const void *vw, const void *vx) {   /* ..._q6_K_q8_K_generic */
    const uint8_t *w = vw;
    const g4_block_q8_K *y = vx;
    int8_t aux8[256];
    float sums[8] = {0};
    int32_t aux32[8];
    float sumf = 0;
    for (int i = 0; i < n / 256; i++, w += 210) {
        const uint8_t *q4 = w, *qh = w + 128;
        const int8_t *sc = (const int8_t *)(w + 192);
        const int8_t *q8 = y[i].qs;
        memset(aux32, 0, sizeof aux32);
        int8_t *a = aux8;
        for (int j = 0; j < 256; j += 128) {
            for (int l = 0; l < 32; l++) {
                a[l + 0] = (int8_t)((q4[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                a[l + 32] = (int8_t)((q4[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                a[l + 64] = (int8_t)((q4[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                a[l + 96] = (int8_t)((q4[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            }
            a += 128;
            q4 += 64;
            qh += 32;
        }
        int sc16[16];
        for (int j = 0; j < 16; j++) sc16[j] = sc[j];
        scaled_lane_sums(q8, aux8, sc16, 16, aux32);
        const float d = g4_f16_at(w + 208) * y[i].d;
        for (int l = 0; l < 8; l++) sums[l] += d * aux32[l];
    }
    for (int l = 0; l < 8; l++) sumf += sums[l];
    return sumf;
}

float g4_vec_dot_iq4_xs_q8_k_ref(int n, const void *vw, const void *vx) {   /* ..._iq4_xs_q8_K_generic */
    const uint8_t *w = vw;
    const g4_block_q8_K *y = vx;
    float sumf = 0;
    for (int i = 0; i < n / 256; i++, w += 136) {
        const float d4d8 = g4_f16_at(w) * y[i].d;
        const uint8_t *qs = w + 8;
        const int8_t *q8 = y[i].qs;
        for (int ib = 0; ib < 8; ib++, qs += 16, q8 += 32) {
            const float dl = d4d8 * (g4_iq4_xs_scale(w, ib) - 32);
            int sumi1 = 0, sumi2 = 0;
            for (int j = 0; j < 16; j++) {
                sumi1 += q8[j] * g4_kvalues_iq4nl[qs[j] & 0xf];
                sumi2 += q8[j + 16] * g4_kvalues_iq4nl[qs[j] >> 4];
            }
            sumf += dl * (float)(sumi1 + sumi2);   /* not an FMA in ggml's build here (its vectors say so) */
        }
    }
    return sumf;
}

/* ggml_vec_dot_iq4_nl_q8_0_generic: per block the two halves' integer sums, sumf += d * sum */
float g4_vec_dot_iq4_nl_q8_0_ref(int n, const void *vw, const void *vx) {
    const uint8_t *w = vw, *x = vx;
    float sumf = 0;
    for (int i = 0; i < n / 32; i++, w += 18, x += G4_Q8_0_BYTES) {
        const float d = g4_f16_at(x) * g4_f16_at(w);
        int sumi1 = 0, sumi2 = 0;
        for (int j = 0; j < 16; j++) {
            sumi1 += (int8_t)x[2 + j] * g4_kvalues_iq4nl[w[2 + j] & 0xf];
            sumi2 += (int8_t)x[2 + j + 16] * g4_kvalues_iq4nl[w[2 + j] >> 4];
        }
        sumf += d * (float)(sumi1 + sumi2);
    }
    return sumf;
}

/* ggml_vec_dot_q3_K_q8_K_generic: the signed quants (q - 4 unless the hmask bit is set) in aux8,
 * each 8-weight group's products scaled by its sub-block's sc - 32 into 8 int32 lanes */
float g4_vec_dot_q3_k_q8_k_ref(int n, const void *vw, const void *vx) {
    const uint8_t *w = vw;
    const g4_block_q8_K *y = vx;
    int8_t aux8[256];
    float sums[8] = {0};
    int32_t aux32[8];
    float sumf = 0;
    for (int i = 0; i < n / 256; i++, w += 110) {
        const uint8_t *q3 = w + 32, *hm = w;
        const int8_t *q8 = y[i].qs;
        memset(aux32, 0, sizeof aux32);
        int8_t *a = aux8;
        uint8_t m = 1;
        for (int j = 0; j < 256; j += 128, q3 += 32)
            for (int s = 0; s < 8; s += 2, a += 32, m = (uint8_t)(m << 1))
                for (int l = 0; l < 32; l++) a[l] = (int8_t)(((q3[l] >> s) & 3) - (hm[l] & m ? 0 : 4));
        int sc16[16];
        for (int j = 0; j < 16; j++) sc16[j] = g4_q3_k_scale(w + 96, j) - 32;
        scaled_lane_sums(q8, aux8, sc16, 16, aux32);
        const float d = g4_f16_at(w + 108) * y[i].d;
        for (int l = 0; l < 8; l++) sums[l] += d * (float)aux32[l];   /* not an FMA in ggml's build here (its vectors say so) */
    }
    for (int l = 0; l < 8; l++) sumf += sums[l];
    return sumf;
}

/* ggml_vec_dot_q2_K_q8_K_generic: one integer sum of scale x products and one of the mins x the
 * activation's 16-sums per block */
float g4_vec_dot_q2_k_q8_k_ref(int n, const void *vw, const void *vx) {
    const uint8_t *w = vw;
    const g4_block_q8_K *y = vx;
    float sumf = 0;
    for (int i = 0; i < n / 256; i++, w += 84) {
        const uint8_t *q2 = w + 16, *sc = w;
        const int8_t *q8 = y[i].qs;
        int summs = 0;
        for (int j = 0; j < 16; j++) summs += y[i].bsums[j] * (sc[j] >> 4);
        const float dall = y[i].d * g4_f16_at(w + 80), dmin = y[i].d * g4_f16_at(w + 82);
        int isum = 0, is = 0;
        for (int k = 0; k < 2; k++, q2 += 32)
            for (int shift = 0; shift < 8; shift += 2) {
                for (int h = 0; h < 2; h++) {
                    const int d = sc[is++] & 0xF;
                    int isuml = 0;
                    for (int l = 16 * h; l < 16 * h + 16; l++) isuml += q8[l] * ((q2[l] >> shift) & 3);
                    isum += d * isuml;
                }
                q8 += 32;
            }
        sumf += fmaf(dall, (float)isum, -(dmin * (float)summs));   /* the FMA ggml's build makes (its vectors say so) */
    }
    return sumf;
}

/* The reference matmul: one dot per (weight row, activation row), as ggml's mul_mat loops. */
#define MMQ_REF(NAME, DT, DOT)                                                                       \
    void NAME(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {      \
        const size_t rb = g4_dtype_row_bytes(DT, K), xb = g4_act_row_bytes(DT, K);                   \
        for (int n = n0; n < n1; n++)                                                                \
            for (int t = 0; t < T; t++)                                                              \
                y[(size_t)t * ldy + n] = DOT(K, (const uint8_t *)w + (size_t)n * rb, (const uint8_t *)xq + t * xb); \
    }
MMQ_REF(g4_mmq_q8_0_ref, G4_DT_Q8_0, g4_vec_dot_q8_0_q8_0_ref)
MMQ_REF(g4_mmq_q4_0_ref, G4_DT_Q4_0, g4_vec_dot_q4_0_q8_0_ref)
MMQ_REF(g4_mmq_q5_0_ref, G4_DT_Q5_0, g4_vec_dot_q5_0_q8_0_ref)
MMQ_REF(g4_mmq_q4_k_ref, G4_DT_Q4_K, g4_vec_dot_q4_k_q8_k_ref)
MMQ_REF(g4_mmq_q6_k_ref, G4_DT_Q6_K, g4_vec_dot_q6_k_q8_k_ref)
MMQ_REF(g4_mmq_q5_k_ref, G4_DT_Q5_K, g4_vec_dot_q5_k_q8_k_ref)
MMQ_REF(g4_mmq_iq4_xs_ref, G4_DT_IQ4_XS, g4_vec_dot_iq4_xs_q8_k_ref)
MMQ_REF(g4_mmq_q3_k_ref, G4_DT_Q3_K, g4_vec_dot_q3_k_q8_k_ref)
MMQ_REF(g4_mmq_q2_k_ref, G4_DT_Q2_K, g4_vec_dot_q2_k_q8_k_ref)
MMQ_REF(g4_mmq_iq4_nl_ref, G4_DT_IQ4_NL, g4_vec_dot_iq4_nl_q8_0_ref)
MMQ_REF(g4_mmq_q4_1_ref, G4_DT_Q4_1, g4_vec_dot_q4_1_q8_1_ref)
MMQ_REF(g4_mmq_q5_1_ref, G4_DT_Q5_1, g4_vec_dot_q5_1_q8_1_ref)
