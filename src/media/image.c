/* image.c — g4_image_*: a file to the image processor's outputs (Gemma4UnifiedImageProcessor):
 * decode (decode.c), target size and resize (resize.c), rescale by 1/255 and the cut into merged
 * patches with their (x, y) positions; plus the processor settings read from a model (a directory
 * or a .g4c pack). */
#include "media/media.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/source.h"
#include "model/mmproj.h"

void g4_image_opts_default(g4_image_opts *o) {
    o->max_soft_tokens = 280;
    o->patch_size = 16;
    o->pooling_kernel = 3;
    o->max_pixels = G4_IMAGE_MAX_PIXELS_DEFAULT;
}

static int soft_tokens_ok(long v) { return v == 70 || v == 140 || v == 280 || v == 560 || v == 1120; }

static g4_status check_opts(const g4_image_opts *o) {
    if (!soft_tokens_ok(o->max_soft_tokens))
        return g4_fail(G4_ERR_INPUT, "max_soft_tokens %d: must be one of 70, 140, 280, 560, 1120", o->max_soft_tokens);
    /* merged patches of at most 512 pixels a side keep patch_dim and the buffers in int range */
    if (o->patch_size < 1 || o->pooling_kernel < 1 || (long)o->patch_size * o->pooling_kernel > 512)
        return g4_fail(G4_ERR_INPUT, "image patch_size %d x pooling_kernel_size %d: merged patches must be 1 to 512 pixels a side",
                       o->patch_size, o->pooling_kernel);
    if (o->max_pixels < 1) return g4_fail(G4_ERR_INPUT, "max image pixels %lld: must be positive", (long long)o->max_pixels);
    return G4_OK;
}

static g4_status read_int_field(json_t *obj, const char *file, const char *key, int *out) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return G4_OK;
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 1 << 20)
        return g4_fail(G4_ERR_INPUT, "%s: field '%s' must be a positive integer", file, key);
    *out = (int)json_integer_value(v);
    return G4_OK;
}

/* The JSON file `name` of a model (a directory or a .g4c pack, io/source.h): *root NULL when
 * it has no such file; *where names it in messages. */
static g4_status load_model_json(g4_source *src, const char *name, json_t **root, const char **where) {
    const char *data;
    size_t len;
    *root = NULL;
    g4_status st = g4_source_file(src, name, &data, &len, where);
    if (st || !data) return st;
    json_error_t je;
    if (!(*root = json_loadb(data, len, 0, &je)))
        return g4_fail(G4_ERR_INPUT, "%s: not valid JSON: %s (line %d)", *where, je.text, je.line);
    return G4_OK;
}

g4_status g4_image_opts_load(const char *dir, g4_image_opts *o) {
    g4_image_opts_default(o);
    g4_source *src;
    if (g4_source_open(dir, &src)) return G4_OK;   /* no model there: the defaults */
    if (g4_source_kind_of(src) == G4_SOURCE_GGUF) {   /* an mmproj: its patch geometry */
        g4_status st = G4_OK;
        const g4_gguf *g = g4_source_gguf(src, &st);
        g4_mmproj_geom geo;
        if (g && g4_is_mmproj(g) && !(st = g4_mmproj_geom_read(g, &geo)) && geo.has_vision) {
            o->patch_size = geo.patch_size;
            o->pooling_kernel = geo.pooling_kernel;
        }
        g4_source_close(src);
        return st;
    }
    /* the model's own patch geometry first (vision_config), so that a checkpoint without
     * processor files still gets patches its embedder reads; the processor files override it */
    const char *path;
    json_t *root;
    g4_status st = load_model_json(src, "config.json", &root, &path);
    json_t *vc = root ? json_object_get(root, "vision_config") : NULL;
    if (!st && json_is_object(vc) && !(st = read_int_field(vc, path, "patch_size", &o->patch_size)))
        st = read_int_field(vc, path, "pooling_kernel_size", &o->pooling_kernel);
    json_decref(root);
    static const char *const names[2] = {"processor_config.json", "preprocessor_config.json"};
    for (int k = 0; k < 2 && !st; k++) {
        if ((st = load_model_json(src, names[k], &root, &path)) || !root) continue;
        json_t *ip = k == 0 ? json_object_get(root, "image_processor") : root;
        const int found = ip && json_is_object(ip);
        if (found) {
            if (!(st = read_int_field(ip, path, "patch_size", &o->patch_size)) &&
                !(st = read_int_field(ip, path, "pooling_kernel_size", &o->pooling_kernel)) &&
                !(st = read_int_field(ip, path, "max_soft_tokens", &o->max_soft_tokens)) &&
                !soft_tokens_ok(o->max_soft_tokens))
                st = g4_fail(G4_ERR_INPUT, "%s: max_soft_tokens %d must be one of 70, 140, 280, 560, 1120", path, o->max_soft_tokens);
        }
        json_decref(root);
        if (found) break;
    }
    g4_source_close(src);
    return st;
}

