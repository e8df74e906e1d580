/*
 * agent_host_guest_native.c: a fake host for running processors natively
 * (tests, benchmarks). Not part of a component: the wasm build links
 * agent_host_guest_wit.c instead.
 */
#include "agent_host_guest_testing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct log_line {
    ahg_level level;
    char *text;
} log_line;

static log_line *lines;
static size_t lines_len, lines_cap;

void ahg_host_log(ahg_level level, ahg_str text) {
    static const char *names[] = {"trace", "debug", "info", "warn", "error"};
    if (getenv("AHG_TEST_VERBOSE")) {
        fprintf(stderr, "[%s] %.*s\n", names[level], (int)text.len, text.ptr);
    }
    if (lines_len == lines_cap) {
        lines_cap = lines_cap ? lines_cap * 2 : 16;
        lines = realloc(lines, lines_cap * sizeof *lines);
        if (!lines) abort();
    }
    char *copy = malloc(text.len + 1);
    if (!copy) abort();
    memcpy(copy, text.ptr, text.len);
    copy[text.len] = 0;
    lines[lines_len].level = level;
    lines[lines_len].text = copy;
    lines_len++;
}

size_t ahg_test_log_count(void) { return lines_len; }
const char *ahg_test_log_line(size_t i) { return i < lines_len ? lines[i].text : NULL; }
ahg_level ahg_test_log_level(size_t i) { return i < lines_len ? lines[i].level : AHG_INFO; }

void ahg_test_log_clear(void) {
    for (size_t i = 0; i < lines_len; i++) free(lines[i].text);
    lines_len = 0;
}

/* The host's default estimator (agent_host_core::tokens::HeuristicCounter):
 * Latin text at 4 characters (code points, not bytes) a token and CJK at 3,
 * counted run by run and each run rounded up; 4 tokens a message, 1,000 an
 * image, 3 a tool call beyond its name and arguments. The guest-sdk
 * conformance cases hold every SDK to it. */
enum {
    LATIN_CHARS_PER_TOKEN = 4,
    CJK_CHARS_PER_TOKEN = 3,
    MESSAGE_OVERHEAD = 4,
    IMAGE_TOKENS = 1000,
    TOOL_CALL_OVERHEAD = 3,
};

static bool is_cjk(uint32_t c) {
    return (c >= 0x1100 && c <= 0x11FF) || (c >= 0x2E80 && c <= 0x2FDF) ||
           (c >= 0x3000 && c <= 0x4DBF) || (c >= 0x4E00 && c <= 0x9FFF) ||
           (c >= 0xA960 && c <= 0xA97F) || (c >= 0xAC00 && c <= 0xD7FF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0xFE30 && c <= 0xFE4F) ||
           (c >= 0xFF00 && c <= 0xFFEF) || (c >= 0x20000 && c <= 0x3FFFF);
}

static uint64_t div_ceil(uint64_t n, uint64_t d) { return (n + d - 1) / d; }

uint32_t ahg_host_estimate_tokens(ahg_str text) {
    const unsigned char *p = (const unsigned char *)text.ptr;
    uint64_t total = 0, latin = 0, cjk = 0;
    for (size_t i = 0; i < text.len;) {
        /* One code point (the host's texts are valid UTF-8). */
        uint32_t c = p[i];
        size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        if (i + n > text.len) n = text.len - i;
        if (n == 2) c = (c & 0x1Fu) << 6 | (p[i + 1] & 0x3Fu);
        if (n == 3) c = (c & 0x0Fu) << 12 | (p[i + 1] & 0x3Fu) << 6 | (p[i + 2] & 0x3Fu);
        if (n == 4) {
            c = (c & 0x07u) << 18 | (p[i + 1] & 0x3Fu) << 12 | (p[i + 2] & 0x3Fu) << 6 |
                (p[i + 3] & 0x3Fu);
        }
        i += n;
        if (is_cjk(c)) {
            total += div_ceil(latin, LATIN_CHARS_PER_TOKEN);
            latin = 0;
            cjk++;
        } else {
            total += div_ceil(cjk, CJK_CHARS_PER_TOKEN);
            cjk = 0;
            latin++;
        }
    }
    total += div_ceil(latin, LATIN_CHARS_PER_TOKEN) + div_ceil(cjk, CJK_CHARS_PER_TOKEN);
    return total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
}

uint32_t ahg_host_estimate_message_tokens(const ahg_message *m) {
    uint64_t total = MESSAGE_OVERHEAD + ahg_host_estimate_tokens(m->content);
    for (size_t i = 0; i < m->parts_len; i++) {
        const ahg_part *p = &m->parts[i];
        if (p->kind == AHG_PART_TEXT) total += ahg_host_estimate_tokens(p->text);
        if (p->kind == AHG_PART_IMAGE) total += IMAGE_TOKENS;
        if (p->kind == AHG_PART_FILE) {
            total += ahg_host_estimate_tokens(p->file.name) + ahg_host_estimate_tokens(p->file.path);
        }
    }
    if (m->has_reasoning) total += ahg_host_estimate_tokens(m->reasoning.text);
    for (size_t i = 0; i < m->tool_calls_len; i++) {
        total += TOOL_CALL_OVERHEAD + ahg_host_estimate_tokens(m->tool_calls[i].name) +
                 ahg_host_estimate_tokens(m->tool_calls[i].arguments);
    }
    if (m->tool_name.some) total += ahg_host_estimate_tokens(m->tool_name.str);
    return total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
}

