/* q4_k_scales_avx512.h — a Q4_K block's scales on AVX-512F, shared by the decode kernels
 * (quant_k_avx512.c) and the prefill panel decoder (quant_panel_avx512.c). Include after
 * <immintrin.h> in a file built with AVX-512F and F16C. */
#ifndef G4_Q4_K_SCALES_AVX512_H
#define G4_Q4_K_SCALES_AVX512_H

#include <immintrin.h>
#include <stdint.h>

#include "kernels/cpu/q4_k_scales_bytes.h"

/* A Q4_K block's d sc_j (lanes j < 8) and dmin m_j (lanes 8 + j) as 16 floats: the scale and min
 * bytes (q4_k_scales_bytes.h) widened and scaled */
static inline __attribute__((always_inline)) __m512 g4_q4_k_scales16_avx512(const uint8_t *blk) {
    const __m512i q = _mm512_cvtepu8_epi32(g4_q4_k_scales_mins_bytes(blk));
    const __m512 dd = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                                            _mm512_castps128_ps512(_mm_cvtph_ps(_mm_loadu_si128((const __m128i *)blk))));
    return _mm512_mul_ps(dd, _mm512_cvtepi32_ps(q));
}

#endif
