/* quant_k_avx512.c — exact decode (1-16 activation rows) over Q4_K and Q6_K weights on AVX-512
 * F/BW/VL: float32 activations times each weight as g4_dequant_row gives it, summed by FMA in one
 * chain of 16 lanes per (weight row, activation row). A weight is made in registers and shared by
 * every activation row of the call: Q4_K's nibbles (IQ4_XS's, Q2_K's and Q3_K's quants alike)
 * index a sub-block's table of its possible weights (vpermps); Q6_K's six-bit quants are assembled
 * 64 bytes per operation, minus 32 in the bytes, then widened and scaled. The AVX2 kernels (quant_avx2.c) apply a sub-block's scale after its
 * sum instead, so the two paths differ in the last bits (tests/c/test_quant.c bounds both against
 * dequantize-then-dot and checks this file's chain bit for bit); each (row, t) result is the same
 * chain whatever T, the row range or the thread count (row invariance,
 * tests/c/test_rows_invariant.c). Prefill (T >= 4 through matmul) stays on the AVX2 kernels and
 * their GEMM. */
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/quant.h"
#include "kernels/cpu/quant_simd.h"
#include "kernels/cpu/q4_k_scales_avx512.h"

#define AI static inline __attribute__((always_inline))

static inline __m512 ld(const float *p) { return _mm512_loadu_ps(p); }
static inline __m128i ld16(const uint8_t *p) { return _mm_loadu_si128((const __m128i *)p); }



/* A block's scales stored for the kernel's broadcasts: Q4_K's d sc_j (j < 8), then dmin m_j */
AI void q4_k_scales(const uint8_t *blk, float dsc[16]) { g4_store_opaque16f(dsc, g4_q4_k_scales16_avx512(blk)); }

/* Q6_K's d sc_j (j < 16), exact in float (11 by 8 significant bits) */
AI void q6_k_scales(const uint8_t *blk, float dsc[16]) {
    g4_store_opaque16f(dsc, _mm512_mul_ps(_mm512_set1_ps(g4_ld_f16(blk + 208)), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(ld16(blk + 192)))));
}

/* Each pass below takes NW weight rows (stride rb) by T activation rows (stride ldx) over nb
 * blocks: out[r * T + t] = sum_k w_k x_k, w_k the weight as g4_dequant_row gives it, summed in one
 * chain per (r, t) of 16 lanes (lane l: k = l, 16 + l, 32 + l, ... in order, one FMA each), then
 * the fixed tree hsum16. Every (r, t) result is that one chain whatever NW and T (row invariance).
 * The NW x T tile shares each dequantized weight vector among T activation rows and each
 * activation vector among NW weight rows (T rows of x outgrow L1 at real K and stream from L2). */
#define TILE_ZERO(acc)                                                                                      \
    for (int r = 0; r < NW; r++)                                                                            \
        for (int t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps()
#define TILE_FMA(acc, wv, k)                                                                                \
    for (int t = 0; t < T; t++) {                                                                           \
        __m512 xv = ld(x + (size_t)t * ldx + (k));                                                          \
        if (NW > 1) G4_IN_REGISTER(xv); /* one load for the NW weight rows, not one folded into each */     \
        for (int r = 0; r < NW; r++) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);                   \
    }
#define TILE_OUT(acc)                                                                                       \
    for (int r = 0; r < NW; r++)                                                                            \
        for (int t = 0; t < T; t++) out[r * T + t] = g4_hsum16(acc[r][t])

/* Q4_K (144 B: d, dmin, 12 B of six-bit scales / mins, q[128]; q[32g + l] holds weight 64g + l in
 * its low nibble, 64g + 32 + l in its high): a sub-block's 16 possible weights (d sc) * q - dmin m
 * (g4_dequant_row's operations) as a table that vpermps indexes by the quant (it reads an index's
 * low 4 bits: no mask, no conversion), so 16 nibbles become their weights in one operation. */
