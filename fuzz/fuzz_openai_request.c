/* fuzz_openai_request.c — libFuzzer target for the server's request handling past the socket
 * (src/server/openai.c, responses.c): the first byte picks the route (chat, completions, /generate,
 * /tokenize, /detokenize, /v1/responses; mod 6) and --no-special-in-content (its next bit), the
 * rest is the request body, parsed through the same entry points http.c calls
 * with the tiny fixture model's tokenizer, chat template and vocabulary index (loaded once;
 * G4_FUZZ_MODEL overrides the directory). A request must parse or be refused with a 4xx/5xx
 * error whose JSON is well formed; a parsed one must serialize its SSE opening chunk. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4c.h"
#include "server/server.h"

static g4_api_ctx ctx;

static void load_once(void) {
    static int done;
    if (done) return;
    done = 1;
    const char *dir = getenv("G4_FUZZ_MODEL");
    if (!dir) dir = "tests/fixtures/g4-cond-tiny";
    g4_model_opts mo;
    g4_model_opts_default(&mo);
    mo.n_slots = 1;
    mo.ctx = 512;
    mo.threads = 1;
    static g4_model *m;
    static g4_tokenizer *tok;
    static g4_template *tmpl;
    static g4_gen_config gen;
    static g4_vocab_index *vi;
    if (g4_model_load(dir, &mo, &m) || g4_tokenizer_load(dir, &tok) || g4_template_load(dir, &tmpl) ||
        g4_gen_config_load(dir, g4_model_get_info(m), &gen)) {
        fprintf(stderr, "fuzz_openai_request: cannot load %s: %s (run from the repository root)\n", dir, g4_last_error());
        abort();
    }
    if (g4_vocab_index_new(tok, gen.eos, gen.n_eos, &vi)) vi = NULL;
    ctx.info = g4_model_get_info(m);
    ctx.tok = tok;
    ctx.tmpl = tmpl;
    ctx.vocab_index = vi;
    ctx.gen = &gen;
    ctx.model_name = "g4-cond-tiny";
    ctx.model_path = dir;
    ctx.render_budget = 64u << 20;
    ctx.max_messages = 10000;
    ctx.max_tools = 128;
}

static void check_error(const g4_api_error *e) {
    if (e->status < 400 || e->status > 599) abort();
    char *j = g4_api_error_json(e);
    json_t *v = j ? json_loads(j, 0, NULL) : NULL;
    if (!v || !json_is_object(json_object_get(v, "error"))) abort();
    json_decref(v);
    free(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    load_once();
    if (!size) return 0;
    const int route = data[0] % 6;   /* 5: /v1/responses */
    ctx.no_special_in_content = (data[0] / 6) & 1;   /* --no-special-in-content's marking too */
    const char *body = (const char *)data + 1;
    const size_t len = size - 1;
    g4_api_error err;
    if (route == 3 || route == 4) {
        char *out = route == 3 ? g4_api_tokenize_json(&ctx, body, len, &err) : g4_api_detokenize_json(&ctx, body, len, &err);
        if (out) free(out);
        else check_error(&err);
        return 0;
    }
    g4_api_opts o;
    g4_req *reqs[G4_MAX_N];
    memset(&o, 0, sizeof o);
    if (!g4_api_parse(&ctx, route == 5 ? G4_API_RESPONSES : (g4_api_kind)route, body, len, &o, reqs, &err)) {
        check_error(&err);
        return 0;
    }
    if (o.n < 1 || o.n > G4_MAX_N) abort();
    snprintf(o.id, sizeof o.id, "cmpl-fuzz");
    for (int i = 0; i < o.n; i++) {
        char *buf = NULL;
        size_t bl = 0;
        pthread_mutex_lock(&reqs[i]->mu);
        g4_api_stream_chunk(&ctx, &o, reqs[i], i, 0, 0, 0, 0, 1, 0, &buf, &bl);
        pthread_mutex_unlock(&reqs[i]->mu);
        free(buf);
        if (route == 5) free(g4_api_response_json(&ctx, &o, &reqs[i]));   /* the Response object, no output yet */
        g4_req_release(reqs[i]);
    }
    return 0;
}
