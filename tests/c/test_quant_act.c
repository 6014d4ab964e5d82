/* test_quant_act.c — the int8-activation mode (--act-q8): activation quantizers and dot products
 * bit-exact to ggml's own (tests/fixtures/quant/act_* from tools/reference/ggml_act_vectors.c:
 * generic C for the scalar path, x86 AVX2 for ours), the scalar integer dots exactly equal to a
 * direct integer computation, and every path's matmul_q8 over many shapes against the scalar
 * reference (float tolerance: the same integer sums, scaled and added in another order). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/quantize.h"
#include "kernels/cpu/quant.h"
#include "kernels/kernels.h"

#define AROWS 6
#define COLS 512

static const g4_dtype types[] = {G4_DT_Q8_0, G4_DT_Q4_0, G4_DT_Q5_0, G4_DT_Q4_K, G4_DT_Q6_K, G4_DT_Q5_K, G4_DT_IQ4_XS,
                                 G4_DT_Q3_K, G4_DT_Q2_K, G4_DT_IQ4_NL, G4_DT_Q4_1, G4_DT_Q5_1};
#define NTYPES (sizeof types / sizeof *types)

static void *load(const char *name, size_t want) {
    char path[256];
    snprintf(path, sizeof path, "tests/fixtures/quant/%s", name);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot read %s", path);
    void *p = malloc(want + 1);
    size_t n = fread(p, 1, want + 1, f);
    fclose(f);
    assert_int_equal(n, want);
    return p;
}

static void check_quantizer(void (*q)(g4_dtype, const float *, int, int, void *), g4_dtype wdt, const char *file) {
    float *x = load("act_in.f32", AROWS * COLS * sizeof(float));
    const size_t rb = g4_act_row_bytes(wdt, COLS);
    uint8_t *want = load(file, AROWS * rb), *got = malloc(AROWS * rb);
    q(wdt, x, AROWS, COLS, got);
    for (size_t i = 0; i < AROWS * rb; i++)
        if (got[i] != want[i]) fail_msg("%s: byte %zu is %u, ggml wrote %u", file, i, got[i], want[i]);
    free(x), free(want), free(got);
}

static void test_sizes(void **state) {
    (void)state;
    assert_int_equal(sizeof(g4_block_q8_K), 292);
    assert_int_equal(g4_act_row_bytes(G4_DT_Q4_0, 512), 16 * 34);
    assert_int_equal(g4_act_row_bytes(G4_DT_Q6_K, 512), 2 * 292);
    assert_int_equal(g4_act_row_bytes(G4_DT_BF16, 512), 0);
    assert_int_equal(g4_act_format(G4_DT_Q5_0), G4_ACT_Q8_0);
    assert_int_equal(g4_act_format(G4_DT_Q4_K), G4_ACT_Q8_K);
    assert_int_equal(g4_act_format(G4_DT_F32), G4_ACT_NONE);
    assert_null(g4_kernels_scalar()->matmul_q8[G4_DT_BF16]);
}

/* scalar: ggml's quantize_row_q8_0_ref (== gguf-py's Q8_0), quantize_row_q8_K_ref and
 * quantize_row_q8_1_ref */
static void test_quantize_ref(void **state) {
    (void)state;
    check_quantizer(g4_act_quantize, G4_DT_Q8_0, "act_Q8_0_ref.blocks");
    check_quantizer(g4_kernels_scalar()->quantize_act, G4_DT_Q4_0, "act_Q8_0_ref.blocks");
    check_quantizer(g4_act_quantize, G4_DT_Q4_K, "act_Q8_K.blocks");
    check_quantizer(g4_act_quantize, G4_DT_Q4_1, "act_Q8_1_ref.blocks");
}

/* avx2: ggml's x86 quantize_row_q8_0 / _q8_1 (round half to even) and quantize_row_q8_K_ref */
static void test_quantize_avx2(void **state) {
    (void)state;
    const g4_kernels *k = g4_kernels_avx2();
    if (!k) skip();
    check_quantizer(k->quantize_act, G4_DT_Q8_0, "act_Q8_0_x86.blocks");
    check_quantizer(k->quantize_act, G4_DT_Q6_K, "act_Q8_K.blocks");
    check_quantizer(k->quantize_act, G4_DT_Q5_1, "act_Q8_1_x86.blocks");
}

