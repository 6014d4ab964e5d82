/* avx512.c — the exact prefill GEMM on AVX-512F: the same products and fp32 accumulation as the
 * AVX2 GEMM, twice the lanes per FMA (on cores with two 512-bit FMA units, e.g. Intel Xeon
 * since Skylake-SP, twice the FLOP/s). Weights are widened to fp32 once per 16-row panel (bf16
 * by pack16_bf16 below, f32 / f16 by the AVX2 path's packers, pack_avx2.h, block-quantized ones by
 * quant_panel_avx512.c, exactly as ggml dequantizes them); two panels side by side
 * make 32 weight rows, and a 14 x 32 microkernel broadcasts one activation per row against the
 * two panel vectors: 2 loads + 14 broadcasts feed 28 FMAs into 28 zmm accumulators.
 * Decode-sized batches (T < 4; but one row over bf16 rows under 8 KB: gemv_bf16 below), K not a
 * multiple of 8 and the last < 16 rows of a range go to the AVX2 kernels.
 * tests/c/test_avx512_matmul.c compiles this file on emulated intrinsics, so that its results are
 * checked on hosts without AVX-512 too. */
#ifndef G4_AVX512_EMULATED
#pragma GCC target("avx512f,avx2,fma,f16c")
#include <immintrin.h>
#endif

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/pack_avx2.h"
#include "kernels/cpu/quant.h"   /* G4_PF_BYTES */
#include "kernels/kernels.h"

/* KC and MC can be set at compile time (-DG4_AVX512_KC=256) to time variants with
 * bench/gemm_bench on an AVX-512 machine (bench/device_prep.sh builds some) */
#ifndef G4_AVX512_KC
#define G4_AVX512_KC 512
#endif
#ifndef G4_AVX512_MC
#define G4_AVX512_MC 266
#endif
enum { MR = G4_AVX512_XMR, NR = 16, KC = G4_AVX512_KC, MC = G4_AVX512_MC };   /* MC: a multiple of MR */

/* M blocks: g4_gemm_mblock(T, MC, MR), equal blocks of at most MC rows; T <= 266 is one block.
 * Every M block packs every weight panel once more, so long blocks pack less: MC = 266 (19 micro
 * blocks of 14 rows) keeps a 256-row prefill chunk in one block (chosen by measurement, see
 * docs/benchmarking.md). */

/* 16 bf16 weight rows (row stride K elements), columns [k0, k0 + kc) -> a float32 panel[kc][16] in
 * row order: per 32 columns, one 64-byte load per row, a 16 x 16 transpose of the 32-bit column
 * pairs (4 shuffle stages), then the even column of each pair is a shift and the odd one a mask.
 * About half the shuffles per element of the AVX2 packer, and no even/odd lane order for the
 * microkernel to undo. Columns past the last multiple of 32 are widened one by one. */
static void pack16_bf16(const void *wv, int K, int k0, int kc, float *panel) {
    const uint16_t *w = wv;
    const __m512i hi_mask = _mm512_set1_epi32((int)0xFFFF0000u);
    int kk = 0;
    for (; kk + 32 <= kc; kk += 32) {
        __m512i r[16], a[16], b[16];
        for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_si512(w + (size_t)i * K + k0 + kk);
        for (int i = 0; i < 8; i++) {   /* per 128-bit lane L: rows 2i, 2i+1 at columns 4L..4L+3 */
            a[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
            a[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
        }
        for (int i = 0; i < 4; i++) {   /* b[4i + c], lane L: rows 4i..4i+3 at column 4L + c */
            b[4 * i + 0] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
            b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
            b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
            b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
        }
        for (int c = 0; c < 4; c++) {   /* a 4 x 4 transpose of 128-bit lanes: column 4L + c, rows 0..15 */
            const __m512i p0 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0x44), p1 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0xEE);
            const __m512i p2 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0x44);
            const __m512i p3 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0xEE);
            const __m512i y[4] = {_mm512_shuffle_i32x4(p0, p2, 0x88), _mm512_shuffle_i32x4(p0, p2, 0xDD),
                                  _mm512_shuffle_i32x4(p1, p3, 0x88), _mm512_shuffle_i32x4(p1, p3, 0xDD)};
            for (int L = 0; L < 4; L++) {   /* column pair j = 4L + c: columns 2j (low half), 2j + 1 */
                float *d = panel + (size_t)(kk + 2 * (4 * L + c)) * NR;
                _mm512_store_ps(d, _mm512_castsi512_ps(_mm512_slli_epi32(y[L], 16)));
                _mm512_store_ps(d + NR, _mm512_castsi512_ps(_mm512_and_si512(y[L], hi_mask)));
            }
        }
    }
    for (; kk < kc; kk++)
        for (int i = 0; i < 16; i++) {
            const uint32_t u = (uint32_t)w[(size_t)i * K + k0 + kk] << 16;
            memcpy(panel + (size_t)kk * NR + i, &u, sizeof u);
        }
}

