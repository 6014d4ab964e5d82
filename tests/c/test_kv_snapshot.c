/* test_kv_snapshot.c — the prompt cache's KV operations (src/model/kv_snapshot.c) on the tiny
 * fixture (sliding window 24; 64-row chunks make its rings 87 long), one rank and two (threads
 * backend): a snapshot restored into another slot gives the same logits, bit for bit, as the
 * same computation that never left the slot, and so do the rings alone restored into a slot whose
 * full-layer rows are unchanged; a copied slot decodes as its source; a rewind within the rings
 * matches recomputing; rewinds past the rings or the slot's position are refused. The same with
 * every KV cache type (--kv-type), whose snapshots and cache are the type's bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4c.h"

enum { N = 200, SPLIT = 150, PAST = 80 };

static g4_model *load(int tp, int kv_type) {
    g4_model_opts o;
    g4_model_opts_default(&o);
    o.threads = 2;
    o.ctx = 512;
    o.n_slots = 2;
    o.prefill_chunk = 64;
    o.tp = tp;
    o.kv_type = kv_type;
    g4_model *m = NULL;
    if (g4_model_load("tests/fixtures/g4-cond-tiny", &o, &m) != G4_OK) fail_msg("%s", g4_last_error());
    return m;
}

static void fill(int32_t *ids, int n, unsigned seed) {
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        ids[i] = 3 + (int32_t)((seed >> 8) % 997);
    }
    ids[0] = 2;
}

static float max_rel(const float *a, const float *b, int n) {
    float d = 0, mx = 0;
    for (int i = 0; i < n; i++) {
        if (fabsf(a[i] - b[i]) > d) d = fabsf(a[i] - b[i]);
        if (fabsf(b[i]) > mx) mx = fabsf(b[i]);
    }
    return d / mx;
}

/* returns the bytes of the full snapshot at SPLIT */
static size_t snapshot_ops(int tp, int kv_type) {
    g4_model *m = load(tp, kv_type);
    size_t snap_bytes;
    assert_true(g4_kv_snap_supported(m));
    const int V = g4_model_get_info(m)->vocab_size;
    float *ref = malloc(sizeof(float) * V), *got = malloc(sizeof(float) * V), *two = malloc(sizeof(float) * 2 * V);
    int32_t ids[N], other[PAST];
    fill(ids, N, 7);
    fill(other, PAST, 9);

    /* reference: [0, SPLIT) then [SPLIT, N) in slot 0 */
    assert_int_equal(g4_prefill(m, 0, ids, SPLIT, NULL), G4_OK);
    assert_int_equal(g4_prefill(m, 0, ids + SPLIT, N - SPLIT, ref), G4_OK);

    /* the same in slot 1, saved at SPLIT, run far past it, then restored into slot 0 */
    g4_slot_reset(m, 1);
    assert_int_equal(g4_prefill(m, 1, ids, SPLIT, NULL), G4_OK);
    g4_kv_snap *snap = NULL;
    assert_int_equal(g4_slot_save(m, 1, 1, &snap), G4_OK);
    assert_int_equal(g4_kv_snap_pos(snap), SPLIT);
    assert_true((snap_bytes = g4_kv_snap_bytes(snap)) > 0);
    assert_int_equal(g4_prefill(m, 1, other, PAST, NULL), G4_OK);
    assert_int_equal(g4_kv_rewind_floor(m, SPLIT + PAST), SPLIT + PAST - 64);
    assert_int_equal(g4_slot_rewind(m, 1, SPLIT), G4_ERR_INPUT);        /* the rings moved on */
    assert_int_equal(g4_slot_rewind(m, 1, SPLIT + PAST + 1), G4_ERR_INPUT);   /* past its position */
    g4_slot_reset(m, 0);
    assert_int_equal(g4_slot_restore(m, 0, snap), G4_OK);
    assert_int_equal(g4_slot_pos(m, 0), SPLIT);
    assert_int_equal(g4_prefill(m, 0, ids + SPLIT, N - SPLIT, got), G4_OK);
    assert_memory_equal(got, ref, sizeof(float) * V);
    g4_kv_snap_free(snap);

    /* rings only, back into the slot whose full-layer rows [0, SPLIT) stayed as they were */
    g4_slot_reset(m, 1);
    assert_int_equal(g4_prefill(m, 1, ids, SPLIT, NULL), G4_OK);
    assert_int_equal(g4_slot_save(m, 1, 0, &snap), G4_OK);
    assert_int_equal(g4_prefill(m, 1, other, PAST, NULL), G4_OK);
    assert_int_equal(g4_slot_restore(m, 1, snap), G4_OK);
    assert_int_equal(g4_prefill(m, 1, ids + SPLIT, N - SPLIT, got), G4_OK);
    assert_memory_equal(got, ref, sizeof(float) * V);
    g4_kv_snap_free(snap);

    /* a copy decodes as its source, in one batch */
    assert_int_equal(g4_slot_copy(m, 1, 0), G4_OK);
    assert_int_equal(g4_slot_pos(m, 1), N);
    const int slots[2] = {0, 1};
    const int32_t next[2] = {42, 42};
    assert_int_equal(g4_decode(m, 2, slots, next, two), G4_OK);
    assert_memory_equal(two, two + V, sizeof(float) * V);

    /* back 20 positions, within the rings: the last 20 ids again give the reference's logits */
    assert_int_equal(g4_slot_rewind(m, 1, N - 20), G4_OK);
    assert_int_equal(g4_prefill(m, 1, ids + N - 20, 20, got), G4_OK);
    assert_true(max_rel(got, ref, V) < 1e-5f);
    assert_int_equal(g4_argmax(got, V), g4_argmax(ref, V));

    free(ref);
    free(got);
    free(two);
    g4_model_free(m);
    return snap_bytes;
}

