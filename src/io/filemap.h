/* filemap.h — read-only mappings of weight files (safetensors, GGUF, .g4c segments) that the
 * kernel can back with 2 MiB page-cache folios. Owns no state; callers keep and unmap the maps. */
#ifndef G4_FILEMAP_H
#define G4_FILEMAP_H

#include <stddef.h>
#include <sys/types.h>

/* mmap(PROT_READ, MAP_PRIVATE) of [off, off + len) of `fd`, advised MADV_HUGEPAGE so that page
 * faults read the file into 2 MiB folios mapped by single TLB entries. If the file already sits
 * in the page cache in 4 KiB pages (written or read before without the advice), those pages are
 * dropped so the first decode re-reads them in 2 MiB folios — unless G4_MMAP_RELOAD=0.
 * Returns MAP_FAILED with errno set on failure. */
void *g4_map_weights(int fd, size_t len, off_t off);

/* Transparent huge pages not switched off ("always" or "madvise"). */
int g4_thp_enabled(void);

/* Touches one byte in each whole 2 MiB window of [addr, addr + len) (a page-cache folio that is
 * 2 MiB whole is then mapped by one PMD entry) and returns the bytes of those windows. */
size_t g4_map_touch_windows(const void *addr, size_t len);

/* Faults every whole 2 MiB window of [addr, addr + len) (inside a g4_map_weights mapping) and
 * re-reads the windows the page cache holds in small pages, so that they come back as 2 MiB
 * folios: the cache drops them only where no other process maps them. Returns the bytes of whole
 * windows still not mapped in 2 MiB pages afterwards (0: all of them are), and *reread the bytes
 * it re-read, or -1 where the kernel cannot say which windows are small (PAGEMAP_SCAN: Linux
 * 6.7+), having only faulted them. */
long long g4_map_rehuge(const void *addr, size_t len, size_t *reread);

/* Bytes of this process's memory mapped in 2 MiB pages: file mappings (FilePmdMapped) plus
 * anonymous memory (AnonHugePages: --no-mmap copies), or -1 if the kernel does not say. */
long long g4_huge_mapped_bytes(void);

#endif
