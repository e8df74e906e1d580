/*
 * agent_host_guest_wit.c: connects the SDK to the bindings that
 * `wit-bindgen c wit/v0.2.0 --world history-processor` generates
 * (history_processor.h/.c, made at build time, never committed). Only the
 * WebAssembly build links it; everything canonical-ABI lives here.
 *
 * Ownership: the canonical ABI hands the guest its arguments (allocated with
 * cabi_realloc) and frees what the guest returns in the export's post-return
 * function. The host throws the instance away after every call, so freeing
 * is wasted work: this file replaces the generated (weak) post-return
 * functions with ones that free nothing. That also lets an answer point
 * into the input and into memory the call allocated with ahg_alloc, with no
 * copy and no risk of a double free.
 */
#include <stdlib.h>
#include <string.h>

#include "agent_host_guest.h"
#include "history_processor.h"

typedef history_processor_string_t wit_string;
typedef history_processor_option_string_t wit_opt_string;
typedef agent_host_history_types_message_t wit_message;

/* ---- Strings ------------------------------------------------------------- */

static ahg_str from_wit(wit_string s) {
    ahg_str out = {s.len ? (const char *)s.ptr : "", s.len};
    return out;
}

static ahg_opt_str from_wit_opt(wit_opt_string s) {
    ahg_opt_str out = {s.is_some, s.is_some ? from_wit(s.val) : ahg_cstr("")};
    return out;
}

/* The canonical ABI never writes through these pointers. */
static wit_string to_wit(ahg_str s) {
    wit_string out = {(uint8_t *)s.ptr, s.len};
    return out;
}

static wit_opt_string to_wit_opt(ahg_opt_str s) {
    wit_opt_string out = {s.some, to_wit(s.some ? s.str : ahg_cstr(""))};
    return out;
}

static ahg_usage usage_from_wit(const agent_host_history_types_usage_t *u) {
    ahg_usage out = {u->input_tokens,
                     u->output_tokens,
                     u->cache_read_tokens.is_some,
                     u->cache_read_tokens.val,
                     u->cache_write_tokens.is_some,
                     u->cache_write_tokens.val};
    return out;
}

static agent_host_history_types_usage_t usage_to_wit(const ahg_usage *u) {
    agent_host_history_types_usage_t out;
    out.input_tokens = u->input_tokens;
    out.output_tokens = u->output_tokens;
    out.cache_read_tokens.is_some = u->has_cache_read_tokens;
    out.cache_read_tokens.val = u->cache_read_tokens;
    out.cache_write_tokens.is_some = u->has_cache_write_tokens;
    out.cache_write_tokens.val = u->cache_write_tokens;
    return out;
}

/* ---- Messages -------------------------------------------------------------- */

