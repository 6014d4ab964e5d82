/* roofline.c — the machine's limits for `gemma4c bench` and the kernel benchmarks (see
 * roofline.h): streaming read bandwidth, fp32 FMA and bf16 peaks. Measures with its own short
 * loops on the library's thread pool and knows nothing of models (model_cost.c has their side),
 * so the kernel benchmarks link without the model. The SIMD loops are compiled with target
 * attributes and only called after a CPU check, so the build stays portable. */
#include "bench/roofline.h"

#include <immintrin.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "base/threadpool.h"
#include "base/clock.h"
#include "kernels/kernels.h"

static int have_avx2_fma(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* ---------------------------------------------------------------- memory read bandwidth */

#define BW_CHUNK ((size_t)2 << 20)   /* 2 MiB per task: dynamic balance, long sequential streams */

typedef struct {
    unsigned char *buf;
    size_t bytes;
    int touch;
    _Atomic uint64_t sink;
} bw_job;

/* Both reads prefetch READ_PF bytes ahead into L2 at the rate they consume: a bare streaming loop
 * leaves the DRAM pipe underfilled, and the decode kernels, which prefetch, read faster than it —
 * so without it the "machine limit" would sit below what the model's own weight stream reaches.
 * 16 KB ahead covers the DRAM latency at full bandwidth; farther ahead only evicts lines before
 * they are read (the distance is chosen by measurement, see docs/benchmarking.md). */
#define READ_PF 16384

__attribute__((target("avx2"))) static uint64_t read_avx2(const unsigned char *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 256 <= n; i += 256) {
        for (int l = 0; l < 256; l += 64) _mm_prefetch((const char *)p + i + READ_PF + l, _MM_HINT_T2);
        const __m256i *v = (const __m256i *)(p + i);
        a0 = _mm256_xor_si256(a0, _mm256_load_si256(v + 0));
        a1 = _mm256_xor_si256(a1, _mm256_load_si256(v + 1));
        a2 = _mm256_xor_si256(a2, _mm256_load_si256(v + 2));
        a3 = _mm256_xor_si256(a3, _mm256_load_si256(v + 3));
        a0 = _mm256_xor_si256(a0, _mm256_load_si256(v + 4));
        a1 = _mm256_xor_si256(a1, _mm256_load_si256(v + 5));
        a2 = _mm256_xor_si256(a2, _mm256_load_si256(v + 6));
        a3 = _mm256_xor_si256(a3, _mm256_load_si256(v + 7));
    }
    __m256i s = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    return (uint64_t)_mm256_extract_epi64(s, 0) ^ (uint64_t)_mm256_extract_epi64(s, 3);
}

static uint64_t read_scalar(const unsigned char *p, size_t n) {
    const uint64_t *q = (const uint64_t *)p;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i + 4 <= n / 8; i += 4) { a ^= q[i]; b ^= q[i + 1]; c ^= q[i + 2]; d ^= q[i + 3]; }
    return a ^ b ^ c ^ d;
}

static int g_bw_avx2;

__attribute__((target("avx2"))) static uint64_t read_avx2_unaligned(const unsigned char *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 128 <= n; i += 128) {
        _mm_prefetch((const char *)p + i + READ_PF, _MM_HINT_T2);
        _mm_prefetch((const char *)p + i + READ_PF + 64, _MM_HINT_T2);
        const __m256i *v = (const __m256i *)(p + i);
        a0 = _mm256_xor_si256(a0, _mm256_loadu_si256(v + 0));
        a1 = _mm256_xor_si256(a1, _mm256_loadu_si256(v + 1));
        a2 = _mm256_xor_si256(a2, _mm256_loadu_si256(v + 2));
        a3 = _mm256_xor_si256(a3, _mm256_loadu_si256(v + 3));
    }
    __m256i s = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    uint64_t r = (uint64_t)_mm256_extract_epi64(s, 0) ^ (uint64_t)_mm256_extract_epi64(s, 3);
    for (; i < n; i++) r ^= p[i];
    return r;
}

uint64_t g4_bench_read_range(const void *p, size_t n) {
    if (have_avx2_fma()) return read_avx2_unaligned(p, n);
    uint64_t r = 0, w;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) { memcpy(&w, (const unsigned char *)p + i, 8); r ^= w; }
    for (; i < n; i++) r ^= ((const unsigned char *)p)[i];
    return r;
}

