/* quant_avx2.c — matmul over ggml block-quantized weights for AVX2+FMA, fused: each block's
 * quants are widened to float in registers (never stored), dotted with the activations and scaled
 * per block / sub-block (Q4_K's mins via the sum of x). Not bit-identical to dequantize-then-dot
 * (scales are applied after the sum); tests/c/test_quant.c bounds the difference. */
#pragma GCC target("avx2,fma,f16c")
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/q4_k_scales_bytes.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/quant_simd.h"

/* Q8_0 fully fused (the tied LM head of the common Gemma GGUFs is Q8_0, and it is most of the
 * bytes a decode step reads): per block, the 32 int8 weights are widened in registers and dotted
 * with x, then scaled by d — sum_b d_b * (q_b · x_b), up to 4 activation rows per weight pass. */
static inline __m256 q8_chunk(const uint8_t *q, int k) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + 8 * k))));
}

void g4_mm_q8_0_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    if (T >= 4) n0 = g4_gemm_quant_avx2(G4_DT_Q8_0, x, T, K, w, n0, n1, y, ldy);   /* prefill: panels */
    const int nb = K / 32;
    const size_t rb = (size_t)nb * 34;
    if (T == 1) {
        /* decode: 4 weight rows per pass, so four independent block chains overlap (one row's
         * mul -> 3 fma -> scale chain per block is latency-bound); each row's arithmetic is the
         * same as the general loop below, bit for bit */
        for (; n0 + 4 <= n1; n0 += 4) {
            const uint8_t *row = (const uint8_t *)w + (size_t)n0 * rb;
            __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
            for (int b = 0; b < nb; b++) {
                g4_prefetch_ahead(row + (size_t)b * 4 * 34, 4 * 34);   /* the 4 rows' linear range */
                const float *xb = x + (size_t)b * 32;
                const __m256 x0 = _mm256_loadu_ps(xb), x1 = _mm256_loadu_ps(xb + 8), x2 = _mm256_loadu_ps(xb + 16),
                             x3 = _mm256_loadu_ps(xb + 24);
                for (int r = 0; r < 4; r++) {
                    const uint8_t *blk = row + (size_t)r * rb + (size_t)b * 34;
                    const __m256 d = _mm256_set1_ps(g4_ld_f16(blk));
                    __m256 s = _mm256_mul_ps(q8_chunk(blk + 2, 0), x0);
                    s = _mm256_fmadd_ps(q8_chunk(blk + 2, 1), x1, s);
                    s = _mm256_fmadd_ps(q8_chunk(blk + 2, 2), x2, s);
                    s = _mm256_fmadd_ps(q8_chunk(blk + 2, 3), x3, s);
                    acc[r] = _mm256_fmadd_ps(d, s, acc[r]);
                }
            }
            for (int r = 0; r < 4; r++) y[n0 + r] = g4_hsum8(acc[r]);
        }
    }
    for (int n = n0; n < n1; n++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)n * rb;
        for (int t0 = 0; t0 < T; t0 += 4) {
            const int tn = T - t0 < 4 ? T - t0 : 4;
            __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
            for (int b = 0; b < nb; b++) {
                const uint8_t *blk = row + (size_t)b * 34;
                const __m256 d = _mm256_set1_ps(g4_ld_f16(blk));
                const __m256 w0 = q8_chunk(blk + 2, 0), w1 = q8_chunk(blk + 2, 1), w2 = q8_chunk(blk + 2, 2),
                             w3 = q8_chunk(blk + 2, 3);
                for (int i = 0; i < tn; i++) {
                    const float *xb = x + (size_t)(t0 + i) * K + (size_t)b * 32;
                    __m256 s = _mm256_mul_ps(w0, _mm256_loadu_ps(xb));
                    s = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xb + 8), s);
                    s = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xb + 16), s);
                    s = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xb + 24), s);
                    acc[i] = _mm256_fmadd_ps(d, s, acc[i]);
                }
            }
            for (int i = 0; i < tn; i++) y[(size_t)(t0 + i) * ldy + n] = g4_hsum8(acc[i]);
        }
    }
}

