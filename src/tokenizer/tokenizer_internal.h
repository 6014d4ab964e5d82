/* tokenizer_internal.h — the in-memory form of a HuggingFace tokenizer.json shared by the
 * tokenizer files (load, encode, decode): vocabulary, BPE merge table, added-token tries and the
 * normalizer / pre-tokenizer / post-processor / decoder steps. Not part of the public API. */
#ifndef G4_TOKENIZER_INTERNAL_H
#define G4_TOKENIZER_INTERNAL_H

#include "gemma4c.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define TK_MAX_ID (1 << 24) /* ids must be below this (bounds the id-indexed tables) */

/* A byte string owned elsewhere (the tokenizer's arena or a step's pattern). */
typedef struct {
    const char *s;
    uint32_t len;
} tk_str;

/* Open-addressing map from byte strings to ids (linear probing, power-of-two table). Keys live
 * in one caller-owned block `base` (the tokenizer's arena); an entry is one 16-byte slot so a probe
 * costs one cache line. */
typedef struct {
    uint32_t hash;  /* 0 = empty slot (stored hashes are forced non-zero) */
    int32_t val;
    uint32_t off, len; /* key = base[off .. off+len) */
} tk_strent;

typedef struct {
    tk_strent *ent; /* [cap] */
    const char *base;
    uint32_t cap, n;
} tk_strmap;

/* Open-addressing map from an id pair (a << 32 | b) to (rank, merged id); 16-byte slots. */
typedef struct {
    uint64_t key;   /* UINT64_MAX = empty */
    uint32_t rank;
    int32_t merged;
} tk_pairent;

typedef struct {
    tk_pairent *ent; /* [cap] */
    uint32_t cap, n;
} tk_pairmap;

/* Byte trie over added-token contents for leftmost-longest matching (as aho-corasick's
 * MatchKind::LeftmostLongest, which HF's AddedVocabulary uses). */
typedef struct {
    int32_t first_child, next_sibling; /* node indices, -1 = none */
    int32_t added;                     /* index into tokenizer.added, -1 = not a token end */
    uint8_t byte;
} tk_trie_node;

typedef struct {
    tk_trie_node *nodes;
    uint32_t n, cap;
    uint8_t first[256]; /* 1 where some token starts with that byte */
} tk_trie;

typedef struct {
    int32_t id;
    tk_str content;     /* as written in tokenizer.json */
    tk_str norm;        /* content after the normalizer (normalized tokens only) */
    uint8_t special, lstrip, rstrip, single_word, normalized;
} tk_added;

/* Normalizer, pre-tokenizer and decoder steps, flattened (Sequence nodes expanded in order). */
typedef enum {
    TK_NORM_REPLACE,  /* pattern -> content, literal String patterns */
    TK_NORM_PREPEND,  /* content prepended to non-empty strings */
} tk_norm_kind;

typedef enum {
    TK_SPLIT_REMOVED, TK_SPLIT_ISOLATED, TK_SPLIT_MERGED_PREV, TK_SPLIT_MERGED_NEXT,
    TK_SPLIT_CONTIGUOUS
} tk_split_behavior;

typedef enum {
    TK_DEC_REPLACE,       /* per token: pattern -> content */
    TK_DEC_BYTE_FALLBACK, /* runs of <0xXX> tokens -> their bytes (U+FFFD per byte if not UTF-8) */
    TK_DEC_FUSE,          /* all tokens -> one */
    TK_DEC_STRIP,         /* per token: strip up to `start` leading / `stop` trailing `content` chars */
} tk_dec_kind;

typedef struct {
    int kind;
    tk_str pattern, content;  /* owned: malloc'ed copies */
    int behavior, invert;     /* Split */
    uint32_t start, stop;     /* Strip */
} tk_step;

/* TemplateProcessing "single": items are either the sequence or a special token's ids. */
typedef struct {
    int is_sequence;
    int32_t *ids;  /* special token ids (owned) */
    uint32_t n_ids;
} tk_tmpl_item;

