/*
 * Native tests of the C redact-secrets (gcc or clang, no WebAssembly):
 * the cases of the Rust crate's own tests, through the fake host.
 *
 *     processors/c/redact-secrets/test.sh
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_host_guest_testing.h"
#include "redactor.h"

static int failures;

#define CHECK(cond, ...)                                              \
    do {                                                              \
        if (!(cond)) {                                                \
            failures++;                                               \
            fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                             \
            fprintf(stderr, "\n");                                    \
        }                                                             \
    } while (0)

/* Fake secrets, built from pieces so that no scanner takes this file for a leak. */
static char *cat(const char *a, const char *b, const char *c) {
    size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
    char *s = malloc(n);
    snprintf(s, n, "%s%s%s", a, b, c);
    return s;
}
static char *repeat(const char *s, int n) {
    char *out = calloc(strlen(s) * (size_t)n + 1, 1);
    for (int i = 0; i < n; i++) strcat(out, s);
    return out;
}

static char *openai, *anthropic, *aws_id, *aws_secret, *github, *jwt, *pem_rsa;

static void make_fakes(void) {
    char *r = repeat("Xy7kP2", 8);
    openai = cat("sk-", "proj-", r);
    char *a = repeat("Ab9_c-D", 13);
    anthropic = cat("sk-ant-", "api03-", a);
    aws_id = cat("AKIA", "IOSFODNN7", "EXAMPLE");
    aws_secret = cat("wJalrXUtnFEMI", "/K7MDENG/bPxRfiCY", "EXAMPLEKEY");
    char *g = repeat("A1b2C3d4E5", 3);
    github = cat("ghp_", g, "f6G7h8");
    free(r);
    free(a);
    free(g);
    jwt = cat("ey", "JhbGciOiJIUzI1NiJ9.", "eyJzdWIiOiIxMjM0NTY3ODkwIn0");
    pem_rsa = cat("-----BEGIN RSA PRIVATE KEY-----\n",
                  "MIIEowIBAAKCAQEAx4ZV3i9gHqM3b1sJ\nq8Lr6dN5vY0Zt2wQ==\n",
                  "-----END RSA PRIVATE KEY-----");
}

/** `text` redacted with `config`, as a malloc'd C string ("" = unchanged: NULL). */
static char *redact(const char *config, const char *text) {
    ahg_message m = ahg_message_new(AHG_ROLE_USER, ahg_cstr(text));
    ahg_test_result r = ahg_test_run(config, &m, 1);
    char *out = NULL;
    if (r.error.kind != AHG_OK) {
        out = cat("ERROR: ", r.error.message, "");
    } else if (r.items[0].kind == AHG_ITEM_REPLACE) {
        ahg_str c = r.messages[0].content;
        out = calloc(c.len + 1, 1);
        memcpy(out, c.ptr, c.len);
    }
    ahg_test_result_free(&r);
    return out;
}

static void expect(const char *config, const char *text, const char *want) {
    char *got = redact(config, text);
    CHECK(got ? want && strcmp(got, want) == 0 : want == NULL, "%s\n  gave %s\n  want %s", text,
          got ? got : "(unchanged)", want ? want : "(unchanged)");
    free(got);
}

