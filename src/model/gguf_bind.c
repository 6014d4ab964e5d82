/* gguf_bind.c — a model from one GGUF file (llama.cpp's layout): the configuration from the
 * metadata (general.architecture "gemma3": the Gemma 3 text variant) and the tensors bound into the
 * same g4_layer structs the safetensors path fills (weights.c), zero copy. Only the Gemma 3
 * differences from Gemma 4 are set here, as config flags gemma4.c reads: (1 + w) norms,
 * query_pre_attn_scalar^-0.5 attention scaling, no v_norm, no layer_scalar, local/global RoPE θ. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf.h"
#include "model/model.h"

typedef struct {
    g4_model *m;
    const g4_gguf *g;
    const char *path;
} gb;

static g4_status need_int(gb *b, const char *arch, const char *suffix, int64_t lo, int64_t hi, int *out, int required, int dflt) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t v = 0;
    int found;
    g4_status st = g4_gguf_get_int(b->g, key, &v, &found);
    if (st) return st;
    if (!found) {
        if (required) return g4_fail(G4_ERR_INPUT, "%s: metadata '%s' is missing", b->path, key);
        *out = dflt;
        return G4_OK;
    }
    if (v < lo || v > hi)
        return g4_fail(G4_ERR_INPUT, "%s: metadata '%s' = %lld is out of range [%lld, %lld]", b->path, key,
                       (long long)v, (long long)lo, (long long)hi);
    *out = (int)v;
    return G4_OK;
}

static g4_status get_f(gb *b, const char *key, double *out, double dflt) {
    int found;
    g4_status st = g4_gguf_get_float(b->g, key, out, &found);
    if (!st && !found) *out = dflt;
    return st;
}

/* id of a token spelled `piece` in tokenizer.ggml.tokens, or -1 */
static int token_id(const g4_gguf *g, const char *piece) {
    const g4_gguf_kv *kv;
    if (g4_gguf_get_arr(g, "tokenizer.ggml.tokens", G4_GGUF_STRING, &kv) || !kv) return -1;
    const uint8_t *p = kv->val;
    size_t n = strlen(piece);
    for (uint64_t i = 0; i < kv->n && i < 1u << 24; i++) {
        const char *s;
        uint64_t len;
        p = g4_gguf_str_next(p, &s, &len);
        if (len == n && !memcmp(s, piece, n)) return (int)i;
    }
    return -1;
}

