/* quantize.h — float32 -> ggml block formats (Q8_0, Q4_0, Q4_K) for `gemma4c pack`, bit-exact to
 * ggml's reference quantizers (quantize_row_*_ref in ggml-quants.c, which gguf-py's numpy
 * Q8_0/Q4_0 mirror), and float32 -> F16/BF16. Owns only the encoders; decoding is the kernels'. */
#ifndef G4_CONVERT_QUANTIZE_H
#define G4_CONVERT_QUANTIZE_H

#include <stdint.h>

#include "base/dtype.h"
#include "base/half.h"

/* Encodes `n` floats (n a multiple of the block of `dt`) into g4_dtype_row_bytes(dt, n) bytes.
 * dt is one of F32, F16, BF16, Q8_0, Q4_0, Q4_K; returns 0 on success, -1 for another type
 * or a bad n. */
int g4_quantize_row(g4_dtype dt, const float *x, int64_t n, void *dst);

#endif
