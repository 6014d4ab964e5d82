/* tok_json.c — strict single-pass JSON scanner for tokenizer.json (33 MB for a 262k vocabulary:
 * jansson takes ~1.3 s on it). RFC 8259 grammar, UTF-8 validated, the text is never written (escaped
 * strings go to a side buffer), lone surrogates refused (as serde_json does). No semantics here. */
#include "tokenizer/tok_json.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TJ_MAX_DEPTH 128

static int fail(tj_doc *d, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(tj_doc *d, size_t at, const char *fmt, ...) {
    int k = snprintf(d->err, sizeof d->err, "byte %zu: ", at);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->err + k, sizeof d->err - (size_t)k, fmt, ap);
    va_end(ap);
    return -1;
}

static inline int new_node(tj_doc *d, uint32_t type, uint32_t off, uint32_t *idx) {
    if (__builtin_expect(d->n_nodes == d->cap, 0)) {
        size_t nc = d->cap ? d->cap * 2 : 1024;
        if (nc > UINT32_MAX) return fail(d, d->pos, "too many JSON values");
        tj_node *nn = realloc(d->nodes, nc * sizeof *nn);
        if (!nn) return fail(d, d->pos, "out of memory");
        d->nodes = nn;
        d->cap = nc;
    }
    *idx = (uint32_t)d->n_nodes++;
    tj_node *n = &d->nodes[*idx];
    n->type = type;
    n->size = 1;
    n->n = 0;
    n->off = off;
    return 0;
}

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* tokenizer.json is pretty-printed (a merge is 4 lines of 6-8 spaces of indentation), so runs of
 * whitespace are skipped 16 bytes at a time. */
static void skip_ws(tj_doc *d) {
    const char *b = d->buf;
    size_t p = d->pos, len = d->len;
#ifdef __SSE2__
    if (p < len && (b[p] == ' ' || b[p] == '\n' || b[p] == '\r' || b[p] == '\t')) {
        const __m128i sp = _mm_set1_epi8(' '), nl = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r'),
                      tb = _mm_set1_epi8('\t');
        while (p + 16 <= len) {
            __m128i v = _mm_loadu_si128((const __m128i *)(b + p));
            __m128i ws = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, sp), _mm_cmpeq_epi8(v, nl)),
                                      _mm_or_si128(_mm_cmpeq_epi8(v, cr), _mm_cmpeq_epi8(v, tb)));
            unsigned m = (unsigned)_mm_movemask_epi8(ws) ^ 0xFFFFu;
            if (m) { d->pos = p + (size_t)__builtin_ctz(m); return; }
            p += 16;
        }
    }
#endif
    while (p < len && (b[p] == ' ' || b[p] == '\n' || b[p] == '\r' || b[p] == '\t')) p++;
    d->pos = p;
}

/* First index >= r in b[0..len) holding '"', '\\', a control byte or a non-ASCII byte. */
static inline size_t scan_plain(const unsigned char *b, size_t r, size_t len) {
#ifdef __SSE2__
    const __m128i q = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\'), x20 = _mm_set1_epi8(0x20);
    while (r + 16 <= len) {
        __m128i v = _mm_loadu_si128((const __m128i *)(b + r));
        /* bytes >= 0x80 are negative as signed, so 0x20 > v catches them with the controls */
        __m128i special = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, q), _mm_cmpeq_epi8(v, bs)),
                                       _mm_cmpgt_epi8(x20, v));
        unsigned m = (unsigned)_mm_movemask_epi8(special);
        if (m) return r + (size_t)__builtin_ctz(m);
        r += 16;
    }
#endif
    while (r < len && b[r] >= 0x20 && b[r] < 0x80 && b[r] != '"' && b[r] != '\\') r++;
    return r;
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int read_hex4(tj_doc *d, size_t p, uint32_t *out) {
    if (p + 4 > d->len) return fail(d, p, "truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval((unsigned char)d->buf[p + i]);
        if (h < 0) return fail(d, p + i, "bad hex digit in \\u escape");
        v = v << 4 | (uint32_t)h;
    }
    *out = v;
    return 0;
}

