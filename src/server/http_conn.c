/* http_conn.c — the HTTP server's connections. MHD runs in its internal-polling mode (epoll
 * where the system has it) with a small thread pool: a slow or idle client costs a socket and a
 * little memory, not a thread. On top of MHD's own limits:
 *  - --max-connections: past it, the oldest connection still sending its request (or idle
 *    between requests) is closed to make room, so a flood of slow clients cannot lock out the
 *    clients that send a request promptly (slowloris);
 *  - --timeout: a request's headers and body must all arrive within it (MHD's timeout alone is
 *    for idleness, which a client sending a byte a second never reaches);
 *  - connections waiting for the scheduler are suspended, and a ticker resumes those whose
 *    client went away or whose wait is up (MHD polls neither while suspended);
 *  - parse workers run the request parsing (chat templates) off the MHD threads;
 *  - MHD's per-connection error lines (resets, timeouts) are counted, and logged at most once
 *    a minute. */
#include <stdarg.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "server/http_conn.h"

enum { POOL_THREADS = 4, TICK_MS = 100, HARD_LIMIT_SLACK = 64 };
#define REWAKE_S 1.0

struct conn_rec {
    int fd;
    int receiving;     /* a request is arriving, or none yet (idle keep-alive) */
    int shut;          /* closed by us (evicted or past the deadline) */
    double since;      /* when receiving began */
    struct conn_rec *prev, *next;
};

static void rec_unlink(g4_http *h, conn_rec *r) {
    if (r->prev) r->prev->next = r->next;
    else h->conns = r->next;
    if (r->next) r->next->prev = r->prev;
    else h->conns_tail = r->prev;
    r->prev = r->next = NULL;
}

static void rec_append(g4_http *h, conn_rec *r) {
    r->prev = h->conns_tail;
    r->next = NULL;
    if (h->conns_tail) h->conns_tail->next = r;
    else h->conns = r;
    h->conns_tail = r;
}

/* shutdown(), not close(): MHD sees the end of the stream and closes the socket itself. */
static void rec_shut(conn_rec *r) {
    if (r->shut) return;
    r->shut = 1;
    shutdown(r->fd, SHUT_RDWR);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    g4_http *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_rec *r = calloc(1, sizeof *r);
        *socket_context = r;
        if (!r) return;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        r->fd = ci ? ci->connect_fd : -1;
        r->receiving = 1;
        r->since = g4_now();
        pthread_mutex_lock(&h->mu);
        rec_append(h, r);
        if (++h->n_conns > h->s->opts.max_connections) {
            /* make room: the oldest connection that has not sent a whole request (maybe r) */
            conn_rec *v = h->conns;
            while (v && (!v->receiving || v->shut)) v = v->next;
            if (!v) v = r;
            rec_shut(v);
            if (v == r) h->refused++;
            else h->evicted++;
        }
        pthread_mutex_unlock(&h->mu);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn_rec *r = *socket_context;
        *socket_context = NULL;
        if (!r) return;
        pthread_mutex_lock(&h->mu);
        rec_unlink(h, r);
        h->n_conns--;
        pthread_mutex_unlock(&h->mu);
        free(r);
    }
}

static conn_rec *rec_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

void http_request_received(g4_http *h, struct MHD_Connection *c) {
    conn_rec *r = rec_of(c);
    if (!r) return;
    pthread_mutex_lock(&h->mu);
    r->receiving = 0;
    pthread_mutex_unlock(&h->mu);
}

void http_request_done(g4_http *h, struct MHD_Connection *c, enum MHD_RequestTerminationCode toe) {
    conn_rec *r = rec_of(c);
    pthread_mutex_lock(&h->mu);
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && toe != MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN) h->dropped++;
    if (r) {   /* waiting for its next request now: the most recent, so the last to be evicted */
        r->receiving = 1;
        r->since = g4_now();
        rec_unlink(h, r);
        rec_append(h, r);
    }
    pthread_mutex_unlock(&h->mu);
}

/* ---------------------------------------------------------------- suspend and resume */

static void sleep_unlink(g4_http *h, h_wake *w) {
    if (w->prev) w->prev->next = w->next;
    else if (h->sleeping == w) h->sleeping = w->next;
    if (w->next) w->next->prev = w->prev;
    w->prev = w->next = NULL;
}

/* Our resume also leaves news pending: the woken side looks at its request once more. */
static void resume_locked(g4_http *h, h_wake *w) {
    w->suspended = 0;
    w->pending = 1;
    sleep_unlink(h, w);
    MHD_resume_connection(w->c);
}