AI void q4_k_pass(const int NW, const int T, const uint8_t *w, size_t rb, int nb, const float *x, int ldx,
                  float *out) {
    const __m512 nib = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512 acc[4][8];
    TILE_ZERO(acc);
    for (int b = 0; b < nb; b++) {
        float dsc[4][16];
        for (int r = 0; r < NW; r++) {
            const uint8_t *blk = w + (size_t)r * rb + (size_t)b * 144;
            g4_prefetch_ahead(blk, 144);
            q4_k_scales(blk, dsc[r]);
        }
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            __m512 tl[4], th[4], wv[4];
            __m512i v0[4], v1[4];
            for (int r = 0; r < NW; r++) {
                const uint8_t *qs = w + (size_t)r * rb + (size_t)b * 144 + 16 + 32 * g;
                tl[r] = _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(dsc[r][2 * g]), nib), _mm512_set1_ps(dsc[r][8 + 2 * g]));
                th[r] = _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(dsc[r][2 * g + 1]), nib), _mm512_set1_ps(dsc[r][9 + 2 * g]));
                v0[r] = _mm512_cvtepu8_epi32(ld16(qs));
                v1[r] = _mm512_cvtepu8_epi32(ld16(qs + 16));
            }
            const int k = 256 * b + 64 * g;
            for (int r = 0; r < NW; r++) wv[r] = _mm512_permutexvar_ps(v0[r], tl[r]);
            TILE_FMA(acc, wv, k);
            for (int r = 0; r < NW; r++) wv[r] = _mm512_permutexvar_ps(v1[r], tl[r]);
            TILE_FMA(acc, wv, k + 16);
            for (int r = 0; r < NW; r++) wv[r] = _mm512_permutexvar_ps(_mm512_srli_epi32(v0[r], 4), th[r]);
            TILE_FMA(acc, wv, k + 32);
            for (int r = 0; r < NW; r++) wv[r] = _mm512_permutexvar_ps(_mm512_srli_epi32(v1[r], 4), th[r]);
            TILE_FMA(acc, wv, k + 48);
        }
    }
    TILE_OUT(acc);
}

/* Q6_K (210 B: ql[128], qh[64], int8 sc[16], d): in half h, l in [0, 32), weight 128h + 32k + l
 * is (ql[64h + l + 32(k & 1)] >> 4(k >> 1) & 15) | ((qh[32h + l] >> 2k) & 3) << 4, minus 32, with
 * scale sc[8h + 2k + l / 16]. A half's 128 quants as two 64-byte vectors: k = 0, 1 from ql's low
 * nibbles and qh shifted left by 4 / 2 (per 256-bit half), k = 2, 3 from the high nibbles and qh
 * shifted right by 0 / 2 (16-bit shifts; the masks drop the bits that cross a byte). Byte 16j + i
 * of the pair is weight 128h + 16j + i, of sub-block 8h + j: 16 lanes, one sub-block; its weights
 * (d sc) * (q - 32), g4_dequant_row's operations. */
AI void q6_k_pass(const int NW, const int T, const uint8_t *w, size_t rb, int nb, const float *x, int ldx,
                  float *out) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30), c32 = _mm512_set1_epi8(32);
    const __m512i sl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1),
                  sr = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    __m512 acc[4][8];
    TILE_ZERO(acc);
    for (int b = 0; b < nb; b++) {
        float dsc[4][16];
        uint8_t qb[4][128] __attribute__((aligned(64)));
        for (int r = 0; r < NW; r++) {
            const uint8_t *blk = w + (size_t)r * rb + (size_t)b * 210;
            g4_prefetch_ahead(blk, 210);
            q6_k_scales(blk, dsc[r]);
        }
        for (int h = 0; h < 2; h++) {
            for (int r = 0; r < NW; r++) {
                const uint8_t *blk = w + (size_t)r * rb + (size_t)b * 210;
                const __m512i L = _mm512_loadu_si512(blk + 64 * h),
                              H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h)));
                /* (A & m4) | B: ternary-logic 0xEA */
                const __m512i q01 = _mm512_ternarylogic_epi32(L, m4, _mm512_and_si512(_mm512_sllv_epi16(H, sl), m30), 0xEA),
                              q23 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(L, 4), m4,
                                                              _mm512_and_si512(_mm512_srlv_epi16(H, sr), m30), 0xEA);
                g4_store_opaque64(qb[r], _mm512_sub_epi8(q01, c32));
                g4_store_opaque64(qb[r] + 64, _mm512_sub_epi8(q23, c32));
            }
            for (int j = 0; j < 8; j++) {
                __m512 wv[4];
                for (int r = 0; r < NW; r++)
                    wv[r] = _mm512_mul_ps(_mm512_set1_ps(dsc[r][8 * h + j]),
                                          _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(qb[r] + 16 * j)))));
                TILE_FMA(acc, wv, 256 * b + 128 * h + 16 * j);
            }
        }
    }
    TILE_OUT(acc);
}

