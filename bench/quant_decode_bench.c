/* quant_decode_bench.c — one thread, the exact decode kernels over quantized weights, old entry
 * points (quant_avx2.c; Q5_K / IQ4_XS / Q3_K / Q2_K quant_dq256_avx2.c) against the avx2 table's (quant_legacy_avx2.c for Q8_0 / Q4_0 / Q5_0), or
 * the table G4_CPU_ISA names where it is set (avx512: quant_legacy_avx512.c for those three),
 * G4_K (a multiple of 256) sets K, the rows then 2048 * 1536 / K,
 * at T activation rows: ns per weight block and GB/s of weights, the matrix in cache (2048 x
 * 1536) so that the figure is the kernel's compute rate, which must exceed a core's share of
 * the memory bandwidth. Thread CPU time, best of 7 alternating repetitions.
 * With G4_ROWS=1 the new side is the table's matmul_rows (several decoding slots) instead of matmul.
 * Usage: quant_decode_bench [T...]   (default 1 2 4 8 16)
 * Build: cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc bench/quant_decode_bench.c build/libgemma4c.a \
 *          -ljansson -lmicrohttpd -lz -lm -pthread (+ the Makefile's LDLIBS) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gemma4c.h"
#include "kernels/cpu/quant.h"
#include "kernels/kernels.h"

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const int K = getenv("G4_K") ? atoi(getenv("G4_K")) : 1536, N = 2048 * 1536 / K;   /* the same bytes at any K */
    const g4_kernels *k = getenv("G4_CPU_ISA") ? g4_kernels_get() : g4_kernels_avx2();
    if (!k || !g4_kernels_avx2()) { fprintf(stderr, "no AVX2\n"); return 2; }
    const int rows = getenv("G4_ROWS") && atoi(getenv("G4_ROWS"));
    int Ts[8] = {1, 2, 4, 8, 16}, nT = 5;
    if (argc > 1) for (nT = 0; nT < argc - 1 && nT < 8; nT++) Ts[nT] = atoi(argv[nT + 1]);
    const g4_dtype dts[] = {G4_DT_Q8_0, G4_DT_Q4_0, G4_DT_Q5_0, G4_DT_Q4_K, G4_DT_Q6_K, G4_DT_Q5_K, G4_DT_IQ4_XS,
                            G4_DT_Q3_K, G4_DT_Q2_K, G4_DT_IQ4_NL, G4_DT_Q4_1, G4_DT_Q5_1};
    const g4_matmul_fn old[] = {g4_mm_q8_0_avx2, g4_mm_q4_0_avx2, g4_mm_q5_0_avx2, g4_mm_q4_k_avx2, g4_mm_q6_k_avx2,
                                g4_mm_q5_k_avx2, g4_mm_iq4_xs_avx2, g4_mm_q3_k_avx2, g4_mm_q2_k_avx2, g4_mm_iq4_nl_avx2_rows,
                                g4_mm_q4_1_avx2_rows, g4_mm_q5_1_avx2_rows};
    printf("one thread, [%d x %d] in cache, best of 7 (thread CPU time); old = quant_avx2.c, new = the %s table's %s\n", N, K, k->name,
           rows ? "matmul_rows" : "matmul");
    uint32_t s = 1;
    for (int a = 0; a < nT; a++) {
        const int T = Ts[a] < 1 ? 1 : Ts[a];
        float *x = malloc(sizeof(float) * K * T), *y = malloc(sizeof(float) * N * T);
        for (int i = 0; i < K * T; i++) { s = s * 1664525u + 1013904223u; x[i] = (float)(s >> 8) / 16777216.0f - 0.5f; }
        for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
            const g4_dtype dt = dts[d];
            const size_t rb = g4_dtype_row_bytes(dt, K);
            uint8_t *wq = malloc(rb * N);
            for (size_t i = 0; i < rb * N; i++) { s = s * 1664525u + 1013904223u; wq[i] = (uint8_t)(s >> 24); }
            const size_t bb = g4_dtype_size(dt);
            for (size_t b = 0; b < rb * N / bb; b++) {   /* sane f16 scales */
                uint8_t *p = wq + b * bb + (dt == G4_DT_Q6_K ? 208 : dt == G4_DT_Q3_K ? 108 : dt == G4_DT_Q2_K ? 80 : 0);
                p[0] = 0x00; p[1] = 0x18;
                if (dt == G4_DT_Q4_K || dt == G4_DT_Q5_K || dt == G4_DT_Q2_K || dt == G4_DT_Q4_1 || dt == G4_DT_Q5_1) { p[2] = 0x00; p[3] = 0x18; }
            }
            double best[2] = {1e30, 1e30};
            const int reps = 20;
            for (int r = 0; r < 7; r++)
                for (int v = 0; v < 2; v++) {
                    const g4_matmul_fn f = v ? (rows ? k->matmul_rows[dt] : k->matmul[dt]) : old[d];
                    const double t0 = cpu_now();
                    for (int i = 0; i < reps; i++) f(x, T, K, wq, 0, N, y, N);
                    const double te = (cpu_now() - t0) / reps;
                    if (te < best[v]) best[v] = te;
                }
            const double blocks = (double)N * K / g4_dtype_block(dt), bytes = (double)rb * N;
            printf("%-4s T=%-2d old %7.2f ns/block %6.2f GB/s   new %7.2f ns/block %6.2f GB/s   new/old speed %.2fx\n",
                   g4_dtype_name(dt), T, 1e9 * best[0] / blocks, bytes / best[0] / 1e9, 1e9 * best[1] / blocks,
                   bytes / best[1] / 1e9, best[0] / best[1]);
            free(wq);
        }
        free(x);
        free(y);
    }
    return 0;
}
