/* media_prompt.c — prompts with images: the processor's placeholder expansion (g4_media_prompt)
 * and their prefill, which puts each image's soft tokens in place of its placeholders' embeddings
 * and marks the rows whose attention reaches over the whole image. The embedder is vision.c, the
 * layer loop forward.c; this file only lays out the rows of each step. */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "parallel/group.h"

typedef struct {
    int start, len;   /* the soft tokens' indices in the expanded ids */
} media_span;

struct g4_media_prompt {
    int32_t *ids;                 /* [n] expanded */
    int n;
    int32_t image_id;             /* <|image|>: the placeholder and every soft token's id */
    int n_images;
    const g4_image **images;      /* [n_images] borrowed */
    media_span *spans;            /* [n_images] */
    float *emb;                   /* [sum of spans' len][emb_hidden]: the soft tokens, once embedded */
    int emb_hidden;
};

void g4_media_prompt_free(g4_media_prompt *p) {
    if (!p) return;
    free(p->ids);
    free(p->images);
    free(p->spans);
    free(p->emb);
    free(p);
}

const int32_t *g4_media_prompt_ids(const g4_media_prompt *p, int *n) {
    *n = p->n;
    return p->ids;
}

g4_status g4_media_prompt_new(const g4_tokenizer *tok, const int32_t *ids, int n, g4_image *const *images,
                              int n_images, g4_media_prompt **out) {
    *out = NULL;
    if (n <= 0) return g4_fail(G4_ERR_INPUT, "empty prompt");
    /* the processor's markers: tokenizer.image_token, boi_token, eoi_token */
    const int32_t image = g4_token_to_id(tok, "<|image|>"), boi = g4_token_to_id(tok, "<|image>"),
                  eoi = g4_token_to_id(tok, "<image|>");
    int placeholders = 0;
    for (int i = 0; i < n; i++) placeholders += image >= 0 && ids[i] == image;
    if (n_images > 0 && (image < 0 || boi < 0 || eoi < 0))
        return g4_fail(G4_ERR_INPUT, "the tokenizer has no image tokens (<|image|>, <|image>, <image|>)");
    if (placeholders != n_images)
        return g4_fail(G4_ERR_INPUT, "the prompt has %d image placeholder%s (<|image|>) for %d image%s", placeholders,
                       placeholders == 1 ? "" : "s", n_images, n_images == 1 ? "" : "s");
    long total = n;
    for (int i = 0; i < n_images; i++) total += images[i]->n_patches + 1;   /* + boi + eoi - the placeholder */
    if (total > 0x7fffffffL) return g4_fail(G4_ERR_INPUT, "the prompt with its images is too long (%ld tokens)", total);
    g4_media_prompt *p = calloc(1, sizeof *p);
    if (p) {
        p->ids = malloc((size_t)total * sizeof *p->ids);
        p->images = malloc((size_t)(n_images ? n_images : 1) * sizeof *p->images);
        p->spans = malloc((size_t)(n_images ? n_images : 1) * sizeof *p->spans);
    }
    if (!p || !p->ids || !p->images || !p->spans) {
        g4_media_prompt_free(p);
        return g4_fail(G4_ERR_NOMEM, "out of memory");
    }
    p->image_id = image;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (n_images == 0 || ids[i] != image) {
            p->ids[k++] = ids[i];
            continue;
        }
        const g4_image *im = images[p->n_images];
        p->ids[k++] = boi;
        p->images[p->n_images] = im;
        p->spans[p->n_images++] = (media_span){k, im->n_patches};
        for (int j = 0; j < im->n_patches; j++) p->ids[k++] = image;
        p->ids[k++] = eoi;
    }
    p->n = k;
    *out = p;
    return G4_OK;
}