/* C[mr][np*16] (+)= A · [panel 0 | panel 1], A an activation micro-panel packed k-major
 * (xa[k * MR + i] = row i, column k0 + k; pack_rows): every broadcast comes from one sequential
 * stream, where rows of X at their own stride (K floats: 6144 B at K = 1536) share a few L1 sets
 * and are evicted by the weight panel streaming through. Rows of C at stride ldy; mr and np are
 * compile-time constants at every call site (micro_rows' switch). */
static inline __attribute__((always_inline)) void micro(const float *xa, int kc, const float *p0, const float *p1,
                                                        float *y, int ldy, int mr, int np, int accumulate) {
    __m512 c[MR][2];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < 2; j++) {
            c[i][j] = _mm512_setzero_ps();
            if (i < mr && j < np && accumulate) c[i][j] = _mm512_loadu_ps(y + (size_t)i * ldy + NR * j);
        }
    for (int k = 0; k < kc; k++) {
        const __m512 b0 = _mm512_load_ps(p0 + (size_t)k * NR);
        const __m512 b1 = np > 1 ? _mm512_load_ps(p1 + (size_t)k * NR) : b0;
        for (int i = 0; i < MR; i++) {
            if (i >= mr) break;
            const __m512 a = _mm512_set1_ps(xa[(size_t)k * MR + i]);
            c[i][0] = _mm512_fmadd_ps(a, b0, c[i][0]);
            if (np > 1) c[i][1] = _mm512_fmadd_ps(a, b1, c[i][1]);
        }
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < np; j++)
            _mm512_storeu_ps(y + (size_t)i * ldy + NR * j, c[i][j]);
}

#define MICRO_CASE(R)                                                                         \
    case R:                                                                                   \
        if (np == 2) micro(xa, kc, p0, p1, y, ldy, R, 2, accumulate);                        \
        else micro(xa, kc, p0, p1, y, ldy, R, 1, accumulate);                                \
        break;

static void micro_any(const float *xa, int kc, const float *p0, const float *p1, float *y, int ldy, int mr, int np,
                      int accumulate) {
    switch (mr) {
        MICRO_CASE(14) MICRO_CASE(13) MICRO_CASE(12) MICRO_CASE(11) MICRO_CASE(10) MICRO_CASE(9) MICRO_CASE(8)
        MICRO_CASE(7) MICRO_CASE(6) MICRO_CASE(5) MICRO_CASE(4) MICRO_CASE(3) MICRO_CASE(2) MICRO_CASE(1)
    default: break;
    }
}

/* All T activation rows against one pair of panels, MR rows at a time, prefetching the next
 * pack's weight rows (`pf`: rows of pf_bytes at pf_stride, from DRAM) a few rows per block, as
 * the AVX2 GEMM does (issued all at once they left the pack waiting on DRAM). */
