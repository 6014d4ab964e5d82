/* mtp.c — Gemma 4's MTP drafter beside a target model (mtp.h): loading and checking the HF
 * directory, and its forward pass as transformers' Gemma4UnifiedAssistantForCausalLM runs it,
 * in float32 with the target's kernel table:
 *   x = pre_projection([E_target[token] * sqrt(H_target), h])          h: target's final hidden
 *   every layer: the target's Gemma 4 layer without k/v (they reuse the target's K/V of the same
 *     layer type), the query at position n - 1 attending to the target's cache
 *   y = final_norm(x); logits = lm_head(y) (or the centroid-masked embedder); h' = post_projection(y)
 * and SinglePositionMultiTokenCandidateGenerator's loop around it: K steps at the same position,
 * each fed the previous step's argmax and h'. */
#include "model/mtp.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/hfconfig.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "model/rope.h"
#include "parallel/group.h"

typedef struct {
    int is_full, head_dim, n_kv;
    g4_mat q, o, gate, up, down;
    float *w_in, *w_post_attn, *w_pre_ffw, *w_post_ffw, *w_qnorm;
    float layer_scalar;
    const float *inv_freq;
    float rope_base;
    const g4_layer *src;        /* the target layer whose K/V this one reads (rank 0's) */
    int src_l;                  /* its index */
    /* under --tp the target's KV heads are split over its ranks: KV head g of this layer lives in
     * rank head_rno[g]'s cache as that rank's local head head_local[g]; head_rank[g] is that
     * rank's model when it is in this process (threads backend, or rank 0), else NULL (another
     * MPI process: the round gathers its rows into the drafter's copy, g4_mtp.remote) */
    g4_model **head_rank;       /* [n_kv] */
    int *head_rno;              /* [n_kv] */
    int *head_local;            /* [n_kv] */
} mtp_layer;

struct g4_mtp {
    g4_model *m;                /* the target (rank 0's handle under --tp) */
    g4_model **ranks;           /* the target's rank models in this process, rank 0 first [n_ranks] */
    int n_ranks;
    int tp;                     /* the target's ranks, in this process or (MPI) others */
    int mpi;                    /* the other ranks are other processes (--tp-backend mpi) */
    /* MPI: per layer type (0 sliding, 1 full), the KV of the target's source layer as another
     * rank holds it ([tp], laid out as that rank's cache region of the layer; NULL where this
     * process reads no head of that rank; the array NULL when it reads none), refreshed at the
     * start of every round */
    unsigned char **remote[2];
    g4_config cfg;              /* the drafter's text config */
    g4_tensor_set ts;
    int H, Hb, V, I, n_q, n_layers;
    int ordered, n_centroids, top_k;   /* use_ordered_embeddings: the masked embedder */
    int default_k;
    mtp_layer *layers;
    g4_mat embed, lm_head, pre, post, centroids;
    int32_t *ordering;          /* [V] canonical token of each ordered slot */
    float *w_final, *inv_freq_sliding, *inv_freq_full;
    g4_matmul_ctx *mm;
    /* scratch of one row */
    float *in, *x, *h, *t, *q, *att, *gate, *up, *hid, *cs, *scores, *logits, *cl, *sel;
    int *top;
    /* no state between rounds: several slots may share the drafter (g4_draft_ctx says all) */
};

/* ---------------------------------------------------------------- loading */

static g4_status bind(g4_mtp *d, const char *name, int rows, int cols, g4_mat *out) {
    g4_tensor *t = g4_st_find(&d->ts, name);
    if (!t) return g4_fail(G4_ERR_INPUT, "drafter: tensor '%s' is missing", name);
    if (t->int_bytes || t->n_dims != 2 || t->shape[0] != rows || t->shape[1] != cols)
        return g4_fail(G4_ERR_INPUT, "%s: drafter tensor '%s' must be a [%d, %d] float matrix", t->file, name, rows, cols);
    t->used = 1;
    *out = (g4_mat){.dt = t->dtype, .data = t->data, .rows = rows, .cols = cols};
    return G4_OK;
}

static g4_status bind_vec(g4_mtp *d, const char *name, int n, float **out) {
    g4_tensor *t = g4_st_find(&d->ts, name);
    if (!t) return g4_fail(G4_ERR_INPUT, "drafter: tensor '%s' is missing", name);
    if (t->int_bytes || t->n_dims != 1 || t->shape[0] != n)
        return g4_fail(G4_ERR_INPUT, "%s: drafter tensor '%s' must be a [%d] float vector", t->file, name, n);
    t->used = 1;
    if (!(*out = malloc((size_t)n * sizeof(float)))) return g4_fail(G4_ERR_NOMEM, "out of memory");
    g4_to_f32(t->dtype, t->data, (size_t)n, *out);
    return G4_OK;
}

