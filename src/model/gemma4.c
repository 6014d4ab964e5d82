/* gemma4.c — one forward pass of the Gemma 4 unified text stack over R rows (a prefill chunk of
 * one slot, or one decode token from each of several slots), mirroring
 * transformers' Gemma4UnifiedTextModel in float32: embed*sqrt(H) → per layer [rmsnorm → q/k/v →
 * q_norm/k_norm/v_norm(no scale) → RoPE → attention (scale 1.0, sliding or full causal mask) →
 * o_proj → post-attn norm + residual → pre-ffw norm → gated GELU-tanh MLP → post-ffw norm +
 * residual → × layer_scalar] → final norm → logits. Does not apply the softcap (see g4_softcap),
 * except under --numerics ggml, which mirrors llama.cpp's CPU arithmetic instead of transformers'
 * float32 (kernels/cpu/ggml_num.c; rmsnorm and gelu_mul come from the model's kernel table). */
#include <math.h>
#include <string.h>

#include "base/clock.h"
#include "model/model.h"
#include "model/rope.h"

/* G4_PROFILE: `stmt` timed into phase `ph` of this step's kind (m->prof_s; one-row or multi-row) */
#define PROF(m, ph, stmt)                                                   \
    do {                                                                    \
        if (!(m)->prof) { stmt; break; }                                    \
        const double prof_t0_ = g4_now();                                   \
        stmt;                                                               \
        (m)->prof_s[(m)->prof_kind][ph] += g4_now() - prof_t0_;             \
    } while (0)

/* ---------------------------------------------------------------- parallel matmul */

enum { MM_MAX_TASKS = 256 };   /* ~45 for the LM head at 2 threads, ~120 at 8 */

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
        else if (j->xp[o]) j->k->matmul_xp[op->w->dt](op->x, j->xp[o], j->T, op->w->cols, op->w->data, a, b, op->y, op->ldy);
        else j->k->matmul[op->w->dt](op->x, j->T, op->w->cols, op->w->data, a, b, op->y, op->ldy);
    }
}

/* Y_i = X_i · W_iᵀ for up to three matrices sharing one parallel loop (q/k/v, gate/up).
 * Guided split: tasks shrink from ~1/(3 x threads) of the rows down to a floor, so each thread
 * streams long contiguous ranges (decode is a pure weight stream, and every task start costs
 * the prefetchers a ramp-up) while the last tasks are small enough that threads finish within
 * a few hundred rows of each other; tasks are claimed dynamically, so a thread that other
 * tenants preempt holds at most the share it claimed. Boundaries fall on whole panels of each op. */
static int ops_share_input(const g4_mm_op *a, const g4_mm_op *b) {
    return a->x == b->x && a->w->cols == b->w->cols;
}

/* A pass over n items (rows, panels) split over the pool in up to tasks_per_thread tasks a thread,
 * each of *per_task items (the task function reads it from its job), or in one call where there
 * is one thread or one task: the per-input passes before a matmul (rounding, splitting, packing). */