static void micro_rows(const float *xp, size_t xp_stride, int T, int kc, const float *p0, const float *p1, int np,
                       float *y, int ldy, int accumulate, const char *pf, size_t pf_stride, int pf_rows,
                       int pf_bytes) {
    const int nb = (T + MR - 1) / MR;
    for (int t = 0, b = 0; t < T; t += MR, b++) {
        if (pf)
            for (int r = b * pf_rows / nb; r < (b + 1) * pf_rows / nb; r++)
                for (int l = 0; l < pf_bytes; l += 64) _mm_prefetch(pf + r * pf_stride + l, _MM_HINT_T0);
        const int mr = T - t < MR ? T - t : MR;
        micro_any(xp + (size_t)b * xp_stride, kc, p0, p1, y + (size_t)t * ldy, ldy, mr, np, accumulate);
    }
}

/* Micro-panels b0..b1-1 of X[0:T][k0:k0+kc], MR rows each, k-major, `stride` floats apart
 * (xp[b * stride + k * MR + i] = X[b * MR + i][k0 + k]); the last panel's rows past T are left as
 * they are (micro reads only its mr rows). The GEMM packs one (M block, K block) at a time into the
 * thread's buffer; g4_pack_x_avx512 whole K for every task of a matmul. */
static void pack_rows(const float *x, int T, int K, int k0, int kc, size_t stride, int b0, int b1, float *xp) {
    for (int b = b0; b < b1 && b * MR < T; b++) {
        float *d = xp + (size_t)b * stride;
        const int mr = T - b * MR < MR ? T - b * MR : MR;
        for (int i = 0; i < mr; i++) {
            const float *s = x + (size_t)(b * MR + i) * K + k0;
            for (int k = 0; k < kc; k++) d[(size_t)k * MR + i] = s[k];
        }
    }
}

/* Each thread's packed activation block, (MC / MR + 1) micro-panels of KC x MR floats (~560 KB,
 * in L2 beside the weight panels): allocated on the thread's first prefill GEMM (never in decode:
 * T < 4 goes to the AVX2 kernels), freed when the thread exits. */
static pthread_key_t xpack_key;
static pthread_once_t xpack_once = PTHREAD_ONCE_INIT;
static void xpack_key_init(void) { (void)pthread_key_create(&xpack_key, free); }
static float *thread_xpack(void) {
    (void)pthread_once(&xpack_once, xpack_key_init);
    float *p = pthread_getspecific(xpack_key);
    if (!p && (p = aligned_alloc(64, sizeof(float) * (size_t)(MC / MR + 1) * MR * KC)) != NULL &&
        pthread_setspecific(xpack_key, p) != 0) {
        free(p);
        p = NULL;
    }
    return p;
}

/* ---- decode (T = 1) over bf16 weights of rows under 8 KB on 512-bit loads: each load is one
 * 64-byte line of a row (32 weights), split into its even and odd columns by a shift and a mask
 * against x split the same way once per call, 2 FMA chains per row; rows in 16-row super blocks
 * as the AVX2 kernel takes them (avx2.c gemv_bf16_eo: rows j, j+4, j+8, j+12 together, so each of
 * the 4 streams runs through 4 consecutive rows). Half the loads and shifts of the AVX2 kernel
 * per weight byte; on longer rows (o, down, in 4-row blocks with prefetch) this kernel is slower
 * than AVX2's, so those stay there.
 * While a super block is read, the next one (16 rows further) is prefetched into L2, 256 bytes a
 * step, so its 4 streams start warm and short rows (q/k/v, gate/up, LM head) stream at the read
 * bandwidth (into L1 instead gains nothing). */
enum { GEMV_ROW_BYTES = 8192, GEMV_MAX_K = GEMV_ROW_BYTES / 2 };

