/* kernels.h — the table of compute kernels the forward pass calls, filled once at start-up
 * from CPU feature detection (or forced with G4_CPU_ISA=scalar|avx2|avx512|avx512bf16|amx). Every path is tested
 * against the scalar reference (cpu/ref.c). Owns no memory; all buffers come from the caller
 * (the AVX2 GEMM keeps its 32 KB weight panel on the calling thread's stack).
 *
 * Paths: "scalar" (reference) and "avx2" (AVX2 + FMA + F16C): bf16/f16 weights widened to fp32
 * in registers (exact), fp32 accumulation — decode GEMV streams the weights with software
 * prefetch (one bf16 row: pairs split by a shift and a mask against x split into even/odd
 * columns, half the vector work per weight byte); prefill GEMM packs 16-row x 512-column fp32 panels (bf16: a 16-bit transpose, then
 * shift/mask widening) and runs a 6x16 FMA microkernel, prefetching the next panel's weights
 * while it runs (bench/gemm_bench.c times it alone).
 * Quantized weights (Q8_0/Q4_0/Q5_0/Q4_K/Q5_K/Q6_K, cpu/quant*.c): by default ("exact") widened to fp32
 * against fp32 activations (AVX2 decode: quants widened into int32 lanes in registers, block scales
 * from a table of every f16 as float, offsets and Q4_K mins from per-call sums of x, which keeps
 * the weight stream near the exact bf16 one's speed; see README "GGUF and quantized models"). Opt-in `--act-q8` (matmul_q8, quantize_act): the
 * activation row is quantized once per matmul input to ggml's vec_dot_type (Q8_0 blocks for
 * Q8_0/Q4_0/Q5_0, Q8_K for Q4_K/Q5_K/Q6_K) and multiplied int8 x int8 (AVX2 maddubs/madd, one float
 * scale per block), as llama.cpp does — bit-identical to ggml's kernels (generic C for "scalar",
 * x86 AVX2 for "avx2"); prefill runs the same int8 tiles (4 activation rows per unpacked weight
 * block), slower than the exact GEMM on some types, kept so that every token of a run sees
 * llama.cpp's arithmetic.
 * Path "avx512" is the avx2 table with the exact prefill GEMM on AVX-512F (cpu/avx512.c: the same
 * panels, quantized ones too, a 14 x 32 zmm microkernel), Q8_0 / Q4_0 / Q5_0 decode in 16 lanes
 * (cpu/quant_legacy_avx512.c) and, where the CPU has AVX-512 BW/VL, Q4_K / Q5_K / Q6_K decode in 16 lanes
 * (cpu/quant_k_avx512.c); the other types' decode stays on the AVX2 weight stream.
 * Both have row-invariant multi-row decode kernels (matmul_rows: several slots' tokens or a
 * speculative verify, each row summed in the one-row GEMV's order, the weights read once).
 * The opt-in bf16 prefill (`--prefill-bf16`, matmul_xbf16): paths "avx512bf16" (vdpbf16ps, a 12 x 32
 * register block, cpu/bf16_avx512.c) and "amx" (AMX-BF16 tiles, cpu/bf16_amx.c) are the avx512 table
 * plus that matmul, picked where the CPU (and for AMX, Linux's tile-data permission) has them
 * (dispatch.c); on the other paths the matmul layer (matmul.h) feeds bf16-rounded floats to the
 * fp32 kernels. On a CPU without them the bf16 paths' tests skip. Which input form and kernel a
 * matmul takes (and the scratch it needs) is matmul.h's; this table only lists what exists. */
#ifndef G4_KERNELS_H
#define G4_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/half.h"

/* Y[t][n] = sum_k X[t][k] * W[n][k] for t in [0, T), n in [n0, n1).
 * X: [T][K] float32 rows of stride K; W: [N][K] in `wdt` (row stride K elements);
 * Y: [T][ldy], only columns [n0, n1) written. Accumulation in float32. */
typedef void (*g4_matmul_fn)(const float *x, int T, int K, const void *w, int n0, int n1,
                             float *y, int ldy);

