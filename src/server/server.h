/* server.h — what the modules of the HTTP server share (not public API): options, the loaded
 * model bundle, a request's life between the HTTP side and the scheduler, metrics and the
 * OpenAI request/response codec. Only src/server and src/cli/cli_serve.c include it. */
#ifndef G4_SERVER_H
#define G4_SERVER_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "gemma4c.h"

/* ---------------------------------------------------------------- options, entry point */

typedef struct {
    const char *model_path;
    const char *host;        /* default 127.0.0.1 (loopback) */
    const char *alias;       /* model name served; default the model directory's basename */
    int port;                /* 0 = any free port (printed on stderr) */
    int parallel;            /* session slots (g4_model_opts.n_slots) */
    size_t max_body;         /* request body limit in bytes */
    double shutdown_grace_s; /* SIGTERM: in-flight work may finish for this long, then is cancelled */
    int load_delay_ms;       /* testing aid: hold the loading state this long before loading */
    char **api_keys;         /* accepted bearer tokens (--api-key, --api-key-file, G4_API_KEY); none: */
    int n_api_keys;          /* no authentication */
    int auth_all;            /* 1: /health and /metrics need a key too (default: open) */
    int max_queue;           /* requests waiting for a slot before new ones get 429 (0: no cap) */
    int max_render_mb;       /* the chat template's memory budget per request (MiB) */
    int max_renders;         /* chat templates rendered at once; more requests wait their turn */
    int cache_ram_mb;        /* prompt cache: MiB of slot snapshots kept (0: no prefix reuse at all) */
    const char *media_dir;   /* image_url parts may name files under this directory, a real path (NULL: none) */
    int allow_remote_media;  /* image_url parts may name http(s) URLs, fetched by the server */
    size_t remote_media_max_bytes;   /* a fetched image's byte cap */
    int remote_media_timeout_s;      /* a fetch's total time limit */
    int max_media;           /* images per request (--max-media-per-request) */
    int max_soft_tokens;     /* per image, unless a request says; 0: the model's processor config */
    int soft_tokens_cap;     /* the most a request's mm_processor_kwargs.max_soft_tokens may ask; 0: max_soft_tokens */
    long max_image_pixels;   /* 0: the library's default */
    int timeout_s;           /* idle connections close; a request's headers + body arrive within it */
    int max_connections;     /* open connections; past it the oldest still sending its request goes */
    int max_conn_per_ip;     /* open connections per client address (0: no limit) */
    int queue_timeout_s;     /* a request waiting this long for a slot gets 503 (0: no limit) */
    const char **cors;       /* --cors-origin values ("*": any origin); n_cors of them */
    int n_cors;
    int max_messages, max_tools;   /* per request (0: no limit) */
    int no_special_in_content;   /* special-token text in messages / tools stays text (openai.c) */
    int exit_on_tp_loss;         /* a lost MPI group (g4_model_group_lost) ends the process */
    double max_audio_seconds;  /* 0: the library's default */
    g4_model_opts mo;        /* threads, ctx, prefill chunk, tp, mmap, numerics, tuning, ... */
    g4_drafter *drafter;     /* --spec ngram: every request decodes speculatively, up to draft_max */
    const char *draft_dir;   /* --draft DIR: the MTP drafter, made once the model is loaded */
    int draft_max;           /* drafts a round (mo.verify_rows covers parallel x (draft_max + 1)) */
    g4_model *model;         /* already loaded (the MPI backend loads before serving); else NULL */
} g4_server_opts;

void g4_server_opts_default(g4_server_opts *o);
/* Runs the server until SIGTERM/SIGINT; returns the process exit code (0 clean, 1 failure). */
int g4_server_main(const g4_server_opts *o);

/* ---------------------------------------------------------------- metrics */

typedef struct g4_metrics g4_metrics;

