/* weights.c — binds the checkpoint's tensors to the model's layer structs, checking every
 * name, dtype and shape against the config before the first step. Matrices stay in the file
 * mapping (zero copy); only the tiny norm vectors and layer scalars are widened to float32. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

typedef struct {
    g4_model *m;
    char prefix[64];
} binder;

static g4_status find(binder *b, const char *name, int n_dims, const int64_t *shape, g4_tensor **out) {
    g4_tensor *t = g4_st_find(&b->m->ts, name);
    if (!t) return g4_fail(G4_ERR_INPUT, "checkpoint: tensor '%s' is missing", name);
    int ok = t->n_dims == n_dims;
    for (int i = 0; ok && i < n_dims; i++) ok = t->shape[i] == shape[i];
    if (!ok) {
        char got[96] = "", want[96] = "";
        for (int i = 0; i < t->n_dims; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? "," : "", (long long)t->shape[i]);
        for (int i = 0; i < n_dims; i++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", i ? "," : "", (long long)shape[i]);
        return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' has shape [%s], config needs [%s]", t->file, name, got, want);
    }
    t->used = 1;
    *out = t;
    return G4_OK;
}

/* A matrix of `role` with full shape [rows][cols]; a pre-sharded (packed) set holds only this
 * rank's slice of it under the plan, so that is the shape checked there. */
static g4_status bind_mat(binder *b, const char *suffix, g4_role role, int layer, int rows, int cols, g4_mat *out) {
    if (b->m->presharded) {
        g4_shard s = g4_tp_shard(&b->m->plan, &b->m->cfg, role, layer);
        if (s.kind == G4_SHARD_ROWS) rows = (int)(s.hi - s.lo);
        if (s.kind == G4_SHARD_COLS) cols = (int)(s.hi - s.lo);
    }
    char name[256];
    snprintf(name, sizeof name, "%s%s", b->prefix, suffix);
    int64_t shape[2] = {rows, cols};
    g4_tensor *t;
    g4_status st = find(b, name, 2, shape, &t);
    if (st) return st;
    out->dt = t->dtype;
    out->data = t->data;
    out->rows = rows;
    out->cols = cols;
    return G4_OK;
}

static g4_status bind_vec(binder *b, const char *suffix, int n, float **out) {
    char name[256];
    snprintf(name, sizeof name, "%s%s", b->prefix, suffix);
    int64_t shape[1] = {n};
    g4_tensor *t;
    g4_status st = find(b, name, 1, shape, &t);
    if (st) return st;
    *out = malloc((size_t)n * sizeof(float));
    if (!*out) return g4_fail(G4_ERR_NOMEM, "out of memory binding %s", name);
    g4_to_f32(t->dtype, t->data, (size_t)n, *out);
    return G4_OK;
}

/* Tensors of the checkpoint that the text engine knows and deliberately does not use. */
static int ignorable(const g4_model *m, const char *name) {
    /* the encoder-free multimodal front end (patch/frame embedders); text needs none of it */
    static const char *const mm_prefixes[] = {"model.embed_vision.", "model.embed_audio.", "model.vision_embedder."};
    for (size_t i = 0; m->cfg.conditional && i < sizeof mm_prefixes / sizeof *mm_prefixes; i++)
        if (!strncmp(name, mm_prefixes[i], strlen(mm_prefixes[i]))) return 1;
    return m->cfg.tie_word_embeddings && !strcmp(name, "lm_head.weight");
}

g4_status g4_weights_bind(g4_model *m) {
    const g4_config *c = &m->cfg;
    binder b = {.m = m};
    const char *base = c->conditional ? "model.language_model." : "model.";
    g4_status st;
    snprintf(b.prefix, sizeof b.prefix, "%s", base);
    if ((st = bind_mat(&b, "embed_tokens.weight", G4_ROLE_EMBED, -1, c->vocab_size, c->hidden_size, &m->embed)) ||
        (st = bind_vec(&b, "norm.weight", c->hidden_size, &m->w_final)))
        return st;
    if (c->tie_word_embeddings) m->lm_head = m->embed;
    else {
        b.prefix[0] = 0;
        if ((st = bind_mat(&b, "lm_head.weight", G4_ROLE_LM_HEAD, -1, c->vocab_size, c->hidden_size, &m->lm_head))) return st;
    }
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    if (!m->layers) return g4_fail(G4_ERR_NOMEM, "out of memory");
    const int H = c->hidden_size, I = c->intermediate_size, Hq = c->n_heads;
    for (int l = 0; l < c->n_layers; l++) {
        g4_layer *L = &m->layers[l];
        L->is_full = c->is_full[l];
        L->head_dim = c->head_dim[l];
        L->n_kv = c->n_kv_heads[l];
        L->has_v = c->has_v_proj[l];
        const int D = L->head_dim, Hkv = L->n_kv;
        snprintf(b.prefix, sizeof b.prefix, "%slayers.%d.", base, l);
        if ((st = bind_mat(&b, "self_attn.q_proj.weight", G4_ROLE_Q, l, Hq * D, H, &L->q)) ||
            (st = bind_mat(&b, "self_attn.k_proj.weight", G4_ROLE_K, l, Hkv * D, H, &L->k)) ||
            (L->has_v && (st = bind_mat(&b, "self_attn.v_proj.weight", G4_ROLE_V, l, Hkv * D, H, &L->v))) ||
            (st = bind_mat(&b, "self_attn.o_proj.weight", G4_ROLE_O, l, H, Hq * D, &L->o)) ||
            (st = bind_mat(&b, "mlp.gate_proj.weight", G4_ROLE_GATE, l, I, H, &L->gate)) ||
            (st = bind_mat(&b, "mlp.up_proj.weight", G4_ROLE_UP, l, I, H, &L->up)) ||
            (st = bind_mat(&b, "mlp.down_proj.weight", G4_ROLE_DOWN, l, H, I, &L->down)) ||
            (st = bind_vec(&b, "input_layernorm.weight", H, &L->w_in)) ||
            (st = bind_vec(&b, "post_attention_layernorm.weight", H, &L->w_post_attn)) ||
            (st = bind_vec(&b, "pre_feedforward_layernorm.weight", H, &L->w_pre_ffw)) ||
            (st = bind_vec(&b, "post_feedforward_layernorm.weight", H, &L->w_post_ffw)) ||
            (st = bind_vec(&b, "self_attn.q_norm.weight", D, &L->w_qnorm)) ||
            (st = bind_vec(&b, "self_attn.k_norm.weight", D, &L->w_knorm)))
            return st;
        /* layer_scalar is a buffer, not a parameter: without it every layer over-scales */
        float *ls = NULL;
        if ((st = bind_vec(&b, "layer_scalar", 1, &ls))) return st;
        L->layer_scalar = ls[0];
        free(ls);
    }
    for (int i = 0; i < m->ts.n_tensors; i++) {
        const g4_tensor *t = &m->ts.tensors[i];
        if (!t->used && !ignorable(m, t->name))
            return g4_fail(G4_ERR_INPUT, "%s: unexpected tensor '%s' (not part of a %s with this config)",
                           t->file, t->name, c->architecture);
    }
    return G4_OK;
}

void g4_weights_free(g4_model *m) {
    if (m->layers)
        for (int l = 0; l < m->cfg.n_layers; l++) {
            g4_layer *L = &m->layers[l];
            free(L->w_in); free(L->w_post_attn); free(L->w_pre_ffw); free(L->w_post_ffw);
            free(L->w_qnorm); free(L->w_knorm);
        }
    free(m->layers);
    free(m->w_final);
    m->layers = NULL;
    m->w_final = NULL;
}
