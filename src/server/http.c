/* http.c — libmicrohttpd glue: routing of the OpenAI routes, /generate, /tokenize, /detokenize,
 * /health, /metrics; API keys, CORS, the body size limit (refused from Content-Length before any
 * body is read), SSE streaming and client-disconnect detection.
 *
 * Connections are event-driven: a few MHD threads poll every socket (epoll where the system has
 * it), and no MHD thread ever waits for the model. A generation request is parsed by a parse
 * worker (template rendering can take a while), then its connection is suspended
 * (MHD_suspend_connection) until the scheduler has news for it (g4_req.notify) or the ticker
 * wants it looked at (client gone, queue timeout, shutdown). http_conn.c keeps the connection
 * limits and the request deadline. Parsing and response shapes live in openai.c; generation in
 * scheduler.c. */
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server/http_conn.h"
#include "server/server.h"

enum { P_NONE, P_PARSING, P_PARSED, P_RUNNING, P_STREAMING };
enum { FAIL_NONE, FAIL_PARSE, FAIL_NOT_READY, FAIL_QUEUE_FULL };   /* what the parse worker made of a request */

/* One request (MHD's con_cls), shared by the MHD thread that serves it, a parse worker, the
 * SSE response and the scheduler's wake-ups: freed when the last of them lets go. */
struct conn_ctx {
    g4_http *h;
    struct MHD_Connection *c;
    int refs;                     /* under h->mu, as are the wake fields of h_conn */
    h_wake w;
    char *body;
    size_t len, cap;
    int too_big;
    int answered;                 /* a response was queued from the headers alone (413 by Content-Length) */
    int received;                 /* the whole request is in (the receive deadline no longer applies) */
    int generating;               /* handed to generate(): a resumed connection goes back there */
    int half_closed;              /* the client ended its sending side just after its request */
    double t_received;            /* when generate() first saw the whole request */
    /* a generation */
    int phase;                    /* under h->mu while a parse worker holds it */
    int fail;                     /* F_*, set by the parse worker */
    g4_api_kind kind;
    const char *route;
    g4_api_error err;
    char err_param[64];           /* err.param copied: the parser may point it at its thread's storage */
    g4_api_opts o;
    g4_req *r[G4_MAX_N];          /* o.n of them once parsed */
    int n;
    double t_submit;
    int fd;
    struct conn_ctx *jnext;       /* the parse queue */
    /* SSE */
    char *out;
    size_t out_len, out_off;
    size_t t_sent[G4_MAX_N];      /* text bytes (chat: parser deltas) sent */
    int k_sent[G4_MAX_N];         /* tokens whose logprobs were sent */
    int fin_sent[G4_MAX_N];
    int sent_first, finished;
};

enum { PEER_OK, PEER_GONE, PEER_EOF };

/* PEER_GONE: reset, or closed both ways; PEER_EOF: the peer ended its sending side (FIN) — a
 * client that half-closed after its request, or one that closed its socket: the two look the
 * same until something is written to it. */
static int peer_state(int fd) {
    if (fd < 0) return PEER_OK;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return PEER_OK;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return PEER_GONE;
    return p.revents & POLLRDHUP ? PEER_EOF : PEER_OK;
}

/* The client went away, so stop generating for it. An end of stream that came within
 * HALF_CLOSE_S of the request's arrival is a half-close (shutdown(SHUT_WR) right after sending, as
 * `nc -N` and some proxies do: the client still reads its answer); one that comes later is a client
 * that gave up. When it came: when the ticker first saw it (a connection asleep while its request
 * is parsed or queued is looked at again only later, which on a loaded host can be past
 * HALF_CLOSE_S), else now. A "half-closed" client that had in fact closed is found out when its
 * answer (a stream: its next event) is written, or, not streaming, runs to its end: the price of
 * answering half-closes. */
#define HALF_CLOSE_S 0.5
static int client_gone(conn_ctx *cc) {
    const int st = peer_state(cc->fd);
    if (st == PEER_EOF && !cc->half_closed) {
        pthread_mutex_lock(&cc->h->mu);
        const double came = cc->w.eof_at > 0 ? cc->w.eof_at : g4_now();
        pthread_mutex_unlock(&cc->h->mu);
        if (came - cc->t_received < HALF_CLOSE_S) cc->half_closed = 1;
    }
    return st == PEER_GONE || (st == PEER_EOF && !cc->half_closed);
}

