/* openai.c — the OpenAI wire format: parses and validates /v1/chat/completions, /v1/completions
 * and /generate bodies into g4_reqs (one per choice; rendering the chat template, tokenizing, and
 * refusing by name every field it does not honour), and writes responses, SSE chunks (chat: the
 * chat parser's deltas) and {"error": {...}} bodies. Knows nothing of sockets or scheduling. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server.h"

#define MAX_STOP 16

g4_api_error *g4_api_err(g4_api_error *err, int status, const char *type, const char *param, const char *code,
                         const char *fmt, ...) {
    err->status = status;
    err->type = type;
    err->param = param;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return err;
}

/* A JSON string from bytes that may not be valid UTF-8 (a token can hold half a character):
 * invalid sequences become U+FFFD, as OpenAI and transformers show them. */
static json_t *jstr_lossy(const char *s, size_t n) {
    json_t *j = json_stringn(s, n);
    if (j) return j;
    char *o = malloc(n * 3 + 1);
    if (!o) return json_string("");
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t L = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        int ok = L && i + L <= n && c != 0;
        for (size_t t = 1; ok && t < L; t++) ok = ((unsigned char)s[i + t] >> 6) == 2;
        if (ok && L > 1) {   /* reject overlong forms and surrogates the cheap way: let jansson judge */
            json_t *probe = json_stringn(s + i, L);
            ok = probe != NULL;
            json_decref(probe);
        }
        if (ok) { memcpy(o + k, s + i, L); k += L; i += L; }
        else { memcpy(o + k, "\xef\xbf\xbd", 3); k += 3; i++; }
    }
    j = json_stringn(o, k);
    free(o);
    return j ? j : json_string("");
}

char *g4_api_error_json(const g4_api_error *e) {
    json_t *o = json_pack("{s:{s:o,s:s,s:o,s:o}}", "error", "message", jstr_lossy(e->message, strlen(e->message)),
                          "type", e->type ? e->type : "invalid_request_error", "param",
                          e->param ? jstr_lossy(e->param, strlen(e->param)) : json_null(), "code",
                          e->code ? json_string(e->code) : json_null());
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

/* ---------------------------------------------------------------- field readers */

#define BAD(param, ...) (g4_api_err(err, 400, "invalid_request_error", param, "invalid_value", __VA_ARGS__), -1)
#define BADTYPE(param, what) (g4_api_err(err, 400, "invalid_request_error", param, "invalid_type", "'%s' must be %s", param, what), -1)

/* Each returns 1 when the field was given, 0 when absent or null, -1 on a bad value. */
static int get_num(json_t *o, const char *k, double lo, double hi, double *out, g4_api_error *err) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) return BADTYPE(k, "a number");
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi)) return BAD(k, "'%s' is %g; it must be in [%g, %g]", k, d, lo, hi);
    *out = d;
    return 1;
}

static int get_int(json_t *o, const char *k, long long lo, long long hi, long long *out, g4_api_error *err) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v)) return BADTYPE(k, "an integer");
    long long d = json_integer_value(v);
    if (d < lo || d > hi) return BAD(k, "'%s' is %lld; it must be in [%lld, %lld]", k, d, lo, hi);
    *out = d;
    return 1;
}

static int get_bool(json_t *o, const char *k, int *out, g4_api_error *err) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return BADTYPE(k, "a boolean");
    *out = json_is_true(v);
    return 1;
}

/* ---------------------------------------------------------------- request parsing */

