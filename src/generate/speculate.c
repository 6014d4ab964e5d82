/* speculate.c — the speculative decoding loop (g4_spec, gemma4c.h): per round a drafter's
 * proposals (draft.h), one verify step of the target over [newest token, drafts], the choice of
 * every row's token by the sequence's g4_gen (so eos, stop strings, max tokens, penalties and the
 * sampler's PRNG behave exactly as in plain decoding), and the rewind of the rejected rows' KV.
 * Owns no model state beyond the slot it drives; the drafters live in their own files. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4c.h"
#include "generate/draft.h"

struct g4_spec {
    g4_model *m;
    int slot, K, V, H;
    g4_drafter *d;
    g4_spec_params p;
    int32_t *seq;          /* prompt + accepted tokens [n_seq], capacity cap */
    int n_seq, cap;
    int32_t *rows;         /* a verify step's input: newest token, then the drafts [K + 1] */
    int32_t *next;         /* its rows' greedy tokens [K + 1] */
    float *logits;         /* its rows' logits [K + 1][V], allocated on the first sampling run */
    float *hidden;         /* [H] for a drafter that reads the target's hidden state */
    g4_spec_stats stats;
};

g4_status g4_spec_new(g4_model *m, int slot, const g4_spec_params *p, g4_spec **out) {
    *out = NULL;
    if (!p || !p->drafter) return g4_fail(G4_ERR_INPUT, "speculative decoding: no drafter");
    const g4_model_info *info = g4_model_get_info(m);
    const int K = p->draft_max > 0 ? p->draft_max : p->drafter->default_max;
    if (p->draft_max < 0 || K < 1) return g4_fail(G4_ERR_INPUT, "draft-max %d must be >= 1", p->draft_max);
    if (K + 1 > info->verify_rows)   /* the model sizes its verify rows at load */
        return g4_fail(G4_ERR_INPUT, "%d drafts a round need %d verify rows: the model was loaded with %d (verify_rows)",
                       K, K + 1, info->verify_rows);
    g4_status st = G4_OK;
    g4_spec *s = calloc(1, sizeof *s);
    if (!s) return g4_fail(G4_ERR_NOMEM, "out of memory");
    s->m = m;
    s->slot = slot;
    s->K = K;
    s->V = info->vocab_size;
    s->H = info->hidden_size;
    s->d = p->drafter;
    s->p = *p;
    s->rows = malloc((size_t)(K + 1) * sizeof *s->rows);
    s->next = malloc((size_t)(K + 1) * sizeof *s->next);
    if (p->drafter->needs_hidden) s->hidden = malloc((size_t)s->H * sizeof *s->hidden);
    if (!s->rows || !s->next || (p->drafter->needs_hidden && !s->hidden)) st = g4_fail(G4_ERR_NOMEM, "out of memory");
    if (st) {
        g4_spec_free(s);
        return st;
    }
    *out = s;
    return G4_OK;
}

void g4_spec_free(g4_spec *s) {
    if (!s) return;
    free(s->seq);
    free(s->rows);
    free(s->next);
    free(s->logits);
    free(s->hidden);
    free(s);
}

void g4_drafter_free(g4_drafter *d) {
    if (d && d->free) d->free(d);
}

int g4_drafter_default_max(const g4_drafter *d) { return d->default_max; }

const g4_spec_stats *g4_spec_get_stats(const g4_spec *s) { return &s->stats; }

static g4_status push(g4_spec *s, int32_t tok) {
    if (s->n_seq == s->cap) {
        const int nc = s->cap ? 2 * s->cap : 256;
        int32_t *ns = realloc(s->seq, (size_t)nc * sizeof *ns);
        if (!ns) return g4_fail(G4_ERR_NOMEM, "out of memory");
        s->seq = ns;
        s->cap = nc;
    }
    s->seq[s->n_seq++] = tok;
    return G4_OK;
}

/* Drafts for the round after the token the target's last step chose from its row `row`, asked
 * while the slot still holds everything that step wrote (draft.h); the step's first row was at
 * `start` (0: the prefill). k: the most to ask for. */
static int propose(g4_spec *s, int row, int start, int k, int32_t *out) {
    if (k < 1) return 0;
    if (s->hidden && g4_step_hidden(s->m, row, s->hidden)) return -1;
    const g4_draft_ctx c = {.tokens = s->seq, .n = s->n_seq, .target = s->m, .slot = s->slot,
                            .kv_written = g4_slot_pos(s->m, s->slot), .step_start = start, .hidden = s->hidden};
    int nd = s->d->propose(s->d, &c, k, out);
    if (nd < 0) return -1;
    if (nd > k) nd = k;
    for (int i = 0; i < nd; i++)
        if (out[i] < 0 || out[i] >= s->V) {
            g4_fail(G4_ERR_RUNTIME, "drafter proposed token id %d, outside the vocabulary [0, %d)", (int)out[i], s->V);
            return -1;
        }
    return nd;
}

