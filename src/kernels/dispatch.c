/* dispatch.c — picks the kernel table once per process: the best path this CPU supports, or
 * the one named by G4_CPU_ISA (scalar|avx2|avx512|avx512bf16|amx) so tests can run every path on
 * one machine. "avx512" is the avx2 table with the AVX-512F prefill GEMM, Q8_0 / Q4_0 / Q5_0
 * decode (quant_legacy_avx512.c) and, with BW/VL, the Q4_K / Q6_K decode on 16 lanes
 * (quant_k_avx512.c); the bf16 paths are the
 * avx512 table plus --prefill-bf16's matmul on the CPU's bf16 units; --numerics ggml's table is
 * any of them with llama.cpp's float ops (g4_kernels_ggml). The AVX-512 features are read from
 * CPUID and XCR0 here, in code built for any x86-64. Which inputs take which matmul is the
 * matmul layer's policy (matmul.h), not the table's. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gemma4c.h"
#include "kernels/cpu/attn.h"
#include "kernels/cpu/pack_avx2.h"
#include "kernels/cpu/quant.h"
#include "kernels/kernels.h"

#if defined(__x86_64__)
static void cpuid_count(unsigned leaf, unsigned sub, unsigned r[4]) {
    __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}

static unsigned long long xcr0(void) {
    unsigned r[4];
    cpuid_count(1, 0, r);
    if (!((r[2] >> 27) & 1)) return 0;   /* no OSXSAVE: the OS manages no extended state */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (unsigned long long)hi << 32 | lo;
}

/* AVX-512F, with the OS saving the zmm and opmask state. */
static int has_avx512f(void) {
    unsigned r[4];
    cpuid_count(0, 0, r);
    if (r[0] < 7) return 0;
    cpuid_count(7, 0, r);
    return ((r[1] >> 16) & 1) && (xcr0() & 0xe6) == 0xe6;   /* SSE, AVX, opmask, zmm state */
}

/* AVX-512 F/BW/VL (every AVX-512 Xeon and Core; Xeon Phi has F alone). */
static int has_avx512bwvl(void) {
    unsigned r[4];
    if (!has_avx512f()) return 0;
    cpuid_count(7, 0, r);
    return ((r[1] >> 30) & 1) && ((r[1] >> 31) & 1);
}

/* AVX-512 F/BW/VL and the VNNI int8 dot product (vpdpbusd). */
static int has_avx512vnni(void) {
    unsigned r[4];
    if (!has_avx512bwvl()) return 0;
    cpuid_count(7, 0, r);
    return (r[2] >> 11) & 1;
}

/* AVX-512 F/BW/VL and the BF16 dot product. */
static int has_avx512bf16(void) {
    unsigned r[4];
    if (!has_avx512bwvl()) return 0;
    cpuid_count(7, 1, r);
    return (r[0] >> 5) & 1;
}

/* AMX-TILE + AMX-BF16 enabled by the OS (XCR0 tile state), and Linux's per-process permission to
 * use tile data granted (arch_prctl ARCH_REQ_XCOMP_PERM, Linux >= 5.16). */
static int has_amx_bf16(void) {
    unsigned r[4];
    cpuid_count(0, 0, r);
    if (r[0] < 7) return 0;
    cpuid_count(7, 0, r);
    const int bf16 = (r[3] >> 22) & 1, tile = (r[3] >> 24) & 1;
    if (!bf16 || !tile || (xcr0() & 0x60000) != 0x60000) return 0;
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}
#else
static int has_avx512f(void) { return 0; }
static int has_avx512bwvl(void) { return 0; }
static int has_avx512vnni(void) { return 0; }
static int has_avx512bf16(void) { return 0; }
static int has_amx_bf16(void) { return 0; }
#endif

static struct {
    pthread_once_t once;
    g4_kernels avx512_table, avx512bf16_table, amx_table;   /* name NULL: not on this CPU */
} x512 = {.once = PTHREAD_ONCE_INIT};   /* the tables built on AVX-512, filled once */

