/* sampler.c — per-request token sampling (softcap → penalties → temperature → top-k → top-p →
 * min-p → seeded draw) and OpenAI-style logprobs. Owns its scratch and PRNG state; knows
 * nothing of the model beyond the vocabulary size and the softcap value. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemma4c.h"

typedef struct {
    float x;      /* transformed logit */
    int32_t id;
} cand;

struct g4_sampler {
    g4_sampler_params p;
    int vocab;
    float softcap;
    float *work;       /* [vocab] softcapped + penalized logits */
    cand *c;           /* [vocab] candidates */
    int *counts;       /* [vocab] generated-token counts; NULL without penalties */
    uint64_t rng[4];   /* xoshiro256** state */
};

void g4_sampler_params_default(g4_sampler_params *p) {
    memset(p, 0, sizeof *p);
    p->temperature = 1.0f;
    p->top_p = 1.0f;
}

/* splitmix64 expands the 64-bit seed into the 256-bit xoshiro state (the authors' advice). */
static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t *s) {
    const uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* Uniform in [0, 1) with 53 random bits. */
static double uniform01(uint64_t *s) { return (double)(xoshiro_next(s) >> 11) * 0x1.0p-53; }

g4_status g4_sampler_new(const g4_sampler_params *p, int vocab, float softcap, g4_sampler **out) {
    *out = NULL;
    if (vocab <= 0) return g4_fail(G4_ERR_INPUT, "sampler: vocab %d must be positive", vocab);
    if (!(p->temperature >= 0) || !isfinite(p->temperature))
        return g4_fail(G4_ERR_INPUT, "temperature %g must be a finite number >= 0", p->temperature);
    if (p->top_k < 0) return g4_fail(G4_ERR_INPUT, "top_k %d must be >= 0", p->top_k);
    if (!(p->top_p > 0 && p->top_p <= 1)) return g4_fail(G4_ERR_INPUT, "top_p %g must be in (0, 1]", p->top_p);
    if (!(p->min_p >= 0 && p->min_p <= 1)) return g4_fail(G4_ERR_INPUT, "min_p %g must be in [0, 1]", p->min_p);
    if (!isfinite(p->frequency_penalty)) return g4_fail(G4_ERR_INPUT, "frequency_penalty must be finite");
    if (!isfinite(p->presence_penalty)) return g4_fail(G4_ERR_INPUT, "presence_penalty must be finite");
    g4_sampler *s = calloc(1, sizeof *s);
    if (!s) return g4_fail(G4_ERR_NOMEM, "out of memory");
    s->p = *p;
    s->vocab = vocab;
    s->softcap = softcap;
    s->work = malloc((size_t)vocab * sizeof *s->work);
    s->c = malloc((size_t)vocab * sizeof *s->c);
    if (p->frequency_penalty != 0 || p->presence_penalty != 0) s->counts = calloc((size_t)vocab, sizeof *s->counts);
    if (!s->work || !s->c || ((p->frequency_penalty != 0 || p->presence_penalty != 0) && !s->counts)) {
        g4_sampler_free(s);
        return g4_fail(G4_ERR_NOMEM, "out of memory");
    }
    uint64_t x = p->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
    *out = s;
    return G4_OK;
}

void g4_sampler_free(g4_sampler *s) {
    if (!s) return;
    free(s->work);
    free(s->c);
    free(s->counts);
    free(s);
}

void g4_sampler_accept(g4_sampler *s, int32_t id) {
    if (s->counts && id >= 0 && id < s->vocab) s->counts[id]++;
}

/* -inf (a suppressed token) must stay -inf: tanh would map it to -cap, i.e. back into play. */
static inline float softcap1(float x, float cap) {
    if (cap <= 0 || (isinf(x) && x < 0)) return x;
    return tanhf(x / cap) * cap;
}

/* A strict total order: larger logit first, lower id on ties, so every step is deterministic. */
static inline int better(const cand *a, const cand *b) { return a->x > b->x || (a->x == b->x && a->id < b->id); }

static int cand_cmp(const void *pa, const void *pb) {
    const cand *a = pa, *b = pb;
    return better(a, b) ? -1 : better(b, a) ? 1 : 0;
}

/* Quickselect: afterwards c[0..k) hold the k best candidates of c[0..n), in no order. */
static void select_top(cand *c, int n, int k) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const cand pivot = c[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (better(&c[i], &pivot)) i++;
            while (better(&pivot, &c[j])) j--;
            if (i <= j) { cand t = c[i]; c[i] = c[j]; c[j] = t; i++; j--; }
        }
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else break;
    }
}

/* Sorts the best m of c[0..n) to the front in descending order. */
static void sort_top(cand *c, int n, int m) {
    if (m < n) select_top(c, n, m);
    qsort(c, (size_t)m, sizeof *c, cand_cmp);
}

