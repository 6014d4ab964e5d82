/* test_bf16_matmul.c — --prefill-bf16's bf16 matmuls (cpu/bf16_avx512.c, cpu/bf16_amx.c) against a
 * double-precision sum of the same bf16 products, on the padded bf16 input the forward pass builds
 * (rows to 32, columns to 32, zeros): T, K and [n0, n1) that are not whole blocks, K past the
 * 512-column panel (and the AMX kernel's 4096-deep K block) and odd, and y's columns outside
 * [n0, n1) left untouched.
 * Twice: the kernels' own source compiled here against a C emulation of the intrinsics
 * (emu_avx512_amx.h: the blocking, packing, masks and tile strides, on any CPU), and the library's
 * real kernels where this CPU has AVX512-BF16 / AMX-BF16 (skipped elsewhere). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"

#define G4_BF16_EMULATED
#include "emu_avx512_amx.h"
#define g4_matmul_xbf16_avx512 emu_matmul_xbf16_avx512
#define g4_matmul_xbf16_amx emu_matmul_xbf16_amx
#define g4_amx_peak_chain emu_amx_peak_chain
#define g4_matmul_x3bf16_amx emu_matmul_x3bf16_amx
#define g4_matmul_xbf16_amx_pairs emu_matmul_xbf16_amx_pairs
#define g4_matmul_x3bf16_amx_pairs emu_matmul_x3bf16_amx_pairs
#define g4_matmul_gemv3_amx emu_matmul_gemv3_amx
#include "../../src/kernels/cpu/bf16_avx512.c"
#include "../../src/kernels/cpu/bf16_amx.c"
#undef g4_matmul_xbf16_avx512
#undef g4_matmul_xbf16_amx
#undef g4_amx_peak_chain
#undef g4_matmul_x3bf16_amx
#undef g4_matmul_xbf16_amx_pairs
#undef g4_matmul_x3bf16_amx_pairs
#undef g4_matmul_gemv3_amx

static float frand(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return ((*s >> 8) / 16777216.0f) * 2.0f - 1.0f;
}

/* Element (t, k) of an AMX kernel's input in `layout` (kernels.h: tiles or pairs) */
static size_t layout_offset(g4_xbf16_layout layout, int t, int k, int Kp) {
    return layout == G4_XBF16_PAIRS ? g4_xbf16_pair_offset(t, k, Kp) : g4_xbf16_tile_offset(t, k, Kp);
}

/* The same input in an AMX kernel's layout; ldx = Kp */
static uint16_t *to_layout(const uint16_t *xb, int ld, int Tp, int Kp, g4_xbf16_layout layout) {
    uint16_t *xt = malloc((size_t)Tp * Kp * sizeof *xt);
    for (int t = 0; t < Tp; t++)
        for (int k = 0; k < Kp; k++) xt[layout_offset(layout, t, k, Kp)] = xb[(size_t)t * ld + k];
    return xt;
}

static void check(g4_matmul_xbf16_fn mm, g4_xbf16_layout layout, int T, int K, int N, int n0, int n1) {
    const int ld = (K + 31) / 32 * 32 + 32, Tp = (T + 31) / 32 * 32, ldy = N + 3;
    uint16_t *xb = calloc((size_t)Tp * ld, sizeof *xb), *w = malloc((size_t)N * K * sizeof *w);
    float *y = malloc((size_t)T * ldy * sizeof *y);
    unsigned seed = (unsigned)(T * 131 + K * 7 + N);
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++) xb[(size_t)t * ld + k] = g4_f32_to_bf16(frand(&seed) * 3.0f);
    for (size_t i = 0; i < (size_t)N * K; i++) w[i] = g4_f32_to_bf16(frand(&seed) * 0.5f);
    for (size_t i = 0; i < (size_t)T * ldy; i++) y[i] = -12345.0f;
    if (layout != G4_XBF16_ROWS) {
        const int Kp = (K + 31) / 32 * 32;
        uint16_t *xt = to_layout(xb, ld, Tp, Kp, layout);
        mm(xt, Kp, T, K, w, n0, n1, y, ldy);
        free(xt);
    } else {
        mm(xb, ld, T, K, w, n0, n1, y, ldy);
    }
    for (int t = 0; t < T; t++)
        for (int n = 0; n < ldy; n++) {
            const float got = y[(size_t)t * ldy + n];
            if (n < n0 || n >= n1) {
                if (got != -12345.0f) fail_msg("T=%d K=%d: column %d outside [%d, %d) written", T, K, n, n0, n1);
                continue;
            }
            double ref = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                const double p = (double)g4_bf16_to_f32(xb[(size_t)t * ld + k]) * g4_bf16_to_f32(w[(size_t)n * K + k]);
                ref += p;
                mag += fabs(p);
            }
            /* fp32 sums: ~sqrt(K) roundings of 2^-24 of the running magnitude; a lost or misplaced
             * product is ~mag / K, far outside */
            if (fabs(got - ref) > 1e-5 * mag + 1e-30) fail_msg("T=%d K=%d n=%d t=%d: %g vs %g", T, K, n, t, got, ref);
        }
    free(xb);
    free(w);
    free(y);
}

