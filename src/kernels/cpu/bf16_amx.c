/* bf16_amx.c — --prefill-bf16's matmul (and the exact mode's, on three bf16 planes) on AMX-BF16
 * tiles, in two kernels: the weights as B tiles packed per call (below), and for short inputs the
 * weights as A tiles straight from memory (matmul_amx_pairs, further down).
 * The first: per 32 activation rows x 32 weight
 * rows, four 16 x 16 fp32 C tiles accumulate tdpbf16ps of two A tiles (16 rows x 32 bf16 of the
 * activations, 1 KB each in the input's tile layout, kernels.h g4_xbf16_tile_offset) and two B
 * tiles (16 pairs x 16 columns of the pair-interleaved weight panel, bf16_pack.h).
 * K runs in a few long blocks (equal, at most KC_MAX = 4096 deep): the C tiles are stored and
 * reloaded once per block, so longer blocks store and reload them less often, which outweighs
 * a 1024-deep panel (64 KB) no longer fitting L1 (chosen by measurement, see docs/benchmarking.md). While a block is multiplied the next block's
 * weight rows are prefetched into L2 (the pack otherwise waits on DRAM). A 32 x 32 block that is not whole (the last rows of T, the last columns of [n0, n1))
 * goes through a small staging buffer, so nothing outside y's rows and columns is read or
 * written. Compiled for AMX here only; the dispatcher calls it after checking the CPU and
 * obtaining the kernel's permission to use tile data. */
#ifndef G4_BF16_EMULATED   /* tests/c/test_bf16_matmul.c builds this file on emulated intrinsics */
#pragma GCC target("avx512f,avx512bw,avx512vl,amx-tile,amx-bf16")
#include <immintrin.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/bf16_pack.h"
#include "kernels/kernels.h"

/* ldtilecfg's 64-byte operand, palette 1: tiles 0-3 C, 4-5 A, 6-7 B, each 16 rows x 64 bytes */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* Palette 1 with the A tiles (4, 5) and their C tiles (0-1: A 4, 2-3: A 5) ra and rb rows */
static void load_tile_config_rows(int ra, int rb) {
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) { cfg.colsb[i] = 64; cfg.rows[i] = 16; }
    cfg.rows[0] = cfg.rows[1] = cfg.rows[4] = (uint8_t)ra;
    cfg.rows[2] = cfg.rows[3] = cfg.rows[5] = (uint8_t)rb;
    _tile_loadconfig(&cfg);
}

/* Palette 1, all eight tiles 16 rows x 64 bytes (tiles 0-3 C, 4-5 A, 6-7 B) */
static inline void load_tile_config(void) { load_tile_config_rows(16, 16); }

/* C tiles 0-3 (rows r, r + 16 x columns c, c + 16 of a 32 x 32 block) from / to memory of row
 * stride ld floats. */
static inline void c_load(const float *c, int ld) {
    const size_t s = (size_t)ld * sizeof(float);
    _tile_loadd(0, c, s);
    _tile_loadd(1, c + 16, s);
    _tile_loadd(2, c + 16 * (size_t)ld, s);
    _tile_loadd(3, c + 16 * (size_t)ld + 16, s);
}
static inline void c_store(float *c, int ld) {
    const size_t s = (size_t)ld * sizeof(float);
    _tile_stored(0, c, s);
    _tile_stored(1, c + 16, s);
    _tile_stored(2, c + 16 * (size_t)ld, s);
    _tile_stored(3, c + 16 * (size_t)ld + 16, s);
}

/* The next (panel, K block)'s weight rows, prefetched into L2 a few lines per 32-deep step */
typedef struct {
    const uint16_t *w;   /* first element of the block's first row */
    int K, rows, lines_per_row, total, done;
} block_prefetch;

static void prefetch_plan(block_prefetch *pf, const uint16_t *W, int K, int n, int n1, int k0, int kcmax) {
    *pf = (block_prefetch){0};
    if (n >= n1 || k0 >= K) return;
    const int kend = k0 + kcmax < K ? k0 + kcmax : K;
    pf->w = W + (size_t)n * K + k0;
    pf->K = K;
    pf->rows = n1 - n < G4_BF16_NR ? n1 - n : G4_BF16_NR;
    pf->lines_per_row = ((kend - k0) * 2 + 63) / 64 + 1;   /* + 1: rows need not start on a line */
    pf->total = pf->rows * pf->lines_per_row;
}

