/* test_quant.c — ggml block formats: the C decoders against tests/fixtures/quant/ vectors written
 * by the `gguf` package's own quantizers/dequantizers (bit-exact), and every path's fused matmul
 * over quantized weights against dequantize-then-dot in double (float tolerance). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/quant.h"
#include "kernels/kernels.h"
#include "test_util.h"

#define ROWS 4
#define COLS 512

static const g4_dtype types[] = {G4_DT_F16, G4_DT_BF16, G4_DT_Q8_0, G4_DT_Q4_0, G4_DT_Q5_0, G4_DT_Q4_K, G4_DT_Q6_K,
                                 G4_DT_Q5_K, G4_DT_IQ4_XS, G4_DT_Q3_K, G4_DT_Q2_K, G4_DT_IQ4_NL, G4_DT_Q4_1, G4_DT_Q5_1};

static void *load(g4_dtype dt, const char *ext, size_t want) {
    char path[256];
    snprintf(path, sizeof path, "tests/fixtures/quant/%s.%s", g4_dtype_name(dt), ext);
    size_t n = 0;
    void *p = slurp(path, &n);
    if (!p) fail_msg("cannot read %s", path);
    assert_int_equal(n, want);
    return p;
}

static void test_sizes(void **state) {
    (void)state;
    assert_int_equal(g4_dtype_row_bytes(G4_DT_Q8_0, 512), 16 * 34);
    assert_int_equal(g4_dtype_row_bytes(G4_DT_Q4_0, 512), 16 * 18);
    assert_int_equal(g4_dtype_row_bytes(G4_DT_Q5_0, 512), 16 * 22);
    assert_int_equal(g4_dtype_row_bytes(G4_DT_Q4_K, 512), 2 * 144);
    assert_int_equal(g4_dtype_row_bytes(G4_DT_Q6_K, 512), 2 * 210);
    assert_int_equal(g4_dtype_row_bytes(G4_DT_Q5_K, 512), 2 * 176);
    assert_string_equal(g4_dtype_name(G4_DT_Q5_K), "Q5_K");
    assert_int_equal(g4_dtype_row_bytes(G4_DT_IQ4_XS, 512), 2 * 136);
    assert_int_equal(g4_dtype_row_bytes(G4_DT_Q3_K, 512), 2 * 110);
    assert_int_equal(g4_dtype_row_bytes(G4_DT_Q2_K, 512), 2 * 84);
    assert_string_equal(g4_dtype_name(G4_DT_Q3_K), "Q3_K");
    assert_string_equal(g4_dtype_name(G4_DT_Q2_K), "Q2_K");
    assert_int_equal(g4_dtype_row_bytes(G4_DT_IQ4_NL, 512), 16 * 18);
    assert_string_equal(g4_dtype_name(G4_DT_IQ4_NL), "IQ4_NL");
    assert_int_equal(g4_dtype_row_bytes(G4_DT_Q4_1, 512), 16 * 20);
    assert_int_equal(g4_dtype_row_bytes(G4_DT_Q5_1, 512), 16 * 24);
    assert_int_equal(g4_dtype_row_bytes(G4_DT_BF16, 512), 1024);
    assert_string_equal(g4_dtype_name(G4_DT_Q4_K), "Q4_K");
}

/* every element's bits equal gguf-py's dequantization */
static void test_dequant_exact(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        g4_dtype dt = types[i];
        size_t rb = g4_dtype_row_bytes(dt, COLS);
        uint8_t *blocks = load(dt, "blocks", ROWS * rb);
        float *want = load(dt, "f32", ROWS * COLS * sizeof(float));
        float got[COLS];
        int bad = 0;
        for (int r = 0; r < ROWS; r++) {
            g4_to_f32(dt, blocks + r * rb, COLS, got);
            bad += memcmp(got, want + r * COLS, sizeof got) != 0;
            for (int k = 0; k < COLS && bad; k++)
                if (memcmp(&got[k], &want[r * COLS + k], 4)) {
                    print_error("%s row %d col %d: %.9g vs %.9g\n", g4_dtype_name(dt), r, k, got[k], want[r * COLS + k]);
                    break;
                }
        }
        assert_int_equal(bad, 0);
        free(blocks);
        free(want);
    }
}

static float frand(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return ((*s >> 8) / 16777216.0f) * 2.0f - 1.0f;
}

