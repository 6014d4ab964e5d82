/* vmath_avx2.h — vectorized elementary functions shared by the AVX2 kernels (avx2.c's GELU,
 * attn_avx2.c's softmax). Static inline; include it only from a file compiled for
 * avx2+fma (a `#pragma GCC target` before the includes). */
#ifndef G4_KERNELS_VMATH_AVX2_H
#define G4_KERNELS_VMATH_AVX2_H

#include <immintrin.h>

/* e^x for x in [-87.3, 88.7] (inputs are clamped there), Cephes expf: x = n ln2 + r with ln2 split
 * in two so r is exact to float rounding, e^r by a degree-6 polynomial; within 2 ulp of the
 * correctly rounded e^x over the whole range (test_kernels.c: test_exp_ps). */
static inline __m256 g4_exp_ps(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.7f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* 2^n for n in [-126, 128] as 2^n1 * 2^n2 (n1 = floor(n/2), both normal): one exponent-field
     * power could not reach n = -126 (a zero field) or n = 128, and the products are exact */
    const __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256i e1 = _mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23);
    const __m256i e2 = _mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e1)), _mm256_castsi256_ps(e2));
}

#endif
