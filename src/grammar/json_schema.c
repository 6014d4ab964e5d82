/* json_schema.c — JSON Schema (and OpenAI's json_object; and, in Gemma 4's argument dialect, a tool
 * call's arguments for tool_choice) to GBNF text, which gbnf.c compiles: the
 * keywords of OpenAI's strict structured outputs plus integer ranges, lengths, string formats and
 * patterns; any other keyword is refused by name, never ignored. Whitespace between tokens is
 * bounded so that a model cannot pad forever. */
#include "grammar/grammar.h"
#include "base/strbuf.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


typedef struct {
    g4_strbuf out;
    json_t *root;
    int n_rules;
    char **ref_name;    /* $ref strings seen, and the rules they became */
    int *ref_rule;
    int n_refs;
    int depth;
    int gemma;          /* Gemma 4's tool-call argument dialect instead of JSON (see GEMMA_PRIMITIVES) */
    g4_status err;
} ctx;

static int fail(ctx *c, g4_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(ctx *c, g4_status st, const char *fmt, ...) {
    if (!c->err) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        c->err = g4_fail(st, "json_schema: %s", msg);
    }
    return -1;
}

static const char PRIMITIVES[] =
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"
    "value ::= object | array | string | number | boolean | null\n"
    "object ::= \"{\" ws ( kv ( \",\" ws kv )* )? \"}\"\n"
    "kv ::= string ws \":\" ws value ws\n"
    "array ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"
    "string ::= \"\\\"\" char* \"\\\"\"\n"
    "char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n"
    "number ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?\n"
    "integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n"
    "boolean ::= \"true\" | \"false\"\n"
    "null ::= \"null\"\n";

/* Gemma 4's argument dialect (the chat template's format_argument, what src/chat parses back to
 * JSON): bare keys, strings between <|"|> tokens holding any text as it is (no escapes), JSON's
 * numbers, true / false / null, nested {} and []; no whitespace. */
static const char GEMMA_PRIMITIVES[] =
    "ws ::= \"\"\n"
    "value ::= object | array | string | number | boolean | null\n"
    "object ::= \"{\" ( kv ( \",\" kv )* )? \"}\"\n"
    "kv ::= key \":\" value\n"
    "key ::= [a-zA-Z_] [a-zA-Z0-9_.-]{0,63}\n"
    "array ::= \"[\" ( value ( \",\" value )* )? \"]\"\n"
    "string ::= <|\"|> char* <|\"|>\n"
    "char ::= [^\\x00]\n"
    "number ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?\n"
    "integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n"
    "boolean ::= \"true\" | \"false\"\n"
    "null ::= \"null\"\n";

/* A string's opening / closing quote as GBNF: JSON's '"' or Gemma's <|"|> token. */
static const char *quote(const ctx *c) { return c->gemma ? "<|\"|>" : "\"\\\"\""; }

/* A GBNF string literal matching exactly the bytes s[0..n). */
static void lit(g4_strbuf *b, const char *s, size_t n) {
    g4_sb_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') { char e[2] = {'\\', (char)c}; g4_sb_put(b, e, 2); }
        else if (c < 0x20 || c == 0x7F) g4_sb_printf(b, "\\x%02X", c);
        else g4_sb_put(b, (const char *)&c, 1);
    }
    g4_sb_put(b, "\"", 1);
}

static int lit_json(ctx *c, g4_strbuf *b, json_t *v);

/* An object's key: a JSON string; in Gemma's dialect bare where the parser reads it back as
 * written (no delimiters, no surrounding space), else quoted. */
static int key_lit(ctx *c, g4_strbuf *b, const char *k) {
    size_t n = strlen(k);
    if (c->gemma && n && !strpbrk(k, "{}[],:") && k[0] > ' ' && k[n - 1] > ' ') { lit(b, k, n); return 0; }
    json_t *ks = json_string(k);
    if (!ks) return fail(c, G4_ERR_NOMEM, "out of memory");
    int rc = lit_json(c, b, ks);
    json_decref(ks);
    return rc;
}

/* A JSON value exactly (enum / const): scalars as their compact serialization, arrays and objects
 * member by member in their order, with the same bounded whitespace as everywhere else. */
static int lit_json(ctx *c, g4_strbuf *b, json_t *v) {
    if (json_is_array(v) || json_is_object(v)) {
        int arr = json_is_array(v);
        size_t n = arr ? json_array_size(v) : json_object_size(v);
        g4_sb_put(b, arr ? "\"[\" ws" : "\"{\" ws", 6);
        size_t i = 0;
        const char *k;
        json_t *x;
        void *it = arr ? NULL : json_object_iter(v);
        for (i = 0; i < n; i++) {
            if (i) g4_sb_put(b, " \",\" ws", 7);
            g4_sb_put(b, " ", 1);
            if (arr) x = json_array_get(v, i);
            else {
                k = json_object_iter_key(it);
                x = json_object_iter_value(it);
                it = json_object_iter_next(v, it);
                if (key_lit(c, b, k)) return -1;
                g4_sb_put(b, " ws \":\" ws ", 11);
            }
            if (lit_json(c, b, x)) return -1;
            g4_sb_put(b, " ws", 3);
        }
        g4_sb_put(b, arr ? " \"]\"" : " \"}\"", 4);
        return 0;
    }
    if (c->gemma && json_is_string(v)) {   /* the text as it is, between the quote tokens */
        g4_sb_printf(b, "%s ", quote(c));
        lit(b, json_string_value(v), json_string_length(v));
        g4_sb_printf(b, " %s", quote(c));
        return 0;
    }
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s) return fail(c, G4_ERR_NOMEM, "out of memory");
    lit(b, s, strlen(s));
    free(s);
    return 0;
}

static int gen(ctx *c, json_t *s, const char *path);

static int new_rule(ctx *c) { return c->n_rules++; }

static void emit_rule(ctx *c, int r, const g4_strbuf *body) {
    g4_sb_printf(&c->out, "r%d ::= ", r);
    g4_sb_put(&c->out, body->p ? body->p : "\"\"", body->p ? body->len : 2);
    g4_sb_put(&c->out, "\n", 1);
}

/* ---------------------------------------------------------------- integers in a range */

/* Same-length digit strings a <= b (leading zeros allowed inside). */
static void digits_range(g4_strbuf *b, const char *a, const char *z, int L) {
    if (L == 1) { g4_sb_printf(b, "[%c-%c]", a[0], z[0]); return; }
    if (a[0] == z[0]) {
        g4_sb_printf(b, "\"%c\" ", a[0]);
        digits_range(b, a + 1, z + 1, L - 1);
        return;
    }
    char nines[24], zeros[24];
    memset(nines, '9', (size_t)L);
    memset(zeros, '0', (size_t)L);
    g4_sb_printf(b, "( \"%c\" ", a[0]);
    digits_range(b, a + 1, nines, L - 1);
    if (a[0] + 1 <= z[0] - 1) g4_sb_printf(b, " | [%c-%c] [0-9]{%d}", a[0] + 1, z[0] - 1, L - 1);
    g4_sb_printf(b, " | \"%c\" ", z[0]);
    digits_range(b, zeros, z + 1, L - 1);
    g4_sb_put(b, " )", 2);
}

/* Naturals in [a, z] without leading zeros (z < 0: unbounded), as alternatives. */
static void nat_range(g4_strbuf *b, long long a, long long z) {
    char as[24], zs[24];
    int la = snprintf(as, sizeof as, "%lld", a);
    int lz = z >= 0 ? snprintf(zs, sizeof zs, "%lld", z) : la;
    g4_sb_put(b, "( ", 2);
    for (int L = la; L <= lz; L++) {
        char lo[24], hi[24];
        if (L == la) memcpy(lo, as, 24); else { memset(lo, '0', (size_t)L); lo[0] = '1'; lo[L] = 0; }
        if (z >= 0 && L == lz) memcpy(hi, zs, 24); else { memset(hi, '9', (size_t)L); hi[L] = 0; }
        if (L > la) g4_sb_put(b, " | ", 3);
        digits_range(b, lo, hi, L);
    }
    /* unbounded above: at most 16 digits, as every integer here, so digits cannot run on forever */
    if (z < 0 && la < 16) g4_sb_printf(b, " | [1-9] [0-9]{%d,15}", la);
    g4_sb_put(b, " )", 2);
}

static int int_bound(ctx *c, json_t *s, const char *key, const char *path, long long *v) {
    json_t *x = json_object_get(s, key);
    if (!x) return 0;
    if (!json_is_number(x)) return fail(c, G4_ERR_INPUT, "%s/%s is not a number", path, key);
    double d = json_number_value(x);
    if (fabs(d) >= 1e15) return fail(c, G4_ERR_INPUT, "%s/%s: %g is beyond the +-1e15 integers support", path, key, d);
    int lower = !strcmp(key, "minimum") || !strcmp(key, "exclusiveMinimum");
    double r = lower ? ceil(d) : floor(d);
    if (!strncmp(key, "exclusive", 9) && r == d) r += lower ? 1 : -1;
    *v = (long long)r;
    return 1;
}

