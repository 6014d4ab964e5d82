/* cli_run.c — `gemma4c run` (generate from a prompt) and `gemma4c logits` (write the last
 * position's softcapped logits as float32 for golden comparisons). Greedy decoding takes the
 * argmax of the raw logits, skipping the softcap (it is monotonic). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"

typedef struct {
    const char *model;
    const char *prompt_ids;
    const char *out;
    long n_predict, threads, ctx, chunk, tp;
    int ids_out, ignore_eos, verbose;
} run_opts;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Parses "1,2,3" into a malloc'ed array. */
static int parse_ids(const char *cmd, const char *s, int32_t **out, int *n) {
    int cap = 16, k = 0;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    const char *p = s;
    while (ids && *p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > 0x7fffffff || (*end && *end != ',')) {
            free(ids);
            return cli_usage_error(cmd, "--prompt-ids expects comma-separated non-negative integers, got '%s'", s), 0;
        }
        if (k == cap) {
            int32_t *ni = realloc(ids, (size_t)(cap *= 2) * sizeof *ids);
            if (!ni) break;
            ids = ni;
        }
        ids[k++] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    if (!ids) return cli_usage_error(cmd, "out of memory"), 0;
    if (k == 0) { free(ids); return cli_usage_error(cmd, "--prompt-ids is empty"), 0; }
    *out = ids;
    *n = k;
    return 1;
}

static int parse_opts(const char *cmd, int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = 64;
    o->ctx = 4096;
    o->chunk = 64;
    o->tp = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDV() do { if (!v) { cli_usage_error(cmd, "%s needs a value", a); return 0; } i++; } while (0)
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) { NEEDV(); o->model = v; }
        else if (!strcmp(a, "--prompt-ids")) { NEEDV(); o->prompt_ids = v; }
        else if (!strcmp(a, "-o")) { NEEDV(); o->out = v; }
        else if (!strcmp(a, "-n")) { NEEDV(); if (!cli_parse_int(cmd, a, v, 0, 1 << 24, &o->n_predict)) return 0; }
        else if (!strcmp(a, "--threads")) { NEEDV(); if (!cli_parse_int(cmd, a, v, 0, 4096, &o->threads)) return 0; }
        else if (!strcmp(a, "--ctx")) { NEEDV(); if (!cli_parse_int(cmd, a, v, 1, 1 << 24, &o->ctx)) return 0; }
        else if (!strcmp(a, "--prefill-chunk")) { NEEDV(); if (!cli_parse_int(cmd, a, v, 1, 1 << 16, &o->chunk)) return 0; }
        else if (!strcmp(a, "--tp")) { NEEDV(); if (!cli_parse_int(cmd, a, v, 1, 1024, &o->tp)) return 0; }
        else if (!strcmp(a, "--ids")) o->ids_out = 1;
        else if (!strcmp(a, "--ignore-eos")) o->ignore_eos = 1;
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) o->verbose = 1;
        else { cli_usage_error(cmd, "unknown option '%s'", a); return 0; }
#undef NEEDV
    }
    if (!o->model) { cli_usage_error(cmd, "-m MODEL is required"); return 0; }
    if (!o->prompt_ids) { cli_usage_error(cmd, "--prompt-ids is required"); return 0; }
    if (o->tp != 1) { cli_usage_error(cmd, "--tp %ld: tensor parallelism is not available yet", o->tp); return 0; }
    return 1;
}

static int load(const run_opts *o, g4_model **m) {
    g4_model_opts mo;
    g4_model_opts_default(&mo);
    mo.threads = (int)o->threads;
    mo.ctx = (int)o->ctx;
    mo.prefill_chunk = (int)o->chunk;
    return cli_report(g4_model_load(o->model, &mo, m));
}

int cli_logits(int argc, char **argv) {
    run_opts o;
    if (!parse_opts("logits", argc, argv, &o)) return 2;
    if (!o.out) return cli_usage_error("logits", "-o FILE is required");
    int32_t *ids;
    int n;
    if (!parse_ids("logits", o.prompt_ids, &ids, &n)) return 2;
    g4_model *m;
    int rc = load(&o, &m);
    if (rc) { free(ids); return rc; }
    const int V = g4_model_get_info(m)->vocab_size;
    float *logits = malloc((size_t)V * sizeof(float));
    g4_status st = logits ? g4_prefill(m, 0, ids, n, logits) : g4_fail(G4_ERR_NOMEM, "out of memory");
    if (!st) {
        g4_softcap(m, logits, V);
        FILE *f = fopen(o.out, "wb");
        if (!f || fwrite(logits, sizeof(float), (size_t)V, f) != (size_t)V)
            st = g4_fail(G4_ERR_IO, "%s: cannot write", o.out);
        if (f && fclose(f) && !st) st = g4_fail(G4_ERR_IO, "%s: cannot write", o.out);
    }
    rc = cli_report(st);
    free(logits);
    free(ids);
    g4_model_free(m);
    return rc;
}

int cli_run(int argc, char **argv) {
    run_opts o;
    if (!parse_opts("run", argc, argv, &o)) return 2;
    int32_t *ids;
    int n;
    if (!parse_ids("run", o.prompt_ids, &ids, &n)) return 2;
    g4_model *m;
    double t0 = now_s();
    int rc = load(&o, &m);
    if (rc) { free(ids); return rc; }
    const g4_model_info *info = g4_model_get_info(m);
    const int V = info->vocab_size;
    double t1 = now_s();
    float *logits = malloc((size_t)V * sizeof(float));
    g4_status st = logits ? g4_prefill(m, 0, ids, n, logits) : g4_fail(G4_ERR_NOMEM, "out of memory");
    double t2 = now_s();
    int n_gen = 0;
    if (o.ids_out) printf("[");
    while (!st && n_gen < o.n_predict) {
        int32_t tok = g4_argmax(logits, V);
        if (o.ids_out) printf("%s%d", n_gen ? "," : "", tok);
        else printf("%d ", tok);
        fflush(stdout);
        n_gen++;
        if (!o.ignore_eos && tok == info->eos_id) break;
        if (n_gen == o.n_predict) break;
        int slot = 0;
        st = g4_decode(m, 1, &slot, &tok, logits);
    }
    printf(o.ids_out ? "]\n" : "\n");
    double t3 = now_s();
    if (o.verbose)
        fprintf(stderr, "load %.3f s; prefill %d tokens %.3f s (%.1f tok/s); decode %d tokens %.3f s (%.2f tok/s)\n",
                t1 - t0, n, t2 - t1, n / (t2 - t1), n_gen > 1 ? n_gen - 1 : 0, t3 - t2,
                n_gen > 1 ? (n_gen - 1) / (t3 - t2) : 0.0);
    rc = cli_report(st);
    free(logits);
    free(ids);
    g4_model_free(m);
    return rc;
}
