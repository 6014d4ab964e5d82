/* test_ggml_num.c — the `--numerics ggml` kernels (src/kernels/cpu/ggml_num.c, src/model/rope.c)
 * against ggml itself: the fp16 GELU table, ggml_vec_dot_f32 and ggml_vec_soft_max_f32's exps,
 * bit for bit, from vectors that tools/reference/ggml_numerics_vectors.c wrote with libggml-cpu
 * (tests/fixtures/ggml-num/); plus the rules around them (GELU's +-10 shortcuts, rms norm's
 * order of roundings, attention's two P·V sum orders) against scalar statements of ggml's code. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "convert/quantize.h"
#include "kernels/kernels.h"
#include "model/rope.h"
#include "test_util.h"

static void *fixture(const char *name, size_t *n) {
    char path[256];
    snprintf(path, sizeof path, "tests/fixtures/ggml-num/%s", name);
    void *p = slurp(path, n);
    assert_non_null(p);
    return p;
}

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Every entry of ggml_table_gelu_f16 (NaN inputs included). */
static void test_gelu_table(void **state) {
    (void)state;
    size_t n;
    uint16_t *tab = fixture("gelu_f16.u16", &n);
    assert_int_equal(n, 2 << 16);
    int bad = 0;
    for (int h = 0; h < 1 << 16; h++)
        if (g4_ggml_gelu_f16((uint16_t)h) != tab[h] && bad++ < 5)
            print_error("h=0x%04x: ours 0x%04x, ggml 0x%04x\n", h, g4_ggml_gelu_f16((uint16_t)h), tab[h]);
    assert_int_equal(bad, 0);
    free(tab);
}

/* ggml_vec_geglu_f32 (GGML_GELU_FP16): x <= -10 → 0, x >= 10 → x*g, else table[fp16(x)] * g. */
static void test_gelu_mul(void **state) {
    (void)state;
    size_t n;
    uint16_t *tab = fixture("gelu_f16.u16", &n);
    const float g[] = {-10.5f, -10.0f, -9.999f, -3.3f, -0.0f, 0.0f, 1e-6f, 0.7f, 2.0000002f, 9.999f, 10.0f, 12.25f};
    const int N = sizeof g / sizeof *g;
    float u[12], y[12];
    for (int i = 0; i < N; i++) u[i] = 0.5f + 0.25f * (float)i;
    g4_ggml_gelu_mul(g, u, N, y);
    for (int i = 0; i < N; i++) {
        const float want = g[i] <= -10.0f ? 0.0f : g[i] >= 10.0f ? g[i] * u[i]
                                                  : g4_f16_to_f32(tab[g4_f32_to_f16(g[i])]) * u[i];
        assert_int_equal(bits(y[i]), bits(want));
    }
    free(tab);
}

static void test_vec_dot_f32(void **state) {
    (void)state;
    static const int DOT_N[] = {7, 13, 16, 32, 40, 45, 64, 96, 256, 512};
    size_t n;
    float *v = fixture("dot_f32.f32", &n), *p = v;
    for (size_t k = 0; k < sizeof DOT_N / sizeof *DOT_N; k++) {
        const int m = DOT_N[k];
        const float got = g4_ggml_vec_dot_f32(m, p, p + m);
        if (bits(got) != bits(p[2 * m])) print_error("n=%d: ours %.9g, ggml %.9g\n", m, got, p[2 * m]);
        assert_int_equal(bits(got), bits(p[2 * m]));
        p += 2 * m + 1;
    }
    assert_int_equal((size_t)(p - v) * 4, n);
    free(v);
}

/* ggml_vec_soft_max_f32 on AVX2: exps from ggml_v_expf, 8-lane block sums added in double. */
static void test_softmax_exp(void **state) {
    (void)state;
    static const int SM_N[] = {8, 64, 256};
    size_t n;
    char *v = fixture("softmax.f32", &n), *p = v;
    for (size_t k = 0; k < sizeof SM_N / sizeof *SM_N; k++) {
        const int m = SM_N[k];
        const float *x = (const float *)p, mx = x[m], *y = x + m + 1;
        double want_sum, sum = 0;
        memcpy(&want_sum, y + m, 8);
        for (int b = 0; b < m; b += 8) {
            float l[8];
            for (int i = 0; i < 8; i++) {
                l[i] = g4_ggml_expf(x[b + i] - mx);
                assert_int_equal(bits(l[i]), bits(y[b + i]));
            }
            sum += (double)(((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])));
        }
        assert_true(sum == want_sum);
        p += (size_t)(2 * m + 1) * 4 + 8;
    }
    assert_int_equal((size_t)(p - v), n);
    free(v);
}

/* ggml_compute_forward_rms_norm_f32 + MUL: float squares summed in double, float mean,
 * 1.0f/sqrtf, then (x * scale) * w — here on values where the exact mode's order differs. */
static void test_rmsnorm(void **state) {
    (void)state;
    enum { N = 96 };
    float x[N], w[N], y[N], y0[N];
    for (int i = 0; i < N; i++) { x[i] = sinf(0.37f * i) * (1.0f + i); w[i] = 0.5f + cosf(0.11f * i); }
    g4_ggml_rmsnorm(x, w, 1e-6f, N, y);
    g4_ggml_rmsnorm(x, NULL, 1e-6f, N, y0);
    double sum = 0;
    for (int i = 0; i < N; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / N), scale = 1.0f / sqrtf(mean + 1e-6f);
    for (int i = 0; i < N; i++) {
        assert_int_equal(bits(y0[i]), bits(x[i] * scale));
        assert_int_equal(bits(y[i]), bits(y0[i] * w[i]));
    }
}

