/*
 * The shared conformance cases (the JSON files in guest-sdk/conformance/cases; the
 * format in its README), run against the C SDK (./test.sh runs this): the
 * `conformance` processor the cases configure, written with the SDK's own
 * API, over each case's history; its answer, whether it fetched the
 * messages, and the native token estimates, compared with what the case
 * expects. Each edits case runs twice: over a history given whole, and over
 * a stand-in for the host's history resource that counts what is fetched.
 * The Rust, Python and JavaScript SDKs run the same cases.
 *
 *     test_conformance CASES_DIR
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_host_guest_testing.h"

static int failures;
static const char *current; /* "file: case name", for messages */

#define FAIL(...)                                            \
    do {                                                     \
        failures++;                                          \
        fprintf(stderr, "%s: ", current ? current : "?");    \
        fprintf(stderr, __VA_ARGS__);                        \
        fputc('\n', stderr);                                 \
    } while (0)

/* A shape this harness does not know: fail loudly rather than half read. */
static _Noreturn void bad_case(const char *what) {
    fprintf(stderr, "%s: cannot read the case: %s\n", current ? current : "?", what);
    exit(2);
}

/* ---- Reading the cases' JSON ------------------------------------------------ */

/* Memory for the cases: a history that only owns allocations. */
static ahg_history *arena;

static void known_keys(const ahg_json *o, const char *const *keys, const char *what) {
    if (!o || o->type != AHG_JSON_OBJECT) bad_case(what);
    for (size_t i = 0; i < o->len; i++) {
        bool ok = false;
        for (const char *const *k = keys; *k && !ok; k++) ok = ahg_str_eq_c(o->keys[i], *k);
        if (!ok) {
            fprintf(stderr, "%s: %s has an unknown key %.*s\n", current, what, (int)o->keys[i].len,
                    o->keys[i].ptr);
            exit(2);
        }
    }
}

static ahg_str str_of(const ahg_json *v, const char *what) {
    if (!v || v->type != AHG_JSON_STRING) bad_case(what);
    return v->string;
}

static ahg_opt_str opt_str(const ahg_json *o, const char *key) {
    const ahg_json *v = ahg_json_get(o, key);
    ahg_opt_str out = {false, {"", 0}};
    if (v && v->type != AHG_JSON_NULL) out = ahg_some(str_of(v, key));
    return out;
}

static uint32_t u32_of(const ahg_json *v, const char *what) {
    if (!v || v->type != AHG_JSON_NUMBER || v->number < 0 || v->number > 4294967295.0) {
        bad_case(what);
    }
    return (uint32_t)v->number;
}

static ahg_role role_of(ahg_str s) {
    static const char *names[] = {"system", "user", "assistant", "tool"};
    for (int r = 0; r < 4; r++) {
        if (ahg_str_eq_c(s, names[r])) return (ahg_role)r;
    }
    bad_case("an unknown role");
}

static const char *const MESSAGE_KEYS[] = {
    "id",    "role",  "content", "parts", "reasoning", "tool_calls", "tool_call_id", "tool_name",
    "model", "agent", "channel", "flags", "metadata",  "tokens",     NULL};

