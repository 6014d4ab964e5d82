/* safetensors.c — safetensors reader: an 8-byte little-endian header length, a JSON header
 * {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the data.
 * Every offset is checked against the file size and against dtype × shape before use, because
 * a header that lies must be refused rather than read out of bounds. */
#include "io/safetensors.h"

#include "io/filemap.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>


static g4_status add_tensor(g4_tensor_set *set, const g4_tensor *t) {
    if (g4_st_find(set, t->name))
        return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' appears twice", t->file, t->name);
    g4_tensor *nt = realloc(set->tensors, (size_t)(set->n_tensors + 1) * sizeof *nt);
    if (!nt) return g4_fail(G4_ERR_NOMEM, "out of memory reading %s", t->file);
    set->tensors = nt;
    nt[set->n_tensors] = *t;
    nt[set->n_tensors].name = strdup(t->name);
    if (!nt[set->n_tensors].name) return g4_fail(G4_ERR_NOMEM, "out of memory reading %s", t->file);
    set->n_tensors++;
    return G4_OK;
}

static g4_status parse_entry(g4_tensor_set *set, const char *path, const char *name, json_t *e,
                             const uint8_t *data, size_t data_size) {
    if (!json_is_object(e))
        return g4_fail(G4_ERR_INPUT, "%s: header entry '%s' is not an object", path, name);
    json_t *jd = json_object_get(e, "dtype"), *js = json_object_get(e, "shape"),
           *jo = json_object_get(e, "data_offsets");
    if (!json_is_string(jd) || !json_is_array(js) || !json_is_array(jo) || json_array_size(jo) != 2)
        return g4_fail(G4_ERR_INPUT,
                       "%s: tensor '%s' needs string 'dtype', array 'shape' and 2-element "
                       "'data_offsets'", path, name);
    g4_tensor t = {0};
    t.name = (char *)name;
    t.file = path;
    const char *dt = json_string_value(jd);
    if (!strcmp(dt, "F32")) t.dtype = G4_DT_F32;
    else if (!strcmp(dt, "F16")) t.dtype = G4_DT_F16;
    else if (!strcmp(dt, "BF16")) t.dtype = G4_DT_BF16;
    else if (!strcmp(dt, "I64") || !strcmp(dt, "I32")) {
        t.dtype = G4_DT_COUNT;
        t.int_bytes = dt[1] == '6' ? 8 : 4;
    } else return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' has unsupported dtype '%s' (BF16, F16, F32, I32, I64 only)",
                          path, name, dt);
    const size_t esize = t.int_bytes ? (size_t)t.int_bytes : g4_dtype_size(t.dtype);
    size_t nd = json_array_size(js);
    if (nd > G4_MAX_DIMS)
        return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' has %zu dims (max %d)", path, name, nd, G4_MAX_DIMS);
    t.n_dims = (int)nd;
    uint64_t count = 1;
    for (size_t i = 0; i < nd; i++) {
        json_t *d = json_array_get(js, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0 || json_integer_value(d) > (1LL << 40))
            return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' has an invalid shape", path, name);
        t.shape[i] = json_integer_value(d);
        count *= (uint64_t)t.shape[i];
        if (count > (1ULL << 40))
            return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' is implausibly large", path, name);
    }
    json_t *b = json_array_get(jo, 0), *en = json_array_get(jo, 1);
    if (!json_is_integer(b) || !json_is_integer(en) || json_integer_value(b) < 0 ||
        json_integer_value(en) < json_integer_value(b))
        return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' has invalid data_offsets", path, name);
    uint64_t begin = (uint64_t)json_integer_value(b), end = (uint64_t)json_integer_value(en);
    if (end > data_size)
        return g4_fail(G4_ERR_INPUT,
                       "%s: tensor '%s' data_offsets [%llu, %llu] run past the end of the data "
                       "(%zu bytes; truncated file?)", path, name, (unsigned long long)begin,
                       (unsigned long long)end, data_size);
    if (end - begin != count * esize)
        return g4_fail(G4_ERR_INPUT,
                       "%s: tensor '%s' data_offsets span %llu bytes but %s x shape needs %llu",
                       path, name, (unsigned long long)(end - begin), dt,
                       (unsigned long long)(count * esize));
    if (begin % esize)
        return g4_fail(G4_ERR_INPUT, "%s: tensor '%s' data is misaligned", path, name);
    t.data = data + begin;
    t.nbytes = (size_t)(end - begin);
    return add_tensor(set, &t);
}

