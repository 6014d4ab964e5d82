/* roofline.h — the machine's limits that `gemma4c bench` and the kernel benchmarks measure below
 * the public API: streaming memory read bandwidth, fp32 FMA peak, bf16 dot-product peak where the
 * CPU has one. The model's cost per token is in model_cost.h. The functions front ends call are
 * declared in gemma4c.h (measurement); this header adds the library-internal ones. */
#ifndef G4_BENCH_ROOFLINE_H
#define G4_BENCH_ROOFLINE_H

#include <stddef.h>
#include <stdint.h>

#include "gemma4c.h"

/* The public part (g4_bw_result, g4_bench_read_bw, g4_bw_probe_*, g4_bench_fma_peak,
 * g4_bench_bf16_peak) is declared in gemma4c.h's measurement section; below, what only the
 * library's own benchmarks use. */

/* XOR of the bytes of [p, p + n) in 32-byte loads (AVX2 where the CPU has it; any alignment):
 * the plainest stream a core makes of n bytes, to hold a kernel's stream of the same memory
 * against (g4_bench_kernel). */
uint64_t g4_bench_read_range(const void *p, size_t n);

/* Name of the kernel path the model uses ("avx2", "scalar", ...; honours G4_CPU_ISA). */
const char *g4_bench_kernel_path(void);

#endif
