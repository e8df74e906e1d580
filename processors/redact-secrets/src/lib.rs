//! `redact-secrets`: replaces API keys, tokens, private keys and passwords in
//! a history's text with typed placeholders such as `[REDACTED:openai-key]`.
//!
//! It scans every message's content, text parts, reasoning text and
//! tool-call arguments. A message with no secret is kept untouched; only the
//! messages where something was replaced go back to the host as
//! replacements. At the end it logs what it replaced, per kind, in the order
//! of the kinds below:
//!
//! ```text
//! redacted 3 secrets in 2 messages: openai-key 2, github-token 1
//! no secrets found in 120 messages
//! ```
//!
//! What it leaves out: image and file parts, tool names, tool-call ids and
//! metadata are not scanned; reasoning marked `redacted` (the provider's
//! opaque data) is not touched. Readable reasoning with a secret is redacted
//! in place when it has no signature; signed reasoning (Anthropic's thinking
//! blocks) cannot be edited without the provider refusing it, so when it holds
//! a secret the whole reasoning is dropped instead (and the log says so).
//! Nothing is decoded first: a secret inside
//! base64 or percent-encoding is not found.
//!
//! # Configuration
//!
//! All keys are optional; unknown keys are refused.
//!
//! - `emails` (default `false`): also redact e-mail addresses (kind `email`).
//! - `kinds` (default: every built-in kind except `email`): the built-in kinds
//!   that run, by name. An unknown name is a configuration error that lists
//!   the valid ones. `email` runs when it is listed here or `emails` is true.
//!   `[]` runs none, which leaves only `extra` (and `email`, with `emails`).
//! - `extra` (default none): more kinds, as a list of `{"name": ..., "pattern":
//!   ...}`. The name (ASCII letters, digits, `-`, `_`, `.`; not a built-in
//!   kind's and not used twice) goes into the placeholder and the log; the
//!   pattern is a regular expression in the syntax of Rust's `regex-lite`
//!   (the `regex` crate's syntax without Unicode classes: `\w`, `\d`, `\s`
//!   and `\b` are ASCII). If it has a group named `secret` (`(?P<secret>...)`),
//!   only that group is replaced; otherwise the whole match is. A pattern
//!   that does not compile is a configuration error naming the pattern and
//!   the compiler's message; so is one that matches the empty string.
//!   Extra patterns run after every built-in kind. A pattern that opens
//!   with literal text (ASCII letters, digits, `_`, `-`, maybe after `\b`)
//!   and has no `|` only runs where that text occurs; any other costs a
//!   regex search over every text (about 12 MB/s inside the sandbox: half a
//!   second for 15,000 messages), so give patterns a literal start.
//! - `placeholder` (default `"[REDACTED:{kind}]"`): what replaces a secret.
//!   Every `{kind}` in it becomes the kind's name; `{kind}` is optional
//!   (`"[REDACTED]"` hides which kind it was). It may not be empty, and it may
//!   not hold a secret itself (each kind's placeholder is scanned like any
//!   text when the configuration is read): both are configuration errors.
//!
//! ```sh
//! agent-host run --processor target/processors/redact-secrets.wasm \
//!     --processor-config '{"emails": true, "extra": [{"name": "acme-token", "pattern": "acme_[a-z0-9]{32}"}]}'
//! ```
//!
//! # The scan
//!
//! This is the rule any other implementation must follow to give the same
//! output. Each text is scanned on its own, from left to right. At each
//! position the enabled kinds are tried in the order listed below (the
//! extra patterns last, in their configured order); the first kind that
//! matches *at that position* wins. Its secret part is replaced by the
//! placeholder and the scan goes on at the end of its match; when no kind
//! matches, it goes on at the next character. So matches never overlap, and
//! the leftmost one wins whatever its kind.
//!
//! Terms used below:
//!
//! - A *word character* is an ASCII letter, an ASCII digit, `_` or `-`.
//! - *Boundary*: the character before the match is not a word character (or
//!   there is none). The character before is taken from the output: right
//!   after a replacement it is the placeholder's last character. That makes
//!   a second run see what the first one saw.
//! - *Mixed*: holds at least one ASCII digit, one uppercase and one
//!   lowercase ASCII letter.
//! - A match whose secret part already equals its kind's placeholder is not
//!   a match (`postgres://app:[REDACTED:url-password]@db` stays as it is).
//!
//! Together these make the processor idempotent: a second run with the same
//! configuration changes nothing. That holds for the default placeholder;
//! a custom one should start and end with a character that no pattern
//! takes in (`[`, `<`, `*`), and extra patterns must not match around it.
//!
//! Each pattern below is matched *at* the position: `\A` stands for that
//! (Python: `pattern.match(text, pos)` without the `\A`; JavaScript: the
//! sticky flag with `lastIndex = pos`). The match is the pattern's
//! leftmost-first (backtracking) one, as all three engines give it. The
//! syntax is the one Rust's `regex`, Python's `re` and JavaScript share:
//! ASCII classes only, `(?i:...)` is ASCII case-insensitive (spell it out as
//! `[Bb][Ee]...` where scoped flags are missing), `\x0B` and `\x0C` are the
//! vertical tab and form feed, and `(?P<secret>...)` (`(?<secret>...)` in
//! JavaScript) is the part replaced; without it the whole match is. Every
//! character a rule looks at is ASCII, so positions may count bytes, code
//! points or UTF-16 units alike.
//!
//! # The kinds
//!
//! 1. `private-key`: a PEM private key block. The BEGIN marker:
//!    `-----BEGIN `, optional words of `A-Z0-9` each followed by a space,
//!    `PRIVATE KEY`, an optional ` BLOCK` (PGP), `-----`. Then the body:
//!    characters of `A-Za-z0-9+/=:,-`, space, tab, carriage return, line
//!    feed and backslash (base64 lines, the headers of encrypted keys, and
//!    line breaks escaped as `\n` in a JSON or code string). If the body
//!    reaches an END marker (the same shape with `END`; labels need not
//!    agree), the block runs to the end of the first one. If not, and a line
//!    break follows the BEGIN marker right away (line feed or carriage
//!    return and line feed, or their escapes `\n` and `\r\n`), the block is
//!    the marker and the whole body after it (a key cut off before its END).
//!    Otherwise there is no match. The block must also hold at least 16
//!    characters of `A-Za-z0-9+/=` in a row (some key material), so markers
//!    quoted in prose or code are left alone. The whole block is replaced.
//!    ```text
//!    \A-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:[A-Za-z0-9+/=:, \t\r\n\\-]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|(?:\r?\n|(?:\\r)?\\n)[A-Za-z0-9+/=:, \t\r\n\\-]*)
//!    ```
//! 2. `anthropic-key`: `sk-ant-` and at least 16 characters of
//!    `A-Za-z0-9_-` (the longest run); boundary; the run after `sk-ant-` is
//!    mixed. The whole key is replaced.
//!    ```text
//!    \Ask-ant-[A-Za-z0-9_-]{16,}
//!    ```
//! 3. `openai-key`: `sk-` (not `sk-ant-`) and at least 20 characters of
//!    `A-Za-z0-9_-` (the longest run; this covers `sk-proj-`, `sk-svcacct-`
//!    and `sk-admin-` keys); boundary; the run after `sk-` is mixed. The
//!    whole key is replaced. An Anthropic key is never typed `openai-key`,
//!    even when `anthropic-key` is not enabled.
//!    ```text
//!    \Ask-[A-Za-z0-9_-]{20,}
//!    ```
//! 4. `aws-access-key`: `AKIA` or `ASIA` and exactly 16 characters of
//!    `A-Z0-9`; boundary; the character after (if any) is not an ASCII
//!    letter or digit. The whole id is replaced.
//!    ```text
//!    \A(?:AKIA|ASIA)[A-Z0-9]{16}
//!    ```
//! 5. `aws-secret-key`: a labelled secret access key. The label is
//!    `secret access key` with an optional `_` between the words, in any
//!    ASCII case (`aws_secret_access_key`, `AWS_SECRET_ACCESS_KEY`,
//!    `SecretAccessKey`; a prefix such as `aws_` is left as it is, no
//!    boundary); then an optional quote (`"` or `'`, maybe escaped as `\"`),
//!    spaces or tabs, `=>`, `:` or `=`, spaces or tabs, an optional quote;
//!    then exactly 40 characters of `A-Za-z0-9/+`, not followed by one of
//!    `A-Za-z0-9/+=`. Only the 40 characters are replaced.
//!    ```text
//!    \A(?i:secret_?access_?key)(?:\\?["'])?[ \t]*(?:=>|:|=)[ \t]*(?:\\?["'])?(?P<secret>[A-Za-z0-9/+]{40})
//!    ```
//! 6. `github-token`: `ghp_`, `gho_`, `ghu_`, `ghs_` or `ghr_` and at least
//!    30 characters of `A-Za-z0-9`, or `github_pat_` and at least 22
//!    characters of `A-Za-z0-9_` (the longest run in both cases; GitHub's
//!    tokens have 36 and 82 today); boundary. The whole token is replaced.
//!    ```text
//!    \A(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})
//!    ```
//! 7. `slack-webhook`: `hooks.slack.com/`, then `services/`, `workflows/` or
//!    `triggers/`, then at least 20 characters of `A-Za-z0-9_/-`. Only those
//!    characters (the secret path) are replaced; the scheme and host stay.
//!    ```text
//!    \Ahooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9_/-]{20,})
//!    ```
//! 8. `slack-token`: `xox` and one lowercase letter (`xoxb`, `xoxp`, `xoxa`,
//!    `xoxe`, ...), or `xapp`; then `-` and at least 10 characters of
//!    `A-Za-z0-9-`; boundary; the match holds a digit. The whole token is
//!    replaced.
//!    ```text
//!    \A(?:xox[a-z]|xapp)-[A-Za-z0-9-]{10,}
//!    ```
//! 9. `bearer-token`: `bearer` in any ASCII case, spaces or tabs, then a
//!    token: characters of `A-Za-z0-9._~+/-` followed by any `=`; boundary;
//!    the token is at least 16 characters long and holds a digit; and no
//!    other enabled built-in kind matches where the token starts (that kind
//!    takes it when the scan gets there: `Bearer sk-...` is an `openai-key`).
//!    Only the token is replaced: `Authorization: Bearer [REDACTED:bearer-token]`.
//!    ```text
//!    \A(?i:bearer)[ \t]+(?P<secret>[A-Za-z0-9._~+/-]+=*)
//!    ```
//! 10. `url-password`: the password of a URL's user information. `://`,
//!     a user name (any characters but ASCII whitespace, `:/?#@[]"'<>\` and
//!     the backtick; maybe none), `:`, the password (any characters but ASCII
//!     whitespace, `/?#"'<>\` and the backtick, so it may hold `:` and `@`),
//!     then `@`: the password runs to the last `@` before one of those
//!     characters. The password does not start with `$` or `{` (a
//!     template such as `${DB_PASSWORD}`). Only the password is replaced;
//!     the match ends after the `@`.
//!     ```text
//!     \A://[^\t\n\x0B\x0C\r :/?#@\[\]"'<>\\`]*:(?P<secret>[^\t\n\x0B\x0C\r /?#"'<>\\`]+)@
//!     ```
//! 11. `email` (only with `emails` or when listed in `kinds`): a local part of
//!     `A-Za-z0-9._%+-`, `@`, then dot-separated labels of `A-Za-z0-9-` whose
//!     last one is at least two ASCII letters. No boundary: the scan reaches
//!     an address at the first character of its local part. The whole
//!     address is replaced. File names such as `icon@2x.png` look like
//!     addresses and are replaced too.
//!     ```text
//!     \A[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}
//!     ```
//!
//! An extra pattern matches at a position when a regex search from there
//! finds its leftmost match starting there (Python: `pattern.search(text,
//! pos)`; JavaScript: a global regex with `lastIndex = pos`). A match, or a
//! `secret` group, that is empty (or a `secret` group that took no part) is
//! ignored, as if there were no match at that position. Extra patterns see
//! the input text itself (`\b` looks at the original character before a
//! position).
//!
//! The log line counts the secrets replaced and the messages changed, then
//! each kind that had any with its count, in the order above (`1 secret`,
//! `1 message`, otherwise plurals); with none it says `no secrets found in
//! N messages`, N being every message of the input.

