/* jinja_parse.c — the Jinja parser: tokens -> AST (jnode nodes), following jinja2/parser.py's
 * grammar and operator precedence function by function (parse_tuple, parse_condexpr, ...).
 * Statements: if/elif/else, for (+else, filter), set (+block, namespace attr), macro, filter,
 * with, block, print, raw (lexer), break/continue (loopcontrols), generation (transformers). */
#include "template/jinja.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    jx_arena *a;
    jx_err *e;
    const jx_toks *t;
    size_t i;
    int depth, max_depth, loop_depth;
    int chain;   /* binary-operator nodes in the current expression: left-deep trees recurse */
} P;

typedef struct {
    jnode **v;
    size_t n, cap;
} nvec;

static const jx_tok *cur(P *p) { return &p->t->v[p->i]; }
static const jx_tok *look(P *p) { return p->i + 1 < p->t->n ? &p->t->v[p->i + 1] : &p->t->v[p->t->n - 1]; }
static const jx_tok *adv(P *p) {
    const jx_tok *t = cur(p);
    if (p->i + 1 < p->t->n) p->i++;
    return t;
}

static void tok_desc(const jx_tok *t, char *out, size_t cap) {
    switch (t->k) {
    case JT_DATA: snprintf(out, cap, "template data"); break;
    case JT_BLOCK_BEGIN: snprintf(out, cap, "begin of statement block"); break;
    case JT_BLOCK_END: snprintf(out, cap, "end of statement block"); break;
    case JT_VAR_BEGIN: snprintf(out, cap, "begin of print statement"); break;
    case JT_VAR_END: snprintf(out, cap, "end of print statement"); break;
    case JT_STRING: snprintf(out, cap, "string"); break;
    case JT_EOF: snprintf(out, cap, "end of template"); break;
    default: snprintf(out, cap, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s); break;
    }
}

