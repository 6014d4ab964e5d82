/* responses.c — OpenAI's Responses API (/v1/responses) over the chat path: a request body becomes
 * a chat completions request (input items -> messages, flat function tools -> chat tools, text
 * formats -> response_format, ...) that openai.c parses and the scheduler runs; the chat parser's
 * deltas become output items (reasoning, message, function_call) and the Responses SSE events.
 * Knows nothing of sockets or scheduling; nothing is stored (no previous_response_id). */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

#define BAD(param, ...) (g4_api_err(err, 400, "invalid_request_error", param, "invalid_value", __VA_ARGS__), -1)

/* Every field the route takes: the ones below are translated, the extensions are chat's own. */
static const char *const FIELDS[] = {
    "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "reasoning",
    "max_output_tokens", "temperature", "top_p", "text", "stream", "store", "metadata", "user", "truncation",
    /* extensions, as on chat completions */
    "seed", "top_k", "min_p", "chat_template_kwargs", "grammar", "mm_processor_kwargs", "speculative", NULL};

/* Fields of the Responses API this server does not implement, and why (a 400 naming them). */
static const struct { const char *field, *why; } REFUSED[] = {
    {"previous_response_id", "this server stores no responses; send the whole conversation in 'input'"},
    {"conversation", "this server stores no conversations; send the whole conversation in 'input'"},
    {"background", "background responses are not supported"},
    {"include", "'include' is not supported"},
    {"prompt", "stored prompts are not supported"},
    {"max_tool_calls", "'max_tool_calls' is not supported"},
    {"top_logprobs", "logprobs are not supported on /v1/responses (use /v1/chat/completions)"},
    {"service_tier", "'service_tier' is not supported"},
    {"prompt_cache_key", "'prompt_cache_key' is not supported"},
    {"safety_identifier", "'safety_identifier' is not supported"},
    {"stream_options", "'stream_options' is not supported"},
};

static json_t *text_part(const char *text) { return json_pack("{s:s,s:s}", "type", "text", "text", text); }

/* A message item's content (a string, or input_text / output_text parts) as chat content. */
static int message_content(json_t *content, size_t i, json_t **out, g4_api_error *err) {
    if (json_is_string(content)) { *out = json_incref(content); return 0; }
    if (!json_is_array(content)) return BAD("input", "input[%zu].content must be a string or an array of content parts", i);
    json_t *parts = json_array();
    size_t k;
    json_t *p;
    json_array_foreach(content, k, p) {
        const char *type = json_string_value(json_object_get(p, "type"));
        json_t *text = json_object_get(p, "text");
        if (type && (!strcmp(type, "input_text") || !strcmp(type, "output_text") || !strcmp(type, "text")) && json_is_string(text)) {
            json_array_append_new(parts, text_part(json_string_value(text)));
        } else if (type && !strcmp(type, "input_image")) {
            /* Responses' {"image_url": URL, "detail"} is chat's image_url part; chat checks the rest */
            json_t *url = json_object_get(p, "image_url"), *detail = json_object_get(p, "detail");
            if (!json_is_string(url)) {
                json_decref(parts);
                return BAD("input", "input[%zu].content[%zu]: an input_image needs an 'image_url' (this server stores no files)", i, k);
            }
            json_t *iu = json_pack("{s:O}", "url", url);
            if (detail && !json_is_null(detail)) json_object_set(iu, "detail", detail);
            json_array_append_new(parts, json_pack("{s:s,s:o}", "type", "image_url", "image_url", iu));
        } else if (type && !strcmp(type, "input_audio")) {
            json_array_append_new(parts, json_deep_copy(p));   /* the same shape as chat's */
        } else {
            json_decref(parts);
            return BAD("input", "input[%zu].content[%zu]: content parts of type '%s' are not supported", i, k, type ? type : "(none)");
        }
    }
    *out = parts;
    return 0;
}

/* The assistant message function calls attach to: the last message when it is the assistant's,
 * else a new one. */
static json_t *assistant_for_calls(json_t *msgs) {
    size_t n = json_array_size(msgs);
    json_t *last = n ? json_array_get(msgs, n - 1) : NULL;
    const char *role = json_string_value(json_object_get(last, "role"));
    if (role && !strcmp(role, "assistant")) return last;
    json_t *m = json_pack("{s:s,s:n}", "role", "assistant", "content");
    json_array_append_new(msgs, m);
    return m;
}

