/* vision.c — Gemma 4 unified's encoder-free vision embedder (Gemma4UnifiedVisionEmbedder): binding
 * its weights from an HF checkpoint against vision_config, and g4_image_embed, which runs merged
 * patches through LayerNorm -> Linear+bias -> LayerNorm -> + position rows (x, then y) ->
 * LayerNorm -> RMSNorm without weight -> projection, in float32 with double sums. */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/threadpool.h"

/* A matrix kept in its stored dtype (a copy: the checkpoint mapping may be let go after load),
 * widened a row at a time. */
typedef struct {
    g4_dtype dtype;
    int rows, cols;
    size_t row_bytes;
    void *data;
} vmat;

struct g4_vision {
    int patch_dim, embed, posemb, hidden;
    float eps_rms;
    float *ln1_w, *ln1_b, *dense_b, *ln2_w, *ln2_b, *pos_w, *pos_b;  /* norms' weight / bias, dense bias */
    vmat dense;      /* [embed][patch_dim] */
    vmat pos;        /* [posemb * 2][embed]: row 2 * i + axis */
    vmat proj;       /* [hidden][embed] */
};

/* The names save_pretrained writes (transformers' reverse conversion: model.vision_embedder.*,
 * model.embed_vision.embedding_projection) first, then the modules' own names. */
static g4_tensor *find2(const g4_model *m, const char *a, const char *b, const char **used) {
    g4_tensor *t = g4_st_find(&m->ts, a);
    *used = a;
    if (!t) { t = g4_st_find(&m->ts, b); *used = b; }
    if (!t) *used = a;
    return t;
}

static g4_status get_tensor(const g4_model *m, const char *leaf, const char *alt_leaf, int n_dims,
                            const int64_t *shape, g4_tensor **out) {
    char a[160], b[160];
    snprintf(a, sizeof a, "model.vision_embedder.%s", leaf);
    snprintf(b, sizeof b, "model.embed_vision.%s", leaf);
    if (alt_leaf) {
        snprintf(a, sizeof a, "model.embed_vision.%s", leaf);
        snprintf(b, sizeof b, "model.embed_vision.%s", alt_leaf);
    }
    const char *name;
    g4_tensor *t = find2(m, a, b, &name);
    if (!t) return g4_fail(G4_ERR_INPUT, "model has vision_config but no tensor '%s' (or '%s')", a, b);
    int ok = t->n_dims == n_dims;
    for (int i = 0; ok && i < n_dims; i++) ok = t->shape[i] == shape[i];
    if (!ok) {
        char want[64] = "", *p = want;
        for (int i = 0; i < n_dims; i++) p += snprintf(p, want + sizeof want - p, i ? ", %lld" : "%lld", (long long)shape[i]);
        return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' does not have the shape [%s] vision_config implies", t->file, name, want);
    }
    if (t->dtype != G4_DT_F32 && t->dtype != G4_DT_BF16 && t->dtype != G4_DT_F16)
        return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' has dtype %s; the vision embedder reads f32, bf16 or f16",
                       t->file, name, g4_dtype_name(t->dtype));
    t->used = 1;
    *out = t;
    return G4_OK;
}

static g4_status get_vec(const g4_model *m, const char *leaf, int64_t n, float **out) {
    g4_tensor *t;
    g4_status st = get_tensor(m, leaf, NULL, 1, &n, &t);
    if (st) return st;
    if (!(*out = malloc(sizeof(float) * (size_t)n))) return g4_fail(G4_ERR_NOMEM, "out of memory binding %s", leaf);
    g4_to_f32(t->dtype, t->data, (size_t)n, *out);
    return G4_OK;
}

static g4_status get_mat(const g4_model *m, const char *leaf, const char *alt, int n_dims, const int64_t *shape,
                         int rows, int cols, vmat *out) {
    g4_tensor *t;
    g4_status st = get_tensor(m, leaf, alt, n_dims, shape, &t);
    if (st) return st;
    out->dtype = t->dtype;
    out->rows = rows;
    out->cols = cols;
    out->row_bytes = t->nbytes / rows;
    if (!(out->data = malloc(t->nbytes))) return g4_fail(G4_ERR_NOMEM, "out of memory binding %s", leaf);
    memcpy(out->data, t->data, t->nbytes);
    return G4_OK;
}

void g4_vision_free(g4_vision *v) {
    if (!v) return;
    float *vecs[] = {v->ln1_w, v->ln1_b, v->dense_b, v->ln2_w, v->ln2_b, v->pos_w, v->pos_b};
    for (size_t i = 0; i < sizeof vecs / sizeof *vecs; i++) free(vecs[i]);
    free(v->dense.data);
    free(v->pos.data);
    free(v->proj.data);
    free(v);
}

