//! Conversions between [`Message`]s and the transcript formats agents use.
//!
//! | format | in | out | shape |
//! |---|---|---|---|
//! | [`Format::Jsonl`] | yes | yes | agent-host's native log: one message per line, `type` user / assistant / tool_result / system / summary |
//! | [`Format::OpenAi`] | yes | yes | Chat Completions messages: a JSON array, or an object with `messages` |
//! | [`Format::Anthropic`] | yes | yes | Messages API: `{"system": ..., "messages": [...]}`, or a bare array |
//! | [`Format::ClaudeCode`] | yes | no | Claude Code session logs (`~/.claude/projects/*.jsonl`), `claude -p --output-format stream-json` and other Claude-Code-shaped records |
//! | [`Format::Codex`] | yes | no | OpenAI Codex CLI rollouts (`~/.codex/sessions/**/rollout-*.jsonl`) |
//! | [`Format::Responses`] | yes | yes | OpenAI Responses API items: a JSON array of items, or an object with `input` and/or `output` item lists |
//! | [`Format::GeminiCli`] | yes | no | Gemini CLI chat recordings (`~/.gemini/tmp/*/chats/session-*.json`) |
//! | [`Format::PydanticAi`] | yes | yes | pydantic-ai `ModelMessage` lists (`ModelMessagesTypeAdapter` JSON) |
//! | [`Format::LangChain`] | yes | no | LangChain message dicts (`messages_to_dict`) |
//!
//! Every error says which format, where (line, message, block, field) and what
//! was wrong; no converter panics on bad input.

use std::fmt;
use std::str::FromStr;

use serde::de;
use serde_json::{Map, Value};

use crate::message::Message;

pub mod anthropic;
pub mod claude_code;
pub mod codex;
pub mod gemini;
mod json_out;
pub mod jsonl;
pub mod langchain;
mod limits;
pub mod openai;
mod pretty;
pub mod pydantic_ai;
pub mod responses;

pub use limits::{Limit, Limits, Meter};
pub use pretty::to_pretty;

/// A transcript format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// agent-host's native JSONL log.
    Jsonl,
    /// OpenAI Chat Completions messages.
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// Claude Code session JSONL and `claude -p` stream-json (import only).
    ClaudeCode,
    /// OpenAI Codex CLI rollout JSONL (import only).
    Codex,
    /// OpenAI Responses API items.
    Responses,
    /// Gemini CLI chat recordings (import only).
    GeminiCli,
    /// pydantic-ai `ModelMessage` lists.
    PydanticAi,
    /// LangChain message dicts (import only).
    LangChain,
}

impl Format {
    /// Every format, in the order they are documented.
    pub const ALL: [Format; 9] = [
        Format::Jsonl,
        Format::OpenAi,
        Format::Anthropic,
        Format::ClaudeCode,
        Format::Codex,
        Format::Responses,
        Format::GeminiCli,
        Format::PydanticAi,
        Format::LangChain,
    ];

    /// The name used on the command line and in errors.
    pub fn name(self) -> &'static str {
        match self {
            Format::Jsonl => "jsonl",
            Format::OpenAi => "openai",
            Format::Anthropic => "anthropic",
            Format::ClaudeCode => "claude-code",
            Format::Codex => "codex",
            Format::Responses => "responses",
            Format::GeminiCli => "gemini-cli",
            Format::PydanticAi => "pydantic-ai",
            Format::LangChain => "langchain",
        }
    }

    /// Guesses the format of a transcript from its text.
    ///
    /// JSONL formats are told apart by their first line (Codex records have a
    /// `payload`; Claude Code records a `message` object or the log's
    /// `sessionId`/`uuid` bookkeeping); JSON documents by their shape
    /// (Responses items have an item `type`; an Anthropic request has a
    /// `system` field or content blocks of Anthropic types; OpenAI messages
    /// have `tool_calls`, `tool` or `system` roles). A history of plain user
    /// and assistant strings reads the same in OpenAI and Anthropic and is
    /// taken as OpenAI. Anything else is refused with an error that says what
    /// was seen, and blames no reader ([`FormatError::undetected`]).
    pub fn detect(text: &str) -> Result<Format, FormatError> {
        if let Some(format) = detect_jsonl(text) {
            return Ok(format);
        }
        if let Some(e) = unknown_records(text) {
            return Err(e);
        }
        let value = detecting(document(Format::OpenAi, text, &Limits::default()))?;
        classify_document(&value)
    }

    /// Whether messages can be written in the format (the others are
    /// import-only).
    pub fn is_writable(self) -> bool {
        matches!(
            self,
            Format::Jsonl
                | Format::OpenAi
                | Format::Anthropic
                | Format::Responses
                | Format::PydanticAi
        )
    }

    /// Whether the format holds one record per line (native JSONL, Claude
    /// Code, Codex), so that it can be read a line at a time with a
    /// [`LineReader`].
    pub fn is_line_based(self) -> bool {
        matches!(self, Format::Jsonl | Format::ClaudeCode | Format::Codex)
    }

    /// The line-based format whose record `line` is, if any: how
    /// [`Format::detect`] tells a log from the first non-empty line.
    pub fn of_line(line: &str) -> Option<Format> {
        detect_jsonl(line)
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Format::ALL.iter().map(|f| f.name()).collect();
                format!("unknown format `{s}`; expected one of {}", names.join(", "))
            })
    }
}

/// What a transcript holds: its messages, and what the source said about the
/// conversation itself.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Transcript {
    /// The messages, in order.
    pub messages: Vec<Message>,
    /// A title, when the source carries one (Claude Code `summary` records).
    pub title: Option<String>,
    /// Conversations of subagents (Claude Code sidechains), each in order,
    /// kept apart from `messages`: they were never in the main model's context.
    pub sidechains: Vec<Vec<Message>>,
    /// Records that are not conversation messages and were left out, so that
    /// a caller can report them.
    pub skipped: Vec<Skipped>,
    /// Records that could not be read and were left out (a line-based log
    /// goes on past a bad line), with what was wrong, so that a caller can
    /// report them.
    pub quarantined: Vec<Quarantined>,
    /// Branches the conversation left (Claude Code rewinds: records no
    /// longer on the chain of the log's last record), each in order, kept
    /// apart from `messages`: the model no longer sees them.
    pub branches: Vec<Vec<Message>>,
}

