/* avx2.c — AVX2 + FMA (+F16C) kernels: 16-bit weights are widened to float32 in registers
 * (exact for bf16 and f16) and accumulated with FMA in float32. The matmul keeps a 4 x 3 block
 * of (weight row, activation row) accumulators so each loaded weight vector feeds 3 FMAs and
 * each activation vector 4, which is what lets prefill approach FMA peak and decode stream the
 * weights once. Compiled with target attributes so the rest of the build stays portable. */
#pragma GCC target("avx2,fma,f16c")
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "kernels/cpu/attn.h"
#include "kernels/cpu/pack_avx2.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/vmath_avx2.h"
#include "kernels/kernels.h"

static inline __m256 load_bf16(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}
static inline __m256 load_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
static inline __m256 load_f32(const float *p) { return _mm256_loadu_ps(p); }

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

/* Lane i = hsum(v[i]) with the same additions in the same order ((v0 + v4) + (v2 + v6)) +
 * ((v1 + v5) + (v3 + v7)) per vector), eight vectors at once */
static inline __m256 hsum8(const __m256 v[8]) {
    __m256 p[4], q[2];
    for (int i = 0; i < 4; i++)   /* [v_i's halves added | v_{i+4}'s halves added] */
        p[i] = _mm256_add_ps(_mm256_permute2f128_ps(v[i], v[i + 4], 0x20), _mm256_permute2f128_ps(v[i], v[i + 4], 0x31));
    for (int i = 0; i < 2; i++)   /* per vector: lanes 0 + 2, 1 + 3 */
        q[i] = _mm256_add_ps(_mm256_shuffle_ps(p[2 * i], p[2 * i + 1], 0x44), _mm256_shuffle_ps(p[2 * i], p[2 * i + 1], 0xEE));
    return _mm256_add_ps(_mm256_shuffle_ps(q[0], q[1], 0x88), _mm256_shuffle_ps(q[0], q[1], 0xDD));
}

/* Decode streams each weight byte once from DRAM. A 4-row block reads 4 streams at a stride of
 * one row (3 KB for K = 1536), which the hardware prefetcher follows poorly and the out-of-order
 * window cannot cover with enough misses in flight, so the kernel prefetches the weight bytes
 * G4_PF_BYTES ahead in the block's linear address range (rows n..n+3 are contiguous, so the
 * prefetch runs on into the next blocks at the rate the FMAs consume them). Prefetching past the
 * last row is harmless (a hint never faults). 16-32 KB ahead covers the DRAM latency at the
 * read bandwidth; a few KB ahead is too close to hide it; a single-row stream gains nothing
 * (the hardware prefetcher already follows one stream). Rows of 8 KB and more (o_proj, down_proj)
 * stream at the read bandwidth without it, and the extra prefetches only compete with the
 * hardware's, so it is off for them.
 * The bf16 decode kernel (gemv_bf16_eo) goes further for short rows: it takes them in 16-row super
 * blocks, rows j, j+4, j+8, j+12 at a time for j = 0..3, so each of its 4 streams runs through 4
 * consecutive rows (12 KB at K = 1536) as a long row's stream does, which the hardware
 * prefetcher follows without software prefetch, so short rows stream at the read bandwidth as
 * long ones do. */
#define G4_PF_MAX_ROW 8192   /* G4_PF_BYTES: quant.h */

/* One (NR weight rows) x (TR activation rows) block over the full K. With a single activation
 * row (decode) the loop takes 16 columns per step into 2 accumulators per row, so each row
 * consumes one full 32-byte bf16 vector per step; with 2-3 rows it takes 8 (12 accumulators). */
#define MATMUL_IMPL(NAME, TYPE, LOADW, WIDEN)                                                   \
    static inline void NAME##_block(const float *x, int K, const TYPE *w, int NR, int TR,     \
                                    float *y, int ldy) {                                      \
        enum { U = 2 };                                                                       \
        const int u = TR == 1 ? 2 : 1;    /* 8-column vectors per step */                     \
        __m256 acc[4][3][U];                                                                  \
        for (int i = 0; i < 4; i++)                                                           \
            for (int j = 0; j < 3; j++)                                                       \
                for (int v = 0; v < U; v++) acc[i][j][v] = _mm256_setzero_ps();               \
        const TYPE *wr[4];                                                                    \
        const float *xr[3];                                                                   \
        for (int i = 0; i < 4; i++) wr[i] = w + (size_t)(i < NR ? i : 0) * K;                 \
        for (int j = 0; j < 3; j++) xr[j] = x + (size_t)(j < TR ? j : 0) * K;                 \
        /* the block's bytes [0, 4K*sizeof) advance 4*sizeof bytes per column */              \
        const char *pf = (const char *)w + G4_PF_BYTES;                                       \
        const int pf_on = (size_t)K * sizeof(TYPE) < G4_PF_MAX_ROW;                           \
        int k = 0;                                                                            \
        for (; k + 8 * u <= K; k += 8 * u) {                                                  \
            if (pf_on)                                                                        \
                for (int l = 0; l < (int)(4 * 8 * sizeof(TYPE)) * u; l += 64)                \
                    _mm_prefetch(pf + (size_t)k * 4 * sizeof(TYPE) + l, _MM_HINT_T0);         \
            for (int v = 0; v < u; v++) {                                                     \
                __m256 xv0 = _mm256_loadu_ps(xr[0] + k + 8 * v);                              \
                __m256 xv1 = TR > 1 ? _mm256_loadu_ps(xr[1] + k + 8 * v) : xv0;               \
                __m256 xv2 = TR > 2 ? _mm256_loadu_ps(xr[2] + k + 8 * v) : xv0;               \
                for (int i = 0; i < 4; i++) {                                                 \
                    if (i >= NR) break;                                                       \
                    __m256 wv = LOADW(wr[i] + k + 8 * v);                                     \
                    acc[i][0][v] = _mm256_fmadd_ps(wv, xv0, acc[i][0][v]);                    \
                    if (TR > 1) acc[i][1][v] = _mm256_fmadd_ps(wv, xv1, acc[i][1][v]);        \
                    if (TR > 2) acc[i][2][v] = _mm256_fmadd_ps(wv, xv2, acc[i][2][v]);        \
                }                                                                             \
            }                                                                                 \
        }                                                                                     \
        for (; k + 8 <= K; k += 8) {   /* K % 16 == 8 with one activation row */              \
            __m256 xv0 = _mm256_loadu_ps(xr[0] + k);                                          \
            for (int i = 0; i < NR; i++)                                                      \
                acc[i][0][0] = _mm256_fmadd_ps(LOADW(wr[i] + k), xv0, acc[i][0][0]);          \
        }                                                                                     \
        for (int i = 0; i < NR; i++)                                                          \
            for (int j = 0; j < TR; j++) {                                                    \
                float s = hsum(u == 2 ? _mm256_add_ps(acc[i][j][0], acc[i][j][1]) : acc[i][j][0]); \
                for (int kk = k; kk < K; kk++) s += xr[j][kk] * WIDEN(wr[i][kk]);             \
                y[(size_t)j * ldy + i] = s;                                                   \
            }                                                                                 \
    }                                                                                         \
    static void NAME(const float *x, int T, int K, const void *w, int n0, int n1, float *y,   \
                     int ldy) {                                                               \
        const TYPE *W = w;                                                                    \
        for (int n = n0; n < n1; n += 4) {                                                    \
            int NR = n1 - n < 4 ? n1 - n : 4;                                                 \
            for (int t = 0; t < T; t += 3) {                                                  \
                int TR = T - t < 3 ? T - t : 3;                                               \
                const float *xb = x + (size_t)t * K;                                          \
                const TYPE *wb = W + (size_t)n * K;                                           \
                float *yb = y + (size_t)t * ldy + n;                                          \
                if (NR == 4 && TR == 3) NAME##_block(xb, K, wb, 4, 3, yb, ldy);               \
                else if (NR == 4 && TR == 2) NAME##_block(xb, K, wb, 4, 2, yb, ldy);          \
                else if (NR == 4 && TR == 1) NAME##_block(xb, K, wb, 4, 1, yb, ldy);          \
                else NAME##_block(xb, K, wb, NR, TR, yb, ldy);                                \
            }                                                                                 \
        }                                                                                     \
    }

#define WIDEN_F32(v) (v)
MATMUL_IMPL(dot_f32, float, load_f32, WIDEN_F32)
MATMUL_IMPL(dot_f16, uint16_t, load_f16, g4_f16_to_f32)
MATMUL_IMPL(dot_bf16, uint16_t, load_bf16, g4_bf16_to_f32)

