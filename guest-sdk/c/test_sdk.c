/*
 * Native tests of the C SDK itself (./test.sh): the turn and tool-exchange
 * helpers, against the same cases as the Rust SDK's history.rs tests, and a
 * processor that uses them, run through the fake host.
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

/* ---- Messages for the cases ------------------------------------------------ */

static ahg_message with_id(ahg_message m, const char *id) {
    m.id = ahg_cstr(id);
    return m;
}
static ahg_message user(const char *text) {
    return with_id(ahg_message_new(AHG_ROLE_USER, ahg_cstr(text)), text);
}
static ahg_message assistant(const char *text) {
    return with_id(ahg_message_new(AHG_ROLE_ASSISTANT, ahg_cstr(text)), text);
}

/* Tool calls live in static storage: one slot per call id used below. */
static ahg_tool_call call_slots[16];
static size_t call_slots_len;

/** An assistant message that calls `ids` (NULL-terminated) in parallel, with
 *  the id "call-" + the first. */
static ahg_message calls(const char *id, const char *const *ids) {
    ahg_message m = ahg_message_new(AHG_ROLE_ASSISTANT, ahg_cstr(""));
    m.tool_calls = &call_slots[call_slots_len];
    for (; *ids; ids++) {
        ahg_tool_call c = {ahg_cstr(*ids), ahg_cstr("t"), ahg_cstr("{}")};
        call_slots[call_slots_len++] = c;
        m.tool_calls_len++;
    }
    return with_id(m, id);
}
static ahg_message call(const char *id, const char *call_id) {
    const char *ids[] = {call_id, NULL};
    return calls(id, ids);
}
static ahg_message result(const char *id, const char *call_id) {
    ahg_message m = ahg_message_new(AHG_ROLE_TOOL, ahg_cstr("ok"));
    m.tool_call_id = ahg_some(ahg_cstr(call_id));
    return with_id(m, id);
}

static ahg_history *history(ahg_message *messages, size_t len) {
    static ahg_run_context ctx;
    ctx.config = ahg_cstr("{}");
    return ahg_history_new(&ctx, messages, len);
}

/** The output's ids, space-separated (", " would hide an empty id). */
static const char *ids(ahg_history *h) {
    static char out[512];
    size_t n = 0, len = 0;
    ahg_item *items = ahg_history_items(h, &n);
    out[0] = 0;
    for (size_t k = 0; k < n; k++) {
        const ahg_message *m = items[k].kind == AHG_ITEM_KEEP ? ahg_get(h, items[k].index)
                                                              : items[k].message;
        len += (size_t)snprintf(out + len, sizeof out - len, "%s%.*s", k ? " " : "",
                                (int)m->id.len, m->id.ptr);
    }
    return out;
}

#define LEN(a) (sizeof(a) / sizeof *(a))

/* ---- Turns ----------------------------------------------------------------- */

static void turn_starts_are_kept_user_messages_said_by_the_user(void) {
    ahg_message in[] = {user("u0"), assistant("a1"), user("u2"), user("u3"), user("u4")};
    in[3].flags = AHG_FLAG_SYNTHETIC;
    ahg_history *h = history(in, LEN(in));
    ahg_drop(h, 4);
    size_t n = 0;
    const size_t *starts = ahg_turn_starts(h, &n);
    CHECK(n == 2 && starts[0] == 0 && starts[1] == 2);
    CHECK(!ahg_starts_turn(&in[3]) && ahg_starts_turn(&in[0]));
    ahg_history_free(h);
}

static void last_turns_keep_system_and_summaries(void) {
    ahg_message in[] = {with_id(ahg_message_new(AHG_ROLE_SYSTEM, ahg_cstr("rules")), "sys"),
                        assistant("summary"), user("u1"), assistant("a1"),
                        user("u2"),           assistant("a2"), user("u3")};
    in[1].flags = AHG_FLAG_SUMMARY | AHG_FLAG_SYNTHETIC;
    ahg_history *h = history(in, LEN(in));
    CHECK(ahg_keep_last_turns(h, 2) == 2);
    CHECK(strcmp(ids(h), "sys summary u2 a2 u3") == 0);
    ahg_history_free(h);
}

