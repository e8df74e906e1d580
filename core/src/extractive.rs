//! The extractive summarizer: the seeds' structured summary written from the
//! messages themselves, with no model.
//!
//! [`ExtractiveSummarizer`] reads a span of the log, pulls out the facts worth
//! keeping ([`extract_facts`]) and writes them under five headings, always
//! present and always in this order:
//!
//! - `## Files Modified`: paths given to tools that write or edit files
//!   (tool names containing `edit`, `write`, `create`, `str_replace`, `patch`
//!   or `insert`, with a `file_path`, `path`, `notebook_path`, ... argument);
//! - `## Key Decisions`: short sentences of the assistant that announce a
//!   decision (`I'll`, `I will`, `Let's`, `decided`, `instead`, `because`, ...);
//! - `## Important Values`: error lines, URLs, other paths, commands,
//!   identifiers and numbers with units, each one verbatim in a bullet (in
//!   backticks, unless the value itself holds a backtick); when that would
//!   leave out a key value, one-word values share bullets, eight to a bullet
//!   (`` - `a.rs` `b.rs` ``);
//! - `## Current State`: the last thing the assistant said, shortened;
//! - `## Pending Tasks`: the user's unanswered requests, the open items of the
//!   last todo list, and TODO-like lines.
//!
//! The values a summary must keep (its *key values*: file paths, URLs and
//! error lines, see [`key_values`] and [`message_key_values`]) are defined
//! here precisely, so that the quality of a summary can be measured: the
//! share of the key values of a span that appear verbatim in its summary.
//!
//! Within the word cap, facts are ranked by frequency (in how many messages
//! they appear) plus recency (how late they were last seen); key values and
//! modified files come before the other values, and the lowest-ranked facts
//! are dropped first. A value that already appears verbatim inside a kept
//! one (a path inside an error line) costs nothing.
//!
//! What it deliberately leaves out: reasoning (thinking) text and message
//! metadata are not read; nothing is paraphrased.
//!
//! ```
//! use agent_host_core::Message;
//! use agent_host_core::extractive::ExtractiveSummarizer;
//! use agent_host_core::summarize::{Summarizer, SummaryRequest};
//!
//! let mut call = Message::assistant("I'll fix the parser instead of the lexer.");
//! call.push_tool_call("c1", "Edit", r#"{"file_path": "/repo/src/parse.rs"}"#);
//! let messages = [
//!     Message::user("cargo test fails"),
//!     call,
//!     Message::tool_result("c1", "Edit", "error[E0308]: mismatched types"),
//! ];
//! let summary = ExtractiveSummarizer::default()
//!     .summarize(&SummaryRequest {
//!         messages: &messages,
//!         previous: None,
//!         partials: &[],
//!         max_words: 600,
//!     })
//!     .unwrap();
//! assert!(summary.starts_with("## Files Modified\n- `/repo/src/parse.rs`"));
//! assert!(summary.contains("error[E0308]: mismatched types"));
//! assert!(summary.contains("I'll fix the parser instead of the lexer."));
//! ```

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::message::{MediaRef, Message, Part, Role};
use crate::summarize::{Summarizer, SummaryError, SummaryRequest};

/// Error lines longer than this many characters are cut to it (at a char
/// boundary); the cut line is the value that must appear.
pub const MAX_ERROR_LINE_CHARS: usize = 200;

/// Tokens longer than this many bytes are never taken for paths.
pub const MAX_PATH_BYTES: usize = 200;

/// The words of the five section headings: the smallest summary there is.
pub const MIN_WORDS: usize = 15;

/// The section headings, in order.
const HEADINGS: [&str; 5] = [
    "Files Modified",
    "Key Decisions",
    "Important Values",
    "Current State",
    "Pending Tasks",
];

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

/// The most words of a kept decision, task or command.
const ITEM_WORDS: usize = 25;

/// The most unanswered user messages taken for pending tasks (the last ones).
const UNANSWERED: usize = 3;

/// The most characters of a kept command.
const MAX_COMMAND_CHARS: usize = 200;

/// The extractive summarizer; see the [module documentation](self).
///
/// Its fields tune how the word cap is shared; the defaults suit the seeds'
/// 600 words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExtractiveSummarizer {
    /// The most words of the Current State (default 60), and never more than
    /// a tenth of the cap.
    pub state_words: usize,
    /// The share of the cap, in percent, that Key Decisions and Pending Tasks
    /// each get before the key values are placed (default 8); they may grow
    /// into what the values leave.
    pub reserved_percent: usize,
}

impl Default for ExtractiveSummarizer {
    fn default() -> Self {
        ExtractiveSummarizer {
            state_words: 60,
            reserved_percent: 8,
        }
    }
}

impl Summarizer for ExtractiveSummarizer {
    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, SummaryError> {
        if request.max_words < MIN_WORDS {
            return Err(SummaryError::Failed(format!(
                "a word cap of {} is too small for the summary's five headings; \
                 allow at least {MIN_WORDS} words",
                request.max_words
            )));
        }
        let mut facts = request
            .previous
            .map(Facts::from_summary)
            .unwrap_or_default();
        if !request.messages.is_empty() {
            facts.append(extract_facts(request.messages));
        } else {
            for partial in request.partials {
                facts.append(Facts::from_summary(partial));
            }
        }
        Ok(self.render(&facts, request.max_words))
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

/// What a fact is, which decides the section it goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum FactKind {
    /// A path written or edited by a tool (Files Modified).
    FileModified,
    /// A sentence announcing a decision (Key Decisions).
    Decision,
    /// A value kept verbatim (Important Values).
    Value(ValueKind),
    /// Something still to do (Pending Tasks).
    PendingTask,
}

/// One fact of a span, with what ranks it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fact {
    /// What it is.
    pub kind: FactKind,
    /// Its text, verbatim.
    pub text: String,
    /// In how many messages (or merged summaries) it appears.
    pub count: u32,
    /// The position where it was last seen (a message index for
    /// [`extract_facts`]); higher is more recent.
    pub last_seen: usize,
}

