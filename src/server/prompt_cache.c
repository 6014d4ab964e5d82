/* prompt_cache.c — prefix reuse across requests: every slot keeps its KV and the ids it holds
 * after a request; a new prompt goes to the slot that already holds the longest prefix of it.
 * Exactness: a matmul kernel's summation order may depend on how many rows it runs, so only KV
 * rows computed exactly as a fresh prefill computes them are reused: those of whole prefill
 * chunks aligned from position 0 (never a prompt's partial last chunk, nor decoded tokens), and
 * prefill restarts on a chunk boundary. The rest of the prompt then runs in the same chunks as
 * without the cache, and the logits are the same bits. Sliding-window layers keep only a ring,
 * so a slot can go back only a little way (g4_kv_rewind_floor); deeper prefixes come from
 * snapshots taken at each prompt's last chunk boundary (a chat's next turn parts from the
 * previous prompt there or just before) and at the boundary before a prefix the prompt shares
 * with another sequence (a common system prompt). Snapshots hold whole slot states, so any slot
 * can restore them; they are kept LRU within the budget. */
#include <stdlib.h>
#include <string.h>

#include "server/prompt_cache.h"

/* a shared prefix shorter than this is not worth a snapshot of its own (a turn's header) */
enum { MIN_SPLIT = 32 };

typedef struct {
    int32_t *ids;               /* [n]: the sequence the snapshot's KV holds */
    int n;
    g4_kv_snap *snap;
    size_t bytes;               /* snapshot + ids */
    unsigned long used;         /* LRU stamp */
} entry;

struct g4_pcache {
    g4_model *m;
    g4_metrics *mx;
    size_t budget, bytes;
    int n_slots, ctx, snaps;    /* snaps: snapshots work here (not under MPI) */
    int32_t **held;             /* [n_slots][ctx] ids in each slot's KV */
    int *n_held;                /* [n_slots] == g4_slot_pos */
    unsigned char *off;         /* [n_slots] 1: the slot's KV holds soft tokens (images), not ids */
    int *exact;                 /* [n_slots] leading positions computed in whole aligned chunks */
    int chunk;                  /* the prefill chunk (rows per prefill slice) */
    unsigned long *slot_used;   /* [n_slots] LRU stamps of the slots */
    entry *e;
    int n_e, cap_e;
    unsigned long clock;
    unsigned long evictions;
};

g4_pcache *g4_pcache_new(g4_model *m, int chunk, size_t budget, g4_metrics *mx) {
    const g4_model_info *info = g4_model_get_info(m);
    g4_pcache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->m = m;
    c->mx = mx;
    c->budget = budget;
    c->chunk = chunk;
    c->n_slots = info->n_slots;
    c->ctx = info->ctx;
    c->snaps = budget > 0 && g4_kv_snap_supported(m);
    c->held = calloc((size_t)c->n_slots, sizeof *c->held);
    c->n_held = calloc((size_t)c->n_slots, sizeof *c->n_held);
    c->exact = calloc((size_t)c->n_slots, sizeof *c->exact);
    c->slot_used = calloc((size_t)c->n_slots, sizeof *c->slot_used);
    c->off = calloc((size_t)c->n_slots, 1);
    if (!c->held || !c->n_held || !c->exact || !c->slot_used || !c->off) goto fail;
    for (int i = 0; budget && i < c->n_slots; i++)
        if (!(c->held[i] = malloc((size_t)c->ctx * sizeof(int32_t)))) goto fail;
    return c;
fail:
    g4_pcache_free(c);
    return NULL;
}

static void drop(g4_pcache *c, int i) {
    c->bytes -= c->e[i].bytes;
    g4_kv_snap_free(c->e[i].snap);
    free(c->e[i].ids);
    c->e[i] = c->e[--c->n_e];
}

void g4_pcache_free(g4_pcache *c) {
    if (!c) return;
    while (c->n_e) drop(c, c->n_e - 1);
    for (int i = 0; c->held && i < c->n_slots; i++) free(c->held[i]);
    free(c->held);
    free(c->n_held);
    free(c->exact);
    free(c->slot_used);
    free(c->off);
    free(c->e);
    free(c);
}

static void publish(g4_pcache *c) { g4_metrics_cache_state(c->mx, c->evictions, (long)c->bytes, c->n_e); }

/* How much of ids [n] a sequence holding a [na] (the first `exact` of them reusable) can give:
 * the common prefix, at most n - 1 (the last prompt id is always computed: its logits start the
 * answer), down to a chunk boundary. *shared gets the longest common prefix seen. */
static int reusable(const g4_pcache *c, const int32_t *a, int na, int exact, const int32_t *ids, int n, int *shared) {
    int i = 0, lim = na < n ? na : n;
    while (i < lim && a[i] == ids[i]) i++;
    if (i > *shared) *shared = i;
    if (i > n - 1) i = n - 1;
    if (i > exact) i = exact;
    return i / c->chunk * c->chunk;
}

enum { FROM_SLOT, FROM_COPY, FROM_SNAP };

/* How far back slot s (holding h ids) can be set: its rings' floor, later where a speculative
 * step's dropped rows overwrote the oldest positions (g4_slot_rewind_floor). */
static int slot_floor(const g4_pcache *c, int s, int h) {
    const int a = g4_kv_rewind_floor(c->m, h), b = g4_slot_rewind_floor(c->m, s);
    return a > b ? a : b;
}