/* ---- Q4_0 / Q5_0 / Q4_K / Q6_K, exact decode (T < 4): fused in registers. Each group of 8
 * quants is zero-extended straight from memory into int32 lanes (vpmovzxbd: a byte's low and
 * high nibbles are two such groups), masked / shifted, converted to float and FMA'd with x; the
 * per-block (sub-block) scale is applied to the 8-lane sum. The constant offsets (Q4_0's -8,
 * Q5_0's -16, Q6_K's -32) and Q4_K's mins become sums of x, computed once per call into a stack
 * buffer ("pre") and folded in per block. R weight rows x T activation rows per pass (every
 * quant widened once, every x load feeding R rows); each (row, t) result is the same chain of
 * operations whatever R, T, the row range or the thread count. ---- */

#define AI static inline __attribute__((always_inline))

enum { PRE_MAX = 8192 };   /* floats of activation sums per call on the stack (32 KB) */

static inline __m256 bcast_f16(const uint8_t *p) {   /* quant.h g4_f16_f32_avx2 */
    uint16_t h;
    memcpy(&h, p, 2);
    return _mm256_broadcast_ss(g4_f16_f32_avx2 + h);
}
static inline __m256i u8x8(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }
static inline __m256 ld(const float *p) { return _mm256_loadu_ps(p); }
static inline __m256 sum4(const float *x) {   /* x[0..8) + x[8..16) + x[16..24) + x[24..32) */
    return _mm256_add_ps(_mm256_add_ps(ld(x), ld(x + 8)), _mm256_add_ps(ld(x + 16), ld(x + 24)));
}

/* pre for Q4_0 / Q5_0: per t and block, the 8 lanes c * (x0 + x1 + x2 + x3) (c = -8 / -16):
 * the chain of q . x starts there, so sum (q + c) x comes out with no per-weight subtraction */
static void pre_q_0(float c, const float *x, int ldx, int T, int nb, float *pre) {
    const __m256 cv = _mm256_set1_ps(c);
    for (int t = 0; t < T; t++)
        for (int b = 0; b < nb; b++)
            _mm256_storeu_ps(pre + ((size_t)t * nb + b) * 8, _mm256_mul_ps(cv, sum4(x + (size_t)t * ldx + 32 * b)));
}
static void pre_q4_0(const float *x, int ldx, int T, int nb, float *pre) { pre_q_0(-8.0f, x, ldx, T, nb, pre); }
static void pre_q5_0(const float *x, int ldx, int T, int nb, float *pre) { pre_q_0(-16.0f, x, ldx, T, nb, pre); }

/* pre for Q4_K: per t, the sum of each 32 x (8 per 256-block, dotted with the block's mins) */
static void pre_q4_k(const float *x, int ldx, int T, int nb, float *pre) {
    for (int t = 0; t < T; t++)
        for (int j = 0; j < 8 * nb; j++) pre[(size_t)t * 8 * nb + j] = g4_hsum8(sum4(x + (size_t)t * ldx + 32 * j));
}

/* pre for Q6_K: per t, -32 x the sum of each 16 x (16 per block, dotted with d * scales) */
static void pre_q6_k(const float *x, int ldx, int T, int nb, float *pre) {
    for (int t = 0; t < T; t++)
        for (int j = 0; j < 16 * nb; j++) {
            const float *xj = x + (size_t)t * ldx + 16 * j;
            pre[(size_t)t * 16 * nb + j] = -32.0f * g4_hsum8(_mm256_add_ps(ld(xj), ld(xj + 8)));
        }
}

/* A pass: R rows from w (row stride rb) x T activation rows (stride ldx), nb blocks; pre has
 * ldp floats per t; out[r * T + t] */
#define PASS_ARGS const int R, const int T, const uint8_t *w, size_t rb, int nb, const float *x, int ldx, \
                  const float *pre, size_t ldp, float *out

