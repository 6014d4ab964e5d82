/* model.c — the model and session-slot half of the public API: load (config → mapped weights →
 * RoPE tables → KV cache and scratch, all sized once), prefill in chunks, batched decode, and
 * the softcap / argmax helpers. The layer math lives in gemma4.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf.h"
#include "model/model.h"
#include "model/rope.h"

void g4_model_opts_default(g4_model_opts *o) {
    o->threads = 0;
    o->ctx = 4096;
    o->n_slots = 1;
    o->prefill_chunk = 64;
}

static g4_status alloc_state(g4_model *m) {
    const g4_config *c = &m->cfg;
    const int S = m->opts.n_slots, ctx = m->opts.ctx, Hq = c->n_heads;
    m->max_rows = m->opts.prefill_chunk > S ? m->opts.prefill_chunk : S;
    int maxD = 0, maxKV = 0;
    size_t off = 0;
    for (int l = 0; l < c->n_layers; l++) {
        g4_layer *L = &m->layers[l];
        /* A sliding ring needs window + chunk - 1 positions so that writing a whole prefill
         * chunk never overwrites keys that an earlier row of the same chunk still reads. */
        int ring = c->sliding_window + m->max_rows - 1;
        L->kv_cap = L->is_full || ring > ctx ? ctx : ring;
        L->kv_offset = off;
        off += 2 * (size_t)L->n_kv * L->kv_cap * L->head_dim;
        L->inv_freq = L->is_full ? m->inv_freq_full : m->inv_freq_sliding;
        if (L->head_dim > maxD) maxD = L->head_dim;
        if (L->n_kv * L->head_dim > maxKV) maxKV = L->n_kv * L->head_dim;
    }
    m->slot_floats = off;
    m->info.kv_bytes = off * sizeof(float) * (size_t)S;
    m->kv = calloc(off * (size_t)S, sizeof(float));   /* untouched pages cost no RSS */
    m->slot_pos = calloc((size_t)S, sizeof(int));
    const size_t R = (size_t)m->max_rows, H = (size_t)c->hidden_size, I = (size_t)c->intermediate_size;
    m->x = malloc(R * H * sizeof(float));
    m->h = malloc(R * H * sizeof(float));
    m->tmp = malloc(R * H * sizeof(float));
    m->q = malloc(R * Hq * maxD * sizeof(float));
    m->att = malloc(R * Hq * maxD * sizeof(float));
    m->kk = malloc(R * maxKV * sizeof(float));
    m->vv = malloc(R * maxKV * sizeof(float));
    m->gate = malloc(R * I * sizeof(float));
    m->up = malloc(R * I * sizeof(float));
    m->rope_cs = malloc(R * maxD * sizeof(float));
    m->scores = malloc((size_t)g4_pool_size(m->pool) * ctx * sizeof(float));
    if (!m->kv || !m->slot_pos || !m->x || !m->h || !m->tmp || !m->q || !m->att || !m->kk || !m->vv ||
        !m->gate || !m->up || !m->rope_cs || !m->scores)
        return g4_fail(G4_ERR_NOMEM, "out of memory allocating the KV cache (%zu MiB) and scratch for ctx %d x %d slots",
                       m->info.kv_bytes >> 20, ctx, S);
    return G4_OK;
}

g4_status g4_model_load(const char *path, const g4_model_opts *opts, g4_model **out) {
    *out = NULL;
    g4_model_opts o;
    g4_model_opts_default(&o);
    if (opts) o = *opts;
    if (o.ctx <= 0 || o.n_slots <= 0 || o.prefill_chunk <= 0)
        return g4_fail(G4_ERR_INPUT, "ctx, n_slots and prefill_chunk must be positive");
    g4_model *m = calloc(1, sizeof *m);
    if (!m) return g4_fail(G4_ERR_NOMEM, "out of memory");
    m->opts = o;
    g4_status st;
    if (g4_is_gguf(path)) {   /* one .gguf file: config, weights (and tokenizer) inside */
        if (!(m->k = g4_kernels_get())) { st = G4_ERR_INPUT; goto fail; }
        if ((st = g4_gguf_model_bind(m, path))) goto fail;
    } else {
        if ((st = g4_config_load(path, &m->cfg))) goto fail;
        if (!(m->k = g4_kernels_get())) { st = G4_ERR_INPUT; goto fail; }
        if ((st = g4_st_open_dir(path, &m->ts))) goto fail;
        if ((st = g4_weights_bind(m))) goto fail;
    }
    const g4_config *c = &m->cfg;
    int Dsl = 0, Dfull = 0;
    for (int l = 0; l < c->n_layers; l++) *(c->is_full[l] ? &Dfull : &Dsl) = c->head_dim[l];
    m->inv_freq_sliding = g4_rope_inv_freq(&c->rope_sliding, Dsl ? Dsl : 2);
    m->inv_freq_full = g4_rope_inv_freq(&c->rope_full, Dfull ? Dfull : 2);
    m->embed_scale = (float)sqrt((double)c->hidden_size);   /* float32 in the float32 reference */
    if (!(m->pool = g4_pool_new(o.threads))) { st = g4_fail(G4_ERR_RUNTIME, "cannot start worker threads"); goto fail; }
    if (!m->inv_freq_sliding || !m->inv_freq_full) { st = g4_fail(G4_ERR_NOMEM, "out of memory"); goto fail; }
    if ((st = alloc_state(m))) goto fail;
    g4_model_info *i = &m->info;
    i->vocab_size = c->vocab_size;
    i->hidden_size = c->hidden_size;
    i->n_layers = c->n_layers;
    i->ctx = o.ctx;
    i->n_slots = o.n_slots;
    i->bos_id = c->bos_id;
    i->eos_id = c->n_eos ? c->eos_ids[0] : -1;
    i->pad_id = c->pad_id;
    i->final_logit_softcap = c->final_logit_softcap;
    i->architecture = c->architecture;
    for (int t = 0; t < m->ts.n_tensors; t++) i->weight_bytes += m->ts.tensors[t].nbytes;
    *out = m;
    return G4_OK;
fail:
    g4_model_free(m);
    return st;
}