/* next: with pf_on 0, bytes of the next super block to prefetch into L2 (256 a step), or NULL */
static inline __attribute__((always_inline)) void gemv_block(const float *xs, int K, const uint16_t *w, size_t rs,
                                                            float *y, int ys, int pf_on, const char *next) {
    const __m512i hi = _mm512_set1_epi32((int)0xFFFF0000u);
    const char *pf = (const char *)w + G4_PF_BYTES;
    __m512 acc[4][2];
    for (int i = 0; i < 4; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int k = 0; k < K; k += 32) {
        if (pf_on)   /* the block's next 256 bytes, G4_PF_BYTES on (as avx2.c for short rows) */
            for (int l = 0; l < 256; l += 64) _mm_prefetch(pf + (size_t)k * 8 + l, _MM_HINT_T0);
        else if (next)   /* a hint: past the matrix's end it never faults */
            for (int l = 0; l < 256; l += 64) _mm_prefetch(next + (size_t)k * 8 + l, _MM_HINT_T2);
        const __m512 xe = _mm512_load_ps(xs + k), xo = _mm512_load_ps(xs + k + 16);
        for (int i = 0; i < 4; i++) {
            const __m512i v = _mm512_loadu_si512(w + i * rs + k);
            acc[i][0] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(v, 16)), xe, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(v, hi)), xo, acc[i][1]);
        }
    }
    for (int i = 0; i < 4; i++) y[i * ys] = _mm512_reduce_add_ps(_mm512_add_ps(acc[i][0], acc[i][1]));
}

/* y[n0, n1) = W[n0, n1) x for one activation row; K a multiple of 32, below GEMV_MAX_K */
static void gemv_bf16(const float *x, int K, const uint16_t *W, int n0, int n1, float *y) {
    float xs[GEMV_MAX_K] __attribute__((aligned(64)));
    for (int k = 0; k < K; k += 32)   /* per 32 columns: the 16 even ones, then the 16 odd */
        for (int i = 0; i < 16; i++) {
            xs[k + i] = x[k + 2 * i];
            xs[k + 16 + i] = x[k + 2 * i + 1];
        }
    int n = n0;
    for (; n + 16 <= n1; n += 16) {
        const char *next = (const char *)(W + (size_t)(n + 16) * K);   /* pass j: its j-th quarter */
        for (int j = 0; j < 4; j++)
            gemv_block(xs, K, W + (size_t)(n + j) * K, (size_t)4 * K, y + n + j, 4, 0, next + (size_t)j * K * 8);
    }
    for (; n + 4 <= n1; n += 4) gemv_block(xs, K, W + (size_t)n * K, (size_t)K, y + n, 1, 1, NULL);
    if (n < n1) g4_kernels_avx2()->matmul[G4_DT_BF16](x, 1, K, W, n, n1, y, 0);
}

/* ---- row-invariant multi-row decode over bf16 weights (kernels.h matmul_rows): every (weight
 * row, activation row) pair summed exactly as gemv_bf16 above sums one row (16-lane even and odd
 * chains over the columns in order, reduced together), two weight rows at a time against up to
 * ROWS_TG activation rows, a 4-row block kept in L1/L2 while every group passes over it (the
 * weights are read from DRAM once), so a
 * row's result does not depend on how many rows share the step (slots decoding together, a
 * speculative verify). Shapes gemv_bf16 does not take go to avx2.c's multi-row kernel in the
 * one-row order they have there (rows of 8 KB and more: the eo GEMV). */
enum { ROWS_TG = 6 };   /* 2 weight rows x 6 activation rows x even/odd: 24 accumulators */

/* weight rows w and w + K (NW = 2, or w alone) against TG activation rows of xs (stride K): each
 * loaded x vector feeds both weight rows, so the loop is bound by the FMAs, not the loads. The
 * first group of a block prefetches the weights G4_PF_BYTES ahead (the block's rows are
 * consecutive, so linearly) into L2, not L1: 32 KB ahead is a whole L1 on many cores, and there the
 * prefetched lines evicted the block's (2-2.5x slower at 2-4 rows on such a core); later groups
 * find them in L1/L2. */