static const int shapes[][5] = {   /* T, K, N, n0, n1 */
    {1, 32, 32, 0, 32}, {5, 64, 48, 16, 48}, {13, 200, 80, 0, 77}, {32, 1030, 64, 16, 64},
    {45, 96, 100, 32, 99}, {64, 63, 40, 0, 40}, {70, 544, 96, 0, 96},
    {33, 4200, 64, 0, 64},   /* past the AMX kernel's 4096-deep K block: two blocks of 2112 */
    {20, 100, 60, 0, 52},    /* a last weight block of 20 rows (16 + 4) */
    {9, 70, 50, 0, 45},      /* one of 13 rows (A tiles of 13 rows, no second one) */
};

static void check_all(g4_matmul_xbf16_fn mm, g4_xbf16_layout layout) {
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check(mm, layout, shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], shapes[i][4]);
}

/* g4_xbf16_put_row (the forward pass's rounding into the matmul input): the tile layout
 * (the portable writer and, where the CPU has it, the AVX512-BF16 one) holds the same values as the rows, padding rows and columns zero, across bands and
 * partial tiles */
static void test_put_row_layouts(void **state) {
    (void)state;
    for (int K = 1; K <= 100; K += 33) {
        const int T = 37, Tp = 64, Kp = (K + 31) / 32 * 32, ld = Kp + 32;
        float *x = malloc((size_t)T * K * sizeof *x);
        uint16_t *rows = malloc((size_t)Tp * ld * sizeof *rows), *tiles = malloc((size_t)Tp * Kp * sizeof *tiles);
        unsigned seed = 7u + (unsigned)K;
        for (int i = 0; i < T * K; i++) x[i] = frand(&seed) * 5.0f;
        memset(rows, 0xff, (size_t)Tp * ld * sizeof *rows);
        memset(tiles, 0xff, (size_t)Tp * Kp * sizeof *tiles);
        const int fast = g4_kernels_amx() != NULL;   /* the AVX512-BF16 writer runs there */
        uint16_t *tiles2 = malloc((size_t)Tp * Kp * sizeof *tiles2);
        for (g4_xbf16_layout lay = G4_XBF16_TILES; lay <= G4_XBF16_PAIRS; lay++) {
            memset(tiles, 0xff, (size_t)Tp * Kp * sizeof *tiles);
            memset(tiles2, 0xff, (size_t)Tp * Kp * sizeof *tiles2);
            for (int t = 0; t < Tp; t++) {
                if (fast && lay == G4_XBF16_TILES)
                    g4_xbf16_put_row_tiles_avx512(x + (size_t)(t < T ? t : 0) * K, t < T ? K : 0, t, Kp, tiles2);
                if (fast && lay == G4_XBF16_PAIRS && t % 16 == 0)   /* 16 rows at a time */
                    g4_xbf16_put_pairs16_avx512(x + (size_t)(t < T ? t : 0) * K, K, T - t < 0 ? 0 : T - t < 16 ? T - t : 16,
                                                K, t, Kp, 0, 1, tiles2);
                g4_xbf16_put_row(x + (size_t)(t < T ? t : 0) * K, t < T ? K : 0, t, Kp, ld, G4_XBF16_ROWS, rows);
                g4_xbf16_put_row(x + (size_t)(t < T ? t : 0) * K, t < T ? K : 0, t, Kp, ld, lay, tiles);
            }
            for (int t = 0; t < Tp; t++)
                for (int k = 0; k < Kp; k++) {
                    const uint16_t want = t < T && k < K ? g4_f32_to_bf16(x[(size_t)t * K + k]) : 0;
                    const size_t o = layout_offset(lay, t, k, Kp);
                    if (rows[(size_t)t * ld + k] != want || tiles[o] != want || (fast && tiles2[o] != want))
                        fail_msg("K=%d t=%d k=%d layout %d: rows %04x %04x / %04x want %04x", K, t, k, (int)lay,
                                 rows[(size_t)t * ld + k], tiles[o], fast ? tiles2[o] : 0, want);
                }
        }
        free(x);
        free(rows);
        free(tiles);
        free(tiles2);
    }
}