static void message_from_wit(ahg_history *h, const wit_message *w, ahg_message *m) {
    m->id = from_wit(w->id);
    m->role = (ahg_role)w->role;
    m->content = from_wit(w->content);
    m->parts_len = w->parts.len;
    m->parts = NULL;
    if (w->parts.len) {
        m->parts = ahg_alloc(h, w->parts.len * sizeof *m->parts);
        for (size_t k = 0; k < w->parts.len; k++) {
            const agent_host_history_types_part_t *p = &w->parts.ptr[k];
            ahg_part *q = &m->parts[k];
            switch (p->tag) {
            case AGENT_HOST_HISTORY_TYPES_PART_TEXT:
                q->kind = AHG_PART_TEXT;
                q->text = from_wit(p->val.text);
                break;
            case AGENT_HOST_HISTORY_TYPES_PART_IMAGE:
                q->kind = AHG_PART_IMAGE;
                q->image.source.kind = p->val.image.source.tag == AGENT_HOST_HISTORY_TYPES_MEDIA_SOURCE_URL
                                           ? AHG_MEDIA_URL
                                           : AHG_MEDIA_PATH;
                q->image.source.value = from_wit(p->val.image.source.val.url);
                q->image.mime_type = from_wit_opt(p->val.image.mime_type);
                break;
            default:
                q->kind = AHG_PART_FILE;
                q->file.name = from_wit(p->val.file.name);
                q->file.path = from_wit(p->val.file.path);
                q->file.mime_type = from_wit_opt(p->val.file.mime_type);
                break;
            }
        }
    }
    m->has_reasoning = w->reasoning.is_some;
    if (m->has_reasoning) {
        m->reasoning.text = from_wit(w->reasoning.val.text);
        m->reasoning.signature = from_wit_opt(w->reasoning.val.signature);
        m->reasoning.redacted = w->reasoning.val.redacted;
    }
    m->tool_calls_len = w->tool_calls.len;
    m->tool_calls = NULL;
    if (w->tool_calls.len) {
        m->tool_calls = ahg_alloc(h, w->tool_calls.len * sizeof *m->tool_calls);
        for (size_t k = 0; k < w->tool_calls.len; k++) {
            m->tool_calls[k].id = from_wit(w->tool_calls.ptr[k].id);
            m->tool_calls[k].name = from_wit(w->tool_calls.ptr[k].name);
            m->tool_calls[k].arguments = from_wit(w->tool_calls.ptr[k].arguments);
        }
    }
    m->tool_call_id = from_wit_opt(w->tool_call_id);
    m->tool_name = from_wit_opt(w->tool_name);
    m->has_usage = w->usage.is_some;
    if (m->has_usage) m->usage = usage_from_wit(&w->usage.val);
    m->model = from_wit_opt(w->model);
    m->has_timestamp = w->timestamp.is_some;
    m->timestamp.seconds = w->timestamp.val.seconds;
    m->timestamp.nanoseconds = w->timestamp.val.nanoseconds;
    m->agent = from_wit_opt(w->agent);
    m->channel = from_wit_opt(w->channel);
    m->flags = w->flags;
    m->metadata = from_wit_opt(w->metadata);
    m->tokens = w->tokens;
}

/* `h` owns the arrays made here; NULL when only borrowing for a call. */
static void message_to_wit(ahg_history *h, const ahg_message *m, wit_message *w) {
    memset(w, 0, sizeof *w);
    w->id = to_wit(m->id);
    w->role = (agent_host_history_types_role_t)m->role;
    w->content = to_wit(m->content);
    w->parts.len = m->parts_len;
    if (m->parts_len) {
        agent_host_history_types_part_t *parts =
            h ? ahg_alloc(h, m->parts_len * sizeof *parts) : calloc(m->parts_len, sizeof *parts);
        if (!parts) abort();
        for (size_t k = 0; k < m->parts_len; k++) {
            const ahg_part *q = &m->parts[k];
            agent_host_history_types_part_t *p = &parts[k];
            switch (q->kind) {
            case AHG_PART_TEXT:
                p->tag = AGENT_HOST_HISTORY_TYPES_PART_TEXT;
                p->val.text = to_wit(q->text);
                break;
            case AHG_PART_IMAGE:
                p->tag = AGENT_HOST_HISTORY_TYPES_PART_IMAGE;
                p->val.image.source.tag = q->image.source.kind == AHG_MEDIA_URL
                                              ? AGENT_HOST_HISTORY_TYPES_MEDIA_SOURCE_URL
                                              : AGENT_HOST_HISTORY_TYPES_MEDIA_SOURCE_PATH;
                p->val.image.source.val.url = to_wit(q->image.source.value);
                p->val.image.mime_type = to_wit_opt(q->image.mime_type);
                break;
            case AHG_PART_FILE:
                p->tag = AGENT_HOST_HISTORY_TYPES_PART_FILE;
                p->val.file.name = to_wit(q->file.name);
                p->val.file.path = to_wit(q->file.path);
                p->val.file.mime_type = to_wit_opt(q->file.mime_type);
                break;
            }
        }
        w->parts.ptr = parts;
    }
    w->reasoning.is_some = m->has_reasoning;
    if (m->has_reasoning) {
        w->reasoning.val.text = to_wit(m->reasoning.text);
        w->reasoning.val.signature = to_wit_opt(m->reasoning.signature);
        w->reasoning.val.redacted = m->reasoning.redacted;
    }
    w->tool_calls.len = m->tool_calls_len;
    if (m->tool_calls_len) {
        agent_host_history_types_tool_call_t *calls =
            h ? ahg_alloc(h, m->tool_calls_len * sizeof *calls)
              : calloc(m->tool_calls_len, sizeof *calls);
        if (!calls) abort();
        for (size_t k = 0; k < m->tool_calls_len; k++) {
            calls[k].id = to_wit(m->tool_calls[k].id);
            calls[k].name = to_wit(m->tool_calls[k].name);
            calls[k].arguments = to_wit(m->tool_calls[k].arguments);
        }
        w->tool_calls.ptr = calls;
    }
    w->tool_call_id = to_wit_opt(m->tool_call_id);
    w->tool_name = to_wit_opt(m->tool_name);
    w->usage.is_some = m->has_usage;
    if (m->has_usage) w->usage.val = usage_to_wit(&m->usage);
    w->model = to_wit_opt(m->model);
    w->timestamp.is_some = m->has_timestamp;
    w->timestamp.val.seconds = m->timestamp.seconds;
    w->timestamp.val.nanoseconds = m->timestamp.nanoseconds;
    w->agent = to_wit_opt(m->agent);
    w->channel = to_wit_opt(m->channel);
    w->flags = m->flags;
    w->metadata = to_wit_opt(m->metadata);
    w->tokens = m->tokens;
}

