/*
 * redactor.h: the scan of redact-secrets, a port of
 * processors/redact-secrets (Rust). The rule it follows, kind by kind, is the
 * Rust crate's doc (processors/redact-secrets/src/lib.rs); this port matches
 * the eleven built-in kinds by hand, exactly as those patterns match
 * (leftmost-first, anchored at the position), and runs `extra` patterns with
 * POSIX extended regular expressions (see translate_pattern in redactor.c
 * for what is accepted).
 */
#ifndef REDACTOR_H
#define REDACTOR_H

#include "agent_host_guest.h"

/** A kind of secret the configuration adds. */
typedef struct extra_pattern {
    ahg_str name;
    ahg_str pattern;
} extra_pattern;

/** The configuration, as read from JSON. */
typedef struct redact_config {
    bool emails;
    /** Whether `kinds` was given; then `kinds` lists the built-in kinds that run. */
    bool has_kinds;
    ahg_str *kinds;
    size_t kinds_len;
    extra_pattern *extra;
    size_t extra_len;
    ahg_str placeholder;
} redact_config;

/** A compiled configuration. */
typedef struct redactor redactor;

/** Compiles `config`; NULL with `err` set (AHG_BAD_CONFIG) when it is wrong. */
redactor *redactor_new(const redact_config *config, ahg_error *err);
void redactor_free(redactor *r);

/** How many kinds run: the built-in ones, then the extra patterns. */
size_t redactor_kind_count(const redactor *r);
/** The name of kind `k`. */
ahg_str redactor_kind_name(const redactor *r, size_t k);

/**
 * Redacts `text`: returns whether it held a secret; if so, `out` holds the
 * redacted text (appended) and `counts[kind]` is incremented for each secret
 * (`counts` has redactor_kind_count() entries; may be NULL).
 */
bool redactor_redact(const redactor *r, ahg_str text, ahg_buf *out, size_t *counts);

/** The built-in kinds' names, in priority order. */
enum { BUILTIN_COUNT = 11 };
extern const char *const BUILTIN_NAMES[BUILTIN_COUNT];

#endif /* REDACTOR_H */
