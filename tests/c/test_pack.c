/* test_pack.c — the `.g4c` pack: the quantizers of `gemma4c pack` against gguf-py's encoders
 * and ggml's (tests/fixtures/quant/pack_*, bit-exact) and Q4_K also by round-trip error; a pack of the
 * g4-causal-tiny fixture written and read back (header, embedded files, every rank's tensors
 * equal to the checkpoint slices); and every kind of damage — flipped bytes anywhere the crc
 * covers, truncation at many lengths, bad magic / version / dtype / offsets, a rank the pack does
 * not have — refused as G4_ERR_INPUT naming the file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "io/pack.h"
#include "convert/quantize.h"
#include "io/safetensors.h"
#include "kernels/kernels.h"
#include "parallel/tp_plan.h"
#include "test_util.h"

#define QROWS 8
#define QCOLS 512
#define FIXTURE "tests/fixtures/g4-causal-tiny"

static void spit(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

/* ------------------------------------------------------------------ quantizers */

static void test_quantize_exact(void **state) {
    (void)state;
    size_t n;
    float *x = slurp("tests/fixtures/quant/pack_in.f32", &n);
    assert_non_null(x);
    assert_int_equal(n, QROWS * QCOLS * sizeof(float));
    /* Q8_0/Q4_0/F16/BF16 from gguf-py; Q4_K from ggml's quantize_row_q4_K_ref itself
     * (tools/reference/ggml_quantize_vectors.c), gguf-py having no Q4_K encoder */
    const g4_dtype types[] = {G4_DT_Q8_0, G4_DT_Q4_0, G4_DT_F16, G4_DT_BF16, G4_DT_Q4_K};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        char path[128];
        snprintf(path, sizeof path, "tests/fixtures/quant/pack_%s.blocks", g4_dtype_name(types[i]));
        size_t rb = g4_dtype_row_bytes(types[i], QCOLS), got_n;
        uint8_t *want = slurp(path, &got_n);
        assert_non_null(want);
        assert_int_equal(got_n, QROWS * rb);
        uint8_t *got = malloc(rb);
        for (int r = 0; r < QROWS; r++) {
            assert_int_equal(g4_quantize_row(types[i], x + r * QCOLS, QCOLS, got), 0);
            for (size_t k = 0; k < rb; k++)
                if (got[k] != want[r * rb + k]) fail_msg("%s row %d byte %zu: %02x vs gguf-py %02x", g4_dtype_name(types[i]), r, k, got[k], want[r * rb + k]);
        }
        free(got);
        free(want);
    }
    free(x);
}

static void test_f16_specials(void **state) {
    (void)state;
    const struct { float f; uint16_t h; } cases[] = {
        {0.0f, 0x0000}, {-0.0f, 0x8000}, {1.0f, 0x3c00}, {65504.0f, 0x7bff}, {65520.0f, 0x7c00},
        {65519.0f, 0x7bff}, {1e9f, 0x7c00}, {-INFINITY, 0xfc00}, {5.9604645e-8f, 0x0001},
        {2.9802322e-8f, 0x0000}, {2.9802326e-8f, 0x0001}, {6.097555e-5f, 0x03ff}, {6.1035156e-5f, 0x0400},
        {1.00048828125f, 0x3c00} /* tie -> even */, {1.00146484375f, 0x3c02} /* tie -> even (up) */};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (g4_f32_to_f16(cases[i].f) != cases[i].h)
            fail_msg("f16(%.9g) = %04x, want %04x", cases[i].f, g4_f32_to_f16(cases[i].f), cases[i].h);
    assert_true((g4_f32_to_f16(NAN) & 0x7e00) == 0x7e00);
    /* exhaustive: every half converts to float and back to itself */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;   /* NaNs */
        assert_int_equal(g4_f32_to_f16(g4_f16_to_f32((uint16_t)h)), h);
    }
}

/* The 8-lane AVX2 Q4_K fit against the statement-by-statement scalar one (itself bit-exact to
 * ggml above), on 4096 random super-blocks of varied shapes: Gaussian, all positive, all
 * negative, a few outliers, tiny and huge magnitudes, constant and zero sub-blocks. */
