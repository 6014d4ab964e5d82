/* quant.h — ggml block-quantized weights: scalar dequantization bit-exact to ggml's
 * dequantize_row_* (quant_ref.c) and the matmul kernels over quantized weights × float32
 * activations, scalar (quant_ref.c) and AVX2 (quant_avx2.c); and × int8-quantized activations
 * (--act-q8), scalar (quant_act.c), AVX2 (quant_act_avx2.c) and AVX512-VNNI (quant_act_avx512.c). Internal to src/kernels. */
#ifndef G4_KERNELS_QUANT_H
#define G4_KERNELS_QUANT_H

#include <string.h>

#include "kernels/kernels.h"

/* Decode reads every weight byte once from DRAM, and on these streams the hardware prefetcher
 * alone keeps too few misses in flight, so the decode kernels prefetch G4_PF_BYTES ahead of the
 * bytes each step reads, in the rows' linear address range (rows are contiguous, so the prefetch
 * runs on into the next rows; a hint past the end never faults). 16-32 KB ahead covers the DRAM
 * latency at the read bandwidth; a few KB is too close to hide it, and much farther evicts lines
 * before they are read (avx2.c has the bf16 side). The lines go into L2, not L1: 32 KB is a whole
 * L1 on many cores, where lines prefetched into it evicted the ones being read (on such a core the
 * AVX2 kernels decoded Q8_0 1.5x and Q4_K_M 1.12x faster with the L2 hint, the AVX-512 ones 1-4%). */
#ifndef G4_PF_BYTES   /* -DG4_PF_BYTES=N: a build to measure other distances with */
#define G4_PF_BYTES 32768
#endif

/* Prefetch the lines of [p + G4_PF_BYTES, p + G4_PF_BYTES + n): called once per step that reads
 * the n bytes at p, with steps of n bytes (so every line is covered). Always inlined: to GCC a
 * prefetch has no side effect, so where it kept this function out of line it deleted the calls as
 * dead code (whole kernels then streamed their weights unprefetched, at half speed). */
static inline __attribute__((always_inline)) void g4_prefetch_ahead(const void *p, size_t n) {
    for (size_t l = 0; l < n; l += 64) __builtin_prefetch((const char *)p + G4_PF_BYTES + l, 0, 2);
}

/* A vector value the compiler must hold in a register as it is at this point: it can neither fold
 * the value's load into every operation that reads it (a load per use where one was meant to
 * serve several) nor reassociate the arithmetic that produced it */
#define G4_IN_REGISTER(v) __asm__("" : "+v"(v))

/* One row of n elements (n a multiple of the block size) of quantized type dt → float32, in
 * exactly ggml's arithmetic order (no FMA contraction), so results are bit-identical. */
void g4_dequant_row(g4_dtype dt, const void *src, int64_t n, float *dst);
/* ggml's kvalues_iq4nl: the 16 values an IQ4_NL / IQ4_XS nibble stands for */
extern const int8_t g4_kvalues_iq4nl[16];
/* IQ4_XS sub-block ib's six-bit scale (the weights are d (ls - 32) kvalue) */
static inline int g4_iq4_xs_scale(const uint8_t *blk, int ib) {
    const int h = blk[2] | blk[3] << 8;
    return ((blk[4 + ib / 2] >> 4 * (ib % 2)) & 0xf) | (((h >> 2 * ib) & 3) << 4);
}

/* Q3_K sub-block s's six-bit scale (s < 16) from the block's packed scales[12]; the weights are
 * d (sc - 32) q (quant_ref.c) */
int g4_q3_k_scale(const uint8_t *scales, int s);
/* (all 16 at once, minus 32, in registers: g4_q3_k_scales_m32 in quant_simd.h) */

/* ggml's get_scale_min_k4: the six-bit scale *d and min *m of Q4_K sub-block j from the block's
 * packed scales[12] (quant_ref.c) */
void g4_q4_k_scale_min(int j, const uint8_t *scales, uint8_t *d, uint8_t *m);

