/* group.c — the tensor-parallel group behind one model handle (group.h): the threads backend's
 * start-up (a thread per rank, each loading its shard, serving only if all loaded) and the MPI
 * one, the step rank 0 broadcasts (its wire format), the other ranks' loop that runs it, and the
 * gathered logits or distributed argmax. Every rank's own loading is model/load.c's. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef G4_HAVE_NUMA
#include <numa.h>
#endif

#include "parallel/group.h"

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
    b->st = g4_load_rank(b->path, &b->opts, b->rank, b->comm, &b->m);
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

g4_status g4_group_load_threads(const char *path, const g4_model_opts *o, g4_model **out) {
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
        if ((st = g4_load_rank(path, o, 0, comms[0], &m))) comms[0]->free(comms[0]);
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

/* ---------------------------------------------------------------- MPI backend */

g4_status g4_group_load_mpi(const char *path, const g4_model_opts *opts, g4_model **out) {
    g4_model_opts o = *opts;
    g4_comm *comm;
    g4_status st = g4_comm_mpi_new(o.tp, o.tp_timeout_ms, &comm);
    if (st) return st;
    o.tp = comm->size;
    numa_bind_rank(comm->rank);
    if (comm->size == 1) {   /* a group of one needs no collectives */
        comm->free(comm);
        return g4_load_rank(path, &o, 0, NULL, out);
    }
    st = g4_load_rank(path, &o, comm->rank, comm, out);
    /* Every rank waits here for the others (no deadline: loading takes what it takes), so rank 0
     * serves only once the whole group can run a step, and a rank that failed fails them all. */
    const int any_failed = g4_comm_mpi_any(comm, st != G4_OK);
    if (st) { comm->free(comm); return st; }
    if (any_failed) {   /* the others never enter g4_model_work: no stop message */
        (*out)->comm = NULL;
        g4_model_free(*out);
        *out = NULL;
        comm->free(comm);
        return g4_fail(G4_ERR_RUNTIME, "another MPI rank failed to load the model (its error is on its stderr)");
    }
    (*out)->info.weight_bytes = (*out)->local_weight_bytes * (size_t)comm->size;
    (*out)->info.kv_bytes *= (size_t)comm->size;
    return G4_OK;
}

/* ---------------------------------------------------------------- the step on the wire */

/* m->cmd as int32 words: a header (op, R, logit_row0, out mode, step flags G4_STEP_*), then
 * slots[R], pos[R], ids[R]; broadcast whole (its size fixed by max_rows). After them room for a
 * step with images' m->step_media [R], broadcast apart and only for such a step (rank 0 alone
 * holds the soft tokens: the embedding's all-reduce brings them to the others) */
enum { CMD_STOP = 0, CMD_STEP = 1, CMD_PING = 2, CMD_KV = 3, CMD_EMBED = 4 };
enum { OUT_NONE = 0, OUT_LOGITS = 1, OUT_ARGMAX = 2 };
#define CMD_HDR 5

size_t g4_group_cmd_bytes(int max_rows) { return (CMD_HDR + 4 * (size_t)max_rows) * sizeof(int32_t); }

static size_t cmd_size(const g4_model *m) { return (CMD_HDR + 3 * (size_t)m->max_rows) * sizeof(int32_t); }

static void cmd_bcast(g4_model *m) { m->comm->bcast(m->comm, m->cmd, cmd_size(m)); }

static int32_t *cmd_media(g4_model *m) { return m->cmd + CMD_HDR + 3 * (size_t)m->max_rows; }

static void step_encode(int32_t *c, int R, const int *slots, const int *pos, const int32_t *ids, int row0, int out,
                        int step) {
    c[0] = CMD_STEP;
    c[1] = R;
    c[2] = row0;
    c[3] = out;
    c[4] = step;
    memcpy(c + CMD_HDR, slots, (size_t)R * sizeof(int));
    memcpy(c + CMD_HDR + R, pos, (size_t)R * sizeof(int));
    memcpy(c + CMD_HDR + 2 * R, ids, (size_t)R * sizeof(int32_t));
}

typedef struct {
    int R, row0, out, step;
    const int *slots, *pos;
    const int32_t *ids;
} step_cmd;

static step_cmd step_decode(const int32_t *c) {
    step_cmd s = {.R = c[1], .row0 = c[2], .out = c[3], .step = c[4], .slots = c + CMD_HDR};
    s.pos = s.slots + s.R;
    s.ids = s.pos + s.R;
    return s;
}

