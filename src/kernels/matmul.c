/* matmul.c — the matmul ops layer (matmul.h): one parallel loop over up to three products, the
 * input forms the kernel table's matmuls take and their scratch, and the policy that picks a form
 * by rows and K. Owns no kernel (kernels.h, cpu/) and knows no model. */
#include "kernels/matmul.h"

#include <stdlib.h>

#include "base/clock.h"

struct g4_matmul_ctx {
    const g4_kernels *k;
    g4_pool *pool;
    g4_matmul_policy p;
    int act_q8;                 /* --act-q8: quantized weights take quantized input rows */
    int round;                  /* this step's inputs of bf16 weights are rounded to bf16 */
    void *xq;                   /* --act-q8: [3][max_rows] quantized activation rows */
    float *xb;                  /* --prefill-bf16: one matmul input rounded to bf16, [max_rows
                                 * rounded up to 32][xb_ld] floats (or bf16 for the hardware kernels);
                                 * padding rows and columns stay zero */
    int xb_ld;                  /* row stride of xb: max_k rounded up to 32 */
    uint16_t *x3;               /* the exact GEMM on AMX: one input as three bf16 planes (kernels.h
                                 * g4_xbf16_put_row_split3), x3_plane elements apart */
    size_t x3_plane;
    uint32_t *xg;               /* decode on AMX: one input of <= gemv_max_rows rows in the gemv3
                                 * layout (kernels.h g4_xbf16_gemv3_offset) */
    float *xp;                  /* the exact GEMM's packed input (kernels.h pack_x) where the
                                 * kernel table has one: [max_rows rounded up to x_mr][max_k] */
    double *run_s, *prep_s;     /* g4_matmul_profile's counters, or NULL */
};

/* `stmt` (an input's conversion) timed into *prep_s while profiling */
#define PREP(c, stmt)                                                       \
    do {                                                                    \
        if (!(c)->prep_s) { stmt; break; }                                  \
        const double prep_t0_ = g4_now();                                   \
        stmt;                                                               \
        *(c)->prep_s += g4_now() - prep_t0_;                                \
    } while (0)

void g4_matmul_policy_init(g4_matmul_policy *p, const g4_kernels *k, const g4_tuning *t) {
    const g4_tuning none = {.amx_pairs_rows = -1, .amx_gemv_min_rows = -1, .amx_gemv_max_rows = -1,
                            .amx_gemv1_k_below = -1, .profile = -1, .full_logits = -1};
    if (!t) t = &none;
    *p = (g4_matmul_policy){.x3_min_rows = G4_X3_MIN_ROWS, .rows_max_rows = G4_ROWS_MAX_ROWS};
    if (k->matmul_xbf16_pairs) p->pairs_max_rows = t->amx_pairs_rows >= 0 ? t->amx_pairs_rows : G4_AMX_PAIRS_ROWS_DEFAULT;
    if (k->matmul_gemv3) {
        /* decode on tiles as well: 2-15 slots at once (up to 2x the FMA kernels) and one slot's
         * token over rows under 8 KB (q/k/v, gate/up, the LM head); one row over longer rows (o,
         * down) stays on the FMA kernel */
        int lo = t->amx_gemv_min_rows >= 0 ? t->amx_gemv_min_rows : 1;
        int hi = t->amx_gemv_max_rows >= 0 ? t->amx_gemv_max_rows : G4_GEMV_X3_MAX_ROWS;
        if (lo < 1) lo = 1;
        if (hi > G4_GEMV_X3_MAX_ROWS) hi = G4_GEMV_X3_MAX_ROWS;
        p->gemv_min_rows = lo;
        p->gemv_max_rows = hi >= lo ? hi : 0;
        p->gemv_one_row_k_below = t->amx_gemv1_k_below >= 0 ? t->amx_gemv1_k_below : G4_GEMV_ONE_ROW_K_BELOW;
    }
}

static void prepare_thread_task(void *ctx, int thread) {
    (void)thread;
    ((const g4_kernels *)ctx)->prepare_thread();
}