/* Q5_K (176 B: d, dmin, 12 B of six-bit scales / mins, qh[32], q[128]): sub-block j's weight l
 * (j < 8, l < 32) has the low (j even) or high (j odd) nibble of q[32 (j / 2) + l] and fifth bit j
 * of qh[l]. A sub-block pair's 64 five-bit quants are assembled as bytes in weight order, 64 per
 * operation (16-bit shifts by half: the low nibbles and bit 2g into bytes 0-31, the high nibbles
 * and bit 2g + 1 into bytes 32-63; the masks drop the bits that cross a byte), then widened and
 * made weights (d sc) q - dmin m, g4_dequant_row's operations (d sc q is exact in float: 11 + 6 + 5
 * significant bits, so one fmsub rounds as they do). */
/* A Q5_K block's scales (as Q4_K's: the same 16 bytes of d, dmin and scales) and its 256 quants
 * as bytes in weight order */
AI void q5_k_unpack(const uint8_t *blk, uint8_t qb[256], float dsc[32]) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m16 = _mm512_set1_epi8(0x10);
    const __m512i nib_shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    q4_k_scales(blk, dsc);
    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 16)));
    for (int g = 0; g < 4; g++) {
        const __m512i L = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 48 + 32 * g)));
        const __m512i hs = _mm512_inserti64x4(_mm512_set1_epi16((short)(2 * g)), _mm256_set1_epi16((short)(2 * g + 1)), 1);
        const __m512i bit = _mm512_slli_epi16(_mm512_srlv_epi16(qh, hs), 4);
        /* (bit & m16) | the masked nibble: ternary-logic 0xEA */
        g4_store_opaque64(qb + 64 * g, _mm512_ternarylogic_epi32(bit, m16, _mm512_and_si512(_mm512_srlv_epi16(L, nib_shift), m4), 0xEA));
    }
}

/* Q3_K's sub-block scales d (sc_s - 32), s < 16, exact in float */
AI void q3_k_scales(const uint8_t *blk, float dsc[16]) {
    const __m128i sc = g4_q3_k_scales_m32(blk + 96);
    g4_store_opaque16f(dsc, _mm512_mul_ps(_mm512_set1_ps(g4_ld_f16(blk + 108)), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc))));
}

/* Q2_K's sub-block scales d (scales[s] & 15), then its mins dmin (scales[s] >> 4), s < 16 */
AI void q2_k_scales(const uint8_t *blk, float dsc[32]) {
    const __m128i sm = ld16(blk), m15 = _mm_set1_epi8(0xF);
    g4_store_opaque16f(dsc, _mm512_mul_ps(_mm512_set1_ps(g4_ld_f16(blk + 80)), _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(sm, m15)))));
    g4_store_opaque16f(dsc + 16, _mm512_mul_ps(_mm512_set1_ps(g4_ld_f16(blk + 82)),
                                               _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(sm, 4), m15)))));
}

/* Q2_K and Q3_K as Q4_K's tables: a 16-weight sub-block's possible weights as a table that
 * vpermps indexes by the quant, read as it lies in the bytes zero-extended into int32 lanes and
 * shifted (vpermps reads an index's low 4 bits; the tables repeat, so the bits above the quant do
 * not matter): no unpacking into bytes, no conversion. Each weight is the value g4_dequant_row
 * gives, in the one chain of TILE_FMA. Weight 128h + 32j + l (l < 32) of both is bits 2j, 2j + 1 of
 * qs[32h + l], in sub-block s = 8h + 2j + l / 16; a vector is weights 128h + 32j + 16c + (0..15),
 * the bytes qs[32h + 16c ...].
 * Q2_K (84 B: scales[16], qs[64], d, dmin): weight d sc_s q - dmin m_s, as g4_dequant_row's multiply
 * and subtract (one fmsub would take its second scale through a broadcast of its own, a shuffle).
 * Q3_K (110 B: hmask[32], qs[64], scales[12], d): weight d (sc_s - 32) times the two bits minus 4
 * unless bit 4h + j of hmask[l] is set (exact products); the index takes that bit as its bit 2,
 * shifted into place (a ternary-logic select). */
