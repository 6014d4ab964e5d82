/* forward.c — one forward pass of the Gemma 4 unified text stack over R rows (a prefill chunk of
 * one slot, or one decode token from each of several slots), mirroring transformers'
 * Gemma4UnifiedTextModel in float32 (shared/MODEL.md "One forward step"). The matmuls go through
 * the matmul layer (kernels/matmul.h), attention through attention.c, every other op through the
 * model's kernel table — under --numerics ggml llama.cpp's (kernels.h g4_kernels_ggml), which also
 * softcaps the logits here; otherwise the softcap is the session's (g4_softcap). */
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "model/model.h"

/* tuning.profile: `stmt` timed into phase `ph` of this step's kind (m->prof_s; one-row or multi-row) */
#define PROF(m, ph, stmt)                                                   \
    do {                                                                    \
        if (!(m)->prof) { stmt; break; }                                    \
        const double prof_t0_ = g4_now();                                   \
        stmt;                                                               \
        (m)->prof_s[(m)->prof_kind][ph] += g4_now() - prof_t0_;             \
    } while (0)

/* The per-row work between the matmuls (rows_pass, below the forward pass) */
enum { ROWS_PRE_ATTN, ROWS_QK, ROWS_POST_ATTN, ROWS_GELU, ROWS_POST_FFW };

static void embed(g4_model *m, int R, const int32_t *ids);
static void attention_block(g4_model *m, const g4_layer *L, int R, const int *slots, const int *pos, int batched);
static void mlp_block(g4_model *m, const g4_layer *L, int R);
static void lm_head(g4_model *m, int n, const float *x, int argmax_only, float *logits);
static void rows_pass(g4_model *m, const g4_layer *L, int kind, int R, const int *slots, const int *pos);
static void matmul_phase(g4_model *m, int phase, int T, int n_ops, const g4_mm_op *ops);
static void matmul1(g4_model *m, int phase, int T, const g4_mat *w, const float *x, float *y);
static g4_status forward(g4_model *m, int R, const int *slots, const int *pos, const int32_t *ids, int logit_row0,
                         int step, float *logits);

/* ---------------------------------------------------------------- the forward pass */

g4_status g4_forward(g4_model *m, int R, const int *slots, const int *pos, const int32_t *ids,
                     int logit_row0, int step, float *logits) {
    m->prof_kind = R > 1;
    g4_status st;
    PROF(m, G4_PROF_FORWARD, st = forward(m, R, slots, pos, ids, logit_row0, step, logits));
    return st;
}

static g4_status forward(g4_model *m, int R, const int *slots, const int *pos, const int32_t *ids, int logit_row0,
                         int step, float *logits) {
    const g4_config *c = &m->cfg;
    const int H = c->hidden_size, V = c->vocab_size;
    m->hidden_rows = 0;
    if (R <= 0 || R > m->max_rows) return g4_fail(G4_ERR_RUNTIME, "forward: %d rows (max %d)", R, m->max_rows);
    for (int r = 0; r < R; r++)
        if (ids[r] < 0 || ids[r] >= V)
            return g4_fail(G4_ERR_INPUT, "token id %d is outside the vocabulary [0, %d)", ids[r], V);

    embed(m, R, ids);   /* x = E[id] * sqrt(H) */

    /* --prefill-bf16 rounds the layer matmuls' inputs of prompt rows; the LM head stays exact */
    g4_matmul_round_bf16(m->mm, m->opts.prefill_bf16 && (step & G4_STEP_PREFILL));
    for (int l = 0; l < c->n_layers; l++) {
        attention_block(m, &m->layers[l], R, slots, pos, (step & G4_STEP_BATCHED) != 0);
        mlp_block(m, &m->layers[l], R);
    }
    g4_matmul_round_bf16(m->mm, 0);

    if (logits && logit_row0 < R) {   /* final norm, then this rank's slice of the logits */
        lm_head(m, R - logit_row0, m->x + (size_t)logit_row0 * H, (step & G4_STEP_ARGMAX) != 0, logits);
        m->hidden_rows = R - logit_row0;   /* h keeps the normed rows until the next step */
    }
    return G4_OK;
}