static void split_over_pool(g4_model *m, int n, int tasks_per_thread, int *per_task, g4_task_fn fn, void *ctx) {
    const int nth = g4_pool_size(m->pool), want = tasks_per_thread * nth;
    *per_task = (n + want - 1) / want;
    const int n_tasks = *per_task ? (n + *per_task - 1) / *per_task : 0;
    if (nth == 1 || n_tasks <= 1) {
        *per_task = n;
        fn(ctx, 0, 0);
    } else {
        g4_pool_run(m->pool, n_tasks, fn, ctx);
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
 * driving thread it was a serial pass of ~3.4 M conversions per layer and 256-row chunk. */
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
 * others take their plain rows). On a 2-core Xeon with AMX it took the exact prefill of the bench
 * model from 160 to 259 tok/s at 64 tokens and from 190 to 292 at 512 (bench/RESULTS.md). */
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

static int split_inputs(g4_model *m, mm_job *j, int T) {
    const g4_mm_op *op0 = &j->ops[0];
    if (!m->x3 || T < G4_X3_MIN_ROWS || op0->w->dt != G4_DT_BF16 || j->xq[0] || j->xb[0]) return 0;
    split_job sj = {.k = m->k, .layout = j->pairs ? G4_XBF16_PAIRS : G4_XBF16_TILES, .x = op0->x, .xs = m->x3,
                    .plane = m->x3_plane, .T = T, .K = op0->w->cols, .rows = (T + 31) & ~31};
    if (j->pairs) sj.rows /= 16;
    PROF(m, G4_PROF_ROUND, split_over_pool(m, sj.rows, 4, &sj.per_task, split_task, &sj));
    j->x3_plane = m->x3_plane;
    for (int i = 0; i < j->n_ops; i++)
        if (takes_op0_planes(j, i)) j->x3[i] = m->x3;
    return 1;
}

/* Decode on AMX (kernels.h matmul_gemv3): op 0's input in the gemv3 layout, written once on the
 * calling thread (K / 32 steps of three 16-lane scatters per row), for the ops with bf16 weights
 * that share it; 0 where the call is not one for that kernel. */
static int gemv_inputs(g4_model *m, mm_job *j, int T) {
    const g4_mm_op *op0 = &j->ops[0];
    const int K = op0->w->cols;
    if (!m->xg || T < m->k->gemv_min_rows || T > m->k->gemv_max_rows || op0->w->dt != G4_DT_BF16 || K % 32 || j->xq[0] || j->xb[0]) return 0;
    if (T == 1 && K >= m->k->gemv_one_row_k_below) return 0;   /* long rows: the FMA GEMV */
    m->k->put_gemv3(op0->x, K, T, K, m->xg);
    for (int i = 0; i < j->n_ops; i++)
        if (takes_op0_planes(j, i)) j->xg[i] = m->xg;
    return 1;
}

static void pack_inputs(g4_model *m, mm_job *j, int T) {
    const g4_mm_op *op0 = &j->ops[0];
    const int K = op0->w->cols;
    if (!m->xp || T < 4 || K % 8 || !m->k->matmul_xp[op0->w->dt] || j->xq[0] || j->xb[0]) return;
    pack_job pj = {.k = m->k, .x = op0->x, .xp = m->xp, .T = T, .K = K,
                   .n_panels = (T + m->k->x_mr - 1) / m->k->x_mr};
    split_over_pool(m, pj.n_panels, 2, &pj.per_task, pack_task, &pj);
    for (int i = 0; i < j->n_ops; i++)
        if (!j->xq[i] && !j->xb[i] && j->k->matmul_xp[j->ops[i].w->dt] && ops_share_input(&j->ops[i], op0))
            j->xp[i] = m->xp;
}

/* --prefill-bf16: op i's input rounded to bf16, once for the ops that share it (q/k/v, gate/up):
 * as bf16 rows of stride xb_ld for the kernel table's bf16 hardware matmul (zero-padded to whole
 * 32 x 32 tiles), else as floats (exactly representable, so the fp32 kernels compute the same
 * products) that replace op i's x. */
static void round_input_bf16(g4_model *m, mm_job *j, const g4_mm_op *ops, int i, int T) {
    for (int p = 0; p < i; p++)
        if (ops[p].w->dt == G4_DT_BF16 && ops_share_input(&ops[p], &ops[i])) {
            j->xb[i] = j->xb[p];
            j->ops[i].x = j->ops[p].x;
            return;
        }
    const int hw = m->k->matmul_xbf16 != NULL;
    round_job rj = {.k = m->k, .x = ops[i].x, .dst = m->xb, .T = T, .K = ops[i].w->cols, .ld = m->xb_ld,
                    .rows = hw ? (T + 31) & ~31 : T, .hw = hw,
                    .layout = !hw ? G4_XBF16_ROWS : j->pairs ? G4_XBF16_PAIRS : m->k->xbf16_layout};
    if (rj.layout == G4_XBF16_PAIRS) rj.rows /= 16;
    PROF(m, G4_PROF_ROUND, split_over_pool(m, rj.rows, 4, &rj.per_task, round_task, &rj));
    if (hw) {
        j->xb[i] = (const uint16_t *)m->xb;
        j->xb_ld = rj.layout != G4_XBF16_ROWS ? (rj.K + 31) & ~31 : m->xb_ld;
    } else {
        j->ops[i].x = m->xb;
    }
}

void g4_matmul_multi(g4_model *m, int T, int n_ops, const g4_mm_op *ops) {
    /* short inputs on AMX: the kernels that take the weights as A tiles, their input in pairs */
    mm_job j = {.k = m->k, .T = T, .n_ops = n_ops,
                .pairs = m->k->matmul_xbf16_pairs && T <= m->k->pairs_max_rows};
    int total = 0;
    uint8_t *xq = m->xq;   /* --act-q8 scratch: room for 3 distinct inputs of max_rows rows */
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
        if (m->round_bf16 && dt == G4_DT_BF16) round_input_bf16(m, &j, ops, i, T);
        if (!m->opts.act_q8 || !m->k->matmul_q8[dt]) continue;   /* float weights: exact path */
        /* each distinct input is quantized once (q/k/v share one, gate/up share one) */
        for (int p = 0; p < i && !j.xq[i]; p++)
            if (j.xq[p] && ops_share_input(&ops[p], &ops[i]) &&
                g4_act_format(ops[p].w->dt) == g4_act_format(dt))
                j.xq[i] = j.xq[p];
        if (!j.xq[i]) {
            m->k->quantize_act(dt, ops[i].x, T, ops[i].w->cols, xq);
            j.xq[i] = xq;
            xq += (size_t)T * g4_act_row_bytes(dt, ops[i].w->cols);
        }
    }
    if (!gemv_inputs(m, &j, T) && !split_inputs(m, &j, T)) pack_inputs(m, &j, T);
    const int nth = g4_pool_size(m->pool);
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
    /* below ~1M multiply-adds a wake-up of the other threads costs more than it saves */
    double macs = 0;
    for (int i = 0; i < n_ops; i++) macs += (double)ops[i].w->rows * ops[i].w->cols * T;
    const double t0 = m->prof && m->prof_mm >= 0 ? g4_now() : 0;
    if (macs < (1 << 20) || nth == 1) {
        j.bound[1] = total;
        mm_task(&j, 0, 0);
    } else {
        g4_pool_run(m->pool, n, mm_task, &j);
    }
    if (t0 > 0) m->prof_s[m->prof_kind][m->prof_mm] += g4_now() - t0;
}

