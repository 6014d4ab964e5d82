/* model.c — the model and session-slot half of the public API: load (config → mapped weights →
 * this rank's shards → RoPE tables → KV cache and scratch, all sized once), prefill in chunks,
 * batched decode, and the softcap / argmax helpers. With tensor parallelism the handle the caller
 * holds is rank 0, the driver: each step is broadcast to the other ranks (threads of this process,
 * or MPI processes running g4_model_work), every rank runs the same forward pass on its shard,
 * and the vocab-parallel logits are gathered — or only their per-rank maxima, for greedy.
 * The layer math lives in gemma4.c, the slicing in shard.c, the collectives in src/parallel. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef G4_HAVE_NUMA
#include <numa.h>
#endif

#include "io/gguf.h"
#include "io/pack.h"
#include "model/model.h"
#include "model/rope.h"

enum { CMD_STOP = 0, CMD_STEP = 1 };
enum { OUT_NONE = 0, OUT_LOGITS = 1, OUT_ARGMAX = 2 };
#define CMD_HDR 5   /* op, R, logit_row0, out mode, step flags (G4_STEP_*); then slots[R], pos[R], ids[R] */

void g4_model_opts_default(g4_model_opts *o) {
    o->threads = 0;
    o->ctx = 4096;
    o->n_slots = 1;
    /* A prefill step packs (widens) every weight panel once and reads every weight once, so
     * longer steps amortize both over more rows: 256 against 64 measured +5-7% on pp512 (bench
     * model, 2 threads, 6 alternating rounds), for window + 192 more positions in each sliding
     * layer's KV ring and 4x the activation scratch. The server keeps 64 (server.c). */
    o->prefill_chunk = 256;
    o->tp = 1;
    o->tp_backend = G4_TP_THREADS;
    o->no_mmap = 0;
    o->act_q8 = 0;
    o->numerics = G4_NUMERICS_EXACT;
    o->prefill_bf16 = 0;
    o->tuning = (g4_tuning){.amx_pairs_rows = -1, .amx_gemv_min_rows = -1, .amx_gemv_max_rows = -1,
                            .amx_gemv1_k_below = -1, .profile = -1};
}

static g4_status alloc_state(g4_model *m) {
    const g4_config *c = &m->cfg;
    const int S = m->opts.n_slots, ctx = m->opts.ctx;
    m->max_rows = m->opts.prefill_chunk > S ? m->opts.prefill_chunk : S;
    int maxD = 0, maxKV = 0, maxQ = 0;
    size_t off = 0;
    for (int l = 0; l < c->n_layers; l++) {
        g4_layer *L = &m->layers[l];
        /* A sliding ring needs window + chunk - 1 positions so that writing a whole prefill
         * chunk never overwrites keys that an earlier row of the same chunk still reads. */
        int ring = c->sliding_window + m->max_rows - 1;
        L->kv_cap = L->is_full || ring > ctx ? ctx : ring;
        L->kv_offset = off;
        off += 2 * (size_t)L->n_kv * L->kv_cap * L->head_dim;
        L->inv_freq = L->is_full ? m->inv_freq_full : m->inv_freq_sliding;
        L->rope_base = (float)(L->is_full ? c->rope_full.theta : c->rope_sliding.theta);
        if (L->head_dim > maxD) maxD = L->head_dim;
        if (L->n_kv * L->head_dim > maxKV) maxKV = L->n_kv * L->head_dim;
        if (L->n_q * L->head_dim > maxQ) maxQ = L->n_q * L->head_dim;
    }
    m->slot_floats = off;
    m->info.kv_bytes = off * sizeof(float) * (size_t)S;
    m->kv = calloc(off * (size_t)S, sizeof(float));   /* untouched pages cost no RSS */
    m->slot_pos = calloc((size_t)S, sizeof(int));
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
    m->lg = malloc((size_t)S * m->vmax * sizeof(float));
    m->cmd = malloc((CMD_HDR + 3 * R) * sizeof(int32_t));
    /* the widest matmul input: hidden (q/k/v, gate/up), attention output (o), intermediate (down) */
    size_t K = H > (size_t)maxQ ? H : (size_t)maxQ;
    if (I > K) K = I;
    g4_matmul_policy policy;
    g4_matmul_policy_init(&policy, m->k, &m->opts.tuning);
    g4_status st = g4_matmul_ctx_new(m->k, m->pool, &policy, m->max_rows, (int)K, m->opts.act_q8, m->opts.prefill_bf16,
                                     m->opts.numerics == G4_NUMERICS_GGML, &m->mm);
    if (st) return st;
    if (m->comm && m->comm->rank == 0) m->lg_all = malloc((size_t)m->plan.tp * S * m->vmax * sizeof(float));
    if (!m->kv || !m->slot_pos || !m->x || !m->h || !m->tmp || !m->q || !m->att || !m->kk || !m->vv ||
        !m->gate || !m->up || !m->rope_cs || !m->scores || !m->lg || !m->cmd || (m->comm && !m->comm->rank && !m->lg_all))
        return g4_fail(G4_ERR_NOMEM, "out of memory allocating the KV cache (%zu MiB) and scratch for ctx %d x %d slots",
                       m->info.kv_bytes >> 20, ctx, S);
    return G4_OK;
}

