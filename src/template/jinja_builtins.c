/* jinja_builtins.c — the library a template can call: jinja2's filters and tests, the Python
 * str/dict/list methods templates use, and the globals transformers provides (range,
 * namespace, dict, raise_exception, strftime_now). Each mirrors the jinja2 3.1 / CPython
 * function of the same name; the evaluator itself is in jinja_eval.c. */
#include "template/jinja.h"

#include <errno.h>
#include <setjmp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define A_ jx_ctx_arena(c)
#define E_ jx_ctx_err(c)

/* ---------------------------------------------------------------- names */

/* Every jinja2 builtin filter / test name, so a template that merely mentions one compiles as
 * it does in jinja2; the unimplemented few fail when called. */
static const char *const filter_names[] = {
    "abs", "attribute", "batch", "capitalize", "center", "count", "d", "default", "dictsort",
    "e", "escape", "filesizeformat", "first", "float", "forceescape", "format", "groupby",
    "indent", "int", "items", "join", "last", "length", "list", "lower", "map", "max", "min",
    "pprint", "random", "reject", "rejectattr", "replace", "reverse", "round", "safe", "select",
    "selectattr", "slice", "sort", "string", "striptags", "sum", "title", "tojson", "trim",
    "truncate", "unique", "upper", "urlencode", "urlize", "wordcount", "wordwrap", "xmlattr",
    NULL};
static const char *const test_names[] = {
    "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "escaped", "even", "false",
    "filter", "float", "ge", "greaterthan", "gt", "in", "integer", "iterable", "le", "lessthan",
    "lower", "lt", "mapping", "ne", "none", "number", "odd", "sameas", "sequence", "string",
    "test", "true", "undefined", "upper", "==", "!=", "<", "<=", ">", ">=", NULL};

static int in_list(const char *const *l, const char *s) {
    for (size_t i = 0; l[i]; i++)
        if (!strcmp(l[i], s)) return 1;
    return 0;
}
int jx_filter_known(const char *name) { return in_list(filter_names, name); }
int jx_test_known(const char *name) { return in_list(test_names, name); }

enum { G_RANGE, G_NAMESPACE, G_DICT, G_RAISE, G_STRFTIME, G_LIPSUM, G_CYCLER, G_JOINER };
static const char *const global_names[] = {"range", "namespace", "dict", "raise_exception",
                                           "strftime_now", "lipsum", "cycler", "joiner", NULL};
int jx_global_id(const char *name) {
    for (int i = 0; global_names[i]; i++)
        if (!strcmp(global_names[i], name)) return i;
    return -1;
}

static const char *const str_methods[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "replace", "upper",
    "lower", "title", "capitalize", "find", "rfind", "index", "rindex", "count", "join",
    "splitlines", "isdigit", "isalpha", "isspace", "isalnum", "islower", "isupper", "isnumeric",
    "removeprefix", "removesuffix", "format", "center", "ljust", "rjust", "zfill", "swapcase",
    "partition", "rpartition", "casefold", "isdecimal", "istitle", "expandtabs", NULL};
static const char *const dict_methods[] = {"get", "items", "keys", "values", "copy", "pop",
                                           "popitem", "setdefault", "update", "clear", NULL};
static const char *const list_methods[] = {"index", "count", "copy", "append", "extend", "insert",
                                           "pop", "remove", "reverse", "sort", "clear", NULL};
/* ImmutableSandboxedEnvironment refuses the mutating ones */
static const char *const unsafe_methods[] = {"pop", "popitem", "setdefault", "update", "clear",
                                             "append", "extend", "insert", "remove", "reverse",
                                             "sort", NULL};

int jx_has_method(const jv *self, const char *name) {
    if (self->k == JV_STR) return in_list(str_methods, name);
    if (self->k == JV_DICT) return in_list(dict_methods, name);
    if (self->k == JV_LIST) {
        if (self->u.list.sub == JL_LIST) return in_list(list_methods, name);
        if (self->u.list.sub == JL_TUPLE || self->u.list.sub == JL_RANGE) return !strcmp(name, "index") || !strcmp(name, "count");
        return 0;
    }
    return 0;
}

/* ---------------------------------------------------------------- argument helpers */

static jv *arg(jx_args *a, size_t i, const char *name) {
    if (i < a->npos) return a->pos[i];
    for (size_t k = 0; k < a->nkw; k++)
        if (!strcmp(a->kwn[k], name)) return a->kwv[k];
    return NULL;
}

static void check_args(jx_ctx *c, const jnode *at, const char *fname, jx_args *a, size_t maxpos,
                       const char *const *kwnames) {
    if (a->npos > maxpos)
        jx_rt_fail(c, at, "%s() takes at most %zu positional argument(s) (%zu given)", fname, maxpos, a->npos);
    for (size_t k = 0; k < a->nkw; k++) {
        int ok = 0;
        for (size_t i = 0; kwnames && kwnames[i]; i++)
            if (!strcmp(kwnames[i], a->kwn[k])) {
                ok = 1;
                if (i < a->npos) jx_rt_fail(c, at, "%s() got multiple values for argument '%s'", fname, a->kwn[k]);
            }
        if (!ok) jx_rt_fail(c, at, "%s() got an unexpected keyword argument '%s'", fname, a->kwn[k]);
    }
}

static const char *cstr(jx_ctx *c, jv *v) {
    jv *s = jx_to_str(c, v);
    return s->u.str.s;
}

static jv *mkstr(jx_ctx *c, const char *s, size_t n) { return jv_strn(A_, E_, s, n); }

static jx_buf newbuf(jx_ctx *c) {
    jx_buf b;
    jx_buf_init(&b, A_, E_, 0);
    jx_buf_put(&b, "", 0);
    return b;
}

static int64_t need_int(jx_ctx *c, const jnode *at, jv *v, const char *what) {
    if (v->k == JV_INT) return v->u.i;
    if (v->k == JV_BOOL) return v->u.b;
    jx_rt_fail(c, at, "%s: expected an integer, got '%s'", what, jv_type_name(v));
}

static jv *need_str(jx_ctx *c, const jnode *at, jv *v, const char *what) {
    if (v->k != JV_STR) {
        if (v->k == JV_UNDEF) jx_rt_fail(c, at, "%s", v->u.hint ? v->u.hint : "value is undefined");
        jx_rt_fail(c, at, "%s: expected a string, got '%s'", what, jv_type_name(v));
    }
    return v;
}

/* ---------------------------------------------------------------- string primitives */

/* Latin digraph triples (DŽ Dž dž, LJ Lj lj, NJ Nj nj, DZ Dz dz): 0 upper, 1 title, 2 lower. */
static int digraph(uint32_t cp, uint32_t *base) {
    if (cp >= 0x1C4 && cp <= 0x1CC) { *base = 0x1C4 + (cp - 0x1C4) / 3 * 3; return (int)(cp - *base); }
    if (cp >= 0x1F1 && cp <= 0x1F3) { *base = 0x1F1; return (int)(cp - 0x1F1); }
    return -1;
}

static int is_cased(uint32_t cp) {
    uint32_t b;
    return jx_py_upper(cp) != cp || jx_py_lower(cp) != cp || cp == 0xDF || digraph(cp, &b) >= 0;
}

/* to: 0 upper, 1 lower, 2 title. Python's full mappings for the few multi-char / context cases
 * of the scripts we cover: ß -> SS / Ss, digraph title forms, final sigma. */
static void put_case(jx_buf *b, uint32_t cp, int to, int final_sigma) {
    char tmp[8];
    uint32_t base;
    int d = digraph(cp, &base);
    if (d >= 0) cp = base + (uint32_t)(to == 0 ? 0 : to == 2 ? 1 : 2);
    else if (cp == 0xDF && to != 1) { jx_buf_puts(b, to == 0 ? "SS" : "Ss"); return; }
    else if (cp == 0x3A3 && to == 1 && final_sigma) cp = 0x3C2;
    else cp = to == 1 ? jx_py_lower(cp) : jx_py_upper(cp);
    jx_buf_put(b, tmp, jx_utf8_put(tmp, cp));
}

static jv *case_map(jx_ctx *c, jv *s, int mode) {
    /* mode 0 upper, 1 lower, 2 capitalize, 3 str.title, 4 swapcase, 5 jinja2's title filter
     * (words split at runs of [-\s({[<]; first char upper(), the rest lower()) */
    jx_buf b = newbuf(c);
    int prev_sep = 1;
    const char *p = s->u.str.s;
    size_t n = s->u.str.n, i = 0;
    int first = 1, prev_cased = 0;
    while (i < n) {
        uint32_t cp = jx_utf8_next(p, n, &i);
        int cased = is_cased(cp);
        int next_cased = 0;
        if (i < n) { size_t k = i; next_cased = is_cased(jx_utf8_next(p, n, &k)); }
        int fs = prev_cased && !next_cased;   /* Greek final sigma */
        switch (mode) {
        case 0: put_case(&b, cp, 0, 0); break;
        case 1: put_case(&b, cp, 1, fs); break;
        case 2: put_case(&b, cp, first ? 2 : 1, fs); break;
        case 3: put_case(&b, cp, prev_cased ? 1 : 2, fs); break;
        case 4: put_case(&b, cp, jx_py_upper(cp) != cp ? 0 : 1, fs); break;
        case 5: put_case(&b, cp, prev_sep ? 0 : 1, fs); break;
        }
        prev_sep = jx_py_isspace(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
        prev_cased = cased;
        first = 0;
    }
    return jv_str_ref(A_, E_, b.p, b.n);
}

static int in_chars(uint32_t cp, jv *chars) {
    if (!chars) return jx_py_isspace(cp);
    size_t i = 0;
    while (i < chars->u.str.n)
        if (jx_utf8_next(chars->u.str.s, chars->u.str.n, &i) == cp) return 1;
    return 0;
}

/* str.strip / lstrip / rstrip (which: 1 left, 2 right, 3 both) */
static jv *strip(jx_ctx *c, jv *s, jv *chars, int which) {
    const char *p = s->u.str.s;
    size_t n = s->u.str.n, lo = 0, hi = n;
    if (chars && chars->k == JV_NONE) chars = NULL;
    if (which & 1) {
        size_t i = 0;
        while (i < n) {
            size_t st = i;
            if (!in_chars(jx_utf8_next(p, n, &i), chars)) { lo = st; break; }
            lo = i;
        }
    }
    if (which & 2) {
        size_t i = lo, last = lo;
        while (i < n) {
            if (!in_chars(jx_utf8_next(p, n, &i), chars)) last = i;
        }
        hi = last;
    }
    if (hi < lo) hi = lo;
    return jv_str_ref(A_, E_, p + lo, hi - lo);
}

static const char *memfind(const char *h, size_t hn, const char *nd, size_t nn) {
    if (nn == 0) return h;
    if (nn > hn) return NULL;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == nd[0] && !memcmp(h + i, nd, nn)) return h + i;
    return NULL;
}

