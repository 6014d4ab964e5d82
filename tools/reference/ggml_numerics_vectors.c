/* ggml_numerics_vectors.c — writes the `--numerics ggml` test vectors in tests/fixtures/ggml-num/
 * from ggml itself (libggml-cpu of a llama.cpp build outside this repo, the x86 AVX2 + FMA build
 * llama.cpp runs on an AVX2 CPU), for tests/c/test_ggml_num.c. Not part of gemma4c.
 *
 * build: cc -O2 tools/reference/ggml_numerics_vectors.c -o /tmp/gnv -lm -L$LLAMA/build/bin -lggml-base -lggml-cpu -Wl,-rpath,$LLAMA/build/bin
 * usage: /tmp/gnv tests/fixtures/ggml-num
 * writes
 *   gelu_f16.u16   ggml_table_gelu_f16 after ggml_cpu_init: [65536] uint16 LE
 *   dot_f32.f32    for n in DOT_N: x[n], y[n], ggml_vec_dot_f32(n, x, y)    (float32 LE)
 *   softmax.f32    for n in SM_N: x[n], max, y[n] = ggml_vec_soft_max_f32's exps, its double sum
 *                  as two float32 words (the 8 bytes of the double) */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

void ggml_cpu_init(void);
extern uint16_t ggml_table_gelu_f16[1 << 16];
void ggml_vec_dot_f32(int n, float *s, size_t bs, const float *x, size_t bx, const float *y, size_t by, int nrc);
double ggml_vec_soft_max_f32(const int n, float *y, const float *x, float max);

static const int DOT_N[] = {7, 13, 16, 32, 40, 45, 64, 96, 256, 512};
static const int SM_N[] = {8, 64, 256};

static uint64_t s = 0x243F6A8885A308D3ULL;
static double uni(void) { s = s * 6364136223846793005ULL + 1442695040888963407ULL; return ((s >> 11) + 0.5) / 9007199254740992.0; }
static float gauss(void) { return (float)(sqrt(-2 * log(uni())) * cos(6.283185307179586 * uni())); }

static FILE *open_out(const char *dir, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) perror(path);
    else printf("wrote %s\n", path);
    return f;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s OUTDIR\n", argv[0]); return 2; }
    ggml_cpu_init();
    FILE *f = open_out(argv[1], "gelu_f16.u16");
    if (!f || fwrite(ggml_table_gelu_f16, 2, 1 << 16, f) != 1 << 16 || fclose(f)) return 1;

    if (!(f = open_out(argv[1], "dot_f32.f32"))) return 1;
    for (size_t k = 0; k < sizeof DOT_N / sizeof *DOT_N; k++) {
        const int n = DOT_N[k];
        float x[512], y[512], r;
        for (int i = 0; i < n; i++) { x[i] = gauss(); y[i] = gauss() * 3.0f; }
        ggml_vec_dot_f32(n, &r, 0, x, 0, y, 0, 1);
        fwrite(x, 4, (size_t)n, f);
        fwrite(y, 4, (size_t)n, f);
        fwrite(&r, 4, 1, f);
    }
    if (fclose(f)) return 1;

    if (!(f = open_out(argv[1], "softmax.f32"))) return 1;
    for (size_t k = 0; k < sizeof SM_N / sizeof *SM_N; k++) {
        const int n = SM_N[k];
        float x[256], y[256], mx = -INFINITY;
        /* attention scores: a spread of magnitudes, some masked (-inf), some far below the max */
        for (int i = 0; i < n; i++) {
            x[i] = (i % 5 == 3) ? -INFINITY : gauss() * (i % 3 ? 4.0f : 40.0f);
            mx = x[i] > mx ? x[i] : mx;
        }
        const double sum = ggml_vec_soft_max_f32(n, y, x, mx);
        fwrite(x, 4, (size_t)n, f);
        fwrite(&mx, 4, 1, f);
        fwrite(y, 4, (size_t)n, f);
        fwrite(&sum, 8, 1, f);
    }
    return fclose(f) ? 1 : 0;
}
