/* gguf.c — GGUF reader: "GGUF", u32 version (2|3), u64 tensor count, u64 kv count, the kvs
 * (u64-length strings, u32 type, value; arrays: u32 elem type, u64 count, elements), the tensor
 * infos (name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset), padding to
 * general.alignment, then the data. A lying or truncated file is refused with one line naming the
 * file and the field or tensor; nothing is read before its bounds are checked. */
#include "io/gguf.h"
#include "io/filemap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct { const char *name; uint32_t block, bytes; } ggml_types[] = {
    [0] = {"F32", 1, 4},        [1] = {"F16", 1, 2},        [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},     [6] = {"Q5_0", 32, 22},     [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},     [9] = {"Q8_1", 32, 40},     [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110},  [12] = {"Q4_K", 256, 144},  [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},  [15] = {"Q8_K", 256, 292},  [16] = {"IQ2_XXS", 256, 66},
    [17] = {"IQ2_XS", 256, 74}, [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18},  [21] = {"IQ3_S", 256, 110}, [22] = {"IQ2_S", 256, 82},
    [23] = {"IQ4_XS", 256, 136}, [24] = {"I8", 1, 1},       [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},       [27] = {"I64", 1, 8},       [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 56},  [30] = {"BF16", 1, 2},      [34] = {"TQ1_0", 256, 54},
    [35] = {"TQ2_0", 256, 66},  [39] = {"MXFP4", 32, 17},
};
#define N_GGML_TYPES (sizeof ggml_types / sizeof *ggml_types)

const char *g4_ggml_type_name(uint32_t t) { return t < N_GGML_TYPES ? ggml_types[t].name : NULL; }

/* ggml type id -> the dtype gemma4c computes with, -1 if none */
static int ggml_to_dtype(uint32_t t) {
    switch (t) {
    case 0: return G4_DT_F32;   case 1: return G4_DT_F16;   case 30: return G4_DT_BF16;
    case 8: return G4_DT_Q8_0;  case 2: return G4_DT_Q4_0;  case 6: return G4_DT_Q5_0;
    case 12: return G4_DT_Q4_K; case 13: return G4_DT_Q5_K; case 14: return G4_DT_Q6_K;
    case 23: return G4_DT_IQ4_XS; case 11: return G4_DT_Q3_K; case 10: return G4_DT_Q2_K;
    case 20: return G4_DT_IQ4_NL; case 3: return G4_DT_Q4_1; case 7: return G4_DT_Q5_1;
    default: return -1;
    }
}

static const uint8_t scalar_size[G4_GGUF_NTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *const type_names[G4_GGUF_NTYPES] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array",
    "uint64", "int64", "float64"};

typedef struct {
    const uint8_t *p, *end;
    const char *path;
} rd;

static int need(rd *r, uint64_t n) { return (uint64_t)(r->end - r->p) >= n; }

static g4_status rd_u32(rd *r, uint32_t *v, const char *what) {
    if (!need(r, 4)) return g4_fail(G4_ERR_INPUT, "%s: truncated GGUF file reading %s", r->path, what);
    memcpy(v, r->p, 4);
    r->p += 4;
    return G4_OK;
}

static g4_status rd_u64(rd *r, uint64_t *v, const char *what) {
    if (!need(r, 8)) return g4_fail(G4_ERR_INPUT, "%s: truncated GGUF file reading %s", r->path, what);
    memcpy(v, r->p, 8);
    r->p += 8;
    return G4_OK;
}

static g4_status rd_str(rd *r, const char **s, uint64_t *len, const char *what) {
    g4_status st = rd_u64(r, len, what);
    if (st) return st;
    if (!need(r, *len))
        return g4_fail(G4_ERR_INPUT, "%s: %s: string of %llu bytes runs past the end of the file",
                       r->path, what, (unsigned long long)*len);
    *s = (const char *)r->p;
    r->p += *len;
    return G4_OK;
}

