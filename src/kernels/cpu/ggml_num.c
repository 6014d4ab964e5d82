/* ggml_num.c — `--numerics ggml`: the float ops of llama.cpp's CPU backend (ggml, x86 AVX2 + FMA
 * build) for the Gemma 4 graph, statement for statement in scalar C, so that gemma4c computes the
 * same float32 values llama.cpp does (the int8 matmuls are --act-q8's, quant_act*.c). Each function
 * names the ggml function it mirrors; where ggml's compiler contracts a*b+c into an FMA (GCC,
 * -march=native, GNU dialect: -ffp-contract=fast) we call fmaf, elsewhere we keep the separate
 * roundings (this file is built as ISO C11, so the compiler contracts nothing here).
 * Not for speed: every function is plain scalar C. The default exact mode never calls these. */
#include <math.h>
#include <string.h>

#include "base/half.h"
#include "kernels/kernels.h"

/* ggml_compute_forward_rms_norm_f32 then the separate GGML_OP_MUL by the weight (the fused
 * rms_norm_mul computes the same x * scale * w): squares rounded to float, summed in double;
 * mean rounded to float; scale = 1.0f / sqrtf(mean + eps). */
void g4_ggml_rmsnorm(const float *x, const float *w, float eps, int n, float *y) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int i = 0; i < n; i++) y[i] = w ? (x[i] * scale) * w[i] : x[i] * scale;
}

/* ggml_gelu_f32 as ggml-cpu.c's table initialisation compiles it (disassembled at d32676d7:
 * 1 + GELU_COEF_A*x*x contracted into one FMA), rounded to fp16: entry h of ggml_table_gelu_f16. */
uint16_t g4_ggml_gelu_f16(uint16_t h) {
    const float x = g4_f16_to_f32(h);
    const float inner = fmaf(0.044715f * x, x, 1.0f);
    const float v = (0.5f * x) * (1.0f + tanhf((0.79788456080286535587989211986876f * x) * inner));
    return g4_f32_to_f16(v);
}

/* ggml_vec_geglu_f32 under GGML_GELU_FP16 (x86): x <= -10 → 0, x >= 10 → x*g, else the gelu of x
 * rounded to fp16, looked up in the fp16 table (computed here per element instead), times g. */
void g4_ggml_gelu_mul(const float *g, const float *u, int n, float *y) {
    for (int i = 0; i < n; i++) {
        const float x = g[i];
        if (x <= -10.0f) y[i] = 0.0f;
        else if (x >= 10.0f) y[i] = x * u[i];
        else y[i] = g4_f16_to_f32(g4_ggml_gelu_f16(g4_f32_to_f16(x))) * u[i];
    }
}

/* The 8-lane horizontal sums: hsum_sse (tinyBLAS hsum, ggml_vec_soft_max_f32's reduction):
 * ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)); hadd (GGML_F32x8_REDUCE): ((l0+l4)+(l1+l5)) + ((l2+l6)+(l3+l7)). */
static inline float hsum_sse(const float *l) {
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}
static inline float hsum_hadd(const float *l) {
    return ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
}

/* ggml_vec_dot_f32, AVX2 (GGML_F32_STEP 32, 4 accumulators of 8 lanes, FMA), then the leftovers as
 * GCC compiled them (disassembled at d32676d7): groups of 8, then of 4, products rounded and added
 * in order; the last 1-3 with an FMA. */
float g4_ggml_vec_dot_f32(int n, const float *x, const float *y) {
    const int np = n & ~31;
    float acc[4][8] = {{0}};
    for (int i = 0; i < np; i += 32)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 8; l++) acc[j][l] = fmaf(x[i + 8 * j + l], y[i + 8 * j + l], acc[j][l]);
    float s[8];
    for (int l = 0; l < 8; l++) s[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    float sum = hsum_hadd(s);
    int i = np;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) sum += x[i + l] * y[i + l];
    for (; i + 4 <= n; i += 4)
        for (int l = 0; l < 4; l++) sum += x[i + l] * y[i + l];
    for (; i < n; i++) sum = fmaf(x[i], y[i], sum);
    return sum;
}

