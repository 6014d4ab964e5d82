/* quant_bound.c — the norms that bound how far a quantized-activation dot (--act-q8's kernels) can
 * be from the exact one (kernels.h g4_quant_row_norms, g4_act_norms). For a weight row w and an
 * activation row x quantized to x̂, every kernel computes a float sum of products whose leaves
 * are the terms of one decomposition of w — d·sc·q and dmin·m (Q4_K, Q5_K, Q2_K), d·q and the offset's d·c
 * (Q4_0's c = -8, Q5_0's -16, Q6_K's -32 with its sub-block scale) — so with a_i the sum of the
 * magnitudes of weight i's terms, both the exact sum and the int8 one are within
 * γ_n · Σ a_i |x_i| (resp. |x̂_i|) of their real values (n the longest chain of roundings, at
 * most K + 64 in every kernel), and those differ by |w · (x − x̂)| <= ‖w‖₂ ‖x − x̂‖₂. */
#include <math.h>
#include <string.h>

#include "base/half.h"
#include "kernels/cpu/quant.h"

/* The norms from integer moments: a group of n weights sharing scale s and offset o (weight
 * s q + o, its terms |s q| + |o|, q >= 0 but for Q8_0's signed q and zero o) adds
 * s² Σq² + 2 s o Σq + n o² to Σw² and s² Σq² + 2 |s o| Σq + n o² to Σa², where Σq and Σq² are
 * exact integers and s, o exact floats; the double products round by 2⁻⁵³, covered below. */
typedef struct {
    double w2, a2;
} norms;

static inline void group(norms *nm, double s, double o, int n, long q1, long q2) {
    nm->w2 += s * s * q2 + 2 * s * o * q1 + n * o * o;
    nm->a2 += s * s * q2 + 2 * fabs(s * o) * q1 + n * o * o;
}

static void block_norms(g4_dtype dt, const uint8_t *b, norms *nm) {
    switch (dt) {
    case G4_DT_Q8_0: {
        long q2 = 0;
        for (int j = 0; j < 32; j++) q2 += (int8_t)b[2 + j] * (int8_t)b[2 + j];
        group(nm, g4_f16_at(b), 0, 32, 0, q2);
        break;
    }
    case G4_DT_Q4_0: case G4_DT_Q5_0: {
        const int q5 = dt == G4_DT_Q5_0;
        uint32_t qh = 0;
        if (q5) memcpy(&qh, b + 2, 4);
        const uint8_t *qs = b + (q5 ? 6 : 2);
        long q1 = 0, q2 = 0;
        for (int j = 0; j < 16; j++) {
            const int lo = (qs[j] & 15) | (int)((qh >> j) & 1) << 4, hi = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            q1 += lo + hi;
            q2 += lo * lo + hi * hi;
        }
        const double d = g4_f16_at(b);
        group(nm, d, (q5 ? -16 : -8) * d, 32, q1, q2);
        break;
    }
    case G4_DT_IQ4_NL: {   /* d, q[16]: 32 kvalues (signed), scale d */
        long q2 = 0;
        for (int j = 0; j < 16; j++) {
            const int lo = g4_kvalues_iq4nl[b[2 + j] & 0xf], hi = g4_kvalues_iq4nl[b[2 + j] >> 4];
            q2 += lo * lo + hi * hi;
        }
        group(nm, g4_f16_at(b), 0, 32, 0, q2);
        break;
    }
    case G4_DT_Q4_K: case G4_DT_Q5_K: {   /* d, dmin, scales[12], (Q5_K: qh[32],) q[128]: sub-block 2g
                                           * low nibbles, 2g + 1 high, plus 16 where bit 2g / 2g + 1 of qh[l] is set */
        const int q5 = dt == G4_DT_Q5_K;
        const double d = g4_f16_at(b), dmin = g4_f16_at(b + 2);
        for (int g = 0; g < 4; g++) {
            long l1 = 0, l2 = 0, h1 = 0, h2 = 0;
            for (int l = 0; l < 32; l++) {
                const int v = b[(q5 ? 48 : 16) + 32 * g + l], h = q5 ? b[16 + l] >> (2 * g) : 0;
                const int lo = (v & 15) + (h & 1) * 16, hi = (v >> 4) + (h & 2) * 8;
                l1 += lo, l2 += lo * lo, h1 += hi, h2 += hi * hi;
            }
            uint8_t sc, m;
            g4_q4_k_scale_min(2 * g, b + 4, &sc, &m);
            group(nm, d * sc, -dmin * m, 32, l1, l2);
            g4_q4_k_scale_min(2 * g + 1, b + 4, &sc, &m);
            group(nm, d * sc, -dmin * m, 32, h1, h2);
        }
        break;
    }
    case G4_DT_IQ4_XS: {   /* d, scales_h, scales_l[4], q[128]: sub-block ib's 32 kvalues (signed), scale d (ls - 32) */
        const double d = g4_f16_at(b);
        for (int ib = 0; ib < 8; ib++) {
            long q2 = 0;
            for (int j = 0; j < 16; j++) {
                const int lo = g4_kvalues_iq4nl[b[8 + 16 * ib + j] & 0xf], hi = g4_kvalues_iq4nl[b[8 + 16 * ib + j] >> 4];
                q2 += lo * lo + hi * hi;
            }
            group(nm, d * (g4_iq4_xs_scale(b, ib) - 32), 0, 32, 0, q2);
        }
        break;
    }
    case G4_DT_Q3_K: case G4_DT_Q2_K: {   /* 16 sub-blocks of 16: weight 128h + 32j + l is bits 2j, 2j + 1 of
                                           * qs[32h + l] (Q3_K: minus 4 unless bit 4h + j of hmask[l] is set) */
        const int q3 = dt == G4_DT_Q3_K;
        const uint8_t *qs = b + (q3 ? 32 : 16);
        const double d = g4_f16_at(b + (q3 ? 108 : 80)), dmin = q3 ? 0 : g4_f16_at(b + 82);
        for (int s = 0; s < 16; s++) {
            const int h = s / 8, j = (s % 8) / 2;
            long q1 = 0, q2 = 0;
            for (int l = 16 * (s % 2); l < 16 * (s % 2) + 16; l++) {
                const int q = ((qs[32 * h + l] >> 2 * j) & 3) - (q3 && !((b[l] >> (4 * h + j)) & 1) ? 4 : 0);
                q1 += q, q2 += q * q;
            }
            if (q3) group(nm, d * (g4_q3_k_scale(b + 96, s) - 32), 0, 16, 0, q2);   /* signed q: one term each */
            else group(nm, d * (b[s] & 0xF), -dmin * (b[s] >> 4), 16, q1, q2);
        }
        break;
    }
    case G4_DT_Q6_K: {   /* ql[128], qh[64], int8 sc[16], d (quant_ref.c deq_q6_k's layout) */
        const double d = g4_f16_at(b + 208);
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, sc += 8)
            for (int is = 0; is < 2; is++) {   /* 16 weights per (k, is) share sc[is + 2k] */
                long q1[4] = {0}, q2[4] = {0};
                for (int l = 16 * is; l < 16 * is + 16; l++) {
                    const int q[4] = {(ql[l] & 0xF) | ((qh[l] & 3) << 4), (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4),
                                      (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4), (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)};
                    for (int k = 0; k < 4; k++) q1[k] += q[k], q2[k] += q[k] * q[k];
                }
                for (int k = 0; k < 4; k++) {
                    const double s = d * sc[is + 2 * k];
                    group(nm, s, -32 * s, 16, q1[k], q2[k]);
                }
            }
        break;
    }
    default:
        break;
    }
}