static inline __attribute__((always_inline)) void rows_pass(const float *xs, int TG, int NW, int K, const uint16_t *w,
                                                           float *y, int ldy, int pf) {
    const __m512i hi = _mm512_set1_epi32((int)0xFFFF0000u);
    __m512 ae[2][ROWS_TG], ao[2][ROWS_TG];
    for (int r = 0; r < NW; r++)
        for (int t = 0; t < TG; t++) ae[r][t] = ao[r][t] = _mm512_setzero_ps();
    for (int k = 0; k < K; k += 32) {
        __m512 we[2], wo[2];
        for (int r = 0; r < NW; r++) {
            if (pf) _mm_prefetch((const char *)(w + (size_t)r * K + k) + G4_PF_BYTES, _MM_HINT_T1);
            const __m512i v = _mm512_loadu_si512(w + (size_t)r * K + k);
            we[r] = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
            wo[r] = _mm512_castsi512_ps(_mm512_and_si512(v, hi));
        }
        for (int t = 0; t < TG; t++) {
            const __m512 xe = _mm512_load_ps(xs + (size_t)t * K + k), xo = _mm512_load_ps(xs + (size_t)t * K + k + 16);
            for (int r = 0; r < NW; r++) {
                ae[r][t] = _mm512_fmadd_ps(we[r], xe, ae[r][t]);
                ao[r][t] = _mm512_fmadd_ps(wo[r], xo, ao[r][t]);
            }
        }
    }
    for (int r = 0; r < NW; r++)
        for (int t = 0; t < TG; t++) y[(size_t)t * ldy + r] = _mm512_reduce_add_ps(_mm512_add_ps(ae[r][t], ao[r][t]));
}

#define ROWS_CASE(G) \
    case G: rows_pass(xs, G, 2, K, w, y, ldy, pf); break;
/* weight rows w, w + K against TG <= ROWS_TG activation rows; results to y[t * ldy + 0..1] */
static void rows_group(const float *xs, int TG, int K, const uint16_t *w, float *y, int ldy, int pf) {
    switch (TG) {   /* compile-time TG: the accumulators stay in registers */
        ROWS_CASE(6) ROWS_CASE(5) ROWS_CASE(4) ROWS_CASE(3) ROWS_CASE(2)
    default: rows_pass(xs, 1, 2, K, w, y, ldy, pf); break;
    }
}

void g4_matmul_rows_bf16_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    const uint16_t *W = w;
    float *xs = K % 32 == 0 && K < GEMV_MAX_K ? g4_rows_scratch_avx2((size_t)T * K) : NULL;
    if (!xs) {   /* gemv_bf16 does not take these (or no scratch): avx2.c's order, as T = 1 has it */
        g4_rows_bf16_eo_avx2(x, T, K, W, n0, n1, y, ldy, g4_matmul_bf16_avx512);
        return;
    }
    for (int t = 0; t < T; t++)   /* gemv_bf16's split: per 32 columns the 16 even, then the 16 odd */
        for (int k = 0; k < K; k += 32)
            for (int i = 0; i < 16; i++) {
                xs[(size_t)t * K + k + i] = x[(size_t)t * K + k + 2 * i];
                xs[(size_t)t * K + k + 16 + i] = x[(size_t)t * K + k + 2 * i + 1];
            }
    const int main_end = n0 + (n1 - n0) / 4 * 4;   /* gemv_bf16's last (n1 - n0) % 4 rows: AVX2 */
    for (int n = n0; n < main_end; n += 4)
        for (int t0 = 0, g = (T + (T + ROWS_TG - 1) / ROWS_TG - 1) / ((T + ROWS_TG - 1) / ROWS_TG); t0 < T; t0 += g) {
            const int tg = T - t0 < g ? T - t0 : g;   /* groups as even as can be: 7 rows as 4 + 3 */
            for (int i = 0; i < 4; i += 2)
                rows_group(xs + (size_t)t0 * K, tg, K, W + (size_t)(n + i) * K, y + (size_t)t0 * ldy + n + i, ldy, !t0);
        }
    for (int t = 0; main_end < n1 && t < T; t++)
        g4_matmul_bf16_avx512(x + (size_t)t * K, 1, K, W, main_end, n1, y + (size_t)t * ldy, ldy);
}