static ahg_message message_of(const ahg_json *v) {
    known_keys(v, MESSAGE_KEYS, "a message");
    ahg_message m = ahg_message_new(role_of(str_of(ahg_json_get(v, "role"), "role")), ahg_cstr(""));
    ahg_opt_str content = opt_str(v, "content");
    if (content.some) m.content = content.str;
    ahg_opt_str id = opt_str(v, "id");
    if (id.some) m.id = id.str;
    const ahg_json *parts = ahg_json_get(v, "parts");
    if (parts) {
        m.parts_len = parts->len;
        m.parts = ahg_alloc(arena, (parts->len + 1) * sizeof *m.parts);
        for (size_t k = 0; k < parts->len; k++) {
            const ahg_json *p = &parts->items[k];
            static const char *const part_keys[] = {"text", "image", "file", NULL};
            known_keys(p, part_keys, "a part");
            ahg_part *q = &m.parts[k];
            const ahg_json *x;
            if ((x = ahg_json_get(p, "text"))) {
                q->kind = AHG_PART_TEXT;
                q->text = str_of(x, "text");
            } else if ((x = ahg_json_get(p, "image"))) {
                static const char *const image_keys[] = {"url", "path", "mime_type", NULL};
                known_keys(x, image_keys, "an image");
                q->kind = AHG_PART_IMAGE;
                ahg_opt_str url = opt_str(x, "url");
                q->image.source.kind = url.some ? AHG_MEDIA_URL : AHG_MEDIA_PATH;
                q->image.source.value = url.some ? url.str : str_of(ahg_json_get(x, "path"), "path");
                q->image.mime_type = opt_str(x, "mime_type");
            } else {
                static const char *const file_keys[] = {"name", "path", "mime_type", NULL};
                x = ahg_json_get(p, "file");
                known_keys(x, file_keys, "a file");
                q->kind = AHG_PART_FILE;
                q->file.name = str_of(ahg_json_get(x, "name"), "name");
                q->file.path = str_of(ahg_json_get(x, "path"), "path");
                q->file.mime_type = opt_str(x, "mime_type");
            }
        }
    }
    const ahg_json *r = ahg_json_get(v, "reasoning");
    if (r && r->type != AHG_JSON_NULL) {
        static const char *const reasoning_keys[] = {"text", "signature", "redacted", NULL};
        known_keys(r, reasoning_keys, "reasoning");
        m.has_reasoning = true;
        m.reasoning.text = str_of(ahg_json_get(r, "text"), "text");
        m.reasoning.signature = opt_str(r, "signature");
        const ahg_json *redacted = ahg_json_get(r, "redacted");
        m.reasoning.redacted = redacted && redacted->type == AHG_JSON_BOOL && redacted->boolean;
    }
    const ahg_json *calls = ahg_json_get(v, "tool_calls");
    if (calls) {
        m.tool_calls_len = calls->len;
        m.tool_calls = ahg_alloc(arena, (calls->len + 1) * sizeof *m.tool_calls);
        for (size_t k = 0; k < calls->len; k++) {
            static const char *const call_keys[] = {"id", "name", "arguments", NULL};
            const ahg_json *c = &calls->items[k];
            known_keys(c, call_keys, "a tool call");
            m.tool_calls[k].id = str_of(ahg_json_get(c, "id"), "id");
            m.tool_calls[k].name = str_of(ahg_json_get(c, "name"), "name");
            m.tool_calls[k].arguments = str_of(ahg_json_get(c, "arguments"), "arguments");
        }
    }
    m.tool_call_id = opt_str(v, "tool_call_id");
    m.tool_name = opt_str(v, "tool_name");
    m.model = opt_str(v, "model");
    m.agent = opt_str(v, "agent");
    m.channel = opt_str(v, "channel");
    const ahg_json *flags = ahg_json_get(v, "flags");
    for (size_t k = 0; flags && k < flags->len; k++) {
        ahg_str f = str_of(&flags->items[k], "a flag");
        if (ahg_str_eq_c(f, "synthetic")) m.flags |= AHG_FLAG_SYNTHETIC;
        else if (ahg_str_eq_c(f, "summary")) m.flags |= AHG_FLAG_SUMMARY;
        else if (ahg_str_eq_c(f, "error")) m.flags |= AHG_FLAG_ERROR;
        else bad_case("an unknown flag");
    }
    m.metadata = opt_str(v, "metadata");
    const ahg_json *tokens = ahg_json_get(v, "tokens");
    if (tokens) m.tokens = u32_of(tokens, "tokens");
    return m;
}

/* ---- Comparing messages ----------------------------------------------------- */

static bool opt_eq(ahg_opt_str a, ahg_opt_str b) {
    return a.some == b.some && (!a.some || ahg_str_eq(a.str, b.str));
}

