/* parser.c — Gemma 4's chat output protocol (g4_chat_parser, gemma4c.h): generated token ids in,
 * OpenAI message deltas out (content, reasoning, tool calls with their arguments converted from
 * Gemma's dialect to JSON). Pure: no model, no HTTP; the server and `gemma4c parse` drive it. */
#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4c.h"
#include "base/strbuf.h"

/* Inside a call's raw text a <|"|> token is kept as this byte, which valid UTF-8 never holds
 * (a stray 0xFF from a byte token is stored as 0xFE: both are invalid text either way). */
#define QUOTE_MARK 0xFF
#define MAX_DEPTH 64

enum { S_CONTENT, S_LABEL, S_THOUGHT, S_CALL, S_DONE };


struct g4_chat_parser {
    const g4_tokenizer *t;
    int32_t id_ch_open, id_ch_close, id_call_open, id_call_close, id_quote, id_resp;
    const char *s_call_open, *s_call_close, *s_quote;   /* token strings, for raw text of bad calls */
    g4_detok_stream *detok;
    int state, ended, finished, oom;
    int nl_held;       /* S_THOUGHT: a trailing newline held back (it may be <channel|>'s) */
    g4_strbuf label;        /* S_LABEL: the channel's name so far */
    g4_strbuf call;         /* S_CALL: the call's raw text, <|"|> as QUOTE_MARK */
    g4_strbuf pend;         /* content not yet emitted (a stop string may begin in it) */
    char **stop;
    int n_stop;
    g4_chat_delta *d;
    int n_d, cap_d, n_calls;
};

/* ---------------------------------------------------------------- deltas */

static void add_delta(g4_chat_parser *p, g4_delta_kind kind, const char *s, size_t n, const char *name) {
    if (!n && kind != G4_DELTA_TOOL_CALL) return;
    if (p->n_d == p->cap_d) {
        int nc = p->cap_d ? p->cap_d * 2 : 16;
        g4_chat_delta *nd = realloc(p->d, (size_t)nc * sizeof *nd);
        if (!nd) { p->oom = 1; return; }
        p->d = nd;
        p->cap_d = nc;
    }
    char *txt = malloc(n + 1), *nm = name ? strdup(name) : NULL;
    if (!txt || (name && !nm)) { free(txt); free(nm); p->oom = 1; return; }
    memcpy(txt, s, n);
    txt[n] = 0;
    p->d[p->n_d++] = (g4_chat_delta){.kind = kind, .text = txt, .len = n, .name = nm,
                                      .index = kind == G4_DELTA_TOOL_CALL ? p->n_calls++ : 0};
}

/* ---------------------------------------------------------------- content and stop strings */

/* Bytes at the end of s[0..n) that are a proper prefix of some stop string. */
static size_t stop_holdback(const g4_chat_parser *p, const char *s, size_t n) {
    size_t best = 0;
    for (int i = 0; i < p->n_stop; i++) {
        size_t L = strlen(p->stop[i]);
        for (size_t k = L - 1 < n ? L - 1 : n; k > best; k--)
            if (!memcmp(s + n - k, p->stop[i], k)) { best = k; break; }
    }
    return best;
}

/* Content text: emitted at once unless it may begin a stop string. Held-back bytes never start
 * before a stop occurrence (the longest such suffix is held), so stops are searched in `pend` only. */
static void content_add(g4_chat_parser *p, const char *s, size_t n) {
    if (p->state == S_DONE || !n) return;
    if (!p->n_stop) { add_delta(p, G4_DELTA_CONTENT, s, n, NULL); return; }
    g4_sb_put(&p->pend, s, n);
    if (p->pend.oom) { p->oom = 1; return; }
    size_t cut = (size_t)-1;
    for (int i = 0; i < p->n_stop; i++) {
        char *hit = memmem(p->pend.p, p->pend.len, p->stop[i], strlen(p->stop[i]));
        if (hit && (size_t)(hit - p->pend.p) < cut) cut = (size_t)(hit - p->pend.p);
    }
    if (cut != (size_t)-1) {
        add_delta(p, G4_DELTA_CONTENT, p->pend.p, cut, NULL);
        p->pend.len = 0;
        p->state = S_DONE;
        p->ended = 1;
        return;
    }
    size_t keep = stop_holdback(p, p->pend.p, p->pend.len), out = p->pend.len - keep;
    add_delta(p, G4_DELTA_CONTENT, p->pend.p, out, NULL);
    memmove(p->pend.p, p->pend.p + out, keep);
    p->pend.len = keep;
}

