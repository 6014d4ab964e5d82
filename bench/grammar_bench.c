/* grammar_bench.c — what constrained decoding costs a decode step: a model decodes N tokens at
 * batch 1 unconstrained, then N tokens under a grammar, each step as the generation helper does it
 * (src/generate: the matcher's mask, the other logits to -inf, the sampler, the matcher advanced by
 * the token). Per step it times the forward pass, the mask (mask + applying it) and the matcher's
 * advance apart, so the mask's share of the step and both tok/s come from the same run. A document
 * that ends (the grammar accepts and an end token is drawn) is followed by a new one from a fresh
 * matcher, the KV cache going on, so every step is a constrained one. The two runs alternate step
 * by step (two slots), so that a shared host's drift weighs on both alike. It also times the grammar's
 * compile (median of 20) and the vocabulary index (once). Prints one JSON object.
 * Usage: grammar_bench -m MODEL (--json-schema FILE | --json-object | --grammar FILE.gbnf)
 *        [-n 128] [--threads N] [--temp 1.0] [--seed 1] [--no-cache] [-p PROMPT]
 * Build: make build/bench/grammar_bench; driver: bench/grammar_speed.py */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gemma4c.h"

/* The mask runs on the calling thread alone: its CPU time is its cost without another tenant's
 * load, which a shared host adds to the wall time. */
static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) { free(s); s = NULL; }
    fclose(f);
    if (s) { s[n] = 0; *len = (size_t)n; }
    return s;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct { double median, mean, p99, max; } stats;

static stats summarize(double *v, int n) {
    stats s = {0};
    if (n <= 0) return s;
    for (int i = 0; i < n; i++) s.mean += v[i] / n;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    s.median = v[n / 2];
    s.p99 = v[(int)(0.99 * (n - 1))];
    s.max = v[n - 1];
    return s;
}

static void put_stats(const char *name, stats s, int last) {
    printf("\"%s\": {\"median_ms\": %.4f, \"mean_ms\": %.4f, \"p99_ms\": %.4f, \"max_ms\": %.4f}%s", name,
           s.median * 1e3, s.mean * 1e3, s.p99 * 1e3, s.max * 1e3, last ? "" : ", ");
}

static int die(const char *what) {
    fprintf(stderr, "grammar_bench: %s: %s\n", what, g4_last_error());
    return 1;
}

static g4_status compile(int kind, const char *src, size_t len, const g4_tokenizer *tk, g4_grammar **g) {
    if (kind == 0) return g4_grammar_compile_json_schema(src, len, g);
    if (kind == 1) return g4_grammar_compile_json_object(g);
    return g4_grammar_compile_gbnf_tokens(src, len, NULL, tk, g);
}

