/*
 * agent_host_guest.c: the pure half of the C SDK (history edits, memory owned
 * by the call, JSON, configuration, errors, log formatting). It knows nothing
 * of the generated bindings, so it compiles natively as well as for wasm32:
 * agent_host_guest_wit.c connects it to the host, agent_host_guest_native.c
 * to a fake host for tests.
 */
#include "agent_host_guest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- Strings --------------------------------------------------------------- */

ahg_str ahg_cstr(const char *s) {
    ahg_str out = {s ? s : "", s ? strlen(s) : 0};
    return out;
}

bool ahg_str_eq(ahg_str a, ahg_str b) {
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

bool ahg_str_eq_c(ahg_str s, const char *c) { return ahg_str_eq(s, ahg_cstr(c)); }

ahg_opt_str ahg_some(ahg_str s) {
    ahg_opt_str out = {true, s};
    return out;
}

const char *ahg_plural(size_t n, const char *word, const char *words) {
    return n == 1 ? word : words;
}

/* ---- Messages -------------------------------------------------------------- */

ahg_message ahg_message_new(ahg_role role, ahg_str content) {
    ahg_message m;
    memset(&m, 0, sizeof m);
    m.id = ahg_cstr("");
    m.role = role;
    m.content = content;
    return m;
}

size_t ahg_message_texts(ahg_message *m, ahg_str **out, size_t cap) {
    size_t n = 0;
#define AHG_TEXT(p)                  \
    do {                             \
        if (out && n < cap) out[n] = (p); \
        n++;                         \
    } while (0)
    AHG_TEXT(&m->content);
    for (size_t i = 0; i < m->parts_len; i++) {
        if (m->parts[i].kind == AHG_PART_TEXT) AHG_TEXT(&m->parts[i].text);
    }
    if (m->has_reasoning && !m->reasoning.redacted) AHG_TEXT(&m->reasoning.text);
    for (size_t i = 0; i < m->tool_calls_len; i++) AHG_TEXT(&m->tool_calls[i].arguments);
#undef AHG_TEXT
    return n;
}

/* ---- The history and its memory -------------------------------------------- */

/** One allocation of the call, linked so that a native run can free them all. */
typedef struct block {
    struct block *next;
    /* Keeps what follows aligned for any type. */
    max_align_t align[];
} block;

typedef struct insert {
    size_t before;
    ahg_message message;
} insert;

struct ahg_history {
    ahg_run_context ctx;
    /* The whole messages once fetched (NULL before), and where they come
     * from: `unread` (given whole) or `fetch` over `source` (the host). */
    ahg_message *messages;
    ahg_message *unread;
    ahg_fetch_fn fetch;
    void *source;
    /* The input's headers, always there. */
    ahg_header *headers;
    size_t len;
    bool *dropped;
    bool *changed;
    insert *inserts;
    size_t inserts_len, inserts_cap;
    block *blocks;
    /* Which message's call each input result answers (NO_CALLER for none), as
     * in the input: from the headers' `answers`. */
    size_t *callers;
};

#define NO_CALLER SIZE_MAX

void *ahg_alloc(ahg_history *h, size_t size) {
    if (size > SIZE_MAX - sizeof(block)) abort();
    block *b = calloc(1, sizeof(block) + size);
    if (!b) abort();
    b->next = h->blocks;
    h->blocks = b;
    return b->align;
}

ahg_str ahg_strdup(ahg_history *h, ahg_str s) {
    char *p = ahg_alloc(h, s.len + 1);
    if (s.len) memcpy(p, s.ptr, s.len);
    ahg_str out = {p, s.len};
    return out;
}

/*
 * The SDK's own printf, so that nothing pulls in wasi-libc's stdio (whose
 * vfprintf and strtod reference `stderr`, which imports WASI's fd_write,
 * fd_seek and fd_close). It knows the conversions log lines need: %s %.*s
 * %c %d %i %u %x %g %% with the length modifiers l, ll, z and j; %g prints
 * integers exactly and other numbers with up to six decimals.
 */
static void put_unsigned(ahg_buf *b, unsigned long long v, unsigned base) {
    char digits[24];
    size_t n = 0;
    do {
        digits[n++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    while (n) ahg_buf_append(b, &digits[--n], 1);
}

static void put_double(ahg_buf *b, double d) {
    if (d != d) {
        ahg_buf_append_str(b, ahg_cstr("NaN"));
        return;
    }
    if (d < 0) {
        ahg_buf_append(b, "-", 1);
        d = -d;
    }
    if (d > 1e18) {
        ahg_buf_append_str(b, ahg_cstr("a huge number"));
        return;
    }
    unsigned long long whole = (unsigned long long)d;
    put_unsigned(b, whole, 10);
    unsigned long long frac = (unsigned long long)((d - (double)whole) * 1e6 + 0.5);
    if (frac == 0 || frac >= 1000000) return;
    char digits[7];
    for (int k = 5; k >= 0; k--) {
        digits[k] = (char)('0' + frac % 10);
        frac /= 10;
    }
    size_t n = 6;
    while (n && digits[n - 1] == '0') n--;
    ahg_buf_append(b, ".", 1);
    ahg_buf_append(b, digits, n);
}

static void buf_vformat(ahg_buf *b, const char *fmt, va_list ap) {
    for (const char *f = fmt; *f; f++) {
        if (*f != '%') {
            ahg_buf_append(b, f, 1);
            continue;
        }
        f++;
        int precision = -1;
        if (f[0] == '.' && f[1] == '*') {
            precision = va_arg(ap, int);
            f += 2;
        }
        int size = 0; /* 1: long, 2: long long, 3: size_t, 4: intmax_t */
        if (*f == 'l' && f[1] == 'l') size = 2, f += 2;
        else if (*f == 'l') size = 1, f++;
        else if (*f == 'z') size = 3, f++;
        else if (*f == 'j') size = 4, f++;
        switch (*f) {
        case 's': {
            const char *s = va_arg(ap, const char *);
            if (!s) s = "(null)";
            size_t n = 0;
            while (s[n] && (precision < 0 || n < (size_t)precision)) n++;
            ahg_buf_append(b, s, n);
            break;
        }
        case 'c': {
            char c = (char)va_arg(ap, int);
            ahg_buf_append(b, &c, 1);
            break;
        }
        case 'd':
        case 'i': {
            long long v = size == 2 ? va_arg(ap, long long)
                          : size == 1 ? va_arg(ap, long)
                          : size == 3 ? (long long)va_arg(ap, size_t)
                          : size == 4 ? (long long)va_arg(ap, intmax_t)
                                      : va_arg(ap, int);
            if (v < 0) ahg_buf_append(b, "-", 1);
            put_unsigned(b, v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v, 10);
            break;
        }
        case 'u':
        case 'x': {
            unsigned long long v = size == 2 ? va_arg(ap, unsigned long long)
                                   : size == 1 ? va_arg(ap, unsigned long)
                                   : size == 3 ? va_arg(ap, size_t)
                                   : size == 4 ? (unsigned long long)va_arg(ap, uintmax_t)
                                               : va_arg(ap, unsigned);
            put_unsigned(b, v, *f == 'x' ? 16 : 10);
            break;
        }
        case 'g':
        case 'f': put_double(b, va_arg(ap, double)); break;
        case '%': ahg_buf_append(b, "%", 1); break;
        case '\0': f--; break;
        default: ahg_buf_append(b, f - 1, 2); break;
        }
    }
}

static char *vformat(const char *fmt, va_list ap) {
    ahg_buf b = {0};
    buf_vformat(&b, fmt, ap);
    ahg_buf_append(&b, "", 1);
    return b.ptr;
}

ahg_str ahg_printf(ahg_history *h, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = vformat(fmt, ap);
    va_end(ap);
    ahg_str out = ahg_strdup(h, ahg_cstr(s));
    free(s);
    return out;
}

void ahg_buf_append(ahg_buf *b, const char *bytes, size_t len) {
    if (len == 0) return;
    if (b->cap - b->len < len) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->len < len) {
            if (cap > SIZE_MAX / 2) abort();
            cap *= 2;
        }
        char *p = realloc(b->ptr, cap);
        if (!p) abort();
        b->ptr = p;
        b->cap = cap;
    }
    memcpy(b->ptr + b->len, bytes, len);
    b->len += len;
}

void ahg_buf_append_str(ahg_buf *b, ahg_str s) { ahg_buf_append(b, s.ptr, s.len); }

ahg_str ahg_buf_finish(ahg_history *h, ahg_buf *b) {
    ahg_str out = ahg_strdup(h, (ahg_str){b->ptr ? b->ptr : "", b->len});
    ahg_buf_free(b);
    return out;
}

void ahg_buf_free(ahg_buf *b) {
    free(b->ptr);
    b->ptr = NULL;
    b->len = b->cap = 0;
}

static uint64_t hash_str(ahg_str s);

/* UTF-8 bytes as the host counts them (u32, saturated). */
static uint32_t len32(size_t n) { return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n; }

ahg_header ahg_header_of(const ahg_message *m) {
    ahg_header out;
    memset(&out, 0, sizeof out);
    out.role = m->role;
    out.flags = m->flags;
    out.tokens = m->tokens;
    out.has_timestamp = m->has_timestamp;
    out.timestamp = m->timestamp;
    out.tool_calls = len32(m->tool_calls_len);
    out.parts = len32(m->parts_len);
    out.content_bytes = len32(m->content.len);
    out.has_reasoning_bytes = m->has_reasoning;
    out.reasoning_bytes = m->has_reasoning ? len32(m->reasoning.text.len) : 0;
    out.metadata_bytes = m->metadata.some ? len32(m->metadata.str.len) : 0;
    out.has_usage = m->has_usage;
    out.usage = m->usage;
    return out;
}

/* The headers of messages given whole, with the host's rule for `answers`:
 * one pass with a table from call id to the message that made the call last,
 * so a result answers the nearest earlier call with its id. */
static ahg_header *headers_of(ahg_history *h, const ahg_message *messages, size_t len) {
    ahg_header *headers = ahg_alloc(h, (len + 1) * sizeof *headers);
    size_t calls = 0;
    for (size_t i = 0; i < len; i++) calls += messages[i].tool_calls_len;
    size_t cap = 8;
    while (cap < calls * 2) cap *= 2;
    typedef struct slot {
        ahg_str id;
        size_t at;
        bool used;
    } slot;
    slot *table = calloc(cap, sizeof *table);
    if (!table) abort();
    for (size_t i = 0; i < len; i++) {
        const ahg_message *m = &messages[i];
        headers[i] = ahg_header_of(m);
        if (m->role == AHG_ROLE_TOOL && m->tool_call_id.some) {
            ahg_str id = m->tool_call_id.str;
            for (size_t k = hash_str(id) & (cap - 1); table[k].used; k = (k + 1) & (cap - 1)) {
                if (ahg_str_eq(table[k].id, id)) {
                    headers[i].has_answers = true;
                    headers[i].answers = (uint32_t)table[k].at;
                    break;
                }
            }
        }
        for (size_t c = 0; c < m->tool_calls_len; c++) {
            ahg_str id = m->tool_calls[c].id;
            size_t k = hash_str(id) & (cap - 1);
            while (table[k].used && !ahg_str_eq(table[k].id, id)) k = (k + 1) & (cap - 1);
            table[k].used = true;
            table[k].id = id;
            table[k].at = i;
        }
    }
    free(table);
    return headers;
}

static ahg_history *history_with(const ahg_run_context *ctx, size_t len) {
    ahg_history *h = calloc(1, sizeof *h);
    if (!h) abort();
    h->ctx = *ctx;
    h->len = len;
    h->dropped = ahg_alloc(h, len ? len : 1);
    h->changed = ahg_alloc(h, len ? len : 1);
    return h;
}

static void link_callers(ahg_history *h) {
    h->callers = ahg_alloc(h, (h->len + 1) * sizeof *h->callers);
    for (size_t i = 0; i < h->len; i++) {
        const ahg_header *x = &h->headers[i];
        h->callers[i] = x->has_answers && x->answers < h->len ? x->answers : NO_CALLER;
    }
}

ahg_history *ahg_history_new(const ahg_run_context *ctx, ahg_message *messages, size_t len) {
    ahg_history *h = history_with(ctx, len);
    h->unread = messages;
    h->headers = headers_of(h, messages, len);
    link_callers(h);
    return h;
}

ahg_history *ahg_history_from_source(const ahg_run_context *ctx, ahg_header *headers, size_t len,
                                     ahg_fetch_fn fetch, void *source) {
    ahg_history *h = history_with(ctx, len);
    h->headers = headers;
    h->fetch = fetch;
    h->source = source;
    link_callers(h);
    return h;
}

/* The whole messages, fetched on first use. */
static ahg_message *load(const ahg_history *ch) {
    ahg_history *h = (ahg_history *)ch;
    if (!h->messages) {
        h->messages = h->fetch ? h->fetch(h, h->source) : h->unread;
        /* A history given no messages (a native run's storage) still counts
         * as fetched. */
        if (!h->messages) h->messages = ahg_alloc(h, sizeof *h->messages);
    }
    return h->messages;
}

bool ahg_is_loaded(const ahg_history *h) { return h->messages != NULL; }

const ahg_header *ahg_headers(const ahg_history *h) { return h->headers; }

void ahg_history_free(ahg_history *h) {
    if (!h) return;
    for (block *b = h->blocks; b;) {
        block *next = b->next;
        free(b);
        b = next;
    }
    free(h->inserts);
    free(h);
}

/* Out-of-range indices are a bug in the processor, like an out-of-bounds
 * slice index in Rust: the call traps and the host keeps its input. */
static void check_index(const ahg_history *h, size_t index) {
    if (index >= h->len) abort();
}

size_t ahg_len(const ahg_history *h) { return h->len; }

const ahg_message *ahg_get(const ahg_history *h, size_t index) {
    return index < h->len ? &load(h)[index] : NULL;
}

ahg_header ahg_header_at(const ahg_history *h, size_t index) {
    check_index(h, index);
    if (!h->changed[index]) return h->headers[index];
    ahg_header out = ahg_header_of(&h->messages[index]);
    out.has_answers = h->headers[index].has_answers;
    out.answers = h->headers[index].answers;
    return out;
}

size_t ahg_retain_headers(ahg_history *h, bool (*keep)(const ahg_header *header, void *arg),
                          void *arg) {
    size_t dropped = 0;
    for (size_t i = 0; i < h->len; i++) {
        if (h->dropped[i]) continue;
        ahg_header x = ahg_header_at(h, i);
        if (!keep(&x, arg)) {
            h->dropped[i] = true;
            dropped++;
        }
    }
    return dropped;
}

const ahg_run_context *ahg_context(const ahg_history *h) { return &h->ctx; }

bool ahg_is_kept(const ahg_history *h, size_t index) {
    check_index(h, index);
    return !h->dropped[index];
}

bool ahg_is_changed(const ahg_history *h, size_t index) {
    check_index(h, index);
    return h->changed[index];
}

size_t ahg_kept(const ahg_history *h) {
    size_t n = 0;
    for (size_t i = 0; i < h->len; i++) n += !h->dropped[i];
    return n;
}

void ahg_keep(ahg_history *h, size_t index) {
    check_index(h, index);
    h->dropped[index] = false;
}

void ahg_drop(ahg_history *h, size_t index) {
    check_index(h, index);
    h->dropped[index] = true;
}

ahg_message *ahg_edit(ahg_history *h, size_t index) {
    check_index(h, index);
    ahg_message *messages = load(h);
    h->changed[index] = true;
    return &messages[index];
}

void ahg_replace(ahg_history *h, size_t index, const ahg_message *m) {
    *ahg_edit(h, index) = *m;
}

void ahg_insert(ahg_history *h, size_t index, const ahg_message *m) {
    if (index > h->len) abort();
    if (h->inserts_len == h->inserts_cap) {
        size_t cap = h->inserts_cap ? h->inserts_cap * 2 : 8;
        insert *p = realloc(h->inserts, cap * sizeof *p);
        if (!p) abort();
        h->inserts = p;
        h->inserts_cap = cap;
    }
    h->inserts[h->inserts_len].before = index;
    h->inserts[h->inserts_len].message = *m;
    h->inserts_len++;
}

void ahg_push(ahg_history *h, const ahg_message *m) { ahg_insert(h, h->len, m); }

ahg_item *ahg_history_items(ahg_history *h, size_t *len) {
    /* Inserts grouped by place, each group in the order it was made: a
     * counting sort, stable by construction. */
    size_t *starts = ahg_alloc(h, (h->len + 2) * sizeof *starts);
    for (size_t k = 0; k < h->inserts_len; k++) starts[h->inserts[k].before + 1]++;
    for (size_t i = 1; i <= h->len + 1; i++) starts[i] += starts[i - 1];
    const insert **sorted = ahg_alloc(h, (h->inserts_len + 1) * sizeof *sorted);
    size_t *fill = ahg_alloc(h, (h->len + 1) * sizeof *fill);
    for (size_t k = 0; k < h->inserts_len; k++) {
        size_t at = h->inserts[k].before;
        sorted[starts[at] + fill[at]++] = &h->inserts[k];
    }

    ahg_item *items = ahg_alloc(h, (h->len + h->inserts_len + 1) * sizeof *items);
    size_t n = 0, next = 0;
    for (size_t i = 0; i <= h->len; i++) {
        for (; next < h->inserts_len && sorted[next]->before == i; next++) {
            items[n].kind = AHG_ITEM_INSERT;
            items[n].message = &sorted[next]->message;
            n++;
        }
        if (i == h->len || h->dropped[i]) continue;
        items[n].index = (uint32_t)i;
        if (h->changed[i]) {
            items[n].kind = AHG_ITEM_REPLACE;
            items[n].message = &h->messages[i];
        } else {
            items[n].kind = AHG_ITEM_KEEP;
        }
        n++;
    }
    *len = n;
    return items;
}

/* ---- Turns and tool exchanges ---------------------------------------------- */

bool ahg_starts_turn(const ahg_message *m) {
    return m->role == AHG_ROLE_USER && !(m->flags & AHG_FLAG_SYNTHETIC);
}

/* Whether message `i` starts a turn as it is now, read from its header. */
static bool starts_turn_at(const ahg_history *h, size_t i) {
    ahg_header x = ahg_header_at(h, i);
    return x.role == AHG_ROLE_USER && !(x.flags & AHG_FLAG_SYNTHETIC);
}

const size_t *ahg_turn_starts(ahg_history *h, size_t *count) {
    size_t *starts = ahg_alloc(h, (h->len + 1) * sizeof *starts);
    size_t n = 0;
    for (size_t i = 0; i < h->len; i++) {
        if (!h->dropped[i] && starts_turn_at(h, i)) starts[n++] = i;
    }
    *count = n;
    return starts;
}

static uint64_t hash_str(ahg_str s) {
    uint64_t x = 0xcbf29ce484222325u; /* FNV-1a */
    for (size_t i = 0; i < s.len; i++) x = (x ^ (unsigned char)s.ptr[i]) * 0x100000001b3u;
    return x;
}

bool ahg_tool_caller(ahg_history *h, size_t index, size_t *caller) {
    check_index(h, index);
    if (h->callers[index] == NO_CALLER) return false;
    if (caller) *caller = h->callers[index];
    return true;
}

size_t ahg_keep_last_turns(ahg_history *h, size_t turns) {
    size_t total = 0;
    for (size_t i = 0; i < h->len; i++) {
        total += !h->dropped[i] && starts_turn_at(h, i);
    }
    if (total <= turns) return 0;
    /* The start of the `turns`-th kept turn from the end. */
    size_t cut = h->len;
    for (size_t seen = 0; seen < turns;) {
        cut--;
        seen += !h->dropped[cut] && starts_turn_at(h, cut);
    }
    /* A kept result after the cut whose call is before it pulls the cut back,
     * and the results between the old and the new cut may pull it further. */
    size_t checked = h->len;
    while (cut < checked) {
        size_t earliest = NO_CALLER;
        for (size_t i = cut; i < checked; i++) {
            if (!h->dropped[i] && h->callers[i] < earliest) earliest = h->callers[i];
        }
        checked = cut;
        if (earliest < cut) cut = earliest;
    }
    size_t dropped = 0;
    for (size_t i = 0; i < cut; i++) {
        ahg_header m = ahg_header_at(h, i);
        if (m.role != AHG_ROLE_SYSTEM && !(m.flags & AHG_FLAG_SUMMARY) && !h->dropped[i]) {
            h->dropped[i] = true;
            dropped++;
        }
    }
    return dropped;
}

/* Whether `s` is only whitespace, as Rust's str::trim sees it (Unicode
 * White_Space), so that C drops exactly what the Rust SDK drops. */
static bool is_blank(ahg_str s) {
    const unsigned char *p = (const unsigned char *)s.ptr;
    for (size_t i = 0; i < s.len;) {
        uint32_t cp = p[i];
        size_t n = 1;
        if (cp >= 0xF0 && i + 3 < s.len) {
            cp = (cp & 0x07) << 18 | (p[i + 1] & 0x3Fu) << 12 | (p[i + 2] & 0x3Fu) << 6 |
                 (p[i + 3] & 0x3Fu);
            n = 4;
        } else if (cp >= 0xE0 && i + 2 < s.len) {
            cp = (cp & 0x0F) << 12 | (p[i + 1] & 0x3Fu) << 6 | (p[i + 2] & 0x3Fu);
            n = 3;
        } else if (cp >= 0xC0 && i + 1 < s.len) {
            cp = (cp & 0x1F) << 6 | (p[i + 1] & 0x3Fu);
            n = 2;
        }
        bool space = (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 ||
                     cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
                     cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
        if (!space) return false;
        i += n;
    }
    return true;
}

static bool has_call(const ahg_message *m, ahg_str id) {
    for (size_t k = 0; k < m->tool_calls_len; k++) {
        if (ahg_str_eq(m->tool_calls[k].id, id)) return true;
    }
    return false;
}

static ahg_str result_id(const ahg_message *m) {
    return m->tool_call_id.some ? m->tool_call_id.str : ahg_cstr("");
}

size_t ahg_settle_tool_exchanges(ahg_history *h) {
    /* Nothing links a result to a call: nothing to settle, no text to read. */
    bool linked = false;
    for (size_t i = 0; i < h->len && !linked; i++) linked = h->callers[i] != NO_CALLER;
    if (!linked) return 0;
    load(h);
    size_t dropped = 0;
    /* Results of dropped or removed calls go. */
    for (size_t i = 0; i < h->len; i++) {
        size_t c = h->callers[i];
        if (c == NO_CALLER || h->dropped[i]) continue;
        if (h->dropped[c] || !has_call(&h->messages[c], result_id(&h->messages[i]))) {
            h->dropped[i] = true;
            dropped++;
        }
    }
    /* The results of each call message, as linked lists through `next`. */
    size_t *first = malloc((h->len + 1) * sizeof *first);
    size_t *next = malloc((h->len + 1) * sizeof *next);
    if (!first || !next) abort();
    for (size_t i = 0; i < h->len; i++) first[i] = next[i] = NO_CALLER;
    for (size_t i = h->len; i-- > 0;) {
        size_t c = h->callers[i];
        if (c == NO_CALLER) continue;
        next[i] = first[c];
        first[c] = i;
    }
    /* Calls whose results all went are taken out of their message. A call id
     * is lost when a result for it went and none for it is kept. */
    for (size_t c = 0; c < h->len; c++) {
        if (first[c] == NO_CALLER || h->dropped[c]) continue;
        bool any_lost = false;
        for (size_t r = first[c]; r != NO_CALLER && !any_lost; r = next[r]) {
            if (!h->dropped[r]) continue;
            bool kept = false;
            for (size_t o = first[c]; o != NO_CALLER && !kept; o = next[o]) {
                kept = !h->dropped[o] &&
                       ahg_str_eq(result_id(&h->messages[o]), result_id(&h->messages[r]));
            }
            any_lost = !kept;
        }
        if (!any_lost) continue;
        ahg_message *m = ahg_edit(h, c);
        ahg_tool_call *calls = ahg_alloc(h, (m->tool_calls_len + 1) * sizeof *calls);
        size_t n = 0;
        for (size_t k = 0; k < m->tool_calls_len; k++) {
            bool went = false, kept = false;
            for (size_t r = first[c]; r != NO_CALLER; r = next[r]) {
                if (!ahg_str_eq(result_id(&h->messages[r]), m->tool_calls[k].id)) continue;
                if (h->dropped[r]) went = true;
                else kept = true;
            }
            if (!went || kept) calls[n++] = m->tool_calls[k];
        }
        m->tool_calls = n ? calls : NULL;
        m->tool_calls_len = n;
        if (n == 0 && is_blank(m->content) && m->parts_len == 0 && !m->has_reasoning) {
            h->dropped[c] = true;
            dropped++;
        }
    }
    free(first);
    free(next);
    return dropped;
}

/* ---- Errors ---------------------------------------------------------------- */

static int set_error(ahg_error *err, ahg_error_kind kind, const char *fmt, va_list ap) {
    if (err->kind == AHG_OK) {
        err->kind = kind;
        free(err->message);
        err->message = vformat(fmt, ap);
    }
    return -1;
}

int ahg_bad_config(ahg_error *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error(err, AHG_BAD_CONFIG, fmt, ap);
    va_end(ap);
    return -1;
}

int ahg_failed(ahg_error *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error(err, AHG_FAILED, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- Logging and estimates ------------------------------------------------- */

const char *ahg_service_error_name(ahg_service_error_kind kind) {
    switch (kind) {
    case AHG_SERVICE_OK:
        return "ok";
    case AHG_SERVICE_DENIED:
        return "denied";
    case AHG_SERVICE_OVER_BUDGET:
        return "over budget";
    case AHG_SERVICE_FAILED:
        break;
    }
    return "failed";
}

void ahg_log(ahg_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = vformat(fmt, ap);
    va_end(ap);
    ahg_host_log(level, ahg_cstr(s));
    free(s);
}

uint32_t ahg_estimate_tokens(ahg_str text) { return ahg_host_estimate_tokens(text); }

uint32_t ahg_estimate_message_tokens(const ahg_message *m) {
    return ahg_host_estimate_message_tokens(m);
}

/* ---- JSON ------------------------------------------------------------------ */

typedef struct parser {
    ahg_history *h;
    const char *s;
    size_t len, pos;
    ahg_error *err;
} parser;

enum { MAX_DEPTH = 64 };

static bool json_fail(parser *p, const char *what) {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < p->pos && i < p->len; i++) {
        if (p->s[i] == '\n') {
            line++;
            column = 1;
        } else {
            column++;
        }
    }
    ahg_bad_config(p->err, "not valid JSON at line %zu column %zu: %s", line, column, what);
    return false;
}

static void skip_ws(parser *p) {
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static bool literal(parser *p, const char *word) {
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0) return false;
    p->pos += n;
    return true;
}

static int hex4(parser *p) {
    if (p->len - p->pos < 4) return -1;
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p->s[p->pos + k];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return -1;
    }
    p->pos += 4;
    return v;
}

static void put_utf8(ahg_buf *b, uint32_t cp) {
    char out[4];
    size_t n;
    if (cp < 0x80) {
        out[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        out[0] = (char)(0xF0 | (cp >> 18));
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    ahg_buf_append(b, out, n);
}

/* After the opening quote. */
static bool parse_string(parser *p, ahg_str *out) {
    ahg_buf b = {0};
    for (;;) {
        if (p->pos >= p->len) {
            ahg_buf_free(&b);
            return json_fail(p, "a string is not closed");
        }
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c == '"') {
            p->pos++;
            *out = ahg_buf_finish(p->h, &b);
            return true;
        }
        if (c < 0x20) {
            ahg_buf_free(&b);
            return json_fail(p, "a control character in a string");
        }
        if (c != '\\') {
            ahg_buf_append(&b, (const char *)&p->s[p->pos], 1);
            p->pos++;
            continue;
        }
        p->pos++;
        if (p->pos >= p->len) {
            ahg_buf_free(&b);
            return json_fail(p, "a string is not closed");
        }
        char e = p->s[p->pos++];
        const char *simple = NULL;
        switch (e) {
        case '"': simple = "\""; break;
        case '\\': simple = "\\"; break;
        case '/': simple = "/"; break;
        case 'b': simple = "\b"; break;
        case 'f': simple = "\f"; break;
        case 'n': simple = "\n"; break;
        case 'r': simple = "\r"; break;
        case 't': simple = "\t"; break;
        case 'u': {
            int hi = hex4(p);
            if (hi < 0) break;
            uint32_t cp = (uint32_t)hi;
            if (hi >= 0xD800 && hi <= 0xDBFF) {
                /* A high surrogate must pair with a low one. */
                if (!literal(p, "\\u")) { hi = -1; break; }
                int lo = hex4(p);
                if (lo < 0xDC00 || lo > 0xDFFF) { hi = -1; break; }
                cp = 0x10000 + (((uint32_t)hi - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
            } else if (hi >= 0xDC00 && hi <= 0xDFFF) {
                hi = -1;
                break;
            }
            put_utf8(&b, cp);
            continue;
        }
        default: break;
        }
        if (!simple) {
            ahg_buf_free(&b);
            return json_fail(p, "an invalid escape in a string");
        }
        ahg_buf_append(&b, simple, 1);
    }
}

static bool parse_value(parser *p, ahg_json *v, int depth);

static bool parse_number(parser *p, ahg_json *v) {
    size_t start = p->pos;
    if (p->pos < p->len && p->s[p->pos] == '-') p->pos++;
    size_t digits = p->pos;
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
    if (p->pos == digits) return json_fail(p, "expected a value");
    if (p->s[digits] == '0' && p->pos - digits > 1) return json_fail(p, "a number with a leading zero");
    if (p->pos < p->len && p->s[p->pos] == '.') {
        p->pos++;
        size_t frac = p->pos;
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
        if (p->pos == frac) return json_fail(p, "a number without digits after its point");
    }
    if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        p->pos++;
        if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
        size_t exp = p->pos;
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
        if (p->pos == exp) return json_fail(p, "a number without digits in its exponent");
    }
    /* Digits to a double without strtod (see vformat for why): exact for
     * integers up to 2^53, close enough for any configuration otherwise. */
    double mantissa = 0;
    int exponent = 0;
    size_t k = start + (p->s[start] == '-');
    for (; k < p->pos && p->s[k] >= '0' && p->s[k] <= '9'; k++) mantissa = mantissa * 10 + (p->s[k] - '0');
    if (k < p->pos && p->s[k] == '.') {
        for (k++; k < p->pos && p->s[k] >= '0' && p->s[k] <= '9'; k++) {
            mantissa = mantissa * 10 + (p->s[k] - '0');
            exponent--;
        }
    }
    if (k < p->pos && (p->s[k] == 'e' || p->s[k] == 'E')) {
        k++;
        int sign = 1, e = 0;
        if (p->s[k] == '+' || p->s[k] == '-') sign = p->s[k++] == '-' ? -1 : 1;
        for (; k < p->pos; k++) e = e < 10000 ? e * 10 + (p->s[k] - '0') : e;
        exponent += sign * e;
    }
    double scale = 1;
    for (int e = exponent < 0 ? -exponent : exponent; e > 0 && scale < 1e308; e--) scale *= 10;
    v->type = AHG_JSON_NUMBER;
    v->number = (exponent < 0 ? mantissa / scale : mantissa * scale) * (p->s[start] == '-' ? -1 : 1);
    return true;
}

/* Items are parsed into a growable array, then moved into call memory. */
static bool parse_container(parser *p, ahg_json *v, int depth, bool object) {
    char close = object ? '}' : ']';
    ahg_json *items = NULL;
    ahg_str *keys = NULL;
    size_t n = 0, cap = 0;
    bool ok = false;
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        ok = true;
        goto done;
    }
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 4;
            ahg_json *ni = realloc(items, cap * sizeof *ni);
            if (!ni) abort();
            items = ni;
            if (object) {
                ahg_str *nk = realloc(keys, cap * sizeof *nk);
                if (!nk) abort();
                keys = nk;
            }
        }
        skip_ws(p);
        if (object) {
            if (p->pos >= p->len || p->s[p->pos] != '"') {
                json_fail(p, "expected a key in double quotes");
                goto done;
            }
            p->pos++;
            if (!parse_string(p, &keys[n])) goto done;
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') {
                json_fail(p, "expected `:` after a key");
                goto done;
            }
            p->pos++;
        }
        if (!parse_value(p, &items[n], depth + 1)) goto done;
        n++;
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == close) {
            p->pos++;
            ok = true;
            goto done;
        }
        json_fail(p, object ? "expected `,` or `}`" : "expected `,` or `]`");
        goto done;
    }
