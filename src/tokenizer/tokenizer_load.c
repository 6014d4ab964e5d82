/* tokenizer_load.c — builds a g4_tokenizer from tokenizer.json: the BPE vocabulary and merge
 * table, added tokens (ids assigned as HF's AddedVocabulary does), and the normalizer /
 * pre-tokenizer / post-processor / decoder steps we implement. Anything else is refused naming
 * the type. Owns loading and freeing; encoding is tokenizer.c / bpe.c, decoding detok.c. */
#include "io/gguf.h"
#include "io/source.h"
#include "tokenizer/tok_json.h"
#include "tokenizer/tokenizer_gguf.h"
#include "tokenizer/tokenizer_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

typedef struct {
    tj_doc d;
    const char *name;
} ld_ctx;

static g4_status lfail(ld_ctx *c, uint32_t node, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static g4_status lfail(ld_ctx *c, uint32_t node, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return g4_fail(G4_ERR_INPUT, "%s: byte %u: %s", c->name, c->d.nodes[node].off, msg);
}

/* A printable, truncated rendering of a string node for error messages. */
static const char *show(ld_ctx *c, uint32_t node, char *tmp, size_t cap) {
    size_t n;
    const char *s = tj_str(&c->d, node, &n);
    size_t k = 0;
    for (size_t i = 0; i < n && k + 5 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch == 0x7f) k += (size_t)snprintf(tmp + k, cap - k, "\\x%02X", ch);
        else tmp[k++] = (char)ch;
    }
    tmp[k] = 0;
    return tmp;
}

static g4_status want(ld_ctx *c, uint32_t node, uint32_t type, const char *field) {
    if (type == TJ_ARR && c->d.nodes[node].type == TJ_PAIRS)
        return lfail(c, node, "%s: unexpected [string, string] elements", field);
    if (c->d.nodes[node].type != type)
        return lfail(c, node, "%s: expected %s, got %s", field, tj_type_name(type),
                     tj_type_name(c->d.nodes[node].type));
    return G4_OK;
}

/* Optional boolean member (absent or null -> def). */
static g4_status get_bool(ld_ctx *c, uint32_t obj, const char *key, const char *ctx, int def, int *out) {
    uint32_t v = tj_get(&c->d, obj, key);
    *out = def;
    if (!v || c->d.nodes[v].type == TJ_NULL) return G4_OK;
    if (c->d.nodes[v].type == TJ_TRUE) { *out = 1; return G4_OK; }
    if (c->d.nodes[v].type == TJ_FALSE) { *out = 0; return G4_OK; }
    return lfail(c, v, "%s.%s: expected a boolean, got %s", ctx, key, tj_type_name(c->d.nodes[v].type));
}

/* Required string member. */
static g4_status get_str(ld_ctx *c, uint32_t obj, const char *key, const char *ctx, uint32_t *out) {
    uint32_t v = tj_get(&c->d, obj, key);
    if (!v) return lfail(c, obj, "%s: field '%s' missing", ctx, key);
    if (c->d.nodes[v].type != TJ_STR)
        return lfail(c, v, "%s.%s: expected a string, got %s", ctx, key, tj_type_name(c->d.nodes[v].type));
    *out = v;
    return G4_OK;
}

static g4_status dup_str(ld_ctx *c, uint32_t node, tk_str *out) {
    size_t n;
    const char *s = tj_str(&c->d, node, &n);
    char *p = malloc(n + 1);
    if (!p) return g4_fail(G4_ERR_NOMEM, "%s: out of memory", c->name);
    memcpy(p, s, n);
    p[n] = 0;
    out->s = p;
    out->len = (uint32_t)n;
    return G4_OK;
}

static g4_status push_step(ld_ctx *c, tk_step **steps, uint32_t *n, tk_step **out) {
    tk_step *ns = realloc(*steps, (*n + 1) * sizeof **steps);
    if (!ns) return g4_fail(G4_ERR_NOMEM, "%s: out of memory", c->name);
    *steps = ns;
    *out = &ns[(*n)++];
    memset(*out, 0, sizeof **out);
    return G4_OK;
}

/* {"String": "..."} -> the literal; {"Regex": ...} is refused. */
static g4_status get_pattern(ld_ctx *c, uint32_t obj, const char *ctx, tk_str *out) {
    uint32_t p = tj_get(&c->d, obj, "pattern");
    if (!p) return lfail(c, obj, "%s: field 'pattern' missing", ctx);
    if (c->d.nodes[p].type != TJ_OBJ || c->d.nodes[p].n != 2)
        return lfail(c, p, "%s.pattern: expected {\"String\": ...}", ctx);
    uint32_t k = p + 1, v = tj_next(&c->d, k);
    if (tj_str_eq(&c->d, k, "Regex"))
        return lfail(c, k, "%s.pattern: Regex patterns are not supported (only String)", ctx);
    if (!tj_str_eq(&c->d, k, "String") || c->d.nodes[v].type != TJ_STR)
        return lfail(c, k, "%s.pattern: expected {\"String\": \"...\"}", ctx);
    if (c->d.nodes[v].n == 0) return lfail(c, v, "%s.pattern: empty String pattern is not supported", ctx);
    return dup_str(c, v, out);
}

static g4_status get_type(ld_ctx *c, uint32_t obj, const char *ctx, uint32_t *type) {
    g4_status st;
    if ((st = want(c, obj, TJ_OBJ, ctx))) return st;
    return get_str(c, obj, "type", ctx, type);
}

