/* test_chat_parser.c — the chat output parser (src/chat) over the tiny fixture's Gemma 4
 * tokenizer: the message a few protocol texts give, held-back content under stop strings, the
 * Gemma 3 pass-through (skipped without ../shared/data/gemma3-tokenizer), and a fuzz over random ids (every special included): no crash, every
 * tool call's arguments a JSON object, the deltas of each kind concatenating to the message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4c.h"

#define FIXTURE "tests/fixtures/g4-cond-tiny"

static g4_tokenizer *tok;

static int setup(void **state) {
    (void)state;
    if (g4_tokenizer_load(FIXTURE, &tok)) {
        print_error("%s: %s\n", FIXTURE, g4_last_error());
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    g4_tokenizer_free(tok);
    return 0;
}

/* Parses the ids of `raw` token by token and returns the message as a jansson object. */
static json_t *parse(const char *raw, const char *stop, int *ended_at, int *n_calls) {
    int32_t *ids;
    size_t n;
    assert_int_equal(g4_tokenize(tok, raw, strlen(raw), 0, &ids, &n), G4_OK);
    g4_chat_parser *p;
    assert_int_equal(g4_chat_parser_new(tok, &stop, stop ? 1 : 0, &p), G4_OK);
    int ended = 0;
    size_t i = 0;
    for (; i < n && !ended; i++) assert_int_equal(g4_chat_parser_push(p, ids[i], &ended), G4_OK);
    if (ended_at) *ended_at = ended ? (int)i : -1;
    assert_int_equal(g4_chat_parser_finish(p), G4_OK);
    assert_int_equal(g4_chat_parser_finish(p), G4_OK);   /* idempotent */
    if (n_calls) *n_calls = g4_chat_parser_n_calls(p);
    char *js = g4_chat_message_json(p, "call_");
    json_t *m = json_loads(js, JSON_ALLOW_NUL, NULL);
    assert_non_null(m);
    free(js);
    g4_chat_parser_free(p);
    free(ids);
    return m;
}

static const char *str(json_t *m, const char *k) { return json_string_value(json_object_get(m, k)); }

static void test_reasoning_and_call(void **state) {
    (void)state;
    int calls;
    json_t *m = parse("<|channel>thought\nLet me look.\n<channel|>Sure.<|tool_call>call:get_weather{city:<|\"|>Paris, {FR}<|\"|>,"
                      "days:-2.5e1,opts:{metric:true,tags:[<|\"|>a<|\"|>,null]}}<tool_call|><|tool_response>",
                      NULL, NULL, &calls);
    assert_int_equal(calls, 1);
    assert_string_equal(str(m, "reasoning_content"), "Let me look.");
    assert_string_equal(str(m, "content"), "Sure.");
    json_t *c = json_array_get(json_object_get(m, "tool_calls"), 0);
    assert_string_equal(str(c, "id"), "call_0");
    json_t *f = json_object_get(c, "function");
    assert_string_equal(str(f, "name"), "get_weather");
    json_t *args = json_loads(str(f, "arguments"), 0, NULL);
    json_t *want = json_loads("{\"city\":\"Paris, {FR}\",\"days\":-25.0,\"opts\":{\"metric\":true,\"tags\":[\"a\",null]}}", 0, NULL);
    assert_true(json_equal(args, want));
    json_decref(args);
    json_decref(want);
    json_decref(m);
}

static void test_truncated_and_malformed_calls_are_content(void **state) {
    (void)state;
    int calls;
    json_t *m = parse("a<|tool_call>call:f{x:<|\"|>open", NULL, NULL, &calls);
    assert_int_equal(calls, 0);
    assert_string_equal(str(m, "content"), "a<|tool_call>call:f{x:<|\"|>open");
    json_decref(m);
    m = parse("<|tool_call>call:f{x 1}<tool_call|><|tool_call>call:g{}<tool_call|>", NULL, NULL, &calls);
    assert_int_equal(calls, 1);
    assert_string_equal(str(m, "content"), "<|tool_call>call:f{x 1}<tool_call|>");
    json_decref(m);
}

static void test_unterminated_thought_and_ending(void **state) {
    (void)state;
    int ended_at;
    json_t *m = parse("<|channel>thought\nstill thinking", NULL, &ended_at, NULL);
    assert_int_equal(ended_at, -1);
    assert_string_equal(str(m, "reasoning_content"), "still thinking");
    assert_string_equal(str(m, "content"), "");
    json_decref(m);
    m = parse("done<|tool_response>never", NULL, &ended_at, NULL);
    assert_true(ended_at > 0);
    assert_string_equal(str(m, "content"), "done");
    json_decref(m);
}

static void test_stop_string_in_content_only(void **state) {
    (void)state;
    int ended_at;
    json_t *m = parse("<|channel>thought\nEND<channel|>abEND cd", "END", &ended_at, NULL);
    assert_true(ended_at > 0);
    assert_string_equal(str(m, "reasoning_content"), "END");
    assert_string_equal(str(m, "content"), "ab");
    json_decref(m);
}