static g4_status read_file(const char *path, char **buf, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return G4_ERR_IO;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *buf = n >= 0 && n < (1 << 24) ? malloc((size_t)n + 1) : NULL;
    *len = *buf ? fread(*buf, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!*buf) return g4_fail(G4_ERR_INPUT, "%s: unreadable or larger than 16 MiB", path);
    return G4_OK;
}

static int get_int(json_t *o, const char *key, int def) {
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (int)json_integer_value(v) : def;
}

/* config.json: the top-level assistant fields, and text_config through the target's parser
 * (hfconfig.c) as a text-only model — every assistant layer shares its KV (num_kv_shared_layers
 * = num_hidden_layers), which that parser refuses for a target, so that one key is checked here */
static g4_status parse_config(g4_mtp *d, const char *dir, int *double_wide) {
    char path[4096], *buf;
    size_t len;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (read_file(path, &buf, &len)) return g4_fail(G4_ERR_INPUT, "%s: cannot open (is '%s' a drafter directory?)", path, dir);
    json_error_t err;
    json_t *root = json_loadb(buf, len, 0, &err);
    free(buf);
    if (!root) return g4_fail(G4_ERR_INPUT, "%s: invalid JSON: %s (line %d)", path, err.text, err.line);
    g4_status st = G4_OK;
    const char *mt = json_string_value(json_object_get(root, "model_type"));
    json_t *tc = json_object_get(root, "text_config");
    if (!mt || strcmp(mt, "gemma4_unified_assistant")) {
        st = g4_fail(G4_ERR_INPUT, "%s: model_type '%s' is not a Gemma 4 MTP drafter (gemma4_unified_assistant)", path,
                     mt ? mt : "(none)");
        goto done;
    }
    if (!json_is_object(tc)) { st = g4_fail(G4_ERR_INPUT, "%s: required field 'text_config' is missing", path); goto done; }
    const int n_layers = get_int(tc, "num_hidden_layers", -1);
    const int shared = get_int(tc, "num_kv_shared_layers", 0);
    if (shared && shared != n_layers) {
        st = g4_fail(G4_ERR_INPUT, "%s: text_config.num_kv_shared_layers = %d: a drafter's layers must all reuse the "
                     "target's KV (%d)", path, shared, n_layers);
        goto done;
    }
    json_t *bw = json_object_get(root, "backbone_hidden_size"), *ue = json_object_get(root, "use_ordered_embeddings");
    d->Hb = json_is_integer(bw) ? (int)json_integer_value(bw) : 3840;   /* the config class defaults */
    d->ordered = json_is_true(ue);
    d->n_centroids = get_int(root, "num_centroids", 2048);
    d->top_k = get_int(root, "centroid_intermediate_top_k", 32);
    json_t *tie = json_object_get(root, "tie_word_embeddings");
    const int tied = tie ? json_is_true(tie) : 1;
    *double_wide = json_is_true(json_object_get(tc, "use_double_wide_mlp"));
    json_t *text = json_deep_copy(tc);
    json_object_set_new(text, "num_kv_shared_layers", json_integer(0));
    json_object_set_new(text, "architectures", json_pack("[s]", "Gemma4UnifiedForCausalLM"));
    json_object_set_new(text, "tie_word_embeddings", json_boolean(tied));
    char *txt = json_dumps(text, JSON_COMPACT);
    json_decref(text);
    st = txt ? g4_config_parse(txt, strlen(txt), path, &d->cfg) : g4_fail(G4_ERR_NOMEM, "out of memory");
    free(txt);
done:
    json_decref(root);
    return st;
}

/* generation_config.json's num_assistant_tokens; transformers' GenerationConfig default (20)
 * without one */
static g4_status parse_generation_config(const char *dir, int *k) {
    char path[4096], *buf;
    size_t len;
    *k = 20;
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    if (read_file(path, &buf, &len)) return G4_OK;
    json_error_t err;
    json_t *root = json_loadb(buf, len, 0, &err);
    free(buf);
    if (!root) return g4_fail(G4_ERR_INPUT, "%s: invalid JSON: %s (line %d)", path, err.text, err.line);
    json_t *v = json_object_get(root, "num_assistant_tokens");
    g4_status st = G4_OK;
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 256)
            st = g4_fail(G4_ERR_INPUT, "%s: num_assistant_tokens must be an integer in [1, 256]", path);
        else *k = (int)json_integer_value(v);
    }
    json_decref(root);
    return st;
}

g4_status g4_drafter_mtp_default_max(const char *dir, int *k) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return g4_fail(G4_ERR_INPUT, "%s: cannot open (is '%s' a drafter directory?)", path, dir);
    fclose(f);
    return parse_generation_config(dir, k);
}