static void test_quantize_q4_k_avx2_equals_scalar(void **state) {
    (void)state;
    enum { BLOCKS = 4096 };
    float *x = malloc(sizeof(float) * 256 * BLOCKS);
    uint64_t rng = 12345;
    for (int b = 0; b < BLOCKS; b++) {
        const int kind = b % 8;
        const float mag = kind == 4 ? 1e-6f : kind == 5 ? 3e4f : 1.0f;
        for (int i = 0; i < 256; i++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            float u = (float)((rng >> 40) & 0xffffff) / 16777216.0f - 0.5f;   /* [-0.5, 0.5) */
            float v = mag * u;
            if (kind == 1) v = fabsf(v);
            if (kind == 2) v = -fabsf(v);
            if (kind == 3 && i % 37 == 0) v *= 40.0f;
            if (kind == 6 && i / 32 == 3) v = 0.25f;                          /* a constant sub-block */
            if (kind == 7 && i / 32 != 5) v = 0.0f;                           /* all zero but one */
            x[b * 256 + i] = v;
        }
    }
    const size_t rb = g4_dtype_row_bytes(G4_DT_Q4_K, 256 * BLOCKS);
    uint8_t *a = malloc(rb), *v = malloc(rb);
    setenv("G4_CPU_ISA", "scalar", 1);
    assert_int_equal(g4_quantize_row(G4_DT_Q4_K, x, 256 * BLOCKS, a), 0);
    unsetenv("G4_CPU_ISA");
    assert_int_equal(g4_quantize_row(G4_DT_Q4_K, x, 256 * BLOCKS, v), 0);
    for (size_t k = 0; k < rb; k++)
        if (a[k] != v[k]) fail_msg("block %zu (kind %zu) byte %zu: scalar %02x, avx2 %02x", k / 144, (k / 144) % 8, k % 144, a[k], v[k]);
    free(a); free(v); free(x);
}

static void test_quantize_q4_k(void **state) {
    (void)state;
    size_t n;
    float *x = slurp("tests/fixtures/quant/pack_in.f32", &n);
    assert_non_null(x);
    uint8_t q[2 * 144], q4[16 * 18];
    float y[QCOLS];
    /* gaussian rows: relative RMS error of a 4.5-bit code, and no worse than Q4_0's */
    for (int r = 2; r < 4; r++) {
        const float *xr = x + r * QCOLS;
        assert_int_equal(g4_quantize_row(G4_DT_Q4_K, xr, QCOLS, q), 0);
        g4_to_f32(G4_DT_Q4_K, q, QCOLS, y);
        double e2 = 0, x2 = 0, e2_q40 = 0;
        for (int k = 0; k < QCOLS; k++) { e2 += (y[k] - xr[k]) * (double)(y[k] - xr[k]); x2 += xr[k] * (double)xr[k]; }
        g4_quantize_row(G4_DT_Q4_0, xr, QCOLS, q4);
        g4_to_f32(G4_DT_Q4_0, q4, QCOLS, y);
        for (int k = 0; k < QCOLS; k++) e2_q40 += (y[k] - xr[k]) * (double)(y[k] - xr[k]);
        double rel = sqrt(e2 / x2);
        print_message("Q4_K row %d: relative RMS error %.4f (Q4_0 %.4f)\n", r, rel, sqrt(e2_q40 / x2));
        assert_true(rel < 0.12);
        assert_true(e2 <= e2_q40 * 1.05);
        /* every element within one quantization step of its sub-block (+ the 6-bit min's error) */
        g4_to_f32(G4_DT_Q4_K, q, QCOLS, y);
        for (int b = 0; b < QCOLS / 32; b++) {
            float lo = xr[b * 32], hi = lo;
            for (int k = 1; k < 32; k++) { lo = fminf(lo, xr[b * 32 + k]); hi = fmaxf(hi, xr[b * 32 + k]); }
            /* the weighted fit may clip the extremes of a sub-block: allow 2.5 steps */
            float range = hi - (lo < 0 ? lo : 0), tol = range / 15.0f * 2.5f + 1e-6f;
            for (int k = 0; k < 32; k++)
                if (fabsf(y[b * 32 + k] - xr[b * 32 + k]) > tol)
                    fail_msg("row %d col %d: %g vs %g (tol %g)", r, b * 32 + k, y[b * 32 + k], xr[b * 32 + k], tol);
        }
    }
    /* all-zero input decodes to zeros; a constant block is reproduced closely */
    float z[256] = {0}, c[256];
    for (int k = 0; k < 256; k++) c[k] = 0.75f;
    g4_quantize_row(G4_DT_Q4_K, z, 256, q);
    g4_to_f32(G4_DT_Q4_K, q, 256, y);
    for (int k = 0; k < 256; k++) assert_true(y[k] == 0.0f);
    g4_quantize_row(G4_DT_Q4_K, c, 256, q);
    g4_to_f32(G4_DT_Q4_K, q, 256, y);
    for (int k = 0; k < 256; k++) assert_true(fabsf(y[k] - 0.75f) < 0.01f);
    assert_int_equal(g4_quantize_row(G4_DT_Q4_K, c, 128, q), -1);   /* not a multiple of 256 */
    assert_int_equal(g4_quantize_row(G4_DT_Q6_K, c, 256, q), -1);   /* no encoder */
    free(x);
}

