/* tokenizer.c — the encode pipeline of HF `tokenizers` (TokenizerImpl::encode_single_sequence):
 * added tokens split off first (AddedVocabulary::extract_and_normalize), the normalizer on the
 * rest, the pre-tokenizer, the BPE model per word, then the post-processor template. Also the
 * vocabulary look-ups of the public API and the UTF-8 helpers. Decoding lives in detok.c. */
#include "tokenizer/tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- small helpers */

size_t tk_utf8_len(const unsigned char *s, size_t n) {
    if (n == 0) return 0;
    unsigned c = s[0];
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return (n >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && s[1] < 0xA0) return 0;  /* overlong */
        if (c == 0xED && s[1] >= 0xA0) return 0; /* UTF-16 surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0;
        if (c == 0xF0 && s[1] < 0x90) return 0;
        if (c == 0xF4 && s[1] >= 0x90) return 0; /* > U+10FFFF */
        return 4;
    }
    return 0;
}

size_t tk_utf8_check(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] < 0x80) { i++; continue; }
        size_t k = tk_utf8_len(u + i, n - i);
        if (!k) return i;
        i += k;
    }
    return n;
}

uint32_t tk_utf8_decode(const unsigned char *s, size_t *len) {
    unsigned c = s[0];
    if (c < 0x80) { *len = 1; return c; }
    if (c < 0xE0) { *len = 2; return (uint32_t)(c & 0x1F) << 6 | (s[1] & 0x3F); }
    if (c < 0xF0) { *len = 3; return (uint32_t)(c & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F); }
    *len = 4;
    return (uint32_t)(c & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 | (uint32_t)(s[2] & 0x3F) << 6 | (s[3] & 0x3F);
}

size_t tk_put_utf8(char *w, uint32_t cp) {
    if (cp < 0x80) { w[0] = (char)cp; return 1; }
    if (cp < 0x800) { w[0] = (char)(0xC0 | cp >> 6); w[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        w[0] = (char)(0xE0 | cp >> 12); w[1] = (char)(0x80 | (cp >> 6 & 63)); w[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    w[0] = (char)(0xF0 | cp >> 18); w[1] = (char)(0x80 | (cp >> 12 & 63));
    w[2] = (char)(0x80 | (cp >> 6 & 63)); w[3] = (char)(0x80 | (cp & 63));
    return 4;
}

int tk_buf_put(tk_buf *b, const void *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

int tk_ids_push(tk_ids *v, int32_t id) {
    if (v->len == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        int32_t *p = realloc(v->p, cap * sizeof *p);
        if (!p) return -1;
        v->p = p;
        v->cap = cap;
    }
    v->p[v->len++] = id;
    return 0;
}

/* Rust's char::is_whitespace (Unicode White_Space). */
static int is_ws(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

/* Approximates Rust's c.is_alphanumeric() || c == '_' (used only for single_word added tokens):
 * exact for ASCII; other code points count as word characters unless whitespace, punctuation or
 * symbols of the common blocks. */
static int is_word_char(uint32_t c) {
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (is_ws(c) || c < 0xC0 || c == 0xD7 || c == 0xF7) return 0;
    if ((c >= 0x2000 && c <= 0x2BFF) || (c >= 0x3000 && c <= 0x303F) || (c >= 0xFE30 && c <= 0xFE4F) ||
        (c >= 0xFF00 && c <= 0xFF0F) || (c >= 0x1F000 && c <= 0x1FAFF) || (c >= 0xE000 && c <= 0xF8FF))
        return 0;
    return 1;
}

static uint32_t last_char(const char *s, size_t n) {
    size_t i = n;
    while (i > 0 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) i--;
    if (i == 0) return 0;
    size_t l;
    return tk_utf8_decode((const unsigned char *)s + i - 1, &l);
}

/* ---------------------------------------------------------------- added tokens */

typedef struct {
    size_t start, end;
    int32_t added; /* index into t->added, -1 = plain text */
} tk_seg;

typedef struct {
    tk_seg *p;
    size_t len, cap;
} tk_segs;

static int seg_push(tk_segs *v, size_t start, size_t end, int32_t added) {
    if (v->len == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 16;
        tk_seg *p = realloc(v->p, cap * sizeof *p);
        if (!p) return -1;
        v->p = p;
        v->cap = cap;
    }
    v->p[v->len++] = (tk_seg){start, end, added};
    return 0;
}

/* Whether [a, b) overlaps one of the sorted, disjoint byte ranges plain [2 * n_plain]. */
static int in_plain(const size_t *plain, size_t n_plain, size_t a, size_t b) {
    for (size_t i = 0; i < n_plain; i++)
        if (a < plain[2 * i + 1] && plain[2 * i] < b) return 1;
    return 0;
}

/* AddedVocabulary::find_matches: leftmost-longest matches of the trie over s, with the
 * single_word / lstrip / rstrip rules. Segments cover s; empty plain ones are not emitted.
 * A special token's text that overlaps one of the `plain` ranges is not matched there (HF's
 * split_special_tokens, for parts of the text only): it stays text. */
static int find_added(const g4_tokenizer *t, const tk_trie *tr, const char *s, size_t n, tk_segs *out,
                      const size_t *plain, size_t n_plain) {
    out->len = 0;
    size_t start_offset = 0, pos = 0;
    const unsigned char *u = (const unsigned char *)s;
    if (tr->n) {
        while (pos < n) {
            if (!tr->first[u[pos]]) { pos++; continue; }
            int32_t cur = 0, best = -1;
            size_t best_end = 0;
            for (size_t i = pos; i < n; i++) {
                int32_t ch = tr->nodes[cur].first_child;
                while (ch >= 0 && tr->nodes[ch].byte != u[i]) ch = tr->nodes[ch].next_sibling;
                if (ch < 0) break;
                cur = ch;
                if (tr->nodes[cur].added >= 0) { best = tr->nodes[cur].added; best_end = i + 1; }
            }
            if (best < 0) { pos++; continue; }
            if (n_plain && t->added[best].special && in_plain(plain, n_plain, pos, best_end)) { pos++; continue; }
            size_t start = pos, stop = best_end;
            pos = best_end; /* the matcher resumes after the match even when it is rejected */
            const tk_added *a = &t->added[best];
            /* flags of the id's current definition */
            if (a->single_word) {
                int start_space = start == 0 || !is_word_char(last_char(s, start));
                size_t l;
                int stop_space = stop == n || !is_word_char(tk_utf8_decode(u + stop, &l));
                if (!start_space || !stop_space) continue;
            }
            if (a->lstrip) {
                size_t ns = start;
                while (ns > 0) {
                    size_t j = ns;
                    while (j > 0 && (u[j - 1] & 0xC0) == 0x80) j--;
                    if (j == 0) break;
                    size_t l;
                    if (!is_ws(tk_utf8_decode(u + j - 1, &l))) break;
                    ns = j - 1;
                }
                start = ns > start_offset ? ns : start_offset;
            }
            if (a->rstrip) {
                while (stop < n) {
                    size_t l;
                    uint32_t c = tk_utf8_decode(u + stop, &l);
                    if (!is_ws(c)) break;
                    stop += l;
                }
            }
            if (start_offset < start && seg_push(out, start_offset, start, -1)) return -1;
            if (seg_push(out, start, stop, best)) return -1;
            start_offset = stop;
            if (pos < stop) pos = stop;
        }
    }
    if (start_offset < n && seg_push(out, start_offset, n, -1)) return -1;
    return 0;
}

/* ---------------------------------------------------------------- normalizer, pre-tokenizer */

static int replace_all(const char *s, size_t n, tk_str pat, tk_str with, tk_buf *out) {
    size_t i = 0;
    while (i < n) {
        const char *m = pat.len <= n - i ? memmem(s + i, n - i, pat.s, pat.len) : NULL;
        if (!m) break;
        size_t at = (size_t)(m - s);
        if (tk_buf_put(out, s + i, at - i) || tk_buf_put(out, with.s, with.len)) return -1;
        i = at + pat.len;
    }
    return tk_buf_put(out, s + i, n - i);
}

g4_status tk_normalize(const g4_tokenizer *t, const char *s, size_t n, tk_buf *out) {
    tk_buf a = {0}, b = {0};
    if (tk_buf_put(&a, s, n)) return g4_fail(G4_ERR_NOMEM, "tokenize: out of memory");
    for (uint32_t i = 0; i < t->n_norm; i++) {
        const tk_step *st = &t->norm[i];
        b.len = 0;
        int rc;
        if (st->kind == TK_NORM_REPLACE) rc = replace_all(a.p, a.len, st->pattern, st->content, &b);
        else if (a.len == 0) rc = tk_buf_put(&b, "", 0);
        else rc = tk_buf_put(&b, st->content.s, st->content.len) || tk_buf_put(&b, a.p, a.len);
        if (rc) { free(a.p); free(b.p); return g4_fail(G4_ERR_NOMEM, "tokenize: out of memory"); }
        tk_buf x = a; a = b; b = x;
    }
    free(b.p);
    free(out->p);
    *out = a;
    return G4_OK;
}

typedef struct {
    size_t start, end;
} tk_span;

typedef struct {
    tk_span *p;
    size_t len, cap;
} tk_spans;

static int span_push(tk_spans *v, size_t start, size_t end) {
    if (v->len == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 16;
        tk_span *p = realloc(v->p, cap * sizeof *p);
        if (!p) return -1;
        v->p = p;
        v->cap = cap;
    }
    v->p[v->len++] = (tk_span){start, end};
    return 0;
}

/* NormalizedString::split with a String pattern (pre_tokenizers/split.rs + normalizer.rs):
 * matches -> (span, is_match), invert, then the behavior; empty pieces are dropped. */
static int split_piece(const tk_step *st, const char *s, size_t a, size_t b, tk_spans *out, tk_spans *tmp) {
    /* tmp collects (start, end) of all parts; is_match kept in a parallel bitset via end|flag */
    tmp->len = 0;
    size_t prev = a, i = a;
    while (i < b) {
        const char *m = st->pattern.len <= b - i ? memmem(s + i, b - i, st->pattern.s, st->pattern.len) : NULL;
        if (!m) break;
        size_t at = (size_t)(m - s);
        if (prev != at && span_push(tmp, prev, at << 1)) return -1;
        if (span_push(tmp, at, (at + st->pattern.len) << 1 | 1)) return -1;
        prev = i = at + st->pattern.len;
    }
    if (prev != b && span_push(tmp, prev, b << 1)) return -1;
    if (a == b && span_push(tmp, a, b << 1)) return -1;
    size_t first_out = out->len;
    int prev_match = 0;
    for (size_t k = 0; k < tmp->len; k++) {
        size_t ps = tmp->p[k].start, pe = tmp->p[k].end >> 1;
        int is_match = (int)(tmp->p[k].end & 1) ^ (st->invert ? 1 : 0);
        switch (st->behavior) {
        case TK_SPLIT_ISOLATED:
            if (span_push(out, ps, pe)) return -1;
            break;
        case TK_SPLIT_REMOVED:
            if (!is_match && span_push(out, ps, pe)) return -1;
            break;
        case TK_SPLIT_CONTIGUOUS:
            if (is_match == prev_match && out->len > first_out) out->p[out->len - 1].end = pe;
            else if (span_push(out, ps, pe)) return -1;
            prev_match = is_match;
            break;
        case TK_SPLIT_MERGED_PREV:
            if (is_match && !prev_match && out->len > first_out) out->p[out->len - 1].end = pe;
            else if (span_push(out, ps, pe)) return -1;
            prev_match = is_match;
            break;
        case TK_SPLIT_MERGED_NEXT:
            break;
        }
    }
    if (st->behavior == TK_SPLIT_MERGED_NEXT) {
        /* HF folds from the right: a match merges into the following piece */
        size_t base = out->len;
        prev_match = 0;
        for (size_t k = tmp->len; k-- > 0;) {
            size_t ps = tmp->p[k].start, pe = tmp->p[k].end >> 1;
            int is_match = (int)(tmp->p[k].end & 1) ^ (st->invert ? 1 : 0);
            if (is_match && !prev_match && out->len > base) out->p[out->len - 1].start = ps;
            else if (span_push(out, ps, pe)) return -1;
            prev_match = is_match;
        }
        for (size_t x = base, y = out->len - 1; x < y && y != (size_t)-1; x++, y--) {
            tk_span sw = out->p[x]; out->p[x] = out->p[y]; out->p[y] = sw;
        }
    }
    /* drop empty pieces */
    size_t w = first_out;
    for (size_t k = first_out; k < out->len; k++)
        if (out->p[k].end > out->p[k].start) out->p[w++] = out->p[k];
    out->len = w;
    return 0;
}

/* ---------------------------------------------------------------- encode */

typedef struct {
    tk_bpe_scratch bpe;
    tk_segs segs2;
    tk_spans sp_a, sp_b, sp_tmp;
    tk_buf norm;
} tk_enc;

static g4_status encode_words(const g4_tokenizer *t, tk_enc *e, const char *s, size_t n, tk_ids *out) {
    if (n == 0) return G4_OK;
    if (t->n_pre == 0) return tk_bpe_word(t, s, n, out, &e->bpe);
    e->sp_a.len = 0;
    if (span_push(&e->sp_a, 0, n)) return g4_fail(G4_ERR_NOMEM, "tokenize: out of memory");
    for (uint32_t i = 0; i < t->n_pre; i++) {
        e->sp_b.len = 0;
        for (size_t k = 0; k < e->sp_a.len; k++)
            if (split_piece(&t->pre[i], s, e->sp_a.p[k].start, e->sp_a.p[k].end, &e->sp_b, &e->sp_tmp))
                return g4_fail(G4_ERR_NOMEM, "tokenize: out of memory");
        tk_spans x = e->sp_a; e->sp_a = e->sp_b; e->sp_b = x;
    }
    for (size_t k = 0; k < e->sp_a.len; k++) {
        g4_status st = tk_bpe_word(t, s + e->sp_a.p[k].start, e->sp_a.p[k].end - e->sp_a.p[k].start, out, &e->bpe);
        if (st) return st;
    }
    return G4_OK;
}

static g4_status encode_plain(const g4_tokenizer *t, tk_enc *e, const char *s, size_t n, tk_ids *out) {
    g4_status st;
    if (t->n_norm) {
        if ((st = tk_normalize(t, s, n, &e->norm))) return st;
        s = e->norm.p;
        n = e->norm.len;
    }
    if (!t->trie_norm.n) return encode_words(t, e, s, n, out);
    if (find_added(t, &t->trie_norm, s, n, &e->segs2, NULL, 0)) return g4_fail(G4_ERR_NOMEM, "tokenize: out of memory");
    for (size_t i = 0; i < e->segs2.len; i++) {
        tk_seg g = e->segs2.p[i];
        if (g.added >= 0) {
            if (tk_ids_push(out, t->added[g.added].id)) return g4_fail(G4_ERR_NOMEM, "tokenize: out of memory");
        } else if ((st = encode_words(t, e, s + g.start, g.end - g.start, out))) {
            return st;
        }
    }
    return G4_OK;
}

static g4_status encode_text(const g4_tokenizer *t, const char *s, size_t n, tk_ids *out, const size_t *plain,
                             size_t n_plain) {
    tk_enc e;
    tk_segs segs = {0};
    memset(&e, 0, sizeof e);
    g4_status st = G4_OK;
    if (find_added(t, &t->trie_raw, s, n, &segs, plain, n_plain)) {
        st = g4_fail(G4_ERR_NOMEM, "tokenize: out of memory");
        goto done;
    }
    for (size_t i = 0; i < segs.len && !st; i++) {
        tk_seg g = segs.p[i];
        if (g.added >= 0) {
            if (tk_ids_push(out, t->added[g.added].id)) st = g4_fail(G4_ERR_NOMEM, "tokenize: out of memory");
        } else {
            /* encode_plain may reuse e.norm for s2, so the segment is taken from s, not e.norm */
            st = encode_plain(t, &e, s + g.start, g.end - g.start, out);
        }
    }
done:
    free(segs.p);
    free(e.segs2.p);
    free(e.sp_a.p);
    free(e.sp_b.p);
    free(e.sp_tmp.p);
    free(e.norm.p);
    tk_bpe_scratch_free(&e.bpe);
    return st;
}

g4_status g4_tokenize(const g4_tokenizer *t, const char *text, size_t len, int add_special,
                      int32_t **ids, size_t *n_ids) {
    return g4_tokenize_plain(t, text, len, add_special, NULL, 0, ids, n_ids);
}

g4_status g4_tokenize_plain(const g4_tokenizer *t, const char *text, size_t len, int add_special, const size_t *plain,
                            size_t n_plain, int32_t **ids, size_t *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    if (!t) return g4_fail(G4_ERR_INPUT, "tokenize: no tokenizer");
    if (len && !text) return g4_fail(G4_ERR_INPUT, "tokenize: NULL text");
    if (len >= UINT32_MAX / 2) return g4_fail(G4_ERR_INPUT, "tokenize: input of %zu bytes is too long", len);
    size_t bad = tk_utf8_check(text, len);
    if (bad != len)
        return g4_fail(G4_ERR_INPUT, "tokenize: input is not valid UTF-8 (byte %zu: 0x%02X)", bad,
                       (unsigned char)text[bad]);
    tk_ids out = {0};
    g4_status st = G4_OK;
    if (add_special && t->n_post) {
        for (uint32_t i = 0; i < t->n_post && !st; i++) {
            const tk_tmpl_item *it = &t->post[i];
            if (it->is_sequence) st = encode_text(t, text, len, &out, plain, n_plain);
            else
                for (uint32_t j = 0; j < it->n_ids && !st; j++)
                    if (tk_ids_push(&out, it->ids[j])) st = g4_fail(G4_ERR_NOMEM, "tokenize: out of memory");
        }
    } else {
        st = encode_text(t, text, len, &out, plain, n_plain);
    }
    if (st) { free(out.p); return st; }
    if (!out.p) out.p = malloc(sizeof *out.p); /* a valid pointer even for no ids */
    if (!out.p) return g4_fail(G4_ERR_NOMEM, "tokenize: out of memory");
    *ids = out.p;
    *n_ids = out.len;
    return G4_OK;
}

int g4_find_special_text(const g4_tokenizer *t, const char *s, size_t n, size_t *start, size_t *end) {
    const tk_trie *tr = &t->trie_raw;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t pos = 0; tr->n && pos < n; pos++) {
        if (!tr->first[u[pos]]) continue;
        int32_t cur = 0, best = -1;
        size_t best_end = 0;
        for (size_t i = pos; i < n; i++) {
            int32_t ch = tr->nodes[cur].first_child;
            while (ch >= 0 && tr->nodes[ch].byte != u[i]) ch = tr->nodes[ch].next_sibling;
            if (ch < 0) break;
            cur = ch;
            if (tr->nodes[cur].added >= 0 && t->added[tr->nodes[cur].added].special) {
                best = tr->nodes[cur].added;
                best_end = i + 1;
            }
        }
        if (best >= 0) {
            *start = pos;
            *end = best_end;
            return 1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- vocabulary */

int g4_tokenizer_vocab_size(const g4_tokenizer *t) { return t ? t->n_ids : 0; }

int32_t g4_token_to_id(const g4_tokenizer *t, const char *piece) {
    if (!t || !piece) return -1;
    size_t n = strlen(piece);
    int32_t id = tk_strmap_get(&t->added_map, piece, n);
    return id >= 0 ? id : tk_strmap_get(&t->vocab, piece, n);
}

const char *g4_id_to_token(const g4_tokenizer *t, int32_t id) {
    if (!t || id < 0 || id >= t->n_ids || !(t->flags[id] & TK_F_EXISTS)) return NULL;
    return t->piece[id].s;
}

int g4_token_is_special(const g4_tokenizer *t, int32_t id) {
    if (!t || id < 0 || id >= t->n_ids) return 0;
    return (t->flags[id] & TK_F_SPECIAL) != 0;
}
