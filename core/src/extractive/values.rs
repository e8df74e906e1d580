//! The values a summary keeps verbatim: paths, URLs, error lines, commands,
//! identifiers and quantities, and how each is found in a text.

use std::borrow::Cow;
use std::sync::LazyLock;

use aho_corasick::AhoCorasick;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use serde_json::Value;

use crate::message::{MediaRef, Message, Part};

/// Error lines longer than this many characters are cut to it (at a char
/// boundary); the cut line is the value that must appear.
pub const MAX_ERROR_LINE_CHARS: usize = 200;

/// Tokens longer than this many bytes are never taken for paths.
pub const MAX_PATH_BYTES: usize = 200;

/// The words that make a line an error line.
const ERROR_WORDS: [&str; 10] = [
    "error",
    "Error",
    "ERROR",
    "failed",
    "Failed",
    "FAILED",
    "panicked",
    "Traceback",
    "exception",
    "Exception",
];

/// The characters that split text into tokens, besides whitespace.
const TOKEN_SPLIT: [char; 13] = [
    '"', '\'', '`', '(', ')', '[', ']', '{', '}', ',', ';', '|', '=',
];

/// Whether each ASCII character splits tokens: whitespace (as
/// `char::is_whitespace`) or one of [`TOKEN_SPLIT`].
const SPLITS_ASCII: [bool; 128] = {
    let mut table = [false; 128];
    let mut b = 0;
    while b < 128 {
        table[b] = matches!(b, 0x09..=0x0D | 0x20);
        b += 1;
    }
    let mut i = 0;
    while i < TOKEN_SPLIT.len() {
        table[TOKEN_SPLIT[i] as usize] = true;
        i += 1;
    }
    table
};

/// The tokens of a text: `text.split(|c| c.is_whitespace() ||
/// TOKEN_SPLIT.contains(&c))`, empty tokens included, read a byte at a time
/// (a table for ASCII; only the lead bytes of non-ASCII whitespace decoded).
fn tokens(text: &str) -> Tokens<'_> {
    Tokens {
        text,
        at: 0,
        done: false,
    }
}

/// The iterator of [`tokens`].
struct Tokens<'a> {
    text: &'a str,
    at: usize,
    done: bool,
}

impl<'a> Iterator for Tokens<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        if self.done {
            return None;
        }
        let bytes = self.text.as_bytes();
        let start = self.at;
        for (i, &b) in bytes.iter().enumerate().skip(start) {
            let width = if b < 0x80 {
                usize::from(SPLITS_ASCII[usize::from(b)])
            } else if matches!(b, 0xC2 | 0xE1 | 0xE2 | 0xE3) {
                // The lead bytes of U+0085, U+00A0, U+1680, U+2000 to
                // U+205F and U+3000: the only non-ASCII whitespace.
                match self.text[i..].chars().next() {
                    Some(c) if c.is_whitespace() => c.len_utf8(),
                    _ => 0,
                }
            } else {
                0
            };
            if width > 0 {
                self.at = i + width;
                return Some(&self.text[start..i]);
            }
        }
        self.done = true;
        Some(&self.text[start..])
    }
}

/// The kind of a value kept under Important Values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ValueKind {
    /// A file path (see [`paths`]).
    Path,
    /// An `http` or `https` URL (see [`urls`]).
    Url,
    /// A line that reports an error (see [`error_lines`]).
    ErrorLine,
    /// A command a tool ran (the `command` or `cmd` argument of a tool call).
    Command,
    /// An id: a UUID, a hex id, or a token of letters and digits such as
    /// `ZFA04Y` or `credit_card_4421486` (see [`identifiers`]).
    Identifier,
    /// A number with a unit or currency, such as `$305` or `12 MB` (see
    /// [`quantities`]).
    Quantity,
}

impl ValueKind {
    /// Whether a summary must keep values of this kind: paths, URLs and
    /// error lines.
    pub fn is_key(self) -> bool {
        matches!(
            self,
            ValueKind::Path | ValueKind::Url | ValueKind::ErrorLine
        )
    }
}

