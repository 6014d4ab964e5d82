/* cli_constraint.c — the structured-output options of `run` (--json-schema FILE, --grammar FILE,
 * --json-object): compiles the grammar and the matcher g4_gen_params.constraint borrows, through
 * the same public calls the server's response_format and grammar fields use. The engine is
 * src/grammar; this file owns only the options and the file reading. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

const char *const cli_constraint_opts_help =
    "structured outputs (one of):\n"
    "  --json-schema FILE    the output is a JSON document valid under the schema in FILE\n"
    "  --grammar FILE        the output is a sentence of the llama.cpp GBNF grammar in FILE\n"
    "  --json-object         the output is a JSON object\n";

int cli_parse_constraint_opt(const char *cmd, int argc, char **argv, int *i, cli_constraint *c) {
    const char *a = argv[*i];
    int schema = !strcmp(a, "--json-schema"), gbnf = !strcmp(a, "--grammar"), object = !strcmp(a, "--json-object");
    if (!schema && !gbnf && !object) return 0;
    if (c->kind) return cli_usage_error(cmd, "give at most one of --json-schema, --grammar, --json-object"), -1;
    if (!object) {
        if (*i + 1 >= argc) return cli_usage_error(cmd, "%s needs a file", a), -1;
        c->path = argv[++*i];
    }
    c->kind = schema ? CLI_CONSTRAIN_SCHEMA : gbnf ? CLI_CONSTRAIN_GBNF : CLI_CONSTRAIN_OBJECT;
    return 1;
}

static g4_status read_whole(const char *path, char **out, size_t *len) {
    *out = cli_read_file(path, len);
    return *out ? G4_OK : g4_fail(G4_ERR_INPUT, "cannot read the file");
}

g4_status cli_constraint_build(cli_constraint *c, const g4_tokenizer *tok, const g4_gen_config *cfg) {
    if (!c->kind) return G4_OK;
    const char *opt = c->kind == CLI_CONSTRAIN_SCHEMA ? "--json-schema" : c->kind == CLI_CONSTRAIN_GBNF ? "--grammar"
                                                                                                   : "--json-object";
    char *src = NULL, *gbnf = NULL;
    size_t len = 0;
    g4_status st = c->path ? read_whole(c->path, &src, &len) : G4_OK;
    /* a schema becomes GBNF as the server's response_format does; GBNF may name special tokens */
    if (!st && c->kind != CLI_CONSTRAIN_GBNF) st = g4_json_schema_to_gbnf(src, len, &gbnf);
    if (!st) {
        const char *g = gbnf ? gbnf : src;
        st = g4_grammar_compile_gbnf_tokens(g, strlen(g), NULL, tok, &c->grammar);
    }
    free(src);
    free(gbnf);
    /* the generation's eos ids end the output, where the grammar accepts */
    if (!st) st = g4_vocab_index_new(tok, cfg->eos, cfg->n_eos, &c->vocab);
    if (!st) st = g4_grammar_matcher_new(c->grammar, c->vocab, &c->matcher);
    if (st && st != G4_ERR_NOMEM) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", g4_last_error());
        st = c->path ? g4_fail(G4_ERR_INPUT, "%s %s: %s", opt, c->path, msg) : g4_fail(G4_ERR_INPUT, "%s: %s", opt, msg);
    }
    return st;
}

void cli_constraint_free(cli_constraint *c) {
    g4_matcher_free(c->matcher);
    g4_vocab_index_free(c->vocab);
    g4_grammar_free(c->grammar);
    c->matcher = NULL;
    c->vocab = NULL;
    c->grammar = NULL;
}
