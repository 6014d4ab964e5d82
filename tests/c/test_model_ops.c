/* test_model_ops.c — RoPE (default and proportional) and single-head attention against
 * straightforward double-precision formulas, the thread pool's coverage of its tasks, and
 * greedy decoding's argmax against the plain loop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/threadpool.h"
#include "gemma4c.h"
#include "kernels/kernels.h"
#include "model/rope.h"

static void test_rope_default(void **state) {
    (void)state;
    g4_rope_params rp = {G4_ROPE_DEFAULT, 10000.0, 1.0, 1.0};
    const int D = 16;
    float *f = g4_rope_inv_freq(&rp, D);
    for (int i = 0; i < D / 2; i++) assert_true(fabs(f[i] - pow(10000.0, -2.0 * i / D)) < 1e-6 * f[i] + 1e-12);
    float x[16], y[16], cs[16];
    for (int i = 0; i < D; i++) x[i] = (float)(i + 1) / D;
    memcpy(y, x, sizeof x);
    g4_rope_table(f, D, 0, cs);
    g4_rope_apply(y, cs, D);
    for (int i = 0; i < D; i++) assert_true(y[i] == x[i]);   /* position 0 is the identity */
    const int pos = 37;
    g4_rope_table(f, D, pos, cs);
    g4_rope_apply(y, cs, D);
    for (int i = 0; i < D / 2; i++) {
        double a = pos * pow(10000.0, -2.0 * i / D);
        double e1 = x[i] * cos(a) - x[i + D / 2] * sin(a), e2 = x[i + D / 2] * cos(a) + x[i] * sin(a);
        assert_true(fabs(y[i] - e1) < 1e-5 && fabs(y[i + D / 2] - e2) < 1e-5);
    }
    free(f);
}

static void test_rope_proportional(void **state) {
    (void)state;
    /* 12B full layer: D 512, partial 0.25 → 64 rotated pairs with frequencies over the full D */
    g4_rope_params rp = {G4_ROPE_PROPORTIONAL, 1e6, 0.25, 1.0};
    const int D = 512;
    float *f = g4_rope_inv_freq(&rp, D);
    for (int i = 0; i < 64; i++) assert_true(fabs(f[i] - pow(1e6, -2.0 * i / D)) < 1e-6 * f[i]);
    for (int i = 64; i < D / 2; i++) assert_true(f[i] == 0.0f);
    float x[512], cs[512];
    for (int i = 0; i < D; i++) x[i] = sinf((float)i);
    float y[512];
    memcpy(y, x, sizeof x);
    g4_rope_table(f, D, 1000, cs);
    g4_rope_apply(y, cs, D);
    for (int i = 64; i < D / 2; i++) assert_true(y[i] == x[i] && y[i + D / 2] == x[i + D / 2]);
    assert_true(y[0] != x[0]);
    free(f);
}

static void attend_ref(const float *q, const float *K, const float *V, int cap, int lo, int hi, int D,
                       float scale, double *out) {
    double mx = -INFINITY, w[512], sum = 0;
    for (int t = lo; t <= hi; t++) {
        double s = 0;
        for (int d = 0; d < D; d++) s += (double)q[d] * K[(t % cap) * D + d];
        w[t - lo] = s * scale;
        if (w[t - lo] > mx) mx = w[t - lo];
    }
    for (int t = lo; t <= hi; t++) sum += (w[t - lo] = exp(w[t - lo] - mx));
    for (int d = 0; d < D; d++) {
        out[d] = 0;
        for (int t = lo; t <= hi; t++) out[d] += w[t - lo] / sum * V[(t % cap) * D + d];
    }
}

static void test_attend_paths(void **state) {
    (void)state;
    const int D = 24, cap = 40;
    float q[24], K[40 * 24], V[40 * 24], sc[64], out[24];
    unsigned s = 3;
    for (int i = 0; i < cap * D; i++) { s = s * 1664525u + 1013904223u; K[i] = (float)((s >> 9) % 2000) / 1000 - 1; }
    for (int i = 0; i < cap * D; i++) { s = s * 1664525u + 1013904223u; V[i] = (float)((s >> 9) % 2000) / 1000 - 1; }
    for (int i = 0; i < D; i++) q[i] = (float)i / D - 0.5f;
    const g4_kernels *paths[2] = {g4_kernels_scalar(), g4_kernels_avx2()};
    /* a window that wraps the ring (lo..hi crosses cap) and one that doesn't */
    int spans[3][2] = {{0, 0}, {3, 20}, {30, 65}};
    for (int p = 0; p < 2; p++) {
        if (!paths[p]) continue;
        for (int k = 0; k < 3; k++) {
            double ref[24];
            attend_ref(q, K, V, cap, spans[k][0], spans[k][1], D, 1.0f, ref);
            paths[p]->attend(q, K, V, cap, spans[k][0], spans[k][1], D, 1.0f, sc, out);
            for (int d = 0; d < D; d++) assert_true(fabs(out[d] - ref[d]) < 1e-5);
        }
    }
}

