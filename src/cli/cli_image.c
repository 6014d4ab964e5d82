/* cli_image.c — `gemma4c image`: one image through the image processor (and, with -m, the vision
 * embedder), printing its geometry as JSON and writing the resized pixels, patches, positions or
 * soft tokens to files. Owns only option parsing and I/O; the work is g4_image_* (src/media). */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const help =
    "usage: gemma4c image --image FILE [-m MODEL] [options]\n"
    "  Prepares FILE (PNG, JPEG, WebP, GIF first frame) as Gemma 4 unified's image processor does and\n"
    "  prints its geometry as JSON; with -m, also runs the model's vision embedder.\n"
    "  --image FILE             the image\n"
    "  -m, --model MODEL        model: its processor settings (processor_config.json) and vision weights\n"
    "  --max-soft-tokens N      70, 140, 280, 560 or 1120 (default: the model's processor setting, else 280)\n"
    "  --patch-size N           processor patch size (default: the model's, else 16)\n"
    "  --pooling-kernel N       patches merged per side (default: the model's, else 3)\n"
    "  --max-image-pixels N     refuse images declaring more pixels (default 100000000)\n"
    "  --pixels-out FILE        write the resized RGB bytes (height x width x 3)\n"
    "  --patches-out FILE       write the merged patches (float32, n_patches x patch_dim)\n"
    "  --positions-out FILE     write the patch positions (int32 x, y per patch)\n"
    "  -o, --out FILE           write the soft tokens (float32, n_patches x hidden; needs -m)\n";

static int write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        if (f) fclose(f);
        return cli_report(g4_fail(G4_ERR_IO, "%s: cannot write", path));
    }
    return fclose(f) ? cli_report(g4_fail(G4_ERR_IO, "%s: cannot write", path)) : 0;
}

int cli_image(int argc, char **argv) {
    const char *cmd = "image", *image = NULL, *model = NULL, *pix_out = NULL, *pat_out = NULL,
               *pos_out = NULL, *emb_out = NULL;
    long soft = 0, patch = 0, pool = 0, maxpx = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **sv = NULL;
        long *iv = NULL, lo = 1, hi = 1L << 20;
        if (cli_is_help(a)) { fputs(help, stdout); return 0; }
        if (!strcmp(a, "--image")) sv = &image;
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) sv = &model;
        else if (!strcmp(a, "--pixels-out")) sv = &pix_out;
        else if (!strcmp(a, "--patches-out")) sv = &pat_out;
        else if (!strcmp(a, "--positions-out")) sv = &pos_out;
        else if (!strcmp(a, "-o") || !strcmp(a, "--out")) sv = &emb_out;
        else if (!strcmp(a, "--max-soft-tokens")) iv = &soft;
        else if (!strcmp(a, "--patch-size")) iv = &patch;
        else if (!strcmp(a, "--pooling-kernel")) iv = &pool;
        else if (!strcmp(a, "--max-image-pixels")) { iv = &maxpx; hi = 1L << 40; }
        else return cli_usage_error(cmd, "unknown option '%s' (gemma4c image --help)", a);
        if (i + 1 >= argc) return cli_usage_error(cmd, "%s expects a value", a);
        if (sv) *sv = argv[++i];
        else if (!cli_parse_int(cmd, a, argv[++i], lo, hi, iv)) return 2;
    }
    if (!image) return cli_usage_error(cmd, "--image FILE is required");
    if (emb_out && !model) return cli_usage_error(cmd, "-o writes soft tokens: it needs -m MODEL");

    g4_image_opts io;
    g4_image_opts_default(&io);
    struct stat sb;
    if (model && stat(model, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        g4_status st = g4_image_opts_load(model, &io);
        if (st) return cli_report(st);
    }
    if (soft) io.max_soft_tokens = (int)soft;
    if (patch) io.patch_size = (int)patch;
    if (pool) io.pooling_kernel = (int)pool;
    if (maxpx) io.max_pixels = maxpx;

    g4_image *im;
    g4_status st = g4_image_load(image, &io, &im);
    if (st) return cli_report(st);
    int rc = 0;
    if (!rc && pix_out) rc = write_file(pix_out, im->pixels, (size_t)im->width * im->height * 3);
    if (!rc && pat_out) rc = write_file(pat_out, im->patches, sizeof(float) * (size_t)im->n_patches * im->patch_dim);
    if (!rc && pos_out) rc = write_file(pos_out, im->positions, sizeof(int32_t) * 2 * (size_t)im->n_patches);
    int hidden = 0;
    if (!rc && model) {
        g4_model_opts mo;
        g4_model_opts_default(&mo);
        g4_model *m;
        if ((st = g4_model_load(model, &mo, &m))) rc = cli_report(st);
        else {
            hidden = g4_model_get_info(m)->hidden_size;
            float *emb = malloc(sizeof(float) * (size_t)im->n_patches * hidden);
            if (!emb) rc = cli_report(g4_fail(G4_ERR_NOMEM, "out of memory"));
            else if ((st = g4_image_embed(m, im, emb))) rc = cli_report(st);
            else if (emb_out) rc = write_file(emb_out, emb, sizeof(float) * (size_t)im->n_patches * hidden);
            free(emb);
            g4_model_free(m);
        }
    }
    if (!rc) {
        printf("{\"src_width\": %d, \"src_height\": %d, \"width\": %d, \"height\": %d, \"grid_w\": %d, "
               "\"grid_h\": %d, \"n_patches\": %d, \"patch_dim\": %d, \"max_soft_tokens\": %d",
               im->src_width, im->src_height, im->width, im->height, im->grid_w, im->grid_h,
               im->n_patches, im->patch_dim, io.max_soft_tokens);
        if (hidden) printf(", \"hidden\": %d", hidden);
        printf("}\n");
        if (fflush(stdout)) rc = 1;
    }
    g4_image_free(im);
    return rc;
}