void g4_image_free(g4_image *im) {
    if (!im) return;
    free(im->pixels);
    free(im->patches);
    free(im->positions);
    free(im);
}

g4_status g4_image_load_mem(const void *data, size_t n, const char *name, const g4_image_opts *o, g4_image **out) {
    g4_status st = check_opts(o);
    if (st) return st;
    int w, h;
    uint8_t *rgb;
    if ((st = media_decode(data, n, name, o->max_pixels, &w, &h, &rgb))) return st;
    int p = o->patch_size, k = o->pooling_kernel, side = p * k;
    int th, tw;
    if ((st = media_target_size(h, w, p, o->max_soft_tokens * k * k, k, &th, &tw))) {
        char why[512];
        snprintf(why, sizeof why, "%s", g4_last_error());
        free(rgb);
        return g4_fail(st, "%s: %s", name, why);
    }
    g4_image *im = calloc(1, sizeof *im);
    if (!im) { free(rgb); return g4_fail(G4_ERR_NOMEM, "out of memory"); }
    im->src_width = w;
    im->src_height = h;
    im->width = tw;
    im->height = th;
    im->grid_w = tw / side;
    im->grid_h = th / side;
    im->n_patches = im->grid_w * im->grid_h;
    im->patch_dim = side * side * 3;
    im->pixels = malloc((size_t)tw * th * 3);
    im->patches = malloc(sizeof(float) * (size_t)im->n_patches * im->patch_dim);
    im->positions = malloc(sizeof(int32_t) * 2 * (size_t)im->n_patches);
    if (!im->pixels || !im->patches || !im->positions) {
        free(rgb);
        g4_image_free(im);
        return g4_fail(G4_ERR_NOMEM, "out of memory for a %dx%d image", tw, th);
    }
    st = media_resize_bicubic_aa(rgb, w, h, im->pixels, tw, th);
    free(rgb);
    if (st) { g4_image_free(im); return st; }
    /* rescale: the uint8 tensor times the Python float 1/255, computed in float32 */
    const float scale = (float)(1.0 / 255.0);
    float lut[256];
    for (int v = 0; v < 256; v++) lut[v] = (float)v * scale;
    /* patches_merge's order: merged patches row-major; inside one, its side x side pixels in
     * (y, x, channel) order; position (x, y) of the merged patch */
    for (int gy = 0; gy < im->grid_h; gy++) {
        for (int gx = 0; gx < im->grid_w; gx++) {
            int idx = gy * im->grid_w + gx;
            float *dst = im->patches + (size_t)idx * im->patch_dim;
            for (int y = 0; y < side; y++) {
                const uint8_t *row = im->pixels + ((size_t)(gy * side + y) * tw + (size_t)gx * side) * 3;
                for (int x = 0; x < side * 3; x++) *dst++ = lut[row[x]];
            }
            im->positions[2 * idx] = gx;
            im->positions[2 * idx + 1] = gy;
        }
    }
    *out = im;
    return G4_OK;
}

g4_status g4_image_load(const char *path, const g4_image_opts *o, g4_image **out) {
    g4_status st = check_opts(o);
    if (st) return st;
    FILE *f = fopen(path, "rb");
    if (!f) return g4_fail(G4_ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return g4_fail(G4_ERR_INPUT, "%s: not a regular file", path);
    }
    size_t n = (size_t)sb.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) { fclose(f); return g4_fail(G4_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, n); }
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    if (got != n) { free(buf); return g4_fail(G4_ERR_IO, "%s: read failed", path); }
    st = g4_image_load_mem(buf, n, path, o, out);
    free(buf);
    return st;
}