/* Skips (validating) one value of type t; `key` names it in messages. */
static g4_status skip_value(rd *r, uint32_t t, uint32_t *arr_type, uint64_t *n, const char *key) {
    *n = 1;
    if (t >= G4_GGUF_NTYPES)
        return g4_fail(G4_ERR_INPUT, "%s: metadata '%s' has unknown value type %u", r->path, key, t);
    if (t == G4_GGUF_STRING) {
        const char *s;
        return rd_str(r, &s, n, key);
    }
    if (t != G4_GGUF_ARRAY) {
        if (!need(r, scalar_size[t]))
            return g4_fail(G4_ERR_INPUT, "%s: truncated GGUF file in the value of '%s'", r->path, key);
        if (t == G4_GGUF_BOOL && *r->p > 1)
            return g4_fail(G4_ERR_INPUT, "%s: metadata '%s' is a bool of value %u", r->path, key, *r->p);
        r->p += scalar_size[t];
        return G4_OK;
    }
    g4_status st;
    if ((st = rd_u32(r, arr_type, key)) || (st = rd_u64(r, n, key))) return st;
    if (*arr_type >= G4_GGUF_NTYPES || *arr_type == G4_GGUF_ARRAY)
        return g4_fail(G4_ERR_INPUT, "%s: metadata '%s' is an array of unsupported element type %u",
                       r->path, key, *arr_type);
    if (*arr_type == G4_GGUF_STRING) {
        /* every element needs at least its 8-byte length */
        if (*n > (uint64_t)(r->end - r->p) / 8)
            return g4_fail(G4_ERR_INPUT, "%s: metadata '%s': array of %llu strings cannot fit in the file",
                           r->path, key, (unsigned long long)*n);
        for (uint64_t i = 0; i < *n; i++) {
            const char *s;
            uint64_t len;
            if ((st = rd_str(r, &s, &len, key))) return st;
        }
        return G4_OK;
    }
    const uint64_t es = scalar_size[*arr_type];
    if (*n > (uint64_t)(r->end - r->p) / es)
        return g4_fail(G4_ERR_INPUT, "%s: metadata '%s': array of %llu %s runs past the end of the file",
                       r->path, key, (unsigned long long)*n, type_names[*arr_type]);
    if (*arr_type == G4_GGUF_BOOL)
        for (uint64_t i = 0; i < *n; i++)
            if (r->p[i] > 1)
                return g4_fail(G4_ERR_INPUT, "%s: metadata '%s' has a bool element of value %u", r->path, key, r->p[i]);
    r->p += *n * es;
    return G4_OK;
}

static int key_is(const g4_gguf_kv *kv, const char *key) {
    size_t n = strlen(key);
    return kv->key_len == n && !memcmp(kv->key, key, n);
}

