/* test_filemap.c — weight mappings advised for 2 MiB pages read back the file's bytes exactly,
 * at offset 0 and at a 2 MiB-aligned offset (pack segments), whether or not the file's cached
 * pages were dropped and re-read on the way (a file just written is cached in small pages); and
 * g4_map_rehuge turns the windows the page cache holds in 4 KiB pages into 2 MiB ones, in this
 * process and for the next one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "io/filemap.h"

#define FILE_BYTES ((size_t)24 << 20)
#define SEG_OFF ((size_t)4 << 20)

static uint32_t word_at(size_t i) { return (uint32_t)(i * 2654435761u) ^ 0x5a5a1234u; }

static char *write_file(void) {
    char *path = strdup("/tmp/g4_filemap_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    uint32_t *buf = malloc(FILE_BYTES);
    for (size_t i = 0; i < FILE_BYTES / 4; i++) buf[i] = word_at(i);
    assert_int_equal(write(fd, buf, FILE_BYTES), (ssize_t)FILE_BYTES);
    free(buf);
    close(fd);
    return path;
}

static void check_map(const char *path, size_t off, size_t len) {
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    const uint32_t *m = g4_map_weights(fd, len, (off_t)off);
    close(fd);
    assert_true(m != MAP_FAILED);
    for (size_t i = 0; i < len / 4; i++)
        if (m[i] != word_at(off / 4 + i)) fail_msg("word %zu differs", i);
    munmap((void *)m, len);
}

static void test_whole_file(void **state) {
    (void)state;
    char *path = write_file();
    check_map(path, 0, FILE_BYTES);   /* cached small right after the write: dropped and re-read */
    check_map(path, 0, FILE_BYTES);   /* second time: whatever the first map left in the cache */
    setenv("G4_MMAP_RELOAD", "0", 1);
    check_map(path, 0, FILE_BYTES);
    unsetenv("G4_MMAP_RELOAD");
    unlink(path);
    free(path);
}

static void test_segment(void **state) {
    (void)state;
    char *path = write_file();
    check_map(path, SEG_OFF, FILE_BYTES - SEG_OFF);
    check_map(path, SEG_OFF, (size_t)1 << 20);   /* small: a plain mapping */
    unlink(path);
    free(path);
}

#define MIB ((size_t)1 << 20)

static void test_rehuge(void **state) {
    (void)state;
    if (!g4_thp_enabled()) skip();
    /* on one CPU: pages read moments before sit in the reading CPU's batch of pages not yet on
     * the LRU lists, which MADV_PAGEOUT drains only on its own CPU (a model file's pages were
     * read long before) */
    cpu_set_t all, one;
    assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    char *path = write_file();
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    /* the first 8 MiB cached in 4 KiB pages: written back and dropped (dirty pages stay cached),
     * then read page by page with readahead off */
    assert_int_equal(fdatasync(fd), 0);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
    char page[4096];
    for (size_t off = 0; off < 8 * MIB; off += sizeof page) assert_int_equal(pread(fd, page, sizeof page, (off_t)off), sizeof page);
    posix_fadvise(fd, 0, 0, POSIX_FADV_NORMAL);
    setenv("G4_MMAP_RELOAD", "0", 1);   /* keep the small pages for g4_map_rehuge to find */
    char *m = g4_map_weights(fd, FILE_BYTES, 0);
    unsetenv("G4_MMAP_RELOAD");
    assert_true(m != MAP_FAILED);
    /* can this kernel and filesystem map the file in 2 MiB pages at all? (windows not read yet) */
    size_t reread = 1;
    const long long fresh = g4_map_rehuge(m + 16 * MIB, 8 * MIB, &reread);
    if (fresh != 0) {   /* -1: no PAGEMAP_SCAN (Linux < 6.7); > 0: no large folios here (tmpfs) */
        sched_setaffinity(0, sizeof all, &all);
        munmap(m, FILE_BYTES);
        close(fd);
        unlink(path);
        free(path);
        skip();
    }
    assert_int_equal(reread, 0);
    assert_int_equal(g4_map_rehuge(m, FILE_BYTES, &reread), 0);
    assert_true(reread >= 8 * MIB && reread <= 10 * MIB);   /* the small windows, and only them */
    for (size_t i = 0; i < FILE_BYTES / 4; i++)
        if (((const uint32_t *)m)[i] != word_at(i)) fail_msg("word %zu differs after the re-read", i);
    munmap(m, FILE_BYTES);
    /* the page cache now holds them in 2 MiB folios: a second mapping finds nothing to re-read */
    m = g4_map_weights(fd, FILE_BYTES, 0);
    assert_true(m != MAP_FAILED);
    assert_int_equal(g4_map_rehuge(m, FILE_BYTES, &reread), 0);
    assert_int_equal(reread, 0);
    munmap(m, FILE_BYTES);
    sched_setaffinity(0, sizeof all, &all);
    close(fd);
    unlink(path);
    free(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_whole_file), cmocka_unit_test(test_segment),
                                       cmocka_unit_test(test_rehuge)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