/* x += post_attn_norm(o_proj(attention(rope(q_norm(q)), rope(k_norm(k)), v_norm(v)))), q/k/v
 * from h = input_norm(x); ends with h = pre_ffw_norm(x) for the MLP */
static void attention_block(g4_model *m, const g4_layer *L, int R, const int *slots, const int *pos, int batched) {
    const g4_config *c = &m->cfg;
    const int H = c->hidden_size, Hq = L->n_q, D = L->head_dim, Hkv = L->n_kv;
    rows_pass(m, L, ROWS_PRE_ATTN, R, slots, pos);

    g4_mm_op ops[3] = {{&L->q, m->h, m->q, Hq * D}, {&L->k, m->h, m->kk, Hkv * D}, {&L->v, m->h, m->vv, Hkv * D}};
    matmul_phase(m, G4_PROF_QKV, R, L->has_v ? 3 : 2, ops);
    if (!L->has_v) memcpy(m->vv, m->kk, (size_t)R * Hkv * D * sizeof(float));   /* k_eq_v: v_raw = k_raw */

    rows_pass(m, L, ROWS_QK, R, slots, pos);   /* q/k norms, RoPE, K and V into the cache */
    PROF(m, G4_PROF_ATTN, g4_attention(m, L, R, slots, pos, batched));
    matmul1(m, G4_PROF_O, R, &L->o, m->att, m->tmp);
    if (m->comm) m->comm->allreduce_sum(m->comm, m->tmp, (size_t)R * H);   /* row-parallel o_proj */
    rows_pass(m, L, ROWS_POST_ATTN, R, slots, pos);   /* residual, then mlp_block's pre-ffw norm */
}

/* x = (x + post_ffw_norm(down(gelu_tanh(gate(h)) * up(h)))) * layer_scalar */
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

/* logits = final_norm(x) · Eᵀ for n rows of x [n][H] → logits [n][vmax], this rank's vocabulary
 * slice (the LM head is vocab-parallel); argmax_only: a greedy step's (lm_argmax.c) */
static void lm_head(g4_model *m, int n, const float *x, int argmax_only, float *logits) {
    const g4_config *c = &m->cfg;
    const int H = c->hidden_size;
    for (int r = 0; r < n; r++) m->k->rmsnorm(x + (size_t)r * H, m->w_final, c->rms_norm_eps, H, m->h + (size_t)r * H);
    if (argmax_only) {
        int done;
        PROF(m, G4_PROF_LM_HEAD, done = g4_lm_head_argmax(m, n, m->h, logits));
        if (done) return;
    }
    g4_mm_op op = {&m->lm_head, m->h, logits, m->vmax};
    matmul_phase(m, G4_PROF_LM_HEAD, n, 1, &op);
    if (m->k->logits_softcap && c->final_logit_softcap > 0)   /* --numerics ggml: in llama.cpp's graph */
        for (int r = 0; r < n; r++)
            m->k->logits_softcap(logits + (size_t)r * m->vmax, m->plan.vocab_hi - m->plan.vocab_lo, c->final_logit_softcap);
}

/* ---------------------------------------------------------------- the steps' pieces */