static const char *memrfind(const char *h, size_t hn, const char *nd, size_t nn) {
    if (nn > hn) return NULL;
    for (size_t i = hn - nn + 1; i > 0; i--)
        if (!memcmp(h + i - 1, nd, nn)) return h + i - 1;
    return NULL;
}

static jv *list_from(jx_ctx *c, jv **items, size_t n, int sub) {
    jv *l = jv_list(A_, E_, n, sub);
    for (size_t i = 0; i < n; i++) l->u.list.v[i] = items[i];
    return l;
}

typedef struct {
    jv **v;
    size_t n, cap;
} vvec;

/* Marks a materialised list as the Python generator / iterator jinja2 would return. */
static jv *as_lazy(jv *l, int sub, const char *name) {
    l->u.list.sub = sub;
    l->u.list.gname = name;
    return l;
}

static int iterable(const jv *v) {
    return v->k == JV_LIST || v->k == JV_DICT || v->k == JV_STR || v->k == JV_UNDEF;
}

static void vpush(jx_ctx *c, vvec *v, jv *x) {
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 8;
        jv **nv = jx_arena_alloc(A_, nc * sizeof *nv);
        if (!nv) jx_rt_fail(c, NULL, "out of memory");
        if (v->n) memcpy(nv, v->v, v->n * sizeof *nv);
        v->v = nv;
        v->cap = nc;
    }
    v->v[v->n++] = x;
}

static jv *str_split(jx_ctx *c, const jnode *at, jv *s, jv *sep, int64_t maxsplit, int right) {
    vvec out = {0};
    const char *p = s->u.str.s;
    size_t n = s->u.str.n;
    if (sep && sep->k != JV_NONE) {
        need_str(c, at, sep, "split");
        if (!sep->u.str.n) jx_rt_fail(c, at, "empty separator");
        if (!right) {
            size_t pos = 0;
            while (maxsplit < 0 || (int64_t)out.n < maxsplit) {
                const char *f = memfind(p + pos, n - pos, sep->u.str.s, sep->u.str.n);
                if (!f) break;
                vpush(c, &out, jv_str_ref(A_, E_, p + pos, (size_t)(f - (p + pos))));
                pos = (size_t)(f - p) + sep->u.str.n;
            }
            vpush(c, &out, jv_str_ref(A_, E_, p + pos, n - pos));
        } else {
            size_t end = n;
            vvec rev = {0};
            while (maxsplit < 0 || (int64_t)rev.n < maxsplit) {
                const char *f = memrfind(p, end, sep->u.str.s, sep->u.str.n);
                if (!f) break;
                size_t st = (size_t)(f - p) + sep->u.str.n;
                vpush(c, &rev, jv_str_ref(A_, E_, p + st, end - st));
                end = (size_t)(f - p);
            }
            vpush(c, &out, jv_str_ref(A_, E_, p, end));
            for (size_t i = rev.n; i > 0; i--) vpush(c, &out, rev.v[i - 1]);
        }
        return list_from(c, out.v, out.n, 0);
    }
    /* whitespace split: runs of whitespace, no empty strings */
    if (!right) {
        size_t i = 0;
        while (i < n) {
            size_t st = i;
            while (i < n) { size_t k = i; if (!jx_py_isspace(jx_utf8_next(p, n, &k))) break; i = k; }
            if (i >= n) break;
            st = i;
            if (maxsplit >= 0 && (int64_t)out.n >= maxsplit) {
                /* remainder keeps trailing whitespace stripped? Python keeps it unstripped-right */
                size_t e = n, last = st, k = st;
                while (k < e) { if (!jx_py_isspace(jx_utf8_next(p, e, &k))) last = k; }
                vpush(c, &out, jv_str_ref(A_, E_, p + st, last - st));
                i = n;
                break;
            }
            while (i < n) { size_t k = i; if (jx_py_isspace(jx_utf8_next(p, n, &k))) break; i = k; }
            vpush(c, &out, jv_str_ref(A_, E_, p + st, i - st));
        }
        return list_from(c, out.v, out.n, 0);
    }
    /* rsplit() on whitespace with maxsplit: rare; split all and re-join the head */
    jv *all = str_split(c, at, s, NULL, -1, 0);
    if (maxsplit < 0 || (int64_t)all->u.list.n <= maxsplit + 1) return all;
    size_t keep = (size_t)maxsplit;
    size_t headn = all->u.list.n - keep;
    jv *last_head = all->u.list.v[headn - 1];
    const char *hs = p;
    while (hs < p + n) { size_t k = 0; if (!jx_py_isspace(jx_utf8_next(hs, (size_t)(p + n - hs), &k))) break; hs += k; }
    jv *head = jv_str_ref(A_, E_, hs, (size_t)(last_head->u.str.s + last_head->u.str.n - hs));
    vpush(c, &out, head);
    for (size_t i = headn; i < all->u.list.n; i++) vpush(c, &out, all->u.list.v[i]);
    return list_from(c, out.v, out.n, 0);
}

static jv *str_replace(jx_ctx *c, jv *s, jv *old, jv *new_, int64_t count) {
    jx_buf b = newbuf(c);
    const char *p = s->u.str.s;
    size_t n = s->u.str.n, pos = 0;
    int64_t done = 0;
    if (old->u.str.n == 0) {
        /* Python inserts `new` between every character and at both ends */
        size_t i = 0;
        if (count != 0) { jx_buf_put(&b, new_->u.str.s, new_->u.str.n); done++; }
        while (i < n) {
            size_t st = i;
            jx_utf8_next(p, n, &i);
            jx_buf_put(&b, p + st, i - st);
            if (count < 0 || done < count) { jx_buf_put(&b, new_->u.str.s, new_->u.str.n); done++; }
        }
        return jv_str_ref(A_, E_, b.p, b.n);
    }
    while (count < 0 || done < count) {
        const char *f = memfind(p + pos, n - pos, old->u.str.s, old->u.str.n);
        if (!f) break;
        jx_buf_put(&b, p + pos, (size_t)(f - (p + pos)));
        jx_buf_put(&b, new_->u.str.s, new_->u.str.n);
        pos = (size_t)(f - p) + old->u.str.n;
        done++;
    }
    jx_buf_put(&b, p + pos, n - pos);
    return jv_str_ref(A_, E_, b.p, b.n);
}

static int starts_with(jv *s, jv *pre) {
    return pre->u.str.n <= s->u.str.n && !memcmp(s->u.str.s, pre->u.str.s, pre->u.str.n);
}
static int ends_with(jv *s, jv *suf) {
    return suf->u.str.n <= s->u.str.n &&
           !memcmp(s->u.str.s + s->u.str.n - suf->u.str.n, suf->u.str.s, suf->u.str.n);
}

static jv *str_join(jx_ctx *c, const jnode *at, jv *sep, jv *items) {
    jx_buf b = newbuf(c);
    for (size_t i = 0; i < items->u.list.n; i++) {
        if (i) jx_buf_put(&b, sep->u.str.s, sep->u.str.n);
        jv *x = items->u.list.v[i];
        if (x->k != JV_STR) jx_rt_fail(c, at, "sequence item %zu: expected str instance, %s found", i, jv_type_name(x));
        jx_buf_put(&b, x->u.str.s, x->u.str.n);
    }
    return jv_str_ref(A_, E_, b.p, b.n);
}

