/* quantize.c — float32 encoders for `gemma4c pack` (see quantize.h). Each quantizer follows
 * ggml's quantize_row_*_ref statement by statement, in the same float operations and order,
 * because the point is bit-identical blocks (so a pack equals what ggml / gguf-py would write). */
#include "convert/quantize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "kernels/kernels.h"

static void put_f16(uint8_t *p, float f) { g4_put_16le(p, g4_f32_to_f16(f)); }


/* quantize_row_q8_0_ref: d = amax/127, q = roundf(x/d); block = f16 d, int8 q[32] */
static void q8_0(const float *x, int64_t nb, uint8_t *y) {
    for (int64_t i = 0; i < nb; i++, x += 32, y += 34) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        put_f16(y, d);
        for (int j = 0; j < 32; j++) y[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
    }
}

/* quantize_row_q4_0_ref: d = (value of largest magnitude)/-8, q = min(15, (int8)(x/d + 8.5)) */
static void q4_0(const float *x, int64_t nb, uint8_t *y) {
    for (int64_t i = 0; i < nb; i++, x += 32, y += 18) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++)
            if (amax < fabsf(x[j])) {   /* strict: the first element of largest magnitude */
                amax = fabsf(x[j]);
                max = x[j];
            }
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        put_f16(y, d);
        for (int j = 0; j < 16; j++) {
            const float x0 = x[j] * id, x1 = x[16 + j] * id;
            int8_t a = (int8_t)(x0 + 8.5f), b = (int8_t)(x1 + 8.5f);
            const uint8_t q0 = (uint8_t)(a < 15 ? a : 15), q1 = (uint8_t)(b < 15 ? b : 15);
            y[2 + j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

/* ggml's nearest_int: round half to even through the float mantissa (|v| < 2^22) */
static int nearest_int(float v) {
    float t = v + 12582912.f;
    int i;
    memcpy(&i, &t, 4);
    return (i & 0x007fffff) - 0x00400000;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* make_qkx2_quants: weighted least-squares fit of x ~ scale*L + min (min <= 0, L in [0, nmax]),
 * trying nstep+1 candidate scales around nmax/(max-min); squared error (use_mad false). */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)clampi(l, 0, nmax);
        float diff = scale * L[i] + min - x[i];
        diff = diff * diff;
        best_error += weights[i] * diff;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = clampi(nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float err = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = diff * diff;
                err += weights[i] * diff;
            }
            if (err < best_error) {
                for (int i = 0; i < n; ++i) L[i] = Laux[i];
                best_error = err;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* The same fit for the 8 sub-blocks of a Q4_K super-block at once, sub-block j in AVX2 lane j:
 * every lane performs exactly the scalar statement sequence above (same operations, same order,
 * no FMA contraction — C11 mode compiles with -ffp-contract=off, and each intrinsic is one
 * rounding), so the blocks stay bit-identical while the 21-step search runs 8 wide. Branches
 * become masks; lanes where the scalar code would not compute a value compute one and discard it.
 * x: [256], weights: [256] (x's layout); out: L [256], scales [8], mins [8] (= the_min). */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define G4_QUANT_AVX2 1
__attribute__((target("avx2"))) static __m256i nearest_int8(__m256 v) {
    const __m256i i = _mm256_castps_si256(_mm256_add_ps(v, _mm256_set1_ps(12582912.f)));
    return _mm256_sub_epi32(_mm256_and_si256(i, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x00400000));
}
__attribute__((target("avx2"))) static __m256i clamp8(__m256i l, int nmax) {
    return _mm256_max_epi32(_mm256_min_epi32(l, _mm256_set1_epi32(nmax)), _mm256_setzero_si256());
}
__attribute__((target("avx2"))) static void q4_k_fit8_avx2(const float *x, uint8_t *L, float *scales, float *mins) {
    enum { N = 32, NMAX = 15, NSTEP = 20 };
    const float rmin = -1.f, rdelta = 0.1f;
    __m256 xv[N], w[N];
    for (int i = 0; i < N; i++)   /* transpose: xv[i] lane j = x[32 j + i] */
        xv[i] = _mm256_setr_ps(x[i], x[32 + i], x[64 + i], x[96 + i], x[128 + i], x[160 + i], x[192 + i], x[224 + i]);
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 sum_x2 = _mm256_setzero_ps();
    for (int i = 0; i < N; i++) sum_x2 = _mm256_add_ps(sum_x2, _mm256_mul_ps(xv[i], xv[i]));
    const __m256 av_x = _mm256_sqrt_ps(_mm256_div_ps(sum_x2, _mm256_set1_ps(32.f)));
    for (int i = 0; i < N; i++) w[i] = _mm256_add_ps(av_x, _mm256_and_ps(xv[i], absmask));
    __m256 mn = xv[0], mx = xv[0], sum_w = w[0], sum_x = _mm256_mul_ps(w[0], xv[0]);
    for (int i = 1; i < N; i++) {
        mn = _mm256_min_ps(xv[i], mn);
        mx = _mm256_max_ps(xv[i], mx);
        sum_w = _mm256_add_ps(sum_w, w[i]);
        sum_x = _mm256_add_ps(sum_x, _mm256_mul_ps(w[i], xv[i]));
    }
    mn = _mm256_min_ps(_mm256_setzero_ps(), mn);   /* if (min > 0) min = 0 */
    const __m256 flat = _mm256_cmp_ps(mx, mn, _CMP_EQ_OQ);
    const __m256 range = _mm256_sub_ps(mx, mn);
    __m256 iscale = _mm256_div_ps(_mm256_set1_ps((float)NMAX), range);
    __m256 scale = _mm256_div_ps(_mm256_set1_ps(1.f), iscale);
    __m256 best = _mm256_setzero_ps();
    __m256i Lb[N], La[N];
    for (int i = 0; i < N; i++) {
        Lb[i] = clamp8(nearest_int8(_mm256_mul_ps(iscale, _mm256_sub_ps(xv[i], mn))), NMAX);
        __m256 d = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(scale, _mm256_cvtepi32_ps(Lb[i])), mn), xv[i]);
        d = _mm256_mul_ps(d, d);
        best = _mm256_add_ps(best, _mm256_mul_ps(w[i], d));
    }
    for (int is = 0; is <= NSTEP; ++is) {
        const float num = rmin + rdelta * (float)is + (float)NMAX;
        /* (max - min) with the min of the best fit so far, as the scalar loop reads it */
        iscale = _mm256_div_ps(_mm256_set1_ps(num), _mm256_sub_ps(mx, mn));
        __m256 sum_l = _mm256_setzero_ps(), sum_l2 = sum_l, sum_xl = sum_l;
        for (int i = 0; i < N; i++) {
            La[i] = clamp8(nearest_int8(_mm256_mul_ps(iscale, _mm256_sub_ps(xv[i], mn))), NMAX);
            const __m256 l = _mm256_cvtepi32_ps(La[i]), wl = _mm256_mul_ps(w[i], l);
            sum_l = _mm256_add_ps(sum_l, wl);
            sum_l2 = _mm256_add_ps(sum_l2, _mm256_mul_ps(wl, l));
            sum_xl = _mm256_add_ps(sum_xl, _mm256_mul_ps(wl, xv[i]));
        }
        const __m256 D = _mm256_sub_ps(_mm256_mul_ps(sum_w, sum_l2), _mm256_mul_ps(sum_l, sum_l));
        const __m256 dpos = _mm256_cmp_ps(D, _mm256_setzero_ps(), _CMP_GT_OQ);
        if (!_mm256_movemask_ps(dpos)) continue;
        __m256 ts = _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(sum_w, sum_xl), _mm256_mul_ps(sum_x, sum_l)), D);
        __m256 tm = _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(sum_l2, sum_x), _mm256_mul_ps(sum_l, sum_xl)), D);
        const __m256 mpos = _mm256_cmp_ps(tm, _mm256_setzero_ps(), _CMP_GT_OQ);
        tm = _mm256_blendv_ps(tm, _mm256_setzero_ps(), mpos);
        ts = _mm256_blendv_ps(ts, _mm256_div_ps(sum_xl, sum_l2), mpos);
        __m256 err = _mm256_setzero_ps();
        for (int i = 0; i < N; i++) {
            __m256 d = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(ts, _mm256_cvtepi32_ps(La[i])), tm), xv[i]);
            d = _mm256_mul_ps(d, d);
            err = _mm256_add_ps(err, _mm256_mul_ps(w[i], d));
        }
        const __m256 take = _mm256_and_ps(dpos, _mm256_cmp_ps(err, best, _CMP_LT_OQ));
        if (!_mm256_movemask_ps(take)) continue;
        const __m256i ti = _mm256_castps_si256(take);
        for (int i = 0; i < N; i++) Lb[i] = _mm256_blendv_epi8(Lb[i], La[i], ti);
        best = _mm256_blendv_ps(best, err, take);
        scale = _mm256_blendv_ps(scale, ts, take);
        mn = _mm256_blendv_ps(mn, tm, take);
    }
    /* flat sub-blocks (max == min): L = 0, scale 0, the_min = -min */
    scale = _mm256_andnot_ps(flat, scale);
    const __m256 neg_min = _mm256_xor_ps(mn, _mm256_set1_ps(-0.f));
    _mm256_storeu_ps(scales, scale);
    _mm256_storeu_ps(mins, neg_min);
    const int flat_mask = _mm256_movemask_ps(flat);
    for (int i = 0; i < N; i++) {
        int32_t l[8];
        _mm256_storeu_si256((__m256i *)l, Lb[i]);
        for (int j = 0; j < 8; j++) L[32 * j + i] = (uint8_t)((flat_mask >> j) & 1 ? 0 : l[j]);
    }
}
#endif