/* Length of the valid UTF-8 sequence at s[0..n) starting with a byte >= 0x80, or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c >= 0xC2 && c <= 0xDF) return (n >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && s[1] < 0xA0) return 0;  /* overlong */
        if (c == 0xED && s[1] >= 0xA0) return 0; /* surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        if (c == 0xF0 && s[1] < 0x90) return 0;
        if (c == 0xF4 && s[1] >= 0x90) return 0;
        return 4;
    }
    return 0;
}

static size_t put_utf8(char *w, uint32_t cp) {
    if (cp < 0x80) { w[0] = (char)cp; return 1; }
    if (cp < 0x800) { w[0] = (char)(0xC0 | cp >> 6); w[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        w[0] = (char)(0xE0 | cp >> 12); w[1] = (char)(0x80 | (cp >> 6 & 63));
        w[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    w[0] = (char)(0xF0 | cp >> 18); w[1] = (char)(0x80 | (cp >> 12 & 63));
    w[2] = (char)(0x80 | (cp >> 6 & 63)); w[3] = (char)(0x80 | (cp & 63));
    return 4;
}

static int side_reserve(tj_doc *d, size_t n) {
    if (d->side_len + n <= d->side_cap) return 0;
    size_t cap = d->side_cap ? d->side_cap : 4096;
    while (cap < d->side_len + n) cap *= 2;
    if (cap >= TJ_SIDE) return fail(d, d->pos, "too many escaped strings");
    char *p = realloc(d->side, cap);
    if (!p) return fail(d, d->pos, "out of memory");
    d->side = p;
    d->side_cap = cap;
    return 0;
}

/* d->pos is at the opening quote. Strings without escapes stay where they are; the others are
 * decoded into d->side (never longer than their escaped form). *off / *slen as in a TJ_STR node. */
static int scan_string(tj_doc *d, uint32_t *off, uint32_t *slen) {
    size_t open = d->pos, r = open + 1;
    const unsigned char *b = (const unsigned char *)d->buf;
    size_t len = d->len;
    *off = (uint32_t)r;
    /* pass 1: validate up to the closing quote or the first escape */
    for (;;) {
        r = scan_plain(b, r, len);
        if (r >= len) return fail(d, open, "unterminated string");
        unsigned c = b[r];
        if (c == '"') {
            *slen = (uint32_t)(r - open - 1);
            d->pos = r + 1;
            return 0;
        }
        if (c == '\\') break;
        if (c < 0x20) return fail(d, r, "control character 0x%02X in string", c);
        size_t k = utf8_seq(b + r, len - r);
        if (!k) return fail(d, r, "invalid UTF-8 in string");
        r += k;
    }
    /* pass 2: the string has escapes; copy what was validated, then decode the rest */
    size_t pre = r - (open + 1);
    /* the decoded string is at most as long as the rest of the text */
    if (side_reserve(d, len - open)) return -1;
    char *w0 = d->side + d->side_len, *w = w0;
    memcpy(w, b + open + 1, pre);
    w += pre;
    for (;;) {
        while (r < len && b[r] >= 0x20 && b[r] < 0x80 && b[r] != '"' && b[r] != '\\') *w++ = (char)b[r++];
        if (r >= len) return fail(d, open, "unterminated string");
        unsigned c = b[r];
        if (c == '"') break;
        if (c < 0x20) return fail(d, r, "control character 0x%02X in string", c);
        if (c >= 0x80) {
            size_t k = utf8_seq(b + r, len - r);
            if (!k) return fail(d, r, "invalid UTF-8 in string");
            memcpy(w, b + r, k);
            w += k;
            r += k;
            continue;
        }
        /* backslash */
        if (r + 1 >= len) return fail(d, r, "truncated escape");
        unsigned e = b[r + 1];
        r += 2;
        switch (e) {
        case '"': *w++ = '"'; break;
        case '\\': *w++ = '\\'; break;
        case '/': *w++ = '/'; break;
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case 'n': *w++ = '\n'; break;
        case 'r': *w++ = '\r'; break;
        case 't': *w++ = '\t'; break;
        case 'u': {
            uint32_t cp;
            if (read_hex4(d, r, &cp)) return -1;
            r += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(d, r - 6, "lone trailing surrogate in \\u escape");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                uint32_t lo;
                if (r + 2 > len || b[r] != '\\' || b[r + 1] != 'u')
                    return fail(d, r - 6, "lone leading surrogate in \\u escape");
                if (read_hex4(d, r + 2, &lo)) return -1;
                if (lo < 0xDC00 || lo > 0xDFFF)
                    return fail(d, r, "lone leading surrogate in \\u escape");
                r += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            w += put_utf8(w, cp);
            break;
        }
        default: return fail(d, r - 2, "invalid escape '\\%c'", e >= 0x20 && e < 0x7f ? (char)e : '?');
        }
    }
    *off = TJ_SIDE | (uint32_t)d->side_len;
    *slen = (uint32_t)(w - w0);
    d->side_len += (size_t)(w - w0);
    d->pos = r + 1;
    return 0;
}

