/* gbnf.c — compiles llama.cpp-compatible GBNF text into a g4_grammar: rules, alternation, groups,
 * the quantifiers * + ? {m} {m,} {m,n}, string literals, code-point classes with ranges and
 * negation, escapes, '.', special-token references <[id]> / <name>; then refuses grammars the matcher cannot walk exactly (undefined rules,
 * left recursion, rules that can never finish, empty classes). */
#include "grammar/grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- builder */

typedef struct { int32_t *v; int n, cap; } ivec;
typedef struct { ivec *alt; int n, cap; char *name; int defined; } brule;

typedef struct {
    brule *r;
    int n, cap;
    gr_class *cls;
    int n_cls, cap_cls;
    const char *src, *end, *p;  /* the text being parsed */
    int depth;
    const g4_tokenizer *tok;    /* resolves <[id]> and <name> token references (NULL: none) */
    g4_status err;
} builder;

static int iv_push(ivec *v, int32_t x) {
    if (v->n == v->cap) {
        int nc = v->cap ? v->cap * 2 : 8;
        int32_t *nv = realloc(v->v, (size_t)nc * sizeof *nv);
        if (!nv) return -1;
        v->v = nv;
        v->cap = nc;
    }
    v->v[v->n++] = x;
    return 0;
}

static int oom(builder *b) {
    if (!b->err) b->err = g4_fail(G4_ERR_NOMEM, "gbnf: out of memory");
    return -1;
}

static int new_rule(builder *b, const char *name, size_t nlen) {
    if (b->n == b->cap) {
        int nc = b->cap ? b->cap * 2 : 32;
        brule *nr = realloc(b->r, (size_t)nc * sizeof *nr);
        if (!nr) return oom(b);
        b->r = nr;
        b->cap = nc;
    }
    brule *r = &b->r[b->n];
    memset(r, 0, sizeof *r);
    r->name = malloc(nlen + 1);
    if (!r->name) return oom(b);
    memcpy(r->name, name, nlen);
    r->name[nlen] = 0;
    return b->n++;
}

/* A fresh rule named after its parent (for groups and quantifiers), already defined. */
static int aux_rule(builder *b, int parent) {
    char nm[256];
    snprintf(nm, sizeof nm, "%s_%d", parent >= 0 ? b->r[parent].name : "g", b->n);
    int r = new_rule(b, nm, strlen(nm));
    if (r >= 0) b->r[r].defined = 1;
    return r;
}

static ivec *new_alt(builder *b, int r) {
    brule *R = &b->r[r];
    if (R->n == R->cap) {
        int nc = R->cap ? R->cap * 2 : 4;
        ivec *na = realloc(R->alt, (size_t)nc * sizeof *na);
        if (!na) { oom(b); return NULL; }
        R->alt = na;
        R->cap = nc;
    }
    memset(&R->alt[R->n], 0, sizeof(ivec));
    return &R->alt[R->n++];
}

static int find_rule(builder *b, const char *name, size_t n) {
    for (int i = 0; i < b->n; i++)
        if (strlen(b->r[i].name) == n && !memcmp(b->r[i].name, name, n)) return i;
    return -1;
}

static int rule_ref(builder *b, const char *name, size_t n) {
    int r = find_rule(b, name, n);
    return r >= 0 ? r : new_rule(b, name, n);
}

static int add_class(builder *b, const gr_class *c) {
    for (int i = 0; i < b->n_cls; i++)
        if (!memcmp(&b->cls[i], c, sizeof *c)) return i;
    if (b->n_cls == b->cap_cls) {
        int nc = b->cap_cls ? b->cap_cls * 2 : 32;
        gr_class *n = realloc(b->cls, (size_t)nc * sizeof *n);
        if (!n) return oom(b);
        b->cls = n;
        b->cap_cls = nc;
    }
    b->cls[b->n_cls] = *c;
    return b->n_cls++;
}

