/*
 * redactor.c: finds secrets in a text, left to right, and replaces them.
 *
 * Each built-in kind is matched by a hand-written function that gives what
 * its pattern (shown above it, from the Rust crate) gives when a
 * backtracking engine matches it at the position. Every character a pattern
 * looks at is ASCII, so the scan works on bytes; it only steps over whole
 * UTF-8 characters.
 */
#include "redactor.h"

#include <regex.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned char u8;

enum kind {
    PRIVATE_KEY,
    ANTHROPIC_KEY,
    OPENAI_KEY,
    AWS_ACCESS_KEY,
    AWS_SECRET_KEY,
    GITHUB_TOKEN,
    SLACK_WEBHOOK,
    SLACK_TOKEN,
    BEARER_TOKEN,
    URL_PASSWORD,
    EMAIL,
};

const char *const BUILTIN_NAMES[BUILTIN_COUNT] = {
    "private-key",   "anthropic-key", "openai-key",  "aws-access-key",
    "aws-secret-key", "github-token", "slack-webhook", "slack-token",
    "bearer-token",  "url-password",  "email",
};

/** Where a kind matched: the match, and the part replaced. */
typedef struct hit {
    size_t start, end;
    size_t secret_start, secret_end;
} hit;

/* ---- Character classes ----------------------------------------------------- */

static bool is_digit(u8 b) { return b >= '0' && b <= '9'; }
static bool is_upper(u8 b) { return b >= 'A' && b <= 'Z'; }
static bool is_lower(u8 b) { return b >= 'a' && b <= 'z'; }
static bool is_alpha(u8 b) { return is_upper(b) || is_lower(b); }
static bool is_alnum(u8 b) { return is_alpha(b) || is_digit(b); }
/** ASCII letters, digits, `_` and `-`: what may not stand before a token. */
static bool is_word(u8 b) { return is_alnum(b) || b == '_' || b == '-'; }
static bool is_upper_digit(u8 b) { return is_upper(b) || is_digit(b); }
static bool is_alnum_underscore(u8 b) { return is_alnum(b) || b == '_'; }
static bool is_alnum_dash(u8 b) { return is_alnum(b) || b == '-'; }
static bool is_base64(u8 b) { return is_alnum(b) || b == '+' || b == '/' || b == '='; }
/** `[A-Za-z0-9+/=:, \t\r\n\\-]`: a PEM body (base64, headers, escaped breaks). */
static bool is_pem_body(u8 b) {
    return is_base64(b) || b == ':' || b == ',' || b == ' ' || b == '\t' || b == '\r' ||
           b == '\n' || b == '\\' || b == '-';
}
static bool is_aws_secret(u8 b) { return is_alnum(b) || b == '/' || b == '+'; }
static bool is_webhook_path(u8 b) { return is_alnum(b) || b == '_' || b == '/' || b == '-'; }
static bool is_bearer(u8 b) {
    return is_alnum(b) || b == '.' || b == '_' || b == '~' || b == '+' || b == '/' || b == '-';
}
static bool is_space_tab(u8 b) { return b == ' ' || b == '\t'; }
static bool is_ascii_space(u8 b) {
    return b == '\t' || b == '\n' || b == 0x0B || b == 0x0C || b == '\r' || b == ' ';
}
/** `[^\t\n\x0B\x0C\r :/?#@\[\]"'<>\\`]`: a URL's user name. */
static bool is_url_user(u8 b) {
    return b == 0 || (!is_ascii_space(b) && !strchr(":/?#@[]\"'<>\\`", b));
}
/** `[^\t\n\x0B\x0C\r /?#"'<>\\`]`: a URL's password (`:` and `@` allowed). */
static bool is_url_password(u8 b) {
    return b == 0 || (!is_ascii_space(b) && !strchr("/?#\"'<>\\`", b));
}
static bool is_email_local(u8 b) {
    return is_alnum(b) || b == '.' || b == '_' || b == '%' || b == '+' || b == '-';
}

/** The end of the run of `pred` characters from `p`. */
static size_t run(const u8 *t, size_t len, size_t p, bool (*pred)(u8)) {
    while (p < len && pred(t[p])) p++;
    return p;
}

static bool starts(const u8 *t, size_t len, size_t p, const char *lit) {
    size_t n = strlen(lit);
    return p <= len && len - p >= n && memcmp(t + p, lit, n) == 0;
}

static bool starts_nocase(const u8 *t, size_t len, size_t p, const char *lit) {
    size_t n = strlen(lit);
    if (p > len || len - p < n) return false;
    for (size_t k = 0; k < n; k++) {
        u8 b = t[p + k];
        if (is_upper(b)) b = (u8)(b - 'A' + 'a');
        if (b != (u8)lit[k]) return false;
    }
    return true;
}

