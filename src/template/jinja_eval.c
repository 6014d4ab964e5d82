/* jinja_eval.c — the Jinja evaluator: walks the AST with jinja2's semantics (scopes per loop
 * iteration and per macro call, Undefined that prints as '' but fails on use, sandboxed
 * attribute/item lookup, Python operators) and writes the rendered text.
 * Filters, tests, methods and global functions live in jinja_builtins.c. */
#include "template/jinja.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct scope scope;
struct scope {
    scope *parent;
    int captured;   /* a macro closes over it, so a loop may not recycle it */
    const char **names;
    jv **vals;
    size_t n, cap;
};

typedef struct {
    jv *items;   /* JV_LIST */
    size_t i;
} jx_loop;

enum { FLOW_NONE, FLOW_BREAK, FLOW_CONTINUE };

struct jx_ctx {
    jx_arena *a;
    jx_err *e;
    const jx_limits *lim;
    jx_buf *out;
    uint64_t steps;
    int depth;
    int flow;
};

jx_arena *jx_ctx_arena(jx_ctx *c) { return c->a; }
jx_err *jx_ctx_err(jx_ctx *c) { return c->e; }

void jx_limits_default(jx_limits *l) {
    l->max_output = (size_t)256 << 20;
    l->max_memory = (size_t)1 << 30;
    l->max_depth = 200;
    l->max_steps = 200000000ull;
}

void jx_rt_fail(jx_ctx *c, const jnode *at, const char *fmt, ...) {
    char m[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    jx_fail(c->e, at ? at->line : 0, at ? at->col : 0, "%s", m);
}

void jx_raise(jx_ctx *c, const jnode *at, const char *msg, size_t n) {
    c->e->is_raise = 1;
    jx_fail(c->e, at ? at->line : 0, at ? at->col : 0, "raise_exception: %.*s",
            (int)(n > 500 ? 500 : n), msg);
}

void jx_step(jx_ctx *c, const jnode *at) {
    if (++c->steps > c->lim->max_steps)
        jx_rt_fail(c, at, "template exceeded %llu evaluation steps", (unsigned long long)c->lim->max_steps);
}

static void *calloc_a(jx_ctx *c, size_t n) {
    void *p = jx_arena_alloc(c->a, n);
    if (!p) jx_rt_fail(c, NULL, "template needs more than %zu bytes of memory", c->a->cap);
    memset(p, 0, n);
    return p;
}

/* ---------------------------------------------------------------- scopes */

static scope *scope_new(jx_ctx *c, scope *parent) {
    scope *s = calloc_a(c, sizeof *s);
    s->parent = parent;
    return s;
}

static void scope_set(jx_ctx *c, scope *s, const char *name, jv *v) {
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->names[i], name)) { s->vals[i] = v; return; }
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 8;
        const char **nn = calloc_a(c, nc * sizeof *nn);
        jv **nv = calloc_a(c, nc * sizeof *nv);
        if (s->n) {
            memcpy(nn, s->names, s->n * sizeof *nn);
            memcpy(nv, s->vals, s->n * sizeof *nv);
        }
        s->names = nn;
        s->vals = nv;
        s->cap = nc;
    }
    s->names[s->n] = name;
    s->vals[s->n] = v;
    s->n++;
}

/* Binds the frame's start-as-Undefined names (see jnode.undef) in its fresh scope. */
static void frame_enter(jx_ctx *c, scope *s, const jnode *frame) {
    for (size_t i = 0; i < frame->nundef; i++) {
        char *h = calloc_a(c, strlen(frame->undef[i]) + 20);
        sprintf(h, "'%s' is undefined", frame->undef[i]);
        scope_set(c, s, frame->undef[i], jv_undef(c->a, c->e, h));
    }
}

static jv *lookup(jx_ctx *c, scope *s, const jnode *at, const char *name) {
    for (; s; s = s->parent)
        for (size_t i = s->n; i > 0; i--)
            if (!strcmp(s->names[i - 1], name)) return s->vals[i - 1];
    int g = jx_global_id(name);
    if (g >= 0) {
        jv *f = jv_new(c->a, c->e, JV_FUNC);
        f->u.func = g;
        return f;
    }
    (void)at;
    char *h = calloc_a(c, strlen(name) + 20);
    sprintf(h, "'%s' is undefined", name);
    return jv_undef(c->a, c->e, h);
}

/* ---------------------------------------------------------------- helpers */

jv *jx_to_str(jx_ctx *c, const jv *v) {
    if (v->k == JV_STR) return (jv *)v;
    jx_buf b;
    jx_buf_init(&b, c->a, c->e, c->lim->max_output);
    jv_write_str(&b, v);
    return jv_str_ref(c->a, c->e, b.p ? b.p : "", b.n);
}

_Noreturn static void undef_fail(jx_ctx *c, const jnode *at, const jv *u) {
    jx_rt_fail(c, at, "%s", u->u.hint ? u->u.hint : "value is undefined");
}

static const char *obj_type_repr(const jv *v) {
    switch (v->k) {
    case JV_NONE: return "None";
    case JV_DICT: return "dict object";
    case JV_LIST: return v->u.list.sub == JL_TUPLE ? "tuple object" : "list object";
    case JV_STR: return "str object";
    case JV_INT: return "int object";
    case JV_FLOAT: return "float object";
    case JV_BOOL: return "bool object";
    default: return "object";
    }
}

