/* load.c — a model handle's life: options' defaults, loading one rank (config → mapped weights →
 * this rank's shards → RoPE tables → KV cache, scratch and matmul context, all sized once), the
 * public load that starts one rank or a tensor-parallel group (parallel/group.c), free and info.
 * The weight binding is weights.c's / gguf_bind.c's, the slicing shard.c's, steps session.c's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/gguf.h"
#include "io/pack.h"
#include "io/source.h"
#include "model/mmproj.h"
#include "model/model.h"
#include "model/rope.h"
#include "parallel/group.h"

void g4_model_opts_default(g4_model_opts *o) {
    o->threads = 0;
    o->ctx = 4096;
    o->n_slots = 1;
    /* A prefill step packs (widens) every weight panel once and reads every weight once, so
     * longer steps amortize both over more rows: 256 rather than 64 on long prompts, at the cost of
     * window + 192 more positions in each sliding layer's KV ring and 4x the activation scratch.
     * The server keeps 64 (server.c). */
    o->prefill_chunk = 256;
    o->tp = 1;
    o->tp_backend = G4_TP_THREADS;
    o->tp_timeout_ms = 30000;
    o->no_mmap = 0;
    o->act_q8 = 0;
    o->numerics = G4_NUMERICS_EXACT;
    o->prefill_bf16 = 0;
    o->mmproj = NULL;
    o->verify_rows = 0;
    o->kv_type = G4_KV_F32;
    o->tuning = (g4_tuning){.amx_pairs_rows = -1, .amx_gemv_min_rows = -1, .amx_gemv_max_rows = -1,
                            .amx_gemv1_k_below = -1, .profile = -1, .full_logits = -1};
}

