/* message.c — the OpenAI shapes of a parsed chat message (gemma4c.h): the whole assistant message
 * and the streaming delta of a range of the parser's deltas, shared by the server and
 * `gemma4c parse` so that both write the protocol the same way. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4c.h"

/* Text as a JSON string; bytes that are not UTF-8 (a byte token the model left unfinished) are
 * replaced one by one with U+FFFD so one bad byte never drops the text. */
static json_t *jstr(const char *s, size_t n) {
    json_t *j = json_stringn(s, n);
    if (j) return j;
    char *o = malloc(n * 3 + 1);
    size_t k = 0;
    if (!o) return json_string("");
    for (size_t i = 0; i < n; i++) {
        json_t *one = NULL;
        for (size_t L = 1; L <= 4 && i + L <= n && !one; L++)
            if ((one = json_stringn(s + i, L))) { memcpy(o + k, s + i, L); k += L; i += L - 1; }
        if (one) json_decref(one);
        else { memcpy(o + k, "\xef\xbf\xbd", 3); k += 3; }
    }
    j = json_stringn(o, k);
    free(o);
    return j ? j : json_string("");
}

static json_t *call_json(const g4_chat_delta *d, const char *prefix, int with_index) {
    char id[96];
    snprintf(id, sizeof id, "%s%d", prefix ? prefix : "call_", d->index);
    json_t *c = json_object();
    if (with_index) json_object_set_new(c, "index", json_integer(d->index));
    json_object_set_new(c, "id", json_string(id));
    json_object_set_new(c, "type", json_string("function"));
    json_object_set_new(c, "function", json_pack("{s:o,s:o}", "name", jstr(d->name, strlen(d->name)), "arguments",
                                                 jstr(d->text, d->len)));
    return c;
}

/* Concatenation of the text of deltas [i0, i1) of one kind; NULL when there is none. */
static char *concat(const g4_chat_parser *p, int i0, int i1, g4_delta_kind kind, size_t *len) {
    size_t n = 0;
    int any = 0;
    for (int i = i0; i < i1; i++) {
        const g4_chat_delta *d = g4_chat_parser_delta(p, i);
        if (d->kind == kind) { n += d->len; any = 1; }
    }
    if (!any) return NULL;
    char *s = malloc(n + 1);
    if (!s) return NULL;
    size_t k = 0;
    for (int i = i0; i < i1; i++) {
        const g4_chat_delta *d = g4_chat_parser_delta(p, i);
        if (d->kind == kind) { memcpy(s + k, d->text, d->len); k += d->len; }
    }
    s[k] = 0;
    *len = k;
    return s;
}

static char *dump(json_t *o) {
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

static void fill(json_t *o, const g4_chat_parser *p, int i0, int i1, const char *prefix, int whole) {
    size_t n = 0;
    char *content = concat(p, i0, i1, G4_DELTA_CONTENT, &n);
    json_t *calls = json_array();
    for (int i = i0; i < i1; i++) {
        const g4_chat_delta *d = g4_chat_parser_delta(p, i);
        if (d->kind == G4_DELTA_TOOL_CALL) json_array_append_new(calls, call_json(d, prefix, !whole));
    }
    if (content) json_object_set_new(o, "content", jstr(content, n));
    else if (whole) json_object_set_new(o, "content", json_array_size(calls) ? json_null() : json_string(""));
    free(content);
    char *reasoning = concat(p, i0, i1, G4_DELTA_REASONING, &n);
    if (reasoning) json_object_set_new(o, "reasoning_content", jstr(reasoning, n));
    free(reasoning);
    if (json_array_size(calls)) json_object_set_new(o, "tool_calls", calls);
    else json_decref(calls);
}

char *g4_chat_message_json(const g4_chat_parser *p, const char *call_id_prefix) {
    json_t *o = json_object();
    json_object_set_new(o, "role", json_string("assistant"));
    fill(o, p, 0, g4_chat_parser_n_deltas(p), call_id_prefix, 1);
    return dump(o);
}

char *g4_chat_delta_json(const g4_chat_parser *p, int i0, int i1, const char *call_id_prefix) {
    json_t *o = json_object();
    if (i0 < 0) i0 = 0;
    if (i1 > g4_chat_parser_n_deltas(p)) i1 = g4_chat_parser_n_deltas(p);
    fill(o, p, i0, i1, call_id_prefix, 0);
    return dump(o);
}