/* Every type with int8 dots but Q4_1 / Q5_1, whose Q8_1 activations' f16 block sums s carry an
 * error of their own that the bound below does not cover */
int g4_quant_bounded(g4_dtype dt) { return g4_act_format(dt) != G4_ACT_NONE && g4_act_format(dt) != G4_ACT_Q8_1; }

/* Σw² from moments cancels where s o < 0: its rounding is within 2⁻⁵⁰ Σa² (a few roundings of
 * terms no larger than Σa²'s), which the margin adds back */
int g4_quant_row_norms(g4_dtype dt, const void *row, int K, double *w2, double *a2) {
    *w2 = *a2 = 0;
    if (!g4_quant_bounded(dt)) return 0;
    const int bs = g4_dtype_block(dt);
    const size_t bb = g4_dtype_size(dt);
    norms nm = {0, 0};
    for (int i = 0; i < K / bs; i++) block_norms(dt, (const uint8_t *)row + (size_t)i * bb, &nm);
    *a2 = nm.a2 * (1 + 0x1p-40);
    *w2 = fmax(nm.w2, 0) + 0x1p-40 * *a2;
    return 1;
}

void g4_act_norms(g4_dtype wdt, const float *x, const void *xq, int K, double nrm[3]) {
    double xx = 0, hh = 0, rr = 0;
    const uint8_t *q = xq;
    const int q8_0 = g4_act_format(wdt) == G4_ACT_Q8_0;
    for (int k = 0; k < K; k++) {
        double xh;   /* x̂_k = d q, exact in double */
        if (q8_0) {
            const uint8_t *blk = q + (size_t)(k / 32) * G4_Q8_0_BYTES;
            xh = g4_f16_at(blk) * (int8_t)blk[2 + k % 32];
        } else {
            const g4_block_q8_K *blk = (const g4_block_q8_K *)q + k / 256;
            xh = (double)blk->d * blk->qs[k % 256];
        }
        xx += (double)x[k] * x[k];
        hh += xh * xh;
        rr += (x[k] - xh) * (x[k] - xh);
    }
    nrm[0] = sqrt(xx);
    nrm[1] = sqrt(hh);
    nrm[2] = sqrt(rr);
}
