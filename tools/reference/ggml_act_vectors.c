/* ggml_act_vectors.c — writes the --act-q8 test vectors in tests/fixtures/quant/ with ggml's own
 * activation quantizers from a llama.cpp build outside this repo: quantize_row_q8_0_ref,
 * quantize_row_q8_1_ref and quantize_row_q8_K_ref (libggml-base) and the x86 AVX2
 * quantize_row_q8_0 / quantize_row_q8_1 (libggml-cpu, the ones llama.cpp runs on an AVX2 CPU). gguf-py has a Q8_0 quantizer only (cross-checked against the
 * _ref blocks by tools/reference/check_act_vectors.py) and no Q8_K one. Not part of gemma4c.
 *
 * build: cc -O2 tools/reference/ggml_act_vectors.c -o /tmp/gav -lm -L$LLAMA/build/bin -lggml-base -lggml-cpu -Wl,-rpath,$LLAMA/build/bin
 * usage: /tmp/gav tests/fixtures/quant
 * writes act_in.f32 (ROWS x 512 floats), act_Q8_0_ref.blocks, act_Q8_0_x86.blocks, act_Q8_K.blocks,
 * act_Q8_1_ref.blocks, act_Q8_1_x86.blocks, and act_dots_{generic,x86}.f32: ggml's
 * ggml_vec_dot_{q8_0,q4_0,q5_0,iq4_nl}_q8_0 / {q4_K,q6_K,q5_K,iq4_xs,q3_K,q2_K}_q8_K / {q4_1,q5_1}_q8_1
 * (the _generic C code and the x86 AVX2 build) of each weight row of tests/fixtures/quant/<TYPE>.blocks
 * (4 rows of 512) with each activation row (act_Q8_0_x86 / act_Q8_K / act_Q8_1_x86 blocks):
 * [12 types][4][ROWS]. The x86 dots come from an AVX2-only build (GGML_NATIVE=OFF, GGML_AVX2=ON)
 * and the generic ones from any build. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void quantize_row_q8_0_ref(const float *x, void *y, int64_t k);
void quantize_row_q8_K_ref(const float *x, void *y, int64_t k);
void quantize_row_q8_1_ref(const float *x, void *y, int64_t k);
void quantize_row_q8_0(const float *x, void *y, int64_t k);   /* ggml-cpu, arch/x86 (AVX2) */
void quantize_row_q8_1(const float *x, void *y, int64_t k);
typedef void (*vec_dot_fn)(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc);
#define DOTS(T) void ggml_vec_dot_##T(int, float *, size_t, const void *, size_t, const void *, size_t, int); \
                void ggml_vec_dot_##T##_generic(int, float *, size_t, const void *, size_t, const void *, size_t, int);
void ggml_cpu_init(void);   /* fills the fp16 tables the _generic code reads */
DOTS(q8_0_q8_0) DOTS(q4_0_q8_0) DOTS(q5_0_q8_0) DOTS(q4_K_q8_K) DOTS(q6_K_q8_K) DOTS(q5_K_q8_K) DOTS(iq4_xs_q8_K)
DOTS(q3_K_q8_K) DOTS(q2_K_q8_K) DOTS(iq4_nl_q8_0) DOTS(q4_1_q8_1) DOTS(q5_1_q8_1)

enum { ROWS = 6, COLS = 512, N = ROWS * COLS };

static uint64_t s = 0x9E3779B97F4A7C15ULL;
static double uni(void) { s = s * 6364136223846793005ULL + 1442695040888963407ULL; return ((s >> 11) + 0.5) / 9007199254740992.0; }
static float gauss(void) { return (float)(sqrt(-2 * log(uni())) * cos(6.283185307179586 * uni())); }

