/* quant_act_avx2.c — the int8-activation matmuls (--act-q8) for AVX2: quantized weights ×
 * activations already quantized to Q8_0 / Q8_K blocks, as ggml's x86 ggml_vec_dot_*_q8_* do it
 * (maddubs/madd int8 products summed exactly in int32, one float scale per block or sub-block,
 * float accumulation), tiled so that one unpacked weight block serves up to 4 activation rows and
 * one activation block up to 4 weight rows. Each (weight row, activation row) keeps ggml's own
 * per-block fmadd chain and final horizontal sum, so results are bit-identical to ggml's x86
 * kernels (tests/c/test_quant_act.c); they differ from the scalar reference only in order. */
#pragma GCC target("avx2,fma,f16c")
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/quant.h"
#include "kernels/cpu/quant_act_blocks_avx2.h"

#define INLINE static inline __attribute__((always_inline))

/* ---------------------------------------------------------------- activations */

/* ggml's x86 quantize_row_q8_0 / quantize_row_q8_1 (ggml-cpu/arch/x86/quants.c, AVX2 branch),
 * operation for operation: d = amax/127 (f16), q = round-half-even(x * (127/amax)); Q8_1's
 * s = f16(d * the quants' integer sum). Q8_K rows go through the reference, as in ggml's x86
 * build (quantize_row_q8_K = quantize_row_q8_K_ref). */
void g4_act_quantize_avx2(g4_dtype wdt, const float *x, int T, int K, void *dst) {
    const g4_act_fmt fmt = g4_act_format(wdt);
    if (fmt != G4_ACT_Q8_0 && fmt != G4_ACT_Q8_1) { g4_act_quantize(wdt, x, T, K, dst); return; }
    const int q8_1 = fmt == G4_ACT_Q8_1;
    uint8_t *y = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < (int64_t)T * (K / 32); i++, x += 32, y += q8_1 ? G4_Q8_1_BYTES : G4_Q8_0_BYTES) {
        __m256 v[4];
        for (int k = 0; k < 4; k++) v[k] = _mm256_loadu_ps(x + 8 * k);
        __m256 mx = _mm256_andnot_ps(sign, v[0]);
        for (int k = 1; k < 4; k++) mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, v[k]));
        __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(mx, 1), _mm256_castps256_ps128(mx));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        const float d = amax / 127.f;
        g4_put_16le(y, _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
        const __m256 mul = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        if (q8_1) {
            __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
            int32_t l[8], sum = 0;
            _mm256_storeu_si256((__m256i *)l, s);
            for (int k = 0; k < 8; k++) sum += l[k];
            g4_put_16le(y + 2, _cvtss_sh(d * (float)sum, _MM_FROUND_TO_NEAREST_INT));
        }
        /* int32 -> int8 with the lane order restored after the in-lane packs */
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(y + (q8_1 ? 4 : 2)), p);
    }
}

/* ---------------------------------------------------------------- 32-blocks × Q8_0 */

/* sum of the 32 int8 products, as 8 int32 partial sums converted to float (ggml's
 * mul_sum_i8_pairs_float: |x| · sign(y, x) through maddubs, then pairs through madd) */
INLINE __m256 mul_sum_i8(__m256i ax, __m256i x, __m256i y) {
    const __m256i dot = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(y, x));
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(dot, _mm256_set1_epi16(1)));
}

/* Q4_1 / Q5_1's unsigned quants times the activation's (ggml's mul_sum_us8_pairs_float) */
INLINE __m256 mul_sum_us8(__m256i ux, __m256i y) {
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(ux, y), _mm256_set1_epi16(1)));
}

/* Q4_1 / Q5_1 weights take Q8_1 activation blocks (36 B: d, s, q[32]), the others Q8_0's (34 B:
 * d, q[32]): which, a block's bytes, and where its quants start */
INLINE int q8_1_kind(int kind) { return kind == G4_ACT_K_Q4_1 || kind == G4_ACT_K_Q5_1; }
INLINE size_t act_block_bytes(int kind) { return q8_1_kind(kind) ? G4_Q8_1_BYTES : G4_Q8_0_BYTES; }
INLINE size_t act_quants_at(int kind) { return q8_1_kind(kind) ? 4 : 2; }

/* NR weight rows [n, n+NR) × NT activation rows [t0, t0+NT). IQ4_NL_VEC (ggml's
 * ggml_vec_dot_iq4_nl_q8_0): even blocks into acc, odd ones into acc2, the two added before the
 * horizontal sum; an odd last block after it, its integer sum times d in one scalar FMA.
 * Q4_1 / Q5_1 (ggml_vec_dot_q4_1_q8_1 / _q5_1_q8_1): beside acc a scalar sum of m * s, one FMA a
 * block as ggml's build makes it (the same float as a multiply and an add: m and s are f16, their
 * product exact), added after the horizontal sum. */