g4_status g4_matmul_ctx_new(const g4_kernels *k, g4_pool *pool, const g4_matmul_policy *p, int max_rows, int max_k,
                            int act_q8, int prefill_bf16, int numerics_ggml, g4_matmul_ctx **out) {
    *out = NULL;
    g4_matmul_ctx *c = calloc(1, sizeof *c);
    if (!c) return g4_fail(G4_ERR_NOMEM, "out of memory");
    c->k = k;
    c->pool = pool;
    c->p = *p;
    c->act_q8 = act_q8;
    const size_t R = (size_t)max_rows, K = (size_t)max_k;
    g4_status st = G4_OK;
    if (act_q8) {   /* --act-q8: up to 3 distinct matmul inputs per call, quantized */
        /* the larger of a Q8_0 and a Q8_K row of the widest input, in whole 256-blocks */
        const int Kb = (int)((K + 255) / 256 * 256);
        const size_t r0 = g4_act_row_bytes(G4_DT_Q8_0, Kb), rk = g4_act_row_bytes(G4_DT_Q4_K, Kb);
        const size_t row = r0 > rk ? r0 : rk;
        if (!(c->xq = malloc(3 * R * row))) {
            st = g4_fail(G4_ERR_NOMEM, "out of memory allocating the --act-q8 scratch");
            goto fail;
        }
    }
    if (prefill_bf16) {   /* --prefill-bf16: one rounded input, rows and columns padded to 32 */
        c->xb_ld = (int)((K + 31) / 32 * 32);
        if (!(c->xb = calloc((R + 31) / 32 * 32 * (size_t)c->xb_ld, sizeof(float)))) {
            st = g4_fail(G4_ERR_NOMEM, "out of memory allocating the --prefill-bf16 scratch");
            goto fail;
        }
    }
    if (k->matmul_x3bf16 && !numerics_ggml && max_rows >= p->x3_min_rows) {
        c->x3_plane = (R + 31) / 32 * 32 * ((K + 31) / 32 * 32);
        if (!(c->x3 = aligned_alloc(64, (3 * c->x3_plane * sizeof(uint16_t) + 63) & ~(size_t)63))) {
            st = g4_fail(G4_ERR_NOMEM, "out of memory allocating the AMX exact GEMM's input scratch");
            goto fail;
        }
    }
    if (k->matmul_gemv3 && p->gemv_max_rows > 0 && !numerics_ggml) {
        const size_t rows = R < (size_t)p->gemv_max_rows ? R : (size_t)p->gemv_max_rows;
        const size_t words = g4_xbf16_gemv3_size((int)rows, (int)((K + 31) / 32 * 32));
        if (!(c->xg = aligned_alloc(64, (words * sizeof(uint32_t) + 63) & ~(size_t)63))) {
            st = g4_fail(G4_ERR_NOMEM, "out of memory allocating the AMX decode matmul's input scratch");
            goto fail;
        }
    }
    if (k->pack_x && !act_q8 && max_rows >= 4) {   /* shared by every task of an exact GEMM */
        const size_t mr = (size_t)k->x_mr;
        if (!(c->xp = aligned_alloc(64, ((R + mr - 1) / mr * mr * K * sizeof(float) + 63) & ~(size_t)63))) {
            st = g4_fail(G4_ERR_NOMEM, "out of memory allocating the GEMM's packed-input scratch");
            goto fail;
        }
    }
    if (k->prepare_thread && pool) g4_pool_run_each(pool, prepare_thread_task, (void *)k);
    *out = c;
    return G4_OK;
fail:
    g4_matmul_ctx_free(c);
    return st;
}

void g4_matmul_ctx_free(g4_matmul_ctx *c) {
    if (!c) return;
    free(c->xq); free(c->xb); free(c->x3); free(c->xg); free(c->xp);
    free(c);
}

void g4_matmul_round_bf16(g4_matmul_ctx *c, int on) { c->round = on && c->xb; }

