/* media_prompt.c — prompts with images and audio: the processor's placeholder expansion
 * (g4_media_prompt) and their prefill, which puts each image's or clip's soft tokens in place of
 * its placeholders' embeddings and marks the rows whose attention reaches over the whole image.
 * The embedders are vision.c and audio.c, the layer loop forward.c; this file only lays out the
 * rows of each step. */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "parallel/group.h"

enum { MEDIA_IMAGE, MEDIA_AUDIO };

typedef struct {
    int start, len;   /* the soft tokens' indices in the expanded ids */
    int kind;         /* MEDIA_IMAGE or MEDIA_AUDIO */
    int embedded;     /* its rows of emb are filled */
    const void *src;  /* the g4_image or g4_audio, borrowed */
} media_span;

struct g4_media_prompt {
    int32_t *ids;                 /* [n] expanded */
    int n;
    int32_t image_id, audio_id;   /* <|image|>, <|audio|>: placeholders, and every soft token's id */
    int n_media;
    media_span *spans;            /* [n_media] in prompt order */
    float *emb;                   /* [sum of spans' len][emb_hidden]: the soft tokens, once embedded */
    int emb_hidden;
};

void g4_media_prompt_free(g4_media_prompt *p) {
    if (!p) return;
    free(p->ids);
    free(p->spans);
    free(p->emb);
    free(p);
}

const int32_t *g4_media_prompt_ids(const g4_media_prompt *p, int *n) {
    *n = p->n;
    return p->ids;
}

/* A kind of media's markers (the processor's tokenizer.image_token / boi_token / eoi_token, resp.
 * audio_token / boa_token / eoa_token) and how many placeholders the prompt has. */
typedef struct {
    int32_t token, begin, end;
    int placeholders;
} markers;

static g4_status find_markers(const g4_tokenizer *tok, const int32_t *ids, int n, const char *const names[3], int given,
                              const char *what, markers *mk) {
    mk->token = g4_token_to_id(tok, names[0]);
    mk->begin = g4_token_to_id(tok, names[1]);
    mk->end = g4_token_to_id(tok, names[2]);
    mk->placeholders = 0;
    for (int i = 0; i < n; i++) mk->placeholders += mk->token >= 0 && ids[i] == mk->token;
    if (given > 0 && (mk->token < 0 || mk->begin < 0 || mk->end < 0))
        return g4_fail(G4_ERR_INPUT, "the tokenizer has no %s tokens (%s, %s, %s)", what, names[0], names[1], names[2]);
    if (given > 0 && mk->placeholders != given)   /* none given: the placeholders stay text, as the processor leaves them */
        return g4_fail(G4_ERR_INPUT, "the prompt has %d %s placeholder%s (%s) for %d %s%s", mk->placeholders, what,
                       mk->placeholders == 1 ? "" : "s", names[0], given, what, given == 1 ? "" : "s");
    return G4_OK;
}

g4_status g4_media_prompt_new(const g4_tokenizer *tok, const int32_t *ids, int n, g4_image *const *images,
                              int n_images, g4_media_prompt **out) {
    return g4_media_prompt_new_av(tok, ids, n, images, n_images, NULL, 0, out);
}