/* g4_matmul_multi, timed by G4_PROFILE as `phase` */
static void matmul_phase(g4_model *m, int phase, int T, int n_ops, const g4_mm_op *ops) {
    m->prof_mm = phase;
    g4_matmul_multi(m, T, n_ops, ops);
    m->prof_mm = -1;
}

static void matmul1(g4_model *m, int phase, int T, const g4_mat *w, const float *x, float *y) {
    g4_mm_op op = {w, x, y, w->rows};
    matmul_phase(m, phase, T, 1, &op);
}

/* ---------------------------------------------------------------- attention */

/* Attention runs as tasks of (block of up to P consecutive rows of one slot, KV head g, sub-group
 * of Gs of the heads sharing g): attend_block reads that head's K and V once per task, instead of
 * once per (row, head). Gs x P <= m->att_rows (the per-thread scores scratch). */
typedef struct {
    g4_model *m;
    const g4_layer *L;
    int R, P, Gs, n_sub, n_blocks;
    int batched;                     /* --numerics ggml: llama.cpp's batch had >= 2 tokens */
    const int *slots, *pos;
} att_job;

static inline float *slot_k(g4_model *m, int slot, const g4_layer *L) {
    return m->kv + (size_t)slot * m->slot_floats + L->kv_offset;
}

