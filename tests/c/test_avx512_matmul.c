/* test_avx512_matmul.c — the AVX-512F exact GEMM (cpu/avx512.c) against a double-precision sum of
 * the same products, for f32 / f16 / bf16 weights: T across the 14-row blocks and the GEMV
 * hand-off (T < 4), K past the 512-column panel and not a multiple of 8, row ranges of whole
 * 32-row panel pairs, a single 16-row panel and a tail of < 16 rows, accumulation across K blocks
 * and y's columns outside [n0, n1) left untouched; the same on input packed once (pack_x +
 * matmul_xp, as the forward pass calls it); the bf16 decode GEMV on 512-bit loads (T = 1: super
 * blocks, 4-row blocks, the rows left over). Twice: the kernel's own source compiled against a C emulation of
 * the intrinsics (emu_avx512_amx.h; the AVX2 packers and fallbacks are the library's, so that
 * part needs AVX2), and the library's real kernel where this CPU has AVX-512F (skipped elsewhere). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>

#include "kernels/kernels.h"

#define G4_AVX512_EMULATED
#include "emu_avx512_amx.h"
#define g4_matmul_f32_avx512 emu_matmul_f32_avx512
#define g4_matmul_f16_avx512 emu_matmul_f16_avx512
#define g4_matmul_bf16_avx512 emu_matmul_bf16_avx512
#define g4_pack_x_avx512 emu_pack_x_avx512
#define g4_matmul_xp_f32_avx512 emu_matmul_xp_f32_avx512
#define g4_matmul_xp_f16_avx512 emu_matmul_xp_f16_avx512
#define g4_matmul_xp_bf16_avx512 emu_matmul_xp_bf16_avx512
#define g4_matmul_rows_bf16_avx512 emu_matmul_rows_bf16_avx512
#define g4_matmul_xp_q8_0_avx512 emu_matmul_xp_q8_0_avx512
#define g4_matmul_xp_q4_0_avx512 emu_matmul_xp_q4_0_avx512
#define g4_matmul_xp_q5_0_avx512 emu_matmul_xp_q5_0_avx512
#define g4_matmul_xp_q4_k_avx512 emu_matmul_xp_q4_k_avx512
#define g4_matmul_xp_q6_k_avx512 emu_matmul_xp_q6_k_avx512
#define g4_matmul_xp_q5_k_avx512 emu_matmul_xp_q5_k_avx512
#define g4_matmul_xp_iq4_xs_avx512 emu_matmul_xp_iq4_xs_avx512
#define g4_matmul_xp_q3_k_avx512 emu_matmul_xp_q3_k_avx512
#define g4_matmul_xp_q2_k_avx512 emu_matmul_xp_q2_k_avx512
#define g4_matmul_xp_iq4_nl_avx512 emu_matmul_xp_iq4_nl_avx512
#define g4_matmul_xp_q4_1_avx512 emu_matmul_xp_q4_1_avx512
#define g4_matmul_xp_q5_1_avx512 emu_matmul_xp_q5_1_avx512
#define g4_quant_panel16_avx512 g4_quant_panel16_avx2   /* the real one needs AVX-512 */
#include "../../src/kernels/cpu/avx512.c"
#undef g4_matmul_f32_avx512
#undef g4_matmul_f16_avx512
#undef g4_matmul_bf16_avx512
#undef g4_pack_x_avx512
#undef g4_matmul_xp_f32_avx512
#undef g4_matmul_xp_f16_avx512
#undef g4_matmul_xp_bf16_avx512
#undef g4_matmul_rows_bf16_avx512
#undef g4_matmul_xp_q8_0_avx512
#undef g4_matmul_xp_q4_0_avx512
#undef g4_matmul_xp_q5_0_avx512
#undef g4_matmul_xp_q4_k_avx512
#undef g4_matmul_xp_q6_k_avx512
#undef g4_matmul_xp_q5_k_avx512
#undef g4_matmul_xp_iq4_xs_avx512
#undef g4_matmul_xp_q3_k_avx512
#undef g4_matmul_xp_q2_k_avx512
#undef g4_matmul_xp_iq4_nl_avx512
#undef g4_matmul_xp_q4_1_avx512
#undef g4_matmul_xp_q5_1_avx512