/// A value found in a text, verbatim.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KeyValue {
    /// What kind of value it is.
    pub kind: ValueKind,
    /// The value, exactly as it appears in the text (error lines trimmed and
    /// cut to [`MAX_ERROR_LINE_CHARS`]).
    pub text: String,
}

/// The key values of one message, in order: the paths, URLs and error lines
/// of its text and tool result content (see [`key_values`]), the paths of its
/// file parts and the URLs of its image parts, then the paths and URLs (not
/// error lines) of its tool call arguments.
///
/// Text that is a JSON document (tool arguments, JSON tool results) is read
/// as its string values, so escapes such as `\/` and `\n` are undone. The
/// system prompt counts like any other message; reasoning and metadata are not
/// read.
///
/// ```
/// use agent_host_core::Message;
/// use agent_host_core::extractive::message_key_values;
///
/// let mut m = Message::assistant("Opening it.");
/// m.push_tool_call("c1", "Read", r#"{"file_path": "\/srv\/app\/main.py"}"#);
/// let values: Vec<String> = message_key_values(&m).into_iter().map(|v| v.text).collect();
/// assert_eq!(values, ["/srv/app/main.py"]);
/// ```
pub fn message_key_values(message: &Message) -> Vec<KeyValue> {
    let mut out = Vec::new();
    let text = message.text();
    for piece in strings_or_text(&text) {
        out.extend(key_values(&piece));
    }
    for part in &message.parts {
        match part {
            Part::File { path, .. } => push_all(&mut out, ValueKind::Path, paths(path)),
            Part::Image {
                source: MediaRef::Url(url),
                ..
            } => push_all(&mut out, ValueKind::Url, urls(url)),
            _ => {}
        }
    }
    for call in &message.tool_calls {
        for piece in strings_or_text(&call.arguments) {
            push_all(&mut out, ValueKind::Path, paths(&piece));
            push_all(&mut out, ValueKind::Url, urls(&piece));
        }
    }
    out
}

/// The key values of a text: its paths ([`paths`]), then its URLs
/// ([`urls`]), then its error lines ([`error_lines`]), each in order of
/// appearance, repeats included.
///
/// ```
/// use agent_host_core::extractive::{KeyValue, ValueKind, key_values};
///
/// let values = key_values("see ./notes.md and https://example.com/x.\nError: disk full");
/// assert_eq!(
///     values,
///     [
///         KeyValue { kind: ValueKind::Path, text: "./notes.md".into() },
///         KeyValue { kind: ValueKind::Url, text: "https://example.com/x".into() },
///         KeyValue { kind: ValueKind::ErrorLine, text: "Error: disk full".into() },
///     ]
/// );
/// ```
pub fn key_values(text: &str) -> Vec<KeyValue> {
    let mut out = Vec::new();
    push_all(&mut out, ValueKind::Path, paths(text));
    push_all(&mut out, ValueKind::Url, urls(text));
    push_all(&mut out, ValueKind::ErrorLine, error_lines(text));
    out
}

