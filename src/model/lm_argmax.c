/* lm_argmax.c — the LM head of a greedy step (a step whose caller takes only each row's argmax),
 * over Q4_K / Q6_K weights: the same tokens as the exact head for about the cost of --act-q8's.
 *
 * Every logit is first computed with the input quantized to int8 (--act-q8's kernels, 1.3-1.8x
 * the exact kernels' speed over these types), with a bound B_r on its distance from the exact
 * logit (kernels.h g4_quant_row_norms: ‖w_r‖₂ ‖x − x̂‖₂ + γ ‖a_r‖₂ (‖x‖₂ + ‖x̂‖₂), the weight
 * norms computed once per model). L = approx_s − B_s of the row s with the largest approx is at
 * most the largest exact logit, so a row whose approx_r + B_r < L cannot be the argmax; every
 * other row (5-500 of 262,144 in our runs) is computed again with the exact kernel, which gives
 * the bits the full exact head gives (the decode kernels are row-invariant). The row then holds
 * those exact logits and, elsewhere, values strictly below its maximum: its argmax — and, under
 * --tp, the group's over every rank's slice — is the exact head's. */
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

/* more candidates than 1/CAND_DIV of the vocabulary slice: the exact head is cheaper */
enum { CAND_DIV = 16, NORM_TASK_ROWS = 4096 };

struct g4_lm_argmax {
    float *nw, *na;     /* [vlen] ‖w_r‖₂ and ‖a_r‖₂, rounded up */
    float nw_max, na_max;
    long rows, exact_rows, full;   /* input rows through it, rows recomputed exactly, rows that
                                    * fell back to the exact head (tuning.profile's report) */
    float *chk;         /* G4_GREEDY_HEAD_CHECK: [vlen] the exact head's row, else NULL */
    long checked, bad;
    void *xq;           /* [logit_rows] quantized input rows */
    int *cand;          /* [vlen / CAND_DIV + 1] candidate rows of one input row */
};

static float round_up_f(double v) {
    float f = (float)(v * (1 + 0x1p-30));
    if ((double)f < v) f = nextafterf(f, INFINITY);
    return f;
}

typedef struct {
    const g4_mat *w;
    float *nw, *na;
} norms_job;

static void norms_task(void *ctx, int task, int thread) {
    (void)thread;
    norms_job *j = ctx;
    const size_t rb = g4_dtype_row_bytes(j->w->dt, j->w->cols);
    const int r1 = (task + 1) * NORM_TASK_ROWS < j->w->rows ? (task + 1) * NORM_TASK_ROWS : j->w->rows;
    for (int r = task * NORM_TASK_ROWS; r < r1; r++) {
        double w2, a2;
        g4_quant_row_norms(j->w->dt, (const char *)j->w->data + (size_t)r * rb, j->w->cols, &w2, &a2);
        j->nw[r] = round_up_f(sqrt(w2));
        j->na[r] = round_up_f(sqrt(a2));
    }
}

/* The weight norms and scratch, on the first greedy step; NULL (and m->lma_off set) where the
 * pre-pass does not apply: heads other than Q4_K / Q6_K (float heads stream at the bandwidth
 * already, and over Q8_0 / Q4_0 the int8 kernels are no faster than the exact ones: measured),
 * --act-q8 (the head is int8 anyway), --numerics ggml, --full-logits, no kernel. */