static int push_bytes(builder *b, ivec *a, unsigned lo, unsigned hi) {
    gr_class c = {{0, 0, 0, 0}};
    for (unsigned x = lo; x <= hi; x++) c.w[x >> 6] |= 1ull << (x & 63);
    int ci = add_class(b, &c);
    if (ci < 0 || iv_push(a, ci * 2)) return oom(b);
    return 0;
}

static void builder_free(builder *b) {
    for (int i = 0; i < b->n; i++) {
        for (int j = 0; j < b->r[i].n; j++) free(b->r[i].alt[j].v);
        free(b->r[i].alt);
        free(b->r[i].name);
    }
    free(b->r);
    free(b->cls);
}

/* ---------------------------------------------------------------- UTF-8 */

static int utf8_enc(uint32_t cp, unsigned char *o) {
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { o[0] = (unsigned char)(0xC0 | cp >> 6); o[1] = (unsigned char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 63));
        o[2] = (unsigned char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 63));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 63));
    o[3] = (unsigned char)(0x80 | (cp & 63));
    return 4;
}

/* Adds to rule r one alternative per run of byte ranges that together encode exactly the code
 * points lo..hi (the standard split at encoding-length and continuation-byte boundaries). */
static int utf8_ranges(builder *b, int r, uint32_t lo, uint32_t hi) {
    if (lo > hi) return 0;
    static const uint32_t bounds[] = {0x7F, 0x7FF, 0xFFFF};
    for (int i = 0; i < 3; i++)
        if (lo <= bounds[i] && hi > bounds[i])
            return utf8_ranges(b, r, lo, bounds[i]) || utf8_ranges(b, r, bounds[i] + 1, hi) ? -1 : 0;
    if (hi >= 0x80) {
        for (int i = 1; i < 4; i++) {
            uint32_t m = (1u << (6 * i)) - 1;
            if ((lo & ~m) != (hi & ~m)) {
                if (lo & m) return utf8_ranges(b, r, lo, lo | m) || utf8_ranges(b, r, (lo | m) + 1, hi) ? -1 : 0;
                if ((hi & m) != m) return utf8_ranges(b, r, lo, (hi & ~m) - 1) || utf8_ranges(b, r, hi & ~m, hi) ? -1 : 0;
            }
        }
    }
    unsigned char a[4], z[4];
    int n = utf8_enc(lo, a);
    utf8_enc(hi, z);
    ivec *alt = new_alt(b, r);
    if (!alt) return -1;
    for (int i = 0; i < n; i++)
        if (push_bytes(b, alt, a[i], z[i])) return -1;
    return 0;
}

/* ---------------------------------------------------------------- parser */

static int perr(builder *b, const char *what) {
    if (!b->err) {
        int line = 1, col = 1;
        for (const char *q = b->src; q < b->p && q < b->end; q++) {
            if (*q == '\n') { line++; col = 1; } else col++;
        }
        b->err = g4_fail(G4_ERR_INPUT, "gbnf: %s at line %d column %d", what, line, col);
    }
    return -1;
}

static int is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Skips spaces, tabs and comments; newlines too when newline_ok (inside groups, after '|'). */
static void skip_space(builder *b, int newline_ok) {
    while (b->p < b->end) {
        char c = *b->p;
        if (c == ' ' || c == '\t' || c == '\r') b->p++;
        else if (c == '#') { while (b->p < b->end && *b->p != '\n') b->p++; }
        else if (c == '\n' && newline_ok) b->p++;
        else break;
    }
}

static int hex_escape(builder *b, int n, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < n; i++) {
        if (b->p >= b->end) return perr(b, "truncated hex escape");
        char c = *b->p++;
        int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (d < 0) return perr(b, "bad hex digit in escape");
        v = v * 16 + (uint32_t)d;
    }
    *out = v;
    return 0;
}

