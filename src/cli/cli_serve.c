/* cli_serve.c — `gemma4c serve`: parses the options and hands over to the HTTP server
 * (src/server). Owns nothing but the option table. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "server/server.h"

static void help(FILE *f) {
    fprintf(f, "usage: gemma4c serve -m MODEL [--host 127.0.0.1] [--port 8080] [--parallel 1] [--alias NAME]\n"
               "                     [--max-body BYTES] [--shutdown-grace SECONDS] [--load-delay-ms MS]\n"
               "                     [--api-key KEY]... [--api-key-file FILE] [--auth-all] [--max-queue 256]\n"
               "                     [--max-render-mb 256] [--max-renders 2] [--cache-ram 8192] [--media-dir DIR]\n"
               "                     [--max-media-per-request 8] [--max-soft-tokens N] [--soft-tokens-cap N]\n"
               "                     [--max-image-pixels N] [--allow-remote-media]\n"
               "                     [--remote-media-max-bytes 20971520] [--remote-media-timeout 10]\n"
               "                     [--timeout 60] [--max-connections 1000]\n"
               "                     [--max-connections-per-ip 0] [--queue-timeout 0] [--cors-origin ORIGIN]...\n"
               "                     [--max-messages 10000] [--max-tools 128] [--no-special-in-content]\n"
               "                     [--max-audio-seconds 30] [--exit-on-tp-loss] [--spec ngram | --draft DIR] [--draft-max K]\n"
               "                     [model options; serve's --ctx defaults to 4096, --prefill-chunk to 64]\n"
               "OpenAI-compatible server (/v1/chat/completions, /v1/completions, /v1/models, /generate,\n"
               "/health, /metrics). --port 0 picks a free port (printed on stderr); a port in use is an\n"
               "error. --load-delay-ms is a testing aid: /health answers 503 (loading) that long first.\n"
               "--api-key KEY (repeatable), --api-key-file FILE (one key a line) and the environment\n"
               "variable G4_API_KEY give the keys clients must send as 'Authorization: Bearer KEY'\n"
               "(401 otherwise); /health and /metrics stay open unless --auth-all. --host :: listens on\n"
               "IPv6 and IPv4. Past --max-queue waiting requests (0: no cap) new ones get 429. A chat\n"
               "template renders within --max-render-mb of memory (413 past it), --max-renders at once.\n"
               "Slots keep their KV between requests and a prompt continues from the longest prefix\n"
               "computed before; --cache-ram MB bounds the host snapshots that make deep and cross-slot\n"
               "reuse possible (0: no reuse at all).\n"
               "--spec ngram: every request decodes speculatively with n-gram drafts (same output; the\n"
               "decoding slots verify together in one step; docs/speculative.md); --draft-max K drafts a\n"
               "round (default 8), --spec-ngram-min / --spec-ngram-max as for run. --draft DIR: the same\n"
               "with Gemma 4's MTP assistant model (an HF directory; default K its num_assistant_tokens;\n"
               "with --tp N on either backend). A request's \"speculative\": {\"n_max\": K, \"n_min\": M} takes at most K\n"
               "(<= --draft-max; 0: none) and skips rounds of fewer than M drafts.\n"
               "A request's headers and body must arrive within --timeout seconds (also the idle limit).\n"
               "Past --max-connections the oldest connection still sending its request is closed;\n"
               "--max-connections-per-ip caps one client address (0: no cap). A request that waits\n"
               "--queue-timeout seconds for a slot gets 503 with Retry-After (0: it waits). --cors-origin\n"
               "(repeatable, or '*') lets browser pages from those origins call the API.\n"
               "--no-special-in-content: special-token text in messages and tools (e.g. '<turn|>') is\n"
               "tokenized as plain text, not as control tokens (default: as the reference tokenizes it).\n"
               "Under --tp-backend mpi a rank that answers no collective within --tp-timeout makes every\n"
               "request and /health a 503; --exit-on-tp-loss exits (status 1, ending the job) instead.\n"
               "Chat messages take image_url parts (data: URLs, or files under --media-dir) and input_audio\n"
               "parts (docs/server.md). --max-soft-tokens N: soft tokens per image unless a request's\n"
               "mm_processor_kwargs.max_soft_tokens says; --soft-tokens-cap N: the most a request may ask\n"
               "(default: --max-soft-tokens; the prefill chunk is raised to hold an image this large).\n"
               "--allow-remote-media: image_url parts may also name http(s) URLs, which the server fetches\n"
               "(at most --remote-media-max-bytes, within --remote-media-timeout seconds; refused by\n"
               "default). The server then fetches any URL a client names, loopback and internal addresses\n"
               "included: enable it only for trusted clients or behind --api-key.\n");
    fputs(cli_model_opts_help, f);
}

enum { MAX_API_KEYS = 64, MAX_CORS = 64 };

/* Adds one key (copied; leading/trailing blanks and a trailing newline dropped). */
static int add_key(const char *cmd, g4_server_opts *o, char **keys, const char *k, size_t n) {
    while (n && (k[n - 1] == '\n' || k[n - 1] == '\r' || k[n - 1] == ' ' || k[n - 1] == '\t')) n--;
    while (n && (*k == ' ' || *k == '\t')) k++, n--;
    if (!n) return 1;   /* blank lines of a key file */
    if (o->n_api_keys == MAX_API_KEYS) return cli_usage_error(cmd, "more than %d API keys", MAX_API_KEYS), 0;
    char *c = strndup(k, n);
    if (!c) return cli_usage_error(cmd, "out of memory"), 0;
    keys[o->n_api_keys++] = c;
    return 1;
}