static int parse_string(tj_doc *d) {
    uint32_t idx = 0;
    if (new_node(d, TJ_STR, (uint32_t)d->pos + 1, &idx)) return -1;
    uint32_t off, n;
    if (scan_string(d, &off, &n)) return -1;
    d->nodes[idx].off = off;
    d->nodes[idx].n = n;
    return 0;
}

/* One ["a", "b"] element at d->pos (which is at its '['): 1 and appended to d->pairs if it has
 * exactly that shape, 0 with d->pos restored if not (the caller parses it generically), -1 on a
 * syntax error inside a string. */
static int try_pair(tj_doc *d) {
    size_t start = d->pos;
    tj_pair pr;
    pr.open = (uint32_t)start;
    d->pos++;
    skip_ws(d);
    if (d->pos >= d->len || d->buf[d->pos] != '"') goto no;
    if (scan_string(d, &pr.a_off, &pr.a_len)) return -1;
    skip_ws(d);
    if (d->pos >= d->len || d->buf[d->pos] != ',') goto no;
    d->pos++;
    skip_ws(d);
    if (d->pos >= d->len || d->buf[d->pos] != '"') goto no;
    if (scan_string(d, &pr.b_off, &pr.b_len)) return -1;
    skip_ws(d);
    if (d->pos >= d->len || d->buf[d->pos] != ']') goto no;
    d->pos++;
    if (d->n_pairs == d->pairs_cap) {
        size_t cap = d->pairs_cap ? d->pairs_cap * 2 : 1024;
        tj_pair *np = realloc(d->pairs, cap * sizeof *np);
        if (!np) return fail(d, start, "out of memory");
        d->pairs = np;
        d->pairs_cap = cap;
    }
    d->pairs[d->n_pairs++] = pr;
    return 1;
no:
    d->pos = start; /* a string scanned on the way may have used side space: harmless */
    return 0;
}

/* Turns the pairs from `first` on back into ARR + 2 STR nodes (an array that began with pairs but
 * holds something else too). */
static int unpack_pairs(tj_doc *d, size_t first) {
    for (size_t i = first; i < d->n_pairs; i++) {
        tj_pair pr = d->pairs[i];
        uint32_t a = 0, x = 0, y = 0;
        if (new_node(d, TJ_ARR, pr.open, &a) || new_node(d, TJ_STR, pr.a_off, &x) || new_node(d, TJ_STR, pr.b_off, &y))
            return -1;
        d->nodes[a].n = 2;
        d->nodes[a].size = 3;
        d->nodes[x].n = pr.a_len;
        d->nodes[y].n = pr.b_len;
    }
    d->n_pairs = first;
    return 0;
}

static int parse_number(tj_doc *d) {
    const char *b = d->buf;
    size_t p = d->pos, len = d->len, start = p;
    if (p < len && b[p] == '-') p++;
    if (p >= len || b[p] < '0' || b[p] > '9') return fail(d, start, "invalid number");
    if (b[p] == '0') p++;
    else while (p < len && b[p] >= '0' && b[p] <= '9') p++;
    if (p < len && b[p] == '.') {
        p++;
        if (p >= len || b[p] < '0' || b[p] > '9') return fail(d, p, "invalid number: digit expected after '.'");
        while (p < len && b[p] >= '0' && b[p] <= '9') p++;
    }
    if (p < len && (b[p] == 'e' || b[p] == 'E')) {
        p++;
        if (p < len && (b[p] == '+' || b[p] == '-')) p++;
        if (p >= len || b[p] < '0' || b[p] > '9') return fail(d, p, "invalid number: digit expected in exponent");
        while (p < len && b[p] >= '0' && b[p] <= '9') p++;
    }
    uint32_t idx = 0;
    if (new_node(d, TJ_NUM, (uint32_t)start, &idx)) return -1;
    d->nodes[idx].n = (uint32_t)(p - start);
    d->pos = p;
    return 0;
}

