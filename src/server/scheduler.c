/* scheduler.c — the one thread that drives the model: a FIFO of requests → --parallel session
 * slots (continuous batching). Each iteration admits waiting requests into free slots, runs one
 * prefill slice (prefill_chunk tokens) of the oldest prefilling request, then ONE batched
 * g4_decode over every decoding slot; requests join and leave between steps. Each request's
 * sampling, stop ids / strings, max_tokens and detokenizing are its g4_gen's (src/generate, as
 * `run` and `chat` use it); a chat request's ids also go through its chat parser (src/chat),
 * which may end the message. This file publishes the results. Knows nothing of HTTP. A slot keeps
 * its KV after a request: the prompt cache (prompt_cache.c) places each new prompt in the slot
 * that holds the longest prefix of it, and prefill starts after that prefix. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "generate/draft.h"
#include "server/prompt_cache.h"
#include "server/server.h"

enum { ST_ADMITTED = 1, ST_PREFILL, ST_DECODE };
enum { HEARTBEAT_S = 5 };

struct g4_sched {
    g4_model *m;
    const g4_tokenizer *tok;
    const g4_gen_config *gen;
    g4_metrics *mx;
    g4_pcache *pc;             /* prefix reuse (scheduler thread only) */
    const g4_model_info *info;
    int V, n_slots, chunk;
    pthread_t th;
    int started;

    pthread_mutex_t mu;        /* guards the queue and the flags below */
    pthread_cond_t cv;
    g4_req *qhead, *qtail;
    int n_queued;
    int max_queue;             /* submit refuses past this many waiting requests (0: no cap) */
    int stopping;
    double deadline;           /* when stopping: cancel what still runs after this */
    long seq;

    /* scheduler-thread only */
    g4_req **slot_req;         /* [n_slots] */
    float *logits;             /* [n_slots, V] */
    int *dslots;               /* [n_slots] */
    int32_t *dids;             /* [n_slots] */
    int32_t *dnext;            /* [n_slots] argmax tokens of an all-greedy step */
    g4_req **dreqs;            /* [n_slots] */
    /* speculative decoding (g4_sched_set_spec; docs/speculative.md): each decoding slot's newest
     * token and drafts verified in one step of all slots */
    g4_drafter *drafter;       /* NULL: plain decode steps */
    int K;                     /* most drafts a slot's round */
    int *dcounts, *dpos;       /* [n_slots] a slot's rows in the step; its position before it */
    int32_t *vids, *vnext;     /* [n_slots * (K + 1)] the step's rows; their argmax tokens */
    float *vlogits;            /* [n_slots * (K + 1), V] their logits */
    int32_t *hist;             /* [ctx] a request's prompt and output, for the drafter */
    int32_t *drafts;           /* [n_slots * K] each slot's drafts for its next step, asked right
                                * after the step that chose its newest token (draft.h) */
    int *n_drafts;             /* [n_slots] how many */
    float *hidden;             /* [hidden_size] a row's final hidden state, for a drafter that reads it */
};


g4_req *g4_req_new(void) {
    g4_req *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->refs = 1;
    r->n_top_logprobs = -1;
    r->spec_n_max = -1;
    r->slot = -1;
    g4_sampler_params_default(&r->sp);
    return r;
}

void g4_req_release(g4_req *r) {
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    int left = --r->refs;
    pthread_mutex_unlock(&r->mu);
    if (left > 0) return;
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r->prompt);
    g4_req_media_release(r->media);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    free(r->bias_ids);
    free(r->bias);
    g4_chat_parser_free(r->parser);
    g4_matcher_free(r->matcher);
    g4_grammar_free(r->grammar);
    free(r->gbnf);
    free(r->api_echo);
    free(r->text);
    free(r->toks);
    g4_gen_free(r->gen);
    free(r);
}

void g4_req_cancel(g4_req *r) {
    pthread_mutex_lock(&r->mu);
    r->cancel = 1;
    pthread_mutex_unlock(&r->mu);
}

