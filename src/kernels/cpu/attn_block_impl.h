/* attn_block_impl.h — attention for a block of query rows sharing one KV head, written once for
 * any vector width and included by attn_avx2.c (8 lanes) and attn_avx512.c (16): scores = Q·Kᵀ
 * by a 4-row x ATT_NK-key FMA microkernel, a float32 max-subtracted softmax per row over its own
 * [lo, hi] (8 lanes in both), then out = P·V by a 4-row x (2 vectors) microkernel. K and V are
 * streamed once per block in tiles that stay in L2, instead of once per (row, head) as attend
 * does. Owns no memory.
 * The including file (compiled for its ISA with avx2 + fma among the targets) defines:
 *   ATT_VEC, ATT_VW           the vector type and its float lanes
 *   ATT_LOAD(p), ATT_STORE(p, v), ATT_ZERO(), ATT_FMA(a, b, c) (a*b + c), ATT_BCAST(p) (*p in
 *   every lane), ATT_TO8(v) (the lanes summed pairwise down to one __m256), ATT_NK (keys per
 *   scores microkernel)
 *   ATT_MUL(a, b), ATT_SET1(x), and the widenings of ATT_VW stored values to a vector:
 *   ATT_WIDEN_BF16(p), ATT_WIDEN_F16(p) (p: uint16_t *), ATT_WIDEN_I8(p) (p: int8_t *)
 * and may define ATT_VTILE_BYTES (V rows per P·V tile, default 16 KB) and ATT_PV_NV (vectors
 * per P·V strip, default 2); it gets attend_block_impl(), which needs D a multiple of
 * ATT_PV_NV * ATT_VW. A cache of another type than f32 (--kv-type) is, for a block of many rows
 * (a prompt), widened tile by tile into float32 scratch (kbuf [TILE_BYTES], vbuf [VTILE_BYTES])
 * just before the same loops read it, and for a few rows (a decode step) read in place by
 * microkernels that widen each vector in registers: either way the DRAM stream is the narrow one
 * and the arithmetic after the widening is the f32 path's (the same bits). An f32 cache is read
 * in place, as before. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "gemma4c.h"
#include "kernels/cpu/attn.h"
#include "kernels/cpu/vmath_avx2.h"

/* Keys per tile: 64 KB of K rows, reused by every row quad of the block from L2 (each quad reads
 * whole key rows, which the prefetchers follow); 16 KB of V rows, which stay in L1 while every
 * quad walks them in strips of two vectors (64 B of each row on AVX2; on 64 KB V tiles the P·V
 * loop stalls on L2). */
#ifndef ATT_VTILE_BYTES
#define ATT_VTILE_BYTES 16384
#endif
#ifndef ATT_PV_NV
#define ATT_PV_NV 2
#endif
#ifndef ATT_KV_TILE_BYTES
#define ATT_KV_TILE_BYTES 16384
#endif
enum { TILE_BYTES = 65536, VTILE_BYTES = ATT_VTILE_BYTES, PV_NV = ATT_PV_NV, KV_TILE_BYTES = ATT_KV_TILE_BYTES };
/* Software prefetch spread over the loops, a line per line read: the key rows ATT_K_PF_KEYS ahead
 * into L1 (scores), the V rows one tile ahead into L2 (P·V, whose strips walk a tile column by
 * column, which the hardware prefetchers do not run ahead of). Without it a decode step (one query
 * row per KV head, so little arithmetic per byte of K and V) waits on memory; with it K and V
 * stream close to a plain read. Spreading the prefetches matters: a burst of them per tile
 * fills the line fill buffers and stalls the loads that follow. */
#ifndef ATT_K_PF_KEYS
#define ATT_K_PF_KEYS 8
#endif

/* [sum a, sum b, sum c, sum d] */
static inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
    __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

