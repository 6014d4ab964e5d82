/* filemap.c — weight-file mappings backed by 2 MiB page-cache folios where the kernel can.
 * Why: decode streams every weight byte once per token; in 4 KiB pages that stream crosses a
 * page (a TLB miss, and a stop for the hardware prefetcher, which never crosses a page) every
 * 4 KiB. On Linux >= 6.x with a filesystem that caches large folios (ext4, xfs), a read-only
 * mapping advised MADV_HUGEPAGE before its first fault is read ahead in 2 MiB folios and mapped
 * by PMD entries — zero-copy, like a plain mmap, and the weight GEMVs stream faster from it.
 * Pages already cached small (a file just written, or read without the advice) stay small, so
 * they are dropped once here and re-read on first use. Does not decide anything else. */
#include "io/filemap.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_SZ ((size_t)2 << 20)
#define SMALL_FILE ((size_t)8 << 20)   /* below this the TLB does not matter */
#define PROBES 4

/* FilePmdMapped of the mapping that starts at `addr`, from /proc/self/smaps (-1: unknown). */
static long long vma_pmd_bytes(const void *addr) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int in_vma = 0;
    long long kb = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long start, end;
        if (sscanf(line, "%lx-%lx ", &start, &end) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            if (in_vma) break;
            in_vma = start == (uintptr_t)addr;
        } else if (in_vma && sscanf(line, "FilePmdMapped: %lld kB", &kb) == 1) {
            break;
        }
    }
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

/* Are the file's pages that are already cached held in small pages? Touches up to PROBES fully
 * cached 2 MiB windows and asks the kernel whether they came in as PMD mappings. */
static int cached_small(void *map, size_t len) {
    const long pg = sysconf(_SC_PAGESIZE);
    const size_t npages = (len + (size_t)pg - 1) / (size_t)pg;
    unsigned char *vec = malloc(npages);
    if (!vec) return 0;
    int small = 0;
    if (mincore(map, len, vec) == 0) {
        size_t resident = 0;
        for (size_t i = 0; i < npages; i++) resident += vec[i] & 1;
        if (resident) {
            const uintptr_t a0 = ((uintptr_t)map + HUGE_SZ - 1) & ~(uintptr_t)(HUGE_SZ - 1);
            const size_t per = HUGE_SZ / (size_t)pg;
            int probed = 0;
            volatile unsigned char sink = 0;
            for (uintptr_t a = a0; a + HUGE_SZ <= (uintptr_t)map + len && probed < PROBES; a += HUGE_SZ) {
                const size_t first = (a - (uintptr_t)map) / (size_t)pg;
                size_t i = 0;
                while (i < per && (vec[first + i] & 1)) i++;
                if (i < per) continue;
                sink += *(const unsigned char *)a;
                probed++;
            }
            (void)sink;
            /* nothing fully cached to probe: a few scattered small pages, cheap to drop */
            small = probed == 0 || vma_pmd_bytes(map) < (long long)(probed * HUGE_SZ);
        }
    }
    free(vec);
    return small;
}

void *g4_map_weights(int fd, size_t len, off_t off) {
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, off);
    if (map == MAP_FAILED || len < SMALL_FILE) return map;
    if (madvise(map, len, MADV_HUGEPAGE) != 0) return map;   /* no THP here: a plain mapping */
    const char *env = getenv("G4_MMAP_RELOAD");
    if (env && !strcmp(env, "0")) return map;
    if (cached_small(map, len)) {
        /* unmap our probe pages, then drop the clean cached pages no other process maps */
        madvise(map, len, MADV_DONTNEED);
        posix_fadvise(fd, off, (off_t)len, POSIX_FADV_DONTNEED);
    }
    return map;
}

/* ---------------------------------------------------------------- re-reading small windows */

/* The PAGEMAP_SCAN ioctl of /proc/PID/pagemap (linux/fs.h of Linux 6.7+; older headers lack it):
 * the ranges of a mapping whose pages do or do not have a category, here "mapped by a PMD". */
struct g4_page_region { uint64_t start, end, categories; };
struct g4_pm_scan_arg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
    uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define G4_PAGEMAP_SCAN _IOWR('f', 16, struct g4_pm_scan_arg)
#define G4_PAGE_IS_HUGE (1u << 6)
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

int g4_thp_enabled(void) {
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return 0;
    char line[128] = "";
    const int ok = fgets(line, sizeof line, f) && !strstr(line, "[never]");
    fclose(f);
    return ok;
}

