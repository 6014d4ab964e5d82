/* test_matmul_policy.c — the matmul layer (kernels/matmul.h): the policy's defaults on every kernel
 * path this CPU has and its mapping of the public tuning knobs, and g4_matmul's products on every
 * path and every input form its policy picks (row counts across the gemv3, pairs, tiles and packed
 * ranges; one, two and three products sharing an input) against a double-precision reference. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/threadpool.h"
#include "gemma4c.h"
#include "kernels/kernels.h"
#include "kernels/matmul.h"

static const g4_kernels *paths(int i) {
    switch (i) {
    case 0: return g4_kernels_scalar();
    case 1: return g4_kernels_avx2();
    case 2: return g4_kernels_avx512();
    case 3: return g4_kernels_avx512bf16();
    default: return g4_kernels_amx();
    }
}
enum { N_PATHS = 5 };

static void test_policy_defaults(void **state) {
    (void)state;
    for (int i = 0; i < N_PATHS; i++) {
        const g4_kernels *k = paths(i);
        if (!k) continue;
        g4_matmul_policy p, q;
        g4_matmul_policy_init(&p, k, NULL);
        const g4_tuning unset = {-1, -1, -1, -1, -1, -1};
        g4_matmul_policy_init(&q, k, &unset);
        assert_memory_equal(&p, &q, sizeof p);
        assert_int_equal(p.x3_min_rows, G4_X3_MIN_ROWS);
        assert_int_equal(p.pairs_max_rows, k->matmul_xbf16_pairs ? 64 : 0);
        assert_int_equal(p.gemv_min_rows, k->matmul_gemv3 ? 1 : 0);
        assert_int_equal(p.gemv_max_rows, k->matmul_gemv3 ? 15 : 0);
        assert_int_equal(p.gemv_one_row_k_below, k->matmul_gemv3 ? 4096 : 0);
        assert_int_equal(p.rows_max_rows, G4_ROWS_MAX_ROWS);
    }
}

static void dummy_gemv3(const uint32_t *xg, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    (void)xg; (void)T; (void)K; (void)w; (void)n0; (void)n1; (void)y; (void)ldy;
}
static void dummy_pairs(const uint16_t *xb, int ldx, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    (void)xb; (void)ldx; (void)T; (void)K; (void)w; (void)n0; (void)n1; (void)y; (void)ldy;
}

/* the knobs as the former G4_AMX_* variables routed them: clamped to what the kernels hold */
static void test_policy_tuning(void **state) {
    (void)state;
    g4_kernels k = {.name = "fake", .matmul_gemv3 = dummy_gemv3, .matmul_xbf16_pairs = dummy_pairs};
    g4_matmul_policy p;
    g4_matmul_policy_init(&p, &k, &(g4_tuning){.amx_pairs_rows = 0, .amx_gemv_min_rows = -1,
                                              .amx_gemv_max_rows = 5, .amx_gemv1_k_below = 0, .profile = -1, .full_logits = -1});
    assert_int_equal(p.pairs_max_rows, 0);
    assert_int_equal(p.gemv_min_rows, 1);
    assert_int_equal(p.gemv_max_rows, 5);
    assert_int_equal(p.gemv_one_row_k_below, 0);
    g4_matmul_policy_init(&p, &k, &(g4_tuning){.amx_pairs_rows = 32, .amx_gemv_min_rows = 4,
                                              .amx_gemv_max_rows = 99, .amx_gemv1_k_below = 2048, .profile = -1, .full_logits = -1});
    assert_int_equal(p.pairs_max_rows, 32);
    assert_int_equal(p.gemv_min_rows, 4);
    assert_int_equal(p.gemv_max_rows, G4_GEMV_X3_MAX_ROWS);
    assert_int_equal(p.gemv_one_row_k_below, 2048);
    g4_matmul_policy_init(&p, &k, &(g4_tuning){.amx_pairs_rows = -1, .amx_gemv_min_rows = 0,
                                              .amx_gemv_max_rows = 0, .amx_gemv1_k_below = -1, .profile = -1, .full_logits = -1});
    assert_int_equal(p.gemv_min_rows, 1);
    assert_int_equal(p.gemv_max_rows, 0);   /* never */
    g4_matmul_policy_init(&p, &k, &(g4_tuning){.amx_pairs_rows = -1, .amx_gemv_min_rows = 9,
                                              .amx_gemv_max_rows = 3, .amx_gemv1_k_below = -1, .profile = -1, .full_logits = -1});
    assert_int_equal(p.gemv_max_rows, 0);   /* an empty range: never */
}

