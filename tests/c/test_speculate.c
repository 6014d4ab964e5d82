/* test_speculate.c — speculative decoding (src/generate/speculate.c, draft_ngram.c) on the tiny
 * causal fixture (sliding window 16) with the scalar kernels, whose results do not depend on how
 * many rows a step carries: the n-gram drafter's lookups; greedy output, the slot's position and
 * every hidden state a drafter is handed identical to plain decoding, with n-gram drafts and with
 * an oracle drafter that proposes plain greedy's tokens with planted errors (long accepted runs,
 * rejections, ring rewinds past the window); max tokens and stop strings ending inside an
 * accepted run where plain decoding ends; seeded sampling identical to plain seeded sampling, and
 * its distribution equal to the target's (chi-square over many seeds); the verify step's bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4c.h"
#include "generate/draft.h"

#define FIXTURE "tests/fixtures/g4-causal-tiny"
enum { K = 6, CHUNK = 4, MAXGEN = 96, CTX = 256 };

/* The prompt's step: a prefill, or with `reuse` set (the sampling test's thousands of runs of one
 * prompt) the slot set back to the end of the same prompt prefilled before, its logits kept. */
static struct {
    int reuse, n;
    int32_t ids[64];
    float logits[512];
} cache;

static g4_model *load(void) {
    setenv("G4_CPU_ISA", "scalar", 1);   /* row-invariant: a verify row equals a one-row step */
    g4_model_opts o;
    g4_model_opts_default(&o);
    o.threads = 1;   /* a tiny model: threads would only wait on each other */
    o.ctx = CTX;
    o.prefill_chunk = CHUNK;   /* small rings: window 16 + 7 rows of slack */
    o.verify_rows = K + 1;
    g4_model *m = NULL;
    if (g4_model_load(FIXTURE, &o, &m) != G4_OK) fail_msg("%s", g4_last_error());
    cache.reuse = cache.n = 0;
    return m;
}

static void start(g4_model *m, const int32_t *ids, int n, int am, float *logits, int32_t *next) {
    const int V = g4_model_get_info(m)->vocab_size;
    if (cache.reuse && cache.n == n && !memcmp(cache.ids, ids, sizeof(int32_t) * (size_t)n) &&
        g4_slot_rewind(m, 0, n) == G4_OK) {
        if (!am) memcpy(logits, cache.logits, sizeof(float) * (size_t)V);
        *next = g4_argmax(cache.logits, V);
        return;
    }
    g4_slot_reset(m, 0);
    if (am) {
        assert_int_equal(g4_prefill_argmax(m, 0, ids, n, next), G4_OK);
        return;
    }
    assert_int_equal(g4_prefill(m, 0, ids, n, logits), G4_OK);
    if (cache.reuse && n <= 64 && V <= 512) {
        cache.n = n;
        memcpy(cache.ids, ids, sizeof(int32_t) * (size_t)n);
        memcpy(cache.logits, logits, sizeof(float) * (size_t)V);
    }
}

/* ---------------------------------------------------------------- plain decoding, the reference */

typedef struct {
    int32_t tok[MAXGEN];
    float *hidden;       /* [MAXGEN][H]: the hidden state of the row that chose tok[i] */
    int n;
    g4_finish fin;
    int end_pos;         /* the slot's position afterwards */
    char text[4096];
} run_out;

static g4_gen *new_gen(g4_model *m, const g4_tokenizer *tok, const g4_gen_config *cfg, float temp, int top_k,
                       uint64_t seed, int max_tokens, const char *stop) {
    g4_gen_params gp;
    g4_gen_params_default(&gp);
    gp.sp.temperature = temp;
    gp.sp.top_k = top_k;
    gp.sp.seed = seed;
    gp.max_tokens = max_tokens;
    gp.ignore_eos = 1;
    gp.text = tok != NULL;
    gp.stop = &stop;
    gp.n_stop = stop ? 1 : 0;
    g4_gen *g = NULL;
    if (g4_gen_new(m, 0, tok, cfg, &gp, &g)) fail_msg("%s", g4_last_error());
    return g;
}

static void text_add(run_out *o, const char *t, size_t len) {
    const size_t have = strlen(o->text);
    assert_true(have + len < sizeof o->text);
    memcpy(o->text + have, t, len);
    o->text[have + len] = 0;
}