/** At least one ASCII digit, one uppercase and one lowercase letter. */
static bool is_mixed(const u8 *t, size_t from, size_t to) {
    bool d = false, u = false, l = false;
    for (size_t k = from; k < to; k++) {
        d |= is_digit(t[k]);
        u |= is_upper(t[k]);
        l |= is_lower(t[k]);
    }
    return d && u && l;
}

static bool has_digit(const u8 *t, size_t from, size_t to) {
    for (size_t k = from; k < to; k++) {
        if (is_digit(t[k])) return true;
    }
    return false;
}

/** At least 16 characters of `A-Za-z0-9+/=` in a row. */
static bool has_base64_run(const u8 *t, size_t from, size_t to) {
    size_t n = 0;
    for (size_t k = from; k < to; k++) {
        n = is_base64(t[k]) ? n + 1 : 0;
        if (n >= 16) return true;
    }
    return false;
}

/* ---- The built-in kinds ---------------------------------------------------- */

/*
 * `-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----` (or END): the end of
 * the marker at `p`, or 0. The words cannot hold `-`, so at most one place
 * can end the marker and the first one found is the pattern's.
 */
static size_t pem_marker(const u8 *t, size_t len, size_t p, const char *open) {
    if (!starts(t, len, p, open)) return 0;
    p += strlen(open);
    for (;;) {
        if (starts(t, len, p, "PRIVATE KEY BLOCK-----")) return p + 22;
        if (starts(t, len, p, "PRIVATE KEY-----")) return p + 16;
        size_t q = run(t, len, p, is_upper_digit);
        if (q == p || q >= len || t[q] != ' ') return 0;
        p = q + 1;
    }
}

/*
 * \A-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:[A-Za-z0-9+/=:, \t\r\n\\-]*?
 *   -----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|(?:\r?\n|(?:\\r)?\\n)[A-Za-z0-9+/=:, \t\r\n\\-]*)
 */
static bool match_private_key(const u8 *t, size_t len, size_t at, hit *h) {
    size_t m = pem_marker(t, len, at, "-----BEGIN ");
    if (!m) return false;
    size_t end = 0;
    /* The shortest body that reaches an END marker. */
    for (size_t j = m;; j++) {
        size_t e = pem_marker(t, len, j, "-----END ");
        if (e) {
            end = e;
            break;
        }
        if (j >= len || !is_pem_body(t[j])) break;
    }
    if (!end) {
        /* Cut off before its END: a line break, then the whole body. */
        size_t q = 0;
        if (starts(t, len, m, "\n")) q = m + 1;
        else if (starts(t, len, m, "\r\n")) q = m + 2;
        else if (starts(t, len, m, "\\n")) q = m + 2;
        else if (starts(t, len, m, "\\r\\n")) q = m + 4;
        if (!q) return false;
        end = run(t, len, q, is_pem_body);
    }
    if (!has_base64_run(t, at, end)) return false;
    *h = (hit){at, end, at, end};
    return true;
}

/* \Ask-ant-[A-Za-z0-9_-]{16,} and \Ask-[A-Za-z0-9_-]{20,}, the run mixed. */
static bool match_sk(const u8 *t, size_t len, size_t at, size_t prefix, size_t min, hit *h) {
    size_t r = run(t, len, at + prefix, is_word);
    if (r - (at + prefix) < min || !is_mixed(t, at + prefix, r)) return false;
    *h = (hit){at, r, at, r};
    return true;
}

/* \A(?:AKIA|ASIA)[A-Z0-9]{16}, not followed by a letter or digit. */
static bool match_aws_access(const u8 *t, size_t len, size_t at, hit *h) {
    if (!starts(t, len, at, "AKIA") && !starts(t, len, at, "ASIA")) return false;
    if (len - at < 20 || run(t, at + 20, at + 4, is_upper_digit) != at + 20) return false;
    if (at + 20 < len && is_alnum(t[at + 20])) return false;
    *h = (hit){at, at + 20, at, at + 20};
    return true;
}

/* An optional `\\?["']` at `*p`. */
static void skip_quote(const u8 *t, size_t len, size_t *p) {
    if (*p + 1 < len && t[*p] == '\\' && (t[*p + 1] == '"' || t[*p + 1] == '\'')) *p += 2;
    else if (*p < len && (t[*p] == '"' || t[*p] == '\'')) *p += 1;
}

/*
 * \A(?i:secret_?access_?key)(?:\\?["'])?[ \t]*(?:=>|:|=)[ \t]*(?:\\?["'])?(?P<secret>[A-Za-z0-9/+]{40}),
 * not followed by one of `A-Za-z0-9/+=`.
 */
