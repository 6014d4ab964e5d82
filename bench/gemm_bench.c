/* gemm_bench.c — the prefill GEMM (bf16 weights, T activation rows) alone, on one thread, timed
 * in thread CPU time so that another tenant's load on a shared machine does not count: a weight
 * region larger than L3 (in 2 MiB pages, as the model maps its weights) is swept matrix by matrix,
 * so every call streams its weights from DRAM as a forward pass does. Prints GFLOP/s per thread
 * and the fraction of a one-core FMA peak measured the same way.
 * Usage: gemm_bench [T] [N K] [sweeps] [isa]     (default 64, 12288 1536 — the bench model's
 *        gate+up rows at hidden 1536 — 5 sweeps, the CPU's best path)
 *        GEMM_X3=1 gemm_bench ...      the exact matmul on AMX (activations split into three bf16
 *        planes once, outside the timing; amx only), against the one-core FMA peak
 *        GEMM_ROWS=1 gemm_bench ...      the row-invariant multi-row decode kernel (kernels.h
 *        matmul_rows) instead: where matmul.h's G4_ROWS_MAX_ROWS sits against the GEMM
 *        GEMM_XBF16=1 gemm_bench ...   the --prefill-bf16 matmul instead (activations rounded to
 *        bf16 once, outside the timing, as the forward pass does per layer input), against one
 *        core's bf16 peak; paths avx512bf16 and amx only
 * Build: make build/bench/gemm_bench, or with nothing but a C compiler (bench/device_cpu_check.sh) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "bench/roofline.h"
#include "kernels/kernels.h"
#include "kernels/matmul.h"

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const int T = argc > 1 ? atoi(argv[1]) : 64;
    const int N = argc > 3 ? atoi(argv[2]) : 12288, K = argc > 3 ? atoi(argv[3]) : 1536;
    const int sweeps = argc > 4 ? atoi(argv[4]) : 5;
    if (argc > 5) setenv("G4_CPU_ISA", argv[5], 1);
    const g4_kernels *k = g4_kernels_get();
    if (!k) { fprintf(stderr, "gemm_bench: %s\n", g4_last_error()); return 2; }
    if (T < 1 || N < 1 || K < 1) { fprintf(stderr, "usage: gemm_bench [T] [N K] [sweeps] [isa]\n"); return 2; }
    const size_t mat = (size_t)N * K * 2, region = (size_t)(getenv("REGION_MB") ? atoi(getenv("REGION_MB")) : 256) << 20;
    const int n_mats = region / mat > 1 ? (int)(region / mat) : 2;
    const size_t bytes = ((mat * n_mats) + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
    uint16_t *w = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (w == MAP_FAILED) { perror("mmap"); return 1; }
    madvise(w, bytes, MADV_HUGEPAGE);
    uint32_t s = 1;
    for (size_t i = 0; i < mat / 2 * n_mats; i++) {
        s = s * 1664525u + 1013904223u;
        w[i] = g4_f32_to_bf16(((float)(s >> 8) / 16777216.0f - 0.5f) * 0.05f);
    }
    float *x = malloc(sizeof(float) * T * K), *y = malloc(sizeof(float) * T * N);
    for (int i = 0; i < T * K; i++) { s = s * 1664525u + 1013904223u; x[i] = (float)(s >> 8) / 16777216.0f - 0.5f; }
    const int xbf16 = getenv("GEMM_XBF16") && atoi(getenv("GEMM_XBF16"));
    const int x3 = !xbf16 && getenv("GEMM_X3") && atoi(getenv("GEMM_X3"));
    const int rows = !xbf16 && !x3 && getenv("GEMM_ROWS") && atoi(getenv("GEMM_ROWS"));
    if (rows && !k->matmul_rows[G4_DT_BF16]) {
        fprintf(stderr, "gemm_bench: GEMM_ROWS=1 needs a path with matmul_rows; this one is %s\n", k->name);
        return 2;
    }
    if (x3 && !k->matmul_x3bf16) {
        fprintf(stderr, "gemm_bench: GEMM_X3=1 needs the amx path; this one is %s\n", k->name);
        return 2;
    }
    if (xbf16 && !k->matmul_xbf16) {
        fprintf(stderr, "gemm_bench: GEMM_XBF16=1 needs a path with bf16 units (avx512bf16, amx); this one is %s\n", k->name);
        return 2;
    }
    /* the bf16 matmul's input: rows rounded to bf16, zero-padded to whole 32 x 32 blocks, in
     * the layout the path takes (rows, AMX tiles or pairs) */
    const int ld = (K + 31) & ~31, Tp = (T + 31) & ~31;
    uint16_t *xb = xbf16 ? calloc((size_t)Tp * ld, sizeof *xb) : NULL;
    /* as the forward pass by default: inputs of up to pairs_max_rows rows take the weights-as-A
     * AMX kernel (kernels/matmul.h's policy) */
    const int pairs = (xbf16 || x3) && k->matmul_xbf16_pairs && T <= G4_AMX_PAIRS_ROWS_DEFAULT;
    const g4_xbf16_layout layout = pairs ? G4_XBF16_PAIRS : k->xbf16_layout;
    g4_matmul_xbf16_fn mm = pairs ? k->matmul_xbf16_pairs : k->matmul_xbf16;
    for (int t = 0; xb && t < Tp; t++) g4_xbf16_put_row(x + (size_t)t * K, t < T ? K : 0, t, ld, ld, layout, xb);
    const size_t plane = (size_t)Tp * ld;
    uint16_t *xs = x3 ? calloc(3 * plane, sizeof *xs) : NULL;
    for (int t = 0; xs && t < Tp; t++)
        g4_xbf16_put_row_split3(x + (size_t)(t < T ? t : 0) * K, t < T ? K : 0, t, ld, plane,
                                pairs ? G4_XBF16_PAIRS : G4_XBF16_TILES, xs);
    const char *bf16_note = NULL;
    const double peak = xbf16 ? g4_bench_bf16_peak(1, 5, &bf16_note) : g4_bench_fma_peak(1, 5, NULL);
    double best = 1e30;
    for (int r = 0; r <= sweeps; r++) {   /* sweep 0 warms up */
        double t0 = cpu_now();
        for (int m = 0; m < n_mats; m++) {
            const uint16_t *wm = w + (size_t)m * N * K;
            if (xbf16) mm(xb, ld, T, K, wm, 0, N, y, N);
            else if (x3) (pairs ? k->matmul_x3bf16_pairs : k->matmul_x3bf16)(xs, plane, T, K, wm, 0, N, y, N);
            else (rows ? k->matmul_rows : k->matmul)[G4_DT_BF16](x, T, K, wm, 0, N, y, N);
        }
        double dt = (cpu_now() - t0) / n_mats;
        if (r > 0 && dt < best) best = dt;
    }
    const double gf = 2.0 * T * N * K / best / 1e9;
    printf("%s%s%s T=%d N=%d K=%d (%d matrices, %.0f MB): %.3f ms/matrix  %.1f GFLOP/s", k->name, xbf16 ? " xbf16" : x3 ? " x3" : rows ? " rows" : "", pairs ? " (pairs)" : "",
           T, N, K, n_mats, mat * n_mats / 1e6, best * 1e3, gf);
    if (peak > 0) printf("  %.1f%% of one core's %s peak (%.1f)\n", 100 * gf / peak, xbf16 ? "bf16" : "FMA", peak);
    else printf("  (peak %s)\n", bf16_note ? bf16_note : "not measured");
    free(xb);
    free(xs);
    return 0;
}