g4_status g4_media_prompt_new_av(const g4_tokenizer *tok, const int32_t *ids, int n, g4_image *const *images,
                                 int n_images, g4_audio *const *audios, int n_audios, g4_media_prompt **out) {
    *out = NULL;
    if (n <= 0) return g4_fail(G4_ERR_INPUT, "empty prompt");
    static const char *const image_names[3] = {"<|image|>", "<|image>", "<image|>"};
    static const char *const audio_names[3] = {"<|audio|>", "<|audio>", "<audio|>"};
    markers mi, ma;
    g4_status st;
    if ((st = find_markers(tok, ids, n, image_names, n_images, "image", &mi)) ||
        (st = find_markers(tok, ids, n, audio_names, n_audios, "audio clip", &ma)))
        return st;
    long total = n;
    for (int i = 0; i < n_images; i++) total += images[i]->n_patches + 1;   /* + begin + end - the placeholder */
    for (int i = 0; i < n_audios; i++) total += audios[i]->n_frames + 1;
    if (total > 0x7fffffffL) return g4_fail(G4_ERR_INPUT, "the prompt with its media is too long (%ld tokens)", total);
    g4_media_prompt *p = calloc(1, sizeof *p);
    if (p) {
        p->ids = malloc((size_t)total * sizeof *p->ids);
        p->spans = malloc((size_t)(n_images + n_audios + 1) * sizeof *p->spans);
    }
    if (!p || !p->ids || !p->spans) {
        g4_media_prompt_free(p);
        return g4_fail(G4_ERR_NOMEM, "out of memory");
    }
    p->image_id = mi.token;
    p->audio_id = ma.token;
    int k = 0, ni = 0, na = 0;
    for (int i = 0; i < n; i++) {
        const int is_image = n_images && ids[i] == mi.token, is_audio = n_audios && ids[i] == ma.token;
        if (!is_image && !is_audio) {
            p->ids[k++] = ids[i];
            continue;
        }
        const markers *mk = is_image ? &mi : &ma;
        const int len = is_image ? images[ni]->n_patches : audios[na]->n_frames;
        p->ids[k++] = mk->begin;
        p->spans[p->n_media++] = (media_span){k, len, is_image ? MEDIA_IMAGE : MEDIA_AUDIO, 0,
                                              is_image ? (const void *)images[ni++] : (const void *)audios[na++]};
        for (int j = 0; j < len; j++) p->ids[k++] = mk->token;
        p->ids[k++] = mk->end;
    }
    p->n = k;
    *out = p;
    return G4_OK;
}

/* The soft tokens of the images and clips in ids [from, from + n), into their rows of emb
 * ([sum of all spans' lengths][H], prompt order), each once: a prefill that starts past some
 * media (a chat turn reusing the slot's KV) never embeds them. */
static g4_status embed_images(g4_model *m, g4_media_prompt *p, int from, int n) {
    const size_t H = (size_t)m->cfg.hidden_size;
    if (p->emb && p->emb_hidden != m->cfg.hidden_size) return g4_fail(G4_ERR_INPUT, "a media prompt embedded for another model");
    if (!p->emb) {
        size_t rows = 0;
        for (int i = 0; i < p->n_media; i++) rows += (size_t)p->spans[i].len;
        if (!(p->emb = malloc((rows ? rows : 1) * H * sizeof(float))))
            return g4_fail(G4_ERR_NOMEM, "out of memory embedding %d images and audio clips", p->n_media);
        p->emb_hidden = (int)H;
    }
    g4_status st = G4_OK;
    for (int i = 0, off = 0; i < p->n_media && !st; off += p->spans[i++].len) {
        media_span *s = &p->spans[i];
        if (s->embedded || s->start + s->len <= from || s->start >= from + n) continue;
        float *e = p->emb + (size_t)off * H;
        st = s->kind == MEDIA_IMAGE ? g4_image_embed(m, s->src, e) : g4_audio_embed(m, s->src, e);
        s->embedded = !st;
    }
    return st;
}

/* Only images must stay whole (their tokens read each other's keys); audio is causal and may be
 * split like text. */
int g4_media_prompt_cut(const g4_media_prompt *p, int from, int n) {
    for (int i = 0; i < p->n_media && p->spans[i].start < from + n; i++)
        if (p->spans[i].kind == MEDIA_IMAGE && p->spans[i].start + p->spans[i].len > from + n)   /* it would be cut */
            return p->spans[i].start > from ? p->spans[i].start - from : 0;
    return n;
}

int g4_media_prompt_slice(const g4_media_prompt *p, int from, int n) {
    const int cut = g4_media_prompt_cut(p, from, n);
    if (cut) return cut;
    for (int i = 0; i < p->n_media; i++)
        if (p->spans[i].kind == MEDIA_IMAGE && p->spans[i].start == from) return p->spans[i].len;
    return n;
}

