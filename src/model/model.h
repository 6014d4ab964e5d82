/* model.h — the in-memory Gemma 4 unified text model: configuration, the weight views bound
 * to the mapped checkpoint, per-slot KV caches and the forward pass's scratch. Internal to the
 * library (src/model, parallel/group.c, bench/model_cost.c); callers use include/gemma4c.h. */
#ifndef G4_MODEL_H
#define G4_MODEL_H

#include "base/threadpool.h"
#include "gemma4c.h"
#include "io/hfconfig.h"
#include "io/safetensors.h"
#include "kernels/kernels.h"
#include "kernels/matmul.h"
#include "parallel/comm.h"
#include "parallel/tp_plan.h"

typedef struct {
    int is_full, head_dim, has_v;
    int n_q, n_kv;              /* this rank's query and KV heads (all of them when tp == 1) */
    g4_mat q, k, v, o;          /* q:[n_q*D][H] k,v:[n_kv*D][H] o:[H][n_q*D] (rank-local) */
    g4_mat gate, up, down;      /* gate,up:[I/tp][H] down:[H][I/tp] */
    float *w_in, *w_post_attn, *w_pre_ffw, *w_post_ffw;   /* [H] (float32 copies: tiny) */
    float *w_qnorm, *w_knorm;                             /* [D] */
    float layer_scalar;
    const float *inv_freq;      /* [D/2] RoPE inverse frequencies for this layer's type */
    float rope_base;            /* RoPE theta of this layer's type (--numerics ggml's RoPE cache) */
    int kv_cap;                 /* positions the cache holds: ring (sliding) or ctx (full) */
    size_t kv_row;              /* bytes of one cache row (one head, one position) in opts.kv_type */
    size_t kv_offset;           /* bytes from the slot's base to this layer's K; V follows */
} g4_layer;

/* A layer's seven weight matrices, in the order of the checkpoint's names (q, k, v, o, gate, up,
 * down): the one list that code walking all of them (copy at load, page-in, byte and parameter
 * counts) goes through. v's data is NULL in k_eq_v layers. Non-const result as strchr's: the
 * caller's own L decides whether it may write. */
enum { G4_LAYER_MATS = 7 };
static inline g4_mat *g4_layer_mat(const g4_layer *L, int i) {
    g4_layer *l = (g4_layer *)L;
    g4_mat *const mats[G4_LAYER_MATS] = {&l->q, &l->k, &l->v, &l->o, &l->gate, &l->up, &l->down};
    return mats[i];
}

enum { G4_ATT_ROWS_MAX = 32 };   /* attention block rows (heads x positions) at short contexts */

/* the forward pass's phases that tuning.profile times (forward.c) */
enum { G4_PROF_FORWARD, G4_PROF_ROWS, G4_PROF_ROUND, G4_PROF_QKV, G4_PROF_ATTN, G4_PROF_O, G4_PROF_GATEUP,
       G4_PROF_DOWN, G4_PROF_LM_HEAD, G4_PROF_PHASES };

