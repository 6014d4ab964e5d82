/* pack.c — the `.g4c` reader (format in pack.h). Every field of the header, the metadata area
 * and the directory is range-checked before use and the whole prefix is covered by a crc, so a
 * truncated, corrupt or hostile file is refused with a message instead of being read out of
 * bounds. A rank maps only the prefix and its own segment. */
#include "io/pack.h"
#include "io/filemap.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

typedef struct {
    uint64_t seg_off, seg_len, dir_off, dir_len;
    uint32_t seg_crc, n_tensors;
} rank_entry;

typedef struct {
    const char *name;
    const char *data;
    size_t len;
} pack_file;

typedef struct {
    const char *name;       /* into the prefix; NOT NUL-terminated there, see name_len */
    uint16_t name_len;
    g4_dtype dtype;
    int n_dims;
    int64_t shape[G4_MAX_DIMS];
    uint64_t offset, nbytes;
} pack_tensor;

struct g4_pack {
    char *path;
    uint32_t version, tp;
    int rank;                      /* -1: metadata only */
    uint64_t meta_off, meta_len, dir_off, dir_len, file_size;
    rank_entry ranks[G4_PACK_MAX_RANKS];
    const uint8_t *pre;            /* [0, prefix_len): header, meta, directory */
    size_t pre_len;
    const uint8_t *seg;            /* this rank's segment (NULL for metadata only) */
    void *pre_map, *seg_map;       /* mmap'ed regions to unmap (NULL for in-memory images) */
    size_t pre_map_len, seg_map_len;
    pack_file *files;
    int n_files;
    pack_tensor *tensors;          /* this rank's */
    int n_tensors;
};

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* a + b <= lim without overflow */
static int fits(uint64_t a, uint64_t b, uint64_t lim) { return a <= lim && b <= lim - a; }

int g4_is_pack(const char *path) {
    if (!path) return 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    struct stat sb;
    char m[8];
    int ok = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && pread(fd, m, 8, 0) == 8 && !memcmp(m, G4_PACK_MAGIC, 8);
    close(fd);
    return ok;
}

