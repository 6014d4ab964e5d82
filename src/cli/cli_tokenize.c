/* cli_tokenize.c — `gemma4c tokenize` and `gemma4c detokenize` (placeholder until the tokenizer lands). */
#include "cli/cli.h"
int cli_tokenize(int argc, char **argv) { (void)argc; (void)argv; return cli_usage_error("tokenize", "not implemented yet"); }
int cli_detokenize(int argc, char **argv) { (void)argc; (void)argv; return cli_usage_error("detokenize", "not implemented yet"); }
