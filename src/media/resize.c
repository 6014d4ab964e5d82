/* resize.c — the Gemma 4 image processor's geometry: the aspect-preserving target size and the
 * resize it runs, torchvision's antialiased bicubic on the uint8 tensor. On CPU torchvision hands
 * uint8 straight to aten's _upsample_bicubic2d_aa, whose uint8 path (UpSampleKernel.cpp, and the
 * AVX2 copy of it, which computes the same integers) is mirrored here bit for bit:
 * per axis, double weights normalised per output pixel, rounded to int16 at a precision chosen
 * from the axis' largest weight; width first, then height; a pass is skipped where the size is
 * unchanged; each pass rounds (+half) and clamps to 0..255. */
#include "media/media.h"

#include <math.h>
#include <stdlib.h>

g4_status media_target_size(int h, int w, int patch, int max_patches, int pool, int *th, int *tw) {
    /* get_aspect_ratio_preserving_size, in Python's double arithmetic */
    double total_px = (double)h * (double)w;
    double target_px = (double)max_patches * (double)patch * (double)patch;
    double factor = sqrt(target_px / total_px);
    double ideal_h = factor * h, ideal_w = factor * w;
    int side = pool * patch;
    long long t_h = (long long)floor(ideal_h / side) * side;
    long long t_w = (long long)floor(ideal_w / side) * side;
    if (t_h == 0 && t_w == 0)
        return g4_fail(G4_ERR_INPUT, "image %dx%d cannot be resized to a whole %d-pixel patch", w, h, side);
    long long max_side = (long long)(max_patches / (pool * pool)) * side;
    if (t_h == 0) {
        t_h = side;
        long long r = (long long)floor((double)w / (double)h) * side;
        t_w = r < max_side ? r : max_side;
    } else if (t_w == 0) {
        t_w = side;
        long long r = (long long)floor((double)h / (double)w) * side;
        t_h = r < max_side ? r : max_side;
    }
    if ((double)(t_h * t_w) > target_px)
        return g4_fail(G4_ERR_INPUT, "image %dx%d: resizing to %lldx%lld exceeds %d patches", w, h, t_w, t_h, max_patches);
    *th = (int)t_h;
    *tw = (int)t_w;
    return G4_OK;
}

/* HelperInterpCubic::aa_filter with Keys' a = -0.5 (cubic_convolution1 / 2 of UpSample.h) */
static double cubic(double x) {
    const double a = -0.5;
    x = fabs(x);
    if (x < 1.0) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2.0) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0.0;
}

typedef struct {
    int kmax;        /* weights per output pixel (max_interp_size) */
    int prec;        /* weights_precision */
    int *xmin, *xsize;
    int16_t *w;      /* [out][kmax] */
} axis_plan;

static void plan_free(axis_plan *p) { free(p->xmin); free(p->xsize); free(p->w); }

/* _compute_index_ranges_weights<double> (antialias) + _compute_index_ranges_int16_weights */
static g4_status plan_axis(int in, int out, axis_plan *p) {
    double scale = (double)in / (double)out;
    double support = scale >= 1.0 ? (4 * 0.5) * scale : 4 * 0.5;
    p->kmax = (int)ceil(support) * 2 + 1;
    p->xmin = malloc(sizeof(int) * out);
    p->xsize = malloc(sizeof(int) * out);
    p->w = malloc(sizeof(int16_t) * (size_t)out * p->kmax);
    double *wf = malloc(sizeof(double) * (size_t)out * p->kmax);
    if (!p->xmin || !p->xsize || !p->w || !wf) {
        free(wf);
        plan_free(p);
        return g4_fail(G4_ERR_NOMEM, "out of memory for the resize weights");
    }
    double wt_max = 0.0;
    for (int i = 0; i < out; i++) {
        double *wt = wf + (size_t)i * p->kmax;
        double center = scale * (i + 0.5);
        double total = 0.0, invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
        int64_t xmin = (int64_t)(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int64_t xmax = (int64_t)(center + support + 0.5);
        if (xmax > in) xmax = in;
        int64_t xsize = xmax - xmin;
        if (xsize < 0) xsize = 0;
        if (xsize > p->kmax) xsize = p->kmax;
        int64_t j = 0;
        for (; j < xsize; j++) {
            double w = cubic(((double)(j + xmin) - center + 0.5) * invscale);
            wt[j] = w;
            total += w;
        }
        if (total != 0.0) {
            for (j = 0; j < xsize; j++) {
                wt[j] /= total;
                if (wt[j] > wt_max) wt_max = wt[j];
            }
        }
        for (; j < p->kmax; j++) wt[j] = 0.0;
        p->xmin[i] = (int)xmin;
        p->xsize[i] = (int)xsize;
    }
    int prec;
    for (prec = 0; prec < 22; prec++) {
        int next = (int)(0.5 + wt_max * (1 << (prec + 1)));
        if (next >= (1 << 15)) break;
    }
    p->prec = prec;
    for (size_t k = 0; k < (size_t)out * p->kmax; k++) {
        double v = wf[k] * (1 << prec);
        p->w[k] = (int16_t)(v < 0 ? (int)(-0.5 + v) : (int)(0.5 + v));
    }
    free(wf);
    return G4_OK;
}

/* One pass along an axis of `len_in` -> `len_out` samples; `lines` independent lines of RGB,
 * `step` bytes between samples along the axis and `line_step` bytes between lines. */
static void pass(const uint8_t *src, uint8_t *dst, const axis_plan *p, int len_out, int lines,
                 size_t src_step, size_t src_line, size_t dst_step, size_t dst_line) {
    for (int l = 0; l < lines; l++) {
        const uint8_t *s = src + (size_t)l * src_line;
        uint8_t *d = dst + (size_t)l * dst_line;
        for (int i = 0; i < len_out; i++) {
            const int16_t *w = p->w + (size_t)i * p->kmax;
            const uint8_t *s0 = s + (size_t)p->xmin[i] * src_step;
            for (int c = 0; c < 3; c++) {
                int acc = 1 << (p->prec - 1);
                for (int j = 0; j < p->xsize[i]; j++) acc += s0[(size_t)j * src_step + c] * w[j];
                acc >>= p->prec;
                d[(size_t)i * dst_step + c] = (uint8_t)(acc < 0 ? 0 : acc > 255 ? 255 : acc);
            }
        }
    }
}

g4_status media_resize_bicubic_aa(const uint8_t *src, int w, int h, uint8_t *dst, int tw, int th) {
    axis_plan px = {0}, py = {0};
    g4_status st;
    if (tw == w && th == h) {
        for (size_t i = 0; i < (size_t)w * h * 3; i++) dst[i] = src[i];
        return G4_OK;
    }
    const uint8_t *cur = src;
    uint8_t *tmp = NULL;
    if (tw != w) {
        if ((st = plan_axis(w, tw, &px))) return st;
        uint8_t *o = dst;
        if (th != h) {
            tmp = malloc((size_t)tw * h * 3);
            if (!tmp) { plan_free(&px); return g4_fail(G4_ERR_NOMEM, "out of memory resizing to %dx%d", tw, th); }
            o = tmp;
        }
        pass(cur, o, &px, tw, h, 3, (size_t)w * 3, 3, (size_t)tw * 3);
        plan_free(&px);
        cur = o;
    }
    if (th != h) {
        if ((st = plan_axis(h, th, &py))) { free(tmp); return st; }
        pass(cur, dst, &py, th, tw, (size_t)tw * 3, 3, (size_t)tw * 3, 3);
        plan_free(&py);
    }
    free(tmp);
    return G4_OK;
}