/// The URLs of a text, verbatim: `http://` or `https://`, then everything
/// up to the next whitespace or character no URL holds unescaped (`"`, `'`,
/// `<`, `>`, `` ` ``, `\`), with trailing punctuation (`.,;:!?*`, and `)`,
/// `]`, `}` that close nothing inside the URL) stripped.
///
/// ```
/// use agent_host_core::extractive::urls;
///
/// assert_eq!(
///     urls("Docs: (https://docs.rs/serde), see https://en.wikipedia.org/wiki/Rust_(language)."),
///     ["https://docs.rs/serde", "https://en.wikipedia.org/wiki/Rust_(language)"]
/// );
/// ```
pub fn urls(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = 0;
    while let Some(found) = find_scheme(&text[rest..]) {
        let start = rest + found;
        let end = text[start..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`' | '\\'))
            .map_or(text.len(), |n| start + n);
        let url = strip_url_end(&text[start..end]);
        let host = url.split_once("://").map_or("", |(_, host)| host);
        if host.starts_with(|c: char| c.is_alphanumeric() || c == '[') {
            out.push(url);
        }
        rest = end.max(start + 1);
    }
    out
}

/// The file paths of a text, verbatim.
///
/// The text is split into tokens on whitespace and on ``"'`()[]{},;|=``; a
/// token loses leading `*`, trailing `.,;:!?*>` and a trailing `:line` or
/// `:line:column`, and is a path when it
/// - is at most [`MAX_PATH_BYTES`] long, is not a URL (no `://`), and holds
///   only letters, digits and `/._-~@+%#:$*`;
/// - and either starts with `/` (not `//`), `./`, `../` or `~/` and holds a
///   letter, or is relative with a `/`, not at its end, and a last segment
///   with an extension of letters and digits that holds a letter
///   (`src/app/parse.py`, `config/.env`; not `and/or`, `1/2`, `2024/05/20`).
///
/// ```
/// use agent_host_core::extractive::paths;
///
/// assert_eq!(
///     paths("Edit `src/app/parse.py:12:5`, (see ~/notes.md); not and/or, 1/2 or 2024/05/20."),
///     ["src/app/parse.py", "~/notes.md"]
/// );
/// ```
pub fn paths(text: &str) -> Vec<&str> {
    // Every path holds a `/`: most texts have none, or few.
    if memchr::memchr(b'/', text.as_bytes()).is_none() {
        return Vec::new();
    }
    tokens(text)
        .filter(|token| memchr::memchr(b'/', token.as_bytes()).is_some())
        .filter_map(path_of_token)
        .collect()
}

/// The error lines of a text: its lines (split at `\n` and `\r`) that
/// contain `error`, `Error`, `ERROR`, `failed`, `Failed`, `FAILED`,
/// `panicked`, `Traceback`, `exception` or `Exception` and report an error,
/// trimmed and cut to [`MAX_ERROR_LINE_CHARS`] characters.
///
/// A line does not report an error when it is the boilerplate of a Python
/// traceback (`Traceback (most recent call last):`, and the lines that join
/// chained exceptions), or a line of code, with or without the line number a
/// listing puts first (`12:`, `12<tab>`, `src/a.py:12:`): it starts with a
/// keyword or comment marker (`return `, `raise `, `except`, `def `, `if `,
/// `#`, `//`, `let `, ...), or assigns to a name (`errors = []`).
///
/// ```
/// use agent_host_core::extractive::error_lines;
///
/// assert_eq!(
///     error_lines("ok\n  thread 'main' panicked at src/main.rs:3:5  \nFAILED tests/a.py"),
///     ["thread 'main' panicked at src/main.rs:3:5", "FAILED tests/a.py"]
/// );
/// assert_eq!(
///     error_lines("Traceback (most recent call last):\n  raise ValueError(msg)\nValueError: bad\n\
///                  42:        return errors\nsrc/v.py:7:    self.errors = []"),
///     ["ValueError: bad"]
/// );
/// ```
pub fn error_lines(text: &str) -> Vec<&str> {
    static WORDS: LazyLock<AhoCorasick> = LazyLock::new(|| {
        AhoCorasick::new(ERROR_WORDS).expect("a few short literal patterns always build")
    });
    // One pass for all the words, then the line around each match.
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut next_line = 0;
    for found in WORDS.find_iter(text) {
        if found.start() < next_line {
            continue;
        }
        let start = memchr::memrchr2(b'\n', b'\r', &bytes[..found.start()]).map_or(0, |n| n + 1);
        let end = memchr::memchr2(b'\n', b'\r', &bytes[found.end()..])
            .map_or(text.len(), |n| found.end() + n);
        let line = text[start..end].trim();
        if reports_error(line) {
            out.push(cut_chars(line, MAX_ERROR_LINE_CHARS));
        }
        next_line = end + 1;
    }
    out
}

/// Lines that hold an error word but report nothing: the headers of a
/// Python traceback and of chained exceptions.
const BOILERPLATE: [&str; 3] = [
    "Traceback (most recent call last):",
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
];

/// How a line of source code starts (after any line number), as opposed to
/// a report: keywords and comment markers of common languages.
const CODE_STARTS: [&str; 30] = [
    "return ", "return;", "raise ", "raise;", "except", "def ", "class ", "if ", "if(", "elif ",
    "else", "for ", "while ", "import ", "from ", "assert ", "#", "//", "/*", "* ", "fn ", "pub ",
    "let ", "const ", "var ", "try", "catch", "throw ", "@", "with ",
];

/// Whether a line that holds an error word reports an error: not traceback
/// boilerplate, and not a line of code (as `grep -n`, `cat -n` or an editor
/// shows it): one that starts with a keyword or comment marker, or assigns
/// to a name (`errors = []`, `self.error = None`).
fn reports_error(line: &str) -> bool {
    if BOILERPLATE.contains(&line) {
        return false;
    }
    let code = without_line_number(line);
    if CODE_STARTS.iter().any(|start| code.starts_with(start)) {
        return false;
    }
    let name = code
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.'))
        .count();
    let rest = code[name..].trim_start();
    let assigns = name > 0
        && rest.starts_with('=')
        && !rest.starts_with("==")
        && !code.as_bytes()[0].is_ascii_digit();
    !assigns
}

/// A line without the line number a listing puts before it: `12:` / `12-`
/// / `12<tab>` (`grep -n`, `cat -n`, SWE-agent's editor), or `path:12:`
/// (`grep -n` over several files); trimmed.
fn without_line_number(line: &str) -> &str {
    let mut text = line.trim_start();
    if let Some((head, tail)) = text.split_once(':')
        && !head.is_empty()
        && !head.contains(char::is_whitespace)
        && tail.bytes().next().is_some_and(|b| b.is_ascii_digit())
    {
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        if tail[digits..].starts_with([':', '-']) {
            text = &tail[digits + 1..];
            return text.trim_start();
        }
    }
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && text[digits..].starts_with([':', '-', '\t']) {
        text = &text[digits + 1..];
    }
    text.trim_start()
}

/// The identifiers of a text: tokens (split as for [`paths`], trailing
/// `.,;:!?` stripped) of ASCII letters, digits, `_` and `-` that are a UUID,
/// a hex id (7 to 64 hex digits, with a digit and a letter), or 5 to 40
/// characters with a letter and a digit that are either upper case
/// (`ZFA04Y`, `HAT069`) or hold an underscore (`mia_li_3668`).
///
/// ```
/// use agent_host_core::extractive::identifiers;
///
/// assert_eq!(
///     identifiers("Reservation ZFA04Y for mia_li_3668, commit 9f3c2e1; not gpt-4o."),
///     ["ZFA04Y", "mia_li_3668", "9f3c2e1"]
/// );
/// ```
pub fn identifiers(text: &str) -> Vec<&str> {
    tokens(text)
        // No identifier is under 5 bytes, and trimming only shortens.
        .filter(|token| token.len() >= 5)
        .map(|token| token.trim_end_matches(['.', ',', ';', ':', '!', '?']))
        .filter(|token| is_identifier(token))
        .collect()
}

/// The numbers with a unit or currency of a text, verbatim: `$`, `€` or
/// `£` before a number (`$305`, `$1,204.50`), or a number followed, directly
/// or after one space, by a unit such as `%`, `ms`, `s`, `minutes`, `MB`,
/// `GiB`, `tokens`, `dollars`, `USD` (`0.31s`, `12 MB`, `250 dollars`); a
/// number right after a time's colon (`01:31 tests`) is not one.
///
/// ```
/// use agent_host_core::extractive::quantities;
///
/// assert_eq!(
///     quantities("Refund $305 (250 dollars) in 0.31s; 12 MB; flight HAT069 on 2024-05-20."),
///     ["$305", "250 dollars", "0.31s", "12 MB"]
/// );
/// ```
pub fn quantities(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        // Skip to the next digit or currency sign (`€` starts with 0xE2,
        // `£` with 0xC2): nothing else starts a quantity.
        i += bytes[i..]
            .iter()
            .position(|&b| QUANTITY_START_BYTES[usize::from(b)])
            .unwrap_or(bytes.len() - i);
        if i == bytes.len() {
            break;
        }
        let rest = &text[i..];
        let currency = ['$', '€', '£'].into_iter().find(|&c| rest.starts_with(c));
        if let Some(sign) = currency {
            let digits = i + sign.len_utf8();
            if bytes.get(digits).is_some_and(u8::is_ascii_digit) {
                let end = number_end(bytes, digits);
                out.push(&text[i..end]);
                i = end;
                continue;
            }
        }
        // Not the minutes or seconds of a time (`01:31 tests` is a time
        // and a name in a listing, not 31 tests).
        let after_time = i >= 2 && bytes[i - 1] == b':' && bytes[i - 2].is_ascii_digit();
        let starts_word = i == 0
            || !(bytes[i - 1].is_ascii_alphanumeric()
                || matches!(bytes[i - 1], b'.' | b'_' | b'-')
                || after_time);
        if bytes[i].is_ascii_digit() && starts_word {
            let end = number_end(bytes, i);
            let unit_start = if bytes.get(end) == Some(&b' ') {
                end + 1
            } else {
                end
            };
            if let Some(len) = unit_at(&text[unit_start..]) {
                out.push(&text[i..unit_start + len]);
                i = unit_start + len;
            } else {
                i = end;
            }
            continue;
        }
        i += rest.chars().next().map_or(1, char::len_utf8);
    }
    out
}

/// Units recognised after a number.
const UNITS: [&str; 49] = [
    "%", "percent", "dollars", "dollar", "USD", "EUR", "euros", "GBP", "ns", "µs", "us", "ms", "s",
    "sec", "secs", "seconds", "second", "min", "mins", "minutes", "minute", "h", "hr", "hrs",
    "hours", "hour", "days", "day", "weeks", "B", "KB", "kB", "MB", "GB", "TB", "KiB", "MiB",
    "GiB", "TiB", "bytes", "tokens", "words", "lines", "files", "tests", "px", "kg", "km", "miles",
];

/// Whether a byte starts one of [`UNITS`].
const UNIT_FIRST_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut i = 0;
    while i < UNITS.len() {
        table[UNITS[i].as_bytes()[0] as usize] = true;
        i += 1;
    }
    table
};

/// Whether a byte may start a quantity: a digit, `$`, or the lead byte of
/// `€` (0xE2) or `£` (0xC2).
const QUANTITY_START_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = matches!(b as u8, b'0'..=b'9' | b'$' | 0xE2 | 0xC2);
        b += 1;
    }
    table
};