static void test_kinds(void) {
    char buf[1024], want[1024];
    snprintf(buf, sizeof buf, "my key is %s ok", openai);
    expect("{}", buf, "my key is [REDACTED:openai-key] ok");
    snprintf(buf, sizeof buf, "a %s b %s", anthropic, openai);
    expect("{}", buf, "a [REDACTED:anthropic-key] b [REDACTED:openai-key]");
    /* An Anthropic key is never typed openai-key, even when only that kind runs. */
    snprintf(want, sizeof want, "a %s b [REDACTED:openai-key]", anthropic);
    expect("{\"kinds\": [\"openai-key\"]}", buf, want);
    snprintf(buf, sizeof buf, "AWS_ACCESS_KEY_ID=%s\n", aws_id);
    expect("{}", buf, "AWS_ACCESS_KEY_ID=[REDACTED:aws-access-key]\n");
    snprintf(buf, sizeof buf, "\\\"SecretAccessKey\\\": \\\"%s\"", aws_secret);
    expect("{}", buf, "\\\"SecretAccessKey\\\": \\\"[REDACTED:aws-secret-key]\"");
    snprintf(buf, sizeof buf, "'aws_secret_access_key' => '%s'", aws_secret);
    expect("{}", buf, "'aws_secret_access_key' => '[REDACTED:aws-secret-key]'");
    snprintf(buf, sizeof buf, "value %s", aws_secret);
    expect("{}", buf, NULL);
    snprintf(buf, sizeof buf, "Bearer %s", github);
    expect("{}", buf, "Bearer [REDACTED:github-token]");
    snprintf(buf, sizeof buf, "-H 'Authorization: BEARER %s'", jwt);
    expect("{}", buf, "-H 'Authorization: BEARER [REDACTED:bearer-token]'");
    snprintf(buf, sizeof buf, "Authorization: Bearer %s", openai);
    expect("{}", buf, "Authorization: Bearer [REDACTED:openai-key]");
    expect("{\"kinds\": [\"bearer-token\"]}", buf, "Authorization: Bearer [REDACTED:bearer-token]");
    expect("{}", "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
           "https://hooks.slack.com/services/[REDACTED:slack-webhook]");
    expect("{}", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
           "[REDACTED:slack-token]");
    expect("{}", "mysql://root:pa:ss@localhost/db", "mysql://root:[REDACTED:url-password]@localhost/db");
    expect("{}", "https://me:p@ss@w0rd@example.com/x", "https://me:[REDACTED:url-password]@example.com/x");
    expect("{}", "redis://:hunter2@[::1]:6379", "redis://:[REDACTED:url-password]@[::1]:6379");
    /* Private keys: whole, escaped in JSON, cut off, in prose. */
    snprintf(buf, sizeof buf, "cat id:\n%s\n$ ", pem_rsa);
    expect("{}", buf, "cat id:\n[REDACTED:private-key]\n$ ");
    const char *end = strstr(pem_rsa, "-----END");
    snprintf(buf, sizeof buf, "%.*s... (truncated)", (int)(end - pem_rsa), pem_rsa);
    expect("{}", buf, "[REDACTED:private-key]... (truncated)");
    expect("{}", "It starts with -----BEGIN OPENSSH PRIVATE KEY----- and ends with -----END OPENSSH PRIVATE KEY-----.", NULL);
    snprintf(buf, sizeof buf, "%s%s", pem_rsa, github);
    expect("{}", buf, "[REDACTED:private-key][REDACTED:github-token]");
    /* Emails only when asked; a URL password comes first. */
    expect("{}", "write to ops@example.com", NULL);
    expect("{\"emails\": true}", "write to ops@example.com", "write to [REDACTED:email]");
    expect("{\"kinds\": [\"email\"]}", "write to ops@example.com", "write to [REDACTED:email]");
    expect("{\"emails\": true}", "ftp://bob:pw12@files.example.com and bob@example.com",
           "ftp://bob:[REDACTED:url-password]@files.example.com and [REDACTED:email]");
    expect("{\"emails\": true}", "user@localhost, @types/node, pkg@1.2.3, @@, a@b.c, x@-", NULL);
    expect("{\"emails\": true}", "a@b.example.com2x", "[REDACTED:email]2x");
    /* Custom placeholders. */
    snprintf(buf, sizeof buf, "%s %s", github, aws_id);
    expect("{\"placeholder\": \"[REDACTED]\"}", buf, "[REDACTED] [REDACTED]");
    expect("{\"placeholder\": \"<secret {kind}/{kind}>\"}", github, "<secret github-token/github-token>");
    /* Extra patterns (POSIX ERE) after the built-in kinds. */
    snprintf(want, sizeof want, "%s", "use [REDACTED:acme-token] with PIN [REDACTED:pin] and é [REDACTED:acme-token]");
    expect("{\"extra\": [{\"name\": \"acme-token\", \"pattern\": \"acme_[a-z0-9]{8,}\"},"
           "{\"name\": \"pin\", \"pattern\": \"PIN:? *(?P<secret>[0-9]{4,6})\"}]}",
           "use acme_0123abcd9 with PIN 12345 and é acme_zzzzzzzz", want);
    /* Things that are not secrets. */
    const char *clean[] = {
        "task-sk-list and sk-learn, risk-assessment-for-the-year-2024",
        "sk-spinner-container-wrapper-2024 is a CSS class",
        "sk-abcdefghijklmnopqrstuvwxyz0123456789 (no uppercase: not a key)",
        "AKIAIOSFODNN7EXAMPLE2 is too long, xAKIAIOSFODNN7EXAMPLE is glued",
        "the bearer of bad news; a Bearer token; Bearer YOUR_API_KEY_HERE; Bearer ${TOKEN}",
        "xoxb-your-token-here and xapp-placeholder",
        "http://localhost:8080/path and https://example.com:443/a@b",
        "postgres://app:${DB_PASSWORD}@db/app and redis://:{password}@cache",
        "",
        "ünïcödé ☃ text without secrets: 東京",
    };
    for (size_t i = 0; i < sizeof clean / sizeof *clean; i++) expect("{}", clean[i], NULL);
}

