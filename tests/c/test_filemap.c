/* test_filemap.c — weight mappings advised for 2 MiB pages read back the file's bytes exactly,
 * at offset 0 and at a 2 MiB-aligned offset (pack segments), whether or not the file's cached
 * pages were dropped and re-read on the way (a file just written is cached in small pages). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
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

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_whole_file), cmocka_unit_test(test_segment)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