static void plain(g4_model *m, g4_gen *g, const int32_t *ids, int n, run_out *o) {
    const int V = g4_model_get_info(m)->vocab_size, H = g4_model_get_info(m)->hidden_size;
    float *logits = malloc(sizeof(float) * V);
    int slot = 0;
    const int am = g4_gen_argmax_only(g);
    int32_t next = 0;
    memset(o->text, 0, sizeof o->text);
    o->n = 0;
    start(m, ids, n, am, logits, &next);
    for (;;) {
        if (o->hidden) assert_int_equal(g4_step_hidden(m, 0, o->hidden + (size_t)o->n * H), G4_OK);
        int32_t t = g4_gen_next(g, am ? NULL : logits, next);
        const char *text;
        size_t len;
        o->fin = g4_gen_accept(g, t, &text, &len);
        text_add(o, text, len);
        o->tok[o->n++] = t;
        if (o->fin) break;
        assert_true(o->n < MAXGEN);
        assert_int_equal(am ? g4_decode_argmax(m, 1, &slot, &t, &next) : g4_decode(m, 1, &slot, &t, logits), G4_OK);
    }
    o->end_pos = g4_slot_pos(m, 0);
    free(logits);
}

/* ---------------------------------------------------------------- speculative runs */

/* An oracle: proposes the reference's next tokens, each wrong where its index is a multiple of
 * `err`; checks what the loop hands it (kv_written is the slot's position: nothing rewound yet;
 * the hidden state is plain decoding's for the same token). */
typedef struct {
    const run_out *ref;
    int prompt_n, err, H, calls;
    int check_hidden;
} oracle;

static int oracle_propose(g4_drafter *d, const g4_draft_ctx *c, int max_draft, int32_t *out) {
    oracle *o = d->impl;
    o->calls++;
    assert_int_equal(c->kv_written, g4_slot_pos(c->target, c->slot));
    assert_true(c->kv_written >= c->n - 1);
    const int i = c->n - o->prompt_n;   /* tokens generated so far: ref->tok[0..i) */
    assert_true(i >= 1 && i <= o->ref->n);
    assert_memory_equal(c->tokens + o->prompt_n, o->ref->tok, sizeof(int32_t) * (size_t)i);
    if (o->check_hidden) {
        assert_non_null(c->hidden);
        assert_memory_equal(c->hidden, o->ref->hidden + (size_t)(i - 1) * o->H, sizeof(float) * (size_t)o->H);
    }
    int nd = 0;
    for (; nd < max_draft && i + nd < o->ref->n; nd++) {
        const int j = i + nd;
        out[nd] = j % o->err ? o->ref->tok[j] : (o->ref->tok[j] + 1) % 512;
    }
    return nd;
}

typedef struct {
    run_out *o;
    int stop_at;         /* emit's non-zero return at this token index (-1: never) */
} emit_state;

static int emit_cb(void *ctx, int32_t tok, g4_finish fin, const char *text, size_t len) {
    emit_state *e = ctx;
    e->o->tok[e->o->n++] = tok;
    e->o->fin = fin;
    text_add(e->o, text, len);
    return e->o->n - 1 == e->stop_at;
}

typedef struct {
    int rounds, max_accepted, total;
} round_log;

static void on_round(void *ctx, const int32_t *drafted, int n, int accepted) {
    round_log *r = ctx;
    (void)drafted;
    assert_true(n >= 1 && n <= K && accepted >= 0 && accepted <= n);
    r->rounds++;
    r->total += accepted;
    if (accepted > r->max_accepted) r->max_accepted = accepted;
}

static void spec(g4_model *m, g4_gen *g, g4_drafter *d, const int32_t *ids, int n, run_out *o, round_log *rl,
                 int stop_at) {
    const int V = g4_model_get_info(m)->vocab_size;
    float *logits = malloc(sizeof(float) * V);
    int32_t next = 0;
    const int am = g4_gen_argmax_only(g);
    memset(o->text, 0, sizeof o->text);
    o->n = 0;
    start(m, ids, n, am, logits, &next);
    g4_spec_params p = {.drafter = d, .draft_max = K, .on_round = on_round, .ctx = rl};
    g4_spec *s = NULL;
    assert_int_equal(g4_spec_new(m, 0, &p, &s), G4_OK);
    emit_state e = {o, stop_at};
    g4_finish fin;
    if (g4_spec_run(s, g, ids, n, am ? NULL : logits, next, emit_cb, &e, &fin)) fail_msg("%s", g4_last_error());
    assert_int_equal(fin, o->fin == G4_FIN_NONE ? G4_FIN_STOP : o->fin);
    o->fin = fin;
    o->end_pos = g4_slot_pos(m, 0);
    g4_spec_free(s);
    free(logits);
}