/* A large array of pairs (BPE merges: 20 MB of text) is parsed in two halves at once: a second
 * thread starts at a line that opens an element near the middle (raw newlines only occur between
 * tokens, never inside strings) and parses pairs up to the closing ']'. Its result is used only if
 * this thread's own parse arrives at exactly that element; otherwise it is discarded. */
typedef struct {
    const char *buf;
    size_t len, split, end;
    tj_doc sub;    /* the second half's pairs and escaped strings */
    uint32_t count;
    int ok, active;
    pthread_t th;
} tj_split;

static void *split_run(void *arg) {
    tj_split *sp = arg;
    tj_doc *s = &sp->sub;
    s->buf = sp->buf;
    s->len = sp->len;
    s->pos = sp->split;
    for (;;) {
        if (s->pos >= s->len || s->buf[s->pos] != '[' || try_pair(s) != 1) return NULL;
        sp->count++;
        skip_ws(s);
        if (s->pos >= s->len) return NULL;
        char c = s->buf[s->pos];
        if (c == ']') {
            sp->end = s->pos + 1;
            sp->ok = 1;
            return NULL;
        }
        if (c != ',') return NULL;
        s->pos++;
        skip_ws(s);
    }
}

static void split_start(tj_doc *d, tj_split *sp) {
    memset(sp, 0, sizeof *sp);
    if (d->len - d->pos < d->split_min) return;
    size_t p = d->pos + (d->len - d->pos) / 2;
    for (int tries = 0; tries < 64; tries++) {
        const char *nl = memchr(d->buf + p, '\n', d->len - p);
        if (!nl) return;
        p = (size_t)(nl - d->buf) + 1;
        size_t q = p;
        while (q < d->len && (d->buf[q] == ' ' || d->buf[q] == '\t' || d->buf[q] == '\r')) q++;
        if (q < d->len && d->buf[q] == '[') {
            sp->buf = d->buf;
            sp->len = d->len;
            sp->split = q;
            sp->active = pthread_create(&sp->th, NULL, split_run, sp) == 0;
            return;
        }
    }
}

static void split_stop(tj_split *sp) {
    if (!sp->active) return;
    pthread_join(sp->th, NULL);
    sp->active = 0;
}

static void split_free(tj_split *sp) {
    split_stop(sp);
    free(sp->sub.side);
    free(sp->sub.pairs);
    sp->sub.side = NULL;
    sp->sub.pairs = NULL;
}

/* Takes over the second half's pairs, rebasing their side-buffer offsets. */
static int split_adopt(tj_doc *d, tj_split *sp) {
    tj_doc *s = &sp->sub;
    size_t base = d->side_len;
    if (s->side_len) {
        if (side_reserve(d, s->side_len)) return -1;
        memcpy(d->side + base, s->side, s->side_len);
        d->side_len += s->side_len;
    }
    if (d->n_pairs + s->n_pairs > d->pairs_cap) {
        size_t cap = d->n_pairs + s->n_pairs;
        tj_pair *np = realloc(d->pairs, cap * sizeof *np);
        if (!np) return fail(d, d->pos, "out of memory");
        d->pairs = np;
        d->pairs_cap = cap;
    }
    for (size_t i = 0; i < s->n_pairs; i++) {
        tj_pair pr = s->pairs[i];
        if (pr.a_off & TJ_SIDE) pr.a_off = TJ_SIDE | ((pr.a_off & ~TJ_SIDE) + (uint32_t)base);
        if (pr.b_off & TJ_SIDE) pr.b_off = TJ_SIDE | ((pr.b_off & ~TJ_SIDE) + (uint32_t)base);
        d->pairs[d->n_pairs++] = pr;
    }
    d->pos = sp->end;
    return 0;
}

/* Array node idx, d->pos at its first element, which starts with '['. Returns 1 when the whole
 * array was pairs (now a TJ_PAIRS node, ']' consumed), 0 when an element is not a pair (the pairs
 * before it are turned back into nodes, *count of them, d->pos at that element), -1 on error. */
