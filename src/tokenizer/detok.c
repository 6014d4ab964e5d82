/* detok.c — decoding ids to text as HF `tokenizers` does (TokenizerImpl::decode: id -> piece,
 * special pieces optionally dropped, then the decoder chain Replace / ByteFallback / Fuse / Strip,
 * joined), and the streaming detokenizer built on the same chain. Owns nothing of encoding. */
#include "tokenizer/tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>

/* A list of strings: spans into one text buffer. */
typedef struct {
    tk_buf text;
    size_t *off, *len;
    size_t n, cap;
} tk_list;

static int list_add(tk_list *l, const char *s, size_t n) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        size_t *o = realloc(l->off, cap * sizeof *o);
        if (o) l->off = o;
        size_t *q = realloc(l->len, cap * sizeof *q);
        if (q) l->len = q;
        if (!o || !q) return -1;
        l->cap = cap;
    }
    l->off[l->n] = l->text.len;
    l->len[l->n] = n;
    l->n++;
    return tk_buf_put(&l->text, s, n);
}

/* Appends to the last item (which must be the last text written). */
static int list_append_last(tk_list *l, const char *s, size_t n) {
    l->len[l->n - 1] += n;
    return tk_buf_put(&l->text, s, n);
}

static void list_free(tk_list *l) {
    free(l->text.p);
    free(l->off);
    free(l->len);
    memset(l, 0, sizeof *l);
}

