/* quant_panel_avx2.c — the prefill GEMMs' weight panels from block-quantized rows (avx2.c's
 * g4_gemm_quant_avx2, avx512.c's GEMM): 16 rows' blocks dequantized 8 lanes at a time in ggml's
 * arithmetic, operation for operation as quant_ref.c's g4_dequant_row (one rounding per product,
 * no FMA contraction: the build is C11), so the panel holds exactly dequantize-then-dot's weights.
 * Q4_K and Q6_K (the bulk of Q4_K_M files) are written k-major straight away, their quant bytes
 * transposed 4 at a time before widening (q4_k_block8, q6_k_block8); the other types are decoded
 * row-major, then transposed into panel[k][16] by the AVX2 GEMM's f32 packer. The scalar
 * dequantizer cost about as much per weight as a 64-row chunk's FMAs over it (Q4_K prefill at
 * 0.7x llama.cpp). */
#pragma GCC target("avx2,fma,f16c")
#include <immintrin.h>

#include "kernels/cpu/quant.h"
#include "kernels/cpu/quant_simd.h"
#include "kernels/cpu/quant_act_blocks_avx2.h"
#include "kernels/cpu/pack_avx2.h"
#include "kernels/cpu/q4_k_scales_bytes.h"

static inline __m256 bcast_f16(const uint8_t *p) { return _mm256_set1_ps(g4_ld_f16(p)); }
static inline __m256i u8x8(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }

/* q * d (34 B: d, int8 q[32]) */
static void deq_q8_0(const uint8_t *b, float *y) {
    const __m256 d = bcast_f16(b);
    for (int j = 0; j < 4; j++) {
        const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + 2 + 8 * j)));
        _mm256_storeu_ps(y + 8 * j, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
    }
}

/* A 32-weight block's quants as int32 in 4 groups of 8 (group g: weights 8g..8g+7): qs[16]'s
 * nibbles (weight j < 16 the low nibble of qs[j], 16 + j its high one), plus 16 where bit j of qh
 * (4 bytes; NULL: none) is set */
static inline __attribute__((always_inline)) void nib_q(const uint8_t *qh, const uint8_t *qs, __m256i i[4]) {
    const __m256i m4 = _mm256_set1_epi32(0x0F), m16 = _mm256_set1_epi32(0x10);
    const __m256i v0 = u8x8(qs), v1 = u8x8(qs + 8);
    i[0] = _mm256_and_si256(v0, m4), i[1] = _mm256_and_si256(v1, m4), i[2] = _mm256_srli_epi32(v0, 4), i[3] = _mm256_srli_epi32(v1, 4);
    if (!qh) return;
    /* lane l of group g is weight 8g + l: its bit (qh >> (8g + l)) & 1 to bit 4 */
    const uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
    const __m256i hs = _mm256_srlv_epi32(_mm256_set1_epi32((int)h), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    i[0] = _mm256_or_si256(i[0], _mm256_and_si256(_mm256_slli_epi32(hs, 4), m16));
    i[1] = _mm256_or_si256(i[1], _mm256_and_si256(_mm256_srli_epi32(hs, 4), m16));
    i[2] = _mm256_or_si256(i[2], _mm256_and_si256(_mm256_srli_epi32(hs, 12), m16));
    i[3] = _mm256_or_si256(i[3], _mm256_and_si256(_mm256_srli_epi32(hs, 20), m16));
}

/* (q - 8) * d, Q4_0 (18 B: d, q[16]), and (q - 16) * d, Q5_0 (22 B: d, qh[4], q[16]) */
static inline __attribute__((always_inline)) void deq_q_0(const uint8_t *b, float *y, int q5) {
    const __m256 d = bcast_f16(b);
    const __m256i off = _mm256_set1_epi32(q5 ? 16 : 8);
    __m256i i[4];
    nib_q(q5 ? b + 2 : NULL, b + (q5 ? 6 : 2), i);
    for (int g = 0; g < 4; g++) _mm256_storeu_ps(y + 8 * g, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(i[g], off)), d));
}
static void deq_q4_0(const uint8_t *b, float *y) { deq_q_0(b, y, 0); }
static void deq_q5_0(const uint8_t *b, float *y) { deq_q_0(b, y, 1); }