static g4_status parse(g4_gguf *g, const uint8_t *buf, size_t size) {
    rd r = {buf, buf + size, g->path};
    g4_status st;
    if (size < 4 || memcmp(buf, "GGUF", 4))
        return g4_fail(G4_ERR_INPUT, "%s: not a GGUF file (bad magic)", g->path);
    r.p += 4;
    uint64_t n_t = 0, n_kv = 0;
    if ((st = rd_u32(&r, &g->version, "version"))) return st;
    if (g->version != 2 && g->version != 3)
        return g4_fail(G4_ERR_INPUT, "%s: GGUF version %u is not supported (2 and 3 are)", g->path, g->version);
    if ((st = rd_u64(&r, &n_t, "tensor_count")) || (st = rd_u64(&r, &n_kv, "kv_count"))) return st;
    /* a kv takes >= 12 bytes (key length + type), a tensor info >= 24: bound the counts by the
     * file before allocating anything for them */
    if (n_kv > size / 12) return g4_fail(G4_ERR_INPUT, "%s: kv_count %llu cannot fit in the file", g->path, (unsigned long long)n_kv);
    if (n_t > size / 24) return g4_fail(G4_ERR_INPUT, "%s: tensor_count %llu cannot fit in the file", g->path, (unsigned long long)n_t);
    g->kv = calloc(n_kv ? n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(n_t ? n_t : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors) return g4_fail(G4_ERR_NOMEM, "out of memory reading %s", g->path);
    g->alignment = 32;
    for (uint64_t i = 0; i < n_kv; i++) {
        g4_gguf_kv *kv = &g->kv[i];
        const char *k;
        uint64_t kl;
        char what[48];
        snprintf(what, sizeof what, "the key of metadata #%llu", (unsigned long long)i);
        if ((st = rd_str(&r, &k, &kl, what))) return st;
        if (kl == 0 || kl > 65535) return g4_fail(G4_ERR_INPUT, "%s: metadata #%llu has a key of %llu bytes", g->path, (unsigned long long)i, (unsigned long long)kl);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(kl < 255 ? kl : 255), k);
        kv->key = k;
        kv->key_len = (uint32_t)kl;
        for (uint64_t j = 0; j < i; j++)
            if (g->kv[j].key_len == kl && !memcmp(g->kv[j].key, k, kl))
                return g4_fail(G4_ERR_INPUT, "%s: metadata key '%s' appears twice", g->path, key);
        if ((st = rd_u32(&r, &kv->type, key))) return st;
        /* value start: after the array header for arrays */
        const uint8_t *v0 = r.p;
        if ((st = skip_value(&r, kv->type, &kv->arr_type, &kv->n, key))) return st;
        kv->val = kv->type == G4_GGUF_ARRAY ? v0 + 12 : kv->type == G4_GGUF_STRING ? v0 + 8 : v0;
        if (key_is(kv, "general.alignment")) {
            if (kv->type != G4_GGUF_UINT32)
                return g4_fail(G4_ERR_INPUT, "%s: general.alignment must be uint32 (is %s)", g->path, type_names[kv->type]);
            uint32_t a;
            memcpy(&a, kv->val, 4);
            if (a == 0 || (a & (a - 1)) || a > (1u << 20))
                return g4_fail(G4_ERR_INPUT, "%s: general.alignment %u is not a power of two up to 1 MiB", g->path, a);
            g->alignment = a;
        }
    }
    g->n_kv = n_kv;
    for (uint64_t i = 0; i < n_t; i++) {
        g4_gguf_tensor *t = &g->tensors[i];
        const char *nm;
        uint64_t nl;
        char what[48];
        snprintf(what, sizeof what, "the name of tensor #%llu", (unsigned long long)i);
        if ((st = rd_str(&r, &nm, &nl, what))) return st;
        if (nl == 0 || nl > 1024)
            return g4_fail(G4_ERR_INPUT, "%s: tensor #%llu has a name of %llu bytes", g->path, (unsigned long long)i, (unsigned long long)nl);
        if (memchr(nm, 0, nl)) return g4_fail(G4_ERR_INPUT, "%s: tensor #%llu has a NUL in its name", g->path, (unsigned long long)i);
        if (!(t->name = malloc(nl + 1))) return g4_fail(G4_ERR_NOMEM, "out of memory reading %s", g->path);
        memcpy(t->name, nm, nl);
        t->name[nl] = 0;
        g->n_tensors = i + 1;   /* so that free() releases the names read so far */
        uint32_t nd = 0;
        if ((st = rd_u32(&r, &nd, t->name))) return st;
        if (nd < 1 || nd > 4)
            return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' has %u dimensions (1 to 4 allowed)", g->path, t->name, nd);
        t->n_dims = (int)nd;
        uint64_t count = 1;
        for (uint32_t d = 0; d < nd; d++) {
            if ((st = rd_u64(&r, &t->ne[d], t->name))) return st;
            if (t->ne[d] == 0 || t->ne[d] > (1ull << 40) || (count *= t->ne[d]) > (1ull << 42))
                return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' has an invalid dimension %u = %llu", g->path, t->name, d, (unsigned long long)t->ne[d]);
        }
        uint64_t off = 0;
        if ((st = rd_u32(&r, &t->ggml_type, t->name)) || (st = rd_u64(&r, &off, t->name))) return st;
        if (t->ggml_type >= N_GGML_TYPES || !ggml_types[t->ggml_type].name)
            return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' has unknown ggml type %u", g->path, t->name, t->ggml_type);
        const uint32_t bs = ggml_types[t->ggml_type].block;
        if (t->ne[0] % bs)
            return g4_fail(G4_ERR_INPUT, "%s: tensor '%s': row of %llu elements is not a multiple of the %s block (%u)",
                           g->path, t->name, (unsigned long long)t->ne[0], ggml_types[t->ggml_type].name, bs);
        t->nbytes = (size_t)(count / bs * ggml_types[t->ggml_type].bytes);
        if (off % g->alignment)
            return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' offset %llu is not a multiple of general.alignment %llu",
                           g->path, t->name, (unsigned long long)off, (unsigned long long)g->alignment);
        t->data = (const void *)(uintptr_t)off;   /* resolved below, once the data start is known */
        for (uint64_t j = 0; j < i; j++)
            if (!strcmp(g->tensors[j].name, t->name))
                return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' appears twice", g->path, t->name);
    }
    const uint64_t pos = (uint64_t)(r.p - buf), data0 = (pos + g->alignment - 1) / g->alignment * g->alignment;
    if (n_t && data0 > size)
        return g4_fail(G4_ERR_INPUT, "%s: truncated GGUF file: no tensor data after the header", g->path);
    const uint64_t avail = n_t ? size - data0 : 0;
    for (uint64_t i = 0; i < n_t; i++) {
        g4_gguf_tensor *t = &g->tensors[i];
        uint64_t off = (uint64_t)(uintptr_t)t->data;
        if (off > avail || t->nbytes > avail - off)
            return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' data [%llu, +%zu) runs past the end of the data (%llu bytes; truncated file?)",
                           g->path, t->name, (unsigned long long)off, t->nbytes, (unsigned long long)avail);
        t->data = buf + data0 + off;
    }
    return G4_OK;
}