static int integer_body(ctx *c, json_t *s, const char *path, g4_strbuf *b) {
    long long lo = 0, hi = 0, t;
    int has_lo = 0, has_hi = 0, k;
    static const char *lows[] = {"minimum", "exclusiveMinimum"}, *highs[] = {"maximum", "exclusiveMaximum"};
    for (int i = 0; i < 2; i++) {
        if ((k = int_bound(c, s, lows[i], path, &t)) < 0) return -1;
        if (k && (!has_lo || t > lo)) { lo = t; has_lo = 1; }
        if ((k = int_bound(c, s, highs[i], path, &t)) < 0) return -1;
        if (k && (!has_hi || t < hi)) { hi = t; has_hi = 1; }
    }
    if (!has_lo && !has_hi) { g4_sb_put(b, "integer", 7); return 0; }
    if (has_lo && has_hi && lo > hi) return fail(c, G4_ERR_INPUT, "%s: no integer lies between minimum %lld and maximum %lld", path, lo, hi);
    int alts = 0;
    g4_sb_put(b, "( ", 2);
    if (!has_hi || hi >= 0) {  /* the non-negative part */
        nat_range(b, has_lo && lo > 0 ? lo : 0, has_hi ? hi : -1);
        alts++;
    }
    if (!has_lo || lo < 0) {   /* the negative part, as magnitudes */
        if (alts) g4_sb_put(b, " | ", 3);
        g4_sb_put(b, "\"-\" ", 4);
        nat_range(b, has_hi && hi < 0 ? -hi : 1, has_lo ? -lo : -1);
    }
    g4_sb_put(b, " )", 2);
    return 0;
}

/* ---------------------------------------------------------------- numbers in a range */

/* Number bounds: integral values within +-1e15 only (a fractional bound is refused). A bounded
 * number is written without an exponent and with at most 15 significant digits where it can be
 * near a bound: every such decimal is a distinct double, so a validator comparing doubles (as
 * jsonschema does) agrees with the exact decimal comparison the grammar makes. */
typedef struct { long long v; int has, excl; } num_bound;

static int number_bounds(ctx *c, json_t *s, const char *path, num_bound *lo, num_bound *hi) {
    static const char *const k[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    for (int i = 0; i < 4; i++) {
        json_t *x = json_object_get(s, k[i]);
        if (!x) continue;
        if (!json_is_number(x)) return fail(c, G4_ERR_INPUT, "%s/%s is not a number", path, k[i]);
        double d = json_number_value(x);
        if (fabs(d) >= 1e15) return fail(c, G4_ERR_INPUT, "%s/%s: %g is beyond the +-1e15 numbers support", path, k[i], d);
        if (d != floor(d))
            return fail(c, G4_ERR_INPUT, "%s/%s: %g: a fractional bound on type number is not supported (integral bounds are)", path, k[i], d);
        long long v = (long long)d;
        int excl = i & 1;
        num_bound *nb = i < 2 ? lo : hi;
        int tighter = !nb->has || (i < 2 ? v > nb->v : v < nb->v) || (v == nb->v && excl);
        if (tighter) { nb->v = v; nb->has = 1; nb->excl = excl; }
    }
    return 0;
}

/* A fraction of 1..k digits with some digit not 0. */
static void nonzero_frac(g4_strbuf *b, int k) {
    if (k == 1) { g4_sb_put(b, "[1-9]", 5); return; }
    g4_sb_printf(b, "( [1-9] [0-9]{0,%d} | \"0\" ", k - 1);
    nonzero_frac(b, k - 1);
    g4_sb_put(b, " )", 2);
}

/* Magnitudes m = I(.F)? with a <= m <= z (a < m where ax; m < z where zx; z < 0: unbounded), F at
 * most k digits. By the integer part I: a <= m iff I >= a; a < m iff I > a, or I = a and F is not
 * all zeros; m <= z iff I < z, or I = z and F is all zeros; m < z iff I < z. */
static int magnitudes(g4_strbuf *b, long long a, int ax, long long z, int zx, int k) {
    int alts = 0;
    long long a1 = ax ? a + 1 : a;
    g4_sb_put(b, "( ", 2);
    if (z < 0 || a1 <= z - 1) {
        nat_range(b, a1, z < 0 ? -1 : z - 1);
        if (k > 0) g4_sb_printf(b, " ( \".\" [0-9]{1,%d} )?", k);
        alts++;
    }
    if (ax && k > 0 && (z < 0 || a < z)) {
        g4_sb_printf(b, "%s\"%lld.\" ", alts++ ? " | " : "", a);
        nonzero_frac(b, k);
    }
    if (z >= 0 && !zx && (z > a || (z == a && !ax))) {
        g4_sb_printf(b, "%s\"%lld\"", alts++ ? " | " : "", z);
        if (k > 0) g4_sb_printf(b, " ( \".\" \"0\"{1,%d} )?", k);
    }
    g4_sb_put(b, " )", 2);
    return alts;
}

static int number_body(ctx *c, json_t *s, const char *path, g4_strbuf *b) {
    num_bound lo = {0}, hi = {0};
    if (number_bounds(c, s, path, &lo, &hi)) return -1;
    if (!lo.has && !hi.has) { g4_sb_put(b, "number", 6); return 0; }
    if (lo.has && hi.has && (lo.v > hi.v || (lo.v == hi.v && (lo.excl || hi.excl))))
        return fail(c, G4_ERR_INPUT, "%s: language is empty: no number lies between the lower bound %lld and the upper bound %lld", path, lo.v, hi.v);
    /* fraction digits: 15 significant digits minus the integer digits a value near a bound has */
    int d = 0;
    char tmp[24];
    if (lo.has) d = snprintf(tmp, sizeof tmp, "%lld", llabs(lo.v));
    if (hi.has) { int e = snprintf(tmp, sizeof tmp, "%lld", llabs(hi.v)); if (e > d) d = e; }
    int k = 15 - d;
    if (k > 16) k = 16;
    g4_strbuf nn = {0}, ng = {0};
    int pos = 0, neg = 0;
    if (!hi.has || hi.v > 0 || (hi.v == 0 && !hi.excl))   /* values >= 0 */
        pos = magnitudes(&nn, lo.has && lo.v >= 0 ? lo.v : 0, lo.has && lo.v >= 0 && lo.excl,
                         hi.has ? hi.v : -1, hi.excl, k);
    if (!lo.has || lo.v < 0)                               /* values < 0, as magnitudes > 0 */
        neg = magnitudes(&ng, hi.has && hi.v < 0 ? -hi.v : 0, hi.has && hi.v < 0 ? hi.excl : 1,
                         lo.has ? -lo.v : -1, lo.excl, k);
    int rc = 0;
    if (!pos && !neg) rc = fail(c, G4_ERR_INPUT, "%s: language is empty: no number satisfies the bounds", path);
    else g4_sb_printf(b, "( %s%s%s%s )", pos ? nn.p : "", pos && neg ? " | " : "", neg ? "\"-\" " : "", neg ? ng.p : "");
    free(nn.p);
    free(ng.p);
    return rc;
}

/* ---------------------------------------------------------------- strings: patterns and formats */

typedef struct { uint32_t lo, hi; } cpr;

static int cmp_cpr(const void *x, const void *y) {
    const cpr *a = x, *b = y;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

static void cp_esc(g4_strbuf *b, uint32_t cp) {
    if ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) g4_sb_printf(b, "%c", (char)cp);
    else if (cp < 0x100) g4_sb_printf(b, "\\x%02X", cp);
    else if (cp < 0x10000) g4_sb_printf(b, "\\u%04X", cp);
    else g4_sb_printf(b, "\\U%08X", cp);
}

/* A JSON-string character set: the code points of rg (negated when neg) as they appear inside a
 * JSON string — '"' and '\' escaped, control characters left out. */
static int emit_class(ctx *c, g4_strbuf *b, cpr *rg, int n, int neg, const char *path) {
    qsort(rg, (size_t)n, sizeof *rg, cmp_cpr);
    cpr m[300];
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (k && rg[i].lo <= m[k - 1].hi + 1) { if (rg[i].hi > m[k - 1].hi) m[k - 1].hi = rg[i].hi; }
        else m[k++] = rg[i];
    }
    cpr pos[300];
    int np = 0;
    if (neg) {
        uint32_t next = 0;
        for (int i = 0; i < k; i++) {
            if (m[i].lo > next) pos[np++] = (cpr){next, m[i].lo - 1};
            next = m[i].hi + 1;
        }
        if (next <= 0x10FFFF) pos[np++] = (cpr){next, 0x10FFFF};
    } else {
        memcpy(pos, m, (size_t)k * sizeof *m);
        np = k;
    }
    int quote = 0, bslash = 0, any = 0;
    g4_strbuf cls = {0};
    for (int i = 0; i < np; i++) {
        uint32_t lo = pos[i].lo < 0x20 ? 0x20 : pos[i].lo, hi = pos[i].hi;
        if (lo > hi) continue;
        /* cut out '"' (0x22) and '\' (0x5C): they go in as escapes (Gemma's strings have none) */
        uint32_t cuts[2] = {'"', '\\'};
        for (int j = 0; j < (c->gemma ? 0 : 2); j++)
            if (lo <= cuts[j] && cuts[j] <= hi) {
                if (j == 0) quote = 1; else bslash = 1;
                if (lo < cuts[j]) {
                    cp_esc(&cls, lo);
                    if (cuts[j] - 1 > lo) { g4_sb_put(&cls, "-", 1); cp_esc(&cls, cuts[j] - 1); }
                    any = 1;
                }
                lo = cuts[j] + 1;
            }
        if (lo <= hi) {
            cp_esc(&cls, lo);
            if (hi > lo) { g4_sb_put(&cls, "-", 1); cp_esc(&cls, hi); }
            any = 1;
        }
    }
    if (!any && !quote && !bslash) { free(cls.p); return fail(c, G4_ERR_INPUT, "%s/pattern: a character class that matches nothing", path); }
    g4_sb_put(b, "( ", 2);
    int first = 1;
    if (any) { g4_sb_put(b, "[", 1); g4_sb_put(b, cls.p, cls.len); g4_sb_put(b, "]", 1); first = 0; }
    if (quote) { g4_sb_put(b, first ? "\"\\\\\\\"\"" : " | \"\\\\\\\"\"", first ? 6 : 9); first = 0; }
    if (bslash) g4_sb_put(b, first ? "\"\\\\\\\\\"" : " | \"\\\\\\\\\"", first ? 6 : 9);
    g4_sb_put(b, " )", 2);
    free(cls.p);
    return 0;
}

