/* comm_mpi.c — the OpenMPI backend of comm.h: one process per rank. The all-reduce gathers
 * every rank's partial (MPI_Allgather) and sums them locally in rank order rather than calling
 * MPI_Allreduce, whose summation order is the library's choice: that way the MPI and threads
 * backends give bit-identical logits. Partials are one hidden vector per row, so the extra
 * traffic is small next to the weights each rank streams. Built without MPI when the Makefile
 * finds no ompi-c (G4_HAVE_MPI unset): the entry points then refuse with a clear error. */
#include <stdlib.h>
#include <string.h>

#include "parallel/comm.h"

#ifdef G4_HAVE_MPI
#include <mpi.h>

typedef struct {
    g4_comm c;
    float *all;      /* [size][cap] gathered partials, grown on the first (largest) step */
    size_t cap;
} mpi_handle;

static int g_finalize_registered;

static void finalize_at_exit(void) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
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

static void m_allreduce(g4_comm *c, float *buf, size_t n) {
    mpi_handle *h = (mpi_handle *)c;
    if (n > h->cap) {
        float *p = realloc(h->all, (size_t)c->size * n * sizeof(float));
        if (!p) MPI_Abort(MPI_COMM_WORLD, 1);
        h->all = p;
        h->cap = n;
    }
    MPI_Allgather(buf, (int)n, MPI_FLOAT, h->all, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
    memcpy(buf, h->all, n * sizeof(float));
    for (int r = 1; r < c->size; r++) {
        const float *p = h->all + (size_t)r * n;
        for (size_t i = 0; i < n; i++) buf[i] += p[i];
    }
}

static void m_bcast(g4_comm *c, void *buf, size_t bytes) {
    (void)c;
    MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
}

static void m_gather(g4_comm *c, const void *send, size_t bytes, void *recv) {
    (void)c;
    MPI_Gather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
}

static void m_free(g4_comm *c) {
    if (!c) return;
    free(((mpi_handle *)c)->all);
    free(c);
}

g4_status g4_comm_mpi_world(int *size, int *rank) {
    g4_status st = ensure_init();
    if (st) return st;
    MPI_Comm_size(MPI_COMM_WORLD, size);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    return G4_OK;
}

g4_status g4_comm_mpi_new(int tp, g4_comm **out) {
    *out = NULL;
    int size, rank;
    g4_status st = g4_comm_mpi_world(&size, &rank);
    if (st) return st;
    if (tp && tp != size)
        return g4_fail(G4_ERR_INPUT, "--tp %d but mpirun started %d processes (use mpirun -np %d)", tp, size, tp);
    mpi_handle *h = calloc(1, sizeof *h);
    if (!h) return g4_fail(G4_ERR_NOMEM, "out of memory");
    h->c = (g4_comm){.rank = rank, .size = size, .allreduce_sum = m_allreduce, .bcast = m_bcast,
                     .gather = m_gather, .free = m_free};
    *out = &h->c;
    return G4_OK;
}

#else

g4_status g4_comm_mpi_world(int *size, int *rank) {
    *size = 1;
    *rank = 0;
    return G4_OK;
}

g4_status g4_comm_mpi_new(int tp, g4_comm **out) {
    (void)tp;
    *out = NULL;
    return g4_fail(G4_ERR_INPUT, "--tp-backend mpi: this gemma4c was built without MPI (install libopenmpi-dev and rebuild)");
}

#endif