g4_status g4_gguf_parse(const void *buf, size_t size, const char *path, g4_gguf **out) {
    *out = NULL;
    g4_gguf *g = calloc(1, sizeof *g);
    if (!g || !(g->path = strdup(path))) { free(g); return g4_fail(G4_ERR_NOMEM, "out of memory reading %s", path); }
    g4_status st = parse(g, buf, size);
    if (st) { g4_gguf_free(g); return st; }
    *out = g;
    return G4_OK;
}

int g4_is_gguf(const char *path) {
    char m[4];
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    ssize_t n = read(fd, m, 4);
    close(fd);
    return n == 4 && !memcmp(m, "GGUF", 4);
}

g4_status g4_gguf_open(const char *path, g4_gguf **out) {
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return g4_fail(G4_ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_size == 0) {
        close(fd);
        return g4_fail(G4_ERR_INPUT, "%s: not a regular non-empty file", path);
    }
    void *map = g4_map_weights(fd, (size_t)sb.st_size, 0);
    close(fd);
    if (map == MAP_FAILED) return g4_fail(G4_ERR_RUNTIME, "%s: mmap failed: %s", path, strerror(errno));
    g4_status st = g4_gguf_parse(map, (size_t)sb.st_size, path, out);
    if (st) { munmap(map, (size_t)sb.st_size); return st; }
    (*out)->map = map;
    (*out)->size = (size_t)sb.st_size;
    (*out)->owns_map = 1;
    return G4_OK;
}

void g4_gguf_free(g4_gguf *g) {
    if (!g) return;
    for (uint64_t i = 0; i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->tensors);
    free(g->kv);
    if (g->owns_map && g->map) munmap(g->map, g->size);
    free(g->path);
    free(g);
}

const g4_gguf_kv *g4_gguf_find(const g4_gguf *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (key_is(&g->kv[i], key)) return &g->kv[i];
    return NULL;
}

static int64_t scalar_i64(uint32_t t, const uint8_t *p) {
    switch (t) {
    case G4_GGUF_UINT8: case G4_GGUF_BOOL: return *p;
    case G4_GGUF_INT8: return (int8_t)*p;
    case G4_GGUF_UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case G4_GGUF_INT16: { int16_t v; memcpy(&v, p, 2); return v; }
    case G4_GGUF_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case G4_GGUF_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case G4_GGUF_UINT64: { uint64_t v; memcpy(&v, p, 8); return v > INT64_MAX ? INT64_MAX : (int64_t)v; }
    case G4_GGUF_INT64: { int64_t v; memcpy(&v, p, 8); return v; }
    default: return 0;
    }
}

static double scalar_f64(uint32_t t, const uint8_t *p) {
    if (t == G4_GGUF_FLOAT32) { float v; memcpy(&v, p, 4); return v; }
    if (t == G4_GGUF_FLOAT64) { double v; memcpy(&v, p, 8); return v; }
    return (double)scalar_i64(t, p);
}

static int is_int_type(uint32_t t) { return t <= G4_GGUF_INT32 || t == G4_GGUF_UINT64 || t == G4_GGUF_INT64; }

static g4_status wrong(const g4_gguf *g, const char *key, const g4_gguf_kv *kv, const char *want) {
    return g4_fail(G4_ERR_INPUT, "%s: metadata '%s' is %s%s%s, expected %s", g->path, key,
                   type_names[kv->type], kv->type == G4_GGUF_ARRAY ? " of " : "",
                   kv->type == G4_GGUF_ARRAY ? type_names[kv->arr_type] : "", want);
}

g4_status g4_gguf_get_int(const g4_gguf *g, const char *key, int64_t *out, int *found) {
    const g4_gguf_kv *kv = g4_gguf_find(g, key);
    *found = kv != NULL;
    if (!kv) return G4_OK;
    if (!is_int_type(kv->type)) return wrong(g, key, kv, "an integer");
    *out = scalar_i64(kv->type, kv->val);
    return G4_OK;
}