/* Q4_0 (18 B: d, q[16] low nibbles = 0..15, high = 16..31) and Q5_0 (22 B: d, qh[4], q[16]; bit j
 * of qh is weight j's fifth bit): w0..w3 = weights 0-7, 8-15, 16-23, 24-31 */
AI void q_0_pass(const int q5, PASS_ARGS) {
    const int bb = q5 ? 22 : 18;
    const __m256i m4 = _mm256_set1_epi32(0x0F), m16 = _mm256_set1_epi32(0x10),
                  lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256 acc[4][3];
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        g4_prefetch_ahead(w + (size_t)b * R * bb, (size_t)R * bb);
        for (int r = 0; r < R; r++) {
            const uint8_t *blk = w + (size_t)r * rb + (size_t)b * bb, *qs = blk + (q5 ? 6 : 2);
            const __m256i v0 = u8x8(qs), v1 = u8x8(qs + 8);
            __m256i i0 = _mm256_and_si256(v0, m4), i1 = _mm256_and_si256(v1, m4), i2 = _mm256_srli_epi32(v0, 4),
                    i3 = _mm256_srli_epi32(v1, 4);
            if (q5) {   /* fifth bits: lane i of group k is weight 8k + i, its bit at bit 4 */
                uint32_t qh;
                memcpy(&qh, blk + 2, 4);
                const __m256i hs = _mm256_srlv_epi32(_mm256_set1_epi32((int)qh), lane);   /* qh >> i */
                i0 = _mm256_or_si256(i0, _mm256_and_si256(_mm256_slli_epi32(hs, 4), m16));
                i1 = _mm256_or_si256(i1, _mm256_and_si256(_mm256_srli_epi32(hs, 4), m16));
                i2 = _mm256_or_si256(i2, _mm256_and_si256(_mm256_srli_epi32(hs, 12), m16));
                i3 = _mm256_or_si256(i3, _mm256_and_si256(_mm256_srli_epi32(hs, 20), m16));
            }
            const __m256 w0 = _mm256_cvtepi32_ps(i0), w1 = _mm256_cvtepi32_ps(i1), w2 = _mm256_cvtepi32_ps(i2),
                         w3 = _mm256_cvtepi32_ps(i3), d = bcast_f16(blk);
            for (int t = 0; t < T; t++) {
                const float *xb = x + (size_t)t * ldx + 32 * b;
                __m256 s = _mm256_fmadd_ps(w0, ld(xb), ld(pre + t * ldp + 8 * b));
                s = _mm256_fmadd_ps(w1, ld(xb + 8), s);
                s = _mm256_fmadd_ps(w2, ld(xb + 16), s);
                s = _mm256_fmadd_ps(w3, ld(xb + 24), s);
                acc[r][t] = _mm256_fmadd_ps(d, s, acc[r][t]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) out[r * T + t] = g4_hsum8(acc[r][t]);
}
AI void q4_0_pass(PASS_ARGS) { q_0_pass(0, R, T, w, rb, nb, x, ldx, pre, ldp, out); }
AI void q5_0_pass(PASS_ARGS) { q_0_pass(1, R, T, w, rb, nb, x, ldx, pre, ldp, out); }

/* Q4_K (144 B: d, dmin, 12 B of six-bit scales / mins, q[128]; q[32g + l] holds weight 64g + l
 * in its low nibble, 64g + 32 + l in its high): sum_j d sc_j (q_j . x_j) - dmin m_j sum(x_j) */
AI void q4_k_pass(PASS_ARGS) {
    const __m256i m4 = _mm256_set1_epi32(0x0F);
    __m256 acc[4][3][2];   /* two chains per (row, t): even sub-blocks + mins, odd sub-blocks */
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) acc[r][t][0] = acc[r][t][1] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        g4_prefetch_ahead(w + (size_t)b * R * 144, (size_t)R * 144);
        for (int r = 0; r < R; r++) {
            const uint8_t *blk = w + (size_t)r * rb + (size_t)b * 144, *qs = blk + 16;
            const __m128i sm = g4_q4_k_scales_mins_bytes(blk);
            float dsc[8];
            _mm256_storeu_ps(dsc, _mm256_mul_ps(bcast_f16(blk), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sm))));
            const __m256 dm = _mm256_mul_ps(bcast_f16(blk + 2), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(sm, sm))));
            for (int t = 0; t < T; t++) acc[r][t][0] = _mm256_fnmadd_ps(dm, ld(pre + t * ldp + 8 * b), acc[r][t][0]);
            for (int g = 0; g < 4; g++) {
                __m256 slo[3], shi[3];
                for (int c = 0; c < 4; c++) {
                    const __m256i v = u8x8(qs + 32 * g + 8 * c);
                    const __m256 lo = _mm256_cvtepi32_ps(_mm256_and_si256(v, m4)),
                                 hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4));
                    for (int t = 0; t < T; t++) {
                        const float *xg = x + (size_t)t * ldx + 256 * b + 64 * g + 8 * c;
                        if (c == 0) {
                            slo[t] = _mm256_mul_ps(lo, ld(xg));
                            shi[t] = _mm256_mul_ps(hi, ld(xg + 32));
                        } else {
                            slo[t] = _mm256_fmadd_ps(lo, ld(xg), slo[t]);
                            shi[t] = _mm256_fmadd_ps(hi, ld(xg + 32), shi[t]);
                        }
                    }
                }
                for (int t = 0; t < T; t++) {
                    acc[r][t][0] = _mm256_fmadd_ps(_mm256_broadcast_ss(dsc + 2 * g), slo[t], acc[r][t][0]);
                    acc[r][t][1] = _mm256_fmadd_ps(_mm256_broadcast_ss(dsc + 2 * g + 1), shi[t], acc[r][t][1]);
                }
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) out[r * T + t] = g4_hsum8(_mm256_add_ps(acc[r][t][0], acc[r][t][1]));
}

