/* mm_bench.c — the multimodal front end's speed through the public API, in one process: an image
 * through the image processor (decode, resize, patches: g4_image_load) and the vision embedder
 * (g4_image_embed), an audio file through the feature extractor (g4_audio_load) and the audio
 * embedder (g4_audio_embed), and the time to first token of an image prompt from an empty slot
 * (processor + tokenizer + expansion + prefill with the embedder, to the greedy first token).
 * Each is run --reps times after one warm-up; the medians go to stdout as one JSON object.
 * bench/mm_speed.sh runs it on the 12B-width checkpoint beside llama.cpp's mtmd.
 * Usage: mm_bench -m MODEL [--mmproj FILE] --image FILE [--audio FILE] [-p PROMPT] [--reps 5]
 *                 [--threads N] [--max-soft-tokens N]
 * Build: make build/bench/mm_bench */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4c.h"

static double median(double *v, int n) {
    g4_sort_doubles(v, n);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int fail(const char *what) {
    fprintf(stderr, "mm_bench: %s: %s\n", what, g4_last_error());
    return 1;
}

enum { MAX_REPS = 100 };

int main(int argc, char **argv) {
    const char *model = NULL, *mmproj = NULL, *image = NULL, *audio = NULL;
    const char *prompt = "<start_of_turn>user\n<|image|>Describe this image.<end_of_turn>\n<start_of_turn>model\n";
    int reps = 5, threads = 0, soft = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "-m")) model = v;
        else if (!strcmp(a, "--mmproj")) mmproj = v;
        else if (!strcmp(a, "--image")) image = v;
        else if (!strcmp(a, "--audio")) audio = v;
        else if (!strcmp(a, "-p")) prompt = v;
        else if (!strcmp(a, "--reps")) reps = atoi(v);
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--max-soft-tokens")) soft = atoi(v);
        else { fprintf(stderr, "mm_bench: unknown option %s\n", a); return 2; }
    }
    if (!model || !image || reps < 1 || reps > MAX_REPS) {
        fprintf(stderr, "usage: mm_bench -m MODEL [--mmproj FILE] --image FILE [--audio FILE] [-p PROMPT] [--reps 1..%d]\n"
                        "                [--threads N] [--max-soft-tokens N]\n", MAX_REPS);
        return 2;
    }
    const char *media_src = mmproj ? mmproj : model;
    g4_image_opts io;
    g4_audio_opts ao;
    if (g4_image_opts_load(media_src, &io) || g4_audio_opts_load(media_src, &ao)) return fail(media_src);
    if (soft) io.max_soft_tokens = soft;
    g4_model_opts mo;
    g4_model_opts_default(&mo);
    mo.threads = threads;
    mo.mmproj = mmproj;
    mo.ctx = 4096;
    if (mo.prefill_chunk < io.max_soft_tokens) mo.prefill_chunk = io.max_soft_tokens;   /* an image in one step */
    g4_model *m;
    g4_tokenizer *tok;
    if (g4_model_load(model, &mo, &m)) return fail(model);
    if (g4_tokenizer_load(model, &tok)) return fail(model);
    const int H = g4_model_get_info(m)->hidden_size;

    double pre[MAX_REPS], emb[MAX_REPS], apre[MAX_REPS], aemb[MAX_REPS], ttft[MAX_REPS];
    int n_soft = 0, n_frames = 0, n_prompt = 0, w = 0, h = 0;
    for (int r = -1; r < reps; r++) {   /* r = -1: the warm-up (page faults of the weights, caches) */
        double t0 = g4_now();
        g4_image *im;
        if (g4_image_load(image, &io, &im)) return fail(image);
        double t1 = g4_now();
        float *out = malloc(sizeof(float) * (size_t)im->n_patches * H);
        if (!out || g4_image_embed(m, im, out)) return fail("image embedder");
        double t2 = g4_now();
        if (r >= 0) pre[r] = t1 - t0, emb[r] = t2 - t1;
        n_soft = im->n_patches, w = im->src_width, h = im->src_height;
        free(out);
        g4_image_free(im);
        if (audio) {
            g4_audio *a;
            t0 = g4_now();
            if (g4_audio_load(audio, &ao, &a)) return fail(audio);
            t1 = g4_now();
            float *ae = malloc(sizeof(float) * (size_t)a->n_frames * H);
            if (!ae || g4_audio_embed(m, a, ae)) return fail("audio embedder");
            t2 = g4_now();
            if (r >= 0) apre[r] = t1 - t0, aemb[r] = t2 - t1;
            n_frames = a->n_frames;
            free(ae);
            g4_audio_free(a);
        }
        /* the image prompt from an empty slot to its first (greedy) token */
        g4_slot_reset(m, 0);
        t0 = g4_now();
        int32_t *ids, next;
        size_t n;
        g4_media_prompt *mp;
        if (g4_image_load(image, &io, &im)) return fail(image);
        if (g4_tokenize(tok, prompt, strlen(prompt), 1, &ids, &n)) return fail("prompt");
        if (g4_media_prompt_new(tok, ids, (int)n, &im, 1, &mp)) return fail("prompt");
        if (g4_prefill_media_argmax(m, 0, mp, &next)) return fail("prefill");
        t1 = g4_now();
        if (r >= 0) ttft[r] = t1 - t0;
        g4_media_prompt_ids(mp, &n_prompt);
        g4_media_prompt_free(mp);
        free(ids);
        g4_image_free(im);
    }
    printf("{\"image\": \"%s\", \"src_width\": %d, \"src_height\": %d, \"soft_tokens\": %d, \"hidden\": %d, "
           "\"image_preprocess_s\": %.4f, \"image_embed_s\": %.4f",
           image, w, h, n_soft, H, median(pre, reps), median(emb, reps));
    if (audio)
        printf(", \"audio\": \"%s\", \"audio_frames\": %d, \"audio_preprocess_s\": %.4f, \"audio_embed_s\": %.4f", audio,
               n_frames, median(apre, reps), median(aemb, reps));
    printf(", \"prompt_tokens\": %d, \"image_prompt_ttft_s\": %.4f, \"reps\": %d, \"threads\": %d}\n", n_prompt,
           median(ttft, reps), reps, threads);
    g4_tokenizer_free(tok);
    g4_model_free(m);
    return 0;
}