INLINE void tile32(int kind, int NR, int NT, const uint8_t *w, size_t rb, size_t bb, const uint8_t *x,
                   size_t xb, int nb, int n, int t0, float *y, int ldy) {
    const int iq4 = kind == G4_ACT_K_IQ4_NL_VEC, q81 = q8_1_kind(kind);
    const size_t ab = act_block_bytes(kind), aq = act_quants_at(kind);
    __m256 acc[4][4], acc2[4][4];
    float summs[4][4], sy[4] = {0};
    for (int r = 0; r < NR; r++)
        for (int t = 0; t < NT; t++) acc[r][t] = acc2[r][t] = _mm256_setzero_ps(), summs[r][t] = 0;
    const uint8_t *rows = w + (size_t)n * rb;   /* the NR rows: contiguous, NR * bb bytes per block step */
    for (int b = 0; b < nb; b++) {
        /* the first pass over these rows reads them from DRAM (decode of one sequence or a few):
         * the NR rows' linear range, ahead; later passes find them in cache */
        if (t0 == 0) g4_prefetch_ahead(rows + (size_t)b * NR * bb, (size_t)NR * bb);
        __m256i qy[4];
        __m256 dy[4];
        for (int t = 0; t < NT; t++) {
            const uint8_t *xblk = x + (size_t)(t0 + t) * xb + (size_t)b * ab;
            qy[t] = _mm256_loadu_si256((const __m256i *)(xblk + aq));
            dy[t] = _mm256_set1_ps(g4_ld_f16(xblk));
            if (q81) sy[t] = g4_ld_f16(xblk + 2);
        }
        for (int r = 0; r < NR; r++) {
            const uint8_t *blk = w + (size_t)(n + r) * rb + (size_t)b * bb;
            const __m256i qx = g4_act_unpack32_avx2(kind, blk), ax = _mm256_sign_epi8(qx, qx);
            const __m256 dx = _mm256_set1_ps(g4_ld_f16(blk));
            if (q81) {
                const float mx = g4_ld_f16(blk + 2);
                for (int t = 0; t < NT; t++) {
                    summs[r][t] = fmaf(mx, sy[t], summs[r][t]);
                    acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dx, dy[t]), mul_sum_us8(qx, qy[t]), acc[r][t]);
                }
                continue;
            }
            /* dx * dy as a vector product: the same float as ggml's scalar product, broadcast */
            for (int t = 0; t < NT; t++) {
                if (iq4 && (b & 1)) acc2[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dx, dy[t]), mul_sum_i8(ax, qx, qy[t]), acc2[r][t]);
                else if (!iq4 || b + 1 < nb || !(nb & 1)) acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dx, dy[t]), mul_sum_i8(ax, qx, qy[t]), acc[r][t]);
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int t = 0; t < NT; t++) {
            float v = g4_hsum8(iq4 ? _mm256_add_ps(acc[r][t], acc2[r][t]) : acc[r][t]);
            if (q81) v += summs[r][t];
            if (iq4 && (nb & 1))
                v = g4_iq4_nl_tail(w + (size_t)(n + r) * rb + (size_t)(nb - 1) * bb, x + (size_t)(t0 + t) * xb + (size_t)(nb - 1) * G4_Q8_0_BYTES, v);
            y[(size_t)(t0 + t) * ldy + n + r] = v;
        }
}

/* Weight rows in groups of 16 (about 27 KB of Q8_0 at K = 1536: they stay in L1/L2 while every
 * activation chunk of 4 rows passes over them, so prefill reads the weights from memory once);
 * decode (one activation row) takes 4 weight rows per tile, so four block chains overlap. */
INLINE void mmq32(int kind, size_t bb, const void *xq, int T, int K, const void *w, int n0, int n1, float *y,
                  int ldy) {
    const int nb = K / 32;
    const size_t rb = (size_t)nb * bb, xb = (size_t)nb * act_block_bytes(kind);
    for (int g0 = n0; g0 < n1; g0 += 16) {
        const int g1 = g0 + 16 < n1 ? g0 + 16 : n1;
        for (int t0 = 0; t0 < T; t0 += 4) {
            const int tn = T - t0 < 4 ? T - t0 : 4;
            int n = g0;
            switch (tn) {
            case 1:
                for (; n + 4 <= g1; n += 4) tile32(kind, 4, 1, w, rb, bb, xq, xb, nb, n, t0, y, ldy);
                for (; n < g1; n++) tile32(kind, 1, 1, w, rb, bb, xq, xb, nb, n, t0, y, ldy);
                break;
            case 2:
                for (; n + 2 <= g1; n += 2) tile32(kind, 2, 2, w, rb, bb, xq, xb, nb, n, t0, y, ldy);
                for (; n < g1; n++) tile32(kind, 1, 2, w, rb, bb, xq, xb, nb, n, t0, y, ldy);
                break;
            case 3:
                for (; n + 2 <= g1; n += 2) tile32(kind, 2, 3, w, rb, bb, xq, xb, nb, n, t0, y, ldy);
                for (; n < g1; n++) tile32(kind, 1, 3, w, rb, bb, xq, xb, nb, n, t0, y, ldy);
                break;
            default:
                for (; n + 2 <= g1; n += 2) tile32(kind, 2, 4, w, rb, bb, xq, xb, nb, n, t0, y, ldy);
                for (; n < g1; n++) tile32(kind, 1, 4, w, rb, bb, xq, xb, nb, n, t0, y, ldy);
                break;
            }
        }
    }
}

/* Prefill (T >= 4): one weight row against up to G32_NT activation rows, each weight block
 * unpacked (and its |q| taken) once for all of them, and the activation blocks' d (Q8_1: and s)
 * widened from f16 once per call for a chunk of G32_TC rows; dx * dy for the tile's rows in one
 * product, Q4_1 / Q5_1's m * s chains (one scalar FMA chain per row in tile32) in the lanes of one
 * vector. Per (row, t) the same operations as tile32 (ggml's): the same block sums, scales and
 * fmadd chains. */
enum { G32_NT = 8, G32_TC = 16, G32_NB = 512 };

INLINE void g32_tile(int kind, int NT, const uint8_t *row, size_t bb, const uint8_t *x, size_t xb, int nb,
                     const float *yd, const float *ys, float *y, int ldy) {
    const int q81 = q8_1_kind(kind);
    const size_t ab = act_block_bytes(kind), aq = act_quants_at(kind);
    __m256 acc[G32_NT], summs = _mm256_setzero_ps();
    for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = row + (size_t)b * bb;
        const __m256i qx = g4_act_unpack32_avx2(kind, blk), ax = _mm256_sign_epi8(qx, qx);
        const __m256 d = _mm256_mul_ps(_mm256_set1_ps(g4_ld_f16(blk)), _mm256_loadu_ps(yd + (size_t)b * G32_TC));
        if (q81) summs = _mm256_fmadd_ps(_mm256_set1_ps(g4_ld_f16(blk + 2)), _mm256_loadu_ps(ys + (size_t)b * G32_TC), summs);
        for (int t = 0; t < NT; t++) {
            const __m256i qy = _mm256_loadu_si256((const __m256i *)(x + (size_t)t * xb + (size_t)b * ab + aq));
            const __m256 s = q81 ? mul_sum_us8(qx, qy) : mul_sum_i8(ax, qx, qy);
            acc[t] = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(d, _mm256_set1_epi32(t)), s, acc[t]);
        }
    }
    float sm[8];
    _mm256_storeu_ps(sm, summs);
    for (int t = 0; t < NT; t++) y[(size_t)t * ldy] = q81 ? g4_hsum8(acc[t]) + sm[t] : g4_hsum8(acc[t]);
}

/* activation rows in chunks of G32_TC, weight rows in groups of 16 (in L1/L2 while the chunk's
 * tiles pass over them); decode and K past G32_NB blocks: mmq32 */
