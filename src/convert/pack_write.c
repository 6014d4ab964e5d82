/* pack_write.c — `gemma4c pack`: writes a HuggingFace checkpoint as a `.g4c` (format in io/pack.h).
 * For each rank and each tensor the text engine uses: the shard plan picks the slice (rows, or a
 * column range of every row), 2-D matrices are converted / quantized to the requested dtype row
 * by row, everything else is copied as stored. The multimodal embedders (vision, audio) go to
 * rank 0 alone, which prepares prompts, and are copied as stored whatever --dtype says: their
 * code widens f32/bf16/f16 rows and reads nothing quantized. A tied lm_head is left out. Streams
 * tensor by tensor, so memory stays small. */
#include "io/pack.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/threadpool.h"
#include "io/hfconfig.h"
#include "convert/quantize.h"
#include "kernels/kernels.h"
#include "parallel/tp_plan.h"

/* The files a pack embeds verbatim when the checkpoint directory has them; the processor files
 * carry the image and audio preprocessing settings. */
static const char *const embed_files[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                          "chat_template.jinja", "chat_template.json", "generation_config.json",
                                          "processor_config.json", "preprocessor_config.json"};

const char *g4_pack_dtype_name(int dtype) {
    return dtype < 0 ? "as stored" : g4_dtype_name((g4_dtype)dtype);
}

int g4_pack_dtype_parse(const char *s) {
    static const struct { const char *name; g4_dtype dt; } names[] = {
        {"f32", G4_DT_F32}, {"f16", G4_DT_F16}, {"bf16", G4_DT_BF16},
        {"q8_0", G4_DT_Q8_0}, {"q4_0", G4_DT_Q4_0}, {"q4_k", G4_DT_Q4_K}};
    for (size_t i = 0; s && i < sizeof names / sizeof *names; i++)
        if (!strcasecmp(s, names[i].name)) return (int)names[i].dt;
    return -1;
}

static void wr32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void wr64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* A growable byte buffer for the metadata and directory areas. */
typedef struct {
    uint8_t *p;
    size_t len, cap;
    int oom;
} bytes;

static uint8_t *grow(bytes *b, size_t n) {
    if (b->oom) return NULL;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        uint8_t *np = realloc(b->p, cap);
        if (!np) { b->oom = 1; return NULL; }
        memset(np + b->cap, 0, cap - b->cap);
        b->p = np;
        b->cap = cap;
    }
    uint8_t *r = b->p + b->len;
    b->len += n;
    return r;
}

static void pad8(bytes *b) { grow(b, align_up(b->len, 8) - b->len); }

/* One tensor of one rank, as it will be written. */
typedef struct {
    const g4_tensor *src;
    g4_shard sh;
    g4_dtype dt;                 /* written dtype */
    int64_t rows, cols;          /* local [rows][cols] for 2-D; rows = 1, cols = count otherwise */
    int n_dims;
    int64_t shape[G4_MAX_DIMS];  /* local shape */
    uint64_t offset, nbytes;
} out_tensor;

typedef struct {
    out_tensor *t;
    int n;
    uint64_t seg_off, seg_len, dir_off, dir_len;
    uint32_t crc;
} out_rank;

static int ignorable(const g4_config *c, const char *name) {
    return c->tie_word_embeddings && !strcmp(name, "lm_head.weight");
}

/* A tensor of the encoder-free multimodal front end (model/vision.c, model/audio.c). */
static int multimodal(const g4_config *c, const char *name) {
    static const char *const mm[] = {"model.embed_vision.", "model.embed_audio.", "model.vision_embedder."};
    for (size_t i = 0; c->conditional && i < sizeof mm / sizeof *mm; i++)
        if (!strncmp(name, mm[i], strlen(mm[i]))) return 1;
    return 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp((*(const g4_tensor *const *)a)->name, (*(const g4_tensor *const *)b)->name);
}

static void read_file_all(const char *path, char **data, size_t *len) {
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n >= 0 && fseek(f, 0, SEEK_SET) == 0) {
            char *b = malloc((size_t)n + 1);
            if (b && fread(b, 1, (size_t)n, f) == (size_t)n) {
                *data = b;
                *len = (size_t)n;
            } else {
                free(b);
            }
        }
    }
    fclose(f);
}

