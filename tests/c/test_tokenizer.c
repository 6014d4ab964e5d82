/* test_tokenizer.c — the tokenizer against HuggingFace `tokenizers`: the JSON scanner and UTF-8
 * rules, small tokenizers exercising each component (expected values recorded from HF in
 * tests/fixtures/tokenizer/synthetic.jsonl.gz), the whole Gemma 3 golden corpus (goldens.jsonl.gz;
 * skipped when ../shared/data/gemma3-tokenizer is absent), and the streaming detokenizer's
 * invariants. Fixtures are read through `gzip -dc`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gemma4c.h"
#include "tokenizer/tok_json.h"
#include "tokenizer/tokenizer_internal.h"

static const char *tok_dir(void) {
    const char *e = getenv("G4_TOKENIZER_DIR");
    return e ? e : "../shared/data/gemma3-tokenizer";
}

/* Reads a gzip'ed JSONL fixture: returns the lines as a malloc'ed buffer (NUL-separated). */
static char *read_gz(const char *path, size_t *len) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "gzip -dc '%s'", path);
    FILE *f = popen(cmd, "r");
    if (!f) return NULL;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (n + 1 >= cap) buf = realloc(buf, cap *= 2);
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        if (!r) break;
        n += r;
    }
    buf[n] = 0;
    int rc = pclose(f);
    if (rc != 0 || n == 0) { free(buf); return NULL; }
    *len = n;
    return buf;
}

/* ---------------------------------------------------------------- JSON scanner */

static int parse_ok(const char *s, tj_doc *d) {
    return tj_parse(d, s, strlen(s));
}

static void test_json_valid(void **state) {
    (void)state;
    tj_doc d;
    const char *s = " {\"a\": [1, -2.5e3, true, false, null, \"x\\u00e9\\ud83d\\ude00\\n\"], \"b\": {}} ";
    assert_int_equal(parse_ok(s, &d), 0);
    assert_int_equal(d.nodes[0].type, TJ_OBJ);
    uint32_t a = tj_get(&d, 0, "a");
    assert_int_equal(d.nodes[a].type, TJ_ARR);
    assert_int_equal(d.nodes[a].n, 6);
    uint32_t e = a + 1;
    int64_t v;
    assert_int_equal(tj_int(&d, e, -10, 10, &v), 0);
    assert_int_equal(v, 1);
    e = tj_next(&d, e);
    assert_int_equal(tj_int(&d, e, -1e9, 1e9, &v), -1); /* not an integer */
    for (int i = 0; i < 4; i++) e = tj_next(&d, e);
    size_t n;
    const char *str = tj_str(&d, e, &n);
    assert_int_equal(n, 1 + 2 + 4 + 1);
    assert_memory_equal(str, "x\xC3\xA9\xF0\x9F\x98\x80\n", n);
    assert_int_equal(d.nodes[tj_get(&d, 0, "b")].type, TJ_OBJ);
    assert_int_equal(tj_get(&d, 0, "zz"), 0);
    tj_free(&d);
}