g4_status g4_vision_bind(g4_model *m) {
    const g4_config *c = &m->cfg;
    if (!c->has_vision) return G4_OK;
    if (c->vis_proj_dims != c->vis_embed_dim)
        return g4_fail(G4_ERR_INPUT, "config.json: vision_config output_proj_dims %d differs from mm_embed_dim %d "
                       "(the projection reads the position-normed patch embedding)", c->vis_proj_dims, c->vis_embed_dim);
    g4_vision *v = calloc(1, sizeof *v);
    if (!v) return g4_fail(G4_ERR_NOMEM, "out of memory");
    int side = c->vis_patch_size * c->vis_pooling_kernel;
    v->patch_dim = side * side * 3;
    v->embed = c->vis_embed_dim;
    v->posemb = c->vis_posemb_size;
    v->hidden = c->hidden_size;
    v->eps_rms = c->vis_rms_norm_eps;
    int64_t P = v->patch_dim, E = v->embed;
    const int64_t dense_shape[2] = {E, P}, pos_shape[3] = {v->posemb, 2, E}, proj_shape[2] = {v->hidden, E};
    g4_status st;
    if ((st = get_vec(m, "patch_ln1.weight", P, &v->ln1_w)) || (st = get_vec(m, "patch_ln1.bias", P, &v->ln1_b)) ||
        (st = get_mat(m, "patch_dense.weight", NULL, 2, dense_shape, (int)E, (int)P, &v->dense)) ||
        (st = get_vec(m, "patch_dense.bias", E, &v->dense_b)) ||
        (st = get_vec(m, "patch_ln2.weight", E, &v->ln2_w)) || (st = get_vec(m, "patch_ln2.bias", E, &v->ln2_b)) ||
        (st = get_mat(m, "pos_embedding", NULL, 3, pos_shape, v->posemb * 2, (int)E, &v->pos)) ||
        (st = get_vec(m, "pos_norm.weight", E, &v->pos_w)) || (st = get_vec(m, "pos_norm.bias", E, &v->pos_b)) ||
        (st = get_mat(m, "embedding_projection.weight", "multimodal_embedder.embedding_projection.weight", 2,
                      proj_shape, v->hidden, (int)E, &v->proj))) {
        g4_vision_free(v);
        return st;
    }
    m->vision = v;
    return G4_OK;
}

/* nn.LayerNorm (eps 1e-5, weight and bias) in place */
static void layer_norm(float *x, int n, const float *w, const float *b) {
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++) s += x[i];
    double mean = s / n;
    for (int i = 0; i < n; i++) ss += (x[i] - mean) * (x[i] - mean);
    double r = 1.0 / sqrt(ss / n + 1e-5);
    for (int i = 0; i < n; i++) x[i] = (float)((x[i] - mean) * r * w[i] + b[i]);
}

static void widen_row(const vmat *w, int r, float *dst) {
    g4_to_f32(w->dtype, (const char *)w->data + (size_t)r * w->row_bytes, (size_t)w->cols, dst);
}

/* The embedder in stages over all patches at once, so that each weight row is widened once and
 * read against every patch: norms per patch, matrix products per block of output rows. */
enum { ROWS_PER_TASK = 16 };

typedef struct {
    const g4_vision *v;
    const g4_image *im;
    int n;                 /* patches */
    float *x;              /* [n][patch_dim] normed patches */
    float *h;              /* [n][embed] */
    float *out;            /* [n][hidden] */
    float *rows;           /* [threads][max(patch_dim, embed)] widened weight rows */
    int row_len;
} embed_job;

static void stage_ln1(void *ctx, int p, int thread) {
    (void)thread;
    embed_job *j = ctx;
    const g4_vision *v = j->v;
    float *x = j->x + (size_t)p * v->patch_dim;
    memcpy(x, j->im->patches + (size_t)p * v->patch_dim, sizeof(float) * v->patch_dim);
    layer_norm(x, v->patch_dim, v->ln1_w, v->ln1_b);
}

/* y[p][o] = sum_i W[o][i] in[p][i] (+ bias[o]) for the task's block of rows o, every patch p */
static void linear_rows(embed_job *j, const vmat *W, const float *in, const float *bias, float *y, int task, int thread) {
    float *row = j->rows + (size_t)thread * j->row_len;
    int o1 = (task + 1) * ROWS_PER_TASK < W->rows ? (task + 1) * ROWS_PER_TASK : W->rows;
    for (int o = task * ROWS_PER_TASK; o < o1; o++) {
        widen_row(W, o, row);
        for (int p = 0; p < j->n; p++) {
            const float *x = in + (size_t)p * W->cols;
            double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
            int i = 0;
            for (; i + 4 <= W->cols; i += 4) {
                a0 += (double)row[i] * x[i];
                a1 += (double)row[i + 1] * x[i + 1];
                a2 += (double)row[i + 2] * x[i + 2];
                a3 += (double)row[i + 3] * x[i + 3];
            }
            for (; i < W->cols; i++) a0 += (double)row[i] * x[i];
            double acc = (a0 + a1) + (a2 + a3);
            y[(size_t)p * W->rows + o] = (float)(bias ? acc + bias[o] : acc);
        }
    }
}

static void stage_dense(void *ctx, int task, int thread) {
    embed_job *j = ctx;
    linear_rows(j, &j->v->dense, j->x, j->v->dense_b, j->h, task, thread);
}

