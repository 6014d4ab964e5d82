/* quant_legacy_avx2.c — the exact matmul over Q8_0 / Q4_0 / Q5_0 / IQ4_NL / Q4_1 / Q5_1 weights
 * (ggml's 32-weight blocks) for AVX2+FMA, for decode and for inputs of up to G4_QDEC_MAX_ROWS rows
 * (several slots' decode tokens, a speculative draft's verification): each weight block is read
 * from memory once per call and its quants are widened to float in registers (never stored),
 * dotted with every activation row. Inputs of more rows take the dequantized-panel GEMM
 * (g4_gemm_quant_avx2), its last partial panel this kernel.
 *
 * Row invariance: each (weight row, activation row) result is one fixed chain of float
 * operations — per block s = q . x (Q4_0 / Q5_0: started from the block's offset term c * sum(x),
 * c = -8 / -16; IQ4_NL: q the kvalue, as Q8_0's signed quant), acc += d * s (Q4_1 / Q5_1: acc +=
 * w * x per 8 weights, w = d q + m as g4_dequant_row makes it), then one horizontal sum per segment of SEG blocks, segments added
 * in order — whatever the number of rows in the call, the row range, the thread count. So a row
 * decoded beside others gets the bits it gets alone. The chains are those of quant_avx2.c's
 * decode (T <= 3), so those results are unchanged; only how Q5_0's quants reach the float unit
 * changed: its nibbles and fifth bits are assembled 32 weights at a time in bytes (one 256-bit
 * operation per step, where int32 lanes took one per 8 weights), then widened by in-lane
 * shuffles (q5_0_w). */
#pragma GCC target("avx2,fma,f16c")
#include <pthread.h>
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/quant.h"
#include "kernels/cpu/quant_simd.h"
#include "kernels/cpu/quant_act_blocks_avx2.h"

#define AI static inline __attribute__((always_inline))

/* SEG: blocks per segment of K, quant_avx2.c's split for its per-call sums at 3 rows (8192 floats
 * / 24), kept so that its decode and this one give the same bits at every K. TG: activation rows
 * per pass (8 spilled the accumulators: slower than 2 passes of 4, measured). NC: weight rows per
 * chunk when an input takes several passes. */
enum { SEG = 341, TG = 4, NC = 16 };

float g4_f16_f32_avx2[65536];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;
static void f16_init(void) {
    for (int i = 0; i < 65536; i += 8)
        _mm256_storeu_ps(g4_f16_f32_avx2 + i,
                         _mm256_cvtph_ps(_mm_add_epi16(_mm_set1_epi16((short)i), _mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7))));
}
void g4_f16_f32_avx2_init(void) { pthread_once(&f16_once, f16_init); }

/* the same float converted in registers: where a pass serves several activation rows its cost is
 * shared, and the table's dependent second load was measured slower there */
static inline __m256 bcast_f16_cvt(const uint8_t *p) { return _mm256_set1_ps(g4_ld_f16(p)); }
static inline __m256 bcast_f16(const uint8_t *p) {   /* quant.h g4_f16_f32_avx2 */
    uint16_t h;
    memcpy(&h, p, 2);
    return _mm256_broadcast_ss(g4_f16_f32_avx2 + h);
}
static inline __m256 ld(const float *p) { return _mm256_loadu_ps(p); }

/* Q4_0 (18 B: f16 d, q[16]; weight j < 16 the low nibble of q[j], 16 + j its high nibble):
 * 8 bytes zero-extended from memory into int32 lanes give two groups (masked, shifted) — here
 * faster than assembling the 32 nibbles in bytes first (measured: 0.8x) */
AI void q4_0_w(const uint8_t *blk, __m256 w[4]) {
    const __m256i m4 = _mm256_set1_epi32(0x0F);
    const __m256i v0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 2))),
                  v1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 10)));
    w[0] = _mm256_cvtepi32_ps(_mm256_and_si256(v0, m4));
    w[1] = _mm256_cvtepi32_ps(_mm256_and_si256(v1, m4));
    w[2] = _mm256_cvtepi32_ps(_mm256_srli_epi32(v0, 4));
    w[3] = _mm256_cvtepi32_ps(_mm256_srli_epi32(v1, 4));
}