/* Drafts the next round may verify: K, fewer when fewer tokens remain before max tokens (the
 * round yields up to drafts + 1), and the verify step must end short of the context's last
 * position, so that g4_gen_accept's context check (the slot's position) reads as in plain
 * decoding for every row; `pos` is where the newest token goes. */
static int round_max(const g4_spec *s, const g4_gen *g, int pos) {
    const int ctx = g4_model_get_info(s->m)->ctx;
    long k = s->K;
    const long left = g4_gen_tokens_left(g) - 1L, room = (long)ctx - pos - 2;
    if (left < k) k = left;
    if (room < k) k = room;
    return k > 0 ? (int)k : 0;
}

g4_status g4_spec_run(g4_spec *s, g4_gen *g, const int32_t *ids, int n, float *logits, int32_t argmax, g4_spec_emit emit,
                      void *ctx, g4_finish *fin) {
    *fin = G4_FIN_NONE;
    const int am = g4_gen_argmax_only(g);
    if (n <= 0 || g4_slot_pos(s->m, s->slot) != n)
        return g4_fail(G4_ERR_INPUT, "speculative decoding: slot %d must hold exactly the %d prompt tokens", s->slot, n);
    if (!am && !logits) return g4_fail(G4_ERR_INPUT, "speculative decoding: sampling needs the prompt's logits");
    if (!am && !s->logits && !(s->logits = malloc((size_t)(s->K + 1) * s->V * sizeof *s->logits)))
        return g4_fail(G4_ERR_NOMEM, "out of memory");
    s->n_seq = 0;
    for (int i = 0; i < n; i++)
        if (push(s, ids[i])) return G4_ERR_NOMEM;
    if (s->d->reset) s->d->reset(s->d);

    /* the prompt's step: its one row of logits chooses the first token */
    const char *text;
    size_t len;
    int32_t tok = g4_gen_next(g, logits, argmax);
    g4_finish f = g4_gen_accept(g, tok, &text, &len);
    if (emit && emit(ctx, tok, f, text, len) && !f) f = G4_FIN_STOP;
    if (push(s, tok)) return G4_ERR_NOMEM;
    int32_t *drafts = s->rows + 1;
    int nd = f ? 0 : propose(s, 0, 0, round_max(s, g, n), drafts);
    if (nd < 0) return G4_ERR_RUNTIME;
    int pos = n;   /* where tok, the newest token, goes */
    while (!f) {
        s->rows[0] = tok;
        g4_status st = am ? (nd ? g4_verify_argmax(s->m, s->slot, s->rows, nd + 1, s->next)
                                : g4_decode_argmax(s->m, 1, &s->slot, s->rows, s->next))
                          : (nd ? g4_verify(s->m, s->slot, s->rows, nd + 1, s->logits)
                                : g4_decode(s->m, 1, &s->slot, s->rows, s->logits));
        if (st) return st;
        /* row r's logits choose the token after rows[r]; draft r + 1 stands while it is that choice */
        int r = 0;
        for (;; r++) {
            tok = g4_gen_next(g, am ? NULL : s->logits + (size_t)r * s->V, am ? s->next[r] : 0);
            f = g4_gen_accept(g, tok, &text, &len);
            if (emit && emit(ctx, tok, f, text, len) && !f) f = G4_FIN_STOP;
            if (push(s, tok)) return G4_ERR_NOMEM;
            if (f || r == nd || tok != drafts[r]) break;
        }
        if (nd) {
            s->stats.rounds++;
            s->stats.drafted += nd;
            s->stats.accepted += r;
            if (s->p.on_round) s->p.on_round(s->p.ctx, drafts, nd, r);
        } else {
            s->stats.plain_steps++;
        }
        /* rows [0, r] hold accepted tokens' KV: the newest token now goes at pos + r + 1 */
        const int next_pos = pos + r + 1;
        const int nd_next = f ? 0 : propose(s, r, pos, round_max(s, g, next_pos), drafts);
        if (nd_next < 0) return G4_ERR_RUNTIME;
        if (r < nd && (st = g4_slot_rewind(s->m, s->slot, next_pos))) return st;
        pos = next_pos;
        nd = nd_next;
    }
    *fin = f;
    return G4_OK;
}
