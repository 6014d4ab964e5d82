/* dtype.h — the element types a weight tensor may have: plain floats (F32/F16/BF16, one element
 * each) and ggml's block-quantized types (a block of 32 or 256 elements in a fixed byte layout).
 * Owns the sizes and names; the kernels table is indexed by these values. */
#ifndef G4_BASE_DTYPE_H
#define G4_BASE_DTYPE_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    G4_DT_F32 = 0, G4_DT_F16 = 1, G4_DT_BF16 = 2,
    /* ggml block formats (ggml-common.h): */
    G4_DT_Q8_0 = 3,  /* 32 el: f16 d, int8 q[32]                                34 B */
    G4_DT_Q4_0 = 4,  /* 32 el: f16 d, nibbles q[16] (value q-8)                 18 B */
    G4_DT_Q5_0 = 5,  /* 32 el: f16 d, high bits qh[4], nibbles q[16] (q-16)     22 B */
    G4_DT_Q4_K = 6,  /* 256 el: f16 d, dmin, 6-bit scales/mins[12], q[128]     144 B */
    G4_DT_Q6_K = 7,  /* 256 el: ql[128], qh[64], int8 scales[16], f16 d        210 B */
    G4_DT_Q5_K = 8,  /* 256 el: f16 d, dmin, 6-bit scales/mins[12], qh[32], q[128]  176 B */
    G4_DT_IQ4_XS = 9, /* 256 el: f16 d, scales_h (u16), scales_l[4], q[128] (nibbles index a
                       * fixed non-linear table of 16 int8 values)                136 B */
    G4_DT_Q3_K = 10, /* 256 el: hmask[32], 2-bit q[64], 6-bit scales[12], f16 d    110 B */
    G4_DT_Q2_K = 11, /* 256 el: 4-bit scales/mins[16], 2-bit q[64], f16 d, dmin     84 B */
    G4_DT_IQ4_NL = 12, /* 32 el: f16 d, nibbles q[16] indexing IQ4_XS's table        18 B */
    G4_DT_Q4_1 = 13, /* 32 el: f16 d, f16 m, nibbles q[16] (value d q + m)        20 B */
    G4_DT_Q5_1 = 14, /* 32 el: f16 d, f16 m, high bits qh[4], nibbles q[16]       24 B */
    G4_DT_COUNT
} g4_dtype;

/* Bytes of one element for F32/F16/BF16; for block types the bytes of one block. */
size_t g4_dtype_size(g4_dtype dt);
/* Elements per block: 1 for plain floats, 32 or 256 for quantized types. */
int g4_dtype_block(g4_dtype dt);
/* Bytes of n elements (n a multiple of the block size). */
size_t g4_dtype_row_bytes(g4_dtype dt, int64_t n);
const char *g4_dtype_name(g4_dtype dt);
static inline int g4_dtype_is_quant(g4_dtype dt) { return dt >= G4_DT_Q8_0; }

#endif