static void test_one_rank(void **state) {
    (void)state;
    snapshot_ops(1, G4_KV_F32);
}

static void test_two_ranks(void **state) {
    (void)state;
    snapshot_ops(2, G4_KV_F32);
}

/* every --kv-type: the same operations, snapshots of the type's row size (head_dim 32: bf16 and
 * f16 2 bytes a value, q8_0 34 bytes a 32-value row, against f32's 128), and the model's
 * kv_bytes in the same ratio */
static void test_kv_types(void **state) {
    (void)state;
    const size_t f32 = snapshot_ops(1, G4_KV_F32);
    assert_int_equal(snapshot_ops(1, G4_KV_BF16) * 2, f32);
    assert_int_equal(snapshot_ops(1, G4_KV_F16) * 2, f32);
    assert_int_equal(snapshot_ops(1, G4_KV_Q8_0) * 128, f32 * 34);
    assert_int_equal(snapshot_ops(2, G4_KV_Q8_0) * 128, snapshot_ops(2, G4_KV_F32) * 34);   /* every rank's shard */
    g4_model *a = load(1, G4_KV_F32), *b = load(1, G4_KV_Q8_0);
    assert_int_equal(g4_model_get_info(b)->kv_bytes * 128, g4_model_get_info(a)->kv_bytes * 34);
    g4_model_free(a);
    g4_model_free(b);
}

/* a type out of range is refused at load */
static void test_bad_kv_type(void **state) {
    (void)state;
    g4_model_opts o;
    g4_model_opts_default(&o);
    o.kv_type = G4_KV_TYPES;
    g4_model *m = NULL;
    assert_int_equal(g4_model_load("tests/fixtures/g4-cond-tiny", &o, &m), G4_ERR_INPUT);
    assert_null(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_rank),
        cmocka_unit_test(test_two_ranks),
        cmocka_unit_test(test_kv_types),
        cmocka_unit_test(test_bad_kv_type),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