/* The last non-shared layer of each type in the target: where transformers' Gemma 4 stores the
 * shared_kv_states the drafter reads (Gemma4UnifiedTextConfig.kv_sharing_modes "store"); the
 * target has no KV-shared layers (hfconfig.c refuses them), so: its last layer of each type. */
static const g4_layer *target_store_layer(const g4_model *m, int full) {
    for (int l = m->cfg.n_layers - 1; l >= 0; l--)
        if (m->layers[l].is_full == full) return &m->layers[l];
    return NULL;
}

static g4_status check_against_target(g4_mtp *d, const char *dir) {
    const g4_model *m = d->m;
    const g4_config *c = &d->cfg, *t = &m->cfg;
    if (c->vocab_size != t->vocab_size)
        return g4_fail(G4_ERR_INPUT, "%s: drafter vocabulary %d != the target's %d", dir, c->vocab_size, t->vocab_size);
    if (d->Hb != t->hidden_size)
        return g4_fail(G4_ERR_INPUT, "%s: backbone_hidden_size %d != the target's hidden_size %d", dir, d->Hb, t->hidden_size);
    if (c->sliding_window != t->sliding_window)
        return g4_fail(G4_ERR_INPUT, "%s: drafter sliding_window %d != the target's %d", dir, c->sliding_window,
                       t->sliding_window);
    for (int l = 0; l < c->n_layers; l++) {
        const g4_layer *src = target_store_layer(m, c->is_full[l]);
        const char *type = c->is_full[l] ? "full_attention" : "sliding_attention";
        if (!src)
            return g4_fail(G4_ERR_INPUT, "%s: drafter layer %d is %s, which the target has no layer of", dir, l, type);
        const int sl = (int)(src - m->layers);   /* the target's whole-model head count, not a rank's */
        if (src->head_dim != c->head_dim[l] || t->n_kv_heads[sl] != c->n_kv_heads[l])
            return g4_fail(G4_ERR_INPUT, "%s: drafter layer %d (%s) has head_dim %d and %d KV heads; the target's KV of "
                           "that type has %d and %d", dir, l, type, c->head_dim[l], c->n_kv_heads[l], src->head_dim,
                           t->n_kv_heads[sl]);
        /* the sliding set is the last window + 1 positions the target cached */
        if (!src->is_full && src->kv_cap < t->sliding_window + 1 && src->kv_cap < m->opts.ctx)
            return g4_fail(G4_ERR_INPUT, "--draft: the target's sliding KV ring holds %d positions, the drafter reads "
                           "window + 1 = %d (raise --prefill-chunk to 2 or more)", src->kv_cap, t->sliding_window + 1);
    }
    if (d->ordered && (d->n_centroids < 1 || c->vocab_size % d->n_centroids || d->top_k < 1 || d->top_k > d->n_centroids))
        return g4_fail(G4_ERR_INPUT, "%s: num_centroids %d must divide the vocabulary %d and "
                       "centroid_intermediate_top_k %d lie in [1, num_centroids]", dir, d->n_centroids, c->vocab_size, d->top_k);
    return G4_OK;
}

/* MPI: the drafter's copy of rank r's KV of the layer-type `full` source layer, sized as that
 * rank's cache region of the layer (the same on every rank: the plan splits KV heads evenly or
 * replicates them) */
static g4_status need_remote(g4_mtp *d, int full, int r) {
    const g4_layer *src = target_store_layer(d->m, full);
    if (!d->remote[full] && !(d->remote[full] = calloc((size_t)d->tp, sizeof *d->remote[full])))
        return g4_fail(G4_ERR_NOMEM, "out of memory");
    if (!d->remote[full][r] && !(d->remote[full][r] = calloc(2 * (size_t)src->n_kv * src->kv_cap, src->kv_row)))
        return g4_fail(G4_ERR_NOMEM, "out of memory for the drafter's copy of the target's KV");
    return G4_OK;
}

/* Where each KV head of layer L's source lives: the rank whose shard plan holds it (a head that
 * every rank replicates, as Gemma 4's single full-layer KV head under --tp 2, is read from the
 * first, so rank 0's own copy). One rank: all of them in rank 0's cache, in order. Under MPI the
 * plans of the other ranks are the same function of the configuration (tp_plan.h); the heads
 * only another process holds get a copy of that rank's KV (need_remote). */