/* The int8-activation mode (--act-q8): Y[t][n] = W[n] · Xq[t] with Xq the activation rows
 * quantized by g4_act_quantize into the weight type's ggml vec_dot_type blocks — Q8_0 for Q8_0 /
 * Q4_0 / Q5_0 / IQ4_NL weights, Q8_K for the K-quants and IQ4_XS, Q8_1 for Q4_1 / Q5_1 — integer products per block, one float scale per
 * block (as ggml's ggml_vec_dot_*_q8_*). xq: [T] rows of g4_act_row_bytes(wdt, K) bytes. */
typedef void (*g4_matmul_q8_fn)(const void *xq, int T, int K, const void *w, int n0, int n1,
                                float *y, int ldy);

/* --prefill-bf16 on bf16 hardware: Y[t][n] = sum_k Xb[t][k] * W[n][k] with bf16 activations Xb
 * ([T rounded up to 32] rows of stride ldx, a multiple of 32; the padding rows and the columns
 * [K, K rounded up to 32) are zero — or, per the table's xbf16_layout, the same matrix in the
 * tile or pair layout below, ldx then being K rounded up to 32) and bf16 weights
 * W [N][K]; bf16 x bf16 products (exact in fp32) summed in fp32. Only columns [n0, n1) of
 * Y [T][ldy] are written. */
typedef void (*g4_matmul_xbf16_fn)(const uint16_t *xb, int ldx, int T, int K, const void *w, int n0,
                                   int n1, float *y, int ldy);

/* The exact GEMM on activations packed once per matmul input and shared by every task of the
 * matmul (each task packing them itself would repeat the packing once per task):
 * pack_x(x, T, K, b0, b1, xp) writes micro-panels b0..b1-1 of X [T][K], panel b holding rows
 * [b * x_mr, b * x_mr + x_mr) k-major: xp[(b * K + k) * x_mr + i] = X[b * x_mr + i][k] (rows
 * past T left as they are). matmul_xp[dt](x, xp, ...) then computes what matmul[dt](x, ...) does, from
 * those panels (x itself is read only for a range's last < 16 rows; T >= 4, K a multiple of 8);
 * NULL where the path has no such GEMM. */
typedef void (*g4_matmul_xp_fn)(const float *x, const float *xp, int T, int K, const void *w, int n0, int n1,
                                 float *y, int ldy);
typedef void (*g4_pack_x_fn)(const float *x, int T, int K, int b0, int b1, float *xp);

/* --prefill-bf16's bf16 input for matmul_xbf16: rows; AMX A tiles (g4_xbf16_tile_offset); AMX B
 * tiles of token pairs (g4_xbf16_pair_offset, for the AMX kernels that take the weights as A) */
typedef enum { G4_XBF16_ROWS = 0, G4_XBF16_TILES = 1, G4_XBF16_PAIRS = 2 } g4_xbf16_layout;

