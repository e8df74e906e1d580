/*
 * Native tests of the C summarize-history (./test.sh): the Rust processor's
 * cases, run through the SDK's fake host with canned summaries. The
 * integration test `services` then runs the built component through the
 * real host against a model and compares it with the Rust one.
 */
#include <stdio.h>
#include <string.h>

#include "agent_host_guest_testing.h"

static int failures;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            failures++;                                                              \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                            \
    } while (0)

/* The material of every summary asked for, in order. */
static char asked[8][16384];
static size_t asked_len;

static int serve(void *arg, ahg_str prompt, ahg_str text, ahg_str *summary,
                 ahg_service_error *err) {
    (void)arg;
    (void)prompt;
    (void)err;
    if (asked_len < 8) {
        size_t n = text.len < sizeof asked[0] - 1 ? text.len : sizeof asked[0] - 1;
        memcpy(asked[asked_len], text.ptr, n);
        asked[asked_len][n] = 0;
        asked_len++;
    }
    *summary = ahg_cstr("  THE SUMMARY\n");
    return 0;
}

static int refuse(void *arg, ahg_str prompt, ahg_str text, ahg_str *summary,
                  ahg_service_error *err) {
    (void)arg;
    (void)prompt;
    (void)text;
    (void)summary;
    err->kind = AHG_SERVICE_DENIED;
    err->message = ahg_cstr("grant it with --allow-summarize");
    return -1;
}

static char texts[64][64];

/* rules, then `n` turns of "question i" / "answer i". */
static size_t turns(ahg_message *out, size_t n) {
    size_t len = 0;
    out[len++] = ahg_message_new(AHG_ROLE_SYSTEM, ahg_cstr("rules"));
    for (size_t i = 0; i < n; i++) {
        snprintf(texts[2 * i], sizeof texts[0], "question %zu", i);
        snprintf(texts[2 * i + 1], sizeof texts[0], "answer %zu", i);
        out[len++] = ahg_message_new(AHG_ROLE_USER, ahg_cstr(texts[2 * i]));
        out[len++] = ahg_message_new(AHG_ROLE_ASSISTANT, ahg_cstr(texts[2 * i + 1]));
    }
    return len;
}

static bool content_is(const ahg_message *m, const char *text) {
    return ahg_str_eq_c(m->content, text);
}

static void the_older_part_becomes_a_flagged_checkpoint_pair_and_the_newest_turns_stay(void) {
    ahg_message in[16];
    size_t len = turns(in, 5);
    asked_len = 0;
    ahg_test_serve_summaries(serve, NULL);
    ahg_test_result r = ahg_test_run("{\"keep_turns\": 2, \"min_messages\": 2}", in, len);
    CHECK(r.error.kind == AHG_OK);
    CHECK(r.len == 7);
    if (r.len == 7) {
        CHECK(content_is(&r.messages[0], "rules"));
        CHECK(content_is(&r.messages[1],
                         "[The 6 earlier messages of this conversation were summarized.]"));
        CHECK(content_is(&r.messages[2], "THE SUMMARY"));
        CHECK(content_is(&r.messages[3], "question 3"));
        CHECK(content_is(&r.messages[6], "answer 4"));
        for (size_t i = 1; i < 3; i++) {
            CHECK(r.messages[i].flags == (AHG_FLAG_SYNTHETIC | AHG_FLAG_SUMMARY));
        }
        CHECK(r.messages[1].role == AHG_ROLE_USER && r.messages[2].role == AHG_ROLE_ASSISTANT);
        CHECK(r.messages[2].metadata.some);
        CHECK(strstr(r.messages[2].metadata.str.ptr, "{\"summary_of\":6,\"input_tokens\":") ==
              r.messages[2].metadata.str.ptr);
    }
    CHECK(asked_len == 1);
    CHECK(strstr(asked[0], "[user]\nquestion 0") != NULL);
    CHECK(strstr(asked[0], "answer 2") != NULL);
    CHECK(strstr(asked[0], "question 3") == NULL);
    CHECK(strstr(asked[0], "rules") == NULL);
    ahg_test_result_free(&r);
}

static void a_tool_exchange_across_the_cut_stays_whole(void) {
    ahg_message base[16], in[16];
    turns(base, 3);
    /* rules, q0, a0, q1, a1, call, q2, result, a2: the call is in turn 2, its
     * result after turn 3 starts. */
    ahg_tool_call c1 = {ahg_cstr("c1"), ahg_cstr("search"), ahg_cstr("{}")};
    ahg_message call = ahg_message_new(AHG_ROLE_ASSISTANT, ahg_cstr(""));
    call.tool_calls = &c1;
    call.tool_calls_len = 1;
    ahg_message result = ahg_message_new(AHG_ROLE_TOOL, ahg_cstr("found"));
    result.tool_call_id = ahg_some(ahg_cstr("c1"));
    size_t len = 0;
    for (size_t i = 0; i < 5; i++) in[len++] = base[i];
    in[len++] = call;
    in[len++] = base[5];
    in[len++] = result;
    in[len++] = base[6];
    ahg_test_serve_summaries(serve, NULL);
    ahg_test_result r = ahg_test_run("{\"keep_turns\": 1, \"min_messages\": 1}", in, len);
    CHECK(r.error.kind == AHG_OK);
    CHECK(r.len == 7);
    if (r.len == 7) {
        CHECK(content_is(&r.messages[3], "") && r.messages[3].tool_calls_len == 1);
        CHECK(content_is(&r.messages[4], "question 2"));
        CHECK(content_is(&r.messages[5], "found"));
        CHECK(content_is(&r.messages[6], "answer 2"));
    }
    ahg_test_result_free(&r);
}

