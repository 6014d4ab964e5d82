/* cli_common.c — helpers shared by the subcommands: error reporting with the exit-code policy
 * (2 = bad input, 1 = runtime failure), integer option parsing, reading stdin. */
#include "cli/cli.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int cli_report(g4_status st) {
    if (st == G4_OK) return 0;
    fprintf(stderr, "gemma4c: %s\n", g4_last_error());
    return (st == G4_ERR_INPUT || st == G4_ERR_CONTEXT) ? 2 : 1;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "gemma4c %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 2;
}

int cli_parse_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < lo || v > hi) {
        cli_usage_error(cmd, "%s expects an integer in [%ld, %ld], got '%s'", opt, lo, hi,
                        s ? s : "(missing)");
        return 0;
    }
    *out = v;
    return 1;
}

int cli_parse_tp_backend(const char *cmd, const char *v, int *out) {
    if (v && !strcmp(v, "threads")) *out = G4_TP_THREADS;
    else if (v && !strcmp(v, "mpi")) *out = G4_TP_MPI;
    else return cli_usage_error(cmd, "--tp-backend expects 'threads' or 'mpi', got '%s'", v ? v : "(missing)"), 0;
    return 1;
}

int cli_parse_numerics(const char *cmd, const char *v, int *out) {
    if (v && !strcmp(v, "exact")) *out = G4_NUMERICS_EXACT;
    else if (v && !strcmp(v, "ggml")) *out = G4_NUMERICS_GGML;
    else return cli_usage_error(cmd, "--numerics expects 'exact' or 'ggml', got '%s'", v ? v : "(missing)"), 0;
    return 1;
}

int cli_load_model(const char *path, const g4_model_opts *mo, g4_model **m) {
    *m = NULL;
    g4_status st = g4_model_load(path, mo, m);
    if (st) return cli_report(st);
    if (mo->prefill_bf16 && g4_model_rank(*m) == 0 && !g4_model_bf16_units(*m))
        fprintf(stderr, "gemma4c: note: --prefill-bf16 on kernel path '%s' (no AVX512-BF16 / AMX-BF16): the same "
                        "bf16-rounded products through the fp32 kernels, no faster than exact\n", g4_model_kernel_path(*m));
    if (g4_model_rank(*m) == 0) return 0;
    /* mpirun forwards SIGTERM/SIGINT to every rank: workers leave when rank 0, which handles the
     * signal (e.g. the server draining its requests), sends the stop message */
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    st = g4_model_work(*m);   /* an MPI worker rank: run forward passes until rank 0 frees */
    if (st && g4_model_group_lost(*m)) {
        /* Rank 0 decides what a lost group means (a server answers 503 until it is stopped, then
         * ends the job): wait to be ended with the job rather than end it from here. */
        fprintf(stderr, "gemma4c: rank %d: waiting for rank 0 to end the job\n", g4_model_rank(*m));
        for (;;) pause();
    }
    g4_model_free(*m);
    *m = NULL;
    return st ? cli_report(st) : -1;
}

/* The whole stream, NUL-terminated; NULL on a read error or out of memory. */
static char *read_stream(FILE *f, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    for (;;) {
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); return NULL; }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
    }
    if (ferror(f)) { free(buf); return NULL; }
    buf[n] = 0;
    *len = n;
    return buf;
}

char *cli_read_stdin(size_t *len) { return read_stream(stdin, len); }

char *cli_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = read_stream(f, len);
    fclose(f);
    return buf;
}
