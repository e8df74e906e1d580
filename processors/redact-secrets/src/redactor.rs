//! The scan: finds secrets in a text, left to right, and replaces them.

use std::ops::Range;

use agent_host_guest::{Error, Result};
use regex_lite::Regex;

use crate::Config;
use crate::kinds::{BUILTINS, Builtin, Hit};

/// The secrets a configuration looks for, compiled once and applied to any
/// number of texts.
///
/// ```
/// use redact_secrets::{Config, Redactor};
///
/// let redactor = Redactor::new(&Config::default())?;
/// let text = "psql postgres://app:hunter2@db.internal/app";
/// assert_eq!(
///     redactor.redact(text).as_deref(),
///     Some("psql postgres://app:[REDACTED:url-password]@db.internal/app")
/// );
/// assert_eq!(redactor.redact("nothing to see"), None);
/// # Ok::<(), agent_host_guest::Error>(())
/// ```
pub struct Redactor {
    /// The built-in kinds that run, in priority order.
    builtins: Vec<Builtin>,
    /// The configured patterns, after the built-in kinds.
    extras: Vec<Extra>,
    /// The placeholder of each kind: the built-in ones, then the extras.
    placeholders: Vec<String>,
    /// For each byte, a bit for each of `builtins` that may start with it.
    first: [u16; 256],
    /// For each byte, a bit for each of `builtins` whose pairs (the first
    /// two bytes of its matches) start with it; and in `seconds`, whose pairs
    /// end with it. The scan stops only where `starts[a] & seconds[b]` has a
    /// bit for the bytes `a b` there: most text holds few such pairs (`sk`,
    /// `AK`, `gh`, `--`, `:/`, ...), where single bytes such as `s` or `:`
    /// are everywhere. Each kind's pairs are every first byte with every
    /// second (a test checks it), so the bits are exactly the kinds that have
    /// the pair.
    starts: [u16; 256],
    /// See `starts`.
    seconds: [u16; 256],
    /// `starts` in the low 16 bits and `seconds` in the high ones, for the
    /// scan's loop.
    both: [u32; 256],
    /// Whether the scan skips to the pairs (always, but in the test that
    /// compares it with stopping at every byte a kind may start with).
    prefilter: bool,
    /// Whether e-mail addresses are looked for.
    email: bool,
}

/// A pattern from `extra`.
struct Extra {
    name: String,
    regex: Regex,
    /// The index of its group named `secret`, if it has one.
    secret_group: Option<usize>,
    /// What every match starts with, when the pattern says so plainly: the
    /// regex only runs where it occurs.
    prefix: Option<String>,
}

/// The next match of an extra pattern at or after some position.
#[derive(Clone)]
enum Next {
    /// Not looked for yet.
    Unknown,
    /// The match, found from a position at or before its start.
    At(Hit),
    /// No match in the rest of the text.
    Never,
}