g4_sched *g4_sched_new(g4_model *m, const g4_tokenizer *tok, const g4_gen_config *gen, g4_metrics *mx,
                       int prefill_chunk, int max_queue, int cache_ram_mb) {
    g4_sched *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->max_queue = max_queue;
    s->m = m;
    s->tok = tok;
    s->gen = gen;
    s->mx = mx;
    s->info = g4_model_get_info(m);
    s->V = s->info->vocab_size;
    s->n_slots = s->info->n_slots;
    s->chunk = prefill_chunk > 0 ? prefill_chunk : 64;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->slot_req = calloc((size_t)s->n_slots, sizeof *s->slot_req);
    s->logits = malloc((size_t)s->n_slots * (size_t)s->V * sizeof *s->logits);
    s->dslots = malloc((size_t)s->n_slots * sizeof *s->dslots);
    s->dids = malloc((size_t)s->n_slots * sizeof *s->dids);
    s->dnext = malloc((size_t)s->n_slots * sizeof *s->dnext);
    s->dreqs = malloc((size_t)s->n_slots * sizeof *s->dreqs);
    s->pc = g4_pcache_new(m, s->chunk, (size_t)cache_ram_mb << 20, mx);
    if (!s->pc || !s->slot_req || !s->logits || !s->dslots || !s->dids || !s->dnext || !s->dreqs) {
        g4_sched_free(s);
        return NULL;
    }
    return s;
}

/* Marks r finished, wakes its reader, frees its slot and drops the scheduler's reference. */
static void finish(g4_sched *s, g4_req *r, g4_finish fin, const char *err) {
    pthread_mutex_lock(&r->mu);
    r->done = 1;
    r->finish = fin;
    if (err) snprintf(r->err, sizeof r->err, "%s", err);
    if (r->parser) g4_chat_parser_finish(r->parser);   /* what it held back is final now */
    r->text_ready = r->text_len;
    r->t_done = g4_now();
    pthread_cond_broadcast(&r->cv);
    if (r->notify) r->notify(r->notify_arg);
    int n_toks = r->n_toks;
    pthread_mutex_unlock(&r->mu);
    g4_metrics_tokens(s->mx, r->n_prefilled, n_toks);
    if (fin == G4_FIN_CANCELLED) g4_metrics_cancelled(s->mx);
    if (r->slot >= 0 && s->slot_req[r->slot] == r) s->slot_req[r->slot] = NULL;
    g4_req_release(r);
}

/* 1 when the request's next token is the plain argmax of the raw logits (its g4_gen says so, and
 * no logprobs are asked for): the model then returns only the argmax, which with --tp N saves
 * gathering the vocabulary's logits from every rank. */
static int argmax_only(const g4_req *r) {
    return r->n_top_logprobs < 0 && g4_gen_argmax_only(r->gen);
}

/* Takes the next token of `r`: sampled from `logits`, or `argmax` when logits is NULL, then
 * publishes it and the text that became final. Returns 1 when r finished. */
static int emit(g4_sched *s, g4_req *r, float *logits, int32_t argmax) {
    const int32_t tok = g4_gen_next(r->gen, logits, argmax);
    g4_tok_info ti = {.id = tok};
    if (logits && r->n_top_logprobs >= 0)   /* after g4_gen_next: suppressed ids at -inf */
        ti.n_top = g4_logprobs(logits, s->V, s->info->final_logit_softcap, tok, r->n_top_logprobs, &ti.lp,
                               ti.top_ids, ti.top_lps);
    const double now = g4_now();
    if (r->n_toks == 0) g4_metrics_ttft(s->mx, now - r->t_submit);
    else g4_metrics_itl(s->mx, now - r->t_last);
    r->t_last = now;

    const char *piece;
    size_t plen;
    g4_finish fin = g4_gen_accept(r->gen, tok, &piece, &plen);

    pthread_mutex_lock(&r->mu);
    if (r->parser) {   /* chat: the message's deltas; the parser may end it (a tool's turn, a stop string) */
        int ended = 0;
        g4_status st = fin == G4_FIN_STOP ? G4_OK : g4_chat_parser_push(r->parser, tok, &ended);
        if (!st && r->one_call && g4_chat_parser_n_calls(r->parser)) ended = 1;
        if (!fin && (ended || st)) fin = st ? G4_FIN_ERROR : G4_FIN_STOP;
        if (st) snprintf(r->err, sizeof r->err, "%s", g4_last_error());
    }
    if (r->n_toks == r->cap_toks) {
        int nc = r->cap_toks ? r->cap_toks * 2 : 16;
        g4_tok_info *nt = realloc(r->toks, (size_t)nc * sizeof *nt);
        if (nt) { r->toks = nt; r->cap_toks = nc; }
    }
    if (r->n_toks < r->cap_toks) r->toks[r->n_toks++] = ti;
    if (plen) {
        char *nt = realloc(r->text, r->text_len + plen + 1);
        if (nt) {
            memcpy(nt + r->text_len, piece, plen);
            r->text = nt;
            r->text_len += plen;
            nt[r->text_len] = 0;
            r->text_ready = r->text_len;
        }
    }
    if (!r->t_first) r->t_first = now;
    pthread_cond_broadcast(&r->cv);
    if (r->notify) r->notify(r->notify_arg);
    pthread_mutex_unlock(&r->mu);
    if (fin) {
        finish(s, r, fin, NULL);   /* a parser error is in r->err already */
        return 1;
    }
    r->next_tok = tok;
    r->state = ST_DECODE;
    return 0;
}

