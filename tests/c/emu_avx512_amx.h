/* emu_avx512_amx.h — the AVX-512 / AVX512-BF16 / AMX intrinsics that src/kernels/cpu/bf16_*.c and
 * avx512.c use, in plain C, so that test_bf16_matmul.c and test_avx512_matmul.c can compile those
 * kernels' own source and check their blocking, packing, masking and tile strides on any CPU. Semantics follow Intel's pseudo-code
 * (SDM / Intrinsics Guide): vdpbf16ps adds the odd pair's product then the even pair's, each
 * rounded to fp32 (products of bf16 are exact); tdpbf16ps likewise per k pair, even then odd.
 * Denormal flushing is not modelled (the tests use normal values). Test-only; never include it
 * together with <immintrin.h>. */
#ifndef EMU_AVX512_AMX_H
#define EMU_AVX512_AMX_H

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef float __m512 __attribute__((vector_size(64), aligned(64)));
typedef long long __m512i __attribute__((vector_size(64), aligned(64)));
typedef short __m512bh __attribute__((vector_size(64), aligned(64)));
typedef uint16_t __mmask16;

static inline float emu_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline __m512 _mm512_setzero_ps(void) { return (__m512){0}; }
static inline __m512i _mm512_setzero_si512(void) { return (__m512i){0}; }
static inline __m512i _mm512_loadu_si512(const void *p) { __m512i v; memcpy(&v, p, 64); return v; }
static inline void _mm512_storeu_si512(void *p, __m512i v) { memcpy(p, &v, 64); }
static inline __m512 _mm512_add_ps(__m512 a, __m512 b) { return a + b; }

static inline __m512 _mm512_loadu_ps(const void *p) { __m512 v; memcpy(&v, p, 64); return v; }
static inline __m512 _mm512_load_ps(const void *p) {   /* the instruction faults when unaligned */
    if ((uintptr_t)p % 64) __builtin_trap();
    return _mm512_loadu_ps(p);
}
static inline void _mm512_storeu_ps(void *p, __m512 v) { memcpy(p, &v, 64); }
static inline __m512 _mm512_set1_ps(float x) {
    __m512 v;
    for (int i = 0; i < 16; i++) v[i] = x;
    return v;
}
static inline __m512 _mm512_fmadd_ps(__m512 a, __m512 b, __m512 c) {   /* one rounding per lane */
    for (int i = 0; i < 16; i++) c[i] = fmaf(a[i], b[i], c[i]);
    return c;
}
#define _MM_HINT_T0 3
#define _MM_HINT_T1 2
#define _MM_HINT_T2 1
static inline void _mm_prefetch(const void *p, int hint) { (void)p; (void)hint; }   /* a hint: nothing to model */

static inline __m512i emu_from_i32(const int32_t e[16]) { __m512i v; memcpy(&v, e, 64); return v; }
static inline void emu_to_i32(__m512i v, int32_t e[16]) { memcpy(e, &v, 64); }

static inline __m512i _mm512_set1_epi32(int x) {
    int32_t e[16];
    for (int i = 0; i < 16; i++) e[i] = x;
    return emu_from_i32(e);
}
static inline __m512i _mm512_set_epi32(int e15, int e14, int e13, int e12, int e11, int e10, int e9, int e8, int e7,
                                       int e6, int e5, int e4, int e3, int e2, int e1, int e0) {
    const int32_t e[16] = {e0, e1, e2, e3, e4, e5, e6, e7, e8, e9, e10, e11, e12, e13, e14, e15};
    return emu_from_i32(e);
}
static inline __m512i _mm512_permutex2var_epi32(__m512i a, __m512i idx, __m512i b) {   /* [i] = (idx & 16 ? b : a)[idx & 15] */
    int32_t x[16], ix[16], y[16], r[16];
    emu_to_i32(a, x);
    emu_to_i32(idx, ix);
    emu_to_i32(b, y);
    for (int i = 0; i < 16; i++) r[i] = ix[i] & 16 ? y[ix[i] & 15] : x[ix[i] & 15];
    return emu_from_i32(r);
}
static inline __m512 _mm512_permutexvar_ps(__m512i idx, __m512 a) {   /* result[i] = a[idx[i] & 15] */
    int32_t ix[16];
    emu_to_i32(idx, ix);
    __m512 r;
    for (int i = 0; i < 16; i++) r[i] = a[ix[i] & 15];
    return r;
}
static inline __m512 _mm512_maskz_loadu_ps(__mmask16 k, const void *p) {
    __m512 v = {0};
    for (int i = 0; i < 16; i++)
        if (k >> i & 1) memcpy((float *)&v + i, (const float *)p + i, 4);
    return v;
}
static inline void _mm512_mask_storeu_ps(void *p, __mmask16 k, __m512 v) {
    for (int i = 0; i < 16; i++)
        if (k >> i & 1) memcpy((float *)p + i, (const float *)&v + i, 4);
}
/* the AVX-512 bf16 weight packer's (cpu/avx512.c pack16_bf16) integer shuffles, per Intel's
 * pseudocode: unpacks interleave within each 128-bit lane, shuffle_i32x4 picks whole lanes */