INLINE void gemm32(int kind, size_t bb, const void *xq, int T, int K, const void *w, int n0, int n1, float *y,
                   int ldy) {
    const int nb = K / 32, q81 = q8_1_kind(kind);
    if (T < 4 || nb > G32_NB) { mmq32(kind, bb, xq, T, K, w, n0, n1, y, ldy); return; }
    const size_t ab = act_block_bytes(kind), rb = (size_t)nb * bb, xb = (size_t)nb * ab;
    /* [block][t] (+8: a tile's 8-lane load at the last t); ys: Q8_1's s */
    float yd[G32_NB * G32_TC + 8], ys[G32_NB * G32_TC + 8];
    for (int t0 = 0; t0 < T; t0 += G32_TC) {
        const int tn = T - t0 < G32_TC ? T - t0 : G32_TC;
        const uint8_t *xc = (const uint8_t *)xq + (size_t)t0 * xb;
        for (int t = 0; t < tn; t++)
            for (int b = 0; b < nb; b++) {
                yd[(size_t)b * G32_TC + t] = g4_ld_f16(xc + (size_t)t * xb + (size_t)b * ab);
                if (q81) ys[(size_t)b * G32_TC + t] = g4_ld_f16(xc + (size_t)t * xb + (size_t)b * ab + 2);
            }
        for (int g0 = n0; g0 < n1; g0 += 16) {
            const int g1 = g0 + 16 < n1 ? g0 + 16 : n1;
            for (int tc = 0; tc < tn; tc += G32_NT) {
                const uint8_t *xt = xc + (size_t)tc * xb;
                float *yt = y + (size_t)(t0 + tc) * ldy;
                for (int n = g0; n < g1; n++) {
                    const uint8_t *row = (const uint8_t *)w + (size_t)n * rb;
                    switch (tn - tc < G32_NT ? tn - tc : G32_NT) {
                    case 1: g32_tile(kind, 1, row, bb, xt, xb, nb, yd + tc, ys + tc, yt + n, ldy); break;
                    case 2: g32_tile(kind, 2, row, bb, xt, xb, nb, yd + tc, ys + tc, yt + n, ldy); break;
                    case 3: g32_tile(kind, 3, row, bb, xt, xb, nb, yd + tc, ys + tc, yt + n, ldy); break;
                    case 4: g32_tile(kind, 4, row, bb, xt, xb, nb, yd + tc, ys + tc, yt + n, ldy); break;
                    case 5: g32_tile(kind, 5, row, bb, xt, xb, nb, yd + tc, ys + tc, yt + n, ldy); break;
                    case 6: g32_tile(kind, 6, row, bb, xt, xb, nb, yd + tc, ys + tc, yt + n, ldy); break;
                    case 7: g32_tile(kind, 7, row, bb, xt, xb, nb, yd + tc, ys + tc, yt + n, ldy); break;
                    default: g32_tile(kind, 8, row, bb, xt, xb, nb, yd + tc, ys + tc, yt + n, ldy); break;
                    }
                }
            }
        }
    }
}

void g4_mmq_q8_0_avx2(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    gemm32(G4_ACT_K_Q8_0, 34, xq, T, K, w, n0, n1, y, ldy);
}
void g4_mmq_q4_0_avx2(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    gemm32(G4_ACT_K_Q4_0, 18, xq, T, K, w, n0, n1, y, ldy);
}
void g4_mmq_q5_0_avx2(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    gemm32(G4_ACT_K_Q5_0, 22, xq, T, K, w, n0, n1, y, ldy);
}
/* IQ4_NL as llama.cpp multiplies it: one activation row through ggml's dot (two accumulators),
 * more through its tinyBLAS GEMM (one accumulator, Q4_0's chain) */
void g4_mmq_iq4_nl_avx2(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    if (T == 1) mmq32(G4_ACT_K_IQ4_NL_VEC, 18, xq, T, K, w, n0, n1, y, ldy);
    else gemm32(G4_ACT_K_IQ4_NL, 18, xq, T, K, w, n0, n1, y, ldy);
}

/* Q4_1 / Q5_1: llama.cpp multiplies them through ggml's dot at every row count (no tinyBLAS or
 * repacked form): the decode tiles and the prefill tiles keep its chain, row-invariant */
void g4_mmq_q4_1_avx2(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    gemm32(G4_ACT_K_Q4_1, 20, xq, T, K, w, n0, n1, y, ldy);
}
void g4_mmq_q5_1_avx2(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    gemm32(G4_ACT_K_Q5_1, 24, xq, T, K, w, n0, n1, y, ldy);
}

/* ---------------------------------------------------------------- 256-blocks × Q8_K */

/* A Q4_K / Q5_K block's 64 quants 64j..64j+63 as bytes (ggml's AVX2 unpacking): lo the low nibbles
 * (sub-block 2j), hi the high ones (2j + 1), Q5_K's with their fifth bits (bits 2j / 2j + 1 of qh)
 * added as 16 */
