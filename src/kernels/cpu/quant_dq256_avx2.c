/* quant_dq256_avx2.c — the exact matmul over Q5_K, IQ4_XS, Q3_K and Q2_K weights (256-weight
 * blocks) on AVX2+FMA. Decode (1-16 activation rows): float32 activations times each weight as
 * g4_dequant_row gives it — Q5_K (d sc) q - dmin m, IQ4_XS (d (ls - 32)) kvalue, Q3_K
 * (d (sc - 32)) q, Q2_K (d sc) q - dmin m — summed by FMA in one chain of 8
 * lanes per (weight row, activation row) (lane l: k = l, 8 + l, 16 + l, ... in order), then the
 * fixed tree hsum8. A weight vector is made once and shared by every
 * activation row of the call, so each (row, t) result is that one chain whatever T, the row range
 * or the thread count (row invariance, tests/c/test_rows_invariant.c). Prefill (more rows through
 * matmul) takes the dequantized-panel GEMM (g4_gemm_quant_avx2), its last rows this decode. */
#pragma GCC target("avx2,fma,f16c")
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/q4_k_scales_bytes.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/quant_simd.h"

#define AI static inline __attribute__((always_inline))

static inline __m256 ld(const float *p) { return _mm256_loadu_ps(p); }

/* A Q5_K block (176 B: d, dmin, 12 B of six-bit scales / mins, qh[32], q[128]): sub-block j's
 * weight l (j < 8, l < 32) has the low (j even) or high (j odd) nibble of q[32 (j / 2) + l] and
 * fifth bit j of qh[l]. Its 256 five-bit quants as bytes in weight order, 32 per operation (16-bit
 * shifts; the masks drop the bits that cross a byte), and its scales d sc_j then dmin m_j. */
AI void q5_k_unpack(const uint8_t *blk, uint8_t q[256], float dsc[16]) {   /* dsc: d sc_j, then dmin m_j */
    const __m128i sm = g4_q4_k_scales_mins_bytes(blk);
    _mm256_storeu_ps(dsc, _mm256_mul_ps(_mm256_set1_ps(g4_ld_f16(blk)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sm))));
    _mm256_storeu_ps(dsc + 8, _mm256_mul_ps(_mm256_set1_ps(g4_ld_f16(blk + 2)),
                                           _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(sm, sm)))));
    const __m256i m4 = _mm256_set1_epi8(0x0F), m16 = _mm256_set1_epi8(0x10);
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 16));
    for (int g = 0; g < 4; g++) {
        const __m256i L = _mm256_loadu_si256((const __m256i *)(blk + 48 + 32 * g));
        const __m256i lo = _mm256_and_si256(L, m4), hi = _mm256_and_si256(_mm256_srli_epi16(L, 4), m4);
        const __m256i blo = _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(qh, 2 * g), 4), m16),
                      bhi = _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(qh, 2 * g + 1), 4), m16);
        g4_store_opaque32(q + 64 * g, _mm256_or_si256(lo, blo));
        g4_store_opaque32(q + 64 * g + 32, _mm256_or_si256(hi, bhi));
    }
}

/* An IQ4_XS block (136 B: d, scales_h, scales_l[4], q[128]; sub-block ib's weight j < 16 the low
 * nibble of q[16 ib + j], 16 + j its high one): its 256 kvalues as signed bytes in weight order
 * (a 16-byte table lookup, pshufb), and each sub-block's d (ls - 32) */
AI void iq4_xs_unpack(const uint8_t *blk, uint8_t q[256], float dsc[16]) {
    const __m128i kv = _mm_loadu_si128((const __m128i *)g4_kvalues_iq4nl), m4 = _mm_set1_epi8(0x0F);
    const float d = g4_ld_f16(blk);
    for (int ib = 0; ib < 8; ib++) {
        const __m128i v = _mm_loadu_si128((const __m128i *)(blk + 8 + 16 * ib));
        const __m256i kq = _mm256_set_m128i(_mm_shuffle_epi8(kv, _mm_and_si128(_mm_srli_epi16(v, 4), m4)), _mm_shuffle_epi8(kv, _mm_and_si128(v, m4)));
        g4_store_opaque32(q + 32 * ib, kq);
        dsc[ib] = d * (float)(g4_iq4_xs_scale(blk, ib) - 32);
    }
}