static void last_turns_never_split_an_exchange(void) {
    /* A user message between a call and its result: the cut moves back. */
    call_slots_len = 0;
    ahg_message in[] = {user("u1"), call("call-c1", "c1"), user("u2"), result("result-c1", "c1"),
                        assistant("a")};
    ahg_history *h = history(in, LEN(in));
    ahg_keep_last_turns(h, 1);
    CHECK(strcmp(ids(h), "call-c1 u2 result-c1 a") == 0);
    ahg_history_free(h);
}

static void the_cut_moves_back_until_no_exchange_is_split(void) {
    /* Regression (Rust SDK): one pull-back left `result-a` without its call. */
    call_slots_len = 0;
    ahg_message in[] = {user("u0"),           call("call-a", "a"), user("u2"),
                        call("call-b", "b"),  result("result-a", "a"), user("u5"),
                        result("result-b", "b")};
    ahg_history *h = history(in, LEN(in));
    ahg_keep_last_turns(h, 1);
    CHECK(strcmp(ids(h), "call-a u2 call-b result-a u5 result-b") == 0);
    ahg_history_free(h);
}

static void turns_already_dropped_do_not_count(void) {
    ahg_message in[] = {user("u1"), assistant("a1"), user("u2"), user("u3")};
    ahg_history *h = history(in, LEN(in));
    ahg_drop(h, 3);
    CHECK(ahg_keep_last_turns(h, 1) == 2);
    CHECK(strcmp(ids(h), "u2") == 0);
    ahg_history_free(h);
}

static void fewer_turns_than_asked_keeps_everything_and_zero_keeps_none(void) {
    ahg_message in[] = {assistant("hello"), user("u1"),
                        with_id(ahg_message_new(AHG_ROLE_SYSTEM, ahg_cstr("rules")), "sys")};
    ahg_history *h = history(in, LEN(in));
    CHECK(ahg_keep_last_turns(h, 4) == 0);
    CHECK(ahg_kept(h) == 3);
    CHECK(ahg_keep_last_turns(h, 0) == 2);
    CHECK(strcmp(ids(h), "sys") == 0);
    ahg_history_free(h);
}

/* ---- Tool exchanges -------------------------------------------------------- */

static void a_result_answers_the_nearest_earlier_call_with_its_id(void) {
    call_slots_len = 0;
    ahg_message in[] = {call("first", "x"), result("r1", "x"), call("second", "x"),
                        result("r2", "x"),  result("lost", "y"), user("u")};
    ahg_history *h = history(in, LEN(in));
    size_t c = 99;
    CHECK(ahg_tool_caller(h, 1, &c) && c == 0);
    CHECK(ahg_tool_caller(h, 3, &c) && c == 2);
    CHECK(!ahg_tool_caller(h, 4, &c));
    CHECK(!ahg_tool_caller(h, 5, NULL));
    CHECK(!ahg_tool_caller(h, 0, NULL));
    /* Worked out on the input: taking the call out changes nothing. */
    ahg_edit(h, 2)->tool_calls_len = 0;
    CHECK(ahg_tool_caller(h, 3, &c) && c == 2);
    ahg_history_free(h);
}

