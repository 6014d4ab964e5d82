/* test_grammar.c — the grammar engine (src/grammar): GBNF compile errors, and masks over a small
 * byte vocabulary checked two ways: against a hand-written recognizer of the same language (every
 * short string: allowed iff some continuation is a sentence) and against the matcher's own direct
 * stack simulation, token by token, with the mask cache on and off; the end token only where the
 * grammar accepts. Gemma 4's tool-call grammar and GBNF's special-token references over the
 * fixture's vocabulary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4c.h"

static g4_grammar *gbnf(const char *src) {
    g4_grammar *g = NULL;
    g4_status st = g4_grammar_compile_gbnf(src, strlen(src), NULL, &g);
    if (st) fail_msg("%s", g4_last_error());
    return g;
}

static void expect_error(const char *src, const char *needle) {
    g4_grammar *g = NULL;
    assert_int_equal(g4_grammar_compile_gbnf(src, strlen(src), NULL, &g), G4_ERR_INPUT);
    assert_null(g);
    if (!strstr(g4_last_error(), needle)) fail_msg("error '%s' lacks '%s'", g4_last_error(), needle);
}

static void test_gbnf_errors(void **state) {
    (void)state;
    expect_error("root ::= a", "rule 'a' is used but never defined");
    expect_error("root ::= root \"x\" | \"y\"", "left-recursive");
    expect_error("root ::= a\na ::= b? a \"x\" | \"y\"\nb ::= \"b\"", "left-recursive");
    expect_error("root ::= \"x\" root", "can never finish");
    expect_error("root ::= \"x", "unterminated string literal");
    expect_error("root ::= [a-", "unterminated character class");
    expect_error("root ::= [z-a]", "out of order");
    expect_error("root ::= ( \"a\" ", "expected ')'");
    expect_error("root ::= \"a\"{3,2}", "n < m");
    expect_error("rot ::= \"a\"", "no rule named 'root'");
    expect_error("root ::= \"a\"\nroot ::= \"b\"", "defined twice");
    expect_error("root ::= [^\\x00-\\U0010FFFF]", "matches nothing");
    expect_error("root ::= * \"a\"", "quantifier without");
}

/* The vocabulary: every string of 1..3 bytes over ALPHA, plus a few longer ones and the end. */
static const char ALPHA[] = "abcdxqz";
#define MAXV 512
static char pieces[MAXV][8];
static int n_pieces;

static g4_vocab_index *small_vocab(int32_t *end) {
    static const char *longer[] = {"abbbx", "qqq", "qq", "bcdbcd", "aaaa"};
    n_pieces = 0;
    int na = (int)strlen(ALPHA);
    for (int i = 0; i < na; i++) { pieces[n_pieces][0] = ALPHA[i]; pieces[n_pieces++][1] = 0; }
    for (int i = 0; i < na; i++)
        for (int j = 0; j < na; j++) { pieces[n_pieces][0] = ALPHA[i]; pieces[n_pieces][1] = ALPHA[j]; pieces[n_pieces++][2] = 0; }
    for (int i = 0; i < na; i++)
        for (int j = 0; j < na; j++)
            for (int k = 0; k < na; k += 2) {
                pieces[n_pieces][0] = ALPHA[i]; pieces[n_pieces][1] = ALPHA[j]; pieces[n_pieces][2] = ALPHA[k];
                pieces[n_pieces++][3] = 0;
            }
    for (size_t i = 0; i < sizeof longer / sizeof longer[0]; i++) strcpy(pieces[n_pieces++], longer[i]);
    const char *p[MAXV + 2];
    size_t l[MAXV + 2];
    for (int i = 0; i < n_pieces; i++) { p[i] = pieces[i]; l[i] = strlen(pieces[i]); }
    p[n_pieces] = NULL;  /* a special token: never allowed */
    l[n_pieces] = 0;
    *end = n_pieces + 1;
    p[*end] = NULL;
    l[*end] = 0;
    g4_vocab_index *v = NULL;
    assert_int_equal(g4_vocab_index_from_pieces(p, l, n_pieces + 2, end, 1, &v), G4_OK);
    return v;
}

