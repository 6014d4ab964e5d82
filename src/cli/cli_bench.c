/* cli_bench.c — `gemma4c bench` (placeholder until the kernels issue lands). */
#include "cli/cli.h"
int cli_bench(int argc, char **argv) { (void)argc; (void)argv; return cli_usage_error("bench", "not implemented yet"); }