void g4_matmul_profile(g4_matmul_ctx *c, double *run_s, double *prep_s) {
    c->run_s = run_s;
    c->prep_s = prep_s;
}

enum { MM_MAX_TASKS = 256 };   /* the guided split below stays well under it at any thread count */

/* Below this many multiply-adds a product runs on the calling thread. Handing a loop to workers
 * that spin between loops costs 1-3 us, the time of ~20K multiply-adds of the slowest decode
 * kernels on one core; above 64K the second thread pays for itself. (At 1M, a small model's
 * q/k/v and o products — the real Gemma 3 270M's 983K and 655K — ran on one thread while the
 * others spun: a tenth of its decode step.) */
enum { MM_INLINE_MACS = 1 << 16 };

/* The ops' rows laid end to end ("virtual rows"); task i covers [bound[i], bound[i+1]), which
 * may span two ops. */
typedef struct {
    const g4_kernels *k;
    int T;
    g4_mm_op ops[3];
    const void *xq[3];               /* --act-q8: op i's input quantized for its weight type, or NULL */
    const uint16_t *xb[3];           /* --prefill-bf16 on bf16 hardware: op i's input in bf16, or NULL */
    const float *xp[3];              /* the exact GEMM's packed input (kernels.h pack_x), or NULL */
    const uint16_t *x3[3];           /* the exact GEMM on AMX: op i's input as three bf16 planes, or NULL */
    size_t x3_plane;
    const uint32_t *xg[3];           /* decode on AMX: op i's input in the gemv3 layout, or NULL */
    int rows[3];                     /* op i takes the table's matmul_rows (row-invariant decode) */
    int xb_ld;
    int pairs;                       /* xb / x3 in the pair layout, for the table's *_pairs kernels */
    int n_ops;
    int op_end[3];                   /* cumulative row counts per op */
    int bound[MM_MAX_TASKS + 1];
} mm_job;

static void mm_task(void *ctx, int task, int thread) {
    (void)thread;
    mm_job *j = ctx;
    const int r0 = j->bound[task], r1 = j->bound[task + 1];
    for (int o = 0, base = 0; o < j->n_ops; base = j->op_end[o], o++) {
        int a = r0 > base ? r0 - base : 0, b = (r1 < j->op_end[o] ? r1 : j->op_end[o]) - base;
        if (a >= b) continue;
        const g4_mm_op *op = &j->ops[o];
        if (j->xq[o]) j->k->matmul_q8[op->w->dt](j->xq[o], j->T, op->w->cols, op->w->data, a, b, op->y, op->ldy);
        else if (j->xb[o])
            (j->pairs ? j->k->matmul_xbf16_pairs : j->k->matmul_xbf16)(j->xb[o], j->xb_ld, j->T, op->w->cols, op->w->data,
                                                                      a, b, op->y, op->ldy);
        else if (j->xg[o]) j->k->matmul_gemv3(j->xg[o], j->T, op->w->cols, op->w->data, a, b, op->y, op->ldy);
        else if (j->x3[o])
            (j->pairs ? j->k->matmul_x3bf16_pairs : j->k->matmul_x3bf16)(j->x3[o], j->x3_plane, j->T, op->w->cols,
                                                                        op->w->data, a, b, op->y, op->ldy);
        else if (j->rows[o]) j->k->matmul_rows[op->w->dt](op->x, j->T, op->w->cols, op->w->data, a, b, op->y, op->ldy);
        else if (j->xp[o]) j->k->matmul_xp[op->w->dt](op->x, j->xp[o], j->T, op->w->cols, op->w->data, a, b, op->y, op->ldy);
        else j->k->matmul[op->w->dt](op->x, j->T, op->w->cols, op->w->data, a, b, op->y, op->ldy);
    }
}

/* the two products read the same input (q/k/v, gate/up) */
static int ops_share_input(const g4_mm_op *a, const g4_mm_op *b) {
    return a->x == b->x && a->w->cols == b->w->cols;
}

