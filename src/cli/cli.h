/* cli.h — what the subcommand files of the gemma4c CLI share: the entry points the dispatcher
 * in main.c calls and small helpers for option parsing and error exits. */
#ifndef G4_CLI_H
#define G4_CLI_H

#include <jansson.h>
#include <stdio.h>

#include "gemma4c.h"

/* Each subcommand gets argv starting at its own name; returns the process exit code
 * (0 ok, 1 runtime failure, 2 bad usage or bad input). */
int cli_run(int argc, char **argv);
int cli_logits(int argc, char **argv);
int cli_tokenize(int argc, char **argv);
int cli_detokenize(int argc, char **argv);
int cli_template(int argc, char **argv);
int cli_serve(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_pack(int argc, char **argv);
int cli_chat(int argc, char **argv);
int cli_parse(int argc, char **argv);
int cli_image(int argc, char **argv);
int cli_grammar(int argc, char **argv);

/* Prints "gemma4c: <g4_last_error()>" to stderr and returns the exit code for `st`. */
int cli_report(g4_status st);
/* Prints "gemma4c <cmd>: <message>" to stderr and returns 2 (bad usage). */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses a decimal int option value in [lo, hi]; on failure reports and returns 0. */
int cli_parse_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);
/* Parses --tp-backend's value: "threads" or "mpi". */
int cli_parse_tp_backend(const char *cmd, const char *v, int *out);
/* Parses --numerics' value: "exact" (G4_NUMERICS_EXACT) or "ggml" (G4_NUMERICS_GGML). */
int cli_parse_numerics(const char *cmd, const char *v, int *out);
/* The model options every model-loading subcommand takes (cli_model_opts.c): parses argv[*i]
 * (and its value, advancing *i) into mo. Returns 1 when it was one, 0 when it is not a model
 * option, -1 after reporting a bad value (exit 2). */
int cli_parse_model_opt(const char *cmd, int argc, char **argv, int *i, g4_model_opts *mo);
/* Their help text, for each subcommand's --help. */
extern const char *const cli_model_opts_help;
/* 1 for -h and --help. */
int cli_is_help(const char *a);

/* g4_model_load for a subcommand. On an MPI rank other than 0 it serves rank 0 (g4_model_work)
 * until rank 0 is done, frees the model and returns -1: the subcommand then exits with 0 without
 * printing anything. Otherwise returns the exit code of the load (0 with *m set). */
int cli_load_model(const char *path, const g4_model_opts *mo, g4_model **m);

/* Parses a float option value in [lo, hi]; on failure reports and returns 0. */
int cli_parse_float(const char *cmd, const char *opt, const char *v, float lo, float hi, float *out);
/* --temp, --top-p, --top-k, --min-p, --seed (run, chat): as cli_parse_model_opt. */
int cli_parse_sampling_opt(const char *cmd, int argc, char **argv, int *i, g4_sampler_params *sp);

/* What cli_generate reports, and what it collects when asked (text / ids non-zero). */
typedef struct {
    int text, ids;           /* in: collect the reply's text into text_buf / its ids into id_buf */
    /* in (optional): called with each generated token but an eos instead of printing its text; a non-zero
     * return ends the generation there (fin G4_FIN_STOP), as an eos would */
    int (*on_token)(void *ctx, int32_t id);
    void *ctx;
    char *text_buf;          /* out: malloc'ed, NUL-terminated [text_len]; the caller frees */
    size_t text_len;
    const g4_spec_params *spec;   /* in (optional): speculative decoding with this drafter */
    g4_spec_stats spec_stats;     /* out: its rounds */
    int32_t *id_buf;         /* out: malloc'ed [n_gen]; the caller frees */
    int n_gen;               /* tokens generated (an eos included) */
    g4_finish fin;
    double prefill_s, decode_s;
} cli_gen_out;

/* Appends ids[0..n) to `slot` and generates with `g` until it finishes, printing the text as it
 * becomes final (ids_out: the ids as one JSON array) and a newline at the end. The last token is
 * not fed to the slot: it holds the prompt and every generated token but the last. */
g4_status cli_generate(g4_model *m, int slot, const int32_t *ids, int n, g4_gen *g, int ids_out, cli_gen_out *out);
/* The same, printing no ids, for a prompt ids[0, n) whose first `from` ids the slot holds already
 * (a speculative drafter reads the whole prompt). */
g4_status cli_generate_from(g4_model *m, int slot, const int32_t *ids, int from, int n, g4_gen *g, cli_gen_out *out);
/* The same for a prompt with media: the slot holds mp's ids [0, from); the rest is prefilled
 * (images whole, g4_prefill_media_range) and the reply generated. */
g4_status cli_generate_media(g4_model *m, int slot, g4_media_prompt *mp, int from, g4_gen *g, cli_gen_out *out);
/* The chat template's prompt for `messages` (a JSON array of {"role", "content"} objects) with
 * the generation prompt (and enable_thinking true when think), encoded without the tokenizer's
 * special tokens; *ids malloc'ed. */
g4_status cli_chat_ids(const g4_template *tpl, const g4_tokenizer *tok, json_t *messages, int think, int32_t **ids,
                       int *n);

