/* cli_run.c — `gemma4c run` (generate from a prompt) and `gemma4c logits` (write the last
 * position's softcapped logits as float32 for golden comparisons), and the generation loop `run`
 * and `chat` share (cli_generate: the model steps around a g4_gen). Greedy decoding takes the
 * argmax of the raw logits, skipping the softcap (it is monotonic). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/cli.h"

typedef struct {
    const char *model;
    const char *prompt_ids;
    const char *prompt;        /* -p TEXT */
    const char *system;        /* --system TEXT (with --chat) */
    const char *out;
    long n_predict;
    int ids_out, ignore_eos, verbose, chat;
    g4_sampler_params sp;
    g4_model_opts mo;
    int chunk_set;             /* --prefill-chunk given: images must fit it */
    long decode_from;          /* logits --decode-from K: 0, else K (>= 1) */
    cli_media md;
    cli_constraint cons;       /* --json-schema / --grammar / --json-object (run only) */
    cli_spec spec;             /* --spec ngram ... (run only) */
} run_opts;

static void usage(const char *cmd) {
    if (!strcmp(cmd, "logits"))
        printf("usage: gemma4c logits -m MODEL (-p TEXT | --prompt-ids 1,2,3) -o FILE [--image FILE ...]\n"
               "                      [model options]\n"
               "                      [--decode-from K]\n"
               "  writes the last position's logits (softcapped, float32 little-endian) to FILE;\n"
               "  --decode-from K: prefills the first K ids, then decodes the rest one at a time\n"
               "  (teacher-forced), writing the logits of every position from K-1 on (n-K+1 rows)\n");
    else
        printf("usage: gemma4c run -m MODEL (-p TEXT | --prompt-ids 1,2,3) [-n 64] [--chat [--system TEXT]]\n"
               "                   [--temp T --top-p P --top-k K --min-p P --seed S] [--ids] [--ignore-eos]\n"
               "                   [--json-schema FILE | --grammar FILE | --json-object]\n"
               "                   [--spec ngram [--draft-max K] [--spec-trace FILE]]\n"
               "                   [--image FILE ...] [-v] [model options]\n"
               "  generates greedily (unless --temp) until an eos id of generation_config.json, -n tokens\n"
               "  or the end of the context; --ids prints the generated ids as one JSON array\n");
    if (strcmp(cmd, "logits")) fputs(cli_constraint_opts_help, stdout);
    if (strcmp(cmd, "logits")) fputs(cli_spec_opts_help, stdout);
    fputs(cli_media_opts_help, stdout);
    fputs(cli_model_opts_help, stdout);
}

