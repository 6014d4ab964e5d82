/* tk_maps.c — the two hash tables of the tokenizer: piece string -> id and id pair -> merge.
 * Open addressing with linear probing; sized once from the expected count (they never rehash
 * during loads of a known size, and grow by doubling otherwise). */
#include "tokenizer/tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static uint32_t pow2_for(uint32_t expected) {
    uint32_t cap = 16;
    while (cap < expected + expected / 2 + 8 && cap < (1u << 30)) cap <<= 1; /* load <= 2/3 */
    return cap;
}

int tk_strmap_init(tk_strmap *m, uint32_t expected, const char *base) {
    memset(m, 0, sizeof *m);
    m->cap = pow2_for(expected);
    m->base = base;
    m->ent = tk_big_alloc(m->cap, sizeof *m->ent, 0);
    if (!m->ent) { m->cap = 0; return -1; }
    return 0;
}

void tk_strmap_free(tk_strmap *m) {
    free(m->ent);
    memset(m, 0, sizeof *m);
}

int tk_strmap_put(tk_strmap *m, const char *s, uint32_t len, int32_t val) {
    if ((uint64_t)(m->n + 1) * 3 > (uint64_t)m->cap * 2) {
        tk_strmap n;
        if (tk_strmap_init(&n, m->cap, m->base)) return -1;
        for (uint32_t i = 0; i < m->cap; i++)
            if (m->ent[i].hash) {
                uint32_t j = m->ent[i].hash & (n.cap - 1);
                while (n.ent[j].hash) j = (j + 1) & (n.cap - 1);
                n.ent[j] = m->ent[i];
            }
        n.n = m->n;
        tk_strmap_free(m);
        *m = n;
    }
    uint32_t h = tk_hash(s, len), mask = m->cap - 1, i = h & mask;
    while (m->ent[i].hash) {
        tk_strent *e = &m->ent[i];
        if (e->hash == h && e->len == len && !memcmp(m->base + e->off, s, len)) {
            e->val = val;
            return 0;
        }
        i = (i + 1) & mask;
    }
    m->ent[i] = (tk_strent){h, val, (uint32_t)(s - m->base), len};
    m->n++;
    return 0;
}

int tk_pairmap_init(tk_pairmap *m, uint32_t expected) {
    memset(m, 0, sizeof *m);
    m->cap = pow2_for(expected);
    m->ent = tk_big_alloc(m->cap, sizeof *m->ent, 0xFF);
    if (!m->ent) { m->cap = 0; return -1; }
    return 0;
}

void tk_pairmap_free(tk_pairmap *m) {
    free(m->ent);
    memset(m, 0, sizeof *m);
}

int tk_pairmap_put(tk_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t merged) {
    if ((uint64_t)(m->n + 1) * 3 > (uint64_t)m->cap * 2) {
        tk_pairmap n;
        if (tk_pairmap_init(&n, m->cap)) return -1;
        for (uint32_t i = 0; i < m->cap; i++)
            if (m->ent[i].key != UINT64_MAX)
                tk_pairmap_put(&n, (int32_t)(m->ent[i].key >> 32), (int32_t)(uint32_t)m->ent[i].key,
                               m->ent[i].rank, m->ent[i].merged);
        tk_pairmap_free(m);
        *m = n;
    }
    uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    uint32_t mask = m->cap - 1, i = tk_pair_slot(m, a, b);
    while (m->ent[i].key != UINT64_MAX) {
        if (m->ent[i].key == k) break; /* a later duplicate overwrites, as HF's HashMap collect */
        i = (i + 1) & mask;
    }
    if (m->ent[i].key == UINT64_MAX) m->n++;
    m->ent[i] = (tk_pairent){k, rank, merged};
    return 0;
}

void *tk_big_alloc(size_t n, size_t size, int fill) {
    size_t bytes = n * size;
    if (size && bytes / size != n) return NULL;
    void *p = NULL;
    if (bytes < (4u << 20)) {
        p = malloc(bytes ? bytes : 1);
    } else if (!posix_memalign(&p, 2u << 20, bytes)) {
#ifdef MADV_HUGEPAGE
        madvise(p, bytes, MADV_HUGEPAGE);
#endif
    }
    if (p) memset(p, fill, bytes);
    return p;
}