impl Redactor {
    /// Compiles `config`, or says what is wrong with it.
    pub fn new(config: &Config) -> Result<Redactor> {
        let mut builtins: Vec<Builtin> = match &config.kinds {
            None => BUILTINS
                .into_iter()
                .filter(|k| *k != Builtin::Email)
                .collect(),
            Some(names) => {
                for name in names {
                    if Builtin::from_name(name).is_none() {
                        let valid: Vec<&str> = BUILTINS.iter().map(|k| k.name()).collect();
                        return Err(Error::bad_config(format!(
                            "unknown kind {name:?} in `kinds`; the kinds are {}",
                            valid.join(", ")
                        )));
                    }
                }
                BUILTINS
                    .into_iter()
                    .filter(|k| names.iter().any(|n| n == k.name()))
                    .collect()
            }
        };
        if config.emails && !builtins.contains(&Builtin::Email) {
            builtins.push(Builtin::Email);
        }
        let email = builtins.contains(&Builtin::Email);

        let mut extras: Vec<Extra> = Vec::with_capacity(config.extra.len());
        for pattern in &config.extra {
            let name = &pattern.name;
            let valid = |b: u8| b.is_ascii_alphanumeric() || b"_.-".contains(&b);
            if name.is_empty() || !name.bytes().all(valid) {
                return Err(Error::bad_config(format!(
                    "extra pattern name {name:?}: use ASCII letters, digits, `-`, `_` and `.`"
                )));
            }
            if Builtin::from_name(name).is_some() || extras.iter().any(|e| &e.name == name) {
                return Err(Error::bad_config(format!(
                    "extra pattern name {name:?} is already taken; give each pattern its own name"
                )));
            }
            let regex = Regex::new(&pattern.pattern).map_err(|e| {
                Error::bad_config(format!("extra pattern {name:?} is not a valid regex: {e}"))
            })?;
            if regex.is_match("") {
                return Err(Error::bad_config(format!(
                    "extra pattern {name:?} matches the empty string; it must match at least one character"
                )));
            }
            let secret_group = regex.capture_names().position(|n| n == Some("secret"));
            extras.push(Extra {
                name: name.clone(),
                regex,
                secret_group,
                prefix: literal_prefix(&pattern.pattern),
            });
        }
        if builtins.is_empty() && extras.is_empty() {
            return Err(Error::bad_config(
                "nothing to look for: `kinds` is empty, `emails` is false and there is no `extra` pattern",
            ));
        }

        if config.placeholder.is_empty() {
            return Err(Error::bad_config(
                "`placeholder` is empty; a reader could not tell that something was removed",
            ));
        }
        let placeholders: Vec<String> = builtins
            .iter()
            .map(|k| k.name())
            .chain(extras.iter().map(|e| e.name.as_str()))
            .map(|kind| config.placeholder.replace("{kind}", kind))
            .collect();

        let mut first = [0u16; 256];
        for (bit, kind) in builtins.iter().enumerate() {
            for &b in kind.first_bytes() {
                first[usize::from(b)] |= 1 << bit;
            }
        }
        let (mut starts, mut seconds) = ([0u16; 256], [0u16; 256]);
        for (bit, kind) in builtins.iter().enumerate() {
            for &[a, b] in kind.first_pairs() {
                starts[usize::from(a)] |= 1 << bit;
                seconds[usize::from(b)] |= 1 << bit;
            }
        }
        let redactor = Redactor {
            builtins,
            extras,
            placeholders,
            first,
            starts,
            seconds,
            both: std::array::from_fn(|b| u32::from(starts[b]) | u32::from(seconds[b]) << 16),
            prefilter: true,
            email,
        };
        // A placeholder that would itself be redacted would make a second
        // run change the text again.
        for placeholder in &redactor.placeholders {
            if let Some((kind, _)) = redactor.matches(placeholder).first() {
                return Err(Error::bad_config(format!(
                    "`placeholder` {placeholder:?} would itself be redacted as {kind}; choose one that holds no secret"
                )));
            }
        }
        Ok(redactor)
    }

    /// How many kinds run: the built-in ones, then the extra patterns.
    pub fn kind_count(&self) -> usize {
        self.placeholders.len()
    }

    /// The name of kind `index` (see [`Redactor::kind_count`]).
    pub fn kind_name(&self, index: usize) -> &str {
        match self.builtins.get(index) {
            Some(kind) => kind.name(),
            None => &self.extras[index - self.builtins.len()].name,
        }
    }

    /// `text` with its secrets replaced, or `None` when it holds none (then
    /// nothing was allocated).
    pub fn redact(&self, text: &str) -> Option<String> {
        self.redact_counting(text, &mut vec![0; self.kind_count()])
    }

    /// Like [`Redactor::redact`], and adds one to `counts[kind]` for each
    /// secret replaced (`counts` has [`Redactor::kind_count`] entries).
    pub fn redact_counting(&self, text: &str, counts: &mut [usize]) -> Option<String> {
        let mut out: Option<String> = None;
        let mut copied = 0;
        self.scan(text, |kind, secret| {
            let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
            out.push_str(&text[copied..secret.start]);
            out.push_str(&self.placeholders[kind]);
            copied = secret.end;
            counts[kind] += 1;
        });
        let mut out = out?;
        out.push_str(&text[copied..]);
        Some(out)
    }

    /// The secrets in `text`: each one's kind and where it is.
    pub fn matches(&self, text: &str) -> Vec<(&str, Range<usize>)> {
        let mut found = Vec::new();
        self.scan(text, |kind, secret| {
            found.push((self.kind_name(kind), secret))
        });
        found
    }