g4_metrics *g4_metrics_new(void);
void g4_metrics_free(g4_metrics *mx);
void g4_metrics_request(g4_metrics *mx, const char *route, int status);
void g4_metrics_tokens(g4_metrics *mx, long prompt, long generated);
void g4_metrics_ttft(g4_metrics *mx, double seconds);
void g4_metrics_itl(g4_metrics *mx, double seconds);
void g4_metrics_cancelled(g4_metrics *mx);
/* One batched decode step over n slots (the mean batch size shows continuous batching at work). */
void g4_metrics_decode_step(g4_metrics *mx, int n);
/* Speculative decoding: drafts verified and kept in one step (over its slots). */
void g4_metrics_spec(g4_metrics *mx, int drafted, int accepted);
void g4_metrics_gauges(g4_metrics *mx, int queue_depth, int busy_slots, int n_slots, long kv_used, long kv_cap);
/* the queue-depth gauge alone, as soon as requests leave the queue: before the counters of their end */
void g4_metrics_queue(g4_metrics *mx, int queue_depth);
/* The prompt cache: one placed request reusing `reused` prompt tokens (a hit when > 0); its
 * evictions so far, snapshot bytes and entries. */
void g4_metrics_cache_lookup(g4_metrics *mx, int reused);
void g4_metrics_cache_state(g4_metrics *mx, unsigned long evictions, long bytes, int entries);
/* Prometheus text exposition; malloc'ed, NUL-terminated. */
char *g4_metrics_render(g4_metrics *mx);

/* ---------------------------------------------------------------- requests and scheduler */

#define G4_MAX_TOP_LOGPROBS 20

typedef struct {
    int32_t id;
    float lp;                 /* log-probability (when logprobs were asked for) */
    int n_top;
    int32_t top_ids[G4_MAX_TOP_LOGPROBS];
    float top_lps[G4_MAX_TOP_LOGPROBS];
} g4_tok_info;

/* One generation. The HTTP side fills the input part, submits it, then reads the output part
 * under `mu` (woken by `cv`) while the scheduler appends to it. Reference-counted: freed when
 * both sides have released it. */
typedef struct g4_req {
    /* input: immutable after submit */
    int32_t *prompt;
    int n_prompt;
    g4_sampler_params sp;
    int max_tokens;
    char **stop;
    int n_stop;
    int n_top_logprobs;       /* -1: no logprobs; else top entries per token (0..20) */
    int ignore_eos;
    int32_t *bias_ids;        /* logit_bias [n_bias] */
    float *bias;
    int n_bias;
    int chat;                 /* chat completions: the output goes through the chat parser */
    int one_call;             /* parallel_tool_calls false: the message ends after its first call */
    struct g4_req_media *media;   /* the images of its image_url parts and the expanded prompt, or NULL */
    int max_soft_tokens;      /* mm_processor_kwargs.max_soft_tokens; 0: the server's --max-soft-tokens */
    int spec_n_max;           /* speculative.n_max: most drafts a round (-1: the server's --draft-max; 0: none) */
    int spec_n_min;           /* speculative.n_min: a round with fewer drafts verifies none */
    char *gbnf;               /* response_format / grammar: the output's grammar (GBNF), or NULL */
    const char *grammar_param;   /* the field it came from (a static string; NULL: response_format) */
    g4_grammar *grammar;      /* compiled from gbnf, and this choice's matcher over it */
    g4_matcher *matcher;
    char *api_echo;           /* /v1/responses: the request fields its response object repeats (JSON) */

    /* shared, guarded by mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    int cancel;               /* set by the HTTP side: client gone */
    int done;
    g4_finish finish;
    char err[256];
    char *text;               /* generated text, stop string cut off; only final bytes (a pending
                                 stop-string prefix is held back in the g4_gen) */
    size_t text_len, text_ready;   /* text_ready == text_len: bytes final */
    g4_tok_info *toks;
    int n_toks, cap_toks;
    g4_chat_parser *parser;   /* chat: the message as deltas (created at parse time) */
    double t_submit, t_first, t_done;

    int n_cached;             /* prompt tokens whose KV the prompt cache supplied (set at admission) */

    /* scheduler-private */
    int slot, n_prefilled, state, split;   /* split: a snapshot when the prefill gets here (0: none) */
    long seq;
    int32_t next_tok;
    double t_last;
    g4_gen *gen;              /* sampling, stop ids / strings, max tokens, detokenizer */
    struct g4_req *next;      /* wait queue */

    /* the HTTP side's wake-up (http.c): called under mu whenever the output part changes */
    void (*notify)(void *arg);
    void *notify_arg;
    int admitted;             /* under mu: the request holds a slot */
} g4_req;

