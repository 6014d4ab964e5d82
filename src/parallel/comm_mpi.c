/* comm_mpi.c — the OpenMPI backend of comm.h: one process per rank. The all-reduce gathers
 * every rank's partial (MPI_Allgather) and sums them locally in rank order rather than calling
 * MPI_Allreduce, whose summation order is the library's choice: that way the MPI and threads
 * backends give bit-identical logits. Partials are one hidden vector per row, so the extra
 * traffic is small next to the weights each rank streams. Built without MPI when the Makefile
 * finds no ompi-c (G4_HAVE_MPI unset): the entry points then refuse with a clear error.
 *
 * With a deadline every collective is the nonblocking call (MPI_Ibcast, MPI_Iallgather,
 * MPI_Igather) polled with MPI_Test against a clock; past the deadline the handle is lost (comm.h).
 * The buffers such a call was given stay allocated for the life of the process: MPI may still
 * write into them if the stopped rank ever resumes. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parallel/comm.h"

#ifdef G4_HAVE_MPI
#include <mpi.h>

typedef struct {
    g4_comm c;
    float *all;      /* [size][cap] gathered partials, grown on the first (largest) step */
    size_t cap;
    double timeout_s;   /* > 0: each collective's deadline */
} mpi_handle;

static int g_finalize_registered;
static atomic_int g_any_lost;   /* some handle of this process lost its group */

static void finalize_at_exit(void) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    /* MPI_Finalize synchronizes with every rank, the lost one too: end the whole job instead */
    if (atomic_load(&g_any_lost)) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
}

static g4_status ensure_init(void) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided = 0;
        /* the server's scheduler thread, not main, drives the forward pass: SERIALIZED */
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
            return g4_fail(G4_ERR_RUNTIME, "MPI_Init_thread failed");
        if (provided < MPI_THREAD_SERIALIZED)
            return g4_fail(G4_ERR_RUNTIME, "this MPI library does not support MPI_THREAD_SERIALIZED");
    }
    if (!g_finalize_registered) {
        g_finalize_registered = 1;
        atexit(finalize_at_exit);
    }
    return G4_OK;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void mark_lost(mpi_handle *h, const char *what) {
    if (atomic_load(&h->c.lost)) return;
    const int n = h->c.size;
    char who[64];
    if (n == 2) snprintf(who, sizeof who, "rank %d", 1 - h->c.rank);
    else snprintf(who, sizeof who, "a rank of the %d", n);
    snprintf(h->c.why, sizeof h->c.why,
             "tensor-parallel group lost: %s did not answer a collective (%s) within %.3g s (--tp-timeout); "
             "restart the server",
             who, what, h->timeout_s);
    atomic_store(&h->c.lost, 1);
    atomic_store(&g_any_lost, 1);
    fprintf(stderr, "gemma4c: rank %d: %s\n", h->c.rank, h->c.why);
}

/* Waits for a nonblocking collective until timeout_s (0: none): 1 done, 0 lost. Spins on
 * MPI_Test first (a healthy step's collectives take microseconds), then yields the core, then
 * sleeps between polls (a slow rank must not be starved by this one's polling, and an idle
 * worker waiting for the next step should cost next to nothing). */
static int wait_for(mpi_handle *h, MPI_Request *req, const char *what, double timeout_s) {
    const double t0 = now_s();
    for (unsigned long polls = 0;; polls++) {
        int done = 0;
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (done) return 1;
        if (polls < 2000) continue;
        const double waited = now_s() - t0;
        if (timeout_s > 0 && waited > timeout_s) {
            mark_lost(h, what);
            return 0;   /* req stays pending: MPI cannot cancel a collective */
        }
        if (waited < 0.05) sched_yield();
        else nanosleep(&(struct timespec){0, waited < 1 ? 200 * 1000L : 2000 * 1000L}, NULL);   /* idle: ~500 polls/s */
    }
}