typedef struct {
    const char *name;                 /* "scalar", "avx2", "avx512", "avx512bf16", "amx" */
    g4_matmul_fn matmul[G4_DT_COUNT]; /* indexed by g4_dtype (quantized types: cpu/quant*.c) */
    g4_matmul_q8_fn matmul_q8[G4_DT_COUNT];   /* --act-q8, quantized types only (else NULL) */
    g4_matmul_xp_fn matmul_xp[G4_DT_COUNT];   /* the GEMM on pre-packed input, or NULL (quantized
                                               * weights: matmul[dt]'s result above 16 rows,
                                               * where it too takes the GEMM) */
    /* Row-invariant multi-row decode (several slots' tokens, a speculative verify): for any T, row t
     * of the result is bit-identical to matmul[dt] on row t alone over the same [n0, n1) — each
     * (weight row, activation row) pair summed in the one-row kernel's order — with each weight
     * row read from DRAM once for all T rows. NULL where the table has none (scalar: matmul itself
     * is row-invariant). A table that replaces matmul[dt] replaces this entry with it. */
    g4_matmul_fn matmul_rows[G4_DT_COUNT];
    g4_pack_x_fn pack_x;                      /* the input packing matmul_xp takes */
    /* The exact GEMM for bf16 weights on AMX (kernels.h g4_xbf16_put_row_split3): the input as
     * three bf16 planes in the tile layout, `plane` elements apart; NULL without AMX */
    void (*matmul_x3bf16)(const uint16_t *xs, size_t plane, int T, int K, const void *w, int n0, int n1, float *y,
                          int ldy);
    void (*split3_row)(const float *x, int n, int t, int Kp, size_t plane, uint16_t *xs);   /* its input */
    void (*put_row_tiles)(const float *x, int n, int t, int Kp, uint16_t *xb);   /* g4_xbf16_put_row's
                                                                                  * tile layout, or NULL */
    /* AMX with the weights as the A operand (cpu/bf16_amx.c): matmul_xbf16 / matmul_x3bf16 on
     * input in the pair layout (for short inputs: matmul.h's pairs_max_rows), and that input's
     * writer, 16 rows at a time (g4_xbf16_put_pairs16_avx512): set all together, or NULL */
    g4_matmul_xbf16_fn matmul_xbf16_pairs;
    void (*matmul_x3bf16_pairs)(const uint16_t *xs, size_t plane, int T, int K, const void *w, int n0, int n1,
                                float *y, int ldy);
    void (*put_pairs16)(const float *x, int ldx, int rows, int n, int t0, int Kp, size_t plane, int nterms,
                        uint16_t *xs);
    /* Decode on AMX (cpu/bf16_amx.c): the exact matmul of inputs of up to G4_GEMV_X3_MAX_ROWS
     * rows over bf16 weights — several slots' decode tokens at once (matmul.h's policy picks the
     * row range) — the input's three bf16 planes as the columns of B tiles, 5 rows a tile
     * (g4_xbf16_gemv3_offset, written by put_gemv3), K a multiple of 32: set together, or NULL */
    void (*matmul_gemv3)(const uint32_t *xg, int T, int K, const void *w, int n0, int n1, float *y, int ldy);
    void (*put_gemv3)(const float *x, int ldx, int T, int K, uint32_t *xg);
    int x_mr;                                 /* rows per packed micro-panel */
    /* --act-q8: T rows of K floats → T rows of g4_act_row_bytes(wdt, K) bytes, as ggml's CPU
     * backend of the same ISA: scalar = g4_act_quantize (quantize_row_q8_0_ref / _q8_K_ref);
     * avx2 = ggml's x86 quantize_row_q8_0 (x * (127/amax), round half to even — it differs from
     * the reference in the last bit of some quants) and quantize_row_q8_K_ref (x86 ggml uses it) */
    void (*quantize_act)(g4_dtype wdt, const float *x, int T, int K, void *dst);
    /* --prefill-bf16's matmul on the CPU's bf16 units (avx512bf16: vdpbf16ps; amx: AMX-BF16
     * tiles); NULL on paths without them, where the forward pass feeds bf16-rounded floats to
     * matmul[G4_DT_BF16] instead (the same products; only the summation order differs) */
    g4_matmul_xbf16_fn matmul_xbf16;
    g4_xbf16_layout xbf16_layout;   /* the layout matmul_xbf16 takes its input in */
    float (*dot)(const float *a, const float *b, int n);
    void (*axpy)(float a, const float *x, float *y, int n);        /* y += a x */
    /* y = x * (mean(x^2) + eps)^-1/2 * (w ? w : 1); x and y may alias.  [n] */
    void (*rmsnorm)(const float *x, const float *w, float eps, int n, float *y);
    /* y[i] = gelu_tanh(g[i]) * u[i]  [n] */
    void (*gelu_mul)(const float *g, const float *u, int n, float *y);
    /* One query head over cached positions t in [lo, hi] (ring index t % cap):
     * out = softmax_t(q·K[t] * scale) · V[t].  q,out:[D]  K,V:[cap][D]  scores: [hi-lo+1] scratch */
    void (*attend)(const float *q, const float *K, const float *V, int cap, int lo, int hi, int D,
                   float scale, float *scores, float *out);
    /* attend for a block of query rows that share one KV head: G heads x P positions, so K and
     * V are read once for the block instead of once per row (prefill's many rows per head).
     * Row (p, h) reads q + p*ldq + h*D, writes out + p*ldo + h*D, and attends over t in
     * [lo[p], hi[p]] (ring index t % cap) with attend's result to float rounding. batched: the
     * step's rows would be one llama.cpp batch of >= 2 tokens; only the ggml table's reads it
     * (tinyBLAS for P·V there, else ggml_vec_dot_f32).
     * q: [P][ldq]  out: [P][ldo]  lo, hi: [P]  K, V: [cap][D]
     * scores: [G*P][max(hi) - min(lo) + 1] scratch */
    void (*attend_block)(const float *q, int ldq, float *out, int ldo, int G, int P, const int *lo,
                         const int *hi, const float *K, const float *V, int cap, int D, float scale,
                         float *scores, int batched);
    /* 1: attend_block runs with denormals flushed to zero (MXCSR FTZ | DAZ; the caller sets and
     * restores it): a softmax's tail probabilities and their products with V fall below FLT_MIN,
     * and Intel cores compute every denormal operand or result through a microcode assist. A
     * flushed term is < 2^-126 where each row's sum holds its largest term, far below float
     * resolution. 0 for the ggml table, which keeps llama.cpp's arithmetic. */
    int attend_ftz;
    /* attend_block over a cache of another kv_type (g4_attend_kv_fn below; --kv-type): the AVX2 or
     * AVX-512 blocked attention widening tiles, or the scalar reference; NULL on the ggml table,
     * whose attention is llama.cpp's f32 one. */
    void (*attend_kv)(int kv_type, const float *q, int ldq, float *out, int ldo, int G, int P, const int *lo,
                      const int *hi, const void *K, const void *V, int cap, int D, float scale, float *scores);
    /* RoPE of one position: the table cs [D] (cos in [0, D/2), sin in [D/2, D)) of pos * inv_freq
     * [D/2] (theta: the layer type's rope theta, which only the ggml table's llama.cpp RoPE cache
     * reads), and the rotation of one head x [D] in place, rotate-half pairs (i, i + D/2) */
    void (*rope_table)(float theta, const float *inv_freq, int D, int pos, float *cs);
    void (*rope_apply)(float *x, const float *cs, int D);
    /* applied to the logits [n] inside the forward pass (the ggml table: llama.cpp's graph ends
     * with the final softcap), or NULL: the forward pass returns raw logits and the session
     * applies the softcap where sampling needs it (g4_softcap) */
    void (*logits_softcap)(float *logits, int n, float cap);
    /* run once on every thread of a pool before its first matmul (g4_matmul_ctx_new): sets up the
     * calling thread's kernel scratch, so that no decode step allocates; NULL: none needed */
    void (*prepare_thread)(void);
} g4_kernels;

