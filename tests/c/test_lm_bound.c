/* test_lm_bound.c — the bound the greedy LM head (model/lm_argmax.c) trusts: on every kernel path
 * and quantized type, each row's exact logit (matmul) lies within
 * ‖w‖₂ ‖x − x̂‖₂ + γ ‖a‖₂ (‖x‖₂ + ‖x̂‖₂) of its --act-q8 logit (matmul_q8), for weight rows of
 * very different norms and inputs with outliers (the shape of a final-normed hidden state); and
 * the bound is of use: under the spread of the logits even here, where the outliers widen it most
 * (a real model's greedy step leaves tens to hundreds of its 262,144 rows to the exact kernel). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "convert/quantize.h"
#include "kernels/cpu/quant.h"
#include "kernels/kernels.h"

enum { N = 96, K = 1536, T = 4 };

static const g4_dtype types[] = {G4_DT_Q8_0, G4_DT_Q4_0, G4_DT_Q5_0, G4_DT_Q4_K, G4_DT_Q6_K, G4_DT_Q5_K, G4_DT_IQ4_XS,
                                 G4_DT_Q3_K, G4_DT_Q2_K, G4_DT_IQ4_NL};

static float gauss(unsigned *s) {   /* Box-Muller over a small LCG: reproducible */
    double u1, u2;
    *s = *s * 1664525u + 1013904223u;
    u1 = ((*s >> 8) + 0.5) / 16777216.0;
    *s = *s * 1664525u + 1013904223u;
    u2 = ((*s >> 8) + 0.5) / 16777216.0;
    return (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
}

/* types the quantizer does not write (Q5_0, Q6_K, Q5_K, IQ4_XS, Q3_K, Q2_K, IQ4_NL): random quants, scales of row r's size */
static void random_row(g4_dtype dt, int r, unsigned *s, unsigned char *row) {
    const size_t bb = g4_dtype_size(dt);
    for (size_t i = 0; i < (size_t)(K / g4_dtype_block(dt)) * bb; i++) {
        *s = *s * 1664525u + 1013904223u;
        row[i] = (unsigned char)(*s >> 24);
    }
    for (int b = 0; b < K / g4_dtype_block(dt); b++) {
        unsigned char *blk = row + b * bb;
        const uint16_t d = g4_f32_to_f16(0.0006f * (1 + r % 30));
        if (dt == G4_DT_Q6_K) {
            for (int j = 0; j < 16; j++) blk[192 + j] = (unsigned char)(int8_t)((int8_t)blk[192 + j] / 2);
            blk[208] = (unsigned char)d, blk[209] = (unsigned char)(d >> 8);
        } else if (dt == G4_DT_Q3_K) {
            blk[108] = (unsigned char)d, blk[109] = (unsigned char)(d >> 8);
        } else if (dt == G4_DT_Q2_K) {
            blk[80] = blk[82] = (unsigned char)d, blk[81] = blk[83] = (unsigned char)(d >> 8);   /* d, dmin */
        } else {
            blk[0] = (unsigned char)(8 * d / 8), blk[1] = (unsigned char)(d >> 8);
            if (dt == G4_DT_Q5_K) blk[2] = blk[0], blk[3] = blk[1];   /* dmin */
        }
    }
}