/* Parallel conversion of a block of rows: each task converts whole rows. */
typedef struct {
    const out_tensor *t;
    int64_t row0, nrows;        /* local rows of this chunk */
    uint8_t *dst;               /* nrows * out_row bytes */
    size_t out_row;
    float *scratch;             /* threads x cols */
    int n_tasks;
} conv_job;

static void convert_rows(void *ctx, int task, int thread) {
    conv_job *j = ctx;
    const out_tensor *t = j->t;
    const g4_tensor *s = t->src;
    const int64_t src_cols = s->n_dims == 2 ? s->shape[1] : t->cols;
    const int64_t c0 = t->sh.kind == G4_SHARD_COLS ? t->sh.lo : 0;
    const int64_t r_base = t->sh.kind == G4_SHARD_ROWS ? t->sh.lo : 0;
    const size_t es = g4_dtype_size(s->dtype);   /* source is F32/F16/BF16: one element */
    int64_t per = (j->nrows + j->n_tasks - 1) / j->n_tasks, a = task * per, b = a + per < j->nrows ? a + per : j->nrows;
    float *buf = j->scratch + (size_t)thread * (size_t)t->cols;
    for (int64_t r = a; r < b; r++) {
        const int64_t sr = r_base + j->row0 + r;
        const uint8_t *src = (const uint8_t *)s->data + ((size_t)sr * (size_t)src_cols + (size_t)c0) * es;
        uint8_t *dst = j->dst + (size_t)r * j->out_row;
        if (t->dt == s->dtype) {
            memcpy(dst, src, (size_t)t->cols * es);   /* same dtype: a byte-exact copy */
        } else {
            g4_to_f32(s->dtype, src, (size_t)t->cols, buf);
            g4_quantize_row(t->dt, buf, t->cols, dst);
        }
    }
}

typedef struct {
    FILE *f;
    const char *path;
    uint64_t pos;
    uLong crc;
    int failed;
} writer;

static void wbytes(writer *w, const void *p, size_t n, int crc) {
    if (w->failed || !n) return;
    if (fwrite(p, 1, n, w->f) != n) w->failed = errno ? errno : EIO;
    if (crc) w->crc = crc32_z(w->crc, p, n);
    w->pos += n;
}

static void wzeros(writer *w, uint64_t n, int crc) {
    static const uint8_t z[4096];
    while (n) {
        size_t k = n < sizeof z ? (size_t)n : sizeof z;
        wbytes(w, z, k, crc);
        n -= k;
    }
}