_Noreturn static void pfail(P *p, const jx_tok *t, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void pfail(P *p, const jx_tok *t, const char *fmt, ...) {
    char m[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    jx_fail(p->e, t->line, t->col, "syntax error: %s", m);
}

static void *palloc(P *p, size_t n) {
    void *x = jx_arena_alloc(p->a, n);
    if (!x) jx_fail(p->e, cur(p)->line, cur(p)->col, "template too large");
    memset(x, 0, n);
    return x;
}

static char *pstrdup(P *p, const char *s, size_t n) {
    char *o = palloc(p, n + 1);
    memcpy(o, s, n);
    return o;
}

static jnode *mk(P *p, int kind, const jx_tok *t) {
    jnode *n = palloc(p, sizeof *n);
    n->kind = kind;
    n->line = t->line;
    n->col = t->col;
    return n;
}

static void push(P *p, nvec *v, jnode *n) {
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 4;
        jnode **nv = palloc(p, nc * sizeof *nv);
        if (v->n) memcpy(nv, v->v, v->n * sizeof *nv);
        v->v = nv;
        v->cap = nc;
    }
    v->v[v->n++] = n;
}

static int is_op(const jx_tok *t, const char *op) {
    return t->k == JT_OP && t->n == strlen(op) && !memcmp(t->s, op, t->n);
}
static int is_name(const jx_tok *t, const char *nm) {
    return t->k == JT_NAME && t->n == strlen(nm) && !memcmp(t->s, nm, t->n);
}

static void expect_op(P *p, const char *op) {
    if (!is_op(cur(p), op)) {
        char d[64];
        tok_desc(cur(p), d, sizeof d);
        pfail(p, cur(p), "expected '%s', got %s", op, d);
    }
    adv(p);
}

static const jx_tok *expect_kind(P *p, jt_kind k, const char *what) {
    if (cur(p)->k != k) {
        char d[64];
        tok_desc(cur(p), d, sizeof d);
        pfail(p, cur(p), "expected %s, got %s", what, d);
    }
    return adv(p);
}

static const char *tok_name(P *p, const jx_tok *t) { return pstrdup(p, t->s, t->n); }

static void enter(P *p) {
    if (++p->depth > p->max_depth) pfail(p, cur(p), "template nested too deeply");
}
static void leave(P *p) { p->depth--; }

/* ---------------------------------------------------------------- expressions */

static jnode *parse_expression(P *p, int with_condexpr);
static jnode *parse_tuple(P *p, int simplified, int with_condexpr, const char *extra_end,
                       int explicit_parens);
static jnode *parse_unary(P *p, int with_filter);
static jnode *parse_primary(P *p);
static jnode *parse_postfix(P *p, jnode *node);
static jnode *parse_filter(P *p, jnode *node, int start_inline);

/* '(' args ')' into node->kids (positional), node->names/kids2 (keywords). */
static void parse_call_args(P *p, jnode *node) {
    nvec pos = {0}, kwv = {0};
    const char **names = NULL;
    size_t nn = 0, ncap = 0;
    expect_op(p, "(");
    while (!is_op(cur(p), ")")) {
        if (pos.n || kwv.n) {
            expect_op(p, ",");
            if (is_op(cur(p), ")")) break;
        }
        if (is_op(cur(p), "*") || is_op(cur(p), "**"))
            pfail(p, cur(p), "*args / **kwargs in calls are not supported");
        if (cur(p)->k == JT_NAME && is_op(look(p), "=")) {
            const char *k = tok_name(p, cur(p));
            adv(p);
            adv(p);
            push(p, &kwv, parse_expression(p, 1));
            if (nn == ncap) {
                size_t nc = ncap ? ncap * 2 : 4;
                const char **x = palloc(p, nc * sizeof *x);
                if (nn) memcpy(x, names, nn * sizeof *x);
                names = x;
                ncap = nc;
            }
            names[nn++] = k;
        } else {
            if (kwv.n) pfail(p, cur(p), "positional argument follows keyword argument");
            push(p, &pos, parse_expression(p, 1));
        }
    }
    expect_op(p, ")");
    node->kids = pos.v;
    node->nkids = pos.n;
    node->kids2 = kwv.v;
    node->nkids2 = kwv.n;
    node->names = names;
    node->nnames = nn;
}

static const char *dotted_name(P *p) {
    const jx_tok *t = expect_kind(p, JT_NAME, "name");
    char buf[256];
    size_t n = t->n < 200 ? t->n : 200;
    memcpy(buf, t->s, n);
    while (is_op(cur(p), ".")) {
        adv(p);
        const jx_tok *u = expect_kind(p, JT_NAME, "name");
        if (n + 1 + u->n >= sizeof buf) pfail(p, u, "name too long");
        buf[n++] = '.';
        memcpy(buf + n, u->s, u->n);
        n += u->n;
    }
    return pstrdup(p, buf, n);
}

static jnode *parse_filter(P *p, jnode *node, int start_inline) {
    while (is_op(cur(p), "|") || start_inline) {
        if (!start_inline) adv(p);
        const jx_tok *t = cur(p);
        if (++p->chain > 4 * p->max_depth) pfail(p, t, "expression too long");
        jnode *f = mk(p, N_FILTER, t);
        f->s = dotted_name(p);
        if (!jx_filter_known(f->s)) pfail(p, t, "No filter named '%s'.", f->s);
        if (is_op(cur(p), "(")) parse_call_args(p, f);
        f->a = node;
        node = f;
        start_inline = 0;
    }
    return node;
}

static jnode *parse_test(P *p, jnode *node) {
    const jx_tok *is = adv(p);   /* 'is' */
    int negated = 0;
    if (is_name(cur(p), "not")) { adv(p); negated = 1; }
    const jx_tok *t = cur(p);
    jnode *n = mk(p, N_TEST, is);
    n->s = dotted_name(p);
    if (!jx_test_known(n->s)) pfail(p, t, "No test named '%s'.", n->s);
    const jx_tok *c = cur(p);
    if (is_op(c, "(")) parse_call_args(p, n);
    else if ((c->k == JT_NAME || c->k == JT_STRING || c->k == JT_INT || c->k == JT_FLOAT ||
              is_op(c, "[") || is_op(c, "{")) &&
             !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is")) pfail(p, c, "You cannot chain multiple tests with is");
        jnode *arg = parse_postfix(p, parse_primary(p));
        n->kids = palloc(p, sizeof(jnode *));
        n->kids[0] = arg;
        n->nkids = 1;
    }
    n->a = node;
    if (negated) {
        jnode *x = mk(p, N_NOT, is);
        x->a = n;
        return x;
    }
    return n;
}

static jnode *parse_subscribed(P *p) {
    const jx_tok *t = cur(p);
    jnode *args[3] = {NULL, NULL, NULL};
    if (is_op(t, ":")) adv(p);
    else {
        jnode *node = parse_expression(p, 1);
        if (!is_op(cur(p), ":")) return node;
        adv(p);
        args[0] = node;
    }
    if (!is_op(cur(p), ":") && !is_op(cur(p), "]") && !is_op(cur(p), ",")) args[1] = parse_expression(p, 1);
    if (is_op(cur(p), ":")) {
        adv(p);
        if (!is_op(cur(p), "]") && !is_op(cur(p), ",")) args[2] = parse_expression(p, 1);
    }
    jnode *s = mk(p, N_SLICE, t);
    s->b = args[0];
    s->c = args[1];
    s->d = args[2];
    return s;
}

static jnode *parse_subscript(P *p, jnode *node) {
    const jx_tok *t = adv(p);
    if (is_op(t, ".")) {
        const jx_tok *a = cur(p);
        if (a->k == JT_NAME) {
            adv(p);
            jnode *g = mk(p, N_GETATTR, t);
            g->a = node;
            g->s = tok_name(p, a);
            return g;
        }
        if (a->k == JT_INT) {
            adv(p);
            jnode *g = mk(p, N_GETITEM, t);
            g->a = node;
            g->b = mk(p, N_CONST, a);
            g->b->konst = jv_int(p->a, p->e, a->i);
            return g;
        }
        pfail(p, a, "expected name or number");
    }
    /* '[' */
    nvec args = {0};
    while (!is_op(cur(p), "]")) {
        if (args.n) expect_op(p, ",");
        push(p, &args, parse_subscribed(p));
    }
    expect_op(p, "]");
    jnode *g = mk(p, N_GETITEM, t);
    g->a = node;
    if (args.n == 1) g->b = args.v[0];
    else {
        jnode *tu = mk(p, N_TUPLE, t);
        tu->kids = args.v;
        tu->nkids = args.n;
        g->b = tu;
    }
    if (g->b && g->b->kind == N_SLICE) {
        g->b->a = node;
        return g->b;
    }
    return g;
}

static jnode *parse_call(P *p, jnode *node) {
    jnode *c = mk(p, N_CALL, cur(p));
    c->line = node->line;   /* errors point at the callee, not at '(' */
    c->col = node->col;
    parse_call_args(p, c);
    c->a = node;
    return c;
}

static jnode *parse_postfix(P *p, jnode *node) {
    int k = 0;
    for (;; k++, enter(p)) {
        const jx_tok *t = cur(p);
        if (is_op(t, ".") || is_op(t, "[")) node = parse_subscript(p, node);
        else if (is_op(t, "(")) node = parse_call(p, node);
        else break;
    }
    while (k-- > 0) leave(p);
    return node;
}

static jnode *parse_filter_expr(P *p, jnode *node) {
    int k = 0;
    for (;; k++, enter(p)) {
        const jx_tok *t = cur(p);
        if (is_op(t, "|")) node = parse_filter(p, node, 0);
        else if (is_name(t, "is")) node = parse_test(p, node);
        else if (is_op(t, "(")) node = parse_call(p, node);
        else break;
    }
    while (k-- > 0) leave(p);
    return node;
}

static jnode *parse_primary(P *p) {
    enter(p);
    const jx_tok *t = cur(p);
    jnode *n;
    if (t->k == JT_NAME) {
        n = mk(p, N_CONST, t);
        if (is_name(t, "true") || is_name(t, "True")) n->konst = &jx_true_v;
        else if (is_name(t, "false") || is_name(t, "False")) n->konst = &jx_false_v;
        else if (is_name(t, "none") || is_name(t, "None")) n->konst = &jx_none_v;
        else {
            n->kind = N_NAME;
            n->s = tok_name(p, t);
        }
        adv(p);
    } else if (t->k == JT_STRING) {
        size_t total = 0;
        size_t j = p->i;
        while (p->t->v[j].k == JT_STRING) total += p->t->v[j++].n;
        char *buf = palloc(p, total + 1);
        size_t k = 0;
        while (cur(p)->k == JT_STRING) {
            memcpy(buf + k, cur(p)->s, cur(p)->n);
            k += cur(p)->n;
            adv(p);
        }
        n = mk(p, N_CONST, t);
        n->konst = jv_str_ref(p->a, p->e, buf, k);
    } else if (t->k == JT_INT) {
        adv(p);
        n = mk(p, N_CONST, t);
        n->konst = jv_int(p->a, p->e, t->i);
    } else if (t->k == JT_FLOAT) {
        adv(p);
        n = mk(p, N_CONST, t);
        n->konst = jv_float(p->a, p->e, t->f);
    } else if (is_op(t, "(")) {
        adv(p);
        n = parse_tuple(p, 0, 1, NULL, 1);
        expect_op(p, ")");
    } else if (is_op(t, "[")) {
        adv(p);
        nvec items = {0};
        while (!is_op(cur(p), "]")) {
            if (items.n) expect_op(p, ",");
            if (is_op(cur(p), "]")) break;
            push(p, &items, parse_expression(p, 1));
        }
        expect_op(p, "]");
        n = mk(p, N_LIST, t);
        n->kids = items.v;
        n->nkids = items.n;
    } else if (is_op(t, "{")) {
        adv(p);
        nvec ks = {0}, vs = {0};
        while (!is_op(cur(p), "}")) {
            if (ks.n) expect_op(p, ",");
            if (is_op(cur(p), "}")) break;
            push(p, &ks, parse_expression(p, 1));
            expect_op(p, ":");
            push(p, &vs, parse_expression(p, 1));
        }
        expect_op(p, "}");
        n = mk(p, N_DICT, t);
        n->kids = ks.v;
        n->nkids = ks.n;
        n->kids2 = vs.v;
        n->nkids2 = vs.n;
    } else {
        char d[64];
        tok_desc(t, d, sizeof d);
        pfail(p, t, "unexpected %s", d);
    }
    leave(p);
    return n;
}

static jnode *parse_unary(P *p, int with_filter) {
    enter(p);
    const jx_tok *t = cur(p);
    jnode *node;
    if (is_op(t, "-") || is_op(t, "+")) {
        adv(p);
        node = mk(p, is_op(t, "-") ? N_NEG : N_POS, t);
        node->a = parse_unary(p, 0);
    } else node = parse_primary(p);
    node = parse_postfix(p, node);
    if (with_filter) node = parse_filter_expr(p, node);
    leave(p);
    return node;
}

static jnode *binop(P *p, const jx_tok *t, const char *op, jnode *l, jnode *r) {
    if (++p->chain > 4 * p->max_depth) pfail(p, t, "expression too long");
    jnode *n = mk(p, N_BINOP, t);
    n->s = op;
    n->a = l;
    n->b = r;
    return n;
}

static jnode *parse_pow(P *p) {
    jnode *l = parse_unary(p, 1);
    while (is_op(cur(p), "**")) {
        const jx_tok *t = adv(p);
        l = binop(p, t, "**", l, parse_unary(p, 1));
    }
    return l;
}

static jnode *parse_math2(P *p) {
    jnode *l = parse_pow(p);
    for (;;) {
        const jx_tok *t = cur(p);
        const char *op = is_op(t, "*") ? "*" : is_op(t, "/") ? "/" : is_op(t, "//") ? "//"
                       : is_op(t, "%") ? "%" : NULL;
        if (!op) break;
        adv(p);
        l = binop(p, t, op, l, parse_pow(p));
    }
    return l;
}

static jnode *parse_concat(P *p) {
    const jx_tok *t0 = cur(p);
    jnode *first = parse_math2(p);
    if (!is_op(cur(p), "~")) return first;
    nvec args = {0};
    push(p, &args, first);
    while (is_op(cur(p), "~")) {
        adv(p);
        push(p, &args, parse_math2(p));
    }
    jnode *n = mk(p, N_CONCAT, t0);
    n->kids = args.v;
    n->nkids = args.n;
    return n;
}

static jnode *parse_math1(P *p) {
    jnode *l = parse_concat(p);
    for (;;) {
        const jx_tok *t = cur(p);
        const char *op = is_op(t, "+") ? "+" : is_op(t, "-") ? "-" : NULL;
        if (!op) break;
        adv(p);
        l = binop(p, t, op, l, parse_concat(p));
    }
    return l;
}

static jnode *parse_compare(P *p) {
    const jx_tok *t0 = cur(p);
    jnode *expr = parse_math1(p);
    nvec ops = {0};
    const char **names = NULL;
    size_t cap = 0;
    for (;;) {
        const jx_tok *t = cur(p);
        const char *op = NULL;
        if (is_op(t, "==")) op = "eq";
        else if (is_op(t, "!=")) op = "ne";
        else if (is_op(t, "<")) op = "lt";
        else if (is_op(t, "<=")) op = "lteq";
        else if (is_op(t, ">")) op = "gt";
        else if (is_op(t, ">=")) op = "gteq";
        if (op) adv(p);
        else if (is_name(t, "in")) { adv(p); op = "in"; }
        else if (is_name(t, "not") && is_name(look(p), "in")) { adv(p); adv(p); op = "notin"; }
        else break;
        if (ops.n == cap) {
            size_t nc = cap ? cap * 2 : 4;
            const char **x = palloc(p, nc * sizeof *x);
            if (ops.n) memcpy(x, names, ops.n * sizeof *x);
            names = x;
            cap = nc;
        }
        names[ops.n] = op;
        push(p, &ops, parse_math1(p));
    }
    if (!ops.n) return expr;
    jnode *n = mk(p, N_COMPARE, t0);
    n->a = expr;
    n->kids = ops.v;
    n->nkids = ops.n;
    n->names = names;
    n->nnames = ops.n;
    return n;
}

static jnode *parse_not(P *p) {
    if (is_name(cur(p), "not")) {
        enter(p);
        const jx_tok *t = adv(p);
        jnode *n = mk(p, N_NOT, t);
        n->a = parse_not(p);
        leave(p);
        return n;
    }
    return parse_compare(p);
}

static jnode *parse_and(P *p) {
    jnode *l = parse_not(p);
    while (is_name(cur(p), "and")) {
        const jx_tok *t = adv(p);
        if (++p->chain > 4 * p->max_depth) pfail(p, t, "expression too long");
        jnode *n = mk(p, N_AND, t);
        n->a = l;
        n->b = parse_not(p);
        l = n;
    }
    return l;
}

static jnode *parse_or(P *p) {
    jnode *l = parse_and(p);
    while (is_name(cur(p), "or")) {
        const jx_tok *t = adv(p);
        if (++p->chain > 4 * p->max_depth) pfail(p, t, "expression too long");
        jnode *n = mk(p, N_OR, t);
        n->a = l;
        n->b = parse_and(p);
        l = n;
    }
    return l;
}

static jnode *parse_condexpr(P *p) {
    enter(p);
    jnode *e1 = parse_or(p);
    while (is_name(cur(p), "if")) {
        const jx_tok *t = adv(p);
        jnode *n = mk(p, N_COND, t);
        n->a = parse_or(p);
        n->b = e1;
        if (is_name(cur(p), "else")) {
            adv(p);
            n->c = parse_condexpr(p);
        }
        e1 = n;
    }
    leave(p);
    return e1;
}

static jnode *parse_expression(P *p, int with_condexpr) {
    return with_condexpr ? parse_condexpr(p) : parse_or(p);
}

static int tuple_end(P *p, const char *extra_end) {
    const jx_tok *t = cur(p);
    if (t->k == JT_VAR_END || t->k == JT_BLOCK_END || is_op(t, ")")) return 1;
    return extra_end && is_name(t, extra_end);
}

static jnode *parse_tuple(P *p, int simplified, int with_condexpr, const char *extra_end,
                       int explicit_parens) {
    const jx_tok *t0 = cur(p);
    nvec args = {0};
    int is_tuple = 0;
    for (;;) {
        if (args.n) expect_op(p, ",");
        if (tuple_end(p, extra_end)) break;
        push(p, &args, simplified ? parse_primary(p) : parse_expression(p, with_condexpr));
        if (is_op(cur(p), ",")) is_tuple = 1;
        else break;
    }
    if (!is_tuple) {
        if (args.n) return args.v[0];
        if (!explicit_parens) {
            char d[64];
            tok_desc(cur(p), d, sizeof d);
            pfail(p, cur(p), "Expected an expression, got %s", d);
        }
    }
    jnode *n = mk(p, N_TUPLE, t0);
    n->kids = args.v;
    n->nkids = args.n;
    return n;
}

/* ---------------------------------------------------------------- statements */

static jnode *subparse(P *p, const char *const *ends, const jx_tok *opener);

static void check_target(P *p, jnode *t) {
    if (t->kind == N_NAME) {
        if (!strcmp(t->s, "true") || !strcmp(t->s, "false") || !strcmp(t->s, "none"))
            pfail(p, cur(p), "can't assign to '%s'", t->s);
        return;
    }
    if (t->kind == N_TUPLE) {
        for (size_t i = 0; i < t->nkids; i++) check_target(p, t->kids[i]);
        return;
    }
    if (t->kind == N_NSREF) return;
    pfail(p, cur(p), "can't assign to %s", t->kind == N_CONST ? "a literal" : "an expression");
}

static jnode *parse_assign_target(P *p, const char *extra_end, int with_namespace) {
    jnode *t;
    if (with_namespace && cur(p)->k == JT_NAME && is_op(look(p), ".")) {
        const jx_tok *nt = adv(p);
        adv(p);
        const jx_tok *at = expect_kind(p, JT_NAME, "name");
        t = mk(p, N_NSREF, nt);
        t->s = tok_name(p, nt);
        t->a = mk(p, N_CONST, at);
        t->a->s = tok_name(p, at);
    } else t = parse_tuple(p, 1, 1, extra_end, 0);
    check_target(p, t);
    return t;
}

static void expect_block_end(P *p) { expect_kind(p, JT_BLOCK_END, "end of statement block"); }

/* parse_statements: block_end, then the body up to one of `ends` (left as current token). */
static jnode *statements(P *p, const char *const *ends, const jx_tok *opener) {
    if (is_op(cur(p), ":")) adv(p);
    expect_block_end(p);
    return subparse(p, ends, opener);
}

static jnode *parse_for(P *p, const jx_tok *kw) {
    jnode *n = mk(p, N_FOR, kw);
    n->a = parse_assign_target(p, "in", 0);
    if (!is_name(cur(p), "in")) pfail(p, cur(p), "expected 'in' in for loop");
    adv(p);
    n->b = parse_tuple(p, 0, 0, "recursive", 0);
    if (is_name(cur(p), "if")) {
        adv(p);
        n->c = parse_expression(p, 1);
    }
    if (is_name(cur(p), "recursive")) pfail(p, cur(p), "recursive loops are not supported");
    static const char *const e1[] = {"endfor", "else", NULL};
    static const char *const e2[] = {"endfor", NULL};
    p->loop_depth++;
    jnode *body = statements(p, e1, kw);
    p->loop_depth--;
    n->kids = body->kids;
    n->nkids = body->nkids;
    if (is_name(adv(p), "else")) {
        jnode *eb = statements(p, e2, kw);
        adv(p);
        n->kids2 = eb->kids;
        n->nkids2 = eb->nkids;
        n->flag = 1;
    }
    return n;
}

static jnode *parse_if(P *p, const jx_tok *kw) {
    static const char *const e1[] = {"elif", "else", "endif", NULL};
    static const char *const e2[] = {"endif", NULL};
    jnode *n = mk(p, N_IF, kw);
    n->a = parse_tuple(p, 0, 0, NULL, 0);
    jnode *body = statements(p, e1, kw);
    n->kids = body->kids;
    n->nkids = body->nkids;
    const jx_tok *t = adv(p);
    if (is_name(t, "elif")) {
        enter(p);
        jnode *sub = parse_if(p, t);
        leave(p);
        n->kids2 = palloc(p, sizeof(jnode *));
        n->kids2[0] = sub;
        n->nkids2 = 1;
    } else if (is_name(t, "else")) {
        jnode *eb = statements(p, e2, kw);
        adv(p);
        n->kids2 = eb->kids;
        n->nkids2 = eb->nkids;
    }
    return n;
}

static jnode *parse_set(P *p, const jx_tok *kw) {
    jnode *target = parse_assign_target(p, NULL, 1);
    if (is_op(cur(p), "=")) {
        adv(p);
        jnode *n = mk(p, N_SET, kw);
        n->a = target;
        n->b = parse_tuple(p, 0, 1, NULL, 0);
        return n;
    }
    jnode *n = mk(p, N_SETBLOCK, kw);
    n->a = target;
    n->b = parse_filter(p, NULL, 0);
    static const char *const e[] = {"endset", NULL};
    jnode *body = statements(p, e, kw);
    adv(p);
    n->kids = body->kids;
    n->nkids = body->nkids;
    return n;
}

static jnode *parse_macro(P *p, const jx_tok *kw) {
    jnode *n = mk(p, N_MACRO, kw);
    const jx_tok *nt = expect_kind(p, JT_NAME, "macro name");
    n->s = tok_name(p, nt);
    expect_op(p, "(");
    nvec defs = {0};
    const char **names = NULL;
    size_t nn = 0, cap = 0;
    int seen_default = 0;
    while (!is_op(cur(p), ")")) {
        if (nn) expect_op(p, ",");
        const jx_tok *a = expect_kind(p, JT_NAME, "argument name");
        if (nn == cap) {
            size_t nc = cap ? cap * 2 : 4;
            const char **x = palloc(p, nc * sizeof *x);
            if (nn) memcpy(x, names, nn * sizeof *x);
            names = x;
            cap = nc;
        }
        names[nn++] = tok_name(p, a);
        if (is_op(cur(p), "=")) {
            adv(p);
            push(p, &defs, parse_expression(p, 1));
            seen_default = 1;
        } else {
            if (seen_default) pfail(p, a, "non-default argument follows default argument");
            push(p, &defs, NULL);
        }
    }
    expect_op(p, ")");
    n->names = names;
    n->nnames = nn;
    n->kids2 = defs.v;
    n->nkids2 = defs.n;
    static const char *const e[] = {"endmacro", NULL};
    int saved = p->loop_depth;
    p->loop_depth = 0;
    jnode *body = statements(p, e, kw);
    p->loop_depth = saved;
    adv(p);
    n->a = body;
    return n;
}

static jnode *parse_with(P *p, const jx_tok *kw) {
    jnode *n = mk(p, N_WITH, kw);
    nvec targets = {0}, vals = {0};
    while (cur(p)->k != JT_BLOCK_END) {
        if (targets.n) expect_op(p, ",");
        jnode *t = parse_assign_target(p, NULL, 0);
        expect_op(p, "=");
        push(p, &targets, t);
        push(p, &vals, parse_expression(p, 1));
    }
    static const char *const e[] = {"endwith", NULL};
    jnode *body = statements(p, e, kw);
    adv(p);
    n->kids = body->kids;
    n->nkids = body->nkids;
    n->b = mk(p, N_BODY, kw);
    n->b->kids = targets.v;
    n->b->nkids = targets.n;
    n->kids2 = vals.v;
    n->nkids2 = vals.n;
    return n;
}

static jnode *parse_statement(P *p) {
    const jx_tok *t = cur(p);
    if (t->k != JT_NAME) pfail(p, t, "tag name expected");
    enter(p);
    jnode *r;
    adv(p);
    if (is_name(t, "for")) r = parse_for(p, t);
    else if (is_name(t, "if")) r = parse_if(p, t);
    else if (is_name(t, "set")) r = parse_set(p, t);
    else if (is_name(t, "macro")) r = parse_macro(p, t);
    else if (is_name(t, "break") || is_name(t, "continue")) {
        if (!p->loop_depth) pfail(p, t, "'%.*s' outside of a loop", (int)t->n, t->s);
        r = mk(p, is_name(t, "break") ? N_BREAK : N_CONTINUE, t);
    } else if (is_name(t, "generation") || is_name(t, "block") || is_name(t, "autoescape")) {
        /* {% generation %}: transformers' AssistantTracker renders its body unchanged.
         * {% block %} in a template that extends nothing renders in place. */
        const char *endname = is_name(t, "generation") ? "endgeneration"
                             : is_name(t, "block") ? "endblock" : "endautoescape";
        while (cur(p)->k != JT_BLOCK_END && cur(p)->k != JT_EOF) adv(p);
        const char *e[] = {endname, NULL};
        r = statements(p, e, t);
        adv(p);
        while (cur(p)->k == JT_NAME && is_name(t, "block")) adv(p);   /* {% endblock name %} */
    } else if (is_name(t, "filter")) {
        r = mk(p, N_FILTERBLOCK, t);
        r->b = parse_filter(p, NULL, 1);
        static const char *const e[] = {"endfilter", NULL};
        jnode *body = statements(p, e, t);
        adv(p);
        r->kids = body->kids;
        r->nkids = body->nkids;
    } else if (is_name(t, "with")) r = parse_with(p, t);
    else if (is_name(t, "print")) {
        r = mk(p, N_PRINT, t);
        r->a = parse_tuple(p, 0, 1, NULL, 0);
    } else if (is_name(t, "call") || is_name(t, "include") || is_name(t, "import") ||
               is_name(t, "from") || is_name(t, "extends")) {
        pfail(p, t, "the '%.*s' tag is not supported in chat templates", (int)t->n, t->s);
    } else {
        pfail(p, t, "Encountered unknown tag '%.*s'.", (int)t->n, t->s);
    }
    leave(p);
    return r;
}

static jnode *subparse(P *p, const char *const *ends, const jx_tok *opener) {
    enter(p);
    jnode *body = mk(p, N_BODY, cur(p));
    nvec kids = {0};
    for (;;) {
        const jx_tok *t = cur(p);
        p->chain = 0;   /* left-deep operator chains are bounded per statement */
        if (t->k == JT_DATA) {
            jnode *n = mk(p, N_TEXT, t);
            n->konst = jv_str_ref(p->a, p->e, t->s, t->n);
            push(p, &kids, n);
            adv(p);
        } else if (t->k == JT_VAR_BEGIN) {
            adv(p);
            jnode *n = mk(p, N_PRINT, t);
            n->a = parse_tuple(p, 0, 1, NULL, 0);
            expect_kind(p, JT_VAR_END, "end of print statement");
            push(p, &kids, n);
        } else if (t->k == JT_BLOCK_BEGIN) {
            adv(p);
            const jx_tok *nm = cur(p);
            if (ends && nm->k == JT_NAME)
                for (size_t i = 0; ends[i]; i++)
                    if (is_name(nm, ends[i])) goto done;
            push(p, &kids, parse_statement(p));
            expect_block_end(p);
        } else if (t->k == JT_EOF) {
            if (ends)
                pfail(p, opener ? opener : t,
                      "Unexpected end of template. Jinja was looking for the tag '%s' to close "
                      "this block.", ends[0] ? ends[ends[1] && !strcmp(ends[0], "elif") ? 2 : 0] : "end");
            break;
        } else {
            char d[64];
            tok_desc(t, d, sizeof d);
            pfail(p, t, "unexpected %s", d);
        }
    }
done:
    body->kids = kids.v;
    body->nkids = kids.n;
    leave(p);
    return body;
}

/* ---------------------------------------------------------------- frame analysis */

/* jinja2 resolves names per frame at compile time (idtracking.py): a name a frame stores is
 * local to the whole frame; if the frame's first own reference to it is an unconditional store
 * and no enclosing frame references it, it starts Undefined instead of being looked up outside.
 * We record those names on the frame node; the evaluator binds them to Undefined on entry. */

typedef struct refs refs;
struct refs {
    const refs *parent;
    const char **names;
    int *first;    /* 1 load or conditional store first, 2 unconditional store first */
    size_t n, cap;
};

static int refs_has(const refs *r, const char *name) {
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->names[i], name)) return 1;
    return 0;
}