static void test_idempotent(void) {
    const char *samples[] = {openai, anthropic, aws_id, github, pem_rsa, "postgres://u:pw@db",
                             "a.b@example.org", "plain words"};
    const char *seps[] = {"", " ", "\n", "-", "_", "/", "@", ":", "x"};
    const char *configs[] = {"{\"emails\": true}", "{\"emails\": true, \"placeholder\": \"***\"}",
                             "{\"emails\": true, \"placeholder\": \"<{kind}>\"}"};
    size_t n = sizeof samples / sizeof *samples;
    for (size_t c = 0; c < 3; c++) {
        for (size_t a = 0; a < n; a++) {
            for (size_t b = 0; b < n; b++) {
                for (size_t s = 0; s < sizeof seps / sizeof *seps; s++) {
                    char *text = cat(samples[a], seps[s], samples[b]);
                    char *once = redact(configs[c], text);
                    if (once) {
                        char *twice = redact(configs[c], once);
                        CHECK(twice == NULL, "%s: %s gave %s, then %s", configs[c], text, once, twice);
                        free(twice);
                    }
                    free(once);
                    free(text);
                }
            }
        }
    }
}

static void expect_bad(const char *config, const char *needle) {
    char *got = redact(config, "x");
    CHECK(got && strncmp(got, "ERROR: ", 7) == 0 && strstr(got, needle), "%s: %s (want %s)", config,
          got ? got : "(no error)", needle);
    free(got);
}

static void test_bad_configs(void) {
    expect_bad("{\"kinds\": [\"openai-key\", \"passwords\"]}", "unknown kind \"passwords\"");
    expect_bad("{\"extra\": [{\"name\": \"acme\", \"pattern\": \"acme_[a-z\"}]}", "unclosed character class");
    expect_bad("{\"extra\": [{\"name\": \"ticket\", \"pattern\": \"(TICKET-[0-9]+\"}]}", "\"ticket\" is not a valid regex");
    expect_bad("{\"extra\": [{\"name\": \"opt\", \"pattern\": \"x*\"}]}", "matches the empty string");
    expect_bad("{\"extra\": [{\"name\": \"email\", \"pattern\": \"x\"}]}", "already taken");
    expect_bad("{\"extra\": [{\"name\": \"a b\", \"pattern\": \"x\"}]}", "ASCII letters");
    expect_bad("{\"extra\": [{\"name\": \"x\"}]}", "missing field `pattern`");
    expect_bad("{\"extra\": [{\"name\": \"x\", \"pattern\": \"x\", \"flags\": 1}]}", "`extra[0]`: unknown field `flags`");
    expect_bad("{\"kinds\": []}", "nothing to look for");
    expect_bad("{\"placeholder\": \"\"}", "`placeholder` is empty");
    expect_bad("{\"email\": true}", "unknown field `email`");
    expect_bad("{\"emails\": \"yes\"}", "`emails`: expected a boolean, found a string");
    expect_bad("{\"kinds\": [1]}", "`kinds[0]`: expected a string");
    expect_bad("[1, 2]", "expected a JSON object, found an array");
    expect_bad("{\"emails\": tru}", "not valid JSON at line 1 column 12");
    char buf[256];
    snprintf(buf, sizeof buf, "{\"placeholder\": \"<%s>\"}", aws_id);
    expect_bad(buf, "would itself be redacted as aws-access-key");
}