static void settling_drops_results_of_dropped_calls_and_calls_without_results(void) {
    call_slots_len = 0;
    const char *two_ids[] = {"c1", "c2", NULL};
    ahg_message two = calls("two", two_ids);
    two.content = ahg_cstr("checking two things");
    ahg_message in[] = {user("u"), two, result("r1", "c1"), result("r2", "c2"),
                        call("call-c3", "c3"), result("r3", "c3")};
    ahg_history *h = history(in, LEN(in));
    ahg_drop(h, 3); /* the result of c2 */
    ahg_drop(h, 4); /* the call c3 */
    CHECK(ahg_settle_tool_exchanges(h) == 1);
    CHECK(!ahg_is_kept(h, 5)); /* c3's result goes with its call */
    CHECK(ahg_is_changed(h, 1) && ahg_is_kept(h, 1));
    CHECK(ahg_get(h, 1)->tool_calls_len == 1); /* c2 lost its result */
    CHECK(ahg_str_eq_c(ahg_get(h, 1)->tool_calls[0].id, "c1"));
    CHECK(strcmp(ids(h), "u two r1") == 0);
    /* The caller's array is not written to: the edit has its own. */
    CHECK(two.tool_calls_len == 2 && ahg_str_eq_c(two.tool_calls[1].id, "c2"));
    ahg_history_free(h);
}

static void a_call_left_with_nothing_is_dropped(void) {
    call_slots_len = 0;
    ahg_message in[] = {user("u"), call("call-c1", "c1"), result("r1", "c1")};
    in[1].content = ahg_cstr(" \n\xC2\xA0"); /* blank, a no-break space included */
    ahg_history *h = history(in, LEN(in));
    ahg_drop(h, 2);
    CHECK(ahg_settle_tool_exchanges(h) == 1);
    CHECK(strcmp(ids(h), "u") == 0);
    ahg_history_free(h);
}

static void settling_sees_calls_taken_out_of_a_message(void) {
    call_slots_len = 0;
    ahg_message in[] = {user("u"), call("call-a", "a"), result("result-a", "a")};
    ahg_history *h = history(in, LEN(in));
    ahg_message *m = ahg_edit(h, 1);
    m->tool_calls_len = 0;
    m->content = ahg_cstr("never mind");
    ahg_settle_tool_exchanges(h);
    CHECK(strcmp(ids(h), "u call-a") == 0);
    ahg_history_free(h);
}

static void interrupted_calls_are_left_alone(void) {
    call_slots_len = 0;
    ahg_message in[] = {user("u"), call("call-c1", "c1")};
    ahg_history *h = history(in, LEN(in));
    CHECK(ahg_settle_tool_exchanges(h) == 0);
    CHECK(ahg_kept(h) == 2 && !ahg_is_changed(h, 1));
    ahg_history_free(h);
}

/** Whether the output of `h` pairs: every result has its call in an earlier
 *  message, every call a result in a later one. */
static bool pairs(ahg_history *h, unsigned mask, size_t turns) {
    size_t n = 0;
    ahg_item *items = ahg_history_items(h, &n);
    const ahg_message *out[32];
    for (size_t k = 0; k < n; k++) {
        out[k] = items[k].kind == AHG_ITEM_KEEP ? ahg_get(h, items[k].index) : items[k].message;
    }
    for (size_t k = 0; k < n; k++) {
        if (out[k]->tool_call_id.some) {
            bool found = false;
            for (size_t j = 0; j < k && !found; j++) {
                for (size_t t = 0; t < out[j]->tool_calls_len; t++) {
                    found |= ahg_str_eq(out[j]->tool_calls[t].id, out[k]->tool_call_id.str);
                }
            }
            if (!found) {
                fprintf(stderr, "mask %x, %zu turns: result %.*s lost its call\n", mask, turns,
                        (int)out[k]->id.len, out[k]->id.ptr);
                return false;
            }
        }
        for (size_t t = 0; t < out[k]->tool_calls_len; t++) {
            bool found = false;
            for (size_t j = k + 1; j < n && !found; j++) {
                found = out[j]->tool_call_id.some &&
                        ahg_str_eq(out[j]->tool_call_id.str, out[k]->tool_calls[t].id);
            }
            if (!found) {
                fprintf(stderr, "mask %x, %zu turns: call %.*s lost its result\n", mask, turns,
                        (int)out[k]->tool_calls[t].id.len, out[k]->tool_calls[t].id.ptr);
                return false;
            }
        }
    }
    return true;
}

