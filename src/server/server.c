/* server.c — the server's lifecycle: bind first, load the model in a background thread (so
 * /health can answer 503 while loading), start the scheduler, then wait for SIGTERM/SIGINT and
 * shut down in order: stop accepting, let in-flight work finish (or cancel it after the grace
 * period), join everything, free everything. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server.h"

void g4_server_opts_default(g4_server_opts *o) {
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8080;
    o->parallel = 1;
    o->max_body = 4u << 20;
    o->shutdown_grace_s = 10;
    o->max_queue = 256;
    o->cache_ram_mb = 8192;   /* llama-server's --cache-ram default */
    o->max_render_mb = 256;
    o->max_renders = 2;
    o->max_media = 8;
    o->remote_media_max_bytes = 20u << 20;
    o->remote_media_timeout_s = 10;
    o->timeout_s = 60;
    o->max_connections = 1000;
    o->max_messages = 10000;
    o->max_tools = 128;
    g4_model_opts_default(&o->mo);
    o->mo.ctx = 4096;
    o->mo.prefill_chunk = 64;   /* not the library's 256: running streams wait for a whole chunk */
    o->mo.tp = 0;               /* unset: 1, or the mpirun size */
}

/* Whether --host names only this host's loopback interface. */
static int loopback_host(const char *h) {
    return !strcmp(h, "localhost") || !strcmp(h, "::1") || !strncmp(h, "127.", 4);
}

/* Fallback when the template loader refuses the directory (e.g. a tokenizer_config.json it cannot
 * read): chat_template.jinja alone, with the special-token strings then supplied per request
 * from the tokenizer (g4_api_ctx.template_specials). */
static void load_template_alone(g4_srv *s, const char *dir) {
    char why[512], path[4096];
    snprintf(why, sizeof why, "%s", g4_last_error());
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    FILE *f = fopen(path, "rb");
    char *src = NULL;
    long n = -1;
    if (f && !fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET) && (src = malloc((size_t)n + 1)) &&
        fread(src, 1, (size_t)n, f) == (size_t)n && !g4_template_load_source(src, (size_t)n, path, NULL, &s->tmpl)) {
        s->api.template_specials = 1;
        fprintf(stderr, "gemma4c serve: warning: %s; using %s with the tokenizer's special tokens\n", why, path);
    } else {
        s->tmpl = NULL;
        fprintf(stderr, "gemma4c serve: no chat template (%s); /v1/chat/completions is disabled\n", why);
    }
    free(src);
    if (f) fclose(f);
}

