/* cli_model_opts.c — the one parser of the model options that run, logits, bench, serve and chat
 * share (threads, context, prefill chunk, tensor parallelism, weight mapping, numerics and the
 * matmul layer's measuring knobs), and their help text. Owns no defaults: the caller's
 * g4_model_opts holds them when parsing starts. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const cli_model_opts_help =
    "model options (run, logits, bench, serve, chat):\n"
    "  --threads N, -t N     worker threads (default: all online CPUs)\n"
    "  --ctx N               context positions per slot\n"
    "  --prefill-chunk N     positions per prefill step\n"
    "  --tp N                tensor-parallel ranks; --tp-backend threads|mpi\n"
    "  --tp-timeout SECONDS  mpi: a rank that answers no collective within it fails the group (default 30; 0: wait)\n"
    "  --no-mmap | --mmap    copy the weights into huge pages at load | never copy (default: auto)\n"
    "  --act-q8              int8 activations for matmuls over quantized weights (as llama.cpp)\n"
    "  --numerics exact|ggml exact float32 (default) or llama.cpp's CPU arithmetic\n"
    "  --prefill-bf16        prompt rows' layer matmuls in bf16 (AMX / AVX512-BF16 where present)\n"
    "  --kv-type f32|bf16|f16|q8_0  KV cache storage (default f32, exact; bf16/f16 halve it, q8_0\n"
    "                        about quarters it; attention still sums in float32)\n"
    "  --mmproj FILE         llama.cpp's mmproj GGUF (images, audio) beside a GGUF model, as llama-server\n"
    "  measuring knobs (which matmul kernel a product takes; outputs may differ in the last bits):\n"
    "  --amx-pairs-rows N    inputs of up to N rows read the weights as AMX A tiles (0: never)\n"
    "  --amx-gemv-rows N|A-B decode inputs of rows 1..N (or A..B) take the AMX decode kernel (0: never)\n"
    "  --amx-gemv1-k-below K one row takes it only over weight rows shorter than K (0: never)\n"
    "  --profile             time the forward pass's phases; report on stderr at exit\n"
    "  --full-logits         greedy steps run the exact LM head over every row (the same tokens;\n"
    "                        default over Q4_K / Q6_K heads: an int8 pre-pass, then exact rows\n"
    "                        only where the token can be)\n";

/* "N" (rows 1..N, 0: never) or "A-B" into min/max rows of the AMX decode kernel. */
static int parse_gemv_rows(const char *cmd, const char *v, g4_tuning *t) {
    char *end = NULL;
    errno = 0;
    long a = strtol(v, &end, 10), b;
    if (end == v || a < 0 || a > 4096 || errno) goto bad;
    if (!*end) {
        t->amx_gemv_min_rows = a ? 1 : 0;
        t->amx_gemv_max_rows = (int)a;
        return 1;
    }
    if (*end != '-') goto bad;
    {
        const char *p = end + 1;
        b = strtol(p, &end, 10);
        if (end == p || *end || b < a || b > 4096 || a < 1 || errno) goto bad;
    }
    t->amx_gemv_min_rows = (int)a;
    t->amx_gemv_max_rows = (int)b;
    return 1;
bad:
    cli_usage_error(cmd, "--amx-gemv-rows expects N (rows 1..N, 0: never) or A-B with 1 <= A <= B, got '%s'", v);
    return 0;
}

int cli_parse_model_opt(const char *cmd, int argc, char **argv, int *i, g4_model_opts *mo) {
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    long n;
    static const char *const with_value[] = {"--threads", "-t", "--ctx", "--prefill-chunk", "--tp", "--tp-backend",
                                             "--tp-timeout",
                                             "--numerics", "--amx-pairs-rows", "--amx-gemv-rows", "--amx-gemv1-k-below",
                                             "--mmproj", "--kv-type"};
    int takes_value = 0;
    for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++) takes_value |= !strcmp(a, with_value[k]);
    if (takes_value) {
        if (!v) return cli_usage_error(cmd, "%s needs a value", a), -1;
        ++*i;
    }
#define INTV(lo, hi, dst) do { if (!cli_parse_int(cmd, a, v, lo, hi, &n)) return -1; dst = (int)n; return 1; } while (0)
    if (!strcmp(a, "--threads") || !strcmp(a, "-t")) INTV(0, 4096, mo->threads);
    if (!strcmp(a, "--ctx")) INTV(1, 1 << 24, mo->ctx);
    if (!strcmp(a, "--prefill-chunk")) INTV(1, 1 << 16, mo->prefill_chunk);
    if (!strcmp(a, "--tp")) INTV(1, 64, mo->tp);
    if (!strcmp(a, "--tp-timeout")) {
        if (!cli_parse_int(cmd, a, v, 0, 86400, &n)) return -1;
        mo->tp_timeout_ms = 1000 * (int)n;
        return 1;
    }
    if (!strcmp(a, "--amx-pairs-rows")) INTV(0, 1 << 16, mo->tuning.amx_pairs_rows);
    if (!strcmp(a, "--amx-gemv1-k-below")) INTV(0, 1 << 24, mo->tuning.amx_gemv1_k_below);
#undef INTV
    if (!strcmp(a, "--amx-gemv-rows")) return parse_gemv_rows(cmd, v, &mo->tuning) ? 1 : -1;
    if (!strcmp(a, "--tp-backend")) return cli_parse_tp_backend(cmd, v, &mo->tp_backend) ? 1 : -1;
    if (!strcmp(a, "--numerics")) return cli_parse_numerics(cmd, v, &mo->numerics) ? 1 : -1;
    if (!strcmp(a, "--mmproj")) { mo->mmproj = v; return 1; }
    if (!strcmp(a, "--kv-type")) {
        for (int t = 0; t < G4_KV_TYPES; t++)
            if (!strcmp(v, g4_kv_type_name(t))) { mo->kv_type = t; return 1; }
        return cli_usage_error(cmd, "--kv-type expects f32, bf16, f16 or q8_0, got '%s'", v), -1;
    }
    if (!strcmp(a, "--no-mmap")) { mo->no_mmap = 1; return 1; }
    if (!strcmp(a, "--mmap")) { mo->no_mmap = -1; return 1; }
    if (!strcmp(a, "--act-q8")) { mo->act_q8 = 1; return 1; }
    if (!strcmp(a, "--prefill-bf16")) { mo->prefill_bf16 = 1; return 1; }
    if (!strcmp(a, "--profile")) { mo->tuning.profile = 1; return 1; }
    if (!strcmp(a, "--full-logits")) { mo->tuning.full_logits = 1; return 1; }
    return 0;
}

int cli_is_help(const char *a) { return !strcmp(a, "-h") || !strcmp(a, "--help"); }