/* Property: whatever is dropped, after settling no call is unanswered and no
 * result is orphaned; keeping the last turns first changes nothing to that. */
static void pairing_is_whole_after_settling_for_every_drop_pattern(void) {
    call_slots_len = 0;
    const char *ab[] = {"a", "b", NULL};
    const char *cd[] = {"c", "d", NULL};
    ahg_message with_text = calls("call-cd", cd);
    with_text.content = ahg_cstr("two more");
    const ahg_message base[] = {
        user("u0"),          calls("call-ab", ab),  user("u2"),          result("result-b", "b"),
        result("result-a", "a"), with_text,         result("result-c", "c"), user("u7"),
        result("result-d", "d"), call("call-e", "e"), result("result-e", "e"),
    };
    enum { N = LEN(base) };
    size_t checked = 0;
    for (unsigned mask = 0; mask < 1u << N; mask++) {
        for (size_t turns = 0; turns < 4; turns++) {
            ahg_message in[N];
            memcpy(in, base, sizeof in);
            ahg_history *h = history(in, N);
            for (size_t i = 0; i < N; i++) {
                if (mask & 1u << i) ahg_drop(h, i);
            }
            if (turns < 3) ahg_keep_last_turns(h, turns);
            ahg_settle_tool_exchanges(h);
            bool ok = pairs(h, mask, turns);
            CHECK(ok);
            checked++;
            ahg_history_free(h);
            if (!ok) return;
        }
    }
    CHECK(checked == (1u << N) * 4);
}

/* ---- A processor using them, run through the fake host ---------------------- */

static int last_turns(ahg_history *h, ahg_config *config, ahg_error *err) {
    int64_t turns = ahg_config_int(config, "turns", 2, 0, 1000);
    if (!ahg_config_check(config, err)) return -1;
    size_t dropped = ahg_keep_last_turns(h, (size_t)turns);
    dropped += ahg_settle_tool_exchanges(h);
    ahg_log_info("dropped %zu %s", dropped, ahg_plural(dropped, "message", "messages"));
    return 0;
}

AHG_EXPORT_PROCESSOR(last_turns, .name = "last-turns", .version = "0.1.0",
                     .summary = "Keeps the last turns, tool exchanges whole")

static void a_processor_keeps_the_last_turns_with_their_exchanges(void) {
    call_slots_len = 0;
    ahg_message in[] = {user("u1"), call("call-c1", "c1"), user("u2"), result("result-c1", "c1"),
                        assistant("a2"), user("u3")};
    ahg_test_log_clear();
    ahg_test_result r = ahg_test_run("{\"turns\": 1}", in, LEN(in));
    CHECK(r.error.kind == AHG_OK);
    CHECK(r.len == 1 && ahg_str_eq_c(r.messages[0].id, "u3"));
    ahg_test_result_free(&r);
    r = ahg_test_run("{\"turns\": 2}", in, LEN(in));
    CHECK(r.error.kind == AHG_OK);
    CHECK(r.len == 5 && ahg_str_eq_c(r.messages[0].id, "call-c1"));
    CHECK(ahg_test_log_count() == 2 && strcmp(ahg_test_log_line(1), "dropped 1 message") == 0);
    ahg_test_result_free(&r);
}

/* ---- The host services, natively -------------------------------------------- */

static int canned(void *arg, ahg_str prompt, ahg_str text, ahg_str *summary,
                  ahg_service_error *err) {
    (void)prompt;
    (void)err;
    (*(int *)arg)++;
    /* A buffer that is gone after the call: the SDK must have copied it. */
    static char scratch[32];
    snprintf(scratch, sizeof scratch, "%zu bytes", text.len);
    *summary = ahg_cstr(scratch);
    return 0;
}

