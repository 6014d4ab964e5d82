/* matcher.c — token masks over a whole vocabulary for a compiled grammar: the vocabulary's byte
 * trie (built once per tokenizer), and a pushdown matcher whose states are sets of parse stacks,
 * hash-consed, with their byte transitions memoized (a DFA built lazily) and a state's mask cached. */
#include "grammar/grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- vocabulary trie */

struct g4_vocab_index {
    int n_tok;
    int n_nodes;        /* node 0 is the root; the others in preorder */
    uint8_t *byte;      /* the byte leading into each node */
    uint16_t *depth;
    int32_t *skip;      /* the node after each node's subtree */
    int32_t *tok_begin; /* [n_nodes + 1]: the tokens of node i's subtree are
                         * pre_tok[tok_begin[i] .. tok_begin[skip[i]]), its own ones first */
    int32_t *pre_tok;   /* the tokens in trie preorder */
    uint8_t *plain;     /* per node: 1 when its path up to the parent ends between characters and
                         * every path of its subtree from there is plain JSON-string text (UTF-8
                         * with no control byte, '"' or '\'; see utf8_next) */
    uint8_t *maxc;      /* per node: the most characters a path of its subtree starts, its own byte
                         * included (255: that many or more) */
    uint8_t *pu;        /* while building: the UTF-8 state after the path to the node (UTF8_BAD: not UTF-8) */
    int32_t *end_ids;   /* the end-of-output tokens */
    int n_end;
    int max_depth;
    int max_chars;      /* the most of maxc */
    unsigned char *blob;  /* every token's bytes, token t's at blob[off[t] .. off[t] + len[t]) */
    size_t *off;
    uint32_t *len;
};

/* UTF-8 validation states: 0 between characters, 1-3 continuation bytes still due, 4-7 the
 * restricted second byte after E0, ED, F0, F4. With plain != 0 only the ASCII bytes a JSON string
 * carries unescaped (0x20-0x7F but '"' and '\') are taken at state 0. */
#define UTF8_BAD 0xFF
static int utf8_next(int u, unsigned b, int plain) {
    switch (u) {
    case 0:
        if (b < 0x80) return (!plain || (b >= 0x20 && b != '"' && b != '\\')) ? 0 : -1;
        if (b >= 0xC2 && b <= 0xDF) return 1;
        if (b == 0xE0) return 4;
        if (b == 0xED) return 5;
        if (b >= 0xE1 && b <= 0xEF) return 2;
        if (b == 0xF0) return 6;
        if (b >= 0xF1 && b <= 0xF3) return 3;
        if (b == 0xF4) return 7;
        return -1;
    case 1: case 2: case 3: return (b >= 0x80 && b <= 0xBF) ? u - 1 : -1;
    case 4: return (b >= 0xA0 && b <= 0xBF) ? 1 : -1;
    case 5: return (b >= 0x80 && b <= 0x9F) ? 1 : -1;
    case 6: return (b >= 0x90 && b <= 0xBF) ? 2 : -1;
    case 7: return (b >= 0x80 && b <= 0x8F) ? 2 : -1;
    default: return -1;
    }
}

typedef struct { const unsigned char *s; uint32_t n; int32_t id; } tokbytes;