typedef struct { ctx *c; const char *p, *end, *path; } rx;

static int rx_alt(rx *r, g4_strbuf *b);

/* One code point of the pattern (UTF-8), or -1. */
static long rx_cp(rx *r) {
    if (r->p >= r->end) return -1;
    unsigned char c = (unsigned char)*r->p++;
    if (c < 0x80) return c;
    int n = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
    uint32_t v = c & (0x3F >> n);
    for (int i = 0; i < n && r->p < r->end; i++) v = v << 6 | ((unsigned char)*r->p++ & 63);
    return v;
}

/* Adds the ranges of a class escape (\d \w \s; upper case: negated, returned as neg=1). */
static int class_escape(char e, cpr *rg, int *n, int *neg) {
    *neg = e >= 'A' && e <= 'Z';
    switch (e | 0x20) {
    case 'd': rg[(*n)++] = (cpr){'0', '9'}; return 1;
    case 'w': rg[(*n)++] = (cpr){'a', 'z'}; rg[(*n)++] = (cpr){'A', 'Z'}; rg[(*n)++] = (cpr){'0', '9'}; rg[(*n)++] = (cpr){'_', '_'}; return 1;
    case 's': rg[(*n)++] = (cpr){' ', ' '}; rg[(*n)++] = (cpr){'\t', '\r'}; return 1;
    default: return 0;
    }
}

static void json_char_lit(const ctx *c, g4_strbuf *b, uint32_t cp) {
    if (c->gemma) { g4_sb_put(b, "[", 1); cp_esc(b, cp); g4_sb_put(b, "]", 1); }
    else if (cp == '"') g4_sb_put(b, "\"\\\\\\\"\"", 6);
    else if (cp == '\\') g4_sb_put(b, "\"\\\\\\\\\"", 6);
    else if (cp == '\n') g4_sb_put(b, "\"\\\\n\"", 5);
    else if (cp == '\t') g4_sb_put(b, "\"\\\\t\"", 5);
    else if (cp == '\r') g4_sb_put(b, "\"\\\\r\"", 5);
    else if (cp < 0x20) g4_sb_printf(b, "\"\\\\u%04X\"", cp);
    else { g4_sb_put(b, "[", 1); cp_esc(b, cp); g4_sb_put(b, "]", 1); }
}

static int hex4(const char *p, const char *end, uint32_t *v) {
    if (end - p < 4) return 0;
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char h = p[i];
        int d = h >= '0' && h <= '9' ? h - '0' : (h | 0x20) >= 'a' && (h | 0x20) <= 'f' ? (h | 0x20) - 'a' + 10 : -1;
        if (d < 0) return 0;
        *v = *v << 4 | (uint32_t)d;
    }
    return 1;
}

/* A single-character escape's code point, r->p at the letter after '\' (consumed): \n \t \r \f
 * \v, \uXXXX (a UTF-16 surrogate pair read as one code point, as ECMA-262 does) and any other
 * character as itself. -1 (reported) for a malformed \u. */
static long rx_esc(rx *r) {
    char e = *r->p++;
    if (e != 'u') return e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == 'f' ? '\f' : e == 'v' ? '\v' : (unsigned char)e;
    uint32_t v, lo;
    if (!hex4(r->p, r->end, &v)) return fail(r->c, G4_ERR_INPUT, "%s/pattern: \\u needs four hex digits", r->path);
    r->p += 4;
    if (v >= 0xD800 && v < 0xDC00) {
        if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u' || !hex4(r->p + 2, r->end, &lo) || lo < 0xDC00 || lo > 0xDFFF)
            return fail(r->c, G4_ERR_INPUT, "%s/pattern: \\u%04X is a lone surrogate", r->path, v);
        r->p += 6;
        v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
    } else if (v >= 0xDC00 && v <= 0xDFFF) return fail(r->c, G4_ERR_INPUT, "%s/pattern: \\u%04X is a lone surrogate", r->path, v);
    return v;
}

static int rx_atom(rx *r, g4_strbuf *b) {
    ctx *c = r->c;
    char ch = *r->p;
    if (ch == '(') {
        r->p++;
        if (r->end - r->p >= 2 && r->p[0] == '?') {
            if (r->p[1] != ':') return fail(c, G4_ERR_INPUT, "%s/pattern: lookaround and named groups are not supported", r->path);
            r->p += 2;
        }
        g4_sb_put(b, "( ", 2);
        if (rx_alt(r, b)) return -1;
        if (r->p >= r->end || *r->p != ')') return fail(c, G4_ERR_INPUT, "%s/pattern: unbalanced '('", r->path);
        r->p++;
        g4_sb_put(b, " )", 2);
        return 0;
    }
    if (ch == '[') {
        r->p++;
        cpr rg[256];
        int n = 0, neg = 0;
        if (r->p < r->end && *r->p == '^') { neg = 1; r->p++; }
        int first = 1;
        while (r->p < r->end && (*r->p != ']' || first)) {
            first = 0;
            if (n > 250) return fail(c, G4_ERR_INPUT, "%s/pattern: character class too long", r->path);
            long lo;
            if (*r->p == '\\') {
                r->p++;
                if (r->p >= r->end) break;
                int eneg;
                if (class_escape(*r->p, rg, &n, &eneg)) {
                    if (eneg) return fail(c, G4_ERR_INPUT, "%s/pattern: \\%c inside a class is not supported", r->path, *r->p);
                    r->p++;
                    continue;
                }
                if ((lo = rx_esc(r)) < 0) return -1;
            } else lo = rx_cp(r);
            long hi = lo;
            if (r->end - r->p > 1 && *r->p == '-' && r->p[1] != ']') {
                r->p++;
                if (*r->p == '\\') {
                    r->p++;
                    if (r->p >= r->end) break;
                    if ((hi = rx_esc(r)) < 0) return -1;
                }
                else hi = rx_cp(r);
                if (hi < lo) return fail(c, G4_ERR_INPUT, "%s/pattern: character range out of order", r->path);
            }
            rg[n++] = (cpr){(uint32_t)lo, (uint32_t)hi};
        }
        if (r->p >= r->end) return fail(c, G4_ERR_INPUT, "%s/pattern: unterminated '['", r->path);
        r->p++;
        return emit_class(c, b, rg, n, neg, r->path);
    }
    if (ch == '.') {
        r->p++;
        cpr rg[1] = {{'\n', '\n'}};
        return emit_class(c, b, rg, 1, 1, r->path);
    }
    if (ch == '\\') {
        r->p++;
        if (r->p >= r->end) return fail(c, G4_ERR_INPUT, "%s/pattern: trailing '\\'", r->path);
        char e = *r->p;
        cpr rg[8];
        int n = 0, neg;
        if (class_escape(e, rg, &n, &neg)) { r->p++; return emit_class(c, b, rg, n, neg, r->path); }
        if ((e >= '0' && e <= '9') || e == 'b' || e == 'B' || e == 'k' || e == 'p' || e == 'P')
            return fail(c, G4_ERR_INPUT, "%s/pattern: escape \\%c is not supported", r->path, e);
        long cp = rx_esc(r);
        if (cp < 0) return -1;
        json_char_lit(r->c, b, (uint32_t)cp);
        return 0;
    }
    if (ch == '^' || ch == '$') return fail(c, G4_ERR_INPUT, "%s/pattern: '%c' is supported only at the pattern's start / end", r->path, ch);
    if (ch == '*' || ch == '+' || ch == '?' || ch == '{') return fail(c, G4_ERR_INPUT, "%s/pattern: quantifier without an item", r->path);
    json_char_lit(r->c, b, (uint32_t)rx_cp(r));
    return 0;
}

