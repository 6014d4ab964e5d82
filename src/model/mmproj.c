/* mmproj.c — llama.cpp's mmproj GGUF for Gemma 4 unified (format in mmproj.h). Its converter
 * renames the HF tensors (v.patch_embd = patch_dense, v.patch_norm.1/2/3 = patch_ln1 / patch_ln2 /
 * pos_norm, v.position_embd = pos_embedding, mm.input_projection / mm.a.input_projection = the
 * vision / audio embedding projections) and changes two layouts for ggml's im2col: patch_dense's
 * columns and patch_ln1 are permuted from (y, x, channel) to (channel, y, x) order, and
 * pos_embedding [posemb][2][E] is stored [2][posemb][E]. Both are undone here, element for element,
 * so the embedders read exactly the HF checkpoint's values. */
#include "model/mmproj.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

int g4_is_mmproj(const g4_gguf *g) {
    const char *a;
    size_t n;
    int found;
    return !g4_gguf_get_str(g, "general.architecture", &a, &n, &found) && found && n == 4 && !memcmp(a, "clip", 4);
}

static const g4_gguf_tensor *find(const g4_gguf *g, const char *name) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

static g4_status need(const g4_gguf *g, const char *name, const g4_gguf_tensor **out) {
    if (!(*out = find(g, name))) return g4_fail(G4_ERR_INPUT, "%s: mmproj has no tensor '%s'", g->path, name);
    return G4_OK;
}

/* A projector type key: absent is 0, "want" is 1, anything else an error naming it. */
static g4_status projector(const g4_gguf *g, const char *key, const char *want, int *has) {
    const char *s;
    size_t n;
    int found;
    g4_status st = g4_gguf_get_str(g, key, &s, &n, &found);
    *has = 0;
    if (st || !found) return st;
    if (n != strlen(want) || memcmp(s, want, n))
        return g4_fail(G4_ERR_INPUT, "%s: %s '%.*s' is not Gemma 4 unified's '%s'", g->path, key, (int)(n < 64 ? n : 64), s, want);
    *has = 1;
    return G4_OK;
}

static float eps_of(const g4_gguf *g, const char *key) {
    double v;
    int found;
    return !g4_gguf_get_float(g, key, &v, &found) && found ? (float)v : 1e-6f;
}

g4_status g4_mmproj_geom_read(const g4_gguf *g, g4_mmproj_geom *o) {
    memset(o, 0, sizeof *o);
    if (!g4_is_mmproj(g)) return g4_fail(G4_ERR_INPUT, "%s: not an mmproj GGUF (general.architecture is not 'clip')", g->path);
    g4_status st;
    if ((st = projector(g, "clip.vision.projector_type", "gemma4uv", &o->has_vision)) ||
        (st = projector(g, "clip.audio.projector_type", "gemma4ua", &o->has_audio)))
        return st;
    if (!o->has_vision && !o->has_audio)
        return g4_fail(G4_ERR_INPUT, "%s: mmproj has neither a gemma4uv nor a gemma4ua projector", g->path);
    const g4_gguf_tensor *pe, *pos, *proj, *ap;
    if (o->has_vision) {
        int64_t patch;
        int found;
        if ((st = need(g, "v.patch_embd.weight", &pe)) || (st = need(g, "v.position_embd.weight", &pos)) ||
            (st = need(g, "mm.input_projection.weight", &proj)) ||
            (st = g4_gguf_get_int(g, "clip.vision.patch_size", &patch, &found)))
            return st;
        /* the converter writes the model's patch_size; the merged patch (patch x pooling pixels
         * a side) is what patch_embd reads, 3 values a pixel */
        const int64_t P = (int64_t)pe->ne[0], side = (int64_t)llround(sqrt((double)P / 3));
        if (!found || patch < 1 || side * side * 3 != P || side % patch || pe->n_dims != 2 || pos->n_dims != 3 ||
            pos->ne[0] != pe->ne[1] || pos->ne[2] != 2 || proj->n_dims != 2 || proj->ne[0] != pe->ne[1])
            return g4_fail(G4_ERR_INPUT, "%s: mmproj vision tensors do not fit together (patch_embd [%llu, %llu], "
                           "position_embd %d dims, input_projection [%llu, %llu], patch_size %lld)", g->path,
                           (unsigned long long)pe->ne[0], (unsigned long long)pe->ne[1], pos->n_dims,
                           (unsigned long long)proj->ne[0], (unsigned long long)proj->ne[1], found ? (long long)patch : -1LL);
        o->patch_size = (int)patch;
        o->pooling_kernel = (int)(side / patch);
        int64_t scale;
        if ((st = g4_gguf_get_int(g, "clip.vision.projector.scale_factor", &scale, &found))) return st;
        if (found && scale != o->pooling_kernel)
            return g4_fail(G4_ERR_INPUT, "%s: clip.vision.projector.scale_factor %lld disagrees with the %lld-pixel merged "
                           "patches of v.patch_embd", g->path, (long long)scale, (long long)side);
        o->embed = (int)pe->ne[1];
        o->posemb = (int)pos->ne[1];
        o->hidden = (int)proj->ne[1];
        o->vis_eps = eps_of(g, "clip.vision.attention.layer_norm_epsilon");
    }
    if (o->has_audio) {
        if ((st = need(g, "mm.a.input_projection.weight", &ap))) return st;
        if (ap->n_dims != 2 || (o->has_vision && (int)ap->ne[1] != o->hidden))
            return g4_fail(G4_ERR_INPUT, "%s: mm.a.input_projection.weight does not project into the vision projection's "
                           "%d-wide hidden size", g->path, o->hidden);
        o->audio_frame = (int)ap->ne[0];
        o->hidden = (int)ap->ne[1];
        o->aud_eps = eps_of(g, "clip.audio.attention.layer_norm_epsilon");
    }
    return G4_OK;
}