static g4_status load_normalizer(ld_ctx *c, g4_tokenizer *t, uint32_t obj, int depth) {
    uint32_t ty;
    g4_status st;
    char tmp[64];
    if (depth > 16) return lfail(c, obj, "normalizer: Sequence nested too deep");
    if ((st = get_type(c, obj, "normalizer", &ty))) return st;
    tk_step *s;
    if (tj_str_eq(&c->d, ty, "Sequence")) {
        uint32_t arr = tj_get(&c->d, obj, "normalizers");
        if (!arr) return lfail(c, obj, "normalizer Sequence: field 'normalizers' missing");
        if ((st = want(c, arr, TJ_ARR, "normalizer.normalizers"))) return st;
        uint32_t e = arr + 1;
        for (uint32_t i = 0; i < c->d.nodes[arr].n; i++, e = tj_next(&c->d, e))
            if ((st = load_normalizer(c, t, e, depth + 1))) return st;
        return G4_OK;
    }
    if (tj_str_eq(&c->d, ty, "Replace")) {
        uint32_t content;
        if ((st = get_str(c, obj, "content", "normalizer Replace", &content))) return st;
        if ((st = push_step(c, &t->norm, &t->n_norm, &s))) return st;
        s->kind = TK_NORM_REPLACE;
        if ((st = get_pattern(c, obj, "normalizer Replace", &s->pattern))) return st;
        return dup_str(c, content, &s->content);
    }
    if (tj_str_eq(&c->d, ty, "Prepend")) {
        uint32_t content;
        if ((st = get_str(c, obj, "prepend", "normalizer Prepend", &content))) return st;
        if ((st = push_step(c, &t->norm, &t->n_norm, &s))) return st;
        s->kind = TK_NORM_PREPEND;
        return dup_str(c, content, &s->content);
    }
    return lfail(c, ty, "normalizer type '%s' is not supported", show(c, ty, tmp, sizeof tmp));
}

static g4_status load_pretok(ld_ctx *c, g4_tokenizer *t, uint32_t obj, int depth) {
    uint32_t ty, beh;
    g4_status st;
    char tmp[64];
    if (depth > 16) return lfail(c, obj, "pre_tokenizer: Sequence nested too deep");
    if ((st = get_type(c, obj, "pre_tokenizer", &ty))) return st;
    if (tj_str_eq(&c->d, ty, "Sequence")) {
        uint32_t arr = tj_get(&c->d, obj, "pretokenizers");
        if (!arr) return lfail(c, obj, "pre_tokenizer Sequence: field 'pretokenizers' missing");
        if ((st = want(c, arr, TJ_ARR, "pre_tokenizer.pretokenizers"))) return st;
        uint32_t e = arr + 1;
        for (uint32_t i = 0; i < c->d.nodes[arr].n; i++, e = tj_next(&c->d, e))
            if ((st = load_pretok(c, t, e, depth + 1))) return st;
        return G4_OK;
    }
    if (tj_str_eq(&c->d, ty, "Split")) {
        static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
                                      "Contiguous"};
        tk_step *s;
        if ((st = get_str(c, obj, "behavior", "pre_tokenizer Split", &beh))) return st;
        int b = -1;
        for (int i = 0; i < 5; i++)
            if (tj_str_eq(&c->d, beh, names[i])) b = i;
        if (b < 0)
            return lfail(c, beh, "pre_tokenizer Split: behavior '%s' is not supported",
                         show(c, beh, tmp, sizeof tmp));
        if ((st = push_step(c, &t->pre, &t->n_pre, &s))) return st;
        s->kind = 0;
        s->behavior = b;
        if ((st = get_bool(c, obj, "invert", "pre_tokenizer Split", 0, &s->invert))) return st;
        return get_pattern(c, obj, "pre_tokenizer Split", &s->pattern);
    }
    return lfail(c, ty, "pre_tokenizer type '%s' is not supported", show(c, ty, tmp, sizeof tmp));
}

static g4_status load_decoder(ld_ctx *c, g4_tokenizer *t, uint32_t obj, int depth) {
    uint32_t ty;
    g4_status st;
    char tmp[64];
    tk_step *s;
    if (depth > 16) return lfail(c, obj, "decoder: Sequence nested too deep");
    if ((st = get_type(c, obj, "decoder", &ty))) return st;
    if (tj_str_eq(&c->d, ty, "Sequence")) {
        uint32_t arr = tj_get(&c->d, obj, "decoders");
        if (!arr) return lfail(c, obj, "decoder Sequence: field 'decoders' missing");
        if ((st = want(c, arr, TJ_ARR, "decoder.decoders"))) return st;
        uint32_t e = arr + 1;
        for (uint32_t i = 0; i < c->d.nodes[arr].n; i++, e = tj_next(&c->d, e))
            if ((st = load_decoder(c, t, e, depth + 1))) return st;
        return G4_OK;
    }
    if (tj_str_eq(&c->d, ty, "Replace")) {
        uint32_t content;
        if ((st = get_str(c, obj, "content", "decoder Replace", &content))) return st;
        if ((st = push_step(c, &t->dec, &t->n_dec, &s))) return st;
        s->kind = TK_DEC_REPLACE;
        if ((st = get_pattern(c, obj, "decoder Replace", &s->pattern))) return st;
        return dup_str(c, content, &s->content);
    }
    if (tj_str_eq(&c->d, ty, "ByteFallback") || tj_str_eq(&c->d, ty, "Fuse")) {
        if ((st = push_step(c, &t->dec, &t->n_dec, &s))) return st;
        s->kind = tj_str_eq(&c->d, ty, "Fuse") ? TK_DEC_FUSE : TK_DEC_BYTE_FALLBACK;
        return G4_OK;
    }
    if (tj_str_eq(&c->d, ty, "Strip")) {
        uint32_t content, v;
        int64_t x;
        if ((st = get_str(c, obj, "content", "decoder Strip", &content))) return st;
        size_t n;
        const char *cs = tj_str(&c->d, content, &n);
        if (n == 0 || tk_utf8_len((const unsigned char *)cs, n) != n)
            return lfail(c, content, "decoder Strip: content must be one character");
        if ((st = push_step(c, &t->dec, &t->n_dec, &s))) return st;
        s->kind = TK_DEC_STRIP;
        if ((st = dup_str(c, content, &s->content))) return st;
        const char *keys[2] = {"start", "stop"};
        for (int k = 0; k < 2; k++) {
            v = tj_get(&c->d, obj, keys[k]);
            if (!v || tj_int(&c->d, v, 0, UINT32_MAX, &x))
                return lfail(c, v ? v : obj, "decoder Strip: field '%s' must be a non-negative integer", keys[k]);
            if (k == 0) s->start = (uint32_t)x;
            else s->stop = (uint32_t)x;
        }
        return G4_OK;
    }
    return lfail(c, ty, "decoder type '%s' is not supported", show(c, ty, tmp, sizeof tmp));
}