static jv *missing_attr(jx_ctx *c, const jv *obj, const char *name, int is_index, int64_t idx) {
    char *h = calloc_a(c, strlen(name) + 80);
    if (is_index) sprintf(h, "%s has no element %lld", obj_type_repr(obj), (long long)idx);
    else sprintf(h, "'%s' has no attribute '%s'", obj_type_repr(obj), name);
    return jv_undef(c->a, c->e, h);
}

static jv *method(jx_ctx *c, jv *self, const char *name) {
    jv *m = jv_new(c->a, c->e, JV_METHOD);
    m->u.method.self = self;
    m->u.method.name = name;
    return m;
}

size_t jx_loop_index(const jv *loopv) { return ((const jx_loop *)loopv->u.loop)->i; }

static jv *loop_attr(jx_ctx *c, jv *obj, const char *name) {
    jx_loop *l = obj->u.loop;
    size_t n = l->items->u.list.n, i = l->i;
    if (!strcmp(name, "index")) return jv_int(c->a, c->e, (int64_t)i + 1);
    if (!strcmp(name, "index0")) return jv_int(c->a, c->e, (int64_t)i);
    if (!strcmp(name, "revindex")) return jv_int(c->a, c->e, (int64_t)(n - i));
    if (!strcmp(name, "revindex0")) return jv_int(c->a, c->e, (int64_t)(n - i - 1));
    if (!strcmp(name, "first")) return jv_bool(i == 0);
    if (!strcmp(name, "last")) return jv_bool(i + 1 == n);
    if (!strcmp(name, "length")) return jv_int(c->a, c->e, (int64_t)n);
    if (!strcmp(name, "depth")) return jv_int(c->a, c->e, 1);
    if (!strcmp(name, "depth0")) return jv_int(c->a, c->e, 0);
    if (!strcmp(name, "previtem"))
        return i > 0 ? l->items->u.list.v[i - 1] : jv_undef(c->a, c->e, "there is no previous item");
    if (!strcmp(name, "nextitem"))
        return i + 1 < n ? l->items->u.list.v[i + 1] : jv_undef(c->a, c->e, "there is no next item");
    if (!strcmp(name, "cycle")) return method(c, obj, "cycle");
    return missing_attr(c, obj, name, 0, 0);
}

jv *jx_getattr(jx_ctx *c, const jnode *at, jv *obj, const char *name) {
    switch (obj->k) {
    case JV_UNDEF: undef_fail(c, at, obj);
    case JV_LOOP: return loop_attr(c, obj, name);
    case JV_NS: {
        jv *v = jv_dict_gets(obj, name);
        return v ? v : missing_attr(c, obj, name, 0, 0);
    }
    case JV_DICT:
        if (jx_has_method(obj, name)) return method(c, obj, name);
        {
            jv *v = jv_dict_gets(obj, name);
            return v ? v : missing_attr(c, obj, name, 0, 0);
        }
    default:
        if (jx_has_method(obj, name)) return method(c, obj, name);
        return missing_attr(c, obj, name, 0, 0);
    }
}

static int64_t as_index(const jv *k, int *ok) {
    *ok = 1;
    if (k->k == JV_INT) return k->u.i;
    if (k->k == JV_BOOL) return k->u.b;
    *ok = 0;
    return 0;
}

/* Byte offset of the idx-th code point of s (idx in [0, len]). */
static size_t cp_offset(const char *s, size_t n, size_t idx) {
    size_t i = 0;
    while (idx > 0 && i < n) {
        jx_utf8_next(s, n, &i);
        idx--;
    }
    return i;
}

jv *jx_getitem(jx_ctx *c, const jnode *at, jv *obj, jv *key) {
    switch (obj->k) {
    case JV_UNDEF: undef_fail(c, at, obj);
    case JV_DICT: {
        jv *v = jv_dict_get(obj, key);
        if (v) return v;
        break;
    }
    case JV_LIST: {
        int ok;
        int64_t i = as_index(key, &ok);
        if (!ok) break;
        if (obj->u.list.sub != JL_LIST && obj->u.list.sub != JL_TUPLE && obj->u.list.sub != JL_RANGE)
            return jv_undef(c->a, c->e, "object is not subscriptable");
        int64_t n = (int64_t)obj->u.list.n;
        if (i < 0) i += n;
        if (i < 0 || i >= n) return missing_attr(c, obj, "", 1, as_index(key, &ok));
        return obj->u.list.v[i];
    }
    case JV_STR: {
        int ok;
        int64_t i = as_index(key, &ok);
        if (!ok) break;
        int64_t n = (int64_t)jx_utf8_len(obj->u.str.s, obj->u.str.n);
        if (i < 0) i += n;
        if (i < 0 || i >= n) return missing_attr(c, obj, "", 1, as_index(key, &ok));
        size_t off = cp_offset(obj->u.str.s, obj->u.str.n, (size_t)i), e = off;
        jx_utf8_next(obj->u.str.s, obj->u.str.n, &e);
        return jv_str_ref(c->a, c->e, obj->u.str.s + off, e - off);
    }
    case JV_LOOP: case JV_NS:
        if (key->k == JV_STR) return jx_getattr(c, at, obj, key->u.str.s);
        break;
    default: break;
    }
    /* jinja2 falls back to getattr for string keys (e.g. d['items'] when absent) */
    if (key->k == JV_STR && obj->k != JV_DICT && jx_has_method(obj, key->u.str.s))
        return method(c, obj, key->u.str.s);
    if (key->k == JV_STR && obj->k == JV_DICT && jx_has_method(obj, key->u.str.s))
        return method(c, obj, key->u.str.s);
    if (key->k == JV_STR) return missing_attr(c, obj, key->u.str.s, 0, 0);
    if (key->k == JV_INT) return missing_attr(c, obj, "", 1, key->u.i);
    return jv_undef(c->a, c->e, "no such element");
}

