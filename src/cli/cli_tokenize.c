/* cli_tokenize.c — `gemma4c tokenize` (UTF-8 text on stdin -> JSON array of ids) and
 * `gemma4c detokenize` (JSON array of ids on stdin -> text, no added newline). Owns only option
 * parsing and I/O; the tokenizer is src/tokenizer. */
#include "cli/cli.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_opts(const char *cmd, const char *flag, int argc, char **argv, const char **model, int *on) {
    *model = NULL;
    *on = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) {
            if (i + 1 >= argc) return cli_usage_error(cmd, "%s expects a path", argv[i]);
            *model = argv[++i];
        } else if (!strcmp(argv[i], flag)) {
            *on = 1;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: gemma4c %s -m MODEL_OR_TOKENIZER_DIR [%s]\n", cmd, flag);
            return -1;
        } else {
            return cli_usage_error(cmd, "unknown option '%s'", argv[i]);
        }
    }
    if (!*model) return cli_usage_error(cmd, "-m MODEL_OR_TOKENIZER_DIR is required");
    return 0;
}

/* tokenize's options: parse_opts' and the media options (--image FILE: the printed ids are the
 * prompt expanded as the processor expands it for those images; --mmproj FILE: the processor
 * settings of llama.cpp's mmproj beside a GGUF model, as run takes them) */
static int parse_tokenize_opts(int argc, char **argv, const char **model, const char **mmproj, int *bos, cli_media *md) {
    *model = NULL;
    *mmproj = NULL;
    *bos = 0;
    memset(md, 0, sizeof *md);
    for (int i = 1; i < argc; i++) {
        int r = cli_parse_media_opt("tokenize", argc, argv, &i, md);
        if (r) {
            if (r < 0) return 2;
            continue;
        }
        if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) {
            if (i + 1 >= argc) return cli_usage_error("tokenize", "%s expects a path", argv[i]);
            *model = argv[++i];
        } else if (!strcmp(argv[i], "--mmproj")) {
            if (i + 1 >= argc) return cli_usage_error("tokenize", "%s expects a path", argv[i]);
            *mmproj = argv[++i];
        } else if (!strcmp(argv[i], "--bos")) {
            *bos = 1;
        } else if (cli_is_help(argv[i])) {
            printf("usage: gemma4c tokenize -m MODEL_OR_TOKENIZER_DIR [--bos] [--image FILE ...] [--audio FILE ...]\n"
                   "                        [--mmproj FILE]\n"
                   "  --mmproj FILE                llama.cpp's mmproj GGUF beside a GGUF model: its patch geometry\n"
                   "                               and audio frame size expand the placeholders\n");
            fputs(cli_media_opts_help, stdout);
            return -1;
        } else {
            return cli_usage_error("tokenize", "unknown option '%s'", argv[i]);
        }
    }
    if (!*model) return cli_usage_error("tokenize", "-m MODEL_OR_TOKENIZER_DIR is required");
    return cli_media_check("tokenize", md);
}

int cli_tokenize(int argc, char **argv) {
    const char *model, *mmproj;
    int bos;
    cli_media md;
    int rc = parse_tokenize_opts(argc, argv, &model, &mmproj, &bos, &md);
    if (rc) return rc < 0 ? 0 : rc;
    int max_soft;
    g4_status st = mmproj ? cli_mmproj_check(model, mmproj, &md) : G4_OK;
    if (!st) st = cli_media_load(&md, mmproj ? mmproj : model, &max_soft);
    g4_tokenizer *t = NULL;
    if (!st) st = g4_tokenizer_load(model, &t);
    size_t len;
    char *text = st ? NULL : cli_read_stdin(&len);
    if (!st && !text) st = g4_fail(G4_ERR_IO, "stdin: read failed");
    int32_t *ids = NULL;
    size_t n = 0;
    if (!st) st = g4_tokenize(t, text, len, bos, &ids, &n);
    free(text);
    g4_media_prompt *mp = NULL;
    const int32_t *out = ids;
    if (!st && (md.n_images || md.n_audios)) {
        int nn;
        if (!(st = cli_media_prompt(&md, t, ids, (int)n, &mp))) {
            out = g4_media_prompt_ids(mp, &nn);
            n = (size_t)nn;
        }
    }
    if (!st) {
        fputc('[', stdout);
        for (size_t i = 0; i < n; i++) printf(i ? ",%d" : "%d", out[i]);
        fputs("]\n", stdout);
    }
    g4_media_prompt_free(mp);
    free(ids);
    g4_tokenizer_free(t);
    cli_media_free(&md);
    if (st) return cli_report(st);
    return fflush(stdout) ? 1 : 0;
}

int cli_detokenize(int argc, char **argv) {
    const char *model;
    int skip, rc = parse_opts("detokenize", "--skip-special", argc, argv, &model, &skip);
    if (rc) return rc < 0 ? 0 : rc;
    size_t len;
    char *in = cli_read_stdin(&len);
    if (!in) return cli_report(g4_fail(G4_ERR_IO, "stdin: read failed"));
    json_error_t jerr;
    json_t *arr = json_loadb(in, len, 0, &jerr);
    free(in);
    if (!arr || !json_is_array(arr)) {
        if (arr) json_decref(arr);
        return cli_report(g4_fail(G4_ERR_INPUT, "stdin: expected a JSON array of token ids%s%s",
                                  arr ? "" : ": ", arr ? "" : jerr.text));
    }
    size_t n = json_array_size(arr);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) { json_decref(arr); return cli_report(g4_fail(G4_ERR_NOMEM, "out of memory")); }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
            json_decref(arr);
            free(ids);
            return cli_report(g4_fail(G4_ERR_INPUT, "stdin: element %zu is not a token id (non-negative integer)", i));
        }
        ids[i] = (int32_t)json_integer_value(v);
    }
    json_decref(arr);
    g4_tokenizer *t;
    g4_status st = g4_tokenizer_load(model, &t);
    if (st) { free(ids); return cli_report(st); }
    char *text;
    size_t tl;
    st = g4_detokenize(t, ids, n, skip, &text, &tl);
    free(ids);
    g4_tokenizer_free(t);
    if (st) return cli_report(st);
    fwrite(text, 1, tl, stdout);
    free(text);
    return fflush(stdout) ? 1 : 0;
}