INLINE void k45_quants(int q5, const uint8_t *b, __m256i hbits, int j, __m256i *lo, __m256i *hi) {
    const __m256i m4 = _mm256_set1_epi8(0xF), mone = _mm256_set1_epi8(1);
    const __m256i bits = _mm256_loadu_si256((const __m256i *)(b + (q5 ? 48 : 16) + 32 * j));
    *lo = _mm256_and_si256(bits, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
    if (!q5) return;
    *lo = _mm256_add_epi8(*lo, _mm256_slli_epi16(_mm256_srli_epi16(_mm256_and_si256(hbits, _mm256_slli_epi16(mone, 2 * j)), 2 * j), 4));
    *hi = _mm256_add_epi8(*hi, _mm256_slli_epi16(_mm256_srli_epi16(_mm256_and_si256(hbits, _mm256_slli_epi16(mone, 2 * j + 1)), 2 * j + 1), 4));
}

/* One weight row [n] × NT activation rows [t0, t0+NT), ggml's ggml_vec_dot_q4_K_q8_K / _q5_K_q8_K
 * (AVX2) with the weight block's unpacking shared by the activation rows. The two differ in the
 * quants (Q5_K's fifth bit) and in the mins: Q4_K adds their 4 products per block to a 4-lane
 * vector (fmadd), Q5_K sums them in integers and adds that to one float per row (summs += dmin *
 * sum, an FMA in ggml's build). */
INLINE void tile_k45(int q5, int NT, const uint8_t *row, const g4_block_q8_K *x, int nb, int n, int t0, float *y, int ldy) {
    const size_t bb = q5 ? 176 : 144;
    __m256 acc[4];
    __m128 acc_m[4];
    float summs[4];
    for (int t = 0; t < NT; t++) { acc[t] = _mm256_setzero_ps(); acc_m[t] = _mm_setzero_ps(); summs[t] = 0.0f; }
    for (int i = 0; i < nb; i++) {
        const uint8_t *b = row + (size_t)i * bb;
        if (t0 == 0) g4_prefetch_ahead(b, bb);   /* the first pass reads the rows from DRAM, one after another */
        const float dw = g4_ld_f16(b), dmw = g4_ld_f16(b + 2);
        uint32_t utmp[4];   /* scales[8], mins[8] as bytes */
        g4_q4_k_scales(b + 4, utmp);
        const __m256i mins_scales = _mm256_cvtepu8_epi16(_mm_set_epi32((int)utmp[3], (int)utmp[2], (int)utmp[1], (int)utmp[0]));
        const __m128i mins = _mm256_extracti128_si256(mins_scales, 1), sc128 = _mm256_castsi256_si128(mins_scales);
        const __m256i scales = _mm256_set_m128i(sc128, sc128);
        __m256i sumi[4];
        for (int t = 0; t < NT; t++) {
            const g4_block_q8_K *yb = x + (size_t)(t0 + t) * nb + i;
            g4_k45_mins(q5, mins, yb, dmw, &acc_m[t], &summs[t]);
            sumi[t] = _mm256_setzero_si256();
        }
        const __m256i hbits = q5 ? _mm256_loadu_si256((const __m256i *)(b + 16)) : _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            /* broadcast int16 scales 2j and 2j+1 (ggml's get_scale_shuffle_k4) */
            const __m256i scale_l = _mm256_shuffle_epi8(scales, _mm256_set1_epi16((short)((4 * j + 1) << 8 | 4 * j)));
            const __m256i scale_h = _mm256_shuffle_epi8(scales, _mm256_set1_epi16((short)((4 * j + 3) << 8 | (4 * j + 2))));
            __m256i ql, qh;
            k45_quants(q5, b, hbits, j, &ql, &qh);
            for (int t = 0; t < NT; t++) {
                const int8_t *q8 = x[(size_t)(t0 + t) * nb + i].qs + 64 * j;
                const __m256i p16l = _mm256_madd_epi16(scale_l, _mm256_maddubs_epi16(ql, _mm256_loadu_si256((const __m256i *)q8)));
                const __m256i p16h = _mm256_madd_epi16(scale_h, _mm256_maddubs_epi16(qh, _mm256_loadu_si256((const __m256i *)(q8 + 32))));
                sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(p16l, p16h));
            }
        }
        for (int t = 0; t < NT; t++) {
            const float d = x[(size_t)(t0 + t) * nb + i].d * dw;
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
        }
    }
    for (int t = 0; t < NT; t++)
        y[(size_t)(t0 + t) * ldy + n] = g4_hsum8(acc[t]) + (q5 ? summs[t] : g4_hsum4(acc_m[t]));
}
INLINE void tile_q4_k(int NT, const uint8_t *row, const g4_block_q8_K *x, int nb, int n, int t0, float *y, int ldy) {
    tile_k45(0, NT, row, x, nb, n, t0, y, ldy);
}
INLINE void tile_q5_k(int NT, const uint8_t *row, const g4_block_q8_K *x, int nb, int n, int t0, float *y, int ldy) {
    tile_k45(1, NT, row, x, nb, n, t0, y, ldy);
}

/* ggml's ggml_vec_dot_iq4_xs_q8_K (AVX2): the nibbles through the kvalues table (pshufb) into
 * signed bytes, two sub-blocks' products a step (sign / maddubs, ggml's mul_add_epi8) scaled by
 * their ls - 32 into two int32 sums; per block one fmadd of their sum by d y.d */
INLINE void tile_iq4_xs(int NT, const uint8_t *row, const g4_block_q8_K *x, int nb, int n, int t0, float *y, int ldy) {
    const __m128i kv = _mm_loadu_si128((const __m128i *)g4_kvalues_iq4nl), m4 = _mm_set1_epi8(0x0F);
    __m256 acc[4];
    for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const uint8_t *b = row + (size_t)i * 136;
        if (t0 == 0) g4_prefetch_ahead(b, 136);   /* the first pass */
        __m256i s1[4], s2[4];
        for (int t = 0; t < NT; t++) s1[t] = s2[t] = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib += 2) {
            const __m128i v1 = _mm_loadu_si128((const __m128i *)(b + 8 + 16 * ib)), v2 = _mm_loadu_si128((const __m128i *)(b + 24 + 16 * ib));
            const __m256i q1 = _mm256_set_m128i(_mm_shuffle_epi8(kv, _mm_and_si128(_mm_srli_epi16(v1, 4), m4)), _mm_shuffle_epi8(kv, _mm_and_si128(v1, m4))),
                          q2 = _mm256_set_m128i(_mm_shuffle_epi8(kv, _mm_and_si128(_mm_srli_epi16(v2, 4), m4)), _mm_shuffle_epi8(kv, _mm_and_si128(v2, m4)));
            const __m256i aq1 = _mm256_sign_epi8(q1, q1), aq2 = _mm256_sign_epi8(q2, q2);
            const __m256i ls1 = _mm256_set1_epi16((short)(g4_iq4_xs_scale(b, ib) - 32)), ls2 = _mm256_set1_epi16((short)(g4_iq4_xs_scale(b, ib + 1) - 32));
            for (int t = 0; t < NT; t++) {
                const int8_t *q8 = x[(size_t)(t0 + t) * nb + i].qs + 32 * ib;
                const __m256i p1 = _mm256_maddubs_epi16(aq1, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)q8), q1));
                const __m256i p2 = _mm256_maddubs_epi16(aq2, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(q8 + 32)), q2));
                s1[t] = _mm256_add_epi32(_mm256_madd_epi16(p1, ls1), s1[t]);
                s2[t] = _mm256_add_epi32(_mm256_madd_epi16(p2, ls2), s2[t]);
            }
        }
        const float dw = g4_ld_f16(b);
        for (int t = 0; t < NT; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x[(size_t)(t0 + t) * nb + i].d), _mm256_cvtepi32_ps(_mm256_add_epi32(s1[t], s2[t])), acc[t]);
    }
    for (int t = 0; t < NT; t++) y[(size_t)(t0 + t) * ldy + n] = g4_hsum8(acc[t]);
}

