/* q4_k_scales_bytes.h — a Q4_K block's six-bit scales and mins unpacked in one 16-byte register
 * (SSSE3), shared by the AVX2 decode (quant_avx2.c) and the AVX-512 scale widening
 * (q4_k_scales_avx512.h). Include in a file built with at least SSSE3. */
#ifndef G4_Q4_K_SCALES_BYTES_H
#define G4_Q4_K_SCALES_BYTES_H

#include <immintrin.h>
#include <stdint.h>

/* blk: the block (d, dmin, sc[12]) -> bytes 0-7 the 8 scales, 8-15 the 8 mins (g4_q4_k_scales's
 * utmp, ggml's layout): j < 4, sc[j] and sc[j + 4] & 63; j >= 4, the low / high nibble of
 * sc[j + 4] under the top two bits of sc[j - 4] / sc[j] */
static inline __attribute__((always_inline)) __m128i g4_q4_k_scales_mins_bytes(const uint8_t *blk) {
    const __m128i B = _mm_loadu_si128((const __m128i *)blk);
    /* A: sc[0..3], sc[8..11], sc[4..7], sc[8..11]; H: the bytes whose top bits complete j >= 4 */
    const __m128i A = _mm_shuffle_epi8(B, _mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15)),
                  H = _mm_shuffle_epi8(B, _mm_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1, 8, 9, 10, 11));
    const __m128i lo = _mm_and_si128(A, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0)),
                  hi = _mm_and_si128(_mm_srli_epi16(A, 4), _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15)),
                  top = _mm_and_si128(_mm_srli_epi16(H, 2), _mm_set1_epi8(0x30));
    return _mm_or_si128(_mm_or_si128(lo, hi), top);
}

#endif