static void stage_mid(void *ctx, int p, int thread) {
    embed_job *j = ctx;
    const g4_vision *v = j->v;
    int E = v->embed;
    float *h = j->h + (size_t)p * E, *px = j->rows + (size_t)thread * j->row_len, *py = px + E;
    layer_norm(h, E, v->ln2_w, v->ln2_b);
    /* factorised positions: pos[x, 0] + pos[y, 1] summed first, then added */
    widen_row(&v->pos, 2 * j->im->positions[2 * p], px);
    widen_row(&v->pos, 2 * j->im->positions[2 * p + 1] + 1, py);
    for (int i = 0; i < E; i++) h[i] += px[i] + py[i];
    layer_norm(h, E, v->pos_w, v->pos_b);
    /* Gemma4UnifiedRMSNorm without scale: x * (mean(x^2) + eps)^-0.5 */
    double ss = 0;
    for (int i = 0; i < E; i++) ss += (double)h[i] * h[i];
    double r = 1.0 / sqrt(ss / E + v->eps_rms);
    for (int i = 0; i < E; i++) h[i] = (float)(h[i] * r);
}

static void stage_proj(void *ctx, int task, int thread) {
    embed_job *j = ctx;
    linear_rows(j, &j->v->proj, j->h, NULL, j->out, task, thread);
}

/* y[p] = W · x[p] for n rows through the model's matmul layer (the text layers' kernels, float32
 * sums: within the 1e-5 the soft-token goldens allow, and many times faster than the double
 * loops above), in blocks of the rows its scratch holds. 0 when W's rows are wider than that
 * scratch (the loops above then run). */
static int matmul_rows(const g4_model *m, const vmat *W, const float *x, int n, float *y) {
    const int max_k = m->cfg.hidden_size > m->cfg.intermediate_size ? m->cfg.hidden_size : m->cfg.intermediate_size;
    if (W->cols > max_k || !m->mm) return 0;
    const g4_mat w = {W->dtype, W->data, W->rows, W->cols};
    for (int t0 = 0; t0 < n; t0 += m->max_rows) {
        const int T = n - t0 < m->max_rows ? n - t0 : m->max_rows;
        g4_mm_op op = {&w, x + (size_t)t0 * W->cols, y + (size_t)t0 * W->rows, W->rows};
        g4_matmul(m->mm, T, 1, &op);
    }
    return 1;
}

g4_status g4_image_embed(const g4_model *m, const g4_image *im, float *out) {
    const g4_vision *v = m->vision;
    if (!v)
        return g4_fail(G4_ERR_INPUT, "model has no vision embedder (%s)", !m->cfg.has_vision
                       ? "a GGUF, or a config without vision_config" : "a .g4c pack without the vision weights: re-pack it");
    int side = m->cfg.vis_patch_size * m->cfg.vis_pooling_kernel;
    if (im->patch_dim != v->patch_dim)
        return g4_fail(G4_ERR_INPUT, "image patches of %d values do not fit the vision embedder's %d "
                       "(vision_config: %d-pixel merged patches)", im->patch_dim, v->patch_dim, side);
    for (int p = 0; p < im->n_patches; p++)
        for (int a = 0; a < 2; a++)
            if (im->positions[2 * p + a] < 0 || im->positions[2 * p + a] >= v->posemb)
                return g4_fail(G4_ERR_INPUT, "image patch %c position %d is outside the vision position table "
                               "(mm_posemb_size %d)", a ? 'y' : 'x', im->positions[2 * p + a], v->posemb);
    int n = im->n_patches, threads = g4_pool_size(m->pool);
    embed_job j = {.v = v, .im = im, .n = n, .out = out};
    j.row_len = v->patch_dim > 2 * v->embed ? v->patch_dim : 2 * v->embed;
    j.x = malloc(sizeof(float) * (size_t)n * v->patch_dim);
    j.h = malloc(sizeof(float) * (size_t)n * v->embed);
    j.rows = malloc(sizeof(float) * (size_t)threads * j.row_len);
    g4_status st = G4_OK;
    if (!j.x || !j.h || !j.rows) st = g4_fail(G4_ERR_NOMEM, "out of memory embedding a %d-patch image", n);
    else if (n > 0) {
        g4_pool_run(m->pool, n, stage_ln1, &j);
        if (matmul_rows(m, &v->dense, j.x, n, j.h))   /* the kernel layer, then the bias */
            for (int p = 0; p < n; p++)
                for (int o = 0; o < v->embed; o++) j.h[(size_t)p * v->embed + o] += v->dense_b[o];
        else g4_pool_run(m->pool, (v->embed + ROWS_PER_TASK - 1) / ROWS_PER_TASK, stage_dense, &j);
        g4_pool_run(m->pool, n, stage_mid, &j);
        if (!matmul_rows(m, &v->proj, j.h, n, out))
            g4_pool_run(m->pool, (v->hidden + ROWS_PER_TASK - 1) / ROWS_PER_TASK, stage_proj, &j);
    }
    free(j.x);
    free(j.h);
    free(j.rows);
    return st;
}

int g4_model_has_vision(const g4_model *m) { return m->vision != NULL; }