size_t g4_map_touch_windows(const void *addr, size_t len) {
    const uintptr_t a = ((uintptr_t)addr + HUGE_SZ - 1) & ~(uintptr_t)(HUGE_SZ - 1);
    const uintptr_t b = ((uintptr_t)addr + len) & ~(uintptr_t)(HUGE_SZ - 1);
    volatile unsigned char sink = 0;
    for (uintptr_t p = a; p < b; p += HUGE_SZ) sink += *(const unsigned char *)p;
    (void)sink;
    return a < b ? b - a : 0;
}

/* Calls `fn` on each maximal range of [a, b) not mapped by PMDs (the windows were faulted, so a
 * window in small pages has some PTE-mapped pages and the rest unmapped: all of it reported).
 * Returns their total bytes, or -1 if the kernel has no PAGEMAP_SCAN. */
static long long for_small_ranges(uintptr_t a, uintptr_t b, void (*fn)(uintptr_t, uintptr_t)) {
    const int pm = open("/proc/self/pagemap", O_RDONLY);
    if (pm < 0) return -1;
    struct g4_page_region v[64];
    long long small = 0;
    for (uintptr_t at = a; at < b;) {
        struct g4_pm_scan_arg arg = {.size = sizeof arg, .start = at, .end = b, .vec = (uintptr_t)v, .vec_len = 64,
                                     .category_inverted = G4_PAGE_IS_HUGE, .category_mask = G4_PAGE_IS_HUGE,
                                     .return_mask = G4_PAGE_IS_HUGE};
        const int n = ioctl(pm, G4_PAGEMAP_SCAN, &arg);
        if (n < 0) { small = -1; break; }
        for (int i = 0; i < n; i++) {
            small += (long long)(v[i].end - v[i].start);
            if (fn) fn(v[i].start & ~(uintptr_t)(HUGE_SZ - 1), (v[i].end + HUGE_SZ - 1) & ~(uintptr_t)(HUGE_SZ - 1));
        }
        if (arg.walk_end <= at) break;
        at = arg.walk_end;
    }
    close(pm);
    return small;
}

/* Reclaims the range's clean page-cache pages that only this process maps (MADV_PAGEOUT reaches
 * only pages mapped here, so every page is mapped first: one left cached keeps its window small),
 * then drops our page tables over it so that the next touch faults through the HUGEPAGE advice
 * and reads the file back in 2 MiB folios (without the MADV_DONTNEED the range comes back in
 * small pages within the same process). */
static void reread_range(uintptr_t a, uintptr_t b) {
    const long pg = sysconf(_SC_PAGESIZE);
    volatile unsigned char sink = 0;
    for (uintptr_t p = a; p < b; p += (uintptr_t)pg) sink += *(const unsigned char *)p;
    (void)sink;
    madvise((void *)a, b - a, MADV_PAGEOUT);
    madvise((void *)a, b - a, MADV_DONTNEED);
    g4_map_touch_windows((const void *)a, b - a);
}

long long g4_map_rehuge(const void *addr, size_t len, size_t *reread) {
    const uintptr_t a = ((uintptr_t)addr + HUGE_SZ - 1) & ~(uintptr_t)(HUGE_SZ - 1);
    const uintptr_t b = ((uintptr_t)addr + len) & ~(uintptr_t)(HUGE_SZ - 1);
    *reread = 0;
    if (!g4_map_touch_windows(addr, len)) return 0;
    const long long small = for_small_ranges(a, b, reread_range);
    if (small <= 0) return small;
    *reread = (size_t)small;
    /* a second pass for pages the first could not reclaim (seen: pages read moments before on
     * another CPU, still in that CPU's batch of pages not yet on the kernel's LRU lists, where
     * MADV_PAGEOUT cannot take them; it drains only this CPU's batch); then what is left */
    return for_small_ranges(a, b, reread_range) > 0 ? for_small_ranges(a, b, NULL) : 0;
}

long long g4_huge_mapped_bytes(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f) return -1;
    char line[256];
    long long kb, total = 0;
    int seen = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "FilePmdMapped: %lld kB", &kb) == 1 || sscanf(line, "AnonHugePages: %lld kB", &kb) == 1) {
            total += kb;
            seen++;
        }
    fclose(f);
    return seen ? total * 1024 : -1;
}
