/* hfconfig.c — parses config.json of Gemma4UnifiedForConditionalGeneration (fields under
 * "text_config") and Gemma4UnifiedForCausalLM (fields at top level), mirroring the defaults of
 * transformers' Gemma4UnifiedTextConfig.__post_init__ (layer_types pattern, rope_parameters,
 * global_head_dim / num_global_key_value_heads → per-layer overrides). */
#include "io/hfconfig.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *path;
    json_t *tc;    /* the text config object */
    json_t *root;
} ctx_t;

static g4_status get_int(ctx_t *c, const char *key, int required, int def, long lo, long hi, int *out) {
    json_t *v = json_object_get(c->tc, key);
    if (!v || json_is_null(v)) {
        if (required) return g4_fail(G4_ERR_INPUT, "%s: required field '%s' is missing", c->path, key);
        *out = def;
        return G4_OK;
    }
    if (!json_is_integer(v))
        return g4_fail(G4_ERR_INPUT, "%s: field '%s' must be an integer", c->path, key);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return g4_fail(G4_ERR_INPUT, "%s: field '%s' = %lld is out of range [%ld, %ld]", c->path, key,
                       (long long)x, lo, hi);
    *out = (int)x;
    return G4_OK;
}

static g4_status get_num(ctx_t *c, json_t *obj, const char *key, int required, double def, double *out) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        if (required) return g4_fail(G4_ERR_INPUT, "%s: required field '%s' is missing", c->path, key);
        *out = def;
        return G4_OK;
    }
    if (!json_is_number(v)) return g4_fail(G4_ERR_INPUT, "%s: field '%s' must be a number", c->path, key);
    *out = json_number_value(v);
    if (!isfinite(*out)) return g4_fail(G4_ERR_INPUT, "%s: field '%s' is not finite", c->path, key);
    return G4_OK;
}

static g4_status get_bool(ctx_t *c, const char *key, int def, int *out) {
    json_t *v = json_object_get(c->tc, key);
    if (!v || json_is_null(v)) { *out = def; return G4_OK; }
    if (!json_is_boolean(v)) return g4_fail(G4_ERR_INPUT, "%s: field '%s' must be true or false", c->path, key);
    *out = json_is_true(v);
    return G4_OK;
}

static g4_status parse_rope(ctx_t *c, json_t *rp, const char *type_name, g4_rope_params *out) {
    json_t *o = rp ? json_object_get(rp, type_name) : NULL;
    int full = !strcmp(type_name, "full_attention");
    if (!o) {   /* transformers' defaults */
        out->type = full ? G4_ROPE_PROPORTIONAL : G4_ROPE_DEFAULT;
        out->theta = full ? 1e6 : 1e4;
        out->partial_rotary_factor = full ? 0.25 : 1.0;
        out->factor = 1.0;
        return rp ? g4_fail(G4_ERR_INPUT, "%s: rope_parameters has no '%s' entry", c->path, type_name) : G4_OK;
    }
    if (!json_is_object(o)) return g4_fail(G4_ERR_INPUT, "%s: rope_parameters.%s must be an object", c->path, type_name);
    const char *rt = json_string_value(json_object_get(o, "rope_type"));
    if (!rt) rt = "default";
    if (!strcmp(rt, "default")) out->type = G4_ROPE_DEFAULT;
    else if (!strcmp(rt, "proportional")) out->type = G4_ROPE_PROPORTIONAL;
    else return g4_fail(G4_ERR_INPUT, "%s: rope_parameters.%s.rope_type '%s' is not supported (default, proportional)",
                        c->path, type_name, rt);
    g4_status st;
    if ((st = get_num(c, o, "rope_theta", 1, 0, &out->theta))) return st;
    if ((st = get_num(c, o, "partial_rotary_factor", 0, 1.0, &out->partial_rotary_factor))) return st;
    if ((st = get_num(c, o, "factor", 0, 1.0, &out->factor))) return st;
    if (out->type == G4_ROPE_DEFAULT) out->partial_rotary_factor = 1.0, out->factor = 1.0;
    if (out->theta <= 0 || out->partial_rotary_factor < 0 || out->partial_rotary_factor > 1 || out->factor <= 0)
        return g4_fail(G4_ERR_INPUT, "%s: rope_parameters.%s has an out-of-range value", c->path, type_name);
    return G4_OK;
}