/* Decode (1-3 activation rows) over bf16 weights with half the vector work per weight byte: a
 * 32-byte load holds 16 bf16 as 8 pairs, and the pair's low half shifted up (w[k+2j]) and its
 * high half masked (w[k+2j+1]) are both exact floats, so one load + a shift + an AND feed two FMAs
 * per activation row against x split once per call into even and odd columns — where dot_bf16
 * spends two widening loads (zero-extend + shift) per 16 weights. The same products, summed in
 * another order. With half the instructions per weight byte one core keeps up with its share of
 * DRAM bandwidth where dot_bf16 is compute-bound, and more so for 2-3 activation rows (batched
 * decode), where dot_bf16 widens every weight once per row. Same 4-row blocks and prefetch as
 * dot_bf16; K % 16 == 0 (else, and for rows past the last whole block, dot_bf16). */
enum { EO_MAX_K = 16384 };   /* x's even/odd copy lives on the stack */

/* x[t] (T rows of K, K % 16 == 0) → xs[t]: per 16 columns the 8 even ones, then the 8 odd ones */
static void split_even_odd(const float *x, int T, int K, float *xs) {
    for (size_t k = 0; k < (size_t)T * K; k += 16) {
        const __m256 a = _mm256_loadu_ps(x + k), b = _mm256_loadu_ps(x + k + 8);
        /* [a0 a2 b0 b2 | a4 a6 b4 b6] → 64-bit lanes 0,2,1,3 → a0 a2 a4 a6 b0 b2 b4 b6 */
        _mm256_store_ps(xs + k, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8)));
        _mm256_store_ps(xs + k + 8, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8)));
    }
}

/* Four rows, w + i * rs for i < 4 (rs = K: rows n..n+3; 4 K: a super block's rows j, j+4, j+8,
 * j+12), against TR activation rows; row i's results go to y + i * ys. One row keeps even and odd
 * sums apart (8 FMA chains, so the FMA latency is covered); 2-3 rows share one accumulator per
 * (row, activation row) and take x from memory operands, which keeps the block in 16 registers.
 * next (super blocks, pf_on 0): bytes of the next super block to prefetch into L2 at the rate this
 * one is read, so its streams start warm and short rows (q/k/v, gate/up, LM head) stream at the
 * read bandwidth instead of below it, or NULL.
 * pf_on: 1 the block's bytes G4_PF_BYTES ahead, linearly (short rows); 2 each row's own stream
 * EO_ROW_PF bytes ahead into L1 and the next 4-row block into L2, at the rate this one is read
 * (long rows on the avx512 path, g4_gemv_bf16_rowpf_avx2; rs = K there). */
enum { EO_ROW_PF = 2048 };
static inline __attribute__((always_inline)) void eo_block(const float *xs, int K, const uint16_t *w, size_t rs,
                                                          int TR, float *y, int ldy, int ys, int pf_on, const char *next) {
    const __m256i hi = _mm256_set1_epi32((int)0xFFFF0000u);
    const char *pf = (const char *)w + G4_PF_BYTES;   /* as dot_bf16: the block's bytes, linearly */
    __m256 acc[4][3];
    for (int i = 0; i < 4; i++) acc[i][0] = acc[i][1] = acc[i][2] = _mm256_setzero_ps();
    for (int k = 0; k < K; k += 16) {
        if (pf_on == 1) {
            _mm_prefetch(pf + (size_t)k * 8, _MM_HINT_T0);
            _mm_prefetch(pf + (size_t)k * 8 + 64, _MM_HINT_T0);
        } else if (pf_on == 2 && !(k & 31)) {   /* per 32 columns: a new line of each row, and the */
            for (int i = 0; i < 4; i++)         /* next block's next 256 bytes into L2 */
                _mm_prefetch((const char *)(w + i * rs + k) + EO_ROW_PF, _MM_HINT_T0);
            for (int l = 0; l < 256; l += 64) _mm_prefetch((const char *)(w + 4 * rs) + (size_t)k * 8 + l, _MM_HINT_T2);
        } else if (next && !(k & 31)) {
            for (int l = 0; l < 256; l += 64) _mm_prefetch(next + (size_t)k * 8 + l, _MM_HINT_T2);
        }
        for (int i = 0; i < 4; i++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(w + i * rs + k));
            const __m256 we = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)), wo = _mm256_castsi256_ps(_mm256_and_si256(v, hi));
            if (TR == 1) {
                acc[i][0] = _mm256_fmadd_ps(we, _mm256_load_ps(xs + k), acc[i][0]);
                acc[i][1] = _mm256_fmadd_ps(wo, _mm256_load_ps(xs + k + 8), acc[i][1]);
            } else {
                for (int t = 0; t < TR; t++) {
                    acc[i][t] = _mm256_fmadd_ps(we, _mm256_load_ps(xs + (size_t)t * K + k), acc[i][t]);
                    acc[i][t] = _mm256_fmadd_ps(wo, _mm256_load_ps(xs + (size_t)t * K + k + 8), acc[i][t]);
                }
            }
        }
    }
    for (int i = 0; i < 4; i++) {
        if (TR == 1) y[i * ys] = hsum(_mm256_add_ps(acc[i][0], acc[i][1]));
        else
            for (int t = 0; t < TR; t++) y[(size_t)t * ldy + i * ys] = hsum(acc[i][t]);
    }
}

/* Rows [n, n + 4) (rs = K, ys = 1, pf_on 1 or 2, next NULL) or a 16-row super block from n
 * (rs = 4 K, ys = 4, four passes j = 0..3, pf_on 0, the next super block's quarter j in next) */
static inline __attribute__((always_inline)) void eo_rows(const float *xs, int T, int K, const uint16_t *w, size_t rs,
                                                         float *y, int ldy, int ys, int pf_on, const char *next) {
    if (T == 1) eo_block(xs, K, w, rs, 1, y, ldy, ys, pf_on, next);
    else if (T == 2) eo_block(xs, K, w, rs, 2, y, ldy, ys, pf_on, next);
    else eo_block(xs, K, w, rs, 3, y, ldy, ys, pf_on, next);
}

/* long_pf: rows of 8 KB and more prefetch each row's stream (eo_block pf_on 2) */
static void gemv_bf16_eo_pf(const float *x, int T, int K, const uint16_t *W, int n0, int n1, float *y, int ldy,
                            int long_pf) {
    float xs[3 * EO_MAX_K] __attribute__((aligned(32)));
    split_even_odd(x, T, K, xs);
    const int short_rows = (size_t)K * 2 < G4_PF_MAX_ROW;
    int n = n0;
    if (short_rows)   /* super blocks: each of the 4 streams runs through 4 consecutive rows */
        for (; n + 16 <= n1; n += 16) {
            const char *next = (const char *)(W + (size_t)(n + 16) * K);   /* pass j: its j-th quarter */
            for (int j = 0; j < 4; j++)
                eo_rows(xs, T, K, W + (size_t)(n + j) * K, (size_t)4 * K, y + n + j, ldy, 4, 0, next + (size_t)j * K * 8);
        }
    const int pf = short_rows ? 1 : long_pf ? 2 : 0;
    for (; n + 4 <= n1; n += 4) eo_rows(xs, T, K, W + (size_t)n * K, (size_t)K, y + n, ldy, 1, pf, NULL);
    if (n < n1) dot_bf16(x, T, K, W, n, n1, y, ldy);
}

static void gemv_bf16_eo(const float *x, int T, int K, const uint16_t *W, int n0, int n1, float *y, int ldy) {
    gemv_bf16_eo_pf(x, T, K, W, n0, n1, y, ldy, 0);
}

/* Decode (T <= 3) over bf16 rows for the avx512 path (avx512.c), rows of 8 KB and more with each
 * row's stream prefetched 2 KB ahead into L1 and the next 4-row block into L2, so that long rows
 * (o_proj, down_proj) stream at the read bandwidth rather than a little below it (the distance is
 * chosen by measurement, see docs/benchmarking.md). The avx2 table keeps no prefetch on such
 * rows: the linear block prefetch slows them, and this per-row one is tuned for the cores that
 * take the avx512 path. */
void g4_gemv_bf16_rowpf_avx2(const float *x, int T, int K, const uint16_t *W, int n0, int n1, float *y, int ldy) {
    if (K % 16 == 0 && K <= EO_MAX_K) gemv_bf16_eo_pf(x, T, K, W, n0, n1, y, ldy, 1);
    else g4_kernels_avx2()->matmul[G4_DT_BF16](x, T, K, W, n0, n1, y, ldy);
}

/* matmul_bf16's kernel for T < 4 and for the rows a GEMM leaves over */
static void dot_bf16_any(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    if (T <= 3 && K % 16 == 0 && K <= EO_MAX_K) gemv_bf16_eo(x, T, K, w, n0, n1, y, ldy);
    else dot_bf16(x, T, K, w, n0, n1, y, ldy);
}

/* ---- row-invariant multi-row decode (kernels.h matmul_rows): T activation rows (several slots'
 * tokens, a speculative verify) against each weight row, every (weight row, activation row) pair
 * summed exactly as the one-row GEMV sums it (eo_block with TR = 1: 8-lane even and odd chains
 * over the columns in order, hsum of their sum), so a row's result does not depend on how many
 * rows share the step. The weights are read from DRAM once: a 4-row block (12-48 KB) stays in
 * L1/L2 while every group of activation rows passes over it (2-3 and over 16 rows; 4-16 rows take
 * the parity passes of rows_phased below). */
