/* test_sampler.c — the sampler chain (greedy, seeds, temperature, top-k/p, min-p, softcap,
 * penalties, suppressed tokens) and g4_logprobs against hand-computed distributions; and the
 * generation helper around it (g4_gen: stop strings and their hold-back, eos ids, max tokens,
 * the context end, suppressed ids) fed chosen tokens over the tiny fixture's model and tokenizer. */
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

/* ---------------------------------------------------------------- g4_gen */

#define FIXTURE "tests/fixtures/g4-cond-tiny"

typedef struct {
    g4_model *m;
    g4_tokenizer *tok;
    int32_t eos[2], suppress[1];
    g4_gen_config cfg;
} gen_fx;

static int gen_setup(void **state) {
    gen_fx *f = calloc(1, sizeof *f);
    g4_model_opts o;
    g4_model_opts_default(&o);
    o.threads = 1;
    o.ctx = 16;
    if (g4_model_load(FIXTURE, &o, &f->m) || g4_tokenizer_load(FIXTURE, &f->tok)) {
        print_error("%s: %s\n", FIXTURE, g4_last_error());
        return -1;
    }
    f->eos[0] = 1;
    f->eos[1] = 6;
    f->cfg = (g4_gen_config){.eos = f->eos, .n_eos = 2};
    g4_sampler_params_default(&f->cfg.defaults);
    *state = f;
    return 0;
}

static int gen_teardown(void **state) {
    gen_fx *f = *state;
    g4_tokenizer_free(f->tok);
    g4_model_free(f->m);
    free(f);
    return 0;
}

/* Feeds the ids of `text` to a fresh g4_gen with one stop string; returns what it handed out. */
static char *feed_text(gen_fx *f, const char *text, const char *stop, int max_tokens, g4_finish *fin, int *n_fed) {
    int32_t *ids;
    size_t n;
    assert_int_equal(g4_tokenize(f->tok, text, strlen(text), 0, &ids, &n), G4_OK);
    g4_gen_params p;
    g4_gen_params_default(&p);
    p.sp.temperature = 0;
    p.stop = &stop;
    p.n_stop = stop ? 1 : 0;
    p.max_tokens = max_tokens;
    g4_gen *g;
    g4_slot_reset(f->m, 0);
    assert_int_equal(g4_gen_new(f->m, 0, f->tok, &f->cfg, &p, &g), G4_OK);
    char *out = calloc(1, strlen(text) + 1);
    *fin = G4_FIN_NONE;
    *n_fed = 0;
    for (size_t i = 0; i < n && !*fin; i++) {
        const char *t;
        size_t len;
        *fin = g4_gen_accept(g, ids[i], &t, &len);
        strncat(out, t, len);
        ++*n_fed;
    }
    assert_int_equal(g4_gen_n_tokens(g), *n_fed);
    g4_gen_free(g);
    free(ids);
    return out;
}

static void test_gen_stop_string_cut_and_held_back(void **state) {
    gen_fx *f = *state;
    const char *text = "Hello world, stop here";
    g4_finish fin;
    int fed;
    /* ", stop" arrives over several tokens: the ", " before it was never handed out */
    char *out = feed_text(f, text, ", stop", 0, &fin, &fed);
    assert_int_equal(fin, G4_FIN_STOP);
    assert_string_equal(out, "Hello world");
    free(out);
    /* a pending prefix ("here!" against "here") is released when the generation ends */
    int32_t *ids;
    size_t n;
    assert_int_equal(g4_tokenize(f->tok, text, strlen(text), 0, &ids, &n), G4_OK);
    out = feed_text(f, text, "here!", (int)n, &fin, &fed);
    assert_int_equal(fin, G4_FIN_LENGTH);
    assert_int_equal(fed, (int)n);
    assert_string_equal(out, text);
    free(out);
    free(ids);
    out = feed_text(f, text, NULL, 0, &fin, &fed);   /* no stop string: everything, unfinished */
    assert_int_equal(fin, G4_FIN_NONE);
    assert_string_equal(out, text);
    free(out);
}