done:
    if (ok) {
        v->type = object ? AHG_JSON_OBJECT : AHG_JSON_ARRAY;
        v->len = n;
        v->items = ahg_alloc(p->h, (n + 1) * sizeof *items);
        if (n) memcpy(v->items, items, n * sizeof *items);
        if (object) {
            v->keys = ahg_alloc(p->h, (n + 1) * sizeof *keys);
            if (n) memcpy(v->keys, keys, n * sizeof *keys);
        }
    }
    free(items);
    free(keys);
    return ok;
}

static bool parse_value(parser *p, ahg_json *v, int depth) {
    memset(v, 0, sizeof *v);
    if (depth > MAX_DEPTH) return json_fail(p, "nested too deep");
    skip_ws(p);
    if (p->pos >= p->len) return json_fail(p, "expected a value");
    char c = p->s[p->pos];
    switch (c) {
    case '{': return parse_container(p, v, depth, true);
    case '[': return parse_container(p, v, depth, false);
    case '"':
        p->pos++;
        v->type = AHG_JSON_STRING;
        return parse_string(p, &v->string);
    case 't':
    case 'f':
    case 'n':
        if (literal(p, "true")) {
            v->type = AHG_JSON_BOOL;
            v->boolean = true;
        } else if (literal(p, "false")) {
            v->type = AHG_JSON_BOOL;
        } else if (literal(p, "null")) {
            v->type = AHG_JSON_NULL;
        } else {
            return json_fail(p, "expected a value");
        }
        return true;
    default: return parse_number(p, v);
    }
}

