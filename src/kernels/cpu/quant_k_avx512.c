/* quant_k_avx512.c — exact decode (1-3 activation rows) over Q4_K and Q6_K weights on AVX-512
 * F/BW/VL: the AVX2 kernels' float contract (quant_avx2.c: float32 activations, per sub-block the
 * float32 sum of q * x, then the sub-block's scale / min applied by multiply-adds), on 16 lanes.
 * The widening is the cost on AVX2 (more than the float work), so here it is done on whole
 * vectors: Q4_K's nibbles as 16 bytes zero-extended to 16 int32 lanes straight from memory (a
 * mask and a shift give two sub-blocks' lanes); Q6_K's six-bit quants assembled 64 bytes per
 * operation, minus 32 in the bytes (so no per-call sums of x for its offset), then sign-extended.
 * The lanes sum in another order than AVX2's 8, so the results differ from the avx2 path's in the
 * last bits (tests/c/test_quant.c bounds both against dequantize-then-dot); each (row, t) result is
 * the same chain of operations whatever T, the row range or the thread count (row invariance,
 * tests/c/test_rows_invariant.c). Prefill (T >= 4) stays on the AVX2 kernels and their GEMM. */
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/quant.h"
#include "kernels/cpu/q4_k_scales_avx512.h"

#define AI static inline __attribute__((always_inline))

static inline float f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }
static inline float ld_f16(const uint8_t *p) { return f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }
static inline __m512 ld(const float *p) { return _mm512_loadu_ps(p); }
static inline __m128i ld16(const uint8_t *p) { return _mm_loadu_si128((const __m128i *)p); }

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float hsum16(__m512 v) {
    return hsum8(_mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

/* Stores the compiler cannot see through, so that the loads after them stay loads: a scale
 * broadcast from memory (vbroadcastss m32) and a widening from memory (vpmovsxbd m128) each run on
 * the load ports, where from a register they take a shuffle uop on port 5, which 512-bit code
 * shares with half of the float work */
static inline void store_opaque16(float *p, __m512 v) { __asm__("vmovups %1, %0" : "=m"(*(float(*)[16])p) : "v"(v)); }
static inline void store_opaque64(uint8_t *p, __m512i v) { __asm__("vmovdqu64 %1, %0" : "=m"(*(uint8_t(*)[64])p) : "v"(v)); }

enum { PRE_MAX = 8192 };   /* Q4_K's per-call sums of x on the stack: 8 per block and row, 3 rows */

/* Q4_K's pre: per t, the sum of each 32 x (8 per 256-block, dotted with the block's mins) */
static void pre_q4_k(const float *x, int ldx, int T, int nb, float *pre) {
    for (int t = 0; t < T; t++)
        for (int j = 0; j < 8 * nb; j++) {
            const float *xj = x + (size_t)t * ldx + 32 * j;
            pre[(size_t)t * 8 * nb + j] = hsum16(_mm512_add_ps(ld(xj), ld(xj + 16)));
        }
}

/* A Q4_K block's d sc_j and dmin m_j (j < 8) as 16 floats, stored for the kernel's broadcasts */
AI void q4_k_scales(const uint8_t *blk, float dsc[16]) { store_opaque16(dsc, g4_q4_k_scales16_avx512(blk)); }

/* Q4_K (144 B: d, dmin, 12 B of six-bit scales / mins, q[128]; q[32g + l] holds weight 64g + l
 * in its low nibble, 64g + 32 + l in its high): one weight row x T activation rows (stride ldx),
 * nb blocks; out[t] = sum_j d sc_j (q_j . x_j) - dmin m_j sum(x_j). Four chains per t (the
 * sub-block's parity and g's), the mins in a fifth of 8 lanes. */
AI void q4_k_pass(const int T, const uint8_t *w, int nb, const float *x, int ldx, const float *pre, size_t ldp,
                  float *out) {
    /* the low nibble as float by a table lookup (vpermps reads the index's low 4 bits: no mask, no
     * conversion), the high by a shift and a conversion: the work split between ports 0 and 5 */
    const __m512 nib = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512 acc[3][4];
    __m256 accm[3];
    for (int t = 0; t < T; t++) {
        for (int c = 0; c < 4; c++) acc[t][c] = _mm512_setzero_ps();
        accm[t] = _mm256_setzero_ps();
    }
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = w + (size_t)b * 144, *qs = blk + 16;
        g4_prefetch_ahead(blk, 144);
        float dsc[16];   /* d sc_j (j < 8), then dmin m_j */
        q4_k_scales(blk, dsc);
        const __m256 dm = _mm256_loadu_ps(dsc + 8);
        for (int t = 0; t < T; t++) accm[t] = _mm256_fnmadd_ps(dm, _mm256_loadu_ps(pre + t * ldp + 8 * b), accm[t]);
        for (int g = 0; g < 4; g++) {
            const __m512i v0 = _mm512_cvtepu8_epi32(ld16(qs + 32 * g)), v1 = _mm512_cvtepu8_epi32(ld16(qs + 32 * g + 16));
            const __m512 lo0 = _mm512_permutexvar_ps(v0, nib), lo1 = _mm512_permutexvar_ps(v1, nib),
                         hi0 = _mm512_cvtepi32_ps(_mm512_srli_epi32(v0, 4)), hi1 = _mm512_cvtepi32_ps(_mm512_srli_epi32(v1, 4));
            const __m512 slo = _mm512_set1_ps(dsc[2 * g]), shi = _mm512_set1_ps(dsc[2 * g + 1]);
            for (int t = 0; t < T; t++) {
                const float *xg = x + (size_t)t * ldx + 256 * b + 64 * g;
                const __m512 a = _mm512_fmadd_ps(lo1, ld(xg + 16), _mm512_mul_ps(lo0, ld(xg)));
                const __m512 h = _mm512_fmadd_ps(hi1, ld(xg + 48), _mm512_mul_ps(hi0, ld(xg + 32)));
                acc[t][2 * (g & 1)] = _mm512_fmadd_ps(slo, a, acc[t][2 * (g & 1)]);
                acc[t][2 * (g & 1) + 1] = _mm512_fmadd_ps(shi, h, acc[t][2 * (g & 1) + 1]);
            }
        }
    }
    for (int t = 0; t < T; t++)
        out[t] = hsum16(_mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]), _mm512_add_ps(acc[t][2], acc[t][3]))) +
                 hsum8(accm[t]);
}

