/* tp_plan.h — the tensor-parallel shard plan of MODEL.md: which slice of every weight matrix a
 * rank of a TP = N group owns. Column-parallel (output rows split): q/k/v/gate/up; row-parallel
 * (input columns split, partial sums all-reduced): o/down; vocab-parallel: embedding and LM head;
 * everything else (norms, layer scalars) replicated. A KV head count that does not divide by N is
 * replicated when N is a multiple of it (Gemma 4's single full-layer KV head); any other size is
 * refused. Used by the loader (slicing a full checkpoint) and by `gemma4c pack` (writing shards),
 * so both always agree. Knows nothing about memory or communication. */
#ifndef G4_TP_PLAN_H
#define G4_TP_PLAN_H

#include <stdint.h>

#include "gemma4c.h"
#include "io/hfconfig.h"

typedef enum {
    G4_SHARD_WHOLE = 0,   /* replicated: every rank holds the full tensor */
    G4_SHARD_ROWS = 1,    /* rows [lo, hi) of a [rows][cols] matrix (dim 0 of the HF shape) */
    G4_SHARD_COLS = 2     /* columns [lo, hi) of every row (dim 1) */
} g4_shard_kind;

typedef struct {
    g4_shard_kind kind;
    int64_t lo, hi;
} g4_shard;

/* What a tensor is, independent of how a file spells it. */
typedef enum {
    G4_ROLE_OTHER = 0, G4_ROLE_EMBED, G4_ROLE_LM_HEAD,
    G4_ROLE_Q, G4_ROLE_K, G4_ROLE_V, G4_ROLE_O, G4_ROLE_GATE, G4_ROLE_UP, G4_ROLE_DOWN
} g4_role;

typedef struct {
    int tp, rank;
    int q_heads;               /* local query heads; this rank's first is rank * q_heads */
    int inter_lo, inter_hi;    /* intermediate (MLP) slice */
    int vocab_lo, vocab_hi;    /* embedding / LM-head rows (ceil split; the last rank may hold fewer) */
    int kv_lo[G4_MAX_LAYERS];  /* first local KV head of each layer */
    int kv_heads[G4_MAX_LAYERS];
} g4_tp_plan;

/* The plan of `rank` in a group of `tp`; G4_ERR_INPUT (naming the size that does not divide)
 * when the configuration cannot be split N ways. */
g4_status g4_tp_plan_make(const g4_config *c, int tp, int rank, g4_tp_plan *p);

/* The slice of a tensor of `role` in `layer` (ignored for embedding / LM head). */
g4_shard g4_tp_shard(const g4_tp_plan *p, const g4_config *c, g4_role role, int layer);

/* Role and layer of a HuggingFace tensor name ("model.language_model.layers.3.mlp.down_proj.weight");
 * G4_ROLE_OTHER for replicated tensors. */
g4_role g4_tp_role_of_name(const char *name, int *layer);

#endif