/* random weight blocks: random quant bytes, valid small f16 scales */
static uint64_t rng = 88172645463325252ULL;
static uint32_t rnd(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (uint32_t)(rng >> 16); }
static float urand(float lo, float hi) { return lo + (hi - lo) * (float)(rnd() & 0xFFFFFF) / 16777216.0f; }

static void put16(uint8_t *p, float v) { uint16_t h = g4_f32_to_f16(v); p[0] = (uint8_t)h; p[1] = (uint8_t)(h >> 8); }

/* unit: every f16 scale (d, the K-quants' dmin, Q4_1 / Q5_1's m) set to 1.0 so that the dot is an integer */
static uint8_t *rand_weights(g4_dtype dt, int rows, int unit) {
    const size_t rb = g4_dtype_row_bytes(dt, COLS), bb = g4_dtype_size(dt);
    uint8_t *w = malloc(rows * rb);
    for (size_t i = 0; i < rows * rb; i++) w[i] = (uint8_t)rnd();
    for (size_t b = 0; b < rows * rb / bb; b++) {
        uint8_t *p = w + b * bb;
        if (dt == G4_DT_Q6_K || dt == G4_DT_Q3_K) put16(p + (dt == G4_DT_Q6_K ? 208 : 108), unit ? 1.0f : urand(-2e-3f, 2e-3f));
        else put16(p + (dt == G4_DT_Q2_K ? 80 : 0), unit ? 1.0f : urand(1e-3f, 2e-2f));
        if (dt == G4_DT_Q4_K || dt == G4_DT_Q5_K || dt == G4_DT_Q2_K || dt == G4_DT_Q4_1 || dt == G4_DT_Q5_1)
            put16(p + (dt == G4_DT_Q2_K ? 82 : 2), unit ? 1.0f : urand(1e-4f, 2e-2f));
    }
    return w;
}

/* Each path's matmul_q8 over the first K columns of R weight rows (w, stride COLS) and AROWS
 * activation rows (xq, stride COLS), their scales 1: exactly the integer dot */
static void check_paths_integer(g4_dtype dt, const uint8_t *w, const uint8_t *xq, int R) {
    const g4_kernels *paths[] = {g4_kernels_scalar(), g4_kernels_avx2(), g4_kernels_avx512()};
    const size_t rb = g4_dtype_row_bytes(dt, COLS), xb = g4_act_row_bytes(dt, COLS);
    const int Ks[] = {COLS, COLS - 32};
    for (int ki = 0; ki < 2; ki++) {
        const int K = Ks[ki];
        if (K % g4_dtype_block(dt)) continue;
        const size_t kb = g4_dtype_row_bytes(dt, K), xkb = g4_act_row_bytes(dt, K);
        uint8_t *wk = malloc(R * kb), *xk = malloc(AROWS * xkb);
        for (int n = 0; n < R; n++) memcpy(wk + n * kb, w + n * rb, kb);
        for (int t = 0; t < AROWS; t++) memcpy(xk + t * xkb, xq + t * xb, xkb);
        long long want[AROWS][8];
        float *wrow = malloc(K * sizeof(float));
        for (int n = 0; n < R; n++) {
            g4_dequant_row(dt, wk + n * kb, K, wrow);
            for (int t = 0; t < AROWS; t++) {
                const uint8_t *xr = xk + t * xkb;
                want[t][n] = 0;
                for (int k = 0; k < K; k++)
                    want[t][n] += (long long)wrow[k] * (g4_act_format(dt) == G4_ACT_Q8_0 ? (int8_t)xr[(k / 32) * 34 + 2 + k % 32]
                                                        : g4_act_format(dt) == G4_ACT_Q8_1 ? (int8_t)xr[(k / 32) * 36 + 4 + k % 32]
                                                        : ((const g4_block_q8_K *)xr)[k / 256].qs[k % 256]);
            }
        }
        for (size_t p = 0; p < sizeof paths / sizeof *paths; p++) {
            if (!paths[p]) continue;
            for (int T = 1; T <= AROWS; T += AROWS - 1) {   /* one row (decode) and all of them */
                float y[AROWS * 8];
                paths[p]->matmul_q8[dt](xk, T, K, wk, 0, R, y, R);
                for (int t = 0; t < T; t++)
                    for (int n = 0; n < R; n++)
                        if ((double)y[t * R + n] != (double)want[t][n])
                            fail_msg("%s %s K %d T %d row %d x %d: %.1f, integer %lld", paths[p]->name, g4_dtype_name(dt), K, T, n, t,
                                     y[t * R + n], want[t][n]);
            }
        }
        free(wk), free(xk), free(wrow);
    }
}