/* Q6_K (210 B: ql[128], qh[64], int8 sc[16], d): in half h, l in [0, 32), weight 128h + 32k + l
 * is (ql[64h + l + 32(k & 1)] >> 4(k >> 1) & 15) | ((qh[32h + l] >> 2k) & 3) << 4, minus 32, with
 * scale sc[8h + 2k + l / 16] */
/* One half's 128 six-bit quants assembled as bytes, Q[k] byte l = weight 128h + 32k + l (+ 32):
 * each 256-bit operation assembles 32 weights (16-bit shifts; the masks drop the bits that cross
 * a byte) where int32 lanes assembled 8, and that integer work, not the float work, bounded the
 * loop; q6_k_pass widens them 8 at a time. The floats are the same as before. */
AI void q6_bytes(const uint8_t *ql, const uint8_t *qh, __m256i Q[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30), perm = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    const __m256i L = _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)ql), perm),
                  L2 = _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)(ql + 32)), perm),
                  H = _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)qh), perm);
    Q[0] = _mm256_or_si256(_mm256_and_si256(L, m4), _mm256_and_si256(_mm256_slli_epi16(H, 4), m30));
    Q[1] = _mm256_or_si256(_mm256_and_si256(L2, m4), _mm256_and_si256(_mm256_slli_epi16(H, 2), m30));
    Q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L, 4), m4), _mm256_and_si256(H, m30));
    Q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L2, 4), m4), _mm256_and_si256(_mm256_srli_epi16(H, 2), m30));
}
/* bytes 8c..8c+7 of a q6_bytes register (lane 0 bytes 4c..4c+3, lane 1 the same) -> int32 lanes */
AI __m256 q6_group(__m256i Q, int c) {
#define Z -1
    const __m256i g = _mm256_setr_epi8(4 * c, Z, Z, Z, 4 * c + 1, Z, Z, Z, 4 * c + 2, Z, Z, Z, 4 * c + 3, Z, Z, Z,
                                       4 * c, Z, Z, Z, 4 * c + 1, Z, Z, Z, 4 * c + 2, Z, Z, Z, 4 * c + 3, Z, Z, Z);
#undef Z
    return _mm256_cvtepi32_ps(_mm256_shuffle_epi8(Q, g));
}