static int dump(const char *dir, const char *name, const void *p, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) { perror(path); return 1; }
    fclose(f);
    printf("wrote %s\n", path);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]); return 2; }
    static float x[N];
    ggml_cpu_init();
    for (int i = 0; i < N; i++) x[i] = gauss() * (i < 2 * COLS ? 1.0f : i < 4 * COLS ? 30.0f : 1e-3f);
    /* row 1: activation-like outliers (a few large values per 256) */
    for (int i = COLS; i < 2 * COLS; i += 37) x[i] *= 40.0f;
    /* row 4: block 0 all zero; block 1 exact .5 ties (amax 127 -> scale 1: ref rounds away from
     * zero, x86 to even); block 2 with the largest magnitude negative; block 3 tiny (f16-subnormal d) */
    float *r = x + 4 * COLS;
    for (int j = 0; j < 32; j++) r[j] = 0.0f;
    for (int j = 0; j < 32; j++) r[32 + j] = j == 0 ? 127.0f : (float)(j - 16) + 0.5f;
    r[64 + 5] = -50.0f;
    for (int j = 0; j < 32; j++) r[96 + j] = gauss() * 1e-6f;
    /* row 5: a whole 256-block of zeros (Q8_K's d = 0 branch) */
    for (int j = 0; j < 256; j++) x[5 * COLS + j] = 0.0f;
    static uint8_t y[N * 2];
    int rc = dump(argv[1], "act_in.f32", x, sizeof x);
    quantize_row_q8_0_ref(x, y, N);
    rc |= dump(argv[1], "act_Q8_0_ref.blocks", y, N / 32 * 34);
    quantize_row_q8_0(x, y, N);
    rc |= dump(argv[1], "act_Q8_0_x86.blocks", y, N / 32 * 34);
    /* ggml leaves an all-zero block's bsums unwritten (d = 0 makes them irrelevant): zeros here,
     * as gemma4c writes them */
    memset(y, 0, sizeof y);
    quantize_row_q8_K_ref(x, y, N);
    rc |= dump(argv[1], "act_Q8_K.blocks", y, N / 256 * 292);
    static uint8_t q80[N / 32 * 34], q8k[N / 256 * 292], q81[N / 32 * 36];
    quantize_row_q8_0(x, q80, N);
    memcpy(q8k, y, sizeof q8k);
    quantize_row_q8_1_ref(x, y, N);
    rc |= dump(argv[1], "act_Q8_1_ref.blocks", y, N / 32 * 36);
    quantize_row_q8_1(x, q81, N);
    rc |= dump(argv[1], "act_Q8_1_x86.blocks", q81, sizeof q81);
    /* k: the activation blocks, 0 Q8_0, 1 Q8_K, 2 Q8_1 */
    const struct { const char *name; size_t row; vec_dot_fn x86, gen; int k; } t[] = {
        {"Q8_0", 16 * 34, ggml_vec_dot_q8_0_q8_0, ggml_vec_dot_q8_0_q8_0_generic, 0},
        {"Q4_0", 16 * 18, ggml_vec_dot_q4_0_q8_0, ggml_vec_dot_q4_0_q8_0_generic, 0},
        {"Q5_0", 16 * 22, ggml_vec_dot_q5_0_q8_0, ggml_vec_dot_q5_0_q8_0_generic, 0},
        {"Q4_K", 2 * 144, ggml_vec_dot_q4_K_q8_K, ggml_vec_dot_q4_K_q8_K_generic, 1},
        {"Q6_K", 2 * 210, ggml_vec_dot_q6_K_q8_K, ggml_vec_dot_q6_K_q8_K_generic, 1},
        {"Q5_K", 2 * 176, ggml_vec_dot_q5_K_q8_K, ggml_vec_dot_q5_K_q8_K_generic, 1},
        {"IQ4_XS", 2 * 136, ggml_vec_dot_iq4_xs_q8_K, ggml_vec_dot_iq4_xs_q8_K_generic, 1},
        {"Q3_K", 2 * 110, ggml_vec_dot_q3_K_q8_K, ggml_vec_dot_q3_K_q8_K_generic, 1},
        {"Q2_K", 2 * 84, ggml_vec_dot_q2_K_q8_K, ggml_vec_dot_q2_K_q8_K_generic, 1},
        {"IQ4_NL", 16 * 18, ggml_vec_dot_iq4_nl_q8_0, ggml_vec_dot_iq4_nl_q8_0_generic, 0},
        {"Q4_1", 16 * 20, ggml_vec_dot_q4_1_q8_1, ggml_vec_dot_q4_1_q8_1_generic, 2},
        {"Q5_1", 16 * 24, ggml_vec_dot_q5_1_q8_1, ggml_vec_dot_q5_1_q8_1_generic, 2}};
    enum { NT = sizeof t / sizeof *t };
    static float dx86[NT][4][ROWS], dgen[NT][4][ROWS];
    for (int i = 0; i < NT; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s.blocks", argv[1], t[i].name);
        FILE *f = fopen(path, "rb");
        static uint8_t w[4 * 16 * 34];
        if (!f || fread(w, 1, 4 * t[i].row, f) != 4 * t[i].row) { perror(path); return 1; }
        fclose(f);
        for (int n = 0; n < 4; n++)
            for (int r = 0; r < ROWS; r++) {
                const void *a = t[i].k == 1 ? (const void *)(q8k + (size_t)r * 2 * 292)
                              : t[i].k == 2 ? (const void *)(q81 + (size_t)r * 16 * 36) : (const void *)(q80 + (size_t)r * 16 * 34);
                t[i].x86(COLS, &dx86[i][n][r], 0, w + n * t[i].row, 0, a, 0, 1);
                t[i].gen(COLS, &dgen[i][n][r], 0, w + n * t[i].row, 0, a, 0, 1);
            }
    }
    rc |= dump(argv[1], "act_dots_x86.f32", dx86, sizeof dx86);
    rc |= dump(argv[1], "act_dots_generic.f32", dgen, sizeof dgen);
    return rc;
}