static g4_status load_post(ld_ctx *c, g4_tokenizer *t, uint32_t obj) {
    uint32_t ty;
    g4_status st;
    char tmp[64];
    if ((st = get_type(c, obj, "post_processor", &ty))) return st;
    if (!tj_str_eq(&c->d, ty, "TemplateProcessing"))
        return lfail(c, ty, "post_processor type '%s' is not supported", show(c, ty, tmp, sizeof tmp));
    uint32_t single = tj_get(&c->d, obj, "single"), specials = tj_get(&c->d, obj, "special_tokens");
    if (!single) return lfail(c, obj, "post_processor TemplateProcessing: field 'single' missing");
    if ((st = want(c, single, TJ_ARR, "post_processor.single"))) return st;
    if (specials && c->d.nodes[specials].type != TJ_OBJ)
        return lfail(c, specials, "post_processor.special_tokens: expected an object");
    uint32_t n = c->d.nodes[single].n, e = single + 1;
    t->post = calloc(n ? n : 1, sizeof *t->post);
    if (!t->post) return g4_fail(G4_ERR_NOMEM, "%s: out of memory", c->name);
    for (uint32_t i = 0; i < n; i++, e = tj_next(&c->d, e)) {
        tk_tmpl_item *it = &t->post[t->n_post++];
        if (c->d.nodes[e].type != TJ_OBJ || c->d.nodes[e].n != 2)
            return lfail(c, e, "post_processor.single[%u]: expected {\"SpecialToken\"|\"Sequence\": {...}}", i);
        uint32_t k = e + 1, v = tj_next(&c->d, k), id;
        if ((st = want(c, v, TJ_OBJ, "post_processor.single item"))) return st;
        if ((st = get_str(c, v, "id", "post_processor.single item", &id))) return st;
        if (tj_str_eq(&c->d, k, "Sequence")) {
            if (!tj_str_eq(&c->d, id, "A"))
                return lfail(c, id, "post_processor.single[%u]: sequence id must be \"A\"", i);
            it->is_sequence = 1;
        } else if (tj_str_eq(&c->d, k, "SpecialToken")) {
            size_t idl;
            const char *ids = tj_str(&c->d, id, &idl);
            uint32_t sp = 0;
            if (specials) {
                uint32_t mk = specials + 1;
                for (uint32_t m = 0; m < c->d.nodes[specials].n; m += 2) {
                    uint32_t mv = tj_next(&c->d, mk);
                    if (c->d.nodes[mk].n == idl && !memcmp(tj_str(&c->d, mk, NULL), ids, idl)) sp = mv;
                    mk = tj_next(&c->d, mv);
                }
            }
            if (!sp) return lfail(c, id, "post_processor: special token '%s' missing from special_tokens", show(c, id, tmp, sizeof tmp));
            uint32_t arr = tj_get(&c->d, sp, "ids");
            if (!arr || c->d.nodes[arr].type != TJ_ARR)
                return lfail(c, sp, "post_processor.special_tokens['%s']: field 'ids' must be an array", show(c, id, tmp, sizeof tmp));
            it->n_ids = c->d.nodes[arr].n;
            it->ids = malloc((it->n_ids ? it->n_ids : 1) * sizeof *it->ids);
            if (!it->ids) return g4_fail(G4_ERR_NOMEM, "%s: out of memory", c->name);
            uint32_t x = arr + 1;
            for (uint32_t j = 0; j < it->n_ids; j++, x = tj_next(&c->d, x)) {
                int64_t v64;
                if (tj_int(&c->d, x, 0, TK_MAX_ID - 1, &v64))
                    return lfail(c, x, "post_processor.special_tokens['%s'].ids[%u]: expected an id in [0, %d)", show(c, id, tmp, sizeof tmp), j, TK_MAX_ID);
                it->ids[j] = (int32_t)v64;
            }
        } else {
            return lfail(c, k, "post_processor.single[%u]: expected SpecialToken or Sequence", i);
        }
    }
    return G4_OK;
}

/* ---------------------------------------------------------------- model */

/* Resolution of merges [begin, end) to (id a, id b, merged id) triples; first failure recorded. */
typedef struct {
    const tj_doc *d;
    const tk_strmap *vocab;
    const tj_pair *pairs;   /* the merges when stored as TJ_PAIRS, else NULL (walk nodes) */
    uint32_t node;          /* node of merge `begin` (when pairs is NULL) */
    uint32_t begin, end;
    int32_t *res;           /* [n_merges * 3] */
    uint32_t bad_rank, bad_node;
    int bad_kind;           /* 1 shape, 2 "a b" string, 3 token a, 4 token b, 5 merged token */
} merge_job;

/* The two halves of merge `e` (["a", "b"] or legacy "a b"), or 0 / the failure kind. */
static int merge_parts(const tj_doc *d, uint32_t e, const char **a, size_t *al, const char **b, size_t *bl) {
    const tj_node *n = &d->nodes[e];
    if (n->type == TJ_ARR && n->n == 2 && d->nodes[e + 1].type == TJ_STR && d->nodes[tj_next(d, e + 1)].type == TJ_STR) {
        *a = tj_str(d, e + 1, al);
        *b = tj_str(d, tj_next(d, e + 1), bl);
        return 0;
    }
    if (n->type != TJ_STR) return 1;
    size_t len;
    const char *s = tj_str(d, e, &len);
    const char *sp = memchr(s, ' ', len);
    if (!sp || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - s))) return 2;
    *a = s;
    *al = (size_t)(sp - s);
    *b = sp + 1;
    *bl = len - *al - 1;
    return 0;
}

