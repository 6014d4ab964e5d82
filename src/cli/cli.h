/* cli.h — what the subcommand files of the gemma4c CLI share: the entry points the dispatcher
 * in main.c calls and small helpers for option parsing and error exits. */
#ifndef G4_CLI_H
#define G4_CLI_H

#include "gemma4c.h"

/* Each subcommand gets argv starting at its own name; returns the process exit code
 * (0 ok, 1 runtime failure, 2 bad usage or bad input). */
int cli_run(int argc, char **argv);
int cli_logits(int argc, char **argv);
int cli_tokenize(int argc, char **argv);
int cli_detokenize(int argc, char **argv);
int cli_template(int argc, char **argv);
int cli_serve(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_pack(int argc, char **argv);

/* Prints "gemma4c: <g4_last_error()>" to stderr and returns the exit code for `st`. */
int cli_report(g4_status st);
/* Prints "gemma4c <cmd>: <message>" to stderr and returns 2 (bad usage). */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses a decimal int option value in [lo, hi]; on failure reports and returns 0. */
int cli_parse_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);
/* Parses --tp-backend's value: "threads" or "mpi". */
int cli_parse_tp_backend(const char *cmd, const char *v, int *out);
/* Parses --numerics' value: "exact" (G4_NUMERICS_EXACT) or "ggml" (G4_NUMERICS_GGML). */
int cli_parse_numerics(const char *cmd, const char *v, int *out);
/* g4_model_load for a subcommand. On an MPI rank other than 0 it serves rank 0 (g4_model_work)
 * until rank 0 is done, frees the model and returns -1: the subcommand then exits with 0 without
 * printing anything. Otherwise returns the exit code of the load (0 with *m set). */
int cli_load_model(const char *path, const g4_model_opts *mo, g4_model **m);

/* Reads all of stdin into a malloc'ed NUL-terminated buffer. */
char *cli_read_stdin(size_t *len);

#endif
