/* kv_ref.c — the KV cache's storage types (kernels.h G4_KV_*): row sizes, the conversion of a
 * new K or V row on write (scalar: one row per token and head, off the hot loops), the scalar
 * widening, and the reference attention over a typed cache. The vector attention is
 * attn_avx2.c / attn_avx512.c's; which one a table uses is its attend_kv (kernels.h). */
#include <math.h>
#include <string.h>

#include "gemma4c.h"
#include "kernels/kernels.h"

const char *g4_kv_type_name(int t) {
    static const char *const names[G4_KV_TYPES] = {"f32", "bf16", "f16", "q8_0"};
    return t >= 0 && t < G4_KV_TYPES ? names[t] : NULL;
}

size_t g4_kv_row_bytes(int t, int D) {
    switch (t) {
    case G4_KV_F32: return (size_t)D * sizeof(float);
    case G4_KV_BF16:
    case G4_KV_F16: return (size_t)D * sizeof(uint16_t);
    case G4_KV_Q8_0: return D % G4_KV_QK ? 0 : (size_t)(D / G4_KV_QK) * sizeof(g4_kv_q8_block);
    default: return 0;
    }
}

void g4_kv_store_row(int t, const float *x, int D, void *dst) {
    switch (t) {
    case G4_KV_F32: memcpy(dst, x, (size_t)D * sizeof(float)); break;
    case G4_KV_BF16:
        for (int i = 0; i < D; i++) ((uint16_t *)dst)[i] = g4_f32_to_bf16(x[i]);
        break;
    case G4_KV_F16:
        for (int i = 0; i < D; i++) ((uint16_t *)dst)[i] = g4_f32_to_f16(x[i]);
        break;
    case G4_KV_Q8_0: {
        /* ggml's quantize_row_q8_0_ref: the quants use the unrounded 1/d, the stored d is f16 */
        g4_kv_q8_block *b = dst;
        for (int k = 0; k < D / G4_KV_QK; k++, x += G4_KV_QK) {
            float amax = 0.0f;
            for (int j = 0; j < G4_KV_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
            const float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
            b[k].d = g4_f32_to_f16(d);
            for (int j = 0; j < G4_KV_QK; j++) b[k].qs[j] = (int8_t)roundf(x[j] * id);
        }
        break;
    }
    }
}

void g4_kv_load_rows(int t, const void *src, int n, float *dst) {
    switch (t) {
    case G4_KV_F32: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    case G4_KV_BF16:
        for (int i = 0; i < n; i++) dst[i] = g4_bf16_to_f32(((const uint16_t *)src)[i]);
        break;
    case G4_KV_F16:
        for (int i = 0; i < n; i++) dst[i] = g4_f16_to_f32(((const uint16_t *)src)[i]);
        break;
    case G4_KV_Q8_0: {
        const g4_kv_q8_block *b = src;
        for (int k = 0; k < n / G4_KV_QK; k++) {
            const float d = g4_f16_to_f32(b[k].d);
            for (int j = 0; j < G4_KV_QK; j++) dst[k * G4_KV_QK + j] = (float)b[k].qs[j] * d;
        }
        break;
    }
    }
}

/* g4_attend_generic's loop (ref.c) with each K / V row widened first: scores, a max-subtracted
 * float32 softmax, then the weighted sum of V in position order. */
void g4_attend_kv_ref(int t, const float *q, int ldq, float *out, int ldo, int G, int P, const int *lo,
                      const int *hi, const void *K, const void *V, int cap, int D, float scale, float *scores) {
    const size_t rb = g4_kv_row_bytes(t, D);
    float row[D];   /* [D] one widened cache row */
    for (int p = 0; p < P; p++)
        for (int h = 0; h < G; h++) {
            const float *qh = q + (size_t)p * ldq + (size_t)h * D;
            float *o = out + (size_t)p * ldo + (size_t)h * D;
            float mx = -INFINITY;
            for (int s = lo[p]; s <= hi[p]; s++) {
                g4_kv_load_rows(t, (const char *)K + (size_t)(s % cap) * rb, D, row);
                float acc = 0.0f;
                for (int i = 0; i < D; i++) acc += qh[i] * row[i];
                acc *= scale;
                scores[s - lo[p]] = acc;
                if (acc > mx) mx = acc;
            }
            float sum = 0.0f;
            for (int s = 0; s <= hi[p] - lo[p]; s++) { scores[s] = expf(scores[s] - mx); sum += scores[s]; }
            memset(o, 0, (size_t)D * sizeof(float));
            for (int s = lo[p]; s <= hi[p]; s++) {
                g4_kv_load_rows(t, (const char *)V + (size_t)(s % cap) * rb, D, row);
                const float w = scores[s - lo[p]] / sum;
                for (int i = 0; i < D; i++) o[i] += w * row[i];
            }
        }
}