static int refuse(void *arg, ahg_str prompt, ahg_str text, ahg_str *summary,
                  ahg_service_error *err) {
    (void)prompt;
    (void)text;
    (void)summary;
    err->kind = *(ahg_service_error_kind *)arg;
    err->message = ahg_cstr("grant it with --allow-summarize");
    return -1;
}

static void services_answer_natively_as_the_rust_sdk_does(void) {
    ahg_run_context ctx;
    memset(&ctx, 0, sizeof ctx);
    ahg_history *h = ahg_history_new(&ctx, NULL, 0);
    ahg_summary s;
    ahg_service_error e;
    /* Nothing served: a failure that says how to serve summaries. */
    ahg_test_stop_serving_summaries();
    CHECK(ahg_summarize(h, ahg_cstr("p"), ahg_cstr("t"), (ahg_summary_caps){0}, &s, &e) == -1);
    CHECK(e.kind == AHG_SERVICE_FAILED);
    CHECK(strstr(ahg_printf(h, "%.*s", (int)e.message.len, e.message.ptr).ptr,
                 "ahg_test_serve_summaries") != NULL);
    /* Served: the text, and the estimates as its cost. */
    int asked = 0;
    ahg_test_serve_summaries(canned, &asked);
    CHECK(ahg_summarize(h, ahg_cstr("Sum up."), ahg_cstr("abcdefgh"), (ahg_summary_caps){10, 0}, &s,
                        &e) == 0);
    CHECK(asked == 1 && e.kind == AHG_SERVICE_OK);
    CHECK(ahg_str_eq_c(s.text, "8 bytes"));
    CHECK(s.input_tokens == 4 && s.output_tokens == 2);
    /* Refused: the kind and the reason, kept after the call. */
    ahg_service_error_kind kinds[] = {AHG_SERVICE_DENIED, AHG_SERVICE_OVER_BUDGET,
                                      AHG_SERVICE_FAILED};
    const char *names[] = {"denied", "over budget", "failed"};
    for (size_t k = 0; k < 3; k++) {
        ahg_test_serve_summaries(refuse, &kinds[k]);
        CHECK(ahg_summarize(h, ahg_cstr("p"), ahg_cstr("t"), (ahg_summary_caps){0}, &s, &e) == -1);
        CHECK(e.kind == kinds[k]);
        CHECK(strcmp(ahg_service_error_name(e.kind), names[k]) == 0);
        CHECK(ahg_str_eq_c(e.message, "grant it with --allow-summarize"));
    }
    ahg_test_stop_serving_summaries();
    uint32_t n = 0;
    CHECK(ahg_count_tokens(h, ahg_cstr("abcde"), &n, &e) == 0 && n == 2);
    ahg_fact *facts = (ahg_fact *)&n;
    size_t len = 7;
    CHECK(ahg_read_memory(h, ahg_cstr(""), 10, &facts, &len, &e) == 0);
    CHECK(facts == NULL && len == 0);
    ahg_history_free(h);
}

int main(void) {
    turn_starts_are_kept_user_messages_said_by_the_user();
    last_turns_keep_system_and_summaries();
    last_turns_never_split_an_exchange();
    the_cut_moves_back_until_no_exchange_is_split();
    turns_already_dropped_do_not_count();
    fewer_turns_than_asked_keeps_everything_and_zero_keeps_none();
    a_result_answers_the_nearest_earlier_call_with_its_id();
    settling_drops_results_of_dropped_calls_and_calls_without_results();
    a_call_left_with_nothing_is_dropped();
    settling_sees_calls_taken_out_of_a_message();
    interrupted_calls_are_left_alone();
    pairing_is_whole_after_settling_for_every_drop_pattern();
    a_processor_keeps_the_last_turns_with_their_exchanges();
    services_answer_natively_as_the_rust_sdk_does();
    ahg_test_log_clear();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("C SDK: all checks passed\n");
    return 0;
}
