/* fuzz_image.c — libFuzzer target for image decoding and preprocessing: any byte string goes
 * through g4_image_load_mem (format sniffing, the PNG / JPEG / WebP / GIF decoders and their
 * error paths, the pixel limit, resize and patches). It must be refused with G4_ERR_INPUT or give
 * an image whose geometry is consistent. The pixel limit is kept small so that no input can ask
 * for more than a few MiB. */
#include <assert.h>
#include <stdint.h>

#include "gemma4c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    g4_image_opts o;
    g4_image_opts_default(&o);
    o.max_pixels = 1 << 20;
    o.max_soft_tokens = size % 2 ? 70 : 140;
    g4_image *im = NULL;
    g4_status st = g4_image_load_mem(data, size, "fuzz", &o, &im);
    if (st == G4_OK) {
        assert(im->n_patches >= 1 && im->n_patches <= o.max_soft_tokens);
        assert(im->width == im->grid_w * 48 && im->height == im->grid_h * 48);
        assert(im->positions[2 * (im->n_patches - 1)] == im->grid_w - 1);
        g4_image_free(im);
    } else {
        assert(st == G4_ERR_INPUT);
    }
    return 0;
}