static int cmp_tok(const void *x, const void *y) {
    const tokbytes *a = x, *b = y;
    uint32_t m = a->n < b->n ? a->n : b->n;
    int c = memcmp(a->s, b->s, m);
    if (c) return c;
    if (a->n != b->n) return a->n < b->n ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

void g4_vocab_index_free(g4_vocab_index *v) {
    if (!v) return;
    free(v->byte);
    free(v->depth);
    free(v->skip);
    free(v->tok_begin);
    free(v->pre_tok);
    free(v->plain);
    free(v->maxc);
    free(v->pu);
    free(v->end_ids);
    free(v->blob);
    free(v->off);
    free(v->len);
    free(v);
}

int g4_vocab_index_size(const g4_vocab_index *v) { return v->n_tok; }

g4_status g4_vocab_index_from_pieces(const char *const *pieces, const size_t *lens, int n,
                                     const int32_t *end_ids, int n_end, g4_vocab_index **out) {
    *out = NULL;
    tokbytes *t = malloc((size_t)(n > 0 ? n : 1) * sizeof *t);
    g4_vocab_index *v = calloc(1, sizeof *v);
    if (!t || !v) { free(t); free(v); return g4_fail(G4_ERR_NOMEM, "vocab index: out of memory"); }
    int m = 0;
    size_t total = 1;
    for (int i = 0; i < n; i++) {
        /* NULL pieces (special tokens) and empty ones never enter the trie: never allowed */
        if (!pieces[i] || !lens[i]) continue;
        if (lens[i] > 65535) { free(t); free(v); return g4_fail(G4_ERR_INPUT, "vocab index: token %d is longer than 65535 bytes", i); }
        t[m++] = (tokbytes){(const unsigned char *)pieces[i], (uint32_t)lens[i], i};
        total += lens[i];
    }
    qsort(t, (size_t)m, sizeof *t, cmp_tok);
    v->n_tok = n;
    v->byte = malloc(total);
    v->depth = malloc(total * sizeof *v->depth);
    v->skip = malloc(total * sizeof *v->skip);
    v->tok_begin = malloc((total + 1) * sizeof *v->tok_begin);
    v->pre_tok = malloc((size_t)(m > 0 ? m : 1) * sizeof *v->pre_tok);
    v->plain = malloc(total);
    v->maxc = malloc(total);
    v->pu = malloc(total);
    v->end_ids = malloc((size_t)(n_end > 0 ? n_end : 1) * sizeof *v->end_ids);
    v->blob = malloc(total);
    v->off = calloc((size_t)(n > 0 ? n : 1), sizeof *v->off);
    v->len = calloc((size_t)(n > 0 ? n : 1), sizeof *v->len);
    int32_t *open = malloc((65536 + 1) * sizeof *open), *parent = malloc(total * sizeof *parent);
    uint8_t *below = malloc(total), *below_c = calloc(total, 1);
    if (!below_c || !v->maxc || !v->byte || !v->depth || !v->skip || !v->tok_begin || !v->pre_tok || !v->plain || !v->pu ||
        !v->end_ids || !v->blob || !v->off || !v->len || !open || !parent || !below) {
        free(t); free(open); free(parent); free(below); free(below_c); g4_vocab_index_free(v);
        return g4_fail(G4_ERR_NOMEM, "vocab index: out of memory");
    }
    size_t o = 0;
    for (int i = 0; i < m; i++) {
        memcpy(v->blob + o, t[i].s, t[i].n);
        v->off[t[i].id] = o;
        v->len[t[i].id] = t[i].n;
        o += t[i].n;
    }
    v->n_end = 0;
    for (int i = 0; i < n_end; i++)
        if (end_ids[i] >= 0 && end_ids[i] < n) v->end_ids[v->n_end++] = end_ids[i];
    /* sorted order is the trie's preorder: each token shares its longest common prefix with the
     * previous one, so only the nodes past that prefix are new, and a node's own tokens come
     * before those of its descendants */
    int nn = 1, od = 0;  /* open[d]: the node at depth d on the current path */
    v->byte[0] = 0; v->depth[0] = 0; v->tok_begin[0] = 0; v->pu[0] = 0; parent[0] = -1;
    open[0] = 0;
    const tokbytes *prev = NULL;
    for (int i = 0; i < m; i++) {
        uint32_t lcp = 0;
        if (prev) {
            uint32_t mm = prev->n < t[i].n ? prev->n : t[i].n;
            while (lcp < mm && prev->s[lcp] == t[i].s[lcp]) lcp++;
        }
        if (!(prev && lcp == t[i].n && lcp == prev->n)) {  /* not the same bytes as the previous token */
            for (int d = od; d > (int)lcp; d--) v->skip[open[d]] = nn;  /* close the nodes left behind */
            for (uint32_t d = lcp; d < t[i].n; d++) {
                int p = open[d];
                v->byte[nn] = t[i].s[d];
                v->depth[nn] = (uint16_t)(d + 1);
                v->tok_begin[nn] = i;
                parent[nn] = p;
                int u = v->pu[p] == UTF8_BAD ? -1 : utf8_next(v->pu[p], t[i].s[d], 0);
                v->pu[nn] = u < 0 ? UTF8_BAD : (uint8_t)u;
                open[d + 1] = nn++;
            }
            od = (int)t[i].n;
            if (od > v->max_depth) v->max_depth = od;
            prev = &t[i];
        }
        v->pre_tok[i] = t[i].id;
    }
    for (int d = od; d >= 0; d--) v->skip[open[d]] = nn;
    v->tok_begin[nn] = m;
    v->n_nodes = nn;
    /* plain bits bottom-up: a node is plain from state u when its byte is, and every child is
     * from the state that byte leads to */
    memset(below, 0xFF, (size_t)nn);
    for (int i = nn - 1; i >= 1; i--) {
        uint8_t bits = 0;
        for (int u = 0; u < 8; u++) {
            int w = utf8_next(u, v->byte[i], 1);
            if (w >= 0 && (below[i] >> w & 1)) bits |= (uint8_t)(1u << u);
        }
        v->plain[i] = bits;
        below[parent[i]] &= bits;
        unsigned c = below_c[i] + ((v->byte[i] & 0xC0) != 0x80);  /* continuation bytes start no character */
        v->maxc[i] = (uint8_t)(c > 255 ? 255 : c);
        if (v->maxc[i] > below_c[parent[i]]) below_c[parent[i]] = v->maxc[i];
        if (v->maxc[i] > v->max_chars) v->max_chars = v->maxc[i];
    }
    /* what the walk reads: the subtree is plain from where it stands (its parent between characters) */
    for (int i = nn - 1; i >= 1; i--) v->plain[i] = v->pu[parent[i]] == 0 && (v->plain[i] & 1);
    v->plain[0] = 0;
    free(v->pu);
    v->pu = NULL;
    free(below);
    free(below_c);
    free(parent);
    free(open);
    free(t);
    *out = v;
    return G4_OK;
}

/* The bytes a token contributes to the detokenized text: a byte-fallback piece <0xHH> its byte,
 * any other its own detokenization; a special token its token-reference bytes (grammar.h), so
 * that only a grammar naming it allows it (the end ids stay the end of output). A piece holding
 * the reference's lead byte is left out: no UTF-8 grammar could allow it anyway. */
g4_status g4_vocab_index_new(const g4_tokenizer *tk, const int32_t *end_ids, int n_end, g4_vocab_index **out) {
    int n = g4_tokenizer_vocab_size(tk);
    char **p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
    size_t *l = calloc((size_t)(n > 0 ? n : 1), sizeof *l);
    if (!p || !l) { free(p); free(l); return g4_fail(G4_ERR_NOMEM, "vocab index: out of memory"); }
    g4_status st = G4_OK;
    for (int32_t i = 0; i < n && !st; i++) {
        const char *s = g4_id_to_token(tk, i);
        if (!s) continue;
        if (g4_token_is_special(tk, i)) {
            int is_end = 0;
            for (int k = 0; k < n_end; k++) is_end |= end_ids[k] == i;
            if (is_end || i >= GR_TOKREF_MAX) continue;
            if (!(p[i] = malloc(GR_TOKREF_LEN))) { st = g4_fail(G4_ERR_NOMEM, "vocab index: out of memory"); break; }
            gr_tokref(i, (unsigned char *)p[i]);
            l[i] = GR_TOKREF_LEN;
            continue;
        }
        size_t sl = strlen(s);
        unsigned hv;
        char tail;
        if (sl == 6 && !memcmp(s, "<0x", 3) && sscanf(s + 3, "%2x%c", &hv, &tail) == 2 && tail == '>') {
            p[i] = malloc(1);
            if (!p[i]) { st = g4_fail(G4_ERR_NOMEM, "vocab index: out of memory"); break; }
            p[i][0] = (char)hv;
            l[i] = hv != GR_TOKREF_LEAD;
            continue;
        }
        st = g4_detokenize(tk, &i, 1, 0, &p[i], &l[i]);
        if (!st && memchr(p[i], GR_TOKREF_LEAD, l[i])) { free(p[i]); p[i] = NULL; l[i] = 0; }
    }
    if (!st) st = g4_vocab_index_from_pieces((const char *const *)p, l, n, end_ids, n_end, out);
    for (int i = 0; i < n; i++) free(p[i]);
    free(p);
    free(l);
    return st;
}

/* ---------------------------------------------------------------- stacks and states */

/* A parse stack is a hash-consed list node: `pos` is the element on top (never GR_END), `parent`
 * the stack below; node 0 is the empty stack (the grammar has been matched). A state is a sorted
 * set of stacks whose tops are terminals (plus 0 when the input may end here). */
typedef struct {
    int32_t off, n;       /* its stacks: sets[off .. off+n) */
    int32_t *trans;       /* [256]: -1 not yet computed, -2 no stack takes the byte, else a state */
    uint32_t *mask;       /* the cached mask, or NULL */
    int32_t count;        /* tokens the cached mask allows */
    int accepting;
    int reach1;           /* 0 unknown, else 1 + reach() */
    int32_t nu2;          /* 0 unknown, else 2 + next_uniform() */
} mstate;

struct g4_matcher {
    const g4_grammar *g;
    const g4_vocab_index *v;
    int32_t *npos, *npar;       /* stack nodes */
    int n_nodes, cap_nodes;
    int32_t *nhash;             /* open addressing over nodes, size hcap (power of 2) */
    int hcap;
    uint32_t *stamp;            /* per node: the closure pass that last visited it */
    uint32_t pass;
    int32_t *sets;              /* every state's stacks, back to back */
    int n_sets, cap_sets;
    mstate *st;
    int n_st, cap_st;
    int32_t *shash;
    int shcap;
    int32_t *buf;               /* the set being built */
    int n_buf, cap_buf;
    int cur;                    /* the current state, -1 after the end token */
    int cache;                  /* cache masks per state */
    int n_cached;
    int32_t *walk;              /* per trie depth: the state reached */
    int err;
};

const g4_vocab_index *g4_matcher_vocab(const g4_matcher *m) { return m->v; }

static uint32_t hash2(uint32_t a, uint32_t b) {
    uint64_t h = ((uint64_t)a << 32 | b) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32);
}