/* Denormals flushed to zero (MXCSR FTZ | DAZ) while a task attends natively: a softmax's tail
 * probabilities and their products with V fall below FLT_MIN, and Intel cores compute every
 * denormal operand or result through a microcode assist (a 512-token prefill of the random-weight
 * bench model spent 40% of its attention there: 0.43 -> 0.26 s on a Xeon with AMX). A flushed
 * term is < 2^-126 where each row's sum holds its largest term (probability >= 1 / span), far
 * below float resolution. Not for --numerics ggml, which keeps llama.cpp's arithmetic. */
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
static inline unsigned flush_denormals_begin(void) {
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040);   /* FTZ (bit 15) | DAZ (bit 6) */
    return csr;
}
static inline void flush_denormals_end(unsigned csr) { _mm_setcsr(csr); }
#else
static inline unsigned flush_denormals_begin(void) { return 0; }
static inline void flush_denormals_end(unsigned csr) { (void)csr; }
#endif

static void att_task(void *ctx, int task, int thread) {
    att_job *j = ctx;
    g4_model *m = j->m;
    const g4_layer *L = j->L;
    const int Hq = L->n_q, D = L->head_dim, cap = L->kv_cap, G = Hq / L->n_kv;   /* rank-local group size */
    const int per_block = L->n_kv * j->n_sub;
    const int b = j->n_blocks - 1 - task / per_block;   /* last rows (longest spans) first */
    const int g = task % per_block / j->n_sub, h0 = g * G + task % j->n_sub * j->Gs;
    const int nh = G - (h0 - g * G) < j->Gs ? G - (h0 - g * G) : j->Gs;
    const int r_end = (b + 1) * j->P < j->R ? (b + 1) * j->P : j->R;
    /* Gemma 4 attention scaling is 1.0: the q/k norms replace 1/sqrt(D); Gemma 3 sets attn_scale */
    const float scale = m->cfg.attn_scale ? m->cfg.attn_scale : 1.0f;
    float *scores = m->scores + (size_t)thread * m->att_rows * m->info.ctx;
    int lo[G4_ATT_ROWS_MAX], hi[G4_ATT_ROWS_MAX];   /* [P], P <= att_rows */
    for (int r0 = b * j->P, r1; r0 < r_end; r0 = r1) {   /* runs of rows in one slot share its cache */
        for (r1 = r0; r1 < r_end && j->slots[r1] == j->slots[r0]; r1++) {
            const int p = j->pos[r1];
            hi[r1 - r0] = p;
            lo[r1 - r0] = L->is_full ? 0 : (p - m->cfg.sliding_window + 1 > 0 ? p - m->cfg.sliding_window + 1 : 0);
        }
        const float *K = slot_k(m, j->slots[r0], L) + (size_t)g * cap * D;
        const float *V = K + (size_t)L->n_kv * cap * D;
        const size_t off = ((size_t)r0 * Hq + h0) * D;
        if (m->opts.numerics == G4_NUMERICS_GGML)
            g4_ggml_attend_block(m->q + off, Hq * D, m->att + off, Hq * D, nh, r1 - r0, lo, hi, K, V, cap, D, scale,
                                 scores, j->batched);
        else {
            const unsigned csr = flush_denormals_begin();
            m->k->attend_block(m->q + off, Hq * D, m->att + off, Hq * D, nh, r1 - r0, lo, hi, K, V, cap, D, scale, scores);
            flush_denormals_end(csr);
        }
    }
}

/* Splits R rows into tasks: blocks of P rows when they all belong to one slot (a prefill chunk),
 * single rows otherwise (decode across slots); heads split into sub-groups until there are at
 * least two tasks per thread (a decode step's full layer has one KV head). */