/* The fd the ticker watches for a gone client: none for a half-closed one (it always reads EOF). */
static int watched_fd(const conn_ctx *cc) { return cc->half_closed ? -1 : cc->fd; }

static int conn_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

static void cors_headers(g4_srv *s, struct MHD_Connection *c, struct MHD_Response *resp);

/* The response `body` (malloc'ed; freed here) with `status`, plus one header where hname is set. */
static enum MHD_Result reply_with(g4_srv *s, struct MHD_Connection *c, const char *route, int status, const char *ctype,
                                  char *body, const char *hname, const char *hval) {
    if (!body) {
        status = 500;
        body = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}");
        ctype = "application/json";
        if (!body) return MHD_NO;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!resp) { free(body); return MHD_NO; }
    if (ctype) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (hname) MHD_add_response_header(resp, hname, hval);
    cors_headers(s, c, resp);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    g4_metrics_request(s->mx, route, status);
    return ret;
}

static enum MHD_Result reply(g4_srv *s, struct MHD_Connection *c, const char *route, int status, const char *ctype,
                             char *body) {
    return reply_with(s, c, route, status, ctype, body, NULL, NULL);
}

/* Equal in constant time for equal lengths (an API key is not found byte by byte by timing). */
static int same_secret(const char *a, const char *b) {
    const size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = la != lb;
    for (size_t i = 0; i < la; i++) diff |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
    return !diff;
}

/* Whether the request carries one of the server's API keys as `Authorization: Bearer KEY`
 * (always, when the server has none). Every key is compared, so the time does not tell which. */
static int authorized(const g4_srv *s, struct MHD_Connection *c) {
    if (!s->opts.n_api_keys) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7)) return 0;
    h += 7;
    while (*h == ' ') h++;
    int ok = 0;
    for (int i = 0; i < s->opts.n_api_keys; i++) ok |= same_secret(h, s->opts.api_keys[i]);
    return ok;
}

static enum MHD_Result reply_err(g4_srv *s, struct MHD_Connection *c, const char *route, const g4_api_error *e) {
    return reply(s, c, route, e->status, "application/json", g4_api_error_json(e));
}

/* Why the model can run no more steps (an MPI rank stopped answering: g4_model_group_lost), or
 * NULL. Read only once loaded: the loader thread writes s->model before publishing READY. */
static const char *model_lost(const g4_srv *s) {
    return s->state == G4_SRV_READY ? g4_model_group_lost(s->model) : NULL;
}

/* A generation that failed: 503 when the model itself can no longer run (retry elsewhere), else 500. */
static g4_api_error *gen_error(const g4_srv *s, g4_api_error *e, const char *msg) {
    if (model_lost(s)) return g4_api_err(e, 503, "server_error", NULL, "tp_group_lost", "%s", msg);
    return g4_api_err(e, 500, "server_error", NULL, NULL, "%s", msg);
}

static enum MHD_Result not_ready(g4_srv *s, struct MHD_Connection *c, const char *route) {
    g4_api_error e;
    const char *lost = model_lost(s);
    if (lost) return reply_err(s, c, route, g4_api_err(&e, 503, "server_error", NULL, "tp_group_lost", "%s", lost));
    int st = s->state;
    g4_api_err(&e, 503, "server_error", NULL, st == G4_SRV_LOADING ? "model_loading" : "unavailable", "%s",
               st == G4_SRV_LOADING ? "the model is still loading; retry when /health answers 200"
               : st == G4_SRV_FAILED ? "the model failed to load"
                                     : "the server is shutting down");
    return reply_err(s, c, route, &e);
}

/* ---------------------------------------------------------------- CORS */

/* The origin to allow for this request: its Origin header when --cors-origin lists it, "*" when
 * any origin is allowed, else NULL (no CORS headers: the browser refuses the response). */
