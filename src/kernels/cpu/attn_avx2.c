/* attn_avx2.c — the blocked attention (attn_block_impl.h) on AVX2 + FMA: 8-lane vectors, a
 * 4-row x 3-key scores microkernel (12 accumulators of the 16 registers). */
#pragma GCC target("avx2,fma,f16c")
#include "kernels/cpu/attn.h"

#define ATT_VEC __m256
#define ATT_VW 8
#define ATT_NK 3
#define ATT_LOAD(p) _mm256_loadu_ps(p)
#define ATT_STORE(p, v) _mm256_storeu_ps(p, v)
#define ATT_ZERO() _mm256_setzero_ps()
#define ATT_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define ATT_BCAST(p) _mm256_broadcast_ss(p)
#define ATT_TO8(v) (v)
#define ATT_MUL(a, b) _mm256_mul_ps(a, b)
#define ATT_SET1(x) _mm256_set1_ps(x)
#define ATT_WIDEN_BF16(p) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
#define ATT_WIDEN_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define ATT_WIDEN_I8(p) _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p))))
#include "kernels/cpu/attn_block_impl.h"

void g4_attend_block_avx2(const float *q, int ldq, float *out, int ldo, int G, int P, const int *lo,
                          const int *hi, const float *K, const float *V, int cap, int D, float scale,
                          float *scores, int batched) {
    (void)batched;
    if (D % 16) {   /* the head sizes Gemma uses are multiples of 16; anything else row by row */
        const g4_kernels *k = g4_kernels_avx2();
        for (int p = 0; p < P; p++)
            for (int h = 0; h < G; h++)
                k->attend(q + (size_t)p * ldq + (size_t)h * D, K, V, cap, lo[p], hi[p], D, scale, scores,
                          out + (size_t)p * ldo + (size_t)h * D);
        return;
    }
    attend_block_impl(G4_KV_F32, q, ldq, out, ldo, G, P, lo, hi, K, V, cap, D, scale, scores, NULL, NULL);
}

void g4_attend_kv_avx2(int kvt, const float *q, int ldq, float *out, int ldo, int G, int P, const int *lo,
                       const int *hi, const void *K, const void *V, int cap, int D, float scale, float *scores) {
    /* the widened tiles: on this thread's stack, as the GEMM's weight panel (kernels.h) */
    _Alignas(64) float kbuf[TILE_BYTES / sizeof(float)], vbuf[VTILE_BYTES / sizeof(float)];
    if (D % 16 || (size_t)D * sizeof(float) * ATT_NK > TILE_BYTES || (size_t)D * sizeof(float) > VTILE_BYTES) {
        g4_attend_kv_ref(kvt, q, ldq, out, ldo, G, P, lo, hi, K, V, cap, D, scale, scores);
        return;
    }
    attend_block_impl(kvt, q, ldq, out, ldo, G, P, lo, hi, K, V, cap, D, scale, scores, kbuf, vbuf);
}
