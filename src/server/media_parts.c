/* media_parts.c — the OpenAI content parts that carry media in chat requests: an `image_url`
 * part's image from a data: URL (base64), a local file under --media-dir, or an http(s) URL the
 * server fetches under --allow-remote-media (remote_media.c; refused otherwise), and an
 * `input_audio` part's clip (base64 data, format wav / mp3 / flac / ogg). Each is decoded here
 * (g4_image_load_mem, g4_audio_load_mem), the part handed to the chat template as {"type":
 * "image"} / {"type": "audio"} (which write <|image|> / <|audio|>), and after tokenizing the
 * prompt is expanded for them (g4_media_prompt) — the prompt ids, and so the usage counts,
 * include the soft tokens. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "io/source.h"
#include "server/server.h"

struct g4_req_media {
    _Atomic int refs;             /* the choices of one request share it */
    g4_image **images;
    int n, cap;
    g4_audio **audios;
    int n_audio, cap_audio;
    g4_media_prompt *prompt;      /* once the prompt is tokenized */
};

#define BAD(param, ...) (g4_api_err(err, 400, "invalid_request_error", param, "invalid_value", __VA_ARGS__), -1)

g4_req_media *g4_req_media_ref(g4_req_media *md) {
    if (md) md->refs++;
    return md;
}

void g4_req_media_release(g4_req_media *md) {
    if (!md || --md->refs > 0) return;
    g4_media_prompt_free(md->prompt);
    for (int i = 0; i < md->n; i++) g4_image_free(md->images[i]);
    free(md->images);
    for (int i = 0; i < md->n_audio; i++) g4_audio_free(md->audios[i]);
    free(md->audios);
    free(md);
}

g4_media_prompt *g4_req_media_prompt(const g4_req_media *md) { return md ? md->prompt : NULL; }

int g4_media_dir_has_vision(const char *dir) {
    g4_source *src;
    if (g4_source_open(dir, &src)) return 0;
    const char *data = NULL;
    size_t len = 0;
    g4_source_file(src, "config.json", &data, &len, NULL);   /* a directory or a .g4c pack */
    json_t *root = data ? json_loadb(data, len, 0, NULL) : NULL;
    const int has = root && json_is_object(json_object_get(root, "vision_config"));
    json_decref(root);
    g4_source_close(src);
    return has;
}

/* Standard base64 (RFC 4648, '=' padding optional) into a malloc'ed buffer; -1 on a bad digit. */
static int base64_decode(const char *s, size_t n, unsigned char **out, size_t *out_n) {
    unsigned char *b = malloc(n / 4 * 3 + 3);
    if (!b) return -2;
    size_t k = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        const char ch = s[i];
        int v = ch >= 'A' && ch <= 'Z' ? ch - 'A' : ch >= 'a' && ch <= 'z' ? ch - 'a' + 26
              : ch >= '0' && ch <= '9' ? ch - '0' + 52 : ch == '+' ? 62 : ch == '/' ? 63 : -1;
        if (ch == '=') {   /* padding: only at the end */
            while (i < n && s[i] == '=') i++;
            if (i != n) break;
            *out = b;
            *out_n = k;
            return 0;
        }
        if (v < 0) { free(b); return -1; }
        acc = acc << 6 | (unsigned)v;
        if ((bits += 6) >= 8) {
            bits -= 8;
            b[k++] = (unsigned char)(acc >> bits);
        }
    }
    if (bits >= 6) { free(b); return -1; }   /* a lone trailing digit */
    *out = b;
    *out_n = k;
    return 0;
}

int g4_media_request_opts(const g4_api_ctx *c, json_t *root, g4_req *r, g4_api_error *err) {
    json_t *kw = json_object_get(root, "mm_processor_kwargs"), *v;
    const char *key;
    if (!kw || json_is_null(kw)) return 0;
    if (!json_is_object(kw))
        return BAD("mm_processor_kwargs", "'mm_processor_kwargs' must be an object (only 'max_soft_tokens' is taken)");
    json_object_foreach(kw, key, v) {
        if (strcmp(key, "max_soft_tokens")) {
            static _Thread_local char param[96];   /* err->param outlives the body */
            snprintf(param, sizeof param, "mm_processor_kwargs.%.60s", key);
            return g4_api_err(err, 400, "invalid_request_error", param, "unsupported_parameter",
                              "mm_processor_kwargs.%s is not supported (only max_soft_tokens is)", key), -1;
        }
        if (json_is_null(v)) continue;
        const json_int_t n = json_is_integer(v) ? json_integer_value(v) : 0;
        if (n != 70 && n != 140 && n != 280 && n != 560 && n != 1120)
            return BAD("mm_processor_kwargs.max_soft_tokens", "mm_processor_kwargs.max_soft_tokens must be one of 70, 140, 280, 560, 1120");
        /* the model's prefill chunk was sized for the cap at load: an image never straddles a step */
        const int cap = c->media ? c->media->soft_tokens_cap : 0;
        if (n > cap)
            return BAD("mm_processor_kwargs.max_soft_tokens", "mm_processor_kwargs.max_soft_tokens %lld is above this server's "
                       "--soft-tokens-cap %d", (long long)n, cap);
        r->max_soft_tokens = (int)n;
    }
    return 0;
}

