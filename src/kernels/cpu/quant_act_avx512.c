/* quant_act_avx512.c — the int8-activation matmul (--act-q8) with AVX512-VNNI: every input over
 * Q8_0 / Q4_0 / Q5_0 / IQ4_NL (1-5 rows on decode tiles, more on chunks of rows), over Q4_K / Q6_K
 * inputs of 12 or more rows (prefill, batched decode) on chunks and the rest on their decode tiles
 * (Q4_K's 1-3 rows), Q5_K likewise (its decode tiles at any row count short of a chunk), every
 * input over Q3_K / Q2_K / IQ4_XS on its decode tiles;
 * bit-identical to the AVX2 tiles (quant_act_avx2.c) and so to ggml's x86 ggml_vec_dot_*_q8_0 / *_q8_K.
 *
 * ggml's arithmetic per (weight row, activation row t, block): 8 int32 lanes, lane l an exact
 * integer sum over the bytes 4l..4l+3 of the block's vectors; acc_l += (dx * dy_t) * float(lane l);
 * at the end of the row one fixed tree of adds over the 8 lanes. Here a 512-bit register holds one
 * lane l for 16 activation rows at once: the activation rows' bytes are transposed once per call
 * into [block][dword][t], and vpdpbusd multiplies a weight dword, broadcast, by the 16 rows' bytes,
 * 64 products per instruction where AVX2 takes two (maddubs, madd) per 32. Over the 32-weight
 * blocks the same kernels run on 256-bit registers too, 8 rows a chunk (quant_act_vnni_tiles.h
 * holds both widths), for 6-9 rows past whole chunks of 16 (vnni_plan). The integers are ggml's
 * (for the 32-weight blocks the activation bytes carry a +128 offset that the accumulator's start
 * takes back out; the K-quants' sub-block scales multiply by vpdpwssd), and so are the scales, the
 * fmadd chains per lane and the final trees, done for a chunk's rows at a time. A block's weights
 * are unpacked and stored for the broadcasts one block ahead of the dots that read them. Q4_K
 * inputs of 4-11 rows keep the AVX2 GEMM tiles. */
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/pack_avx2.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/quant_simd.h"
#include "kernels/cpu/quant_act_blocks_avx2.h"

#define AI static inline __attribute__((always_inline))

/* TC: rows per chunk of the 512-bit kernels; SC / KSC: chunks transposed per pass (a K-quant
 * chunk is 4.9 KB per block), so that a group of RG weight rows stays in L1/L2 while their rows
 * pass over it */
enum { TC = 16, SC = 4, KSC = 2, RG = 16 };

/* Which rows take which chunk kernels, by what each costs (one core, bench/quant_act_bench.c):
 * [0, t16) chunks of 16 rows, a last one of pad16 or more rows padded; [t16, t8) one chunk of 8 rows
 * on 256-bit registers (pad8 to 8 rows, padded; 0 for none); [t8, T) the rest. Over the 32-weight
 * blocks the rest (at most DEC_MAX_ROWS rows) take the decode tiles below, and a padded 16-row
 * chunk costs about what 10 rows take on an 8-row chunk and those, a padded 8-row chunk what 6 take
 * on the decode tiles (0.39 against 0.43-0.49 ms over Q4_0 / IQ4_NL; Q8_0 even); over the K-quants the rest take
 * their decode tiles (or the AVX2 tiles), which run near the rate of a 256-bit VNNI chunk (62-66
 * against 59-70 GMAC/s at 8 rows), so those take no 8-row chunks and pad from 12 rows. */
enum { DEC_MAX_ROWS = 5 };
static void vnni_plan(int T, int pad16, int pad8, int *t16, int *t8) {
    const int r = T % TC;
    *t16 = r >= pad16 ? T : T - r;
    const int r8 = T - *t16;
    if (t8) *t8 = *t16 + (pad8 && r8 >= pad8 ? (r8 < 8 ? r8 : 8) : 0);
}

/* One weight row's 32 quants of a block and their offsets, stored for the tile's broadcasts */
AI void tile_quants(int kind, const uint8_t *blk, int32_t q[8], int32_t c[8]) {
    const __m256i qx = g4_act_unpack32_avx2(kind, blk);
    g4_store_opaque32(q, qx);
    /* -128 * (the sum of each dword's 4 quants): takes the activation bytes' offset back out */
    g4_store_opaque32(c, _mm256_sub_epi32(_mm256_setzero_si256(),
                                       _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)0x80), qx)));
}

/* ---------------------------------------------------------------- the chunk kernels, both widths */

#define NM(x) x##_w16
#define W 16
#define VB 64
#define VI __m512i
#define VF __m512
#define VMASK __mmask16
#define V_ZI() _mm512_setzero_si512()
#define V_ZF() _mm512_setzero_ps()
#define V_SET1I(x) _mm512_set1_epi32(x)
#define V_SET1B(x) _mm512_set1_epi8(x)
#define V_SET1F(x) _mm512_set1_ps(x)
#define V_LDI(p) _mm512_load_si512((const void *)(p))
#define V_LDF(p) _mm512_load_ps((const void *)(p))
#define V_STI(p, v) _mm512_store_si512((void *)(p), v)
#define V_STF(p, v) _mm512_store_ps(p, v)
#define V_XORI _mm512_xor_si512
#define V_MULLO _mm512_mullo_epi32
#define V_IOTA _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
#define V_GATHER(m, idx, base) _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, base, 1)
#define V_DPBUSD _mm512_dpbusd_epi32
#define V_CVT _mm512_cvtepi32_ps
#define V_FMA _mm512_fmadd_ps
#define V_MULF _mm512_mul_ps
#define V_ADDF _mm512_add_ps
#include "kernels/cpu/quant_act_vnni_tiles.h"

#define NM(x) x##_w8
#define W 8
#define VB 32
#define VI __m256i
#define VF __m256
#define VMASK __mmask8
#define V_ZI() _mm256_setzero_si256()
#define V_ZF() _mm256_setzero_ps()
#define V_SET1I(x) _mm256_set1_epi32(x)
#define V_SET1B(x) _mm256_set1_epi8(x)
#define V_SET1F(x) _mm256_set1_ps(x)
#define V_LDI(p) _mm256_load_si256((const __m256i *)(p))
#define V_LDF(p) _mm256_load_ps((const float *)(p))
#define V_STI(p, v) _mm256_store_si256((__m256i *)(p), v)
#define V_STF(p, v) _mm256_store_ps(p, v)
#define V_XORI _mm256_xor_si256
#define V_MULLO _mm256_mullo_epi32
#define V_IOTA _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)
#define V_GATHER(m, idx, base) _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), m, idx, base, 1)
#define V_DPBUSD _mm256_dpbusd_epi32
#define V_CVT _mm256_cvtepi32_ps
#define V_FMA _mm256_fmadd_ps
#define V_MULF _mm256_mul_ps
#define V_ADDF _mm256_add_ps
#include "kernels/cpu/quant_act_vnni_tiles.h"

/* ---------------------------------------------------------------- K-quants × Q8_K (16-row chunks) */

/* ggml's x86 ggml_vec_dot_q4_K_q8_K per (weight row, activation row t, block of 256): 8 int32
 * lanes, lane l = sum over the 8 sub-blocks k of sc_k * (the 4 products of its bytes 4l..4l+3,
 * nibbles by activation bytes); acc_l += (d * dy_t) * float(lane l); beside it 4 lanes
 * m_i = mins_2i * s_2i + mins_2i+1 * s_2i+1 (s_k the activation's sum over sub-block k),
 * accm_i += (-dy_t * dmin) * float(m_i); at the end hsum8(acc) + hsum4(accm). Here as above for
 * 16 activation rows a register: vpdpbusd takes the nibbles' dword (unsigned) broadcast against
 * the 16 rows' activation bytes (signed, no offset); the sums of sub-blocks 2j and 2j+1 (each fits
 * 16 bits: at most 4 * 15 * 128) share a lane's two halves, and one vpdpwssd multiplies them by
 * (sc_2j, sc_2j+1) into the lane's total; vpmaddwd gives the mins' products. */