struct g4_tokenizer {
    int32_t n_ids;          /* 1 + the largest id of the vocabulary and the added tokens */
    tk_str *piece;          /* [n_ids] token string (added-token content first, as HF's id_to_token) */
    uint8_t *flags;         /* [n_ids] TK_F_* */
    char *arena;            /* backing store of vocabulary pieces and added contents */
    tk_strmap vocab;        /* model vocabulary: piece -> id */
    tk_strmap added_map;    /* added-token content -> id */

    /* BPE model */
    tk_pairmap merges;
    int32_t *cp_id;         /* [n_cp] id + 1 of single-code-point pieces (0 = none) */
    uint32_t n_cp;          /* 1 + the largest such code point */
    int32_t byte_id[256];   /* id of "<0xXX>", -1 when absent */
    int32_t unk_id;         /* -1 when no unk_token */
    int byte_fallback, fuse_unk, ignore_merges;

    /* added tokens */
    tk_added *added;
    uint32_t n_added;
    tk_trie trie_raw, trie_norm; /* non-normalized contents on raw text; normalized on normalized */

    tk_step *norm; uint32_t n_norm;
    tk_step *pre; uint32_t n_pre;
    tk_step *dec; uint32_t n_dec;
    int has_decoder;         /* 0: no decoder, pieces are joined with " " as HF does */
    tk_tmpl_item *post; uint32_t n_post;
    int dec_streamable;      /* decoder chain splits at non-byte tokens (see detok.c) */
};

enum { TK_F_EXISTS = 1, TK_F_SPECIAL = 2, TK_F_ADDED = 4 };

/* tk_maps.c */
/* FNV-1a-style streaming hash with a final mix: hashing a then b equals hashing a ++ b. */
static inline uint64_t tk_hash_feed(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001B3ull;
    return h;
}
static inline uint32_t tk_hash_final(uint64_t h) {
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    uint32_t r = (uint32_t)h;
    return r ? r : 1;
}
#define TK_HASH_INIT 0xCBF29CE484222325ull
static inline uint32_t tk_hash(const char *s, size_t n) { return tk_hash_final(tk_hash_feed(TK_HASH_INIT, s, n)); }
int tk_strmap_init(tk_strmap *m, uint32_t expected, const char *base);
void tk_strmap_free(tk_strmap *m);
/* Inserts or overwrites (last wins, as a Rust HashMap built from JSON); s must lie in m->base.
 * Returns 0 or -1 (OOM). */
int tk_strmap_put(tk_strmap *m, const char *s, uint32_t len, int32_t val);
/* Value for key a ++ b (b may be empty) with its precomputed hash h, or -1. */
static inline int32_t tk_strmap_get2(const tk_strmap *m, uint32_t h, const char *a, size_t al,
                                     const char *b, size_t bl) {
    uint32_t mask = m->cap - 1, i = h & mask;
    for (;;) {
        const tk_strent *e = &m->ent[i];
        if (!e->hash) return -1;
        if (e->hash == h && e->len == al + bl && !memcmp(m->base + e->off, a, al) &&
            !memcmp(m->base + e->off + al, b, bl))
            return e->val;
        i = (i + 1) & mask;
    }
}
/* First slot at or after h's home whose hash is h or that is empty; prefetches that key's bytes.
 * tk_strmap_get_from(m, slot, ...) then finishes the look-up (lets a batch overlap its misses). */