/* ---- The host's log and estimates ------------------------------------------ */

void ahg_host_log(ahg_level level, ahg_str text) {
    wit_string s = to_wit(text);
    agent_host_history_host_log((agent_host_history_host_level_t)level, &s);
}

uint32_t ahg_host_estimate_tokens(ahg_str text) {
    wit_string s = to_wit(text);
    return agent_host_history_host_estimate_tokens(&s);
}

uint32_t ahg_host_estimate_message_tokens(const ahg_message *m) {
    wit_message w;
    message_to_wit(NULL, m, &w);
    uint32_t n = agent_host_history_host_estimate_message_tokens(&w);
    free(w.parts.ptr);
    free(w.tool_calls.ptr);
    return n;
}

/* ---- The services the user grants ------------------------------------------ */

/* What the host answers lives in memory the canonical ABI allocated with
 * cabi_realloc, which is never freed (see the top of this file): the SDK's
 * views point into it. */
static int service_error(const agent_host_history_services_service_error_t *w,
                         ahg_service_error *err) {
    switch (w->tag) {
    case AGENT_HOST_HISTORY_SERVICES_SERVICE_ERROR_DENIED:
        err->kind = AHG_SERVICE_DENIED;
        break;
    case AGENT_HOST_HISTORY_SERVICES_SERVICE_ERROR_OVER_BUDGET:
        err->kind = AHG_SERVICE_OVER_BUDGET;
        break;
    default:
        err->kind = AHG_SERVICE_FAILED;
        break;
    }
    /* Every case carries a string, at the same place. */
    err->message = from_wit(w->val.denied);
    return -1;
}

int ahg_summarize(ahg_history *h, ahg_str prompt, ahg_str text, ahg_summary_caps caps,
                  ahg_summary *out, ahg_service_error *err) {
    (void)h;
    wit_string p = to_wit(prompt), t = to_wit(text);
    agent_host_history_services_summarize_caps_t c = {caps.max_tokens, caps.timeout_ms};
    agent_host_history_services_summary_t ret;
    agent_host_history_services_service_error_t e;
    memset(&ret, 0, sizeof ret);
    memset(&e, 0, sizeof e);
    if (!agent_host_history_services_summarize(&p, &t, &c, &ret, &e)) return service_error(&e, err);
    out->text = from_wit(ret.text);
    out->input_tokens = ret.input_tokens;
    out->output_tokens = ret.output_tokens;
    err->kind = AHG_SERVICE_OK;
    err->message = ahg_cstr("");
    return 0;
}

int ahg_count_tokens(ahg_history *h, ahg_str text, uint32_t *out, ahg_service_error *err) {
    (void)h;
    wit_string t = to_wit(text);
    agent_host_history_services_service_error_t e;
    memset(&e, 0, sizeof e);
    if (!agent_host_history_services_count_tokens(&t, out, &e)) return service_error(&e, err);
    err->kind = AHG_SERVICE_OK;
    err->message = ahg_cstr("");
    return 0;
}