static g4_status parse_ids(ctx_t *c, g4_config *cfg) {
    json_t *src[2] = {c->tc, c->root};
    cfg->bos_id = cfg->pad_id = -1;
    cfg->n_eos = 0;
    for (int s = 0; s < 2; s++) {
        json_t *b = json_object_get(src[s], "bos_token_id"), *p = json_object_get(src[s], "pad_token_id"),
               *e = json_object_get(src[s], "eos_token_id");
        if (cfg->bos_id < 0 && json_is_integer(b)) cfg->bos_id = (int)json_integer_value(b);
        if (cfg->pad_id < 0 && json_is_integer(p)) cfg->pad_id = (int)json_integer_value(p);
        if (cfg->n_eos == 0 && json_is_integer(e)) cfg->eos_ids[cfg->n_eos++] = (int)json_integer_value(e);
        if (cfg->n_eos == 0 && json_is_array(e)) {
            size_t i;
            json_t *x;
            json_array_foreach(e, i, x) {
                if (json_is_integer(x) && cfg->n_eos < 8) cfg->eos_ids[cfg->n_eos++] = (int)json_integer_value(x);
            }
        }
    }
    int ids[2] = {cfg->bos_id, cfg->pad_id};
    for (int i = 0; i < 2; i++)
        if (ids[i] >= cfg->vocab_size)
            return g4_fail(G4_ERR_INPUT, "%s: special token id %d is outside the vocabulary (%d)", c->path, ids[i], cfg->vocab_size);
    for (int i = 0; i < cfg->n_eos; i++)
        if (cfg->eos_ids[i] < 0 || cfg->eos_ids[i] >= cfg->vocab_size)
            return g4_fail(G4_ERR_INPUT, "%s: eos_token_id %d is outside the vocabulary (%d)", c->path, cfg->eos_ids[i], cfg->vocab_size);
    return G4_OK;
}

/* The full-layer overrides: global_head_dim / num_global_key_value_heads (published form) and/or
 * per_layer_config {layer index or layer type: {head_dim, num_key_value_heads}}. */