static const char *allowed_origin(const g4_srv *s, struct MHD_Connection *c) {
    if (!s->opts.n_cors) return NULL;
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    for (int i = 0; i < s->opts.n_cors; i++) {
        if (!strcmp(s->opts.cors[i], "*")) return "*";
        if (origin && !strcmp(origin, s->opts.cors[i])) return origin;
    }
    return NULL;
}

static void cors_headers(g4_srv *s, struct MHD_Connection *c, struct MHD_Response *resp) {
    const char *o = allowed_origin(s, c);
    if (!o) return;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, o);
    if (strcmp(o, "*")) MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Origin");
}

/* A preflight (OPTIONS with Access-Control-Request-Method) for a route: 204 with what the route
 * accepts. Never needs a key: browsers send preflights without credentials. */
static enum MHD_Result preflight(g4_srv *s, struct MHD_Connection *c, const char *rt, const char *methods) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    cors_headers(s, c, resp);
    MHD_add_response_header(resp, "Access-Control-Allow-Methods", methods);
    MHD_add_response_header(resp, "Access-Control-Allow-Headers", "Authorization, Content-Type");
    MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, methods);
    enum MHD_Result ret = MHD_queue_response(c, 204, resp);
    MHD_destroy_response(resp);
    g4_metrics_request(s->mx, rt, 204);
    return ret;
}

/* ---------------------------------------------------------------- request life */

static conn_ctx *ctx_ref(conn_ctx *cc) {
    pthread_mutex_lock(&cc->h->mu);
    cc->refs++;
    pthread_mutex_unlock(&cc->h->mu);
    return cc;
}

/* Drops a reference; the last one stops the scheduler's wake-ups, cancels what still runs (a
 * client that left) and frees the request. */
static void ctx_unref(conn_ctx *cc) {
    g4_http *h = cc->h;
    pthread_mutex_lock(&h->mu);
    const int left = --cc->refs;
    pthread_mutex_unlock(&h->mu);
    if (left) return;
    for (int i = 0; i < cc->n; i++) {
        g4_req *r = cc->r[i];
        pthread_mutex_lock(&r->mu);   /* the scheduler calls notify under mu: none runs after this */
        r->notify = NULL;
        r->cancel |= !r->done;
        pthread_mutex_unlock(&r->mu);
        g4_req_release(r);
    }
    free(cc->body);
    free(cc->out);
    free(cc);
}

/* The scheduler's hook (under r->mu): the request has news. */
static void on_news(void *arg) {
    conn_ctx *cc = arg;
    http_wake(cc->h, &cc->w);
}

static void cancel_all(conn_ctx *cc) {
    for (int i = 0; i < cc->n; i++) g4_req_cancel(cc->r[i]);
}

/* Response ids from the kernel's random source: a client must not be able to guess another
 * client's ids (the sequence number mixes in only if getrandom fails). */
static void make_id(g4_srv *s, g4_api_opts *o) {
    unsigned long n = ++s->id_seq;
    uint64_t x;
    if (getrandom(&x, sizeof x, 0) != (ssize_t)sizeof x) x = ((uint64_t)time(NULL) << 20) ^ (n * 0x9e3779b97f4a7c15ull);
    snprintf(o->id, sizeof o->id, "%s-%016llx", o->kind == G4_API_CHAT ? "chatcmpl" : "cmpl", (unsigned long long)x);
    snprintf(o->call_prefix, sizeof o->call_prefix, "call_%016llx_", (unsigned long long)x);
    o->created = (long)time(NULL);
}

conn_ctx *http_job_next(conn_ctx *cc) { return cc->jnext; }
void http_job_set_next(conn_ctx *cc, conn_ctx *next) { cc->jnext = next; }

/* Parse worker: parses cc's body into requests (the template renders here, off the MHD
 * threads), hooks them to cc's wake-up and submits them; then wakes the connection. */