/* K blocks outside the panel loop so X[m0:m0+MC][k0:k0+KC] stays in L2 while every panel pair
 * of the range is packed (once) and multiplied against it (as avx2.c's GEMM_IMPL does).
 * The activations come packed for the whole K (xp, from g4_pack_x_avx512; x is still read by the
 * AVX2 GEMM for a range's last < 16 rows), else as rows, packed here one (M block, K block) at a
 * time into the thread's buffer. */
static void gemm(g4_dtype dt, const float *x, const float *xp, int T, int K, const void *w, int n0, int n1, float *y,
                 int ldy) {
    const g4_kernels *avx2 = g4_kernels_avx2();
    if (!xp && T == 1 && dt == G4_DT_BF16 && K % 32 == 0 && K < GEMV_MAX_K) {   /* rows under 8 KB */
        gemv_bf16(x, K, w, n0, n1, y);
        return;
    }
    if (!xp && T < 4 && dt == G4_DT_BF16 && (size_t)K * 2 >= GEMV_ROW_BYTES) {   /* long rows: o, down */
        g4_gemv_bf16_rowpf_avx2(x, T, K, w, n0, n1, y, ldy);
        return;
    }
    if (!xp && (T < 4 || K % 8)) {
        avx2->matmul[dt](x, T, K, w, n0, n1, y, ldy);
        return;
    }
    float *xbuf = xp ? NULL : thread_xpack();
    if (!xp && !xbuf) {   /* out of memory: the AVX2 GEMM needs no buffer */
        avx2->matmul[dt](x, T, K, w, n0, n1, y, ldy);
        return;
    }
    /* quantized weights: 16 rows' blocks dequantized into the panel (quant.h g4_quant_panel16_avx512;
     * KC is a multiple of every block size) */
    const int quant = g4_dtype_is_quant(dt);
    const size_t row = g4_dtype_row_bytes(dt, K);
    g4_pack16_fn pack = dt == G4_DT_F32 ? g4_pack16_f32_avx2 : dt == G4_DT_F16 ? g4_pack16_f16_avx2 : pack16_bf16;
    float panel[2][KC * NR] __attribute__((aligned(64)));
    const char *W = w;
    const int nfull = n0 + (n1 - n0) / NR * NR;
    const int MB = g4_gemm_mblock(T, MC, MR);
    for (int m0 = 0; m0 < T; m0 += MB) {
        const int mc = T - m0 < MB ? T - m0 : MB;
        float *ym = y + (size_t)m0 * ldy;
        for (int k0 = 0; k0 < K; k0 += KC) {
            const int kc = K - k0 < KC ? K - k0 : KC;
            const float *xb = xp ? xp + ((size_t)(m0 / MR) * K + k0) * MR : xbuf;
            const size_t xb_stride = xp ? (size_t)K * MR : (size_t)KC * MR;
            if (!xp) pack_rows(x + (size_t)m0 * K, mc, K, k0, kc, xb_stride, 0, (mc + MR - 1) / MR, xbuf);
            for (int n = n0; n < nfull;) {
                const int np = nfull - n >= 2 * NR ? 2 : 1;
                /* the next pack in loop order: the next panels, else the next K block's first */
                const int nn = n + np * NR < nfull ? n + np * NR : n0;
                const int nk = n + np * NR < nfull ? k0 : k0 + KC;
                const int nkc = K - nk < KC ? K - nk : KC;
                for (int p = 0; p < np; p++) {
                    const char *wp = W + (size_t)(n + p * NR) * row;
                    if (quant) g4_quant_panel16_avx512(dt, wp, row, k0, kc, panel[p]);
                    else pack(wp, K, k0, kc, panel[p]);
                }
                micro_rows(xb, xb_stride, mc, kc, panel[0], panel[1], np, ym + n, ldy, k0 > 0,
                           nk < K ? W + (size_t)nn * row + g4_dtype_row_bytes(dt, nk) : NULL, row, 2 * NR,
                           (int)g4_dtype_row_bytes(dt, nkc));
                n += np * NR;
            }
        }
    }
    if (nfull < n1) avx2->matmul[dt](x, T, K, w, nfull, n1, y, ldy);   /* the last < 16 rows */
}