static inline void _mm512_store_ps(void *p, __m512 v) {   /* the instruction faults when unaligned */
    if ((uintptr_t)p % 64) __builtin_trap();
    _mm512_storeu_ps(p, v);
}
static inline __m512 _mm512_castsi512_ps(__m512i v) { __m512 r; memcpy(&r, &v, 64); return r; }
static inline __m512i _mm512_slli_epi32(__m512i a, unsigned n) {
    int32_t x[16];
    emu_to_i32(a, x);
    for (int i = 0; i < 16; i++) x[i] = (int32_t)((uint32_t)x[i] << n);
    return emu_from_i32(x);
}
static inline __m512i _mm512_and_si512(__m512i a, __m512i b) { return a & b; }
static inline __m512i emu_unpack32(__m512i a, __m512i b, int hi) {
    int32_t x[16], y[16], r[16];
    emu_to_i32(a, x);
    emu_to_i32(b, y);
    for (int l = 0; l < 4; l++)
        for (int i = 0; i < 2; i++) {
            r[4 * l + 2 * i] = x[4 * l + 2 * hi + i];
            r[4 * l + 2 * i + 1] = y[4 * l + 2 * hi + i];
        }
    return emu_from_i32(r);
}
static inline __m512i _mm512_unpacklo_epi32(__m512i a, __m512i b) { return emu_unpack32(a, b, 0); }
static inline __m512i _mm512_unpackhi_epi32(__m512i a, __m512i b) { return emu_unpack32(a, b, 1); }
static inline __m512i emu_unpack64(__m512i a, __m512i b, int hi) {
    __m512i r;
    for (int l = 0; l < 4; l++) {
        r[2 * l] = a[2 * l + hi];
        r[2 * l + 1] = b[2 * l + hi];
    }
    return r;
}
static inline __m512i _mm512_unpacklo_epi64(__m512i a, __m512i b) { return emu_unpack64(a, b, 0); }
static inline __m512i _mm512_unpackhi_epi64(__m512i a, __m512i b) { return emu_unpack64(a, b, 1); }
static inline __m512i _mm512_shuffle_i32x4(__m512i a, __m512i b, int imm) {   /* lanes 0,1 from a; 2,3 from b */
    __m512i r;
    for (int l = 0; l < 4; l++) {
        const __m512i src = l < 2 ? a : b;
        const int s = (imm >> (2 * l)) & 3;
        r[2 * l] = src[2 * s];
        r[2 * l + 1] = src[2 * s + 1];
    }
    return r;
}
static inline float _mm512_reduce_add_ps(__m512 v) {   /* the order does not matter to the tests' bounds */
    float s = 0;
    for (int i = 0; i < 16; i++) s += v[i];
    return s;
}
static inline __m512 _mm512_dpbf16_ps(__m512 acc, __m512bh a, __m512bh b) {
    uint16_t x[32], y[32];
    memcpy(x, &a, 64);
    memcpy(y, &b, 64);
    for (int i = 0; i < 16; i++) {
        float s = acc[i];
        s += emu_bf16(x[2 * i + 1]) * emu_bf16(y[2 * i + 1]);
        s += emu_bf16(x[2 * i]) * emu_bf16(y[2 * i]);
        acc[i] = s;
    }
    return acc;
}

/* AMX: eight tiles of up to 16 rows x 64 bytes, shaped by the last _tile_loadconfig */
static __thread struct {
    uint8_t rows[8];
    uint16_t colsb[8];
    unsigned char t[8][16][64];
} emu_amx;

static inline void _tile_loadconfig(const void *cfg) {
    const unsigned char *c = cfg;
    for (int i = 0; i < 8; i++) {
        memcpy(&emu_amx.colsb[i], c + 16 + 2 * i, 2);
        emu_amx.rows[i] = c[48 + i];
    }
}
static inline void _tile_release(void) { memset(&emu_amx, 0, sizeof emu_amx); }
static inline void _tile_zero(int t) { memset(emu_amx.t[t], 0, sizeof emu_amx.t[t]); }
static inline void _tile_loadd(int t, const void *base, long stride) {
    for (int r = 0; r < emu_amx.rows[t]; r++) memcpy(emu_amx.t[t][r], (const char *)base + r * stride, emu_amx.colsb[t]);
}
static inline void _tile_stored(int t, void *base, long stride) {
    for (int r = 0; r < emu_amx.rows[t]; r++) memcpy((char *)base + r * stride, emu_amx.t[t][r], emu_amx.colsb[t]);
}
static inline void _tile_dpbf16ps(int c, int a, int b) {
    for (int m = 0; m < emu_amx.rows[c]; m++)
        for (int k = 0; k < emu_amx.colsb[a] / 4; k++)
            for (int n = 0; n < emu_amx.colsb[c] / 4; n++) {
                uint16_t a0, a1, b0, b1;
                float s;
                memcpy(&a0, &emu_amx.t[a][m][4 * k], 2);
                memcpy(&a1, &emu_amx.t[a][m][4 * k + 2], 2);
                memcpy(&b0, &emu_amx.t[b][k][4 * n], 2);
                memcpy(&b1, &emu_amx.t[b][k][4 * n + 2], 2);
                memcpy(&s, &emu_amx.t[c][m][4 * n], 4);
                s += emu_bf16(a0) * emu_bf16(b0);
                s += emu_bf16(a1) * emu_bf16(b1);
                memcpy(&emu_amx.t[c][m][4 * n], &s, 4);
            }
}

#endif
