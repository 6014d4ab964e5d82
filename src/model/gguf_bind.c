/* gguf_bind.c — a model from one GGUF file (llama.cpp's layout): the configuration from the
 * metadata and the tensors bound into the same g4_layer structs the safetensors path fills
 * (weights.c), zero copy. Two architectures:
 *   "gemma4": Gemma 4 as llama.cpp's convert_hf_to_gguf.py writes it (class Gemma4Model): per-layer
 *     KV heads (head_count_kv array), key_length / key_length_swa, a bool sliding_window_pattern
 *     array, plain-w norms, layer_output_scale (the HF layer_scalar), attn_v absent on k_eq_v
 *     layers, and the full layers' proportional RoPE encoded as rope_freqs (1 = rotated pair,
 *     1e30 = unrotated), read back here as partial_rotary_factor.
 *   "gemma3": the Gemma 3 text variant; its differences from Gemma 4 are config flags forward.c
 *     reads: (1 + w) norms, query_pre_attn_scalar^-0.5 scaling, no v_norm, no layer_scalar. */
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
    int gemma4;         /* general.architecture "gemma4" (else "gemma3") */
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

/* `arch.suffix` for layer l: a scalar, or an integer array with one entry per layer (llama.cpp's
 * get_key_or_arr); absent -> dflt */
