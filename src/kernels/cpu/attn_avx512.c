/* attn_avx512.c — the blocked attention (attn_block_impl.h) on AVX-512F: 16-lane vectors, so
 * twice the FMA width of attn_avx2.c, and a 4-row x 4-key scores microkernel (16 accumulators of
 * the 32 registers); P·V 4 rows x 4 vectors. Where AMX runs the prefill's matmuls, the prompt
 * rows' attention is a large share of what is left, so it takes the wider vectors too. */
#pragma GCC target("avx512f,avx2,fma,f16c")
#include "kernels/cpu/attn.h"

#define ATT_VEC __m512
#define ATT_VW 16
#define ATT_NK 4
/* P·V in strips of 4 vectors (16 accumulators, 256 B of each V row) over 32 KB V tiles, which
 * still fit the L1 of cores with AVX-512: more FMAs in flight per pass than 2 vectors over 16 KB
 * (chosen by measurement, see docs/benchmarking.md) */
#define ATT_VTILE_BYTES 32768
#define ATT_PV_NV 4
#define ATT_LOAD(p) _mm512_loadu_ps(p)
#define ATT_STORE(p, v) _mm512_storeu_ps(p, v)
#define ATT_ZERO() _mm512_setzero_ps()
#define ATT_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define ATT_BCAST(p) _mm512_set1_ps(*(p))
#define ATT_TO8(v) _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)))
#define ATT_MUL(a, b) _mm512_mul_ps(a, b)
#define ATT_SET1(x) _mm512_set1_ps(x)
#define ATT_WIDEN_BF16(p) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
#define ATT_WIDEN_F16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define ATT_WIDEN_I8(p) _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p))))
#include "kernels/cpu/attn_block_impl.h"

void g4_attend_block_avx512(const float *q, int ldq, float *out, int ldo, int G, int P, const int *lo,
                            const int *hi, const float *K, const float *V, int cap, int D, float scale,
                            float *scores, int batched) {
    if (D % 64) {   /* Gemma's head sizes are multiples of 64; anything else on the AVX2 block */
        g4_attend_block_avx2(q, ldq, out, ldo, G, P, lo, hi, K, V, cap, D, scale, scores, batched);
        return;
    }
    attend_block_impl(G4_KV_F32, q, ldq, out, ldo, G, P, lo, hi, K, V, cap, D, scale, scores, NULL, NULL);
}

void g4_attend_kv_avx512(int kvt, const float *q, int ldq, float *out, int ldo, int G, int P, const int *lo,
                         const int *hi, const void *K, const void *V, int cap, int D, float scale, float *scores) {
    _Alignas(64) float kbuf[TILE_BYTES / sizeof(float)], vbuf[VTILE_BYTES / sizeof(float)];
    if (D % 64 || (size_t)D * sizeof(float) * ATT_NK > TILE_BYTES || (size_t)D * sizeof(float) > VTILE_BYTES) {
        g4_attend_kv_avx2(kvt, q, ldq, out, ldo, G, P, lo, hi, K, V, cap, D, scale, scores);
        return;
    }
    attend_block_impl(kvt, q, ldq, out, ldo, G, P, lo, hi, K, V, cap, D, scale, scores, kbuf, vbuf);
}
