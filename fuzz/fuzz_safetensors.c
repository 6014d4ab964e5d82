/* fuzz_safetensors.c — libFuzzer target for the safetensors header parser: any byte string is
 * parsed as a whole file image; the parser must either refuse it or produce tensors that lie
 * entirely inside the buffer. Also feeds the same bytes to the config.json parser. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "io/hfconfig.h"
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    g4_tensor_set set;
    memset(&set, 0, sizeof set);
    if (g4_st_parse(&set, data, size, "fuzz.safetensors") == G4_OK) {
        for (int i = 0; i < set.n_tensors; i++) {
            const uint8_t *p = set.tensors[i].data;
            assert(p >= data && p + set.tensors[i].nbytes <= data + size);
        }
    }
    g4_st_close(&set);
    g4_config cfg;
    g4_config_parse((const char *)data, size, "fuzz/config.json", &cfg);
    return 0;
}