static void bw_task(void *ctx, int task, int thread) {
    (void)thread;
    bw_job *j = ctx;
    size_t off = (size_t)task * BW_CHUNK, n = j->bytes - off < BW_CHUNK ? j->bytes - off : BW_CHUNK;
    if (j->touch) {   /* first touch from the pool's threads, with non-zero content */
        memset(j->buf + off, (task * 37 + 1) & 0xff, n);
        return;
    }
    uint64_t r = g_bw_avx2 ? read_avx2(j->buf + off, n) : read_scalar(j->buf + off, n);
    atomic_fetch_xor_explicit(&j->sink, r, memory_order_relaxed);
}

struct g4_bw_probe {
    unsigned char *buf;
    size_t bytes;
    g4_pool *pool;
    bw_job job;
};

void g4_bw_probe_free(g4_bw_probe *p) {
    if (!p) return;
    if (p->pool) g4_pool_free(p->pool);
    if (p->buf) munmap(p->buf, p->bytes);
    free(p);
}

g4_status g4_bw_probe_new(int threads, size_t bytes, g4_bw_probe **out) {
    *out = NULL;
    g_bw_avx2 = have_avx2_fma();
    bytes = (bytes + BW_CHUNK - 1) / BW_CHUNK * BW_CHUNK;
    g4_bw_probe *p = calloc(1, sizeof *p);
    if (!p) return g4_fail(G4_ERR_NOMEM, "out of memory");
    p->bytes = bytes;
    /* 2 MiB-aligned and advised like the weight mappings, so both are read through the same pages */
    const size_t huge = BW_CHUNK;
    unsigned char *raw = mmap(NULL, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        free(p);
        return g4_fail(G4_ERR_NOMEM, "bench: cannot map %zu MiB for the bandwidth test", bytes >> 20);
    }
    unsigned char *al = (unsigned char *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
    if (al > raw) munmap(raw, (size_t)(al - raw));
    if (al + bytes < raw + bytes + huge) munmap(al + bytes, (size_t)(raw + bytes + huge - (al + bytes)));
    p->buf = al;
    madvise(p->buf, bytes, MADV_HUGEPAGE);
    if (!(p->pool = g4_pool_new(threads))) {
        g4_bw_probe_free(p);
        return g4_fail(G4_ERR_RUNTIME, "bench: cannot start worker threads");
    }
    p->job.buf = p->buf;
    p->job.bytes = bytes;
    p->job.touch = 1;
    const int n_tasks = (int)(bytes / BW_CHUNK);
    g4_pool_run(p->pool, n_tasks, bw_task, &p->job);
    p->job.touch = 0;
    g4_pool_run(p->pool, n_tasks, bw_task, &p->job);   /* warm-up pass */
    *out = p;
    return G4_OK;
}

static double probe_once(g4_bw_probe *p) {
    double t0 = g4_now();
    g4_pool_run(p->pool, (int)(p->bytes / BW_CHUNK), bw_task, &p->job);
    return (double)p->bytes / (g4_now() - t0) / 1e9;
}

double g4_bw_probe_read(g4_bw_probe *p, int reps) {
    double best = 0;
    for (int r = 0; r < reps; r++) {
        double g = probe_once(p);
        if (g > best) best = g;
    }
    return best;
}

g4_status g4_bench_read_bw(int threads, size_t bytes, int reps, g4_bw_result *out) {
    memset(out, 0, sizeof *out);
    if (reps < 1) reps = 1;
    g4_bw_probe *p;
    g4_status st = g4_bw_probe_new(threads, bytes, &p);
    if (st) return st;
    double *gbps = malloc((size_t)reps * sizeof(double));
    for (int r = 0; gbps && r < reps; r++) gbps[r] = probe_once(p);
    out->threads = g4_pool_size(p->pool);
    out->bytes = p->bytes;
    g4_bw_probe_free(p);
    if (!gbps) return g4_fail(G4_ERR_NOMEM, "out of memory");
    g4_sort_doubles(gbps, reps);
    out->gbps = gbps[reps - 1];
    out->median_gbps = gbps[reps / 2];
    out->reps = reps;
    free(gbps);
    return G4_OK;
}

/* ---------------------------------------------------------------- FMA / bf16 peaks */

#define PEAK_TASKS_PER_THREAD 16
#define FMA_ITERS 200000   /* per task: 200k x 12 FMAs x 8 lanes x 2 = 38.4 MFLOP */
#define AMX_ITERS 20000    /* per task: 20k x 4 tdpbf16ps x 16 x 16 x 32 x 2 = 1.3 GFLOP (~1.3 M cycles) */

typedef struct {
    int kind;               /* 0 scalar, 1 avx2 fma, 2 avx512 bf16, 3 avx512f fma */
    _Atomic uint32_t sink;
} peak_job;

static double peak_flops_per_task(int kind) {
    return kind == 1 ? (double)FMA_ITERS * 12 * 8 * 2
         : kind == 2 ? (double)FMA_ITERS * 12 * 16 * 2 * 2
         : kind == 3 ? (double)FMA_ITERS * 12 * 16 * 2
         : kind == 4 ? (double)AMX_ITERS * 4 * 16 * 16 * 32 * 2
                     : (double)FMA_ITERS * 8 * 2;
}

/* 12 independent chains x = x * a + b: enough FMAs in flight to cover the latency x ports of
 * every current core (4-5 cycles x 2 ports); a < 1 keeps x bounded and away from denormals. */
__attribute__((target("avx2,fma"))) static float fma_avx2(float seed) {
    __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f * seed);
    __m256 x0 = _mm256_set1_ps(seed), x1 = _mm256_add_ps(x0, b), x2 = _mm256_add_ps(x1, b),
           x3 = _mm256_add_ps(x2, b), x4 = _mm256_add_ps(x3, b), x5 = _mm256_add_ps(x4, b),
           x6 = _mm256_add_ps(x5, b), x7 = _mm256_add_ps(x6, b), x8 = _mm256_add_ps(x7, b),
           x9 = _mm256_add_ps(x8, b), x10 = _mm256_add_ps(x9, b), x11 = _mm256_add_ps(x10, b);
    for (int i = 0; i < FMA_ITERS; i++) {
        x0 = _mm256_fmadd_ps(x0, a, b); x1 = _mm256_fmadd_ps(x1, a, b); x2 = _mm256_fmadd_ps(x2, a, b);
        x3 = _mm256_fmadd_ps(x3, a, b); x4 = _mm256_fmadd_ps(x4, a, b); x5 = _mm256_fmadd_ps(x5, a, b);
        x6 = _mm256_fmadd_ps(x6, a, b); x7 = _mm256_fmadd_ps(x7, a, b); x8 = _mm256_fmadd_ps(x8, a, b);
        x9 = _mm256_fmadd_ps(x9, a, b); x10 = _mm256_fmadd_ps(x10, a, b); x11 = _mm256_fmadd_ps(x11, a, b);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(x0, x1), _mm256_add_ps(x2, x3)),
                             _mm256_add_ps(_mm256_add_ps(x4, x5), _mm256_add_ps(x6, x7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(x8, x9), _mm256_add_ps(x10, x11)));
    float o[8];
    _mm256_storeu_ps(o, s);
    return o[0] + o[7];
}