/// The facts of a span, ready to be written as a summary.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// The facts, in the order they were first seen.
    pub facts: Vec<Fact>,
    /// The last thing the assistant said, whitespace collapsed.
    pub current_state: Option<String>,
    /// The number of positions facts were taken from (messages, or the items
    /// of a parsed summary); the scale of [`Fact::last_seen`].
    pub span: usize,
    index: HashMap<(FactKind, String), usize>,
}

impl Facts {
    /// The facts of one kind, in the order they were first seen.
    pub fn of_kind(&self, kind: FactKind) -> impl Iterator<Item = &Fact> {
        self.facts.iter().filter(move |f| f.kind == kind)
    }

    /// Records `text` as a fact of `kind` seen at `position`. Seeing it again
    /// at the same position does not count twice.
    fn add(&mut self, kind: FactKind, text: &str, position: usize) {
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        self.span = self.span.max(position + 1);
        if let Some(&i) = self.index.get(&(kind, text.to_owned())) {
            let fact = &mut self.facts[i];
            if fact.last_seen != position {
                fact.count += 1;
                fact.last_seen = fact.last_seen.max(position);
            }
            return;
        }
        self.index.insert((kind, text.to_owned()), self.facts.len());
        self.facts.push(Fact {
            kind,
            text: text.to_owned(),
            count: 1,
            last_seen: position,
        });
    }

    /// Adds the facts of a later span: their positions come after these,
    /// counts of facts seen in both add up, and a later current state
    /// replaces this one.
    pub fn append(&mut self, later: Facts) {
        let offset = self.span;
        for fact in later.facts {
            let position = fact.last_seen + offset;
            match self.index.get(&(fact.kind, fact.text.clone())) {
                Some(&i) => {
                    let mine = &mut self.facts[i];
                    mine.count += fact.count;
                    mine.last_seen = mine.last_seen.max(position);
                }
                None => {
                    self.index
                        .insert((fact.kind, fact.text.clone()), self.facts.len());
                    self.facts.push(Fact {
                        last_seen: position,
                        ..fact
                    });
                }
            }
        }
        self.span = offset + later.span;
        if later.current_state.is_some() {
            self.current_state = later.current_state;
        }
    }

    /// Reads back a summary written by this summarizer (a previous
    /// checkpoint, or one part of a large span).
    ///
    /// Every bullet becomes a fact of its section; values are classified
    /// again by their shape. Earlier bullets were ranked higher, so they get
    /// later positions. Unknown sections and `none` lines are ignored.
    pub fn from_summary(text: &str) -> Facts {
        let mut section = None;
        let mut items: Vec<(FactKind, &str)> = Vec::new();
        let mut state: Vec<&str> = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if let Some(title) = line.strip_prefix("## ") {
                section = HEADINGS
                    .iter()
                    .position(|h| h.eq_ignore_ascii_case(title.trim()));
                continue;
            }
            let item = line
                .strip_prefix("- ")
                .or_else(|| line.strip_prefix("* "))
                .unwrap_or(line)
                .trim();
            if item.is_empty() || item.eq_ignore_ascii_case("none") {
                continue;
            }
            match section {
                Some(0) => items.push((FactKind::FileModified, unquote(item))),
                Some(1) => items.push((FactKind::Decision, item)),
                Some(2) => {
                    for value in bullet_values(item) {
                        items.push((FactKind::Value(classify_value(value)), value));
                    }
                }
                Some(3) => state.push(line),
                Some(4) => items.push((FactKind::PendingTask, item)),
                _ => {}
            }
        }
        let mut facts = Facts::default();
        let last = items.len();
        for (rank, (kind, text)) in items.into_iter().enumerate() {
            facts.add(kind, text, last - 1 - rank);
        }
        facts.span = last;
        if !state.is_empty() {
            facts.current_state = Some(state.join(" "));
        }
        facts
    }
}