/* input: a string (one user message) or a list of items: messages, function_call,
 * function_call_output, reasoning (its text goes with the next assistant message). */
static int input_messages(json_t *root, json_t *msgs, g4_api_error *err) {
    json_t *ins = json_object_get(root, "instructions");
    if (ins && !json_is_null(ins)) {
        if (!json_is_string(ins)) return BAD("instructions", "'instructions' must be a string");
        json_array_append_new(msgs, json_pack("{s:s,s:O}", "role", "system", "content", ins));
    }
    json_t *in = json_object_get(root, "input");
    if (!in || json_is_null(in))
        return g4_api_err(err, 400, "invalid_request_error", "input", "missing_required_parameter", "'input' is a required property"), -1;
    if (json_is_string(in)) {
        json_array_append_new(msgs, json_pack("{s:s,s:O}", "role", "user", "content", in));
        return 0;
    }
    if (!json_is_array(in) || !json_array_size(in)) return BAD("input", "'input' must be a string or a non-empty array of items");
    json_t *reasoning = NULL;   /* a reasoning item's text, for the next assistant message */
#define BAD_R(...) (json_decref(reasoning), BAD(__VA_ARGS__))
    size_t i;
    json_t *it;
    json_array_foreach(in, i, it) {
        if (!json_is_object(it)) return BAD_R("input", "input[%zu] must be an object", i);
        const char *type = json_string_value(json_object_get(it, "type"));
        const char *role = json_string_value(json_object_get(it, "role"));
        json_t *m = NULL;
        if (!type || !strcmp(type, "message")) {
            static const char *const roles[] = {"user", "assistant", "system", "developer", NULL};
            int ok = 0;
            for (int k = 0; role && roles[k]; k++) ok |= !strcmp(role, roles[k]);
            if (!ok) return BAD_R("input", "input[%zu].role must be one of user, assistant, system, developer", i);
            json_t *content;
            if (message_content(json_object_get(it, "content"), i, &content, err)) return json_decref(reasoning), -1;
            m = json_pack("{s:s,s:o}", "role", role, "content", content);
            json_array_append_new(msgs, m);
        } else if (!strcmp(type, "function_call")) {
            json_t *id = json_object_get(it, "call_id"), *name = json_object_get(it, "name"), *args = json_object_get(it, "arguments");
            if (!json_is_string(id) || !json_is_string(name) || !json_is_string(args))
                return BAD_R("input", "input[%zu]: a function_call item needs string 'call_id', 'name' and 'arguments'", i);
            m = assistant_for_calls(msgs);
            json_t *calls = json_object_get(m, "tool_calls");
            if (!calls) json_object_set_new(m, "tool_calls", calls = json_array());
            json_array_append_new(calls, json_pack("{s:O,s:s,s:{s:O,s:O}}", "id", id, "type", "function", "function", "name",
                                                   name, "arguments", args));
        } else if (!strcmp(type, "function_call_output")) {
            json_t *id = json_object_get(it, "call_id"), *out = json_object_get(it, "output");
            if (!json_is_string(id)) return BAD_R("input", "input[%zu]: a function_call_output item needs a string 'call_id'", i);
            json_t *content;
            if (json_is_string(out)) content = json_incref(out);
            else if (message_content(out, i, &content, err)) return json_decref(reasoning), -1;
            json_array_append_new(msgs, json_pack("{s:s,s:O,s:o}", "role", "tool", "tool_call_id", id, "content", content));
        } else if (!strcmp(type, "reasoning")) {
            size_t k;
            json_t *p;
            json_t *parts = json_object_get(it, "content");
            json_array_foreach(parts, k, p) {
                json_t *t = json_object_get(p, "text");
                if (!json_is_string(t)) continue;
                char *joined = NULL;
                if (asprintf(&joined, "%s%s", reasoning ? json_string_value(reasoning) : "", json_string_value(t)) < 0) joined = NULL;
                json_decref(reasoning);
                reasoning = joined ? json_string(joined) : NULL;
                free(joined);
            }
            continue;
        } else {
            return BAD_R("input", "input[%zu]: items of type '%s' are not supported", i, type);
        }
        if (reasoning && json_is_string(json_object_get(m, "role")) && !strcmp(json_string_value(json_object_get(m, "role")), "assistant")) {
            json_object_set_new(m, "reasoning_content", reasoning);
            reasoning = NULL;
        }
    }
    json_decref(reasoning);
    return 0;
#undef BAD_R
}

