/* jinja_lex.c — the Jinja lexer: template text -> tokens, with jinja2's whitespace control
 * exactly (`-`/`+` modifiers, trim_blocks, lstrip_blocks, raw blocks, newline normalisation).
 * Mirrors jinja2/lexer.py (Lexer.tokeniter) rule by rule; knows nothing of the grammar. */
#include "template/jinja.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    jx_arena *a;
    jx_err *e;
    const char *s;
    size_t n;
    jx_toks *out;
    /* incremental offset -> line/col */
    size_t lc_pos, lc_line_start;
    int lc_line;
} lexer;

static void linecol(lexer *L, size_t pos, int *line, int *col) {
    if (pos < L->lc_pos) { L->lc_pos = 0; L->lc_line = 1; L->lc_line_start = 0; }
    for (size_t i = L->lc_pos; i < pos && i < L->n; i++)
        if (L->s[i] == '\n') { L->lc_line++; L->lc_line_start = i + 1; }
    L->lc_pos = pos;
    *line = L->lc_line;
    *col = (int)jx_utf8_len(L->s + L->lc_line_start, pos - L->lc_line_start) + 1;
}

_Noreturn static void lex_fail(lexer *L, size_t pos, const char *msg) {
    int line, col;
    linecol(L, pos, &line, &col);
    jx_fail(L->e, line, col, "%s", msg);
}

static jx_tok *emit(lexer *L, jt_kind k, size_t pos, const char *s, size_t n) {
    jx_toks *t = L->out;
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 256;
        jx_tok *nv = jx_arena_alloc(L->a, nc * sizeof *nv);
        if (!nv) lex_fail(L, pos, "template too large");
        if (t->n) memcpy(nv, t->v, t->n * sizeof *nv);
        t->v = nv;
        t->cap = nc;
    }
    jx_tok *k2 = &t->v[t->n++];
    memset(k2, 0, sizeof *k2);
    k2->k = k;
    linecol(L, pos, &k2->line, &k2->col);
    k2->s = s;
    k2->n = n;
    return k2;
}

/* Length of the whitespace run (Python \s) starting at i. */
static size_t ws_run(const char *s, size_t n, size_t i) {
    size_t j = i;
    while (j < n) {
        size_t k = j;
        uint32_t c = jx_utf8_next(s, n, &k);
        if (!jx_py_isspace(c)) break;
        j = k;
    }
    return j - i;
}

/* Python str.rstrip(): new length of s[0..n) without trailing whitespace. */
static size_t rstrip_len(const char *s, size_t n) {
    size_t end = n, i = 0, last_non = 0;
    while (i < end) {
        uint32_t c = jx_utf8_next(s, end, &i);
        if (!jx_py_isspace(c)) last_non = i;
    }
    return last_non;
}

static int all_space(const char *s, size_t n) {
    return n > 0 && ws_run(s, n, 0) == n;
}

static int isdig(char c) { return c >= '0' && c <= '9'; }

/* (\d+_)*\d+ at i: returns end or 0 when no digit at i. */
static size_t digits_us(const char *s, size_t n, size_t i) {
    if (i >= n || !isdig(s[i])) return 0;
    size_t j = i;
    for (;;) {
        while (j < n && isdig(s[j])) j++;
        if (j + 1 < n && s[j] == '_' && isdig(s[j + 1])) { j++; continue; }
        return j;
    }
}

static size_t exp_part(const char *s, size_t n, size_t i) {
    if (i >= n || (s[i] != 'e' && s[i] != 'E')) return 0;
    i++;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    return digits_us(s, n, i);
}

/* float_re; returns end or 0. */
static size_t match_float(const char *s, size_t n, size_t i) {
    if (i > 0 && s[i - 1] == '.') return 0;
    size_t p = digits_us(s, n, i);
    if (!p) return 0;
    if (p < n && s[p] == '.') {
        size_t f = digits_us(s, n, p + 1);
        if (f) {
            size_t x = exp_part(s, n, f);
            if (x) return x;
        }
    }
    size_t x = exp_part(s, n, p);
    if (x) return x;
    if (p < n && s[p] == '.') {
        size_t f = digits_us(s, n, p + 1);
        if (f) return f;
    }
    return 0;
}

