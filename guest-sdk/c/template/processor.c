/*
 * {{name}}: an agent-host history processor in C.
 *
 * It drops messages that say nothing: no text (or less than `min_chars`
 * characters of it), no parts, no reasoning and no tool calls. Tool results
 * are always kept, so a call never loses its answer. Edit `process` to make
 * it yours; the SDK is documented in agent_host_guest.h.
 */
#include "agent_host_guest.h"

/** Whether message `m` has at least `min_chars` bytes of non-blank text, or
 *  anything besides text. */
static bool says_something(const ahg_message *m, int64_t min_chars) {
    if (m->role == AHG_ROLE_TOOL || m->parts_len || m->has_reasoning || m->tool_calls_len) {
        return true;
    }
    int64_t chars = 0;
    for (size_t i = 0; i < m->content.len; i++) {
        char c = m->content.ptr[i];
        chars += c != ' ' && c != '\t' && c != '\n' && c != '\r';
    }
    return chars >= min_chars;
}

static int process(ahg_history *h, ahg_config *config, ahg_error *err) {
    int64_t min_chars = ahg_config_int(config, "min_chars", 1, 1, 1000000);
    if (!ahg_config_check(config, err)) return -1;

    size_t dropped = 0;
    for (size_t i = 0; i < ahg_len(h); i++) {
        if (!says_something(ahg_get(h, i), min_chars)) {
            ahg_drop(h, i);
            dropped++;
        }
    }
    ahg_log_info("dropped %zu of %zu messages", dropped, ahg_len(h));
    return 0;
}

AHG_EXPORT_PROCESSOR(process, .name = "{{name}}", .version = "0.1.0",
                     .summary = "Drops messages that say nothing",
                     .config_example = "{\"min_chars\": 1}")
