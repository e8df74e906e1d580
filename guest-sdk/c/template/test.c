/*
 * Native tests of {{name}}: the processor runs against the SDK's fake host,
 * compiled with gcc or clang (./test.sh), no WebAssembly involved.
 */
#include <stdio.h>
#include <string.h>

#include "agent_host_guest_testing.h"

static int failures;

#define CHECK(cond)                                                      \
    do {                                                                 \
        if (!(cond)) {                                                   \
            failures++;                                                  \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                \
    } while (0)

static void drops_empty_messages(void) {
    ahg_message in[] = {
        ahg_message_new(AHG_ROLE_USER, ahg_cstr("hello")),
        ahg_message_new(AHG_ROLE_ASSISTANT, ahg_cstr("  \n")),
        ahg_message_new(AHG_ROLE_USER, ahg_cstr("again")),
    };
    ahg_test_log_clear();
    ahg_test_result r = ahg_test_run("{}", in, 3);
    CHECK(r.error.kind == AHG_OK);
    CHECK(r.len == 2);
    CHECK(ahg_str_eq_c(r.messages[1].content, "again"));
    CHECK(r.items[0].kind == AHG_ITEM_KEEP);
    CHECK(strcmp(ahg_test_log_line(0), "dropped 1 of 3 messages") == 0);
    ahg_test_result_free(&r);
}

static void min_chars_is_configurable(void) {
    ahg_message in[] = {ahg_message_new(AHG_ROLE_USER, ahg_cstr("ok")),
                        ahg_message_new(AHG_ROLE_USER, ahg_cstr("longer"))};
    ahg_test_result r = ahg_test_run("{\"min_chars\": 3}", in, 2);
    CHECK(r.error.kind == AHG_OK);
    CHECK(r.len == 1);
    ahg_test_result_free(&r);
}

static void bad_configurations_name_the_key(void) {
    ahg_test_result r = ahg_test_run("{\"min_chars\": \"three\"}", NULL, 0);
    CHECK(r.error.kind == AHG_BAD_CONFIG);
    CHECK(strstr(r.error.message, "`min_chars`") != NULL);
    ahg_test_result_free(&r);
    r = ahg_test_run("{\"min_char\": 3}", NULL, 0);
    CHECK(r.error.kind == AHG_BAD_CONFIG);
    CHECK(strstr(r.error.message, "unknown field `min_char`") != NULL);
    ahg_test_result_free(&r);
}

int main(void) {
    drops_empty_messages();
    min_chars_is_configurable();
    bad_configurations_name_the_key();
    ahg_test_log_clear();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("{{name}}: all checks passed\n");
    return 0;
}