/* lines [done, upto) of the plan */
static inline void prefetch_upto(block_prefetch *pf, int upto) {
    for (; pf->done < upto && pf->done < pf->total; pf->done++) {
        const int r = pf->done / pf->lines_per_row, l = pf->done % pf->lines_per_row;
        /* a prefetch never faults: the spare line past a row's end needs no bound */
        _mm_prefetch((const char *)(pf->w + (size_t)r * pf->K) + 64 * l, _MM_HINT_T1);
    }
}

enum { KC_MAX = 4096 };   /* the panel buffer: KC_MAX x 32 bf16 = 256 KB of stack */

/* The K block: Kp split into equal blocks (multiples of 32) of at most KC_MAX */
static int k_block(int Kp) {
    const int blocks = (Kp + KC_MAX - 1) / KC_MAX;
    return ((Kp + blocks - 1) / blocks + 31) & ~31;
}

/* nterms (1 or 3, a constant at each call site) input planes `plane` elements apart, each
 * multiplied by every B tile pair while it is loaded */
static inline __attribute__((always_inline)) void matmul_amx(const uint16_t *xb, size_t plane, int nterms, int T,
                                                             int K, const void *w, int n0, int n1, float *y, int ldy) {
    const uint16_t *W = w;
    const int Kp = (K + 31) & ~31, kcmax = k_block(Kp);
    load_tile_config();
    _Alignas(64) uint16_t panel[KC_MAX * G4_BF16_NR];
    _Alignas(64) float stage[32 * 32];
    for (int n = n0; n < n1; n += G4_BF16_NR) {
        const int cols = n1 - n < G4_BF16_NR ? n1 - n : G4_BF16_NR;
        for (int k0 = 0; k0 < Kp; k0 += kcmax) {
            const int kc = Kp - k0 < kcmax ? Kp - k0 : kcmax;
            g4_bf16_pack_panel(W, K, n, cols, k0, kc, panel);
            block_prefetch pf;   /* the next block: this panel's next K block, else the next panel's first */
            if (k0 + kc < Kp) prefetch_plan(&pf, W, K, n, n1, k0 + kc, kcmax);
            else prefetch_plan(&pf, W, K, n + G4_BF16_NR, n1, 0, kcmax);
            const int steps = (T + 31) / 32 * (kc / 32);
            int step = 0;
            for (int t = 0; t < T; t += 32) {
                const int rows = T - t < 32 ? T - t : 32;
                const int whole = rows == 32 && cols == 32;
                float *yb = y + (size_t)t * ldy + n;
                if (k0 == 0) {
                    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
                } else if (whole) {
                    c_load(yb, ldy);
                } else {
                    memset(stage, 0, sizeof stage);
                    for (int r = 0; r < rows; r++) memcpy(stage + 32 * r, yb + (size_t)r * ldy, (size_t)cols * sizeof(float));
                    c_load(stage, 32);
                }
                /* A tiles: rows t and t + 16 at column k0 + kk, 1 KB apart per step along K */
                const uint16_t *a0 = xb + g4_xbf16_tile_offset(t, k0, Kp), *a1 = xb + g4_xbf16_tile_offset(t + 16, k0, Kp);
                for (int kk = 0; kk < kc; kk += 32) {
                    prefetch_upto(&pf, (int)(((long)++step * pf.total + steps - 1) / steps));
                    _tile_loadd(6, panel + (size_t)kk * G4_BF16_NR, 2 * G4_BF16_NR * sizeof(uint16_t));
                    _tile_loadd(7, panel + (size_t)kk * G4_BF16_NR + 32, 2 * G4_BF16_NR * sizeof(uint16_t));
                    for (int j = 0; j < nterms; j++) {
                        _tile_loadd(4, a0 + j * plane + kk * 16, 64);
                        _tile_loadd(5, a1 + j * plane + kk * 16, 64);
                        _tile_dpbf16ps(0, 4, 6);
                        _tile_dpbf16ps(1, 4, 7);
                        _tile_dpbf16ps(2, 5, 6);
                        _tile_dpbf16ps(3, 5, 7);
                    }
                }
                if (whole) {
                    c_store(yb, ldy);
                } else {
                    c_store(stage, 32);
                    for (int r = 0; r < rows; r++) memcpy(yb + (size_t)r * ldy, stage + 32 * r, (size_t)cols * sizeof(float));
                }
            }
        }
    }
    _tile_release();
}

void g4_matmul_xbf16_amx(const uint16_t *xb, int ldx, int T, int K, const void *w, int n0, int n1, float *y,
                         int ldy) {
    (void)ldx;   /* the tile layout's row length is Kp */
    matmul_amx(xb, 0, 1, T, K, w, n0, n1, y, ldy);
}

