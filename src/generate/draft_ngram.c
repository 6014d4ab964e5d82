/* draft_ngram.c — n-gram (prompt lookup) drafting for speculative decoding (draft.h): the
 * tokens that followed the most recent earlier occurrence of the sequence's last n tokens, in the
 * prompt and the output so far, trying n from n_max down to n_min. No model: it pays off where the
 * output copies its input (rewriting, code edits, quoting). Defaults as llama.cpp's prompt lookup
 * (n-grams of 1 to 4 tokens, LLAMA_NGRAM_MIN / MAX) and vLLM's ngram proposer
 * (prompt_lookup_min 1). */
#include <stdlib.h>
#include <string.h>

#include "generate/draft.h"

/* Drafts a round without --draft-max: measured on the real Gemma 3 270M rewriting a paragraph
 * (docs/speculative.md) — a verify row costs little beside the weights' read, and a long copied
 * run is accepted whole. */
enum { NGRAM_DEFAULT_MAX = 8 };

typedef struct {
    int n_min, n_max;
} ngram;

/* The start of the most recent occurrence of t[n - k, n) that begins before n - k, or -1. */
static int last_match(const int32_t *t, int n, int k) {
    const int32_t *pat = t + n - k;
    for (int j = n - k - 1; j >= 0; j--)
        if (t[j] == pat[0] && !memcmp(t + j, pat, (size_t)k * sizeof *t)) return j;
    return -1;
}

static int ngram_propose(g4_drafter *d, const g4_draft_ctx *c, int max_draft, int32_t *out) {
    const ngram *g = d->impl;
    for (int k = g->n_max < c->n - 1 ? g->n_max : c->n - 1; k >= g->n_min; k--) {
        const int j = last_match(c->tokens, c->n, k);
        if (j < 0) continue;
        /* what followed it; past the present the text is taken to repeat with the same period
         * (d tokens), so a run like "a b a b" drafts on past the end of its last copy */
        const int d = c->n - k - j;
        for (int i = 0; i < max_draft; i++) out[i] = i < d ? c->tokens[c->n - d + i] : out[i - d];
        return max_draft;
    }
    return 0;
}

static void ngram_free(g4_drafter *d) {
    if (!d) return;
    free(d->impl);
    free(d);
}

g4_status g4_drafter_ngram_new(int n_min, int n_max, g4_drafter **out) {
    *out = NULL;
    if (n_min < 1 || n_max < n_min || n_max > 64)
        return g4_fail(G4_ERR_INPUT, "n-gram sizes %d..%d: need 1 <= min <= max <= 64", n_min, n_max);
    g4_drafter *d = calloc(1, sizeof *d);
    ngram *g = malloc(sizeof *g);
    if (!d || !g) {
        free(d);
        free(g);
        return g4_fail(G4_ERR_NOMEM, "out of memory");
    }
    *g = (ngram){n_min, n_max};
    *d = (g4_drafter){.propose = ngram_propose, .free = ngram_free, .default_max = NGRAM_DEFAULT_MAX, .impl = g};
    *out = d;
    return G4_OK;
}