/* The scalar dots are ggml's integer sums: with every scale 1.0 the result is exactly
 * sum_k W_int[k] * Xq[k] (W_int the dequantized weight, an integer when its scales are 1). */
static void test_integer_exact(void **state) {
    (void)state;
    float (*dots[])(int, const void *, const void *) = {g4_vec_dot_q8_0_q8_0_ref, g4_vec_dot_q4_0_q8_0_ref,
        g4_vec_dot_q5_0_q8_0_ref, g4_vec_dot_q4_k_q8_k_ref, g4_vec_dot_q6_k_q8_k_ref, g4_vec_dot_q5_k_q8_k_ref,
        g4_vec_dot_iq4_xs_q8_k_ref, g4_vec_dot_q3_k_q8_k_ref, g4_vec_dot_q2_k_q8_k_ref, g4_vec_dot_iq4_nl_q8_0_ref,
        g4_vec_dot_q4_1_q8_1_ref, g4_vec_dot_q5_1_q8_1_ref};
    float *x = load("act_in.f32", AROWS * COLS * sizeof(float));
    for (size_t ti = 0; ti < NTYPES; ti++) {
        const g4_dtype dt = types[ti];
        const int R = 8;
        uint8_t *w = rand_weights(dt, R, 1);
        const size_t rb = g4_dtype_row_bytes(dt, COLS), xb = g4_act_row_bytes(dt, COLS);
        uint8_t *xq = malloc(AROWS * xb);
        g4_act_quantize(dt, x, AROWS, COLS, xq);
        /* activation scales to 1 as well: Q8_0 f16 d at each block's start, Q8_K float d; Q8_1's
         * s then the quants' sum (exact in f16 here) */
        const int q8_1 = g4_act_format(dt) == G4_ACT_Q8_1;
        for (int t = 0; t < AROWS; t++) {
            if (g4_act_format(dt) == G4_ACT_Q8_0)
                for (int b = 0; b < COLS / 32; b++) put16(xq + t * xb + b * 34, 1.0f);
            else if (q8_1)
                for (int b = 0; b < COLS / 32; b++) {
                    uint8_t *blk = xq + t * xb + b * 36;
                    int sum = 0;
                    for (int j = 0; j < 32; j++) sum += (int8_t)blk[4 + j];
                    assert_true(abs(sum) <= 2048);
                    put16(blk, 1.0f);
                    put16(blk + 2, (float)sum);
                }
            else
                for (int b = 0; b < COLS / 256; b++) ((g4_block_q8_K *)(xq + t * xb))[b].d = 1.0f;
        }
        float wrow[COLS];
        for (int n = 0; n < R; n++) {
            g4_dequant_row(dt, w + n * rb, COLS, wrow);
            for (int t = 0; t < AROWS; t++) {
                const uint8_t *xr = xq + t * xb;
                long long want = 0;
                for (int k = 0; k < COLS; k++) {
                    const int q = g4_act_format(dt) == G4_ACT_Q8_0 ? (int8_t)xr[(k / 32) * 34 + 2 + k % 32]
                                : q8_1 ? (int8_t)xr[(k / 32) * 36 + 4 + k % 32]
                                       : ((const g4_block_q8_K *)xr)[k / 256].qs[k % 256];
                    assert_true(wrow[k] == floorf(wrow[k]));   /* integer weights */
                    want += (long long)wrow[k] * q;
                }
                assert_true(llabs(want) < (1 << 24));   /* exactly representable, and so are partial sums */
                const float got = dots[ti](COLS, w + n * rb, xr);
                if ((double)got != (double)want) fail_msg("%s row %d x %d: dot %.1f, integer %lld", g4_dtype_name(dt), n, t, got, want);
            }
        }
        /* and so are every path's matmul_q8, whatever its sum order, over the whole rows and (the
         * 32-weight types) an odd number of blocks (IQ4_NL's one-row dot ends on a scalar block) */
        check_paths_integer(dt, w, xq, R);
        free(w), free(xq);
    }
    free(x);
}

/* Each path's matmul_q8 (tiles of 1-4 activation rows x 1-4 weight rows, row groups, a sub-range
 * [n0, n1)) against the scalar reference dots, within float rounding of the block sums. */