/* ------------------------------------------------------------------ round trip */

static char pack_path[256];
static uint8_t *image;
static size_t image_len;

static int setup_pack(void **state) {
    (void)state;
    snprintf(pack_path, sizeof pack_path, "/tmp/g4_test_pack_%d.g4c", (int)getpid());
    g4_pack_write_opts o = {.hf_dir = FIXTURE, .out_path = pack_path, .tp = 2, .dtype = -1, .threads = 1};
    g4_pack_write_stats s;
    if (g4_pack_write(&o, &s)) {
        fprintf(stderr, "pack: %s\n", g4_last_error());
        return -1;
    }
    image = slurp(pack_path, &image_len);
    return image && image_len == s.file_size ? 0 : -1;
}

static int teardown_pack(void **state) {
    (void)state;
    unlink(pack_path);
    free(image);
    return 0;
}

static void test_is_pack(void **state) {
    (void)state;
    assert_int_equal(g4_is_pack(pack_path), 1);
    assert_int_equal(g4_is_pack(FIXTURE), 0);
    assert_int_equal(g4_is_pack(FIXTURE "/config.json"), 0);
    assert_int_equal(g4_is_pack("/nonexistent/x.g4c"), 0);
    assert_int_equal(g4_is_pack(NULL), 0);
}

/* every rank's tensors are the checkpoint's slices of the shard plan, byte for byte */
static void test_round_trip(void **state) {
    (void)state;
    g4_config cfg;
    g4_tensor_set hf;
    assert_int_equal(g4_config_load(FIXTURE, &cfg), G4_OK);
    assert_int_equal(g4_st_open_dir(FIXTURE, &hf), G4_OK);
    for (int r = 0; r < 2; r++) {
        g4_pack *p;
        assert_int_equal(g4_pack_open(pack_path, r, &p), G4_OK);
        assert_int_equal(g4_pack_tp(p), 2);
        assert_int_equal(g4_pack_rank(p), r);
        const char *data;
        size_t len, flen;
        assert_int_equal(g4_pack_file(p, "config.json", &data, &len), G4_OK);
        char *want = slurp(FIXTURE "/config.json", &flen);
        assert_int_equal(len, flen);
        assert_memory_equal(data, want, len);
        assert_int_equal(data[len], 0);
        free(want);
        assert_int_equal(g4_pack_file(p, "tokenizer.json", &data, &len), G4_OK);
        assert_int_equal(g4_pack_file(p, "no_such_file.txt", &data, &len), G4_ERR_INPUT);
        assert_non_null(strstr(g4_last_error(), "no_such_file.txt"));
        g4_tp_plan plan;
        assert_int_equal(g4_tp_plan_make(&cfg, 2, r, &plan), G4_OK);
        g4_tensor_set ts;
        assert_int_equal(g4_pack_tensors(p, &ts), G4_OK);
        assert_int_equal(ts.n_maps, 0);
        assert_int_equal(ts.n_tensors, hf.n_tensors);
        for (int i = 0; i < ts.n_tensors; i++) {
            const g4_tensor *t = &ts.tensors[i], *s = g4_st_find(&hf, t->name);
            assert_non_null(s);
            assert_int_equal(t->dtype, s->dtype);
            assert_int_equal((uintptr_t)t->data % 64, 0);
            int layer;
            const g4_role role = g4_tp_role_of_name(t->name, &layer);   /* sets layer: call first */
            g4_shard sh = g4_tp_shard(&plan, &cfg, role, layer);
            const size_t es = g4_dtype_size(s->dtype);
            if (sh.kind == G4_SHARD_WHOLE) {
                assert_int_equal(t->nbytes, s->nbytes);
                assert_memory_equal(t->data, s->data, s->nbytes);
            } else if (sh.kind == G4_SHARD_ROWS) {
                assert_int_equal(t->shape[0], sh.hi - sh.lo);
                assert_int_equal(t->shape[1], s->shape[1]);
                assert_memory_equal(t->data, (const uint8_t *)s->data + (size_t)sh.lo * (size_t)s->shape[1] * es, t->nbytes);
            } else {
                assert_int_equal(t->shape[0], s->shape[0]);
                assert_int_equal(t->shape[1], sh.hi - sh.lo);
                const size_t w = (size_t)(sh.hi - sh.lo) * es;
                for (int64_t row = 0; row < s->shape[0]; row++)
                    assert_memory_equal((const uint8_t *)t->data + (size_t)row * w,
                                        (const uint8_t *)s->data + ((size_t)row * (size_t)s->shape[1] + (size_t)sh.lo) * es, w);
            }
        }
        g4_st_close(&ts);
        g4_pack_close(p);
    }
    g4_st_close(&hf);
    /* metadata only: files yes, tensors no */
    g4_pack *m;
    assert_int_equal(g4_pack_open_meta(pack_path, &m), G4_OK);
    assert_int_equal(g4_pack_rank(m), -1);
    g4_tensor_set ts;
    assert_int_equal(g4_pack_tensors(m, &ts), G4_ERR_INPUT);
    g4_pack_close(m);
}

