/* bf16_pack.h — the weight panel of --prefill-bf16's bf16 matmuls (bf16_avx512.c, bf16_amx.c):
 * G4_BF16_NR = 32 weight rows x kc columns (kc even, <= G4_BF16_KC) laid out pair-interleaved,
 * panel[p][c][0..1] = W[n + c][k0 + 2p .. k0 + 2p + 1] for pair p < kc/2 and column c < 32, so
 * one 64-byte vector holds 16 columns' pairs — the operand order of vdpbf16ps and the B tile of
 * AMX's tdpbf16ps. Columns >= cols and positions >= K are zero. Needs AVX-512F: include it only from a
 * file compiled for it. */
#ifndef G4_BF16_PACK_H
#define G4_BF16_PACK_H

#ifndef G4_BF16_EMULATED
#include <immintrin.h>
#endif
#include <stdint.h>

enum { G4_BF16_NR = 32, G4_BF16_KC = 512 };

/* In-register transpose of a 16 x 16 matrix of 32-bit elements (r[i] = row i): four rounds of
 * two-source permutes, each swapping the off-diagonal h x h blocks of every 2h x 2h block
 * (h = 8, 4, 2, 1). 64 vpermt2d instead of the 32 16-lane gathers the panel took before. */
static inline void g4_bf16_transpose16(__m512i r[16]) {
    static const int32_t lo[4][16] __attribute__((aligned(64))) = {
        {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23}, {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
        {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29}, {0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30}};
    static const int32_t hi[4][16] __attribute__((aligned(64))) = {
        {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}, {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31},
        {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31}, {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31}};
    /* unrolled whole, so that r[] stays in registers (as a loop the compiler kept r[] on the
     * stack: a store and a reload around every permute) */
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++) {
        const int h = 8 >> s;
        const __m512i il = _mm512_loadu_si512(lo[s]), ih = _mm512_loadu_si512(hi[s]);
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
            if (!(i & h)) {
                const __m512i a = r[i], b = r[i + h];
                r[i] = _mm512_permutex2var_epi32(a, il, b);       /* (j & h) ? b[j - h] : a[j] */
                r[i + h] = _mm512_permutex2var_epi32(a, ih, b);   /* (j & h) ? b[j] : a[j + h] */
            }
    }
}

/* Pairs [p, p + 16) of the panel. Where all 32 positions lie inside the rows, each half of 16 rows
 * is 16 row loads of 16 pairs, transposed (a pair is one 32-bit element); else pair by pair. */
static inline void g4_bf16_pack_pairs16(const uint16_t *W, int K, int n, int cols, int k0, int p, uint16_t *panel) {
    const int kb = k0 + 2 * p;
    if (kb + 32 <= K) {
        for (int half = 0; half < 2; half++) {
            __m512i r[16];
            for (int c = 0; c < 16; c++) {
                const int col = 16 * half + c;
                r[c] = col < cols ? _mm512_loadu_si512(W + (size_t)(n + col) * K + kb) : _mm512_setzero_si512();
            }
            g4_bf16_transpose16(r);
            for (int q = 0; q < 16; q++) _mm512_storeu_si512(panel + (size_t)(p + q) * 2 * G4_BF16_NR + 16 * 2 * half, r[q]);
        }
        return;
    }
    for (int q = p; q < p + 16; q++) {   /* the block that reaches K: never read beyond a row */
        const int k = k0 + 2 * q;
        uint16_t *dst = panel + (size_t)q * 2 * G4_BF16_NR;
        for (int c = 0; c < G4_BF16_NR; c++) {
            const uint16_t *src = c < cols ? W + (size_t)(n + c) * K + k : NULL;
            dst[2 * c] = src && k < K ? src[0] : 0;
            dst[2 * c + 1] = src && k + 1 < K ? src[1] : 0;
        }
    }
}

/* kc is a multiple of 32 (Kp and G4_BF16_KC are), so the pairs come in whole blocks of 16 */
static inline void g4_bf16_pack_panel(const uint16_t *W, int K, int n, int cols, int k0, int kc, uint16_t *panel) {
    for (int p = 0; p < kc / 2; p += 16) g4_bf16_pack_pairs16(W, K, n, cols, k0, p, panel);
}

#endif