/* Blocks of 64: hashes first, then candidate slots (prefetching their keys), then the compares,
 * so the cache misses of a block overlap instead of queueing. */
static void resolve_merges(merge_job *j) {
    enum { BLK = 64 };
    struct { const char *a, *b; size_t al, bl; uint32_t ha, hb, hab, ca, cb, cab, node; } m[BLK];
    uint32_t e = j->node;
    for (uint32_t r0 = j->begin; r0 < j->end; r0 += BLK) {
        uint32_t nb = j->end - r0 < BLK ? j->end - r0 : BLK;
        for (uint32_t k = 0; k < nb; k++) {
            int kind = 0;
            if (j->pairs) {
                const tj_pair *p = &j->pairs[r0 + k];
                m[k].node = r0 + k;
                m[k].a = tj_at_off(j->d, p->a_off);
                m[k].al = p->a_len;
                m[k].b = tj_at_off(j->d, p->b_off);
                m[k].bl = p->b_len;
            } else {
                m[k].node = e;
                kind = merge_parts(j->d, e, &m[k].a, &m[k].al, &m[k].b, &m[k].bl);
                e = tj_next(j->d, e);
            }
            if (kind) {
                j->bad_rank = r0 + k;
                j->bad_node = m[k].node; /* not e: that is already the next element */
                j->bad_kind = kind;
                return;
            }
            uint64_t ha = tk_hash_feed(TK_HASH_INIT, m[k].a, m[k].al);
            m[k].ha = tk_hash_final(ha);
            m[k].hb = tk_hash(m[k].b, m[k].bl);
            m[k].hab = tk_hash_final(tk_hash_feed(ha, m[k].b, m[k].bl));
            tk_strmap_prefetch(j->vocab, m[k].ha);
            tk_strmap_prefetch(j->vocab, m[k].hb);
            tk_strmap_prefetch(j->vocab, m[k].hab);
        }
        for (uint32_t k = 0; k < nb; k++) {
            m[k].ca = tk_strmap_cand(j->vocab, m[k].ha);
            m[k].cb = tk_strmap_cand(j->vocab, m[k].hb);
            m[k].cab = tk_strmap_cand(j->vocab, m[k].hab);
        }
        for (uint32_t k = 0; k < nb; k++) {
            int32_t *x = &j->res[3 * (size_t)(r0 + k)];
            x[0] = tk_strmap_get_from(j->vocab, m[k].ca, m[k].ha, m[k].a, m[k].al, "", 0);
            x[1] = tk_strmap_get_from(j->vocab, m[k].cb, m[k].hb, m[k].b, m[k].bl, "", 0);
            x[2] = tk_strmap_get_from(j->vocab, m[k].cab, m[k].hab, m[k].a, m[k].al, m[k].b, m[k].bl);
            if (x[0] < 0 || x[1] < 0 || x[2] < 0) {
                j->bad_rank = r0 + k;
                j->bad_node = m[k].node;
                j->bad_kind = x[0] < 0 ? 3 : x[1] < 0 ? 4 : 5;
                return;
            }
        }
    }
}

static void *resolve_merges_thread(void *arg) {
    resolve_merges(arg);
    return NULL;
}

static g4_status merge_error(ld_ctx *c, const merge_job *j) {
    const char *a = "", *b = "";
    size_t al = 0, bl = 0;
    if (j->pairs) {
        /* bad_node is the rank: report the element's '[' offset */
        const tj_pair *p = &j->pairs[j->bad_node];
        a = tj_at_off(&c->d, p->a_off);
        al = p->a_len;
        b = tj_at_off(&c->d, p->b_off);
        bl = p->b_len;
        int la = (int)(al > 40 ? 40 : al), lb = (int)(bl > 40 ? 40 : bl);
        const char *what = j->bad_kind == 5 ? "merged token" : "token";
        if (j->bad_kind == 5)
            return g4_fail(G4_ERR_INPUT, "%s: byte %u: model.merges[%u]: %s '%.*s%.*s' is not in the vocabulary",
                           c->name, p->open, j->bad_rank, what, la, a, lb, b);
        return g4_fail(G4_ERR_INPUT, "%s: byte %u: model.merges[%u]: %s '%.*s' is not in the vocabulary", c->name,
                       p->open, j->bad_rank, what, j->bad_kind == 3 ? la : lb, j->bad_kind == 3 ? a : b);
    }
    merge_parts(&c->d, j->bad_node, &a, &al, &b, &bl);
    int la = (int)(al > 40 ? 40 : al), lb = (int)(bl > 40 ? 40 : bl);
    switch (j->bad_kind) {
    case 1: return lfail(c, j->bad_node, "model.merges[%u]: expected [\"a\", \"b\"] or \"a b\"", j->bad_rank);
    case 2: return lfail(c, j->bad_node, "model.merges[%u]: expected \"a b\" with exactly one space", j->bad_rank);
    case 3: return lfail(c, j->bad_node, "model.merges[%u]: token '%.*s' is not in the vocabulary", j->bad_rank, la, a);
    case 4: return lfail(c, j->bad_node, "model.merges[%u]: token '%.*s' is not in the vocabulary", j->bad_rank, lb, b);
    default:
        return lfail(c, j->bad_node, "model.merges[%u]: merged token '%.*s%.*s' is not in the vocabulary",
                     j->bad_rank, la, a, lb, b);
    }
}

