/* q4_k_scales_avx512.h — a Q4_K block's scales on AVX-512F, shared by the decode kernels
 * (quant_k_avx512.c) and the prefill panel decoder (quant_panel_avx512.c). Include after
 * <immintrin.h> in a file built with AVX-512F and F16C. */
#ifndef G4_Q4_K_SCALES_AVX512_H
#define G4_Q4_K_SCALES_AVX512_H

#include <immintrin.h>
#include <stdint.h>

/* A Q4_K block's d sc_j (lanes j < 8) and dmin m_j (lanes 8 + j) as 16 floats: the six-bit scales
 * and mins unpacked in one 16-byte register (ggml's layout: j < 4, sc[j] and sc[j + 4] & 63;
 * j >= 4, the low / high nibble of sc[j + 4] under the top two bits of sc[j - 4] / sc[j]), then
 * widened and scaled */
static inline __attribute__((always_inline)) __m512 g4_q4_k_scales16_avx512(const uint8_t *blk) {
    const __m128i B = _mm_loadu_si128((const __m128i *)blk);   /* d, dmin, sc[12] */
    /* A: sc[0..3], sc[8..11], sc[4..7], sc[8..11]; H: the bytes whose top bits complete j >= 4 */
    const __m128i A = _mm_shuffle_epi8(B, _mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15)),
                  H = _mm_shuffle_epi8(B, _mm_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1, 8, 9, 10, 11));
    const __m128i lo = _mm_and_si128(A, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0)),
                  hi = _mm_and_si128(_mm_srli_epi16(A, 4), _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15)),
                  top = _mm_and_si128(_mm_srli_epi16(H, 2), _mm_set1_epi8(0x30));
    const __m512i q = _mm512_cvtepu8_epi32(_mm_or_si128(_mm_or_si128(lo, hi), top));
    const __m512 dd = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                                            _mm512_castps128_ps512(_mm_cvtph_ps(B)));
    return _mm512_mul_ps(dd, _mm512_cvtepi32_ps(q));
}

#endif
