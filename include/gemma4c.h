/* gemma4c.h — the public C API of gemma4c: the only header the CLI and the server include.
 * Owns: opaque handles, error codes, and the functions over model, session slots, tokenizer,
 * chat template and sampler. Does not expose kernels, ranks or file formats. */
#ifndef GEMMA4C_H
#define GEMMA4C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- errors */

/* Every function that can fail returns a g4_status and leaves a one-line message (naming the
 * file / field / value at fault) retrievable with g4_last_error() on the same thread.
 * The CLI maps G4_ERR_INPUT to exit code 2 and everything else to 1. */
typedef enum {
    G4_OK = 0,
    G4_ERR_INPUT = 2,    /* bad usage or bad input: files, fields, shapes, prompts */
    G4_ERR_IO = 3,       /* a file could not be opened / read / mapped */
    G4_ERR_NOMEM = 4,    /* an allocation failed */
    G4_ERR_RUNTIME = 5,  /* anything else */
    G4_ERR_CONTEXT = 6   /* a sequence outgrew its slot's context (--ctx) */
} g4_status;

const char *g4_last_error(void);
/* Sets the thread's error message (printf-style) and returns `st`, for `return g4_fail(...)`. */
g4_status g4_fail(g4_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---------------------------------------------------------------- model */

typedef struct g4_model g4_model;

/* Measuring knobs of the matmul layer's choice of kernel (`gemma4c bench` flags; also taken by run,
 * logits and serve), read once at load. -1 means the default; each changes only which kernel a
 * product takes, so the outputs may differ in the last bits between settings, never in exactness. */
typedef struct {
    int amx_pairs_rows;     /* matmul inputs of up to N rows take the AMX kernels that read the weights
                             * as A tiles (default 64; 0: never) */
    int amx_gemv_min_rows;  /* decode inputs of min..max rows take the AMX decode kernel (default */
    int amx_gemv_max_rows;  /* 1..15, the most it holds; max 0: never) */
    int amx_gemv1_k_below;  /* one row takes it only over weight rows shorter than K (default 4096;
                             * 0: one row never does) */
    int profile;            /* 1: time the forward pass's phases and report them on stderr when the
                             * model is freed (default 0) */
    int full_logits;        /* 1: greedy steps compute every logit with the exact kernels (default 0:
                             * over a Q4_K / Q6_K LM head, an int8 pre-pass and the exact kernels
                             * on the rows that can win; the same tokens) */
} g4_tuning;

typedef struct {
    int threads;        /* worker threads for the forward pass; <= 0 means all online CPUs */
    int ctx;            /* context length per session slot (full-layer KV positions); default 4096 */
    int n_slots;        /* session slots (independent sequences) with their own KV; default 1 */
    int prefill_chunk;  /* positions per prefill step; default 256 */
    int tp;             /* tensor-parallel ranks; default 1; 0 = unset: 1, or the mpirun size (mpi) */
    int tp_backend;     /* G4_TP_THREADS (default) or G4_TP_MPI */
    int tp_timeout_ms;  /* G4_TP_MPI: the most a collective waits for another rank before the
                         * group counts as lost (g4_model_group_lost); default 30000; <= 0: no
                         * deadline (blocking MPI calls) */
    int no_mmap;        /* 1: copy the weights into huge-page memory at load (slower load, faster
                         * decode: 4 KiB file pages break the weight streams); -1: never copy, read
                         * the file mapping whatever its pages; 0 (default): read the mapping when
                         * the page cache holds >= 90% of it in 2 MiB pages, else copy */
    int act_q8;         /* 1: matmuls over quantized weights (Q8_0/Q4_0/Q5_0/Q4_K/Q6_K) round the
                         * activations to int8 blocks first (Q8_0 / Q8_K, as llama.cpp does) and
                         * use integer dot products; float weights are untouched. Default 0 (exact) */
    int numerics;       /* G4_NUMERICS_EXACT (default: float32 as transformers) or G4_NUMERICS_GGML:
                         * llama.cpp's CPU arithmetic (implies act_q8; its rms norm, fp16 GELU
                         * table, RoPE cache, softmax exp and sum orders, softcap), for bit-for-bit
                         * agreement with llama.cpp on a GGUF; see README */
    int prefill_bf16;   /* 1: the layer matmuls over bf16 weights round the activations of prompt
                         * tokens to bf16 (round to nearest even) and multiply them on the CPU's
                         * bf16 units (AMX-BF16 tiles, else AVX512-BF16 vdpbf16ps; elsewhere the
                         * same numbers through the fp32 kernels); products exact, fp32 sums.
                         * Generated tokens and the LM head stay exact. Default 0 (exact) */
    g4_tuning tuning;   /* measuring knobs; g4_model_opts_default sets every field to -1 (default) */
    const char *mmproj; /* llama.cpp's mmproj GGUF (gemma4uv / gemma4ua) beside a GGUF model: its
                         * vision and audio embedders; NULL (default): none */
    int verify_rows;    /* rows one verify step may take, all its slots together (speculative
                         * decoding: the most drafts a round + 1, times the slots verifying at
                         * once); sizes the logits scratch [rows][vocab] and the sliding rings'
                         * slack. Default 0: no verify steps */
    int kv_type;        /* G4_KV_*: how the KV cache stores K and V. G4_KV_F32 (default) is exact;
                         * BF16 / F16 halve the cache (rounded to nearest even on write), Q8_0
                         * quarters it roughly (ggml's block_q8_0: 32 int8 + one f16 scale per 32
                         * elements of a head row; head sizes must be multiples of 32). Attention
                         * widens to float32 and accumulates in float32 on every type. Not with
                         * numerics G4_NUMERICS_GGML */
} g4_model_opts;

enum { G4_KV_F32 = 0, G4_KV_BF16 = 1, G4_KV_F16 = 2, G4_KV_Q8_0 = 3, G4_KV_TYPES = 4 };
/* "f32", "bf16", "f16", "q8_0", or NULL for a value out of range */
const char *g4_kv_type_name(int kv_type);

enum { G4_NUMERICS_EXACT = 0, G4_NUMERICS_GGML = 1 };

/* Tensor-parallel backends: ranks as thread groups of this process, or as MPI processes
 * (`mpirun -np N gemma4c ... --tp-backend mpi`; rank 0 drives, the others serve it). */
enum { G4_TP_THREADS = 0, G4_TP_MPI = 1 };

void g4_model_opts_default(g4_model_opts *o);

/* Loads a HuggingFace checkpoint directory (config.json + safetensors, single or sharded) with
 * every tensor memory-mapped, never copied; checks every tensor's presence, dtype and shape
 * against the config before returning. Allocates the KV cache of opts->n_slots slots. */
g4_status g4_model_load(const char *path, const g4_model_opts *opts, g4_model **out);
void g4_model_free(g4_model *m);

typedef struct {
    int vocab_size;
    int hidden_size;
    int n_layers;
    int ctx;            /* per-slot context length in use */
    int n_slots;
    int verify_rows;              /* opts.verify_rows: the most rows of a g4_verify step */
    int bos_id, eos_id, pad_id;   /* from config.json; -1 where absent */
    float final_logit_softcap;    /* 0 when absent */
    const char *architecture;     /* e.g. "Gemma4UnifiedForConditionalGeneration" */
    size_t weight_bytes;          /* bytes of weights (all ranks' shards with --tp) */
    size_t kv_bytes;              /* bytes of KV cache over all slots (all ranks) */
    int tp;                       /* tensor-parallel ranks */
    int weights_copied;           /* no_mmap 0: the mapping was mostly in 4 KiB pages, so copied */
    size_t weights_reread_bytes;  /* windows of the mapping the page cache held in 4 KiB pages,
                                     re-read at load into 2 MiB ones (0 where none, or unknown) */
    size_t huge_window_bytes;     /* no_mmap 0: bytes of the whole 2 MiB windows inside the weight
                                     matrices — the most a file mapping can hold in 2 MiB pages;
                                     the weights are copied when < 90% of them are (0: not checked) */
} g4_model_info;

const g4_model_info *g4_model_get_info(const g4_model *m);

/* This process's rank in an MPI group (0 otherwise). Only rank 0 drives the model; every other
 * rank must call g4_model_work, which runs forward passes as rank 0 issues them and returns
 * when rank 0 frees its model. */
int g4_model_rank(const g4_model *m);
g4_status g4_model_work(g4_model *m);

/* MPI groups with a deadline (g4_model_opts.tp_timeout_ms): NULL while the group works, else why
 * it stopped — a rank did not answer a collective within the deadline (a stopped or wedged
 * process; MPI itself would wait for ever). The group cannot be used again: every later
 * g4_prefill / g4_decode fails with G4_ERR_RUNTIME, g4_model_work returns that error on the other
 * ranks, and the process ends the whole MPI job at exit (MPI_Abort; MPI_Finalize would wait for
 * the lost rank). Safe to call from any thread. */
const char *g4_model_group_lost(const g4_model *m);
/* Rank 0 of an MPI group: a round trip over every rank within the deadline (a server's idle
 * heartbeat, so a rank that stops between requests is noticed too). G4_OK where there is no MPI
 * group; G4_ERR_RUNTIME once the group is lost. Called from the thread that drives the model. */
g4_status g4_model_ping(g4_model *m);

/* A model's weights are read through file mappings: a file truncated or replaced in place while
 * the model runs would kill the process with SIGBUS at the next read. g4_guard_mapped_files()
 * installs a process-wide SIGBUS handler (for programs that must not die of it, e.g. a server):
 * such a read then sees zeros, g4_mapped_file_lost() turns 1 for the rest of the process, and
 * every g4_prefill / g4_decode fails with G4_ERR_IO. Other SIGBUS causes keep the default action. */
g4_status g4_guard_mapped_files(void);
int g4_mapped_file_lost(void);

/* ---------------------------------------------------------------- session slots */

/* A slot holds one sequence's KV cache. Positions count from 0 at the first token.
 * Resetting a slot is O(1). */
void g4_slot_reset(g4_model *m, int slot);
int g4_slot_pos(const g4_model *m, int slot);

/* The prompt cache's KV operations (src/model/kv_snapshot.c). Full-attention layers keep rows
 * [0, p) valid after a rewind to p; a sliding layer's ring keeps window + max_rows - 1 positions,
 * so a slot at position pos can go back only to g4_kv_rewind_floor(m, pos) or later. Deeper
 * needs a snapshot. Snapshots need every rank in this process: g4_kv_snap_supported() is 0
 * under --tp-backend mpi (g4_slot_save / restore / copy then fail with G4_ERR_INPUT). */
typedef struct g4_kv_snap g4_kv_snap;
int g4_kv_rewind_floor(const g4_model *m, int pos);
/* The same for a slot as it is: after a rewind dropped rows (a speculative verify's rejected
 * drafts), those rows' ring entries overwrote older positions, so the floor is that of the
 * position the rewind came back from (g4_slot_rewind checks this one). -1 for a bad slot. */
int g4_slot_rewind_floor(const g4_model *m, int slot);
/* Sets the slot's next position back to pos; G4_ERR_INPUT past its position or its rings' floor. */
g4_status g4_slot_rewind(g4_model *m, int slot, int pos);
int g4_kv_snap_supported(const g4_model *m);
/* Copies the slot's KV state at its position to host memory: the sliding rings' live positions,
 * and with full != 0 the linear layers' rows [0, pos) too (restorable into any slot; without
 * them only into this slot while its rows [0, pos) are unchanged). */
g4_status g4_slot_save(g4_model *m, int slot, int full, g4_kv_snap **out);
/* Writes a snapshot back into `slot`, whose position becomes the snapshot's. */
g4_status g4_slot_restore(g4_model *m, int slot, const g4_kv_snap *s);
/* dst's KV state and position become src's. */
g4_status g4_slot_copy(g4_model *m, int dst, int src);
int g4_kv_snap_pos(const g4_kv_snap *s);
size_t g4_kv_snap_bytes(const g4_kv_snap *s);
void g4_kv_snap_free(g4_kv_snap *s);

/* Appends `n` tokens to `slot` (prefill, processed in chunks of opts.prefill_chunk) and, when
 * `logits` is not NULL, writes the last position's logits [vocab] WITHOUT the softcap (with
 * G4_NUMERICS_GGML: with it, as llama.cpp; info's final_logit_softcap then reads 0).
 * G4_ERR_CONTEXT if the slot would exceed its context. */
g4_status g4_prefill(g4_model *m, int slot, const int32_t *ids, int n, float *logits);

/* One decode step for `n` slots at once (continuous batching): appends ids[i] to slots[i] and
 * writes logits[i * vocab ...] WITHOUT the softcap. Each slot's result is identical to what a
 * single-slot call would give. Slots must be distinct. */
g4_status g4_decode(g4_model *m, int n, const int *slots, const int32_t *ids, float *logits);

/* The same steps returning each row's greedy token — the argmax of the raw logits, first index
 * on ties — instead of logits: with tensor parallelism a distributed argmax, so the vocabulary's
 * logits are never gathered. */
g4_status g4_prefill_argmax(g4_model *m, int slot, const int32_t *ids, int n, int32_t *next);
g4_status g4_decode_argmax(g4_model *m, int n, const int *slots, const int32_t *ids, int32_t *next);

/* Speculative decoding's verify step: appends ids[0..n) to `slot` in ONE forward step of n rows
 * (positions continuing) and writes every row's raw logits [n][vocab] (as g4_decode's), or with
 * g4_verify_argmax every row's greedy token. Rejected rows are dropped afterwards with
 * g4_slot_rewind (the rings keep the slack for it). n <= opts.verify_rows, else G4_ERR_INPUT;
 * G4_ERR_CONTEXT past the slot's context. Numerics: a row's result equals a one-row step's
 * wherever the kernel path is row-invariant (docs/numerics.md). */
g4_status g4_verify(g4_model *m, int slot, const int32_t *ids, int n, float *logits);
g4_status g4_verify_argmax(g4_model *m, int slot, const int32_t *ids, int n, int32_t *next);
/* The same for n distinct slots at once (continuous batching): slots[i] takes counts[i] rows, the
 * ids and the rows' logits [vocab] (or, with logits NULL, argmaxes into next) in that order; the
 * rows of all slots together <= verify_rows. */
g4_status g4_verify_batch(g4_model *m, int n, const int *slots, const int *counts, const int32_t *ids, float *logits,
                          int32_t *next);

/* The final hidden state (after the final norm: the LM head's input) of row `row` of the model's
 * last step that computed logits or greedy tokens, [hidden_size] into out: prefill's last
 * position (row 0), decode's i-th slot, verify's i-th row (g4_verify_batch: its rows in order,
 * slot by slot). G4_ERR_INPUT when that step had no
 * such row. Rank 0's copy (every rank computes the same one). */
g4_status g4_step_hidden(const g4_model *m, int row, float *out);

/* Applies the final-logit softcap cap*tanh(x/cap) in place (no-op if the model has none, or
 * under G4_NUMERICS_GGML, whose logits already carry it). */
void g4_softcap(const g4_model *m, float *logits, int n);

/* Index of the largest value (first on ties); greedy decoding uses it on raw logits. */
int g4_argmax(const float *logits, int n);

/* ---------------------------------------------------------------- tokenizer */

typedef struct g4_tokenizer g4_tokenizer;

/* Loads tokenizer.json (+ tokenizer_config.json when present) from a directory, or a
 * tokenizer.json path. A component type we do not implement is refused naming the type. */
g4_status g4_tokenizer_load(const char *path, g4_tokenizer **out);
void g4_tokenizer_free(g4_tokenizer *t);

/* Encodes UTF-8 text (invalid UTF-8 is G4_ERR_INPUT). add_special != 0 applies the
 * post-processor (e.g. prepends <bos>). *ids is malloc'ed; the caller frees it. */
g4_status g4_tokenize(const g4_tokenizer *t, const char *text, size_t len, int add_special,
                      int32_t **ids, size_t *n_ids);
/* g4_tokenize, except that no special token is matched where its text overlaps one of the byte
 * ranges plain [2 * n_plain] (start, end pairs, sorted, disjoint): there it is tokenized as the
 * text it is (transformers' split_special_tokens, for those ranges only). */
g4_status g4_tokenize_plain(const g4_tokenizer *t, const char *text, size_t len, int add_special, const size_t *plain,
                            size_t n_plain, int32_t **ids, size_t *n_ids);
/* The leftmost (longest) special token text in s [n]: 1 with its byte range, 0 when none. */
int g4_find_special_text(const g4_tokenizer *t, const char *s, size_t n, size_t *start, size_t *end);
/* Decodes ids to UTF-8 text. skip_special != 0 drops special added tokens. *text is malloc'ed
 * and NUL-terminated. */
g4_status g4_detokenize(const g4_tokenizer *t, const int32_t *ids, size_t n, int skip_special,
                        char **text, size_t *len);
int g4_tokenizer_vocab_size(const g4_tokenizer *t);
/* Id of an exact token string (vocab or added token), or -1. */
int32_t g4_token_to_id(const g4_tokenizer *t, const char *piece);
/* The token's string as stored in the vocabulary, or NULL. */
const char *g4_id_to_token(const g4_tokenizer *t, int32_t id);
int g4_token_is_special(const g4_tokenizer *t, int32_t id);

/* Streaming detokenizer: text emitted as tokens arrive, never splitting a UTF-8 sequence; the
 * concatenation of all pieces (push + finish) equals g4_detokenize(all ids). */
typedef struct g4_detok_stream g4_detok_stream;
g4_detok_stream *g4_detok_stream_new(const g4_tokenizer *t, int skip_special);
/* Appends the text that became final to *buf (malloc'ed/realloc'ed, NUL-terminated; *len
 * is its new length, 0 when nothing is final yet). */
g4_status g4_detok_stream_push(g4_detok_stream *s, int32_t id, char **buf, size_t *len);
g4_status g4_detok_stream_finish(g4_detok_stream *s, char **buf, size_t *len);
void g4_detok_stream_free(g4_detok_stream *s);

/* ---------------------------------------------------------------- chat template */

typedef struct g4_template g4_template;

/* Loads the chat template from a model/tokenizer directory (chat_template.jinja, else
 * tokenizer_config.json "chat_template"), or from a .jinja file path. Special-token strings
 * (bos_token, eos_token, ...) come from tokenizer_config.json where present. */
g4_status g4_template_load(const char *path, g4_template **out);
/* Same, with the template source given directly (template_path names it in errors). */
g4_status g4_template_load_source(const char *src, size_t len, const char *template_path,
                                  const char *tokenizer_dir, g4_template **out);
void g4_template_free(g4_template *t);
/* Renders with the variables of `json_vars`, a JSON object ({"messages": [...], "tools": [...],
 * "add_generation_prompt": true, ...}). Output byte-identical to jinja2 as transformers'
 * apply_chat_template configures it. raise_exception() surfaces as G4_ERR_INPUT with its
 * message. *out is malloc'ed and NUL-terminated. */
g4_status g4_template_render(const g4_template *t, const char *json_vars, size_t json_len,
                             char **out, size_t *out_len);
/* The same within a memory budget: the template engine's working memory for this render is
 * capped at max_memory bytes (0: the default, 1 GiB); over it, G4_ERR_NOMEM naming the budget.
 * A server renders untrusted conversations with it (some templates rescan the messages for each
 * one, so their memory grows with the square of the conversation). */
g4_status g4_template_render_budget(const g4_template *t, const char *json_vars, size_t json_len,
                                    size_t max_memory, char **out, size_t *out_len);

/* ---------------------------------------------------------------- sampler */

/* Per-request sampling. The chain runs softcap -> frequency/presence penalties -> temperature ->
 * top-k -> top-p -> min-p -> a draw from the request's own seeded PRNG (xoshiro256**), so the
 * same seed and the same request give the same tokens. temperature == 0 is greedy: the argmax
 * of the raw logits without the softcap (monotonic), or of the penalized softcapped logits
 * when a penalty is set. Logits of -inf (suppressed tokens) stay -inf through the softcap. */
typedef struct {
    float temperature;        /* 0 = greedy; default 1 */
    int top_k;                /* 0 = off */
    float top_p;              /* 1 = off */
    float min_p;              /* 0 = off; keeps tokens with p >= min_p * p_max */
    float frequency_penalty;  /* OpenAI: logit -= count * frequency_penalty (generated tokens) */
    float presence_penalty;   /* OpenAI: logit -= presence_penalty if count > 0 */
    uint64_t seed;
} g4_sampler_params;

typedef struct g4_sampler g4_sampler;

void g4_sampler_params_default(g4_sampler_params *p);
/* Validates the parameters (G4_ERR_INPUT naming the field) and allocates the sampler's scratch
 * for a vocabulary of `vocab`; `softcap` is g4_model_info.final_logit_softcap (0 = none). */
g4_status g4_sampler_new(const g4_sampler_params *p, int vocab, float softcap, g4_sampler **out);
void g4_sampler_free(g4_sampler *s);
/* Picks the next token from raw logits [vocab] (not modified) and records it for the penalties. */
int32_t g4_sampler_sample(g4_sampler *s, const float *logits);
/* Records a token as generated without sampling it (e.g. a forced token). */
void g4_sampler_accept(g4_sampler *s, int32_t id);

/* Log-probabilities under the model's distribution (log-softmax of the softcapped raw logits
 * [vocab], before penalties and temperature, as OpenAI reports them): *lp_tok of `tok`, and
 * the n_top most likely tokens in descending order into top_ids / top_lps (either may be NULL
 * when n_top is 0). Returns the number of top entries written. */
int g4_logprobs(const float *logits, int vocab, float softcap, int32_t tok, int n_top,
                float *lp_tok, int32_t *top_ids, float *top_lps);

/* ---------------------------------------------------------------- packing (gemma4c pack) */

/* A .g4c pack: one file holding a checkpoint split for --tp ranks (each rank's shard contiguous,
 * mapped alone at load), its text files embedded, weights optionally re-encoded. */
#define G4_PACK_MAX_RANKS 64

typedef struct {
    const char *hf_dir;      /* HuggingFace checkpoint directory */
    const char *out_path;    /* the .g4c to write (written to out_path.tmp, then renamed) */
    int tp;                  /* ranks; >= 1 */
    int dtype;               /* target for 2-D weight matrices: a g4_dtype, or -1 to keep */
    int threads;             /* quantization threads; <= 0: all online CPUs */
    int verbose;             /* 1: one line per fallback and a summary on stderr */
} g4_pack_write_opts;

typedef struct {
    uint64_t file_size;
    uint64_t seg_bytes[G4_PACK_MAX_RANKS];
    int n_tensors;           /* rank 0's; the other ranks lack the n_multimodal */
    int n_multimodal;        /* vision / audio embedder tensors, kept as stored in rank 0 alone */
    int n_skipped;           /* checkpoint tensors left out (a tied lm_head) */
    int n_fallback;          /* matrices written in another dtype than asked (block size) */
} g4_pack_write_stats;

g4_status g4_pack_write(const g4_pack_write_opts *o, g4_pack_write_stats *stats);

/* Name of a pack-writable dtype ("bf16", "q4_k", ...) -> g4_dtype, or -1. */
int g4_pack_dtype_parse(const char *s);
/* Its inverse: the name of a pack dtype, or "as stored" for -1. */
const char *g4_pack_dtype_name(int dtype);

/* ---------------------------------------------------------------- version */

/* `gemma4c --version` prints it, with the git commit the binary was built from where known. */
#define G4_VERSION "0.1.0"

/* ---------------------------------------------------------------- generation */

/* One generation path for every front end (`run`, `chat`, the server's scheduler): per sequence,
 * the stop ids of generation_config.json, its suppressed tokens, sampling (g4_sampler), the
 * streaming detokenizer, stop strings (holding back the bytes that may yet become one), max tokens
 * and the end of the slot's context. The caller runs the model — one sequence or a batch of them —
 * and hands each sequence's step result to its g4_gen:
 *
 *     g4_gen_new(m, slot, tok, &cfg, &params, &g);
 *     prefill: g4_gen_argmax_only(g) ? g4_prefill_argmax(.., &am) : g4_prefill(.., logits)
 *     loop:    tok = g4_gen_next(g, argmax_only ? NULL : logits, am);
 *              fin = g4_gen_accept(g, tok, &text, &len);    (print text[0..len))
 *              if (fin) break;  else decode `tok` and loop
 */

/* generation_config.json: stop ids, suppressed ids and default sampling parameters. */
typedef struct {
    int32_t *eos;                 /* every id that ends a generation [n_eos] */
    int n_eos;
    int32_t *suppress;            /* ids kept at -inf before sampling [n_suppress] */
    int n_suppress;
    g4_sampler_params defaults;   /* temperature / top_p / top_k / min_p; do_sample false = greedy */
} g4_gen_config;

/* Reads generation_config.json of a model directory, or the copy a packed .g4c carries; absent
 * file or fields fall back to config.json's eos (info->eos_id) and the sampler's defaults. */
g4_status g4_gen_config_load(const char *model_path, const g4_model_info *info, g4_gen_config *out);
void g4_gen_config_free(g4_gen_config *g);

/* Why a generation ended (G4_FIN_NONE: it goes on). CANCELLED is the server's (client gone). */
typedef enum { G4_FIN_NONE, G4_FIN_STOP, G4_FIN_LENGTH, G4_FIN_CANCELLED, G4_FIN_ERROR } g4_finish;

typedef struct {
    g4_sampler_params sp;         /* temperature 0 = greedy */
    int max_tokens;               /* tokens to generate, the stop token included; <= 0: no limit */
    const char *const *stop;      /* stop strings (copied; with text only): the text ends before
                                   * the first one, and the generation there (G4_FIN_STOP) */
    int n_stop;
    int ignore_eos;               /* 1: the eos ids do not end the generation */
    int text;                     /* 1: detokenize (special tokens skipped); 0: ids only */
    const int32_t *bias_ids;      /* logit_bias (copied): bias[i] is added to the raw logit of */
    const float *bias;            /* bias_ids[i] before sampling, greedy included; -100 bans the */
    int n_bias;                   /* token (-inf). Ids must be in the vocabulary */
    struct g4_matcher *constraint;   /* structured outputs: only the tokens it allows are sampled, and
                                      * it is advanced by each accepted token (borrowed; NULL: none) */
} g4_gen_params;

typedef struct g4_gen g4_gen;

void g4_gen_params_default(g4_gen_params *p);
/* A generation for the sequence in `slot` of `m` (prefilled by the caller; the slot's position is
 * read for the context end). `tok` may be NULL when p->text is 0. `cfg` must outlive the g4_gen.
 * G4_ERR_INPUT naming the sampler field at fault. */
g4_status g4_gen_new(const g4_model *m, int slot, const g4_tokenizer *tok, const g4_gen_config *cfg,
                     const g4_gen_params *p, g4_gen **out);
void g4_gen_free(g4_gen *g);
/* 1 when the next token is the plain argmax of the raw logits (greedy, no penalties, nothing
 * suppressed): run the model's *_argmax step and pass logits NULL to g4_gen_next — with --tp N
 * the vocabulary's logits are then never gathered. */
int g4_gen_argmax_only(const g4_gen *g);
/* The next token: from `logits` [vocab] (suppressed ids set to -inf IN PLACE, then sampled), or
 * `argmax` when logits is NULL (recorded for the penalties). */
int32_t g4_gen_next(g4_gen *g, float *logits, int32_t argmax);
/* Takes `tok` as generated: checks the eos ids, max tokens and the context end, detokenizes it and
 * looks for the stop strings. *text / *len (either may be NULL) get the text that became final
 * with this token — a stop string and everything after it cut off, the bytes that may still
 * start one held back until they cannot (or the generation ends); valid until the next call.
 * Returns the finish reason, G4_FIN_NONE while the generation goes on (the caller then feeds
 * `tok` to the model). An eos token counts as generated but adds no text. */
g4_finish g4_gen_accept(g4_gen *g, int32_t tok, const char **text, size_t *len);
/* Tokens accepted so far. */
int g4_gen_n_tokens(const g4_gen *g);
/* 1 when the last G4_FIN_LENGTH came from the slot's context filling up (not max_tokens). */
int g4_gen_hit_context(const g4_gen *g);
/* Tokens the generation may still accept before max_tokens ends it (INT32_MAX without a limit). */
int g4_gen_tokens_left(const g4_gen *g);

/* ---------------------------------------------------------------- speculative decoding */

/* Speculative decoding (src/generate/speculate.c; docs/speculative.md). Each round a drafter
 * proposes up to K tokens; the target runs [newest token, drafts] as one g4_verify step, keeps
 * the drafts its own choices agree with plus its own next token, and rewinds the slot's KV past
 * them. Every token is still chosen by g4_gen_next from the target's logits, row by row, exactly
 * as plain decoding chooses it (same sampler pipeline, same PRNG draws; a draft is accepted when
 * the choice equals it): greedy output is plain greedy's and seeded sampling is plain seeded
 * sampling's, token for token, wherever a verify row's logits equal a one-row step's
 * (docs/numerics.md). For sampling this is rejection sampling of a point-mass draft (Leviathan et
 * al.): a draft d is accepted with probability p(d), else the token is drawn from p without d. */
typedef struct g4_drafter g4_drafter;   /* the drafter interface: src/generate/draft.h */

/* N-gram (prompt lookup) drafting: the tokens that followed the most recent earlier occurrence of
 * the sequence's last n tokens (prompt and output), trying n from n_max down to n_min.
 * G4_ERR_INPUT unless 1 <= n_min <= n_max <= 64. */
g4_status g4_drafter_ngram_new(int n_min, int n_max, g4_drafter **out);
/* Gemma 4's MTP drafter: the HF directory of a Gemma4UnifiedAssistantForCausalLM (config.json,
 * model.safetensors, generation_config.json) beside `target`, checked against it (vocabulary,
 * backbone width, KV heads and head sizes per layer type, window; one rank). Each round it reads
 * the target's K/V of its last sliding and last full layer and its final hidden state, as
 * transformers' assisted generation does (docs/speculative.md). It keeps no state between
 * rounds, so one drafter may serve several slots (called from one thread at a time). */
g4_status g4_drafter_mtp_new(const char *dir, g4_model *target, g4_drafter **out);
/* The drafter directory's drafts a round, num_assistant_tokens of its generation_config.json
 * (transformers' default 20 without one): known before the target loads, for its verify_rows. */
g4_status g4_drafter_mtp_default_max(const char *dir, int *k);
void g4_drafter_free(g4_drafter *d);
/* Drafts a round when the caller gives no draft_max. */
int g4_drafter_default_max(const g4_drafter *d);

typedef struct {
    g4_drafter *drafter;   /* borrowed; must outlive the g4_spec */
    int draft_max;         /* most drafts a round, 1 .. the model's verify_rows - 1; 0: the
                            * drafter's default */
    /* (may be NULL) called after every verify round with its drafts and how many the target kept */
    void (*on_round)(void *ctx, const int32_t *drafted, int n_drafted, int accepted);
    void *ctx;
} g4_spec_params;

typedef struct {
    long rounds;           /* verify rounds (a step with drafts) */
    long plain_steps;      /* one-row steps (the drafter had nothing) */
    long drafted, accepted;
} g4_spec_stats;

/* The caller's hook for each generated token: as g4_gen_accept took it, with its finish reason and
 * the text that became final; a non-zero return ends the generation there (as an eos would). */
typedef int (*g4_spec_emit)(void *ctx, int32_t tok, g4_finish fin, const char *text, size_t len);

typedef struct g4_spec g4_spec;

/* A speculative generator for `slot` of m (scratch for draft_max + 1 rows). G4_ERR_INPUT when
 * draft_max does not fit the model's verify_rows. */
g4_status g4_spec_new(g4_model *m, int slot, const g4_spec_params *p, g4_spec **out);
void g4_spec_free(g4_spec *s);
/* Generates with g after the caller's prefill of ids[0..n) (the slot holds exactly them), whose
 * step gave `logits` [vocab] (NULL where g4_gen_argmax_only(g): `argmax` instead), until g
 * finishes or emit stops it; *fin gets the reason. As with plain decoding the slot then holds
 * the prompt and every generated token but the last. */
g4_status g4_spec_run(g4_spec *s, g4_gen *g, const int32_t *ids, int n, float *logits, int32_t argmax, g4_spec_emit emit,
                      void *ctx, g4_finish *fin);
/* Counters of the generator's runs so far. */
const g4_spec_stats *g4_spec_get_stats(const g4_spec *s);

/* ---------------------------------------------------------------- chat output protocol */

/* The model family's output protocol, parsed from generated token ids (src/chat): Gemma 4 thinks
 * in <|channel>thought\n...<channel|> and calls tools with <|tool_call>call:NAME{ARGS}<tool_call|>
 * (arguments in Gemma's dialect: bare keys, <|"|>-quoted strings), and a <|tool_response> after a
 * call ends the turn. The parser turns the ids into OpenAI message deltas. A tokenizer without
 * those tokens (Gemma 3) gives a parser that passes every token's text through as content.
 *
 * Deltas are appended to the parser's list as they become final and never change afterwards: the
 * concatenation of every delta of a kind is the whole message. What the parser decides:
 *  - a <|tool_response> ends the message (the model waits for a tool's answer);
 *  - reasoning: the thought channel's text without its "thought\n" label and without the newline
 *    before <channel|> (the template writes a thought as "thought\n" TEXT "\n<channel|>"); a
 *    thought that never closes stays reasoning (what was streamed is kept);
 *  - a tool call is one delta, emitted when <tool_call|> closes it, its arguments converted to a
 *    JSON object text (a JSON "..." string is taken where the dialect has a <|"|> one; a bare
 *    word that is no number, true, false, null or None is the string it spells). A call that does not parse, or that the generation ends inside, becomes
 *    content: its raw text, delimiters written as their token strings, so nothing is lost;
 *  - stop strings end the message when they appear in the content (never inside reasoning or a
 *    call's arguments); content that may still begin one is held back until decided;
 *  - special tokens outside the protocol (<bos>, <eos>, ...) add nothing. */
typedef enum { G4_DELTA_CONTENT, G4_DELTA_REASONING, G4_DELTA_TOOL_CALL } g4_delta_kind;

typedef struct {
    g4_delta_kind kind;
    const char *text;      /* content / reasoning text, or a tool call's arguments (a JSON object) */
    size_t len;
    const char *name;      /* tool call: the function's name (NULL otherwise) */
    int index;             /* tool call: its index among the message's calls */
} g4_chat_delta;

typedef struct g4_chat_parser g4_chat_parser;

/* stop: stop strings (copied; empty ones ignored). */
g4_status g4_chat_parser_new(const g4_tokenizer *t, const char *const *stop, int n_stop, g4_chat_parser **out);
void g4_chat_parser_free(g4_chat_parser *p);
/* 1 when the tokenizer has the tool-call tokens (the parser can return tool calls). */
int g4_chat_parser_has_tools(const g4_chat_parser *p);
/* Feeds one generated token. *ended (may be NULL) gets 1 when the message has ended with it (a
 * <|tool_response>, or a stop string in the content): the caller stops generating and calls
 * g4_chat_parser_finish. G4_ERR_INPUT for an id outside the vocabulary. */
g4_status g4_chat_parser_push(g4_chat_parser *p, int32_t id, int *ended);
/* The generation ended (any reason): flushes what was held back (see above). Idempotent. */
g4_status g4_chat_parser_finish(g4_chat_parser *p);
/* Deltas so far, and one of them (valid until the parser is freed). */
int g4_chat_parser_n_deltas(const g4_chat_parser *p);
const g4_chat_delta *g4_chat_parser_delta(const g4_chat_parser *p, int i);
/* Tool calls emitted so far (finish_reason "tool_calls" when > 0 and the model stopped). */
int g4_chat_parser_n_calls(const g4_chat_parser *p);
/* The OpenAI shapes (malloc'ed JSON text; NULL when out of memory). The whole assistant message:
 * {"role": "assistant", "content": text, or null when there are tool calls and no text,
 * "reasoning_content" (only when there is any), "tool_calls": [{"id": call_id_prefix + index,
 * "type": "function", "function": {"name", "arguments"}}] (only when there are any)}. And the
 * streaming delta of deltas [i0, i1): {"content"}, {"reasoning_content"} and {"tool_calls": [{"index",
 * "id", "type", "function": {"name", "arguments"}}]} merged, each text the concatenation of its
 * kind's deltas in the range. Streamed deltas assemble to exactly the whole message. */
char *g4_chat_message_json(const g4_chat_parser *p, const char *call_id_prefix);
char *g4_chat_delta_json(const g4_chat_parser *p, int i0, int i1, const char *call_id_prefix);

/* ---------------------------------------------------------------- measurement */

/* What `gemma4c bench` measures and reports, implemented in src/bench (library code). */

/* Seconds on CLOCK_MONOTONIC; g4_sort_doubles sorts v[0..n) ascending (for medians). */
double g4_now(void);
void g4_sort_doubles(double *v, int n);

/* Name of the kernel path the model's matmuls take ("scalar", "avx2", "avx512", "avx512bf16",
 * "amx"; G4_CPU_ISA forces one), and whether it has bf16 units for --prefill-bf16. */
const char *g4_model_kernel_path(const g4_model *m);
int g4_model_bf16_units(const g4_model *m);

/* Bytes of this process's memory mapped in 2 MiB pages: file mappings plus anonymous memory
 * (--no-mmap copies), or -1 if the kernel does not say (src/io/filemap.c). */
long long g4_huge_mapped_bytes(void);

typedef struct {
    double gbps;        /* best rep, 1e9 bytes/s */
    double median_gbps;
    size_t bytes;       /* buffer size read per rep */
    int threads, reps;
} g4_bw_result;

/* Multi-threaded streaming read over a freshly allocated and touched buffer of `bytes` (>> L3, in
 * 2 MiB pages where the kernel gives them, as the weights are), `reps` times; freed before return. */
g4_status g4_bench_read_bw(int threads, size_t bytes, int reps, g4_bw_result *out);

/* The same read kept ready (buffer and threads) to be re-measured right before each decode rep:
 * on a shared host the bandwidth drifts during a run. */
typedef struct g4_bw_probe g4_bw_probe;
g4_status g4_bw_probe_new(int threads, size_t bytes, g4_bw_probe **out);
double g4_bw_probe_read(g4_bw_probe *p, int reps);            /* best of `reps`, GB/s */
void g4_bw_probe_free(g4_bw_probe *p);

/* fp32 FMA peak in GFLOP/s (register-only FMA chains on every thread, best of `reps`; *isa names
 * the instructions), and the peak of the bf16 unit --prefill-bf16 runs on (0 without one; *note
 * says which unit or why none). */
double g4_bench_fma_peak(int threads, int reps, const char **isa);
double g4_bench_bf16_peak(int threads, int reps, const char **note);

/* The model's cost model, from its bound weight matrices (exact dtypes and shapes). */
typedef struct {
    double layer_matrix_bytes;   /* q,k,v,o,gate,up,down over all layers, as stored */
    double lm_head_bytes;        /* the (tied) embedding read as the LM head */
    double layer_params;         /* parameters of those layer matrices */
    double lm_head_params;
    int n_layers, hidden, vocab, n_heads;
} g4_model_cost;

void g4_bench_model_cost(const g4_model *m, g4_model_cost *c);
/* FLOPs of attention for the tokens at positions [p0, p0 + n) of one sequence (sliding windows
 * capped), and the bytes of KV cache those tokens read. */
double g4_bench_attn_flops(const g4_model *m, int p0, int n);
double g4_bench_kv_read_bytes(const g4_model *m, int p0, int n);

/* Kernel-only throughput of the model's matmul path on its own matrices (`which`: "qkv", "o",
 * "gateup", "down", "lm_head" or "decode"; T activation rows; best of `reps` sweeps); see
 * src/bench/model_cost.h for the fields. G4_ERR_INPUT for an unknown group. */
typedef struct {
    double seconds, bytes, flops;
    double read_seconds, of_read;
    int rows, cols, T, n_calls;
} g4_kernel_timing;

g4_status g4_bench_kernel(g4_model *m, const char *which, int T, int reps, g4_kernel_timing *out);

/* ---------------------------------------------------------------- images */

/* An image prepared as Gemma 4 unified's image processor prepares it (transformers'
 * Gemma4UnifiedImageProcessor on a PIL image): decoded to RGB (alpha composited over white),
 * resized with aspect ratio kept to at most max_soft_tokens merged patches (small images are
 * scaled up), then cut into merged patches of (pooling_kernel * patch_size)^2 pixels, row-major.
 * Decodes PNG, JPEG, WebP and GIF (first frame); anything else, a corrupt or truncated file, or
 * declared dimensions over max_pixels is G4_ERR_INPUT naming the file. */
typedef struct {
    int max_soft_tokens;   /* 70, 140, 280, 560 or 1120 */
    int patch_size;        /* pixels per side of a patch (16) */
    int pooling_kernel;    /* patches merged per side (3): merged patches of 48 pixels */
    int64_t max_pixels;    /* refuse decoding an image of more pixels than this (width * height) */
} g4_image_opts;

#define G4_IMAGE_MAX_PIXELS_DEFAULT 100000000LL

/* The processor's defaults: 280 soft tokens, patches of 16, merged 3 x 3. */
void g4_image_opts_default(g4_image_opts *o);
/* The defaults, then a model's (a directory or a .g4c pack; an mmproj GGUF gives its patch
 * geometry) settings where it has them: config.json's vision_config
 * (patch_size, pooling_kernel_size), then the processor's, which win: the "image_processor"
 * object of processor_config.json, else preprocessor_config.json (patch_size, max_soft_tokens,
 * pooling_kernel_size). A present but bad value is G4_ERR_INPUT naming the file and field. */
g4_status g4_image_opts_load(const char *model_dir, g4_image_opts *o);

typedef struct {
    int src_width, src_height;  /* as decoded */
    int width, height;          /* after the resize */
    int grid_w, grid_h;         /* merged patches per row and per column */
    int n_patches;              /* grid_w * grid_h: the image's soft tokens */
    int patch_dim;              /* (pooling_kernel * patch_size)^2 * 3 */
    uint8_t *pixels;            /* resized RGB [height][width][3] */
    float *patches;             /* [n_patches][patch_dim]: pixel * (1/255), (y, x, channel) order */
    int32_t *positions;         /* [n_patches][2]: the patch's (x, y) in merged-patch units */
} g4_image;

g4_status g4_image_load(const char *path, const g4_image_opts *o, g4_image **out);
/* The same from bytes in memory; `name` names them in errors. */
g4_status g4_image_load_mem(const void *data, size_t n, const char *name, const g4_image_opts *o,
                            g4_image **out);
void g4_image_free(g4_image *im);

/* Gemma 4 unified's vision embedder (encoder-free): each merged patch through LayerNorm ->
 * Linear -> LayerNorm -> + 2-D position rows -> LayerNorm -> RMSNorm (no weight) -> projection
 * into the language model's hidden size, in float32. out: [n_patches][hidden]. G4_ERR_INPUT when
 * the model has no vision weights, or the image's patches do not fit its vision_config. Runs on
 * the model's worker threads: not while another call (a step) uses the same model. */
g4_status g4_image_embed(const g4_model *m, const g4_image *im, float *out);
/* 1 when the model has the vision embedder g4_image_embed needs (rank 0 of an HF checkpoint, of a
 * .g4c pack, or of a GGUF with an mmproj). */
int g4_model_has_vision(const g4_model *m);

/* ---------------------------------------------------------------- audio */

/* A sound file prepared as Gemma 4 unified's audio feature extractor prepares a 16 kHz waveform:
 * decoded by libsndfile (WAV, FLAC, OGG, MP3, ...) to float samples, channels averaged to mono,
 * resampled to 16 kHz with libsoxr where the file has another rate (beyond transformers, which
 * takes 16 kHz only), cut into frames of `frame` samples, the last zero-padded: one soft token a
 * frame. A corrupt or unsupported file, or one longer than max_seconds, is G4_ERR_INPUT. */
typedef struct {
    int frame;             /* samples per soft token: audio_config.audio_embed_dim (640: 40 ms) */
    double max_seconds;    /* refuse longer audio */
} g4_audio_opts;

/* 640 samples a frame, 30 s at most. */
void g4_audio_opts_default(g4_audio_opts *o);
/* The defaults, then config.json's audio_config.audio_embed_dim where the model (a directory or
 * a .g4c pack) has one, or an mmproj GGUF's frame. */
g4_status g4_audio_opts_load(const char *model_dir, g4_audio_opts *o);

typedef struct {
    int src_rate, src_channels;   /* as decoded */
    long n_samples;               /* at 16 kHz, mono */
    int frame, n_frames;          /* n_frames = ceil(n_samples / frame): the soft tokens */
    float *frames;                /* [n_frames][frame] */
} g4_audio;

g4_status g4_audio_load(const char *path, const g4_audio_opts *o, g4_audio **out);
g4_status g4_audio_load_mem(const void *data, size_t n, const char *name, const g4_audio_opts *o, g4_audio **out);
void g4_audio_free(g4_audio *a);

/* Gemma 4 unified's audio embedder: each frame through RMSNorm (no weight) -> projection into the
 * hidden size, in float32. out: [n_frames][hidden]. G4_ERR_INPUT when the model has no audio
 * embedder or the frames do not fit its audio_config. */
g4_status g4_audio_embed(const g4_model *m, const g4_audio *a, float *out);
int g4_model_has_audio(const g4_model *m);

/* ---------------------------------------------------------------- prompts with images */

/* A prompt assembled as transformers' Gemma4UnifiedProcessor assembles it: every image
 * placeholder token <|image|> in the ids becomes <|image> + N x <|image|> + <image|> (N = that
 * image's soft tokens, the images taken in order), and g4_prefill_media then feeds the image's
 * soft tokens in place of the N placeholders' embeddings. Built from the tokenizer alone (the
 * marker ids are its "<|image|>", "<|image>", "<image|>"), so `tokenize` can show the expansion.
 * The prompt borrows the images: keep them until it is freed. G4_ERR_INPUT when the number of
 * placeholders differs from n_images, or the tokenizer has no image markers. */
typedef struct g4_media_prompt g4_media_prompt;
g4_status g4_media_prompt_new(const g4_tokenizer *tok, const int32_t *ids, int n, g4_image *const *images,
                              int n_images, g4_media_prompt **out);
/* The same with audio clips too: each <|audio|> becomes <|audio> + N x <|audio|> + <audio|> (N =
 * the clip's frames), clips in order; their soft tokens attend causally. */
g4_status g4_media_prompt_new_av(const g4_tokenizer *tok, const int32_t *ids, int n, g4_image *const *images,
                                 int n_images, g4_audio *const *audios, int n_audios, g4_media_prompt **out);
void g4_media_prompt_free(g4_media_prompt *p);
/* The expanded ids (what the model sees: soft-token positions hold <|image|>) and their count. */
const int32_t *g4_media_prompt_ids(const g4_media_prompt *p, int *n);

/* g4_prefill / g4_prefill_argmax of a prompt with images: each image through g4_image_embed (once
 * per prompt, kept in it), its soft tokens as the placeholders' input rows (no sqrt(hidden)
 * scaling); on a model whose text_config says use_bidirectional_attention "vision" an image's
 * soft tokens attend to each other both ways on the sliding-window layers (within the window) and
 * causally on the full layers, as transformers' create_masks_for_vision_model (docs/multimodal.md).
 * A prefill chunk never cuts an image: the chunk ends before it instead, and an image of more soft
 * tokens than opts.prefill_chunk is G4_ERR_INPUT (audio, causal, is cut like text). Under --tp rank 0 embeds the images and the
 * soft tokens reach the other ranks as the embedding rows do. */
g4_status g4_prefill_media(g4_model *m, int slot, g4_media_prompt *p, float *logits);
g4_status g4_prefill_media_argmax(g4_model *m, int slot, g4_media_prompt *p, int32_t *next);
/* The same for the prompt's ids [from, from + n) alone, the slot holding ids [0, from) of it
 * (the server's prefill slices); logits / next are written when the range ends the prompt. The
 * range may not cut an image: g4_media_prompt_cut(p, from, n) is the longest n' <= n that does not
 * (0 when an image starts at `from` and is longer than n). */
g4_status g4_prefill_media_range(g4_model *m, int slot, g4_media_prompt *p, int from, int n, float *logits,
                                 int32_t *next);
int g4_media_prompt_cut(const g4_media_prompt *p, int from, int n);
/* The next prefill slice from `from` of at most n ids: g4_media_prompt_cut's, or where an image
 * starts at `from` and is longer than n, that whole image. */
int g4_media_prompt_slice(const g4_media_prompt *p, int from, int n);
/* ---------------------------------------------------------------- structured outputs */

/* Constrained decoding (src/grammar; docs/structured-outputs.md): a context-free grammar over
 * bytes, compiled once per request, and a matcher that gives per step the set of tokens of the
 * whole vocabulary whose bytes keep the output inside the grammar's language. Exact: a token is
 * allowed iff some continuation of the output with its bytes is in the language; an end token
 * iff the output so far is. Pure functions over token ids and bytes. */
typedef struct g4_grammar g4_grammar;
typedef struct g4_vocab_index g4_vocab_index;
typedef struct g4_matcher g4_matcher;

/* llama.cpp GBNF text; `root` names the start rule (NULL: "root"). G4_ERR_INPUT names the line
 * and column, an undefined rule, a left-recursive rule, or one that can never finish. */
g4_status g4_grammar_compile_gbnf(const char *src, size_t len, const char *root, g4_grammar **out);
/* The same with llama.cpp's token references to special tokens resolved over t's vocabulary:
 * <[id]> or <name> (e.g. <|tool_call>) matches exactly that token (and no text spelling it). */
g4_status g4_grammar_compile_gbnf_tokens(const char *src, size_t len, const char *root, const g4_tokenizer *t,
                                         g4_grammar **out);
/* Gemma 4's tool-call syntax for tool_choice "required" / a named function: one or more (at most
 * max_calls; 0: no bound) <|tool_call>call:NAME{...}<tool_call|>, then <|tool_response>, the
 * arguments in Gemma's dialect (bare keys, <|"|>-quoted strings) constrained by each tool's
 * parameter schema. tools_json: an OpenAI tools array; only: the one tool allowed (NULL: any).
 * GBNF with token references: compile it with g4_grammar_compile_gbnf_tokens. */
g4_status g4_tool_calls_to_gbnf(const char *tools_json, size_t len, const char *only, int max_calls, char **gbnf);
/* A JSON Schema (the keywords docs/structured-outputs.md lists; any other is G4_ERR_INPUT naming
 * the keyword and where it is). */
g4_status g4_grammar_compile_json_schema(const char *json, size_t len, g4_grammar **out);
/* Any JSON object (OpenAI's response_format json_object). */
g4_status g4_grammar_compile_json_object(g4_grammar **out);
/* The GBNF a JSON Schema compiles to (*gbnf malloc'ed, NUL-terminated); NULL schema: json_object. */
g4_status g4_json_schema_to_gbnf(const char *json, size_t len, char **gbnf);
void g4_grammar_free(g4_grammar *g);

/* The byte trie of a tokenizer's vocabulary, built once per tokenizer and shared read-only by
 * matchers: each token's bytes are those it adds to the detokenized text (a byte-fallback piece
 * <0xHH> its byte); special tokens are allowed only where a grammar references them, and
 * `end_ids` (e.g. the eos ids) are the end of output. */
g4_status g4_vocab_index_new(const g4_tokenizer *t, const int32_t *end_ids, int n_end, g4_vocab_index **out);
/* The same over raw byte strings pieces[i][0..lens[i]) (NULL or empty: never allowed). */
g4_status g4_vocab_index_from_pieces(const char *const *pieces, const size_t *lens, int n,
                                     const int32_t *end_ids, int n_end, g4_vocab_index **out);
void g4_vocab_index_free(g4_vocab_index *v);
int g4_vocab_index_size(const g4_vocab_index *v);
const unsigned char *g4_vocab_index_token_bytes(const g4_vocab_index *v, int32_t tok, size_t *len);

/* A matcher per sequence (both g and v must outlive it). */
g4_status g4_grammar_matcher_new(const g4_grammar *g, const g4_vocab_index *v, g4_matcher **out);
void g4_matcher_free(g4_matcher *m);
/* Writes the allowed tokens as bits (token t: bitmask[t / 32] bit t % 32) over the vocabulary,
 * ((size + 31) / 32 words); returns how many, or -1 (out of memory). After the end token: none. */
int g4_matcher_mask(g4_matcher *m, uint32_t *bitmask);
/* Advances by a token: 1 when it is allowed (an end token: when the grammar accepts, after which
 * nothing more is), 0 when not (the state is unchanged), -1 out of memory. */
int g4_matcher_accept(g4_matcher *m, int32_t token);
/* The same for raw bytes. */
int g4_matcher_accept_bytes(g4_matcher *m, const void *bytes, size_t n);
/* 1 when the output so far is a whole sentence of the grammar (an end token is allowed). */
int g4_matcher_accepts_end(const g4_matcher *m);
int g4_matcher_is_end(const g4_matcher *m, int32_t token);
/* The vocabulary index the matcher masks over. */
const g4_vocab_index *g4_matcher_vocab(const g4_matcher *m);
/* Whether the bytes could be fed now, simulated on the parse stacks without the matcher's
 * transition tables or caches (the reference the masks are tested against); -1 out of memory. */
int g4_matcher_allows_bytes_ref(g4_matcher *m, const void *bytes, size_t n);
/* Mask caching per grammar state (on by default; off to time the full walk). */
void g4_matcher_set_cache(g4_matcher *m, int on);
int g4_matcher_n_states(const g4_matcher *m);

#ifdef __cplusplus
}
#endif
#endif