/* One code point of a literal or class (escapes decoded; UTF-8 decoded). */
static int parse_char(builder *b, uint32_t *cp) {
    if (b->p >= b->end) return perr(b, "unexpected end of grammar");
    unsigned char c = (unsigned char)*b->p++;
    if (c == '\\') {
        if (b->p >= b->end) return perr(b, "truncated escape");
        char e = *b->p++;
        switch (e) {
        case 'x': return hex_escape(b, 2, cp);
        case 'u': return hex_escape(b, 4, cp);
        case 'U': if (hex_escape(b, 8, cp)) return -1; if (*cp > 0x10FFFF) return perr(b, "code point above U+10FFFF"); return 0;
        case 't': *cp = '\t'; return 0;
        case 'r': *cp = '\r'; return 0;
        case 'n': *cp = '\n'; return 0;
        case '\\': case '"': case '[': case ']': case '-': case '^': *cp = (uint32_t)e; return 0;
        default: b->p--; return perr(b, "unknown escape");
        }
    }
    if (c < 0x80) { *cp = c; return 0; }
    int n = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : -1;
    if (n < 0 || b->end - b->p < n) return perr(b, "invalid UTF-8");
    uint32_t v = c & (0x3F >> n);
    for (int i = 0; i < n; i++) {
        unsigned char d = (unsigned char)*b->p++;
        if ((d & 0xC0) != 0x80) return perr(b, "invalid UTF-8");
        v = v << 6 | (d & 63);
    }
    *cp = v;
    return 0;
}

typedef struct { uint32_t lo, hi; } cprange;

static int cmp_range(const void *x, const void *y) {
    const cprange *a = x, *c = y;
    return a->lo < c->lo ? -1 : a->lo > c->lo;
}

/* A rule matching exactly one code point of the (sorted, merged, surrogate-free) ranges. */
static int class_rule(builder *b, int parent, cprange *rg, int n, int negate) {
    qsort(rg, (size_t)n, sizeof *rg, cmp_range);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m && rg[i].lo <= rg[m - 1].hi + 1) { if (rg[i].hi > rg[m - 1].hi) rg[m - 1].hi = rg[i].hi; }
        else rg[m++] = rg[i];
    }
    cprange out[512];
    int k = 0;
    if (negate) {
        uint32_t next = 0;
        for (int i = 0; i < m && k < 500; i++) {
            if (rg[i].lo > next) out[k++] = (cprange){next, rg[i].lo - 1};
            next = rg[i].hi + 1;
        }
        if (next <= 0x10FFFF) out[k++] = (cprange){next, 0x10FFFF};
    } else {
        for (int i = 0; i < m && k < 500; i++) out[k++] = rg[i];
    }
    int r = aux_rule(b, parent);
    if (r < 0) return -1;
    int any = 0;
    for (int i = 0; i < k; i++) {
        /* surrogates are not characters: UTF-8 cannot carry them */
        uint32_t lo = out[i].lo, hi = out[i].hi > 0x10FFFF ? 0x10FFFF : out[i].hi;
        if (lo < 0xD800 && hi >= 0xD800) {
            if (utf8_ranges(b, r, lo, 0xD7FF)) return -1;
            any = 1;
            lo = 0xE000;
        } else if (lo >= 0xD800 && lo <= 0xDFFF) lo = 0xE000;
        if (lo <= hi) {
            if (utf8_ranges(b, r, lo, hi)) return -1;
            any = 1;
        }
    }
    if (!any) return perr(b, "character class matches nothing");
    return r;
}

static int parse_alternates(builder *b, int r, int nested);

/* Moves elements a->v[from..] into a fresh one-alternative rule; returns it. */
static int wrap(builder *b, int parent, ivec *a, int from) {
    int r = aux_rule(b, parent);
    if (r < 0) return -1;
    ivec *na = new_alt(b, r);
    if (!na) return -1;
    for (int i = from; i < a->n; i++)
        if (iv_push(na, a->v[i])) return oom(b);
    a->n = from;
    return r;
}

