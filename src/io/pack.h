/* pack.h — the packed model file `.g4c`: one self-contained file holding a checkpoint's config and
 * tokenizer files verbatim plus its weights already split for a tensor-parallel group of `tp`
 * ranks, each rank's tensors in one contiguous 2 MiB-aligned segment so that a rank maps only
 * its own shard. Owns the format and the reader (pack.c; the writer is src/convert/pack_write.c); knows what
 * a tensor means only through the shard plan (parallel/tp_plan.h).
 *
 * Layout (version 1, all integers little-endian):
 *   [0, 4096)       header: magic "G4CPACK\0", u32 version, u32 tp, u64 meta_off, meta_len,
 *                   dir_off, dir_len, file_size, u32 header_crc, u32 flags, then a rank table of
 *                   64 entries {u64 seg_off, seg_len, dir_off, dir_len, u32 seg_crc, n_tensors}
 *   meta            u32 n_files, u32 0, then per file {u32 name_len, u32 0, u64 len, name,
 *                   bytes, one NUL}, each entry padded to 8 bytes
 *   dir             per rank (at its rank-table dir_off within dir): per tensor {u16 name_len,
 *                   u8 dtype (g4_dtype), u8 n_dims, u32 0, i64 shape[4] (LOCAL shape), u64 offset
 *                   in the rank segment, u64 nbytes, name}, each entry padded to 8 bytes
 *   segments        rank r's tensor data at seg_off (a multiple of 2 MiB), tensors at 64-byte
 *                   aligned offsets, zero padding between them
 * header_crc = zlib crc32 of header (with header_crc zeroed) + meta + dir; seg_crc = crc32 of the
 * seg_len bytes of a segment; file_size = the exact file length (a shorter file is truncated). */
#ifndef G4_PACK_H
#define G4_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "gemma4c.h"
#include "base/dtype.h"
#include "io/safetensors.h"

#define G4_PACK_MAGIC "G4CPACK"        /* 8 bytes with its NUL */
#define G4_PACK_VERSION 1u
#define G4_PACK_HEADER_SIZE 4096u
#define G4_PACK_SEG_ALIGN ((uint64_t)2 << 20)
#define G4_PACK_TENSOR_ALIGN 64u

typedef struct g4_pack g4_pack;

/* 1 when `path` is a regular file starting with the pack magic; 0 otherwise, never an error. */
int g4_is_pack(const char *path);

/* Opens a pack for `rank`: checks the header (magic, version, sizes against the real file size,
 * header crc, every directory entry) and maps the header/meta/directory and ONLY this rank's
 * segment; verifies the segment crc unless the environment has G4_PACK_VERIFY=0.
 * Every defect is G4_ERR_INPUT with "<path>: <what>". */
g4_status g4_pack_open(const char *path, int rank, g4_pack **out);
/* Same, mapping only header/meta/directory (no segment): for the tokenizer and chat template. */
g4_status g4_pack_open_meta(const char *path, g4_pack **out);
/* Same checks over a whole file image in memory (segment crc always verified); rank -1 for
 * metadata only. For the unit tests and the fuzz target; `buf` must outlive the pack. */
g4_status g4_pack_open_mem(const void *buf, size_t size, const char *name, int rank, g4_pack **out);
void g4_pack_close(g4_pack *p);

int g4_pack_tp(const g4_pack *p);
/* The rank the pack was opened for; -1 for g4_pack_open_meta. */
int g4_pack_rank(const g4_pack *p);
const char *g4_pack_path(const g4_pack *p);

/* An embedded file ("config.json", "tokenizer.json", ...): its bytes (followed by a NUL that
 * `len` does not count) inside the mapping. G4_ERR_INPUT naming it when absent. */
g4_status g4_pack_file(const g4_pack *p, const char *name, const char **data, size_t *len);
int g4_pack_has_file(const g4_pack *p, const char *name);

/* This rank's tensors with their LOCAL shapes, data pointing into the mapping (64-byte aligned).
 * out->n_maps is 0: g4_st_close frees only the table and names; the pack must outlive `out`.
 * G4_ERR_INPUT for a pack opened with g4_pack_open_meta. */
g4_status g4_pack_tensors(const g4_pack *p, g4_tensor_set *out);

#endif
