/* split_avx512.c — g4_xbf16_put_row_split3 (kernels.h: the exact prefill on AMX), and
 * g4_xbf16_put_row in the tile and pair layouts (--prefill-bf16's rounding for AMX), on AVX512-BF16:
 * 16 columns at a time, each bf16 term by vcvtneps2bf16 (round to nearest even, as the scalar
 * bf16 rounding; it treats denormal inputs as zero, which only touches terms below 2^-126 that
 * the AMX products flush anyway) and widened back by a shift. The scalar version, compiled for
 * baseline x86-64, is a sizeable share of a short exact prefill next to the AMX products. */
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16")
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/bf16_pack.h"
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

/* The pair layout, 16 rows at a time: per 32 columns each row's 16 pairs are one vector, and a
 * 16 x 16 transpose of those (bf16_pack.h) gives the tile's 16 rows of 16 tokens' pairs, stored
 * whole. Writing row by row instead, one 4-byte pair every 64 bytes, touches a whole line per
 * 4 bytes written and makes --prefill-bf16's rounding several times slower. */
static inline __m512i join(__m256bh lo16, __m256bh hi16) {   /* 32 bf16 = 16 pairs, in column order */
    return _mm512_inserti64x4(_mm512_castsi256_si512((__m256i)lo16), (__m256i)hi16, 1);
}

void g4_xbf16_put_pairs16_avx512(const float *x, int ldx, int rows, int n, int t0, int Kp, size_t plane, int nterms,
                                 uint16_t *xs) {
    for (int k = 0; k < Kp; k += 32) {
        __m512i r[3][16];
        const int m0 = n - k >= 16 ? 16 : n - k > 0 ? n - k : 0, m1 = n - k - 16 >= 16 ? 16 : n - k - 16 > 0 ? n - k - 16 : 0;
        for (int i = 0; i < 16; i++) {
            const float *xr = x + (size_t)i * ldx + k;
            const int live = i < rows;
            const __m512 v0 = _mm512_maskz_loadu_ps(live ? (__mmask16)((1u << m0) - 1u) : 0, xr);
            const __m512 v1 = _mm512_maskz_loadu_ps(live ? (__mmask16)((1u << m1) - 1u) : 0, xr + 16);
            const __m256bh h0 = _mm512_cvtneps_pbh(v0), h1 = _mm512_cvtneps_pbh(v1);
            r[0][i] = join(h0, h1);
            if (nterms == 1) continue;
            const __m512 a0 = _mm512_sub_ps(v0, widen(h0)), a1 = _mm512_sub_ps(v1, widen(h1));
            const __m256bh m0b = _mm512_cvtneps_pbh(a0), m1b = _mm512_cvtneps_pbh(a1);
            r[1][i] = join(m0b, m1b);
            r[2][i] = join(_mm512_cvtneps_pbh(_mm512_sub_ps(a0, widen(m0b))), _mm512_cvtneps_pbh(_mm512_sub_ps(a1, widen(m1b))));
        }
        uint16_t *d = xs + g4_xbf16_pair_offset(t0, k, Kp);
        for (int j = 0; j < nterms; j++) {
            g4_bf16_transpose16(r[j]);
            for (int p = 0; p < 16; p++) _mm512_storeu_si512(d + j * plane + 32 * p, r[j][p]);
        }
    }
}

/* kernels.h g4_xbf16_put_gemv3: per row and 32 columns, the planes as 16 pairs each (the pair
 * order is the column order, join), scattered 3 tc dwords apart into the tile's rows; the last
 * tile's rows past T as zeros */
void g4_xbf16_put_gemv3_avx512(const float *x, int ldx, int T, int K, uint32_t *xg) {
    const int cols = 3 * g4_gemv3_tile_rows(T), rows = g4_gemv3_tiles(T) * g4_gemv3_tile_rows(T);
    const __m512i at = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                          _mm512_set1_epi32(cols));
    for (int t = 0; t < rows; t++) {
        const float *xr = x + (size_t)(t < T ? t : 0) * ldx;
        for (int k = 0; k < K; k += 32) {
            int *d = (int *)xg + g4_xbf16_gemv3_offset(t, 0, k, T);
            if (t >= T) {
                for (int j = 0; j < 3; j++) _mm512_i32scatter_epi32(d + j, at, _mm512_setzero_si512(), 4);
                continue;
            }
            const __m512 v0 = _mm512_loadu_ps(xr + k), v1 = _mm512_loadu_ps(xr + k + 16);
            const __m256bh h0 = _mm512_cvtneps_pbh(v0), h1 = _mm512_cvtneps_pbh(v1);
            const __m512 a0 = _mm512_sub_ps(v0, widen(h0)), a1 = _mm512_sub_ps(v1, widen(h1));
            const __m256bh m0 = _mm512_cvtneps_pbh(a0), m1 = _mm512_cvtneps_pbh(a1);
            const __m256bh l0 = _mm512_cvtneps_pbh(_mm512_sub_ps(a0, widen(m0)));
            const __m256bh l1 = _mm512_cvtneps_pbh(_mm512_sub_ps(a1, widen(m1)));
            _mm512_i32scatter_epi32(d, at, join(h0, h1), 4);
            _mm512_i32scatter_epi32(d + 1, at, join(m0, m1), 4);
            _mm512_i32scatter_epi32(d + 2, at, join(l0, l1), 4);
        }
    }
}
