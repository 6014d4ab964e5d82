/* cli_chat.c — `gemma4c chat`: an interactive multi-turn conversation (as llama-cli's
 * conversation mode). Each line on stdin is a user turn; the whole conversation goes through the
 * model's chat template, the slot's KV is reused for the longest prefix a fresh prefill would
 * compute the same (g4_slot_rewind / a snapshot), and the reply streams through the shared
 * generation loop (cli_generate) and the chat output parser (src/chat): content to stdout,
 * reasoning to stderr on request, tool calls as JSON lines. `/image PATH` and `/audio PATH` (or
 * --image / --audio for the first turn) put media before the next turn's text; the conversation's
 * media stay in its prompt, which is then expanded and prefilled as `run --image` does
 * (g4_media_prompt). Owns the REPL only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

static void usage(void) {
    printf("usage: gemma4c chat -m MODEL [--system TEXT] [-n N] [--temp T --top-p P --top-k K --min-p P --seed S]\n"
           "                    [--think] [--show-reasoning] [-v] [--image FILE] [--audio FILE] [media options]\n"
           "                    [--spec ngram | --draft DIR] [--draft-max K] [--spec-trace FILE]\n"
           "                    [model options]\n"
           "  reads one user turn per line on stdin (prompt \"> \" on stderr at a terminal) and streams\n"
           "  each reply to stdout, one line per reply; the conversation goes through the model's chat\n"
           "  template. -n: most tokens per reply (default: until an eos id or the context end).\n"
           "  --think: the template's enable_thinking on; --show-reasoning: the model's thoughts on\n"
           "  stderr (\"[reasoning] \" lines; dimmed at a terminal); tool calls print as JSON lines.\n"
           "  /reset clears the conversation (the --system message stays); /exit or end of input quits.\n"
           "  /image PATH, /audio PATH: an image or sound file before the next line's text (repeatable;\n"
           "  --image / --audio FILE: before the first line's). They stay in the conversation; at most\n"
           "  --max-media-per-request of them (default 8) until /reset.\n"
           "  -v: each turn's prompt length and how much of it the slot's KV supplied, on stderr.\n");
    fputs(cli_spec_opts_help, stdout);
    fputs(cli_media_opts_help, stdout);
    fputs(cli_model_opts_help, stdout);
}

/* ids at a prompt's end that the next turn's rendering may change (the generation prompt) */
enum { GEN_PROMPT_SLACK = 16 };

typedef struct {
    g4_model *m;
    const g4_tokenizer *tok;
    const g4_template *tpl;
    const g4_gen_config *cfg;
    g4_gen_params gp;
    int verbose, think, show_reasoning, chunk;
    const g4_spec_params *spec;   /* --spec ngram / --draft DIR: replies decode speculatively */
    int32_t *held;   /* the ids the slot holds, in order [n_held] */
    int n_held, cap_held;
    /* held[0, exact) were computed as a fresh prefill computes them: whole prefill chunks from
     * position 0. Only they are reused, since a kernel's rounding may depend on how many rows it
     * runs (docs/server.md, prompt cache); decoded tokens and partial chunks are recomputed. */
    int exact;
    g4_kv_snap *snap;   /* the slot at a chunk boundary <= exact, for a rewind past the rings */
    /* where a fresh prefill of the held prompt ends its steps (ascending, the last its length):
     * with images a step ends before an image a chunk would cut, so not at multiples of chunk */
    int *bounds, n_bounds;
    /* the conversation's media, in prompt order per kind; the last `pending_*` of them go before
     * the next turn's text */
    const cli_media *md;
    g4_image_opts io;
    g4_audio_opts ao;
    g4_image **images;
    int n_images, pending_images;
    g4_audio **audios;
    int n_audios, pending_audios;
    json_t *pending;   /* their {"type": "image"} / {"type": "audio"} parts, in order */
    /* the reply being printed */
    g4_chat_parser *parser;
    int n_shown;        /* deltas printed */
    int in_reasoning;   /* a "[reasoning] " line is open on stderr */
} chat_state;

static void forget_slot(chat_state *c) {
    g4_slot_reset(c->m, 0);
    c->n_held = c->exact = c->n_bounds = 0;
    g4_kv_snap_free(c->snap);
    c->snap = NULL;
}