g4_req *g4_req_new(void);
void g4_req_release(g4_req *r);
/* Asks the scheduler to stop generating for r and free its slot (idempotent). */
void g4_req_cancel(g4_req *r);

typedef struct g4_sched g4_sched;

/* prefill_chunk: tokens per prefill slice; cache_ram_mb: the prompt cache's budget (0: off); the model's own chunk size keeps results identical
 * to one whole g4_prefill call. */
g4_sched *g4_sched_new(g4_model *m, const g4_tokenizer *tok, const g4_gen_config *gen, g4_metrics *mx,
                       int prefill_chunk, int max_queue, int cache_ram_mb);
/* Speculative decoding of every request (serve --spec / --draft): d's drafts, up to draft_max a
 * round and slot (a request's spec_n_max may ask for fewer); the model's verify_rows must cover
 * n_slots x (draft_max + 1). d is called from the scheduler thread only, slot after slot, right
 * after the step that chose a slot's newest token (draft.h). */
g4_status g4_sched_set_spec(g4_sched *s, g4_drafter *d, int draft_max);
g4_status g4_sched_start(g4_sched *s);
/* Queues r (takes a reference). Returns 0, -1 when the scheduler is shutting down, or -2 when
 * max_queue requests already wait (max_queue 0: never). */
int g4_sched_submit(g4_sched *s, g4_req *r);
/* Stops accepting, lets in-flight requests run for grace_s, cancels the rest, joins the thread. */
void g4_sched_shutdown(g4_sched *s, double grace_s);
void g4_sched_free(g4_sched *s);

/* ---------------------------------------------------------------- OpenAI codec */

typedef enum { G4_API_CHAT, G4_API_COMPLETION, G4_API_GENERATE, G4_API_RESPONSES } g4_api_kind;

typedef struct {
    int status;               /* HTTP status */
    const char *type;         /* invalid_request_error, not_found_error, server_error, ... */
    const char *param;        /* offending field or NULL */
    const char *code;         /* machine code or NULL */
    char message[512];
} g4_api_error;

/* What the loaded model offers the codec. */
typedef struct {
    const g4_model_info *info;
    const g4_tokenizer *tok;
    const g4_template *tmpl;
    const g4_vocab_index *vocab_index;   /* the tokenizer's byte trie for response_format (or NULL) */
    const g4_gen_config *gen;
    const char *model_name;
    const char *model_path;
    int template_specials;    /* pass bos_token/eos_token/... as template variables */
    size_t render_budget;     /* bytes of template working memory per request (0: the library's) */
    sem_t *renders;           /* bounds concurrent renders, so their budgets bound the total (or NULL) */
    const struct g4_media_cfg *media;   /* image_url parts' settings */
    int max_messages, max_tools;   /* per request (0: no limit) */
    int no_special_in_content;     /* --no-special-in-content */
    int spec_max;                  /* --draft-max of a server with --spec / --draft; 0: no speculation */
} g4_api_ctx;

/* ---------------------------------------------------------------- images in chat (media_parts.c) */

typedef struct g4_media_cfg {
    int vision, audio;        /* the model has a vision / an audio embedder */
    g4_image_opts image;      /* the processor's settings with --max-soft-tokens, --max-image-pixels */
    int soft_tokens_cap;      /* --soft-tokens-cap: the model's prefill chunk holds an image this large */
    g4_audio_opts audio_opts; /* the feature extractor's frame with --max-audio-seconds */
    const char *media_dir;    /* the real path of --media-dir, or NULL: no local files */
    int max_media;            /* --max-media-per-request: images and audio clips */
    int allow_remote;         /* --allow-remote-media: http(s) image URLs are fetched */
    size_t remote_max_bytes;  /* --remote-media-max-bytes */
    int remote_timeout_s;     /* --remote-media-timeout */
} g4_media_cfg;