AI __m512i shift_to(__m512i v, int n) { return n >= 0 ? _mm512_srli_epi32(v, n) : _mm512_slli_epi32(v, -n); }
AI void k23_pass(const int q3, const int NW, const int T, const uint8_t *w, size_t rb, int nb, const float *x, int ldx,
                 float *out) {
    const size_t bb = q3 ? 110 : 84, qs_at = q3 ? 32 : 16;
    const __m512 lut = q3 ? _mm512_setr_ps(-4, -3, -2, -1, 0, 1, 2, 3, -4, -3, -2, -1, 0, 1, 2, 3)
                          : _mm512_setr_ps(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3);
    const __m512i two_bits = _mm512_set1_epi32(3);
    __m512 acc[4][8];
    TILE_ZERO(acc);
    for (int b = 0; b < nb; b++) {
        float dsc[4][32];   /* Q2_K: scales, then mins; Q3_K: scales */
        __m512i hm[4][2];   /* Q3_K's hmask bytes */
        for (int r = 0; r < NW; r++) {
            const uint8_t *blk = w + (size_t)r * rb + (size_t)b * bb;
            g4_prefetch_ahead(blk, bb);
            if (q3) q3_k_scales(blk, dsc[r]);
            else q2_k_scales(blk, dsc[r]);
            for (int c = 0; c < 2; c++) hm[r][c] = q3 ? _mm512_cvtepu8_epi32(ld16(blk + 16 * c)) : _mm512_setzero_si512();
        }
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m512i q[4][2];
            for (int r = 0; r < NW; r++)
                for (int c = 0; c < 2; c++) q[r][c] = _mm512_cvtepu8_epi32(ld16(w + (size_t)r * rb + (size_t)b * bb + qs_at + 32 * h + 16 * c));
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++)
#pragma GCC unroll 2
                for (int c = 0; c < 2; c++) {
                    const int sb = 8 * h + 2 * j + c;
                    __m512 wv[4];
                    for (int r = 0; r < NW; r++) {
                        const __m512i qj = _mm512_srli_epi32(q[r][c], 2 * j);
                        const __m512 tab = _mm512_mul_ps(_mm512_set1_ps(dsc[r][sb]), lut);
                        /* Q3_K: bits 0-1 from the quants, the rest from the hmask (0xE4 = C ? A : B) */
                        wv[r] = q3 ? _mm512_permutexvar_ps(_mm512_ternarylogic_epi32(qj, shift_to(hm[r][c], 4 * h + j - 2), two_bits, 0xE4), tab)
                                   : _mm512_permutexvar_ps(qj, _mm512_sub_ps(tab, _mm512_set1_ps(dsc[r][16 + sb])));
                    }
                    TILE_FMA(acc, wv, 256 * b + 128 * h + 32 * j + 16 * c);
                }
        }
    }
    TILE_OUT(acc);
}
#define q2_k_pass(...) k23_pass(0, __VA_ARGS__)
#define q3_k_pass(...) k23_pass(1, __VA_ARGS__)

/* Q5_K's pass: a block's quants unpacked to bytes (q5_k_unpack), a weight vector 16 of them widened
 * and made (d sc) q - dmin m (unsigned quants, the product exact: one rounding as g4_dequant_row's
 * multiply and subtract) */
AI void q5_k_pass(const int NW, const int T, const uint8_t *w, size_t rb, int nb, const float *x, int ldx,
                  float *out) {
    __m512 acc[4][8];
    TILE_ZERO(acc);
    /* block b + 1 is unpacked while block b's products run, so that its widening loads do not wait
     * on the stores just made (the AVX2 kernel's one-row decode was 1.6x slower where they did) */
    float dsc[2][4][32];
    uint8_t qb[2][4][256] __attribute__((aligned(64)));
    for (int r = 0; r < NW; r++) q5_k_unpack(w + (size_t)r * rb, qb[0][r], dsc[0][r]);
    for (int b = 0; b < nb; b++) {
        const int p = b & 1;
        if (b + 1 < nb)
            for (int r = 0; r < NW; r++) {
                const uint8_t *blk = w + (size_t)r * rb + (size_t)(b + 1) * 176;
                g4_prefetch_ahead(blk, 176);
                q5_k_unpack(blk, qb[p ^ 1][r], dsc[p ^ 1][r]);
            }
        for (int v = 0; v < 16; v++) {
            __m512 wv[4];
            for (int r = 0; r < NW; r++) {
                const __m128i q = _mm_load_si128((const __m128i *)(qb[p][r] + 16 * v));
                wv[r] = _mm512_fmsub_ps(_mm512_set1_ps(dsc[p][r][v / 2]), _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(q)),
                                        _mm512_set1_ps(dsc[p][r][8 + v / 2]));
            }
            TILE_FMA(acc, wv, 256 * b + 16 * v);
        }
    }
    TILE_OUT(acc);
}

