/* cli_bench_verify.c — `gemma4c bench --verify K,...`: what a speculative decoding round's verify
 * step of K + 1 rows of one slot costs beside a one-row decode step at the same position (the
 * figure an acceptance rate turns into a speedup; docs/speculative.md). Both are greedy steps
 * (the argmax of every row, as `run` takes them), each undone by a rewind so that every step
 * starts from the same position; verify and decode reps alternate, so drift on a shared host
 * touches both alike. */
#include "cli/cli.h"

static double median(double *v, int n) {
    g4_sort_doubles(v, n);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One step of `rows` rows (1: a decode step) at position `depth` of slot 0, undone; its seconds. */
static g4_status time_step(g4_model *m, const int32_t *ids, int rows, int depth, double *secs) {
    int32_t next[65];
    int slot = 0;
    const double t0 = g4_now();
    g4_status st = rows == 1 ? g4_decode_argmax(m, 1, &slot, ids, next) : g4_verify_argmax(m, 0, ids, rows, next);
    *secs = g4_now() - t0;
    return st ? st : g4_slot_rewind(m, 0, depth);
}

g4_status cli_bench_verify(g4_model *m, const int32_t *ids, long n_ids, int depth, int reps, const long *ks, int nk,
                           cli_verify_timing *out) {
    enum { STEPS = 8, MAX_PAIRS = 64 * STEPS };
    if (n_ids < depth + 64 + STEPS) return g4_fail(G4_ERR_INPUT, "bench --verify: too few ids");
    int32_t next;
    g4_slot_reset(m, 0);
    g4_status st = depth ? g4_prefill_argmax(m, 0, ids, depth, &next) : G4_OK;   /* untimed: the context */
    /* decode and verify steps alternate, each pair's ratio taken on its own: on a shared host the
     * speed of a whole block of steps moves with the neighbours' load */
    static double v[MAX_PAIRS], d[MAX_PAIRS], q[MAX_PAIRS];
    for (int i = 0; !st && i < nk; i++) {
        int n = 0;
        for (int r = 0; !st && r < reps; r++)
            for (int s = 0; !st && s < STEPS; s++, n++) {
                st = time_step(m, ids + depth + s, 1, depth, &d[n]);
                if (!st) st = time_step(m, ids + depth + s, (int)ks[i] + 1, depth, &v[n]);
                q[n] = v[n] / d[n];
            }
        if (st) break;
        out[i].k = (int)ks[i];
        out[i].decode_s = median(d, n);
        out[i].step_s = median(v, n);
        out[i].ratio = median(q, n);
    }
    return st;
}