int ahg_read_memory(ahg_history *h, ahg_str query, uint32_t limit, ahg_fact **facts,
                    size_t *len, ahg_service_error *err) {
    wit_string q = to_wit(query);
    agent_host_history_services_list_fact_t list;
    agent_host_history_services_service_error_t e;
    memset(&list, 0, sizeof list);
    memset(&e, 0, sizeof e);
    *facts = NULL;
    *len = 0;
    if (!agent_host_history_services_read_memory(&q, limit, &list, &e)) {
        return service_error(&e, err);
    }
    if (list.len) {
        ahg_fact *out = ahg_alloc(h, list.len * sizeof *out);
        for (size_t i = 0; i < list.len; i++) {
            const agent_host_history_services_fact_t *f = &list.ptr[i];
            out[i].id = from_wit(f->id);
            out[i].entity = from_wit(f->entity);
            out[i].text = from_wit(f->text);
            out[i].attribute = from_wit_opt(f->attribute);
            out[i].value = from_wit_opt(f->value);
            out[i].recorded.seconds = f->recorded.seconds;
            out[i].recorded.nanoseconds = f->recorded.nanoseconds;
        }
        *facts = out;
        *len = list.len;
    }
    err->kind = AHG_SERVICE_OK;
    err->message = ahg_cstr("");
    return 0;
}

/* ---- The exports ----------------------------------------------------------- */

static wit_string static_string(const char *s) { return to_wit(ahg_cstr(s)); }

void exports_agent_host_history_processor_describe(
    exports_agent_host_history_processor_description_t *ret) {
    const ahg_description *d = &ahg_exported_description;
    ret->name = static_string(d->name);
    ret->version = static_string(d->version);
    ret->summary = static_string(d->summary);
    ret->config_schema.is_some = d->config_schema != NULL;
    ret->config_schema.val = static_string(d->config_schema);
    ret->config_example.is_some = d->config_example != NULL;
    ret->config_example.val = static_string(d->config_example);
    ret->reorders = false;
}

/* The host's history resource, borrowed for the call. */
typedef struct source {
    agent_host_history_types_borrow_history_t handle;
} source;

/* Every message of the host's history, on the processor's first read. */
static ahg_message *fetch_messages(ahg_history *h, void *arg) {
    source *src = arg;
    size_t n = ahg_len(h);
    agent_host_history_types_list_message_t list = {0};
    agent_host_history_types_method_history_messages(src->handle, 0, (uint32_t)n, &list);
    /* The host gives exactly the range asked for; fewer would be its bug,
     * and the missing ones read as empty. */
    ahg_message *messages = ahg_alloc(h, (n + 1) * sizeof *messages);
    for (size_t i = 0; i < n && i < list.len; i++) message_from_wit(h, &list.ptr[i], &messages[i]);
    return messages;
}

static ahg_header header_from_wit(const agent_host_history_types_header_t *w) {
    ahg_header x;
    memset(&x, 0, sizeof x);
    x.role = (ahg_role)w->role;
    x.flags = w->flags;
    x.tokens = w->tokens;
    x.has_timestamp = w->timestamp.is_some;
    x.timestamp.seconds = w->timestamp.val.seconds;
    x.timestamp.nanoseconds = w->timestamp.val.nanoseconds;
    x.has_answers = w->answers.is_some;
    x.answers = w->answers.val;
    x.tool_calls = w->tool_calls;
    x.parts = w->parts;
    x.content_bytes = w->content_bytes;
    x.has_reasoning_bytes = w->reasoning_bytes.is_some;
    x.reasoning_bytes = w->reasoning_bytes.val;
    x.metadata_bytes = w->metadata_bytes;
    x.has_usage = w->usage.is_some;
    if (x.has_usage) x.usage = usage_from_wit(&w->usage.val);
    return x;
}

