/* cli_pack.c — `gemma4c pack`: writes a HuggingFace checkpoint directory as one `.g4c` file split
 * for --tp ranks, optionally converted / quantized. Owns only option parsing and the summary;
 * the format is src/io/pack.h, the writer src/convert/pack_write.c. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: gemma4c pack -m HF_DIR -o MODEL.g4c [--tp N] [--dtype bf16|f16|f32|q8_0|q4_0|q4_k] [--threads N]\n"
            "  Packs config, tokenizer files and weights into one file laid out per tensor-parallel rank\n"
            "  (each rank maps only its own 2 MiB-aligned segment). --dtype converts the 2-D weight\n"
            "  matrices (default: keep the checkpoint's dtype); norms and layer scalars stay as stored.\n"
            "  A matrix whose (sliced) rows are not a multiple of the quantization block falls back to\n"
            "  Q8_0, or to its stored dtype. The vision and audio embedders stay as stored, in rank 0's\n"
            "  segment, with the processor settings; a tied lm_head is left out.\n");
}

int cli_pack(int argc, char **argv) {
    const char *model = NULL, *out = NULL;
    long tp = 1, threads = 0;
    int dtype = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "-m") || !strcmp(a, "--model") || !strcmp(a, "-o") || !strcmp(a, "--output") ||
             !strcmp(a, "--tp") || !strcmp(a, "--dtype") || !strcmp(a, "--threads") || !strcmp(a, "-t")) &&
            i + 1 >= argc)
            return cli_usage_error("pack", "%s expects a value", a);
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = argv[++i];
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) out = argv[++i];
        else if (!strcmp(a, "--tp")) { if (!cli_parse_int("pack", a, argv[++i], 1, 64, &tp)) return 2; }
        else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) { if (!cli_parse_int("pack", a, argv[++i], 0, 1024, &threads)) return 2; }
        else if (!strcmp(a, "--dtype")) {
            const char *v = argv[++i];
            if (strcmp(v, "keep") && (dtype = g4_pack_dtype_parse(v)) < 0)
                return cli_usage_error("pack", "--dtype '%s': expected bf16, f16, f32, q8_0, q4_0, q4_k or keep", v);
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else {
            return cli_usage_error("pack", "unknown option '%s' (see gemma4c pack --help)", a);
        }
    }
    if (!model || !out) return cli_usage_error("pack", "-m HF_DIR and -o MODEL.g4c are required");
    g4_pack_write_opts o = {.hf_dir = model, .out_path = out, .tp = (int)tp, .dtype = dtype,
                            .threads = (int)threads, .verbose = 1};
    g4_pack_write_stats s;
    double t0 = g4_now();
    g4_status st = g4_pack_write(&o, &s);
    if (st) return cli_report(st);
    fprintf(stderr, "pack: wrote %s: %llu bytes, tp %ld, %d tensors in rank 0 (%d of them multimodal, as stored; %d left out), "
            "dtype %s, %.2f s\n", out, (unsigned long long)s.file_size, tp, s.n_tensors, s.n_multimodal, s.n_skipped,
            g4_pack_dtype_name(dtype), g4_now() - t0);
    for (long r = 0; r < tp; r++)
        fprintf(stderr, "pack:   rank %ld segment %llu bytes\n", r, (unsigned long long)s.seg_bytes[r]);
    return 0;
}
