/* quant_panel_avx512.c — the AVX-512 prefill GEMM's (avx512.c) weight panels from Q4_K, Q6_K,
 * Q8_0, Q4_0 and IQ4_NL rows, written k-major straight away: the 16 rows' bytes are transposed 4 at a time (a 16 x 16
 * dword transpose: column c holds every row's bytes 4c..4c+3), so each row's weight is already in
 * its lane and one vector of 16 rows is stored per k; the per-row scales are transposed the same
 * way into one vector per sub-block. The AVX2 decoder (quant_panel_avx2.c) decoded row-major and
 * transposed the floats afterwards, which cost about as much again. The arithmetic is that
 * decoder's, operation for operation (no FMA contraction: the build is C11), so the panels are
 * bit-identical to it and to quant_ref.c's g4_dequant_row (tests/c/test_quant.c). Q5_0 and the
 * other 256-weight types go to the AVX2 decoder. AVX-512F only, as avx512.c. */
#pragma GCC target("avx512f,avx2,fma,f16c")
#include <immintrin.h>

#include "kernels/cpu/quant.h"
#include "kernels/cpu/quant_simd.h"
#include "kernels/cpu/q4_k_scales_avx512.h"

#define AI static inline __attribute__((always_inline))

/* out[c] lane r = in[r] lane c: 16 rows of 16 dwords to 16 columns */
AI void transpose16(__m512i v[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {   /* u[4i + j], 128-bit lane L: column 4L + j of rows 4i..4i+3 */
        u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int j = 0; j < 4; j++) {
        const __m512i a0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88), a1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xDD),
                      b0 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88),
                      b1 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xDD);
        v[j] = _mm512_shuffle_i32x4(a0, b0, 0x88);
        v[4 + j] = _mm512_shuffle_i32x4(a1, b1, 0x88);
        v[8 + j] = _mm512_shuffle_i32x4(a0, b0, 0xDD);
        v[12 + j] = _mm512_shuffle_i32x4(a1, b1, 0xDD);
    }
}

AI void load16(const uint8_t *p, size_t rb, __m512i v[16]) {
    for (int r = 0; r < 16; r++) v[r] = _mm512_loadu_si512(p + (size_t)r * rb);
}

/* A Q4_K block's d * sc_j (j < 8) and dmin * m_j (lanes 8 + j), as integer lanes for the transposes */
AI __m512i q4_k_scales(const uint8_t *blk) { return _mm512_castps_si512(g4_q4_k_scales16_avx512(blk)); }

/* One Q4_K block (144 B: d, dmin, 12 B of six-bit scales / mins, q[128]; q[32g + l] holds weight
 * 64g + l in its low nibble, 64g + 32 + l in its high) of 16 rows -> p[256][16]:
 * (d sc) * q - (dmin m) per sub-block. A nibble becomes a float by a table lookup (vpermps reads
 * the index's low 4 bits: no mask, no conversion). */
static void q4_k_block16(const uint8_t *w, size_t rb, float *p) {
    const __m512 nib = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i s[16], q[16];
    for (int r = 0; r < 16; r++) s[r] = q4_k_scales(w + (size_t)r * rb);
    transpose16(s);   /* s[j] lane r: row r's d sc_j, s[8 + j] its dmin m_j */
    for (int half = 0; half < 2; half++) {   /* q[64 half .. 64 half + 63]: g = 2 half, 2 half + 1 */
        load16(w + 16 + 64 * half, rb, q);
        transpose16(q);
        for (int c = 0; c < 16; c++) {
            const int g = 2 * half + c / 8, l = 4 * (c % 8);
            const __m512 d1 = _mm512_castsi512_ps(s[2 * g]), m1 = _mm512_castsi512_ps(s[8 + 2 * g]);
            const __m512 d2 = _mm512_castsi512_ps(s[2 * g + 1]), m2 = _mm512_castsi512_ps(s[8 + 2 * g + 1]);
            for (int i = 0; i < 4; i++) {
                const __m512 lo = _mm512_permutexvar_ps(_mm512_srli_epi32(q[c], 8 * i), nib),
                             hi = _mm512_permutexvar_ps(_mm512_srli_epi32(q[c], 8 * i + 4), nib);
                _mm512_storeu_ps(p + (size_t)(64 * g + l + i) * 16, _mm512_sub_ps(_mm512_mul_ps(d1, lo), m1));
                _mm512_storeu_ps(p + (size_t)(64 * g + 32 + l + i) * 16, _mm512_sub_ps(_mm512_mul_ps(d2, hi), m2));
            }
        }
    }
}