/* The exact GEMM: three planes (kernels.h g4_xbf16_put_row_split3), hi, mid and lo of each tile
 * against the B tiles loaded once */
void g4_matmul_x3bf16_amx(const uint16_t *xs, size_t plane, int T, int K, const void *w, int n0, int n1, float *y,
                          int ldy) {
    matmul_amx(xs, plane, 3, T, K, w, n0, n1, y, ldy);
}

/* ---- the weights as the A operand, for short inputs (matmul.h pairs_max_rows): the kernel above
 * transposes every 32-row weight panel into B tiles on every call, which at T = 64 costs about
 * what the panel's products do. Here the weight rows are A tiles loaded straight from W (16 rows x
 * 64 B, a row of W apart), the input comes as B tiles of token pairs (the pair layout, written by
 * the rounding / split pass), and each C tile holds 16 weight rows x 16 tokens, transposed into y
 * at the end: K runs whole, nothing is packed and no C tile is reloaded. While the first 32 tokens
 * are multiplied, each weight row's line PF_STEPS steps ahead is prefetched into L1 (the rows are
 * 32 streams a row apart, more than the hardware prefetcher follows). Without the per-call
 * transpose, short inputs run faster here than through the packing kernel. A weight block
 * past n1 (rows < 32) shapes its tiles to the rows it has; a K that is not a multiple of 32 takes
 * its last columns from a zero-padded copy, so nothing past a row is read. */
enum { PF_STEPS = 4 };

/* y[t0 + j][n + r] = C[r][j] for the 16 x 16 tile c (weight rows r < nr, tokens j < nt) */
static void store_transposed(const float *c, int nr, int nt, float *y, int ldy) {
    __m512i v[16];
    for (int r = 0; r < 16; r++) v[r] = _mm512_loadu_si512(c + 16 * r);
    g4_bf16_transpose16(v);   /* a 32-bit element transpose: works on floats as well */
    /* a masked store, not a memcpy call per 64 bytes (a call per row would show in a short prefill) */
    const __mmask16 keep = (__mmask16)((1u << nr) - 1u);
    for (int j = 0; j < nt; j++) _mm512_mask_storeu_ps(y + (size_t)j * ldy, keep, _mm512_castsi512_ps(v[j]));
}

static inline __attribute__((always_inline)) void matmul_amx_pairs(const uint16_t *xb, size_t plane, int nterms, int T,
                                                                   int K, const void *w, int n0, int n1, float *y,
                                                                   int ldy) {
    const uint16_t *W = w;
    const int Kp = (K + 31) & ~31, Kf = K & ~31, Tp = (T + 31) & ~31;
    const size_t ws = (size_t)K * sizeof(uint16_t);
    _Alignas(64) uint16_t tail[32 * 32];   /* the weight block's last K % 32 columns, zero-padded */
    _Alignas(64) float stage[4][16 * 16];
    load_tile_config();
    for (int n = n0; n < n1; n += 32) {
        const int rows = n1 - n < 32 ? n1 - n : 32, ra = rows < 16 ? rows : 16, rb = rows - ra;
        if (rows < 32) load_tile_config_rows(ra, rb ? rb : 1);   /* the last block only */
        const uint16_t *w0 = W + (size_t)n * K, *w1 = w0 + (size_t)16 * K;
        if (Kf < K) {
            memset(tail, 0, sizeof tail);
            for (int r = 0; r < rows; r++) memcpy(tail + 32 * r, w0 + (size_t)r * K + Kf, (size_t)(K - Kf) * sizeof *tail);
        }
        /* rows of this block (then of the next one) PF_STEPS steps ahead; a prefetch never faults */
        const int next_rows = n1 - n - 32 < 32 ? n1 - n - 32 : 32;
        for (int t = 0; t < Tp; t += 32) {
            _tile_zero(0); _tile_zero(1);
            if (rb) { _tile_zero(2); _tile_zero(3); }
            const uint16_t *b0 = xb + g4_xbf16_pair_offset(t, 0, Kp), *b1 = xb + g4_xbf16_pair_offset(t + 16, 0, Kp);
            for (int k = 0; k < Kp; k += 32) {
                if (t == 0) {
                    const int kf = k + 32 * PF_STEPS;
                    if (kf < Kp) {
                        for (int r = 0; r < rows; r++) _mm_prefetch((const char *)(w0 + (size_t)r * K + kf), _MM_HINT_T0);
                    } else {
                        for (int r = 0; r < next_rows; r++)
                            _mm_prefetch((const char *)(w0 + (size_t)(32 + r) * K + (kf - Kp)), _MM_HINT_T0);
                    }
                }
                if (k < Kf) {
                    _tile_loadd(4, w0 + k, ws);
                    if (rb) _tile_loadd(5, w1 + k, ws);
                } else {
                    _tile_loadd(4, tail, 64);
                    if (rb) _tile_loadd(5, tail + 16 * 32, 64);
                }
                for (int j = 0; j < nterms; j++) {
                    _tile_loadd(6, b0 + j * plane + (size_t)k * 16, 64);
                    _tile_loadd(7, b1 + j * plane + (size_t)k * 16, 64);
                    _tile_dpbf16ps(0, 4, 6);
                    _tile_dpbf16ps(1, 4, 7);
                    if (rb) {
                        _tile_dpbf16ps(2, 5, 6);
                        _tile_dpbf16ps(3, 5, 7);
                    }
                }
            }
            /* C tile (i, j): weight rows 16 i.., tokens t + 16 j.. */
            _tile_stored(0, stage[0], 64);
            _tile_stored(1, stage[1], 64);
            if (rb) { _tile_stored(2, stage[2], 64); _tile_stored(3, stage[3], 64); }
            for (int i = 0; i < (rb ? 2 : 1); i++)
                for (int j = 0; j < 2; j++) {
                    const int t0 = t + 16 * j, nt = T - t0 < 16 ? T - t0 : 16;
                    if (nt > 0) store_transposed(stage[2 * i + j], i ? rb : ra, nt, y + (size_t)t0 * ldy + n + 16 * i, ldy);
                }
        }
        if (rows < 32) load_tile_config();
    }
    _tile_release();
}