enum { ROWS_TG = 6 };   /* activation rows per pass: 12 accumulators + the two weight vectors */

/* A thread's even/odd copy of x (up to 1 MB at K = 16384: too big for the stack of a pool
 * thread), freed when the thread exits. The first call takes room for 16 rows of the largest K
 * the callers take (EO_MAX_K), so decode steps of up to 16 slots never allocate again, whichever
 * shapes a thread happened to see before (tasks are claimed dynamically). */
static pthread_key_t rows_key;
static pthread_once_t rows_once = PTHREAD_ONCE_INIT;
static _Thread_local size_t rows_cap;
static void rows_key_init(void) { (void)pthread_key_create(&rows_key, free); }
float *g4_rows_scratch_avx2(size_t floats) {
    (void)pthread_once(&rows_once, rows_key_init);
    float *p = pthread_getspecific(rows_key);
    if (p && rows_cap >= floats) return p;
    if (floats < (size_t)16 * EO_MAX_K) floats = (size_t)16 * EO_MAX_K;   /* the floor: see above */
    free(p);
    rows_cap = 0;
    p = aligned_alloc(64, (floats * sizeof(float) + 63) & ~(size_t)63);
    if (pthread_setspecific(rows_key, p) != 0) {
        free(p);
        p = NULL;
    }
    if (p) rows_cap = floats;
    return p;
}
void g4_rows_scratch_reserve_avx2(void) { (void)g4_rows_scratch_avx2(1); }

/* NW (1 or 2) weight rows from w (stride K) against TG activation rows of xs (even/odd split,
 * stride K); eo_block's TR = 1 chains per pair; results to y[t * ldy + r]. 2 x TG chains per
 * weight row: with TG <= 2, two weight rows keep enough FMAs in flight to cover their latency. */
static inline __attribute__((always_inline)) void eo_rows_pass(const float *xs, int TG, int NW, int K, const uint16_t *w,
                                                              float *y, int ldy, int pf) {
    const __m256i hi = _mm256_set1_epi32((int)0xFFFF0000u);
    __m256 ae[2][ROWS_TG], ao[2][ROWS_TG];
    for (int r = 0; r < NW; r++)
        for (int t = 0; t < TG; t++) ae[r][t] = ao[r][t] = _mm256_setzero_ps();
    for (int k = 0; k < K; k += 16) {
        for (int r = 0; r < NW; r++) {
            if (pf && !(k & 31)) _mm_prefetch((const char *)(w + (size_t)r * K + k) + G4_PF_BYTES, _MM_HINT_T0);
            const __m256i v = _mm256_loadu_si256((const __m256i *)(w + (size_t)r * K + k));
            const __m256 we = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)), wo = _mm256_castsi256_ps(_mm256_and_si256(v, hi));
            for (int t = 0; t < TG; t++) {
                ae[r][t] = _mm256_fmadd_ps(we, _mm256_load_ps(xs + (size_t)t * K + k), ae[r][t]);
                ao[r][t] = _mm256_fmadd_ps(wo, _mm256_load_ps(xs + (size_t)t * K + k + 8), ao[r][t]);
            }
        }
    }
    for (int r = 0; r < NW; r++)
        for (int t = 0; t < TG; t++) y[(size_t)t * ldy + r] = hsum(_mm256_add_ps(ae[r][t], ao[r][t]));
}

/* weight rows w .. w + 3K (a 4-row block) against TG <= ROWS_TG activation rows. pf: the first
 * group over a block, which reads its weights from DRAM: prefetch them G4_PF_BYTES ahead,
 * linearly (the block's rows are consecutive) */
static void eo_rows_group(const float *xs, int TG, int K, const uint16_t *w, float *y, int ldy, int pf) {
    for (int i = 0; i < 4; i += TG <= 2 ? 2 : 1) {
        const uint16_t *wi = w + (size_t)i * K;
        float *yi = y + i;
        switch (TG) {   /* compile-time TG: the accumulators stay in registers */
        case 6: eo_rows_pass(xs, 6, 1, K, wi, yi, ldy, pf); break;
        case 5: eo_rows_pass(xs, 5, 1, K, wi, yi, ldy, pf); break;
        case 4: eo_rows_pass(xs, 4, 1, K, wi, yi, ldy, pf); break;
        case 3: eo_rows_pass(xs, 3, 1, K, wi, yi, ldy, pf); break;
        case 2: eo_rows_pass(xs, 2, 2, K, wi, yi, ldy, pf); break;
        default: eo_rows_pass(xs, 1, 2, K, wi, yi, ldy, pf); break;
        }
    }
}

/* groups of at most `most` activation rows, as even as can be (7 rows: 4 + 3, not 6 + 1, whose
 * last group would keep too few FMAs in flight) */
static inline int rows_group_size(int T, int most) {
    const int ng = (T + most - 1) / most;
    return (T + ng - 1) / ng;
}

/* The same sums over a 4-row block of long rows (8 KB and more: o_proj, down_proj) for more than
 * PH_MAX_T activation rows, the columns taken in chunks, so that a group's chunk of x (ROWS_CHUNK_X bytes)
 * stays in L1 while it passes over the block's 4 rows: unchunked, a group's x (6 rows x 16-24 KB)
 * outgrows L1 and streams from L2 for every weight row, and the kernel waits on L2 rather than on
 * its FMAs (a third slower at 4-16 rows). A chain's accumulator goes to memory between chunks and
 * comes back (exact), so every chain still runs over the columns in order. Over short rows a
 * group's whole x (<= 36 KB at K = 1536) already stays in L1 across the block and eo_rows_group
 * is as fast; with 2 rows the kernel is bound by the weight stream either way. */
enum {
    ROWS_CHUNK_X = 12288,   /* bytes of a group's x chunk: 32 steps of 16 columns x 6 rows */
    ROWS_CHUNK_T = 16,      /* activation rows per accumulator block */
    ROWS_CHUNK_MIN_T = 3,
};

/* rows in group gi of ng, the group starting at row t0: T rows in groups as even as can be
 * (16 rows: 6 + 5 + 5), the larger first */
static inline int rows_group_at(int T, int t0, int ng, int gi) { return (T - t0 + ng - gi - 1) / (ng - gi); }

/* x[t] (T rows of K, K % 16 == 0) → xp: per 16 columns, every row's 8 even then 8 odd ones
 * (split_even_odd's order), the rows side by side: xp[k / 16][t][16], so that a group's chunk is
 * one contiguous range (no L1 set conflicts) and every load one base register + a constant */
static void split_even_odd_rows(const float *x, int T, int K, float *xp) {
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k += 16) {
            const __m256 a = _mm256_loadu_ps(x + (size_t)t * K + k), b = _mm256_loadu_ps(x + (size_t)t * K + k + 8);
            float *d = xp + ((size_t)(k / 16) * T + t) * 16;
            _mm256_store_ps(d, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8)));
            _mm256_store_ps(d + 8, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8)));
        }
}

/* steps [s0, s1) of 16 columns of weight row w against TG activation rows of xp (a step's rows
 * xs floats apart), their chains in acc[t][0..1]. pf: bytes to prefetch into L2 meanwhile, one
 * line per two steps (the first group's pass: the same chunk of the block two ahead), or NULL */
static inline __attribute__((always_inline)) void rows_chunk_pass(const float *xp, size_t xs, int TG, int s0, int s1,
                                                                 const uint16_t *w, __m256 (*acc)[2], const char *pf) {
    const __m256i hi = _mm256_set1_epi32((int)0xFFFF0000u);
    __m256 ae[ROWS_TG], ao[ROWS_TG];
    for (int t = 0; t < TG; t++) { ae[t] = acc[t][0]; ao[t] = acc[t][1]; }
    const float *p = xp + (size_t)s0 * xs;
    const uint16_t *wp = w + (size_t)s0 * 16;
    for (int s = s0; s < s1; s++, p += xs, wp += 16) {
        if (pf && !((s - s0) & 1)) _mm_prefetch(pf + (size_t)(s - s0) * 32, _MM_HINT_T1);
        const __m256i v = _mm256_loadu_si256((const __m256i *)wp);
        const __m256 we = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)), wo = _mm256_castsi256_ps(_mm256_and_si256(v, hi));
        for (int t = 0; t < TG; t++) {
            ae[t] = _mm256_fmadd_ps(we, _mm256_load_ps(p + 16 * t), ae[t]);
            ao[t] = _mm256_fmadd_ps(wo, _mm256_load_ps(p + 16 * t + 8), ao[t]);
        }
    }
    for (int t = 0; t < TG; t++) { acc[t][0] = ae[t]; acc[t][1] = ao[t]; }
}

