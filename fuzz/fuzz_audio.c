/* fuzz_audio.c — libFuzzer target for audio decoding and framing: any byte string goes through
 * g4_audio_load_mem (libsndfile's format sniffing and decoders behind the memory I/O glue, the
 * mono mix, the resampler for rates other than 16 kHz, the length limit, the frames). It must be
 * refused with G4_ERR_INPUT or give frames consistent with the samples. The length limit is kept
 * small so that no input can ask for more than a few MiB. */
#include <assert.h>
#include <stdint.h>

#include "gemma4c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    g4_audio_opts o;
    g4_audio_opts_default(&o);
    o.frame = size % 2 ? 640 : 32;
    o.max_seconds = 2;
    g4_audio *a = NULL;
    g4_status st = g4_audio_load_mem(data, size, "fuzz", &o, &a);
    if (st == G4_OK) {
        assert(a->frame == o.frame && a->n_samples >= 1);
        assert(a->n_frames == (a->n_samples + o.frame - 1) / o.frame);
        for (long i = a->n_samples; i < (long)a->n_frames * o.frame; i++) assert(a->frames[i] == 0.0f);
        g4_audio_free(a);
    } else {
        assert(st == G4_ERR_INPUT);
    }
    return 0;
}
