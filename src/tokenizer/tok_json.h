/* tok_json.h — the purpose-built strict JSON scanner behind the tokenizer.json loader: one pass
 * over the text into a flat pre-order node array; strings point into the text (zero-copy) unless
 * they hold escapes, which are decoded into a side buffer.
 * Owns only JSON syntax; what the nodes mean is tokenizer_load.c's business. */
#ifndef G4_TOK_JSON_H
#define G4_TOK_JSON_H

#include <stddef.h>
#include <stdint.h>

/* TJ_PAIRS: an array whose elements are all [string, string] (BPE merges: 514k of them in Gemma),
 * kept as a compact tj_pair list instead of 3 nodes each; see tj_pairs(). */
typedef enum { TJ_NULL, TJ_FALSE, TJ_TRUE, TJ_NUM, TJ_STR, TJ_ARR, TJ_OBJ, TJ_PAIRS } tj_type;

/* One value. Containers are followed by their children in pre-order; an object's children
 * alternate key (TJ_STR), value. The next sibling of node i is i + nodes[i].size. */
typedef struct {
    uint32_t type;  /* tj_type */
    uint32_t size;  /* nodes in this subtree, itself included */
    uint32_t n;     /* containers: direct children (objects: 2 per member); strings / numbers: bytes */
    uint32_t off;   /* strings: TJ_SIDE | offset into `side` when the string had escapes, else the
                     * offset of its content in buf; others: first byte of the token */
} tj_node;

#define TJ_SIDE 0x80000000u

/* One [a, b] element of a TJ_PAIRS array: the strings as (offset, length) like TJ_STR nodes. */
typedef struct {
    uint32_t a_off, a_len, b_off, b_len;
    uint32_t open; /* byte offset of the element's '[' */
} tj_pair;

typedef struct {
    uint32_t node, first; /* a TJ_PAIRS node and the index of its first pair in tj_doc.pairs */
} tj_pairs_ref;

typedef struct {
    const char *buf;    /* the text (never written: it may be a read-only mapping) */
    size_t len;
    char *side;         /* unescaped copies of the strings that contain escapes */
    size_t side_len, side_cap;
    tj_node *nodes;     /* [n_nodes] */
    size_t n_nodes, cap;
    tj_pair *pairs;     /* elements of all TJ_PAIRS arrays */
    size_t n_pairs, pairs_cap;
    tj_pairs_ref *refs; /* which TJ_PAIRS node owns which pairs */
    size_t n_refs, refs_cap;
    size_t pos;         /* scanner position */
    size_t split_min;   /* arrays of pairs with at least this much text left are split over 2 threads */
    char err[200];      /* "byte N: what went wrong" after a failed tj_parse */
} tj_doc;

/* Parses buf[0..len) (exactly one JSON value, surrounding whitespace allowed; strings must be
 * valid UTF-8; nesting at most 128 deep; under 2 GiB). Returns 0 on success, -1 with d->err set. */
int tj_parse(tj_doc *d, const char *buf, size_t len);
/* Same, splitting arrays of pairs followed by >= split_min bytes over two threads (tj_parse: 1 MiB;
 * tests use small values). The result is identical either way. */
int tj_parse_split(tj_doc *d, const char *buf, size_t len, size_t split_min);
void tj_free(tj_doc *d);

static inline const tj_node *tj_at(const tj_doc *d, uint32_t i) { return &d->nodes[i]; }
static inline uint32_t tj_next(const tj_doc *d, uint32_t i) { return i + d->nodes[i].size; }
static inline const char *tj_str(const tj_doc *d, uint32_t i, size_t *len) {
    uint32_t off = d->nodes[i].off;
    if (len) *len = d->nodes[i].n;
    return (off & TJ_SIDE) ? d->side + (off & ~TJ_SIDE) : d->buf + off;
}
/* The string at (off, len) as stored in a node or a tj_pair. */
static inline const char *tj_at_off(const tj_doc *d, uint32_t off) {
    return (off & TJ_SIDE) ? d->side + (off & ~TJ_SIDE) : d->buf + off;
}
/* The elements of TJ_PAIRS node i (nodes[i].n of them). */
const tj_pair *tj_pairs(const tj_doc *d, uint32_t i);
/* Value of member `key` of object node `obj`, or 0 when absent (0 is never a member value). */
uint32_t tj_get(const tj_doc *d, uint32_t obj, const char *key);
/* 1 if the string node equals the NUL-terminated s. */
int tj_str_eq(const tj_doc *d, uint32_t i, const char *s);
/* An integral number node in [lo, hi] into *out: 0 ok, -1 otherwise. */
int tj_int(const tj_doc *d, uint32_t i, int64_t lo, int64_t hi, int64_t *out);
const char *tj_type_name(uint32_t type);

#endif