/* Header fields, offsets and the rank table, against the real size of the file (or image). */
static g4_status parse_header(g4_pack *p, const uint8_t *h, uint64_t actual) {
    const char *path = p->path;
    if (actual < 8 || memcmp(h, G4_PACK_MAGIC, 8))
        return g4_fail(G4_ERR_INPUT, "%s: not a gemma4c pack (bad magic)", path);
    if (actual < G4_PACK_HEADER_SIZE)
        return g4_fail(G4_ERR_INPUT, "%s: truncated pack: %llu bytes, shorter than the %u-byte header", path,
                       (unsigned long long)actual, G4_PACK_HEADER_SIZE);
    p->version = rd32(h + 8);
    p->tp = rd32(h + 12);
    p->meta_off = rd64(h + 16);
    p->meta_len = rd64(h + 24);
    p->dir_off = rd64(h + 32);
    p->dir_len = rd64(h + 40);
    p->file_size = rd64(h + 48);
    if (p->version != G4_PACK_VERSION)
        return g4_fail(G4_ERR_INPUT, "%s: unsupported pack version %u (this build reads version %u; re-run gemma4c pack)",
                       path, p->version, G4_PACK_VERSION);
    if (p->tp < 1 || p->tp > G4_PACK_MAX_RANKS)
        return g4_fail(G4_ERR_INPUT, "%s: header: tp %u out of range 1..%d (corrupt header)", path, p->tp, G4_PACK_MAX_RANKS);
    if (actual < p->file_size)
        return g4_fail(G4_ERR_INPUT, "%s: truncated pack: the header says %llu bytes, the file has %llu", path,
                       (unsigned long long)p->file_size, (unsigned long long)actual);
    if (actual > p->file_size)
        return g4_fail(G4_ERR_INPUT, "%s: pack has %llu bytes but its header says %llu (trailing data or corrupt header)",
                       path, (unsigned long long)actual, (unsigned long long)p->file_size);
    if (p->meta_off < G4_PACK_HEADER_SIZE || !fits(p->meta_off, p->meta_len, p->file_size) ||
        p->dir_off < p->meta_off + p->meta_len || !fits(p->dir_off, p->dir_len, p->file_size) ||
        p->meta_off % 8 || p->dir_off % 8)
        return g4_fail(G4_ERR_INPUT, "%s: header: metadata [%llu,+%llu) / directory [%llu,+%llu) out of bounds of the %llu-byte file",
                       path, (unsigned long long)p->meta_off, (unsigned long long)p->meta_len,
                       (unsigned long long)p->dir_off, (unsigned long long)p->dir_len, (unsigned long long)p->file_size);
    uint64_t prev_end = p->dir_off + p->dir_len;
    for (int r = 0; r < G4_PACK_MAX_RANKS; r++) {
        const uint8_t *e = h + 64 + (size_t)r * 40;
        rank_entry *re = &p->ranks[r];
        re->seg_off = rd64(e);
        re->seg_len = rd64(e + 8);
        re->dir_off = rd64(e + 16);
        re->dir_len = rd64(e + 24);
        re->seg_crc = rd32(e + 32);
        re->n_tensors = rd32(e + 36);
        if ((unsigned)r >= p->tp) {
            if (re->seg_off || re->seg_len || re->dir_off || re->dir_len || re->seg_crc || re->n_tensors)
                return g4_fail(G4_ERR_INPUT, "%s: header: rank table entry %d is set in a pack for tp %u (corrupt header)",
                               path, r, p->tp);
            continue;
        }
        if (re->seg_off % G4_PACK_SEG_ALIGN || re->seg_off < prev_end || !fits(re->seg_off, re->seg_len, p->file_size))
            return g4_fail(G4_ERR_INPUT, "%s: header: rank %d segment [%llu,+%llu) misaligned, overlapping or out of bounds "
                           "of the %llu-byte file", path, r, (unsigned long long)re->seg_off,
                           (unsigned long long)re->seg_len, (unsigned long long)p->file_size);
        prev_end = re->seg_off + re->seg_len;
        if (!fits(re->dir_off, re->dir_len, p->dir_len) || re->dir_off % 8)
            return g4_fail(G4_ERR_INPUT, "%s: header: rank %d directory [%llu,+%llu) outside the %llu-byte directory",
                           path, r, (unsigned long long)re->dir_off, (unsigned long long)re->dir_len,
                           (unsigned long long)p->dir_len);
    }
    return G4_OK;
}

static g4_status parse_meta(g4_pack *p) {
    const uint8_t *m = p->pre + p->meta_off;
    const uint64_t n = p->meta_len;
    if (n < 8) return g4_fail(G4_ERR_INPUT, "%s: metadata area too short (%llu bytes)", p->path, (unsigned long long)n);
    uint32_t nf = rd32(m);
    if (nf > 4096 || (uint64_t)nf * 24 > n)
        return g4_fail(G4_ERR_INPUT, "%s: metadata: %u embedded files do not fit its %llu bytes", p->path, nf, (unsigned long long)n);
    p->files = calloc(nf ? nf : 1, sizeof *p->files);
    if (!p->files) return g4_fail(G4_ERR_NOMEM, "out of memory reading %s", p->path);
    uint64_t o = 8;
    for (uint32_t i = 0; i < nf; i++) {
        if (!fits(o, 16, n)) return g4_fail(G4_ERR_INPUT, "%s: metadata: entry %u runs past the area", p->path, i);
        uint32_t nl = rd32(m + o);
        uint64_t len = rd64(m + o + 8);
        if (nl == 0 || nl > 255 || !fits(o + 16, nl, n) || !fits(o + 16 + nl, len, n) || !fits(o + 16 + nl + len, 1, n))
            return g4_fail(G4_ERR_INPUT, "%s: metadata: entry %u (name %u bytes, data %llu bytes) runs past the area",
                           p->path, i, nl, (unsigned long long)len);
        const char *name = (const char *)m + o + 16;
        if (memchr(name, 0, nl) || m[o + 16 + nl + len] != 0)
            return g4_fail(G4_ERR_INPUT, "%s: metadata: entry %u is malformed", p->path, i);
        for (uint32_t k = 0; k < i; k++)
            if (strlen(p->files[k].name) == nl && !memcmp(p->files[k].name, name, nl))
                return g4_fail(G4_ERR_INPUT, "%s: metadata: file '%.*s' appears twice", p->path, (int)nl, name);
        /* names are stored as name bytes followed by data; copy them so they are C strings */
        char *nm = malloc(nl + 1);
        if (!nm) return g4_fail(G4_ERR_NOMEM, "out of memory reading %s", p->path);
        memcpy(nm, name, nl);
        nm[nl] = 0;
        p->files[i].name = nm;
        p->files[i].data = (const char *)m + o + 16 + nl;
        p->files[i].len = (size_t)len;
        p->n_files = (int)i + 1;
        o = (o + 16 + nl + len + 1 + 7) & ~(uint64_t)7;
    }
    return G4_OK;
}

