/* audio.c — g4_audio_*: a sound file → what Gemma 4 unified's audio feature extractor
 * (Gemma4UnifiedAudioFeatureExtractor) makes of a 16 kHz waveform: frames of audio_embed_dim
 * samples, the last zero-padded. Decoding is libsndfile's (WAV, FLAC, OGG, MP3, ... as float
 * samples in [-1, 1], as python-soundfile reads them), channels averaged to mono (librosa's
 * to_mono); a file at another rate is resampled to 16 kHz with libsoxr, which transformers does
 * not do (its processor takes 16 kHz only). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>
#include <sndfile.h>
#include <soxr.h>

#include "gemma4c.h"
#include "io/source.h"
#include "model/mmproj.h"

enum { AUDIO_RATE = 16000 };

void g4_audio_opts_default(g4_audio_opts *o) {
    o->frame = 640;
    o->max_seconds = 30;
}

g4_status g4_audio_opts_load(const char *dir, g4_audio_opts *o) {
    g4_audio_opts_default(o);
    g4_source *src;
    if (g4_source_open(dir, &src)) return G4_OK;   /* no model there: the defaults */
    if (g4_source_kind_of(src) == G4_SOURCE_GGUF) {   /* an mmproj: its frame */
        g4_status st = G4_OK;
        const g4_gguf *g = g4_source_gguf(src, &st);
        g4_mmproj_geom geo;
        if (g && g4_is_mmproj(g) && !(st = g4_mmproj_geom_read(g, &geo)) && geo.has_audio) o->frame = geo.audio_frame;
        g4_source_close(src);
        return st;
    }
    const char *data, *path;
    size_t len;
    g4_status st = g4_source_file(src, "config.json", &data, &len, &path);   /* a directory or a .g4c pack */
    json_t *root = NULL;
    json_error_t je;
    if (!st && data && !(root = json_loadb(data, len, 0, &je)))
        st = g4_fail(G4_ERR_INPUT, "%s: not valid JSON: %s (line %d)", path, je.text, je.line);
    json_t *ac = root ? json_object_get(root, "audio_config") : NULL;
    json_t *d = json_is_object(ac) ? json_object_get(ac, "audio_embed_dim") : NULL;
    if (d && (!json_is_integer(d) || json_integer_value(d) < 1 || json_integer_value(d) > 1 << 20))
        st = g4_fail(G4_ERR_INPUT, "%s: audio_config.audio_embed_dim must be a positive integer", path);
    else if (d) o->frame = (int)json_integer_value(d);
    json_decref(root);
    g4_source_close(src);
    return st;
}

void g4_audio_free(g4_audio *a) {
    if (!a) return;
    free(a->frames);
    free(a);
}

/* libsndfile's virtual I/O over bytes in memory */
typedef struct {
    const unsigned char *p;
    sf_count_t n, at;
} mem_io;

static sf_count_t mem_len(void *u) { return ((mem_io *)u)->n; }
static sf_count_t mem_seek(sf_count_t off, int whence, void *u) {
    mem_io *m = u;
    sf_count_t to = whence == SEEK_SET ? off : whence == SEEK_CUR ? m->at + off : m->n + off;
    if (to < 0 || to > m->n) return -1;
    return m->at = to;
}
static sf_count_t mem_read(void *dst, sf_count_t n, void *u) {
    mem_io *m = u;
    if (n > m->n - m->at) n = m->n - m->at;
    memcpy(dst, m->p + m->at, (size_t)n);
    m->at += n;
    return n;
}
static sf_count_t mem_write(const void *src, sf_count_t n, void *u) { (void)src, (void)n, (void)u; return 0; }
static sf_count_t mem_tell(void *u) { return ((mem_io *)u)->at; }

