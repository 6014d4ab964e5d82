/* model_cost.c — the model's side of `gemma4c bench`'s roofline (see model_cost.h): weight bytes
 * and FLOPs per token from the bound matrices, attention FLOPs and KV bytes per position, and the
 * matmul kernels timed alone on the model's own matrices, and the public accessors of the kernel
 * path a model takes. Reads the model (model.h), never changes it. */
#include "bench/model_cost.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "bench/roofline.h"
#include "model/model.h"

static double mat_bytes(const g4_mat *w) { return (double)g4_mat_bytes(w); }
static double mat_params(const g4_mat *w) { return w->data ? (double)w->rows * w->cols : 0; }

void g4_bench_model_cost(const g4_model *m, g4_model_cost *c) {
    memset(c, 0, sizeof *c);
    const g4_config *cfg = &m->cfg;
    for (int l = 0; l < cfg->n_layers; l++) {
        for (int i = 0; i < G4_LAYER_MATS; i++) {   /* an absent v_proj counts 0 bytes, 0 params */
            const g4_mat *w = g4_layer_mat(&m->layers[l], i);
            c->layer_matrix_bytes += mat_bytes(w);
            c->layer_params += mat_params(w);
        }
    }
    c->lm_head_bytes = mat_bytes(&m->lm_head);
    c->lm_head_params = mat_params(&m->lm_head);
    /* with tensor parallelism these are rank 0's shards; every rank streams one of the same size */
    c->layer_matrix_bytes *= m->plan.tp;
    c->layer_params *= m->plan.tp;
    c->lm_head_bytes *= m->plan.tp;
    c->lm_head_params *= m->plan.tp;
    c->n_layers = cfg->n_layers;
    c->hidden = cfg->hidden_size;
    c->vocab = cfg->vocab_size;
    c->n_heads = cfg->n_heads;
}

/* keys visible from position p in layer L: p + 1, capped by the sliding window */
static double keys_seen(const g4_model *m, const g4_layer *L, int p) {
    int k = p + 1;
    if (!L->is_full && k > m->cfg.sliding_window) k = m->cfg.sliding_window;
    return k;
}

double g4_bench_attn_flops(const g4_model *m, int p0, int n) {
    double f = 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const g4_layer *L = &m->layers[l];
        for (int p = p0; p < p0 + n; p++) f += 4.0 * L->head_dim * m->cfg.n_heads * keys_seen(m, L, p);
    }
    return f;
}

double g4_bench_kv_read_bytes(const g4_model *m, int p0, int n) {
    double b = 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const g4_layer *L = &m->layers[l];
        for (int p = p0; p < p0 + n; p++) b += 2.0 * L->n_kv * (double)L->kv_row * keys_seen(m, L, p);
    }
    return b * m->plan.tp;   /* every rank reads its own heads' cache */
}

/* ---------------------------------------------------------------- kernel-only timing */

/* The group `which` of layer l (or the LM head) as the forward pass's ops, outputs laid end to end
 * in y; returns how many (0 for an unknown group). */
static int kt_bind(g4_model *m, const char *which, int l, int T, const float *x, float *y, g4_mm_op *ops) {
    const g4_layer *L = &m->layers[l];
    const g4_mat *w[3];
    int n = 0;
    if (!strcmp(which, "qkv")) {
        w[n++] = &L->q;
        w[n++] = &L->k;
        if (L->has_v) w[n++] = &L->v;
    } else if (!strcmp(which, "o")) w[n++] = &L->o;
    else if (!strcmp(which, "gateup")) { w[n++] = &L->gate; w[n++] = &L->up; }
    else if (!strcmp(which, "down")) w[n++] = &L->down;
    else if (!strcmp(which, "lm_head")) w[n++] = &m->lm_head;
    for (int i = 0, off = 0; i < n; off += w[i]->rows, i++)
        ops[i] = (g4_mm_op){w[i], x, y ? y + (size_t)off * T : NULL, w[i]->rows};
    return n;
}

/* A plain read of one layer's group: its matrices' bytes in 1 MiB tasks on the model's pool. */
enum { READ_TASK_BYTES = 1 << 20 };
typedef struct {
    const g4_mm_op *ops;
    int n_ops, first_task[4];   /* op i's tasks are [first_task[i], first_task[i + 1]) */
    _Atomic uint64_t sink;
} group_read;

static void group_read_task(void *ctx, int task, int thread) {
    (void)thread;
    group_read *g = ctx;
    int i = 0;
    while (task >= g->first_task[i + 1]) i++;
    const size_t bytes = g4_mat_bytes(g->ops[i].w), off = (size_t)(task - g->first_task[i]) * READ_TASK_BYTES;
    const size_t n = bytes - off < READ_TASK_BYTES ? bytes - off : READ_TASK_BYTES;
    atomic_fetch_xor_explicit(&g->sink, g4_bench_read_range((const char *)g->ops[i].w->data + off, n), memory_order_relaxed);
}

static void read_group(g4_model *m, const g4_mm_op *ops, int n_ops) {
    group_read g = {.ops = ops, .n_ops = n_ops};
    for (int i = 0; i < n_ops; i++)
        g.first_task[i + 1] = g.first_task[i] + (int)((g4_mat_bytes(ops[i].w) + READ_TASK_BYTES - 1) / READ_TASK_BYTES);
    g4_pool_run(m->pool, g.first_task[n_ops], group_read_task, &g);
}

