/* decode.c — image files to 8-bit RGB as transformers' processor receives them from PIL:
 * Image.open, then convert_to_rgb (an image with an alpha band or a transparency entry is made
 * RGBA and composited over opaque white; anything else is PIL's convert("RGB")). PNG (libpng),
 * JPEG (libjpeg-turbo), WebP (libwebp) and GIF (giflib, first frame). Owns sniffing the format,
 * the pixel-count limit and every decoder's error path; nothing here resizes. */
#include "media/media.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gif_lib.h>
#include <jpeglib.h>
#include <jerror.h>
#include <png.h>
#include <webp/decode.h>
#include <webp/demux.h>

/* An RGBA canvas being filled by a decoder; has_alpha as PIL decides it (an alpha band or a
 * transparency entry), which is what sends the image through the white compositing. */
typedef struct {
    int w, h, has_alpha;
    uint8_t *px; /* [h][w][4] */
} canvas;

static g4_status check_size(const char *name, const char *fmt, int64_t w, int64_t h, int64_t max_pixels) {
    if (w <= 0 || h <= 0)
        return g4_fail(G4_ERR_INPUT, "%s: %s image declares an empty size %lldx%lld", name, fmt,
                       (long long)w, (long long)h);
    if (w * h > max_pixels)
        return g4_fail(G4_ERR_INPUT,
                       "%s: %s image declares %lldx%lld = %lld pixels, over the limit of %lld "
                       "(--max-image-pixels)", name, fmt, (long long)w, (long long)h,
                       (long long)(w * h), (long long)max_pixels);
    return G4_OK;
}

static g4_status canvas_new(canvas *c, int w, int h) {
    c->w = w;
    c->h = h;
    c->has_alpha = 0;
    c->px = calloc((size_t)w * h, 4);
    return c->px ? G4_OK : g4_fail(G4_ERR_NOMEM, "out of memory for a %dx%d image", w, h);
}

/* PIL's alpha_composite (libImaging/AlphaComposite.c, 7 extra bits, divisions by 255 rounded by
 * shifts) of src over an opaque white dst, then RGB. */
#define PRECISION_BITS 7
#define SHIFTFORDIV255(a) ((((a) >> 8) + (a)) >> 8)
static void composite_white(const uint8_t *s, uint8_t *out) {
    uint32_t sa = s[3];
    if (sa == 0) { out[0] = out[1] = out[2] = 255; return; }
    uint32_t blend = 255u * (255u - sa);
    uint32_t outa255 = sa * 255u + blend;
    uint32_t coef1 = sa * 255u * 255u * (1u << PRECISION_BITS) / outa255;
    uint32_t coef2 = 255u * (1u << PRECISION_BITS) - coef1;
    for (int c = 0; c < 3; c++) {
        uint32_t t = s[c] * coef1 + 255u * coef2;
        out[c] = (uint8_t)(SHIFTFORDIV255(t + (0x80u << PRECISION_BITS)) >> PRECISION_BITS);
    }
}

static g4_status canvas_to_rgb(canvas *c, uint8_t **rgb) {
    size_t n = (size_t)c->w * c->h;
    uint8_t *o = malloc(n * 3);
    if (!o) return g4_fail(G4_ERR_NOMEM, "out of memory for a %dx%d image", c->w, c->h);
    for (size_t i = 0; i < n; i++) {
        if (c->has_alpha) composite_white(c->px + 4 * i, o + 3 * i);
        else memcpy(o + 3 * i, c->px + 4 * i, 3);
    }
    *rgb = o;
    return G4_OK;
}

/* ------------------------------------------------------------------------------------- PNG */

typedef struct {
    const uint8_t *p;
    size_t n, off;
    const char *name;
    char msg[200];
    jmp_buf jb;
} png_src;

static void png_read_mem(png_structp png, png_bytep out, size_t len) {
    png_src *s = png_get_io_ptr(png);
    if (len > s->n - s->off) png_error(png, "truncated file");
    memcpy(out, s->p + s->off, len);
    s->off += len;
}

static void png_on_error(png_structp png, png_const_charp msg) {
    png_src *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    longjmp(s->jb, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg) { (void)png; (void)msg; }

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3]; }