/* d q + m, Q4_1 (20 B: d, m, q[16]) and Q5_1 (24 B: d, m, qh[4], q[16]); d q exact, so the FMA
 * rounds once, as g4_dequant_row's add */
static inline __attribute__((always_inline)) void deq_q_1(const uint8_t *b, float *y, int q5) {
    const __m256 d = bcast_f16(b), m = bcast_f16(b + 2);
    __m256i i[4];
    nib_q(q5 ? b + 4 : NULL, b + (q5 ? 8 : 4), i);
    for (int g = 0; g < 4; g++) _mm256_storeu_ps(y + 8 * g, _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(i[g]), m));
}
static void deq_q4_1(const uint8_t *b, float *y) { deq_q_1(b, y, 0); }
static void deq_q5_1(const uint8_t *b, float *y) { deq_q_1(b, y, 1); }

/* A Q4_K / Q5_K block's d * sc_j and dmin * m_j (j < 8; the same 16 bytes of d, dmin and scales) */
static void k_scales(const uint8_t *b, float dsc[8], float dmn[8]) {
    const __m128i sm = g4_q4_k_scales_mins_bytes(b);
    _mm256_storeu_ps(dsc, _mm256_mul_ps(bcast_f16(b), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sm))));
    _mm256_storeu_ps(dmn, _mm256_mul_ps(bcast_f16(b + 2), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(sm, sm)))));
}

/* (d * sc) * q - (dmin * m) per 32-weight sub-block, Q4_K (144 B: d, dmin, 12 B of six-bit scales
 * and mins, q[128]; q[32g + l] holds weight 64g + l in its low nibble, 64g + 32 + l in its high) */
static void deq_q4_k(const uint8_t *b, float *y) {
    float dsc[8], dmn[8];
    k_scales(b, dsc, dmn);
    const __m256i m4 = _mm256_set1_epi32(0x0F);
    const uint8_t *q = b + 16;
    for (int g = 0; g < 4; g++, q += 32, y += 64) {
        const __m256 d1 = _mm256_set1_ps(dsc[2 * g]), m1 = _mm256_set1_ps(dmn[2 * g]);
        const __m256 d2 = _mm256_set1_ps(dsc[2 * g + 1]), m2 = _mm256_set1_ps(dmn[2 * g + 1]);
        for (int c = 0; c < 4; c++) {
            const __m256i v = u8x8(q + 8 * c);
            _mm256_storeu_ps(y + 8 * c, _mm256_sub_ps(_mm256_mul_ps(d1, _mm256_cvtepi32_ps(_mm256_and_si256(v, m4))), m1));
            _mm256_storeu_ps(y + 32 + 8 * c, _mm256_sub_ps(_mm256_mul_ps(d2, _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4))), m2));
        }
    }
}

/* (d * sc) * q - (dmin * m), Q5_K (176 B: d, dmin, 12 B of scales and mins, qh[32], q[128]): Q4_K's
 * nibbles plus 16 where bit j of qh[l] is set (sub-block j's weight l) */
