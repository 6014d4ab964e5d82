/* shard.c — turns the full weight views a binder produced (weights.c, gguf_bind.c) into this
 * rank's shards under the tensor-parallel plan: each slice is copied into memory the rank's own
 * thread allocates and first touches (so it lands on the rank's NUMA node), after which the
 * checkpoint mapping can be released. Column slices of block-quantized types must fall on block
 * boundaries. A packed .g4c file arrives already sharded: with --no-mmap its tensors are copied
 * whole, otherwise this step is skipped. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "io/filemap.h"
#include "model/model.h"

static g4_status keep(g4_model *m, void *p) {
    void **o = realloc(m->owned, (size_t)(m->n_owned + 1) * sizeof *o);
    if (!o) { free(p); return g4_fail(G4_ERR_NOMEM, "out of memory"); }
    m->owned = o;
    m->owned[m->n_owned++] = p;
    return G4_OK;
}

/* Where a tensor's slice `s` lies in the source, and its size. */
typedef struct {
    g4_mat *w;
    g4_shard s;
    int rows, cols;
    size_t src_off, bytes;
} slice_plan;

static g4_status plan_slice(const g4_model *m, g4_mat *w, g4_shard s, const char *what, int layer, slice_plan *p) {
    const size_t full_rb = g4_dtype_row_bytes(w->dt, w->cols);
    *p = (slice_plan){.w = w, .s = s, .rows = w->rows, .cols = w->cols};
    if (s.kind == G4_SHARD_ROWS) {
        p->rows = (int)(s.hi - s.lo);
        p->src_off = (size_t)s.lo * full_rb;
    } else if (s.kind == G4_SHARD_COLS) {
        const int blk = g4_dtype_block(w->dt);
        if (s.lo % blk || s.hi % blk)
            return g4_fail(G4_ERR_INPUT, "--tp %d: layer %d %s: the input slice [%lld, %lld) is not a multiple of the %s block (%d)",
                           m->plan.tp, layer, what, (long long)s.lo, (long long)s.hi, g4_dtype_name(w->dt), blk);
        p->cols = (int)(s.hi - s.lo);
        p->src_off = g4_dtype_row_bytes(w->dt, s.lo);
    }
    p->bytes = g4_dtype_row_bytes(w->dt, p->cols) * (size_t)p->rows;
    return G4_OK;
}

/* mat := its planned slice, copied to dst. */
static void copy_slice(const slice_plan *p, void *dst) {
    g4_mat *w = p->w;
    const size_t full_rb = g4_dtype_row_bytes(w->dt, w->cols), rb = g4_dtype_row_bytes(w->dt, p->cols);
    const char *src = (const char *)w->data + p->src_off;
    if (p->s.kind == G4_SHARD_COLS)
        for (int r = 0; r < p->rows; r++) memcpy((char *)dst + (size_t)r * rb, src + (size_t)r * full_rb, rb);
    else
        memcpy(dst, src, p->bytes);
    /* Models load from files only, so the source is a read-only file mapping: dropping its pages
     * from this process (they stay in the page cache; a later touch re-reads them) keeps the peak
     * resident set at the shard plus one tensor instead of the shard plus the checkpoint. */
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = (uintptr_t)w->data & ~(pg - 1);
    const uintptr_t b = ((uintptr_t)w->data + full_rb * (size_t)w->rows + pg - 1) & ~(pg - 1);
    madvise((void *)a, b - a, MADV_DONTNEED);
    w->data = dst;
    w->rows = p->rows;
    w->cols = p->cols;
}

/* The slice of a tensor, or all of it when the set is already this rank's shard (a pack). */
static g4_shard plan_or_whole(const g4_model *m, g4_role role, int layer) {
    if (m->presharded) return (g4_shard){G4_SHARD_WHOLE, 0, 0};
    return g4_tp_shard(&m->plan, &m->cfg, role, layer);
}

/* Every slice goes into one 2 MiB-aligned region advised huge: the decode GEMV streams them, and
 * 4 KiB pages cut each stream into page-sized pieces for the hardware prefetcher and the TLB.
 * One region, not one allocation per tensor, because most layer matrices of a small model are
 * under 2 MiB and would otherwise sit in 4 KiB pages (where THP is "madvise", a small model's
 * LM head may be its only tensor large enough for 2 MiB pages). Pages are touched by the copy, on
 * this rank's thread (NUMA first touch), tensor by tensor. */
g4_status g4_model_shard(g4_model *m) {
    const g4_config *c = &m->cfg;
    const int tied = m->lm_head.data == m->embed.data;
    const int max_plans = 2 + G4_LAYER_MATS * c->n_layers;
    slice_plan *plans = calloc((size_t)max_plans, sizeof *plans);
    if (!plans) return g4_fail(G4_ERR_NOMEM, "out of memory");
    int n = 0;
    g4_status st = plan_slice(m, &m->embed, plan_or_whole(m, G4_ROLE_EMBED, -1), "embedding", -1, &plans[n++]);
    if (!st && !tied) st = plan_slice(m, &m->lm_head, plan_or_whole(m, G4_ROLE_LM_HEAD, -1), "lm_head", -1, &plans[n++]);
    for (int l = 0; !st && l < c->n_layers; l++) {
        /* g4_layer_mat's order */
        static const struct { g4_role role; const char *name; } kinds[G4_LAYER_MATS] = {
            {G4_ROLE_Q, "q_proj"}, {G4_ROLE_K, "k_proj"}, {G4_ROLE_V, "v_proj"}, {G4_ROLE_O, "o_proj"},
            {G4_ROLE_GATE, "gate_proj"}, {G4_ROLE_UP, "up_proj"}, {G4_ROLE_DOWN, "down_proj"}};
        for (int i = 0; !st && i < G4_LAYER_MATS; i++) {
            g4_mat *w = g4_layer_mat(&m->layers[l], i);
            if (w->data)   /* k_eq_v layers have no v_proj */
                st = plan_slice(m, w, plan_or_whole(m, kinds[i].role, l), kinds[i].name, l, &plans[n++]);
        }
    }
    const size_t huge = (size_t)2 << 20, align = 64;
    size_t total = 0;
    for (int i = 0; i < n; i++) total += (plans[i].bytes + align - 1) & ~(align - 1);
    total = (total + huge - 1) & ~(huge - 1);
    void *arena = NULL;
    if (!st && posix_memalign(&arena, huge, total ? total : huge))
        st = g4_fail(G4_ERR_NOMEM, "out of memory copying the weights (%zu bytes)", total);
    if (!st) {
        madvise(arena, total, MADV_HUGEPAGE);
        st = keep(m, arena);
    }
    for (size_t off = 0, i = 0; !st && i < (size_t)n; i++) {
        copy_slice(&plans[i], (char *)arena + off);
        off += (plans[i].bytes + align - 1) & ~(align - 1);
    }
    if (!st && tied) m->lm_head = m->embed;
    free(plans);
    return st;
}