/* ---- The services, natively ------------------------------------------------ */

static ahg_test_summaries_fn served_summaries;
static void *served_summaries_arg;

void ahg_test_serve_summaries(ahg_test_summaries_fn fn, void *arg) {
    served_summaries = fn;
    served_summaries_arg = arg;
}

void ahg_test_stop_serving_summaries(void) { ahg_test_serve_summaries(NULL, NULL); }

int ahg_summarize(ahg_history *h, ahg_str prompt, ahg_str text, ahg_summary_caps caps,
                  ahg_summary *out, ahg_service_error *err) {
    (void)caps;
    err->kind = AHG_SERVICE_OK;
    err->message = ahg_cstr("");
    if (!served_summaries) {
        err->kind = AHG_SERVICE_FAILED;
        err->message = ahg_cstr("no summaries are served outside WebAssembly unless a test sets "
                                "them (ahg_test_serve_summaries)");
        return -1;
    }
    ahg_str summary = ahg_cstr("");
    ahg_service_error refused = {AHG_SERVICE_OK, {"", 0}};
    if (served_summaries(served_summaries_arg, prompt, text, &summary, &refused) != 0) {
        err->kind = refused.kind == AHG_SERVICE_OK ? AHG_SERVICE_FAILED : refused.kind;
        err->message = ahg_strdup(h, refused.message);
        return -1;
    }
    /* The cost the host would report with no provider usage: its estimates. */
    out->text = ahg_strdup(h, summary);
    out->input_tokens =
        (uint64_t)ahg_host_estimate_tokens(prompt) + ahg_host_estimate_tokens(text);
    out->output_tokens = ahg_host_estimate_tokens(summary);
    return 0;
}

int ahg_count_tokens(ahg_history *h, ahg_str text, uint32_t *out, ahg_service_error *err) {
    (void)h;
    err->kind = AHG_SERVICE_OK;
    err->message = ahg_cstr("");
    *out = ahg_host_estimate_tokens(text);
    return 0;
}

int ahg_read_memory(ahg_history *h, ahg_str query, uint32_t limit, ahg_fact **facts,
                    size_t *len, ahg_service_error *err) {
    (void)h;
    (void)query;
    (void)limit;
    err->kind = AHG_SERVICE_OK;
    err->message = ahg_cstr("");
    *facts = NULL;
    *len = 0;
    return 0;
}

ahg_test_result ahg_test_run(const char *config, const ahg_message *messages, size_t len) {
    ahg_test_result r;
    memset(&r, 0, sizeof r);
    ahg_run_context ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.context_window = 200000;
    ctx.budget = 180000;
    ctx.config = ahg_cstr(config ? config : "{}");

    /* The processor edits a copy, held by a second history that only owns
     * memory: the caller's messages, and the arrays in them, stay as they were. */
    r.storage = ahg_history_new(&ctx, NULL, 0);
    ahg_message *copy = ahg_alloc(r.storage, (len + 1) * sizeof *copy);
    for (size_t i = 0; i < len; i++) {
        copy[i] = messages[i];
        copy[i].parts = ahg_alloc(r.storage, (messages[i].parts_len + 1) * sizeof(ahg_part));
        if (messages[i].parts_len) {
            memcpy(copy[i].parts, messages[i].parts, messages[i].parts_len * sizeof(ahg_part));
        }
        copy[i].tool_calls =
            ahg_alloc(r.storage, (messages[i].tool_calls_len + 1) * sizeof(ahg_tool_call));
        if (messages[i].tool_calls_len) {
            memcpy(copy[i].tool_calls, messages[i].tool_calls,
                   messages[i].tool_calls_len * sizeof(ahg_tool_call));
        }
    }
    r.history = ahg_history_new(&ctx, copy, len);
    if (ahg_history_process(r.history, &r.error) != 0) {
        r.messages = (ahg_message *)messages;
        r.len = len;
        return r;
    }
    r.items = ahg_history_items(r.history, &r.items_len);
    r.messages = ahg_alloc(r.storage, (r.items_len + 1) * sizeof *r.messages);
    for (size_t k = 0; k < r.items_len; k++) {
        const ahg_item *it = &r.items[k];
        r.messages[k] = it->kind == AHG_ITEM_KEEP ? messages[it->index] : *it->message;
    }
    r.len = r.items_len;
    return r;
}

void ahg_test_result_free(ahg_test_result *r) {
    free(r->error.message);
    ahg_history_free(r->history);
    ahg_history_free(r->storage);
    memset(r, 0, sizeof *r);
}