/* Python slice index normalisation. */
static int64_t slice_bound(int64_t v, int64_t n, int step_neg, int is_start) {
    (void)is_start;
    if (v < 0) {
        v += n;
        if (v < 0) v = step_neg ? -1 : 0;
    } else if (v >= n) v = step_neg ? n - 1 : n;
    return v;
}

static jv *do_slice(jx_ctx *c, const jnode *at, jv *obj, jv *start, jv *stop, jv *step) {
    int64_t st = 1;
    int ok;
    if (step && step->k != JV_NONE) {
        st = as_index(step, &ok);
        if (!ok) jx_rt_fail(c, at, "slice indices must be integers or None");
        if (st == 0) jx_rt_fail(c, at, "slice step cannot be zero");
    }
    /* jinja2 compiles slices to a plain Python subscript (no sandbox getitem), so slicing
     * anything but a str / list / tuple / range raises */
    int64_t n;
    if (obj->k == JV_LIST && (obj->u.list.sub == JL_LIST || obj->u.list.sub == JL_TUPLE || obj->u.list.sub == JL_RANGE))
        n = (int64_t)obj->u.list.n;
    else if (obj->k == JV_STR) n = (int64_t)jx_utf8_len(obj->u.str.s, obj->u.str.n);
    else if (obj->k == JV_UNDEF) undef_fail(c, at, obj);
    else if (obj->k == JV_DICT) jx_rt_fail(c, at, "unhashable type: 'slice'");
    else jx_rt_fail(c, at, "'%s' object is not subscriptable", jv_type_name(obj));
    int64_t lo, hi;
    if (!start || start->k == JV_NONE) lo = st < 0 ? n - 1 : 0;
    else {
        lo = as_index(start, &ok);
        if (!ok) jx_rt_fail(c, at, "slice indices must be integers or None");
        lo = slice_bound(lo, n, st < 0, 1);
    }
    if (!stop || stop->k == JV_NONE) hi = st < 0 ? -1 : n;
    else {
        hi = as_index(stop, &ok);
        if (!ok) jx_rt_fail(c, at, "slice indices must be integers or None");
        hi = slice_bound(hi, n, st < 0, 0);
    }
    size_t cnt = 0;
    if (st > 0 && hi > lo) cnt = (size_t)((hi - lo + st - 1) / st);
    if (st < 0 && lo > hi) cnt = (size_t)((lo - hi + (-st) - 1) / (-st));
    if (obj->k == JV_LIST) {
        jv *r = jv_list(c->a, c->e, cnt, obj->u.list.sub);
        for (size_t k = 0; k < cnt; k++) r->u.list.v[k] = obj->u.list.v[lo + (int64_t)k * st];
        if (obj->u.list.sub == JL_RANGE) {   /* range(10)[2:5] is range(2, 5) */
            r->u.list.rs = obj->u.list.rs + lo * obj->u.list.rst;
            r->u.list.re = obj->u.list.rs + hi * obj->u.list.rst;
            r->u.list.rst = obj->u.list.rst * st;
        }
        return r;
    }
    /* strings: index code points once */
    size_t bn = obj->u.str.n;
    size_t *offs = calloc_a(c, ((size_t)n + 1) * sizeof(size_t));
    size_t i = 0, k2 = 0;
    while (i < bn) { offs[k2++] = i; jx_utf8_next(obj->u.str.s, bn, &i); }
    offs[k2] = bn;
    jx_buf b;
    jx_buf_init(&b, c->a, c->e, c->lim->max_output);
    jx_buf_put(&b, "", 0);
    for (size_t k = 0; k < cnt; k++) {
        int64_t idx = lo + (int64_t)k * st;
        jx_buf_put(&b, obj->u.str.s + offs[idx], offs[idx + 1] - offs[idx]);
    }
    return jv_str_ref(c->a, c->e, b.p, b.n);
}

jv *jx_to_list(jx_ctx *c, const jnode *at, jv *v) {
    switch (v->k) {
    case JV_LIST:
        if (v->u.list.sub == JL_GEN || v->u.list.sub == JL_ITER) {
            /* iterators exhaust: a second pass sees nothing */
            if (v->u.list.lazy_err) jx_fail_raw(c->e, v->u.list.lazy_err);
            if (v->u.list.used) return jv_list(c->a, c->e, 0, JL_LIST);
            v->u.list.used = 1;
        }
        return v;
    case JV_UNDEF: return jv_list(c->a, c->e, 0, 0);
    case JV_DICT: {
        jv *l = jv_list(c->a, c->e, v->u.dict->n, 0);
        for (size_t i = 0; i < v->u.dict->n; i++) l->u.list.v[i] = v->u.dict->keys[i];
        return l;
    }
    case JV_STR: {
        size_t n = jx_utf8_len(v->u.str.s, v->u.str.n), i = 0, k = 0;
        jv *l = jv_list(c->a, c->e, n, 0);
        while (i < v->u.str.n) {
            size_t s = i;
            jx_utf8_next(v->u.str.s, v->u.str.n, &i);
            l->u.list.v[k++] = jv_str_ref(c->a, c->e, v->u.str.s + s, i - s);
        }
        return l;
    }
    default:
        jx_rt_fail(c, at, "'%s' object is not iterable", jv_type_name(v));
    }
}