/* The calls one sweep of `which` makes: (group, layer) pairs. "decode" is every matmul of a decode
 * step in the step's order (each layer's qkv, o, gateup, down, then the LM head): all the weights
 * in one stream, larger than any L3, where a single group swept alone may partly sit in a large
 * L3 after the plain read that precedes it. */
typedef struct { const char *group; int layer; } kt_call;
enum { KT_MAX_CALLS = 4 * G4_MAX_LAYERS + 1 };   /* n_layers <= G4_MAX_LAYERS (hfconfig.h) */

static int kt_calls(const g4_model *m, const char *which, kt_call *calls) {
    static const char *step[] = {"qkv", "o", "gateup", "down"};
    int n = 0;
    if (!strcmp(which, "decode")) {
        for (int l = 0; l < m->cfg.n_layers; l++)
            for (int g = 0; g < 4; g++) calls[n++] = (kt_call){step[g], l};
        calls[n++] = (kt_call){"lm_head", 0};
    } else if (!strcmp(which, "lm_head")) calls[n++] = (kt_call){which, 0};
    else
        for (int l = 0; l < m->cfg.n_layers; l++) calls[n++] = (kt_call){which, l};
    return n;
}

g4_status g4_bench_kernel(g4_model *m, const char *which, int T, int reps, g4_kernel_timing *out) {
    memset(out, 0, sizeof *out);
    g4_mm_op ops[3];
    static kt_call calls[KT_MAX_CALLS];
    if (strcmp(which, "decode") && !kt_bind(m, which, 0, T, NULL, NULL, ops))
        return g4_fail(G4_ERR_INPUT, "bench: unknown matrix group '%s' (qkv, o, gateup, down, lm_head, decode)", which);
    const int n_calls = kt_calls(m, which, calls);
    /* scratch for the widest call of the sweep */
    int max_rows = 0, max_cols = 0;
    for (int c = 0; c < n_calls; c++) {
        const int n = kt_bind(m, calls[c].group, calls[c].layer, T, NULL, NULL, ops);
        int rows = 0;
        for (int i = 0; i < n; i++) {
            rows += ops[i].w->rows;
            if (ops[i].w->cols > max_cols) max_cols = ops[i].w->cols;
            out->bytes += mat_bytes(ops[i].w);
            out->flops += 2.0 * T * mat_params(ops[i].w);
        }
        if (rows > max_rows) max_rows = rows;
    }
    float *x = malloc((size_t)T * max_cols * sizeof(float));
    float *y = malloc((size_t)T * max_rows * sizeof(float));
    if (!x || !y) { free(x); free(y); return g4_fail(G4_ERR_NOMEM, "out of memory"); }
    uint32_t s = 12345;
    for (size_t i = 0; i < (size_t)T * max_cols; i++) { s = s * 1664525u + 1013904223u; x[i] = (float)(s >> 8) / 16777216.0f - 0.5f; }
    /* Every rep sweeps the group over ALL layers, one parallel loop per layer as the forward pass
     * does, so the weights stream from DRAM (a single layer's matrices would sit in L3). Decode
     * sweeps (T < 4) are each preceded by a plain read of the same bytes in the same order; the
     * kernel's speed over that read's, rep by rep, is what the kernel makes of the memory of its
     * own moment (a shared host's bandwidth can drift widely within seconds). */
    double best = 1e30, best_read = 1e30, ratio[64];
    int n_ratio = 0;
    if (reps > 64) reps = 64;
    for (int r = 0; r <= (reps < 1 ? 1 : reps); r++) {   /* rep 0: warm-up */
        double t_read = 0;
        if (T < 4) {
            const double t0 = g4_now();
            for (int c = 0; c < n_calls; c++) read_group(m, ops, kt_bind(m, calls[c].group, calls[c].layer, T, x, y, ops));
            t_read = g4_now() - t0;
        }
        double t0 = g4_now();
        for (int c = 0; c < n_calls; c++) {
            /* the forward pass's own call: its task split, and --act-q8's quantization of the input */
            g4_matmul(m->mm, T, kt_bind(m, calls[c].group, calls[c].layer, T, x, y, ops), ops);
        }
        double dt = g4_now() - t0;
        if (r > 0 && dt < best) best = dt;
        if (r > 0 && t_read > 0) {
            if (t_read < best_read) best_read = t_read;
            ratio[n_ratio++] = t_read / dt;
        }
    }
    free(x);
    free(y);
    out->seconds = best;
    out->read_seconds = n_ratio ? best_read : 0;
    g4_sort_doubles(ratio, n_ratio);
    out->of_read = !n_ratio ? -1 : n_ratio % 2 ? ratio[n_ratio / 2] : 0.5 * (ratio[n_ratio / 2 - 1] + ratio[n_ratio / 2]);
    out->rows = max_rows;
    out->cols = max_cols;
    out->T = T;
    out->n_calls = n_calls;
    return G4_OK;
}

/* The kernel table is chosen once per process (CPU features, G4_CPU_ISA), so every model takes
 * the same path; the model argument keeps the accessor right should a model ever pick its own. */
const char *g4_model_kernel_path(const g4_model *m) {
    (void)m;
    return g4_bench_kernel_path();
}

int g4_model_bf16_units(const g4_model *m) {
    (void)m;
    const g4_kernels *k = g4_kernels_get();
    return k && k->matmul_xbf16;
}