static int str_pred(jv *s, int kind) {
    /* 0 digit, 1 alpha, 2 space, 3 alnum, 4 lower, 5 upper */
    size_t i = 0, n = s->u.str.n;
    int cased = 0;
    if (!n) return 0;
    while (i < n) {
        uint32_t cp = jx_utf8_next(s->u.str.s, n, &i);
        int dig = cp >= '0' && cp <= '9';
        int alpha = (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
                    (cp >= 0x80 && !jx_py_isspace(cp) && (jx_py_upper(cp) != cp || jx_py_lower(cp) != cp));
        int up = jx_py_lower(cp) != cp, lo = jx_py_upper(cp) != cp;
        switch (kind) {
        case 0: if (!dig) return 0; break;
        case 1: if (!alpha) return 0; break;
        case 2: if (!jx_py_isspace(cp)) return 0; break;
        case 3: if (!dig && !alpha) return 0; break;
        case 4: if (up) return 0; if (lo) cased = 1; break;
        case 5: if (lo) return 0; if (up) cased = 1; break;
        }
    }
    return kind >= 4 ? cased : 1;
}

/* ---------------------------------------------------------------- printf-style % */

jv *jx_python_mod_format(jx_ctx *c, const jnode *at, jv *fmt, jv *args);
jv *jx_python_mod_format(jx_ctx *c, const jnode *at, jv *fmt, jv *args) {
    jv **av;
    size_t an, ai = 0;
    jv *one[1] = {args};
    if (args->k == JV_LIST && args->u.list.sub == JL_TUPLE) { av = args->u.list.v; an = args->u.list.n; }
    else { av = one; an = 1; }
    jx_buf b = newbuf(c);
    const char *p = fmt->u.str.s;
    size_t n = fmt->u.str.n;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '%') { jx_buf_putc(&b, p[i]); continue; }
        if (++i >= n) jx_rt_fail(c, at, "incomplete format");
        jv *mapval = NULL;
        if (p[i] == '(') {
            size_t st = ++i;
            while (i < n && p[i] != ')') i++;
            if (i >= n || args->k != JV_DICT) jx_rt_fail(c, at, "format requires a mapping");
            jv *k = jv_strn(A_, E_, p + st, i - st);
            mapval = jv_dict_get(args, k);
            if (!mapval) jx_rt_fail(c, at, "KeyError: '%.*s'", (int)(i - st), p + st);
            if (++i >= n) jx_rt_fail(c, at, "incomplete format");
        }
        char spec[32];
        size_t sl = 0;
        spec[sl++] = '%';
        while (i < n && strchr("-+ #0123456789.", p[i]) && sl < 20) spec[sl++] = p[i++];
        if (i >= n) jx_rt_fail(c, at, "incomplete format");
        char conv = p[i];
        if (conv == '%') { jx_buf_putc(&b, '%'); continue; }
        jv *v = mapval;
        if (!v) {
            if (ai >= an) jx_rt_fail(c, at, "not enough arguments for format string");
            v = av[ai++];
        }
        char tmp[512];
        switch (conv) {
        case 's': case 'r': {
            jx_buf t = newbuf(c);
            if (conv == 's') jv_write_str(&t, v);
            else jv_write_repr(&t, v);
            spec[sl++] = 's';
            spec[sl] = 0;
            if (sl == 2) jx_buf_put(&b, t.p, t.n);
            else { snprintf(tmp, sizeof tmp, spec, t.p); jx_buf_puts(&b, tmp); }
            break;
        }
        case 'd': case 'i': case 'x': case 'X': case 'o': {
            if (!(v->k == JV_INT || v->k == JV_BOOL || v->k == JV_FLOAT))
                jx_rt_fail(c, at, "%%%c format: a real number is required, not %s", conv, jv_type_name(v));
            long long x = v->k == JV_FLOAT ? (long long)v->u.f : (long long)(v->k == JV_INT ? v->u.i : v->u.b);
            spec[sl++] = 'l'; spec[sl++] = 'l'; spec[sl++] = conv == 'i' ? 'd' : conv; spec[sl] = 0;
            snprintf(tmp, sizeof tmp, spec, x);
            jx_buf_puts(&b, tmp);
            break;
        }
        case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': {
            if (!(v->k == JV_INT || v->k == JV_BOOL || v->k == JV_FLOAT))
                jx_rt_fail(c, at, "must be real number, not %s", jv_type_name(v));
            double x = v->k == JV_FLOAT ? v->u.f : (double)(v->k == JV_INT ? v->u.i : v->u.b);
            spec[sl++] = conv; spec[sl] = 0;
            snprintf(tmp, sizeof tmp, spec, x);
            jx_buf_puts(&b, tmp);
            break;
        }
        default: jx_rt_fail(c, at, "unsupported format character '%c'", conv);
        }
    }
    /* Python treats any mapping-like right operand (dict, list) as a mapping: unused is fine */
    if (ai < an && args->k != JV_DICT && args->k != JV_UNDEF && !(args->k == JV_LIST && args->u.list.sub != JL_TUPLE))
        jx_rt_fail(c, at, "not all arguments converted during string formatting");
    return jv_str_ref(A_, E_, b.p, b.n);
}

/* ---------------------------------------------------------------- sorting */

typedef struct {
    jv *key, *item;
} kv;

static int kv_lt(jx_ctx *c, const jnode *at, const kv *a, const kv *b) {
    /* observed jinja2 behaviour: sorting keys that are all Undefined keeps the order */
    if (a->key->k == JV_UNDEF && b->key->k == JV_UNDEF) return 0;
    return jv_cmp(E_, at->line, at->col, a->key, b->key) < 0;
}

/* Stable merge sort (Python's sort is stable and uses only <). */
static void msort(jx_ctx *c, const jnode *at, kv *v, kv *tmp, size_t n, int reverse) {
    if (n < 2) return;
    size_t h = n / 2;
    msort(c, at, v, tmp, h, reverse);
    msort(c, at, v + h, tmp, n - h, reverse);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        /* reverse=True in Python sorts as if each comparison were reversed, keeping stability */
        int take_right = reverse ? kv_lt(c, at, &v[i], &v[j]) : kv_lt(c, at, &v[j], &v[i]);
        tmp[k++] = take_right ? v[j++] : v[i++];
    }
    while (i < h) tmp[k++] = v[i++];
    while (j < n) tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof *v);
}

static jv *ignore_case(jx_ctx *c, jv *v) { return v->k == JV_STR ? case_map(c, v, 1) : v; }

/* environment.getitem chain for "a.b.0" attribute paths (make_attrgetter) */
static jv *attr_path(jx_ctx *c, const jnode *at, jv *item, jv *attr) {
    if (attr->k == JV_INT) return jx_getitem(c, at, item, attr);
    const char *s = cstr(c, attr);
    const char *p = s;
    jv *v = item;
    for (;;) {
        const char *d = strchr(p, '.');
        size_t len = d ? (size_t)(d - p) : strlen(p);
        int digits = len > 0;
        for (size_t i = 0; i < len; i++)
            if (p[i] < '0' || p[i] > '9') digits = 0;
        jv *key = digits ? jv_int(A_, E_, strtoll(p, NULL, 10)) : mkstr(c, p, len);
        v = jx_getitem(c, at, v, key);
        if (!d) break;
        p = d + 1;
    }
    return v;
}

static jv *sorted(jx_ctx *c, const jnode *at, jv *items, int reverse, int case_sensitive, jv *attribute) {
    size_t n = items->u.list.n;
    kv *v = jx_arena_alloc(A_, (n + 1) * sizeof *v), *tmp = jx_arena_alloc(A_, (n + 1) * sizeof *v);
    if (!v || !tmp) jx_rt_fail(c, at, "out of memory");
    for (size_t i = 0; i < n; i++) {
        jv *it = items->u.list.v[i], *k = it;
        if (attribute && attribute->k != JV_NONE) k = attr_path(c, at, it, attribute);
        v[i].key = case_sensitive ? k : ignore_case(c, k);
        v[i].item = it;
    }
    msort(c, at, v, tmp, n, reverse);
    jv *r = jv_list(A_, E_, n, 0);
    for (size_t i = 0; i < n; i++) r->u.list.v[i] = v[i].item;
    return r;
}

/* ---------------------------------------------------------------- tests */

static int is_true_num(const jv *v) { return v->k == JV_INT || v->k == JV_FLOAT || v->k == JV_BOOL; }

int jx_call_test(jx_ctx *c, const jnode *at, const char *name, jv *v, jx_args *a) {
    jv *x = arg(a, 0, "value");
    if (!strcmp(name, "defined")) return v->k != JV_UNDEF;
    if (!strcmp(name, "undefined")) return v->k == JV_UNDEF;
    if (!strcmp(name, "none")) return v->k == JV_NONE;
    if (!strcmp(name, "boolean")) return v->k == JV_BOOL;
    if (!strcmp(name, "true")) return v->k == JV_BOOL && v->u.b;
    if (!strcmp(name, "false")) return v->k == JV_BOOL && !v->u.b;
    if (!strcmp(name, "string")) return v->k == JV_STR;
    if (!strcmp(name, "mapping")) return v->k == JV_DICT;
    if (!strcmp(name, "number")) return is_true_num(v);
    if (!strcmp(name, "integer")) return v->k == JV_INT;
    if (!strcmp(name, "float")) return v->k == JV_FLOAT;
    /* sequence: len() and __getitem__ exist — strings, lists, dicts, and Undefined */
    if (!strcmp(name, "sequence"))
        return v->k == JV_STR || v->k == JV_DICT || v->k == JV_UNDEF ||
               (v->k == JV_LIST && (v->u.list.sub <= JL_TUPLE || v->u.list.sub == JL_RANGE));
    if (!strcmp(name, "iterable")) return v->k == JV_STR || v->k == JV_LIST || v->k == JV_DICT || v->k == JV_UNDEF;
    if (!strcmp(name, "callable")) return v->k == JV_MACRO || v->k == JV_FUNC || v->k == JV_METHOD || v->k == JV_UNDEF;   /* Undefined has __call__ */
    if (!strcmp(name, "escaped")) return 0;
    if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        jv *s = jx_to_str(c, v);
        return str_pred(s, name[0] == 'l' ? 4 : 5);
    }
    if (!strcmp(name, "even") || !strcmp(name, "odd")) {
        if (v->k == JV_FLOAT) {
            double r = fmod(v->u.f, 2.0);
            if (r < 0) r += 2.0;
            return name[0] == 'e' ? r == 0.0 : r == 1.0;
        }
        int64_t i = need_int(c, at, v, name);
        return name[0] == 'e' ? (i % 2 == 0) : (i % 2 != 0);
    }
    if (!strcmp(name, "divisibleby")) {
        if (!x) jx_rt_fail(c, at, "divisibleby() missing argument");
        int64_t d = need_int(c, at, x, "divisibleby"), i = need_int(c, at, v, "divisibleby");
        if (d == 0) jx_rt_fail(c, at, "integer division or modulo by zero");
        return d == -1 || i % d == 0;
    }
    if (!strcmp(name, "filter")) return v->k == JV_STR && jx_filter_known(v->u.str.s);
    if (!strcmp(name, "test")) return v->k == JV_STR && jx_test_known(v->u.str.s);
    if (!x) jx_rt_fail(c, at, "test '%s' needs an argument", name);
    if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==")) return jv_eq(v, x);
    if (!strcmp(name, "ne") || !strcmp(name, "!=")) return !jv_eq(v, x);
    if (!strcmp(name, "sameas")) {
        if (v->k == JV_NONE || v->k == JV_BOOL || v->k == JV_UNDEF) return v->k == x->k && (v->k != JV_BOOL || v->u.b == x->u.b);
        return v == x;
    }
    if (!strcmp(name, "in")) {
        jv *items = x;
        if (items->k == JV_STR) {
            if (v->k != JV_STR) jx_rt_fail(c, at, "'in <string>' requires string as left operand");
            return memfind(items->u.str.s, items->u.str.n, v->u.str.s, v->u.str.n) != NULL;
        }
        if (items->k == JV_DICT) return jv_dict_get(items, v) != NULL;
        jv *l = jx_to_list(c, at, items);
        for (size_t i = 0; i < l->u.list.n; i++)
            if (jv_eq(l->u.list.v[i], v)) return 1;
        return 0;
    }
    int k = jv_cmp(E_, at->line, at->col, v, x);
    if (!strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "<")) return k < 0;
    if (!strcmp(name, "le") || !strcmp(name, "<=")) return k <= 0;
    if (!strcmp(name, "gt") || !strcmp(name, "greaterthan") || !strcmp(name, ">")) return k > 0;
    if (!strcmp(name, "ge") || !strcmp(name, ">=")) return k >= 0;
    jx_rt_fail(c, at, "No test named '%s'.", name);
}

