/* kernels_bench.c — times the matmul kernels on bf16 weights of one shape (default the 12B's
 * gate/up, 15360 x 3840; 0.1 GB, larger than L3): decode GEMV (T=1-3) against the streaming read
 * bandwidth measured in this process (g4_bench_read_bw) and prefill GEMM (T=64) against FLOP/s,
 * through the same thread pool the model uses.
 * Usage: kernels_bench [threads] [isa] [N K]
 * Build: cc -O2 -Iinclude -Isrc bench/kernels_bench.c build/libgemma4c.a -o kb -lm -pthread -lnuma */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/threadpool.h"
#include "bench/roofline.h"
#include "kernels/kernels.h"

static double now(void) {
    struct timespec t;
    clock_gettime(getenv("KB_CPUTIME") ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

typedef struct { const g4_kernels *k; const float *x; int T, K, N, rpt; const uint16_t *w; float *y; } job;
static void task(void *c, int t, int th) {
    (void)th;
    job *j = c;
    int n0 = t * j->rpt, n1 = n0 + j->rpt > j->N ? j->N : n0 + j->rpt;
    j->k->matmul[G4_DT_BF16](j->x, j->T, j->K, j->w, n0, n1, j->y, j->N);
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    if (argc > 2) setenv("G4_CPU_ISA", argv[2], 1);
    const g4_kernels *k = g4_kernels_get();
    g4_pool *pool = g4_pool_new(threads);
    const int N = argc > 4 ? atoi(argv[3]) : 15360, K = argc > 4 ? atoi(argv[4]) : 3840;
    g4_bw_result bw;
    if (g4_bench_read_bw(threads, (size_t)512 << 20, 5, &bw) == G4_OK)
        printf("streaming read (%d threads, 512 MiB, best of 5): %.1f GB/s\n", bw.threads, bw.gbps);
    uint16_t *w = malloc((size_t)N * K * 2);
    for (size_t i = 0; i < (size_t)N * K; i++) w[i] = g4_f32_to_bf16((float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f);
    float *x = malloc(sizeof(float) * 64 * K), *y = malloc(sizeof(float) * 64 * N);
    for (int i = 0; i < 64 * K; i++) x[i] = (float)(i % 17) / 17.0f;
    static const int Ts[] = {1, 2, 3, 64};   /* decode of 1-3 slots (the GEMV), a prefill chunk (the GEMM) */
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
        const int T = Ts[ti];
        job j = {k, x, T, K, N, 0, w, y};
        int tasks = threads * 8;
        j.rpt = ((N + tasks - 1) / tasks + 3) & ~3;
        int nt = (N + j.rpt - 1) / j.rpt;
        g4_pool_run(pool, nt, task, &j);   /* warm-up */
        int reps = T < 4 ? 20 : 3;
        double best = 1e9;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            g4_pool_run(pool, nt, task, &j);
            double dt = now() - t0;
            if (dt < best) best = dt;
        }
        double bytes = (double)N * K * 2, flops = 2.0 * N * K * T;
        printf("%s T=%-3d threads=%d  %.2f ms  %.1f GB/s  %.1f GFLOP/s\n", k->name, T, threads, best * 1e3,
               bytes / best / 1e9, flops / best / 1e9);
    }
    g4_pool_free(pool);
    free(w); free(x); free(y);
    return 0;
}
