/* attention.c — the attention step of a layer: every row's query heads against its slot's cached
 * K and V (written before by the forward pass's q/k pass), split into tasks over the thread pool.
 * The per-head arithmetic is the kernel table's attend_block; the layer loop is forward.c's. */
#include "model/model.h"

/* Attention runs as tasks of (block of up to P consecutive rows of one slot, KV head g, sub-group
 * of Gs of the heads sharing g): attend_block reads that head's K and V once per task, instead of
 * once per (row, head). Gs x P <= m->att_rows (the per-thread scores scratch). */
typedef struct {
    g4_model *m;
    const g4_layer *L;
    int R, P, Gs, n_sub, n_blocks;
    int batched;                     /* the kernel table's attend_block `batched` */
    const int *slots, *pos;
} att_job;

/* Denormals flushed to zero (MXCSR FTZ | DAZ) around attend_block where the table asks for it
 * (kernels.h attend_ftz: microcode assists on denormal softmax tails took a large share of a
 * long prefill's attention; a flushed term is < 2^-126 where each row's sum holds its largest
 * term, probability >= 1 / span) */
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
static inline unsigned flush_denormals_begin(void) {
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040);   /* FTZ (bit 15) | DAZ (bit 6) */
    return csr;
}
static inline void flush_denormals_end(unsigned csr) { _mm_setcsr(csr); }
#else
static inline unsigned flush_denormals_begin(void) { return 0; }
static inline void flush_denormals_end(unsigned csr) { (void)csr; }
#endif

static void att_task(void *ctx, int task, int thread) {
    att_job *j = ctx;
    g4_model *m = j->m;
    const g4_layer *L = j->L;
    const int Hq = L->n_q, D = L->head_dim, cap = L->kv_cap, G = Hq / L->n_kv;   /* rank-local group size */
    const int per_block = L->n_kv * j->n_sub;
    const int b = j->n_blocks - 1 - task / per_block;   /* last rows (longest spans) first */
    const int g = task % per_block / j->n_sub, h0 = g * G + task % j->n_sub * j->Gs;
    const int nh = G - (h0 - g * G) < j->Gs ? G - (h0 - g * G) : j->Gs;
    const int r_end = (b + 1) * j->P < j->R ? (b + 1) * j->P : j->R;
    /* Gemma 4 attention scaling is 1.0: the q/k norms replace 1/sqrt(D); Gemma 3 sets attn_scale */
    const float scale = m->cfg.attn_scale ? m->cfg.attn_scale : 1.0f;
    float *scores = m->scores + (size_t)thread * m->att_rows * m->info.ctx;
    int lo[G4_ATT_ROWS_MAX], hi[G4_ATT_ROWS_MAX];   /* [P], P <= att_rows */
    for (int r0 = b * j->P, r1; r0 < r_end; r0 = r1) {   /* runs of rows in one slot share its cache */
        for (r1 = r0; r1 < r_end && j->slots[r1] == j->slots[r0]; r1++) {
            const int p = j->pos[r1];
            hi[r1 - r0] = p;
            /* an image's soft tokens see the whole image on sliding layers, the window still
             * applying (transformers' create_masks_for_vision_model); its K/V are in this step */
            if (!L->is_full && m->step_media && m->step_media[r1] > p) hi[r1 - r0] = m->step_media[r1];
            lo[r1 - r0] = L->is_full ? 0 : (p - m->cfg.sliding_window + 1 > 0 ? p - m->cfg.sliding_window + 1 : 0);
        }
        const unsigned char *K = g4_slot_k(m, j->slots[r0], L) + (size_t)g * cap * L->kv_row;
        const unsigned char *V = K + (size_t)L->n_kv * cap * L->kv_row;
        const size_t off = ((size_t)r0 * Hq + h0) * D;
        const unsigned csr = m->k->attend_ftz ? flush_denormals_begin() : 0;
        if (m->attend_kv)   /* --kv-type other than f32: rows widened to float32 in the kernel */
            m->attend_kv(m->opts.kv_type, m->q + off, Hq * D, m->att + off, Hq * D, nh, r1 - r0, lo, hi, K, V, cap, D,
                         scale, scores);
        else
            m->k->attend_block(m->q + off, Hq * D, m->att + off, Hq * D, nh, r1 - r0, lo, hi, (const float *)K,
                               (const float *)V, cap, D, scale, scores, j->batched);
        if (m->k->attend_ftz) flush_denormals_end(csr);
    }
}

/* Splits R rows into tasks: blocks of P rows when they all belong to one slot (a prefill chunk),
 * single rows otherwise (decode across slots); heads split into sub-groups until there are at
 * least two tasks per thread (a decode step's full layer has one KV head). A single row's tasks
 * all cost the same, so there the split stops as soon as every thread gets an equal share: each
 * sub-group streams the head's whole K and V, and deep in the context that stream is the cost
 * (a one-row decode of 4 heads sharing a KV head on 2 threads: 2 reads of the cache, not 4). */
void g4_attention(g4_model *m, const g4_layer *L, int R, const int *slots, const int *pos, int batched) {
    const int G = L->n_q / L->n_kv, A = m->att_rows, nth = g4_pool_size(m->pool);
    int one_slot = 1;
    for (int r = 1; r < R; r++) one_slot &= slots[r] == slots[0];
    att_job aj = {.m = m, .L = L, .R = R, .batched = batched, .slots = slots, .pos = pos};
    aj.Gs = G < A ? G : A;
    aj.P = one_slot ? A / aj.Gs : 1;
    if (aj.P > R) aj.P = R;
    aj.n_blocks = (R + aj.P - 1) / aj.P;
    for (;;) {
        aj.n_sub = (G + aj.Gs - 1) / aj.Gs;
        const int tasks = aj.n_blocks * L->n_kv * aj.n_sub;
        if (aj.Gs == 1 || tasks >= 2 * nth || (R == 1 && tasks % nth == 0 && G % aj.Gs == 0)) break;
        aj.Gs = (aj.Gs + 1) / 2;
    }
    g4_pool_run(m->pool, aj.n_blocks * L->n_kv * aj.n_sub, att_task, &aj);
}
