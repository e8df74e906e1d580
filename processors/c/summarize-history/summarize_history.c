/*
 * summarize-history, in C: replaces the older part of a history with a
 * summary written by the session's model, through the host service
 * `summarize` (granted with --allow-summarize).
 *
 * A port of the standard Rust processor (processors/summarize-history),
 * which is the specification: the same output on the same history with the
 * same model, and the same request to the model. Everything before the last
 * `keep_turns` turns (system messages aside) is sent to the model and
 * replaced by a checkpoint pair flagged synthetic and summary: a user
 * message saying what was summarized, and the assistant's summary. The cut
 * moves back rather than separate a tool call from its results. When the
 * service is denied, over budget or fails, the history is left as it is and
 * the reason is logged.
 *
 * Configuration (defaults): keep_turns (4, at least 1), min_messages (6),
 * trigger_tokens (0, off), max_words (400), max_tokens (0: the host's cap),
 * timeout_ms (0: the host's cap), instructions (the prompt, with
 * `{max_words}` replaced).
 */
#include <string.h>

#include "agent_host_guest.h"

/* The built-in prompt (the Rust processor's, word for word). */
static const char INSTRUCTIONS[] =
    "You summarize the earlier part of a conversation between a user and an AI agent so that "
    "the agent can continue without it. Write Markdown with these headings: Files Modified, Key "
    "Decisions, Important Values (paths, URLs, identifiers, commands, numbers, copied verbatim "
    "in backticks), Current State, Pending Tasks. Facts only from the conversation; carry "
    "forward the facts of a previous summary unless the conversation changed them. Write only "
    "the summary, under {max_words} words.";

/* Characters (code points) of one message quoted to the model; the middle of
 * a longer one is elided. */
enum { QUOTE_CHARS = 4000 };

/* Whether byte `b` starts a UTF-8 code point. */
static bool starts_char(unsigned char b) { return (b & 0xC0) != 0x80; }

/* How many code points `s` has. */
static size_t char_count(ahg_str s) {
    size_t n = 0;
    for (size_t i = 0; i < s.len; i++) n += starts_char((unsigned char)s.ptr[i]);
    return n;
}

/* The byte offset of code point `k` of `s` (s.len past the end). */
static size_t char_offset(ahg_str s, size_t k) {
    size_t n = 0;
    for (size_t i = 0; i < s.len; i++) {
        if (starts_char((unsigned char)s.ptr[i])) {
            if (n == k) return i;
            n++;
        }
    }
    return s.len;
}

/* `text`, its middle elided past QUOTE_CHARS code points, appended to `b`. */
static void quote(ahg_history *h, ahg_buf *b, ahg_str text) {
    size_t count = char_count(text);
    if (count <= QUOTE_CHARS) {
        ahg_buf_append_str(b, text);
        return;
    }
    size_t head = char_offset(text, QUOTE_CHARS / 2);
    size_t tail = char_offset(text, count - QUOTE_CHARS / 2);
    ahg_buf_append(b, text.ptr, head);
    ahg_buf_append_str(b, ahg_printf(h, "\n[... %zu characters elided ...]\n", count - QUOTE_CHARS));
    ahg_buf_append(b, text.ptr + tail, text.len - tail);
}

/* The length in bytes of the Unicode white space (as Rust's str::trim sees
 * it) that starts at s[i], or 0. */
static size_t space_at(const unsigned char *s, size_t len, size_t i) {
    unsigned char c = s[i];
    if (c == ' ' || (c >= 0x09 && c <= 0x0D)) return 1;
    if (c == 0xC2 && i + 1 < len && (s[i + 1] == 0x85 || s[i + 1] == 0xA0)) return 2;
    if (i + 2 >= len) return 0;
    unsigned a = s[i + 1], z = s[i + 2];
    if (c == 0xE1 && a == 0x9A && z == 0x80) return 3;                 /* U+1680 */
    if (c == 0xE2 && a == 0x80 && (z <= 0x8A || z == 0xA8 || z == 0xA9 || z == 0xAF)) return 3;
    if (c == 0xE2 && a == 0x81 && z == 0x9F) return 3;                 /* U+205F */
    if (c == 0xE3 && a == 0x80 && z == 0x80) return 3;                 /* U+3000 */
    return 0;
}