static int grow(void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return 0;
    int nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *np = realloc(*p, (size_t)nc * elem);
    if (!np) return -1;
    *p = np;
    *cap = nc;
    return 0;
}

static int rehash_nodes(g4_matcher *m, int cap) {
    int32_t *h = malloc((size_t)cap * sizeof *h);
    if (!h) return -1;
    memset(h, 0xFF, (size_t)cap * sizeof *h);
    for (int i = 1; i < m->n_nodes; i++) {
        uint32_t k = hash2((uint32_t)m->npos[i], (uint32_t)m->npar[i]) & (uint32_t)(cap - 1);
        while (h[k] >= 0) k = (k + 1) & (uint32_t)(cap - 1);
        h[k] = i;
    }
    free(m->nhash);
    m->nhash = h;
    m->hcap = cap;
    return 0;
}

static int grow_nodes(g4_matcher *m) {
    int nc = m->cap_nodes * 2;
    int32_t *a = realloc(m->npos, (size_t)nc * sizeof *a);
    if (!a) return -1;
    m->npos = a;
    int32_t *b = realloc(m->npar, (size_t)nc * sizeof *b);
    if (!b) return -1;
    m->npar = b;
    uint32_t *c = realloc(m->stamp, (size_t)nc * sizeof *c);
    if (!c) return -1;
    m->stamp = c;
    m->cap_nodes = nc;
    return 0;
}

