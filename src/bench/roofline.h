/* roofline.h — the machine's limits that `gemma4c bench` and the kernel benchmarks measure below
 * the public API: streaming memory read bandwidth, fp32 FMA peak, bf16 dot-product peak where the
 * CPU has one. The model's cost per token is in model_cost.h. Library-internal (src/bench). */
#ifndef G4_BENCH_ROOFLINE_H
#define G4_BENCH_ROOFLINE_H

#include <stddef.h>
#include <stdint.h>

#include "gemma4c.h"

typedef struct {
    double gbps;        /* best rep, 1e9 bytes/s */
    double median_gbps;
    size_t bytes;       /* buffer size read per rep */
    int threads, reps;
} g4_bw_result;

/* Multi-threaded streaming read (AVX2 loads where available) over a freshly allocated and touched
 * buffer of `bytes` (>> L3, in 2 MiB pages where the kernel gives them, as the weights are),
 * `reps` times; the buffer is freed before returning. */
g4_status g4_bench_read_bw(int threads, size_t bytes, int reps, g4_bw_result *out);

/* The same read kept ready (buffer and threads) to be re-measured right before each decode rep:
 * on a shared host the bandwidth drifts during a run, so each rep is compared with the
 * bandwidth of its own moment as well as with the best read at start-up. */
typedef struct g4_bw_probe g4_bw_probe;
g4_status g4_bw_probe_new(int threads, size_t bytes, g4_bw_probe **out);
double g4_bw_probe_read(g4_bw_probe *p, int reps);            /* best of `reps`, GB/s */
void g4_bw_probe_free(g4_bw_probe *p);

/* XOR of the bytes of [p, p + n) in 32-byte loads (AVX2 where the CPU has it; any alignment):
 * the plainest stream a core makes of n bytes, to hold a kernel's stream of the same memory
 * against (g4_bench_kernel). */
uint64_t g4_bench_read_range(const void *p, size_t n);

/* fp32 FMA peak in GFLOP/s (1 FMA = 2 FLOP): register-only FMA chains on every thread, best of
 * `reps`. AVX2+FMA when the CPU has it, scalar otherwise (named in *isa). */
double g4_bench_fma_peak(int threads, int reps, const char **isa);

/* Peak of the bf16 unit the selected kernel path's --prefill-bf16 runs on, in GFLOP/s: AVX512-BF16
 * vdpbf16ps (2 FLOP per bf16 pair) on path "avx512bf16", AMX-BF16 tdpbf16ps into four tiles on
 * "amx"; 0 without a bf16 unit; *note says which unit was measured or why none was. */
double g4_bench_bf16_peak(int threads, int reps, const char **note);

/* Name of the kernel path the model uses ("avx2", "scalar", ...; honours G4_CPU_ISA). */
const char *g4_bench_kernel_path(void);

#endif