static void check_path(const g4_kernels *k) {
    unsigned seed = 12345;
    float *w = malloc((size_t)N * K * sizeof(float)), *x = malloc((size_t)T * K * sizeof(float));
    for (int r = 0; r < N; r++)   /* row norms spread over 30x; an offset so Q4_K's mins matter */
        for (int j = 0; j < K; j++) w[(size_t)r * K + j] = 0.01f * (1 + r % 30) * (gauss(&seed) + (r % 3 == 0 ? 0.7f : 0));
    for (int t = 0; t < T - 1; t++)
        for (int j = 0; j < K; j++) x[(size_t)t * K + j] = (j % 509 == t ? 20.0f : 1.0f) * gauss(&seed);
    /* the last row quantizes to itself (integers, -127 in every 32): x̂ = x, so only the roundings
     * of the two sums separate them, and the γ term alone must cover that */
    for (int j = 0; j < K; j++) x[(size_t)(T - 1) * K + j] = j % 32 ? (float)((int)(seed = seed * 1664525u + 1013904223u) % 128) : -127.0f;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        const g4_dtype dt = types[ti];
        if (!k->matmul_q8[dt]) continue;
        const size_t rb = g4_dtype_row_bytes(dt, K), xb = g4_act_row_bytes(dt, K);
        unsigned char *wq = malloc(N * rb), *xq = malloc(T * xb);
        for (int r = 0; r < N; r++)
            if (g4_quantize_row(dt, w + (size_t)r * K, K, wq + r * rb)) random_row(dt, r, &seed, wq + r * rb);
        k->quantize_act(dt, x, T, K, xq);
        float ye[T * N], ya[T * N];
        for (int t = 0; t < T; t++) k->matmul[dt](x + (size_t)t * K, 1, K, wq, 0, N, ye + t * N, N);
        k->matmul_q8[dt](xq, T, K, wq, 0, N, ya, N);
        const double g = (K + 64) * 0x1p-24 / (1 - (K + 64) * 0x1p-24);
        double worst = 0, worst_g = 0, bsum = 0, ysq = 0;
        for (int t = 0; t < T; t++) {
            double nrm[3];
            g4_act_norms(dt, x + (size_t)t * K, xq + t * xb, K, nrm);
            for (int r = 0; r < N; r++) {
                double w2, a2;
                assert_int_equal(g4_quant_row_norms(dt, wq + r * rb, K, &w2, &a2), 1);
                if (t == 0) {   /* ‖w‖² from the integer moments against the dequantized row's (each weight
                                 * rounded to float: 1e-7 relative) */
                    float wd[K];
                    double s2 = 0;
                    g4_dequant_row(dt, wq + r * rb, K, wd);
                    for (int j = 0; j < K; j++) s2 += (double)wd[j] * wd[j];
                    if (fabs(w2 - s2) > 1e-5 * s2 || a2 < w2)
                        fail_msg("%s row %d: norms w2 %.9g a2 %.9g, dequantized sum of squares %.9g", g4_dtype_name(dt), r, w2, a2, s2);
                }
                if (t == T - 1) assert_true(nrm[2] == 0);
                const double B = sqrt(w2) * nrm[2] + g * sqrt(a2) * (nrm[0] + nrm[1]);
                const double d = fabs((double)ye[t * N + r] - ya[t * N + r]);
                if (d > B)
                    fail_msg("%s %s t=%d row %d: exact %.9g, int8 %.9g, |diff| %.3g > bound %.3g", k->name,
                             g4_dtype_name(dt), t, r, ye[t * N + r], ya[t * N + r], d, B);
                if (t == T - 1) {
                    worst_g = d / B > worst_g ? d / B : worst_g;
                    continue;
                }
                worst = d / B > worst ? d / B : worst;
                bsum += B;
                ysq += (double)ye[t * N + r] * ye[t * N + r];
            }
        }
        const double spread = sqrt(ysq / ((T - 1) * N)), bmean = bsum / ((T - 1) * N);
        printf("  %-8s %-5s largest |diff| / bound %.3f (x = x-hat: %.2g), mean bound / rms logit %.3f\n", k->name,
               g4_dtype_name(dt), worst, worst_g, bmean / spread);
        assert_true(bmean < spread);
        free(wq), free(xq);
    }
    free(w), free(x);
}

static void test_bound_scalar(void **state) {
    (void)state;
    check_path(g4_kernels_scalar());
}

static void test_bound_avx2(void **state) {
    (void)state;
    if (!g4_kernels_avx2()) skip();
    check_path(g4_kernels_avx2());
}

static void test_bound_avx512(void **state) {
    (void)state;
    if (!g4_kernels_avx512()) skip();
    check_path(g4_kernels_avx512());
}

/* a row of zeros and a weightless type: the norms say so */
static void test_norms_edges(void **state) {
    (void)state;
    unsigned char blk[34] = {0};
    double w2 = 1, a2 = 1;
    assert_int_equal(g4_quant_row_norms(G4_DT_Q8_0, blk, 32, &w2, &a2), 1);
    assert_true(w2 == 0 && a2 == 0);
    assert_int_equal(g4_quant_row_norms(G4_DT_BF16, blk, 16, &w2, &a2), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bound_scalar),
        cmocka_unit_test(test_bound_avx2),
        cmocka_unit_test(test_bound_avx512),
        cmocka_unit_test(test_norms_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
