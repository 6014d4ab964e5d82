/* cli_bench.c — `gemma4c bench`: measures the machine's roofline (memory read bandwidth, fp32
 * FMA peak, bf16 peak where the CPU has one), then the model's prefill (ppN) and decode (tgN)
 * tokens/s from a fresh slot, each as a fraction of its roofline; human-readable lines on
 * stdout, then one JSON line with the same figures. The measurement loops and the cost model
 * live in src/bench/roofline.c; this file parses options, times the public API and prints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

#define MAX_TESTS 16

typedef struct {
    const char *model;
    long p[MAX_TESTS], n[MAX_TESTS], verify[MAX_TESTS];
    int np, nn, nv;
    long reps, bw_mib, seed, batch, depth;
    g4_model_opts mo;   /* ctx 0: sized from the longest test */
    int no_peaks, kernels;
} bench_opts;

typedef struct {
    char name[24];
    int is_decode, n_tokens;
    double tok_s, reps_tok_s[64];
    int reps;
    /* cost model */
    double flops_per_token, bytes_per_token, kv_bytes_per_token;
    double roofline_tok_s, fraction;
    double fraction_with_kv;  /* decode: with the KV cache's reads counted as well (-1: none) */
    /* the machine's limit measured right before each rep (0: not measured): decode, GB/s read;
     * prefill, the peak GFLOP/s it is judged against — on a shared host both drift within a run */
    double reps_limit[64];
    double fraction_adjacent; /* median over reps of achieved / that rep's limit (-1: none) */
    double achieved;   /* GFLOP/s (prefill) or GB/s of weights (decode) */
} bench_test;

static const char *USAGE =
    "usage: gemma4c bench -m MODEL [-p 64[,512...]] [-n 128[,...]] [--threads N] [--reps R]\n"
    "                     [--prefill-chunk N] [--ctx N] [--bw-mib 1024] [--no-peaks] [--seed S]\n"
    "                     [--kernels] [--tp N] [--tp-backend threads|mpi] [--no-mmap | --mmap] [--act-q8]\n"
    "                     [--numerics exact|ggml] [--prefill-bf16] [--kv-type T] [--batch B] [--depth D]\n"
    "                     [--verify K,...]\n"
    "  ppN: prefill of N random token ids from a fresh slot (logits of the last one);\n"
    "  tgN: N single-token decode steps from a fresh slot (positions 0..N-1, as llama-bench tg);\n"
    "  -p 0 / -n 0 skip that kind; every test runs --reps times (default 3), median reported.\n"
    "  --depth D: decode tests start at position D (tgN@dD, as llama-bench -d): each rep first\n"
    "  prefills D random ids into every slot (untimed); the KV cache's reads then count too.\n"
    "  --batch B: each decode step advances B slots at once (continuous batching, as serve's\n"
    "  --parallel B): tgN reports B x N tokens a rep; the weights are read once a step for all B.\n"
    "  --verify K[,K...]: a speculative decoding verify step of K + 1 rows of one slot (K drafts, 1..64)\n"
    "  against a one-row decode step, both at position D (--depth), greedy, alternating; the median of\n"
    "  --reps x 8 adjacent pairs' ratios.\n"
    "  --kernels: also time the matmul kernels alone on the model's matrices, each group over all\n"
    "  layers, the LM head, and (T = 1) every matmul of a decode step in its order (T = 1 and\n"
    "  T = prefill chunk), to separate kernel speed from the rest of the forward pass.\n"
    "  --tp N: N ranks of --threads / N threads each (threads backend), or one per MPI process\n"
    "  (mpirun -np N gemma4c bench --tp-backend mpi ...; the machine's peaks are then not measured).\n"
    "  --no-mmap: copy the weights into huge-page memory at load instead of reading the file mapping\n"
    "  (default: copy only when the page cache holds < 90% of them in 2 MiB pages; --mmap: never).\n"
    "  --act-q8: int8 activations for matmuls over quantized weights (as llama.cpp; default exact).\n"
    "  --numerics ggml: llama.cpp's CPU arithmetic throughout (implies --act-q8; scalar, slower).\n"
    "  --prefill-bf16: prompt rows' layer matmuls in bf16 (AMX / AVX512-BF16 where the CPU has them).\n";