/* tools: Responses' flat function tools ({"type": "function", "name", "description",
 * "parameters", "strict"}) as chat tools; built-in tools are not offered. */
static int chat_tools(json_t *tools, json_t **out, g4_api_error *err) {
    if (!json_is_array(tools)) return BAD("tools", "'tools' must be an array of function tools");
    json_t *a = json_array();
    *out = a;
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        const char *type = json_string_value(json_object_get(t, "type"));
        if (!type || strcmp(type, "function"))
            return BAD("tools", "tools[%zu]: only function tools are supported, not '%s'", i, type ? type : "(no type)");
        json_t *name = json_object_get(t, "name");
        if (!json_is_string(name)) return BAD("tools", "tools[%zu] must be {\"type\": \"function\", \"name\": ..., ...}", i);
        json_t *f = json_pack("{s:O}", "name", name);
        json_t *d = json_object_get(t, "description"), *p = json_object_get(t, "parameters");
        if (json_is_string(d)) json_object_set(f, "description", d);
        if (p && !json_is_null(p)) json_object_set(f, "parameters", p);
        json_array_append_new(a, json_pack("{s:s,s:o}", "type", "function", "function", f));
    }
    return 0;
}

static int chat_tool_choice(json_t *tc, json_t **out, g4_api_error *err) {
    if (json_is_string(tc)) { *out = json_incref(tc); return 0; }
    const char *type = json_string_value(json_object_get(tc, "type"));
    json_t *name = json_object_get(tc, "name");
    if (json_is_object(tc) && type && !strcmp(type, "function") && json_is_string(name)) {
        *out = json_pack("{s:s,s:{s:O}}", "type", "function", "function", "name", name);
        return 0;
    }
    return BAD("tool_choice", "'tool_choice' must be 'none', 'auto', 'required' or {\"type\": \"function\", \"name\": ...}");
}

/* text.format -> response_format */
static int chat_format(json_t *text, json_t *chat, g4_api_error *err) {
    if (!json_is_object(text)) return BAD("text", "'text' must be an object");
    const char *k;
    json_t *v;
    json_object_foreach(text, k, v)
        if (strcmp(k, "format") && !json_is_null(v)) return BAD("text", "text.%s is not supported", k);
    json_t *f = json_object_get(text, "format");
    if (!f || json_is_null(f)) return 0;
    const char *type = json_string_value(json_object_get(f, "type"));
    if (!type) return BAD("text", "text.format must be an object with a string 'type'");
    if (!strcmp(type, "text") || !strcmp(type, "json_object")) {
        json_object_set_new(chat, "response_format", json_pack("{s:s}", "type", type));
    } else if (!strcmp(type, "json_schema")) {
        json_t *js = json_object();
        json_t *name = json_object_get(f, "name"), *schema = json_object_get(f, "schema"), *strict = json_object_get(f, "strict");
        if (name) json_object_set(js, "name", name);
        if (schema) json_object_set(js, "schema", schema);
        if (strict) json_object_set(js, "strict", strict);
        json_object_set_new(chat, "response_format", json_pack("{s:s,s:o}", "type", "json_schema", "json_schema", js));
    } else {
        return BAD("text", "text.format type '%s' is not one of text, json_object, json_schema", type);
    }
    return 0;
}