/* Q6_K (210 B: ql[128], qh[64], int8 sc[16], d): in half h, l in [0, 32), weight 128h + 32k + l
 * is (ql[64h + l + 32(k & 1)] >> 4(k >> 1) & 15) | ((qh[32h + l] >> 2k) & 3) << 4, minus 32, with
 * scale sc[8h + 2k + l / 16]. A half's 128 quants as two 64-byte vectors: k = 0, 1 from ql's low
 * nibbles and qh shifted left by 4 / 2 (per 256-bit half), k = 2, 3 from the high nibbles and qh
 * shifted right by 0 / 2 (16-bit shifts; the masks drop the bits that cross a byte). Byte 16j + i
 * of the pair is weight 128h + 16j + i, of sub-block 8h + j: 16 lanes, one sub-block. */
AI void q6_k_pass(const int T, const uint8_t *w, int nb, const float *x, int ldx, float *out) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30), c32 = _mm512_set1_epi8(32);
    const __m512i sl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1),
                  sr = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    __m512 acc[3][4];
    for (int t = 0; t < T; t++)
        for (int c = 0; c < 4; c++) acc[t][c] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = w + (size_t)b * 210;
        g4_prefetch_ahead(blk, 210);
        float dsc[16];
        uint8_t qb[128] __attribute__((aligned(64)));
        store_opaque16(dsc, _mm512_mul_ps(_mm512_set1_ps(ld_f16(blk + 208)), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(ld16(blk + 192)))));
        for (int h = 0; h < 2; h++) {
            const __m512i L = _mm512_loadu_si512(blk + 64 * h),
                          H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h)));
            /* (A & m4) | B: ternary-logic 0xEA */
            const __m512i q01 = _mm512_ternarylogic_epi32(L, m4, _mm512_and_si512(_mm512_sllv_epi16(H, sl), m30), 0xEA),
                          q23 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(L, 4), m4,
                                                          _mm512_and_si512(_mm512_srlv_epi16(H, sr), m30), 0xEA);
            store_opaque64(qb, _mm512_sub_epi8(q01, c32));
            store_opaque64(qb + 64, _mm512_sub_epi8(q23, c32));
            for (int j = 0; j < 8; j++) {
                const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(qb + 16 * j)))),
                             s = _mm512_set1_ps(dsc[8 * h + j]);
                for (int t = 0; t < T; t++)
                    acc[t][j & 3] = _mm512_fmadd_ps(s, _mm512_mul_ps(q, ld(x + (size_t)t * ldx + 256 * b + 128 * h + 16 * j)),
                                                    acc[t][j & 3]);
            }
        }
    }
    for (int t = 0; t < T; t++)
        out[t] = hsum16(_mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]), _mm512_add_ps(acc[t][2], acc[t][3])));
}

