/* pack_avx2.h — the AVX2 GEMM's f32 and f16 weight packers, shared with the AVX-512 GEMM
 * (cpu/avx512.c, which packs bf16 itself): 16 weight rows starting at `w` (row stride K
 * elements), columns [k0, k0 + kc) (kc a multiple of 8) → a float32 panel[kc][16] (32-byte
 * aligned) in row order, f16 widened exactly. */
#ifndef G4_PACK_AVX2_H
#define G4_PACK_AVX2_H

/* Activation rows per M block of a GEMM: T in equal blocks of at most max_rows rows, rounded up
 * to whole microkernel rows (mr). Every block packs every weight panel once more, so fewer,
 * fuller blocks pack less (avx2.c's GEMM_MC says why its block may outgrow L2). */
static inline int g4_gemm_mblock(int T, int max_rows, int mr) {
    const int nb = (T + max_rows - 1) / max_rows, mc = (T + nb - 1) / nb;
    return (mc + mr - 1) / mr * mr;
}

typedef void (*g4_pack16_fn)(const void *w, int K, int k0, int kc, float *panel);
void g4_pack16_f32_avx2(const void *w, int K, int k0, int kc, float *panel);
/* avx2.c's bf16 decode GEMV (T <= 3) with each long row's stream prefetched, for the avx512 path */
void g4_gemv_bf16_rowpf_avx2(const float *x, int T, int K, const uint16_t *W, int n0, int n1, float *y, int ldy);
void g4_pack16_f16_avx2(const void *w, int K, int k0, int kc, float *panel);
/* avx2.c's row-invariant multi-row bf16 decode in its one-row GEMV's order (kernels.h
 * matmul_rows), one_row being the table's one-row kernel (shapes the eo split does not take, the
 * last (n1 - n0) % 4 rows), and its per-thread scratch (NULL if out of memory) */
void g4_rows_bf16_eo_avx2(const float *x, int T, int K, const uint16_t *W, int n0, int n1, float *y, int ldy,
                          void (*one_row)(const float *, int, int, const void *, int, int, float *, int));
float *g4_rows_scratch_avx2(size_t floats);
void g4_rows_scratch_reserve_avx2(void);   /* the table's prepare_thread: the scratch at its full size */
/* the avx512 table's matmul_rows for bf16 (cpu/avx512.c) */
void g4_matmul_rows_bf16_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);

/* The AVX-512 exact GEMM (cpu/avx512.c), g4_matmul_fn's contract; T < 4, K % 8 and a range's
 * last < 16 rows run the AVX2 kernels. */
void g4_matmul_f32_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_matmul_f16_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_matmul_bf16_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
/* The same on input packed by g4_pack_x_avx512 (kernels.h: matmul_xp, pack_x), 14-row panels */
enum { G4_AVX512_XMR = 14 };
void g4_pack_x_avx512(const float *x, int T, int K, int b0, int b1, float *xp);
void g4_matmul_xp_f32_avx512(const float *x, const float *xp, int T, int K, const void *w, int n0, int n1,
                                 float *y, int ldy);
void g4_matmul_xp_f16_avx512(const float *x, const float *xp, int T, int K, const void *w, int n0, int n1,
                                 float *y, int ldy);
void g4_matmul_xp_bf16_avx512(const float *x, const float *xp, int T, int K, const void *w, int n0, int n1,
                                 float *y, int ldy);
/* quantized weights (Q8_0, Q4_0, Q5_0, Q4_K, Q6_K) on the same packed input: each 16-row panel
 * dequantized once per (M block, K block), bit-identical to the AVX2 quantized GEMM */
void g4_matmul_xp_q8_0_avx512(const float *x, const float *xp, int T, int K, const void *w, int n0, int n1,
                              float *y, int ldy);
void g4_matmul_xp_q4_0_avx512(const float *x, const float *xp, int T, int K, const void *w, int n0, int n1,
                              float *y, int ldy);
void g4_matmul_xp_q5_0_avx512(const float *x, const float *xp, int T, int K, const void *w, int n0, int n1,
                              float *y, int ldy);
void g4_matmul_xp_q4_k_avx512(const float *x, const float *xp, int T, int K, const void *w, int n0, int n1,
                              float *y, int ldy);
void g4_matmul_xp_q6_k_avx512(const float *x, const float *xp, int T, int K, const void *w, int n0, int n1,
                              float *y, int ldy);
void g4_matmul_xp_q5_k_avx512(const float *x, const float *xp, int T, int K, const void *w, int n0, int n1,
                              float *y, int ldy);
void g4_matmul_xp_iq4_xs_avx512(const float *x, const float *xp, int T, int K, const void *w, int n0, int n1,
                                float *y, int ldy);
void g4_matmul_xp_q3_k_avx512(const float *x, const float *xp, int T, int K, const void *w, int n0, int n1,
                              float *y, int ldy);
void g4_matmul_xp_q2_k_avx512(const float *x, const float *xp, int T, int K, const void *w, int n0, int n1,
                              float *y, int ldy);
void g4_matmul_xp_iq4_nl_avx512(const float *x, const float *xp, int T, int K, const void *w, int n0, int n1,
                                float *y, int ldy);
void g4_matmul_xp_q4_1_avx512(const float *x, const float *xp, int T, int K, const void *w, int n0, int n1,
                              float *y, int ldy);
void g4_matmul_xp_q5_1_avx512(const float *x, const float *xp, int T, int K, const void *w, int n0, int n1,
                              float *y, int ldy);

#endif