/* A chunk's bytes per block: [m][t][4] activation bytes (qs's dword m: 64 * 64; + 128 for the
 * signed quants of Q3_K / IQ4_XS, whose dots start from -128 times their dword's sum), [t] d as float,
 * for Q4_K / Q5_K [i][t] the int16 pair (s_2i, s_2i+1), for Q6_K [l][t] the pair (bsums_2l,
 * bsums_2l+1) (kchunk_build fills the region of the weight type at hand: the sums or not) */
enum { KCHUNK_D = 64 * 64, KCHUNK_S = KCHUNK_D + TC * 4, KCHUNK_B = KCHUNK_S + 4 * TC * 4,
       KCHUNK_BLOCK_BYTES = KCHUNK_B + 8 * TC * 4 };

static void kchunk_build(const g4_block_q8_K *xq, int nb, int tn, int sums, int offset, uint8_t *chunk) {
    const __m512i off = _mm512_set1_epi8(offset ? (char)0x80 : 0);
    const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32((int)(nb * sizeof(g4_block_q8_K))));
    const __mmask16 live = (__mmask16)((1u << tn) - 1);
    for (int b = 0; b < nb; b++) {
        uint8_t *cb = chunk + (size_t)b * KCHUNK_BLOCK_BYTES;
        const g4_block_q8_K *x0 = xq + b;
        for (int m = 0; m < 64; m++)
            _mm512_store_si512(cb + 64 * m, _mm512_xor_si512(_mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, rows, x0->qs + 4 * m, 1), off));
        float *d = (float *)(cb + KCHUNK_D);
        int16_t *sp = (int16_t *)(cb + KCHUNK_S), *bp = (int16_t *)(cb + KCHUNK_B);
        for (int t = 0; t < TC; t++) {
            const g4_block_q8_K *x = x0 + (size_t)t * nb;
            d[t] = t < tn ? x->d : 0.0f;
            if (sums)   /* Q4_K / Q5_K: ggml's hadd of bsums, the int16 sum over sub-block k */
                for (int k = 0; k < 8; k++)
                    sp[(k / 2) * 2 * TC + 2 * t + k % 2] = t < tn ? (int16_t)(x->bsums[2 * k] + x->bsums[2 * k + 1]) : 0;
            else
                for (int k = 0; k < 16; k++) bp[(k / 2) * 2 * TC + 2 * t + k % 2] = t < tn ? x->bsums[k] : 0;
        }
    }
}

/* A Q4_K / Q5_K (q5) block's scales and quants, stored for the tile's broadcasts (int16 pairs
 * (sc_2j, sc_2j+1) and (mins_2i, mins_2i+1); quants of sub-block k by dword, Q5_K's fifth bit k of
 * qh as 16) */
typedef struct {
    int32_t sc[4], mn[4], nib[8][8];
} q4_k_prep;

AI void k45_prepare(int q5, const uint8_t *blk, q4_k_prep *p) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    uint32_t utmp[4];   /* scales[8], mins[8] as bytes */
    g4_q4_k_scales(blk + 4, utmp);
    __asm__("vmovdqu %1, %0" : "=m"(p->sc) : "x"(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)utmp))));
    __asm__("vmovdqu %1, %0" : "=m"(p->mn) : "x"(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(utmp + 2)))));
    const __m256i qh = q5 ? _mm256_loadu_si256((const __m256i *)(blk + 16)) : _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
        const __m256i q4 = _mm256_loadu_si256((const __m256i *)(blk + (q5 ? 48 : 16) + 32 * j));
        __m256i lo = _mm256_and_si256(q4, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), m4);
        if (q5) {
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), one), 4));
            hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j + 1), one), 4));
        }
        g4_store_opaque32(p->nib[2 * j], lo);
        g4_store_opaque32(p->nib[2 * j + 1], hi);
    }
}

/* one weight row × one chunk's 16 activation rows: results for t < tn to y[t * ldy]; block b + 1
 * prepared while block b's dots run (as tile's). Q5_K (q5): its quants' sums fit 16 bits as well
 * (4 * 31 * 128); its mins' products summed as integers into one float FMA a block, as tile_k45 */
AI void ktile_k45(int q5, const uint8_t *row, int nb, const uint8_t *chunk, int tn, float *y, int ldy) {
    const size_t bb = q5 ? 176 : 144;
    __m512 acc[8], accm[4];
    for (int l = 0; l < 8; l++) acc[l] = _mm512_setzero_ps();
    for (int i = 0; i < 4; i++) accm[i] = _mm512_setzero_ps();
    q4_k_prep pp[2];
    k45_prepare(q5, row, &pp[0]);
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = row + (size_t)b * bb, *cb = chunk + (size_t)b * KCHUNK_BLOCK_BYTES;
        g4_prefetch_ahead(blk, bb);
        if (b + 1 < nb) k45_prepare(q5, blk + bb, &pp[(b + 1) & 1]);
        const q4_k_prep *p = &pp[b & 1];
        const __m512 yd = _mm512_load_ps((const float *)(cb + KCHUNK_D));
        __m512i sumi[8];
        for (int l = 0; l < 8; l++) sumi[l] = _mm512_setzero_si512();
        for (int j = 0; j < 4; j++) {
            const __m512i s = _mm512_set1_epi32(p->sc[j]);
            const uint8_t *cj = cb + 64 * 16 * j;   /* m = 16j + 8h + l */
#pragma GCC unroll 8
            for (int l = 0; l < 8; l++) {
                /* sub-blocks 2j and 2j+1's sums as the low and high 16 bits of one lane, so that one
                 * vpdpwssd scales and adds both */
                const __m512i lo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi32(p->nib[2 * j][l]),
                                                       _mm512_load_si512(cj + 64 * l));
                const __m512i hi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi32(p->nib[2 * j + 1][l]),
                                                       _mm512_load_si512(cj + 64 * (8 + l)));
                sumi[l] = _mm512_dpwssd_epi32(sumi[l], _mm512_mask_blend_epi16(0xAAAAAAAA, lo, _mm512_slli_epi32(hi, 16)), s);
            }
        }
        const __m512 d = _mm512_mul_ps(yd, _mm512_set1_ps(g4_ld_f16(blk))), dm = _mm512_mul_ps(yd, _mm512_set1_ps(-g4_ld_f16(blk + 2)));
#pragma GCC unroll 8
        for (int l = 0; l < 8; l++) acc[l] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sumi[l]), acc[l]);
        __m512i pr[4];
        for (int i = 0; i < 4; i++) pr[i] = _mm512_madd_epi16(_mm512_load_si512(cb + KCHUNK_S + 64 * i), _mm512_set1_epi32(p->mn[i]));
        if (q5)
            accm[0] = _mm512_fmadd_ps(dm, _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_add_epi32(pr[0], pr[1]), _mm512_add_epi32(pr[2], pr[3]))),
                                      accm[0]);
        else
            for (int i = 0; i < 4; i++) accm[i] = _mm512_fmadd_ps(dm, _mm512_cvtepi32_ps(pr[i]), accm[i]);
    }
    /* ggml's hsum8_w16(acc) + hsum4(accm) (Q5_K: + its one sum) */
    const __m512 m = q5 ? accm[0] : _mm512_add_ps(_mm512_add_ps(accm[0], accm[2]), _mm512_add_ps(accm[1], accm[3]));
    store_rows_w16(_mm512_add_ps(sum8_w16(acc), m), tn, y, ldy);
}
static void ktile_q4_k(const uint8_t *row, int nb, const uint8_t *chunk, int tn, float *y, int ldy) {
    ktile_k45(0, row, nb, chunk, tn, y, ldy);
}
static void ktile_q5_k(const uint8_t *row, int nb, const uint8_t *chunk, int tn, float *y, int ldy) {
    ktile_k45(1, row, nb, chunk, tn, y, ldy);
}