/* One rank's directory; `keep` stores the entries (the opened rank), otherwise only checks. */
static g4_status parse_dir(g4_pack *p, int r, int keep) {
    const rank_entry *re = &p->ranks[r];
    const uint8_t *d = p->pre + p->dir_off + re->dir_off;
    const uint64_t n = re->dir_len;
    if (re->n_tensors > 1000000 || (uint64_t)re->n_tensors * 64 > n)
        return g4_fail(G4_ERR_INPUT, "%s: rank %d directory: %u tensors do not fit its %llu bytes", p->path, r,
                       re->n_tensors, (unsigned long long)n);
    pack_tensor *ts = calloc(re->n_tensors ? re->n_tensors : 1, sizeof *ts);
    if (!ts) return g4_fail(G4_ERR_NOMEM, "out of memory reading %s", p->path);
    g4_status st = G4_OK;
    uint64_t o = 0, prev_end = 0;
    for (uint32_t i = 0; i < re->n_tensors && !st; i++) {
        pack_tensor *t = &ts[i];
        if (!fits(o, 64, n)) { st = g4_fail(G4_ERR_INPUT, "%s: rank %d directory: entry %u runs past it", p->path, r, i); break; }
        const uint8_t *e = d + o;
        t->name_len = (uint16_t)(e[0] | e[1] << 8);
        unsigned dt = e[2];
        t->n_dims = e[3];
        t->offset = rd64(e + 48);
        t->nbytes = rd64(e + 56);
        if (t->name_len == 0 || !fits(o + 64, t->name_len, n)) {
            st = g4_fail(G4_ERR_INPUT, "%s: rank %d directory: entry %u has a bad name length %u", p->path, r, i, t->name_len);
            break;
        }
        t->name = (const char *)e + 64;
        const int nl = t->name_len;
        if (memchr(t->name, 0, (size_t)nl)) {
            st = g4_fail(G4_ERR_INPUT, "%s: rank %d directory: entry %u has a NUL in its name", p->path, r, i);
            break;
        }
        if (dt >= G4_DT_COUNT) {
            st = g4_fail(G4_ERR_INPUT, "%s: tensor '%.*s': unknown dtype code %u", p->path, nl, t->name, dt);
            break;
        }
        t->dtype = (g4_dtype)dt;
        if (t->n_dims < 1 || t->n_dims > G4_MAX_DIMS) {
            st = g4_fail(G4_ERR_INPUT, "%s: tensor '%.*s': %d dims (1..%d)", p->path, nl, t->name, t->n_dims, G4_MAX_DIMS);
            break;
        }
        uint64_t count = 1;
        for (int k = 0; k < G4_MAX_DIMS; k++) {
            t->shape[k] = (int64_t)rd64(e + 16 + 8 * k);
            if (k >= t->n_dims) {
                if (t->shape[k]) st = g4_fail(G4_ERR_INPUT, "%s: tensor '%.*s': unused dim %d is set", p->path, nl, t->name, k);
                continue;
            }
            if (t->shape[k] < 0 || t->shape[k] > ((int64_t)1 << 40) || (count *= (uint64_t)t->shape[k]) > ((uint64_t)1 << 40))
                st = g4_fail(G4_ERR_INPUT, "%s: tensor '%.*s': invalid shape", p->path, nl, t->name);
        }
        if (st) break;
        const int64_t row = t->shape[t->n_dims - 1];
        if (row % g4_dtype_block(t->dtype)) {
            st = g4_fail(G4_ERR_INPUT, "%s: tensor '%.*s': row of %lld is not a multiple of the %s block %d", p->path, nl,
                         t->name, (long long)row, g4_dtype_name(t->dtype), g4_dtype_block(t->dtype));
            break;
        }
        uint64_t want = row ? count / (uint64_t)row * g4_dtype_row_bytes(t->dtype, row) : 0;
        if (t->nbytes != want) {
            st = g4_fail(G4_ERR_INPUT, "%s: tensor '%.*s': %llu bytes, but %s x shape needs %llu", p->path, nl, t->name,
                         (unsigned long long)t->nbytes, g4_dtype_name(t->dtype), (unsigned long long)want);
            break;
        }
        if (t->offset % G4_PACK_TENSOR_ALIGN || t->offset < prev_end || !fits(t->offset, t->nbytes, re->seg_len)) {
            st = g4_fail(G4_ERR_INPUT, "%s: tensor '%.*s': data [%llu,+%llu) misaligned, overlapping or outside rank %d's "
                         "%llu-byte segment", p->path, nl, t->name, (unsigned long long)t->offset,
                         (unsigned long long)t->nbytes, r, (unsigned long long)re->seg_len);
            break;
        }
        prev_end = t->offset + t->nbytes;
        for (uint32_t k = 0; k < i; k++)
            if (ts[k].name_len == t->name_len && !memcmp(ts[k].name, t->name, (size_t)nl)) {
                st = g4_fail(G4_ERR_INPUT, "%s: rank %d directory: tensor '%.*s' appears twice", p->path, r, nl, t->name);
                break;
            }
        o = (o + 64 + (uint64_t)nl + 7) & ~(uint64_t)7;
    }
    if (st || !keep) {
        free(ts);
        return st;
    }
    p->tensors = ts;
    p->n_tensors = (int)re->n_tensors;
    return G4_OK;
}