static g4_status map_heads(g4_mtp *d, mtp_layer *L) {
    L->head_rank = malloc((size_t)L->n_kv * sizeof *L->head_rank);
    L->head_rno = malloc((size_t)L->n_kv * sizeof *L->head_rno);
    L->head_local = malloc((size_t)L->n_kv * sizeof *L->head_local);
    if (!L->head_rank || !L->head_rno || !L->head_local) return g4_fail(G4_ERR_NOMEM, "out of memory");
    g4_status st;
    for (int g = 0; g < L->n_kv; g++) {
        L->head_rno[g] = -1;
        for (int r = 0; r < d->tp && L->head_rno[g] < 0; r++) {
            g4_tp_plan p;
            if (!d->mpi) p = d->ranks[r]->plan;
            else if ((st = g4_tp_plan_make(&d->m->cfg, d->tp, r, &p))) return st;
            const int lo = p.kv_lo[L->src_l], n = p.kv_heads[L->src_l];
            if (g >= lo && g < lo + n) L->head_rno[g] = r, L->head_local[g] = g - lo;
        }
        if (L->head_rno[g] < 0)
            return g4_fail(G4_ERR_INPUT, "--draft: no rank of the target holds KV head %d of its layer %d", g, L->src_l);
        const int r = L->head_rno[g];
        L->head_rank[g] = d->mpi ? (r ? NULL : d->m) : d->ranks[r];
        if (!L->head_rank[g] && (st = need_remote(d, L->is_full, r))) return st;
    }
    return G4_OK;
}

static g4_status bind_all(g4_mtp *d, int double_wide) {
    const g4_config *c = &d->cfg;
    const int H = d->H, Hb = d->Hb, V = d->V;
    g4_status st;
    char name[256];
    d->I = c->intermediate_size * (double_wide ? 2 : 1);   /* every layer is KV-shared */
    if ((st = bind(d, "model.embed_tokens.weight", V, H, &d->embed)) ||
        (st = bind(d, "pre_projection.weight", H, 2 * Hb, &d->pre)) ||
        (st = bind(d, "post_projection.weight", Hb, H, &d->post)) ||
        (st = bind_vec(d, "model.norm.weight", H, &d->w_final)))
        return st;
    if (c->tie_word_embeddings) {
        d->lm_head = d->embed;
        g4_tensor *lm = g4_st_find(&d->ts, "lm_head.weight");
        if (lm) lm->used = 1;   /* a saved copy of the tied matrix */
    } else if ((st = bind(d, "lm_head.weight", V, H, &d->lm_head))) {
        return st;
    }
    if (d->ordered) {
        if ((st = bind(d, "masked_embedding.centroids.weight", d->n_centroids, H, &d->centroids))) return st;
        g4_tensor *t = g4_st_find(&d->ts, "masked_embedding.token_ordering");
        if (!t || !t->int_bytes || t->n_dims != 1 || t->shape[0] != V)
            return g4_fail(G4_ERR_INPUT, "drafter: use_ordered_embeddings needs an integer tensor "
                           "'masked_embedding.token_ordering' of [%d]", V);
        t->used = 1;
        if (!(d->ordering = malloc((size_t)V * sizeof(int32_t)))) return g4_fail(G4_ERR_NOMEM, "out of memory");
        for (int i = 0; i < V; i++) {
            int64_t v;
            if (t->int_bytes == 8) memcpy(&v, (const char *)t->data + 8 * (size_t)i, 8);
            else { int32_t v32; memcpy(&v32, (const char *)t->data + 4 * (size_t)i, 4); v = v32; }
            if (v < 0 || v >= V)
                return g4_fail(G4_ERR_INPUT, "%s: token_ordering[%d] = %lld is outside the vocabulary", t->file, i, (long long)v);
            d->ordering[i] = (int32_t)v;
        }
    }
    for (int l = 0; l < c->n_layers; l++) {
        mtp_layer *L = &d->layers[l];
        const int D = c->head_dim[l];
        L->is_full = c->is_full[l];
        L->head_dim = D;
        L->n_kv = c->n_kv_heads[l];
        L->src = target_store_layer(d->m, L->is_full);
        L->src_l = (int)(L->src - d->m->layers);
        if ((st = map_heads(d, L))) return st;
        L->inv_freq = L->is_full ? d->inv_freq_full : d->inv_freq_sliding;
        L->rope_base = (float)(L->is_full ? c->rope_full.theta : c->rope_sliding.theta);
        float *ls = NULL;
#define P(suffix) (snprintf(name, sizeof name, "model.layers.%d.%s", l, suffix), name)
        if ((st = bind(d, P("self_attn.q_proj.weight"), d->n_q * D, H, &L->q)) ||
            (st = bind(d, P("self_attn.o_proj.weight"), H, d->n_q * D, &L->o)) ||
            (st = bind(d, P("mlp.gate_proj.weight"), d->I, H, &L->gate)) ||
            (st = bind(d, P("mlp.up_proj.weight"), d->I, H, &L->up)) ||
            (st = bind(d, P("mlp.down_proj.weight"), H, d->I, &L->down)) ||
            (st = bind_vec(d, P("self_attn.q_norm.weight"), D, &L->w_qnorm)) ||
            (st = bind_vec(d, P("input_layernorm.weight"), H, &L->w_in)) ||
            (st = bind_vec(d, P("post_attention_layernorm.weight"), H, &L->w_post_attn)) ||
            (st = bind_vec(d, P("pre_feedforward_layernorm.weight"), H, &L->w_pre_ffw)) ||
            (st = bind_vec(d, P("post_feedforward_layernorm.weight"), H, &L->w_post_ffw)) ||
            (st = bind_vec(d, P("layer_scalar"), 1, &ls)))
            return st;
#undef P
        L->layer_scalar = ls[0];
        free(ls);
    }
    for (int i = 0; i < d->ts.n_tensors; i++)
        if (!d->ts.tensors[i].used)
            return g4_fail(G4_ERR_INPUT, "%s: unexpected drafter tensor '%s' (k/v projections? a drafter's layers "
                           "reuse the target's KV)", d->ts.tensors[i].file, d->ts.tensors[i].name);
    return G4_OK;
}

