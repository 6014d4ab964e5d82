/* group.h — the tensor-parallel group of ranks behind one model handle: starting the ranks (threads
 * of this process, or MPI processes), the step rank 0 broadcasts and every rank runs, and the
 * gathered or distributed-argmax result. The shard plan is tp_plan.h's, the collectives comm.h's,
 * the forward pass model/forward.c's. */
#ifndef G4_GROUP_H
#define G4_GROUP_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

/* Loads a group of o->tp ranks as threads of this process (o->tp >= 2), or this process's rank of
 * an MPI group (o->tp_backend G4_TP_MPI; a group of one loads as a single rank); *out is rank 0's
 * handle (the driver), or under MPI this process's rank. */
g4_status g4_group_load_threads(const char *path, const g4_model_opts *o, g4_model **out);
g4_status g4_group_load_mpi(const char *path, const g4_model_opts *o, g4_model **out);

/* Bytes of the step buffer rank 0 broadcasts (m->cmd) for steps of up to max_rows rows. */
size_t g4_group_cmd_bytes(int max_rows);

/* Rank 0: one forward pass of R rows over the whole group (g4_forward's arguments); the last
 * R - row0 rows' full logits into logits [n][V], or their argmax into next [n] (either NULL). */
void g4_group_forward(g4_model *m, int R, const int *slots, const int *pos, const int32_t *ids, int row0, int step,
                      float *logits, int32_t *next);

/* The threads backend's rank models, rank 0 (m) first, into out [tp] (may be NULL); their count,
 * 1 for a model of one rank, 0 under MPI (the other ranks are other processes). Only between
 * steps: the other ranks then wait for rank 0's next broadcast (kv_snapshot.c copies their KV). */
int g4_group_rank_models(g4_model *m, g4_model **out);

/* At free: the driver releases the other ranks from g4_model_work, and joins their threads (the
 * threads backend). A no-op on a rank without a group. */
void g4_group_stop(g4_model *m);

#endif
