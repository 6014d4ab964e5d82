/* quant_bound.c — the norms that bound how far a quantized-activation dot (--act-q8's kernels) can
 * be from the exact one (kernels.h g4_quant_row_norms, g4_act_norms). For a weight row w and an
 * activation row x quantized to x̂, every kernel computes a float sum of products whose leaves
 * are the terms of one decomposition of w — d·sc·q and dmin·m (Q4_K), d·q and the offset's d·c
 * (Q4_0's c = -8, Q5_0's -16, Q6_K's -32 with its sub-block scale) — so with a_i the sum of the
 * magnitudes of weight i's terms, both the exact sum and the int8 one are within
 * γ_n · Σ a_i |x_i| (resp. |x̂_i|) of their real values (n the longest chain of roundings, at
 * most K + 64 in every kernel), and those differ by |w · (x − x̂)| <= ‖w‖₂ ‖x − x̂‖₂. */
#include <math.h>
#include <string.h>

#include "base/half.h"
#include "kernels/cpu/quant.h"

static inline float f16f(const uint8_t *p) { return g4_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }
static inline double f16d(const uint8_t *p) { return f16f(p); }

/* Q4_K's six-bit scale and min of sub-block j (ggml's get_scale_min_k4) */
static void scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* One block as weight i = s[i] q[i] + o[i] (the terms its kernels sum: s and o exact floats) */
static int block_terms(g4_dtype dt, const uint8_t *b, float *s, float *q, float *o) {
    switch (dt) {
    case G4_DT_Q8_0: {
        const float d = f16f(b);
        for (int j = 0; j < 32; j++) s[j] = d, q[j] = (int8_t)b[2 + j], o[j] = 0;
        return 32;
    }
    case G4_DT_Q4_0: case G4_DT_Q5_0: {
        const int q5 = dt == G4_DT_Q5_0;
        const float d = f16f(b), c = q5 ? -16 * d : -8 * d;
        uint32_t qh = 0;
        if (q5) memcpy(&qh, b + 2, 4);
        const uint8_t *qs = b + (q5 ? 6 : 2);
        for (int j = 0; j < 16; j++) {
            q[j] = (float)((qs[j] & 15) | (int)((qh >> j) & 1) << 4);
            q[j + 16] = (float)((qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4);
        }
        for (int j = 0; j < 32; j++) s[j] = d, o[j] = c;
        return 32;
    }
    case G4_DT_Q4_K: {   /* d, dmin, scales[12], q[128]: sub-block 2g low nibbles, 2g + 1 high */
        const float d = f16f(b), dmin = f16f(b + 2);
        for (int g = 0; g < 4; g++) {
            int sc0, m0, sc1, m1;
            scale_min_k4(2 * g, b + 4, &sc0, &m0);
            scale_min_k4(2 * g + 1, b + 4, &sc1, &m1);
            for (int l = 0; l < 32; l++) {
                const uint8_t v = b[16 + 32 * g + l];
                const int i = 64 * g + l;
                s[i] = d * sc0, q[i] = v & 15, o[i] = -dmin * m0;
                s[i + 32] = d * sc1, q[i + 32] = v >> 4, o[i + 32] = -dmin * m1;
            }
        }
        return 256;
    }
    case G4_DT_Q6_K: {   /* ql[128], qh[64], int8 sc[16], d (quant_ref.c deq_q6_k's layout) */
        const float d = f16f(b + 208);
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, sc += 8)
            for (int l = 0; l < 32; l++) {
                const int i = 128 * h + l, is = l / 16;
                q[i] = (float)((ql[l] & 0xF) | ((qh[l] & 3) << 4));
                q[i + 32] = (float)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
                q[i + 64] = (float)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
                q[i + 96] = (float)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
                for (int k = 0; k < 4; k++) s[i + 32 * k] = d * sc[is + 2 * k], o[i + 32 * k] = -32 * d * sc[is + 2 * k];
            }
        return 256;
    }
    default:
        return 0;
    }
}

/* In float, 8 lanes (vectorized): w_f = s q + o and a_f = |s q| + |o| are within 2u a of w and a;
 * the sums of squares within 34u of theirs (32 terms a lane); the margins below cover both. */
int g4_quant_row_norms(g4_dtype dt, const void *row, int K, double *w2, double *a2) {
    *w2 = *a2 = 0;
    if (g4_act_format(dt) == G4_ACT_NONE) return 0;
    const size_t bb = g4_dtype_size(dt);
    double sw = 0, sa = 0;
    for (int k = 0; k < K;) {
        float s[256], q[256], o[256], lw[8] = {0}, la[8] = {0};
        const int n = block_terms(dt, (const uint8_t *)row + (size_t)(k / g4_dtype_block(dt)) * bb, s, q, o);
        for (int i = 0; i < n; i += 8)
            for (int j = 0; j < 8; j++) {
                const float p = s[i + j] * q[i + j], w = p + o[i + j], a = fabsf(p) + fabsf(o[i + j]);
                lw[j] += w * w;
                la[j] += a * a;
            }
        for (int j = 0; j < 8; j++) sw += lw[j], sa += la[j];
        k += n;
    }
    const double na = sqrt(sa) * (1 + 0x1p-16);
    *w2 = pow(sqrt(sw) * (1 + 0x1p-16) + 0x1p-20 * na, 2);
    *a2 = na * na;
    return 1;
}

void g4_act_norms(g4_dtype wdt, const float *x, const void *xq, int K, double nrm[3]) {
    double xx = 0, hh = 0, rr = 0;
    const uint8_t *q = xq;
    for (int k = 0; k < K; k++) {
        double xh;   /* x̂_k = d q, exact in double */
        if (g4_act_format(wdt) == G4_ACT_Q8_0) {
            const uint8_t *blk = q + (size_t)(k / 32) * G4_Q8_0_BYTES;
            xh = f16d(blk) * (int8_t)blk[2 + k % 32];
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