static int digit_ok(char c, int base) {
    if (base == 2) return c == '0' || c == '1';
    if (base == 8) return c >= '0' && c <= '7';
    if (base == 16) return isdig(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    return isdig(c);
}

/* (_?[digit])+ at i */
static size_t prefixed_digits(const char *s, size_t n, size_t i, int base) {
    size_t j = i;
    for (;;) {
        if (j < n && digit_ok(s[j], base)) { j++; continue; }
        if (j + 1 < n && s[j] == '_' && digit_ok(s[j + 1], base)) { j += 2; continue; }
        break;
    }
    return j > i ? j : 0;
}

/* integer_re; returns end or 0, value in *v (fails on overflow). */
static size_t match_int(lexer *L, size_t i, int64_t *v) {
    const char *s = L->s;
    size_t n = L->n, end = 0;
    int base = 10;
    size_t ds = i;
    if (i + 1 < n && s[i] == '0') {
        char x = (char)(s[i + 1] | 0x20);
        base = x == 'b' ? 2 : x == 'o' ? 8 : x == 'x' ? 16 : 10;
        if (base != 10) {
            end = prefixed_digits(s, n, i + 2, base);
            ds = i + 2;
            if (!end) base = 10;
        }
    }
    if (base == 10) {
        ds = i;
        if (i < n && s[i] >= '1' && s[i] <= '9') end = prefixed_digits(s, n, i + 1, 10), end = end ? end : i + 1;
        else if (i < n && s[i] == '0') {
            size_t j = i + 1;
            for (;;) {
                if (j < n && s[j] == '0') { j++; continue; }
                if (j + 1 < n && s[j] == '_' && s[j + 1] == '0') { j += 2; continue; }
                break;
            }
            end = j;
        } else return 0;
    }
    uint64_t acc = 0;
    for (size_t k = ds; k < end; k++) {
        char c = s[k];
        if (c == '_') continue;
        int d = isdig(c) ? c - '0' : (c | 0x20) - 'a' + 10;
        if (acc > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) lex_fail(L, i, "integer literal too large");
        acc = acc * (uint64_t)base + (uint64_t)d;
    }
    if (acc > (uint64_t)INT64_MAX) lex_fail(L, i, "integer literal too large");
    *v = (int64_t)acc;
    return end;
}

static int name_char(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || isdig((char)c) || c == '_' ||
           c >= 0x80;
}

static int hexval(char c) {
    if (isdig(c)) return c - '0';
    c = (char)(c | 0x20);
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Python "unicode-escape" decoding of a string literal's body. */
static void unescape(lexer *L, size_t pos, const char *s, size_t n, jx_tok *t) {
    char *o = jx_arena_alloc(L->a, n + 1);
    if (!o) lex_fail(L, pos, "template too large");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) { o[k++] = s[i]; continue; }
        char c = s[++i];
        switch (c) {
        case '\n': break;   /* line continuation */
        case '\\': o[k++] = '\\'; break;
        case '\'': o[k++] = '\''; break;
        case '"': o[k++] = '"'; break;
        case 'a': o[k++] = '\a'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'n': o[k++] = '\n'; break;
        case 'r': o[k++] = '\r'; break;
        case 't': o[k++] = '\t'; break;
        case 'v': o[k++] = '\v'; break;
        case 'x': case 'u': case 'U': {
            int want = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            uint32_t cp = 0;
            for (int j = 0; j < want; j++) {
                int h = i + 1 + (size_t)j < n ? hexval(s[i + 1 + (size_t)j]) : -1;
                if (h < 0) lex_fail(L, pos, "truncated \\xXX / \\uXXXX escape in string literal");
                cp = cp * 16 + (uint32_t)h;
            }
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                lex_fail(L, pos, "illegal Unicode character in string literal");
            i += (size_t)want;
            k += jx_utf8_put(o + k, cp);   /* <= 4 bytes for >= 4 source chars */
            break;
        }
        default:
            if (c >= '0' && c <= '7') {
                uint32_t cp = 0;
                int j = 0;
                while (j < 3 && i < n && s[i] >= '0' && s[i] <= '7') { cp = cp * 8 + (uint32_t)(s[i] - '0'); i++; j++; }
                i--;
                k += jx_utf8_put(o + k, cp);
            } else { o[k++] = '\\'; o[k++] = c; }
        }
    }
    o[k] = 0;
    t->s = o;
    t->n = k;
}

static const char *const ops2[] = {"**", "//", "==", "!=", ">=", "<="};
static const char ops1[] = "+-/*%~[](){}><=.:|,;";