/* A delimiter follows: no stop string can span it, so the held-back content is final. */
static void content_flush(g4_chat_parser *p) {
    if (p->pend.len) add_delta(p, G4_DELTA_CONTENT, p->pend.p, p->pend.len, NULL);
    p->pend.len = 0;
}

/* ---------------------------------------------------------------- channels */

/* Thought text. The template closes a thought with "\n<channel|>": that newline belongs to the
 * delimiter, so a trailing newline waits to see whether <channel|> follows. */
static void reasoning_add(g4_chat_parser *p, const char *s, size_t n) {
    if (!n) return;
    g4_strbuf b = {0};
    if (p->nl_held) g4_sb_put(&b, "\n", 1);
    g4_sb_put(&b, s, n);
    if (b.oom) { p->oom = 1; free(b.p); return; }
    p->nl_held = b.p[b.len - 1] == '\n';
    add_delta(p, G4_DELTA_REASONING, b.p, b.len - (size_t)p->nl_held, NULL);
    free(b.p);
}

/* The thought ends: at <channel|> the held newline was the delimiter's, anywhere else it is text. */
static void reasoning_end(g4_chat_parser *p, int by_close) {
    if (p->nl_held && !by_close) add_delta(p, G4_DELTA_REASONING, "\n", 1, NULL);
    p->nl_held = 0;
}

static const char LABEL[] = "thought\n";

/* The label buffer as the thought's first text: the "thought\n" label is dropped, anything else
 * (another channel name, or text without a label) is reasoning as written. */
static void label_resolve(g4_chat_parser *p, int final) {
    g4_strbuf *l = &p->label;
    const size_t L = sizeof LABEL - 1;
    if (l->len >= L && !memcmp(l->p, LABEL, L)) {
        p->state = S_THOUGHT;
        reasoning_add(p, l->p + L, l->len - L);
    } else if (l->len < L && !memcmp(l->p ? l->p : "", LABEL, l->len)) {
        if (!final) return;   /* still a prefix of the label: wait */
        p->state = S_THOUGHT; /* "<|channel>thou" then the end, or <channel|>: the label alone */
    } else {
        p->state = S_THOUGHT;
        reasoning_add(p, l->p, l->len);
    }
    l->len = 0;
}

/* ---------------------------------------------------------------- tool calls */

typedef struct {
    const unsigned char *s;
    size_t n, i;
    g4_strbuf *out;
} cursor;

static void skip_ws(cursor *c) {
    while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\t' || c->s[c->i] == '\n' || c->s[c->i] == '\r')) c->i++;
}

/* Length of the valid UTF-8 sequence at s[0..n) (overlongs and surrogates refused), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t L;
    unsigned cp;
    if (c < 0x80) return 1;
    if ((c >> 5) == 6) { L = 2; cp = c & 0x1f; }
    else if ((c >> 4) == 14) { L = 3; cp = c & 0x0f; }
    else if ((c >> 3) == 30) { L = 4; cp = c & 0x07; }
    else return 0;
    if (L > n) return 0;
    for (size_t k = 1; k < L; k++) {
        if ((s[k] >> 6) != 2) return 0;
        cp = (cp << 6) | (s[k] & 0x3f);
    }
    if ((L == 2 && cp < 0x80) || (L == 3 && cp < 0x800) || (L == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return L;
}

/* s[0..n) as a JSON string literal; invalid UTF-8 becomes U+FFFD. */
static void json_str(g4_strbuf *o, const unsigned char *s, size_t n) {
    g4_sb_put(o, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (c == '"' || c == '\\') { g4_sb_put(o, "\\", 1); g4_sb_put(o, &c, 1); i++; }
        else if (c == '\n') { g4_sb_puts(o, "\\n"); i++; }
        else if (c == '\t') { g4_sb_puts(o, "\\t"); i++; }
        else if (c == '\r') { g4_sb_puts(o, "\\r"); i++; }
        else if (c < 0x20) { char e[8]; snprintf(e, sizeof e, "\\u%04x", c); g4_sb_puts(o, e); i++; }
        else {
            size_t L = utf8_len(s + i, n - i);
            if (L) { g4_sb_put(o, s + i, L); i += L; }
            else { g4_sb_puts(o, "\xef\xbf\xbd"); i++; }
        }
    }
    g4_sb_put(o, "\"", 1);
}

