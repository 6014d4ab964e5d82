/* test_rows_invariant.c — row invariance of the decode matmuls: on every kernel path this CPU has
 * and every weight type, row t of a T-row product (T = 1..17) must be bit for bit what a one-row
 * product of row t alone gives. Twice: the table's matmul_rows (kernels.h) against its matmul on
 * one row, over whole matrices and over ranges that start on a 16-row task boundary and end on an
 * odd row (the one-row GEMVs take the last rows of a range in another order); and g4_matmul
 * (matmul.h: the policy picks the kernel by rows and K) on a two-thread pool, three products
 * sharing the call, against a one-row g4_matmul — for every T its policy promises (matmul_rows'
 * range, gemv3's on amx; the scalar path is row-invariant at any T). K sizes cover the even/odd
 * splits (K % 32, K % 16, K % 8 != 0), rows of 8 KB and more, the multi-row bf16 kernel's column
 * chunks (whole and partial, 8-16 rows in several row groups), and each quantized block size. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>
#include <stdio.h>
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
enum { N_PATHS = 5, MAX_T = 17, N = 37 };

static float frand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 16777216.0f - 0.5f;
}

/* N rows of K weights of type dt: random floats for the float types, random blocks with sane
 * f16 scales in [2^-9, 2^-8) for the quantized ones */
static void *rand_weights(g4_dtype dt, int rows, int K, uint32_t *s) {
    const size_t rb = g4_dtype_row_bytes(dt, K), nbytes = rb * rows;
    uint8_t *w = malloc(nbytes);
    if (dt == G4_DT_F32) {
        for (size_t i = 0; i < (size_t)rows * K; i++) ((float *)w)[i] = frand(s);
    } else if (dt == G4_DT_F16 || dt == G4_DT_BF16) {
        for (size_t i = 0; i < (size_t)rows * K; i++)
            ((uint16_t *)w)[i] = dt == G4_DT_F16 ? g4_f32_to_f16(frand(s)) : g4_f32_to_bf16(frand(s));
    } else {
        const size_t bb = g4_dtype_size(dt);
        for (size_t i = 0; i < nbytes; i++) {
            *s = *s * 1664525u + 1013904223u;
            w[i] = (uint8_t)(*s >> 24);
        }
        for (size_t b = 0; b < nbytes / bb; b++) {
            uint8_t *p = w + b * bb + (dt == G4_DT_Q6_K ? 208 : dt == G4_DT_Q3_K ? 108 : dt == G4_DT_Q2_K ? 80 : 0);
            for (int k = 0; k < (dt == G4_DT_Q4_K || dt == G4_DT_Q5_K || dt == G4_DT_Q2_K || dt == G4_DT_Q4_1 || dt == G4_DT_Q5_1 ? 2 : 1); k++) {
                *s = *s * 1664525u + 1013904223u;
                const uint16_t h = (uint16_t)(0x1800 | ((*s >> 8) & 0x3ff) | (((*s >> 20) & 1) << 15));
                p[2 * k] = (uint8_t)h;
                p[2 * k + 1] = (uint8_t)(h >> 8);
            }
        }
    }
    return w;
}

typedef struct {
    g4_dtype dt;
    int K;
} shape;
static const shape shapes[] = {
    {G4_DT_BF16, 96},   {G4_DT_BF16, 208},  {G4_DT_BF16, 200},  {G4_DT_BF16, 1536}, {G4_DT_BF16, 4096}, {G4_DT_BF16, 6144},
    {G4_DT_BF16, 4100}, {G4_DT_F32, 200},   {G4_DT_F32, 203},   {G4_DT_F16, 96},    {G4_DT_F16, 4104},
    {G4_DT_Q8_0, 96},   {G4_DT_Q4_0, 160},  {G4_DT_Q5_0, 96},   {G4_DT_Q4_K, 512},  {G4_DT_Q6_K, 256},
    {G4_DT_Q4_K, 3072}, {G4_DT_Q6_K, 3072}, {G4_DT_Q5_K, 256},  {G4_DT_Q5_K, 3072}, {G4_DT_IQ4_XS, 256}, {G4_DT_IQ4_XS, 3072},
    {G4_DT_Q3_K, 256},  {G4_DT_Q3_K, 3072}, {G4_DT_Q2_K, 256},  {G4_DT_Q2_K, 3072}, {G4_DT_IQ4_NL, 96}, {G4_DT_IQ4_NL, 3072},
    {G4_DT_Q4_1, 96},   {G4_DT_Q4_1, 3072}, {G4_DT_Q5_1, 96},   {G4_DT_Q5_1, 3072},
};

static void fail_row(const char *what, const g4_kernels *k, g4_dtype dt, int K, int T, int t, int n, float a, float b) {
    fail_msg("%s %s dt %d K %d: T=%d row %d col %d: %.9g, one row %.9g", what, k->name, (int)dt, K, T, t, n, a, b);
}