/* The image a part's URL names, decoded at the request's max_soft_tokens. */
static int load_url(const g4_api_ctx *c, const g4_req *r, const char *url, const char *where, g4_image **im,
                    g4_api_error *err) {
    const g4_media_cfg *mc = c->media;
    g4_image_opts io = mc->image;
    if (r->max_soft_tokens) io.max_soft_tokens = r->max_soft_tokens;
    g4_status st;
    if (!strncmp(url, "data:", 5)) {
        const char *comma = strchr(url, ',');
        if (!comma || comma - url < 12 || strncmp(comma - 7, ";base64", 7))
            return BAD("messages", "%s: a data: URL must be base64 (data:image/...;base64,...)", where);
        if (strncmp(url + 5, "image/", 6))
            return BAD("messages", "%s: a data: URL of type '%.*s' is not an image", where, (int)(comma - 7 - url - 5), url + 5);
        unsigned char *bytes;
        size_t n;
        const int rc = base64_decode(comma + 1, strlen(comma + 1), &bytes, &n);
        if (rc == -2) return g4_api_err(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
        if (rc) return BAD("messages", "%s: the data: URL is not valid base64", where);
        st = g4_image_load_mem(bytes, n, "the image", &io, im);
        free(bytes);
    } else if (!strncasecmp(url, "http://", 7) || !strncasecmp(url, "https://", 8)) {
        if (!mc->allow_remote)
            return BAD("messages", "%s: remote image URLs are not fetched (the server was not started with "
                       "--allow-remote-media); send the image as a data: URL", where);
        unsigned char *bytes;
        size_t n;
        char why[160];
        const int rc = g4_remote_media_fetch(url, mc->remote_max_bytes, mc->remote_timeout_s, &bytes, &n, why, sizeof why);
        if (rc == -2) return g4_api_err(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
        if (rc) return BAD("messages", "%s: fetching the image URL failed: %s", where, why);
        st = g4_image_load_mem(bytes, n, "the image", &io, im);   /* as a data: URL's bytes */
        free(bytes);
    } else {
        const char *path = !strncmp(url, "file://", 7) ? url + 7 : url;
        char real[PATH_MAX];
        const size_t dl = mc->media_dir ? strlen(mc->media_dir) : 0;
        if (!mc->media_dir)
            return BAD("messages", "%s: local image files are not served (the server has no --media-dir)", where);
        if (!realpath(path, real) || strncmp(real, mc->media_dir, dl) || real[dl] != '/')
            return BAD("messages", "%s: no such image under the server's --media-dir", where);
        st = g4_image_load(real, &io, im);
    }
    if (st == G4_ERR_NOMEM) return g4_api_err(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
    if (st) return BAD("messages", "%s: %s", where, g4_last_error());
    return 0;
}

/* The first key of o that is neither a nor b, or NULL */
static const char *stray_key(json_t *o, const char *a, const char *b) {
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v)
        if (strcmp(key, a) && strcmp(key, b)) return key;
    return NULL;
}

/* Room for one more element in *arr (of *cap, n used); -1 out of memory */
static int make_room(void *arr, int *cap, int n, size_t elem) {
    if (n < *cap) return 0;
    const int nc = *cap ? 2 * *cap : 4;
    void *na = realloc(*(void **)arr, (size_t)nc * elem);
    if (!na) return -1;
    *(void **)arr = na;
    *cap = nc;
    return 0;
}

/* r's media, made at its first part; NULL with err filled past --max-media-per-request */
static g4_req_media *req_media(const g4_api_ctx *c, g4_req *r, const char *where, g4_api_error *err) {
    g4_req_media *md = r->media;
    if (!md) {
        if (!(md = r->media = calloc(1, sizeof *md))) return g4_api_err(err, 500, "server_error", NULL, NULL, "out of memory"), NULL;
        md->refs = 1;
    }
    if (md->n + md->n_audio >= c->media->max_media)
        return g4_api_err(err, 400, "invalid_request_error", "messages", "invalid_value",
                          "%s: more than %d images and audio clips in one request (--max-media-per-request)", where,
                          c->media->max_media), NULL;
    return md;
}

int g4_media_audio_part(const g4_api_ctx *c, json_t *part, size_t i, size_t k, g4_req *r, g4_api_error *err) {
    char where[64];
    snprintf(where, sizeof where, "messages[%zu].content[%zu]", i, k);
    if (!c->media || !c->media->audio)
        return BAD("messages", "%s: this model takes no audio (no audio embedder)", where);
    const char *key = stray_key(part, "type", "input_audio");
    if (key) return BAD("messages", "%s: '%s' is not supported in an input_audio part", where, key);
    json_t *ia = json_object_get(part, "input_audio");
    json_t *data = json_object_get(ia, "data"), *fmt = json_object_get(ia, "format");
    if (!json_is_object(ia) || !json_is_string(data) || !json_is_string(fmt))
        return BAD("messages", "%s.input_audio must be an object with string 'data' (base64) and 'format'", where);
    if ((key = stray_key(ia, "data", "format"))) return BAD("messages", "%s.input_audio: '%s' is not supported", where, key);
    static const char *const formats[] = {"wav", "mp3", "flac", "ogg"};
    int known = 0;
    for (size_t f = 0; f < sizeof formats / sizeof *formats; f++) known |= !strcmp(json_string_value(fmt), formats[f]);
    if (!known) return BAD("messages", "%s.input_audio.format '%s' is not one of wav, mp3, flac, ogg", where, json_string_value(fmt));
    g4_req_media *md = req_media(c, r, where, err);
    if (!md) return -1;
    if (make_room(&md->audios, &md->cap_audio, md->n_audio, sizeof *md->audios))
        return g4_api_err(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
    unsigned char *bytes;
    size_t n;
    const int rc = base64_decode(json_string_value(data), json_string_length(data), &bytes, &n);
    if (rc == -2) return g4_api_err(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
    if (rc) return BAD("messages", "%s.input_audio.data is not valid base64", where);
    g4_status st = g4_audio_load_mem(bytes, n, "the audio", &c->media->audio_opts, &md->audios[md->n_audio]);
    free(bytes);
    if (st == G4_ERR_NOMEM) return g4_api_err(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
    if (st) return BAD("messages", "%s: %s", where, g4_last_error());
    md->n_audio++;
    /* the chat template writes <|audio|> for an {"type": "audio"} item */
    json_object_clear(part);
    json_object_set_new(part, "type", json_string("audio"));
    return 0;
}

int g4_media_part(const g4_api_ctx *c, json_t *part, size_t i, size_t k, g4_req *r, g4_api_error *err) {
    char where[64];
    snprintf(where, sizeof where, "messages[%zu].content[%zu]", i, k);
    if (!c->media || !c->media->vision)
        return BAD("messages", "%s: this model takes no images (no vision embedder)", where);
    const char *key = stray_key(part, "type", "image_url");
    if (key) return BAD("messages", "%s: '%s' is not supported in an image_url part", where, key);
    json_t *v;
    json_t *iu = json_object_get(part, "image_url");
    json_t *url = json_is_object(iu) ? json_object_get(iu, "url") : iu;
    if (!json_is_string(url))
        return BAD("messages", "%s.image_url must be an object with a string 'url'", where);
    json_object_foreach(iu, key, v) {
        if (!strcmp(key, "url")) continue;
        if (!strcmp(key, "detail") && json_is_string(v) && !strcmp(json_string_value(v), "auto")) continue;
        return BAD("messages", "%s.image_url: '%s'%s is not supported", where, key,
                   strcmp(key, "detail") ? "" : " other than \"auto\"");
    }
    g4_req_media *md = req_media(c, r, where, err);
    if (!md) return -1;
    if (make_room(&md->images, &md->cap, md->n, sizeof *md->images))
        return g4_api_err(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
    if (load_url(c, r, json_string_value(url), where, &md->images[md->n], err)) return -1;
    md->n++;
    /* the chat template writes <|image|> for an {"type": "image"} item */
    json_object_clear(part);
    json_object_set_new(part, "type", json_string("image"));
    return 0;
}

int g4_media_expand(const g4_api_ctx *c, g4_req *r, g4_api_error *err) {
    g4_req_media *md = r->media;
    if (!md) return 0;
    if (g4_media_prompt_new_av(c->tok, r->prompt, r->n_prompt, md->images, md->n, md->audios, md->n_audio, &md->prompt))
        return BAD("messages", "%s", g4_last_error());
    int n;
    const int32_t *ids = g4_media_prompt_ids(md->prompt, &n);
    int32_t *copy = malloc((size_t)n * sizeof *copy);
    if (!copy) return g4_api_err(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
    memcpy(copy, ids, (size_t)n * sizeof *copy);
    free(r->prompt);
    r->prompt = copy;
    r->n_prompt = n;
    return 0;
}