/* crc of the prefix: the header with its crc field zeroed, then meta, then directory */
static uint32_t prefix_crc(const g4_pack *p) {
    uint8_t h[G4_PACK_HEADER_SIZE];
    memcpy(h, p->pre, sizeof h);
    memset(h + 56, 0, 4);
    uLong c = crc32_z(0, h, sizeof h);
    c = crc32_z(c, p->pre + p->meta_off, (size_t)p->meta_len);
    return (uint32_t)crc32_z(c, p->pre + p->dir_off, (size_t)p->dir_len);
}

/* Segment crc over several threads (crc32_combine joins the pieces): the check reads every
 * page of the shard once, which is disk-bound at first and memory-bound when cached. */
typedef struct {
    const uint8_t *p;
    size_t n;
    uLong crc;
} crc_job;

static void *crc_worker(void *arg) {
    crc_job *j = arg;
    j->crc = crc32_z(0, j->p, j->n);
    return NULL;
}

static uint32_t parallel_crc(const uint8_t *p, size_t n) {
    enum { MAXT = 8 };
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = cpus < 1 ? 1 : cpus > MAXT ? MAXT : (int)cpus;
    if (n < ((size_t)64 << 20)) nt = 1;
    crc_job jobs[MAXT];
    pthread_t th[MAXT];
    size_t chunk = n / (size_t)nt, o = 0;
    int started[MAXT] = {0};
    for (int i = 0; i < nt; i++) {
        jobs[i].p = p + o;
        jobs[i].n = i == nt - 1 ? n - o : chunk;
        o += jobs[i].n;
        if (i > 0) started[i] = pthread_create(&th[i], NULL, crc_worker, &jobs[i]) == 0;
        if (i > 0 && !started[i]) crc_worker(&jobs[i]);
    }
    crc_worker(&jobs[0]);
    uLong c = jobs[0].crc;
    for (int i = 1; i < nt; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        c = crc32_combine(c, jobs[i].crc, (z_off_t)jobs[i].n);
    }
    return (uint32_t)c;
}