/* `s` without the white space at both ends. */
static ahg_str trim(ahg_str s) {
    const unsigned char *p = (const unsigned char *)s.ptr;
    size_t start = 0, end = s.len;
    for (size_t n; start < end && (n = space_at(p, end, start)) > 0;) start += n;
    while (end > start) {
        /* The code point that ends at `end`. */
        size_t k = end - 1;
        while (k > start && !starts_char(p[k])) k--;
        size_t n = space_at(p, end, k);
        if (n == 0 || k + n != end) break;
        end = k;
    }
    ahg_str out = {s.ptr + start, end - start};
    return out;
}

/* Where the kept turns start: the start of the last `turns` turns, moved back
 * so that no kept tool result answers a call before it. False when there are
 * no more than `turns` turns. */
static bool cut_at(ahg_history *h, size_t turns, size_t *cut) {
    size_t count = 0;
    const size_t *starts = ahg_turn_starts(h, &count);
    if (count <= turns) return false;
    size_t at = starts[count - turns];
    size_t checked = ahg_len(h);
    while (at < checked) {
        bool found = false;
        size_t earliest = 0;
        for (size_t i = at; i < checked; i++) {
            size_t caller;
            if (ahg_tool_caller(h, i, &caller) && (!found || caller < earliest)) {
                earliest = caller;
                found = true;
            }
        }
        checked = at;
        if (found && earliest < at) at = earliest;
    }
    *cut = at;
    return true;
}

/* The messages at `span` as plain text for the model. */
static ahg_str material(ahg_history *h, const size_t *span, size_t len) {
    static const char *roles[] = {"system", "user", "assistant", "tool result"};
    ahg_buf b = {0};
    ahg_buf_append_str(&b, ahg_cstr("<conversation>\n"));
    for (size_t k = 0; k < len; k++) {
        const ahg_message *m = ahg_get(h, span[k]);
        ahg_buf_append_str(&b, ahg_cstr("["));
        ahg_buf_append_str(&b, ahg_cstr(m->flags & AHG_FLAG_SUMMARY ? "previous summary"
                                                                    : roles[m->role]));
        if (m->tool_name.some) {
            ahg_buf_append_str(&b, ahg_cstr(" "));
            ahg_buf_append_str(&b, m->tool_name.str);
        }
        ahg_buf_append_str(&b, ahg_cstr("]\n"));
        /* The content and the text parts, a line apart. */
        ahg_buf text = {0};
        ahg_buf_append_str(&text, m->content);
        for (size_t p = 0; p < m->parts_len; p++) {
            if (m->parts[p].kind != AHG_PART_TEXT) continue;
            if (text.len) ahg_buf_append_str(&text, ahg_cstr("\n"));
            ahg_buf_append_str(&text, m->parts[p].text);
        }
        if (text.len) {
            quote(h, &b, (ahg_str){text.ptr, text.len});
            ahg_buf_append_str(&b, ahg_cstr("\n"));
        }
        ahg_buf_free(&text);
        for (size_t c = 0; c < m->tool_calls_len; c++) {
            ahg_buf_append_str(&b, ahg_cstr("-> calls "));
            ahg_buf_append_str(&b, m->tool_calls[c].name);
            ahg_buf_append_str(&b, ahg_cstr("("));
            quote(h, &b, m->tool_calls[c].arguments);
            ahg_buf_append_str(&b, ahg_cstr(")\n"));
        }
        ahg_buf_append_str(&b, ahg_cstr("\n"));
    }
    ahg_buf_append_str(&b, ahg_cstr("</conversation>\n"));
    return ahg_buf_finish(h, &b);
}

/* `text` with every `{max_words}` replaced by `words`. */
static ahg_str with_words(ahg_history *h, ahg_str text, ahg_str words) {
    static const char key[] = "{max_words}";
    const size_t key_len = sizeof key - 1;
    ahg_buf b = {0};
    size_t i = 0;
    while (i < text.len) {
        if (text.len - i >= key_len && memcmp(text.ptr + i, key, key_len) == 0) {
            ahg_buf_append_str(&b, words);
            i += key_len;
        } else {
            ahg_buf_append(&b, text.ptr + i, 1);
            i++;
        }
    }
    return ahg_buf_finish(h, &b);
}

