/* cli_run.c — `gemma4c run` (generate from a prompt) and `gemma4c logits` (write the last
 * position's softcapped logits as float32 for golden comparisons). Greedy decoding takes the
 * argmax of the raw logits, skipping the softcap (it is monotonic). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "base/clock.h"

typedef struct {
    const char *model;
    const char *prompt_ids;
    const char *prompt;        /* -p TEXT */
    const char *system;        /* --system TEXT (with --chat) */
    const char *out;
    long n_predict, threads, ctx, chunk, tp;
    int tp_backend, no_mmap, act_q8, numerics, prefill_bf16;
    int ids_out, ignore_eos, verbose, chat;
    g4_sampler_params sp;
} run_opts;

static int parse_float(const char *cmd, const char *opt, const char *v, float lo, float hi, float *out) {
    char *end;
    double d = v ? strtod(v, &end) : 0;
    if (!v || !*v || *end || !(d >= lo && d <= hi))
        return cli_usage_error(cmd, "%s expects a number in [%g, %g], got '%s'", opt, lo, hi, v ? v : ""), 0;
    *out = (float)d;
    return 1;
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
    g4_model_opts lib;
    g4_model_opts_default(&lib);
    o->chunk = lib.prefill_chunk;
    o->tp = 0;   /* unset: 1, or the mpirun size */
    g4_sampler_params_default(&o->sp);
    o->sp.temperature = 0.0f;   /* the CLI is greedy unless --temp is given */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDV() do { if (!v) { cli_usage_error(cmd, "%s needs a value", a); return 0; } i++; } while (0)
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) { NEEDV(); o->model = v; }
        else if (!strcmp(a, "--prompt-ids")) { NEEDV(); o->prompt_ids = v; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { NEEDV(); o->prompt = v; }
        else if (!strcmp(a, "--system")) { NEEDV(); o->system = v; }
        else if (!strcmp(a, "--chat")) o->chat = 1;
        else if (!strcmp(a, "--temp")) { NEEDV(); if (!parse_float(cmd, a, v, 0, 100, &o->sp.temperature)) return 0; }
        else if (!strcmp(a, "--top-p")) { NEEDV(); if (!parse_float(cmd, a, v, 0, 1, &o->sp.top_p)) return 0; }
        else if (!strcmp(a, "--min-p")) { NEEDV(); if (!parse_float(cmd, a, v, 0, 1, &o->sp.min_p)) return 0; }
        else if (!strcmp(a, "--top-k")) { long k; NEEDV(); if (!cli_parse_int(cmd, a, v, 0, 1 << 24, &k)) return 0; o->sp.top_k = (int)k; }
        else if (!strcmp(a, "--seed")) { long sd; NEEDV(); if (!cli_parse_int(cmd, a, v, 0, 0x7fffffffL, &sd)) return 0; o->sp.seed = (uint64_t)sd; }
        else if (!strcmp(a, "-o")) { NEEDV(); o->out = v; }
        else if (!strcmp(a, "-n")) { NEEDV(); if (!cli_parse_int(cmd, a, v, 0, 1 << 24, &o->n_predict)) return 0; }
        else if (!strcmp(a, "--threads")) { NEEDV(); if (!cli_parse_int(cmd, a, v, 0, 4096, &o->threads)) return 0; }
        else if (!strcmp(a, "--ctx")) { NEEDV(); if (!cli_parse_int(cmd, a, v, 1, 1 << 24, &o->ctx)) return 0; }
        else if (!strcmp(a, "--prefill-chunk")) { NEEDV(); if (!cli_parse_int(cmd, a, v, 1, 1 << 16, &o->chunk)) return 0; }
        else if (!strcmp(a, "--tp")) { NEEDV(); if (!cli_parse_int(cmd, a, v, 1, 64, &o->tp)) return 0; }
        else if (!strcmp(a, "--tp-backend")) { NEEDV(); if (!cli_parse_tp_backend(cmd, v, &o->tp_backend)) return 0; }
        else if (!strcmp(a, "--ids")) o->ids_out = 1;
        else if (!strcmp(a, "--no-mmap")) o->no_mmap = 1;
        else if (!strcmp(a, "--mmap")) o->no_mmap = -1;
        else if (!strcmp(a, "--act-q8")) o->act_q8 = 1;
        else if (!strcmp(a, "--prefill-bf16")) o->prefill_bf16 = 1;
        else if (!strcmp(a, "--numerics")) { NEEDV(); if (!cli_parse_numerics(cmd, v, &o->numerics)) return 0; }
        else if (!strcmp(a, "--ignore-eos")) o->ignore_eos = 1;
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) o->verbose = 1;
        else { cli_usage_error(cmd, "unknown option '%s'", a); return 0; }