/// The facts of a span of messages, each counted once per message it
/// appears in, with the message index as its position.
///
/// - every message's key values ([`message_key_values`]) become values;
/// - tool calls that write or edit files give Files Modified, and the
///   `command` / `cmd` arguments of other tool calls give commands;
/// - user and assistant text and tool arguments give identifiers; user and
///   assistant text gives numbers with units and TODO-like lines
///   (`- [ ]`, `TODO`, `Next:`, `Remaining`);
/// - assistant text gives decisions and the current state;
/// - the open items of the last todo list (a tool call with a `todos`
///   argument) and the user messages after the last assistant text are
///   pending tasks (at most the last three of those messages).
///
/// ```
/// use agent_host_core::Message;
/// use agent_host_core::extractive::{FactKind, ValueKind, extract_facts};
///
/// let facts = extract_facts(&[
///     Message::user("The upload to https://example.com/api is 12 MB."),
///     Message::assistant("I'll retry the upload."),
/// ]);
/// let urls: Vec<_> = facts.of_kind(FactKind::Value(ValueKind::Url)).collect();
/// assert_eq!(urls[0].text, "https://example.com/api");
/// assert_eq!(facts.of_kind(FactKind::Value(ValueKind::Quantity)).next().unwrap().text, "12 MB");
/// assert_eq!(facts.current_state.as_deref(), Some("I'll retry the upload."));
/// ```
pub fn extract_facts(messages: &[Message]) -> Facts {
    let mut facts = Facts::default();
    let mut last_text = None;
    let mut todos: Option<(usize, Vec<String>)> = None;
    for (position, message) in messages.iter().enumerate() {
        for value in message_key_values(message) {
            facts.add(FactKind::Value(value.kind), &value.text, position);
        }
        let text = message.text();
        let said = matches!(message.role, Role::User | Role::Assistant);
        if said {
            for id in identifiers(&text) {
                facts.add(FactKind::Value(ValueKind::Identifier), id, position);
            }
            for quantity in quantities(&text) {
                facts.add(FactKind::Value(ValueKind::Quantity), quantity, position);
            }
            for task in todo_lines(&text) {
                facts.add(FactKind::PendingTask, &shorten(task, ITEM_WORDS), position);
            }
        }
        if message.role == Role::Assistant && !text.trim().is_empty() {
            for decision in decisions(&text) {
                facts.add(FactKind::Decision, &shorten(decision, ITEM_WORDS), position);
            }
            last_text = Some(position);
        }
        for call in &message.tool_calls {
            let arguments: Option<Value> = serde_json::from_str(&call.arguments).ok();
            for piece in json_strings_or_text(&call.arguments, arguments.as_ref()) {
                for id in identifiers(&piece) {
                    facts.add(FactKind::Value(ValueKind::Identifier), id, position);
                }
            }
            let Some(Value::Object(arguments)) = arguments else {
                continue;
            };
            if is_edit_tool(&call.name) {
                let viewing = arguments.get("command").and_then(Value::as_str) == Some("view");
                for key in PATH_ARGUMENTS {
                    match arguments.get(key).and_then(Value::as_str).map(str::trim) {
                        Some(path) if !viewing && is_one_line(path, MAX_PATH_BYTES) => {
                            facts.add(FactKind::FileModified, path, position);
                        }
                        _ => {}
                    }
                }
            } else {
                for key in ["command", "cmd"] {
                    if let Some(command) = arguments.get(key).and_then(Value::as_str) {
                        let line = command.trim().lines().next().unwrap_or("");
                        let line = cut_chars(line.trim(), MAX_COMMAND_CHARS);
                        facts.add(FactKind::Value(ValueKind::Command), line, position);
                    }
                }
            }
            if let Some(Value::Array(list)) = arguments.get("todos") {
                let open = list
                    .iter()
                    .filter(|todo| todo.get("status").and_then(Value::as_str) != Some("completed"))
                    .filter_map(|todo| todo.get("content").and_then(Value::as_str))
                    .map(|content| shorten(content, ITEM_WORDS))
                    .collect();
                todos = Some((position, open));
            }
        }
    }
    if let Some((position, open)) = todos {
        for task in open {
            facts.add(FactKind::PendingTask, &task, position);
        }
    }
    let answered = last_text.map_or(0, |i| i + 1);
    let unanswered: Vec<usize> = (answered..messages.len())
        .filter(|&i| messages[i].role == Role::User && !messages[i].synthetic)
        .collect();
    for &i in unanswered.iter().rev().take(UNANSWERED).rev() {
        facts.add(
            FactKind::PendingTask,
            &shorten(&messages[i].text(), ITEM_WORDS),
            i,
        );
    }
    facts.current_state = last_text.map(|i| collapse(&messages[i].text()));
    facts.span = messages.len();
    facts
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
    let parsed = parse_json_document(&text);
    for piece in json_strings_or_text(&text, parsed.as_ref()) {
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
        let parsed = parse_json_document(&call.arguments);
        for piece in json_strings_or_text(&call.arguments, parsed.as_ref()) {
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
    text.split(|c: char| c.is_whitespace() || TOKEN_SPLIT.contains(&c))
        .filter_map(path_of_token)
        .collect()
}

/// The error lines of a text: its lines (split at `\n` and `\r`) that
/// contain `error`, `Error`, `ERROR`, `failed`, `Failed`, `FAILED`,
/// `panicked`, `Traceback`, `exception` or `Exception`, trimmed and cut to
/// [`MAX_ERROR_LINE_CHARS`] characters.
///
/// ```
/// use agent_host_core::extractive::error_lines;
///
/// assert_eq!(
///     error_lines("ok\n  thread 'main' panicked at src/main.rs:3:5  \nFAILED tests/a.py"),
///     ["thread 'main' panicked at src/main.rs:3:5", "FAILED tests/a.py"]
/// );
/// ```
pub fn error_lines(text: &str) -> Vec<&str> {
    text.split(['\n', '\r'])
        .filter(|line| ERROR_WORDS.iter().any(|word| line.contains(word)))
        .map(|line| cut_chars(line.trim(), MAX_ERROR_LINE_CHARS))
        .collect()
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
    text.split(|c: char| c.is_whitespace() || TOKEN_SPLIT.contains(&c))
        .map(|token| token.trim_end_matches(['.', ',', ';', ':', '!', '?']))
        .filter(|token| is_identifier(token))
        .collect()
}

/// The numbers with a unit or currency of a text, verbatim: `$`, `€` or
/// `£` before a number (`$305`, `$1,204.50`), or a number followed, directly
/// or after one space, by a unit such as `%`, `ms`, `s`, `minutes`, `MB`,
/// `GiB`, `tokens`, `dollars`, `USD` (`0.31s`, `12 MB`, `250 dollars`).
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
        let starts_word = i == 0
            || !(bytes[i - 1].is_ascii_alphanumeric()
                || matches!(bytes[i - 1], b'.' | b'_' | b'-'));
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

/// The number of words of a text: its whitespace-separated tokens. This is
/// how the word cap is counted.
pub fn word_count(text: &str) -> usize {
    text.split_whitespace().count()
}

/// Arguments that name the file a writing tool changes.
const PATH_ARGUMENTS: [&str; 7] = [
    "file_path",
    "path",
    "notebook_path",
    "filename",
    "filepath",
    "target_file",
    "file",
];

/// Units recognised after a number.
const UNITS: [&str; 49] = [
    "%", "percent", "dollars", "dollar", "USD", "EUR", "euros", "GBP", "ns", "µs", "us", "ms", "s",
    "sec", "secs", "seconds", "second", "min", "mins", "minutes", "minute", "h", "hr", "hrs",
    "hours", "hour", "days", "day", "weeks", "B", "KB", "kB", "MB", "GB", "TB", "KiB", "MiB",
    "GiB", "TiB", "bytes", "tokens", "words", "lines", "files", "tests", "px", "kg", "km", "miles",
];

/// The words that mark a sentence as a decision.
const DECISION_MARKERS: [&str; 10] = [
    "I'll ",
    "I will ",
    "Let's ",
    "We'll ",
    "we'll ",
    "decided",
    "decision",
    "instead",
    "because",
    "going to ",
];

/// Whether a tool writes or edits files.
fn is_edit_tool(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    !name.contains("todo")
        && ["edit", "write", "create", "str_replace", "patch", "insert"]
            .iter()
            .any(|k| name.contains(k))
}

fn is_one_line(text: &str, max_bytes: usize) -> bool {
    !text.is_empty() && text.len() <= max_bytes && !text.contains(['\n', '\r'])
}

fn push_all(out: &mut Vec<KeyValue>, kind: ValueKind, values: Vec<&str>) {
    out.extend(values.into_iter().map(|text| KeyValue {
        kind,
        text: text.to_owned(),
    }));
}

/// The JSON value of a text that looks like a JSON object or array.
fn parse_json_document(text: &str) -> Option<Value> {
    let trimmed = text.trim_start();
    if trimmed.starts_with(['{', '[']) {
        serde_json::from_str(trimmed).ok()
    } else {
        None
    }
}

/// The string values of `parsed` (recursively), or `text` itself.
fn json_strings_or_text<'a>(text: &'a str, parsed: Option<&'a Value>) -> Vec<Cow<'a, str>> {
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
    let http = text.find("http://");
    let https = text.find("https://");
    match (http, https) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
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
    if token.len() > MAX_PATH_BYTES || token.contains("://") {
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
fn classify_value(value: &str) -> ValueKind {
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

/// A bullet's value without the backticks the summary put around it.
fn unquote(item: &str) -> &str {
    match item.strip_prefix('`').and_then(|s| s.strip_suffix('`')) {
        Some(inner) if !inner.is_empty() && !inner.contains('`') => inner,
        _ => item,
    }
}

/// The values of an Important Values bullet: one value, or several one-word
/// values in backticks separated by spaces (a packed bullet).
fn bullet_values(item: &str) -> Vec<&str> {
    let pieces: Vec<&str> = item.split_whitespace().collect();
    let packed = pieces.len() > 1
        && pieces.iter().all(|p| {
            p.len() > 2 && p.starts_with('`') && p.ends_with('`') && p.matches('`').count() == 2
        });
    if packed {
        pieces.into_iter().map(|p| &p[1..p.len() - 1]).collect()
    } else {
        vec![unquote(item)]
    }
}

/// A value as a bullet: in backticks, unless it holds one.
fn bullet(value: &str) -> String {
    if value.contains('`') {
        format!("- {value}")
    } else {
        format!("- `{value}`")
    }
}

/// The first `max` characters of `text`.
fn cut_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((end, _)) => text[..end].trim_end(),
        None => text,
    }
}

/// Whitespace collapsed to single spaces.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first `max` words of `text`, whitespace collapsed, with `…` when cut.
fn shorten(text: &str, max: usize) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.len() <= max {
        return words.join(" ");
    }
    let mut short = words[..max].join(" ");
    short.push('…');
    short
}

/// Lines of prose: outside code fences, without list and heading markers or
/// bold, never starting with `#`.
fn prose_lines(text: &str) -> Vec<&str> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut line = line.trim_start_matches(['#', '>', '-', '*', '+', ' ']);
        let numbered = line
            .find(". ")
            .filter(|&n| n > 0 && line[..n].bytes().all(|b| b.is_ascii_digit()));
        if let Some(n) = numbered {
            line = &line[n + 2..];
        }
        let line = line.trim_matches('*').trim();
        if !line.is_empty() {
            out.push(line);
        }
    }
    out
}

