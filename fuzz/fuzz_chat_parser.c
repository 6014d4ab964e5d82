/* fuzz_chat_parser.c — libFuzzer target for the chat output parser (src/chat) over the tiny
 * fixture's Gemma 4 tokenizer: the input is a token sequence (two bytes per id; a set high bit
 * picks one of the special ids, so delimiters are frequent) fed one id at a time. Aborts when the
 * message is not valid JSON, a tool call's arguments are not a JSON object, or the deltas of the
 * whole range do not give the message's text back. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4c.h"

static g4_tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    if (g4_tokenizer_load("tests/fixtures/g4-cond-tiny", &tok)) abort();
    return 0;
}

static const char *str(json_t *o, const char *k) {
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!size) return 0;
    const int V = g4_tokenizer_vocab_size(tok);
    const char *stop = "ab";
    g4_chat_parser *p;
    if (g4_chat_parser_new(tok, &stop, data[0] & 1, &p)) abort();
    int ended = 0;
    for (size_t i = 1; i + 1 < size && !ended; i += 2) {
        int32_t id = data[i] & 0x80 ? 5 + data[i + 1] % 19 : (int32_t)(((data[i] << 8) | data[i + 1]) % V);
        if (g4_chat_parser_push(p, id, &ended)) abort();
    }
    if (g4_chat_parser_finish(p)) abort();
    char *mj = g4_chat_message_json(p, "c"), *dj = g4_chat_delta_json(p, 0, g4_chat_parser_n_deltas(p), "c");
    json_t *m = mj ? json_loads(mj, JSON_ALLOW_NUL, NULL) : NULL, *d = dj ? json_loads(dj, JSON_ALLOW_NUL, NULL) : NULL;
    if (!m || !d) abort();
    if (strcmp(str(m, "content"), str(d, "content")) || strcmp(str(m, "reasoning_content"), str(d, "reasoning_content")))
        abort();
    size_t k;
    json_t *c;
    json_array_foreach(json_object_get(m, "tool_calls"), k, c) {
        json_t *a = json_loads(str(json_object_get(c, "function"), "arguments"), 0, NULL);
        if (!json_is_object(a)) abort();
        json_decref(a);
    }
    if (json_array_size(json_object_get(m, "tool_calls")) != (size_t)g4_chat_parser_n_calls(p)) abort();
    json_decref(m);
    json_decref(d);
    free(mj);
    free(dj);
    g4_chat_parser_free(p);
    return 0;
}