static g4_status alloc_scratch(g4_mtp *d) {
    const g4_config *c = &d->cfg;
    int maxD = 0;
    for (int l = 0; l < c->n_layers; l++) maxD = c->head_dim[l] > maxD ? c->head_dim[l] : maxD;
    const size_t H = (size_t)d->H, Q = (size_t)d->n_q * maxD;
    d->in = malloc(2 * (size_t)d->Hb * sizeof(float));
    d->x = malloc(H * sizeof(float));
    d->h = malloc(H * sizeof(float));
    d->t = malloc(H * sizeof(float));
    d->q = malloc(Q * sizeof(float));
    d->att = malloc(Q * sizeof(float));
    d->gate = malloc((size_t)d->I * sizeof(float));
    d->up = malloc((size_t)d->I * sizeof(float));
    d->hid = malloc((size_t)d->Hb * sizeof(float));
    d->cs = malloc((size_t)maxD * sizeof(float));
    d->scores = malloc((size_t)d->n_q * ((size_t)d->m->opts.ctx + 1) * sizeof(float));   /* [G][span] */
    d->logits = malloc((size_t)d->V * sizeof(float));
    if (d->ordered) {
        d->cl = malloc((size_t)d->n_centroids * sizeof(float));
        d->sel = malloc((size_t)d->V * sizeof(float));
        d->top = malloc((size_t)d->top_k * sizeof(int));
    }
    if (!d->in || !d->x || !d->h || !d->t || !d->q || !d->att || !d->gate || !d->up || !d->hid || !d->cs ||
        !d->scores || !d->logits || (d->ordered && (!d->cl || !d->sel || !d->top)))
        return g4_fail(G4_ERR_NOMEM, "out of memory for the drafter's scratch");
    size_t K = 2 * (size_t)d->Hb;
    if (H > K) K = H;
    if (Q > K) K = Q;
    if ((size_t)d->I > K) K = (size_t)d->I;
    g4_matmul_policy policy;
    g4_matmul_policy_init(&policy, d->m->k, &d->m->opts.tuning);
    return g4_matmul_ctx_new(d->m->k, d->m->pool, &policy, 1, (int)K, 0, 0, d->m->opts.numerics == G4_NUMERICS_GGML,
                             &d->mm);
}