    /// Calls `found(kind, secret)` for each secret in `text`, left to right.
    ///
    /// The rule (see the crate doc): at each position, the kinds are tried in
    /// priority order and the first that matches wins; the scan goes on after
    /// its match, or at the next character when none matches. The work here
    /// only goes into finding the positions where a kind can start.
    fn scan(&self, text: &str, mut found: impl FnMut(usize, Range<usize>)) {
        let bytes = text.as_bytes();
        let len = bytes.len();
        // The next e-mail candidate: where its local part starts, and its `@`.
        let mut email: Option<(usize, usize)> = None;
        let mut email_from = 0;
        let mut extras = vec![Next::Unknown; self.extras.len()];
        // The end of the last replacement and its kind, for the character
        // before a position as it stands in the output.
        let mut last: Option<(usize, usize)> = None;
        // The next byte where a built-in kind may start: where a pair of
        // bytes that one starts with begins (every match is longer than two
        // bytes) and the literal of such a kind follows.
        let find_trigger = |from: usize| {
            if !self.prefilter {
                return bytes[from..]
                    .iter()
                    .position(|b| self.first[usize::from(*b)] != 0)
                    .map_or(len, |k| from + k);
            }
            // Whether a kind's literal starts at `k`, where a pair of it is.
            let stop = |k: usize| {
                let mut kinds =
                    self.starts[usize::from(bytes[k])] & self.seconds[usize::from(bytes[k + 1])];
                while kinds != 0 {
                    let bit = kinds.trailing_zeros() as usize;
                    if self.builtins[bit].triggered(&bytes[k..]) {
                        return true;
                    }
                    kinds &= kinds - 1;
                }
                false
            };
            // Eight positions a round with one branch: most rounds hold no
            // pair (in the sandbox this loop is most of the scan's time).
            // One table read a byte: its `starts` bits low, `seconds` high.
            let mut k = from;
            while k + 9 <= len {
                let round: &[u8; 9] = bytes[k..k + 9].try_into().expect("nine bytes");
                let mut any = 0;
                let mut before = self.both[usize::from(round[0])];
                for &b in &round[1..] {
                    let here = self.both[usize::from(b)];
                    any |= before & (here >> 16);
                    before = here;
                }
                if any != 0
                    && let Some(at) = (k..k + 8).find(|&at| stop(at))
                {
                    return at;
                }
                k += 8;
            }
            (k..len.saturating_sub(1))
                .find(|&at| stop(at))
                .unwrap_or(len)
        };
        let mut trigger = find_trigger(0);
        let mut i = 0;
        while i < len {
            if trigger < i {
                trigger = find_trigger(i);
            }
            let mut c = trigger;
            if self.email {
                if email.is_some_and(|(s, _)| s < i) {
                    email = None;
                }
                if email.is_none() && email_from < len {
                    email = next_email(bytes, i, email_from.max(i));
                    email_from = email.map_or(len, |(_, at)| at);
                }
                if let Some((s, _)) = email {
                    c = c.min(s);
                }
            }
            for (extra, next) in self.extras.iter().zip(&mut extras) {
                if let Next::At(hit) = next
                    && hit.start < i
                {
                    *next = Next::Unknown;
                }
                if let Next::Unknown = next {
                    *next = extra.find(text, i);
                }
                if let Next::At(hit) = next {
                    c = c.min(hit.start);
                }
            }
            if c >= len {
                break;
            }

            let prev = match last {
                Some((end, kind)) if end == c => self.placeholders[kind].bytes().last(),
                _ => c.checked_sub(1).map(|p| bytes[p]),
            };
            let mut hit = None;
            for (k, &kind) in self.builtins.iter().enumerate() {
                let candidate = if kind == Builtin::Email {
                    email.is_some_and(|(s, _)| s == c)
                } else {
                    self.first[usize::from(bytes[c])] & (1 << k) != 0
                };
                if !candidate {
                    continue;
                }
                let Some(h) = kind.match_at(text, c, prev) else {
                    continue;
                };
                if kind == Builtin::BearerToken && self.taken_by_another(text, h.secret.start) {
                    continue;
                }
                if text[h.secret.clone()] != self.placeholders[k] {
                    hit = Some((k, h));
                    break;
                }
            }
            if hit.is_none() {
                for (x, next) in extras.iter().enumerate() {
                    let k = self.builtins.len() + x;
                    if let Next::At(h) = next
                        && h.start == c
                        && text[h.secret.clone()] != self.placeholders[k]
                    {
                        hit = Some((k, h.clone()));
                        break;
                    }
                }
            }
            match hit {
                Some((k, h)) => {
                    found(k, h.secret.clone());
                    last = Some((h.secret.end, k));
                    i = h.end;
                }
                None => {
                    // An address that fails at the start of its local part
                    // fails from every later start too: go past its `@`.
                    if let Some((s, at)) = email
                        && s == c
                    {
                        email = None;
                        email_from = at + 1;
                    }
                    i = next_char(text, c);
                }
            }
        }
    }

    /// Whether another built-in kind matches where a bearer token starts (it
    /// is then typed by that kind, which the scan reaches next).
    fn taken_by_another(&self, text: &str, at: usize) -> bool {
        let prev = text.as_bytes().get(at.wrapping_sub(1)).copied();
        self.builtins
            .iter()
            .any(|&kind| kind != Builtin::BearerToken && kind.match_at(text, at, prev).is_some())
    }
}

impl Extra {
    /// The pattern's first usable match at or after `from`: not empty, and
    /// with a non-empty `secret` group when it has that group.
    fn find(&self, text: &str, mut from: usize) -> Next {
        let mut locs = self.regex.capture_locations();
        while from <= text.len() {
            // No match starts before the prefix's next occurrence.
            if let Some(prefix) = &self.prefix {
                match text[from..].find(prefix.as_str()) {
                    Some(k) => from += k,
                    None => return Next::Never,
                }
            }
            let Some(m) = self.regex.captures_read_at(&mut locs, text, from) else {
                return Next::Never;
            };
            let secret = match self.secret_group {
                Some(g) => locs.get(g).map(|(s, e)| s..e),
                None => Some(m.start()..m.end()),
            };
            match secret {
                Some(secret) if !secret.is_empty() => {
                    return Next::At(Hit {
                        start: m.start(),
                        end: m.end(),
                        secret,
                    });
                }
                _ => from = next_char(text, m.start()),
            }
        }
        Next::Never
    }
}