bool exports_agent_host_history_processor_process(
    exports_agent_host_history_processor_run_context_t *ctx,
    exports_agent_host_history_processor_borrow_history_t history,
    exports_agent_host_history_processor_list_item_t *ret,
    exports_agent_host_history_processor_error_t *err) {
    ahg_run_context c;
    memset(&c, 0, sizeof c);
    c.session_key = from_wit_opt(ctx->session_key);
    c.agent = from_wit_opt(ctx->agent);
    c.model = from_wit_opt(ctx->model);
    c.context_window = ctx->context_window;
    c.budget = ctx->budget;
    c.total_tokens = ctx->total_tokens;
    c.turn = ctx->turn;
    c.usage = usage_from_wit(&ctx->usage);
    c.now.seconds = ctx->now.seconds;
    c.now.nanoseconds = ctx->now.nanoseconds;
    c.config = from_wit(ctx->config);

    /* The headers now, in one call; the messages when first read. */
    uint32_t n = agent_host_history_types_method_history_len(history);
    agent_host_history_types_list_header_t list = {0};
    agent_host_history_types_method_history_headers(history, 0, n, &list);
    size_t len = list.len < n ? list.len : n;
    ahg_header *headers = calloc(len + 1, sizeof *headers);
    if (!headers) abort();
    for (size_t i = 0; i < len; i++) headers[i] = header_from_wit(&list.ptr[i]);
    source *src = calloc(1, sizeof *src);
    if (!src) abort();
    src->handle = history;
    ahg_history *h = ahg_history_from_source(&c, headers, len, fetch_messages, src);

    ahg_error e = {AHG_OK, NULL};
    int rc = ahg_history_process(h, &e);
    /* The answer needs nothing more from the host's history, and the
     * component model requires a borrowed handle to be dropped before the
     * export returns (wasmtime refuses the call otherwise). */
    agent_host_history_types_history_drop_borrow(history);
    if (rc != 0) {
        err->tag = e.kind == AHG_BAD_CONFIG ? AGENT_HOST_HISTORY_TYPES_ERROR_BAD_CONFIG
                                            : AGENT_HOST_HISTORY_TYPES_ERROR_FAILED;
        err->val.bad_config = to_wit(ahg_cstr(e.message ? e.message : "failed"));
        return false;
    }
    size_t count = 0;
    ahg_item *items = ahg_history_items(h, &count);
    agent_host_history_types_item_t *out = ahg_alloc(h, (count + 1) * sizeof *out);
    for (size_t k = 0; k < count; k++) {
        switch (items[k].kind) {
        case AHG_ITEM_KEEP:
            out[k].tag = AGENT_HOST_HISTORY_TYPES_ITEM_KEEP;
            out[k].val.keep = items[k].index;
            break;
        case AHG_ITEM_REPLACE:
            out[k].tag = AGENT_HOST_HISTORY_TYPES_ITEM_REPLACE;
            out[k].val.replace.index = items[k].index;
            message_to_wit(h, items[k].message, &out[k].val.replace.message);
            break;
        case AHG_ITEM_INSERT:
            out[k].tag = AGENT_HOST_HISTORY_TYPES_ITEM_INSERT;
            message_to_wit(h, items[k].message, &out[k].val.insert);
            break;
        }
    }
    ret->ptr = out;
    ret->len = count;
    return true;
}

/* The instance is thrown away after each call: nothing to free (see the top
 * of this file). These replace the generated weak definitions. */
__attribute__((__export_name__("cabi_post_agent-host:history/processor@0.2.0#describe")))
void __wasm_export_exports_agent_host_history_processor_describe_post_return(uint8_t *ret) {
    (void)ret;
}

__attribute__((__export_name__("cabi_post_agent-host:history/processor@0.2.0#process")))
void __wasm_export_exports_agent_host_history_processor_process_post_return(uint8_t *ret) {
    (void)ret;
}

/* wasi-libc's assert() (used inside its regex functions) prints to stderr,
 * which would import WASI's fd_write, fd_seek and fd_close. A failed
 * assertion traps instead; the host reports it and keeps its input. */
_Noreturn void __assert_fail(const char *expr, const char *file, int line, const char *func) {
    (void)expr;
    (void)file;
    (void)line;
    (void)func;
    __builtin_trap();
}
