/* metrics.c — the server's Prometheus counters, gauges and histograms and their text
 * exposition. Thread-safe (one mutex); knows nothing of HTTP or the model. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

#define N_BUCKETS 14
/* Seconds; spans a tiny fixture's sub-millisecond steps up to a 12B prefill on CPU. */
static const double bucket_le[N_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                            0.25,  0.5,    1,     2.5,  5,    10,   30};

typedef struct {
    unsigned long count[N_BUCKETS + 1];   /* last = +Inf only */
    unsigned long n;
    double sum;
} histo;

#define MAX_ROUTES 64
typedef struct {
    char route[48];
    int status;
    unsigned long n;
} route_count;

struct g4_metrics {
    pthread_mutex_t mu;
    route_count routes[MAX_ROUTES];
    int n_routes;
    unsigned long prompt_tokens, gen_tokens, cancelled, decode_steps, decode_rows;
    int max_batch;
    histo ttft, itl;
    int queue, busy, slots;
    long kv_used, kv_cap;
    unsigned long cache_hits, cache_misses, cache_tokens, cache_evictions;   /* the prompt cache */
    unsigned long spec_drafted, spec_accepted;   /* speculative decoding (--spec) */
    long cache_bytes;
    int cache_entries;
};

g4_metrics *g4_metrics_new(void) {
    g4_metrics *mx = calloc(1, sizeof *mx);
    if (mx) pthread_mutex_init(&mx->mu, NULL);
    return mx;
}

void g4_metrics_free(g4_metrics *mx) {
    if (!mx) return;
    pthread_mutex_destroy(&mx->mu);
    free(mx);
}

void g4_metrics_request(g4_metrics *mx, const char *route, int status) {
    pthread_mutex_lock(&mx->mu);
    int i;
    for (i = 0; i < mx->n_routes; i++)
        if (mx->routes[i].status == status && !strcmp(mx->routes[i].route, route)) break;
    if (i == mx->n_routes && i < MAX_ROUTES) {
        snprintf(mx->routes[i].route, sizeof mx->routes[i].route, "%s", route);
        mx->routes[i].status = status;
        mx->n_routes++;
    }
    if (i < MAX_ROUTES) mx->routes[i].n++;
    pthread_mutex_unlock(&mx->mu);
}

void g4_metrics_tokens(g4_metrics *mx, long prompt, long generated) {
    pthread_mutex_lock(&mx->mu);
    mx->prompt_tokens += (unsigned long)prompt;
    mx->gen_tokens += (unsigned long)generated;
    pthread_mutex_unlock(&mx->mu);
}

static void observe(histo *h, double v) {
    int b = 0;
    while (b < N_BUCKETS && v > bucket_le[b]) b++;
    h->count[b]++;
    h->n++;
    h->sum += v;
}

void g4_metrics_ttft(g4_metrics *mx, double s) {
    pthread_mutex_lock(&mx->mu);
    observe(&mx->ttft, s);
    pthread_mutex_unlock(&mx->mu);
}

void g4_metrics_itl(g4_metrics *mx, double s) {
    pthread_mutex_lock(&mx->mu);
    observe(&mx->itl, s);
    pthread_mutex_unlock(&mx->mu);
}

void g4_metrics_cancelled(g4_metrics *mx) {
    pthread_mutex_lock(&mx->mu);
    mx->cancelled++;
    pthread_mutex_unlock(&mx->mu);
}

void g4_metrics_decode_step(g4_metrics *mx, int n) {
    pthread_mutex_lock(&mx->mu);
    mx->decode_steps++;
    mx->decode_rows += (unsigned long)n;
    if (n > mx->max_batch) mx->max_batch = n;
    pthread_mutex_unlock(&mx->mu);
}

void g4_metrics_spec(g4_metrics *mx, int drafted, int accepted) {
    pthread_mutex_lock(&mx->mu);
    mx->spec_drafted += (unsigned long)drafted;
    mx->spec_accepted += (unsigned long)accepted;
    pthread_mutex_unlock(&mx->mu);
}

void g4_metrics_queue(g4_metrics *mx, int queue) {
    pthread_mutex_lock(&mx->mu);
    mx->queue = queue;
    pthread_mutex_unlock(&mx->mu);
}

void g4_metrics_gauges(g4_metrics *mx, int queue, int busy, int slots, long kv_used, long kv_cap) {
    pthread_mutex_lock(&mx->mu);
    mx->queue = queue;
    mx->busy = busy;
    mx->slots = slots;
    mx->kv_used = kv_used;
    mx->kv_cap = kv_cap;
    pthread_mutex_unlock(&mx->mu);
}

void g4_metrics_cache_lookup(g4_metrics *mx, int reused) {
    pthread_mutex_lock(&mx->mu);
    if (reused > 0) mx->cache_hits++;
    else mx->cache_misses++;
    mx->cache_tokens += (unsigned long)(reused > 0 ? reused : 0);
    pthread_mutex_unlock(&mx->mu);
}

