/* jinja.h — internal interface of the Jinja interpreter behind the chat templates: arena, values,
 * lexer, parser (AST) and evaluator. Mirrors Python jinja2 3.1 as transformers configures it
 * (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, {% generation %}).
 * Not public: only chat_template.c, the unit tests and the fuzz target include it. */
#ifndef G4_JINJA_H
#define G4_JINJA_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- arena */

/* Bump allocator in chunks; `cap` bounds the total bytes so a runaway template fails cleanly. */
typedef struct jx_chunk jx_chunk;
typedef struct {
    jx_chunk *head;
    size_t used_total, cap;
    int refused;      /* an allocation went over cap (the caller's budget, not the machine's memory) */
} jx_arena;

void jx_arena_init(jx_arena *a, size_t cap);
void jx_arena_free(jx_arena *a);
/* NULL when the cap is reached or malloc fails. */
void *jx_arena_alloc(jx_arena *a, size_t n);

/* ---------------------------------------------------------------- errors */

/* Errors unwind with longjmp to the entry point (parse or render); everything allocated in
 * between lives in an arena, so nothing leaks. */
typedef struct {
    jmp_buf jb;
    const char *path;   /* template name used in messages */
    char msg[768];
    int is_raise;       /* raise_exception() rather than a syntax/runtime error */
} jx_err;