int cli_parse_float(const char *cmd, const char *opt, const char *v, float lo, float hi, float *out) {
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

int cli_parse_sampling_opt(const char *cmd, int argc, char **argv, int *i, g4_sampler_params *sp) {
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (strcmp(a, "--temp") && strcmp(a, "--top-p") && strcmp(a, "--min-p") && strcmp(a, "--top-k") && strcmp(a, "--seed"))
        return 0;
    if (!v) return cli_usage_error(cmd, "%s needs a value", a), -1;
    ++*i;
    long n;
    if (!strcmp(a, "--temp")) return cli_parse_float(cmd, a, v, 0, 100, &sp->temperature) ? 1 : -1;
    if (!strcmp(a, "--top-p")) return cli_parse_float(cmd, a, v, 0, 1, &sp->top_p) ? 1 : -1;
    if (!strcmp(a, "--min-p")) return cli_parse_float(cmd, a, v, 0, 1, &sp->min_p) ? 1 : -1;
    if (!strcmp(a, "--top-k")) { if (!cli_parse_int(cmd, a, v, 0, 1 << 24, &n)) return -1; sp->top_k = (int)n; return 1; }
    if (!cli_parse_int(cmd, a, v, 0, 0x7fffffffL, &n)) return -1;
    sp->seed = (uint64_t)n;
    return 1;
}

/* 1 parsed, 0 after reporting a usage error, -1 after printing --help */
static int parse_opts(const char *cmd, int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = 64;
    g4_model_opts_default(&o->mo);
    const int default_chunk = o->mo.prefill_chunk;
    o->mo.prefill_chunk = 0;   /* unset: the default, raised to fit the largest image */
    o->mo.tp = 0;   /* unset: 1, or the mpirun size */
    g4_sampler_params_default(&o->sp);
    o->sp.temperature = 0.0f;   /* the CLI is greedy unless --temp is given */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int r;
        if (cli_is_help(a)) { usage(cmd); return -1; }
        if ((r = cli_parse_model_opt(cmd, argc, argv, &i, &o->mo)) || (r = cli_parse_sampling_opt(cmd, argc, argv, &i, &o->sp)) ||
            (r = cli_parse_media_opt(cmd, argc, argv, &i, &o->md)) ||
            (!strcmp(cmd, "run") && ((r = cli_parse_constraint_opt(cmd, argc, argv, &i, &o->cons)) ||
                                     (r = cli_parse_spec_opt(cmd, argc, argv, &i, &o->spec))))) {
            if (r < 0) return 0;
            continue;
        }
#define NEEDV() do { if (!v) { cli_usage_error(cmd, "%s needs a value", a); return 0; } i++; } while (0)
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) { NEEDV(); o->model = v; }
        else if (!strcmp(a, "--prompt-ids")) { NEEDV(); o->prompt_ids = v; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { NEEDV(); o->prompt = v; }
        else if (!strcmp(a, "--system")) { NEEDV(); o->system = v; }
        else if (!strcmp(a, "--chat")) o->chat = 1;
        else if (!strcmp(a, "-o")) { NEEDV(); o->out = v; }
        else if (!strcmp(cmd, "logits") && !strcmp(a, "--decode-from")) {
            NEEDV();
            if (!cli_parse_int(cmd, a, v, 1, 1 << 24, &o->decode_from)) return 0;
        }
        else if (!strcmp(a, "-n")) { NEEDV(); if (!cli_parse_int(cmd, a, v, 0, 1 << 24, &o->n_predict)) return 0; }
        else if (!strcmp(a, "--ids")) o->ids_out = 1;
        else if (!strcmp(a, "--ignore-eos")) o->ignore_eos = 1;
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) o->verbose = 1;
        else { cli_usage_error(cmd, "unknown option '%s'", a); return 0; }
#undef NEEDV
    }
    if (!o->model) { cli_usage_error(cmd, "-m MODEL is required"); return 0; }
    if (!o->prompt_ids == !o->prompt) { cli_usage_error(cmd, "give exactly one of -p TEXT and --prompt-ids IDS"); return 0; }
    if (o->chat && !o->prompt) { cli_usage_error(cmd, "--chat needs -p TEXT"); return 0; }
    if (cli_media_check(cmd, &o->md)) return 0;
    o->chunk_set = o->mo.prefill_chunk > 0;
    if (!o->chunk_set) o->mo.prefill_chunk = default_chunk;
    return 1;
}

/* The prompt's ids (-p through the tokenizer, or --prompt-ids), the tokenizer where the prompt
 * is text or has images, and with --image the expanded prompt; the images are loaded before the
 * model so that an unset --prefill-chunk can grow to hold the largest one. */
typedef struct {
    int32_t *ids;
    int n;
    g4_tokenizer *tok;
    g4_media_prompt *mp;
} run_prompt;

static void prompt_free(run_prompt *p) {
    free(p->ids);
    g4_tokenizer_free(p->tok);
    g4_media_prompt_free(p->mp);
}

static g4_status text_to_ids(const run_opts *o, const g4_tokenizer *tok, int32_t **ids, int *n);

static g4_status images_before_load(run_opts *o) {
    int max_soft = 0;
    /* the processor settings: the mmproj's beside a GGUF, else the model's own */
    g4_status st = cli_media_load(&o->md, o->mo.mmproj ? o->mo.mmproj : o->model, &max_soft);
    if (!st && !o->chunk_set && max_soft > o->mo.prefill_chunk) o->mo.prefill_chunk = max_soft;
    return st;
}