/* remote_media.c: libcurl's global setup, once before any thread fetches (0, or -1). */
int g4_remote_media_init(void);
void g4_remote_media_cleanup(void);
/* GETs an http(s) URL (redirects only to http(s), at most a few) into a malloc'ed *out of at most
 * max_bytes, within timeout_s seconds. 0; -1 with the reason, fit for the client, in why; -2 out
 * of memory. */
int g4_remote_media_fetch(const char *url, size_t max_bytes, int timeout_s, unsigned char **out, size_t *out_n,
                          char *why, size_t why_n);

typedef struct g4_req_media g4_req_media;
struct json_t;
/* An image_url content part (messages[i].content[k]) of r: its image decoded into r->media, the
 * part rewritten to {"type": "image"} for the chat template. 0, or -1 with err filled (400). */
int g4_media_part(const g4_api_ctx *c, struct json_t *part, size_t i, size_t k, g4_req *r, g4_api_error *err);
/* The same for an input_audio part (rewritten to {"type": "audio"}). */
int g4_media_audio_part(const g4_api_ctx *c, struct json_t *part, size_t i, size_t k, g4_req *r, g4_api_error *err);
/* A chat request's mm_processor_kwargs (vLLM's per-request processor settings; only
 * max_soft_tokens is taken) into r->max_soft_tokens. 0, or -1 with err filled (400). */
int g4_media_request_opts(const g4_api_ctx *c, struct json_t *root, g4_req *r, g4_api_error *err);
/* After the chat prompt is tokenized: r->prompt expanded for r's images (none: nothing). */
int g4_media_expand(const g4_api_ctx *c, g4_req *r, g4_api_error *err);
g4_media_prompt *g4_req_media_prompt(const g4_req_media *md);
/* Whether the model directory's config.json has a vision_config (read before the model loads). */
int g4_media_dir_has_vision(const char *dir);
g4_req_media *g4_req_media_ref(g4_req_media *md);
void g4_req_media_release(g4_req_media *md);

/* Response-shaping options of a parsed request. */
typedef struct {
    g4_api_kind kind;
    int stream, include_usage, return_token_ids;
    int logprobs;             /* chat: bool; completion: top count, -1 = off */
    int n;                    /* choices: n independent generations, seeds seed + i */
    char id[48];
    char call_prefix[48];     /* tool call ids: call_prefix + choice + "_" + index */
    long created;
} g4_api_opts;

/* Parses and validates a request body into o->n new g4_req (refs = 1 each), written to reqs
 * [G4_MAX_N]; the first is returned. On failure fills err and returns NULL. */
#define G4_MAX_N 16
g4_req *g4_api_parse(const g4_api_ctx *c, g4_api_kind kind, const char *body, size_t len,
                     g4_api_opts *o, g4_req **reqs, g4_api_error *err);
