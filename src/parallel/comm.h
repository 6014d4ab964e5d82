/* comm.h — the collectives a tensor-parallel group needs, behind one interface with two
 * backends: `threads` (ranks are threads of one process meeting at a spin barrier over shared
 * buffers) and `mpi` (ranks are processes; OpenMPI). Every reduction sums the ranks' values in
 * rank order, so each rank — and both backends — get bit-identical results. Collectives are
 * called only from src/model (the forward pass and the group driver). */
#ifndef G4_COMM_H
#define G4_COMM_H

#include <stddef.h>

#include "gemma4c.h"

typedef struct g4_comm g4_comm;

struct g4_comm {
    int rank, size;
    /* buf[n] := Σ_r buf_r[n] in rank order, on every rank */
    void (*allreduce_sum)(g4_comm *c, float *buf, size_t n);
    /* rank 0's buf[bytes] copied to every rank */
    void (*bcast)(g4_comm *c, void *buf, size_t bytes);
    /* rank r's send[bytes] lands at recv + r * bytes on rank 0 (recv unused elsewhere) */
    void (*gather)(g4_comm *c, const void *send, size_t bytes, void *recv);
    void (*free)(g4_comm *c);
};

/* `n` handles for the ranks of one in-process group (reduction scratch grows on the first,
 * largest, step). Free each handle (the group goes when the last one does). NULL on ENOMEM. */
g4_comm **g4_comm_threads_new(int n);

/* This process's handle in MPI_COMM_WORLD (MPI_Init_thread on first use); the world size must
 * equal `tp` (0: take the world size). G4_ERR_INPUT when built without MPI or sizes disagree. */
g4_status g4_comm_mpi_new(int tp, g4_comm **out);
/* The world size/rank before any model exists (initializes MPI); 1/0 when built without MPI. */
g4_status g4_comm_mpi_world(int *size, int *rank);

#endif