void g4_matmul_f32_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    gemm(G4_DT_F32, x, NULL, T, K, w, n0, n1, y, ldy);
}
void g4_matmul_f16_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    gemm(G4_DT_F16, x, NULL, T, K, w, n0, n1, y, ldy);
}
void g4_matmul_bf16_avx512(const float *x, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    gemm(G4_DT_BF16, x, NULL, T, K, w, n0, n1, y, ldy);
}

/* kernels.h pack_x: panels b0..b1-1 over the whole K */
void g4_pack_x_avx512(const float *x, int T, int K, int b0, int b1, float *xp) {
    pack_rows(x, T, K, 0, K, (size_t)K * MR, b0, b1, xp);
}

void g4_matmul_xp_f32_avx512(const float *x, const float *xp, int T, int K, const void *w, int n0, int n1, float *y,
                             int ldy) {
    gemm(G4_DT_F32, x, xp, T, K, w, n0, n1, y, ldy);
}
void g4_matmul_xp_f16_avx512(const float *x, const float *xp, int T, int K, const void *w, int n0, int n1, float *y,
                             int ldy) {
    gemm(G4_DT_F16, x, xp, T, K, w, n0, n1, y, ldy);
}
void g4_matmul_xp_bf16_avx512(const float *x, const float *xp, int T, int K, const void *w, int n0, int n1, float *y,
                              int ldy) {
    gemm(G4_DT_BF16, x, xp, T, K, w, n0, n1, y, ldy);
}

/* Quantized weights on packed input: prefill chunks of more rows than the row-invariant decode
 * kernels take (matmul.h G4_ROWS_MAX_ROWS); the same panels and per-output FMA order (k ascending
 * from 0, one chain) as the AVX2 quantized GEMM, so the same bits, at twice the lanes per FMA */
#define XP_QUANT(NAME, DT)                                                                                \
    void NAME(const float *x, const float *xp, int T, int K, const void *w, int n0, int n1, float *y, int ldy) { \
        gemm(DT, x, xp, T, K, w, n0, n1, y, ldy);                                                         \
    }
XP_QUANT(g4_matmul_xp_q8_0_avx512, G4_DT_Q8_0)
XP_QUANT(g4_matmul_xp_q4_0_avx512, G4_DT_Q4_0)
XP_QUANT(g4_matmul_xp_q5_0_avx512, G4_DT_Q5_0)
XP_QUANT(g4_matmul_xp_q4_k_avx512, G4_DT_Q4_K)
XP_QUANT(g4_matmul_xp_q6_k_avx512, G4_DT_Q6_K)
XP_QUANT(g4_matmul_xp_q5_k_avx512, G4_DT_Q5_K)
XP_QUANT(g4_matmul_xp_iq4_xs_avx512, G4_DT_IQ4_XS)
XP_QUANT(g4_matmul_xp_q3_k_avx512, G4_DT_Q3_K)
XP_QUANT(g4_matmul_xp_q2_k_avx512, G4_DT_Q2_K)
XP_QUANT(g4_matmul_xp_iq4_nl_avx512, G4_DT_IQ4_NL)
XP_QUANT(g4_matmul_xp_q4_1_avx512, G4_DT_Q4_1)
XP_QUANT(g4_matmul_xp_q5_1_avx512, G4_DT_Q5_1)
