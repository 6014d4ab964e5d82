/* ggml_quantize_vectors.c — writes tests/fixtures/quant/pack_Q4_K.blocks (and, as a cross-check of
 * the gguf-py vectors, pack_Q8_0/Q4_0 to stdout-named temp files) with ggml's own reference
 * quantizers, quantize_row_*_ref from libggml-base (a llama.cpp build outside this repo): gguf-py
 * has no Q4_K encoder, so this is the only source of Q4_K blocks to compare ours against.
 * Not part of gemma4c.
 *
 * build: cc -O2 tools/reference/ggml_quantize_vectors.c -o /tmp/gqv -L$LLAMA/build/bin -lggml-base -Wl,-rpath,$LLAMA/build/bin
 * usage: /tmp/gqv tests/fixtures/quant/pack_in.f32 OUT_DIR   (rows of 512 floats) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* the three entry points of ggml-quants.h, declared with opaque block pointers */
void quantize_row_q8_0_ref(const float *x, void *y, int64_t k);
void quantize_row_q4_0_ref(const float *x, void *y, int64_t k);
void quantize_row_q4_K_ref(const float *x, void *y, int64_t k);

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s IN.f32 OUT_DIR\n", argv[0]); return 2; }
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 1; }
    static float x[1 << 16];
    size_t n = fread(x, sizeof(float), sizeof x / sizeof *x, f);
    fclose(f);
    static uint8_t y[1 << 18];
    const struct { const char *name; void (*fn)(const float *, void *, int64_t); size_t bytes; int block; } t[] = {
        {"Q8_0", quantize_row_q8_0_ref, 34, 32}, {"Q4_0", quantize_row_q4_0_ref, 18, 32}, {"Q4_K", quantize_row_q4_K_ref, 144, 256}};
    for (int i = 0; i < 3; i++) {
        t[i].fn(x, y, (int64_t)n);
        char path[512];
        snprintf(path, sizeof path, "%s/pack_%s%s.blocks", argv[2], t[i].name, i < 2 ? "_ggml" : "");
        FILE *o = fopen(path, "wb");
        if (!o) { perror(path); return 1; }
        fwrite(y, 1, n / (size_t)t[i].block * t[i].bytes, o);
        fclose(o);
        printf("wrote %s\n", path);
    }
    return 0;
}