static void prompt(int32_t *ids, int n, int period, unsigned seed) {
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        ids[i] = i < period ? 3 + (int32_t)((seed >> 8) % 500) : ids[i - period];
    }
    ids[0] = 2;
}

static void assert_same(const run_out *a, const run_out *b) {
    assert_int_equal(a->n, b->n);
    assert_memory_equal(a->tok, b->tok, sizeof(int32_t) * (size_t)a->n);
    assert_int_equal(a->fin, b->fin);
    assert_int_equal(a->end_pos, b->end_pos);
    assert_string_equal(a->text, b->text);
}

/* ---------------------------------------------------------------- tests */

static void test_ngram_lookup(void **state) {
    (void)state;
    g4_drafter *d;
    assert_int_equal(g4_drafter_ngram_new(0, 3, &d), G4_ERR_INPUT);
    assert_int_equal(g4_drafter_ngram_new(3, 2, &d), G4_ERR_INPUT);
    assert_int_equal(g4_drafter_ngram_new(1, 65, &d), G4_ERR_INPUT);
    assert_int_equal(g4_drafter_ngram_new(2, 4, &d), G4_OK);
    int32_t out[8];
    /* the most recent earlier "7 8" (4-grams and 3-grams have none): what followed it, then the
     * text taken to repeat with its period (3) */
    const int32_t a[] = {7, 8, 9, 1, 7, 8, 6, 7, 8};
    g4_draft_ctx c = {.tokens = a, .n = 9};
    assert_int_equal(d->propose(d, &c, 5, out), 5);
    const int32_t wa[] = {6, 7, 8, 6, 7};
    assert_memory_equal(out, wa, sizeof wa);
    /* the longest n wins over a more recent shorter match */
    const int32_t b[] = {1, 2, 3, 4, 9, 2, 3, 5, 1, 2, 3};
    c = (g4_draft_ctx){.tokens = b, .n = 11};
    assert_int_equal(d->propose(d, &c, 2, out), 2);
    assert_int_equal(out[0], 4);
    assert_int_equal(out[1], 9);
    /* no earlier occurrence of 2 or more tokens: nothing */
    const int32_t e[] = {1, 2, 3, 4, 5, 1};
    c = (g4_draft_ctx){.tokens = e, .n = 6};
    assert_int_equal(d->propose(d, &c, 4, out), 0);
    assert_int_equal(g4_drafter_default_max(d), 8);
    g4_drafter_free(d);
}

static void test_greedy_identical(void **state) {
    (void)state;
    g4_model *m = load();
    g4_drafter *ng;
    assert_int_equal(g4_drafter_ngram_new(1, 4, &ng), G4_OK);
    const int H = g4_model_get_info(m)->hidden_size;
    round_log all = {0};
    for (int c = 0; c < 6; c++) {
        int32_t ids[40];
        const int n = 20 + 3 * c, period = c < 4 ? 3 + c : n;   /* repetitive, then not */
        prompt(ids, n, period, 11u + (unsigned)c);
        run_out ref = {.hidden = malloc(sizeof(float) * MAXGEN * H)}, got = {0};
        g4_gen *g = new_gen(m, NULL, NULL, 0, 0, 0, 80, NULL);
        plain(m, g, ids, n, &ref);
        g4_gen_free(g);
        assert_int_equal(ref.n, 80);

        /* n-gram drafts */
        round_log rl = {0};
        g = new_gen(m, NULL, NULL, 0, 0, 0, 80, NULL);
        spec(m, g, ng, ids, n, &got, &rl, -1);
        g4_gen_free(g);
        assert_same(&got, &ref);
        all.rounds += rl.rounds;
        if (rl.max_accepted > all.max_accepted) all.max_accepted = rl.max_accepted;

        /* an oracle with errors every 5th / 13th token: long runs accepted, then rejections */
        for (int err = 5; err <= 13; err += 8) {
            oracle o = {.ref = &ref, .prompt_n = n, .err = err, .H = H, .check_hidden = 1};
            g4_drafter od = {.propose = oracle_propose, .needs_hidden = 1, .default_max = K, .impl = &o};
            rl = (round_log){0};
            g = new_gen(m, NULL, NULL, 0, 0, 0, 80, NULL);
            spec(m, g, &od, ids, n, &got, &rl, -1);
            g4_gen_free(g);
            assert_same(&got, &ref);
            assert_true(o.calls > 0);
            assert_true(rl.max_accepted >= (err == 5 ? 4 : K));   /* whole rounds accepted */
            assert_true(rl.total < 79);                           /* and some rejected */
        }
        free(ref.hidden);
    }
    /* the n-gram drafts were used: some rounds kept two or more */
    assert_true(all.rounds > 10);
    assert_true(all.max_accepted >= 2);
    g4_drafter_free(ng);
    g4_model_free(m);
}