static void ref_add(P *p, refs *r, const char *name, int kind) {
    if (refs_has(r, name)) return;
    if (r->n == r->cap) {
        size_t nc = r->cap ? r->cap * 2 : 16;
        const char **nn = palloc(p, nc * sizeof *nn);
        int *nf = palloc(p, nc * sizeof *nf);
        if (r->n) {
            memcpy(nn, r->names, r->n * sizeof *nn);
            memcpy(nf, r->first, r->n * sizeof *nf);
        }
        r->names = nn;
        r->first = nf;
        r->cap = nc;
    }
    r->names[r->n] = name;
    r->first[r->n] = kind;
    r->n++;
}

static void frame_analyze(P *p, jnode *frame, jnode *const *kids, size_t nk, const refs *parent,
                          const char *const *params, size_t nparams);

/* loads of an expression, in evaluation order */
static void expr_loads(P *p, refs *r, const jnode *n) {
    if (!n) return;
    if (n->kind == N_NAME) { ref_add(p, r, n->s, 1); return; }
    if (n->kind == N_NSREF) { ref_add(p, r, n->s, 1); return; }
    expr_loads(p, r, n->a);
    expr_loads(p, r, n->b);
    expr_loads(p, r, n->c);
    expr_loads(p, r, n->d);
    for (size_t i = 0; i < n->nkids; i++) expr_loads(p, r, n->kids[i]);
    for (size_t i = 0; i < n->nkids2; i++) expr_loads(p, r, n->kids2[i]);
}