fn push_all(out: &mut Vec<KeyValue>, kind: ValueKind, values: Vec<&str>) {
    out.extend(values.into_iter().map(|text| KeyValue {
        kind,
        text: text.to_owned(),
    }));
}

/// The string values (recursively, object keys aside) of a text that is a
/// JSON object or array, in the order they are written, or the text itself.
///
/// The document is read without being built: a tool result of a few
/// megabytes of JSON costs its strings, not a tree of maps. Every value of a
/// key written twice is read (a built object would keep the last).
pub(super) fn strings_or_text(text: &str) -> Vec<Cow<'_, str>> {
    let trimmed = text.trim_start();
    if trimmed.starts_with(['{', '[']) {
        let mut out = Vec::new();
        let mut reader = serde_json::Deserializer::from_str(trimmed);
        let read = Strings(&mut out)
            .deserialize(&mut reader)
            .and_then(|()| reader.end());
        if read.is_ok() {
            return out;
        }
    }
    vec![Cow::Borrowed(text)]
}

/// Collects the strings of a JSON document into its vector.
struct Strings<'a, 'o>(&'o mut Vec<Cow<'a, str>>);

impl<'a> DeserializeSeed<'a> for Strings<'a, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'a>>(self, reader: D) -> Result<(), D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'a> Visitor<'a> for Strings<'a, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_borrowed_str<E>(self, value: &'a str) -> Result<(), E> {
        self.0.push(Cow::Borrowed(value));
        Ok(())
    }

    fn visit_str<E>(self, value: &str) -> Result<(), E> {
        self.0.push(Cow::Owned(value.to_owned()));
        Ok(())
    }

    fn visit_string<E>(self, value: String) -> Result<(), E> {
        self.0.push(Cow::Owned(value));
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'a>>(self, mut items: A) -> Result<(), A::Error> {
        while items.next_element_seed(Strings(&mut *self.0))?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'a>>(self, mut entries: A) -> Result<(), A::Error> {
        while entries.next_key::<IgnoredAny>()?.is_some() {
            entries.next_value_seed(Strings(&mut *self.0))?;
        }
        Ok(())
    }
}