g4_pcache_plan g4_pcache_place(g4_pcache *c, const int *free_slots, int n_free, const int32_t *ids, int n) {
    /* a slot for snapshots and copies: an empty one, else the least recently used */
    int target = free_slots[0];
    for (int i = 1; i < n_free; i++) {
        const int s = free_slots[i];
        if ((c->n_held[target] > 0 && c->n_held[s] == 0) ||
            ((c->n_held[target] > 0) == (c->n_held[s] > 0) && c->slot_used[s] < c->slot_used[target]))
            target = s;
    }
    g4_pcache_plan p = {.slot = target};
    if (!c->budget) {
        g4_slot_reset(c->m, target);
        return p;
    }
    int kind = FROM_SLOT, src = -1, shared = 0;
    /* in place: a free slot set back to the shared prefix (cheapest, so it wins ties) */
    for (int i = 0; i < n_free; i++) {
        const int s = free_slots[i], h = c->n_held[s];
        const int L = reusable(c, c->held[s], h, c->exact[s], ids, n, &shared);
        if (L > p.reused && L >= slot_floor(c, s, h)) { p.reused = L; p.slot = s; }
    }
    for (int s = 0; s < c->n_slots; s++) {   /* any slot, a running one too: copied, then set back */
        const int h = c->n_held[s];
        const int L = reusable(c, c->held[s], h, c->exact[s], ids, n, &shared);
        if (c->snaps && L > p.reused && L >= slot_floor(c, s, h)) { p.reused = L; kind = FROM_COPY; src = s; }
    }
    for (int i = 0; i < c->n_e; i++) {   /* snapshots are taken on chunk boundaries: all exact */
        const int L = reusable(c, c->e[i].ids, c->e[i].n, c->e[i].n, ids, n, &shared);
        if (L > p.reused && L >= g4_kv_rewind_floor(c->m, c->e[i].n)) { p.reused = L; kind = FROM_SNAP; src = i; }
    }
    g4_status st = G4_OK;
    if (kind != FROM_SLOT) {
        p.slot = target;
        if (kind == FROM_COPY) {
            st = g4_slot_copy(c->m, target, src);
            if (!st) memcpy(c->held[target], c->held[src], (size_t)c->n_held[src] * sizeof(int32_t));
            c->n_held[target] = c->n_held[src];
        } else {
            entry *e = &c->e[src];
            st = g4_slot_restore(c->m, target, e->snap);
            if (!st) memcpy(c->held[target], e->ids, (size_t)e->n * sizeof(int32_t));
            c->n_held[target] = e->n;
            e->used = ++c->clock;
        }
    }
    if (!st && p.reused > 0) st = g4_slot_rewind(c->m, p.slot, p.reused);
    if (st || p.reused == 0) {
        p.reused = 0;
        g4_slot_reset(c->m, p.slot);
    }
    c->n_held[p.slot] = c->exact[p.slot] = p.reused;
    c->off[p.slot] = 0;
    c->slot_used[p.slot] = ++c->clock;
    shared = shared / c->chunk * c->chunk;
    if (c->snaps && shared > p.reused && shared >= MIN_SPLIT) p.split = shared;
    g4_metrics_cache_lookup(c->mx, p.reused);
    return p;
}

void g4_pcache_fed(g4_pcache *c, int slot, const int32_t *ids, int n, int prefill) {
    if (!c->budget || c->off[slot]) return;
    int *h = &c->n_held[slot];
    if (prefill && n == c->chunk && *h == c->exact[slot]) c->exact[slot] += n;
    if (*h + n > c->ctx) n = c->ctx - *h;
    memcpy(c->held[slot] + *h, ids, (size_t)n * sizeof(int32_t));
    *h += n;
}

void g4_pcache_save(g4_pcache *c, int slot) {
    const int n = c->n_held[slot];
    if (!c->snaps || n == 0 || c->off[slot] || c->exact[slot] != n) return;
    for (int i = 0; i < c->n_e; i++)
        if (c->e[i].n == n && !memcmp(c->e[i].ids, c->held[slot], (size_t)n * sizeof(int32_t))) {
            c->e[i].used = ++c->clock;
            return;
        }
    g4_kv_snap *snap;
    if (g4_slot_save(c->m, slot, 1, &snap)) return;   /* out of memory: no snapshot, nothing else lost */
    const size_t bytes = g4_kv_snap_bytes(snap) + (size_t)n * sizeof(int32_t);
    int32_t *ids = bytes <= c->budget ? malloc((size_t)n * sizeof(int32_t)) : NULL;
    if (c->n_e == c->cap_e) {
        const int nc = c->cap_e ? 2 * c->cap_e : 16;
        entry *ne = ids ? realloc(c->e, (size_t)nc * sizeof *ne) : NULL;
        if (ne) { c->e = ne; c->cap_e = nc; }
    }
    if (!ids || c->n_e == c->cap_e) {   /* larger than the whole budget, or out of memory */
        free(ids);
        g4_kv_snap_free(snap);
        return;
    }
    while (c->bytes + bytes > c->budget) {   /* least recently used first */
        int lru = 0;
        for (int i = 1; i < c->n_e; i++)
            if (c->e[i].used < c->e[lru].used) lru = i;
        drop(c, lru);
        c->evictions++;
    }
    memcpy(ids, c->held[slot], (size_t)n * sizeof(int32_t));
    c->e[c->n_e++] = (entry){.ids = ids, .n = n, .snap = snap, .bytes = bytes, .used = ++c->clock};
    c->bytes += bytes;
    publish(c);
}

void g4_pcache_forget(g4_pcache *c, int slot) {
    c->n_held[slot] = c->exact[slot] = 0;
    g4_slot_reset(c->m, slot);
}

void g4_pcache_skip(g4_pcache *c, int slot) {
    c->n_held[slot] = c->exact[slot] = 0;
    c->off[slot] = 1;
}