static struct g4_lm_argmax *state(g4_model *m) {
    if (m->lma || m->lma_off) return m->lma;
    const g4_mat *w = &m->lm_head;
    const char *env = getenv("G4_GREEDY_HEAD_CHECK");
    const int check = env && *env == '1';   /* tests: on every quantized head, checked */
    m->lma_off = 1;
    if (!w->data || w->rows <= 0 || !(w->dt == G4_DT_Q4_K || w->dt == G4_DT_Q6_K || (check && g4_quant_bounded(w->dt))) ||
        !m->k->matmul_q8[w->dt] ||
        m->opts.act_q8 || m->opts.numerics == G4_NUMERICS_GGML || m->opts.tuning.full_logits == 1)
        return NULL;
    struct g4_lm_argmax *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->nw = malloc((size_t)w->rows * sizeof(float));
    s->na = malloc((size_t)w->rows * sizeof(float));
    s->cand = malloc(((size_t)w->rows / CAND_DIV + 1) * sizeof(int));
    s->xq = malloc((size_t)m->logit_rows * g4_act_row_bytes(w->dt, w->cols));
    if (!s->nw || !s->na || !s->cand || !s->xq) {
        g4_lm_argmax_free(s);
        return NULL;   /* the exact head still works */
    }
    if (check && !(s->chk = malloc((size_t)w->rows * sizeof(float)))) {
        g4_lm_argmax_free(s);
        return NULL;
    }
    norms_job j = {w, s->nw, s->na};
    g4_pool_run(m->pool, (w->rows + NORM_TASK_ROWS - 1) / NORM_TASK_ROWS, norms_task, &j);
    for (int r = 0; r < w->rows; r++) {
        if (!isfinite(s->nw[r]) || !isfinite(s->na[r])) {   /* weights with inf or NaN: no bound */
            g4_lm_argmax_free(s);
            return NULL;
        }
        s->nw_max = s->nw[r] > s->nw_max ? s->nw[r] : s->nw_max;
        s->na_max = s->na[r] > s->na_max ? s->na[r] : s->na_max;
    }
    m->lma = s;
    m->lma_off = 0;
    return s;
}

void g4_lm_argmax_free(struct g4_lm_argmax *s) {
    if (!s) return;
    free(s->nw); free(s->na); free(s->xq); free(s->cand); free(s->chk);
    free(s);
}

/* Row t's candidates after the pre-pass wrote approx into lg: their count, or -1 when the bound
 * cannot be trusted (non-finite values) or leaves too many. Two passes over the logits alone,
 * 4 at a time in SSE2 (on any x86-64): the largest approx A, then every row with approx >=
 * A − 2 max B, for which the real test, approx_r + B_r >= A − max B (A − max B is below the exact
 * logit of the row holding A), runs; the set is then cut to A − B_top, with top that row. In
 * float: the bound's factors are inflated by 2^-16 so that a rounded B is at least the real one,
 * and each threshold is lowered by 2^-20 of its magnitude past the roundings of approx ± B, so
 * the set only grows. */

static inline float lower(float v) { return v - (fabsf(v) * 0x1p-20f + 1e-30f); }

/* B_r = nw_r e + na_r f for an input row of norms nrm (g4_act_norms): 0 if they are not finite */
static int bound_factors(int K, const double nrm[3], float *e, float *f) {
    const double nk = (double)K + 64, gamma = nk * 0x1p-24 / (1 - nk * 0x1p-24);
    const double ed = nrm[2] * (1 + 0x1p-16), fd = gamma * (nrm[0] + nrm[1]) * (1 + 0x1p-16);
    if (!(ed < 1e30 && fd < 1e30)) return 0;
    *e = round_up_f(ed);
    *f = round_up_f(fd);
    return 1;
}

static int candidates(const struct g4_lm_argmax *s, int V, const float *lg, float e, float f, int *cand) {
    const float bmax = round_up_f((double)s->nw_max * e + (double)s->na_max * f);
    const int V4 = V / 4 * 4;
    __m128 mx = _mm_set1_ps(-INFINITY);
    for (int r = 0; r < V4; r += 4) mx = _mm_max_ps(_mm_loadu_ps(lg + r), mx);   /* NaN: dropped */
    float A = -INFINITY, lanes[4];
    _mm_storeu_ps(lanes, mx);
    for (int i = 0; i < 4; i++) A = lanes[i] > A ? lanes[i] : A;
    for (int r = V4; r < V; r++) A = lg[r] > A ? lg[r] : A;
    if (!isfinite(A)) return -1;
    const float loose = lower(A - bmax), coarse = lower(loose - bmax);
    const __m128 cv = _mm_set1_ps(coarse);
    int n = 0, top = -1;
    for (int r = 0; r < V; r += 4) {
        const int m = V - r < 4 ? V - r : 4;
        if (m == 4 && _mm_movemask_ps(_mm_cmpnlt_ps(_mm_loadu_ps(lg + r), cv)) == 0) continue;   /* NaN: kept */
        for (int i = r; i < r + m; i++) {
            if (lg[i] < coarse) continue;
            if (top < 0 && lg[i] == A) top = i;
            const float hi = lg[i] + (s->nw[i] * e + s->na[i] * f);
            if (hi < loose) continue;
            if (n >= V / CAND_DIV + 1 || !isfinite(hi)) return -1;
            cand[n++] = i;
        }
    }
    const float tight = lower(A - (s->nw[top] * e + s->na[top] * f));
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!(lg[cand[i]] + (s->nw[cand[i]] * e + s->na[cand[i]] * f) < tight)) cand[k++] = cand[i];
    return k;
}