/* "64,512" -> list of values in [0, 1<<20]; 0 entries are dropped. */
static int parse_list(const char *opt, const char *s, long *out, int *n) {
    char buf[256];
    if (!s || strlen(s) >= sizeof buf) return cli_usage_error("bench", "%s expects a comma-separated list", opt), 0;
    strcpy(buf, s);
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long v;
        if (!cli_parse_int("bench", opt, tok, 0, 1 << 20, &v)) return 0;
        if (v == 0) continue;
        if (*n == MAX_TESTS) return cli_usage_error("bench", "%s: at most %d values", opt, MAX_TESTS), 0;
        out[(*n)++] = v;
    }
    return 1;
}

static int parse_opts(int argc, char **argv, bench_opts *o) {
    memset(o, 0, sizeof *o);
    o->p[0] = 64; o->np = 1;
    o->n[0] = 128; o->nn = 1;
    o->reps = 3;
    g4_model_opts_default(&o->mo);
    o->mo.tp = 0;    /* unset: 1, or the mpirun size */
    o->mo.ctx = 0;   /* unset: the longest test's positions + 1 */
    o->bw_mib = 1024;
    o->seed = 1234;
    o->batch = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDV() do { if (!v) { cli_usage_error("bench", "%s needs a value", a); return 0; } i++; } while (0)
        int r;
        if (cli_is_help(a)) { fputs(USAGE, stdout); fputs(cli_model_opts_help, stdout); exit(0); }
        else if ((r = cli_parse_model_opt("bench", argc, argv, &i, &o->mo))) { if (r < 0) return 0; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { NEEDV(); o->model = v; }
        else if (!strcmp(a, "-p")) { NEEDV(); if (!parse_list(a, v, o->p, &o->np)) return 0; }
        else if (!strcmp(a, "-n")) { NEEDV(); if (!parse_list(a, v, o->n, &o->nn)) return 0; }
        else if (!strcmp(a, "--verify")) {
            NEEDV();
            if (!parse_list(a, v, o->verify, &o->nv)) return 0;
            for (int k = 0; k < o->nv; k++)
                if (o->verify[k] > 64) { cli_usage_error("bench", "--verify: K %ld is over 64", o->verify[k]); return 0; }
            if (!o->nv) { cli_usage_error("bench", "--verify needs at least one K of 1..64"); return 0; }
        }
        else if (!strcmp(a, "--reps") || !strcmp(a, "-r")) { NEEDV(); if (!cli_parse_int("bench", a, v, 1, 64, &o->reps)) return 0; }
        else if (!strcmp(a, "--bw-mib")) { NEEDV(); if (!cli_parse_int("bench", a, v, 64, 1 << 20, &o->bw_mib)) return 0; }
        else if (!strcmp(a, "--batch")) { NEEDV(); if (!cli_parse_int("bench", a, v, 1, 256, &o->batch)) return 0; }
        else if (!strcmp(a, "--depth")) { NEEDV(); if (!cli_parse_int("bench", a, v, 0, 1 << 20, &o->depth)) return 0; }
        else if (!strcmp(a, "--seed")) { NEEDV(); if (!cli_parse_int("bench", a, v, 0, 0x7fffffff, &o->seed)) return 0; }
        else if (!strcmp(a, "--no-peaks")) o->no_peaks = 1;
        else if (!strcmp(a, "--kernels")) o->kernels = 1;
        else { cli_usage_error("bench", "unknown option '%s' (see gemma4c bench --help)", a); return 0; }
#undef NEEDV
    }
    if (!o->model) { cli_usage_error("bench", "-m MODEL is required"); return 0; }
    /* MPI ranks would measure the machine all at once, and idle ranks poll: measure with threads */
    if (o->mo.tp_backend == G4_TP_MPI) o->no_peaks = 1;
    if (o->np + o->nn + o->nv == 0 && !o->kernels) { cli_usage_error("bench", "nothing to measure: -p and -n are both 0"); return 0; }
    return 1;
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* JSON number, or null for "not measured" (negative) and non-finite values */
static void json_num(FILE *f, double v) {
    if (v < 0 || v != v || v > 1e300) fputs("null", f);
    else fprintf(f, "%.6g", v);
}

static long rss_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kb = strtol(line + 6, NULL, 10);
    if (f) fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

static uint32_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(*s >> 33);
}