/* The scalar attend, shared by the vector paths (which plug their own dot/axpy into it). */
void g4_attend_generic(const float *q, const float *K, const float *V, int cap, int lo, int hi,
                       int D, float scale, float *scores, float *out,
                       float (*dot)(const float *, const float *, int),
                       void (*axpy)(float, const float *, float *, int));

/* ---------------------------------------------------------------- KV cache storage types
 * (g4_model_opts.kv_type, G4_KV_*). A cache row is one head's D values of one position:
 * f32 [D] floats; bf16 / f16 [D] 16-bit words; q8_0 [D/32] blocks of ggml's block_q8_0
 * ({f16 d; int8 qs[32]}, 34 bytes, x = d * qs). The f32 type keeps attend_block (exact); the
 * others go through the attend_kv kernel below (cpu/kv_ref.c, cpu/attn_avx2.c, attn_avx512.c). */
typedef struct {
    uint16_t d;                 /* f16 scale: amax / 127 */
    int8_t qs[32];
} g4_kv_q8_block;
enum { G4_KV_QK = 32 };         /* elements per q8_0 block */

/* bytes of one cache row of D values; 0 for an unknown type or a q8_0 D not a multiple of 32 */
size_t g4_kv_row_bytes(int kv_type, int D);
/* dst (one cache row) = x [D] in kv_type: bf16 / f16 round to nearest even; q8_0 as ggml's
 * quantize_row_q8_0_ref (d = amax / 127, q = roundf(x / d), d stored as f16) */
