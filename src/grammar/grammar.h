/* grammar.h — the compiled form of a constrained-decoding grammar that src/grammar shares: rules
 * of alternatives over byte-class terminals and rule references, flattened into one element array
 * (the GBNF compiler writes it, the matcher walks it). Every grammar is over bytes: code-point
 * classes are split into UTF-8 byte sequences when compiled. */
#ifndef G4_GRAMMAR_H
#define G4_GRAMMAR_H

#include <stdint.h>

#include "gemma4c.h"

/* Element encoding in g4_grammar.el: GR_END closes an alternative; an even value 2c is the
 * terminal byte class c; an odd value 2r+1 references rule r. */
#define GR_END (-1)
#define GR_IS_REF(e) ((e) & 1)
#define GR_ARG(e) ((e) >> 1)

typedef struct { uint64_t w[4]; } gr_class;   /* a set of bytes */

static inline int gr_class_has(const gr_class *c, unsigned b) { return (int)((c->w[b >> 6] >> (b & 63)) & 1); }

struct g4_grammar {
    int n_rules, root;
    int *alt_off;        /* rule r's alternatives are alts[alt_off[r] .. alt_off[r+1]) */
    int *alts;           /* index into el where an alternative begins */
    int32_t *el;         /* elements, each alternative terminated by GR_END */
    int n_el;
    gr_class *cls;
    int n_cls;
    char **names;        /* rule names, for errors */
};

/* A special token inside the byte language (GBNF's <[id]> and <|name|> token references): the
 * byte 0xFE, which valid UTF-8 never holds, then the id in four 6-bit continuation bytes. The
 * vocabulary index gives each special token these bytes, so a grammar position can allow exactly
 * that token and no text can spell it. */
#define GR_TOKREF_LEAD 0xFE
#define GR_TOKREF_LEN 5
#define GR_TOKREF_MAX (1 << 24)

static inline void gr_tokref(int32_t id, unsigned char out[GR_TOKREF_LEN]) {
    out[0] = GR_TOKREF_LEAD;
    for (int i = 0; i < 4; i++) out[1 + i] = (unsigned char)(0x80 | ((id >> (18 - 6 * i)) & 63));
}

#endif