/* IQ4_XS (136 B: d, scales_h, scales_l[4], q[128]; sub-block ib's weight j < 16 the low nibble of
 * q[16 ib + j], 16 + j its high one): a sub-block's 16 possible weights (d (ls - 32)) kvalue
 * (g4_dequant_row's operations: d (ls - 32) exact, its product with the kvalue rounded once) as a
 * table that vpermps indexes by the nibble, as Q4_K's */
AI void iq4_xs_pass(const int NW, const int T, const uint8_t *w, size_t rb, int nb, const float *x, int ldx,
                    float *out) {
    const __m512 kv = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)g4_kvalues_iq4nl)));
    __m512 acc[4][8];
    TILE_ZERO(acc);
    for (int b = 0; b < nb; b++) {
        for (int r = 0; r < NW; r++) g4_prefetch_ahead(w + (size_t)r * rb + (size_t)b * 136, 136);
        for (int ib = 0; ib < 8; ib++) {
            __m512 tab[4], wv[4];
            __m512i v[4];
            for (int r = 0; r < NW; r++) {
                const uint8_t *blk = w + (size_t)r * rb + (size_t)b * 136;
                tab[r] = _mm512_mul_ps(_mm512_set1_ps(g4_ld_f16(blk) * (float)(g4_iq4_xs_scale(blk, ib) - 32)), kv);
                v[r] = _mm512_cvtepu8_epi32(ld16(blk + 8 + 16 * ib));
            }
            for (int r = 0; r < NW; r++) wv[r] = _mm512_permutexvar_ps(v[r], tab[r]);
            TILE_FMA(acc, wv, 256 * b + 32 * ib);
            for (int r = 0; r < NW; r++) wv[r] = _mm512_permutexvar_ps(_mm512_srli_epi32(v[r], 4), tab[r]);
            TILE_FMA(acc, wv, 256 * b + 32 * ib + 16);
        }
    }
    TILE_OUT(acc);
}

/* T (1-8) activation rows x weight rows [n0, n1) in tiles of NW(T) weight rows (at most 24
 * chains in registers; at least 4 at T = 1 for the FMA latency); the last rows one at a time */
