/* cli_template.c — `gemma4c template` (placeholder until the Jinja interpreter lands). */
#include "cli/cli.h"
int cli_template(int argc, char **argv) { (void)argc; (void)argv; return cli_usage_error("template", "not implemented yet"); }