/* Lexes the inside of a {% %} or {{ }} tag from *pp; returns with *pp after the end tag. */
static void lex_tag(lexer *L, size_t *pp, int is_block, int *line_starting) {
    const char *s = L->s;
    size_t n = L->n, pos = *pp;
    char bal[256];
    int nb = 0;
    size_t open_pos = pos;
    for (;;) {
        if (pos >= n) lex_fail(L, open_pos, is_block ? "unexpected end of template: missing '%}'"
                                                     : "unexpected end of template: missing '}}'");
        char e1 = is_block ? '%' : '}';
        if (nb == 0) {
            if (is_block && s[pos] == '+' && pos + 2 < n + 0 && s[pos + 1] == '%' && s[pos + 2] == '}') {
                emit(L, JT_BLOCK_END, pos, NULL, 0);
                pos += 3;
                *line_starting = 0;
                break;
            }
            if (s[pos] == '-' && pos + 2 < n && s[pos + 1] == e1 && s[pos + 2] == '}') {
                emit(L, is_block ? JT_BLOCK_END : JT_VAR_END, pos, NULL, 0);
                pos += 3;
                size_t w = ws_run(s, n, pos);
                *line_starting = w ? s[pos + w - 1] == '\n' : 0;
                pos += w;
                break;
            }
            if (s[pos] == e1 && pos + 1 < n && s[pos + 1] == '}') {
                emit(L, is_block ? JT_BLOCK_END : JT_VAR_END, pos, NULL, 0);
                pos += 2;
                *line_starting = 0;
                if (is_block && pos < n && s[pos] == '\n') { pos++; *line_starting = 1; }   /* trim_blocks */
                break;
            }
        }
        size_t w = ws_run(s, n, pos);
        if (w) { pos += w; continue; }
        size_t end = match_float(s, n, pos);
        if (end) {
            char buf[128];
            size_t k = 0;
            for (size_t i = pos; i < end && k + 1 < sizeof buf; i++)
                if (s[i] != '_') buf[k++] = s[i];
            buf[k] = 0;
            jx_tok *t = emit(L, JT_FLOAT, pos, s + pos, end - pos);
            t->f = strtod(buf, NULL);
            pos = end;
            continue;
        }
        int64_t iv;
        end = match_int(L, pos, &iv);
        if (end) {
            jx_tok *t = emit(L, JT_INT, pos, s + pos, end - pos);
            t->i = iv;
            pos = end;
            continue;
        }
        if (name_char((unsigned char)s[pos])) {
            size_t j = pos;
            while (j < n && name_char((unsigned char)s[j])) j++;
            emit(L, JT_NAME, pos, s + pos, j - pos);
            pos = j;
            continue;
        }
        if (s[pos] == '\'' || s[pos] == '"') {
            char q = s[pos];
            size_t j = pos + 1;
            while (j < n && s[j] != q) j += (s[j] == '\\' && j + 1 < n) ? 2 : 1;
            if (j >= n) lex_fail(L, pos, "unexpected end of string literal");
            jx_tok *t = emit(L, JT_STRING, pos, NULL, 0);
            unescape(L, pos, s + pos + 1, j - pos - 1, t);
            pos = j + 1;
            continue;
        }
        size_t ol = 0;
        for (size_t k = 0; k < sizeof ops2 / sizeof ops2[0]; k++)
            if (pos + 1 < n && s[pos] == ops2[k][0] && s[pos + 1] == ops2[k][1]) { ol = 2; break; }
        if (!ol && strchr(ops1, s[pos]) && s[pos]) ol = 1;
        if (!ol) {
            char m[64];
            unsigned char c = (unsigned char)s[pos];
            if (c >= 0x20 && c < 0x7f) snprintf(m, sizeof m, "unexpected char '%c'", c);
            else snprintf(m, sizeof m, "unexpected char 0x%02x", c);
            lex_fail(L, pos, m);
        }
        char c = s[pos];
        if (ol == 1 && (c == '(' || c == '[' || c == '{')) {
            if (nb >= (int)sizeof bal) lex_fail(L, pos, "brackets nested too deeply");
            bal[nb++] = c == '(' ? ')' : c == '[' ? ']' : '}';
        } else if (ol == 1 && (c == ')' || c == ']' || c == '}')) {
            char m[64];
            if (!nb) { snprintf(m, sizeof m, "unexpected '%c'", c); lex_fail(L, pos, m); }
            if (bal[nb - 1] != c) {
                snprintf(m, sizeof m, "unexpected '%c', expected '%c'", c, bal[nb - 1]);
                lex_fail(L, pos, m);
            }
            nb--;
        }
        emit(L, JT_OP, pos, s + pos, ol);
        pos += ol;
    }
    *pp = pos;
}

/* Matches `{%[-+]?\s*NAME\s*(-%}\s*|%}` + suffix)` at i for raw/endraw; returns end or 0.
 * For `raw` the end has no trim_blocks newline (jinja2's root_raw_re); for `endraw` it does. */