/// A source record that could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quarantined {
    /// Its 1-based line number.
    pub line: usize,
    /// What was wrong with it.
    pub error: FormatError,
}

/// A source record that is not a conversation message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// Its 1-based line number.
    pub line: usize,
    /// Its record type.
    pub kind: String,
}

/// Where in a transcript an error was found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location {
    /// The 1-based line, for line-based formats.
    pub line: Option<usize>,
    /// The 0-based index of the message in its list.
    pub message: Option<usize>,
    /// The 0-based index of the content block or part within the message.
    pub block: Option<usize>,
    /// The field that was wrong.
    pub field: Option<String>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut pieces = Vec::new();
        if let Some(line) = self.line {
            pieces.push(format!("line {line}"));
        }
        if let Some(message) = self.message {
            pieces.push(format!("message {message}"));
        }
        if let Some(block) = self.block {
            pieces.push(format!("block {block}"));
        }
        if let Some(field) = &self.field {
            pieces.push(format!("field `{field}`"));
        }
        if pieces.is_empty() {
            f.write_str("document")
        } else {
            f.write_str(&pieces.join(", "))
        }
    }
}

/// A transcript that could not be read or written: which format, where, and
/// what was wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct FormatError {
    /// The format being read or written.
    pub format: Format,
    /// Where the problem is.
    pub location: Location,
    /// What was wrong, and what was expected.
    pub detail: String,
    /// The limit the input is over, when that is what was wrong (see
    /// [`Limits`]); a front end names how to raise it.
    pub limit: Option<Limit>,
    /// Whether the format of the input could not be told (no reader was
    /// chosen): the error then blames no format, and `format` is only the
    /// closest guess.
    pub undetected: bool,
}

impl FormatError {
    /// What kind of failure this is: the input is not a readable history, or
    /// is over a limit.
    pub fn kind(&self) -> crate::ErrorKind {
        if self.limit.is_some() {
            crate::ErrorKind::LimitExceeded
        } else {
            crate::ErrorKind::InvalidInput
        }
    }
}

impl FormatError {
    /// An error about the document as a whole.
    pub fn new(format: Format, detail: impl Into<String>) -> Self {
        FormatError {
            format,
            location: Location::default(),
            detail: detail.into(),
            limit: None,
            undetected: false,
        }
    }

    /// An input whose format could not be told: `detail` says what was seen.
    pub fn undetected(detail: impl Into<String>) -> Self {
        FormatError {
            undetected: true,
            ..FormatError::new(Format::Jsonl, detail)
        }
    }

    fn describe(&self) -> String {
        if self.undetected {
            let mut text = String::from("cannot tell the format");
            if self.location != Location::default() {
                text.push_str(&format!(" ({})", self.location));
            }
            text.push_str(": ");
            text.push_str(&self.detail);
            return text;
        }
        format!("{} {}: {}", self.format, self.location, self.detail)
    }

    /// Sets the line.
    pub fn at_line(mut self, line: usize) -> Self {
        self.location.line = Some(line);
        self
    }

    /// Sets the message index.
    pub fn at_message(mut self, index: usize) -> Self {
        self.location.message = Some(index);
        self
    }

    /// Sets the block index.
    pub fn at_block(mut self, index: usize) -> Self {
        self.location.block = Some(index);
        self
    }

    /// Sets the field.
    pub fn at_field(mut self, field: impl Into<String>) -> Self {
        self.location.field = Some(field.into());
        self
    }
}

/// Reads a transcript in the given format, within the default [`Limits`].
pub fn parse(format: Format, text: &str) -> Result<Transcript, FormatError> {
    parse_within(format, text, &Limits::default())
}

/// Reads a transcript in the given format within `limits`: a message or the
/// whole over one of them is refused before it is parsed, with an error
/// naming the limit ([`FormatError::limit`]).
pub fn parse_within(
    format: Format,
    text: &str,
    limits: &Limits,
) -> Result<Transcript, FormatError> {
    if format.is_line_based() {
        let mut reader = LineReader::new(format, *limits);
        for (i, line) in text.lines().enumerate() {
            reader.push(line, i + 1)?;
        }
        return reader.finish();
    }
    if format == Format::OpenAi
        && let Some(messages) = openai_typed(text, limits)?
    {
        return checked(format, Transcript::from_messages(messages), limits);
    }
    let value = document(format, text, limits)?;
    let transcript = from_document(format, value)?;
    checked(format, transcript, limits)
}

/// What a parsed document in a document format holds.
fn from_document(format: Format, value: Value) -> Result<Transcript, FormatError> {
    let messages = match format {
        Format::Anthropic => anthropic::from_value(value),
        Format::Responses => responses::from_value(value),
        Format::GeminiCli => return gemini::from_value(value),
        Format::PydanticAi => pydantic_ai::from_value(value),
        Format::LangChain => langchain::from_value(value),
        _ => openai::from_value(value),
    };
    messages.map(Transcript::from_messages)
}

/// Reads a transcript whose format is detected (see [`Format::detect`]),
/// parsing a JSON document only once, within the default [`Limits`].
pub fn parse_detected(text: &str) -> Result<(Format, Transcript), FormatError> {
    parse_detected_within(text, &Limits::default())
}

/// [`parse_detected`] within `limits`.
pub fn parse_detected_within(
    text: &str,
    limits: &Limits,
) -> Result<(Format, Transcript), FormatError> {
    if let Some(format) = detect_jsonl(text) {
        return Ok((format, parse_within(format, text, limits)?));
    }
    if let Some(e) = unknown_records(text) {
        return Err(e);
    }
    // OpenAI messages, the commonest document, are read straight from the
    // bytes when they are nothing else: the typed route takes no document
    // that detection would give to another reader.
    if let Some(messages) = detecting(openai_typed(text, limits))? {
        let transcript = Transcript::from_messages(messages);
        return Ok((Format::OpenAi, checked(Format::OpenAi, transcript, limits)?));
    }
    let value = detecting(document(Format::OpenAi, text, limits))?;
    let format = classify_document(&value)?;
    let transcript = from_document(format, value)?;
    Ok((format, checked(format, transcript, limits)?))
}