/* ggml's ggml_vec_dot_q6_K_q8_K (AVX2): unsigned 6-bit quants through maddubs, the -32 offset
 * taken out afterwards through the activation's bsums (32 * sum(bsums * scales)). */
INLINE void tile_q6_k(int NT, const uint8_t *row, const g4_block_q8_K *x, int nb, int n, int t0, float *y, int ldy) {
    const __m256i m3 = _mm256_set1_epi8(3), m15 = _mm256_set1_epi8(15);
    __m256 acc[4];
    for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const uint8_t *b = row + (size_t)i * 210;
        if (t0 == 0) g4_prefetch_ahead(b, 210);   /* the first pass */
        const float dw = g4_ld_f16(b + 208);
        const __m256i scales_16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 192)));
        __m256i sumi[4];
        for (int t = 0; t < NT; t++) {
            const g4_block_q8_K *yb = x + (size_t)(t0 + t) * nb + i;
            const __m256i q8sums = _mm256_loadu_si256((const __m256i *)yb->bsums);
            sumi[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(q8sums, scales_16), 5));
        }
        for (int j = 0; j < 2; j++) {
            const uint8_t *q4 = b + 64 * j, *qh = b + 128 + 32 * j;
            const __m256i q4bits1 = _mm256_loadu_si256((const __m256i *)q4);
            const __m256i q4bits2 = _mm256_loadu_si256((const __m256i *)(q4 + 32));
            const __m256i q4bitsH = _mm256_loadu_si256((const __m256i *)qh);
            const __m256i q4h_0 = _mm256_slli_epi16(_mm256_and_si256(q4bitsH, m3), 4);
            const __m256i q4h_1 = _mm256_slli_epi16(_mm256_and_si256(q4bitsH, _mm256_set1_epi8(12)), 2);
            const __m256i q4h_2 = _mm256_and_si256(q4bitsH, _mm256_set1_epi8(48));
            const __m256i q4h_3 = _mm256_srli_epi16(_mm256_and_si256(q4bitsH, _mm256_set1_epi8(-64)), 2);
            __m256i q[4], s[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(q4bits1, m15), q4h_0);
            q[1] = _mm256_or_si256(_mm256_and_si256(q4bits2, m15), q4h_1);
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4bits1, 4), m15), q4h_2);
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4bits2, 4), m15), q4h_3);
            /* quants 32k..32k+31 of this half: scales 8j+2k (first 16), 8j+2k+1, shuffled out of
             * the widened scales 8j..8j+7 in both lanes (one shuffle each, as gk_tile_q6_k) */
            const __m256i sj = j ? _mm256_permute4x64_epi64(scales_16, 0xEE) : _mm256_permute4x64_epi64(scales_16, 0x44);
            for (int k = 0; k < 4; k++) {
                const short i0 = (short)((4 * k + 1) << 8 | 4 * k), i1 = (short)((4 * k + 3) << 8 | (4 * k + 2));
                s[k] = _mm256_shuffle_epi8(sj, _mm256_setr_epi16(i0, i0, i0, i0, i0, i0, i0, i0, i1, i1, i1, i1, i1, i1, i1, i1));
            }
            for (int t = 0; t < NT; t++) {
                const int8_t *q8 = x[(size_t)(t0 + t) * nb + i].qs + 128 * j;
                __m256i sum = sumi[t];
                for (int k = 0; k < 4; k++) {
                    const __m256i p16 = _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)(q8 + 32 * k)));
                    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(s[k], p16));
                }
                sumi[t] = sum;
            }
        }
        for (int t = 0; t < NT; t++) {
            const float d = x[(size_t)(t0 + t) * nb + i].d * dw;
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
        }
    }
    for (int t = 0; t < NT; t++) y[(size_t)(t0 + t) * ldy + n] = g4_hsum8(acc[t]);
}

/* ggml's ggml_vec_dot_q3_K_q8_K (AVX2): the 2-bit parts and the high bits' -4 (where the hmask bit
 * is clear) through two maddubs and a subtraction, each 16 weights' products scaled by their
 * sc - 32; per block one fmadd of the 8 int32 lanes by d y.d */
INLINE void tile_q3_k(int NT, const uint8_t *row, const g4_block_q8_K *x, int nb, int n, int t0, float *y, int ldy) {
    const __m256i m3 = _mm256_set1_epi8(3), mone = _mm256_set1_epi8(1);
    __m256 acc[4];
    for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const uint8_t *b = row + (size_t)i * 110;
        if (t0 == 0) g4_prefetch_ahead(b, 110);   /* the first pass */
        const __m128i sc = g4_q3_k_scales_m32(b + 96);
        const __m256i all = _mm256_cvtepi8_epi16(sc);
        const __m128i lo = _mm256_castsi256_si128(all), hi = _mm256_extracti128_si256(all, 1);
        const __m256i scales[2] = {_mm256_set_m128i(lo, lo), _mm256_set_m128i(hi, hi)};
        const __m256i hbits = _mm256_loadu_si256((const __m256i *)b);
        __m256i sumi[4];
        for (int t = 0; t < NT; t++) sumi[t] = _mm256_setzero_si256();
        for (int j = 0; j < 2; j++) {
            const __m256i q3bits = _mm256_loadu_si256((const __m256i *)(b + 32 + 32 * j));
            __m256i ql[4], qh[4], s[4];
            for (int k = 0; k < 4; k++) {
                const int bit = 4 * j + k;
                ql[k] = _mm256_and_si256(_mm256_srli_epi16(q3bits, 2 * k), m3);
                qh[k] = _mm256_slli_epi16(_mm256_srli_epi16(_mm256_andnot_si256(hbits, _mm256_slli_epi16(mone, bit)), bit), 2);
                /* int16 scale 2k in the low lane, 2k + 1 in the high one (ggml's get_scale_shuffle_q3k) */
                const short i0 = (short)((4 * k + 1) << 8 | 4 * k), i1 = (short)((4 * k + 3) << 8 | (4 * k + 2));
                s[k] = _mm256_shuffle_epi8(scales[j], _mm256_setr_epi16(i0, i0, i0, i0, i0, i0, i0, i0, i1, i1, i1, i1, i1, i1, i1, i1));
            }
            for (int t = 0; t < NT; t++) {
                const int8_t *q8 = x[(size_t)(t0 + t) * nb + i].qs + 128 * j;
                __m256i p[4];
                for (int k = 0; k < 4; k++) {
                    const __m256i y8 = _mm256_loadu_si256((const __m256i *)(q8 + 32 * k));
                    p[k] = _mm256_madd_epi16(s[k], _mm256_sub_epi16(_mm256_maddubs_epi16(ql[k], y8), _mm256_maddubs_epi16(qh[k], y8)));
                }
                sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(_mm256_add_epi32(p[0], p[1]), _mm256_add_epi32(p[2], p[3])));
            }
        }
        const float dw = g4_ld_f16(b + 108);
        for (int t = 0; t < NT; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(x[(size_t)(t0 + t) * nb + i].d * dw), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
    }
    for (int t = 0; t < NT; t++) y[(size_t)(t0 + t) * ldy + n] = g4_hsum8(acc[t]);
}