static g4_status load_bpe(ld_ctx *c, g4_tokenizer *t, uint32_t model, uint32_t added_arr) {
    g4_status st;
    uint32_t ty = tj_get(&c->d, model, "type");
    char tmp[64];
    if ((st = want(c, model, TJ_OBJ, "model"))) return st;
    if (!ty) return lfail(c, model, "model: field 'type' missing");
    if (c->d.nodes[ty].type != TJ_STR || !tj_str_eq(&c->d, ty, "BPE"))
        return lfail(c, ty, "model type '%s' is not supported (only BPE)",
                     c->d.nodes[ty].type == TJ_STR ? show(c, ty, tmp, sizeof tmp) : "?");
    const char *nullonly[] = {"continuing_subword_prefix", "end_of_word_suffix", "dropout"};
    for (int i = 0; i < 3; i++) {
        uint32_t v = tj_get(&c->d, model, nullonly[i]);
        if (v && c->d.nodes[v].type != TJ_NULL)
            return lfail(c, v, "model.%s: only null is supported", nullonly[i]);
    }
    if ((st = get_bool(c, model, "byte_fallback", "model", 0, &t->byte_fallback))) return st;
    if ((st = get_bool(c, model, "fuse_unk", "model", 0, &t->fuse_unk))) return st;
    if ((st = get_bool(c, model, "ignore_merges", "model", 0, &t->ignore_merges))) return st;
    uint32_t vocab = tj_get(&c->d, model, "vocab"), merges = tj_get(&c->d, model, "merges");
    if (!vocab) return lfail(c, model, "model: field 'vocab' missing");
    if ((st = want(c, vocab, TJ_OBJ, "model.vocab"))) return st;
    if (merges && c->d.nodes[merges].type != TJ_PAIRS && (st = want(c, merges, TJ_ARR, "model.merges"))) return st;

    /* arena: every vocabulary key and added content, NUL-separated */
    uint32_t nv = c->d.nodes[vocab].n / 2, na = added_arr ? c->d.nodes[added_arr].n : 0;
    size_t bytes = 0;
    int64_t max_id = -1;
    uint32_t k = vocab + 1;
    for (uint32_t i = 0; i < nv; i++) {
        uint32_t v = tj_next(&c->d, k);
        int64_t id;
        if (tj_int(&c->d, v, 0, TK_MAX_ID - 1, &id))
            return lfail(c, v, "model.vocab['%s']: expected an id in [0, %d)", show(c, k, tmp, sizeof tmp), TK_MAX_ID);
        if (id > max_id) max_id = id;
        bytes += c->d.nodes[k].n + 1;
        k = tj_next(&c->d, v);
    }
    uint32_t e = added_arr ? added_arr + 1 : 0;
    for (uint32_t i = 0; i < na; i++, e = tj_next(&c->d, e)) {
        uint32_t content;
        if ((st = want(c, e, TJ_OBJ, "added_tokens[]"))) return st;
        if ((st = get_str(c, e, "content", "added_tokens[]", &content))) return st;
        bytes += c->d.nodes[content].n + 1;
    }
    t->arena = malloc(bytes + 1);
    if (!t->arena || tk_strmap_init(&t->vocab, nv, t->arena) || tk_strmap_init(&t->added_map, na, t->arena))
        return g4_fail(G4_ERR_NOMEM, "%s: out of memory", c->name);
    char *ap = t->arena;
    k = vocab + 1;
    enum { VBLK = 32 };
    struct { const char *s; uint32_t n; int32_t id; } vb[VBLK];
    uint32_t(*cps)[2] = NULL; /* (code point, id) of single-character pieces */
    size_t n_cps = 0, cps_cap = 0;
    uint32_t max_cp = 0;
    for (uint32_t i0 = 0; i0 < nv; i0 += VBLK) {
        uint32_t nb = nv - i0 < VBLK ? nv - i0 : VBLK;
        for (uint32_t j = 0; j < nb; j++) {
            uint32_t v = tj_next(&c->d, k);
            int64_t id;
            size_t n;
            const char *s = tj_str(&c->d, k, &n);
            tj_int(&c->d, v, 0, TK_MAX_ID - 1, &id);
            memcpy(ap, s, n);
            ap[n] = 0;
            vb[j].s = ap;
            vb[j].n = (uint32_t)n;
            vb[j].id = (int32_t)id;
            tk_strmap_prefetch(&t->vocab, tk_hash(ap, n));
            if (n >= 1 && n <= 4 && tk_utf8_len((const unsigned char *)ap, n) == n) { /* one code point */
                size_t dl;
                uint32_t cp = tk_utf8_decode((const unsigned char *)ap, &dl);
                if (n_cps == cps_cap) {
                    cps_cap = cps_cap ? cps_cap * 2 : 4096;
                    uint32_t(*nc)[2] = realloc(cps, cps_cap * sizeof *cps);
                    if (!nc) { free(cps); return g4_fail(G4_ERR_NOMEM, "%s: out of memory", c->name); }
                    cps = nc;
                }
                cps[n_cps][0] = cp;
                cps[n_cps][1] = (uint32_t)id;
                n_cps++;
                if (cp > max_cp) max_cp = cp;
            }
            ap += n + 1;
            k = tj_next(&c->d, v);
        }
        for (uint32_t j = 0; j < nb; j++)
            if (tk_strmap_put(&t->vocab, vb[j].s, vb[j].n, vb[j].id)) {
                free(cps);
                return g4_fail(G4_ERR_NOMEM, "%s: out of memory", c->name);
            }
    }
    /* a key given twice keeps its last id (a Rust HashMap built from the JSON): the ids of the
     * earlier copies have no piece then, so the walks below check each key's final id */
    int dup_keys = t->vocab.n != nv;
    /* code point -> id table for BPE's first step, as long as the largest single-character piece */
    t->n_cp = max_cp + 1;
    t->cp_id = calloc(t->n_cp, sizeof *t->cp_id);
    if (!t->cp_id) { free(cps); return g4_fail(G4_ERR_NOMEM, "%s: out of memory", c->name); }
    for (size_t i = 0; i < n_cps; i++) {
        if (dup_keys) {
            char u8[4];
            size_t l = tk_put_utf8(u8, cps[i][0]);
            if (tk_strmap_get(&t->vocab, u8, l) != (int32_t)cps[i][1]) continue;
        }
        t->cp_id[cps[i][0]] = (int32_t)cps[i][1] + 1;
    }
    free(cps);

    /* added tokens: ids as HF's AddedVocabulary::add_tokens assigns them (the JSON "id" is only
     * checked by HF with a warning): an existing added or vocabulary id for the content, else the
     * next free id after the vocabulary */
    t->added = calloc(na ? na : 1, sizeof *t->added);
    if (!t->added) return g4_fail(G4_ERR_NOMEM, "%s: out of memory", c->name);
    int64_t max_added = -1;
    e = added_arr ? added_arr + 1 : 0;
    for (uint32_t i = 0; i < na; i++, e = tj_next(&c->d, e)) {
        uint32_t content;
        get_str(c, e, "content", "added_tokens[]", &content);
        tk_added a;
        memset(&a, 0, sizeof a);
        int fl[5];
        const char *fk[5] = {"special", "lstrip", "rstrip", "single_word", "normalized"};
        for (int f = 0; f < 5; f++)
            if ((st = get_bool(c, e, fk[f], "added_tokens[]", f == 4 ? -1 : 0, &fl[f]))) return st;
        a.special = (uint8_t)fl[0];
        a.lstrip = (uint8_t)fl[1];
        a.rstrip = (uint8_t)fl[2];
        a.single_word = (uint8_t)fl[3];
        /* AddedToken's default: normalized = !special */
        a.normalized = (uint8_t)(fl[4] < 0 ? !fl[0] : fl[4]);
        size_t n;
        const char *s = tj_str(&c->d, content, &n);
        if (n == 0) continue; /* HF ignores empty added tokens */
        memcpy(ap, s, n);
        ap[n] = 0;
        a.content.s = ap;
        a.content.len = (uint32_t)n;
        ap += n + 1;
        int32_t id = tk_strmap_get(&t->added_map, s, n);
        uint32_t slot = t->n_added;
        if (id >= 0) {
            for (uint32_t j = 0; j < t->n_added; j++)
                if (t->added[j].id == id) slot = j; /* redefinition: last flags win */
        } else {
            id = tk_strmap_get(&t->vocab, s, n);
            if (id < 0) {
                int64_t vs = t->vocab.n;
                id = (int32_t)((max_added >= vs || vs == 0) ? max_added + 1 : vs);
                if (id >= TK_MAX_ID) return lfail(c, content, "added_tokens: too many tokens");
            }
        }
        if (id > max_added) max_added = id;
        a.id = id;
        if (slot == t->n_added) t->n_added++;
        int was_special = slot < t->n_added && t->added[slot].special;
        t->added[slot] = a;
        if (was_special) t->added[slot].special = 1; /* special set only grows */
        if (tk_strmap_put(&t->added_map, a.content.s, a.content.len, id))
            return g4_fail(G4_ERR_NOMEM, "%s: out of memory", c->name);
    }
    if (max_added > max_id) max_id = max_added;
    t->n_ids = (int32_t)(max_id + 1);
    t->piece = calloc((size_t)(t->n_ids ? t->n_ids : 1), sizeof *t->piece);
    t->flags = calloc((size_t)(t->n_ids ? t->n_ids : 1), 1);
    if (!t->piece || !t->flags) return g4_fail(G4_ERR_NOMEM, "%s: out of memory", c->name);
    /* pieces in file order: the arena holds the keys in that order (no hash-table walk) */
    ap = t->arena;
    k = vocab + 1;
    for (uint32_t i = 0; i < nv; i++) {
        uint32_t v = tj_next(&c->d, k);
        int64_t id;
        uint32_t n = c->d.nodes[k].n;
        tj_int(&c->d, v, 0, TK_MAX_ID - 1, &id);
        if (!dup_keys || tk_strmap_get(&t->vocab, ap, n) == (int32_t)id) {
            t->piece[id] = (tk_str){ap, n};
            t->flags[id] |= TK_F_EXISTS;
        }
        ap += n + 1;
        k = tj_next(&c->d, v);
    }
    for (uint32_t i = 0; i < t->n_added; i++) {
        tk_added *a = &t->added[i];
        t->piece[a->id] = a->content;
        t->flags[a->id] |= TK_F_EXISTS | TK_F_ADDED;
    }
    for (uint32_t i = 0; i < t->n_added; i++) {
        tk_added *a = &t->added[i];
        if (!a->special) continue;
        t->flags[a->id] |= TK_F_SPECIAL;
        int32_t vid = tk_strmap_get(&t->vocab, a->content.s, a->content.len);
        if (vid >= 0) t->flags[vid] |= TK_F_SPECIAL;
    }
    for (int b = 0; b < 256; b++) {
        char nm[8];
        snprintf(nm, sizeof nm, "<0x%02X>", b);
        t->byte_id[b] = tk_strmap_get(&t->vocab, nm, 6);
    }
    t->unk_id = -1;
    uint32_t unk = tj_get(&c->d, model, "unk_token");
    if (unk && c->d.nodes[unk].type != TJ_NULL) {
        if (c->d.nodes[unk].type != TJ_STR) return lfail(c, unk, "model.unk_token: expected a string or null");
        size_t n;
        const char *s = tj_str(&c->d, unk, &n);
        t->unk_id = tk_strmap_get(&t->vocab, s, n);
        if (t->unk_id < 0) t->unk_id = -2; /* HF fails only when the unk token is needed */
    }

    /* merges: [["a", "b"], ...] or ["a b", ...]; rank = position. Resolving them to ids is 1.5M
     * random hash look-ups, the bulk of the load: two threads each take half (the maps are
     * read-only by then), and the pair table is filled in rank order afterwards. */
    uint32_t nm = merges ? c->d.nodes[merges].n : 0;
    if (tk_pairmap_init(&t->merges, nm)) return g4_fail(G4_ERR_NOMEM, "%s: out of memory", c->name);
    if (!nm) return G4_OK;
    int32_t *res = malloc((size_t)nm * 3 * sizeof *res);
    if (!res) return g4_fail(G4_ERR_NOMEM, "%s: out of memory", c->name);
    merge_job jobs[2];
    uint32_t half = nm >= 65536 ? nm / 2 : nm;
    const tj_pair *pairs = c->d.nodes[merges].type == TJ_PAIRS ? tj_pairs(&c->d, merges) : NULL;
    jobs[0] = (merge_job){&c->d, &t->vocab, pairs, merges + 1, 0, half, res, UINT32_MAX, 0, 0};
    uint32_t e2 = merges + 1;
    if (!pairs)
        for (uint32_t r = 0; r < half; r++) e2 = tj_next(&c->d, e2);
    jobs[1] = (merge_job){&c->d, &t->vocab, pairs, e2, half, nm, res, UINT32_MAX, 0, 0};
    pthread_t th;
    int threaded = half < nm && pthread_create(&th, NULL, resolve_merges_thread, &jobs[1]) == 0;
    resolve_merges(&jobs[0]);
    if (half < nm) {
        if (threaded) pthread_join(th, NULL);
        else resolve_merges(&jobs[1]);
    }
    const merge_job *bad = jobs[0].bad_rank != UINT32_MAX ? &jobs[0] : jobs[1].bad_rank != UINT32_MAX ? &jobs[1] : NULL;
    if (bad) {
        g4_status st = merge_error(c, bad);
        free(res);
        return st;
    }
    enum { BLK = 64 };
    for (uint32_t r0 = 0; r0 < nm; r0 += BLK) {
        uint32_t nb = nm - r0 < BLK ? nm - r0 : BLK;
        for (uint32_t j = 0; j < nb; j++)
            __builtin_prefetch(&t->merges.ent[tk_pair_slot(&t->merges, res[3 * (r0 + j)], res[3 * (r0 + j) + 1])]);
        for (uint32_t j = 0; j < nb; j++) {
            const int32_t *x = &res[3 * (r0 + j)];
            if (tk_pairmap_put(&t->merges, x[0], x[1], r0 + j, x[2])) {
                free(res);
                return g4_fail(G4_ERR_NOMEM, "%s: out of memory", c->name);
            }
        }
    }
    free(res);
    return G4_OK;
}