static inline uint32_t tk_strmap_cand(const tk_strmap *m, uint32_t h) {
    uint32_t mask = m->cap - 1, i = h & mask;
    while (m->ent[i].hash && m->ent[i].hash != h) i = (i + 1) & mask;
    __builtin_prefetch(m->base + m->ent[i].off);
    return i;
}
static inline int32_t tk_strmap_get_from(const tk_strmap *m, uint32_t i, uint32_t h, const char *a,
                                         size_t al, const char *b, size_t bl) {
    uint32_t mask = m->cap - 1;
    for (;;) {
        const tk_strent *e = &m->ent[i];
        if (!e->hash) return -1;
        if (e->hash == h && e->len == al + bl && !memcmp(m->base + e->off, a, al) &&
            !memcmp(m->base + e->off + al, b, bl))
            return e->val;
        i = (i + 1) & mask;
    }
}
static inline void tk_strmap_prefetch(const tk_strmap *m, uint32_t h) {
    __builtin_prefetch(&m->ent[h & (m->cap - 1)]);
}
static inline int32_t tk_strmap_get(const tk_strmap *m, const char *s, size_t len) {
    if (!m->cap) return -1;
    return tk_strmap_get2(m, tk_hash(s, len), s, len, "", 0);
}
int tk_pairmap_init(tk_pairmap *m, uint32_t expected);
void tk_pairmap_free(tk_pairmap *m);
int tk_pairmap_put(tk_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t merged);
static inline uint32_t tk_pair_slot(const tk_pairmap *m, int32_t a, int32_t b) {
    uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    return (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> 32) & (m->cap - 1);
}
/* 1 and *rank / *merged when the pair merges, else 0. */
static inline int tk_pairmap_get(const tk_pairmap *m, int32_t a, int32_t b, uint32_t *rank,
                                 int32_t *merged) {
    uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    uint32_t mask = m->cap - 1, i = tk_pair_slot(m, a, b);
    for (;;) {
        const tk_pairent *e = &m->ent[i];
        if (e->key == k) { *rank = e->rank; *merged = e->merged; return 1; }
        if (e->key == UINT64_MAX) return 0;
        i = (i + 1) & mask;
    }
}
/* Large tables (hash maps) on transparent huge pages where the kernel allows, which cuts the
 * load time's page-fault and TLB cost. Filled with byte `fill`. Free with free(). */
void *tk_big_alloc(size_t n, size_t size, int fill);

/* tokenizer.c: UTF-8 helpers */
/* Length of the valid UTF-8 sequence at s (n bytes available), 0 if invalid. */
size_t tk_utf8_len(const unsigned char *s, size_t n);
/* Offset of the first invalid byte, or n if s is valid UTF-8. */
size_t tk_utf8_check(const char *s, size_t n);
uint32_t tk_utf8_decode(const unsigned char *s, size_t *len); /* s must be valid */
size_t tk_put_utf8(char *w, uint32_t cp); /* writes 1-4 bytes */

/* A growable byte buffer. */
typedef struct {
    char *p;
    size_t len, cap;
} tk_buf;
int tk_buf_put(tk_buf *b, const void *s, size_t n);

/* A growable id vector. */
typedef struct {
    int32_t *p;
    size_t len, cap;
} tk_ids;
int tk_ids_push(tk_ids *v, int32_t id);

/* bpe.c: per-call scratch (no global state: one per g4_tokenize call). */
typedef struct {
    uint64_t key;               /* rank << 32 | position */
    int32_t left, right, merged;
} tk_merge_ent;
typedef struct {
    int32_t *sym, *prev, *next; /* [cap] symbols of the word being merged */
    tk_merge_ent *heap;         /* [2 cap] min-heap of queued merges */
    size_t cap;
} tk_bpe_scratch;
void tk_bpe_scratch_free(tk_bpe_scratch *s);
/* One pre-token through the BPE model, ids appended to out. */
g4_status tk_bpe_word(const g4_tokenizer *t, const char *w, size_t n, tk_ids *out, tk_bpe_scratch *s);
/* tokenizer.c: the normalizer steps over s, result in out (out->len bytes, NUL-terminated). */
g4_status tk_normalize(const g4_tokenizer *t, const char *s, size_t n, tk_buf *out);

/* detok.c: runs the decoder chain over pieces, appending the text to out. */
g4_status tk_decode_pieces(const g4_tokenizer *t, const tk_str *pieces, size_t n, tk_buf *out);
/* Whether id's piece is a <0xXX> token at the ByteFallback step of the decoder chain. */
int tk_dec_is_byte_piece(const g4_tokenizer *t, int32_t id);

/* tokenizer_load.c: builds a tokenizer from tokenizer.json text; name is used in errors. */
g4_status tk_load_json(const char *buf, size_t len, const char *name, g4_tokenizer **out);

#endif
