/* test_gguf.c — the GGUF reader on tests/fixtures/quant/tiny.gguf (written by gguf-py's
 * GGUFWriter: one key of every value type, one tensor of every supported type), and its refusal of
 * lying or truncated files: every truncation, bad magic / version / counts / lengths / alignment,
 * offsets past the end, unknown and unsupported tensor types. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf.h"
#include "kernels/kernels.h"
#include "test_util.h"

#define TINY "tests/fixtures/quant/tiny.gguf"

static void test_read_tiny(void **state) {
    (void)state;
    g4_gguf *g;
    assert_int_equal(g4_gguf_open(TINY, &g), G4_OK);
    assert_int_equal(g->version, 3);
    int found;
    int64_t v;
    double d;
    const char *s;
    size_t len;
    struct { const char *key; int64_t want; } ints[] = {
        {"t.u8", 200}, {"t.i8", -100}, {"t.u16", 60000}, {"t.i16", -30000}, {"t.u32", 4000000000LL},
        {"t.i32", -2000000000LL}, {"t.u64", 1LL << 40}, {"t.i64", -(1LL << 40)}};
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
        assert_int_equal(g4_gguf_get_int(g, ints[i].key, &v, &found), G4_OK);
        assert_true(found);
        assert_true(v == ints[i].want);
    }
    assert_int_equal(g4_gguf_get_float(g, "t.f32", &d, &found), G4_OK);
    assert_true(found && d == 0.25);
    assert_int_equal(g4_gguf_get_float(g, "t.f64", &d, &found), G4_OK);
    assert_true(found && d == 1e-300);
    int b = 0;
    assert_int_equal(g4_gguf_get_bool(g, "t.bool", &b, &found), G4_OK);
    assert_true(found && b == 1);
    assert_int_equal(g4_gguf_get_str(g, "t.str", &s, &len, &found), G4_OK);
    assert_true(found && len == 6 && !memcmp(s, "h\xc3\xa9llo", 6));
    assert_int_equal(g4_gguf_get_str(g, "general.architecture", &s, &len, &found), G4_OK);
    assert_true(found && len == 4 && !memcmp(s, "tiny", 4));
    assert_int_equal(g4_gguf_get_int(g, "absent.key", &v, &found), G4_OK);
    assert_false(found);
    /* wrong type is an error naming the key */
    assert_int_equal(g4_gguf_get_int(g, "t.str", &v, &found), G4_ERR_INPUT);
    assert_non_null(strstr(g4_last_error(), "t.str"));
    const g4_gguf_kv *kv;
    assert_int_equal(g4_gguf_get_arr(g, "t.arr_str", G4_GGUF_STRING, &kv), G4_OK);
    assert_non_null(kv);
    assert_int_equal(kv->n, 3);
    const uint8_t *p = kv->val;
    uint64_t sl;
    p = g4_gguf_str_next(p, &s, &sl); assert_true(sl == 1 && s[0] == 'a');
    p = g4_gguf_str_next(p, &s, &sl); assert_true(sl == 0);
    p = g4_gguf_str_next(p, &s, &sl); assert_true(sl == 3 && !memcmp(s, "ccc", 3));
    assert_int_equal(g4_gguf_get_arr(g, "t.arr_i32", G4_GGUF_INT32, &kv), G4_OK);
    assert_true(kv && kv->n == 3 && g4_gguf_arr_i64(kv, 1) == -2);
    assert_int_equal(g4_gguf_get_arr(g, "t.arr_f32", G4_GGUF_FLOAT32, &kv), G4_OK);
    assert_true(kv && g4_gguf_arr_f64(kv, 1) == 1.5);
    assert_int_equal(g4_gguf_get_arr(g, "t.arr_f32", G4_GGUF_INT32, &kv), G4_ERR_INPUT);

    /* tensors: row-major shapes, data aligned, into the mapping */
    g4_tensor_set ts = {0};
    assert_int_equal(g4_gguf_export_tensors(g, &ts), G4_OK);
    g4_gguf_free(g);   /* the set owns the mapping now */
    g4_tensor *t = g4_st_find(&ts, "f32");
    assert_non_null(t);
    assert_int_equal(t->dtype, G4_DT_F32);
    assert_int_equal(t->n_dims, 2);
    assert_true(t->shape[0] == 2 && t->shape[1] == 3);
    assert_true(((const float *)t->data)[5] == 5.0f);
    const char *names[] = {"q8_0", "q4_0", "q5_0", "q4_k", "q6_k", "q5_k", "iq4_xs", "q3_k", "q2_k", "iq4_nl", "q4_1", "q5_1",
                           "bf16", "f16"};
    const g4_dtype dts[] = {G4_DT_Q8_0, G4_DT_Q4_0, G4_DT_Q5_0, G4_DT_Q4_K, G4_DT_Q6_K, G4_DT_Q5_K, G4_DT_IQ4_XS,
                            G4_DT_Q3_K, G4_DT_Q2_K, G4_DT_IQ4_NL, G4_DT_Q4_1, G4_DT_Q5_1, G4_DT_BF16, G4_DT_F16};
    for (int i = 0; i < 14; i++) {
        t = g4_st_find(&ts, names[i]);
        assert_non_null(t);
        assert_int_equal(t->dtype, dts[i]);
        assert_true(t->shape[0] == 4 && t->shape[1] == 512);
        assert_int_equal(t->nbytes, 4 * g4_dtype_row_bytes(dts[i], 512));
        assert_int_equal((uintptr_t)t->data % 32, 0);
        /* same bytes as the .blocks vector */
        char path[128];
        snprintf(path, sizeof path, "tests/fixtures/quant/%s.blocks", g4_dtype_name(dts[i]));
        size_t n;
        uint8_t *blk = slurp(path, &n);
        assert_non_null(blk);
        assert_int_equal(n, t->nbytes);
        assert_memory_equal(blk, t->data, n);
        free(blk);
    }
    g4_st_close(&ts);
}

