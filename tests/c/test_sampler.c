/* test_sampler.c — the sampler chain (greedy, seeds, temperature, top-k/p, min-p, softcap,
 * penalties, suppressed tokens) and g4_logprobs against hand-computed distributions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4c.h"

static g4_sampler *mk(float temp, int top_k, float top_p, float min_p, uint64_t seed, int V, float cap) {
    g4_sampler_params p;
    g4_sampler_params_default(&p);
    p.temperature = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.seed = seed;
    g4_sampler *s = NULL;
    assert_int_equal(g4_sampler_new(&p, V, cap, &s), G4_OK);
    return s;
}

/* Draws n tokens from fixed logits and returns the counts per id. */
static void histo(g4_sampler *s, const float *x, int V, int n, int *cnt) {
    memset(cnt, 0, (size_t)V * sizeof *cnt);
    for (int i = 0; i < n; i++) {
        int t = g4_sampler_sample(s, x);
        assert_true(t >= 0 && t < V);
        cnt[t]++;
    }
}

static void test_greedy_is_raw_argmax(void **st) {
    (void)st;
    float x[5] = {1, 7, 3, 7, -2};
    g4_sampler *s = mk(0, 0, 1, 0, 1, 5, 30);
    for (int i = 0; i < 3; i++) assert_int_equal(g4_sampler_sample(s, x), 1);   /* first on ties */
    g4_sampler_free(s);
}

static void test_seed_reproducible(void **st) {
    (void)st;
    enum { V = 50, N = 200 };
    float x[V];
    for (int i = 0; i < V; i++) x[i] = (float)((i * 37) % 11) * 0.3f;
    int a[N], b[N], c[N];
    g4_sampler *s1 = mk(1, 0, 1, 0, 42, V, 0), *s2 = mk(1, 0, 1, 0, 42, V, 0), *s3 = mk(1, 0, 1, 0, 43, V, 0);
    for (int i = 0; i < N; i++) {
        a[i] = g4_sampler_sample(s1, x);
        b[i] = g4_sampler_sample(s2, x);
        c[i] = g4_sampler_sample(s3, x);
    }
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a);
    g4_sampler_free(s1); g4_sampler_free(s2); g4_sampler_free(s3);
}

static void test_temperature_matches_softmax(void **st) {
    (void)st;
    enum { V = 4, N = 40000 };
    float x[V] = {1.0f, 2.0f, 0.0f, 1.5f};
    const float T = 2.0f;
    int cnt[V];
    g4_sampler *s = mk(T, 0, 1, 0, 7, V, 0);
    histo(s, x, V, N, cnt);
    double z = 0;
    for (int i = 0; i < V; i++) z += exp(x[i] / T);
    for (int i = 0; i < V; i++) assert_true(fabs(cnt[i] / (double)N - exp(x[i] / T) / z) < 0.01);
    g4_sampler_free(s);
}

static void test_top_k_and_top_p_and_min_p(void **st) {
    (void)st;
    enum { V = 3, N = 20000 };
    float x[V] = {logf(0.5f), logf(0.3f), logf(0.2f)};
    int cnt[V];
    g4_sampler *s = mk(1, 1, 1, 0, 3, V, 0);   /* top_k 1 = greedy */
    histo(s, x, V, N, cnt);
    assert_int_equal(cnt[0], N);
    g4_sampler_free(s);
    s = mk(1, 0, 0.7f, 0, 3, V, 0);            /* top_p 0.7 keeps {0.5, 0.3} */
    histo(s, x, V, N, cnt);
    assert_int_equal(cnt[2], 0);
    assert_true(fabs(cnt[0] / (double)N - 0.625) < 0.015);
    g4_sampler_free(s);
    s = mk(1, 0, 1, 0.5f, 3, V, 0);            /* min_p 0.5: p >= 0.25 keeps {0.5, 0.3} */
    histo(s, x, V, N, cnt);
    assert_int_equal(cnt[2], 0);
    assert_true(cnt[1] > N / 4);
    g4_sampler_free(s);
    s = mk(1, 2, 1, 0, 3, V, 0);               /* top_k 2 keeps {0.5, 0.3} */
    histo(s, x, V, N, cnt);
    assert_int_equal(cnt[2], 0);
    assert_true(fabs(cnt[0] / (double)N - 0.625) < 0.015);
    g4_sampler_free(s);
}

/* A flat head wider than the sampler's first 64-candidate window forces the top-p growth path. */
static void test_top_p_large_vocab(void **st) {
    (void)st;
    enum { V = 5000, N = 20000 };
    float *x = malloc(V * sizeof *x);
    int *cnt = malloc(V * sizeof *cnt);
    for (int i = 0; i < V; i++) x[i] = i < 300 ? 0.0f : -30.0f;   /* 300 equal tokens hold ~all mass */
    g4_sampler *s = mk(1, 0, 0.49f, 0, 9, V, 0);   /* 0.49 * 300 -> the first 147 */
    histo(s, x, V, N, cnt);
    int distinct = 0, outside = 0;
    for (int i = 0; i < V; i++) {
        if (cnt[i]) distinct++;
        if (cnt[i] && i >= 150) outside++;
    }
    /* ties break by id: the kept head is ids 0..~147, never the rest */
    assert_int_equal(outside, 0);
    assert_true(distinct > 140);
    g4_sampler_free(s);
    free(x);
    free(cnt);
}

