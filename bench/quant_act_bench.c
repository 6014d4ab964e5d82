/* quant_act_bench.c — one thread, one matrix (2048 x 1536, the bench model's width; 1.6-3.2 MB,
 * in L3): the exact quantized matmul (weights widened to fp32) against --act-q8's (activation rows
 * quantized to Q8_0 / Q8_K, then int8 dots; the quantization is timed too) for Q8_0, Q4_0, Q4_K,
 * Q6_K, Q5_K, IQ4_XS, Q3_K, Q2_K, IQ4_NL weights at T activation rows. Thread CPU time, best of 5 repetitions of a batch, so that
 * other tenants' load on a shared machine moves the figures less than wall time would.
 * The exact matmul runs as the forward pass calls it: 2 to G4_ROWS_MAX_ROWS rows through the
 * row-invariant matmul_rows (batched decode) where the table has it, above that on the input
 * packed once (pack_x, matmul_xp: the AVX-512 GEMM) where the table has that form, the packing timed.
 * Usage: quant_act_bench [T...]   (default 1 64; G4_CPU_ISA picks the kernel path)
 * Build: cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc bench/quant_act_bench.c build/libgemma4c.a \
 *          -ljansson -lmicrohttpd -lz -lm -pthread $(pkg-config --libs ompi-c) -lnuma */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gemma4c.h"
#include "convert/quantize.h"
#include "kernels/cpu/quant.h"
#include "kernels/kernels.h"
#include "kernels/matmul.h"

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    enum { K = 1536, N = 2048 };
    const g4_kernels *k = g4_kernels_get();
    if (!k) { fprintf(stderr, "%s\n", g4_last_error()); return 2; }
    int Ts[8] = {1, 64}, nT = 2;
    if (argc > 1) for (nT = 0; nT < argc - 1 && nT < 8; nT++) Ts[nT] = atoi(argv[nT + 1]);
    const g4_dtype dts[] = {G4_DT_Q8_0, G4_DT_Q4_0, G4_DT_Q4_K, G4_DT_Q6_K, G4_DT_Q5_K, G4_DT_IQ4_XS, G4_DT_Q3_K, G4_DT_Q2_K,
                            G4_DT_IQ4_NL};
    float *w = malloc(sizeof(float) * K * N);
    uint32_t s = 1;
    for (int i = 0; i < K * N; i++) { s = s * 1664525u + 1013904223u; w[i] = (float)(s >> 8) / 16777216.0f - 0.5f; }
    printf("kernels %s, one thread, [%d x %d], best of 5 (thread CPU time)\n", k->name, N, K);
    for (int a = 0; a < nT; a++) {
        const int T = Ts[a] < 1 ? 1 : Ts[a];
        float *x = malloc(sizeof(float) * K * T), *y = malloc(sizeof(float) * N * T);
        const int mr = k->x_mr > 0 ? k->x_mr : 1;
        float *xp = k->pack_x && T > G4_ROWS_MAX_ROWS ? malloc(sizeof(float) * K * (size_t)((T + mr - 1) / mr * mr)) : NULL;
        for (int i = 0; i < K * T; i++) { s = s * 1664525u + 1013904223u; x[i] = (float)(s >> 8) / 16777216.0f - 0.5f; }
        for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
            const g4_dtype dt = dts[d];
            const size_t rb = g4_dtype_row_bytes(dt, K);
            uint8_t *wq = malloc(rb * N);
            if (dt != G4_DT_Q8_0 && dt != G4_DT_Q4_0 && dt != G4_DT_Q4_K) {   /* no encoder: random quants, small scales */
                for (size_t i = 0; i < rb * N; i++) { s = s * 1664525u + 1013904223u; wq[i] = (uint8_t)(s >> 24); }
                const uint16_t h = g4_f32_to_f16(1e-3f);
                const size_t bb = g4_dtype_size(dt);
                const size_t at = dt == G4_DT_Q6_K ? 208 : dt == G4_DT_Q3_K ? 108 : dt == G4_DT_Q2_K ? 80 : 0;
                for (size_t b = 0; b < rb * N / bb; b++)
                    for (int j = 0; j < (dt == G4_DT_Q5_K || dt == G4_DT_Q2_K ? 2 : 1); j++) {   /* d (and dmin) */
                        uint8_t *p = wq + b * bb + at + 2 * j;
                        p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
                    }
            } else {
                for (int n = 0; n < N; n++) g4_quantize_row(dt, w + (size_t)n * K, K, wq + n * rb);
            }
            void *xq = malloc((size_t)T * g4_act_row_bytes(dt, K));
            const int reps = T >= 16 ? 3 : 50;
            double best_e = 1e30, best_q = 1e30;
            for (int r = 0; r < 5; r++) {
                double t0 = cpu_now();
                for (int i = 0; i < reps; i++) {
                    if (xp && k->matmul_xp[dt]) {
                        k->pack_x(x, T, K, 0, (T + mr - 1) / mr, xp);
                        k->matmul_xp[dt](x, xp, T, K, wq, 0, N, y, N);
                    } else if (T >= 2 && T <= G4_ROWS_MAX_ROWS && k->matmul_rows[dt]) {   /* batched decode */
                        k->matmul_rows[dt](x, T, K, wq, 0, N, y, N);
                    } else {
                        k->matmul[dt](x, T, K, wq, 0, N, y, N);
                    }
                }
                double te = (cpu_now() - t0) / reps;
                t0 = cpu_now();
                for (int i = 0; i < reps; i++) {
                    k->quantize_act(dt, x, T, K, xq);
                    k->matmul_q8[dt](xq, T, K, wq, 0, N, y, N);
                }
                double tq = (cpu_now() - t0) / reps;
                if (te < best_e) best_e = te;
                if (tq < best_q) best_q = tq;
            }
            const double macs = (double)K * N * T;
            printf("%-4s T=%-3d exact %8.3f ms (%5.1f GMAC/s)   --act-q8 %8.3f ms (%5.1f GMAC/s)   %.2fx\n", g4_dtype_name(dt), T,
                   1e3 * best_e, macs / best_e / 1e9, 1e3 * best_q, macs / best_q / 1e9, best_e / best_q);
            free(wq);
            free(xq);
        }
        free(x);
        free(y);
        free(xp);
    }
    free(w);
    return 0;
}