static void x512_init(void) {
    const g4_kernels *avx2 = g4_kernels_avx2();
    if (!avx2 || !has_avx512f()) return;
    x512.avx512_table = *avx2;
    x512.avx512_table.name = "avx512";
    x512.avx512_table.matmul[G4_DT_F32] = g4_matmul_f32_avx512;
    x512.avx512_table.matmul[G4_DT_F16] = g4_matmul_f16_avx512;
    x512.avx512_table.matmul[G4_DT_BF16] = g4_matmul_bf16_avx512;
    x512.avx512_table.matmul_rows[G4_DT_BF16] = g4_matmul_rows_bf16_avx512;   /* its one-row order */
    g4_quant_legacy_avx512_init();
    x512.avx512_table.matmul[G4_DT_Q8_0] = g4_mm_q8_0_avx512;
    x512.avx512_table.matmul[G4_DT_Q4_0] = g4_mm_q4_0_avx512;
    x512.avx512_table.matmul[G4_DT_Q5_0] = g4_mm_q5_0_avx512;
    x512.avx512_table.matmul_rows[G4_DT_Q8_0] = g4_mm_rows_q8_0_avx512;
    x512.avx512_table.matmul_rows[G4_DT_Q4_0] = g4_mm_rows_q4_0_avx512;
    x512.avx512_table.matmul_rows[G4_DT_Q5_0] = g4_mm_rows_q5_0_avx512;
    x512.avx512_table.matmul[G4_DT_IQ4_NL] = g4_mm_iq4_nl_avx512;
    x512.avx512_table.matmul_rows[G4_DT_IQ4_NL] = g4_mm_rows_iq4_nl_avx512;
    x512.avx512_table.matmul[G4_DT_Q4_1] = g4_mm_q4_1_avx512;
    x512.avx512_table.matmul_rows[G4_DT_Q4_1] = g4_mm_rows_q4_1_avx512;
    x512.avx512_table.matmul[G4_DT_Q5_1] = g4_mm_q5_1_avx512;
    x512.avx512_table.matmul_rows[G4_DT_Q5_1] = g4_mm_rows_q5_1_avx512;
    x512.avx512_table.attend_block = g4_attend_block_avx512;
    x512.avx512_table.attend_kv = g4_attend_kv_avx512;
    x512.avx512_table.matmul_xp[G4_DT_F32] = g4_matmul_xp_f32_avx512;
    x512.avx512_table.matmul_xp[G4_DT_F16] = g4_matmul_xp_f16_avx512;
    x512.avx512_table.matmul_xp[G4_DT_BF16] = g4_matmul_xp_bf16_avx512;
    x512.avx512_table.matmul_xp[G4_DT_Q8_0] = g4_matmul_xp_q8_0_avx512;
    x512.avx512_table.matmul_xp[G4_DT_Q4_0] = g4_matmul_xp_q4_0_avx512;
    x512.avx512_table.matmul_xp[G4_DT_Q5_0] = g4_matmul_xp_q5_0_avx512;
    x512.avx512_table.matmul_xp[G4_DT_Q4_K] = g4_matmul_xp_q4_k_avx512;
    x512.avx512_table.matmul_xp[G4_DT_Q6_K] = g4_matmul_xp_q6_k_avx512;
    x512.avx512_table.matmul_xp[G4_DT_Q5_K] = g4_matmul_xp_q5_k_avx512;
    x512.avx512_table.matmul_xp[G4_DT_IQ4_XS] = g4_matmul_xp_iq4_xs_avx512;
    x512.avx512_table.matmul_xp[G4_DT_Q3_K] = g4_matmul_xp_q3_k_avx512;
    x512.avx512_table.matmul_xp[G4_DT_Q2_K] = g4_matmul_xp_q2_k_avx512;
    x512.avx512_table.matmul_xp[G4_DT_IQ4_NL] = g4_matmul_xp_iq4_nl_avx512;
    x512.avx512_table.matmul_xp[G4_DT_Q4_1] = g4_matmul_xp_q4_1_avx512;
    x512.avx512_table.matmul_xp[G4_DT_Q5_1] = g4_matmul_xp_q5_1_avx512;
    x512.avx512_table.pack_x = g4_pack_x_avx512;
    if (has_avx512bwvl()) {   /* Q4_K / Q6_K / Q5_K / IQ4_XS / Q3_K / Q2_K decode on 16 lanes (quant_k_avx512.c) */
        x512.avx512_table.matmul[G4_DT_Q4_K] = g4_mm_q4_k_avx512;
        x512.avx512_table.matmul[G4_DT_Q6_K] = g4_mm_q6_k_avx512;
        x512.avx512_table.matmul_rows[G4_DT_Q4_K] = g4_mm_rows_q4_k_avx512;
        x512.avx512_table.matmul_rows[G4_DT_Q6_K] = g4_mm_rows_q6_k_avx512;
        x512.avx512_table.matmul[G4_DT_Q5_K] = g4_mm_q5_k_avx512;
        x512.avx512_table.matmul_rows[G4_DT_Q5_K] = g4_mm_rows_q5_k_avx512;
        x512.avx512_table.matmul[G4_DT_IQ4_XS] = g4_mm_iq4_xs_avx512;
        x512.avx512_table.matmul_rows[G4_DT_IQ4_XS] = g4_mm_rows_iq4_xs_avx512;
        x512.avx512_table.matmul[G4_DT_Q3_K] = g4_mm_q3_k_avx512;
        x512.avx512_table.matmul_rows[G4_DT_Q3_K] = g4_mm_rows_q3_k_avx512;
        x512.avx512_table.matmul[G4_DT_Q2_K] = g4_mm_q2_k_avx512;
        x512.avx512_table.matmul_rows[G4_DT_Q2_K] = g4_mm_rows_q2_k_avx512;
    }
    if (has_avx512vnni()) {   /* --act-q8 (quant_act_avx512.c); the same bits */
        x512.avx512_table.matmul_q8[G4_DT_Q8_0] = g4_mmq_q8_0_avx512vnni;
        x512.avx512_table.matmul_q8[G4_DT_Q4_0] = g4_mmq_q4_0_avx512vnni;
        x512.avx512_table.matmul_q8[G4_DT_Q5_0] = g4_mmq_q5_0_avx512vnni;
        x512.avx512_table.matmul_q8[G4_DT_Q4_K] = g4_mmq_q4_k_avx512vnni;
        x512.avx512_table.matmul_q8[G4_DT_Q6_K] = g4_mmq_q6_k_avx512vnni;
        x512.avx512_table.matmul_q8[G4_DT_Q5_K] = g4_mmq_q5_k_avx512vnni;
        x512.avx512_table.matmul_q8[G4_DT_IQ4_NL] = g4_mmq_iq4_nl_avx512vnni;
        x512.avx512_table.matmul_q8[G4_DT_IQ4_XS] = g4_mmq_iq4_xs_avx512vnni;
        x512.avx512_table.matmul_q8[G4_DT_Q3_K] = g4_mmq_q3_k_avx512vnni;
        x512.avx512_table.matmul_q8[G4_DT_Q2_K] = g4_mmq_q2_k_avx512vnni;
    }
    x512.avx512_table.x_mr = G4_AVX512_XMR;
    const g4_kernels *base = &x512.avx512_table;
    if (!has_avx512bf16()) return;
    x512.avx512bf16_table = *base;
    x512.avx512bf16_table.name = "avx512bf16";
    x512.avx512bf16_table.matmul_xbf16 = g4_matmul_xbf16_avx512;
    if (!has_amx_bf16()) return;
    x512.amx_table = *base;
    x512.amx_table.name = "amx";
    x512.amx_table.matmul_xbf16 = g4_matmul_xbf16_amx;
    x512.amx_table.xbf16_layout = G4_XBF16_TILES;
    x512.amx_table.matmul_x3bf16 = g4_matmul_x3bf16_amx;
    x512.amx_table.split3_row = g4_xbf16_put_row_split3_avx512;
    x512.amx_table.put_row_tiles = g4_xbf16_put_row_tiles_avx512;
    /* the weights as A tiles for short inputs, and decode on tiles: which inputs take them is
     * the matmul layer's policy (matmul.h) */
    x512.amx_table.matmul_xbf16_pairs = g4_matmul_xbf16_amx_pairs;
    x512.amx_table.matmul_x3bf16_pairs = g4_matmul_x3bf16_amx_pairs;
    x512.amx_table.put_pairs16 = g4_xbf16_put_pairs16_avx512;
    x512.amx_table.matmul_gemv3 = g4_matmul_gemv3_amx;
    x512.amx_table.put_gemv3 = g4_xbf16_put_gemv3_avx512;
}