static bool match_aws_secret(const u8 *t, size_t len, size_t at, hit *h) {
    size_t p = at;
    if (!starts_nocase(t, len, p, "secret")) return false;
    p += 6;
    if (p < len && t[p] == '_') p++;
    if (!starts_nocase(t, len, p, "access")) return false;
    p += 6;
    if (p < len && t[p] == '_') p++;
    if (!starts_nocase(t, len, p, "key")) return false;
    p += 3;
    skip_quote(t, len, &p);
    p = run(t, len, p, is_space_tab);
    if (starts(t, len, p, "=>")) p += 2;
    else if (p < len && (t[p] == ':' || t[p] == '=')) p += 1;
    else return false;
    p = run(t, len, p, is_space_tab);
    skip_quote(t, len, &p);
    if (len - p < 40 || run(t, p + 40, p, is_aws_secret) != p + 40) return false;
    if (p + 40 < len && (is_aws_secret(t[p + 40]) || t[p + 40] == '=')) return false;
    *h = (hit){at, p + 40, p, p + 40};
    return true;
}

/* \A(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}) */
static bool match_github(const u8 *t, size_t len, size_t at, hit *h) {
    size_t r;
    if (len - at >= 4 && t[at] == 'g' && t[at + 1] == 'h' && strchr("pousr", t[at + 2]) &&
        t[at + 2] && t[at + 3] == '_') {
        r = run(t, len, at + 4, is_alnum);
        if (r - (at + 4) < 30) return false;
    } else if (starts(t, len, at, "github_pat_")) {
        r = run(t, len, at + 11, is_alnum_underscore);
        if (r - (at + 11) < 22) return false;
    } else {
        return false;
    }
    *h = (hit){at, r, at, r};
    return true;
}

/* \Ahooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9_/-]{20,}) */
static bool match_slack_webhook(const u8 *t, size_t len, size_t at, hit *h) {
    if (!starts(t, len, at, "hooks.slack.com/")) return false;
    size_t p = at + 16;
    if (starts(t, len, p, "services/")) p += 9;
    else if (starts(t, len, p, "workflows/")) p += 10;
    else if (starts(t, len, p, "triggers/")) p += 9;
    else return false;
    size_t r = run(t, len, p, is_webhook_path);
    if (r - p < 20) return false;
    *h = (hit){at, r, p, r};
    return true;
}

/* \A(?:xox[a-z]|xapp)-[A-Za-z0-9-]{10,}, holding a digit. */
static bool match_slack_token(const u8 *t, size_t len, size_t at, hit *h) {
    bool xox = len - at >= 5 && starts(t, len, at, "xox") && is_lower(t[at + 3]) && t[at + 4] == '-';
    if (!xox && !starts(t, len, at, "xapp-")) return false;
    size_t r = run(t, len, at + 5, is_alnum_dash);
    if (r - (at + 5) < 10 || !has_digit(t, at, r)) return false;
    *h = (hit){at, r, at, r};
    return true;
}

/* \A(?i:bearer)[ \t]+(?P<secret>[A-Za-z0-9._~+/-]+=*): at least 16, with a digit. */
static bool match_bearer(const u8 *t, size_t len, size_t at, hit *h) {
    if (!starts_nocase(t, len, at, "bearer")) return false;
    size_t s = run(t, len, at + 6, is_space_tab);
    if (s == at + 6) return false;
    size_t r = run(t, len, s, is_bearer);
    if (r == s) return false;
    while (r < len && t[r] == '=') r++;
    if (r - s < 16 || !has_digit(t, s, r)) return false;
    *h = (hit){at, r, s, r};
    return true;
}

/*
 * \A://[^\t\n\x0B\x0C\r :/?#@\[\]"'<>\\`]*:(?P<secret>[^\t\n\x0B\x0C\r /?#"'<>\\`]+)@:
 * the password runs to the last `@` of its run; it does not start with `$` or `{`.
 */
static bool match_url_password(const u8 *t, size_t len, size_t at, hit *h) {
    if (!starts(t, len, at, "://")) return false;
    size_t p = run(t, len, at + 3, is_url_user);
    if (p >= len || t[p] != ':') return false;
    size_t s = p + 1;
    size_t r = run(t, len, s, is_url_password);
    size_t a = r;
    while (a > s + 1 && t[a - 1] != '@') a--;
    if (a <= s + 1) return false;
    a--; /* the `@` */
    if (t[s] == '$' || t[s] == '{') return false;
    *h = (hit){at, a + 1, s, a};
    return true;
}

/*
 * \A[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}: the
 * engine backs off label by label, so the match ends in the last label (not
 * the first) that starts with two letters, after its leading letters.
 */