/* Checks that hold for the whole prompt (made for each range: the server prefills in slices). */
static g4_status check_prompt(const g4_model *m, int slot, const g4_media_prompt *p, int from) {
    for (int i = 0; i < p->n_media; i++) {   /* the model finds its soft tokens by these ids */
        const int img = p->spans[i].kind == MEDIA_IMAGE, want = m->cfg.mm_placeholder_ids[img ? 0 : 2];
        if ((img ? p->image_id : p->audio_id) != want)
            return g4_fail(G4_ERR_INPUT, "the tokenizer's %s is id %d, the model's %s %d", img ? "<|image|>" : "<|audio|>",
                           img ? p->image_id : p->audio_id, img ? "image_token_id" : "audio_token_id", want);
    }
    if ((long)m->slot_pos[slot] - from + p->n > m->opts.ctx)
        return g4_fail(G4_ERR_CONTEXT, "prompt of %d tokens at position %d exceeds the context of %d tokens (--ctx)",
                       p->n, m->slot_pos[slot] - from, m->opts.ctx);
    for (int i = 0, k = 0; i < p->n_media; i++)
        if (p->spans[i].kind == MEDIA_IMAGE && (++k, p->spans[i].len > m->opts.prefill_chunk))
            return g4_fail(G4_ERR_INPUT, "image %d has %d soft tokens, more than a prefill chunk of %d positions "
                           "(--prefill-chunk): an image is prefilled in one step", k, p->spans[i].len,
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
    while (i < p->n_media && p->spans[i].start + p->spans[i].len <= from) row += p->spans[i++].len;
    for (int r = 0; r < R; r++) {
        const int t = from + r;
        while (i < p->n_media && p->spans[i].start + p->spans[i].len <= t) row += p->spans[i++].len;
        const int in = i < p->n_media && t >= p->spans[i].start;
        slots[r] = slot;
        pos[r] = base + t;
        soft[r] = in ? p->emb + (size_t)(row + t - p->spans[i].start) * H : NULL;
        /* an image's tokens see each other (use_bidirectional_attention "vision"); audio stays causal */
        blk_end[r] = !in ? G4_ROW_TEXT
                     : m->cfg.vis_bidirectional && p->spans[i].kind == MEDIA_IMAGE ? base + p->spans[i].start + p->spans[i].len - 1
                     : G4_ROW_SOFT;
    }
    const int last = from + R == p->n;
    /* as session.c's prefill: --numerics ggml's llama.cpp micro-batch of these rows */
    const int ub = p->n - from / 512 * 512 < 512 ? p->n - from / 512 * 512 : 512;
    const int step = G4_STEP_PREFILL | (ub >= 2 ? G4_STEP_BATCHED : 0);
    m->step_soft = soft;
    m->step_media = blk_end;
    g4_group_forward(m, R, slots, pos, p->ids + from, last ? R - 1 : R, step | G4_STEP_MEDIA, last ? logits : NULL,
                     last ? next : NULL);
    m->step_soft = NULL;
    m->step_media = NULL;
    m->slot_pos[slot] += R;
}

static g4_status prefill_range(g4_model *m, int slot, g4_media_prompt *p, int from, int n, float *logits,
                               int32_t *next) {
    if (slot < 0 || slot >= m->opts.n_slots) return g4_fail(G4_ERR_INPUT, "slot %d out of range [0, %d)", slot, m->opts.n_slots);
    if (from < 0 || n <= 0 || from + n > p->n || m->slot_pos[slot] < from)
        return g4_fail(G4_ERR_INPUT, "media prompt range [%d, %d) of %d ids at slot position %d", from, from + n, p->n,
                       m->slot_pos[slot]);
    if (g4_media_prompt_cut(p, from, n) != n) return g4_fail(G4_ERR_INPUT, "a prefill range may not cut an image");
    if (p->n_media == 0) {   /* a text prompt: the ordinary path */
        const int last = from + n == p->n;
        return next && last ? g4_prefill_argmax(m, slot, p->ids + from, n, next)
                            : g4_prefill(m, slot, p->ids + from, n, last ? logits : NULL);
    }
    g4_status st = G4_OK;
    if ((st = check_prompt(m, slot, p, from))) return st;
    if ((st = embed_images(m, p, from, n))) return st;
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
        else if (g4_model_group_lost(m))
            st = g4_fail(G4_ERR_RUNTIME, "%s", g4_model_group_lost(m));
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
