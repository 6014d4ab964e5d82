/* fuzz_grammar.c — libFuzzer target for the grammar engine (src/grammar): the first byte picks GBNF
 * (token references resolved over the g4-cond-tiny fixture's tokenizer, when it loads), JSON
 * Schema, or an OpenAI tools array (Gemma 4's tool-call grammar); the rest is the text. It must be
 * refused with an error, or compile into a matcher whose masks over a small byte vocabulary agree,
 * token by token, with the matcher's direct simulation while a few bytes of the input are fed
 * through it. Run from the repository root. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4c.h"

static const char *const PIECES[] = {"{", "}", "\"", "a", "ab", "1", "12", " ", "\n", ":", ",", "[", "]",
                                     "true", "null", "\\", "\xC3", "\xA9", "\xC3\xA9", "x\"", "-", "."};
#define NP (int)(sizeof PIECES / sizeof PIECES[0])

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 2048) return 0;
    const char *src = (const char *)data + 1;
    size_t n = size - 1;
    static g4_tokenizer *tk;
    static int tried;
    if (!tried++ && g4_tokenizer_load("tests/fixtures/g4-cond-tiny", &tk) != G4_OK) tk = NULL;
    g4_grammar *g = NULL;
    g4_status st;
    if (data[0] & 2) {   /* tools -> GBNF with token references -> compiled over the tokenizer */
        char *text = NULL;
        st = g4_tool_calls_to_gbnf(src, n, (data[0] & 4) ? "f" : NULL, data[0] >> 3 & 3, &text);
        assert((st == G4_OK) == (text != NULL));
        if (st == G4_OK) {
            st = g4_grammar_compile_gbnf_tokens(text, strlen(text), NULL, tk, &g);
            assert(st == G4_OK || !tk);   /* what the converter writes always compiles */
            free(text);
        }
    } else {
        st = (data[0] & 1) ? g4_grammar_compile_json_schema(src, n, &g) : g4_grammar_compile_gbnf_tokens(src, n, NULL, tk, &g);
    }
    if (st != G4_OK) {
        assert(g == NULL && g4_last_error()[0]);
        return 0;
    }
    static g4_vocab_index *v;
    if (!v) {
        size_t lens[NP + 1];
        const char *p[NP + 1];
        for (int i = 0; i < NP; i++) { p[i] = PIECES[i]; lens[i] = strlen(PIECES[i]); }
        p[NP] = NULL;
        lens[NP] = 0;
        int32_t end = NP;
        if (g4_vocab_index_from_pieces(p, lens, NP + 1, &end, 1, &v) != G4_OK) return 0;
    }
    g4_matcher *m = NULL;
    if (g4_grammar_matcher_new(g, v, &m) != G4_OK) { g4_grammar_free(g); return 0; }
    uint32_t mask[1];
    for (int stepi = 0; stepi < 6; stepi++) {
        int cnt = g4_matcher_mask(m, mask);
        if (cnt < 0) break;
        int first = -1;
        for (int t = 0; t < NP; t++) {
            int bit = (int)(mask[0] >> t & 1);
            int ref = g4_matcher_allows_bytes_ref(m, PIECES[t], strlen(PIECES[t]));
            if (ref < 0) break;
            assert(bit == ref);
            if (bit && first < 0) first = t;
        }
        assert((int)(mask[0] >> NP & 1) == g4_matcher_accepts_end(m));
        if (first < 0) break;
        /* follow the input's bytes to pick among the allowed tokens */
        int pick = first;
        for (int t = 0; t < NP; t++)
            if ((mask[0] >> t & 1) && (unsigned char)PIECES[t][0] == data[(size_t)stepi % size]) pick = t;
        assert(g4_matcher_accept(m, pick) == 1);
    }
    g4_matcher_free(m);
    g4_grammar_free(g);
    return 0;
}