/* HF name <- mmproj name; `layout` says how to undo the converter's reordering. */
enum { AS_IS, PATCH_VEC, PATCH_COLS, POS_SWAP };
static const struct { const char *gguf, *hf; int layout; } names[] = {
    {"v.patch_norm.1.weight", "model.vision_embedder.patch_ln1.weight", PATCH_VEC},
    {"v.patch_norm.1.bias", "model.vision_embedder.patch_ln1.bias", PATCH_VEC},
    {"v.patch_embd.weight", "model.vision_embedder.patch_dense.weight", PATCH_COLS},
    {"v.patch_embd.bias", "model.vision_embedder.patch_dense.bias", AS_IS},
    {"v.patch_norm.2.weight", "model.vision_embedder.patch_ln2.weight", AS_IS},
    {"v.patch_norm.2.bias", "model.vision_embedder.patch_ln2.bias", AS_IS},
    {"v.position_embd.weight", "model.vision_embedder.pos_embedding", POS_SWAP},
    {"v.patch_norm.3.weight", "model.vision_embedder.pos_norm.weight", AS_IS},
    {"v.patch_norm.3.bias", "model.vision_embedder.pos_norm.bias", AS_IS},
    {"mm.input_projection.weight", "model.embed_vision.embedding_projection.weight", AS_IS},
    {"mm.a.input_projection.weight", "model.embed_audio.embedding_projection.weight", AS_IS},
};
enum { N_NAMES = sizeof names / sizeof *names };

/* The HF (y, x, channel) index of the converter's (channel, y, x) position i in a side^2 * 3 patch. */
static size_t hwc_of_chw(size_t i, size_t side) {
    const size_t ch = i / (side * side), row = i % (side * side) / side, col = i % side;
    return row * side * 3 + col * 3 + ch;
}

/* One tensor in the HF layout, into malloc'ed memory: out->data owned by the caller. */
static g4_status to_hf(const g4_tensor *s, int layout, const char *hf_name, g4_tensor *out) {
    /* the reorderings index by these shapes: a tensor without them is refused, not read past */
    const int64_t P = s->shape[s->n_dims - 1], side = (int64_t)llround(sqrt((double)P / 3));
    const int bad = layout == PATCH_VEC ? s->n_dims != 1 || side * side * 3 != P
                  : layout == PATCH_COLS ? s->n_dims != 2 || side * side * 3 != P
                  : layout == POS_SWAP ? s->n_dims != 3 || s->shape[0] != 2 : 0;
    if (bad) return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' (%d dims) does not have the layout of a gemma4uv mmproj", s->file,
                            s->name, s->n_dims);
    *out = *s;
    out->name = (char *)hf_name;
    const size_t es = g4_dtype_size(s->dtype);
    uint8_t *d = malloc(s->nbytes ? s->nbytes : 1);
    if (!d) return g4_fail(G4_ERR_NOMEM, "out of memory binding %s", s->name);
    const uint8_t *src = s->data;
    if (layout == PATCH_VEC || layout == PATCH_COLS) {
        const size_t rows = layout == PATCH_COLS ? (size_t)s->shape[0] : 1;
        for (size_t r = 0; r < rows; r++)
            for (size_t i = 0; i < (size_t)P; i++)
                memcpy(d + (r * (size_t)P + hwc_of_chw(i, (size_t)side)) * es, src + (r * (size_t)P + i) * es, es);
    } else if (layout == POS_SWAP) {   /* [2][posemb][E] -> [posemb][2][E] */
        const size_t n = (size_t)s->shape[1], row = (size_t)s->shape[2] * es;
        for (size_t a = 0; a < 2; a++)
            for (size_t i = 0; i < n; i++) memcpy(d + (i * 2 + a) * row, src + (a * n + i) * row, row);
        out->shape[0] = s->shape[1];
        out->shape[1] = 2;
    } else {
        memcpy(d, src, s->nbytes);
    }
    out->data = d;
    return G4_OK;
}

