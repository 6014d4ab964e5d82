/* comm_threads.c — the in-process backend of comm.h: every rank publishes a pointer to its
 * buffer, all meet at a barrier, each reads what it needs straight from the others' memory,
 * and a second barrier lets the buffers be reused. The barrier spins briefly then yields, since
 * ranks often share cores with each other's worker threads. */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/comm.h"

typedef struct {
    int n;
    atomic_int arrived;
    atomic_int phase;           /* barrier generation */
    atomic_int refs;            /* handles not yet freed */
    const void *ptr[64];        /* each rank's published buffer */
    float **scratch;            /* per-rank reduction scratch, grown on first use by its rank */
    size_t *cap;
} group;

typedef struct {
    g4_comm c;                  /* first: g4_comm* casts to handle* */
    group *g;
} handle;

static void barrier(group *g) {
    int phase = atomic_load_explicit(&g->phase, memory_order_acquire);
    if (atomic_fetch_add_explicit(&g->arrived, 1, memory_order_acq_rel) == g->n - 1) {
        atomic_store_explicit(&g->arrived, 0, memory_order_relaxed);
        atomic_store_explicit(&g->phase, phase + 1, memory_order_release);
        return;
    }
    for (int spins = 0; atomic_load_explicit(&g->phase, memory_order_acquire) == phase; spins++) {
        if (spins < 4000) __builtin_ia32_pause();
        else sched_yield();
    }
}

static void t_allreduce(g4_comm *c, float *buf, size_t n) {
    group *g = ((handle *)c)->g;
    if (n > g->cap[c->rank]) {   /* the first (largest) step sizes it: decode steps allocate nothing */
        float *p = realloc(g->scratch[c->rank], n * sizeof(float));
        if (!p) abort();         /* a few MiB at start-up; nothing sensible to do without it */
        g->scratch[c->rank] = p;
        g->cap[c->rank] = n;
    }
    float *acc = g->scratch[c->rank];
    g->ptr[c->rank] = buf;
    barrier(g);
    memcpy(acc, g->ptr[0], n * sizeof(float));
    for (int r = 1; r < g->n; r++) {
        const float *p = g->ptr[r];
        for (size_t i = 0; i < n; i++) acc[i] += p[i];
    }
    barrier(g);   /* everyone has read every partial before anyone overwrites its own */
    memcpy(buf, acc, n * sizeof(float));
}

static void t_bcast(g4_comm *c, void *buf, size_t bytes) {
    group *g = ((handle *)c)->g;
    if (c->rank == 0) g->ptr[0] = buf;
    barrier(g);
    if (c->rank) memcpy(buf, g->ptr[0], bytes);
    barrier(g);
}

static void t_gather(g4_comm *c, const void *send, size_t bytes, void *recv) {
    group *g = ((handle *)c)->g;
    g->ptr[c->rank] = send;
    barrier(g);
    if (c->rank == 0)
        for (int r = 0; r < g->n; r++) memcpy((char *)recv + (size_t)r * bytes, g->ptr[r], bytes);
    barrier(g);
}

static void t_free(g4_comm *c) {
    if (!c) return;
    group *g = ((handle *)c)->g;
    free(c);
    if (atomic_fetch_sub(&g->refs, 1) == 1) {
        for (int r = 0; r < g->n; r++) free(g->scratch[r]);
        free(g->scratch);
        free(g->cap);
        free(g);
    }
}

g4_comm **g4_comm_threads_new(int n) {
    if (n < 1 || n > 64) return NULL;
    group *g = calloc(1, sizeof *g);
    g4_comm **out = calloc((size_t)n, sizeof *out);
    if (!g || !out || !(g->scratch = calloc((size_t)n, sizeof(float *))) || !(g->cap = calloc((size_t)n, sizeof(size_t))))
        goto fail;
    g->n = n;
    for (int r = 0; r < n; r++) {
        handle *h = calloc(1, sizeof *h);
        if (!h) goto fail;
        h->g = g;
        h->c = (g4_comm){.rank = r, .size = n, .allreduce_sum = t_allreduce, .bcast = t_bcast,
                         .bcast_idle = t_bcast, .gather = t_gather, .free = t_free};
        out[r] = &h->c;
        atomic_fetch_add(&g->refs, 1);
    }
    return out;
fail:
    if (out)
        for (int r = 0; r < n; r++) free(out[r]);
    if (g) { free(g->scratch); free(g->cap); }
    free(g);
    free(out);
    return NULL;
}