/* ggml's x86 ggml_vec_dot_q6_K_q8_K the same way: quants 0..63 (the -32 taken out through the
 * activation's bsums, sumi_l starting at -32 * (bsums_2l sc_2l + bsums_2l+1 sc_2l+1)); lane l of
 * quant vector (j, k) has scale sc[8j + 2k + (l >= 4)]; the sums (at most 4 * 63 * 128) of halves
 * j = 0 and 1 share a lane's 16-bit halves for one vpdpwssd */
typedef struct {
    int32_t q[8][8], sp[8], si[8];   /* quants [4j + k][l]; scale pairs (j = 0, j = 1) [2k + half]; init pairs */
} q6_k_prep;

AI void q6_k_prepare(const uint8_t *blk, q6_k_prep *p) {
    const __m256i m3 = _mm256_set1_epi8(3), m15 = _mm256_set1_epi8(15);
    const int8_t *sc8 = (const int8_t *)(blk + 192);
    for (int k = 0; k < 8; k++) {
        p->sp[k] = (int32_t)((uint32_t)(uint16_t)sc8[k] | (uint32_t)(uint16_t)sc8[8 + k] << 16);
        p->si[k] = (int32_t)((uint32_t)(uint16_t)sc8[2 * k] | (uint32_t)(uint16_t)sc8[2 * k + 1] << 16);
    }
    for (int j = 0; j < 2; j++) {
        const __m256i q4bits1 = _mm256_loadu_si256((const __m256i *)(blk + 64 * j));
        const __m256i q4bits2 = _mm256_loadu_si256((const __m256i *)(blk + 64 * j + 32));
        const __m256i H = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * j));
        g4_store_opaque32(p->q[4 * j], _mm256_or_si256(_mm256_and_si256(q4bits1, m15), _mm256_slli_epi16(_mm256_and_si256(H, m3), 4)));
        g4_store_opaque32(p->q[4 * j + 1], _mm256_or_si256(_mm256_and_si256(q4bits2, m15),
                                                        _mm256_slli_epi16(_mm256_and_si256(H, _mm256_set1_epi8(12)), 2)));
        g4_store_opaque32(p->q[4 * j + 2], _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4bits1, 4), m15),
                                                        _mm256_and_si256(H, _mm256_set1_epi8(48))));
        g4_store_opaque32(p->q[4 * j + 3], _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4bits2, 4), m15),
                                                        _mm256_srli_epi16(_mm256_and_si256(H, _mm256_set1_epi8(-64)), 2)));
    }
}

static void ktile_q6_k(const uint8_t *row, int nb, const uint8_t *chunk, int tn, float *y, int ldy) {
    __m512 acc[8];
    for (int l = 0; l < 8; l++) acc[l] = _mm512_setzero_ps();
    q6_k_prep pp[2];
    q6_k_prepare(row, &pp[0]);
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = row + (size_t)b * 210, *cb = chunk + (size_t)b * KCHUNK_BLOCK_BYTES;
        g4_prefetch_ahead(blk, 210);
        if (b + 1 < nb) q6_k_prepare(blk + 210, &pp[(b + 1) & 1]);
        const q6_k_prep *p = &pp[b & 1];
        __m512i sumi[8];
#pragma GCC unroll 8
        for (int l = 0; l < 8; l++)
            sumi[l] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                       _mm512_slli_epi32(_mm512_madd_epi16(_mm512_load_si512(cb + KCHUNK_B + 64 * l),
                                                                           _mm512_set1_epi32(p->si[l])), 5));
        for (int k = 0; k < 4; k++) {
            const __m512i s0 = _mm512_set1_epi32(p->sp[2 * k]), s1 = _mm512_set1_epi32(p->sp[2 * k + 1]);
#pragma GCC unroll 8
            for (int l = 0; l < 8; l++) {
                const __m512i lo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi32(p->q[k][l]),
                                                       _mm512_load_si512(cb + 64 * (8 * k + l)));
                const __m512i hi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi32(p->q[4 + k][l]),
                                                       _mm512_load_si512(cb + 64 * (32 + 8 * k + l)));
                sumi[l] = _mm512_dpwssd_epi32(sumi[l], _mm512_mask_blend_epi16(0xAAAAAAAA, lo, _mm512_slli_epi32(hi, 16)),
                                              l < 4 ? s0 : s1);
            }
        }
        const __m512 d = _mm512_mul_ps(_mm512_load_ps((const float *)(cb + KCHUNK_D)), _mm512_set1_ps(g4_ld_f16(blk + 208)));
#pragma GCC unroll 8
        for (int l = 0; l < 8; l++) acc[l] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sumi[l]), acc[l]);
    }
    store_rows_w16(sum8_w16(acc), tn, y, ldy);
}

/* Q3_K and IQ4_XS with the activation bytes offset by 128 (unsigned) against the quants as signed
 * bytes: each lane's total starts from -128 times the scaled sums of its weight dwords, which takes
 * the offset back out (ggml's sums of 4 products, scaled); quant vector v is ggml's 32-byte vector
 * (Q3_K: half v / 4, v % 4; IQ4_XS: sub-block v) against the activation dwords 8v..8v+7 */
typedef struct {
    int32_t q[8][8], start[8], sc[8];   /* quants [v][l]; lane starts [l]; Q3_K: scale pairs (half 0, 1) [2k + (l >= 4)], IQ4_XS: ls - 32 [v] */
} kq_offset_prep;

/* -128 * the dword sums of quant vector v times their scales (s: lane l's), into start */
AI __m256i kq_start(__m256i start, __m256i q, __m256i s) {
    return _mm256_sub_epi32(start, _mm256_mullo_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)0x80), q), s));
}

AI void q3_k_prepare(const uint8_t *blk, kq_offset_prep *p) {
    const __m256i m3 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi8(4), hm = _mm256_loadu_si256((const __m256i *)blk);
    const __m128i sc8 = g4_q3_k_scales_m32(blk + 96);
    const __m256i sc_half[2] = {_mm256_cvtepi8_epi32(sc8), _mm256_cvtepi8_epi32(_mm_unpackhi_epi64(sc8, sc8))};
    __m256i start = _mm256_setzero_si256();
    for (int j = 0; j < 2; j++) {
        const __m256i L = _mm256_loadu_si256((const __m256i *)(blk + 32 + 32 * j));
        for (int k = 0; k < 4; k++) {
            const int hb = 4 * j + k;   /* the hmask bit, moved to bit 2 */
            const __m256i hi = _mm256_and_si256(hb >= 2 ? _mm256_srli_epi16(hm, hb - 2) : _mm256_slli_epi16(hm, 2 - hb), m4);
            const __m256i q = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L, 2 * k), m3), hi), m4);
            g4_store_opaque32(p->q[4 * j + k], q);
            start = kq_start(start, q, _mm256_permutevar8x32_epi32(sc_half[j], _mm256_setr_epi32(2 * k, 2 * k, 2 * k, 2 * k, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1)));
        }
    }
    g4_store_opaque32(p->start, start);
    int8_t sc[16];
    _mm_storeu_si128((__m128i *)sc, sc8);
    for (int k = 0; k < 8; k++) p->sc[k] = (int32_t)((uint32_t)(uint16_t)sc[k] | (uint32_t)(uint16_t)sc[8 + k] << 16);
}

AI void iq4_xs_prepare(const uint8_t *blk, kq_offset_prep *p) {
    const __m128i kv = _mm_loadu_si128((const __m128i *)g4_kvalues_iq4nl), m4 = _mm_set1_epi8(0x0F);
    __m256i start = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib++) {
        const __m128i v = _mm_loadu_si128((const __m128i *)(blk + 8 + 16 * ib));
        const __m256i q = _mm256_set_m128i(_mm_shuffle_epi8(kv, _mm_and_si128(_mm_srli_epi16(v, 4), m4)), _mm_shuffle_epi8(kv, _mm_and_si128(v, m4)));
        g4_store_opaque32(p->q[ib], q);
        p->sc[ib] = g4_iq4_xs_scale(blk, ib) - 32;
        start = kq_start(start, q, _mm256_set1_epi32(p->sc[ib]));
    }
    g4_store_opaque32(p->start, start);
}