/* A Q3_K block (110 B: hmask[32], qs[64], scales[12], d): weight 128h + 32j + l (l < 32) is bits
 * 2j, 2j + 1 of qs[32h + l], minus 4 unless bit 4h + j of hmask[l] is set. Its 256 quants as signed
 * bytes in weight order (16-bit shifts; the masks drop the bits that cross a byte), and each
 * 16-weight sub-block's d (sc - 32), exact in float */
AI void q3_k_unpack(const uint8_t *blk, uint8_t q[256], float dsc[32]) {
    const __m128i sc = g4_q3_k_scales_m32(blk + 96);
    const __m256 d = _mm256_set1_ps(g4_ld_f16(blk + 108));
    _mm256_storeu_ps(dsc, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc))));
    _mm256_storeu_ps(dsc + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(sc, sc)))));
    const __m256i m3 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi8(4);
    const __m256i hm = _mm256_loadu_si256((const __m256i *)blk);
    for (int h = 0; h < 2; h++) {
        const __m256i L = _mm256_loadu_si256((const __m256i *)(blk + 32 + 32 * h));
        for (int j = 0; j < 4; j++) {
            const int hb = 4 * h + j;   /* the high bit, moved to bit 2 */
            const __m256i hi = _mm256_and_si256(hb >= 2 ? _mm256_srli_epi16(hm, hb - 2) : _mm256_slli_epi16(hm, 2 - hb), m4);
            const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(L, 2 * j), m3);
            g4_store_opaque32(q + 128 * h + 32 * j, _mm256_sub_epi8(_mm256_or_si256(lo, hi), m4));
        }
    }
}

/* A Q2_K block (84 B: scales[16], qs[64], d, dmin): weight 128h + 32j + l (l < 32) is bits 2j,
 * 2j + 1 of qs[32h + l]. Its 256 quants as bytes in weight order, each 16-weight sub-block s's
 * d (scales[s] & 15), then its dmin (scales[s] >> 4) */
AI void q2_k_unpack(const uint8_t *blk, uint8_t q[256], float dsc[32]) {
    const __m128i sm = _mm_loadu_si128((const __m128i *)blk), m15 = _mm_set1_epi8(0xF);
    const __m128i sc = _mm_and_si128(sm, m15), mn = _mm_and_si128(_mm_srli_epi16(sm, 4), m15);
    const __m256 d = _mm256_set1_ps(g4_ld_f16(blk + 80)), dmin = _mm256_set1_ps(g4_ld_f16(blk + 82));
    _mm256_storeu_ps(dsc, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc))));
    _mm256_storeu_ps(dsc + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(sc, sc)))));
    _mm256_storeu_ps(dsc + 16, _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mn))));
    _mm256_storeu_ps(dsc + 24, _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(mn, mn)))));
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        const __m256i L = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * h));
        for (int j = 0; j < 4; j++) g4_store_opaque32(q + 128 * h + 32 * j, _mm256_and_si256(_mm256_srli_epi16(L, 2 * j), m3));
    }
}

void g4_k16_unpack_avx2(g4_dtype dt, const uint8_t *blk, uint8_t q[256], float dsc[32]) {
    if (dt == G4_DT_Q3_K) q3_k_unpack(blk, q, dsc);
    else q2_k_unpack(blk, q, dsc);
}

enum { K_Q5_K, K_IQ4_XS, K_Q3_K, K_Q2_K };
/* a kind's block bytes, its sub-blocks' width (one scale each) and whether its weights are
 * (scale) q - (min) from unsigned quants, or (scale) q from signed ones */
AI size_t kind_bytes(int kind) { return kind == K_Q5_K ? 176 : kind == K_IQ4_XS ? 136 : kind == K_Q3_K ? 110 : 84; }
AI int kind_sub(int kind) { return kind == K_Q5_K || kind == K_IQ4_XS ? 32 : 16; }
AI int kind_min(int kind) { return kind == K_Q5_K || kind == K_Q2_K; }