/* The stack with `pos` on top of `parent`; a finished alternative is popped at once. */
static int32_t mk_node(g4_matcher *m, int32_t pos, int32_t parent) {
    if (m->g->el[pos] == GR_END) return parent;
    uint32_t k = hash2((uint32_t)pos, (uint32_t)parent) & (uint32_t)(m->hcap - 1);
    for (int32_t i; (i = m->nhash[k]) >= 0; k = (k + 1) & (uint32_t)(m->hcap - 1))
        if (m->npos[i] == pos && m->npar[i] == parent) return i;
    if (m->n_nodes == m->cap_nodes && grow_nodes(m)) { m->err = 1; return -1; }
    int32_t id = m->n_nodes++;
    m->npos[id] = pos;
    m->npar[id] = parent;
    m->stamp[id] = 0;
    m->nhash[k] = id;
    if (m->n_nodes * 2 > m->hcap && rehash_nodes(m, m->hcap * 2)) { m->err = 1; return -1; }
    return id;
}

static void buf_add(g4_matcher *m, int32_t x) {
    if (grow((void **)&m->buf, &m->cap_buf, m->n_buf + 1, sizeof *m->buf)) { m->err = 1; return; }
    m->buf[m->n_buf++] = x;
}

/* Adds stack x to the set being built, expanding rule references on top into their
 * alternatives until every stack has a terminal on top. */