/* one weight row × one chunk's 16 activation rows, as ktile_k45: Q3_K's sums (at most 4 * 4 * 255)
 * of halves 0 and 1 share a lane's 16-bit halves for one vpdpwssd (lane l of vector (j, k) scaled
 * by sc[8j + 2k + (l >= 4)] - 32); IQ4_XS's (up to 4 * 127 * 255) take vpmulld by ls - 32 */
AI void ktile_offset(int q3, const uint8_t *row, int nb, const uint8_t *chunk, int tn, float *y, int ldy) {
    const size_t bb = q3 ? 110 : 136;
    __m512 acc[8];
    for (int l = 0; l < 8; l++) acc[l] = _mm512_setzero_ps();
    kq_offset_prep pp[2];
    if (q3) q3_k_prepare(row, &pp[0]);
    else iq4_xs_prepare(row, &pp[0]);
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = row + (size_t)b * bb, *cb = chunk + (size_t)b * KCHUNK_BLOCK_BYTES;
        g4_prefetch_ahead(blk, bb);
        if (b + 1 < nb) {
            if (q3) q3_k_prepare(blk + bb, &pp[(b + 1) & 1]);
            else iq4_xs_prepare(blk + bb, &pp[(b + 1) & 1]);
        }
        const kq_offset_prep *p = &pp[b & 1];
        __m512i sumi[8];
        for (int l = 0; l < 8; l++) sumi[l] = _mm512_set1_epi32(p->start[l]);
#define KQ_DOT(v, l) _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_load_si512(cb + 64 * (8 * (v) + (l))), _mm512_set1_epi32(p->q[v][l]))
        if (q3)
            for (int k = 0; k < 4; k++) {
#pragma GCC unroll 8
                for (int l = 0; l < 8; l++)
                    sumi[l] = _mm512_dpwssd_epi32(sumi[l], _mm512_mask_blend_epi16(0xAAAAAAAA, KQ_DOT(k, l), _mm512_slli_epi32(KQ_DOT(4 + k, l), 16)),
                                                  _mm512_set1_epi32(p->sc[2 * k + (l >= 4)]));
            }
        else
            for (int v = 0; v < 8; v++) {
                const __m512i s = _mm512_set1_epi32(p->sc[v]);
#pragma GCC unroll 8
                for (int l = 0; l < 8; l++) sumi[l] = _mm512_add_epi32(sumi[l], _mm512_mullo_epi32(KQ_DOT(v, l), s));
            }
#undef KQ_DOT
        const __m512 d = _mm512_mul_ps(_mm512_load_ps((const float *)(cb + KCHUNK_D)), _mm512_set1_ps(g4_ld_f16(q3 ? blk + 108 : blk)));
#pragma GCC unroll 8
        for (int l = 0; l < 8; l++) acc[l] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sumi[l]), acc[l]);
    }
    store_rows_w16(sum8_w16(acc), tn, y, ldy);
}
static void ktile_q3_k(const uint8_t *row, int nb, const uint8_t *chunk, int tn, float *y, int ldy) {
    ktile_offset(1, row, nb, chunk, tn, y, ldy);
}
static void ktile_iq4_xs(const uint8_t *row, int nb, const uint8_t *chunk, int tn, float *y, int ldy) {
    ktile_offset(0, row, nb, chunk, tn, y, ldy);
}

/* ---------------------------------------------------------------- the entries */

/* Decode (1-6 activation rows): ggml's 8 lanes in a 256-bit register, as the AVX2 tile, with the
 * weights as the unsigned operand — Q4_0 / Q5_0's quants before their offset (8, 16), Q8_0's + 128 —
 * and the accumulator starting at -offset * (the activation dword's byte sum), computed once a
 * block for the NR weight rows: one vpdpbusd where AVX2 takes sign, sign, maddubs and madd */
AI __m256i dec_weights(int kind, const uint8_t *b) {
    if (kind == G4_ACT_K_Q8_0 || kind == G4_ACT_K_IQ4_NL || kind == G4_ACT_K_IQ4_NL_VEC)   /* signed quants + 128 */
        return _mm256_xor_si256(g4_act_unpack32_avx2(kind, b), _mm256_set1_epi8((char)0x80));
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m128i v = _mm_loadu_si128((const __m128i *)(b + (kind == G4_ACT_K_Q4_0 ? 2 : 6)));
    const __m256i nib = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
    if (kind == G4_ACT_K_Q4_0) return nib;
    uint32_t qh;   /* Q5_0: bit i of qh is weight i's fifth bit */
    memcpy(&qh, b + 2, 4);
    return _mm256_mask_add_epi8(nib, (__mmask32)qh, nib, _mm256_set1_epi8(16));
}

/* one block b of the tile's rows into acc (the pass over the NR rows' blocks, prefetching their
 * linear range ahead on every pass: on the later passes over a group the lines are in cache and
 * the hint costs little) */
AI void dec_block(int kind, int NR, int NT, const uint8_t *w, size_t rb, size_t bb, const uint8_t *x, size_t xb, int b,
                  __m256 acc[4][3]) {
    const int shift = kind == G4_ACT_K_Q4_0 ? 3 : kind == G4_ACT_K_Q5_0 ? 4 : 7;   /* offset 8, 16, 128 */
    g4_prefetch_ahead(w + (size_t)b * NR * bb, (size_t)NR * bb);
    __m256i qy[3], c[3];
    __m256 dy[3];
    for (int t = 0; t < NT; t++) {
        const uint8_t *xbl = x + (size_t)t * xb + (size_t)b * G4_Q8_0_BYTES;
        qy[t] = _mm256_loadu_si256((const __m256i *)(xbl + 2));
        c[t] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                _mm256_slli_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), qy[t]), shift));
        dy[t] = _mm256_set1_ps(g4_ld_f16(xbl));
    }
    for (int r = 0; r < NR; r++) {
        const uint8_t *blk = w + (size_t)r * rb + (size_t)b * bb;
        const __m256i wu = dec_weights(kind, blk);
        const __m256 dx = _mm256_set1_ps(g4_ld_f16(blk));
        /* dx * dy as a vector product: the same float as ggml's scalar product, broadcast */
        for (int t = 0; t < NT; t++)
            acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dx, dy[t]), _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(c[t], wu, qy[t])), acc[r][t]);
    }
}

/* IQ4_NL_VEC (one activation row, ggml's ggml_vec_dot_iq4_nl_q8_0): even blocks into acc, odd
 * ones into acc2, added before the horizontal sum; an odd last block after it, its integer sum
 * times d in one scalar FMA */
AI void dec_tile(int kind, int NR, int NT, const uint8_t *w, size_t rb, size_t bb, const uint8_t *x, size_t xb, int nb,
                 float *y, int ldy) {
    const int vec = kind == G4_ACT_K_IQ4_NL_VEC;
    __m256 acc[4][3], acc2[4][3];
    for (int r = 0; r < NR; r++)
        for (int t = 0; t < NT; t++) acc[r][t] = acc2[r][t] = _mm256_setzero_ps();
    const int nbv = vec ? nb & ~1 : nb;
    if (vec)
        for (int b = 0; b < nbv; b += 2) {
            dec_block(kind, NR, NT, w, rb, bb, x, xb, b, acc);
            dec_block(kind, NR, NT, w, rb, bb, x, xb, b + 1, acc2);
        }
    else
        for (int b = 0; b < nb; b++) dec_block(kind, NR, NT, w, rb, bb, x, xb, b, acc);
    for (int r = 0; r < NR; r++)
        for (int t = 0; t < NT; t++) {
            float v = g4_hsum8(vec ? _mm256_add_ps(acc[r][t], acc2[r][t]) : acc[r][t]);
            if (vec && nbv < nb)
                v = g4_iq4_nl_tail(w + (size_t)r * rb + (size_t)nbv * bb, x + (size_t)t * xb + (size_t)nbv * G4_Q8_0_BYTES, v);
            y[(size_t)t * ldy + r] = v;
        }
}

/* T (1-6) activation rows (stride xb) x weight rows [n0, n1) through dec_tile, up to 3 rows a
 * tile (4 as 2 + 2); several rows go per group of 16 weight rows, which stays in cache while the
 * later tiles pass over it (the first reads it from DRAM, prefetching) */