static bool part_eq(const ahg_part *a, const ahg_part *b) {
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case AHG_PART_TEXT:
        return ahg_str_eq(a->text, b->text);
    case AHG_PART_IMAGE:
        return a->image.source.kind == b->image.source.kind &&
               ahg_str_eq(a->image.source.value, b->image.source.value) &&
               opt_eq(a->image.mime_type, b->image.mime_type);
    default:
        return ahg_str_eq(a->file.name, b->file.name) && ahg_str_eq(a->file.path, b->file.path) &&
               opt_eq(a->file.mime_type, b->file.mime_type);
    }
}

/* Every field the cases can give (usage and timestamps are not in them). */
static bool message_eq(const ahg_message *a, const ahg_message *b) {
    if (!ahg_str_eq(a->id, b->id) || a->role != b->role || !ahg_str_eq(a->content, b->content) ||
        a->parts_len != b->parts_len || a->has_reasoning != b->has_reasoning ||
        a->tool_calls_len != b->tool_calls_len || !opt_eq(a->tool_call_id, b->tool_call_id) ||
        !opt_eq(a->tool_name, b->tool_name) || !opt_eq(a->model, b->model) ||
        !opt_eq(a->agent, b->agent) || !opt_eq(a->channel, b->channel) || a->flags != b->flags ||
        !opt_eq(a->metadata, b->metadata) || a->tokens != b->tokens ||
        a->has_usage != b->has_usage || a->has_timestamp != b->has_timestamp) {
        return false;
    }
    for (size_t k = 0; k < a->parts_len; k++) {
        if (!part_eq(&a->parts[k], &b->parts[k])) return false;
    }
    if (a->has_reasoning &&
        (!ahg_str_eq(a->reasoning.text, b->reasoning.text) ||
         !opt_eq(a->reasoning.signature, b->reasoning.signature) ||
         a->reasoning.redacted != b->reasoning.redacted)) {
        return false;
    }
    for (size_t k = 0; k < a->tool_calls_len; k++) {
        const ahg_tool_call *x = &a->tool_calls[k], *y = &b->tool_calls[k];
        if (!ahg_str_eq(x->id, y->id) || !ahg_str_eq(x->name, y->name) ||
            !ahg_str_eq(x->arguments, y->arguments)) {
            return false;
        }
    }
    return true;
}

/* ---- The processor the cases configure -------------------------------------- */

typedef struct step {
    ahg_str op;
    bool has_index, has_turns, has_tokens, has_role, has_text;
    uint32_t index, turns, tokens;
    ahg_str role, text;
    const ahg_json *message;
} step;

static bool not_role(const ahg_header *x, void *arg) { return x->role != *(ahg_role *)arg; }
static bool at_most(const ahg_header *x, void *arg) { return x->tokens <= *(uint32_t *)arg; }

static bool contains(ahg_str hay, ahg_str needle) {
    if (needle.len == 0) return true;
    for (size_t i = 0; i + needle.len <= hay.len; i++) {
        if (memcmp(hay.ptr + i, needle.ptr, needle.len) == 0) return true;
    }
    return false;
}

static int needs(ahg_error *err, const step *s, bool has, const char *key) {
    if (has) return 0;
    return ahg_bad_config(err, "op `%.*s` needs `%s`", (int)s->op.len, s->op.ptr, key);
}

