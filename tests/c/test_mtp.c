/* test_mtp.c — the MTP drafter (src/model/mtp.c) against transformers' assisted generation
 * (tests/fixtures/mtp/<drafter>/goldens.json, tools/reference/record_mtp_goldens.py) on the
 * g4-causal-tiny target, standalone of any speculative loop:
 *   - first round after the prompt's prefill: drafted ids identical, each step's drafter logits
 *     within 1e-4 of the largest |logit|;
 *   - the whole generation, with transformers' _assisted_decoding loop written out here (verify:
 *     the newest token and the drafts in one forward step, whose rows' final hidden states feed
 *     the next round; accept the matching prefix plus the target's token; rewind, leaving the
 *     rejected drafts' K/V in the cache past the accepted position): every round's drafted ids
 *     and accepted count identical, and the output identical to plain greedy;
 *   - the same with the target split over --tp 2 (threads backend);
 *   - bad drafter directories fail with a message; the published 12B assistant's config shape
 *     parses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gemma4c.h"
#include "model/mtp.h"

#define TARGET "tests/fixtures/g4-causal-tiny"
#define MTP_DIR "tests/fixtures/mtp"

static g4_model *load_target_tp(int tp) {
    g4_model_opts o;
    g4_model_opts_default(&o);
    o.tp = tp;   /* 2: threads backend; the drafter reads each KV head from the rank holding it */
    o.ctx = 256;
    o.threads = 2;
    o.verify_rows = 8;
    g4_model *m = NULL;
    if (g4_model_load(TARGET, &o, &m)) fail_msg("target: %s", g4_last_error());
    return m;
}

static g4_model *load_target(void) { return load_target_tp(1); }

static json_t *goldens(const char *name) {
    char path[512];
    snprintf(path, sizeof path, MTP_DIR "/%s/goldens.json", name);
    json_error_t err;
    json_t *g = json_load_file(path, 0, &err);
    if (!g) fail_msg("%s: %s", path, err.text);
    return g;
}

static int ids_of(json_t *a, int32_t *out) {
    for (size_t i = 0; i < json_array_size(a); i++) out[i] = (int32_t)json_integer_value(json_array_get(a, i));
    return (int)json_array_size(a);
}

/* a drafter fixture with its target and transformers' goldens */
typedef struct {
    g4_model *m;
    g4_mtp *d;
    json_t *g, *cases;
    int V, H, n_new;
} mtp_fixture;

static mtp_fixture open_fixture(const char *name, int tp) {
    mtp_fixture f = {.m = load_target_tp(tp)};
    f.V = g4_model_get_info(f.m)->vocab_size, f.H = g4_model_get_info(f.m)->hidden_size;
    char dir[512];
    snprintf(dir, sizeof dir, MTP_DIR "/%s", name);
    if (g4_mtp_load(dir, f.m, &f.d)) fail_msg("%s: %s", dir, g4_last_error());
    f.g = goldens(name), f.cases = json_object_get(f.g, "cases");
    f.n_new = (int)json_integer_value(json_object_get(f.g, "n_new"));
    return f;
}

static void close_fixture(mtp_fixture *f) {
    json_decref(f->g);
    g4_mtp_free(f->d);
    g4_model_free(f->m);
}

static void first_round(const char *name, int tp) {
    mtp_fixture f = open_fixture(name, tp);
    g4_model *m = f.m;
    g4_mtp *d = f.d;
    json_t *cases = f.cases;
    const int V = f.V, H = f.H, n_new = f.n_new;
    float *logits = malloc(sizeof(float) * (size_t)V * 64), *lg = malloc(sizeof(float) * V);
    for (size_t ci = 0; ci < json_array_size(cases); ci++) {
        json_t *c = json_array_get(cases, ci);
        int32_t toks[512], greedy[512];
        const int P = ids_of(json_object_get(c, "prompt"), toks);
        ids_of(json_object_get(c, "greedy"), greedy);
        json_t *r0 = json_array_get(json_object_get(c, "rounds"), 0);
        int32_t want[64], got[64];
        const int K = ids_of(json_object_get(r0, "drafted"), want);
        g4_slot_reset(m, 0);
        assert_int_equal(g4_prefill(m, 0, toks, P, lg), G4_OK);
        toks[P] = g4_argmax(lg, V);
        assert_int_equal(toks[P], greedy[0]);
        float *hid = malloc(sizeof(float) * H);
        assert_int_equal(g4_step_hidden(m, 0, hid), G4_OK);
        g4_draft_ctx ctx = {.tokens = toks, .n = P + 1, .target = m, .slot = 0, .kv_written = P, .hidden = hid};
        int max = g4_mtp_default_k(d) < P + n_new - (P + 1) - 1 ? g4_mtp_default_k(d) : P + n_new - (P + 1) - 1;
        assert_int_equal(g4_mtp_draft(d, &ctx, max, got, logits), K);
        json_t *fl = json_object_get(c, "first_logits");
        assert_int_equal((int)json_array_size(fl), K * V);
        for (int k = 0; k < K; k++) {
            double amax = 0, err = 0;
            for (int i = 0; i < V; i++) {
                const double w = json_real_value(json_array_get(fl, (size_t)k * V + i));
                amax = fabs(w) > amax ? fabs(w) : amax;
                const double e = fabs(w - logits[(size_t)k * V + i]);
                err = e > err ? e : err;
            }
            if (err > 1e-4 * amax)
                fail_msg("%s/%s step %d: max |logit error| %g > 1e-4 x %g", name,
                         json_string_value(json_object_get(c, "name")), k, err, amax);
            if (got[k] != want[k])
                fail_msg("%s/%s step %d: drafted %d, transformers %d", name, json_string_value(json_object_get(c, "name")),
                         k, got[k], want[k]);
        }
        free(hid);
    }
    free(logits), free(lg);
    close_fixture(&f);
}