/* x{min,max} (max < 0: unbounded) of rule s, appended to a. */
static int repeat(builder *b, int parent, ivec *a, int s, long min, long max) {
    if (min > 10000 || max > 10000) return perr(b, "repetition count above 10000");
    for (long i = 0; i < min; i++)
        if (iv_push(a, s * 2 + 1)) return oom(b);
    if (max < 0) {
        int st = aux_rule(b, parent);  /* st ::= s st | ε  (right recursion: the stack stays flat) */
        if (st < 0) return -1;
        ivec *x = new_alt(b, st);
        if (!x || iv_push(x, s * 2 + 1) || iv_push(x, st * 2 + 1) || !new_alt(b, st)) return oom(b);
        return iv_push(a, st * 2 + 1) ? oom(b) : 0;
    }
    int inner = -1;  /* opt_k ::= s opt_{k+1} | ε, built from the innermost out */
    for (long i = min; i < max; i++) {
        int o = aux_rule(b, parent);
        if (o < 0) return -1;
        ivec *x = new_alt(b, o);
        if (!x || iv_push(x, s * 2 + 1) || (inner >= 0 && iv_push(x, inner * 2 + 1)) || !new_alt(b, o)) return oom(b);
        inner = o;
    }
    if (inner >= 0 && iv_push(a, inner * 2 + 1)) return oom(b);
    return 0;
}

static int parse_int(builder *b, long *out) {
    if (b->p >= b->end || *b->p < '0' || *b->p > '9') return perr(b, "expected a number");
    long v = 0;
    while (b->p < b->end && *b->p >= '0' && *b->p <= '9') {
        v = v * 10 + (*b->p++ - '0');
        if (v > 1000000) return perr(b, "repetition count too large");
    }
    *out = v;
    return 0;
}

/* A token reference, llama.cpp's <[id]> or <name> (the special token whose text is "<name>"),
 * as the token's reference bytes (grammar.h). Only special tokens: an ordinary token's text is
 * written as a literal, which also admits its other spellings. */
static int parse_token_ref(builder *b, ivec *a) {
    const char *s = b->p, *e = memchr(s, '>', (size_t)(b->end - s));
    if (!e) return perr(b, "unterminated token reference '<...>'");
    if (!b->tok) return perr(b, "token references need the model's vocabulary");
    long id = -1;
    if (e - s > 3 && s[1] == '[' && e[-1] == ']') {
        char *q;
        id = strtol(s + 2, &q, 10);
        if (q != e - 1 || s[2] < '0' || s[2] > '9') return perr(b, "token reference <[id]> needs a decimal id");
        if (id >= g4_tokenizer_vocab_size(b->tok)) return perr(b, "token reference outside the vocabulary");
    } else {
        char name[256];
        size_t n = (size_t)(e - s) + 1;
        if (n >= sizeof name) return perr(b, "token reference longer than 255 bytes");
        memcpy(name, s, n);
        name[n] = 0;
        id = g4_token_to_id(b->tok, name);
        if (id < 0) return perr(b, "token reference names no token of the vocabulary");
    }
    if (!g4_token_is_special(b->tok, (int32_t)id) || id >= GR_TOKREF_MAX)
        return perr(b, "token reference to an ordinary token (write its text as a string literal)");
    unsigned char u[GR_TOKREF_LEN];
    gr_tokref((int32_t)id, u);
    for (int i = 0; i < GR_TOKREF_LEN; i++)
        if (push_bytes(b, a, u[i], u[i])) return -1;
    b->p = e + 1;
    return 0;
}