const g4_kernels *g4_kernels_avx512(void) {
    pthread_once(&x512.once, x512_init);
    return x512.avx512_table.name ? &x512.avx512_table : NULL;
}

const g4_kernels *g4_kernels_avx512bf16(void) {
    pthread_once(&x512.once, x512_init);
    return x512.avx512bf16_table.name ? &x512.avx512bf16_table : NULL;
}

const g4_kernels *g4_kernels_amx(void) {
    pthread_once(&x512.once, x512_init);
    return x512.amx_table.name ? &x512.amx_table : NULL;
}

void g4_kernels_ggml(const g4_kernels *base, g4_kernels *out) {
    *out = *base;
    out->rmsnorm = g4_ggml_rmsnorm;
    out->gelu_mul = g4_ggml_gelu_mul;
    out->attend_block = g4_ggml_attend_block;
    out->attend_kv = NULL;   /* llama.cpp's attention reads an f32 cache only */
    out->attend_ftz = 0;
    out->rope_table = g4_rope_table_ggml;
    out->rope_apply = g4_rope_apply_ggml;
    out->logits_softcap = g4_ggml_softcap;
}

const g4_kernels *g4_kernels_get(void) {
    const char *isa = getenv("G4_CPU_ISA");
    if (isa && *isa && strcmp(isa, "auto")) {
        const g4_kernels *k = !strcmp(isa, "scalar") ? g4_kernels_scalar()
                            : !strcmp(isa, "avx2") ? g4_kernels_avx2()
                            : !strcmp(isa, "avx512") ? g4_kernels_avx512()
                            : !strcmp(isa, "avx512bf16") ? g4_kernels_avx512bf16()
                            : !strcmp(isa, "amx") ? g4_kernels_amx() : NULL;
        if (!k)
            g4_fail(G4_ERR_INPUT, "G4_CPU_ISA=%s: unknown or not supported by this CPU (scalar, avx2, avx512, avx512bf16, amx)",
                    isa);
        return k;
    }
    const g4_kernels *k = g4_kernels_amx();
    if (!k) k = g4_kernels_avx512bf16();
    if (!k) k = g4_kernels_avx512();
    if (!k) k = g4_kernels_avx2();
    return k ? k : g4_kernels_scalar();
}