/// OpenAI messages read straight from the bytes (see `openai::parse_typed`)
/// within `limits`, or `None` when the typed route does not take the
/// document (the caller reads it through `serde_json::Value`, counting
/// first).
///
/// A JSON value takes a byte at least, so a document no longer than
/// `history_values` cannot be over it and is not counted (nearly every
/// document: the count was a third of a load). A longer one is counted
/// before anything of it is built, so that a hostile one is refused without
/// taking memory.
fn openai_typed(text: &str, limits: &Limits) -> Result<Option<Vec<Message>>, FormatError> {
    let mut meter = Meter::new(*limits);
    meter.bytes(Format::OpenAi, text.len() as u64)?;
    if text.len() as u64 > limits.history_values {
        meter.document(Format::OpenAi, text)?;
    }
    Ok(openai::parse_typed(text))
}

/// A document read before its format is known: an error that is no limit's
/// blames no reader.
fn detecting<T>(result: Result<T, FormatError>) -> Result<T, FormatError> {
    result.map_err(|mut e| {
        e.undetected = e.limit.is_none();
        e
    })
}

/// A whole JSON document, its bytes and values counted first.
fn document(format: Format, text: &str, limits: &Limits) -> Result<Value, FormatError> {
    count(format, text, limits)?;
    parse_document(format, text)
}

/// Refuses a document over the history's byte or value limit, before
/// anything of it is built.
fn count(format: Format, text: &str, limits: &Limits) -> Result<(), FormatError> {
    let mut meter = Meter::new(*limits);
    meter.bytes(format, text.len() as u64)?;
    meter.document(format, text)
}

/// The messages of a document, each within the per-message byte limit as it
/// would be stored (a line of the native log).
fn checked(
    format: Format,
    transcript: Transcript,
    limits: &Limits,
) -> Result<Transcript, FormatError> {
    let messages = &transcript.messages;
    Meter::new(*limits).messages(format, messages.len() as u64)?;
    for (i, message) in messages.iter().enumerate() {
        if !jsonl::encoded_len_within(message, limits.message_bytes) {
            limits::message_bytes(format, jsonl::encoded_len(message) as u64, limits)
                .map_err(|e| e.at_message(i))?;
        }
    }
    Ok(transcript)
}

/// Reads a line-based transcript (native JSONL, Claude Code, Codex) one line
/// at a time, so that a reader holds one line of text at most: each line's
/// bytes and JSON values are counted against the [`Limits`] before it is
/// parsed.
///
/// ```
/// use agent_host_core::format::{Format, LineReader, Limits};
///
/// let mut reader = LineReader::new(Format::Jsonl, Limits::default());
/// reader.push(r#"{"type":"user","content":"hi"}"#, 1)?;
/// reader.push("", 2)?;
/// reader.push(r#"{"type":"assistant","content":"hello"}"#, 3)?;
/// assert_eq!(reader.finish()?.messages.len(), 2);
/// # Ok::<(), agent_host_core::format::FormatError>(())
/// ```
pub struct LineReader {
    format: Format,
    meter: Meter,
    state: LineState,
    /// The format the first record looks like, when it is another one: named
    /// in the error for a log that gave no message.
    first_looks_like: Option<Option<Format>>,
    /// Whether Claude Code records may take the typed route (tests hold it
    /// to the generic one).
    typed: bool,
}

enum LineState {
    Jsonl(Vec<Message>),
    ClaudeCode(Box<claude_code::Reader>),
    Codex(Box<codex::Reader>),
}

impl LineReader {
    /// A reader of `format`, which must be line-based
    /// ([`Format::is_line_based`]); a document format is read as native JSONL.
    pub fn new(format: Format, limits: Limits) -> Self {
        let state = match format {
            Format::ClaudeCode => LineState::ClaudeCode(Box::default()),
            Format::Codex => LineState::Codex(Box::default()),
            _ => LineState::Jsonl(Vec::new()),
        };
        LineReader {
            format,
            meter: Meter::new(limits),
            state,
            first_looks_like: None,
            typed: true,
        }
    }

    /// A reader whose Claude Code records all take the generic route.
    #[cfg(test)]
    pub(crate) fn generic_only(mut self) -> Self {
        self.typed = false;
        self
    }

    /// Reads line `line_no` (1-based, without its line break). Blank lines
    /// count towards the history's bytes and are otherwise skipped.
    pub fn push(&mut self, line: &str, line_no: usize) -> Result<(), FormatError> {
        let at = |e: FormatError| e.at_line(line_no);
        self.meter
            .bytes(self.format, line.len() as u64 + 1)
            .map_err(at)?;
        if line.trim().is_empty() {
            return Ok(());
        }
        let max_values = self.meter.begin_message(self.format, line).map_err(at)?;
        // A `user` or `assistant` record read straight from the line, its
        // values counted as they are read.
        if let LineState::ClaudeCode(reader) = &mut self.state
            && self.typed
            && self.meter.read_counted(line, max_values, |tally| {
                reader.read_typed(line, line_no, tally)
            })
        {
            self.first_looks_like
                .get_or_insert_with(|| detect_jsonl(line).filter(|&f| f != self.format));
            return Ok(());
        }
        let record = match self.state {
            // Else read whole as a `Value`: its values are counted as they
            // are read, in the one parse.
            LineState::ClaudeCode(_) => self
                .meter
                .parse_message(self.format, line, max_values)
                .map_err(at)?,
            _ => {
                self.meter
                    .count_message(self.format, line, max_values)
                    .map_err(at)?;
                None
            }
        };
        if self.first_looks_like.is_none() {
            self.first_looks_like = Some(detect_jsonl(line).filter(|&f| f != self.format));
        }
        match &mut self.state {
            LineState::Jsonl(messages) => {
                messages.push(jsonl::parse_counted(line, line_no).map_err(|e| {
                    match self.first_looks_like {
                        Some(Some(other)) => hint(e, other),
                        _ => e,
                    }
                })?)
            }
            LineState::ClaudeCode(reader) => match record {
                Some(record) => reader.read_value(record, line, line_no),
                None => reader.read_record(line, line_no).map_err(at)?,
            },
            LineState::Codex(reader) => reader.read_record(line, line_no).map_err(at)?,
        }
        Ok(())
    }

    /// Counts `bytes` of input that are no line of their own (blank lines a
    /// caller skipped) towards the history's byte limit.
    pub fn count(&mut self, bytes: u64) -> Result<(), FormatError> {
        self.meter.bytes(self.format, bytes)
    }