/* One sequence into alternative a of rule r. */
static int parse_sequence(builder *b, int r, ivec *a, int nested) {
    int last = -1;  /* where the last item's elements begin in a, for a quantifier */
    while (b->p < b->end) {
        char c = *b->p;
        if (c == '"') {
            b->p++;
            last = a->n;
            while (b->p < b->end && *b->p != '"') {
                uint32_t cp;
                if (parse_char(b, &cp)) return -1;
                unsigned char u[4];
                int n = utf8_enc(cp, u);
                for (int i = 0; i < n; i++)
                    if (push_bytes(b, a, u[i], u[i])) return -1;
            }
            if (b->p >= b->end) return perr(b, "unterminated string literal");
            b->p++;
            if (a->n == last) last = -1;  /* "" adds nothing */
        } else if (c == '[' || c == '.') {
            cprange rg[256];
            int n = 0, neg = 0;
            if (c == '.') {
                b->p++;
                rg[n++] = (cprange){'\n', '\n'};
                neg = 1;
            } else {
                b->p++;
                if (b->p < b->end && *b->p == '^') { neg = 1; b->p++; }
                while (b->p < b->end && *b->p != ']') {
                    uint32_t lo, hi;
                    if (parse_char(b, &lo)) return -1;
                    hi = lo;
                    if (b->end - b->p > 1 && *b->p == '-' && b->p[1] != ']') {
                        b->p++;
                        if (parse_char(b, &hi)) return -1;
                        if (hi < lo) return perr(b, "character range out of order");
                    }
                    if (n == 256) return perr(b, "character class with more than 256 ranges");
                    rg[n++] = (cprange){lo, hi};
                }
                if (b->p >= b->end) return perr(b, "unterminated character class");
                b->p++;
            }
            int cr = class_rule(b, r, rg, n, neg);
            if (cr < 0) return -1;
            /* a one-alternative, one-byte class is inlined as its terminal */
            last = a->n;
            if (b->r[cr].n == 1 && b->r[cr].alt[0].n == 1) {
                if (iv_push(a, b->r[cr].alt[0].v[0])) return oom(b);
            } else if (iv_push(a, cr * 2 + 1)) return oom(b);
        } else if (c == '<') {
            last = a->n;
            if (parse_token_ref(b, a)) return -1;
        } else if (c == '!' && b->end - b->p > 1 && b->p[1] == '<') {
            return perr(b, "negated token references '!<...>' are not supported");
        } else if (is_word(c)) {
            const char *s = b->p;
            while (b->p < b->end && is_word(*b->p)) b->p++;
            int rr = rule_ref(b, s, (size_t)(b->p - s));
            if (rr < 0) return -1;
            last = a->n;
            if (iv_push(a, rr * 2 + 1)) return oom(b);
        } else if (c == '(') {
            b->p++;
            if (++b->depth > 200) return perr(b, "groups nested too deep");
            int g = aux_rule(b, r);
            if (g < 0) return -1;
            skip_space(b, 1);
            if (parse_alternates(b, g, 1)) return -1;
            b->depth--;
            if (b->p >= b->end || *b->p != ')') return perr(b, "expected ')'");
            b->p++;
            last = a->n;
            if (iv_push(a, g * 2 + 1)) return oom(b);
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last < 0) return perr(b, "quantifier without a preceding item");
            long mn = 0, mx = -1;
            b->p++;
            if (c == '+') mn = 1;
            else if (c == '?') mx = 1;
            else if (c == '{') {
                skip_space(b, 0);
                if (parse_int(b, &mn)) return -1;
                skip_space(b, 0);
                mx = mn;
                if (b->p < b->end && *b->p == ',') {
                    b->p++;
                    skip_space(b, 0);
                    mx = -1;
                    if (b->p < b->end && *b->p >= '0' && *b->p <= '9' && parse_int(b, &mx)) return -1;
                    skip_space(b, 0);
                }
                if (b->p >= b->end || *b->p != '}') return perr(b, "expected '}'");
                b->p++;
                if (mx >= 0 && mx < mn) return perr(b, "repetition {m,n} with n < m");
            }
            int s;
            if (a->n - last == 1 && GR_IS_REF(a->v[last])) { s = GR_ARG(a->v[last]); a->n = last; }
            else if ((s = wrap(b, r, a, last)) < 0) return -1;
            if (repeat(b, r, a, s, mn, mx)) return -1;
            last = -1;
        } else {
            break;
        }
        skip_space(b, nested);
    }
    return 0;
}

static int parse_alternates(builder *b, int r, int nested) {
    for (;;) {
        ivec *a = new_alt(b, r);
        if (!a) return -1;
        int ai = b->r[r].n - 1;
        ivec tmp = {0};
        if (parse_sequence(b, r, &tmp, nested)) { free(tmp.v); return -1; }
        b->r[r].alt[ai] = tmp;  /* the rule's alternatives may have moved while parsing */
        if (b->p < b->end && *b->p == '|') {
            b->p++;
            skip_space(b, 1);
            continue;
        }
        return 0;
    }
}