/* ---------------------------------------------------------------- filters */

static size_t py_len(jx_ctx *c, const jnode *at, jv *v) {
    switch (v->k) {
    case JV_STR: return jx_utf8_len(v->u.str.s, v->u.str.n);
    case JV_LIST:
        if (v->u.list.sub == JL_GEN || v->u.list.sub == JL_ITER)
            jx_rt_fail(c, at, "object of type '%s' has no len()", jv_type_name(v));
        return v->u.list.n;
    case JV_DICT: case JV_NS: return v->u.dict->n;
    case JV_UNDEF: return 0;
    default: jx_rt_fail(c, at, "object of type '%s' has no len()", jv_type_name(v));
    }
}

/* Python int(str): optional sign, digits with single underscores, surrounding whitespace. */
static int parse_py_int(const char *s, int64_t *out) {
    while (*s == ' ' || (*s >= 9 && *s <= 13)) s++;
    int neg = 0;
    if (*s == '+' || *s == '-') neg = *s++ == '-';
    if (!(*s >= '0' && *s <= '9')) return 0;
    uint64_t acc = 0;
    int prev_us = 1;
    for (; *s; s++) {
        if (*s == '_') { if (prev_us) return 0; prev_us = 1; continue; }
        if (!(*s >= '0' && *s <= '9')) break;
        prev_us = 0;
        if (acc > (UINT64_MAX - 9) / 10) return 0;
        acc = acc * 10 + (uint64_t)(*s - '0');
    }
    if (prev_us) return 0;
    while (*s == ' ' || (*s >= 9 && *s <= 13)) s++;
    if (*s) return 0;
    if (acc > (uint64_t)INT64_MAX + (uint64_t)neg) return 0;
    *out = neg ? (int64_t)(0 - acc) : (int64_t)acc;
    return 1;
}

static int parse_py_float(const char *s, double *out) {
    while (*s == ' ' || (*s >= 9 && *s <= 13)) s++;
    if (!*s) return 0;
    for (const char *q = s; *q; q++)
        if (*q == 'x' || *q == 'X' || *q == 'p' || *q == 'P') return 0;   /* no hex floats */
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (end == s) return 0;
    while (*end == ' ' || (*end >= 9 && *end <= 13)) end++;
    if (*end) return 0;
    *out = d;
    return 1;
}

