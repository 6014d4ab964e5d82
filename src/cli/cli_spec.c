/* cli_spec.c — the speculative decoding options of `run`, `chat` and `serve` (--spec, --draft
 * DIR, --draft-max, --spec-ngram-min / -max, --spec-trace): the drafter, the verify rows the
 * model must be loaded with, and the trace file's JSON lines. The loop is the library's (g4_spec,
 * src/generate/speculate.c); the server's is its scheduler's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

const char *const cli_spec_opts_help =
    "speculative decoding (output identical to plain decoding; docs/speculative.md):\n"
    "  --spec ngram|none     draft by n-gram lookup in the prompt and output (default: none)\n"
    "  --draft DIR           draft with Gemma 4's MTP assistant model (an HF directory; with\n"
    "                        --tp N on either backend)\n"
    "  --draft-max K         most drafts a verify round (default: the drafter's: 8 for ngram,\n"
    "                        the assistant's num_assistant_tokens)\n"
    "  --spec-ngram-max N    longest n-gram looked up (default 4); --spec-ngram-min N shortest (1)\n"
    "  --spec-trace FILE     one JSON line per verify round: {\"drafted\":[ids],\"accepted\":n}\n";

enum { NGRAM_MIN_DEFAULT = 1, NGRAM_MAX_DEFAULT = 4, DRAFT_MAX_LIMIT = 64 };

int cli_parse_spec_opt(const char *cmd, int argc, char **argv, int *i, cli_spec *s) {
    const char *a = argv[*i];
    static const char *const opts[] = {"--spec", "--draft-max", "--spec-ngram-min", "--spec-ngram-max", "--spec-trace",
                                       "--draft"};
    int known = 0;
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++) known |= !strcmp(a, opts[k]);
    if (!known) return 0;
    if (*i + 1 >= argc) return cli_usage_error(cmd, "%s needs a value", a), -1;
    const char *v = argv[++*i];
    long n;
    if (!strcmp(a, "--spec")) {
        if (!strcmp(v, "ngram")) s->kind = CLI_SPEC_NGRAM;
        else if (!strcmp(v, "none")) s->kind = CLI_SPEC_NONE;
        else return cli_usage_error(cmd, "--spec expects ngram or none, got '%s'", v), -1;
        return 1;
    }
    if (!strcmp(a, "--draft")) { s->draft_dir = v; return 1; }
    if (!strcmp(a, "--spec-trace")) { s->trace_path = v; return 1; }
    if (!strcmp(a, "--draft-max")) {
        if (!cli_parse_int(cmd, a, v, 1, DRAFT_MAX_LIMIT, &n)) return -1;
        s->draft_max = (int)n;
        return 1;
    }
    if (!cli_parse_int(cmd, a, v, 1, 64, &n)) return -1;
    if (!strcmp(a, "--spec-ngram-min")) s->ngram_min = (int)n;
    else s->ngram_max = (int)n;
    return 1;
}

int cli_spec_prepare(const char *cmd, cli_spec *s, g4_model_opts *mo) {
    if (s->draft_dir) {   /* the MTP drafter: made once the target is loaded (cli_spec_attach) */
        if (s->kind == CLI_SPEC_NGRAM) return cli_usage_error(cmd, "--draft and --spec ngram exclude each other");
        if (s->ngram_min || s->ngram_max)
            return cli_usage_error(cmd, "%s needs --spec ngram", s->ngram_min ? "--spec-ngram-min" : "--spec-ngram-max");
        s->kind = CLI_SPEC_MTP;
        int k = s->draft_max;
        g4_status st = k ? G4_OK : g4_drafter_mtp_default_max(s->draft_dir, &k);
        if (st) return cli_report(st);
        if (k > DRAFT_MAX_LIMIT)
            return cli_usage_error(cmd, "--draft %s: num_assistant_tokens %d is above %d; give --draft-max", s->draft_dir,
                                   k, DRAFT_MAX_LIMIT);
        if (k + 1 > mo->verify_rows) mo->verify_rows = k + 1;
        s->draft_max = k;
        if (s->trace_path && !(s->trace = fopen(s->trace_path, "w")))
            return cli_usage_error(cmd, "--spec-trace %s: cannot open the file for writing", s->trace_path);
        return 0;
    }
    if (s->kind == CLI_SPEC_NONE) {   /* an option of the loop without the loop would be ignored */
        const char *stray = s->draft_max ? "--draft-max" : s->trace_path ? "--spec-trace"
                          : s->ngram_min ? "--spec-ngram-min" : s->ngram_max ? "--spec-ngram-max" : NULL;
        if (stray) return cli_usage_error(cmd, "%s needs --spec ngram or --draft DIR", stray);
        return 0;
    }
    const int lo = s->ngram_min ? s->ngram_min : NGRAM_MIN_DEFAULT;
    const int hi = s->ngram_max ? s->ngram_max : lo > NGRAM_MAX_DEFAULT ? lo : NGRAM_MAX_DEFAULT;
    if (lo > hi) return cli_usage_error(cmd, "--spec-ngram-min %d is larger than --spec-ngram-max %d", lo, hi);
    g4_status st = g4_drafter_ngram_new(lo, hi, &s->drafter);
    if (st) return cli_report(st);
    const int k = s->draft_max ? s->draft_max : g4_drafter_default_max(s->drafter);
    if (k + 1 > mo->verify_rows) mo->verify_rows = k + 1;
    if (s->trace_path && !(s->trace = fopen(s->trace_path, "w")))
        return cli_usage_error(cmd, "--spec-trace %s: cannot open the file for writing", s->trace_path);
    s->params = (g4_spec_params){.drafter = s->drafter, .draft_max = k, .on_round = s->trace ? cli_spec_trace : NULL,
                                 .ctx = s->trace};
    return 0;
}

int cli_spec_attach(cli_spec *s, g4_model *m) {
    if (s->kind != CLI_SPEC_MTP) return 0;
    g4_status st = g4_drafter_mtp_new(s->draft_dir, m, &s->drafter);
    if (st) return cli_report(st);
    s->params = (g4_spec_params){.drafter = s->drafter, .draft_max = s->draft_max,
                                 .on_round = s->trace ? cli_spec_trace : NULL, .ctx = s->trace};
    return 0;
}

void cli_spec_trace(void *ctx, const int32_t *drafted, int n, int accepted) {
    FILE *f = ctx;
    fputs("{\"drafted\":[", f);
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", (int)drafted[i]);
    fprintf(f, "],\"accepted\":%d}\n", accepted);
}

int cli_spec_close(cli_spec *s) {
    int bad = 0;
    if (s->trace) bad = ferror(s->trace) | fclose(s->trace);
    s->trace = NULL;
    g4_drafter_free(s->drafter);
    s->drafter = NULL;
    return bad ? cli_report(g4_fail(G4_ERR_IO, "--spec-trace %s: write failed", s->trace_path)) : 0;
}