static void attention_rows(g4_model *m, const g4_layer *L, int R, const int *slots, const int *pos, int batched) {
    const int G = L->n_q / L->n_kv, A = m->att_rows, nth = g4_pool_size(m->pool);
    int one_slot = 1;
    for (int r = 1; r < R; r++) one_slot &= slots[r] == slots[0];
    att_job aj = {.m = m, .L = L, .R = R, .batched = batched, .slots = slots, .pos = pos};
    aj.Gs = G < A ? G : A;
    aj.P = one_slot ? A / aj.Gs : 1;
    if (aj.P > R) aj.P = R;
    aj.n_blocks = (R + aj.P - 1) / aj.P;
    for (;;) {
        aj.n_sub = (G + aj.Gs - 1) / aj.Gs;
        if (aj.Gs == 1 || aj.n_blocks * L->n_kv * aj.n_sub >= 2 * nth) break;
        aj.Gs = (aj.Gs + 1) / 2;
    }
    g4_pool_run(m->pool, aj.n_blocks * L->n_kv * aj.n_sub, att_task, &aj);
}

/* ---------------------------------------------------------------- row-parallel passes */

/* The per-row work between the matmuls (norms, q/k norm + RoPE + the KV cache write, the GELU
 * product, the residual adds) split over the pool by rows when there are enough of them: run on
 * the calling thread alone it left the other threads spinning for ~3% of a 64-token prefill.
 * Each row's arithmetic is the same whichever thread runs it. */
enum { ROWS_PRE_ATTN, ROWS_QK, ROWS_POST_ATTN, ROWS_GELU, ROWS_POST_FFW };
enum { ROWS_PAR_MIN = 8 };   /* below this many rows (decode) one thread does them all */

typedef struct {
    g4_model *m;
    const g4_layer *L;
    int kind, R, per_task;
    const int *slots, *pos;
} rows_job;

static void rows_range(g4_model *m, const g4_layer *L, int kind, int r0, int r1, const int *slots, const int *pos) {
    const g4_config *c = &m->cfg;
    const int H = c->hidden_size;
    const float eps = c->rms_norm_eps;
    for (int r = r0; r < r1; r++) {
        float *x = m->x + (size_t)r * H, *h = m->h + (size_t)r * H, *t = m->tmp + (size_t)r * H;
        switch (kind) {
        case ROWS_PRE_ATTN: m->k->rmsnorm(x, L->w_in, eps, H, h); break;
        case ROWS_QK: {
            const int Hq = L->n_q, D = L->head_dim, Hkv = L->n_kv, cap = L->kv_cap;
            const int ggml = m->opts.numerics == G4_NUMERICS_GGML;
            void (*rope_apply)(float *, const float *, int) = ggml ? g4_rope_apply_ggml : g4_rope_apply;
            float *cs = m->rope_cs + (size_t)r * D;
            if (ggml) g4_rope_table_ggml(L->rope_base, L->inv_freq, D, pos[r], cs);
            else g4_rope_table(L->inv_freq, D, pos[r], cs);
            for (int hh = 0; hh < Hq; hh++) {
                float *qh = m->q + ((size_t)r * Hq + hh) * D;
                m->k->rmsnorm(qh, L->w_qnorm, eps, D, qh);
                rope_apply(qh, cs, D);
            }
            float *K = slot_k(m, slots[r], L), *V = K + (size_t)Hkv * cap * D;
            const int idx = pos[r] % cap;   /* ring index for sliding layers; cap = ctx for full ones */
            for (int g = 0; g < Hkv; g++) {
                float *kh = m->kk + ((size_t)r * Hkv + g) * D, *vh = m->vv + ((size_t)r * Hkv + g) * D;
                float *kd = K + ((size_t)g * cap + idx) * D, *vd = V + ((size_t)g * cap + idx) * D;
                m->k->rmsnorm(kh, L->w_knorm, eps, D, kd);
                rope_apply(kd, cs, D);
                if (c->no_v_norm) memcpy(vd, vh, (size_t)D * sizeof(float));
                else m->k->rmsnorm(vh, NULL, eps, D, vd);   /* v_norm has no scale */
            }
            break;
        }
        case ROWS_POST_ATTN:   /* x += post_attn_norm(o); h = pre_ffw_norm(x) */
            m->k->rmsnorm(t, L->w_post_attn, eps, H, t);
            for (int i = 0; i < H; i++) x[i] += t[i];
            m->k->rmsnorm(x, L->w_pre_ffw, eps, H, h);
            break;
        case ROWS_GELU: {
            const size_t I = (size_t)L->gate.rows;   /* this rank's slice of the intermediate size */
            m->k->gelu_mul(m->gate + r * I, m->up + r * I, (int)I, m->gate + r * I);
            break;
        }
        case ROWS_POST_FFW:
            m->k->rmsnorm(t, L->w_post_ffw, eps, H, t);
            for (int i = 0; i < H; i++) x[i] = (x[i] + t[i]) * L->layer_scalar;
            break;
        }
    }
}