/// The string values of `parsed` (recursively), or `text` itself.
pub(super) fn json_strings_or_text<'a>(
    text: &'a str,
    parsed: Option<&'a Value>,
) -> Vec<Cow<'a, str>> {
    fn walk<'a>(value: &'a Value, out: &mut Vec<Cow<'a, str>>) {
        match value {
            Value::String(s) => out.push(Cow::Borrowed(s)),
            Value::Array(list) => list.iter().for_each(|v| walk(v, out)),
            Value::Object(map) => map.values().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    match parsed {
        Some(value) => {
            let mut out = Vec::new();
            walk(value, &mut out);
            out
        }
        None => vec![Cow::Borrowed(text)],
    }
}

fn find_scheme(text: &str) -> Option<usize> {
    // The first `http` followed by `://` or `s://`: one pass for both.
    static HTTP: LazyLock<memchr::memmem::Finder<'static>> =
        LazyLock::new(|| memchr::memmem::Finder::new("http"));
    HTTP.find_iter(text.as_bytes()).find(|&at| {
        let rest = &text.as_bytes()[at + 4..];
        rest.starts_with(b"://") || rest.starts_with(b"s://")
    })
}

/// Strips trailing punctuation from a URL, and closing brackets it does not open.
fn strip_url_end(mut url: &str) -> &str {
    loop {
        let Some(last) = url.chars().next_back() else {
            return url;
        };
        let strip = match last {
            '.' | ',' | ';' | ':' | '!' | '?' | '*' => true,
            ')' => url.matches('(').count() < url.matches(')').count(),
            ']' => url.matches('[').count() < url.matches(']').count(),
            '}' => url.matches('{').count() < url.matches('}').count(),
            _ => false,
        };
        if !strip {
            return url;
        }
        url = &url[..url.len() - last.len_utf8()];
    }
}