/* The chat request for a Responses body, and the fields its response object repeats. */
static int translate(const g4_api_ctx *c, json_t *root, json_t *chat, json_t *echo, g4_api_error *err) {
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        const int empty = json_is_null(v) || (json_is_array(v) && !json_array_size(v));
        for (size_t i = 0; i < sizeof REFUSED / sizeof REFUSED[0]; i++)
            if (!strcmp(k, REFUSED[i].field) && !empty) return BAD(REFUSED[i].field, "%s", REFUSED[i].why);
        int known = 0;
        for (int i = 0; FIELDS[i] && !known; i++) known = !strcmp(FIELDS[i], k);
        if (!known) {
            static _Thread_local char key[64];   /* err->param outlives the body */
            snprintf(key, sizeof key, "%s", k);
            return g4_api_err(err, 400, "invalid_request_error", key, "unsupported_parameter",
                              "Unrecognized request argument supplied: %s", k), -1;
        }
    }
    if (!c->tmpl) return BAD("input", "this model has no chat template; use /v1/completions");
    if (json_is_true(json_object_get(root, "store")))
        return BAD("store", "this server stores no responses: 'store' must be false or absent");
    json_t *tr = json_object_get(root, "truncation");
    if (tr && !json_is_null(tr) && !(json_is_string(tr) && !strcmp(json_string_value(tr), "disabled")))
        return BAD("truncation", "only 'truncation': 'disabled' is supported (a prompt longer than the context is a 400)");
    json_t *msgs = json_array();
    json_object_set_new(chat, "messages", msgs);
    if (input_messages(root, msgs, err)) return -1;
    static const char *const same[] = {"model", "temperature", "top_p", "stream", "parallel_tool_calls", "seed", "top_k",
                                       "min_p", "chat_template_kwargs", "metadata", "user", "grammar",
                                       "mm_processor_kwargs", "speculative", NULL};
    /* passed through: chat's parser checks them (speculative: openai.c's parse_speculative) */
    for (int i = 0; same[i]; i++)
        if ((v = json_object_get(root, same[i]))) json_object_set(chat, same[i], v);
    if ((v = json_object_get(root, "max_output_tokens")) && !json_is_null(v)) json_object_set(chat, "max_tokens", v);
    json_t *tools = json_object_get(root, "tools"), *ctools = NULL;
    if (tools && !json_is_null(tools)) {
        if (chat_tools(tools, &ctools, err)) { json_decref(ctools); return -1; }
        json_object_set_new(chat, "tools", ctools);
    }
    json_t *tc = json_object_get(root, "tool_choice"), *ctc = NULL;
    if (tc && !json_is_null(tc)) {
        if (chat_tool_choice(tc, &ctc, err)) return -1;
        json_object_set_new(chat, "tool_choice", ctc);
    }
    json_t *re = json_object_get(root, "reasoning");
    if (re && !json_is_null(re)) {
        if (!json_is_object(re)) return BAD("reasoning", "'reasoning' must be an object");
        json_object_foreach(re, k, v) {
            if (json_is_null(v)) continue;
            if (!strcmp(k, "effort")) json_object_set(chat, "reasoning_effort", v);
            else return BAD("reasoning", "reasoning.%s is not supported (the reasoning comes back whole, as reasoning_text)", k);
        }
    }
    json_t *text = json_object_get(root, "text");
    if (text && !json_is_null(text) && chat_format(text, chat, err)) return -1;
    /* what the response object repeats of the request */
    static const char *const repeated[] = {"instructions", "max_output_tokens"};
    for (int i = 0; i < 2; i++) {
        json_t *x = json_object_get(root, repeated[i]);
        json_object_set_new(echo, repeated[i], x ? json_incref(x) : json_null());
    }
    json_t *ptc = json_object_get(root, "parallel_tool_calls");
    json_object_set_new(echo, "parallel_tool_calls", json_boolean(!json_is_false(ptc)));
    json_object_set_new(echo, "tool_choice", tc && !json_is_null(tc) ? json_incref(tc) : json_string("auto"));
    json_object_set_new(echo, "tools", tools && !json_is_null(tools) ? json_incref(tools) : json_array());
    json_t *eff = re ? json_object_get(re, "effort") : NULL;
    json_object_set_new(echo, "reasoning", json_pack("{s:O,s:n}", "effort", eff ? eff : json_null(), "summary"));
    json_t *fmt = text ? json_object_get(text, "format") : NULL;
    fmt = fmt && !json_is_null(fmt) ? json_incref(fmt) : json_pack("{s:s}", "type", "text");
    json_object_set_new(echo, "text", json_pack("{s:o}", "format", fmt));
    json_t *md = json_object_get(root, "metadata");
    json_object_set_new(echo, "metadata", json_is_object(md) ? json_incref(md) : json_object());
    json_object_set_new(echo, "store", json_false());
    json_object_set_new(echo, "truncation", json_string("disabled"));
    json_object_set_new(echo, "previous_response_id", json_null());
    return 0;
}

