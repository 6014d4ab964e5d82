/* main.c — the gemma4c command-line entry point: dispatches to one subcommand per file
 * (cli_run.c, cli_tokenize.c, ...). Owns nothing but the dispatch table, the top-level help and
 * --version (G4_COMMIT: the git commit, which the Makefile passes to this file alone). */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"run", cli_run, "generate text or token ids from a prompt"},
    {"logits", cli_logits, "write the last position's logits (float32) for a prompt"},
    {"tokenize", cli_tokenize, "UTF-8 text on stdin -> JSON array of token ids"},
    {"detokenize", cli_detokenize, "JSON array of token ids on stdin -> text"},
    {"template", cli_template, "render the chat template for a JSON conversation on stdin"},
    {"serve", cli_serve, "OpenAI-compatible HTTP server"},
    {"bench", cli_bench, "measure the machine's roofline and the model's prefill/decode speed"},
    {"pack", cli_pack, "pack an HF checkpoint into one .g4c file split per --tp rank (optionally quantized)"},
    {"parse", cli_parse, "raw model output on stdin -> the chat message (reasoning, content, tool calls)"},
    {"chat", cli_chat, "interactive multi-turn chat with the model's chat template (stdin -> stdout)"},
    {"image", cli_image, "an image through the image processor (and with -m the vision embedder)"},
    {"grammar", cli_grammar, "walk text on stdin through a JSON Schema / GBNF grammar's token masks"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: gemma4c COMMAND [options]   (gemma4c COMMAND --help for its options)\n"
               "       gemma4c --version\n\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return 2; }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
#ifdef G4_COMMIT
        printf("gemma4c %s (%s)\n", G4_VERSION, G4_COMMIT);
#else
        printf("gemma4c %s\n", G4_VERSION);
#endif
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "gemma4c: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