/* A pass over n items (rows, panels) split over the pool in up to tasks_per_thread tasks a thread,
 * each of *per_task items (the task function reads it from its job), or in one call where there
 * is one thread or one task: the per-input passes before a matmul (rounding, splitting, packing). */
static void split_over_pool(g4_pool *pool, int n, int tasks_per_thread, int *per_task, g4_task_fn fn, void *ctx) {
    const int nth = g4_pool_size(pool), want = tasks_per_thread * nth;
    *per_task = (n + want - 1) / want;
    const int n_tasks = *per_task ? (n + *per_task - 1) / *per_task : 0;
    if (nth == 1 || n_tasks <= 1) {
        *per_task = n;
        fn(ctx, 0, 0);
    } else {
        g4_pool_run(pool, n_tasks, fn, ctx);
    }
}

/* Rows [16 g0, 16 g1) of a matmul input in the pair layout (nterms 1: bf16-rounded; 3: the exact
 * split's three planes), rows >= T zero, by the table's 16-row writer (a table with the *_pairs
 * kernels has it) */
static void put_pairs_groups(const g4_kernels *k, const float *x, int T, int K, int g0, int g1, size_t plane,
                             int nterms, uint16_t *dst) {
    const int Kp = (K + 31) & ~31;
    for (int g = g0; g < g1; g++) {
        const int t0 = 16 * g, rows = T - t0 < 0 ? 0 : T - t0 < 16 ? T - t0 : 16;
        k->put_pairs16(x + (size_t)(rows ? t0 : 0) * K, K, rows, K, t0, Kp, plane, nterms, dst);
    }
}

/* --prefill-bf16's rounding of one matmul input, split over the pool by rows: alone on the
 * driving thread it was a long serial pass (every element of every layer's inputs). */
typedef struct {
    const g4_kernels *k;
    const float *x;
    void *dst;
    int T, K, ld, rows, per_task;   /* rows: items of the split (16-row groups in the pair layout) */
    int hw;                    /* bf16 padded to 32 x 32 blocks, in `layout` */
    g4_xbf16_layout layout;
} round_job;

static void round_task(void *ctx, int task, int thread) {
    (void)thread;
    const round_job *j = ctx;
    const int r0 = task * j->per_task, r1 = r0 + j->per_task < j->rows ? r0 + j->per_task : j->rows;
    const int Kp = (j->K + 31) & ~31;
    if (j->layout == G4_XBF16_PAIRS) {
        put_pairs_groups(j->k, j->x, j->T, j->K, r0, r1, 0, 1, j->dst);
        return;
    }
    for (int t = r0; t < r1; t++) {
        const float *x = j->x + (size_t)t * j->K;
        if (j->hw && j->layout == G4_XBF16_TILES && j->k->put_row_tiles) {
            j->k->put_row_tiles(x, t < j->T ? j->K : 0, t, Kp, j->dst);
        } else if (j->hw) {
            g4_xbf16_put_row(x, t < j->T ? j->K : 0, t, Kp, j->ld, j->layout, j->dst);
        } else {
            g4_round_bf16_row(x, j->K, (float *)j->dst + (size_t)t * j->K);
        }
    }
}

/* The exact GEMM's input packed once (kernels.h pack_x) for every task, split over the pool by
 * micro-panels; ops after the first take it where they share op 0's input (q/k/v, gate/up), and
 * their plain rows otherwise. */
typedef struct {
    const g4_kernels *k;
    const float *x;
    float *xp;
    int T, K, per_task, n_panels;
} pack_job;

static void pack_task(void *ctx, int task, int thread) {
    (void)thread;
    const pack_job *j = ctx;
    const int b0 = task * j->per_task, b1 = b0 + j->per_task < j->n_panels ? b0 + j->per_task : j->n_panels;
    j->k->pack_x(j->x, j->T, j->K, b0, b1, j->xp);
}

/* The exact GEMM on AMX-BF16 (kernels.h g4_xbf16_put_row_split3): op 0's input split into three
 * bf16 planes once, over the pool by rows, for the ops with bf16 weights that share it (the
 * others take their plain rows): the exact prefill on tiles instead of the FMA GEMM, well over
 * half again as fast. */