    /// What was read.
    ///
    /// A log whose records gave no message at all (nor a title), while some
    /// were read, is an error rather than an empty history: it is another
    /// format (named when the first record is one agent-host knows), or
    /// every record was bad (the first bad one's error is given).
    pub fn finish(self) -> Result<Transcript, FormatError> {
        let transcript = match self.state {
            LineState::Jsonl(messages) => Transcript::from_messages(messages),
            LineState::ClaudeCode(reader) => reader.into_transcript(),
            LineState::Codex(reader) => reader.into_transcript(),
        };
        let no_message = transcript.messages.is_empty()
            && transcript.sidechains.is_empty()
            && transcript.branches.is_empty();
        if !no_message {
            return Ok(transcript);
        }
        let looks_like = self.first_looks_like.flatten();
        if let Some(first) = transcript.quarantined.first() {
            let e = first.error.clone();
            return Err(match looks_like {
                Some(other) => hint(e, other),
                None => e,
            });
        }
        // A log of nothing but its title (Claude Code writes such files) is
        // one of this format's, and empty.
        if transcript.skipped.is_empty() || transcript.title.is_some() {
            return Ok(transcript);
        }
        let mut kinds: Vec<&str> = transcript.skipped.iter().map(|s| s.kind.as_str()).collect();
        kinds.sort_unstable();
        kinds.dedup();
        let shown: Vec<String> = kinds.iter().take(8).map(|k| format!("`{k}`")).collect();
        let mut detail = format!(
            "none of its {} records is a message (record types: {})",
            transcript.skipped.len(),
            shown.join(", ")
        );
        if let Some(other) = looks_like {
            detail.push_str(&format!(
                "; its first record is a {other} record: read it with --format {other}"
            ));
        }
        Err(FormatError::new(self.format, detail))
    }
}

/// Adds to `e` that the input looks like `other`.
fn hint(mut e: FormatError, other: Format) -> FormatError {
    e.detail.push_str(&format!(
        " (the first record is a {other} record: read it with --format {other})"
    ));
    e
}

/// [`parse_detected`] of a JSON document already parsed: what it gives for
/// the document's text, without reading that text again (a server has the
/// request's JSON in hand).
///
/// ```
/// use agent_host_core::format::{self, Format};
///
/// let value = serde_json::json!([{"role": "user", "content": "hi"}]);
/// let (format, transcript) = format::parse_detected_value(value.clone())?;
/// assert_eq!(format, Format::OpenAi);
/// assert_eq!(transcript, format::parse_detected(&value.to_string())?.1);
/// # Ok::<(), format::FormatError>(())
/// ```
pub fn parse_detected_value(value: Value) -> Result<(Format, Transcript), FormatError> {
    // A single record reads as one JSONL line (its text, whole).
    if let Value::Object(record) = &value
        && let Some(format) = RecordKeys::of_map(record).format()
    {
        return Ok((format, parse(format, &value.to_string())?));
    }
    let format = classify_document(&value)?;
    Ok((format, from_document(format, value)?))
}

/// Writes messages in the given format. Claude Code and Codex are
/// import-only.
pub fn write(format: Format, messages: &[Message]) -> Result<String, FormatError> {
    match format {
        Format::Jsonl => Ok(jsonl::to_string(messages)),
        Format::OpenAi => openai::write_document(messages),
        Format::Anthropic => Ok(pretty_tree(&anthropic::to_request(messages)?)),
        Format::Responses => Ok(pretty_tree(&Value::Array(responses::to_items(messages)?))),
        Format::PydanticAi => Ok(pretty_tree(&Value::Array(pydantic_ai::to_messages(
            messages,
        )?))),
        Format::ClaudeCode | Format::Codex | Format::GeminiCli | Format::LangChain => {
            Err(FormatError::new(
                format,
                format!(
                    "{format} is an import-only format; write jsonl, openai, anthropic, responses \
                 or pydantic-ai"
                ),
            ))
        }
    }
}

/// Something of a message that writing it in a format leaves out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loss {
    /// The 0-based index of the message.
    pub message: usize,
    /// What is left out.
    pub what: String,
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "message {}: {}", self.message, self.what)
    }
}

/// What [`write()`] leaves out of `messages` in `format`: thinking signatures
/// where the format has no place for them (OpenAI, Responses), redacted
/// thinking but in Anthropic, and what another format's reader kept verbatim (Anthropic
/// blocks, Responses items, OpenAI fields) where the format cannot carry it.
/// The native log loses nothing. A converter reports these, so that nothing
/// is dropped unsaid.
///
/// ```
/// use agent_host_core::format::{self, Format};
///
/// let request = r#"{"system": "s", "messages": [{"role": "assistant", "content": [
///     {"type": "thinking", "thinking": "hm", "signature": "sig"}, {"type": "text", "text": "ok"}]}]}"#;
/// let messages = format::parse(Format::Anthropic, request)?.messages;
/// assert!(format::losses(Format::Jsonl, &messages).is_empty());
/// assert!(format::losses(Format::Anthropic, &messages).is_empty());
/// let lost = format::losses(Format::OpenAi, &messages);
/// assert_eq!(lost[0].to_string(), "message 1: the thinking signature");
/// # Ok::<(), format::FormatError>(())
/// ```
pub fn losses(format: Format, messages: &[Message]) -> Vec<Loss> {
    let own = match format {
        Format::Jsonl => return Vec::new(),
        Format::OpenAi => openai::EXTRA_KEY,
        Format::Anthropic => anthropic::EXTRA_KEY,
        Format::Responses => responses::EXTRA_KEY,
        Format::PydanticAi => pydantic_ai::EXTRA_KEY,
        _ => return Vec::new(),
    };
    let mut out = Vec::new();
    for (index, m) in messages.iter().enumerate() {
        let mut lose = |what: String| {
            out.push(Loss {
                message: index,
                what,
            })
        };
        if format != Format::Anthropic
            && let Some(r) = &m.reasoning
        {
            if r.redacted {
                lose("redacted thinking".into());
            } else if r.signature.is_some() && format != Format::PydanticAi {
                lose("the thinking signature".into());
            }
        }
        let kept = [
            (anthropic::EXTRA_KEY, "Anthropic"),
            (responses::EXTRA_KEY, "Responses"),
            (openai::EXTRA_KEY, "OpenAI"),
        ];
        for (key, name) in kept {
            if key == own {
                continue;
            }
            let Some(Value::Object(extra)) = m.metadata.get(key) else {
                continue;
            };
            let mut kinds: Vec<String> = Vec::new();
            for (field, value) in extra {
                match value {
                    Value::Array(items) if field == "blocks" || field == "items" => {
                        kinds.extend(items.iter().map(|item| {
                            let item = item.get("block").unwrap_or(item);
                            item.get("type")
                                .and_then(Value::as_str)
                                .unwrap_or("?")
                                .to_owned()
                        }));
                    }
                    // How a Responses message's text was laid out: nothing lost.
                    Value::Object(fields)
                        if field == "message" && fields.keys().all(|k| k == "parts") => {}
                    _ => kinds.push(field.clone()),
                }
            }
            if !kinds.is_empty() {
                lose(format!("{name} data kept verbatim ({})", kinds.join(", ")));
            }
        }
    }
    out
}