/* matmul_xp behind g4_matmul_fn's signature: X packed by pack_x (all panels), then the GEMM on
 * the panels, as the forward pass calls them (kernels/matmul.c pack_inputs) */
static g4_pack_x_fn cur_pack;
static g4_matmul_xp_fn cur_xp[G4_DT_COUNT];
static void via_packed(g4_dtype dt, const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    const int nb = (T + G4_AVX512_XMR - 1) / G4_AVX512_XMR;
    float *xp = malloc(sizeof(float) * (size_t)nb * G4_AVX512_XMR * K);
    assert_non_null(xp);
    for (size_t i = 0; i < (size_t)nb * G4_AVX512_XMR * K; i++) xp[i] = NAN;   /* padding rows are not read */
    cur_pack(x, T, K, 0, nb / 2, xp);   /* in two calls, as the pool's tasks split it */
    cur_pack(x, T, K, nb / 2, nb, xp);
    cur_xp[dt](x, xp, T, K, w, n0, n1, y, ldy);
    free(xp);
}
static void packed_f32(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    via_packed(G4_DT_F32, x, T, K, w, n0, n1, y, ldy);
}
static void packed_f16(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    via_packed(G4_DT_F16, x, T, K, w, n0, n1, y, ldy);
}
static void packed_bf16(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    via_packed(G4_DT_BF16, x, T, K, w, n0, n1, y, ldy);
}

static float frand(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return ((*s >> 8) / 16777216.0f) * 2.0f - 1.0f;
}

/* f16 bits of a value in [-1, 1) on a coarse grid (exactly representable) */
static uint16_t to_f16(float v) {
    const int q = (int)lrintf(v * 1024.0f);   /* multiples of 2^-10 */
    if (q == 0) return 0;
    const int neg = q < 0, a = neg ? -q : q;
    int e = 0;
    while ((a >> e) > 1) e++;   /* a = 1.m x 2^e, value = a x 2^-10 */
    const int mant = (a << (10 - e)) & 0x3ff;
    return (uint16_t)((neg << 15) | ((e - 10 + 15) << 10) | mant);
}

static double weight(g4_dtype dt, const void *w, size_t i) {
    return dt == G4_DT_F32 ? ((const float *)w)[i]
         : dt == G4_DT_F16 ? g4_f16_to_f32(((const uint16_t *)w)[i])
                           : g4_bf16_to_f32(((const uint16_t *)w)[i]);
}

static void check(g4_matmul_fn mm, g4_dtype dt, int T, int K, int N, int n0, int n1) {
    const int ldy = N + 5;
    const size_t esz = dt == G4_DT_F32 ? 4 : 2;
    float *x = malloc((size_t)T * K * sizeof *x), *y = malloc((size_t)T * ldy * sizeof *y);
    void *w = malloc((size_t)N * K * esz);
    unsigned seed = (unsigned)(T * 131 + K * 7 + N + dt);
    for (size_t i = 0; i < (size_t)T * K; i++) x[i] = frand(&seed) * 2.0f;
    for (size_t i = 0; i < (size_t)N * K; i++) {
        const float v = frand(&seed) * 0.5f;
        if (dt == G4_DT_F32) ((float *)w)[i] = v;
        else ((uint16_t *)w)[i] = dt == G4_DT_F16 ? to_f16(v) : g4_f32_to_bf16(v);
    }
    for (size_t i = 0; i < (size_t)T * ldy; i++) y[i] = -12345.0f;
    mm(x, T, K, w, n0, n1, y, ldy);
    for (int t = 0; t < T; t++)
        for (int n = 0; n < ldy; n++) {
            const float got = y[(size_t)t * ldy + n];
            if (n < n0 || n >= n1) {
                if (got != -12345.0f) fail_msg("dt=%d T=%d K=%d: column %d outside [%d, %d) written", dt, T, K, n, n0, n1);
                continue;
            }
            double ref = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                const double p = (double)x[(size_t)t * K + k] * weight(dt, w, (size_t)n * K + k);
                ref += p;
                mag += fabs(p);
            }
            /* fp32 sums: ~sqrt(K) roundings of 2^-24 of the running magnitude; a lost, doubled or
             * misplaced product is ~mag / K, far outside */
            if (!(fabs(got - ref) <= 1e-5 * mag + 1e-30))   /* NaN fails too */
                fail_msg("dt=%d T=%d K=%d n=%d t=%d: %g vs %g", dt, T, K, n, t, got, ref);
        }
    free(x);
    free(w);
    free(y);
}