int http_sleep(g4_http *h, h_wake *w, struct MHD_Connection *c, int fd, double wake_at) {
    pthread_mutex_lock(&h->mu);
    int ret = 1;
    if (h->closing) ret = -1;
    else if (w->pending) {
        w->pending = 0;
        ret = 0;
    } else {
        w->c = c;
        w->fd = fd;
        w->wake_at = wake_at;
        w->since = g4_now();
        /* Already asleep by our books: MHD dropped the last suspend (it does when a resume was
         * still pending), so suspend again without listing w twice. */
        if (!w->suspended) {
            w->suspended = 1;
            w->prev = NULL;
            w->next = h->sleeping;
            if (h->sleeping) h->sleeping->prev = w;
            h->sleeping = w;
        }
        MHD_suspend_connection(c);
    }
    pthread_mutex_unlock(&h->mu);
    return ret;
}

void http_wake(g4_http *h, h_wake *w) {
    pthread_mutex_lock(&h->mu);
    if (w->suspended) resume_locked(h, w);
    else w->pending = 1;
    pthread_mutex_unlock(&h->mu);
}

void http_forget(g4_http *h, h_wake *w) {
    pthread_mutex_lock(&h->mu);
    if (w->suspended) {
        w->suspended = 0;
        sleep_unlink(h, w);
    }
    w->c = NULL;
    pthread_mutex_unlock(&h->mu);
}

static int peer_gone(int fd) {
    if (fd < 0) return 0;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* Every TICK_MS: resume the sleepers whose client left or whose wait is up, and close the
 * connections whose request has not arrived within --timeout. */
static void *ticker(void *arg) {
    g4_http *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!h->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += TICK_MS * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&h->cv, &h->mu, &ts);
        const double now = g4_now();
        for (h_wake *w = h->sleeping, *next; w; w = next) {
            next = w->next;
            const int gone = peer_gone(w->fd);
            if (gone && !w->eof_at) w->eof_at = now;
            /* the last test is a safety net for a wake-up MHD lost (a resume that raced a suspend) */
            if ((w->wake_at > 0 && now >= w->wake_at) || gone || now - w->since > REWAKE_S) resume_locked(h, w);
        }
        const double limit = h->s->opts.timeout_s;
        for (conn_rec *r = h->conns; r && limit > 0; r = r->next)
            if (r->receiving && !r->shut && now - r->since > limit) {
                rec_shut(r);
                h->timed_out++;
            }
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* ---------------------------------------------------------------- parse workers */

void http_queue_parse(g4_http *h, conn_ctx *cc) {
    pthread_mutex_lock(&h->mu);
    http_job_set_next(cc, NULL);
    if (h->jobs_tail) http_job_set_next(h->jobs_tail, cc);
    else h->jobs = cc;
    h->jobs_tail = cc;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

static void *parse_worker(void *arg) {
    g4_http *h = arg;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (!h->jobs && !h->stop) pthread_cond_wait(&h->cv, &h->mu);
        conn_ctx *cc = h->jobs;
        if (!cc) break;   /* stopping, and nothing left to parse */
        h->jobs = http_job_next(cc);
        if (!h->jobs) h->jobs_tail = NULL;
        pthread_mutex_unlock(&h->mu);
        http_parse_job(h, cc);
        pthread_mutex_lock(&h->mu);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* ---------------------------------------------------------------- the daemon */

/* MHD's error lines are mostly about single connections (a reset, a timeout, a refused
 * connection under a flood): one line a minute at most, with how many were left out. */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
    g4_http *h = cls;
    pthread_mutex_lock(&h->mu);
    const double now = g4_now();
    const int print = now - h->last_log >= 60;
    long suppressed = h->log_suppressed;
    if (print) {
        h->last_log = now;
        h->log_suppressed = 0;
    } else h->log_suppressed++;
    pthread_mutex_unlock(&h->mu);
    if (!print) return;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && line[n - 1] == '\n') line[--n] = 0;
    if (suppressed) fprintf(stderr, "gemma4c serve: http: %s (%ld similar lines left out)\n", line, suppressed);
    else fprintf(stderr, "gemma4c serve: http: %s (more such lines at most once a minute)\n", line);
}

g4_http *http_new(g4_srv *s) {
    g4_http *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->s = s;
    h->last_log = -1e9;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    /* one parse worker per concurrent render, and two for the requests that render nothing */
    h->n_workers = (s->opts.max_renders > 0 ? s->opts.max_renders : 1) + 2;
    h->workers = calloc((size_t)h->n_workers, sizeof *h->workers);
    if (!h->workers) {
        http_free(h);
        return NULL;
    }
    return h;
}

static void stop_threads(g4_http *h) {
    pthread_mutex_lock(&h->mu);
    h->stop = 1;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    for (int i = 0; i < h->n_workers; i++)
        if (h->workers[i]) pthread_join(h->workers[i], NULL);
    if (h->have_ticker) pthread_join(h->ticker, NULL);
    h->have_ticker = 0;
    memset(h->workers, 0, (size_t)h->n_workers * sizeof *h->workers);
}

struct MHD_Daemon *http_start_daemon(g4_http *h, int fd, MHD_AccessHandlerCallback handler,
                                     MHD_RequestCompletedCallback completed) {
    const g4_server_opts *o = &h->s->opts;
    for (int i = 0; i < h->n_workers; i++)
        if (pthread_create(&h->workers[i], NULL, parse_worker, h)) return stop_threads(h), NULL;
    if (pthread_create(&h->ticker, NULL, ticker, h)) return stop_threads(h), NULL;
    h->have_ticker = 1;
    /* MHD's own limit is a backstop above ours: ours closes the oldest slow connection instead
     * of refusing the newest one. */
    const unsigned hard = (unsigned)o->max_connections + HARD_LIMIT_SLACK;
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC | MHD_USE_ERROR_LOG |
            (h->s->ipv6 ? MHD_USE_IPv6 : 0),
        0, NULL, NULL, handler, h->s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
        MHD_OPTION_NOTIFY_COMPLETED, completed, h->s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)POOL_THREADS, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->timeout_s,
        MHD_OPTION_CONNECTION_LIMIT, hard, MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)o->max_conn_per_ip,
        MHD_OPTION_END);
    if (!d) stop_threads(h);
    return d;
}