const ahg_json *ahg_json_parse(ahg_history *h, ahg_str text, ahg_error *err) {
    parser p = {h, text.ptr, text.len, 0, err};
    ahg_json *v = ahg_alloc(h, sizeof *v);
    if (!parse_value(&p, v, 0)) return NULL;
    skip_ws(&p);
    if (p.pos < p.len) {
        json_fail(&p, "trailing characters");
        return NULL;
    }
    return v;
}

const ahg_json *ahg_json_get(const ahg_json *object, const char *key) {
    if (!object || object->type != AHG_JSON_OBJECT) return NULL;
    ahg_str k = ahg_cstr(key);
    /* The last duplicate wins, as in most JSON readers. */
    for (size_t i = object->len; i-- > 0;) {
        if (ahg_str_eq(object->keys[i], k)) return &object->items[i];
    }
    return NULL;
}

const char *ahg_json_type_name(ahg_json_type type) {
    switch (type) {
    case AHG_JSON_NULL: return "null";
    case AHG_JSON_BOOL: return "a boolean";
    case AHG_JSON_NUMBER: return "a number";
    case AHG_JSON_STRING: return "a string";
    case AHG_JSON_ARRAY: return "an array";
    case AHG_JSON_OBJECT: return "an object";
    }
    return "a value";
}