g4_status g4_gguf_get_float(const g4_gguf *g, const char *key, double *out, int *found) {
    const g4_gguf_kv *kv = g4_gguf_find(g, key);
    *found = kv != NULL;
    if (!kv) return G4_OK;
    if (!is_int_type(kv->type) && kv->type != G4_GGUF_FLOAT32 && kv->type != G4_GGUF_FLOAT64)
        return wrong(g, key, kv, "a number");
    *out = scalar_f64(kv->type, kv->val);
    return G4_OK;
}

g4_status g4_gguf_get_bool(const g4_gguf *g, const char *key, int *out, int *found) {
    const g4_gguf_kv *kv = g4_gguf_find(g, key);
    *found = kv != NULL;
    if (!kv) return G4_OK;
    if (kv->type != G4_GGUF_BOOL) return wrong(g, key, kv, "a bool");
    *out = *kv->val;
    return G4_OK;
}

g4_status g4_gguf_get_str(const g4_gguf *g, const char *key, const char **s, size_t *len, int *found) {
    const g4_gguf_kv *kv = g4_gguf_find(g, key);
    *found = kv != NULL;
    if (!kv) return G4_OK;
    if (kv->type != G4_GGUF_STRING) return wrong(g, key, kv, "a string");
    *s = (const char *)kv->val;
    *len = (size_t)kv->n;
    return G4_OK;
}

g4_status g4_gguf_get_arr(const g4_gguf *g, const char *key, uint32_t elem_type, const g4_gguf_kv **out) {
    const g4_gguf_kv *kv = g4_gguf_find(g, key);
    *out = NULL;
    if (!kv) return G4_OK;
    if (kv->type != G4_GGUF_ARRAY || kv->arr_type != elem_type) {
        char want[40];
        snprintf(want, sizeof want, "an array of %s", type_names[elem_type]);
        return wrong(g, key, kv, want);
    }
    *out = kv;
    return G4_OK;
}

const uint8_t *g4_gguf_str_next(const uint8_t *p, const char **s, uint64_t *len) {
    memcpy(len, p, 8);
    *s = (const char *)p + 8;
    return p + 8 + *len;
}

double g4_gguf_arr_f64(const g4_gguf_kv *kv, uint64_t i) {
    return scalar_f64(kv->arr_type, kv->val + i * scalar_size[kv->arr_type]);
}
int64_t g4_gguf_arr_i64(const g4_gguf_kv *kv, uint64_t i) {
    return scalar_i64(kv->arr_type, kv->val + i * scalar_size[kv->arr_type]);
}

g4_status g4_gguf_export_tensors(g4_gguf *g, g4_tensor_set *set) {
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const g4_gguf_tensor *gt = &g->tensors[i];
        int dt = ggml_to_dtype(gt->ggml_type);
        if (dt < 0)
            return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' has type %s, which gemma4c does not implement "
                           "(F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q6_K)", g->path, gt->name, ggml_types[gt->ggml_type].name);
        if (g4_st_find(set, gt->name))
            return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' appears twice", g->path, gt->name);
    }
    g4_mapping *nm = realloc(set->maps, (size_t)(set->n_maps + 1) * sizeof *nm);
    g4_tensor *nt = nm ? realloc(set->tensors, (size_t)(set->n_tensors + g->n_tensors) * sizeof *nt) : NULL;
    if (nm) set->maps = nm;
    if (!nt) return g4_fail(G4_ERR_NOMEM, "out of memory reading %s", g->path);
    set->tensors = nt;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const g4_gguf_tensor *gt = &g->tensors[i];
        g4_tensor *t = &set->tensors[set->n_tensors];
        memset(t, 0, sizeof *t);
        if (!(t->name = strdup(gt->name))) return g4_fail(G4_ERR_NOMEM, "out of memory reading %s", g->path);
        set->n_tensors++;
        t->dtype = (g4_dtype)ggml_to_dtype(gt->ggml_type);
        t->n_dims = gt->n_dims;
        for (int d = 0; d < gt->n_dims; d++) t->shape[d] = (int64_t)gt->ne[gt->n_dims - 1 - d];
        t->data = gt->data;
        t->nbytes = gt->nbytes;
        t->file = NULL;   /* set below, once the path lives in the set's mapping */
    }
    g4_mapping *m = &set->maps[set->n_maps];
    m->addr = g->owns_map ? g->map : NULL;
    m->size = g->size;
    if (!(m->path = strdup(g->path))) return g4_fail(G4_ERR_NOMEM, "out of memory reading %s", g->path);
    set->n_maps++;
    g->owns_map = 0;
    for (int i = set->n_tensors - (int)g->n_tensors; i < set->n_tensors; i++) set->tensors[i].file = m->path;
    return G4_OK;
}
