/* kv_snapshot.c — what the prompt cache needs from a slot's KV cache: setting a slot's position
 * back, saving its KV state at its position to host memory and restoring it into any slot, and
 * copying one slot into another. Full-attention layers (and sliding ones whose ring covers the
 * whole context) are linear: rows [0, p) stay valid after a rewind to p. A sliding layer's ring
 * holds positions [pos - cap, pos) at index j % cap, and a row at position p reads
 * [p - window + 1, p]: a rewind is valid only while those positions are still in the ring.
 * Under --tp every rank's KV shard is copied (threads backend); MPI ranks are other processes.
 * Everything is counted in bytes of cache rows (layer.kv_row), so any --kv-type is copied as
 * stored. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "parallel/group.h"

struct g4_kv_snap {
    int pos;                    /* the slot's position when saved */
    int hi;                     /* its slot_hi then (the rings' entries it carries) */
    int full;                   /* linear layers' rows [0, pos) included */
    int n_ranks;
    size_t bytes;
    unsigned char *data[];      /* [n_ranks]: each rank's runs, in walk() order */
};

/* A layer keeps a ring when its cache holds fewer positions than the context. */
static int is_ring(const g4_model *m, const g4_layer *L) { return L->kv_cap < m->opts.ctx; }

/* One past the last position the slot's rings were written at: its position, or further where a
 * rewind dropped rows (a speculative verify's rejected drafts), which overwrote the ring entries
 * of the oldest positions. */
static int written_end(const g4_model *m, int slot) {
    return m->slot_hi[slot] > m->slot_pos[slot] ? m->slot_hi[slot] : m->slot_pos[slot];
}

int g4_slot_rewind_floor(const g4_model *m, int slot) {
    if (slot < 0 || slot >= m->opts.n_slots) return -1;
    const int f = g4_kv_rewind_floor(m, written_end(m, slot));
    return f < m->slot_pos[slot] ? f : m->slot_pos[slot];
}

int g4_kv_rewind_floor(const g4_model *m, int pos) {
    int floor = 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const g4_layer *L = &m->layers[l];
        if (!is_ring(m, L) || pos <= L->kv_cap) continue;
        /* positions [pos - cap, pos) remain; a row at q reads back to q - window + 1 */
        const int f = pos - L->kv_cap + m->cfg.sliding_window - 1;
        if (f > floor) floor = f;
    }
    return floor > pos ? pos : floor;
}

g4_status g4_slot_rewind(g4_model *m, int slot, int pos) {
    if (slot < 0 || slot >= m->opts.n_slots) return g4_fail(G4_ERR_INPUT, "slot %d out of range [0, %d)", slot, m->opts.n_slots);
    const int cur = m->slot_pos[slot], floor = g4_slot_rewind_floor(m, slot);
    if (pos < 0 || pos > cur) return g4_fail(G4_ERR_INPUT, "cannot set slot %d back to position %d: it holds %d", slot, pos, cur);
    if (pos < floor)
        return g4_fail(G4_ERR_INPUT, "cannot set slot %d back from %d to %d: its sliding-window rings hold back to %d only "
                       "(restore a snapshot)", slot, cur, pos, floor);
    m->slot_hi[slot] = written_end(m, slot);
    m->slot_pos[slot] = pos;
    return G4_OK;
}

/* The group's rank models in this process (rank 0 first), or 0 when the ranks are MPI processes. */
static int ranks_of(g4_model *m, g4_model **out) {
    if (!m->comm) { out[0] = m; return 1; }
    return g4_group_rank_models(m, out);
}

int g4_kv_snap_supported(const g4_model *m) {
    return !m->comm || g4_group_rank_models((g4_model *)m, NULL) > 0;
}

/* Calls fn on every run of bytes that holds slot state at position pos: per layer, K then V,
 * per KV head, rows [0, pos) of a linear layer (when `full`) or the ring's live positions
 * [max(0, pos - cap), pos) as at most two runs of indices. `off` counts the bytes so far. */
typedef void (*run_fn)(void *ctx, unsigned char *kv, size_t off, size_t n);
static size_t walk(g4_model *rm, int slot, int pos, int full, run_fn fn, void *ctx) {
    size_t off = 0;
    for (int l = 0; l < rm->cfg.n_layers; l++) {
        const g4_layer *L = &rm->layers[l];
        const int cap = L->kv_cap, ring = is_ring(rm, L);
        const size_t rb = L->kv_row;
        if (!ring && !full) continue;
        const int lo = ring && pos > cap ? pos - cap : 0;
        for (int h = 0; h < 2 * L->n_kv; h++) {   /* K heads, then V heads: [2][n_kv][cap][D] */
            unsigned char *base = g4_slot_k(rm, slot, L) + (size_t)h * cap * rb;
            for (int j = lo; j < pos;) {
                const int idx = j % cap, run = pos - j < cap - idx ? pos - j : cap - idx;
                if (fn) fn(ctx, base + (size_t)idx * rb, off, (size_t)run * rb);
                off += (size_t)run * rb;
                j += run;
            }
        }
    }
    return off;
}