/* ---- Configuration --------------------------------------------------------- */

struct ahg_config {
    ahg_history *h;
    /** The object read (NULL for no configuration). */
    const ahg_json *object;
    /** Its path from the root, for messages: "" or "extra[0]". */
    char *path;
    /** The keys the processor asked for, in order. */
    const char **asked;
    size_t asked_len, asked_cap;
    /** The root holds the first error; nested objects point at it. */
    ahg_config *root;
    char *error;
    /** Objects read from this one, to check for unknown keys too. */
    ahg_config *children, *next_sibling;
};

static ahg_config *config_new(ahg_history *h, const ahg_json *object, const char *path,
                              ahg_config *root) {
    ahg_config *c = ahg_alloc(h, sizeof *c);
    c->h = h;
    c->object = object;
    c->path = (char *)ahg_strdup(h, ahg_cstr(path)).ptr;
    c->root = root ? root : c;
    return c;
}

/** `key` as a message names it: `key` at the root, `extra[0].key` below. */
static char *key_path(ahg_config *c, const char *key) {
    return (char *)ahg_printf(c->h, "%s%s%s", c->path, c->path[0] && key[0] ? "." : "", key).ptr;
}

void ahg_config_error(ahg_config *c, const char *key, const char *fmt, ...) {
    if (c->root->error) return;
    va_list ap;
    va_start(ap, fmt);
    char *what = vformat(fmt, ap);
    va_end(ap);
    const char *path = key_path(c, key);
    c->root->error = (char *)(path[0] ? ahg_printf(c->h, "`%s`: %s", path, what)
                                      : ahg_printf(c->h, "%s", what))
                         .ptr;
    free(what);
}