static void *loader(void *arg) {
    g4_srv *s = arg;
    g4_model_opts mo = s->opts.mo;
    mo.n_slots = s->opts.parallel;
    const char *dir = s->opts.model_path;
    double t0 = g4_now();
    /* --load-delay-ms (a testing aid): hold the loading state so tests can see /health answer 503 */
    const int delay = s->opts.load_delay_ms;
    if (delay > 0) nanosleep(&(struct timespec){delay / 1000, (delay % 1000) * 1000000L}, NULL);
    g4_status st = G4_OK;
    /* images (media_parts.c): a step holds a whole image, so the model's chunk is at least one
     * image's soft tokens; the scheduler still slices text at --prefill-chunk */
    const int text_chunk = mo.prefill_chunk;
    g4_media_cfg *mc = &s->media;
    /* the processor settings: an --mmproj's beside a GGUF, else the model's own */
    const char *media_src = mo.mmproj ? mo.mmproj : dir;
    const int have_image_opts = !g4_image_opts_load(media_src, &mc->image);
    if (s->opts.max_soft_tokens) mc->image.max_soft_tokens = s->opts.max_soft_tokens;
    if (s->opts.max_image_pixels) mc->image.max_pixels = s->opts.max_image_pixels;
    /* a request may ask for up to the cap (mm_processor_kwargs), so the chunk holds that */
    mc->soft_tokens_cap = s->opts.soft_tokens_cap > mc->image.max_soft_tokens ? s->opts.soft_tokens_cap
                                                                             : mc->image.max_soft_tokens;
    if (have_image_opts && (mo.mmproj || g4_media_dir_has_vision(dir)) && mc->soft_tokens_cap > mo.prefill_chunk)
        mo.prefill_chunk = mc->soft_tokens_cap;
    if (s->opts.model) s->model = s->opts.model;
    else st = g4_model_load(dir, &mo, &s->model);
    mc->vision = !st && have_image_opts && g4_model_has_vision(s->model);
    mc->audio = !st && !g4_audio_opts_load(media_src, &mc->audio_opts) && g4_model_has_audio(s->model);
    if (s->opts.max_audio_seconds > 0) mc->audio_opts.max_seconds = s->opts.max_audio_seconds;
    mc->max_media = s->opts.max_media;
    mc->media_dir = s->opts.media_dir;
    mc->allow_remote = s->opts.allow_remote_media;
    mc->remote_max_bytes = s->opts.remote_media_max_bytes;
    mc->remote_timeout_s = s->opts.remote_media_timeout_s;
    s->api.media = mc;
    /* a model directory without a tokenizer is bad input, as `run` reports it */
    if (!st && (st = g4_tokenizer_load(dir, &s->tok)) == G4_ERR_IO) st = G4_ERR_INPUT;
    if (!st && g4_template_load(dir, &s->tmpl)) {
        s->tmpl = NULL;
        load_template_alone(s, dir);
    }
    const g4_model_info *info = st ? NULL : g4_model_get_info(s->model);
    if (!st) st = g4_gen_config_load(dir, info, &s->gen);
    /* response_format's token masks walk the vocabulary's byte trie, built once here */
    if (!st && g4_vocab_index_new(s->tok, s->gen.eos, s->gen.n_eos, &s->vindex))
        fprintf(stderr, "gemma4c serve: warning: no structured outputs: %s\n", g4_last_error());
    if (!st && !(s->sched = g4_sched_new(s->model, s->tok, &s->gen, s->mx, text_chunk, s->opts.max_queue,
                                                     s->opts.cache_ram_mb)))
        st = g4_fail(G4_ERR_NOMEM, "out of memory starting the scheduler");
    /* --draft: the MTP drafter reads the loaded model (checked against it here) */
    if (!st && s->opts.draft_dir) st = g4_drafter_mtp_new(s->opts.draft_dir, s->model, &s->mtp);
    g4_drafter *d = s->mtp ? s->mtp : s->opts.drafter;
    if (!st && d) st = g4_sched_set_spec(s->sched, d, s->opts.draft_max);
    if (!st) {
        s->api.info = info;
        s->api.tok = s->tok;
        s->api.tmpl = s->tmpl;
        s->api.vocab_index = s->vindex;
        s->api.gen = &s->gen;
        st = g4_sched_start(s->sched);
    }
    if (st) {
        snprintf(s->load_error, sizeof s->load_error, "%s", g4_last_error());
        s->load_status = st;
        s->state = G4_SRV_FAILED;
        return NULL;
    }
    int expect = G4_SRV_LOADING;
    atomic_compare_exchange_strong(&s->state, &expect, G4_SRV_READY);
    fprintf(stderr, "gemma4c serve: model loaded in %.2f s: ctx %d x %d slots, KV %.1f MiB (%s); ready\n", g4_now() - t0,
            info->ctx, info->n_slots, (double)info->kv_bytes / (1 << 20), g4_kv_type_name(s->opts.mo.kv_type));
    return NULL;
}