static void closure(g4_matcher *m, int32_t x) {
    if (x < 0 || m->err) return;
    if (m->stamp[x] == m->pass) return;
    m->stamp[x] = m->pass;
    if (x == 0) { buf_add(m, 0); return; }
    int32_t pos = m->npos[x], e = m->g->el[pos];
    if (!GR_IS_REF(e)) { buf_add(m, x); return; }
    int r = GR_ARG(e);
    int32_t cont = mk_node(m, pos + 1, m->npar[x]);
    if (cont < 0) return;
    for (int a = m->g->alt_off[r]; a < m->g->alt_off[r + 1]; a++) closure(m, mk_node(m, m->g->alts[a], cont));
}

static int cmp_i32(const void *x, const void *y) {
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return a < b ? -1 : a > b;
}

static uint32_t set_hash(const int32_t *s, int n) {
    uint32_t h = 2166136261u;
    for (int i = 0; i < n; i++) h = hash2(h, (uint32_t)s[i]);
    return h;
}

static int rehash_states(g4_matcher *m, int cap) {
    int32_t *h = malloc((size_t)cap * sizeof *h);
    if (!h) return -1;
    memset(h, 0xFF, (size_t)cap * sizeof *h);
    for (int i = 0; i < m->n_st; i++) {
        uint32_t k = set_hash(m->sets + m->st[i].off, m->st[i].n) & (uint32_t)(cap - 1);
        while (h[k] >= 0) k = (k + 1) & (uint32_t)(cap - 1);
        h[k] = i;
    }
    free(m->shash);
    m->shash = h;
    m->shcap = cap;
    return 0;
}

/* The state for the set in buf (sorted here), -2 when empty, -3 out of memory. */
static int32_t intern(g4_matcher *m) {
    if (m->err) return -3;
    if (!m->n_buf) return -2;
    qsort(m->buf, (size_t)m->n_buf, sizeof *m->buf, cmp_i32);
    uint32_t k = set_hash(m->buf, m->n_buf) & (uint32_t)(m->shcap - 1);
    for (int32_t i; (i = m->shash[k]) >= 0; k = (k + 1) & (uint32_t)(m->shcap - 1))
        if (m->st[i].n == m->n_buf && !memcmp(m->sets + m->st[i].off, m->buf, (size_t)m->n_buf * sizeof *m->buf)) return i;
    if (grow((void **)&m->sets, &m->cap_sets, m->n_sets + m->n_buf, sizeof *m->sets) ||
        grow((void **)&m->st, &m->cap_st, m->n_st + 1, sizeof *m->st)) return -3;
    int32_t id = m->n_st++;
    mstate *s = &m->st[id];
    memset(s, 0, sizeof *s);
    s->off = m->n_sets;
    s->n = m->n_buf;
    s->accepting = m->buf[0] == 0;
    memcpy(m->sets + m->n_sets, m->buf, (size_t)m->n_buf * sizeof *m->buf);
    m->n_sets += m->n_buf;
    m->shash[k] = id;
    if (m->n_st * 2 > m->shcap && rehash_states(m, m->shcap * 2)) return -3;
    return id;
}