/* T (1-3) activation rows x weight rows [n0, n1), one weight row per pass; Q4_K's K in segments
 * whose sums fit pre at T = 3 (one segment up to 341 blocks: every real K; past that each row's
 * segments are added in order, the same for any T). */
static void dec_q4_k(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    const int nb = K / 256, seg = PRE_MAX / (3 * 8);
    const size_t rb = (size_t)nb * 144;
    float pre[PRE_MAX], out[3];
    for (int b0 = 0; b0 < nb; b0 += seg) {
        const int sn = nb - b0 < seg ? nb - b0 : seg;
        const float *xs = x + (size_t)b0 * 256;
        const uint8_t *ws = (const uint8_t *)w + (size_t)b0 * 144;
        const size_t ldp = (size_t)sn * 8;
        pre_q4_k(xs, K, T, sn, pre);
        for (int n = n0; n < n1; n++) {
            const uint8_t *wr = ws + (size_t)n * rb;
            if (T == 1) q4_k_pass(1, wr, sn, xs, K, pre, ldp, out);
            else if (T == 2) q4_k_pass(2, wr, sn, xs, K, pre, ldp, out);
            else q4_k_pass(3, wr, sn, xs, K, pre, ldp, out);
            for (int t = 0; t < T; t++) {
                float *yy = y + (size_t)t * ldy + n;
                *yy = b0 ? *yy + out[t] : out[t];
            }
        }
    }
}

static void dec_q6_k(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    const int nb = K / 256;
    const size_t rb = (size_t)nb * 210;
    float out[3];
    for (int n = n0; n < n1; n++) {
        const uint8_t *wr = (const uint8_t *)w + (size_t)n * rb;
        if (T == 1) q6_k_pass(1, wr, nb, x, K, out);
        else if (T == 2) q6_k_pass(2, wr, nb, x, K, out);
        else q6_k_pass(3, wr, nb, x, K, out);
        for (int t = 0; t < T; t++) y[(size_t)t * ldy + n] = out[t];
    }
}

/* kernels.h matmul: decode here, 3 activation rows at a time; prefill (T >= 4) the AVX2 path's */
#define MM_K512(NAME, AVX2, DEC)                                                                  \
    void NAME(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) { \
        if (T >= 4) {                                                                           \
            AVX2(x, T, K, w, n0, n1, y, ldy);                                                   \
            return;                                                                             \
        }                                                                                       \
        DEC(x, T, K, w, n0, n1, y, ldy);                                                        \
    }
MM_K512(g4_mm_q4_k_avx512, g4_mm_q4_k_avx2, dec_q4_k)
MM_K512(g4_mm_q6_k_avx512, g4_mm_q6_k_avx2, dec_q6_k)

/* kernels.h matmul_rows: any T through the decode above, 3 rows at a time over blocks of
 * ROWS_RB weight rows (160 KB: 32 Q6_K rows of K 6144), so a block stays in L2 while every
 * group of activation rows passes over it and the weights come from DRAM once */
enum { ROWS_RB = 32 };
#define MM_ROWS(NAME, DEC)                                                                       \
    void NAME(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) { \
        for (int n = n0; n < n1; n += ROWS_RB)                                                  \
            for (int t0 = 0; t0 < T; t0 += 3)                                                   \
                DEC(x + (size_t)t0 * K, T - t0 < 3 ? T - t0 : 3, K, w, n, n1 - n < ROWS_RB ? n1 : n + ROWS_RB, \
                    y + (size_t)t0 * ldy, ldy);                                                 \
    }
MM_ROWS(g4_mm_rows_q4_k_avx512, dec_q4_k)
MM_ROWS(g4_mm_rows_q6_k_avx512, dec_q6_k)