/* The request's generation state (sampler, stop ids and strings, detokenizer); its slot already
 * holds the first n_cached prompt ids (g4_pcache_place). */
static void setup(g4_sched *s, g4_req *r) {
    g4_gen_params gp;
    g4_gen_params_default(&gp);
    gp.sp = r->sp;
    gp.max_tokens = r->max_tokens;
    /* chat: the parser reads the ids and applies the stop strings to the content */
    gp.text = !r->parser;
    gp.stop = r->parser ? NULL : (const char *const *)r->stop;
    gp.n_stop = r->parser ? 0 : r->n_stop;
    gp.ignore_eos = r->ignore_eos;
    gp.bias_ids = r->bias_ids;
    gp.bias = r->bias;
    gp.n_bias = r->n_bias;
    gp.constraint = r->matcher;
    g4_status st = g4_gen_new(s->m, r->slot, s->tok, s->gen, &gp, &r->gen);
    if (st) {
        finish(s, r, G4_FIN_ERROR, g4_last_error());
        return;
    }
    if (s->n_drafts) s->n_drafts[r->slot] = 0;
    r->n_prefilled = r->n_cached;
    r->state = ST_PREFILL;
    pthread_mutex_lock(&r->mu);
    r->admitted = 1;
    pthread_mutex_unlock(&r->mu);
}

static int cancelled(g4_req *r) {
    pthread_mutex_lock(&r->mu);
    int c = r->cancel;
    pthread_mutex_unlock(&r->mu);
    return c;
}

/* Asks the drafter for r's next round, right after the step that chose r's newest token — from
 * that step's row `row` (its final hidden state), the step's first row at position `start` (0:
 * the prefill) — and before the step's rejected rows are dropped, so that the slot's KV still
 * holds everything the step wrote (draft.h; the MTP drafter reads it). `next_pos`: where the
 * newest token goes. Up to the request's speculative.n_max (the server's K by default), fewer
 * when fewer tokens remain before max_tokens (the round yields up to drafts + 1) or before the
 * context's last position, so that g4_gen's checks see the positions plain decoding would
 * (speculate.c's round_max); none when fewer than its n_min would be drafted. */
static void plan_drafts(g4_sched *s, const g4_req *r, int row, int start, int next_pos) {
    const int slot = r->slot;
    int32_t *out = s->drafts + (size_t)slot * s->K;
    s->n_drafts[slot] = 0;
    long k = r->spec_n_max >= 0 && r->spec_n_max < s->K ? r->spec_n_max : s->K;
    const long left = g4_gen_tokens_left(r->gen) - 1L, room = (long)s->info->ctx - next_pos - 2;
    if (left < k) k = left;
    if (room < k) k = room;
    if (k <= 0) return;
    int h = 0;
    for (int j = 0; j < r->n_prompt && h < s->info->ctx; j++) s->hist[h++] = r->prompt[j];
    for (int j = 0; j < r->n_toks && h < s->info->ctx; j++) s->hist[h++] = r->toks[j].id;
    if (s->drafter->needs_hidden && g4_step_hidden(s->m, row, s->hidden)) return;
    const g4_draft_ctx c = {.tokens = s->hist, .n = h, .target = s->m, .slot = slot,
                            .kv_written = g4_slot_pos(s->m, slot), .step_start = start,
                            .hidden = s->drafter->needs_hidden ? s->hidden : NULL};
    int nd = s->drafter->propose(s->drafter, &c, (int)k, out);
    if (nd < 0 || nd > k || nd < r->spec_n_min) nd = 0;   /* a drafter's failure costs only its drafts */
    for (int j = 0; j < nd; j++)
        if (out[j] < 0 || out[j] >= s->V) nd = 0;
    s->n_drafts[slot] = nd;
}

/* One speculative step over the n decoding slots (s->dslots / dreqs): each slot's newest token and
 * the drafts planned for it as rows of one g4_verify_batch; each request then takes its rows'
 * tokens through emit, as a plain step would one, while they equal its drafts; its next drafts
 * are asked for, and only then its slot drops the rejected rows. */