static void remember(ahg_config *c, const char *key) {
    for (size_t i = 0; i < c->asked_len; i++) {
        if (strcmp(c->asked[i], key) == 0) return;
    }
    if (c->asked_len == c->asked_cap) {
        size_t cap = c->asked_cap ? c->asked_cap * 2 : 8;
        const char **p = ahg_alloc(c->h, cap * sizeof *p);
        if (c->asked_len) memcpy(p, c->asked, c->asked_len * sizeof *p);
        c->asked = p;
        c->asked_cap = cap;
    }
    c->asked[c->asked_len++] = key;
}

/** The value of `key`, or NULL when absent or null. */
static const ahg_json *lookup(ahg_config *c, const char *key) {
    remember(c, key);
    const ahg_json *v = ahg_json_get(c->object, key);
    return v && v->type != AHG_JSON_NULL ? v : NULL;
}

static const ahg_json *typed(ahg_config *c, const char *key, ahg_json_type type) {
    const ahg_json *v = lookup(c, key);
    if (v && v->type != type) {
        ahg_config_error(c, key, "expected %s, found %s", ahg_json_type_name(type),
                         ahg_json_type_name(v->type));
        return NULL;
    }
    return v;
}

bool ahg_config_has(ahg_config *c, const char *key) { return lookup(c, key) != NULL; }