static g4_status prompt_after_load(const run_opts *o, int need_tok, run_prompt *p) {
    g4_status st = G4_OK;
    if (need_tok || o->prompt || (o->md.n_images || o->md.n_audios)) {   /* text in or out, or images, need the tokenizer */
        if ((st = g4_tokenizer_load(o->model, &p->tok)) == G4_ERR_IO) st = G4_ERR_INPUT;   /* a model dir without one */
        if (!st && o->prompt) st = text_to_ids(o, p->tok, &p->ids, &p->n);
    }
    if (!st && (o->md.n_images || o->md.n_audios)) {
        st = cli_media_prompt(&o->md, p->tok, p->ids, p->n, &p->mp);
        if (!st) g4_media_prompt_ids(p->mp, &p->n);
    }
    return st;
}

static int load(const run_opts *o, g4_model **m) { return cli_load_model(o->model, &o->mo, m); }

int cli_logits(int argc, char **argv) {
    run_opts o;
    int pr = parse_opts("logits", argc, argv, &o);
    if (pr <= 0) return pr < 0 ? 0 : 2;
    if (!o.out) return cli_usage_error("logits", "-o FILE is required");
    if (o.chat) return cli_usage_error("logits", "--chat is not an option of logits");
    run_prompt p = {0};
    if (o.prompt_ids && !parse_ids("logits", o.prompt_ids, &p.ids, &p.n)) return 2;
    g4_status st = images_before_load(&o);
    if (st) { prompt_free(&p); cli_media_free(&o.md); return cli_report(st); }
    g4_model *m;
    int rc = load(&o, &m);
    if (rc) { prompt_free(&p); cli_media_free(&o.md); return rc < 0 ? 0 : rc; }
    const int V = g4_model_get_info(m)->vocab_size;
    float *logits = malloc((size_t)V * sizeof(float));
    st = logits ? prompt_after_load(&o, 0, &p) : g4_fail(G4_ERR_NOMEM, "out of memory");
    if (!st && o.decode_from && (p.mp || o.decode_from > p.n))
        st = g4_fail(G4_ERR_INPUT, "--decode-from %ld needs a text prompt of at least that many ids (it has %d)",
                     o.decode_from, p.n);
    /* --decode-from: the decode path at every later position (what a generated token sees),
     * e.g. to measure a --kv-type deep into the context */
    const int n0 = o.decode_from ? (int)o.decode_from : p.n;
    if (!st) st = p.mp ? g4_prefill_media(m, 0, p.mp, logits) : g4_prefill(m, 0, p.ids, n0, logits);
    FILE *f = NULL;
    if (!st && !(f = fopen(o.out, "wb"))) st = g4_fail(G4_ERR_IO, "%s: cannot write", o.out);
    for (int i = n0; !st; i++) {
        g4_softcap(m, logits, V);
        if (fwrite(logits, sizeof(float), (size_t)V, f) != (size_t)V) st = g4_fail(G4_ERR_IO, "%s: cannot write", o.out);
        if (st || p.mp || i >= p.n) break;
        const int slot = 0;
        st = g4_decode(m, 1, &slot, p.ids + i, logits);
    }
    if (f && fclose(f) && !st) st = g4_fail(G4_ERR_IO, "%s: cannot write", o.out);
    rc = cli_report(st);
    free(logits);
    prompt_free(&p);
    cli_media_free(&o.md);
    g4_model_free(m);
    return rc;
}

/* Renders `messages` (a JSON array of {"role", "content"}) with the chat template and the
 * generation prompt, and encodes it without the tokenizer's special tokens: the Gemma templates
 * write <bos> themselves and a second one would change the model's input. */
