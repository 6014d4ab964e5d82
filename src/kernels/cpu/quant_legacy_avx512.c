/* quant_legacy_avx512.c — the exact matmul over Q8_0 / Q4_0 / Q5_0 / IQ4_NL / Q4_1 / Q5_1 weights
 * (ggml's 32-weight blocks) on AVX-512F, for decode and inputs of up to G4_QDEC_MAX_ROWS rows: the avx512
 * table's (and so avx512bf16's and amx's) matmul and matmul_rows for these types. Each weight block
 * is read once per call; its 32 quants become two 16-lane float vectors in registers, dotted with
 * every activation row. Inputs of more rows keep the AVX2 entry (the dequantized-panel GEMM).
 *
 * Q8_0 / Q5_0: the AVX2 kernel's float contract (quant_legacy_avx2.c), at 16 lanes instead of 8:
 * per block s = q[0:16] * x[0:16] + q[16:32] * x[16:32] lane by lane (q the signed quant, exact in
 * float), acc += d * s. Q4_0 / IQ4_NL: per block acc += w[0:16] * x[0:16], then + w[16:32] * x[16:32],
 * w the dequantized weight d * (q - 8) (exact, so the same products as d * (q * x) up to rounding),
 * IQ4_NL's d * kvalue as g4_dequant_row rounds it, Q4_1 / Q5_1's d q + m likewise. Either
 * way acc's 16 lanes are summed at the end of the row by one fixed tree (hsum4); Q4_0 / Q5_0
 * quants are signed here (q - 8, q - 16) rather than offset by a separate c * sum(x) term. The
 * order differs from the AVX2 kernel's and the scalar reference's, within docs/numerics.md's
 * tolerance.
 *
 * Row invariance: every (weight row, activation row) result is that one chain whatever the number
 * of rows in the call, the row range or the thread count, so a row decoded beside others (slots, a
 * speculative verify) gets the bits it gets alone. */
#pragma GCC target("avx512f,avx2,fma,f16c")
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/quant.h"

#define AI static inline __attribute__((always_inline))

/* TG: activation rows per pass (each unpacked block feeds TG accumulators); NC: weight rows per
 * chunk when an input takes several passes (the chunk stays in cache for the later passes) */
enum { TG = 4, NC = 16 };
/* the kinds whose block's weights come whole from a table (acc += w * x) */
#define TABLE_KIND(kind) ((kind) == G4_K32_Q4_0 || (kind) == G4_K32_IQ4_NL || (kind) == G4_K32_Q4_1 || (kind) == G4_K32_Q5_1)

/* The block scales: quant.h's table of every f16 as float (shared with the AVX2 decode), so that a
 * block's scale reaches the FMA as one broadcast load (converting it in registers took 3 vector
 * operations a block, as many as half the dot) */
void g4_quant_legacy_avx512_init(void) { g4_f16_f32_avx2_init(); }

AI __m512 bcast_f16(const uint8_t *p) { return _mm512_set1_ps(g4_f16_f32_avx2[p[0] | p[1] << 8]); }

/* Q8_0 (34 B: f16 d, int8 q[32]): 16 weights sign-extended straight from memory, twice */
AI void q8_0_w(const uint8_t *blk, __m512 w[2]) {
    w[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 2))));
    w[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 18))));
}

/* Q4_0 (18 B: f16 d, q[16]; weight j < 16 the low nibble of q[j], 16 + j its high nibble): the
 * block's 32 weights d * (q - 8) (exact in float: 11 by 4 significant bits), the values
 * g4_dequant_row gives. The 16 bytes zero-extended into int32 lanes; a float permute reads only an
 * index's low 4 bits, so the low nibbles index the block's table of its 16 possible weights as they
 * are, the high ones after a shift (the mask, the conversion, the offset and the scale in one
 * operation) */