static bool match_email(const u8 *t, size_t len, size_t at, hit *h) {
    size_t r = run(t, len, at, is_email_local);
    if (r == at || r >= len || t[r] != '@') return false;
    size_t p = run(t, len, r + 1, is_alnum_dash);
    if (p == r + 1) return false;
    size_t end = 0;
    while (p + 1 < len && t[p] == '.' && is_alnum_dash(t[p + 1])) {
        size_t label = p + 1;
        size_t letters = run(t, len, label, is_alpha);
        if (letters - label >= 2) end = letters;
        p = run(t, len, label, is_alnum_dash);
    }
    if (!end) return false;
    *h = (hit){at, end, at, end};
    return true;
}

/** The bytes a kind's match can start with (email: none, see the scan). */
static const char *const FIRST_BYTES[BUILTIN_COUNT] = {
    "-", "s", "s", "A", "sS", "g", "h", "x", "bB", ":", "",
};

/** Whether the character before a match may not be a word character. */
static bool needs_boundary(int kind) {
    return kind == ANTHROPIC_KEY || kind == OPENAI_KEY || kind == AWS_ACCESS_KEY ||
           kind == GITHUB_TOKEN || kind == SLACK_TOKEN || kind == BEARER_TOKEN;
}

/** The kind's match at `at`; `prev` is the character before it as it stands
 *  in the output (the placeholder's last one right after a redaction), or -1. */
static bool match_at(int kind, const u8 *t, size_t len, size_t at, int prev, hit *h) {
    if (needs_boundary(kind) && prev >= 0 && is_word((u8)prev)) return false;
    switch (kind) {
    case PRIVATE_KEY: return match_private_key(t, len, at, h);
    case ANTHROPIC_KEY: return starts(t, len, at, "sk-ant-") && match_sk(t, len, at, 7, 16, h);
    case OPENAI_KEY:
        return starts(t, len, at, "sk-") && !starts(t, len, at, "sk-ant-") &&
               match_sk(t, len, at, 3, 20, h);
    case AWS_ACCESS_KEY: return match_aws_access(t, len, at, h);
    case AWS_SECRET_KEY: return match_aws_secret(t, len, at, h);
    case GITHUB_TOKEN: return match_github(t, len, at, h);
    case SLACK_WEBHOOK: return match_slack_webhook(t, len, at, h);
    case SLACK_TOKEN: return match_slack_token(t, len, at, h);
    case BEARER_TOKEN: return match_bearer(t, len, at, h);
    case URL_PASSWORD: return match_url_password(t, len, at, h);
    case EMAIL: return match_email(t, len, at, h);
    }
    return false;
}

/* ---- Extra patterns (POSIX ERE) -------------------------------------------- */

typedef struct extra {
    ahg_str name;
    regex_t regex;
    /** The group replaced: its number, or 0 for the whole match. */
    size_t secret_group;
} extra;

struct redactor {
    int builtins[BUILTIN_COUNT];
    size_t builtins_len;
    extra *extras;
    size_t extras_len;
    /** Per kind (built-in ones, then extras): the placeholder. */
    ahg_str *placeholders;
    /** For each byte, a bit for each of `builtins` that may start with it. */
    uint16_t first[256];
    bool email;
};

/*
 * Turns a pattern in the Rust/Python/JavaScript syntax into POSIX ERE, or
 * says why it cannot. Accepted: literals, `.`, bracket expressions, `*`,
 * `+`, `?`, `{m,n}`, `|`, `^`, `$`, groups; `(?:...)`; the group
 * `(?P<secret>...)` or `(?<secret>...)`; `\d \w \s \D \W \S` (ASCII); `\t \n
 * \r`; a backslash before punctuation. Refused: look-around, `\b`, flags
 * such as `(?i)`, lazy quantifiers, back-references, other named groups.
 * POSIX matching is leftmost-longest where the Rust engine is
 * leftmost-first: patterns whose alternatives overlap may match differently.
 */