/* Drops the last n images and k audio clips of the conversation. */
static void drop_media(chat_state *c, int n, int k) {
    while (n-- > 0) g4_image_free(c->images[--c->n_images]);
    while (k-- > 0) g4_audio_free(c->audios[--c->n_audios]);
}

static void reset(chat_state *c, json_t *msgs, const char *system) {
    json_array_clear(msgs);
    if (system) json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "system", "content", system));
    forget_slot(c);
    drop_media(c, c->n_images, c->n_audios);
    c->pending_images = c->pending_audios = 0;
    json_array_clear(c->pending);
}

/* `/image PATH` or `/audio PATH`: the file decoded now (a bad one is refused here, the session goes
 * on) and queued before the next turn's text. */
static g4_status add_media(chat_state *c, int image, const char *path) {
    const int max = c->md->max_media_set ? c->md->max_media : CLI_MEDIA_DEFAULT_MAX;
    if (c->n_images + c->n_audios >= max)
        return g4_fail(G4_ERR_INPUT, "%s: the conversation holds %d images and audio clips already "
                       "(--max-media-per-request %d; /reset starts over)", path, c->n_images + c->n_audios, max);
    if (image ? !g4_model_has_vision(c->m) : !g4_model_has_audio(c->m))
        return g4_fail(G4_ERR_INPUT, "%s: this model takes no %s (no %s embedder)", path, image ? "images" : "audio",
                       image ? "vision" : "audio");
    void **arr = image ? (void **)&c->images : (void **)&c->audios;
    const int n = image ? c->n_images : c->n_audios;
    void *grown = realloc(*arr, (size_t)(n + 1) * sizeof(void *));
    if (!grown) return g4_fail(G4_ERR_NOMEM, "out of memory");
    *arr = grown;
    g4_status st;
    if (image) {
        g4_image *im;
        if ((st = g4_image_load(path, &c->io, &im))) return st;
        if (im->n_patches > c->chunk) {   /* an image is prefilled in one step */
            const int np = im->n_patches;
            g4_image_free(im);
            return g4_fail(G4_ERR_INPUT, "%s: %d soft tokens, more than a prefill chunk of %d (--prefill-chunk, or a "
                           "smaller --max-soft-tokens)", path, np, c->chunk);
        }
        c->images[c->n_images++] = im;
        c->pending_images++;
    } else {
        g4_audio *a;
        if ((st = g4_audio_load(path, &c->ao, &a))) return st;
        c->audios[c->n_audios++] = a;
        c->pending_audios++;
    }
    json_array_append_new(c->pending, json_pack("{s:s}", "type", image ? "image" : "audio"));
    return G4_OK;
}

/* The steps of a fresh prefill of ids[0, n) (mp: with its media) at the model's chunk: their ends
 * into *b (malloc'ed), as media_prompt.c's prefill cuts them. */
static g4_status fresh_bounds(const chat_state *c, const g4_media_prompt *mp, int n, int **b, int *nb) {
    if (!(*b = malloc(((size_t)n / (size_t)c->chunk + 2 + (size_t)(c->n_images)) * sizeof **b)))
        return g4_fail(G4_ERR_NOMEM, "out of memory");
    *nb = 0;
    for (int at = 0; at < n;) {
        int r = n - at < c->chunk ? n - at : c->chunk;
        if (mp && (r = g4_media_prompt_cut(mp, at, r)) <= 0) {   /* add_media keeps images within a chunk */
            free(*b);
            return g4_fail(G4_ERR_INPUT, "an image of the conversation is longer than a prefill chunk");
        }
        (*b)[(*nb)++] = at += r;
    }
    return G4_OK;
}

static g4_status hold(chat_state *c, const int32_t *ids, int n) {
    if (c->n_held + n > c->cap_held) {
        int nc = c->cap_held ? c->cap_held : 256;
        while (nc < c->n_held + n) nc *= 2;
        int32_t *nh = realloc(c->held, (size_t)nc * sizeof *nh);
        if (!nh) return g4_fail(G4_ERR_NOMEM, "out of memory");
        c->held = nh;
        c->cap_held = nc;
    }
    memcpy(c->held + c->n_held, ids, (size_t)n * sizeof *ids);
    c->n_held += n;
    return G4_OK;
}