/* The language "a" [b-d]+ "x"? | "q"{2,3}, recognized by hand. */
static int sentence(const char *s, size_t n) {
    if (n >= 2 && n <= 3 && strspn(s, "q") >= n) return 1;
    if (n < 2 || s[0] != 'a') return 0;
    size_t i = 1;
    while (i < n && s[i] >= 'b' && s[i] <= 'd') i++;
    if (i == 1) return 0;
    return i == n || (i == n - 1 && s[i] == 'x');
}

/* Some continuation of s (of at most `more` bytes) is a sentence. */
static int viable(char *s, size_t n, int more) {
    if (sentence(s, n)) return 1;
    if (!more) return 0;
    for (const char *c = ALPHA; *c; c++) {
        s[n] = *c;
        if (viable(s, n + 1, more - 1)) return 1;
    }
    return 0;
}

static void check_step(g4_matcher *m, const g4_vocab_index *v, const char *prefix, int32_t end, int use_oracle) {
    int V = g4_vocab_index_size(v);
    uint32_t mask[(MAXV + 2 + 31) / 32 + 1];
    int cnt = g4_matcher_mask(m, mask), ones = 0;
    for (int t = 0; t < V; t++) {
        int bit = (int)(mask[t >> 5] >> (t & 31) & 1);
        ones += bit;
        size_t bl;
        const unsigned char *b = g4_vocab_index_token_bytes(v, t, &bl);
        int ref = t == end ? g4_matcher_accepts_end(m) : bl ? g4_matcher_allows_bytes_ref(m, b, bl) : 0;
        if (bit != ref) fail_msg("prefix '%s' token %d: mask %d, simulation %d", prefix, t, bit, ref);
        if (use_oracle && t < n_pieces) {
            char s[64];
            size_t pl = strlen(prefix);
            memcpy(s, prefix, pl);
            memcpy(s + pl, b, bl);
            int want = viable(s, pl + bl, 3);
            if (bit != want) fail_msg("prefix '%s' token '%.*s': mask %d, language %d", prefix, (int)bl, b, bit, want);
        }
        if (use_oracle && t == end) {
            int want = sentence(prefix, strlen(prefix));
            if (bit != want) fail_msg("prefix '%s': end allowed %d, sentence %d", prefix, bit, want);
        }
    }
    assert_int_equal(cnt, ones);
}

static void test_small_vocab_exact(void **state) {
    (void)state;
    int32_t end;
    g4_vocab_index *v = small_vocab(&end);
    g4_grammar *g = gbnf("root ::= \"a\" [b-d]+ \"x\"? | \"q\"{2,3}\n");
    /* every viable prefix of up to 4 bytes, each walked byte by byte from a fresh matcher */
    const char *prefixes[] = {"", "a", "ab", "abc", "abcd", "abx", "q", "qq", "qqq", "adbx"};
    for (int cache = 0; cache < 2; cache++)
        for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
            g4_matcher *m = NULL;
            assert_int_equal(g4_grammar_matcher_new(g, v, &m), G4_OK);
            g4_matcher_set_cache(m, cache);
            for (int rep = 0; rep < 2; rep++) {  /* the second time from the cache */
                g4_matcher_free(m);
                assert_int_equal(g4_grammar_matcher_new(g, v, &m), G4_OK);
                g4_matcher_set_cache(m, cache);
                assert_int_equal(g4_matcher_accept_bytes(m, prefixes[i], strlen(prefixes[i])), 1);
                check_step(m, v, prefixes[i], end, 1);
            }
            g4_matcher_free(m);
        }
    /* a rejected token leaves the state as it was; the end token only where the grammar accepts */
    g4_matcher *m = NULL;
    assert_int_equal(g4_grammar_matcher_new(g, v, &m), G4_OK);
    assert_int_equal(g4_matcher_accept(m, end), 0);
    assert_int_equal(g4_matcher_accept(m, 2), 0);            /* "c" */
    assert_int_equal(g4_matcher_accept(m, 0), 1);            /* "a" */
    assert_int_equal(g4_matcher_accepts_end(m), 0);
    assert_int_equal(g4_matcher_accept(m, n_pieces), 0);     /* the special token */
    assert_int_equal(g4_matcher_accept(m, 1), 1);            /* "b" */
    assert_int_equal(g4_matcher_accepts_end(m), 1);
    assert_int_equal(g4_matcher_accept(m, end), 1);
    uint32_t mask[(MAXV + 2 + 31) / 32 + 1];
    assert_int_equal(g4_matcher_mask(m, mask), 0);           /* nothing after the end */
    g4_matcher_free(m);
    g4_grammar_free(g);
    g4_vocab_index_free(v);
}

