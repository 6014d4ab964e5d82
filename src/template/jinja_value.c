/* jinja_value.c — the value model of the Jinja interpreter: arena, error unwinding, string
 * buffers, UTF-8 helpers, Python-compatible str()/repr()/==/< and json.dumps of values.
 * Does not evaluate templates (jinja_eval.c) nor know filters (jinja_builtins.c). */
#include "template/jinja.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- arena */

struct jx_chunk {
    jx_chunk *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
};

void jx_arena_init(jx_arena *a, size_t cap) {
    a->head = NULL;
    a->used_total = 0;
    a->cap = cap;
    a->refused = 0;
}

void jx_arena_free(jx_arena *a) {
    jx_chunk *c = a->head;
    while (c) {
        jx_chunk *nx = c->next;
        free(c);
        c = nx;
    }
    a->head = NULL;
    a->used_total = 0;
}

void *jx_arena_alloc(jx_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    if (a->cap && (n > a->cap || a->used_total > a->cap - n)) {
        a->refused = 1;
        return NULL;
    }
    jx_chunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t sz = n > (1u << 16) ? n : (1u << 16);
        c = malloc(sizeof *c + sz);
        if (!c) return NULL;
        c->size = sz;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    a->used_total += n;
    return p;
}

/* ---------------------------------------------------------------- errors */

