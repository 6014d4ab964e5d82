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

/* Rank 0 of an MPI group, between steps (the other ranks wait for its next broadcast): what a
 * caller in rank 0's process (the MTP drafter, model/mtp.c) reads of the other processes' state.
 * g4_group_gather_kv: every rank's K and V rows of layer `layer` in slot `slot`, positions
 * [lo, hi] (ring index t % kv_cap), written into dst[r] (r >= 1; NULL: not wanted) laid out as
 * that rank's own cache region of the layer (g4_slot_k: [n_kv][kv_cap] K rows, then V).
 * g4_group_embed_row: token tok's embedding row (unscaled, float32 [hidden_size]) from the rank
 * whose vocabulary slice holds it, bit for bit. G4_ERR_RUNTIME when the group is lost. */
g4_status g4_group_gather_kv(g4_model *m, int slot, int layer, int lo, int hi, unsigned char *const *dst);
g4_status g4_group_embed_row(g4_model *m, int32_t tok, float *out);

/* At free: the driver releases the other ranks from g4_model_work, and joins their threads (the
 * threads backend). A no-op on a rank without a group. */
void g4_group_stop(g4_model *m);

#endif