/// The sentences of assistant prose that announce a decision.
fn decisions(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in prose_lines(text) {
        let mut start = 0;
        let bytes = line.as_bytes();
        for i in 0..bytes.len() {
            let ends = matches!(bytes[i], b'.' | b'!' | b'?')
                && bytes.get(i + 1).is_none_or(|b| b.is_ascii_whitespace());
            if ends || i + 1 == bytes.len() {
                let sentence = line[start..=i].trim();
                if DECISION_MARKERS.iter().any(|m| sentence.contains(m)) {
                    out.push(sentence);
                }
                start = i + 1;
            }
        }
    }
    out
}

/// TODO-like lines: unchecked boxes, `TODO`, `Next:` / `Next steps`, and
/// `Remaining`.
fn todo_lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(task) = line
            .strip_prefix("- [ ]")
            .or_else(|| line.strip_prefix("* [ ]"))
        {
            out.push(task.trim());
            continue;
        }
        let lower = line
            .trim_start_matches(['#', '-', '*', ' '])
            .to_ascii_lowercase();
        let todo = line.starts_with("TODO") || line.contains("TODO:") || line.contains("TODO(");
        if todo
            || lower.starts_with("next:")
            || lower.starts_with("next step")
            || lower.starts_with("remaining")
        {
            out.push(line);
        }
    }
    out
}

/// The sections of a summary, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Section {
    FilesModified,
    KeyDecisions,
    ImportantValues,
    CurrentState,
    PendingTasks,
}

impl Section {
    const ALL: [Section; 5] = [
        Section::FilesModified,
        Section::KeyDecisions,
        Section::ImportantValues,
        Section::CurrentState,
        Section::PendingTasks,
    ];

    fn of(kind: FactKind) -> Section {
        match kind {
            FactKind::FileModified => Section::FilesModified,
            FactKind::Decision => Section::KeyDecisions,
            FactKind::Value(_) => Section::ImportantValues,
            FactKind::PendingTask => Section::PendingTasks,
        }
    }
}