void jx_fail(jx_err *e, int line, int col, const char *fmt, ...) {
    char m[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    snprintf(e->msg, sizeof e->msg, "%s:%d:%d: %s", e->path ? e->path : "template", line, col,
             m);
    longjmp(e->jb, 1);
}

void jx_fail_raw(jx_err *e, const char *msg) {
    if (msg != e->msg) snprintf(e->msg, sizeof e->msg, "%s", msg);
    longjmp(e->jb, 1);
}

static void *xalloc(jx_arena *a, jx_err *e, size_t n) {
    void *p = jx_arena_alloc(a, n);
    if (!p) jx_fail(e, 0, 0, "template needs more than %zu bytes of memory", a->cap);
    return p;
}

/* ---------------------------------------------------------------- buffers */

void jx_buf_init(jx_buf *b, jx_arena *a, jx_err *e, size_t limit) {
    b->p = NULL;
    b->n = b->cap = 0;
    b->a = a;
    b->e = e;
    b->limit = limit;
}

void jx_buf_put(jx_buf *b, const char *s, size_t n) {
    if (b->limit && (n > b->limit || b->n > b->limit - n))
        jx_fail(b->e, 0, 0, "rendered text exceeds %zu bytes", b->limit);
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 64;
        while (nc < b->n + n + 1) nc *= 2;
        char *np = xalloc(b->a, b->e, nc);
        if (b->n) memcpy(np, b->p, b->n);
        b->p = np;
        b->cap = nc;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void jx_buf_puts(jx_buf *b, const char *s) { jx_buf_put(b, s, strlen(s)); }
void jx_buf_putc(jx_buf *b, char c) { jx_buf_put(b, &c, 1); }

void jx_buf_printf(jx_buf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    jx_buf_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* ---------------------------------------------------------------- UTF-8 */

uint32_t jx_utf8_next(const char *s, size_t n, size_t *i) {
    const unsigned char *u = (const unsigned char *)s;
    size_t k = *i;
    uint32_t c = u[k];
    int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (k + (size_t)len > n) len = 1;   /* defensive: never read past the end */
    if (len == 1) { *i = k + 1; return c; }
    uint32_t cp = c & (0x7F >> len);
    for (int j = 1; j < len; j++) cp = (cp << 6) | (u[k + j] & 0x3F);
    *i = k + (size_t)len;
    return cp;
}

size_t jx_utf8_put(char *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t jx_utf8_len(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) c++;
    return c;
}

int jx_utf8_valid(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = u[i];
        if (c < 0x80) { i++; continue; }
        int len;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; }
        else return 0;
        if (i + (size_t)len > n) return 0;
        for (int j = 1; j < len; j++) {
            if ((u[i + j] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (u[i + j] & 0x3F);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        i += (size_t)len;
    }
    return 1;
}

/* Python's str.isspace(): bidirectional class WS/B/S or category Zs. */
int jx_py_isspace(uint32_t c) {
    return (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Simple case mapping for the scripts chat templates plausibly upper/lower: ASCII, Latin-1,
 * Latin Extended-A, Greek, Cyrillic. Python's full mapping (e.g. 'ß'.upper() == 'SS') is
 * wider; see the README's limits. */
uint32_t jx_py_upper(uint32_t c) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if (c < 0x80) return c;
    if (c == 0xB5) return 0x39C;
    if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
    if (c == 0xFF) return 0x178;
    if (c >= 0x100 && c <= 0x17F) {
        if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c & 1) ? c : c - 1;
        if (c == 0x131) return 'I';
        if (c == 0x17F) return 'S';
        if (c == 0x138 || c == 0x149) return c;
        return (c & 1) ? c - 1 : c;
    }
    if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
    if (c == 0x3C2) return 0x3A3;
    if (c == 0x3AC) return 0x386;
    if (c >= 0x3AD && c <= 0x3AF) return c - 37;
    if (c == 0x3CC) return 0x38C;
    if (c == 0x3CD || c == 0x3CE) return c - 63;
    if (c >= 0x430 && c <= 0x44F) return c - 32;
    if (c >= 0x450 && c <= 0x45F) return c - 80;
    return c;
}

uint32_t jx_py_lower(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c < 0x80) return c;
    if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
    if (c == 0x178) return 0xFF;
    if (c >= 0x100 && c <= 0x17F) {
        if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c & 1) ? c + 1 : c;
        if (c == 0x130 || c == 0x131 || c == 0x138 || c == 0x149 || c == 0x17F) return c;
        return (c & 1) ? c : c + 1;
    }
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
    if (c == 0x386) return 0x3AC;
    if (c >= 0x388 && c <= 0x38A) return c + 37;
    if (c == 0x38C) return 0x3CC;
    if (c == 0x38E || c == 0x38F) return c + 63;
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    return c;
}

/* Python str.isprintable() approximated: controls, separators other than ' ', format chars
 * and private/unassigned-looking ranges are escaped in repr(). */
static int py_isprintable(uint32_t c) {
    if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return 0;
    if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F)) return 0;
    if ((c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF) return 0;
    if ((c >= 0xD800 && c <= 0xF8FF) || (c >= 0xFFF0 && c <= 0xFFFB) || c == 0xFFFE ||
        c == 0xFFFF)
        return 0;
    if (c >= 0xE0000) return 0;
    return 1;
}

/* ---------------------------------------------------------------- values */

jv jx_undef_v = {.k = JV_UNDEF, .u.hint = NULL};
jv jx_none_v = {.k = JV_NONE};
jv jx_true_v = {.k = JV_BOOL, .u.b = 1};
jv jx_false_v = {.k = JV_BOOL, .u.b = 0};

jv *jv_new(jx_arena *a, jx_err *e, jv_kind k) {
    jv *v = xalloc(a, e, sizeof *v);
    memset(v, 0, sizeof *v);
    v->k = k;
    return v;
}

jv *jv_int(jx_arena *a, jx_err *e, int64_t i) {
    jv *v = jv_new(a, e, JV_INT);
    v->u.i = i;
    return v;
}

jv *jv_float(jx_arena *a, jx_err *e, double f) {
    jv *v = jv_new(a, e, JV_FLOAT);
    v->u.f = f;
    return v;
}

jv *jv_bool(int b) { return b ? &jx_true_v : &jx_false_v; }

jv *jv_strn(jx_arena *a, jx_err *e, const char *s, size_t n) {
    char *p = xalloc(a, e, n + 1);
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return jv_str_ref(a, e, p, n);
}

jv *jv_str_ref(jx_arena *a, jx_err *e, const char *s, size_t n) {
    jv *v = jv_new(a, e, JV_STR);
    v->u.str.s = s;
    v->u.str.n = n;
    return v;
}

jv *jv_undef(jx_arena *a, jx_err *e, const char *hint) {
    jv *v = jv_new(a, e, JV_UNDEF);
    v->u.hint = hint;
    return v;
}

jv *jv_list(jx_arena *a, jx_err *e, size_t n, int sub) {
    jv *v = jv_new(a, e, JV_LIST);
    if (n > ((size_t)-1) / sizeof(jv *) / 2) jx_fail(e, 0, 0, "list too large");
    v->u.list.v = n ? xalloc(a, e, n * sizeof(jv *)) : NULL;
    v->u.list.n = n;
    v->u.list.sub = sub;
    return v;
}

jv *jv_dict(jx_arena *a, jx_err *e, jv_kind k) {
    jv *v = jv_new(a, e, k);
    v->u.dict = xalloc(a, e, sizeof(jx_dict));
    memset(v->u.dict, 0, sizeof(jx_dict));
    return v;
}

static int jv_str_eq(const jv *a, const char *s, size_t n) {
    return a->k == JV_STR && a->u.str.n == n && !memcmp(a->u.str.s, s, n);
}

jv *jv_dict_get(const jv *d, const jv *key) {
    const jx_dict *x = d->u.dict;
    for (size_t i = 0; i < x->n; i++)
        if (jv_eq(x->keys[i], key)) return x->vals[i];
    return NULL;
}

jv *jv_dict_gets(const jv *d, const char *key) {
    const jx_dict *x = d->u.dict;
    size_t n = strlen(key);
    for (size_t i = 0; i < x->n; i++)
        if (jv_str_eq(x->keys[i], key, n)) return x->vals[i];
    return NULL;
}

/* Python dict semantics: an existing key keeps its position, its value is replaced. */
void jv_dict_set(jx_arena *a, jx_err *e, jv *d, jv *key, jv *val) {
    jx_dict *x = d->u.dict;
    for (size_t i = 0; i < x->n; i++)
        if (jv_eq(x->keys[i], key)) { x->vals[i] = val; return; }
    if (x->n == x->cap) {
        size_t nc = x->cap ? x->cap * 2 : 8;
        jv **nk = xalloc(a, e, nc * sizeof(jv *)), **nv = xalloc(a, e, nc * sizeof(jv *));
        if (x->n) {
            memcpy(nk, x->keys, x->n * sizeof(jv *));
            memcpy(nv, x->vals, x->n * sizeof(jv *));
        }
        x->keys = nk;
        x->vals = nv;
        x->cap = nc;
    }
    x->keys[x->n] = key;
    x->vals[x->n] = val;
    x->n++;
}

int jv_truthy(const jv *v) {
    switch (v->k) {
    case JV_UNDEF: case JV_NONE: return 0;
    case JV_LIST: return v->u.list.sub == JL_GEN || v->u.list.sub == JL_ITER || v->u.list.n != 0;
    case JV_BOOL: return v->u.b;
    case JV_INT: return v->u.i != 0;
    case JV_FLOAT: return v->u.f != 0.0;
    case JV_STR: return v->u.str.n != 0;
    case JV_DICT: return v->u.dict->n != 0;
    default: return 1;
    }
}

static int is_num(const jv *v) { return v->k == JV_INT || v->k == JV_FLOAT || v->k == JV_BOOL; }
static double num_f(const jv *v) {
    return v->k == JV_FLOAT ? v->u.f : v->k == JV_INT ? (double)v->u.i : (double)v->u.b;
}
static int64_t num_i(const jv *v) { return v->k == JV_INT ? v->u.i : v->u.b; }

/* Values nest as deep as a template loop makes them ({% set ns.x = [ns.x] %}); Python raises
 * RecursionError around 1000 levels, we stop there too instead of overflowing the C stack. */
#define JV_MAX_NEST 1000

static int eq_depth(const jv *a, const jv *b, int depth);
int jv_eq(const jv *a, const jv *b) { return eq_depth(a, b, 0); }

static int eq_depth(const jv *a, const jv *b, int depth) {
    if (depth > JV_MAX_NEST) return 0;
    if (a == b) return a->k != JV_FLOAT || a->u.f == a->u.f;
    if (is_num(a) && is_num(b)) {
        if (a->k != JV_FLOAT && b->k != JV_FLOAT) return num_i(a) == num_i(b);
        return num_f(a) == num_f(b);
    }
    if (a->k != b->k) return 0;
    switch (a->k) {
    case JV_UNDEF: case JV_NONE: return 1;
    case JV_STR: return a->u.str.n == b->u.str.n && !memcmp(a->u.str.s, b->u.str.s, a->u.str.n);
    case JV_LIST:
        /* generators and iterators compare by identity; list != tuple */
        if (a->u.list.sub != b->u.list.sub || a->u.list.n != b->u.list.n) return 0;
        if (a->u.list.sub == JL_GEN || a->u.list.sub == JL_ITER) return 0;
        for (size_t i = 0; i < a->u.list.n; i++)
            if (!eq_depth(a->u.list.v[i], b->u.list.v[i], depth + 1)) return 0;
        return 1;
    case JV_DICT: {
        if (a->u.dict->n != b->u.dict->n) return 0;
        for (size_t i = 0; i < a->u.dict->n; i++) {
            jv *o = jv_dict_get(b, a->u.dict->keys[i]);
            if (!o || !eq_depth(a->u.dict->vals[i], o, depth + 1)) return 0;
        }
        return 1;
    }
    case JV_METHOD:
        return a->u.method.self == b->u.method.self && !strcmp(a->u.method.name, b->u.method.name);
    default: return 0;   /* identity only */
    }
}

const char *jv_type_name(const jv *v) {
    switch (v->k) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST:
        switch (v->u.list.sub) {
        case JL_TUPLE: return "tuple";
        case JL_GEN: return "generator";
        case JL_KEYS: return "dict_keys";
        case JL_VALUES: return "dict_values";
        case JL_ITEMS: return "dict_items";
        case JL_RANGE: return "range";
        case JL_ITER: return v->u.list.gname ? v->u.list.gname : "iterator";
        default: return "list";
        }
    case JV_DICT: return "dict";
    case JV_NS: return "Namespace";
    case JV_MACRO: return "Macro";
    case JV_FUNC: return "function";
    case JV_METHOD: return "builtin_function_or_method";
    case JV_LOOP: return "LoopContext";
    }
    return "object";
}

