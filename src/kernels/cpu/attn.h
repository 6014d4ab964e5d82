/* attn.h — the blocked attention kernels behind g4_kernels.attend_block: AVX2 (attn_avx2.c) and
 * AVX-512 (attn_avx512.c), one source (attn_block_impl.h). Internal to src/kernels; the scalar
 * reference lives in ref.c. */
#ifndef G4_KERNELS_ATTN_H
#define G4_KERNELS_ATTN_H

#include "kernels/kernels.h"

/* Same contract as g4_kernels.attend_block. */
void g4_attend_block_avx2(const float *q, int ldq, float *out, int ldo, int G, int P, const int *lo,
                          const int *hi, const float *K, const float *V, int cap, int D, float scale,
                          float *scores, int batched);
void g4_attend_block_avx512(const float *q, int ldq, float *out, int ldo, int G, int P, const int *lo,
                            const int *hi, const float *K, const float *V, int cap, int D, float scale,
                            float *scores, int batched);
/* Same contract as g4_attend_kv_fn (kernels.h): a bf16 / f16 / q8_0 cache widened tile by tile. */
void g4_attend_kv_avx2(int kvt, const float *q, int ldq, float *out, int ldo, int G, int P, const int *lo,
                       const int *hi, const void *K, const void *V, int cap, int D, float scale, float *scores);
void g4_attend_kv_avx512(int kvt, const float *q, int ldq, float *out, int ldo, int G, int P, const int *lo,
                         const int *hi, const void *K, const void *V, int cap, int D, float scale, float *scores);

#endif