/* Sets the slot back to the longest prefix of ids[0, n) it can reuse exactly and returns its
 * length: the common prefix with what it holds, cut to its exact rows and to a step end that a
 * fresh prefill of both prompts shares (bounds: the new prompt's), short of the last id (whose
 * logits start the reply). Within the sliding rings' reach a rewind; further back the snapshot,
 * where it lies inside that prefix; else an empty slot. The same steps over the same ids and
 * media compute the same rows. */
static int reuse_prefix(chat_state *c, const int32_t *ids, int n, const int *bounds, int n_bounds, const char **how) {
    int lcp = 0;
    while (lcp < c->n_held && lcp < n && ids[lcp] == c->held[lcp]) lcp++;
    int limit = lcp < c->exact ? lcp : c->exact;
    if (limit > n - 1) limit = n - 1;
    int want = 0;
    for (int k = 0; k < n_bounds && k < c->n_bounds && bounds[k] == c->bounds[k] && bounds[k] <= limit; k++) want = bounds[k];
    const int pos = g4_slot_pos(c->m, 0);
    int from = 0;
    *how = "";
    if (want > 0 && want >= g4_kv_rewind_floor(c->m, pos) && !g4_slot_rewind(c->m, 0, want)) from = want, *how = " (rewind)";
    else if (want > 0 && c->snap && g4_kv_snap_pos(c->snap) <= want && !g4_slot_restore(c->m, 0, c->snap))
        from = g4_kv_snap_pos(c->snap), *how = " (snapshot)";
    if (!from) forget_slot(c);
    if (c->snap && g4_kv_snap_pos(c->snap) > from) {   /* rows it does not hold will be rewritten */
        g4_kv_snap_free(c->snap);
        c->snap = NULL;
    }
    c->n_held = c->exact = from;
    return from;
}

static void end_reasoning_line(chat_state *c) {
    if (!c->in_reasoning) return;
    fputs(isatty(2) ? "\033[0m\n" : "\n", stderr);
    c->in_reasoning = 0;
}

/* Prints the parser's new deltas: content to stdout, reasoning to stderr with --show-reasoning,
 * each tool call as one JSON line {"tool_call": {"name", "arguments"}} on stdout. */