struct g4_model {
    g4_config cfg;
    g4_model_info info;
    g4_tensor_set ts;
    g4_layer *layers;
    g4_mat embed;               /* [vlen][H]: vocabulary rows [vlo, vlo + vlen) of this rank */
    g4_mat lm_head;             /* [vlen][H]: the embedding when tied */
    float *w_final;             /* [H] */
    float embed_scale;
    float *inv_freq_sliding, *inv_freq_full;   /* [D/2] of each layer type's head size */
    const g4_kernels *k;
    g4_kernels kt;              /* --numerics ggml: this rank's table (g4_kernels_ggml), k points here */
    g4_pool *pool;
    g4_model_opts opts;
    int max_rows;               /* rows one forward call may process: max(prefill_chunk, n_slots,
                                 * verify_rows) */
    int logit_rows;             /* rows of logits one step may return: max(n_slots, verify_rows) */
    int hidden_rows;            /* rows of h holding the last step's final-normed hidden states
                                 * (the LM head's input; g4_step_hidden), 0 when it had none */
    /* KV cache: slot s, layer l: K at kv + s*slot_bytes + layer.kv_offset, [n_kv][cap] rows of
     * layer.kv_row bytes (D values in opts.kv_type), then V with the same shape. */
    unsigned char *kv;
    size_t slot_bytes;
    g4_attend_kv_fn attend_kv;  /* attention over a cache that is not f32 (kernels.h), else NULL */
    int *slot_pos;              /* [n_slots] next position of each slot */
    int *slot_hi;               /* [n_slots] the position a rewind came back from (0: none since the
                                 * slot's content was set): the rows it dropped still overwrite
                                 * older positions in the sliding rings (kv_snapshot.c) */
    /* scratch, sized once for max_rows rows (R); D, Hq, Hkv: the widest layer's, I: this rank's */
    float *x, *h, *tmp;         /* [R][H] residual stream, normed input, o / down output */
    float *q, *att;             /* [R][Hq * D] queries, attention output */
    float *kk, *vv;             /* [R][Hkv * D] raw keys and values */
    float *gate, *up;           /* [R][I] */
    float *scores;              /* [threads][att_rows][ctx] attention scores */
    int att_rows;               /* query rows per attention block (attention.c), <= G4_ATT_ROWS_MAX;
                                 * keeps scores near 4 MB a thread at long contexts */
    float *rope_cs;             /* [max_rows][2][max D/2] cos, sin */
    g4_matmul_ctx *mm;          /* the layer and LM head matmuls: input forms, their scratch
                                 * and the choice of kernel (kernels/matmul.h) */
    /* tuning.profile > 0: wall seconds of each phase of the forward pass on the driving thread, kept
     * apart for multi-row (prefill) and one-row steps, printed to stderr when the model is freed */
    int prof;
    int prof_kind;              /* this step's row of prof_s: 1 multi-row, 0 one row */
    double prof_s[2][G4_PROF_PHASES];
    /* tensor parallelism (tp == 1: comm NULL, one rank holding everything) */
    g4_tp_plan plan;
    g4_comm *comm;
    int vmax;                   /* ceil(V / tp): the row stride of lg (this rank's rows: plan.vocab_lo..hi) */
    float *lg;                  /* [n_slots][vmax] this rank's logits of one step */
    float *lg_all;              /* rank 0 of a group: [tp][n_slots][vmax] gathered */
    int32_t *cmd;               /* [header + 3 * max_rows] the step rank 0 broadcasts
                                 * (parallel/group.c's wire format) */
    void **owned;               /* weight shards this rank copied (shard.c) */
    int n_owned;
    size_t local_weight_bytes;  /* bytes of this rank's weight matrices */
    int presharded;             /* the tensor set is already this rank's shard (a .g4c pack) */
    struct g4_pack *pack;       /* the open pack the tensor set points into, or NULL */
    struct g4_group *group;     /* threads backend, rank 0: the other ranks' threads (parallel/group.c) */
    struct g4_vision *vision;   /* rank 0 of an HF checkpoint with vision_config: the image embedder
                                 * (vision.c); NULL otherwise */
    struct g4_audio_embedder *audio;   /* the same for audio_config (audio.c) */
    /* a prefill step with images (media_prompt.c; under --tp every rank gets step_media from
     * parallel/group.c), NULL otherwise: what row r is, G4_ROW_TEXT, G4_ROW_SOFT (a soft token
     * attending causally) or >= 0 (a soft token that also attends to its image's later tokens on
     * sliding layers, up to this position), and on rank 0 the soft token itself, [H] */
    const int *step_media;           /* [R] */
    const float *const *step_soft;   /* [R] */
    struct g4_lm_argmax *lma;   /* the greedy LM head's norms and scratch (lm_argmax.c), made on
                                 * the first greedy step; lma_off: it does not apply */
    int lma_off;
};

/* A greedy step's LM head (lm_argmax.c): n rows of logits from the final-normed rows h, each row's
 * argmax the exact head's (the exact logits of the rows that can win, lower values elsewhere).
 * 0 when it does not apply (a head other than Q4_K / Q6_K, --act-q8, --numerics ggml,
 * --full-logits) or cannot bound this input: the caller runs the exact head. */