g4_status g4_mtp_load(const char *dir, g4_model *target, g4_mtp **out) {
    *out = NULL;
    g4_mtp *d = calloc(1, sizeof *d);
    if (!d) return g4_fail(G4_ERR_NOMEM, "out of memory");
    d->m = target;
    int double_wide = 0;
    g4_status st;
    d->n_ranks = g4_group_rank_models(target, NULL);   /* 0 under MPI: the other ranks are other processes */
    d->mpi = !d->n_ranks;
    d->tp = d->mpi ? target->plan.tp : d->n_ranks;
    if (d->n_ranks && !(d->ranks = malloc((size_t)d->n_ranks * sizeof *d->ranks))) {
        st = g4_fail(G4_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (d->n_ranks) g4_group_rank_models(target, d->ranks);
    if ((st = parse_config(d, dir, &double_wide)) || (st = parse_generation_config(dir, &d->default_k))) goto fail;
    d->H = d->cfg.hidden_size;
    d->V = d->cfg.vocab_size;
    d->n_q = d->cfg.n_heads;
    d->n_layers = d->cfg.n_layers;
    if ((st = check_against_target(d, dir))) goto fail;
    int Ds = 0, Df = 0;
    for (int l = 0; l < d->n_layers; l++) *(d->cfg.is_full[l] ? &Df : &Ds) = d->cfg.head_dim[l];
    d->inv_freq_sliding = Ds ? g4_rope_inv_freq(&d->cfg.rope_sliding, Ds) : NULL;
    d->inv_freq_full = Df ? g4_rope_inv_freq(&d->cfg.rope_full, Df) : NULL;
    d->layers = calloc((size_t)d->n_layers, sizeof *d->layers);
    if (!d->layers || (Ds && !d->inv_freq_sliding) || (Df && !d->inv_freq_full)) {
        st = g4_fail(G4_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((st = g4_st_open_dir(dir, &d->ts)) || (st = bind_all(d, double_wide)) || (st = alloc_scratch(d))) goto fail;
    *out = d;
    return G4_OK;
fail:
    g4_mtp_free(d);
    return st;
}

void g4_mtp_free(g4_mtp *d) {
    if (!d) return;
    for (int l = 0; d->layers && l < d->n_layers; l++) {
        mtp_layer *L = &d->layers[l];
        free(L->w_in), free(L->w_post_attn), free(L->w_pre_ffw), free(L->w_post_ffw), free(L->w_qnorm);
        free(L->head_rank), free(L->head_rno), free(L->head_local);
    }
    for (int t = 0; t < 2; t++)
        for (int r = 0; d->remote[t] && r < d->tp; r++) free(d->remote[t][r]);
    free(d->remote[0]), free(d->remote[1]);
    free(d->ranks);
    free(d->layers);
    free(d->ordering), free(d->w_final), free(d->inv_freq_sliding), free(d->inv_freq_full);
    free(d->in), free(d->x), free(d->h), free(d->t), free(d->q), free(d->att), free(d->gate), free(d->up);
    free(d->hid), free(d->cs), free(d->scores), free(d->logits), free(d->cl), free(d->sel), free(d->top);
    if (d->mm) g4_matmul_ctx_free(d->mm);
    g4_st_close(&d->ts);
    free(d);
}

int g4_mtp_default_k(const g4_mtp *d) { return d->default_k; }
int g4_mtp_vocab(const g4_mtp *d) { return d->V; }

/* ---------------------------------------------------------------- the forward pass */

static void matmul1(g4_mtp *d, const g4_mat *w, const float *x, float *y) {
    g4_mm_op op = {w, x, y, w->rows};
    g4_matmul(d->mm, 1, 1, &op);
}

/* The target positions each layer type attends to, as transformers hands them over: the
 * shared_kv_states of the target's last forward (the prefill, or the verify step of the previous
 * round, which wrote kv_written positions starting at `start`), sliced to the first n entries;
 * full layers: all of them; sliding layers: the last window + 1 of what that layer returned (its
 * DynamicSlidingWindowLayer keeps window - 1 positions before a forward, so it returned positions
 * [start - window + 1, kv_written); the assistant's flipped bidirectional window keeps the last
 * window + 1). Rejected drafts' entries at the tail are attended, as transformers does. */
static void draft_window(const g4_mtp *d, const g4_draft_ctx *c, int full, int *lo, int *hi) {
    const int W = d->cfg.sliding_window, kw = c->kv_written;
    if (full) {
        *lo = 0;
        *hi = (kw < c->n ? kw : c->n) - 1;
        return;
    }
    /* the forward's first position: 0 for the prefill; the previous round's newest token for
     * its verify step (or a one-row step's) */
    const int start = c->step_start;
    const int a = start - (W - 1) > 0 ? start - (W - 1) : 0;
    const int e = kw < a + c->n ? kw : a + c->n;
    *lo = e - (W + 1) > a ? e - (W + 1) : a;
    *hi = e - 1;
}

static int argmax_first(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* transformers' Gemma4UnifiedAssistantMaskedEmbedder: the top-k centroids' token clusters get
 * y · lm_head[token]; every other token min(those) - 1 */
static void masked_logits(g4_mtp *d, const float *y) {
    const int C = d->n_centroids, per = d->V / C, k = d->top_k;
    matmul1(d, &d->centroids, y, d->cl);
    for (int i = 0; i < k; i++) {   /* top-k by value (the set is what matters, not the order) */
        int b = -1;
        for (int j = 0; j < C; j++) {
            int taken = 0;
            for (int u = 0; u < i && !taken; u++) taken = d->top[u] == j;
            if (!taken && (b < 0 || d->cl[j] > d->cl[b])) b = j;
        }
        d->top[i] = b;
    }
    float lo = INFINITY;
    const size_t rb = g4_dtype_row_bytes(d->lm_head.dt, d->H);
    for (int i = 0; i < k; i++)
        for (int j = 0; j < per; j++) {
            const int tok = d->ordering[d->top[i] * per + j];
            g4_to_f32(d->lm_head.dt, (const char *)d->lm_head.data + (size_t)tok * rb, (size_t)d->H, d->t);
            const float v = d->m->k->dot(y, d->t, d->H);
            d->sel[i * per + j] = v;
            if (v < lo) lo = v;
        }
    for (int i = 0; i < d->V; i++) d->logits[i] = lo - 1.0f;
    for (int i = 0; i < k; i++)
        for (int j = 0; j < per; j++) d->logits[d->ordering[d->top[i] * per + j]] = d->sel[i * per + j];
}

/* The target's embedding row of `tok`, unscaled, into out [Hb]: from the rank whose
 * vocab-parallel slice holds it (the forward pass all-reduces that rank's row with the others'
 * zeros, so reading it directly is exact); under MPI a row another process holds comes over the
 * group (g4_group_embed_row). */
static g4_status target_embed_row(const g4_mtp *d, int32_t tok, float *out) {
    const g4_model *em = d->m;
    for (int r = 0; r < d->n_ranks; r++)
        if (tok >= d->ranks[r]->plan.vocab_lo && tok < d->ranks[r]->plan.vocab_hi) em = d->ranks[r];
    if (d->mpi && (tok < em->plan.vocab_lo || tok >= em->plan.vocab_hi)) return g4_group_embed_row(d->m, tok, out);
    g4_to_f32(em->embed.dt, (const char *)em->embed.data + (size_t)(tok - em->plan.vocab_lo) *
              g4_dtype_row_bytes(em->embed.dt, d->Hb), (size_t)d->Hb, out);
    return G4_OK;
}

/* MPI, at the start of a round: the rows this round attends to of the KV heads that other
 * processes hold, into the drafter's copies (d->remote) */
static g4_status gather_remote(g4_mtp *d, const g4_draft_ctx *c) {
    for (int t = 0; t < 2; t++) {
        if (!d->remote[t]) continue;
        int lo, hi;
        draft_window(d, c, t, &lo, &hi);
        const int src_l = (int)(target_store_layer(d->m, t) - d->m->layers);
        g4_status st = hi >= lo ? g4_group_gather_kv(d->m, c->slot, src_l, lo, hi, d->remote[t]) : G4_OK;
        if (st) return st;
    }
    return G4_OK;
}

/* One drafter step at position `pos` from token `tok` and backbone hidden d->hid: d->logits, and
 * d->hid becomes the projected last hidden state for the next step. */
static g4_status step(g4_mtp *d, const g4_draft_ctx *c, int32_t tok, int pos) {
    const g4_model *m = d->m;
    const g4_kernels *k = m->k;
    const int H = d->H, Hb = d->Hb;
    const float eps = d->cfg.rms_norm_eps;
    /* [target embedding * sqrt(H_target), hidden] → pre_projection */
    g4_status st = target_embed_row(d, tok, d->in);   /* under --tp the rank holding the row */
    if (st) return st;
    for (int i = 0; i < Hb; i++) d->in[i] *= m->embed_scale;
    memcpy(d->in + Hb, d->hid, (size_t)Hb * sizeof(float));
    matmul1(d, &d->pre, d->in, d->x);
    for (int l = 0; l < d->n_layers; l++) {
        const mtp_layer *L = &d->layers[l];
        const int D = L->head_dim, G = d->n_q / L->n_kv, cap = L->src->kv_cap;
        k->rmsnorm(d->x, L->w_in, eps, H, d->h);
        matmul1(d, &L->q, d->h, d->q);
        k->rope_table(L->rope_base, L->inv_freq, D, pos, d->cs);
        int lo, hi;
        draft_window(d, c, L->is_full, &lo, &hi);
        for (int hh = 0; hh < d->n_q; hh++) {
            float *qh = d->q + (size_t)hh * D;
            k->rmsnorm(qh, L->w_qnorm, eps, D, qh);
            k->rope_apply(qh, d->cs, D);
        }
        /* the target's attention kernel, one block of the G query heads sharing each KV head */
        const size_t row = L->src->kv_row;   /* bytes of one cached K or V row (--kv-type) */
        for (int g = 0; g < L->n_kv; g++) {
            /* KV head g in the cache of the rank holding it (rank 0's own without --tp), or in
             * this round's copy of it from another process */
            const g4_model *rm = L->head_rank[g];
            const g4_layer *RL = rm ? &rm->layers[L->src_l] : L->src;   /* n_kv and cap: the same on every rank */
            const unsigned char *K0 = rm ? g4_slot_k(rm, c->slot, RL) : d->remote[L->is_full][L->head_rno[g]];
            const unsigned char *V0 = K0 + (size_t)RL->n_kv * cap * row;
            const size_t kv = (size_t)L->head_local[g] * cap * row, qo = (size_t)g * G * D;
            if (m->attend_kv)
                m->attend_kv(m->opts.kv_type, d->q + qo, D, d->att + qo, D, G, 1, &lo, &hi, K0 + kv, V0 + kv, cap, D,
                             1.0f, d->scores);
            else
                k->attend_block(d->q + qo, D, d->att + qo, D, G, 1, &lo, &hi, (const float *)(K0 + kv),
                                (const float *)(V0 + kv), cap, D, 1.0f, d->scores, 0);
        }
        matmul1(d, &L->o, d->att, d->t);
        k->rmsnorm(d->t, L->w_post_attn, eps, H, d->t);
        for (int i = 0; i < H; i++) d->x[i] += d->t[i];
        k->rmsnorm(d->x, L->w_pre_ffw, eps, H, d->h);
        g4_mm_op ops[2] = {{&L->gate, d->h, d->gate, d->I}, {&L->up, d->h, d->up, d->I}};
        g4_matmul(d->mm, 1, 2, ops);
        k->gelu_mul(d->gate, d->up, d->I, d->gate);
        matmul1(d, &L->down, d->gate, d->t);
        k->rmsnorm(d->t, L->w_post_ffw, eps, H, d->t);
        for (int i = 0; i < H; i++) d->x[i] = (d->x[i] + d->t[i]) * L->layer_scalar;
    }
    k->rmsnorm(d->x, d->w_final, eps, H, d->h);
    matmul1(d, &d->post, d->h, d->hid);
    if (d->ordered) masked_logits(d, d->h);
    else matmul1(d, &d->lm_head, d->h, d->logits);
    return G4_OK;
}

int g4_mtp_draft(g4_mtp *d, const g4_draft_ctx *c, int max_draft, int32_t *out, float *logits) {
    if (c->target != d->m) return g4_fail(G4_ERR_INPUT, "drafter: called with another target model"), -1;
    if (!c->hidden) return g4_fail(G4_ERR_INPUT, "drafter: the MTP drafter needs the target's hidden state"), -1;
    if (c->slot < 0 || c->slot >= d->m->opts.n_slots || c->kv_written > d->m->opts.ctx)
        return g4_fail(G4_ERR_INPUT, "drafter: slot %d / %d positions outside the target's %d slots of %d", c->slot,
                       c->kv_written, d->m->opts.n_slots, d->m->opts.ctx), -1;
    if (c->n < 1 || c->kv_written < c->n - 1 || c->tokens[c->n - 1] < 0 || c->tokens[c->n - 1] >= d->V ||
        c->step_start < 0 || (c->kv_written > 0 && c->step_start >= c->kv_written))
        return g4_fail(G4_ERR_INPUT, "drafter: inconsistent round (n %d, kv_written %d, step_start %d)", c->n,
                       c->kv_written, c->step_start), -1;
    if (c->kv_written < 1 || max_draft <= 0) return 0;
    if (gather_remote(d, c)) return -1;
    memcpy(d->hid, c->hidden, (size_t)d->Hb * sizeof(float));
    int32_t tok = c->tokens[c->n - 1];
    int k = 0;
    for (; k < max_draft; k++) {
        if (step(d, c, tok, c->n - 1)) return -1;
        tok = argmax_first(d->logits, d->V);
        out[k] = tok;
        if (logits) memcpy(logits + (size_t)k * d->V, d->logits, (size_t)d->V * sizeof(float));
    }
    return k;
}

/* ---------------------------------------------------------------- the drafter interface */

static int propose(g4_drafter *dr, const g4_draft_ctx *c, int max_draft, int32_t *out) {
    return g4_mtp_draft(dr->impl, c, max_draft, out, NULL);
}
static void drafter_free(g4_drafter *dr) {
    if (!dr) return;
    g4_mtp_free(dr->impl);
    free(dr);
}

g4_status g4_drafter_mtp_new(const char *dir, g4_model *target, g4_drafter **out) {
    *out = NULL;
    g4_mtp *d;
    g4_status st = g4_mtp_load(dir, target, &d);
    if (st) return st;
    g4_drafter *dr = calloc(1, sizeof *dr);
    if (!dr) {
        g4_mtp_free(d);
        return g4_fail(G4_ERR_NOMEM, "out of memory");
    }
    *dr = (g4_drafter){.propose = propose, .free = drafter_free, .needs_hidden = 1,
                       .default_max = d->default_k, .impl = d};
    *out = dr;
    return G4_OK;
}
