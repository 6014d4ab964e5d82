/* cli_serve.c — `gemma4c serve`: parses the options and hands over to the HTTP server
 * (src/server). Owns nothing but the option table. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "server/server.h"

static void help(FILE *f) {
    fprintf(f, "usage: gemma4c serve -m MODEL [--host 127.0.0.1] [--port 8080] [--ctx 4096] [--parallel 1]\n"
               "                     [--threads N] [--prefill-chunk 64] [--alias NAME] [--max-body BYTES]\n"
               "                     [--shutdown-grace SECONDS] [--tp N] [--tp-backend threads|mpi] [--no-mmap | --mmap]\n"
               "                     [--act-q8] [--numerics exact|ggml] [--prefill-bf16]\n"
               "OpenAI-compatible server (/v1/chat/completions, /v1/completions, /v1/models, /generate,\n"
               "/health, /metrics). --port 0 picks a free port (printed on stderr).\n");
}

int cli_serve(int argc, char **argv) {
    g4_server_opts o;
    g4_server_opts_default(&o);
    const char *cmd = "serve";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
#define NEEDV() do { if (!v) return cli_usage_error(cmd, "%s needs a value", a); i++; } while (0)
#define INTV(lo, hi, dst) do { NEEDV(); if (!cli_parse_int(cmd, a, v, lo, hi, &n)) return 2; dst = (int)n; } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { help(stdout); return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { NEEDV(); o.model_path = v; }
        else if (!strcmp(a, "--host")) { NEEDV(); o.host = v; }
        else if (!strcmp(a, "--alias")) { NEEDV(); o.alias = v; }
        else if (!strcmp(a, "--port")) INTV(0, 65535, o.port);
        else if (!strcmp(a, "--ctx")) INTV(1, 1 << 24, o.ctx);
        else if (!strcmp(a, "--parallel")) INTV(1, 1024, o.parallel);
        else if (!strcmp(a, "--threads")) INTV(0, 4096, o.threads);
        else if (!strcmp(a, "--prefill-chunk")) INTV(1, 1 << 16, o.prefill_chunk);
        else if (!strcmp(a, "--max-body")) { NEEDV(); if (!cli_parse_int(cmd, a, v, 1, 1L << 30, &n)) return 2; o.max_body = (size_t)n; }
        else if (!strcmp(a, "--shutdown-grace")) { int g; INTV(0, 3600, g); o.shutdown_grace_s = g; }
        else if (!strcmp(a, "--tp")) INTV(1, 64, o.tp);
        else if (!strcmp(a, "--no-mmap")) o.no_mmap = 1;
        else if (!strcmp(a, "--mmap")) o.no_mmap = -1;
        else if (!strcmp(a, "--act-q8")) o.act_q8 = 1;
        else if (!strcmp(a, "--prefill-bf16")) o.prefill_bf16 = 1;
        else if (!strcmp(a, "--numerics")) { NEEDV(); if (!cli_parse_numerics(cmd, v, &o.numerics)) return 2; }
        else if (!strcmp(a, "--tp-backend")) { NEEDV(); if (!cli_parse_tp_backend(cmd, v, &o.tp_backend)) return 2; }
        else return cli_usage_error(cmd, "unknown option '%s'", a);
#undef INTV
#undef NEEDV
    }
    if (!o.model_path) return cli_usage_error(cmd, "-m MODEL is required");
    if (o.tp_backend == G4_TP_MPI) {
        /* every MPI rank loads before any serves HTTP: ranks other than 0 only run forward passes */
        g4_model_opts mo;
        g4_model_opts_default(&mo);
        mo.threads = o.threads;
        mo.ctx = o.ctx;
        mo.n_slots = o.parallel;
        mo.prefill_chunk = o.prefill_chunk;
        mo.tp = o.tp;
        mo.tp_backend = o.tp_backend;
        mo.no_mmap = o.no_mmap;
        mo.act_q8 = o.act_q8;
        mo.numerics = o.numerics;
        mo.prefill_bf16 = o.prefill_bf16;
        int rc = cli_load_model(o.model_path, &mo, &o.model);
        if (rc) return rc < 0 ? 0 : rc;
    }
    return g4_server_main(&o);
}