/* get_scale_min_k4: the 6-bit scale and min of sub-block j from the packed scales[12] */
static void scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

/* quantize_row_q4_K_ref: 8 sub-blocks of 32 each fitted by make_qkx2_quants (weights
 * av_x + |x|), their scales/mins quantized to 6 bits against the super-block maxima, then the
 * 4-bit values recomputed from the quantized scales. Block: f16 d, f16 dmin, scales[12], q[128]. */
static void q4_k(const float *x, int64_t nb, uint8_t *y) {
    uint8_t L[256], Laux[32];
    float weights[32], mins[8], scales[8];
#ifdef G4_QUANT_AVX2
    /* the kernel table's choice: G4_CPU_ISA=scalar forces the statement-by-statement reference
     * (tests compare the two) */
    const g4_kernels *k = g4_kernels_get();
    const int use_avx2 = k && !strcmp(k->name, "avx2");
#endif
    for (int64_t i = 0; i < nb; i++, x += 256, y += 144) {
        uint8_t *sc = y + 4, *qs = y + 16;
        float max_scale = 0, max_min = 0;
#ifdef G4_QUANT_AVX2
        if (use_avx2) {
            q4_k_fit8_avx2(x, L, scales, mins);
            for (int j = 0; j < 8; ++j) {
                if (scales[j] > max_scale) max_scale = scales[j];
                if (mins[j] > max_min) max_min = mins[j];
            }
        }
        for (int j = 0; j < 8 && !use_avx2; ++j) {
#else
        for (int j = 0; j < 8; ++j) {
#endif
            float sum_x2 = 0;
            for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
            float av_x = sqrtf(sum_x2 / 32);
            for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[32 * j + l]);
            scales[j] = make_qkx2_quants(32, 15, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -1.f, 0.1f, 20);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
        float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
        memset(sc, 0, 12);
        for (int j = 0; j < 8; ++j) {
            uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
            uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
            ls = ls < 63 ? ls : 63;
            lm = lm < 63 ? lm : 63;
            if (j < 4) {
                sc[j] = ls;
                sc[j + 4] = lm;
            } else {
                sc[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
                sc[j - 4] |= (uint8_t)((ls >> 4) << 6);
                sc[j - 0] |= (uint8_t)((lm >> 4) << 6);
            }
        }
        put_f16(y, max_scale / 63.f);
        put_f16(y + 2, max_min / 63.f);
        for (int j = 0; j < 8; ++j) {
            uint8_t s, m;
            scale_min_k4(j, sc, &s, &m);
            const float d = g4_f16_at(y) * s;
            if (!d) continue;
            const float dm = g4_f16_at(y + 2) * m;
            for (int ii = 0; ii < 32; ++ii) L[32 * j + ii] = (uint8_t)clampi(nearest_int((x[32 * j + ii] + dm) / d), 0, 15);
        }
        for (int j = 0; j < 256; j += 64)
            for (int l = 0; l < 32; ++l) *qs++ = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

int g4_quantize_row(g4_dtype dt, const float *x, int64_t n, void *dst) {
    uint8_t *y = dst;
    const int block = g4_dtype_block(dt);
    if (n < 0 || block <= 0 || n % block) return -1;
    switch (dt) {
    case G4_DT_F32: memcpy(y, x, (size_t)n * 4); return 0;
    case G4_DT_F16:
        for (int64_t i = 0; i < n; i++) put_f16(y + 2 * i, x[i]);
        return 0;
    case G4_DT_BF16:
        for (int64_t i = 0; i < n; i++) g4_put_16le(y + 2 * i, g4_f32_to_bf16(x[i]));
        return 0;
    case G4_DT_Q8_0: q8_0(x, n / 32, y); return 0;
    case G4_DT_Q4_0: q4_0(x, n / 32, y); return 0;
    case G4_DT_Q4_K: q4_k(x, n / 256, y); return 0;
    default: return -1;
    }
}
