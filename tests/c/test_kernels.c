/* test_kernels.c — every kernel of every available path against the scalar reference in
 * cpu/ref.c, and the reference itself against hand-computed values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4c.h"
#include "kernels/kernels.h"

/* the AVX2 kernels' vector e^x (static inline in its header), compiled here for avx2+fma and
 * called only where the CPU has them */
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#include "kernels/cpu/vmath_avx2.h"
static void exp8_avx2(const float *x, float *y) { _mm256_storeu_ps(y, g4_exp_ps(_mm256_loadu_ps(x))); }
#pragma GCC pop_options

static float frand(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return ((*s >> 8) / 16777216.0f) * 2.0f - 1.0f;
}

static const g4_kernels *paths[3];
static int n_paths;

static int setup(void **state) {
    (void)state;
    n_paths = 0;
    paths[n_paths++] = g4_kernels_scalar();
    if (g4_kernels_avx2()) paths[n_paths++] = g4_kernels_avx2();
    if (g4_kernels_avx512()) paths[n_paths++] = g4_kernels_avx512();   /* the bf16 paths: test_bf16_matmul */
    return 0;
}

static void test_conversions(void **state) {
    (void)state;
    assert_true(g4_bf16_to_f32(0x3f80) == 1.0f);
    assert_true(g4_bf16_to_f32(0xc000) == -2.0f);
    assert_true(g4_f16_to_f32(0x3c00) == 1.0f);
    assert_true(g4_f16_to_f32(0x0001) == ldexpf(1.0f, -24));   /* smallest subnormal */
    assert_true(isinf(g4_f16_to_f32(0x7c00)));
    assert_int_equal(g4_f32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(g4_f32_to_bf16(1.00390625f), 0x3f80);     /* tie rounds to even */
    assert_int_equal(g4_f32_to_bf16(1.01171875f), 0x3f82);     /* tie rounds to even (up) */
    /* the row versions agree with it bit for bit: ties, carries into the exponent, the largest
     * finite values rounding to Inf, Inf, NaNs (quietened), subnormals, signed zeros, random bits */
    enum { N = 4096 };
    static const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x3fffffffu, 0x7f7fffffu, 0xff7f8000u, 0x7f800000u,
                                       0xff800000u, 0x7f800001u, 0x7fc00000u, 0xffbfffffu, 0x00000001u, 0x807fffffu,
                                       0x00000000u, 0x80000000u, 0x0001ffffu, 0x477fefffu};
    float x[N], back[N];
    uint16_t h[N];
    unsigned s = 7;
    for (int i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        const uint32_t u = i < (int)(sizeof special / sizeof *special) ? special[i] : s;
        memcpy(&x[i], &u, sizeof u);
    }
    g4_f32_to_bf16_row(x, N, h);
    g4_round_bf16_row(x, N, back);
    for (int i = 0; i < N; i++) {
        const uint16_t want = g4_f32_to_bf16(x[i]);
        const float wantf = g4_bf16_to_f32(want);
        assert_int_equal(h[i], want);
        assert_memory_equal(&back[i], &wantf, sizeof wantf);
    }
}

static void test_reference_matmul_by_hand(void **state) {
    (void)state;
    /* X [2][3], W [2][3] f32 → Y[t][n] = X[t]·W[n] */
    float x[6] = {1, 2, 3, 4, 5, 6}, w[6] = {1, 0, -1, 0.5f, 0.5f, 0.5f}, y[4];
    g4_kernels_scalar()->matmul[G4_DT_F32](x, 2, 3, w, 0, 2, y, 2);
    assert_true(y[0] == -2.0f && y[1] == 3.0f && y[2] == -2.0f && y[3] == 7.5f);
}

