/* model.h — the in-memory Gemma 4 unified text model: configuration, the weight views bound
 * to the mapped checkpoint, per-slot KV caches and scratch. Internal to src/model. */
#ifndef G4_MODEL_H
#define G4_MODEL_H

#include "base/threadpool.h"
#include "gemma4c.h"
#include "io/hfconfig.h"
#include "io/safetensors.h"
#include "kernels/kernels.h"

typedef struct {
    g4_dtype dt;
    const void *data;   /* [rows][cols], row-major, in the file mapping */
    int rows, cols;
} g4_mat;

typedef struct {
    int is_full, head_dim, n_kv, has_v;
    g4_mat q, k, v, o;          /* q:[Hq*D][H] k,v:[Hkv*D][H] o:[H][Hq*D] */
    g4_mat gate, up, down;      /* gate,up:[I][H] down:[H][I] */
    float *w_in, *w_post_attn, *w_pre_ffw, *w_post_ffw;   /* [H] (float32 copies: tiny) */
    float *w_qnorm, *w_knorm;                             /* [D] */
    float layer_scalar;
    const float *inv_freq;      /* [D/2] RoPE inverse frequencies for this layer's type */
    int kv_cap;                 /* positions the cache holds: ring (sliding) or ctx (full) */
    size_t kv_offset;           /* floats from the slot's base to this layer's K; V follows */
} g4_layer;

struct g4_model {
    g4_config cfg;
    g4_model_info info;
    g4_tensor_set ts;
    g4_layer *layers;
    g4_mat embed;               /* [V][H] */
    g4_mat lm_head;             /* [V][H]: the embedding when tied */
    float *w_final;             /* [H] */
    float embed_scale;
    float *inv_freq_sliding, *inv_freq_full;
    const g4_kernels *k;
    g4_pool *pool;
    g4_model_opts opts;
    int max_rows;               /* rows one forward call may process: max(prefill_chunk, n_slots) */
    /* KV cache: slot s, layer l: K at kv + s*slot_floats + layer.kv_offset, [n_kv][cap][D]
     * then V with the same shape. */
    float *kv;
    size_t slot_floats;
    int *slot_pos;              /* [n_slots] next position of each slot */
    /* scratch, sized once for max_rows */
    float *x, *h, *q, *kk, *vv, *att, *gate, *up, *tmp;
    float *scores;              /* [threads][ctx] attention scores */
    float *rope_cs;             /* [max_rows][2][max D/2] cos, sin */
};

/* Binds and checks every tensor of the checkpoint against the config (weights.c). */
g4_status g4_weights_bind(g4_model *m);
void g4_weights_free(g4_model *m);
/* Config and weights from one GGUF file (gguf_bind.c; Gemma 3 text); frees with g4_weights_free. */
g4_status g4_gguf_model_bind(g4_model *m, const char *path);

/* Runs the layer stack on R rows (row r: token ids[r] at position pos[r] of slot slots[r]) and
 * writes raw logits for rows [logit_row0, R) into logits[(r - logit_row0) * vocab]. */
g4_status g4_forward(g4_model *m, int R, const int *slots, const int *pos, const int32_t *ids,
                     int logit_row0, float *logits);

#endif
