/* quant_act_blocks_avx2.h — a 32-weight block (Q8_0 / Q4_0 / Q5_0 / IQ4_NL; Q4_1 / Q5_1 unsigned) as its 32 quants, the
 * operand of the int8-activation dots (--act-q8), exactly as ggml's x86 vec_dot kernels unpack it,
 * (g4_hsum8, quant_simd.h, sums a dot's 8 float lanes as ggml does), IQ4_NL's scalar tail, and the
 * Q2_K / Q4_K / Q5_K dots' mins terms. Shared by the AVX2 tiles (quant_act_avx2.c) and the AVX512-VNNI kernels (quant_act_avx512.c);
 * include after <immintrin.h> in a file built with AVX2. */
#ifndef G4_QUANT_ACT_BLOCKS_AVX2_H
#define G4_QUANT_ACT_BLOCKS_AVX2_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/quant.h"
#include "kernels/cpu/quant_simd.h"

/* IQ4_NL twice: its blocks summed in one accumulator (llama.cpp's prefill, tinyBLAS) or in two
 * (ggml's ggml_vec_dot_iq4_nl_q8_0, its decode); the same unpacking */
enum { G4_ACT_K_Q8_0, G4_ACT_K_Q4_0, G4_ACT_K_Q5_0, G4_ACT_K_IQ4_NL, G4_ACT_K_IQ4_NL_VEC, G4_ACT_K_Q4_1, G4_ACT_K_Q5_1 };

/* the block's 32 quants as signed bytes: Q8_0 as stored, Q4_0 nibble - 8, Q5_0 five bits - 16,
 * IQ4_NL the nibble's kvalue; as unsigned bytes: Q4_1 the nibble, Q5_1 the five bits */
static inline __attribute__((always_inline)) __m256i g4_act_unpack32_avx2(int kind, const uint8_t *b) {
    if (kind == G4_ACT_K_Q8_0) return _mm256_loadu_si256((const __m256i *)(b + 2));
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const int qs = kind == G4_ACT_K_Q5_0 ? 6 : kind == G4_ACT_K_Q4_1 ? 4 : kind == G4_ACT_K_Q5_1 ? 8 : 2;
    const __m128i v = _mm_loadu_si128((const __m128i *)(b + qs));
    if (kind == G4_ACT_K_IQ4_NL || kind == G4_ACT_K_IQ4_NL_VEC) {
        const __m128i kv = _mm_loadu_si128((const __m128i *)g4_kvalues_iq4nl);
        return _mm256_set_m128i(_mm_shuffle_epi8(kv, _mm_and_si128(_mm_srli_epi16(v, 4), m4)), _mm_shuffle_epi8(kv, _mm_and_si128(v, m4)));
    }
    const __m256i nib = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
    if (kind == G4_ACT_K_Q4_0) return _mm256_sub_epi8(nib, _mm256_set1_epi8(8));
    if (kind == G4_ACT_K_Q4_1) return nib;
    /* Q5_0: bit i of qh set -> +16; ggml ORs 0xF0 (i.e. -16) into the lanes whose bit is clear;
     * Q5_1: 0x10 into those whose bit is set */
    uint32_t qh;
    memcpy(&qh, b + (kind == G4_ACT_K_Q5_1 ? 4 : 2), 4);
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    __m256i bits = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);
    bits = _mm256_or_si256(bits, _mm256_set1_epi64x((long long)0x7fbfdfeff7fbfdfeULL));
    bits = _mm256_cmpeq_epi8(bits, _mm256_set1_epi64x(-1));
    if (kind == G4_ACT_K_Q5_1) return _mm256_or_si256(nib, _mm256_and_si256(bits, _mm256_set1_epi8(0x10)));
    return _mm256_or_si256(nib, _mm256_andnot_si256(bits, _mm256_set1_epi8((char)0xF0)));
}

/* ggml's scalar tail of its IQ4_NL dot (an odd last block after the two accumulators' sum v):
 * v + (d_x d_y) * the block's integer sum, one FMA */
static inline __attribute__((always_inline)) float g4_iq4_nl_tail(const uint8_t *blk, const uint8_t *xblk, float v) {
    const __m256i qx = g4_act_unpack32_avx2(G4_ACT_K_IQ4_NL, blk);
    const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(qx, qx), _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(xblk + 2)), qx)),
                                        _mm256_set1_epi16(1));
    int32_t l[8], sumi = 0;
    _mm256_storeu_si256((__m256i *)l, p);
    for (int i = 0; i < 8; i++) sumi += l[i];
    return fmaf(g4_ld_f16(xblk) * g4_ld_f16(blk), (float)sumi, v);
}

/* ggml's mins term of a Q2_K block against activation block yb, into the 8-lane acc before the
 * block's quants: its 16 mins (int16) times the activation's 16-sums, scaled by -yb.d dmin */
static inline __attribute__((always_inline)) __m256 g4_q2_k_mins(__m256i mins, const g4_block_q8_K *yb, float dmin, __m256 acc) {
    const __m256i prod = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)yb->bsums));
    return _mm256_fmadd_ps(_mm256_set1_ps(-yb->d * dmin), _mm256_cvtepi32_ps(prod), acc);
}

/* ggml's mins term of a Q4_K / Q5_K block against activation block yb: its 8 mins (int16) times
 * the activation's per-32 sums (hadd of bsums), scaled by -yb.d dmin; Q4_K adds the 4 products to
 * a 4-lane vector (fmadd), Q5_K their integer sum to one float (an FMA in ggml's build) */
static inline __attribute__((always_inline)) void g4_k45_mins(int q5, __m128i mins, const g4_block_q8_K *yb, float dmin,
                                                             __m128 *acc_m, float *summs) {
    const __m256i q8sums = _mm256_loadu_si256((const __m256i *)yb->bsums);
    const __m128i q8s = _mm_hadd_epi16(_mm256_castsi256_si128(q8sums), _mm256_extracti128_si256(q8sums, 1));
    const __m128i prod = _mm_madd_epi16(mins, q8s);
    if (q5) {
        const __m128i hs = _mm_hadd_epi32(_mm_hadd_epi32(prod, _mm_setzero_si128()), _mm_setzero_si128());
        *summs = fmaf(-yb->d * dmin, (float)_mm_cvtsi128_si32(hs), *summs);
    } else {
        *acc_m = _mm_fmadd_ps(_mm_set1_ps(-yb->d * dmin), _mm_cvtepi32_ps(prod), *acc_m);
    }
}


#endif
