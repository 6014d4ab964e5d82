/* hfconfig.h — the Gemma 4 unified text configuration as read from a HuggingFace config.json
 * (ForConditionalGeneration with a nested text_config, or text-only ForCausalLM).
 * Owns parsing and validation of the fields; knows nothing about tensors. */
#ifndef G4_HFCONFIG_H
#define G4_HFCONFIG_H

#include "gemma4c.h"

#define G4_MAX_LAYERS 256

typedef enum { G4_ROPE_DEFAULT = 0, G4_ROPE_PROPORTIONAL = 1 } g4_rope_type;

typedef struct {
    g4_rope_type type;
    double theta;
    double partial_rotary_factor;  /* proportional only; 1.0 otherwise */
    double factor;                 /* proportional divides inv_freq by it; 1.0 by default */
} g4_rope_params;

typedef struct {
    char architecture[96];
    int conditional;           /* 1: names under model.language_model.*, 0: under model.* */
    int vocab_size, hidden_size, intermediate_size, n_layers, n_heads;
    int sliding_window;
    float rms_norm_eps;
    float final_logit_softcap; /* 0 = none */
    int tie_word_embeddings;
    int attention_k_eq_v;
    int bos_id, pad_id;
    int eos_ids[8], n_eos;
    /* ForConditionalGeneration embeds these multimodal placeholder ids as pad_id when no
     * image/video/audio features are given (Gemma4UnifiedModel.forward); -1 = none */
    int mm_placeholder_ids[3];
    /* per layer: */
    unsigned char is_full[G4_MAX_LAYERS];    /* full_attention (1) or sliding_attention (0) */
    int head_dim[G4_MAX_LAYERS];
    int n_kv_heads[G4_MAX_LAYERS];
    unsigned char has_v_proj[G4_MAX_LAYERS]; /* 0 in k_eq_v full layers */
    g4_rope_params rope_sliding, rope_full;
    /* the Gemma 3 variant (read from GGUF by model/gguf_bind.c); zero for Gemma 4 */
    float attn_scale;          /* query scaling; 0 = 1.0 (Gemma 4: the q/k norms take its place) */
    int no_v_norm;             /* 1: V is cached as projected (Gemma 3 has no v_norm) */
    /* vision_config of a ForConditionalGeneration (the encoder-free image embedder), with
     * Gemma4UnifiedVisionConfig's defaults; has_vision 0 where the config has none */
    int has_vision;
    int vis_patch_size, vis_pooling_kernel, vis_embed_dim, vis_posemb_size, vis_proj_dims;
    float vis_rms_norm_eps;
    /* text_config.use_bidirectional_attention == "vision": an image's soft tokens attend to each
     * other both ways on the sliding layers (model/media_prompt.c) */
    int vis_bidirectional;
    /* audio_config (the encoder-free audio embedder); has_audio 0 where the config has none */
    int has_audio, aud_embed_dim;
    float aud_rms_norm_eps;
} g4_config;

/* Reads dir/config.json. Every field the engine needs is required or has the transformers
 * default; unsupported features (KV sharing, per-layer inputs, attention bias, ...) are refused. */
g4_status g4_config_load(const char *dir, g4_config *cfg);
/* Same, from JSON text (path is used in messages only). */
g4_status g4_config_parse(const char *json, size_t len, const char *path, g4_config *cfg);

#endif