static void deq_q5_k(const uint8_t *b, float *y) {
    float dsc[8], dmn[8];
    k_scales(b, dsc, dmn);
    const __m256i m4 = _mm256_set1_epi32(0x0F), m16 = _mm256_set1_epi32(0x10);
    const uint8_t *q = b + 48;
    for (int g = 0; g < 4; g++, q += 32, y += 64) {
        const __m256 d1 = _mm256_set1_ps(dsc[2 * g]), m1 = _mm256_set1_ps(dmn[2 * g]);
        const __m256 d2 = _mm256_set1_ps(dsc[2 * g + 1]), m2 = _mm256_set1_ps(dmn[2 * g + 1]);
        for (int c = 0; c < 4; c++) {
            const __m256i v = u8x8(q + 8 * c), h = u8x8(b + 16 + 8 * c);
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(v, m4), _mm256_and_si256(_mm256_slli_epi32(_mm256_srli_epi32(h, 2 * g), 4), m16)),
                          hi = _mm256_or_si256(_mm256_srli_epi32(v, 4), _mm256_and_si256(_mm256_slli_epi32(_mm256_srli_epi32(h, 2 * g + 1), 4), m16));
            _mm256_storeu_ps(y + 8 * c, _mm256_sub_ps(_mm256_mul_ps(d1, _mm256_cvtepi32_ps(lo)), m1));
            _mm256_storeu_ps(y + 32 + 8 * c, _mm256_sub_ps(_mm256_mul_ps(d2, _mm256_cvtepi32_ps(hi)), m2));
        }
    }
}

/* (d * (ls - 32)) * kvalue, IQ4_XS (136 B: d, scales_h, scales_l[4], q[128]; sub-block ib's weight
 * j < 16 the low nibble of q[16 ib + j], 16 + j its high one) */
static void deq_iq4_xs(const uint8_t *b, float *y) {
    const __m128i kv = _mm_loadu_si128((const __m128i *)g4_kvalues_iq4nl), m4 = _mm_set1_epi8(0x0F);
    const float d = g4_ld_f16(b);
    for (int ib = 0; ib < 8; ib++, y += 32) {
        const __m256 dl = _mm256_set1_ps(d * (float)(g4_iq4_xs_scale(b, ib) - 32));
        const __m128i v = _mm_loadu_si128((const __m128i *)(b + 8 + 16 * ib));
        const __m128i lo = _mm_shuffle_epi8(kv, _mm_and_si128(v, m4)), hi = _mm_shuffle_epi8(kv, _mm_and_si128(_mm_srli_epi16(v, 4), m4));
        _mm256_storeu_ps(y, _mm256_mul_ps(dl, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo))));
        _mm256_storeu_ps(y + 8, _mm256_mul_ps(dl, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)))));
        _mm256_storeu_ps(y + 16, _mm256_mul_ps(dl, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi))));
        _mm256_storeu_ps(y + 24, _mm256_mul_ps(dl, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))));
    }
}

/* d * kvalue, IQ4_NL (18 B: d, q[16]; weight j < 16 the low nibble of q[j], 16 + j its high one) */
static void deq_iq4_nl(const uint8_t *b, float *y) {
    const __m256 d = bcast_f16(b);
    const __m256i q = g4_act_unpack32_avx2(G4_ACT_K_IQ4_NL, b);   /* the kvalues as signed bytes */
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    _mm256_storeu_ps(y, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo))));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)))));
    _mm256_storeu_ps(y + 16, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi))));
    _mm256_storeu_ps(y + 24, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))));
}

/* Q3_K's (d (sc - 32)) q and Q2_K's (d sc) q - dmin m per 16-weight sub-block, from the quants
 * and scales quant_dq256_avx2.c unpacks (the products are exact: one rounding, as g4_dequant_row's) */
static inline __attribute__((always_inline)) void deq_k16(g4_dtype dt, const uint8_t *b, float *y) {
    uint8_t q[256] __attribute__((aligned(32)));
    float dsc[32];
    g4_k16_unpack_avx2(dt, b, q, dsc);
    for (int s = 0; s < 16; s++)
        for (int c = 0; c < 2; c++) {
            const __m128i b8 = _mm_loadl_epi64((const __m128i *)(q + 16 * s + 8 * c));
            const __m256 v = dt == G4_DT_Q3_K ? _mm256_mul_ps(_mm256_set1_ps(dsc[s]), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b8)))
                                              : _mm256_sub_ps(_mm256_mul_ps(_mm256_set1_ps(dsc[s]), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b8))),
                                                              _mm256_set1_ps(dsc[16 + s]));
            _mm256_storeu_ps(y + 16 * s + 8 * c, v);
        }
}
static void deq_q3_k(const uint8_t *b, float *y) { deq_k16(G4_DT_Q3_K, b, y); }
static void deq_q2_k(const uint8_t *b, float *y) { deq_k16(G4_DT_Q2_K, b, y); }