/* A JSON number exactly as RFC 8259 writes it. */
static int is_json_number(const char *s, size_t n) {
    size_t i = 0;
    if (i < n && s[i] == '-') i++;
    if (i >= n || !isdigit((unsigned char)s[i])) return 0;
    if (s[i] == '0') i++;
    else while (i < n && isdigit((unsigned char)s[i])) i++;
    if (i < n && s[i] == '.') {
        i++;
        if (i >= n || !isdigit((unsigned char)s[i])) return 0;
        while (i < n && isdigit((unsigned char)s[i])) i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= n || !isdigit((unsigned char)s[i])) return 0;
        while (i < n && isdigit((unsigned char)s[i])) i++;
    }
    return i == n;
}

/* A bare scalar: true / false / null (and None, how a Python None renders in the template), a
 * number (JSON's form verbatim; "+1", ".5", "1." and leading zeros as the number they mean), and
 * any other bare word as the string it spells. */
static int bare_value(cursor *c) {
    size_t b = c->i;
    while (c->i < c->n && c->s[c->i] != ',' && c->s[c->i] != '}' && c->s[c->i] != ']') {
        unsigned char ch = c->s[c->i];
        if (ch == QUOTE_MARK || ch == '{' || ch == '[') return -1;
        c->i++;
    }
    size_t e = c->i;
    while (e > b && isspace(c->s[e - 1])) e--;
    const char *s = (const char *)c->s + b;
    size_t n = e - b;
    if (!n) return -1;
    if ((n == 4 && !memcmp(s, "true", 4)) || (n == 5 && !memcmp(s, "false", 5)) || (n == 4 && !memcmp(s, "null", 4))) {
        g4_sb_put(c->out, s, n);
        return 0;
    }
    if (n == 4 && !memcmp(s, "None", 4)) { g4_sb_puts(c->out, "null"); return 0; }
    if (is_json_number(s, n)) { g4_sb_put(c->out, s, n); return 0; }
    char tmp[64];
    if (n < sizeof tmp && (isdigit((unsigned char)s[0]) || strchr("+-.", s[0]))) {
        memcpy(tmp, s, n);
        tmp[n] = 0;
        char *end;
        double d = strtod(tmp, &end);
        if (end == tmp + n && isfinite(d) && !strpbrk(tmp, "xXpPnN")) {   /* no hex, inf or nan */
            char num[40];
            snprintf(num, sizeof num, "%.17g", d);
            if (is_json_number(num, strlen(num))) { g4_sb_puts(c->out, num); return 0; }
        }
    }
    json_str(c->out, (const unsigned char *)s, n);
    return 0;
}

static int value(cursor *c, int depth);

/* A JSON string literal where the dialect has a <|"|> string (models sometimes fall back to JSON's
 * quotes): taken when it is valid JSON, escapes and all. */