/* Pins the calling thread (and the memory it first touches) to the NUMA node of `rank` when the
 * host has several nodes; a no-op on one node or without libnuma. */
static void numa_bind_rank(int rank) {
#ifdef G4_HAVE_NUMA
    if (numa_available() < 0) return;
    int nodes = numa_num_configured_nodes();
    if (nodes < 2) return;
    numa_run_on_node(rank % nodes);
    numa_set_preferred(rank % nodes);
#else
    (void)rank;
#endif
}

static int online_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* One rank: config, its shard of the weights, its KV cache and its worker threads. */
static g4_status load_rank(const char *path, const g4_model_opts *o, int rank, g4_comm *comm, g4_model **out) {
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
    if (o->numerics == G4_NUMERICS_GGML) {
        /* llama.cpp's CPU arithmetic: its int8 activations (--act-q8), its rms norm and fp16-table
         * GELU in this rank's copy of the kernel table; RoPE, attention and the softcap branch in
         * gemma4.c */
        m->opts.act_q8 = 1;
        m->kt = *m->k;
        m->kt.rmsnorm = g4_ggml_rmsnorm;
        m->kt.gelu_mul = g4_ggml_gelu_mul;
        m->k = &m->kt;
    }
    if (g4_is_gguf(path)) {   /* one .gguf file: config, weights (and tokenizer) inside */
        if ((st = g4_gguf_model_bind(m, path))) goto fail;
        if ((st = g4_tp_plan_make(&m->cfg, tp, rank, &m->plan))) goto fail;
    } else if (g4_is_pack(path)) {   /* a .g4c: config inside, this rank's shard mapped alone */
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
    } else {
        if ((st = g4_config_load(path, &m->cfg))) goto fail;
        if ((st = g4_tp_plan_make(&m->cfg, tp, rank, &m->plan))) goto fail;
        if ((st = g4_st_open_dir(path, &m->ts))) goto fail;
        if ((st = g4_weights_bind(m))) goto fail;
    }
    const g4_config *c = &m->cfg;
    for (int t = 0; t < m->ts.n_tensors; t++) m->info.weight_bytes += m->ts.tensors[t].nbytes;
    m->vmax = (c->vocab_size + tp - 1) / tp;
    /* Read through the file mapping, the weights are only as contiguous as the page cache holds
     * them: where the kernel cached part of a file in 4 KiB pages (it falls back to small folios
     * when a 2 MiB one is not free at read time, and a file cached earlier keeps its pages), every
     * weight stream is cut at each 4 KiB page (measured on the 2 GB bench model: 79% of it in
     * 2 MiB pages decoded 7.7 tok/s, copied 8.4, 1 thread). Unless --mmap forbids it, the small
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

/* ---------------------------------------------------------------- threads backend group */

typedef struct {
    pthread_t th;
    const char *path;
    g4_model_opts opts;
    int rank;
    g4_comm *comm;
    g4_model *m;
    g4_status st;
    char err[512];
    struct g4_group *g;
} rank_boot;

struct g4_group {
    int n;
    rank_boot *boots;           /* [n]; boots[0] is the caller's rank */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int loaded;                 /* ranks 1..n-1 that finished loading */
    int verdict;                /* 0 pending, 1 serve, -1 abort */
};

static void *rank_main(void *arg) {
    rank_boot *b = arg;
    struct g4_group *g = b->g;
    numa_bind_rank(b->rank);
    b->st = load_rank(b->path, &b->opts, b->rank, b->comm, &b->m);
    if (b->st) snprintf(b->err, sizeof b->err, "%s", g4_last_error());
    pthread_mutex_lock(&g->mu);
    g->loaded++;
    pthread_cond_broadcast(&g->cv);
    while (!g->verdict) pthread_cond_wait(&g->cv, &g->mu);
    int serve = g->verdict > 0;
    pthread_mutex_unlock(&g->mu);
    if (serve) g4_model_work(b->m);
    if (b->m) g4_model_free(b->m);
    else if (b->comm) b->comm->free(b->comm);
    return NULL;
}

static void group_release(struct g4_group *g, int verdict) {
    pthread_mutex_lock(&g->mu);
    g->verdict = verdict;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void group_join(struct g4_group *g) {
    for (int r = 1; r < g->n; r++)
        if (g->boots[r].th) pthread_join(g->boots[r].th, NULL);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g->boots);
    free(g);
}

static g4_status load_threads_group(const char *path, const g4_model_opts *o, g4_model **out) {
    const int n = o->tp;
    g4_comm **comms = g4_comm_threads_new(n);
    struct g4_group *g = calloc(1, sizeof *g);
    if (!comms || !g || !(g->boots = calloc((size_t)n, sizeof *g->boots))) {
        if (comms) for (int r = 0; r < n; r++) comms[r]->free(comms[r]);
        free(comms);
        if (g) free(g->boots);
        free(g);
        return g4_fail(G4_ERR_NOMEM, "out of memory");
    }
    g->n = n;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g4_status st = G4_OK;
    int started = 1;
    for (int r = 1; r < n; r++) {
        rank_boot *b = &g->boots[r];
        *b = (rank_boot){.path = path, .opts = *o, .rank = r, .comm = comms[r], .g = g};
        if (pthread_create(&b->th, NULL, rank_main, b)) {
            b->th = 0;
            for (int k = r; k < n; k++) comms[k]->free(comms[k]);
            st = g4_fail(G4_ERR_RUNTIME, "cannot start the thread of rank %d", r);
            break;
        }
        started++;
    }
    g4_model *m = NULL;
    if (!st) {
        numa_bind_rank(0);
        if ((st = load_rank(path, o, 0, comms[0], &m))) comms[0]->free(comms[0]);
    } else {
        comms[0]->free(comms[0]);
    }
    free(comms);
    char err[600];
    snprintf(err, sizeof err, "%s", g4_last_error());
    /* wait for every rank, then serve only if all of them loaded */
    pthread_mutex_lock(&g->mu);
    while (g->loaded < started - 1) pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    for (int r = 1; r < started && !st; r++)
        if ((st = g->boots[r].st)) snprintf(err, sizeof err, "rank %d: %s", r, g->boots[r].err);
    if (st) {
        group_release(g, -1);
        group_join(g);
        if (m) {   /* the other ranks never entered g4_model_work: no stop message */
            m->comm->free(m->comm);
            m->comm = NULL;
            g4_model_free(m);
        }
        return g4_fail(st, "%s", err);
    }
    for (int r = 1; r < n; r++) {   /* the whole group's weights, for the roofline */
        m->local_weight_bytes += g->boots[r].m->local_weight_bytes;
        m->info.kv_bytes += g->boots[r].m->info.kv_bytes;
    }
    m->info.weight_bytes = m->local_weight_bytes;
    m->group = g;
    group_release(g, 1);
    *out = m;
    return G4_OK;
}

g4_status g4_model_load(const char *path, const g4_model_opts *opts, g4_model **out) {
    *out = NULL;
    g4_model_opts o;
    g4_model_opts_default(&o);
    if (opts) o = *opts;
    if (o.ctx <= 0 || o.n_slots <= 0 || o.prefill_chunk <= 0)
        return g4_fail(G4_ERR_INPUT, "ctx, n_slots and prefill_chunk must be positive");
    if (o.tp_backend != G4_TP_THREADS && o.tp_backend != G4_TP_MPI)
        return g4_fail(G4_ERR_INPUT, "unknown tensor-parallel backend %d", o.tp_backend);
    if (o.tp < 0 || o.tp > 64) return g4_fail(G4_ERR_INPUT, "--tp %d: must be between 1 and 64", o.tp);
    if (o.tp == 0 && o.tp_backend == G4_TP_THREADS) {   /* 0: unset: a pack's own size, else 1 (mpi: the mpirun size) */
        g4_pack *p;
        o.tp = 1;
        if (g4_is_pack(path) && !g4_pack_open_meta(path, &p)) {
            o.tp = g4_pack_tp(p);
            g4_pack_close(p);
        }
    }
    if (o.tp_backend == G4_TP_MPI) {
        g4_comm *comm;
        g4_status st = g4_comm_mpi_new(o.tp, &comm);
        if (st) return st;
        o.tp = comm->size;
        numa_bind_rank(comm->rank);
        if (comm->size == 1) {   /* a group of one needs no collectives */
            comm->free(comm);
            return load_rank(path, &o, 0, NULL, out);
        }
        st = load_rank(path, &o, comm->rank, comm, out);
        if (st) { comm->free(comm); return st; }
        (*out)->info.weight_bytes = (*out)->local_weight_bytes * (size_t)comm->size;
        (*out)->info.kv_bytes *= (size_t)comm->size;
        return G4_OK;
    }
    if (o.tp == 1) return load_rank(path, &o, 0, NULL, out);
    return load_threads_group(path, &o, out);
}

/* ---------------------------------------------------------------- one step on every rank */

/* Runs the broadcast step m->cmd on this rank; rank 0 collects the result into `logits`
 * [n][V] or `next` [n]. */
static void rank_step(g4_model *m, float *logits, int32_t *next) {
    const int32_t *c = m->cmd;
    const int R = c[1], row0 = c[2], mode = c[3], step = c[4];
    const int *slots = c + CMD_HDR, *pos = slots + R;
    const int32_t *ids = pos + R;
    const int n = R - row0, V = m->cfg.vocab_size;
    g4_forward(m, R, slots, pos, ids, row0, step, mode == OUT_NONE ? NULL : m->lg);
    if (mode == OUT_NONE) return;
    g4_comm *cm = m->comm;
    if (mode == OUT_LOGITS) {
        cm->gather(cm, m->lg, (size_t)n * m->vmax * sizeof(float), m->lg_all);
        if (cm->rank) return;
        for (int r = 0; r < cm->size; r++) {
            const int lo = r * m->vmax, len = V - lo < m->vmax ? V - lo : m->vmax;
            for (int i = 0; i < n && len > 0; i++)
                memcpy(logits + (size_t)i * V + lo, m->lg_all + ((size_t)r * n + i) * m->vmax, (size_t)len * sizeof(float));
        }
        return;
    }
    /* distributed argmax: each rank's best (value, global index), rank 0 picks among them */
    struct best { float v; int32_t id; } mine[n], *all = (struct best *)m->lg_all;
    const int vlen = m->plan.vocab_hi - m->plan.vocab_lo;
    for (int i = 0; i < n; i++) {
        const float *row = m->lg + (size_t)i * m->vmax;
        const int b = g4_argmax(row, vlen);
        mine[i] = (struct best){vlen ? row[b] : -INFINITY, m->plan.vocab_lo + b};
    }
    cm->gather(cm, mine, sizeof mine, all);
    if (cm->rank) return;
    for (int i = 0; i < n; i++) {
        struct best b = all[i];
        for (int r = 1; r < cm->size; r++)   /* ranks hold ascending ids: strict > keeps the first */
            if (all[(size_t)r * n + i].v > b.v) b = all[(size_t)r * n + i];
        next[i] = b.id;
    }
}

/* Rank 0: one forward pass of R rows over the whole group. */
static void group_forward(g4_model *m, int R, const int *slots, const int *pos, const int32_t *ids,
                          int row0, int step, float *logits, int32_t *next) {
    const int n = R - row0, V = m->cfg.vocab_size;
    if (!m->comm) {
        g4_forward(m, R, slots, pos, ids, row0, step, next ? m->lg : logits);
        for (int i = 0; next && i < n; i++) next[i] = g4_argmax(m->lg + (size_t)i * V, V);
        return;
    }
    int32_t *c = m->cmd;
    c[0] = CMD_STEP;
    c[1] = R;
    c[2] = row0;
    c[3] = next ? OUT_ARGMAX : logits ? OUT_LOGITS : OUT_NONE;
    c[4] = step;
    memcpy(c + CMD_HDR, slots, (size_t)R * sizeof(int));
    memcpy(c + CMD_HDR + R, pos, (size_t)R * sizeof(int));
    memcpy(c + CMD_HDR + 2 * R, ids, (size_t)R * sizeof(int32_t));
    m->comm->bcast(m->comm, c, (CMD_HDR + 3 * (size_t)m->max_rows) * sizeof(int32_t));
    rank_step(m, logits, next);
}

int g4_model_rank(const g4_model *m) { return m->comm ? m->comm->rank : 0; }

g4_status g4_model_work(g4_model *m) {
    if (!m->comm || !m->comm->rank) return g4_fail(G4_ERR_INPUT, "g4_model_work: rank 0 drives the model");
    for (;;) {
        m->comm->bcast(m->comm, m->cmd, (CMD_HDR + 3 * (size_t)m->max_rows) * sizeof(int32_t));
        if (m->cmd[0] != CMD_STEP) return G4_OK;
        rank_step(m, NULL, NULL);
    }
}

/* G4_PROFILE's report: per kind of step, each phase's seconds and share of the forward time */
static void print_profile(const g4_model *m) {
    static const char *names[G4_PROF_PHASES] = {"forward", "row passes", "bf16 rounding", "q/k/v", "attention",
                                                "o", "gate/up", "down", "LM head"};
    for (int kind = 0; kind < 2; kind++) {
        const double *s = m->prof_s[kind], total = s[G4_PROF_FORWARD];
        if (total <= 0) continue;
        double rest = total;
        fprintf(stderr, "G4_PROFILE %s steps, %.4g s:", kind ? "multi-row" : "one-row", total);
        for (int i = 1; i < G4_PROF_PHASES; i++) {
            fprintf(stderr, " %s %.4g (%.1f%%);", names[i], s[i], 100 * s[i] / total);
            rest -= s[i];
        }
        fprintf(stderr, " other %.4g (%.1f%%)\n", rest, 100 * rest / total);
    }
}

void g4_model_free(g4_model *m) {
    if (!m) return;
    if (m->prof && (!m->comm || m->comm->rank == 0)) print_profile(m);
    if (m->comm && m->comm->rank == 0 && m->cmd) {   /* the driver releases the other ranks */
        m->cmd[0] = CMD_STOP;
        m->comm->bcast(m->comm, m->cmd, (CMD_HDR + 3 * (size_t)m->max_rows) * sizeof(int32_t));
    }
    if (m->group) group_join(m->group);
    if (m->comm) m->comm->free(m->comm);
    g4_weights_free(m);
    g4_st_close(&m->ts);
    g4_pack_close(m->pack);
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    if (m->pool) g4_pool_free(m->pool);
    free(m->inv_freq_sliding); free(m->inv_freq_full);
    free(m->kv); free(m->slot_pos);
    free(m->x); free(m->h); free(m->tmp); free(m->q); free(m->att); free(m->kk); free(m->vv);
    free(m->gate); free(m->up); free(m->rope_cs); free(m->scores);
    g4_matmul_ctx_free(m->mm);
    free(m->lg); free(m->lg_all); free(m->cmd);
    free(m);
}

const g4_model_info *g4_model_get_info(const g4_model *m) { return &m->info; }

void g4_slot_reset(g4_model *m, int slot) {
    if (slot >= 0 && slot < m->opts.n_slots) m->slot_pos[slot] = 0;
}

int g4_slot_pos(const g4_model *m, int slot) {
    return slot >= 0 && slot < m->opts.n_slots ? m->slot_pos[slot] : -1;
}

static g4_status prefill(g4_model *m, int slot, const int32_t *ids, int n, float *logits, int32_t *next) {
    if (slot < 0 || slot >= m->opts.n_slots) return g4_fail(G4_ERR_INPUT, "slot %d out of range [0, %d)", slot, m->opts.n_slots);
    if (n <= 0) return g4_fail(G4_ERR_INPUT, "empty prompt");
    if ((long)m->slot_pos[slot] + n > m->opts.ctx)
        return g4_fail(G4_ERR_CONTEXT, "prompt of %d tokens at position %d exceeds the context of %d tokens (--ctx)",
                       n, m->slot_pos[slot], m->opts.ctx);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab_size)
            return g4_fail(G4_ERR_INPUT, "token id %d is outside the vocabulary [0, %d)", ids[i], m->cfg.vocab_size);
    int slots[m->max_rows], pos[m->max_rows];
    for (int done = 0; done < n;) {
        int R = n - done < m->opts.prefill_chunk ? n - done : m->opts.prefill_chunk;
        for (int r = 0; r < R; r++) { slots[r] = slot; pos[r] = m->slot_pos[slot] + r; }
        int last = done + R == n;
        /* --numerics ggml: did llama.cpp's micro-batch holding these rows (the prompt cut into
         * n_ubatch = 512 tokens) have >= 2 tokens? (its attention P·V then runs through tinyBLAS) */
        const int ub = n - done / 512 * 512 < 512 ? n - done / 512 * 512 : 512;
        const int step = G4_STEP_PREFILL | (ub >= 2 ? G4_STEP_BATCHED : 0);
        group_forward(m, R, slots, pos, ids + done, last ? R - 1 : R, step, last ? logits : NULL, last ? next : NULL);
        m->slot_pos[slot] += R;
        done += R;
    }
    return G4_OK;
}

