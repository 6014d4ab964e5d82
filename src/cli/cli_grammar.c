/* cli_grammar.c — `gemma4c grammar`: compiles a JSON Schema, GBNF or json_object grammar and walks
 * candidate text on stdin through the token matcher (which tokens are allowed, where the end is),
 * or times the masks (--bench). Owns only option parsing and I/O; the engine is src/grammar. */
#include "cli/cli.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: gemma4c grammar -m MODEL_OR_TOKENIZER_DIR (--json-schema FILE | --gbnf FILE | --json-object)\n"
    "                       [--check] [--bench] [--trace] [--no-cache] [--print-gbnf] [--end-id N]...\n"
    "  candidate text on stdin is tokenized (no BOS) and walked token by token; prints JSON:\n"
    "  {\"tokens\": [{\"id\", \"offset\", \"len\", \"allowed\", \"n_allowed\"}...], \"rejected_at\", \"accepts_end\", ...}\n"
    "  --check       also compare every step's mask with a direct simulation of every token\n"
    "  --bench       time each step's mask (median / p99 / max in microseconds)\n"
    "  --trace       each step's allowed count and mask time on stderr\n"
    "  --no-cache    no mask caching per grammar state (every mask a full walk)\n"
    "  --print-gbnf  print the GBNF the schema compiles to and exit\n"
    "  --end-id N    an end-of-output token (default: the tokenizer's <eos> and <end_of_turn>)\n";

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int cli_grammar(int argc, char **argv) {
    const char *cmd = "grammar", *model = NULL, *schema = NULL, *gbnf = NULL;
    int want_object = 0, check = 0, bench = 0, trace = 0, no_cache = 0, print = 0, n_end = 0;
    int32_t end_ids[16];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (cli_is_help(a)) { fputs(USAGE, stdout); return 0; }
        else if ((!strcmp(a, "-m") || !strcmp(a, "--model"))) { if (!has) return cli_usage_error(cmd, "%s expects a path", a); model = argv[++i]; }
        else if (!strcmp(a, "--json-schema")) { if (!has) return cli_usage_error(cmd, "%s expects a file", a); schema = argv[++i]; }
        else if (!strcmp(a, "--gbnf")) { if (!has) return cli_usage_error(cmd, "%s expects a file", a); gbnf = argv[++i]; }
        else if (!strcmp(a, "--json-object")) want_object = 1;
        else if (!strcmp(a, "--check")) check = 1;
        else if (!strcmp(a, "--bench")) bench = 1;
        else if (!strcmp(a, "--trace")) trace = 1;
        else if (!strcmp(a, "--no-cache")) no_cache = 1;
        else if (!strcmp(a, "--print-gbnf")) print = 1;
        else if (!strcmp(a, "--end-id")) {
            long v;
            if (!has) return cli_usage_error(cmd, "%s expects a token id", a);
            if (!cli_parse_int(cmd, a, argv[++i], 0, INT32_MAX, &v)) return 2;
            if (n_end == 16) return cli_usage_error(cmd, "at most 16 --end-id");
            end_ids[n_end++] = (int32_t)v;
        } else return cli_usage_error(cmd, "unknown option '%s'", a);
    }
    if ((schema != NULL) + (gbnf != NULL) + want_object != 1)
        return cli_usage_error(cmd, "exactly one of --json-schema FILE, --gbnf FILE, --json-object is required");
    size_t glen = 0;
    char *gsrc = NULL;
    if (schema || gbnf) {
        gsrc = cli_read_file(schema ? schema : gbnf, &glen);
        if (!gsrc) return cli_report(g4_fail(G4_ERR_INPUT, "%s: cannot read '%s'", schema ? "--json-schema" : "--gbnf", schema ? schema : gbnf));
    }
    if (print) {
        if (gbnf) { fwrite(gsrc, 1, glen, stdout); free(gsrc); return 0; }
        char *out;
        g4_status st = g4_json_schema_to_gbnf(gsrc, glen, &out);
        free(gsrc);
        if (st) return cli_report(st);
        fputs(out, stdout);
        free(out);
        return 0;
    }
    if (!model) { free(gsrc); return cli_usage_error(cmd, "-m MODEL_OR_TOKENIZER_DIR is required"); }
    g4_grammar *g = NULL;
    g4_tokenizer *tk = NULL;
    g4_status st = g4_tokenizer_load(model, &tk);   /* first: GBNF's token references need it */
    if (!st) st = schema ? g4_grammar_compile_json_schema(gsrc, glen, &g)
                  : gbnf ? g4_grammar_compile_gbnf_tokens(gsrc, glen, "root", tk, &g)
                         : g4_grammar_compile_json_object(&g);
    free(gsrc);
    if (st) { g4_tokenizer_free(tk); return cli_report(st); }
    g4_vocab_index *vi = NULL;
    g4_matcher *m = NULL;
    char *text = NULL;
    int32_t *ids = NULL;
    uint32_t *mask = NULL;
    double *times = NULL;
    json_t *out = NULL;
    int rc = 0;
    if (!n_end) {
        static const char *const ends[] = {"<eos>", "<end_of_turn>", "<turn|>"};
        for (int i = 0; i < 3; i++) {
            int32_t id = g4_token_to_id(tk, ends[i]);
            if (id >= 0) end_ids[n_end++] = id;
        }
    }
    double t0 = g4_now();
    if ((st = g4_vocab_index_new(tk, end_ids, n_end, &vi))) goto fail;
    double t_index = g4_now() - t0;
    if ((st = g4_grammar_matcher_new(g, vi, &m))) goto fail;
    if (no_cache) g4_matcher_set_cache(m, 0);
    size_t len;
    text = cli_read_stdin(&len);
    if (!text) { st = g4_fail(G4_ERR_IO, "stdin: read failed"); goto fail; }
    size_t n;
    if ((st = g4_tokenize(tk, text, len, 0, &ids, &n))) goto fail;
    int V = g4_vocab_index_size(vi);
    mask = malloc(((size_t)V + 31) / 32 * 4);
    times = malloc((n + 2) * sizeof *times);
    out = json_object();
    json_t *toks = json_array();
    if (!mask || !times || !out || !toks) { st = g4_fail(G4_ERR_NOMEM, "out of memory"); json_decref(toks); goto fail; }
    json_object_set_new(out, "tokens", toks);
    long rejected = -1, mismatches = 0, n_masks = 0;
    size_t off = 0;
    for (size_t i = 0; i <= n; i++) {
        double ts = g4_now();
        int cnt = g4_matcher_mask(m, mask);
        times[n_masks++] = g4_now() - ts;
        if (trace) fprintf(stderr, "step %zu: %d allowed, %.1f us\n", i, cnt, times[n_masks - 1] * 1e6);
        if (cnt < 0) { st = G4_ERR_NOMEM; goto fail; }
        if (check) {
            /* every token's bit against a simulation of its bytes on the parse stacks */
            for (int t = 0; t < V; t++) {
                size_t bl;
                const unsigned char *b = g4_vocab_index_token_bytes(vi, t, &bl);
                int want = g4_matcher_is_end(m, t) ? g4_matcher_accepts_end(m)
                         : bl ? g4_matcher_allows_bytes_ref(m, b, bl) : 0;
                if (want < 0) { st = g4_fail(G4_ERR_NOMEM, "out of memory"); goto fail; }
                int got = (int)(mask[t >> 5] >> (t & 31) & 1);
                if (want != got) {
                    if (mismatches < 5) fprintf(stderr, "gemma4c grammar: step %zu token %d: mask %d, simulation %d\n", i, t, got, want);
                    mismatches++;
                }
            }
        }
        if (i == n) {
            json_object_set_new(out, "n_allowed_end", json_integer(cnt));
            break;
        }
        int32_t t = ids[i];
        int in_mask = (int)(mask[t >> 5] >> (t & 31) & 1);
        int ok = g4_matcher_accept(m, t);
        if (ok < 0) { st = G4_ERR_NOMEM; goto fail; }
        if (ok != in_mask) mismatches++;
        size_t bl;
        g4_vocab_index_token_bytes(vi, t, &bl);
        json_array_append_new(toks, json_pack("{s:i, s:I, s:I, s:b, s:i}", "id", t, "offset", (json_int_t)off, "len", (json_int_t)bl, "allowed", ok, "n_allowed", cnt));
        off += bl;
        if (!ok) { rejected = (long)i; break; }
    }
    json_object_set_new(out, "n_tokens", json_integer((json_int_t)n));
    json_object_set_new(out, "rejected_at", json_integer(rejected));
    json_object_set_new(out, "accepts_end", json_boolean(rejected < 0 && g4_matcher_accepts_end(m)));
    json_object_set_new(out, "vocab", json_integer(V));
    json_object_set_new(out, "states", json_integer(g4_matcher_n_states(m)));
    if (check) json_object_set_new(out, "check_mismatches", json_integer(mismatches));
    if (bench) {
        qsort(times, (size_t)n_masks, sizeof *times, cmp_d);
        json_object_set_new(out, "index_ms", json_real(t_index * 1e3));
        json_object_set_new(out, "masks", json_integer(n_masks));
        json_object_set_new(out, "mask_us_median", json_real(times[n_masks / 2] * 1e6));
        json_object_set_new(out, "mask_us_p99", json_real(times[(n_masks * 99) / 100 < n_masks ? (n_masks * 99) / 100 : n_masks - 1] * 1e6));
        json_object_set_new(out, "mask_us_max", json_real(times[n_masks - 1] * 1e6));
    }
    char *s = json_dumps(out, JSON_COMPACT);
    if (s) { puts(s); free(s); }
    rc = check && mismatches ? 1 : 0;
    goto done;
fail:
    rc = cli_report(st ? st : G4_ERR_RUNTIME);
done:
    json_decref(out);
    free(times);
    free(mask);
    free(ids);
    free(text);
    g4_matcher_free(m);
    g4_vocab_index_free(vi);
    g4_tokenizer_free(tk);
    g4_grammar_free(g);
    return rc;
}
