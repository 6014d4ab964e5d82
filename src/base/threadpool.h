/* threadpool.h — a fixed pool of worker threads that run one parallel loop at a time.
 * The calling thread takes part as worker 0, so a pool of N threads starts N-1 pthreads.
 * Workers spin briefly between loops (decode issues hundreds of short loops per token) and then
 * sleep on a condition variable. Not re-entrant: one parallel_for at a time per pool. */
#ifndef G4_THREADPOOL_H
#define G4_THREADPOOL_H

typedef struct g4_pool g4_pool;

/* fn(ctx, task, thread) runs once for every task in [0, n_tasks); thread is in [0, n_threads). */
typedef void (*g4_task_fn)(void *ctx, int task, int thread);

g4_pool *g4_pool_new(int n_threads);   /* n_threads <= 0: all online CPUs */
void g4_pool_free(g4_pool *p);
int g4_pool_size(const g4_pool *p);
void g4_pool_run(g4_pool *p, int n_tasks, g4_task_fn fn, void *ctx);
/* fn(ctx, thread) once on each of the pool's threads (the caller as thread 0): for per-thread
 * state that must exist before the first parallel loop that uses it. */
void g4_pool_run_each(g4_pool *p, void (*fn)(void *ctx, int thread), void *ctx);

#endif
