/* attn_kv_bench.c — the decode attention kernel alone per KV cache type (--kv-type): one query
 * row of G heads sharing one KV head of D = 256 against N cached positions, AVX-512 blocked
 * attention (f32: attend_block; others: attend_kv, which for up to 4 rows reads the narrow cache
 * in place and widens in registers), best of 7 in thread CPU time, and the cache bytes it streams
 * per second.
 * Usage: attn_kv_bench [N] [G]
 * Build: cc -O2 -Iinclude -Isrc bench/attn_kv_bench.c build/libgemma4c.a -o akb -lm -pthread */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gemma4c.h"
#include "kernels/cpu/attn.h"
#include "kernels/kernels.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static float frand(void) { return rand() / (float)RAND_MAX - 0.5f; }

int main(int argc, char **argv) {
    enum { D = 256, GMAX = 16 };
    const int N = argc > 1 ? atoi(argv[1]) : 32000, G = argc > 2 ? atoi(argv[2]) : 1;
    if (N < 1 || G < 1 || G > GMAX) { fprintf(stderr, "usage: attn_kv_bench [N >= 1] [G in 1..16]\n"); return 2; }
    if (!g4_kernels_avx512()) { fprintf(stderr, "attn_kv_bench: needs AVX-512F\n"); return 1; }
    float *K = malloc((size_t)N * D * sizeof(float)), *V = malloc((size_t)N * D * sizeof(float));
    float *sc = malloc((size_t)G * N * sizeof(float)), q[GMAX * D], o[GMAX * D];
    if (!K || !V || !sc) return 1;
    for (size_t i = 0; i < (size_t)N * D; i++) K[i] = frand(), V[i] = frand();
    for (int i = 0; i < GMAX * D; i++) q[i] = frand() * 0.1f;
    const int lo[1] = {0}, hi[1] = {N - 1};
    for (int t = 0; t < G4_KV_TYPES; t++) {
        const size_t rb = g4_kv_row_bytes(t, D);
        unsigned char *Kt = malloc(rb * N), *Vt = malloc(rb * N);
        if (!Kt || !Vt) return 1;
        for (int r = 0; r < N; r++) {
            g4_kv_store_row(t, K + (size_t)r * D, D, Kt + r * rb);
            g4_kv_store_row(t, V + (size_t)r * D, D, Vt + r * rb);
        }
        double best = 1e9;
        for (int rep = 0; rep < 7; rep++) {
            const double t0 = now();
            if (t == G4_KV_F32)
                g4_attend_block_avx512(q, G * D, o, G * D, G, 1, lo, hi, (const float *)Kt, (const float *)Vt, N, D, 1.0f, sc, 0);
            else
                g4_attend_kv_avx512(t, q, G * D, o, G * D, G, 1, lo, hi, Kt, Vt, N, D, 1.0f, sc);
            const double dt = now() - t0;
            if (dt < best) best = dt;
        }
        printf("%-5s N=%d G=%d: %.3f ms, %.2f GB/s of cache\n", g4_kv_type_name(t), N, G, best * 1e3, 2.0 * rb * N / best / 1e9);
        free(Kt);
        free(Vt);
    }
    free(K); free(V); free(sc);
    return 0;
}