typedef struct {
    const g4_kernels *k;
    g4_xbf16_layout layout;          /* tiles, or pairs for the *_pairs kernel */
    const float *x;
    uint16_t *xs;
    size_t plane;
    int T, K, rows, per_task;        /* rows: items of the split (16-row groups in the pair layout) */
} split_job;

static void split_task(void *ctx, int task, int thread) {
    (void)thread;
    const split_job *j = ctx;
    const int r0 = task * j->per_task, r1 = r0 + j->per_task < j->rows ? r0 + j->per_task : j->rows;
    const int Kp = (j->K + 31) & ~31;
    if (j->layout == G4_XBF16_PAIRS) {
        put_pairs_groups(j->k, j->x, j->T, j->K, r0, r1, j->plane, 3, j->xs);
        return;
    }
    for (int t = r0; t < r1; t++) {
        const float *x = j->x + (size_t)(t < j->T ? t : 0) * j->K;
        if (j->k->split3_row) j->k->split3_row(x, t < j->T ? j->K : 0, t, Kp, j->plane, j->xs);
        else g4_xbf16_put_row_split3(x, t < j->T ? j->K : 0, t, Kp, j->plane, G4_XBF16_TILES, j->xs);
    }
}

/* op i takes op 0's input as the AMX kernels' bf16 planes: bf16 weights, the same input, and
 * neither --act-q8's nor --prefill-bf16's input of its own */
static int takes_op0_planes(const mm_job *j, int i) {
    return !j->xq[i] && !j->xb[i] && j->ops[i].w->dt == G4_DT_BF16 && ops_share_input(&j->ops[i], &j->ops[0]);
}

static int split_inputs(g4_matmul_ctx *c, mm_job *j, int T) {
    const g4_mm_op *op0 = &j->ops[0];
    if (!c->x3 || T < c->p.x3_min_rows || op0->w->dt != G4_DT_BF16 || j->xq[0] || j->xb[0]) return 0;
    split_job sj = {.k = c->k, .layout = j->pairs ? G4_XBF16_PAIRS : G4_XBF16_TILES, .x = op0->x, .xs = c->x3,
                    .plane = c->x3_plane, .T = T, .K = op0->w->cols, .rows = (T + 31) & ~31};
    if (j->pairs) sj.rows /= 16;
    PREP(c, split_over_pool(c->pool, sj.rows, 4, &sj.per_task, split_task, &sj));
    j->x3_plane = c->x3_plane;
    for (int i = 0; i < j->n_ops; i++)
        if (takes_op0_planes(j, i)) j->x3[i] = c->x3;
    return 1;
}

/* T rows over weights of type dt may take the table's row-invariant multi-row kernel */
static int takes_rows(const g4_matmul_ctx *c, int T, g4_dtype dt) {
    return T >= 2 && T <= c->p.rows_max_rows && c->k->matmul_rows[dt];
}

/* Decode on AMX (kernels.h matmul_gemv3): op 0's input in the gemv3 layout, written once on the
 * calling thread (K / 32 steps of three 16-lane scatters per row), for the ops with bf16 weights
 * that share it; 0 where the call is not one for that kernel. */
static int gemv_inputs(g4_matmul_ctx *c, mm_job *j, int T) {
    const g4_mm_op *op0 = &j->ops[0];
    const int K = op0->w->cols;
    if (!c->xg || T < c->p.gemv_min_rows || T > c->p.gemv_max_rows || op0->w->dt != G4_DT_BF16 || K % 32 || j->xq[0] || j->xb[0]) return 0;
    /* long rows: the FMA GEMV, and 2+ rows its row-invariant multi-row form (matmul_rows) */
    if (K >= c->p.gemv_one_row_k_below && (T == 1 || takes_rows(c, T, G4_DT_BF16))) return 0;
    c->k->put_gemv3(op0->x, K, T, K, c->xg);
    for (int i = 0; i < j->n_ops; i++)
        if (takes_op0_planes(j, i)) j->xg[i] = c->xg;
    return 1;
}

