//! The built-in kinds of secret: each one's name, literal trigger, pattern
//! and the checks a match must pass (the crate doc describes them in words).

use std::sync::OnceLock;

use regex_lite::Regex;

/// A built-in kind of secret, in priority order: at one position, the first
/// kind that matches wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Builtin {
    PrivateKey,
    AnthropicKey,
    OpenaiKey,
    AwsAccessKey,
    AwsSecretKey,
    GithubToken,
    SlackWebhook,
    SlackToken,
    BearerToken,
    UrlPassword,
    Email,
}

/// Every built-in kind, in priority order.
pub(crate) const BUILTINS: [Builtin; 11] = [
    Builtin::PrivateKey,
    Builtin::AnthropicKey,
    Builtin::OpenaiKey,
    Builtin::AwsAccessKey,
    Builtin::AwsSecretKey,
    Builtin::GithubToken,
    Builtin::SlackWebhook,
    Builtin::SlackToken,
    Builtin::BearerToken,
    Builtin::UrlPassword,
    Builtin::Email,
];

/// The patterns, anchored at the candidate position. The only capturing
/// group, where there is one, is `secret`: the part that is replaced (without
/// it, the whole match is). They use the syntax common to Rust's `regex`,
/// Python's `re` and JavaScript: ASCII classes only, no look-around, no
/// back-references. The crate doc shows each one (a test checks it).
const PATTERNS: [&str; 11] = [
    r"\A-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:[A-Za-z0-9+/=:, \t\r\n\\-]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|(?:\r?\n|(?:\\r)?\\n)[A-Za-z0-9+/=:, \t\r\n\\-]*)",
    r"\Ask-ant-[A-Za-z0-9_-]{16,}",
    r"\Ask-[A-Za-z0-9_-]{20,}",
    r"\A(?:AKIA|ASIA)[A-Z0-9]{16}",
    r#"\A(?i:secret_?access_?key)(?:\\?["'])?[ \t]*(?:=>|:|=)[ \t]*(?:\\?["'])?(?P<secret>[A-Za-z0-9/+]{40})"#,
    r"\A(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
    r"\Ahooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9_/-]{20,})",
    r"\A(?:xox[a-z]|xapp)-[A-Za-z0-9-]{10,}",
    r"\A(?i:bearer)[ \t]+(?P<secret>[A-Za-z0-9._~+/-]+=*)",
    r#"\A://[^\t\n\x0B\x0C\r :/?#@\[\]"'<>\\`]*:(?P<secret>[^\t\n\x0B\x0C\r /?#"'<>\\`]+)@"#,
    r"\A[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}",
];

/// The compiled patterns, each compiled the first time a candidate for its
/// kind turns up.
static REGEXES: [OnceLock<Regex>; 11] = [const { OnceLock::new() }; 11];

/// Where a kind matched, in bytes of the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Hit {
    /// Where the match starts.
    pub start: usize,
    /// Where it ends: the scan goes on from here.
    pub end: usize,
    /// The part that is replaced.
    pub secret: std::ops::Range<usize>,
}

/// ASCII letters, digits, `_` and `-`: what may not stand right before a
/// token (so `task-sk-list` holds no OpenAI key).
pub(crate) fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Whether `rest` has at least `n` bytes of `class` from `from` on.
fn run_of(rest: &[u8], from: usize, n: usize, class: impl Fn(&u8) -> bool) -> bool {
    rest.get(from..from + n)
        .is_some_and(|run| run.iter().all(class))
}

/// At least one ASCII digit, one uppercase and one lowercase letter: random
/// keys have all three, words and identifiers rarely do.
fn is_mixed(s: &str) -> bool {
    let b = s.as_bytes();
    b.iter().any(u8::is_ascii_digit)
        && b.iter().any(u8::is_ascii_uppercase)
        && b.iter().any(u8::is_ascii_lowercase)
}