/* ggml's ggml_vec_dot_q2_K_q8_K (AVX2): per block first the mins' 16 products with the activation's
 * 16-sums (madd: 8 int32 lanes) by -y.d dmin, then the quants' scaled products by y.d d, both
 * fmadd into the one 8-lane accumulator */
INLINE void tile_q2_k(int NT, const uint8_t *row, const g4_block_q8_K *x, int nb, int n, int t0, float *y, int ldy) {
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i m4 = _mm_set1_epi8(0xF);
    __m256 acc[4];
    for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const uint8_t *b = row + (size_t)i * 84;
        if (t0 == 0) g4_prefetch_ahead(b, 84);   /* the first pass */
        const __m128i ms = _mm_loadu_si128((const __m128i *)b);
        const __m256i mins = _mm256_cvtepi8_epi16(_mm_and_si128(_mm_srli_epi16(ms, 4), m4));
        const __m256i all = _mm256_cvtepi8_epi16(_mm_and_si128(ms, m4));
        const __m128i lo = _mm256_castsi256_si128(all), hi = _mm256_extracti128_si256(all, 1);
        const __m256i scales[2] = {_mm256_set_m128i(lo, lo), _mm256_set_m128i(hi, hi)};
        const float dw = g4_ld_f16(b + 80), dmw = g4_ld_f16(b + 82);
        __m256i sumi[4];
        for (int t = 0; t < NT; t++) {
            const g4_block_q8_K *yb = x + (size_t)(t0 + t) * nb + i;
            acc[t] = g4_q2_k_mins(mins, yb, dmw, acc[t]);
            sumi[t] = _mm256_setzero_si256();
        }
        for (int j = 0; j < 2; j++) {
            const __m256i q2bits = _mm256_loadu_si256((const __m256i *)(b + 16 + 32 * j));
            __m256i q[4], s[4];
            for (int k = 0; k < 4; k++) {
                q[k] = _mm256_and_si256(_mm256_srli_epi16(q2bits, 2 * k), m3);
                const short i0 = (short)((4 * k + 1) << 8 | 4 * k), i1 = (short)((4 * k + 3) << 8 | (4 * k + 2));
                s[k] = _mm256_shuffle_epi8(scales[j], _mm256_setr_epi16(i0, i0, i0, i0, i0, i0, i0, i0, i1, i1, i1, i1, i1, i1, i1, i1));
            }
            for (int t = 0; t < NT; t++) {
                const int8_t *q8 = x[(size_t)(t0 + t) * nb + i].qs + 128 * j;
                __m256i p[4];
                for (int k = 0; k < 4; k++)
                    p[k] = _mm256_madd_epi16(s[k], _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)(q8 + 32 * k))));
                sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(_mm256_add_epi32(p[0], p[1]), _mm256_add_epi32(p[2], p[3])));
            }
        }
        for (int t = 0; t < NT; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(x[(size_t)(t0 + t) * nb + i].d * dw), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
    }
    for (int t = 0; t < NT; t++) y[(size_t)(t0 + t) * ldy + n] = g4_hsum8(acc[t]);
}

/* Weight rows in groups of 8 (Q4_K at K = 1536: 7 KB) held in cache while all activation
 * chunks of up to 4 rows pass over them. */