/* A recursive grammar over the same vocabulary: masks against the direct simulation along a walk. */
static void test_recursive_vs_simulation(void **state) {
    (void)state;
    int32_t end;
    g4_vocab_index *v = small_vocab(&end);
    g4_grammar *g = gbnf("root ::= item ( \"x\" item )*\nitem ::= \"a\" item \"b\" | \"q\" | [c-d]{1,2} \"z\"?\n");
    const char *walk = "aaqbbxcdzxaqbxd";
    g4_matcher *m = NULL;
    assert_int_equal(g4_grammar_matcher_new(g, v, &m), G4_OK);
    char pre[64] = "";
    for (size_t i = 0; i <= strlen(walk); i++) {
        check_step(m, v, pre, end, 0);
        if (i == strlen(walk)) break;
        assert_int_equal(g4_matcher_accept_bytes(m, walk + i, 1), 1);
        pre[i] = walk[i];
        pre[i + 1] = 0;
    }
    assert_int_equal(g4_matcher_accepts_end(m), 1);
    g4_matcher_free(m);
    g4_grammar_free(g);
    g4_vocab_index_free(v);
}

/* Code-point classes become UTF-8 byte sequences: a multi-byte character is allowed a byte at a
 * time, an invalid or excluded one never. */
static void test_utf8_classes(void **state) {
    (void)state;
    const char *p[] = {"\xC3", "\xA9", "\xC3\xA9", "\xE2\x82\xAC", "e", "\xFF", "\xED\xA0\x80"};
    size_t l[] = {1, 1, 2, 3, 1, 1, 3};
    g4_vocab_index *v = NULL;
    assert_int_equal(g4_vocab_index_from_pieces(p, l, 7, NULL, 0, &v), G4_OK);
    g4_grammar *g = gbnf("root ::= [^e\\u20AC]+\n");
    g4_matcher *m = NULL;
    assert_int_equal(g4_grammar_matcher_new(g, v, &m), G4_OK);
    uint32_t mask[1];
    g4_matcher_mask(m, mask);
    assert_int_equal(mask[0], (1u << 0) | (1u << 2));  /* a lead byte, and the whole "é" */
    assert_int_equal(g4_matcher_accept(m, 0), 1);
    g4_matcher_mask(m, mask);
    assert_int_equal(mask[0], 1u << 1);                  /* only its continuation byte */
    g4_matcher_free(m);
    g4_grammar_free(g);
    g4_vocab_index_free(v);
}