/* g4_xbf16_put_row_split3: hi + mid + lo is x exactly (in double), each term a bf16, across
 * magnitudes from 2^-60 to 2^60, padding rows and columns zero */
/* the three planes of all Tp rows: 0 the portable writer, 1 the AVX512-BF16 one (by rows in the
 * tile layout, by 16 rows in the pair layout) */
static void split3_all(int which, g4_xbf16_layout layout, const float *x, int T, int Tp, int K, int Kp, size_t plane,
                       uint16_t *xs) {
    for (int t = 0; t < Tp; t++) {
        const float *xr = x + (size_t)(t < T ? t : 0) * K;
        if (!which) g4_xbf16_put_row_split3(xr, t < T ? K : 0, t, Kp, plane, layout, xs);
        else if (layout == G4_XBF16_TILES) g4_xbf16_put_row_split3_avx512(xr, t < T ? K : 0, t, Kp, plane, xs);
        else if (t % 16 == 0) g4_xbf16_put_pairs16_avx512(xr, K, T - t < 0 ? 0 : T - t < 16 ? T - t : 16, K, t, Kp, plane, 3, xs);
    }
}

static void check_split3(int which, g4_xbf16_layout layout) {
    const int T = 20, Tp = 32, K = 70, Kp = 96;
    const size_t plane = (size_t)Tp * Kp;
    float *x = malloc((size_t)T * K * sizeof *x);
    uint16_t *xs = malloc(3 * plane * sizeof *xs);
    unsigned seed = 11;
    for (int i = 0; i < T * K; i++) x[i] = ldexpf(frand(&seed), (int)(seed >> 8) % 121 - 60);
    memset(xs, 0xff, 3 * plane * sizeof *xs);
    split3_all(which, layout, x, T, Tp, K, Kp, plane, xs);
    for (int t = 0; t < Tp; t++)
        for (int k = 0; k < Kp; k++) {
            const size_t o = layout_offset(layout, t, k, Kp);
            const double sum = (double)g4_bf16_to_f32(xs[o]) + g4_bf16_to_f32(xs[o + plane]) + g4_bf16_to_f32(xs[o + 2 * plane]);
            const double want = t < T && k < K ? x[(size_t)t * K + k] : 0.0;
            if (sum != want) fail_msg("t=%d k=%d: hi + mid + lo = %.17g, x = %.17g", t, k, sum, want);
        }
    free(x);
    free(xs);
}

static void test_split3_exact(void **state) {
    (void)state;
    check_split3(0, G4_XBF16_TILES);
    check_split3(0, G4_XBF16_PAIRS);
    const g4_kernels *k = g4_kernels_amx();
    if (!k) return;   /* the AVX512-BF16 versions run where the amx table exists */
    assert_ptr_equal(k->split3_row, g4_xbf16_put_row_split3_avx512);
    assert_ptr_equal(k->put_pairs16, g4_xbf16_put_pairs16_avx512);
    check_split3(1, G4_XBF16_TILES);
    check_split3(1, G4_XBF16_PAIRS);
}