/* ggml_rope_cache_init: theta = pos, times powf(base, -2/D) per pair, in float; unrotated pairs
 * (inv_freq 0) divided by the freq factor 1e30; NEOX rotation with ggml's FMA contractions. */
static void test_rope(void **state) {
    (void)state;
    enum { D = 16 };
    const float inv[D / 2] = {1, 0.3f, 0.1f, 0.03f, 0, 0, 0, 0};
    float cs[D], x[D], x0[D];
    g4_rope_table_ggml(1e6f, inv, D, 37, cs);
    const float ts = powf(1e6f, -2.0f / D);
    float theta = 37.0f;
    for (int i = 0; i < D / 2; i++) {
        const float t = inv[i] == 0.0f ? theta / 1e30f : theta;
        assert_int_equal(bits(cs[i]), bits(cosf(t)));
        assert_int_equal(bits(cs[D / 2 + i]), bits(sinf(t)));
        theta *= ts;
    }
    for (int i = 0; i < D; i++) x[i] = x0[i] = 0.3f * (float)(i - 7) + 0.05f;   /* no zeros: 0 - x1*sin(~1e-30) is not 0 */
    g4_rope_apply_ggml(x, cs, D);
    for (int i = 0; i < D / 2; i++) {
        assert_int_equal(bits(x[i]), bits(fmaf(x0[i], cs[i], -(x0[i + D / 2] * cs[D / 2 + i]))));
        assert_int_equal(bits(x[i + D / 2]), bits(fmaf(x0[i], cs[D / 2 + i], x0[i + D / 2] * cs[i])));
    }
    for (int i = 4; i < D / 2; i++) assert_int_equal(bits(x[i]), bits(x0[i]));   /* unrotated pairs */
}

/* Attention: scores by ggml_vec_dot_f32, the softmax above, P·V in tinyBLAS order (batched) or
 * ggml_vec_dot_f32 order (one token); both close to the exact kernel, and the two orders are what
 * the statements below compute. A ring cache (cap < positions) reads position t from t % cap. */
static void test_attend(void **state) {
    (void)state;
    enum { D = 32, CAP = 48, LO = 21, HI = 60 };
    float q[D], K[CAP * D], V[CAP * D], sc[CAP], ob[D], od[D], oe[D];
    for (int i = 0; i < D; i++) q[i] = cosf(0.7f * i);
    for (int i = 0; i < CAP * D; i++) { K[i] = sinf(0.013f * i * i); V[i] = cosf(0.021f * i); }
    int lo = LO, hi = HI;
    g4_ggml_attend_block(q, D, ob, D, 1, 1, &lo, &hi, K, V, CAP, D, 1.0f, sc, 1);
    g4_ggml_attend_block(q, D, od, D, 1, 1, &lo, &hi, K, V, CAP, D, 1.0f, sc, 0);
    g4_kernels_scalar()->attend(q, K, V, CAP, LO, HI, D, 1.0f, sc, oe);
    float p[HI + 1], mx = -INFINITY;
    for (int t = LO; t <= HI; t++) { p[t] = g4_ggml_vec_dot_f32(D, K + (t % CAP) * D, q); mx = fmaxf(mx, p[t]); }
    double sum = 0;
    for (int b = LO & ~7; b <= HI; b += 8) {
        float l[8];
        for (int i = 0; i < 8; i++) l[i] = b + i < LO || b + i > HI ? 0.0f : (p[b + i] = g4_ggml_expf(p[b + i] - mx));
        sum += (double)(((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])));
    }
    const float inv = (float)(1.0 / sum);
    for (int d = 0; d < D; d++) {
        float a8[8] = {0}, a32[32] = {0};
        for (int t = LO; t <= HI; t++) {
            a8[t & 7] = fmaf(V[(t % CAP) * D + d], p[t] * inv, a8[t & 7]);
            a32[t & 31] = fmaf(V[(t % CAP) * D + d], p[t] * inv, a32[t & 31]);
        }
        const float wb = ((a8[0] + a8[4]) + (a8[2] + a8[6])) + ((a8[1] + a8[5]) + (a8[3] + a8[7]));
        float l[8];
        for (int i = 0; i < 8; i++) l[i] = (a32[i] + a32[16 + i]) + (a32[8 + i] + a32[24 + i]);
        const float wd = ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
        assert_int_equal(bits(ob[d]), bits(wb));
        assert_int_equal(bits(od[d]), bits(wd));
        assert_true(fabsf(ob[d] - oe[d]) < 1e-5f && fabsf(od[d] - oe[d]) < 1e-5f);
    }
}

static void test_softcap(void **state) {
    (void)state;
    float v[4] = {-100.0f, -1.5f, 0.25f, 44.0f}, w[4];
    memcpy(w, v, sizeof v);
    g4_ggml_softcap(v, 4, 30.0f);
    for (int i = 0; i < 4; i++) assert_int_equal(bits(v[i]), bits(tanhf(w[i] * (1.0f / 30.0f)) * 30.0f));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gelu_table), cmocka_unit_test(test_gelu_mul), cmocka_unit_test(test_vec_dot_f32),
        cmocka_unit_test(test_softmax_exp), cmocka_unit_test(test_rmsnorm), cmocka_unit_test(test_rope),
        cmocka_unit_test(test_attend), cmocka_unit_test(test_softcap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