/* NW weight rows (stride rb) x T activation rows (stride ldx) over nb blocks: out[r * T + t] */
AI void pass(const int kind, const int NW, const int T, const uint8_t *w, size_t rb, int nb, const float *x, int ldx,
             float *out) {
    const size_t bb = kind_bytes(kind);
    const int SB = kind_sub(kind), MO = 256 / SB;   /* sub-block width; the mins' offset in dsc */
    __m256 acc[4][8];
    for (int r = 0; r < NW; r++)
        for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    /* block b + 1 is unpacked while block b's products run, so that its widening loads do not wait
     * on the stores just made (one row: 30 -> 19 ns a block) */
    uint8_t q[2][4][256] __attribute__((aligned(32)));
    float dsc[2][4][32];
#define UNPACK(blk, qq, ss)                                                                  \
    (kind == K_Q5_K     ? q5_k_unpack(blk, qq, ss)                                           \
     : kind == K_IQ4_XS ? iq4_xs_unpack(blk, qq, ss)                                         \
     : kind == K_Q3_K   ? q3_k_unpack(blk, qq, ss)                                           \
                        : q2_k_unpack(blk, qq, ss))
    for (int r = 0; r < NW; r++) UNPACK(w + (size_t)r * rb, q[0][r], dsc[0][r]);
    for (int b = 0; b < nb; b++) {
        const int p = b & 1;
        g4_prefetch_ahead(w + (size_t)b * NW * bb, (size_t)NW * bb);   /* the NW rows' linear range */
        if (b + 1 < nb)
            for (int r = 0; r < NW; r++) {
                const uint8_t *blk = w + (size_t)r * rb + (size_t)(b + 1) * bb;
                UNPACK(blk, q[p ^ 1][r], dsc[p ^ 1][r]);
            }
        for (int j = 0; j < MO; j++) {
            __m256 sc[4], mn[4];
            for (int r = 0; r < NW; r++) {
                sc[r] = _mm256_broadcast_ss(dsc[p][r] + j);
                if (kind_min(kind)) mn[r] = _mm256_broadcast_ss(dsc[p][r] + MO + j);
            }
            for (int c = 0; c < SB / 8; c++) {
                __m256 wv[4];
                for (int r = 0; r < NW; r++) {
                    const __m128i b8 = _mm_loadl_epi64((const __m128i *)(q[p][r] + SB * j + 8 * c));
                    if (kind_min(kind))   /* (scale) q exact: one rounding, as the multiply and subtract */
                        wv[r] = _mm256_fmsub_ps(sc[r], _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b8)), mn[r]);
                    else
                        wv[r] = _mm256_mul_ps(sc[r], _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b8)));
                }
                const int k = 256 * b + SB * j + 8 * c;
                for (int t = 0; t < T; t++) {
                    __m256 xv = ld(x + (size_t)t * ldx + k);
                    if (NW > 1) G4_IN_REGISTER(xv);   /* one load for the NW weight rows */
                    for (int r = 0; r < NW; r++) {
                        acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
                        /* GCC kept one of Q3_K's and Q2_K's 2 x 4 chains in memory, through a store
                         * (41.8 -> 35.4, 42.7 -> 31.7 ns a block at 4 rows); Q5_K's it slowed */
                        if (kind == K_Q3_K || kind == K_Q2_K) G4_IN_REGISTER(acc[r][t]);
                    }
                }
            }
        }
    }
#undef UNPACK
    for (int r = 0; r < NW; r++)
        for (int t = 0; t < T; t++) out[r * T + t] = g4_hsum8(acc[r][t]);
}

/* T (1-8) activation rows x weight rows [n0, n1) in tiles of NW(T) weight rows (at most 8 chains
 * in 16 registers beside the weight vectors; 4 rows at T = 1 for the FMA latency, 2 for Q2_K,
 * whose scales and mins for 4 rows spilled registers); the last rows one at a time */