static int parse_pairs(tj_doc *d, uint32_t idx, uint32_t *count) {
    size_t first = d->n_pairs;
    uint32_t n = 0;
    tj_split sp;
    split_start(d, &sp);
    int rc = -1;
    for (;;) {
        if (sp.active && d->pos == sp.split) {
            split_stop(&sp);
            if (sp.ok) {
                if (split_adopt(d, &sp)) goto out;
                n += sp.count;
                break;
            }
        }
        int k = d->pos < d->len && d->buf[d->pos] == '[' ? try_pair(d) : 0;
        if (k < 0) goto out;
        if (k == 0) {
            rc = unpack_pairs(d, first) ? -1 : 0;
            *count = n;
            goto out;
        }
        n++;
        skip_ws(d);
        if (d->pos >= d->len) { fail(d, d->pos, "unexpected end of input in array"); goto out; }
        char c = d->buf[d->pos];
        if (c == ']') { d->pos++; break; }
        if (c != ',') { fail(d, d->pos, "expected ',' or ']' in array"); goto out; }
        d->pos++;
        skip_ws(d);
    }
    if (d->n_refs == d->refs_cap) {
        size_t cap = d->refs_cap ? d->refs_cap * 2 : 8;
        tj_pairs_ref *nr = realloc(d->refs, cap * sizeof *nr);
        if (!nr) { fail(d, d->pos, "out of memory"); goto out; }
        d->refs = nr;
        d->refs_cap = cap;
    }
    d->refs[d->n_refs++] = (tj_pairs_ref){idx, (uint32_t)first};
    d->nodes[idx].type = TJ_PAIRS;
    d->nodes[idx].n = n;
    d->nodes[idx].size = 1;
    rc = 1;
out:
    split_free(&sp);
    return rc;
}

static int parse_value(tj_doc *d, int depth);

static int parse_container(tj_doc *d, int depth, int is_obj) {
    uint32_t idx = 0;
    if (depth >= TJ_MAX_DEPTH) return fail(d, d->pos, "nesting deeper than %d", TJ_MAX_DEPTH);
    if (new_node(d, is_obj ? TJ_OBJ : TJ_ARR, (uint32_t)d->pos, &idx)) return -1;
    char close = is_obj ? '}' : ']';
    uint32_t count = 0;
    d->pos++;
    skip_ws(d);
    if (d->pos < d->len && d->buf[d->pos] == close) {
        d->pos++;
        return 0;
    }
    /* arrays of [string, string] are kept as pairs while every element has that shape */
    if (!is_obj && d->pos < d->len && d->buf[d->pos] == '[' && depth + 1 < TJ_MAX_DEPTH) {
        int k = parse_pairs(d, idx, &count);
        if (k) return k < 0 ? -1 : 0;
        /* else: an element that is not a pair; the pairs before it are plain nodes again */
    }
    for (;;) {
        skip_ws(d);
        if (is_obj) {
            if (d->pos >= d->len || d->buf[d->pos] != '"')
                return fail(d, d->pos, d->pos >= d->len ? "unexpected end of input in object"
                                                        : "expected '\"' to start an object key");
            if (parse_string(d)) return -1;
            skip_ws(d);
            if (d->pos >= d->len || d->buf[d->pos] != ':')
                return fail(d, d->pos, "expected ':' after object key");
            d->pos++;
            count++;
        }
        if (parse_value(d, depth + 1)) return -1;
        count++;
        skip_ws(d);
        if (d->pos >= d->len) return fail(d, d->pos, "unexpected end of input in %s", is_obj ? "object" : "array");
        char c = d->buf[d->pos];
        if (c == ',') { d->pos++; continue; }
        if (c == close) { d->pos++; break; }
        return fail(d, d->pos, "expected ',' or '%c' in %s", close, is_obj ? "object" : "array");
    }
    d->nodes[idx].n = count;
    d->nodes[idx].size = (uint32_t)(d->n_nodes - idx);
    return 0;
}

static int parse_lit(tj_doc *d, const char *lit, uint32_t type) {
    size_t n = strlen(lit);
    if (d->len - d->pos < n || memcmp(d->buf + d->pos, lit, n))
        return fail(d, d->pos, "invalid literal (expected %s)", lit);
    uint32_t idx = 0;
    if (new_node(d, type, (uint32_t)d->pos, &idx)) return -1;
    d->pos += n;
    return 0;
}

