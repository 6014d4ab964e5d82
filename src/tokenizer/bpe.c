/* bpe.c — the BPE model of HF `tokenizers` (models/bpe/model.rs merge_word + word.rs merge_all):
 * characters (or <0xXX> byte-fallback pieces, or unk) become symbols, then the lowest-ranked
 * adjacent pair is merged first, leftmost on ties, via a binary heap with lazy invalidation.
 * Owns one word's encoding; splitting text into words is tokenizer.c. */
#include "tokenizer/tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>

void tk_bpe_scratch_free(tk_bpe_scratch *s) {
    free(s->sym);
    free(s->prev);
    free(s->next);
    free(s->heap);
    memset(s, 0, sizeof *s);
}

static int scratch_reserve(tk_bpe_scratch *s, size_t n) {
    if (n <= s->cap) return 0;
    size_t cap = n < 256 ? 256 : n;
    int32_t *a = realloc(s->sym, cap * sizeof *a);
    if (a) s->sym = a;
    int32_t *b = realloc(s->prev, cap * sizeof *b);
    if (b) s->prev = b;
    int32_t *c = realloc(s->next, cap * sizeof *c);
    if (c) s->next = c;
    tk_merge_ent *h = realloc(s->heap, cap * 2 * sizeof *h);
    if (h) s->heap = h;
    if (!a || !b || !c || !h) return -1;
    s->cap = cap;
    return 0;
}

/* A queued merge: ordered by (rank, position) as HF's Merge; it still applies when the pair at
 * `pos` is still (left, right) (HF checks the merged id, which is the same test: the left symbol
 * never changes without consuming its entry, and the right one only grows). */
static inline int heap_less(const tk_merge_ent *a, const tk_merge_ent *b) { return a->key < b->key; }

static inline void heap_push(tk_merge_ent *h, size_t *n, tk_merge_ent v) {
    size_t i = (*n)++;
    while (i) {
        size_t p = (i - 1) >> 1;
        if (!heap_less(&v, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static inline tk_merge_ent heap_pop(tk_merge_ent *h, size_t *n) {
    tk_merge_ent top = h[0], v = h[--(*n)];
    size_t i = 0, m = *n;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= m) break;
        size_t r = l + 1, c = (r < m && heap_less(&h[r], &h[l])) ? r : l;
        if (!heap_less(&h[c], &v)) break;
        h[i] = h[c];
        i = c;
    }
    if (m) h[i] = v;
    return top;
}

static inline void try_queue(const g4_tokenizer *t, tk_merge_ent *heap, size_t *nh, int32_t a, int32_t b, uint32_t pos) {
    uint32_t rank;
    int32_t merged;
    if (tk_pairmap_get(&t->merges, a, b, &rank, &merged))
        heap_push(heap, nh, (tk_merge_ent){(uint64_t)rank << 32 | pos, a, b, merged});
}

g4_status tk_bpe_word(const g4_tokenizer *t, const char *w, size_t n, tk_ids *out, tk_bpe_scratch *s) {
    if (n == 0) return G4_OK;
    if (t->ignore_merges) {
        int32_t id = tk_strmap_get(&t->vocab, w, n);
        if (id >= 0) return tk_ids_push(out, id) ? g4_fail(G4_ERR_NOMEM, "tokenize: out of memory") : G4_OK;
    }
    /* every symbol covers >= 1 byte; +1 for a trailing unk */
    if (scratch_reserve(s, n + 1)) return g4_fail(G4_ERR_NOMEM, "tokenize: out of memory");
    int32_t *sym = s->sym;
    size_t ns = 0;
    int32_t unk_pending = 0; /* HF's fuse/flush of unknown characters, quirks included */
    const unsigned char *u = (const unsigned char *)w;
    for (size_t i = 0; i < n;) {
        size_t cl;
        uint32_t cp = tk_utf8_decode(u + i, &cl);
        int32_t id = cp < t->n_cp ? t->cp_id[cp] - 1 : -1;
        if (id >= 0) {
            if (unk_pending) { sym[ns++] = t->unk_id; unk_pending = 0; }
            sym[ns++] = id;
        } else {
            int done = 0;
            if (t->byte_fallback) {
                int ok = 1;
                for (size_t k = 0; k < cl; k++)
                    if (t->byte_id[u[i + k]] < 0) ok = 0;
                if (ok) {
                    /* as HF: a pending unk is not flushed before byte pieces */
                    for (size_t k = 0; k < cl; k++) sym[ns++] = t->byte_id[u[i + k]];
                    done = 1;
                }
            }
            if (!done && t->unk_id != -1) {
                if (t->unk_id < 0) return g4_fail(G4_ERR_INPUT, "tokenize: model.unk_token is not in the vocabulary");
                if (unk_pending && !t->fuse_unk) sym[ns++] = t->unk_id;
                unk_pending = 1;
            }
        }
        i += cl;
    }
    if (unk_pending) sym[ns++] = t->unk_id;
    if (ns == 0) return G4_OK;

    int32_t *prev = s->prev, *next = s->next;
    tk_merge_ent *heap = s->heap;
    size_t nh = 0;
    for (size_t i = 0; i < ns; i++) {
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < ns ? (int32_t)i + 1 : -1;
    }
    /* the initial pairs are independent look-ups: prefetch a block of slots, then probe */
    enum { BLK = 16 };
    for (size_t i0 = 0; i0 + 1 < ns; i0 += BLK) {
        size_t i1 = i0 + BLK < ns - 1 ? i0 + BLK : ns - 1;
        for (size_t i = i0; i < i1; i++) __builtin_prefetch(&t->merges.ent[tk_pair_slot(&t->merges, sym[i], sym[i + 1])]);
        for (size_t i = i0; i < i1; i++) try_queue(t, heap, &nh, sym[i], sym[i + 1], (uint32_t)i);
    }
    while (nh) {
        tk_merge_ent top = heap_pop(heap, &nh);
        uint32_t pos = (uint32_t)top.key;
        int32_t nx = next[pos];
        if (sym[pos] != top.left || nx < 0 || sym[nx] != top.right) continue; /* stale */
        int32_t merged = top.merged;
        sym[pos] = merged;
        sym[nx] = -1;
        int32_t nn = next[nx];
        next[pos] = nn;
        if (nn >= 0) prev[nn] = (int32_t)pos;
        int32_t pv = prev[pos];
        if (pv >= 0) __builtin_prefetch(&t->merges.ent[tk_pair_slot(&t->merges, sym[pv], merged)]);
        if (nn >= 0) try_queue(t, heap, &nh, merged, sym[nn], pos);
        if (pv >= 0) try_queue(t, heap, &nh, sym[pv], merged, (uint32_t)pv);
    }
    for (int32_t i = 0; i >= 0; i = next[i])
        if (tk_ids_push(out, sym[i])) return g4_fail(G4_ERR_NOMEM, "tokenize: out of memory");
    return G4_OK;
}
