/* generate.c — one sequence's generation (g4_gen, gemma4c.h), shared by `run`, `chat` and the
 * server's scheduler: suppressed ids, sampling, eos ids, max tokens, the context end, the streaming
 * detokenizer and stop strings with the hold-back of a pending prefix. Never runs the model: the
 * caller steps it (alone or batched with other sequences) and hands over each step's result. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4c.h"

struct g4_gen {
    const g4_model *m;
    int slot, ctx, vocab;
    const g4_gen_config *cfg;
    g4_sampler *sampler;
    g4_detok_stream *detok;       /* NULL without text */
    char **stop;                  /* [n_stop] copies */
    int n_stop;
    int max_tokens, ignore_eos;
    int32_t *bias_ids;            /* logit_bias [n_bias] */
    float *bias;
    int n_bias;
    int argmax_only;
    g4_matcher *constraint;       /* structured outputs (borrowed) */
    uint32_t *mask;               /* its allowed tokens, one bit each [mask_words] */
    int mask_tokens;              /* tokens the mask covers (the vocabulary index's) */
    int n_tok;
    int hit_ctx;
    char *text;                   /* generated text, a stop string cut off [len] */
    size_t len, cap;
    size_t ready;                 /* bytes handed out as final so far */
};

void g4_gen_params_default(g4_gen_params *p) {
    memset(p, 0, sizeof *p);
    g4_sampler_params_default(&p->sp);
    p->text = 1;
}

g4_status g4_gen_new(const g4_model *m, int slot, const g4_tokenizer *tok, const g4_gen_config *cfg,
                     const g4_gen_params *p, g4_gen **out) {
    *out = NULL;
    if (p->text && !tok) return g4_fail(G4_ERR_INPUT, "generation: text output needs a tokenizer");
    const g4_model_info *info = g4_model_get_info(m);
    g4_gen *g = calloc(1, sizeof *g);
    if (!g) return g4_fail(G4_ERR_NOMEM, "out of memory");
    g->m = m;
    g->slot = slot;
    g->ctx = info->ctx;
    g->vocab = info->vocab_size;
    g->cfg = cfg;
    g->max_tokens = p->max_tokens;
    g->ignore_eos = p->ignore_eos;
    /* temperature 0 samples the argmax of the raw logits (the softcap is monotonic); penalties
     * and suppressed ids change the logits first, so they need them all */
    g->argmax_only = (!cfg || cfg->n_suppress == 0) && p->sp.temperature == 0 && p->sp.frequency_penalty == 0 &&
                     p->sp.presence_penalty == 0 && p->n_bias <= 0 && !p->constraint;
    g4_status st = g4_sampler_new(&p->sp, g->vocab, info->final_logit_softcap, &g->sampler);
    if (!st && p->text && !(g->detok = g4_detok_stream_new(tok, 1))) st = g4_fail(G4_ERR_NOMEM, "out of memory");
    if (!st && p->constraint) {
        g->constraint = p->constraint;
        g->mask_tokens = g4_vocab_index_size(g4_matcher_vocab(p->constraint));
        if (!(g->mask = calloc((size_t)(g->mask_tokens + 31) / 32 + 1, sizeof *g->mask)))
            st = g4_fail(G4_ERR_NOMEM, "out of memory");
    }
    if (!st && p->n_bias > 0) {
        g->bias_ids = malloc((size_t)p->n_bias * sizeof *g->bias_ids);
        g->bias = malloc((size_t)p->n_bias * sizeof *g->bias);
        if (!g->bias_ids || !g->bias) st = g4_fail(G4_ERR_NOMEM, "out of memory");
        for (int i = 0; !st && i < p->n_bias; i++) {
            if (p->bias_ids[i] < 0 || p->bias_ids[i] >= g->vocab)
                st = g4_fail(G4_ERR_INPUT, "logit_bias: token id %d is outside the vocabulary [0, %d)", (int)p->bias_ids[i], g->vocab);
            g->bias_ids[i] = p->bias_ids[i];
            g->bias[i] = p->bias[i];
        }
        g->n_bias = p->n_bias;
    }
    if (!st && p->text && p->n_stop > 0) {
        if (!(g->stop = calloc((size_t)p->n_stop, sizeof *g->stop))) st = g4_fail(G4_ERR_NOMEM, "out of memory");
        for (int i = 0; !st && i < p->n_stop; i++) {
            if (!(g->stop[i] = strdup(p->stop[i]))) st = g4_fail(G4_ERR_NOMEM, "out of memory");
            g->n_stop = i + 1;
        }
    }
    if (st) {
        g4_gen_free(g);
        return st;
    }
    *out = g;
    return G4_OK;
}

void g4_gen_free(g4_gen *g) {
    if (!g) return;
    g4_sampler_free(g->sampler);
    g4_detok_stream_free(g->detok);
    for (int i = 0; i < g->n_stop; i++) free(g->stop[i]);
    free(g->stop);
    free(g->bias_ids);
    free(g->bias);
    free(g->mask);
    free(g->text);
    free(g);
}

int g4_gen_argmax_only(const g4_gen *g) { return g->argmax_only; }