/* s[i][j] = the lane sum of acc[i][j]: the 4 x ATT_NK scores' one reduction order */
static inline __attribute__((always_inline)) void store_scores_4xn(ATT_VEC acc[4][ATT_NK], float s[4][ATT_NK]) {
    for (int j = 0; j < ATT_NK; j++) {
        float v[4];
        _mm_storeu_ps(v, hsum4(ATT_TO8(acc[0][j]), ATT_TO8(acc[1][j]), ATT_TO8(acc[2][j]), ATT_TO8(acc[3][j])));
        for (int i = 0; i < 4; i++) s[i][j] = v[i];
    }
}

/* s[i][j] = q_i · k_j for 4 query rows x ATT_NK keys over D (a multiple of ATT_VW) columns.
 * Each loaded key vector feeds 4 FMAs, each query vector ATT_NK. */
static inline void scores_4xn(const float *const q[4], const float *const k[ATT_NK], int D, float s[4][ATT_NK]) {
    ATT_VEC acc[4][ATT_NK];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < ATT_NK; j++) acc[i][j] = ATT_ZERO();
    for (int d = 0; d < D; d += ATT_VW) {
        ATT_VEC kv[ATT_NK];
        for (int j = 0; j < ATT_NK; j++) _mm_prefetch((const char *)(k[j] + d + (size_t)ATT_K_PF_KEYS * D), _MM_HINT_T0);
        for (int j = 0; j < ATT_NK; j++) kv[j] = ATT_LOAD(k[j] + d);
        for (int i = 0; i < 4; i++) {
            const ATT_VEC qv = ATT_LOAD(q[i] + d);
            for (int j = 0; j < ATT_NK; j++) acc[i][j] = ATT_FMA(qv, kv[j], acc[i][j]);
        }
    }
    store_scores_4xn(acc, s);
}

/* o_i[c..c+NV*W) += sum_t p_i[t] V[t][c..c+NV*W) for 4 rows over nt consecutive keys (W = ATT_VW,
 * NV = PV_NV vectors). p: 4 rows of probabilities (indexed from the first key), V: the first key's
 * row + c. */
static inline void pv_4xnv(const float *const p[4], const float *V, int D, int nt, float *const o[4], int c) {
    ATT_VEC acc[4][PV_NV];
    for (int i = 0; i < 4; i++)
        for (int v = 0; v < PV_NV; v++) acc[i][v] = ATT_LOAD(o[i] + c + v * ATT_VW);
    for (int t = 0; t < nt; t++) {
        const float *vr = V + (size_t)t * D;
        for (int v = 0; v < PV_NV; v += 64 / (int)(ATT_VW * sizeof(float)))
            _mm_prefetch((const char *)(vr + v * ATT_VW + (size_t)VTILE_BYTES / sizeof(float)), _MM_HINT_T1);
        ATT_VEC vv[PV_NV];
        for (int v = 0; v < PV_NV; v++) vv[v] = ATT_LOAD(vr + v * ATT_VW);
        for (int i = 0; i < 4; i++) {
            const ATT_VEC pb = ATT_BCAST(p[i] + t);
            for (int v = 0; v < PV_NV; v++) acc[i][v] = ATT_FMA(pb, vv[v], acc[i][v]);
        }
    }
    for (int i = 0; i < 4; i++)
        for (int v = 0; v < PV_NV; v++) ATT_STORE(o[i] + c + v * ATT_VW, acc[i][v]);
}

/* Rows are numbered i = p*G + h; row i's vector is at base + off[i]. A quad's slots past the
 * last row repeat that row: their results are computed and dropped (scores) or stored twice
 * with the same value (P·V loads all of a quad's outputs before it stores any), which keeps a
 * single microkernel shape. Returns the number of real rows. */
static inline int quad_offsets(int i0, int n, int G, int ld, int D, size_t off[4]) {
    const int nr = n - i0 < 4 ? n - i0 : 4;
    for (int i = 0; i < 4; i++) {
        const int ii = i0 + (i < nr ? i : nr - 1);
        off[i] = (size_t)(ii / G) * ld + (size_t)(ii % G) * D;
    }
    return nr;
}

