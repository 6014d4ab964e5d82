/* fuzz_model_config.c — libFuzzer target for a checkpoint's small JSON files: the first byte
 * picks the file (generation_config.json, tokenizer_config.json or chat_template.json), the rest
 * is its content, written into a scratch checkpoint directory that holds the tiny fixture's
 * config.json (G4_FUZZ_MODEL overrides where it comes from). generation_config.json goes through
 * g4_gen_config_load (no negative eos id); the other two
 * through g4_template_load, and a template that loads renders a short conversation. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gemma4c.h"

static char dir[64];
static const char *const files[] = {"generation_config.json", "tokenizer_config.json", "chat_template.json"};

static void put(const char *name, const void *data, size_t size) {
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size)) abort();
    fclose(f);
}

__attribute__((destructor)) static void remove_dir(void) {
    if (!dir[0]) return;
    char p[128];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    rmdir(dir);
}

static void setup_once(void) {
    if (dir[0]) return;
    snprintf(dir, sizeof dir, "/tmp/fuzz_model_config_XXXXXX");
    if (!mkdtemp(dir)) abort();
    const char *src = getenv("G4_FUZZ_MODEL");
    char p[4096];
    snprintf(p, sizeof p, "%s/config.json", src ? src : "tests/fixtures/g4-cond-tiny");
    FILE *f = fopen(p, "rb");
    if (!f) {
        fprintf(stderr, "fuzz_model_config: cannot read %s (run from the repository root)\n", p);
        abort();
    }
    static char cfg[1 << 16];
    size_t n = fread(cfg, 1, sizeof cfg, f);
    fclose(f);
    put("config.json", cfg, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup_once();
    if (!size) return 0;
    const int which = data[0] % 3;
    for (int i = 0; i < 3; i++) {
        char p[128];
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    put(files[which], data + 1, size - 1);
    if (which == 0) {
        const g4_model_info info = {.vocab_size = 262144, .eos_id = 1, .bos_id = 2, .pad_id = 0};
        g4_gen_config g;
        if (g4_gen_config_load(dir, &info, &g) == G4_OK) {
            for (int i = 0; i < g.n_eos; i++)
                if (g.eos[i] < 0) abort();   /* ids are checked against the vocabulary where used */
            g4_gen_config_free(&g);
        }
        return 0;
    }
    g4_template *t = NULL;
    if (g4_template_load(dir, &t) == G4_OK) {
        static const char conv[] = "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, "
                                   "{\"role\": \"user\", \"content\": \"Hi\"}], \"add_generation_prompt\": true}";
        char *out = NULL;
        size_t len;
        if (g4_template_render(t, conv, sizeof conv - 1, &out, &len) == G4_OK) free(out);
        g4_template_free(t);
    }
    return 0;
}
