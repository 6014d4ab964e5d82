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

typedef struct {
    const g4_vision *v;
    const g4_image *im;
    float *out;
    volatile int oom;   /* a task could not get its scratch */
} embed_job;

static void widen_row(const vmat *w, int r, float *dst) {
    g4_to_f32(w->dtype, (const char *)w->data + (size_t)r * w->row_bytes, (size_t)w->cols, dst);
}

/* y[o] = sum_i W[o][i] x[i] (+ bias), W widened a row at a time into `row` */
static void linear(const vmat *W, const float *x, const float *bias, float *y, float *row) {
    for (int o = 0; o < W->rows; o++) {
        widen_row(W, o, row);
        double acc = 0;
        for (int i = 0; i < W->cols; i++) acc += (double)row[i] * x[i];
        y[o] = (float)(bias ? acc + bias[o] : acc);
    }
}

/* one task per patch */
static void embed_patch(void *ctx, int p, int thread) {
    (void)thread;
    embed_job *j = ctx;
    const g4_vision *v = j->v;
    int E = v->embed, P = v->patch_dim;
    int wmax = P > E ? P : E;
    float *buf = malloc(sizeof(float) * ((size_t)P + 3 * (size_t)E + (size_t)wmax));
    if (!buf) { j->oom = 1; return; }
    float *x = buf, *h = x + P, *px = h + E, *py = px + E, *row = py + E;
    memcpy(x, j->im->patches + (size_t)p * P, sizeof(float) * P);
    layer_norm(x, P, v->ln1_w, v->ln1_b);
    linear(&v->dense, x, v->dense_b, h, row);
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
    linear(&v->proj, h, NULL, j->out + (size_t)p * v->hidden, row);
    free(buf);
}

g4_status g4_image_embed(const g4_model *m, const g4_image *im, float *out) {
    const g4_vision *v = m->vision;
    if (!v)
        return g4_fail(G4_ERR_INPUT, "model has no vision embedder (%s)", !m->cfg.has_vision
                       ? "a GGUF, or a config without vision_config" : "a .g4c pack carries no vision weights");
    int side = m->cfg.vis_patch_size * m->cfg.vis_pooling_kernel;
    if (im->patch_dim != v->patch_dim)
        return g4_fail(G4_ERR_INPUT, "image patches of %d values do not fit the vision embedder's %d "
                       "(vision_config: %d-pixel merged patches)", im->patch_dim, v->patch_dim, side);
    for (int p = 0; p < im->n_patches; p++)
        for (int a = 0; a < 2; a++)
            if (im->positions[2 * p + a] < 0 || im->positions[2 * p + a] >= v->posemb)
                return g4_fail(G4_ERR_INPUT, "image patch %c position %d is outside the vision position table "
                               "(mm_posemb_size %d)", a ? 'y' : 'x', im->positions[2 * p + a], v->posemb);
    embed_job j = {v, im, out, 0};
    g4_pool_run(m->pool, im->n_patches, embed_patch, &j);
    return j.oom ? g4_fail(G4_ERR_NOMEM, "out of memory embedding an image") : G4_OK;
}