/* max tokens and stop strings inside an accepted run; a caller's stop; the context's end */
static void test_boundaries(void **state) {
    (void)state;
    g4_model *m = load();
    g4_tokenizer *tok;
    assert_int_equal(g4_tokenizer_load(FIXTURE, &tok), G4_OK);
    const int H = g4_model_get_info(m)->hidden_size;
    int32_t ids[24];
    prompt(ids, 24, 4, 5);
    run_out ref = {.hidden = malloc(sizeof(float) * MAXGEN * H)}, got = {0};
    g4_gen *g = new_gen(m, tok, NULL, 0, 0, 0, 60, NULL);
    plain(m, g, ids, 24, &ref);
    g4_gen_free(g);
    oracle o = {.ref = &ref, .prompt_n = 24, .err = 1000, .H = H};
    g4_drafter od = {.propose = oracle_propose, .default_max = K, .impl = &o};
    round_log rl = {0};
    for (int max = 1; max <= 20; max++) {   /* every max lands inside a round of K accepted drafts */
        run_out want = {0};
        g = new_gen(m, tok, NULL, 0, 0, 0, max, NULL);
        plain(m, g, ids, 24, &want);
        g4_gen_free(g);
        g = new_gen(m, tok, NULL, 0, 0, 0, max, NULL);
        spec(m, g, &od, ids, 24, &got, &rl, -1);
        g4_gen_free(g);
        assert_same(&got, &want);
        assert_int_equal(got.fin, G4_FIN_LENGTH);
    }
    /* stop strings: pieces of the reference's text, ending the output inside accepted runs */
    const size_t tl = strlen(ref.text);
    assert_true(tl > 40);
    for (size_t at = 3; at + 4 < tl; at += tl / 6) {
        char stop[8] = {0};
        memcpy(stop, ref.text + at, 3);
        run_out want = {0};
        g = new_gen(m, tok, NULL, 0, 0, 0, 60, stop);
        plain(m, g, ids, 24, &want);
        g4_gen_free(g);
        assert_int_equal(want.fin, G4_FIN_STOP);
        g = new_gen(m, tok, NULL, 0, 0, 0, 60, stop);
        spec(m, g, &od, ids, 24, &got, &rl, -1);
        g4_gen_free(g);
        assert_same(&got, &want);
    }
    /* the caller stops at token 9 (inside a round): the slot holds every token but that one */
    g = new_gen(m, tok, NULL, 0, 0, 0, 60, NULL);
    spec(m, g, &od, ids, 24, &got, &rl, 9);
    g4_gen_free(g);
    assert_int_equal(got.n, 10);
    assert_memory_equal(got.tok, ref.tok, sizeof(int32_t) * 10);
    assert_int_equal(got.end_pos, 24 + 9);
    /* the context's end: plain and speculative stop at the same token */
    g = new_gen(m, tok, NULL, 0, 0, 0, 0, NULL);
    run_out want = {0};
    int32_t *longp = malloc(sizeof(int32_t) * CTX);
    prompt(longp, CTX - 30, 4, 5);
    plain(m, g, longp, CTX - 30, &want);
    assert_true(g4_gen_hit_context(g));
    g4_gen_free(g);
    oracle o2 = {.ref = &want, .prompt_n = CTX - 30, .err = 1000, .H = H};
    od.impl = &o2;
    g = new_gen(m, tok, NULL, 0, 0, 0, 0, NULL);
    spec(m, g, &od, longp, CTX - 30, &got, &rl, -1);
    assert_true(g4_gen_hit_context(g));
    g4_gen_free(g);
    assert_same(&got, &want);
    free(longp);
    free(ref.hidden);
    g4_tokenizer_free(tok);
    g4_model_free(m);
}

/* Seeded sampling: the same tokens as plain seeded sampling, seed by seed (the loop draws exactly
 * as plain decoding does); and the joint distribution of the first two tokens matches the
 * target's, computed from its logits, by a chi-square test, with the second token drafted as a
 * fixed likely-but-not-certain token (an always-accepting loop would fail it). */
