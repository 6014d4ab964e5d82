/* matmul.h — the matmul ops layer between a model and the kernel table: Y = X·Wᵀ for up to three
 * weight matrices sharing one parallel loop, with the input forms the kernels take (packed panels,
 * bf16 planes or pairs for AMX, the gemv3 decode layout, --act-q8's quantized rows, --prefill-bf16's
 * rounding), their scratch, and the policy that picks among them. Knows nothing of any model: the
 * caller hands it weight views and activation rows. The kernels themselves live in kernels.h. */
#ifndef G4_MATMUL_H
#define G4_MATMUL_H

#include <stddef.h>

#include "base/threadpool.h"
#include "gemma4c.h"
#include "base/dtype.h"
#include "kernels/kernels.h"

/* A weight matrix as stored: rows of `cols` elements of `dt`. */
typedef struct {
    g4_dtype dt;
    const void *data;   /* [rows][cols], row-major (the file mapping, or a rank's copy) */
    int rows, cols;
} g4_mat;

/* Bytes of a weight matrix as stored (0 for an absent one, e.g. v_proj in k_eq_v layers). */
static inline size_t g4_mat_bytes(const g4_mat *w) {
    return w->data ? g4_dtype_row_bytes(w->dt, w->cols) * (size_t)w->rows : 0;
}

/* One product of a parallel matmul: y[t * ldy + r] = x[t] · w[r] for T activation rows t.
 * x: [T][w->cols]  y: [T][ldy], columns [0, w->rows) written */
typedef struct {
    const g4_mat *w;
    const float *x;
    float *y;
    int ldy;
} g4_mm_op;

/* Inputs of at least this many rows take the exact matmul on AMX tiles (bf16 weights as three
 * bf16 planes of the input); below it, 1-15 rows (one or several slots' decode tokens) take the
 * gemv3 kernel (kernels.h matmul_gemv3), the rest the FMA kernels. From 16 rows the tiles beat the
 * FMA GEMM, which streams the weights at half the bandwidth, so a batch of decoding slots stays on
 * tiles. */
#define G4_X3_MIN_ROWS 16
/* inputs of up to this many rows (a 64-token prefill chunk, serve's default) take the AMX kernels
 * that read the weights as A tiles straight from memory, with no per-call weight pack */
#define G4_AMX_PAIRS_ROWS_DEFAULT 64
/* one row on tiles (gemv3) only below this K, bf16 rows under 8 KB (avx512.c's GEMV_ROW_BYTES):
 * over the shorter rows (q/k/v, gate/up) the tiles stream the weights faster than the FMA GEMV,
 * over the longer ones (o, down) the FMA GEMV's 4-row blocks do */
#define G4_GEMV_ONE_ROW_K_BELOW 4096

/* Inputs of 2 up to this many rows (several slots' decode tokens, a speculative verify) take the
 * table's row-invariant multi-row kernels (kernels.h matmul_rows), where it has one for the weight
 * type: each row's result is bit-identical to a one-row step's, and the weights are read once for
 * all rows; more rows (prefill chunks) the GEMM, which sums in another order. On amx, bf16 weights
 * keep gemv3 (itself row-invariant over 1-15 rows) below gemv_one_row_k_below and x3 from 16 rows. */
#define G4_ROWS_MAX_ROWS 16

/* Which input form and kernel a matmul takes, by its rows and K: the thresholds, filled once
 * (g4_matmul_policy_init) for one kernel table. A form the table lacks is never chosen. */
typedef struct {
    int x3_min_rows;            /* exact AMX GEMM (three bf16 planes) from this many rows */
    int pairs_max_rows;         /* AMX weights-as-A kernels up to this many rows (0: never) */
    int gemv_min_rows, gemv_max_rows;   /* AMX decode kernel (gemv3) over this row range
                                         * (<= G4_GEMV_X3_MAX_ROWS; max 0: never) */
    int gemv_one_row_k_below;   /* one row takes gemv3 only while K is below this: over longer
                                 * rows (o, down) the FMA GEMV's 4-row blocks stream faster than
                                 * 16-row tiles (G4_GEMV_ONE_ROW_K_BELOW); 2-15 rows over them
                                 * take matmul_rows, in the one-row FMA GEMV's order */
    int rows_max_rows;          /* matmul_rows over 2 .. this many rows (G4_ROWS_MAX_ROWS) */
} g4_matmul_policy;

/* The policy for kernel table k from the public measuring knobs (t NULL, or a field -1: the
 * default): pairs up to 64 rows, gemv3 over 1-15 rows and one row below K 4096 — on tables that
 * have those kernels (the amx table), none elsewhere; matmul_rows over 2-16 rows. */
void g4_matmul_policy_init(g4_matmul_policy *p, const g4_kernels *k, const g4_tuning *t);

typedef struct g4_matmul_ctx g4_matmul_ctx;

/* A matmul context for inputs of up to max_rows rows and max_k columns on kernel table k and
 * pool's threads, with the scratch of every input form the policy may pick, allocated here once:
 * act_q8 (--act-q8: quantized rows for quantized weights), prefill_bf16 (--prefill-bf16: a rounded
 * input, used while g4_matmul_round_bf16 is on), numerics_ggml (--numerics ggml: llama.cpp's
 * arithmetic, so none of the AMX exact forms). */
g4_status g4_matmul_ctx_new(const g4_kernels *k, g4_pool *pool, const g4_matmul_policy *p, int max_rows, int max_k,
                            int act_q8, int prefill_bf16, int numerics_ggml, g4_matmul_ctx **out);
void g4_matmul_ctx_free(g4_matmul_ctx *c);

/* Y_i = X_i · W_iᵀ for n_ops <= 3 products of T <= max_rows rows (q/k/v, gate/up share one
 * loop and, where their inputs are the same, one converted input). */
void g4_matmul(g4_matmul_ctx *c, int T, int n_ops, const g4_mm_op *ops);

/* Y = X̂ · Wᵀ for one product whose T input rows are already quantized (g4_act_quantize's
 * format for op->w->dt, in xq; op->x unused), whatever the context's act_q8: the greedy LM head's
 * pre-pass (model/lm_argmax.c). The table must have the kernel (matmul_q8[op->w->dt]). */
void g4_matmul_act_q8(g4_matmul_ctx *c, int T, const g4_mm_op *op, const void *xq);
/* While on (and the context was made with prefill_bf16), bf16 weights' inputs are rounded to
 * bf16 (--prefill-bf16's prompt rows); off by default. */
void g4_matmul_round_bf16(g4_matmul_ctx *c, int on);

/* Profiling: while set, each g4_matmul adds its kernels' wall seconds to *run_s and its input
 * rounding / splitting to *prep_s (either NULL: not timed). */
void g4_matmul_profile(g4_matmul_ctx *c, double *run_s, double *prep_s);

#endif