/* ---------------------------------------------------------------- argmax over the pool */

/* g4_argmax of one logits row, split over the pool in chunks: on one thread, the scan over 262,144
 * logits left the other threads idle at the end of every greedy step. Each chunk keeps its first
 * best (value, index); the chunks are then taken in order with a strict >, so ties keep the lowest
 * index, as g4_argmax does. A chunk after the first that starts with a NaN keeps it (g4_argmax's
 * index-0 rule), which the whole row would not: such a row is scanned again serially. */
enum { ARGMAX_CHUNK = 16384, ARGMAX_MAX_TASKS = 64 };

typedef struct {
    const float *x;
    int n, per_task;
    float v[ARGMAX_MAX_TASKS];
    int id[ARGMAX_MAX_TASKS];
} argmax_job;

static void argmax_task(void *ctx, int task, int thread) {
    (void)thread;
    argmax_job *j = ctx;
    const int lo = task * j->per_task, len = j->n - lo < j->per_task ? j->n - lo : j->per_task;
    const int b = lo + g4_argmax(j->x + lo, len);
    j->v[task] = j->x[b];
    j->id[task] = b;
}

static int pool_argmax(g4_pool *pool, const float *x, int n) {
    const int nth = g4_pool_size(pool);
    int n_tasks = (n + ARGMAX_CHUNK - 1) / ARGMAX_CHUNK;
    if (n_tasks > ARGMAX_MAX_TASKS) n_tasks = ARGMAX_MAX_TASKS;
    if (nth == 1 || n_tasks < 2) return g4_argmax(x, n);
    argmax_job j = {.x = x, .n = n, .per_task = (n + n_tasks - 1) / n_tasks};
    n_tasks = (n + j.per_task - 1) / j.per_task;
    g4_pool_run(pool, n_tasks, argmax_task, &j);
    int best = 0;
    for (int t = 1; t < n_tasks; t++) {
        if (isnan(j.v[t])) return g4_argmax(x, n);
        if (j.v[t] > j.v[best]) best = t;
    }
    return j.id[best];
}

/* ---------------------------------------------------------------- one step on every rank */

/* Runs the broadcast step m->cmd on this rank; rank 0 collects the result into `logits`
 * [n][V] or `next` [n]. */
