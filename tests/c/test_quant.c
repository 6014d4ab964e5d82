/* test_quant.c — ggml block formats: the C decoders against tests/fixtures/quant/ vectors written
 * by the `gguf` package's own quantizers/dequantizers (bit-exact), and every path's fused matmul
 * over quantized weights against dequantize-then-dot in double (float tolerance). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/quant.h"
#include "kernels/kernels.h"
#include "test_util.h"

#define ROWS 4
#define COLS 512

static const g4_dtype types[] = {G4_DT_F16, G4_DT_BF16, G4_DT_Q8_0, G4_DT_Q4_0, G4_DT_Q5_0, G4_DT_Q4_K, G4_DT_Q6_K};

static void *load(g4_dtype dt, const char *ext, size_t want) {
    char path[256];
    snprintf(path, sizeof path, "tests/fixtures/quant/%s.%s", g4_dtype_name(dt), ext);
    size_t n = 0;
    void *p = slurp(path, &n);
    if (!p) fail_msg("cannot read %s", path);
    assert_int_equal(n, want);
    return p;
}

static void test_sizes(void **state) {
    (void)state;
    assert_int_equal(g4_dtype_row_bytes(G4_DT_Q8_0, 512), 16 * 34);
    assert_int_equal(g4_dtype_row_bytes(G4_DT_Q4_0, 512), 16 * 18);
    assert_int_equal(g4_dtype_row_bytes(G4_DT_Q5_0, 512), 16 * 22);
    assert_int_equal(g4_dtype_row_bytes(G4_DT_Q4_K, 512), 2 * 144);
    assert_int_equal(g4_dtype_row_bytes(G4_DT_Q6_K, 512), 2 * 210);
    assert_int_equal(g4_dtype_row_bytes(G4_DT_BF16, 512), 1024);
    assert_string_equal(g4_dtype_name(G4_DT_Q4_K), "Q4_K");
}

/* every element's bits equal gguf-py's dequantization */
static void test_dequant_exact(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        g4_dtype dt = types[i];
        size_t rb = g4_dtype_row_bytes(dt, COLS);
        uint8_t *blocks = load(dt, "blocks", ROWS * rb);
        float *want = load(dt, "f32", ROWS * COLS * sizeof(float));
        float got[COLS];
        int bad = 0;
        for (int r = 0; r < ROWS; r++) {
            g4_to_f32(dt, blocks + r * rb, COLS, got);
            bad += memcmp(got, want + r * COLS, sizeof got) != 0;
            for (int k = 0; k < COLS && bad; k++)
                if (memcmp(&got[k], &want[r * COLS + k], 4)) {
                    print_error("%s row %d col %d: %.9g vs %.9g\n", g4_dtype_name(dt), r, k, got[k], want[r * COLS + k]);
                    break;
                }
        }
        assert_int_equal(bad, 0);
        free(blocks);
        free(want);
    }
}

static float frand(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return ((*s >> 8) / 16777216.0f) * 2.0f - 1.0f;
}

/* Y = X · Wᵀ through the table of each path, T in {1, 3, 7}, row ranges that split the rows */
static void test_matmul(void **state) {
    (void)state;
    const g4_kernels *paths[2] = {g4_kernels_scalar(), g4_kernels_avx2()};
    unsigned seed = 7;
    for (int p = 0; p < 2; p++) {
        if (!paths[p]) continue;
        for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
            g4_dtype dt = types[i];
            size_t rb = g4_dtype_row_bytes(dt, COLS);
            uint8_t *blocks = load(dt, "blocks", ROWS * rb);
            float *wf = load(dt, "f32", ROWS * COLS * sizeof(float));
            assert_non_null(paths[p]->matmul[dt]);
            for (int T = 1; T <= 7; T += 3) {
                float x[7 * COLS], y[7 * ROWS];
                for (int k = 0; k < T * COLS; k++) x[k] = frand(&seed);
                memset(y, 0, sizeof y);
                paths[p]->matmul[dt](x, T, COLS, blocks, 0, 1, y, ROWS);
                paths[p]->matmul[dt](x, T, COLS, blocks, 1, ROWS, y, ROWS);
                for (int t = 0; t < T; t++)
                    for (int n = 0; n < ROWS; n++) {
                        double ref = 0, mag = 0;
                        for (int k = 0; k < COLS; k++) {
                            ref += (double)x[t * COLS + k] * wf[n * COLS + k];
                            mag += fabs((double)x[t * COLS + k] * wf[n * COLS + k]);
                        }
                        if (fabs(y[t * ROWS + n] - ref) > 1e-5 * mag + 1e-6)
                            fail_msg("%s %s T=%d t=%d n=%d: %g vs %g", paths[p]->name, g4_dtype_name(dt), T, t, n, y[t * ROWS + n], ref);
                    }
            }
            free(blocks);
            free(wf);
        }
    }
}

/* Prefill (T >= 4) through the blocked GEMM: 16-row panels dequantized once, the rows past the
 * last full panel fused. 37 rows (the fixture's 4 repeated), split at 5 so one range has no full
 * panel and the other two panels and a tail; against dequantize-then-dot in double. */
static void test_gemm_prefill(void **state) {
    (void)state;
    enum { N = 37, TMAX = 13 };
    const g4_kernels *paths[2] = {g4_kernels_scalar(), g4_kernels_avx2()};
    unsigned seed = 9;
    for (int p = 0; p < 2; p++) {
        if (!paths[p]) continue;
        for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
            g4_dtype dt = types[i];
            size_t rb = g4_dtype_row_bytes(dt, COLS);
            uint8_t *blocks = load(dt, "blocks", ROWS * rb), *w = malloc(N * rb);
            float *wf = load(dt, "f32", ROWS * COLS * sizeof(float));
            for (int n = 0; n < N; n++) memcpy(w + n * rb, blocks + (n % ROWS) * rb, rb);
            static float x[TMAX * COLS], y[TMAX * N];
            for (int T = 4; T <= TMAX; T += 3 + (T == 4)) {   /* 4, 8, 11 */
                for (int k = 0; k < T * COLS; k++) x[k] = frand(&seed);
                memset(y, 0, sizeof y);
                paths[p]->matmul[dt](x, T, COLS, w, 0, 5, y, N);
                paths[p]->matmul[dt](x, T, COLS, w, 5, N, y, N);
                for (int t = 0; t < T; t++)
                    for (int n = 0; n < N; n++) {
                        double ref = 0, mag = 0;
                        for (int k = 0; k < COLS; k++) {
                            ref += (double)x[t * COLS + k] * wf[(n % ROWS) * COLS + k];
                            mag += fabs((double)x[t * COLS + k] * wf[(n % ROWS) * COLS + k]);
                        }
                        if (fabs(y[t * N + n] - ref) > 1e-5 * mag + 1e-6)
                            fail_msg("%s %s T=%d t=%d n=%d: %g vs %g", paths[p]->name, g4_dtype_name(dt), T, t, n, y[t * N + n], ref);
                    }
            }
            free(blocks);
            free(w);
            free(wf);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_dequant_exact),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_gemm_prefill),
    };
    return cmocka_run_group_tests_name("quant", tests, NULL, NULL);
}