static void decode_spec(g4_sched *s, int n) {
    int rows = 0, am = 1;
    for (int i = 0; i < n; i++) {
        g4_req *r = s->dreqs[i];
        am &= argmax_only(r);
        const int slot = s->dslots[i], nd = s->n_drafts[slot];
        s->dpos[i] = g4_slot_pos(s->m, slot);
        int32_t *row = s->vids + rows;
        row[0] = r->next_tok;
        memcpy(row + 1, s->drafts + (size_t)slot * s->K, (size_t)nd * sizeof *row);
        s->dcounts[i] = 1 + nd;
        rows += s->dcounts[i];
    }
    const g4_status st = g4_verify_batch(s->m, n, s->dslots, s->dcounts, s->vids, am ? NULL : s->vlogits,
                                         am ? s->vnext : NULL);
    g4_metrics_decode_step(s->mx, n);
    int o = 0;
    for (int i = 0; i < n; i++) {
        const int slot = s->dslots[i], cnt = s->dcounts[i];
        g4_req *r = s->dreqs[i];
        s->n_drafts[slot] = 0;
        if (st) {
            g4_pcache_forget(s->pc, slot);
            finish(s, r, G4_FIN_ERROR, g4_last_error());
            o += cnt;
            continue;
        }
        /* counted before the emit that may finish r: its client then reads them in /metrics */
        if (cnt > 1) g4_metrics_spec(s->mx, cnt - 1, 0);
        int k = 0, done = 0;   /* r is gone once emit reports it finished */
        for (;; k++) {
            done = emit(s, r, am ? NULL : s->vlogits + (size_t)(o + k) * s->V, am ? s->vnext[o + k] : 0);
            if (done || k == cnt - 1 || r->next_tok != s->vids[o + k + 1]) break;
            g4_metrics_spec(s->mx, 0, 1);   /* draft k + 1 stands */
        }
        if (!done) plan_drafts(s, r, o + k, s->dpos[i], s->dpos[i] + k + 1);
        g4_pcache_fed(s->pc, slot, s->vids + o, k + 1, 0);   /* the rows whose KV stays */
        if (k + 1 < cnt) g4_slot_rewind(s->m, slot, s->dpos[i] + k + 1);
        o += cnt;
    }
}

