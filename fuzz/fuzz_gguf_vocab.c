/* fuzz_gguf_vocab.c — libFuzzer target for the tokenizer and chat template a GGUF carries as
 * metadata (src/tokenizer/tokenizer_gguf.c): any byte string is parsed as a GGUF; a vocabulary that
 * loads must encode a few texts, decode them, and stream-decode to the same text (abort
 * otherwise); a template that loads must render a short conversation or refuse it cleanly. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4c.h"
#include "io/gguf.h"
#include "tokenizer/tokenizer_gguf.h"

static void roundtrip(const g4_tokenizer *t, const char *text) {
    int32_t *ids;
    size_t n;
    if (g4_tokenize(t, text, strlen(text), 1, &ids, &n) != G4_OK) return;
    char *full;
    size_t fl;
    if (g4_detokenize(t, ids, n, 0, &full, &fl) == G4_OK) {
        g4_detok_stream *s = g4_detok_stream_new(t, 0);
        char *buf = NULL;
        size_t bl = 0;
        int ok = s != NULL;
        for (size_t i = 0; i < n && ok; i++) ok = g4_detok_stream_push(s, ids[i], &buf, &bl) == G4_OK;
        if (ok) ok = g4_detok_stream_finish(s, &buf, &bl) == G4_OK;
        if (!ok || bl != fl || (fl && memcmp(buf, full, fl))) abort();   /* stream != decode */
        free(buf);
        g4_detok_stream_free(s);
        free(full);
    }
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    g4_gguf *g = NULL;
    if (g4_gguf_parse(data, size, "fuzz.gguf", &g) != G4_OK) return 0;
    g4_tokenizer *t = NULL;
    if (tk_load_gguf(g, "fuzz.gguf", &t) == G4_OK) {
        roundtrip(t, "Hello world, hello gemma");
        roundtrip(t, "  two  spaces\n\tand a tab, <bos> é ü 日本");
        g4_tokenizer_free(t);
    }
    g4_template *tpl = NULL;
    if (tk_template_load_gguf(g, "fuzz.gguf", &tpl) == G4_OK) {
        static const char conv[] = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"add_generation_prompt\": true}";
        char *out = NULL;
        size_t len;
        if (g4_template_render(tpl, conv, sizeof conv - 1, &out, &len) == G4_OK) free(out);
        g4_template_free(tpl);
    }
    g4_gguf_free(g);
    return 0;
}
