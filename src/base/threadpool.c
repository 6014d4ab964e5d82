/* threadpool.c — worker threads for the forward pass (see threadpool.h for the contract).
 * Tasks are claimed from one atomic word holding (loop generation << 32 | next task index), so a
 * worker that wakes late can never claim a task of a loop it did not see start, and the caller
 * waits only for claimed tasks to finish — not for every worker to check in. On an
 * oversubscribed machine that matters: a descheduled worker no longer stalls every loop. */
#include "base/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

struct g4_pool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    _Atomic uint64_t work;      /* generation << 32 | next task index */
    atomic_int tasks_done;
    int n_tasks;
    g4_task_fn fn;
    void *ctx;
    int stop;
};

typedef struct { g4_pool *p; int id; } worker_arg;

/* Claims and runs tasks of generation `gen` until none are left. */
static void drain(g4_pool *p, uint32_t gen, int thread) {
    uint64_t v = atomic_load_explicit(&p->work, memory_order_acquire);
    for (;;) {
        if ((uint32_t)(v >> 32) != gen) return;
        uint32_t t = (uint32_t)v;
        if ((int)t >= p->n_tasks) return;
        if (!atomic_compare_exchange_weak_explicit(&p->work, &v, v + 1, memory_order_acq_rel, memory_order_acquire))
            continue;
        p->fn(p->ctx, (int)t, thread);
        atomic_fetch_add_explicit(&p->tasks_done, 1, memory_order_release);
        v = atomic_load_explicit(&p->work, memory_order_acquire);
    }
}

static void *worker_main(void *arg) {
    worker_arg wa = *(worker_arg *)arg;
    free(arg);
    g4_pool *p = wa.p;
    uint32_t seen = 0;
    for (;;) {
        /* Spin for a while (cheap wake-up between back-to-back loops), then sleep. */
        uint32_t gen;
        int spins = 0;
        while ((gen = (uint32_t)(atomic_load_explicit(&p->work, memory_order_acquire) >> 32)) == seen &&
               spins < 20000) {
            spins++;
            __builtin_ia32_pause();
        }
        if (gen == seen) {
            pthread_mutex_lock(&p->mu);
            while ((gen = (uint32_t)(atomic_load_explicit(&p->work, memory_order_acquire) >> 32)) == seen && !p->stop)
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
    if (!p->threads) { free(p); return NULL; }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) { p->n_threads = i; g4_pool_free(p); return NULL; }
        wa->p = p;
        wa->id = i;
        if (pthread_create(&p->threads[i], NULL, worker_main, wa) != 0) {
            free(wa);
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
    p->n_tasks = 0;
    atomic_fetch_add_explicit(&p->work, (uint64_t)1 << 32, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    free(p->threads);
    free(p);
}

int g4_pool_size(const g4_pool *p) { return p->n_threads; }

void g4_pool_run(g4_pool *p, int n_tasks, g4_task_fn fn, void *ctx) {
    if (n_tasks <= 0) return;
    if (p->n_threads == 1 || n_tasks == 1) {
        for (int t = 0; t < n_tasks; t++) fn(ctx, t, 0);
        return;
    }
    /* publish the job, then the new generation with task index 0 */
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store_explicit(&p->tasks_done, 0, memory_order_relaxed);
    uint32_t gen = (uint32_t)(atomic_load_explicit(&p->work, memory_order_relaxed) >> 32) + 1;
    pthread_mutex_lock(&p->mu);
    atomic_store_explicit(&p->work, (uint64_t)gen << 32, memory_order_release);
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