/// The literal text every match of `pattern` starts with, if it is plain to
/// see: the ASCII letters, digits, `_` and `-` it opens with (after a `\b`),
/// less the last one when a quantifier follows it. None when the pattern
/// has a `|` anywhere (an alternative could start otherwise).
fn literal_prefix(pattern: &str) -> Option<String> {
    if pattern.contains('|') {
        return None;
    }
    let rest = pattern.strip_prefix(r"\b").unwrap_or(pattern);
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .unwrap_or(rest.len());
    let mut prefix = &rest[..end];
    if rest[end..].starts_with(['*', '+', '?', '{']) {
        prefix = &prefix[..prefix.len().saturating_sub(1)];
    }
    (!prefix.is_empty()).then(|| prefix.to_owned())
}

/// The position of the character after the one at `at`.
fn next_char(text: &str, at: usize) -> usize {
    let mut next = at + 1;
    while !text.is_char_boundary(next) {
        next += 1;
    }
    next
}

/// The characters of an e-mail address's local part.
fn is_local(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"._%+-".contains(&b)
}

/// The first e-mail candidate with an `@` at or after `search`: where its
/// local part starts (the longest run of local-part characters before the
/// `@`, not reaching before `from`) and the `@`.
fn next_email(bytes: &[u8], from: usize, mut search: usize) -> Option<(usize, usize)> {
    loop {
        let at = search + bytes.get(search..)?.iter().position(|&b| b == b'@')?;
        let mut start = at;
        while start > from && is_local(bytes[start - 1]) {
            start -= 1;
        }
        if start < at {
            return Some((start, at));
        }
        search = at + 1;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    // Fake secrets, built from pieces so that no secret scanner mistakes this
    // file for a leak.
    pub(crate) fn openai() -> String {
        ["sk-", "proj-", &"Xy7kP2".repeat(8), "_Qz9-Lm"].concat()
    }
    pub(crate) fn openai_legacy() -> String {
        ["sk-", &"aB3dE5".repeat(8)].concat()
    }
    pub(crate) fn anthropic() -> String {
        ["sk-", "ant-", "api03-", &"Ab9_c-D".repeat(13), "AA"].concat()
    }
    pub(crate) fn aws_id() -> String {
        ["AKIA", "IOSFODNN7", "EXAMPLE"].concat()
    }
    pub(crate) fn aws_secret() -> String {
        ["wJalrXUtnFEMI", "/K7MDENG/bPxRfiCY", "EXAMPLEKEY"].concat()
    }
    pub(crate) fn github() -> String {
        ["ghp_", &"A1b2C3d4E5".repeat(3), "f6G7h8"].concat()
    }
    pub(crate) fn github_pat() -> String {
        [
            "github_",
            "pat_",
            "11ABCDEFG0",
            "abcdefghijkl_",
            &"Zz09".repeat(14),
        ]
        .concat()
    }
    pub(crate) fn slack() -> String {
        [
            "xoxb",
            "-123456789012",
            "-1234567890123-",
            "AbCdEfGhIjKlMnOpQrStUvWx",
        ]
        .concat()
    }
    pub(crate) fn webhook_path() -> String {
        ["T0A1B2C3D", "/B0A1B2C3D/", "XyZ123abcDEF456ghiJKL789"].concat()
    }
    pub(crate) fn jwt() -> String {
        [
            "eyJhbGciOiJIUzI1NiJ9",
            ".eyJzdWIiOiIxMjM0In0",
            ".Sf1Kx-9aB_cD",
        ]
        .concat()
    }
    pub(crate) fn pem(label: &str, newline: &str) -> String {
        let body = ["MIIEow", "IBAAKCAQEA7", "xYzAbC+/dEf=="].concat();
        let (begin, end) = ("-----BEGIN ", "-----END ");
        format!(
            "{begin}{label}PRIVATE KEY-----{newline}{body}{newline}{body}{newline}{end}{label}PRIVATE KEY-----"
        )
    }

    pub(crate) fn default() -> Redactor {
        Redactor::new(&Config::default()).unwrap()
    }

    fn with(json: &str) -> Result<Redactor> {
        Redactor::new(&serde_json::from_str::<Config>(json).unwrap())
    }

    fn redact(r: &Redactor, text: &str) -> String {
        r.redact(text).unwrap_or_else(|| text.to_owned())
    }

    fn kinds(r: &Redactor, text: &str) -> Vec<String> {
        r.matches(text)
            .into_iter()
            .map(|(k, _)| k.to_owned())
            .collect()
    }

    #[test]
    fn each_kind_is_replaced_by_its_placeholder() {
        let r = with(r#"{"emails": true}"#).unwrap();
        let cases = [
            (format!("key: {}", openai()), "key: [REDACTED:openai-key]"),
            (
                format!("OPENAI_API_KEY={}\n", openai_legacy()),
                "OPENAI_API_KEY=[REDACTED:openai-key]\n",
            ),
            (
                format!("\"{}\"", anthropic()),
                "\"[REDACTED:anthropic-key]\"",
            ),
            (
                format!("id {} ok", aws_id()),
                "id [REDACTED:aws-access-key] ok",
            ),
            (
                format!("aws_secret_access_key = {}", aws_secret()),
                "aws_secret_access_key = [REDACTED:aws-secret-key]",
            ),
            (
                format!("token={}", github()),
                "token=[REDACTED:github-token]",
            ),
            (format!("({})", github_pat()), "([REDACTED:github-token])"),
            (format!("SLACK={}", slack()), "SLACK=[REDACTED:slack-token]"),
            (
                format!(
                    "post to https://hooks.slack.com/services/{} now",
                    webhook_path()
                ),
                "post to https://hooks.slack.com/services/[REDACTED:slack-webhook] now",
            ),
            (
                format!("Authorization: Bearer {}", jwt()),
                "Authorization: Bearer [REDACTED:bearer-token]",
            ),
            (
                format!("key:\n{}\ndone", pem("RSA ", "\n")),
                "key:\n[REDACTED:private-key]\ndone",
            ),
            (
                "DATABASE_URL=postgres://app:s3cr3t-Pw@db.internal:5432/app".into(),
                "DATABASE_URL=postgres://app:[REDACTED:url-password]@db.internal:5432/app",
            ),
            (
                "mail jane.doe+x@example.co.uk.".into(),
                "mail [REDACTED:email].",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(redact(&r, &text), want, "{text}");
        }
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        let r = default();
        let texts = [
            "task-sk-list and sk-learn, risk-assessment-for-the-year-2024",
            "sk-spinner-container-wrapper-2024 is a CSS class",
            "sk-abcdefghijklmnopqrstuvwxyz0123456789 (no uppercase: not a key)",
            "id 123e4567-e89b-12d3-a456-426614174000 at commit 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b",
            "AKIAIOSFODNN7EXAMPLE2 is too long, xAKIAIOSFODNN7EXAMPLE is glued",
            "the bearer of bad news; a Bearer token; Bearer YOUR_API_KEY_HERE; Bearer ${TOKEN}",
            "Bearer <token> and bearer: abc",
            "xoxb-your-token-here and xapp-placeholder",
            "ghp_short and gh_pages_deploy_branch_name_is_long_enough",
            "http://localhost:8080/path and https://example.com:443/a@b",
            "ssh://git@github.com/org/repo.git and git@github.com:org/repo",
            "postgres://app:${DB_PASSWORD}@db/app and redis://:{password}@cache",
            "https://user@host.example/path, mailto:someone",
            "the file begins with `-----BEGIN RSA PRIVATE KEY-----` as usual",
            "aws_secret_access_key = <your secret here>",
            "SecretAccessKey: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY01 (41 characters)",
            "base64: TWFueSBoYW5kcyBtYWtlIGxpZ2h0IHdvcmsu/+==",
            "",
            "ünïcödé ☃ text without secrets: 東京",
        ];
        for text in texts {
            assert_eq!(r.matches(text), [], "{text}");
            assert_eq!(r.redact(text), None, "{text}");
        }
        let r = with(r#"{"emails": true}"#).unwrap();
        let text = "user@localhost, @types/node, pkg@1.2.3, @@, a@b.c, x@-";
        assert_eq!(r.matches(text), [], "{text}");
    }

    #[test]
    fn anthropic_keys_are_not_typed_as_openai_keys() {
        let text = format!("a {} b {}", anthropic(), openai());
        assert_eq!(kinds(&default(), &text), ["anthropic-key", "openai-key"]);
        let only_openai = with(r#"{"kinds": ["openai-key"]}"#).unwrap();
        assert_eq!(kinds(&only_openai, &text), ["openai-key"]);
    }

    #[test]
    fn url_passwords_keep_the_user_and_host() {
        let r = default();
        let cases = [
            (
                "mysql://root:pa:ss@localhost/db",
                "mysql://root:[REDACTED:url-password]@localhost/db",
            ),
            // The password runs to the last `@`, so none of it shows.
            (
                "https://me:p@ss@w0rd@example.com/x",
                "https://me:[REDACTED:url-password]@example.com/x",
            ),
            (
                "redis://:hunter2@[::1]:6379",
                "redis://:[REDACTED:url-password]@[::1]:6379",
            ),
            (
                r#"{"url": "amqp://guest:guest@rabbit:5672"}"#,
                r#"{"url": "amqp://guest:[REDACTED:url-password]@rabbit:5672"}"#,
            ),
        ];
        for (text, want) in cases {
            assert_eq!(redact(&r, text), want);
        }
    }

    #[test]
    fn private_key_blocks_are_replaced_whole() {
        let r = default();
        // Across lines, with any label.
        for label in ["", "RSA ", "EC ", "OPENSSH ", "ENCRYPTED "] {
            let text = format!("cat id:\n{}\n$ ", pem(label, "\n"));
            assert_eq!(
                redact(&r, &text),
                "cat id:\n[REDACTED:private-key]\n$ ",
                "{label}"
            );
        }
        // Windows line ends.
        let text = format!("{}\r\n", pem("", "\r\n"));
        assert_eq!(redact(&r, &text), "[REDACTED:private-key]\r\n");
        // Escaped in JSON, as in tool-call arguments.
        let text = format!(r#"{{"content": "{}\n"}}"#, pem("RSA ", r"\n"));
        assert_eq!(
            redact(&r, &text),
            r#"{"content": "[REDACTED:private-key]\n"}"#
        );
        // Cut off before its END: the marker and the lines of key after it go.
        let full = pem("RSA ", "\n");
        let cut = &full[..full.find("-----END").unwrap()];
        let text = format!("{cut}... (truncated)");
        assert_eq!(redact(&r, &text), "[REDACTED:private-key]... (truncated)");
        let text = format!(r#"{{"out": "{}"}}"#, cut.replace('\n', r"\n"));
        assert_eq!(redact(&r, &text), r#"{"out": "[REDACTED:private-key]"}"#);
        // On one line, as some tools print it.
        let text = format!("KEY='{}'", pem("", " "));
        assert_eq!(redact(&r, &text), "KEY='[REDACTED:private-key]'");
        // An encrypted key in the old format, with its headers.
        let text = pem(
            "RSA ",
            "\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,3F17F5316E2BAC89\n\n",
        );
        assert_eq!(redact(&r, &text), "[REDACTED:private-key]");
        // Markers quoted in code or prose are not a key.
        let (begin, end) = ("-----BEGIN OPENSSH", "-----END OPENSSH");
        let code =
            format!("START = b\"{begin} PRIVATE KEY-----\"\nEND = b\"{end} PRIVATE KEY-----\"");
        assert_eq!(r.redact(&code), None);
        let prose = format!(
            "It starts with {begin} PRIVATE KEY----- and ends with {end} PRIVATE KEY-----."
        );
        assert_eq!(r.redact(&prose), None);
        // Two blocks, two replacements.
        let text = format!("{}\n\n{}", pem("", "\n"), pem("EC ", "\n"));
        assert_eq!(
            redact(&r, &text),
            "[REDACTED:private-key]\n\n[REDACTED:private-key]"
        );
    }

    #[test]
    fn bearer_keeps_the_word_and_defers_to_specific_kinds() {
        let r = default();
        let t = jwt();
        assert_eq!(
            redact(&r, &format!("bearer\t{t}")),
            "bearer\t[REDACTED:bearer-token]"
        );
        assert_eq!(
            redact(&r, &format!("-H 'Authorization: BEARER {t}'")),
            "-H 'Authorization: BEARER [REDACTED:bearer-token]'"
        );
        assert_eq!(
            redact(&r, &format!("Authorization: Bearer {}", openai())),
            "Authorization: Bearer [REDACTED:openai-key]"
        );
        assert_eq!(
            redact(&r, &format!("Bearer {}", github())),
            "Bearer [REDACTED:github-token]"
        );
        // Without the specific kind, the bearer rule takes the token.
        let bearer_only = with(r#"{"kinds": ["bearer-token"]}"#).unwrap();
        assert_eq!(
            redact(&bearer_only, &format!("Bearer {}", openai())),
            "Bearer [REDACTED:bearer-token]"
        );
    }

    #[test]
    fn labelled_aws_secrets_in_their_usual_shapes() {
        let r = default();
        let s = aws_secret();
        for (label, sep) in [
            ("aws_secret_access_key", " = "),
            ("AWS_SECRET_ACCESS_KEY", "="),
            ("export AWS_SECRET_ACCESS_KEY", "=\""),
            ("\"SecretAccessKey\"", ": \""),
            ("\\\"SecretAccessKey\\\"", ": \\\""),
            ("secret_access_key", ": "),
            ("'aws_secret_access_key'", " => '"),
        ] {
            let text = format!("{label}{sep}{s}\"");
            let want = format!("{label}{sep}[REDACTED:aws-secret-key]\"");
            assert_eq!(redact(&r, &text), want);
        }
        // An unlabelled 40-character string is not known to be one.
        assert_eq!(r.redact(&format!("value {s}")), None);
    }

    #[test]
    fn emails_only_when_asked() {
        let text = "write to ops@example.com";
        assert_eq!(default().redact(text), None);
        let r = with(r#"{"emails": true}"#).unwrap();
        assert_eq!(redact(&r, text), "write to [REDACTED:email]");
        let r = with(r#"{"kinds": ["email"]}"#).unwrap();
        assert_eq!(redact(&r, text), "write to [REDACTED:email]");
        // A URL password comes first; its `@host` is no address.
        let r = with(r#"{"emails": true}"#).unwrap();
        assert_eq!(
            redact(&r, "ftp://bob:pw12@files.example.com and bob@example.com"),
            "ftp://bob:[REDACTED:url-password]@files.example.com and [REDACTED:email]"
        );
    }

    #[test]
    fn extra_patterns_run_after_the_built_in_kinds() {
        let r = with(
            r#"{"extra": [
                {"name": "acme-token", "pattern": "acme_[a-z0-9]{8,}"},
                {"name": "pin", "pattern": "PIN:? *(?P<secret>[0-9]{4,6})\\b"},
                {"name": "everything-sk", "pattern": "sk-\\S+"}
            ]}"#,
        )
        .unwrap();
        assert_eq!(
            redact(&r, "use acme_0123abcd9 with PIN 12345 and é acme_zzzzzzzz"),
            "use [REDACTED:acme-token] with PIN [REDACTED:pin] and é [REDACTED:acme-token]"
        );
        // At one position a built-in kind wins over an extra pattern.
        assert_eq!(kinds(&r, &openai()), ["openai-key"]);
        assert_eq!(kinds(&r, "sk-x"), ["everything-sk"]);
    }

    #[test]
    fn literal_prefixes_are_only_taken_when_every_match_has_them() {
        let cases = [
            ("acme_[a-z0-9]{32}", Some("acme_")),
            (r"\bsk_live_[0-9a-zA-Z]{24}", Some("sk_live_")),
            ("tok-?[0-9]+", Some("tok")),
            ("abc{2}", Some("ab")),
            ("a*b", None),
            ("acme_x|other", None),
            ("(?i)acme", None),
            (r"\d{4}", None),
            ("[A-Z]{3}-[0-9]{4}", None),
            ("PIN:? *", Some("PIN")),
        ];
        for (pattern, want) in cases {
            assert_eq!(literal_prefix(pattern).as_deref(), want, "{pattern}");
        }
        // With or without the shortcut, the same matches.
        let text = "x tok7 tok-12 toktok-3 atok9";
        let r = with(r#"{"extra": [{"name": "t", "pattern": "tok-?[0-9]+"}]}"#).unwrap();
        let slow = with(r#"{"extra": [{"name": "t", "pattern": "(?:tok-?[0-9]+)"}]}"#).unwrap();
        assert!(r.extras[0].prefix.is_some() && slow.extras[0].prefix.is_none());
        assert_eq!(r.matches(text), slow.matches(text));
        assert_eq!(r.matches(text).len(), 4);
    }

    #[test]
    fn bad_configurations_say_what_is_wrong() {
        let err = |json: &str| match with(json) {
            Err(agent_host_guest::Error::BadConfig(m)) => m,
            other => panic!("{json}: {:?}", other.map(|_| ())),
        };
        let m = err(r#"{"kinds": ["openai-key", "passwords"]}"#);
        assert!(m.contains("unknown kind \"passwords\""), "{m}");
        assert!(m.contains("private-key, anthropic-key, openai-key"), "{m}");
        assert!(m.contains("url-password, email"), "{m}");

        let m = err(r#"{"extra": [{"name": "acme", "pattern": "acme_[a-z"}]}"#);
        assert!(
            m.contains("extra pattern \"acme\" is not a valid regex"),
            "{m}"
        );
        assert!(m.contains("unclosed character class"), "{m}");

        let m = err(r#"{"extra": [{"name": "opt", "pattern": "x*"}]}"#);
        assert!(m.contains("matches the empty string"), "{m}");
        let m = err(r#"{"extra": [{"name": "email", "pattern": "x"}]}"#);
        assert!(m.contains("already taken"), "{m}");
        let m = err(r#"{"extra": [{"name": "a b", "pattern": "x"}]}"#);
        assert!(m.contains("ASCII letters"), "{m}");
        let m = err(r#"{"kinds": []}"#);
        assert!(m.contains("nothing to look for"), "{m}");
        let m = err(r#"{"placeholder": ""}"#);
        assert!(m.contains("empty"), "{m}");
        let m = err(&format!(r#"{{"placeholder": "<{}>"}}"#, aws_id()));
        assert!(
            m.contains("would itself be redacted as aws-access-key"),
            "{m}"
        );
        let m =
            err(r#"{"placeholder": "{kind}", "extra": [{"name": "kind-x", "pattern": "kind"}]}"#);
        assert!(m.contains("would itself be redacted as kind-x"), "{m}");
    }

    #[test]
    fn custom_placeholders() {
        let r = with(r#"{"placeholder": "<secret {kind}/{kind}>"}"#).unwrap();
        assert_eq!(redact(&r, &github()), "<secret github-token/github-token>");
        let r = with(r#"{"placeholder": "[REDACTED]"}"#).unwrap();
        assert_eq!(
            redact(&r, &format!("{} {}", github(), aws_id())),
            "[REDACTED] [REDACTED]"
        );
    }

    /// Every sample, alone and next to every other with each separator:
    /// redacting twice gives what redacting once gave.
    #[test]
    fn redaction_is_idempotent() {
        let samples = [
            openai(),
            anthropic(),
            aws_id(),
            format!("aws_secret_access_key={}", aws_secret()),
            github(),
            github_pat(),
            slack(),
            format!("https://hooks.slack.com/services/{}", webhook_path()),
            format!("Bearer {}", jwt()),
            pem("RSA ", "\n"),
            "postgres://u:pw@db".into(),
            "a.b@example.org".into(),
            "plain words".into(),
        ];
        for placeholder in ["[REDACTED:{kind}]", "[REDACTED]", "***", "<{kind}>"] {
            let config = format!(r#"{{"emails": true, "placeholder": "{placeholder}"}}"#);
            let r = with(&config).unwrap();
            for a in &samples {
                for b in &samples {
                    for sep in ["", " ", "\n", "-", "_", "/", "@", ":", "x"] {
                        let text = format!("{a}{sep}{b}");
                        let once = redact(&r, &text);
                        assert_eq!(
                            r.redact(&once),
                            None,
                            "{placeholder}: {text:?} gave {once:?}"
                        );
                    }
                }
            }
        }
    }

    /// Regression: a token right after a private key's closing `-----` was
    /// left alone (a `-` is a word character), and redacted on a second run
    /// once the `-----` had become `]`.
    #[test]
    fn a_token_right_after_a_replacement_is_judged_by_the_placeholder() {
        let r = default();
        let text = format!("{}{}", pem("", "\n"), github());
        assert_eq!(
            redact(&r, &text),
            "[REDACTED:private-key][REDACTED:github-token]"
        );
    }

    /// Texts made of pieces that hold secrets, near misses and the bytes
    /// kinds start with, in a pseudo-random order.
    pub(crate) fn mixed_texts() -> Vec<String> {
        let pieces = [
            openai(),
            anthropic(),
            aws_id(),
            aws_secret(),
            github(),
            github_pat(),
            slack(),
            webhook_path(),
            jwt(),
            pem("RSA PRIVATE KEY", "\n"),
            "sk".into(),
            "sk-".into(),
            "task-sk-list".into(),
            "AKIA".into(),
            "ASIA1".into(),
            "secret".into(),
            "SECRET_ACCESS_KEY = ".into(),
            "Bearer ".into(),
            "bearer".into(),
            "gh".into(),
            "ghp_".into(),
            "xoxb-".into(),
            "xapp".into(),
            "hooks.slack.com/services/".into(),
            "https://user:pw@example.com/".into(),
            "://".into(),
            "-----BEGIN ".into(),
            "----".into(),
            "mail me at a.b@example.org".into(),
            "@".into(),
            " ".into(),
            "\n".into(),
            "é語".into(),
            "\"".into(),
            "ordinary words, shells and bees".into(),
            "TICKET-42".into(),
        ];
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        (0..400)
            .map(|_| {
                let n = (next() % 12) as usize;
                (0..n)
                    .map(|_| pieces[(next() % pieces.len() as u64) as usize].as_str())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn the_prefilter_finds_what_stopping_at_every_byte_finds() {
        for config in [
            r#"{}"#,
            r#"{"emails": true}"#,
            r#"{"kinds": ["bearer-token", "url-password"], "extra": [{"name": "ticket", "pattern": "TICKET-[0-9]+"}]}"#,
        ] {
            let fast = with(config).unwrap();
            let mut slow = with(config).unwrap();
            slow.prefilter = false;
            let mut found = 0;
            for text in mixed_texts() {
                let expected = slow.matches(&text);
                found += expected.len();
                assert_eq!(fast.matches(&text), expected, "{config}: {text:?}");
                assert_eq!(fast.redact(&text), slow.redact(&text), "{config}: {text:?}");
            }
            assert!(
                found > 50,
                "{config}: only {found} secrets in the mixed texts"
            );
        }
    }

    #[test]
    fn multibyte_text_around_secrets() {
        let r = with(r#"{"emails": true, "extra": [{"name": "x", "pattern": "é+"}]}"#).unwrap();
        let text = format!("→{}← ünï@exämple.com é", github());
        assert_eq!(
            redact(&r, &text),
            "→[REDACTED:github-token]← ünï@exämple.com [REDACTED:x]"
        );
    }
}
