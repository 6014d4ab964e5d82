/* bf16_avx512.c — --prefill-bf16's matmul on AVX512-BF16: bf16 activations x bf16 weights, each
 * vdpbf16ps multiplying 16 lanes x 2 bf16 pairs (products exact) into fp32 accumulators.
 * Weights are packed per 32 rows x KC columns into the pair-interleaved ("VNNI") panel that
 * bf16_pack.h describes (shared with the AMX kernel); a 12 x 32 microkernel broadcasts one
 * activation pair per row and feeds 2 panel vectors, 24 accumulators in zmm registers.
 * Compiled for AVX-512 here only: the dispatcher calls it after checking the CPU. */
#ifndef G4_BF16_EMULATED   /* tests/c/test_bf16_matmul.c builds this file on emulated intrinsics */
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16")
#include <immintrin.h>
#endif
#include <string.h>

#include "kernels/cpu/bf16_pack.h"
#include "kernels/kernels.h"

enum { MR = 12 };   /* activation rows per microkernel block */

/* y[t][n0 + c] (+)= sum over the panel's kc pairs, for rows t in [0, rows) and columns c < cols. */
static inline void micro(const uint16_t *xb, int ldx, int k0, int kc, const uint16_t *panel, int rows, float *y,
                         int ldy, int cols, int accumulate) {
    __m512 acc[MR][2];
    for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    const int pairs = kc / 2;
    for (int p = 0; p < pairs; p++) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(panel + (size_t)p * 64);
        const __m512bh b1 = (__m512bh)_mm512_loadu_si512(panel + (size_t)p * 64 + 32);
        for (int i = 0; i < MR; i++) {
            if (i >= rows) break;
            uint32_t pair;
            memcpy(&pair, xb + (size_t)i * ldx + k0 + 2 * p, sizeof pair);
            const __m512bh a = (__m512bh)_mm512_set1_epi32((int)pair);
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], a, b0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], a, b1);
        }
    }
    const __mmask16 m0 = cols >= 16 ? 0xffff : (__mmask16)((1u << cols) - 1);
    const __mmask16 m1 = cols >= 32 ? 0xffff : cols <= 16 ? 0 : (__mmask16)((1u << (cols - 16)) - 1);
    for (int i = 0; i < rows; i++) {
        float *yr = y + (size_t)i * ldy;
        __m512 v0 = acc[i][0], v1 = acc[i][1];
        if (accumulate) {
            v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, yr));
            v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, yr + 16));
        }
        _mm512_mask_storeu_ps(yr, m0, v0);
        _mm512_mask_storeu_ps(yr + 16, m1, v1);
    }
}

void g4_matmul_xbf16_avx512(const uint16_t *xb, int ldx, int T, int K, const void *w, int n0, int n1, float *y,
                            int ldy) {
    const uint16_t *W = w;
    const int Kp = (K + 31) & ~31;
    _Alignas(64) uint16_t panel[G4_BF16_KC * G4_BF16_NR];   /* 32 KB */
    for (int n = n0; n < n1; n += G4_BF16_NR) {
        const int cols = n1 - n < G4_BF16_NR ? n1 - n : G4_BF16_NR;
        for (int k0 = 0; k0 < Kp; k0 += G4_BF16_KC) {
            const int kc = Kp - k0 < G4_BF16_KC ? Kp - k0 : G4_BF16_KC;
            g4_bf16_pack_panel(W, K, n, cols, k0, kc, panel);
            for (int t = 0; t < T; t += MR) {
                const int rows = T - t < MR ? T - t : MR;
                micro(xb + (size_t)t * ldx, ldx, k0, kc, panel, rows, y + (size_t)t * ldy + n, ldy, cols, k0 > 0);
            }
        }
    }
}