AI void q4_0_wd(const uint8_t *blk, __m512 w[2]) {
    const __m512 lut = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
    const __m512 tab = _mm512_mul_ps(bcast_f16(blk), lut);
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 2)));
    w[0] = _mm512_permutexvar_ps(v, tab);
    w[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), tab);
}

/* IQ4_NL (18 B: f16 d, q[16], Q4_0's nibble order): the same table form, its 16 entries d * kvalue
 * (g4_dequant_row's values, one rounding each) */
AI void iq4_nl_wd(const uint8_t *blk, __m512 w[2]) {
    const __m512 tab = _mm512_mul_ps(bcast_f16(blk), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)g4_kvalues_iq4nl))));
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 2)));
    w[0] = _mm512_permutexvar_ps(v, tab);
    w[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), tab);
}

/* Q4_1 (20 B: f16 d, f16 m, q[16]) and Q5_1 (24 B: d, m, qh[4], q[16]; bit j of qh is weight j's
 * fifth bit): tables of the block's 16 / 32 possible weights d q + m (d q exact: g4_dequant_row's
 * values), Q5_1's two 16-entry halves indexed by the nibble with the fifth bit as bit 4 (vpermt2ps) */
AI void q_1_wd(const int q5, const uint8_t *blk, __m512 w[2]) {
    const __m512 lut = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512 d = bcast_f16(blk), m = bcast_f16(blk + 2);
    const __m512 tab = _mm512_fmadd_ps(d, lut, m);
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + (q5 ? 8 : 4))));
    if (!q5) {
        w[0] = _mm512_permutexvar_ps(v, tab);
        w[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), tab);
        return;
    }
    const __m512 tab_hi = _mm512_fmadd_ps(d, _mm512_add_ps(lut, _mm512_set1_ps(16.0f)), m);
    uint16_t h[2];
    memcpy(h, blk + 4, 4);
    const __m512i m4 = _mm512_set1_epi32(0xF), b4 = _mm512_set1_epi32(16);
    const __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_srli_epi32(v, 4);
    w[0] = _mm512_permutex2var_ps(tab, _mm512_mask_or_epi32(lo, (__mmask16)h[0], lo, b4), tab_hi);
    w[1] = _mm512_permutex2var_ps(tab, _mm512_mask_or_epi32(hi, (__mmask16)h[1], hi, b4), tab_hi);
}

/* Q5_0 (22 B: f16 d, qh[4], q[16]; weight j < 16 the low nibble of q[j], 16 + j its high nibble;
 * bit j of qh is weight j's fifth bit): Q4_0's nibbles through a table of nibble - 16, then 16
 * added in the lanes whose fifth bit is set — qh's two halves are those lanes' masks as they are */
AI void q5_0_w(const uint8_t *blk, __m512 w[2]) {
    const __m512 lut = _mm512_setr_ps(-16, -15, -14, -13, -12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2, -1);
    const __m512 sixteen = _mm512_set1_ps(16.0f);
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 6)));
    uint16_t h[2];
    memcpy(h, blk + 2, 4);
    const __m512 lo = _mm512_permutexvar_ps(v, lut), hi = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), lut);
    w[0] = _mm512_mask_add_ps(lo, (__mmask16)h[0], lo, sixteen);
    w[1] = _mm512_mask_add_ps(hi, (__mmask16)h[1], hi, sixteen);
}

/* The sums of four rows' accumulators, in lanes 0-3: each row by the same tree of adds (lanes i +
 * i+8, then + i+4, + i+2, + i+1), so a row's bits do not depend on the rows summed beside it (a
 * range's last rows are summed beside zeros) — a quarter of the operations of four separate sums */
AI __m128 hsum4(__m512 a, __m512 b, __m512 c, __m512 d) {
    const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
    const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xEE));
    __m512 t = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xDD));
    t = _mm512_add_ps(t, _mm512_permute_ps(t, 0x4E));
    t = _mm512_add_ps(t, _mm512_permute_ps(t, 0xB1));
    const __m512i first = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castps512_ps128(_mm512_permutexvar_ps(first, t));
}