impl Transcript {
    fn from_messages(messages: Vec<Message>) -> Self {
        Transcript {
            messages,
            ..Transcript::default()
        }
    }
}

/// `value` as [`to_pretty`] writes it, with a final newline.
fn pretty<T: serde::Serialize + ?Sized>(value: &T) -> String {
    let mut text = to_pretty(value).expect("a Value always serializes");
    text.push('\n');
    text
}

/// [`pretty`] of a `Value`, its strings escaped by [`json_out`] (faster than
/// serde_json's escape, issue 23); a text over the indenting cap on the way
/// is written by [`pretty`] instead, which gives the same text.
fn pretty_tree(value: &Value) -> String {
    let mut out = json_out::JsonOut::new(true, 0);
    if out.tree(value).is_ok() && out.check().is_ok() {
        let mut text = out.into_string();
        text.push('\n');
        return text;
    }
    // The partial text freed before the text is written again.
    drop(out);
    pretty(value)
}

/// Parses a whole JSON document, with the position of a syntax error.
pub(crate) fn parse_document(format: Format, text: &str) -> Result<Value, FormatError> {
    serde_json::from_str(text).map_err(|e| {
        FormatError::new(
            format,
            format!(
                "not valid JSON: {e} (line {}, column {})",
                e.line(),
                e.column()
            ),
        )
    })
}

/// Names the JSON kind of a value, for errors (`"an array"`, `"null"`, ...).
///
/// ```
/// assert_eq!(agent_host_core::format::kind_of(&serde_json::json!([1])), "an array");
/// ```
pub fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Recognises the line-based formats by their first non-empty line.
///
/// Only the record's top-level keys and its `type` are looked at; nothing
/// else of the line is built (it may be a whole document of any size).
fn detect_jsonl(text: &str) -> Option<Format> {
    first_record(text)?.format()
}

/// The keys of the first non-empty line, when it is one JSON object.
fn first_record(text: &str) -> Option<RecordKeys> {
    let first = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    let mut de = serde_json::Deserializer::from_str(first);
    let keys = de::Deserializer::deserialize_map(&mut de, RecordKeys::default()).ok()?;
    de.end().ok()?;
    Some(keys)
}

/// The error for a log of JSON records of no format agent-host reads: its
/// first line is one JSON object and more lines follow (a document would
/// fail to parse as one, and the error would blame a reader never chosen).
fn unknown_records(text: &str) -> Option<FormatError> {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    lines.next()?;
    lines.next()?;
    let keys = first_record(text)?;
    Some(FormatError::undetected(format!(
        "line 1 is a JSON record ({}) of no line-based format agent-host reads ({}); name \
         the format with --format if it is one of them",
        keys.describe(),
        line_formats()
    )))
}

/// The names of the line-based formats, for errors.
fn line_formats() -> String {
    let names: Vec<&str> = Format::ALL
        .iter()
        .filter(|f| f.is_line_based())
        .map(|f| f.name())
        .collect();
    names.join(", ")
}

/// What detection needs of a record: its string `type` and which of the
/// telling keys it has.
#[derive(Default)]
struct RecordKeys {
    kind: Option<String>,
    session_id: bool,
    snake_session_id: bool,
    parent_uuid: bool,
    leaf_uuid: bool,
    message: bool,
    uuid: bool,
    payload: bool,
    record_type: bool,
    id: bool,
    timestamp: bool,
    instructions: bool,
    /// A `messages` list: a document (a request, a recording), no record.
    messages: bool,
    /// The first keys, in order, for errors.
    first_keys: Vec<String>,
}

impl RecordKeys {
    fn of_map(record: &Map<String, Value>) -> RecordKeys {
        let mut keys = RecordKeys {
            kind: record
                .get("type")
                .and_then(Value::as_str)
                .map(str::to_owned),
            ..RecordKeys::default()
        };
        for key in record.keys() {
            keys.see(key);
        }
        keys
    }

    fn see(&mut self, key: &str) {
        let seen = match key {
            "sessionId" => &mut self.session_id,
            "session_id" => &mut self.snake_session_id,
            "parentUuid" => &mut self.parent_uuid,
            "leafUuid" => &mut self.leaf_uuid,
            "message" => &mut self.message,
            "uuid" => &mut self.uuid,
            "payload" => &mut self.payload,
            "record_type" => &mut self.record_type,
            "id" => &mut self.id,
            "timestamp" => &mut self.timestamp,
            "instructions" => &mut self.instructions,
            "messages" => &mut self.messages,
            _ => {
                if self.first_keys.len() < 8 {
                    self.first_keys.push(key.chars().take(40).collect());
                }
                return;
            }
        };
        *seen = true;
        if self.first_keys.len() < 8 {
            self.first_keys.push(key.to_owned());
        }
    }

