/* fuzz_pack.c — libFuzzer target for the `.g4c` reader: any byte string is opened as a whole pack
 * image for metadata only and for ranks 0 and 1; the reader must refuse it or hand out embedded
 * files and tensors that lie entirely inside the buffer. Random bytes would fail at the size and
 * crc checks, so with G4_FUZZ_FIXCRC set (run_pack.sh sets it) the input is taken as the prefix
 * (header, metadata, directory) of an image as long as its header says (at most 8 MiB, zeros
 * after the input: the 2 MiB-aligned segments) and the segment and header crcs are rewritten, so
 * the structural checks behind them get exercised too. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "io/pack.h"

static uint64_t rd64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fix = size >= G4_PACK_HEADER_SIZE && getenv("G4_FUZZ_FIXCRC");
    size_t img = size;
    if (fix) {
        uint64_t fs = rd64(data + 48);
        if (fs > size && fs <= ((uint64_t)8 << 20)) img = (size_t)fs;
    }
    uint8_t *buf = calloc(1, img ? img : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    size = img;
    if (fix) {
        for (int r = 0; r < G4_PACK_MAX_RANKS; r++) {
            uint8_t *e = buf + 64 + r * 40;
            uint64_t so = rd64(e), sl = rd64(e + 8);
            if (so > size || sl > size - so) continue;
            uLong c = crc32_z(0, buf + so, (size_t)sl);
            for (int i = 0; i < 4; i++) e[32 + i] = (uint8_t)(c >> (8 * i));
        }
        uint64_t mo = rd64(buf + 16), ml = rd64(buf + 24), dof = rd64(buf + 32), dl = rd64(buf + 40);
        if (mo <= size && ml <= size - mo && dof <= size && dl <= size - dof) {
            memset(buf + 56, 0, 4);
            uLong c = crc32_z(0, buf, G4_PACK_HEADER_SIZE);
            c = crc32_z(c, buf + mo, (size_t)ml);
            c = crc32_z(c, buf + dof, (size_t)dl);
            for (int i = 0; i < 4; i++) buf[56 + i] = (uint8_t)(c >> (8 * i));
        }
    }
    for (int rank = -1; rank < 2; rank++) {
        g4_pack *p;
        if (g4_pack_open_mem(buf, size, "fuzz.g4c", rank, &p) != G4_OK) continue;
        static const char *const names[] = {"config.json", "tokenizer.json", "chat_template.jinja"};
        for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
            const char *d;
            size_t n;
            if (g4_pack_file(p, names[i], &d, &n) == G4_OK)
                assert((const uint8_t *)d >= buf && (const uint8_t *)d + n < buf + size && d[n] == 0);
        }
        g4_tensor_set ts;
        if (g4_pack_tensors(p, &ts) == G4_OK) {
            for (int i = 0; i < ts.n_tensors; i++) {
                const uint8_t *t = ts.tensors[i].data;
                assert(t >= buf && t + ts.tensors[i].nbytes <= buf + size);
            }
            g4_st_close(&ts);
        }
        g4_pack_close(p);
    }
    free(buf);
    return 0;
}