void http_stop(g4_http *h) {
    struct MHD_Daemon *d = h->s->daemon;
    /* The scheduler has finished (or cancelled) every request, so every suspended connection
     * has been woken: give them up to 2 s to write their last events (a stream cut by SIGTERM
     * still ends cleanly), then resume whatever still sleeps and let it close. */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; d && i < 100 * (2 - pass); i++) {
            const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
            if (!di || di->num_connections == 0) break;
            nanosleep(&(struct timespec){0, 10 * 1000000L}, NULL);
        }
        pthread_mutex_lock(&h->mu);
        h->closing = 1;   /* MHD must not stop with a connection suspended */
        while (h->sleeping) resume_locked(h, h->sleeping);
        for (conn_rec *r = h->conns; r; r = r->next) rec_shut(r);
        pthread_mutex_unlock(&h->mu);
    }
    stop_threads(h);
    if (d) MHD_stop_daemon(d);
}

void http_free(g4_http *h) {
    if (!h) return;
    stop_threads(h);
    while (h->conns) {   /* left by a daemon that never started */
        conn_rec *r = h->conns;
        rec_unlink(h, r);
        free(r);
    }
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h->workers);
    free(h);
}

char *http_append_metrics(g4_http *h, char *m) {
    pthread_mutex_lock(&h->mu);
    const int open = h->n_conns;
    const long ev = h->evicted, to = h->timed_out, rf = h->refused, dr = h->dropped;
    pthread_mutex_unlock(&h->mu);
    char extra[1024];
    snprintf(extra, sizeof extra,
             "# HELP g4_http_connections Open HTTP connections.\n# TYPE g4_http_connections gauge\n"
             "g4_http_connections %d\n"
             "# HELP g4_http_connections_closed_total Connections the server closed: evicted (--max-connections), "
             "timeout (--timeout before the request arrived), refused (no room).\n"
             "# TYPE g4_http_connections_closed_total counter\n"
             "g4_http_connections_closed_total{reason=\"evicted\"} %ld\n"
             "g4_http_connections_closed_total{reason=\"timeout\"} %ld\n"
             "g4_http_connections_closed_total{reason=\"refused\"} %ld\n"
             "# HELP g4_http_requests_dropped_total Requests that ended without a complete response (client gone, "
             "reset, idle timeout).\n# TYPE g4_http_requests_dropped_total counter\n"
             "g4_http_requests_dropped_total %ld\n",
             open, ev, to, rf, dr);
    const size_t a = strlen(m), b = strlen(extra);
    char *out = realloc(m, a + b + 1);
    if (!out) {
        free(m);
        return NULL;
    }
    memcpy(out + a, extra, b + 1);
    return out;
}