/* The peak prefill is judged against (fp32 FMA, or the bf16 unit's: vdpbf16ps or AMX tiles), measured
 * again right before a rep: a core's clock can move noticeably within a run. */
static double adjacent_peak(double prefill_peak, double fma, double bf16, int threads) {
    const char *unused;
    if (prefill_peak <= 0) return 0;
    return prefill_peak == fma ? g4_bench_fma_peak(threads, 3, &unused) : prefill_peak == bf16 ? g4_bench_bf16_peak(threads, 3, &unused) : 0;
}

/* median over reps of (tokens/s x cost per token, in GB or GFLOP) / that rep's measured limit */
static double adjacent_fraction(const bench_test *t, double cost_per_token) {
    double f[64];
    int nf = 0;
    for (int r = 0; r < t->reps; r++)
        if (t->reps_limit[r] > 0) f[nf++] = t->reps_tok_s[r] * cost_per_token / 1e9 / t->reps_limit[r];
    g4_sort_doubles(f, nf);
    return !nf ? -1 : nf % 2 ? f[nf / 2] : 0.5 * (f[nf / 2 - 1] + f[nf / 2]);
}

int cli_bench(int argc, char **argv) {
    bench_opts o;
    if (!parse_opts(argc, argv, &o)) return 2;
    if (o.mo.threads <= 0) {   /* the library's rule for threads <= 0: all online CPUs */
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        o.mo.threads = nc > 0 ? (int)nc : 1;
    }
    long max_p = 0, max_n = 0;
    for (int i = 0; i < o.np; i++) if (o.p[i] > max_p) max_p = o.p[i];
    for (int i = 0; i < o.nn; i++) if (o.n[i] > max_n) max_n = o.n[i];

    /* ---- machine roofline, before the model is mapped (the bandwidth buffer is freed after) */
    g4_bw_result bw = {0};
    double fma = -1, bf16 = -1;
    const char *fma_isa = "not measured", *bf16_note = "not measured";
    if (!o.no_peaks) {
        g4_status st = g4_bench_read_bw(o.mo.threads, (size_t)o.bw_mib << 20, 10, &bw);
        if (st) return cli_report(st);
        fma = g4_bench_fma_peak(o.mo.threads, 5, &fma_isa);
        bf16 = g4_bench_bf16_peak(o.mo.threads, 5, &bf16_note);
    }

    /* ---- model */
    g4_model_opts mo = o.mo;
    long max_v = 0;
    for (int i = 0; i < o.nv; i++) if (o.verify[i] > max_v) max_v = o.verify[i];
    long max_len = max_p > o.depth + max_n ? max_p : o.depth + max_n;   /* longest test, in positions */
    if (o.nv && o.depth + max_v + 1 > max_len) max_len = o.depth + max_v + 1;
    if (!mo.ctx) mo.ctx = (int)(max_len + 1);   /* +1: the warm-up step */
    mo.n_slots = (int)o.batch;
    if (o.nv) mo.verify_rows = (int)max_v + 1;
    if (mo.ctx < max_len)
        return cli_usage_error("bench", "--ctx %d is smaller than the longest test (%ld positions, --depth included)", mo.ctx, max_len);
    g4_model *m;
    double t_load = g4_now();
    int rc = cli_load_model(o.model, &mo, &m);
    if (rc) return rc < 0 ? 0 : rc;
    t_load = g4_now() - t_load;
    const g4_model_info *info = g4_model_get_info(m);
    const int V = info->vocab_size;
    g4_model_cost cost;
    g4_bench_model_cost(m, &cost);
    const double decode_bytes = cost.layer_matrix_bytes + cost.lm_head_bytes;
    const char *kpath = g4_model_kernel_path(m);
    /* --prefill-bf16 on the CPU's bf16 units is judged against their peak (none when it was not
     * measured: AMX), else against the fp32 one */
    const int bf16_units = g4_model_bf16_units(m);
    const double prefill_peak = o.mo.prefill_bf16 && bf16_units ? (bf16 > 0 ? bf16 : -1) : fma;

    long n_ids = max_len + (o.nv ? 72 : 0);   /* --verify's steps read past the depth */
    if (n_ids < 1) n_ids = 1;
    int32_t *ids = malloc((size_t)n_ids * sizeof *ids);
    const int B = (int)o.batch;
    int slots[256];
    int32_t step_ids[256], step_next[256];
    for (int b = 0; b < B; b++) slots[b] = b;
    float *logits = malloc((size_t)V * sizeof(float));
    bench_test tests[2 * MAX_TESTS];
    int nt = 0;
    g4_status st = ids && logits ? G4_OK : g4_fail(G4_ERR_NOMEM, "out of memory");
    uint64_t rng = (uint64_t)o.seed;
    for (long i = 0; ids && i < n_ids; i++) ids[i] = (int32_t)(lcg(&rng) % (uint32_t)V);

    /* warm-up: one decode step maps every weight page (file cache -> page tables) */
    double t_warm = g4_now();
    if (!st) {
        int slot = 0;
        g4_slot_reset(m, 0);
        int32_t next;
        st = g4_decode_argmax(m, 1, &slot, ids, &next);
    }
    t_warm = g4_now() - t_warm;
    const long long huge = g4_huge_mapped_bytes();   /* after the warm-up has mapped every page */

    /* a smaller buffer than the start-up read (>> L3 all the same), kept for the decode reps */
    g4_bw_probe *probe = NULL;
    if (!st && !o.no_peaks && o.nn > 0) st = g4_bw_probe_new(o.mo.threads, (size_t)256 << 20, &probe);

    for (int i = 0; !st && i < o.np + o.nn; i++) {
        bench_test *t = &tests[nt];
        memset(t, 0, sizeof *t);
        t->is_decode = i >= o.np;
        t->n_tokens = (int)(t->is_decode ? o.n[i - o.np] : o.p[i]);
        snprintf(t->name, sizeof t->name, "%s%d", t->is_decode ? "tg" : "pp", t->n_tokens);
        if (t->is_decode && B > 1) snprintf(t->name + strlen(t->name), sizeof t->name - strlen(t->name), "x%d", B);
        if (t->is_decode && o.depth) snprintf(t->name + strlen(t->name), sizeof t->name - strlen(t->name), "@d%ld", o.depth);
        t->reps = (int)o.reps;
        for (int r = 0; !st && r < t->reps; r++) {
            for (int b = 0; b < B; b++) g4_slot_reset(m, b);
            for (int b = 0; !st && t->is_decode && o.depth && b < B; b++) {   /* untimed: the context */
                int32_t next;
                st = g4_prefill_argmax(m, b, ids, (int)o.depth, &next);
            }
            if (st) break;
            t->reps_limit[r] = o.no_peaks ? 0
                             : t->is_decode ? (probe ? g4_bw_probe_read(probe, 3) : 0)
                                            : adjacent_peak(prefill_peak, fma, bf16, o.mo.threads);
            double t0 = g4_now();
            /* greedy steps: with --tp N the ranks exchange only their argmax, as `run` does */
            if (!t->is_decode) {
                int32_t next;
                st = g4_prefill_argmax(m, 0, ids, t->n_tokens, &next);
            } else {   /* B slots a step, each on its own stretch of the random ids */
                for (int k = 0; !st && k < t->n_tokens; k++) {
                    for (int b = 0; b < B; b++) step_ids[b] = ids[(k + 7 * b) % n_ids];
                    st = g4_decode_argmax(m, B, slots, step_ids, step_next);
                }
            }
            t->reps_tok_s[r] = (t->is_decode ? B : 1) * t->n_tokens / (g4_now() - t0);
        }
        if (st) break;
        double sorted[64];
        memcpy(sorted, t->reps_tok_s, (size_t)t->reps * sizeof(double));
        g4_sort_doubles(sorted, t->reps);
        t->tok_s = t->reps % 2 ? sorted[t->reps / 2] : 0.5 * (sorted[t->reps / 2 - 1] + sorted[t->reps / 2]);
        const int n = t->n_tokens;
        if (!t->is_decode) {
            /* every token goes through every layer matrix; the LM head runs for the last one */
            double flops = 2.0 * cost.layer_params * n + 2.0 * cost.lm_head_params + g4_bench_attn_flops(m, 0, n);
            t->flops_per_token = flops / n;
            t->bytes_per_token = (cost.layer_matrix_bytes + cost.lm_head_bytes / n);
            t->achieved = t->tok_s * t->flops_per_token / 1e9;
            t->roofline_tok_s = prefill_peak > 0 ? prefill_peak * 1e9 / t->flops_per_token : -1;
            t->fraction_adjacent = adjacent_fraction(t, t->flops_per_token);
        } else {
            const int d0 = (int)o.depth;
            t->flops_per_token = 2.0 * (cost.layer_params + cost.lm_head_params) + g4_bench_attn_flops(m, d0, n) / n;
            t->bytes_per_token = decode_bytes / B;   /* one read of the weights a step serves B tokens */
            t->kv_bytes_per_token = g4_bench_kv_read_bytes(m, d0, n) / n;
            t->fraction_with_kv = bw.gbps > 0 ? t->tok_s * (t->bytes_per_token + t->kv_bytes_per_token) / 1e9 / bw.gbps : -1;
            t->achieved = t->tok_s * t->bytes_per_token / 1e9;
            t->roofline_tok_s = bw.gbps > 0 ? bw.gbps * 1e9 / t->bytes_per_token : -1;
            t->fraction_adjacent = adjacent_fraction(t, t->bytes_per_token);
        }
        t->fraction = t->roofline_tok_s > 0 ? t->tok_s / t->roofline_tok_s : -1;
        if (!t->is_decode) t->fraction_with_kv = -1;
        nt++;
    }
    g4_bw_probe_free(probe);
    cli_verify_timing vt[MAX_TESTS];
    if (!st && o.nv) st = cli_bench_verify(m, ids, n_ids, (int)o.depth, (int)o.reps, o.verify, o.nv, vt);
    if (st) {
        rc = cli_report(st);
        free(ids); free(logits);
        g4_model_free(m);
        return rc;
    }

    /* ---- human-readable report */
    printf("gemma4c bench: %s\n", o.model);
    printf("machine: %d threads, kernels %s; --tp %d (%s)\n", o.mo.threads, kpath, g4_model_get_info(m)->tp,
           o.mo.tp_backend == G4_TP_MPI ? "mpi" : "threads");
    if (o.mo.act_q8) printf("matmuls over quantized weights: --act-q8 (int8 activations, Q8_0 / Q8_K blocks)\n");
    if (o.mo.prefill_bf16)
        printf("prefill: --prefill-bf16 (%s)\n", bf16_units ? "bf16 activations on the CPU's bf16 units"
                                                             : "no bf16 units here: bf16-rounded activations through the fp32 kernels");
    if (!o.no_peaks) {
        printf("  memory read bandwidth : %7.2f GB/s  (best of %d streaming reads of %zu MiB; median %.2f)\n",
               bw.gbps, bw.reps, bw.bytes >> 20, bw.median_gbps);
        printf("  fp32 FMA peak         : %7.1f GFLOP/s  (%s, register-only)\n", fma, fma_isa);
        if (bf16 > 0) printf("  bf16 peak             : %7.1f GFLOP/s  (%s)\n", bf16, bf16_note);
        else printf("  bf16 peak             :     n/a  (%s)\n", bf16_note);
    }
    printf("model: %s, %d layers, hidden %d, vocab %d; %.3f GB mapped, load %.2f s, warm-up step %.2f s\n",
           info->architecture, info->n_layers, info->hidden_size, V, info->weight_bytes / 1e9, t_load, t_warm);
    if (huge >= 0)
        printf("  in 2 MiB pages: %.3f GB (%.0f%% of the weights; 4 KiB pages break every weight stream)%s\n",
               huge / 1e9, 100.0 * (double)huge / (double)info->weight_bytes,
               info->weights_copied ? "; copied at load: the page cache held them mostly in 4 KiB pages" : "");
    if (info->weights_reread_bytes)
        printf("  re-read at load: %.3f GB the page cache held in 4 KiB pages, now in 2 MiB ones\n",
               info->weights_reread_bytes / 1e9);
    printf("  weights read per decode token: %.3f GB (layer matrices %.3f GB + LM head %.3f GB); "
           "%.1f M params + %.1f M LM head\n", decode_bytes / 1e9, cost.layer_matrix_bytes / 1e9,
           cost.lm_head_bytes / 1e9, cost.layer_params / 1e6, cost.lm_head_params / 1e6);
    for (int i = 0; i < nt; i++) {
        const bench_test *t = &tests[i];
        printf("  %-6s %9.2f tok/s", t->name, t->tok_s);
        if (t->is_decode) {
            printf("  = %6.2f GB/s of weights", t->achieved);
            if (t->fraction >= 0)
                printf("; roofline %.2f tok/s (%.2f GB/s / %.3f GB) -> %5.1f%% of bandwidth", t->roofline_tok_s,
                       bw.gbps, t->bytes_per_token / 1e9, 100 * t->fraction);
            printf("  [+KV reads %.1f MB/token]", t->kv_bytes_per_token / 1e6);
            if (o.depth && t->fraction_with_kv >= 0)
                printf("\n         %5.1f%% of bandwidth counting the KV reads too", 100 * t->fraction_with_kv);
            if (t->fraction_adjacent >= 0) {
                printf("\n         %5.1f%% of the bandwidth read just before each rep (median; GB/s:", 100 * t->fraction_adjacent);
                for (int r = 0; r < t->reps; r++) printf(" %.2f", t->reps_limit[r]);
                printf(")");
            }
        } else {
            printf("  = %6.1f GFLOP/s", t->achieved);
            if (t->fraction >= 0)
                printf("; roofline %.1f tok/s (%.1f GFLOP/s / %.3f GFLOP/token) -> %5.1f%% of %s peak",
                       t->roofline_tok_s, prefill_peak, t->flops_per_token / 1e9, 100 * t->fraction,
                       prefill_peak == fma ? "fp32 FMA" : "bf16");
            if (t->fraction_adjacent >= 0) {
                printf("\n         %5.1f%% of the %s peak measured just before each rep (median; GFLOP/s:",
                       100 * t->fraction_adjacent, prefill_peak == fma ? "fp32 FMA" : "bf16");
                for (int r = 0; r < t->reps; r++) printf(" %.1f", t->reps_limit[r]);
                printf(")");
            }
        }
        printf("  reps:");
        for (int r = 0; r < t->reps; r++) printf(" %.2f", t->reps_tok_s[r]);
        printf("\n");
    }

    if (o.nv) {
        printf("speculative verify at position %ld (greedy; medians over %ld x 8 alternating pairs of steps, each undone):\n",
               o.depth, o.reps);
        for (int i = 0; i < o.nv; i++)
            printf("  K=%-2d %2d rows %8.3f ms  one-row decode %8.3f ms  ratio of pairs %.3f\n", vt[i].k, vt[i].k + 1,
                   1e3 * vt[i].step_s, 1e3 * vt[i].decode_s, vt[i].ratio);
    }

    /* ---- kernel-only timings (matmul on the model's own matrices, thread pool split) */
    static const char *groups[] = {"qkv", "o", "gateup", "down", "lm_head", "decode"};
    g4_kernel_timing kt[2][6];
    const int kT[2] = {1, o.mo.prefill_chunk};
    if (o.kernels) {
        printf("kernels alone (matmul only, each group swept over all layers, best of %ld sweeps; T=1 against a\n"
               "plain read of the same bytes on the same threads right before each sweep, median of the ratios;\n"
               "decode: every matmul of a decode step in the step's order, one stream larger than any L3):\n", o.reps);
        for (int a = 0; a < 2; a++)
            for (int g = 0; g < 6; g++) {
                if (a == 1 && g >= 4) { kt[a][g].T = 0; continue; }   /* prefill runs the LM head on one row */
                st = g4_bench_kernel(m, groups[g], kT[a], (int)o.reps, &kt[a][g]);
                if (st) { rc = cli_report(st); free(ids); free(logits); g4_model_free(m); return rc; }
                const g4_kernel_timing *k = &kt[a][g];
                printf("  T=%-3d %-8s %2d x [%6d x %5d] %9.2f ms  %7.2f GB/s  %7.1f GFLOP/s", k->T, groups[g], k->n_calls,
                       k->rows, k->cols, 1e3 * k->seconds, k->bytes / k->seconds / 1e9, k->flops / k->seconds / 1e9);
                if (a == 0 && bw.gbps > 0) printf("  (%5.1f%% of bandwidth)", 100 * k->bytes / k->seconds / 1e9 / bw.gbps);
                if (a == 0 && k->of_read > 0)
                    printf("  %5.1f%% of a plain read of the same bytes (%.2f GB/s)", 100 * k->of_read,
                           k->bytes / k->read_seconds / 1e9);
                if (a == 1 && fma > 0) printf("  (%5.1f%% of fp32 peak)", 100 * k->flops / k->seconds / 1e9 / fma);
                printf("\n");
            }
    }

    /* ---- one JSON line with the same figures */
    FILE *f = stdout;
    fputs("{\"bench\":\"gemma4c\",\"model\":", f);
    json_str(f, o.model);
    fprintf(f, ",\"act_q8\":%s", o.mo.act_q8 || o.mo.numerics == G4_NUMERICS_GGML ? "true" : "false");
    fprintf(f, ",\"prefill_bf16\":%s,\"prefill_peak\":\"%s\"", o.mo.prefill_bf16 ? "true" : "false",
            prefill_peak == fma ? "fp32" : prefill_peak > 0 ? "bf16" : "none");
    fprintf(f, ",\"numerics\":\"%s\"", o.mo.numerics == G4_NUMERICS_GGML ? "ggml" : "exact");
    fprintf(f, ",\"full_logits\":%s", o.mo.tuning.full_logits == 1 ? "true" : "false");
    fprintf(f, ",\"kv_type\":\"%s\",\"kv_bytes\":%zu", g4_kv_type_name(o.mo.kv_type), info->kv_bytes);
    fprintf(f, ",\"batch\":%d,\"depth\":%ld", B, o.depth);
    fprintf(f, ",\"threads\":%d,\"tp\":%d,\"tp_backend\":\"%s\",\"kernels\":", o.mo.threads,
            g4_model_get_info(m)->tp, o.mo.tp_backend == G4_TP_MPI ? "mpi" : "threads");
    json_str(f, kpath);
    fputs(",\"machine\":{\"read_bw_gbs\":", f); json_num(f, o.no_peaks ? -1 : bw.gbps);
    fputs(",\"read_bw_median_gbs\":", f); json_num(f, o.no_peaks ? -1 : bw.median_gbps);
    fprintf(f, ",\"read_bw_buffer_bytes\":%zu,\"fp32_fma_gflops\":", bw.bytes); json_num(f, fma);
    fputs(",\"fp32_fma_isa\":", f); json_str(f, fma_isa);
    fputs(",\"bf16_gflops\":", f); json_num(f, bf16 > 0 ? bf16 : -1);
    fputs(",\"bf16_note\":", f); json_str(f, bf16_note);
    fputs("},\"model_info\":{\"architecture\":", f); json_str(f, info->architecture);
    fprintf(f, ",\"n_layers\":%d,\"hidden\":%d,\"vocab\":%d,\"weight_bytes_mapped\":%zu,"
               "\"decode_weight_bytes_per_token\":%.0f,\"layer_matrix_bytes\":%.0f,\"lm_head_bytes\":%.0f,"
               "\"layer_params\":%.0f,\"lm_head_params\":%.0f,\"prefill_chunk\":%ld,\"ctx\":%d,\"rss_bytes\":%ld,"
               "\"load_s\":%.3f,\"huge_page_bytes\":%lld,\"weights_copied\":%s,\"weights_reread_bytes\":%zu,"
               "\"huge_window_bytes\":%zu}",
            info->n_layers, info->hidden_size, V, info->weight_bytes, decode_bytes, cost.layer_matrix_bytes,
            cost.lm_head_bytes, cost.layer_params, cost.lm_head_params, (long)o.mo.prefill_chunk, info->ctx, rss_bytes(), t_load, huge,
            info->weights_copied ? "true" : "false", info->weights_reread_bytes, info->huge_window_bytes);
    fputs(",\"tests\":[", f);
    for (int i = 0; i < nt; i++) {
        const bench_test *t = &tests[i];
        fprintf(f, "%s{\"test\":\"%s\",\"kind\":\"%s\",\"n_tokens\":%d,\"tok_s\":", i ? "," : "", t->name,
                t->is_decode ? "decode" : "prefill", t->n_tokens);
        json_num(f, t->tok_s);
        fputs(",\"tok_s_reps\":[", f);
        for (int r = 0; r < t->reps; r++) { if (r) fputc(',', f); json_num(f, t->reps_tok_s[r]); }
        fprintf(f, "],\"flops_per_token\":%.6g,\"weight_bytes_per_token\":%.6g", t->flops_per_token, t->bytes_per_token);
        if (t->is_decode) {
            fprintf(f, ",\"kv_bytes_per_token\":%.6g,\"achieved_gbs\":", t->kv_bytes_per_token);
            json_num(f, t->achieved);
        } else {
            fputs(",\"achieved_gflops\":", f);
            json_num(f, t->achieved);
        }
        fputs(",\"roofline_tok_s\":", f); json_num(f, t->roofline_tok_s);
        fputs(",\"roofline_fraction\":", f); json_num(f, t->fraction);
        fputs(",\"roofline_fraction_adjacent\":", f); json_num(f, t->fraction_adjacent);
        if (t->is_decode) { fputs(",\"roofline_fraction_with_kv\":", f); json_num(f, t->fraction_with_kv); }
        fputs(t->is_decode ? ",\"read_bw_before_reps_gbs\":[" : ",\"peak_before_reps_gflops\":[", f);
        for (int r = 0; r < t->reps; r++) { if (r) fputc(',', f); json_num(f, t->reps_limit[r]); }
        fputc(']', f);
        fputc('}', f);
    }
    fputc(']', f);
    if (o.nv) {
        fputs(",\"verify\":[", f);
        for (int i = 0; i < o.nv; i++)
            fprintf(f, "%s{\"k\":%d,\"rows\":%d,\"step_s\":%.6g,\"decode_step_s\":%.6g,\"ratio\":%.6g}", i ? "," : "",
                    vt[i].k, vt[i].k + 1, vt[i].step_s, vt[i].decode_s, vt[i].ratio);
        fputc(']', f);
    }
    if (o.kernels) {
        fputs(",\"kernels_only\":[", f);
        for (int a = 0; a < 2; a++)
            for (int g = 0; g < 6; g++)
                if (kt[a][g].T) {
                    const g4_kernel_timing *k = &kt[a][g];
                    fprintf(f, "%s{\"group\":\"%s\",\"T\":%d,\"calls\":%d,\"rows\":%d,\"cols\":%d,\"seconds\":%.6g,\"gbs\":%.6g,\"gflops\":%.6g",
                            a + g ? "," : "", groups[g], k->T, k->n_calls, k->rows, k->cols, k->seconds,
                            k->bytes / k->seconds / 1e9, k->flops / k->seconds / 1e9);
                    fputs(",\"read_same_bytes_gbs\":", f); json_num(f, k->read_seconds > 0 ? k->bytes / k->read_seconds / 1e9 : -1);
                    fputs(",\"fraction_of_read_same_bytes\":", f); json_num(f, k->of_read);
                    fputc('}', f);
                }
        fputc(']', f);
    }
    fputs("}\n", f);

    free(ids);
    free(logits);
    g4_model_free(m);
    return 0;
}