/* The exact GEMM on AMX (three bf16 planes of fp32 activations) against a double-precision sum of
 * the fp32 activations' products: within fp32 summation error, where bf16-rounded activations
 * (hi alone) are ~2^-9 off per product */
typedef void (*x3_fn)(const uint16_t *, size_t, int, int, const void *, int, int, float *, int);

/* y[t][n] for n in [n0, n1) against a double-precision sum of the fp32 x's products with the bf16
 * weights, within fp32 summation error; y's other columns (prefilled with -12345) untouched */
static void check_exact_fp32(const char *what, const float *x, const uint16_t *w, int T, int K, int n0, int n1,
                             const float *y, int ldy) {
    for (int t = 0; t < T; t++)
        for (int n = 0; n < ldy; n++) {
            const float got = y[(size_t)t * ldy + n];
            if (n < n0 || n >= n1) {
                if (got != -12345.0f) fail_msg("%s T=%d K=%d: column %d outside [%d, %d) written", what, T, K, n, n0, n1);
                continue;
            }
            double ref = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                const double p = (double)x[(size_t)t * K + k] * g4_bf16_to_f32(w[(size_t)n * K + k]);
                ref += p;
                mag += fabs(p);
            }
            if (!(fabs(got - ref) <= 1e-6 * mag + 1e-30))
                fail_msg("%s T=%d K=%d n=%d t=%d: %.9g vs %.9g", what, T, K, n, t, got, ref);
        }
}

static void check_x3(x3_fn mm, g4_xbf16_layout layout, int T, int K, int N, int n0, int n1) {
    const int Tp = (T + 31) / 32 * 32, Kp = (K + 31) / 32 * 32, ldy = N + 3;
    const size_t plane = (size_t)Tp * Kp;
    float *x = malloc((size_t)T * K * sizeof *x), *y = malloc((size_t)T * ldy * sizeof *y);
    uint16_t *xs = malloc(3 * plane * sizeof *xs), *w = malloc((size_t)N * K * sizeof *w);
    unsigned seed = (unsigned)(T * 17 + K * 3 + N);
    for (int i = 0; i < T * K; i++) x[i] = frand(&seed) * 3.0f;
    for (size_t i = 0; i < (size_t)N * K; i++) w[i] = g4_f32_to_bf16(frand(&seed) * 0.5f);
    for (size_t i = 0; i < (size_t)T * ldy; i++) y[i] = -12345.0f;
    for (int t = 0; t < Tp; t++)
        g4_xbf16_put_row_split3(x + (size_t)(t < T ? t : 0) * K, t < T ? K : 0, t, Kp, plane, layout, xs);
    mm(xs, plane, T, K, w, n0, n1, y, ldy);
    check_exact_fp32("x3", x, w, T, K, n0, n1, y, ldy);
    free(x);
    free(y);
    free(xs);
    free(w);
}

static void check_x3_all(x3_fn mm, g4_xbf16_layout layout) {
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_x3(mm, layout, shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], shapes[i][4]);
}

static void test_x3_emulated(void **state) {
    (void)state;
    check_x3_all(emu_matmul_x3bf16_amx, G4_XBF16_TILES);
    check_x3_all(emu_matmul_x3bf16_amx_pairs, G4_XBF16_PAIRS);
}

static void test_x3_hardware(void **state) {
    (void)state;
    const g4_kernels *k = g4_kernels_amx();
    if (!k) skip();
    assert_ptr_equal(k->matmul_x3bf16, g4_matmul_x3bf16_amx);
    assert_ptr_equal(k->matmul_x3bf16_pairs, g4_matmul_x3bf16_amx_pairs);
    check_x3_all(g4_matmul_x3bf16_amx, G4_XBF16_TILES);
    check_x3_all(g4_matmul_x3bf16_amx_pairs, G4_XBF16_PAIRS);
}

/* The decode layout (g4_xbf16_put_gemv3): column 3t + j of each pair row holds row t's plane j,
 * hi + mid + lo is x exactly, across magnitudes from 2^-60 to 2^60; the AVX512-BF16 writer (where
 * the amx table exists) writes the same bits */