/* the kernels: matmul_rows over T rows vs matmul on each row alone, same range */
static void test_kernels(void **state) {
    (void)state;
    uint32_t s = 11;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const g4_dtype dt = shapes[si].dt;
        const int K = shapes[si].K;
        void *w = rand_weights(dt, N, K, &s);
        float *x = malloc(sizeof(float) * MAX_T * K), *y = malloc(sizeof(float) * MAX_T * N),
              *y1 = malloc(sizeof(float) * N);
        for (int i = 0; i < MAX_T * K; i++) x[i] = frand(&s);
        for (int pi = 0; pi < N_PATHS; pi++) {
            const g4_kernels *k = paths(pi);
            if (!k || !k->matmul_rows[dt]) continue;
            static const int ranges[][2] = {{0, N}, {16, N}, {0, 32}, {16, 19}};
            for (int ri = 0; ri < 4; ri++) {
                const int n0 = ranges[ri][0], n1 = ranges[ri][1];
                for (int T = 1; T <= MAX_T; T++) {
                    for (int i = 0; i < MAX_T * N; i++) y[i] = -1.0f;
                    k->matmul_rows[dt](x, T, K, w, n0, n1, y, N);
                    for (int t = 0; t < T; t++) {
                        for (int n = 0; n < N; n++) y1[n] = -1.0f;
                        k->matmul[dt](x + (size_t)t * K, 1, K, w, n0, n1, y1, N);
                        for (int n = 0; n < N; n++)
                            if (memcmp(&y[(size_t)t * N + n], &y1[n], sizeof(float)))
                                fail_row("matmul_rows", k, dt, K, T, t, n, y[(size_t)t * N + n], y1[n]);
                    }
                }
            }
        }
        free(w); free(x); free(y); free(y1);
    }
}

/* T rows the policy promises row-invariant on path k for weights dt of K columns */
static int promised(const g4_kernels *k, const g4_matmul_policy *p, g4_dtype dt, int K, int T) {
    (void)K;
    if (!k->matmul_rows[G4_DT_BF16]) return 1;   /* scalar: every matmul is */
    if (dt == G4_DT_BF16 && k->matmul_gemv3 && T >= p->x3_min_rows) return 0;   /* amx: tiles from 16 rows */
    return T <= p->rows_max_rows;
}

/* the matmul layer: three products (two sharing one input) of T rows vs one row at a time */
static void test_policy(void **state) {
    (void)state;
    uint32_t s = 23;
    g4_pool *pool = g4_pool_new(2);
    assert_non_null(pool);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const g4_dtype dt = shapes[si].dt;
        const int K = shapes[si].K, N2 = 2 * N + 5;   /* a second matrix of another height */
        void *w0 = rand_weights(dt, N, K, &s), *w1 = rand_weights(dt, N2, K, &s);
        const g4_mat m0 = {dt, w0, N, K}, m1 = {dt, w1, N2, K};
        float *x = malloc(sizeof(float) * MAX_T * K), *x2 = malloc(sizeof(float) * MAX_T * K);
        float *y[3], *z[3];
        for (int o = 0; o < 3; o++) {
            y[o] = malloc(sizeof(float) * MAX_T * N2);
            z[o] = malloc(sizeof(float) * MAX_T * N2);
        }
        for (int i = 0; i < MAX_T * K; i++) { x[i] = frand(&s); x2[i] = frand(&s); }
        for (int pi = 0; pi < N_PATHS; pi++) {
            const g4_kernels *k = paths(pi);
            if (!k) continue;
            g4_matmul_policy p;
            g4_matmul_policy_init(&p, k, NULL);
            g4_matmul_ctx *c;
            assert_int_equal(g4_matmul_ctx_new(k, pool, &p, MAX_T, K, 0, 0, 0, &c), G4_OK);
            /* the one-row results */
            for (int t = 0; t < MAX_T; t++) {
                const g4_mm_op ops[3] = {{&m0, x + (size_t)t * K, z[0] + (size_t)t * N, N},
                                         {&m1, x + (size_t)t * K, z[1] + (size_t)t * N2, N2},
                                         {&m1, x2 + (size_t)t * K, z[2] + (size_t)t * N2, N2}};
                g4_matmul(c, 1, 3, ops);
            }
            for (int T = 2; T <= MAX_T; T++) {
                if (!promised(k, &p, dt, K, T)) continue;
                const g4_mm_op ops[3] = {{&m0, x, y[0], N}, {&m1, x, y[1], N2}, {&m1, x2, y[2], N2}};
                g4_matmul(c, T, 3, ops);
                for (int o = 0; o < 3; o++) {
                    const int ld = o ? N2 : N;
                    for (int t = 0; t < T; t++)
                        for (int n = 0; n < ld; n++)
                            if (memcmp(&y[o][(size_t)t * ld + n], &z[o][(size_t)t * ld + n], sizeof(float)))
                                fail_row("g4_matmul", k, dt, K, T, t, n, y[o][(size_t)t * ld + n], z[o][(size_t)t * ld + n]);
                }
            }
            g4_matmul_ctx_free(c);
        }
        free(w0); free(w1); free(x); free(x2);
        for (int o = 0; o < 3; o++) { free(y[o]); free(z[o]); }
    }
    g4_pool_free(pool);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels),
        cmocka_unit_test(test_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
