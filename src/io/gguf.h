/* gguf.h — GGUF (llama.cpp's single-file model format, versions 2 and 3) memory-mapped and
 * zero-copy: the metadata key/values (every value type, arrays included) and the tensor table,
 * every length, offset and size checked against the file before use. Knows nothing about what
 * a key or tensor means (see model/gguf_bind.c and tokenizer/tokenizer_gguf.c). */
#ifndef G4_GGUF_H
#define G4_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "gemma4c.h"
#include "io/safetensors.h"

/* Value types as stored (gguf_type in ggml/gguf.h). */
enum {
    G4_GGUF_UINT8 = 0, G4_GGUF_INT8 = 1, G4_GGUF_UINT16 = 2, G4_GGUF_INT16 = 3,
    G4_GGUF_UINT32 = 4, G4_GGUF_INT32 = 5, G4_GGUF_FLOAT32 = 6, G4_GGUF_BOOL = 7,
    G4_GGUF_STRING = 8, G4_GGUF_ARRAY = 9, G4_GGUF_UINT64 = 10, G4_GGUF_INT64 = 11,
    G4_GGUF_FLOAT64 = 12, G4_GGUF_NTYPES
};

typedef struct {
    const char *key;        /* into the mapping, NOT NUL-terminated: use key_len */
    uint32_t key_len;
    uint32_t type;          /* G4_GGUF_* */
    uint32_t arr_type;      /* element type when type == ARRAY */
    uint64_t n;             /* elements (1 for scalars; string: its byte length) */
    const uint8_t *val;     /* scalar value / string bytes / first array element */
} g4_gguf_kv;

typedef struct {
    char *name;             /* NUL-terminated copy */
    uint32_t ggml_type;     /* ggml_type id as stored */
    int n_dims;
    uint64_t ne[4];         /* ggml order: ne[0] is the contiguous (innermost) dimension */
    const void *data;       /* into the mapping, aligned to general.alignment */
    size_t nbytes;
} g4_gguf_tensor;

typedef struct {
    char *path;
    void *map;              /* the mapping (owned unless moved into a tensor set) */
    size_t size;
    int owns_map;
    uint32_t version;
    uint64_t alignment;
    g4_gguf_kv *kv;
    uint64_t n_kv;
    g4_gguf_tensor *tensors;
    uint64_t n_tensors;
} g4_gguf;

/* Maps and parses `path`. Errors name the file and the field or tensor at fault. */
g4_status g4_gguf_open(const char *path, g4_gguf **out);
/* Parses a file image in memory (not copied, not owned; `path` is for messages). */
g4_status g4_gguf_parse(const void *buf, size_t size, const char *path, g4_gguf **out);
void g4_gguf_free(g4_gguf *g);
/* 1 when the file at `path` starts with the GGUF magic. */
int g4_is_gguf(const char *path);

const g4_gguf_kv *g4_gguf_find(const g4_gguf *g, const char *key);
/* Typed look-ups: *found = 0 when the key is absent (G4_OK); a present value of the wrong type
 * is an error naming the file and key. Integer getters accept every integer type. */
g4_status g4_gguf_get_int(const g4_gguf *g, const char *key, int64_t *out, int *found);
g4_status g4_gguf_get_float(const g4_gguf *g, const char *key, double *out, int *found);
g4_status g4_gguf_get_bool(const g4_gguf *g, const char *key, int *out, int *found);
/* String value (not NUL-terminated). */
g4_status g4_gguf_get_str(const g4_gguf *g, const char *key, const char **s, size_t *len, int *found);
/* Array of `elem_type`; *kv = NULL when absent. */
g4_status g4_gguf_get_arr(const g4_gguf *g, const char *key, uint32_t elem_type, const g4_gguf_kv **kv);
/* Walks a (validated) string array: returns the element after `p` (p = kv->val first). */
const uint8_t *g4_gguf_str_next(const uint8_t *p, const char **s, uint64_t *len);
/* Numeric array element i as double / int64 (elem types 0-7, 10-12). */
double g4_gguf_arr_f64(const g4_gguf_kv *kv, uint64_t i);
int64_t g4_gguf_arr_i64(const g4_gguf_kv *kv, uint64_t i);

/* ggml type name ("Q4_K", ...) or NULL when the id is unknown. */
const char *g4_ggml_type_name(uint32_t type);
/* Appends every tensor to `set` (row-major shape = ne reversed; the dtype must be one gemma4c
 * computes with, else an error naming the tensor and type) and hands the mapping to the set. */
g4_status g4_gguf_export_tensors(g4_gguf *g, g4_tensor_set *set);

#endif