static jv *f_tojson(jx_ctx *c, const jnode *at, jv *v, jx_args *a) {
    static const char *const kws[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    check_args(c, at, "tojson", a, 4, kws);
    jv *ea = arg(a, 0, "ensure_ascii"), *ind = arg(a, 1, "indent"), *sep = arg(a, 2, "separators"),
       *sk = arg(a, 3, "sort_keys");
    if (ea && jv_truthy(ea)) jx_rt_fail(c, at, "tojson(ensure_ascii=True) is not supported");
    jx_json_opts o = {.indent = NULL, .item_sep = ", ", .key_sep = ": ", .sort_keys = sk && jv_truthy(sk),
                      .line = at->line, .col = at->col};
    if (ind && ind->k != JV_NONE) {
        if (ind->k == JV_STR) o.indent = ind->u.str.s;
        else {
            int64_t w = need_int(c, at, ind, "tojson indent");
            if (w > 1000) w = 1000;
            char *sp = jx_arena_alloc(A_, (size_t)(w > 0 ? w : 0) + 1);
            if (!sp) jx_rt_fail(c, at, "out of memory");
            memset(sp, ' ', (size_t)(w > 0 ? w : 0));
            sp[w > 0 ? w : 0] = 0;
            o.indent = sp;
        }
        o.item_sep = ",";
    }
    if (sep && sep->k != JV_NONE) {
        if (sep->k != JV_LIST || sep->u.list.n != 2 || sep->u.list.v[0]->k != JV_STR || sep->u.list.v[1]->k != JV_STR)
            jx_rt_fail(c, at, "tojson separators must be a pair of strings");
        o.item_sep = sep->u.list.v[0]->u.str.s;
        o.key_sep = sep->u.list.v[1]->u.str.s;
    }
    jx_buf b = newbuf(c);
    jv_write_json(&b, v, &o, 0);
    return jv_str_ref(A_, E_, b.p, b.n);
}

static jv *html_escape(jx_ctx *c, jv *v) {
    jv *s = jx_to_str(c, v);
    jx_buf b = newbuf(c);
    for (size_t i = 0; i < s->u.str.n; i++) {
        char ch = s->u.str.s[i];
        switch (ch) {
        case '&': jx_buf_puts(&b, "&amp;"); break;
        case '<': jx_buf_puts(&b, "&lt;"); break;
        case '>': jx_buf_puts(&b, "&gt;"); break;
        case '"': jx_buf_puts(&b, "&#34;"); break;
        case '\'': jx_buf_puts(&b, "&#39;"); break;
        default: jx_buf_putc(&b, ch);
        }
    }
    return jv_str_ref(A_, E_, b.p, b.n);
}

/* select/reject/selectattr/rejectattr: args after the optional attribute are test name + args */
static jv *select_impl(jx_ctx *c, const jnode *at, jv *v, jx_args *a, int with_attr, int want) {
    /* jinja2's select_or_reject starts with `if value:` — a falsy input yields nothing */
    if (!jv_truthy(v)) return as_lazy(list_from(c, NULL, 0, 0), JL_GEN, "select_or_reject");
    if (!iterable(v)) jx_rt_fail(c, at, "'%s' object is not iterable", jv_type_name(v));
    jv *items = jx_to_list(c, at, v);
    size_t first = with_attr ? 1 : 0;
    jv *attr = with_attr ? arg(a, 0, "attribute") : NULL;
    if (with_attr && !attr) jx_rt_fail(c, at, "selectattr/rejectattr need an attribute");
    jv *test = a->npos > first ? a->pos[first] : NULL;
    jx_args ta = {0};
    if (a->npos > first + 1) {
        ta.pos = a->pos + first + 1;
        ta.npos = a->npos - first - 1;
    }
    if (!with_attr) {
        ta.kwn = a->kwn;
        ta.kwv = a->kwv;
        ta.nkw = a->nkw;
    }
    if (test) {
        need_str(c, at, test, "select test name");
        if (!jx_test_known(test->u.str.s)) jx_rt_fail(c, at, "No test named '%s'.", test->u.str.s);
    }
    vvec out = {0};
    for (size_t i = 0; i < items->u.list.n; i++) {
        jv *it = items->u.list.v[i];
        jv *x = with_attr ? attr_path(c, at, it, attr) : it;
        int r = test ? jx_call_test(c, at, test->u.str.s, x, &ta) : jv_truthy(x);
        if (r == want) vpush(c, &out, it);
    }
    return as_lazy(list_from(c, out.v, out.n, 0), JL_GEN, "select_or_reject");
}

static jv *f_map(jx_ctx *c, const jnode *at, jv *v, jx_args *a) {
    if (!jv_truthy(v)) return as_lazy(list_from(c, NULL, 0, 0), JL_GEN, "sync_do_map");   /* `if value:` */
    if (!iterable(v)) jx_rt_fail(c, at, "'%s' object is not iterable", jv_type_name(v));
    jv *items = jx_to_list(c, at, v);
    jv *attr = NULL, *dflt = NULL;
    for (size_t k = 0; k < a->nkw; k++) {
        if (!strcmp(a->kwn[k], "attribute")) attr = a->kwv[k];
        else if (!strcmp(a->kwn[k], "default")) dflt = a->kwv[k];
    }
    jv *r = jv_list(A_, E_, items->u.list.n, 0);
    if (a->npos == 0 && attr) {
        for (size_t i = 0; i < items->u.list.n; i++) {
            jv *x = attr_path(c, at, items->u.list.v[i], attr);
            if (x->k == JV_UNDEF && dflt) x = dflt;
            r->u.list.v[i] = x;
        }
        return as_lazy(r, JL_GEN, "sync_do_map");
    }
    if (a->npos == 0) jx_rt_fail(c, at, "map requires a filter argument");
    jv *fname = need_str(c, at, a->pos[0], "map filter name");
    if (!jx_filter_known(fname->u.str.s)) jx_rt_fail(c, at, "No filter named '%s'.", fname->u.str.s);
    jx_args fa = {.pos = a->pos + 1, .npos = a->npos - 1, .kwn = a->kwn, .kwv = a->kwv, .nkw = a->nkw};
    for (size_t i = 0; i < items->u.list.n; i++)
        r->u.list.v[i] = jx_call_filter(c, at, fname->u.str.s, items->u.list.v[i], &fa);
    return as_lazy(r, JL_GEN, "sync_do_map");
}

static jv *f_indent(jx_ctx *c, const jnode *at, jv *v, jx_args *a) {
    jv *w = arg(a, 0, "width"), *first = arg(a, 1, "first"), *blank = arg(a, 2, "blank");
    /* jinja2 does `s += "\n"`: anything but a string fails */
    if (v->k != JV_STR) {
        if (v->k == JV_UNDEF) jx_rt_fail(c, at, "%s", v->u.hint ? v->u.hint : "value is undefined");
        jx_rt_fail(c, at, "unsupported operand type(s) for +=: '%s' and 'str'", jv_type_name(v));
    }
    jv *s = v;
    const char *ind;
    size_t indn;
    char spaces[1001];
    if (w && w->k == JV_STR) { ind = w->u.str.s; indn = w->u.str.n; }
    else {
        int64_t n = w ? need_int(c, at, w, "indent width") : 4;
        if (n < 0) n = 0;
        if (n > 1000) n = 1000;
        memset(spaces, ' ', (size_t)n);
        ind = spaces;
        indn = (size_t)n;
    }
    /* s += "\n"; lines = s.splitlines() — splitlines also breaks on \r, \v, \f, \x1c-\x1e,
     * \x85, \u2028, \u2029; we split on the ASCII ones and \n (what templates produce) */
    jx_buf b = newbuf(c);
    const char *p = s->u.str.s;
    size_t n = s->u.str.n;
    vvec lines = {0};
    size_t st = 0, i = 0;
    while (i < n) {
        char ch = p[i];
        if (ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f' || (ch >= 0x1c && ch <= 0x1e)) {
            vpush(c, &lines, jv_str_ref(A_, E_, p + st, i - st));
            if (ch == '\r' && i + 1 < n && p[i + 1] == '\n') i++;
            st = i + 1;
        }
        i++;
    }
    vpush(c, &lines, jv_str_ref(A_, E_, p + st, n - st));   /* the appended "\n" ends this one */
    int do_blank = blank && jv_truthy(blank);
    for (size_t k = 0; k < lines.n; k++) {
        jv *ln = lines.v[k];
        if (k) jx_buf_putc(&b, '\n');
        if (k && (do_blank || ln->u.str.n)) jx_buf_put(&b, ind, indn);
        jx_buf_put(&b, ln->u.str.s, ln->u.str.n);
    }
    if (first && jv_truthy(first)) {
        jx_buf b2 = newbuf(c);
        jx_buf_put(&b2, ind, indn);
        jx_buf_put(&b2, b.p, b.n);
        return jv_str_ref(A_, E_, b2.p, b2.n);
    }
    return jv_str_ref(A_, E_, b.p, b.n);
}

static jv *f_round(jx_ctx *c, const jnode *at, jv *v, jx_args *a) {
    jv *pr = arg(a, 0, "precision"), *method = arg(a, 1, "method");
    int64_t p = pr ? need_int(c, at, pr, "round precision") : 0;
    const char *m = method ? cstr(c, method) : "common";
    if (v->k == JV_INT || v->k == JV_BOOL) {
        if (strcmp(m, "common")) return jv_float(A_, E_, (double)(v->k == JV_INT ? v->u.i : v->u.b));
        return jv_int(A_, E_, v->k == JV_INT ? v->u.i : v->u.b);
    }
    if (v->k != JV_FLOAT) jx_rt_fail(c, at, "round: expected a number, got '%s'", jv_type_name(v));
    double x = v->u.f;
    if (!strcmp(m, "common")) {
        if (p < 0 || p > 300 || !isfinite(x)) return jv_float(A_, E_, x);
        char tmp[400];
        snprintf(tmp, sizeof tmp, "%.*f", (int)p, x);   /* exact, round-half-even like CPython */
        return jv_float(A_, E_, strtod(tmp, NULL));
    }
    double f = pow(10.0, (double)p);
    if (!strcmp(m, "ceil")) return jv_float(A_, E_, ceil(x * f) / f);
    if (!strcmp(m, "floor")) return jv_float(A_, E_, floor(x * f) / f);
    jx_rt_fail(c, at, "method must be common, ceil or floor");
}

static jv *minmax(jx_ctx *c, const jnode *at, jv *v, jx_args *a, int want_max) {
    jv *items = jx_to_list(c, at, v);
    jv *cs = arg(a, 0, "case_sensitive"), *attr = arg(a, 1, "attribute");
    if (!items->u.list.n) return jv_undef(A_, E_, want_max ? "No aggregated item, sequence was empty." : "No aggregated item, sequence was empty.");
    jv *best = NULL, *bestk = NULL;
    for (size_t i = 0; i < items->u.list.n; i++) {
        jv *it = items->u.list.v[i], *k = attr && attr->k != JV_NONE ? attr_path(c, at, it, attr) : it;
        if (!(cs && jv_truthy(cs))) k = ignore_case(c, k);
        if (!best) { best = it; bestk = k; continue; }
        int r = jv_cmp(E_, at->line, at->col, k, bestk);
        if (want_max ? r > 0 : r < 0) { best = it; bestk = k; }
    }
    return best;
}

static jv *f_unique(jx_ctx *c, const jnode *at, jv *v, jx_args *a) {
    if (!iterable(v)) jx_rt_fail(c, at, "'%s' object is not iterable", jv_type_name(v));
    jv *items = jx_to_list(c, at, v);
    jv *cs = arg(a, 0, "case_sensitive"), *attr = arg(a, 1, "attribute");
    vvec out = {0}, seen = {0};
    for (size_t i = 0; i < items->u.list.n; i++) {
        jv *it = items->u.list.v[i], *k = attr && attr->k != JV_NONE ? attr_path(c, at, it, attr) : it;
        if (!(cs && jv_truthy(cs))) k = ignore_case(c, k);
        int dup = 0;
        for (size_t j = 0; j < seen.n && !dup; j++) dup = jv_eq(seen.v[j], k);
        if (!dup) { vpush(c, &seen, k); vpush(c, &out, it); }
    }
    return as_lazy(list_from(c, out.v, out.n, 0), JL_GEN, "sync_do_unique");
}

static jv *f_sum(jx_ctx *c, const jnode *at, jv *v, jx_args *a) {
    jv *items = jx_to_list(c, at, v);
    jv *attr = arg(a, 0, "attribute"), *start = arg(a, 1, "start");
    jv *acc = start ? start : jv_int(A_, E_, 0);
    for (size_t i = 0; i < items->u.list.n; i++) {
        jv *x = items->u.list.v[i];
        if (attr && attr->k != JV_NONE) x = attr_path(c, at, x, attr);
        jx_args none = {0};
        (void)none;
        if (!((acc->k == JV_INT || acc->k == JV_FLOAT || acc->k == JV_BOOL) &&
              (x->k == JV_INT || x->k == JV_FLOAT || x->k == JV_BOOL)))
            jx_rt_fail(c, at, "unsupported operand type(s) for +: '%s' and '%s'", jv_type_name(acc), jv_type_name(x));
        if (acc->k == JV_FLOAT || x->k == JV_FLOAT) {
            double fa = acc->k == JV_FLOAT ? acc->u.f : (double)(acc->k == JV_INT ? acc->u.i : acc->u.b);
            double fx = x->k == JV_FLOAT ? x->u.f : (double)(x->k == JV_INT ? x->u.i : x->u.b);
            acc = jv_float(A_, E_, fa + fx);
        } else {
            int64_t r, ia = acc->k == JV_INT ? acc->u.i : acc->u.b, ix = x->k == JV_INT ? x->u.i : x->u.b;
            if (__builtin_add_overflow(ia, ix, &r)) jx_rt_fail(c, at, "integer overflow");
            acc = jv_int(A_, E_, r);
        }
    }
    return acc;
}

static jv *call_filter(jx_ctx *c, const jnode *at, const char *name, jv *v, jx_args *a) {
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        jv *dv = arg(a, 0, "default_value"), *bo = arg(a, 1, "boolean");
        if (v->k == JV_UNDEF || (bo && jv_truthy(bo) && !jv_truthy(v))) return dv ? dv : mkstr(c, "", 0);
        return v;
    }
    if (!strcmp(name, "length") || !strcmp(name, "count")) return jv_int(A_, E_, (int64_t)py_len(c, at, v));
    if (!strcmp(name, "string")) return jx_to_str(c, v);
    if (!strcmp(name, "safe")) return jx_to_str(c, v);
    if (!strcmp(name, "trim")) {
        jv *chars = arg(a, 0, "chars");
        if (chars && chars->k != JV_NONE) need_str(c, at, chars, "trim chars");
        return strip(c, jx_to_str(c, v), chars, 3);
    }
    if (!strcmp(name, "upper")) return case_map(c, jx_to_str(c, v), 0);
    if (!strcmp(name, "lower")) return case_map(c, jx_to_str(c, v), 1);
    if (!strcmp(name, "capitalize")) return case_map(c, jx_to_str(c, v), 2);
    if (!strcmp(name, "title")) return case_map(c, jx_to_str(c, v), 5);
    if (!strcmp(name, "tojson")) return f_tojson(c, at, v, a);
    if (!strcmp(name, "items")) {
        if (v->k == JV_UNDEF) return as_lazy(jv_list(A_, E_, 0, 0), JL_GEN, "do_items");
        if (v->k != JV_DICT) jx_rt_fail(c, at, "Can only get item pairs from a mapping.");
        jv *r = jv_list(A_, E_, v->u.dict->n, 0);
        for (size_t i = 0; i < v->u.dict->n; i++) {
            jv *t = jv_list(A_, E_, 2, 1);
            t->u.list.v[0] = v->u.dict->keys[i];
            t->u.list.v[1] = v->u.dict->vals[i];
            r->u.list.v[i] = t;
        }
        return as_lazy(r, JL_GEN, "do_items");
    }
    if (!strcmp(name, "dictsort")) {
        if (v->k != JV_DICT) jx_rt_fail(c, at, "dictsort: expected a mapping, got '%s'", jv_type_name(v));
        jv *cs = arg(a, 0, "case_sensitive"), *by = arg(a, 1, "by"), *rev = arg(a, 2, "reverse");
        int pos = 0;
        if (by) {
            const char *b = cstr(c, by);
            if (!strcmp(b, "value")) pos = 1;
            else if (strcmp(b, "key")) jx_rt_fail(c, at, "You can only sort by either \"key\" or \"value\"");
        }
        size_t n = v->u.dict->n;
        kv *arr = jx_arena_alloc(A_, (n + 1) * sizeof *arr), *tmp = jx_arena_alloc(A_, (n + 1) * sizeof *arr);
        if (!arr || !tmp) jx_rt_fail(c, at, "out of memory");
        for (size_t i = 0; i < n; i++) {
            jv *t = jv_list(A_, E_, 2, 1);
            t->u.list.v[0] = v->u.dict->keys[i];
            t->u.list.v[1] = v->u.dict->vals[i];
            jv *k = pos ? v->u.dict->vals[i] : v->u.dict->keys[i];
            arr[i].key = cs && jv_truthy(cs) ? k : ignore_case(c, k);
            arr[i].item = t;
        }
        msort(c, at, arr, tmp, n, rev && jv_truthy(rev));
        jv *r = jv_list(A_, E_, n, 0);
        for (size_t i = 0; i < n; i++) r->u.list.v[i] = arr[i].item;
        return r;
    }
    if (!strcmp(name, "join")) {
        jv *d = arg(a, 0, "d"), *attr = arg(a, 1, "attribute");
        jv *items = jx_to_list(c, at, v);
        jv *sep = d ? jx_to_str(c, d) : mkstr(c, "", 0);
        jx_buf b = newbuf(c);
        for (size_t i = 0; i < items->u.list.n; i++) {
            if (i) jx_buf_put(&b, sep->u.str.s, sep->u.str.n);
            jv *x = items->u.list.v[i];
            if (attr && attr->k != JV_NONE) x = attr_path(c, at, x, attr);
            jv_write_str(&b, x);
        }
        return jv_str_ref(A_, E_, b.p, b.n);
    }
    if (!strcmp(name, "first")) {
        jv *l = jx_to_list(c, at, v);
        return l->u.list.n ? l->u.list.v[0] : jv_undef(A_, E_, "No first item, sequence was empty.");
    }
    if (!strcmp(name, "last")) {
        if (v->k == JV_LIST && (v->u.list.sub == JL_GEN || v->u.list.sub == JL_ITER))
            jx_rt_fail(c, at, "'%s' object is not reversible", jv_type_name(v));
        jv *l = jx_to_list(c, at, v);
        return l->u.list.n ? l->u.list.v[l->u.list.n - 1] : jv_undef(A_, E_, "No last item, sequence was empty.");
    }
    if (!strcmp(name, "list")) {
        jv *l = jx_to_list(c, at, v);
        return list_from(c, l->u.list.v, l->u.list.n, JL_LIST);
    }
    if (!strcmp(name, "reverse")) {
        if (v->k == JV_STR) {
            jv *l = jx_to_list(c, at, v);
            jx_buf b = newbuf(c);
            for (size_t i = l->u.list.n; i > 0; i--) jx_buf_put(&b, l->u.list.v[i - 1]->u.str.s, l->u.list.v[i - 1]->u.str.n);
            return jv_str_ref(A_, E_, b.p, b.n);
        }
        /* reversed(value) where Python allows it, else list(value) reversed */
        const char *it = NULL;
        if (v->k == JV_LIST) {
            static const char *const names[] = {"list_reverseiterator", "reversed", NULL, "dict_reversekeyiterator",
                                                "dict_reversevalueiterator", "dict_reverseitemiterator",
                                                "range_iterator", NULL};
            it = names[v->u.list.sub];
        } else if (v->k == JV_DICT) it = "dict_reversekeyiterator";
        else if (v->k == JV_UNDEF) it = "reversed";
        jv *l = jx_to_list(c, at, v);
        jv *r = jv_list(A_, E_, l->u.list.n, 0);
        for (size_t i = 0; i < l->u.list.n; i++) r->u.list.v[i] = l->u.list.v[l->u.list.n - 1 - i];
        return it ? as_lazy(r, JL_ITER, it) : r;
    }
    if (!strcmp(name, "map")) return f_map(c, at, v, a);
    if (!strcmp(name, "select")) return select_impl(c, at, v, a, 0, 1);
    if (!strcmp(name, "reject")) return select_impl(c, at, v, a, 0, 0);
    if (!strcmp(name, "selectattr")) return select_impl(c, at, v, a, 1, 1);
    if (!strcmp(name, "rejectattr")) return select_impl(c, at, v, a, 1, 0);
    if (!strcmp(name, "sort")) {
        jv *rev = arg(a, 0, "reverse"), *cs = arg(a, 1, "case_sensitive"), *attr = arg(a, 2, "attribute");
        return sorted(c, at, jx_to_list(c, at, v), rev && jv_truthy(rev), cs && jv_truthy(cs), attr);
    }
    if (!strcmp(name, "unique")) return f_unique(c, at, v, a);
    if (!strcmp(name, "min")) return minmax(c, at, v, a, 0);
    if (!strcmp(name, "max")) return minmax(c, at, v, a, 1);
    if (!strcmp(name, "sum")) return f_sum(c, at, v, a);
    if (!strcmp(name, "replace")) {
        jv *old = arg(a, 0, "old"), *nw = arg(a, 1, "new"), *cnt = arg(a, 2, "count");
        if (!old || !nw) jx_rt_fail(c, at, "replace() missing arguments");
        return str_replace(c, jx_to_str(c, v), jx_to_str(c, old), jx_to_str(c, nw),
                           cnt && cnt->k != JV_NONE ? need_int(c, at, cnt, "replace count") : -1);
    }
    if (!strcmp(name, "indent")) return f_indent(c, at, v, a);
    if (!strcmp(name, "int")) {
        jv *dflt = arg(a, 0, "default"), *base = arg(a, 1, "base");
        if (base && !(base->k == JV_INT && base->u.i == 10)) jx_rt_fail(c, at, "int(base != 10) is not supported");
        if (v->k == JV_UNDEF) jx_rt_fail(c, at, "%s", v->u.hint ? v->u.hint : "value is undefined");
        if (v->k == JV_INT) return v;
        if (v->k == JV_BOOL) return jv_int(A_, E_, v->u.b);
        if (v->k == JV_FLOAT && isfinite(v->u.f) && fabs(v->u.f) < 9.2e18) return jv_int(A_, E_, (int64_t)v->u.f);
        if (v->k == JV_STR) {
            int64_t i;
            double d;
            if (parse_py_int(v->u.str.s, &i)) return jv_int(A_, E_, i);
            if (parse_py_float(v->u.str.s, &d) && isfinite(d) && fabs(d) < 9.2e18) return jv_int(A_, E_, (int64_t)d);
        }
        return dflt ? dflt : jv_int(A_, E_, 0);
    }
    if (!strcmp(name, "float")) {
        jv *dflt = arg(a, 0, "default");
        if (v->k == JV_UNDEF) jx_rt_fail(c, at, "%s", v->u.hint ? v->u.hint : "value is undefined");
        if (v->k == JV_FLOAT) return v;
        if (v->k == JV_INT || v->k == JV_BOOL) return jv_float(A_, E_, (double)(v->k == JV_INT ? v->u.i : v->u.b));
        double d;
        if (v->k == JV_STR && parse_py_float(v->u.str.s, &d)) return jv_float(A_, E_, d);
        return dflt ? dflt : jv_float(A_, E_, 0.0);
    }
    if (!strcmp(name, "abs")) {
        if (v->k == JV_INT) {
            if (v->u.i == INT64_MIN) jx_rt_fail(c, at, "integer overflow");
            return jv_int(A_, E_, v->u.i < 0 ? -v->u.i : v->u.i);
        }
        if (v->k == JV_BOOL) return jv_int(A_, E_, v->u.b);
        if (v->k == JV_FLOAT) return jv_float(A_, E_, fabs(v->u.f));
        jx_rt_fail(c, at, "bad operand type for abs(): '%s'", jv_type_name(v));
    }
    if (!strcmp(name, "round")) return f_round(c, at, v, a);
    if (!strcmp(name, "escape") || !strcmp(name, "e") || !strcmp(name, "forceescape")) return html_escape(c, v);
    if (!strcmp(name, "attribute")) {
        jv *nm = arg(a, 0, "name");
        if (!nm) jx_rt_fail(c, at, "attribute() missing name");
        return attr_path(c, at, v, nm);
    }
    if (!strcmp(name, "center")) {
        jv *w = arg(a, 0, "width");
        int64_t width = w ? need_int(c, at, w, "center width") : 80;
        jv *s = jx_to_str(c, v);
        int64_t len = (int64_t)jx_utf8_len(s->u.str.s, s->u.str.n);
        if (width > 100000) width = 100000;
        if (width <= len) return s;
        int64_t marg = width - len, left = marg / 2 + (marg & width & 1);
        jx_buf b = newbuf(c);
        for (int64_t i = 0; i < left; i++) jx_buf_putc(&b, ' ');
        jx_buf_put(&b, s->u.str.s, s->u.str.n);
        for (int64_t i = 0; i < marg - left; i++) jx_buf_putc(&b, ' ');
        return jv_str_ref(A_, E_, b.p, b.n);
    }
    if (!strcmp(name, "wordcount")) {
        jv *s = jx_to_str(c, v);
        int64_t cnt = 0;
        int in = 0;
        for (size_t i = 0; i < s->u.str.n; i++) {
            unsigned char ch = (unsigned char)s->u.str.s[i];
            int w = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch >= 0x80;
            if (w && !in) cnt++;
            in = w;
        }
        return jv_int(A_, E_, cnt);
    }
    if (!strcmp(name, "format")) {
        jv *s = jx_to_str(c, v);
        jv *t = list_from(c, a->pos, a->npos, 1);
        return jx_python_mod_format(c, at, s, t);
    }
    if (!strcmp(name, "batch")) {
        jv *lc = arg(a, 0, "linecount"), *fill = arg(a, 1, "fill_with");
        int64_t n = lc ? need_int(c, at, lc, "batch linecount") : 0;
        if (n <= 0) jx_rt_fail(c, at, "batch linecount must be positive");
        jv *items = jx_to_list(c, at, v);
        vvec out = {0};
        for (size_t i = 0; i < items->u.list.n; i += (size_t)n) {
            size_t m = items->u.list.n - i < (size_t)n ? items->u.list.n - i : (size_t)n;
            jv *row = jv_list(A_, E_, fill && m < (size_t)n ? (size_t)n : m, 0);
            for (size_t k = 0; k < row->u.list.n; k++) row->u.list.v[k] = k < m ? items->u.list.v[i + k] : fill;
            vpush(c, &out, row);
        }
        return as_lazy(list_from(c, out.v, out.n, 0), JL_GEN, "do_batch");
    }
    jx_rt_fail(c, at, "filter '%s' is not implemented", name);
}

