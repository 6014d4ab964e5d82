/* error.c — the thread-local "last error" message behind g4_last_error().
 * Owns only the message buffer; callers decide the status code. */
#include "gemma4c.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char g_last_error[1024];

const char *g4_last_error(void) { return g_last_error[0] ? g_last_error : "no error"; }

g4_status g4_fail(g4_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_last_error, sizeof g_last_error, fmt, ap);
    va_end(ap);
    return st;
}
