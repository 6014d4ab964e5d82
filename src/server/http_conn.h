/* http_conn.h — the HTTP server's connections (http_conn.c) as http.c sees them: the MHD daemon
 * in its event-driven mode, the connection limits and the request deadline, the suspend/resume
 * of connections waiting for the scheduler, and the parse workers. */
#ifndef G4_HTTP_CONN_H
#define G4_HTTP_CONN_H

#include <microhttpd.h>
#include <pthread.h>

#include "server/server.h"

typedef struct conn_ctx conn_ctx;   /* http.c's request state */
typedef struct conn_rec conn_rec;   /* one open connection (MHD's socket context) */

/* A suspendable request: a connection that sleeps until http_wake (under g4_http.mu). */
typedef struct h_wake {
    struct MHD_Connection *c;
    int fd;
    int suspended, pending;
    double wake_at;                 /* the ticker resumes it then (0: never) */
    double since;                   /* when it went to sleep */
    double eof_at;                  /* when the ticker first saw its client's end of stream (0: not yet) */
    struct h_wake *prev, *next;     /* the suspended list */
} h_wake;

typedef struct g4_http {
    g4_srv *s;
    pthread_mutex_t mu;             /* guards everything here and every h_wake */
    pthread_cond_t cv;              /* parse queue and ticker */
    conn_rec *conns, *conns_tail;   /* oldest first */
    int n_conns;
    h_wake *sleeping;
    int closing;                    /* no connection suspends any more */
    conn_ctx *jobs, *jobs_tail;
    pthread_t *workers, ticker;
    int n_workers, have_ticker, stop;
    long evicted, timed_out, refused, dropped;   /* counters for /metrics */
    double last_log;                /* rate limit of MHD's connection-error lines */
    long log_suppressed;
} g4_http;

g4_http *http_new(g4_srv *s);
/* MHD in its internal-polling mode (epoll where available) with a small thread pool, serving fd. */
struct MHD_Daemon *http_start_daemon(g4_http *h, int fd, MHD_AccessHandlerCallback handler,
                                     MHD_RequestCompletedCallback completed);
/* Resumes every suspended connection, lets them close, stops the daemon and the threads. */
void http_stop(g4_http *h);
void http_free(g4_http *h);

/* Suspends c (from MHD's handler or content reader) until http_wake, a gone client, wake_at or
 * shutdown. Returns 1 when suspended, 0 when news came meanwhile (look again), -1 when the
 * server is closing (answer nothing more). */
int http_sleep(g4_http *h, h_wake *w, struct MHD_Connection *c, int fd, double wake_at);
void http_wake(g4_http *h, h_wake *w);
/* The request is over: w is never resumed again. */
void http_forget(g4_http *h, h_wake *w);

/* Hands a request to a parse worker, which calls http_parse_job (http.c). */
void http_queue_parse(g4_http *h, conn_ctx *cc);
void http_parse_job(g4_http *h, conn_ctx *cc);
conn_ctx *http_job_next(conn_ctx *cc);
void http_job_set_next(conn_ctx *cc, conn_ctx *next);

/* The request's headers and body are all in (the receive deadline stops), and it is answered
 * (the connection waits for its next request: the deadline starts again). */
void http_request_received(g4_http *h, struct MHD_Connection *c);
void http_request_done(g4_http *h, struct MHD_Connection *c, enum MHD_RequestTerminationCode toe);

/* The metrics text m (freed) followed by the connection counters; malloc'ed. */
char *http_append_metrics(g4_http *h, char *m);

#endif