/// How many one-word values share a bullet when values are packed.
const PACK: usize = 8;

/// The order of value kinds under Important Values.
const VALUE_ORDER: [ValueKind; 6] = [
    ValueKind::ErrorLine,
    ValueKind::Url,
    ValueKind::Path,
    ValueKind::Command,
    ValueKind::Identifier,
    ValueKind::Quantity,
];

/// A piece of text chosen for the summary.
struct Chosen {
    section: Section,
    /// The value kind, for Important Values.
    kind: Option<ValueKind>,
    /// The text, verbatim.
    text: String,
    /// Its words.
    words: usize,
    /// Whether it shares a bullet with others of its kind when packed: a
    /// one-word value without backticks.
    packable: bool,
}

impl Chosen {
    fn new(section: Section, kind: Option<ValueKind>, text: &str) -> Self {
        let words = word_count(text);
        Chosen {
            section,
            kind,
            text: text.to_owned(),
            words,
            packable: kind.is_some() && words == 1 && !text.contains('`'),
        }
    }
}

/// The texts chosen for a summary, within a budget of words (headings aside).
struct Plan {
    chosen: Vec<Chosen>,
    budget: usize,
    /// One-word values share bullets, [`PACK`] to a bullet.
    packed: bool,
    /// The words the chosen texts take as written.
    used: usize,
    /// Whether a key value or modified file had to be left out.
    key_left_out: bool,
}

impl Plan {
    fn new(budget: usize, packed: bool) -> Self {
        Plan {
            chosen: Vec::new(),
            budget,
            packed,
            used: 0,
            key_left_out: false,
        }
    }

    /// The words of the chosen texts as they will be written.
    fn count(&self) -> usize {
        let mut words = 0;
        let mut packed = [0usize; VALUE_ORDER.len()];
        for c in &self.chosen {
            match c.kind {
                Some(kind) if self.packed && c.packable => {
                    packed[VALUE_ORDER.iter().position(|k| *k == kind).unwrap_or(0)] += 1;
                }
                _ if c.section == Section::CurrentState => words += c.words,
                _ => words += 1 + c.words,
            }
        }
        words + packed.iter().map(|n| n + n.div_ceil(PACK)).sum::<usize>()
    }

    /// Whether a text already appears verbatim in a chosen one.
    fn covers(&self, text: &str) -> bool {
        self.chosen.iter().any(|c| c.text.contains(text))
    }

    /// Takes a text into a section if it is not there yet and fits; says
    /// whether the section now holds it.
    fn take(&mut self, section: Section, text: &str) -> bool {
        if self
            .chosen
            .iter()
            .any(|c| c.section == section && c.text == text)
        {
            return true;
        }
        let words = word_count(text);
        let line_words = words + usize::from(section != Section::CurrentState);
        if words == 0 || self.used + line_words > self.budget {
            return false;
        }
        self.chosen.push(Chosen::new(section, None, text));
        self.used += line_words;
        true
    }

    /// Takes a value unless it already appears verbatim in a chosen text;
    /// values it contains are dropped, their words given back.
    fn take_value(&mut self, kind: ValueKind, value: &str) -> bool {
        if self.covers(value) {
            return true;
        }
        let chosen = Chosen::new(Section::ImportantValues, Some(kind), value);
        // A packed one-word value may cost a single word.
        let at_least = if self.packed && chosen.packable {
            1
        } else {
            1 + chosen.words
        };
        let inside =
            |c: &Chosen| c.section == Section::ImportantValues && value.contains(c.text.as_str());
        if self.used + at_least > self.budget && !self.chosen.iter().any(inside) {
            return false;
        }
        let mut dropped = Vec::new();
        for (i, c) in std::mem::take(&mut self.chosen).into_iter().enumerate() {
            if inside(&c) {
                dropped.push((i, c));
            } else {
                self.chosen.push(c);
            }
        }
        self.chosen.push(chosen);
        let used = self.count();
        if used <= self.budget {
            self.used = used;
            return true;
        }
        // It does not fit: put everything back as it was.
        self.chosen.pop();
        for (i, c) in dropped {
            self.chosen.insert(i, c);
        }
        false
    }

    /// The summary text.
    fn write(&self) -> String {
        let mut out = String::new();
        let mut left = self.budget.saturating_sub(self.used);
        for (n, (heading, section)) in HEADINGS.iter().zip(Section::ALL).enumerate() {
            if n > 0 {
                out.push('\n');
            }
            out.push_str("## ");
            out.push_str(heading);
            out.push('\n');
            let mut lines = Vec::new();
            let items = self.chosen.iter().filter(|c| c.section == section);
            match section {
                Section::CurrentState => lines.extend(items.map(|c| c.text.clone())),
                Section::FilesModified => lines.extend(items.map(|c| bullet(&c.text))),
                Section::ImportantValues => {
                    let items: Vec<&Chosen> = items.collect();
                    for kind in VALUE_ORDER {
                        let of_kind = items.iter().filter(|c| c.kind == Some(kind));
                        let (packed, single): (Vec<&&Chosen>, Vec<&&Chosen>) =
                            of_kind.partition(|c| self.packed && c.packable);
                        lines.extend(single.iter().map(|c| bullet(&c.text)));
                        for pack in packed.chunks(PACK) {
                            let values: Vec<String> =
                                pack.iter().map(|c| format!("`{}`", c.text)).collect();
                            lines.push(format!("- {}", values.join(" ")));
                        }
                    }
                }
                _ => lines.extend(items.map(|c| format!("- {}", c.text))),
            }
            if lines.is_empty() && left > 0 {
                lines.push("none".to_owned());
                left -= 1;
            }
            for line in lines {
                out.push_str(&line);
                out.push('\n');
            }
        }
        out
    }
}