/* Mono float samples of an open file, resampled to 16 kHz; *out malloc'ed. */
static g4_status read_mono(SNDFILE *f, const SF_INFO *in, const char *name, const g4_audio_opts *o, float **out,
                           long *n_out) {
    const double secs = (double)in->frames / in->samplerate;
    if (in->channels < 1 || in->samplerate < 1 || in->frames < 1)
        return g4_fail(G4_ERR_INPUT, "%s: no audio samples in it", name);
    if (in->samplerate < 1000 || in->samplerate > 768000 || in->channels > 64)   /* no real recording is outside */
        return g4_fail(G4_ERR_INPUT, "%s: %d channels at %d Hz; gemma4c reads 1 to 64 channels at 1 to 768 kHz", name,
                       in->channels, in->samplerate);
    if (secs > o->max_seconds)
        return g4_fail(G4_ERR_INPUT, "%s: %.1f s of audio, more than the limit of %g s (--max-audio-seconds)", name, secs,
                       o->max_seconds);
    const size_t n = (size_t)in->frames, ch = (size_t)in->channels;
    float *inter = malloc(n * ch * sizeof(float)), *mono = malloc(n * sizeof(float));
    if (!inter || !mono) { free(inter); free(mono); return g4_fail(G4_ERR_NOMEM, "out of memory reading %s", name); }
    const sf_count_t got = sf_readf_float(f, inter, (sf_count_t)n);
    if (got != (sf_count_t)n) {
        free(inter);
        free(mono);
        return g4_fail(G4_ERR_INPUT, "%s: truncated or corrupt audio (%lld of %zu frames)", name, (long long)got, n);
    }
    for (size_t i = 0; i < n; i++) {
        double s = 0;
        for (size_t c = 0; c < ch; c++) s += inter[i * ch + c];
        mono[i] = ch == 1 ? inter[i] : (float)(s / (double)ch);
    }
    free(inter);
    if (in->samplerate == AUDIO_RATE) {
        *out = mono;
        *n_out = (long)n;
        return G4_OK;
    }
    const size_t cap = (size_t)ceil((double)n * AUDIO_RATE / in->samplerate) + 16;
    float *rs = malloc(cap * sizeof(float));
    size_t done = 0;
    soxr_error_t e = rs ? soxr_oneshot(in->samplerate, AUDIO_RATE, 1, mono, n, NULL, rs, cap, &done, NULL, NULL, NULL)
                        : "out of memory";
    free(mono);
    if (e) { free(rs); return g4_fail(G4_ERR_RUNTIME, "%s: resampling %d Hz to 16 kHz: %s", name, in->samplerate, e); }
    *out = rs;
    *n_out = (long)done;
    return G4_OK;
}

/* Frames of o->frame samples, the last zero-padded, as the feature extractor cuts them. */
static g4_status frame(const float *s, long n, const char *name, const g4_audio_opts *o, const SF_INFO *in,
                       g4_audio **out) {
    if (n < 1)   /* a few samples at a high rate resample to none */
        return g4_fail(G4_ERR_INPUT, "%s: too short: no sample left at 16 kHz", name);
    g4_audio *a = calloc(1, sizeof *a);
    const long nf = (n + o->frame - 1) / o->frame;
    if (a) a->frames = calloc((size_t)nf * (size_t)o->frame, sizeof(float));
    if (!a || !a->frames) { g4_audio_free(a); return g4_fail(G4_ERR_NOMEM, "out of memory framing %s", name); }
    memcpy(a->frames, s, (size_t)n * sizeof(float));
    a->src_rate = in->samplerate;
    a->src_channels = in->channels;
    a->n_samples = n;
    a->frame = o->frame;
    a->n_frames = (int)nf;
    *out = a;
    return G4_OK;
}

static g4_status load(SNDFILE *f, SF_INFO *info, const char *name, const g4_audio_opts *o, g4_audio **out) {
    if (!f) return g4_fail(G4_ERR_INPUT, "%s: not a readable sound file (%s)", name, sf_strerror(NULL));
    float *s = NULL;
    long n = 0;
    g4_status st = read_mono(f, info, name, o, &s, &n);
    sf_close(f);
    if (!st) st = frame(s, n, name, o, info, out);
    free(s);
    return st;
}

g4_status g4_audio_load(const char *path, const g4_audio_opts *o, g4_audio **out) {
    *out = NULL;
    SF_INFO info = {0};
    return load(sf_open(path, SFM_READ, &info), &info, path, o, out);
}

g4_status g4_audio_load_mem(const void *data, size_t n, const char *name, const g4_audio_opts *o, g4_audio **out) {
    *out = NULL;
    SF_VIRTUAL_IO io = {mem_len, mem_seek, mem_read, mem_write, mem_tell};
    mem_io m = {data, (sf_count_t)n, 0};
    SF_INFO info = {0};
    return load(sf_open_virtual(&io, SFM_READ, &info, &m), &info, name, o, out);
}