AI void decode(const int kind, const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    const int nb = K / 256, NW = T == 1 ? (kind == K_Q2_K ? 2 : 4) : T == 2 ? 3 : T <= 4 ? 2 : 1;
    const size_t rb = (size_t)nb * kind_bytes(kind);
    float out[4 * 8];
    for (int n = n0; n < n1;) {
        const uint8_t *wr = (const uint8_t *)w + (size_t)n * rb;
        const int nw = n1 - n >= NW ? NW : 1;
        switch (nw * 16 + T) {
        case 4 * 16 + 1: pass(kind, 4, 1, wr, rb, nb, x, K, out); break;
        case 2 * 16 + 1: pass(kind, 2, 1, wr, rb, nb, x, K, out); break;
        case 3 * 16 + 2: pass(kind, 3, 2, wr, rb, nb, x, K, out); break;
        case 2 * 16 + 3: pass(kind, 2, 3, wr, rb, nb, x, K, out); break;
        case 2 * 16 + 4: pass(kind, 2, 4, wr, rb, nb, x, K, out); break;
        case 16 + 1: pass(kind, 1, 1, wr, rb, nb, x, K, out); break;
        case 16 + 2: pass(kind, 1, 2, wr, rb, nb, x, K, out); break;
        case 16 + 3: pass(kind, 1, 3, wr, rb, nb, x, K, out); break;
        case 16 + 4: pass(kind, 1, 4, wr, rb, nb, x, K, out); break;
        case 16 + 5: pass(kind, 1, 5, wr, rb, nb, x, K, out); break;
        case 16 + 6: pass(kind, 1, 6, wr, rb, nb, x, K, out); break;
        case 16 + 7: pass(kind, 1, 7, wr, rb, nb, x, K, out); break;
        default: pass(kind, 1, 8, wr, rb, nb, x, K, out); break;
        }
        for (int r = 0; r < nw; r++)
            for (int t = 0; t < T; t++) y[(size_t)t * ldy + n + r] = out[r * T + t];
        n += nw;
    }
}

/* kernels.h matmul_rows: any T, 8 activation rows at a time over blocks of ROWS_RB weight rows
 * (a block stays in L2 while every group of activation rows passes over it, and the weights come
 * from DRAM once); matmul: inputs of more than G4_QDEC_MAX_ROWS rows take the panel GEMM
 * (prefill), the rows past its last whole panel and smaller inputs the decode */
enum { ROWS_RB = 32 };
#define DQ256(ROWS_NAME, MM_NAME, KIND, DT)                                                            \
    static void ROWS_NAME##_dec(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) { \
        decode(KIND, x, T, K, w, n0, n1, y, ldy);                                                      \
    }                                                                                                  \
    void ROWS_NAME(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {   \
        for (int n = n0; n < n1; n += ROWS_RB)                                                         \
            for (int t0 = 0; t0 < T; t0 += 8)                                                          \
                ROWS_NAME##_dec(x + (size_t)t0 * K, T - t0 < 8 ? T - t0 : 8, K, w, n,                  \
                                n1 - n < ROWS_RB ? n1 : n + ROWS_RB, y + (size_t)t0 * ldy, ldy);       \
    }                                                                                                  \
    void MM_NAME(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {     \
        if (T > G4_QDEC_MAX_ROWS) n0 = g4_gemm_quant_avx2(DT, x, T, K, w, n0, n1, y, ldy);            \
        if (n0 < n1) ROWS_NAME(x, T, K, w, n0, n1, y, ldy);                                            \
    }
DQ256(g4_mm_rows_q5_k_avx2, g4_mm_q5_k_avx2, K_Q5_K, G4_DT_Q5_K)
DQ256(g4_mm_rows_iq4_xs_avx2, g4_mm_iq4_xs_avx2, K_IQ4_XS, G4_DT_IQ4_XS)
DQ256(g4_mm_rows_q3_k_avx2, g4_mm_q3_k_avx2, K_Q3_K, G4_DT_Q3_K)
DQ256(g4_mm_rows_q2_k_avx2, g4_mm_q2_k_avx2, K_Q2_K, G4_DT_Q2_K)