/* ---------------------------------------------------------------- operators */

static int is_num(const jv *v) { return v->k == JV_INT || v->k == JV_FLOAT || v->k == JV_BOOL; }
static double fval(const jv *v) {
    return v->k == JV_FLOAT ? v->u.f : v->k == JV_INT ? (double)v->u.i : (double)v->u.b;
}
static int64_t ival(const jv *v) { return v->k == JV_INT ? v->u.i : v->u.b; }

_Noreturn static void bad_operands(jx_ctx *c, const jnode *at, const char *op, const jv *a, const jv *b) {
    if (a->k == JV_UNDEF) undef_fail(c, at, a);
    if (b->k == JV_UNDEF) undef_fail(c, at, b);
    jx_rt_fail(c, at, "unsupported operand type(s) for %s: '%s' and '%s'", op, jv_type_name(a),
               jv_type_name(b));
}

static jv *repeat(jx_ctx *c, const jnode *at, jv *seq, int64_t times) {
    if (times < 0) times = 0;
    if (seq->k == JV_STR) {
        if (seq->u.str.n && (uint64_t)times > c->lim->max_output / seq->u.str.n)
            jx_rt_fail(c, at, "string repetition too large");
        jx_buf b;
        jx_buf_init(&b, c->a, c->e, c->lim->max_output);
        jx_buf_put(&b, "", 0);
        for (int64_t i = 0; i < times; i++) jx_buf_put(&b, seq->u.str.s, seq->u.str.n);
        return jv_str_ref(c->a, c->e, b.p, b.n);
    }
    size_t n = seq->u.list.n;
    if (n && (uint64_t)times > (c->lim->max_memory / sizeof(jv *)) / n)
        jx_rt_fail(c, at, "list repetition too large");
    jv *r = jv_list(c->a, c->e, n * (size_t)times, seq->u.list.sub);
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < n; k++) r->u.list.v[(size_t)i * n + k] = seq->u.list.v[k];
    return r;
}

jv *jx_python_mod_format(jx_ctx *c, const jnode *at, jv *fmt, jv *args);

static jv *binop(jx_ctx *c, const jnode *at, const char *op, jv *a, jv *b) {
    jx_arena *A = c->a;
    jx_err *E = c->e;
    if (is_num(a) && is_num(b)) {
        int fl = a->k == JV_FLOAT || b->k == JV_FLOAT;
        switch (op[0]) {
        case '+': case '-':
            if (!fl) {
                int64_t r;
                if (op[0] == '+' ? __builtin_add_overflow(ival(a), ival(b), &r)
                                 : __builtin_sub_overflow(ival(a), ival(b), &r))
                    jx_rt_fail(c, at, "integer overflow");
                return jv_int(A, E, r);
            }
            return jv_float(A, E, op[0] == '+' ? fval(a) + fval(b) : fval(a) - fval(b));
        case '*':
            if (op[1] == '*') {
                if (!fl && ival(b) >= 0) {
                    int64_t base = ival(a), e = ival(b), r = 1;
                    while (e > 0) {
                        if (e & 1 && __builtin_mul_overflow(r, base, &r)) jx_rt_fail(c, at, "integer overflow");
                        e >>= 1;
                        if (e && __builtin_mul_overflow(base, base, &base)) jx_rt_fail(c, at, "integer overflow");
                    }
                    return jv_int(A, E, r);
                }
                if (fval(a) == 0.0 && fval(b) < 0)
                    jx_rt_fail(c, at, "0.0 cannot be raised to a negative power");
                double r = pow(fval(a), fval(b));
                if (isinf(r) && !isinf(fval(a))) jx_rt_fail(c, at, "(34, 'Numerical result out of range')");
                return jv_float(A, E, r);
            }
            if (!fl) {
                int64_t r;
                if (__builtin_mul_overflow(ival(a), ival(b), &r)) jx_rt_fail(c, at, "integer overflow");
                return jv_int(A, E, r);
            }
            return jv_float(A, E, fval(a) * fval(b));
        case '/':
            if (fval(b) == 0.0 && (fl || ival(b) == 0))
                jx_rt_fail(c, at, fl ? "float division by zero" : op[1] == '/' ? "integer division or modulo by zero" : "division by zero");
            if (op[1] == '/') {
                if (!fl) {
                    int64_t x = ival(a), y = ival(b);
                    if (x == INT64_MIN && y == -1) jx_rt_fail(c, at, "integer overflow");
                    int64_t q = x / y;
                    if ((x % y != 0) && ((x < 0) != (y < 0))) q--;
                    return jv_int(A, E, q);
                }
                return jv_float(A, E, floor(fval(a) / fval(b)));
            }
            return jv_float(A, E, fval(a) / fval(b));
        case '%':
            if (!fl) {
                int64_t x = ival(a), y = ival(b);
                if (y == 0) jx_rt_fail(c, at, "integer division or modulo by zero");
                if (y == -1) return jv_int(A, E, 0);
                int64_t r = x % y;
                if (r != 0 && ((r < 0) != (y < 0))) r += y;
                return jv_int(A, E, r);
            } else {
                double x = fval(a), y = fval(b);
                if (y == 0.0) jx_rt_fail(c, at, "float modulo");
                double r = fmod(x, y);
                if (r != 0 && ((r < 0) != (y < 0))) r += y;
                else if (r == 0) r = copysign(0.0, y);
                return jv_float(A, E, r);
            }
        }
    }
    if (op[0] == '+' && a->k == JV_STR && b->k == JV_STR) {
        jx_buf bf;
        jx_buf_init(&bf, A, E, c->lim->max_output);
        jx_buf_put(&bf, a->u.str.s, a->u.str.n);
        jx_buf_put(&bf, b->u.str.s, b->u.str.n);
        return jv_str_ref(A, E, bf.p, bf.n);
    }
    if (op[0] == '+' && a->k == JV_LIST && b->k == JV_LIST && a->u.list.sub == b->u.list.sub &&
        (a->u.list.sub == JL_LIST || a->u.list.sub == JL_TUPLE)) {
        jv *r = jv_list(A, E, a->u.list.n + b->u.list.n, a->u.list.sub);
        for (size_t i = 0; i < a->u.list.n; i++) r->u.list.v[i] = a->u.list.v[i];
        for (size_t i = 0; i < b->u.list.n; i++) r->u.list.v[a->u.list.n + i] = b->u.list.v[i];
        return r;
    }
    if (op[0] == '*' && op[1] == 0) {
#define SEQ(x) ((x)->k == JV_STR || ((x)->k == JV_LIST && (x)->u.list.sub <= JL_TUPLE))
        if (SEQ(a) && (b->k == JV_INT || b->k == JV_BOOL)) return repeat(c, at, a, ival(b));
        if (SEQ(b) && (a->k == JV_INT || a->k == JV_BOOL)) return repeat(c, at, b, ival(a));
#undef SEQ
    }
    if (op[0] == '%' && a->k == JV_STR) return jx_python_mod_format(c, at, a, b);
    bad_operands(c, at, op, a, b);
}

