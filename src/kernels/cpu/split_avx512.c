/* split_avx512.c — g4_xbf16_put_row_split3 (kernels.h: the exact prefill on AMX), and
 * g4_xbf16_put_row in the tile layout (--prefill-bf16's rounding for AMX), on AVX512-BF16:
 * 16 columns at a time, each bf16 term by vcvtneps2bf16 (round to nearest even, as the scalar
 * bf16 rounding; it treats denormal inputs as zero, which only touches terms below 2^-126 that
 * the AMX products flush anyway) and widened back by a shift. The scalar version, compiled for
 * baseline x86-64, cost ~10% of a 64-token exact prefill on a 2-core Xeon. */
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16")
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels.h"

static inline __m512 widen(__m256bh h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)h), 16));
}

/* the first nterms (1: --prefill-bf16's rounding; 3: the exact split) planes of row t */
static inline __attribute__((always_inline)) void put_row(const float *x, int n, int t, int Kp, size_t plane,
                                                          int nterms, uint16_t *xs) {
    for (int k = 0; k < Kp; k += 16) {   /* half of one tile row (32 columns) per step */
        const int m = n - k >= 16 ? 16 : n - k > 0 ? n - k : 0;
        const __m512 v = _mm512_maskz_loadu_ps((__mmask16)((1u << m) - 1u), x + k);
        const __m256bh hi = _mm512_cvtneps_pbh(v);
        uint16_t *d = xs + g4_xbf16_tile_offset(t, k, Kp);
        _mm256_storeu_si256((__m256i *)d, (__m256i)hi);
        if (nterms == 1) continue;
        const __m512 r1 = _mm512_sub_ps(v, widen(hi));   /* exact: the bits of v below hi's */
        const __m256bh mid = _mm512_cvtneps_pbh(r1);
        const __m256bh lo = _mm512_cvtneps_pbh(_mm512_sub_ps(r1, widen(mid)));
        _mm256_storeu_si256((__m256i *)(d + plane), (__m256i)mid);
        _mm256_storeu_si256((__m256i *)(d + 2 * plane), (__m256i)lo);
    }
}

void g4_xbf16_put_row_split3_avx512(const float *x, int n, int t, int Kp, size_t plane, uint16_t *xs) {
    put_row(x, n, t, Kp, plane, 3, xs);
}

void g4_xbf16_put_row_tiles_avx512(const float *x, int n, int t, int Kp, uint16_t *xb) {
    put_row(x, n, t, Kp, 0, 1, xb);
}