static void test_json_pairs(void **state) {
    (void)state;
    tj_doc d;
    /* all [string, string]: compact pairs */
    assert_int_equal(parse_ok("[[\"a\", \"b\"], [\"c\\n\",\"\"]]", &d), 0);
    assert_int_equal(d.nodes[0].type, TJ_PAIRS);
    assert_int_equal(d.nodes[0].n, 2);
    assert_int_equal(d.n_nodes, 1);
    const tj_pair *p = tj_pairs(&d, 0);
    assert_non_null(p);
    assert_memory_equal(tj_at_off(&d, p[1].a_off), "c\n", 2);
    assert_int_equal(p[1].a_len, 2);
    assert_int_equal(p[1].b_len, 0);
    assert_int_equal(p[1].open, 13);
    tj_free(&d);
    /* pairs, then something else: back to plain nodes, in order */
    static const char *mixed[] = {"[[\"a\",\"b\"], \"c d\", [\"e\",\"f\"]]", "[[\"a\",\"b\"], [\"c\",\"d\",\"e\"]]",
                                  "[[\"a\",\"b\"], [1, \"x\"]]", "[[\"a\",\"b\"], [\"x\", 1]]", "[[\"a\" ,\"b\"],[]]"};
    for (size_t i = 0; i < sizeof mixed / sizeof mixed[0]; i++) {
        assert_int_equal(parse_ok(mixed[i], &d), 0);
        assert_int_equal(d.nodes[0].type, TJ_ARR);
        assert_int_equal(d.nodes[1].type, TJ_ARR);
        assert_int_equal(d.nodes[1].size, 3);
        assert_true(tj_str_eq(&d, 2, "a") && tj_str_eq(&d, 3, "b"));
        assert_int_equal(d.nodes[0].size, d.n_nodes);
        tj_free(&d);
    }
    /* a long pretty-printed array is parsed in two halves (tj_parse_split): same result, also when
     * the second half turns out not to be all pairs, or holds an error */
    for (int variant = 0; variant < 4; variant++) {
        size_t cap = 1 << 16, n = 0;
        char *big = malloc(cap);
        n += (size_t)snprintf(big + n, cap - n, "{\"m\": [\n");
        for (int i = 0; i < 400; i++) {
            const char *b = (variant == 1 && i == 300) ? "\"x\", 3" : (variant == 2 && i == 350) ? "\"\\q\"" : "\"b\\n\"";
            n += (size_t)snprintf(big + n, cap - n, "    [\n      \"a%d\",\n      %s\n    ]%s\n", i, b, i < 399 ? "," : "");
        }
        n += (size_t)snprintf(big + n, cap - n, "  ]%s}", variant == 3 ? ", \"z\": [\n[\"c\",\"d\"]\n]" : "");
        tj_doc d1, d2;
        int r1 = tj_parse_split(&d1, big, n, 1u << 30), r2 = tj_parse_split(&d2, big, n, 64);
        assert_int_equal(r1, r2);
        if (r1 == 0) {
            assert_int_equal(d1.n_nodes, d2.n_nodes);
            assert_int_equal(d1.n_pairs, d2.n_pairs);
            for (size_t i = 0; i < d1.n_nodes; i++) {
                assert_int_equal(d1.nodes[i].type, d2.nodes[i].type);
                assert_int_equal(d1.nodes[i].n, d2.nodes[i].n);
            }
            for (size_t i = 0; i < d1.n_pairs; i++) {
                assert_int_equal(d1.pairs[i].a_len, d2.pairs[i].a_len);
                assert_int_equal(d1.pairs[i].b_len, d2.pairs[i].b_len);
                assert_memory_equal(tj_at_off(&d1, d1.pairs[i].a_off), tj_at_off(&d2, d2.pairs[i].a_off), d1.pairs[i].a_len);
                assert_memory_equal(tj_at_off(&d1, d1.pairs[i].b_off), tj_at_off(&d2, d2.pairs[i].b_off), d1.pairs[i].b_len);
            }
            uint32_t m = tj_get(&d2, 0, "m");
            assert_int_equal(d2.nodes[m].type, variant == 1 ? TJ_ARR : TJ_PAIRS);
            assert_int_equal(d2.nodes[m].n, 400);
        } else {
            assert_string_equal(d1.err, d2.err);
        }
        tj_free(&d1);
        tj_free(&d2);
        free(big);
    }
    /* errors inside a pair are reported, not skipped */
    assert_int_equal(tj_parse(&d, "[[\"a\",\"\xff\"]]", 9), -1);
    assert_string_equal(d.err, "byte 7: invalid UTF-8 in string");
    tj_free(&d);
    assert_int_equal(tj_parse(&d, "[[\"a\",\"b\"", 9), -1);
    tj_free(&d);
}