static void check_gemv3_layout(int T, int K) {
    const size_t n = g4_xbf16_gemv3_size(T, K);   /* 32-bit pairs */
    float *x = malloc((size_t)T * (K + 5) * sizeof *x);
    uint32_t *xg = malloc(n * sizeof *xg), *xg2 = malloc(n * sizeof *xg2);
    unsigned seed = 19u + (unsigned)(T * K);
    for (int i = 0; i < T * (K + 5); i++) x[i] = ldexpf(frand(&seed), (int)(seed >> 8) % 121 - 60);
    memset(xg, 0xff, n * sizeof *xg);
    g4_xbf16_put_gemv3(x, K + 5, T, K, xg);   /* a row stride past K: the 5 columns are not read */
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++) {
            double sum = 0;
            for (int j = 0; j < 3; j++) {
                const uint32_t pair = xg[g4_xbf16_gemv3_offset(t, j, k & ~1, T)];
                sum += g4_bf16_to_f32((uint16_t)(k & 1 ? pair >> 16 : pair & 0xffff));
            }
            if (sum != x[(size_t)t * (K + 5) + k]) fail_msg("gemv3 T=%d t=%d k=%d: %.17g vs %.17g", T, t, k, sum, x[(size_t)t * (K + 5) + k]);
        }
    /* the last tile's rows past T are zeros, and every word of the layout is one of the above */
    const int rows = g4_gemv3_tiles(T) * g4_gemv3_tile_rows(T);
    size_t seen = 0;
    for (int t = 0; t < rows; t++)
        for (int k = 0; k < K; k += 2)
            for (int j = 0; j < 3; j++, seen++)
                if (t >= T && xg[g4_xbf16_gemv3_offset(t, j, k, T)] != 0) fail_msg("gemv3 T=%d: padding row %d not zero", T, t);
    assert_int_equal(seen, n);
    if (g4_kernels_amx()) {
        memset(xg2, 0xff, n * sizeof *xg2);
        g4_xbf16_put_gemv3_avx512(x, K + 5, T, K, xg2);
        for (size_t i = 0; i < n; i++)
            if (xg2[i] != xg[i]) fail_msg("gemv3 T=%d K=%d: AVX512-BF16 writer %08x at %zu, portable %08x", T, K, xg2[i], i, xg[i]);
    }
    free(x);
    free(xg);
    free(xg2);
}

static void test_gemv3_layout(void **state) {
    (void)state;
    for (int T = 1; T <= G4_GEMV_X3_MAX_ROWS; T++) check_gemv3_layout(T, T * 64 - 32);
}

/* The decode matmul on AMX: T <= 5 rows of fp32 activations against bf16 weights, within fp32
 * summation error of a double-precision sum of the products, over row ranges that cross 16- and
 * 32-row blocks, short last blocks (13 and 20 rows), long rows (16-row blocks) and y's columns
 * outside [n0, n1) left untouched */
typedef void (*gemv3_fn)(const uint32_t *, int, int, const void *, int, int, float *, int);

static void check_gemv3(gemv3_fn mm, int T, int K, int N, int n0, int n1) {
    const int ldy = N + 3;
    float *x = malloc((size_t)T * K * sizeof *x), *y = malloc((size_t)T * ldy * sizeof *y);
    uint32_t *xg = malloc(g4_xbf16_gemv3_size(T, K) * sizeof *xg);
    uint16_t *w = malloc((size_t)N * K * sizeof *w);
    unsigned seed = (unsigned)(T * 29 + K * 5 + N);
    for (int i = 0; i < T * K; i++) x[i] = frand(&seed) * 3.0f;
    for (size_t i = 0; i < (size_t)N * K; i++) w[i] = g4_f32_to_bf16(frand(&seed) * 0.5f);
    for (size_t i = 0; i < (size_t)T * ldy; i++) y[i] = -12345.0f;
    g4_xbf16_put_gemv3(x, K, T, K, xg);
    mm(xg, T, K, w, n0, n1, y, ldy);
    check_exact_fp32("gemv3", x, w, T, K, n0, n1, y, ldy);
    free(x);
    free(y);
    free(xg);
    free(w);
}

