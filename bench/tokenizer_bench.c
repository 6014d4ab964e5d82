/* tokenizer_bench.c — the gemma4c half of bench/tokenizer_bench.py: tokenizer load time and
 * single-thread encode throughput over a corpus file of records (u32 little-endian byte length,
 * then the UTF-8 bytes). Prints one JSON line. Owns no tokenizer logic.
 * usage: tokenizer_bench TOKENIZER_DIR CORPUS_FILE [REPEATS] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gemma4c.h"

static double clk(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static double now(void) { return clk(CLOCK_MONOTONIC); }
/* CPU time as well as wall time: on a shared machine the wall clock also counts time spent
 * waiting for a core. Load uses two threads, so its CPU time is the process's. */
static double cpu_proc(void) { return clk(CLOCK_PROCESS_CPUTIME_ID); }
static double cpu_thread(void) { return clk(CLOCK_THREAD_CPUTIME_ID); }

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s TOKENIZER_DIR CORPUS_FILE [REPEATS]\n", argv[0]);
        return 2;
    }
    int repeats = argc > 3 ? atoi(argv[3]) : 3;
    if (repeats < 1) repeats = 1;
    FILE *f = fopen(argv[2], "rb");
    if (!f) { perror(argv[2]); return 2; }
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)sz + 1);
    if (!buf || fread(buf, 1, (size_t)sz, f) != (size_t)sz) { fprintf(stderr, "read failed\n"); return 2; }
    fclose(f);

    /* load: best of 3 (the first also warms the page cache) */
    double load = 1e9, load_cpu = 1e9;
    g4_tokenizer *t = NULL;
    for (int i = 0; i < 3; i++) {
        if (t) g4_tokenizer_free(t);
        double a = now(), ac = cpu_proc();
        if (g4_tokenizer_load(argv[1], &t)) { fprintf(stderr, "%s\n", g4_last_error()); return 2; }
        double b = now() - a, bc = cpu_proc() - ac;
        if (b < load) load = b;
        if (bc < load_cpu) load_cpu = bc;
    }

    double best = 1e9, best_cpu = 1e9;
    size_t bytes = 0, n_ids = 0, n_str = 0;
    for (int r = 0; r < repeats; r++) {
        bytes = n_ids = n_str = 0;
        double a = now(), ac = cpu_thread();
        for (long p = 0; p + 4 <= sz;) {
            uint32_t len;
            memcpy(&len, buf + p, 4);
            p += 4;
            int32_t *ids;
            size_t n;
            if (g4_tokenize(t, buf + p, len, 0, &ids, &n)) { fprintf(stderr, "%s\n", g4_last_error()); return 1; }
            free(ids);
            n_ids += n;
            bytes += len;
            n_str++;
            p += len;
        }
        double b = now() - a, bc = cpu_thread() - ac;
        if (b < best) best = b;
        if (bc < best_cpu) best_cpu = bc;
    }
    printf("{\"impl\": \"gemma4c\", \"load_s\": %.4f, \"load_cpu_s\": %.4f, \"encode_s\": %.4f, \"encode_cpu_s\": %.4f, "
           "\"bytes\": %zu, \"strings\": %zu, \"ids\": %zu, \"encode_MBps\": %.2f, \"encode_cpu_MBps\": %.2f}\n",
           load, load_cpu, best, best_cpu, bytes, n_str, n_ids, bytes / best / 1e6, bytes / best_cpu / 1e6);
    g4_tokenizer_free(t);
    free(buf);
    return 0;
}