/* All shapes that exercise the 4x3 blocking remainders and the K tail. */
static void test_matmul_paths(void **state) {
    (void)state;
    /* 37 rows: two 16-row GEMM panels + tail; 70 rows: 35 per call, two panels each (the next
     * panel prefetched during the blocks); T 64: ten 6-row blocks + a 4-row tail, the bf16 pack's
     * even/odd order permuted back on every C load and store; K 520 and 1536: two and three K blocks; K 1536: the
     * T = 1 bf16 even/odd GEMV over 96 column blocks; T 300: two M blocks of 150 rows */
    const int Ts[] = {1, 2, 3, 4, 7, 13, 64, 300}, Ns[] = {1, 4, 5, 13, 37, 70}, Ks[] = {8, 19, 64, 520, 1536};
    unsigned s = 1;
    for (int dt = 0; dt < 3; dt++)
        for (size_t a = 0; a < sizeof Ts / sizeof *Ts; a++)
            for (size_t b = 0; b < sizeof Ns / sizeof *Ns; b++)
                for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
                    int T = Ts[a], N = Ns[b], K = Ks[c];
                    float *x = malloc(sizeof(float) * T * K), *y0 = calloc((size_t)T * N, 4), *y1 = calloc((size_t)T * N, 4);
                    void *w = malloc(4 * (size_t)N * K);
                    for (int i = 0; i < T * K; i++) x[i] = frand(&s);
                    for (int i = 0; i < N * K; i++) {
                        float v = frand(&s);
                        if (dt == G4_DT_F32) ((float *)w)[i] = v;
                        else if (dt == G4_DT_BF16) ((uint16_t *)w)[i] = g4_f32_to_bf16(v);
                        else ((uint16_t *)w)[i] = (uint16_t)(0x3800 + (s >> 20) % 0x800);  /* f16 in [0.5, 1) */
                    }
                    g4_kernels_scalar()->matmul[dt](x, T, K, w, 0, N, y0, N);
                    for (int p = 1; p < n_paths; p++) {
                        /* split the rows in two calls, as the thread pool does */
                        int mid = N / 2;
                        paths[p]->matmul[dt](x, T, K, w, 0, mid, y1, N);
                        paths[p]->matmul[dt](x, T, K, w, mid, N, y1, N);
                        /* float32 sums in another order: allow a few ulps of sum |x||w| */
                        for (int t = 0; t < T; t++)
                            for (int n = 0; n < N; n++) {
                                float mag = 0;
                                for (int kk = 0; kk < K; kk++) {
                                    float wv = dt == G4_DT_F32 ? ((float *)w)[(size_t)n * K + kk]
                                             : dt == G4_DT_BF16 ? g4_bf16_to_f32(((uint16_t *)w)[(size_t)n * K + kk])
                                             : g4_f16_to_f32(((uint16_t *)w)[(size_t)n * K + kk]);
                                    mag += fabsf(x[t * K + kk] * wv);
                                }
                                float d = fabsf(y0[t * N + n] - y1[t * N + n]);
                                if (d > 1e-6f * mag + 1e-30f)
                                    fail_msg("%s dt=%d T=%d N=%d K=%d at [%d][%d]: %g vs %g", paths[p]->name, dt, T, N, K, t, n, y0[t * N + n], y1[t * N + n]);
                            }
                    }
                    free(x); free(y0); free(y1); free(w);
                }
}

static void test_vector_ops(void **state) {
    (void)state;
    unsigned s = 7;
    for (int n = 1; n <= 70; n += 3) {
        float a[70], b[70], w[70], y0[70], y1[70], u[70];
        for (int i = 0; i < n; i++) a[i] = frand(&s) * 3, b[i] = frand(&s), w[i] = 1 + frand(&s) * 0.3f, u[i] = frand(&s);
        const g4_kernels *r = paths[0];
        for (int p = 1; p < n_paths; p++) {
            const g4_kernels *k = paths[p];
            assert_true(fabsf(r->dot(a, b, n) - k->dot(a, b, n)) < 1e-5f * n);
            memcpy(y0, b, sizeof b); memcpy(y1, b, sizeof b);
            r->axpy(0.37f, a, y0, n); k->axpy(0.37f, a, y1, n);
            for (int i = 0; i < n; i++) assert_true(fabsf(y0[i] - y1[i]) < 1e-6f);
            r->rmsnorm(a, w, 1e-6f, n, y0); k->rmsnorm(a, w, 1e-6f, n, y1);
            for (int i = 0; i < n; i++) assert_true(fabsf(y0[i] - y1[i]) < 1e-6f * (1 + fabsf(y0[i])));
            r->rmsnorm(a, NULL, 1e-6f, n, y0); k->rmsnorm(a, NULL, 1e-6f, n, y1);
            for (int i = 0; i < n; i++) assert_true(fabsf(y0[i] - y1[i]) < 1e-6f * (1 + fabsf(y0[i])));
            r->gelu_mul(a, u, n, y0); k->gelu_mul(a, u, n, y1);
            for (int i = 0; i < n; i++) assert_true(fabsf(y0[i] - y1[i]) < 1e-6f);
        }
    }
}