static int parse_value(tj_doc *d, int depth) {
    skip_ws(d);
    if (d->pos >= d->len) return fail(d, d->pos, "unexpected end of input, value expected");
    char c = d->buf[d->pos];
    switch (c) {
    case '{': return parse_container(d, depth, 1);
    case '[': return parse_container(d, depth, 0);
    case '"': return parse_string(d);
    case 't': return parse_lit(d, "true", TJ_TRUE);
    case 'f': return parse_lit(d, "false", TJ_FALSE);
    case 'n': return parse_lit(d, "null", TJ_NULL);
    default:
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number(d);
        if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f)
            return fail(d, d->pos, "unexpected character '%c'", c);
        return fail(d, d->pos, "unexpected byte 0x%02X", (unsigned char)c);
    }
}

int tj_parse(tj_doc *d, const char *buf, size_t len) { return tj_parse_split(d, buf, len, 1u << 20); }

int tj_parse_split(tj_doc *d, const char *buf, size_t len, size_t split_min) {
    memset(d, 0, sizeof *d);
    d->buf = buf;
    d->len = len;
    d->split_min = split_min ? split_min : 1;
    if (len >= TJ_SIDE) return fail(d, 0, "file larger than 2 GiB");
    /* merges aside (kept as pairs), tokenizer.json has ~1 node per 40 bytes */
    d->cap = len / 32 + 64;
    d->nodes = malloc(d->cap * sizeof *d->nodes);
    if (!d->nodes) return fail(d, 0, "out of memory");
    if (len >= 3 && (unsigned char)buf[0] == 0xEF && (unsigned char)buf[1] == 0xBB &&
        (unsigned char)buf[2] == 0xBF)
        return fail(d, 0, "UTF-8 byte-order mark is not allowed");
    if (parse_value(d, 0)) return -1;
    skip_ws(d);
    if (d->pos != d->len) return fail(d, d->pos, "trailing characters after the JSON value");
    return 0;
}

const tj_pair *tj_pairs(const tj_doc *d, uint32_t i) {
    for (size_t k = 0; k < d->n_refs; k++)
        if (d->refs[k].node == i) return d->pairs + d->refs[k].first;
    return NULL;
}

void tj_free(tj_doc *d) {
    free(d->side);
    d->side = NULL;
    free(d->pairs);
    d->pairs = NULL;
    free(d->refs);
    d->refs = NULL;
    d->n_pairs = d->n_refs = 0;
    free(d->nodes);
    d->nodes = NULL;
    d->n_nodes = d->cap = 0;
}

uint32_t tj_get(const tj_doc *d, uint32_t obj, const char *key) {
    if (d->nodes[obj].type != TJ_OBJ) return 0;
    size_t kl = strlen(key);
    uint32_t found = 0;
    uint32_t i = obj + 1;
    for (uint32_t m = 0; m < d->nodes[obj].n; m += 2) {
        uint32_t v = tj_next(d, i);
        if (d->nodes[i].n == kl && !memcmp(tj_str(d, i, NULL), key, kl)) found = v; /* last wins */
        i = tj_next(d, v);
    }
    return found;
}

int tj_str_eq(const tj_doc *d, uint32_t i, const char *s) {
    size_t l = strlen(s);
    return d->nodes[i].type == TJ_STR && d->nodes[i].n == l && !memcmp(tj_str(d, i, NULL), s, l);
}

int tj_int(const tj_doc *d, uint32_t i, int64_t lo, int64_t hi, int64_t *out) {
    const tj_node *n = &d->nodes[i];
    if (n->type != TJ_NUM) return -1;
    const char *s = d->buf + n->off;
    uint32_t k = 0;
    int neg = 0;
    if (s[0] == '-') { neg = 1; k = 1; }
    int64_t v = 0;
    for (; k < n->n; k++) {
        if (s[k] < '0' || s[k] > '9') return -1; /* fraction or exponent: not an integer */
        v = v * 10 + (s[k] - '0');
        if (v > ((int64_t)1 << 40)) return -1;
    }
    if (neg) v = -v;
    if (v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

const char *tj_type_name(uint32_t type) {
    static const char *names[] = {"null", "false", "true", "number", "string", "array", "object", "array"};
    return type < 8 ? names[type] : "?";
}