static const int shapes[][5] = {   /* T, K, N, n0, n1 */
    {1, 64, 32, 0, 32},      {3, 40, 48, 16, 48},     {4, 8, 32, 0, 32},       {5, 64, 48, 16, 48},
    {14, 96, 64, 0, 64},     {15, 520, 80, 0, 77},    {29, 1032, 64, 16, 64},  {45, 96, 100, 32, 99},
    {64, 63, 40, 0, 40},     {70, 544, 112, 0, 112},  {90, 136, 96, 32, 96},   {100, 16, 200, 16, 196},
    {300, 40, 48, 0, 48},    /* two M blocks */
    {1, 96, 53, 0, 53},      /* the decode GEMV: 3 super blocks of 16 rows, a 4-row block, 1 row left */
    {1, 4096, 40, 4, 39},    /* rows of 8 KB: the AVX2 GEMV's, each row's stream prefetched */
    {3, 6144, 24, 0, 21},    /* the same for a 3-slot decode step, a row past the last 4-row block */
};

static void check_all(g4_matmul_fn f32, g4_matmul_fn f16, g4_matmul_fn bf16, int packed) {
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int *s = shapes[i];
        if (packed && (s[0] < 4 || s[1] % 8)) continue;   /* outside matmul_xp's contract */
        check(f32, G4_DT_F32, s[0], s[1], s[2], s[3], s[4]);
        check(f16, G4_DT_F16, s[0], s[1], s[2], s[3], s[4]);
        check(bf16, G4_DT_BF16, s[0], s[1], s[2], s[3], s[4]);
    }
}

static void test_emulated(void **state) {
    (void)state;
    if (!g4_kernels_avx2()) skip();   /* the packers and the T < 4 hand-off are AVX2 code */
    check_all(emu_matmul_f32_avx512, emu_matmul_f16_avx512, emu_matmul_bf16_avx512, 0);
    cur_pack = emu_pack_x_avx512;
    cur_xp[G4_DT_F32] = emu_matmul_xp_f32_avx512;
    cur_xp[G4_DT_F16] = emu_matmul_xp_f16_avx512;
    cur_xp[G4_DT_BF16] = emu_matmul_xp_bf16_avx512;
    check_all(packed_f32, packed_f16, packed_bf16, 1);
}

static void test_hardware(void **state) {
    (void)state;
    const g4_kernels *k = g4_kernels_avx512();
    if (!k) skip();
    check_all(k->matmul[G4_DT_F32], k->matmul[G4_DT_F16], k->matmul[G4_DT_BF16], 0);
    assert_non_null(k->pack_x);
    assert_int_equal(k->x_mr, G4_AVX512_XMR);
    cur_pack = k->pack_x;
    for (int d = 0; d < G4_DT_COUNT; d++) cur_xp[d] = k->matmul_xp[d];
    check_all(packed_f32, packed_f16, packed_bf16, 1);
}

/* the shape the model's prefill gives it: a 64-row chunk over a 1536-column matrix */
static void test_model_shape_emulated(void **state) {
    (void)state;
    if (!g4_kernels_avx2()) skip();
    check(emu_matmul_bf16_avx512, G4_DT_BF16, 64, 1536, 96, 0, 96);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_emulated),
        cmocka_unit_test(test_model_shape_emulated),
        cmocka_unit_test(test_hardware),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