static int contains(jx_ctx *c, const jnode *at, jv *container, jv *item) {
    switch (container->k) {
    case JV_STR:
        if (item->k != JV_STR) {
            if (item->k == JV_UNDEF) undef_fail(c, at, item);
            jx_rt_fail(c, at, "'in <string>' requires string as left operand, not %s", jv_type_name(item));
        }
        if (item->u.str.n == 0) return 1;
        if (item->u.str.n > container->u.str.n) return 0;
        for (size_t i = 0; i + item->u.str.n <= container->u.str.n; i++)
            if (!memcmp(container->u.str.s + i, item->u.str.s, item->u.str.n)) return 1;
        return 0;
    case JV_LIST:
        if (container->u.list.sub == JL_GEN || container->u.list.sub == JL_ITER)
            container = jx_to_list(c, at, container);   /* consumes; raises a deferred error */
        if (container->u.list.sub == JL_KEYS &&   /* a set-like view: hashes its operand */
            (item->k == JV_DICT || (item->k == JV_LIST && item->u.list.sub != JL_TUPLE && item->u.list.sub != JL_RANGE)))
            jx_rt_fail(c, at, "unhashable type: '%s'", jv_type_name(item));
        for (size_t i = 0; i < container->u.list.n; i++)
            if (jv_eq(container->u.list.v[i], item)) return 1;
        return 0;
    case JV_DICT:
        if (item->k == JV_DICT || (item->k == JV_LIST && item->u.list.sub != JL_TUPLE && item->u.list.sub != JL_RANGE))
            jx_rt_fail(c, at, "unhashable type: '%s'", jv_type_name(item));
        return jv_dict_get(container, item) != NULL;
    case JV_UNDEF: return 0;
    default:
        jx_rt_fail(c, at, "argument of type '%s' is not iterable", jv_type_name(container));
    }
}

/* ---------------------------------------------------------------- expressions */

static jv *eval(jx_ctx *c, const jnode *n, scope *s);
static void exec_body(jx_ctx *c, jnode *const *kids, size_t nk, scope *s);

static void eval_args(jx_ctx *c, const jnode *n, scope *s, jx_args *args) {
    args->npos = n->nkids;
    args->pos = n->nkids ? calloc_a(c, n->nkids * sizeof(jv *)) : NULL;
    for (size_t i = 0; i < n->nkids; i++) args->pos[i] = eval(c, n->kids[i], s);
    args->nkw = n->nkids2;
    args->kwn = n->names;
    args->kwv = n->nkids2 ? calloc_a(c, n->nkids2 * sizeof(jv *)) : NULL;
    for (size_t i = 0; i < n->nkids2; i++) args->kwv[i] = eval(c, n->kids2[i], s);
}