g4_status g4_prefill(g4_model *m, int slot, const int32_t *ids, int n, float *logits) {
    return prefill(m, slot, ids, n, logits, NULL);
}

g4_status g4_prefill_argmax(g4_model *m, int slot, const int32_t *ids, int n, int32_t *next) {
    return prefill(m, slot, ids, n, NULL, next);
}

static g4_status decode(g4_model *m, int n, const int *slots, const int32_t *ids, float *logits, int32_t *next) {
    if (n <= 0 || n > m->opts.n_slots) return g4_fail(G4_ERR_INPUT, "decode batch of %d slots (have %d)", n, m->opts.n_slots);
    int pos[n];
    for (int i = 0; i < n; i++) {
        if (slots[i] < 0 || slots[i] >= m->opts.n_slots) return g4_fail(G4_ERR_INPUT, "slot %d out of range", slots[i]);
        for (int j = 0; j < i; j++)
            if (slots[j] == slots[i]) return g4_fail(G4_ERR_INPUT, "slot %d appears twice in one decode batch", slots[i]);
        if (m->slot_pos[slots[i]] >= m->opts.ctx)
            return g4_fail(G4_ERR_CONTEXT, "slot %d is full: the context of %d tokens (--ctx) is used up", slots[i], m->opts.ctx);
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab_size)
            return g4_fail(G4_ERR_INPUT, "token id %d is outside the vocabulary [0, %d)", ids[i], m->cfg.vocab_size);
        pos[i] = m->slot_pos[slots[i]];
    }
    group_forward(m, n, slots, pos, ids, 0, n >= 2 ? G4_STEP_BATCHED : 0, logits, next);
    for (int i = 0; i < n; i++) m->slot_pos[slots[i]]++;
    return G4_OK;
}