static void check_path(const g4_kernels *k) {
    const int N = 45, n0 = 3, n1 = 42, ldy = N + 2;
    const int Ts[] = {1, 2, 3, 4, 5, 7, 9};
    float *x = malloc(9 * COLS * sizeof(float));
    for (int i = 0; i < 9 * COLS; i++) x[i] = urand(-2, 2) * (i % 97 == 0 ? 20 : 1);
    for (size_t ti = 0; ti < NTYPES; ti++) {
        const g4_dtype dt = types[ti];
        uint8_t *w = rand_weights(dt, N, 0);
        const size_t rb = g4_dtype_row_bytes(dt, COLS), xb = g4_act_row_bytes(dt, COLS);
        uint8_t *xq = malloc(9 * xb);
        float *wd = malloc(N * COLS * sizeof(float)), *xd = malloc(COLS * sizeof(float));
        for (int n = 0; n < N; n++) g4_dequant_row(dt, w + n * rb, COLS, wd + n * COLS);
        for (size_t a = 0; a < sizeof Ts / sizeof *Ts; a++) {
            const int T = Ts[a];
            k->quantize_act(dt, x, T, COLS, xq);
            float *y = malloc((size_t)T * ldy * sizeof(float));
            for (int i = 0; i < T * ldy; i++) y[i] = -7.0f;
            k->matmul_q8[dt](xq, T, COLS, w, n0, n1, y, ldy);
            for (int t = 0; t < T; t++)
                for (int n = 0; n < ldy; n++) {
                    const float got = y[t * ldy + n];
                    if (n < n0 || n >= n1) { assert_true(got == -7.0f); continue; }
                    float ref;
                    switch (dt) {
                    case G4_DT_Q8_0: ref = g4_vec_dot_q8_0_q8_0_ref(COLS, w + n * rb, xq + t * xb); break;
                    case G4_DT_Q4_0: ref = g4_vec_dot_q4_0_q8_0_ref(COLS, w + n * rb, xq + t * xb); break;
                    case G4_DT_Q5_0: ref = g4_vec_dot_q5_0_q8_0_ref(COLS, w + n * rb, xq + t * xb); break;
                    case G4_DT_Q4_K: ref = g4_vec_dot_q4_k_q8_k_ref(COLS, w + n * rb, xq + t * xb); break;
                    case G4_DT_Q5_K: ref = g4_vec_dot_q5_k_q8_k_ref(COLS, w + n * rb, xq + t * xb); break;
                    case G4_DT_IQ4_XS: ref = g4_vec_dot_iq4_xs_q8_k_ref(COLS, w + n * rb, xq + t * xb); break;
                    case G4_DT_Q3_K: ref = g4_vec_dot_q3_k_q8_k_ref(COLS, w + n * rb, xq + t * xb); break;
                    case G4_DT_Q2_K: ref = g4_vec_dot_q2_k_q8_k_ref(COLS, w + n * rb, xq + t * xb); break;
                    case G4_DT_IQ4_NL: ref = g4_vec_dot_iq4_nl_q8_0_ref(COLS, w + n * rb, xq + t * xb); break;
                    case G4_DT_Q4_1: ref = g4_vec_dot_q4_1_q8_1_ref(COLS, w + n * rb, xq + t * xb); break;
                    case G4_DT_Q5_1: ref = g4_vec_dot_q5_1_q8_1_ref(COLS, w + n * rb, xq + t * xb); break;
                    default: ref = g4_vec_dot_q6_k_q8_k_ref(COLS, w + n * rb, xq + t * xb); break;
                    }
                    /* scale of the sum: sum |w| |x| over the dequantized operands */
                    const int q8_1 = g4_act_format(dt) == G4_ACT_Q8_1;
                    double deq_s = 0;   /* Q8_1: the dots take m * s, s the block sum rounded to f16 */
                    if (g4_act_format(dt) == G4_ACT_Q8_0 || q8_1) {
                        for (int b = 0; b < COLS / 32; b++) {
                            const uint8_t *blk = xq + t * xb + b * (q8_1 ? 36 : 34);
                            const float d = g4_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
                            for (int j = 0; j < 32; j++) xd[32 * b + j] = d * (int8_t)blk[(q8_1 ? 4 : 2) + j];
                            if (q8_1) {
                                const double m = g4_f16_to_f32((uint16_t)(w[n * rb + b * g4_dtype_size(dt) + 2] |
                                                                          w[n * rb + b * g4_dtype_size(dt) + 3] << 8));
                                double xs = 0;
                                for (int j = 0; j < 32; j++) xs += xd[32 * b + j];
                                deq_s += m * (g4_f16_to_f32((uint16_t)(blk[2] | blk[3] << 8)) - xs);
                            }
                        }
                    } else {
                        const g4_block_q8_K *blk = (const g4_block_q8_K *)(xq + t * xb);
                        for (int j = 0; j < COLS; j++) xd[j] = blk[j / 256].d * blk[j / 256].qs[j % 256];
                    }
                    double mag = 0, deq = deq_s;
                    for (int j = 0; j < COLS; j++) {
                        mag += fabs((double)wd[n * COLS + j] * xd[j]);
                        deq += (double)wd[n * COLS + j] * xd[j];
                    }
                    if (fabs(got - ref) > 2e-6 * mag + 1e-30)
                        fail_msg("%s %s T=%d row %d: %.9g vs scalar %.9g (scale %.3g)", k->name, g4_dtype_name(dt), T, n, got, ref, mag);
                    /* and the integer form equals dequantize-then-dot of the same quantized operands */
                    if (fabs(ref - deq) > 2e-6 * mag + 1e-30)
                        fail_msg("%s T=%d row %d: scalar %.9g vs dequantized %.9g", g4_dtype_name(dt), T, n, ref, deq);
                }
            free(y);
        }
        free(w), free(xq), free(wd), free(xd);
    }
    free(x);
}