static jv *call_macro(jx_ctx *c, const jnode *at, jv *m, jx_args *args) {
    const jnode *def = m->u.macro.def;
    if (c->depth >= c->lim->max_depth)
        jx_rt_fail(c, at, "maximum recursion depth (%d nested macro calls) exceeded", c->lim->max_depth);
    c->depth++;
    scope *s = scope_new(c, (scope *)m->u.macro.scope);
    frame_enter(c, s, def);
    size_t np = def->nnames;
    int *bound = calloc_a(c, (np + 1) * sizeof(int));
    size_t nextra = args->npos > np ? args->npos - np : 0;
    for (size_t i = 0; i < args->npos && i < np; i++) {
        scope_set(c, s, def->names[i], args->pos[i]);
        bound[i] = 1;
    }
    jv *varargs = jv_list(c->a, c->e, nextra, 1);
    for (size_t i = 0; i < nextra; i++) varargs->u.list.v[i] = args->pos[np + i];
    jv *kwargs = jv_dict(c->a, c->e, JV_DICT);
    for (size_t k = 0; k < args->nkw; k++) {
        size_t i;
        for (i = 0; i < np; i++)
            if (!strcmp(def->names[i], args->kwn[k])) break;
        if (i < np) {
            if (bound[i]) jx_rt_fail(c, at, "macro '%s' got multiple values for argument '%s'", def->s, def->names[i]);
            scope_set(c, s, def->names[i], args->kwv[k]);
            bound[i] = 1;
        } else
            jv_dict_set(c->a, c->e, kwargs, jv_str_ref(c->a, c->e, args->kwn[k], strlen(args->kwn[k])), args->kwv[k]);
    }
    for (size_t i = 0; i < np; i++) {
        if (bound[i]) continue;
        if (def->kids2[i]) scope_set(c, s, def->names[i], eval(c, def->kids2[i], s));
        else {
            char *h = calloc_a(c, strlen(def->names[i]) + 40);
            sprintf(h, "parameter '%s' was not provided", def->names[i]);
            scope_set(c, s, def->names[i], jv_undef(c->a, c->e, h));
        }
    }
    scope_set(c, s, "varargs", varargs);
    scope_set(c, s, "kwargs", kwargs);
    jx_buf *saved = c->out, b;
    jx_buf_init(&b, c->a, c->e, c->lim->max_output);
    jx_buf_put(&b, "", 0);
    c->out = &b;
    exec_body(c, def->a->kids, def->a->nkids, s);
    c->out = saved;
    c->flow = FLOW_NONE;
    c->depth--;
    return jv_str_ref(c->a, c->e, b.p, b.n);
}

jv *jx_call_value(jx_ctx *c, const jnode *at, jv *fn, jx_args *args) {
    switch (fn->k) {
    case JV_MACRO: return call_macro(c, at, fn, args);
    case JV_FUNC: return jx_call_global(c, at, fn->u.func, args);
    case JV_METHOD: return jx_call_method(c, at, fn->u.method.self, fn->u.method.name, args);
    case JV_UNDEF: undef_fail(c, at, fn);
    default: jx_rt_fail(c, at, "'%s' object is not callable", jv_type_name(fn));
    }
}

static jv *eval_compare(jx_ctx *c, const jnode *n, scope *s) {
    jv *left = eval(c, n->a, s);
    for (size_t i = 0; i < n->nkids; i++) {
        jv *right = eval(c, n->kids[i], s);
        const char *op = n->names[i];
        int r;
        if (!strcmp(op, "eq")) r = jv_eq(left, right);
        else if (!strcmp(op, "ne")) r = !jv_eq(left, right);
        else if (!strcmp(op, "in")) r = contains(c, n, right, left);
        else if (!strcmp(op, "notin")) r = !contains(c, n, right, left);
        else {
            int k = jv_cmp(c->e, n->line, n->col, left, right);
            if (!strcmp(op, "lt")) r = k < 0;
            else if (!strcmp(op, "lteq")) r = k <= 0;
            else if (!strcmp(op, "gt")) r = k > 0;
            else r = k >= 0;
            /* NaN: every ordering comparison is false in Python */
            if ((left->k == JV_FLOAT && isnan(left->u.f)) || (right->k == JV_FLOAT && isnan(right->u.f))) r = 0;
        }
        if (!r) return &jx_false_v;
        left = right;
    }
    return &jx_true_v;
}

