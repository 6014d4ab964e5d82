/* quant_ref.c — scalar reference for ggml's block formats: dequantization mirroring ggml's
 * dequantize_row_{q8_0,q4_0,q5_0,q4_1,q5_1,q2_K,q3_K,q4_K,q5_K,q6_K,iq4_xs,iq4_nl} operation for operation (so float results are
 * bit-identical: the build is C11, so the compiler does not contract a*b-c into an FMA), and
 * the reference matmul = dequantize one weight row, then a plain float32 dot per activation row. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/quant.h"


static void deq_q8_0(const uint8_t *b, float *y) {   /* d, int8 q[32] */
    const float d = g4_f16_at(b);
    for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

static void deq_q4_0(const uint8_t *b, float *y) {   /* d, q[16]: low nibbles 0..15, high 16..31 */
    const float d = g4_f16_at(b);
    const uint8_t *q = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((q[j] & 0x0F) - 8) * d;
        y[j + 16] = (float)((q[j] >> 4) - 8) * d;
    }
}

static void deq_q5_0(const uint8_t *b, float *y) {   /* d, qh (32 fifth bits), q[16] */
    const float d = g4_f16_at(b);
    const uint32_t qh = (uint32_t)b[2] | (uint32_t)b[3] << 8 | (uint32_t)b[4] << 16 | (uint32_t)b[5] << 24;
    const uint8_t *q = b + 6;
    for (int j = 0; j < 16; j++) {
        const uint8_t xh0 = (uint8_t)(((qh >> j) << 4) & 0x10), xh1 = (uint8_t)((qh >> (j + 12)) & 0x10);
        y[j] = (float)(((q[j] & 0x0F) | xh0) - 16) * d;
        y[j + 16] = (float)(((q[j] >> 4) | xh1) - 16) * d;
    }
}

/* d, m, (Q5_1: qh,) q[16]: weight j < 16 the low nibble of q[j], 16 + j its high one, each with its
 * fifth bit (bit j of qh) worth 16 for Q5_1; d q + m (d q is exact, so one rounding) */
static void deq_q_1(const uint8_t *b, float *y, int q5) {
    const float d = g4_f16_at(b), m = g4_f16_at(b + 2);
    const uint32_t qh = q5 ? (uint32_t)b[4] | (uint32_t)b[5] << 8 | (uint32_t)b[6] << 16 | (uint32_t)b[7] << 24 : 0;
    const uint8_t *q = b + (q5 ? 8 : 4);
    for (int j = 0; j < 16; j++) {
        const int x0 = (q[j] & 0x0F) | (int)(((qh >> j) << 4) & 0x10), x1 = (q[j] >> 4) | (int)((qh >> (j + 12)) & 0x10);
        y[j] = x0 * d + m;
        y[j + 16] = x1 * d + m;
    }
}
static void deq_q4_1(const uint8_t *b, float *y) { deq_q_1(b, y, 0); }
static void deq_q5_1(const uint8_t *b, float *y) { deq_q_1(b, y, 1); }

void g4_q4_k_scale_min(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) { *d = q[j] & 63; *m = q[j + 4] & 63; }
    else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

static void deq_q4_k(const uint8_t *b, float *y) {   /* d, dmin, scales[12], q[128] */
    const float d = g4_f16_at(b), min = g4_f16_at(b + 2);
    const uint8_t *sc = b + 4, *q = b + 16;
    int is = 0;
    uint8_t s, m;
    for (int j = 0; j < 256; j += 64) {
        g4_q4_k_scale_min(is + 0, sc, &s, &m);
        const float d1 = d * s, m1 = min * m;
        g4_q4_k_scale_min(is + 1, sc, &s, &m);
        const float d2 = d * s, m2 = min * m;
        for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0xF) - m1;
        for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
        q += 32;
        is += 2;
    }
}

/* d, dmin, scales[12], qh[32], q[128]: Q4_K's nibbles, each with a fifth bit (bit j of qh[l] for
 * sub-block j's weight l) worth 16 */