mod kinds;
mod redactor;

use agent_host_guest::{History, Processor, Result, export_processor, plural};
use serde::Deserialize;

pub use redactor::Redactor;

/// The configuration.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Also redact e-mail addresses.
    pub emails: bool,
    /// The built-in kinds that run; `None` is all but `email`.
    pub kinds: Option<Vec<String>>,
    /// More kinds, each a named regular expression.
    pub extra: Vec<ExtraPattern>,
    /// What replaces a secret; `{kind}` becomes the kind's name.
    pub placeholder: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            emails: false,
            kinds: None,
            extra: Vec::new(),
            placeholder: "[REDACTED:{kind}]".into(),
        }
    }
}

/// A kind of secret the configuration adds.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtraPattern {
    /// The kind's name, for the placeholder and the log.
    pub name: String,
    /// The regular expression; a group named `secret` limits what is replaced.
    pub pattern: String,
}

/// The processor.
pub struct RedactSecrets;

impl Processor for RedactSecrets {
    type Config = Config;
    const CONFIG_EXAMPLE: Option<&'static str> = Some(
        r#"{"emails": false, "extra": [{"name": "acme-token", "pattern": "acme_[a-z0-9]{32}"}], "placeholder": "[REDACTED:{kind}]"}"#,
    );
    const CONFIG_SCHEMA: Option<&'static str> = Some(
        r#"{"type":"object","properties":{"emails":{"type":"boolean","default":false},"kinds":{"type":"array","items":{"enum":["private-key","anthropic-key","openai-key","aws-access-key","aws-secret-key","github-token","slack-webhook","slack-token","bearer-token","url-password","email"]}},"extra":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string","pattern":"^[A-Za-z0-9_.-]+$"},"pattern":{"type":"string","minLength":1}},"required":["name","pattern"],"additionalProperties":false}},"placeholder":{"type":"string","minLength":1,"default":"[REDACTED:{kind}]"}},"additionalProperties":false}"#,
    );

    fn process(history: &mut History, config: Config) -> Result<()> {
        let redactor = Redactor::new(&config)?;
        let mut counts = vec![0; redactor.kind_count()];
        let mut changed = 0;
        let mut signed_dropped = 0;
        for i in 0..history.len() {
            // Texts are redacted from the input first, so a message with no
            // secret is never asked for mutably (that would replace it).
            let mut redacted: Vec<(usize, String)> = Vec::new();
            for (t, text) in history.messages()[i].texts().enumerate() {
                if let Some(new) = redactor.redact_counting(text, &mut counts) {
                    redacted.push((t, new));
                }
            }
            if redacted.is_empty() {
                continue;
            }
            changed += 1;
            let m = history.message_mut(i);
            // In `texts()`, readable reasoning comes right after the pieces.
            let reasoning_at = m.text_pieces().count();
            let signed_hit = m
                .reasoning
                .as_ref()
                .is_some_and(|r| !r.redacted && r.signature.is_some())
                && redacted.iter().any(|(t, _)| *t == reasoning_at);
            let mut redacted = redacted.into_iter().peekable();
            for (t, text) in m.texts_mut().enumerate() {
                if let Some((_, new)) = redacted.next_if(|(r, _)| *r == t) {
                    *text = new;
                }
            }
            if signed_hit {
                m.reasoning = None;
                signed_dropped += 1;
            }
        }
        agent_host_guest::info!("{}", summary(&redactor, &counts, changed, history.len()));
        if signed_dropped > 0 {
            agent_host_guest::info!(
                "dropped the signed reasoning of {signed_dropped} {}: it held a secret and a \
                 signed block cannot be edited",
                plural(signed_dropped, "message")
            );
        }
        Ok(())
    }
}

