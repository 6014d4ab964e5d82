/* media.h — what src/media shares inside the library: decoding an image file to RGB exactly as
 * transformers' processor sees it (PIL's open + convert_to_rgb), and the processor's resize.
 * The public face (g4_image_*) is in gemma4c.h. */
#ifndef G4_MEDIA_H
#define G4_MEDIA_H

#include <stddef.h>
#include <stdint.h>

#include "gemma4c.h"

/* Decodes a PNG, JPEG, WebP or GIF (first frame) held in memory to 8-bit RGB, row-major,
 * *rgb malloc'ed [h][w][3]. `name` names the file in errors. Images whose declared width * height
 * exceeds max_pixels are refused before any pixel memory is allocated. */
g4_status media_decode(const uint8_t *data, size_t n, const char *name, int64_t max_pixels,
                       int *w, int *h, uint8_t **rgb);

/* The processor's target size for an h x w image (get_aspect_ratio_preserving_size). */
g4_status media_target_size(int h, int w, int patch, int max_patches, int pool, int *th, int *tw);

/* torch's antialiased bicubic resize of uint8 images (the separable integer-weight kernel of
 * aten's UpSampleKernel.cpp): src [h][w][3] -> dst [th][tw][3]. */
g4_status media_resize_bicubic_aa(const uint8_t *src, int w, int h, uint8_t *dst, int tw, int th);

#endif