impl ExtractiveSummarizer {
    /// Writes `facts` under the five headings in at most `max_words` words
    /// (which must be at least [`MIN_WORDS`]).
    ///
    /// Values are written one to a bullet; when that leaves out a key value,
    /// one-word values share bullets instead.
    fn render(&self, facts: &Facts, max_words: usize) -> String {
        let span = facts.span.max(1) as f64;
        let mut ranked: Vec<(&Fact, f64)> = facts
            .facts
            .iter()
            .map(|fact| {
                let recency = 5.0 * (fact.last_seen + 1) as f64 / span;
                (fact, f64::from(fact.count.min(5)) + recency)
            })
            .collect();
        ranked.sort_by(|(a, a_score), (b, b_score)| {
            b_score
                .total_cmp(a_score)
                .then(b.last_seen.cmp(&a.last_seen))
                .then(a.text.cmp(&b.text))
        });
        let ranked: Vec<&Fact> = ranked.into_iter().map(|(fact, _)| fact).collect();
        let budget = max_words - MIN_WORDS;
        let mut plan = self.choose(facts, &ranked, max_words, Plan::new(budget, false));
        if plan.key_left_out {
            plan = self.choose(facts, &ranked, max_words, Plan::new(budget, true));
        }
        let summary = plan.write();
        debug_assert!(word_count(&summary) <= max_words, "{summary}");
        summary
    }