void g4_kv_store_row(int kv_type, const float *x, int D, void *dst);
/* dst [n] = the n values (whole rows, contiguous) at src widened to float32 (scalar) */
void g4_kv_load_rows(int kv_type, const void *src, int n, float *dst);

/* attend_block over a cache of kv_type: K, V point at the head's row 0 ([cap] rows of
 * g4_kv_row_bytes(kv_type, D) bytes); every other argument as attend_block. Each K and V row is
 * widened to float32 (bf16 / f16 exactly; q8_0 as d * q in float32, as ggml dequantizes) and the
 * arithmetic is attend_block's on those floats. */
typedef void (*g4_attend_kv_fn)(int kv_type, const float *q, int ldq, float *out, int ldo, int G, int P,
                                const int *lo, const int *hi, const void *K, const void *V, int cap, int D,
                                float scale, float *scores);
/* The scalar reference: row by row, each K / V row widened then attend's float32 loop. */
void g4_attend_kv_ref(int kv_type, const float *q, int ldq, float *out, int ldo, int G, int P, const int *lo,
                      const int *hi, const void *K, const void *V, int cap, int D, float scale, float *scores);

/* The table for this CPU (or the path forced by G4_CPU_ISA); NULL with an error set if the
 * forced path is unknown or unsupported here. */
const g4_kernels *g4_kernels_get(void);
const g4_kernels *g4_kernels_scalar(void);
const g4_kernels *g4_kernels_avx2(void);     /* NULL if the CPU lacks AVX2+FMA+F16C */
/* The avx2 table with the AVX-512F prefill GEMM (cpu/avx512.c), legacy-quant decode
 * (cpu/quant_legacy_avx512.c) and, with BW/VL, the Q4_K / Q5_K / Q6_K decode on 16 lanes
 * (cpu/quant_k_avx512.c); NULL without AVX-512F. */
const g4_kernels *g4_kernels_avx512(void);
/* The avx512 table with --prefill-bf16's matmul on AVX512-BF16 (vdpbf16ps) or AMX-BF16 tiles
 * (cpu/bf16_avx512.c, cpu/bf16_amx.c); NULL if the CPU (or, for AMX, the kernel's permission to
 * use tile data) lacks them. */
const g4_kernels *g4_kernels_avx512bf16(void);
const g4_kernels *g4_kernels_amx(void);
/* `--numerics ggml`: base (any path's table; its matmuls stay, the mode's int8 ones being
 * --act-q8's) with llama.cpp's float ops in place of the exact ones (cpu/ggml_num.c, cpu/rope.c),
 * written to *out (dispatch.c). */
void g4_kernels_ggml(const g4_kernels *base, g4_kernels *out);
/* The bf16 matmuls themselves, for tests on any table (callers check the CPU first). */
void g4_matmul_xbf16_avx512(const uint16_t *xb, int ldx, int T, int K, const void *w, int n0, int n1,
                            float *y, int ldy);
void g4_matmul_xbf16_amx(const uint16_t *xb, int ldx, int T, int K, const void *w, int n0, int n1,
                         float *y, int ldy);
void g4_matmul_x3bf16_amx(const uint16_t *xs, size_t plane, int T, int K, const void *w, int n0, int n1, float *y,
                          int ldy);
/* The same with the weight rows as A tiles loaded straight from w and the input as B tiles in the
 * pair layout: no per-call weight pack (cpu/bf16_amx.c) */
void g4_matmul_xbf16_amx_pairs(const uint16_t *xb, int ldx, int T, int K, const void *w, int n0, int n1, float *y,
                               int ldy);