static void begin_set(g4_matcher *m) {
    m->n_buf = 0;
    if (++m->pass == 0) {  /* the stamps wrapped: clear them */
        memset(m->stamp, 0, (size_t)m->n_nodes * sizeof *m->stamp);
        m->pass = 1;
    }
}

/* The state after byte b from state s (-2: b is not allowed; -3: out of memory). */
static int32_t step_slow(g4_matcher *m, int32_t s, unsigned b) {
    if (!m->st[s].trans) {
        int32_t *t = malloc(256 * sizeof *t);
        if (!t) return -3;
        memset(t, 0xFF, 256 * sizeof *t);
        m->st[s].trans = t;
    }
    begin_set(m);
    for (int i = 0; i < m->st[s].n; i++) {
        int32_t x = m->sets[m->st[s].off + i];
        if (!x) continue;
        int32_t pos = m->npos[x];
        if (gr_class_has(&m->g->cls[GR_ARG(m->g->el[pos])], b)) closure(m, mk_node(m, pos + 1, m->npar[x]));
    }
    int32_t r = intern(m);
    if (r == -3) return -3;
    m->st[s].trans[b] = r;
    return r;
}

static inline int32_t step(g4_matcher *m, int32_t s, unsigned b) {
    const int32_t *t = m->st[s].trans;
    int32_t r = t ? t[b] : -1;
    return r != -1 ? r : step_slow(m, s, b);
}

void g4_matcher_free(g4_matcher *m) {
    if (!m) return;
    for (int i = 0; i < m->n_st; i++) { free(m->st[i].trans); free(m->st[i].mask); }
    free(m->st);
    free(m->sets);
    free(m->shash);
    free(m->npos);
    free(m->npar);
    free(m->nhash);
    free(m->stamp);
    free(m->buf);
    free(m->walk);
    free(m);
}

g4_status g4_grammar_matcher_new(const g4_grammar *g, const g4_vocab_index *v, g4_matcher **out) {
    *out = NULL;
    g4_matcher *m = calloc(1, sizeof *m);
    if (!m) return g4_fail(G4_ERR_NOMEM, "matcher: out of memory");
    m->g = g;
    m->v = v;
    m->cache = 1;
    m->walk = malloc((size_t)(v->max_depth + 1) * sizeof *m->walk);
    m->cap_nodes = 64;
    m->npos = malloc(64 * sizeof *m->npos);
    m->npar = malloc(64 * sizeof *m->npar);
    m->stamp = malloc(64 * sizeof *m->stamp);
    if (!m->walk || !m->npos || !m->npar || !m->stamp) goto nomem;
    m->n_nodes = 1;
    m->npos[0] = -1;
    m->npar[0] = -1;
    m->stamp[0] = 0;
    if (rehash_nodes(m, 256) || rehash_states(m, 256)) goto nomem;
    /* the start state: the root rule's alternatives over the empty stack */
    begin_set(m);
    for (int a = g->alt_off[g->root]; a < g->alt_off[g->root + 1]; a++) closure(m, mk_node(m, g->alts[a], 0));
    m->cur = intern(m);
    if (m->cur < 0) goto nomem;
    *out = m;
    return G4_OK;
nomem:
    g4_matcher_free(m);
    return g4_fail(G4_ERR_NOMEM, "matcher: out of memory");
}

void g4_matcher_set_cache(g4_matcher *m, int on) { m->cache = on; }

int g4_matcher_accepts_end(const g4_matcher *m) { return m->cur >= 0 && m->st[m->cur].accepting; }

int g4_matcher_is_end(const g4_matcher *m, int32_t tok) {
    for (int i = 0; i < m->v->n_end; i++)
        if (m->v->end_ids[i] == tok) return 1;
    return 0;
}

