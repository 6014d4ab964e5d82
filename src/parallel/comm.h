/* comm.h — the collectives a tensor-parallel group needs, behind one interface with two
 * backends: `threads` (ranks are threads of one process meeting at a spin barrier over shared
 * buffers) and `mpi` (ranks are processes; OpenMPI). Every reduction sums the ranks' values in
 * rank order, so each rank — and both backends — get bit-identical results. Collectives are
 * called only from src/model (the forward pass and the group driver).
 *
 * Under MPI a collective can wait on a rank that stopped answering (a stopped or wedged process
 * is not a dead one: MPI sees nothing wrong). With a deadline (g4_comm_mpi_new's timeout) each
 * collective gives up after it: `lost` turns 1 and `why` says so, the collective leaves its
 * buffer as it was, and every later one returns at once. The group is unusable from then on —
 * an MPI collective cannot be cancelled — so the step path fails (group.c) and the process ends
 * the whole job at exit (MPI_Abort: MPI_Finalize would wait for the lost rank). */
#ifndef G4_COMM_H
#define G4_COMM_H

#include <stdatomic.h>
#include <stddef.h>

#include "gemma4c.h"

typedef struct g4_comm g4_comm;

struct g4_comm {
    int rank, size;
    /* buf[n] := Σ_r buf_r[n] in rank order, on every rank */
    void (*allreduce_sum)(g4_comm *c, float *buf, size_t n);
    /* rank 0's buf[bytes] copied to every rank */
    void (*bcast)(g4_comm *c, void *buf, size_t bytes);
    /* the same with no deadline: a worker rank waiting for rank 0's next step may idle for ever */
    void (*bcast_idle)(g4_comm *c, void *buf, size_t bytes);
    /* rank r's send[bytes] lands at recv + r * bytes on rank 0 (recv unused elsewhere) */
    void (*gather)(g4_comm *c, const void *send, size_t bytes, void *recv);
    void (*free)(g4_comm *c);
    atomic_int lost;            /* a collective passed its deadline (MPI only); read by any thread */
    char why[256];              /* written once, before lost turns 1 */
};

/* `n` handles for the ranks of one in-process group (reduction scratch grows on the first,
 * largest, step). Free each handle (the group goes when the last one does). NULL on ENOMEM. */
g4_comm **g4_comm_threads_new(int n);

/* This process's handle in MPI_COMM_WORLD (MPI_Init_thread on first use); the world size must
 * equal `tp` (0: take the world size). timeout_ms > 0: every collective's deadline (nonblocking
 * calls polled against a clock); <= 0: blocking calls, no deadline. G4_ERR_INPUT when built
 * without MPI or sizes disagree. */
g4_status g4_comm_mpi_new(int tp, int timeout_ms, g4_comm **out);
/* Every rank calls it once after loading (blocking, no deadline: loading may take long): 1 on
 * every rank when any rank passed `failed` != 0. */
int g4_comm_mpi_any(g4_comm *c, int failed);
/* The world size/rank before any model exists (initializes MPI); 1/0 when built without MPI. */
g4_status g4_comm_mpi_world(int *size, int *rank);

#endif