/* Q5_0 (22 B: f16 d, qh[4], q[16]; weight j < 16 the low nibble of q[j], 16 + j its high nibble;
 * bit j of qh is weight j's fifth bit): the 32 weights assembled as bytes, 32 at once, in a
 * layout that widens without crossing 128-bit lanes (those shuffles have a single port, which
 * bounded this kernel): lane 0 holds weights 0-3, 8-11, 16-19, 24-27 and lane 1 weights 4-7,
 * 12-15, 20-23, 28-31, so group c (weights 8c..8c+7) is bytes 4c..4c+3 of each lane, one in-lane
 * byte shuffle into int32 lanes. Fifth bits: each byte takes qh's byte j / 8 (a shuffle), every bit
 * but j % 8 is forced to one, and a compare with all-ones tells whether bit j was set. */
AI void q5_0_w(const uint8_t *blk, __m256 w[4]) {
    const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(blk + 6)));
    const __m256i v = _mm256_shuffle_epi8(q, _mm256_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11,
                                                              4, 5, 6, 7, 12, 13, 14, 15, 4, 5, 6, 7, 12, 13, 14, 15));
    /* low nibbles in bytes 0-7 of each lane, high nibbles in bytes 8-15 */
    const __m256i nib = _mm256_and_si256(_mm256_blend_epi32(v, _mm256_srli_epi16(v, 4), 0xCC), _mm256_set1_epi8(0x0F));
    uint32_t qh;
    memcpy(&qh, blk + 2, 4);
    const __m256i sel = _mm256_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
                                         0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m256i others = _mm256_setr_epi32(   /* byte: ~(1 << its weight's j % 8) */
        (int)0xF7FBFDFE, (int)0xF7FBFDFE, (int)0xF7FBFDFE, (int)0xF7FBFDFE,
        (int)0x7FBFDFEF, (int)0x7FBFDFEF, (int)0x7FBFDFEF, (int)0x7FBFDFEF);
    __m256i h = _mm256_or_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), sel), others);
    h = _mm256_cmpeq_epi8(h, _mm256_set1_epi8(-1));
    const __m256i b = _mm256_or_si256(nib, _mm256_and_si256(h, _mm256_set1_epi8(0x10)));
#define Z -1
#define GROUP(c) _mm256_setr_epi8(4 * c, Z, Z, Z, 4 * c + 1, Z, Z, Z, 4 * c + 2, Z, Z, Z, 4 * c + 3, Z, Z, Z, \
                                  4 * c, Z, Z, Z, 4 * c + 1, Z, Z, Z, 4 * c + 2, Z, Z, Z, 4 * c + 3, Z, Z, Z)
    w[0] = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(b, GROUP(0)));
    w[1] = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(b, GROUP(1)));
    w[2] = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(b, GROUP(2)));
    w[3] = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(b, GROUP(3)));
#undef GROUP
#undef Z
}

/* Q8_0 (34 B: f16 d, int8 q[32]): 8 weights sign-extended straight from memory */
static inline __m256 q8_8(const uint8_t *q) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)q)));
}

/* IQ4_NL (18 B: f16 d, q[16]; weight j < 16 the low nibble of q[j], 16 + j its high nibble, each
 * an index into the 16 kvalues): the 32 kvalues as signed bytes (the int8 kernels' unpacking),
 * widened */
AI void iq4_nl_w(const uint8_t *blk, __m256 w[4]) {
    const __m256i q = g4_act_unpack32_avx2(G4_ACT_K_IQ4_NL, blk);
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    w[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo));
    w[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)));
    w[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi));
    w[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)));
}

/* the kinds without an offset term: q . x alone (Q4_1 / Q5_1: their weights d q + m made first) */
#define NO_OFFSET(kind) ((kind) != G4_K32_Q4_0 && (kind) != G4_K32_Q5_0)

/* One pass: R weight rows (stride rb) x TN activation rows (stride ldx) over nb blocks; pre
 * (Q4_0 / Q5_0: 8 floats per activation row and block, row stride ldp) starts each block's dot;
 * y[t * ldy + r] = the sum (add: y += it, for K's later segments). pf: prefetch the weight stream
 * (the first pass over these rows) */