_Noreturn void jx_fail(jx_err *e, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Unwinds with an already formatted message (a deferred error). */
_Noreturn void jx_fail_raw(jx_err *e, const char *msg);

/* ---------------------------------------------------------------- strings */

typedef struct {
    char *p;
    size_t n, cap;
    jx_arena *a;
    jx_err *e;
    size_t limit;   /* bytes; 0 = unlimited */
} jx_buf;

void jx_buf_init(jx_buf *b, jx_arena *a, jx_err *e, size_t limit);
void jx_buf_put(jx_buf *b, const char *s, size_t n);
void jx_buf_puts(jx_buf *b, const char *s);
void jx_buf_putc(jx_buf *b, char c);
void jx_buf_printf(jx_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* UTF-8 helpers (input is valid UTF-8: templates are checked at load, JSON by jansson). */
uint32_t jx_utf8_next(const char *s, size_t n, size_t *i);
size_t jx_utf8_put(char *out, uint32_t cp);
size_t jx_utf8_len(const char *s, size_t n);
int jx_utf8_valid(const char *s, size_t n);
int jx_py_isspace(uint32_t cp);   /* Python str.isspace() */
uint32_t jx_py_upper(uint32_t cp);
uint32_t jx_py_lower(uint32_t cp);

/* ---------------------------------------------------------------- values */

typedef enum {
    JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_NS, JV_MACRO,
    JV_FUNC, JV_METHOD, JV_LOOP
} jv_kind;

typedef struct jv jv;
typedef struct jnode jnode;

/* JV_LIST flavours: jinja2 hands templates Python lists, tuples, generators (select, map, ...),
 * dict views (d.keys()), ranges and reverse iterators; they print, test and index differently. */
enum jl_sub { JL_LIST, JL_TUPLE, JL_GEN, JL_KEYS, JL_VALUES, JL_ITEMS, JL_RANGE, JL_ITER };

typedef struct {
    jv **keys, **vals;
    size_t n, cap;
} jx_dict;

struct jv {
    jv_kind k;
    union {
        int b;
        int64_t i;
        double f;
        struct { const char *s; size_t n; } str;
        struct {
            jv **v;            /* items, materialised even for lazy Python objects */
            size_t n;
            int sub;           /* jl_sub: which Python sequence type this is */
            int used;          /* JL_GEN / JL_ITER: already iterated (Python iterators exhaust) */
            const char *gname; /* JL_GEN / JL_ITER: Python's name for repr */
            int64_t rs, re, rst; /* JL_RANGE: start, stop, step */
            const char *lazy_err; /* JL_GEN over a non-iterable: Python fails only when consumed */
        } list;
        jx_dict *dict;                     /* JV_DICT, JV_NS */
        const char *hint;                  /* JV_UNDEF: message when used */
        struct { const jnode *def; void *scope; } macro;
        int func;                          /* JV_FUNC: builtin id */
        struct { jv *self; const char *name; } method;
        void *loop;                        /* JV_LOOP */
    } u;
};

extern jv jx_undef_v, jx_none_v, jx_true_v, jx_false_v;

jv *jv_new(jx_arena *a, jx_err *e, jv_kind k);
jv *jv_int(jx_arena *a, jx_err *e, int64_t i);
jv *jv_float(jx_arena *a, jx_err *e, double f);
jv *jv_bool(int b);
jv *jv_strn(jx_arena *a, jx_err *e, const char *s, size_t n);   /* copies */
jv *jv_str_ref(jx_arena *a, jx_err *e, const char *s, size_t n); /* no copy */
jv *jv_undef(jx_arena *a, jx_err *e, const char *hint);
jv *jv_list(jx_arena *a, jx_err *e, size_t n, int sub);         /* n slots, filled by caller */
jv *jv_dict(jx_arena *a, jx_err *e, jv_kind k);                 /* JV_DICT or JV_NS */
void jv_dict_set(jx_arena *a, jx_err *e, jv *d, jv *key, jv *val);
jv *jv_dict_get(const jv *d, const jv *key);                     /* NULL if absent */
jv *jv_dict_gets(const jv *d, const char *key);

int jv_truthy(const jv *v);
int jv_eq(const jv *a, const jv *b);
/* Python ordering (<): -1/0/1; fails for unorderable types. */
int jv_cmp(jx_err *e, int line, int col, const jv *a, const jv *b);
const char *jv_type_name(const jv *v);   /* Python type name for messages */

/* str() and repr() as Python prints them. */
void jv_write_str(jx_buf *b, const jv *v);
void jv_write_repr(jx_buf *b, const jv *v);
void jv_float_repr(char *out, size_t cap, double f);

/* json.dumps(v, ensure_ascii=False, indent=indent (<0: None, or indent_str), separators,
 * sort_keys). Fails on undefined / non-JSON values like jinja2 would. */
typedef struct {
    const char *indent;   /* NULL = no indent */
    const char *item_sep, *key_sep;
    int sort_keys;
    int line, col;
} jx_json_opts;
void jv_write_json(jx_buf *b, const jv *v, const jx_json_opts *o, int depth);

/* Converts a jansson value (json_t *) into a template value. */
jv *jv_from_json(jx_arena *a, jx_err *e, const void *json);

/* ---------------------------------------------------------------- lexer / parser */

typedef enum {
    JT_DATA, JT_BLOCK_BEGIN, JT_BLOCK_END, JT_VAR_BEGIN, JT_VAR_END,
    JT_NAME, JT_STRING, JT_INT, JT_FLOAT, JT_OP, JT_EOF
} jt_kind;

typedef struct {
    jt_kind k;
    int line, col;
    const char *s;   /* text (data / name / unescaped string / operator), arena-owned */
    size_t n;
    int64_t i;
    double f;
} jx_tok;

typedef struct {
    jx_tok *v;
    size_t n, cap;
} jx_toks;

/* Tokenizes a whole template (already normalised is not required). */
void jx_lex(jx_arena *a, jx_err *e, const char *src, size_t len, jx_toks *out);

/* AST node kinds. Statements and expressions share the node type. */
enum {
    N_BODY, N_TEXT, N_PRINT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_BREAK, N_CONTINUE,
    N_FILTERBLOCK, N_WITH, N_CALLBLOCK,
    N_CONST, N_NAME, N_GETATTR, N_GETITEM, N_SLICE, N_CALL, N_FILTER, N_TEST, N_BINOP,
    N_NEG, N_POS, N_NOT, N_AND, N_OR, N_COND, N_COMPARE, N_CONCAT, N_LIST, N_TUPLE, N_DICT,
    N_NSREF
};

struct jnode {
    int kind, line, col;
    const char *s;            /* name / operator / attribute / filter or test name */
    jv *konst;                /* N_CONST */
    jnode *a, *b, *c, *d;        /* children; meaning per kind */
    jnode **kids;                /* body statements, args, list items, compare operands ... */
    size_t nkids;
    jnode **kids2;               /* else body, kwarg values, dict values ... */
    size_t nkids2;
    const char **names;       /* kwarg names, macro params, compare ops */
    size_t nnames;
    int flag;                 /* N_TEST: negated; N_LIST/TUPLE: - ; N_FOR: has else */
    /* Frame nodes (root body, for, macro, set block, filter block, with): names this frame
     * assigns before any read of its own, which jinja2 starts as Undefined rather than looking
     * them up outside (so a loop or macro that reads them earlier sees Undefined). */
    const char **undef;
    size_t nundef;
};

/* Parses tokens into a body node. Unknown filters/tests are syntax errors, as jinja2 reports
 * them when it compiles. */
jnode *jx_parse(jx_arena *a, jx_err *e, const jx_toks *toks, int max_depth);

/* Known filter / test names (the parser checks against these). */
int jx_filter_known(const char *name);
int jx_test_known(const char *name);

/* ---------------------------------------------------------------- evaluator */

typedef struct {
    size_t max_output;     /* bytes of rendered text */
    size_t max_memory;     /* arena bytes per render */
    int max_depth;         /* nested macro calls / parser nesting */
    uint64_t max_steps;    /* evaluated nodes, so loops cannot run forever */
} jx_limits;

void jx_limits_default(jx_limits *l);

/* Renders `root` with the variables in `vars` (a JV_DICT). On success returns 0 and a
 * malloc'ed NUL-terminated string; on failure non-zero with e->msg set (e->is_raise for
 * raise_exception). */
int jx_render(const jnode *root, jv *vars, jx_arena *a, jx_err *e, const jx_limits *lim,
              char **out, size_t *out_len);

/* Lex + parse + render in one call with explicit limits and variables taken as-is from the JSON
 * object `vars` (no transformers message normalisation): for the fuzz target and unit tests.
 * Returns 0 on success (*out malloc'ed), 1 on a syntax/runtime error, 2 on raise_exception;
 * the message goes to err. */
int jx_render_source(const char *src, size_t n, const char *vars, size_t vars_len,
                     const jx_limits *lim, char **out, size_t *out_len, char *err, size_t errcap);

/* Internal to the evaluator modules (jinja_eval.c, jinja_builtins.c). */
typedef struct jx_ctx jx_ctx;
typedef struct {
    jv **pos;
    size_t npos;
    const char **kwn;
    jv **kwv;
    size_t nkw;
} jx_args;

jv *jx_call_filter(jx_ctx *c, const jnode *at, const char *name, jv *v, jx_args *args);
int jx_call_test(jx_ctx *c, const jnode *at, const char *name, jv *v, jx_args *args);
jv *jx_call_method(jx_ctx *c, const jnode *at, jv *self, const char *name, jx_args *args);
jv *jx_call_global(jx_ctx *c, const jnode *at, int func, jx_args *args);
int jx_global_id(const char *name);        /* -1 if not a builtin global */
int jx_has_method(const jv *self, const char *name);

/* Helpers the builtins need from the evaluator. */
jx_arena *jx_ctx_arena(jx_ctx *c);
jx_err *jx_ctx_err(jx_ctx *c);
jv *jx_getattr(jx_ctx *c, const jnode *at, jv *obj, const char *name);
jv *jx_getitem(jx_ctx *c, const jnode *at, jv *obj, jv *key);
jv *jx_call_value(jx_ctx *c, const jnode *at, jv *fn, jx_args *args);
jv *jx_to_str(jx_ctx *c, const jv *v);      /* str(v) as a JV_STR */
/* Iterates like Python iter(): list/tuple items, dict keys, str characters, undefined empty. */
jv *jx_to_list(jx_ctx *c, const jnode *at, jv *v);
void jx_step(jx_ctx *c, const jnode *at);
size_t jx_loop_index(const jv *loopv);   /* loop.index0 of a JV_LOOP */
_Noreturn void jx_rt_fail(jx_ctx *c, const jnode *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
_Noreturn void jx_raise(jx_ctx *c, const jnode *at, const char *msg, size_t n);

#endif