int g4_server_main(const g4_server_opts *o) {
    /* a weight file truncated under the server fails requests and /health, not the process */
    if (g4_guard_mapped_files()) fprintf(stderr, "gemma4c serve: warning: %s\n", g4_last_error());
    g4_srv *s = calloc(1, sizeof *s);
    if (!s) return 1;
    s->opts = *o;
    s->started = (long)time(NULL);
    s->state = G4_SRV_LOADING;
    if (o->alias) snprintf(s->model_name, sizeof s->model_name, "%s", o->alias);
    else {
        /* the directory's basename, trailing slashes ignored */
        char tmp[sizeof s->model_name];
        snprintf(tmp, sizeof tmp, "%s", o->model_path);
        size_t n = strlen(tmp);
        while (n > 1 && tmp[n - 1] == '/') tmp[--n] = 0;
        const char *b = strrchr(tmp, '/');
        snprintf(s->model_name, sizeof s->model_name, "%s", b ? b + 1 : tmp);
    }
    s->api.model_name = s->model_name;
    s->api.model_path = o->model_path;
    s->api.render_budget = (size_t)o->max_render_mb << 20;
    s->api.max_messages = o->max_messages;
    s->api.no_special_in_content = o->no_special_in_content;
    s->api.max_tools = o->max_tools;
    s->api.spec_max = o->drafter || o->draft_dir ? o->draft_max : 0;
    if (!sem_init(&s->renders, 0, (unsigned)(o->max_renders > 0 ? o->max_renders : 1))) s->api.renders = &s->renders;
    s->mx = g4_metrics_new();
    if (!s->mx) { free(s); return 1; }
    /* libcurl's global state is set up here, before any parse worker may fetch */
    if (o->allow_remote_media && g4_remote_media_init()) {
        fprintf(stderr, "gemma4c serve: --allow-remote-media: libcurl failed to initialize\n");
        g4_metrics_free(s->mx);
        free(s);
        return 1;
    }

    /* Block the stop signals in every thread (they inherit the mask); main takes them with
     * sigtimedwait, so no handler runs on an arbitrary thread. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    int port = 0, rc = 0;
    g4_status st = g4_http_start(s, &port);
    if (st) {
        fprintf(stderr, "gemma4c serve: %s\n", g4_last_error());
        g4_model_free(o->model);   /* a preloaded model's other ranks wait for its stop message */
        g4_metrics_free(s->mx);
        free(s);
        return st == G4_ERR_INPUT ? 2 : 1;
    }
    const int v6 = strchr(o->host, ':') != NULL;   /* an IPv6 literal is written in brackets */
    fprintf(stderr, "gemma4c serve: listening on http://%s%s%s:%d (model '%s', loading)\n", v6 ? "[" : "", o->host,
            v6 ? "]" : "", port, s->model_name);
    if (!o->n_api_keys && !loopback_host(o->host))
        fprintf(stderr, "gemma4c serve: warning: listening on %s without an API key: anyone who can reach this "
                        "address can use the model (--api-key KEY, --api-key-file FILE or G4_API_KEY)\n", o->host);
    if (o->allow_remote_media && !o->n_api_keys && !loopback_host(o->host))
        fprintf(stderr, "gemma4c serve: warning: --allow-remote-media without an API key: any client can make this "
                        "server fetch any URL, internal addresses included\n");
    pthread_t lt;
    int have_loader = !pthread_create(&lt, NULL, loader, s);
    if (!have_loader) {
        fprintf(stderr, "gemma4c serve: cannot start the loader thread\n");
        rc = 1;
    }
    while (have_loader) {
        struct timespec ts = {0, 200 * 1000000L};
        int sig = sigtimedwait(&set, NULL, &ts);
        if (sig == SIGTERM || sig == SIGINT) {
            fprintf(stderr, "gemma4c serve: %s: stopping\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
            break;
        }
        /* --exit-on-tp-loss: a lost MPI group ends the process (and so the job) for a supervisor
         * to restart, instead of answering 503 until stopped */
        if (o->exit_on_tp_loss && s->state == G4_SRV_READY && g4_model_group_lost(s->model)) {
            fprintf(stderr, "gemma4c serve: exiting (--exit-on-tp-loss)\n");
            break;
        }
        if (s->state == G4_SRV_FAILED) {
            fprintf(stderr, "gemma4c serve: %s\n", s->load_error);
            /* bad input (a missing or malformed model) exits 2, as every subcommand does */
            rc = s->load_status == G4_ERR_INPUT || s->load_status == G4_ERR_CONTEXT ? 2 : 1;
            break;
        }
    }
    /* During the grace the server still accepts: /health answers 503 "stopping" and new work 503,
     * while the requests in flight finish; then the daemon stops (MHD_stop_daemon from this thread:
     * MHD_quiesce_daemon here raced the daemon's epoll thread, which took the listen socket out of
     * its epoll set at the same time and aborted the process when it lost) */
    if (s->state != G4_SRV_FAILED) s->state = G4_SRV_STOPPING;
    if (have_loader) pthread_join(lt, NULL);
    if (s->state == G4_SRV_READY) s->state = G4_SRV_STOPPING;   /* loaded after the signal */
    if (s->sched) g4_sched_shutdown(s->sched, o->shutdown_grace_s);
    g4_http_stop(s);
    g4_sched_free(s->sched);
    g4_drafter_free(s->mtp);
    g4_gen_config_free(&s->gen);
    g4_template_free(s->tmpl);
    g4_vocab_index_free(s->vindex);
    g4_tokenizer_free(s->tok);
    if (s->model && g4_model_group_lost(s->model)) {
        /* exit status 1; the MPI library's exit handler then ends every rank (MPI_Abort) */
        fprintf(stderr, "gemma4c serve: %s; ending every rank\n", g4_model_group_lost(s->model));
        rc = 1;
    }
    g4_model_free(s->model);
    g4_metrics_free(s->mx);
    if (s->api.renders) sem_destroy(&s->renders);
    if (o->allow_remote_media) g4_remote_media_cleanup();
    free(s);
    if (!rc) fprintf(stderr, "gemma4c serve: stopped\n");
    return rc;
}
