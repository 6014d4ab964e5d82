/* cli_media.c — the media options of run, logits and tokenize (--image, --audio and their limits),
 * and the files they name turned, with a prompt's ids, into a g4_media_prompt. The processors and
 * the prompt assembly are the library's (g4_image_*, g4_audio_*, g4_media_prompt_*). */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/source.h"
#include "model/mmproj.h"
#include "server/server.h"   /* g4_media_dir_has_vision */

const char *const cli_media_opts_help =
    "media options (run, logits, tokenize):\n"
    "  --image FILE                 an image (PNG, JPEG, WebP, GIF) for the next <|image|> placeholder\n"
    "                               of the prompt, in order; repeatable\n"
    "  --audio FILE                 a sound file (WAV, FLAC, OGG, MP3) for the next <|audio|>, in order;\n"
    "                               repeatable; resampled to 16 kHz where it is not\n"
    "  --max-soft-tokens N          soft tokens per image: 70, 140, 280, 560 or 1120 (default: the\n"
    "                               model's processor config, else 280)\n"
    "  --max-image-pixels N         refuse images of more pixels (default 100000000)\n"
    "  --max-audio-seconds S        refuse longer audio (default 30)\n"
    "  --max-media-per-request N    refuse more images and audio clips than this (default 8)\n";

int cli_parse_media_opt(const char *cmd, int argc, char **argv, int *i, cli_media *md) {
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    long n;
    if (strcmp(a, "--image") && strcmp(a, "--audio") && strcmp(a, "--max-soft-tokens") && strcmp(a, "--max-image-pixels") &&
        strcmp(a, "--max-audio-seconds") && strcmp(a, "--max-media-per-request"))
        return 0;
    if (!v) return cli_usage_error(cmd, "%s needs a value", a), -1;
    ++*i;
    if (!strcmp(a, "--image")) {
        if (md->n_images == CLI_MEDIA_MAX) return cli_usage_error(cmd, "more than %d --image options", CLI_MEDIA_MAX), -1;
        md->paths[md->n_images++] = v;
        return 1;
    }
    if (!strcmp(a, "--audio")) {
        if (md->n_audios == CLI_MEDIA_MAX) return cli_usage_error(cmd, "more than %d --audio options", CLI_MEDIA_MAX), -1;
        md->audio_paths[md->n_audios++] = v;
        return 1;
    }
    if (!strcmp(a, "--max-audio-seconds")) {
        float s;
        if (!cli_parse_float(cmd, a, v, 0.001f, 86400, &s)) return -1;
        md->max_audio_seconds = s;
        return 1;
    }
    if (!strcmp(a, "--max-soft-tokens")) {
        if (!cli_parse_int(cmd, a, v, 1, 1 << 20, &n)) return -1;
        if (n != 70 && n != 140 && n != 280 && n != 560 && n != 1120)
            return cli_usage_error(cmd, "--max-soft-tokens expects 70, 140, 280, 560 or 1120, got %ld", n), -1;
        md->max_soft_tokens = (int)n;
        return 1;
    }
    if (!strcmp(a, "--max-image-pixels")) {
        if (!cli_parse_int(cmd, a, v, 1, 1L << 40, &n)) return -1;
        md->max_pixels = n;
        return 1;
    }
    if (!cli_parse_int(cmd, a, v, 0, CLI_MEDIA_MAX, &n)) return -1;
    md->max_media = (int)n;
    md->max_media_set = 1;
    return 1;
}

int cli_media_check(const char *cmd, const cli_media *md) {
    const int max = md->max_media_set ? md->max_media : CLI_MEDIA_DEFAULT_MAX;
    if (md->n_images + md->n_audios > max)
        return cli_usage_error(cmd, "%d images and audio clips, more than --max-media-per-request %d",
                               md->n_images + md->n_audios, max);
    return 0;
}

g4_status cli_media_load(cli_media *md, const char *model_dir, int *max_soft) {
    *max_soft = 0;
    g4_status st = G4_OK;
    if (md->n_audios) {
        g4_audio_opts ao;
        if ((st = g4_audio_opts_load(model_dir, &ao))) return st;
        if (md->max_audio_seconds > 0) ao.max_seconds = md->max_audio_seconds;
        if (!(md->audios = calloc((size_t)md->n_audios, sizeof *md->audios))) return g4_fail(G4_ERR_NOMEM, "out of memory");
        for (int i = 0; i < md->n_audios && !st; i++) st = g4_audio_load(md->audio_paths[i], &ao, &md->audios[i]);
        if (st) return st;
    }
    if (!md->n_images) return G4_OK;
    g4_image_opts io;
    if ((st = g4_image_opts_load(model_dir, &io))) return st;
    if (md->max_soft_tokens) io.max_soft_tokens = md->max_soft_tokens;
    if (md->max_pixels) io.max_pixels = md->max_pixels;
    md->images = calloc((size_t)md->n_images, sizeof *md->images);
    if (!md->images) return g4_fail(G4_ERR_NOMEM, "out of memory");
    for (int i = 0; i < md->n_images && !st; i++) {
        st = g4_image_load(md->paths[i], &io, &md->images[i]);
        if (!st && md->images[i]->n_patches > *max_soft) *max_soft = md->images[i]->n_patches;
    }
    return st;
}

int cli_model_has_vision(const char *model, const char *mmproj) {
    return mmproj || g4_media_dir_has_vision(model);
}

g4_status cli_mmproj_check(const char *model, const char *mmproj, const cli_media *md) {
    if (!g4_is_gguf(model))   /* as the model loader says it for run, logits and serve */
        return g4_fail(G4_ERR_INPUT, "--mmproj %s: goes with a GGUF model (-m MODEL.gguf); %s carries its own vision and "
                       "audio settings", mmproj, model);
    g4_source *src;
    g4_status st = g4_source_open(mmproj, &src);
    if (st) return st;
    const g4_gguf *g = g4_source_kind_of(src) == G4_SOURCE_GGUF ? g4_source_gguf(src, &st) : NULL;
    g4_mmproj_geom geo;
    if (!st && !g) st = g4_fail(G4_ERR_INPUT, "--mmproj %s: not a GGUF file", mmproj);
    if (!st) st = g4_mmproj_geom_read(g, &geo);   /* an mmproj whose tensors fit together, or why not */
    if (!st && md->n_images && !geo.has_vision) st = g4_fail(G4_ERR_INPUT, "%s: this mmproj has no vision projector (gemma4uv) for --image", mmproj);
    if (!st && md->n_audios && !geo.has_audio) st = g4_fail(G4_ERR_INPUT, "%s: this mmproj has no audio projector (gemma4ua) for --audio", mmproj);
    g4_source_close(src);
    return st;
}

g4_status cli_media_prompt(const cli_media *md, const g4_tokenizer *tok, const int32_t *ids, int n,
                           g4_media_prompt **out) {
    return g4_media_prompt_new_av(tok, ids, n, md->images, md->n_images, md->audios, md->n_audios, out);
}

void cli_media_free(cli_media *md) {
    if (md->images)
        for (int i = 0; i < md->n_images; i++) g4_image_free(md->images[i]);
    free(md->images);
    md->images = NULL;
    if (md->audios)
        for (int i = 0; i < md->n_audios; i++) g4_audio_free(md->audios[i]);
    free(md->audios);
    md->audios = NULL;
}