AI void q6_k_pass(PASS_ARGS) {
    __m256 acc[4][3][2];   /* two chains per (row, t): scale index even / odd */
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) acc[r][t][0] = acc[r][t][1] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        g4_prefetch_ahead(w + (size_t)b * R * 210, (size_t)R * 210);
        for (int r = 0; r < R; r++) {
            const uint8_t *blk = w + (size_t)r * rb + (size_t)b * 210;
            const __m256 d = bcast_f16(blk + 208);
            float dsc[16];
            const __m256 d0 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 192))))),
                         d1 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 200)))));
            _mm256_storeu_ps(dsc, d0);
            _mm256_storeu_ps(dsc + 8, d1);
            for (int t = 0; t < T; t++) {   /* the -32: d sc_j x (-32 sum of x_j) */
                acc[r][t][0] = _mm256_fmadd_ps(d0, ld(pre + t * ldp + 16 * b), acc[r][t][0]);
                acc[r][t][1] = _mm256_fmadd_ps(d1, ld(pre + t * ldp + 16 * b + 8), acc[r][t][1]);
            }
            for (int h = 0; h < 2; h++) {
                __m256i Q[4];
                q6_bytes(blk + 64 * h, blk + 128 + 32 * h, Q);
                for (int is = 0; is < 2; is++) {
                    const float *xh = x + 256 * b + 128 * h + 16 * is;
                    __m256 s[4][3];
                    for (int k = 0; k < 4; k++) {
                        const __m256 q = q6_group(Q[k], 2 * is);
                        for (int t = 0; t < T; t++) s[k][t] = _mm256_mul_ps(q, ld(xh + (size_t)t * ldx + 32 * k));
                    }
                    for (int k = 0; k < 4; k++) {
                        const __m256 q = q6_group(Q[k], 2 * is + 1);
                        for (int t = 0; t < T; t++) s[k][t] = _mm256_fmadd_ps(q, ld(xh + (size_t)t * ldx + 32 * k + 8), s[k][t]);
                    }
                    for (int k = 0; k < 4; k++)
                        for (int t = 0; t < T; t++)
                            acc[r][t][k & 1] = _mm256_fmadd_ps(_mm256_broadcast_ss(dsc + 8 * h + 2 * k + is), s[k][t], acc[r][t][k & 1]);
                }
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) out[r * T + t] = g4_hsum8(_mm256_add_ps(acc[r][t][0], acc[r][t][1]));
}

/* The decode driver: rows in passes of RT1 rows at T = 1, 2 rows at T = 2, then single rows
 * (RT1 chosen per type by measurement: Q4_0 / Q5_0 gain from 4 rows sharing x, Q4_K / Q6_K run best one row
 * at a time, their loops already hold 16-32 independent FMAs per sub-block); K in segments whose
 * sums fit pre at T = 3 (one segment up to 341 blocks of Q4_0 / Q5_0 / Q4_K, 170 of Q6_K: every
 * real K of Q4_K / Q6_K; past that each row's segments are added in order, the same for any T). */