static g4_status decode_png(const uint8_t *data, size_t n, const char *name, int64_t max_pixels, canvas *c) {
    /* the declared size straight from IHDR (always the first chunk), before libpng reads on */
    if (n >= 24 && !memcmp(data + 12, "IHDR", 4)) {
        g4_status st = check_size(name, "PNG", be32(data + 16), be32(data + 20), max_pixels);
        if (st) return st;
    }
    png_src s = {.p = data, .n = n, .name = name};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s, png_on_error, png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return g4_fail(G4_ERR_NOMEM, "%s: out of memory starting libpng", name);
    }
    /* volatile: read back after a longjmp */
    uint8_t *volatile raw = NULL;
    png_bytep *volatile rows = NULL;
    volatile g4_status st = G4_OK;
    c->px = NULL;
    if (setjmp(s.jb)) {
        st = g4_fail(G4_ERR_INPUT, "%s: corrupt or truncated PNG: %s", name, s.msg);
        goto done;
    }
    png_set_read_fn(png, &s, png_read_mem);
    /* PIL accepts any image libpng's own limits allow; ours is the pixel count */
    png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
    png_read_info(png, info);
    png_uint_32 w, h;
    int depth, ctype, interlace;
    png_get_IHDR(png, info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);
    if ((st = check_size(name, "PNG", w, h, max_pixels))) goto done;
    int trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
    /* PIL: palette -> its RGB(A) entries; gray of 1/2/4 bits scaled to 8 (x255, x85, x17);
     * a tRNS entry makes the image transparent (-> RGBA, alpha 0 at the keyed colour). */
    if (ctype == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (ctype == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (trns) png_set_tRNS_to_alpha(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int ch = png_get_channels(png, info);
    int bd = png_get_bit_depth(png, info);
    size_t rb = png_get_rowbytes(png, info);
    if ((bd != 8 && bd != 16) || ch < 1 || ch > 4 || rb != (size_t)w * ch * (bd / 8)) {
        st = g4_fail(G4_ERR_INPUT, "%s: PNG colour type %d at %d bits is not supported", name, ctype, depth);
        goto done;
    }
    raw = malloc(rb * h);
    rows = malloc(sizeof(png_bytep) * h);
    if (!raw || !rows || canvas_new(c, (int)w, (int)h)) {
        st = g4_fail(G4_ERR_NOMEM, "%s: out of memory for a %ux%u PNG", name, (unsigned)w, (unsigned)h);
        goto done;
    }
    for (png_uint_32 y = 0; y < h; y++) rows[y] = raw + rb * y;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    c->has_alpha = ch == 2 || ch == 4;
    for (size_t i = 0; i < (size_t)w * h; i++) {
        const uint8_t *p = raw + i * ch * (bd / 8);
        uint8_t *o = c->px + 4 * i;
        uint8_t v[4];
        if (bd == 8) {
            for (int k = 0; k < ch; k++) v[k] = p[k];
        } else if (ch == 1) {
            /* PIL opens 16-bit gray as I;16 and converts it to RGB clipping at 255 */
            unsigned x = (unsigned)p[0] << 8 | p[1];
            v[0] = x > 255 ? 255 : (uint8_t)x;
        } else {
            /* 16-bit LA / RGB / RGBA: PIL's ;16B unpackers keep the high byte */
            for (int k = 0; k < ch; k++) v[k] = p[2 * k];
        }
        if (ch <= 2) { o[0] = o[1] = o[2] = v[0]; o[3] = ch == 2 ? v[1] : 255; }
        else { o[0] = v[0]; o[1] = v[1]; o[2] = v[2]; o[3] = ch == 4 ? v[3] : 255; }
    }
done:
    png_destroy_read_struct(&png, &info, NULL);
    free(raw);
    free(rows);
    if (st) { free(c->px); c->px = NULL; }
    return st;
}

/* ------------------------------------------------------------------------------------ JPEG */

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
} jpeg_err;

static void jpeg_on_error(j_common_ptr ci) {
    jpeg_err *e = (jpeg_err *)ci->err;
    ci->err->format_message(ci, e->msg);
    longjmp(e->jb, 1);
}

/* Warnings are corrupt-but-decodable data, which PIL decodes too, except the end of the data
 * before the image is complete, which PIL refuses ("image file is truncated"). */
static void jpeg_on_message(j_common_ptr ci, int level) {
    if (level == -1 && ci->err->msg_code == JWRN_JPEG_EOF) jpeg_on_error(ci);
}

static g4_status decode_jpeg(const uint8_t *data, size_t n, const char *name, int64_t max_pixels, canvas *c) {
    struct jpeg_decompress_struct ci;
    jpeg_err err;
    uint8_t *volatile row = NULL;
    volatile g4_status st = G4_OK;
    c->px = NULL;
    ci.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = jpeg_on_error;
    err.pub.emit_message = jpeg_on_message;
    jpeg_create_decompress(&ci);
    if (setjmp(err.jb)) {
        st = g4_fail(G4_ERR_INPUT, "%s: corrupt or truncated JPEG: %s", name, err.msg);
        goto done;
    }
    jpeg_mem_src(&ci, data, (unsigned long)n);
    jpeg_read_header(&ci, TRUE);
    if ((st = check_size(name, "JPEG", ci.image_width, ci.image_height, max_pixels))) goto done;
    int cmyk = 0;
    switch (ci.jpeg_color_space) {
    case JCS_GRAYSCALE: ci.out_color_space = JCS_GRAYSCALE; break;
    case JCS_CMYK:
    case JCS_YCCK: ci.out_color_space = JCS_CMYK; cmyk = 1; break;
    default: ci.out_color_space = JCS_RGB; break;
    }
    /* PIL's decoder settings: libjpeg's defaults (islow DCT, fancy upsampling) */
    jpeg_start_decompress(&ci);
    int w = (int)ci.output_width, h = (int)ci.output_height, ch = ci.output_components;
    row = malloc((size_t)w * ch);
    if (!row || canvas_new(c, w, h)) {
        st = g4_fail(G4_ERR_NOMEM, "%s: out of memory for a %dx%d JPEG", name, w, h);
        goto done;
    }
    while (ci.output_scanline < ci.output_height) {
        int y = (int)ci.output_scanline;
        JSAMPROW rp = row;
        jpeg_read_scanlines(&ci, &rp, 1);
        uint8_t *o = c->px + (size_t)y * w * 4;
        for (int x = 0; x < w; x++, o += 4) {
            const uint8_t *p = row + (size_t)x * ch;
            if (ch == 1) { o[0] = o[1] = o[2] = p[0]; }
            else if (!cmyk) { o[0] = p[0]; o[1] = p[1]; o[2] = p[2]; }
            else {
                /* PIL reads CMYK JPEGs as "CMYK;I" (Adobe's inverted polarity, always: c = 255 -
                 * stored), then cmyk2rgb: nk = 255 - k, out = nk - c * nk / 255 (MULDIV255's
                 * rounding); with the inversion nk is the stored k byte itself. */
                int nk = p[3];
                for (int k = 0; k < 3; k++) {
                    int t = (255 - p[k]) * nk + 128;
                    int v = nk - (((t >> 8) + t) >> 8);
                    o[k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
                }
            }
            o[3] = 255;
        }
    }
    jpeg_finish_decompress(&ci);
done:
    jpeg_destroy_decompress(&ci);
    free(row);
    if (st) { free(c->px); c->px = NULL; }
    return st;
}

/* ------------------------------------------------------------------------------------ WebP */

static g4_status decode_webp(const uint8_t *data, size_t n, const char *name, int64_t max_pixels, canvas *c) {
    WebPBitstreamFeatures f;
    c->px = NULL;
    if (WebPGetFeatures(data, n, &f) != VP8_STATUS_OK)
        return g4_fail(G4_ERR_INPUT, "%s: corrupt or truncated WebP (bad header)", name);
    g4_status st = check_size(name, "WebP", f.width, f.height, max_pixels);
    if (st) return st;
    /* PIL decodes every WebP, still or animated, through WebPAnimDecoder in RGBA and keeps
     * the alpha band only where the bitstream declares one. */
    WebPAnimDecoderOptions o;
    if (!WebPAnimDecoderOptionsInit(&o)) return g4_fail(G4_ERR_RUNTIME, "%s: libwebp version mismatch", name);
    o.color_mode = MODE_RGBA;
    o.use_threads = 0;
    WebPData wd = {data, n};
    WebPAnimDecoder *d = WebPAnimDecoderNew(&wd, &o);
    if (!d) return g4_fail(G4_ERR_INPUT, "%s: corrupt or truncated WebP", name);
    WebPAnimInfo ai;
    uint8_t *buf;
    int ts;
    if (!WebPAnimDecoderGetInfo(d, &ai) || (st = check_size(name, "WebP", ai.canvas_width, ai.canvas_height, max_pixels))) {
        WebPAnimDecoderDelete(d);
        return st ? st : g4_fail(G4_ERR_INPUT, "%s: corrupt WebP", name);
    }
    if (!WebPAnimDecoderGetNext(d, &buf, &ts)) {
        WebPAnimDecoderDelete(d);
        return g4_fail(G4_ERR_INPUT, "%s: corrupt or truncated WebP (the first frame does not decode)", name);
    }
    if ((st = canvas_new(c, (int)ai.canvas_width, (int)ai.canvas_height))) { WebPAnimDecoderDelete(d); return st; }
    memcpy(c->px, buf, (size_t)c->w * c->h * 4);
    c->has_alpha = f.has_alpha != 0;
    WebPAnimDecoderDelete(d);
    return G4_OK;
}

/* ------------------------------------------------------------------------------------- GIF */

typedef struct { const uint8_t *p; size_t n, off; } gif_src;

static int gif_read_mem(GifFileType *g, GifByteType *out, int len) {
    gif_src *s = g->UserData;
    size_t k = (size_t)len < s->n - s->off ? (size_t)len : s->n - s->off;
    memcpy(out, s->p + s->off, k);
    s->off += k;
    return (int)k;
}

static g4_status gif_fail(const char *name, int code) {
    const char *m = GifErrorString(code);
    if (code == D_GIF_ERR_READ_FAILED || code == D_GIF_ERR_EOF_TOO_SOON)
        return g4_fail(G4_ERR_INPUT, "%s: truncated GIF", name);
    return g4_fail(G4_ERR_INPUT, "%s: corrupt GIF: %s", name, m ? m : "unknown error");
}

static g4_status decode_gif(const uint8_t *data, size_t n, const char *name, int64_t max_pixels, canvas *c) {
    gif_src s = {data, n, 0};
    int err = 0;
    c->px = NULL;
    GifFileType *g = DGifOpen(&s, gif_read_mem, &err);
    if (!g) return gif_fail(name, err);
    g4_status st = check_size(name, "GIF", g->SWidth, g->SHeight, max_pixels);
    int transparent = -1;
    uint8_t *idx = NULL;
    while (!st) {
        GifRecordType rt;
        if (DGifGetRecordType(g, &rt) == GIF_ERROR) { st = gif_fail(name, g->Error); break; }
        if (rt == TERMINATE_RECORD_TYPE) { st = g4_fail(G4_ERR_INPUT, "%s: GIF holds no image", name); break; }
        if (rt == EXTENSION_RECORD_TYPE) {
            int code;
            GifByteType *ext;
            if (DGifGetExtension(g, &code, &ext) == GIF_ERROR) { st = gif_fail(name, g->Error); break; }
            if (code == GRAPHICS_EXT_FUNC_CODE && ext && ext[0] >= 4)
                transparent = (ext[1] & 1) ? ext[4] : -1;
            while (ext) {
                if (DGifGetExtensionNext(g, &ext) == GIF_ERROR) { st = gif_fail(name, g->Error); break; }
            }
            continue;
        }
        if (rt != IMAGE_DESC_RECORD_TYPE) continue;
        if (DGifGetImageDesc(g) == GIF_ERROR) { st = gif_fail(name, g->Error); break; }
        GifImageDesc *d = &g->Image;
        /* PIL grows the canvas to hold a first frame that overhangs the logical screen */
        int64_t x1 = (int64_t)d->Left + d->Width, y1 = (int64_t)d->Top + d->Height;
        int64_t cw = x1 > g->SWidth ? x1 : g->SWidth, chh = y1 > g->SHeight ? y1 : g->SHeight;
        if ((st = check_size(name, "GIF", cw, chh, max_pixels))) break;
        if (d->Width <= 0 || d->Height <= 0) { st = g4_fail(G4_ERR_INPUT, "%s: GIF frame is empty", name); break; }
        if ((st = canvas_new(c, (int)cw, (int)chh))) break;
        idx = malloc((size_t)cw * chh);
        if (!idx) { st = g4_fail(G4_ERR_NOMEM, "%s: out of memory", name); break; }
        /* PIL fills what the first frame leaves uncovered with the transparent index, else 0 */
        memset(idx, transparent >= 0 ? transparent : 0, (size_t)cw * chh);
        static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
        int passes = d->Interlace ? 4 : 1;
        for (int p = 0; p < passes && !st; p++) {
            for (int y = d->Interlace ? start[p] : 0; y < d->Height; y += d->Interlace ? step[p] : 1) {
                if (DGifGetLine(g, idx + (size_t)(d->Top + y) * cw + d->Left, d->Width) == GIF_ERROR) {
                    st = gif_fail(name, g->Error);
                    break;
                }
            }
        }
        if (st) break;
        ColorMapObject *cm = d->ColorMap ? d->ColorMap : g->SColorMap;
        c->has_alpha = transparent >= 0;
        for (size_t i = 0; i < (size_t)cw * chh; i++) {
            uint8_t *o = c->px + 4 * i;
            int v = idx[i];
            if (!cm) { o[0] = o[1] = o[2] = (uint8_t)v; }  /* no palette: PIL reads the indices as L */
            else if (v < cm->ColorCount) { o[0] = cm->Colors[v].Red; o[1] = cm->Colors[v].Green; o[2] = cm->Colors[v].Blue; }
            else { o[0] = o[1] = o[2] = 0; }
            o[3] = v == transparent ? 0 : 255;
        }
        break;
    }
    free(idx);
    DGifCloseFile(g, &err);
    if (st) { free(c->px); c->px = NULL; }
    return st;
}

/* ------------------------------------------------------------------------------- dispatch */

static const char *sniff_other(const uint8_t *d, size_t n) {
    if (n >= 2 && d[0] == 'B' && d[1] == 'M') return "BMP";
    if (n >= 4 && (!memcmp(d, "II*\0", 4) || !memcmp(d, "MM\0*", 4))) return "TIFF";
    if (n >= 12 && !memcmp(d + 4, "ftyp", 4)) {
        if (!memcmp(d + 8, "avif", 4) || !memcmp(d + 8, "avis", 4)) return "AVIF";
        if (!memcmp(d + 8, "heic", 4) || !memcmp(d + 8, "heix", 4) || !memcmp(d + 8, "mif1", 4)) return "HEIF";
    }
    if (n >= 4 && d[0] == 0 && d[1] == 0 && d[2] == 1 && d[3] == 0) return "ICO";
    if (n >= 4 && !memcmp(d, "qoif", 4)) return "QOI";
    return NULL;
}

g4_status media_decode(const uint8_t *data, size_t n, const char *name, int64_t max_pixels,
                       int *w, int *h, uint8_t **rgb) {
    canvas c = {0};
    g4_status st;
    if (n >= 8 && !memcmp(data, "\x89PNG\r\n\x1a\n", 8)) st = decode_png(data, n, name, max_pixels, &c);
    else if (n >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) st = decode_jpeg(data, n, name, max_pixels, &c);
    else if (n >= 12 && !memcmp(data, "RIFF", 4) && !memcmp(data + 8, "WEBP", 4)) st = decode_webp(data, n, name, max_pixels, &c);
    else if (n >= 6 && (!memcmp(data, "GIF87a", 6) || !memcmp(data, "GIF89a", 6))) st = decode_gif(data, n, name, max_pixels, &c);
    else {
        const char *other = sniff_other(data, n);
        if (other)
            return g4_fail(G4_ERR_INPUT, "%s: %s images are not supported (PNG, JPEG, WebP, GIF)", name, other);
        if (n == 0) return g4_fail(G4_ERR_INPUT, "%s: empty file, not an image", name);
        return g4_fail(G4_ERR_INPUT, "%s: not a PNG, JPEG, WebP or GIF image (first bytes %02x %02x %02x %02x)",
                       name, data[0], n > 1 ? data[1] : 0, n > 2 ? data[2] : 0, n > 3 ? data[3] : 0);
    }
    if (st) return st;
    st = canvas_to_rgb(&c, rgb);
    free(c.px);
    if (st) return st;
    *w = c.w;
    *h = c.h;
    return G4_OK;
}