/* (d * sc) * (q - 32), Q6_K (210 B: ql[128], qh[64], int8 sc[16], d): in half h, l in [0, 32),
 * weight 128h + 32k + l is (ql[64h + l + 32(k & 1)] >> 4(k >> 1) & 15) | ((qh[32h + l] >> 2k) & 3) << 4,
 * with scale sc[8h + 2k + l / 16] */
static void deq_q6_k(const uint8_t *b, float *y) {
    const float d = g4_ld_f16(b + 208);
    const int8_t *sc = (const int8_t *)(b + 192);
    const __m256i m4 = _mm256_set1_epi32(0x0F), m3 = _mm256_set1_epi32(3), c32 = _mm256_set1_epi32(32);
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
        for (int c = 0; c < 4; c++) {   /* l = 8c .. 8c + 7 */
            const __m256i L0 = u8x8(ql + 8 * c), L1 = u8x8(ql + 32 + 8 * c), H = u8x8(qh + 8 * c);
            const __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(L0, m4), _mm256_slli_epi32(_mm256_and_si256(H, m3), 4)),
                _mm256_or_si256(_mm256_and_si256(L1, m4), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(H, 2), m3), 4)),
                _mm256_or_si256(_mm256_srli_epi32(L0, 4), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(H, 4), m3), 4)),
                _mm256_or_si256(_mm256_srli_epi32(L1, 4), _mm256_slli_epi32(_mm256_srli_epi32(H, 6), 4))};
            for (int k = 0; k < 4; k++) {
                const float s = d * (float)sc[8 * h + 2 * k + c / 2];
                _mm256_storeu_ps(y + 128 * h + 32 * k + 8 * c,
                                 _mm256_mul_ps(_mm256_set1_ps(s), _mm256_cvtepi32_ps(_mm256_sub_epi32(q[k], c32))));
            }
        }
    }
}