static g4_status read_config(gb *b) {
    g4_config *c = &b->m->cfg;
    memset(c, 0, sizeof *c);
    const char *arch;
    size_t al;
    int found;
    g4_status st = g4_gguf_get_str(b->g, "general.architecture", &arch, &al, &found);
    if (st) return st;
    if (!found) return g4_fail(G4_ERR_INPUT, "%s: metadata 'general.architecture' is missing", b->path);
    if (al != 6 || memcmp(arch, "gemma3", 6))
        return g4_fail(G4_ERR_INPUT, "%s: general.architecture '%.*s' is not supported from GGUF (gemma3 is)",
                       b->path, (int)(al < 64 ? al : 64), arch);
    snprintf(c->architecture, sizeof c->architecture, "Gemma3ForCausalLM");
    const char *A = "gemma3";
    int hd, hdv, n_kv, pattern;
    if ((st = need_int(b, A, "embedding_length", 1, 1 << 16, &c->hidden_size, 1, 0)) ||
        (st = need_int(b, A, "feed_forward_length", 1, 1 << 18, &c->intermediate_size, 1, 0)) ||
        (st = need_int(b, A, "block_count", 1, G4_MAX_LAYERS, &c->n_layers, 1, 0)) ||
        (st = need_int(b, A, "attention.head_count", 1, 1024, &c->n_heads, 1, 0)) ||
        (st = need_int(b, A, "attention.head_count_kv", 1, 1024, &n_kv, 0, c->n_heads)) ||
        (st = need_int(b, A, "attention.key_length", 2, 4096, &hd, 0, c->n_heads ? c->hidden_size / c->n_heads : 0)) ||
        (st = need_int(b, A, "attention.value_length", 2, 4096, &hdv, 0, hd)) ||
        (st = need_int(b, A, "attention.sliding_window", 0, 1 << 30, &c->sliding_window, 0, 0)) ||
        (st = need_int(b, A, "attention.sliding_window_pattern", 1, 1 << 16, &pattern, 0, 6)))
        return st;
    if (hdv != hd || hd % 2)
        return g4_fail(G4_ERR_INPUT, "%s: key_length %d and value_length %d must be equal and even", b->path, hd, hdv);
    if (c->n_heads % n_kv)
        return g4_fail(G4_ERR_INPUT, "%s: head_count %d is not a multiple of head_count_kv %d", b->path, c->n_heads, n_kv);
    double eps, theta, theta_swa, softcap, factor = 1.0;
    if ((st = get_f(b, "gemma3.attention.layer_norm_rms_epsilon", &eps, 1e-6)) ||
        (st = get_f(b, "gemma3.rope.freq_base", &theta, 1e6)) ||
        (st = get_f(b, "gemma3.rope.freq_base_swa", &theta_swa, 10000.0)) ||
        (st = get_f(b, "gemma3.final_logit_softcapping", &softcap, 0.0)) ||
        (st = get_f(b, "gemma3.rope.scaling.factor", &factor, 1.0)))
        return st;
    const char *rst;
    size_t rsl;
    if ((st = g4_gguf_get_str(b->g, "gemma3.rope.scaling.type", &rst, &rsl, &found))) return st;
    if (found && !(rsl == 6 && !memcmp(rst, "linear", 6)) && !(rsl == 4 && !memcmp(rst, "none", 4)))
        return g4_fail(G4_ERR_INPUT, "%s: gemma3.rope.scaling.type '%.*s' is not supported (linear)", b->path, (int)(rsl < 32 ? rsl : 32), rst);
    if (!(eps > 0 && eps < 1) || !(theta > 1) || !(theta_swa > 1) || !(factor > 0) || softcap < 0)
        return g4_fail(G4_ERR_INPUT, "%s: implausible gemma3 eps / rope / softcap metadata", b->path);
    c->rms_norm_eps = (float)eps;
    c->final_logit_softcap = (float)softcap;
    /* llama.cpp (and transformers' Gemma3TextConfig): layer i is full iff (i + 1) % pattern == 0 */
    for (int l = 0; l < c->n_layers; l++) {
        c->is_full[l] = c->sliding_window == 0 || (l + 1) % pattern == 0;
        c->head_dim[l] = hd;
        c->n_kv_heads[l] = n_kv;
        c->has_v_proj[l] = 1;
    }
    if (c->sliding_window == 0) c->sliding_window = 1 << 30;
    c->rope_sliding = (g4_rope_params){G4_ROPE_DEFAULT, theta_swa, 1.0, 1.0};
    /* linear scaling (global layers only, as transformers' Gemma 3) = inv_freq / factor, which is
     * the proportional form with every pair rotated */
    c->rope_full = factor != 1.0 ? (g4_rope_params){G4_ROPE_PROPORTIONAL, theta, 1.0, factor}
                                 : (g4_rope_params){G4_ROPE_DEFAULT, theta, 1.0, 1.0};
    /* query_pre_attn_scalar is not in the GGUF: llama.cpp uses head_dim, and H / n_heads for the
     * 62-layer 27B (google/gemma_pytorch config) — transformers' default (256) agrees for 270M */
    const double qpas = c->n_layers == 62 ? (double)c->hidden_size / c->n_heads : (double)hd;
    c->attn_scale = (float)(1.0 / sqrt(qpas));
    c->no_v_norm = 1;
    int64_t v;
    c->bos_id = c->pad_id = -1;
    c->n_eos = 0;
    if ((st = g4_gguf_get_int(b->g, "tokenizer.ggml.bos_token_id", &v, &found))) return st;
    if (found) c->bos_id = (int)v;
    if ((st = g4_gguf_get_int(b->g, "tokenizer.ggml.padding_token_id", &v, &found))) return st;
    if (found) c->pad_id = (int)v;
    if ((st = g4_gguf_get_int(b->g, "tokenizer.ggml.eos_token_id", &v, &found))) return st;
    if (found) c->eos_ids[c->n_eos++] = (int)v;
    /* Gemma's chat turns end with <end_of_turn> (generation_config lists it as an eos; llama.cpp
     * reads tokenizer.ggml.eot_token_id or finds the token by name) */
    if ((st = g4_gguf_get_int(b->g, "tokenizer.ggml.eot_token_id", &v, &found))) return st;
    int eot = found ? (int)v : token_id(b->g, "<end_of_turn>");
    if (eot >= 0 && (c->n_eos == 0 || c->eos_ids[0] != eot)) c->eos_ids[c->n_eos++] = eot;
    for (int k = 0; k < 3; k++) c->mm_placeholder_ids[k] = -1;
    return G4_OK;
}

/* ---------------------------------------------------------------- tensors */

static g4_status find(gb *b, const char *name, int n_dims, int64_t d0, int64_t d1, int required, g4_tensor **out) {
    g4_tensor *t = g4_st_find(&b->m->ts, name);
    *out = NULL;
    if (!t) return required ? g4_fail(G4_ERR_INPUT, "%s: tensor '%s' is missing", b->path, name) : G4_OK;
    if (t->n_dims != n_dims || t->shape[0] != d0 || (n_dims == 2 && t->shape[1] != d1))
        return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' has shape [%lld%s%lld], config needs [%lld%s%lld]", b->path, name,
                       (long long)t->shape[0], t->n_dims > 1 ? "," : "", t->n_dims > 1 ? (long long)t->shape[1] : 0LL,
                       (long long)d0, n_dims > 1 ? "," : "", n_dims > 1 ? (long long)d1 : 0LL);
    t->used = 1;
    *out = t;
    return G4_OK;
}