static int trie_add(tk_trie *tr, const char *s, uint32_t n, int32_t added) {
    if (!tr->nodes) {
        tr->cap = 256;
        tr->nodes = malloc(tr->cap * sizeof *tr->nodes);
        if (!tr->nodes) return -1;
        tr->nodes[0] = (tk_trie_node){-1, -1, -1, 0};
        tr->n = 1;
    }
    tr->first[(unsigned char)s[0]] = 1;
    int32_t cur = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)s[i];
        int32_t ch = tr->nodes[cur].first_child;
        while (ch >= 0 && tr->nodes[ch].byte != b) ch = tr->nodes[ch].next_sibling;
        if (ch < 0) {
            if (tr->n == tr->cap) {
                tk_trie_node *nn = realloc(tr->nodes, tr->cap * 2 * sizeof *nn);
                if (!nn) return -1;
                tr->nodes = nn;
                tr->cap *= 2;
            }
            ch = (int32_t)tr->n++;
            tr->nodes[ch] = (tk_trie_node){-1, tr->nodes[cur].first_child, -1, b};
            tr->nodes[cur].first_child = ch;
        }
        cur = ch;
    }
    if (tr->nodes[cur].added < 0) tr->nodes[cur].added = added; /* first pattern wins, as aho-corasick */
    return 0;
}