g4_status g4_decode(g4_model *m, int n, const int *slots, const int32_t *ids, float *logits) {
    return decode(m, n, slots, ids, logits, NULL);
}

g4_status g4_decode_argmax(g4_model *m, int n, const int *slots, const int32_t *ids, int32_t *next) {
    return decode(m, n, slots, ids, NULL, next);
}

void g4_softcap(const g4_model *m, float *logits, int n) {
    const float cap = m->cfg.final_logit_softcap;
    if (cap <= 0 || m->opts.numerics == G4_NUMERICS_GGML) return;   /* ggml: already in the logits */
    for (int i = 0; i < n; i++) logits[i] = tanhf(logits[i] / cap) * cap;
}

/* The first index of the largest value: what `best = 0; if (x[i] > x[best]) best = i` returns (a
 * NaN never wins, but one at index 0 is kept). In 8 lanes, lane j over indices 1 + j, 9 + j, ...,
 * each starting from (x[0], 0), then the largest lane, the lowest index on ties. The plain loop
 * reloads x[best] and compares serially: 0.5 ms of a decode step (262144 logits) on the calling
 * thread while the pool's other threads waited (perf: 0.8% of a step); the lanes are GCC vectors
 * (compare + blend). */
typedef float argmax_f32x4 __attribute__((vector_size(16)));
typedef int32_t argmax_i32x4 __attribute__((vector_size(16)));