static int cmp_depth(jx_err *e, int line, int col, const jv *a, const jv *b, int depth);
int jv_cmp(jx_err *e, int line, int col, const jv *a, const jv *b) { return cmp_depth(e, line, col, a, b, 0); }

static int cmp_depth(jx_err *e, int line, int col, const jv *a, const jv *b, int depth) {
    if (depth > JV_MAX_NEST) jx_fail(e, line, col, "maximum recursion depth exceeded in comparison");
    if (is_num(a) && is_num(b)) {
        if (a->k != JV_FLOAT && b->k != JV_FLOAT) {
            int64_t x = num_i(a), y = num_i(b);
            return x < y ? -1 : x > y;
        }
        double x = num_f(a), y = num_f(b);
        return x < y ? -1 : x > y;   /* NaN compares as equal here; Python's < is false too */
    }
    if (a->k == JV_STR && b->k == JV_STR) {
        /* UTF-8 byte order equals code point order */
        size_t n = a->u.str.n < b->u.str.n ? a->u.str.n : b->u.str.n;
        int r = memcmp(a->u.str.s, b->u.str.s, n);
        if (r) return r < 0 ? -1 : 1;
        return a->u.str.n < b->u.str.n ? -1 : a->u.str.n > b->u.str.n;
    }
    if (a->k == JV_LIST && b->k == JV_LIST && a->u.list.sub == b->u.list.sub &&
        (a->u.list.sub == JL_LIST || a->u.list.sub == JL_TUPLE)) {
        size_t n = a->u.list.n < b->u.list.n ? a->u.list.n : b->u.list.n;
        for (size_t i = 0; i < n; i++) {
            if (eq_depth(a->u.list.v[i], b->u.list.v[i], depth + 1)) continue;
            return cmp_depth(e, line, col, a->u.list.v[i], b->u.list.v[i], depth + 1);
        }
        return a->u.list.n < b->u.list.n ? -1 : a->u.list.n > b->u.list.n;
    }
    if (a->k == JV_UNDEF || b->k == JV_UNDEF) {
        const jv *u = a->k == JV_UNDEF ? a : b;
        jx_fail(e, line, col, "%s", u->u.hint ? u->u.hint : "value is undefined");
    }
    jx_fail(e, line, col, "'<' not supported between instances of '%s' and '%s'",
            jv_type_name(a), jv_type_name(b));
}