static void target_stores(P *p, refs *r, const jnode *t, int kind) {
    if (t->kind == N_NAME) ref_add(p, r, t->s, kind);
    else if (t->kind == N_NSREF) ref_add(p, r, t->s, 1);
    else for (size_t i = 0; i < t->nkids; i++) target_stores(p, r, t->kids[i], kind);
}

/* Walks a frame's own statements; `branch` is set inside if/elif/else bodies. Child frames are
 * collected in `children` to be analysed once this frame's references are known. */
static void stmts_refs(P *p, refs *r, jnode *const *kids, size_t nk, int branch, jnode ***children,
                       size_t *nch, size_t *capch) {
    for (size_t i = 0; i < nk; i++) {
        jnode *n = kids[i];
        int child = 0;
        switch (n->kind) {
        case N_PRINT: expr_loads(p, r, n->a); break;
        case N_IF:
            expr_loads(p, r, n->a);
            stmts_refs(p, r, n->kids, n->nkids, 1, children, nch, capch);
            stmts_refs(p, r, n->kids2, n->nkids2, 1, children, nch, capch);
            break;
        case N_SET: expr_loads(p, r, n->b); target_stores(p, r, n->a, branch ? 1 : 2); break;
        case N_SETBLOCK: child = 1; target_stores(p, r, n->a, branch ? 1 : 2); break;
        case N_FOR: expr_loads(p, r, n->b); child = 1; break;
        case N_MACRO: ref_add(p, r, n->s, branch ? 1 : 2); child = 1; break;
        case N_FILTERBLOCK: child = 1; break;
        case N_WITH:
            for (size_t k = 0; k < n->nkids2; k++) expr_loads(p, r, n->kids2[k]);
            child = 1;
            break;
        case N_BODY: stmts_refs(p, r, n->kids, n->nkids, branch, children, nch, capch); break;
        default: break;
        }
        if (child) {
            if (*nch == *capch) {
                size_t nc = *capch ? *capch * 2 : 8;
                jnode **x = palloc(p, nc * sizeof *x);
                if (*nch) memcpy(x, *children, *nch * sizeof *x);
                *children = x;
                *capch = nc;
            }
            (*children)[(*nch)++] = n;
        }
    }
}