/* G4_GREEDY_HEAD_CHECK=1 (tests; it also takes the pre-pass over Q8_0 / Q4_0 / Q5_0 heads): every
 * row's exact logit against its int8 one and bound, and the token against the exact head's */
static void check_bound(g4_model *m, struct g4_lm_argmax *s, const float *x, const float *lg, float e, float f) {
    const g4_mm_op op = {&m->lm_head, x, s->chk, m->vmax};
    g4_matmul(m->mm, 1, 1, &op);
    for (int r = 0; r < m->lm_head.rows; r++) {
        const float B = s->nw[r] * e + s->na[r] * f;
        s->checked++;
        if (!(fabsf(s->chk[r] - lg[r]) <= B) && s->bad++ < 8)
            fprintf(stderr, "greedy LM head check: row %d: exact %.9g, int8 %.9g, bound %.3g\n", r, s->chk[r], lg[r], B);
    }
}

int g4_lm_head_argmax(g4_model *m, int n, const float *h, float *logits) {
    struct g4_lm_argmax *s = state(m);
    if (!s) return 0;
    const g4_mat *w = &m->lm_head;
    const int K = w->cols, V = w->rows;
    m->k->quantize_act(w->dt, h, n, K, s->xq);
    const g4_mm_op op = {w, h, logits, m->vmax};
    g4_matmul_act_q8(m->mm, n, &op, s->xq);
    const size_t rb = g4_dtype_row_bytes(w->dt, K), xrb = g4_act_row_bytes(w->dt, K);
    for (int t = 0; t < n; t++) {
        float *lg = logits + (size_t)t * m->vmax;
        double nrm[3];
        float e, f;
        g4_act_norms(w->dt, h + (size_t)t * K, (const char *)s->xq + (size_t)t * xrb, K, nrm);
        const int nc = bound_factors(K, nrm, &e, &f) ? candidates(s, V, lg, e, f, s->cand) : -1;
        if (s->chk && nc >= 0) check_bound(m, s, h + (size_t)t * K, lg, e, f);
        if (nc < 0) {
            s->full += n;
            return 0;
        }
        for (int i = 0; i < nc; i++) {   /* the exact kernel on each candidate row alone */
            const int r = s->cand[i];
            const g4_mat row = {w->dt, (const char *)w->data + (size_t)r * rb, 1, K};
            const g4_mm_op one = {&row, h + (size_t)t * K, lg + r, m->vmax};
            g4_matmul(m->mm, 1, 1, &one);
            if (!isfinite(lg[r])) {
                s->full += n;
                return 0;
            }
        }
        s->exact_rows += nc;
        if (s->chk && g4_argmax(lg, V) != g4_argmax(s->chk, V)) {
            fprintf(stderr, "greedy LM head check: token %d, the exact head's %d\n", g4_argmax(lg, V), g4_argmax(s->chk, V));
            s->bad++;
        }
    }
    s->rows += n;
    return 1;
}

void g4_lm_argmax_print(const struct g4_lm_argmax *s) {
    if (s && s->rows + s->full)
        fprintf(stderr, "profile: greedy LM head: %ld rows with the int8 pre-pass, %.1f of its rows exact per row; "
                        "%ld rows on the exact head\n", s->rows, s->rows ? (double)s->exact_rows / s->rows : 0.0, s->full);
    if (s && s->chk)
        fprintf(stderr, "profile: greedy LM head check: %ld logits against their bound, %ld failures\n", s->checked, s->bad);
}