void g4_matmul_xbf16_amx_pairs(const uint16_t *xb, int ldx, int T, int K, const void *w, int n0, int n1, float *y,
                               int ldy) {
    (void)ldx;   /* the pair layout's row length is Kp */
    matmul_amx_pairs(xb, 0, 1, T, K, w, n0, n1, y, ldy);
}

/* The exact GEMM (three planes in the pair layout), each weight tile against hi, mid and lo */
void g4_matmul_x3bf16_amx_pairs(const uint16_t *xs, size_t plane, int T, int K, const void *w, int n0, int n1,
                                float *y, int ldy) {
    matmul_amx_pairs(xs, plane, 3, T, K, w, n0, n1, y, ldy);
}

/* The AMX-BF16 peak for gemma4c bench (src/bench/roofline.c): `iters` x 4 tdpbf16ps into four
 * independent C tiles from A and B tiles loaded once, register-only like the fp32 peak's FMA
 * chains; each tdpbf16ps is 16 x 16 x 32 multiply-adds. Returns an element of the sum so that the
 * work cannot be dropped. The caller's process must have tile permission (dispatch.c). */
float g4_amx_peak_chain(int iters, float seed) {
    load_tile_config();
    _Alignas(64) uint16_t ab[16 * 32];
    const uint16_t v = g4_f32_to_bf16(1e-3f * seed);
    for (int i = 0; i < 16 * 32; i++) ab[i] = v;
    _tile_loadd(4, ab, 64);
    _tile_loadd(5, ab, 64);
    _tile_loadd(6, ab, 64);
    _tile_loadd(7, ab, 64);
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    for (int i = 0; i < iters; i++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _Alignas(64) float c[4][16 * 16];
    _tile_stored(0, c[0], 64);
    _tile_stored(1, c[1], 64);
    _tile_stored(2, c[2], 64);
    _tile_stored(3, c[3], 64);
    _tile_release();
    return c[0][0] + c[1][17] + c[2][34] + c[3][255];
}

/* ---- decode: the exact matmul of T <= G4_GEMV_X3_MAX_ROWS input rows (kernels.h
 * g4_xbf16_gemv3_offset): several slots' decode tokens at once. The FMA kernels multiply every
 * 64-byte line of weights by each row (the GEMV up to 3 rows, then the packed GEMM, which streams
 * the weights at half the bandwidth); here a tile load takes 16 lines of 16 weight rows and one
 * tdpbf16ps multiplies them by all three planes of every input row (the B tile), so a line costs
 * 1/16 of a tile load and of a tile product whatever T is, and several slots decode together in
 * about the time of one. One row too over rows under 8 KB (kernels.h G4_GEMV_ONE_ROW_K_BELOW):
 * the tiles keep that stream at the read bandwidth, where the FMA GEMV falls a little short, and
 * so with another core streaming memory beside it. Up to
 * 15 rows: a B tile per 5 (kernels.h g4_xbf16_gemv3_offset). Weight rows in blocks of 16 (one A
 * tile; blocks of 32, two A tiles, are slower in one-slot steps): while a block is
 * multiplied the next one is prefetched into L2 in memory order, per 32-column step its share,
 * and each row's line GEMV_PF_STEPS steps ahead into L1 (more streams a row apart than the
 * hardware prefetcher follows). A short last block shapes its tiles to its rows. */
enum { GEMV_PF_STEPS = 4 };

/* tiles 0..nb-1 C (ra rows x 3 tc fp32), 3 A (ra rows x 32 bf16), 4..3+nb B (16 x 3 tc pairs) */
static void gemv3_config(int tc, int nb, int ra) {
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int b = 0; b < nb; b++) {
        cfg.rows[b] = (uint8_t)ra;
        cfg.colsb[b] = (uint16_t)(12 * tc);
        cfg.rows[4 + b] = 16;
        cfg.colsb[4 + b] = (uint16_t)(12 * tc);
    }
    cfg.rows[3] = (uint8_t)ra;
    cfg.colsb[3] = 64;
    _tile_loadconfig(&cfg);
}