/* jinja2's select/reject/map/unique/batch/items are Python generators: an error inside them
 * (a test that fails on an item, a non-iterable input) surfaces only when the template consumes
 * the result. We compute eagerly but defer such an error into the returned generator. The
 * wrapped filters call only builtin tests/filters, never macros, so unwinding out of them
 * leaves no evaluator state half-changed. */
static const char *const lazy_filters[] = {"select", "reject", "selectattr", "rejectattr", "map",
                                           "unique", "batch", "items", NULL};
static const char *const lazy_names[] = {"select_or_reject", "select_or_reject", "select_or_reject",
                                         "select_or_reject", "sync_do_map", "sync_do_unique",
                                         "do_batch", "do_items"};

__attribute__((noinline)) static int lazy_index(const char *name) {
    for (int i = 0; lazy_filters[i]; i++)
        if (!strcmp(lazy_filters[i], name)) return i;
    return -1;
}

jv *jx_call_filter(jx_ctx *c, const jnode *at, const char *name, jv *v, jx_args *a) {
    jx_step(c, at);
    const int lz = lazy_index(name);
    if (lz < 0) return call_filter(c, at, name, v, a);
    jx_err *e = E_;
    jmp_buf saved;
    memcpy(saved, e->jb, sizeof saved);
    jv *volatile r = NULL;
    if (setjmp(e->jb) == 0) {
        r = call_filter(c, at, name, v, a);
        memcpy(e->jb, saved, sizeof saved);
        return r;
    }
    memcpy(e->jb, saved, sizeof saved);
    jv *g = as_lazy(jv_list(A_, E_, 0, JL_LIST), JL_GEN, lazy_names[lz]);
    size_t n = strlen(e->msg);
    char *m = jx_arena_alloc(A_, n + 1);
    if (!m) jx_fail_raw(e, e->msg);
    memcpy(m, e->msg, n + 1);
    g->u.list.lazy_err = m;
    return g;
}

