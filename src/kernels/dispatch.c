/* dispatch.c — picks the kernel table once per process: the best path this CPU supports, or
 * the one named by G4_CPU_ISA (scalar|avx2) so tests can run every path on one machine. */
#include <stdlib.h>
#include <string.h>

#include "gemma4c.h"
#include "kernels/kernels.h"

const g4_kernels *g4_kernels_get(void) {
    const char *isa = getenv("G4_CPU_ISA");
    if (isa && *isa && strcmp(isa, "auto")) {
        const g4_kernels *k = !strcmp(isa, "scalar") ? g4_kernels_scalar()
                            : !strcmp(isa, "avx2") ? g4_kernels_avx2() : NULL;
        if (!k) g4_fail(G4_ERR_INPUT, "G4_CPU_ISA=%s: unknown or not supported by this CPU (scalar, avx2)", isa);
        return k;
    }
    const g4_kernels *k = g4_kernels_avx2();
    return k ? k : g4_kernels_scalar();
}
