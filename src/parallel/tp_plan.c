/* tp_plan.c — the shard plan (see tp_plan.h). */
#include "parallel/tp_plan.h"

#include <stdlib.h>
#include <string.h>

g4_status g4_tp_plan_make(const g4_config *c, int tp, int rank, g4_tp_plan *p) {
    memset(p, 0, sizeof *p);
    if (tp < 1 || tp > 64) return g4_fail(G4_ERR_INPUT, "--tp %d: must be between 1 and 64", tp);
    if (rank < 0 || rank >= tp) return g4_fail(G4_ERR_INPUT, "rank %d outside a group of %d", rank, tp);
    if (c->n_heads % tp)
        return g4_fail(G4_ERR_INPUT, "--tp %d does not divide the %d attention heads", tp, c->n_heads);
    if (c->intermediate_size % tp)
        return g4_fail(G4_ERR_INPUT, "--tp %d does not divide the intermediate size %d", tp, c->intermediate_size);
    p->tp = tp;
    p->rank = rank;
    p->q_heads = c->n_heads / tp;
    const int ilen = c->intermediate_size / tp;
    p->inter_lo = rank * ilen;
    p->inter_hi = p->inter_lo + ilen;
    const int vlen = (c->vocab_size + tp - 1) / tp;
    p->vocab_lo = rank * vlen < c->vocab_size ? rank * vlen : c->vocab_size;
    p->vocab_hi = p->vocab_lo + vlen < c->vocab_size ? p->vocab_lo + vlen : c->vocab_size;
    for (int l = 0; l < c->n_layers; l++) {
        const int kv = c->n_kv_heads[l];
        if (kv % tp == 0) {               /* split evenly */
            p->kv_heads[l] = kv / tp;
            p->kv_lo[l] = rank * p->kv_heads[l];
        } else if (tp % kv == 0) {        /* replicate: each rank keeps the one KV head its queries use */
            p->kv_heads[l] = 1;
            p->kv_lo[l] = rank / (tp / kv);
        } else {
            return g4_fail(G4_ERR_INPUT, "--tp %d: layer %d has %d KV heads, which neither divide by nor divide %d",
                           tp, l, kv, tp);
        }
        /* every local query head must read a local KV head: local groups stay whole */
        const int group = c->n_heads / kv;
        if (p->q_heads % group && group % p->q_heads)
            return g4_fail(G4_ERR_INPUT, "--tp %d splits a group of %d query heads sharing one KV head in layer %d",
                           tp, group, l);
    }
    return G4_OK;
}

g4_shard g4_tp_shard(const g4_tp_plan *p, const g4_config *c, g4_role role, int layer) {
    g4_shard s = {G4_SHARD_WHOLE, 0, 0};
    if (p->tp == 1) return s;
    const int D = layer >= 0 && layer < c->n_layers ? c->head_dim[layer] : 0;
    switch (role) {
    case G4_ROLE_EMBED:
    case G4_ROLE_LM_HEAD:
        return (g4_shard){G4_SHARD_ROWS, p->vocab_lo, p->vocab_hi};
    case G4_ROLE_Q:
        return (g4_shard){G4_SHARD_ROWS, (int64_t)p->rank * p->q_heads * D, (int64_t)(p->rank + 1) * p->q_heads * D};
    case G4_ROLE_K:
    case G4_ROLE_V:
        return (g4_shard){G4_SHARD_ROWS, (int64_t)p->kv_lo[layer] * D, (int64_t)(p->kv_lo[layer] + p->kv_heads[layer]) * D};
    case G4_ROLE_O:
        return (g4_shard){G4_SHARD_COLS, (int64_t)p->rank * p->q_heads * D, (int64_t)(p->rank + 1) * p->q_heads * D};
    case G4_ROLE_GATE:
    case G4_ROLE_UP:
        return (g4_shard){G4_SHARD_ROWS, p->inter_lo, p->inter_hi};
    case G4_ROLE_DOWN:
        return (g4_shard){G4_SHARD_COLS, p->inter_lo, p->inter_hi};
    default:
        return s;
    }
}

g4_role g4_tp_role_of_name(const char *name, int *layer) {
    *layer = -1;
    if (!strcmp(name, "lm_head.weight")) return G4_ROLE_LM_HEAD;
    const char *e = strstr(name, "embed_tokens.weight");
    if (e && (e == name || e[-1] == '.') && !strstr(name, "embed_vision") && !strstr(name, "embed_audio"))
        return G4_ROLE_EMBED;
    const char *l = strstr(name, "layers.");
    if (!l || (l != name && l[-1] != '.')) return G4_ROLE_OTHER;
    char *end;
    long n = strtol(l + 7, &end, 10);
    if (end == l + 7 || *end != '.' || n < 0 || n >= G4_MAX_LAYERS) return G4_ROLE_OTHER;
    static const struct { const char *suffix; g4_role role; } roles[] = {
        {".self_attn.q_proj.weight", G4_ROLE_Q}, {".self_attn.k_proj.weight", G4_ROLE_K},
        {".self_attn.v_proj.weight", G4_ROLE_V}, {".self_attn.o_proj.weight", G4_ROLE_O},
        {".mlp.gate_proj.weight", G4_ROLE_GATE}, {".mlp.up_proj.weight", G4_ROLE_UP},
        {".mlp.down_proj.weight", G4_ROLE_DOWN},
    };
    for (size_t i = 0; i < sizeof roles / sizeof *roles; i++)
        if (!strcmp(end, roles[i].suffix)) {
            *layer = (int)n;
            return roles[i].role;
        }
    return G4_ROLE_OTHER;
}
