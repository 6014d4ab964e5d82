/* audio.c — Gemma 4 unified's encoder-free audio embedder (transformers' embed_audio, a
 * Gemma4UnifiedMultimodalEmbedder): its projection bound from an HF checkpoint against
 * audio_config, and g4_audio_embed: each frame of raw samples through RMSNorm without weight ->
 * projection into the hidden size, in float32 (the projection through the model's matmul layer
 * where it can, else double sums). */
#include "model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/threadpool.h"

struct g4_audio_embedder {
    int dim, hidden;      /* audio_embed_dim (samples a frame), the language model's hidden size */
    float eps;
    float *proj;          /* [hidden][dim] widened to float32 */
};

g4_status g4_audio_bind(g4_model *m) {
    const g4_config *c = &m->cfg;
    if (!c->has_audio) return G4_OK;
    static const char *const names[2] = {"model.embed_audio.embedding_projection.weight",
                                         "model.embed_audio.multimodal_embedder.embedding_projection.weight"};
    g4_tensor *t = NULL;
    const char *name = names[0];
    for (int i = 0; i < 2 && !t; i++) t = g4_st_find(&m->ts, name = names[i]);
    if (!t) return g4_fail(G4_ERR_INPUT, "model has audio_config but no tensor '%s'", names[0]);
    if (t->n_dims != 2 || t->shape[0] != c->hidden_size || t->shape[1] != c->aud_embed_dim)
        return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' does not have the shape [%d, %d] audio_config implies", t->file,
                       name, c->hidden_size, c->aud_embed_dim);
    if (t->dtype != G4_DT_F32 && t->dtype != G4_DT_BF16 && t->dtype != G4_DT_F16)
        return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' has dtype %s; the audio embedder reads f32, bf16 or f16", t->file,
                       name, g4_dtype_name(t->dtype));
    g4_audio_embedder *a = calloc(1, sizeof *a);
    const size_t n = (size_t)c->hidden_size * (size_t)c->aud_embed_dim;
    if (a) a->proj = malloc(n * sizeof(float));
    if (!a || !a->proj) { g4_audio_embedder_free(a); return g4_fail(G4_ERR_NOMEM, "out of memory binding %s", name); }
    g4_to_f32(t->dtype, t->data, n, a->proj);
    t->used = 1;
    a->dim = c->aud_embed_dim;
    a->hidden = c->hidden_size;
    a->eps = c->aud_rms_norm_eps;
    m->audio = a;
    return G4_OK;
}

void g4_audio_embedder_free(g4_audio_embedder *a) {
    if (!a) return;
    free(a->proj);
    free(a);
}

int g4_model_has_audio(const g4_model *m) { return m->audio != NULL; }

/* One frame a task, on the model's worker threads: x = RMSNorm(frame) without weight, then
 * out = proj · x with double sums. */
typedef struct {
    const g4_audio_embedder *a;
    const g4_audio *au;
    float *out;
    float *x;   /* [threads][dim] */
} audio_job;

static void embed_frame(void *ctx, int f, int thread) {
    const audio_job *j = ctx;
    const g4_audio_embedder *a = j->a;
    const float *s = j->au->frames + (size_t)f * a->dim;
    float *x = j->x + (size_t)thread * a->dim;
    /* Gemma4UnifiedRMSNorm without scale: x * (mean(x^2) + eps)^-0.5 */
    double ss = 0;
    for (int i = 0; i < a->dim; i++) ss += (double)s[i] * s[i];
    const double r = 1.0 / sqrt(ss / a->dim + a->eps);
    for (int i = 0; i < a->dim; i++) x[i] = (float)(s[i] * r);
    float *y = j->out + (size_t)f * a->hidden;
    for (int o = 0; o < a->hidden; o++) {
        const float *w = a->proj + (size_t)o * a->dim;
        double acc = 0;
        for (int i = 0; i < a->dim; i++) acc += (double)w[i] * x[i];
        y[o] = (float)acc;
    }
}

/* One frame a task: only the weightless RMSNorm, into x [n_frames][dim] (the matmul layer then
 * projects every frame at once). */
static void norm_frame(void *ctx, int f, int thread) {
    (void)thread;
    const audio_job *j = ctx;
    const g4_audio_embedder *a = j->a;
    const float *s = j->au->frames + (size_t)f * a->dim;
    float *x = j->x + (size_t)f * a->dim;
    double ss = 0;
    for (int i = 0; i < a->dim; i++) ss += (double)s[i] * s[i];
    const double r = 1.0 / sqrt(ss / a->dim + a->eps);
    for (int i = 0; i < a->dim; i++) x[i] = (float)(s[i] * r);
}

g4_status g4_audio_embed(const g4_model *m, const g4_audio *au, float *out) {
    const g4_audio_embedder *a = m->audio;
    if (!a) return g4_fail(G4_ERR_INPUT, "model has no audio embedder (a GGUF, a .g4c, or a config without audio_config)");
    if (au->frame != a->dim)
        return g4_fail(G4_ERR_INPUT, "audio frames of %d samples do not fit the audio embedder's %d (audio_config.audio_embed_dim)",
                       au->frame, a->dim);
    audio_job j = {.a = a, .au = au, .out = out};
    /* the projection's products through the text layers' kernels (float32 sums; 30 s of audio
     * is 750 x 3840 x 640 products, seconds as double loops) wherever its rows fit their scratch,
     * as vision.c's matmul_rows */
    const int max_k = m->cfg.hidden_size > m->cfg.intermediate_size ? m->cfg.hidden_size : m->cfg.intermediate_size;
    if (m->mm && a->dim <= max_k && au->n_frames > 0) {
        if (!(j.x = malloc((size_t)au->n_frames * (size_t)a->dim * sizeof(float))))
            return g4_fail(G4_ERR_NOMEM, "out of memory embedding audio");
        g4_pool_run(m->pool, au->n_frames, norm_frame, &j);
        const g4_mat w = {G4_DT_F32, a->proj, a->hidden, a->dim};
        for (int t0 = 0; t0 < au->n_frames; t0 += m->max_rows) {
            const int T = au->n_frames - t0 < m->max_rows ? au->n_frames - t0 : m->max_rows;
            g4_mm_op op = {&w, j.x + (size_t)t0 * a->dim, out + (size_t)t0 * a->hidden, a->hidden};
            g4_matmul(m->mm, T, 1, &op);
        }
        free(j.x);
        return G4_OK;
    }
    j.x = malloc((size_t)g4_pool_size(m->pool) * (size_t)a->dim * sizeof(float));
    if (!j.x) return g4_fail(G4_ERR_NOMEM, "out of memory embedding audio");
    if (au->n_frames > 0) g4_pool_run(m->pool, au->n_frames, embed_frame, &j);
    free(j.x);
    return G4_OK;
}