/* ---------------------------------------------------------------- checks and flattening */

/* Left recursion: rule x reaches itself through leftmost positions (nullable prefixes crossed). */
static int left_rec(const builder *b, const char *nullable, int x, char *state) {
    state[x] = 1;
    for (int j = 0; j < b->r[x].n; j++) {
        const ivec *a = &b->r[x].alt[j];
        for (int k = 0; k < a->n; k++) {
            int32_t e = a->v[k];
            if (!GR_IS_REF(e)) break;
            int y = GR_ARG(e);
            if (state[y] == 1) return y;
            if (!state[y]) {
                int z = left_rec(b, nullable, y, state);
                if (z >= 0) return z;
            }
            if (!nullable[y]) break;
        }
    }
    state[x] = 2;
    return -1;
}

static g4_status finish(builder *b, int root, g4_grammar **out) {
    int n = b->n;
    for (int i = 0; i < n; i++)
        if (!b->r[i].defined) return g4_fail(G4_ERR_INPUT, "gbnf: rule '%s' is used but never defined", b->r[i].name);
    char *nullable = calloc((size_t)n, 1), *prod = calloc((size_t)n, 1), *seen = calloc((size_t)n, 1);
    int *queue = malloc((size_t)n * sizeof *queue);
    g4_status st = G4_OK;
    if (!nullable || !prod || !seen || !queue) { st = g4_fail(G4_ERR_NOMEM, "gbnf: out of memory"); goto done; }
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < b->r[i].n; j++) {
                const ivec *a = &b->r[i].alt[j];
                int nl = 1, pr = 1;
                for (int k = 0; k < a->n; k++) {
                    int32_t e = a->v[k];
                    if (GR_IS_REF(e)) { nl &= nullable[GR_ARG(e)]; pr &= prod[GR_ARG(e)]; }
                    else nl = 0;
                }
                if (nl && !nullable[i]) { nullable[i] = 1; changed = 1; }
                if (pr && !prod[i]) { prod[i] = 1; changed = 1; }
            }
    }
    /* only rules reachable from the root matter */
    int qh = 0, qt = 0;
    queue[qt++] = root;
    seen[root] = 1;
    while (qh < qt) {
        int x = queue[qh++];
        if (!prod[x]) { st = g4_fail(G4_ERR_INPUT, "gbnf: rule '%s' can never finish (every alternative recurses forever)", b->r[x].name); goto done; }
        for (int j = 0; j < b->r[x].n; j++)
            for (int k = 0; k < b->r[x].alt[j].n; k++) {
                int32_t e = b->r[x].alt[j].v[k];
                if (GR_IS_REF(e) && !seen[GR_ARG(e)]) { seen[GR_ARG(e)] = 1; queue[qt++] = GR_ARG(e); }
            }
    }
    /* an unproductive alternative of a productive rule would leave stacks that never finish */
    for (int i = 0; i < qt; i++) {
        int x = queue[i];
        for (int j = 0; j < b->r[x].n; j++)
            for (int k = 0; k < b->r[x].alt[j].n; k++) {
                int32_t e = b->r[x].alt[j].v[k];
                if (GR_IS_REF(e) && !prod[GR_ARG(e)]) {
                    st = g4_fail(G4_ERR_INPUT, "gbnf: rule '%s' can never finish", b->r[GR_ARG(e)].name);
                    goto done;
                }
            }
    }
    memset(seen, 0, (size_t)n);
    for (int i = 0; i < qt; i++) {
        int x = queue[i];
        if (!seen[x]) {
            int y = left_rec(b, nullable, x, seen);
            if (y >= 0) { st = g4_fail(G4_ERR_INPUT, "gbnf: rule '%s' is left-recursive", b->r[y].name); goto done; }
        }
    }
    g4_grammar *g = calloc(1, sizeof *g);
    if (!g) { st = g4_fail(G4_ERR_NOMEM, "gbnf: out of memory"); goto done; }
    int n_alts = 0, n_el = 0;
    for (int i = 0; i < n; i++) {
        n_alts += b->r[i].n;
        for (int j = 0; j < b->r[i].n; j++) n_el += b->r[i].alt[j].n + 1;
    }
    g->n_rules = n;
    g->root = root;
    g->alt_off = malloc((size_t)(n + 1) * sizeof *g->alt_off);
    g->alts = malloc((size_t)(n_alts + 1) * sizeof *g->alts);
    g->el = malloc((size_t)(n_el + 1) * sizeof *g->el);
    g->names = calloc((size_t)n, sizeof *g->names);
    g->cls = malloc((size_t)(b->n_cls + 1) * sizeof *g->cls);
    if (!g->alt_off || !g->alts || !g->el || !g->names || !g->cls) {
        g4_grammar_free(g);
        st = g4_fail(G4_ERR_NOMEM, "gbnf: out of memory");
        goto done;
    }
    int ai = 0, ei = 0;
    for (int i = 0; i < n; i++) {
        g->alt_off[i] = ai;
        for (int j = 0; j < b->r[i].n; j++) {
            g->alts[ai++] = ei;
            if (b->r[i].alt[j].n) memcpy(g->el + ei, b->r[i].alt[j].v, (size_t)b->r[i].alt[j].n * sizeof *g->el);
            ei += b->r[i].alt[j].n;
            g->el[ei++] = GR_END;
        }
        g->names[i] = b->r[i].name;
        b->r[i].name = NULL;
    }
    g->alt_off[n] = ai;
    g->n_el = ei;
    if (b->n_cls) memcpy(g->cls, b->cls, (size_t)b->n_cls * sizeof *g->cls);
    g->n_cls = b->n_cls;
    *out = g;