g4_status g4_pack_write(const g4_pack_write_opts *o, g4_pack_write_stats *stats) {
    g4_pack_write_stats dummy;
    if (!stats) stats = &dummy;
    memset(stats, 0, sizeof *stats);
    if (o->tp < 1 || o->tp > G4_PACK_MAX_RANKS)
        return g4_fail(G4_ERR_INPUT, "--tp %d: must be between 1 and %d", o->tp, G4_PACK_MAX_RANKS);
    if (o->dtype >= 0 && o->dtype != G4_DT_F32 && o->dtype != G4_DT_F16 && o->dtype != G4_DT_BF16 &&
        o->dtype != G4_DT_Q8_0 && o->dtype != G4_DT_Q4_0 && o->dtype != G4_DT_Q4_K)
        return g4_fail(G4_ERR_INPUT, "--dtype %s: cannot be written by pack", g4_dtype_name((g4_dtype)o->dtype));
    g4_config cfg;
    g4_status st = g4_config_load(o->hf_dir, &cfg);
    if (st) return st;
    const int tp = o->tp;
    static g4_tp_plan plans[G4_PACK_MAX_RANKS];   /* ~2 KB each; static keeps the stack small */
    for (int r = 0; r < tp; r++)
        if ((st = g4_tp_plan_make(&cfg, tp, r, &plans[r]))) return st;

    g4_tensor_set ts;
    if ((st = g4_st_open_dir(o->hf_dir, &ts))) return st;

    out_rank ranks[G4_PACK_MAX_RANKS];
    memset(ranks, 0, sizeof ranks);
    const g4_tensor **sel = calloc((size_t)ts.n_tensors + 1, sizeof *sel);
    bytes meta = {0}, dir = {0};
    char *tmp = NULL;
    FILE *f = NULL;
    g4_pool *pool = NULL;
    uint8_t *obuf = NULL;
    float *scratch = NULL;
    if (!sel) { st = g4_fail(G4_ERR_NOMEM, "out of memory"); goto done; }

    /* 1. which tensors, in name order (a layer's tensors end up next to each other) */
    int n_sel = 0;
    for (int i = 0; i < ts.n_tensors; i++) {
        if (ignorable(&cfg, ts.tensors[i].name)) { stats->n_skipped++; continue; }
        stats->n_multimodal += multimodal(&cfg, ts.tensors[i].name);
        sel[n_sel++] = &ts.tensors[i];
    }
    qsort(sel, (size_t)n_sel, sizeof *sel, by_name);

    /* 2. per rank: slice, dtype, local shape, offset */
    struct { int n; const char *example; int64_t width; g4_dtype to; } fb[G4_DT_COUNT];
    memset(fb, 0, sizeof fb);
    for (int r = 0; r < tp; r++) {
        out_rank *R = &ranks[r];
        R->t = calloc((size_t)n_sel + 1, sizeof *R->t);
        if (!R->t) { st = g4_fail(G4_ERR_NOMEM, "out of memory"); goto done; }
        uint64_t off = 0;
        for (int i = 0; i < n_sel; i++) {
            const g4_tensor *s = sel[i];
            const int mm = multimodal(&cfg, s->name);
            if (mm && r > 0) continue;   /* the embedders are rank 0's */
            out_tensor *t = &R->t[R->n++];
            int layer;
            g4_role role = g4_tp_role_of_name(s->name, &layer);
            t->src = s;
            t->sh = g4_tp_shard(&plans[r], &cfg, role, layer);
            t->n_dims = s->n_dims;
            memcpy(t->shape, s->shape, sizeof t->shape);
            if (s->n_dims == 2) {
                t->rows = s->shape[0];
                t->cols = s->shape[1];
            } else {
                t->rows = 1;
                t->cols = 1;
                for (int k = 0; k < s->n_dims; k++) t->cols *= s->shape[k];
            }
            if (t->sh.kind != G4_SHARD_WHOLE) {
                const int64_t dim = t->sh.kind == G4_SHARD_ROWS ? 0 : 1;
                if (s->n_dims != 2 || t->sh.hi > s->shape[dim] || t->sh.lo > t->sh.hi) {
                    st = g4_fail(G4_ERR_INPUT, "%s: tensor '%s' (%d dims, [%lld, %lld]) does not fit the --tp %d slice "
                                 "[%lld, %lld) of dim %lld", s->file, s->name, s->n_dims, (long long)s->shape[0],
                                 (long long)(s->n_dims > 1 ? s->shape[1] : 0), tp, (long long)t->sh.lo,
                                 (long long)t->sh.hi, (long long)dim);
                    goto done;
                }
                if (dim == 0) t->rows = t->sh.hi - t->sh.lo;
                else t->cols = t->sh.hi - t->sh.lo;
                t->shape[dim] = t->sh.hi - t->sh.lo;
            }
            t->dt = s->dtype;
            if (o->dtype >= 0 && s->n_dims == 2 && !mm) {
                g4_dtype want = (g4_dtype)o->dtype;
                /* a block may not straddle rows (nor a column slice): fall back to Q8_0's 32, or
                 * keep the checkpoint's float type when even that does not divide */
                if (t->cols % g4_dtype_block(want)) {
                    g4_dtype to = t->cols % 32 == 0 && want != G4_DT_Q8_0 ? G4_DT_Q8_0 : s->dtype;
                    if (r == 0 && fb[want].n++ == 0) { fb[want].example = s->name; fb[want].width = t->cols; fb[want].to = to; }
                    if (r == 0) stats->n_fallback++;
                    want = to;
                }
                t->dt = want;
            }
            t->nbytes = (uint64_t)t->rows * g4_dtype_row_bytes(t->dt, t->cols);
            off = align_up(off, G4_PACK_TENSOR_ALIGN);
            t->offset = off;
            off += t->nbytes;
        }
        R->seg_len = off;
        stats->seg_bytes[r] = off;
    }
    stats->n_tensors = ranks[0].n;
    if (o->verbose)
        for (int d = 0; d < G4_DT_COUNT; d++)
            if (fb[d].n)
                fprintf(stderr, "pack: %d matri%s with rows not a multiple of the %s block (%d), e.g. '%s' (%lld wide): written as %s\n",
                        fb[d].n, fb[d].n == 1 ? "x" : "ces", g4_dtype_name((g4_dtype)d), g4_dtype_block((g4_dtype)d),
                        fb[d].example, (long long)fb[d].width, g4_dtype_name(fb[d].to));

    /* 3. metadata area */
    {
        int nf = 0;
        grow(&meta, 8);
        for (size_t i = 0; i < sizeof embed_files / sizeof *embed_files; i++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", o->hf_dir, embed_files[i]);
            char *data;
            size_t len;
            if (access(path, F_OK) != 0) continue;
            read_file_all(path, &data, &len);
            if (!data) { st = g4_fail(G4_ERR_IO, "%s: cannot read", path); goto done; }
            size_t nl = strlen(embed_files[i]);
            uint8_t *e = grow(&meta, 16 + nl + len + 1);
            if (e) {
                wr32(e, (uint32_t)nl);
                wr64(e + 8, len);
                memcpy(e + 16, embed_files[i], nl);
                memcpy(e + 16 + nl, data, len);   /* the NUL after it is already zero */
            }
            free(data);
            pad8(&meta);
            nf++;
        }
        if (!meta.oom) wr32(meta.p, (uint32_t)nf);
    }
    /* 4. directory */
    for (int r = 0; r < tp; r++) {
        out_rank *R = &ranks[r];
        R->dir_off = dir.len;
        for (int i = 0; i < R->n; i++) {
            const out_tensor *t = &R->t[i];
            size_t nl = strlen(t->src->name);
            if (nl > 65535) { st = g4_fail(G4_ERR_INPUT, "tensor name too long: %.60s...", t->src->name); goto done; }
            uint8_t *e = grow(&dir, 64 + nl);
            if (!e) break;
            e[0] = (uint8_t)nl;
            e[1] = (uint8_t)(nl >> 8);
            e[2] = (uint8_t)t->dt;
            e[3] = (uint8_t)t->n_dims;
            for (int k = 0; k < t->n_dims; k++) wr64(e + 16 + 8 * k, (uint64_t)t->shape[k]);
            wr64(e + 48, t->offset);
            wr64(e + 56, t->nbytes);
            memcpy(e + 64, t->src->name, nl);
            pad8(&dir);
        }
        R->dir_len = dir.len - R->dir_off;
    }
    if (meta.oom || dir.oom) { st = g4_fail(G4_ERR_NOMEM, "out of memory"); goto done; }

    /* 5. file layout */
    const uint64_t meta_off = G4_PACK_HEADER_SIZE, dir_off = meta_off + meta.len;
    uint64_t pos = dir_off + dir.len;
    for (int r = 0; r < tp; r++) {
        ranks[r].seg_off = align_up(pos, G4_PACK_SEG_ALIGN);
        pos = ranks[r].seg_off + ranks[r].seg_len;
    }
    const uint64_t file_size = pos;

    /* 6. write: placeholder header, meta, dir, then each segment with its crc */
    size_t tl = strlen(o->out_path) + 8;
    tmp = malloc(tl);
    if (!tmp) { st = g4_fail(G4_ERR_NOMEM, "out of memory"); goto done; }
    snprintf(tmp, tl, "%s.tmp", o->out_path);
    f = fopen(tmp, "wb");
    if (!f) { st = g4_fail(G4_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno)); goto done; }
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    writer w = {.f = f, .path = tmp};
    wzeros(&w, G4_PACK_HEADER_SIZE, 0);
    wbytes(&w, meta.p, meta.len, 0);
    wbytes(&w, dir.p, dir.len, 0);
    pool = g4_pool_new(o->threads);
    if (!pool) { st = g4_fail(G4_ERR_NOMEM, "cannot start threads"); goto done; }
    const int nth = g4_pool_size(pool);
    for (int r = 0; r < tp && !w.failed; r++) {
        out_rank *R = &ranks[r];
        /* skip to the 2 MiB boundary: the gap stays a hole in the file, not written zeros */
        if (!w.failed && R->seg_off > w.pos) {
            if (fseeko(f, (off_t)(R->seg_off - w.pos), SEEK_CUR)) w.failed = errno ? errno : EIO;
            w.pos = R->seg_off;
        }
        w.crc = crc32_z(0, NULL, 0);
        for (int i = 0; i < R->n && !w.failed; i++) {
            out_tensor *t = &R->t[i];
            wzeros(&w, t->offset - (w.pos - R->seg_off), 1);
            const size_t out_row = g4_dtype_row_bytes(t->dt, t->cols);
            /* chunks of ~32 MiB of output rows, converted in parallel then written in order */
            int64_t chunk = out_row ? (int64_t)(((size_t)32 << 20) / out_row) : t->rows;
            if (chunk < 1) chunk = 1;
            if (chunk > t->rows) chunk = t->rows;
            size_t need = (size_t)chunk * out_row;
            free(obuf);
            free(scratch);
            obuf = malloc(need ? need : 1);
            scratch = malloc((size_t)nth * (size_t)(t->cols ? t->cols : 1) * sizeof(float));
            if (!obuf || !scratch) { st = g4_fail(G4_ERR_NOMEM, "out of memory converting %s", t->src->name); goto done; }
            for (int64_t r0 = 0; r0 < t->rows && !w.failed; r0 += chunk) {
                conv_job j = {.t = t, .row0 = r0, .nrows = t->rows - r0 < chunk ? t->rows - r0 : chunk,
                              .dst = obuf, .out_row = out_row, .scratch = scratch};
                j.n_tasks = j.nrows < nth * 4 ? (int)j.nrows : nth * 4;
                if (j.n_tasks == 1 || t->dt == t->src->dtype) { j.n_tasks = 1; convert_rows(&j, 0, 0); }
                else g4_pool_run(pool, j.n_tasks, convert_rows, &j);
                wbytes(&w, obuf, (size_t)j.nrows * out_row, 1);
            }
        }
        R->crc = (uint32_t)w.crc;
    }
    if (!w.failed && w.pos != file_size) w.failed = EIO;   /* a layout bug, never expected */
    if (!w.failed && (fflush(f) || ftruncate(fileno(f), (off_t)file_size))) w.failed = errno ? errno : EIO;

    /* 7. the header, with the crcs, last */
    uint8_t h[G4_PACK_HEADER_SIZE];
    memset(h, 0, sizeof h);
    memcpy(h, G4_PACK_MAGIC, 8);
    wr32(h + 8, G4_PACK_VERSION);
    wr32(h + 12, (uint32_t)tp);
    wr64(h + 16, meta_off);
    wr64(h + 24, meta.len);
    wr64(h + 32, dir_off);
    wr64(h + 40, dir.len);
    wr64(h + 48, file_size);
    for (int r = 0; r < tp; r++) {
        uint8_t *e = h + 64 + (size_t)r * 40;
        wr64(e, ranks[r].seg_off);
        wr64(e + 8, ranks[r].seg_len);
        wr64(e + 16, ranks[r].dir_off);
        wr64(e + 24, ranks[r].dir_len);
        wr32(e + 32, ranks[r].crc);
        wr32(e + 36, (uint32_t)ranks[r].n);
    }
    uLong hc = crc32_z(0, h, sizeof h);
    hc = crc32_z(hc, meta.p, meta.len);
    hc = crc32_z(hc, dir.p, dir.len);
    wr32(h + 56, (uint32_t)hc);
    if (!w.failed && (fflush(f) || fseek(f, 0, SEEK_SET))) w.failed = errno ? errno : EIO;
    wbytes(&w, h, sizeof h, 0);
    if (!w.failed && (fflush(f) || fsync(fileno(f)))) w.failed = errno ? errno : EIO;
    if (fclose(f) && !w.failed) w.failed = errno ? errno : EIO;
    f = NULL;
    if (w.failed) { st = g4_fail(G4_ERR_IO, "%s: write failed: %s", tmp, strerror(w.failed)); goto done; }
    if (rename(tmp, o->out_path)) { st = g4_fail(G4_ERR_IO, "%s: cannot rename to %s: %s", tmp, o->out_path, strerror(errno)); goto done; }
    free(tmp);
    tmp = NULL;
    stats->file_size = file_size;

done:
    if (f) fclose(f);
    if (tmp) { unlink(tmp); free(tmp); }
    g4_pool_free(pool);
    free(obuf);
    free(scratch);
    for (int r = 0; r < tp; r++) free(ranks[r].t);
    free(sel);
    free(meta.p);
    free(dir.p);
    g4_st_close(&ts);
    return st;
}
