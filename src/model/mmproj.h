/* mmproj.h — llama.cpp's mmproj GGUF for Gemma 4 unified (projector types gemma4uv / gemma4ua, as
 * its convert_hf_to_gguf.py --mmproj writes them): the geometry it implies, for the image and
 * audio preprocessing, and the binding of its tensors to the vision and audio embedders. */
#ifndef G4_MODEL_MMPROJ_H
#define G4_MODEL_MMPROJ_H

#include "gemma4c.h"
#include "io/gguf.h"

typedef struct {
    int has_vision, has_audio;
    int patch_size, pooling_kernel;   /* vision: merged patches of patch_size * pooling_kernel pixels */
    int embed, posemb, hidden;        /* vision: mm_embed_dim, mm_posemb_size; the text hidden size */
    float vis_eps, aud_eps;           /* the weightless RMSNorms' eps */
    int audio_frame;                  /* audio: samples a frame (audio_embed_dim) */
} g4_mmproj_geom;

/* 1 when `g` is an mmproj (general.architecture "clip"). */
int g4_is_mmproj(const g4_gguf *g);
/* The geometry of an mmproj; G4_ERR_INPUT naming `g->path` for another projector type, a missing
 * tensor or key, or shapes that disagree. */
g4_status g4_mmproj_geom_read(const g4_gguf *g, g4_mmproj_geom *out);
/* `-m model.gguf --mmproj FILE`: sets the model's vision / audio config from the mmproj (images
 * attend bidirectionally, as llama.cpp's mtmd runs gemma4uv) and, with bind_weights (rank 0),
 * binds its tensors, renamed and laid out as the HF checkpoint's, through g4_vision_bind /
 * g4_audio_bind. */
g4_status g4_mmproj_bind(g4_model *m, const char *path, int bind_weights);

#endif