fn path_of_token(token: &str) -> Option<&str> {
    if token.len() > MAX_PATH_BYTES || memchr::memmem::find(token.as_bytes(), b"://").is_some() {
        return None;
    }
    let mut path = token
        .trim_start_matches('*')
        .trim_end_matches(['.', ',', ';', ':', '!', '?', '*', '>']);
    // `file.rs:12` and `file.rs:12:5` name the file.
    while let Some((head, tail)) = path.rsplit_once(':') {
        if tail.is_empty() || !tail.bytes().all(|b| b.is_ascii_digit()) {
            break;
        }
        path = head;
    }
    if !path.contains('/')
        || path.starts_with("//")
        || !path
            .chars()
            .all(|c| c.is_alphanumeric() || "/._-~@+%#:$*".contains(c))
    {
        return None;
    }
    let rooted = ["/", "./", "../", "~/"].iter().any(|p| path.starts_with(p));
    if rooted {
        return path.chars().any(char::is_alphabetic).then_some(path);
    }
    let (_, last) = path.rsplit_once('/')?;
    let (stem, extension) = last.rsplit_once('.')?;
    let good_extension = (1..=10).contains(&extension.len())
        && extension.chars().all(|c| c.is_ascii_alphanumeric())
        && extension.chars().any(|c| c.is_ascii_alphabetic());
    let good_stem = stem.is_empty() || stem.chars().any(|c| c.is_alphanumeric());
    (good_extension && good_stem).then_some(path)
}

fn is_identifier(token: &str) -> bool {
    let bytes = token.as_bytes();
    // Every kind below is 5 to 64 bytes long.
    if !(5..=64).contains(&bytes.len()) {
        return false;
    }
    if !bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
    {
        return false;
    }
    let has_digit = bytes.iter().any(u8::is_ascii_digit);
    let has_letter = bytes.iter().any(u8::is_ascii_alphabetic);
    let is_uuid = bytes.len() == 36
        && bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    let is_hex = (7..=64).contains(&bytes.len())
        && bytes.iter().all(u8::is_ascii_hexdigit)
        && has_digit
        && has_letter;
    let mixed = (5..=40).contains(&bytes.len())
        && has_digit
        && has_letter
        && bytes[0].is_ascii_alphanumeric()
        && (!bytes.iter().any(u8::is_ascii_lowercase) || bytes.contains(&b'_'));
    is_uuid || is_hex || mixed
}