static g4_status mat(gb *b, const char *name, int rows, int cols, g4_mat *out) {
    g4_tensor *t;
    g4_status st = find(b, name, 2, rows, cols, 1, &t);
    if (st) return st;
    *out = (g4_mat){t->dtype, t->data, rows, cols};
    return G4_OK;
}

/* Norm weights: llama.cpp's converter stores Gemma's (1 + w) already added; transformers' GGUF
 * loader subtracts 1 again and its Gemma3RMSNorm adds it back, both in float32 — do the same so
 * the float32 scale matches the reference bit for bit. */
static g4_status norm(gb *b, const char *name, int n, float **out) {
    g4_tensor *t;
    g4_status st = find(b, name, 1, n, 0, 1, &t);
    if (st) return st;
    if (!(*out = malloc((size_t)n * sizeof(float)))) return g4_fail(G4_ERR_NOMEM, "out of memory binding %s", name);
    g4_to_f32(t->dtype, t->data, (size_t)n, *out);
    for (int i = 0; i < n; i++) {
        volatile float w = (*out)[i] - 1.0f;   /* two float32 roundings, as torch does */
        (*out)[i] = 1.0f + w;
    }
    return G4_OK;
}

static g4_status bind(gb *b) {
    g4_model *m = b->m;
    g4_config *c = &m->cfg;
    const int H = c->hidden_size, I = c->intermediate_size, Hq = c->n_heads;
    g4_status st;
    g4_tensor *emb = g4_st_find(&m->ts, "token_embd.weight");
    if (!emb || emb->n_dims != 2) return g4_fail(G4_ERR_INPUT, "%s: tensor 'token_embd.weight' is missing or not 2-D", b->path);
    if (emb->shape[0] < 1 || emb->shape[0] > (1 << 24))
        return g4_fail(G4_ERR_INPUT, "%s: token_embd.weight has %lld rows", b->path, (long long)emb->shape[0]);
    c->vocab_size = (int)emb->shape[0];
    if ((st = mat(b, "token_embd.weight", c->vocab_size, H, &m->embed))) return st;
    g4_tensor *out;
    if ((st = find(b, "output.weight", 2, c->vocab_size, H, 0, &out))) return st;
    c->tie_word_embeddings = out == NULL;
    m->lm_head = m->embed;
    if (out) m->lm_head = (g4_mat){out->dtype, out->data, c->vocab_size, H};
    if ((st = norm(b, "output_norm.weight", H, &m->w_final))) return st;
    if (!(m->layers = calloc((size_t)c->n_layers, sizeof *m->layers))) return g4_fail(G4_ERR_NOMEM, "out of memory");
    for (int l = 0; l < c->n_layers; l++) {
        g4_layer *L = &m->layers[l];
        L->is_full = c->is_full[l];
        L->head_dim = c->head_dim[l];
        L->n_kv = c->n_kv_heads[l];
        L->has_v = 1;
        L->layer_scalar = 1.0f;   /* Gemma 3 has none; x * 1.0f is exact */
        const int D = L->head_dim, Hkv = L->n_kv;
        char n[15][64];
        static const char *const sfx[15] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down",
                                            "attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm", "attn_q_norm", "attn_k_norm"};
        for (int i = 0; i < 13; i++) snprintf(n[i], sizeof n[i], "blk.%d.%s.weight", l, sfx[i]);
        if ((st = mat(b, n[0], Hq * D, H, &L->q)) || (st = mat(b, n[1], Hkv * D, H, &L->k)) ||
            (st = mat(b, n[2], Hkv * D, H, &L->v)) || (st = mat(b, n[3], H, Hq * D, &L->o)) ||
            (st = mat(b, n[4], I, H, &L->gate)) || (st = mat(b, n[5], I, H, &L->up)) ||
            (st = mat(b, n[6], H, I, &L->down)) || (st = norm(b, n[7], H, &L->w_in)) ||
            (st = norm(b, n[8], H, &L->w_post_attn)) || (st = norm(b, n[9], H, &L->w_pre_ffw)) ||
            (st = norm(b, n[10], H, &L->w_post_ffw)) || (st = norm(b, n[11], D, &L->w_qnorm)) ||
            (st = norm(b, n[12], D, &L->w_knorm)))
            return st;
    }
    for (int i = 0; i < m->ts.n_tensors; i++)
        if (!m->ts.tensors[i].used)
            return g4_fail(G4_ERR_INPUT, "%s: unexpected tensor '%s' (not part of a gemma3 model with this config)",
                           b->path, m->ts.tensors[i].name);
    return G4_OK;
}

g4_status g4_gguf_model_bind(g4_model *m, const char *path) {
    g4_gguf *g;
    g4_status st = g4_gguf_open(path, &g);
    if (st) return st;
    gb b = {m, g, path};
    if (!(st = read_config(&b)) && !(st = g4_gguf_export_tensors(g, &m->ts))) st = bind(&b);
    g4_gguf_free(g);   /* metadata was copied; the tensor set now owns the mapping */
    return st;
}