static int hexv(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* ByteFallback's test: "<0xHH>" (6 bytes) whose HH parses as u8::from_str_radix(_, 16), which
 * also takes a '+' sign. Returns the byte or -1. */
static int byte_piece(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return -1;
    unsigned char a = (unsigned char)s[3], b = (unsigned char)s[4];
    if (a == '+') return hexv(b);
    int x = hexv(a), y = hexv(b);
    return (x < 0 || y < 0) ? -1 : x * 16 + y;
}

static int replace_into(tk_list *o, const char *s, size_t n, const tk_step *st) {
    if (list_add(o, "", 0)) return -1;
    size_t i = 0;
    while (i < n) {
        const char *m = st->pattern.len <= n - i ? memmem(s + i, n - i, st->pattern.s, st->pattern.len) : NULL;
        if (!m) break;
        size_t at = (size_t)(m - s);
        if (list_append_last(o, s + i, at - i) || list_append_last(o, st->content.s, st->content.len)) return -1;
        i = at + st->pattern.len;
    }
    return list_append_last(o, s + i, n - i);
}

static int strip_into(tk_list *o, const char *s, size_t n, const tk_step *st) {
    size_t a = 0, b = n, cl = st->content.len;
    for (uint32_t k = 0; k < st->start && a + cl <= b && !memcmp(s + a, st->content.s, cl); k++) a += cl;
    /* from the end: whole characters only, never past the start cut */
    for (uint32_t k = 0; k < st->stop && b >= a + cl && !memcmp(s + b - cl, st->content.s, cl); k++) b -= cl;
    return list_add(o, s + a, b - a);
}

static int flush_bytes(tk_list *o, const unsigned char *bytes, size_t nb) {
    if (!nb) return 0;
    if (tk_utf8_check((const char *)bytes, nb) == nb) return list_add(o, (const char *)bytes, nb);
    for (size_t i = 0; i < nb; i++)
        if (list_add(o, "\xEF\xBF\xBD", 3)) return -1; /* U+FFFD per byte, as HF */
    return 0;
}

static int apply_step(const tk_step *st, const tk_list *in, tk_list *o) {
    o->n = 0;
    o->text.len = 0;
    if (st->kind == TK_DEC_FUSE) {
        if (list_add(o, "", 0)) return -1;
        for (size_t i = 0; i < in->n; i++)
            if (list_append_last(o, in->text.p + in->off[i], in->len[i])) return -1;
        return 0;
    }
    if (st->kind == TK_DEC_BYTE_FALLBACK) {
        tk_buf bytes = {0};
        for (size_t i = 0; i < in->n; i++) {
            const char *s = in->text.p + in->off[i];
            int b = byte_piece(s, in->len[i]);
            if (b >= 0) {
                unsigned char c = (unsigned char)b;
                if (tk_buf_put(&bytes, &c, 1)) { free(bytes.p); return -1; }
                continue;
            }
            if (flush_bytes(o, (unsigned char *)bytes.p, bytes.len) || list_add(o, s, in->len[i])) {
                free(bytes.p);
                return -1;
            }
            bytes.len = 0;
        }
        int rc = flush_bytes(o, (unsigned char *)bytes.p, bytes.len);
        free(bytes.p);
        return rc;
    }
    for (size_t i = 0; i < in->n; i++) {
        const char *s = in->text.p + in->off[i];
        int rc = st->kind == TK_DEC_REPLACE ? replace_into(o, s, in->len[i], st) : strip_into(o, s, in->len[i], st);
        if (rc) return -1;
    }
    return 0;
}

static g4_status run_chain(const g4_tokenizer *t, const tk_str *pieces, size_t n, uint32_t n_steps,
                           tk_list *result) {
    tk_list a = {0}, b = {0};
    for (size_t i = 0; i < n; i++)
        if (list_add(&a, pieces[i].s, pieces[i].len)) goto oom;
    for (uint32_t s = 0; s < n_steps; s++) {
        if (apply_step(&t->dec[s], &a, &b)) goto oom;
        tk_list x = a; a = b; b = x;
    }
    list_free(&b);
    *result = a;
    return G4_OK;
oom:
    list_free(&a);
    list_free(&b);
    return g4_fail(G4_ERR_NOMEM, "detokenize: out of memory");
}

g4_status tk_decode_pieces(const g4_tokenizer *t, const tk_str *pieces, size_t n, tk_buf *out) {
    if (!t->has_decoder) {
        /* HF without a decoder: tokens.join(" ") */
        for (size_t i = 0; i < n; i++)
            if ((i && tk_buf_put(out, " ", 1)) || tk_buf_put(out, pieces[i].s, pieces[i].len))
                return g4_fail(G4_ERR_NOMEM, "detokenize: out of memory");
        return G4_OK;
    }
    tk_list l;
    g4_status st = run_chain(t, pieces, n, t->n_dec, &l);
    if (st) return st;
    for (size_t i = 0; i < l.n; i++)
        if (tk_buf_put(out, l.text.p + l.off[i], l.len[i])) { list_free(&l); return g4_fail(G4_ERR_NOMEM, "detokenize: out of memory"); }
    if (!out->p && tk_buf_put(out, "", 0)) { list_free(&l); return g4_fail(G4_ERR_NOMEM, "detokenize: out of memory"); }
    list_free(&l);
    return G4_OK;
}

int tk_dec_is_byte_piece(const g4_tokenizer *t, int32_t id) {
    uint32_t k = 0;
    while (k < t->n_dec && t->dec[k].kind != TK_DEC_BYTE_FALLBACK) k++;
    if (!t->has_decoder || k == t->n_dec) return 0;
    tk_str p = t->piece[id];
    if (k == 0) return byte_piece(p.s, p.len) >= 0;
    tk_list l;
    if (run_chain(t, &p, 1, k, &l)) return 1; /* OOM: holding the token back is always safe */
    int r = l.n == 1 && byte_piece(l.text.p + l.off[0], l.len[0]) >= 0;
    list_free(&l);
    return r;
}

static g4_status check_id(const g4_tokenizer *t, int32_t id) {
    if (id < 0 || id >= t->n_ids || !(t->flags[id] & TK_F_EXISTS))
        return g4_fail(G4_ERR_INPUT, "detokenize: token id %d is out of range [0, %d)", id, t->n_ids);
    return G4_OK;
}

g4_status g4_detokenize(const g4_tokenizer *t, const int32_t *ids, size_t n, int skip_special,
                        char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    if (!t) return g4_fail(G4_ERR_INPUT, "detokenize: no tokenizer");
    tk_str *pieces = malloc((n ? n : 1) * sizeof *pieces);
    if (!pieces) return g4_fail(G4_ERR_NOMEM, "detokenize: out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        g4_status st = check_id(t, ids[i]);
        if (st) { free(pieces); return st; }
        if (skip_special && (t->flags[ids[i]] & TK_F_SPECIAL)) continue;
        pieces[k++] = t->piece[ids[i]];
    }
    tk_buf out = {0};
    g4_status st = tk_decode_pieces(t, pieces, k, &out);
    free(pieces);
    if (!st && !out.p && tk_buf_put(&out, "", 0)) st = g4_fail(G4_ERR_NOMEM, "detokenize: out of memory");
    if (st) { free(out.p); return st; }
    *text = out.p;
    *len = out.len;
    return G4_OK;
}

/* ---------------------------------------------------------------- streaming */

/* The chain is cut before every token that is not a byte-fallback piece: runs of <0xXX> pieces
 * (the only thing ByteFallback looks across tokens at) never straddle a cut, and every other step
 * before Fuse works per token, so decode(a ++ b) == decode(a) ++ decode(b) at each cut. Held-back
 * byte pieces are what keeps a UTF-8 sequence from being split. Chains where that does not hold
 * (a step after Fuse) are decoded whole at finish. */
struct g4_detok_stream {
    const g4_tokenizer *t;
    int skip_special;
    tk_ids pending;
    size_t n_out_tokens; /* tokens emitted so far (for the " " join of decoder-less tokenizers) */
};

g4_detok_stream *g4_detok_stream_new(const g4_tokenizer *t, int skip_special) {
    if (!t) return NULL;
    g4_detok_stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->t = t;
    s->skip_special = skip_special;
    return s;
}

void g4_detok_stream_free(g4_detok_stream *s) {
    if (!s) return;
    free(s->pending.p);
    free(s);
}

static g4_status append_out(char **buf, size_t *len, const char *s, size_t n) {
    size_t cur = *buf ? *len : 0;
    char *p = realloc(*buf, cur + n + 1);
    if (!p) return g4_fail(G4_ERR_NOMEM, "detokenize: out of memory");
    if (n) memcpy(p + cur, s, n);
    p[cur + n] = 0;
    *buf = p;
    *len = cur + n;
    return G4_OK;
}

static g4_status flush_pending(g4_detok_stream *s, char **buf, size_t *len) {
    const g4_tokenizer *t = s->t;
    size_t n = s->pending.len;
    g4_status st = G4_OK;
    if (!n) return append_out(buf, len, "", 0);
    tk_str *pieces = malloc(n * sizeof *pieces);
    if (!pieces) return g4_fail(G4_ERR_NOMEM, "detokenize: out of memory");
    for (size_t i = 0; i < n; i++) pieces[i] = t->piece[s->pending.p[i]];
    tk_buf out = {0};
    if (!t->has_decoder && s->n_out_tokens && tk_buf_put(&out, " ", 1))
        st = g4_fail(G4_ERR_NOMEM, "detokenize: out of memory");
    if (!st) st = tk_decode_pieces(t, pieces, n, &out);
    if (!st) st = append_out(buf, len, out.p ? out.p : "", out.len);
    free(out.p);
    free(pieces);
    s->n_out_tokens += n;
    s->pending.len = 0;
    return st;
}

g4_status g4_detok_stream_push(g4_detok_stream *s, int32_t id, char **buf, size_t *len) {
    if (!s) return g4_fail(G4_ERR_INPUT, "detokenize: no stream");
    const g4_tokenizer *t = s->t;
    g4_status st = check_id(t, id);
    if (st) return st;
    if (s->skip_special && (t->flags[id] & TK_F_SPECIAL)) return append_out(buf, len, "", 0);
    if (tk_ids_push(&s->pending, id)) return g4_fail(G4_ERR_NOMEM, "detokenize: out of memory");
    if (!t->has_decoder) return flush_pending(s, buf, len);
    if (!t->dec_streamable || tk_dec_is_byte_piece(t, id)) return append_out(buf, len, "", 0);
    return flush_pending(s, buf, len);
}

g4_status g4_detok_stream_finish(g4_detok_stream *s, char **buf, size_t *len) {
    if (!s) return g4_fail(G4_ERR_INPUT, "detokenize: no stream");
    return flush_pending(s, buf, len);
}
