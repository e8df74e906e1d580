/*
 * agent_host_guest.h: the C SDK for agent-host history processors.
 *
 * A history processor is a WebAssembly component that receives a session's
 * history and answers with edits: keep this message, drop that one, replace
 * a third, insert a new one. This header is all an author needs: it hides the
 * bindings that `wit-bindgen c` generates from wit/v0.2.0/history.wit (the
 * glue is in agent_host_guest_wit.c) behind a small API over plain structs.
 *
 * A complete processor, which drops every message flagged `error`:
 *
 *     #include "agent_host_guest.h"
 *
 *     static int drop_errors(ahg_history *h, ahg_config *config, ahg_error *err) {
 *         bool quiet = ahg_config_bool(config, "quiet", false);
 *         if (!ahg_config_check(config, err)) return -1;   // unknown key, bad type
 *         size_t dropped = 0;
 *         for (size_t i = 0; i < ahg_len(h); i++) {
 *             if (ahg_get(h, i)->flags & AHG_FLAG_ERROR) { ahg_drop(h, i); dropped++; }
 *         }
 *         if (!quiet) ahg_log_info("dropped %zu of %zu messages", dropped, ahg_len(h));
 *         return 0;
 *     }
 *
 *     AHG_EXPORT_PROCESSOR(drop_errors, .name = "drop-errors", .version = "0.1.0",
 *                          .summary = "Drops messages flagged as errors",
 *                          .config_example = "{\"quiet\": true}")
 *
 * Build it with guest-sdk/c/build-component.sh; the same source compiles
 * natively (gcc or clang) against agent_host_guest_native.c, a fake host, so
 * its logic is tested with an ordinary C test program (see
 * agent_host_guest_testing.h).
 *
 * Memory: every string and array the SDK hands out, and every one an author
 * makes with ahg_alloc(), ahg_strdup(), ahg_printf() or ahg_buf_finish(),
 * belongs to the call's history and lives until the call ends. Authors never
 * free anything. Inside WebAssembly the host throws the instance away after
 * each call, so nothing is freed at all (that would be wasted work); natively,
 * ahg_test_run() frees it all at the end.
 *
 * Strings are UTF-8 and carry their length (ahg_str): the host's texts may
 * hold NUL bytes, so they are never NUL-terminated.
 *
 * What it deliberately leaves out: reordering kept messages (the host
 * supports it for processors that declare it; none of ours does), and the
 * Rust SDK's smaller conveniences (retain, tool_names,
 * last_tool_results_start), which are a loop in C.
 */
#ifndef AGENT_HOST_GUEST_H
#define AGENT_HOST_GUEST_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define AHG_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define AHG_PRINTF(f, a)
#endif

/* ---- Strings --------------------------------------------------------------- */

/** A UTF-8 string with its length; not NUL-terminated. */
typedef struct ahg_str {
    const char *ptr;
    size_t len;
} ahg_str;

/** An optional string: `some` is false when the field is absent. */
typedef struct ahg_opt_str {
    bool some;
    ahg_str str;
} ahg_opt_str;

/** A view of a NUL-terminated C string (no copy): ahg_cstr("hello"). */
ahg_str ahg_cstr(const char *s);
/** Whether two strings hold the same bytes. */
bool ahg_str_eq(ahg_str a, ahg_str b);
/** Whether `s` equals the C string `c`. */
bool ahg_str_eq_c(ahg_str s, const char *c);
/** The same string, given as an option that is present. */
ahg_opt_str ahg_some(ahg_str s);

/* ---- Messages -------------------------------------------------------------- */

/** Who speaks in a message. */
typedef enum ahg_role {
    AHG_ROLE_SYSTEM,
    AHG_ROLE_USER,
    AHG_ROLE_ASSISTANT,
    AHG_ROLE_TOOL,
} ahg_role;

/** Message flags, a bit set (`m->flags & AHG_FLAG_SUMMARY`). */
enum {
    /** Made by agent-host or a processor rather than said by a participant. */
    AHG_FLAG_SYNTHETIC = 1 << 0,
    /** Part of a summary checkpoint. */
    AHG_FLAG_SUMMARY = 1 << 1,
    /** For a tool result: the tool reported an error. */
    AHG_FLAG_ERROR = 1 << 2,
};