/* rows w .. w + 3K (a 4-row block) x T <= ROWS_CHUNK_T activation rows of xp (ng groups,
 * rows_group_at; the group from row t0 at xp + t0 K in split_even_odd_rows' layout), in chunks of
 * SC steps of 16 columns; next: the block two ahead, whose chunks the first group's passes
 * prefetch as they read this block's from DRAM (far enough ahead to cover its latency with one
 * group of rows), or NULL */
static void rows_chunked_block(const float *xp, int T, int ng, int K, int SC, const uint16_t *w,
                               const uint16_t *next, float *y, int ldy) {
    __m256 acc[4][ROWS_CHUNK_T][2];
    for (int i = 0; i < 4; i++)
        for (int t = 0; t < T; t++) acc[i][t][0] = acc[i][t][1] = _mm256_setzero_ps();
    const int S = K / 16;
    for (int s0 = 0; s0 < S; s0 += SC) {
        const int s1 = S - s0 < SC ? S : s0 + SC;
        for (int t0 = 0, gi = 0, tg; t0 < T; t0 += tg, gi++) {
            tg = rows_group_at(T, t0, ng, gi);
            for (int i = 0; i < 4; i++) {
                const uint16_t *wi = w + (size_t)i * K;
                const char *pf = !t0 && next ? (const char *)(next + (size_t)i * K + (size_t)s0 * 16) : NULL;
                const float *xg = xp + (size_t)t0 * K;
                const size_t xs = (size_t)tg * 16;
                __m256 (*a)[2] = acc[i] + t0;
                switch (tg) {   /* compile-time TG: the chains stay in registers */
                case 6: rows_chunk_pass(xg, xs, 6, s0, s1, wi, a, pf); break;
                case 5: rows_chunk_pass(xg, xs, 5, s0, s1, wi, a, pf); break;
                case 4: rows_chunk_pass(xg, xs, 4, s0, s1, wi, a, pf); break;
                case 3: rows_chunk_pass(xg, xs, 3, s0, s1, wi, a, pf); break;
                case 2: rows_chunk_pass(xg, xs, 2, s0, s1, wi, a, pf); break;
                default: rows_chunk_pass(xg, xs, 1, s0, s1, wi, a, pf); break;
                }
            }
        }
    }
    for (int i = 0; i < 4; i++)
        for (int t = 0; t < T; t++) y[(size_t)t * ldy + i] = hsum(_mm256_add_ps(acc[i][t][0], acc[i][t][1]));
}

/* The same sums for 2 to 16 activation rows (long rows in column chunks: rows_phased), one
 * parity at a time: a (weight row, activation row) pair's even and odd chains are
 * independent until their final hsum, so a pass runs all the even chains of a group of activation
 * rows over the whole row, and a later pass the odd ones. Half the accumulators per pass let
 * one weight row feed 8 activation rows (or 2 weight rows 1-6), so each 8-wide weight vector
 * serves up to 8 FMAs (eo_rows_group: 2 x 4 at 8 rows), and the weights widen with one AND: the
 * odd halves are the 32-bit lanes masked, the even ones the lanes of a load 2 bytes earlier
 * masked (the first step, which would read before the row, shifts instead).
 * Order: 16-row blocks; per block and group of activation rows, the even passes over its 16
 * rows (the group's even x, <= 24 KB, stays in L1 while the block's 48 KB stream through from
 * DRAM), then the odd passes (the block again, now from L2). Every pass prefetches its share of
 * the next block into L2, so the DRAM stream runs evenly under all of the block's FMAs (at 2
 * and 3 rows, 1.4-2x eo_rows_group's speed, whose prefetch into L1 kept the stream behind). */
enum { PH_MIN_T = 2, PH_MAX_T = 16, PH_MAX_TG = 8, PH_RB = 16 };

/* x[t] (g rows of K) → xe, xo: per 16 columns each row's 8 even (xe) and 8 odd (xo) columns, the
 * rows side by side (xe[k / 16][t][8]), so a pass reads one contiguous range at constant offsets */
static void split_parity_rows(const float *x, int g, int K, float *xe, float *xo) {
    for (int t = 0; t < g; t++)
        for (int k = 0; k < K; k += 16) {
            const __m256 a = _mm256_loadu_ps(x + (size_t)t * K + k), b = _mm256_loadu_ps(x + (size_t)t * K + k + 8);
            const size_t o = ((size_t)(k / 16) * g + t) * 8;
            _mm256_store_ps(xe + o, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8)));
            _mm256_store_ps(xo + o, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8)));
        }
}

/* one parity of NW (1, 2) weight rows (w, w + K) against TG activation rows of xq over S steps of
 * 16 columns; chain (r, t) in acc[r * ars + t]. from_start: the steps start the row (chains from
 * zero, the first widened by a shift), else they go on from acc (a later column chunk: a chain
 * through memory is the same chain). pf: prefetch one line into L2 every 2^pf_shift steps from
 * there on, or NULL */
static inline __attribute__((always_inline)) void ph_pass(const float *xq, int TG, int NW, int S, const uint16_t *w,
                                                         size_t K, int odd, __m256 *acc, int ars, int from_start,
                                                         const char *pf, int pf_shift) {
    const __m256i hi = _mm256_set1_epi32((int)0xFFFF0000u);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0;
    if (!from_start) {
#define PH_LD(i) if (TG > i) { a##i = acc[i]; if (NW == 2 && i < 6) b##i = acc[ars + i]; }
        PH_LD(0) PH_LD(1) PH_LD(2) PH_LD(3) PH_LD(4) PH_LD(5)
#undef PH_LD
        if (TG > 6) a6 = acc[6];
        if (TG > 7) a7 = acc[7];
    }
    const float *p = xq;
    const uint16_t *wp = w;
    const int pf_mask = (1 << pf_shift) - 1;
    for (int s = 0; s < S; s++, p += TG * 8, wp += 16) {
        if (pf && !(s & pf_mask)) _mm_prefetch(pf + (size_t)(s >> pf_shift) * 64, _MM_HINT_T1);
        __m256 w0, w1 = _mm256_setzero_ps();
        if (odd) {
            w0 = _mm256_castsi256_ps(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)wp), hi));
            if (NW == 2) w1 = _mm256_castsi256_ps(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)(wp + K)), hi));
        } else if (s || !from_start) {
            w0 = _mm256_castsi256_ps(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)(wp - 1)), hi));
            if (NW == 2) w1 = _mm256_castsi256_ps(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)(wp + K - 1)), hi));
        } else {
            w0 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)wp), 16));
            if (NW == 2) w1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(wp + K)), 16));
        }
        /* named accumulators: GCC keeps them in registers (an array it spills) */
        if (NW == 1) {
#define PH_F(i) if (TG > i) a##i = _mm256_fmadd_ps(w0, _mm256_load_ps(p + 8 * i), a##i);
            PH_F(0) PH_F(1) PH_F(2) PH_F(3) PH_F(4) PH_F(5) PH_F(6) PH_F(7)
#undef PH_F
        } else {
            __m256 xv;
#define PH_F(i, A, B) if (TG > i) { xv = _mm256_load_ps(p + 8 * i); A = _mm256_fmadd_ps(w0, xv, A); B = _mm256_fmadd_ps(w1, xv, B); }
            PH_F(0, a0, b0) PH_F(1, a1, b1) PH_F(2, a2, b2) PH_F(3, a3, b3) PH_F(4, a4, b4) PH_F(5, a5, b5)
#undef PH_F
        }
    }
#define PH_ST(i) if (TG > i) { acc[i] = a##i; if (NW == 2 && i < 6) acc[ars + i] = b##i; }
    PH_ST(0) PH_ST(1) PH_ST(2) PH_ST(3) PH_ST(4) PH_ST(5)
#undef PH_ST
    if (TG > 6) acc[6] = a6;
    if (TG > 7) acc[7] = a7;
}

typedef void (*ph_pass_fn)(const float *xq, int S, const uint16_t *w, size_t K, __m256 *acc, int ars, int from_start,
                           const char *pf, int pf_shift);
#define PH_PASS(TG, NW)                                                                                         \
    static void ph_even_##TG##_##NW(const float *xq, int S, const uint16_t *w, size_t K, __m256 *acc, int ars,   \
                                    int from_start, const char *pf, int pf_shift) {                             \
        ph_pass(xq, TG, NW, S, w, K, 0, acc, ars, from_start, pf, pf_shift);                                    \
    }                                                                                                           \
    static void ph_odd_##TG##_##NW(const float *xq, int S, const uint16_t *w, size_t K, __m256 *acc, int ars,    \
                                   int from_start, const char *pf, int pf_shift) {                              \
        ph_pass(xq, TG, NW, S, w, K, 1, acc, ars, from_start, pf, pf_shift);                                    \
    }
/* groups of 7-8 rows: one weight row a pass (7-8 chains); of 1-6: two (2-12 chains) */
PH_PASS(8, 1) PH_PASS(7, 1) PH_PASS(6, 2) PH_PASS(5, 2) PH_PASS(4, 2) PH_PASS(3, 2) PH_PASS(2, 2) PH_PASS(1, 2)