/* chat's names for the fields it checks -> the Responses names the client sent */
static void rename_param(g4_api_error *err) {
    static const char *const map[][2] = {{"messages", "input"}, {"max_tokens", "max_output_tokens"},
                                         {"response_format", "text"}, {"reasoning_effort", "reasoning"}};
    for (size_t i = 0; err->param && i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(err->param, map[i][0])) err->param = map[i][1];
}

g4_req *g4_responses_parse(const g4_api_ctx *c, const char *body, size_t len, g4_api_opts *o, g4_req **reqs,
                           g4_api_error *err) {
    memset(o, 0, sizeof *o);
    reqs[0] = NULL;
    json_t *root = g4_api_load_object(body, len, err);
    if (!root) return NULL;
    json_t *chat = json_object(), *echo = json_object();
    g4_req *r = NULL;
    char *cbody = NULL;
    if (!translate(c, root, chat, echo, err) && (cbody = json_dumps(chat, JSON_COMPACT))) {
        r = g4_api_parse(c, G4_API_CHAT, cbody, strlen(cbody), o, reqs, err);
        if (!r) rename_param(err);
    }
    if (r) {
        o->kind = G4_API_RESPONSES;
        if (!(r->api_echo = json_dumps(echo, JSON_COMPACT))) {
            g4_req_release(r);
            reqs[0] = r = NULL;
            g4_api_err(err, 500, "server_error", NULL, NULL, "out of memory");
        }
    }
    free(cbody);
    json_decref(chat);
    json_decref(echo);
    json_decref(root);
    return r;
}

/* ---------------------------------------------------------------- output items and events */

/* The output as items: each run of reasoning deltas one reasoning item, each run of content one
 * message, each tool call one function_call. A walk over the parser's deltas [0, t1) that also
 * numbers the stream's events, writing those at or after delta `from` (-1: the opening ones). */
typedef struct {
    const g4_api_opts *o;
    const g4_req *r;
    const char *hex;      /* the id's random part: resp_HEX, msg_HEX_k, ... */
    json_t *items;        /* non-streaming: the items collected here */
    char **buf;           /* streaming: events appended here */
    size_t *len;
    long from;
    int seq;
    /* the open item */
    int kind, out_index, call_index;
    const char *name;
    char *text;
    size_t text_len;
} walk;

static void append(walk *w, const char *s, size_t n) {
    char *nb = realloc(*w->buf, *w->len + n + 1);
    if (!nb) return;
    memcpy(nb + *w->len, s, n);
    *w->len += n;
    nb[*w->len] = 0;
    *w->buf = nb;
}

/* Counts an event; 1 when it is to be written (triggered at or after `from`). */
static int wanted(walk *w, long trigger) {
    w->seq++;
    return w->buf && trigger >= w->from;
}

static void write_event(walk *w, json_t *ev) {
    if (!ev) return;
    json_object_set_new(ev, "sequence_number", json_integer(w->seq - 1));
    char *s = json_dumps(ev, JSON_COMPACT);
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (s && type) {
        append(w, "event: ", 7);
        append(w, type, strlen(type));
        append(w, "\ndata: ", 7);
        append(w, s, strlen(s));
        append(w, "\n\n", 2);
    }
    free(s);
    json_decref(ev);
}

/* A JSON string from generated text: each byte that does not begin a valid UTF-8 sequence
 * becomes U+FFFD (a random model's tokens can hold half a character), as chat's text does. */
