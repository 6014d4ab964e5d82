/* model_cost.h — the model's cost per token for `gemma4c bench` (weight bytes streamed per
 * decode step, FLOPs per prefill token, attention and KV cache per position) and the matmul
 * kernels timed alone on the model's own matrices. Library-internal (src/bench); used by
 * src/cli/cli_bench.c; owns no model state. */
#ifndef G4_BENCH_MODEL_COST_H
#define G4_BENCH_MODEL_COST_H

#include "gemma4c.h"

/* g4_model_cost, g4_bench_model_cost, g4_bench_attn_flops, g4_bench_kv_read_bytes,
 * g4_kernel_timing and g4_bench_kernel are public (gemma4c.h, measurement); the full contract of
 * g4_bench_kernel: */

/* Kernel-only throughput of the model's matmul path on its own bound matrices, split over the
 * model's thread pool the way the forward pass splits them (row blocks of whole weight rows):
 * `which` = "qkv" (q,k,v as one loop), "o", "gateup", "down" — swept over every layer, one
 * parallel loop per layer — "lm_head", or "decode": every matmul of a decode step in the step's
 * order (per layer qkv, o, gateup, down; then the LM head), one stream larger than any L3, where
 * a group alone may partly sit in a large L3 after the read before it.
 * T activation rows of random data. Best of `reps` sweeps: seconds, weight bytes and FLOPs of a
 * whole sweep (n_calls loops; rows/cols = the largest instance). For T < 4 (decode: a weight
 * stream) each sweep follows a plain read of the same bytes on the same threads
 * (g4_bench_read_range): read_seconds is the best such read, of_read the median over reps of
 * that rep's read time / kernel time (1 = the kernel streams the weights as fast as a plain read
 * of them at that moment; 0 and -1 when T >= 4). G4_ERR_INPUT for an unknown group. */

#endif
