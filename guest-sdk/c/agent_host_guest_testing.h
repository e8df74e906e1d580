/*
 * agent_host_guest_testing.h: run a processor natively, against a fake host.
 *
 * Compile the processor's sources with agent_host_guest.c and
 * agent_host_guest_native.c (gcc or clang, any host) and a test program:
 *
 *     ahg_message in[] = {ahg_message_new(AHG_ROLE_USER, ahg_cstr("hello"))};
 *     ahg_test_result r = ahg_test_run("{\"quiet\": true}", in, 1);
 *     assert(r.error.kind == AHG_OK && r.len == 1);
 *     ahg_test_result_free(&r);
 *
 * The fake host's token estimates are the real host's default estimator's
 * (the conformance cases in guest-sdk/conformance check it). Log lines are
 * kept (and echoed to stderr when AHG_TEST_VERBOSE is set in the
 * environment). The host services answer as the Rust SDK's do natively:
 * ahg_summarize with what ahg_test_serve_summaries set (else it fails),
 * ahg_count_tokens with the default estimate, ahg_read_memory with no facts.
 */
#ifndef AGENT_HOST_GUEST_TESTING_H
#define AGENT_HOST_GUEST_TESTING_H

#include "agent_host_guest.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What one call gave. */
typedef struct ahg_test_result {
    /** AHG_OK, or why the call failed (then `messages` is the input). */
    ahg_error error;
    /** The output history, as the host builds it from the answer. */
    ahg_message *messages;
    size_t len;
    /** The answer itself: keeps, replacements and inserts. */
    ahg_item *items;
    size_t items_len;
    /** Own the memory of the call. */
    ahg_history *history;
    ahg_history *storage;
} ahg_test_result;

/** Runs the exported processor with `config` (JSON text, NULL for none) over
 *  `messages`, which are not changed (the processor edits a copy). */
ahg_test_result ahg_test_run(const char *config, const ahg_message *messages, size_t len);
/** Frees a result and everything the call allocated. */
void ahg_test_result_free(ahg_test_result *r);

/** The log lines of the calls so far, and their levels. */
size_t ahg_test_log_count(void);
const char *ahg_test_log_line(size_t i);
ahg_level ahg_test_log_level(size_t i);
/** Forgets the log lines kept so far. */
void ahg_test_log_clear(void);

/**
 * What answers ahg_summarize natively: 0 with `*summary` set (the text
 * needs to live only until the function returns: the SDK copies it), or -1
 * with `err->kind` (AHG_SERVICE_DENIED stands for a processor the user did
 * not grant `summarize`) and `err->message` set. `arg` is what
 * ahg_test_serve_summaries was given.
 */
typedef int (*ahg_test_summaries_fn)(void *arg, ahg_str prompt, ahg_str text, ahg_str *summary,
                                     ahg_service_error *err);
/**
 * Has ahg_summarize answer with `fn` from now on; the summary's tokens are
 * the host's default estimates of the prompt and text (read) and of the
 * answer (written):
 *
 *     static int canned(void *arg, ahg_str prompt, ahg_str text, ahg_str *summary,
 *                       ahg_service_error *err) {
 *         *summary = ahg_cstr("THE SUMMARY");
 *         return 0;
 *     }
 *     ahg_test_serve_summaries(canned, NULL);
 */
void ahg_test_serve_summaries(ahg_test_summaries_fn fn, void *arg);
/** Stops what ahg_test_serve_summaries set: ahg_summarize fails again. */
void ahg_test_stop_serving_summaries(void);

#ifdef __cplusplus
}
#endif

#endif /* AGENT_HOST_GUEST_TESTING_H */