/** Where the bytes of a media part live: a URL or a session media path. */
typedef struct ahg_media_source {
    enum { AHG_MEDIA_URL, AHG_MEDIA_PATH } kind;
    ahg_str value;
} ahg_media_source;

/** The kind of a content part. */
typedef enum ahg_part_kind {
    AHG_PART_TEXT,
    AHG_PART_IMAGE,
    AHG_PART_FILE,
} ahg_part_kind;

/** One piece of structured content: read the member that `kind` names. */
typedef struct ahg_part {
    ahg_part_kind kind;
    union {
        /** AHG_PART_TEXT */
        ahg_str text;
        /** AHG_PART_IMAGE */
        struct {
            ahg_media_source source;
            ahg_opt_str mime_type;
        } image;
        /** AHG_PART_FILE */
        struct {
            ahg_str name;
            ahg_str path;
            ahg_opt_str mime_type;
        } file;
    };
} ahg_part;

/** The model's reasoning for an assistant message. */
typedef struct ahg_reasoning {
    /** The text; for redacted reasoning, the provider's opaque data. */
    ahg_str text;
    /** The provider's signature, needed to send it back. */
    ahg_opt_str signature;
    /** Whether `text` is opaque data rather than readable text. */
    bool redacted;
} ahg_reasoning;

/** A tool call made by an assistant message. */
typedef struct ahg_tool_call {
    ahg_str id;
    ahg_str name;
    /** The arguments, as JSON text exactly as the model produced them. */
    ahg_str arguments;
} ahg_tool_call;

/** Token usage reported by a provider. */
typedef struct ahg_usage {
    uint64_t input_tokens;
    uint64_t output_tokens;
    bool has_cache_read_tokens;
    uint64_t cache_read_tokens;
    bool has_cache_write_tokens;
    uint64_t cache_write_tokens;
} ahg_usage;

/** A point in time: seconds and nanoseconds since the Unix epoch. */
typedef struct ahg_timestamp {
    int64_t seconds;
    uint32_t nanoseconds;
} ahg_timestamp;

/** One message of a conversation (the WIT record `message`). */
typedef struct ahg_message {
    /** Unique within the session; a new message may leave it empty. */
    ahg_str id;
    ahg_role role;
    /** The plain text content (empty when the content is in `parts`). */
    ahg_str content;
    ahg_part *parts;
    size_t parts_len;
    bool has_reasoning;
    ahg_reasoning reasoning;
    ahg_tool_call *tool_calls;
    size_t tool_calls_len;
    /** For a tool result: the call it answers, and the tool's name. */
    ahg_opt_str tool_call_id;
    ahg_opt_str tool_name;
    bool has_usage;
    ahg_usage usage;
    ahg_opt_str model;
    bool has_timestamp;
    ahg_timestamp timestamp;
    ahg_opt_str agent;
    ahg_opt_str channel;
    /** AHG_FLAG_* bits. */
    uint8_t flags;
    /** Free-form data as a JSON object's text. */
    ahg_opt_str metadata;
    /** The host's token estimate (input only; ignored on output). */
    uint32_t tokens;
} ahg_message;

/** A message with `role` and `content` and nothing else. */
ahg_message ahg_message_new(ahg_role role, ahg_str content);

/**
 * The texts a processor may read or rewrite, in order: the content, each
 * text part, readable reasoning (not `redacted`), each tool call's
 * arguments. Returns how many there are; `out` (may be NULL) receives
 * pointers to at most `cap` of them, so `*out[k] = ...` rewrites text k.
 */
size_t ahg_message_texts(ahg_message *m, ahg_str **out, size_t cap);

/* ---- The history ----------------------------------------------------------- */

/**
 * What a structural processor reads of a message, without its strings (the
 * WIT record `header`): under contract 0.2.0 the host sends every header at
 * once, and the whole messages only when the processor first reads one.
 */
