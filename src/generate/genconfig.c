/* genconfig.c — reads a checkpoint's generation_config.json into a g4_gen_config (gemma4c.h):
 * the eos ids that end a generation, suppress_tokens (kept at -inf, e.g. <image|> / <audio|> in
 * the 12B) and the default sampling parameters. Absent file or fields fall back to config.json's
 * eos and the sampler's defaults. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "gemma4c.h"
#include "io/source.h"

/* An int or a list of ints into a malloc'ed array. */
static g4_status id_list(const char *file, const char *key, json_t *v, int32_t **out, int *n) {
    *out = NULL;
    *n = 0;
    if (!v || json_is_null(v)) return G4_OK;
    size_t cnt = json_is_array(v) ? json_array_size(v) : 1;
    int32_t *a = malloc((cnt ? cnt : 1) * sizeof *a);
    if (!a) return g4_fail(G4_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < cnt; i++) {
        json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > INT32_MAX) {
            free(a);
            return g4_fail(G4_ERR_INPUT, "%s: '%s' must be a token id or a list of token ids", file, key);
        }
        a[i] = (int32_t)json_integer_value(e);
    }
    *out = a;
    *n = (int)cnt;
    return G4_OK;
}

g4_status g4_gen_config_load(const char *dir, const g4_model_info *info, g4_gen_config *g) {
    if (!dir || !info) return g4_fail(G4_ERR_INPUT, "g4_gen_config_load: no model");
    *g = (g4_gen_config){0};
    g4_sampler_params_default(&g->defaults);
    /* the model source hands out the file whatever the format: a directory's, a .g4c's embedded
     * copy, none for a GGUF (its eos comes from its metadata through info) */
    g4_source *src;
    g4_status st = g4_source_open(dir, &src);
    if (st) return st;
    const char *data = NULL, *where = NULL;
    size_t len = 0;
    char path[4096] = "generation_config.json";
    json_error_t je;
    json_t *root = NULL;
    st = g4_source_file(src, "generation_config.json", &data, &len, &where);
    if (!st && data) {
        snprintf(path, sizeof path, "%s", where ? where : "generation_config.json");
        if (!(root = json_loadb(data, len, 0, &je))) st = g4_fail(G4_ERR_INPUT, "%s:%d: %s", path, je.line, je.text);
    }
    g4_source_close(src);
    if (st) return st;
    if (root) {
        if ((st = id_list(path, "eos_token_id", json_object_get(root, "eos_token_id"), &g->eos, &g->n_eos))) goto out;
        if ((st = id_list(path, "suppress_tokens", json_object_get(root, "suppress_tokens"), &g->suppress, &g->n_suppress)))
            goto out;
        json_t *v;
        if (json_is_number(v = json_object_get(root, "temperature"))) g->defaults.temperature = (float)json_number_value(v);
        if (json_is_number(v = json_object_get(root, "top_p"))) g->defaults.top_p = (float)json_number_value(v);
        if (json_is_integer(v = json_object_get(root, "top_k"))) g->defaults.top_k = (int)json_integer_value(v);
        if (json_is_number(v = json_object_get(root, "min_p"))) g->defaults.min_p = (float)json_number_value(v);
        /* transformers samples only with do_sample: true; an explicit false means greedy */
        if (json_is_false(json_object_get(root, "do_sample"))) g->defaults.temperature = 0;
    }
    if (!g->n_eos && info->eos_id >= 0) {
        free(g->eos);
        if (!(g->eos = malloc(sizeof *g->eos))) { st = g4_fail(G4_ERR_NOMEM, "out of memory"); goto out; }
        g->eos[0] = info->eos_id;
        g->n_eos = 1;
    }
out:
    json_decref(root);
    if (st) g4_gen_config_free(g);
    return st;
}

void g4_gen_config_free(g4_gen_config *g) {
    free(g->eos);
    free(g->suppress);
    g->eos = g->suppress = NULL;
    g->n_eos = g->n_suppress = 0;
}