    /// The line-based format such a record belongs to, if any.
    fn format(&self) -> Option<Format> {
        if self.messages {
            return None;
        }
        let kind = self.kind.as_deref();
        // Codex rollouts: `{timestamp, type, payload}`; before 0.4x, a header
        // `{id, timestamp, instructions}` then bare items and state records.
        if self.payload && kind.is_some_and(|k| codex::RECORD_TYPES.contains(&k)) {
            return Some(Format::Codex);
        }
        if kind.is_none() && (self.record_type || (self.id && self.timestamp && self.instructions))
        {
            return Some(Format::Codex);
        }
        let claude_code = self.session_id
            || self.parent_uuid
            || self.leaf_uuid
            || (self.message && self.uuid)
            // `claude -p --output-format stream-json`, web exports: the
            // records of a session log without its bookkeeping.
            || (self.message && matches!(kind, Some("user" | "assistant")))
            || (self.snake_session_id
                && matches!(
                    kind,
                    Some("system" | "user" | "assistant" | "result" | "stream_event")
                ));
        if claude_code {
            return Some(Format::ClaudeCode);
        }
        match kind {
            Some(kind) if jsonl::LINE_TYPES.contains(&kind) && !self.payload => Some(Format::Jsonl),
            _ => None,
        }
    }

    /// The record's type and first keys, for errors.
    fn describe(&self) -> String {
        let kind = match &self.kind {
            Some(kind) => format!("type `{}`", kind.chars().take(40).collect::<String>()),
            None => "no string `type`".to_owned(),
        };
        format!("{kind}, keys {}", self.first_keys.join(", "))
    }
}

impl<'de> de::Visitor<'de> for RecordKeys {
    type Value = RecordKeys;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a record object")
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<RecordKeys, A::Error> {
        let mut keys = RecordKeys::default();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == "type" {
                keys.kind = map.next_value::<StringOrOther>()?.0;
                if keys.first_keys.len() < 8 {
                    keys.first_keys.push("type".into());
                }
                continue;
            }
            keys.see(&key);
            map.next_value::<de::IgnoredAny>()?;
        }
        Ok(keys)
    }
}

/// A string value, or `None` for a value of any other kind (skipped without
/// being built).
struct StringOrOther(Option<String>);