static const int gemv3_shapes[][5] = {   /* T, K, N, n0, n1 */
    {1, 32, 32, 0, 32}, {1, 96, 100, 0, 100}, {2, 64, 80, 16, 77}, {3, 160, 45, 0, 45},
    {4, 4096, 40, 0, 36},    /* rows of 8 KB: a last block of 4 */
    {5, 256, 70, 3, 70},     /* a range starting off the 16-row grid; a last block of 3 */
    {6, 96, 40, 0, 40},      /* two B tiles, the second with one row and four of padding */
    {10, 160, 35, 0, 33},    /* two whole B tiles */
    {13, 1024, 50, 2, 47},   /* three */
    {15, 64, 17, 0, 17},     /* three whole ones; a last block of 1 row */
    {1, 8192, 50, 0, 50},    /* 16 KB rows (o_proj of the bench model) */
    {1, 1536, 96, 32, 96},   /* the bench model's hidden size */
};

static void check_gemv3_all(gemv3_fn mm) {
    for (size_t i = 0; i < sizeof gemv3_shapes / sizeof gemv3_shapes[0]; i++)
        check_gemv3(mm, gemv3_shapes[i][0], gemv3_shapes[i][1], gemv3_shapes[i][2], gemv3_shapes[i][3], gemv3_shapes[i][4]);
}

static void test_gemv3_emulated(void **state) {
    (void)state;
    check_gemv3_all(emu_matmul_gemv3_amx);
}

static void test_gemv3_hardware(void **state) {
    (void)state;
    const g4_kernels *k = g4_kernels_amx();
    if (!k) skip();
    assert_ptr_equal(k->matmul_gemv3, g4_matmul_gemv3_amx);
    assert_ptr_equal(k->put_gemv3, g4_xbf16_put_gemv3_avx512);
    check_gemv3_all(g4_matmul_gemv3_amx);
}

static void test_avx512_emulated(void **state) { (void)state; check_all(emu_matmul_xbf16_avx512, G4_XBF16_ROWS); }
static void test_amx_emulated(void **state) {
    (void)state;
    check_all(emu_matmul_xbf16_amx, G4_XBF16_TILES);
    check_all(emu_matmul_xbf16_amx_pairs, G4_XBF16_PAIRS);
}

/* the bench's AMX peak chains compute what their FLOP count says: iters x 32 products per element */
static void check_peak_chain(float (*chain)(int, float)) {
    const double v = g4_bf16_to_f32(g4_f32_to_bf16(1e-3f * 2.0f)), want = 4 * 100 * 32 * v * v;
    const float got = chain(100, 2.0f);   /* four elements of the four tiles, each iters x 32 products */
    if (fabs(got - want) > 1e-3 * want) fail_msg("peak chain: %g, want %g", got, want);   /* fp32 sums */
}

static void test_amx_peak_emulated(void **state) { (void)state; check_peak_chain(emu_amx_peak_chain); }

static void test_amx_peak_hardware(void **state) {
    (void)state;
    if (!g4_kernels_amx()) skip();
    check_peak_chain(g4_amx_peak_chain);
}

static void test_avx512_hardware(void **state) {
    (void)state;
    if (!g4_kernels_avx512bf16()) skip();
    check_all(g4_matmul_xbf16_avx512, G4_XBF16_ROWS);
}

static void test_amx_hardware(void **state) {
    (void)state;
    if (!g4_kernels_amx()) skip();
    check_all(g4_matmul_xbf16_amx, G4_XBF16_TILES);
    check_all(g4_matmul_xbf16_amx_pairs, G4_XBF16_PAIRS);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_row_layouts),
        cmocka_unit_test(test_split3_exact),
        cmocka_unit_test(test_x3_emulated),
        cmocka_unit_test(test_x3_hardware),
        cmocka_unit_test(test_gemv3_layout),
        cmocka_unit_test(test_gemv3_emulated),
        cmocka_unit_test(test_gemv3_hardware),
        cmocka_unit_test(test_avx512_emulated),
        cmocka_unit_test(test_amx_emulated),
        cmocka_unit_test(test_avx512_hardware),
        cmocka_unit_test(test_amx_hardware),
        cmocka_unit_test(test_amx_peak_emulated),
        cmocka_unit_test(test_amx_peak_hardware),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