g4_status cli_chat_ids(const g4_template *tpl, const g4_tokenizer *tok, json_t *messages, int think, int32_t **ids,
                       int *n) {
    json_t *vars = json_pack("{s:b,s:O}", "add_generation_prompt", 1, "messages", messages);
    /* only when asked: a template without the variable renders as before */
    if (vars && think && json_object_set_new(vars, "enable_thinking", json_true())) { json_decref(vars); vars = NULL; }
    char *js = vars ? json_dumps(vars, JSON_COMPACT) : NULL;
    json_decref(vars);
    if (!js) return g4_fail(G4_ERR_NOMEM, "out of memory");
    char *text = NULL;
    size_t len = 0, nid = 0;
    g4_status st = g4_template_render(tpl, js, strlen(js), &text, &len);
    free(js);
    if (!st) st = g4_tokenize(tok, text, len, 0, ids, &nid);
    free(text);
    if (!st && nid == 0) { free(*ids); return g4_fail(G4_ERR_INPUT, "the prompt encodes to no tokens"); }
    *n = (int)nid;
    return st;
}

/* Turns -p TEXT (optionally through the chat template) into token ids. A plain prompt gets the
 * tokenizer's special tokens (e.g. <bos>); a chat prompt doesn't (cli_chat_ids). */
static g4_status text_to_ids(const run_opts *o, const g4_tokenizer *tok, int32_t **ids, int *n) {
    g4_status st;
    if (o->chat) {
        g4_template *tpl;
        if ((st = g4_template_load(o->model, &tpl))) return st;
        json_t *msgs = json_array();
        if (o->system) json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "system", "content", o->system));
        json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "user", "content", o->prompt));
        st = json_array_size(msgs) == (o->system ? 2u : 1u) ? cli_chat_ids(tpl, tok, msgs, 0, ids, n)
                                                           : g4_fail(G4_ERR_INPUT, "-p / --system: not valid UTF-8");
        json_decref(msgs);
        g4_template_free(tpl);
        return st;
    }
    size_t nid = 0;
    st = g4_tokenize(tok, o->prompt, strlen(o->prompt), 1, ids, &nid);
    if (!st && nid == 0) { free(*ids); return g4_fail(G4_ERR_INPUT, "the prompt encodes to no tokens"); }
    *n = (int)nid;
    return st;
}

static g4_status generate(g4_model *m, int slot, const int32_t *ids, int from, int n, g4_media_prompt *mp, g4_gen *g,
                          int ids_out, cli_gen_out *out);

g4_status cli_generate(g4_model *m, int slot, const int32_t *ids, int n, g4_gen *g, int ids_out, cli_gen_out *out) {
    return generate(m, slot, ids, 0, n, NULL, g, ids_out, out);
}

g4_status cli_generate_from(g4_model *m, int slot, const int32_t *ids, int from, int n, g4_gen *g, cli_gen_out *out) {
    return generate(m, slot, ids, from, n, NULL, g, 0, out);
}

/* Where generated tokens go: printed (text, or ids with ids_out), collected into out. */
typedef struct {
    cli_gen_out *out;
    int ids_out;
    g4_status st;          /* an allocation that failed while collecting */
} emit_ctx;

/* One generated token as g4_gen_accept took it: counted, printed, collected; returns 1 when the
 * generation ends here early (out->on_token said so, or collecting failed: e->st). */
static int emit(void *ctx, int32_t t, g4_finish fin, const char *piece, size_t plen) {
    emit_ctx *e = ctx;
    cli_gen_out *out = e->out;
    int stop = 0;
    out->fin = fin;
    out->n_gen++;
    /* an eos (G4_FIN_STOP) ends the reply and is no part of it */
    if (out->on_token && fin != G4_FIN_STOP && out->on_token(out->ctx, t)) {
        out->fin = G4_FIN_STOP;
        stop = 1;
    }
    if (e->ids_out) printf("%s%d", out->n_gen > 1 ? "," : "", t);
    else if (plen && !out->on_token) fwrite(piece, 1, plen, stdout);
    if (!e->ids_out && plen && out->text) {
        char *nt = realloc(out->text_buf, out->text_len + plen + 1);
        if (!nt) { e->st = g4_fail(G4_ERR_NOMEM, "out of memory"); return 1; }
        memcpy(nt + out->text_len, piece, plen);
        out->text_buf = nt;
        out->text_len += plen;
        nt[out->text_len] = 0;
    }
    if (out->ids) {
        int32_t *ni = realloc(out->id_buf, (size_t)(out->n_gen) * sizeof *ni);
        if (!ni) { e->st = g4_fail(G4_ERR_NOMEM, "out of memory"); return 1; }
        out->id_buf = ni;
        ni[out->n_gen - 1] = t;
    }
    fflush(stdout);
    return stop;
}

