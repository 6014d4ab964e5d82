/* pack_avx2.h — the AVX2 GEMM's weight packers, shared with the AVX-512 GEMM (cpu/avx512.c):
 * 16 weight rows starting at `w` (row stride K elements), columns [k0, k0 + kc) (kc a multiple
 * of 8) → a float32 panel[kc][16] (32-byte aligned), bf16 and f16 widened exactly. The bf16
 * panel's lanes are in "even/odd" order: lanes 0-7 hold rows 0,2,...,14 and lanes 8-15 rows
 * 1,3,...,15 (the widening is then a shift and a mask); f32 and f16 panels are in row order. */
#ifndef G4_PACK_AVX2_H
#define G4_PACK_AVX2_H

typedef void (*g4_pack16_fn)(const void *w, int K, int k0, int kc, float *panel);
void g4_pack16_f32_avx2(const void *w, int K, int k0, int kc, float *panel);
void g4_pack16_f16_avx2(const void *w, int K, int k0, int kc, float *panel);
void g4_pack16_bf16_avx2(const void *w, int K, int k0, int kc, float *panel);

/* The AVX-512 exact GEMM (cpu/avx512.c), g4_matmul_fn's contract; T < 4, K % 8 and a range's
 * last < 16 rows run the AVX2 kernels. */
void g4_matmul_f32_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_matmul_f16_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_matmul_bf16_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);

#endif