enum { TOPK = 4, SEEDS = 3000 };

static void probs(const float *logits, int V, float softcap, float temp, int32_t *ids, double *p) {
    /* the sampler's pipeline for temperature + top-k: softcap, / temp, the top 4, softmax */
    double x[512];
    for (int i = 0; i < V; i++) x[i] = softcap > 0 ? tanh(logits[i] / softcap) * softcap / temp : logits[i] / temp;
    for (int k = 0; k < TOPK; k++) {
        int b = -1;
        for (int i = 0; i < V; i++) {
            int used = 0;
            for (int j = 0; j < k; j++) used |= ids[j] == i;
            if (!used && (b < 0 || x[i] > x[b])) b = i;
        }
        ids[k] = b;
    }
    double z = 0;
    for (int k = 0; k < TOPK; k++) z += exp(x[ids[k]] - x[ids[0]]);
    for (int k = 0; k < TOPK; k++) p[k] = exp(x[ids[k]] - x[ids[0]]) / z;
}

typedef struct {
    int32_t second[TOPK];   /* the draft after each possible first token */
    int32_t first[TOPK];
} fixed_drafter;

static int fixed_propose(g4_drafter *d, const g4_draft_ctx *c, int max_draft, int32_t *out) {
    fixed_drafter *f = d->impl;
    (void)max_draft;
    for (int k = 0; k < TOPK; k++)
        if (c->tokens[c->n - 1] == f->first[k]) { out[0] = f->second[k]; return 1; }
    return 0;
}

static void test_sampling(void **state) {
    (void)state;
    g4_model *m = load();
    const g4_model_info *info = g4_model_get_info(m);
    const int V = info->vocab_size;
    assert_true(V <= 512);
    const float temp = 2.0f;
    int32_t ids[17];
    prompt(ids, 16, 16, 3);
    float *lg = malloc(sizeof(float) * V);
    int32_t first[TOPK], second[TOPK][TOPK];
    double p1[TOPK], p2[TOPK][TOPK];
    g4_slot_reset(m, 0);
    assert_int_equal(g4_prefill(m, 0, ids, 16, lg), G4_OK);
    probs(lg, V, info->final_logit_softcap, temp, first, p1);
    fixed_drafter fd;
    for (int a = 0; a < TOPK; a++) {
        ids[16] = first[a];
        g4_slot_reset(m, 0);
        assert_int_equal(g4_prefill(m, 0, ids, 17, lg), G4_OK);
        probs(lg, V, info->final_logit_softcap, temp, second[a], p2[a]);
        fd.first[a] = first[a];
        fd.second[a] = second[a][1];   /* the second most likely: rejected a fair share of times */
    }
    g4_drafter d = {.propose = fixed_propose, .default_max = 1, .impl = &fd};
    cache.reuse = 1;
    int count[TOPK][TOPK] = {{0}};
    long accepted = 0, rounds = 0;
    for (int seed = 0; seed < SEEDS; seed++) {
        run_out sp = {0}, pl = {0};
        round_log rl = {0};
        g4_gen *g = new_gen(m, NULL, NULL, temp, TOPK, (uint64_t)seed, 3, NULL);
        spec(m, g, &d, ids, 16, &sp, &rl, -1);
        g4_gen_free(g);
        accepted += rl.total;
        rounds += rl.rounds;
        if (seed < 200) {   /* seed by seed, plain sampling's tokens */
            g = new_gen(m, NULL, NULL, temp, TOPK, (uint64_t)seed, 3, NULL);
            plain(m, g, ids, 16, &pl);
            g4_gen_free(g);
            assert_same(&sp, &pl);
        }
        int a = -1, b = -1;
        for (int k = 0; k < TOPK; k++) if (sp.tok[0] == first[k]) a = k;
        assert_true(a >= 0);
        for (int k = 0; k < TOPK; k++) if (sp.tok[1] == second[a][k]) b = k;
        assert_true(b >= 0);
        count[a][b]++;
    }
    /* chi-square over the 16 cells (those expected >= 5), df <= 15: 37.7 is p = 0.001 */
    double chi = 0;
    int cells = 0;
    for (int a = 0; a < TOPK; a++)
        for (int b = 0; b < TOPK; b++) {
            const double e = SEEDS * p1[a] * p2[a][b];
            if (e < 5) continue;
            chi += (count[a][b] - e) * (count[a][b] - e) / e;
            cells++;
        }
    print_message("chi-square %.2f over %d cells; drafts accepted %ld of %ld\n", chi, cells, accepted, rounds);
    assert_true(cells >= 8);
    assert_true(chi < 37.7);
    assert_true(accepted > rounds / 10 && accepted < rounds * 9 / 10);   /* the draft was at stake */
    free(lg);
    g4_model_free(m);
}