g4_status g4_st_parse(g4_tensor_set *set, const void *buf, size_t size, const char *path) {
    const uint8_t *p = buf;
    if (size < 8) return g4_fail(G4_ERR_INPUT, "%s: file too short for a safetensors header (%zu bytes)", path, size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | p[i];
    if (hlen == 0 || hlen > size - 8 || hlen > (100u << 20))
        return g4_fail(G4_ERR_INPUT, "%s: header length %llu does not fit the file (%zu bytes; truncated?)",
                       path, (unsigned long long)hlen, size);
    json_error_t err;
    json_t *root = json_loadb((const char *)p + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &err);
    if (!root) return g4_fail(G4_ERR_INPUT, "%s: header is not valid JSON: %s (position %d)", path, err.text, err.position);
    if (!json_is_object(root)) {
        json_decref(root);
        return g4_fail(G4_ERR_INPUT, "%s: header is not a JSON object", path);
    }
    const uint8_t *data = p + 8 + hlen;
    size_t data_size = size - 8 - (size_t)hlen;
    const char *name;
    json_t *e;
    g4_status st = G4_OK;
    json_object_foreach(root, name, e) {
        if (!strcmp(name, "__metadata__")) continue;
        if ((st = parse_entry(set, path, name, e, data, data_size)) != G4_OK) break;
    }
    json_decref(root);
    return st;
}

g4_status g4_st_add_file(g4_tensor_set *set, const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return g4_fail(G4_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return g4_fail(G4_ERR_IO, "%s: not a regular file", path);
    }
    size_t size = (size_t)sb.st_size;
    void *addr = size ? g4_map_weights(fd, size, 0) : NULL;
    close(fd);
    if (size && addr == MAP_FAILED) return g4_fail(G4_ERR_IO, "%s: mmap failed: %s", path, strerror(errno));
    g4_mapping *nm = realloc(set->maps, (size_t)(set->n_maps + 1) * sizeof *nm);
    if (!nm) {
        if (addr) munmap(addr, size);
        return g4_fail(G4_ERR_NOMEM, "out of memory mapping %s", path);
    }
    set->maps = nm;
    nm[set->n_maps].addr = addr;
    nm[set->n_maps].size = size;
    nm[set->n_maps].path = strdup(path);
    set->n_maps++;
    if (!nm[set->n_maps - 1].path) return g4_fail(G4_ERR_NOMEM, "out of memory mapping %s", path);
    return g4_st_parse(set, addr, size, nm[set->n_maps - 1].path);
}

static int file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

g4_status g4_st_open_dir(const char *dir, g4_tensor_set *out) {
    memset(out, 0, sizeof *out);
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (!file_exists(path)) {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        if (!file_exists(path))
            return g4_fail(G4_ERR_INPUT, "%s: no model.safetensors or model.safetensors.index.json", dir);
        g4_status st = g4_st_add_file(out, path);
        if (st) g4_st_close(out);
        return st;
    }
    json_error_t err;
    json_t *idx = json_load_file(path, 0, &err);
    if (!idx) return g4_fail(G4_ERR_INPUT, "%s: invalid JSON: %s (line %d)", path, err.text, err.line);
    json_t *wm = json_object_get(idx, "weight_map");
    if (!json_is_object(wm)) {
        json_decref(idx);
        return g4_fail(G4_ERR_INPUT, "%s: field 'weight_map' missing or not an object", path);
    }
    /* Open each distinct shard once, then check that the index and the shards agree. */
    g4_status st = G4_OK;
    const char *name;
    json_t *v;
    json_object_foreach(wm, name, v) {
        const char *shard = json_string_value(v);
        if (!shard || strchr(shard, '/')) {
            st = g4_fail(G4_ERR_INPUT, "%s: weight_map['%s'] is not a plain file name", path, name);
            break;
        }
        char sp[4096];
        snprintf(sp, sizeof sp, "%s/%s", dir, shard);
        int seen = 0;
        for (int i = 0; i < out->n_maps; i++) seen |= !strcmp(out->maps[i].path, sp);
        if (!seen && (st = g4_st_add_file(out, sp)) != G4_OK) break;
    }
    if (st == G4_OK) {
        json_object_foreach(wm, name, v) {
            g4_tensor *t = g4_st_find(out, name);
            if (!t) {
                st = g4_fail(G4_ERR_INPUT, "%s: tensor '%s' is listed but not found in %s", path, name,
                             json_string_value(v));
                break;
            }
        }
    }
    json_decref(idx);
    if (st) g4_st_close(out);
    return st;
}

g4_tensor *g4_st_find(const g4_tensor_set *set, const char *name) {
    for (int i = 0; i < set->n_tensors; i++)
        if (!strcmp(set->tensors[i].name, name)) return &set->tensors[i];
    return NULL;
}

void g4_st_close(g4_tensor_set *set) {
    for (int i = 0; i < set->n_tensors; i++) free(set->tensors[i].name);
    for (int i = 0; i < set->n_maps; i++) {
        if (set->maps[i].addr) munmap(set->maps[i].addr, set->maps[i].size);
        free(set->maps[i].path);
    }
    free(set->tensors);
    free(set->maps);
    memset(set, 0, sizeof *set);
}