static void test_bad_rank(void **state) {
    (void)state;
    g4_pack *p = NULL;
    assert_int_equal(g4_pack_open(pack_path, 2, &p), G4_ERR_INPUT);
    assert_null(p);
    assert_non_null(strstr(g4_last_error(), "--tp 2"));
    assert_non_null(strstr(g4_last_error(), pack_path));
    assert_int_equal(g4_pack_open(pack_path, -1, &p), G4_ERR_INPUT);
    assert_int_equal(g4_pack_open("/nonexistent/x.g4c", 0, &p), G4_ERR_INPUT);
}

/* whether byte `i` lies in the padding before a segment that no crc covers */
static int in_padding(size_t i) {
    uint64_t meta_end = 0, dir_end = 0;
    for (int k = 0; k < 8; k++) {
        meta_end |= (uint64_t)image[16 + k] << (8 * k);
        dir_end |= (uint64_t)image[32 + k] << (8 * k);
    }
    uint64_t ml = 0, dl = 0;
    for (int k = 0; k < 8; k++) { ml |= (uint64_t)image[24 + k] << (8 * k); dl |= (uint64_t)image[40 + k] << (8 * k); }
    uint64_t prev = dir_end + dl;
    (void)meta_end;
    (void)ml;
    for (int r = 0; r < 2; r++) {
        uint64_t so = 0, sl = 0;
        for (int k = 0; k < 8; k++) {
            so |= (uint64_t)image[64 + r * 40 + k] << (8 * k);
            sl |= (uint64_t)image[64 + r * 40 + 8 + k] << (8 * k);
        }
        if (i >= prev && i < so) return 1;
        prev = so + sl;
    }
    return 0;
}

static g4_status open_all(const uint8_t *buf, size_t n) {
    for (int r = -1; r < 2; r++) {
        g4_pack *p = NULL;
        g4_status st = g4_pack_open_mem(buf, n, "damaged.g4c", r, &p);
        if (st) {
            assert_null(p);
            assert_non_null(strstr(g4_last_error(), "damaged.g4c: "));
            return st;
        }
        g4_pack_close(p);
    }
    return G4_OK;
}

/* a flipped byte anywhere the checksums cover is refused (for some rank) */
static void test_corruption(void **state) {
    (void)state;
    assert_int_equal(open_all(image, image_len), G4_OK);
    uint8_t *buf = malloc(image_len);
    size_t tried = 0;
    for (size_t i = 0; i < image_len; i += (i < 8192 ? 1 : 997)) {
        if (in_padding(i)) continue;
        memcpy(buf, image, image_len);
        buf[i] ^= 0x5a;
        g4_status st = open_all(buf, image_len);
        if (st != G4_ERR_INPUT) fail_msg("flipped byte at %zu accepted (status %d)", i, st);
        tried++;
    }
    print_message("corruption: %zu flipped positions, all refused\n", tried);
    free(buf);
}

