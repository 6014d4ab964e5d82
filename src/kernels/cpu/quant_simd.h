/* quant_simd.h — the small vector helpers every quantized-weight kernel file uses: the f16 scale
 * load, the fixed horizontal sums, and stores the compiler cannot see through. Include after
 * <immintrin.h> in a file built for AVX2 + F16C (the 512-bit helpers appear where the file's
 * target has AVX-512F). Internal to src/kernels/cpu. */
#ifndef G4_KERNELS_QUANT_SIMD_H
#define G4_KERNELS_QUANT_SIMD_H

#include <immintrin.h>
#include <stdint.h>

/* F16C's exact half -> float of the little-endian f16 at p (the scalar g4_f16_to_f32 is an
 * out-of-line bit-by-bit decode) */
static inline float g4_ld_f16(const uint8_t *p) { return _cvtsh_ss((uint16_t)(p[0] | p[1] << 8)); }

/* The 8 lanes summed by one fixed tree, ggml's hsum_float_8: (0 + 4, 1 + 5, 2 + 6, 3 + 7), then
 * pairs, then the last two. Every kernel that states a chain's order ends it here. */
static inline __attribute__((always_inline)) float g4_hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The 4 lanes summed as ggml's Q4_K dot sums its mins' lanes: (0 + 2, 1 + 3), then the two */
static inline __attribute__((always_inline)) float g4_hsum4(__m128 s) {
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Q3_K's 16 six-bit sub-block scales minus 32, as signed bytes, from the block's packed
 * scales[12] (ggml's kmask unpacking) in registers: four words stored and read back as one
 * vector stalled the load (store forwarding), a Q3_K decode's largest cost */
static inline __attribute__((always_inline)) __m128i g4_q3_k_scales_m32(const uint8_t *sc12) {
    uint32_t a2;
    __builtin_memcpy(&a2, sc12 + 8, 4);
    const __m128i a01 = _mm_loadl_epi64((const __m128i *)sc12);   /* words a0 a1 */
    const __m128i lo = _mm_and_si128(_mm_srlv_epi32(_mm_unpacklo_epi64(a01, a01), _mm_setr_epi32(0, 0, 4, 4)), _mm_set1_epi8(0x0F));
    const __m128i hi = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)a2), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(0x03));
    return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi32(hi, 4)), _mm_set1_epi8(32));
}

/* Stores the compiler cannot see through, so that the loads after them stay loads: a widening
 * from memory (vpmovzxbd m64) or a broadcast from memory (vbroadcastss m32, vpbroadcastd) runs on the load
 * ports, where the same operation out of the register just stored takes a shuffle uop */
static inline void g4_store_opaque32(void *p, __m256i v) { __asm__("vmovdqu %1, %0" : "=m"(*(char(*)[32])p) : "x"(v)); }

#ifdef __AVX512F__
/* 16 lanes: the two halves added, then g4_hsum8 */
static inline float g4_hsum16(__m512 v) {
    return g4_hsum8(_mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}
static inline void g4_store_opaque16f(float *p, __m512 v) { __asm__("vmovups %1, %0" : "=m"(*(float(*)[16])p) : "v"(v)); }
static inline void g4_store_opaque64(void *p, __m512i v) { __asm__("vmovdqu64 %1, %0" : "=m"(*(char(*)[64])p) : "v"(v)); }
#endif

#endif