/* The mmproj's tensors as an HF tensor set; every tensor must be one the embedders take. */
static g4_status hf_tensors(const g4_tensor_set *src, const char *path, g4_tensor_set *out) {
    memset(out, 0, sizeof *out);
    if (!(out->tensors = calloc(N_NAMES, sizeof *out->tensors))) return g4_fail(G4_ERR_NOMEM, "out of memory");
    for (int i = 0; i < src->n_tensors; i++) {
        const g4_tensor *s = &src->tensors[i];
        int k = 0;
        while (k < N_NAMES && strcmp(names[k].gguf, s->name)) k++;
        if (k == N_NAMES)
            return g4_fail(G4_ERR_INPUT, "%s: unexpected tensor '%s' (not part of a gemma4uv / gemma4ua mmproj)", path, s->name);
        if (s->dtype != G4_DT_F32 && s->dtype != G4_DT_F16 && s->dtype != G4_DT_BF16)
            return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' has dtype %s; the embedders read f32, f16 or bf16 (convert the "
                           "mmproj with --outtype f32, f16 or bf16)", path, s->name, g4_dtype_name(s->dtype));
        g4_status st = to_hf(s, names[k].layout, names[k].hf, &out->tensors[out->n_tensors]);
        if (st) return st;
        out->n_tensors++;
    }
    return G4_OK;
}

static void free_hf(g4_tensor_set *t) {
    for (int i = 0; i < t->n_tensors; i++) free((void *)t->tensors[i].data);
    free(t->tensors);
}

/* The config fields the mmproj implies (the text GGUF has no vision_config / audio_config). */
static g4_status set_config(g4_config *c, const g4_mmproj_geom *geo, const char *path) {
    if (geo->hidden != c->hidden_size)
        return g4_fail(G4_ERR_INPUT, "%s: the mmproj projects into %d dimensions, the model's hidden size is %d (an mmproj "
                       "of another model?)", path, geo->hidden, c->hidden_size);
    if ((c->has_vision = geo->has_vision)) {
        c->vis_patch_size = geo->patch_size;
        c->vis_pooling_kernel = geo->pooling_kernel;
        c->vis_embed_dim = c->vis_proj_dims = geo->embed;
        c->vis_posemb_size = geo->posemb;
        c->vis_rms_norm_eps = geo->vis_eps;
        c->vis_bidirectional = 1;   /* mtmd decodes gemma4uv images non-causally, as transformers */
    }
    if ((c->has_audio = geo->has_audio)) {
        c->aud_embed_dim = geo->audio_frame;
        c->aud_rms_norm_eps = geo->aud_eps;
    }
    return G4_OK;
}

g4_status g4_mmproj_bind(g4_model *m, const char *path, int bind_weights) {
    g4_gguf *g;
    g4_status st = g4_gguf_open(path, &g);
    if (st) return st;
    g4_mmproj_geom geo;
    g4_tensor_set raw = {0}, hf = {0};
    if (!(st = g4_mmproj_geom_read(g, &geo)) && !(st = set_config(&m->cfg, &geo, path)) && bind_weights &&
        !(st = g4_gguf_export_tensors(g, &raw)) && !(st = hf_tensors(&raw, path, &hf))) {
        /* the embedders bind from m->ts by HF name and copy what they keep */
        g4_tensor_set text = m->ts;
        m->ts = hf;
        if (!(st = g4_vision_bind(m))) st = g4_audio_bind(m);
        m->ts = text;
    }
    free_hf(&hf);
    g4_st_close(&raw);
    g4_gguf_free(g);
    return st;
}
