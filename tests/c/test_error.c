/* test_error.c — g4_fail / g4_last_error keep the formatted message per thread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "gemma4c.h"

static void test_fail_sets_message(void **state) {
    (void)state;
    assert_int_equal(g4_fail(G4_ERR_INPUT, "config.json: field '%s' missing", "hidden_size"),
                     G4_ERR_INPUT);
    assert_string_equal(g4_last_error(), "config.json: field 'hidden_size' missing");
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_fail_sets_message)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