const ahg_json *ahg_config_raw(ahg_config *c, const char *key) { return lookup(c, key); }

bool ahg_config_bool(ahg_config *c, const char *key, bool fallback) {
    const ahg_json *v = typed(c, key, AHG_JSON_BOOL);
    return v ? v->boolean : fallback;
}

double ahg_config_number(ahg_config *c, const char *key, double fallback) {
    const ahg_json *v = typed(c, key, AHG_JSON_NUMBER);
    return v ? v->number : fallback;
}

int64_t ahg_config_int(ahg_config *c, const char *key, int64_t fallback, int64_t min,
                       int64_t max) {
    const ahg_json *v = typed(c, key, AHG_JSON_NUMBER);
    if (!v) return fallback;
    double d = v->number;
    if (d != floor(d) || d < (double)min || d > (double)max) {
        ahg_config_error(c, key, "expected an integer from %lld to %lld, found %g",
                         (long long)min, (long long)max, d);
        return fallback;
    }
    return (int64_t)d;
}

ahg_str ahg_config_string(ahg_config *c, const char *key, const char *fallback) {
    const ahg_json *v = typed(c, key, AHG_JSON_STRING);
    return v ? v->string : ahg_cstr(fallback);
}

ahg_str ahg_config_require_string(ahg_config *c, const char *key) {
    if (!lookup(c, key)) {
        ahg_config_error(c, "", "missing field `%s`", key);
        return ahg_cstr("");
    }
    return ahg_config_string(c, key, "");
}