/* One lane of ggml_v_expf (AVX2 + FMA), ggml_vec_soft_max_f32's exp. */
float g4_ggml_expf(float x) {
    union fu { float f; uint32_t u; };
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    union fu zu = {z}, one = {1.0f};
    const uint32_t e = zu.u << 23;
    union fu k = {.u = e + one.u};
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                         0x1.ffffecp-1f * b);
    if (!(fabsf(n) > 126.0f)) return fmaf(j, k.f, k.f);
    const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
    union fu s1 = {.u = g + 0x7f000000u}, s2 = {.u = e - g};
    if (fabsf(n) > 192.0f) return s1.f * s1.f;
    return fmaf(s2.f, j, s2.f) * s1.f;
}

/* One query row of llama.cpp's attention without flash attention (llm_graph_context::build_attn_mha,
 * f32 KV cache): kq = mul_mat(K, q) — ggml_vec_dot_f32 over D per key; soft_max_ext (scale, -inf
 * mask, max, ggml_vec_soft_max_f32: v_expf in 8-lane blocks, each block's hsum added in double,
 * then × (float)(1/sum)); kqv = mul_mat(Vᵀ, kq) over the keys — tinyBLAS (llamafile_sgemm: one
 * 8-lane FMA accumulator, hsum) when the batch has >= 2 tokens, ggml_vec_dot_f32 for a single token.
 * llama.cpp keeps position t in KV cell t (a fresh sequence that fits its cache), so lanes follow
 * the absolute position t; masked cells contribute exact zeros and are skipped. */
static void attend_row(const float *q, const float *K, const float *V, int cap, int lo, int hi, int D,
                       float scale, int batched, float *p, float *out) {
    float mx = -INFINITY;
    for (int t = lo; t <= hi; t++) {
        const float s = g4_ggml_vec_dot_f32(D, K + (size_t)(t % cap) * D, q) * scale;
        p[t - lo] = s;
        mx = s > mx ? s : mx;
    }
    double sum = 0.0;
    for (int b0 = lo & ~7; b0 <= hi; b0 += 8) {
        float l[8];
        for (int i = 0; i < 8; i++) {
            const int t = b0 + i;
            l[i] = t < lo || t > hi ? 0.0f : (p[t - lo] = g4_ggml_expf(p[t - lo] - mx));
        }
        sum += (double)hsum_sse(l);
    }
    const float inv = (float)(1.0 / sum);
    for (int t = lo; t <= hi; t++) p[t - lo] *= inv;
    if (batched) {   /* tinyBLAS<8, __m256>: lane t % 8, one accumulator, hsum */
        float acc[8][D];
        memset(acc, 0, sizeof acc);
        for (int t = lo; t <= hi; t++) {
            const float *v = V + (size_t)(t % cap) * D, pt = p[t - lo];
            for (int d = 0; d < D; d++) acc[t & 7][d] = fmaf(v[d], pt, acc[t & 7][d]);
        }
        for (int d = 0; d < D; d++) {
            float l[8];
            for (int i = 0; i < 8; i++) l[i] = acc[i][d];
            out[d] = hsum_sse(l);
        }
    } else {         /* ggml_vec_dot_f32 over the (multiple of 32) cells: accumulator (t/8)%4, lane t%8 */
        float acc[32][D];
        memset(acc, 0, sizeof acc);
        for (int t = lo; t <= hi; t++) {
            const float *v = V + (size_t)(t % cap) * D, pt = p[t - lo];
            for (int d = 0; d < D; d++) acc[t & 31][d] = fmaf(v[d], pt, acc[t & 31][d]);
        }
        for (int d = 0; d < D; d++) {
            float l[8];
            for (int i = 0; i < 8; i++) l[i] = (acc[i][d] + acc[16 + i][d]) + (acc[8 + i][d] + acc[24 + i][d]);
            out[d] = hsum_hadd(l);
        }
    }
}

void g4_ggml_attend_block(const float *q, int ldq, float *out, int ldo, int G, int P, const int *lo,
                          const int *hi, const float *K, const float *V, int cap, int D, float scale,
                          float *scores, int batched) {
    for (int r = 0; r < P; r++)
        for (int h = 0; h < G; h++)
            attend_row(q + (size_t)r * ldq + (size_t)h * D, K, V, cap, lo[r], hi[r], D, scale, batched, scores,
                       out + (size_t)r * ldo + (size_t)h * D);
}

/* ggml_scale(1/cap) → ggml_tanh (tanhf) → ggml_scale(cap): llama.cpp's final logit softcap. */
void g4_ggml_softcap(float *logits, int n, float cap) {
    const float inv = 1.0f / cap;
    for (int i = 0; i < n; i++) logits[i] = tanhf(logits[i] * inv) * cap;
}