/* The speculative loop after the prefill (out->spec): drafts verified in batches of rows. */
static g4_status generate_spec(g4_model *m, int slot, const int32_t *ids, int n, g4_gen *g, float *logits,
                               int32_t next, emit_ctx *e) {
    g4_spec *sp;
    g4_status st = g4_spec_new(m, slot, e->out->spec, &sp);
    g4_finish fin = G4_FIN_NONE;
    if (!st) st = g4_spec_run(sp, g, ids, n, logits, next, emit, e, &fin);
    if (sp) e->out->spec_stats = *g4_spec_get_stats(sp);
    g4_spec_free(sp);
    if (!st && !e->out->fin) e->out->fin = fin;
    return st;
}

g4_status cli_generate_media(g4_model *m, int slot, g4_media_prompt *mp, int from, g4_gen *g, cli_gen_out *out) {
    return generate(m, slot, NULL, from, 0, mp, g, 0, out);
}

/* The prompt ids[0, n) — or with mp (a prompt with images) mp's ids — after the slot's [0, from):
 * the rest prefilled, then the reply generated */
static g4_status generate(g4_model *m, int slot, const int32_t *ids, int from, int n, g4_media_prompt *mp, g4_gen *g,
                          int ids_out, cli_gen_out *out) {
    const int V = g4_model_get_info(m)->vocab_size;
    const int am = g4_gen_argmax_only(g);
    float *logits = am ? NULL : malloc((size_t)V * sizeof(float));
    if (!am && !logits) return g4_fail(G4_ERR_NOMEM, "out of memory");
    int32_t next = 0;
    out->fin = G4_FIN_NONE;
    out->n_gen = 0;
    emit_ctx e = {.out = out, .ids_out = ids_out};
    double t0 = g4_now();
    /* greedy needs only the argmax: with --tp N the ranks never gather the vocabulary */
    int n_mp = 0;
    if (mp) g4_media_prompt_ids(mp, &n_mp);
    g4_status st = mp ? g4_prefill_media_range(m, slot, mp, from, n_mp - from, am ? NULL : logits, am ? &next : NULL)
                 : am ? g4_prefill_argmax(m, slot, ids + from, n - from, &next)
                      : g4_prefill(m, slot, ids + from, n - from, logits);
    out->prefill_s = g4_now() - t0;
    t0 = g4_now();
    if (ids_out) printf("[");
    if (!st && out->spec) {
        if (mp) ids = g4_media_prompt_ids(mp, &n);   /* the ids the slot holds: drafts may copy them */
        st = generate_spec(m, slot, ids, n, g, logits, next, &e);
    }
    while (!st && !out->spec) {
        const int32_t t = g4_gen_next(g, logits, next);
        const char *piece;
        size_t plen;
        const g4_finish fin = g4_gen_accept(g, t, &piece, &plen);
        const int stop = emit(&e, t, fin, piece, plen);
        if (e.st || fin || stop) break;
        int32_t tt = t;
        st = am ? g4_decode_argmax(m, 1, &slot, &tt, &next) : g4_decode(m, 1, &slot, &tt, logits);
    }
    if (!st) st = e.st;
    if (ids_out || !out->on_token) printf(ids_out ? "]\n" : "\n");
    out->decode_s = g4_now() - t0;
    free(logits);
    return st;
}