static jv *eval(jx_ctx *c, const jnode *n, scope *s) {
    jx_step(c, n);
    switch (n->kind) {
    case N_CONST: return n->konst;
    case N_NAME: return lookup(c, s, n, n->s);
    case N_GETATTR: return jx_getattr(c, n, eval(c, n->a, s), n->s);
    case N_GETITEM: {
        jv *o = eval(c, n->a, s);
        return jx_getitem(c, n, o, eval(c, n->b, s));
    }
    case N_SLICE: {
        if (!n->a) {
            /* a slice inside a tuple subscript (x[1:2, 3]): Python builds a slice object that no
             * list/str/dict accepts as a key, so the lookup comes out Undefined */
            if (n->b) eval(c, n->b, s);
            if (n->c) eval(c, n->c, s);
            if (n->d) eval(c, n->d, s);
            return jv_undef(c->a, c->e, "slice objects are not valid keys");
        }
        jv *o = eval(c, n->a, s);
        jv *a = n->b ? eval(c, n->b, s) : NULL, *b = n->c ? eval(c, n->c, s) : NULL;
        jv *st = n->d ? eval(c, n->d, s) : NULL;
        return do_slice(c, n, o, a, b, st);
    }
    case N_CALL: {
        jv *fn = eval(c, n->a, s);
        jx_args args;
        eval_args(c, n, s, &args);
        return jx_call_value(c, n, fn, &args);
    }
    case N_FILTER: {
        jv *v = eval(c, n->a, s);
        jx_args args;
        eval_args(c, n, s, &args);
        return jx_call_filter(c, n, n->s, v, &args);
    }
    case N_TEST: {
        jv *v = eval(c, n->a, s);
        jx_args args;
        eval_args(c, n, s, &args);
        return jv_bool(jx_call_test(c, n, n->s, v, &args));
    }
    case N_BINOP: {
        jv *a = eval(c, n->a, s);
        jv *b = eval(c, n->b, s);
        return binop(c, n, n->s, a, b);
    }
    case N_NEG: case N_POS: {
        jv *v = eval(c, n->a, s);
        if (v->k == JV_UNDEF) undef_fail(c, n, v);
        if (v->k == JV_FLOAT) return n->kind == N_NEG ? jv_float(c->a, c->e, -v->u.f) : v;
        if (v->k == JV_INT || v->k == JV_BOOL) {
            int64_t i = ival(v);
            if (n->kind == N_POS) return jv_int(c->a, c->e, i);
            if (i == INT64_MIN) jx_rt_fail(c, n, "integer overflow");
            return jv_int(c->a, c->e, -i);
        }
        jx_rt_fail(c, n, "bad operand type for unary %s: '%s'", n->kind == N_NEG ? "-" : "+", jv_type_name(v));
    }
    case N_NOT: return jv_bool(!jv_truthy(eval(c, n->a, s)));
    case N_AND: {
        jv *a = eval(c, n->a, s);
        return jv_truthy(a) ? eval(c, n->b, s) : a;
    }
    case N_OR: {
        jv *a = eval(c, n->a, s);
        return jv_truthy(a) ? a : eval(c, n->b, s);
    }
    case N_COND:
        if (jv_truthy(eval(c, n->a, s))) return eval(c, n->b, s);
        if (n->c) return eval(c, n->c, s);
        return jv_undef(c->a, c->e, "the inline if-expression evaluated to false and no else section was defined.");
    case N_COMPARE: return eval_compare(c, n, s);
    case N_CONCAT: {
        jx_buf b;
        jx_buf_init(&b, c->a, c->e, c->lim->max_output);
        jx_buf_put(&b, "", 0);
        for (size_t i = 0; i < n->nkids; i++) jv_write_str(&b, eval(c, n->kids[i], s));
        return jv_str_ref(c->a, c->e, b.p, b.n);
    }
    case N_LIST: case N_TUPLE: {
        jv *l = jv_list(c->a, c->e, n->nkids, n->kind == N_TUPLE);
        for (size_t i = 0; i < n->nkids; i++) l->u.list.v[i] = eval(c, n->kids[i], s);
        return l;
    }
    case N_DICT: {
        jv *d = jv_dict(c->a, c->e, JV_DICT);
        for (size_t i = 0; i < n->nkids; i++) {
            jv *k = eval(c, n->kids[i], s);
            if (k->k == JV_LIST && k->u.list.sub != JL_TUPLE && k->u.list.sub != JL_RANGE)
                jx_rt_fail(c, n, "unhashable type: '%s'", jv_type_name(k));
            if (k->k == JV_DICT) jx_rt_fail(c, n, "unhashable type: 'dict'");
            jv_dict_set(c->a, c->e, d, k, eval(c, n->kids2[i], s));
        }
        return d;
    }
    default:
        jx_rt_fail(c, n, "internal error: unexpected node %d", n->kind);
    }
}

/* ---------------------------------------------------------------- statements */

static void assign(jx_ctx *c, const jnode *target, jv *v, scope *s) {
    if (target->kind == N_NAME) {
        scope_set(c, s, target->s, v);
        return;
    }
    if (target->kind == N_NSREF) {
        jv *ns = lookup(c, s, target, target->s);
        if (ns->k != JV_NS) jx_rt_fail(c, target, "cannot assign attribute on non-namespace object");
        jv_dict_set(c->a, c->e, ns, jv_str_ref(c->a, c->e, target->a->s, strlen(target->a->s)), v);
        return;
    }
    /* tuple unpacking */
    jv *l = jx_to_list(c, target, v);
    if (l->u.list.n != target->nkids) {
        if (l->u.list.n > target->nkids) jx_rt_fail(c, target, "too many values to unpack (expected %zu)", target->nkids);
        jx_rt_fail(c, target, "not enough values to unpack (expected %zu, got %zu)", target->nkids, l->u.list.n);
    }
    for (size_t i = 0; i < target->nkids; i++) assign(c, target->kids[i], l->u.list.v[i], s);
}

/* Set and filter blocks render their body in a child frame, as jinja2 does. */
static jv *render_to_string(jx_ctx *c, const jnode *frame, jnode *const *kids, size_t nk, scope *parent) {
    scope *s = scope_new(c, parent);
    frame_enter(c, s, frame);
    jx_buf *saved = c->out, b;
    jx_buf_init(&b, c->a, c->e, c->lim->max_output);
    jx_buf_put(&b, "", 0);
    c->out = &b;
    exec_body(c, kids, nk, s);
    c->out = saved;
    return jv_str_ref(c->a, c->e, b.p, b.n);
}

static jv *apply_filter_chain(jx_ctx *c, const jnode *f, jv *v, scope *s) {
    if (!f) return v;
    v = apply_filter_chain(c, f->a, v, s);
    jx_args args;
    eval_args(c, f, s, &args);
    return jx_call_filter(c, f, f->s, v, &args);
}