static int verify_wanted(void) {
    const char *v = getenv("G4_PACK_VERIFY");
    return !(v && !strcmp(v, "0"));
}

/* Everything after the header fields: prefix crc, meta, every rank's directory, the segment crc. */
static g4_status parse_rest(g4_pack *p, int verify_seg) {
    uint32_t want = rd32(p->pre + 56), got = prefix_crc(p);
    if (want != got)
        return g4_fail(G4_ERR_INPUT, "%s: header/metadata/directory checksum mismatch (crc32 %08x, header says %08x): "
                       "corrupt pack", p->path, got, want);
    g4_status st = parse_meta(p);
    for (int r = 0; !st && r < (int)p->tp; r++) st = parse_dir(p, r, r == p->rank);
    if (st || !p->seg || !verify_seg) return st;
    const rank_entry *re = &p->ranks[p->rank];
    got = parallel_crc(p->seg, (size_t)re->seg_len);
    if (got != re->seg_crc)
        return g4_fail(G4_ERR_INPUT, "%s: rank %d weight segment checksum mismatch (crc32 %08x, header says %08x): "
                       "corrupt pack (G4_PACK_VERIFY=0 skips this check)", p->path, p->rank, got, re->seg_crc);
    return G4_OK;
}

static g4_pack *pack_new(const char *path, int rank) {
    g4_pack *p = calloc(1, sizeof *p);
    if (p) p->path = strdup(path ? path : "pack");
    if (p && !p->path) { free(p); p = NULL; }
    if (p) p->rank = rank;
    return p;
}

static g4_status open_impl(const char *path, int rank, g4_pack **out) {
    *out = NULL;
    if (!path) return g4_fail(G4_ERR_INPUT, "pack: no path given");
    int fd = open(path, O_RDONLY);
    if (fd < 0) return g4_fail(errno == ENOENT ? G4_ERR_INPUT : G4_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return g4_fail(G4_ERR_INPUT, "%s: not a regular file", path);
    }
    g4_pack *p = pack_new(path, rank);
    if (!p) { close(fd); return g4_fail(G4_ERR_NOMEM, "out of memory opening %s", path); }
    uint8_t h[G4_PACK_HEADER_SIZE] = {0};
    ssize_t got = pread(fd, h, sizeof h, 0);
    g4_status st = got < 0 ? g4_fail(G4_ERR_IO, "%s: read failed: %s", path, strerror(errno))
                           : parse_header(p, h, (uint64_t)sb.st_size);
    if (!st && rank >= 0 && (uint32_t)rank >= p->tp)
        st = g4_fail(G4_ERR_INPUT, "%s: pack was made for --tp %u; rank %d does not exist (re-pack with --tp %d or run with --tp %u)",
                     path, p->tp, rank, rank + 1, p->tp);
    if (!st) {
        uint64_t end = p->meta_off + p->meta_len > p->dir_off + p->dir_len ? p->meta_off + p->meta_len : p->dir_off + p->dir_len;
        p->pre_map_len = (size_t)end;
        p->pre_map = mmap(NULL, p->pre_map_len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p->pre_map == MAP_FAILED) {
            p->pre_map = NULL;
            st = g4_fail(G4_ERR_IO, "%s: mmap failed: %s", path, strerror(errno));
        } else {
            p->pre = p->pre_map;
            p->pre_len = p->pre_map_len;
        }
    }
    if (!st && rank >= 0 && p->ranks[rank].seg_len) {
        const rank_entry *re = &p->ranks[rank];
        p->seg_map_len = (size_t)re->seg_len;
        /* seg_off is a multiple of 2 MiB, hence of the page size: the rank maps only its shard */
        p->seg_map = g4_map_weights(fd, p->seg_map_len, (off_t)re->seg_off);
        if (p->seg_map == MAP_FAILED) {
            p->seg_map = NULL;
            st = g4_fail(G4_ERR_IO, "%s: mmap of rank %d's segment failed: %s", path, rank, strerror(errno));
        } else {
            p->seg = p->seg_map;
        }
    }
    close(fd);
    if (!st) st = parse_rest(p, verify_wanted());
    if (st) { g4_pack_close(p); return st; }
    *out = p;
    return G4_OK;
}