static g4_status alloc_state(g4_model *m) {
    const g4_config *c = &m->cfg;
    const int S = m->opts.n_slots, ctx = m->opts.ctx;
    m->max_rows = m->opts.prefill_chunk > S ? m->opts.prefill_chunk : S;
    /* a verify step's rows run as one step of one slot: the rings' slack must cover them too */
    if (m->opts.verify_rows > m->max_rows) m->max_rows = m->opts.verify_rows;
    m->logit_rows = m->opts.verify_rows > S ? m->opts.verify_rows : S;
    int maxD = 0, maxKV = 0, maxQ = 0;
    size_t off = 0;
    for (int l = 0; l < c->n_layers; l++) {
        g4_layer *L = &m->layers[l];
        /* A sliding ring needs window + chunk - 1 positions so that writing a whole prefill
         * chunk never overwrites keys that an earlier row of the same chunk still reads. */
        int ring = c->sliding_window + m->max_rows - 1;
        L->kv_cap = L->is_full || ring > ctx ? ctx : ring;
        L->kv_row = g4_kv_row_bytes(m->opts.kv_type, L->head_dim);
        if (!L->kv_row)
            return g4_fail(G4_ERR_INPUT, "--kv-type %s needs head sizes that are multiples of %d (layer %d has %d)",
                           g4_kv_type_name(m->opts.kv_type), G4_KV_QK, l, L->head_dim);
        L->kv_offset = off;
        off += 2 * (size_t)L->n_kv * L->kv_cap * L->kv_row;
        L->inv_freq = L->is_full ? m->inv_freq_full : m->inv_freq_sliding;
        L->rope_base = (float)(L->is_full ? c->rope_full.theta : c->rope_sliding.theta);
        if (L->head_dim > maxD) maxD = L->head_dim;
        if (L->n_kv * L->head_dim > maxKV) maxKV = L->n_kv * L->head_dim;
        if (L->n_q * L->head_dim > maxQ) maxQ = L->n_q * L->head_dim;
    }
    m->slot_bytes = off;
    m->info.kv_bytes = off * (size_t)S;
    m->kv = calloc(off * (size_t)S, 1);   /* untouched pages cost no RSS */
    m->slot_pos = calloc((size_t)S, sizeof(int));
    m->slot_hi = calloc((size_t)S, sizeof(int));
    const size_t R = (size_t)m->max_rows, H = (size_t)c->hidden_size, I = (size_t)c->intermediate_size;
    m->x = malloc(R * H * sizeof(float));
    m->h = malloc(R * H * sizeof(float));
    m->tmp = malloc(R * H * sizeof(float));
    m->q = malloc(R * maxQ * sizeof(float));
    m->att = malloc(R * maxQ * sizeof(float));
    m->kk = malloc(R * maxKV * sizeof(float));
    m->vv = malloc(R * maxKV * sizeof(float));
    m->gate = malloc(R * I * sizeof(float));
    m->up = malloc(R * I * sizeof(float));
    m->rope_cs = malloc(R * maxD * sizeof(float));
    /* attend_block's scores: one row per (head, position) of a block over at most ctx keys */
    m->att_rows = (1 << 20) / ctx < 1 ? 1 : (1 << 20) / ctx > G4_ATT_ROWS_MAX ? G4_ATT_ROWS_MAX : (1 << 20) / ctx;
    m->scores = malloc((size_t)g4_pool_size(m->pool) * m->att_rows * ctx * sizeof(float));
    m->lg = malloc((size_t)m->logit_rows * m->vmax * sizeof(float));
    m->cmd = malloc(g4_group_cmd_bytes(m->max_rows));   /* the step rank 0 broadcasts */
    /* the widest matmul input: hidden (q/k/v, gate/up), attention output (o), intermediate (down) */
    size_t K = H > (size_t)maxQ ? H : (size_t)maxQ;
    if (I > K) K = I;
    g4_matmul_policy policy;
    g4_matmul_policy_init(&policy, m->k, &m->opts.tuning);
    g4_status st = g4_matmul_ctx_new(m->k, m->pool, &policy, m->max_rows, (int)K, m->opts.act_q8, m->opts.prefill_bf16,
                                     m->opts.numerics == G4_NUMERICS_GGML, &m->mm);
    if (st) return st;
    if (m->comm && m->comm->rank == 0) m->lg_all = malloc((size_t)m->plan.tp * m->logit_rows * m->vmax * sizeof(float));
    if (!m->kv || !m->slot_pos || !m->slot_hi || !m->x || !m->h || !m->tmp || !m->q || !m->att || !m->kk || !m->vv ||
        !m->gate || !m->up || !m->rope_cs || !m->scores || !m->lg || !m->cmd || (m->comm && !m->comm->rank && !m->lg_all))
        return g4_fail(G4_ERR_NOMEM, "out of memory allocating the KV cache (%zu MiB) and scratch for ctx %d x %d slots",
                       m->info.kv_bytes >> 20, ctx, S);
    return G4_OK;
}

/* --act-q8 (and --numerics ggml, which implies it) multiplies int8 activations by the weight types
 * that have an int8 kernel; a quantized matrix of another type would silently stay exact */
static g4_status check_act_q8(const g4_model *m) {
    if (!m->opts.act_q8) return G4_OK;
    const char *flag = m->opts.numerics == G4_NUMERICS_GGML ? "--numerics ggml" : "--act-q8";
    for (int l = 0; l <= m->cfg.n_layers; l++)
        for (int i = 0; i < (l < m->cfg.n_layers ? G4_LAYER_MATS : 1); i++) {
            const g4_mat *w = l < m->cfg.n_layers ? g4_layer_mat(&m->layers[l], i) : &m->lm_head;
            if (w->data && g4_dtype_is_quant(w->dt) && !m->k->matmul_q8[w->dt])
                return g4_fail(G4_ERR_INPUT, "%s: the %s %s weights have no int8 kernel; run this model without it", flag,
                               l < m->cfg.n_layers ? "layer" : "LM head", g4_dtype_name(w->dt));
        }
    return G4_OK;
}