static char *translate_pattern(ahg_str p, size_t *secret_group, const char **why) {
    ahg_buf out = {0};
    size_t groups = 0;
    bool in_bracket = false;
    *secret_group = 0;
    for (size_t i = 0; i < p.len; i++) {
        char c = p.ptr[i];
        char next = i + 1 < p.len ? p.ptr[i + 1] : 0;
        if (in_bracket) {
            if (c == ']' && !(out.len && (out.ptr[out.len - 1] == '[' ||
                                          (out.len > 1 && out.ptr[out.len - 1] == '^' &&
                                           out.ptr[out.len - 2] == '[')))) {
                in_bracket = false;
                ahg_buf_append(&out, "]", 1);
                continue;
            }
            if (c == '\\') {
                i++;
                switch (next) {
                case 'd': ahg_buf_append_str(&out, ahg_cstr("0-9")); continue;
                case 'w': ahg_buf_append_str(&out, ahg_cstr("A-Za-z0-9_")); continue;
                case 's': ahg_buf_append_str(&out, ahg_cstr(" \t\n\v\f\r")); continue;
                case 't': ahg_buf_append(&out, "\t", 1); continue;
                case 'n': ahg_buf_append(&out, "\n", 1); continue;
                case 'r': ahg_buf_append(&out, "\r", 1); continue;
                case ']': case '-': case '^': case '[': case 0:
                    *why = "an escaped `]`, `-`, `^` or `[` inside brackets (put `]` first and `-` last instead)";
                    goto fail;
                default:
                    if (is_alnum((u8)next)) {
                        *why = "an escape inside brackets other than \\d, \\w, \\s, \\t, \\n, \\r";
                        goto fail;
                    }
                    ahg_buf_append(&out, &next, 1);
                    continue;
                }
            }
            ahg_buf_append(&out, &c, 1);
            continue;
        }
        switch (c) {
        case '[':
            in_bracket = true;
            ahg_buf_append(&out, "[", 1);
            if (next == '^') {
                ahg_buf_append(&out, "^", 1);
                i++;
            }
            continue;
        case '(':
            groups++;
            if (next == '?') {
                ahg_str rest = {p.ptr + i, p.len - i};
                if (rest.len >= 3 && memcmp(rest.ptr, "(?:", 3) == 0) {
                    i += 2;
                } else if (rest.len >= 11 && memcmp(rest.ptr, "(?P<secret>", 11) == 0) {
                    *secret_group = groups;
                    i += 10;
                } else if (rest.len >= 10 && memcmp(rest.ptr, "(?<secret>", 10) == 0) {
                    *secret_group = groups;
                    i += 9;
                } else {
                    *why = "a `(?` construct other than (?:...) and (?P<secret>...) (no flags, look-around or other names)";
                    goto fail;
                }
            }
            ahg_buf_append(&out, "(", 1);
            continue;
        case '*':
        case '+':
        case '?':
        case '}':
            ahg_buf_append(&out, &c, 1);
            if (next == '?') {
                *why = "a lazy quantifier (POSIX has none)";
                goto fail;
            }
            continue;
        case '\\':
            i++;
            switch (next) {
            case 'd': ahg_buf_append_str(&out, ahg_cstr("[0-9]")); continue;
            case 'D': ahg_buf_append_str(&out, ahg_cstr("[^0-9]")); continue;
            case 'w': ahg_buf_append_str(&out, ahg_cstr("[A-Za-z0-9_]")); continue;
            case 'W': ahg_buf_append_str(&out, ahg_cstr("[^A-Za-z0-9_]")); continue;
            case 's': ahg_buf_append_str(&out, ahg_cstr("[ \t\n\v\f\r]")); continue;
            case 'S': ahg_buf_append_str(&out, ahg_cstr("[^ \t\n\v\f\r]")); continue;
            case 't': ahg_buf_append(&out, "\t", 1); continue;
            case 'n': ahg_buf_append(&out, "\n", 1); continue;
            case 'r': ahg_buf_append(&out, "\r", 1); continue;
            case 0: *why = "a trailing backslash"; goto fail;
            default:
                if (is_alnum((u8)next)) {
                    *why = "an escape POSIX lacks (\\b, \\A, \\z, \\x, back-references, classes "
                           "other than \\d \\w \\s)";
                    goto fail;
                }
                ahg_buf_append(&out, "\\", 1);
                ahg_buf_append(&out, &next, 1);
                continue;
            }
        default: ahg_buf_append(&out, &c, 1); continue;
        }
    }
    if (in_bracket) {
        *why = "unclosed character class";
        goto fail;
    }
    ahg_buf_append(&out, "", 1); /* NUL */
    return out.ptr;
fail:
    ahg_buf_free(&out);
    return NULL;
}

/** What regcomp's error code means (regerror would pull in stdio, and with
 *  it WASI imports). */
static const char *regex_error(int code) {
    switch (code) {
    case REG_EBRACK: return "unclosed character class";
    case REG_EPAREN: return "open group without closing, or a `)` without its `(`";
    case REG_EBRACE: return "unclosed counted repetition `{`";
    case REG_BADBR: return "invalid counted repetition";
    case REG_ERANGE: return "invalid range in a character class";
    case REG_ECTYPE: return "unknown character class name";
    case REG_EESCAPE: return "invalid escape";
    case REG_ESUBREG: return "invalid back-reference";
    case REG_BADRPT: return "a repetition operator with nothing to repeat";
    case REG_ESPACE: return "out of memory";
    default: return "invalid pattern";
    }
}

/** The position of the character after the one at `at`. */
static size_t next_char(const u8 *t, size_t len, size_t at) {
    size_t next = at + 1;
    while (next < len && (t[next] & 0xC0) == 0x80) next++;
    return next;
}