static void *sched_main(void *arg) {
    g4_sched *s = arg;
    for (;;) {
        int busy = 0;
        for (int i = 0; i < s->n_slots; i++) busy += s->slot_req[i] != NULL;
        pthread_mutex_lock(&s->mu);
        while (!s->stopping && !s->qhead && busy == 0) {
            /* idle: a heartbeat round over an MPI group every HEARTBEAT_S, so a rank that stops
             * between requests turns /health to 503 without waiting for a request to find out */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += HEARTBEAT_S;
            if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT && !s->stopping && !s->qhead &&
                !g4_model_group_lost(s->m)) {
                pthread_mutex_unlock(&s->mu);
                g4_model_ping(s->m);   /* a no-op without an MPI group */
                pthread_mutex_lock(&s->mu);
            }
        }
        g4_req *refused = NULL;
        if (s->stopping) {   /* never started: refuse them */
            refused = s->qhead;
            s->qhead = s->qtail = NULL;
            s->n_queued = 0;
        }
        g4_req *left = NULL;   /* cancelled while waiting (client gone, --queue-timeout): out of the queue */
        s->qtail = NULL;
        for (g4_req **pp = &s->qhead, *r; (r = *pp);) {
            if (cancelled(r)) { *pp = r->next; s->n_queued--; r->next = left; left = r; }
            else { s->qtail = r; pp = &r->next; }
        }
        if (s->stopping && busy == 0 && !refused) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        g4_req *admitted[s->n_slots];
        int free_slots[s->n_slots], n_free = 0, n_adm = 0;
        for (int i = 0; i < s->n_slots; i++)
            if (!s->slot_req[i]) free_slots[n_free++] = i;
        while (n_adm < n_free && s->qhead) {
            g4_req *r = s->qhead;
            s->qhead = r->next;
            if (!s->qhead) s->qtail = NULL;
            s->n_queued--;
            r->next = NULL;
            admitted[n_adm++] = r;
        }
        const int past_deadline = s->stopping && g4_now() > s->deadline, queued = s->n_queued;
        pthread_mutex_unlock(&s->mu);
        /* the requests that left the queue leave its gauge before a cancelled one's counter moves:
         * a scrape never counts one both cancelled and waiting (the other gauges follow the step) */
        if (refused || left) g4_metrics_queue(s->mx, queued);

        while (refused) {
            g4_req *n = refused->next;
            refused->next = NULL;
            finish(s, refused, G4_FIN_CANCELLED, "the server is shutting down");
            refused = n;
        }
        while (left) {
            g4_req *n = left->next;
            left->next = NULL;
            finish(s, left, G4_FIN_CANCELLED, NULL);
            left = n;
        }
        for (int i = 0; i < n_adm; i++) {   /* FIFO; each to the free slot that reuses most of it */
            g4_req *r = admitted[i];
            const int media = g4_req_media_prompt(r->media) != NULL;   /* images: a fresh slot */
            const g4_pcache_plan p = g4_pcache_place(s->pc, free_slots, n_free, r->prompt, media ? 1 : r->n_prompt);
            if (media) g4_pcache_skip(s->pc, p.slot);
            for (int k = 0; k < n_free; k++)
                if (free_slots[k] == p.slot) free_slots[k] = free_slots[--n_free];
            r->slot = p.slot;
            r->n_cached = p.reused;
            r->split = p.split;
            r->state = ST_ADMITTED;
            s->slot_req[p.slot] = r;
            setup(s, r);
        }
        for (int i = 0; i < s->n_slots; i++) {
            g4_req *r = s->slot_req[i];
            if (r && (past_deadline || cancelled(r))) finish(s, r, G4_FIN_CANCELLED, past_deadline ? "the server is shutting down" : NULL);
        }

        /* one prefill slice: the oldest request still prefilling */
        g4_req *pr = NULL;
        for (int i = 0; i < s->n_slots; i++) {
            g4_req *r = s->slot_req[i];
            if (r && r->state == ST_PREFILL && (!pr || r->seq < pr->seq)) pr = r;
        }
        if (pr) {
            const int left = pr->n_prompt - pr->n_prefilled;
            g4_media_prompt *mp = g4_req_media_prompt(pr->media);
            int n = left < s->chunk ? left : s->chunk;
            if (mp) n = g4_media_prompt_slice(mp, pr->n_prefilled, n);   /* whole images */
            const int last = n == left;
            const int am = last && argmax_only(pr);
            int32_t next = 0;
            g4_status st = mp ? g4_prefill_media_range(s->m, pr->slot, mp, pr->n_prefilled, n, last && !am ? s->logits : NULL,
                                                       am ? &next : NULL)
                         : am ? g4_prefill_argmax(s->m, pr->slot, pr->prompt + pr->n_prefilled, n, &next)
                              : g4_prefill(s->m, pr->slot, pr->prompt + pr->n_prefilled, n, last ? s->logits : NULL);
            if (st) {
                g4_pcache_forget(s->pc, pr->slot);
                finish(s, pr, G4_FIN_ERROR, g4_last_error());
            } else {
                g4_pcache_fed(s->pc, pr->slot, pr->prompt + pr->n_prefilled, n, 1);
                pr->n_prefilled += n;
                /* slices start on chunk boundaries, so they pass through both snapshot points */
                if (pr->n_prefilled == pr->split || pr->n_prefilled == pr->n_prompt / s->chunk * s->chunk)
                    g4_pcache_save(s->pc, pr->slot);
                /* the first token; its drafts from the prefill's last row, before another step */
                if (last && !emit(s, pr, am ? NULL : s->logits, next) && s->drafter)
                    plan_drafts(s, pr, 0, 0, pr->n_prompt);
            }
        }

        /* one batched decode step over every decoding slot */
        int n = 0;
        for (int i = 0; i < s->n_slots; i++) {
            g4_req *r = s->slot_req[i];
            if (r && r->state == ST_DECODE) {
                s->dslots[n] = i;
                s->dids[n] = r->next_tok;
                s->dreqs[n++] = r;
            }
        }
        if (n && s->drafter) decode_spec(s, n);
        else if (n) {
            int am = 1;
            for (int i = 0; i < n; i++) am &= argmax_only(s->dreqs[i]);
            g4_status st = am ? g4_decode_argmax(s->m, n, s->dslots, s->dids, s->dnext)
                              : g4_decode(s->m, n, s->dslots, s->dids, s->logits);
            g4_metrics_decode_step(s->mx, n);
            for (int i = 0; i < n; i++) {
                if (st) g4_pcache_forget(s->pc, s->dslots[i]);
                else g4_pcache_fed(s->pc, s->dslots[i], &s->dids[i], 1, 0);
                if (st) finish(s, s->dreqs[i], G4_FIN_ERROR, g4_last_error());
                else emit(s, s->dreqs[i], am ? NULL : s->logits + (size_t)i * s->V, am ? s->dnext[i] : 0);
            }
        }

        busy = 0;
        long kv = 0;
        for (int i = 0; i < s->n_slots; i++)
            if (s->slot_req[i]) { busy++; kv += g4_slot_pos(s->m, i); }
        pthread_mutex_lock(&s->mu);
        int q = s->n_queued;
        pthread_mutex_unlock(&s->mu);
        g4_metrics_gauges(s->mx, q, busy, s->n_slots, kv, (long)s->info->ctx * s->n_slots);
    }
    return NULL;
}