static void run_save(void *ctx, unsigned char *kv, size_t off, size_t n) { memcpy((unsigned char *)ctx + off, kv, n); }
static void run_load(void *ctx, unsigned char *kv, size_t off, size_t n) { memcpy(kv, (const unsigned char *)ctx + off, n); }

static g4_status check_slot(const g4_model *m, int slot) {
    if (slot < 0 || slot >= m->opts.n_slots) return g4_fail(G4_ERR_INPUT, "slot %d out of range [0, %d)", slot, m->opts.n_slots);
    return G4_OK;
}

static g4_status unsupported(void) {
    return g4_fail(G4_ERR_INPUT, "KV snapshots need every rank in this process: not with --tp-backend mpi");
}

g4_status g4_slot_save(g4_model *m, int slot, int full, g4_kv_snap **out) {
    *out = NULL;
    g4_status st = check_slot(m, slot);
    if (st) return st;
    g4_model *rk[m->comm ? m->comm->size : 1];
    const int n = ranks_of(m, rk);
    if (!n) return unsupported();
    g4_kv_snap *s = calloc(1, sizeof *s + (size_t)n * sizeof(unsigned char *));
    if (!s) return g4_fail(G4_ERR_NOMEM, "out of memory saving slot %d", slot);
    s->pos = m->slot_pos[slot];
    s->hi = m->slot_hi[slot];
    s->full = full != 0;
    s->n_ranks = n;
    for (int r = 0; r < n; r++) {
        const size_t nb = walk(rk[r], slot, s->pos, s->full, NULL, NULL);
        if (!(s->data[r] = malloc(nb ? nb : 1))) {
            g4_kv_snap_free(s);
            return g4_fail(G4_ERR_NOMEM, "out of memory saving slot %d (%zu MiB)", slot, nb >> 20);
        }
        walk(rk[r], slot, s->pos, s->full, run_save, s->data[r]);
        s->bytes += nb;
    }
    *out = s;
    return G4_OK;
}

g4_status g4_slot_restore(g4_model *m, int slot, const g4_kv_snap *s) {
    g4_status st = check_slot(m, slot);
    if (st) return st;
    g4_model *rk[m->comm ? m->comm->size : 1];
    const int n = ranks_of(m, rk);
    if (!n) return unsupported();
    if (n != s->n_ranks) return g4_fail(G4_ERR_INPUT, "a snapshot of %d ranks cannot restore into %d", s->n_ranks, n);
    if (s->pos > m->opts.ctx) return g4_fail(G4_ERR_INPUT, "a snapshot at position %d exceeds the context (%d)", s->pos, m->opts.ctx);
    for (int r = 0; r < n; r++) walk(rk[r], slot, s->pos, s->full, run_load, s->data[r]);
    m->slot_pos[slot] = s->pos;
    m->slot_hi[slot] = s->hi;
    return G4_OK;
}

typedef struct {
    ptrdiff_t delta;            /* bytes from the source slot to the destination slot */
} copy_ctx;

static void run_copy(void *ctx, unsigned char *kv, size_t off, size_t n) {
    (void)off;
    memcpy(kv + ((copy_ctx *)ctx)->delta, kv, n);
}

g4_status g4_slot_copy(g4_model *m, int dst, int src) {
    g4_status st = check_slot(m, dst);
    if (st || (st = check_slot(m, src))) return st;
    if (dst == src) return G4_OK;
    g4_model *rk[m->comm ? m->comm->size : 1];
    const int n = ranks_of(m, rk);
    if (!n) return unsupported();
    for (int r = 0; r < n; r++) {   /* slot_bytes is the rank's own: shards may differ */
        copy_ctx c = {.delta = ((ptrdiff_t)dst - src) * (ptrdiff_t)rk[r]->slot_bytes};
        walk(rk[r], src, m->slot_pos[src], 1, run_copy, &c);
    }
    m->slot_pos[dst] = m->slot_pos[src];
    m->slot_hi[dst] = m->slot_hi[src];
    return G4_OK;
}

int g4_kv_snap_pos(const g4_kv_snap *s) { return s->pos; }
size_t g4_kv_snap_bytes(const g4_kv_snap *s) { return s->bytes; }

void g4_kv_snap_free(g4_kv_snap *s) {
    if (!s) return;
    for (int r = 0; r < s->n_ranks; r++) free(s->data[r]);
    free(s);
}