static void rows_task(void *ctx, int task, int thread) {
    (void)thread;
    const rows_job *j = ctx;
    const int r0 = task * j->per_task, r1 = r0 + j->per_task < j->R ? r0 + j->per_task : j->R;
    rows_range(j->m, j->L, j->kind, r0, r1, j->slots, j->pos);
}

static void rows_pass_run(g4_model *m, const g4_layer *L, int kind, int R, const int *slots, const int *pos) {
    const int nth = g4_pool_size(m->pool);
    if (R < ROWS_PAR_MIN || nth == 1) {
        rows_range(m, L, kind, 0, R, slots, pos);
        return;
    }
    /* a few tasks per thread, claimed dynamically (a preempted thread holds only its share) */
    rows_job j = {.m = m, .L = L, .kind = kind, .R = R, .slots = slots, .pos = pos};
    const int want = 4 * nth;
    j.per_task = (R + want - 1) / want;
    g4_pool_run(m->pool, (R + j.per_task - 1) / j.per_task, rows_task, &j);
}

static void rows_pass(g4_model *m, const g4_layer *L, int kind, int R, const int *slots, const int *pos) {
    PROF(m, G4_PROF_ROWS, rows_pass_run(m, L, kind, R, slots, pos));
}

/* ---------------------------------------------------------------- the layer loop */

static void attention_block(g4_model *m, const g4_layer *L, int R, const int *slots, const int *pos, int batched) {
    const g4_config *c = &m->cfg;
    const int H = c->hidden_size, Hq = L->n_q, D = L->head_dim, Hkv = L->n_kv;
    rows_pass(m, L, ROWS_PRE_ATTN, R, slots, pos);

    g4_mm_op ops[3] = {{&L->q, m->h, m->q, Hq * D}, {&L->k, m->h, m->kk, Hkv * D}, {&L->v, m->h, m->vv, Hkv * D}};
    matmul_phase(m, G4_PROF_QKV, R, L->has_v ? 3 : 2, ops);
    if (!L->has_v) memcpy(m->vv, m->kk, (size_t)R * Hkv * D * sizeof(float));   /* k_eq_v: v_raw = k_raw */

    rows_pass(m, L, ROWS_QK, R, slots, pos);   /* q/k norms, RoPE, K and V into the cache */
    PROF(m, G4_PROF_ATTN, attention_rows(m, L, R, slots, pos, batched));
    matmul1(m, G4_PROF_O, R, &L->o, m->att, m->tmp);
    if (m->comm) m->comm->allreduce_sum(m->comm, m->tmp, (size_t)R * H);   /* row-parallel o_proj */
    rows_pass(m, L, ROWS_POST_ATTN, R, slots, pos);   /* residual, then mlp_block's pre-ffw norm */
}