size_t ahg_config_array_len(ahg_config *c, const char *key) {
    const ahg_json *v = typed(c, key, AHG_JSON_ARRAY);
    return v ? v->len : 0;
}

static const ahg_json *item_at(ahg_config *c, const char *key, size_t i, ahg_json_type type) {
    const ahg_json *v = typed(c, key, AHG_JSON_ARRAY);
    if (!v || i >= v->len) return NULL;
    const ahg_json *item = &v->items[i];
    if (item->type != type) {
        char *at = (char *)ahg_printf(c->h, "%s[%zu]", key, i).ptr;
        ahg_config_error(c, at, "expected %s, found %s", ahg_json_type_name(type),
                         ahg_json_type_name(item->type));
        return NULL;
    }
    return item;
}

ahg_str ahg_config_string_at(ahg_config *c, const char *key, size_t i) {
    const ahg_json *item = item_at(c, key, i, AHG_JSON_STRING);
    return item ? item->string : ahg_cstr("");
}

ahg_config *ahg_config_object_at(ahg_config *c, const char *key, size_t i) {
    const ahg_json *item = item_at(c, key, i, AHG_JSON_OBJECT);
    const char *path = ahg_printf(c->h, "%s%s%s[%zu]", c->path, c->path[0] ? "." : "", key, i).ptr;
    ahg_config *child = config_new(c->h, item, path, c->root);
    child->next_sibling = c->children;
    c->children = child;
    return child;
}

