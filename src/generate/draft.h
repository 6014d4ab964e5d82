#ifndef G4_DRAFT_H
#define G4_DRAFT_H
/* A source of draft tokens for speculative decoding: the speculative loop (speculate.c) asks a
 * drafter for up to max_draft tokens, verifies them in one batched forward of the target and
 * keeps the matching prefix plus the target's own next token. Two kinds: n-gram prompt lookup
 * (no model) and Gemma 4's MTP assistant, which reads the target's KV and last hidden state. */

#include <stdint.h>

#include "gemma4c.h"

/* What the loop hands a drafter each round. It is called right after the target's forward
 * (the prefill, or the verify step of the previous round) and BEFORE the loop rewinds the KV of
 * rejected drafts, so the target's cache still holds everything that forward wrote. */
typedef struct {
    const int32_t *tokens;      /* the sequence so far: prompt + accepted output; tokens[n - 1] is
                                 * the newest token, not yet in the target's KV */
    int n;
    g4_model *target;
    int slot;                   /* the target's slot of this sequence */
    int kv_written;             /* positions [0, kv_written) of the slot's KV hold what the last
                                 * forward wrote (rejected drafts included) */
    int step_start;             /* the position of that forward's first row: the verify step's (or
                                 * one-row step's) newest token; 0 after a prefill, which counts as
                                 * one forward over the whole prompt (as transformers runs it),
                                 * however it was chunked or taken from a prompt cache */
    const float *hidden;        /* the target's final hidden state (after the final norm) of the
                                 * row whose logits chose tokens[n - 1], [hidden_size]; NULL when
                                 * the loop has none (no drafter that needs it asked for it) */
} g4_draft_ctx;

typedef struct g4_drafter g4_drafter;
struct g4_drafter {
    /* Writes up to max_draft proposed token ids to out; returns how many (0: no draft this round,
     * the loop takes a plain decode step), or -1 on error (g4_fail message set). */
    int (*propose)(g4_drafter *d, const g4_draft_ctx *c, int max_draft, int32_t *out);
    /* Called when the slot starts a new sequence. May be NULL. A drafter the server shares among
     * its slots (called from one thread, slot after slot) is not reset: what a round needs of
     * the sequence must come from g4_draft_ctx, not from state kept between calls. */
    void (*reset)(g4_drafter *d);
    void (*free)(g4_drafter *d);
    int needs_hidden;           /* the loop must fill g4_draft_ctx.hidden */
    int default_max;            /* drafts per round when the user gives no --draft-max */
    void *impl;
};

#endif