/* ---------------------------------------------------------------- methods */

jv *jx_call_method(jx_ctx *c, const jnode *at, jv *self, const char *name, jx_args *a) {
    if (in_list(unsafe_methods, name) && (self->k == JV_LIST || self->k == JV_DICT))
        jx_rt_fail(c, at, "access to attribute '%s' of '%s' object is unsafe.", name, jv_type_name(self));
    if (self->k == JV_LOOP && !strcmp(name, "cycle")) {
        if (!a->npos) jx_rt_fail(c, at, "no items for cycling given");
        return a->pos[jx_loop_index(self) % a->npos];
    }
    if (self->k == JV_DICT) {
        if (!strcmp(name, "get")) {
            jv *k = arg(a, 0, "key"), *d = arg(a, 1, "default");
            if (!k) jx_rt_fail(c, at, "get expected at least 1 argument, got 0");
            jv *r = jv_dict_get(self, k);
            return r ? r : d ? d : &jx_none_v;
        }
        if (!strcmp(name, "items")) { jx_args none = {0}; return as_lazy(jx_call_filter(c, at, "items", self, &none), JL_ITEMS, NULL); }
        if (!strcmp(name, "keys")) return list_from(c, self->u.dict->keys, self->u.dict->n, JL_KEYS);
        if (!strcmp(name, "values")) return list_from(c, self->u.dict->vals, self->u.dict->n, JL_VALUES);
        if (!strcmp(name, "copy")) {
            jv *d = jv_dict(A_, E_, JV_DICT);
            for (size_t i = 0; i < self->u.dict->n; i++) jv_dict_set(A_, E_, d, self->u.dict->keys[i], self->u.dict->vals[i]);
            return d;
        }
    }
    if (self->k == JV_LIST) {
        if (!strcmp(name, "index") || !strcmp(name, "count")) {
            jv *x = arg(a, 0, "value");
            if (!x) jx_rt_fail(c, at, "%s() takes exactly one argument", name);
            int64_t cnt = 0;
            for (size_t i = 0; i < self->u.list.n; i++)
                if (jv_eq(self->u.list.v[i], x)) {
                    if (name[0] == 'i') return jv_int(A_, E_, (int64_t)i);
                    cnt++;
                }
            if (name[0] == 'i') jx_rt_fail(c, at, "value is not in list");
            return jv_int(A_, E_, cnt);
        }
        if (!strcmp(name, "copy")) return list_from(c, self->u.list.v, self->u.list.n, 0);
    }
    if (self->k == JV_STR) {
        jv *x = arg(a, 0, "x"), *y = arg(a, 1, "y");
        if (!strcmp(name, "strip")) return strip(c, self, x && x->k != JV_NONE ? need_str(c, at, x, "strip") : NULL, 3);
        if (!strcmp(name, "lstrip")) return strip(c, self, x && x->k != JV_NONE ? need_str(c, at, x, "lstrip") : NULL, 1);
        if (!strcmp(name, "rstrip")) return strip(c, self, x && x->k != JV_NONE ? need_str(c, at, x, "rstrip") : NULL, 2);
        if (!strcmp(name, "split") || !strcmp(name, "rsplit")) {
            jv *sep = arg(a, 0, "sep"), *mx = arg(a, 1, "maxsplit");
            return str_split(c, at, self, sep, mx ? need_int(c, at, mx, "maxsplit") : -1, name[0] == 'r');
        }
        if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
            if (!x) jx_rt_fail(c, at, "%s() takes at least 1 argument", name);
            int sw = name[0] == 's';
            if (x->k == JV_LIST && x->u.list.sub == JL_TUPLE) {
                for (size_t i = 0; i < x->u.list.n; i++) {
                    jv *p = need_str(c, at, x->u.list.v[i], name);
                    if (sw ? starts_with(self, p) : ends_with(self, p)) return &jx_true_v;
                }
                return &jx_false_v;
            }
            if (x->k != JV_STR)
                jx_rt_fail(c, at, "%s first arg must be str or a tuple of str, not %s", name, jv_type_name(x));
            return jv_bool(sw ? starts_with(self, x) : ends_with(self, x));
        }
        if (!strcmp(name, "replace")) {
            jv *cnt = arg(a, 2, "count");
            if (!x || !y) jx_rt_fail(c, at, "replace expected at least 2 arguments");
            return str_replace(c, self, need_str(c, at, x, "replace"), need_str(c, at, y, "replace"),
                               cnt ? need_int(c, at, cnt, "replace count") : -1);
        }
        if (!strcmp(name, "upper")) return case_map(c, self, 0);
        if (!strcmp(name, "lower") || !strcmp(name, "casefold")) return case_map(c, self, 1);
        if (!strcmp(name, "capitalize")) return case_map(c, self, 2);
        if (!strcmp(name, "title")) return case_map(c, self, 3);
        if (!strcmp(name, "swapcase")) return case_map(c, self, 4);
        if (!strcmp(name, "find") || !strcmp(name, "rfind") || !strcmp(name, "index") ||
            !strcmp(name, "rindex") || !strcmp(name, "count")) {
            if (!x) jx_rt_fail(c, at, "%s() takes at least 1 argument", name);
            need_str(c, at, x, name);
            if (!strcmp(name, "count")) {
                int64_t cnt = 0;
                if (!x->u.str.n) return jv_int(A_, E_, (int64_t)jx_utf8_len(self->u.str.s, self->u.str.n) + 1);
                size_t pos = 0;
                const char *f;
                while ((f = memfind(self->u.str.s + pos, self->u.str.n - pos, x->u.str.s, x->u.str.n))) {
                    cnt++;
                    pos = (size_t)(f - self->u.str.s) + x->u.str.n;
                }
                return jv_int(A_, E_, cnt);
            }
            const char *f = name[0] == 'r' ? memrfind(self->u.str.s, self->u.str.n, x->u.str.s, x->u.str.n)
                                           : memfind(self->u.str.s, self->u.str.n, x->u.str.s, x->u.str.n);
            if (!f) {
                if (strstr(name, "index")) jx_rt_fail(c, at, "substring not found");
                return jv_int(A_, E_, -1);
            }
            return jv_int(A_, E_, (int64_t)jx_utf8_len(self->u.str.s, (size_t)(f - self->u.str.s)));
        }
        if (!strcmp(name, "join")) {
            if (!x) jx_rt_fail(c, at, "join() takes exactly one argument");
            return str_join(c, at, self, jx_to_list(c, at, x));
        }
        if (!strcmp(name, "splitlines")) {
            vvec out = {0};
            const char *p = self->u.str.s;
            size_t n = self->u.str.n, st = 0;
            int keep = x && jv_truthy(x);
            for (size_t i = 0; i < n; i++) {
                char ch = p[i];
                if (ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f' || (ch >= 0x1c && ch <= 0x1e)) {
                    size_t e = i;
                    if (ch == '\r' && i + 1 < n && p[i + 1] == '\n') i++;
                    vpush(c, &out, jv_str_ref(A_, E_, p + st, (keep ? i + 1 : e) - st));
                    st = i + 1;
                }
            }
            if (st < n) vpush(c, &out, jv_str_ref(A_, E_, p + st, n - st));
            return list_from(c, out.v, out.n, 0);
        }
        if (!strcmp(name, "isdigit") || !strcmp(name, "isnumeric") || !strcmp(name, "isdecimal")) return jv_bool(str_pred(self, 0));
        if (!strcmp(name, "isalpha")) return jv_bool(str_pred(self, 1));
        if (!strcmp(name, "isspace")) return jv_bool(str_pred(self, 2));
        if (!strcmp(name, "isalnum")) return jv_bool(str_pred(self, 3));
        if (!strcmp(name, "islower")) return jv_bool(str_pred(self, 4));
        if (!strcmp(name, "isupper")) return jv_bool(str_pred(self, 5));
        if (!strcmp(name, "removeprefix") || !strcmp(name, "removesuffix")) {
            if (!x) jx_rt_fail(c, at, "%s() takes exactly one argument", name);
            need_str(c, at, x, name);
            if (name[6] == 'p' && starts_with(self, x)) return jv_str_ref(A_, E_, self->u.str.s + x->u.str.n, self->u.str.n - x->u.str.n);
            if (name[6] == 's' && ends_with(self, x)) return jv_str_ref(A_, E_, self->u.str.s, self->u.str.n - x->u.str.n);
            return self;
        }
        if (!strcmp(name, "ljust") || !strcmp(name, "rjust") || !strcmp(name, "center") || !strcmp(name, "zfill")) {
            if (!x) jx_rt_fail(c, at, "%s() takes at least 1 argument", name);
            int64_t w = need_int(c, at, x, name), len = (int64_t)jx_utf8_len(self->u.str.s, self->u.str.n);
            if (w > 100000) w = 100000;
            if (w <= len) return self;
            jx_buf b = newbuf(c);
            int64_t pad = w - len, left = name[0] == 'l' ? 0 : name[0] == 'c' ? pad / 2 + (pad & w & 1) : pad;
            char fill = name[0] == 'z' ? '0' : ' ';
            for (int64_t i = 0; i < left; i++) jx_buf_putc(&b, fill);
            jx_buf_put(&b, self->u.str.s, self->u.str.n);
            for (int64_t i = left; i < pad; i++) jx_buf_putc(&b, fill);
            return jv_str_ref(A_, E_, b.p, b.n);
        }
        if (!strcmp(name, "partition") || !strcmp(name, "rpartition")) {
            if (!x) jx_rt_fail(c, at, "%s() takes exactly one argument", name);
            need_str(c, at, x, name);
            const char *f = name[0] == 'r' ? memrfind(self->u.str.s, self->u.str.n, x->u.str.s, x->u.str.n)
                                           : memfind(self->u.str.s, self->u.str.n, x->u.str.s, x->u.str.n);
            jv *t = jv_list(A_, E_, 3, 1);
            jv *empty = mkstr(c, "", 0);
            if (!f) {
                t->u.list.v[0] = name[0] == 'r' ? empty : self;
                t->u.list.v[1] = empty;
                t->u.list.v[2] = name[0] == 'r' ? self : empty;
            } else {
                size_t off = (size_t)(f - self->u.str.s);
                t->u.list.v[0] = jv_str_ref(A_, E_, self->u.str.s, off);
                t->u.list.v[1] = x;
                t->u.list.v[2] = jv_str_ref(A_, E_, f + x->u.str.n, self->u.str.n - off - x->u.str.n);
            }
            return t;
        }
    }
    jx_rt_fail(c, at, "method '%s' of '%s' objects is not supported", name, jv_type_name(self));
}

