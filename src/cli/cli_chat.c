/* cli_chat.c — `gemma4c chat`: an interactive multi-turn conversation (as llama-cli's
 * conversation mode). Each line on stdin is a user turn; the whole conversation goes through the
 * model's chat template, only the tokens past what the slot already holds are prefilled, and the
 * reply streams to stdout through the shared generation loop (cli_generate). Owns the REPL only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

static void usage(void) {
    printf("usage: gemma4c chat -m MODEL [--system TEXT] [-n N] [--temp T --top-p P --top-k K --min-p P --seed S]\n"
           "                    [-v] [model options]\n"
           "  reads one user turn per line on stdin (prompt \"> \" on stderr at a terminal) and streams\n"
           "  each reply to stdout, one line per reply; the conversation goes through the model's chat\n"
           "  template. -n: most tokens per reply (default: until an eos id or the context end).\n"
           "  /reset clears the conversation (the --system message stays); /exit or end of input quits.\n"
           "  -v: each turn's prompt length and how much of it the slot already held, on stderr.\n");
    fputs(cli_model_opts_help, stdout);
}

typedef struct {
    g4_model *m;
    const g4_tokenizer *tok;
    const g4_template *tpl;
    const g4_gen_config *cfg;
    g4_gen_params gp;
    int verbose;
    int32_t *held;   /* the ids the slot holds, in order [n_held] */
    int n_held, cap_held;
} chat_state;

static void reset(chat_state *c, json_t *msgs, const char *system) {
    json_array_clear(msgs);
    if (system) json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "system", "content", system));
    g4_slot_reset(c->m, 0);
    c->n_held = 0;
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

/* One turn: the conversation (ending with the user's message) -> the reply, streamed to stdout
 * and appended to msgs as the assistant's message. */
static g4_status turn(chat_state *c, json_t *msgs) {
    int32_t *ids = NULL;
    int n = 0;
    g4_status st = cli_chat_ids(c->tpl, c->tok, msgs, &ids, &n);
    if (st) return st;
    /* a rendering that extends what the slot holds needs only its new tokens; anything else (a
     * template that rewrites earlier turns, a reply that re-encodes differently) starts over */
    int from = 0;
    if (c->n_held > 0 && c->n_held < n && !memcmp(ids, c->held, (size_t)c->n_held * sizeof *ids)) from = c->n_held;
    else {
        g4_slot_reset(c->m, 0);
        c->n_held = 0;
    }
    if (c->verbose) fprintf(stderr, "gemma4c chat: prompt %d tokens, %d of them already in the slot\n", n, from);
    g4_gen *g = NULL;
    cli_gen_out out = {.text = 1, .ids = 1};
    st = g4_gen_new(c->m, 0, c->tok, c->cfg, &c->gp, &g);
    if (!st) st = cli_generate(c->m, 0, ids + from, n - from, g, 0, &out);
    if (!st) st = hold(c, ids + from, n - from);
    /* the slot holds every generated token but the last (cli_generate feeds it none) */
    if (!st && out.n_gen > 1) st = hold(c, out.id_buf, out.n_gen - 1);
    if (!st && out.fin == G4_FIN_LENGTH && g4_gen_hit_context(g))
        fprintf(stderr, "gemma4c chat: stopped at the context limit (--ctx %d); /reset to start over\n",
                g4_model_get_info(c->m)->ctx);
    if (!st) {
        /* the reply's bytes as generated: the detokenizer may yield invalid UTF-8 from a random
         * model, and the template gets the same bytes either way */
        json_t *reply = json_pack("{s:s,s:o}", "role", "assistant", "content",
                                  json_stringn_nocheck(out.text_buf ? out.text_buf : "", out.text_len));
        if (!reply || json_array_append_new(msgs, reply)) st = g4_fail(G4_ERR_NOMEM, "out of memory");
    }
    if (st) {   /* the slot's contents are unknown after a failed step */
        g4_slot_reset(c->m, 0);
        c->n_held = 0;
    }
    g4_gen_free(g);
    free(out.text_buf);
    free(out.id_buf);
    free(ids);
    return st;
}

int cli_chat(int argc, char **argv) {
    const char *cmd = "chat", *model = NULL, *system = NULL;
    long n_predict = 0;
    chat_state c = {0};
    g4_model_opts mo;
    g4_model_opts_default(&mo);
    mo.tp = 0;   /* unset: 1, or the mpirun size */
    g4_gen_params_default(&c.gp);
    c.gp.sp.temperature = 0.0f;   /* greedy unless --temp, as `run` */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int r;
        if (cli_is_help(a)) { usage(); return 0; }
        if ((r = cli_parse_model_opt(cmd, argc, argv, &i, &mo)) || (r = cli_parse_sampling_opt(cmd, argc, argv, &i, &c.gp.sp))) {
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
        else if (!strcmp(a, "-n")) { if (!cli_parse_int(cmd, a, v, 0, 1 << 24, &n_predict)) return 2; }
        else return cli_usage_error(cmd, "unknown option '%s' (see gemma4c chat --help)", a);
    }
    if (!model) return cli_usage_error(cmd, "-m MODEL is required");
    c.gp.max_tokens = (int)n_predict;   /* 0: until an eos id or the context end */

    int rc = cli_load_model(model, &mo, &c.m);
    if (rc) return rc < 0 ? 0 : rc;
    g4_tokenizer *tok = NULL;
    g4_template *tpl = NULL;
    g4_gen_config cfg = {0};
    g4_status st = g4_tokenizer_load(model, &tok);
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
        if (len == 0) continue;
        json_t *um = json_pack("{s:s,s:s#}", "role", "user", "content", line, (int)len);
        if (!um) { fprintf(stderr, "gemma4c chat: the line is not valid UTF-8; ignored\n"); continue; }
        json_array_append_new(msgs, um);
        st = turn(&c, msgs);
        if (st == G4_ERR_CONTEXT || st == G4_ERR_INPUT) {
            /* a turn the context cannot hold, or one the template refuses: say so, forget it, go on */
            fprintf(stderr, "gemma4c chat: %s\n", g4_last_error());
            json_array_remove(msgs, json_array_size(msgs) - 1);
            st = G4_OK;
        }
    }
    rc = cli_report(st);
    free(line);
    free(c.held);
    json_decref(msgs);
    g4_gen_config_free(&cfg);
    g4_template_free(tpl);
    g4_tokenizer_free(tok);
    g4_model_free(c.m);
    return rc;
}