static void show_deltas(chat_state *c) {
    for (; c->n_shown < g4_chat_parser_n_deltas(c->parser); c->n_shown++) {
        const g4_chat_delta *d = g4_chat_parser_delta(c->parser, c->n_shown);
        if (d->kind == G4_DELTA_REASONING) {
            if (!c->show_reasoning || !d->len) continue;
            if (!c->in_reasoning) fputs(isatty(2) ? "\033[2m[reasoning] " : "[reasoning] ", stderr);
            c->in_reasoning = 1;
            fwrite(d->text, 1, d->len, stderr);
            fflush(stderr);
            continue;
        }
        end_reasoning_line(c);
        if (d->kind == G4_DELTA_CONTENT) {
            fwrite(d->text, 1, d->len, stdout);
        } else {
            json_t *args = json_loadb(d->text, d->len, 0, NULL);
            json_t *call = json_pack("{s:{s:s,s:o}}", "tool_call", "name", d->name, "arguments",
                                     args ? args : json_stringn_nocheck(d->text, d->len));
            char *line = call ? json_dumps(call, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
            printf("%s\n", line ? line : "{\"tool_call\": null}");
            free(line);
            json_decref(call);
        }
        fflush(stdout);
    }
}

static int on_token(void *ctx, int32_t id) {
    chat_state *c = ctx;
    int ended = 0;
    if (g4_chat_parser_push(c->parser, id, &ended)) return 1;
    show_deltas(c);
    return ended;   /* a <|tool_response>: the model waits for a tool's answer */
}

/* The assistant's message as the parser read it, for the conversation's next rendering. */
static g4_status append_reply(chat_state *c, json_t *msgs) {
    char *js = g4_chat_message_json(c->parser, "call_");
    /* a byte token <0x00> of a weak model is a NUL in the text, "\u0000" in the JSON */
    json_t *msg = js ? json_loads(js, JSON_ALLOW_NUL, NULL) : NULL;
    free(js);
    if (!msg || json_array_append_new(msgs, msg)) return g4_fail(G4_ERR_NOMEM, "out of memory");
    return G4_OK;
}

/* One turn: the conversation (ending with the user's message) -> the reply, streamed to stdout
 * and appended to msgs as the assistant's message. */
static g4_status turn(chat_state *c, json_t *msgs) {
    int32_t *tids = NULL, *bounds = NULL;
    const int32_t *ids;
    int n = 0, n_bounds = 0;
    g4_media_prompt *mp = NULL;
    double t0 = g4_now();
    g4_status st = cli_chat_ids(c->tpl, c->tok, msgs, c->think, &tids, &n);
    if (st) return st;
    ids = tids;
    if (c->n_images + c->n_audios) {   /* the conversation's media, each for its placeholder */
        if ((st = g4_media_prompt_new_av(c->tok, tids, n, c->images, c->n_images, c->audios, c->n_audios, &mp))) {
            free(tids);
            return st;
        }
        ids = g4_media_prompt_ids(mp, &n);
    }
    if ((st = fresh_bounds(c, mp, n, &bounds, &n_bounds))) {
        g4_media_prompt_free(mp);
        free(tids);
        return st;
    }
    const char *how;
    const int from = reuse_prefix(c, ids, n, bounds, n_bounds, &how);
    /* the prompt up to a step end before its generation prompt, then a snapshot there: the next
     * turn's rendering parts from this prompt a few ids before its end (Gemma 4's template drops
     * the empty thought channel of the generation prompt), maybe beyond the rings' reach once the
     * reply is long. The same steps as one prefill of [from, n). */
    int b = from;
    for (int k = 0; k < n_bounds; k++)
        if (bounds[k] > b && bounds[k] <= n - 1 - GEN_PROMPT_SLACK) b = bounds[k];
    if (b > from) {
        st = mp ? g4_prefill_media_range(c->m, 0, mp, from, b - from, NULL, NULL)
                : g4_prefill(c->m, 0, ids + from, b - from, NULL);
        if (!st && g4_kv_snap_supported(c->m)) {
            g4_kv_snap_free(c->snap);
            c->snap = NULL;
            if (g4_slot_save(c->m, 0, 0, &c->snap)) c->snap = NULL;   /* without it: a longer prefill later */
        }
    }
    g4_gen *g = NULL;
    cli_gen_out out = {.ids = 1, .on_token = on_token, .ctx = c, .spec = c->spec};
    c->n_shown = c->in_reasoning = 0;
    if (!st) st = g4_chat_parser_new(c->tok, NULL, 0, &c->parser);
    if (!st) st = g4_gen_new(c->m, 0, c->tok, c->cfg, &c->gp, &g);
    const double t_gen = g4_now();
    if (!st) st = mp ? cli_generate_media(c->m, 0, mp, b, g, &out) : cli_generate_from(c->m, 0, ids, b, n, g, &out);
    if (!st) st = g4_chat_parser_finish(c->parser);
    if (c->parser) show_deltas(c);
    end_reasoning_line(c);
    printf("\n");
    fflush(stdout);
    if (c->verbose)
        fprintf(stderr, "gemma4c chat: prompt %d tokens, %d of them reused from the slot%s; first token after %.3f s\n",
                n, from, how, t_gen - t0 + out.prefill_s);
    if (c->verbose && c->spec)
        fprintf(stderr, "gemma4c chat: speculative: %ld verify rounds, %ld plain steps; drafted %ld, accepted %ld\n",
                out.spec_stats.rounds, out.spec_stats.plain_steps, out.spec_stats.drafted, out.spec_stats.accepted);
    if (!st) st = hold(c, ids + from, n - from);
    if (!st) {   /* every row of the prompt was computed by the steps of a fresh prefill */
        c->exact = n;
        free(c->bounds);
        c->bounds = bounds;
        c->n_bounds = n_bounds;
        bounds = NULL;
    }
    /* the slot holds every generated token but the last (cli_generate feeds it none) */
    if (!st && out.n_gen > 1) st = hold(c, out.id_buf, out.n_gen - 1);
    if (!st && out.fin == G4_FIN_LENGTH && g4_gen_hit_context(g))
        fprintf(stderr, "gemma4c chat: stopped at the context limit (--ctx %d); /reset to start over\n",
                g4_model_get_info(c->m)->ctx);
    if (!st) st = append_reply(c, msgs);
    if (st) forget_slot(c);   /* the slot's contents are unknown after a failed step */
    g4_chat_parser_free(c->parser);
    c->parser = NULL;
    g4_gen_free(g);
    free(out.text_buf);
    free(out.id_buf);
    free(bounds);
    g4_media_prompt_free(mp);
    free(tids);
    return st;
}

int cli_chat(int argc, char **argv) {
    const char *cmd = "chat", *model = NULL, *system = NULL;
    long n_predict = 0;
    chat_state c = {0};
    cli_media md = {0};
    cli_spec spec = {0};
    g4_model_opts mo;
    g4_model_opts_default(&mo);
    const int default_chunk = mo.prefill_chunk;
    mo.prefill_chunk = 0;   /* unset: the default, raised to hold an image */
    mo.tp = 0;   /* unset: 1, or the mpirun size */
    g4_gen_params_default(&c.gp);
    c.gp.sp.temperature = 0.0f;   /* greedy unless --temp, as `run` */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int r;
        if (cli_is_help(a)) { usage(); return 0; }
        if ((r = cli_parse_model_opt(cmd, argc, argv, &i, &mo)) || (r = cli_parse_sampling_opt(cmd, argc, argv, &i, &c.gp.sp)) ||
            (r = cli_parse_media_opt(cmd, argc, argv, &i, &md)) || (r = cli_parse_spec_opt(cmd, argc, argv, &i, &spec))) {
            if (r < 0) return 2;
            continue;
        }
        if (!strcmp(a, "-m") || !strcmp(a, "--model") || !strcmp(a, "--system") || !strcmp(a, "-n")) {
            if (!v) return cli_usage_error(cmd, "%s needs a value", a);
            i++;
        }
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--system")) system = v;
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) c.verbose = 1;
        else if (!strcmp(a, "--think")) c.think = 1;
        else if (!strcmp(a, "--show-reasoning")) c.show_reasoning = 1;
        else if (!strcmp(a, "-n")) { if (!cli_parse_int(cmd, a, v, 0, 1 << 24, &n_predict)) return 2; }
        else return cli_usage_error(cmd, "unknown option '%s' (see gemma4c chat --help)", a);
    }
    if (!model) return cli_usage_error(cmd, "-m MODEL is required");
    if (cli_media_check(cmd, &md)) return 2;
    c.gp.max_tokens = (int)n_predict;   /* 0: until an eos id or the context end */
    /* the processor settings: the mmproj's beside a GGUF, else the model's own */
    const char *media_src = mo.mmproj ? mo.mmproj : model;
    g4_status st = g4_image_opts_load(media_src, &c.io);
    if (!st) st = g4_audio_opts_load(media_src, &c.ao);
    if (st) return cli_report(st);
    if (md.max_soft_tokens) c.io.max_soft_tokens = md.max_soft_tokens;
    if (md.max_pixels) c.io.max_pixels = md.max_pixels;
    if (md.max_audio_seconds > 0) c.ao.max_seconds = md.max_audio_seconds;
    c.md = &md;
    if (!mo.prefill_chunk) {   /* unset: a step holds a whole image, as serve sizes it */
        mo.prefill_chunk = default_chunk;
        if (cli_model_has_vision(model, mo.mmproj) && c.io.max_soft_tokens > mo.prefill_chunk)
            mo.prefill_chunk = c.io.max_soft_tokens;
    }

    int rc = cli_spec_prepare(cmd, &spec, &mo);
    if (!rc) rc = cli_load_model(model, &mo, &c.m);
    c.chunk = mo.prefill_chunk;   /* the prefill's chunk: the unit of exact reuse */
    if (!rc && (rc = cli_spec_attach(&spec, c.m))) g4_model_free(c.m);
    if (rc) { cli_spec_close(&spec); return rc < 0 ? 0 : rc; }
    c.spec = spec.drafter ? &spec.params : NULL;
    g4_tokenizer *tok = NULL;
    g4_template *tpl = NULL;
    g4_gen_config cfg = {0};
    c.pending = json_array();
    st = c.pending ? g4_tokenizer_load(model, &tok) : g4_fail(G4_ERR_NOMEM, "out of memory");
    if (st == G4_ERR_IO) st = G4_ERR_INPUT;   /* a model dir without one */
    if (!st) st = g4_template_load(model, &tpl);
    if (!st) st = g4_gen_config_load(model, g4_model_get_info(c.m), &cfg);
    json_t *msgs = json_array();
    if (!st && !msgs) st = g4_fail(G4_ERR_NOMEM, "out of memory");
    json_t *sys = system ? json_string(system) : NULL;
    if (!st && system && !sys) st = g4_fail(G4_ERR_INPUT, "--system: not valid UTF-8");
    json_decref(sys);
    c.tok = tok;
    c.tpl = tpl;
    c.cfg = &cfg;
    if (!st) reset(&c, msgs, system);
    /* --image / --audio: before the first turn's text, images first */
    for (int i = 0; !st && i < md.n_images; i++) st = add_media(&c, 1, md.paths[i]);
    for (int i = 0; !st && i < md.n_audios; i++) st = add_media(&c, 0, md.audio_paths[i]);
    const int tty = isatty(0);
    char *line = NULL;
    size_t cap = 0;
    while (!st) {
        if (tty) { fputs("> ", stderr); fflush(stderr); }
        ssize_t len = getline(&line, &cap, stdin);
        if (len < 0) break;   /* end of input */
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!strcmp(line, "/reset")) { reset(&c, msgs, system); continue; }
        if (!strncmp(line, "/image ", 7) || !strncmp(line, "/audio ", 7)) {
            const char *path = line + 7;
            while (*path == ' ') path++;
            st = add_media(&c, line[1] == 'i', path);
            if (st == G4_ERR_INPUT) {   /* a file it cannot take: say so, go on without it */
                fprintf(stderr, "gemma4c chat: %s\n", g4_last_error());
                st = G4_OK;
            }
            continue;
        }
        if (len == 0) continue;
        json_t *text = json_pack("{s:s,s:s#}", "type", "text", "text", line, (int)len);
        if (!text) { fprintf(stderr, "gemma4c chat: the line is not valid UTF-8; ignored\n"); continue; }
        json_t *um;
        if (json_array_size(c.pending)) {   /* the queued media, then the text */
            json_t *content = json_copy(c.pending);
            json_array_append_new(content, text);
            um = json_pack("{s:s,s:o}", "role", "user", "content", content);
        } else {
            um = json_pack("{s:s,s:O}", "role", "user", "content", json_object_get(text, "text"));
            json_decref(text);
        }
        if (!um) { st = g4_fail(G4_ERR_NOMEM, "out of memory"); break; }
        json_array_append_new(msgs, um);
        st = turn(&c, msgs);
        if (st == G4_ERR_CONTEXT || st == G4_ERR_INPUT) {
            /* a turn the context cannot hold, or one the template refuses: say so, forget it (and
             * its media), go on */
            fprintf(stderr, "gemma4c chat: %s\n", g4_last_error());
            json_array_remove(msgs, json_array_size(msgs) - 1);
            drop_media(&c, c.pending_images, c.pending_audios);
            st = G4_OK;
        }
        c.pending_images = c.pending_audios = 0;
        json_array_clear(c.pending);
    }
    rc = cli_report(st);
    const int rc_spec = cli_spec_close(&spec);
    if (!rc) rc = rc_spec;
    free(line);
    drop_media(&c, c.n_images, c.n_audios);
    free(c.images);
    free(c.audios);
    json_decref(c.pending);
    free(c.bounds);
    free(c.held);
    g4_kv_snap_free(c.snap);
    json_decref(msgs);
    g4_gen_config_free(&cfg);
    g4_template_free(tpl);
    g4_tokenizer_free(tok);
    g4_model_free(c.m);
    return rc;
}