/// The end of the number that starts at `start`: digits, with `,` or `.`
/// between groups of digits.
fn number_end(bytes: &[u8], start: usize) -> usize {
    let mut end = start;
    loop {
        while bytes.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
        let separated = matches!(bytes.get(end), Some(b'.' | b','))
            && bytes.get(end + 1).is_some_and(u8::is_ascii_digit);
        if !separated {
            return end;
        }
        end += 1;
    }
}

/// The length of the unit at the start of `text`, if one ends a word there.
fn unit_at(text: &str) -> Option<usize> {
    // Most numbers are followed by no unit's first byte (`,`, `}`, `"`).
    if !text
        .as_bytes()
        .first()
        .is_some_and(|&b| UNIT_FIRST_BYTES[usize::from(b)])
    {
        return None;
    }
    UNITS
        .iter()
        .filter(|unit| text.starts_with(*unit))
        .filter(|unit| {
            !text[unit.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
        .map(|unit| unit.len())
        .max()
}

/// The value kind of a bullet read back from a summary.
pub(super) fn classify_value(value: &str) -> ValueKind {
    if urls(value) == [value] {
        ValueKind::Url
    } else if paths(value) == [value] {
        ValueKind::Path
    } else if error_lines(value) == [value] {
        ValueKind::ErrorLine
    } else if is_identifier(value) {
        ValueKind::Identifier
    } else if quantities(value) == [value] {
        ValueKind::Quantity
    } else {
        ValueKind::Command
    }
}

/// The first `max` characters of `text`.
pub(super) fn cut_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((end, _)) => text[..end].trim_end(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The tokenizer splits as `str::split` with the predicate it stands
    /// for (issue 23: it replaced it), on every ASCII character and every
    /// whitespace character.
    #[test]
    fn tokens_split_as_the_predicate_does() {
        let split = |text: &str| -> Vec<String> {
            text.split(|c: char| c.is_whitespace() || TOKEN_SPLIT.contains(&c))
                .map(str::to_owned)
                .collect()
        };
        let mut texts: Vec<String> = vec![String::new(), " ".into(), "a".into()];
        let specials = [
            '\u{85}',
            '\u{a0}',
            '\u{1680}',
            '\u{2000}',
            '\u{200a}',
            '\u{2028}',
            '\u{2029}',
            '\u{202f}',
            '\u{205f}',
            '\u{3000}',
            '\u{a1}',
            '\u{e9}',
            '\u{1681}',
            '\u{2010}',
            '\u{2060}',
            '\u{3001}',
            '\u{20ac}',
            '\u{1f600}',
        ];
        for c in (0u8..128).map(char::from).chain(specials) {
            texts.push(format!("x{c}y"));
            texts.push(format!("{c}{c}ab{c}"));
        }
        texts.push("héllo wörld\u{a0}€5 (a/b.rs), [x]=1;\u{3000}end ".into());
        for text in &texts {
            assert_eq!(tokens(text).collect::<Vec<_>>(), split(text), "{text:?}");
        }
    }

    #[test]
    fn key_values_follow_their_definitions() {
        assert_eq!(
            urls(
                "<https://a.example/x>, \"http://b.example/y?q=1\"; https://c.example/(z)). https:// x"
            ),
            [
                "https://a.example/x",
                "http://b.example/y?q=1",
                "https://c.example/(z)"
            ]
        );
        assert_eq!(
            paths(
                "a/b 1/2 2024/05/20 and/or km/h ./run.sh ../x ~/y /etc/hosts // /* */ src/main.rs:3"
            ),
            ["./run.sh", "../x", "~/y", "/etc/hosts", "src/main.rs"]
        );
        assert_eq!(paths("https://example.com/a/b.html"), Vec::<&str>::new());
        assert_eq!(paths("</div> <span/> /^\\d+$/"), Vec::<&str>::new());
        assert_eq!(
            paths(&format!("/{}.rs", "a".repeat(MAX_PATH_BYTES))),
            Vec::<&str>::new()
        );
        // Long error lines are cut at a char boundary, and the cut is the value.
        let long = format!("error: {}", "é".repeat(300));
        let cut = error_lines(&long);
        assert_eq!(cut[0].chars().count(), MAX_ERROR_LINE_CHARS);
        assert!(long.starts_with(cut[0]));
        assert_eq!(error_lines("fine\r\nall good"), Vec::<&str>::new());
    }

    /// The error lines as found before one search looked for every word:
    /// each line searched for each word.
    fn error_lines_line_by_line(text: &str) -> Vec<&str> {
        text.split(['\n', '\r'])
            .filter(|line| ERROR_WORDS.iter().any(|word| line.contains(word)))
            .filter(|line| reports_error(line.trim()))
            .map(|line| cut_chars(line.trim(), MAX_ERROR_LINE_CHARS))
            .collect()
    }

    /// The strings of a built JSON value, in order.
    fn strings_of_value(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::String(s) => out.push(s.clone()),
            Value::Array(list) => list.iter().for_each(|v| strings_of_value(v, out)),
            Value::Object(map) => map.values().for_each(|v| strings_of_value(v, out)),
            _ => {}
        }
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "[a-z/\\\"\n é.]{0,12}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z]{1,3}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn tokens_are_the_split_of_any_text(
            text in "(a|1|/|\\.| |\t|\n|\"|'|\\(|\\]|,|=|é|\u{a0}|\u{2003}|\u{3000}|\u{2010}|€){0,30}",
        ) {
            let split: Vec<&str> = text
                .split(|c: char| c.is_whitespace() || TOKEN_SPLIT.contains(&c))
                .collect();
            prop_assert_eq!(tokens(&text).collect::<Vec<_>>(), split);
        }

        #[test]
        fn one_search_finds_the_error_lines_of_a_search_per_line(
            text in "(error|Failed|ok|\\.|x|\n|\r| |é|Traceback|FAILED){0,30}",
        ) {
            prop_assert_eq!(error_lines(&text), error_lines_line_by_line(&text));
        }

        // Reading a document's strings without building it gives the strings
        // of the built document, in the same order (keys are unique here).
        #[test]
        fn strings_are_read_as_a_built_document_holds_them(value in json_value()) {
            let text = value.to_string();
            let mut expected = Vec::new();
            strings_of_value(&value, &mut expected);
            if !matches!(value, Value::Array(_) | Value::Object(_)) {
                expected = vec![text.clone()];
            }
            let read: Vec<String> = strings_or_text(&text).into_iter().map(Cow::into_owned).collect();
            prop_assert_eq!(read, expected);
        }
    }

    #[test]
    fn broken_json_is_read_as_text() {
        for text in ["{\"a\": \"x\"", "[1, 2] trailing", "{\"a\": tru}"] {
            assert_eq!(strings_or_text(text), [text]);
        }
        assert_eq!(
            strings_or_text("  [\"a\\/b\", {\"k\": [\"c\"]}]  "),
            ["a/b", "c"]
        );
        // A key written twice: both values are read.
        assert_eq!(
            strings_or_text(r#"{"k": "one", "k": "two"}"#),
            ["one", "two"]
        );
    }

    #[test]
    fn quantities_skip_other_multibyte_characters() {
        assert_eq!(
            quantities("—5 ms, €12, £3.50 and ¥7 in 2 µs"),
            ["5 ms", "€12", "£3.50", "2 µs"]
        );
    }

    #[test]
    fn json_tool_results_are_read_as_their_strings() {
        let result = Message::tool_result(
            "c1",
            "get",
            r#"{"log": "loaded \/opt\/app\/main.py\nValueError: bad input", "n": 3}"#,
        );
        let values: Vec<String> = message_key_values(&result)
            .into_iter()
            .map(|v| v.text)
            .collect();
        assert_eq!(values, ["/opt/app/main.py", "ValueError: bad input"]);
    }
}