static void exec_for(jx_ctx *c, const jnode *n, scope *s) {
    jv *items = jx_to_list(c, n->b, eval(c, n->b, s));
    if (n->c) {
        /* the loop filter sees the target bound, not `loop` */
        jv *kept = jv_list(c->a, c->e, items->u.list.n, 0);
        size_t k = 0;
        scope *fs = scope_new(c, s);
        for (size_t i = 0; i < items->u.list.n; i++) {
            fs->n = 0;
            assign(c, n->a, items->u.list.v[i], fs);
            if (jv_truthy(eval(c, n->c, fs))) kept->u.list.v[k++] = items->u.list.v[i];
        }
        kept->u.list.n = k;
        items = kept;
    }
    jx_loop *lp = calloc_a(c, sizeof *lp);
    lp->items = items;
    jv *loopv = jv_new(c->a, c->e, JV_LOOP);
    loopv->u.loop = lp;
    scope *is = NULL;
    /* jinja2 clears its else-flag at the end of each iteration body, which break/continue skip:
     * the else block runs unless some iteration ran to its end */
    int completed = 0;
    for (size_t i = 0; i < items->u.list.n; i++) {
        jx_step(c, n);
        lp->i = i;
        /* jinja2: assignments in the body do not survive the iteration. The scope is recycled
         * (arena memory is only freed after the render) unless a macro captured it. */
        if (!is || is->captured) is = scope_new(c, s);
        else is->n = 0;
        frame_enter(c, is, n);
        assign(c, n->a, items->u.list.v[i], is);
        scope_set(c, is, "loop", loopv);
        exec_body(c, n->kids, n->nkids, is);
        if (c->flow == FLOW_BREAK) { c->flow = FLOW_NONE; break; }
        if (c->flow == FLOW_CONTINUE) c->flow = FLOW_NONE;
        else completed = 1;
    }
    if (!completed && n->flag) exec_body(c, n->kids2, n->nkids2, scope_new(c, s));
}

static void exec_stmt(jx_ctx *c, const jnode *n, scope *s) {
    jx_step(c, n);
    switch (n->kind) {
    case N_TEXT: jx_buf_put(c->out, n->konst->u.str.s, n->konst->u.str.n); return;
    case N_PRINT: jv_write_str(c->out, eval(c, n->a, s)); return;
    case N_BODY: exec_body(c, n->kids, n->nkids, s); return;
    case N_IF:
        if (jv_truthy(eval(c, n->a, s))) exec_body(c, n->kids, n->nkids, s);
        else exec_body(c, n->kids2, n->nkids2, s);
        return;
    case N_FOR: exec_for(c, n, s); return;
    case N_SET: assign(c, n->a, eval(c, n->b, s), s); return;
    case N_SETBLOCK: {
        jv *v = render_to_string(c, n, n->kids, n->nkids, s);
        assign(c, n->a, apply_filter_chain(c, n->b, v, s), s);
        return;
    }
    case N_MACRO: {
        jv *m = jv_new(c->a, c->e, JV_MACRO);
        m->u.macro.def = n;
        m->u.macro.scope = s;
        s->captured = 1;
        scope_set(c, s, n->s, m);
        return;
    }
    case N_BREAK: c->flow = FLOW_BREAK; return;
    case N_CONTINUE: c->flow = FLOW_CONTINUE; return;
    case N_FILTERBLOCK: {
        jv *v = render_to_string(c, n, n->kids, n->nkids, s);
        jv_write_str(c->out, apply_filter_chain(c, n->b, v, s));
        return;
    }
    case N_WITH: {
        scope *ws = scope_new(c, s);
        frame_enter(c, ws, n);
        for (size_t i = 0; i < n->nkids2; i++) assign(c, n->b->kids[i], eval(c, n->kids2[i], s), ws);
        exec_body(c, n->kids, n->nkids, ws);
        return;
    }
    default: jx_rt_fail(c, n, "internal error: unexpected statement %d", n->kind);
    }
}

static void exec_body(jx_ctx *c, jnode *const *kids, size_t nk, scope *s) {
    for (size_t i = 0; i < nk && c->flow == FLOW_NONE; i++) exec_stmt(c, kids[i], s);
}

int jx_render(const jnode *root, jv *vars, jx_arena *a, jx_err *e, const jx_limits *lim,
              char **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    if (setjmp(e->jb)) return 1;
    jx_ctx c = {.a = a, .e = e, .lim = lim};
    jx_buf b;
    jx_buf_init(&b, a, e, lim->max_output);
    jx_buf_put(&b, "", 0);
    c.out = &b;
    scope *g = scope_new(&c, NULL);
    if (vars && vars->k == JV_DICT)
        for (size_t i = 0; i < vars->u.dict->n; i++)
            if (vars->u.dict->keys[i]->k == JV_STR)
                scope_set(&c, g, vars->u.dict->keys[i]->u.str.s, vars->u.dict->vals[i]);
    scope *top = scope_new(&c, g);
    frame_enter(&c, top, root);
    exec_body(&c, root->kids, root->nkids, top);
    char *r = malloc(b.n + 1);
    if (!r) {
        snprintf(e->msg, sizeof e->msg, "out of memory");
        return 1;
    }
    memcpy(r, b.p, b.n);
    r[b.n] = 0;
    *out = r;
    *out_len = b.n;
    return 0;
}