/* The union of the quad's rows' key ranges, clipped to the tile [t0, t1]. */
static inline void quad_range(int i0, int nr, int G, const int *lo, const int *hi, int t0, int t1, int *a, int *b) {
    int x = lo[i0 / G], y = hi[i0 / G];
    for (int i = 1; i < nr; i++) {
        const int p = (i0 + i) / G;
        if (lo[p] < x) x = lo[p];
        if (hi[p] > y) y = hi[p];
    }
    *a = x > t0 ? x : t0;
    *b = y < t1 ? y : t1;
}

/* The next tile from t0: at most kt keys, not past H, and not across a ring wrap (so its keys
 * are consecutive rows of the cache). Returns its last key. */
static inline int tile_end(int t0, int kt, int H, int cap) {
    int t1 = t0 + kt - 1;
    if (t1 > H) t1 = H;
    const int wrap = (t0 / cap + 1) * cap - 1;
    return t1 < wrap ? t1 : wrap;
}

/* s[i] = e^(s[i] - mx) / sum_j e^(s[j] - mx) over [n]: g4_exp_ps (about 1 ulp from expf; an
 * argument below -87.3 gives e^-87.3 where expf gives 0 or a denormal — under the row's own
 * maximum, which contributes 1 to the sum, that is below float resolution), sums in 8 lanes, a
 * true division as the reference does. Vectorized because a scalar expf per score is a
 * noticeable share of a long prefill. */
static void softmax_tail(float *s, int n, float mx) {
    const __m256 m = _mm256_set1_ps(mx);
    __m256 acc = _mm256_setzero_ps();
    int t = 0;
    for (; t + 8 <= n; t += 8) {
        const __m256 e = g4_exp_ps(_mm256_sub_ps(_mm256_loadu_ps(s + t), m));
        _mm256_storeu_ps(s + t, e);
        acc = _mm256_add_ps(acc, e);
    }
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
    float sum = _mm_cvtss_f32(h);
    for (; t < n; t++) { s[t] = expf(s[t] - mx); sum += s[t]; }
    const __m256 sv = _mm256_set1_ps(sum);
    t = 0;
    for (; t + 8 <= n; t += 8) _mm256_storeu_ps(s + t, _mm256_div_ps(_mm256_loadu_ps(s + t), sv));
    for (; t < n; t++) s[t] = s[t] / sum;
}

/* dst [n] = the n values at src (whole cache rows, consecutive) widened to float32; n a multiple
 * of ATT_VW (and of 32 for q8_0) */
static inline void widen_rows(int kvt, const void *src, int n, float *dst) {
    if (kvt == G4_KV_BF16) {
        const uint16_t *s = src;
        for (int i = 0; i < n; i += ATT_VW) ATT_STORE(dst + i, ATT_WIDEN_BF16(s + i));
    } else if (kvt == G4_KV_F16) {
        const uint16_t *s = src;
        for (int i = 0; i < n; i += ATT_VW) ATT_STORE(dst + i, ATT_WIDEN_F16(s + i));
    } else {   /* G4_KV_Q8_0: x = d * q, d widened from f16 (ggml's dequantize_row_q8_0) */
        const g4_kv_q8_block *b = src;
        for (int k = 0; k < n / G4_KV_QK; k++, dst += G4_KV_QK) {
            const ATT_VEC d = ATT_SET1(_cvtsh_ss(b[k].d));
            for (int j = 0; j < G4_KV_QK; j += ATT_VW) ATT_STORE(dst + j, ATT_MUL(ATT_WIDEN_I8(b[k].qs + j), d));
        }
    }
}

/* Rows [t0, t1] of a head's cache (no ring wrap in between) as float32: in place for f32,
 * else widened into buf. */
