/* source.h — one interface over the ways a model arrives: a HuggingFace checkpoint directory, one
 * GGUF file, or a .g4c pack. It names the format once and hands out the checkpoint's text files
 * (config.json, tokenizer.json, tokenizer_config.json, chat_template.jinja, chat_template.json,
 * generation_config.json) by name, so that the tokenizer, template and generation-config readers
 * never ask which format they were given. A GGUF carries those as metadata instead of files: it
 * hands out its parsed metadata (g4_source_gguf). Weights are the model loader's business. */
#ifndef G4_IO_SOURCE_H
#define G4_IO_SOURCE_H

#include <stddef.h>

#include "gemma4c.h"
#include "io/gguf.h"

typedef enum {
    G4_SOURCE_DIR = 0,   /* a HuggingFace checkpoint (or tokenizer) directory */
    G4_SOURCE_GGUF = 1,  /* one .gguf file: config, weights, vocabulary and template inside */
    G4_SOURCE_PACK = 2,  /* a .g4c pack: the checkpoint's text files embedded */
    G4_SOURCE_FILE = 3   /* any other regular file (a tokenizer.json or template given directly) */
} g4_source_kind;

typedef struct g4_source g4_source;

/* Opens `path` and tells its kind by what it is (a directory) or by its magic bytes (files).
 * G4_ERR_INPUT naming the path when it does not exist. */
g4_status g4_source_open(const char *path, g4_source **out);
void g4_source_close(g4_source *s);

g4_source_kind g4_source_kind_of(const g4_source *s);
const char *g4_source_path(const g4_source *s);
/* What a source of this kind is, for messages: "a directory", "a GGUF file", ... */
const char *g4_source_kind_name(g4_source_kind k);

/* The checkpoint's text file `name`: *data (NUL-terminated, owned by s until g4_source_close) and
 * *len; *data NULL (and G4_OK) when the checkpoint has no such file, and always for the GGUF and
 * FILE kinds. *where (may be NULL) names it in messages: "DIR/name" or "PACK:name". */
g4_status g4_source_file(g4_source *s, const char *name, const char **data, size_t *len, const char **where);

/* The GGUF kind's parsed metadata (valid until g4_source_close); NULL for the other kinds. */
const g4_gguf *g4_source_gguf(const g4_source *s);

/* A model path that is none of the three formats: the one-line error naming what it is not. */
g4_status g4_source_not_a_model(const g4_source *s);

#endif