static g4_status parse_layer_overrides(ctx_t *c, g4_config *cfg, int kv_sliding, int hd_sliding) {
    g4_status st;
    int ghd = 0, gkv = 0;
    json_t *jg = json_object_get(c->tc, "global_head_dim"), *jk = json_object_get(c->tc, "num_global_key_value_heads");
    if ((st = get_int(c, "global_head_dim", 0, 512, 1, 65536, &ghd))) return st;
    if ((st = get_int(c, "num_global_key_value_heads", 0, 0, 1, 65536, &gkv))) return st;
    int have_global = (jg && !json_is_null(jg)) || (jk && !json_is_null(jk));
    json_t *plc = json_object_get(c->tc, "per_layer_config");
    if (plc && json_is_null(plc)) plc = NULL;
    if (plc && !json_is_object(plc)) return g4_fail(G4_ERR_INPUT, "%s: per_layer_config must be an object", c->path);
    int full_kv = (cfg->attention_k_eq_v && gkv > 0) ? gkv : kv_sliding;
    for (int l = 0; l < cfg->n_layers; l++) {
        cfg->head_dim[l] = cfg->is_full[l] ? ghd : hd_sliding;
        cfg->n_kv_heads[l] = cfg->is_full[l] ? full_kv : kv_sliding;
        if (plc && cfg->is_full[l] && !have_global) {
            /* per_layer_config only lists what differs: the defaults above don't apply */
            cfg->head_dim[l] = hd_sliding;
            cfg->n_kv_heads[l] = kv_sliding;
        }
    }
    if (!plc) return G4_OK;
    const char *key;
    json_t *ov;
    json_object_foreach(plc, key, ov) {
        char *end;
        long l = strtol(key, &end, 10);
        int lo, hi;
        if (*key && !*end) {
            if (l < 0 || l >= cfg->n_layers)
                return g4_fail(G4_ERR_INPUT, "%s: per_layer_config key '%s' is not a layer index", c->path, key);
            lo = hi = (int)l;
        } else if (!strcmp(key, "full_attention") || !strcmp(key, "sliding_attention")) {
            lo = 0, hi = cfg->n_layers - 1;
        } else {
            return g4_fail(G4_ERR_INPUT, "%s: per_layer_config key '%s' is neither a layer index nor a layer type", c->path, key);
        }
        if (!json_is_object(ov)) return g4_fail(G4_ERR_INPUT, "%s: per_layer_config['%s'] must be an object", c->path, key);
        json_t *hd = json_object_get(ov, "head_dim"), *kv = json_object_get(ov, "num_key_value_heads");
        for (int i = lo; i <= hi; i++) {
            if (!(*key && !*end) && (cfg->is_full[i] != !strcmp(key, "full_attention"))) continue;
            int want_hd = hd ? (int)json_integer_value(hd) : cfg->head_dim[i];
            int want_kv = kv ? (int)json_integer_value(kv) : cfg->n_kv_heads[i];
            if ((hd && !json_is_integer(hd)) || (kv && !json_is_integer(kv)) || want_hd <= 0 || want_kv <= 0)
                return g4_fail(G4_ERR_INPUT, "%s: per_layer_config['%s'] has invalid head_dim / num_key_value_heads", c->path, key);
            if (have_global && (want_hd != cfg->head_dim[i] || want_kv != cfg->n_kv_heads[i]))
                return g4_fail(G4_ERR_INPUT,
                               "%s: per_layer_config['%s'] (head_dim %d, kv heads %d) disagrees with "
                               "global_head_dim / num_global_key_value_heads (%d, %d)",
                               c->path, key, want_hd, want_kv, cfg->head_dim[i], cfg->n_kv_heads[i]);
            cfg->head_dim[i] = want_hd;
            cfg->n_kv_heads[i] = want_kv;
        }
    }
    return G4_OK;
}

/* vision_config: read with the same helpers, pointed at that object */
static g4_status parse_vision(ctx_t *c, json_t *vc, g4_config *cfg) {
    json_t *tc = c->tc;
    double eps;
    g4_status st;
    c->tc = vc;
    if (!(st = get_int(c, "patch_size", 0, 16, 1, 1024, &cfg->vis_patch_size)) &&
        !(st = get_int(c, "pooling_kernel_size", 0, 3, 1, 64, &cfg->vis_pooling_kernel)) &&
        !(st = get_int(c, "mm_embed_dim", 0, 3840, 1, 1 << 16, &cfg->vis_embed_dim)) &&
        !(st = get_int(c, "mm_posemb_size", 0, 1120, 1, 1 << 20, &cfg->vis_posemb_size)) &&
        !(st = get_int(c, "output_proj_dims", 0, 3840, 1, 1 << 16, &cfg->vis_proj_dims)) &&
        !(st = get_num(c, vc, "rms_norm_eps", 0, 1e-6, &eps))) {
        cfg->vis_rms_norm_eps = (float)eps;
        cfg->has_vision = 1;
    }
    c->tc = tc;
    return st;
}

/* audio_config, as vision_config */
static g4_status parse_audio(ctx_t *c, json_t *ac, g4_config *cfg) {
    json_t *tc = c->tc;
    double eps;
    g4_status st;
    c->tc = ac;
    if (!(st = get_int(c, "audio_embed_dim", 0, 640, 1, 1 << 20, &cfg->aud_embed_dim)) &&
        !(st = get_num(c, ac, "rms_norm_eps", 0, 1e-6, &eps))) {
        cfg->aud_rms_norm_eps = (float)eps;
        cfg->has_audio = 1;
    }
    c->tc = tc;
    return st;
}

