/* strbuf.h — a growable, NUL-terminated byte string for the text the library writes (JSON
 * arguments, GBNF, vocabulary JSON). A failed allocation sets oom and turns every later write into
 * a no-op, so a writer checks once at the end instead of after each piece. */
#ifndef G4_BASE_STRBUF_H
#define G4_BASE_STRBUF_H

#include <stddef.h>

typedef struct {
    char *p;        /* NULL until the first write */
    size_t len, cap;
    int oom;
} g4_strbuf;

void g4_sb_put(g4_strbuf *b, const void *s, size_t n);
void g4_sb_puts(g4_strbuf *b, const char *s);
void g4_sb_printf(g4_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