static json_t *jtext(const char *s, size_t n) {
    json_t *j = json_stringn(s, n);
    if (j) return j;
    char *o = malloc(n * 3 + 1);
    size_t k = 0;
    for (size_t i = 0; o && i < n;) {
        unsigned char ch = (unsigned char)s[i];
        size_t L = ch < 0x80 ? 1 : (ch >> 5) == 6 ? 2 : (ch >> 4) == 14 ? 3 : (ch >> 3) == 30 ? 4 : 0;
        json_t *probe = L && ch && i + L <= n ? json_stringn(s + i, L) : NULL;   /* jansson judges overlongs */
        if (probe) { memcpy(o + k, s + i, L); k += L; i += L; json_decref(probe); }
        else { memcpy(o + k, "\xef\xbf\xbd", 3); k += 3; i++; }
    }
    j = o ? json_stringn(o, k) : NULL;
    free(o);
    return j ? j : json_string("");
}

static json_t *item_json(walk *w, const char *status) {
    char id[96];
    json_t *t = jtext(w->text ? w->text : "", w->text_len);
    if (w->kind == G4_DELTA_TOOL_CALL) {
        char call_id[96];
        snprintf(id, sizeof id, "fc_%s_%d", w->hex, w->out_index);
        snprintf(call_id, sizeof call_id, "%s0_%d", w->o->call_prefix, w->call_index);
        return json_pack("{s:s,s:s,s:s,s:s,s:o,s:s}", "type", "function_call", "id", id, "call_id", call_id, "name",
                         w->name ? w->name : "", "arguments", t, "status", status);
    }
    const int opening = !strcmp(status, "in_progress");   /* an added item has no content part yet */
    if (w->kind == G4_DELTA_REASONING) {
        snprintf(id, sizeof id, "rs_%s_%d", w->hex, w->out_index);
        if (opening) { json_decref(t); return json_pack("{s:s,s:s,s:[],s:[],s:s}", "type", "reasoning", "id", id, "summary", "content", "status", status); }
        return json_pack("{s:s,s:s,s:[],s:[{s:s,s:o}],s:s}", "type", "reasoning", "id", id, "summary", "content", "type",
                         "reasoning_text", "text", t, "status", status);
    }
    snprintf(id, sizeof id, "msg_%s_%d", w->hex, w->out_index);
    if (opening) { json_decref(t); return json_pack("{s:s,s:s,s:s,s:s,s:[]}", "type", "message", "id", id, "status", status, "role", "assistant", "content"); }
    return json_pack("{s:s,s:s,s:s,s:s,s:[{s:s,s:o,s:[],s:[]}]}", "type", "message", "id", id, "status", status, "role",
                     "assistant", "content", "type", "output_text", "text", t, "annotations", "logprobs");
}

static const char *item_id(walk *w, char *buf, size_t cap) {
    static const char *const pre[] = {"msg", "rs", "fc"};
    snprintf(buf, cap, "%s_%s_%d", pre[w->kind], w->hex, w->out_index);
    return buf;
}

static json_t *empty_part(int kind) {
    return kind == G4_DELTA_REASONING ? json_pack("{s:s,s:s}", "type", "reasoning_text", "text", "")
                                      : json_pack("{s:s,s:s,s:[]}", "type", "output_text", "text", "", "annotations");
}

static void open_item(walk *w, const g4_chat_delta *d, int out_index, long trigger) {
    w->kind = (int)d->kind;
    w->out_index = out_index;
    w->call_index = d->index;
    w->name = d->name;
    w->text_len = 0;
    char id[96];
    if (wanted(w, trigger)) {
        json_t *it = item_json(w, "in_progress");
        write_event(w, json_pack("{s:s,s:i,s:o}", "type", "response.output_item.added", "output_index", out_index, "item", it));
    }
    if (w->kind != G4_DELTA_TOOL_CALL && wanted(w, trigger))
        write_event(w, json_pack("{s:s,s:s,s:i,s:i,s:o}", "type", "response.content_part.added", "item_id", item_id(w, id, sizeof id),
                                 "output_index", out_index, "content_index", 0, "part", empty_part(w->kind)));
}