static g4_status build_tries(ld_ctx *c, g4_tokenizer *t) {
    /* HF's pattern order: special tokens first, then the others */
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t i = 0; i < t->n_added; i++) {
            tk_added *a = &t->added[i];
            if ((pass == 0) != (a->special != 0)) continue;
            if (!a->normalized) {
                if (trie_add(&t->trie_raw, a->content.s, a->content.len, (int32_t)i))
                    return g4_fail(G4_ERR_NOMEM, "%s: out of memory", c->name);
                continue;
            }
            tk_buf nb = {0};
            g4_status st = tk_normalize(t, a->content.s, a->content.len, &nb);
            if (st) { free(nb.p); return st; }
            a->norm.s = nb.p;
            a->norm.len = (uint32_t)nb.len;
            if (nb.len && trie_add(&t->trie_norm, nb.p, (uint32_t)nb.len, (int32_t)i))
                return g4_fail(G4_ERR_NOMEM, "%s: out of memory", c->name);
        }
    return G4_OK;
}

static void decide_streamable(g4_tokenizer *t) {
    /* Streaming cuts the token sequence before each non-byte token; that is exact when every
     * step before the first Fuse is per-token or ByteFallback (at most one), and nothing but
     * Fuse follows a Fuse. */
    int fused = 0, bf = 0;
    t->dec_streamable = 1;
    for (uint32_t i = 0; i < t->n_dec; i++) {
        int k = t->dec[i].kind;
        if (k == TK_DEC_FUSE) fused = 1;
        else if (fused) t->dec_streamable = 0;
        if (k == TK_DEC_BYTE_FALLBACK && ++bf > 1) t->dec_streamable = 0;
    }
}

