/* session.c — the session-slot half of the public API: slot positions, prefill in chunks and
 * batched decode (each step run over the tensor-parallel group, parallel/group.c), and the softcap
 * and argmax helpers over logits. The KV cache itself is sized at load (load.c). */
#include <math.h>
#include <string.h>

#include "model/model.h"
#include "parallel/group.h"

void g4_slot_reset(g4_model *m, int slot) {
    if (slot >= 0 && slot < m->opts.n_slots) m->slot_pos[slot] = m->slot_hi[slot] = 0;
}

int g4_slot_pos(const g4_model *m, int slot) {
    return slot >= 0 && slot < m->opts.n_slots ? m->slot_pos[slot] : -1;
}

/* A step that read a page of a mapped weight file past its end (g4_guard_mapped_files) computed
 * with zeros there: its result is void, and so is every later one. */
static g4_status weights_lost(void) {
    return g4_fail(G4_ERR_IO, "a memory-mapped model file shrank or was replaced while the model ran; "
                              "restart with an intact file");
}

static g4_status prefill(g4_model *m, int slot, const int32_t *ids, int n, float *logits, int32_t *next) {
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
        /* --numerics ggml: did llama.cpp's micro-batch holding these rows (the prompt cut into
         * n_ubatch = 512 tokens) have >= 2 tokens? (its attention P·V then runs through tinyBLAS) */
        const int ub = n - done / 512 * 512 < 512 ? n - done / 512 * 512 : 512;
        const int step = G4_STEP_PREFILL | (ub >= 2 ? G4_STEP_BATCHED : 0);
        g4_group_forward(m, R, slots, pos, ids + done, last ? R - 1 : R, step, last ? logits : NULL, last ? next : NULL);
        if (g4_mapped_file_lost()) return weights_lost();
        if (g4_model_group_lost(m)) return g4_fail(G4_ERR_RUNTIME, "%s", g4_model_group_lost(m));
        m->slot_pos[slot] += R;
        done += R;
    }
    return G4_OK;
}

g4_status g4_prefill(g4_model *m, int slot, const int32_t *ids, int n, float *logits) {
    return prefill(m, slot, ids, n, logits, NULL);
}

g4_status g4_prefill_argmax(g4_model *m, int slot, const int32_t *ids, int n, int32_t *next) {
    return prefill(m, slot, ids, n, NULL, next);
}

static g4_status decode(g4_model *m, int n, const int *slots, const int32_t *ids, float *logits, int32_t *next) {
    if (n <= 0 || n > m->opts.n_slots) return g4_fail(G4_ERR_INPUT, "decode batch of %d slots (have %d)", n, m->opts.n_slots);
    int pos[n];
    for (int i = 0; i < n; i++) {
        if (slots[i] < 0 || slots[i] >= m->opts.n_slots) return g4_fail(G4_ERR_INPUT, "slot %d out of range", slots[i]);
        for (int j = 0; j < i; j++)
            if (slots[j] == slots[i]) return g4_fail(G4_ERR_INPUT, "slot %d appears twice in one decode batch", slots[i]);
        if (m->slot_pos[slots[i]] >= m->opts.ctx)
            return g4_fail(G4_ERR_CONTEXT, "slot %d is full: the context of %d tokens (--ctx) is used up", slots[i], m->opts.ctx);
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab_size)
            return g4_fail(G4_ERR_INPUT, "token id %d is outside the vocabulary [0, %d)", ids[i], m->cfg.vocab_size);
        pos[i] = m->slot_pos[slots[i]];
    }
    g4_group_forward(m, n, slots, pos, ids, 0, n >= 2 ? G4_STEP_BATCHED : 0, logits, next);
    if (g4_mapped_file_lost()) return weights_lost();
    if (g4_model_group_lost(m)) return g4_fail(G4_ERR_RUNTIME, "%s", g4_model_group_lost(m));
    for (int i = 0; i < n; i++) m->slot_pos[slots[i]]++;
    return G4_OK;
}

g4_status g4_decode(g4_model *m, int n, const int *slots, const int32_t *ids, float *logits) {
    return decode(m, n, slots, ids, logits, NULL);
}

g4_status g4_decode_argmax(g4_model *m, int n, const int *slots, const int32_t *ids, int32_t *next) {
    return decode(m, n, slots, ids, NULL, next);
}

/* One slot's n rows in one step, every row's logits or argmax: the speculative loop's verify of
 * [newest token, drafts...]. Not a prefill: --prefill-bf16 leaves generated tokens exact. */