/* x[r] = E[ids[r]] * sqrt(H) (embed_scale) for R rows of m->x [R][H]; ids already checked */
static void embed(g4_model *m, int R, const int32_t *ids) {
    const g4_config *c = &m->cfg;
    const int H = c->hidden_size;
    for (int r = 0; r < R; r++) {
        float *x = m->x + (size_t)r * H;
        if (m->step_media && m->step_media[r] != G4_ROW_TEXT) {
            /* an image's soft token, as embedded (unscaled); under --tp rank 0 holds it and the
             * other ranks add zeros, which leaves it exact */
            if (m->step_soft) memcpy(x, m->step_soft[r], (size_t)H * sizeof(float));
            else memset(x, 0, (size_t)H * sizeof(float));
            continue;
        }
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
}

/* The layer and LM head matmuls (kernels/matmul.h), timed by tuning.profile as `phase` (the input
 * conversions as G4_PROF_ROUND) */
static void matmul_phase(g4_model *m, int phase, int T, int n_ops, const g4_mm_op *ops) {
    double *s = m->prof_s[m->prof_kind];
    if (m->prof) g4_matmul_profile(m->mm, &s[phase], &s[G4_PROF_ROUND]);
    g4_matmul(m->mm, T, n_ops, ops);
    if (m->prof) g4_matmul_profile(m->mm, NULL, NULL);
}

static void matmul1(g4_model *m, int phase, int T, const g4_mat *w, const float *x, float *y) {
    g4_mm_op op = {w, x, y, w->rows};
    matmul_phase(m, phase, T, 1, &op);
}

/* The per-row work between the matmuls (norms, q/k norm + RoPE + the KV cache write, the GELU
 * product, the residual adds) split over the pool by rows when there are enough of them: run on
 * the calling thread alone it left the other threads spinning through part of every prefill.
 * Each row's arithmetic is the same whichever thread runs it. */
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
            float *cs = m->rope_cs + (size_t)r * D;
            m->k->rope_table(L->rope_base, L->inv_freq, D, pos[r], cs);
            for (int hh = 0; hh < Hq; hh++) {
                float *qh = m->q + ((size_t)r * Hq + hh) * D;
                m->k->rmsnorm(qh, L->w_qnorm, eps, D, qh);
                m->k->rope_apply(qh, cs, D);
            }
            unsigned char *K = g4_slot_k(m, slots[r], L), *V = K + (size_t)Hkv * cap * L->kv_row;
            const int idx = pos[r] % cap;   /* ring index for sliding layers; cap = ctx for full ones */
            for (int g = 0; g < Hkv; g++) {
                float *kh = m->kk + ((size_t)r * Hkv + g) * D, *vh = m->vv + ((size_t)r * Hkv + g) * D;
                unsigned char *kr = K + ((size_t)g * cap + idx) * L->kv_row, *vr = V + ((size_t)g * cap + idx) * L->kv_row;
                if (m->opts.kv_type != G4_KV_F32) {   /* normed and rotated in float32, then narrowed */
                    m->k->rmsnorm(kh, L->w_knorm, eps, D, kh);
                    m->k->rope_apply(kh, cs, D);
                    if (!c->no_v_norm) m->k->rmsnorm(vh, NULL, eps, D, vh);
                    g4_kv_store_row(m->opts.kv_type, kh, D, kr);
                    g4_kv_store_row(m->opts.kv_type, vh, D, vr);
                    continue;
                }
                float *kd = (float *)kr, *vd = (float *)vr;
                m->k->rmsnorm(kh, L->w_knorm, eps, D, kd);
                m->k->rope_apply(kd, cs, D);
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

/* tuning.profile's report ("profile ..." lines): per kind of step, each phase's seconds and share */
void g4_forward_print_profile(const g4_model *m) {
    static const char *names[G4_PROF_PHASES] = {"forward", "row passes", "bf16 rounding", "q/k/v", "attention",
                                                "o", "gate/up", "down", "LM head"};
    for (int kind = 0; kind < 2; kind++) {
        const double *s = m->prof_s[kind], total = s[G4_PROF_FORWARD];
        if (total <= 0) continue;
        double rest = total;
        fprintf(stderr, "profile: %s steps, %.4g s:", kind ? "multi-row" : "one-row", total);
        for (int i = 1; i < G4_PROF_PHASES; i++) {
            fprintf(stderr, " %s %.4g (%.1f%%);", names[i], s[i], 100 * s[i] / total);
            rest -= s[i];
        }
        fprintf(stderr, " other %.4g (%.1f%%)\n", rest, 100 * rest / total);
    }
    g4_lm_argmax_print(m->lma);
}
