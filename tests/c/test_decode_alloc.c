/* test_decode_alloc.c — a decode step allocates nothing (the design rule "no allocation inside a decode
 * step"): this binary interposes malloc / calloc / realloc / free / posix_memalign /
 * aligned_alloc / memalign, counts the calls made from any thread while armed, and runs decode
 * steps of the tiny fixtures — one slot and two slots at once, logits and argmax, exact numerics
 * and --act-q8 over quantized weights, and tensor parallelism over thread ranks — after a prefill
 * and one warm-up step. A control allocation, and the model load, show that the counter sees the
 * library's calls. Not built under AddressSanitizer, which owns malloc there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gemma4c.h"

#if defined(__SANITIZE_ADDRESS__)
#define G4_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define G4_ASAN 1
#endif
#endif

#ifndef G4_ASAN
/* glibc's own entry points, under the names it exports for interposers like this one */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

static atomic_int armed;
static atomic_long calls;

static void count(void) {
    if (atomic_load_explicit(&armed, memory_order_relaxed)) atomic_fetch_add(&calls, 1);
}
void *malloc(size_t n) { count(); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { count(); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { count(); return __libc_realloc(p, n); }
void free(void *p) {
    if (p) count();
    __libc_free(p);
}
void *memalign(size_t al, size_t n) { count(); return __libc_memalign(al, n); }
void *aligned_alloc(size_t al, size_t n) { count(); return __libc_memalign(al, n); }
int posix_memalign(void **out, size_t al, size_t n) {
    count();
    void *p = __libc_memalign(al, n);
    if (!p) return 12;   /* ENOMEM */
    *out = p;
    return 0;
}

static void arm(void) {
    atomic_store(&calls, 0);
    atomic_store(&armed, 1);
}
static long disarm(void) {
    atomic_store(&armed, 0);
    return atomic_load(&calls);
}

/* The counter sees allocations (the test could fail). */
static void test_counter_counts(void **state) {
    (void)state;
    void *(*volatile alloc)(size_t) = malloc;
    arm();
    void *p = alloc(64);
    free(p);
    assert_int_equal(disarm(), 2);
}

/* Loads `path`, prefills two slots, warms up, then counts the calls of 4 decode steps of each
 * kind. */
static void decode_allocates_nothing(const char *path, int tp, int act_q8) {
    g4_model_opts o;
    g4_model_opts_default(&o);
    o.threads = 2;
    o.ctx = 64;
    o.n_slots = 2;
    o.tp = tp;
    o.act_q8 = act_q8;
    g4_model *m = NULL;
    arm();   /* loading allocates: the library's calls reach the counter */
    if (g4_model_load(path, &o, &m) != G4_OK) fail_msg("%s: %s", path, g4_last_error());
    assert_true(disarm() > 0);
    const int V = g4_model_get_info(m)->vocab_size;
    float *logits = malloc(sizeof(float) * 2 * (size_t)V);
    const int32_t prompt[5] = {2, 17, 33, 5, 9};
    const int slots[2] = {0, 1};
    int32_t ids[2] = {40, 41}, next[2];
    assert_int_equal(g4_prefill(m, 0, prompt, 5, NULL), G4_OK);
    assert_int_equal(g4_prefill(m, 1, prompt, 3, NULL), G4_OK);
    assert_int_equal(g4_decode(m, 2, slots, ids, logits), G4_OK);   /* warm-up */
    arm();
    for (int s = 0; s < 4; s++) {
        assert_int_equal(g4_decode(m, 1, slots, ids, logits), G4_OK);
        assert_int_equal(g4_decode(m, 2, slots, ids, logits), G4_OK);
        assert_int_equal(g4_decode_argmax(m, 1, slots + 1, ids, next), G4_OK);
        assert_int_equal(g4_decode_argmax(m, 2, slots, ids, next), G4_OK);
    }
    const long n = disarm();
    if (n) fail_msg("%s (tp %d, act_q8 %d): %ld allocator calls in 16 decode steps", path, tp, act_q8, n);
    free(logits);
    g4_model_free(m);
}

static void test_exact(void **state) {
    (void)state;
    decode_allocates_nothing("tests/fixtures/g4-cond-tiny", 1, 0);
}

static void test_tensor_parallel_threads(void **state) {
    (void)state;
    decode_allocates_nothing("tests/fixtures/g4-cond-tiny", 2, 0);
}

static void test_quantized_act_q8(void **state) {
    (void)state;
    decode_allocates_nothing("tests/fixtures/g4-gguf/cond-q8_0.gguf", 1, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_counter_counts), cmocka_unit_test(test_exact),
                                       cmocka_unit_test(test_tensor_parallel_threads),
                                       cmocka_unit_test(test_quantized_act_q8)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
int main(void) {
    puts("test_decode_alloc: skipped under AddressSanitizer (it owns malloc)");
    return 0;
}
#endif