typedef struct { int t0, tg, nw; ph_pass_fn even, odd; } ph_group;

static void ph_group_init(ph_group *g, int t0, int tg) {
    g->t0 = t0;
    g->tg = tg;
    g->nw = tg >= 7 ? 1 : 2;
    switch (tg) {
    case 8: g->even = ph_even_8_1; g->odd = ph_odd_8_1; break;
    case 7: g->even = ph_even_7_1; g->odd = ph_odd_7_1; break;
    case 6: g->even = ph_even_6_2; g->odd = ph_odd_6_2; break;
    case 5: g->even = ph_even_5_2; g->odd = ph_odd_5_2; break;
    case 4: g->even = ph_even_4_2; g->odd = ph_odd_4_2; break;
    case 3: g->even = ph_even_3_2; g->odd = ph_odd_3_2; break;
    case 2: g->even = ph_even_2_2; g->odd = ph_odd_2_2; break;
    default: g->even = ph_even_1_2; g->odd = ph_odd_1_2; break;
    }
}

/* rows w .. w + (RB - 1) K against every group, in column chunks of SC steps (SC >= K / 16: one
 * chunk); next: the block to prefetch, or NULL. xe, xo: the groups' parity halves
 * (split_parity_rows, group g from t0 K / 2). Per chunk and group the even passes over the
 * block's rows, then the odd ones; the chains wait in ae / ao between chunks. */
static void ph_block(const float *xe, const float *xo, const ph_group *g, int ng, int K, int RB, int SC,
                     const uint16_t *w, const char *next, int pf_shift, float *y, int ldy) {
    const int S = K / 16;
    __m256 ae[PH_RB][PH_MAX_T], ao[PH_RB][PH_MAX_T];
    int pass = 0;
    for (int s0 = 0; s0 < S; s0 += SC) {
        const int sc = S - s0 < SC ? S - s0 : SC, lines = sc >> pf_shift;   /* lines each pass prefetches */
        for (int i = 0; i < ng; i++) {
            const int t0 = g[i].t0, nw = g[i].nw;
            const size_t xg = (size_t)t0 * K / 2 + (size_t)s0 * g[i].tg * 8;
            for (int r = 0; r < RB; r += nw, pass++)
                g[i].even(xe + xg, sc, w + (size_t)r * K + (size_t)s0 * 16, K, &ae[r][t0], PH_MAX_T, !s0,
                          next ? next + (size_t)pass * lines * 64 : NULL, pf_shift);
            for (int r = 0; r < RB; r += nw, pass++)
                g[i].odd(xo + xg, sc, w + (size_t)r * K + (size_t)s0 * 16, K, &ao[r][t0], PH_MAX_T, !s0,
                         next ? next + (size_t)pass * lines * 64 : NULL, pf_shift);
        }
    }
    const int T = g[ng - 1].t0 + g[ng - 1].tg;
    int r0 = 0;
    for (; r0 + 8 <= RB; r0 += 8)   /* 8 rows' sums per store */
        for (int t = 0; t < T; t++) {
            __m256 v[8];
            for (int r = 0; r < 8; r++) v[r] = _mm256_add_ps(ae[r0 + r][t], ao[r0 + r][t]);
            _mm256_storeu_ps(y + (size_t)t * ldy + r0, hsum8(v));
        }
    for (int r = r0; r < RB; r++)
        for (int t = 0; t < T; t++) y[(size_t)t * ldy + r] = hsum(_mm256_add_ps(ae[r][t], ao[r][t]));
}

/* rows [n0, main_end) (a multiple of 4) x T >= PH_MIN_T activation rows; xs: T K floats of scratch.
 * Long rows (8 KB and more: o_proj, down_proj) go in blocks of 8 rows and column chunks of
 * PH_CHUNK_X bytes of a group's x (both parities), so that the chunk of x and of the block's rows
 * stay in L1 across the block's passes. */
enum { PH_RB_LONG = 8, PH_CHUNK_X = 12288 };
static void rows_phased(const float *x, int T, int K, const uint16_t *W, int n0, int main_end, float *y, int ldy,
                        float *xs) {
    ph_group g[(PH_MAX_T + PH_MAX_TG - 1) / PH_MAX_TG];
    /* groups of at most 8 rows, as even as can be: 13-16 rows take two groups of 7-8 (one weight
     * row a pass), 9-12 two of 5-6 (two weight rows a pass); three groups of at most 6 at 16 rows
     * stream the block through one more pair of passes, which was slower */
    const int ng = (T + PH_MAX_TG - 1) / PH_MAX_TG;
    float *xe = xs, *xo = xs + (size_t)T * K / 2;
    const int long_rows = (size_t)K * 2 >= G4_PF_MAX_ROW, RB = long_rows ? PH_RB_LONG : PH_RB;
    int passes = 0;   /* per block of RB rows and column chunk */
    for (int i = 0, t0 = 0; i < ng; i++) {
        ph_group_init(&g[i], t0, (T - t0 + ng - i - 1) / (ng - i));   /* as even as can be, larger first */
        split_parity_rows(x + (size_t)t0 * K, g[i].tg, K, xe + (size_t)t0 * K / 2, xo + (size_t)t0 * K / 2);
        passes += 2 * RB / g[i].nw;
        t0 += g[i].tg;
    }
    const int SC = long_rows ? PH_CHUNK_X / (64 * g[0].tg) : K / 16;
    /* a block is RB K / 32 lines over `passes` passes of K / 16 steps (all chunks together): a line
     * every 2 passes / RB steps, rounded down to a power of two (a little ahead, never behind) */
    int pf_shift = 0;
    while ((2 << pf_shift) * RB <= 2 * passes) pf_shift++;
    int n = n0;
    for (; n + RB <= main_end; n += RB) {
        const uint16_t *w = W + (size_t)n * K;
        const char *next = n + 2 * RB <= main_end ? (const char *)(w + (size_t)RB * K) : NULL;
        ph_block(xe, xo, g, ng, K, RB, SC, w, next, pf_shift, y + n, ldy);
    }
    for (; n < main_end; n += 4) ph_block(xe, xo, g, ng, K, 4, SC, W + (size_t)n * K, NULL, pf_shift, y + n, ldy);
}

/* Rows [n0, n1) x T activation rows in eo_block's one-row order; the last (n1 - n0) % 4 rows, which
 * the one-row GEMV takes through dot_bf16, go through it one activation row at a time. one_row:
 * the table's one-row kernel, for shapes the eo split does not take (K % 16, K > EO_MAX_K) and
 * for those last rows. The avx512 path uses it for rows of 8 KB and more. */
void g4_rows_bf16_eo_avx2(const float *x, int T, int K, const uint16_t *W, int n0, int n1, float *y, int ldy,
                          g4_matmul_fn one_row) {
    float *xs = K % 16 == 0 && K <= EO_MAX_K ? g4_rows_scratch_avx2((size_t)T * K) : NULL;
    const int main_end = xs ? n0 + (n1 - n0) / 4 * 4 : n0;
    if (xs && T >= PH_MIN_T && T <= PH_MAX_T) {
        rows_phased(x, T, K, W, n0, main_end, y, ldy, xs);
    } else if (xs && (T < ROWS_CHUNK_MIN_T || (size_t)K * 2 < G4_PF_MAX_ROW)) {
        split_even_odd(x, T, K, xs);
        for (int n = n0; n < main_end; n += 4) {
            for (int t0 = 0, g = rows_group_size(T, ROWS_TG); t0 < T; t0 += g) {
                const int tg = T - t0 < g ? T - t0 : g;
                eo_rows_group(xs + (size_t)t0 * K, tg, K, W + (size_t)n * K, y + (size_t)t0 * ldy + n, ldy, !t0);
            }
        }
    } else if (xs) {
        for (int tb = 0; tb < T; tb += ROWS_CHUNK_T) {
            const int tn = T - tb < ROWS_CHUNK_T ? T - tb : ROWS_CHUNK_T, ng = (tn + ROWS_TG - 1) / ROWS_TG;
            float *xp = xs + (size_t)tb * K;
            for (int t0 = 0, gi = 0, tg; t0 < tn; t0 += tg, gi++) {
                tg = rows_group_at(tn, t0, ng, gi);
                split_even_odd_rows(x + (size_t)(tb + t0) * K, tg, K, xp + (size_t)t0 * K);
            }
            const int SC = ROWS_CHUNK_X / (64 * rows_group_at(tn, 0, ng, 0));   /* >= 32 steps */
            for (int n = n0; n < main_end; n += 4)
                rows_chunked_block(xp, tn, ng, K, SC, W + (size_t)n * K,
                                   n + 12 <= main_end ? W + (size_t)(n + 8) * K : NULL, y + (size_t)tb * ldy + n, ldy);
        }
    }
    if (main_end < n1)
        for (int t = 0; t < T; t++) one_row(x + (size_t)t * K, 1, K, W, main_end, n1, y + (size_t)t * ldy, ldy);
}