#define MMQ_K(NAME, TILE, BB)                                                                        \
    static void NAME(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {      \
        const int nb = K / 256;                                                                      \
        const size_t rb = (size_t)nb * BB;                                                           \
        for (int g0 = n0; g0 < n1; g0 += 8) {                                                        \
            const int g1 = g0 + 8 < n1 ? g0 + 8 : n1;                                                \
            for (int t0 = 0; t0 < T; t0 += 4) {                                                      \
                const int tn = T - t0 < 4 ? T - t0 : 4;                                              \
                for (int n = g0; n < g1; n++) {                                                      \
                    const uint8_t *row = (const uint8_t *)w + (size_t)n * rb;                        \
                    switch (tn) {                                                                    \
                    case 1: TILE(1, row, xq, nb, n, t0, y, ldy); break;                              \
                    case 2: TILE(2, row, xq, nb, n, t0, y, ldy); break;                              \
                    case 3: TILE(3, row, xq, nb, n, t0, y, ldy); break;                              \
                    default: TILE(4, row, xq, nb, n, t0, y, ldy); break;                             \
                    }                                                                                \
                }                                                                                    \
            }                                                                                        \
        }                                                                                            \
    }
MMQ_K(mmq_q4_k_tiles, tile_q4_k, 144)
MMQ_K(mmq_q6_k_tiles, tile_q6_k, 210)
MMQ_K(mmq_q5_k_tiles, tile_q5_k, 176)
MMQ_K(mmq_iq4_xs_tiles, tile_iq4_xs, 136)
MMQ_K(mmq_q3_k_tiles, tile_q3_k, 110)
MMQ_K(mmq_q2_k_tiles, tile_q2_k, 84)
void g4_mmq_iq4_xs_avx2(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    mmq_iq4_xs_tiles(xq, T, K, w, n0, n1, y, ldy);
}
void g4_mmq_q3_k_avx2(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    mmq_q3_k_tiles(xq, T, K, w, n0, n1, y, ldy);
}
void g4_mmq_q2_k_avx2(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    mmq_q2_k_tiles(xq, T, K, w, n0, n1, y, ldy);
}

/* ---------------------------------------------------------------- prefill GEMMs × Q8_K */

/* Prefill (T >= 4): a tile runs one weight row against up to GK_NT activation rows, each weight
 * block's unpacked quants and scales shared by all of them, and each activation block's d (and
 * for Q4_K / Q5_K its per-32 sums, ggml's hadd of bsums) gathered once per call for a chunk of GK_TC
 * rows instead of once per weight row. Per (row, t) the arithmetic is tile_q4_k's / tile_q5_k's / tile_q6_k's
 * (ggml's): the integer sums are exact in any order, and the float products, the per-lane fmadd
 * chains and the horizontal sums are the same operations on the same values. GK_NT = 6: 8
 * spilled (GCC), 4 shares the unpacking less. */
enum { GK_NT = 6, GK_TC = 30, GK_NB = 64, GK_RG = 16 };

typedef struct {
    __m256i q8s[GK_TC / 2][GK_NB];   /* Q4_K / Q5_K: [t pair][block], the per-32 sums of rows 2p | 2p + 1 */
    float yd[GK_NB][GK_TC + 2];      /* [block][t]: the activation block's d (+2: 8-lane loads) */
} gk_chunk;

/* Q4_K / Q5_K as tile_k45: Q4_K's mins' 4-lane products of two activation rows share one 8-lane
 * register (lane by lane the same fmadd as ggml's 128-bit one); Q5_K's integer sums of the same
 * products (two rows' in one register) each take one scalar fmadd a block */
INLINE void gk_tile_k45(int q5, int NT, const uint8_t *row, const g4_block_q8_K *x, int nb, const gk_chunk *c, int tc,
                        float *y, int ldy) {
    const size_t bb = q5 ? 176 : 144;
    __m256 acc[GK_NT], acc_m[GK_NT / 2];
    float summs[GK_NT];
    for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps(), summs[t] = 0.0f;
    for (int p = 0; p < (NT + 1) / 2; p++) acc_m[p] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const uint8_t *b = row + (size_t)i * bb;
        uint32_t utmp[4];
        g4_q4_k_scales(b + 4, utmp);
        const __m256i mins_scales = _mm256_cvtepu8_epi16(_mm_set_epi32((int)utmp[3], (int)utmp[2], (int)utmp[1], (int)utmp[0]));
        const __m256i mins = _mm256_permute4x64_epi64(mins_scales, 0xEE), scales = _mm256_permute4x64_epi64(mins_scales, 0x44);
        const __m256i hbits = q5 ? _mm256_loadu_si256((const __m256i *)(b + 16)) : _mm256_setzero_si256();
        __m256i sumi[GK_NT];
        for (int t = 0; t < NT; t++) sumi[t] = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            const __m256i scale_l = _mm256_shuffle_epi8(scales, _mm256_set1_epi16((short)((4 * j + 1) << 8 | 4 * j)));
            const __m256i scale_h = _mm256_shuffle_epi8(scales, _mm256_set1_epi16((short)((4 * j + 3) << 8 | (4 * j + 2))));
            __m256i ql, qh;
            k45_quants(q5, b, hbits, j, &ql, &qh);
            for (int t = 0; t < NT; t++) {
                const int8_t *q8 = x[(size_t)t * nb + i].qs + 64 * j;
                const __m256i p16l = _mm256_madd_epi16(scale_l, _mm256_maddubs_epi16(ql, _mm256_loadu_si256((const __m256i *)q8)));
                const __m256i p16h = _mm256_madd_epi16(scale_h, _mm256_maddubs_epi16(qh, _mm256_loadu_si256((const __m256i *)(q8 + 32))));
                sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(p16l, p16h));
                G4_IN_REGISTER(sumi[t]);   /* step by step: GCC reassociated the adds into a tree whose partial sums spilled */
            }
        }
        /* y.d * d and -y.d * dmin for the tile's rows at once (the same products one at a time) */
        const __m256 yd = _mm256_loadu_ps(&c->yd[i][tc]);
        const __m256 d = _mm256_mul_ps(yd, _mm256_set1_ps(g4_ld_f16(b))), dm = _mm256_mul_ps(yd, _mm256_set1_ps(-g4_ld_f16(b + 2)));
        for (int t = 0; t < NT; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(d, _mm256_set1_epi32(t)), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
        float dmt[8];   /* Q5_K: the rows' -y.d dmin as scalars, once a block */
        if (q5) _mm256_storeu_ps(dmt, dm);
        for (int p = 0; p < (NT + 1) / 2; p++) {
            const __m256i prod = _mm256_madd_epi16(mins, c->q8s[tc / 2 + p][i]);
            if (q5) {
                int32_t m[8];
                _mm256_storeu_si256((__m256i *)m, prod);
                for (int h = 0; h < 2 && 2 * p + h < NT; h++)
                    summs[2 * p + h] = fmaf(dmt[2 * p + h], (float)(m[4 * h] + m[4 * h + 1] + m[4 * h + 2] + m[4 * h + 3]), summs[2 * p + h]);
            } else {
                const __m256 dmp = _mm256_permutevar8x32_ps(dm, _mm256_setr_epi32(2 * p, 2 * p, 2 * p, 2 * p, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1));
                acc_m[p] = _mm256_fmadd_ps(dmp, _mm256_cvtepi32_ps(prod), acc_m[p]);
            }
        }
    }
    for (int t = 0; t < NT; t++) {
        const __m256 m = acc_m[t / 2];
        y[(size_t)t * ldy] = g4_hsum8(acc[t]) + (q5 ? summs[t] : g4_hsum4(t & 1 ? _mm256_extractf128_ps(m, 1) : _mm256_castps256_ps128(m)));
    }
}
INLINE void gk_tile_q4_k(int NT, const uint8_t *row, const g4_block_q8_K *x, int nb, const gk_chunk *c, int tc,
                         float *y, int ldy) {
    gk_tile_k45(0, NT, row, x, nb, c, tc, y, ldy);
}
INLINE void gk_tile_q5_k(int NT, const uint8_t *row, const g4_block_q8_K *x, int nb, const gk_chunk *c, int tc,
                         float *y, int ldy) {
    gk_tile_k45(1, NT, row, x, nb, c, tc, y, ldy);
}