static int online_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* One rank: config, its shard of the weights, its KV cache and its worker threads. */
g4_status g4_load_rank(const char *path, const g4_model_opts *o, int rank, g4_comm *comm, g4_model **out) {
    *out = NULL;
    const int tp = comm ? comm->size : 1;
    g4_model *m = calloc(1, sizeof *m);
    if (!m) return g4_fail(G4_ERR_NOMEM, "out of memory");
    m->opts = *o;
    m->opts.tp = tp;
    m->prof = o->tuning.profile > 0;
    m->comm = comm;
    g4_status st;
    if (!(m->k = g4_kernels_get())) { st = G4_ERR_INPUT; goto fail; }
    if (o->numerics == G4_NUMERICS_GGML && o->prefill_bf16) {
        st = g4_fail(G4_ERR_INPUT, "--prefill-bf16 and --numerics ggml exclude each other (llama.cpp's arithmetic has no bf16 prefill)");
        goto fail;
    }
    if (!g4_kv_type_name(o->kv_type)) {
        st = g4_fail(G4_ERR_INPUT, "kv_type %d is not one of f32, bf16, f16, q8_0", o->kv_type);
        goto fail;
    }
    if (o->numerics == G4_NUMERICS_GGML && o->kv_type != G4_KV_F32) {
        st = g4_fail(G4_ERR_INPUT, "--kv-type %s and --numerics ggml exclude each other (its attention reads an f32 cache)",
                     g4_kv_type_name(o->kv_type));
        goto fail;
    }
    if (o->numerics == G4_NUMERICS_GGML) {
        /* llama.cpp's CPU arithmetic: its int8 activations (--act-q8), and its rms norm, fp16-table
         * GELU, RoPE cache, attention and softcap in this rank's kernel table */
        m->opts.act_q8 = 1;
        g4_kernels_ggml(m->k, &m->kt);
        m->k = &m->kt;
    }
    if (o->kv_type != G4_KV_F32) m->attend_kv = m->k->attend_kv;
    g4_source *src;
    if ((st = g4_source_open(path, &src))) goto fail;
    const g4_source_kind kind = g4_source_kind_of(src);
    if (kind == G4_SOURCE_FILE) st = g4_source_not_a_model(src);
    g4_source_close(src);
    if (st) goto fail;
    if (kind == G4_SOURCE_GGUF) {   /* one .gguf file: config, weights (and tokenizer) inside */
        if ((st = g4_gguf_model_bind(m, path))) goto fail;
        /* --mmproj: the embedders are rank 0's; every rank takes the config (the image mask) */
        if (o->mmproj && (st = g4_mmproj_bind(m, o->mmproj, rank == 0))) goto fail;
        if ((st = g4_tp_plan_make(&m->cfg, tp, rank, &m->plan))) goto fail;
    } else if (kind == G4_SOURCE_PACK) {   /* a .g4c: config inside, this rank's shard mapped alone */
        const char *cj;
        size_t cj_len;
        if ((st = g4_pack_open(path, rank, &m->pack))) goto fail;
        if (g4_pack_tp(m->pack) != tp) {
            st = g4_fail(G4_ERR_INPUT, "%s was packed for --tp %d; it cannot be loaded with --tp %d (repack it with gemma4c pack --tp %d)",
                         path, g4_pack_tp(m->pack), tp, tp);
            goto fail;
        }
        if ((st = g4_pack_file(m->pack, "config.json", &cj, &cj_len)) || (st = g4_config_parse(cj, cj_len, path, &m->cfg)) ||
            (st = g4_tp_plan_make(&m->cfg, tp, rank, &m->plan)) || (st = g4_pack_tensors(m->pack, &m->ts)))
            goto fail;
        m->presharded = 1;
        if ((st = g4_weights_bind(m))) goto fail;
        /* the pack keeps the embedders in rank 0's segment alone */
        if (rank == 0 && ((st = g4_vision_bind(m)) || (st = g4_audio_bind(m)))) goto fail;
    } else {   /* a HuggingFace checkpoint directory */
        if ((st = g4_config_load(path, &m->cfg))) goto fail;
        if ((st = g4_tp_plan_make(&m->cfg, tp, rank, &m->plan))) goto fail;
        if ((st = g4_st_open_dir(path, &m->ts))) goto fail;
        if ((st = g4_weights_bind(m))) goto fail;
        /* the image embedder is rank 0's, which prepares prompts */
        if (rank == 0 && ((st = g4_vision_bind(m)) || (st = g4_audio_bind(m)))) goto fail;
    }
    const g4_config *c = &m->cfg;
    for (int t = 0; t < m->ts.n_tensors; t++) m->info.weight_bytes += m->ts.tensors[t].nbytes;
    m->vmax = (c->vocab_size + tp - 1) / tp;
    /* Read through the file mapping, the weights are only as contiguous as the page cache holds
     * them: where the kernel cached part of a file in 4 KiB pages (it falls back to small folios
     * when a 2 MiB one is not free at read time, and a file cached earlier keeps its pages), every
     * weight stream is cut at each 4 KiB page, and decode runs slower than from a copy in
     * huge pages. Unless --mmap forbids it, the small
     * windows are re-read in 2 MiB pages (g4_map_rehuge), and weights still mostly small after
     * that are copied into huge-page memory as --no-mmap does. */
    if (o->no_mmap == 0 && (tp == 1 || m->presharded) && g4_weights_mapped_small(m)) m->info.weights_copied = 1;
    if ((tp > 1 && !m->presharded) || o->no_mmap > 0 || m->info.weights_copied) {
        /* copy this rank's slices into its own memory, then let the checkpoint mapping go */
        if ((st = g4_model_shard(m))) goto fail;
        g4_st_close(&m->ts);
        memset(&m->ts, 0, sizeof m->ts);
        g4_pack_close(m->pack);
        m->pack = NULL;
    }
    for (int l = 0; l < c->n_layers; l++) {
        g4_layer *L = &m->layers[l];
        L->n_q = m->plan.q_heads;
        L->n_kv = m->plan.kv_heads[l];
        for (int i = 0; i < G4_LAYER_MATS; i++) m->local_weight_bytes += g4_mat_bytes(g4_layer_mat(L, i));
    }
    if ((st = check_act_q8(m))) goto fail;
    m->local_weight_bytes += g4_mat_bytes(&m->embed);
    if (m->lm_head.data != m->embed.data) m->local_weight_bytes += g4_mat_bytes(&m->lm_head);
    if (m->presharded) m->info.weight_bytes = m->local_weight_bytes;
    int Dsl = 0, Dfull = 0;
    for (int l = 0; l < c->n_layers; l++) *(c->is_full[l] ? &Dfull : &Dsl) = c->head_dim[l];
    m->inv_freq_sliding = g4_rope_inv_freq(&c->rope_sliding, Dsl ? Dsl : 2);
    m->inv_freq_full = g4_rope_inv_freq(&c->rope_full, Dfull ? Dfull : 2);
    m->embed_scale = (float)sqrt((double)c->hidden_size);   /* float32 in the float32 reference */
    /* threads <= 0: all online CPUs, shared out among the ranks of this process */
    int threads = o->threads > 0 ? o->threads : online_cpus();
    int sharing = comm && o->tp_backend == G4_TP_THREADS ? tp : 1;
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");   /* MPI ranks on this host */
    if (comm && o->tp_backend == G4_TP_MPI && o->threads <= 0 && local && atoi(local) > 0) sharing = atoi(local);
    threads = threads / sharing > 0 ? threads / sharing : 1;
    if (!(m->pool = g4_pool_new(threads))) { st = g4_fail(G4_ERR_RUNTIME, "cannot start worker threads"); goto fail; }
    if (!m->inv_freq_sliding || !m->inv_freq_full) { st = g4_fail(G4_ERR_NOMEM, "out of memory"); goto fail; }
    if ((st = alloc_state(m))) goto fail;
    g4_model_info *i = &m->info;
    i->vocab_size = c->vocab_size;
    i->hidden_size = c->hidden_size;
    i->n_layers = c->n_layers;
    i->ctx = o->ctx;
    i->n_slots = o->n_slots;
    i->verify_rows = o->verify_rows;
    i->bos_id = c->bos_id;
    i->eos_id = c->n_eos ? c->eos_ids[0] : -1;
    i->pad_id = c->pad_id;
    /* --numerics ggml applies the softcap inside the forward pass, as llama.cpp's graph does */
    i->final_logit_softcap = o->numerics == G4_NUMERICS_GGML ? 0.0f : c->final_logit_softcap;
    i->architecture = c->architecture;
    i->tp = tp;
    *out = m;
    return G4_OK;
fail:
    m->comm = NULL;   /* the caller owns the communicator until the rank is up */
    g4_model_free(m);
    return st;
}