/* Against ggml itself (act_dots_*.f32 from tools/reference/ggml_act_vectors.c): the scalar dots
 * bit-identical to ggml's ggml_vec_dot_*_generic, each path's matmul_q8 to ggml's build for that
 * ISA (scalar: generic; avx2: the x86 AVX2 code, whose block order and fmadd chain the tiles keep). */
static void check_vs_ggml(const g4_kernels *k, const char *file) {
    float *want = load(file, NTYPES * 4 * AROWS * sizeof(float));
    float *x = load("act_in.f32", AROWS * COLS * sizeof(float));
    for (size_t ti = 0; ti < NTYPES; ti++) {
        const g4_dtype dt = types[ti];
        char name[32];
        snprintf(name, sizeof name, "%s.blocks", g4_dtype_name(dt));
        uint8_t *w = load(name, 4 * g4_dtype_row_bytes(dt, COLS));
        /* activations quantized as ggml's x86 build does (the vectors' input) */
        const size_t xb = g4_act_row_bytes(dt, COLS);
        const g4_act_fmt af = g4_act_format(dt);
        uint8_t *xq = load(af == G4_ACT_Q8_0 ? "act_Q8_0_x86.blocks" : af == G4_ACT_Q8_1 ? "act_Q8_1_x86.blocks" : "act_Q8_K.blocks",
                           AROWS * xb);
        float y[AROWS * 4];
        if (dt == G4_DT_IQ4_NL)   /* ggml's dot is its one-row form (more rows: tinyBLAS's order, tested end to end) */
            for (int t = 0; t < AROWS; t++) k->matmul_q8[dt](xq + (size_t)t * xb, 1, COLS, w, 0, 4, y + t * 4, 4);
        else
            k->matmul_q8[dt](xq, AROWS, COLS, w, 0, 4, y, 4);
        for (int n = 0; n < 4; n++)
            for (int t = 0; t < AROWS; t++) {
                const float g = want[(ti * 4 + n) * AROWS + t];
                if (y[t * 4 + n] != g)
                    fail_msg("%s %s row %d x %d: %.9g, ggml %.9g", k->name, g4_dtype_name(dt), n, t, y[t * 4 + n], g);
            }
        free(w), free(xq);
    }
    free(want), free(x);
}

static void test_vs_ggml_generic(void **state) {
    (void)state;
    check_vs_ggml(g4_kernels_scalar(), "act_dots_generic.f32");
}

static void test_vs_ggml_avx2(void **state) {
    (void)state;
    const g4_kernels *k = g4_kernels_avx2();
    if (!k) skip();
    check_vs_ggml(k, "act_dots_x86.f32");
}

/* decode and prefill (avx2: T >= 4 runs the GEMM tiles of up to 6 activation rows, in chunks of
 * 30; avx512 with VNNI, quant_act_avx512.c vnni_plan: chunks of 16 rows, 4 (K-quants 2) a pass, a
 * last one padded from 10 rows (K-quants 12); over the 32-weight blocks 6-9 rows past them on a
 * chunk of 8 and up to 5 on the decode tiles (3 rows a tile), K-quant rows short of a chunk on
 * the avx2 tiles): every (row, t) bit-identical to the avx2 one-row decode tile (ggml's vec_dot),
 * for T at and around the tile and chunk edges, row ranges not starting at 0, and K of 1 and 2
 * blocks (the 32-weight types also 1, 3 and 9). IQ4_NL, whose rows llama.cpp sums in another order from two rows on (tinyBLAS): each
 * (row, t) bit-identical to that row in a 2-row call (row t twice) */