static void add_text(walk *w, const g4_chat_delta *d, long trigger) {
    char *nt = realloc(w->text, w->text_len + d->len + 1);
    if (!nt) return;
    w->text = nt;
    memcpy(w->text + w->text_len, d->text, d->len);
    w->text_len += d->len;
    char id[96];
    if (!wanted(w, trigger)) return;
    json_t *delta = jtext(d->text, d->len);
    item_id(w, id, sizeof id);
    if (w->kind == G4_DELTA_TOOL_CALL)
        write_event(w, json_pack("{s:s,s:s,s:i,s:o}", "type", "response.function_call_arguments.delta", "item_id", id,
                                 "output_index", w->out_index, "delta", delta));
    else if (w->kind == G4_DELTA_REASONING)
        write_event(w, json_pack("{s:s,s:s,s:i,s:i,s:o}", "type", "response.reasoning_text.delta", "item_id", id,
                                 "output_index", w->out_index, "content_index", 0, "delta", delta));
    else
        write_event(w, json_pack("{s:s,s:s,s:i,s:i,s:o,s:[]}", "type", "response.output_text.delta", "item_id", id,
                                 "output_index", w->out_index, "content_index", 0, "delta", delta, "logprobs"));
}

static void close_item(walk *w, const char *status, long trigger) {
    if (w->kind < 0) return;
    char id[96];
    item_id(w, id, sizeof id);
    json_t *t = NULL;
    if (w->kind == G4_DELTA_TOOL_CALL) {
        if (wanted(w, trigger))
            write_event(w, json_pack("{s:s,s:s,s:i,s:o,s:s}", "type", "response.function_call_arguments.done", "item_id", id,
                                     "output_index", w->out_index, "arguments", jtext(w->text, w->text_len), "name",
                                     w->name ? w->name : ""));
    } else {
        const int reasoning = w->kind == G4_DELTA_REASONING;
        if (wanted(w, trigger)) {
            t = jtext(w->text ? w->text : "", w->text_len);
            json_t *ev = json_pack("{s:s,s:s,s:i,s:i,s:O}", "type", reasoning ? "response.reasoning_text.done" : "response.output_text.done",
                                   "item_id", id, "output_index", w->out_index, "content_index", 0, "text", t);
            if (!reasoning) json_object_set_new(ev, "logprobs", json_array());
            write_event(w, ev);
            json_decref(t);
        }
        if (wanted(w, trigger)) {
            json_t *part = reasoning ? json_pack("{s:s,s:o}", "type", "reasoning_text", "text", jtext(w->text ? w->text : "", w->text_len))
                                     : json_pack("{s:s,s:o,s:[]}", "type", "output_text", "text", jtext(w->text ? w->text : "", w->text_len), "annotations");
            write_event(w, json_pack("{s:s,s:s,s:i,s:i,s:o}", "type", "response.content_part.done", "item_id", id,
                                     "output_index", w->out_index, "content_index", 0, "part", part));
        }
    }
    if (wanted(w, trigger))
        write_event(w, json_pack("{s:s,s:i,s:o}", "type", "response.output_item.done", "output_index", w->out_index, "item",
                                 item_json(w, status)));
    if (w->items) json_array_append_new(w->items, item_json(w, status));
    w->kind = -1;
}

/* Runs the walk over deltas [0, t1); fin: the output is whole (the last item closes). */
static void walk_deltas(walk *w, size_t t1, int fin, const char *last_status) {
    int n_out = 0;
    w->kind = -1;
    for (size_t i = 0; i < t1; i++) {
        const g4_chat_delta *d = g4_chat_parser_delta(w->r->parser, (int)i);
        if (d->kind == G4_DELTA_TOOL_CALL || (int)d->kind != w->kind) {
            close_item(w, "completed", (long)i);
            open_item(w, d, n_out++, (long)i);
        }
        add_text(w, d, (long)i);
    }
    if (fin) close_item(w, last_status, (long)t1);
}

/* completed, or incomplete when the token limit or the context cut the output */
static const char *status_of(const g4_req *r) {
    return r->finish == G4_FIN_LENGTH ? "incomplete" : r->finish == G4_FIN_STOP ? "completed" : "failed";
}

/* Generated tokens inside thought channels, their delimiters included. */
static int reasoning_tokens(const g4_api_ctx *c, const g4_req *r) {
    const int32_t open = g4_token_to_id(c->tok, "<|channel>"), close = g4_token_to_id(c->tok, "<channel|>");
    int n = 0, in = 0;
    for (int k = 0; open >= 0 && k < r->n_toks; k++) {
        if (r->toks[k].id == open) in = 1;
        n += in;
        if (r->toks[k].id == close) in = 0;
    }
    return n;
}