/// At least 16 characters of `A-Za-z0-9+/=` in a row: some key material,
/// which prose between two quoted markers lacks.
fn has_base64_run(b: &[u8]) -> bool {
    let base64 = |b: &u8| b.is_ascii_alphanumeric() || b"+/=".contains(b);
    b.split(|b| !base64(b)).any(|run| run.len() >= 16)
}

impl Builtin {
    /// The kind's name, as configured in `kinds` and shown in placeholders.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Builtin::PrivateKey => "private-key",
            Builtin::AnthropicKey => "anthropic-key",
            Builtin::OpenaiKey => "openai-key",
            Builtin::AwsAccessKey => "aws-access-key",
            Builtin::AwsSecretKey => "aws-secret-key",
            Builtin::GithubToken => "github-token",
            Builtin::SlackWebhook => "slack-webhook",
            Builtin::SlackToken => "slack-token",
            Builtin::BearerToken => "bearer-token",
            Builtin::UrlPassword => "url-password",
            Builtin::Email => "email",
        }
    }

    /// The kind named `name`.
    pub(crate) fn from_name(name: &str) -> Option<Builtin> {
        BUILTINS.into_iter().find(|k| k.name() == name)
    }

    fn index(self) -> usize {
        self as usize
    }

    /// The pattern's text.
    pub(crate) fn pattern(self) -> &'static str {
        PATTERNS[self.index()]
    }

    fn regex(self) -> &'static Regex {
        REGEXES[self.index()]
            .get_or_init(|| Regex::new(self.pattern()).expect("the built-in patterns compile"))
    }

    /// The bytes a match can start with. Email has none: its candidates are
    /// found from the `@` back (see the redactor).
    pub(crate) fn first_bytes(self) -> &'static [u8] {
        match self {
            Builtin::PrivateKey => b"-",
            Builtin::AnthropicKey | Builtin::OpenaiKey => b"s",
            Builtin::AwsAccessKey => b"A",
            Builtin::AwsSecretKey => b"sS",
            Builtin::GithubToken => b"g",
            Builtin::SlackWebhook => b"h",
            Builtin::SlackToken => b"x",
            Builtin::BearerToken => b"bB",
            Builtin::UrlPassword => b":",
            Builtin::Email => b"",
        }
    }

    /// The first two bytes a match can start with (ASCII case variants
    /// included where the kind ignores case): the scan's prefilter, so that
    /// it stops only where one of these pairs is. Email has none (see
    /// [`Builtin::first_bytes`]).
    pub(crate) fn first_pairs(self) -> &'static [[u8; 2]] {
        match self {
            Builtin::PrivateKey => &[[b'-', b'-']],
            Builtin::AnthropicKey | Builtin::OpenaiKey => &[[b's', b'k']],
            Builtin::AwsAccessKey => &[[b'A', b'K'], [b'A', b'S']],
            Builtin::AwsSecretKey => &[[b's', b'e'], [b's', b'E'], [b'S', b'e'], [b'S', b'E']],
            Builtin::GithubToken => &[[b'g', b'h'], [b'g', b'i']],
            Builtin::SlackWebhook => &[[b'h', b'o']],
            Builtin::SlackToken => &[[b'x', b'o'], [b'x', b'a']],
            Builtin::BearerToken => &[[b'b', b'e'], [b'b', b'E'], [b'B', b'e'], [b'B', b'E']],
            Builtin::UrlPassword => &[[b':', b'/']],
            Builtin::Email => &[],
        }
    }

    /// Whether `rest` starts with the literal every match of the kind starts
    /// with: a cheap test before the pattern runs.
    pub(crate) fn triggered(self, rest: &[u8]) -> bool {
        match self {
            Builtin::PrivateKey => rest.starts_with(b"-----BEGIN "),
            Builtin::AnthropicKey => rest.starts_with(b"sk-ant-"),
            Builtin::OpenaiKey => rest.starts_with(b"sk-") && !rest.starts_with(b"sk-ant-"),
            Builtin::AwsAccessKey => rest.starts_with(b"AKIA") || rest.starts_with(b"ASIA"),
            Builtin::AwsSecretKey => rest
                .get(..6)
                .is_some_and(|w| w.eq_ignore_ascii_case(b"secret")),
            Builtin::GithubToken => {
                matches!(
                    rest,
                    [b'g', b'h', b'p' | b'o' | b'u' | b's' | b'r', b'_', ..]
                ) || rest.starts_with(b"github_pat_")
            }
            Builtin::SlackWebhook => rest.starts_with(b"hooks.slack.com/"),
            Builtin::SlackToken => {
                matches!(rest, [b'x', b'o', b'x', b'a'..=b'z', b'-', ..])
                    || rest.starts_with(b"xapp-")
            }
            Builtin::BearerToken => rest
                .get(..6)
                .is_some_and(|w| w.eq_ignore_ascii_case(b"bearer")),
            Builtin::UrlPassword => rest.starts_with(b"://"),
            Builtin::Email => true,
        }
    }

    /// Whether `rest`, where the kind is [triggered](Builtin::triggered),
    /// holds what every match needs beyond the literal: a necessary
    /// condition, checked before the pattern runs. It spares compiling the
    /// pattern where it cannot match: a processor call is a fresh instance
    /// that compiles each pattern it runs (about 30 µs each in the sandbox),
    /// and words such as `secret` and `bearer`, and URLs, are common (the
    /// default placeholders hold `secret-key]` and `bearer-token]` too, and
    /// every configuration is checked against its placeholders).
    pub(crate) fn may_match(self, rest: &[u8]) -> bool {
        let key = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-';
        let alnum = |b: &u8| b.is_ascii_alphanumeric();
        match self {
            Builtin::AnthropicKey => run_of(rest, "sk-ant-".len(), 16, key),
            Builtin::OpenaiKey => run_of(rest, "sk-".len(), 20, key),
            Builtin::AwsAccessKey => run_of(rest, 4, 16, |b| {
                b.is_ascii_uppercase() || b.is_ascii_digit()
            }),
            Builtin::AwsSecretKey => {
                // The label, `secret_?access_?key`, in any ASCII case.
                let mut at = "secret".len();
                let mut word = |w: &[u8]| {
                    at += usize::from(rest.get(at) == Some(&b'_'));
                    let found = rest
                        .get(at..at + w.len())
                        .is_some_and(|r| r.eq_ignore_ascii_case(w));
                    at += w.len();
                    found
                };
                word(b"access") && word(b"key")
            }
            Builtin::GithubToken => match rest.starts_with(b"github_pat_") {
                true => run_of(rest, "github_pat_".len(), 22, |b| {
                    b.is_ascii_alphanumeric() || *b == b'_'
                }),
                false => run_of(rest, "ghp_".len(), 30, alnum),
            },
            Builtin::SlackWebhook => {
                let path = &rest["hooks.slack.com/".len()..];
                ["services/", "workflows/", "triggers/"]
                    .iter()
                    .any(|p| path.starts_with(p.as_bytes()))
            }
            Builtin::SlackToken => run_of(rest, "xoxb-".len(), 10, |b| {
                b.is_ascii_alphanumeric() || *b == b'-'
            }),
            Builtin::BearerToken => {
                // `bearer`, a space or tab, then a character of the token.
                let token = |b: &u8| b.is_ascii_alphanumeric() || b"._~+/-".contains(b);
                let after = &rest["bearer".len()..];
                let blanks = after
                    .iter()
                    .take_while(|b| matches!(b, b' ' | b'\t'))
                    .count();
                blanks > 0 && after.get(blanks).is_some_and(token)
            }
            Builtin::UrlPassword => {
                // A user name, `:`, then a password that runs to an `@`.
                let user_ends =
                    |b: &u8| b.is_ascii_whitespace() || b"\x0B:/?#@[]\"'<>\\`".contains(b);
                let password_ends =
                    |b: &u8| b.is_ascii_whitespace() || b"\x0B/?#\"'<>\\`".contains(b);
                let after = &rest["://".len()..];
                let Some(colon) = after.iter().position(user_ends) else {
                    return false;
                };
                if after[colon] != b':' {
                    return false;
                }
                let password = &after[colon + 1..];
                let run = password
                    .iter()
                    .position(password_ends)
                    .unwrap_or(password.len());
                password[..run].iter().skip(1).any(|b| *b == b'@')
            }
            Builtin::PrivateKey | Builtin::Email => true,
        }
    }

    /// Whether the character before a match may not be a word character
    /// ([`is_word`]).
    fn needs_boundary(self) -> bool {
        matches!(
            self,
            Builtin::AnthropicKey
                | Builtin::OpenaiKey
                | Builtin::AwsAccessKey
                | Builtin::GithubToken
                | Builtin::SlackToken
                | Builtin::BearerToken
        )
    }

    fn has_secret_group(self) -> bool {
        matches!(
            self,
            Builtin::AwsSecretKey
                | Builtin::SlackWebhook
                | Builtin::BearerToken
                | Builtin::UrlPassword
        )
    }

    /// The kind's match at byte `at` of `text`, if it has one there. `prev`
    /// is the character before `at` as it stands in the redacted text (the
    /// placeholder's last one right after a redaction), `None` at the start.
    pub(crate) fn match_at(self, text: &str, at: usize, prev: Option<u8>) -> Option<Hit> {
        let rest = &text[at..];
        if !self.triggered(rest.as_bytes())
            || (self.needs_boundary() && prev.is_some_and(is_word))
            || !self.may_match(rest.as_bytes())
        {
            return None;
        }
        let re = self.regex();
        let (end, secret) = if self.has_secret_group() {
            let mut locs = re.capture_locations();
            let m = re.captures_read(&mut locs, rest)?;
            let (s, e) = locs.get(1)?;
            (m.end(), s..e)
        } else {
            let m = re.find(rest)?;
            (m.end(), 0..m.end())
        };
        let after = rest.as_bytes().get(end).copied();
        let ok = match self {
            Builtin::AnthropicKey => is_mixed(&rest["sk-ant-".len()..end]),
            Builtin::OpenaiKey => is_mixed(&rest["sk-".len()..end]),
            Builtin::AwsAccessKey => !after.is_some_and(|b| b.is_ascii_alphanumeric()),
            Builtin::AwsSecretKey => {
                !after.is_some_and(|b| b.is_ascii_alphanumeric() || b"/+=".contains(&b))
            }
            Builtin::SlackToken => rest[..end].bytes().any(|b| b.is_ascii_digit()),
            Builtin::BearerToken => {
                let token = &rest[secret.clone()];
                token.len() >= 16 && token.bytes().any(|b| b.is_ascii_digit())
            }
            Builtin::UrlPassword => !rest[secret.clone()].starts_with(['$', '{']),
            Builtin::PrivateKey => has_base64_run(&rest.as_bytes()[..end]),
            Builtin::GithubToken | Builtin::SlackWebhook | Builtin::Email => true,
        };
        ok.then(|| Hit {
            start: at,
            end: at + end,
            secret: at + secret.start..at + secret.end,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles_with_at_most_the_secret_group() {
        for kind in BUILTINS {
            let re = Regex::new(kind.pattern()).unwrap();
            let names: Vec<_> = re.capture_names().skip(1).collect();
            if kind.has_secret_group() {
                assert_eq!(names, [Some("secret")], "{}", kind.name());
            } else {
                assert!(names.is_empty(), "{}", kind.name());
            }
            assert!(kind.pattern().starts_with(r"\A"), "{}", kind.name());
        }
    }

    /// `may_match` is only a shortcut: wherever a kind's pattern matches, it
    /// holds (one too strict would let secrets through), and it turns away
    /// the default placeholders, which every configuration is checked
    /// against (so that no call compiles a pattern for them).
    #[test]
    fn may_match_holds_wherever_the_pattern_matches() {
        use crate::redactor::tests::*;
        let mut texts = mixed_texts();
        let near = [
            "secret_access_key: ".to_owned() + &aws_secret(),
            "SecretAccessKey = ".to_owned() + &aws_secret(),
            "secret_accesskey".into(),
            "secret__access_key".into(),
            "secrets".into(),
            format!("Bearer\t \t{}", jwt()),
            "bearer  x".into(),
            "Bearer\n".into(),
            "bearer-token".into(),
            "://user:p@ss@host x@y".into(),
            "://:pw@h".into(),
            "://u:@h".into(),
            "://u:p@h".into(),
            "://u:pw h@x".into(),
            "://é:ü@x".into(),
            "s3://bucket/key".into(),
            format!("sk-{}", "a".repeat(19)),
            format!("sk-ant-{}", "Ab1".repeat(5)),
            format!("AKIA{}", "A".repeat(15)),
            format!("ghp_{}", "a".repeat(29)),
            format!("github_pat_{}", "a_".repeat(11)),
            "xoxb-123456789".into(),
            "xapp-1234567890".into(),
            "hooks.slack.com/services/".to_owned() + &webhook_path(),
            "hooks.slack.com/triggers/".to_owned() + &webhook_path(),
            "hooks.slack.com/other/".to_owned() + &webhook_path(),
            openai_legacy(),
            github_pat(),
            pem("RSA ", "\n"),
            pem("", "\\n")[..40].to_owned(),
        ];
        for a in &near {
            for b in ["", " ", "\"", "/", "é"] {
                texts.push(format!("{a}{b}"));
            }
        }
        let mut matched = [0; BUILTINS.len()];
        for text in &texts {
            for (at, _) in text.char_indices() {
                let rest = &text[at..];
                for kind in BUILTINS {
                    if kind.triggered(rest.as_bytes()) && kind.regex().is_match(rest) {
                        assert!(kind.may_match(rest.as_bytes()), "{}: {rest:?}", kind.name());
                        matched[kind.index()] += 1;
                    }
                }
            }
        }
        for kind in BUILTINS {
            assert!(matched[kind.index()] > 0, "no {} in the texts", kind.name());
        }
        for kind in BUILTINS.into_iter().filter(|k| *k != Builtin::Email) {
            let placeholder = format!("[REDACTED:{}]", kind.name());
            for (at, _) in placeholder.char_indices() {
                for k in BUILTINS.into_iter().filter(|k| *k != Builtin::Email) {
                    let rest = &placeholder.as_bytes()[at..];
                    assert!(
                        !(k.triggered(rest) && k.may_match(rest)),
                        "{placeholder} at {at}: {}",
                        k.name()
                    );
                }
            }
        }
    }

    /// The scan's prefilter stops where a kind has the pair of bytes there,
    /// from a table of first bytes and one of second bytes: exact only when
    /// each kind's pairs are all its first bytes with all its second ones;
    /// and every literal starts with one of its pairs.
    #[test]
    fn each_kind_pairs_every_first_byte_with_every_second() {
        for kind in BUILTINS.into_iter().filter(|k| *k != Builtin::Email) {
            let pairs = kind.first_pairs();
            for [a, _] in pairs {
                for [_, b] in pairs {
                    assert!(pairs.contains(&[*a, *b]), "{}: {a} {b}", kind.name());
                }
            }
            for [a, _] in pairs {
                assert!(kind.first_bytes().contains(a), "{}", kind.name());
            }
        }
    }

    #[test]
    fn names_round_trip_and_follow_the_order() {
        for (i, kind) in BUILTINS.into_iter().enumerate() {
            assert_eq!(Builtin::from_name(kind.name()), Some(kind));
            assert_eq!(kind.index(), i);
        }
        assert_eq!(Builtin::from_name("password"), None);
    }
}