static int rx_seq(rx *r, g4_strbuf *b) {
    while (r->p < r->end && *r->p != '|' && *r->p != ')') {
        if (*r->p == '$' && r->p + 1 == r->end) break;
        if (rx_atom(r, b)) return -1;
        if (r->p < r->end && (*r->p == '*' || *r->p == '+' || *r->p == '?')) {
            g4_sb_put(b, r->p, 1);
            r->p++;
        } else if (r->p < r->end && *r->p == '{') {
            const char *q = r->p + 1;
            while (q < r->end && ((*q >= '0' && *q <= '9') || *q == ',')) q++;
            if (q >= r->end || *q != '}') return fail(r->c, G4_ERR_INPUT, "%s/pattern: bad '{' quantifier", r->path);
            g4_sb_put(b, r->p, (size_t)(q + 1 - r->p));
            r->p = q + 1;
        }
        if (r->p < r->end && *r->p == '?') r->p++;  /* lazy: the language is the same */
        g4_sb_put(b, " ", 1);
    }
    return 0;
}

static int rx_alt(rx *r, g4_strbuf *b) {
    if (++r->c->depth > 100) return fail(r->c, G4_ERR_INPUT, "%s/pattern: nested too deep", r->path);
    g4_sb_put(b, "\"\" ", 3);
    if (rx_seq(r, b)) return -1;
    while (r->p < r->end && *r->p == '|') {
        r->p++;
        g4_sb_put(b, "| \"\" ", 5);
        if (rx_seq(r, b)) return -1;
    }
    r->c->depth--;
    return 0;
}

static int pattern_body(ctx *c, const char *pat, const char *path, g4_strbuf *b) {
    size_t n = strlen(pat);
    rx r = {c, pat, pat + n, path};
    int anch_start = n && pat[0] == '^';
    int anch_end = n && pat[n - 1] == '$' && (n < 2 || pat[n - 2] != '\\');
    if (anch_start) r.p++;
    g4_sb_printf(b, "%s ", quote(c));
    if (!anch_start) g4_sb_put(b, "char* ", 6);
    g4_sb_put(b, "( ", 2);
    if (rx_alt(&r, b)) return -1;
    if (r.p < r.end && *r.p == ')') return fail(c, G4_ERR_INPUT, "%s/pattern: unbalanced ')'", path);
    g4_sb_put(b, " ) ", 3);
    if (!anch_end) g4_sb_put(b, "char* ", 6);
    g4_sb_put(b, quote(c), strlen(quote(c)));
    return 0;
}

/* A calendar date (RFC 3339 full-date): 30-day months end on the 30th, February on the 28th but
 * in leap years (divisible by 4, centuries only by 400: a finite, regular set of 4-digit years). */
#define DAY28 "( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] )"
#define LEAP "( [0-9]{2} ( \"0\" [48] | [2468] [048] | [13579] [26] ) | ( \"0\" [48] | [2468] [048] | [13579] [26] ) \"00\" )"
#define DATE "( [0-9]{4} \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( " DAY28 " | \"29\" | \"3\" [01] )" \
    " | ( \"0\" [469] | \"11\" ) \"-\" ( " DAY28 " | \"29\" | \"30\" ) | \"02-\" " DAY28 " ) | " LEAP " \"-02-29\" )"
#define TIME "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,9} )? " \
             "( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )"
static const struct { const char *name, *gbnf; } FORMATS[] = {
    {"date", DATE},
    {"time", TIME},
    {"date-time", DATE " \"T\" " TIME},
    {"uuid", "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}"},
    {"email", "[a-zA-Z0-9._%+-]+ \"@\" [a-zA-Z0-9-]+ ( \".\" [a-zA-Z0-9-]+ )+"},
};

static int size_kw(ctx *c, json_t *s, const char *key, const char *path, long *out) {
    json_t *x = json_object_get(s, key);
    if (!x) return 0;
    if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > 10000)
        return fail(c, G4_ERR_INPUT, "%s/%s must be an integer in 0..10000", path, key);
    *out = (long)json_integer_value(x);
    return 1;
}

static int string_body(ctx *c, json_t *s, const char *path, g4_strbuf *b) {
    json_t *fmt = json_object_get(s, "format"), *pat = json_object_get(s, "pattern");
    long mn = 0, mx = -1;
    int hmn, hmx;
    if ((hmn = size_kw(c, s, "minLength", path, &mn)) < 0 || (hmx = size_kw(c, s, "maxLength", path, &mx)) < 0) return -1;
    if ((fmt || pat) && (hmn || hmx)) return fail(c, G4_ERR_INPUT, "%s: minLength/maxLength together with %s is not supported", path, fmt ? "format" : "pattern");
    if (fmt && pat) return fail(c, G4_ERR_INPUT, "%s: format together with pattern is not supported", path);
    if (fmt) {
        if (!json_is_string(fmt)) return fail(c, G4_ERR_INPUT, "%s/format is not a string", path);
        for (size_t i = 0; i < sizeof FORMATS / sizeof FORMATS[0]; i++)
            if (!strcmp(json_string_value(fmt), FORMATS[i].name)) {
                g4_sb_printf(b, "%s %s %s", quote(c), FORMATS[i].gbnf, quote(c));
                return 0;
            }
        return fail(c, G4_ERR_INPUT, "%s/format: unsupported format '%s' (supported: date, time, date-time, uuid, email)", path, json_string_value(fmt));
    }
    if (pat) {
        if (!json_is_string(pat)) return fail(c, G4_ERR_INPUT, "%s/pattern is not a string", path);
        return pattern_body(c, json_string_value(pat), path, b);
    }
    if (!hmn && !hmx) { g4_sb_put(b, "string", 6); return 0; }
    if (hmx && mx < mn) return fail(c, G4_ERR_INPUT, "%s: maxLength %ld < minLength %ld", path, mx, mn);
    if (hmx) g4_sb_printf(b, "%s char{%ld,%ld} %s", quote(c), mn, mx, quote(c));
    else g4_sb_printf(b, "%s char{%ld,} %s", quote(c), mn, quote(c));
    return 0;
}

/* ---------------------------------------------------------------- objects and arrays */

static int cmp_str(const void *x, const void *y) { return strcmp(*(const char *const *)x, *(const char *const *)y); }

/* The rest of a JSON string after its opening quote, for the keys sorted in k[0..n) that share
 * their first d bytes: any string but those keys. Along a declared key's bytes the characters are
 * written as they are; once a character leaves every key, anything follows. */
static int other_key(ctx *c, const char **k, size_t n, size_t d) {
    int r = new_rule(c);
    g4_strbuf b = {0};
    size_t i = 0;
    int first = 1;
    if (!k[0][d]) i = 1;   /* a declared key ends here: the string may not */
    else { g4_sb_put(&b, "\"\\\"\"", 4); first = 0; }
    g4_sb_printf(&b, "%s[^\\x22\\x5C\\x00-\\x1F", first ? "" : " | ");
    for (size_t j = i; j < n; j++)
        if (j == i || k[j][d] != k[j - 1][d]) g4_sb_printf(&b, "\\x%02X", (unsigned char)k[j][d]);
    g4_sb_put(&b, "] char* \"\\\"\"", 12);
    /* an escape leaves every key too; one that writes printable ASCII (\u0041, \/) might not, so
     * such escapes are not written on a declared key's path (encoders never write them) */
    g4_sb_put(&b, " | \"\\\\\" ( [\"\\\\bfnrt] | \"u\" ( [1-9a-fA-F] [0-9a-fA-F]{3} | \"0\" [1-9a-fA-F] [0-9a-fA-F]{2} | \"00\" [0189a-fA-F] [0-9a-fA-F] ) ) char* \"\\\"\"", 135);
    while (i < n) {
        size_t j = i;
        while (j < n && k[j][d] == k[i][d]) j++;
        int sub = other_key(c, k + i, j - i, d + 1);
        if (sub < 0) { free(b.p); return -1; }
        g4_sb_printf(&b, " | \"\\x%02X\" r%d", (unsigned char)k[i][d], sub);
        i = j;
    }
    emit_rule(c, r, &b);
    free(b.p);
    return r;
}