static void test_truncation(void **state) {
    (void)state;
    size_t tried = 0;
    for (size_t n = 0; n < image_len; n = n < 64 ? n + 1 : n < 8192 ? n + 61 : n + 40009) {
        g4_status st = open_all(image, n);
        assert_int_equal(st, G4_ERR_INPUT);
        if (n >= 8) assert_non_null(strstr(g4_last_error(), "truncated"));
        tried++;
    }
    assert_int_equal(open_all(image, image_len - 1), G4_ERR_INPUT);
    assert_non_null(strstr(g4_last_error(), "truncated"));
    /* and through the file path: a truncated copy on disk */
    char path[300];
    snprintf(path, sizeof path, "%s.trunc", pack_path);
    const size_t cuts[] = {0, 5, 100, 4096, 5000, image_len / 2, image_len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        spit(path, image, cuts[i]);
        g4_pack *p = NULL;
        assert_int_equal(g4_pack_open(path, 0, &p), G4_ERR_INPUT);
        assert_non_null(strstr(g4_last_error(), path));
        assert_int_equal(g4_pack_open_meta(path, &p), G4_ERR_INPUT);
        tried++;
    }
    /* trailing bytes are refused too */
    uint8_t *big = calloc(1, image_len + 10);
    memcpy(big, image, image_len);
    assert_int_equal(open_all(big, image_len + 10), G4_ERR_INPUT);
    free(big);
    unlink(path);
    print_message("truncation: %zu lengths, all refused\n", tried);
}

static void fix_crc(uint8_t *b) {
    uint64_t mo = 0, ml = 0, dof = 0, dl = 0;
    for (int k = 0; k < 8; k++) {
        mo |= (uint64_t)b[16 + k] << (8 * k);
        ml |= (uint64_t)b[24 + k] << (8 * k);
        dof |= (uint64_t)b[32 + k] << (8 * k);
        dl |= (uint64_t)b[40 + k] << (8 * k);
    }
    memset(b + 56, 0, 4);
    uLong c = crc32(0, b, G4_PACK_HEADER_SIZE);
    c = crc32(c, b + mo, (uInt)ml);
    c = crc32(c, b + dof, (uInt)dl);
    for (int k = 0; k < 4; k++) b[56 + k] = (uint8_t)(c >> (8 * k));
}

/* defects with a valid crc: each message names what is wrong */
static void test_defects(void **state) {
    (void)state;
    uint8_t *b = malloc(image_len);
    uint64_t dof = 0;
    for (int k = 0; k < 8; k++) dof |= (uint64_t)image[32 + k] << (8 * k);
    const struct { size_t off; uint8_t val; const char *msg; } cases[] = {
        {0, 'X', "bad magic"},
        {8, 2, "unsupported pack version 2"},
        {12, 0, "tp 0"},
        {12, 3, "rank 2 segment"},                    /* tp 3 with two ranks' entries */
        {(size_t)dof + 2, 42, "unknown dtype code 42"},
        {(size_t)dof + 3, 7, "dims"},
        {(size_t)dof + 48 + 5, 1, "outside rank"},      /* first tensor's offset far past the segment */
        {(size_t)dof + 56, 3, "bytes, but"},            /* nbytes that does not match the shape */
        {64 + 7, 1, "rank 0 segment"},                  /* segment offset out of the file */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        memcpy(b, image, image_len);
        b[cases[i].off] = cases[i].val;
        if (cases[i].off >= 8) fix_crc(b);
        assert_int_equal(open_all(b, image_len), G4_ERR_INPUT);
        if (!strstr(g4_last_error(), cases[i].msg)) fail_msg("case %zu: '%s' lacks '%s'", i, g4_last_error(), cases[i].msg);
    }
    free(b);
}

/* a damaged segment: refused by default, accepted with G4_PACK_VERIFY=0 (the header still checked) */
static void test_verify_env(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s.seg", pack_path);
    uint8_t *b = malloc(image_len);
    memcpy(b, image, image_len);
    b[image_len - 3] ^= 1;   /* the last rank's last tensor */
    spit(path, b, image_len);
    g4_pack *p = NULL;
    assert_int_equal(g4_pack_open(path, 0, &p), G4_OK);   /* rank 0 does not read rank 1's segment */
    g4_pack_close(p);
    assert_int_equal(g4_pack_open(path, 1, &p), G4_ERR_INPUT);
    assert_non_null(strstr(g4_last_error(), "checksum"));
    setenv("G4_PACK_VERIFY", "0", 1);
    assert_int_equal(g4_pack_open(path, 1, &p), G4_OK);
    g4_pack_close(p);
    unsetenv("G4_PACK_VERIFY");
    free(b);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantize_exact),
        cmocka_unit_test(test_f16_specials),
        cmocka_unit_test(test_quantize_q4_k),
        cmocka_unit_test(test_quantize_q4_k_avx2_equals_scalar),
        cmocka_unit_test(test_is_pack),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_bad_rank),
        cmocka_unit_test(test_corruption),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_defects),
        cmocka_unit_test(test_verify_env),
    };
    return cmocka_run_group_tests(tests, setup_pack, teardown_pack);
}
