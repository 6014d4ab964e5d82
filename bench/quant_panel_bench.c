/* quant_panel_bench.c — one thread, the AVX2 prefill GEMM's weight panels alone
 * (g4_quant_panel16_avx2: 16 rows x K of quantized weights into float panels of 256 columns), in
 * cache: microseconds per 16 x K panel set and ns per weight, best of 200 repetitions of 20 (wall
 * time: the best repetition is the one no other tenant interrupted). The quants are random, every
 * scale 1.0 (f16), so the floats are ordinary numbers.
 * Usage: quant_panel_bench [K]   (default 1536, a multiple of 256)
 * Build: make build/bench/quant_panel_bench */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"
#include "gemma4c.h"
#include "kernels/cpu/quant.h"
#include "kernels/kernels.h"

int main(int argc, char **argv) {
    const int K = argc > 1 ? atoi(argv[1]) : 1536;
    if (K <= 0 || K % 256) { fprintf(stderr, "K must be a positive multiple of 256\n"); return 2; }
    if (!g4_kernels_avx2()) { fprintf(stderr, "no AVX2\n"); return 2; }
    const g4_dtype dts[] = {G4_DT_Q4_K, G4_DT_Q6_K, G4_DT_Q8_0, G4_DT_Q4_0};
    static float panel[G4_QUANT_PANEL_KC * 16] __attribute__((aligned(32)));
    uint32_t seed = 1;
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        const g4_dtype dt = dts[d];
        const size_t rb = g4_dtype_row_bytes(dt, K), bb = rb / (K / g4_dtype_block(dt));
        uint8_t *w = malloc(16 * rb);
        if (!w) return 1;
        for (size_t i = 0; i < 16 * rb; i++) w[i] = (uint8_t)((seed = seed * 1664525u + 1013904223u) >> 24);
        for (size_t b = 0; b < 16 * rb / bb; b++) {   /* f16 1.0 (and Q4_K's dmin 0.5) */
            uint8_t *blk = w + b * bb;
            if (dt == G4_DT_Q6_K) blk[208] = 0x00, blk[209] = 0x3C;
            else blk[0] = 0x00, blk[1] = 0x3C;
            if (dt == G4_DT_Q4_K) blk[2] = 0x00, blk[3] = 0x38;
        }
        double best = 1e9;
        for (int rep = 0; rep < 200; rep++) {
            const double t0 = g4_now();
            for (int it = 0; it < 20; it++)
                for (int k0 = 0; k0 < K; k0 += 256) g4_quant_panel16_avx2(dt, w, rb, k0, 256, panel);
            const double t = (g4_now() - t0) / 20;
            best = t < best ? t : best;
        }
        printf("%-5s 16 x %d: %7.2f us  %.3f ns/weight\n", g4_dtype_name(dt), K, best * 1e6, best * 1e9 / (16.0 * K));
        free(w);
    }
    return 0;
}