static int object_body(ctx *c, json_t *s, const char *path, g4_strbuf *b) {
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *ap = json_object_get(s, "additionalProperties");
    char sub[1024];
    if (props && !json_is_object(props)) return fail(c, G4_ERR_INPUT, "%s/properties is not an object", path);
    if (req && !json_is_array(req)) return fail(c, G4_ERR_INPUT, "%s/required is not an array", path);
    size_t ri;
    json_t *rv;
    json_array_foreach(req, ri, rv) {
        if (!json_is_string(rv)) return fail(c, G4_ERR_INPUT, "%s/required/%zu is not a string", path, ri);
        if (!props || !json_object_get(props, json_string_value(rv)))
            return fail(c, G4_ERR_INPUT, "%s/required: '%s' is not among the properties", path, json_string_value(rv));
    }
    size_t n = props ? json_object_size(props) : 0;
    if (!n) {
        if (ap && json_is_false(ap)) { g4_sb_put(b, "\"{\" ws \"}\"", 10); return 0; }
        if (!ap || json_is_true(ap)) { g4_sb_put(b, "object", 6); return 0; }
        snprintf(sub, sizeof sub, "%s/additionalProperties", path);
        int v = gen(c, ap, sub);
        if (v < 0) return -1;
        const char *key = c->gemma ? "key" : "string";
        g4_sb_printf(b, "\"{\" ws ( %s ws \":\" ws r%d ws ( \",\" ws %s ws \":\" ws r%d ws )* )? \"}\"", key, v, key, v);
        return 0;
    }
    /* a schema for the other keys: their names are the strings that are none of the declared ones */
    int extra = -1;
    if (ap && !json_is_false(ap)) {
        if (c->gemma) return fail(c, G4_ERR_INPUT, "%s/additionalProperties: only false is supported next to properties in tool arguments", path);
        const char **names = malloc(n * sizeof *names);
        if (!names) return fail(c, G4_ERR_NOMEM, "out of memory");
        size_t j = 0;
        const char *kk;
        json_t *kv_;
        json_object_foreach(props, kk, kv_) {
            for (const unsigned char *q = (const unsigned char *)kk; *q; q++)
                if (*q < 0x20 || *q >= 0x7F || *q == '"' || *q == '\\') {
                    free(names);
                    return fail(c, G4_ERR_INPUT, "%s/additionalProperties: a schema next to a property name with characters JSON escapes or non-ASCII ('%s') is not supported", path, kk);
                }
            names[j++] = kk;
        }
        qsort(names, n, sizeof *names, cmp_str);
        int nk = other_key(c, names, n, 0);
        free(names);
        if (nk < 0) return -1;
        snprintf(sub, sizeof sub, "%s/additionalProperties", path);
        int v = json_is_true(ap) ? -1 : gen(c, ap, sub);
        if (!json_is_true(ap) && v < 0) return -1;
        extra = new_rule(c);
        g4_strbuf xb = {0};
        if (v >= 0) g4_sb_printf(&xb, "\"\\\"\" r%d ws \":\" ws r%d ws", nk, v);
        else g4_sb_printf(&xb, "\"\\\"\" r%d ws \":\" ws value ws", nk);
        emit_rule(c, extra, &xb);
        free(xb.p);
    }
    /* properties in their declared order, the optional ones skippable: A_i (nothing written yet)
     * and B_i (something written, so a comma first) over properties i.. */
    int *kv = malloc(n * sizeof *kv);
    char *opt = malloc(n);
    if (!kv || !opt) { free(kv); free(opt); return fail(c, G4_ERR_NOMEM, "out of memory"); }
    size_t i = 0;
    const char *key;
    json_t *ps;
    json_object_foreach(props, key, ps) {
        int is_req = 0;
        json_array_foreach(req, ri, rv) is_req |= !strcmp(json_string_value(rv), key);
        opt[i] = (char)!is_req;
        snprintf(sub, sizeof sub, "%s/properties/%s", path, key);
        int v = gen(c, ps, sub);
        if (v < 0) { free(kv); free(opt); return -1; }
        kv[i] = new_rule(c);
        g4_strbuf kb = {0};
        if (key_lit(c, &kb, key)) { free(kb.p); free(kv); free(opt); return -1; }
        g4_sb_printf(&kb, " ws \":\" ws r%d ws", v);
        emit_rule(c, kv[i], &kb);
        free(kb.p);
        i++;
    }
    int a_next = new_rule(c), b_next = new_rule(c);
    g4_strbuf e = {0}, e2 = {0};
    if (extra >= 0) {   /* the other keys after the declared ones */
        g4_sb_printf(&e, "( r%d ( \",\" ws r%d )* )?", extra, extra);
        g4_sb_printf(&e2, "( \",\" ws r%d )*", extra);
    }
    emit_rule(c, a_next, &e);
    emit_rule(c, b_next, &e2);
    free(e.p);
    free(e2.p);
    for (size_t j = n; j-- > 0;) {
        int A = new_rule(c), B = new_rule(c);
        g4_strbuf ab = {0}, bb = {0};
        g4_sb_printf(&ab, "r%d r%d", kv[j], b_next);
        if (opt[j]) g4_sb_printf(&ab, " | r%d", a_next);
        g4_sb_printf(&bb, "\",\" ws r%d r%d", kv[j], b_next);
        if (opt[j]) g4_sb_printf(&bb, " | r%d", b_next);
        emit_rule(c, A, &ab);
        emit_rule(c, B, &bb);
        free(ab.p);
        free(bb.p);
        a_next = A;
        b_next = B;
    }
    free(kv);
    free(opt);
    g4_sb_printf(b, "\"{\" ws r%d \"}\"", a_next);
    return 0;
}

static int array_body(ctx *c, json_t *s, const char *path, g4_strbuf *b) {
    json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    long mn = 0, mx = -1;
    int hmx;
    if (size_kw(c, s, "minItems", path, &mn) < 0 || (hmx = size_kw(c, s, "maxItems", path, &mx)) < 0) return -1;
    if (hmx && mx < mn) return fail(c, G4_ERR_INPUT, "%s: maxItems %ld < minItems %ld", path, mx, mn);
    if (prefix && (!json_is_array(prefix) || !json_array_size(prefix)))
        return fail(c, G4_ERR_INPUT, "%s/prefixItems must be a non-empty array", path);
    char sub[1024];
    long np = prefix ? (long)json_array_size(prefix) : 0;
    if (np > 1000) return fail(c, G4_ERR_INPUT, "%s/prefixItems: more than 1000 items", path);
    if (hmx && np > mx) np = mx;   /* prefixes past maxItems can never be written */
    int *pr = np ? malloc((size_t)np * sizeof *pr) : NULL;
    if (np && !pr) return fail(c, G4_ERR_NOMEM, "out of memory");
    for (long i = 0; i < np; i++) {
        snprintf(sub, sizeof sub, "%s/prefixItems/%ld", path, i);
        if ((pr[i] = gen(c, json_array_get(prefix, (size_t)i), sub)) < 0) { free(pr); return -1; }
    }
    /* the items after the prefixes: none where items is false */
    int v = -1, rest = !json_is_false(items);
    if (!rest && mn > np) { free(pr); return fail(c, G4_ERR_INPUT, "%s: minItems %ld needs more items than prefixItems holds, and items is false", path, mn); }
    if (rest && items) {
        snprintf(sub, sizeof sub, "%s/items", path);
        if ((v = gen(c, items, sub)) < 0) { free(pr); return -1; }
    } else if (rest) {
        v = new_rule(c);
        g4_strbuf vb = {0};
        g4_sb_put(&vb, "value", 5);
        emit_rule(c, v, &vb);
        free(vb.p);
    }
    if (hmx && mx == 0) { free(pr); g4_sb_put(b, "\"[\" ws \"]\"", 10); return 0; }
    if (!np) {
        g4_sb_printf(b, "\"[\" ws ( r%d ws ( \",\" ws r%d ws ){%ld,", v, v, mn > 0 ? mn - 1 : 0);
        if (hmx) g4_sb_printf(b, "%ld", mx - 1);
        g4_sb_printf(b, "} )%s \"]\"", mn > 0 ? "" : "?");
        return 0;
    }
    /* p0 ( "," p1 ( "," p2 ... ( "," rest ){lo,hi} )? )? — item i optional from minItems on */
    g4_sb_put(b, "\"[\" ws ", 7);
    for (long i = 0; i < np; i++) {
        if (i >= mn) g4_sb_put(b, "( ", 2);
        g4_sb_printf(b, "%sr%d ws ", i ? "\",\" ws " : "", pr[i]);
    }
    long rlo = mn > np ? mn - np : 0, rhi = hmx ? mx - np : -1;
    if (rest && rhi != 0) {
        g4_sb_printf(b, "( \",\" ws r%d ws ){%ld,", v, rlo);
        if (rhi > 0) g4_sb_printf(b, "%ld", rhi);
        g4_sb_put(b, "} ", 2);
    }
    for (long i = np; i-- > 0;)
        if (i >= mn) g4_sb_put(b, ")? ", 3);
    g4_sb_put(b, "\"]\"", 3);
    free(pr);
    return 0;
}

/* ---------------------------------------------------------------- schemas */

static const char *const KNOWN[] = {
    "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "enum",
    "const", "anyOf", "$ref", "$defs", "definitions", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "minLength", "maxLength", "pattern", "format", "prefixItems", "allOf", "oneOf",
    /* annotations: no effect on the language */
    "title", "description", "$schema", "$id", "$comment", "default", "examples",
};