/* One Q6_K block (210 B: ql[128], qh[64], int8 sc[16], d; in half h, l in [0, 32), weight
 * 128h + 32k + l is (ql[64h + l + 32(k & 1)] >> 4(k >> 1) & 15) | ((qh[32h + l] >> 2k) & 3) << 4,
 * scale sc[8h + 2k + l / 16]) of 16 rows -> p[256][16]: (d sc) * (q - 32). Four six-bit quants are
 * assembled per dword lane with bit 5 flipped (q ^ 32 read as a signed six-bit number is q - 32),
 * then each is sign-extended by a shift pair. */
static void q6_k_block16(const uint8_t *w, size_t rb, float *p) {
    const __m512i m0f = _mm512_set1_epi32(0x0F0F0F0F), m30 = _mm512_set1_epi32(0x30303030),
                  m20 = _mm512_set1_epi32(0x20202020);
    __m512i s[16], qh[16], ql[16];
    for (int r = 0; r < 16; r++) {
        const uint8_t *b = w + (size_t)r * rb;
        const __m512 d = _mm512_set1_ps(g4_ld_f16(b + 208));
        s[r] = _mm512_castps_si512(
            _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 192))))));
    }
    transpose16(s);   /* s[j] lane r: row r's d * sc[j] */
    load16(w + 128, rb, qh);
    transpose16(qh);   /* qh[c]: qh bytes 4c..4c+3, half c / 8 */
    for (int h = 0; h < 2; h++) {
        load16(w + 64 * h, rb, ql);
        transpose16(ql);   /* ql[c]: l = 4c..4c+3 of k & 1 = 0; ql[8 + c]: of k & 1 = 1 */
        for (int c = 0; c < 8; c++) {
            const __m512i H = qh[8 * h + c], L0 = ql[c], L1 = ql[8 + c];
            /* (a & b) ^ c: ternary-logic 0x6A; (a & b) | c: 0xEA */
            const __m512i hk[4] = {_mm512_ternarylogic_epi32(_mm512_slli_epi32(H, 4), m30, m20, 0x6A),
                                   _mm512_ternarylogic_epi32(_mm512_slli_epi32(H, 2), m30, m20, 0x6A),
                                   _mm512_ternarylogic_epi32(H, m30, m20, 0x6A),
                                   _mm512_ternarylogic_epi32(_mm512_srli_epi32(H, 2), m30, m20, 0x6A)};
            const __m512i lk[4] = {L0, L1, _mm512_srli_epi32(L0, 4), _mm512_srli_epi32(L1, 4)};
            for (int k = 0; k < 4; k++) {
                const __m512i q = _mm512_ternarylogic_epi32(lk[k], m0f, hk[k], 0xEA);
                const __m512 sc = _mm512_castsi512_ps(s[8 * h + 2 * k + c / 4]);
                for (int i = 0; i < 4; i++) {
                    const __m512i v = _mm512_srai_epi32(_mm512_slli_epi32(q, 26 - 8 * i), 26);
                    _mm512_storeu_ps(p + (size_t)(128 * h + 32 * k + 4 * c + i) * 16, _mm512_mul_ps(sc, _mm512_cvtepi32_ps(v)));
                }
            }
        }
    }
}

/* 16 rows' scales of nblk blocks of BB bytes (f16 d first) -> d[j] lane r */
AI void legacy_scales16(const uint8_t *w, size_t rb, int nblk, int bb, __m512 d[4]) {
    uint16_t h[4][16];
    for (int r = 0; r < 16; r++)
        for (int j = 0; j < nblk; j++) {
            const uint8_t *b = w + (size_t)r * rb + (size_t)j * bb;
            h[j][r] = (uint16_t)(b[0] | b[1] << 8);
        }
    for (int j = 0; j < nblk; j++) d[j] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h[j]));
}

/* nblk (1 or 2) Q8_0 blocks (34 B: d, int8 q[32]) of 16 rows -> p[32 nblk][16]: q * d, two
 * blocks' quants per row vector, each int8 sign-extended by a shift pair */