static void mlp_block(g4_model *m, const g4_layer *L, int R) {
    const g4_config *c = &m->cfg;
    const int H = c->hidden_size, I = L->gate.rows;   /* this rank's slice of the intermediate size */
    /* h = pre_ffw_norm(x) was written by attention_block's last pass */
    g4_mm_op ops[2] = {{&L->gate, m->h, m->gate, I}, {&L->up, m->h, m->up, I}};
    matmul_phase(m, G4_PROF_GATEUP, R, 2, ops);
    rows_pass(m, L, ROWS_GELU, R, NULL, NULL);
    matmul1(m, G4_PROF_DOWN, R, &L->down, m->gate, m->tmp);
    if (m->comm) m->comm->allreduce_sum(m->comm, m->tmp, (size_t)R * H);   /* row-parallel down_proj */
    rows_pass(m, L, ROWS_POST_FFW, R, NULL, NULL);
}

static g4_status forward(g4_model *m, int R, const int *slots, const int *pos, const int32_t *ids, int logit_row0,
                         int step, float *logits);

g4_status g4_forward(g4_model *m, int R, const int *slots, const int *pos, const int32_t *ids,
                     int logit_row0, int step, float *logits) {
    m->prof_kind = R > 1;
    g4_status st;
    PROF(m, G4_PROF_FORWARD, st = forward(m, R, slots, pos, ids, logit_row0, step, logits));
    return st;
}

static g4_status forward(g4_model *m, int R, const int *slots, const int *pos, const int32_t *ids, int logit_row0,
                         int step, float *logits) {
    const int batched = (step & G4_STEP_BATCHED) != 0;
    const g4_config *c = &m->cfg;
    const int H = c->hidden_size, V = c->vocab_size;
    if (R <= 0 || R > m->max_rows) return g4_fail(G4_ERR_RUNTIME, "forward: %d rows (max %d)", R, m->max_rows);
    for (int r = 0; r < R; r++) {
        if (ids[r] < 0 || ids[r] >= V)
            return g4_fail(G4_ERR_INPUT, "token id %d is outside the vocabulary [0, %d)", ids[r], V);
        float *x = m->x + (size_t)r * H;
        int id = ids[r];
        for (int k = 0; k < 3; k++)   /* text-only: placeholders embed as <pad>, as HF does */
            if (id == c->mm_placeholder_ids[k] && c->pad_id >= 0) id = c->pad_id;
        /* vocab-parallel embedding: the rank holding the row writes it, the others add zeros */
        id -= m->plan.vocab_lo;
        if (id < 0 || id >= m->plan.vocab_hi - m->plan.vocab_lo) {
            memset(x, 0, (size_t)H * sizeof(float));
            continue;
        }
        g4_to_f32(m->embed.dt, (const char *)m->embed.data + (size_t)id * g4_dtype_row_bytes(m->embed.dt, H), (size_t)H, x);
        for (int i = 0; i < H; i++) x[i] *= m->embed_scale;
    }
    if (m->comm) m->comm->allreduce_sum(m->comm, m->x, (size_t)R * H);
    /* --prefill-bf16 rounds the layer matmuls' inputs of prompt rows; the LM head stays exact */
    m->round_bf16 = m->opts.prefill_bf16 && (step & G4_STEP_PREFILL);
    for (int l = 0; l < c->n_layers; l++) {
        attention_block(m, &m->layers[l], R, slots, pos, batched);
        mlp_block(m, &m->layers[l], R);
    }
    m->round_bf16 = 0;
    if (logits && logit_row0 < R) {
        int n = R - logit_row0;
        for (int r = 0; r < n; r++)
            m->k->rmsnorm(m->x + (size_t)(logit_row0 + r) * H, m->w_final, c->rms_norm_eps, H, m->h + (size_t)r * H);
        g4_mm_op op = {&m->lm_head, m->h, logits, m->vmax};   /* this rank's vocabulary slice */
        matmul_phase(m, G4_PROF_LM_HEAD, n, 1, &op);
        if (m->opts.numerics == G4_NUMERICS_GGML && c->final_logit_softcap > 0)   /* in llama.cpp's graph */
            for (int r = 0; r < n; r++)
                g4_ggml_softcap(logits + (size_t)r * m->vmax, m->plan.vocab_hi - m->plan.vocab_lo, c->final_logit_softcap);
    }
    return G4_OK;
}