/* bytes up to the end of the last tensor's data (the writer pads after it) */
static size_t data_end(const uint8_t *buf, size_t n) {
    g4_gguf *g;
    assert_int_equal(g4_gguf_parse(buf, n, "tiny.gguf", &g), G4_OK);
    size_t end = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        size_t e = (size_t)((const uint8_t *)g->tensors[i].data - buf) + g->tensors[i].nbytes;
        if (e > end) end = e;
    }
    g4_gguf_free(g);
    return end;
}

/* every prefix that cuts the header or data is refused cleanly (ASan/UBSan builds check the
 * "cleanly"); trailing padding after the last tensor may go */
static void test_truncated(void **state) {
    (void)state;
    size_t n;
    uint8_t *buf = slurp(TINY, &n);
    assert_non_null(buf);
    size_t end = data_end(buf, n);
    assert_true(end <= n && end > n - 32);
    for (size_t len = 0; len < end; len++) {
        uint8_t *cut = malloc(len ? len : 1);   /* exact-size copy so overreads are caught */
        memcpy(cut, buf, len);
        g4_gguf *g = NULL;
        g4_status st = g4_gguf_parse(cut, len, "cut.gguf", &g);
        if (st == G4_OK) fail_msg("a %zu-byte prefix of %zu parsed", len, n);
        assert_int_equal(st, G4_ERR_INPUT);
        assert_non_null(strstr(g4_last_error(), "cut.gguf"));
        free(cut);
    }
    free(buf);
}

static size_t find_bytes(const uint8_t *b, size_t n, const char *s, size_t sl) {
    for (size_t i = 0; i + sl <= n; i++)
        if (!memcmp(b + i, s, sl)) return i;
    return (size_t)-1;
}

static void expect_fail(uint8_t *buf, size_t n, const char *needle) {
    g4_gguf *g = NULL;
    g4_status st = g4_gguf_parse(buf, n, "bad.gguf", &g);
    if (st == G4_OK) {
        g4_tensor_set ts = {0};
        st = g4_gguf_export_tensors(g, &ts);
        g4_st_close(&ts);
        g4_gguf_free(g);
    }
    assert_int_equal(st, G4_ERR_INPUT);
    if (!strstr(g4_last_error(), needle)) fail_msg("error '%s' does not name '%s'", g4_last_error(), needle);
}

static void test_lies(void **state) {
    (void)state;
    size_t n;
    uint8_t *orig = slurp(TINY, &n), *b = malloc(n);
    uint64_t big = 1ull << 60;
    uint32_t u32;
#define FRESH() memcpy(b, orig, n)
    FRESH(); b[0] = 'X'; expect_fail(b, n, "magic");
    FRESH(); u32 = 1; memcpy(b + 4, &u32, 4); expect_fail(b, n, "version 1");
    FRESH(); memcpy(b + 8, &big, 8); expect_fail(b, n, "tensor_count");
    FRESH(); memcpy(b + 16, &big, 8); expect_fail(b, n, "kv_count");
    /* a key length that runs past the end */
    FRESH(); memcpy(b + 24, &big, 8); expect_fail(b, n, "metadata #0");
    /* string value length past the end */
    size_t at = find_bytes(orig, n, "t.str", 5);
    FRESH(); memcpy(b + at + 5 + 4, &big, 8); expect_fail(b, n, "t.str");
    /* array count past the end */
    at = find_bytes(orig, n, "t.arr_i32", 9);
    FRESH(); memcpy(b + at + 9 + 4 + 4, &big, 8); expect_fail(b, n, "t.arr_i32");
    /* unknown value type */
    FRESH(); u32 = 77; memcpy(b + at + 9, &u32, 4); expect_fail(b, n, "t.arr_i32");
    /* tensor info of q8_0: name, n_dims, ne[2], type, offset */
    at = find_bytes(orig, n, "q8_0", 4);
    size_t ti = at + 4;
    FRESH(); u32 = 9; memcpy(b + ti, &u32, 4); expect_fail(b, n, "q8_0");                 /* n_dims */
    FRESH(); memcpy(b + ti + 4, &big, 8); expect_fail(b, n, "q8_0");                    /* ne[0] */
    FRESH(); u32 = 16; memcpy(b + ti + 20, &u32, 4); expect_fail(b, n, "IQ2_XXS");      /* unsupported */
    FRESH(); u32 = 99; memcpy(b + ti + 20, &u32, 4); expect_fail(b, n, "unknown ggml type");
    FRESH(); memcpy(b + ti + 24, &big, 8); expect_fail(b, n, "q8_0");                   /* offset */
    uint64_t odd = 1;
    FRESH(); memcpy(b + ti + 24, &odd, 8); expect_fail(b, n, "alignment");
    FRESH(); expect_fail(b, data_end(orig, n) - 1, "truncated");
    free(b);
    free(orig);
    /* a missing file names the path */
    g4_gguf *g;
    assert_int_equal(g4_gguf_open("no/such.gguf", &g), G4_ERR_INPUT);
    assert_non_null(strstr(g4_last_error(), "no/such.gguf"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_tiny),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_lies),
    };
    return cmocka_run_group_tests_name("gguf", tests, NULL, NULL);
}