static void test_json_invalid(void **state) {
    (void)state;
    static const struct { const char *text; const char *err; } cases[] = {
        {"", "byte 0: unexpected end of input"},
        {"{", "byte 1: unexpected end of input in object"},
        {"[1,]", "byte 3: unexpected character ']'"},
        {"[1 2]", "byte 3: expected ',' or ']' in array"},
        {"{\"a\" 1}", "byte 5: expected ':' after object key"},
        {"{1: 2}", "byte 1: expected '\"' to start an object key"},
        {"\"abc", "byte 0: unterminated string"},
        {"\"a\\x\"", "byte 2: invalid escape '\\x'"},
        {"\"\\ud800\"", "byte 1: lone leading surrogate"},
        {"\"\\udc00\"", "byte 1: lone trailing surrogate"},
        {"\"a\tb\"", "byte 2: control character 0x09 in string"},
        {"\"\xff\"", "byte 1: invalid UTF-8 in string"},
        {"\"\xc0\xaf\"", "byte 1: invalid UTF-8 in string"},
        {"01", "byte 1: trailing characters"},
        {"1.", "byte 2: invalid number"},
        {"-", "byte 0: invalid number"},
        {"tru", "byte 0: invalid literal (expected true)"},
        {"[] x", "byte 3: trailing characters"},
        {"\xEF\xBB\xBF{}", "byte 0: UTF-8 byte-order mark"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tj_doc d;
        assert_int_equal(tj_parse(&d, cases[i].text, strlen(cases[i].text)), -1);
        if (strncmp(d.err, cases[i].err, strlen(cases[i].err))) fail_msg("case %zu: got '%s', want '%s'", i, d.err, cases[i].err);
        tj_free(&d);
    }
    /* nesting limit */
    char deep[400];
    memset(deep, '[', 300);
    deep[300] = 0;
    tj_doc d;
    assert_int_equal(tj_parse(&d, deep, 300), -1);
    assert_non_null(strstr(d.err, "nesting deeper than"));
    tj_free(&d);
}

static void test_utf8(void **state) {
    (void)state;
    const char ok[] = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF";
    assert_int_equal(tk_utf8_check(ok, sizeof ok - 1), sizeof ok - 1);
    static const char *bad[] = {"\x80", "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80",
                                "\xF5\x80\x80\x80", "\xC3", "\xE2\x82", "\xF0\x9F\x98", "\xFF", "\xFE"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char buf[16];
        int n = snprintf(buf, sizeof buf, "ab%s", bad[i]);
        assert_int_equal(tk_utf8_check(buf, (size_t)n), 2);
    }
}

/* ---------------------------------------------------------------- small tokenizers */

static g4_tokenizer *load_str(const char *json) {
    g4_tokenizer *t = NULL;
    g4_status st = tk_load_json(json, strlen(json), "tokenizer.json", &t);
    if (st) fail_msg("load failed: %s", g4_last_error());
    return t;
}

#define MINI_MODEL "\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"byte_fallback\":true,\"fuse_unk\":true," \
    "\"vocab\":{\"<unk>\":0,\"<bos>\":1,\"a\":2,\"b\":3,\"ab\":4,\"\\u2581\":5,\"\\u2581ab\":6,\"<0x41>\":7,\"<0xC3>\":8,\"<0xA9>\":9}," \
    "\"merges\":[[\"a\",\"b\"],[\"\\u2581\",\"ab\"]]}"

static void test_refuses_unknown_types(void **state) {
    (void)state;
    static const struct { const char *json; const char *msg; } cases[] = {
        {"{\"normalizer\":{\"type\":\"NFKC\"}," MINI_MODEL "}", "normalizer type 'NFKC' is not supported"},
        {"{\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false}," MINI_MODEL "}", "pre_tokenizer type 'ByteLevel' is not supported"},
        {"{\"decoder\":{\"type\":\"WordPiece\"}," MINI_MODEL "}", "decoder type 'WordPiece' is not supported"},
        {"{\"post_processor\":{\"type\":\"RobertaProcessing\"}," MINI_MODEL "}", "post_processor type 'RobertaProcessing' is not supported"},
        {"{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}}", "model type 'WordPiece' is not supported"},
        {"{\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"Regex\":\" +\"},\"content\":\"x\"}," MINI_MODEL "}", "Regex patterns are not supported"},
        {"{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"Sideways\",\"invert\":false}," MINI_MODEL "}", "behavior 'Sideways' is not supported"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[[\"a\",\"q\"]]}}", "model.merges[0]: token 'q' is not in the vocabulary"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[[\"a\",\"a\"]]}}", "merged token 'aa' is not in the vocabulary"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]}}", "model.vocab['a']: expected an id"},
        {"{\"version\":\"2.0\"," MINI_MODEL "}", "version: only \"1.0\""},
        {"{\"truncation\":{\"max_length\":5}," MINI_MODEL "}", "truncation: only null is supported"},
        {"{}", "field 'model' missing"},
        {"[]", "top level: expected object"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[],\"continuing_subword_prefix\":\"##\"}}", "model.continuing_subword_prefix: only null"},
        {"{\"added_tokens\":[{\"id\":0,\"content\":5}]," MINI_MODEL "}", "added_tokens[].content: expected a string"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        g4_tokenizer *t = NULL;
        g4_status st = tk_load_json(cases[i].json, strlen(cases[i].json), "tok.json", &t);
        assert_int_equal(st, G4_ERR_INPUT);
        assert_null(t);
        if (!strstr(g4_last_error(), cases[i].msg)) fail_msg("case %zu: got '%s', want '%s'", i, g4_last_error(), cases[i].msg);
        assert_non_null(strstr(g4_last_error(), "tok.json: byte "));
        assert_null(strchr(g4_last_error(), '\n'));
    }
}

/* A merge of the wrong shape is reported at its own '[', also when it is the document's last
 * value: the loader once named the element after it, reading past the end of the node array. */
static void test_merge_shape_error_offset(void **state) {
    (void)state;
    char last[512];
    /* 19 good merges, a bad one, 2 spaces: 256 bytes, which fills tj_parse's first node array
     * exactly, so a read one node too far is a heap overflow under ASan */
    int k = snprintf(last, sizeof last, "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"aa\":1},\"merges\":[");
    for (int i = 0; i < 19; i++) k += snprintf(last + k, sizeof last - (size_t)k, "[\"a\",\"a\"],");
    snprintf(last + k, sizeof last - (size_t)k, "[\"a\"]]}}  ");
    assert_int_equal(strlen(last), 256);
    static const char mid[] = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"aa\":1},"
                              "\"merges\":[[\"a\",\"a\"],[\"a\"],[\"a\",\"a\"]]}}";
    const struct { const char *json; unsigned rank; } cases[] = {{mid, 1}, {last, 19}};
    for (size_t i = 0; i < 2; i++) {
        g4_tokenizer *t = NULL;
        assert_int_equal(tk_load_json(cases[i].json, strlen(cases[i].json), "tok.json", &t), G4_ERR_INPUT);
        assert_null(t);
        char want[128];
        snprintf(want, sizeof want, "tok.json: byte %zu: model.merges[%u]: expected [\"a\", \"b\"] or \"a b\"",
                 (size_t)(strstr(cases[i].json, "[\"a\"]") - cases[i].json), cases[i].rank);
        assert_string_equal(g4_last_error(), want);
    }
}

static void test_vocab_edge_cases(void **state) {
    (void)state;
    /* a key given twice keeps its last id (HF: a HashMap built from the JSON); "" is no character */
    g4_tokenizer *t = load_str("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"a\":2,\"\":3},\"merges\":[]}}");
    int32_t *ids;
    size_t n;
    assert_int_equal(g4_tokenize(t, "ab", 2, 0, &ids, &n), G4_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 1);
    free(ids);
    assert_null(g4_id_to_token(t, 0));
    assert_string_equal(g4_id_to_token(t, 2), "a");
    assert_int_equal(g4_tokenize(t, "\0", 1, 0, &ids, &n), G4_OK); /* no unk token: dropped */
    assert_int_equal(n, 0);
    free(ids);
    g4_tokenizer_free(t);
}

static void test_mini_bpe(void **state) {
    (void)state;
    g4_tokenizer *t = load_str(
        "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":1,\"content\":\"<bos>\",\"special\":true,\"lstrip\":false,"
        "\"rstrip\":false,\"normalized\":false,\"single_word\":false}],"
        "\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\\u2581\"},"
        "\"pre_tokenizer\":null,"
        "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<bos>\",\"type_id\":0}},"
        "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[],\"special_tokens\":{\"<bos>\":{\"id\":\"<bos>\",\"ids\":[1],\"tokens\":[\"<bos>\"]}}},"
        "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"\\u2581\"},\"content\":\" \"},"
        "{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}]}," MINI_MODEL "}");
    int32_t *ids;
    size_t n;
    assert_int_equal(g4_tokenize(t, "ab abA\xC3\xA9zz<bos>", 15, 1, &ids, &n), G4_OK);
    /* <bos> ab ▁ab <0x41> <0xC3><0xA9> <unk>(fused zz) <bos> */
    int32_t want[] = {1, 4, 6, 7, 8, 9, 0, 1};
    assert_int_equal(n, 8);
    assert_memory_equal(ids, want, sizeof want);
    char *text;
    size_t tl;
    assert_int_equal(g4_detokenize(t, ids, n, 0, &text, &tl), G4_OK);
    assert_string_equal(text, "<bos>ab abA\xC3\xA9<unk><bos>");
    free(text);
    assert_int_equal(g4_detokenize(t, ids, n, 1, &text, &tl), G4_OK);
    assert_string_equal(text, "ab abA\xC3\xA9<unk>");
    free(text);
    free(ids);
    assert_int_equal(g4_tokenize(t, "a\xC3", 2, 0, &ids, &n), G4_ERR_INPUT);
    assert_non_null(strstr(g4_last_error(), "not valid UTF-8 (byte 1"));
    assert_int_equal(g4_tokenize(t, "", 0, 0, &ids, &n), G4_OK);
    assert_int_equal(n, 0);
    free(ids);
    assert_int_equal(g4_tokenizer_vocab_size(t), 10);
    assert_int_equal(g4_token_to_id(t, "<bos>"), 1);
    assert_int_equal(g4_token_to_id(t, "zz"), -1);
    assert_string_equal(g4_id_to_token(t, 6), "\xE2\x96\x81" "ab");
    assert_null(g4_id_to_token(t, 10));
    assert_true(g4_token_is_special(t, 1));
    assert_false(g4_token_is_special(t, 2));
    int32_t bad = 10;
    assert_int_equal(g4_detokenize(t, &bad, 1, 0, &text, &tl), G4_ERR_INPUT);
    assert_non_null(strstr(g4_last_error(), "token id 10 is out of range"));
    g4_tokenizer_free(t);
}

/* Stream ids through g4_detok_stream (skip_special as given); checks every emitted piece is valid
 * UTF-8 and returns the concatenation (malloc'ed). */
static char *stream_all(const g4_tokenizer *t, const int32_t *ids, size_t n, int skip, size_t *out_len) {
    g4_detok_stream *s = g4_detok_stream_new(t, skip);
    assert_non_null(s);
    char *all = malloc(1);
    size_t al = 0;
    char *buf = NULL;
    size_t bl = 0;
    for (size_t i = 0; i <= n; i++) {
        bl = 0;
        g4_status st = i < n ? g4_detok_stream_push(s, ids[i], &buf, &bl) : g4_detok_stream_finish(s, &buf, &bl);
        assert_int_equal(st, G4_OK);
        if (bl && tk_utf8_check(buf, bl) != bl) fail_msg("stream piece %zu is not valid UTF-8", i);
        all = realloc(all, al + bl + 1);
        memcpy(all + al, buf, bl);
        al += bl;
    }
    all[al] = 0;
    free(buf);
    g4_detok_stream_free(s);
    *out_len = al;
    return all;
}

static void test_stream_bytes(void **state) {
    (void)state;
    g4_tokenizer *t = load_str(
        "{\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"\\u2581\"},\"content\":\" \"},"
        "{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}]}," MINI_MODEL "}");
    /* é as two byte pieces: nothing may come out after the first */
    g4_detok_stream *s = g4_detok_stream_new(t, 0);
    char *buf = NULL;
    size_t bl = 0;
    assert_int_equal(g4_detok_stream_push(s, 2, &buf, &bl), G4_OK);
    assert_int_equal(bl, 1);
    bl = 0;
    assert_int_equal(g4_detok_stream_push(s, 8, &buf, &bl), G4_OK);
    assert_int_equal(bl, 0);
    assert_int_equal(g4_detok_stream_push(s, 9, &buf, &bl), G4_OK);
    assert_int_equal(bl, 0);
    assert_int_equal(g4_detok_stream_push(s, 6, &buf, &bl), G4_OK);
    assert_string_equal(buf, "\xC3\xA9 ab");
    bl = 0;
    assert_int_equal(g4_detok_stream_push(s, 8, &buf, &bl), G4_OK); /* dangling lead byte */
    assert_int_equal(bl, 0);
    assert_int_equal(g4_detok_stream_finish(s, &buf, &bl), G4_OK);
    assert_string_equal(buf, "\xEF\xBF\xBD");
    assert_int_equal(g4_detok_stream_push(s, 99, &buf, &bl), G4_ERR_INPUT);
    free(buf);
    g4_detok_stream_free(s);
    /* invariant over every sequence of length <= 4 over the vocabulary */
    for (int len = 0; len <= 4; len++) {
        int total = 1;
        for (int i = 0; i < len; i++) total *= 10;
        for (int code = 0; code < total; code++) {
            int32_t ids[4];
            int c = code;
            for (int i = 0; i < len; i++) { ids[i] = c % 10; c /= 10; }
            for (int skip = 0; skip < 2; skip++) {
                char *full;
                size_t fl, sl;
                assert_int_equal(g4_detokenize(t, ids, (size_t)len, skip, &full, &fl), G4_OK);
                char *st = stream_all(t, ids, (size_t)len, skip, &sl);
                assert_int_equal(fl, sl);
                assert_memory_equal(full, st, fl);
                free(full);
                free(st);
            }
        }
    }
    g4_tokenizer_free(t);
}

/* ---------------------------------------------------------------- HF-recorded small tokenizers */

static int ids_equal(json_t *arr, const int32_t *ids, size_t n) {
    if (!json_is_array(arr) || json_array_size(arr) != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (json_integer_value(json_array_get(arr, i)) != ids[i]) return 0;
    return 1;
}

static void print_ids(const char *what, const int32_t *ids, size_t n) {
    fprintf(stderr, "  %s:", what);
    for (size_t i = 0; i < n && i < 60; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, n > 60 ? " ...\n" : "\n");
}

static void test_synthetic(void **state) {
    (void)state;
    size_t len;
    char *buf = read_gz("tests/fixtures/tokenizer/synthetic.jsonl.gz", &len);
    if (!buf) fail_msg("cannot read tests/fixtures/tokenizer/synthetic.jsonl.gz");
    int n_tok = 0, n_case = 0, bad = 0;
    for (char *line = buf, *nl; line < buf + len; line = nl + 1) {
        nl = memchr(line, '\n', (size_t)(buf + len - line));
        if (!nl) nl = buf + len;
        json_error_t err;
        json_t *rec = json_loadb(line, (size_t)(nl - line), JSON_ALLOW_NUL, &err);
        if (!rec) fail_msg("synthetic fixture: %s", err.text);
        const char *tj = json_string_value(json_object_get(rec, "tokenizer_json"));
        const char *name = json_string_value(json_object_get(rec, "name"));
        g4_tokenizer *t = NULL;
        if (tk_load_json(tj, strlen(tj), name, &t)) fail_msg("%s: %s", name, g4_last_error());
        n_tok++;
        json_t *cases = json_object_get(rec, "cases");
        for (size_t i = 0; i < json_array_size(cases); i++) {
            json_t *c = json_array_get(cases, i);
            json_t *js = json_object_get(c, "text");
            const char *text = json_string_value(js);
            size_t tl = json_string_length(js);
            for (int sp = 0; sp < 2; sp++) {
                int32_t *ids;
                size_t n;
                assert_int_equal(g4_tokenize(t, text, tl, sp, &ids, &n), G4_OK);
                json_t *want = json_object_get(c, sp ? "ids_special" : "ids");
                if (!ids_equal(want, ids, n)) {
                    fprintf(stderr, "%s: text %s (special=%d) differs\n", name, json_dumps(js, JSON_ENCODE_ANY), sp);
                    print_ids("got", ids, n);
                    bad++;
                }
                char *dt;
                size_t dl;
                assert_int_equal(g4_detokenize(t, ids, n, 0, &dt, &dl), G4_OK);
                json_t *wd = json_object_get(c, sp ? "decoded_special" : "decoded");
                if (dl != json_string_length(wd) || memcmp(dt, json_string_value(wd), dl)) {
                    fprintf(stderr, "%s: decode of %s differs: got '%s' want '%s'\n", name, json_dumps(js, JSON_ENCODE_ANY), dt, json_string_value(wd));
                    bad++;
                }
                size_t sl;
                char *st = stream_all(t, ids, n, 0, &sl);
                if (sl != dl || memcmp(st, dt, dl)) { fprintf(stderr, "%s: stream differs\n", name); bad++; }
                free(st);
                free(dt);
                free(ids);
            }
            n_case++;
        }
        g4_tokenizer_free(t);
        json_decref(rec);
    }
    free(buf);
    fprintf(stderr, "synthetic: %d tokenizers, %d cases, %d mismatches\n", n_tok, n_case, bad);
    assert_int_equal(bad, 0);
}

/* ---------------------------------------------------------------- special text kept plain */

static int has_id(const int32_t *ids, size_t n, int32_t id) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id) return 1;
    return 0;
}

/* g4_tokenize_plain: a special token's text overlapping a plain range is tokenized as text (and
 * decodes back to it); outside the ranges nothing changes; g4_find_special_text finds it. */
static void test_plain_ranges(void **state) {
    (void)state;
    g4_tokenizer *t = NULL;
    if (g4_tokenizer_load("tests/fixtures/g4-cond-tiny", &t)) fail_msg("%s", g4_last_error());
    const int32_t turn = g4_token_to_id(t, "<|turn>");
    assert_true(turn >= 0 && g4_token_is_special(t, turn));
    const char *text = "ab<|turn>cd";
    const size_t n = strlen(text);
    int32_t *def = NULL, *ids = NULL;
    size_t n_def = 0, n_ids = 0;
    assert_int_equal(g4_tokenize(t, text, n, 0, &def, &n_def), G4_OK);
    assert_true(has_id(def, n_def, turn));
    const size_t whole[2] = {0, n}, before[2] = {0, 2}, inside[2] = {4, 6};
    assert_int_equal(g4_tokenize_plain(t, text, n, 0, whole, 1, &ids, &n_ids), G4_OK);
    assert_false(has_id(ids, n_ids, turn));
    assert_true(n_ids > n_def);
    char *back = NULL;
    size_t blen = 0;
    assert_int_equal(g4_detokenize(t, ids, n_ids, 0, &back, &blen), G4_OK);
    assert_int_equal(blen, n);
    assert_memory_equal(back, text, n);
    free(back);
    free(ids);
    /* a range that only touches text before the token: the same ids as g4_tokenize */
    assert_int_equal(g4_tokenize_plain(t, text, n, 0, before, 1, &ids, &n_ids), G4_OK);
    assert_int_equal(n_ids, n_def);
    assert_memory_equal(ids, def, n_def * sizeof *ids);
    free(ids);
    /* a range overlapping part of the token's text: not matched either */
    assert_int_equal(g4_tokenize_plain(t, text, n, 0, inside, 1, &ids, &n_ids), G4_OK);
    assert_false(has_id(ids, n_ids, turn));
    free(ids);
    free(def);
    size_t a = 0, b = 0;
    assert_int_equal(g4_find_special_text(t, text, n, &a, &b), 1);
    assert_int_equal(a, 2);
    assert_int_equal(b, 9);
    assert_int_equal(g4_find_special_text(t, "plain text", 10, &a, &b), 0);
    g4_tokenizer_free(t);
}

/* ---------------------------------------------------------------- Gemma 3 golden corpus */

static g4_tokenizer *gemma;

static int gemma_setup(void **state) {
    (void)state;
    FILE *f = NULL;
    char p[1024];
    snprintf(p, sizeof p, "%s/tokenizer.json", tok_dir());
    if ((f = fopen(p, "rb"))) {
        fclose(f);
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        if (g4_tokenizer_load(tok_dir(), &gemma)) fail_msg("%s", g4_last_error());
        clock_gettime(CLOCK_MONOTONIC, &b);
        fprintf(stderr, "gemma3 tokenizer loaded in %.3f s\n", (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9);
    }
    return 0;
}

static int gemma_teardown(void **state) {
    (void)state;
    g4_tokenizer_free(gemma);
    gemma = NULL;
    return 0;
}

static void test_gemma_goldens(void **state) {
    (void)state;
    if (!gemma) { fprintf(stderr, "skipped: no tokenizer at %s\n", tok_dir()); skip(); }
    size_t len;
    char *buf = read_gz("tests/fixtures/tokenizer/goldens.jsonl.gz", &len);
    if (!buf) fail_msg("cannot read tests/fixtures/tokenizer/goldens.jsonl.gz");
    int n_enc = 0, n_dec = 0, bad = 0;
    double secs = 0;
    size_t bytes = 0;
    for (char *line = buf, *nl; line < buf + len; line = nl + 1) {
        nl = memchr(line, '\n', (size_t)(buf + len - line));
        if (!nl) nl = buf + len;
        json_error_t err;
        json_t *rec = json_loadb(line, (size_t)(nl - line), JSON_ALLOW_NUL, &err);
        if (!rec) fail_msg("goldens: %s", err.text);
        json_t *js = json_object_get(rec, "text");
        json_t *dids = json_object_get(rec, "decode_ids");
        if (!js && !dids) { json_decref(rec); continue; } /* the meta line */
        int32_t *ids = NULL;
        size_t n = 0;
        if (js) {
            const char *text = json_string_value(js);
            size_t tl = json_string_length(js);
            struct timespec a, b;
            clock_gettime(CLOCK_MONOTONIC, &a);
            assert_int_equal(g4_tokenize(gemma, text, tl, 0, &ids, &n), G4_OK);
            clock_gettime(CLOCK_MONOTONIC, &b);
            secs += (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9;
            bytes += tl;
            if (!ids_equal(json_object_get(rec, "ids"), ids, n)) {
                char *d = json_dumps(js, JSON_ENCODE_ANY);
                fprintf(stderr, "encode mismatch for %.200s\n", d);
                free(d);
                print_ids("got ", ids, n);
                bad++;
            }
            int32_t *ids2;
            size_t n2;
            assert_int_equal(g4_tokenize(gemma, text, tl, 1, &ids2, &n2), G4_OK);
            json_t *full = json_object_get(rec, "ids_special");
            if (full) {
                if (!ids_equal(full, ids2, n2)) { fprintf(stderr, "encode(special) mismatch\n"); bad++; }
            } else {
                json_t *pre = json_object_get(rec, "special_prefix"), *suf = json_object_get(rec, "special_suffix");
                size_t np = json_array_size(pre), ns = json_array_size(suf);
                if (n2 != np + n + ns || !ids_equal(pre, ids2, np) || memcmp(ids2 + np, ids, n * sizeof *ids) ||
                    !ids_equal(suf, ids2 + np + n, ns)) {
                    fprintf(stderr, "encode(special) mismatch\n");
                    bad++;
                }
            }
            /* decode_skip is of the ids with specials */
            char *dt;
            size_t dl;
            assert_int_equal(g4_detokenize(gemma, ids2, n2, 1, &dt, &dl), G4_OK);
            json_t *w = json_object_get(rec, "decoded_skip");
            if (dl != json_string_length(w) || memcmp(dt, json_string_value(w), dl)) { fprintf(stderr, "decode(skip) mismatch\n"); bad++; }
            size_t sl;
            char *st = stream_all(gemma, ids2, n2, 1, &sl);
            if (sl != dl || memcmp(st, dt, dl)) { fprintf(stderr, "stream(skip) mismatch\n"); bad++; }
            free(st);
            free(dt);
            free(ids2);
            n_enc++;
        } else {
            n = json_array_size(dids);
            ids = malloc((n ? n : 1) * sizeof *ids);
            for (size_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(dids, i));
            char *dt;
            size_t dl;
            assert_int_equal(g4_detokenize(gemma, ids, n, 1, &dt, &dl), G4_OK);
            json_t *w = json_object_get(rec, "decoded_skip");
            if (dl != json_string_length(w) || memcmp(dt, json_string_value(w), dl)) { fprintf(stderr, "decode(skip) mismatch on random ids\n"); bad++; }
            size_t sl;
            char *st = stream_all(gemma, ids, n, 1, &sl);
            if (sl != dl || memcmp(st, dt, dl)) { fprintf(stderr, "stream(skip) mismatch on random ids\n"); bad++; }
            free(st);
            free(dt);
            n_dec++;
        }
        {
            char *dt;
            size_t dl;
            assert_int_equal(g4_detokenize(gemma, ids, n, 0, &dt, &dl), G4_OK);
            json_t *w = json_object_get(rec, "decoded");
            if (dl != json_string_length(w) || memcmp(dt, json_string_value(w), dl)) {
                fprintf(stderr, "decode mismatch: got '%.100s' want '%.100s'\n", dt, json_string_value(w));
                bad++;
            }
            size_t sl;
            char *st = stream_all(gemma, ids, n, 0, &sl);
            if (sl != dl || memcmp(st, dt, dl)) { fprintf(stderr, "stream mismatch\n"); bad++; }
            free(st);
            free(dt);
        }
        free(ids);
        json_decref(rec);
    }
    free(buf);
    fprintf(stderr, "gemma3 goldens: %d strings encoded (%zu bytes, %.1f MB/s), %d id sequences decoded, %d mismatches\n",
            n_enc, bytes, secs > 0 ? bytes / secs / 1e6 : 0.0, n_dec, bad);
    assert_true(n_enc >= 2000);
    assert_int_equal(bad, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_valid),
        cmocka_unit_test(test_json_pairs),
        cmocka_unit_test(test_json_invalid),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_refuses_unknown_types),
        cmocka_unit_test(test_merge_shape_error_offset),
        cmocka_unit_test(test_vocab_edge_cases),
        cmocka_unit_test(test_mini_bpe),
        cmocka_unit_test(test_stream_bytes),
        cmocka_unit_test(test_synthetic),
        cmocka_unit_test(test_plain_ranges),
        cmocka_unit_test_setup_teardown(test_gemma_goldens, gemma_setup, gemma_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