    /// Fills `plan`: the current state, a share of pending tasks and
    /// decisions, the key values and modified files, then the rest, each
    /// group best-ranked first.
    fn choose(&self, facts: &Facts, ranked: &[&Fact], max_words: usize, mut plan: Plan) -> Plan {
        if let Some(state) = &facts.current_state {
            let cap = self.state_words.min(max_words / 10).max(1);
            plan.take(
                Section::CurrentState,
                &shorten(state.trim_start_matches(['#', ' ']), cap),
            );
        }
        let reserve = max_words.saturating_mul(self.reserved_percent) / 100;
        for kind in [FactKind::PendingTask, FactKind::Decision] {
            let mut used = 0;
            for fact in ranked.iter().filter(|f| f.kind == kind) {
                let words = 1 + word_count(&fact.text);
                if used + words <= reserve && plan.take(Section::of(kind), &fact.text) {
                    used += words;
                }
            }
        }
        // A path that was modified is listed under Files Modified only, even
        // when it ranks higher as a mentioned path.
        let modified: HashSet<&str> = facts
            .of_kind(FactKind::FileModified)
            .map(|f| f.text.as_str())
            .collect();
        for key in [true, false] {
            for fact in ranked {
                let is_key = match fact.kind {
                    FactKind::FileModified => true,
                    FactKind::Value(kind) => kind.is_key(),
                    _ => false,
                };
                if is_key != key {
                    continue;
                }
                let taken = match fact.kind {
                    FactKind::Value(ValueKind::Path) if modified.contains(fact.text.as_str()) => {
                        plan.take(Section::FilesModified, &fact.text)
                    }
                    FactKind::Value(kind) => plan.take_value(kind, &fact.text),
                    kind => plan.take(Section::of(kind), &fact.text),
                };
                if key && !taken {
                    plan.key_left_out = true;
                }
            }
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn summarize(messages: &[Message], max_words: usize) -> String {
        ExtractiveSummarizer::default()
            .summarize(&SummaryRequest {
                messages,
                previous: None,
                partials: &[],
                max_words,
            })
            .unwrap()
    }

    fn merge(partials: &[String], max_words: usize) -> String {
        ExtractiveSummarizer::default()
            .summarize(&SummaryRequest {
                messages: &[],
                previous: None,
                partials,
                max_words,
            })
            .unwrap()
    }

    fn call(text: &str, id: &str, tool: &str, arguments: &str) -> Message {
        let mut m = Message::assistant(text);
        m.push_tool_call(id, tool, arguments);
        m
    }

    /// The section a line of `summary` is in, for every line holding `needle`.
    fn sections_of(summary: &str, needle: &str) -> Vec<String> {
        let mut section = String::new();
        let mut out = Vec::new();
        for line in summary.lines() {
            if let Some(title) = line.strip_prefix("## ") {
                section = title.to_owned();
            } else if line.contains(needle) {
                out.push(section.clone());
            }
        }
        out
    }

    fn assert_headings(summary: &str) {
        let headings: Vec<&str> = summary.lines().filter(|l| l.starts_with("## ")).collect();
        assert_eq!(headings, HEADINGS.map(|h| format!("## {h}")), "{summary}");
    }

    #[test]
    fn concrete_values_are_kept_verbatim_in_their_sections() {
        let messages = [
            Message::user(
                "Deploy to https://staging.example.com/api/v2. (see docs) and keep it under 12 MB; \
                 reservation ZFA04Y costs $305.",
            ),
            call(
                "I'll patch the config instead of the code, because the bug is there.",
                "c1",
                "Edit",
                r#"{"file_path":"\/srv\/app\/config.toml","old_string":"a","new_string":"b"}"#,
            ),
            Message::tool_result("c1", "Edit", "ok"),
            call(
                "",
                "c2",
                "Bash",
                r#"{"command":"cargo test --workspace 2>&1 | tail"}"#,
            ),
            Message::tool_result(
                "c2",
                "Bash",
                "running 3 tests\nthread 'main' panicked at src/lib.rs:10:5:\n\
                 test result: FAILED. 2 passed; 1 failed; finished in 0.31s",
            ),
            Message::assistant("The test in src/lib.rs fails; next I will read tests/it.rs."),
        ];
        let summary = summarize(&messages, 600);
        assert_headings(&summary);
        for value in [
            "https://staging.example.com/api/v2",
            "/srv/app/config.toml",
            "thread 'main' panicked at src/lib.rs:10:5:",
            "test result: FAILED. 2 passed; 1 failed; finished in 0.31s",
            "cargo test --workspace 2>&1 | tail",
            "ZFA04Y",
            "$305",
            "12 MB",
            "I'll patch the config instead of the code, because the bug is there.",
        ] {
            assert!(summary.contains(value), "missing {value:?} in\n{summary}");
        }
        assert_eq!(
            sections_of(&summary, "/srv/app/config.toml"),
            ["Files Modified"]
        );
        assert_eq!(sections_of(&summary, "cargo test"), ["Important Values"]);
        assert_eq!(
            sections_of(&summary, "next I will read"),
            ["Key Decisions", "Current State"]
        );
        // Every key value of the span is there.
        for value in messages.iter().flat_map(message_key_values) {
            assert!(summary.contains(&value.text), "missing {value:?}");
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

    #[test]
    fn only_writing_tools_modify_files() {
        let messages = [
            call("", "c1", "Read", r#"{"file_path": "/r/read.rs"}"#),
            call(
                "",
                "c2",
                "Write",
                r#"{"file_path": "/r/written.rs", "content": "x"}"#,
            ),
            call(
                "",
                "c3",
                "str_replace_based_edit_tool",
                r#"{"command": "view", "path": "/r/viewed.rs"}"#,
            ),
            call(
                "",
                "c4",
                "str_replace_based_edit_tool",
                r#"{"command": "create", "path": "/r/created.rs"}"#,
            ),
            call(
                "",
                "c5",
                "TodoWrite",
                r#"{"todos": [{"content": "ship /r/todo.rs", "status": "pending"}]}"#,
            ),
        ];
        let facts = extract_facts(&messages);
        let modified: Vec<&str> = facts
            .of_kind(FactKind::FileModified)
            .map(|f| f.text.as_str())
            .collect();
        assert_eq!(modified, ["/r/written.rs", "/r/created.rs"]);
        let summary = summarize(&messages, 600);
        assert_eq!(sections_of(&summary, "/r/read.rs"), ["Important Values"]);
        assert_eq!(sections_of(&summary, "/r/todo.rs"), ["Pending Tasks"]);
    }

    #[test]
    fn pending_tasks_are_open_todos_and_unanswered_requests() {
        let messages = [
            Message::user("Fix the login page."),
            call(
                "On it.",
                "c1",
                "TodoWrite",
                r#"{"todos": [
                    {"content": "Reproduce the bug", "status": "completed"},
                    {"content": "Add a regression test", "status": "in_progress"},
                    {"content": "Update the changelog", "status": "pending"}]}"#,
            ),
            Message::tool_result("c1", "TodoWrite", "ok"),
            Message::assistant("The bug is reproduced.\n- [ ] check Safari"),
            Message::user("Also, can you bump the version?"),
        ];
        let facts = extract_facts(&messages);
        let pending: Vec<&str> = facts
            .of_kind(FactKind::PendingTask)
            .map(|f| f.text.as_str())
            .collect();
        assert_eq!(
            pending,
            [
                "check Safari",
                "Add a regression test",
                "Update the changelog",
                "Also, can you bump the version?"
            ]
        );
        assert_eq!(
            facts.current_state.as_deref(),
            Some("The bug is reproduced. - [ ] check Safari")
        );
    }

    #[test]
    fn the_word_cap_holds_on_a_huge_span_and_recent_values_win() {
        let mut messages = Vec::new();
        for i in 0..1250 {
            messages.push(Message::user(format!(
                "Look at /repo/src/mod_{i}/lib_{i}.rs please"
            )));
            messages.push(call(
                &format!("I'll read it because module {i} matters."),
                &format!("c{i}"),
                "Read",
                &format!(r#"{{"file_path": "/repo/src/mod_{i}/lib_{i}.rs"}}"#),
            ));
            messages.push(Message::tool_result(
                format!("c{i}"),
                "Read",
                format!("error[E{i:04}]: cannot find value `x_{i}` in https://docs.example/e{i}"),
            ));
            messages.push(Message::assistant(format!("Module {i} took {i} ms.")));
        }
        assert_eq!(messages.len(), 5000);
        for max_words in [600, 100, MIN_WORDS] {
            let summary = summarize(&messages, max_words);
            assert!(word_count(&summary) <= max_words, "{max_words}: {summary}");
            assert_headings(&summary);
        }
        let summary = summarize(&messages, 600);
        assert!(
            summary.contains("/repo/src/mod_1249/lib_1249.rs"),
            "{summary}"
        );
        assert!(!summary.contains("/repo/src/mod_0/lib_0.rs"), "{summary}");
    }

    #[test]
    fn values_share_bullets_only_when_one_to_a_bullet_would_drop_some() {
        let listing = |i| Message::tool_result("c", "ls", format!("/a/f{i}.rs"));
        let mut few: Vec<Message> = (0..5).map(listing).collect();
        // Regression: a modified file that is also mentioned counted as left
        // out, and packed a summary that had room to spare.
        few.push(call("", "c9", "Edit", r#"{"file_path": "/a/f4.rs"}"#));
        let summary = summarize(&few, 600);
        assert!(summary.contains("\n- `/a/f0.rs`\n"), "{summary}");
        assert_eq!(sections_of(&summary, "/a/f4.rs"), ["Files Modified"]);

        let many: Vec<Message> = (0..400).map(listing).collect();
        let summary = summarize(&many, 600);
        assert!(word_count(&summary) <= 600);
        assert!(summary.contains("- `/a/f399.rs` `/a/f398.rs`"), "{summary}");
        let kept = (0..400)
            .filter(|i| summary.contains(&format!("/a/f{i}.rs`")))
            .count();
        assert!(kept > 300, "only {kept} of 400 kept");
        // Read back, the packed bullets give every value.
        let facts = Facts::from_summary(&summary);
        assert_eq!(
            facts.of_kind(FactKind::Value(ValueKind::Path)).count(),
            kept
        );
    }

    #[test]
    fn partial_summaries_merge_into_one() {
        let first = summarize(
            &[
                Message::user(
                    "The old API is https://old.example/v1 and the cache is /var/cache/app.db",
                ),
                call(
                    "I'll keep SQLite because it is simpler.",
                    "c1",
                    "Write",
                    r#"{"file_path":"/app/db.rs"}"#,
                ),
                Message::tool_result("c1", "Write", "Error: permission denied"),
            ],
            600,
        );
        let second = summarize(
            &[
                Message::user("Now move /var/cache/app.db to https://new.example/v2"),
                call("", "c2", "Edit", r#"{"file_path":"/app/api.rs"}"#),
                Message::tool_result("c2", "Edit", "ok"),
                Message::assistant("Moved; the API now points at v2."),
            ],
            600,
        );
        let merged = merge(&[first, second], 600);
        assert_headings(&merged);
        for value in [
            "https://old.example/v1",
            "https://new.example/v2",
            "/var/cache/app.db",
            "/app/db.rs",
            "/app/api.rs",
            "Error: permission denied",
            "I'll keep SQLite because it is simpler.",
        ] {
            assert!(merged.contains(value), "missing {value:?} in\n{merged}");
        }
        assert_eq!(merged.matches("/var/cache/app.db").count(), 1, "{merged}");
        // The later part's state wins.
        assert_eq!(sections_of(&merged, "Moved; the API"), ["Current State"]);
        // Merging is stable: merging a merged summary again changes nothing.
        assert_eq!(merge(std::slice::from_ref(&merged), 600), merged);
    }

    #[test]
    fn a_merge_over_the_cap_keeps_the_later_parts() {
        let part = |range: std::ops::Range<usize>| {
            let messages: Vec<Message> = range
                .map(|i| {
                    Message::tool_result("c", "t", format!("Error: job {i} failed on node n{i}"))
                })
                .collect();
            summarize(&messages, 600)
        };
        let partials = [part(0..60), part(60..120)];
        let merged = merge(&partials, 300);
        assert!(word_count(&merged) <= 300);
        assert!(
            merged.contains("Error: job 119 failed on node n119"),
            "{merged}"
        );
        assert!(
            !merged.contains("Error: job 0 failed on node n0"),
            "{merged}"
        );
    }

    #[test]
    fn the_previous_summary_is_carried_forward() {
        let previous = summarize(
            &[
                call(
                    "Let's use port 8080.",
                    "c1",
                    "Write",
                    r#"{"path":"/etc/app.conf"}"#,
                ),
                Message::tool_result("c1", "Write", "Traceback (most recent call last):"),
                Message::assistant("Config written."),
            ],
            600,
        );
        let messages = [
            Message::user("Now check https://status.example/health"),
            Message::assistant("It is healthy."),
        ];
        let summary = ExtractiveSummarizer::default()
            .summarize(&SummaryRequest {
                messages: &messages,
                previous: Some(&previous),
                partials: &[],
                max_words: 600,
            })
            .unwrap();
        for value in [
            "/etc/app.conf",
            "Traceback (most recent call last):",
            "Let's use port 8080.",
            "https://status.example/health",
        ] {
            assert!(summary.contains(value), "missing {value:?} in\n{summary}");
        }
        assert_eq!(sections_of(&summary, "/etc/app.conf"), ["Files Modified"]);
        assert_eq!(sections_of(&summary, "It is healthy."), ["Current State"]);
        assert!(!summary.contains("Config written."), "{summary}");
    }

    #[test]
    fn values_with_backticks_round_trip() {
        let messages = [Message::tool_result(
            "c",
            "t",
            "error: unknown flag `--fast`",
        )];
        let summary = summarize(&messages, 600);
        assert!(
            summary.contains("\n- error: unknown flag `--fast`\n"),
            "{summary}"
        );
        let facts = Facts::from_summary(&summary);
        let values: Vec<&Fact> = facts
            .of_kind(FactKind::Value(ValueKind::ErrorLine))
            .collect();
        assert_eq!(values[0].text, "error: unknown flag `--fast`");
    }

    #[test]
    fn empty_input_gives_the_headings_and_none() {
        let summary = summarize(&[], 600);
        assert_headings(&summary);
        assert_eq!(summary.matches("\nnone\n").count(), 5, "{summary}");
        assert_eq!(word_count(&summary), MIN_WORDS + 5);
        assert_eq!(merge(&[], 600), summary);
    }

    #[test]
    fn a_cap_below_the_headings_is_an_error() {
        let error = ExtractiveSummarizer::default()
            .summarize(&SummaryRequest {
                messages: &[Message::user("hi")],
                previous: None,
                partials: &[],
                max_words: MIN_WORDS - 1,
            })
            .unwrap_err();
        assert!(error.to_string().contains("at least 15 words"), "{error}");
    }

    proptest! {
        // Budget packing never exceeds the budget, whatever the span.
        #[test]
        fn the_cap_always_holds(
            texts in proptest::collection::vec("[a-z/._ :E0-9rof`\n]{0,80}", 0..40),
            max_words in MIN_WORDS..120usize,
        ) {
            let messages: Vec<Message> = texts
                .iter()
                .enumerate()
                .map(|(i, t)| match i % 3 {
                    0 => Message::user(format!("{t} /p/{i}.rs")),
                    1 => call(t, &format!("c{i}"), "Edit", &format!(r#"{{"path": "/e/{i}.rs"}}"#)),
                    _ => Message::tool_result(format!("c{i}"), "Edit", format!("Error {t}")),
                })
                .collect();
            let summary = summarize(&messages, max_words);
            prop_assert!(word_count(&summary) <= max_words, "{}", summary);
            let merged = merge(&[summary.clone(), summary], max_words);
            prop_assert!(word_count(&merged) <= max_words, "{}", merged);
        }
    }
}