/* Y = X · Wᵀ through the table of each path, T in {1, 3, 7}, row ranges that split the rows */
static void test_matmul(void **state) {
    (void)state;
    const g4_kernels *paths[3] = {g4_kernels_scalar(), g4_kernels_avx2(), g4_kernels_avx512()};
    unsigned seed = 7;
    for (int p = 0; p < 3; p++) {
        if (!paths[p]) continue;
        for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
            g4_dtype dt = types[i];
            size_t rb = g4_dtype_row_bytes(dt, COLS);
            uint8_t *blocks = load(dt, "blocks", ROWS * rb);
            float *wf = load(dt, "f32", ROWS * COLS * sizeof(float));
            assert_non_null(paths[p]->matmul[dt]);
            for (int T = 1; T <= 7; T += 3) {
                float x[7 * COLS], y[7 * ROWS];
                for (int k = 0; k < T * COLS; k++) x[k] = frand(&seed);
                memset(y, 0, sizeof y);
                paths[p]->matmul[dt](x, T, COLS, blocks, 0, 1, y, ROWS);
                paths[p]->matmul[dt](x, T, COLS, blocks, 1, ROWS, y, ROWS);
                for (int t = 0; t < T; t++)
                    for (int n = 0; n < ROWS; n++) {
                        double ref = 0, mag = 0;
                        for (int k = 0; k < COLS; k++) {
                            ref += (double)x[t * COLS + k] * wf[n * COLS + k];
                            mag += fabs((double)x[t * COLS + k] * wf[n * COLS + k]);
                        }
                        if (fabs(y[t * ROWS + n] - ref) > 1e-5 * mag + 1e-6)
                            fail_msg("%s %s T=%d t=%d n=%d: %g vs %g", paths[p]->name, g4_dtype_name(dt), T, t, n, y[t * ROWS + n], ref);
                    }
            }
            free(blocks);
            free(wf);
        }
    }
}

/* Prefill (T >= 4) through the blocked GEMM: 16-row panels dequantized once, the rows past the
 * last full panel fused. 37 rows (the fixture's 4 repeated), split at 5 so one range has no full
 * panel and the other two panels and a tail; against dequantize-then-dot in double. */
static void test_gemm_prefill(void **state) {
    (void)state;
    enum { N = 37, TMAX = 300 };
    /* 4, 8, 11: micro-block tails; 300: two M blocks of 150 rows (avx2.c gemm_mc) */
    static const int Ts[] = {4, 8, 11, 300};
    const g4_kernels *paths[3] = {g4_kernels_scalar(), g4_kernels_avx2(), g4_kernels_avx512()};
    unsigned seed = 9;
    for (int p = 0; p < 3; p++) {
        if (!paths[p]) continue;
        for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
            g4_dtype dt = types[i];
            size_t rb = g4_dtype_row_bytes(dt, COLS);
            uint8_t *blocks = load(dt, "blocks", ROWS * rb), *w = malloc(N * rb);
            float *wf = load(dt, "f32", ROWS * COLS * sizeof(float));
            for (int n = 0; n < N; n++) memcpy(w + n * rb, blocks + (n % ROWS) * rb, rb);
            static float x[TMAX * COLS], y[TMAX * N];
            for (size_t a = 0; a < sizeof Ts / sizeof *Ts; a++) {
                const int T = Ts[a];
                for (int k = 0; k < T * COLS; k++) x[k] = frand(&seed);
                memset(y, 0, sizeof y);
                paths[p]->matmul[dt](x, T, COLS, w, 0, 5, y, N);
                paths[p]->matmul[dt](x, T, COLS, w, 5, N, y, N);
                for (int t = 0; t < T; t++)
                    for (int n = 0; n < N; n++) {
                        double ref = 0, mag = 0;
                        for (int k = 0; k < COLS; k++) {
                            ref += (double)x[t * COLS + k] * wf[(n % ROWS) * COLS + k];
                            mag += fabs((double)x[t * COLS + k] * wf[(n % ROWS) * COLS + k]);
                        }
                        if (fabs(y[t * N + n] - ref) > 1e-5 * mag + 1e-6)
                            fail_msg("%s %s T=%d t=%d n=%d: %g vs %g", paths[p]->name, g4_dtype_name(dt), T, t, n, y[t * N + n], ref);
                    }
            }
            free(blocks);
            free(w);
            free(wf);
        }
    }
}

