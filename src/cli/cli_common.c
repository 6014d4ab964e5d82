/* cli_common.c — helpers shared by the subcommands: error reporting with the exit-code policy
 * (2 = bad input, 1 = runtime failure), integer option parsing, reading stdin. */
#include "cli/cli.h"

#include <errno.h>
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

char *cli_read_stdin(size_t *len) {
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
        size_t r = fread(buf + n, 1, cap - n - 1, stdin);
        n += r;
        if (r == 0) break;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}
