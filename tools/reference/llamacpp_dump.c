/* llamacpp_dump.c — llama.cpp's intermediate tensors for one prompt, to find where gemma4c's
 * --numerics ggml first departs from llama.cpp's CPU backend: runs libllama (from a llama.cpp
 * build outside this repo, as llamacpp_greedy.c) with an eval callback (llama_context_params
 * cb_eval) and writes every float32 tensor the graph computes during decode call STEP (0: the
 * whole prompt in one batch; k > 0: the k-th greedy token) to OUTDIR/NNNN_<name>.f32 (float32 LE,
 * the tensor made contiguous in ggml's ne0-fastest order) and one line per tensor to
 * OUTDIR/index.txt: "file name op ne0 ne1 ne2 ne3". Same settings as llamacpp_greedy.c (1 thread,
 * flash attention off, n_ctx 512, f32 or f16 KV cache). Not part of gemma4c.
 *
 * build: cc -O2 -I$LC/include -I$LC/ggml/include tools/reference/llamacpp_dump.c \
 *          -L$LC/build/bin -lllama -lggml -lggml-base -Wl,-rpath,$LC/build/bin -o /tmp/llamacpp_dump
 * usage: llamacpp_dump MODEL.gguf OUTDIR STEP f32|f16 IDS   (IDS: "2,944,333") */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "llama.h"

typedef struct {
    const char *dir;
    int active, count;
    FILE *index;
} dump_state;

static void quiet(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static bool on_tensor(struct ggml_tensor *t, bool ask, void *ud) {
    dump_state *s = ud;
    if (ask) return s->active && t->type == GGML_TYPE_F32;   /* we want every f32 result */
    if (!s->active || t->type != GGML_TYPE_F32) return true;
    char name[256], path[1024];
    snprintf(name, sizeof name, "%s", t->name[0] ? t->name : "unnamed");
    for (char *c = name; *c; c++)
        if (*c == '/' || *c == ' ' || *c == '(' || *c == ')') *c = '_';
    snprintf(path, sizeof path, "%s/%04d_%s.f32", s->dir, s->count, name);
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                    const float *v = (const float *)((const char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] +
                                                     i2 * t->nb[2] + i3 * t->nb[3]);
                    fwrite(v, sizeof(float), 1, f);
                }
    fclose(f);
    fprintf(s->index, "%04d_%s.f32 %s %s %lld %lld %lld %lld\n", s->count, name, t->name, ggml_op_desc(t),
            (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
    s->count++;
    return true;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s MODEL.gguf OUTDIR STEP f32|f16 IDS\n", argv[0]);
        return 2;
    }
    const int step = atoi(argv[3]);
    char ipath[1024];
    snprintf(ipath, sizeof ipath, "%s/index.txt", argv[2]);
    dump_state s = {.dir = argv[2], .index = fopen(ipath, "w")};
    if (!s.index) { perror(ipath); return 1; }
    llama_token ids[4096];
    int n = 0;
    for (char *p = strtok(argv[5], ", "); p && n < 4096; p = strtok(NULL, ", ")) ids[n++] = atoi(p);
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 1;
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512;
    cp.n_batch = cp.n_ubatch = 512;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.type_k = cp.type_v = strcmp(argv[4], "f16") ? GGML_TYPE_F32 : GGML_TYPE_F16;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.cb_eval = on_tensor;
    cp.cb_eval_user_data = &s;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) return 1;
    for (int i = 0; i <= step; i++) {
        s.active = i == step;
        if (llama_decode(ctx, llama_batch_get_one(ids, n))) return 1;
        const float *lg = llama_get_logits_ith(ctx, -1);
        int best = 0;
        for (int v = 1; v < n_vocab; v++)
            if (lg[v] > lg[best]) best = v;
        ids[0] = best;
        n = 1;
    }
    fclose(s.index);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