/* f32 / f16 weights: MATMUL_IMPL's one-row order (two 8-lane chains over each 16 columns, an
 * 8-column step into the first, hsum of their sum, then the last K % 8 columns one by one) for
 * every activation row, each weight row read once for all of them */
#define ROWS_DOT_IMPL(NAME, TYPE, LOADW, WIDEN)                                                   \
    static inline __attribute__((always_inline)) void NAME##_pass(const float *x, int TG, int K,  \
                                                                  const TYPE *w, float *y, int ldy) { \
        __m256 a0[ROWS_TG], a1[ROWS_TG];                                                            \
        for (int t = 0; t < TG; t++) a0[t] = a1[t] = _mm256_setzero_ps();                           \
        int k = 0;                                                                                  \
        for (; k + 16 <= K; k += 16) {                                                              \
            const __m256 w0 = LOADW(w + k), w1 = LOADW(w + k + 8);                                  \
            for (int t = 0; t < TG; t++) {                                                          \
                a0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + (size_t)t * K + k), a0[t]);         \
                a1[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + (size_t)t * K + k + 8), a1[t]);     \
            }                                                                                       \
        }                                                                                           \
        for (; k + 8 <= K; k += 8) {                                                                \
            const __m256 w0 = LOADW(w + k);                                                         \
            for (int t = 0; t < TG; t++) a0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + (size_t)t * K + k), a0[t]); \
        }                                                                                           \
        for (int t = 0; t < TG; t++) {                                                              \
            float s = hsum(_mm256_add_ps(a0[t], a1[t]));                                            \
            for (int kk = k; kk < K; kk++) s += x[(size_t)t * K + kk] * WIDEN(w[kk]);               \
            y[(size_t)t * ldy] = s;                                                                 \
        }                                                                                           \
    }                                                                                               \
    static void NAME(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) { \
        const TYPE *W = w;                                                                          \
        for (int n = n0; n < n1; n += 4)                                                            \
            for (int t0 = 0; t0 < T; t0 += ROWS_TG)                                                 \
                for (int i = n; i < n + 4 && i < n1; i++) {                                         \
                    const float *xg = x + (size_t)t0 * K;                                           \
                    float *yg = y + (size_t)t0 * ldy + i;                                           \
                    switch (T - t0 < ROWS_TG ? T - t0 : ROWS_TG) {                                  \
                    case 6: NAME##_pass(xg, 6, K, W + (size_t)i * K, yg, ldy); break;               \
                    case 5: NAME##_pass(xg, 5, K, W + (size_t)i * K, yg, ldy); break;               \
                    case 4: NAME##_pass(xg, 4, K, W + (size_t)i * K, yg, ldy); break;               \
                    case 3: NAME##_pass(xg, 3, K, W + (size_t)i * K, yg, ldy); break;               \
                    case 2: NAME##_pass(xg, 2, K, W + (size_t)i * K, yg, ldy); break;               \
                    default: NAME##_pass(xg, 1, K, W + (size_t)i * K, yg, ldy); break;              \
                    }                                                                               \
                }                                                                                   \
    }
ROWS_DOT_IMPL(rows_f32, float, load_f32, WIDEN_F32)
ROWS_DOT_IMPL(rows_f16, uint16_t, load_f16, g4_f16_to_f32)

static void rows_bf16(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    g4_rows_bf16_eo_avx2(x, T, K, w, n0, n1, y, ldy, dot_bf16_any);
}

/* ---- prefill GEMM: pack 16 weight rows x KC into a float32 panel [KC][16] (widened once, then
 * reused by every block of 6 activation rows), and run a 6 x 16 broadcast microkernel: per k,
 * 2 panel loads + 6 broadcasts feed 12 FMAs into 12 accumulators, so it is FMA-bound. */
/* KC 512 (a 32 KB panel, read from L2 by the row blocks): fewer C reloads and calls per FMA
 * than 256 on the bf16 GEMM; the quantized path keeps 256 (its dequantized rows and panel both
 * live on the stack and in L1). */
enum { GEMM_NR = 16, GEMM_MR = 6, GEMM_KC = 512, GEMM_KC_Q = 256, GEMM_MC = 256 };

/* GEMM_MC, the most activation rows per M block (g4_gemm_mblock: equal blocks, whole 6-row micro
 * blocks). Every block packs (widens) every weight panel once more, so fewer, fuller blocks pack
 * less: blocks of up to 256 rows, though X's block then outgrows L2 (256 x 512 floats = 512 KB):
 * its rows stream through the microkernel in order, which the prefetchers follow, so the packing
 * saved outweighs the misses (chosen by measurement, see docs/benchmarking.md). T <= 256 (every
 * chunk of 64 by default): one block. */
static inline int gemm_mc(int T) { return g4_gemm_mblock(T, GEMM_MC, GEMM_MR); }

#define PACK_IMPL(NAME, TYPE, LOADW)                                                          \
    static void NAME(const TYPE *w, int K, int k0, int kc, float *panel) {                    \
        /* rows n..n+15 of W, columns k0..k0+kc-1 → panel[k][16] */                          \
        for (int kk = 0; kk < kc; kk += 8) {                                                  \
            __m256 r[16];                                                                     \
            for (int i = 0; i < 16; i++) r[i] = LOADW(w + (size_t)i * K + k0 + kk);           \
            /* transpose two 8x8 blocks (rows 0-7 and 8-15) */                               \
            for (int h = 0; h < 2; h++) {                                                     \
                __m256 *a = r + 8 * h;                                                        \
                __m256 t0 = _mm256_unpacklo_ps(a[0], a[1]), t1 = _mm256_unpackhi_ps(a[0], a[1]); \
                __m256 t2 = _mm256_unpacklo_ps(a[2], a[3]), t3 = _mm256_unpackhi_ps(a[2], a[3]); \
                __m256 t4 = _mm256_unpacklo_ps(a[4], a[5]), t5 = _mm256_unpackhi_ps(a[4], a[5]); \
                __m256 t6 = _mm256_unpacklo_ps(a[6], a[7]), t7 = _mm256_unpackhi_ps(a[6], a[7]); \
                __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE); \
                __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE); \
                __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE); \
                __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE); \
                __m256 c[8] = {_mm256_permute2f128_ps(u0, u4, 0x20), _mm256_permute2f128_ps(u1, u5, 0x20), \
                               _mm256_permute2f128_ps(u2, u6, 0x20), _mm256_permute2f128_ps(u3, u7, 0x20), \
                               _mm256_permute2f128_ps(u0, u4, 0x31), _mm256_permute2f128_ps(u1, u5, 0x31), \
                               _mm256_permute2f128_ps(u2, u6, 0x31), _mm256_permute2f128_ps(u3, u7, 0x31)}; \
                for (int j = 0; j < 8; j++) _mm256_storeu_ps(panel + (size_t)(kk + j) * 16 + 8 * h, c[j]); \
            }                                                                                 \
        }                                                                                     \
    }
PACK_IMPL(pack_f32, float, load_f32)
PACK_IMPL(pack_f16, uint16_t, load_f16)
/* bf16 rows n..n+15, columns k0..k0+kc-1 → panel[k][16] in the "even/odd" lane order: lanes 0-7
 * hold rows 0,2,4,6,8,10,12,14 and lanes 8-15 rows 1,3,...,15 (micro_6x16's eo mode restores the
 * natural order when it loads and stores C). The transpose runs on the 16-bit values (rows i and
 * i+8 in the two 128-bit lanes of one register: 24 unpacks for the whole 16 x 8 block), and the
 * widening is then a shift (even rows) and a mask (odd rows) of each column's 32-bit pairs. */