/* One pass: R weight rows (stride rb) x TN activation rows (stride ldx) over nb blocks into
 * y[t * ldy + r]. pf: prefetch the weight stream (the first pass over these rows). Q8_0 / Q5_0:
 * per block s = q[0:16] * x[0:16] + q[16:32] * x[16:32], acc += d * s (one multiply a block
 * and row fewer than the form below at one row, where these kernels are bound by the FMA ports).
 * Q4_0: the block's weights d * (q - 8) (exact in float) straight from a table, acc += w * x,
 * 16 weights an FMA: the table costs what the scale did, and the weights serve all TN rows. */
AI void pass(const int kind, const int R, const int TN, const uint8_t *w, size_t rb, int nb, const float *x, int ldx,
             int pf, float *y, int ldy) {
    const int bb = g4_k32_bytes(kind);
    __m512 acc[4][TG];   /* R is 4 or 1 */
    for (int r = 0; r < R; r++)
        for (int t = 0; t < TN; t++) acc[r][t] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        if (pf) g4_prefetch_ahead(w + (size_t)b * R * bb, (size_t)R * bb);   /* the R rows' linear range */
        if (TABLE_KIND(kind)) {
            __m512 wv[4][2];
            for (int r = 0; r < R; r++) {
                const uint8_t *blk = w + (size_t)r * rb + (size_t)b * bb;
                if (kind == G4_K32_Q4_0) q4_0_wd(blk, wv[r]);
                else if (kind == G4_K32_IQ4_NL) iq4_nl_wd(blk, wv[r]);
                else q_1_wd(kind == G4_K32_Q5_1, blk, wv[r]);
            }
            for (int t = 0; t < TN; t++) {
                const float *xb = x + (size_t)t * ldx + 32 * b;
                __m512 x0 = _mm512_loadu_ps(xb), x1 = _mm512_loadu_ps(xb + 16);
                if (R > 1) {   /* one load for the R rows, not one folded into each FMA */
                    G4_IN_REGISTER(x0);
                    G4_IN_REGISTER(x1);
                }
                for (int r = 0; r < R; r++) acc[r][t] = _mm512_fmadd_ps(wv[r][1], x1, _mm512_fmadd_ps(wv[r][0], x0, acc[r][t]));
            }
            continue;
        }
        for (int r = 0; r < R; r++) {
            const uint8_t *blk = w + (size_t)r * rb + (size_t)b * bb;
            __m512 q[2];
            if (kind == G4_K32_Q8_0) q8_0_w(blk, q);
            else q5_0_w(blk, q);
            const __m512 d = bcast_f16(blk);
            for (int t = 0; t < TN; t++) {
                const float *xb = x + (size_t)t * ldx + 32 * b;
                __m512 s = _mm512_mul_ps(q[0], _mm512_loadu_ps(xb));
                s = _mm512_fmadd_ps(q[1], _mm512_loadu_ps(xb + 16), s);
                acc[r][t] = _mm512_fmadd_ps(d, s, acc[r][t]);
            }
        }
    }
    const __m512 z = _mm512_setzero_ps();
    for (int t = 0; t < TN; t++) {
        const __m128 v = R == 4 ? hsum4(acc[0][t], acc[1][t], acc[2][t], acc[3][t]) : hsum4(acc[0][t], z, z, z);
        if (R == 4) _mm_storeu_ps(y + (size_t)t * ldy, v);
        else y[(size_t)t * ldy] = _mm_cvtss_f32(v);
    }
}

/* The pass shapes, each compiled with its R and TN constant (the accumulators in registers): 4
 * weight rows x up to TG activation rows (each unpacked block feeds TN accumulators, each loaded
 * activation vector 4), 1 weight row for a range's last rows */