AI void pass(const int kind, const int R, const int TN, const uint8_t *w, size_t rb, int nb, const float *x,
             int ldx, const float *pre, size_t ldp, int pf, float *y, int ldy, int add) {
    const int bb = g4_k32_bytes(kind);
    __m256 acc[4][TG];
    for (int r = 0; r < R; r++)
        for (int t = 0; t < TN; t++) acc[r][t] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        if (pf) g4_prefetch_ahead(w + (size_t)b * R * bb, (size_t)R * bb);   /* the R rows' linear range */
        if (kind == G4_K32_Q4_1 || kind == G4_K32_Q5_1) {   /* acc += w * x, w = d q + m as g4_dequant_row (d q exact) */
            for (int r = 0; r < R; r++) {
                const uint8_t *blk = w + (size_t)r * rb + (size_t)b * bb;
                __m256 q[4];
                if (kind == G4_K32_Q4_1) q4_0_w(blk + 2, q);   /* Q4_0's layout 2 bytes on: d, m, then its q */
                else q5_0_w(blk + 2, q);
                const __m256 d = bcast_f16_cvt(blk), m = bcast_f16_cvt(blk + 2);
                for (int c = 0; c < 4; c++) q[c] = _mm256_fmadd_ps(d, q[c], m);
                for (int t = 0; t < TN; t++) {
                    const float *xb = x + (size_t)t * ldx + 32 * b;
                    for (int c = 0; c < 4; c++) acc[r][t] = _mm256_fmadd_ps(q[c], ld(xb + 8 * c), acc[r][t]);
                }
            }
            continue;
        }
        for (int r = 0; r < R; r++) {
            const uint8_t *blk = w + (size_t)r * rb + (size_t)b * bb;
            __m256 q[4];
            if (kind == G4_K32_Q8_0) {
                for (int c = 0; c < 4; c++) q[c] = q8_8(blk + 2 + 8 * c);
            } else if (kind == G4_K32_IQ4_NL) {
                iq4_nl_w(blk, q);
            } else {
                if (kind == G4_K32_Q4_0) q4_0_w(blk, q);
                else q5_0_w(blk, q);
            }
            const __m256 d = TN == 1 ? bcast_f16(blk) : bcast_f16_cvt(blk);
            for (int t = 0; t < TN; t++) {
                const float *xb = x + (size_t)t * ldx + 32 * b;
                __m256 s = NO_OFFSET(kind) ? _mm256_mul_ps(q[0], ld(xb))
                                          : _mm256_fmadd_ps(q[0], ld(xb), ld(pre + t * ldp + 8 * b));
                s = _mm256_fmadd_ps(q[1], ld(xb + 8), s);
                s = _mm256_fmadd_ps(q[2], ld(xb + 16), s);
                s = _mm256_fmadd_ps(q[3], ld(xb + 24), s);
                acc[r][t] = _mm256_fmadd_ps(d, s, acc[r][t]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < TN; t++) {
            const float v = g4_hsum8(acc[r][t]);
            y[(size_t)t * ldy + r] = add ? y[(size_t)t * ldy + r] + v : v;
        }
}

/* The pass shapes, each compiled with its R and TN constant (the accumulators in registers):
 * one activation row takes 4 weight rows a pass (four independent chains hide the FMA latency),
 * two take 2, more take 1 weight row x up to TG activation rows */
#define PASS_PARAMS const uint8_t *w, size_t rb, int nb, const float *x, int ldx, const float *pre, size_t ldp, \
                    int pf, float *y, int ldy, int add
#define PASS_ARGS w, rb, nb, x, ldx, pre, ldp, pf, y, ldy, add
#define SHAPES(name, NAME)                                     \
    static void pass_##name(int R, int TN, PASS_PARAMS) {      \
        switch (R == 4 ? -4 : R == 2 ? -2 : TN) {              \
        case -4: pass(G4_K32_##NAME, 4, 1, PASS_ARGS); break;  \
        case -2: pass(G4_K32_##NAME, 2, 2, PASS_ARGS); break;  \
        case 1: pass(G4_K32_##NAME, 1, 1, PASS_ARGS); break;   \
        case 2: pass(G4_K32_##NAME, 1, 2, PASS_ARGS); break;   \
        case 3: pass(G4_K32_##NAME, 1, 3, PASS_ARGS); break;   \
        default: pass(G4_K32_##NAME, 1, TG, PASS_ARGS); break; \
        }                                                      \
    }
G4_K32_KINDS(SHAPES)
#define PASS_OF(name, NAME) [G4_K32_##NAME] = pass_##name,
static void (*const pass_of[])(int, int, PASS_PARAMS) = {G4_K32_KINDS(PASS_OF)};

/* The offset term of Q4_0 / Q5_0 per activation row and block: c * (x0 + x1 + x2 + x3) over the
 * block's four groups of 8 (quant_avx2.c's pre_q_0, the same operations) */
static void pre_offset(float c, const float *x, int ldx, int T, int nb, float *pre) {
    const __m256 cv = _mm256_set1_ps(c);
    for (int t = 0; t < T; t++)
        for (int b = 0; b < nb; b++) {
            const float *xb = x + (size_t)t * ldx + 32 * b;
            const __m256 s = _mm256_add_ps(_mm256_add_ps(ld(xb), ld(xb + 8)), _mm256_add_ps(ld(xb + 16), ld(xb + 24)));
            _mm256_storeu_ps(pre + ((size_t)t * nb + b) * 8, _mm256_mul_ps(cv, s));
        }
}

/* Rows [n0, n1) x T (<= G4_QDEC_MAX_ROWS) activation rows. Per segment of K: the offset terms of
 * every activation row (on the stack: at most 16 x 341 x 8 floats); then per chunk of NC weight
 * rows (inputs of more than TG rows), each pass of up to TG activation rows runs over the whole
 * chunk: the first pass reads the chunk from memory, the others find it in cache, and a pass's
 * activation rows stay in L1 (passes over one weight row at a time re-read all 16 activation
 * rows from L2 per weight row). */
static void decode(const int kind, const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    const int bb = g4_k32_bytes(kind);
    void (*const pass_fn)(int, int, PASS_PARAMS) = pass_of[kind];
    const int nb = K / 32, seg = NO_OFFSET(kind) ? nb : SEG;   /* no offset terms: K in one */
    const size_t rb = (size_t)nb * bb;
    for (int b0 = 0; b0 < nb; b0 += seg) {
        const int sn = nb - b0 < seg ? nb - b0 : seg;
        const float *xs = x + (size_t)b0 * 32;
        const uint8_t *ws = (const uint8_t *)w + (size_t)b0 * bb;
        const size_t ldp = (size_t)sn * 8;
        float pre[NO_OFFSET(kind) ? 1 : (size_t)T * ldp];
        if (!NO_OFFSET(kind)) pre_offset(kind == G4_K32_Q4_0 ? -8.0f : -16.0f, xs, K, T, sn, pre);
        const int nc_rows = T > TG ? NC : n1 - n0;
        for (int nc = n0; nc < n1; nc += nc_rows) {
            const int ne = n1 - nc < nc_rows ? n1 : nc + nc_rows;
            for (int t0 = 0; t0 < T;) {
                const int tn = T <= 2 ? T : T - t0 < TG ? T - t0 : TG;
                for (int n = nc; n < ne;) {
                    const int R = T == 1 && n + 4 <= ne ? 4 : T == 2 && n + 2 <= ne ? 2 : 1;
                    pass_fn(R, tn, ws + (size_t)n * rb, rb, sn, xs + (size_t)t0 * K, K, pre + t0 * ldp, ldp, t0 == 0,
                            y + (size_t)t0 * ldy + n, ldy, b0 > 0);
                    n += R;
                }
                t0 += tn;
            }
        }
    }
}

/* Any T through the decode, 16 activation rows a pass (row-invariant) */
static void decode_rows(const int kind, const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    g4_f16_f32_avx2_init();
    for (int t0 = 0; t0 < T && n0 < n1; t0 += G4_QDEC_MAX_ROWS)
        decode(kind, x + (size_t)t0 * K, T - t0 < G4_QDEC_MAX_ROWS ? T - t0 : G4_QDEC_MAX_ROWS, K, w, n0, n1,
               y + (size_t)t0 * ldy, ldy);
}

/* matmul (g4_mm_*_avx2_rows): inputs of more than G4_QDEC_MAX_ROWS rows take the panel GEMM
 * (prefill), its last rows and smaller inputs the decode; matmul_rows (g4_mm_rows_*_avx2): the
 * decode at any T */
#define MM_LEGACY(name, NAME)                                                                                       \
    void g4_mm_##name##_avx2_rows(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) { \
        if (T > G4_QDEC_MAX_ROWS) n0 = g4_gemm_quant_avx2(G4_DT_##NAME, x, T, K, w, n0, n1, y, ldy);                \
        decode_rows(G4_K32_##NAME, x, T, K, w, n0, n1, y, ldy);                                                     \
    }                                                                                                               \
    void g4_mm_rows_##name##_avx2(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) { \
        decode_rows(G4_K32_##NAME, x, T, K, w, n0, n1, y, ldy);                                                     \
    }
G4_K32_KINDS(MM_LEGACY)