/* ---------------------------------------------------------------- str / repr */

/* float.__repr__: shortest round-trip digits; fixed notation for 1e-4 <= |x| < 1e16. */
void jv_float_repr(char *out, size_t cap, double f) {
    if (isnan(f)) { snprintf(out, cap, "nan"); return; }
    if (isinf(f)) { snprintf(out, cap, f < 0 ? "-inf" : "inf"); return; }
    char tmp[64];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp = [-]d.ddde[+-]xx */
    char digits[32];
    int nd = 0, neg = 0;
    const char *p = tmp;
    if (*p == '-') { neg = 1; p++; }
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    int exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    char *o = out;
    size_t left = cap;
#define EMIT(...) do { int w_ = snprintf(o, left, __VA_ARGS__); if (w_ < 0 || (size_t)w_ >= left) return; o += w_; left -= (size_t)w_; } while (0)
    if (neg) EMIT("-");
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 < 0) {
            EMIT("0.");
            for (int i = 0; i < -exp10 - 1; i++) EMIT("0");
            EMIT("%s", digits);
        } else if (nd <= exp10 + 1) {
            EMIT("%s", digits);
            for (int i = nd; i < exp10 + 1; i++) EMIT("0");
            EMIT(".0");
        } else {
            EMIT("%.*s.%s", exp10 + 1, digits, digits + exp10 + 1);
        }
    } else {
        if (nd == 1) EMIT("%c", digits[0]);
        else EMIT("%c.%s", digits[0], digits + 1);
        EMIT("e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    }
#undef EMIT
}

static void write_str_repr(jx_buf *b, const char *s, size_t n) {
    int has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    jx_buf_putc(b, q);
    size_t i = 0;
    while (i < n) {
        size_t st = i;
        uint32_t c = jx_utf8_next(s, n, &i);
        if (c == (uint32_t)q || c == '\\') { jx_buf_putc(b, '\\'); jx_buf_putc(b, (char)c); }
        else if (c == '\n') jx_buf_puts(b, "\\n");
        else if (c == '\r') jx_buf_puts(b, "\\r");
        else if (c == '\t') jx_buf_puts(b, "\\t");
        else if (!py_isprintable(c)) {
            if (c < 0x100) jx_buf_printf(b, "\\x%02x", c);
            else if (c < 0x10000) jx_buf_printf(b, "\\u%04x", c);
            else jx_buf_printf(b, "\\U%08x", c);
        } else jx_buf_put(b, s + st, i - st);
    }
    jx_buf_putc(b, q);
}

/* repr() with CPython's guard against self-reference ({% set ns.x = ns %} prints
 * <Namespace {'x': <Namespace {...}>}>) and a nesting limit. `open` lists the dicts being
 * printed. */
typedef struct open_dicts {
    const struct open_dicts *up;
    const jx_dict *d;
} open_dicts;

static void repr_rec(jx_buf *b, const jv *v, const open_dicts *open, int depth);

static void write_dict_body(jx_buf *b, const jx_dict *d, const open_dicts *open, int depth) {
    for (const open_dicts *o = open; o; o = o->up)
        if (o->d == d) { jx_buf_puts(b, "{...}"); return; }
    open_dicts me = {open, d};
    jx_buf_putc(b, '{');
    for (size_t i = 0; i < d->n; i++) {
        if (i) jx_buf_puts(b, ", ");
        repr_rec(b, d->keys[i], &me, depth + 1);
        jx_buf_puts(b, ": ");
        repr_rec(b, d->vals[i], &me, depth + 1);
    }
    jx_buf_putc(b, '}');
}

void jv_write_repr(jx_buf *b, const jv *v) { repr_rec(b, v, NULL, 0); }

static void repr_rec(jx_buf *b, const jv *v, const open_dicts *open, int depth) {
    char tmp[64];
    if (depth > JV_MAX_NEST) jx_fail(b->e, 0, 0, "maximum recursion depth exceeded while getting the repr of an object");
    switch (v->k) {
    case JV_UNDEF: jx_buf_puts(b, "Undefined"); return;
    case JV_NONE: jx_buf_puts(b, "None"); return;
    case JV_BOOL: jx_buf_puts(b, v->u.b ? "True" : "False"); return;
    case JV_INT: jx_buf_printf(b, "%lld", (long long)v->u.i); return;
    case JV_FLOAT: jv_float_repr(tmp, sizeof tmp, v->u.f); jx_buf_puts(b, tmp); return;
    case JV_STR: write_str_repr(b, v->u.str.s, v->u.str.n); return;
    case JV_LIST: {
        int sub = v->u.list.sub;
        /* Python prints an address for these; ours is fixed (never byte-comparable anyway) */
        if (sub == JL_GEN) { jx_buf_printf(b, "<generator object %s at 0x7f0000000000>", v->u.list.gname); return; }
        if (sub == JL_ITER) { jx_buf_printf(b, "<%s object at 0x7f0000000000>", v->u.list.gname); return; }
        if (sub == JL_RANGE) {
            if (v->u.list.rst == 1) jx_buf_printf(b, "range(%lld, %lld)", (long long)v->u.list.rs, (long long)v->u.list.re);
            else jx_buf_printf(b, "range(%lld, %lld, %lld)", (long long)v->u.list.rs, (long long)v->u.list.re, (long long)v->u.list.rst);
            return;
        }
        if (sub == JL_KEYS) jx_buf_puts(b, "dict_keys(");
        if (sub == JL_VALUES) jx_buf_puts(b, "dict_values(");
        if (sub == JL_ITEMS) jx_buf_puts(b, "dict_items(");
        jx_buf_putc(b, sub == JL_TUPLE ? '(' : '[');
        for (size_t i = 0; i < v->u.list.n; i++) {
            if (i) jx_buf_puts(b, ", ");
            repr_rec(b, v->u.list.v[i], open, depth + 1);
        }
        if (sub == JL_TUPLE && v->u.list.n == 1) jx_buf_putc(b, ',');
        jx_buf_putc(b, sub == JL_TUPLE ? ')' : ']');
        if (sub >= JL_KEYS && sub <= JL_ITEMS) jx_buf_putc(b, ')');
        return;
    }
    case JV_DICT:
        write_dict_body(b, v->u.dict, open, depth);
        return;
    case JV_NS:
        jx_buf_puts(b, "<Namespace ");
        write_dict_body(b, v->u.dict, open, depth);
        jx_buf_puts(b, ">");
        return;
    case JV_MACRO: jx_buf_printf(b, "<Macro '%s'>", v->u.macro.def->s); return;
    case JV_FUNC: jx_buf_puts(b, "<function>"); return;
    case JV_METHOD: jx_buf_printf(b, "<built-in method %s>", v->u.method.name); return;
    case JV_LOOP: jx_buf_puts(b, "<LoopContext>"); return;
    }
}

void jv_write_str(jx_buf *b, const jv *v) {
    if (v->k == JV_STR) jx_buf_put(b, v->u.str.s, v->u.str.n);
    else if (v->k == JV_UNDEF) return;
    else jv_write_repr(b, v);
}

/* ---------------------------------------------------------------- JSON */

static void write_json_str(jx_buf *b, const char *s, size_t n) {
    jx_buf_putc(b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[8];
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        else if (c < 0x20) { snprintf(u, sizeof u, "\\u%04x", c); esc = u; }
        if (esc) {
            jx_buf_put(b, s + run, i - run);
            jx_buf_puts(b, esc);
            run = i + 1;
        }
    }
    jx_buf_put(b, s + run, n - run);
    jx_buf_putc(b, '"');
}

static void json_newline(jx_buf *b, const jx_json_opts *o, int depth) {
    jx_buf_putc(b, '\n');
    for (int i = 0; i < depth; i++) jx_buf_puts(b, o->indent);
}

void jv_write_json(jx_buf *b, const jv *v, const jx_json_opts *o, int depth) {
    char tmp[64];
    if (depth > 500) jx_fail(b->e, o->line, o->col, "tojson: value nested too deeply");
    switch (v->k) {
    case JV_NONE: jx_buf_puts(b, "null"); return;
    case JV_BOOL: jx_buf_puts(b, v->u.b ? "true" : "false"); return;
    case JV_INT: jx_buf_printf(b, "%lld", (long long)v->u.i); return;
    case JV_FLOAT:
        if (isnan(v->u.f)) jx_buf_puts(b, "NaN");
        else if (isinf(v->u.f)) jx_buf_puts(b, v->u.f < 0 ? "-Infinity" : "Infinity");
        else { jv_float_repr(tmp, sizeof tmp, v->u.f); jx_buf_puts(b, tmp); }
        return;
    case JV_STR: write_json_str(b, v->u.str.s, v->u.str.n); return;
    case JV_LIST:
        if (v->u.list.sub != JL_LIST && v->u.list.sub != JL_TUPLE)
            jx_fail(b->e, o->line, o->col, "Object of type %s is not JSON serializable", jv_type_name(v));
        if (!v->u.list.n) { jx_buf_puts(b, "[]"); return; }
        jx_buf_putc(b, '[');
        for (size_t i = 0; i < v->u.list.n; i++) {
            if (i) jx_buf_puts(b, o->item_sep);
            if (o->indent) json_newline(b, o, depth + 1);
            jv_write_json(b, v->u.list.v[i], o, depth + 1);
        }
        if (o->indent) json_newline(b, o, depth);
        jx_buf_putc(b, ']');
        return;
    case JV_DICT: {
        const jx_dict *d = v->u.dict;
        if (!d->n) { jx_buf_puts(b, "{}"); return; }
        size_t *ord = jx_arena_alloc(b->a, d->n * sizeof(size_t));
        if (!ord) jx_fail(b->e, o->line, o->col, "tojson: out of memory");
        for (size_t i = 0; i < d->n; i++) ord[i] = i;
        if (o->sort_keys) {
            /* insertion sort keeps it stable; keys must be mutually orderable */
            for (size_t i = 1; i < d->n; i++) {
                size_t x = ord[i], j = i;
                while (j > 0 && jv_cmp(b->e, o->line, o->col, d->keys[x], d->keys[ord[j - 1]]) < 0) {
                    ord[j] = ord[j - 1];
                    j--;
                }
                ord[j] = x;
            }
        }
        jx_buf_putc(b, '{');
        for (size_t k = 0; k < d->n; k++) {
            size_t i = ord[k];
            if (k) jx_buf_puts(b, o->item_sep);
            if (o->indent) json_newline(b, o, depth + 1);
            const jv *key = d->keys[i];
            /* json.dumps converts scalar keys to strings */
            if (key->k == JV_STR) write_json_str(b, key->u.str.s, key->u.str.n);
            else if (key->k == JV_INT || key->k == JV_BOOL || key->k == JV_NONE ||
                     key->k == JV_FLOAT) {
                jx_buf_putc(b, '"');
                jv_write_json(b, key, o, depth + 1);
                jx_buf_putc(b, '"');
            } else
                jx_fail(b->e, o->line, o->col, "keys must be str, int, float, bool or None, not %s",
                        jv_type_name(key));
            jx_buf_puts(b, o->key_sep);
            jv_write_json(b, d->vals[i], o, depth + 1);
        }
        if (o->indent) json_newline(b, o, depth);
        jx_buf_putc(b, '}');
        return;
    }
    default:
        jx_fail(b->e, o->line, o->col, "Object of type %s is not JSON serializable",
                jv_type_name(v));
    }
}

jv *jv_from_json(jx_arena *a, jx_err *e, const void *jp) {
    const json_t *j = jp;
    switch (json_typeof(j)) {
    case JSON_NULL: return &jx_none_v;
    case JSON_TRUE: return &jx_true_v;
    case JSON_FALSE: return &jx_false_v;
    case JSON_INTEGER: return jv_int(a, e, (int64_t)json_integer_value(j));
    case JSON_REAL: return jv_float(a, e, json_real_value(j));
    case JSON_STRING: return jv_strn(a, e, json_string_value(j), json_string_length(j));
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        jv *l = jv_list(a, e, n, 0);
        for (size_t i = 0; i < n; i++) l->u.list.v[i] = jv_from_json(a, e, json_array_get(j, i));
        return l;
    }
    case JSON_OBJECT: {
        jv *d = jv_dict(a, e, JV_DICT);
        const char *k;
        size_t klen;
        json_t *val;
        void *tmp;
        /* jansson >= 2.14 iterates objects in insertion order, like Python dicts */
        size_t n = json_object_size(j), i = 0;
        jx_dict *x = d->u.dict;
        x->cap = n ? n : 1;
        x->keys = xalloc(a, e, x->cap * sizeof(jv *));
        x->vals = xalloc(a, e, x->cap * sizeof(jv *));
        /* jansson iterates objects in insertion order, like Python dicts; its keys are
         * already unique, so append without the linear duplicate check */
        json_object_keylen_foreach_safe((json_t *)j, tmp, k, klen, val) {
            if (i == n) break;
            x->keys[i] = jv_strn(a, e, k, klen);
            x->vals[i] = jv_from_json(a, e, val);
            x->n = ++i;
        }
        return d;
    }
    }
    return &jx_none_v;
}