static g4_status verify(g4_model *m, int n, const int *slots, const int *counts, const int32_t *ids, float *logits,
                        int32_t *next) {
    if (n <= 0 || n > m->opts.n_slots) return g4_fail(G4_ERR_INPUT, "verify step of %d slots (have %d)", n, m->opts.n_slots);
    int R = 0;
    for (int i = 0; i < n; i++) {
        const int slot = slots[i];
        if (slot < 0 || slot >= m->opts.n_slots) return g4_fail(G4_ERR_INPUT, "slot %d out of range [0, %d)", slot, m->opts.n_slots);
        for (int j = 0; j < i; j++)
            if (slots[j] == slot) return g4_fail(G4_ERR_INPUT, "slot %d appears twice in one verify step", slot);
        if (counts[i] <= 0) return g4_fail(G4_ERR_INPUT, "verify step: %d rows for slot %d", counts[i], slot);
        if ((long)m->slot_pos[slot] + counts[i] > m->opts.ctx)
            return g4_fail(G4_ERR_CONTEXT, "%d tokens at position %d exceed the context of %d tokens (--ctx)", counts[i],
                           m->slot_pos[slot], m->opts.ctx);
        R += counts[i];
    }
    if (R > m->opts.verify_rows)
        return g4_fail(G4_ERR_INPUT, "a verify step of %d rows: the model was loaded for at most %d (verify_rows)", R,
                       m->opts.verify_rows);
    int rs[R], pos[R];
    for (int i = 0, r = 0; i < n; i++)
        for (int k = 0; k < counts[i]; k++, r++) {
            if (ids[r] < 0 || ids[r] >= m->cfg.vocab_size)
                return g4_fail(G4_ERR_INPUT, "token id %d is outside the vocabulary [0, %d)", ids[r], m->cfg.vocab_size);
            rs[r] = slots[i];
            pos[r] = m->slot_pos[slots[i]] + k;
        }
    g4_group_forward(m, R, rs, pos, ids, 0, R >= 2 ? G4_STEP_BATCHED : 0, logits, next);
    if (g4_mapped_file_lost()) return weights_lost();
    for (int i = 0; i < n; i++) m->slot_pos[slots[i]] += counts[i];
    return G4_OK;
}

g4_status g4_verify(g4_model *m, int slot, const int32_t *ids, int n, float *logits) {
    return verify(m, 1, &slot, &n, ids, logits, NULL);
}

g4_status g4_verify_argmax(g4_model *m, int slot, const int32_t *ids, int n, int32_t *next) {
    return verify(m, 1, &slot, &n, ids, NULL, next);
}

g4_status g4_verify_batch(g4_model *m, int n, const int *slots, const int *counts, const int32_t *ids, float *logits,
                          int32_t *next) {
    return verify(m, n, slots, counts, ids, logits, next);
}

g4_status g4_step_hidden(const g4_model *m, int row, float *out) {
    if (row < 0 || row >= m->hidden_rows)
        return g4_fail(G4_ERR_INPUT, "hidden state of row %d: the last step computed %d", row, m->hidden_rows);
    const size_t H = (size_t)m->cfg.hidden_size;
    memcpy(out, m->h + (size_t)row * H, H * sizeof(float));
    return G4_OK;
}

void g4_softcap(const g4_model *m, float *logits, int n) {
    const float cap = m->cfg.final_logit_softcap;
    if (cap <= 0 || m->opts.numerics == G4_NUMERICS_GGML) return;   /* ggml: already in the logits */
    for (int i = 0; i < n; i++) logits[i] = tanhf(logits[i] / cap) * cap;
}

/* The first index of the largest value: what `best = 0; if (x[i] > x[best]) best = i` returns (a
 * NaN never wins, but one at index 0 is kept). In 8 lanes, lane j over indices 1 + j, 9 + j, ...,
 * each starting from (x[0], 0), then the largest lane, the lowest index on ties. The plain loop
 * reloads x[best] and compares serially, over 262144 logits per decode step on the calling
 * thread while the pool's other threads wait; the lanes are GCC vectors (compare + blend). */
typedef float argmax_f32x4 __attribute__((vector_size(16)));
typedef int32_t argmax_i32x4 __attribute__((vector_size(16)));

int g4_argmax(const float *x, int n) {
    enum { L = 8, W = 4 };   /* 8 lanes as two 4-wide vectors: SSE2 registers on any x86-64 */
    if (n <= 1) return 0;
    argmax_f32x4 v[2];
    argmax_i32x4 id[2] = {{0}, {0}}, cur[2];
    for (int j = 0; j < L; j++) {
        v[j / W][j % W] = x[0];
        cur[j / W][j % W] = 1 + j;
    }
    int i = 1;
    for (; i + L <= n; i += L)
        for (int h = 0; h < 2; h++) {
            argmax_f32x4 xv;
            memcpy(&xv, x + i + h * W, sizeof xv);
            const argmax_i32x4 gt = xv > v[h];   /* all ones where greater; NaN: never */
            v[h] = (argmax_f32x4)(((argmax_i32x4)xv & gt) | ((argmax_i32x4)v[h] & ~gt));
            id[h] = (cur[h] & gt) | (id[h] & ~gt);
            cur[h] += L;
        }
    float lv[L];
    int li[L];
    for (int j = 0; j < L; j++) {
        lv[j] = v[j / W][j % W];
        li[j] = id[j / W][j % W];
    }
    for (int j = 0; i + j < n; j++)
        if (x[i + j] > lv[j]) {
            lv[j] = x[i + j];
            li[j] = i + j;
        }
    int b = 0;
    for (int j = 1; j < L; j++)
        if (lv[j] > lv[b] || (lv[j] == lv[b] && li[j] < li[b])) b = j;
    return li[b];
}