static void test_json_schema_errors(void **state) {
    (void)state;
    static const struct { const char *schema, *needle; } cases[] = {
        {"{\"type\": \"string\", \"contentEncoding\": \"base64\"}", "unsupported keyword 'contentEncoding'"},
        {"{\"oneOf\": [{\"type\": \"string\"}, {\"type\": [\"null\", \"string\"]}]}", "#/oneOf: branches 0 and 1 may both match"},
        {"{\"type\": \"object\", \"properties\": {\"a\": {\"allOf\": []}}}", "#/properties/a/allOf must be a non-empty array"},
        {"{\"type\": \"string\", \"pattern\": \"\\\\udc00\"}", "#/pattern: \\uDC00 is a lone surrogate"},
        {"{\"type\": \"number\", \"minimum\": 1.25}", "a fractional bound on type number is not supported"},
        {"{\"type\": \"string\", \"enum\": [1, null]}", "language is empty"},
        {"{\"type\": \"string\", \"format\": \"hostname\"}", "unsupported format 'hostname'"},
        {"{\"$ref\": \"#/$defs/nope\"}", "names nothing"},
        {"{\"type\": \"object\", \"properties\": {\"a\": {}}, \"required\": [\"b\"]}", "'b' is not among the properties"},
        {"{\"type\": \"wat\"}", "unknown type 'wat'"},
        {"{\"type\": \"string\", \"pattern\": \"(?=a)\"}", "lookaround"},
        {"{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 1}", "no integer lies between"},
        {"not json", "not JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        g4_grammar *g = NULL;
        assert_int_equal(g4_grammar_compile_json_schema(cases[i].schema, strlen(cases[i].schema), &g), G4_ERR_INPUT);
        if (!strstr(g4_last_error(), cases[i].needle)) fail_msg("'%s': error '%s' lacks '%s'", cases[i].schema, g4_last_error(), cases[i].needle);
    }
}

/* Schema instances fed as bytes: accepted whole, or rejected before the end. */
static void test_json_schema_bytes(void **state) {
    (void)state;
    const char *p[] = {"x"};
    size_t l[] = {1};
    g4_vocab_index *v = NULL;
    assert_int_equal(g4_vocab_index_from_pieces(p, l, 1, NULL, 0, &v), G4_OK);
    static const struct { const char *schema, *doc; int ok; } cases[] = {
        {"{\"type\": \"integer\", \"minimum\": -15, \"maximum\": 230}", "-15", 1},
        {"{\"type\": \"integer\", \"minimum\": -15, \"maximum\": 230}", "-16", 0},
        {"{\"type\": \"integer\", \"minimum\": -15, \"maximum\": 230}", "230", 1},
        {"{\"type\": \"integer\", \"minimum\": -15, \"maximum\": 230}", "231", 0},
        {"{\"type\": \"integer\", \"minimum\": -15, \"maximum\": 230}", "07", 0},
        {"{\"type\": \"number\", \"exclusiveMinimum\": -2, \"maximum\": 3}", "-1.999", 1},
        {"{\"type\": \"number\", \"exclusiveMinimum\": -2, \"maximum\": 3}", "-2.0", 0},
        {"{\"type\": \"number\", \"exclusiveMinimum\": -2, \"maximum\": 3}", "3.00", 1},
        {"{\"type\": \"number\", \"exclusiveMinimum\": -2, \"maximum\": 3}", "3.01", 0},
        {"{\"type\": \"integer\", \"exclusiveMinimum\": 99}", "100", 1},
        {"{\"type\": \"integer\", \"exclusiveMinimum\": 99}", "99", 0},
        {"{\"type\": \"integer\", \"exclusiveMinimum\": 99}", "123456", 1},
        {"{\"type\": \"string\", \"pattern\": \"^[a-c]{2}\\\\d+$\"}", "\"ab12\"", 1},
        {"{\"type\": \"string\", \"pattern\": \"^[a-c]{2}\\\\d+$\"}", "\"ad12\"", 0},
        {"{\"type\": \"string\", \"pattern\": \"x\\\"y\"}", "\"zzx\\\"yzz\"", 1},
        {"{\"type\": \"string\", \"format\": \"date\"}", "\"2024-02-29\"", 1},
        {"{\"type\": \"string\", \"format\": \"date\"}", "\"2024-13-01\"", 0},
        {"{\"type\": \"string\", \"format\": \"uuid\"}", "\"123e4567-e89b-12d3-a456-426614174000\"", 1},
        /* a surrogate pair in a pattern is one code point (U+1F600, four UTF-8 bytes) */
        {"{\"type\": \"string\", \"pattern\": \"^\\\\ud83d\\\\ude00$\"}", "\"\xF0\x9F\x98\x80\"", 1},
        {"{\"type\": \"string\", \"pattern\": \"^\\\\ud83d\\\\ude00$\"}", "\"\xF0\x9F\x98\x81\"", 0},
        {"{\"prefixItems\": [{\"type\": \"integer\"}, {\"type\": \"null\"}], \"items\": false}", "[1,null]", 1},
        {"{\"prefixItems\": [{\"type\": \"integer\"}, {\"type\": \"null\"}], \"items\": false}", "[1,null,2]", 0},
        {"{\"oneOf\": [{\"const\": 1}, {\"const\": 2}]}", "2", 1},
        {"{\"oneOf\": [{\"const\": 1}, {\"const\": 2}]}", "3", 0},
        {"{\"allOf\": [{\"properties\": {\"a\": {\"type\": \"null\"}}, \"required\": [\"a\"]}, {\"properties\": {\"b\": {\"type\": \"null\"}}}]}", "{\"a\":null,\"b\":null}", 1},
        {"{\"allOf\": [{\"properties\": {\"a\": {\"type\": \"null\"}}, \"required\": [\"a\"]}, {\"properties\": {\"b\": {\"type\": \"null\"}}}]}", "{\"b\":null}", 0},
        {"{\"$defs\": {\"n\": {\"type\": \"object\", \"properties\": {\"k\": {\"anyOf\": [{\"$ref\": \"#/$defs/n\"}, {\"type\": \"null\"}]}}, \"required\": [\"k\"], \"additionalProperties\": false}}, \"$ref\": \"#/$defs/n\"}",
         "{\"k\": {\"k\": {\"k\": null}}}", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        g4_grammar *g = NULL;
        if (g4_grammar_compile_json_schema(cases[i].schema, strlen(cases[i].schema), &g)) fail_msg("%s", g4_last_error());
        g4_matcher *m = NULL;
        assert_int_equal(g4_grammar_matcher_new(g, v, &m), G4_OK);
        int ok = g4_matcher_accept_bytes(m, cases[i].doc, strlen(cases[i].doc)) == 1 && g4_matcher_accepts_end(m);
        if (ok != cases[i].ok) fail_msg("schema %s doc %s: accepted %d", cases[i].schema, cases[i].doc, ok);
        g4_matcher_free(m);
        g4_grammar_free(g);
    }
    g4_vocab_index_free(v);
}

/* Gemma 4's tool-call grammar over the fixture's real vocabulary: calls written as the model
 * would (special tokens as tokens) accepted or refused by the tool's parameter schema; the
 * special tokens' text spelled in ordinary characters refused. */
static const char TOOLS[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 20}, \"days\": {\"type\": \"integer\","
    " \"minimum\": 1, \"maximum\": 7}, \"unit\": {\"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\", \"days\"],"
    " \"additionalProperties\": false}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"now\"}}]";

static int tool_doc_ok(const g4_tokenizer *tk, const g4_vocab_index *v, const char *only, int max_calls, const char *doc) {
    char *src = NULL;
    if (g4_tool_calls_to_gbnf(TOOLS, strlen(TOOLS), only, max_calls, &src)) fail_msg("%s", g4_last_error());
    g4_grammar *g = NULL;
    if (g4_grammar_compile_gbnf_tokens(src, strlen(src), NULL, tk, &g)) fail_msg("%s\n%s", g4_last_error(), src);
    free(src);
    g4_matcher *m = NULL;
    assert_int_equal(g4_grammar_matcher_new(g, v, &m), G4_OK);
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(g4_tokenize(tk, doc, strlen(doc), 0, &ids, &n), G4_OK);
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) ok = g4_matcher_accept(m, ids[i]) == 1;
    ok = ok && g4_matcher_accepts_end(m);
    free(ids);
    g4_matcher_free(m);
    g4_grammar_free(g);
    return ok;
}

static void test_tool_call_grammar(void **state) {
    (void)state;
    g4_tokenizer *tk = NULL;
    if (g4_tokenizer_load("tests/fixtures/g4-cond-tiny", &tk)) fail_msg("%s", g4_last_error());
    g4_vocab_index *v = NULL;
    assert_int_equal(g4_vocab_index_new(tk, NULL, 0, &v), G4_OK);
    static const struct { const char *only; int max_calls; const char *doc; int ok; } cases[] = {
        {NULL, 0, "<|tool_call>call:get_weather{city:<|\"|>Paris, {x}: \"y\"<|\"|>,days:3}<tool_call|><|tool_response>", 1},
        {NULL, 0, "<|tool_call>call:get_weather{city:<|\"|><|\"|>,days:7,unit:<|\"|>f<|\"|>}<tool_call|><|tool_response>", 1},
        {NULL, 0, "<|tool_call>call:now{}<tool_call|><|tool_call>call:now{}<tool_call|><|tool_response>", 1},
        {NULL, 1, "<|tool_call>call:now{}<tool_call|><|tool_call>call:now{}<tool_call|><|tool_response>", 0},
        {"now", 0, "<|tool_call>call:get_weather{city:<|\"|>P<|\"|>,days:3}<tool_call|><|tool_response>", 0},
        {"now", 0, "<|tool_call>call:now{}<tool_call|><|tool_response>", 1},
        {NULL, 0, "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:8}<tool_call|><|tool_response>", 0},
        {NULL, 0, "<|tool_call>call:get_weather{days:3}<tool_call|><|tool_response>", 0},
        {NULL, 0, "<|tool_call>call:get_weather{city:\"Paris\",days:3}<tool_call|><|tool_response>", 0},
        {NULL, 0, "<|tool_call>call:get_weather{city:<|\"|>P<|\"|>,days:3,unit:<|\"|>k<|\"|>}<tool_call|><|tool_response>", 0},
        {NULL, 0, "<|tool_call>call:get_weather{city:<|\"|>P<|\"|>,days:3,x:1}<tool_call|><|tool_response>", 0},
        {NULL, 0, "<|tool_call>call:now{}<tool_call|>", 0},
        {NULL, 0, "call:now{}", 0},
        {NULL, 0, "", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int ok = tool_doc_ok(tk, v, cases[i].only, cases[i].max_calls, cases[i].doc);
        if (ok != cases[i].ok) fail_msg("case %zu (%s): accepted %d", i, cases[i].doc, ok);
    }
    /* the tokens' text in ordinary characters is not the tokens */
    char *src = NULL;
    assert_int_equal(g4_tool_calls_to_gbnf(TOOLS, strlen(TOOLS), "now", 0, &src), G4_OK);
    g4_grammar *g = NULL;
    assert_int_equal(g4_grammar_compile_gbnf_tokens(src, strlen(src), NULL, tk, &g), G4_OK);
    free(src);
    g4_matcher *m = NULL;
    assert_int_equal(g4_grammar_matcher_new(g, v, &m), G4_OK);
    assert_int_equal(g4_matcher_accept_bytes(m, "<|tool_call>", 12), 0);
    assert_int_equal(g4_matcher_accept_bytes(m, "<", 1), 0);
    /* the mask at the start allows exactly one token: <|tool_call> */
    int V = g4_vocab_index_size(v);
    uint32_t *mask = calloc(((size_t)V + 31) / 32, 4);
    assert_int_equal(g4_matcher_mask(m, mask), 1);
    int32_t call = g4_token_to_id(tk, "<|tool_call>");
    assert_true(mask[call >> 5] >> (call & 31) & 1);
    free(mask);
    g4_matcher_free(m);
    g4_grammar_free(g);
    /* refusals name the problem */
    static const struct { const char *src, *needle; } bad[] = {
        {"root ::= <|nope|>", "names no token"},
        {"root ::= <[99999]>", "outside the vocabulary"},
        {"root ::= <[x]>", "decimal id"},
        {"root ::= <call", "unterminated token reference"},
        {"root ::= !<|tool_call>", "negated"},
        {"root ::= <[100]>", "ordinary token"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        g = NULL;
        assert_int_equal(g4_grammar_compile_gbnf_tokens(bad[i].src, strlen(bad[i].src), NULL, tk, &g), G4_ERR_INPUT);
        if (!strstr(g4_last_error(), bad[i].needle)) fail_msg("'%s': '%s' lacks '%s'", bad[i].src, g4_last_error(), bad[i].needle);
    }
    assert_int_equal(g4_grammar_compile_gbnf("root ::= <[1]>", 14, NULL, &g), G4_ERR_INPUT);   /* no vocabulary */
    static const struct { const char *tools, *only, *needle; } badt[] = {
        {"[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"string\"}}}]", NULL, "object schema"},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\", \"propertyNames\": {}}}}]", NULL, "propertyNames"},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"f g\"}}]", NULL, "cannot be written"},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]", "g", "no function named 'g'"},
        {"{}", NULL, "not a JSON array"},
    };
    for (size_t i = 0; i < sizeof badt / sizeof badt[0]; i++) {
        src = NULL;
        assert_int_equal(g4_tool_calls_to_gbnf(badt[i].tools, strlen(badt[i].tools), badt[i].only, 0, &src), G4_ERR_INPUT);
        assert_null(src);
        if (!strstr(g4_last_error(), badt[i].needle)) fail_msg("'%s' lacks '%s'", g4_last_error(), badt[i].needle);
    }
    g4_vocab_index_free(v);
    g4_tokenizer_free(tk);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gbnf_errors),
        cmocka_unit_test(test_small_vocab_exact),
        cmocka_unit_test(test_recursive_vs_simulation),
        cmocka_unit_test(test_utf8_classes),
        cmocka_unit_test(test_json_schema_errors),
        cmocka_unit_test(test_json_schema_bytes),
        cmocka_unit_test(test_tool_call_grammar),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