/* out[c] lane r = in[r] lane c: 8 rows of 8 dwords to 8 columns */
static inline __attribute__((always_inline)) void transpose8(__m256i v[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {   /* u[4i + j], 128-bit lane L: column 4L + j of rows 4i..4i+3 */
        u[4 * i + 0] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int j = 0; j < 4; j++) {
        v[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
        v[4 + j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
    }
}

/* One Q4_K block of 8 rows (from w, row stride rb) -> p[256][16] lanes 0-7 (p already offset to
 * the half's lanes), k-major straight away as quant_panel_avx512.c does it: each group's 32 quant
 * bytes of the 8 rows transposed 4 at a time (column c: every row's bytes 4c..4c+3), so each row's
 * nibble is in its lane, and the rows' d sc_j / dmin m_j transposed the same way into one vector
 * per sub-block. The arithmetic is deq_q4_k's, operation for operation. Against row-major
 * decoding and transposing the floats afterwards: 1.5x the speed (Q6_K 2.3x, q6_k_block8),
 * bench/quant_panel_bench.c. */
static inline __attribute__((always_inline)) void q4_k_block8(const uint8_t *w, size_t rb, float *p) {
    const __m256i m4 = _mm256_set1_epi32(0x0F);
    __m256i sc[8], mn[8], q[8];
    for (int r = 0; r < 8; r++) {
        float dsc[8], dmn[8];
        k_scales(w + (size_t)r * rb, dsc, dmn);
        sc[r] = _mm256_castps_si256(_mm256_loadu_ps(dsc));
        mn[r] = _mm256_castps_si256(_mm256_loadu_ps(dmn));
    }
    transpose8(sc);   /* sc[j] lane r: row r's d sc_j */
    transpose8(mn);
    for (int g = 0; g < 4; g++) {
        for (int r = 0; r < 8; r++) q[r] = _mm256_loadu_si256((const __m256i *)(w + (size_t)r * rb + 16 + 32 * g));
        transpose8(q);   /* q[c] lane r: row r's q[32g + 4c .. 32g + 4c + 3] */
        const __m256 d1 = _mm256_castsi256_ps(sc[2 * g]), m1 = _mm256_castsi256_ps(mn[2 * g]);
        const __m256 d2 = _mm256_castsi256_ps(sc[2 * g + 1]), m2 = _mm256_castsi256_ps(mn[2 * g + 1]);
        for (int c = 0; c < 8; c++)
            for (int i = 0; i < 4; i++) {
                const __m256i lo = _mm256_and_si256(_mm256_srli_epi32(q[c], 8 * i), m4),
                              hi = _mm256_and_si256(_mm256_srli_epi32(q[c], 8 * i + 4), m4);
                _mm256_storeu_ps(p + (size_t)(64 * g + 4 * c + i) * 16, _mm256_sub_ps(_mm256_mul_ps(d1, _mm256_cvtepi32_ps(lo)), m1));
                _mm256_storeu_ps(p + (size_t)(64 * g + 32 + 4 * c + i) * 16, _mm256_sub_ps(_mm256_mul_ps(d2, _mm256_cvtepi32_ps(hi)), m2));
            }
    }
}

/* One Q6_K block of 8 rows -> p[256][16] lanes 0-7, k-major as q4_k_block8: ql and qh transposed 4
 * bytes at a time, four six-bit quants assembled per dword lane with bit 5 flipped (q ^ 32 read as
 * a signed six-bit number is q - 32), each sign-extended by a shift pair; the rows' d * sc[j]
 * (deq_q6_k's float product) transposed into one vector per scale. */
static inline __attribute__((always_inline)) void q6_k_block8(const uint8_t *w, size_t rb, float *p) {
    const __m256i m0f = _mm256_set1_epi32(0x0F0F0F0F), m30 = _mm256_set1_epi32(0x30303030), m20 = _mm256_set1_epi32(0x20202020);
    __m256i s0[8], s1[8], qh[2][8], l0[8], l1[8];
    for (int r = 0; r < 8; r++) {
        const uint8_t *b = w + (size_t)r * rb;
        const __m256 d = _mm256_set1_ps(g4_ld_f16(b + 208));
        s0[r] = _mm256_castps_si256(_mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + 192))))));
        s1[r] = _mm256_castps_si256(_mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + 200))))));
        qh[0][r] = _mm256_loadu_si256((const __m256i *)(b + 128));
        qh[1][r] = _mm256_loadu_si256((const __m256i *)(b + 160));
    }
    transpose8(s0);   /* s0[j] lane r: row r's d * sc[j]; s1[j]: d * sc[8 + j] */
    transpose8(s1);
    transpose8(qh[0]);   /* qh[h][c]: qh bytes 32h + 4c .. 32h + 4c + 3 */
    transpose8(qh[1]);
    for (int h = 0; h < 2; h++) {
        for (int r = 0; r < 8; r++) {
            l0[r] = _mm256_loadu_si256((const __m256i *)(w + (size_t)r * rb + 64 * h));
            l1[r] = _mm256_loadu_si256((const __m256i *)(w + (size_t)r * rb + 64 * h + 32));
        }
        transpose8(l0);   /* l0[c]: l = 4c .. 4c + 3 of k & 1 = 0; l1[c]: of k & 1 = 1 */
        transpose8(l1);
        for (int c = 0; c < 8; c++) {
            const __m256i H = qh[h][c];
            const __m256i hk[4] = {_mm256_xor_si256(_mm256_and_si256(_mm256_slli_epi32(H, 4), m30), m20),
                                   _mm256_xor_si256(_mm256_and_si256(_mm256_slli_epi32(H, 2), m30), m20),
                                   _mm256_xor_si256(_mm256_and_si256(H, m30), m20),
                                   _mm256_xor_si256(_mm256_and_si256(_mm256_srli_epi32(H, 2), m30), m20)};
            const __m256i lk[4] = {l0[c], l1[c], _mm256_srli_epi32(l0[c], 4), _mm256_srli_epi32(l1[c], 4)};
            for (int k = 0; k < 4; k++) {
                const __m256i q = _mm256_or_si256(_mm256_and_si256(lk[k], m0f), hk[k]);
                const int j = 2 * k + c / 4;
                const __m256 sc = _mm256_castsi256_ps(h ? s1[j] : s0[j]);
                for (int i = 0; i < 4; i++) {
                    const __m256i v = _mm256_srai_epi32(_mm256_slli_epi32(q, 26 - 8 * i), 26);
                    _mm256_storeu_ps(p + (size_t)(128 * h + 32 * k + 4 * c + i) * 16, _mm256_mul_ps(sc, _mm256_cvtepi32_ps(v)));
                }
            }
        }
    }
}