static atomic_int hits[1000];
static void mark(void *ctx, int task, int thread) {
    (void)ctx;
    (void)thread;
    atomic_fetch_add(&hits[task], 1);
}

static void test_threadpool(void **state) {
    (void)state;
    g4_pool *p = g4_pool_new(3);
    assert_non_null(p);
    for (int round = 0; round < 50; round++) {
        int n = 1 + round * 19 % 1000;
        for (int i = 0; i < n; i++) atomic_store(&hits[i], 0);
        g4_pool_run(p, n, mark, NULL);
        for (int i = 0; i < n; i++) assert_int_equal(atomic_load(&hits[i]), 1);
    }
    g4_pool_free(p);
}

/* Back-to-back loops with few tasks and more threads than cores: each loop's tasks must run
 * exactly once, with that loop's function and context, and finish before g4_pool_run returns.
 * (A worker finishing the last task of one loop used to read the next loop's task count while
 * the word still held the old generation, claim a task early and let the caller return while it
 * ran: the forward pass's back-to-back row passes hit it under load.) */
typedef struct {
    int id;
    atomic_int done[4];
} loop_ctx;
static atomic_int wrong;
static void run_a(void *ctx, int task, int thread) {
    (void)thread;
    loop_ctx *c = ctx;
    if (c->id != 0) atomic_fetch_add(&wrong, 1);
    atomic_fetch_add(&c->done[task], 1);
}
static void run_b(void *ctx, int task, int thread) {
    (void)thread;
    loop_ctx *c = ctx;
    if (c->id != 1) atomic_fetch_add(&wrong, 1);
    for (volatile int spin = 0; spin < 50; spin++) {}
    atomic_fetch_add(&c->done[task], 1);
}

static void test_threadpool_back_to_back(void **state) {
    (void)state;
    g4_pool *p = g4_pool_new(4);
    assert_non_null(p);
    loop_ctx a = {.id = 0}, b = {.id = 1};
    for (int round = 0; round < 200000; round++) {
        loop_ctx *c = round & 1 ? &b : &a;
        const int n = 2 + round % 3;
        for (int i = 0; i < 4; i++) atomic_store(&c->done[i], 0);
        g4_pool_run(p, n, round & 1 ? run_b : run_a, c);
        for (int i = 0; i < 4; i++)
            if (atomic_load(&c->done[i]) != (i < n)) {
                fail_msg("round %d: task %d ran %d times (n_tasks %d)", round, i, atomic_load(&c->done[i]), n);
            }
    }
    assert_int_equal(atomic_load(&wrong), 0);
    g4_pool_free(p);
}

/* the plain loop g4_argmax must match: the first index of the largest value, NaNs never winning
 * except at index 0 */
static int argmax_plain(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static void test_argmax(void **state) {
    (void)state;
    enum { N = 262144 + 13 };
    float *x = malloc(N * sizeof *x);
    assert_non_null(x);
    srand(7);
    int checked = 0;
    for (int n = 0; n < 70; n++)   /* every length around the 8 lanes and their tail */
        for (int trial = 0; trial < 40; trial++) {
            for (int i = 0; i < n; i++) x[i] = (float)(rand() % 5) - 2.0f;   /* many ties */
            const int kind = trial % 5;
            if (kind == 1 && n) x[rand() % n] = NAN;
            if (kind == 2 && n) x[0] = NAN;
            if (kind == 3)
                for (int i = 0; i < n; i++) x[i] = -INFINITY;
            if (kind == 4 && n > 1) x[n - 1] = 9.0f;   /* the maximum in the scalar tail */
            assert_int_equal(g4_argmax(x, n), argmax_plain(x, n));
            checked++;
        }
    for (int i = 0; i < N; i++) x[i] = (float)rand() / RAND_MAX;   /* a vocabulary's worth */
    x[200001] = 2.0f;
    x[262140] = 2.0f;
    assert_int_equal(g4_argmax(x, N), 200001);
    assert_int_equal(g4_argmax(x, N), argmax_plain(x, N));
    assert_true(checked == 70 * 40);
    free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threadpool_back_to_back),
        cmocka_unit_test(test_rope_default),
        cmocka_unit_test(test_rope_proportional),
        cmocka_unit_test(test_attend_paths),
        cmocka_unit_test(test_threadpool),
        cmocka_unit_test(test_argmax),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