/* The soft tokens of every image, [sum of n_patches][H], embedded in order, once per prompt. */
static g4_status embed_images(g4_model *m, g4_media_prompt *p) {
    if (p->emb) return p->emb_hidden == m->cfg.hidden_size ? G4_OK
                       : g4_fail(G4_ERR_INPUT, "a media prompt embedded for another model");
    const size_t H = (size_t)m->cfg.hidden_size;
    size_t rows = 0;
    for (int i = 0; i < p->n_images; i++) rows += (size_t)p->spans[i].len;
    float *e = malloc((rows ? rows : 1) * H * sizeof(float));
    if (!e) return g4_fail(G4_ERR_NOMEM, "out of memory embedding %d images", p->n_images);
    g4_status st = G4_OK;
    for (int i = 0, off = 0; i < p->n_images && !st; off += p->spans[i++].len)
        st = g4_image_embed(m, p->images[i], e + (size_t)off * H);
    if (st) { free(e); return st; }
    p->emb = e;
    p->emb_hidden = (int)H;
    return G4_OK;
}

int g4_media_prompt_cut(const g4_media_prompt *p, int from, int n) {
    for (int i = 0; i < p->n_images && p->spans[i].start < from + n; i++)
        if (p->spans[i].start + p->spans[i].len > from + n)   /* the image would be cut */
            return p->spans[i].start > from ? p->spans[i].start - from : 0;
    return n;
}

int g4_media_prompt_slice(const g4_media_prompt *p, int from, int n) {
    const int cut = g4_media_prompt_cut(p, from, n);
    if (cut) return cut;
    for (int i = 0; i < p->n_images; i++)
        if (p->spans[i].start == from) return p->spans[i].len;
    return n;
}

/* Checks that hold for the whole prompt, made when its first ids are prefilled. */
static g4_status check_prompt(const g4_model *m, int slot, const g4_media_prompt *p, int from) {
    if (p->n_images && m->comm) return g4_fail(G4_ERR_INPUT, "images under --tp > 1 are not supported yet; run with --tp 1");
    if (p->n_images && p->image_id != m->cfg.mm_placeholder_ids[0])
        return g4_fail(G4_ERR_INPUT, "the tokenizer's <|image|> is id %d, the model's image_token_id %d", p->image_id,
                       m->cfg.mm_placeholder_ids[0]);
    if ((long)m->slot_pos[slot] - from + p->n > m->opts.ctx)
        return g4_fail(G4_ERR_CONTEXT, "prompt of %d tokens at position %d exceeds the context of %d tokens (--ctx)",
                       p->n, m->slot_pos[slot] - from, m->opts.ctx);
    for (int i = 0; i < p->n_images; i++)
        if (p->spans[i].len > m->opts.prefill_chunk)
            return g4_fail(G4_ERR_INPUT, "image %d has %d soft tokens, more than a prefill chunk of %d positions "
                           "(--prefill-chunk): an image is prefilled in one step", i + 1, p->spans[i].len,
                           m->opts.prefill_chunk);
    for (int i = 0; i < p->n; i++)
        if (p->ids[i] < 0 || p->ids[i] >= m->cfg.vocab_size)
            return g4_fail(G4_ERR_INPUT, "token id %d is outside the vocabulary [0, %d)", p->ids[i], m->cfg.vocab_size);
    return G4_OK;
}

/* One forward step over ids [from, from + R) (R <= prefill_chunk, no image cut); the slot holds
 * the prompt's ids [0, from) */