export_processor!(RedactSecrets);

/// The log line: how many secrets of each kind were replaced, in how many of
/// the `messages`.
fn summary(redactor: &Redactor, counts: &[usize], changed: usize, messages: usize) -> String {
    let total: usize = counts.iter().sum();
    if total == 0 {
        return format!(
            "no secrets found in {messages} {}",
            plural(messages, "message")
        );
    }
    let per_kind: Vec<String> = counts
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{} {n}", redactor.kind_name(k)))
        .collect();
    format!(
        "redacted {total} {} in {changed} {}: {}",
        plural(total, "secret"),
        plural(changed, "message"),
        per_kind.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::BUILTINS;
    use crate::redactor::tests::{github, jwt, openai, pem};
    use agent_host_guest::{Error, Message, Part, Reasoning, Role, ToolCall, testing};

    fn history() -> Vec<Message> {
        let mut thinking = Message::new(Role::Assistant, "Let me check the config.");
        thinking.reasoning = Some(Reasoning {
            text: format!("The user pasted {} by mistake.", openai()),
            signature: Some("sig".into()),
            redacted: false,
        });
        thinking.tool_calls.push(ToolCall::new(
            "c1",
            "http_get",
            format!(r#"{{"url": "https://api.example.com", "headers": {{"Authorization": "Bearer {}"}}}}"#, jwt()),
        ));
        let mut opaque = Message::new(Role::Assistant, "Done.");
        opaque.reasoning = Some(Reasoning {
            text: format!("opaque {}", github()),
            signature: None,
            redacted: true,
        });
        let mut parts = Message::new(Role::User, "");
        parts
            .parts
            .push(Part::Text("first part, nothing here".into()));
        parts
            .parts
            .push(Part::Text(format!("second part: {}", github())));
        vec![
            Message::new(Role::System, "You are helpful."),
            Message::new(
                Role::User,
                format!("my key is {} and my ssh key:\n{}", openai(), pem("", "\n")),
            ),
            thinking,
            Message::tool_result("c1", "200 OK"),
            opaque,
            parts,
        ]
    }

    #[test]
    fn only_messages_with_secrets_are_replaced() {
        let mut h = History::for_test(history());
        RedactSecrets::process(&mut h, Config::default()).unwrap();
        let changed: Vec<usize> = (0..h.len()).filter(|&i| h.is_changed(i)).collect();
        assert_eq!(changed, [1, 2, 5]);
        let m = h.messages();
        assert_eq!(
            m[1].content,
            "my key is [REDACTED:openai-key] and my ssh key:\n[REDACTED:private-key]"
        );
        // Signed: it cannot be edited, so it goes.
        assert_eq!(m[2].reasoning, None);
        assert!(
            m[2].tool_calls[0]
                .arguments
                .contains(r#""Bearer [REDACTED:bearer-token]""#)
        );
        assert_eq!(m[2].content, "Let me check the config.");
        // Opaque reasoning is the provider's data: never touched.
        assert!(
            m[4].reasoning
                .as_ref()
                .unwrap()
                .text
                .starts_with("opaque ghp_")
        );
        let parts: Vec<&str> = m[5].texts().collect();
        assert_eq!(
            parts,
            [
                "",
                "first part, nothing here",
                "second part: [REDACTED:github-token]"
            ]
        );
    }

    #[test]
    fn a_second_run_changes_nothing() {
        let once = testing::run::<RedactSecrets>("{}", history()).unwrap();
        let mut h = History::for_test(once);
        RedactSecrets::process(&mut h, Config::default()).unwrap();
        assert!((0..h.len()).all(|i| !h.is_changed(i)));
    }

    #[test]
    fn the_log_counts_each_kind() {
        let r = Redactor::new(&Config::default()).unwrap();
        let mut counts = vec![0; r.kind_count()];
        for m in history() {
            for text in m.texts() {
                r.redact_counting(text, &mut counts);
            }
        }
        assert_eq!(
            summary(&r, &counts, 3, 6),
            "redacted 5 secrets in 3 messages: private-key 1, openai-key 2, github-token 1, bearer-token 1"
        );
        let none = vec![0; r.kind_count()];
        assert_eq!(summary(&r, &none, 0, 1), "no secrets found in 1 message");
        let mut one = none.clone();
        one[0] = 1;
        assert_eq!(
            summary(&r, &one, 1, 9),
            "redacted 1 secret in 1 message: private-key 1"
        );
    }

    #[test]
    fn configuration_errors_reach_the_host() {
        let e = testing::run::<RedactSecrets>(r#"{"email": true}"#, vec![]).unwrap_err();
        assert!(e.to_string().contains("unknown field `email`"), "{e}");
        let e = testing::run::<RedactSecrets>(r#"{"kinds": ["jwt"]}"#, vec![]).unwrap_err();
        assert!(
            matches!(&e, Error::BadConfig(m) if m.contains("unknown kind \"jwt\"")),
            "{e}"
        );
        let e = testing::run::<RedactSecrets>(r#"{"extra": [{"name": "x"}]}"#, vec![]).unwrap_err();
        assert!(e.to_string().contains("missing field `pattern`"), "{e}");
        let bad = r#"{"extra": [{"name": "ticket", "pattern": "(TICKET-[0-9]+"}]}"#;
        let e = testing::run::<RedactSecrets>(bad, vec![]).unwrap_err();
        assert!(
            matches!(&e, Error::BadConfig(m) if m.contains("\"ticket\"") && m.contains("open group without closing")),
            "{e}"
        );
    }

    #[test]
    fn the_example_and_schema_agree_with_the_kinds() {
        let example: Config = serde_json::from_str(RedactSecrets::CONFIG_EXAMPLE.unwrap()).unwrap();
        Redactor::new(&example).unwrap();
        let schema: serde_json::Value =
            serde_json::from_str(RedactSecrets::CONFIG_SCHEMA.unwrap()).unwrap();
        let names: Vec<&str> = schema["properties"]["kinds"]["items"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let builtins: Vec<&str> = BUILTINS.iter().map(|k| k.name()).collect();
        assert_eq!(names, builtins);
    }

    /// The crate doc is the specification other implementations follow: it
    /// must show each pattern exactly as compiled.
    #[test]
    fn the_crate_doc_shows_every_pattern() {
        let doc: String = include_str!("lib.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("//!"))
            .map(str::trim)
            .collect::<Vec<_>>()
            .join("\n");
        for (i, kind) in BUILTINS.into_iter().enumerate() {
            let heading = format!("{}. `{}`", i + 1, kind.name());
            let at = doc
                .find(&heading)
                .unwrap_or_else(|| panic!("no heading {heading}"));
            let section = &doc[at..];
            let block = section.split("```text\n").nth(1).unwrap();
            assert_eq!(
                block.lines().next().unwrap(),
                kind.pattern(),
                "{}",
                kind.name()
            );
        }
    }
}