int g4_argmax(const float *x, int n) {
    enum { L = 8, W = 4 };   /* 8 lanes as two 4-wide vectors: SSE2 registers on any x86-64 */
    if (n <= 1) return 0;
    argmax_f32x4 v[2];
    argmax_i32x4 id[2] = {{0}, {0}}, cur[2];
    for (int j = 0; j < L; j++) {
        v[j / W][j % W] = x[0];
        cur[j / W][j % W] = 1 + j;
    }
    int i = 1;
    for (; i + L <= n; i += L)
        for (int h = 0; h < 2; h++) {
            argmax_f32x4 xv;
            memcpy(&xv, x + i + h * W, sizeof xv);
            const argmax_i32x4 gt = xv > v[h];   /* all ones where greater; NaN: never */
            v[h] = (argmax_f32x4)(((argmax_i32x4)xv & gt) | ((argmax_i32x4)v[h] & ~gt));
            id[h] = (cur[h] & gt) | (id[h] & ~gt);
            cur[h] += L;
        }
    float lv[L];
    int li[L];
    for (int j = 0; j < L; j++) {
        lv[j] = v[j / W][j % W];
        li[j] = id[j / W][j % W];
    }
    for (int j = 0; i + j < n; j++)
        if (x[i + j] > lv[j]) {
            lv[j] = x[i + j];
            li[j] = i + j;
        }
    int b = 0;
    for (int j = 1; j < L; j++)
        if (lv[j] > lv[b] || (lv[j] == lv[b] && li[j] < li[b])) b = j;
    return li[b];
}
