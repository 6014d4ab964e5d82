/* roofline.h — what `gemma4c bench` measures below the public API: the machine's limits
 * (streaming memory read bandwidth, fp32 FMA peak, bf16 dot-product peak where the CPU has one)
 * and the model's cost per token (weight bytes streamed per decode step, FLOPs per prefill token).
 * Library-internal (src/bench), used only by src/cli/cli_bench.c; owns no model state. */
#ifndef G4_BENCH_ROOFLINE_H
#define G4_BENCH_ROOFLINE_H

#include <stddef.h>

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

/* fp32 FMA peak in GFLOP/s (1 FMA = 2 FLOP): register-only FMA chains on every thread, best of
 * `reps`. AVX2+FMA when the CPU has it, scalar otherwise (named in *isa). */
double g4_bench_fma_peak(int threads, int reps, const char **isa);

/* Peak of the bf16 unit the selected kernel path's --prefill-bf16 runs on, in GFLOP/s: AVX512-BF16
 * vdpbf16ps (2 FLOP per bf16 pair) on path "avx512bf16"; 0 otherwise — no bf16 unit, or AMX-BF16
 * tiles, whose peak is not measured here; *note says which unit was measured or why none was. */
double g4_bench_bf16_peak(int threads, int reps, const char **note);

/* Name of the kernel path the model uses ("avx2", "scalar", ...; honours G4_CPU_ISA). */
const char *g4_bench_kernel_path(void);

/* The model's cost model, from its bound weight matrices (exact dtypes and shapes). */
typedef struct {
    double layer_matrix_bytes;   /* q,k,v,o,gate,up,down over all layers, as stored */
    double lm_head_bytes;        /* the (tied) embedding read as the LM head */
    double layer_params;         /* parameters of those layer matrices */
    double lm_head_params;
    int n_layers, hidden, vocab, n_heads;
} g4_model_cost;

void g4_bench_model_cost(const g4_model *m, g4_model_cost *c);

/* FLOPs of attention (q·k and p·v, 4·D per key per query head, every layer) for the tokens at
 * positions [p0, p0 + n) of one sequence: keys seen = p + 1, capped by the window on sliding layers. */
double g4_bench_attn_flops(const g4_model *m, int p0, int n);

/* Bytes of KV cache (K and V, as the cache stores them) read by the tokens at positions
 * [p0, p0 + n). */
double g4_bench_kv_read_bytes(const g4_model *m, int p0, int n);

/* Kernel-only throughput of the model's matmul path on its own bound matrices, split over the
 * model's thread pool the way the forward pass splits them (row blocks of whole weight rows):
 * `which` = "qkv" (q,k,v as one loop), "o", "gateup", "down" — swept over every layer, one
 * parallel loop per layer, so weights stream from DRAM as in decode — or "lm_head".
 * T activation rows of random data. Best of `reps` sweeps: seconds, weight bytes and FLOPs of a
 * whole sweep (n_calls loops; rows/cols = the largest instance). G4_ERR_INPUT for an unknown group. */
typedef struct {
    double seconds, bytes, flops;
    int rows, cols, T, n_calls;
} g4_kernel_timing;

g4_status g4_bench_kernel(g4_model *m, const char *which, int T, int reps, g4_kernel_timing *out);

#endif