static void rank_step(g4_model *m, float *logits, int32_t *next) {
    const step_cmd s = step_decode(m->cmd);
    const int mode = s.out, n = s.R - s.row0, V = m->cfg.vocab_size;
    if (s.step & G4_STEP_MEDIA) {   /* rank 0 wrote its step_media there (g4_group_forward) */
        m->comm->bcast(m->comm, cmd_media(m), (size_t)s.R * sizeof(int32_t));
        if (m->comm->rank) m->step_media = cmd_media(m);
    }
    g4_forward(m, s.R, s.slots, s.pos, s.ids, s.row0, s.step, mode == OUT_NONE ? NULL : m->lg);
    if (m->comm->rank) m->step_media = NULL;
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
        const int b = pool_argmax(m->pool, row, vlen);
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

void g4_group_forward(g4_model *m, int R, const int *slots, const int *pos, const int32_t *ids, int row0, int step,
                      float *logits, int32_t *next) {
    const int n = R - row0, V = m->cfg.vocab_size;
    if (next) step |= G4_STEP_ARGMAX;
    if (!m->comm) {
        g4_forward(m, R, slots, pos, ids, row0, step, next ? m->lg : logits);
        for (int i = 0; next && i < n; i++) next[i] = pool_argmax(m->pool, m->lg + (size_t)i * V, V);
        return;
    }
    step_encode(m->cmd, R, slots, pos, ids, row0, next ? OUT_ARGMAX : logits ? OUT_LOGITS : OUT_NONE, step);
    if (step & G4_STEP_MEDIA) memcpy(cmd_media(m), m->step_media, (size_t)R * sizeof(int32_t));
    cmd_bcast(m);
    rank_step(m, logits, next);
    if (atomic_load(&m->comm->lost)) {   /* the step ran on partial sums: hand back nothing of it */
        if (logits) memset(logits, 0, (size_t)n * V * sizeof(float));
        for (int i = 0; next && i < n; i++) next[i] = 0;
    }
}

const char *g4_model_group_lost(const g4_model *m) {
    return m && m->comm && atomic_load(&m->comm->lost) ? m->comm->why : NULL;
}

g4_status g4_model_ping(g4_model *m) {
    if (!m->comm || m->comm->rank || m->group) return G4_OK;   /* threads cannot stop apart */
    if (atomic_load(&m->comm->lost)) return g4_fail(G4_ERR_RUNTIME, "%s", m->comm->why);
    m->cmd[0] = CMD_PING;
    cmd_bcast(m);
    float one = 1;
    m->comm->allreduce_sum(m->comm, &one, 1);
    if (atomic_load(&m->comm->lost)) return g4_fail(G4_ERR_RUNTIME, "%s", m->comm->why);
    return G4_OK;
}

/* ---------------------------------------------------------------- reads of the other ranks' state */

/* CMD_KV: (slot, layer, lo, hi) in words 1..4. Every rank packs its K rows of positions [lo, hi]
 * (ring index t % cap), head after head, then its V rows the same way; rank 0 gathers them. */
static size_t kv_bytes(const g4_layer *L, int lo, int hi) { return 2 * (size_t)L->n_kv * (size_t)(hi - lo + 1) * L->kv_row; }

static void kv_pack(const g4_model *m, int slot, const g4_layer *L, int lo, int hi, unsigned char *out) {
    const unsigned char *K = g4_slot_k(m, slot, L);
    const size_t row = L->kv_row;
    for (int h = 0; h < 2 * L->n_kv; h++)   /* K heads then V heads: one [2 n_kv][cap] array of rows */
        for (int t = lo; t <= hi; t++, out += row) memcpy(out, K + ((size_t)h * L->kv_cap + (size_t)(t % L->kv_cap)) * row, row);
}

static void kv_unpack(const g4_layer *L, int lo, int hi, const unsigned char *in, unsigned char *dst) {
    const size_t row = L->kv_row;
    for (int h = 0; h < 2 * L->n_kv; h++)
        for (int t = lo; t <= hi; t++, in += row) memcpy(dst + ((size_t)h * L->kv_cap + (size_t)(t % L->kv_cap)) * row, in, row);
}

/* Runs CMD_KV on this rank: rank 0 receives every rank's rows into recv [tp][kv_bytes]. */
static g4_status rank_kv(g4_model *m, unsigned char *recv) {
    const int slot = m->cmd[1], layer = m->cmd[2], lo = m->cmd[3], hi = m->cmd[4];
    const g4_layer *L = &m->layers[layer];
    const size_t n = kv_bytes(L, lo, hi);
    unsigned char *send = malloc(n);
    if (!send) return g4_fail(G4_ERR_NOMEM, "out of memory for a KV gather");
    kv_pack(m, slot, L, lo, hi, send);
    m->comm->gather(m->comm, send, n, recv);
    free(send);
    return atomic_load(&m->comm->lost) ? g4_fail(G4_ERR_RUNTIME, "%s", m->comm->why) : G4_OK;
}

g4_status g4_group_gather_kv(g4_model *m, int slot, int layer, int lo, int hi, unsigned char *const *dst) {
    if (!m->comm || m->comm->rank || m->group) return g4_fail(G4_ERR_INPUT, "g4_group_gather_kv: rank 0 of an MPI group");
    if (atomic_load(&m->comm->lost)) return g4_fail(G4_ERR_RUNTIME, "%s", m->comm->why);
    const g4_layer *L = &m->layers[layer];
    const int tp = m->comm->size;
    /* chunks of positions: each rank's part of one gather stays well within MPI's int count */
    const size_t per_pos = kv_bytes(L, 0, 0);
    int step = (int)((32u << 20) / per_pos);
    if (step < 1) step = 1;
    unsigned char *recv = malloc((size_t)tp * per_pos * (size_t)(hi - lo + 1 < step ? hi - lo + 1 : step));
    if (!recv) return g4_fail(G4_ERR_NOMEM, "out of memory for a KV gather");
    g4_status st = G4_OK;
    for (int a = lo; a <= hi && !st; a += step) {
        const int b = hi - a + 1 < step ? hi : a + step - 1;
        m->cmd[0] = CMD_KV, m->cmd[1] = slot, m->cmd[2] = layer, m->cmd[3] = a, m->cmd[4] = b;
        cmd_bcast(m);
        if ((st = rank_kv(m, recv))) break;
        for (int r = 1; r < tp; r++)
            if (dst[r]) kv_unpack(L, a, b, recv + (size_t)r * kv_bytes(L, a, b), dst[r]);
    }
    free(recv);
    return st;
}

/* CMD_EMBED: token in word 1. Every rank sends its embedding row of it as float32 (zeros when its
 * vocabulary slice does not hold it); rank 0 keeps the holder's, bit for bit. */
static g4_status rank_embed(g4_model *m, float *recv) {
    const int32_t tok = m->cmd[1];
    const int H = m->cfg.hidden_size;
    float *row = calloc((size_t)H, sizeof(float));
    if (!row) return g4_fail(G4_ERR_NOMEM, "out of memory");
    if (tok >= m->plan.vocab_lo && tok < m->plan.vocab_hi)
        g4_to_f32(m->embed.dt, (const char *)m->embed.data + (size_t)(tok - m->plan.vocab_lo) *
                  g4_dtype_row_bytes(m->embed.dt, H), (size_t)H, row);
    m->comm->gather(m->comm, row, (size_t)H * sizeof(float), recv);
    free(row);
    return atomic_load(&m->comm->lost) ? g4_fail(G4_ERR_RUNTIME, "%s", m->comm->why) : G4_OK;
}

g4_status g4_group_embed_row(g4_model *m, int32_t tok, float *out) {
    if (!m->comm || m->comm->rank || m->group) return g4_fail(G4_ERR_INPUT, "g4_group_embed_row: rank 0 of an MPI group");
    if (atomic_load(&m->comm->lost)) return g4_fail(G4_ERR_RUNTIME, "%s", m->comm->why);
    const int tp = m->comm->size, H = m->cfg.hidden_size;
    if (tok < 0 || tok >= m->cfg.vocab_size) return g4_fail(G4_ERR_INPUT, "embedding row of token %d: outside the vocabulary", tok);
    float *recv = malloc((size_t)tp * H * sizeof(float));
    if (!recv) return g4_fail(G4_ERR_NOMEM, "out of memory");
    m->cmd[0] = CMD_EMBED, m->cmd[1] = tok;
    cmd_bcast(m);
    g4_status st = rank_embed(m, recv);
    /* the ranks' slices are the ceil split of the plan, in rank order */
    const int per = (m->cfg.vocab_size + tp - 1) / tp;
    if (!st) memcpy(out, recv + (size_t)(tok / per) * H, (size_t)H * sizeof(float));
    free(recv);
    return st;
}

int g4_group_rank_models(g4_model *m, g4_model **out) {
    if (!m->group) {
        if (m->comm) return 0;
        if (out) out[0] = m;
        return 1;
    }
    for (int r = 0; out && r < m->group->n; r++) out[r] = r ? m->group->boots[r].m : m;
    return m->group->n;
}

int g4_model_rank(const g4_model *m) { return m->comm ? m->comm->rank : 0; }

g4_status g4_model_work(g4_model *m) {
    if (!m->comm || !m->comm->rank) return g4_fail(G4_ERR_INPUT, "g4_model_work: rank 0 drives the model");
    for (;;) {   /* a lost group's collectives return at once: the check at the top ends the loop */
        m->comm->bcast_idle(m->comm, m->cmd, cmd_size(m));   /* between steps: no deadline */
        if (atomic_load(&m->comm->lost)) return g4_fail(G4_ERR_RUNTIME, "%s", m->comm->why);
        if (m->cmd[0] == CMD_PING) {
            float one = 1;
            m->comm->allreduce_sum(m->comm, &one, 1);
        } else if (m->cmd[0] == CMD_STEP) {
            rank_step(m, NULL, NULL);
        } else if (m->cmd[0] == CMD_KV || m->cmd[0] == CMD_EMBED) {   /* rank 0's MTP drafter (model/mtp.c) */
            g4_status st = m->cmd[0] == CMD_KV ? rank_kv(m, NULL) : rank_embed(m, NULL);
            if (st && !atomic_load(&m->comm->lost)) return st;
        } else {
            return G4_OK;
        }
    }
}

void g4_group_stop(g4_model *m) {
    /* the driver releases the other ranks (not a lost group's: nothing reaches them any more) */
    if (m->comm && m->comm->rank == 0 && m->cmd && !atomic_load(&m->comm->lost)) {
        m->cmd[0] = CMD_STOP;
        cmd_bcast(m);
    }
    if (m->group) group_join(m->group);
}
