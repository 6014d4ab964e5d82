/* fuzz_tokenizer_json.c — libFuzzer target for the tokenizer.json scanner and loader: any byte
 * string is loaded as a tokenizer.json; it must be refused cleanly or give a tokenizer that encodes
 * a few texts (and the input itself when it is UTF-8), decodes the ids, and whose streaming
 * detokenizer reproduces the decode exactly (abort otherwise). Also checks that the two-thread
 * parse of pair arrays agrees with the one-thread parse on every input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4c.h"
#include "tokenizer/tok_json.h"
#include "tokenizer/tokenizer_internal.h"

static void check_roundtrip(const g4_tokenizer *t, const char *text, size_t len) {
    for (int sp = 0; sp < 2; sp++) {
        int32_t *ids;
        size_t n;
        if (g4_tokenize(t, text, len, sp, &ids, &n) != G4_OK) continue;
        char *full;
        size_t fl;
        if (g4_detokenize(t, ids, n, sp, &full, &fl) == G4_OK) {
            g4_detok_stream *s = g4_detok_stream_new(t, sp);
            char *buf = NULL;
            size_t bl = 0;
            int ok = 1;
            for (size_t i = 0; i < n && ok; i++) ok = g4_detok_stream_push(s, ids[i], &buf, &bl) == G4_OK;
            if (ok) ok = g4_detok_stream_finish(s, &buf, &bl) == G4_OK;
            if (!ok || bl != fl || (fl && memcmp(buf, full, fl))) abort(); /* stream != decode */
            if (tk_utf8_check(full, fl) != fl) abort();                     /* decode is UTF-8 */
            free(buf);
            g4_detok_stream_free(s);
            free(full);
        }
        free(ids);
    }
}

/* The two-thread parse of long pair arrays must give exactly the one-thread result. */
static void check_split(const char *data, size_t size) {
    tj_doc a, b;
    int ra = tj_parse_split(&a, data, size, (size_t)1 << 40), rb = tj_parse_split(&b, data, size, 16);
    if (ra != rb) abort();
    if (ra == 0) {
        if (a.n_nodes != b.n_nodes || a.n_pairs != b.n_pairs) abort();
        for (size_t i = 0; i < a.n_nodes; i++)
            if (a.nodes[i].type != b.nodes[i].type || a.nodes[i].n != b.nodes[i].n || a.nodes[i].size != b.nodes[i].size) abort();
        for (size_t i = 0; i < a.n_pairs; i++) {
            const tj_pair *x = &a.pairs[i], *y = &b.pairs[i];
            if (x->a_len != y->a_len || x->b_len != y->b_len || x->open != y->open ||
                memcmp(tj_at_off(&a, x->a_off), tj_at_off(&b, y->a_off), x->a_len) ||
                memcmp(tj_at_off(&a, x->b_off), tj_at_off(&b, y->b_off), x->b_len))
                abort();
        }
    } else if (strcmp(a.err, b.err)) {
        abort();
    }
    tj_free(&a);
    tj_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_split((const char *)data, size);
    g4_tokenizer *t = NULL;
    if (tk_load_json((const char *)data, size, "fuzz/tokenizer.json", &t) != G4_OK) {
        if (t) abort(); /* a refusal leaves nothing behind */
        return 0;
    }
    static const char *texts[] = {"", " ", "hello world", "ab ab<bos>a  b", "\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80 x",
                                  "\x00\x01\t\n", "<sep> [tag] <cls>", "\xE2\x96\x81\xE2\x96\x81"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) check_roundtrip(t, texts[i], strlen(texts[i]));
    size_t m = size < 2048 ? size : 2048;
    if (tk_utf8_check((const char *)data, m) == m) check_roundtrip(t, (const char *)data, m);
    /* every id decodes (up to a bound) */
    int32_t n = g4_tokenizer_vocab_size(t);
    for (int32_t id = 0; id < n && id < 512; id++) {
        char *s;
        size_t l;
        if (g4_detokenize(t, &id, 1, 0, &s, &l) == G4_OK) free(s);
    }
    g4_tokenizer_free(t);
    return 0;
}