static void pack_inputs(g4_matmul_ctx *c, mm_job *j, int T) {
    const g4_mm_op *op0 = &j->ops[0];
    const int K = op0->w->cols;
    if (!c->xp || T < 4 || K % 8 || !c->k->matmul_xp[op0->w->dt] || j->xq[0] || j->xb[0] || j->rows[0]) return;
    pack_job pj = {.k = c->k, .x = op0->x, .xp = c->xp, .T = T, .K = K,
                   .n_panels = (T + c->k->x_mr - 1) / c->k->x_mr};
    split_over_pool(c->pool, pj.n_panels, 2, &pj.per_task, pack_task, &pj);
    for (int i = 0; i < j->n_ops; i++)
        if (!j->xq[i] && !j->xb[i] && j->k->matmul_xp[j->ops[i].w->dt] && ops_share_input(&j->ops[i], op0))
            j->xp[i] = c->xp;
}

/* --prefill-bf16: op i's input rounded to bf16, once for the ops that share it (q/k/v, gate/up):
 * as bf16 rows of stride xb_ld for the kernel table's bf16 hardware matmul (zero-padded to whole
 * 32 x 32 tiles), else as floats (exactly representable, so the fp32 kernels compute the same
 * products) that replace op i's x. */
static void round_input_bf16(g4_matmul_ctx *c, mm_job *j, const g4_mm_op *ops, int i, int T) {
    for (int p = 0; p < i; p++)
        if (ops[p].w->dt == G4_DT_BF16 && ops_share_input(&ops[p], &ops[i])) {
            j->xb[i] = j->xb[p];
            j->ops[i].x = j->ops[p].x;
            return;
        }
    const int hw = c->k->matmul_xbf16 != NULL;
    round_job rj = {.k = c->k, .x = ops[i].x, .dst = c->xb, .T = T, .K = ops[i].w->cols, .ld = c->xb_ld,
                    .rows = hw ? (T + 31) & ~31 : T, .hw = hw,
                    .layout = !hw ? G4_XBF16_ROWS : j->pairs ? G4_XBF16_PAIRS : c->k->xbf16_layout};
    if (rj.layout == G4_XBF16_PAIRS) rj.rows /= 16;
    PREP(c, split_over_pool(c->pool, rj.rows, 4, &rj.per_task, round_task, &rj));
    if (hw) {
        j->xb[i] = (const uint16_t *)c->xb;
        j->xb_ld = rj.layout != G4_XBF16_ROWS ? (rj.K + 31) & ~31 : c->xb_ld;
    } else {
        j->ops[i].x = c->xb;
    }
}

static void matmul_run(g4_matmul_ctx *c, int T, int n_ops, const g4_mm_op *ops, const void *xq_given);

void g4_matmul(g4_matmul_ctx *c, int T, int n_ops, const g4_mm_op *ops) { matmul_run(c, T, n_ops, ops, NULL); }

void g4_matmul_act_q8(g4_matmul_ctx *c, int T, const g4_mm_op *op, const void *xq) { matmul_run(c, T, 1, op, xq); }

/* Y_i = X_i · W_iᵀ for up to three matrices sharing one parallel loop (q/k/v, gate/up).
 * Guided split: tasks shrink from ~1/(3 x threads) of the rows down to a floor, so each thread
 * streams long contiguous ranges (decode is a pure weight stream, and every task start costs
 * the prefetchers a ramp-up) while the last tasks are small enough that threads finish within
 * a few hundred rows of each other; tasks are claimed dynamically, so a thread that other
 * tenants preempt holds at most the share it claimed. Boundaries fall on whole panels of each op.
 * xq_given: ops[0]'s input already quantized (g4_matmul_act_q8). */