static void test_messages_and_log(void) {
    char text[512];
    ahg_message in[4];
    snprintf(text, sizeof text, "my key is %s", openai);
    in[0] = ahg_message_new(AHG_ROLE_SYSTEM, ahg_cstr("You are helpful."));
    in[1] = ahg_message_new(AHG_ROLE_USER, ahg_cstr(text));
    /* Signed reasoning with a secret goes; opaque reasoning is not touched. */
    char reasoning[256];
    snprintf(reasoning, sizeof reasoning, "The user pasted %s", openai);
    in[2] = ahg_message_new(AHG_ROLE_ASSISTANT, ahg_cstr("Checking."));
    in[2].has_reasoning = true;
    in[2].reasoning.text = ahg_cstr(reasoning);
    in[2].reasoning.signature = ahg_some(ahg_cstr("sig"));
    ahg_part parts[2] = {{.kind = AHG_PART_TEXT, .text = ahg_cstr("nothing here")},
                         {.kind = AHG_PART_TEXT, .text = ahg_cstr(github)}};
    in[3] = ahg_message_new(AHG_ROLE_USER, ahg_cstr(""));
    in[3].parts = parts;
    in[3].parts_len = 2;
    ahg_test_log_clear();
    ahg_test_result r = ahg_test_run("{}", in, 4);
    CHECK(r.error.kind == AHG_OK, "%s", r.error.message);
    CHECK(r.len == 4, "%zu", r.len);
    CHECK(r.items[0].kind == AHG_ITEM_KEEP, "the system message is kept as it is");
    CHECK(ahg_str_eq_c(r.messages[1].content, "my key is [REDACTED:openai-key]"), "content");
    CHECK(!r.messages[2].has_reasoning, "signed reasoning with a secret is dropped");
    CHECK(ahg_str_eq_c(r.messages[3].parts[1].text, "[REDACTED:github-token]"), "text part");
    CHECK(ahg_str_eq_c(in[3].parts[1].text, github), "the input stays as it was");
    CHECK(ahg_test_log_count() == 2, "%zu log lines", ahg_test_log_count());
    CHECK(strcmp(ahg_test_log_line(0),
                 "redacted 3 secrets in 3 messages: openai-key 2, github-token 1") == 0,
          "%s", ahg_test_log_line(0));
    CHECK(strcmp(ahg_test_log_line(1),
                 "dropped the signed reasoning of 1 message: it held a secret and a signed block "
                 "cannot be edited") == 0,
          "%s", ahg_test_log_line(1));
    ahg_test_result_free(&r);

    ahg_test_log_clear();
    r = ahg_test_run(NULL, in, 1);
    CHECK(r.error.kind == AHG_OK && r.len == 1, "no configuration is the default");
    CHECK(strcmp(ahg_test_log_line(0), "no secrets found in 1 message") == 0, "%s", ahg_test_log_line(0));
    ahg_test_result_free(&r);
}

static void free_fakes(void) {
    char *all[] = {openai, anthropic, aws_id, aws_secret, github, jwt, pem_rsa};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]);
}

int main(void) {
    make_fakes();
    test_kinds();
    test_idempotent();
    test_bad_configs();
    test_messages_and_log();
    ahg_test_log_clear();
    free_fakes();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("redact-secrets (C): all checks passed\n");
    return 0;
}