static int add_key_file(const char *cmd, g4_server_opts *o, char **keys, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return cli_usage_error(cmd, "--api-key-file %s: cannot open", path), 0;
    char line[4096];
    int ok = 1, before = o->n_api_keys;
    while (ok && fgets(line, sizeof line, f)) ok = line[0] == '#' || add_key(cmd, o, keys, line, strlen(line));
    fclose(f);
    if (ok && o->n_api_keys == before) return cli_usage_error(cmd, "--api-key-file %s: no key in it", path), 0;
    return ok;
}

int cli_serve(int argc, char **argv) {
    static char *keys[MAX_API_KEYS];
    static const char *cors[MAX_CORS];
    g4_server_opts o;
    g4_server_opts_default(&o);
    cli_spec spec = {0};
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
        else if ((r = cli_parse_spec_opt(cmd, argc, argv, &i, &spec))) { if (r < 0) return 2; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { NEEDV(); o.model_path = v; }
        else if (!strcmp(a, "--host")) { NEEDV(); o.host = v; }
        else if (!strcmp(a, "--alias")) { NEEDV(); o.alias = v; }
        else if (!strcmp(a, "--port")) INTV(0, 65535, o.port);
        else if (!strcmp(a, "--parallel")) INTV(1, 1024, o.parallel);
        else if (!strcmp(a, "--max-body")) { NEEDV(); if (!cli_parse_int(cmd, a, v, 1, 1L << 30, &n)) return 2; o.max_body = (size_t)n; }
        else if (!strcmp(a, "--shutdown-grace")) { int g; INTV(0, 3600, g); o.shutdown_grace_s = g; }
        else if (!strcmp(a, "--load-delay-ms")) INTV(0, 600000, o.load_delay_ms);
        else if (!strcmp(a, "--api-key")) {
            NEEDV();
            if (!*v) return cli_usage_error(cmd, "--api-key needs a non-empty key");
            if (!add_key(cmd, &o, keys, v, strlen(v))) return 2;
        }
        else if (!strcmp(a, "--api-key-file")) { NEEDV(); if (!add_key_file(cmd, &o, keys, v)) return 2; }
        else if (!strcmp(a, "--auth-all")) o.auth_all = 1;
        else if (!strcmp(a, "--no-special-in-content")) o.no_special_in_content = 1;
        else if (!strcmp(a, "--exit-on-tp-loss")) o.exit_on_tp_loss = 1;
        else if (!strcmp(a, "--max-queue")) INTV(0, 1 << 20, o.max_queue);
        else if (!strcmp(a, "--max-render-mb")) INTV(1, 1 << 20, o.max_render_mb);
        else if (!strcmp(a, "--max-renders")) INTV(1, 1024, o.max_renders);
        else if (!strcmp(a, "--cache-ram")) INTV(0, 1 << 24, o.cache_ram_mb);
        else if (!strcmp(a, "--media-dir")) {
            static char media_dir[PATH_MAX];
            NEEDV();
            if (!realpath(v, media_dir)) return cli_usage_error(cmd, "--media-dir %s: no such directory", v);
            o.media_dir = media_dir;
        }
        else if (!strcmp(a, "--max-media-per-request")) INTV(0, 1024, o.max_media);
        else if (!strcmp(a, "--max-audio-seconds")) {
            float sec;
            NEEDV();
            if (!cli_parse_float(cmd, a, v, 0.001f, 86400, &sec)) return 2;
            o.max_audio_seconds = sec;
        }
        else if (!strcmp(a, "--allow-remote-media")) o.allow_remote_media = 1;
        else if (!strcmp(a, "--remote-media-max-bytes")) {
            NEEDV();
            if (!cli_parse_int(cmd, a, v, 1, 1L << 32, &n)) return 2;
            o.remote_media_max_bytes = (size_t)n;
        }
        else if (!strcmp(a, "--remote-media-timeout")) INTV(1, 3600, o.remote_media_timeout_s);
        else if (!strcmp(a, "--max-image-pixels")) { NEEDV(); if (!cli_parse_int(cmd, a, v, 1, 1L << 40, &n)) return 2; o.max_image_pixels = n; }
        else if (!strcmp(a, "--max-soft-tokens") || !strcmp(a, "--soft-tokens-cap")) {
            int *dst = !strcmp(a, "--max-soft-tokens") ? &o.max_soft_tokens : &o.soft_tokens_cap;
            INTV(70, 1120, *dst);
            if (n != 70 && n != 140 && n != 280 && n != 560 && n != 1120)
                return cli_usage_error(cmd, "%s expects 70, 140, 280, 560 or 1120, got %ld", a, n);
        }
        else if (!strcmp(a, "--timeout")) INTV(1, 86400, o.timeout_s);
        else if (!strcmp(a, "--max-connections")) INTV(1, 1 << 20, o.max_connections);
        else if (!strcmp(a, "--max-connections-per-ip")) INTV(0, 1 << 20, o.max_conn_per_ip);
        else if (!strcmp(a, "--queue-timeout")) INTV(0, 86400, o.queue_timeout_s);
        else if (!strcmp(a, "--max-messages")) INTV(0, 1 << 24, o.max_messages);
        else if (!strcmp(a, "--max-tools")) INTV(0, 1 << 20, o.max_tools);
        else if (!strcmp(a, "--cors-origin")) {
            NEEDV();
            if (!*v) return cli_usage_error(cmd, "--cors-origin needs an origin (scheme://host[:port]) or '*'");
            if (o.n_cors == MAX_CORS) return cli_usage_error(cmd, "more than %d --cors-origin values", MAX_CORS);
            cors[o.n_cors++] = v;
        }
        else return cli_usage_error(cmd, "unknown option '%s'", a);
#undef INTV
#undef NEEDV
    }
    if (!o.model_path) return cli_usage_error(cmd, "-m MODEL is required");
    const char *env_key = getenv("G4_API_KEY");
    if (env_key && *env_key && !add_key(cmd, &o, keys, env_key, strlen(env_key))) return 2;
    o.api_keys = keys;
    o.cors = cors;
    if (o.auth_all && !o.n_api_keys) return cli_usage_error(cmd, "--auth-all needs an API key");
    o.mo.n_slots = o.parallel;
    if (spec.trace_path) return cli_usage_error(cmd, "--spec-trace is an option of run, not of serve");
    int rc = cli_spec_prepare(cmd, &spec, &o.mo);
    if (rc) { cli_spec_close(&spec); return rc; }
    if (spec.drafter || spec.draft_dir) {   /* every decoding slot may verify its drafts in the same step */
        o.drafter = spec.drafter;           /* ngram; the MTP drafter is made once the model is loaded */
        o.draft_dir = spec.draft_dir;
        o.draft_max = spec.draft_max ? spec.draft_max : spec.params.draft_max;
        o.mo.verify_rows = o.parallel * (o.draft_max + 1);
    }
    if (o.mo.tp_backend == G4_TP_MPI) {
        /* every MPI rank loads before any serves HTTP: ranks other than 0 only run forward passes */
        rc = cli_load_model(o.model_path, &o.mo, &o.model);
        if (rc) { cli_spec_close(&spec); return rc < 0 ? 0 : rc; }
    }
    rc = g4_server_main(&o);
    cli_spec_close(&spec);
    return rc;
}