int32_t g4_sampler_sample(g4_sampler *s, const float *logits) {
    const g4_sampler_params *p = &s->p;
    const int V = s->vocab;
    int32_t tok;
    if (p->temperature == 0 && !s->counts) {
        tok = g4_argmax(logits, V);   /* raw logits: the softcap is monotonic */
        g4_sampler_accept(s, tok);
        return tok;
    }
    float *w = s->work;
    for (int i = 0; i < V; i++) w[i] = softcap1(logits[i], s->softcap);
    if (s->counts)
        for (int i = 0; i < V; i++)
            if (s->counts[i]) w[i] -= (float)s->counts[i] * p->frequency_penalty + p->presence_penalty;
    if (p->temperature == 0) {
        tok = g4_argmax(w, V);
        g4_sampler_accept(s, tok);
        return tok;
    }
    const float inv_t = 1.0f / p->temperature;
    cand *c = s->c;
    int n = 0;
    for (int i = 0; i < V; i++)
        if (w[i] > -INFINITY) c[n++] = (cand){w[i] * inv_t, i};
    if (n == 0) {   /* everything suppressed: nothing sensible to draw from */
        tok = g4_argmax(logits, V);
        g4_sampler_accept(s, tok);
        return tok;
    }
    int sorted = 0;   /* c[0..sorted) is in descending order */
    if (p->top_k > 0 && p->top_k < n) {
        sort_top(c, n, p->top_k);
        n = sorted = p->top_k;
    }
    float mx = c[0].x;
    for (int i = 1; i < n; i++)
        if (c[i].x > mx) mx = c[i].x;
    double z = 0;
    for (int i = 0; i < n; i++) z += exp((double)(c[i].x - mx));
    if (p->top_p < 1) {
        /* Smallest prefix of the sorted distribution whose mass reaches top_p. Sorting only a
         * growing head keeps this O(V) for peaked distributions instead of a full sort. */
        const double target = (double)p->top_p * z;
        int m = sorted ? sorted : (n < 64 ? n : 64);
        for (;;) {
            if (m > sorted) { sort_top(c, n, m); sorted = m; }
            double cum = 0;
            int cut = -1;
            for (int i = 0; i < m; i++) {
                cum += exp((double)(c[i].x - mx));
                if (cum >= target) { cut = i + 1; break; }
            }
            if (cut > 0) { n = cut; break; }
            if (m == n) break;   /* rounding: keep everything */
            m = m > n / 4 ? n : m * 4;
        }
    }
    if (p->min_p > 0) {
        /* p_i >= min_p * p_max  <=>  x_i - mx >= log(min_p) */
        const double lim = log((double)p->min_p);
        int k = 0;
        for (int i = 0; i < n; i++)
            if ((double)(c[i].x - mx) >= lim) c[k++] = c[i];
        n = k;   /* the max itself always passes */
    }
    double tot = 0;
    for (int i = 0; i < n; i++) tot += exp((double)(c[i].x - mx));
    const double r = uniform01(s->rng) * tot;
    double acc = 0;
    tok = c[n - 1].id;
    for (int i = 0; i < n; i++) {
        acc += exp((double)(c[i].x - mx));
        if (r < acc) { tok = c[i].id; break; }
    }
    g4_sampler_accept(s, tok);
    return tok;
}

int g4_logprobs(const float *logits, int vocab, float softcap, int32_t tok, int n_top,
                float *lp_tok, int32_t *top_ids, float *top_lps) {
    float mx = -INFINITY;
    for (int i = 0; i < vocab; i++) {
        float y = softcap1(logits[i], softcap);
        if (y > mx) mx = y;
    }
    double z = 0;
    for (int i = 0; i < vocab; i++) z += exp((double)(softcap1(logits[i], softcap) - mx));
    const double lse = (double)mx + log(z);
    if (lp_tok) *lp_tok = tok >= 0 && tok < vocab ? (float)(softcap1(logits[tok], softcap) - lse) : -INFINITY;
    if (n_top <= 0 || !top_ids || !top_lps) return 0;
    if (n_top > vocab) n_top = vocab;
    /* Insertion into a small sorted list: O(vocab) for the usual n_top <= 20. */
    int k = 0;
    for (int i = 0; i < vocab; i++) {
        float y = softcap1(logits[i], softcap);
        if (k == n_top && !(y > top_lps[k - 1])) continue;
        int j = k < n_top ? k++ : k - 1;
        while (j > 0 && y > top_lps[j - 1]) { top_lps[j] = top_lps[j - 1]; top_ids[j] = top_ids[j - 1]; j--; }
        top_lps[j] = y;
        top_ids[j] = i;
    }
    for (int j = 0; j < k; j++) top_lps[j] = (float)(top_lps[j] - lse);
    return k;
}