static int type_body(ctx *c, json_t *s, const char *t, const char *path, g4_strbuf *b) {
    if (!strcmp(t, "null") || !strcmp(t, "boolean")) { g4_sb_put(b, t, strlen(t)); return 0; }
    if (!strcmp(t, "integer")) return integer_body(c, s, path, b);
    if (!strcmp(t, "number")) return number_body(c, s, path, b);
    if (!strcmp(t, "string")) return string_body(c, s, path, b);
    if (!strcmp(t, "array")) return array_body(c, s, path, b);
    if (!strcmp(t, "object")) return object_body(c, s, path, b);
    return fail(c, G4_ERR_INPUT, "%s/type: unknown type '%s'", path, t);
}

static json_t *resolve(ctx *c, const char *ref, const char *path) {
    if (ref[0] != '#') { fail(c, G4_ERR_INPUT, "%s/$ref: only local references (#...) are supported, not '%s'", path, ref); return NULL; }
    json_t *cur = c->root;
    const char *p = ref + 1;
    while (*p) {
        if (*p != '/') { fail(c, G4_ERR_INPUT, "%s/$ref: '%s' is not a JSON pointer", path, ref); return NULL; }
        p++;
        char tok[256];
        size_t n = 0;
        while (*p && *p != '/' && n < sizeof tok - 1) {
            if (p[0] == '~' && p[1] == '0') { tok[n++] = '~'; p += 2; }
            else if (p[0] == '~' && p[1] == '1') { tok[n++] = '/'; p += 2; }
            else tok[n++] = *p++;
        }
        tok[n] = 0;
        cur = json_is_object(cur) ? json_object_get(cur, tok) : NULL;
        if (!cur) { fail(c, G4_ERR_INPUT, "%s/$ref: '%s' names nothing in the schema", path, ref); return NULL; }
    }
    return cur;
}

static int body(ctx *c, json_t *s, const char *path, g4_strbuf *b);

static int gen(ctx *c, json_t *s, const char *path) {
    if (c->err) return -1;
    if (++c->depth > 64) return fail(c, G4_ERR_INPUT, "%s: schema nested deeper than 64", path);
    json_t *ref = json_is_object(s) ? json_object_get(s, "$ref") : NULL;
    int r;
    if (ref) {
        if (!json_is_string(ref)) return fail(c, G4_ERR_INPUT, "%s/$ref is not a string", path);
        const char *k;
        json_t *v;
        json_object_foreach(s, k, v) {
            static const char *const ok[] = {"$ref", "title", "description", "$comment", "default", "examples", "$defs", "definitions", "$schema", "$id"};
            size_t i = 0;
            while (i < sizeof ok / sizeof ok[0] && strcmp(ok[i], k)) i++;
            if (i == sizeof ok / sizeof ok[0])
                return fail(c, G4_ERR_INPUT, "%s: keyword '%s' next to $ref is not supported", path, k);
        }
        const char *rs = json_string_value(ref);
        for (int i = 0; i < c->n_refs; i++)
            if (!strcmp(c->ref_name[i], rs)) { c->depth--; return c->ref_rule[i]; }
        json_t *t = resolve(c, rs, path);
        if (!t) return -1;
        char **nn = realloc(c->ref_name, (size_t)(c->n_refs + 1) * sizeof *nn);
        if (nn) c->ref_name = nn;
        int *nr = realloc(c->ref_rule, (size_t)(c->n_refs + 1) * sizeof *nr);
        if (nr) c->ref_rule = nr;
        if (!nn || !nr || !(c->ref_name[c->n_refs] = strdup(rs))) return fail(c, G4_ERR_NOMEM, "out of memory");
        r = new_rule(c);
        c->ref_rule[c->n_refs++] = r;
        g4_strbuf bb = {0};
        /* the referenced schema's own rule is written once; the recursion ends at the lookup above */
        if (body(c, t, rs, &bb)) { free(bb.p); return -1; }
        emit_rule(c, r, &bb);
        free(bb.p);
        c->depth--;
        return r;
    }
    r = new_rule(c);
    g4_strbuf bb = {0};
    if (body(c, s, path, &bb)) { free(bb.p); return -1; }
    emit_rule(c, r, &bb);
    free(bb.p);
    c->depth--;
    return r;
}

static int is_annotation(const char *k) {
    static const char *const a[] = {"title", "description", "$schema", "$id", "$comment", "default", "examples", "$defs", "definitions"};
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
        if (!strcmp(a[i], k)) return 1;
    return 0;
}

/* A subschema with its $ref followed (one level at a time, bounded), for the checks below. */
static json_t *deref(ctx *c, json_t *s, const char *path) {
    for (int i = 0; i < 16 && json_is_object(s) && json_is_string(json_object_get(s, "$ref")); i++)
        if (!(s = resolve(c, json_string_value(json_object_get(s, "$ref")), path))) return NULL;
    return s;
}

/* allOf: the branches (and the keywords beside allOf) as one schema. A single schema is itself;
 * several must all be object schemas of properties / required / additionalProperties: false,
 * which merge exactly: a key any closed branch leaves out is forbidden, a key two branches
 * describe differently is refused (the intersection of two schemas is not generated). */
static int all_of(ctx *c, json_t *s, json_t *all, const char *path, g4_strbuf *b) {
    if (!json_is_array(all) || !json_array_size(all)) return fail(c, G4_ERR_INPUT, "%s/allOf must be a non-empty array", path);
    json_t *self = json_object(), *br = json_array();
    if (!self || !br) { json_decref(self); json_decref(br); return fail(c, G4_ERR_NOMEM, "out of memory"); }
    const char *k;
    json_t *v;
    int own = 0;
    json_object_foreach(s, k, v) {
        if (strcmp(k, "allOf")) json_object_set(self, k, v);
        own |= strcmp(k, "allOf") && !is_annotation(k);
    }
    if (own) json_array_append(br, self);
    json_array_extend(br, all);
    json_decref(self);
    char sub[1024];
    int rc = -1;
    if (json_array_size(br) == 1) {
        snprintf(sub, sizeof sub, "%s/allOf/0", path);
        int r = gen(c, json_array_get(br, 0), sub);
        if (r >= 0) { g4_sb_printf(b, "r%d", r); rc = 0; }
        json_decref(br);
        return rc;
    }
    json_t *props = json_object(), *req = json_array(), *closed = NULL, *m = json_object();
    size_t i;
    json_t *x;
    json_array_foreach(br, i, x) {
        if (own && i == 0) snprintf(sub, sizeof sub, "%s", path);
        else snprintf(sub, sizeof sub, "%s/allOf/%zu", path, i - (size_t)own);
        json_t *d = deref(c, x, sub);
        if (!d) goto out;
        if (!json_is_object(d)) { fail(c, G4_ERR_INPUT, "%s: allOf of several schemas needs object schemas", sub); goto out; }
        json_object_foreach(d, k, v) {
            if (is_annotation(k) || !strcmp(k, "properties") || !strcmp(k, "required")) continue;
            if (!strcmp(k, "type") && json_is_string(v) && !strcmp(json_string_value(v), "object")) continue;
            if (!strcmp(k, "additionalProperties") && json_is_false(v)) continue;
            fail(c, G4_ERR_INPUT, "%s: keyword '%s' in allOf of several schemas is not supported (only object schemas of properties, required and additionalProperties: false merge)", sub, k);
            goto out;
        }
        json_t *ps = json_object_get(d, "properties"), *rq = json_object_get(d, "required");
        if (ps && !json_is_object(ps)) { fail(c, G4_ERR_INPUT, "%s/properties is not an object", sub); goto out; }
        if (rq && !json_is_array(rq)) { fail(c, G4_ERR_INPUT, "%s/required is not an array", sub); goto out; }
        json_object_foreach(ps, k, v) {
            json_t *had = json_object_get(props, k);
            if (had && !json_equal(had, v)) { fail(c, G4_ERR_INPUT, "%s/properties/%s: allOf describes this property differently in two branches", sub, k); goto out; }
            json_object_set(props, k, v);
        }
        if (rq) json_array_extend(req, rq);
        if (json_is_false(json_object_get(d, "additionalProperties"))) {
            /* a closed branch: only its own keys survive */
            json_t *keep = json_object();
            json_object_foreach(closed ? closed : ps, k, v)
                if (ps && json_object_get(ps, k)) json_object_set(keep, k, json_true());
            json_decref(closed);
            closed = keep;
        }
    }
    if (closed) {
        void *tmp;
        json_object_foreach_safe(props, tmp, k, v)
            if (!json_object_get(closed, k)) json_object_del(props, k);
    }
    json_t *rq2 = json_array();
    json_array_foreach(req, i, x) {
        if (!json_is_string(x)) { json_decref(rq2); fail(c, G4_ERR_INPUT, "%s/allOf: a required entry is not a string", path); goto out; }
        if (!json_object_get(props, json_string_value(x))) {
            json_decref(rq2);
            fail(c, G4_ERR_INPUT, "%s/allOf: required '%s' is not among the properties the branches allow", path, json_string_value(x));
            goto out;
        }
        size_t j;
        json_t *y;
        int dup = 0;
        json_array_foreach(rq2, j, y) dup |= json_equal(x, y);
        if (!dup) json_array_append(rq2, x);
    }
    json_object_set_new(m, "type", json_string("object"));
    json_object_set(m, "properties", props);
    json_object_set_new(m, "required", rq2);
    json_object_set_new(m, "additionalProperties", json_false());
    rc = object_body(c, m, path, b);
out:
    json_decref(props);
    json_decref(req);
    json_decref(closed);
    json_decref(m);
    json_decref(br);
    return rc;
}