/* ---------------------------------------------------------------- globals */

jv *jx_call_global(jx_ctx *c, const jnode *at, int func, jx_args *a) {
    switch (func) {
    case G_RANGE: {
        if (a->nkw) jx_rt_fail(c, at, "range() takes no keyword arguments");
        if (a->npos < 1 || a->npos > 3) jx_rt_fail(c, at, "range expected 1 to 3 arguments, got %zu", a->npos);
        int64_t lo = 0, hi, st = 1;
        if (a->npos == 1) hi = need_int(c, at, a->pos[0], "range");
        else {
            lo = need_int(c, at, a->pos[0], "range");
            hi = need_int(c, at, a->pos[1], "range");
            if (a->npos == 3) st = need_int(c, at, a->pos[2], "range");
        }
        if (st == 0) jx_rt_fail(c, at, "range() arg 3 must not be zero");
        int64_t n = 0;
        if (st > 0 && hi > lo) n = (int64_t)(((__int128)hi - lo + st - 1) / st);
        if (st < 0 && lo > hi) n = (int64_t)(((__int128)lo - hi + (-(__int128)st) - 1) / (-(__int128)st));
        /* jinja2's sandbox caps ranges at MAX_RANGE */
        if (n > 100000) jx_rt_fail(c, at, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
        jv *l = jv_list(A_, E_, (size_t)n, JL_RANGE);
        for (int64_t i = 0; i < n; i++) l->u.list.v[i] = jv_int(A_, E_, lo + i * st);
        l->u.list.rs = lo;
        l->u.list.re = hi;
        l->u.list.rst = st;
        return l;
    }
    case G_NAMESPACE: case G_DICT: {
        jv *d = jv_dict(A_, E_, func == G_NAMESPACE ? JV_NS : JV_DICT);
        if (a->npos > 1) jx_rt_fail(c, at, "%s expected at most 1 positional argument", func == G_DICT ? "dict" : "namespace");
        if (a->npos == 1) {
            jv *src = a->pos[0];
            if (src->k == JV_DICT || src->k == JV_NS) {
                for (size_t i = 0; i < src->u.dict->n; i++) jv_dict_set(A_, E_, d, src->u.dict->keys[i], src->u.dict->vals[i]);
            } else {
                jv *l = jx_to_list(c, at, src);
                for (size_t i = 0; i < l->u.list.n; i++) {
                    jv *pair = jx_to_list(c, at, l->u.list.v[i]);
                    if (pair->u.list.n != 2) jx_rt_fail(c, at, "dictionary update sequence element #%zu has length %zu; 2 is required", i, pair->u.list.n);
                    jv_dict_set(A_, E_, d, pair->u.list.v[0], pair->u.list.v[1]);
                }
            }
        }
        for (size_t k = 0; k < a->nkw; k++)
            jv_dict_set(A_, E_, d, mkstr(c, a->kwn[k], strlen(a->kwn[k])), a->kwv[k]);
        if (func == G_NAMESPACE)
            for (size_t i = 0; i < d->u.dict->n; i++) {
                jv *k = d->u.dict->keys[i];
                if (k->k == JV_STR && k->u.str.n && k->u.str.s[0] == '_')
                    jx_rt_fail(c, at, "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '%s'. Please rename the attribute.", k->u.str.s);
            }
        return d;
    }
    case G_RAISE: {
        jv *m = arg(a, 0, "message");
        jv *s = m ? jx_to_str(c, m) : mkstr(c, "", 0);
        jx_raise(c, at, s->u.str.s, s->u.str.n);
    }
    case G_STRFTIME: {
        jv *f = arg(a, 0, "format");
        if (!f) jx_rt_fail(c, at, "strftime_now() missing format");
        need_str(c, at, f, "strftime_now");
        time_t t = time(NULL);
        struct tm tmv;
        localtime_r(&t, &tmv);
        char buf[512];
        size_t n = strftime(buf, sizeof buf, f->u.str.s, &tmv);
        return mkstr(c, buf, n);
    }
    default:
        jx_rt_fail(c, at, "'%s' is not supported", global_names[func]);
    }
}
