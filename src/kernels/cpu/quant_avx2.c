/* quant_avx2.c — matmul over ggml block-quantized weights for AVX2+FMA, fused: each block's
 * quants are widened to float in registers (never stored), dotted with the activations and scaled
 * per block / sub-block (Q4_K's mins via the sum of x). Not bit-identical to dequantize-then-dot
 * (scales are applied after the sum); tests/c/test_quant.c bounds the difference. */
#pragma GCC target("avx2,fma,f16c")
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/quant.h"

/* F16C's exact half -> float (the scalar g4_f16_to_f32 is an out-of-line bit-by-bit decode, and
 * a decode step converts one scale per 32 weights) */
static inline float f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

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
                    const __m256 d = _mm256_set1_ps(f16_to_f32((uint16_t)(blk[0] | blk[1] << 8)));
                    __m256 s = _mm256_mul_ps(q8_chunk(blk + 2, 0), x0);
                    s = _mm256_fmadd_ps(q8_chunk(blk + 2, 1), x1, s);
                    s = _mm256_fmadd_ps(q8_chunk(blk + 2, 2), x2, s);
                    s = _mm256_fmadd_ps(q8_chunk(blk + 2, 3), x3, s);
                    acc[r] = _mm256_fmadd_ps(d, s, acc[r]);
                }
            }
            for (int r = 0; r < 4; r++) y[n0 + r] = hsum(acc[r]);
        }
    }
    for (int n = n0; n < n1; n++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)n * rb;
        for (int t0 = 0; t0 < T; t0 += 4) {
            const int tn = T - t0 < 4 ? T - t0 : 4;
            __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
            for (int b = 0; b < nb; b++) {
                const uint8_t *blk = row + (size_t)b * 34;
                const __m256 d = _mm256_set1_ps(f16_to_f32((uint16_t)(blk[0] | blk[1] << 8)));
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
            for (int i = 0; i < tn; i++) y[(size_t)(t0 + i) * ldy + n] = hsum(acc[i]);
        }
    }
}

/* ---- the other block types fused in registers: each 32-weight chunk becomes four 8-wide
 * float vectors of integer quants, dotted with x and scaled per chunk (or per 16). ---- */

static inline __m256 cvt8(__m256i v, int k) {   /* int8 lanes 8k..8k+7 -> float */
    __m128i h = k < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
    if (k & 1) h = _mm_srli_si128(h, 8);
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(h));
}

/* sum over the 32 lanes of q (int8) times x[0..32), as a vector: lanes 0-15 and 16-31 apart */
static inline void dot32_i8(__m256i q, const float *x, __m256 *lo, __m256 *hi) {
    *lo = _mm256_fmadd_ps(cvt8(q, 1), _mm256_loadu_ps(x + 8), _mm256_mul_ps(cvt8(q, 0), _mm256_loadu_ps(x)));
    *hi = _mm256_fmadd_ps(cvt8(q, 3), _mm256_loadu_ps(x + 24), _mm256_mul_ps(cvt8(q, 2), _mm256_loadu_ps(x + 16)));
}

/* 32 bits -> 32 bytes of 0xFF / 0x00 (bit i -> byte i) */
static inline __m256i bits_to_bytes(uint32_t b) {
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i mask = _mm256_set1_epi64x((long long)0x7fbfdfeff7fbfdfeULL);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)b), shuf);
    v = _mm256_or_si256(v, mask);
    return _mm256_cmpeq_epi8(v, _mm256_set1_epi64x(-1));
}

static inline __m256i nibbles32(const uint8_t *q16) {   /* q[16] -> low nibbles 0..15, high 16..31 */
    const __m128i v = _mm_loadu_si128((const __m128i *)q16), m = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

typedef __m256 (*blk_dot_fn)(const uint8_t *blk, const float *x);   /* one block · x, as a vector */

static __m256 blk_q4_0(const uint8_t *b, const float *x) {
    const float d = f16_to_f32((uint16_t)(b[0] | b[1] << 8));
    __m256 lo, hi;
    dot32_i8(_mm256_sub_epi8(nibbles32(b + 2), _mm256_set1_epi8(8)), x, &lo, &hi);
    return _mm256_mul_ps(_mm256_set1_ps(d), _mm256_add_ps(lo, hi));
}

static __m256 blk_q5_0(const uint8_t *b, const float *x) {
    const float d = f16_to_f32((uint16_t)(b[0] | b[1] << 8));
    uint32_t qh;
    memcpy(&qh, b + 2, 4);
    __m256i q = _mm256_or_si256(nibbles32(b + 6), _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10)));
    __m256 lo, hi;
    dot32_i8(_mm256_sub_epi8(q, _mm256_set1_epi8(16)), x, &lo, &hi);
    return _mm256_mul_ps(_mm256_set1_ps(d), _mm256_add_ps(lo, hi));
}

