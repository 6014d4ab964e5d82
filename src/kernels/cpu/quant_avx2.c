/* quant_avx2.c — matmul over ggml block-quantized weights for AVX2+FMA: each weight row is
 * widened once with the bit-exact block decoders (quant_ref.c) into a float row that stays in
 * L1/L2, then dotted with every activation row using 4 independent 8-wide FMA accumulators
 * (the row is decoded once however many activation rows read it); Q8_0 is fused in registers. */
#pragma GCC target("avx2,fma,f16c")
#include <immintrin.h>
#include <stdlib.h>

#include "kernels/cpu/quant.h"

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* K is a multiple of 32 for every block type */
static inline float dot32(const float *a, const float *b, int K) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int k = 0; k < K; k += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), _mm256_loadu_ps(b + k + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 16), _mm256_loadu_ps(b + k + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 24), _mm256_loadu_ps(b + k + 24), a3);
    }
    return hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

static void mm(g4_dtype dt, const float *x, int T, int K, const void *w, int n0, int n1, float *y,
               int ldy) {
    float *row = aligned_alloc(32, ((size_t)K * sizeof(float) + 31) & ~(size_t)31);
    if (!row) abort();   /* [K] floats; the kernels have no error channel */
    const size_t rb = g4_dtype_row_bytes(dt, K);
    for (int n = n0; n < n1; n++) {
        g4_dequant_row(dt, (const uint8_t *)w + (size_t)n * rb, K, row);
        for (int t = 0; t < T; t++) y[(size_t)t * ldy + n] = dot32(x + (size_t)t * K, row, K);
    }
    free(row);
}

/* Q8_0 fully fused (the tied LM head of the common Gemma GGUFs is Q8_0, and it is most of the
 * bytes a decode step reads): per block, the 32 int8 weights are widened in registers and dotted
 * with x, then scaled by d — sum_b d_b * (q_b · x_b), up to 4 activation rows per weight pass. */
static inline __m256 q8_chunk(const uint8_t *q, int k) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + 8 * k))));
}

void g4_mm_q8_0_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    const int nb = K / 32;
    const size_t rb = (size_t)nb * 34;
    for (int n = n0; n < n1; n++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)n * rb;
        for (int t0 = 0; t0 < T; t0 += 4) {
            const int tn = T - t0 < 4 ? T - t0 : 4;
            __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
            for (int b = 0; b < nb; b++) {
                const uint8_t *blk = row + (size_t)b * 34;
                const __m256 d = _mm256_set1_ps(g4_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8)));
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

#define MM_AVX2(NAME, DT)                                                                       \
    void NAME(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) { \
        mm(DT, x, T, K, w, n0, n1, y, ldy);                                                     \
    }
MM_AVX2(g4_mm_q4_0_avx2, G4_DT_Q4_0)
MM_AVX2(g4_mm_q5_0_avx2, G4_DT_Q5_0)
MM_AVX2(g4_mm_q4_k_avx2, G4_DT_Q4_K)
MM_AVX2(g4_mm_q6_k_avx2, G4_DT_Q6_K)