typedef struct ahg_header {
    ahg_role role;
    /** AHG_FLAG_* bits. */
    uint8_t flags;
    /** The host's token estimate for the whole message. */
    uint32_t tokens;
    bool has_timestamp;
    ahg_timestamp timestamp;
    /** For a tool result: the index of the message whose call it answers
     *  (the nearest earlier call with its id), when that call is in the history. */
    bool has_answers;
    uint32_t answers;
    /** How many tool calls and structured parts it has. */
    uint32_t tool_calls;
    uint32_t parts;
    /** The length of its content, of its reasoning text (when it has
     *  reasoning) and of its metadata (0 when none), in bytes. */
    uint32_t content_bytes;
    bool has_reasoning_bytes;
    uint32_t reasoning_bytes;
    uint32_t metadata_bytes;
    bool has_usage;
    ahg_usage usage;
} ahg_header;

/** The header of `m` (`has_answers` false: that needs the history). */
ahg_header ahg_header_of(const ahg_message *m);

/** What the host tells a processor about the run. */
typedef struct ahg_run_context {
    ahg_opt_str session_key;
    ahg_opt_str agent;
    ahg_opt_str model;
    uint32_t context_window;
    /** Tokens available for the history. */
    uint32_t budget;
    /** The host's estimate of the whole input history. */
    uint32_t total_tokens;
    /** User turns in the input. */
    uint32_t turn;
    ahg_usage usage;
    /** The time of the run. */
    ahg_timestamp now;
    /** This processor's configuration as JSON text (read it with ahg_config_*). */
    ahg_str config;
} ahg_run_context;

/**
 * The session's history for one call and the edits made to it so far. Every
 * input message starts out kept; indices are always those of the input, and
 * nothing is ever reordered.
 */
typedef struct ahg_history ahg_history;

/** How many messages the input had. */
size_t ahg_len(const ahg_history *h);
/** The input's headers (ahg_len() of them), as the host sent them: no text. */
const ahg_header *ahg_headers(const ahg_history *h);
/** The header of message `index` as it is now (a changed message's is worked
 *  out from its new contents; `answers` stays the input's). */
ahg_header ahg_header_at(const ahg_history *h, size_t index);
/**
 * Message `index` as it is now (changes included); NULL when out of range.
 * The first read of a message fetches them all from the host (once), texts
 * included: a processor that needs only headers should read those.
 */
const ahg_message *ahg_get(const ahg_history *h, size_t index);
/** Whether the whole messages have been fetched: whether the processor read,
 *  edited or replaced a message (or settled tool exchanges that link a
 *  result to a call). */
bool ahg_is_loaded(const ahg_history *h);
/** Drops every kept message whose current header fails `keep`, without
 *  reading any text; returns how many it dropped. */
size_t ahg_retain_headers(ahg_history *h, bool (*keep)(const ahg_header *header, void *arg),
                          void *arg);
/** What the host says about this call. */
const ahg_run_context *ahg_context(const ahg_history *h);
/** Whether message `index` is still kept. */
bool ahg_is_kept(const ahg_history *h, size_t index);
/** Whether message `index` was replaced or edited. */
bool ahg_is_changed(const ahg_history *h, size_t index);
/** How many input messages are still kept (changed ones included). */
size_t ahg_kept(const ahg_history *h);
/** Keeps message `index` (undoes ahg_drop). Every message starts kept. */
void ahg_keep(ahg_history *h, size_t index);
/** Drops message `index` from the output. */
void ahg_drop(ahg_history *h, size_t index);
/**
 * Message `index`, to change in place; the host receives it back as a
 * replacement, so only ask for it when you change it. Strings you put in it
 * must live until the call ends (ahg_strdup, ahg_printf, ahg_buf_finish).
 */
ahg_message *ahg_edit(ahg_history *h, size_t index);
/** Replaces message `index` by a copy of `m` (it stays at its place). */
void ahg_replace(ahg_history *h, size_t index, const ahg_message *m);
/**
 * Inserts a copy of `m` before input message `index` (ahg_len() appends).
 * Several inserts at one place keep the order they were made in.
 */
void ahg_insert(ahg_history *h, size_t index, const ahg_message *m);
/** Appends a copy of `m` after the last message. */
void ahg_push(ahg_history *h, const ahg_message *m);

/* ---- Turns and tool exchanges ---------------------------------------------- */