static inline const float *cache_rows(int kvt, const void *C, size_t rb, int t0, int t1, int cap, int D, float *buf) {
    const void *src = (const char *)C + (size_t)(t0 % cap) * rb;
    if (kvt == G4_KV_F32) return src;
    widen_rows(kvt, src, (t1 - t0 + 1) * D, buf);
    return buf;
}

/* ---- the narrow cache read in place (few query rows: a decode step)
 * A tile widened to scratch costs a convert, a store and a reload per value, once per block; with
 * one quad of rows that is as much work as the FMAs the value feeds, so a decode step is no
 * faster than over f32 while it streams half the bytes. With few rows the microkernels below
 * widen each vector in registers as they load it instead (same values, same FMAs in the same
 * order: the results are bit-identical to the widened tiles'). */

/* q8_0: the scale of the block holding column d, in every lane (other types: unused) */
static inline __attribute__((always_inline)) ATT_VEC kv_scale(int kvt, const unsigned char *row, int d) {
    if (kvt != G4_KV_Q8_0) return ATT_ZERO();
    return ATT_SET1(_cvtsh_ss(((const g4_kv_q8_block *)row)[d / G4_KV_QK].d));
}

/* ATT_VW values of a cache row from column d, widened to float32 (q8_0: times sc, kv_scale's) */
static inline __attribute__((always_inline)) ATT_VEC kv_load(int kvt, const unsigned char *row, int d, ATT_VEC sc) {
    if (kvt == G4_KV_BF16) return ATT_WIDEN_BF16((const uint16_t *)row + d);
    if (kvt == G4_KV_F16) return ATT_WIDEN_F16((const uint16_t *)row + d);
    const g4_kv_q8_block *b = (const g4_kv_q8_block *)row + d / G4_KV_QK;
    return ATT_MUL(ATT_WIDEN_I8(b->qs + d % G4_KV_QK), sc);
}

/* byte offset of column d in a cache row */
static inline __attribute__((always_inline)) size_t kv_col(int kvt, int d) {
    return kvt == G4_KV_Q8_0 ? (size_t)(d / G4_KV_QK) * sizeof(g4_kv_q8_block) + 2 + d % G4_KV_QK : (size_t)d * 2;
}

/* scores_4xn over narrow key rows k[j]; prefetches pf bytes ahead (the f32 path's distance) */
static inline __attribute__((always_inline)) void scores_4xn_kv(int kvt, const float *const q[4],
                                                                const unsigned char *const k[ATT_NK], int D,
                                                                size_t pf, float s[4][ATT_NK]) {
    ATT_VEC acc[4][ATT_NK];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < ATT_NK; j++) acc[i][j] = ATT_ZERO();
    /* q8_0 steps a block at a time, so each key's scale is widened once per block */
    const int step = kvt == G4_KV_Q8_0 && G4_KV_QK > ATT_VW ? G4_KV_QK : ATT_VW;
    for (int d0 = 0; d0 < D; d0 += step) {
        ATT_VEC sc[ATT_NK];
        for (int j = 0; j < ATT_NK; j++) sc[j] = kv_scale(kvt, k[j], d0);
        for (int d = d0; d < d0 + step; d += ATT_VW) {
            ATT_VEC kv[ATT_NK];
            const size_t col = kv_col(kvt, d) + pf;
            for (int j = 0; j < ATT_NK; j++) _mm_prefetch((const char *)(k[j] + col), _MM_HINT_T0);
            for (int j = 0; j < ATT_NK; j++) kv[j] = kv_load(kvt, k[j], d, sc[j]);
            for (int i = 0; i < 4; i++) {
                const ATT_VEC qv = ATT_LOAD(q[i] + d);
                for (int j = 0; j < ATT_NK; j++) acc[i][j] = ATT_FMA(qv, kv[j], acc[i][j]);
            }
        }
    }
    store_scores_4xn(acc, s);
}

/* pv_4xnv over nt narrow V rows from vr (rb bytes apart), columns c..; prefetches the strip's
 * lines pf bytes ahead (the next tile) into L2 */