#define PASS_PARAMS const uint8_t *w, size_t rb, int nb, const float *x, int ldx, int pf, float *y, int ldy
#define PASS_ARGS w, rb, nb, x, ldx, pf, y, ldy
#define SHAPES(name, NAME)                                    \
    static void pass_##name(int R, int TN, PASS_PARAMS) {     \
        switch ((R == 4 ? 0 : 4) + TN) {                      \
        case 1: pass(G4_K32_##NAME, 4, 1, PASS_ARGS); break;  \
        case 2: pass(G4_K32_##NAME, 4, 2, PASS_ARGS); break;  \
        case 3: pass(G4_K32_##NAME, 4, 3, PASS_ARGS); break;  \
        case 4: pass(G4_K32_##NAME, 4, 4, PASS_ARGS); break;  \
        case 5: pass(G4_K32_##NAME, 1, 1, PASS_ARGS); break;  \
        case 6: pass(G4_K32_##NAME, 1, 2, PASS_ARGS); break;  \
        case 7: pass(G4_K32_##NAME, 1, 3, PASS_ARGS); break;  \
        default: pass(G4_K32_##NAME, 1, 4, PASS_ARGS); break; \
        }                                                     \
    }
G4_K32_KINDS(SHAPES)
#define PASS_OF(name, NAME) [G4_K32_##NAME] = pass_##name,
static void (*const pass_of[])(int, int, PASS_PARAMS) = {G4_K32_KINDS(PASS_OF)};

/* Rows [n0, n1) x T (<= G4_QDEC_MAX_ROWS) activation rows. Inputs of more than TG rows go per
 * chunk of NC weight rows, each pass of up to TG activation rows over the whole chunk: the first
 * pass reads the chunk from memory, the others find it in cache. */
static void decode(const int kind, const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    const int bb = g4_k32_bytes(kind);
    void (*const pass_fn)(int, int, PASS_PARAMS) = pass_of[kind];
    const int nb = K / 32;
    const size_t rb = (size_t)nb * bb;
    const int nc_rows = T > TG ? NC : n1 - n0;
    for (int nc = n0; nc < n1; nc += nc_rows) {
        const int ne = n1 - nc < nc_rows ? n1 : nc + nc_rows;
        for (int t0 = 0; t0 < T;) {
            const int tn = T - t0 < TG ? T - t0 : TG;
            for (int n = nc; n < ne;) {
                const int R = n + 4 <= ne ? 4 : 1;
                pass_fn(R, tn, (const uint8_t *)w + (size_t)n * rb, rb, nb, x + (size_t)t0 * K, K, t0 == 0,
                        y + (size_t)t0 * ldy + n, ldy);
                n += R;
            }
            t0 += tn;
        }
    }
}

/* Any T through the decode, 16 activation rows a call (row-invariant) */
static void decode_rows(const int kind, const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    for (int t0 = 0; t0 < T && n0 < n1; t0 += G4_QDEC_MAX_ROWS)
        decode(kind, x + (size_t)t0 * K, T - t0 < G4_QDEC_MAX_ROWS ? T - t0 : G4_QDEC_MAX_ROWS, K, w, n0, n1,
               y + (size_t)t0 * ldy, ldy);
}

/* matmul (g4_mm_*_avx512): inputs of more than G4_QDEC_MAX_ROWS rows take the AVX2 entry (its
 * panel GEMM, as the avx512 table's matmul_xp's last rows do), the rest the decode; matmul_rows
 * (g4_mm_rows_*_avx512): the decode at any T */
#define MM_LEGACY(name, NAME)                                                                                       \
    void g4_mm_##name##_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {      \
        if (T > G4_QDEC_MAX_ROWS) g4_mm_##name##_avx2_rows(x, T, K, w, n0, n1, y, ldy);                            \
        else decode_rows(G4_K32_##NAME, x, T, K, w, n0, n1, y, ldy);                                               \
    }                                                                                                               \
    void g4_mm_rows_##name##_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) { \
        decode_rows(G4_K32_##NAME, x, T, K, w, n0, n1, y, ldy);                                                    \
    }
G4_K32_KINDS(MM_LEGACY)
