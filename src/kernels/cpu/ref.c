/* ref.c — the scalar reference implementation of every kernel in kernels.h: plain C loops in
 * float32, the ground truth the vectorized paths are tested against. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/quant.h"
#include "kernels/kernels.h"

/* g4_f32_to_bf16 over a row, vectorized: --prefill-bf16 rounds every layer matmul's input (~3.4 M
 * values per layer of a 256-row chunk of the bench model), where one call per value would be a
 * serial share of the prefill that grows with the core count. */
void g4_f32_to_bf16_row(const float *x, int n, uint16_t *out) {
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        out[i] = g4_bf16_bits(u);
    }
}

/* 32 consecutive columns [k, k + 32) of row t into the tile or pair layout */
static void put_piece(const uint16_t piece[32], int t, int k, int Kp, g4_xbf16_layout layout, uint16_t *xb) {
    if (layout == G4_XBF16_TILES) {
        memcpy(xb + g4_xbf16_tile_offset(t, k, Kp), piece, 32 * sizeof *piece);
        return;
    }
    uint16_t *dst = xb + g4_xbf16_pair_offset(t, k, Kp);   /* pair p at 32 p */
    for (int p = 0; p < 16; p++) memcpy(dst + 32 * p, piece + 2 * p, 2 * sizeof *piece);
}

void g4_xbf16_put_row(const float *x, int n, int t, int Kp, int ld, g4_xbf16_layout layout, uint16_t *xb) {
    if (layout == G4_XBF16_ROWS) {
        uint16_t *row = xb + (size_t)t * ld;
        g4_f32_to_bf16_row(x, n, row);
        memset(row + n, 0, (size_t)(Kp - n) * sizeof *row);
        return;
    }
    for (int k = 0; k < Kp; k += 32) {   /* the row's 32 columns in each tile of its band */
        uint16_t piece[32];
        const int m = n - k >= 32 ? 32 : n - k > 0 ? n - k : 0;
        g4_f32_to_bf16_row(x + k, m, piece);
        memset(piece + m, 0, (size_t)(32 - m) * sizeof *piece);
        put_piece(piece, t, k, Kp, layout, xb);
    }
}

/* x[0, 32) (m of them, zeros after) as hi, mid, lo (kernels.h g4_xbf16_put_row_split3) */
static void split3_piece(const float *x, int m, uint16_t piece[3][32]) {
    for (int i = 0; i < 32; i++) {   /* branch-free, so it vectorizes */
        const float v = i < m ? x[i] : 0.0f;
        uint32_t u;
        memcpy(&u, &v, sizeof u);
        const uint16_t hi = g4_bf16_bits(u);
        const float r1 = v - g4_bf16_to_f32(hi);   /* exact: the bits of v below hi's */
        memcpy(&u, &r1, sizeof u);
        const uint16_t mid = g4_bf16_bits(u);
        const float r2 = r1 - g4_bf16_to_f32(mid);   /* exact, and at most 8 significant bits */
        memcpy(&u, &r2, sizeof u);
        piece[0][i] = hi;
        piece[1][i] = mid;
        piece[2][i] = g4_bf16_bits(u);
    }
}

void g4_xbf16_put_row_split3(const float *x, int n, int t, int Kp, size_t plane, g4_xbf16_layout layout,
                             uint16_t *xs) {
    for (int k = 0; k < Kp; k += 32) {   /* the row's 32 columns in each tile of its band */
        uint16_t piece[3][32];
        const int m = n - k >= 32 ? 32 : n - k > 0 ? n - k : 0;
        split3_piece(x + (m ? k : 0), m, piece);
        for (int j = 0; j < 3; j++) put_piece(piece[j], t, k, Kp, layout, xs + j * plane);
    }
}

void g4_xbf16_put_gemv3(const float *x, int ldx, int T, int K, uint32_t *xg) {
    const int rows = g4_gemv3_tiles(T) * g4_gemv3_tile_rows(T);   /* with the last tile's padding */
    for (int t = 0; t < rows; t++)
        for (int k = 0; k < K; k += 32) {
            uint16_t piece[3][32];
            split3_piece(t < T ? x + (size_t)t * ldx + k : x, t < T ? 32 : 0, piece);
            for (int j = 0; j < 3; j++)
                for (int p = 0; p < 16; p++)
                    xg[g4_xbf16_gemv3_offset(t, j, k + 2 * p, T)] = piece[j][2 * p] | (uint32_t)piece[j][2 * p + 1] << 16;
        }
}

/* x rounded to bf16 and widened back (exactly representable floats), n values */
void g4_round_bf16_row(const float *x, int n, float *out) {
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        out[i] = g4_bf16_to_f32(g4_bf16_bits(u));
    }
}