static int chain_has(const refs *r, const char *name) {
    for (; r; r = r->parent)
        if (refs_has(r, name)) return 1;
    return 0;
}

static void frame_analyze(P *p, jnode *frame, jnode *const *kids, size_t nk, const refs *parent,
                          const char *const *params, size_t nparams) {
    enter(p);
    refs r = {.parent = parent};
    for (size_t i = 0; i < nparams; i++) ref_add(p, &r, params[i], 1);
    jnode **children = NULL;
    size_t nch = 0, capch = 0;
    stmts_refs(p, &r, kids, nk, 0, &children, &nch, &capch);
    size_t nu = 0;
    for (size_t i = 0; i < r.n; i++)
        if (r.first[i] == 2 && !chain_has(parent, r.names[i])) nu++;
    if (nu) {
        frame->undef = palloc(p, nu * sizeof(char *));
        for (size_t i = 0; i < r.n; i++)
            if (r.first[i] == 2 && !chain_has(parent, r.names[i])) frame->undef[frame->nundef++] = r.names[i];
    }
    for (size_t i = 0; i < nch; i++) {
        jnode *c = children[i];
        if (c->kind == N_FOR) {
            /* the loop frame: target and `loop` are its parameters; the filter reads in it */
            refs tr = {0};
            target_stores(p, &tr, c->a, 1);
            ref_add(p, &tr, "loop", 1);
            if (c->c) expr_loads(p, &tr, c->c);
            frame_analyze(p, c, c->kids, c->nkids, &r, tr.names, tr.n);
            /* for-else runs in its own frame too */
            if (c->nkids2) {
                jnode tmp;
                memset(&tmp, 0, sizeof tmp);
                frame_analyze(p, &tmp, c->kids2, c->nkids2, &r, NULL, 0);
            }
        } else if (c->kind == N_MACRO) {
            const char *extra[] = {"varargs", "kwargs"};
            const char **ps = palloc(p, (c->nnames + 2) * sizeof *ps);
            for (size_t k = 0; k < c->nnames; k++) ps[k] = c->names[k];
            ps[c->nnames] = extra[0];
            ps[c->nnames + 1] = extra[1];
            refs pr = {.parent = &r};
            (void)pr;
            frame_analyze(p, c, c->a->kids, c->a->nkids, &r, ps, c->nnames + 2);
        } else if (c->kind == N_WITH) {
            refs tr = {0};
            for (size_t k = 0; k < c->b->nkids; k++) target_stores(p, &tr, c->b->kids[k], 1);
            frame_analyze(p, c, c->kids, c->nkids, &r, tr.names, tr.n);
        } else {
            frame_analyze(p, c, c->kids, c->nkids, &r, NULL, 0);   /* set / filter blocks */
        }
    }
    leave(p);
}

jnode *jx_parse(jx_arena *a, jx_err *e, const jx_toks *toks, int max_depth) {
    P p = {.a = a, .e = e, .t = toks, .i = 0, .max_depth = max_depth};
    jnode *root = subparse(&p, NULL, NULL);
    frame_analyze(&p, root, root->kids, root->nkids, NULL, NULL, 0);
    return root;
}