static void test_held_back_content_is_released(void **state) {
    (void)state;
    int32_t *ids;
    size_t n;
    const char *stop = "xyz";
    assert_int_equal(g4_tokenize(tok, "abx", 3, 0, &ids, &n), G4_OK);
    g4_chat_parser *p;
    assert_int_equal(g4_chat_parser_new(tok, &stop, 1, &p), G4_OK);
    for (size_t i = 0; i < n; i++) assert_int_equal(g4_chat_parser_push(p, ids[i], NULL), G4_OK);
    size_t got = 0;
    for (int i = 0; i < g4_chat_parser_n_deltas(p); i++) got += g4_chat_parser_delta(p, i)->len;
    assert_int_equal(got, 2);   /* "x" may begin "xyz": held */
    assert_int_equal(g4_chat_parser_finish(p), G4_OK);
    got = 0;
    for (int i = 0; i < g4_chat_parser_n_deltas(p); i++) got += g4_chat_parser_delta(p, i)->len;
    assert_int_equal(got, 3);
    assert_int_equal(g4_chat_parser_push(p, 1 << 30, NULL), G4_ERR_INPUT);
    g4_chat_parser_free(p);
    free(ids);
}

/* Random ids, a third of them protocol specials: no crash, valid JSON everywhere, deltas of each
 * kind concatenating to the message's text. */
static void test_fuzz(void **state) {
    (void)state;
    const int V = g4_tokenizer_vocab_size(tok);
    const char *stop = "ab";
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int iter = 0; iter < 3000; iter++) {
        g4_chat_parser *p;
        assert_int_equal(g4_chat_parser_new(tok, &stop, iter % 3 == 0, &p), G4_OK);
        const int n = (int)(x % 60);
        int ended = 0;
        for (int i = 0; i < n && !ended; i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            int32_t id = x % 3 == 0 ? (int32_t)(5 + (x >> 8) % 19) : (int32_t)((x >> 8) % (uint64_t)V);
            assert_int_equal(g4_chat_parser_push(p, id, &ended), G4_OK);
        }
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        assert_int_equal(g4_chat_parser_finish(p), G4_OK);
        char *js = g4_chat_message_json(p, "c");
        json_t *m = json_loads(js, JSON_ALLOW_NUL, NULL);
        assert_non_null(m);
        char *dj = g4_chat_delta_json(p, 0, g4_chat_parser_n_deltas(p), "c");
        json_t *d = json_loads(dj, JSON_ALLOW_NUL, NULL);
        assert_non_null(d);
        const char *mc = str(m, "content");
        assert_string_equal(mc ? mc : "", str(d, "content") ? str(d, "content") : "");
        assert_true(json_equal(json_object_get(m, "reasoning_content"), json_object_get(d, "reasoning_content")) ||
                    (!json_object_get(m, "reasoning_content") && !json_object_get(d, "reasoning_content")));
        size_t k;
        json_t *c;
        json_array_foreach(json_object_get(m, "tool_calls"), k, c) {
            json_t *a = json_loads(str(json_object_get(c, "function"), "arguments"), 0, NULL);
            assert_true(json_is_object(a));
            json_decref(a);
        }
        json_decref(m);
        json_decref(d);
        free(js);
        free(dj);
        g4_chat_parser_free(p);
    }
}

static void test_gemma3_passes_through(void **state) {
    (void)state;
    g4_tokenizer *t3;
    const char *dir = getenv("G4_TOKENIZER_DIR");   /* as test_tokenizer.c: the shared Gemma 3 one */
    if (g4_tokenizer_load(dir ? dir : "../shared/data/gemma3-tokenizer", &t3)) skip();
    const char *raw = "x <|tool_call>call:f{a:1}<tool_call|> {b:2}";
    int32_t *ids;
    size_t n;
    assert_int_equal(g4_tokenize(t3, raw, strlen(raw), 0, &ids, &n), G4_OK);
    g4_chat_parser *p;
    assert_int_equal(g4_chat_parser_new(t3, NULL, 0, &p), G4_OK);
    assert_false(g4_chat_parser_has_tools(p));
    for (size_t i = 0; i < n; i++) assert_int_equal(g4_chat_parser_push(p, ids[i], NULL), G4_OK);
    assert_int_equal(g4_chat_parser_finish(p), G4_OK);
    char *text;
    size_t len;
    assert_int_equal(g4_detokenize(t3, ids, n, 1, &text, &len), G4_OK);
    char *js = g4_chat_message_json(p, "c");
    json_t *m = json_loads(js, 0, NULL);
    assert_string_equal(str(m, "content"), text);
    json_decref(m);
    free(js);
    free(text);
    free(ids);
    g4_chat_parser_free(p);
    g4_tokenizer_free(t3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reasoning_and_call),
        cmocka_unit_test(test_truncated_and_malformed_calls_are_content),
        cmocka_unit_test(test_unterminated_thought_and_ending),
        cmocka_unit_test(test_stop_string_in_content_only),
        cmocka_unit_test(test_held_back_content_is_released),
        cmocka_unit_test(test_fuzz),
        cmocka_unit_test(test_gemma3_passes_through),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