void g4_matmul_x3bf16_amx_pairs(const uint16_t *xs, size_t plane, int T, int K, const void *w, int n0, int n1,
                                float *y, int ldy);

/* The tile layout of the AMX matmul's input: the zero-padded [Tp][Kp] bf16 matrix (Tp, Kp
 * multiples of 32) as 16-row x 32-column tiles of 1 KB, row-major inside, the tiles of a 16-row
 * band consecutive along K. An AMX tile load then reads 1 KB of consecutive lines in one page,
 * where from rows it read 16 lines a matrix row apart. Element (t, k) is at this offset. */
static inline size_t g4_xbf16_tile_offset(int t, int k, int Kp) {
    return ((size_t)(t >> 4) * (size_t)(Kp >> 5) + (size_t)(k >> 5)) * 512 + (size_t)(t & 15) * 32 + (size_t)(k & 31);
}

/* The pair layout: the same matrix as AMX B tiles with the tokens as columns — per 16 tokens x
 * 32 columns a 1 KB tile of 16 rows (column pairs) x 16 tokens x 2 bf16, the tiles of a 16-token
 * band consecutive along K — so that the weight rows can be the A operand straight from memory
 * (g4_matmul_xbf16_amx_pairs). Element (t, k) is at this offset. */
static inline size_t g4_xbf16_pair_offset(int t, int k, int Kp) {
    return ((size_t)(t >> 4) * (size_t)(Kp >> 5) + (size_t)(k >> 5)) * 512 + (size_t)((k & 31) >> 1) * 32 +
           (size_t)(t & 15) * 2 + (size_t)(k & 1);
}

/* Row t of matmul_xbf16's input: x[0, n) rounded to bf16 and zeros to Kp (n <= Kp; n = 0 for a
 * padding row), in `layout` (rows of stride ld; ld unused by the others). */
void g4_xbf16_put_row(const float *x, int n, int t, int Kp, int ld, g4_xbf16_layout layout, uint16_t *xb);

/* The exact GEMM on AMX-BF16 (matmul_x3bf16): each fp32 activation is the exact sum of three bf16
 * values, hi = bf16(x), mid = bf16(x - hi), lo = bf16(x - hi - mid) (24 significand bits in 3 x 8;
 * only a term below 2^-126, flushed by AMX, is lost), so with bf16 weights every product
 * w * hi, w * mid, w * lo is exact in fp32 and their fp32 sum is a float32 dot product of the
 * same values as the FMA GEMM's, summed in another order. Row t of the three terms, in the tile
 * or pair layout, at xs, xs + plane and xs + 2 * plane (x[0, n), zeros to Kp; n = 0 for a padding row). */
void g4_xbf16_put_row_split3(const float *x, int n, int t, int Kp, size_t plane, g4_xbf16_layout layout,
                             uint16_t *xs);
/* the same on AVX512-BF16 in the tile layout (cpu/split_avx512.c; the amx table's split3_row) */
void g4_xbf16_put_row_split3_avx512(const float *x, int n, int t, int Kp, size_t plane, uint16_t *xs);
/* g4_xbf16_put_row's tile layout on AVX512-BF16 (the same bits; denormal inputs become zero) */
void g4_xbf16_put_row_tiles_avx512(const float *x, int n, int t, int Kp, uint16_t *xb);
/* Rows t0 .. t0 + 15 in the pair layout on AVX512-BF16: row t0 + i is x + i * ldx (n values, then
 * zeros to Kp) for i < rows, zeros after; nterms 1 writes g4_xbf16_put_row's bf16 (one plane),
 * 3 g4_xbf16_put_row_split3's hi, mid and lo (planes `plane` apart). t0 a multiple of 16. */
void g4_xbf16_put_pairs16_avx512(const float *x, int ldx, int rows, int n, int t0, int Kp, size_t plane, int nterms,
                                 uint16_t *xs);