static g4_status parse_text(ctx_t *c, g4_config *cfg) {
    g4_status st;
    int kv, hd;
    if ((st = get_int(c, "vocab_size", 1, 0, 1, 1 << 24, &cfg->vocab_size)) ||
        (st = get_int(c, "hidden_size", 1, 0, 1, 1 << 16, &cfg->hidden_size)) ||
        (st = get_int(c, "intermediate_size", 1, 0, 1, 1 << 20, &cfg->intermediate_size)) ||
        (st = get_int(c, "num_hidden_layers", 1, 0, 1, G4_MAX_LAYERS, &cfg->n_layers)) ||
        (st = get_int(c, "num_attention_heads", 1, 0, 1, 1024, &cfg->n_heads)) ||
        (st = get_int(c, "num_key_value_heads", 1, 0, 1, 1024, &kv)) ||
        (st = get_int(c, "head_dim", 1, 0, 2, 8192, &hd)) ||
        (st = get_int(c, "sliding_window", 1, 0, 1, 1 << 24, &cfg->sliding_window)) ||
        (st = get_bool(c, "attention_k_eq_v", 0, &cfg->attention_k_eq_v)))
        return st;
    double eps, cap;
    if ((st = get_num(c, c->tc, "rms_norm_eps", 1, 0, &eps)) ||
        (st = get_num(c, c->tc, "final_logit_softcapping", 0, 0, &cap)))
        return st;
    if (eps <= 0 || cap < 0) return g4_fail(G4_ERR_INPUT, "%s: rms_norm_eps / final_logit_softcapping out of range", c->path);
    cfg->rms_norm_eps = (float)eps;
    cfg->final_logit_softcap = (float)cap;

    /* Features of the wider Gemma 4 family that the 12B does not use: refuse, don't guess. */
    int v;
    if ((st = get_int(c, "num_kv_shared_layers", 0, 0, 0, 0, &v)) ||
        (st = get_int(c, "hidden_size_per_layer_input", 0, 0, 0, 0, &v)))
        return st;
    int bias;
    if ((st = get_bool(c, "attention_bias", 0, &bias))) return st;
    if (bias) return g4_fail(G4_ERR_INPUT, "%s: field 'attention_bias' = true is not supported", c->path);
    const char *act = json_string_value(json_object_get(c->tc, "hidden_activation"));
    if (act && strcmp(act, "gelu_pytorch_tanh") && strcmp(act, "gelu_tanh"))
        return g4_fail(G4_ERR_INPUT, "%s: field 'hidden_activation' = '%s' is not supported (gelu_pytorch_tanh)", c->path, act);
    const char *bidi = json_string_value(json_object_get(c->tc, "use_bidirectional_attention"));
    if (bidi && !strcmp(bidi, "all"))
        return g4_fail(G4_ERR_INPUT, "%s: use_bidirectional_attention = 'all' is not supported", c->path);

    json_t *lt = json_object_get(c->tc, "layer_types");
    if (lt && !json_is_null(lt)) {
        if (!json_is_array(lt) || (int)json_array_size(lt) != cfg->n_layers)
            return g4_fail(G4_ERR_INPUT, "%s: layer_types must be an array of num_hidden_layers (%d) strings", c->path, cfg->n_layers);
        for (int l = 0; l < cfg->n_layers; l++) {
            const char *s = json_string_value(json_array_get(lt, (size_t)l));
            if (s && !strcmp(s, "full_attention")) cfg->is_full[l] = 1;
            else if (s && !strcmp(s, "sliding_attention")) cfg->is_full[l] = 0;
            else return g4_fail(G4_ERR_INPUT, "%s: layer_types[%d] = '%s' is not a known layer type", c->path, l, s ? s : "?");
        }
    } else {
        for (int l = 0; l < cfg->n_layers; l++) cfg->is_full[l] = (l + 1) % 6 == 0;
    }
    cfg->is_full[cfg->n_layers - 1] = 1;  /* transformers forces the last layer to full attention */

    if ((st = parse_layer_overrides(c, cfg, kv, hd))) return st;
    for (int l = 0; l < cfg->n_layers; l++) {
        cfg->has_v_proj[l] = !(cfg->attention_k_eq_v && cfg->is_full[l]);
        if (cfg->head_dim[l] % 2 || cfg->n_heads % cfg->n_kv_heads[l])
            return g4_fail(G4_ERR_INPUT, "%s: layer %d: head_dim %d must be even and num_attention_heads %d a "
                           "multiple of its KV heads %d", c->path, l, cfg->head_dim[l], cfg->n_heads, cfg->n_kv_heads[l]);
    }
    json_t *rp = json_object_get(c->tc, "rope_parameters");
    if (rp && json_is_null(rp)) rp = NULL;
    if ((st = parse_rope(c, rp, "sliding_attention", &cfg->rope_sliding)) ||
        (st = parse_rope(c, rp, "full_attention", &cfg->rope_full)))
        return st;
    return parse_ids(c, cfg);
}