static void test_verify_bounds(void **state) {
    (void)state;
    g4_model *m = load();
    const int V = g4_model_get_info(m)->vocab_size, H = g4_model_get_info(m)->hidden_size;
    int32_t ids[K + 2], next[K + 2];
    prompt(ids, K + 2, K + 2, 9);
    float *h = malloc(sizeof(float) * H);
    g4_slot_reset(m, 0);
    assert_int_equal(g4_prefill_argmax(m, 0, ids, 3, next), G4_OK);
    assert_int_equal(g4_verify_argmax(m, 0, ids, K + 2, next), G4_ERR_INPUT);   /* over verify_rows */
    assert_int_equal(g4_slot_pos(m, 0), 3);
    assert_int_equal(g4_verify_argmax(m, 0, ids, K + 1, next), G4_OK);
    assert_int_equal(g4_slot_pos(m, 0), 3 + K + 1);
    assert_int_equal(g4_step_hidden(m, K, h), G4_OK);
    assert_int_equal(g4_step_hidden(m, K + 1, h), G4_ERR_INPUT);
    ids[1] = V;
    assert_int_equal(g4_verify_argmax(m, 0, ids, 2, next), G4_ERR_INPUT);
    /* a generator asking for more drafts than the model was loaded for */
    g4_drafter d = {.default_max = K + 1};
    g4_spec_params p = {.drafter = &d};
    g4_spec *s;
    assert_int_equal(g4_spec_new(m, 0, &p, &s), G4_ERR_INPUT);
    assert_null(s);
    free(h);
    g4_model_free(m);
}

/* A rewind past a verify step's rejected rows leaves their ring entries over the oldest positions:
 * the slot's floor is that of the position it came back from (window 16, 7 rows of slack: rings of
 * 22), for g4_slot_rewind, a snapshot and its restore; a rewind to that floor recomputes as a
 * fresh prefill does. */
static void test_rewind_after_verify(void **state) {
    (void)state;
    g4_model *m = load();
    const int V = g4_model_get_info(m)->vocab_size;
    int32_t ids[48], next[8];
    prompt(ids, 48, 48, 21);
    float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V);
    g4_slot_reset(m, 0);
    assert_int_equal(g4_prefill_argmax(m, 0, ids, 40, next), G4_OK);
    assert_int_equal(g4_slot_rewind_floor(m, 0), g4_kv_rewind_floor(m, 40));
    assert_int_equal(g4_verify_argmax(m, 0, ids + 40, K + 1, next), G4_OK);   /* positions 40..46 */
    assert_int_equal(g4_slot_rewind(m, 0, 41), G4_OK);                        /* one row kept */
    const int floor = 47 - 22 + 16 - 1;                                       /* 40, not 41's 34 */
    assert_int_equal(g4_kv_rewind_floor(m, 41), 34);
    assert_int_equal(g4_slot_rewind_floor(m, 0), floor);
    g4_kv_snap *snap;
    assert_int_equal(g4_slot_save(m, 0, 1, &snap), G4_OK);
    assert_int_equal(g4_slot_rewind(m, 0, floor - 1), G4_ERR_INPUT);
    g4_slot_reset(m, 0);
    assert_int_equal(g4_slot_rewind_floor(m, 0), 0);
    assert_int_equal(g4_slot_restore(m, 0, snap), G4_OK);
    g4_kv_snap_free(snap);
    assert_int_equal(g4_slot_rewind_floor(m, 0), floor);
    assert_int_equal(g4_slot_rewind(m, 0, floor), G4_OK);
    int slot = 0;
    assert_int_equal(g4_decode(m, 1, &slot, ids + floor, a), G4_OK);
    g4_slot_reset(m, 0);
    assert_int_equal(g4_prefill(m, 0, ids, floor + 1, b), G4_OK);
    assert_memory_equal(a, b, sizeof(float) * V);
    free(a);
    free(b);
    g4_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ngram_lookup),
        cmocka_unit_test(test_greedy_identical),
        cmocka_unit_test(test_boundaries),
        cmocka_unit_test(test_sampling),
        cmocka_unit_test(test_verify_bounds),
        cmocka_unit_test(test_rewind_after_verify),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
