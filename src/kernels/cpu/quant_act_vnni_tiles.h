/* quant_act_vnni_tiles.h — the VNNI --act-q8 chunk kernels over the 32-weight blocks (Q8_0, Q4_0,
 * Q5_0) of quant_act_avx512.c at one register width: W activation rows a chunk, one row per 32-bit
 * lane (W = 16: 512-bit registers, W = 8: 256-bit ones). Included by quant_act_avx512.c once per
 * width, with W, VB (bytes a vector), the vector types and operations (VI, VF, VMASK, V_*) and
 * NM(name) (the name with the width appended) defined; see the comments there for the
 * arithmetic, which is the same at both widths. */

/* A chunk's bytes per 32-weight block: [l][t][4] activation bytes (8 vectors), then [t] the
 * blocks' d as float */
enum { NM(CHUNK_BLOCK_BYTES) = 8 * VB + W * 4 };

/* Rows [0, tn) of xq (Q8_0 blocks, row stride xb) as one chunk: per block, for each l the W rows'
 * bytes 4l..4l+3 + 128 (rows past tn: 0 + 128, and d 0, so they add zeros) */
static void NM(chunk_build)(const uint8_t *xq, size_t xb, int tn, int nb, uint8_t *chunk) {
    const VI rows = V_MULLO(V_IOTA, V_SET1I((int)xb));
    const VMASK live = (VMASK)((1u << tn) - 1);
    const VI off = V_SET1B((char)0x80);
    for (int b = 0; b < nb; b++) {
        uint8_t *cb = chunk + (size_t)b * NM(CHUNK_BLOCK_BYTES);
        const uint8_t *qs = xq + (size_t)b * G4_Q8_0_BYTES + 2;
        for (int l = 0; l < 8; l++) V_STI(cb + VB * l, V_XORI(V_GATHER(live, rows, qs + 4 * l), off));
        float *d = (float *)(cb + 8 * VB);
        for (int t = 0; t < W; t++) d[t] = t < tn ? g4_ld_f16(xq + (size_t)t * xb + (size_t)b * G4_Q8_0_BYTES) : 0.0f;
    }
}

/* dx * dy_t for the W rows (the same float product as ggml's) */
AI VF NM(row_scales)(const uint8_t *blk, const uint8_t *cb) { return V_MULF(V_SET1F(g4_ld_f16(blk)), V_LDF(cb + 8 * VB)); }

AI VF NM(dot)(VF acc, VF d, VI a, int32_t c, int32_t q) {
    return V_FMA(d, V_CVT(V_DPBUSD(V_SET1I(c), a, V_SET1I(q))), acc);
}

/* ggml's sum of the 8 lanes, ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7)) (g4_hsum8), for
 * the W rows */
AI VF NM(sum8)(const VF a[8]) {
    return V_ADDF(V_ADDF(V_ADDF(a[0], a[4]), V_ADDF(a[2], a[6])), V_ADDF(V_ADDF(a[1], a[5]), V_ADDF(a[3], a[7])));
}

/* the results of rows t < tn to y[t * ldy] */
AI void NM(store_rows)(VF s, int tn, float *y, int ldy) {
    float out[W] __attribute__((aligned(64)));
    V_STF(out, s);
    for (int t = 0; t < tn; t++) y[(size_t)t * ldy] = out[t];
}

/* R (1 or 2) weight rows from w (stride rb) × one chunk's W activation rows: results for rows
 * t < tn to y[t * ldy + r]. The accumulators as two arrays of 8 (GCC keeps those in registers,
 * one array of 16 it left in memory). */