static void test_softcap_flattens(void **st) {
    (void)st;
    enum { V = 2, N = 20000 };
    float x[V] = {10.0f, 9.0f};
    int cnt[V];
    g4_sampler *s = mk(1, 0, 1, 0, 5, V, 1.0f);   /* cap 1: tanh(10) ~ tanh(9) ~ 1 */
    histo(s, x, V, N, cnt);
    assert_true(fabs(cnt[0] / (double)N - 0.5) < 0.02);
    g4_sampler_free(s);
    s = mk(1, 0, 1, 0, 5, V, 0);
    histo(s, x, V, N, cnt);
    assert_true(fabs(cnt[0] / (double)N - 1 / (1 + exp(-1.0))) < 0.02);
    g4_sampler_free(s);
}

static void test_suppressed_never_drawn(void **st) {
    (void)st;
    enum { V = 3, N = 5000 };
    float x[V] = {-INFINITY, 0.0f, 0.0f};
    int cnt[V];
    g4_sampler *s = mk(1, 0, 1, 0, 11, V, 30.0f);   /* softcap must not revive -inf */
    histo(s, x, V, N, cnt);
    assert_int_equal(cnt[0], 0);
    g4_sampler_free(s);
}

static void test_penalties(void **st) {
    (void)st;
    float x[4] = {5, 4, 3, 0};
    g4_sampler_params p;
    g4_sampler_params_default(&p);
    p.temperature = 0;
    p.presence_penalty = 1.5f;   /* 5-1.5 < 4: the runner-up wins next */
    g4_sampler *s;
    assert_int_equal(g4_sampler_new(&p, 4, 0, &s), G4_OK);
    assert_int_equal(g4_sampler_sample(s, x), 0);
    assert_int_equal(g4_sampler_sample(s, x), 1);
    assert_int_equal(g4_sampler_sample(s, x), 0);   /* presence is not cumulative: 3.5 > 3 */
    g4_sampler_free(s);
    p.presence_penalty = 0;
    p.frequency_penalty = 0.6f;   /* token 0 after k uses: 5 - 0.6k */
    assert_int_equal(g4_sampler_new(&p, 4, 0, &s), G4_OK);
    assert_int_equal(g4_sampler_sample(s, x), 0);   /* 5 */
    assert_int_equal(g4_sampler_sample(s, x), 0);   /* 4.4 > 4 */
    assert_int_equal(g4_sampler_sample(s, x), 1);   /* 3.8 < 4 */
    g4_sampler_free(s);
}

static void test_logprobs(void **st) {
    (void)st;
    float x[4] = {2.0f, -1.0f, 0.5f, 3.0f};
    float lp;
    int32_t ids[3];
    float lps[3];
    int k = g4_logprobs(x, 4, 0, 2, 3, &lp, ids, lps);
    double z = 0;
    for (int i = 0; i < 4; i++) z += exp(x[i]);
    assert_int_equal(k, 3);
    assert_true(fabs(lp - (0.5 - log(z))) < 1e-5);
    assert_int_equal(ids[0], 3);
    assert_int_equal(ids[1], 0);
    assert_int_equal(ids[2], 2);
    assert_true(fabs(lps[0] - (3.0 - log(z))) < 1e-5);
    /* with a softcap the distribution is that of cap*tanh(x/cap) */
    g4_logprobs(x, 4, 2.0f, 3, 0, &lp, NULL, NULL);
    z = 0;
    for (int i = 0; i < 4; i++) z += exp(2.0 * tanh(x[i] / 2.0));
    assert_true(fabs(lp - (2.0 * tanh(1.5) - log(z))) < 1e-5);
}

static void test_invalid_params(void **st) {
    (void)st;
    g4_sampler_params p;
    g4_sampler *s;
    g4_sampler_params_default(&p);
    p.temperature = -1;
    assert_int_equal(g4_sampler_new(&p, 10, 0, &s), G4_ERR_INPUT);
    assert_non_null(strstr(g4_last_error(), "temperature"));
    g4_sampler_params_default(&p);
    p.top_p = 0;
    assert_int_equal(g4_sampler_new(&p, 10, 0, &s), G4_ERR_INPUT);
    g4_sampler_params_default(&p);
    p.min_p = 2;
    assert_int_equal(g4_sampler_new(&p, 10, 0, &s), G4_ERR_INPUT);
    g4_sampler_params_default(&p);
    p.top_k = -3;
    assert_int_equal(g4_sampler_new(&p, 10, 0, &s), G4_ERR_INPUT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_is_raw_argmax),
        cmocka_unit_test(test_seed_reproducible),
        cmocka_unit_test(test_temperature_matches_softmax),
        cmocka_unit_test(test_top_k_and_top_p_and_min_p),
        cmocka_unit_test(test_top_p_large_vocab),
        cmocka_unit_test(test_softcap_flattens),
        cmocka_unit_test(test_suppressed_never_drawn),
        cmocka_unit_test(test_penalties),
        cmocka_unit_test(test_logprobs),
        cmocka_unit_test(test_invalid_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