/** The first key of `c` (or of an object read from it) that nobody asked for. */
static bool find_unknown(ahg_config *c) {
    if (c->object) {
        for (size_t k = 0; k < c->object->len; k++) {
            ahg_str key = c->object->keys[k];
            bool known = false;
            for (size_t i = 0; i < c->asked_len && !known; i++) {
                known = ahg_str_eq_c(key, c->asked[i]);
            }
            if (known) continue;
            ahg_buf expected = {0};
            for (size_t i = 0; i < c->asked_len; i++) {
                ahg_buf_append_str(&expected, ahg_cstr(i ? ", `" : "`"));
                ahg_buf_append_str(&expected, ahg_cstr(c->asked[i]));
                ahg_buf_append(&expected, "`", 1);
            }
            ahg_str list = ahg_buf_finish(c->h, &expected);
            const char *where = c->path[0] ? ahg_printf(c->h, "`%s`: ", c->path).ptr : "";
            c->root->error = (char *)ahg_printf(
                                 c->h, "%sunknown field `%.*s`, expected %s%.*s", where,
                                 (int)key.len, key.ptr,
                                 c->asked_len ? "one of " : "no field", (int)list.len, list.ptr)
                                 .ptr;
            return true;
        }
    }
    for (ahg_config *child = c->children; child; child = child->next_sibling) {
        if (find_unknown(child)) return true;
    }
    return false;
}

bool ahg_config_check(ahg_config *c, ahg_error *err) {
    if (!c->root->error) find_unknown(c->root);
    if (c->root->error) {
        ahg_bad_config(err, "%s", c->root->error);
        return false;
    }
    return true;
}

/* ---- One call -------------------------------------------------------------- */

int ahg_history_process(ahg_history *h, ahg_error *err) {
    ahg_str text = h->ctx.config;
    /* Trimmed: none, an empty text or `null` is the default configuration. */
    while (text.len && strchr(" \t\r\n", text.ptr[0])) text.ptr++, text.len--;
    while (text.len && strchr(" \t\r\n", text.ptr[text.len - 1])) text.len--;
    const ahg_json *root = NULL;
    if (text.len && !ahg_str_eq_c(text, "null")) {
        root = ahg_json_parse(h, text, err);
        if (!root) return -1;
        if (root->type != AHG_JSON_OBJECT) {
            return ahg_bad_config(err, "expected a JSON object, found %s",
                                  ahg_json_type_name(root->type));
        }
    }
    ahg_config *config = config_new(h, root, "", NULL);
    if (ahg_exported_process(h, config, err) != 0) {
        if (err->kind == AHG_OK) ahg_failed(err, "the processor failed without saying why");
        return -1;
    }
    if (err->kind != AHG_OK) return -1;
    /* A processor that forgot to check still refuses a bad configuration. */
    return ahg_config_check(config, err) ? 0 : -1;
}