/* Y[t][n] = sum_k X[t][k] * W[n][k], W rows of g4_dtype_row_bytes(dt, K) bytes. */
void g4_mm_q8_0_ref(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q4_0_ref(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q5_0_ref(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q4_k_ref(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q6_k_ref(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q5_k_ref(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_iq4_xs_ref(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q3_k_ref(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q2_k_ref(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_iq4_nl_ref(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q4_1_ref(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q5_1_ref(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
#define G4_QUANT_MATMULS_REF g4_mm_q8_0_ref, g4_mm_q4_0_ref, g4_mm_q5_0_ref, g4_mm_q4_k_ref, g4_mm_q6_k_ref, g4_mm_q5_k_ref, \
                             g4_mm_iq4_xs_ref, g4_mm_q3_k_ref, g4_mm_q2_k_ref, g4_mm_iq4_nl_ref, g4_mm_q4_1_ref, g4_mm_q5_1_ref

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
/* 16 quantized rows (row stride rb bytes), columns [k0, k0 + kc) (k0 and kc multiples of the
 * block size, kc <= G4_QUANT_PANEL_KC and a multiple of 8) -> the prefill GEMMs' float32
 * panel[kc][16], each weight exactly g4_dequant_row's (quant_panel_avx2.c) */
#define G4_QUANT_PANEL_KC 512
void g4_quant_panel16_avx2(g4_dtype dt, const void *w, size_t rb, int k0, int kc, float *panel);
/* The same panels on AVX-512F (quant_panel_avx512.c: Q4_K, Q6_K, Q8_0, Q4_0 and IQ4_NL decoded
 * k-major; the others by the AVX2 decoder), bit-identical to g4_quant_panel16_avx2's */
void g4_quant_panel16_avx512(g4_dtype dt, const void *w, size_t rb, int k0, int kc, float *panel);
#define G4_QUANT_MATMULS_AVX2 g4_mm_q8_0_avx2_rows, g4_mm_q4_0_avx2_rows, g4_mm_q5_0_avx2_rows, g4_mm_q4_k_avx2, g4_mm_q6_k_avx2, \
                              g4_mm_q5_k_avx2, g4_mm_iq4_xs_avx2, g4_mm_q3_k_avx2, g4_mm_q2_k_avx2, g4_mm_iq4_nl_avx2_rows, \
                              g4_mm_q4_1_avx2_rows, g4_mm_q5_1_avx2_rows
/* kernels.h matmul_rows: any T, each row's result bit-identical to the kernels above on that row
 * alone. Q4_K / Q6_K (quant_avx2.c) run 3 activation rows at a time over 32-row weight blocks;
 * Q8_0 / Q4_0 / Q5_0 (quant_legacy_avx2.c) read each weight block once for up to
 * G4_QDEC_MAX_ROWS rows and unpack it in registers for every row. */
void g4_mm_rows_q4_k_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_q6_k_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
/* The avx512 table's Q4_K / Q6_K decode (quant_k_avx512.c, AVX-512 F/BW/VL): matmul (T < 4 on 16
 * lanes, prefill the AVX2 kernels above) and matmul_rows (any T, each row bit-identical to matmul
 * on that row alone; 8 activation rows share each dequantized weight vector). */
void g4_mm_q4_k_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q6_k_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_q4_k_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_q6_k_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q5_k_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_q5_k_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_iq4_xs_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_iq4_xs_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q3_k_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_q3_k_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q2_k_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_q2_k_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
/* The AVX2 decode's block scales: every f16 as float (256 KB; a model's scales span a few
 * exponents, so the lines they use stay in cache), so that a block's scale reaches the FMA as one broadcast load with
 * no vector operation (converting it in registers took two to four, next to the ~17 that bound a
 * 32-weight block's time). Filled by g4_f16_f32_avx2_init (once, thread-safe), which every AVX2
 * decode entry calls first (quant_legacy_avx2.c); the AVX-512 legacy decode reads it too. */
extern float g4_f16_f32_avx2[65536];
void g4_f16_f32_avx2_init(void);
#define G4_QDEC_MAX_ROWS 16
void g4_mm_q8_0_avx2_rows(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q4_0_avx2_rows(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q5_0_avx2_rows(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_q8_0_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_q4_0_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_q5_0_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_iq4_nl_avx2_rows(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_iq4_nl_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q4_1_avx2_rows(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_q4_1_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q5_1_avx2_rows(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_q5_1_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
#define G4_QUANT_ROWS_AVX2 g4_mm_rows_q8_0_avx2, g4_mm_rows_q4_0_avx2, g4_mm_rows_q5_0_avx2, g4_mm_rows_q4_k_avx2, \
                           g4_mm_rows_q6_k_avx2, g4_mm_rows_q5_k_avx2, g4_mm_rows_iq4_xs_avx2, g4_mm_rows_q3_k_avx2, \
                           g4_mm_rows_q2_k_avx2, g4_mm_rows_iq4_nl_avx2, g4_mm_rows_q4_1_avx2, g4_mm_rows_q5_1_avx2
/* Q5_K, IQ4_XS, Q3_K and Q2_K (quant_dq256_avx2.c): decode as dequantized weights on 8 lanes,
 * row-invariant at any T; inputs of more than G4_QDEC_MAX_ROWS rows through matmul take the panel
 * GEMM */
void g4_mm_q5_k_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_q5_k_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_iq4_xs_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_iq4_xs_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q3_k_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_q3_k_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q2_k_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_q2_k_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
/* A Q3_K (signed quants q - 4, scales d (sc - 32)) or Q2_K (quants, scales d sc, mins dmin m)
 * block as its 256 quants in weight order and each 16-weight sub-block's scale dsc[s] and min
 * dsc[16 + s], for the panel decoder */
void g4_k16_unpack_avx2(g4_dtype dt, const uint8_t *blk, uint8_t q[256], float dsc[32]);
/* AVX-512F (quant_legacy_avx512.c), the avx512 table's: the same row invariance up to
 * G4_QDEC_MAX_ROWS rows, 16 lanes; more rows take the AVX2 entries above */
void g4_mm_q8_0_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q4_0_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q5_0_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_q8_0_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_q4_0_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_q5_0_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_iq4_nl_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_iq4_nl_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q4_1_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_q4_1_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_q5_1_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mm_rows_q5_1_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_quant_legacy_avx512_init(void);   /* once, before the kernels above run */

/* The exact 32-weight kernels' block kinds (quant_legacy_avx2.c, quant_legacy_avx512.c) and the
 * bytes of a block of each */
enum { G4_K32_Q8_0, G4_K32_Q4_0, G4_K32_Q5_0, G4_K32_IQ4_NL, G4_K32_Q4_1, G4_K32_Q5_1 };
/* X(name, NAME) for every kind: the kernels' per-kind entries are instantiated from this list */
#define G4_K32_KINDS(X) X(q8_0, Q8_0) X(q4_0, Q4_0) X(q5_0, Q5_0) X(iq4_nl, IQ4_NL) X(q4_1, Q4_1) X(q5_1, Q5_1)
static inline int g4_k32_bytes(int kind) {
    return kind == G4_K32_Q8_0 ? 34 : kind == G4_K32_Q5_0 ? 22 : kind == G4_K32_Q4_1 ? 20 : kind == G4_K32_Q5_1 ? 24 : 18;
}

/* ---- the int8-activation mode (--act-q8): quant_act.c (scalar), quant_act_avx2.c ---- */

#define G4_Q8_0_BYTES 34   /* ggml block_q8_0: f16 d, int8 q[32] */
#define G4_Q8_1_BYTES 36   /* ggml block_q8_1: f16 d, f16 s (d * sum of q), int8 q[32] */

/* ggml's block_q8_K: the activation blocks for Q4_K / Q6_K weights (292 bytes) */
typedef struct {
    float d;              /* 1 / iscale */
    int8_t qs[256];
    int16_t bsums[16];    /* sums of each 16 quants (Q4_K's mins, Q6_K's -32 offset) */
} g4_block_q8_K;

/* One weight row of n elements · one quantized activation row, ggml's generic vec_dot code. */
float g4_vec_dot_q8_0_q8_0_ref(int n, const void *w, const void *xq);
float g4_vec_dot_q4_0_q8_0_ref(int n, const void *w, const void *xq);
float g4_vec_dot_q5_0_q8_0_ref(int n, const void *w, const void *xq);
float g4_vec_dot_q4_k_q8_k_ref(int n, const void *w, const void *xq);
float g4_vec_dot_q6_k_q8_k_ref(int n, const void *w, const void *xq);
float g4_vec_dot_q5_k_q8_k_ref(int n, const void *w, const void *xq);
float g4_vec_dot_iq4_xs_q8_k_ref(int n, const void *w, const void *xq);
float g4_vec_dot_q3_k_q8_k_ref(int n, const void *w, const void *xq);
float g4_vec_dot_q2_k_q8_k_ref(int n, const void *w, const void *xq);
float g4_vec_dot_iq4_nl_q8_0_ref(int n, const void *w, const void *xq);
float g4_vec_dot_q4_1_q8_1_ref(int n, const void *w, const void *xq);
float g4_vec_dot_q5_1_q8_1_ref(int n, const void *w, const void *xq);
/* Q4_K's 12 packed bytes -> 8 six-bit scales then 8 mins, as the 16 bytes of utmp (ggml's kmask
 * unpacking). Inline: the AVX2 dot unpacks every 256-weight block and keeps the result in registers. */
static inline void g4_q4_k_scales(const uint8_t *sc12, uint32_t utmp[4]) {
    memcpy(utmp, sc12, 12);
    utmp[3] = ((utmp[2] >> 4) & 0x0f0f0f0f) | (((utmp[1] >> 6) & 0x03030303) << 4);
    const uint32_t uaux = utmp[1] & 0x3f3f3f3f;
    utmp[1] = (utmp[2] & 0x0f0f0f0f) | (((utmp[0] >> 6) & 0x03030303) << 4);
    utmp[2] = uaux;
    utmp[0] &= 0x3f3f3f3f;
}

void g4_mmq_q8_0_ref(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_q4_0_ref(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_q5_0_ref(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_q4_k_ref(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_q6_k_ref(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_q5_k_ref(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_iq4_xs_ref(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_q3_k_ref(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_q2_k_ref(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_iq4_nl_ref(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_q4_1_ref(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_q5_1_ref(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
#define G4_QUANT_MATMULS_Q8_REF NULL, NULL, NULL, g4_mmq_q8_0_ref, g4_mmq_q4_0_ref, g4_mmq_q5_0_ref, g4_mmq_q4_k_ref, \
                                g4_mmq_q6_k_ref, g4_mmq_q5_k_ref, g4_mmq_iq4_xs_ref, g4_mmq_q3_k_ref, g4_mmq_q2_k_ref, \
                                g4_mmq_iq4_nl_ref, g4_mmq_q4_1_ref, g4_mmq_q5_1_ref

void g4_mmq_q8_0_avx2(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_q4_0_avx2(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_q5_0_avx2(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_q4_k_avx2(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_q6_k_avx2(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
/* Q5_K: ggml's AVX2 dot, decode tiles and prefill GEMM tiles as Q4_K's (the AVX-512 tables keep
 * this entry) */
void g4_mmq_q5_k_avx2(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
/* IQ4_XS: ggml's AVX2 dot through decode tiles at any T (no GEMM tiles) */
void g4_mmq_iq4_xs_avx2(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
/* Q3_K, Q2_K: ggml's AVX2 dots through decode tiles at any T (no GEMM tiles) */
void g4_mmq_q3_k_avx2(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_q2_k_avx2(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
/* IQ4_NL: one row ggml's AVX2 dot (even / odd blocks in two accumulators), more rows llama.cpp's
 * tinyBLAS order (one accumulator), as llama.cpp runs them: not row-invariant */
void g4_mmq_iq4_nl_avx2(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
/* Q4_1, Q5_1 (× Q8_1 blocks): ggml's AVX2 dots through decode tiles at any T, row-invariant */
void g4_mmq_q4_1_avx2(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_q5_1_avx2(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_act_quantize_avx2(g4_dtype wdt, const float *x, int T, int K, void *dst);
/* AVX512-VNNI (quant_act_avx512.c), bit-identical to the AVX2 entries above: any number of
 * activation rows over Q8_0 / Q4_0 / Q5_0, 12 or more over Q4_K / Q6_K (the AVX2 entries take
 * shorter K-quant inputs and the K-quant rows short of a chunk) */
void g4_mmq_q8_0_avx512vnni(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_q4_0_avx512vnni(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_q5_0_avx512vnni(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_q4_k_avx512vnni(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_q6_k_avx512vnni(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_q5_k_avx512vnni(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_iq4_nl_avx512vnni(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_iq4_xs_avx512vnni(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_q3_k_avx512vnni(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
void g4_mmq_q2_k_avx512vnni(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
#define G4_QUANT_MATMULS_Q8_AVX2 NULL, NULL, NULL, g4_mmq_q8_0_avx2, g4_mmq_q4_0_avx2, g4_mmq_q5_0_avx2, g4_mmq_q4_k_avx2, \
                                 g4_mmq_q6_k_avx2, g4_mmq_q5_k_avx2, g4_mmq_iq4_xs_avx2, g4_mmq_q3_k_avx2, g4_mmq_q2_k_avx2, \
                                 g4_mmq_iq4_nl_avx2, g4_mmq_q4_1_avx2, g4_mmq_q5_1_avx2

#endif