/* transformers' _assisted_decoding with the drafter, greedy, checked round by round */
static void whole_trace(const char *name, int tp) {
    mtp_fixture f = open_fixture(name, tp);
    g4_model *m = f.m;
    g4_mtp *d = f.d;
    json_t *cases = f.cases;
    const int V = f.V, H = f.H, n_new = f.n_new;
    float *lg = malloc(sizeof(float) * (size_t)V * 65), *hid = malloc(sizeof(float) * H * 65);
    for (size_t ci = 0; ci < json_array_size(cases); ci++) {
        json_t *c = json_array_get(cases, ci), *rounds = json_object_get(c, "rounds");
        const char *cname = json_string_value(json_object_get(c, "name"));
        int32_t toks[512], greedy[512];
        const int P = ids_of(json_object_get(c, "prompt"), toks);
        const int NG = ids_of(json_object_get(c, "greedy"), greedy);
        const int max_length = P + n_new;
        g4_slot_reset(m, 0);
        assert_int_equal(g4_prefill(m, 0, toks, P, lg), G4_OK);
        toks[P] = g4_argmax(lg, V);
        assert_int_equal(g4_step_hidden(m, 0, hid), G4_OK);
        int n = P + 1, kv_written = P, hrow = 0, start = 0;   /* start: the last forward's first row */
        size_t round = 0;
        while (n < max_length) {
            g4_draft_ctx ctx = {.tokens = toks, .n = n, .target = m, .slot = 0, .kv_written = kv_written, .step_start = start,
                                .hidden = hid + (size_t)hrow * H};
            int max = max_length - n - 1 < g4_mtp_default_k(d) ? max_length - n - 1 : g4_mtp_default_k(d);
            int32_t drafts[64];
            const int k = max > 0 ? g4_mtp_draft(d, &ctx, max, drafts, NULL) : 0;
            assert_true(k >= 0);
            if (round >= json_array_size(rounds)) fail_msg("%s/%s: more rounds than transformers", name, cname);
            json_t *r = json_array_get(rounds, round);
            int32_t want[64];
            const int wk = ids_of(json_object_get(r, "drafted"), want);
            int at = 0;
            while (at < k && at < wk && drafts[at] == want[at]) at++;
            if (wk != k || at < k)
                fail_msg("%s/%s round %zu: drafted %d tokens, transformers %d; draft %d is %d, transformers %d", name, cname,
                         round, k, wk, at, at < k ? drafts[at] : -1, at < wk ? want[at] : -1);
            /* verify: tokens[n - 1] then the drafts in one step of k + 1 rows */
            int32_t sel[65], in[65];
            for (int i = 0; i <= k; i++) in[i] = i == 0 ? toks[n - 1] : drafts[i - 1];
            const int slot = 0;
            assert_int_equal(k ? g4_verify(m, 0, in, k + 1, lg) : g4_decode(m, 1, &slot, in, lg), G4_OK);
            for (int i = 0; i <= k; i++) {
                sel[i] = g4_argmax(lg + (size_t)i * V, V);
                assert_int_equal(g4_step_hidden(m, i, hid + (size_t)i * H), G4_OK);
            }
            kv_written = n + k;
            start = n - 1;
            int acc = 0;
            while (acc < k && drafts[acc] == sel[acc]) acc++;
            int valid = acc + 1;
            if (valid > max_length - n) valid = max_length - n;
            acc = valid - 1;
            if ((int)json_integer_value(json_object_get(r, "accepted")) != acc)
                fail_msg("%s/%s round %zu: accepted %d, transformers %lld", name, cname, round, acc,
                         (long long)json_integer_value(json_object_get(r, "accepted")));
            for (int i = 0; i < valid; i++) toks[n + i] = sel[i];
            n += valid;
            hrow = acc;
            assert_int_equal(g4_slot_rewind(m, 0, n - 1), G4_OK);
            round++;
        }
        assert_int_equal(round, json_array_size(rounds));
        assert_int_equal(n - P, NG);
        for (int i = 0; i < NG; i++)
            if (toks[P + i] != greedy[i]) fail_msg("%s/%s: token %d is %d, plain greedy %d", name, cname, i, toks[P + i], greedy[i]);
    }
    free(lg), free(hid);
    close_fixture(&f);
}

