/*
 * redact-secrets, in C: replaces API keys, tokens, private keys and passwords
 * in a history's text with typed placeholders such as
 * `[REDACTED:openai-key]`. A port of processors/redact-secrets (Rust) that
 * gives the same output; the rule and the configuration are documented in
 * that crate's lib.rs. The one difference: `extra` patterns are POSIX
 * extended regular expressions here (see translate_pattern in redactor.c).
 *
 * It scans every message's content, text parts, readable reasoning and
 * tool-call arguments; only messages where something was replaced go back to
 * the host. Signed reasoning that holds a secret is dropped (a signed block
 * cannot be edited); opaque (redacted) reasoning is never touched.
 */
#include <stdlib.h>

#include "agent_host_guest.h"
#include "redactor.h"

/** Reads the configuration; the getters name the key of a bad value. */
static void read_config(ahg_history *h, ahg_config *c, redact_config *out) {
    out->emails = ahg_config_bool(c, "emails", false);
    out->has_kinds = ahg_config_has(c, "kinds");
    out->kinds_len = ahg_config_array_len(c, "kinds");
    out->kinds = ahg_alloc(h, (out->kinds_len + 1) * sizeof *out->kinds);
    for (size_t i = 0; i < out->kinds_len; i++) out->kinds[i] = ahg_config_string_at(c, "kinds", i);
    out->extra_len = ahg_config_array_len(c, "extra");
    out->extra = ahg_alloc(h, (out->extra_len + 1) * sizeof *out->extra);
    for (size_t i = 0; i < out->extra_len; i++) {
        ahg_config *x = ahg_config_object_at(c, "extra", i);
        out->extra[i].name = ahg_config_require_string(x, "name");
        out->extra[i].pattern = ahg_config_require_string(x, "pattern");
    }
    out->placeholder = ahg_config_string(c, "placeholder", "[REDACTED:{kind}]");
}

/** Texts per message that fit the list on the stack; more go in call memory. */
enum { MAX_TEXTS = 64 };

static int redact_secrets(ahg_history *h, ahg_config *config, ahg_error *err) {
    redact_config cfg;
    read_config(h, config, &cfg);
    if (!ahg_config_check(config, err)) return -1;
    redactor *r = redactor_new(&cfg, err);
    if (!r) return -1;

    size_t kinds = redactor_kind_count(r);
    size_t *counts = ahg_alloc(h, kinds * sizeof *counts);
    size_t changed = 0, signed_dropped = 0;
    ahg_buf out = {0};
    for (size_t i = 0; i < ahg_len(h); i++) {
        /* Texts are redacted from the input first, so a message with no
         * secret is never edited (that would replace it). */
        ahg_message m = *ahg_get(h, i);
        size_t n = ahg_message_texts(&m, NULL, 0);
        ahg_str **texts = n <= MAX_TEXTS ? (ahg_str *[MAX_TEXTS]){0} : ahg_alloc(h, n * sizeof *texts);
        ahg_message_texts(&m, texts, n);
        size_t reasoning_at = SIZE_MAX;
        if (m.has_reasoning && !m.reasoning.redacted) {
            /* Readable reasoning comes right after the content and text parts. */
            reasoning_at = n - m.tool_calls_len - 1;
        }
        bool any = false, signed_hit = false;
        ahg_str *redacted = NULL;
        for (size_t t = 0; t < n; t++) {
            out.len = 0;
            if (!redactor_redact(r, *texts[t], &out, counts)) continue;
            if (!redacted) redacted = ahg_alloc(h, n * sizeof *redacted);
            redacted[t] = ahg_strdup(h, (ahg_str){out.ptr, out.len});
            any = true;
            if (t == reasoning_at && m.reasoning.signature.some) signed_hit = true;
        }
        if (!any) continue;
        changed++;
        /* The edited copy gets its own arrays: the texts live inside them. */
        ahg_message *e = ahg_edit(h, i);
        ahg_part *parts = ahg_alloc(h, (e->parts_len + 1) * sizeof *parts);
        for (size_t k = 0; k < e->parts_len; k++) parts[k] = e->parts[k];
        e->parts = parts;
        ahg_tool_call *calls = ahg_alloc(h, (e->tool_calls_len + 1) * sizeof *calls);
        for (size_t k = 0; k < e->tool_calls_len; k++) calls[k] = e->tool_calls[k];
        e->tool_calls = calls;
        ahg_message_texts(e, texts, n);
        for (size_t t = 0; t < n; t++) {
            if (redacted[t].ptr) *texts[t] = redacted[t];
        }
        if (signed_hit) {
            e->has_reasoning = false;
            signed_dropped++;
        }
    }
    ahg_buf_free(&out);

    size_t total = 0;
    for (size_t k = 0; k < kinds; k++) total += counts[k];
    size_t messages = ahg_len(h);
    if (total == 0) {
        ahg_log_info("no secrets found in %zu %s", messages,
                     ahg_plural(messages, "message", "messages"));
    } else {
        ahg_buf line = {0};
        for (size_t k = 0; k < kinds; k++) {
            if (!counts[k]) continue;
            ahg_str name = redactor_kind_name(r, k);
            ahg_str piece = ahg_printf(h, "%s%.*s %zu", line.len ? ", " : "", (int)name.len,
                                       name.ptr, counts[k]);
            ahg_buf_append_str(&line, piece);
        }
        ahg_log_info("redacted %zu %s in %zu %s: %.*s", total,
                     ahg_plural(total, "secret", "secrets"), changed,
                     ahg_plural(changed, "message", "messages"), (int)line.len, line.ptr);
        ahg_buf_free(&line);
    }
    if (signed_dropped) {
        ahg_log_info("dropped the signed reasoning of %zu %s: it held a secret and a signed "
                     "block cannot be edited",
                     signed_dropped, ahg_plural(signed_dropped, "message", "messages"));
    }
    redactor_free(r);
    return 0;
}

AHG_EXPORT_PROCESSOR(
    redact_secrets, .name = "redact-secrets", .version = "0.1.0",
    .summary = "Replaces API keys, tokens, private keys and passwords in URLs with typed "
               "placeholders",
    .config_example = "{\"emails\": false, \"extra\": [{\"name\": \"acme-token\", \"pattern\": "
                      "\"acme_[a-z0-9]{32}\"}], \"placeholder\": \"[REDACTED:{kind}]\"}",
    .config_schema =
        "{\"type\":\"object\",\"properties\":{\"emails\":{\"type\":\"boolean\",\"default\":false},"
        "\"kinds\":{\"type\":\"array\",\"items\":{\"enum\":[\"private-key\",\"anthropic-key\","
        "\"openai-key\",\"aws-access-key\",\"aws-secret-key\",\"github-token\",\"slack-webhook\","
        "\"slack-token\",\"bearer-token\",\"url-password\",\"email\"]}},\"extra\":{\"type\":"
        "\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\","
        "\"pattern\":\"^[A-Za-z0-9_.-]+$\"},\"pattern\":{\"type\":\"string\",\"minLength\":1}},"
        "\"required\":[\"name\",\"pattern\"],\"additionalProperties\":false}},\"placeholder\":{"
        "\"type\":\"string\",\"minLength\":1,\"default\":\"[REDACTED:{kind}]\"}},"
        "\"additionalProperties\":false}")
