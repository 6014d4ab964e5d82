/* test_util.h — small helpers the C tests share (header-only, every function static): reading a
 * whole fixture file. Include after the standard headers a test already uses. */
#ifndef G4_TEST_UTIL_H
#define G4_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>

/* The whole file at `path` in a malloc'd buffer (one spare byte, so text can be terminated), its
 * length in *n; NULL (and *n = 0) if it cannot be opened. */
static inline void *slurp(const char *path, size_t *n) {
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc((size_t)sz + 1);
    *n = fread(p, 1, (size_t)sz, f);
    fclose(f);
    return p;
}

#endif