/*
 * A provider rejects a history in which a tool result has no call before it,
 * and most reject an assistant's tool call that no result answers. A
 * processor that drops messages can break either rule; these helpers, the
 * same as the Rust, Python and JavaScript SDKs' (keep_last_turns,
 * settle_tool_exchanges), keep the exchanges whole:
 *
 *     ahg_keep_last_turns(h, 10);       // drop old turns, never half an exchange
 *     for (...) ahg_drop(h, i);         // or any drops and edits of your own
 *     ahg_settle_tool_exchanges(h);     // then mend the pairing
 */

/** Whether `m` starts a turn: a user message that is not synthetic. */
bool ahg_starts_turn(const ahg_message *m);
/**
 * The indices where the kept turns start (ahg_starts_turn), oldest first;
 * `*count` receives how many. The array lives until the call ends.
 */
const size_t *ahg_turn_starts(ahg_history *h, size_t *count);
/**
 * Whether input message `index` is a tool result that answers a call in the
 * history; if so, `*caller` (may be NULL) receives the index of the message
 * that made the call. A result answers the nearest earlier call with its
 * `tool_call_id`. Worked out on the input as it came, before any edit, so a
 * call taken out of its message still counts.
 */
bool ahg_tool_caller(ahg_history *h, size_t index, size_t *caller);
/**
 * Keeps the last `turns` kept turns, system messages and summary-flagged
 * messages, and drops everything older. The cut moves back rather than split
 * a tool exchange: a kept result after it whose call is before it pulls it
 * back to the call, for as long as that pulls in more such results. Does
 * nothing when there are no more than `turns` turns; with 0 it drops every
 * message that is neither system nor summary. Returns how many messages it
 * dropped.
 */
size_t ahg_keep_last_turns(ahg_history *h, size_t turns);
/**
 * Makes the tool exchanges whole again after drops and edits: a kept result
 * whose call was dropped, or taken out of its message (ahg_edit), is dropped;
 * a kept message some of whose calls lost all their results (a result went
 * and none for that id is kept) loses those calls, as an edit, and is dropped
 * when nothing else is left in it (no calls, parts or reasoning, blank
 * content). Calls that had no result in the input, such as a turn the user
 * interrupted, are left alone. Returns how many messages it dropped.
 */
size_t ahg_settle_tool_exchanges(ahg_history *h);

/* ---- Memory owned by the call ---------------------------------------------- */

/** `size` zeroed bytes that live until the call ends. Never NULL (a failed
 *  allocation aborts the call, and the host keeps its input). */
void *ahg_alloc(ahg_history *h, size_t size);
/** A copy of `s` that lives until the call ends. */
ahg_str ahg_strdup(ahg_history *h, ahg_str s);
/**
 * A formatted string that lives until the call ends. The SDK formats with
 * its own small printf (wasi-libc's would import WASI): %s %.*s %c %d %i %u
 * %x %g %%, with the length modifiers l, ll, z and j; no widths or flags.
 * ahg_log, ahg_bad_config and ahg_failed format the same way.
 */
ahg_str ahg_printf(ahg_history *h, const char *fmt, ...) AHG_PRINTF(2, 3);

/** A growable byte buffer, for building a text piece by piece. */
typedef struct ahg_buf {
    char *ptr;
    size_t len;
    size_t cap;
} ahg_buf;

/** Appends `len` bytes. */
void ahg_buf_append(ahg_buf *b, const char *bytes, size_t len);
/** Appends a string. */
void ahg_buf_append_str(ahg_buf *b, ahg_str s);
/** Hands the buffer's bytes to the call (they live until it ends) and empties it. */
ahg_str ahg_buf_finish(ahg_history *h, ahg_buf *b);
/** Frees the buffer's bytes (for a buffer that is not finished). */
void ahg_buf_free(ahg_buf *b);

/* ---- Errors ---------------------------------------------------------------- */

/** Why a call failed; the host then keeps its input. */
typedef enum ahg_error_kind {
    AHG_OK = 0,
    /** The configuration is invalid; the message says which key and why. */
    AHG_BAD_CONFIG,
    /** The processor failed; the message says why. */
    AHG_FAILED,
} ahg_error_kind;

/** An error being reported: set it with ahg_bad_config() or ahg_failed(). */
typedef struct ahg_error {
    ahg_error_kind kind;
    /** NUL-terminated; owned by the SDK. */
    char *message;
} ahg_error;