static int conformance(ahg_history *h, ahg_config *c, ahg_error *err) {
    size_t n = ahg_config_array_len(c, "steps");
    step *steps = ahg_alloc(h, (n + 1) * sizeof *steps);
    for (size_t i = 0; i < n; i++) {
        ahg_config *s = ahg_config_object_at(c, "steps", i);
        step *t = &steps[i];
        t->op = ahg_config_require_string(s, "op");
#define UNSIGNED(name)                                                       \
    if ((t->has_##name = ahg_config_has(s, #name))) {                        \
        t->name = (uint32_t)ahg_config_int(s, #name, 0, 0, 4294967295LL);    \
    }
        UNSIGNED(index)
        UNSIGNED(turns)
        UNSIGNED(tokens)
#undef UNSIGNED
        if ((t->has_role = ahg_config_has(s, "role"))) t->role = ahg_config_string(s, "role", "");
        if ((t->has_text = ahg_config_has(s, "text"))) t->text = ahg_config_string(s, "text", "");
        t->message = ahg_config_raw(s, "message");
    }
    if (!ahg_config_check(c, err)) return -1;
    for (size_t i = 0; i < n; i++) {
        const step *s = &steps[i];
        ahg_str op = s->op;
        if (ahg_str_eq_c(op, "drop")) {
            if (needs(err, s, s->has_index, "index")) return -1;
            ahg_drop(h, s->index);
        } else if (ahg_str_eq_c(op, "restore")) {
            if (needs(err, s, s->has_index, "index")) return -1;
            ahg_keep(h, s->index);
        } else if (ahg_str_eq_c(op, "keep_last_turns")) {
            if (needs(err, s, s->has_turns, "turns")) return -1;
            ahg_keep_last_turns(h, s->turns);
        } else if (ahg_str_eq_c(op, "settle_tool_exchanges")) {
            ahg_settle_tool_exchanges(h);
        } else if (ahg_str_eq_c(op, "drop_role")) {
            if (needs(err, s, s->has_role, "role")) return -1;
            ahg_role role = role_of(s->role);
            ahg_retain_headers(h, not_role, &role);
        } else if (ahg_str_eq_c(op, "drop_over_tokens")) {
            if (needs(err, s, s->has_tokens, "tokens")) return -1;
            uint32_t most = s->tokens;
            ahg_retain_headers(h, at_most, &most);
        } else if (ahg_str_eq_c(op, "drop_containing")) {
            if (needs(err, s, s->has_text, "text")) return -1;
            for (size_t k = 0; k < ahg_len(h); k++) {
                if (ahg_is_kept(h, k) && contains(ahg_get(h, k)->content, s->text)) ahg_drop(h, k);
            }
        } else if (ahg_str_eq_c(op, "replace")) {
            if (needs(err, s, s->has_index && s->message, "index` and `message")) return -1;
            ahg_message m = message_of(s->message);
            ahg_replace(h, s->index, &m);
        } else if (ahg_str_eq_c(op, "set_content")) {
            if (needs(err, s, s->has_index && s->has_text, "index` and `text")) return -1;
            ahg_edit(h, s->index)->content = s->text;
        } else if (ahg_str_eq_c(op, "clear_tool_calls")) {
            if (needs(err, s, s->has_index, "index")) return -1;
            ahg_message *m = ahg_edit(h, s->index);
            m->tool_calls = NULL;
            m->tool_calls_len = 0;
        } else if (ahg_str_eq_c(op, "insert_before")) {
            if (needs(err, s, s->has_index && s->message, "index` and `message")) return -1;
            ahg_message m = message_of(s->message);
            ahg_insert(h, s->index, &m);
        } else if (ahg_str_eq_c(op, "push")) {
            if (needs(err, s, s->message != NULL, "message")) return -1;
            ahg_message m = message_of(s->message);
            ahg_push(h, &m);
        } else if (ahg_str_eq_c(op, "fail")) {
            if (needs(err, s, s->has_text, "text")) return -1;
            return ahg_failed(err, "%.*s", (int)s->text.len, s->text.ptr);
        } else {
            return ahg_bad_config(err, "unknown op `%.*s`", (int)op.len, op.ptr);
        }
    }
    return 0;
}

AHG_EXPORT_PROCESSOR(conformance, .name = "conformance", .version = "0.1.0",
                     .summary = "Runs the steps of the shared conformance cases")

/* ---- Running a case ---------------------------------------------------------- */

/* A stand-in for the host's history resource: the messages, handed out and
 * counted. */
typedef struct host_history {
    ahg_message *messages;
    int fetched;
} host_history;

static ahg_message *fetch(ahg_history *h, void *arg) {
    (void)h;
    host_history *src = arg;
    src->fetched++;
    return src->messages;
}

static const char *kind_name(ahg_error_kind k) {
    return k == AHG_BAD_CONFIG ? "bad-config" : k == AHG_FAILED ? "failed" : "ok";
}

static void run_edits(const ahg_json *c, ahg_str config, bool from_host, size_t *edits,
                      size_t *errors) {
    const char *how = from_host ? "from the host's resource" : "given whole";
    const ahg_json *history = ahg_json_get(c, "history");
    if (!history || history->type != AHG_JSON_ARRAY) bad_case("`history` is not a list");
    size_t len = history->len;
    ahg_message *messages = ahg_alloc(arena, (len + 1) * sizeof *messages);
    for (size_t i = 0; i < len; i++) messages[i] = message_of(&history->items[i]);

    ahg_run_context ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.context_window = 128000;
    ctx.budget = 128000;
    ctx.config = config;
    ahg_history *h;
    host_history src = {messages, 0};
    if (from_host) {
        /* The headers the host would send, worked out as for a history given
         * whole (a scratch one, never read). */
        ahg_history *scratch = ahg_history_new(&ctx, messages, len);
        ahg_header *headers = ahg_alloc(arena, (len + 1) * sizeof *headers);
        if (len) memcpy(headers, ahg_headers(scratch), len * sizeof *headers);
        ahg_history_free(scratch);
        h = ahg_history_from_source(&ctx, headers, len, fetch, &src);
    } else {
        h = ahg_history_new(&ctx, messages, len);
    }
    ahg_error err = {AHG_OK, NULL};
    int rc = ahg_history_process(h, &err);

    static const char *const expect_keys[] = {"items", "loaded", "tool_callers", "error", NULL};
    const ahg_json *expect = ahg_json_get(c, "expect");
    known_keys(expect, expect_keys, "expect");
    const ahg_json *want_error = ahg_json_get(expect, "error");
    if (want_error) {
        static const char *const error_keys[] = {"kind", "contains", NULL};
        known_keys(want_error, error_keys, "error");
        ahg_str kind = str_of(ahg_json_get(want_error, "kind"), "kind");
        ahg_str needle = str_of(ahg_json_get(want_error, "contains"), "contains");
        if (rc == 0) {
            FAIL("(%s) answered, expected an error", how);
        } else if (!ahg_str_eq_c(kind, kind_name(err.kind))) {
            FAIL("(%s) a %s error, expected %.*s: %s", how, kind_name(err.kind), (int)kind.len,
                 kind.ptr, err.message);
        } else if (!contains(ahg_cstr(err.message ? err.message : ""), needle)) {
            FAIL("(%s) %s lacks %.*s", how, err.message, (int)needle.len, needle.ptr);
        }
        ++*errors;
    } else if (rc != 0) {
        FAIL("(%s) %s: %s", how, kind_name(err.kind), err.message);
    } else {
        size_t n = 0;
        ahg_item *items = ahg_history_items(h, &n);
        const ahg_json *want = ahg_json_get(expect, "items");
        if (!want || want->type != AHG_JSON_ARRAY) bad_case("`items` is not a list");
        if (n != want->len) FAIL("(%s) %zu items, expected %zu", how, n, want->len);
        for (size_t k = 0; k < n && k < want->len; k++) {
            const ahg_json *w = &want->items[k];
            static const char *const item_keys[] = {"keep", "replace", "message", "insert", NULL};
            known_keys(w, item_keys, "an item");
            const ahg_json *x;
            if ((x = ahg_json_get(w, "keep"))) {
                if (items[k].kind != AHG_ITEM_KEEP || items[k].index != u32_of(x, "keep")) {
                    FAIL("(%s) item %zu is not keep %u", how, k, u32_of(x, "keep"));
                }
            } else if ((x = ahg_json_get(w, "replace"))) {
                ahg_message m = message_of(ahg_json_get(w, "message"));
                if (items[k].kind != AHG_ITEM_REPLACE || items[k].index != u32_of(x, "replace") ||
                    !message_eq(items[k].message, &m)) {
                    FAIL("(%s) item %zu is not the replacement of %u expected", how, k,
                         u32_of(x, "replace"));
                }
            } else {
                ahg_message m = message_of(ahg_json_get(w, "insert"));
                if (items[k].kind != AHG_ITEM_INSERT || !message_eq(items[k].message, &m)) {
                    FAIL("(%s) item %zu is not the insertion expected", how, k);
                }
            }
        }
        const ahg_json *loaded = ahg_json_get(expect, "loaded");
        if (loaded) {
            if (loaded->type != AHG_JSON_BOOL) bad_case("`loaded` is not a boolean");
            if (ahg_is_loaded(h) != loaded->boolean) {
                FAIL("(%s) loaded is %d, expected %d", how, ahg_is_loaded(h), loaded->boolean);
            }
            if (from_host && src.fetched != (loaded->boolean ? 1 : 0)) {
                FAIL("(%s) the messages were fetched %d times", how, src.fetched);
            }
        }
        const ahg_json *callers = ahg_json_get(expect, "tool_callers");
        if (callers) {
            if (callers->len != len) FAIL("(%s) tool_callers has %zu entries", how, callers->len);
            for (size_t i = 0; i < len && i < callers->len; i++) {
                size_t caller = 0;
                bool has = ahg_tool_caller(h, i, &caller);
                const ahg_json *w = &callers->items[i];
                bool want_has = w->type != AHG_JSON_NULL;
                if (has != want_has || (has && caller != u32_of(w, "a caller"))) {
                    FAIL("(%s) the tool caller of %zu differs", how, i);
                }
            }
        }
        ++*edits;
    }
    free(err.message);
    ahg_history_free(h);
}

/* A parsed value as JSON text again: a case's `config`, for the processor. */
static void write_json(ahg_buf *b, const ahg_json *v) {
    char num[64];
    switch (v->type) {
    case AHG_JSON_NULL:
        ahg_buf_append(b, "null", 4);
        break;
    case AHG_JSON_BOOL:
        ahg_buf_append_str(b, ahg_cstr(v->boolean ? "true" : "false"));
        break;
    case AHG_JSON_NUMBER:
        if (v->number == (double)(long long)v->number) {
            snprintf(num, sizeof num, "%lld", (long long)v->number);
        } else {
            snprintf(num, sizeof num, "%.17g", v->number);
        }
        ahg_buf_append_str(b, ahg_cstr(num));
        break;
    case AHG_JSON_STRING:
        ahg_buf_append(b, "\"", 1);
        for (size_t i = 0; i < v->string.len; i++) {
            unsigned char c = (unsigned char)v->string.ptr[i];
            if (c == '"' || c == '\\') {
                ahg_buf_append(b, "\\", 1);
                ahg_buf_append(b, (const char *)&c, 1);
            } else if (c < 0x20) {
                snprintf(num, sizeof num, "\\u%04x", c);
                ahg_buf_append_str(b, ahg_cstr(num));
            } else {
                ahg_buf_append(b, (const char *)&c, 1);
            }
        }
        ahg_buf_append(b, "\"", 1);
        break;
    case AHG_JSON_ARRAY:
    case AHG_JSON_OBJECT: {
        bool object = v->type == AHG_JSON_OBJECT;
        ahg_buf_append(b, object ? "{" : "[", 1);
        for (size_t i = 0; i < v->len; i++) {
            if (i) ahg_buf_append(b, ",", 1);
            if (object) {
                ahg_json key = {.type = AHG_JSON_STRING, .string = v->keys[i]};
                write_json(b, &key);
                ahg_buf_append(b, ":", 1);
            }
            write_json(b, &v->items[i]);
        }
        ahg_buf_append(b, object ? "}" : "]", 1);
        break;
    }
    }
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    ahg_buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) ahg_buf_append(&b, chunk, n);
    fclose(f);
    *len = b.len;
    return b.ptr;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CASES_DIR\n", argv[0]);
        return 2;
    }
    ahg_run_context none;
    memset(&none, 0, sizeof none);
    arena = ahg_history_new(&none, NULL, 0);

    DIR *dir = opendir(argv[1]);
    if (!dir) {
        fprintf(stderr, "cannot open %s\n", argv[1]);
        return 2;
    }
    char *names[256];
    size_t files = 0;
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        size_t l = strlen(e->d_name);
        if (l > 5 && strcmp(e->d_name + l - 5, ".json") == 0 && files < 256) {
            names[files++] = (char *)ahg_strdup(arena, ahg_cstr(e->d_name)).ptr;
        }
    }
    closedir(dir);
    qsort(names, files, sizeof *names, by_name);
    if (files == 0) {
        fprintf(stderr, "no case files in %s\n", argv[1]);
        return 2;
    }

    size_t edits = 0, errors = 0, tokens = 0, cases = 0;
    for (size_t f = 0; f < files; f++) {
        const char *path = ahg_printf(arena, "%s/%s", argv[1], names[f]).ptr;
        size_t len = 0;
        char *text = read_file(path, &len);
        if (!text) {
            fprintf(stderr, "cannot read %s\n", path);
            return 2;
        }
        current = names[f];
        ahg_error err = {AHG_OK, NULL};
        const ahg_json *doc = ahg_json_parse(arena, (ahg_str){ahg_strdup(arena, (ahg_str){text, len}).ptr, len}, &err);
        free(text);
        if (!doc) {
            fprintf(stderr, "%s: %s\n", path, err.message);
            return 2;
        }
        static const char *const doc_keys[] = {"cases", NULL};
        known_keys(doc, doc_keys, "a case file");
        const ahg_json *list = ahg_json_get(doc, "cases");
        for (size_t k = 0; list && k < list->len; k++) {
            const ahg_json *c = &list->items[k];
            static const char *const case_keys[] = {"name",   "history",     "config",
                                                    "config_text", "expect", "text_tokens",
                                                    "message_tokens", NULL};
            known_keys(c, case_keys, "a case");
            ahg_str name = str_of(ahg_json_get(c, "name"), "name");
            current = ahg_printf(arena, "%s: %.*s", names[f], (int)name.len, name.ptr).ptr;
            cases++;
            const ahg_json *tt = ahg_json_get(c, "text_tokens");
            const ahg_json *mt = ahg_json_get(c, "message_tokens");
            if (tt || mt) {
                for (size_t i = 0; tt && i < tt->len; i++) {
                    ahg_str t = str_of(ahg_json_get(&tt->items[i], "text"), "text");
                    uint32_t want = u32_of(ahg_json_get(&tt->items[i], "tokens"), "tokens");
                    uint32_t got = ahg_estimate_tokens(t);
                    if (got != want) FAIL("%u tokens for text %zu, expected %u", got, i, want);
                    tokens++;
                }
                for (size_t i = 0; mt && i < mt->len; i++) {
                    ahg_message m = message_of(ahg_json_get(&mt->items[i], "message"));
                    uint32_t want = u32_of(ahg_json_get(&mt->items[i], "tokens"), "tokens");
                    uint32_t got = ahg_estimate_message_tokens(&m);
                    if (got != want) FAIL("%u tokens for message %zu, expected %u", got, i, want);
                    tokens++;
                }
                continue;
            }
            const ahg_json *config = ahg_json_get(c, "config");
            const ahg_json *config_text = ahg_json_get(c, "config_text");
            if (config && config_text) bad_case("config or config_text, not both");
            ahg_str cfg = ahg_cstr("{}");
            if (config_text) cfg = str_of(config_text, "config_text");
            if (config) {
                ahg_buf b = {0};
                write_json(&b, config);
                cfg = ahg_buf_finish(arena, &b);
            }
            size_t before = edits + errors;
            run_edits(c, cfg, false, &edits, &errors);
            run_edits(c, cfg, true, &edits, &errors);
            if (edits + errors != before + 2) FAIL("the case did not run twice");
        }
    }
    if (edits == 0 || errors == 0 || tokens == 0) {
        fprintf(stderr, "not every kind of case ran: %zu edits, %zu errors, %zu token counts\n",
                edits, errors, tokens);
        failures++;
    }
    ahg_history_free(arena);
    if (failures) {
        fprintf(stderr, "conformance (C): %d check(s) failed\n", failures);
        return 1;
    }
    printf("conformance (C): %zu cases passed (%zu runs of edits, %zu errors, %zu token counts)\n",
           cases, edits, errors, tokens);
    return 0;
}