/* usage; cached_tokens: the prompt tokens the prompt cache supplied; cache_write_tokens is not
 * counted (0) */
static json_t *usage(const g4_api_ctx *c, const g4_req *r) {
    return json_pack("{s:i,s:{s:i,s:i},s:i,s:{s:i},s:i}", "input_tokens", r->n_prompt, "input_tokens_details", "cached_tokens",
                     r->n_cached, "cache_write_tokens", 0,
                     "output_tokens", r->n_toks, "output_tokens_details", "reasoning_tokens", reasoning_tokens(c, r),
                     "total_tokens", r->n_prompt + r->n_toks);
}

/* The Response object: the request's echo, then id, status, output and usage. */
static json_t *response_object(const g4_api_ctx *c, const g4_api_opts *o, const g4_req *r, const char *hex, const char *status,
                               json_t *output, int with_usage) {
    json_t *resp = r->api_echo ? json_loads(r->api_echo, 0, NULL) : NULL;
    if (!resp) resp = json_object();
    char id[96];
    snprintf(id, sizeof id, "resp_%s", hex);
    json_object_set_new(resp, "id", json_string(id));
    json_object_set_new(resp, "object", json_string("response"));
    json_object_set_new(resp, "created_at", json_integer(o->created));
    json_object_set_new(resp, "model", json_string(c->model_name));
    json_object_set_new(resp, "status", json_string(status));
    json_object_set_new(resp, "error", json_null());
    json_object_set_new(resp, "incomplete_details", !strcmp(status, "incomplete") ? json_pack("{s:s}", "reason", "max_output_tokens") : json_null());
    json_object_set_new(resp, "temperature", json_real(r->sp.temperature));
    json_object_set_new(resp, "top_p", json_real(r->sp.top_p));
    json_object_set_new(resp, "output", output);
    json_object_set_new(resp, "usage", with_usage ? usage(c, r) : json_null());
    return resp;
}

static const char *id_hex(const g4_api_opts *o) {
    const char *h = strchr(o->id, '-');
    return h ? h + 1 : o->id;
}

char *g4_responses_json(const g4_api_ctx *c, const g4_api_opts *o, g4_req *r) {
    pthread_mutex_lock(&r->mu);
    walk w = {.o = o, .r = r, .hex = id_hex(o), .items = json_array(), .from = LONG_MAX};
    const char *status = status_of(r);
    walk_deltas(&w, (size_t)g4_chat_parser_n_deltas(r->parser), 1, status);
    json_t *resp = response_object(c, o, r, w.hex, status, w.items, 1);
    pthread_mutex_unlock(&r->mu);
    free(w.text);
    char *s = json_dumps(resp, JSON_COMPACT);
    json_decref(resp);
    return s;
}

void g4_responses_events(const g4_api_ctx *c, const g4_api_opts *o, const g4_req *r, size_t t0, size_t t1, int fin,
                         char **buf, size_t *len) {
    walk w = {.o = o, .r = r, .hex = id_hex(o), .buf = buf, .len = len, .from = t0 ? (long)t0 : -1};
    const char *status = fin ? status_of(r) : "in_progress";
    /* the opening events: the response as it starts */
    if (wanted(&w, -1))
        write_event(&w, json_pack("{s:s,s:o}", "type", "response.created", "response",
                                  response_object(c, o, r, w.hex, "in_progress", json_array(), 0)));
    if (wanted(&w, -1))
        write_event(&w, json_pack("{s:s,s:o}", "type", "response.in_progress", "response",
                                  response_object(c, o, r, w.hex, "in_progress", json_array(), 0)));
    if (fin) w.items = json_array();
    walk_deltas(&w, t1, fin, status);
    if (fin && wanted(&w, (long)t1)) {
        const char *type = !strcmp(status, "completed") ? "response.completed"
                         : !strcmp(status, "incomplete") ? "response.incomplete" : "response.failed";
        write_event(&w, json_pack("{s:s,s:o}", "type", type, "response", response_object(c, o, r, w.hex, status, w.items, 1)));
        w.items = NULL;
    }
    json_decref(w.items);
    free(w.text);
}