/* Decode (T = 1..3; Q8_0 / Q4_0 / Q5_0 up to G4_QDEC_MAX_ROWS) over random blocks with sane f16
 * scales, every path (scalar, avx2, avx512 where the CPU has it): against dequantize-then-dot in
 * double; and bit for bit, each (row, t) result must not depend on the row range it was computed
 * in (the AVX2 and AVX-512 kernels take several rows per pass and chunks of 16, so 37 rows split at odd places put every row into passes of different
 * widths), nor on T (row t of a T-row call equals the same row alone: a slot decoding beside
 * others, a draft's verification). Two K per type: a small one (an odd number of blocks for the
 * 32-weight types) and one past the kernels' stack buffer of per-call activation sums at T = 3
 * (K in two segments). */
static void rand_blocks(g4_dtype dt, uint8_t *w, size_t nbytes, unsigned *seed) {
    const size_t bb = g4_dtype_size(dt);
    for (size_t i = 0; i < nbytes; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        w[i] = (uint8_t)(*seed >> 24);
    }
    for (size_t b = 0; b < nbytes / bb; b++) {   /* f16 scales in [2^-9, 2^-8), either sign */
        uint8_t *p = w + b * bb + (dt == G4_DT_Q6_K ? 208 : dt == G4_DT_Q3_K ? 108 : dt == G4_DT_Q2_K ? 80 : 0);
        for (int k = 0; k < (dt == G4_DT_Q4_K || dt == G4_DT_Q5_K || dt == G4_DT_Q2_K || dt == G4_DT_Q4_1 || dt == G4_DT_Q5_1 ? 2 : 1);
             k++) {   /* d (, dmin / m) */
            *seed = *seed * 1664525u + 1013904223u;
            const uint16_t h = (uint16_t)(0x1800 | ((*seed >> 8) & 0x3ff) | (((*seed >> 20) & 1) << 15));
            p[2 * k] = (uint8_t)h;
            p[2 * k + 1] = (uint8_t)(h >> 8);
        }
    }
}

static void test_decode_rows(void **state) {
    (void)state;
    enum { N = 37, TM = G4_QDEC_MAX_ROWS };
    const g4_kernels *paths[3] = {g4_kernels_scalar(), g4_kernels_avx2(), g4_kernels_avx512()};
    const g4_dtype dts[] = {G4_DT_Q8_0, G4_DT_Q4_0, G4_DT_Q5_0, G4_DT_Q4_K, G4_DT_Q6_K, G4_DT_Q5_K, G4_DT_IQ4_XS,
                            G4_DT_Q3_K, G4_DT_Q2_K, G4_DT_IQ4_NL, G4_DT_Q4_1, G4_DT_Q5_1};
    const int smallK[] = {23 * 32, 23 * 32, 23 * 32, 3 * 256, 3 * 256, 3 * 256, 3 * 256, 3 * 256, 3 * 256, 23 * 32, 23 * 32, 23 * 32};
    const int bigK[] = {342 * 32, 342 * 32, 342 * 32, 342 * 256, 171 * 256, 61 * 256, 61 * 256, 61 * 256, 61 * 256, 342 * 32,
                        342 * 32, 342 * 32};
    const int maxT[] = {TM, TM, TM, 3, 3, TM, TM, TM, TM, TM, TM, TM};   /* the rows each kernel keeps row-invariant */
    unsigned seed = 11;
    for (int p = 0; p < 3; p++) {
        if (!paths[p]) continue;
        for (int i = 0; i < 12; i++) {
            const g4_dtype dt = dts[i];
            const int TT = maxT[i];
            for (int kk = 0; kk < 2; kk++) {
                const int K = kk ? bigK[i] : smallK[i];
                const size_t rb = g4_dtype_row_bytes(dt, K);
                uint8_t *w = malloc(N * rb);
                float *wf = malloc((size_t)K * sizeof(float)), *x = malloc(TM * (size_t)K * sizeof(float));
                float y[TM * N], y1[TM * N];
                rand_blocks(dt, w, N * rb, &seed);
                for (int k = 0; k < TT * K; k++) x[k] = frand(&seed);
                for (int t = 0; t < TT; t++)   /* each activation row alone, each weight row alone */
                    for (int n = 0; n < N; n++) paths[p]->matmul[dt](x + (size_t)t * K, 1, K, w, n, n + 1, y1 + t * N, N);
                for (int n = 0; n < N; n++) {
                    g4_dequant_row(dt, w + n * rb, K, wf);
                    for (int t = 0; t < TT; t++) {
                        double ref = 0, mag = 0;
                        for (int k = 0; k < K; k++) {
                            ref += (double)x[(size_t)t * K + k] * wf[k];
                            mag += fabs((double)x[(size_t)t * K + k] * wf[k]);
                        }
                        if (fabs(y1[t * N + n] - ref) > 1e-5 * mag + 1e-6)
                            fail_msg("%s %s K=%d t=%d n=%d: %g vs %g", paths[p]->name, g4_dtype_name(dt), K, t, n, y1[t * N + n], ref);
                    }
                }
                for (int T = 1; T <= TT; T += T < 5 ? 1 : T == 14 ? 2 : 3) {   /* 1-5, 8, 11, 14, 16 */
                    const int cuts[][4] = {{0, N, N, N}, {0, 5, 6, N}, {0, 3, 30, N}};
                    for (int c = 0; c < 3; c++) {
                        memset(y, 0, sizeof y);
                        for (int s = 0; s < 3; s++)
                            if (cuts[c][s] < cuts[c][s + 1]) paths[p]->matmul[dt](x, T, K, w, cuts[c][s], cuts[c][s + 1], y, N);
                        for (int t = 0; t < T; t++)
                            for (int n = 0; n < N; n++)
                                if (memcmp(&y[t * N + n], &y1[t * N + n], sizeof(float)))
                                    fail_msg("%s %s K=%d T=%d cut %d t=%d n=%d: %.9g vs alone %.9g", paths[p]->name,
                                             g4_dtype_name(dt), K, T, c, t, n, y[t * N + n], y1[t * N + n]);
                    }
                }
                free(w);
                free(wf);
                free(x);
            }
        }
    }
}