impl<'de> de::Deserialize<'de> for StringOrOther {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = StringOrOther;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<StringOrOther, E> {
                Ok(StringOrOther(Some(v.to_owned())))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<StringOrOther, E> {
                Ok(StringOrOther(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<StringOrOther, E> {
                Ok(StringOrOther(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<StringOrOther, E> {
                Ok(StringOrOther(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<StringOrOther, E> {
                Ok(StringOrOther(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<StringOrOther, E> {
                Ok(StringOrOther(None))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<StringOrOther, A::Error> {
                while seq.next_element::<de::IgnoredAny>()?.is_some() {}
                Ok(StringOrOther(None))
            }
            fn visit_map<A: de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<StringOrOther, A::Error> {
                while map
                    .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(StringOrOther(None))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// Tells the document formats apart: Responses items, OpenAI Chat
/// Completions messages, Anthropic messages; refuses, naming what it sees,
/// what is none of them.
fn classify_document(value: &Value) -> Result<Format, FormatError> {
    let messages = match value {
        Value::Array(items) => items,
        Value::Object(object) => {
            if object.contains_key("system") {
                return Ok(Format::Anthropic);
            }
            if gemini::is_document(object) {
                return Ok(Format::GeminiCli);
            }
            match object.get("messages") {
                Some(Value::Array(items)) => items,
                _ if responses::is_document(object) => return Ok(Format::Responses),
                _ => {
                    let keys: Vec<&str> = object.keys().take(8).map(String::as_str).collect();
                    return Err(FormatError::undetected(format!(
                        "the document is an object with keys {}; expected a JSON array of \
                         messages, an object with a `messages` array (OpenAI, Anthropic), \
                         `input`/`output` item lists (OpenAI Responses), or JSONL records \
                         ({}); name the format with --format",
                        keys.join(", "),
                        line_formats()
                    )));
                }
            }
        }
        other => {
            return Err(FormatError::undetected(format!(
                "the document is {}; expected messages or records",
                kind_of(other)
            )));
        }
    };
    if messages.iter().any(responses::is_item) {
        return Ok(Format::Responses);
    }
    if messages.iter().any(pydantic_ai::is_message) {
        return Ok(Format::PydanticAi);
    }
    if messages.iter().any(langchain::is_message) {
        return Ok(Format::LangChain);
    }
    for (index, message) in messages.iter().enumerate() {
        let Value::Object(object) = message else {
            return Err(FormatError::undetected(format!(
                "message {index} is {}, not a message object",
                kind_of(message)
            )));
        };
        if !object.contains_key("role") {
            return Err(FormatError::undetected(unknown_message(index, object)));
        }
        let role = object.get("role").and_then(Value::as_str);
        if matches!(role, Some("system" | "developer" | "tool" | "function"))
            || object.contains_key("tool_calls")
            || object.contains_key("tool_call_id")
            || object.contains_key("function_call")
        {
            return Ok(Format::OpenAi);
        }
        if !object.contains_key("content") && object.contains_key("parts") {
            return Err(FormatError::undetected(unknown_message(index, object)));
        }
        if let Some(Value::Array(blocks)) = object.get("content") {
            for block in blocks {
                let kind = block
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if anthropic::is_anthropic_block(kind, block) {
                    return Ok(Format::Anthropic);
                }
                if matches!(kind, "image_url" | "input_audio" | "file" | "refusal") {
                    return Ok(Format::OpenAi);
                }
            }
        }
    }
    Ok(Format::OpenAi)
}

/// What a message object without a `role` looks like, for the error: the
/// formats agent-host does not read are named when recognised.
fn unknown_message(index: usize, object: &Map<String, Value>) -> String {
    let keys: Vec<&str> = object.keys().take(8).map(String::as_str).collect();
    let has = |key: &str| object.contains_key(key);
    let kind = object.get("type").and_then(Value::as_str);
    let looks_like = if has("parts") && has("role") {
        Some(
            "a Gemini API `Content` (a Gemini CLI recording, `{sessionId, projectHash, \
             messages}`, reads as gemini-cli)",
        )
    } else if kind == Some("function") && (has("data") || has("content")) {
        Some("a LangChain function message")
    } else {
        None
    };
    let mut text = format!(
        "message {index} has no string `role` (its keys: {})",
        keys.join(", ")
    );
    match looks_like {
        Some(what) => text.push_str(&format!(
            "; it looks like {what}, which agent-host does not read"
        )),
        None => text.push_str(&format!(
            "; expected OpenAI or Anthropic messages, OpenAI Responses items, pydantic-ai or \
             LangChain messages, or JSONL records ({}); name the format with --format",
            line_formats()
        )),
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 23 stopped counting the values of short OpenAI documents (they
    /// cannot be over) and counts those of Claude Code records as they are
    /// parsed: the limits refuse what they refused, with the same errors, at
    /// the same places.
    #[test]
    fn limits_refuse_what_the_separate_count_refused() {
        let tight = |history_values, message_values| Limits {
            history_values,
            message_values,
            ..Limits::default()
        };
        // [ {role, content} x 2 ]: 1 + 2 * 3 values.
        let document =
            r#"[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]"#;
        assert!(parse_within(Format::OpenAi, document, &tight(7, 7)).is_ok());
        for e in [
            parse_within(Format::OpenAi, document, &tight(6, 6)).unwrap_err(),
            parse_detected_within(document, &tight(6, 6)).unwrap_err(),
        ] {
            assert_eq!(e.limit, Some(Limit::HistoryValues), "{e}");
            assert_eq!(
                e.to_string(),
                "openai document: the history holds more than 6 JSON values (the `history_values` limit)"
            );
        }
        // A document the typed reader does not take is counted first, as before.
        let request = r#"{"system": "s", "messages": [{"role": "user", "content": "hi"}]}"#;
        let e = parse_detected_within(request, &tight(5, 5)).unwrap_err();
        assert_eq!(e.limit, Some(Limit::HistoryValues), "{e}");

        // Claude Code: each record's values, then the history's. A record
        // holds 1 + 4 + 1 + 2 values.
        let record = |uuid: usize, text: &str| {
            let parent = match uuid {
                0 => "null".to_owned(),
                n => format!(r#""u{}""#, n - 1),
            };
            format!(
                r#"{{"type":"user","uuid":"u{uuid}","parentUuid":{parent},"sessionId":"s","message":{{"role":"user","content":"{text}"}}}}"#
            )
        };
        let log =
            |records: usize| -> String { (0..records).map(|n| record(n, "hi") + "\n").collect() };
        let read = parse_within(Format::ClaudeCode, &log(2), &tight(16, 8)).unwrap();
        assert_eq!(read.messages.len(), 2);
        let e = parse_within(Format::ClaudeCode, &log(2), &tight(16, 7)).unwrap_err();
        assert_eq!(e.limit, Some(Limit::MessageValues), "{e}");
        assert_eq!(
            e.to_string(),
            "claude-code line 1: the message holds more than 7 JSON values (the `message_values` limit)"
        );
        let e = parse_within(Format::ClaudeCode, &log(2), &tight(15, 8)).unwrap_err();
        assert_eq!(e.limit, Some(Limit::HistoryValues), "{e}");
        assert_eq!(e.location.line, Some(2), "{e}");
        // Forty records: the first ones, shorter than the room left, are
        // counted as they are parsed, the last ones first; the history's
        // limit falls exactly on the last record either way.
        let read = parse_within(Format::ClaudeCode, &log(40), &tight(320, 1000)).unwrap();
        assert_eq!(read.messages.len(), 40);
        let e = parse_within(Format::ClaudeCode, &log(40), &tight(319, 1000)).unwrap_err();
        assert_eq!(e.limit, Some(Limit::HistoryValues), "{e}");
        assert_eq!(e.location.line, Some(40), "{e}");
        // A bad line is quarantined as before, and counts nothing.
        let bad = format!(
            "{}{{\"type\": \n{}\n",
            record(0, "one") + "\n",
            record(1, "two")
        );
        let read = parse_within(Format::ClaudeCode, &bad, &tight(16, 8)).unwrap();
        assert_eq!(read.messages.len(), 2);
        assert_eq!(read.quarantined[0].line, 2);
        assert!(
            read.quarantined[0]
                .error
                .detail
                .starts_with("not valid JSON: "),
            "{:?}",
            read.quarantined
        );
    }

    #[test]
    fn detects_each_format() {
        let cases = [
            (r#"{"type":"user","id":"m1","content":"hi"}"#, Format::Jsonl),
            (
                r#"{"type":"user","uuid":"u","sessionId":"s","message":{"role":"user","content":"hi"}}"#,
                Format::ClaudeCode,
            ),
            (
                r#"[{"role":"system","content":"be brief"}]"#,
                Format::OpenAi,
            ),
            (
                r#"{"system":"be brief","messages":[{"role":"user","content":"hi"}]}"#,
                Format::Anthropic,
            ),
            (
                r#"[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"x","input":{}}]}]"#,
                Format::Anthropic,
            ),
            (
                r#"{"messages":[{"role":"user","content":"hi"}]}"#,
                Format::OpenAi,
            ),
            (
                "[\n {\"role\": \"user\",\n  \"content\": \"hi\"}\n]",
                Format::OpenAi,
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(Format::detect(text).unwrap(), expected, "{text}");
        }
    }

    /// A parsed document reads as its text does: the same format and
    /// messages, or the same error.
    #[test]
    fn a_parsed_document_reads_as_its_text() {
        let documents = [
            r#"{"type":"user","id":"m1","content":"hi"}"#,
            r#"{"type":"user","uuid":"u","sessionId":"s","message":{"role":"user","content":"hi"}}"#,
            r#"[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]"#,
            r#"{"system":"be brief","messages":[{"role":"user","content":"hi"}]}"#,
            r#"[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"x","input":{}}]}]"#,
            r#"{"messages":[{"role":"user","content":"hi"}]}"#,
            r#"[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"ok"}]"#,
            r#"{"type":"nonsense"}"#,
            r#"[{"role":"robot","content":"hi"}]"#,
            "42",
            "[]",
        ];
        for text in documents {
            let value: Value = serde_json::from_str(text).unwrap();
            let from_value = parse_detected_value(value).map_err(|e| e.to_string());
            let from_text = parse_detected(text).map_err(|e| e.to_string());
            assert_eq!(from_value, from_text, "{text}");
        }
    }

    #[test]
    fn undetectable_input_says_what_it_saw() {
        let err = Format::detect("42").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cannot tell the format: the document is a number"),
            "{err}"
        );
        let err = Format::detect("{\"foo\": 1}").unwrap_err();
        assert!(err.to_string().contains("--format"), "{err}");
        let err = Format::detect("[{\"role\": ").unwrap_err();
        assert!(err.to_string().contains("not valid JSON"), "{err}");
    }

    /// What the issue found running other tools' files: each is read
    /// faithfully, or refused naming what it is, never read as empty
    /// messages with success.
    #[test]
    fn foreign_shapes_are_read_or_refused_never_read_as_garbage() {
        // `claude -p` stream-json and web exports: Claude-Code-shaped records
        // without `sessionId`/`uuid`.
        let stream = r#"{"type":"user","message":{"role":"user","content":"hi"}}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"hello"}]}}"#;
        let (format, t) = parse_detected(stream).unwrap();
        assert_eq!(format, Format::ClaudeCode);
        let texts: Vec<String> = t.messages.iter().map(|m| m.text().into_owned()).collect();
        assert_eq!(texts, ["hi", "hello"]);
        // Read as native JSONL on purpose, it is refused rather than emptied.
        let err = parse(Format::Jsonl, stream).unwrap_err().to_string();
        assert!(err.contains("line 1, field `message`"), "{err}");
        assert!(err.contains("claude-code record"), "{err}");

        // A Codex rollout is a Codex rollout; named as Claude Code, it is an
        // error naming codex, not 0 messages.
        let rollout = r#"{"timestamp":"2025-10-29T00:59:38Z","type":"session_meta","payload":{"id":"x"}}
{"timestamp":"2025-10-29T00:59:39Z","type":"event_msg","payload":{"type":"token_count"}}"#;
        assert_eq!(Format::detect(rollout).unwrap(), Format::Codex);
        let err = parse(Format::ClaudeCode, rollout).unwrap_err().to_string();
        assert!(err.contains("--format codex"), "{err}");
        let err = parse(Format::Codex, rollout).unwrap_err().to_string();
        assert!(err.contains("none of its 2 records is a message"), "{err}");

        // Records of no known format: refused, blaming no reader.
        let unknown = "{\"event\":\"start\",\"run\":1}\n{\"event\":\"stop\",\"run\":1}\n";
        let err = parse_detected(unknown).unwrap_err();
        assert!(err.undetected);
        let text = err.to_string();
        assert!(text.starts_with("cannot tell the format: line 1 is a JSON record (no string `type`, keys event, run)"), "{text}");
        assert!(!text.contains("openai"), "{text}");

        // Documents of formats agent-host does not read are named.
        let cases = [
            (r#"[{"role":"user","parts":[{"text":"hi"}]}]"#, "Gemini"),
            (
                r#"[{"speaker":"bob","text":"hi"}]"#,
                "message 0 has no string `role` (its keys: speaker, text)",
            ),
            (r#"{"conversation":[]}"#, "an object with keys conversation"),
        ];
        for (text, expected) in cases {
            let err = parse_detected(text).unwrap_err();
            assert!(err.undetected, "{text}");
            let err = err.to_string();
            assert!(err.contains(expected), "{err}");
            assert!(!err.contains("missing `role`"), "{err}");
        }
    }

    #[test]
    fn document_shapes_go_to_their_reader() {
        let cases = [
            // A single Anthropic request message with a PDF.
            (
                r#"[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBER"}},{"type":"text","text":"Summarise"}]}]"#,
                Format::Anthropic,
            ),
            (
                r#"[{"role":"assistant","content":[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"q"}}]}]"#,
                Format::Anthropic,
            ),
            (
                r#"[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"UklG","format":"wav"}}]}]"#,
                Format::OpenAi,
            ),
            (
                r#"[{"role":"function","name":"f","content":"1"}]"#,
                Format::OpenAi,
            ),
            (
                r#"[{"type":"message","role":"user","content":"hi"}]"#,
                Format::Responses,
            ),
            (
                r#"[{"role":"user","content":[{"type":"input_text","text":"hi"}]}]"#,
                Format::Responses,
            ),
            (r#"{"input":"hi","output":[]}"#, Format::Responses),
            (
                r#"[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi"}]}]"#,
                Format::PydanticAi,
            ),
            (
                r#"[{"type":"human","data":{"content":"hi"}}]"#,
                Format::LangChain,
            ),
            (
                r#"{"sessionId":"s","projectHash":"p","messages":[{"id":"m","type":"user","content":"hi"}]}"#,
                Format::GeminiCli,
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(Format::detect(text).unwrap(), expected, "{text}");
        }
    }

    #[test]
    fn format_names_parse_back() {
        for format in Format::ALL {
            assert_eq!(format.name().parse::<Format>().unwrap(), format);
        }
        let err = "yaml".parse::<Format>().unwrap_err();
        assert!(
            err.contains("jsonl, openai, anthropic, claude-code"),
            "{err}"
        );
    }

    #[test]
    fn location_names_every_coordinate() {
        let err = FormatError::new(Format::Anthropic, "unknown block type `x`")
            .at_message(3)
            .at_block(1)
            .at_field("type");
        assert_eq!(
            err.to_string(),
            "anthropic message 3, block 1, field `type`: unknown block type `x`"
        );
        let err = FormatError::new(Format::Jsonl, "bad").at_line(7);
        assert_eq!(err.to_string(), "jsonl line 7: bad");
    }

    #[test]
    fn deeply_nested_extras_are_not_inflated_by_indentation() {
        // 100,000 bytes of brackets 100 deep, as a processor's metadata
        // could carry them: indented, a bracket a line, they took 5 MB.
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100)).repeat(500);
        let deep = format!("[{}]", deep.replace("][", "],["));
        let mut m = Message::user("hi").with_id("m1");
        m.metadata.insert(
            "openai".into(),
            serde_json::json!({"x": serde_json::from_str::<Value>(&deep).unwrap()}),
        );
        let text = write(Format::OpenAi, std::slice::from_ref(&m)).unwrap();
        assert!(text.len() < deep.len() * 4 + 4096, "{} bytes", text.len());
        assert_eq!(
            parse(Format::OpenAi, &text).unwrap().messages[0].metadata,
            m.metadata
        );
        // Ordinary output is still indented.
        let plain = write(Format::OpenAi, &[Message::user("hi")]).unwrap();
        assert!(plain.contains("\n    \"role\": \"user\""), "{plain}");
    }

    #[test]
    fn claude_code_cannot_be_written() {
        let err = write(Format::ClaudeCode, &[]).unwrap_err();
        assert!(err.detail.contains("import-only"));
    }
}
