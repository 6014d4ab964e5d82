/* quant.h — ggml block-quantized weights: scalar dequantization bit-exact to ggml's
 * dequantize_row_* (quant_ref.c) and the matmul kernels over quantized weights × float32
 * activations, scalar (quant_ref.c) and AVX2 (quant_avx2.c). Internal to src/kernels. */
#ifndef G4_KERNELS_QUANT_H
#define G4_KERNELS_QUANT_H

#include "kernels/kernels.h"

/* One row of n elements (n a multiple of the block size) of quantized type dt → float32, in
 * exactly ggml's arithmetic order (no FMA contraction), so results are bit-identical. */
void g4_dequant_row(g4_dtype dt, const void *src, int64_t n, float *dst);

/* Y[t][n] = sum_k X[t][k] * W[n][k], W rows of g4_dtype_row_bytes(dt, K) bytes. */
void g4_mm_q8_0_ref(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q4_0_ref(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q5_0_ref(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q4_k_ref(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q6_k_ref(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
#define G4_QUANT_MATMULS_REF g4_mm_q8_0_ref, g4_mm_q4_0_ref, g4_mm_q5_0_ref, g4_mm_q4_k_ref, g4_mm_q6_k_ref

void g4_mm_q8_0_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q4_0_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q5_0_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q4_k_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q6_k_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
/* Blocked prefill GEMM (T >= 4) over quantized rows [n0, n1): dequantizes 16-row panels once
 * and runs the fp32 microkernel (avx2.c). Computes whole 16-row panels only; returns the first
 * row it did not compute (n0 if K does not suit it). */
int g4_gemm_quant_avx2(g4_dtype dt, const float *x, int T, int K, const void *w, int n0, int n1, float *y,
                       int ldy);
#define G4_QUANT_MATMULS_AVX2 g4_mm_q8_0_avx2, g4_mm_q4_0_avx2, g4_mm_q5_0_avx2, g4_mm_q4_k_avx2, g4_mm_q6_k_avx2

#endif