/* The avx512 table's Q8_0 / Q4_0 / Q5_0 / IQ4_NL / Q4_1 / Q5_1 decode (quant_legacy_avx512.c: 16 lanes, signed quants)
 * sums in another order than the scalar reference (g4_mm_*_ref: one sequential float sum) and the
 * AVX2 kernel: each result within 4e-7 of sum |x * w| of the scalar reference's (measured: 1.4e-7
 * at most, K = 640-15360) and within 5e-8 of the dot in double (measured: 2.0e-8; the scalar
 * reference's own error is up to 1.3e-7). Skipped without AVX-512. */
static void test_legacy_avx512_tolerance(void **state) {
    (void)state;
    const g4_kernels *k = g4_kernels_avx512();
    if (!k) skip();
    enum { N = 64 };
    const g4_dtype dts[] = {G4_DT_Q8_0, G4_DT_Q4_0, G4_DT_Q5_0, G4_DT_IQ4_NL, G4_DT_Q4_1, G4_DT_Q5_1};
    const g4_matmul_fn ref[] = {g4_mm_q8_0_ref, g4_mm_q4_0_ref, g4_mm_q5_0_ref, g4_mm_iq4_nl_ref, g4_mm_q4_1_ref, g4_mm_q5_1_ref};
    const int Ks[] = {640, 4096};
    unsigned seed = 29;
    double worst_ref = 0, worst_exact = 0;
    for (int i = 0; i < 6; i++)
        for (int kk = 0; kk < 2; kk++) {
            const g4_dtype dt = dts[i];
            const int K = Ks[kk];
            const size_t rb = g4_dtype_row_bytes(dt, K);
            uint8_t *w = malloc(N * rb);
            float *x = malloc((size_t)K * sizeof(float)), *wf = malloc((size_t)K * sizeof(float)), y[N], yr[N];
            rand_blocks(dt, w, N * rb, &seed);
            for (int j = 0; j < K; j++) x[j] = frand(&seed);
            k->matmul[dt](x, 1, K, w, 0, N, y, N);
            ref[i](x, 1, K, w, 0, N, yr, N);
            for (int n = 0; n < N; n++) {
                g4_dequant_row(dt, w + n * rb, K, wf);
                double exact = 0, mag = 0;
                for (int j = 0; j < K; j++) {
                    exact += (double)x[j] * wf[j];
                    mag += fabs((double)x[j] * wf[j]);
                }
                const double er = fabs(y[n] - yr[n]) / mag, ee = fabs(y[n] - exact) / mag;
                worst_ref = er > worst_ref ? er : worst_ref;
                worst_exact = ee > worst_exact ? ee : worst_exact;
                if (er > 4e-7 || ee > 5e-8)
                    fail_msg("%s K=%d n=%d: %.9g, scalar %.9g, double %.9g", g4_dtype_name(dt), K, n, y[n], yr[n], exact);
            }
            free(w);
            free(x);
            free(wf);
        }
    print_message("avx512 legacy decode: %.2g of sum |xw| from the scalar reference, %.2g from double\n", worst_ref,
                  worst_exact);
}