static void deq_q5_k(const uint8_t *b, float *y) {
    const float d = g4_f16_at(b), min = g4_f16_at(b + 2);
    const uint8_t *sc = b + 4, *qh = b + 16, *ql = b + 48;
    int is = 0;
    uint8_t s, m, u1 = 1, u2 = 2;
    for (int j = 0; j < 256; j += 64) {
        g4_q4_k_scale_min(is + 0, sc, &s, &m);
        const float d1 = d * s, m1 = min * m;
        g4_q4_k_scale_min(is + 1, sc, &s, &m);
        const float d2 = d * s, m2 = min * m;
        for (int l = 0; l < 32; l++) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
        for (int l = 0; l < 32; l++) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        ql += 32;
        is += 2;
        u1 = (uint8_t)(u1 << 2);
        u2 = (uint8_t)(u2 << 2);
    }
}

const int8_t g4_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* d, scales_h, scales_l[4], q[128]: sub-block ib's weight j (j < 16) the low nibble of
 * q[16 ib + j], 16 + j its high one, each through the kvalues table */
static void deq_iq4_xs(const uint8_t *b, float *y) {
    const float d = g4_f16_at(b);
    const uint8_t *qs = b + 8;
    for (int ib = 0; ib < 8; ib++, y += 32, qs += 16) {
        const float dl = d * (g4_iq4_xs_scale(b, ib) - 32);
        for (int j = 0; j < 16; j++) {
            y[j] = dl * g4_kvalues_iq4nl[qs[j] & 0xf];
            y[j + 16] = dl * g4_kvalues_iq4nl[qs[j] >> 4];
        }
    }
}

/* d, q[16]: weight j < 16 the low nibble of q[j], 16 + j its high one, each through the kvalues
 * table (IQ4_XS's sub-block on its own) */
static void deq_iq4_nl(const uint8_t *b, float *y) {
    const float d = g4_f16_at(b);
    for (int j = 0; j < 16; j++) {
        y[j] = d * g4_kvalues_iq4nl[b[2 + j] & 0xf];
        y[j + 16] = d * g4_kvalues_iq4nl[b[2 + j] >> 4];
    }
}

/* Q3_K sub-block s's six-bit scale (s < 16; the weights are d (sc - 32) q): ggml's unpacking of
 * scales[12] — low nibbles from bytes 0-7, high two bits from bytes 8-11 */
int g4_q3_k_scale(const uint8_t *scales, int s) {
    const int lo = s < 8 ? scales[s] & 0xF : scales[s - 8] >> 4;
    return lo | ((scales[8 + s % 4] >> (2 * (s / 4))) & 3) << 4;
}

/* hmask[32], qs[64], scales[12], d: weight 128h + 32j + l (l < 32) is bits 2j, 2j + 1 of
 * qs[32h + l], minus 4 unless bit 4h + j of hmask[l] is set; scale of its 16-weight sub-block
 * 8h + 2j + l / 16 */
static void deq_q3_k(const uint8_t *b, float *y) {
    const float d = g4_f16_at(b + 108);
    const uint8_t *hm = b, *q = b + 32;
    for (int h = 0; h < 2; h++, q += 32)
        for (int j = 0; j < 4; j++)
            for (int half = 0; half < 2; half++) {
                const float dl = d * (g4_q3_k_scale(b + 96, 8 * h + 2 * j + half) - 32);
                for (int l = 16 * half; l < 16 * half + 16; l++)
                    *y++ = dl * ((int8_t)((q[l] >> 2 * j) & 3) - ((hm[l] >> (4 * h + j)) & 1 ? 0 : 4));
            }
}

/* scales[16], qs[64], d, dmin: weight 128h + 32j + l (l < 32) is bits 2j, 2j + 1 of qs[32h + l];
 * its 16-weight sub-block s = 8h + 2j + l / 16 has scale d (scales[s] & 15), min dmin (scales[s] >> 4) */
static void deq_q2_k(const uint8_t *b, float *y) {
    const float d = g4_f16_at(b + 80), min = g4_f16_at(b + 82);
    const uint8_t *q = b + 16;
    int is = 0;
    for (int h = 0; h < 2; h++, q += 32)
        for (int j = 0; j < 4; j++)
            for (int half = 0; half < 2; half++) {
                const uint8_t sc = b[is++];
                const float dl = d * (sc & 0xF), ml = min * (sc >> 4);
                for (int l = 16 * half; l < 16 * half + 16; l++) *y++ = dl * ((int8_t)((q[l] >> 2 * j) & 3)) - ml;
            }
}