static inline __attribute__((always_inline)) void pv_4xnv_kv(int kvt, const float *const p[4], const unsigned char *vr,
                                                             size_t rb, int nt, float *const o[4], int c, size_t pf) {
    ATT_VEC acc[4][PV_NV];
    for (int i = 0; i < 4; i++)
        for (int v = 0; v < PV_NV; v++) acc[i][v] = ATT_LOAD(o[i] + c + v * ATT_VW);
    const size_t c0 = kv_col(kvt, c), c1 = kv_col(kvt, c + PV_NV * ATT_VW - 1);
    for (int t = 0; t < nt; t++, vr += rb) {
        for (size_t b = c0; b < c1; b += 64) _mm_prefetch((const char *)(vr + b + pf), _MM_HINT_T1);
        _mm_prefetch((const char *)(vr + c1 + pf), _MM_HINT_T1);
        ATT_VEC vv[PV_NV], sc = ATT_ZERO();
        for (int v = 0; v < PV_NV; v++) {
            const int col = c + v * ATT_VW;
            if (v == 0 || col % G4_KV_QK == 0) sc = kv_scale(kvt, vr, col);
            vv[v] = kv_load(kvt, vr, col, sc);
        }
        for (int i = 0; i < 4; i++) {
            const ATT_VEC pb = ATT_BCAST(p[i] + t);
            for (int v = 0; v < PV_NV; v++) acc[i][v] = ATT_FMA(pb, vv[v], acc[i][v]);
        }
    }
    for (int i = 0; i < 4; i++)
        for (int v = 0; v < PV_NV; v++) ATT_STORE(o[i] + c + v * ATT_VW, acc[i][v]);
}

/* Steps 1 and 3 of attend_block_impl for a narrow cache read in place; step 2 (softmax) is the
 * caller's. kvt a constant after inlining, so each type gets its own loops. */
static inline __attribute__((always_inline)) void scores_kv_inplace(int kvt, const float *q, int ldq, int n, int G,
                                                                    const int *lo, const int *hi, int L, int H,
                                                                    const unsigned char *K, size_t rb, int cap, int D,
                                                                    float scale, float *scores, int span) {
    const size_t pf = (size_t)ATT_K_PF_KEYS * D * sizeof(float);
    const int KT = TILE_BYTES / (int)rb > ATT_NK ? TILE_BYTES / (int)rb : ATT_NK;
    for (int t0 = L; t0 <= H;) {
        const int t1 = tile_end(t0, KT, H, cap);
        const unsigned char *Kt = K + (size_t)(t0 % cap) * rb;   /* key t at Kt + (t - t0) * rb */
        for (int i0 = 0; i0 < n; i0 += 4) {
            size_t off[4];
            const int nr = quad_offsets(i0, n, G, ldq, D, off);
            const float *qr[4] = {q + off[0], q + off[1], q + off[2], q + off[3]};
            int a, b;
            quad_range(i0, nr, G, lo, hi, t0, t1, &a, &b);
            for (int t = a; t <= b; t += ATT_NK) {
                const int nk = b - t + 1 < ATT_NK ? b - t + 1 : ATT_NK;
                const unsigned char *kr[ATT_NK];
                for (int j = 0; j < ATT_NK; j++) kr[j] = Kt + (size_t)(t - t0 + (j < nk ? j : nk - 1)) * rb;
                float s[4][ATT_NK];
                scores_4xn_kv(kvt, qr, kr, D, pf, s);
                for (int i = 0; i < nr; i++)
                    for (int j = 0; j < nk; j++) scores[(size_t)(i0 + i) * span + t + j - L] = s[i][j] * scale;
            }
        }
        t0 = t1 + 1;
    }
}