g4_status g4_sched_start(g4_sched *s) {
    if (pthread_create(&s->th, NULL, sched_main, s)) return g4_fail(G4_ERR_RUNTIME, "cannot start the scheduler thread");
    s->started = 1;
    g4_metrics_gauges(s->mx, 0, 0, s->n_slots, 0, (long)s->info->ctx * s->n_slots);
    return G4_OK;
}

int g4_sched_submit(g4_sched *s, g4_req *r) {
    pthread_mutex_lock(&s->mu);
    if (s->stopping || (s->max_queue > 0 && s->n_queued >= s->max_queue)) {
        const int full = !s->stopping;
        pthread_mutex_unlock(&s->mu);
        return full ? -2 : -1;
    }
    pthread_mutex_lock(&r->mu);
    r->refs++;
    r->t_submit = g4_now();
    pthread_mutex_unlock(&r->mu);
    r->seq = s->seq++;
    r->next = NULL;
    if (s->qtail) s->qtail->next = r;
    else s->qhead = r;
    s->qtail = r;
    s->n_queued++;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void g4_sched_shutdown(g4_sched *s, double grace_s) {
    pthread_mutex_lock(&s->mu);
    if (!s->stopping) {
        s->stopping = 1;
        s->deadline = g4_now() + grace_s;
    }
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->started) pthread_join(s->th, NULL);
    s->started = 0;
}

g4_status g4_sched_set_spec(g4_sched *s, g4_drafter *d, int draft_max) {
    if (draft_max < 1 || (long)s->n_slots * (draft_max + 1) > s->info->verify_rows)
        return g4_fail(G4_ERR_INPUT, "serve: %d slots of %d drafts need %d verify rows, the model has %d", s->n_slots,
                       draft_max, s->n_slots * (draft_max + 1), s->info->verify_rows);
    const size_t rows = (size_t)s->n_slots * (size_t)(draft_max + 1);
    s->dcounts = malloc((size_t)s->n_slots * sizeof *s->dcounts);
    s->dpos = malloc((size_t)s->n_slots * sizeof *s->dpos);
    s->vids = malloc(rows * sizeof *s->vids);
    s->vnext = malloc(rows * sizeof *s->vnext);
    s->vlogits = malloc(rows * (size_t)s->V * sizeof *s->vlogits);
    s->hist = malloc(((size_t)s->info->ctx + 1) * sizeof *s->hist);
    s->drafts = malloc((size_t)s->n_slots * (size_t)draft_max * sizeof *s->drafts);
    s->n_drafts = calloc((size_t)s->n_slots, sizeof *s->n_drafts);
    s->hidden = malloc((size_t)s->info->hidden_size * sizeof *s->hidden);
    if (!s->dcounts || !s->dpos || !s->vids || !s->vnext || !s->vlogits || !s->hist || !s->drafts || !s->n_drafts ||
        !s->hidden)
        return g4_fail(G4_ERR_NOMEM, "out of memory for speculative decoding's %zu rows", rows);
    s->drafter = d;
    s->K = draft_max;
    return G4_OK;
}

void g4_sched_free(g4_sched *s) {
    if (!s) return;
    if (s->started) g4_sched_shutdown(s, 0);
    free(s->dcounts);
    free(s->dpos);
    free(s->vids);
    free(s->vnext);
    free(s->vlogits);
    free(s->hist);
    free(s->drafts);
    free(s->n_drafts);
    free(s->hidden);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    g4_pcache_free(s->pc);
    free(s->slot_req);
    free(s->logits);
    free(s->dslots);
    free(s->dids);
    free(s->dnext);
    free(s->dreqs);
    free(s);
}