void g4_metrics_cache_state(g4_metrics *mx, unsigned long evictions, long bytes, int entries) {
    pthread_mutex_lock(&mx->mu);
    mx->cache_evictions = evictions;
    mx->cache_bytes = bytes;
    mx->cache_entries = entries;
    pthread_mutex_unlock(&mx->mu);
}

typedef struct {
    char *p;
    size_t len, cap;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (b->p && b->len + (size_t)n < b->cap) { b->len += (size_t)n; return; }
        size_t nc = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
        char *np = realloc(b->p, nc);
        if (!np) return;
        b->p = np;
        b->cap = nc;
    }
}

static void put_histo(sbuf *b, const char *name, const char *help, const histo *h) {
    put(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    unsigned long cum = 0;
    for (int i = 0; i < N_BUCKETS; i++) {
        cum += h->count[i];
        put(b, "%s_bucket{le=\"%g\"} %lu\n", name, bucket_le[i], cum);
    }
    put(b, "%s_bucket{le=\"+Inf\"} %lu\n%s_sum %.6f\n%s_count %lu\n", name, h->n, name, h->sum, name, h->n);
}

/* One integer counter or gauge with its HELP and TYPE lines */
static void put_int(sbuf *b, const char *name, const char *type, const char *help, long long v) {
    put(b, "# HELP %s %s\n# TYPE %s %s\n%s %lld\n", name, help, name, type, name, v);
}

char *g4_metrics_render(g4_metrics *mx) {
    sbuf b = {0};
    pthread_mutex_lock(&mx->mu);
    put(&b, "# HELP g4_requests_total HTTP requests by route and status.\n# TYPE g4_requests_total counter\n");
    for (int i = 0; i < mx->n_routes; i++)
        put(&b, "g4_requests_total{route=\"%s\",status=\"%d\"} %lu\n", mx->routes[i].route, mx->routes[i].status,
            mx->routes[i].n);
    put_int(&b, "g4_prompt_tokens_total", "counter", "Prompt tokens prefilled.", mx->prompt_tokens);
    put_int(&b, "g4_generation_tokens_total", "counter", "Tokens generated.", mx->gen_tokens);
    put_int(&b, "g4_requests_cancelled_total", "counter", "Generations cancelled (client gone or shutdown).", mx->cancelled);
    put_int(&b, "g4_decode_steps_total", "counter", "Batched decode forward passes.", mx->decode_steps);
    put_int(&b, "g4_decode_rows_total", "counter", "Sequences advanced by decode passes (rows / steps = mean batch).", mx->decode_rows);
    put_int(&b, "g4_decode_batch_max", "gauge", "Largest decode batch so far.", mx->max_batch);
    put_int(&b, "g4_spec_drafted_tokens_total", "counter", "Draft tokens verified (--spec).", mx->spec_drafted);
    put_int(&b, "g4_spec_accepted_tokens_total", "counter", "Draft tokens the model kept (--spec).", mx->spec_accepted);
    put_histo(&b, "g4_time_to_first_token_seconds", "Submit to first generated token.", &mx->ttft);
    put_histo(&b, "g4_inter_token_latency_seconds", "Time between consecutive tokens of a request.", &mx->itl);
    put_int(&b, "g4_queue_depth", "gauge", "Requests waiting for a slot.", mx->queue);
    put_int(&b, "g4_busy_slots", "gauge", "Session slots running a request.", mx->busy);
    put_int(&b, "g4_slots", "gauge", "Session slots (--parallel).", mx->slots);
    put_int(&b, "g4_kv_cache_used_tokens", "gauge", "KV positions in use over all slots.", mx->kv_used);
    put_int(&b, "g4_kv_cache_capacity_tokens", "gauge", "KV positions over all slots.", mx->kv_cap);
    put(&b, "# HELP g4_kv_cache_usage_ratio Fraction of KV positions in use.\n# TYPE g4_kv_cache_usage_ratio gauge\n"
            "g4_kv_cache_usage_ratio %.6f\n", mx->kv_cap ? (double)mx->kv_used / (double)mx->kv_cap : 0.0);
    put_int(&b, "g4_prompt_cache_hits_total", "counter", "Requests that reused a cached prompt prefix.", mx->cache_hits);
    put_int(&b, "g4_prompt_cache_misses_total", "counter", "Requests that computed their whole prompt.", mx->cache_misses);
    put_int(&b, "g4_prompt_cache_tokens_total", "counter", "Prompt tokens taken from the cache instead of computed.", mx->cache_tokens);
    put_int(&b, "g4_prompt_cache_evictions_total", "counter", "Snapshots dropped to stay within --cache-ram.", mx->cache_evictions);
    put_int(&b, "g4_prompt_cache_bytes", "gauge", "Host memory held by prompt-cache snapshots.", mx->cache_bytes);
    put_int(&b, "g4_prompt_cache_entries", "gauge", "Prompt-cache snapshots held.", mx->cache_entries);
    pthread_mutex_unlock(&mx->mu);
    return b.p;
}