/* 16 rows' blocks into rows[16][kc], one type's decoder inlined into the loop */
#define DEQ_ROWS(DEQ, BS, BB)                                                                     \
    for (int i = 0; i < 16; i++) {                                                              \
        const uint8_t *src = (const uint8_t *)w + (size_t)i * rb + (size_t)(k0 / (BS)) * (BB);    \
        for (int b = 0; b < kc / (BS); b++) DEQ(src + (size_t)b * (BB), rows + (size_t)i * kc + (size_t)b * (BS)); \
    }

void g4_quant_panel16_avx2(g4_dtype dt, const void *w, size_t rb, int k0, int kc, float *panel) {
    if (dt == G4_DT_Q4_K || dt == G4_DT_Q6_K) {   /* k-major: no float transpose */
        const size_t bb = dt == G4_DT_Q4_K ? 144 : 210;
        for (int b = 0; b < kc / 256; b++)
            for (int h = 0; h < 2; h++) {
                const uint8_t *src = (const uint8_t *)w + (size_t)8 * h * rb + (size_t)(k0 / 256 + b) * bb;
                float *dst = panel + (size_t)256 * b * 16 + 8 * h;
                if (dt == G4_DT_Q4_K) q4_k_block8(src, rb, dst);
                else q6_k_block8(src, rb, dst);
            }
        return;
    }
    float rows[16 * G4_QUANT_PANEL_KC] __attribute__((aligned(32)));
    switch (dt) {
    case G4_DT_Q8_0: DEQ_ROWS(deq_q8_0, 32, 34) break;
    case G4_DT_Q4_0: DEQ_ROWS(deq_q4_0, 32, 18) break;
    case G4_DT_Q5_0: DEQ_ROWS(deq_q5_0, 32, 22) break;
    case G4_DT_Q4_K: DEQ_ROWS(deq_q4_k, 256, 144) break;
    case G4_DT_Q5_K: DEQ_ROWS(deq_q5_k, 256, 176) break;
    case G4_DT_IQ4_XS: DEQ_ROWS(deq_iq4_xs, 256, 136) break;
    case G4_DT_Q3_K: DEQ_ROWS(deq_q3_k, 256, 110) break;
    case G4_DT_Q2_K: DEQ_ROWS(deq_q2_k, 256, 84) break;
    case G4_DT_IQ4_NL: DEQ_ROWS(deq_iq4_nl, 32, 18) break;
    case G4_DT_Q4_1: DEQ_ROWS(deq_q4_1, 32, 20) break;
    case G4_DT_Q5_1: DEQ_ROWS(deq_q5_1, 32, 24) break;
    default: DEQ_ROWS(deq_q6_k, 256, 210) break;
    }
    g4_pack16_f32_avx2(rows, kc, 0, kc, panel);
}