int main(int argc, char **argv) {
    const char *model = NULL, *file = NULL, *prompt = "Answer with one JSON document.";
    int kind = -1, n = 128, threads = 0, cache = 1;
    float temp = 1.0f;
    unsigned long long seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-m") && v) model = argv[++i];
        else if (!strcmp(a, "--json-schema") && v) { kind = 0; file = argv[++i]; }
        else if (!strcmp(a, "--json-object")) kind = 1;
        else if (!strcmp(a, "--grammar") && v) { kind = 2; file = argv[++i]; }
        else if (!strcmp(a, "-n") && v) n = atoi(argv[++i]);
        else if (!strcmp(a, "--threads") && v) threads = atoi(argv[++i]);
        else if (!strcmp(a, "--temp") && v) temp = (float)atof(argv[++i]);
        else if (!strcmp(a, "--seed") && v) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "-p") && v) prompt = argv[++i];
        else if (!strcmp(a, "--no-cache")) cache = 0;
        else { fprintf(stderr, "grammar_bench: unknown or incomplete option '%s'\n", a); return 2; }
    }
    if (!model || kind < 0 || n < 1) {
        fprintf(stderr, "usage: grammar_bench -m MODEL (--json-schema FILE | --json-object | --grammar FILE) [-n 128] [--threads N] [--temp 1] [--seed 1] [--no-cache] [-p PROMPT]\n");
        return 2;
    }
    size_t len = 0;
    char *src = file ? slurp(file, &len) : NULL;
    if (file && !src) { fprintf(stderr, "grammar_bench: cannot read %s\n", file); return 2; }

    g4_tokenizer *tk = NULL;
    g4_model *m = NULL;
    g4_model_opts o;
    g4_model_opts_default(&o);
    o.threads = threads;
    o.ctx = 4 * n + 256;
    o.n_slots = 2;
    if (g4_tokenizer_load(model, &tk)) return die("tokenizer");
    if (g4_model_load(model, &o, &m)) return die("model");
    const g4_model_info *info = g4_model_get_info(m);
    g4_gen_config cfg;
    if (g4_gen_config_load(model, info, &cfg)) return die("generation config");
    const int V = info->vocab_size;

    /* compile time: the median of 20 compiles (the first one may fault pages in) */
    double ct[20];
    g4_grammar *g = NULL;
    for (int r = 0; r < 20; r++) {
        if (g) g4_grammar_free(g);
        double t0 = g4_now();
        if (compile(kind, src, len, tk, &g)) return die("grammar");
        ct[r] = g4_now() - t0;
    }
    stats cs = summarize(ct, 20);
    double t0 = g4_now();
    g4_vocab_index *vi = NULL;
    if (g4_vocab_index_new(tk, cfg.eos, cfg.n_eos, &vi)) return die("vocabulary index");
    double t_index = g4_now() - t0;
    const int VI = g4_vocab_index_size(vi);   /* the model's vocabulary may be padded past the tokenizer's */

    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (g4_tokenize(tk, prompt, strlen(prompt), 1, &ids, &n_ids)) return die("tokenize");
    float *logits = malloc((size_t)V * sizeof *logits), *logits2 = malloc((size_t)V * sizeof *logits2);
    uint32_t *mask = calloc(((size_t)(V > VI ? V : VI) + 31) / 32, sizeof *mask);
    double *t_fwd[2], *t_mask = malloc((size_t)n * sizeof(double)), *c_mask = malloc((size_t)n * sizeof(double)), *t_adv = malloc((size_t)n * sizeof(double));
    t_fwd[0] = malloc((size_t)n * sizeof(double));
    t_fwd[1] = malloc((size_t)n * sizeof(double));
    double wall[2] = {0, 0};
    int docs = 0, allowed_sum = 0, forced_end = 0;
    if (!logits || !logits2 || !mask || !t_fwd[0] || !t_fwd[1] || !t_mask || !c_mask || !t_adv) { fprintf(stderr, "grammar_bench: out of memory\n"); return 1; }

    /* the two runs alternate step by step in two slots, so that a shared host's drift weighs on
     * both alike: slot 0 unconstrained, slot 1 constrained */
    g4_sampler *smp[2] = {NULL, NULL};
    float *lg[2] = {logits, logits2};
    for (int run = 0; run < 2; run++) {
        g4_sampler_params sp;
        g4_sampler_params_default(&sp);
        sp.temperature = temp;
        sp.seed = seed;
        if (g4_sampler_new(&sp, V, info->final_logit_softcap, &smp[run])) return die("sampler");
        g4_slot_reset(m, run);
        if (g4_prefill(m, run, ids, (int)n_ids, lg[run])) return die("prefill");
    }
    g4_matcher *mt = NULL;
    if (g4_grammar_matcher_new(g, vi, &mt)) return die("matcher");
    g4_matcher_set_cache(mt, cache);
    for (int i = 0; i < n; i++)
        for (int run = 0; run < 2; run++) {
            double w0 = g4_now();
            int32_t tok;
            if (run) {
                double a = g4_now(), ac = cpu_now();
                int cnt = g4_matcher_mask(mt, mask);
                if (cnt < 0) { fprintf(stderr, "grammar_bench: out of memory\n"); return 1; }
                for (int t = 0; t < V; t++)
                    if (t >= VI || !(mask[t >> 5] >> (t & 31) & 1)) logits2[t] = -INFINITY;
                t_mask[i] = g4_now() - a;
                c_mask[i] = cpu_now() - ac;
                allowed_sum += cnt;
                tok = cnt ? g4_sampler_sample(smp[1], logits2) : cfg.eos[0];
                forced_end += !cnt;
                a = g4_now();
                g4_matcher_accept(mt, tok);
                if (g4_matcher_is_end(mt, tok) || !cnt) {   /* the document is whole: the next one */
                    docs++;
                    g4_matcher_free(mt);
                    if (g4_grammar_matcher_new(g, vi, &mt)) return die("matcher");
                    g4_matcher_set_cache(mt, cache);
                }
                t_adv[i] = g4_now() - a;
            } else {
                tok = g4_sampler_sample(smp[0], logits);
            }
            double a = g4_now();
            if (g4_decode(m, 1, &run, &tok, lg[run])) return die("decode");
            t_fwd[run][i] = g4_now() - a;
            wall[run] += g4_now() - w0;
        }
    g4_matcher_free(mt);
    g4_sampler_free(smp[0]);
    g4_sampler_free(smp[1]);
    stats f0 = summarize(t_fwd[0], n), f1 = summarize(t_fwd[1], n), ms = summarize(t_mask, n), mc = summarize(c_mask, n), ad = summarize(t_adv, n);
    double step1 = wall[1] / n;
    printf("{\"model\": \"%s\", \"grammar\": \"%s\", \"vocab\": %d, \"tokens\": %d, \"threads\": %d, \"temp\": %g, \"cache\": %d, ",
           model, kind == 1 ? "json_object" : file, V, n, threads, temp, cache);
    put_stats("compile", cs, 0);
    printf("\"vocab_index_ms\": %.1f, ", t_index * 1e3);
    put_stats("forward_unconstrained", f0, 0);
    put_stats("forward_constrained", f1, 0);
    put_stats("mask", ms, 0);
    put_stats("mask_cpu", mc, 0);
    put_stats("advance", ad, 0);
    printf("\"mask_share_of_step\": %.4f, \"mask_cpu_share_of_step\": %.4f, ", (ms.mean + ad.mean) / step1, (mc.mean + ad.mean) / step1);
    printf("\"tok_s_unconstrained\": %.2f, \"tok_s_constrained\": %.2f, \"constrained_over_unconstrained\": %.4f, ",
           n / wall[0], n / wall[1], wall[0] / wall[1]);
    printf("\"documents\": %d, \"mean_allowed\": %.1f, \"forced_end\": %d}\n", docs, (double)allowed_sum / n, forced_end);
    g4_vocab_index_free(vi);
    g4_grammar_free(g);
    g4_model_free(m);
    g4_tokenizer_free(tk);
    g4_gen_config_free(&cfg);
    free(ids);
    free(logits);
    free(logits2);
    free(mask);
    free(t_fwd[0]);
    free(t_fwd[1]);
    free(t_mask);
    free(c_mask);
    free(t_adv);
    free(src);
    return 0;
}