/* The JSON types a schema's values can have, as bits (integral and fractional numbers apart, as
 * "integer" is a subset of "number"); all bits where the schema does not say. */
enum { T_NULL = 1, T_BOOL = 2, T_STR = 4, T_INT = 8, T_FRAC = 16, T_ARR = 32, T_OBJ = 64, T_ANY = 127 };

static int value_bits(json_t *v) {
    if (json_is_null(v)) return T_NULL;
    if (json_is_boolean(v)) return T_BOOL;
    if (json_is_string(v)) return T_STR;
    if (json_is_number(v)) { double d = json_number_value(v); return d == floor(d) ? T_INT : T_FRAC; }
    return json_is_array(v) ? T_ARR : T_OBJ;
}

static int type_bits(json_t *s) {
    if (!json_is_object(s)) return T_ANY;
    json_t *v = json_object_get(s, "const"), *e = json_object_get(s, "enum"), *t = json_object_get(s, "type");
    if (v) return value_bits(v);
    if (json_is_array(e)) {
        int m = 0;
        size_t i;
        json_t *x;
        json_array_foreach(e, i, x) m |= value_bits(x);
        return m;
    }
    int m = 0;
    for (size_t i = 0; t && i < (json_is_array(t) ? json_array_size(t) : 1); i++) {
        const char *n = json_string_value(json_is_array(t) ? json_array_get(t, i) : t);
        if (!n) return T_ANY;
        m |= !strcmp(n, "null") ? T_NULL : !strcmp(n, "boolean") ? T_BOOL : !strcmp(n, "string") ? T_STR
           : !strcmp(n, "integer") ? T_INT : !strcmp(n, "number") ? T_INT | T_FRAC : !strcmp(n, "array") ? T_ARR
           : !strcmp(n, "object") ? T_OBJ : T_ANY;
    }
    return t ? m : T_ANY;
}

/* JSON Schema equality of two values: numbers by value (1 == 1.0), the rest structurally. */
static int same_value(json_t *a, json_t *b) {
    if (json_is_number(a) && json_is_number(b)) return json_number_value(a) == json_number_value(b);
    return json_equal(a, b);
}

/* The const / enum values a schema allows, or NULL where it is not a list of values. */
static json_t *value_list(json_t *s) {
    json_t *v = json_is_object(s) ? json_object_get(s, "const") : NULL;
    if (v) { json_t *a = json_array(); json_array_append(a, v); return a; }
    v = json_is_object(s) ? json_object_get(s, "enum") : NULL;
    return json_is_array(v) ? json_incref(v) : NULL;
}

/* oneOf is anyOf where no value can match two branches: proven when each pair of branches has
 * disjoint types or both are const / enum lists with no value in common. */
static int one_of_disjoint(ctx *c, json_t *one, const char *path) {
    size_t n = json_array_size(one);
    char sub[1024];
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            snprintf(sub, sizeof sub, "%s/oneOf/%zu", path, i);
            json_t *a = deref(c, json_array_get(one, i), sub);
            snprintf(sub, sizeof sub, "%s/oneOf/%zu", path, j);
            json_t *b = deref(c, json_array_get(one, j), sub);
            if (!a || !b) return -1;
            if (!(type_bits(a) & type_bits(b))) continue;
            json_t *la = value_list(a), *lb = value_list(b);
            int overlap = !la || !lb;
            size_t x, y;
            json_t *u, *w;
            json_array_foreach(la, x, u) json_array_foreach(lb, y, w) overlap |= same_value(u, w);
            json_decref(la);
            json_decref(lb);
            if (overlap)
                return fail(c, G4_ERR_INPUT, "%s/oneOf: branches %zu and %zu may both match a value; oneOf is supported only where the branches have different types or different const / enum values", path, i, j);
        }
    return 0;
}

/* Whether value v has JSON Schema type name t (an integer is any number with no fraction). */
static int has_type(json_t *v, const char *t) {
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "integer")) return json_is_number(v) && json_number_value(v) == floor(json_number_value(v));
    if (!strcmp(t, "string")) return json_is_string(v);
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    if (!strcmp(t, "null")) return json_is_null(v);
    if (!strcmp(t, "array")) return json_is_array(v);
    if (!strcmp(t, "object")) return json_is_object(v);
    return -1;
}

/* 1 when value v satisfies the keywords beside enum / const (type, numeric bounds, lengths),
 * 0 when not, -1 on a malformed keyword. */
static int value_ok(ctx *c, json_t *s, json_t *v, const char *path) {
    json_t *t = json_object_get(s, "type");
    if (t) {
        if (!json_is_string(t) && (!json_is_array(t) || !json_array_size(t)))
            return fail(c, G4_ERR_INPUT, "%s/type must be a string or a non-empty array", path);
        int any = 0;
        for (size_t i = 0; i < (json_is_array(t) ? json_array_size(t) : 1); i++) {
            json_t *e = json_is_array(t) ? json_array_get(t, i) : t;
            int h = json_is_string(e) ? has_type(v, json_string_value(e)) : -1;
            if (h < 0) return fail(c, G4_ERR_INPUT, "%s/type: unknown type '%s'", path, json_is_string(e) ? json_string_value(e) : "?");
            any |= h;
        }
        if (!any) return 0;
    }
    static const char *const k[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    for (int i = 0; i < 4; i++) {
        json_t *x = json_object_get(s, k[i]);
        if (!x) continue;
        if (!json_is_number(x)) return fail(c, G4_ERR_INPUT, "%s/%s is not a number", path, k[i]);
        if (!json_is_number(v)) continue;   /* a bound says nothing of other types */
        double a = json_number_value(v), d = json_number_value(x);
        if (!(i == 0 ? a >= d : i == 1 ? a > d : i == 2 ? a <= d : a < d)) return 0;
    }
    static const char *const l[] = {"minLength", "maxLength"};
    for (int i = 0; i < 2; i++) {
        long n;
        int h = size_kw(c, s, l[i], path, &n);
        if (h < 0) return -1;
        if (!h || !json_is_string(v)) continue;
        long cps = 0;   /* the length in code points, as JSON Schema counts it */
        for (const unsigned char *q = (const unsigned char *)json_string_value(v); *q; q++) cps += (*q & 0xC0) != 0x80;
        if (i == 0 ? cps < n : cps > n) return 0;
    }
    return 1;
}

/* enum / const: the listed values that also satisfy the keywords beside them (the intersection);
 * a keyword whose check is not implemented here is refused rather than ignored. */
static int values_body(ctx *c, json_t *s, const char *path, g4_strbuf *b) {
    static const char *const ok[] = {"enum", "const", "type", "minimum", "maximum", "exclusiveMinimum",
                                      "exclusiveMaximum", "minLength", "maxLength"};
    const char *k;
    json_t *v, *cst = json_object_get(s, "const"), *en = json_object_get(s, "enum");
    const char *kw = en ? "enum" : "const";
    json_object_foreach(s, k, v) {
        size_t i = 0;
        while (i < sizeof ok / sizeof ok[0] && strcmp(ok[i], k)) i++;
        if (i == sizeof ok / sizeof ok[0] && !is_annotation(k))
            return fail(c, G4_ERR_INPUT, "%s: keyword '%s' next to %s is not supported", path, k, kw);
    }
    if (en && (!json_is_array(en) || !json_array_size(en))) return fail(c, G4_ERR_INPUT, "%s/enum must be a non-empty array", path);
    size_t n = en ? json_array_size(en) : 1, kept = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *e = en ? json_array_get(en, i) : cst;
        if (en && cst && !same_value(e, cst)) continue;
        int r = value_ok(c, s, e, path);
        if (r < 0) return -1;
        if (!r) continue;
        if (kept++) g4_sb_put(b, " | ", 3);
        if (lit_json(c, b, e)) return -1;
    }
    if (!kept) return fail(c, G4_ERR_INPUT, "%s: language is empty: no %s value satisfies the keywords beside it", path, kw);
    return 0;
}