static void deq_q6_k(const uint8_t *b, float *y) {   /* ql[128], qh[64], int8 sc[16], d */
    const float d = g4_f16_at(b + 208);
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    for (int n = 0; n < 256; n += 128) {
        for (int l = 0; l < 32; l++) {
            const int is = l / 16;
            const int8_t q1 = (int8_t)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int8_t q2 = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int8_t q3 = (int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int8_t q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l + 0] = d * sc[is + 0] * q1;
            y[l + 32] = d * sc[is + 2] * q2;
            y[l + 64] = d * sc[is + 4] * q3;
            y[l + 96] = d * sc[is + 6] * q4;
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
    }
}

void g4_dequant_row(g4_dtype dt, const void *src, int64_t n, float *dst) {
    void (*f)(const uint8_t *, float *) = dt == G4_DT_Q8_0 ? deq_q8_0 : dt == G4_DT_Q4_0 ? deq_q4_0
                                        : dt == G4_DT_Q5_0 ? deq_q5_0 : dt == G4_DT_Q4_K ? deq_q4_k
                                        : dt == G4_DT_Q6_K ? deq_q6_k : dt == G4_DT_Q5_K ? deq_q5_k
                                        : dt == G4_DT_IQ4_XS ? deq_iq4_xs : dt == G4_DT_Q3_K ? deq_q3_k
                                        : dt == G4_DT_Q2_K ? deq_q2_k : dt == G4_DT_IQ4_NL ? deq_iq4_nl
                                        : dt == G4_DT_Q4_1 ? deq_q4_1 : dt == G4_DT_Q5_1 ? deq_q5_1 : NULL;
    if (!f) { g4_to_f32(dt, src, (size_t)n, dst); return; }
    const int bs = g4_dtype_block(dt);
    const size_t bb = g4_dtype_size(dt);
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / bs; i++) f(b + (size_t)i * bb, dst + i * bs);
}

/* The reference: widen one weight row (in L1), then the same sequential float32 dot as ref.c */
static void mm_ref(g4_dtype dt, const float *x, int T, int K, const void *w, int n0, int n1,
                   float *y, int ldy) {
    float *row = malloc((size_t)K * sizeof(float));
    if (!row) abort();   /* [K] floats; the kernels have no error channel */
    const size_t rb = g4_dtype_row_bytes(dt, K);
    for (int n = n0; n < n1; n++) {
        g4_dequant_row(dt, (const uint8_t *)w + (size_t)n * rb, K, row);
        for (int t = 0; t < T; t++) {
            const float *xr = x + (size_t)t * K;
            float acc = 0.0f;
            for (int k = 0; k < K; k++) acc += xr[k] * row[k];
            y[(size_t)t * ldy + n] = acc;
        }
    }
    free(row);
}

#define MM_REF(NAME, DT)                                                                        \
    void NAME(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) { \
        mm_ref(DT, x, T, K, w, n0, n1, y, ldy);                                                 \
    }
MM_REF(g4_mm_q8_0_ref, G4_DT_Q8_0)
MM_REF(g4_mm_q4_0_ref, G4_DT_Q4_0)
MM_REF(g4_mm_q5_0_ref, G4_DT_Q5_0)
MM_REF(g4_mm_q4_k_ref, G4_DT_Q4_K)
MM_REF(g4_mm_q6_k_ref, G4_DT_Q6_K)
MM_REF(g4_mm_q5_k_ref, G4_DT_Q5_K)
MM_REF(g4_mm_iq4_xs_ref, G4_DT_IQ4_XS)
MM_REF(g4_mm_q3_k_ref, G4_DT_Q3_K)
MM_REF(g4_mm_q2_k_ref, G4_DT_Q2_K)
MM_REF(g4_mm_iq4_nl_ref, G4_DT_IQ4_NL)
MM_REF(g4_mm_q4_1_ref, G4_DT_Q4_1)
MM_REF(g4_mm_q5_1_ref, G4_DT_Q5_1)