g4_status tk_load_json(const char *buf, size_t len, const char *name, g4_tokenizer **out) {
    ld_ctx c;
    c.name = name;
    *out = NULL;
    if (tj_parse(&c.d, buf, len)) {
        g4_status st = g4_fail(G4_ERR_INPUT, "%s: %s", name, c.d.err);
        tj_free(&c.d);
        return st;
    }
    g4_tokenizer *t = calloc(1, sizeof *t);
    g4_status st = G4_OK;
    if (!t) { tj_free(&c.d); return g4_fail(G4_ERR_NOMEM, "%s: out of memory", name); }
    uint32_t root = 0;
    if ((st = want(&c, root, TJ_OBJ, "top level"))) goto done;
    uint32_t v = tj_get(&c.d, root, "version");
    if (v && !tj_str_eq(&c.d, v, "1.0")) { st = lfail(&c, v, "version: only \"1.0\" is supported"); goto done; }
    const char *nulls[] = {"truncation", "padding"};
    for (int i = 0; i < 2; i++) {
        v = tj_get(&c.d, root, nulls[i]);
        if (v && c.d.nodes[v].type != TJ_NULL) { st = lfail(&c, v, "%s: only null is supported", nulls[i]); goto done; }
    }
    uint32_t added = tj_get(&c.d, root, "added_tokens");
    if (added && c.d.nodes[added].type == TJ_NULL) added = 0;
    if (added && (st = want(&c, added, TJ_ARR, "added_tokens"))) goto done;
    v = tj_get(&c.d, root, "normalizer");
    if (v && c.d.nodes[v].type != TJ_NULL && (st = load_normalizer(&c, t, v, 0))) goto done;
    v = tj_get(&c.d, root, "pre_tokenizer");
    if (v && c.d.nodes[v].type != TJ_NULL && (st = load_pretok(&c, t, v, 0))) goto done;
    v = tj_get(&c.d, root, "decoder");
    if (v && c.d.nodes[v].type != TJ_NULL) {
        t->has_decoder = 1;
        if ((st = load_decoder(&c, t, v, 0))) goto done;
    }
    v = tj_get(&c.d, root, "post_processor");
    if (v && c.d.nodes[v].type != TJ_NULL && (st = load_post(&c, t, v))) goto done;
    v = tj_get(&c.d, root, "model");
    if (!v) { st = lfail(&c, root, "field 'model' missing"); goto done; }
    if ((st = load_bpe(&c, t, v, added))) goto done;
    if ((st = build_tries(&c, t))) goto done;
    /* post-processor ids must exist */
    for (uint32_t i = 0; i < t->n_post; i++)
        for (uint32_t j = 0; j < t->post[i].n_ids; j++)
            if (t->post[i].ids[j] >= t->n_ids) {
                st = g4_fail(G4_ERR_INPUT, "%s: post_processor: special token id %d is out of the vocabulary (%d ids)",
                             name, t->post[i].ids[j], t->n_ids);
                goto done;
            }
    decide_streamable(t);
done:
    tj_free(&c.d);
    if (st) { g4_tokenizer_free(t); return st; }
    *out = t;
    return G4_OK;
}

static void free_steps(tk_step *s, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        free((void *)s[i].pattern.s);
        free((void *)s[i].content.s);
    }
    free(s);
}

void g4_tokenizer_free(g4_tokenizer *t) {
    if (!t) return;
    free(t->piece);
    free(t->flags);
    free(t->arena);
    tk_strmap_free(&t->vocab);
    tk_strmap_free(&t->added_map);
    tk_pairmap_free(&t->merges);
    free(t->cp_id);
    for (uint32_t i = 0; i < t->n_added; i++) free((void *)t->added[i].norm.s);
    free(t->added);
    free(t->trie_raw.nodes);
    free(t->trie_norm.nodes);
    free_steps(t->norm, t->n_norm);
    free_steps(t->pre, t->n_pre);
    free_steps(t->dec, t->n_dec);
    for (uint32_t i = 0; i < t->n_post; i++) free(t->post[i].ids);
    free(t->post);
    free(t);
}

/* A tokenizer.json given directly: mapped read-only from the page cache (the scanner never
 * writes the text). */
static g4_status load_json_path(const char *file, g4_tokenizer **out) {
    struct stat sb;
    FILE *f = fopen(file, "rb");
    if (!f) return g4_fail(G4_ERR_INPUT, "%s: cannot open: %s", file, strerror(errno));
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return g4_fail(G4_ERR_INPUT, "%s: not a regular file", file);
    }
    size_t len = (size_t)sb.st_size;
    char *buf = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fileno(f), 0) : NULL;
    fclose(f);
    if (len && buf == MAP_FAILED) return g4_fail(G4_ERR_IO, "%s: mmap failed: %s", file, strerror(errno));
    g4_status st = tk_load_json(len ? buf : "", len, file, out);
    if (len) munmap(buf, len);
    return st;
}

g4_status g4_tokenizer_load(const char *path, g4_tokenizer **out) {
    *out = NULL;
    if (!path) return g4_fail(G4_ERR_INPUT, "tokenizer: no path given");
    /* a path that does not lead to a readable tokenizer.json is bad input (exit 2), not a
     * runtime failure */
    g4_source *src;
    g4_status st = g4_source_open(path, &src);
    if (st) return st;
    const char *data, *where;
    size_t len;
    switch (g4_source_kind_of(src)) {
    case G4_SOURCE_GGUF: {   /* its vocabulary as metadata (tokenizer_gguf.c) */
        const g4_gguf *g = g4_source_gguf(src, &st);
        if (g) st = tk_load_gguf(g, path, out);
        break;
    }
    case G4_SOURCE_FILE: st = load_json_path(path, out); break;
    default:
        if (!(st = g4_source_file(src, "tokenizer.json", &data, &len, &where)))
            st = data ? tk_load_json(data, len, where, out)
                      : g4_fail(G4_ERR_INPUT, "%s: cannot open: No such file or directory", where);
    }
    g4_source_close(src);
    return st;
}