/* Fills err; returns err for chaining. */
g4_api_error *g4_api_err(g4_api_error *err, int status, const char *type, const char *param,
                         const char *code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* A request body that must be a JSON object (400 invalid_json / invalid_type otherwise). */
struct json_t *g4_api_load_object(const char *body, size_t len, g4_api_error *err);
/* {"error": {...}} as a malloc'ed JSON string. */
char *g4_api_error_json(const g4_api_error *err);
/* The whole non-streaming response body for finished requests (o->n choices). */
char *g4_api_response_json(const g4_api_ctx *c, const g4_api_opts *o, g4_req **reqs);
/* One SSE event ("data: {...}\n\n") of choice `index` for the text bytes [t0, t1) (chat: the
 * parser's deltas [t0, t1)) and tokens [k0, k1) of r (r->mu held by the caller); `first` adds
 * the assistant role, `fin` the finish reason. Appends to *buf. */
void g4_api_stream_chunk(const g4_api_ctx *c, const g4_api_opts *o, const g4_req *r, int index, size_t t0,
                         size_t t1, int k0, int k1, int first, int fin, char **buf, size_t *len);
/* The usage chunk (stream_options.include_usage), summed over the choices. */
void g4_api_stream_usage(const g4_api_ctx *c, const g4_api_opts *o, g4_req **reqs, char **buf, size_t *len);
/* Bytes (completions) or parser deltas (chat) of r that are final (r->mu held). */
size_t g4_api_ready(const g4_req *r);
/* The finish reason as the OpenAI API names it (NULL while running). */
const char *g4_finish_name(g4_finish f);
/* /v1/responses (responses.c): the body as a chat request (kind G4_API_CHAT's g4_req, o->kind
 * G4_API_RESPONSES); the Response object; the SSE events for the parser's deltas [t0, t1) (the
 * opening events when t0 is 0, the closing ones with fin). g4_api_parse, g4_api_response_json
 * and g4_api_stream_chunk hand G4_API_RESPONSES to these. */
g4_req *g4_responses_parse(const g4_api_ctx *c, const char *body, size_t len, g4_api_opts *o, g4_req **reqs,
                           g4_api_error *err);
char *g4_responses_json(const g4_api_ctx *c, const g4_api_opts *o, g4_req *r);
void g4_responses_events(const g4_api_ctx *c, const g4_api_opts *o, const g4_req *r, size_t t0, size_t t1, int fin,
                         char **buf, size_t *len);
/* /v1/models body. */
char *g4_api_models_json(const g4_api_ctx *c, long created);
/* /v1/models/{id}: the model object, or NULL with err filled (404 model_not_found). */
char *g4_api_model_json(const g4_api_ctx *c, const char *id, long created, g4_api_error *err);
/* /tokenize and /detokenize (llama-server's shapes); NULL with err filled on a bad body. */
char *g4_api_tokenize_json(const g4_api_ctx *c, const char *body, size_t len, g4_api_error *err);
char *g4_api_detokenize_json(const g4_api_ctx *c, const char *body, size_t len, g4_api_error *err);

/* ---------------------------------------------------------------- the running server */

enum { G4_SRV_LOADING, G4_SRV_READY, G4_SRV_FAILED, G4_SRV_STOPPING };

/* Everything server.c (lifecycle) and http.c (routes) share. The loader thread fills the model
 * part and then publishes state = READY; HTTP threads read it only after seeing READY. */
typedef struct {
    g4_server_opts opts;
    _Atomic int state;
    g4_metrics *mx;
    g4_model *model;
    g4_tokenizer *tok;
    g4_template *tmpl;          /* NULL when the checkpoint has no chat template */
    g4_vocab_index *vindex;     /* api.vocab_index */
    g4_gen_config gen;
    g4_sched *sched;
    g4_drafter *mtp;            /* --draft DIR's drafter over the loaded model (owned) */
    g4_api_ctx api;
    char model_name[256];
    char load_error[512];
    g4_status load_status;      /* why loading failed (FAILED) */
    long started;               /* unix time */
    void *daemon;               /* struct MHD_Daemon * */
    int ipv6;                   /* the listening socket is IPv6 (dual stack for "::") */
    sem_t renders;              /* api.renders: --max-renders chat templates at once */
    g4_media_cfg media;         /* api.media */
    _Atomic unsigned long id_seq;
    struct g4_http *http;       /* http.c's connections, wake-ups and parse workers */
} g4_srv;

/* Binds and starts serving (routes answer 503 until READY); *port gets the bound port. */
g4_status g4_http_start(g4_srv *s, int *port);
/* Lets the last streams end, closes every connection, stops the daemon (its listen socket with it)
 * and joins the HTTP threads. */
void g4_http_stop(g4_srv *s);

#endif
