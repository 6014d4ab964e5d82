/* cli_run.c — `gemma4c run` and `gemma4c logits` (placeholder until the forward pass lands). */
#include "cli/cli.h"
int cli_run(int argc, char **argv) { (void)argc; (void)argv; return cli_usage_error("run", "not implemented yet"); }
int cli_logits(int argc, char **argv) { (void)argc; (void)argv; return cli_usage_error("logits", "not implemented yet"); }