/** An extra's next match, per scan. */
typedef struct next_hit {
    enum { UNKNOWN, AT, NEVER } state;
    hit hit;
} next_hit;

/*
 * The pattern's first usable match at or after `from` in `z` (the text, NUL
 * added): not empty, with a non-empty secret group. A NUL byte inside the
 * text ends what regexec sees; the search goes on after it.
 */
static next_hit extra_find(const extra *x, const char *z, size_t len, size_t from) {
    regmatch_t m[10];
    next_hit none = {NEVER, {0, 0, 0, 0}};
    while (from <= len) {
        int flags = from > 0 ? REG_NOTBOL : 0;
        if (regexec(&x->regex, z + from, 10, m, flags) != 0) {
            size_t nul = from + strlen(z + from);
            if (nul >= len) return none;
            from = nul + 1;
            continue;
        }
        size_t start = from + (size_t)m[0].rm_so, end = from + (size_t)m[0].rm_eo;
        regmatch_t s = m[x->secret_group];
        if (s.rm_so >= 0 && s.rm_eo > s.rm_so) {
            next_hit h = {AT, {start, end, from + (size_t)s.rm_so, from + (size_t)s.rm_eo}};
            return h;
        }
        from = next_char((const u8 *)z, len, start);
    }
    return none;
}

/* ---- The scan -------------------------------------------------------------- */

/** Receives each secret: its kind and where it is. */
typedef void (*found_fn)(void *ctx, size_t kind, size_t start, size_t end);

/** The first e-mail candidate with an `@` at or after `search`: where its
 *  local part starts (not before `from`) in `*start`, its `@` in `*at`. */
static bool next_email(const u8 *t, size_t len, size_t from, size_t search, size_t *start,
                       size_t *at) {
    while (search < len) {
        const u8 *a = memchr(t + search, '@', len - search);
        if (!a) return false;
        size_t i = (size_t)(a - t), s = i;
        while (s > from && is_email_local(t[s - 1])) s--;
        if (s < i) {
            *start = s;
            *at = i;
            return true;
        }
        search = i + 1;
    }
    return false;
}

/** Whether another built-in kind matches where a bearer token starts. */
static bool taken_by_another(const redactor *r, const u8 *t, size_t len, size_t at) {
    int prev = at > 0 ? t[at - 1] : -1;
    hit h;
    for (size_t k = 0; k < r->builtins_len; k++) {
        int kind = r->builtins[k];
        if (kind != BEARER_TOKEN && match_at(kind, t, len, at, prev, &h)) return true;
    }
    return false;
}

static bool is_placeholder(const redactor *r, size_t k, const u8 *t, size_t s, size_t e) {
    ahg_str p = r->placeholders[k];
    return e - s == p.len && memcmp(t + s, p.ptr, p.len) == 0;
}

/*
 * Calls `found` for each secret of `text`, left to right: at each position
 * the kinds are tried in priority order and the first that matches wins; the
 * scan goes on after its match, or at the next character. The rest is
 * finding the positions where a kind can start without trying each byte.
 */
static void scan(const redactor *r, ahg_str text, found_fn found, void *ctx) {
    const u8 *t = (const u8 *)text.ptr;
    size_t len = text.len;
    bool email_some = false;
    size_t email_start = 0, email_at = 0, email_from = 0;
    next_hit *extras = NULL;
    char *z = NULL; /* the text with a NUL, for regexec */
    if (r->extras_len) {
        extras = calloc(r->extras_len, sizeof *extras);
        z = malloc(len + 1);
        if (!extras || !z) abort();
        if (len) memcpy(z, t, len);
        z[len] = 0;
    }
    bool last_some = false;
    size_t last_end = 0, last_kind = 0;
    size_t trigger = 0;
    while (trigger < len && !r->first[t[trigger]]) trigger++;
    size_t i = 0;
    while (i < len) {
        if (trigger < i) {
            trigger = i;
            while (trigger < len && !r->first[t[trigger]]) trigger++;
        }
        size_t c = trigger;
        if (r->email) {
            if (email_some && email_start < i) email_some = false;
            if (!email_some && email_from < len) {
                email_some = next_email(t, len, i, email_from > i ? email_from : i,
                                        &email_start, &email_at);
                email_from = email_some ? email_at : len;
            }
            if (email_some && email_start < c) c = email_start;
        }
        for (size_t x = 0; x < r->extras_len; x++) {
            if (extras[x].state == AT && extras[x].hit.start < i) extras[x].state = UNKNOWN;
            if (extras[x].state == UNKNOWN) extras[x] = extra_find(&r->extras[x], z, len, i);
            if (extras[x].state == AT && extras[x].hit.start < c) c = extras[x].hit.start;
        }
        if (c >= len) break;

        int prev = c > 0 ? t[c - 1] : -1;
        if (last_some && last_end == c) {
            ahg_str p = r->placeholders[last_kind];
            prev = p.len ? (u8)p.ptr[p.len - 1] : -1;
        }
        bool matched = false;
        size_t kind = 0;
        hit h;
        for (size_t k = 0; k < r->builtins_len && !matched; k++) {
            int b = r->builtins[k];
            bool candidate = b == EMAIL ? email_some && email_start == c
                                        : (r->first[t[c]] & (1u << k)) != 0;
            if (!candidate || !match_at(b, t, len, c, prev, &h)) continue;
            if (b == BEARER_TOKEN && taken_by_another(r, t, len, h.secret_start)) continue;
            if (!is_placeholder(r, k, t, h.secret_start, h.secret_end)) {
                matched = true;
                kind = k;
            }
        }
        for (size_t x = 0; x < r->extras_len && !matched; x++) {
            size_t k = r->builtins_len + x;
            if (extras[x].state == AT && extras[x].hit.start == c &&
                !is_placeholder(r, k, t, extras[x].hit.secret_start, extras[x].hit.secret_end)) {
                matched = true;
                kind = k;
                h = extras[x].hit;
            }
        }
        if (matched) {
            found(ctx, kind, h.secret_start, h.secret_end);
            last_some = true;
            last_end = h.secret_end;
            last_kind = kind;
            i = h.end;
        } else {
            /* An address that fails at the start of its local part fails
             * from every later start too: go past its `@`. */
            if (email_some && email_start == c) {
                email_some = false;
                email_from = email_at + 1;
            }
            i = next_char(t, len, c);
        }
    }
    free(extras);
    free(z);
}