static void matmul_run(g4_matmul_ctx *c, int T, int n_ops, const g4_mm_op *ops, const void *xq_given) {
    /* short inputs on AMX: the kernels that take the weights as A tiles, their input in pairs */
    mm_job j = {.k = c->k, .T = T, .n_ops = n_ops,
                .pairs = c->k->matmul_xbf16_pairs && T <= c->p.pairs_max_rows};
    int total = 0;
    uint8_t *xq = c->xq;   /* --act-q8 scratch: room for 3 distinct inputs of max_rows rows */
    for (int i = 0; i < n_ops; i++) {
        j.ops[i] = ops[i];
        total += ops[i].w->rows;
        j.op_end[i] = total;
        const g4_dtype dt = ops[i].w->dt;
        j.xq[i] = NULL;
        j.xb[i] = NULL;
        j.xp[i] = NULL;
        j.x3[i] = NULL;
        j.xg[i] = NULL;
        if (c->round && dt == G4_DT_BF16) round_input_bf16(c, &j, ops, i, T);
        if (xq_given) {
            j.xq[i] = xq_given;
            continue;
        }
        if (!c->act_q8 || !c->k->matmul_q8[dt]) continue;   /* float weights: exact path */
        /* each distinct input is quantized once (q/k/v share one, gate/up share one) */
        for (int p = 0; p < i && !j.xq[i]; p++)
            if (j.xq[p] && ops_share_input(&ops[p], &ops[i]) &&
                g4_act_format(ops[p].w->dt) == g4_act_format(dt))
                j.xq[i] = j.xq[p];
        if (!j.xq[i]) {
            c->k->quantize_act(dt, ops[i].x, T, ops[i].w->cols, xq);
            j.xq[i] = xq;
            xq += (size_t)T * g4_act_row_bytes(dt, ops[i].w->cols);
        }
    }
    const int amx_form = gemv_inputs(c, &j, T) || split_inputs(c, &j, T);
    for (int i = 0; i < n_ops; i++)   /* the rest of a decode-sized step: row-invariant kernels */
        j.rows[i] = !j.xq[i] && !j.xb[i] && !j.xg[i] && !j.x3[i] && takes_rows(c, T, ops[i].w->dt);
    if (!amx_form) pack_inputs(c, &j, T);
    const int nth = g4_pool_size(c->pool);
    /* floor: 64 rows for the weight stream of decode (>= 96 KB at K = 1536), 32 for the GEMM */
    const int floor_rows = T < 4 ? 64 : 32;
    /* task boundaries on whole panels: 16 rows (the GEMM's panel; the GEMV's 4-row blocks; the
     * decode tiles' 16-row blocks), 32 for the bf16 hardware matmul, whose 32-row panels a
     * 16-row edge would half waste */
    const int snap = j.xb[0] || j.x3[0] ? 32 : 16;
    int n = 0;
    for (int r = 0, o = 0; r < total && n < MM_MAX_TASKS; n++) {
        j.bound[n] = r;
        int left = total - r, sz = (left + 3 * nth - 1) / (3 * nth);
        if (sz < floor_rows) sz = floor_rows;
        if (n == MM_MAX_TASKS - 1 || sz > left) sz = left;
        r += sz;
        /* snap to a multiple of `snap` rows from the start of the op it falls in (TP shards
         * need not be multiples of it, so the grid restarts at every op) */
        while (o < n_ops - 1 && r >= j.op_end[o]) o++;
        const int base = o ? j.op_end[o - 1] : 0;
        if (r < j.op_end[o]) {
            const int snapped = base + (r - base + snap - 1) / snap * snap;
            r = snapped < j.op_end[o] ? snapped : j.op_end[o];
        }
    }
    j.bound[n] = total;
    double macs = 0;
    for (int i = 0; i < n_ops; i++) macs += (double)ops[i].w->rows * ops[i].w->cols * T;
    const double t0 = c->run_s ? g4_now() : 0;
    if (macs < MM_INLINE_MACS || nth == 1) {
        j.bound[1] = total;
        mm_task(&j, 0, 0);
    } else {
        g4_pool_run(c->pool, n, mm_task, &j);
    }
    if (c->run_s) *c->run_s += g4_now() - t0;
}