/* The media options of run, logits and tokenize (cli_media.c). */
enum { CLI_MEDIA_MAX = 256, CLI_MEDIA_DEFAULT_MAX = 8 };
typedef struct {
    const char *paths[CLI_MEDIA_MAX];   /* --image, in order */
    int n_images;
    const char *audio_paths[CLI_MEDIA_MAX];   /* --audio, in order */
    int n_audios;
    double max_audio_seconds;           /* 0: the library's default */
    int max_soft_tokens;                /* 0: the model's processor config */
    long max_pixels;                    /* 0: the library's default */
    int max_media, max_media_set;       /* --max-media-per-request */
    g4_image **images;                  /* [n_images] once loaded */
    g4_audio **audios;                  /* [n_audios] once loaded */
} cli_media;
extern const char *const cli_media_opts_help;
/* As cli_parse_model_opt, for --image, --audio, --max-soft-tokens, --max-image-pixels,
 * --max-audio-seconds, --max-media-per-request. */
int cli_parse_media_opt(const char *cmd, int argc, char **argv, int *i, cli_media *md);
/* After parsing: 0, or 2 after reporting more images than --max-media-per-request. */
int cli_media_check(const char *cmd, const cli_media *md);
/* Loads the images and audio clips through the model directory's processor settings; *max_soft:
 * the most soft tokens of one image (0 without images: audio may be split across prefill steps). */
g4_status cli_media_load(cli_media *md, const char *model_dir, int *max_soft);
/* Whether a model (with its --mmproj, may be NULL) has a vision embedder, read before it loads
 * (config.json's vision_config; an mmproj is taken to have one): chat sizes its chunk by it. */
int cli_model_has_vision(const char *model, const char *mmproj);
/* `tokenize --mmproj FILE`: FILE beside a GGUF model is a gemma4uv / gemma4ua mmproj with the
 * projectors md's media need (the processor settings then come from it, as for run). */
g4_status cli_mmproj_check(const char *model, const char *mmproj, const cli_media *md);
/* The prompt `ids` with its image and audio placeholders expanded for the loaded media. */
g4_status cli_media_prompt(const cli_media *md, const g4_tokenizer *tok, const int32_t *ids, int n,
                           g4_media_prompt **out);
void cli_media_free(cli_media *md);

/* The structured-output options of run (cli_constraint.c): the grammar the output must follow. */
enum { CLI_CONSTRAIN_NONE, CLI_CONSTRAIN_SCHEMA, CLI_CONSTRAIN_GBNF, CLI_CONSTRAIN_OBJECT };
typedef struct {
    int kind;                 /* CLI_CONSTRAIN_* */
    const char *path;         /* the schema or GBNF file */
    g4_grammar *grammar;      /* once built */
    g4_vocab_index *vocab;
    g4_matcher *matcher;      /* for g4_gen_params.constraint */
} cli_constraint;
extern const char *const cli_constraint_opts_help;
/* --json-schema FILE, --grammar FILE, --json-object: as cli_parse_model_opt. */
int cli_parse_constraint_opt(const char *cmd, int argc, char **argv, int *i, cli_constraint *c);
/* Compiles the grammar over tok's vocabulary, the eos ids of cfg ending the output; a bad file,
 * schema or grammar is G4_ERR_INPUT naming the option, the file and the problem. */
g4_status cli_constraint_build(cli_constraint *c, const g4_tokenizer *tok, const g4_gen_config *cfg);
void cli_constraint_free(cli_constraint *c);

/* bench --verify (cli_bench_verify.c): per K, the median seconds of a verify step of K + 1 rows of
 * one slot and of a one-row decode step, both at position `depth` (prefilled from ids first), and
 * the median ratio of adjacent pairs (reps x 8 of them). The model needs verify_rows >= max K + 1 and ids >= depth + 72 entries. */
typedef struct {
    int k;
    double step_s, decode_s, ratio;
} cli_verify_timing;
g4_status cli_bench_verify(g4_model *m, const int32_t *ids, long n_ids, int depth, int reps, const long *ks, int nk,
                           cli_verify_timing *out);

/* The speculative decoding options of run, chat and serve (cli_spec.c). */
enum { CLI_SPEC_NONE, CLI_SPEC_NGRAM, CLI_SPEC_MTP };
typedef struct {
    int kind;                 /* CLI_SPEC_* */
    const char *draft_dir;    /* --draft DIR: the MTP drafter (CLI_SPEC_MTP) */
    int draft_max;            /* 0: the drafter's default */
    int ngram_min, ngram_max; /* 0: the defaults */
    const char *trace_path;
    FILE *trace;
    g4_drafter *drafter;      /* once prepared */
    g4_spec_params params;    /* for cli_gen_out.spec */
} cli_spec;
extern const char *const cli_spec_opts_help;
/* --spec, --draft, --draft-max, --spec-ngram-min, --spec-ngram-max, --spec-trace: as
 * cli_parse_model_opt. */
int cli_parse_spec_opt(const char *cmd, int argc, char **argv, int *i, cli_spec *s);
/* After parsing, before the model loads: refuses a loop option without --spec, makes the drafter,
 * raises mo->verify_rows to fit the rounds and opens the trace file. 0, or the exit code after
 * reporting. */
int cli_spec_prepare(const char *cmd, cli_spec *s, g4_model_opts *mo);
/* After the model loads: the drafter that reads it (--draft's MTP drafter, checked against it).
 * 0, or the exit code after reporting. */
int cli_spec_attach(cli_spec *s, g4_model *m);
/* g4_spec_params.on_round writing the trace's JSON line to ctx (a FILE *). */
void cli_spec_trace(void *ctx, const int32_t *drafted, int n, int accepted);
/* Closes the trace and frees the drafter: 0, or the exit code after reporting a failed write. */
int cli_spec_close(cli_spec *s);

/* Reads all of stdin into a malloc'ed NUL-terminated buffer. */
char *cli_read_stdin(size_t *len);
/* A whole file, NUL-terminated (free it); NULL when it cannot be opened or read. */
char *cli_read_file(const char *path, size_t *len);

#endif
