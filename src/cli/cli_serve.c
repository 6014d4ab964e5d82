/* cli_serve.c — `gemma4c serve`: parses the options and hands over to the HTTP server
 * (src/server). Owns nothing but the option table. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "server/server.h"

static void help(FILE *f) {
    fprintf(f, "usage: gemma4c serve -m MODEL [--host 127.0.0.1] [--port 8080] [--parallel 1] [--alias NAME]\n"
               "                     [--max-body BYTES] [--shutdown-grace SECONDS] [--load-delay-ms MS]\n"
               "                     [model options; serve's --ctx defaults to 4096, --prefill-chunk to 64]\n"
               "OpenAI-compatible server (/v1/chat/completions, /v1/completions, /v1/models, /generate,\n"
               "/health, /metrics). --port 0 picks a free port (printed on stderr); a port in use is an\n"
               "error. --load-delay-ms is a testing aid: /health answers 503 (loading) that long first.\n");
    fputs(cli_model_opts_help, f);
}

int cli_serve(int argc, char **argv) {
    g4_server_opts o;
    g4_server_opts_default(&o);
    const char *cmd = "serve";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        int r;
#define NEEDV() do { if (!v) return cli_usage_error(cmd, "%s needs a value", a); i++; } while (0)
#define INTV(lo, hi, dst) do { NEEDV(); if (!cli_parse_int(cmd, a, v, lo, hi, &n)) return 2; dst = (int)n; } while (0)
        if (cli_is_help(a)) { help(stdout); return 0; }
        else if ((r = cli_parse_model_opt(cmd, argc, argv, &i, &o.mo))) { if (r < 0) return 2; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { NEEDV(); o.model_path = v; }
        else if (!strcmp(a, "--host")) { NEEDV(); o.host = v; }
        else if (!strcmp(a, "--alias")) { NEEDV(); o.alias = v; }
        else if (!strcmp(a, "--port")) INTV(0, 65535, o.port);
        else if (!strcmp(a, "--parallel")) INTV(1, 1024, o.parallel);
        else if (!strcmp(a, "--max-body")) { NEEDV(); if (!cli_parse_int(cmd, a, v, 1, 1L << 30, &n)) return 2; o.max_body = (size_t)n; }
        else if (!strcmp(a, "--shutdown-grace")) { int g; INTV(0, 3600, g); o.shutdown_grace_s = g; }
        else if (!strcmp(a, "--load-delay-ms")) INTV(0, 600000, o.load_delay_ms);
        else return cli_usage_error(cmd, "unknown option '%s'", a);
#undef INTV
#undef NEEDV
    }
    if (!o.model_path) return cli_usage_error(cmd, "-m MODEL is required");
    o.mo.n_slots = o.parallel;
    if (o.mo.tp_backend == G4_TP_MPI) {
        /* every MPI rank loads before any serves HTTP: ranks other than 0 only run forward passes */
        int rc = cli_load_model(o.model_path, &o.mo, &o.model);
        if (rc) return rc < 0 ? 0 : rc;
    }
    return g4_server_main(&o);
}