/* fma_avx2's chains, 16 lanes wide (the AVX-512F GEMM's FMAs) */
__attribute__((target("avx512f"))) static float fma_avx512(float seed) {
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f * seed);
    __m512 x[12];
    for (int k = 0; k < 12; k++) x[k] = _mm512_set1_ps(seed + 1e-6f * (float)k);
    for (int i = 0; i < FMA_ITERS; i++) {
        x[0] = _mm512_fmadd_ps(x[0], a, b); x[1] = _mm512_fmadd_ps(x[1], a, b); x[2] = _mm512_fmadd_ps(x[2], a, b);
        x[3] = _mm512_fmadd_ps(x[3], a, b); x[4] = _mm512_fmadd_ps(x[4], a, b); x[5] = _mm512_fmadd_ps(x[5], a, b);
        x[6] = _mm512_fmadd_ps(x[6], a, b); x[7] = _mm512_fmadd_ps(x[7], a, b); x[8] = _mm512_fmadd_ps(x[8], a, b);
        x[9] = _mm512_fmadd_ps(x[9], a, b); x[10] = _mm512_fmadd_ps(x[10], a, b); x[11] = _mm512_fmadd_ps(x[11], a, b);
    }
    __m512 s = x[0];
    for (int k = 1; k < 12; k++) s = _mm512_add_ps(s, x[k]);
    return _mm512_reduce_add_ps(s);
}

static float fma_scalar(float seed) {
    float x[8];
    for (int k = 0; k < 8; k++) x[k] = seed + (float)k;
    for (int i = 0; i < FMA_ITERS; i++)
        for (int k = 0; k < 8; k++) x[k] = fmaf(x[k], 0.999999f, 1e-6f);
    return x[0] + x[7];
}