/* Feeds bytes from the current state: 1 taken (the state moves), 0 not (it stays), -1 no memory. */
int g4_matcher_accept_bytes(g4_matcher *m, const void *bytes, size_t n) {
    if (m->cur < 0) return 0;
    const unsigned char *p = bytes;
    int32_t s = m->cur;
    for (size_t i = 0; i < n; i++) {
        s = step(m, s, p[i]);
        if (s == -3) { g4_fail(G4_ERR_NOMEM, "matcher: out of memory"); return -1; }
        if (s < 0) return 0;
    }
    m->cur = s;
    return 1;
}

int g4_matcher_accept(g4_matcher *m, int32_t tok) {
    if (m->cur < 0 || tok < 0 || tok >= m->v->n_tok) return 0;
    if (g4_matcher_is_end(m, tok)) {
        if (!m->st[m->cur].accepting) return 0;
        m->cur = -1;
        return 1;
    }
    if (!m->v->len[tok]) return 0;  /* special or empty: never allowed */
    return g4_matcher_accept_bytes(m, m->v->blob + m->v->off[tok], m->v->len[tok]);
}

/* The one state every plain JSON-string character (see utf8_next) leads to from x, all of them
 * and every byte of them allowed; -1 when there is none, -3 out of memory. Explores the pairs
 * (state, UTF-8 state) reachable from (x, 0). */
static int32_t next_uniform(g4_matcher *m, int32_t x0) {
    int32_t qs[32], target = -1;
    uint8_t qu[32];
    int nq = 1;
    qs[0] = x0;
    qu[0] = 0;
    for (int qh = 0; qh < nq; qh++) {
        int32_t x = qs[qh];
        int u = qu[qh];
        for (unsigned b = 0; b < 256; b++) {
            int w = utf8_next(u, b, 1);
            if (w < 0) continue;
            int32_t y = step(m, x, b);
            if (y == -3) return -3;
            if (y < 0) return -1;
            if (w == 0) {
                if (target >= 0 && y != target) return -1;
                target = y;
                continue;
            }
            int seen = 0;
            for (int j = 0; j < nq; j++) seen |= qs[j] == y && qu[j] == w;
            if (seen) continue;
            if (nq == 32) return -1;
            qs[nq] = y;
            qu[nq++] = (uint8_t)w;
        }
    }
    return target;
}

static int32_t next_uniform_memo(g4_matcher *m, int32_t x) {
    if (m->st[x].nu2) return m->st[x].nu2 - 2;
    int32_t t = next_uniform(m, x);
    if (t != -3) m->st[x].nu2 = t + 2;
    return t;
}

/* How many plain characters can follow state s, whichever they are, all through the same states,
 * counted up to the most characters a token starts (as good as any number: inside a JSON string
 * the states loop); 0 also when unknown for lack of memory. A trie subtree of plain text whose
 * paths start at most that many characters, met in state s, is then allowed whole without walking
 * it: the string's content does not matter, only its length (maxLength counts down one state per
 * character). */
static int reach(g4_matcher *m, int32_t s) {
    if (m->st[s].reach1) return m->st[s].reach1 - 1;
    int cap = m->v->max_chars;
    int32_t chain[256];
    int n = 0, r = -1;
    for (int32_t x = s;;) {
        if (m->st[x].reach1) { r = m->st[x].reach1 - 1; break; }
        if (n == cap) { m->st[s].reach1 = cap + 1; return cap; }  /* the states below stay unknown */
        chain[n++] = x;
        int32_t t = next_uniform_memo(m, x);
        if (t == -3) return 0;
        if (t < 0) break;
        for (int j = 0; j < n; j++)
            if (chain[j] == t) {  /* a loop */
                for (int k = 0; k < n; k++) m->st[chain[k]].reach1 = cap + 1;
                return cap;
            }
        x = t;
    }
    for (int k = n - 1; k >= 0; k--) {
        r = r + 1 < cap ? r + 1 : cap;
        m->st[chain[k]].reach1 = r + 1;
    }
    return m->st[s].reach1 - 1;
}