AI void dec_rows(int kind, size_t bb, const uint8_t *xq, size_t xb, int T, int nb, const void *w, int n0, int n1,
                 float *y, int ldy) {
    const size_t rb = (size_t)nb * bb;
    const int G = T == 1 ? n1 - n0 : 16;
    for (int g0 = n0; g0 < n1; g0 += G) {
        const int g1 = n1 - g0 < G ? n1 : g0 + G;
        for (int t0 = 0; t0 < T;) {
            const int tn = T - t0 == 4 ? 2 : T - t0 < 3 ? T - t0 : 3;
            const uint8_t *x = xq + (size_t)t0 * xb;
            float *yt = y + (size_t)t0 * ldy;
            int n = g0;
#define DEC_ROWS_CASE(NT)                                                                                   \
    case NT:                                                                                                \
        for (; n + 4 <= g1; n += 4) dec_tile(kind, 4, NT, (const uint8_t *)w + (size_t)n * rb, rb, bb, x, xb, nb, yt + n, ldy); \
        for (; n < g1; n++) dec_tile(kind, 1, NT, (const uint8_t *)w + (size_t)n * rb, rb, bb, x, xb, nb, yt + n, ldy); \
        break;
            switch (tn) {
                DEC_ROWS_CASE(1)
                DEC_ROWS_CASE(2)
                DEC_ROWS_CASE(3)
            }
#undef DEC_ROWS_CASE
            t0 += tn;
        }
    }
}

AI void gemm(int kind, size_t bb, g4_matmul_q8_fn avx2, const void *xq, int T, int K, const void *w, int n0, int n1,
             float *y, int ldy) {
    const int nb = K / 32;
    const size_t xb = (size_t)nb * G4_Q8_0_BYTES;
    if (T <= DEC_MAX_ROWS) { dec_rows(kind, bb, xq, xb, T, nb, w, n0, n1, y, ldy); return; }
    int t16, t8;
    vnni_plan(T, 10, 6, &t16, &t8);
    uint8_t *chunks = (uint8_t *)g4_rows_scratch_avx2((size_t)SC * nb * CHUNK_BLOCK_BYTES_w16 / 4);
    if (!chunks) { avx2(xq, T, K, w, n0, n1, y, ldy); return; }   /* out of memory: the AVX2 tiles need none */
    if (t8 < T) dec_rows(kind, bb, (const uint8_t *)xq + (size_t)t8 * xb, xb, T - t8, nb, w, n0, n1, y + (size_t)t8 * ldy, ldy);
    if (t16) gemm_part_w16(kind, bb, xq, xb, t16, nb, w, n0, n1, y, ldy, chunks);
    if (t8 > t16) gemm_part_w8(kind, bb, (const uint8_t *)xq + (size_t)t16 * xb, xb, t8 - t16, nb, w, n0, n1, y + (size_t)t16 * ldy, ldy, chunks);
}

void g4_mmq_q8_0_avx512vnni(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    gemm(G4_ACT_K_Q8_0, 34, g4_mmq_q8_0_avx2, xq, T, K, w, n0, n1, y, ldy);
}
void g4_mmq_q4_0_avx512vnni(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    gemm(G4_ACT_K_Q4_0, 18, g4_mmq_q4_0_avx2, xq, T, K, w, n0, n1, y, ldy);
}
void g4_mmq_q5_0_avx512vnni(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    gemm(G4_ACT_K_Q5_0, 22, g4_mmq_q5_0_avx2, xq, T, K, w, n0, n1, y, ldy);
}

/* IQ4_NL as llama.cpp multiplies it: one activation row through ggml's dot (two accumulators),
 * more through its tinyBLAS GEMM (one accumulator, Q4_0's chain) */
void g4_mmq_iq4_nl_avx512vnni(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    if (T == 1) dec_rows(G4_ACT_K_IQ4_NL_VEC, 18, xq, (size_t)(K / 32) * G4_Q8_0_BYTES, 1, K / 32, w, n0, n1, y, ldy);
    else gemm(G4_ACT_K_IQ4_NL, 18, g4_mmq_iq4_nl_avx2, xq, T, K, w, n0, n1, y, ldy);
}

/* ---------------------------------------------------------------- K-quant decode tiles */

/* Inputs of fewer rows than a chunk (decode, a few sequences) over Q4_K / Q5_K / Q6_K, and every
 * input over Q3_K / Q2_K / IQ4_XS (which have no chunk kernel): one weight row
 * against up to KD_NT activation rows with the weights in the lanes — a 512-bit register holds 64
 * of the row's quants, the activation row's 64 bytes sit at the same positions. Per 64 weights and
 * row one vpdpbusd gives the dword sums of two 32-weight vectors (lanes 0-7 and 8-15; each ggml's
 * maddubs + madd sum of 4 products, at most 4 * 63 * 128 so it fits 16 bits) and one vpdpwssd
 * scales them by their sub-block scales (each dword's low 16 bits; the high ones zero) into the
 * row's total; the total's two halves added (exact integers) are ggml's 8-lane sumi, and the
 * float chain from there is the AVX2 tiles' (tile_k45, tile_q6_k, ...): bit-identical to them.
 * Quants that vpdpbusd cannot take as they are (signed: Q3_K's, IQ4_XS's kvalues) go in with an
 * offset that makes them unsigned, which the dots' start takes back out (offset_starts). */
enum { KD_NT = 6 };

/* a register's two vectors' lane sums added: ggml's 8 lanes (exact integers) */
AI __m256i lanes8(__m512i v) { return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)); }

/* lanes 0-7 index a, 8-15 index b (the scales of the two vectors sharing a register) */
AI __m512i pair_index(int a, int b) {
    return _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi32(a), _mm512_set1_epi32(b));
}

/* lanes 4m..4m+3 index a + m (the scales of two 16-weight halves of two vectors) */
AI __m512i quad_index(int a) {
    return _mm512_add_epi32(_mm512_set1_epi32(a), _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
}

/* 16-bit shift counts: a in the low 256 bits, b in the high ones */
AI __m512i half_counts(int a, int b) {
    return _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi16((short)a), _mm512_set1_epi16((short)b));
}

/* Q4_K / Q5_K (q5): a register holds sub-blocks 2j (low nibbles) and 2j + 1 (high), Q5_K's fifth
 * bits (bits 2j / 2j + 1 of qh) added as 16; the mins as tile_k45's (Q4_K a 4-lane fmadd, Q5_K an
 * integer sum into one scalar fmadd a block) */
