/* fuzz_gguf.c — libFuzzer target for the GGUF reader (src/io/gguf.c): any byte string is parsed
 * as a whole file image; the parser must refuse it or produce metadata and tensors that lie
 * entirely inside the buffer. Every key is then read through the typed getters, every string
 * array walked and every numeric array element read, and the tensors exported to a tensor set. */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "io/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    g4_gguf *g = NULL;
    if (g4_gguf_parse(data, size, "fuzz.gguf", &g) != G4_OK) return 0;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const g4_gguf_kv *kv = &g->kv[i];
        assert((const uint8_t *)kv->key >= data && (const uint8_t *)kv->key + kv->key_len <= data + size);
        char key[300];
        snprintf(key, sizeof key, "%.*s", (int)(kv->key_len < 299 ? kv->key_len : 299), kv->key);
        int64_t iv;
        double dv;
        int bv, found;
        const char *s;
        size_t sl;
        g4_gguf_get_int(g, key, &iv, &found);
        g4_gguf_get_float(g, key, &dv, &found);
        g4_gguf_get_bool(g, key, &bv, &found);
        g4_gguf_get_str(g, key, &s, &sl, &found);
        if (kv->type == G4_GGUF_ARRAY && kv->arr_type == G4_GGUF_STRING) {
            const uint8_t *p = kv->val;
            for (uint64_t j = 0; j < kv->n; j++) {
                uint64_t len;
                p = g4_gguf_str_next(p, &s, &len);
                assert((const uint8_t *)s >= data && p <= data + size);
            }
        } else if (kv->type == G4_GGUF_ARRAY) {
            uint64_t u = 0;   /* unsigned: the sum may wrap */
            for (uint64_t j = 0; j < kv->n; j++) { u += (uint64_t)g4_gguf_arr_i64(kv, j); dv += g4_gguf_arr_f64(kv, j); }
            iv = (int64_t)(u & 1);
        }
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const uint8_t *p = g->tensors[i].data;
        assert(p >= data && p + g->tensors[i].nbytes <= data + size);
    }
    g4_tensor_set set;
    memset(&set, 0, sizeof set);
    g4_gguf_export_tensors(g, &set);   /* g does not own `data`: the set maps nothing */
    g4_st_close(&set);
    g4_gguf_free(g);
    return 0;
}