static inline void k4_scale_min(int j, const uint8_t *q, int *d, int *m) {   /* get_scale_min_k4 */
    if (j < 4) { *d = q[j] & 63; *m = q[j + 4] & 63; }
    else { *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4); *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4); }
}

static __m256 blk_q4_k(const uint8_t *b, const float *x) {   /* sum_j d*sc_j*(q·x) - dmin*m_j*sum(x) */
    const float d = f16_to_f32((uint16_t)(b[0] | b[1] << 8)), dmin = f16_to_f32((uint16_t)(b[2] | b[3] << 8));
    const uint8_t *sc = b + 4, *qs = b + 16;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    for (int g = 0; g < 4; g++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * g));
        for (int h = 0; h < 2; h++) {
            const int j = 2 * g + h;
            const float *xj = x + 32 * j;
            __m256i q = h ? _mm256_and_si256(_mm256_srli_epi16(v, 4), m4) : _mm256_and_si256(v, m4);
            int s, m;
            k4_scale_min(j, sc, &s, &m);
            __m256 lo, hi;
            dot32_i8(q, xj, &lo, &hi);
            const __m256 sx = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(xj), _mm256_loadu_ps(xj + 8)),
                                            _mm256_add_ps(_mm256_loadu_ps(xj + 16), _mm256_loadu_ps(xj + 24)));
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d * (float)s), _mm256_add_ps(lo, hi), acc);
            acc = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * (float)m), sx, acc);
        }
    }
    return acc;
}

static __m256 blk_q6_k(const uint8_t *b, const float *x) {
    const float d = f16_to_f32((uint16_t)(b[208] | b[209] << 8));
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30), c32 = _mm256_set1_epi8(32);
    __m256 acc = _mm256_setzero_ps();
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
        const int8_t *sc = (const int8_t *)(b + 192 + 8 * h);
        const __m256i L = _mm256_loadu_si256((const __m256i *)ql), L2 = _mm256_loadu_si256((const __m256i *)(ql + 32)),
                      H = _mm256_loadu_si256((const __m256i *)qh);
        __m256i q[4];
        q[0] = _mm256_or_si256(_mm256_and_si256(L, m4), _mm256_and_si256(_mm256_slli_epi16(H, 4), m30));
        q[1] = _mm256_or_si256(_mm256_and_si256(L2, m4), _mm256_and_si256(_mm256_slli_epi16(H, 2), m30));
        q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L, 4), m4), _mm256_and_si256(H, m30));
        q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L2, 4), m4), _mm256_and_si256(_mm256_srli_epi16(H, 2), m30));
        for (int r = 0; r < 4; r++) {
            __m256 lo, hi;
            dot32_i8(_mm256_sub_epi8(q[r], c32), x + 128 * h + 32 * r, &lo, &hi);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d * (float)sc[2 * r]), lo, acc);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d * (float)sc[2 * r + 1]), hi, acc);
        }
    }
    return acc;
}

static void mm_fused(blk_dot_fn f, int bs, size_t bb, const float *x, int T, int K, const void *w, int n0,
                     int n1, float *y, int ldy) {
    const int nb = K / bs;
    const size_t rb = (size_t)nb * bb;
    for (int n = n0; n < n1; n++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)n * rb;
        for (int t = 0; t < T; t++) {
            const float *xr = x + (size_t)t * K;
            __m256 acc = _mm256_setzero_ps();
            for (int b = 0; b < nb; b++) {
                if (T == 1) g4_prefetch_ahead(row + (size_t)b * bb, bb);   /* decode: one stream */
                acc = _mm256_add_ps(acc, f(row + (size_t)b * bb, xr + (size_t)b * bs));
            }
            y[(size_t)t * ldy + n] = hsum(acc);
        }
    }
}

/* decode (T < 4): fused per block; prefill: dequantized panels through the fp32 GEMM, with the
 * rows past its last full 16-row panel fused */
#define MM_FUSED(NAME, DT, F, BS, BB)                                                           \
    void NAME(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) { \
        if (T >= 4) n0 = g4_gemm_quant_avx2(DT, x, T, K, w, n0, n1, y, ldy);                   \
        mm_fused(F, BS, BB, x, T, K, w, n0, n1, y, ldy);                                        \
    }
MM_FUSED(g4_mm_q4_0_avx2, G4_DT_Q4_0, blk_q4_0, 32, 18)
MM_FUSED(g4_mm_q5_0_avx2, G4_DT_Q5_0, blk_q5_0, 32, 22)
MM_FUSED(g4_mm_q4_k_avx2, G4_DT_Q4_K, blk_q4_k, 256, 144)
MM_FUSED(g4_mm_q6_k_avx2, G4_DT_Q6_K, blk_q6_k, 256, 210)