#define MM_DECODE(NAME, PASS, PRE, BS, BB, PB, RT1)                                                      \
    static void NAME(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {   \
        const int nb = K / BS, seg = PRE_MAX / (3 * PB);                                                 \
        const size_t rb = (size_t)nb * BB;                                                               \
        float pre[PRE_MAX], out[12] = {0};                                                                     \
        for (int b0 = 0; b0 < nb; b0 += seg) {                                                           \
            const int sn = nb - b0 < seg ? nb - b0 : seg;                                                \
            const float *xs = x + (size_t)b0 * BS;                                                       \
            const uint8_t *ws = (const uint8_t *)w + (size_t)b0 * BB;                                    \
            const size_t ldp = (size_t)sn * PB;                                                          \
            PRE(xs, K, T, sn, pre);                                                                      \
            for (int n = n0; n < n1;) {                                                                  \
                const uint8_t *wr = ws + (size_t)n * rb;                                                 \
                int R = 1;                                                                               \
                if (T == 1 && n + RT1 <= n1) PASS(RT1, 1, wr, rb, sn, xs, K, pre, ldp, out), R = RT1;    \
                else if (T == 2 && n + 2 <= n1) PASS(2, 2, wr, rb, sn, xs, K, pre, ldp, out), R = 2;     \
                else if (T == 1) PASS(1, 1, wr, rb, sn, xs, K, pre, ldp, out);                           \
                else if (T == 2) PASS(1, 2, wr, rb, sn, xs, K, pre, ldp, out);                           \
                else PASS(1, 3, wr, rb, sn, xs, K, pre, ldp, out);                                       \
                for (int r = 0; r < R; r++)                                                              \
                    for (int t = 0; t < T; t++) {                                                        \
                        float *yy = y + (size_t)t * ldy + n + r;                                         \
                        *yy = b0 ? *yy + out[r * T + t] : out[r * T + t];                                \
                    }                                                                                    \
                n += R;                                                                                  \
            }                                                                                            \
        }                                                                                                \
    }
MM_DECODE(dec_q4_0, q4_0_pass, pre_q4_0, 32, 18, 8, 4)
MM_DECODE(dec_q5_0, q5_0_pass, pre_q5_0, 32, 22, 8, 4)
MM_DECODE(dec_q4_k, q4_k_pass, pre_q4_k, 256, 144, 8, 1)
MM_DECODE(dec_q6_k, q6_k_pass, pre_q6_k, 256, 210, 16, 1)

/* decode (T < 4): fused (above); prefill: dequantized panels through the fp32 GEMM, with the
 * rows past its last full 16-row panel fused, up to 3 activation rows at a time */
#define MM_FUSED(NAME, DT, DEC)                                                                  \
    void NAME(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) { \
        g4_f16_f32_avx2_init();                                                                 \
        if (T >= 4) n0 = g4_gemm_quant_avx2(DT, x, T, K, w, n0, n1, y, ldy);                   \
        for (int t0 = 0; t0 < T && n0 < n1; t0 += 3)                                            \
            DEC(x + (size_t)t0 * K, T - t0 < 3 ? T - t0 : 3, K, w, n0, n1, y + (size_t)t0 * ldy, ldy); \
    }
MM_FUSED(g4_mm_q4_0_avx2, G4_DT_Q4_0, dec_q4_0)
MM_FUSED(g4_mm_q5_0_avx2, G4_DT_Q5_0, dec_q5_0)
MM_FUSED(g4_mm_q4_k_avx2, G4_DT_Q4_K, dec_q4_k)
MM_FUSED(g4_mm_q6_k_avx2, G4_DT_Q6_K, dec_q6_k)

/* Row-invariant multi-row decode (kernels.h matmul_rows): T activation rows through the one-row
 * kernels above, 3 at a time (each (row, t) result is the same chain of operations whatever T),
 * over blocks of ROWS_RB weight rows, so a block (at most 160 KB: 32 Q6_K rows of K 6144) stays
 * in L2 while every group of activation rows passes over it and the weights are read from DRAM
 * once. Prefill's GEMM (T >= 4 in the kernels above) sums in another order. */
enum { ROWS_RB = 32 };
#define MM_ROWS(NAME, ONE)                                                                       \
    void NAME(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) { \
        for (int n = n0; n < n1; n += ROWS_RB)                                                  \
            for (int t0 = 0; t0 < T; t0 += 3)                                                   \
                ONE(x + (size_t)t0 * K, T - t0 < 3 ? T - t0 : 3, K, w, n, n1 - n < ROWS_RB ? n1 : n + ROWS_RB, \
                    y + (size_t)t0 * ldy, ldy);                                                 \
    }
MM_ROWS(g4_mm_rows_q4_k_avx2, g4_mm_q4_k_avx2)
MM_ROWS(g4_mm_rows_q6_k_avx2, g4_mm_q6_k_avx2)
