/* gemv_layout_bench.c — would another weight layout let the decode GEMV stream closer to the
 * memory's read speed on short rows? Times, on the same threads and alternating:
 *   rows   gemma4c's decode kernel shape: 4-row blocks of row-major bf16 (4 streams a row apart,
 *          even/odd widening, software prefetch 32 KB ahead), against a plain read of those bytes;
 *   panel  the same products over 32-row panels stored pair-interleaved ([K/2][32][2], the AMX B
 *          layout): one sequential stream per panel, no horizontal sums, against a plain read.
 * Standalone (no gemma4c library); it prints its own comparison.
 * Build: cc -O3 -pthread bench/gemv_layout_bench.c -o /tmp/gemv_layout_bench
 * Usage: /tmp/gemv_layout_bench [N=131072] [K=1536] [panel prefetch bytes=0] [rounds=6] [threads=2] */
#pragma GCC target("avx2,fma")
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

enum { ROW_PF = 32768 };   /* the decode kernel's G4_PF_BYTES */

static int N, K, n_threads = 2, panel_pf;
static uint16_t *W, *P;          /* row-major weights; the same as panels */
static float *x, *x_eo, *y;      /* activation; split even/odd per 16 columns; output */
static volatile int sink;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}

static void gemv_rows(int n0, int n1) {
    const __m256i hi = _mm256_set1_epi32((int)0xFFFF0000u);
    for (int n = n0; n < n1; n += 4) {
        const uint16_t *w = W + (size_t)n * K;
        const char *pf = (const char *)w + ROW_PF;
        __m256 acc[4][2];
        for (int i = 0; i < 4; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
        for (int k = 0; k < K; k += 16) {
            _mm_prefetch(pf + (size_t)k * 8, _MM_HINT_T0);
            _mm_prefetch(pf + (size_t)k * 8 + 64, _MM_HINT_T0);
            for (int i = 0; i < 4; i++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(w + (size_t)i * K + k));
                acc[i][0] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v, 16)), _mm256_load_ps(x_eo + k), acc[i][0]);
                acc[i][1] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(v, hi)), _mm256_load_ps(x_eo + k + 8), acc[i][1]);
            }
        }
        for (int i = 0; i < 4; i++) y[n + i] = hsum(_mm256_add_ps(acc[i][0], acc[i][1]));
    }
}

/* per pair p: 4 vectors of 8 columns' (w[2p], w[2p+1]); lane c of vector v is column 8 v + c */
static void gemv_panels(int n0, int n1) {
    const __m256i hi = _mm256_set1_epi32((int)0xFFFF0000u);
    for (int n = n0; n < n1; n += 32) {
        const uint16_t *b = P + (size_t)n * K;
        const char *pf = (const char *)b + panel_pf;
        __m256 even[4], odd[4];
        for (int v = 0; v < 4; v++) even[v] = odd[v] = _mm256_setzero_ps();
        for (int p = 0; p < K / 2; p++) {
            if (panel_pf) {
                _mm_prefetch(pf + (size_t)p * 128, _MM_HINT_T0);
                _mm_prefetch(pf + (size_t)p * 128 + 64, _MM_HINT_T0);
            }
            const __m256 xe = _mm256_broadcast_ss(x + 2 * p), xo = _mm256_broadcast_ss(x + 2 * p + 1);
            for (int v = 0; v < 4; v++) {
                const __m256i w = _mm256_load_si256((const __m256i *)(b + (size_t)p * 64 + 16 * v));
                even[v] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(w, 16)), xe, even[v]);
                odd[v] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(w, hi)), xo, odd[v]);
            }
        }
        for (int v = 0; v < 4; v++) _mm256_storeu_ps(y + n + 8 * v, _mm256_add_ps(even[v], odd[v]));
    }
}

static void plain_read(const uint16_t *m, int n0, int n1) {
    const __m256i *p = (const __m256i *)(m + (size_t)n0 * K), *end = (const __m256i *)(m + (size_t)n1 * K);
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    for (; p < end; p += 4) {
        a = _mm256_xor_si256(a, _mm256_load_si256(p));
        b = _mm256_xor_si256(b, _mm256_load_si256(p + 1));
        c = _mm256_xor_si256(c, _mm256_load_si256(p + 2));
        d = _mm256_xor_si256(d, _mm256_load_si256(p + 3));
    }
    sink += _mm256_extract_epi32(_mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d)), 0);
}