/* The decode layout of the exact matmul on AMX (g4_matmul_gemv3_amx): T <= G4_GEMV_X3_MAX_ROWS
 * input rows, each split into g4_xbf16_put_row_split3's hi, mid and lo, as AMX B tiles of up to 5
 * rows each (3 x 5 planes fill 15 of a tile's 16 fp32 columns): per 32 columns of K, nb =
 * ceil(T / 5) tiles of 16 rows (column pairs k, k + 1) x 3 tc columns, tc = min(T, 5) — tile b
 * holds rows 5b .. 5b + tc - 1, column 3(t - 5b) + j row t's plane j, rows past T zeros — 12 tc
 * bytes a tile row, the tiles of a step and the steps consecutive. One tile of weight rows (A)
 * against each gives every plane of its rows at once; the dot product of row t is
 * C[.][3t'] + (C[.][3t' + 1] + C[.][3t' + 2]) of its tile. The 32-bit pair of (t, j) at columns
 * k, k + 1 (k even) is xg[g4_xbf16_gemv3_offset(t, j, k, T)], bf16(column k) in its low half. */
#define G4_GEMV_X3_TILE_ROWS 5
#define G4_GEMV_X3_MAX_ROWS 15   /* 3 B tiles, their 3 C tiles and the A tile: 7 of the 8 tiles */
static inline int g4_gemv3_tile_rows(int T) { return T < G4_GEMV_X3_TILE_ROWS ? T : G4_GEMV_X3_TILE_ROWS; }
static inline int g4_gemv3_tiles(int T) { return (T + G4_GEMV_X3_TILE_ROWS - 1) / G4_GEMV_X3_TILE_ROWS; }
static inline size_t g4_xbf16_gemv3_offset(int t, int j, int k, int T) {
    const size_t tc = (size_t)g4_gemv3_tile_rows(T), nb = (size_t)g4_gemv3_tiles(T);
    return (((size_t)(k >> 5) * nb + (size_t)(t / G4_GEMV_X3_TILE_ROWS)) * 16 + (size_t)((k & 31) >> 1)) * 3 * tc +
           (size_t)(3 * (t % G4_GEMV_X3_TILE_ROWS) + j);
}
/* 32-bit words of the layout for T rows of K columns */
static inline size_t g4_xbf16_gemv3_size(int T, int K) {
    return (size_t)(K / 32) * (size_t)g4_gemv3_tiles(T) * 16 * 3 * (size_t)g4_gemv3_tile_rows(T);
}
/* T rows of x (row stride ldx, K a multiple of 32) in that layout, the last tile's rows past T
 * zeros: portable (cpu/ref.c), and on AVX512-BF16 (cpu/split_avx512.c, the same bits but for
 * denormal inputs, which become zero) */
void g4_xbf16_put_gemv3(const float *x, int ldx, int T, int K, uint32_t *xg);
void g4_xbf16_put_gemv3_avx512(const float *x, int ldx, int T, int K, uint32_t *xg);
/* y[t][n] = W[n] . x[t] for t < T <= G4_GEMV_X3_MAX_ROWS, n in [n0, n1), from put_gemv3's xg */
void g4_matmul_gemv3_amx(const uint32_t *xg, int T, int K, const void *w, int n0, int n1, float *y, int ldy);

/* --act-q8 activation blocks for weights of type wdt: ggml's block_q8_0 (f16 d, int8 q[32]: 34 B
 * per 32), block_q8_K (float d, int8 q[256], int16 bsums[16]: 292 B per 256), block_q8_1 (f16 d,
 * f16 s = d * the quants' sum, int8 q[32]: 36 B per 32; Q4_1 / Q5_1 weights), or none for float
 * weight types (the mode leaves them alone). */
typedef enum { G4_ACT_NONE = 0, G4_ACT_Q8_0 = 1, G4_ACT_Q8_K = 2, G4_ACT_Q8_1 = 3 } g4_act_fmt;
g4_act_fmt g4_act_format(g4_dtype wdt);
size_t g4_act_row_bytes(g4_dtype wdt, int K);   /* bytes of one quantized row of K; 0 if none */
/* T rows of K floats (row stride K) → T rows of g4_act_row_bytes(wdt, K) bytes, bit-exact to
 * ggml's quantize_row_q8_0_ref / quantize_row_q8_K_ref / quantize_row_q8_1_ref. */