static void test_gen_eos_max_tokens_and_context(void **state) {
    gen_fx *f = *state;
    g4_gen_params p;
    g4_gen_params_default(&p);
    p.sp.temperature = 0;
    g4_gen *g;
    const char *t;
    size_t len;
    g4_slot_reset(f->m, 0);
    assert_int_equal(g4_gen_new(f->m, 0, f->tok, &f->cfg, &p, &g), G4_OK);
    assert_true(g4_gen_argmax_only(g));
    assert_int_equal(g4_gen_accept(g, 301, &t, &len), G4_FIN_NONE);
    assert_int_equal(g4_gen_accept(g, 6, &t, &len), G4_FIN_STOP);   /* the second eos id, too */
    assert_int_equal(len, 0);
    g4_gen_free(g);

    p.ignore_eos = 1;
    p.max_tokens = 3;
    assert_int_equal(g4_gen_new(f->m, 0, f->tok, &f->cfg, &p, &g), G4_OK);
    assert_int_equal(g4_gen_accept(g, 1, &t, &len), G4_FIN_NONE);
    assert_int_equal(g4_gen_accept(g, 6, &t, &len), G4_FIN_NONE);
    assert_int_equal(g4_gen_accept(g, 301, &t, &len), G4_FIN_LENGTH);
    assert_false(g4_gen_hit_context(g));
    g4_gen_free(g);

    /* a slot holding its whole context cannot take the next token: a LENGTH stop, so marked */
    p.max_tokens = 0;
    int32_t ids[16], next;
    for (int i = 0; i < 16; i++) ids[i] = i ? 301 : 2;
    assert_int_equal(g4_prefill_argmax(f->m, 0, ids, 15, &next), G4_OK);
    assert_int_equal(g4_gen_new(f->m, 0, f->tok, &f->cfg, &p, &g), G4_OK);
    assert_int_equal(g4_gen_accept(g, next, &t, &len), G4_FIN_NONE);
    assert_int_equal(g4_decode_argmax(f->m, 1, (int[]){0}, &next, &next), G4_OK);
    assert_int_equal(g4_gen_accept(g, next, &t, &len), G4_FIN_LENGTH);
    assert_true(g4_gen_hit_context(g));
    g4_gen_free(g);
    g4_slot_reset(f->m, 0);
}

static void test_gen_suppressed_ids(void **state) {
    gen_fx *f = *state;
    const int V = g4_model_get_info(f->m)->vocab_size;
    f->suppress[0] = 5;
    g4_gen_config cfg = f->cfg;
    cfg.suppress = f->suppress;
    cfg.n_suppress = 1;
    g4_gen_params p;
    g4_gen_params_default(&p);
    p.sp.temperature = 0;
    p.text = 0;
    g4_gen *g;
    assert_int_equal(g4_gen_new(f->m, 0, NULL, &cfg, &p, &g), G4_OK);
    assert_false(g4_gen_argmax_only(g));   /* suppression needs the logits */
    float *logits = calloc((size_t)V, sizeof *logits);
    logits[5] = 9;
    logits[7] = 3;
    assert_int_equal(g4_gen_next(g, logits, 5), 7);
    assert_true(isinf(logits[5]) && logits[5] < 0);
    assert_int_equal(g4_gen_next(g, NULL, 5), 5);   /* an argmax handed in is taken as it is */
    free(logits);
    g4_gen_free(g);
    assert_int_equal(g4_gen_new(f->m, 0, NULL, &cfg, &(g4_gen_params){.text = 1}, &g), G4_ERR_INPUT);
}

/* logit_bias goes on the raw logits before sampling, greedy included; -100 is a ban; an id outside
 * the vocabulary is refused. */
static void test_gen_logit_bias(void **state) {
    gen_fx *f = *state;
    const int V = g4_model_get_info(f->m)->vocab_size;
    const int32_t ids[3] = {7, 9, 11};
    const float bias[3] = {100, -100, 2.5f};
    g4_gen_params p;
    g4_gen_params_default(&p);
    p.sp.temperature = 0;
    p.text = 0;
    p.bias_ids = ids;
    p.bias = bias;
    p.n_bias = 3;
    g4_gen *g;
    assert_int_equal(g4_gen_new(f->m, 0, NULL, &f->cfg, &p, &g), G4_OK);
    assert_false(g4_gen_argmax_only(g));   /* the bias needs the logits */
    float *logits = calloc((size_t)V, sizeof *logits);
    logits[9] = 50;
    assert_int_equal(g4_gen_next(g, logits, 0), 7);   /* +100 beats 50; 9 is banned */
    assert_true(isinf(logits[9]) && logits[9] < 0);
    assert_float_equal(logits[11], 2.5f, 0);
    g4_gen_free(g);
    const int32_t bad = V;
    p.bias_ids = &bad;
    p.n_bias = 1;
    assert_int_equal(g4_gen_new(f->m, 0, NULL, &f->cfg, &p, &g), G4_ERR_INPUT);
    assert_non_null(strstr(g4_last_error(), "logit_bias"));
    free(logits);
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
    const struct CMUnitTest gen_tests[] = {
        cmocka_unit_test(test_gen_stop_string_cut_and_held_back),
        cmocka_unit_test(test_gen_eos_max_tokens_and_context),
        cmocka_unit_test(test_gen_suppressed_ids),
        cmocka_unit_test(test_gen_logit_bias),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    return rc | cmocka_run_group_tests(gen_tests, gen_setup, gen_teardown);
}