void g4_model_free(g4_model *m) {
    if (!m) return;
    g4_weights_free(m);
    g4_st_close(&m->ts);
    if (m->pool) g4_pool_free(m->pool);
    free(m->inv_freq_sliding); free(m->inv_freq_full);
    free(m->kv); free(m->slot_pos);
    free(m->x); free(m->h); free(m->tmp); free(m->q); free(m->att); free(m->kk); free(m->vv);
    free(m->gate); free(m->up); free(m->rope_cs); free(m->scores);
    free(m);
}

const g4_model_info *g4_model_get_info(const g4_model *m) { return &m->info; }

void g4_slot_reset(g4_model *m, int slot) {
    if (slot >= 0 && slot < m->opts.n_slots) m->slot_pos[slot] = 0;
}

int g4_slot_pos(const g4_model *m, int slot) {
    return slot >= 0 && slot < m->opts.n_slots ? m->slot_pos[slot] : -1;
}

g4_status g4_prefill(g4_model *m, int slot, const int32_t *ids, int n, float *logits) {
    if (slot < 0 || slot >= m->opts.n_slots) return g4_fail(G4_ERR_INPUT, "slot %d out of range [0, %d)", slot, m->opts.n_slots);
    if (n <= 0) return g4_fail(G4_ERR_INPUT, "empty prompt");
    if ((long)m->slot_pos[slot] + n > m->opts.ctx)
        return g4_fail(G4_ERR_CONTEXT, "prompt of %d tokens at position %d exceeds the context of %d tokens (--ctx)",
                       n, m->slot_pos[slot], m->opts.ctx);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab_size)
            return g4_fail(G4_ERR_INPUT, "token id %d is outside the vocabulary [0, %d)", ids[i], m->cfg.vocab_size);
    int slots[m->max_rows], pos[m->max_rows];
    for (int done = 0; done < n;) {
        int R = n - done < m->opts.prefill_chunk ? n - done : m->opts.prefill_chunk;
        for (int r = 0; r < R; r++) { slots[r] = slot; pos[r] = m->slot_pos[slot] + r; }
        int last = done + R == n;
        g4_status st = g4_forward(m, R, slots, pos, ids + done, last ? R - 1 : R, last ? logits : NULL);
        if (st) return st;
        m->slot_pos[slot] += R;
        done += R;
    }
    return G4_OK;
}

g4_status g4_decode(g4_model *m, int n, const int *slots, const int32_t *ids, float *logits) {
    if (n <= 0 || n > m->opts.n_slots) return g4_fail(G4_ERR_INPUT, "decode batch of %d slots (have %d)", n, m->opts.n_slots);
    int pos[n];
    for (int i = 0; i < n; i++) {
        if (slots[i] < 0 || slots[i] >= m->opts.n_slots) return g4_fail(G4_ERR_INPUT, "slot %d out of range", slots[i]);
        for (int j = 0; j < i; j++)
            if (slots[j] == slots[i]) return g4_fail(G4_ERR_INPUT, "slot %d appears twice in one decode batch", slots[i]);
        if (m->slot_pos[slots[i]] >= m->opts.ctx)
            return g4_fail(G4_ERR_CONTEXT, "slot %d is full: the context of %d tokens (--ctx) is used up", slots[i], m->opts.ctx);
        pos[i] = m->slot_pos[slots[i]];
    }
    g4_status st = g4_forward(m, n, slots, pos, ids, 0, logits);
    if (st) return st;
    for (int i = 0; i < n; i++) m->slot_pos[slots[i]]++;
    return G4_OK;
}

void g4_softcap(const g4_model *m, float *logits, int n) {
    const float cap = m->cfg.final_logit_softcap;
    if (cap <= 0) return;
    for (int i = 0; i < n; i++) logits[i] = tanhf(logits[i] / cap) * cap;
}

int g4_argmax(const float *logits, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}