/* The vector GELU (x / (1 + e^-2z)) against libm's tanhf form over the whole useful range,
 * including the saturated tails where e^-2z under/overflows. The reference's 1 + tanh(z)
 * cancels for negative x (absolute error ~ ulp(1) |x| / 2), hence the absolute term. */
static void test_gelu_range(void **state) {
    (void)state;
    enum { N = 4001 };
    static float g[N], u[N], y0[N], y1[N];
    for (int i = 0; i < N; i++) g[i] = -20.0f + 0.01f * (float)i, u[i] = 1.0f - 0.0003f * (float)i;
    for (int p = 1; p < n_paths; p++) {
        paths[0]->gelu_mul(g, u, N, y0);
        paths[p]->gelu_mul(g, u, N, y1);
        for (int i = 0; i < N; i++)
            if (!(fabsf(y0[i] - y1[i]) <= 4e-7f * fabsf(y0[i]) + 1.5e-7f * fabsf(g[i] * u[i])))
                fail_msg("%s gelu(%g)*%g: %.9g vs %.9g", paths[p]->name, g[i], u[i], y0[i], y1[i]);
    }
}

/* Each vector attend is bit-identical to the generic one driven by its own dot/axpy, and close
 * to the scalar path: head sizes with a 64-column tail, key counts around the 4-key blocks, and
 * windows that wrap the ring. */
static void test_attend_vector(void **state) {
    (void)state;
    enum { CAP = 40, DMAX = 512 };
    static float K[CAP * DMAX], V[CAP * DMAX], q[DMAX], sc[80], o0[DMAX], o1[DMAX], o2[DMAX];
    unsigned s = 11;
    for (int i = 0; i < CAP * DMAX; i++) K[i] = frand(&s), V[i] = frand(&s);
    for (int i = 0; i < DMAX; i++) q[i] = frand(&s) * 0.2f;
    const int Ds[] = {16, 80, 256, 512}, spans[][2] = {{0, 0}, {0, 2}, {3, 9}, {5, 39}, {30, 69}};
    for (int p = 1; p < n_paths; p++)
        for (size_t a = 0; a < sizeof Ds / sizeof *Ds; a++)
            for (size_t b = 0; b < sizeof spans / sizeof *spans; b++) {
                const int D = Ds[a], lo = spans[b][0], hi = spans[b][1];
                paths[0]->attend(q, K, V, CAP, lo, hi, D, 0.7f, sc, o0);
                paths[p]->attend(q, K, V, CAP, lo, hi, D, 0.7f, sc, o1);
                g4_attend_generic(q, K, V, CAP, lo, hi, D, 0.7f, sc, o2, paths[p]->dot, paths[p]->axpy);
                for (int d = 0; d < D; d++) {
                    if (o1[d] != o2[d]) fail_msg("%s attend D=%d [%d,%d] col %d: %.9g vs generic %.9g", paths[p]->name, D, lo, hi, d, o1[d], o2[d]);
                    if (fabsf(o1[d] - o0[d]) > 1e-5f) fail_msg("%s attend D=%d [%d,%d] col %d: %g vs scalar %g", paths[p]->name, D, lo, hi, d, o1[d], o0[d]);
                }
            }
}

/* attend_block on every path against the scalar attend row by row: full (causal from 0) and
 * sliding masks, rings that wrap inside the block, 1..64 positions, several heads per KV head
 * (one row quad, partial quads, many quads), and head sizes that do not fill a 16-column strip
 * (which take the row-by-row fallback). Query and output rows have strides wider than G*D so a
 * write outside a row shows up as a changed guard value. */