AI void kdec_k45(int q5, int NT, const uint8_t *row, const g4_block_q8_K *x, int nb, int t0, float *y, int ldy) {
    const size_t bb = q5 ? 176 : 144;
    const __m512i m4 = _mm512_set1_epi8(0x0F), one = _mm512_set1_epi8(1);
    __m256 acc[KD_NT];
    __m128 acc_m[KD_NT];
    float summs[KD_NT];
    for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps(), acc_m[t] = _mm_setzero_ps(), summs[t] = 0.0f;
    for (int i = 0; i < nb; i++) {
        const uint8_t *b = row + (size_t)i * bb;
        g4_prefetch_ahead(b, bb);
        const float dw = g4_ld_f16(b), dmw = g4_ld_f16(b + 2);
        uint32_t utmp[4];   /* scales[8], mins[8] as bytes */
        g4_q4_k_scales(b + 4, utmp);
        const __m128i sm = _mm_set_epi32((int)utmp[3], (int)utmp[2], (int)utmp[1], (int)utmp[0]);
        const __m512i sc = _mm512_cvtepu8_epi32(sm);
        const __m128i mins = _mm_cvtepu8_epi16(_mm_unpackhi_epi64(sm, sm));
        const __m512i hb = q5 ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + 16))) : _mm512_setzero_si512();
        __m512i sumi[KD_NT];
        for (int t = 0; t < NT; t++) sumi[t] = _mm512_setzero_si512();
        for (int j = 0; j < 4; j++) {   /* weights 64j..64j+63: sub-blocks 2j (low nibbles), 2j + 1 */
            const __m512i bits = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + (q5 ? 48 : 16) + 32 * j)));
            __m512i q = _mm512_and_si512(_mm512_mask_srli_epi16(bits, 0xFFFF0000u, bits, 4), m4);
            if (q5) {   /* bit 2j of qh for the low half, 2j + 1 for the high one, as 16 */
                const __m512i h = _mm512_and_si512(_mm512_mask_srli_epi16(_mm512_srli_epi16(hb, 2 * j), 0xFFFF0000u,
                                                                          _mm512_srli_epi16(hb, 2 * j), 1), one);
                q = _mm512_or_si512(q, _mm512_slli_epi16(h, 4));
            }
            const __m512i s = _mm512_permutexvar_epi32(pair_index(2 * j, 2 * j + 1), sc);
            for (int t = 0; t < NT; t++) {
                const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q,
                                                      _mm512_loadu_si512(x[(size_t)(t0 + t) * nb + i].qs + 64 * j));
                sumi[t] = _mm512_dpwssd_epi32(sumi[t], p, s);
            }
        }
        for (int t = 0; t < NT; t++) {
            const g4_block_q8_K *yb = x + (size_t)(t0 + t) * nb + i;
            g4_k45_mins(q5, mins, yb, dmw, &acc_m[t], &summs[t]);
            const __m256i s8 = lanes8(sumi[t]);
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(yb->d * dw), _mm256_cvtepi32_ps(s8), acc[t]);
        }
    }
    for (int t = 0; t < NT; t++) y[(size_t)(t0 + t) * ldy] = g4_hsum8(acc[t]) + (q5 ? summs[t] : g4_hsum4(acc_m[t]));
}
AI void kdec_q4_k(int NT, const uint8_t *row, const g4_block_q8_K *x, int nb, int t0, const __m512i *yc, float *y, int ldy) {
    (void)yc;
    kdec_k45(0, NT, row, x, nb, t0, y, ldy);
}
AI void kdec_q5_k(int NT, const uint8_t *row, const g4_block_q8_K *x, int nb, int t0, const __m512i *yc, float *y, int ldy) {
    (void)yc;
    kdec_k45(1, NT, row, x, nb, t0, y, ldy);
}

/* Q6_K: a register holds quant vectors k and k + 1 of a half (64 weights, the activation's 64
 * bytes in a row), lane l of vector k scaled by sc[8j + 2k + (l >= 4)]; the -32 as tile_q6_k's */
AI void kdec_q6_k(int NT, const uint8_t *row, const g4_block_q8_K *x, int nb, int t0, const __m512i *yc, float *y, int ldy) {
    (void)yc;
    const __m512i m15 = _mm512_set1_epi8(15), lo16 = _mm512_set1_epi32(0xFFFF);
    /* vectors (k, k + 1) = (0, 1): (qh & 3) << 4, (qh & 12) << 2; (2, 3): qh & 48, (qh & 192) >> 2 */
    const __m512i hm01 = _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi8(3), _mm512_set1_epi8(12)),
                  hm23 = _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi8(48), _mm512_set1_epi8(-64)),
                  sh01 = _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi16(4), _mm512_set1_epi16(2)),
                  sh23 = _mm512_mask_blend_epi32(0xFF00, _mm512_setzero_si512(), _mm512_set1_epi16(2));
    __m256 acc[KD_NT];
    for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const uint8_t *b = row + (size_t)i * 210;
        g4_prefetch_ahead(b, 210);
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)(b + 192));
        const __m256i scales_16 = _mm256_cvtepi8_epi16(sc8);
        const __m512i sc = _mm512_and_si512(_mm512_cvtepi8_epi32(sc8), lo16);   /* signed, in 16 bits */
        __m512i sumi[KD_NT];
        __m256i s8[KD_NT];
        for (int t = 0; t < NT; t++) {
            const __m256i q8sums = _mm256_loadu_si256((const __m256i *)x[(size_t)(t0 + t) * nb + i].bsums);
            s8[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(q8sums, scales_16), 5));
            sumi[t] = _mm512_setzero_si512();
        }
        for (int j = 0; j < 2; j++) {
            const __m512i L = _mm512_loadu_si512(b + 64 * j);   /* ql of vectors k = 0 | 1 */
            const __m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + 128 + 32 * j)));
            for (int kk = 0; kk < 4; kk += 2) {
                const __m512i lo = kk ? _mm512_and_si512(_mm512_srli_epi16(L, 4), m15) : _mm512_and_si512(L, m15);
                const __m512i hi = kk ? _mm512_srlv_epi16(_mm512_and_si512(H, hm23), sh23)
                                      : _mm512_sllv_epi16(_mm512_and_si512(H, hm01), sh01);
                const __m512i q = _mm512_or_si512(lo, hi);
                const __m512i s = _mm512_permutexvar_epi32(quad_index(8 * j + 2 * kk), sc);
                for (int t = 0; t < NT; t++) {
                    const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q,
                                                          _mm512_loadu_si512(x[(size_t)(t0 + t) * nb + i].qs + 128 * j + 32 * kk));
                    sumi[t] = _mm512_dpwssd_epi32(sumi[t], p, s);
                }
            }
        }
        const float d = g4_ld_f16(b + 208);
        for (int t = 0; t < NT; t++) {
            const __m256i tot = _mm256_add_epi32(s8[t], lanes8(sumi[t]));
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(x[(size_t)(t0 + t) * nb + i].d * d), _mm256_cvtepi32_ps(tot), acc[t]);
        }
    }
    for (int t = 0; t < NT; t++) y[(size_t)(t0 + t) * ldy] = g4_hsum8(acc[t]);
}

/* Q3_K: a register holds quant vectors k and k + 1 of a half (the 2-bit parts of its 32 qs bytes,
 * the hmask bit as 4: q + 4 in 0..7, unsigned), the activation's 64 bytes in a row; the dots
 * start from yc = -4 times each dword's sum of 4 activation bytes, so each dword is ggml's 4
 * products of q (its two maddubs and subtraction); lane l of vector k is scaled by
 * sc[8j + 2k + (l >= 4)] - 32 */
AI void kdec_q3_k(int NT, const uint8_t *row, const g4_block_q8_K *x, int nb, int t0, const __m512i *yc, float *y, int ldy) {
    const __m512i m3 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4), lo16 = _mm512_set1_epi32(0xFFFF);
    __m256 acc[KD_NT];
    for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const uint8_t *b = row + (size_t)i * 110;
        g4_prefetch_ahead(b, 110);
        const __m512i sc = _mm512_and_si512(_mm512_cvtepi8_epi32(g4_q3_k_scales_m32(b + 96)), lo16);   /* signed, in 16 bits */
        const __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)b));
        __m512i sumi[KD_NT];
        for (int t = 0; t < NT; t++) sumi[t] = _mm512_setzero_si512();
        for (int j = 0; j < 2; j++) {
            const __m512i bits = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + 32 + 32 * j)));
            const __m512i b02 = _mm512_mask_srli_epi16(bits, 0xFFFF0000u, bits, 2);   /* vector k's bits at 0, k + 1's */
            for (int kk = 0; kk < 4; kk += 2) {
                const int hbit = 4 * j + kk;   /* vector k's hmask bit; k + 1's the next, each moved to bit 2 */
                const __m512i hb = hbit >= 2 ? _mm512_srlv_epi16(hm, half_counts(hbit - 2, hbit - 1))
                                             : _mm512_sllv_epi16(hm, half_counts(2 - hbit, 1 - hbit));
                const __m512i q = _mm512_ternarylogic_epi32(kk ? _mm512_srli_epi16(b02, 4) : b02, m3,
                                                            _mm512_and_si512(hb, four), 0xEA);   /* (A & B) | C */
                const __m512i s = _mm512_permutexvar_epi32(quad_index(8 * j + 2 * kk), sc);
                for (int t = 0; t < NT; t++) {
                    const size_t xi = (size_t)(t0 + t) * nb + i;
                    const __m512i p = _mm512_dpbusd_epi32(yc[xi * 4 + 2 * j + kk / 2], q, _mm512_loadu_si512(x[xi].qs + 128 * j + 32 * kk));
                    sumi[t] = _mm512_dpwssd_epi32(sumi[t], p, s);
                }
            }
        }
        const float dw = g4_ld_f16(b + 108);
        for (int t = 0; t < NT; t++) {
            const __m256i s8 = lanes8(sumi[t]);
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(x[(size_t)(t0 + t) * nb + i].d * dw), _mm256_cvtepi32_ps(s8), acc[t]);
        }
    }
    for (int t = 0; t < NT; t++) y[(size_t)(t0 + t) * ldy] = g4_hsum8(acc[t]);
}