/* ---- Redacting ------------------------------------------------------------- */

typedef struct redaction {
    const redactor *r;
    ahg_str text;
    ahg_buf *out;
    size_t copied;
    size_t *counts;
    bool any;
} redaction;

static void replace_secret(void *ctx, size_t kind, size_t start, size_t end) {
    redaction *d = ctx;
    ahg_buf_append(d->out, d->text.ptr + d->copied, start - d->copied);
    ahg_buf_append_str(d->out, d->r->placeholders[kind]);
    d->copied = end;
    d->any = true;
    if (d->counts) d->counts[kind]++;
}

bool redactor_redact(const redactor *r, ahg_str text, ahg_buf *out, size_t *counts) {
    redaction d = {r, text, out, 0, counts, false};
    size_t mark = out->len;
    scan(r, text, replace_secret, &d);
    if (!d.any) {
        out->len = mark;
        return false;
    }
    ahg_buf_append(out, text.ptr + d.copied, text.len - d.copied);
    return true;
}

size_t redactor_kind_count(const redactor *r) { return r->builtins_len + r->extras_len; }

ahg_str redactor_kind_name(const redactor *r, size_t k) {
    if (k < r->builtins_len) return ahg_cstr(BUILTIN_NAMES[r->builtins[k]]);
    return r->extras[k - r->builtins_len].name;
}

/* ---- Compiling a configuration --------------------------------------------- */

static int builtin_named(ahg_str name) {
    for (int k = 0; k < BUILTIN_COUNT; k++) {
        if (ahg_str_eq_c(name, BUILTIN_NAMES[k])) return k;
    }
    return -1;
}

static void first_secret(void *ctx, size_t kind, size_t start, size_t end) {
    (void)start;
    (void)end;
    size_t *first = ctx;
    if (*first == SIZE_MAX) *first = kind;
}

/** `placeholder` with every `{kind}` replaced by `kind`. */
static ahg_str fill_placeholder(ahg_str placeholder, ahg_str kind) {
    ahg_buf b = {0};
    for (size_t i = 0; i < placeholder.len;) {
        if (placeholder.len - i >= 6 && memcmp(placeholder.ptr + i, "{kind}", 6) == 0) {
            ahg_buf_append_str(&b, kind);
            i += 6;
        } else {
            ahg_buf_append(&b, placeholder.ptr + i, 1);
            i++;
        }
    }
    ahg_buf_append(&b, "", 1);
    ahg_str out = {b.ptr, b.len - 1};
    return out;
}

void redactor_free(redactor *r) {
    if (!r) return;
    for (size_t x = 0; x < r->extras_len; x++) regfree(&r->extras[x].regex);
    for (size_t k = 0; k < r->builtins_len + r->extras_len && r->placeholders; k++) {
        free((char *)r->placeholders[k].ptr);
    }
    free(r->placeholders);
    free(r->extras);
    free(r);
}

