/* half.c — the scalar float32 <-> half / bf16 conversions of half.h. */
#include "base/half.h"

#include <string.h>

float g4_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (man == 0) u = sign;
        else {  /* subnormal: renormalize */
            int e = -1;
            do { e++; man <<= 1; } while (!(man & 0x400));
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) u = sign | 0x7f800000u | (man << 13);
    else u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    union { uint32_t u; float f; } v = {u};
    return v.f;
}

uint16_t g4_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return g4_bf16_bits(u);
}

uint16_t g4_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);      /* NaN -> quiet NaN, as ggml */
    if (ax >= 0x47800000u) return (uint16_t)(sign | 0x7c00u);     /* >= 65536 (and inf) -> inf */
    if (ax >= 0x38800000u) {                                       /* normal half: rebias, RNE */
        uint32_t h = (ax - 0x38000000u) >> 13, rem = ax & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;    /* may carry into inf: right */
        return (uint16_t)(sign | h);
    }
    if (ax <= 0x33000000u) return (uint16_t)sign;                  /* <= 2^-25: ties to even 0 */
    const uint32_t e = ax >> 23, mant = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;               /* subnormal half, RNE */
    return (uint16_t)(sign | h);
}