/* Q6_K: one of the 8 quant vectors (32 weights, two scales) at a time beside the tile's sums */
INLINE void gk_tile_q6_k(int NT, const uint8_t *row, const g4_block_q8_K *x, int nb, const gk_chunk *c, int tc,
                         float *y, int ldy) {
    const __m256i m3 = _mm256_set1_epi8(3), m15 = _mm256_set1_epi8(15);
    __m256 acc[GK_NT];
    for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const uint8_t *b = row + (size_t)i * 210;
        const __m256i scales_16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 192)));
        __m256i sumi[GK_NT];
        for (int t = 0; t < NT; t++) {
            const __m256i q8sums = _mm256_loadu_si256((const __m256i *)x[(size_t)t * nb + i].bsums);
            sumi[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(q8sums, scales_16), 5));
        }
        for (int j = 0; j < 2; j++) {
            const uint8_t *ql = b + 64 * j, *qh = b + 128 + 32 * j;
            const __m256i sj = j ? _mm256_permute4x64_epi64(scales_16, 0xEE) : _mm256_permute4x64_epi64(scales_16, 0x44);   /* scales 8j..8j+7, both lanes */
            for (int k = 0; k < 4; k++) {   /* quants 32k..32k+31 of this half: scales 8j+2k (first 16), 8j+2k+1 */
                const __m256i lo = _mm256_loadu_si256((const __m256i *)(ql + 32 * (k & 1)));
                const __m256i H = _mm256_loadu_si256((const __m256i *)qh);
                const __m256i q = _mm256_or_si256(_mm256_and_si256(k < 2 ? lo : _mm256_srli_epi16(lo, 4), m15),
                                                  _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 2 * k), m3), 4));
                const short i0 = (short)((4 * k + 1) << 8 | 4 * k), i1 = (short)((4 * k + 3) << 8 | (4 * k + 2));
                const __m256i s = _mm256_shuffle_epi8(sj, _mm256_setr_epi16(i0, i0, i0, i0, i0, i0, i0, i0, i1, i1, i1, i1, i1, i1, i1, i1));
                for (int t = 0; t < NT; t++) {
                    const int8_t *q8 = x[(size_t)t * nb + i].qs + 128 * j + 32 * k;
                    sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(s, _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)q8))));
                    G4_IN_REGISTER(sumi[t]);
                }
            }
        }
        const __m256 d = _mm256_mul_ps(_mm256_loadu_ps(&c->yd[i][tc]), _mm256_set1_ps(g4_ld_f16(b + 208)));
        for (int t = 0; t < NT; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(d, _mm256_set1_epi32(t)), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
    }
    for (int t = 0; t < NT; t++) y[(size_t)t * ldy] = g4_hsum8(acc[t]);
}

/* activation rows in chunks of GK_TC (their d and sums gathered once), weight rows in groups of
 * GK_RG (held in L1/L2 while the chunk's tiles pass over them); T < 4 and K past GK_NB blocks
 * take the tiles above */
#define MMQ_GEMM(NAME, TILE, TILES, BB, SUMS)                                                         \
    void NAME(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {      \
        const int nb = K / 256;                                                                      \
        if (T < 4 || nb > GK_NB) { TILES(xq, T, K, w, n0, n1, y, ldy); return; }                   \
        const size_t rb = (size_t)nb * BB;                                                           \
        gk_chunk c;                                                                                  \
        for (int t0 = 0; t0 < T; t0 += GK_TC) {                                                      \
            const int tn = T - t0 < GK_TC ? T - t0 : GK_TC;                                          \
            const g4_block_q8_K *xc = (const g4_block_q8_K *)xq + (size_t)t0 * nb;                  \
            gk_gather(xc, tn, nb, SUMS, &c);                                                         \
            for (int g0 = n0; g0 < n1; g0 += GK_RG) {                                                \
                const int g1 = g0 + GK_RG < n1 ? g0 + GK_RG : n1;                                    \
                for (int tc = 0; tc < tn; tc += GK_NT) {                                             \
                    const g4_block_q8_K *xt = xc + (size_t)tc * nb;                                  \
                    float *yt = y + (size_t)(t0 + tc) * ldy;                                         \
                    for (int n = g0; n < g1; n++) {                                                  \
                        const uint8_t *row = (const uint8_t *)w + (size_t)n * rb;                    \
                        switch (tn - tc < GK_NT ? tn - tc : GK_NT) {                                 \
                        case 1: TILE(1, row, xt, nb, &c, tc, yt + n, ldy); break;                    \
                        case 2: TILE(2, row, xt, nb, &c, tc, yt + n, ldy); break;                    \
                        case 3: TILE(3, row, xt, nb, &c, tc, yt + n, ldy); break;                    \
                        case 4: TILE(4, row, xt, nb, &c, tc, yt + n, ldy); break;                    \
                        case 5: TILE(5, row, xt, nb, &c, tc, yt + n, ldy); break;                    \
                        default: TILE(6, row, xt, nb, &c, tc, yt + n, ldy); break;                   \
                        }                                                                            \
                    }                                                                                \
                }                                                                                    \
            }                                                                                        \
        }                                                                                            \
    }

/* a chunk's d per (block, t) and, for Q4_K, the per-32 sums per (t pair, block); an odd chunk's
 * last pair repeats its last row (tiles start at even t: GK_NT is even) */
static void gk_gather(const g4_block_q8_K *xc, int tn, int nb, int sums, gk_chunk *c) {
    for (int t = 0; t < tn + (tn & 1); t++)
        for (int i = 0; i < nb; i++) {
            const g4_block_q8_K *yb = xc + (size_t)(t < tn ? t : tn - 1) * nb + i;
            c->yd[i][t] = yb->d;
            if (!sums) continue;
            const __m256i q8sums = _mm256_loadu_si256((const __m256i *)yb->bsums);
            const __m128i s8 = _mm_hadd_epi16(_mm256_castsi256_si128(q8sums), _mm256_extracti128_si256(q8sums, 1));
            c->q8s[t / 2][i] = t & 1 ? _mm256_inserti128_si256(c->q8s[t / 2][i], s8, 1) : _mm256_castsi128_si256(s8);
        }
}

MMQ_GEMM(g4_mmq_q4_k_avx2, gk_tile_q4_k, mmq_q4_k_tiles, 144, 1)
MMQ_GEMM(g4_mmq_q6_k_avx2, gk_tile_q6_k, mmq_q6_k_tiles, 210, 0)
MMQ_GEMM(g4_mmq_q5_k_avx2, gk_tile_q5_k, mmq_q5_k_tiles, 176, 1)