/** Records a configuration error; returns -1 (`return ahg_bad_config(err, ...)`). */
int ahg_bad_config(ahg_error *err, const char *fmt, ...) AHG_PRINTF(2, 3);
/** Records any other failure; returns -1. */
int ahg_failed(ahg_error *err, const char *fmt, ...) AHG_PRINTF(2, 3);

/* ---- JSON and configuration ------------------------------------------------ */

/** A parsed JSON value. */
typedef enum ahg_json_type {
    AHG_JSON_NULL,
    AHG_JSON_BOOL,
    AHG_JSON_NUMBER,
    AHG_JSON_STRING,
    AHG_JSON_ARRAY,
    AHG_JSON_OBJECT,
} ahg_json_type;

typedef struct ahg_json ahg_json;

struct ahg_json {
    ahg_json_type type;
    bool boolean;
    double number;
    /** AHG_JSON_STRING: the unescaped text. */
    ahg_str string;
    /** AHG_JSON_ARRAY and AHG_JSON_OBJECT: `len` items (and keys for objects). */
    ahg_json *items;
    ahg_str *keys;
    size_t len;
};

/**
 * Parses JSON text (RFC 8259, nesting at most 64 deep) into values owned by
 * the call. Returns NULL and sets `err` (AHG_BAD_CONFIG, with line and
 * column) when the text is not JSON.
 */
const ahg_json *ahg_json_parse(ahg_history *h, ahg_str text, ahg_error *err);
/** The value of `key` in an object, or NULL. */
const ahg_json *ahg_json_get(const ahg_json *object, const char *key);
/** "a boolean", "a string", ...: for error messages. */
const char *ahg_json_type_name(ahg_json_type type);

/**
 * The processor's configuration: a JSON object being read. Each getter
 * returns the key's value, or `fallback` when the key is absent (`null`
 * counts as absent), and remembers the key as one the processor takes. A
 * value of the wrong type records an error that names the key
 * (`` `emails`: expected a boolean, found a string ``) and returns the
 * fallback; the first error wins. ahg_config_check() then reports it, or a
 * key that no getter asked for (`` unknown field `email` ``): call it after
 * the getters. The SDK calls it again after the processor returns, so a
 * misspelt key is never silently ignored.
 */
typedef struct ahg_config ahg_config;

/** Whether `key` is present (and not null). Marks it as known. */
bool ahg_config_has(ahg_config *c, const char *key);
bool ahg_config_bool(ahg_config *c, const char *key, bool fallback);
/** A number; an error when it is not an integer within [min, max]. */
int64_t ahg_config_int(ahg_config *c, const char *key, int64_t fallback, int64_t min, int64_t max);
double ahg_config_number(ahg_config *c, const char *key, double fallback);
ahg_str ahg_config_string(ahg_config *c, const char *key, const char *fallback);
/** A required string of an object read with ahg_config_object_at(). */
ahg_str ahg_config_require_string(ahg_config *c, const char *key);
/** The length of an array (0 when absent). */
size_t ahg_config_array_len(ahg_config *c, const char *key);
/** Item `i` of array `key`, which must be a string. */
ahg_str ahg_config_string_at(ahg_config *c, const char *key, size_t i);
/** Item `i` of array `key`, which must be an object, to read with the getters. */
ahg_config *ahg_config_object_at(ahg_config *c, const char *key, size_t i);
/** The raw JSON value of `key`, or NULL. Marks it as known. */
const ahg_json *ahg_config_raw(ahg_config *c, const char *key);
/** Records an error about `key` (`` `key`: ... ``), as the getters do. */
void ahg_config_error(ahg_config *c, const char *key, const char *fmt, ...) AHG_PRINTF(3, 4);
/**
 * Reports the first recorded error, or an unknown key in this object or any
 * object read from it, into `err` as AHG_BAD_CONFIG. Returns whether the
 * configuration is good.
 */
bool ahg_config_check(ahg_config *c, ahg_error *err);

/* ---- The host's services --------------------------------------------------- */

/** The level of a log line. */
typedef enum ahg_level {
    AHG_TRACE,
    AHG_DEBUG,
    AHG_INFO,
    AHG_WARN,
    AHG_ERROR,
} ahg_level;