/* The K-quant decodes that multiply dequantized weights are, bit for bit, their stated chain: per
 * (weight row, activation row) L lanes (16: the avx512 table's Q4_K / Q6_K / Q5_K / IQ4_XS / Q3_K /
 * Q2_K, quant_k_avx512.c; 8: the avx2 table's Q5_K / IQ4_XS / Q3_K / Q2_K, quant_dq256_avx2.c), lane l summing
 * w[L i + l] * x[L i + l] by FMA in i order over g4_dequant_row's weights, then halves added down
 * to one. Checked through matmul (T 1-3) and matmul_rows (T 1-16: tiles of 1-4 weight rows by 1-8
 * activation rows, 11 weight rows so that every tile width leaves a remainder); and their distance
 * from the dot in double, printed. */
static float lane_chain(const float *w, const float *x, int K, int L) {
    float v[16] = {0};
    for (int k = 0; k < K; k += L)
        for (int l = 0; l < L; l++) v[l] = fmaf(w[k + l], x[k + l], v[l]);
    for (int h = L / 2; h >= 1; h /= 2)
        for (int l = 0; l < h; l++) v[l] = v[l] + v[l + h];
    return v[0];
}

static void test_k_dequant_chain(void **state) {
    (void)state;
    const g4_kernels *k512 = g4_kernels_avx512(), *avx2 = g4_kernels_avx2();
    if (!avx2) skip();
    /* AVX-512 F without BW/VL keeps the AVX2 K-quant kernels: the 16-lane cases are skipped */
    const int has512 = k512 && k512->matmul_rows[G4_DT_Q4_K] != avx2->matmul_rows[G4_DT_Q4_K];
    enum { N = 11, TM = 16, K = 5 * 256 };
    const struct { int lanes; g4_dtype dt; } cases[] = {
        {16, G4_DT_Q4_K}, {16, G4_DT_Q6_K}, {16, G4_DT_Q5_K}, {16, G4_DT_IQ4_XS}, {16, G4_DT_Q3_K}, {16, G4_DT_Q2_K},
        {8, G4_DT_Q5_K},  {8, G4_DT_IQ4_XS}, {8, G4_DT_Q3_K},  {8, G4_DT_Q2_K}};
    unsigned seed = 23;
    double worst = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const g4_kernels *k = cases[i].lanes == 16 ? k512 : avx2;
        if (cases[i].lanes == 16 && !has512) continue;
        const g4_dtype dt = cases[i].dt;
        const size_t rb = g4_dtype_row_bytes(dt, K);
        uint8_t *w = malloc(N * rb);
        float *wf = malloc((size_t)N * K * sizeof(float)), *x = malloc((size_t)TM * K * sizeof(float));
        float y[TM * N];
        rand_blocks(dt, w, N * rb, &seed);
        for (int j = 0; j < TM * K; j++) x[j] = frand(&seed);
        for (int n = 0; n < N; n++) g4_dequant_row(dt, w + n * rb, K, wf + (size_t)n * K);
        for (int T = 1; T <= TM; T++)
            for (int rows = 0; rows < 2; rows++) {
                if (!rows && T > 3) continue;
                (rows ? k->matmul_rows : k->matmul)[dt](x, T, K, w, 0, N, y, N);
                for (int t = 0; t < T; t++)
                    for (int n = 0; n < N; n++) {
                        const float want = lane_chain(wf + (size_t)n * K, x + (size_t)t * K, K, cases[i].lanes);
                        if (memcmp(&want, &y[t * N + n], sizeof want))
                            fail_msg("%s %s %s T=%d t=%d n=%d: %.9g, the chain gives %.9g", k->name, g4_dtype_name(dt),
                                     rows ? "matmul_rows" : "matmul", T, t, n, y[t * N + n], want);
                        double ref = 0, mag = 0;
                        for (int j = 0; j < K; j++) {
                            ref += (double)wf[(size_t)n * K + j] * x[(size_t)t * K + j];
                            mag += fabs((double)wf[(size_t)n * K + j] * x[(size_t)t * K + j]);
                        }
                        if (fabs(want - ref) / mag > worst) worst = fabs(want - ref) / mag;
                    }
            }
        free(w);
        free(wf);
        free(x);
    }
    print_message("dequantized-weight K-quant decode: %.2g of sum |xw| from the dot in double\n", worst);
    assert_true(worst < 1e-6);
}