static void q8_0_blocks16(const uint8_t *w, size_t rb, int nblk, float *p) {
    __m512i q[16];
    __m512 d[4];
    for (int r = 0; r < 16; r++) {
        const uint8_t *b = w + (size_t)r * rb + 2;
        const __m256i hi = nblk == 2 ? _mm256_loadu_si256((const __m256i *)(b + 34)) : _mm256_setzero_si256();
        q[r] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)b)), hi, 1);
    }
    legacy_scales16(w, rb, nblk, 34, d);
    transpose16(q);   /* q[8j + c]: block j's bytes 4c..4c+3 */
    for (int j = 0; j < nblk; j++)
        for (int c = 0; c < 8; c++)
            for (int i = 0; i < 4; i++) {
                const __m512i v = _mm512_srai_epi32(_mm512_slli_epi32(q[8 * j + c], 24 - 8 * i), 24);
                _mm512_storeu_ps(p + (size_t)(32 * j + 4 * c + i) * 16, _mm512_mul_ps(_mm512_cvtepi32_ps(v), d[j]));
            }
}

/* nblk (1..4) Q4_0 / IQ4_NL blocks (18 B: d, q[16]; low nibbles weights 0-15, high 16-31) of 16
 * rows -> p[32 nblk][16]: nib[q] * d, four blocks' quants per row vector, nib[q] by a table lookup
 * (Q4_0: q - 8; IQ4_NL: the kvalue) */
static void nib_blocks16(const uint8_t *w, size_t rb, int nblk, __m512 nib, float *p) {
    __m512i q[16];
    __m512 d[4];
    for (int r = 0; r < 16; r++) {
        const uint8_t *b = w + (size_t)r * rb + 2;
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)b));
        if (nblk > 1) v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(b + 18)), 1);
        if (nblk > 2) v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(b + 36)), 2);
        if (nblk > 3) v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(b + 54)), 3);
        q[r] = v;
    }
    legacy_scales16(w, rb, nblk, 18, d);
    transpose16(q);   /* q[4j + c]: block j's bytes 4c..4c+3 */
    for (int j = 0; j < nblk; j++)
        for (int c = 0; c < 4; c++)
            for (int i = 0; i < 4; i++) {
                const __m512 lo = _mm512_permutexvar_ps(_mm512_srli_epi32(q[4 * j + c], 8 * i), nib),
                             hi = _mm512_permutexvar_ps(_mm512_srli_epi32(q[4 * j + c], 8 * i + 4), nib);
                _mm512_storeu_ps(p + (size_t)(32 * j + 4 * c + i) * 16, _mm512_mul_ps(lo, d[j]));
                _mm512_storeu_ps(p + (size_t)(32 * j + 16 + 4 * c + i) * 16, _mm512_mul_ps(hi, d[j]));
            }
}

void g4_quant_panel16_avx512(g4_dtype dt, const void *w, size_t rb, int k0, int kc, float *panel) {
    const uint8_t *src = w;
    switch (dt) {
    case G4_DT_Q4_K:
        for (int b = 0; b < kc / 256; b++) q4_k_block16(src + (size_t)(k0 / 256 + b) * 144, rb, panel + (size_t)b * 256 * 16);
        break;
    case G4_DT_Q6_K:
        for (int b = 0; b < kc / 256; b++) q6_k_block16(src + (size_t)(k0 / 256 + b) * 210, rb, panel + (size_t)b * 256 * 16);
        break;
    case G4_DT_Q8_0:
        for (int b = 0; b < kc / 32; b += 2)
            q8_0_blocks16(src + (size_t)(k0 / 32 + b) * 34, rb, kc / 32 - b < 2 ? 1 : 2, panel + (size_t)b * 32 * 16);
        break;
    case G4_DT_Q4_0: case G4_DT_IQ4_NL: {
        const __m512 nib = dt == G4_DT_Q4_0 ? _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7)
                                            : _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)g4_kvalues_iq4nl)));
        for (int b = 0; b < kc / 32; b += 4)
            nib_blocks16(src + (size_t)(k0 / 32 + b) * 18, rb, kc / 32 - b < 4 ? kc / 32 - b : 4, nib, panel + (size_t)b * 32 * 16);
        break;
    }
    default: g4_quant_panel16_avx2(dt, w, rb, k0, kc, panel);   /* Q5_0 */
    }
}
