/* bf16_pack.h — the weight panel of --prefill-bf16's bf16 matmuls (bf16_avx512.c, bf16_amx.c):
 * G4_BF16_NR = 32 weight rows x kc columns (kc even, <= G4_BF16_KC) laid out pair-interleaved,
 * panel[p][c][0..1] = W[n + c][k0 + 2p .. k0 + 2p + 1] for pair p < kc/2 and column c < 32, so
 * one 64-byte vector holds 16 columns' pairs — the operand order of vdpbf16ps and the B tile of
 * AMX's tdpbf16ps. Columns >= cols and positions >= K are zero. Each pair is gathered from the
 * 32 rows at once (the rows are a stride of K apart). Needs AVX-512F: include it only from a
 * file compiled for it. */
#ifndef G4_BF16_PACK_H
#define G4_BF16_PACK_H

#ifndef G4_BF16_EMULATED
#include <immintrin.h>
#endif
#include <stdint.h>

enum { G4_BF16_NR = 32, G4_BF16_KC = 512 };

static inline __mmask16 g4_bf16_col_mask(int cols) {
    return cols >= 16 ? (__mmask16)0xffff : cols <= 0 ? (__mmask16)0 : (__mmask16)((1u << cols) - 1);
}

static inline void g4_bf16_pack_panel(const uint16_t *W, int K, int n, int cols, int k0, int kc, uint16_t *panel) {
    const char *base = (const char *)(W + (size_t)n * K + k0);
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i off0 = _mm512_mullo_epi32(lane, _mm512_set1_epi32(2 * K));   /* byte offsets */
    const __m512i off1 = _mm512_add_epi32(off0, _mm512_set1_epi32(32 * K));
    const __mmask16 m0 = g4_bf16_col_mask(cols), m1 = g4_bf16_col_mask(cols - 16);
    const __m512i zero = _mm512_setzero_si512();
    for (int p = 0; p < kc / 2; p++) {
        const int k = k0 + 2 * p;
        uint16_t *dst = panel + (size_t)p * 2 * G4_BF16_NR;
        if (k + 1 < K) {
            _mm512_storeu_si512(dst, _mm512_mask_i32gather_epi32(zero, m0, off0, base + 4 * p, 1));
            _mm512_storeu_si512(dst + 32, _mm512_mask_i32gather_epi32(zero, m1, off1, base + 4 * p, 1));
        } else {   /* the last position of an odd K, or past K: never read beyond a row */
            for (int c = 0; c < G4_BF16_NR; c++) {
                dst[2 * c] = k < K && c < cols ? W[(size_t)(n + c) * K + k] : 0;
                dst[2 * c + 1] = 0;
            }
        }
    }
}

#endif