static void test_attend_block(void **state) {
    (void)state;
    enum { CAP = 90, DMAX = 512, PMAX = 64, GMAX = 8, LD = GMAX * DMAX + 8 };
    static float K[CAP * DMAX], V[CAP * DMAX], q[PMAX * LD], o0[PMAX * LD], o1[PMAX * LD];
    static float sc[GMAX * PMAX * 512];
    unsigned s = 5;
    for (int i = 0; i < CAP * DMAX; i++) K[i] = frand(&s), V[i] = frand(&s);
    for (int i = 0; i < PMAX * LD; i++) q[i] = frand(&s) * 0.3f;
    /* {D, G, P, window (0: full), first position, cap} */
    const int cases[][6] = {
        {256, 2, 16, 24, 70, 24 + 16 - 1},   /* sliding ring wrapping mid-block */
        {256, 2, 1, 24, 100, 24},            /* one decode row on a wrapped ring */
        {512, 8, 4, 0, 0, CAP},              /* full causal from position 0 */
        {512, 8, 2, 0, 50, CAP},             /* full, later in the prompt */
        {256, 1, 64, 0, 0, 64},              /* 64 positions, one head */
        {256, 3, 5, 7, 33, 7 + 5 - 1},       /* partial quads, short window */
        {64, 5, 13, 20, 90, 20 + 13 - 1},    /* long ring wraps */
        {16, 2, 7, 5, 11, 5 + 7 - 1},
        {80, 2, 6, 9, 40, 9 + 6 - 1},        /* D % 16 != 0: the row-by-row fallback */
        {256, 4, 33, 0, 2, 40},
        {256, 2, 64, 16, 200, 16 + 64 - 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const int D = cases[c][0], G = cases[c][1], P = cases[c][2], W = cases[c][3], p0 = cases[c][4], cap = cases[c][5];
        int lo[PMAX], hi[PMAX];
        for (int p = 0; p < P; p++) {
            hi[p] = p0 + p;
            lo[p] = W && hi[p] - W + 1 > 0 ? hi[p] - W + 1 : 0;
            assert_true(hi[p] - lo[p] < cap);
        }
        for (int i = 0; i < PMAX * LD; i++) o0[i] = o1[i] = 12345.0f;
        for (int p = 0; p < P; p++)
            for (int h = 0; h < G; h++)
                paths[0]->attend(q + (size_t)p * LD + h * D, K, V, cap, lo[p], hi[p], D, 0.9f, sc,
                                 o0 + (size_t)p * LD + h * D);
        for (int pa = 0; pa < n_paths; pa++) {
            for (int i = 0; i < PMAX * LD; i++) o1[i] = 12345.0f;
            paths[pa]->attend_block(q, LD, o1, LD, G, P, lo, hi, K, V, cap, D, 0.9f, sc, 0);
            for (int i = 0; i < PMAX * LD; i++)
                if (fabsf(o1[i] - o0[i]) > 2e-5f)
                    fail_msg("%s attend_block case %zu (D=%d G=%d P=%d W=%d p0=%d cap=%d) at %d: %.9g vs attend %.9g",
                             paths[pa]->name, c, D, G, P, W, p0, cap, i, o1[i], o0[i]);
        }
    }
}

/* The KV cache types (--kv-type): a row stored then widened is within each type's rounding of
 * the float row (bf16 2^-8 relative, f16 2^-11, q8_0 half a step d/2 with d = amax/127 of its
 * block), f32 is stored as is; row sizes as ggml's. */
static void test_kv_rows(void **state) {
    (void)state;
    enum { D = 96 };
    float x[D], y[D];
    unsigned char row[D * 4];
    unsigned s = 11;
    for (int i = 0; i < D; i++) x[i] = frand(&s) * (i < 32 ? 0.01f : 40.0f);
    assert_int_equal(g4_kv_row_bytes(G4_KV_F32, D), D * 4);
    assert_int_equal(g4_kv_row_bytes(G4_KV_BF16, D), D * 2);
    assert_int_equal(g4_kv_row_bytes(G4_KV_F16, D), D * 2);
    assert_int_equal(g4_kv_row_bytes(G4_KV_Q8_0, D), 3 * 34);
    assert_int_equal(g4_kv_row_bytes(G4_KV_Q8_0, 48), 0);
    assert_int_equal(g4_kv_row_bytes(7, D), 0);
    for (int t = 0; t < G4_KV_TYPES; t++) {
        g4_kv_store_row(t, x, D, row);
        g4_kv_load_rows(t, row, D, y);
        for (int i = 0; i < D; i++) {
            float amax = 0;
            for (int j = i / 32 * 32; j < i / 32 * 32 + 32; j++) amax = fmaxf(amax, fabsf(x[j]));
            const float tol = t == G4_KV_F32 ? 0 : t == G4_KV_BF16 ? fabsf(x[i]) / 256 : t == G4_KV_F16 ? fabsf(x[i]) / 2048 + 6e-8f
                              : amax / 127 * 0.5f * 1.002f;
            if (fabsf(y[i] - x[i]) > tol) fail_msg("kv type %s element %d: %.9g -> %.9g", g4_kv_type_name(t), i, x[i], y[i]);
        }
    }
    /* q8_0 by hand: amax 127 gives d = 1 and the quants are the values rounded */
    float h[32];
    for (int j = 0; j < 32; j++) h[j] = j == 5 ? -127.0f : (float)j + 0.25f;
    g4_kv_store_row(G4_KV_Q8_0, h, 32, row);
    const g4_kv_q8_block *b = (const g4_kv_q8_block *)row;
    assert_int_equal(b->d, 0x3c00);   /* 1.0 in f16 */
    assert_int_equal(b->qs[5], -127);
    assert_int_equal(b->qs[9], 9);
}

/* attend_kv on every path (g4_kernels.attend_kv) against the scalar attend over the same cache
 * widened to float32 by g4_kv_load_rows: the typed kernels must add no error of their own
 * beyond attend_block's float rounding, on every type and the masks of test_attend_block. */
static void test_attend_kv(void **state) {
    (void)state;
    enum { CAP = 90, DMAX = 512, PMAX = 64, GMAX = 8, LD = GMAX * DMAX + 8 };
    static float K[CAP * DMAX], V[CAP * DMAX], Kw[CAP * DMAX], Vw[CAP * DMAX], q[PMAX * LD], o0[PMAX * LD], o1[PMAX * LD],
        o2[PMAX * LD];
    static unsigned char Kt[CAP * DMAX * 4], Vt[CAP * DMAX * 4];
    static float sc[GMAX * PMAX * 512];
    unsigned s = 9;
    for (int i = 0; i < CAP * DMAX; i++) K[i] = frand(&s), V[i] = frand(&s);
    for (int i = 0; i < PMAX * LD; i++) q[i] = frand(&s) * 0.3f;
    const int cases[][6] = {
        {256, 2, 16, 24, 70, 24 + 16 - 1}, {256, 4, 1, 24, 100, 24}, {512, 8, 4, 0, 0, CAP}, {512, 16, 1, 0, 80, CAP},
        {256, 3, 5, 7, 33, 7 + 5 - 1},     {64, 5, 13, 20, 90, 20 + 13 - 1}, {32, 2, 7, 5, 11, 5 + 7 - 1},
        {96, 2, 6, 9, 40, 9 + 6 - 1},      {16, 2, 3, 0, 4, CAP},           {256, 2, 64, 16, 200, 16 + 64 - 1},
        /* decode shapes (up to 4 rows: the cache read in place) */
        {256, 1, 1, 0, 85, CAP},           {256, 2, 1, 40, 77, 40},         {128, 3, 1, 0, 60, CAP},
        {512, 1, 2, 30, 50, 31},
    };
    for (int t = G4_KV_BF16; t < G4_KV_TYPES; t++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            const int D = cases[c][0], G = cases[c][1], P = cases[c][2], W = cases[c][3], p0 = cases[c][4], cap = cases[c][5];
            const size_t rb = g4_kv_row_bytes(t, D);
            if (!rb) continue;   /* q8_0 needs D % 32 == 0 */
            for (int r = 0; r < cap; r++) {
                g4_kv_store_row(t, K + (size_t)r * D, D, Kt + r * rb);
                g4_kv_store_row(t, V + (size_t)r * D, D, Vt + r * rb);
            }
            g4_kv_load_rows(t, Kt, cap * D, Kw);
            g4_kv_load_rows(t, Vt, cap * D, Vw);
            int lo[PMAX], hi[PMAX];
            for (int p = 0; p < P; p++) {
                hi[p] = p0 + p;
                lo[p] = W && hi[p] - W + 1 > 0 ? hi[p] - W + 1 : 0;
            }
            for (int i = 0; i < PMAX * LD; i++) o0[i] = 12345.0f;
            for (int p = 0; p < P; p++)
                for (int h = 0; h < G; h++)
                    paths[0]->attend(q + (size_t)p * LD + h * D, Kw, Vw, cap, lo[p], hi[p], D, 0.9f, sc,
                                     o0 + (size_t)p * LD + h * D);
            for (int pa = 0; pa < n_paths; pa++) {
                const g4_attend_kv_fn f = paths[pa]->attend_kv;
                assert_non_null(f);
                for (int i = 0; i < PMAX * LD; i++) o1[i] = 12345.0f;
                f(t, q, LD, o1, LD, G, P, lo, hi, Kt, Vt, cap, D, 0.9f, sc);
                for (int i = 0; i < PMAX * LD; i++)
                    if (fabsf(o1[i] - o0[i]) > 2e-5f)
                        fail_msg("%s attend_kv %s case %zu (D=%d G=%d P=%d) at %d: %.9g vs %.9g", paths[pa]->name,
                                 g4_kv_type_name(t), c, D, G, P, i, o1[i], o0[i]);
                /* and bit for bit the path's own attend_block over the widened cache: the narrow
                 * rows add no rounding beyond the widening (tiles widened or read in place) */
                for (int i = 0; i < PMAX * LD; i++) o2[i] = 12345.0f;
                paths[pa]->attend_block(q, LD, o2, LD, G, P, lo, hi, Kw, Vw, cap, D, 0.9f, sc, 0);
                if (memcmp(o1, o2, sizeof o1))
                    fail_msg("%s attend_kv %s case %zu (D=%d G=%d P=%d) differs from attend_block over the widened cache",
                             paths[pa]->name, g4_kv_type_name(t), c, D, G, P);
            }
        }
}

static void test_reference_ops_by_hand(void **state) {
    (void)state;
    const g4_kernels *r = g4_kernels_scalar();
    float x[2] = {3, 4}, w[2] = {2, 1}, y[2];
    r->rmsnorm(x, w, 0.0f, 2, y);   /* rms = sqrt(12.5) */
    assert_true(fabsf(y[0] - 6 / sqrtf(12.5f)) < 1e-6f && fabsf(y[1] - 4 / sqrtf(12.5f)) < 1e-6f);
    float g[3] = {0, 1, -1}, u[3] = {1, 2, 1}, o[3];
    r->gelu_mul(g, u, 3, o);
    assert_true(o[0] == 0.0f);
    assert_true(fabsf(o[1] - 2 * 0.8411920f) < 1e-6f);   /* gelu_tanh(1) = 0.841192 */
    assert_true(fabsf(o[2] + 0.1588080f) < 1e-6f);
}

/* distance in units in the last place between two finite floats of one sign */
static long ulps(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    return labs((long)ia - (long)ib);
}

/* g4_exp_ps (softmax in attend_block, GELU) against the correctly rounded e^x: within 2 ulp over
 * [-87.3, 88.7] (the softmax sees x - max <= 0; GELU the whole range), on a dense sweep plus the
 * ends; below -87.3 it returns e^-87.3 (clamped), a denormal-free stand-in for ~0. */
static void test_exp_ps(void **state) {
    (void)state;
    if (!g4_kernels_avx2()) skip();
    long worst = 0;
    float worst_x = 0;
    float x[8], y[8];
    for (int i = 0; i <= 2000000; i += 8) {
        for (int j = 0; j < 8; j++) x[j] = fminf(-87.3f + (88.7f + 87.3f) * (float)(i + j) / 2000000.0f, 88.7f);
        if (i + 8 > 2000000) { x[6] = -87.3f; x[7] = 88.7f; }
        exp8_avx2(x, y);
        for (int j = 0; j < 8; j++) {
            long u = ulps(y[j], (float)exp((double)x[j]));
            if (u > worst) { worst = u; worst_x = x[j]; }
        }
    }
    if (worst > 2) fail_msg("g4_exp_ps: %ld ulp at x = %.9g", worst, worst_x);
    for (int j = 0; j < 8; j++) x[j] = -1000.0f + j;   /* clamped: tiny, positive, finite */
    exp8_avx2(x, y);
    for (int j = 0; j < 8; j++) assert_true(y[j] > 0 && y[j] < 1e-37f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conversions),
        cmocka_unit_test(test_reference_matmul_by_hand),
        cmocka_unit_test(test_reference_ops_by_hand),
        cmocka_unit_test(test_matmul_paths),
        cmocka_unit_test(test_vector_ops),
        cmocka_unit_test(test_gelu_range),
        cmocka_unit_test(test_attend_vector),
        cmocka_unit_test(test_attend_block),
        cmocka_unit_test(test_kv_rows),
        cmocka_unit_test(test_attend_kv),
        cmocka_unit_test(test_exp_ps),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
