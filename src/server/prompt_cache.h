/* prompt_cache.h — the server's prompt cache (prompt_cache.c): which token ids every slot's KV
 * holds, snapshots of slot states in host memory (LRU within --cache-ram), and the choice of a
 * slot for a new prompt that reuses the longest computed prefix. Scheduler thread only. */
#ifndef G4_PROMPT_CACHE_H
#define G4_PROMPT_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "server/server.h"

typedef struct g4_pcache g4_pcache;

/* chunk: the scheduler's prefill slice (the model's prefill chunk); budget: bytes of snapshots
 * (and their ids) kept; 0 disables reuse altogether. */
g4_pcache *g4_pcache_new(g4_model *m, int chunk, size_t budget, g4_metrics *mx);
void g4_pcache_free(g4_pcache *c);

/* Where a new prompt goes: the slot, how many of its first ids are already in the slot's KV
 * (a multiple of the chunk, at most n - 1: the last one is always computed, for its logits),
 * and a chunk boundary where the prefill leaves a snapshot (a prefix another sequence shares;
 * 0: none). */
typedef struct {
    int slot, reused, split;
} g4_pcache_plan;

/* Picks one of the n_free free slots for ids [n] and sets it up (rewound, restored from a
 * snapshot, or copied from another slot). Never fails: on any trouble the slot starts empty. */
g4_pcache_plan g4_pcache_place(g4_pcache *c, const int *free_slots, int n_free, const int32_t *ids, int n);
/* The slot's KV now also holds ids [n] (after a prefill slice, or a decode step: prefill 0). */
void g4_pcache_fed(g4_pcache *c, int slot, const int32_t *ids, int n, int prefill);
/* Keeps a snapshot of the slot at its position, if that is a chunk boundary every row before
 * which is reusable (the prompt's last one, or a plan's split). */
void g4_pcache_save(g4_pcache *c, int slot);
/* The slot's KV is undefined (a failed step): it starts empty next time. */
void g4_pcache_forget(g4_pcache *c, int slot);
/* The slot's prompt holds images: their soft tokens sit at placeholder ids that say nothing of
 * the image, so nothing of this request is recorded or reused (until the slot's next place). */
void g4_pcache_skip(g4_pcache *c, int slot);

#endif