/** Writes a line to the host's log, attributed to this processor. */
void ahg_log(ahg_level level, const char *fmt, ...) AHG_PRINTF(2, 3);
#define ahg_log_debug(...) ahg_log(AHG_DEBUG, __VA_ARGS__)
#define ahg_log_info(...) ahg_log(AHG_INFO, __VA_ARGS__)
#define ahg_log_warn(...) ahg_log(AHG_WARN, __VA_ARGS__)

/** The host's token estimate for a text. */
uint32_t ahg_estimate_tokens(ahg_str text);
/** The host's estimate for a whole message (input messages carry theirs in `tokens`). */
uint32_t ahg_estimate_message_tokens(const ahg_message *m);

/* ---- Services the user grants (contract 0.2.0) ------------------------------
 *
 * A summary written by the session's model, token counts with the session's
 * tokenizer, and a read of the session's long-term memory. Each is closed
 * unless the user grants it to the processor (--allow-summarize,
 * --allow-count-tokens, --allow-memory, or `allow_summarize = true` ... in
 * its [[processors]] entry), and each call spends the processor's budget for
 * the run. A call that is not granted, over the budget, or failed returns -1
 * with `err` saying which and why; it never traps, so handle it (usually by
 * leaving the history as it is):
 *
 *     ahg_summary s;
 *     ahg_service_error e;
 *     if (ahg_summarize(h, ahg_cstr("Summarize in one line."), text,
 *                       (ahg_summary_caps){0}, &s, &e) != 0) {
 *         ahg_log_warn("no summary (%s: %.*s); the history is kept",
 *                      ahg_service_error_name(e.kind), (int)e.message.len, e.message.ptr);
 *         return 0;
 *     }
 *
 * The host calls the model: the processor never sees a key or an endpoint.
 * Natively (agent_host_guest_native.c), ahg_summarize answers with what
 * ahg_test_serve_summaries() set (else it fails), ahg_count_tokens with the
 * host's default estimate and ahg_read_memory with no facts, as the Rust
 * SDK does. What these functions hand out lives until the call ends.
 */

/** Why a host service gave no answer. */
typedef enum ahg_service_error_kind {
    AHG_SERVICE_OK = 0,
    /** The user has not granted the service; the message names the grant. */
    AHG_SERVICE_DENIED,
    /** The call would go over the processor's budget for the run. */
    AHG_SERVICE_OVER_BUDGET,
    /** The service was tried and failed (the model timed out, none is configured, ...). */
    AHG_SERVICE_FAILED,
} ahg_service_error_kind;

/** A refused or failed service call: its kind and the host's reason. */
typedef struct ahg_service_error {
    ahg_service_error_kind kind;
    ahg_str message;
} ahg_service_error;

/** "denied", "over budget" or "failed", as the Rust SDK's error shows itself
 *  in a log line ("ok" for AHG_SERVICE_OK). */
const char *ahg_service_error_name(ahg_service_error_kind kind);

/** What one ahg_summarize call asks; the host lowers each cap to what the
 *  budget leaves. 0 (as in `(ahg_summary_caps){0}`) is the host's cap. */
typedef struct ahg_summary_caps {
    /** The most tokens the summary may take. */
    uint32_t max_tokens;
    /** The most time the call may take, in milliseconds. */
    uint32_t timeout_ms;
} ahg_summary_caps;

/** A summary the model wrote, and what it cost. */
typedef struct ahg_summary {
    ahg_str text;
    /** Tokens the model read. */
    uint64_t input_tokens;
    /** Tokens the model wrote. */
    uint64_t output_tokens;
} ahg_summary;

/** A fact of the session's long-term memory. */
typedef struct ahg_fact {
    ahg_str id;
    /** What it is about. */
    ahg_str entity;
    /** The fact, as a sentence. */
    ahg_str text;
    /** The single-valued attribute it fills, and its value. */
    ahg_opt_str attribute;
    ahg_opt_str value;
    /** When it was recorded. */
    ahg_timestamp recorded;
} ahg_fact;

/** Has the session's model write `text` up as `prompt` (the instructions)
 *  asks, within `caps`. Blocks while the model answers; the time is not
 *  counted against the processor's deadline. Needs the `summarize` grant.
 *  Returns 0 with `*out` set, or -1 with `*err` set. */