void g4_act_quantize(g4_dtype wdt, const float *x, int T, int K, void *dst);
/* What bounds an --act-q8 dot against the exact one (cpu/quant_bound.c): for a weight row of K
 * (a type with an activation format but Q8_1, whose f16 block sums s add an error of their own;
 * 0 returned otherwise), *w2 = the sum of its weights' squares
 * and *a2 the sum of squares of a_i = the magnitudes of the terms weight i is computed from
 * (d sc q and dmin m, or d q and the offset's d c), in double; |exact − int8 dot| <=
 * ‖w‖₂ ‖x − x̂‖₂ + γ ‖a‖₂ (‖x‖₂ + ‖x̂‖₂) with γ = (K + 64) 2⁻²⁴ / (1 − (K + 64) 2⁻²⁴). */
int g4_quant_row_norms(g4_dtype dt, const void *row, int K, double *w2, double *a2);
int g4_quant_bounded(g4_dtype dt);   /* whether g4_quant_row_norms bounds dt's int8 dots */
/* For x (K floats) and its quantized row xq (g4_act_quantize): nrm = ‖x‖₂, ‖x̂‖₂, ‖x − x̂‖₂ */
void g4_act_norms(g4_dtype wdt, const float *x, const void *xq, int K, double nrm[3]);

/* `--numerics ggml` (cpu/ggml_num.c): llama.cpp's CPU backend's float ops (ggml, x86 AVX2 + FMA
 * build) in scalar C, bit for bit: the entries of g4_kernels_ggml's table (rmsnorm, gelu_mul,
 * attend_block, rope_table / rope_apply, logits_softcap). Shapes as the kernels above. */
void g4_ggml_rmsnorm(const float *x, const float *w, float eps, int n, float *y);
void g4_ggml_gelu_mul(const float *g, const float *u, int n, float *y);
uint16_t g4_ggml_gelu_f16(uint16_t h);            /* entry h of ggml_table_gelu_f16 */
float g4_ggml_vec_dot_f32(int n, const float *x, const float *y);
float g4_ggml_expf(float x);                      /* one lane of ggml_v_expf */
void g4_ggml_attend_block(const float *q, int ldq, float *out, int ldo, int G, int P, const int *lo,
                          const int *hi, const float *K, const float *V, int cap, int D, float scale,
                          float *scores, int batched);
void g4_ggml_softcap(float *logits, int n, float cap);   /* tanh(x * (1/cap)) * cap  [n] */

/* RoPE (cpu/rope.c): transformers' table and rotation (apply_rotary_pos_emb), and llama.cpp's
 * (ggml_rope_cache_init, rotate_pairs NEOX) for --numerics ggml. cs [D]: cos of pos * inv_freq[i]
 * in [0, D/2), sin in [D/2, D); x [D], rotated in place. */
void g4_rope_table(const float *inv_freq, int D, int pos, float *cs);
void g4_rope_table_exact(float theta, const float *inv_freq, int D, int pos, float *cs);   /* the table's
                                                                                          * shape; theta unused */
void g4_rope_apply(float *x, const float *cs, int D);
void g4_rope_table_ggml(float theta, const float *inv_freq, int D, int pos, float *cs);
void g4_rope_apply_ggml(float *x, const float *cs, int D);

/* AMX-BF16 peak chains (cpu/bf16_amx.c; gemma4c bench): iters x 4 tdpbf16ps of 16 x 16 x 32
 * multiply-adds each. Only where g4_kernels_amx() is non-NULL (tile permission granted). */
float g4_amx_peak_chain(int iters, float seed);
/* The same over n values (vectorized): to bf16, and to bf16 and back to float. */
void g4_f32_to_bf16_row(const float *x, int n, uint16_t *out);
void g4_round_bf16_row(const float *x, int n, float *out);
/* Widens `n` elements of `dt` at `src` to float32 (block types: n a multiple of the block). */
void g4_to_f32(g4_dtype dt, const void *src, size_t n, float *dst);

#endif