static void check_prefill_gemm(const g4_kernels *k) {
    const g4_kernels *one = g4_kernels_avx2();
    const int Ts[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 17, 25, 26, 28, 30, 31, 37, 64, 65, 83}, N = 21, n0 = 3;
    /* the 32-weight types also at odd block counts (IQ4_NL's one-row dot ends on a scalar block) */
    const int Ks[] = {256, 512, 32, 96, 288};
    for (size_t ti = 0; ti < NTYPES; ti++)
        for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++) {
            const g4_dtype dt = types[ti];
            const int K = Ks[ki];
            if (K % g4_dtype_block(dt)) continue;
            uint8_t *w = rand_weights(dt, N, 0);   /* rows of COLS; the first K columns of each */
            const size_t rb = g4_dtype_row_bytes(dt, COLS), kb = g4_dtype_row_bytes(dt, K), xb = g4_act_row_bytes(dt, K);
            uint8_t *wk = malloc(N * kb);
            for (int n = 0; n < N; n++) memcpy(wk + n * kb, w + n * rb, kb);
            for (size_t i = 0; i < sizeof Ts / sizeof *Ts; i++) {
                const int T = Ts[i];
                float *x = malloc((size_t)T * K * sizeof(float)), *y = calloc((size_t)T * N, sizeof(float)), y1[N];
                for (int j = 0; j < T * K; j++) x[j] = urand(-3.0f, 3.0f);
                uint8_t *xq = malloc(T * xb);
                k->quantize_act(dt, x, T, K, xq);
                k->matmul_q8[dt](xq, T, K, wk, n0, N, y, N);
                for (int t = 0; t < T; t++) {
                    if (dt == G4_DT_IQ4_NL && T > 1) {
                        uint8_t *xq2 = malloc(2 * xb);
                        float y2[2 * N];
                        memcpy(xq2, xq + t * xb, xb);
                        memcpy(xq2 + xb, xq + t * xb, xb);
                        one->matmul_q8[dt](xq2, 2, K, wk, n0, N, y2, N);
                        memcpy(y1, y2, sizeof y1);
                        free(xq2);
                    } else
                        one->matmul_q8[dt](xq + t * xb, 1, K, wk, n0, N, y1, N);
                    for (int n = n0; n < N; n++)
                        if (y[t * N + n] != y1[n])
                            fail_msg("%s K %d T %d row %d x %d: %.9g, one row %.9g", g4_dtype_name(dt), K, T, n, t,
                                     y[t * N + n], y1[n]);
                }
                free(x), free(y), free(xq);
            }
            free(w), free(wk);
        }
}

static void test_prefill_gemm_avx2(void **state) {
    (void)state;
    const g4_kernels *k = g4_kernels_avx2();
    if (!k) skip();
    check_prefill_gemm(k);
}

static void test_prefill_gemm_avx512(void **state) {
    (void)state;
    const g4_kernels *k = g4_kernels_avx512();
    if (!k) skip();
    check_prefill_gemm(k);
}

static void test_matmul_avx512(void **state) {
    (void)state;
    const g4_kernels *k = g4_kernels_avx512();
    if (!k) skip();
    check_path(k);
}

static void test_matmul_scalar(void **state) {
    (void)state;
    check_path(g4_kernels_scalar());
}

static void test_matmul_avx2(void **state) {
    (void)state;
    const g4_kernels *k = g4_kernels_avx2();
    if (!k) skip();
    check_path(k);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_quantize_ref),
        cmocka_unit_test(test_quantize_avx2),
        cmocka_unit_test(test_integer_exact),
        cmocka_unit_test(test_vs_ggml_generic),
        cmocka_unit_test(test_vs_ggml_avx2),
        cmocka_unit_test(test_matmul_scalar),
        cmocka_unit_test(test_matmul_avx2),
        cmocka_unit_test(test_prefill_gemm_avx2),
        cmocka_unit_test(test_prefill_gemm_avx512),
        cmocka_unit_test(test_matmul_avx512),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
