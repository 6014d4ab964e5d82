/* cli_serve.c — `gemma4c serve` (placeholder until the server lands). */
#include "cli/cli.h"
int cli_serve(int argc, char **argv) { (void)argc; (void)argv; return cli_usage_error("serve", "not implemented yet"); }