int g4_lm_head_argmax(g4_model *m, int n, const float *h, float *logits);
void g4_lm_argmax_free(struct g4_lm_argmax *s);
void g4_lm_argmax_print(const struct g4_lm_argmax *s);   /* tuning.profile's line */

/* The vision embedder's weights (vision.c): bound on rank 0 from an HF checkpoint whose config has
 * vision_config, checked against it; G4_OK without doing anything when there is none. */
typedef struct g4_vision g4_vision;
g4_status g4_vision_bind(g4_model *m);
void g4_vision_free(g4_vision *v);
/* The audio embedder's projection (audio.c), bound the same way from audio_config. */
typedef struct g4_audio_embedder g4_audio_embedder;
g4_status g4_audio_bind(g4_model *m);
void g4_audio_embedder_free(g4_audio_embedder *a);

/* Binds and checks every tensor of the checkpoint against the config (weights.c). */
g4_status g4_weights_bind(g4_model *m);
void g4_weights_free(g4_model *m);
/* Config and weights from one GGUF file (gguf_bind.c; Gemma 3 text); frees with g4_weights_free. */
g4_status g4_gguf_model_bind(g4_model *m, const char *path);

/* Whether the weights read through the file mapping sit mostly (> 10%) in 4 KiB page-cache pages:
 * touches every 2 MiB window of every weight matrix and compares the bytes the kernel then maps in
 * 2 MiB pages with the windows touched. 0 without transparent huge pages or below 64 MB of
 * weights (weight_pages.c). */
int g4_weights_mapped_small(g4_model *m);

/* Replaces every weight view with a copy of this rank's slice under m->plan (whole tensors for a
 * pre-sharded pack) in 2 MiB-aligned, huge-page-advised memory (shard.c). */
g4_status g4_model_shard(g4_model *m);

/* What a forward step is, for the modes whose arithmetic depends on it (g4_forward's `step`):
 * BATCHED (--numerics ggml): llama.cpp would run these rows in a batch of >= 2 tokens;
 * PREFILL (--prefill-bf16): the rows are prompt tokens; ARGMAX: logits whose argmax is the exact
 * head's may stand for the exact logits. */
enum { G4_STEP_BATCHED = 1, G4_STEP_PREFILL = 2, G4_STEP_MEDIA = 4 /* m->step_media is set */,
       G4_STEP_ARGMAX = 8 /* the caller takes only each logits row's argmax (lm_argmax.c) */ };
enum { G4_ROW_TEXT = -1, G4_ROW_SOFT = -2 };

/* Runs the layer stack on R rows (row r: token ids[r] at position pos[r] of slot slots[r]) and
 * writes this rank's raw logits (vocabulary rows [vlo, vlo + vlen)) for rows [logit_row0, R) into
 * logits[(r - logit_row0) * vmax]. Every rank of a group calls it with the same arguments.
 * step: G4_STEP_* flags. */
g4_status g4_forward(g4_model *m, int R, const int *slots, const int *pos, const int32_t *ids,
                     int logit_row0, int step, float *logits);
/* tuning.profile's report on stderr: per kind of step, each phase's seconds and share (forward.c) */
void g4_forward_print_profile(const g4_model *m);

/* One rank: config, its shard of the weights, its KV cache, worker threads and matmul context
 * (load.c); comm NULL for a model of one rank. */
g4_status g4_load_rank(const char *path, const g4_model_opts *o, int rank, g4_comm *comm, g4_model **out);

/* Layer L's K cache in slot `slot`: [n_kv][kv_cap] rows of L->kv_row bytes, then V of the same
 * shape (float32 rows [D] under the default kv_type G4_KV_F32). */
static inline unsigned char *g4_slot_k(const g4_model *m, int slot, const g4_layer *L) {
    return m->kv + (size_t)slot * m->slot_bytes + L->kv_offset;
}

/* Attention of R rows (row r: slot slots[r], position pos[r]) in layer L, over the cache that
 * already holds every row's own K and V: m->q [R][n_q * D] → m->att [R][n_q * D]. batched: as
 * g4_forward's G4_STEP_BATCHED (attention.c). */
void g4_attention(g4_model *m, const g4_layer *L, int R, const int *slots, const int *pos, int batched);

#endif