static inline __attribute__((always_inline)) void pv_kv_inplace(int kvt, float *out, int ldo, int n, int G,
                                                                const int *lo, const int *hi, int L, int H,
                                                                const unsigned char *V, size_t rb, int cap, int D,
                                                                const float *scores, int span) {
    /* V rows per tile: VTILE_BYTES of the narrow rows stay in L1 while the strips walk them */
    const int KTV = VTILE_BYTES / (int)rb > 1 ? VTILE_BYTES / (int)rb : 1;
    const size_t pf = (size_t)KTV * rb;
    for (int t0 = L; t0 <= H;) {
        const int t1 = tile_end(t0, KTV, H, cap);
        const unsigned char *Vt = V + (size_t)(t0 % cap) * rb;
        for (int i0 = 0; i0 < n; i0 += 4) {
            size_t off[4];
            const int nr = quad_offsets(i0, n, G, ldo, D, off);
            float *const orow[4] = {out + off[0], out + off[1], out + off[2], out + off[3]};
            int a, b;
            quad_range(i0, nr, G, lo, hi, t0, t1, &a, &b);
            if (a > b) continue;
            const float *pr[4];
            for (int i = 0; i < 4; i++) pr[i] = scores + (size_t)(i0 + (i < nr ? i : nr - 1)) * span + a - L;
            for (int c = 0; c < D; c += PV_NV * ATT_VW)
                pv_4xnv_kv(kvt, pr, Vt + (size_t)(a - t0) * rb, rb, b - a + 1, orow, c, pf);
        }
        t0 = t1 + 1;
    }
}

/* At most this many query rows read a narrow cache in place (one quad: a decode step of a head
 * group of up to 4); more rows share one widened tile. */
#ifndef ATT_KV_INPLACE_ROWS
#define ATT_KV_INPLACE_ROWS 4
#endif

static void scores_kv(int kvt, const float *q, int ldq, int n, int G, const int *lo, const int *hi, int L, int H,
                      const unsigned char *K, size_t rb, int cap, int D, float scale, float *scores, int span) {
    if (kvt == G4_KV_BF16) scores_kv_inplace(G4_KV_BF16, q, ldq, n, G, lo, hi, L, H, K, rb, cap, D, scale, scores, span);
    else if (kvt == G4_KV_F16) scores_kv_inplace(G4_KV_F16, q, ldq, n, G, lo, hi, L, H, K, rb, cap, D, scale, scores, span);
    else scores_kv_inplace(G4_KV_Q8_0, q, ldq, n, G, lo, hi, L, H, K, rb, cap, D, scale, scores, span);
}

static void pv_kv(int kvt, float *out, int ldo, int n, int G, const int *lo, const int *hi, int L, int H,
                  const unsigned char *V, size_t rb, int cap, int D, const float *scores, int span) {
    if (kvt == G4_KV_BF16) pv_kv_inplace(G4_KV_BF16, out, ldo, n, G, lo, hi, L, H, V, rb, cap, D, scores, span);
    else if (kvt == G4_KV_F16) pv_kv_inplace(G4_KV_F16, out, ldo, n, G, lo, hi, L, H, V, rb, cap, D, scores, span);
    else pv_kv_inplace(G4_KV_Q8_0, out, ldo, n, G, lo, hi, L, H, V, rb, cap, D, scores, span);
}