g4_status g4_config_parse(const char *json, size_t len, const char *path, g4_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    json_error_t err;
    json_t *root = json_loadb(json, len, 0, &err);
    if (!root) return g4_fail(G4_ERR_INPUT, "%s: invalid JSON: %s (line %d)", path, err.text, err.line);
    ctx_t c = {path, root, root};
    g4_status st = G4_OK;
    if (!json_is_object(root)) { st = g4_fail(G4_ERR_INPUT, "%s: not a JSON object", path); goto done; }
    const char *arch = json_string_value(json_array_get(json_object_get(root, "architectures"), 0));
    const char *mt = json_string_value(json_object_get(root, "model_type"));
    if (!arch) arch = mt && !strcmp(mt, "gemma4_unified") ? "Gemma4UnifiedForConditionalGeneration" : "Gemma4UnifiedForCausalLM";
    snprintf(cfg->architecture, sizeof cfg->architecture, "%s", arch);
    if (!strcmp(arch, "Gemma4UnifiedForConditionalGeneration")) {
        cfg->conditional = 1;
        c.tc = json_object_get(root, "text_config");
        if (!json_is_object(c.tc)) { st = g4_fail(G4_ERR_INPUT, "%s: required field 'text_config' is missing", path); goto done; }
    } else if (strcmp(arch, "Gemma4UnifiedForCausalLM")) {
        st = g4_fail(G4_ERR_INPUT, "%s: architecture '%s' is not supported (Gemma4UnifiedForConditionalGeneration, Gemma4UnifiedForCausalLM)", path, arch);
        goto done;
    }
    if ((st = parse_text(&c, cfg))) goto done;
    /* tie_word_embeddings: the top-level flag governs the composite model */
    json_t *tie = json_object_get(root, "tie_word_embeddings");
    if (!tie) tie = json_object_get(c.tc, "tie_word_embeddings");
    cfg->tie_word_embeddings = tie ? json_is_true(tie) : 1;
    json_t *vc = json_object_get(root, "vision_config");
    if (cfg->conditional && json_is_object(vc) && (st = parse_vision(&c, vc, cfg))) goto done;
    json_t *ac = json_object_get(root, "audio_config");
    if (cfg->conditional && json_is_object(ac) && (st = parse_audio(&c, ac, cfg))) goto done;
    /* image / video / audio placeholder ids, with Gemma4UnifiedConfig's defaults */
    static const char *const mm_keys[3] = {"image_token_id", "video_token_id", "audio_token_id"};
    static const int mm_defaults[3] = {258880, 258884, 258881};
    for (int i = 0; i < 3; i++) {
        json_t *v = json_object_get(root, mm_keys[i]);
        cfg->mm_placeholder_ids[i] = !cfg->conditional ? -1 : json_is_integer(v) ? (int)json_integer_value(v)
                                     : v && json_is_null(v) ? -1 : mm_defaults[i];
    }
    json_t *bidir = json_object_get(c.tc, "use_bidirectional_attention");
    cfg->vis_bidirectional = json_is_string(bidir) && !strcmp(json_string_value(bidir), "vision");
done:
    json_decref(root);
    return st;
}

g4_status g4_config_load(const char *dir, g4_config *cfg) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return g4_fail(G4_ERR_INPUT, "%s: cannot open (is '%s' a model directory?)", path, dir);
    char buf[1 << 16];
    size_t cap = sizeof buf, n = fread(buf, 1, cap, f);
    int big = !feof(f);
    fclose(f);
    if (big) return g4_fail(G4_ERR_INPUT, "%s: larger than 64 KiB", path);
    return g4_config_parse(buf, n, path, cfg);
}