int32_t g4_gen_next(g4_gen *g, float *logits, int32_t argmax) {
    if (!logits) {
        g4_sampler_accept(g->sampler, argmax);
        return argmax;
    }
    for (int i = 0; g->cfg && i < g->cfg->n_suppress; i++)
        if (g->cfg->suppress[i] >= 0 && g->cfg->suppress[i] < g->vocab) logits[g->cfg->suppress[i]] = -INFINITY;
    for (int i = 0; i < g->n_bias; i++)   /* OpenAI: -100 is a ban; the bias goes on the raw logit */
        logits[g->bias_ids[i]] = g->bias[i] <= -100 ? -INFINITY : logits[g->bias_ids[i]] + g->bias[i];
    if (g->constraint) {   /* only what keeps the output inside the grammar; the end only where it accepts */
        if (g4_matcher_mask(g->constraint, g->mask) <= 0 && g->cfg && g->cfg->n_eos) return g->cfg->eos[0];
        for (int t = 0; t < g->vocab; t++)
            if (t >= g->mask_tokens || !(g->mask[t >> 5] >> (t & 31) & 1)) logits[t] = -INFINITY;
    }
    return g4_sampler_sample(g->sampler, logits);
}

static int is_eos(const g4_gen *g, int32_t tok) {
    for (int i = 0; g->cfg && i < g->cfg->n_eos; i++)
        if (g->cfg->eos[i] == tok) return 1;
    return 0;
}

/* Bytes at the end of text[0..n) that are a proper prefix of some stop string: they may yet
 * become a stop, so a stream must hold them back. */
static size_t stop_holdback(const g4_gen *g, const char *text, size_t n) {
    size_t best = 0;
    for (int i = 0; i < g->n_stop; i++) {
        size_t L = strlen(g->stop[i]);
        for (size_t k = L - 1 < n ? L - 1 : n; k > best; k--)
            if (!memcmp(text + n - k, g->stop[i], k)) { best = k; break; }
    }
    return best;
}

/* Appends piece to the text; returns 1 when the new bytes complete a stop string (the text is
 * then cut at the earliest occurrence). A failed allocation drops the piece, as a failed
 * detokenization does: the token ids stay right, only the text loses bytes. */
static int append_text(g4_gen *g, const char *piece, size_t plen) {
    if (!plen) return 0;
    const size_t old = g->len;
    if (old + plen + 1 > g->cap) {
        size_t nc = g->cap ? g->cap : 256;
        while (nc < old + plen + 1) nc *= 2;
        char *nt = realloc(g->text, nc);
        if (!nt) return 0;
        g->text = nt;
        g->cap = nc;
    }
    memcpy(g->text + old, piece, plen);
    g->len = old + plen;
    g->text[g->len] = 0;
    /* the earliest stop occurrence that the new bytes complete */
    size_t cut = (size_t)-1;
    for (int i = 0; i < g->n_stop; i++) {
        size_t L = strlen(g->stop[i]);
        size_t from = old + 1 > L ? old + 1 - L : 0;
        char *hit = memmem(g->text + from, g->len - from, g->stop[i], L);
        if (hit && (size_t)(hit - g->text) < cut) cut = (size_t)(hit - g->text);
    }
    if (cut == (size_t)-1) return 0;
    g->len = cut;
    g->text[cut] = 0;
    return 1;
}

g4_finish g4_gen_accept(g4_gen *g, int32_t tok, const char **text, size_t *len) {
    g4_finish fin = G4_FIN_NONE;
    if (g->constraint) g4_matcher_accept(g->constraint, tok);
    char *piece = NULL;
    size_t plen = 0;
    if (!g->ignore_eos && is_eos(g, tok)) fin = G4_FIN_STOP;
    else if (g->detok && g4_detok_stream_push(g->detok, tok, &piece, &plen)) plen = 0;
    if (!fin) {
        const int at_max = g->max_tokens > 0 && g->n_tok + 1 >= g->max_tokens;
        /* the slot holds every token but this one: a full slot has no room to feed it */
        const int at_ctx = g4_slot_pos(g->m, g->slot) >= g->ctx;
        if (at_max || at_ctx) fin = G4_FIN_LENGTH;
        g->hit_ctx = at_ctx && !at_max;
    }
    if (fin && g->detok && g4_detok_stream_finish(g->detok, &piece, &plen)) plen = 0;   /* appends to piece */
    g->n_tok++;
    if (append_text(g, piece, plen)) fin = G4_FIN_STOP;
    free(piece);
    const size_t ready = fin ? g->len : g->len - stop_holdback(g, g->text, g->len);
    const size_t from = g->ready;
    if (ready > g->ready) g->ready = ready;
    if (text) *text = g->text ? g->text + from : "";
    if (len) *len = g->ready - from;
    return fin;
}

int g4_gen_n_tokens(const g4_gen *g) { return g->n_tok; }

int g4_gen_hit_context(const g4_gen *g) { return g->hit_ctx; }

int g4_gen_tokens_left(const g4_gen *g) { return g->max_tokens > 0 ? g->max_tokens - g->n_tok : INT32_MAX; }

