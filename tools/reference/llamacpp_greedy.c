/* llamacpp_greedy.c — the reference side of the Gemma 4 GGUF tests: runs llama.cpp (linked as
 * libllama from a llama.cpp build outside this repo) on one GGUF and prints, for each prompt,
 * the greedy continuation (argmax of llama.cpp's logits, EOS neither stops nor is suppressed) and
 * each step's top-1 minus top-2 logit margin, as one JSON object per line; with LOGITS_PREFIX, also
 * each prompt's last-position logits (float32 LE) to LOGITS_PREFIX<k>.f32. Built and run by
 * record_llamacpp_greedy.py; not part of gemma4c.
 *
 * usage: llamacpp_greedy MODEL.gguf N KV_TYPE(f32|f16) [LOGITS_PREFIX] < prompts  (one line of ids "2,944,333" each)
 * With NO_REPACK=1 in the environment the weights stay as stored (use_extra_bufts = false): x86
 * builds otherwise repack Q4_0 / Q4_K rows into interleaved 8-row blocks with their own GEMM,
 * which sums in another order than ggml's vec_dot.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s MODEL.gguf N f32|f16 [LOGITS_PREFIX] < prompts\n", argv[0]);
        return 2;
    }
    const int n_gen = atoi(argv[2]);
    const enum ggml_type kv = strcmp(argv[3], "f16") ? GGML_TYPE_F32 : GGML_TYPE_F16;
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.use_extra_bufts = !(getenv("NO_REPACK") && atoi(getenv("NO_REPACK")));
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 1;
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    char line[1 << 16];
    static float margin[4096];
    for (int k = 0; fgets(line, sizeof line, stdin); k++) {
        llama_token ids[4096];
        int n = 0;
        for (char *p = strtok(line, ", \n"); p && n < 4096; p = strtok(NULL, ", \n")) ids[n++] = atoi(p);
        if (!n) continue;
        /* a fresh context per prompt: positions from 0, empty cache; one thread, whole prompt in one batch */
        struct llama_context_params cp = llama_context_default_params();
        cp.n_ctx = 512;
        cp.n_batch = cp.n_ubatch = 512;
        cp.n_threads = cp.n_threads_batch = 1;
        cp.type_k = cp.type_v = kv;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
        struct llama_context *ctx = llama_init_from_model(model, cp);
        if (!ctx) return 1;
        printf("{\"greedy\":[");
        for (int i = 0; i < n_gen && i < 4096; i++) {
            if (llama_decode(ctx, llama_batch_get_one(ids, n))) return 1;
            const float *lg = llama_get_logits_ith(ctx, -1);
            if (i == 0 && argc == 5) {
                char path[4200];
                snprintf(path, sizeof path, "%s%d.f32", argv[4], k);
                FILE *f = fopen(path, "wb");
                if (!f || fwrite(lg, sizeof(float), (size_t)n_vocab, f) != (size_t)n_vocab || fclose(f)) return 1;
            }
            int best = 0, second = -1;
            for (int v = 1; v < n_vocab; v++)
                if (lg[v] > lg[best]) { second = best; best = v; }
                else if (second < 0 || lg[v] > lg[second]) second = v;
            margin[i] = lg[best] - lg[second];
            printf("%s%d", i ? "," : "", best);
            ids[0] = best;
            n = 1;
        }
        printf("],\"margin\":[");
        for (int i = 0; i < n_gen && i < 4096; i++) printf("%s%.6g", i ? "," : "", (double)margin[i]);
        printf("]}\n");
        fflush(stdout);
        llama_free(ctx);
    }
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