void http_parse_job(g4_http *h, conn_ctx *cc) {
    g4_srv *s = h->s;
    g4_req *reqs[G4_MAX_N];
    int fail = FAIL_NONE, n = 0;
    if (!g4_api_parse(&s->api, cc->kind, cc->body ? cc->body : "", cc->len, &cc->o, reqs, &cc->err)) {
        fail = FAIL_PARSE;
        if (cc->err.param) {
            snprintf(cc->err_param, sizeof cc->err_param, "%s", cc->err.param);
            cc->err.param = cc->err_param;
        }
    }
    else {
        n = cc->o.n;
        make_id(s, &cc->o);
        for (int i = 0; i < n; i++) {
            reqs[i]->notify = on_news;   /* not yet shared: no lock needed */
            reqs[i]->notify_arg = cc;
        }
        cc->t_submit = g4_now();
        for (int i = 0; i < n && !fail; i++) {
            const int q = g4_sched_submit(s->sched, reqs[i]);
            if (!q) continue;
            fail = q == -1 ? FAIL_NOT_READY : FAIL_QUEUE_FULL;
            for (int j = 0; j < i; j++) g4_req_cancel(reqs[j]);
        }
    }
    pthread_mutex_lock(&h->mu);
    if (!fail) {
        memcpy(cc->r, reqs, (size_t)n * sizeof *reqs);
        cc->n = n;
    }
    cc->fail = fail;
    cc->phase = P_PARSED;
    pthread_mutex_unlock(&h->mu);
    if (fail)
        for (int i = 0; i < n; i++) {
            pthread_mutex_lock(&reqs[i]->mu);
            reqs[i]->notify = NULL;
            pthread_mutex_unlock(&reqs[i]->mu);
            g4_req_release(reqs[i]);
        }
    http_wake(h, &cc->w);
    ctx_unref(cc);
}

/* ---------------------------------------------------------------- SSE streaming */

static void out_append(conn_ctx *st, const char *s, size_t n) {
    char *nb = realloc(st->out, st->out_len + n + 1);
    if (!nb) return;
    st->out = nb;
    memcpy(nb + st->out_len, s, n);
    st->out_len += n;
    nb[st->out_len] = 0;
}

/* Appends the events of choice i that became ready; returns 1 when it reached its end. An error
 * ends the whole stream with an error event. */