static void media_step(g4_model *m, int slot, const g4_media_prompt *p, int from, int R, float *logits,
                       int32_t *next, int *slots, int *pos, int *blk_end, const float **soft) {
    const size_t H = (size_t)m->cfg.hidden_size;
    const int base = m->slot_pos[slot] - from;   /* the prompt's first position */
    int i = 0, row = 0;   /* the first image not before `from`, and its first soft token's row in emb */
    while (i < p->n_images && p->spans[i].start + p->spans[i].len <= from) row += p->spans[i++].len;
    for (int r = 0; r < R; r++) {
        const int t = from + r;
        while (i < p->n_images && p->spans[i].start + p->spans[i].len <= t) row += p->spans[i++].len;
        const int in = i < p->n_images && t >= p->spans[i].start;
        slots[r] = slot;
        pos[r] = base + t;
        soft[r] = in ? p->emb + (size_t)(row + t - p->spans[i].start) * H : NULL;
        blk_end[r] = in && m->cfg.vis_bidirectional ? base + p->spans[i].start + p->spans[i].len - 1 : -1;
    }
    const int last = from + R == p->n;
    /* as session.c's prefill: --numerics ggml's llama.cpp micro-batch of these rows */
    const int ub = p->n - from / 512 * 512 < 512 ? p->n - from / 512 * 512 : 512;
    const int step = G4_STEP_PREFILL | (ub >= 2 ? G4_STEP_BATCHED : 0);
    m->step_soft = soft;
    m->step_blk_end = blk_end;
    g4_group_forward(m, R, slots, pos, p->ids + from, last ? R - 1 : R, step, last ? logits : NULL, last ? next : NULL);
    m->step_soft = NULL;
    m->step_blk_end = NULL;
    m->slot_pos[slot] += R;
}

static g4_status prefill_range(g4_model *m, int slot, g4_media_prompt *p, int from, int n, float *logits,
                               int32_t *next) {
    if (slot < 0 || slot >= m->opts.n_slots) return g4_fail(G4_ERR_INPUT, "slot %d out of range [0, %d)", slot, m->opts.n_slots);
    if (from < 0 || n <= 0 || from + n > p->n || m->slot_pos[slot] < from)
        return g4_fail(G4_ERR_INPUT, "media prompt range [%d, %d) of %d ids at slot position %d", from, from + n, p->n,
                       m->slot_pos[slot]);
    if (g4_media_prompt_cut(p, from, n) != n) return g4_fail(G4_ERR_INPUT, "a prefill range may not cut an image");
    if (p->n_images == 0) {   /* a text prompt: the ordinary path */
        const int last = from + n == p->n;
        return next && last ? g4_prefill_argmax(m, slot, p->ids + from, n, next)
                            : g4_prefill(m, slot, p->ids + from, n, last ? logits : NULL);
    }
    g4_status st = G4_OK;
    if ((st = check_prompt(m, slot, p, from))) return st;
    if ((st = embed_images(m, p))) return st;
    const int R_max = m->max_rows;
    int *slots = malloc((size_t)R_max * sizeof *slots), *pos = malloc((size_t)R_max * sizeof *pos);
    int *blk_end = malloc((size_t)R_max * sizeof *blk_end);
    const float **soft = malloc((size_t)R_max * sizeof *soft);
    if (!slots || !pos || !blk_end || !soft) st = g4_fail(G4_ERR_NOMEM, "out of memory");
    for (int done = 0; !st && done < n;) {
        int R = n - done < m->opts.prefill_chunk ? n - done : m->opts.prefill_chunk;
        R = g4_media_prompt_cut(p, from + done, R);   /* > 0: no image is longer than a chunk */
        media_step(m, slot, p, from + done, R, logits, next, slots, pos, blk_end, soft);
        if (g4_mapped_file_lost())
            st = g4_fail(G4_ERR_IO, "a memory-mapped model file shrank or was replaced while the model ran; "
                                    "restart with an intact file");
        done += R;
    }
    free(slots);
    free(pos);
    free(blk_end);
    free(soft);
    return st;
}

g4_status g4_prefill_media_range(g4_model *m, int slot, g4_media_prompt *p, int from, int n, float *logits,
                                 int32_t *next) {
    return prefill_range(m, slot, p, from, n, logits, next);
}

g4_status g4_prefill_media(g4_model *m, int slot, g4_media_prompt *p, float *logits) {
    return prefill_range(m, slot, p, 0, p->n, logits, NULL);
}

g4_status g4_prefill_media_argmax(g4_model *m, int slot, g4_media_prompt *p, int32_t *next) {
    return prefill_range(m, slot, p, 0, p->n, NULL, next);
}