static void pack_bf16(const uint16_t *w, int K, int k0, int kc, float *panel) {
    const __m256i hi_mask = _mm256_set1_epi32((int)0xFFFF0000u);
    for (int kk = 0; kk < kc; kk += 8) {
        __m256i a[8];
        for (int i = 0; i < 8; i++)
            a[i] = _mm256_inserti128_si256(
                _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(w + (size_t)i * K + k0 + kk))),
                _mm_loadu_si128((const __m128i *)(w + (size_t)(i + 8) * K + k0 + kk)), 1);
        __m256i t[8], u[8];
        for (int i = 0; i < 4; i++) {
            t[2 * i] = _mm256_unpacklo_epi16(a[2 * i], a[2 * i + 1]);       /* rows 2i,2i+1: cols 0-3 */
            t[2 * i + 1] = _mm256_unpackhi_epi16(a[2 * i], a[2 * i + 1]);   /* cols 4-7 */
        }
        for (int h = 0; h < 2; h++) {   /* rows 0-3 (h = 0) and 4-7 */
            u[4 * h + 0] = _mm256_unpacklo_epi32(t[4 * h], t[4 * h + 2]);       /* cols 0,1 */
            u[4 * h + 1] = _mm256_unpackhi_epi32(t[4 * h], t[4 * h + 2]);       /* cols 2,3 */
            u[4 * h + 2] = _mm256_unpacklo_epi32(t[4 * h + 1], t[4 * h + 3]);   /* cols 4,5 */
            u[4 * h + 3] = _mm256_unpackhi_epi32(t[4 * h + 1], t[4 * h + 3]);   /* cols 6,7 */
        }
        for (int j = 0; j < 4; j++) {   /* column pairs (2j, 2j+1): rows 0-7 | rows 8-15 */
            const __m256i c0 = _mm256_unpacklo_epi64(u[j], u[4 + j]), c1 = _mm256_unpackhi_epi64(u[j], u[4 + j]);
            float *p0 = panel + (size_t)(kk + 2 * j) * 16, *p1 = p0 + 16;
            _mm256_store_ps(p0, _mm256_castsi256_ps(_mm256_slli_epi32(c0, 16)));
            _mm256_store_ps(p0 + 8, _mm256_castsi256_ps(_mm256_and_si256(c0, hi_mask)));
            _mm256_store_ps(p1, _mm256_castsi256_ps(_mm256_slli_epi32(c1, 16)));
            _mm256_store_ps(p1 + 8, _mm256_castsi256_ps(_mm256_and_si256(c1, hi_mask)));
        }
    }
}

/* The packers for the AVX-512 GEMM (pack_avx2.h). */
void g4_pack16_f32_avx2(const void *w, int K, int k0, int kc, float *panel) { pack_f32(w, K, k0, kc, panel); }
void g4_pack16_f16_avx2(const void *w, int K, int k0, int kc, float *panel) { pack_f16(w, K, k0, kc, panel); }

/* C[MR][16] (+)= X[MR][k0:k0+kc] · panel; rows of C at stride ldy. eo: the panel is in
 * pack_bf16's even/odd lane order (C is permuted on load and store). `mr` is a compile-time
 * constant at every call site (micro_rows), so a short last block of rows costs only its own FMAs. */
static inline __attribute__((always_inline)) void micro_6x16(const float *x, int K, int k0, int kc,
                                                             const float *panel, float *y, int ldy,
                                                             int mr, int accumulate, int eo) {
    __m256 c[6][2];
    for (int i = 0; i < 6; i++) {
        if (i < mr && accumulate) {
            c[i][0] = _mm256_loadu_ps(y + (size_t)i * ldy);
            c[i][1] = _mm256_loadu_ps(y + (size_t)i * ldy + 8);
            if (eo) {   /* natural → even/odd: a = rows 0-3 | 8-11, b = 4-7 | 12-15 */
                const __m256 a = _mm256_permute2f128_ps(c[i][0], c[i][1], 0x20);
                const __m256 b = _mm256_permute2f128_ps(c[i][0], c[i][1], 0x31);
                c[i][0] = _mm256_shuffle_ps(a, b, 0x88);   /* 0 2 4 6 | 8 10 12 14 */
                c[i][1] = _mm256_shuffle_ps(a, b, 0xDD);   /* 1 3 5 7 | 9 11 13 15 */
            }
        } else {
            c[i][0] = c[i][1] = _mm256_setzero_ps();
        }
    }
    const float *xr[6];
    for (int i = 0; i < 6; i++) xr[i] = x + (size_t)(i < mr ? i : 0) * K + k0;
    for (int k = 0; k < kc; k++) {
        __m256 b0 = _mm256_load_ps(panel + (size_t)k * 16), b1 = _mm256_load_ps(panel + (size_t)k * 16 + 8);
        for (int i = 0; i < 6; i++) {
            if (i >= mr) break;
            __m256 a = _mm256_broadcast_ss(xr[i] + k);
            c[i][0] = _mm256_fmadd_ps(a, b0, c[i][0]);
            c[i][1] = _mm256_fmadd_ps(a, b1, c[i][1]);
        }
    }
    for (int i = 0; i < mr; i++) {
        if (eo) {   /* even/odd → natural */
            const __m256 a = _mm256_unpacklo_ps(c[i][0], c[i][1]);   /* 0-3 | 8-11 */
            const __m256 b = _mm256_unpackhi_ps(c[i][0], c[i][1]);   /* 4-7 | 12-15 */
            c[i][0] = _mm256_permute2f128_ps(a, b, 0x20);
            c[i][1] = _mm256_permute2f128_ps(a, b, 0x31);
        }
        _mm256_storeu_ps(y + (size_t)i * ldy, c[i][0]);
        _mm256_storeu_ps(y + (size_t)i * ldy + 8, c[i][1]);
    }
}

/* All T activation rows against one packed panel, 6 rows at a time (the last block 1..5).
 * While the FMAs run it prefetches what the next pack and the next block need from beyond L2:
 * the next panel's weight rows (`pf`: 16 rows of pf_bytes at pf_stride — DRAM), spread over the
 * blocks a few rows each, and each next block's C rows (y of a long task does not stay in L2
 * between K blocks). Spread this way, the next panel's weights arrive while the FMAs run, and a
 * GEMM over weights streamed from DRAM comes closer to one over weights in L3; issued all at once
 * at the start of the pack instead, they overflow the fill buffers and leave the pack waiting on
 * DRAM. */
static void micro_rows(const float *x, int T, int K, int k0, int kc, const float *panel, float *y, int ldy,
                       int accumulate, int eo, const char *pf, size_t pf_stride, int pf_bytes) {
    int t = 0;
    const int nb = T / GEMM_MR > 0 ? T / GEMM_MR : 1;
    for (int b = 0; t + GEMM_MR <= T; t += GEMM_MR, b++) {
        if (pf)
            for (int r = b * GEMM_NR / nb; r < (b + 1) * GEMM_NR / nb; r++)
                for (int l = 0; l < pf_bytes; l += 64) _mm_prefetch(pf + r * pf_stride + l, _MM_HINT_T0);
        if (accumulate) {   /* the next block's C rows: this panel's, else the next panel's first */
            const float *yn = t + 2 * GEMM_MR <= T ? y + (size_t)(t + GEMM_MR) * ldy : y + GEMM_NR;
            for (int i = 0; i < GEMM_MR; i++) _mm_prefetch((const char *)(yn + (size_t)i * ldy), _MM_HINT_T0);
        }
        micro_6x16(x + (size_t)t * K, K, k0, kc, panel, y + (size_t)t * ldy, ldy, 6, accumulate, eo);
    }
    const float *xb = x + (size_t)t * K;
    float *yb = y + (size_t)t * ldy;
    switch (T - t) {
    case 5: micro_6x16(xb, K, k0, kc, panel, yb, ldy, 5, accumulate, eo); break;
    case 4: micro_6x16(xb, K, k0, kc, panel, yb, ldy, 4, accumulate, eo); break;
    case 3: micro_6x16(xb, K, k0, kc, panel, yb, ldy, 3, accumulate, eo); break;
    case 2: micro_6x16(xb, K, k0, kc, panel, yb, ldy, 2, accumulate, eo); break;
    case 1: micro_6x16(xb, K, k0, kc, panel, yb, ldy, 1, accumulate, eo); break;
    default: break;
    }
}

/* K blocks outermost: X[0:T][k0:k0+KC] (T x 2 KB) stays in L2 while every 16-row panel of the
 * range is packed and multiplied against it — with the panel loop outermost, a long K (down_proj,
 * 6144) made every panel re-read all of X (T x 24 KB) from L3. Each panel is still packed once.
 * EO: the pack writes the even/odd lane order (pack_bf16). */
#define GEMM_IMPL(NAME, TYPE, PACK, DOT, EO)                                                  \
    static void NAME(const float *x, int T, int K, const void *w, int n0, int n1, float *y,   \
                     int ldy) {                                                               \
        const TYPE *W = w;                                                                    \
        /* decode-sized batches and odd shapes stream the weights through the dot kernel */  \
        if (T < 4 || K % 8) { DOT(x, T, K, w, n0, n1, y, ldy); return; }                      \
        float panel[GEMM_KC * GEMM_NR] __attribute__((aligned(32)));                          \
        const int nfull = n0 + (n1 - n0) / GEMM_NR * GEMM_NR;                                 \
        const int MC = gemm_mc(T);                                                            \
        for (int m0 = 0; m0 < T; m0 += MC) {                                                  \
            const int mc = T - m0 < MC ? T - m0 : MC;                                         \
            const float *xm = x + (size_t)m0 * K;                                             \
            float *ym = y + (size_t)m0 * ldy;                                                 \
            for (int k0 = 0; k0 < K; k0 += GEMM_KC) {                                         \
                int kc = K - k0 < GEMM_KC ? K - k0 : GEMM_KC;                                 \
                for (int n = n0; n < nfull; n += GEMM_NR) {                                   \
                    /* the next pack in loop order: the next panel, else the next K block */  \
                    const int nn = n + GEMM_NR < nfull ? n + GEMM_NR : n0;                    \
                    const int nk = n + GEMM_NR < nfull ? k0 : k0 + GEMM_KC;                   \
                    const int nkc = K - nk < GEMM_KC ? K - nk : GEMM_KC;                      \
                    PACK(W + (size_t)n * K, K, k0, kc, panel);                                \
                    micro_rows(xm, mc, K, k0, kc, panel, ym + n, ldy, k0 > 0, EO,             \
                               nk < K ? (const char *)(W + (size_t)nn * K + nk) : NULL,       \
                               (size_t)K * sizeof(TYPE), nkc * (int)sizeof(TYPE));            \
                }                                                                             \
            }                                                                                 \
        }                                                                                     \
        if (nfull < n1) DOT(x, T, K, w, nfull, n1, y, ldy);                                   \
    }