#define DEFINE_DEC(NAME, PASS, BB)                                                                          \
    static void NAME(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {     \
        const int nb = K / 256, NW = T <= 2 ? 4 : T <= 4 ? 3 : 2;                                           \
        const size_t rb = (size_t)nb * BB;                                                                \
        float out[4 * 8];                                                                                   \
        for (int n = n0; n < n1;) {                                                                         \
            const uint8_t *wr = (const uint8_t *)w + (size_t)n * rb;                                       \
            const int nw = n1 - n >= NW ? NW : 1;                                                           \
            switch (nw * 16 + T) {                                                                          \
            case 4 * 16 + 1: PASS(4, 1, wr, rb, nb, x, K, out); break;                                      \
            case 4 * 16 + 2: PASS(4, 2, wr, rb, nb, x, K, out); break;                                      \
            case 3 * 16 + 3: PASS(3, 3, wr, rb, nb, x, K, out); break;                                      \
            case 3 * 16 + 4: PASS(3, 4, wr, rb, nb, x, K, out); break;                                      \
            case 2 * 16 + 5: PASS(2, 5, wr, rb, nb, x, K, out); break;                                      \
            case 2 * 16 + 6: PASS(2, 6, wr, rb, nb, x, K, out); break;                                      \
            case 2 * 16 + 7: PASS(2, 7, wr, rb, nb, x, K, out); break;                                      \
            case 2 * 16 + 8: PASS(2, 8, wr, rb, nb, x, K, out); break;                                      \
            case 16 + 1: PASS(1, 1, wr, rb, nb, x, K, out); break;                                          \
            case 16 + 2: PASS(1, 2, wr, rb, nb, x, K, out); break;                                          \
            case 16 + 3: PASS(1, 3, wr, rb, nb, x, K, out); break;                                          \
            case 16 + 4: PASS(1, 4, wr, rb, nb, x, K, out); break;                                          \
            case 16 + 5: PASS(1, 5, wr, rb, nb, x, K, out); break;                                          \
            case 16 + 6: PASS(1, 6, wr, rb, nb, x, K, out); break;                                          \
            case 16 + 7: PASS(1, 7, wr, rb, nb, x, K, out); break;                                          \
            default: PASS(1, 8, wr, rb, nb, x, K, out); break;                                              \
            }                                                                                               \
            for (int r = 0; r < nw; r++)                                                                    \
                for (int t = 0; t < T; t++) y[(size_t)t * ldy + n + r] = out[r * T + t];                    \
            n += nw;                                                                                        \
        }                                                                                                   \
    }
DEFINE_DEC(dec_q4_k, q4_k_pass, 144)
DEFINE_DEC(dec_q6_k, q6_k_pass, 210)
DEFINE_DEC(dec_q5_k, q5_k_pass, 176)
DEFINE_DEC(dec_iq4_xs, iq4_xs_pass, 136)
DEFINE_DEC(dec_q3_k, q3_k_pass, 110)
DEFINE_DEC(dec_q2_k, q2_k_pass, 84)

/* kernels.h matmul: decode here; prefill (T >= 4) the AVX2 path's */
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

/* kernels.h matmul_rows: any T through the decode above, 8 rows at a time over blocks of
 * ROWS_RB weight rows (160 KB: 32 Q6_K rows of K 6144), so a block stays in L2 while every
 * group of activation rows passes over it and the weights come from DRAM once */
enum { ROWS_RB = 32 };
#define MM_ROWS(NAME, DEC)                                                                       \
    void NAME(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) { \
        for (int n = n0; n < n1; n += ROWS_RB)                                                  \
            for (int t0 = 0; t0 < T; t0 += 8)                                                   \
                DEC(x + (size_t)t0 * K, T - t0 < 8 ? T - t0 : 8, K, w, n, n1 - n < ROWS_RB ? n1 : n + ROWS_RB, \
                    y + (size_t)t0 * ldy, ldy);                                                 \
    }
MM_ROWS(g4_mm_rows_q4_k_avx512, dec_q4_k)
MM_ROWS(g4_mm_rows_q6_k_avx512, dec_q6_k)
MM_ROWS(g4_mm_rows_q5_k_avx512, dec_q5_k)
MM_ROWS(g4_mm_rows_iq4_xs_avx512, dec_iq4_xs)
MM_ROWS(g4_mm_rows_q3_k_avx512, dec_q3_k)
MM_ROWS(g4_mm_rows_q2_k_avx512, dec_q2_k)

/* Q5_K's, IQ4_XS's, Q3_K's and Q2_K's matmul: inputs of more than G4_QDEC_MAX_ROWS rows take the AVX2 entry's
 * panel GEMM (as the legacy types' do), the rest this decode, 8 rows at a time */
#define MM_DQ(NAME, AVX2, ROWS)                                                                  \
    void NAME(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) { \
        if (T > G4_QDEC_MAX_ROWS) AVX2(x, T, K, w, n0, n1, y, ldy);                             \
        else ROWS(x, T, K, w, n0, n1, y, ldy);                                                  \
    }
MM_DQ(g4_mm_q5_k_avx512, g4_mm_q5_k_avx2, g4_mm_rows_q5_k_avx512)
MM_DQ(g4_mm_iq4_xs_avx512, g4_mm_iq4_xs_avx2, g4_mm_rows_iq4_xs_avx512)
MM_DQ(g4_mm_q3_k_avx512, g4_mm_q3_k_avx2, g4_mm_rows_q3_k_avx512)
MM_DQ(g4_mm_q2_k_avx512, g4_mm_q2_k_avx2, g4_mm_rows_q2_k_avx512)
