/* fuzz_gguf_bind.c — libFuzzer target for loading a model from a GGUF (src/model/gguf_bind.c:
 * the configuration from the metadata, every tensor's name, type and shape checked against it):
 * any byte string is written to a file and loaded as a model. The load must succeed or refuse
 * with an error; a model that loads is freed again (leaks and overreads are the sanitizers'). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "gemma4c.h"

static char path[64];

__attribute__((destructor)) static void remove_file(void) {
    if (path[0]) unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!path[0]) snprintf(path, sizeof path, "/tmp/fuzz_gguf_bind_%d.gguf", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    g4_model_opts mo;
    g4_model_opts_default(&mo);
    mo.n_slots = 1;
    mo.ctx = 64;
    mo.threads = 1;
    g4_model *m = NULL;
    if (g4_model_load(path, &mo, &m) == G4_OK) g4_model_free(m);
    return 0;
}
