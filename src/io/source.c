/* source.c — the model-source interface (source.h): a directory's files read on first request and
 * kept, a pack's embedded files through its metadata view, a GGUF's metadata parsed once. */
#include "io/source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/pack.h"

typedef struct {
    char *name, *where, *data;
    size_t len;
} source_file;

struct g4_source {
    g4_source_kind kind;
    char *path;
    g4_pack *pack;         /* PACK: the metadata view */
    g4_gguf *gguf;         /* GGUF: the parsed metadata */
    source_file *files;    /* files handed out so far */
    int n_files;
};

static const char *const kind_names[] = {"a directory", "a GGUF file", "a .g4c pack", "a file"};

const char *g4_source_kind_name(g4_source_kind k) {
    return (unsigned)k < sizeof kind_names / sizeof kind_names[0] ? kind_names[k] : "unknown";
}

g4_status g4_source_open(const char *path, g4_source **out) {
    *out = NULL;
    if (!path || !*path) return g4_fail(G4_ERR_INPUT, "no model path given");
    struct stat sb;
    if (stat(path, &sb) != 0) return g4_fail(G4_ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
    g4_source *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return g4_fail(G4_ERR_NOMEM, "out of memory");
    }
    g4_status st = G4_OK;
    if (S_ISDIR(sb.st_mode)) s->kind = G4_SOURCE_DIR;
    else if (g4_is_gguf(path)) {
        s->kind = G4_SOURCE_GGUF;
        st = g4_gguf_open(path, &s->gguf);
    } else if (g4_is_pack(path)) {
        s->kind = G4_SOURCE_PACK;
        st = g4_pack_open_meta(path, &s->pack);
    } else s->kind = G4_SOURCE_FILE;
    if (st) {
        g4_source_close(s);
        return st;
    }
    *out = s;
    return G4_OK;
}

void g4_source_close(g4_source *s) {
    if (!s) return;
    for (int i = 0; i < s->n_files; i++) {
        free(s->files[i].name);
        free(s->files[i].where);
        free(s->files[i].data);
    }
    free(s->files);
    g4_pack_close(s->pack);
    if (s->gguf) g4_gguf_free(s->gguf);
    free(s->path);
    free(s);
}

g4_source_kind g4_source_kind_of(const g4_source *s) { return s->kind; }
const char *g4_source_path(const g4_source *s) { return s->path; }
const g4_gguf *g4_source_gguf(const g4_source *s) { return s->gguf; }

/* Reads DIR/name whole; *data NULL when there is no such regular file. */
static g4_status read_dir_file(const char *file, char **data, size_t *len) {
    *data = NULL;
    *len = 0;
    struct stat sb;
    if (stat(file, &sb) != 0 || !S_ISREG(sb.st_mode)) return G4_OK;
    FILE *f = fopen(file, "rb");
    if (!f) return g4_fail(G4_ERR_INPUT, "%s: cannot open: %s", file, strerror(errno));
    char *buf = malloc((size_t)sb.st_size + 1);
    size_t n = buf ? fread(buf, 1, (size_t)sb.st_size, f) : 0;
    int bad = ferror(f);
    fclose(f);
    if (!buf) return g4_fail(G4_ERR_NOMEM, "%s: out of memory", file);
    if (bad || n != (size_t)sb.st_size) {
        free(buf);
        return g4_fail(G4_ERR_IO, "%s: cannot read", file);
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
    return G4_OK;
}

g4_status g4_source_file(g4_source *s, const char *name, const char **data, size_t *len, const char **where) {
    *data = NULL;
    *len = 0;
    if (where) *where = NULL;
    if (s->kind == G4_SOURCE_GGUF || s->kind == G4_SOURCE_FILE) return G4_OK;
    for (int i = 0; i < s->n_files; i++)
        if (!strcmp(s->files[i].name, name)) {
            *data = s->files[i].data;
            *len = s->files[i].len;
            if (where) *where = s->files[i].where;
            return G4_OK;
        }
    source_file f = {0};
    size_t wl = strlen(s->path) + strlen(name) + 2;
    if (!(f.name = strdup(name)) || !(f.where = malloc(wl))) {
        free(f.name);
        return g4_fail(G4_ERR_NOMEM, "out of memory");
    }
    snprintf(f.where, wl, "%s%c%s", s->path, s->kind == G4_SOURCE_PACK ? ':' : '/', name);
    g4_status st = G4_OK;
    if (s->kind == G4_SOURCE_DIR) {
        st = read_dir_file(f.where, &f.data, &f.len);
    } else if (g4_pack_has_file(s->pack, name)) {
        const char *d;
        size_t n;
        if (!(st = g4_pack_file(s->pack, name, &d, &n))) {
            if (!(f.data = malloc(n + 1))) st = g4_fail(G4_ERR_NOMEM, "out of memory");
            else {
                memcpy(f.data, d, n);
                f.data[n] = 0;
                f.len = n;
            }
        }
    }
    source_file *nf = st ? NULL : realloc(s->files, (size_t)(s->n_files + 1) * sizeof *nf);
    if (!st && !nf) st = g4_fail(G4_ERR_NOMEM, "out of memory");
    if (st) {
        free(f.name);
        free(f.where);
        free(f.data);
        return st;
    }
    s->files = nf;
    s->files[s->n_files++] = f;
    *data = f.data;
    *len = f.len;
    if (where) *where = f.where;
    return G4_OK;
}

g4_status g4_source_not_a_model(const g4_source *s) {
    return g4_fail(G4_ERR_INPUT,
                   "%s is %s, not a model: expected a HuggingFace checkpoint directory (config.json + "
                   "*.safetensors), a .gguf file or a .g4c pack",
                   s->path, g4_source_kind_name(s->kind));
}