g4_status g4_pack_open(const char *path, int rank, g4_pack **out) {
    if (rank < 0) {
        *out = NULL;
        return g4_fail(G4_ERR_INPUT, "%s: rank %d is negative", path ? path : "pack", rank);
    }
    return open_impl(path, rank, out);
}

g4_status g4_pack_open_meta(const char *path, g4_pack **out) { return open_impl(path, -1, out); }

g4_status g4_pack_open_mem(const void *buf, size_t size, const char *name, int rank, g4_pack **out) {
    *out = NULL;
    g4_pack *p = pack_new(name, rank);
    if (!p) return g4_fail(G4_ERR_NOMEM, "out of memory");
    const uint8_t *b = buf;
    uint8_t h[G4_PACK_HEADER_SIZE] = {0};
    memcpy(h, b, size < sizeof h ? size : sizeof h);
    g4_status st = parse_header(p, h, size);
    if (!st && rank >= 0 && (uint32_t)rank >= p->tp)
        st = g4_fail(G4_ERR_INPUT, "%s: pack was made for --tp %u; rank %d does not exist", p->path, p->tp, rank);
    if (!st) {
        p->pre = b;
        p->pre_len = size;
        if (rank >= 0) p->seg = b + p->ranks[rank].seg_off;
        st = parse_rest(p, 1);
    }
    if (st) { g4_pack_close(p); return st; }
    *out = p;
    return G4_OK;
}

void g4_pack_close(g4_pack *p) {
    if (!p) return;
    if (p->seg_map) munmap(p->seg_map, p->seg_map_len);
    if (p->pre_map) munmap(p->pre_map, p->pre_map_len);
    for (int i = 0; i < p->n_files; i++) free((char *)p->files[i].name);
    free(p->files);
    free(p->tensors);
    free(p->path);
    free(p);
}

int g4_pack_tp(const g4_pack *p) { return (int)p->tp; }
int g4_pack_rank(const g4_pack *p) { return p->rank; }
const char *g4_pack_path(const g4_pack *p) { return p->path; }

g4_status g4_pack_file(const g4_pack *p, const char *name, const char **data, size_t *len) {
    for (int i = 0; i < p->n_files; i++)
        if (!strcmp(p->files[i].name, name)) {
            *data = p->files[i].data;
            *len = p->files[i].len;
            return G4_OK;
        }
    *data = NULL;
    *len = 0;
    return g4_fail(G4_ERR_INPUT, "%s: the pack has no embedded '%s'", p->path, name);
}

int g4_pack_has_file(const g4_pack *p, const char *name) {
    for (int i = 0; i < p->n_files; i++)
        if (!strcmp(p->files[i].name, name)) return 1;
    return 0;
}

g4_status g4_pack_tensors(const g4_pack *p, g4_tensor_set *out) {
    memset(out, 0, sizeof *out);
    if (p->rank < 0) return g4_fail(G4_ERR_INPUT, "%s: opened for metadata only; no tensors mapped", p->path);
    out->tensors = calloc(p->n_tensors ? (size_t)p->n_tensors : 1, sizeof *out->tensors);
    if (!out->tensors) return g4_fail(G4_ERR_NOMEM, "out of memory reading %s", p->path);
    for (int i = 0; i < p->n_tensors; i++) {
        const pack_tensor *s = &p->tensors[i];
        g4_tensor *t = &out->tensors[i];
        t->name = malloc((size_t)s->name_len + 1);
        if (!t->name) { g4_st_close(out); return g4_fail(G4_ERR_NOMEM, "out of memory reading %s", p->path); }
        memcpy(t->name, s->name, s->name_len);
        t->name[s->name_len] = 0;
        out->n_tensors = i + 1;
        t->dtype = s->dtype;
        t->n_dims = s->n_dims;
        memcpy(t->shape, s->shape, sizeof t->shape);
        t->data = p->seg + s->offset;
        t->nbytes = (size_t)s->nbytes;
        t->file = p->path;
    }
    return G4_OK;
}