static int summarize_history(ahg_history *h, ahg_config *config, ahg_error *err) {
    const int64_t most = INT64_MAX;
    int64_t keep_turns = ahg_config_int(config, "keep_turns", 4, 0, most);
    int64_t min_messages = ahg_config_int(config, "min_messages", 6, 0, most);
    int64_t trigger_tokens = ahg_config_int(config, "trigger_tokens", 0, 0, most);
    int64_t max_words = ahg_config_int(config, "max_words", 400, 0, UINT32_MAX);
    int64_t max_tokens = ahg_config_int(config, "max_tokens", 0, 0, UINT32_MAX);
    int64_t timeout_ms = ahg_config_int(config, "timeout_ms", 0, 0, UINT32_MAX);
    ahg_str instructions = ahg_config_string(config, "instructions", INSTRUCTIONS);
    if (!ahg_config_check(config, err)) return -1;
    if (keep_turns == 0) {
        return ahg_bad_config(
            err, "`keep_turns` must be at least 1 (0 would summarize the question being asked)");
    }
    if (max_words == 0) return ahg_bad_config(err, "`max_words` must be at least 1");

    uint32_t total = ahg_context(h)->total_tokens;
    if ((int64_t)total < trigger_tokens) {
        ahg_log_debug("%u tokens, under the trigger of %lld; nothing summarized", total,
                      (long long)trigger_tokens);
        return 0;
    }
    size_t cut;
    if (!cut_at(h, (size_t)keep_turns, &cut)) return 0;
    size_t *span = ahg_alloc(h, (cut + 1) * sizeof *span);
    size_t len = 0;
    for (size_t i = 0; i < cut; i++) {
        if (ahg_header_at(h, i).role != AHG_ROLE_SYSTEM) span[len++] = i;
    }
    if ((int64_t)len < (min_messages > 1 ? min_messages : 1)) {
        ahg_log_debug("%zu older messages, fewer than %lld; nothing summarized", len,
                      (long long)min_messages);
        return 0;
    }
    ahg_str prompt = with_words(h, instructions, ahg_printf(h, "%lld", (long long)max_words));
    ahg_summary_caps caps = {(uint32_t)max_tokens, (uint32_t)timeout_ms};
    ahg_summary summary;
    ahg_service_error refused;
    if (ahg_summarize(h, prompt, material(h, span, len), caps, &summary, &refused) != 0) {
        ahg_log_warn("no summary (%s: %.*s); the history is kept",
                     ahg_service_error_name(refused.kind), (int)refused.message.len,
                     refused.message.ptr);
        return 0;
    }
    ahg_str text = trim(summary.text);
    if (text.len == 0) {
        ahg_log_warn("the model wrote an empty summary; the history is kept");
        return 0;
    }
    for (size_t k = 0; k < len; k++) ahg_drop(h, span[k]);
    ahg_message boundary = ahg_message_new(
        AHG_ROLE_USER,
        ahg_printf(h, "[The %zu earlier messages of this conversation were summarized.]", len));
    boundary.flags = AHG_FLAG_SYNTHETIC | AHG_FLAG_SUMMARY;
    ahg_message answer = ahg_message_new(AHG_ROLE_ASSISTANT, text);
    answer.flags = AHG_FLAG_SYNTHETIC | AHG_FLAG_SUMMARY;
    answer.metadata = ahg_some(ahg_printf(
        h, "{\"summary_of\":%zu,\"input_tokens\":%llu,\"output_tokens\":%llu}", len,
        (unsigned long long)summary.input_tokens, (unsigned long long)summary.output_tokens));
    ahg_insert(h, span[0], &boundary);
    ahg_insert(h, span[0], &answer);
    ahg_log_info("summarized %zu messages (%llu model tokens read, %llu written)", len,
                 (unsigned long long)summary.input_tokens,
                 (unsigned long long)summary.output_tokens);
    return 0;
}

AHG_EXPORT_PROCESSOR(summarize_history, .name = "summarize-history", .version = "0.1.0",
                     .summary = "Replaces the older part of a history with a summary written by "
                                "the session's model",
                     .config_example = "{\"keep_turns\": 4, \"min_messages\": 6, \"max_words\": 400}")
