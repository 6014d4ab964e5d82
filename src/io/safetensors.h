/* safetensors.h — memory-mapped safetensors files (single or sharded via
 * model.safetensors.index.json) exposed as a flat table of named tensors pointing into the maps.
 * Owns the mappings; does not know what any tensor means. */
#ifndef G4_SAFETENSORS_H
#define G4_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "gemma4c.h"
#include "base/dtype.h"

#define G4_MAX_DIMS 4

typedef struct {
    char *name;
    g4_dtype dtype;
    int n_dims;
    int64_t shape[G4_MAX_DIMS];
    const void *data;      /* into the file mapping; 2-byte aligned at least */
    size_t nbytes;
    const char *file;      /* the file it lives in, for error messages */
    int used;              /* set by the binder; unused tensors are reported as unexpected */
    int int_bytes;         /* 4 or 8: an I32 / I64 tensor (an index table, e.g. the MTP drafter's
                            * token ordering), dtype then G4_DT_COUNT so no float reader takes it;
                            * 0 for float tensors */
} g4_tensor;

typedef struct {
    void *addr;
    size_t size;
    char *path;
} g4_mapping;

typedef struct {
    g4_tensor *tensors;
    int n_tensors;
    g4_mapping *maps;
    int n_maps;
} g4_tensor_set;

/* Opens `dir`/model.safetensors, or every shard named by `dir`/model.safetensors.index.json. */
g4_status g4_st_open_dir(const char *dir, g4_tensor_set *out);
/* Maps one file and appends its tensors to `set` (used by open_dir and by the fuzz target). */
g4_status g4_st_add_file(g4_tensor_set *set, const char *path);
/* Parses a safetensors file image held in memory (header + data); tensors point into `buf`. */
g4_status g4_st_parse(g4_tensor_set *set, const void *buf, size_t size, const char *path);
g4_tensor *g4_st_find(const g4_tensor_set *set, const char *name);
void g4_st_close(g4_tensor_set *set);

#endif