#undef NEEDV
    }
    if (!o->model) { cli_usage_error(cmd, "-m MODEL is required"); return 0; }
    if (!o->prompt_ids == !o->prompt) { cli_usage_error(cmd, "give exactly one of -p TEXT and --prompt-ids IDS"); return 0; }
    if (o->chat && !o->prompt) { cli_usage_error(cmd, "--chat needs -p TEXT"); return 0; }
    return 1;
}

static int load(const run_opts *o, g4_model **m) {
    g4_model_opts mo;
    g4_model_opts_default(&mo);
    mo.threads = (int)o->threads;
    mo.ctx = (int)o->ctx;
    mo.prefill_chunk = (int)o->chunk;
    mo.tp = (int)o->tp;
    mo.tp_backend = o->tp_backend;
    mo.no_mmap = o->no_mmap;
    mo.act_q8 = o->act_q8;
    mo.numerics = o->numerics;
    mo.prefill_bf16 = o->prefill_bf16;
    return cli_load_model(o->model, &mo, m);
}

int cli_logits(int argc, char **argv) {
    run_opts o;
    if (!parse_opts("logits", argc, argv, &o)) return 2;
    if (!o.out) return cli_usage_error("logits", "-o FILE is required");
    if (!o.prompt_ids) return cli_usage_error("logits", "--prompt-ids is required");
    int32_t *ids;
    int n;
    if (!parse_ids("logits", o.prompt_ids, &ids, &n)) return 2;
    g4_model *m;
    int rc = load(&o, &m);
    if (rc) { free(ids); return rc < 0 ? 0 : rc; }
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

/* Turns -p TEXT (optionally through the chat template) into token ids. A plain prompt gets the
 * tokenizer's special tokens (e.g. <bos>); a chat prompt doesn't, because the Gemma templates
 * write <bos> themselves and a second one would change the model's input. */
static g4_status text_to_ids(const run_opts *o, const g4_tokenizer *tok, int32_t **ids, int *n) {
    char *text = NULL;
    size_t len = 0;
    g4_status st = G4_OK;
    if (o->chat) {
        g4_template *tpl;
        if ((st = g4_template_load(o->model, &tpl))) return st;
        /* build {"messages": [...], "add_generation_prompt": true} with JSON-escaped strings */
        size_t cap = 256 + 6 * (strlen(o->prompt) + (o->system ? strlen(o->system) : 0));
        char *js = malloc(cap), *w = js;
        if (!js) { g4_template_free(tpl); return g4_fail(G4_ERR_NOMEM, "out of memory"); }
        const char *roles[2] = {"system", "user"}, *texts[2] = {o->system, o->prompt};
        w += sprintf(w, "{\"add_generation_prompt\": true, \"messages\": [");
        for (int i = 0, k = 0; i < 2; i++) {
            if (!texts[i]) continue;
            w += sprintf(w, "%s{\"role\": \"%s\", \"content\": \"", k++ ? ", " : "", roles[i]);
            for (const unsigned char *c = (const unsigned char *)texts[i]; *c; c++) {
                if (*c == '"' || *c == '\\') { *w++ = '\\'; *w++ = (char)*c; }
                else if (*c < 0x20) w += sprintf(w, "\\u%04x", *c);
                else *w++ = (char)*c;
            }
            w += sprintf(w, "\"}");
        }
        w += sprintf(w, "]}");
        st = g4_template_render(tpl, js, (size_t)(w - js), &text, &len);
        free(js);
        g4_template_free(tpl);
        if (st) return st;
    }
    size_t nid = 0;
    st = o->chat ? g4_tokenize(tok, text, len, 0, ids, &nid)
                 : g4_tokenize(tok, o->prompt, strlen(o->prompt), 1, ids, &nid);
    free(text);
    if (!st && nid == 0) { free(*ids); return g4_fail(G4_ERR_INPUT, "the prompt encodes to no tokens"); }
    *n = (int)nid;
    return st;
}

int cli_run(int argc, char **argv) {
    run_opts o;
    if (!parse_opts("run", argc, argv, &o)) return 2;
    int32_t *ids = NULL;
    int n = 0;
    g4_tokenizer *tok = NULL;
    g4_status st = G4_OK;
    if (o.prompt_ids) {
        if (!parse_ids("run", o.prompt_ids, &ids, &n)) return 2;
    }
    g4_model *m;
    double t0 = g4_now();
    int rc = load(&o, &m);
    if (rc) { free(ids); return rc < 0 ? 0 : rc; }
    if (!o.ids_out || o.prompt) {   /* text in or text out needs the model's tokenizer */
        if ((st = g4_tokenizer_load(o.model, &tok)) == G4_ERR_IO) st = G4_ERR_INPUT;   /* a model dir without one */
        if (!st && o.prompt) st = text_to_ids(&o, tok, &ids, &n);
        if (st) { g4_tokenizer_free(tok); g4_model_free(m); free(ids); return cli_report(st); }
    }
    const g4_model_info *info = g4_model_get_info(m);
    const int V = info->vocab_size;
    g4_sampler *smp = NULL;
    g4_detok_stream *ds = tok && !o.ids_out ? g4_detok_stream_new(tok, 1) : NULL;
    char *piece = NULL;
    size_t plen = 0;
    double t1 = g4_now();
    float *logits = malloc((size_t)V * sizeof(float));
    if (!logits) st = g4_fail(G4_ERR_NOMEM, "out of memory");
    if (!st) st = g4_sampler_new(&o.sp, V, info->final_logit_softcap, &smp);
    /* greedy needs only the argmax: with --tp N the ranks never gather the vocabulary */
    const int greedy = o.sp.temperature == 0 && o.sp.frequency_penalty == 0 && o.sp.presence_penalty == 0;
    int32_t next = 0;
    if (!st) st = greedy ? g4_prefill_argmax(m, 0, ids, n, &next) : g4_prefill(m, 0, ids, n, logits);
    double t2 = g4_now();
    int n_gen = 0;
    if (o.ids_out) printf("[");
    while (!st && n_gen < o.n_predict) {
        int32_t t = greedy ? next : g4_sampler_sample(smp, logits);
        n_gen++;
        int stop = !o.ignore_eos && t == info->eos_id;
        if (o.ids_out) printf("%s%d", n_gen > 1 ? "," : "", t);
        else if (!stop && ds && !(st = g4_detok_stream_push(ds, t, &piece, (plen = 0, &plen))) && plen) fwrite(piece, 1, plen, stdout);
        fflush(stdout);
        if (stop || n_gen == o.n_predict || st) break;
        int slot = 0;
        st = greedy ? g4_decode_argmax(m, 1, &slot, &t, &next) : g4_decode(m, 1, &slot, &t, logits);
    }
    if (ds && !st && !(st = g4_detok_stream_finish(ds, &piece, (plen = 0, &plen))) && plen) fwrite(piece, 1, plen, stdout);
    printf(o.ids_out ? "]\n" : "\n");
    double t3 = g4_now();
    if (o.verbose)
        fprintf(stderr, "load %.3f s; prefill %d tokens %.3f s (%.1f tok/s); decode %d tokens %.3f s (%.2f tok/s)\n",
                t1 - t0, n, t2 - t1, n / (t2 - t1), n_gen > 1 ? n_gen - 1 : 0, t3 - t2,
                n_gen > 1 ? (n_gen - 1) / (t3 - t2) : 0.0);
    rc = cli_report(st);
    free(piece);
    g4_detok_stream_free(ds);
    g4_sampler_free(smp);
    free(logits);
    free(ids);
    g4_tokenizer_free(tok);
    g4_model_free(m);
    return rc;
}