/* AVX512-BF16: each vdpbf16ps does 16 lanes x 2 bf16 products, accumulated in fp32. */
__attribute__((target("avx512f,avx512bf16"))) static float bf16_avx512(float seed) {
    __m512bh a = (__m512bh)_mm512_set1_epi16(0x3a83);   /* ~1e-3 in bf16 */
    __m512bh b = (__m512bh)_mm512_set1_epi16((short)(0x3a83 + ((int)seed & 7)));
    __m512 x[12];
    for (int k = 0; k < 12; k++) x[k] = _mm512_set1_ps(seed + (float)k);
    for (int i = 0; i < FMA_ITERS; i++) {
        x[0] = _mm512_dpbf16_ps(x[0], a, b); x[1] = _mm512_dpbf16_ps(x[1], a, b);
        x[2] = _mm512_dpbf16_ps(x[2], a, b); x[3] = _mm512_dpbf16_ps(x[3], a, b);
        x[4] = _mm512_dpbf16_ps(x[4], a, b); x[5] = _mm512_dpbf16_ps(x[5], a, b);
        x[6] = _mm512_dpbf16_ps(x[6], a, b); x[7] = _mm512_dpbf16_ps(x[7], a, b);
        x[8] = _mm512_dpbf16_ps(x[8], a, b); x[9] = _mm512_dpbf16_ps(x[9], a, b);
        x[10] = _mm512_dpbf16_ps(x[10], a, b); x[11] = _mm512_dpbf16_ps(x[11], a, b);
    }
    __m512 s = x[0];
    for (int k = 1; k < 12; k++) s = _mm512_add_ps(s, x[k]);
    return _mm512_reduce_add_ps(s);
}

static void peak_task(void *ctx, int task, int thread) {
    (void)thread;
    peak_job *j = ctx;
    float seed = 1.0f + (float)(task & 7);
    float r = j->kind == 1 ? fma_avx2(seed) : j->kind == 2 ? bf16_avx512(seed) : j->kind == 3 ? fma_avx512(seed)
            : j->kind == 4 ? g4_amx_peak_chain(AMX_ITERS, seed) : fma_scalar(seed);
    uint32_t u;
    memcpy(&u, &r, sizeof u);
    atomic_fetch_xor_explicit(&j->sink, u, memory_order_relaxed);
}

static double run_peak(int threads, int reps, int kind) {
    g4_pool *pool = g4_pool_new(threads);
    if (!pool) return 0;
    const int n_tasks = g4_pool_size(pool) * PEAK_TASKS_PER_THREAD;
    peak_job j = {.kind = kind};
    g4_pool_run(pool, g4_pool_size(pool), peak_task, &j);   /* warm-up: clocks up, threads awake */
    double best = 0;
    for (int r = 0; r < (reps < 1 ? 1 : reps); r++) {
        double t0 = g4_now();
        g4_pool_run(pool, n_tasks, peak_task, &j);
        double gf = peak_flops_per_task(kind) * n_tasks / (g4_now() - t0) / 1e9;
        if (gf > best) best = gf;
    }
    g4_pool_free(pool);
    return best;
}

double g4_bench_fma_peak(int threads, int reps, const char **isa) {
    /* the machine's widest fp32 FMA, whichever kernel path runs: 16 lanes where the CPU (and the
     * OS, XCR0: dispatch.c) has AVX-512F, else 8 */
    if (g4_kernels_avx512()) {
        if (isa) *isa = "avx512f (16-wide fp32 FMA)";
        return run_peak(threads, reps, 3);
    }
    int avx2 = have_avx2_fma();
    if (isa) *isa = avx2 ? "avx2+fma (8-wide fp32 FMA)" : "scalar fmaf";
    return run_peak(threads, reps, avx2 ? 1 : 0);
}

double g4_bench_bf16_peak(int threads, int reps, const char **note) {
    /* the unit --prefill-bf16 runs on with this kernel table (dispatch.c checked CPUID and XCR0) */
    const g4_kernels *k = g4_kernels_get();
    const char *path = k ? k->name : "";
    if (!strcmp(path, "avx512bf16")) {
        if (note) *note = "avx512-bf16 vdpbf16ps";
        return run_peak(threads, reps, 2);
    }
    if (!strcmp(path, "amx")) {
        if (note) *note = "amx-bf16 tdpbf16ps, 4 accumulator tiles";
        return run_peak(threads, reps, 4);
    }
    if (note)
        *note = g4_kernels_amx() || g4_kernels_avx512bf16() ? "n/a: the selected kernel path has no bf16 unit (G4_CPU_ISA)"
                                                            : "n/a: this CPU has no bf16 arithmetic (no AVX512-BF16, no AMX-BF16)";
    return 0;
}

const char *g4_bench_kernel_path(void) {
    const g4_kernels *k = g4_kernels_get();
    return k ? k->name : "unavailable";
}