static int json_quoted(cursor *c) {
    size_t b = c->i++;
    while (c->i < c->n && c->s[c->i] != '"') {
        if (c->s[c->i] == '\\') c->i++;
        c->i++;
    }
    if (c->i >= c->n) return -1;
    c->i++;
    json_t *v = json_loadb((const char *)c->s + b, c->i - b, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (!json_is_string(v)) { json_decref(v); return -1; }
    json_str(c->out, (const unsigned char *)json_string_value(v), json_string_length(v));
    json_decref(v);
    return 0;
}

/* A quoted string: from the mark to the next one, whatever lies between. */
static int quoted(cursor *c) {
    size_t b = ++c->i;
    while (c->i < c->n && c->s[c->i] != QUOTE_MARK) c->i++;
    if (c->i >= c->n) return -1;
    json_str(c->out, c->s + b, c->i - b);
    c->i++;
    return 0;
}

static int object(cursor *c, int depth) {
    c->i++;
    g4_sb_put(c->out, "{", 1);
    skip_ws(c);
    for (int first = 1;; first = 0) {
        skip_ws(c);
        if (c->i >= c->n) return -1;
        if (c->s[c->i] == '}') break;   /* also after a trailing comma */
        if (!first) g4_sb_put(c->out, ",", 1);
        if (c->s[c->i] == QUOTE_MARK) {
            if (quoted(c)) return -1;
        } else if (c->s[c->i] == '"') {
            if (json_quoted(c)) return -1;
        } else {
            size_t b = c->i;
            while (c->i < c->n && c->s[c->i] != ':') {
                if (strchr("{}[],", c->s[c->i]) || c->s[c->i] == QUOTE_MARK) return -1;
                c->i++;
            }
            size_t e = c->i;
            while (e > b && isspace(c->s[e - 1])) e--;
            if (e == b) return -1;
            json_str(c->out, c->s + b, e - b);
        }
        skip_ws(c);
        if (c->i >= c->n || c->s[c->i] != ':') return -1;
        c->i++;
        g4_sb_put(c->out, ":", 1);
        if (value(c, depth + 1)) return -1;
        skip_ws(c);
        if (c->i < c->n && c->s[c->i] == ',') { c->i++; continue; }
        if (c->i < c->n && c->s[c->i] == '}') break;
        return -1;
    }
    c->i++;
    g4_sb_put(c->out, "}", 1);
    return 0;
}

static int array(cursor *c, int depth) {
    c->i++;
    g4_sb_put(c->out, "[", 1);
    for (int first = 1;; first = 0) {
        skip_ws(c);
        if (c->i >= c->n) return -1;
        if (c->s[c->i] == ']') break;
        if (!first) g4_sb_put(c->out, ",", 1);
        if (value(c, depth + 1)) return -1;
        skip_ws(c);
        if (c->i < c->n && c->s[c->i] == ',') { c->i++; continue; }
        if (c->i < c->n && c->s[c->i] == ']') break;
        return -1;
    }
    c->i++;
    g4_sb_put(c->out, "]", 1);
    return 0;
}

static int value(cursor *c, int depth) {
    if (depth > MAX_DEPTH) return -1;
    skip_ws(c);
    if (c->i >= c->n) return -1;
    switch (c->s[c->i]) {
    case QUOTE_MARK: return quoted(c);
    case '"': return json_quoted(c);
    case '{': return object(c, depth);
    case '[': return array(c, depth);
    default: return bare_value(c);
    }
}

/* "call:NAME{ARGS}" -> name and the arguments as JSON text; -1 when it does not parse. */
static int parse_call(const g4_strbuf *raw, g4_strbuf *name, g4_strbuf *args) {
    cursor c = {.s = (const unsigned char *)(raw->p ? raw->p : ""), .n = raw->len, .out = args};
    skip_ws(&c);
    if (c.n - c.i < 5 || memcmp(c.s + c.i, "call:", 5)) return -1;
    c.i += 5;
    skip_ws(&c);
    size_t b = c.i;
    while (c.i < c.n && c.s[c.i] != '{') {
        unsigned char ch = c.s[c.i];
        if (isspace(ch) || ch == QUOTE_MARK || strchr("}[],\"'", ch)) return -1;
        c.i++;
    }
    if (c.i == b || c.i >= c.n) return -1;
    for (size_t k = b; k < c.i;) {   /* the name goes into JSON: valid UTF-8 only */
        size_t L = utf8_len(c.s + k, c.i - k);
        if (!L || c.s[k] < 0x20) return -1;
        k += L;
    }
    g4_sb_put(name, c.s + b, c.i - b);
    if (object(&c, 0)) return -1;
    skip_ws(&c);
    return c.i == c.n && !args->oom && !name->oom ? 0 : -1;
}

/* The call's text as the model wrote it, as content: a call that does not parse or never closed. */
static void call_as_content(g4_chat_parser *p, int closed) {
    p->state = S_CONTENT;
    g4_strbuf raw = {0};
    g4_sb_puts(&raw, p->s_call_open);
    for (size_t i = 0; i < p->call.len; i++) {
        if ((unsigned char)p->call.p[i] == QUOTE_MARK) g4_sb_puts(&raw, p->s_quote);
        else g4_sb_put(&raw, p->call.p + i, 1);
    }
    if (closed) g4_sb_puts(&raw, p->s_call_close);
    if (raw.oom) p->oom = 1;
    else content_add(p, raw.p, raw.len);
    free(raw.p);
    p->call.len = 0;
}

static void call_close(g4_chat_parser *p) {
    g4_strbuf name = {0}, args = {0};
    if (!parse_call(&p->call, &name, &args)) {
        p->state = S_CONTENT;
        add_delta(p, G4_DELTA_TOOL_CALL, args.p, args.len, name.p);
        p->call.len = 0;
    } else {
        call_as_content(p, 1);
    }
    free(name.p);
    free(args.p);
}

/* ---------------------------------------------------------------- token routing */

static void route_text(g4_chat_parser *p, const char *s, size_t n) {
    if (!n) return;
    switch (p->state) {
    case S_CONTENT: content_add(p, s, n); break;
    case S_LABEL:
        g4_sb_put(&p->label, s, n);
        label_resolve(p, 0);
        break;
    case S_THOUGHT: reasoning_add(p, s, n); break;
    case S_CALL:
        for (size_t i = 0; i < n; i++) {
            unsigned char ch = (unsigned char)s[i] == QUOTE_MARK ? 0xFE : (unsigned char)s[i];
            g4_sb_put(&p->call, &ch, 1);
        }
        break;
    default: break;
    }
}

/* Ends whatever is open before a delimiter takes over: the held-back content, a label, a call. */
static void close_open(g4_chat_parser *p) {
    if (p->state == S_CONTENT) content_flush(p);
    else if (p->state == S_LABEL) label_resolve(p, 1);
    else if (p->state == S_THOUGHT) reasoning_end(p, 0);
    else if (p->state == S_CALL) {
        call_as_content(p, 0);
        content_flush(p);
    }
}

static void special(g4_chat_parser *p, int32_t id) {
    if (id == p->id_quote) {
        if (p->state == S_CALL) {
            unsigned char m = QUOTE_MARK;
            g4_sb_put(&p->call, &m, 1);
        }
        return;   /* outside a call it adds nothing, like any other special token */
    }
    if (id == p->id_call_close) {
        if (p->state == S_CALL) call_close(p);
        return;
    }
    if (id == p->id_ch_open) {
        if (p->state == S_CONTENT || p->state == S_CALL) {
            close_open(p);
            if (p->state == S_DONE) return;
            p->state = S_LABEL;
            p->label.len = 0;
        }
        return;   /* inside a thought: nothing */
    }
    if (id == p->id_ch_close) {
        if (p->state == S_LABEL || p->state == S_THOUGHT) {
            if (p->state == S_LABEL) label_resolve(p, 1);
            reasoning_end(p, 1);
            p->state = S_CONTENT;
        } else if (p->state == S_CALL) {
            close_open(p);
        }
        return;
    }
    if (id == p->id_call_open) {
        close_open(p);
        if (p->state == S_DONE) return;
        p->state = S_CALL;
        p->call.len = 0;
        return;
    }
    if (id == p->id_resp) {   /* the model waits for a tool's answer: the turn is over */
        close_open(p);
        p->state = S_DONE;
        p->ended = 1;
    }
}

static int is_protocol(const g4_chat_parser *p, int32_t id) {
    return id >= 0 && (id == p->id_ch_open || id == p->id_ch_close || id == p->id_call_open || id == p->id_call_close ||
                       id == p->id_quote || id == p->id_resp);
}

static g4_status drain_detok(g4_chat_parser *p, int finish, int32_t id) {
    char *buf = NULL;
    size_t len = 0;
    g4_status st = finish ? g4_detok_stream_finish(p->detok, &buf, &len) : g4_detok_stream_push(p->detok, id, &buf, &len);
    if (!st) route_text(p, buf, len);
    free(buf);
    return st;
}

g4_status g4_chat_parser_push(g4_chat_parser *p, int32_t id, int *ended) {
    g4_status st = G4_OK;
    if (id < 0 || id >= g4_tokenizer_vocab_size(p->t))
        return g4_fail(G4_ERR_INPUT, "chat parser: token id %d is outside the vocabulary", (int)id);
    if (!p->ended && !p->finished) {
        if (is_protocol(p, id)) {
            /* byte tokens pending before a delimiter are complete: the delimiter splits the run */
            if (!(st = drain_detok(p, 1, 0))) special(p, id);
        } else {
            st = drain_detok(p, 0, id);
        }
    }
    if (p->oom && !st) st = g4_fail(G4_ERR_NOMEM, "chat parser: out of memory");
    if (ended) *ended = p->ended;
    return st;
}

g4_status g4_chat_parser_finish(g4_chat_parser *p) {
    if (p->finished) return G4_OK;
    g4_status st = p->ended ? G4_OK : drain_detok(p, 1, 0);
    if (p->state != S_DONE) close_open(p);
    p->state = S_DONE;
    p->finished = 1;
    if (p->oom && !st) st = g4_fail(G4_ERR_NOMEM, "chat parser: out of memory");
    return st;
}

/* ---------------------------------------------------------------- lifecycle */

static int32_t id_of(const g4_tokenizer *t, const char *s) {
    int32_t id = g4_token_to_id(t, s);
    return id >= 0 && g4_token_is_special(t, id) ? id : -1;
}

g4_status g4_chat_parser_new(const g4_tokenizer *t, const char *const *stop, int n_stop, g4_chat_parser **out) {
    *out = NULL;
    g4_chat_parser *p = calloc(1, sizeof *p);
    if (!p) return g4_fail(G4_ERR_NOMEM, "out of memory");
    p->t = t;
    p->id_ch_open = id_of(t, "<|channel>");
    p->id_ch_close = id_of(t, "<channel|>");
    p->id_call_open = id_of(t, "<|tool_call>");
    p->id_call_close = id_of(t, "<tool_call|>");
    p->id_quote = id_of(t, "<|\"|>");
    p->id_resp = id_of(t, "<|tool_response>");
    /* a thought needs both channel tokens, a call its three */
    if (p->id_ch_open < 0 || p->id_ch_close < 0) p->id_ch_open = p->id_ch_close = -1;
    if (p->id_call_open < 0 || p->id_call_close < 0 || p->id_quote < 0)
        p->id_call_open = p->id_call_close = p->id_quote = p->id_resp = -1;
    p->s_call_open = "<|tool_call>";
    p->s_call_close = "<tool_call|>";
    p->s_quote = "<|\"|>";
    p->detok = g4_detok_stream_new(t, 1);
    if (!p->detok) { g4_chat_parser_free(p); return g4_fail(G4_ERR_NOMEM, "out of memory"); }
    if (n_stop > 0 && !(p->stop = calloc((size_t)n_stop, sizeof *p->stop))) {
        g4_chat_parser_free(p);
        return g4_fail(G4_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < n_stop; i++) {
        if (!stop[i] || !stop[i][0]) continue;
        if (!(p->stop[p->n_stop] = strdup(stop[i]))) { g4_chat_parser_free(p); return g4_fail(G4_ERR_NOMEM, "out of memory"); }
        p->n_stop++;
    }
    *out = p;
    return G4_OK;
}

void g4_chat_parser_free(g4_chat_parser *p) {
    if (!p) return;
    g4_detok_stream_free(p->detok);
    free(p->label.p);
    free(p->call.p);
    free(p->pend.p);
    for (int i = 0; i < p->n_stop; i++) free(p->stop[i]);
    free(p->stop);
    for (int i = 0; i < p->n_d; i++) {
        free((char *)p->d[i].text);
        free((char *)p->d[i].name);
    }
    free(p->d);
    free(p);
}

int g4_chat_parser_has_tools(const g4_chat_parser *p) { return p->id_call_open >= 0; }
int g4_chat_parser_n_deltas(const g4_chat_parser *p) { return p->n_d; }
const g4_chat_delta *g4_chat_parser_delta(const g4_chat_parser *p, int i) {
    return i >= 0 && i < p->n_d ? &p->d[i] : NULL;
}
int g4_chat_parser_n_calls(const g4_chat_parser *p) { return p->n_calls; }