void g4_matmul_gemv3_amx(const uint32_t *xg, int T, int K, const void *w, int n0, int n1, float *y, int ldy) {
    const uint16_t *W = w;
    const size_t ws = (size_t)K * sizeof(uint16_t);
    const int tc = g4_gemv3_tile_rows(T), nb = g4_gemv3_tiles(T), cols = 3 * tc;
    const long bs = 4L * cols;                         /* B tile row bytes */
    const size_t step = (size_t)nb * 16 * cols;        /* 32-bit words of xg per 32 columns */
    _Alignas(64) float c[3][16 * 16];
    gemv3_config(tc, nb, 16);
    for (int n = n0; n < n1; n += 16) {
        const int rows = n1 - n < 16 ? n1 - n : 16;
        if (rows < 16) gemv3_config(tc, nb, rows);   /* the last block only */
        const uint16_t *w0 = W + (size_t)n * K;
        const int next_rows = n1 - n - rows < 16 ? n1 - n - rows : 16;
        const char *next = (const char *)(w0 + (size_t)rows * K);
        const size_t next_len = (size_t)next_rows * ws;
        _tile_zero(0);
        if (nb > 1) _tile_zero(1);
        if (nb > 2) _tile_zero(2);
        for (int k = 0; k < K; k += 32) {
            const size_t off = (size_t)(k >> 5) * 1024;   /* the next block's share: 1 KB a step */
            for (size_t l = off; l < off + 1024 && l < next_len; l += 64) _mm_prefetch(next + l, _MM_HINT_T1);
            const int kf = k + 32 * GEMV_PF_STEPS;
            if (kf < K) {
                for (int r = 0; r < rows; r++) _mm_prefetch((const char *)(w0 + (size_t)r * K + kf), _MM_HINT_T0);
            } else {
                for (int r = 0; r < next_rows; r++)
                    _mm_prefetch((const char *)(w0 + (size_t)(rows + r) * K + (kf - K)), _MM_HINT_T0);
            }
            const uint32_t *xb = xg + (size_t)(k >> 5) * step;
            _tile_loadd(3, w0 + k, (long)ws);
            _tile_loadd(4, xb, bs);
            _tile_dpbf16ps(0, 3, 4);
            if (nb > 1) {
                _tile_loadd(5, xb + 16 * cols, bs);
                _tile_dpbf16ps(1, 3, 5);
            }
            if (nb > 2) {
                _tile_loadd(6, xb + 32 * cols, bs);
                _tile_dpbf16ps(2, 3, 6);
            }
        }
        _tile_stored(0, c[0], 64);
        if (nb > 1) _tile_stored(1, c[1], 64);
        if (nb > 2) _tile_stored(2, c[2], 64);
        for (int t = 0; t < T; t++) {
            const float *ct = c[t / G4_GEMV_X3_TILE_ROWS] + 3 * (t % G4_GEMV_X3_TILE_ROWS);
            for (int r = 0; r < rows; r++)   /* hi + (mid + lo): the small terms first */
                y[(size_t)t * ldy + n + r] = ct[16 * r] + (ct[16 * r + 1] + ct[16 * r + 2]);
        }
    }
    _tile_release();
}