void g4_to_f32(g4_dtype dt, const void *src, size_t n, float *dst) {
    if (g4_dtype_is_quant(dt)) { g4_dequant_row(dt, src, (int64_t)n, dst); return; }
    const uint16_t *h = src;
    for (size_t i = 0; i < n; i++)
        dst[i] = dt == G4_DT_F32 ? ((const float *)src)[i]
               : dt == G4_DT_BF16 ? g4_bf16_to_f32(h[i]) : g4_f16_to_f32(h[i]);
}

#define REF_MATMUL(NAME, TYPE, WIDEN)                                                         \
    static void NAME(const float *x, int T, int K, const void *w, int n0, int n1, float *y,  \
                     int ldy) {                                                               \
        const TYPE *W = w;                                                                    \
        for (int t = 0; t < T; t++)                                                           \
            for (int n = n0; n < n1; n++) {                                                   \
                const TYPE *wr = W + (size_t)n * K;                                           \
                const float *xr = x + (size_t)t * K;                                          \
                float acc = 0.0f;                                                             \
                for (int k = 0; k < K; k++) acc += xr[k] * WIDEN(wr[k]);                      \
                y[(size_t)t * ldy + n] = acc;                                                 \
            }                                                                                 \
    }
#define WIDEN_F32(v) (v)
REF_MATMUL(matmul_f32, float, WIDEN_F32)
REF_MATMUL(matmul_f16, uint16_t, g4_f16_to_f32)
REF_MATMUL(matmul_bf16, uint16_t, g4_bf16_to_f32)

static float dot(const float *a, const float *b, int n) {
    float acc = 0.0f;
    for (int i = 0; i < n; i++) acc += a[i] * b[i];
    return acc;
}

static void axpy(float a, const float *x, float *y, int n) {
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

/* Mirrors Gemma4UnifiedRMSNorm: x * pow(mean(x^2) + eps, -0.5) * w, in float32. The sum of
 * squares is accumulated in double so long rows stay close to torch's pairwise reduction. */
static void rmsnorm(const float *x, const float *w, float eps, int n, float *y) {
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float r = powf((float)(ss / n) + eps, -0.5f);
    for (int i = 0; i < n; i++) y[i] = w ? x[i] * r * w[i] : x[i] * r;
}

/* gelu_pytorch_tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
static void gelu_mul(const float *g, const float *u, int n, float *y) {
    const float c = 0.7978845608028654f;
    for (int i = 0; i < n; i++) {
        float x = g[i];
        y[i] = 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x))) * u[i];
    }
}

/* Softmax in float32 after subtracting the max, as torch's softmax does; masked positions
 * (outside [lo, hi]) are simply not visited, which equals adding -inf before the softmax. */
void g4_attend_generic(const float *q, const float *K, const float *V, int cap, int lo, int hi,
                       int D, float scale, float *scores, float *out,
                       float (*dotf)(const float *, const float *, int),
                       void (*axpyf)(float, const float *, float *, int)) {
    float mx = -INFINITY;
    for (int t = lo; t <= hi; t++) {
        float s = dotf(q, K + (size_t)(t % cap) * D, D) * scale;
        scores[t - lo] = s;
        if (s > mx) mx = s;
    }
    float sum = 0.0f;
    for (int t = 0; t <= hi - lo; t++) { scores[t] = expf(scores[t] - mx); sum += scores[t]; }
    memset(out, 0, (size_t)D * sizeof(float));
    for (int t = lo; t <= hi; t++) axpyf(scores[t - lo] / sum, V + (size_t)(t % cap) * D, out, D);
}

static void attend(const float *q, const float *K, const float *V, int cap, int lo, int hi, int D,
                   float scale, float *scores, float *out) {
    g4_attend_generic(q, K, V, cap, lo, hi, D, scale, scores, out, dot, axpy);
}

/* The reference block: attend row by row (K and V re-read for every row). */
static void attend_block(const float *q, int ldq, float *out, int ldo, int G, int P, const int *lo,
                         const int *hi, const float *K, const float *V, int cap, int D, float scale,
                         float *scores, int batched) {
    (void)batched;
    for (int p = 0; p < P; p++)
        for (int h = 0; h < G; h++)
            attend(q + (size_t)p * ldq + (size_t)h * D, K, V, cap, lo[p], hi[p], D, scale, scores,
                   out + (size_t)p * ldo + (size_t)h * D);
}

static const g4_kernels scalar_table = {
    .name = "scalar",
    .matmul = {matmul_f32, matmul_f16, matmul_bf16, G4_QUANT_MATMULS_REF},
    .matmul_q8 = {G4_QUANT_MATMULS_Q8_REF},
    .quantize_act = g4_act_quantize,
    .dot = dot,
    .axpy = axpy,
    .rmsnorm = rmsnorm,
    .gelu_mul = gelu_mul,
    .attend = attend,
    .attend_block = attend_block,
    .attend_kv = g4_attend_kv_ref,
    .attend_ftz = 1,
    .rope_table = g4_rope_table_exact,
    .rope_apply = g4_rope_apply,
};

const g4_kernels *g4_kernels_scalar(void) { return &scalar_table; }
