/* tokenizer_gguf.h — tokenizer and chat template from a GGUF file's metadata (tokenizer_gguf.c);
 * g4_tokenizer_load and g4_template_load call these for a model source of the GGUF kind. `path`
 * names the file in messages. */
#ifndef G4_TOKENIZER_GGUF_H
#define G4_TOKENIZER_GGUF_H

#include "gemma4c.h"
#include "io/gguf.h"

g4_status tk_load_gguf(const g4_gguf *g, const char *path, g4_tokenizer **out);
g4_status tk_template_load_gguf(const g4_gguf *g, const char *path, g4_template **out);

#endif