static void m_allreduce(g4_comm *c, float *buf, size_t n) {
    mpi_handle *h = (mpi_handle *)c;
    if (atomic_load(&c->lost)) return;
    if (n > h->cap) {
        float *p = realloc(h->all, (size_t)c->size * n * sizeof(float));
        if (!p) MPI_Abort(MPI_COMM_WORLD, 1);
        h->all = p;
        h->cap = n;
    }
    if (h->timeout_s > 0) {   /* in place: the pending call then touches only h->all */
        memcpy(h->all + (size_t)c->rank * n, buf, n * sizeof(float));
        MPI_Request req;
        MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, h->all, (int)n, MPI_FLOAT, MPI_COMM_WORLD, &req);
        if (!wait_for(h, &req, "all-reduce", h->timeout_s)) {
            h->all = NULL;   /* never freed nor reused: the pending call may still write there */
            h->cap = 0;
            return;
        }
    } else {
        MPI_Allgather(buf, (int)n, MPI_FLOAT, h->all, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
    }
    memcpy(buf, h->all, n * sizeof(float));
    for (int r = 1; r < c->size; r++) {
        const float *p = h->all + (size_t)r * n;
        for (size_t i = 0; i < n; i++) buf[i] += p[i];
    }
}

/* A blocking collective never matches a nonblocking one (MPI's rule), so with a deadline every
 * rank takes the nonblocking form, the idle wait too (which then sleeps between polls instead of
 * spinning a core while the server has nothing to do). */
static void bcast_within(g4_comm *c, void *buf, size_t bytes, double timeout_s) {
    mpi_handle *h = (mpi_handle *)c;
    if (atomic_load(&c->lost)) return;
    if (h->timeout_s <= 0) {
        MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
        return;
    }
    MPI_Request req;
    MPI_Ibcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
    wait_for(h, &req, "broadcast", timeout_s);
}

static void m_bcast(g4_comm *c, void *buf, size_t bytes) { bcast_within(c, buf, bytes, ((mpi_handle *)c)->timeout_s); }

static void m_bcast_idle(g4_comm *c, void *buf, size_t bytes) { bcast_within(c, buf, bytes, 0); }

static void m_gather(g4_comm *c, const void *send, size_t bytes, void *recv) {
    mpi_handle *h = (mpi_handle *)c;
    if (atomic_load(&c->lost)) return;
    if (h->timeout_s <= 0) {
        MPI_Gather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
        return;
    }
    MPI_Request req;
    MPI_Igather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
    wait_for(h, &req, "gather", h->timeout_s);
}

static void m_free(g4_comm *c) {
    if (!c) return;
    if (atomic_load(&c->lost)) return;   /* a pending call may still use the handle's buffers */
    free(((mpi_handle *)c)->all);
    free(c);
}

int g4_comm_mpi_any(g4_comm *c, int failed) {
    (void)c;
    int mine = failed != 0, any = 0;
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any;
}

g4_status g4_comm_mpi_world(int *size, int *rank) {
    g4_status st = ensure_init();
    if (st) return st;
    MPI_Comm_size(MPI_COMM_WORLD, size);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    return G4_OK;
}

g4_status g4_comm_mpi_new(int tp, int timeout_ms, g4_comm **out) {
    *out = NULL;
    int size, rank;
    g4_status st = g4_comm_mpi_world(&size, &rank);
    if (st) return st;
    if (tp && tp != size)
        return g4_fail(G4_ERR_INPUT, "--tp %d but mpirun started %d processes (use mpirun -np %d)", tp, size, tp);
    mpi_handle *h = calloc(1, sizeof *h);
    if (!h) return g4_fail(G4_ERR_NOMEM, "out of memory");
    h->c = (g4_comm){.rank = rank, .size = size, .allreduce_sum = m_allreduce, .bcast = m_bcast,
                     .bcast_idle = m_bcast_idle, .gather = m_gather, .free = m_free};
    h->timeout_s = timeout_ms > 0 ? timeout_ms / 1000.0 : 0;
    *out = &h->c;
    return G4_OK;
}

#else

g4_status g4_comm_mpi_world(int *size, int *rank) {
    *size = 1;
    *rank = 0;
    return G4_OK;
}

g4_status g4_comm_mpi_new(int tp, int timeout_ms, g4_comm **out) {
    (void)tp;
    (void)timeout_ms;
    *out = NULL;
    return g4_fail(G4_ERR_INPUT, "--tp-backend mpi: this gemma4c was built without MPI (install libopenmpi-dev and rebuild)");
}

int g4_comm_mpi_any(g4_comm *c, int failed) {
    (void)c;
    return failed != 0;
}

#endif