static g4_status layer_int(gb *b, const char *arch, const char *suffix, int l, int64_t lo, int64_t hi, int *out, int dflt) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const g4_gguf_kv *kv = g4_gguf_find(b->g, key);
    if (!kv || kv->type != G4_GGUF_ARRAY) return need_int(b, arch, suffix, lo, hi, out, 0, dflt);
    if (kv->arr_type == G4_GGUF_STRING || kv->arr_type == G4_GGUF_ARRAY || kv->arr_type == G4_GGUF_FLOAT32 ||
        kv->arr_type == G4_GGUF_FLOAT64 || kv->arr_type == G4_GGUF_BOOL || kv->n != (uint64_t)b->m->cfg.n_layers)
        return g4_fail(G4_ERR_INPUT, "%s: metadata '%s' must be an integer or %d integers (one per layer)", b->path, key,
                       b->m->cfg.n_layers);
    int64_t v = g4_gguf_arr_i64(kv, (uint64_t)l);
    if (v < lo || v > hi)
        return g4_fail(G4_ERR_INPUT, "%s: metadata '%s'[%d] = %lld is out of range [%lld, %lld]", b->path, key, l,
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

/* the Gemma 3 text variant's hyperparameters */
static g4_status read_gemma3(gb *b) {
    g4_config *c = &b->m->cfg;
    g4_status st;
    int found;
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
    return G4_OK;
}

static const g4_gguf_tensor *gguf_tensor(const g4_gguf *g, const char *name) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

/* Full-layer RoPE from rope_freqs.weight [D/2] (llama.cpp divides pair i's frequency by it): the
 * converter writes 1.0 for the n rotated pairs and 1e30 for the rest, which is HF's "proportional"
 * RoPE with partial_rotary_factor 2n/D. Any other factor pattern is refused. */
static g4_status full_rope(gb *b, int D, double theta, g4_rope_params *out) {
    const g4_gguf_tensor *t = gguf_tensor(b->g, "rope_freqs.weight");
    *out = (g4_rope_params){G4_ROPE_DEFAULT, theta, 1.0, 1.0};
    if (!t) return G4_OK;
    if (t->ggml_type != 0 || t->n_dims != 1 || t->ne[0] != (uint64_t)D / 2)
        return g4_fail(G4_ERR_INPUT, "%s: tensor 'rope_freqs.weight' must be F32 [%d] (full-layer head_dim / 2)", b->path, D / 2);
    const float *f = t->data;
    int n = 0;
    while (n < D / 2 && f[n] == 1.0f) n++;
    for (int i = n; i < D / 2; i++)
        if (!(f[i] >= 1e20f))
            return g4_fail(G4_ERR_INPUT, "%s: rope_freqs.weight[%d] = %g: only 1 (rotated) then ~1e30 (unrotated) "
                           "factors, as the converter writes for proportional RoPE, are supported", b->path, i, (double)f[i]);
    /* g4_rope_inv_freq rotates floor(partial * D / 2) pairs: the +0.5 keeps that floor at n
     * whatever the rounding of 2n/D */
    if (n < D / 2) *out = (g4_rope_params){G4_ROPE_PROPORTIONAL, theta, (2.0 * n + 0.5) / D, 1.0};
    return G4_OK;
}

/* Gemma 4 as llama.cpp's converter writes it (conversion/gemma.py Gemma4Model.set_gguf_parameters;
 * llama.cpp reads it in src/models/gemma4.cpp load_arch_hparams) */
static g4_status read_gemma4(gb *b) {
    g4_config *c = &b->m->cfg;
    g4_status st;
    int found;
    snprintf(c->architecture, sizeof c->architecture, "Gemma4ForCausalLM (GGUF)");
    const char *A = "gemma4";
    int hd_full, hdv_full, hd_swa, hdv_swa, rot_full, rot_swa, shared, per_layer, n_ff_exp, n_expert;
    if ((st = need_int(b, A, "embedding_length", 1, 1 << 16, &c->hidden_size, 1, 0)) ||
        (st = need_int(b, A, "feed_forward_length", 1, 1 << 18, &c->intermediate_size, 1, 0)) ||
        (st = need_int(b, A, "block_count", 1, G4_MAX_LAYERS, &c->n_layers, 1, 0)) ||
        (st = need_int(b, A, "attention.head_count", 1, 1024, &c->n_heads, 1, 0)) ||
        (st = need_int(b, A, "attention.key_length", 2, 8192, &hd_full, 1, 0)) ||
        (st = need_int(b, A, "attention.value_length", 2, 8192, &hdv_full, 0, hd_full)) ||
        (st = need_int(b, A, "attention.key_length_swa", 2, 8192, &hd_swa, 1, 0)) ||
        (st = need_int(b, A, "attention.value_length_swa", 2, 8192, &hdv_swa, 0, hd_swa)) ||
        (st = need_int(b, A, "rope.dimension_count", 0, 8192, &rot_full, 0, hd_full)) ||
        (st = need_int(b, A, "rope.dimension_count_swa", 0, 8192, &rot_swa, 0, hd_swa)) ||
        (st = need_int(b, A, "attention.sliding_window", 1, 1 << 30, &c->sliding_window, 1, 0)) ||
        (st = need_int(b, A, "attention.shared_kv_layers", 0, 0, &shared, 0, 0)) ||
        (st = need_int(b, A, "embedding_length_per_layer_input", 0, 0, &per_layer, 0, 0)) ||
        (st = need_int(b, A, "expert_feed_forward_length", 0, 0, &n_ff_exp, 0, 0)) ||
        (st = need_int(b, A, "expert_count", 0, 0, &n_expert, 0, 0)))
        return st;
    /* the 12B's features: K = V head sizes, RoPE over the whole head (partial rotation of full
     * layers comes from rope_freqs), no KV sharing, per-layer inputs or experts (range 0..0 above) */
    if (hdv_full != hd_full || hdv_swa != hd_swa || hd_full % 2 || hd_swa % 2)
        return g4_fail(G4_ERR_INPUT, "%s: gemma4 key_length %d / value_length %d and key_length_swa %d / value_length_swa %d "
                       "must be equal and even", b->path, hd_full, hdv_full, hd_swa, hdv_swa);
    if (rot_full != hd_full || rot_swa != hd_swa)
        return g4_fail(G4_ERR_INPUT, "%s: gemma4.rope.dimension_count %d / _swa %d must equal the head sizes %d / %d "
                       "(partial rotation other than rope_freqs is not supported)", b->path, rot_full, rot_swa, hd_full, hd_swa);
    const g4_gguf_kv *pat;
    if ((st = g4_gguf_get_arr(b->g, "gemma4.attention.sliding_window_pattern", G4_GGUF_BOOL, &pat))) return st;
    if (!pat || pat->n != (uint64_t)c->n_layers)
        return g4_fail(G4_ERR_INPUT, "%s: metadata 'gemma4.attention.sliding_window_pattern' must be %d bools (one per layer)",
                       b->path, c->n_layers);
    for (int l = 0; l < c->n_layers; l++) {
        c->is_full[l] = !pat->val[l];
        c->head_dim[l] = c->is_full[l] ? hd_full : hd_swa;
        int hq;
        if ((st = layer_int(b, A, "attention.head_count", l, 1, 1024, &hq, c->n_heads)) ||
            (st = layer_int(b, A, "attention.head_count_kv", l, 1, 1024, &c->n_kv_heads[l], c->n_heads)))
            return st;
        if (hq != c->n_heads)
            return g4_fail(G4_ERR_INPUT, "%s: gemma4.attention.head_count differs between layers", b->path);
        if (c->n_heads % c->n_kv_heads[l])
            return g4_fail(G4_ERR_INPUT, "%s: layer %d: head_count %d is not a multiple of head_count_kv %d", b->path, l,
                           c->n_heads, c->n_kv_heads[l]);
        char vn[64];
        snprintf(vn, sizeof vn, "blk.%d.attn_v.weight", l);
        c->has_v_proj[l] = gguf_tensor(b->g, vn) != NULL;   /* absent: V = K (attention_k_eq_v) */
        if (!c->has_v_proj[l]) c->attention_k_eq_v = 1;
    }
    double eps, theta, theta_swa, softcap;
    if ((st = get_f(b, "gemma4.attention.layer_norm_rms_epsilon", &eps, 1e-6)) ||
        (st = get_f(b, "gemma4.rope.freq_base", &theta, 1e6)) ||
        (st = get_f(b, "gemma4.rope.freq_base_swa", &theta_swa, 10000.0)) ||
        (st = get_f(b, "gemma4.final_logit_softcapping", &softcap, 0.0)))
        return st;
    const char *rst;
    size_t rsl;
    if ((st = g4_gguf_get_str(b->g, "gemma4.rope.scaling.type", &rst, &rsl, &found))) return st;
    if (found && !(rsl == 4 && !memcmp(rst, "none", 4)))
        return g4_fail(G4_ERR_INPUT, "%s: gemma4.rope.scaling.type '%.*s' is not supported (none)", b->path, (int)(rsl < 32 ? rsl : 32), rst);
    if (!(eps > 0 && eps < 1) || !(theta > 1) || !(theta_swa > 1) || softcap < 0)
        return g4_fail(G4_ERR_INPUT, "%s: implausible gemma4 eps / rope / softcap metadata", b->path);
    /* the float32 the converter stored (eps 1e-6 comes back as 9.99999997e-07, as HF's float32 eps) */
    c->rms_norm_eps = (float)eps;
    c->final_logit_softcap = (float)softcap;
    c->rope_sliding = (g4_rope_params){G4_ROPE_DEFAULT, theta_swa, 1.0, 1.0};
    return full_rope(b, hd_full, theta, &c->rope_full);
}

/* token ids the engine needs: <bos>, <pad>, and the ids that end a turn */
static g4_status read_tokens(gb *b, int gemma4) {
    g4_config *c = &b->m->cfg;
    g4_status st;
    int found;
    int64_t v;
    c->bos_id = c->pad_id = -1;
    c->n_eos = 0;
    if ((st = g4_gguf_get_int(b->g, "tokenizer.ggml.bos_token_id", &v, &found))) return st;
    if (found) c->bos_id = (int)v;
    if ((st = g4_gguf_get_int(b->g, "tokenizer.ggml.padding_token_id", &v, &found))) return st;
    if (found) c->pad_id = (int)v;
    if ((st = g4_gguf_get_int(b->g, "tokenizer.ggml.eos_token_id", &v, &found))) return st;
    if (found) c->eos_ids[c->n_eos++] = (int)v;
    /* Gemma's chat turns end with <end_of_turn> (Gemma 4: <turn|>); generation_config lists it as
     * an eos; llama.cpp reads tokenizer.ggml.eot_token_id or finds the token by name */
    if ((st = g4_gguf_get_int(b->g, "tokenizer.ggml.eot_token_id", &v, &found))) return st;
    int eot = found ? (int)v : token_id(b->g, gemma4 ? "<turn|>" : "<end_of_turn>");
    if (eot >= 0 && (c->n_eos == 0 || c->eos_ids[0] != eot)) c->eos_ids[c->n_eos++] = eot;
    /* llama.cpp embeds every id as its own row: no multimodal placeholder substitution, unless
     * an mmproj brings the embedders (then the soft tokens take <|image|> / <|audio|>'s rows) */
    for (int k = 0; k < 3; k++) c->mm_placeholder_ids[k] = -1;
    if (b->m->opts.mmproj && gemma4) {
        c->mm_placeholder_ids[0] = token_id(b->g, "<|image|>");
        c->mm_placeholder_ids[2] = token_id(b->g, "<|audio|>");
    }
    return G4_OK;
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
    b->gemma4 = al == 6 && !memcmp(arch, "gemma4", 6);
    if (!b->gemma4 && !(al == 6 && !memcmp(arch, "gemma3", 6)))
        return g4_fail(G4_ERR_INPUT, "%s: general.architecture '%.*s' is not supported from GGUF (gemma4 and gemma3 are)",
                       b->path, (int)(al < 64 ? al : 64), arch);
    if ((st = b->gemma4 ? read_gemma4(b) : read_gemma3(b))) return st;
    return read_tokens(b, b->gemma4);
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

/* Norm weights. Gemma 4: stored as is (its RMSNorm is plain `* w`), F32 widened from bf16 by the
 * converter, so exact. Gemma 3: llama.cpp's converter stores Gemma's (1 + w) already added;
 * transformers' GGUF loader subtracts 1 again and its Gemma3RMSNorm adds it back, both in float32 —
 * do the same so the float32 scale matches the reference bit for bit. */
static g4_status norm(gb *b, const char *name, int n, float **out) {
    g4_tensor *t;
    g4_status st = find(b, name, 1, n, 0, 1, &t);
    if (st) return st;
    if (!(*out = malloc((size_t)n * sizeof(float)))) return g4_fail(G4_ERR_NOMEM, "out of memory binding %s", name);
    g4_to_f32(t->dtype, t->data, (size_t)n, *out);
    for (int i = 0; !b->gemma4 && i < n; i++) {
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
        L->has_v = c->has_v_proj[l];
        L->layer_scalar = 1.0f;   /* Gemma 3 has none; x * 1.0f is exact */
        const int D = L->head_dim, Hkv = L->n_kv;
        char n[15][64];
        static const char *const sfx[15] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down",
                                            "attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm", "attn_q_norm", "attn_k_norm",
                                            "layer_output_scale"};
        for (int i = 0; i < 14; i++) snprintf(n[i], sizeof n[i], "blk.%d.%s.weight", l, sfx[i]);
        if ((st = mat(b, n[0], Hq * D, H, &L->q)) || (st = mat(b, n[1], Hkv * D, H, &L->k)) ||
            (L->has_v && (st = mat(b, n[2], Hkv * D, H, &L->v))) || (st = mat(b, n[3], H, Hq * D, &L->o)) ||
            (st = mat(b, n[4], I, H, &L->gate)) || (st = mat(b, n[5], I, H, &L->up)) ||
            (st = mat(b, n[6], H, I, &L->down)) || (st = norm(b, n[7], H, &L->w_in)) ||
            (st = norm(b, n[8], H, &L->w_post_attn)) || (st = norm(b, n[9], H, &L->w_pre_ffw)) ||
            (st = norm(b, n[10], H, &L->w_post_ffw)) || (st = norm(b, n[11], D, &L->w_qnorm)) ||
            (st = norm(b, n[12], D, &L->w_knorm)))
            return st;
        if (b->gemma4) {   /* HF's layer_scalar buffer; llama.cpp treats it as optional (then 1) */
            g4_tensor *ls;
            if ((st = find(b, n[13], 1, 1, 0, 0, &ls))) return st;
            if (ls) g4_to_f32(ls->dtype, ls->data, 1, &L->layer_scalar);
        }
    }
    g4_tensor *rf = b->gemma4 ? g4_st_find(&m->ts, "rope_freqs.weight") : NULL;
    if (rf) rf->used = 1;   /* already read into the config's full-layer RoPE (full_rope) */
    for (int i = 0; i < m->ts.n_tensors; i++)
        if (!m->ts.tensors[i].used)
            return g4_fail(G4_ERR_INPUT, "%s: unexpected tensor '%s' (not part of a %s model with this config)",
                           b->path, m->ts.tensors[i].name, b->gemma4 ? "gemma4" : "gemma3");
    return G4_OK;
}

g4_status g4_gguf_model_bind(g4_model *m, const char *path) {
    g4_gguf *g;
    g4_status st = g4_gguf_open(path, &g);
    if (st) return st;
    gb b = {m, g, path, 0};
    if (!(st = read_config(&b)) && !(st = g4_gguf_export_tensors(g, &m->ts))) st = bind(&b);
    g4_gguf_free(g);   /* metadata was copied; the tensor set now owns the mapping */
    return st;
}
