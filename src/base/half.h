/* half.h — conversions between float32 and the two 16-bit float formats of the weights (IEEE
 * half, bf16), exact where they widen and round-to-nearest-even where they narrow. Shared by the
 * kernels (which widen weights) and the writers (which encode them); the vectorized row forms
 * live with the kernels. */
#ifndef G4_BASE_HALF_H
#define G4_BASE_HALF_H

#include <stdint.h>

static inline float g4_bf16_to_f32(uint16_t h) {
    union { uint32_t u; float f; } v = {(uint32_t)h << 16};
    return v.f;
}
float g4_f16_to_f32(uint16_t h);
/* The IEEE half stored little-endian at p (a quantized block's scale), widened exactly. */
static inline float g4_f16_at(const uint8_t *p) { return g4_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }
/* 16-bit float bits (half or bf16) stored little-endian at p, as the files and blocks hold them */
static inline void g4_put_16le(uint8_t *p, uint16_t h) {
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}
/* The bf16 bits of the float whose bits are u: round to nearest even, a NaN stays NaN
 * (quietened). Branch-free, so row loops over it vectorize. */
static inline uint16_t g4_bf16_bits(uint32_t u) {
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1)) >> 16, quiet_nan = (u >> 16) | 0x40;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}
/* Round-to-nearest-even; NaN stays NaN (quietened). */
uint16_t g4_f32_to_bf16(float f);
/* IEEE half from float, round to nearest even (GGML_FP32_TO_FP16 / numpy astype(float16)). */
uint16_t g4_f32_to_f16(float f);

#endif
