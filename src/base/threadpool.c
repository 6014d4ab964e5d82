/* threadpool.c — worker threads for the forward pass (see threadpool.h for the contract).
 * Tasks are claimed from one atomic word holding (loop generation | task count | next task index),
 * so a worker that wakes late can never claim a task of a loop it did not see start, and the
 * caller waits only for claimed tasks to finish — not for every worker to check in. On an
 * oversubscribed machine that matters: a descheduled worker no longer stalls every loop. The task
 * count lives in the word too: read from the pool it could already be the next loop's (the caller
 * writes it before publishing the new generation), letting a worker still holding the old word
 * claim a task of the new loop early and the caller return while it ran. */
#include "base/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct { g4_pool *p; int id; } worker_arg;

struct g4_pool {
    int n_threads;
    pthread_t *threads;
    worker_arg *args;           /* one per thread, owned by the pool: a starting worker frees
                                 * nothing (it may start late, inside a decode step that is
                                 * tested to make no allocator call) */
    pthread_mutex_t mu;
    pthread_cond_t wake;
    _Atomic uint64_t work;      /* generation << 40 | task count << 20 | next task index */
    atomic_int tasks_done;
    g4_task_fn fn;
    void *ctx;
    int stop;
};

enum { TASK_BITS = 20, MAX_TASKS = (1 << TASK_BITS) - 1, GEN_MASK = (1 << 24) - 1 };
static inline uint32_t w_gen(uint64_t v) { return (uint32_t)(v >> 40); }
static inline uint32_t w_count(uint64_t v) { return (uint32_t)(v >> TASK_BITS) & MAX_TASKS; }
static inline uint32_t w_next(uint64_t v) { return (uint32_t)v & MAX_TASKS; }
static inline uint64_t w_make(uint32_t gen, uint32_t count) { return (uint64_t)(gen & GEN_MASK) << 40 | (uint64_t)count << TASK_BITS; }

/* Claims and runs tasks of generation `gen` until none are left. */
static void drain(g4_pool *p, uint32_t gen, int thread) {
    uint64_t v = atomic_load_explicit(&p->work, memory_order_acquire);
    for (;;) {
        if (w_gen(v) != gen) return;
        const uint32_t t = w_next(v);
        if (t >= w_count(v)) return;
        if (!atomic_compare_exchange_weak_explicit(&p->work, &v, v + 1, memory_order_acq_rel, memory_order_acquire))
            continue;
        p->fn(p->ctx, (int)t, thread);
        atomic_fetch_add_explicit(&p->tasks_done, 1, memory_order_release);
        v = atomic_load_explicit(&p->work, memory_order_acquire);
    }
}

static void *worker_main(void *arg) {
    const worker_arg wa = *(const worker_arg *)arg;
    g4_pool *p = wa.p;
    uint32_t seen = 0;
    for (;;) {
        /* Spin for a while (cheap wake-up between back-to-back loops), then sleep. */
        uint32_t gen;
        int spins = 0;
        while ((gen = w_gen(atomic_load_explicit(&p->work, memory_order_acquire))) == seen &&
               spins < 20000) {
            spins++;
            __builtin_ia32_pause();
        }
        if (gen == seen) {
            pthread_mutex_lock(&p->mu);
            while ((gen = w_gen(atomic_load_explicit(&p->work, memory_order_acquire))) == seen && !p->stop)
                pthread_cond_wait(&p->wake, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (p->stop) return NULL;
        seen = gen;
        drain(p, gen, wa.id);
    }
}

g4_pool *g4_pool_new(int n_threads) {
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    g4_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    p->threads = calloc((size_t)n_threads, sizeof(pthread_t));
    p->args = calloc((size_t)n_threads, sizeof(worker_arg));
    if (!p->threads || !p->args) { free(p->threads); free(p->args); free(p); return NULL; }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = &p->args[i];
        wa->p = p;
        wa->id = i;
        if (pthread_create(&p->threads[i], NULL, worker_main, wa) != 0) {
            p->n_threads = i;
            g4_pool_free(p);
            return NULL;
        }
    }
    return p;
}

void g4_pool_free(g4_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    atomic_store_explicit(&p->work, w_make(w_gen(atomic_load(&p->work)) + 1, 0), memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    free(p->threads);
    free(p->args);
    free(p);
}

int g4_pool_size(const g4_pool *p) { return p->n_threads; }

/* more tasks than the word can count: consecutive loops over ranges of them */
typedef struct { g4_task_fn fn; void *ctx; int base; } offset_job;
static void offset_task(void *ctx, int task, int thread) {
    const offset_job *j = ctx;
    j->fn(j->ctx, j->base + task, thread);
}

void g4_pool_run(g4_pool *p, int n_tasks, g4_task_fn fn, void *ctx) {
    if (n_tasks <= 0) return;
    if (p->n_threads == 1 || n_tasks == 1) {
        for (int t = 0; t < n_tasks; t++) fn(ctx, t, 0);
        return;
    }
    if (n_tasks > MAX_TASKS) {
        for (int base = 0; base < n_tasks; base += MAX_TASKS) {
            offset_job j = {fn, ctx, base};
            g4_pool_run(p, n_tasks - base < MAX_TASKS ? n_tasks - base : MAX_TASKS, offset_task, &j);
        }
        return;
    }
    /* publish the job, then the new generation with its task count and task index 0 (no worker
     * can be running a task now: the previous loop's claimed tasks have all finished) */
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->tasks_done, 0, memory_order_relaxed);
    const uint32_t gen = (w_gen(atomic_load_explicit(&p->work, memory_order_relaxed)) + 1) & GEN_MASK;
    pthread_mutex_lock(&p->mu);
    atomic_store_explicit(&p->work, w_make(gen, (uint32_t)n_tasks), memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    drain(p, gen, 0);
    /* spin briefly, then yield: on an oversubscribed machine a pure spin starves the very
     * worker whose claimed task we wait for */
    for (int spins = 0; atomic_load_explicit(&p->tasks_done, memory_order_acquire) < n_tasks; spins++) {
        if (spins < 2000) __builtin_ia32_pause();
        else sched_yield();
    }
}

/* One task per thread; each waits, after fn, until every task has started, so no thread can
 * claim a second one (every thread of the pool takes part in every loop). */
typedef struct { void (*fn)(void *, int); void *ctx; atomic_int started; int n; } each_job;
static void each_task(void *ctx, int task, int thread) {
    each_job *j = ctx;
    (void)task;
    atomic_fetch_add_explicit(&j->started, 1, memory_order_acq_rel);
    j->fn(j->ctx, thread);
    for (int spins = 0; atomic_load_explicit(&j->started, memory_order_acquire) < j->n; spins++) {
        if (spins < 2000) __builtin_ia32_pause();
        else sched_yield();
    }
}

void g4_pool_run_each(g4_pool *p, void (*fn)(void *ctx, int thread), void *ctx) {
    if (p->n_threads == 1) {
        fn(ctx, 0);
        return;
    }
    each_job j = {.fn = fn, .ctx = ctx, .n = p->n_threads};
    atomic_init(&j.started, 0);
    g4_pool_run(p, p->n_threads, each_task, &j);
}