g4_status g4_model_load(const char *path, const g4_model_opts *opts, g4_model **out) {
    *out = NULL;
    g4_model_opts o;
    g4_model_opts_default(&o);
    if (opts) o = *opts;
    if (o.ctx <= 0 || o.n_slots <= 0 || o.prefill_chunk <= 0)
        return g4_fail(G4_ERR_INPUT, "ctx, n_slots and prefill_chunk must be positive");
    if (o.verify_rows < 0 || o.verify_rows > 1 << 16)
        return g4_fail(G4_ERR_INPUT, "verify_rows %d must be in [0, 65536]", o.verify_rows);
    if (o.tp_backend != G4_TP_THREADS && o.tp_backend != G4_TP_MPI)
        return g4_fail(G4_ERR_INPUT, "unknown tensor-parallel backend %d", o.tp_backend);
    if (o.tp < 0 || o.tp > 64) return g4_fail(G4_ERR_INPUT, "--tp %d: must be between 1 and 64", o.tp);
    if (o.mmproj && !g4_is_gguf(path))
        return g4_fail(G4_ERR_INPUT, "--mmproj %s: goes with a GGUF model (-m MODEL.gguf); %s carries its own vision and "
                       "audio weights", o.mmproj, path);
    if (o.tp == 0 && o.tp_backend == G4_TP_THREADS) {   /* 0: unset: a pack's own size, else 1 (mpi: the mpirun size) */
        g4_pack *p;
        o.tp = 1;
        if (g4_is_pack(path) && !g4_pack_open_meta(path, &p)) {
            o.tp = g4_pack_tp(p);
            g4_pack_close(p);
        }
    }
    if (o.tp_backend == G4_TP_MPI) return g4_group_load_mpi(path, &o, out);
    if (o.tp == 1) return g4_load_rank(path, &o, 0, NULL, out);
    return g4_group_load_threads(path, &o, out);
}

void g4_model_free(g4_model *m) {
    if (!m) return;
    if (m->prof && (!m->comm || m->comm->rank == 0)) g4_forward_print_profile(m);
    g4_group_stop(m);   /* the other ranks leave g4_model_work; their threads are joined */
    if (m->comm) m->comm->free(m->comm);
    g4_weights_free(m);
    g4_vision_free(m->vision);
    g4_audio_embedder_free(m->audio);
    g4_st_close(&m->ts);
    g4_pack_close(m->pack);
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    if (m->pool) g4_pool_free(m->pool);
    free(m->inv_freq_sliding); free(m->inv_freq_full);
    free(m->kv); free(m->slot_pos); free(m->slot_hi);
    free(m->x); free(m->h); free(m->tmp); free(m->q); free(m->att); free(m->kk); free(m->vv);
    free(m->gate); free(m->up); free(m->rope_cs); free(m->scores);
    g4_matmul_ctx_free(m->mm);
    g4_lm_argmax_free(m->lma);
    free(m->lg); free(m->lg_all); free(m->cmd);
    free(m);
}

const g4_model_info *g4_model_get_info(const g4_model *m) { return &m->info; }