static size_t match_raw_tag(const char *s, size_t n, size_t i, const char *name, int trim_nl,
                            char *sign) {
    if (i + 2 > n || s[i] != '{' || s[i + 1] != '%') return 0;
    size_t j = i + 2;
    *sign = 0;
    if (j < n && (s[j] == '-' || s[j] == '+')) *sign = s[j++];
    j += ws_run(s, n, j);
    size_t nl = strlen(name);
    if (j + nl > n || memcmp(s + j, name, nl)) return 0;
    j += nl;
    j += ws_run(s, n, j);
    if (trim_nl && j + 2 < n && s[j] == '+' && s[j + 1] == '%' && s[j + 2] == '}') return j + 3;
    if (j + 2 < n && s[j] == '-' && s[j + 1] == '%' && s[j + 2] == '}') return j + 3 + ws_run(s, n, j + 3);
    if (j + 1 < n && s[j] == '%' && s[j + 1] == '}') {
        j += 2;
        if (trim_nl && j < n && s[j] == '\n') j++;
        return j;
    }
    return 0;
}

/* Emits the data before a tag, applying `-` (rstrip) or lstrip_blocks. */
static void emit_data(lexer *L, size_t start, size_t end, char sign, int is_var, int line_starting) {
    const char *t = L->s + start;
    size_t len = end - start;
    if (sign == '-') len = rstrip_len(t, len);
    else if (sign != '+' && !is_var) {
        size_t lpos = 0;
        for (size_t i = len; i > 0; i--)
            if (t[i - 1] == '\n') { lpos = i; break; }
        if ((lpos > 0 || line_starting) && all_space(t + lpos, len - lpos)) len = lpos;
    }
    if (len) emit(L, JT_DATA, start, t, len);
}

void jx_lex(jx_arena *a, jx_err *e, const char *src, size_t len, jx_toks *out) {
    /* newline normalisation: \r\n and \r become \n; one trailing newline is dropped
     * (keep_trailing_newline=False) */
    char *s = jx_arena_alloc(a, len + 1);
    if (!s) jx_fail(e, 1, 1, "template too large");
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else s[n++] = src[i];
    }
    if (n && s[n - 1] == '\n') n--;
    s[n] = 0;
    lexer L = {.a = a, .e = e, .s = s, .n = n, .out = out, .lc_line = 1};
    out->v = NULL;
    out->n = out->cap = 0;
    size_t pos = 0;
    int line_starting = 1;
    while (pos < n) {
        size_t q = pos;
        int kind = 0;   /* '#', '%', '{' */
        for (; q + 1 < n; q++) {
            if (s[q] == '{' && (s[q + 1] == '#' || s[q + 1] == '%' || s[q + 1] == '{')) {
                kind = s[q + 1];
                break;
            }
        }
        if (!kind) {
            emit(&L, JT_DATA, pos, s + pos, n - pos);
            break;
        }
        char rsign;
        size_t raw_end = kind == '%' ? match_raw_tag(s, n, q, "raw", 0, &rsign) : 0;
        char sign = (q + 2 < n && (s[q + 2] == '-' || s[q + 2] == '+')) ? s[q + 2] : 0;
        emit_data(&L, pos, q, sign, kind == '{', line_starting);
        if (raw_end) {
            /* raw: everything up to {% endraw %} is data */
            size_t r = raw_end, body_end = 0, after = 0;
            char esign = 0;
            for (; r + 1 < n; r++) {
                if (s[r] == '{' && s[r + 1] == '%') {
                    size_t x = match_raw_tag(s, n, r, "endraw", 1, &esign);
                    if (x) { body_end = r; after = x; break; }
                }
            }
            if (!after) lex_fail(&L, q, "Missing end of raw directive");
            int ls = raw_end > 0 && s[raw_end - 1] == '\n';
            emit_data(&L, raw_end, body_end, esign, 0, ls);
            pos = after;
            line_starting = s[after - 1] == '\n';
            continue;
        }
        pos = q + 2 + (sign ? 1 : 0);
        line_starting = 0;
        if (kind == '#') {
            size_t r = pos;
            for (;;) {
                while (r + 1 < n && !(s[r] == '#' && s[r + 1] == '}')) r++;
                if (r + 1 >= n) lex_fail(&L, q, "Missing end of comment tag");
                break;
            }
            if (r > pos && s[r - 1] == '+') pos = r + 2;
            else if (r > pos && s[r - 1] == '-') {
                pos = r + 2;
                size_t w = ws_run(s, n, pos);
                if (w) line_starting = s[pos + w - 1] == '\n';
                pos += w;
            } else {
                pos = r + 2;
                if (pos < n && s[pos] == '\n') { pos++; line_starting = 1; }
            }
            continue;
        }
        emit(&L, kind == '%' ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, q, NULL, 0);
        lex_tag(&L, &pos, kind == '%', &line_starting);
    }
    emit(&L, JT_EOF, n, NULL, 0);
}