static void attend_block_impl(int kvt, const float *q, int ldq, float *out, int ldo, int G, int P, const int *lo,
                              const int *hi, const void *K, const void *V, int cap, int D, float scale,
                              float *scores, float *kbuf, float *vbuf) {
    const size_t rb = g4_kv_row_bytes(kvt, D);
    const int n = G * P;
    int L = lo[0], H = hi[0];
    for (int p = 1; p < P; p++) {
        if (lo[p] < L) L = lo[p];
        if (hi[p] > H) H = hi[p];
    }
    /* a widened K tile is written and read back at once: small enough to stay in L1 */
    const int tb = kvt == G4_KV_F32 ? TILE_BYTES : KV_TILE_BYTES;
    const int span = H - L + 1, kt = tb / (int)(D * sizeof(float)), KT = kt > ATT_NK ? kt : ATT_NK;
    const int ktv = VTILE_BYTES / (int)(D * sizeof(float)), KTV = ktv > 1 ? ktv : 1;
    /* scores: [n][span], row i's key t at scores[i * span + t - L] */

    const int inplace = kvt != G4_KV_F32 && n <= ATT_KV_INPLACE_ROWS;

    /* 1. scores over the union range, tile by tile; a quad only visits keys some row of it sees */
    if (inplace) scores_kv(kvt, q, ldq, n, G, lo, hi, L, H, K, rb, cap, D, scale, scores, span);
    for (int t0 = L; !inplace && t0 <= H;) {
        const int t1 = tile_end(t0, KT, H, cap);
        const float *Kt = cache_rows(kvt, K, rb, t0, t1, cap, D, kbuf);   /* key t at Kt + (t - t0) * D */
        for (int i0 = 0; i0 < n; i0 += 4) {
            size_t off[4];
            const int nr = quad_offsets(i0, n, G, ldq, D, off);
            const float *qr[4] = {q + off[0], q + off[1], q + off[2], q + off[3]};
            int a, b;
            quad_range(i0, nr, G, lo, hi, t0, t1, &a, &b);
            for (int t = a; t <= b; t += ATT_NK) {
                const int nk = b - t + 1 < ATT_NK ? b - t + 1 : ATT_NK;
                const float *kr[ATT_NK];
                for (int j = 0; j < ATT_NK; j++) kr[j] = Kt + (size_t)(t - t0 + (j < nk ? j : nk - 1)) * D;
                float s[4][ATT_NK];
                scores_4xn(qr, kr, D, s);
                for (int i = 0; i < nr; i++)
                    for (int j = 0; j < nk; j++) scores[(size_t)(i0 + i) * span + t + j - L] = s[i][j] * scale;
            }
        }
        t0 = t1 + 1;
    }

    /* 2. softmax per row over its own [lo, hi] in float32, max subtracted as torch does; the
     * rest of the union range gets probability 0 (the mask) so step 3 can run over it. */
    for (int i = 0; i < n; i++) {
        float *s = scores + (size_t)i * span;
        const int a = lo[i / G] - L, b = hi[i / G] - L;
        float mx = -INFINITY;
        for (int t = a; t <= b; t++) mx = s[t] > mx ? s[t] : mx;
        softmax_tail(s + a, b - a + 1, mx);
        memset(s, 0, (size_t)a * sizeof(float));
        memset(s + b + 1, 0, (size_t)(span - 1 - b) * sizeof(float));
    }

    /* 3. out = P·V, tile by tile, accumulating in out */
    for (int i = 0; i < n; i++) memset(out + (size_t)(i / G) * ldo + (size_t)(i % G) * D, 0, (size_t)D * sizeof(float));
    if (inplace) pv_kv(kvt, out, ldo, n, G, lo, hi, L, H, V, rb, cap, D, scores, span);
    for (int t0 = L; !inplace && t0 <= H;) {
        const int t1 = tile_end(t0, KTV, H, cap);
        const float *Vt = cache_rows(kvt, V, rb, t0, t1, cap, D, vbuf);
        for (int i0 = 0; i0 < n; i0 += 4) {
            size_t off[4];
            const int nr = quad_offsets(i0, n, G, ldo, D, off);
            float *const orow[4] = {out + off[0], out + off[1], out + off[2], out + off[3]};
            int a, b;
            quad_range(i0, nr, G, lo, hi, t0, t1, &a, &b);
            if (a > b) continue;
            const float *pr[4];
            for (int i = 0; i < 4; i++) pr[i] = scores + (size_t)(i0 + (i < nr ? i : nr - 1)) * span + a - L;
            for (int c = 0; c < D; c += PV_NV * ATT_VW) pv_4xnv(pr, Vt + (size_t)(a - t0) * D + c, D, b - a + 1, orow, c);
        }
        t0 = t1 + 1;
    }
}
