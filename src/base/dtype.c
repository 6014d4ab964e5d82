/* dtype.c — sizes and names of the weight element types (see dtype.h). */
#include "base/dtype.h"

static const struct { const char *name; int block; int bytes; } info[G4_DT_COUNT] = {
    [G4_DT_F32] = {"F32", 1, 4},      [G4_DT_F16] = {"F16", 1, 2},
    [G4_DT_BF16] = {"BF16", 1, 2},    [G4_DT_Q8_0] = {"Q8_0", 32, 34},
    [G4_DT_Q4_0] = {"Q4_0", 32, 18},  [G4_DT_Q5_0] = {"Q5_0", 32, 22},
    [G4_DT_Q4_K] = {"Q4_K", 256, 144}, [G4_DT_Q6_K] = {"Q6_K", 256, 210},
    [G4_DT_Q5_K] = {"Q5_K", 256, 176}, [G4_DT_IQ4_XS] = {"IQ4_XS", 256, 136},
    [G4_DT_Q3_K] = {"Q3_K", 256, 110}, [G4_DT_Q2_K] = {"Q2_K", 256, 84},
    [G4_DT_IQ4_NL] = {"IQ4_NL", 32, 18}, [G4_DT_Q4_1] = {"Q4_1", 32, 20}, [G4_DT_Q5_1] = {"Q5_1", 32, 24},
};

size_t g4_dtype_size(g4_dtype dt) { return (unsigned)dt < G4_DT_COUNT ? (size_t)info[dt].bytes : 0; }
int g4_dtype_block(g4_dtype dt) { return (unsigned)dt < G4_DT_COUNT ? info[dt].block : 1; }
size_t g4_dtype_row_bytes(g4_dtype dt, int64_t n) {
    return (size_t)(n / g4_dtype_block(dt)) * g4_dtype_size(dt);
}
const char *g4_dtype_name(g4_dtype dt) { return (unsigned)dt < G4_DT_COUNT ? info[dt].name : "?"; }