/* Q2_K: as Q3_K's registers, the quants' 2 bits unsigned (no offset); first the mins' products
 * with the activation's 16-sums, as tile_q2_k */
AI void kdec_q2_k(int NT, const uint8_t *row, const g4_block_q8_K *x, int nb, int t0, const __m512i *yc, float *y, int ldy) {
    (void)yc;
    const __m512i m3 = _mm512_set1_epi8(3);
    __m256 acc[KD_NT];
    for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const uint8_t *b = row + (size_t)i * 84;
        g4_prefetch_ahead(b, 84);
        const __m128i ms = _mm_loadu_si128((const __m128i *)b), m4 = _mm_set1_epi8(0xF);
        const __m256i mins = _mm256_cvtepi8_epi16(_mm_and_si128(_mm_srli_epi16(ms, 4), m4));
        const __m512i sc = _mm512_cvtepu8_epi32(_mm_and_si128(ms, m4));
        const float dw = g4_ld_f16(b + 80), dmw = g4_ld_f16(b + 82);
        __m512i sumi[KD_NT];
        for (int t = 0; t < NT; t++) {
            const g4_block_q8_K *yb = x + (size_t)(t0 + t) * nb + i;
            acc[t] = g4_q2_k_mins(mins, yb, dmw, acc[t]);
            sumi[t] = _mm512_setzero_si512();
        }
        for (int j = 0; j < 2; j++) {
            const __m512i bits = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b + 16 + 32 * j)));
            for (int kk = 0; kk < 4; kk += 2) {
                const __m512i q = _mm512_and_si512(_mm512_srlv_epi16(bits, half_counts(2 * kk, 2 * kk + 2)), m3);
                const __m512i s = _mm512_permutexvar_epi32(quad_index(8 * j + 2 * kk), sc);
                for (int t = 0; t < NT; t++) {
                    const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q,
                                                          _mm512_loadu_si512(x[(size_t)(t0 + t) * nb + i].qs + 128 * j + 32 * kk));
                    sumi[t] = _mm512_dpwssd_epi32(sumi[t], p, s);
                }
            }
        }
        for (int t = 0; t < NT; t++) {
            const __m256i s8 = lanes8(sumi[t]);
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(x[(size_t)(t0 + t) * nb + i].d * dw), _mm256_cvtepi32_ps(s8), acc[t]);
        }
    }
    for (int t = 0; t < NT; t++) y[(size_t)(t0 + t) * ldy] = g4_hsum8(acc[t]);
}

/* IQ4_XS: a register holds sub-blocks ib and ib + 1 (each 16 low nibbles, then 16 high, as
 * ggml's vectors), looked up as kvalue + 128 (unsigned); the dots start from yc = -128 times each
 * dword's activation sum, so each dword is the 4 products of the kvalues (ggml's maddubs of
 * |kvalue| and the signed activation, then madd), at most 4 * 127 * 128: past 16 bits, so the
 * sub-block scales ls - 32 multiply the dwords (vpmulld) */
AI void kdec_iq4_xs(int NT, const uint8_t *row, const g4_block_q8_K *x, int nb, int t0, const __m512i *yc, float *y, int ldy) {
    const __m512i m4 = _mm512_set1_epi8(0xF),
                  kvu = _mm512_broadcast_i32x4(_mm_xor_si128(_mm_loadu_si128((const __m128i *)g4_kvalues_iq4nl), _mm_set1_epi8((char)0x80)));
    const __m512i halves = _mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3);   /* 128-bit lanes v1 v1 v2 v2 */
    __m256 acc[KD_NT];
    for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const uint8_t *b = row + (size_t)i * 136;
        g4_prefetch_ahead(b, 136);
        /* ls_ib - 32 in lane ib: the low 4 bits from scales_l (two a byte), the high 2 from scales_h */
        int32_t sl;
        memcpy(&sl, b + 4, 4);
        const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_permutevar8x32_epi32(_mm256_cvtepu8_epi32(_mm_cvtsi32_si128(sl)),
                                                                                          _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3)),
                                                              _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4)),
                                            _mm256_set1_epi32(0xF));
        const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b[2] | b[3] << 8), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                                            _mm256_set1_epi32(3));
        const __m512i sc = _mm512_castsi256_si512(_mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32)));
        __m512i sumi[KD_NT];
        for (int t = 0; t < NT; t++) sumi[t] = _mm512_setzero_si512();
        for (int ib = 0; ib < 8; ib += 2) {
            const __m512i v = _mm512_permutexvar_epi64(halves, _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(b + 8 + 16 * ib))));
            const __m512i q = _mm512_shuffle_epi8(kvu, _mm512_and_si512(_mm512_mask_srli_epi16(v, 0xFF00FF00u, v, 4), m4));
            const __m512i s = _mm512_permutexvar_epi32(pair_index(ib, ib + 1), sc);
            for (int t = 0; t < NT; t++) {
                const size_t xi = (size_t)(t0 + t) * nb + i;
                const __m512i p = _mm512_dpbusd_epi32(yc[xi * 4 + ib / 2], q, _mm512_loadu_si512(x[xi].qs + 32 * ib));
                sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(p, s));
            }
        }
        const float dw = g4_ld_f16(b);
        for (int t = 0; t < NT; t++) {
            const __m256i s8 = lanes8(sumi[t]);
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x[(size_t)(t0 + t) * nb + i].d), _mm256_cvtepi32_ps(s8), acc[t]);
        }
    }
    for (int t = 0; t < NT; t++) y[(size_t)(t0 + t) * ldy] = g4_hsum8(acc[t]);
}

/* The dots' start for the quants stored with an offset of mul (Q3_K 4, IQ4_XS 128): -mul times
 * each dword's sum of 4 activation bytes, per row t, block i and 64-byte register r at
 * yc[(t * nb + i) * 4 + r] */
static void offset_starts(const g4_block_q8_K *x, int T, int nb, int mul, __m512i *yc) {
    const __m512i m = _mm512_set1_epi8((char)mul);
    for (size_t i = 0; i < (size_t)T * nb; i++)
        for (int r = 0; r < 4; r++)
            yc[i * 4 + r] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                             _mm512_dpbusd_epi32(_mm512_setzero_si512(), m, _mm512_loadu_si512(x[i].qs + 64 * r)));
}

/* T activation rows x weight rows [n0, n1): weight rows in groups of 8 held in cache while
 * the activation rows pass over them in even chunks of at most KD_NT */
#define KDEC_CASE(TILE, NT) case NT: TILE(NT, row, xq, nb, t0, yc, y + n, ldy); break;
#define KDEC_ROWS(NAME, TILE, BB)                                                                        \
    static void NAME(const g4_block_q8_K *xq, int T, int nb, const void *w, int n0, int n1, float *y, int ldy, \
                     const __m512i *yc) {                                                                \
        const size_t rb = (size_t)nb * BB;                                                               \
        const int nch = (T + KD_NT - 1) / KD_NT;                                                         \
        for (int g0 = n0; g0 < n1; g0 += 8) {                                                            \
            const int g1 = g0 + 8 < n1 ? g0 + 8 : n1;                                                    \
            for (int c = 0, t0 = 0; c < nch; c++) {                                                      \
                const int tn = (T - t0) / (nch - c);                                                     \
                for (int n = g0; n < g1; n++) {                                                          \
                    const uint8_t *row = (const uint8_t *)w + (size_t)n * rb;                            \
                    switch (tn) {                                                                        \
                        KDEC_CASE(TILE, 1) KDEC_CASE(TILE, 2) KDEC_CASE(TILE, 3) KDEC_CASE(TILE, 4)      \
                        KDEC_CASE(TILE, 5) default: TILE(KD_NT, row, xq, nb, t0, yc, y + n, ldy); break; \
                    }                                                                                    \
                }                                                                                        \
                t0 += tn;                                                                                \
            }                                                                                            \
        }                                                                                                \
    }