enum { READ_ROWS, GEMV_ROWS, READ_PANELS, GEMV_PANELS };
typedef struct { int id, what; } job;

static void *worker(void *arg) {
    const job *j = arg;
    const int per = N / n_threads, n0 = j->id * per, n1 = n0 + per;
    switch (j->what) {
    case READ_ROWS: plain_read(W, n0, n1); break;
    case GEMV_ROWS: gemv_rows(n0, n1); break;
    case READ_PANELS: plain_read(P, n0, n1); break;
    default: gemv_panels(n0, n1);
    }
    return NULL;
}

static double gbps(int what) {   /* one pass over all N rows on n_threads threads */
    pthread_t t[64];
    job j[64];
    const double t0 = now();
    for (int i = 0; i < n_threads; i++) {
        j[i] = (job){i, what};
        pthread_create(&t[i], NULL, worker, &j[i]);
    }
    for (int i = 0; i < n_threads; i++) pthread_join(t[i], NULL);
    return (double)N * K * 2 / (now() - t0) / 1e9;
}

static uint16_t *huge_alloc(size_t bytes) {   /* 2 MiB aligned, transparent huge pages asked for */
    const size_t two_mib = (size_t)2 << 20;
    char *p = mmap(NULL, bytes + two_mib, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); exit(1); }
    p = (char *)(((uintptr_t)p + two_mib - 1) & ~(uintptr_t)(two_mib - 1));
    madvise(p, bytes, MADV_HUGEPAGE);
    return (uint16_t *)p;
}

int main(int argc, char **argv) {
    N = argc > 1 ? atoi(argv[1]) : 131072;
    K = argc > 2 ? atoi(argv[2]) : 1536;
    panel_pf = argc > 3 ? atoi(argv[3]) : 0;
    const int rounds = argc > 4 ? atoi(argv[4]) : 6;
    n_threads = argc > 5 ? atoi(argv[5]) : 2;
    if (N % (32 * n_threads) || K % 32 || n_threads < 1 || n_threads > 64) {
        fprintf(stderr, "gemv_layout_bench: N must be a multiple of 32 x threads, K of 32, threads 1-64\n");
        return 2;
    }
    const size_t bytes = (size_t)N * K * 2;
    W = huge_alloc(bytes);
    P = huge_alloc(bytes);
    x = aligned_alloc(64, (size_t)K * 4);
    x_eo = aligned_alloc(64, (size_t)K * 4);
    y = aligned_alloc(64, (size_t)N * 4);
    float *y_rows = malloc((size_t)N * 4);
    for (int k = 0; k < K; k++) x[k] = (float)(k % 7) * 0.1f + 0.1f;
    for (int k = 0; k < K; k += 16)
        for (int j = 0; j < 8; j++) { x_eo[k + j] = x[k + 2 * j]; x_eo[k + 8 + j] = x[k + 2 * j + 1]; }
    uint32_t s = 1;   /* x > 0 and bf16 weights in [0.5, 1): no cancellation, both sums agree to ~1e-6 */
    for (size_t i = 0; i < (size_t)N * K; i++) { s = s * 1664525u + 1013904223u; W[i] = (uint16_t)(0x3f00 + (s >> 25)); }
    for (int n = 0; n < N; n += 32)
        for (int p = 0; p < K / 2; p++)
            for (int c = 0; c < 32; c++)
                memcpy(P + (size_t)n * K + (size_t)p * 64 + 2 * c, W + (size_t)(n + c) * K + 2 * p, 4);
    gbps(GEMV_ROWS);
    memcpy(y_rows, y, (size_t)N * 4);
    gbps(GEMV_PANELS);
    double worst = 0;
    for (int n = 0; n < N; n++) {
        const double d = (y[n] - y_rows[n]) / y_rows[n];
        worst = d > worst ? d : -d > worst ? -d : worst;
    }
    printf("N=%d K=%d threads=%d panel prefetch %d B; panel vs rows results: max relative difference %.1e\n", N, K,
           n_threads, panel_pf, worst);
    for (int r = 0; r < rounds; r++) {
        const double a = gbps(READ_ROWS), b = gbps(GEMV_ROWS), c = gbps(READ_PANELS), d = gbps(GEMV_PANELS);
        printf("read %.2f GB/s, rows GEMV %.2f (%.1f%%) | read %.2f, panel GEMV %.2f (%.1f%%)\n", a, b, 100 * b / a, c, d,
               100 * d / c);
    }
    return worst < 1e-4 ? 0 : 1;
}
