/* test_rows_e2e.c — row invariance end to end on the tiny fixtures, on every kernel path this CPU
 * has (G4_CPU_ISA): (a) g4_decode of n slots at once gives, bit for bit, the logits each slot gets
 * decoding alone (the public header's promise), over several steps at different positions; (b) a
 * prefill chunk of R <= G4_ROWS_MAX_ROWS rows after a prefix (a speculative verify's shape) gives
 * the last logits of R single-token decode steps (on amx up to 15 rows: from G4_X3_MIN_ROWS, bf16
 * weights take the tiles' GEMM). bf16 (safetensors and GGUF) and Q8_0 weights;
 * the kernels' own invariance per weight type is test_rows_invariant.c's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4c.h"
#include "kernels/matmul.h"

static const char *const isas[] = {"scalar", "avx2", "avx512", "avx512bf16", "amx"};
static const char *const models[] = {"tests/fixtures/g4-cond-tiny", "tests/fixtures/g4-gguf/cond-bf16.gguf",
                                     "tests/fixtures/g4-gguf/cond-q8_0.gguf"};
enum { NS = 6, STEPS = 3 };

static g4_model *load(const char *path, const char *isa, int n_slots, int chunk) {
    setenv("G4_CPU_ISA", isa, 1);
    g4_model_opts o;
    g4_model_opts_default(&o);
    o.threads = 2;
    o.ctx = 96;
    o.n_slots = n_slots;
    o.prefill_chunk = chunk;
    g4_model *m = NULL;
    if (g4_model_load(path, &o, &m) != G4_OK) return NULL;   /* a path this CPU lacks */
    return m;
}

static void bits_equal(const float *a, const float *b, int n, const char *what, const char *isa, const char *path,
                       int i) {
    for (int v = 0; v < n; v++)
        if (memcmp(&a[v], &b[v], sizeof(float)))
            fail_msg("%s on %s, %s, case %d: logit %d %.9g vs %.9g", what, isa, path, i, v, a[v], b[v]);
}

/* slots 0..NS-1 decode together, slots NS..2NS-1 (the same prompts) one at a time */
static void test_decode_slots(void **state) {
    (void)state;
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++)
        for (size_t ii = 0; ii < sizeof isas / sizeof isas[0]; ii++) {
            g4_model *m = load(models[mi], isas[ii], 2 * NS, 64);
            if (!m) continue;
            const int V = g4_model_get_info(m)->vocab_size;
            float *all = malloc(sizeof(float) * NS * (size_t)V), *one = malloc(sizeof(float) * (size_t)V);
            int32_t prompt[NS + 4];
            for (int i = 0; i < NS + 4; i++) prompt[i] = 2 + (i * 37) % 200;
            int slots[NS];
            for (int s = 0; s < NS; s++) {   /* slot s: a prompt of s + 3 tokens */
                slots[s] = s;
                assert_int_equal(g4_prefill(m, s, prompt + s % 3, s + 3, NULL), G4_OK);
                assert_int_equal(g4_prefill(m, NS + s, prompt + s % 3, s + 3, NULL), G4_OK);
            }
            for (int step = 0; step < STEPS; step++) {
                int32_t ids[NS];
                for (int s = 0; s < NS; s++) ids[s] = 5 + 11 * s + 7 * step;
                assert_int_equal(g4_decode(m, NS, slots, ids, all), G4_OK);
                for (int s = 0; s < NS; s++) {
                    const int alone = NS + s;
                    assert_int_equal(g4_decode(m, 1, &alone, &ids[s], one), G4_OK);
                    bits_equal(all + (size_t)s * V, one, V, "decode of 6 slots vs alone", isas[ii], models[mi],
                               step * NS + s);
                }
            }
            free(all);
            free(one);
            g4_model_free(m);
        }
}

/* after a 5-token prefix, R tokens as one prefill chunk vs as R decode steps */
static void test_chunk_vs_steps(void **state) {
    (void)state;
    static const int Rs[] = {2, 5, 8, 15, G4_ROWS_MAX_ROWS};
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++)
        for (size_t ii = 0; ii < sizeof isas / sizeof isas[0]; ii++) {
            g4_model *m = load(models[mi], isas[ii], 2, 64);
            if (!m) continue;
            const int V = g4_model_get_info(m)->vocab_size;
            float *a = malloc(sizeof(float) * (size_t)V), *b = malloc(sizeof(float) * (size_t)V);
            int32_t ids[5 + G4_ROWS_MAX_ROWS];
            for (int i = 0; i < 5 + G4_ROWS_MAX_ROWS; i++) ids[i] = 2 + (i * 53) % 230;
            for (size_t ri = 0; ri < sizeof Rs / sizeof Rs[0]; ri++) {
                const int R = Rs[ri];
                if (!strcmp(isas[ii], "amx") && R >= G4_X3_MIN_ROWS) continue;   /* bf16 on tiles from 16 rows */
                g4_slot_reset(m, 0);
                g4_slot_reset(m, 1);
                assert_int_equal(g4_prefill(m, 0, ids, 5, NULL), G4_OK);
                assert_int_equal(g4_prefill(m, 1, ids, 5, NULL), G4_OK);
                assert_int_equal(g4_prefill(m, 0, ids + 5, R, a), G4_OK);
                const int one = 1;
                for (int r = 0; r < R; r++) assert_int_equal(g4_decode(m, 1, &one, ids + 5 + r, b), G4_OK);
                bits_equal(a, b, V, "prefill chunk vs decode steps", isas[ii], models[mi], R);
            }
            free(a);
            free(b);
            g4_model_free(m);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_slots),
        cmocka_unit_test(test_chunk_vs_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