int cli_run(int argc, char **argv) {
    run_opts o;
    int pr = parse_opts("run", argc, argv, &o);
    if (pr <= 0) return pr < 0 ? 0 : 2;
    run_prompt p = {0};
    if (o.prompt_ids && !parse_ids("run", o.prompt_ids, &p.ids, &p.n)) return 2;
    int rc = cli_spec_prepare("run", &o.spec, &o.mo);
    if (rc) { cli_spec_close(&o.spec); prompt_free(&p); return rc; }
    g4_status st = images_before_load(&o);
    if (st) { cli_spec_close(&o.spec); prompt_free(&p); cli_media_free(&o.md); return cli_report(st); }
    g4_model *m;
    double t0 = g4_now();
    rc = load(&o, &m);
    if (rc) { cli_spec_close(&o.spec); prompt_free(&p); cli_media_free(&o.md); return rc < 0 ? 0 : rc; }
    if ((rc = cli_spec_attach(&o.spec, m))) {
        cli_spec_close(&o.spec);
        prompt_free(&p);
        cli_media_free(&o.md);
        g4_model_free(m);
        return rc;
    }
    if ((st = prompt_after_load(&o, !o.ids_out || o.cons.kind, &p))) {
        cli_spec_close(&o.spec);
        prompt_free(&p);
        cli_media_free(&o.md);
        g4_model_free(m);
        return cli_report(st);
    }
    const int n = p.n;
    const g4_model_info *info = g4_model_get_info(m);
    g4_gen_config cfg = {0};
    g4_gen *g = NULL;
    g4_gen_params gp;
    g4_gen_params_default(&gp);
    gp.sp = o.sp;
    gp.max_tokens = (int)o.n_predict;
    gp.ignore_eos = o.ignore_eos;
    gp.text = !o.ids_out;
    cli_gen_out out = {.spec = o.spec.drafter ? &o.spec.params : NULL};
    double t1 = g4_now();
    st = g4_gen_config_load(o.model, info, &cfg);
    if (!st) st = cli_constraint_build(&o.cons, p.tok, &cfg);
    gp.constraint = o.cons.matcher;
    if (!st) st = g4_gen_new(m, 0, p.tok, &cfg, &gp, &g);
    if (!st && o.n_predict > 0) st = generate(m, 0, p.ids, 0, p.n, p.mp, g, o.ids_out, &out);
    else if (!st) printf(o.ids_out ? "[]\n" : "\n");
    if (!st && out.fin == G4_FIN_LENGTH && g4_gen_hit_context(g))
        fprintf(stderr, "gemma4c run: stopped at the context limit (--ctx %d)\n", info->ctx);
    if (o.verbose)
        fprintf(stderr, "load %.3f s; prefill %d tokens %.3f s (%.1f tok/s); decode %d tokens %.3f s (%.2f tok/s)\n",
                t1 - t0, n, out.prefill_s, n / out.prefill_s, out.n_gen > 1 ? out.n_gen - 1 : 0, out.decode_s,
                out.n_gen > 1 ? (out.n_gen - 1) / out.decode_s : 0.0);
    if (o.verbose && out.spec) {
        const g4_spec_stats *ss = &out.spec_stats;
        fprintf(stderr, "speculative: %ld verify rounds, %ld plain steps; drafted %ld, accepted %ld (%.1f%%); "
                "%.2f tokens a step\n", ss->rounds, ss->plain_steps, ss->drafted, ss->accepted,
                ss->drafted ? 100.0 * ss->accepted / ss->drafted : 0.0,
                ss->rounds + ss->plain_steps ? (double)(out.n_gen > 1 ? out.n_gen - 1 : 0) / (ss->rounds + ss->plain_steps) : 0.0);
    }
    rc = cli_report(st);
    const int rc_spec = cli_spec_close(&o.spec);
    if (!rc) rc = rc_spec;
    g4_gen_free(g);
    cli_constraint_free(&o.cons);
    g4_gen_config_free(&cfg);
    prompt_free(&p);
    cli_media_free(&o.md);
    g4_model_free(m);
    return rc;
}