static int choice_events(conn_ctx *st, int i, int *error) {
    g4_req *r = st->r[i];
    const g4_api_ctx *c = &st->h->s->api;
    pthread_mutex_lock(&r->mu);
    const size_t t1 = g4_api_ready(r);
    const int k1 = r->n_toks, done = r->done;
    if (done && r->finish == G4_FIN_ERROR) {
        g4_api_error e;
        gen_error(st->h->s, &e, r->err);
        char *ej = g4_api_error_json(&e);
        if (ej) {
            out_append(st, "data: ", 6);
            out_append(st, ej, strlen(ej));
            out_append(st, "\n\n", 2);
            free(ej);
        }
        *error = 1;
    } else {
        if (t1 > st->t_sent[i]) {
            g4_api_stream_chunk(c, &st->o, r, i, st->t_sent[i], t1, st->k_sent[i], k1, 0, 0, &st->out, &st->out_len);
            st->t_sent[i] = t1;
            st->k_sent[i] = k1;
        }
        if (done) {
            g4_api_stream_chunk(c, &st->o, r, i, t1, t1, st->k_sent[i], k1, 0, 1, &st->out, &st->out_len);
            st->k_sent[i] = k1;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return done;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    conn_ctx *st = cls;
    const int n = st->o.n;
    for (;;) {
        if (st->out_off < st->out_len) {
            size_t k = st->out_len - st->out_off < max ? st->out_len - st->out_off : max;
            memcpy(buf, st->out + st->out_off, k);
            st->out_off += k;
            return (ssize_t)k;
        }
        st->out_len = st->out_off = 0;
        if (st->finished) return MHD_CONTENT_READER_END_OF_STREAM;
        if (!st->sent_first) {   /* the role chunk, as OpenAI opens a chat stream */
            for (int i = 0; i < n && st->o.kind == G4_API_CHAT; i++) {
                pthread_mutex_lock(&st->r[i]->mu);
                g4_api_stream_chunk(&st->h->s->api, &st->o, st->r[i], i, 0, 0, 0, 0, 1, 0, &st->out, &st->out_len);
                pthread_mutex_unlock(&st->r[i]->mu);
            }
            st->sent_first = 1;
            continue;
        }
        int error = 0, all_done = 1;
        for (int i = 0; i < n && !error; i++) {
            if (st->fin_sent[i]) continue;
            st->fin_sent[i] = choice_events(st, i, &error);
            all_done &= st->fin_sent[i];
        }
        if (error) cancel_all(st);
        if (error || all_done) {
            if (!error && st->o.include_usage) g4_api_stream_usage(&st->h->s->api, &st->o, st->r, &st->out, &st->out_len);
            out_append(st, "data: [DONE]\n\n", 14);
            st->finished = 1;
            continue;
        }
        if (st->out_len) continue;
        /* nothing new: sleep until the scheduler has news (or the ticker looks at the client) */
        if (client_gone(st)) break;
        const int slept = http_sleep(st->h, &st->w, st->c, watched_fd(st), 0);
        if (slept > 0) return 0;
        if (slept < 0) break;   /* shutting down */
    }
    cancel_all(st);
    return MHD_CONTENT_READER_END_WITH_ERROR;
}

/* MHD is done with the response (sent, or the client went away): a stream that did not reach
 * its end is cancelled when the last reference goes, so the slots free at the next step. */
static void stream_free(void *cls) {
    ctx_unref(cls);
}

/* ---------------------------------------------------------------- generation routes */

static int any_admitted_or_done(conn_ctx *cc) {
    int yes = 0;
    for (int i = 0; i < cc->n && !yes; i++) {
        pthread_mutex_lock(&cc->r[i]->mu);
        yes = cc->r[i]->admitted || cc->r[i]->done;
        pthread_mutex_unlock(&cc->r[i]->mu);
    }
    return yes;
}

static int all_done(conn_ctx *cc) {
    int yes = 1;
    for (int i = 0; i < cc->n && yes; i++) {
        pthread_mutex_lock(&cc->r[i]->mu);
        yes = cc->r[i]->done;
        pthread_mutex_unlock(&cc->r[i]->mu);
    }
    return yes;
}

static enum MHD_Result start_stream(g4_srv *s, struct MHD_Connection *c, conn_ctx *cc) {
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, cc, stream_free);
    if (!resp) return MHD_NO;
    ctx_ref(cc);
    cc->phase = P_STREAMING;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    cors_headers(s, c, resp);
    enum MHD_Result ret = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    g4_metrics_request(s->mx, cc->route, 200);
    return ret;
}

static enum MHD_Result finished_reply(g4_srv *s, struct MHD_Connection *c, conn_ctx *cc) {
    g4_api_error err;
    for (int i = 0; i < cc->n; i++) {
        g4_req *r = cc->r[i];
        if (r->finish == G4_FIN_ERROR) return reply_err(s, c, cc->route, gen_error(s, &err, r->err));
        if (r->finish == G4_FIN_CANCELLED) return not_ready(s, c, cc->route);
    }
    return reply(s, c, cc->route, 200, "application/json", g4_api_response_json(&s->api, &cc->o, cc->r));
}

/* A generation request, called again each time its connection is resumed: hands the body to a
 * parse worker, then waits (suspended) for a slot, then answers (or starts the stream). */
static enum MHD_Result generate(g4_srv *s, struct MHD_Connection *c, conn_ctx *cc) {
    g4_http *h = cc->h;
    g4_api_error err;
    for (;;) {
        pthread_mutex_lock(&h->mu);
        const int phase = cc->phase;
        pthread_mutex_unlock(&h->mu);
        double wake_at = 0;
        if (phase == P_NONE) {
            cc->generating = 1;
            cc->fd = conn_fd(c);
            cc->t_received = g4_now();
            client_gone(cc);   /* notes a half-close that is already there */
            cc->c = c;
            cc->phase = P_PARSING;
            http_queue_parse(h, ctx_ref(cc));
            continue;
        } else if (phase == P_PARSED) {
            if (cc->fail == FAIL_PARSE) return reply_err(s, c, cc->route, &cc->err);
            if (cc->fail == FAIL_NOT_READY) return not_ready(s, c, cc->route);
            if (cc->fail == FAIL_QUEUE_FULL) {
                g4_api_err(&err, 429, "server_error", NULL, "queue_full",
                           "%d requests are already waiting for a slot (--max-queue); retry shortly", s->opts.max_queue);
                return reply_with(s, c, cc->route, 429, "application/json", g4_api_error_json(&err), "Retry-After", "1");
            }
            cc->phase = P_RUNNING;
            continue;   /* its news may have come already: look before sleeping */
        } else if (phase == P_RUNNING) {
            if (cc->o.stream ? any_admitted_or_done(cc) : all_done(cc))
                return cc->o.stream ? start_stream(s, c, cc) : finished_reply(s, c, cc);
            if (client_gone(cc)) {
                cancel_all(cc);
                g4_metrics_request(s->mx, cc->route, 499);   /* nginx's "client closed request" */
                return MHD_NO;
            }
            const int qt = s->opts.queue_timeout_s;
            if (qt > 0 && !any_admitted_or_done(cc)) wake_at = cc->t_submit + qt;
            if (wake_at > 0 && g4_now() >= wake_at) {
                cancel_all(cc);
                g4_api_err(&err, 503, "server_error", NULL, "queue_timeout",
                           "no slot became free within %d s (--queue-timeout); retry shortly", qt);
                return reply_with(s, c, cc->route, 503, "application/json", g4_api_error_json(&err), "Retry-After", "1");
            }
        }
        /* P_PARSING, or P_RUNNING with nothing to say yet: sleep until there is news */
        const int slept = http_sleep(h, &cc->w, c, watched_fd(cc), wake_at);
        if (slept > 0) return MHD_YES;
        if (slept < 0) {   /* shutting down */
            cancel_all(cc);
            return MHD_NO;
        }
    }
}

/* The fixed routes: path, method, and what answers them (a g4_api_kind, or a negative code) */
static const struct { const char *path, *method; int kind; } routes[] = {
    {"/v1/chat/completions", "POST", G4_API_CHAT}, {"/v1/completions", "POST", G4_API_COMPLETION},
    {"/generate", "POST", G4_API_GENERATE},        {"/v1/models", "GET", -1},
    {"/health", "GET", -2},                        {"/metrics", "GET", -3},
    {"/tokenize", "POST", -4},                     {"/detokenize", "POST", -5},
    {"/v1/responses", "POST", G4_API_RESPONSES},
};

/* The route a URL is counted under in the metrics */
static const char *route_label(const char *url) {
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (!strcmp(url, routes[i].path)) return routes[i].path;
    return !strncmp(url, "/v1/models/", 11) ? "/v1/models/{id}" : "other";
}

/* 401 as OpenAI answers a missing or wrong key */
static enum MHD_Result unauthorized(g4_srv *s, struct MHD_Connection *c, const char *rt) {
    g4_api_error err;
    g4_api_err(&err, 401, "invalid_request_error", NULL, "invalid_api_key",
               "Incorrect or missing API key: send it as 'Authorization: Bearer KEY'");
    return reply_with(s, c, rt, 401, "application/json", g4_api_error_json(&err), MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                      "Bearer");
}

static int is_preflight(const g4_srv *s, struct MHD_Connection *c, const char *method) {
    return s->opts.n_cors && !strcmp(method, "OPTIONS") &&
           MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Method");
}

static enum MHD_Result route(g4_srv *s, struct MHD_Connection *c, const char *url, const char *method, conn_ctx *cc) {
    g4_api_error err;
    if (!strncmp(url, "/v1/models/", 11) && url[11]) {   /* one model by id (ids may hold '/') */
        const char *rt = "/v1/models/{id}";
        if (is_preflight(s, c, method)) return preflight(s, c, rt, "GET, HEAD");
        if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
            g4_api_err(&err, 405, "invalid_request_error", NULL, "method_not_allowed", "%s %s is not supported; use GET",
                       method, url);
            return reply_with(s, c, rt, 405, "application/json", g4_api_error_json(&err), MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
        }
        if (!authorized(s, c)) return unauthorized(s, c, rt);
        char *body = g4_api_model_json(&s->api, url + 11, s->started, &err);
        return body ? reply(s, c, rt, 200, "application/json", body) : reply_err(s, c, rt, &err);
    }
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (strcmp(url, routes[i].path)) continue;
        const char *rt = routes[i].path;
        const int get = !strcmp(routes[i].method, "GET");
        if (is_preflight(s, c, method)) return preflight(s, c, rt, get ? "GET, HEAD" : routes[i].method);
        if (strcmp(method, routes[i].method) && !(get && !strcmp(method, "HEAD"))) {
            g4_api_err(&err, 405, "invalid_request_error", NULL, "method_not_allowed", "%s %s is not supported; use %s",
                       method, url, routes[i].method);
            return reply_with(s, c, rt, 405, "application/json", g4_api_error_json(&err), MHD_HTTP_HEADER_ALLOW,
                              get ? "GET, HEAD" : routes[i].method);
        }
        /* /health and /metrics stay open for probes and scrapers unless --auth-all */
        if ((routes[i].kind > -2 || routes[i].kind < -3 || s->opts.auth_all) && !authorized(s, c))
            return unauthorized(s, c, rt);
        if (cc->too_big)
            return reply_err(s, c, rt, g4_api_err(&err, 413, "invalid_request_error", NULL, "request_too_large",
                                                  "the request body is larger than the limit of %zu bytes", s->opts.max_body));
        switch (routes[i].kind) {
        case -1: return reply(s, c, rt, 200, "application/json", g4_api_models_json(&s->api, s->started));
        case -2: {
            int st = s->state;
            if (g4_mapped_file_lost())   /* every step fails from now on (g4_guard_mapped_files) */
                return reply(s, c, rt, 503, "application/json",
                             strdup("{\"status\":\"failed\",\"error\":\"a model file shrank or was replaced under the "
                                    "running server; restart it with an intact file\"}"));
            const char *lost = model_lost(s);
            if (lost) {   /* every step fails from now on: the MPI group cannot be used again */
                char body[512];   /* the reason is fixed text without quotes or backslashes */
                snprintf(body, sizeof body, "{\"status\":\"failed\",\"error\":\"%s\"}", lost);
                return reply(s, c, rt, 503, "application/json", strdup(body));
            }
            if (st == G4_SRV_READY) return reply(s, c, rt, 200, "application/json", strdup("{\"status\":\"ok\"}"));
            return reply(s, c, rt, 503, "application/json",
                         strdup(st == G4_SRV_LOADING ? "{\"status\":\"loading\"}" : st == G4_SRV_FAILED ? "{\"status\":\"failed\"}"
                                                                                                         : "{\"status\":\"stopping\"}"));
        }
        case -3: {
            char *m = g4_metrics_render(s->mx);
            char *all = m ? http_append_metrics(s->http, m) : NULL;
            return reply(s, c, rt, 200, "text/plain; version=0.0.4; charset=utf-8", all);
        }
        case -4:
        case -5: {
            if (s->state != G4_SRV_READY) return not_ready(s, c, rt);
            const char *b = cc->body ? cc->body : "";
            char *out = routes[i].kind == -4 ? g4_api_tokenize_json(&s->api, b, cc->len, &err)
                                             : g4_api_detokenize_json(&s->api, b, cc->len, &err);
            return out ? reply(s, c, rt, 200, "application/json", out) : reply_err(s, c, rt, &err);
        }
        default:
            if (s->state != G4_SRV_READY || model_lost(s)) return not_ready(s, c, rt);
            if (routes[i].kind == G4_API_CHAT && !s->tmpl)
                return reply_err(s, c, rt, g4_api_err(&err, 400, "invalid_request_error", "messages", NULL,
                                                      "this model has no chat template; use /v1/completions"));
            cc->kind = (g4_api_kind)routes[i].kind;
            cc->route = rt;
            return generate(s, c, cc);
        }
    }
    return reply_err(s, c, "other", g4_api_err(&err, 404, "invalid_request_error", NULL, "not_found",
                                               "no route %s %s", method, url));
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls) {
    (void)version;
    g4_srv *s = cls;
    conn_ctx *cc = *con_cls;
    if (!cc) {   /* headers only: set up the body buffer */
        if (!(cc = calloc(1, sizeof *cc))) return MHD_NO;
        cc->h = s->http;
        cc->refs = 1;
        cc->fd = -1;
        *con_cls = cc;
        /* a declared body over the limit is refused now, before a byte of it is read */
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        char *end;
        errno = 0;
        const unsigned long long declared = cl ? strtoull(cl, &end, 10) : 0;
        if (cl && (errno == ERANGE || declared > s->opts.max_body)) {
            g4_api_error err;
            cc->answered = 1;
            http_request_received(s->http, c);
            return reply_err(s, c, route_label(url), g4_api_err(&err, 413, "invalid_request_error", NULL, "request_too_large",
                                                       "the request body is larger than the limit of %zu bytes",
                                                       s->opts.max_body));
        }
        return MHD_YES;
    }
    if (cc->answered) {   /* answered from Content-Length: drop whatever still arrives */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        /* Over the limit the rest is read and dropped so the 413 reaches a client that is
         * still sending (answering mid-upload makes many clients see a reset instead). */
        if (!cc->too_big && cc->len + *upload_data_size > s->opts.max_body) {
            cc->too_big = 1;
            free(cc->body);
            cc->body = NULL;
            cc->len = cc->cap = 0;
        }
        if (!cc->too_big) {
            if (cc->len + *upload_data_size + 1 > cc->cap) {
                size_t nc = (cc->len + *upload_data_size + 1) * 2;
                char *nb = realloc(cc->body, nc);
                if (!nb) return MHD_NO;
                cc->body = nb;
                cc->cap = nc;
            }
            memcpy(cc->body + cc->len, upload_data, *upload_data_size);
            cc->len += *upload_data_size;
            cc->body[cc->len] = 0;
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (!cc->received) {   /* the whole request is in: the receive deadline stops here */
        cc->received = 1;
        http_request_received(s->http, c);
    }
    if (cc->generating) return generate(s, c, cc);   /* resumed */
    return route(s, c, url, method, cc);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    g4_srv *s = cls;
    conn_ctx *cc = *con_cls;
    *con_cls = NULL;
    http_request_done(s->http, c, toe);
    if (!cc) return;
    http_forget(cc->h, &cc->w);
    ctx_unref(cc);
}

g4_status g4_http_start(g4_srv *s, int *port) {
    /* --host: an IPv4 or IPv6 address or a name; "::" listens on both families (dual stack) */
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char service[16];
    snprintf(service, sizeof service, "%d", s->opts.port);
    if (getaddrinfo(s->opts.host, service, &hints, &ai) || !ai)
        return g4_fail(G4_ERR_INPUT, "--host '%s': not an IPv4 or IPv6 address or a resolvable name", s->opts.host);
    /* Our own listening socket: SO_REUSEADDR (a restart may bind over connections in TIME_WAIT)
     * but never SO_REUSEPORT, under which a second server on a port in use starts and silently
     * shares it; and bind's errno tells "in use" apart from the rest. */
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, zero = 0;
    if (fd < 0) {
        freeaddrinfo(ai);
        return g4_fail(G4_ERR_IO, "cannot create a socket: %s", strerror(errno));
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ai->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    const int bad = bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 1024);
    s->ipv6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);
    if (bad) {
        const int e = errno;
        close(fd);
        if (e == EADDRINUSE) return g4_fail(G4_ERR_IO, "port %d is in use", s->opts.port);
        return g4_fail(G4_ERR_IO, "cannot listen on %s:%d: %s", s->opts.host, s->opts.port, strerror(e));
    }
    if (!(s->http = http_new(s))) {
        close(fd);
        return g4_fail(G4_ERR_NOMEM, "out of memory starting the HTTP server");
    }
    struct MHD_Daemon *d = http_start_daemon(s->http, fd, handler, completed);
    if (!d) {
        http_free(s->http);
        s->http = NULL;
        close(fd);
        return g4_fail(G4_ERR_IO, "cannot serve on %s:%d", s->opts.host, s->opts.port);
    }
    s->daemon = d;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    *port = di ? di->port : s->opts.port;
    return G4_OK;
}

void g4_http_stop(g4_srv *s) {
    if (!s->http) return;
    http_stop(s->http);   /* lets streams end, resumes every suspended connection, stops the daemon */
    http_free(s->http);
    s->http = NULL;
    s->daemon = NULL;
}