static void a_refused_summary_leaves_the_history_as_it_was(void) {
    ahg_message in[16];
    size_t len = turns(in, 6);
    ahg_test_serve_summaries(refuse, NULL);
    ahg_test_log_clear();
    ahg_test_result r = ahg_test_run("{\"keep_turns\": 2, \"min_messages\": 2}", in, len);
    CHECK(r.error.kind == AHG_OK);
    CHECK(r.len == len);
    CHECK(ahg_test_log_count() == 1);
    CHECK(strcmp(ahg_test_log_line(0),
                 "no summary (denied: grant it with --allow-summarize); the history is kept") == 0);
    ahg_test_result_free(&r);
}

static void too_little_to_summarize_asks_nothing(void) {
    ahg_message in[16];
    size_t len = turns(in, 4);
    asked_len = 0;
    ahg_test_serve_summaries(serve, NULL);
    ahg_test_result r = ahg_test_run("{\"keep_turns\": 2}", in, len);
    CHECK(r.error.kind == AHG_OK && r.len == 9);
    ahg_test_result_free(&r);
    r = ahg_test_run("{\"keep_turns\": 2, \"min_messages\": 1, \"trigger_tokens\": 1000000}", in,
                     len);
    CHECK(r.error.kind == AHG_OK && r.len == 9);
    ahg_test_result_free(&r);
    CHECK(asked_len == 0);
}

static void a_previous_summary_is_carried_into_the_material(void) {
    ahg_message in[16];
    size_t len = turns(in, 4);
    in[2].flags = AHG_FLAG_SYNTHETIC | AHG_FLAG_SUMMARY;
    asked_len = 0;
    ahg_test_serve_summaries(serve, NULL);
    ahg_test_result r = ahg_test_run("{\"keep_turns\": 1, \"min_messages\": 1}", in, len);
    CHECK(r.error.kind == AHG_OK);
    CHECK(asked_len == 1 && strstr(asked[0], "[previous summary]\nanswer 0") != NULL);
    ahg_test_result_free(&r);
}

static void a_long_message_is_quoted_with_its_middle_elided(void) {
    ahg_message in[16];
    size_t len = turns(in, 3);
    /* 2,500 two-byte characters, then 2,500 one-byte ones. */
    static char long_text[7501];
    for (size_t i = 0; i < 2500; i++) memcpy(long_text + 2 * i, "\xc3\xa9", 2);
    memset(long_text + 5000, 'x', 2500);
    in[1].content = (ahg_str){long_text, 7500};
    asked_len = 0;
    ahg_test_serve_summaries(serve, NULL);
    ahg_test_result r = ahg_test_run("{\"keep_turns\": 1, \"min_messages\": 1}", in, len);
    CHECK(r.error.kind == AHG_OK && asked_len == 1);
    const char *quoted = strstr(asked[0], "[user]\n");
    CHECK(quoted != NULL);
    if (quoted) {
        quoted += strlen("[user]\n");
        CHECK(memcmp(quoted, long_text, 4000) == 0);
        const char *elided = "\n[... 1000 characters elided ...]\nxxx";
        CHECK(memcmp(quoted + 4000, elided, strlen(elided)) == 0);
        CHECK(memcmp(quoted + 4000 + strlen(elided) - 3 + 2000, "\n\n", 2) == 0);
    }
    ahg_test_result_free(&r);
}

static int padded(void *arg, ahg_str prompt, ahg_str text, ahg_str *summary,
                  ahg_service_error *err) {
    (void)arg;
    (void)prompt;
    (void)text;
    (void)err;
    /* U+0085 and U+3000 are white space to Rust's trim, U+001C is not. */
    *summary = ahg_cstr("\xc2\x85\x1cTHE SUMMARY\xe3\x80\x80\n");
    return 0;
}

static void the_summary_is_trimmed_as_rust_trims(void) {
    ahg_message in[16];
    size_t len = turns(in, 5);
    ahg_test_serve_summaries(padded, NULL);
    ahg_test_result r = ahg_test_run("{\"keep_turns\": 2, \"min_messages\": 2}", in, len);
    CHECK(r.error.kind == AHG_OK && r.len == 7);
    if (r.len == 7) CHECK(content_is(&r.messages[2], "\x1cTHE SUMMARY"));
    ahg_test_result_free(&r);
}

static void bad_configurations_are_refused(void) {
    const char *configs[] = {"{\"keep_turns\": 0}", "{\"max_words\": 0}", "{\"turns\": 2}",
                             "{\"min_messages\": -1}", "[1, 2]"};
    for (size_t k = 0; k < sizeof configs / sizeof configs[0]; k++) {
        ahg_test_result r = ahg_test_run(configs[k], NULL, 0);
        if (r.error.kind != AHG_BAD_CONFIG) fprintf(stderr, "accepted: %s\n", configs[k]);
        CHECK(r.error.kind == AHG_BAD_CONFIG);
        ahg_test_result_free(&r);
    }
}

int main(void) {
    the_older_part_becomes_a_flagged_checkpoint_pair_and_the_newest_turns_stay();
    a_tool_exchange_across_the_cut_stays_whole();
    a_refused_summary_leaves_the_history_as_it_was();
    too_little_to_summarize_asks_nothing();
    a_previous_summary_is_carried_into_the_material();
    a_long_message_is_quoted_with_its_middle_elided();
    the_summary_is_trimmed_as_rust_trims();
    bad_configurations_are_refused();
    ahg_test_stop_serving_summaries();
    ahg_test_log_clear();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("summarize-history (C): all checks passed\n");
    return 0;
}