static float frand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 16777216.0f - 0.5f;
}

/* q/k/v-like products (two sharing one input, one with its own) of bf16 weights on every path */
static void test_matmul_forms(void **state) {
    (void)state;
    enum { K = 256, MAXR = 80, N0 = 96, N1 = 40 };
    static const int rows[] = {1, 2, 5, 15, 16, 17, 33, 64, 65, 80};
    uint32_t s = 7;
    uint16_t *w0 = malloc(sizeof(uint16_t) * N0 * K), *w1 = malloc(sizeof(uint16_t) * N1 * K);
    float *x = malloc(sizeof(float) * MAXR * K), *x2 = malloc(sizeof(float) * MAXR * K);
    float *y0 = malloc(sizeof(float) * MAXR * N0), *y1 = malloc(sizeof(float) * MAXR * N1);
    float *y2 = malloc(sizeof(float) * MAXR * N1);
    for (int i = 0; i < N0 * K; i++) w0[i] = g4_f32_to_bf16(frand(&s));
    for (int i = 0; i < N1 * K; i++) w1[i] = g4_f32_to_bf16(frand(&s));
    for (int i = 0; i < MAXR * K; i++) { x[i] = frand(&s); x2[i] = frand(&s); }
    const g4_mat m0 = {G4_DT_BF16, w0, N0, K}, m1 = {G4_DT_BF16, w1, N1, K};
    g4_pool *pool = g4_pool_new(2);
    assert_non_null(pool);
    for (int pi = 0; pi < N_PATHS; pi++) {
        const g4_kernels *k = paths(pi);
        if (!k) continue;
        g4_matmul_policy p;
        g4_matmul_policy_init(&p, k, NULL);
        g4_matmul_ctx *c;
        assert_int_equal(g4_matmul_ctx_new(k, pool, &p, MAXR, K, 0, 0, 0, &c), G4_OK);
        for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
            const int T = rows[ri];
            const g4_mm_op ops[3] = {{&m0, x, y0, N0}, {&m1, x, y1, N1}, {&m1, x2, y2, N1}};
            g4_matmul(c, T, 3, ops);
            for (int o = 0; o < 3; o++) {
                const uint16_t *w = o ? w1 : w0;
                const float *xi = o == 2 ? x2 : x, *y = o == 0 ? y0 : o == 1 ? y1 : y2;
                const int N = o ? N1 : N0;
                for (int t = 0; t < T; t++)
                    for (int n = 0; n < N; n++) {
                        double ref = 0, mag = 0;
                        for (int kk = 0; kk < K; kk++) {
                            const double v = (double)g4_bf16_to_f32(w[(size_t)n * K + kk]) * xi[(size_t)t * K + kk];
                            ref += v;
                            mag += fabs(v);
                        }
                        if (fabs(y[(size_t)t * N + n] - ref) > 1e-6 * mag + 1e-7)
                            fail_msg("%s T=%d op %d (%d, %d): %.9g vs %.9g", k->name, T, o, t, n, y[(size_t)t * N + n],
                                     ref);
                    }
            }
        }
        g4_matmul_ctx_free(c);
    }
    g4_pool_free(pool);
    free(w0); free(w1); free(x); free(x2); free(y0); free(y1); free(y2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_defaults),
        cmocka_unit_test(test_policy_tuning),
        cmocka_unit_test(test_matmul_forms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