static int body(ctx *c, json_t *s, const char *path, g4_strbuf *b) {
    if (json_is_true(s)) { g4_sb_put(b, "value", 5); return 0; }
    if (!json_is_object(s)) return fail(c, G4_ERR_INPUT, "%s: a schema must be an object or true", path);
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        size_t i = 0;
        while (i < sizeof KNOWN / sizeof KNOWN[0] && strcmp(KNOWN[i], k)) i++;
        if (i == sizeof KNOWN / sizeof KNOWN[0]) return fail(c, G4_ERR_INPUT, "%s: unsupported keyword '%s'", path, k);
    }
    char sub[1024];
    if (json_object_get(s, "$ref")) {
        int r = gen(c, s, path);
        if (r < 0) return -1;
        g4_sb_printf(b, "r%d", r);
        return 0;
    }
    if (json_object_get(s, "const") || json_object_get(s, "enum")) return values_body(c, s, path, b);
    if ((v = json_object_get(s, "allOf"))) return all_of(c, s, v, path, b);
    json_t *any = json_object_get(s, "anyOf"), *one = json_object_get(s, "oneOf");
    json_t *e0;
    if (any && one) return fail(c, G4_ERR_INPUT, "%s: anyOf together with oneOf is not supported", path);
    if ((v = any ? any : one)) {
        const char *kw = any ? "anyOf" : "oneOf";
        if (!json_is_array(v) || !json_array_size(v)) return fail(c, G4_ERR_INPUT, "%s/%s must be a non-empty array", path, kw);
        /* the alternatives are the whole language: a constraint beside them would be ignored */
        json_object_foreach(s, k, e0)
            if (strcmp(k, kw) && !is_annotation(k)) return fail(c, G4_ERR_INPUT, "%s: keyword '%s' next to %s is not supported", path, k, kw);
        if (one && one_of_disjoint(c, one, path)) return -1;
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            snprintf(sub, sizeof sub, "%s/%s/%zu", path, kw, i);
            int r = gen(c, e, sub);
            if (r < 0) return -1;
            g4_sb_printf(b, i ? " | r%d" : "r%d", r);
        }
        return 0;
    }
    json_t *t = json_object_get(s, "type");
    if (!t) {
        /* no type: the type its keywords imply, or any value */
        static const struct { const char *kw, *type; } imply[] = {
            {"properties", "object"}, {"required", "object"}, {"additionalProperties", "object"},
            {"items", "array"}, {"prefixItems", "array"}, {"minItems", "array"}, {"maxItems", "array"},
            {"pattern", "string"}, {"format", "string"}, {"minLength", "string"}, {"maxLength", "string"},
            {"minimum", "integer"}, {"maximum", "integer"}, {"exclusiveMinimum", "integer"}, {"exclusiveMaximum", "integer"},
        };
        for (size_t i = 0; i < sizeof imply / sizeof imply[0]; i++)
            if (json_object_get(s, imply[i].kw)) return type_body(c, s, imply[i].type, path, b);
        g4_sb_put(b, "value", 5);
        return 0;
    }
    if (json_is_string(t)) return type_body(c, s, json_string_value(t), path, b);
    if (!json_is_array(t) || !json_array_size(t)) return fail(c, G4_ERR_INPUT, "%s/type must be a string or a non-empty array", path);
    size_t i;
    json_t *e;
    g4_sb_put(b, "( ", 2);
    json_array_foreach(t, i, e) {
        if (!json_is_string(e)) return fail(c, G4_ERR_INPUT, "%s/type/%zu is not a string", path, i);
        if (i) g4_sb_put(b, " | ", 3);
        g4_sb_put(b, "( ", 2);
        if (type_body(c, s, json_string_value(e), path, b)) return -1;
        g4_sb_put(b, " )", 2);
    }
    g4_sb_put(b, " )", 2);
    return 0;
}

g4_status g4_json_schema_to_gbnf(const char *json, size_t len, char **gbnf) {
    *gbnf = NULL;
    ctx c;
    memset(&c, 0, sizeof c);
    json_t *root = NULL;
    if (json) {
        json_error_t je;
        root = json_loadb(json, len, JSON_DECODE_ANY, &je);
        if (!root) return g4_fail(G4_ERR_INPUT, "json_schema: not JSON: %s (line %d column %d)", je.text, je.line, je.column);
    }
    c.root = root;
    g4_sb_put(&c.out, PRIMITIVES, sizeof PRIMITIVES - 1);
    int r = root ? gen(&c, root, "#") : -1;
    if (root && r >= 0) g4_sb_printf(&c.out, "root ::= r%d\n", r);
    if (!root) g4_sb_put(&c.out, "root ::= object\n", 16);
    if (!c.err && c.out.oom) c.err = g4_fail(G4_ERR_NOMEM, "json_schema: out of memory");
    for (int i = 0; i < c.n_refs; i++) free(c.ref_name[i]);
    free(c.ref_name);
    free(c.ref_rule);
    json_decref(root);
    if (c.err) { free(c.out.p); return c.err; }
    *gbnf = c.out.p;
    return G4_OK;
}

static g4_status compile(const char *json, size_t len, g4_grammar **out) {
    char *g;
    g4_status st = g4_json_schema_to_gbnf(json, len, &g);
    if (st) return st;
    st = g4_grammar_compile_gbnf(g, strlen(g), "root", out);
    free(g);
    return st;
}

g4_status g4_grammar_compile_json_schema(const char *json, size_t len, g4_grammar **out) {
    *out = NULL;
    if (!json) return g4_fail(G4_ERR_INPUT, "json_schema: no schema");
    return compile(json, len, out);
}

g4_status g4_grammar_compile_json_object(g4_grammar **out) { return compile(NULL, 0, out); }

/* ---------------------------------------------------------------- Gemma 4 tool calls */

/* The call's arguments: the parameter schema in Gemma's dialect. No schema is an empty parameter
 * list (as OpenAI defines an omitted one); an empty schema takes any object, as a function's
 * arguments are always one. */
static int tool_params(ctx *c, json_t *params, const char *path) {
    json_t *ty = json_is_object(params) ? json_object_get(params, "type") : NULL;
    if (ty && !(json_is_string(ty) && !strcmp(json_string_value(ty), "object")))
        return fail(c, G4_ERR_INPUT, "%s/type: a function's parameters must be an object schema", path);
    int none = !params || json_is_null(params);
    if (none || (json_is_object(params) && !json_object_size(params))) {
        int r = new_rule(c);
        g4_strbuf b = {0};
        if (none) g4_sb_put(&b, "\"{}\"", 4);
        else g4_sb_put(&b, "object", 6);
        emit_rule(c, r, &b);
        free(b.p);
        return r;
    }
    c->root = params;
    for (int i = 0; i < c->n_refs; i++) free(c->ref_name[i]);   /* $refs are local to each schema */
    c->n_refs = 0;
    return gen(c, params, path);
}

g4_status g4_tool_calls_to_gbnf(const char *tools_json, size_t len, const char *only, int max_calls, char **gbnf) {
    *gbnf = NULL;
    json_error_t je;
    json_t *tools = json_loadb(tools_json, len, 0, &je);
    if (!json_is_array(tools)) { json_decref(tools); return g4_fail(G4_ERR_INPUT, "tools: not a JSON array"); }
    ctx c;
    memset(&c, 0, sizeof c);
    c.gemma = 1;
    g4_sb_put(&c.out, GEMMA_PRIMITIVES, sizeof GEMMA_PRIMITIVES - 1);
    g4_strbuf alts = {0};
    int n = 0;
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *f = json_object_get(t, "function");
        const char *name = json_string_value(json_object_get(f, "name"));
        if (!name) { fail(&c, G4_ERR_INPUT, "tools[%zu] has no function name", i); break; }
        if (only && strcmp(name, only)) continue;
        /* the chat parser reads a name up to '{', refusing space and delimiters */
        if (!*name || strpbrk(name, " \t\r\n{}[],\"'")) {
            fail(&c, G4_ERR_INPUT, "tools[%zu]: the function name '%s' cannot be written in Gemma's tool-call syntax", i, name);
            break;
        }
        char path[64];
        snprintf(path, sizeof path, "tools[%zu].function.parameters", i);
        int r = tool_params(&c, json_object_get(f, "parameters"), path);
        if (r < 0) break;
        if (n++) g4_sb_put(&alts, " | ", 3);
        lit(&alts, name, strlen(name));
        g4_sb_printf(&alts, " r%d", r);
    }
    if (!c.err && !n) fail(&c, G4_ERR_INPUT, only ? "tools: no function named '%s'" : "tools: no function to call%s", only ? only : "");
    if (!c.err) {
        g4_sb_printf(&c.out, "call ::= <|tool_call> \"call:\" ( %s ) <tool_call|>\n", alts.p);
        if (max_calls > 0) g4_sb_printf(&c.out, "root ::= call{1,%d} <|tool_response>\n", max_calls);
        else g4_sb_put(&c.out, "root ::= call+ <|tool_response>\n", 32);
    }
    if (!c.err && (c.out.oom || alts.oom)) c.err = g4_fail(G4_ERR_NOMEM, "tools: out of memory");
    for (int k = 0; k < c.n_refs; k++) free(c.ref_name[k]);
    free(c.ref_name);
    free(c.ref_rule);
    free(alts.p);
    json_decref(tools);
    if (c.err) { free(c.out.p); return c.err; }
    *gbnf = c.out.p;
    return G4_OK;
}
