/* cli_parse.c — `gemma4c parse`: raw model output on stdin (special tokens written as their text)
 * through the chat output parser (src/chat), token by token, as the server runs it. Prints the
 * message, or with --stream one line per chunk (a chat.completion.chunk's choices[0]). */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_chunk(const char *delta_json, const char *finish) {
    printf("{\"index\":0,\"delta\":%s,\"logprobs\":null,\"finish_reason\":%s%s%s}\n", delta_json,
           finish ? "\"" : "", finish ? finish : "null", finish ? "\"" : "");
}

int cli_parse(int argc, char **argv) {
    const char *model = NULL;
    int stream = 0, as_ids = 0;
    const char *stop[16];
    int n_stop = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) {
            if (i + 1 >= argc) return cli_usage_error("parse", "%s expects a path", argv[i]);
            model = argv[++i];
        } else if (!strcmp(argv[i], "--stream")) {
            stream = 1;
        } else if (!strcmp(argv[i], "--ids")) {
            as_ids = 1;
        } else if (!strcmp(argv[i], "--stop")) {
            if (i + 1 >= argc) return cli_usage_error("parse", "--stop expects a string");
            if (n_stop == 16) return cli_usage_error("parse", "at most 16 --stop strings");
            stop[n_stop++] = argv[++i];
        } else if (cli_is_help(argv[i])) {
            printf("usage: gemma4c parse -m MODEL_OR_TOKENIZER_DIR [--stream] [--ids] [--stop S]...\n"
                   "  Reads raw model output on stdin (special tokens as their text, e.g. <|tool_call>),\n"
                   "  tokenizes it and runs the chat output parser token by token. Prints\n"
                   "  {\"message\": {...}, \"finish_reason\": \"stop\"|\"tool_calls\"}, or with --stream one\n"
                   "  JSON line per chunk (choices[0] of a chat.completion.chunk).\n"
                   "  --ids     stdin is a JSON array of token ids (e.g. a response's token_ids)\n"
                   "  --stop S  a stop string (repeatable)\n");
            return 0;
        } else {
            return cli_usage_error("parse", "unknown option '%s'", argv[i]);
        }
    }
    if (!model) return cli_usage_error("parse", "-m MODEL_OR_TOKENIZER_DIR is required");
    g4_tokenizer *t;
    g4_status st = g4_tokenizer_load(model, &t);
    if (st) return cli_report(st);
    size_t len;
    char *text = cli_read_stdin(&len);
    if (!text) { g4_tokenizer_free(t); return cli_report(g4_fail(G4_ERR_IO, "stdin: read failed")); }
    int32_t *ids = NULL;
    size_t n = 0;
    if (as_ids) {
        json_error_t je;
        json_t *a = json_loadb(text, len, 0, &je);
        n = json_is_array(a) ? json_array_size(a) : 0;
        ids = malloc((n ? n : 1) * sizeof *ids);
        if (!json_is_array(a)) st = g4_fail(G4_ERR_INPUT, "stdin: expected a JSON array of token ids");
        else if (!ids) st = g4_fail(G4_ERR_NOMEM, "out of memory");
        for (size_t i = 0; !st && i < n; i++) {
            json_t *v = json_array_get(a, i);
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= g4_tokenizer_vocab_size(t))
                st = g4_fail(G4_ERR_INPUT, "stdin: element %zu is not a token id of this tokenizer", i);
            else ids[i] = (int32_t)json_integer_value(v);
        }
        json_decref(a);
    } else {
        st = g4_tokenize(t, text, len, 0, &ids, &n);
    }
    free(text);
    g4_chat_parser *p = NULL;
    if (!st) st = g4_chat_parser_new(t, stop, n_stop, &p);
    if (st) { free(ids); g4_tokenizer_free(t); return cli_report(st); }
    if (stream) print_chunk("{\"role\":\"assistant\",\"content\":\"\"}", NULL);
    int sent = 0, ended = 0;
    for (size_t i = 0; !st && i <= n && !ended; i++) {
        if (i < n) st = g4_chat_parser_push(p, ids[i], &ended);
        if (!st && (i == n || ended)) st = g4_chat_parser_finish(p);
        const int nd = g4_chat_parser_n_deltas(p);
        if (!st && stream && nd > sent) {   /* one chunk per token that made deltas final */
            char *dj = g4_chat_delta_json(p, sent, nd, "call_");
            if (dj) print_chunk(dj, NULL);
            free(dj);
            sent = nd;
        }
    }
    const char *finish = g4_chat_parser_n_calls(p) ? "tool_calls" : "stop";
    if (!st) {
        if (stream) print_chunk("{}", finish);
        else {
            char *mj = g4_chat_message_json(p, "call_");
            if (mj) printf("{\"message\":%s,\"finish_reason\":\"%s\"}\n", mj, finish);
            free(mj);
        }
    }
    g4_chat_parser_free(p);
    free(ids);
    g4_tokenizer_free(t);
    if (st) return cli_report(st);
    return fflush(stdout) ? 1 : 0;
}