int g4_matcher_mask(g4_matcher *m, uint32_t *mask) {
    const g4_vocab_index *v = m->v;
    size_t words = ((size_t)v->n_tok + 31) / 32;
    if (m->cur < 0) { memset(mask, 0, words * 4); return 0; }
    mstate *cs = &m->st[m->cur];
    if (cs->mask) {
        memcpy(mask, cs->mask, words * 4);
        return cs->count;
    }
    memset(mask, 0, words * 4);
    int count = 0;
    const uint8_t *byte = v->byte, *plain = v->plain, *maxc = v->maxc;
    const uint16_t *depth = v->depth;
    const int32_t *skip = v->skip, *tb = v->tok_begin, *pre = v->pre_tok;
    int32_t *walk = m->walk;
    walk[0] = m->cur;
    for (int i = 1; i < v->n_nodes;) {
        int32_t ps = walk[depth[i] - 1];
        if (plain[i] && maxc[i] <= (m->st[ps].reach1 ? m->st[ps].reach1 - 1 : reach(m, ps))) {
            for (int32_t k = tb[i], e = tb[skip[i]]; k < e; k++) mask[pre[k] >> 5] |= 1u << (pre[k] & 31);
            count += tb[skip[i]] - tb[i];
            i = skip[i];
            continue;
        }
        int32_t s = step(m, ps, byte[i]);
        if (s < 0) {
            if (s == -3) { g4_fail(G4_ERR_NOMEM, "matcher: out of memory"); return -1; }
            i = skip[i];
            continue;
        }
        walk[depth[i]] = s;
        for (int32_t k = tb[i]; k < tb[i + 1]; k++) mask[pre[k] >> 5] |= 1u << (pre[k] & 31);
        count += tb[i + 1] - tb[i];
        i++;
    }
    if (m->st[m->cur].accepting)
        for (int i = 0; i < v->n_end; i++) {
            int32_t t = v->end_ids[i];
            if (!(mask[t >> 5] >> (t & 31) & 1)) { mask[t >> 5] |= 1u << (t & 31); count++; }
        }
    /* a few hundred masks at most: beyond that a walk is cheaper than the memory */
    if (m->cache && m->n_cached < 512) {
        cs = &m->st[m->cur];
        cs->mask = malloc(words * 4);
        if (cs->mask) {
            memcpy(cs->mask, mask, words * 4);
            cs->count = count;
            m->n_cached++;
        }
    }
    return count;
}

/* Whether the bytes could be fed from the current state, computed from the stacks directly
 * (no transition table, no cache): the reference the masks are checked against. */
int g4_matcher_allows_bytes_ref(g4_matcher *m, const void *bytes, size_t n) {
    if (m->cur < 0) return 0;
    const unsigned char *p = bytes;
    int32_t *cur = malloc((size_t)m->st[m->cur].n * sizeof *cur);
    if (!cur) return -1;
    int nc = m->st[m->cur].n;
    memcpy(cur, m->sets + m->st[m->cur].off, (size_t)nc * sizeof *cur);
    for (size_t i = 0; i < n && nc; i++) {
        begin_set(m);
        for (int j = 0; j < nc; j++) {
            int32_t x = cur[j];
            if (!x) continue;
            int32_t pos = m->npos[x];
            if (gr_class_has(&m->g->cls[GR_ARG(m->g->el[pos])], p[i])) closure(m, mk_node(m, pos + 1, m->npar[x]));
        }
        if (m->err) { free(cur); return -1; }
        int32_t *nx = realloc(cur, (size_t)(m->n_buf ? m->n_buf : 1) * sizeof *nx);
        if (!nx) { free(cur); return -1; }
        cur = nx;
        if (m->n_buf) memcpy(cur, m->buf, (size_t)m->n_buf * sizeof *cur);
        nc = m->n_buf;
    }
    free(cur);
    return nc > 0;
}

int g4_matcher_n_states(const g4_matcher *m) { return m->n_st; }

const unsigned char *g4_vocab_index_token_bytes(const g4_vocab_index *v, int32_t tok, size_t *len) {
    if (tok < 0 || tok >= v->n_tok) { *len = 0; return NULL; }
    *len = v->len[tok];
    return v->blob + v->off[tok];
}