redactor *redactor_new(const redact_config *config, ahg_error *err) {
    redactor *r = calloc(1, sizeof *r);
    if (!r) abort();
    bool enabled[BUILTIN_COUNT] = {false};
    if (!config->has_kinds) {
        for (int k = 0; k < EMAIL; k++) enabled[k] = true;
    } else {
        for (size_t i = 0; i < config->kinds_len; i++) {
            int k = builtin_named(config->kinds[i]);
            if (k < 0) {
                ahg_bad_config(err,
                               "unknown kind \"%.*s\" in `kinds`; the kinds are private-key, "
                               "anthropic-key, openai-key, aws-access-key, aws-secret-key, "
                               "github-token, slack-webhook, slack-token, bearer-token, "
                               "url-password, email",
                               (int)config->kinds[i].len, config->kinds[i].ptr);
                goto fail;
            }
            enabled[k] = true;
        }
    }
    if (config->emails) enabled[EMAIL] = true;
    for (int k = 0; k < BUILTIN_COUNT; k++) {
        if (enabled[k]) r->builtins[r->builtins_len++] = k;
    }
    r->email = enabled[EMAIL];

    r->extras = calloc(config->extra_len + 1, sizeof *r->extras);
    if (!r->extras) abort();
    for (size_t i = 0; i < config->extra_len; i++) {
        ahg_str name = config->extra[i].name;
        bool valid = name.len > 0;
        for (size_t k = 0; k < name.len; k++) {
            u8 b = (u8)name.ptr[k];
            valid &= is_alnum(b) || b == '_' || b == '.' || b == '-';
        }
        if (!valid) {
            ahg_bad_config(err,
                           "extra pattern name \"%.*s\": use ASCII letters, digits, `-`, `_` and `.`",
                           (int)name.len, name.ptr);
            goto fail;
        }
        bool taken = builtin_named(name) >= 0;
        for (size_t x = 0; x < r->extras_len; x++) taken |= ahg_str_eq(r->extras[x].name, name);
        if (taken) {
            ahg_bad_config(err,
                           "extra pattern name \"%.*s\" is already taken; give each pattern its own name",
                           (int)name.len, name.ptr);
            goto fail;
        }
        extra *x = &r->extras[r->extras_len];
        const char *why = NULL;
        char *posix = translate_pattern(config->extra[i].pattern, &x->secret_group, &why);
        if (!posix) {
            ahg_bad_config(err, "extra pattern \"%.*s\" is not a valid regex for the C port: %s",
                           (int)name.len, name.ptr, why);
            goto fail;
        }
        int rc = regcomp(&x->regex, posix, REG_EXTENDED);
        free(posix);
        if (rc != 0) {
            ahg_bad_config(err, "extra pattern \"%.*s\" is not a valid regex: %s", (int)name.len,
                           name.ptr, regex_error(rc));
            goto fail;
        }
        x->name = name;
        r->extras_len++;
        if (x->secret_group > x->regex.re_nsub || x->secret_group > 9) {
            ahg_bad_config(err, "extra pattern \"%.*s\": the `secret` group must be one of the first 9",
                           (int)name.len, name.ptr);
            goto fail;
        }
        regmatch_t m[1];
        if (regexec(&x->regex, "", 1, m, 0) == 0) {
            ahg_bad_config(err,
                           "extra pattern \"%.*s\" matches the empty string; it must match at least one character",
                           (int)name.len, name.ptr);
            goto fail;
        }
    }
    if (r->builtins_len == 0 && r->extras_len == 0) {
        ahg_bad_config(err, "nothing to look for: `kinds` is empty, `emails` is false and there is no `extra` pattern");
        goto fail;
    }
    if (config->placeholder.len == 0) {
        ahg_bad_config(err, "`placeholder` is empty; a reader could not tell that something was removed");
        goto fail;
    }
    size_t kinds = r->builtins_len + r->extras_len;
    r->placeholders = calloc(kinds, sizeof *r->placeholders);
    if (!r->placeholders) abort();
    for (size_t k = 0; k < kinds; k++) {
        r->placeholders[k] = fill_placeholder(config->placeholder, redactor_kind_name(r, k));
    }
    for (size_t k = 0; k < r->builtins_len; k++) {
        for (const char *b = FIRST_BYTES[r->builtins[k]]; *b; b++) r->first[(u8)*b] |= 1u << k;
    }
    /* A placeholder that would itself be redacted would make a second run
     * change the text again. */
    for (size_t k = 0; k < kinds; k++) {
        size_t first = SIZE_MAX;
        scan(r, r->placeholders[k], first_secret, &first);
        if (first != SIZE_MAX) {
            ahg_str kind = redactor_kind_name(r, first);
            ahg_bad_config(err,
                           "`placeholder` \"%s\" would itself be redacted as %.*s; choose one that holds no secret",
                           r->placeholders[k].ptr, (int)kind.len, kind.ptr);
            goto fail;
        }
    }
    return r;
fail:
    redactor_free(r);
    return NULL;
}