GEMM_IMPL(matmul_f32, float, pack_f32, dot_f32, 0)
GEMM_IMPL(matmul_f16, uint16_t, pack_f16, dot_f16, 0)
GEMM_IMPL(matmul_bf16, uint16_t, pack_bf16, dot_bf16_any, 1)

/* Prefill over block-quantized weights: each 16-row x KC panel is dequantized once per chunk
 * (ggml's arithmetic, so the weights are exactly dequantize-then-dot's: quant_panel_avx2.c) into
 * the fp32 panel and run through the same microkernel; the fused GEMV kernels re-widened every
 * block once per activation row. KC = 256 is a multiple of every block size (32, 256); rows past
 * the last full panel return 0 for the caller's GEMV. Returns the first row not computed. */
int g4_gemm_quant_avx2(g4_dtype dt, const float *x, int T, int K, const void *w, int n0, int n1, float *y,
                       int ldy) {
    if (K % g4_dtype_block(dt)) return n0;
    float panel[GEMM_KC_Q * GEMM_NR] __attribute__((aligned(32)));
    const size_t rb = g4_dtype_row_bytes(dt, K);
    const int nfull = n0 + (n1 - n0) / GEMM_NR * GEMM_NR;
    const int MC = gemm_mc(T);
    for (int m0 = 0; m0 < T; m0 += MC) {
        const int mc = T - m0 < MC ? T - m0 : MC;
        const float *xm = x + (size_t)m0 * K;
        float *ym = y + (size_t)m0 * ldy;
        for (int k0 = 0; k0 < K; k0 += GEMM_KC_Q) {
            const int kc = K - k0 < GEMM_KC_Q ? K - k0 : GEMM_KC_Q;
            for (int n = n0; n < nfull; n += GEMM_NR) {
                g4_quant_panel16_avx2(dt, (const uint8_t *)w + (size_t)n * rb, rb, k0, kc, panel);
                micro_rows(xm, mc, K, k0, kc, panel, ym + n, ldy, k0 > 0, 0, NULL, 0, 0);
            }
        }
    }
    return nfull;
}

static float dot(const float *a, const float *b, int n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = hsum(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

static void axpy(float a, const float *x, float *y, int n) {
    __m256 av = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

static void rmsnorm(const float *x, const float *w, float eps, int n, float *y) {
    /* sum of squares in double lanes, as the reference does */
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        s0 = _mm256_fmadd_pd(lo, lo, s0);
        s1 = _mm256_fmadd_pd(hi, hi, s1);
    }
    double buf[4];
    _mm256_storeu_pd(buf, _mm256_add_pd(s0, s1));
    double ss = buf[0] + buf[1] + buf[2] + buf[3];
    for (; i < n; i++) ss += (double)x[i] * x[i];
    float r = powf((float)(ss / n) + eps, -0.5f);
    __m256 rv = _mm256_set1_ps(r);
    i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), rv);
        if (w) v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
        _mm256_storeu_ps(y + i, v);
    }
    for (; i < n; i++) y[i] = w ? x[i] * r * w[i] : x[i] * r;
}

/* gelu_tanh(x) = 0.5 x (1 + tanh(z)) = x / (1 + e^(-2z)),  z = sqrt(2/pi) (x + 0.044715 x^3):
 * the same function, vectorized (libm tanhf per element makes the MLP's activation a serial
 * share of prefill). Agrees with the scalar reference to a few float ulps. */
static void gelu_mul(const float *g, const float *u, int n, float *y) {
    const float c = 0.7978845608028654f;
    const __m256 m2c = _mm256_set1_ps(-2.0f * c), k3 = _mm256_set1_ps(0.044715f), one = _mm256_set1_ps(1.0f);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        __m256 z = _mm256_mul_ps(m2c, _mm256_fmadd_ps(_mm256_mul_ps(k3, x), _mm256_mul_ps(x, x), x));
        __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, g4_exp_ps(z)));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) {
        float x = g[i];
        y[i] = 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x))) * u[i];
    }
}

/* Same arithmetic as g4_attend_generic with this file's dot/axpy (bit-identical), restructured
 * for prefill, where attention is a sizeable share of the time: scores for 4 keys per pass share the q loads
 * (each key keeps dot()'s two 16-column accumulators), and the weighted sum of V keeps 64 output
 * columns in registers across all keys instead of a load + store of `out` per key. */
static void attend(const float *q, const float *K, const float *V, int cap, int lo, int hi, int D,
                   float scale, float *scores, float *out) {
    if (D % 16) {
        g4_attend_generic(q, K, V, cap, lo, hi, D, scale, scores, out, dot, axpy);
        return;
    }
    float mx = -INFINITY;
    int t = lo;
    for (; t + 4 <= hi + 1; t += 4) {
        const float *kr[4];
        __m256 s[4][2];
        for (int j = 0; j < 4; j++) {
            kr[j] = K + (size_t)((t + j) % cap) * D;
            s[j][0] = s[j][1] = _mm256_setzero_ps();
        }
        for (int i = 0; i < D; i += 16) {
            __m256 qa = _mm256_loadu_ps(q + i), qb = _mm256_loadu_ps(q + i + 8);
            for (int j = 0; j < 4; j++) {
                s[j][0] = _mm256_fmadd_ps(qa, _mm256_loadu_ps(kr[j] + i), s[j][0]);
                s[j][1] = _mm256_fmadd_ps(qb, _mm256_loadu_ps(kr[j] + i + 8), s[j][1]);
            }
        }
        for (int j = 0; j < 4; j++) {
            float v = hsum(_mm256_add_ps(s[j][0], s[j][1])) * scale;
            scores[t + j - lo] = v;
            if (v > mx) mx = v;
        }
    }
    for (; t <= hi; t++) {
        float v = dot(q, K + (size_t)(t % cap) * D, D) * scale;
        scores[t - lo] = v;
        if (v > mx) mx = v;
    }
    const int n = hi - lo + 1;
    float sum = 0.0f;
    for (int i = 0; i < n; i++) { scores[i] = expf(scores[i] - mx); sum += scores[i]; }
    for (int i = 0; i < n; i++) scores[i] = scores[i] / sum;
    for (int c = 0; c < D; c += 64) {
        const int nv = D - c < 64 ? (D - c) / 8 : 8;
        __m256 acc[8];
        for (int v = 0; v < 8; v++) acc[v] = _mm256_setzero_ps();
        if (nv == 8) {
            for (int i = 0; i < n; i++) {
                const float *vr = V + (size_t)((lo + i) % cap) * D + c;
                __m256 p = _mm256_broadcast_ss(scores + i);
                for (int v = 0; v < 8; v++) acc[v] = _mm256_fmadd_ps(p, _mm256_loadu_ps(vr + 8 * v), acc[v]);
            }
        } else {
            for (int i = 0; i < n; i++) {
                const float *vr = V + (size_t)((lo + i) % cap) * D + c;
                __m256 p = _mm256_broadcast_ss(scores + i);
                for (int v = 0; v < nv; v++) acc[v] = _mm256_fmadd_ps(p, _mm256_loadu_ps(vr + 8 * v), acc[v]);
            }
        }
        for (int v = 0; v < nv; v++) _mm256_storeu_ps(out + c + 8 * v, acc[v]);
    }
}

static const g4_kernels avx2_table = {
    .name = "avx2",
    .matmul = {matmul_f32, matmul_f16, matmul_bf16, G4_QUANT_MATMULS_AVX2},
    .matmul_q8 = {G4_QUANT_MATMULS_Q8_AVX2},
    .matmul_rows = {rows_f32, rows_f16, rows_bf16, G4_QUANT_ROWS_AVX2},
    .quantize_act = g4_act_quantize_avx2,
    .dot = dot,
    .axpy = axpy,
    .rmsnorm = rmsnorm,
    .gelu_mul = gelu_mul,
    .attend = attend,
    .attend_block = g4_attend_block_avx2,
    .attend_kv = g4_attend_kv_avx2,
    .attend_ftz = 1,
    .rope_table = g4_rope_table_exact,
    .rope_apply = g4_rope_apply,
    .prepare_thread = g4_rows_scratch_reserve_avx2,
};

const g4_kernels *g4_kernels_avx2(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return NULL;
    return &avx2_table;
}