static void first_round_random(void **s) { (void)s; first_round("random", 1); }
static void first_round_friendly(void **s) { (void)s; first_round("friendly", 1); }
static void first_round_ordered(void **s) { (void)s; first_round("friendly-ordered", 1); }
static void trace_random(void **s) { (void)s; whole_trace("random", 1); }
static void trace_friendly(void **s) { (void)s; whole_trace("friendly", 1); }
static void trace_ordered(void **s) { (void)s; whole_trace("friendly-ordered", 1); }
/* the target split over --tp 2: sliding KV heads one a rank, the full layer's one replicated,
 * the embedding rows in two vocab halves */
static void first_round_ordered_tp2(void **s) { (void)s; first_round("friendly-ordered", 2); }
static void trace_friendly_tp2(void **s) { (void)s; whole_trace("friendly", 2); }

/* a target directory, a missing directory and a drafter whose backbone does not match the target
 * are refused with a message naming the problem */
static void bad_drafters(void **s) {
    (void)s;
    g4_model *m = load_target();
    g4_mtp *d = NULL;
    assert_int_not_equal(g4_mtp_load(TARGET, m, &d), G4_OK);
    assert_non_null(strstr(g4_last_error(), "not a Gemma 4 MTP drafter"));
    assert_int_not_equal(g4_mtp_load(MTP_DIR "/no-such-drafter", m, &d), G4_OK);
    assert_non_null(strstr(g4_last_error(), "cannot open"));
    g4_model_opts o;
    g4_model_opts_default(&o);
    o.ctx = 64;
    g4_model *other = NULL;
    assert_int_equal(g4_model_load("tests/fixtures/g4-cond-tiny", &o, &other), G4_OK);
    assert_int_not_equal(g4_mtp_load(MTP_DIR "/random", other, &d), G4_OK);
    assert_non_null(strstr(g4_last_error(), "the target's"));
    assert_null(d);
    g4_model_free(other);
    /* the published 12B assistant's config.json shape parses; only the target differs */
    char dir[] = "/tmp/g4-mtp-cfg-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"architectures\": [\"Gemma4UnifiedAssistantForCausalLM\"], \"model_type\": \"gemma4_unified_assistant\","
          " \"backbone_hidden_size\": 3840, \"use_ordered_embeddings\": false, \"tie_word_embeddings\": true,"
          " \"num_centroids\": 2048, \"centroid_intermediate_top_k\": 32, \"text_config\": {"
          " \"model_type\": \"gemma4_unified_text\", \"hidden_size\": 1024, \"intermediate_size\": 8192,"
          " \"num_hidden_layers\": 4, \"layer_types\": [\"sliding_attention\", \"sliding_attention\","
          " \"sliding_attention\", \"full_attention\"], \"num_attention_heads\": 16, \"num_key_value_heads\": 8,"
          " \"num_global_key_value_heads\": 1, \"head_dim\": 256, \"global_head_dim\": 512, \"attention_k_eq_v\": true,"
          " \"sliding_window\": 1024, \"rms_norm_eps\": 1e-06, \"vocab_size\": 262144, \"final_logit_softcapping\": null,"
          " \"num_kv_shared_layers\": 4, \"hidden_size_per_layer_input\": 0, \"use_double_wide_mlp\": false,"
          " \"rope_parameters\": {\"full_attention\": {\"partial_rotary_factor\": 0.25, \"rope_theta\": 1000000.0,"
          " \"rope_type\": \"proportional\"}, \"sliding_attention\": {\"rope_theta\": 10000.0, \"rope_type\": \"default\"}},"
          " \"hidden_activation\": \"gelu_pytorch_tanh\", \"tie_word_embeddings\": true}}", f);
    fclose(f);
    assert_int_not_equal(g4_mtp_load(dir, m, &d), G4_OK);
    assert_non_null(strstr(g4_last_error(), "drafter vocabulary 262144 != the target's 512"));
    remove(path);
    rmdir(dir);
    g4_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(first_round_random), cmocka_unit_test(first_round_friendly),
        cmocka_unit_test(first_round_ordered), cmocka_unit_test(trace_random),
        cmocka_unit_test(trace_friendly), cmocka_unit_test(trace_ordered),
        cmocka_unit_test(first_round_ordered_tp2), cmocka_unit_test(trace_friendly_tp2),
        cmocka_unit_test(bad_drafters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
