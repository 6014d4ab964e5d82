/* attn_avx2.c — attention for a block of query rows sharing one KV head (AVX2 + FMA): scores
 * = Q·Kᵀ by a 4-row x 3-key FMA microkernel, a float32 max-subtracted softmax per row over its
 * own [lo, hi], then out = P·V by a 4-row x 16-column microkernel. K and V are streamed once per
 * block in tiles that stay in L2, instead of once per (row, head) as attend does. Owns no memory. */
#pragma GCC target("avx2,fma,f16c")
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/attn.h"
#include "kernels/cpu/vmath_avx2.h"

/* Keys per tile: 64 KB of K rows, reused by every row quad of the block from L2 (each quad reads
 * whole key rows, which the prefetchers follow); 16 KB of V rows, which stay in L1 while every
 * quad walks them in 16-column strips (a 64 B piece of each row: on 64 KB tiles the P·V loop
 * stalled on L2; Zen3, 256-dim heads, ~8% faster). */
enum { TILE_BYTES = 65536, VTILE_BYTES = 16384 };

/* [sum a, sum b, sum c, sum d] */
static inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
    __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

/* s[i][j] = q_i · k_j for 4 query rows x 3 keys over D (a multiple of 8) columns.
 * Accumulators: 12 of 8 lanes; each loaded key vector feeds 4 FMAs, each query vector 3. */
static inline void scores_4x3(const float *const q[4], const float *const k[3], int D, float s[4][3]) {
    __m256 acc[4][3];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) acc[i][j] = _mm256_setzero_ps();
    for (int d = 0; d < D; d += 8) {
        const __m256 k0 = _mm256_loadu_ps(k[0] + d), k1 = _mm256_loadu_ps(k[1] + d), k2 = _mm256_loadu_ps(k[2] + d);
        for (int i = 0; i < 4; i++) {
            const __m256 qv = _mm256_loadu_ps(q[i] + d);
            acc[i][0] = _mm256_fmadd_ps(qv, k0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(qv, k1, acc[i][1]);
            acc[i][2] = _mm256_fmadd_ps(qv, k2, acc[i][2]);
        }
    }
    for (int j = 0; j < 3; j++) {
        float v[4];
        _mm_storeu_ps(v, hsum4(acc[0][j], acc[1][j], acc[2][j], acc[3][j]));
        for (int i = 0; i < 4; i++) s[i][j] = v[i];
    }
}

/* o_i[c..c+16) += sum_t p_i[t] V[t][c..c+16) for 4 rows over nt consecutive keys.
 * p: 4 rows of probabilities (indexed from the first key), V: the first key's row + c. */
static inline void pv_4x16(const float *const p[4], const float *V, int D, int nt, float *const o[4], int c) {
    __m256 acc[4][2];
    for (int i = 0; i < 4; i++) {
        acc[i][0] = _mm256_loadu_ps(o[i] + c);
        acc[i][1] = _mm256_loadu_ps(o[i] + c + 8);
    }
    for (int t = 0; t < nt; t++) {
        const float *vr = V + (size_t)t * D;
        const __m256 v0 = _mm256_loadu_ps(vr), v1 = _mm256_loadu_ps(vr + 8);
        for (int i = 0; i < 4; i++) {
            const __m256 pb = _mm256_broadcast_ss(p[i] + t);
            acc[i][0] = _mm256_fmadd_ps(pb, v0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(pb, v1, acc[i][1]);
        }
    }
    for (int i = 0; i < 4; i++) {
        _mm256_storeu_ps(o[i] + c, acc[i][0]);
        _mm256_storeu_ps(o[i] + c + 8, acc[i][1]);
    }
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
 * true division as the reference does. Scalar expf was ~3% of a 512-token prefill. */
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

void g4_attend_block_avx2(const float *q, int ldq, float *out, int ldo, int G, int P, const int *lo,
                          const int *hi, const float *K, const float *V, int cap, int D, float scale,
                          float *scores) {
    if (D % 16) {   /* the head sizes Gemma uses are multiples of 16; anything else row by row */
        const g4_kernels *k = g4_kernels_avx2();
        for (int p = 0; p < P; p++)
            for (int h = 0; h < G; h++)
                k->attend(q + (size_t)p * ldq + (size_t)h * D, K, V, cap, lo[p], hi[p], D, scale, scores,
                          out + (size_t)p * ldo + (size_t)h * D);
        return;
    }
    const int n = G * P;
    int L = lo[0], H = hi[0];
    for (int p = 1; p < P; p++) {
        if (lo[p] < L) L = lo[p];
        if (hi[p] > H) H = hi[p];
    }
    const int span = H - L + 1, kt = TILE_BYTES / (int)(D * sizeof(float)), KT = kt > 3 ? kt : 3;
    const int ktv = VTILE_BYTES / (int)(D * sizeof(float)), KTV = ktv > 1 ? ktv : 1;
    /* scores: [n][span], row i's key t at scores[i * span + t - L] */

    /* 1. scores over the union range, tile by tile; a quad only visits keys some row of it sees */
    for (int t0 = L; t0 <= H;) {
        const int t1 = tile_end(t0, KT, H, cap);
        const float *Kt = K + (size_t)(t0 % cap) * D;   /* key t at Kt + (t - t0) * D */
        for (int i0 = 0; i0 < n; i0 += 4) {
            size_t off[4];
            const int nr = quad_offsets(i0, n, G, ldq, D, off);
            const float *qr[4] = {q + off[0], q + off[1], q + off[2], q + off[3]};
            int a, b;
            quad_range(i0, nr, G, lo, hi, t0, t1, &a, &b);
            for (int t = a; t <= b; t += 3) {
                const int nk = b - t + 1 < 3 ? b - t + 1 : 3;
                const float *kr[3];
                for (int j = 0; j < 3; j++) kr[j] = Kt + (size_t)(t - t0 + (j < nk ? j : nk - 1)) * D;
                float s[4][3];
                scores_4x3(qr, kr, D, s);
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
    for (int t0 = L; t0 <= H;) {
        const int t1 = tile_end(t0, KTV, H, cap);
        const float *Vt = V + (size_t)(t0 % cap) * D;
        for (int i0 = 0; i0 < n; i0 += 4) {
            size_t off[4];
            const int nr = quad_offsets(i0, n, G, ldo, D, off);
            float *const orow[4] = {out + off[0], out + off[1], out + off[2], out + off[3]};
            int a, b;
            quad_range(i0, nr, G, lo, hi, t0, t1, &a, &b);
            if (a > b) continue;
            const float *pr[4];
            for (int i = 0; i < 4; i++) pr[i] = scores + (size_t)(i0 + (i < nr ? i : nr - 1)) * span + a - L;
            for (int c = 0; c < D; c += 16) pv_4x16(pr, Vt + (size_t)(a - t0) * D + c, D, b - a + 1, orow, c);
        }
        t0 = t1 + 1;
    }
}