int ahg_summarize(ahg_history *h, ahg_str prompt, ahg_str text, ahg_summary_caps caps,
                  ahg_summary *out, ahg_service_error *err);
/** The number of tokens `text` takes with the session's tokenizer (needs the
 *  `count-tokens` grant; ahg_estimate_tokens needs none). 0 or -1, as above. */
int ahg_count_tokens(ahg_history *h, ahg_str text, uint32_t *out, ahg_service_error *err);
/** The facts of the session's long-term memory that best match `query` (the
 *  newest for an empty one), at most `limit` (the host caps it): the run's
 *  user's facts with the run's agent only. Needs the `memory` grant. Returns
 *  0 with `*facts` (NULL when none) and `*len` set, or -1 with `*err` set. */
int ahg_read_memory(ahg_history *h, ahg_str query, uint32_t limit, ahg_fact **facts,
                    size_t *len, ahg_service_error *err);

/** `word`, or `word` + "s" unless n is 1: for log lines. */
const char *ahg_plural(size_t n, const char *word, const char *words);

/* ---- Exporting a processor ------------------------------------------------- */

/** What a processor says about itself. */
typedef struct ahg_description {
    const char *name;
    const char *version;
    const char *summary;
    /** The JSON Schema of its configuration, or NULL. */
    const char *config_schema;
    /** An example configuration, shown by `agent-host processor inspect`, or NULL. */
    const char *config_example;
} ahg_description;

/** The function a processor implements: edit `h`, return 0, or -1 with `err` set. */
typedef int (*ahg_process_fn)(ahg_history *h, ahg_config *config, ahg_error *err);

/** What AHG_EXPORT_PROCESSOR defines; the glue and the test harness call it. */
extern const ahg_description ahg_exported_description;
int ahg_exported_process(ahg_history *h, ahg_config *config, ahg_error *err);

/**
 * Exports `fn` as the component's processor, with a description given as
 * designated initialisers (.name, .version, .summary, .config_example,
 * .config_schema). Use it once, in one source file.
 */
#define AHG_EXPORT_PROCESSOR(fn, ...)                                                 \
    const ahg_description ahg_exported_description = {__VA_ARGS__};                  \
    int ahg_exported_process(ahg_history *h, ahg_config *config, ahg_error *err) {    \
        return fn(h, config, err);                                                    \
    }

/* ---- For the glue and the test harness, not for authors -------------------- */

/** A history over `messages` (not copied: they must outlive it); its headers
 *  are worked out here, and the messages count as fetched on first read. */
ahg_history *ahg_history_new(const ahg_run_context *ctx, ahg_message *messages, size_t len);
/** Fetches the whole messages (ahg_len() of them) of a history's source. */
typedef ahg_message *(*ahg_fetch_fn)(ahg_history *h, void *source);
/** A history of `len` messages known by their headers (owned by the call),
 *  whose messages `fetch` gives on first read: the host's, in a component. */
ahg_history *ahg_history_from_source(const ahg_run_context *ctx, ahg_header *headers, size_t len,
                                     ahg_fetch_fn fetch, void *source);
/** Runs the exported processor over `h`: parses the configuration, calls it,
 *  checks the configuration. Returns 0 or -1 with `err` set. */
int ahg_history_process(ahg_history *h, ahg_error *err);

/** One entry of the answer: keep input `index`, replace it by `message`, or insert `message`. */
typedef struct ahg_item {
    enum { AHG_ITEM_KEEP, AHG_ITEM_REPLACE, AHG_ITEM_INSERT } kind;
    uint32_t index;
    const ahg_message *message;
} ahg_item;

/** The answer, in output order; `*len` receives its length. Owned by `h`. */
ahg_item *ahg_history_items(ahg_history *h, size_t *len);
/** Frees the history and everything allocated for the call (native only). */
void ahg_history_free(ahg_history *h);

/** Host functions, implemented by the wasm glue or by the native fake host
 *  (ahg_summarize, ahg_count_tokens and ahg_read_memory are too). */
void ahg_host_log(ahg_level level, ahg_str text);
uint32_t ahg_host_estimate_tokens(ahg_str text);
uint32_t ahg_host_estimate_message_tokens(const ahg_message *m);

#ifdef __cplusplus
}
#endif

#endif /* AGENT_HOST_GUEST_H */