static int parse_sampling(const g4_api_ctx *c, json_t *o, g4_req *r, g4_api_error *err) {
    double d;
    long long i;
    int rc;
    r->sp = c->gen->defaults;
    if ((rc = get_num(o, "temperature", 0, 2, &d, err)) < 0) return -1;
    if (rc) r->sp.temperature = (float)d;
    if ((rc = get_num(o, "top_p", 0, 1, &d, err)) < 0) return -1;
    if (rc) {
        if (d <= 0) return BAD("top_p", "'top_p' must be greater than 0");
        r->sp.top_p = (float)d;
    }
    if ((rc = get_int(o, "top_k", -1, 1 << 30, &i, err)) < 0) return -1;
    if (rc) r->sp.top_k = i < 0 ? 0 : (int)i;   /* -1 = off, as in vLLM */
    if ((rc = get_num(o, "min_p", 0, 1, &d, err)) < 0) return -1;
    if (rc) r->sp.min_p = (float)d;
    if ((rc = get_num(o, "frequency_penalty", -2, 2, &d, err)) < 0) return -1;
    if (rc) r->sp.frequency_penalty = (float)d;
    if ((rc = get_num(o, "presence_penalty", -2, 2, &d, err)) < 0) return -1;
    if (rc) r->sp.presence_penalty = (float)d;
    json_t *seed = json_object_get(o, "seed");
    if (seed && !json_is_null(seed)) {
        if (!json_is_integer(seed)) return BADTYPE("seed", "an integer");
        r->sp.seed = (uint64_t)json_integer_value(seed);
    } else {
        /* no seed: a fresh one per request, from the clock and the request's address */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r->sp.seed = ((uint64_t)ts.tv_sec * 1000000007ull) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)r;
    }
    int b = 0;
    if (get_bool(o, "ignore_eos", &b, err) < 0) return -1;
    r->ignore_eos = b;

    /* logit_bias: {"token id": bias in [-100, 100]}, added to the raw logits (greedy included) */
    json_t *lb = json_object_get(o, "logit_bias");
    if (lb && !json_is_null(lb)) {
        if (!json_is_object(lb)) return BADTYPE("logit_bias", "an object mapping token ids to numbers");
        size_t n = json_object_size(lb);
        r->bias_ids = malloc((n ? n : 1) * sizeof *r->bias_ids);
        r->bias = malloc((n ? n : 1) * sizeof *r->bias);
        if (!r->bias_ids || !r->bias) return g4_api_err(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
        const char *k;
        json_t *v;
        json_object_foreach(lb, k, v) {
            char *end;
            long long id = strtoll(k, &end, 10);
            if (!*k || *end || id < 0 || id >= c->info->vocab_size)
                return BAD("logit_bias", "logit_bias key '%s' is not a token id in [0, %d)", k, c->info->vocab_size);
            if (!json_is_number(v)) return BADTYPE("logit_bias", "an object mapping token ids to numbers");
            double d = json_number_value(v);
            if (!(d >= -100 && d <= 100)) return BAD("logit_bias", "logit_bias of token %lld is %g; it must be in [-100, 100]", id, d);
            r->bias_ids[r->n_bias] = (int32_t)id;
            r->bias[r->n_bias++] = (float)d;
        }
    }

    json_t *stop = json_object_get(o, "stop");
    if (stop && !json_is_null(stop)) {
        size_t n = json_is_string(stop) ? 1 : json_is_array(stop) ? json_array_size(stop) : (size_t)-1;
        if (n == (size_t)-1) return BADTYPE("stop", "a string or a list of strings");
        if (n > MAX_STOP) return BAD("stop", "at most %d stop strings are allowed", MAX_STOP);
        r->stop = calloc(n ? n : 1, sizeof *r->stop);
        if (!r->stop) return g4_api_err(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
        for (size_t k = 0; k < n; k++) {
            json_t *e = json_is_string(stop) ? stop : json_array_get(stop, k);
            if (!json_is_string(e)) return BADTYPE("stop", "a string or a list of strings");
            if (!json_string_length(e)) continue;   /* an empty stop string would stop at once */
            r->stop[r->n_stop++] = strdup(json_string_value(e));
        }
    }
    return 0;
}

static int check_model(const g4_api_ctx *c, json_t *o, g4_api_error *err) {
    json_t *m = json_object_get(o, "model");
    if (!m || json_is_null(m)) return 0;
    if (!json_is_string(m)) return BADTYPE("model", "a string");
    const char *s = json_string_value(m);
    if (strcmp(s, c->model_name) && strcmp(s, c->model_path))
        return g4_api_err(err, 404, "invalid_request_error", "model", "model_not_found",
                          "The model '%s' does not exist; this server serves '%s'", s, c->model_name), -1;
    return 0;
}

/* A library message as a client may see it: the server's own paths taken out. The template and
 * tokenizer name their files by the model path the server was given ("/srv/m/chat_template.jinja:
 * 12:3: ..."); clients get the file's name within the model ("chat_template.jinja:12:3: ..."). */
static void client_message(const g4_api_ctx *c, const char *msg, char *out, size_t cap) {
    const char *p = c->model_path;
    size_t pl = p ? strlen(p) : 0;
    while (pl > 1 && p[pl - 1] == '/') pl--;
    size_t w = 0;
    while (*msg && w + 1 < cap) {
        if (pl && !strncmp(msg, p, pl) && (msg[pl] == '/' || msg[pl] == ':')) {
            msg += pl + 1;   /* the path and its separator: what follows names the file inside */
            continue;
        }
        if (pl && !strncmp(msg, p, pl)) {   /* the bare path: the model's served name instead */
            const char *name = c->model_name ? c->model_name : "the model";
            for (const char *q = name; *q && w + 1 < cap; q++) out[w++] = *q;
            msg += pl;
            continue;
        }
        out[w++] = *msg++;
    }
    out[w] = 0;
}

static int tokenize(const g4_api_ctx *c, const char *text, size_t len, int add_special, g4_req *r,
                    const char *param, g4_api_error *err) {
    size_t n = 0;
    g4_status st = g4_tokenize(c->tok, text, len, add_special, &r->prompt, &n);
    if (st) {
        char msg[512];
        client_message(c, g4_last_error(), msg, sizeof msg);
        return g4_api_err(err, 400, "invalid_request_error", param, "invalid_value", "%s", msg), -1;
    }
    r->n_prompt = (int)n;
    return 0;
}

/* --no-special-in-content: the chat template's own markup must still become control tokens, but
 * text the client sent must not. Before rendering, every special token's text inside the
 * request's strings (messages, tools) is wrapped in two Unicode noncharacters, which no client
 * text keeps (they are dropped from it first); after rendering, the markers are taken out and
 * what they enclosed is tokenized as plain text. The markers sit right around the special text
 * (never whitespace), so filters such as trim see the same string edges. */
#define MARK_OPEN "\xEF\xB7\x90"    /* U+FDD0 */
#define MARK_CLOSE "\xEF\xB7\x91"   /* U+FDD1 */
#define MARK_LEN 3

static int is_mark(const char *p, size_t left) {
    return left >= MARK_LEN && (!memcmp(p, MARK_OPEN, MARK_LEN) || !memcmp(p, MARK_CLOSE, MARK_LEN));
}

/* src [n] with its special texts marked and stray markers dropped, into out (NULL: only
 * measured); the length. */
static size_t marked(const g4_tokenizer *t, const char *src, size_t n, char *out) {
    size_t w = 0, a, b;
#define PUT(p, k) do { if (out) memcpy(out + w, (p), (k)); w += (k); } while (0)
    for (size_t i = 0; i < n;) {
        if (is_mark(src + i, n - i)) { i += MARK_LEN; continue; }
        size_t next = n;   /* up to the next marker the client sent */
        for (size_t k = i; k < n; k++)
            if (is_mark(src + k, n - k)) { next = k; break; }
        while (i < next && g4_find_special_text(t, src + i, next - i, &a, &b)) {
            PUT(src + i, a);
            PUT(MARK_OPEN, MARK_LEN);
            PUT(src + i + a, b - a);
            PUT(MARK_CLOSE, MARK_LEN);
            i += b;
        }
        PUT(src + i, next - i);
        i = next;
    }
#undef PUT
    return w;
}

/* A string value rewritten by marked(); untouched when there is nothing to mark. 0, or -1 out
 * of memory. */
static int mark_string(const g4_tokenizer *t, json_t *v) {
    const char *src = json_string_value(v);
    const size_t n = json_string_length(v);
    size_t a, b;
    int marks = 0;
    for (size_t i = 0; i < n && !marks; i++) marks = is_mark(src + i, n - i);
    if (!marks && !g4_find_special_text(t, src, n, &a, &b)) return 0;
    const size_t len = marked(t, src, n, NULL);
    char *out = malloc(len + 1);
    if (!out) return -1;
    marked(t, src, n, out);
    const int bad = json_string_setn(v, out, len);
    free(out);
    return bad ? -1 : 0;
}

static int mark_json(const g4_tokenizer *t, json_t *v) {
    if (json_is_string(v)) return mark_string(t, v);
    size_t i;
    const char *k;
    json_t *x;
    if (json_is_array(v)) json_array_foreach(v, i, x) if (mark_json(t, x)) return -1;
    if (json_is_object(v)) json_object_foreach(v, k, x) if (mark_json(t, x)) return -1;
    return 0;
}

/* Takes the markers out of the rendered text (in place) and lists the byte ranges they enclosed,
 * as start/end pairs in the text as it is afterwards; a marker without its pair (a template may
 * cut strings) is only dropped. 0, or -1 out of memory. */
static int unmark(char *text, size_t *len, size_t **plain, size_t *n_plain) {
    size_t w = 0, open = (size_t)-1, cap = 0;
    *plain = NULL;
    *n_plain = 0;
    for (size_t i = 0; i < *len;) {
        if (*len - i >= MARK_LEN && !memcmp(text + i, MARK_OPEN, MARK_LEN)) { open = w; i += MARK_LEN; continue; }
        if (*len - i >= MARK_LEN && !memcmp(text + i, MARK_CLOSE, MARK_LEN)) {
            i += MARK_LEN;
            if (open == (size_t)-1) continue;
            if (*n_plain == cap) {
                cap = cap ? cap * 2 : 16;
                size_t *np = realloc(*plain, 2 * cap * sizeof *np);
                if (!np) { free(*plain); *plain = NULL; return -1; }
                *plain = np;
            }
            (*plain)[2 * *n_plain] = open;
            (*plain)[2 * *n_plain + 1] = w;
            ++*n_plain;
            open = (size_t)-1;
            continue;
        }
        text[w++] = text[i++];
    }
    *len = w;
    text[w] = 0;
    return 0;
}

/* An assistant's tool call comes back with its arguments as JSON text (the OpenAI shape), but
 * chat templates expect a mapping: Gemma 4's renders a mapping in its own argument dialect, the
 * way the model wrote the call, and a string verbatim. Text that is a JSON object becomes that
 * object (as vLLM does); anything else stays as it is. */
static int tool_arguments_as_objects(json_t *msgs) {
    size_t i, k;
    json_t *m, *tc;
    json_array_foreach(msgs, i, m) {
        json_t *calls = json_object_get(m, "tool_calls");
        if (!json_is_array(calls)) continue;
        json_array_foreach(calls, k, tc) {
            json_t *f = json_object_get(tc, "function");
            json_t *a = json_object_get(f, "arguments");
            if (!json_is_string(a)) continue;
            json_t *obj = json_loadb(json_string_value(a), json_string_length(a), 0, NULL);
            if (json_is_object(obj)) {
                if (json_object_set_new(f, "arguments", obj)) return -1;
            } else {
                json_decref(obj);
            }
        }
    }
    return 0;
}

static int parse_chat_prompt(const g4_api_ctx *c, json_t *o, g4_req *r, g4_api_error *err) {
    json_t *msgs = json_object_get(o, "messages");
    if (!msgs) return g4_api_err(err, 400, "invalid_request_error", "messages", "missing_required_parameter",
                                 "'messages' is a required property"), -1;
    if (!json_is_array(msgs) || !json_array_size(msgs)) return BADTYPE("messages", "a non-empty array of messages");
    if (c->max_messages && json_array_size(msgs) > (size_t)c->max_messages)   /* --max-messages */
        return g4_api_err(err, 400, "invalid_request_error", "messages", "array_above_max_length",
                          "'messages' holds %zu messages; this server takes at most %d", json_array_size(msgs),
                          c->max_messages), -1;
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m) || !json_is_string(json_object_get(m, "role")))
            return BAD("messages", "messages[%zu] must be an object with a string 'role'", i);
        json_t *content = json_object_get(m, "content");
        if (content && !json_is_null(content) && !json_is_string(content) && !json_is_array(content))
            return BAD("messages", "messages[%zu].content must be a string or an array of content parts", i);
        size_t k;
        json_t *part;
        if (json_is_array(content)) json_array_foreach(content, k, part) {
            const char *type = json_string_value(json_object_get(part, "type"));
            if (!json_is_object(part) || !type)
                return BAD("messages", "messages[%zu].content[%zu] must be an object with a string 'type'", i, k);
            if (!strcmp(type, "text")) {
                if (!json_is_string(json_object_get(part, "text")))
                    return BAD("messages", "messages[%zu].content[%zu].text must be a string", i, k);
            } else if (!strcmp(type, "image_url")) {
                if (g4_media_part(c, part, i, k, r, err)) return -1;
            } else if (!strcmp(type, "image") || !strcmp(type, "input_image")) {
                return BAD("messages", "messages[%zu].content[%zu]: images are 'image_url' parts", i, k);
            } else if (!strcmp(type, "input_audio")) {
                if (g4_media_audio_part(c, part, i, k, r, err)) return -1;
            } else if (!strcmp(type, "audio")) {
                return BAD("messages", "messages[%zu].content[%zu]: audio clips are 'input_audio' parts", i, k);
            } else {
                return BAD("messages", "messages[%zu].content[%zu]: content parts of type '%s' are not supported", i, k, type);
            }
        }
    }
    if (tool_arguments_as_objects(msgs)) return g4_api_err(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
    json_t *tools = json_object_get(o, "tools");
    if (c->no_special_in_content && (mark_json(c->tok, msgs) || mark_json(c->tok, tools)))
        return g4_api_err(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
    json_t *vars = json_object();
    json_object_set(vars, "messages", msgs);
    json_object_set_new(vars, "add_generation_prompt", json_true());
    /* tool_choice "none": the tools are not offered to the model at all */
    json_t *tc = json_object_get(o, "tool_choice");
    const int offer = !(json_is_string(tc) && !strcmp(json_string_value(tc), "none"));
    if (tools && json_is_array(tools) && json_array_size(tools) && offer) json_object_set(vars, "tools", tools);
    /* reasoning_effort: any effort but "none" turns the model's thinking on */
    json_t *re = json_object_get(o, "reasoning_effort");
    if (json_is_string(re)) json_object_set_new(vars, "enable_thinking", json_boolean(strcmp(json_string_value(re), "none")));
    if (c->template_specials) {
        const int ids[3] = {c->info->bos_id, c->info->eos_id, c->info->pad_id};
        const char *names[3] = {"bos_token", "eos_token", "pad_token"};
        for (int k = 0; k < 3; k++) {
            const char *piece = ids[k] >= 0 ? g4_id_to_token(c->tok, ids[k]) : NULL;
            if (piece) json_object_set_new(vars, names[k], json_string(piece));
        }
    }
    json_t *kw = json_object_get(o, "chat_template_kwargs");
    if (kw && json_is_object(kw)) json_object_update(vars, kw);
    char *js = json_dumps(vars, JSON_COMPACT);
    json_decref(vars);
    if (!js) return g4_api_err(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
    char *text = NULL;
    size_t tlen = 0;
    if (c->renders) sem_wait(c->renders);
    g4_status st = g4_template_render_budget(c->tmpl, js, strlen(js), c->render_budget, &text, &tlen);
    if (c->renders) sem_post(c->renders);
    free(js);
    if (st == G4_ERR_NOMEM) {
        fprintf(stderr, "gemma4c serve: chat template: %s\n", g4_last_error());
        return g4_api_err(err, 413, "invalid_request_error", "messages", "request_too_large",
                          "rendering this conversation with the chat template needs more than the server's budget "
                          "of %zu MiB (--max-render-mb)", c->render_budget >> 20), -1;
    }
    if (st) {   /* the full message (with the template's path) stays in the server's log */
        char msg[512];
        fprintf(stderr, "gemma4c serve: chat template: %s\n", g4_last_error());
        client_message(c, g4_last_error(), msg, sizeof msg);
        return g4_api_err(err, 400, "invalid_request_error", "messages", "invalid_value", "chat template: %s", msg), -1;
    }
    /* The template writes <bos> itself; transformers tokenizes its output without specials. */
    int rc;
    if (c->no_special_in_content) {
        size_t *plain = NULL, n_plain = 0;
        if (unmark(text, &tlen, &plain, &n_plain)) {
            free(text);
            return g4_api_err(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
        }
        size_t n = 0;
        rc = 0;
        if (g4_tokenize_plain(c->tok, text, tlen, 0, plain, n_plain, &r->prompt, &n)) {
            char msg[512];
            client_message(c, g4_last_error(), msg, sizeof msg);
            g4_api_err(err, 400, "invalid_request_error", "messages", "invalid_value", "%s", msg);
            rc = -1;
        }
        r->n_prompt = (int)n;
        free(plain);
    } else {
        rc = tokenize(c, text, tlen, 0, r, "messages", err);
    }
    free(text);
    return rc ? rc : g4_media_expand(c, r, err);
}

static int parse_text_prompt(const g4_api_ctx *c, json_t *o, g4_req *r, g4_api_error *err) {
    json_t *p = json_object_get(o, "prompt");
    if (!p) return g4_api_err(err, 400, "invalid_request_error", "prompt", "missing_required_parameter",
                              "'prompt' is a required property"), -1;
    if (json_is_array(p) && json_array_size(p) == 1 && (json_is_string(json_array_get(p, 0)) || json_is_array(json_array_get(p, 0))))
        p = json_array_get(p, 0);   /* a batch of one */
    if (json_is_string(p)) return tokenize(c, json_string_value(p), json_string_length(p), 1, r, "prompt", err);
    if (!json_is_array(p)) return BADTYPE("prompt", "a string or an array of token ids");
    size_t n = json_array_size(p);
    if (!n) return BAD("prompt", "'prompt' is empty");
    r->prompt = malloc(n * sizeof *r->prompt);
    if (!r->prompt) return g4_api_err(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(p, i);
        if (!json_is_integer(e)) return BADTYPE("prompt", "a string or an array of token ids (one prompt per request)");
        long long id = json_integer_value(e);
        if (id < 0 || id >= c->info->vocab_size)
            return BAD("prompt", "token id %lld is outside the vocabulary [0, %d)", id, c->info->vocab_size);
        r->prompt[i] = (int32_t)id;
    }
    r->n_prompt = (int)n;
    return 0;
}

/* llama-server's per-request speculative.n_max / n_min, as an object {"n_max": K, "n_min": M}:
 * at most K drafts a round (0: none for this request; K <= the server's --draft-max), and a round
 * with fewer than M drafts verifies none. */
static int parse_speculative(const g4_api_ctx *c, json_t *root, g4_req *r, g4_api_error *err) {
    json_t *sp = json_object_get(root, "speculative"), *v;
    const char *key;
    if (!sp || json_is_null(sp)) return 0;
    if (!json_is_object(sp)) return BADTYPE("speculative", "an object");
    long long n_max = -1, n_min = 0;
    json_object_foreach(sp, key, v) {
        const int is_max = !strcmp(key, "n_max");
        if (!is_max && strcmp(key, "n_min")) {
            static _Thread_local char param[96];   /* err->param outlives the body */
            snprintf(param, sizeof param, "speculative.%.60s", key);
            return g4_api_err(err, 400, "invalid_request_error", param, "unsupported_parameter",
                              "speculative.%s is not supported (only n_max and n_min are)", key), -1;
        }
        if (json_is_null(v)) continue;
        const char *param = is_max ? "speculative.n_max" : "speculative.n_min";
        if (!json_is_integer(v)) return BADTYPE(param, "an integer");
        const long long n = json_integer_value(v);
        if (n < 0) return BAD(param, "'%s' is %lld; it must be at least 0", param, n);
        *(is_max ? &n_max : &n_min) = n;
    }
    if (n_max > 0 && !c->spec_max)
        return BAD("speculative.n_max", "'speculative.n_max' is %lld, but this server does not decode speculatively "
                   "(start it with --spec ngram or --draft DIR)", n_max);
    if (n_max > c->spec_max)
        return BAD("speculative.n_max", "'speculative.n_max' is %lld, above this server's --draft-max %d", n_max,
                   c->spec_max);
    const long long most = n_max >= 0 ? n_max : c->spec_max;
    if (n_min > most)
        return BAD("speculative.n_min", "'speculative.n_min' is %lld, above the %lld drafts a round may have", n_min, most);
    r->spec_n_max = (int)n_max;
    r->spec_n_min = (int)n_min;
    return 0;
}

/* Every field a route takes; anything else is refused by name rather than silently ignored. */
static const char *const CHAT_FIELDS[] = {
    "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "seed", "stop",
    "frequency_penalty", "presence_penalty", "logprobs", "top_logprobs", "stream", "stream_options", "n",
    "logit_bias", "tools", "tool_choice", "parallel_tool_calls", "response_format", "reasoning_effort",
    "chat_template_kwargs", "user", "metadata", "store", "top_k", "min_p", "ignore_eos", "return_token_ids", "grammar",
    "mm_processor_kwargs", "speculative", NULL};
static const char *const COMPLETION_FIELDS[] = {
    "model", "prompt", "max_tokens", "temperature", "top_p", "seed", "stop", "frequency_penalty",
    "presence_penalty", "logprobs", "stream", "stream_options", "n", "logit_bias", "echo", "suffix", "best_of",
    "user", "top_k", "min_p", "ignore_eos", "return_token_ids", "grammar", "speculative", NULL};
static const char *const GENERATE_FIELDS[] = {
    "model", "prompt", "max_tokens", "temperature", "top_p", "seed", "stop", "frequency_penalty",
    "presence_penalty", "logit_bias", "stream", "top_k", "min_p", "ignore_eos", "return_token_ids", "grammar",
    "speculative", NULL};

/* A 400 naming the first field of root that is not in ok (NULL-terminated). */
static int only_fields(json_t *root, const char *const *ok, g4_api_error *err) {
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        int known = 0;
        for (int i = 0; ok[i] && !known; i++) known = !strcmp(ok[i], k);
        if (!known) {
            static _Thread_local char key[64];   /* err->param outlives the body; one per HTTP thread */
            snprintf(key, sizeof key, "%s", k);
            g4_api_err(err, 400, "invalid_request_error", key, "unsupported_parameter",
                       "Unrecognized request argument supplied: %s", k);
            return -1;
        }
    }
    return 0;
}

static int check_fields(json_t *root, g4_api_kind kind, g4_api_error *err) {
    return only_fields(root, kind == G4_API_CHAT ? CHAT_FIELDS : kind == G4_API_COMPLETION ? COMPLETION_FIELDS : GENERATE_FIELDS,
                       err);
}

/* The grammar of a choice's output and its matcher, from r->gbnf (param: the field it came from,
 * response_format or grammar; r->grammar_param remembers it for the other choices). */
static int constrain(const g4_api_ctx *c, g4_req *r, g4_api_error *err) {
    const char *param = r->grammar_param ? r->grammar_param : "response_format";
    if (!c->vocab_index)
        return g4_api_err(err, 400, "invalid_request_error", param, "invalid_value",
                          "this model's tokenizer cannot be constrained (no vocabulary index)"), -1;
    if (g4_grammar_compile_gbnf_tokens(r->gbnf, strlen(r->gbnf), NULL, c->tok, &r->grammar) ||
        g4_grammar_matcher_new(r->grammar, c->vocab_index, &r->matcher))
        return g4_api_err(err, 400, "invalid_request_error", param, "invalid_value", "%s: %s", param, g4_last_error()), -1;
    return 0;
}

/* response_format json_object / json_schema ({"json_schema": {"name": ..., "schema": {...},
 * "strict": ...}}): the output is constrained to the schema's language (src/grammar); a keyword
 * the engine does not implement is a 400 naming it. */
static int response_grammar(const g4_api_ctx *c, json_t *rf, int schema, g4_req *r, g4_api_error *err) {
    g4_status st;
    if (schema) {
        json_t *js = json_object_get(rf, "json_schema");
        json_t *sc = json_is_object(js) ? json_object_get(js, "schema") : NULL;
        if (!json_is_object(sc))
            return g4_api_err(err, 400, "invalid_request_error", "response_format", "invalid_type",
                              "response_format json_schema needs {\"json_schema\": {\"name\": ..., \"schema\": {...}}}"), -1;
        char *text = json_dumps(sc, JSON_COMPACT);
        st = text ? g4_json_schema_to_gbnf(text, strlen(text), &r->gbnf) : g4_fail(G4_ERR_NOMEM, "out of memory");
        free(text);
    } else {
        st = g4_json_schema_to_gbnf(NULL, 0, &r->gbnf);
    }
    if (st)
        return g4_api_err(err, st == G4_ERR_NOMEM ? 500 : 400, "invalid_request_error", "response_format", "invalid_value",
                          "response_format: %s", g4_last_error()), -1;
    return constrain(c, r, err);
}

/* tool_choice "required" / {"type": "function", "function": {"name"}}: the output constrained to
 * Gemma 4's tool-call syntax, the arguments to each tool's parameter schema (src/grammar). */
static int tool_grammar(const g4_api_ctx *c, json_t *tools, const char *only, int one_call, g4_req *r,
                        g4_api_error *err) {
    if (!json_is_array(tools) || !json_array_size(tools))
        return BAD("tool_choice", "tool_choice '%s' needs 'tools'", only ? only : "required");
    static const char *const need[] = {"<|tool_call>", "<tool_call|>", "<|\"|>", "<|tool_response>"};
    int have = 1;
    for (int i = 0; i < 4; i++) have &= g4_token_to_id(c->tok, need[i]) >= 0;
    if (!have)
        return BAD("tool_choice", "this model's chat format has no tool-call tokens; tool_choice can only be 'auto' or 'none'");
    char *text = json_dumps(tools, JSON_COMPACT);
    g4_status st = text ? g4_tool_calls_to_gbnf(text, strlen(text), only, one_call ? 1 : 0, &r->gbnf)
                        : g4_fail(G4_ERR_NOMEM, "out of memory");
    free(text);
    if (st)
        return g4_api_err(err, st == G4_ERR_NOMEM ? 500 : 400, "invalid_request_error", "tool_choice", "invalid_value",
                          "tool_choice: %s", g4_last_error()), -1;
    r->grammar_param = "tool_choice";
    return constrain(c, r, err);
}

/* tool_choice "none": the model may not call a tool, whatever it has learned (the tools are also
 * left out of the prompt): the call token is banned as logit_bias -100 bans a token. */
static int ban_tool_calls(const g4_api_ctx *c, g4_req *r, g4_api_error *err) {
    int32_t id = g4_token_to_id(c->tok, "<|tool_call>");
    if (id < 0) return 0;
    int32_t *ni = realloc(r->bias_ids, ((size_t)r->n_bias + 1) * sizeof *ni);
    if (ni) r->bias_ids = ni;
    float *nb = realloc(r->bias, ((size_t)r->n_bias + 1) * sizeof *nb);
    if (nb) r->bias = nb;
    if (!ni || !nb) return g4_api_err(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
    r->bias_ids[r->n_bias] = id;
    r->bias[r->n_bias++] = -100;
    return 0;
}

/* The chat fields that shape tool use and output. */
static int parse_chat_controls(const g4_api_ctx *c, json_t *root, g4_req *r, g4_api_error *err) {
    json_t *tools = json_object_get(root, "tools");
    if (tools && !json_is_null(tools)) {
        if (!json_is_array(tools)) return BADTYPE("tools", "an array of tools");
        if (c->max_tools && json_array_size(tools) > (size_t)c->max_tools)   /* --max-tools */
            return g4_api_err(err, 400, "invalid_request_error", "tools", "array_above_max_length",
                              "'tools' holds %zu tools; this server takes at most %d", json_array_size(tools),
                              c->max_tools), -1;
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            json_t *f = json_object_get(t, "function");
            if (!json_is_object(t) || !json_is_string(json_object_get(t, "type")) ||
                strcmp(json_string_value(json_object_get(t, "type")), "function") || !json_is_object(f) ||
                !json_is_string(json_object_get(f, "name")))
                return BAD("tools", "tools[%zu] must be {\"type\": \"function\", \"function\": {\"name\": ..., ...}}", i);
        }
    }
    json_t *tc = json_object_get(root, "tool_choice");
    int b = 1;
    if (get_bool(root, "parallel_tool_calls", &b, err) < 0) return -1;
    r->one_call = !b;
    json_t *rf = json_object_get(root, "response_format");
    const int text_format = !rf || json_is_null(rf) ||
                            (json_is_string(json_object_get(rf, "type")) && !strcmp(json_string_value(json_object_get(rf, "type")), "text"));
    if (tc && !json_is_null(tc)) {
        const char *name = NULL;
        json_t *fn = json_is_object(tc) ? json_object_get(tc, "function") : NULL;
        if (json_is_object(tc)) {
            name = json_string_value(json_object_get(fn, "name"));
            if (!json_is_string(json_object_get(tc, "type")) || strcmp(json_string_value(json_object_get(tc, "type")), "function") || !name)
                return BAD("tool_choice", "a named tool_choice is {\"type\": \"function\", \"function\": {\"name\": ...}}");
        }
        if (json_is_string(tc) && !strcmp(json_string_value(tc), "auto")) {
            /* the model decides */
        } else if (json_is_string(tc) && !strcmp(json_string_value(tc), "none")) {
            if (ban_tool_calls(c, r, err)) return -1;
        } else if (name || (json_is_string(tc) && !strcmp(json_string_value(tc), "required"))) {
            if (!text_format) return BAD("tool_choice", "tool_choice '%s' and a JSON response_format exclude each other", name ? name : "required");
            if (tool_grammar(c, tools, name, r->one_call, r, err)) return -1;
        } else {
            return BAD("tool_choice", "'tool_choice' must be 'none', 'auto', 'required' or a named function");
        }
    }
    if (rf && !json_is_null(rf)) {
        json_t *ty = json_is_object(rf) ? json_object_get(rf, "type") : NULL;
        if (!json_is_string(ty)) return BADTYPE("response_format", "an object with a string 'type'");
        const char *t = json_string_value(ty);
        if (!strcmp(t, "json_object") || !strcmp(t, "json_schema")) {
            if (response_grammar(c, rf, !strcmp(t, "json_schema"), r, err)) return -1;
        } else if (strcmp(t, "text")) {
            return BAD("response_format", "response_format type '%s' is not one of text, json_object, json_schema", t);
        }
    }
    json_t *re = json_object_get(root, "reasoning_effort");
    if (re && !json_is_null(re)) {
        static const char *const efforts[] = {"none", "minimal", "low", "medium", "high", NULL};
        int ok = 0;
        for (int i = 0; json_is_string(re) && efforts[i] && !ok; i++) ok = !strcmp(efforts[i], json_string_value(re));
        if (!ok) return BAD("reasoning_effort", "'reasoning_effort' must be one of none, minimal, low, medium, high");
    }
    json_t *kw = json_object_get(root, "chat_template_kwargs");
    if (kw && !json_is_null(kw) && !json_is_object(kw)) return BADTYPE("chat_template_kwargs", "an object");
    /* accepted and ignored, as OpenAI documents them: they label the request for the caller */
    json_t *u = json_object_get(root, "user");
    if (u && !json_is_null(u) && !json_is_string(u)) return BADTYPE("user", "a string");
    json_t *md = json_object_get(root, "metadata");
    if (md && !json_is_null(md) && !json_is_object(md)) return BADTYPE("metadata", "an object");
    if (get_bool(root, "store", &b, err) < 0) return -1;
    return 0;
}

/* Another choice of the same request: its own copy of everything, its seed the next one. */
static g4_req *clone_req(const g4_api_ctx *c, const g4_req *r, int i) {
    g4_req *q = g4_req_new();
    if (!q) return NULL;
    q->sp = r->sp;
    q->sp.seed = r->sp.seed + (uint64_t)i;
    q->max_tokens = r->max_tokens;
    q->n_top_logprobs = r->n_top_logprobs;
    q->ignore_eos = r->ignore_eos;
    q->spec_n_max = r->spec_n_max;
    q->spec_n_min = r->spec_n_min;
    q->chat = r->chat;
    q->one_call = r->one_call;
    q->media = g4_req_media_ref(r->media);
    q->prompt = malloc((size_t)r->n_prompt * sizeof *q->prompt);
    q->stop = calloc((size_t)r->n_stop + 1, sizeof *q->stop);
    q->bias_ids = malloc(((size_t)r->n_bias + 1) * sizeof *q->bias_ids);
    q->bias = malloc(((size_t)r->n_bias + 1) * sizeof *q->bias);
    if (!q->prompt || !q->stop || !q->bias_ids || !q->bias) { g4_req_release(q); return NULL; }
    memcpy(q->prompt, r->prompt, (size_t)r->n_prompt * sizeof *q->prompt);
    q->n_prompt = r->n_prompt;
    for (int k = 0; k < r->n_stop; k++)
        if ((q->stop[k] = strdup(r->stop[k]))) q->n_stop = k + 1;
    if (r->n_bias) {
        memcpy(q->bias_ids, r->bias_ids, (size_t)r->n_bias * sizeof *q->bias_ids);
        memcpy(q->bias, r->bias, (size_t)r->n_bias * sizeof *q->bias);
    }
    q->n_bias = r->n_bias;
    g4_api_error ignored;
    q->grammar_param = r->grammar_param;
    if (r->gbnf && (!(q->gbnf = strdup(r->gbnf)) || constrain(c, q, &ignored))) {
        g4_req_release(q);
        return NULL;
    }
    if (q->chat && g4_chat_parser_new(c->tok, (const char *const *)q->stop, q->n_stop, &q->parser)) {
        g4_req_release(q);
        return NULL;
    }
    return q;
}

g4_req *g4_api_parse(const g4_api_ctx *c, g4_api_kind kind, const char *body, size_t len, g4_api_opts *o,
                     g4_req **reqs, g4_api_error *err) {
    if (kind == G4_API_RESPONSES) return g4_responses_parse(c, body, len, o, reqs, err);
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->logprobs = -1;
    o->n = 1;
    reqs[0] = NULL;
    json_error_t je;
    json_t *root = json_loadb(body, len, 0, &je);
    if (!root) {
        g4_api_err(err, 400, "invalid_request_error", NULL, "invalid_json",
                   "We could not parse the JSON body of your request: %s (line %d, column %d)", je.text, je.line, je.column);
        return NULL;
    }
    g4_req *r = g4_req_new();
    const char *prompt_param = kind == G4_API_CHAT ? "messages" : "prompt";
    long long i;
    int rc, b = 0;
    if (!r) { g4_api_err(err, 500, "server_error", NULL, NULL, "out of memory"); goto fail; }
    if (!json_is_object(root)) { (void)BADTYPE("body", "a JSON object"); err->param = NULL; goto fail; }
    if (check_fields(root, kind, err)) goto fail;
    if (kind != G4_API_GENERATE && check_model(c, root, err)) goto fail;
    if (get_bool(root, "stream", &o->stream, err) < 0) goto fail;
    if (kind == G4_API_GENERATE) o->stream = 0;
    json_t *so = json_object_get(root, "stream_options");
    if (so && !json_is_null(so) && !json_is_object(so)) { (void)BADTYPE("stream_options", "an object"); goto fail; }
    if (so && json_is_object(so) && get_bool(so, "include_usage", &o->include_usage, err) < 0) {
        err->param = "stream_options";
        goto fail;
    }
    if (get_bool(root, "return_token_ids", &o->return_token_ids, err) < 0) goto fail;
    if ((rc = get_int(root, "n", 1, kind == G4_API_GENERATE ? 1 : G4_MAX_N, &i, err)) < 0) goto fail;
    if (rc) o->n = (int)i;
    if (parse_sampling(c, root, r, err)) goto fail;
    if (parse_speculative(c, root, r, err)) goto fail;
    if (kind == G4_API_COMPLETION) {
        json_t *sfx = json_object_get(root, "suffix");
        if (sfx && !json_is_null(sfx) && !(json_is_string(sfx) && !json_string_length(sfx))) {
            (void)BAD("suffix", "'suffix' (fill in the middle) is not supported");
            goto fail;
        }
        if ((rc = get_int(root, "best_of", 1, G4_MAX_N, &i, err)) < 0) goto fail;
        if (rc && i != o->n) {
            (void)BAD("best_of", "'best_of' other than n is not supported (choices are not ranked)");
            goto fail;
        }
    }
    if (kind == G4_API_CHAT) {
        r->chat = 1;
        if (parse_chat_controls(c, root, r, err)) goto fail;
        if (g4_media_request_opts(c, root, r, err)) goto fail;   /* before the parts' images load */
    }
    /* llama-server's "grammar": GBNF text the output must follow (the same engine as
     * response_format's JSON) */
    json_t *gr = json_object_get(root, "grammar");
    if (gr && !json_is_null(gr)) {
        if (!json_is_string(gr)) { (void)BADTYPE("grammar", "a string of GBNF"); goto fail; }
        if (r->gbnf) { (void)BAD("grammar", "'grammar' excludes a JSON response_format and a required tool_choice"); goto fail; }
        if (json_string_length(gr)) {
            r->grammar_param = "grammar";
            if (!(r->gbnf = strdup(json_string_value(gr)))) { g4_api_err(err, 500, "server_error", NULL, NULL, "out of memory"); goto fail; }
            if (constrain(c, r, err)) goto fail;
        }
    }

    /* max_tokens: OpenAI's default is 16 for completions and "until the context is full" for chat */
    long long mt = kind == G4_API_CHAT ? (1ll << 30) : 16;
    const char *mt_key = kind == G4_API_CHAT && json_object_get(root, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    json_t *mtv = json_object_get(root, mt_key);
    if (mtv && !json_is_null(mtv)) {
        if (!json_is_integer(mtv)) { (void)BADTYPE(mt_key, "an integer"); goto fail; }
        mt = json_integer_value(mtv);
        if (mt <= 0) { (void)BAD(mt_key, "'%s' is %lld; it must be at least 1", mt_key, mt); goto fail; }
    }
    r->max_tokens = mt > (1 << 30) ? (1 << 30) : (int)mt;

    if (kind == G4_API_CHAT) {
        if (get_bool(root, "logprobs", &b, err) < 0) goto fail;
        if ((rc = get_int(root, "top_logprobs", 0, G4_MAX_TOP_LOGPROBS, &i, err)) < 0) goto fail;
        if (rc && !b) { (void)BAD("top_logprobs", "'top_logprobs' needs 'logprobs': true"); goto fail; }
        o->logprobs = b;
        r->n_top_logprobs = b ? (rc ? (int)i : 0) : -1;
    } else if (kind == G4_API_COMPLETION) {
        if ((rc = get_int(root, "logprobs", 0, G4_MAX_TOP_LOGPROBS, &i, err)) < 0) goto fail;
        o->logprobs = rc ? (int)i : -1;
        r->n_top_logprobs = rc ? (int)i : -1;
        if (get_bool(root, "echo", &b, err) < 0) goto fail;
        if (b) { (void)BAD("echo", "'echo' is not supported"); goto fail; }
    }

    if (kind == G4_API_CHAT ? parse_chat_prompt(c, root, r, err) : parse_text_prompt(c, root, r, err)) goto fail;
    if (r->n_prompt == 0) { (void)BAD(prompt_param, "the prompt is empty"); goto fail; }
    if (r->n_prompt > c->info->ctx) {
        g4_api_err(err, 400, "invalid_request_error", prompt_param, "context_length_exceeded",
                   "This model's maximum context length is %d tokens. However, your prompt has %d tokens.",
                   c->info->ctx, r->n_prompt);
        goto fail;
    }
    if (r->chat && g4_chat_parser_new(c->tok, (const char *const *)r->stop, r->n_stop, &r->parser)) {
        g4_api_err(err, 500, "server_error", NULL, NULL, "%s", g4_last_error());
        goto fail;
    }
    reqs[0] = r;
    for (int k = 1; k < o->n; k++) {
        if (!(reqs[k] = clone_req(c, r, k))) {
            for (int j = 1; j < k; j++) g4_req_release(reqs[j]);
            reqs[0] = NULL;
            g4_api_err(err, 500, "server_error", NULL, NULL, "out of memory");
            goto fail;
        }
    }
    json_decref(root);
    return r;
fail:
    json_decref(root);
    g4_req_release(r);
    return NULL;
}

/* ---------------------------------------------------------------- responses */

const char *g4_finish_name(g4_finish f) {
    switch (f) {
    case G4_FIN_STOP: return "stop";
    case G4_FIN_LENGTH: return "length";
    case G4_FIN_CANCELLED: return "abort";
    case G4_FIN_ERROR: return "error";
    default: return NULL;
    }
}

static json_t *jlp(float lp) { return json_real(isfinite(lp) ? lp : -9999.0); }

/* A token's own text (specials included) as a JSON string + its raw bytes. */
static json_t *tok_text(const g4_api_ctx *c, int32_t id, json_t **bytes) {
    char *t = NULL;
    size_t n = 0;
    if (g4_detokenize(c->tok, &id, 1, 0, &t, &n)) n = 0;
    if (bytes) {
        *bytes = json_array();
        for (size_t i = 0; i < n; i++) json_array_append_new(*bytes, json_integer((unsigned char)t[i]));
    }
    json_t *s = jstr_lossy(t ? t : "", n);
    free(t);
    return s;
}

/* chat: {"content": [{token, logprob, bytes, top_logprobs: [...]}, ...]} for tokens [k0, k1) */
static json_t *chat_logprobs(const g4_api_ctx *c, const g4_req *r, int k0, int k1) {
    json_t *content = json_array();
    for (int k = k0; k < k1; k++) {
        const g4_tok_info *t = &r->toks[k];
        json_t *bytes, *top = json_array();
        json_t *e = json_object();
        json_object_set_new(e, "token", tok_text(c, t->id, &bytes));
        json_object_set_new(e, "logprob", jlp(t->lp));
        json_object_set_new(e, "bytes", bytes);
        for (int j = 0; j < t->n_top; j++) {
            json_t *tb, *te = json_object();
            json_object_set_new(te, "token", tok_text(c, t->top_ids[j], &tb));
            json_object_set_new(te, "logprob", jlp(t->top_lps[j]));
            json_object_set_new(te, "bytes", tb);
            json_array_append_new(top, te);
        }
        json_object_set_new(e, "top_logprobs", top);
        json_array_append_new(content, e);
    }
    return json_pack("{s:o}", "content", content);
}

/* completions (legacy): {tokens, token_logprobs, top_logprobs: [{text: lp}], text_offset} */
static json_t *completion_logprobs(const g4_api_ctx *c, const g4_req *r, int k0, int k1, size_t offset0) {
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    size_t off = offset0;
    for (int k = k0; k < k1; k++) {
        const g4_tok_info *t = &r->toks[k];
        json_t *s = tok_text(c, t->id, NULL);
        json_array_append_new(offs, json_integer((json_int_t)off));
        off += json_string_length(s);
        json_array_append_new(toks, s);
        json_array_append_new(lps, jlp(t->lp));
        json_t *top = json_object();
        for (int j = 0; j < t->n_top; j++) {
            json_t *ts = tok_text(c, t->top_ids[j], NULL);
            json_object_set_new(top, json_string_value(ts), jlp(t->top_lps[j]));
            json_decref(ts);
        }
        json_array_append_new(tops, top);
    }
    return json_pack("{s:o,s:o,s:o,s:o}", "tokens", toks, "token_logprobs", lps, "top_logprobs", tops, "text_offset", offs);
}

static json_t *token_ids(const g4_req *r, int k0, int k1) {
    json_t *a = json_array();
    for (int k = k0; k < k1; k++) json_array_append_new(a, json_integer(r->toks[k].id));
    return a;
}

static char *dump(json_t *o) {
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

/* The finish reason a client sees: a chat message that stopped after tool calls ends in
 * "tool_calls", as OpenAI's do. */
static const char *finish_name(const g4_req *r) {
    if (r->finish == G4_FIN_STOP && r->parser && g4_chat_parser_n_calls(r->parser)) return "tool_calls";
    return g4_finish_name(r->finish);
}

static void call_prefix(const g4_api_opts *o, int index, char *out, size_t cap) {
    snprintf(out, cap, "%s%d_", o->call_prefix, index);
}

size_t g4_api_ready(const g4_req *r) {
    return r->parser ? (size_t)g4_chat_parser_n_deltas(r->parser) : r->text_ready;
}

static json_t *chat_message(const g4_api_opts *o, const g4_req *r, int index) {
    char pre[64];
    call_prefix(o, index, pre, sizeof pre);
    char *mj = g4_chat_message_json(r->parser, pre);
    json_t *m = mj ? json_loads(mj, JSON_ALLOW_NUL, NULL) : NULL;
    free(mj);
    return m ? m : json_pack("{s:s,s:s}", "role", "assistant", "content", "");
}

char *g4_api_response_json(const g4_api_ctx *c, const g4_api_opts *o, g4_req **reqs) {
    if (o->kind == G4_API_RESPONSES) return g4_responses_json(c, o, reqs[0]);
    json_t *out;
    if (o->kind == G4_API_GENERATE) {
        g4_req *r = reqs[0];
        pthread_mutex_lock(&r->mu);
        out = json_pack("{s:o,s:i,s:i,s:s?,s:o}", "text", jstr_lossy(r->text ? r->text : "", r->text_len), "prompt_tokens",
                        r->n_prompt, "completion_tokens", r->n_toks, "finish_reason", g4_finish_name(r->finish), "token_ids",
                        token_ids(r, 0, r->n_toks));
        pthread_mutex_unlock(&r->mu);
        return dump(out);
    }
    json_t *choices = json_array();
    int n_gen = 0;
    for (int i = 0; i < o->n; i++) {
        g4_req *r = reqs[i];
        pthread_mutex_lock(&r->mu);
        const char *fin = finish_name(r);
        json_t *choice = json_object();
        json_object_set_new(choice, "index", json_integer(i));
        if (o->kind == G4_API_CHAT) {
            json_object_set_new(choice, "message", chat_message(o, r, i));
            json_object_set_new(choice, "logprobs", o->logprobs > 0 ? chat_logprobs(c, r, 0, r->n_toks) : json_null());
        } else {
            json_object_set_new(choice, "text", jstr_lossy(r->text ? r->text : "", r->text_len));
            json_object_set_new(choice, "logprobs", o->logprobs >= 0 ? completion_logprobs(c, r, 0, r->n_toks, 0) : json_null());
        }
        json_object_set_new(choice, "finish_reason", fin ? json_string(fin) : json_null());
        if (o->return_token_ids) json_object_set_new(choice, "token_ids", token_ids(r, 0, r->n_toks));
        json_array_append_new(choices, choice);
        n_gen += r->n_toks;
        pthread_mutex_unlock(&r->mu);
    }
    json_t *use = json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", reqs[0]->n_prompt, "completion_tokens", n_gen,
                            "total_tokens", reqs[0]->n_prompt + n_gen, "prompt_tokens_details", "cached_tokens",
                            reqs[0]->n_cached);
    out = json_pack("{s:s,s:s,s:I,s:s,s:o,s:o,s:n}", "id", o->id, "object",
                    o->kind == G4_API_CHAT ? "chat.completion" : "text_completion", "created", (json_int_t)o->created,
                    "model", c->model_name, "choices", choices, "usage", use, "system_fingerprint");
    return dump(out);
}

static void append(char **buf, size_t *len, const char *s, size_t n) {
    char *nb = realloc(*buf, *len + n + 1);
    if (!nb) return;
    memcpy(nb + *len, s, n);
    *len += n;
    nb[*len] = 0;
    *buf = nb;
}

static void append_event(char **buf, size_t *len, json_t *o) {
    char *s = dump(o);
    if (!s) return;
    append(buf, len, "data: ", 6);
    append(buf, len, s, strlen(s));
    append(buf, len, "\n\n", 2);
    free(s);
}

void g4_api_stream_chunk(const g4_api_ctx *c, const g4_api_opts *o, const g4_req *r, int index, size_t t0, size_t t1,
                         int k0, int k1, int first, int fin, char **buf, size_t *len) {
    if (o->kind == G4_API_RESPONSES) { g4_responses_events(c, o, r, t0, t1, fin, buf, len); return; }
    const char *fr = fin ? finish_name(r) : NULL;
    json_t *choice = json_object();
    json_object_set_new(choice, "index", json_integer(index));
    if (o->kind == G4_API_CHAT) {
        json_t *delta = NULL;
        if (t1 > t0) {
            char pre[64];
            call_prefix(o, index, pre, sizeof pre);
            char *dj = g4_chat_delta_json(r->parser, (int)t0, (int)t1, pre);
            delta = dj ? json_loads(dj, JSON_ALLOW_NUL, NULL) : NULL;
            free(dj);
        }
        if (!delta) delta = json_object();
        if (first) {
            json_object_set_new(delta, "role", json_string("assistant"));
            if (!json_object_get(delta, "content")) json_object_set_new(delta, "content", json_string(""));
        }
        json_object_set_new(choice, "delta", delta);
        json_object_set_new(choice, "logprobs", o->logprobs > 0 && k1 > k0 ? chat_logprobs(c, r, k0, k1) : json_null());
    } else {
        json_object_set_new(choice, "text", jstr_lossy(r->text ? r->text + t0 : "", t1 - t0));
        json_object_set_new(choice, "logprobs", o->logprobs >= 0 && k1 > k0 ? completion_logprobs(c, r, k0, k1, t0) : json_null());
    }
    json_object_set_new(choice, "finish_reason", fr ? json_string(fr) : json_null());
    if (o->return_token_ids) json_object_set_new(choice, "token_ids", token_ids(r, k0, k1));
    json_t *ev = json_pack("{s:s,s:s,s:I,s:s,s:[o],s:n}", "id", o->id, "object",
                           o->kind == G4_API_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                           (json_int_t)o->created, "model", c->model_name, "choices", choice, "system_fingerprint");
    if (ev && o->include_usage) json_object_set_new(ev, "usage", json_null());
    append_event(buf, len, ev);
}

void g4_api_stream_usage(const g4_api_ctx *c, const g4_api_opts *o, g4_req **reqs, char **buf, size_t *len) {
    int n_gen = 0;
    for (int i = 0; i < o->n; i++) n_gen += reqs[i]->n_toks;
    json_t *use = json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", reqs[0]->n_prompt, "completion_tokens", n_gen,
                            "total_tokens", reqs[0]->n_prompt + n_gen, "prompt_tokens_details", "cached_tokens",
                            reqs[0]->n_cached);
    json_t *ev = json_pack("{s:s,s:s,s:I,s:s,s:[],s:o}", "id", o->id, "object",
                           o->kind == G4_API_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                           (json_int_t)o->created, "model", c->model_name, "choices", "usage", use);
    append_event(buf, len, ev);
}

static json_t *model_object(const g4_api_ctx *c, long created) {
    json_t *m = json_pack("{s:s,s:s,s:I,s:s}", "id", c->model_name, "object", "model", "created", (json_int_t)created,
                          "owned_by", "gemma4c");
    if (m && c->info) json_object_set_new(m, "max_model_len", json_integer(c->info->ctx));   /* NULL while loading */
    return m;
}

char *g4_api_models_json(const g4_api_ctx *c, long created) {
    return dump(json_pack("{s:s,s:[o]}", "object", "list", "data", model_object(c, created)));
}

char *g4_api_model_json(const g4_api_ctx *c, const char *id, long created, g4_api_error *err) {
    if (strcmp(id, c->model_name)) {
        g4_api_err(err, 404, "invalid_request_error", "model", "model_not_found",
                   "The model '%s' does not exist; this server serves '%s'", id, c->model_name);
        return NULL;
    }
    return dump(model_object(c, created));
}

json_t *g4_api_load_object(const char *body, size_t len, g4_api_error *err) {
    json_error_t je;
    json_t *root = json_loadb(body, len, 0, &je);
    if (!root) {
        g4_api_err(err, 400, "invalid_request_error", NULL, "invalid_json",
                   "We could not parse the JSON body of your request: %s (line %d, column %d)", je.text, je.line, je.column);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        g4_api_err(err, 400, "invalid_request_error", NULL, "invalid_type", "the body must be a JSON object");
        return NULL;
    }
    return root;
}

/* {"content": text, "add_special": false, "with_pieces": false} -> {"tokens": [ids]} or, with
 * pieces, {"tokens": [{"id", "piece"}]} (a piece that is not UTF-8 by itself: its bytes). Special
 * tokens written as text become the special tokens, as in llama-server's default. */
char *g4_api_tokenize_json(const g4_api_ctx *c, const char *body, size_t len, g4_api_error *err) {
    static const char *const fields[] = {"content", "add_special", "with_pieces", "parse_special", "model", NULL};
    json_t *root = g4_api_load_object(body, len, err);
    if (!root) return NULL;
    char *out = NULL;
    int add_special = 0, pieces = 0, parse_special = 1;
    json_t *content = json_object_get(root, "content");
    if (only_fields(root, fields, err) || get_bool(root, "add_special", &add_special, err) < 0 ||
        get_bool(root, "with_pieces", &pieces, err) < 0 || get_bool(root, "parse_special", &parse_special, err) < 0)
        goto done;
    if (!json_is_string(content)) {
        (void)BADTYPE("content", "a string");
        goto done;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    /* parse_special false (llama-server's field): special-token text is text */
    const size_t whole[2] = {0, json_string_length(content)};
    if (g4_tokenize_plain(c->tok, json_string_value(content), json_string_length(content), add_special, whole,
                          parse_special ? 0 : 1, &ids, &n)) {
        char msg[512];
        client_message(c, g4_last_error(), msg, sizeof msg);
        g4_api_err(err, 400, "invalid_request_error", "content", "invalid_value", "%s", msg);
        goto done;
    }
    json_t *toks = json_array();
    for (size_t i = 0; i < n; i++) {
        if (!pieces) { json_array_append_new(toks, json_integer(ids[i])); continue; }
        char *t = NULL;
        size_t tl = 0;
        if (g4_detokenize(c->tok, &ids[i], 1, 0, &t, &tl)) tl = 0;
        json_t *piece = json_stringn(t ? t : "", tl);
        if (!piece) {
            piece = json_array();
            for (size_t k = 0; k < tl; k++) json_array_append_new(piece, json_integer((unsigned char)t[k]));
        }
        free(t);
        json_array_append_new(toks, json_pack("{s:i,s:o}", "id", ids[i], "piece", piece));
    }
    free(ids);
    out = dump(json_pack("{s:o}", "tokens", toks));
done:
    json_decref(root);
    return out;
}

/* {"tokens": [ids]} -> {"content": text}, special tokens written out as llama-server does. */
char *g4_api_detokenize_json(const g4_api_ctx *c, const char *body, size_t len, g4_api_error *err) {
    static const char *const fields[] = {"tokens", "model", NULL};
    json_t *root = g4_api_load_object(body, len, err);
    if (!root) return NULL;
    char *out = NULL;
    json_t *toks = json_object_get(root, "tokens");
    if (only_fields(root, fields, err)) goto done;
    if (!json_is_array(toks)) {
        (void)BADTYPE("tokens", "an array of token ids");
        goto done;
    }
    size_t n = json_array_size(toks);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) { g4_api_err(err, 500, "server_error", NULL, NULL, "out of memory"); goto done; }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(toks, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= c->info->vocab_size) {
            free(ids);
            (void)BAD("tokens", "tokens[%zu] is not a token id in [0, %d)", i, c->info->vocab_size);
            goto done;
        }
        ids[i] = (int32_t)json_integer_value(e);
    }
    char *text = NULL;
    size_t tl = 0;
    g4_status st = g4_detokenize(c->tok, ids, n, 0, &text, &tl);
    free(ids);
    if (st) { g4_api_err(err, 500, "server_error", NULL, NULL, "%s", g4_last_error()); goto done; }
    out = dump(json_pack("{s:o}", "content", jstr_lossy(text, tl)));
    free(text);
done:
    json_decref(root);
    return out;
}