/* The exact decode's float results are pinned bit for bit: the AVX2 decode of every quantized type
 * and the AVX-512 Q4_K / Q6_K / Q5_K / IQ4_XS / Q3_K / Q2_K decode (T = 1-3, two K each) hashed over fixed
 * random blocks and activations. A rewrite of how
 * the kernels unpack quants must keep every float operation and its order (docs/numerics.md:
 * exact mode is bit-identical before and after); a deliberate change of the summation order
 * updates these hashes and states its tolerance. */
static uint64_t fnv1a(const float *v, size_t n, uint64_t h) {
    const uint8_t *p = (const uint8_t *)v;
    for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void test_decode_bits_pinned(void **state) {
    (void)state;
    const g4_kernels *avx2 = g4_kernels_avx2(), *avx512 = g4_kernels_avx512();
    if (!avx2) skip();
    enum { N = 13 };
    /* path 1: the AVX2 kernels; path 2: the avx512 table's (quant_k_avx512.c: 16 lanes, another
     * summation order, so other bits) */
    const struct { int path; g4_dtype dt; int K; uint64_t want; } cases[] = {
        {1, G4_DT_Q4_K, 3 * 256, 0xf6951a66d2ed6436ull},
        {1, G4_DT_Q4_K, 342 * 256, 0x62f20752befa0491ull},   /* past pre at T = 3: two segments */
        {1, G4_DT_Q6_K, 3 * 256, 0xe672af060b069d0dull},
        {1, G4_DT_Q6_K, 171 * 256, 0x40546eaa77fd3be7ull},
        {1, G4_DT_Q8_0, 23 * 32, 0x46ca2ac877ff0208ull},   /* the legacy decode (quant_legacy_avx2.c) */
        {1, G4_DT_Q8_0, 342 * 32, 0xd4b53032e2dc0205ull},
        {1, G4_DT_Q4_0, 23 * 32, 0x0afc356149b15a50ull},
        {1, G4_DT_Q4_0, 342 * 32, 0x9c1951f0df7c3b9dull},   /* past a segment of 341 blocks: two */
        {1, G4_DT_Q5_0, 23 * 32, 0x4da70f43a057ca2cull},
        {1, G4_DT_Q5_0, 342 * 32, 0x349ee4cd2bd4803dull},
        {2, G4_DT_Q4_K, 3 * 256, 0xa6a3f8e3af2afa68ull},
        {2, G4_DT_Q4_K, 342 * 256, 0x7a881e9fd54be0f2ull},
        {2, G4_DT_Q6_K, 3 * 256, 0xa7a490c7011943dcull},
        {2, G4_DT_Q6_K, 171 * 256, 0x41273fcca518cf18ull},
        {1, G4_DT_Q5_K, 3 * 256, 0xfd93f35cc9a1fbd5ull},   /* quant_dq256_avx2.c (8 lanes) */
        {1, G4_DT_Q5_K, 61 * 256, 0x97a80cc809c83614ull},
        {2, G4_DT_Q5_K, 3 * 256, 0x66059892c429e240ull},   /* quant_k_avx512.c (16 lanes) */
        {2, G4_DT_Q5_K, 61 * 256, 0xd953382aef50ccd7ull},
        {1, G4_DT_IQ4_XS, 3 * 256, 0x6ffefb265a7f86d7ull},
        {1, G4_DT_IQ4_XS, 61 * 256, 0x6199043a61c9f774ull},
        {2, G4_DT_IQ4_XS, 3 * 256, 0x65658e9af068c6bbull},
        {2, G4_DT_IQ4_XS, 61 * 256, 0xa9e14d49b4f7d2e8ull},
        {1, G4_DT_Q3_K, 3 * 256, 0xf22fae03d325f570ull},
        {1, G4_DT_Q3_K, 61 * 256, 0x45e21aaeeb158f39ull},
        {2, G4_DT_Q3_K, 3 * 256, 0x60024bf1c92be24full},
        {2, G4_DT_Q3_K, 61 * 256, 0xc7dbe2cf0c3e5ac0ull},
        {1, G4_DT_Q2_K, 3 * 256, 0x1b03a240907c2305ull},
        {1, G4_DT_Q2_K, 61 * 256, 0x53a073cae1ae3738ull},
        {2, G4_DT_Q2_K, 3 * 256, 0x6b1aa1a48607ae70ull},
        {2, G4_DT_Q2_K, 61 * 256, 0x684a11d03cb3f906ull},
        {1, G4_DT_IQ4_NL, 23 * 32, 0x744d1c9660146f32ull},   /* quant_legacy_avx2.c */
        {1, G4_DT_IQ4_NL, 342 * 32, 0x0b98227527a92da5ull},
        {2, G4_DT_IQ4_NL, 23 * 32, 0xc40ac862acf68417ull},   /* quant_legacy_avx512.c */
        {2, G4_DT_IQ4_NL, 342 * 32, 0xe7f767c7c3bf20f3ull},
        {1, G4_DT_Q4_1, 23 * 32, 0x75d253417997f222ull},
        {1, G4_DT_Q4_1, 342 * 32, 0x1edd3d68b61f2fc3ull},
        {2, G4_DT_Q4_1, 23 * 32, 0xd67eb593846f3495ull},
        {2, G4_DT_Q4_1, 342 * 32, 0x1565f694397e64c3ull},
        {1, G4_DT_Q5_1, 23 * 32, 0x6f37e04aae15f174ull},
        {1, G4_DT_Q5_1, 342 * 32, 0xa10fd733277d7287ull},
        {2, G4_DT_Q5_1, 23 * 32, 0xd7ab2b26b1aa00aeull},
        {2, G4_DT_Q5_1, 342 * 32, 0xf1ea72695c2547bcull},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const g4_kernels *k = cases[i].path == 1 ? avx2 : avx512;
        if (!k || (cases[i].path == 2 && k->matmul[cases[i].dt] == avx2->matmul[cases[i].dt]))
            continue;   /* no AVX-512 F/BW/VL here: the avx512 bits are checked where it runs */
        const g4_dtype dt = cases[i].dt;
        const int K = cases[i].K;
        const size_t rb = g4_dtype_row_bytes(dt, K);
        unsigned seed = 17;
        uint8_t *w = malloc(N * rb);
        float *x = malloc(3 * (size_t)K * sizeof(float)), y[3 * N];
        rand_blocks(dt, w, N * rb, &seed);
        for (int k = 0; k < 3 * K; k++) x[k] = frand(&seed);
        uint64_t h = 1469598103934665603ull;
        for (int T = 1; T <= 3; T++) {
            k->matmul[dt](x, T, K, w, 0, N, y, N);
            h = fnv1a(y, (size_t)T * N, h);
        }
        if (h != cases[i].want) {
            print_error("%s %s K=%d: decode bits changed (hash 0x%016llx)\n", k->name, g4_dtype_name(dt), K, (unsigned long long)h);
            bad++;
        }
        free(w);
        free(x);
    }
    assert_int_equal(bad, 0);
}

/* The AVX2 decode's table of block scales (quant.h g4_f16_f32_avx2): every half's float, bit for
 * bit the scalar conversion's (NaNs: any NaN) */
static void test_f16_table(void **state) {
    (void)state;
    if (!g4_kernels_avx2()) skip();
    g4_f16_f32_avx2_init();
    for (uint32_t h = 0; h < 65536; h++) {
        const float want = g4_f16_to_f32((uint16_t)h), got = g4_f16_f32_avx2[h];
        if (isnan(want) ? !isnan(got) : memcmp(&want, &got, sizeof got))
            fail_msg("f16 0x%04x: %.9g vs %.9g", (unsigned)h, got, want);
    }
}

/* The prefill GEMMs' quantized panels (quant_panel_avx2.c, and quant_panel_avx512.c where the
 * CPU has AVX-512F): every weight's bits equal g4_dequant_row's; and the AVX-512 GEMM on packed input (the avx512 table's matmul_xp, as the
 * forward pass calls it for chunks of more than 16 rows) bit-identical to the AVX2 quantized
 * GEMM (the same panels and per-output FMA order), over two K blocks of 512, a row range with no
 * full panel and one with a pair of panels. */
static void test_prefill_panels(void **state) {
    (void)state;
    enum { N = 37, K = 1024, T = 40 };
    static const g4_dtype qt[] = {G4_DT_Q8_0, G4_DT_Q4_0, G4_DT_Q5_0, G4_DT_Q4_K, G4_DT_Q6_K, G4_DT_Q5_K, G4_DT_IQ4_XS,
                                  G4_DT_Q3_K, G4_DT_Q2_K, G4_DT_IQ4_NL, G4_DT_Q4_1, G4_DT_Q5_1};
    const g4_kernels *avx2 = g4_kernels_avx2(), *avx512 = g4_kernels_avx512();
    if (!avx2) skip();
    unsigned seed = 11;
    static float x[T * K], y0[T * N], y1[T * N], deq[16 * K], panel[G4_QUANT_PANEL_KC * 16] __attribute__((aligned(32)));
    static float xp[(T + 15) * K];
    for (size_t i = 0; i < sizeof qt / sizeof *qt; i++) {
        const g4_dtype dt = qt[i];
        const size_t rb = g4_dtype_row_bytes(dt, K);
        uint8_t *w = malloc(N * rb);
        assert_non_null(w);
        rand_blocks(dt, w, N * rb, &seed);
        for (int r = 0; r < 16; r++) g4_dequant_row(dt, w + r * rb, K, deq + r * K);
        /* the AVX-512 decoders where the CPU has them; panels of 512 columns, then of one K-quant
         * block or of 3 32-weight blocks (a Q8_0 pair and a single, a Q4_0 group of 3) */
        const int kc2 = g4_dtype_block(dt) == 256 ? 256 : 96;
        for (int isa = 0; isa < (avx512 ? 2 : 1); isa++)
            for (int kc = 512, pass = 0; pass < 2; pass++, kc = kc2)
                for (int k0 = 0; k0 + kc <= K; k0 += kc) {
                    (isa ? g4_quant_panel16_avx512 : g4_quant_panel16_avx2)(dt, w, rb, k0, kc, panel);
                    for (int k = 0; k < kc; k++)
                        for (int r = 0; r < 16; r++)
                            if (memcmp(&panel[k * 16 + r], &deq[r * K + k0 + k], 4))
                                fail_msg("%s %s panel row %d col %d: %.9g vs %.9g", isa ? "avx512" : "avx2",
                                         g4_dtype_name(dt), r, k0 + k, panel[k * 16 + r], deq[r * K + k0 + k]);
                }
        if (avx512) {
            assert_non_null(avx512->matmul_xp[dt]);
            for (int k = 0; k < T * K; k++) x[k] = frand(&seed);
            avx512->pack_x(x, T, K, 0, (T + avx512->x_mr - 1) / avx512->x_mr, xp);
            memset(y0, 0, sizeof y0);
            memset(y1, 0, sizeof y1);
            avx2->matmul[dt](x, T, K, w, 0, 5, y0, N);
            avx2->matmul[dt](x, T, K, w, 5, N, y0, N);
            avx512->matmul_xp[dt](x, xp, T, K, w, 0, 5, y1, N);
            avx512->matmul_xp[dt](x, xp, T, K, w, 5, N, y1, N);
            for (int j = 0; j < T * N; j++)
                if (memcmp(&y0[j], &y1[j], 4))
                    fail_msg("%s t=%d n=%d: avx512 %.9g vs avx2 %.9g", g4_dtype_name(dt), j / N, j % N, y1[j], y0[j]);
        }
        free(w);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_dequant_exact),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_gemm_prefill),
        cmocka_unit_test(test_decode_rows),
        cmocka_unit_test(test_legacy_avx512_tolerance),
        cmocka_unit_test(test_k_dequant_chain),
        cmocka_unit_test(test_decode_bits_pinned),
        cmocka_unit_test(test_f16_table),
        cmocka_unit_test(test_prefill_panels),
    };
    return cmocka_run_group_tests_name("quant", tests, NULL, NULL);
}