AI void NM(tile)(int kind, int R, const uint8_t *w, size_t rb, size_t bb, int nb, const uint8_t *chunk, int tn,
                 float *y, int ldy) {
    VF a0[8], a1[8];
    for (int l = 0; l < 8; l++) a0[l] = a1[l] = V_ZF();
    /* block b + 1's quants are stored while block b's dots run, so its broadcasts do not wait on
     * the stores */
    int32_t q0[2][8], c0[2][8], q1[2][8], c1[2][8];
    tile_quants(kind, w, q0[0], c0[0]);
    VF d0 = NM(row_scales)(w, chunk), d1 = d0;
    if (R == 2) tile_quants(kind, w + rb, q1[0], c1[0]), d1 = NM(row_scales)(w + rb, chunk);
    for (int b = 0; b < nb; b++) {
        const uint8_t *cb = chunk + (size_t)b * NM(CHUNK_BLOCK_BYTES);
        const int p = b & 1;
        g4_prefetch_ahead(w + (size_t)b * bb, bb);   /* weights from DRAM: the rows' stream, ahead */
        if (R == 2) g4_prefetch_ahead(w + rb + (size_t)b * bb, bb);
        VF e0 = d0, e1 = d1;
        if (b + 1 < nb) {
            const uint8_t *nx = cb + NM(CHUNK_BLOCK_BYTES);
            tile_quants(kind, w + (size_t)(b + 1) * bb, q0[p ^ 1], c0[p ^ 1]);
            e0 = NM(row_scales)(w + (size_t)(b + 1) * bb, nx);
            if (R == 2) {
                tile_quants(kind, w + rb + (size_t)(b + 1) * bb, q1[p ^ 1], c1[p ^ 1]);
                e1 = NM(row_scales)(w + rb + (size_t)(b + 1) * bb, nx);
            }
        }
#pragma GCC unroll 8
        for (int l = 0; l < 8; l++) {
            const VI a = V_LDI(cb + VB * l);
            a0[l] = NM(dot)(a0[l], d0, a, c0[p][l], q0[p][l]);
            if (R == 2) a1[l] = NM(dot)(a1[l], d1, a, c1[p][l], q1[p][l]);
        }
        d0 = e0, d1 = e1;
    }
    NM(store_rows)(NM(sum8)(a0), tn, y, ldy);
    if (R == 2) NM(store_rows)(NM(sum8)(a1), tn, y + 1, ldy);
}

/* Activation rows [0, T) of xq (row stride xb) against weight rows [n0, n1), T up to any count (a
 * last chunk of fewer than W rows is padded): SC chunks transposed per pass into chunks (scratch
 * of SC chunks), then every RG weight rows against them */
AI void NM(gemm_part)(int kind, size_t bb, const uint8_t *xq, size_t xb, int T, int nb, const void *w, int n0, int n1,
                      float *y, int ldy, uint8_t *chunks) {
    const size_t rb = (size_t)nb * bb, cs = (size_t)nb * NM(CHUNK_BLOCK_BYTES);
    for (int t0 = 0; t0 < T; t0 += SC * W) {
        const int sn = T - t0 < SC * W ? T - t0 : SC * W, nc = (sn + W - 1) / W;
        for (int ci = 0; ci < nc; ci++) {
            const int tn = sn - ci * W < W ? sn - ci * W : W;
            NM(chunk_build)(xq + (size_t)(t0 + ci * W) * xb, xb, tn, nb, chunks + ci * cs);
        }
        for (int g0 = n0; g0 < n1; g0 += RG) {
            const int g1 = g0 + RG < n1 ? g0 + RG : n1;
            for (int ci = 0; ci < nc; ci++) {
                const int tn = sn - ci * W < W ? sn - ci * W : W;
                float *yc = y + (size_t)(t0 + ci * W) * ldy;
                int n = g0;
                for (; n + 2 <= g1; n += 2)
                    NM(tile)(kind, 2, (const uint8_t *)w + (size_t)n * rb, rb, bb, nb, chunks + ci * cs, tn, yc + n, ldy);
                if (n < g1) NM(tile)(kind, 1, (const uint8_t *)w + (size_t)n * rb, rb, bb, nb, chunks + ci * cs, tn, yc + n, ldy);
            }
        }
    }
}

/* the includer defines these again for the next width */
#undef NM
#undef W
#undef VB
#undef VI
#undef VF
#undef VMASK
#undef V_ZI
#undef V_ZF
#undef V_SET1I
#undef V_SET1B
#undef V_SET1F
#undef V_LDI
#undef V_LDF
#undef V_STI
#undef V_STF
#undef V_XORI
#undef V_MULLO
#undef V_IOTA
#undef V_GATHER
#undef V_DPBUSD
#undef V_CVT
#undef V_FMA
#undef V_MULF
#undef V_ADDF