KDEC_ROWS(kdec_rows_q4_k, kdec_q4_k, 144)
KDEC_ROWS(kdec_rows_q6_k, kdec_q6_k, 210)
KDEC_ROWS(kdec_rows_q5_k, kdec_q5_k, 176)
KDEC_ROWS(kdec_rows_q3_k, kdec_q3_k, 110)
KDEC_ROWS(kdec_rows_q2_k, kdec_q2_k, 84)
KDEC_ROWS(kdec_rows_iq4_xs, kdec_iq4_xs, 136)

/* The rows of an input short of a chunk over Q3_K / IQ4_XS: the decode tiles, their dots'
 * starts made once a call (the AVX2 tiles where the scratch for them is missing) */
#define KDEC_OFFSET(NAME, ROWS, MUL, AVX2)                                                              \
    static void NAME(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) { \
        const int nb = K / 256;                                                                        \
        __m512i *yc = (__m512i *)g4_rows_scratch_avx2((size_t)T * nb * 4 * 16);                        \
        if (!yc) { AVX2(xq, T, K, w, n0, n1, y, ldy); return; }                                        \
        offset_starts(xq, T, nb, MUL, yc);                                                             \
        ROWS(xq, T, nb, w, n0, n1, y, ldy, yc);                                                        \
    }
KDEC_OFFSET(kdec_q3_k_call, kdec_rows_q3_k, 4, g4_mmq_q3_k_avx2)
KDEC_OFFSET(kdec_iq4_xs_call, kdec_rows_iq4_xs, 128, g4_mmq_iq4_xs_avx2)

/* The K-quants with a chunk kernel: inputs of 12 or more rows in chunks of 16 (a last one padded),
 * the rows short of a chunk through the decode tiles (Q4_K's from 4 rows, and Q4_K's and Q6_K's 12
 * or more where the chunks' scratch is missing, through the AVX2 entry) */
typedef void (*ktile_fn)(const uint8_t *row, int nb, const uint8_t *chunk, int tn, float *y, int ldy);
static void kgemm(g4_dtype dt, const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    const int nb = K / 256, q4_k = dt == G4_DT_Q4_K;
    size_t bb;
    ktile_fn tile;
    g4_matmul_q8_fn avx2;
    int sums = 0, offset = 0;
    switch (dt) {
    case G4_DT_Q4_K: bb = 144, tile = ktile_q4_k, avx2 = g4_mmq_q4_k_avx2, sums = 1; break;
    case G4_DT_Q5_K: bb = 176, tile = ktile_q5_k, avx2 = g4_mmq_q5_k_avx2, sums = 1; break;
    case G4_DT_Q3_K: bb = 110, tile = ktile_q3_k, avx2 = g4_mmq_q3_k_avx2, offset = 1; break;
    case G4_DT_IQ4_XS: bb = 136, tile = ktile_iq4_xs, avx2 = g4_mmq_iq4_xs_avx2, offset = 1; break;
    default: bb = 210, tile = ktile_q6_k, avx2 = g4_mmq_q6_k_avx2; break;
    }
    int tv;
    /* no 8-row chunks over the K-quants; Q3_K's and IQ4_XS's chunks, whose quants take more to
     * prepare, only whole (12 rows: 0.66-0.72 against 0.59-0.65 ms on the decode tiles; 16: 0.67-0.74
     * against 0.81-0.86) */
    vnni_plan(T, offset ? TC : 12, 0, &tv, NULL);
    const size_t chunk_bytes = (size_t)KSC * nb * KCHUNK_BLOCK_BYTES;
    const int t_dec = tv && g4_rows_scratch_avx2(chunk_bytes / 4) ? tv : 0;
    if (t_dec < T) {
        const g4_block_q8_K *xr = (const g4_block_q8_K *)xq + (size_t)t_dec * nb;
        float *yr = y + (size_t)t_dec * ldy;
        const int tr = T - t_dec;
        /* Q4_K from 4 rows: the AVX2 GEMM tiles, whose per-row work a block (the mins, the scales)
         * is gathered once a call, ran faster than these (one core: 0.20 against 0.24-0.27 ms at 4
         * rows of [2048 x 1536]) */
        switch (dt) {
        case G4_DT_Q5_K: kdec_rows_q5_k(xr, tr, nb, w, n0, n1, yr, ldy, NULL); break;
        case G4_DT_Q3_K: kdec_q3_k_call(xr, tr, K, w, n0, n1, yr, ldy); break;
        case G4_DT_IQ4_XS: kdec_iq4_xs_call(xr, tr, K, w, n0, n1, yr, ldy); break;
        default:
            if (tr >= 12 || (q4_k && tr >= 4)) avx2(xr, tr, K, w, n0, n1, yr, ldy);
            else if (q4_k) kdec_rows_q4_k(xr, tr, nb, w, n0, n1, yr, ldy, NULL);
            else kdec_rows_q6_k(xr, tr, nb, w, n0, n1, yr, ldy, NULL);
        }
    }
    if (!t_dec) return;
    /* asked again: the decode tiles' starts may have taken the scratch over */
    uint8_t *chunks = (uint8_t *)g4_rows_scratch_avx2(chunk_bytes / 4);
    if (!chunks) {   /* out of memory: the AVX2 tiles need no scratch */
        avx2(xq, t_dec, K, w, n0, n1, y, ldy);
        return;
    }
    T = t_dec;
    const size_t rb = (size_t)nb * bb, cs = (size_t)nb * KCHUNK_BLOCK_BYTES;
    for (int t0 = 0; t0 < T; t0 += KSC * TC) {
        const int sn = T - t0 < KSC * TC ? T - t0 : KSC * TC, nc = (sn + TC - 1) / TC;
        for (int ci = 0; ci < nc; ci++) {
            const int tn = sn - ci * TC < TC ? sn - ci * TC : TC;
            kchunk_build((const g4_block_q8_K *)xq + (size_t)(t0 + ci * TC) * nb, nb, tn, sums, offset, chunks + ci * cs);
        }
        for (int g0 = n0; g0 < n1; g0 += RG) {
            const int g1 = g0 + RG < n1 ? g0 + RG : n1;
            for (int ci = 0; ci < nc; ci++) {
                const int tn = sn - ci * TC < TC ? sn - ci * TC : TC;
                for (int n = g0; n < g1; n++)
                    tile((const uint8_t *)w + (size_t)n * rb, nb, chunks + ci * cs, tn, y + (size_t)(t0 + ci * TC) * ldy + n, ldy);
            }
        }
    }
}

void g4_mmq_q4_k_avx512vnni(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    kgemm(G4_DT_Q4_K, xq, T, K, w, n0, n1, y, ldy);
}
void g4_mmq_q6_k_avx512vnni(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    kgemm(G4_DT_Q6_K, xq, T, K, w, n0, n1, y, ldy);
}
void g4_mmq_q5_k_avx512vnni(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    kgemm(G4_DT_Q5_K, xq, T, K, w, n0, n1, y, ldy);
}
void g4_mmq_q3_k_avx512vnni(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    kgemm(G4_DT_Q3_K, xq, T, K, w, n0, n1, y, ldy);
}
void g4_mmq_iq4_xs_avx512vnni(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    kgemm(G4_DT_IQ4_XS, xq, T, K, w, n0, n1, y, ldy);
}

/* Q2_K: every input on the decode tiles */
void g4_mmq_q2_k_avx512vnni(const void *xq, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    kdec_rows_q2_k(xq, T, K / 256, w, n0, n1, y, ldy, NULL);
}