done:
    free(nullable);
    free(prod);
    free(seen);
    free(queue);
    return st;
}

void g4_grammar_free(g4_grammar *g) {
    if (!g) return;
    if (g->names)
        for (int i = 0; i < g->n_rules; i++) free(g->names[i]);
    free(g->names);
    free(g->alt_off);
    free(g->alts);
    free(g->el);
    free(g->cls);
    free(g);
}

g4_status g4_grammar_compile_gbnf(const char *src, size_t len, const char *root, g4_grammar **out) {
    return g4_grammar_compile_gbnf_tokens(src, len, root, NULL, out);
}

g4_status g4_grammar_compile_gbnf_tokens(const char *src, size_t len, const char *root, const g4_tokenizer *tok,
                                         g4_grammar **out) {
    *out = NULL;
    if (!root) root = "root";
    builder b;
    memset(&b, 0, sizeof b);
    b.tok = tok;
    b.src = b.p = src;
    b.end = src + len;
    g4_status st = G4_OK;
    for (;;) {
        skip_space(&b, 1);
        if (b.p >= b.end) break;
        const char *s = b.p;
        while (b.p < b.end && is_word(*b.p)) b.p++;
        if (b.p == s) { perr(&b, "expected a rule name"); goto fail; }
        int r = rule_ref(&b, s, (size_t)(b.p - s));
        if (r < 0) goto fail;
        if (b.r[r].defined) { perr(&b, "rule defined twice"); goto fail; }
        b.r[r].defined = 1;
        skip_space(&b, 0);
        if (b.end - b.p < 3 || memcmp(b.p, "::=", 3)) { perr(&b, "expected '::='"); goto fail; }
        b.p += 3;
        skip_space(&b, 1);
        if (parse_alternates(&b, r, 0)) goto fail;
        if (b.p < b.end && *b.p != '\n') { perr(&b, "unexpected character"); goto fail; }
    }
    int ri = find_rule(&b, root, strlen(root));
    if (ri < 0 || !b.r[ri].defined) {
        st = g4_fail(G4_ERR_INPUT, "gbnf: no rule named '%s' (the start rule)", root);
        builder_free(&b);
        return st;
    }
    st = finish(&b, ri, out);
    builder_free(&b);
    return st;
fail:
    st = b.err ? b.err : g4_fail(G4_ERR_INPUT, "gbnf: parse error");
    builder_free(&b);
    return st;
}
