//! agent-host's native log format: one JSON message per line.
//!
//! ```text
//! {"type":"system","id":"m0","content":"You are terse."}
//! {"type":"user","id":"m1","timestamp":"2025-05-01T12:00:00Z","content":"List /tmp"}
//! {"type":"assistant","id":"m2","tool_calls":[{"id":"c1","name":"ls","arguments":"{\"path\":\"/tmp\"}"}],"usage":{"input_tokens":120,"output_tokens":9},"model":"gpt-4o"}
//! {"type":"tool_result","id":"m3","tool_call_id":"c1","tool_name":"ls","content":"a.txt"}
//! {"type":"summary","role":"assistant","id":"m4","synthetic":true,"content":"## Current State ..."}
//! ```
//!
//! `type` is the role (`tool_result` for the tool role), or `summary` for a
//! message of a summary checkpoint, which then names its `role`. Fields at their
//! default are left out. A field this version does not know is kept in the
//! message's metadata under its own name, so nothing written by a newer version
//! is lost. A missing `id` is derived from the line's position and text.
//!
//! Reading goes straight from the bytes to typed messages (no intermediate
//! `serde_json::Value`); see the `jsonl` benchmark.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Format, FormatError, Limits, Meter};
use crate::message::{Message, Part, Reasoning, Role, ToolCall, Usage, derived_id};

/// The values of the `type` field.
pub const LINE_TYPES: [&str; 5] = ["user", "assistant", "tool_result", "system", "summary"];

/// Reads a whole log within the default [`Limits`]. Blank lines are skipped;
/// the first bad line is an error naming its line number.
pub fn parse(text: &str) -> Result<Vec<Message>, FormatError> {
    super::parse_within(Format::Jsonl, text, &Limits::default()).map(|t| t.messages)
}

/// Reads one line; `line_no` (1-based) is used in errors and derived ids.
///
/// The line is held to the default per-message [`Limits`] (its bytes, and its
/// JSON values counted before anything is built), as every line of a store's
/// log is.
pub fn parse_line(line: &str, line_no: usize) -> Result<Message, FormatError> {
    let limits = Limits::default();
    // A value takes a byte at least: a line no longer than the value limit
    // cannot be over it, and is not counted (nearly every line of a real
    // log, so that a store's load does not pay for the count).
    if line.len() as u64 > limits.message_values.min(limits.message_bytes) {
        Meter::new(limits)
            .message(Format::Jsonl, line)
            .map_err(|e| e.at_line(line_no))?;
    }
    parse_counted(line, line_no)
}

/// Reads one line whose size was already checked.
pub(super) fn parse_counted(line: &str, line_no: usize) -> Result<Message, FormatError> {
    let mut de = serde_json::Deserializer::from_str(line);
    let message = LineSeed { line_no }
        .deserialize(&mut de)
        .and_then(|m| de.end().map(|()| m))
        .map_err(|e| FormatError::new(Format::Jsonl, e.to_string()).at_line(line_no))?;
    if let Some(key) = foreign_body(&message) {
        return Err(FormatError::new(
            Format::Jsonl,
            format!(
                "the record carries its content in `{key}`, which native lines do not have: \
                 it is a record of another format (`message`: Claude Code, `payload`: Codex); \
                 name it with --format"
            ),
        )
        .at_line(line_no)
        .at_field(key));
    }
    Ok(message)
}

/// The key of another format's message body, when a line read as native
/// holds nothing but that: `message` (Claude Code) or `payload` (Codex).
/// Such a line would otherwise read as an empty message, its text kept
/// only as metadata.
fn foreign_body(m: &Message) -> Option<&'static str> {
    let empty = m.content.is_empty()
        && m.parts.is_empty()
        && m.tool_calls.is_empty()
        && m.reasoning.is_none()
        && m.tool_call_id.is_none();
    if !empty {
        return None;
    }
    ["message", "payload"]
        .into_iter()
        .find(|key| m.metadata.get(*key).is_some_and(Value::is_object))
}

/// Appends one message as a line (with its newline) to `out`.
pub fn write_line(message: &Message, out: &mut Vec<u8>) {
    serde_json::to_writer(&mut *out, &LineRef::from(message))
        .expect("writing JSON to a Vec cannot fail");
    out.push(b'\n');
}

/// The length in bytes of `message` as a line, newline included, measured
/// without building the line.
///
/// Every field counts (ids, tool calls, media sources, metadata, ...), as
/// escaped in JSON: what storing the message costs.
///
/// ```
/// use agent_host_core::Message;
/// use agent_host_core::format::jsonl;
///
/// let m = Message::user("hi").with_id("m1");
/// let mut line = Vec::new();
/// jsonl::write_line(&m, &mut line);
/// assert_eq!(jsonl::encoded_len(&m), line.len());
/// ```
pub fn encoded_len(message: &Message) -> usize {
    /// Counts what is written to it.
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, &LineRef::from(message))
        .expect("counting JSON bytes cannot fail");
    count.0 + 1
}

/// Whether `message` as a line (see [`encoded_len`]) is at most `max` bytes.
///
/// Measured only when a bound taken from the lengths of its strings (each
/// byte escaped at worst as six, `\u00XX`) could pass `max`: nearly every
/// message is far below any limit, and is not written out to tell.
pub fn encoded_len_within(message: &Message, max: u64) -> bool {
    let m = message;
    let mut strings = m.id.len() + m.content.len();
    for part in &m.parts {
        strings += match part {
            Part::Text { text } => text.len(),
            Part::Image { source, mime_type } => {
                let (crate::message::MediaRef::Url(s) | crate::message::MediaRef::Path(s)) = source;
                s.len() + mime_type.as_ref().map_or(0, String::len)
            }
            Part::File {
                name,
                path,
                mime_type,
            } => name.len() + path.len() + mime_type.as_ref().map_or(0, String::len),
        };
    }
    if let Some(r) = &m.reasoning {
        strings += r.text.len() + r.signature.as_ref().map_or(0, String::len);
    }
    for call in &m.tool_calls {
        strings += call.id.len() + call.name.len() + call.arguments.len();
    }
    for s in [
        &m.tool_call_id,
        &m.tool_name,
        &m.model,
        &m.agent,
        &m.channel,
    ] {
        strings += s.as_ref().map_or(0, String::len);
    }
    // Field names, numbers, a timestamp, and per part and call their own.
    let fixed = 1024 + 128 * (m.parts.len() + m.tool_calls.len());
    let bound = (strings as u64)
        .saturating_mul(6)
        .saturating_add(fixed as u64);
    if m.metadata.is_empty() && bound <= max {
        return true;
    }
    encoded_len(message) as u64 <= max
}

/// Writes messages as a log, one line each.
pub fn to_string(messages: &[Message]) -> String {
    let mut out = Vec::with_capacity(messages.len() * 256);
    for message in messages {
        write_line(message, &mut out);
    }
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// The borrowed shape of a line, for writing.
#[derive(Serialize)]
struct LineRef<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<Role>,
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<&'a DateTime<Utc>>,
    #[serde(skip_serializing_if = "str::is_empty")]
    content: &'a str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    parts: &'a [Part],
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<&'a Reasoning>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tool_calls: &'a [ToolCall],
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_name: Option<&'a str>,
    #[serde(skip_serializing_if = "is_false")]
    is_error: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<&'a Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    channel: Option<&'a str>,
    #[serde(skip_serializing_if = "is_false")]
    synthetic: bool,
    #[serde(skip_serializing_if = "Map::is_empty")]
    metadata: &'a Map<String, Value>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl<'a> From<&'a Message> for LineRef<'a> {
    fn from(m: &'a Message) -> Self {
        let (kind, role) = if m.summary {
            ("summary", Some(m.role))
        } else {
            let kind = match m.role {
                Role::System => "system",
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::Tool => "tool_result",
            };
            (kind, None)
        };
        LineRef {
            kind,
            role,
            id: &m.id,
            timestamp: m.timestamp.as_ref(),
            content: &m.content,
            parts: &m.parts,
            reasoning: m.reasoning.as_ref(),
            tool_calls: &m.tool_calls,
            tool_call_id: m.tool_call_id.as_deref(),
            tool_name: m.tool_name.as_deref(),
            is_error: m.is_error,
            usage: m.usage.as_ref(),
            model: m.model.as_deref(),
            agent: m.agent.as_deref(),
            channel: m.channel.as_deref(),
            synthetic: m.synthetic,
            metadata: &m.metadata,
        }
    }
}

/// Reads one line straight into a [`Message`].
struct LineSeed {
    line_no: usize,
}

impl<'de> DeserializeSeed<'de> for LineSeed {
    type Value = Message;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Message, D::Error> {
        deserializer.deserialize_map(self)
    }
}

/// The known keys of a line; anything else is `Other`.
enum Key {
    Type,
    Role,
    Id,
    Timestamp,
    Content,
    Parts,
    Reasoning,
    ToolCalls,
    ToolCallId,
    ToolName,
    IsError,
    Usage,
    Model,
    Agent,
    Channel,
    Synthetic,
    Summary,
    Metadata,
    Other(String),
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Key, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Key, E> {
                Ok(match key {
                    "type" => Key::Type,
                    "role" => Key::Role,
                    "id" => Key::Id,
                    "timestamp" => Key::Timestamp,
                    "content" => Key::Content,
                    "parts" => Key::Parts,
                    "reasoning" => Key::Reasoning,
                    "tool_calls" => Key::ToolCalls,
                    "tool_call_id" => Key::ToolCallId,
                    "tool_name" => Key::ToolName,
                    "is_error" => Key::IsError,
                    "usage" => Key::Usage,
                    "model" => Key::Model,
                    "agent" => Key::Agent,
                    "channel" => Key::Channel,
                    "synthetic" => Key::Synthetic,
                    "summary" => Key::Summary,
                    "metadata" => Key::Metadata,
                    other => Key::Other(other.to_owned()),
                })
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

/// The `type` field's value.
#[derive(Clone, Copy, PartialEq)]
enum LineType {
    Role(Role),
    Summary,
}

impl<'de> Deserialize<'de> for LineType {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<LineType, D::Error> {
        struct TypeVisitor;
        impl Visitor<'_> for TypeVisitor {
            type Value = LineType;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "one of {}", LINE_TYPES.join(", "))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LineType, E> {
                Ok(match v {
                    "user" => LineType::Role(Role::User),
                    "assistant" => LineType::Role(Role::Assistant),
                    "system" => LineType::Role(Role::System),
                    "tool_result" => LineType::Role(Role::Tool),
                    "summary" => LineType::Summary,
                    other => {
                        return Err(E::custom(format_args!(
                            "unknown message type `{other}`; expected one of {}",
                            LINE_TYPES.join(", ")
                        )));
                    }
                })
            }
        }
        deserializer.deserialize_str(TypeVisitor)
    }
}

/// An RFC 3339 timestamp, parsed without an intermediate `String`.
struct Timestamp(DateTime<Utc>);

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Timestamp, D::Error> {
        struct TimeVisitor;
        impl Visitor<'_> for TimeVisitor {
            type Value = Timestamp;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an RFC 3339 timestamp")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Timestamp, E> {
                DateTime::parse_from_rfc3339(v)
                    .map(|t| Timestamp(t.with_timezone(&Utc)))
                    .map_err(|e| {
                        E::custom(format_args!(
                            "field `timestamp`: `{v}` is not an RFC 3339 time ({e})"
                        ))
                    })
            }
        }
        deserializer.deserialize_str(TimeVisitor)
    }
}

impl<'de> Visitor<'de> for LineSeed {
    type Value = Message;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Message, A::Error> {
        let mut m = Message::default();
        let mut line_type = None;
        let mut role = None;
        let mut unknown: Vec<(String, Value)> = Vec::new();
        let mut seen_id = false;
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Type => line_type = Some(map.next_value::<LineType>()?),
                Key::Role => role = Some(map.next_value::<Role>()?),
                Key::Id => {
                    m.id = map.next_value()?;
                    seen_id = true;
                }
                Key::Timestamp => m.timestamp = map.next_value::<Option<Timestamp>>()?.map(|t| t.0),
                Key::Content => m.content = map.next_value::<Option<String>>()?.unwrap_or_default(),
                Key::Parts => m.parts = map.next_value()?,
                Key::Reasoning => m.reasoning = map.next_value()?,
                Key::ToolCalls => m.tool_calls = map.next_value()?,
                Key::ToolCallId => m.tool_call_id = map.next_value()?,
                Key::ToolName => m.tool_name = map.next_value()?,
                Key::IsError => m.is_error = map.next_value()?,
                Key::Usage => m.usage = map.next_value()?,
                Key::Model => m.model = map.next_value()?,
                Key::Agent => m.agent = map.next_value()?,
                Key::Channel => m.channel = map.next_value()?,
                Key::Synthetic => m.synthetic = map.next_value()?,
                Key::Summary => m.summary |= map.next_value::<bool>()?,
                Key::Metadata => m.metadata = map.next_value()?,
                Key::Other(name) => unknown.push((name, map.next_value()?)),
            }
        }
        match line_type {
            None => return Err(de::Error::missing_field("type")),
            Some(LineType::Summary) => {
                m.summary = true;
                m.role = role.ok_or_else(|| {
                    de::Error::custom("a `summary` line needs a `role` (user or assistant)")
                })?;
            }
            Some(LineType::Role(r)) => {
                if let Some(role) = role.filter(|&role| role != r) {
                    return Err(de::Error::custom(format_args!(
                        "`role` {role} contradicts `type` {}",
                        LineRef::from(&Message::new(r, "")).kind
                    )));
                }
                m.role = r;
            }
        }
        if m.role == Role::Tool && m.tool_call_id.is_none() {
            return Err(de::Error::custom(
                "a `tool_result` line needs a `tool_call_id` naming the call it answers",
            ));
        }
        for (name, value) in unknown {
            m.metadata.entry(name).or_insert(value);
        }
        if !seen_id {
            m.id = derived_id("jsonl", self.line_no, &m.content);
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::MediaRef;
    use chrono::TimeZone;

    fn full_assistant() -> Message {
        let mut m = Message::assistant("Looking.").with_id("m2");
        m.timestamp = Some(Utc.with_ymd_and_hms(2025, 9, 3, 0, 47, 19).unwrap());
        m.parts.push(Part::Image {
            source: MediaRef::Path("media/a.png".into()),
            mime_type: Some("image/png".into()),
        });
        m.parts.push(Part::File {
            name: "notes.txt".into(),
            path: "/tmp/notes.txt".into(),
            mime_type: None,
        });
        m.reasoning = Some(Reasoning {
            text: "think".into(),
            signature: Some("sig".into()),
            redacted: false,
        });
        m.push_tool_call("c1", "ls", r#"{"path":"/tmp"}"#);
        m.usage = Some(Usage {
            input_tokens: 10,
            output_tokens: 2,
            cache_read_tokens: Some(5),
            cache_write_tokens: None,
        });
        m.model = Some("gpt-4o".into());
        m.agent = Some("coder".into());
        m.channel = Some("cli".into());
        m.synthetic = true;
        m.metadata
            .insert("trace".into(), serde_json::json!({"span": 3}));
        m
    }

    #[test]
    fn a_line_over_the_per_message_limits_is_refused_naming_the_limit() {
        let zeros = vec!["0"; 1_000_001].join(",");
        let line = format!("{{\"type\":\"user\",\"content\":\"hi\",\"x\":[{zeros}]}}");
        let e = parse_line(&line, 7).unwrap_err();
        assert_eq!(e.limit, Some(super::super::Limit::MessageValues), "{e}");
        assert_eq!(e.location.line, Some(7));
        // Just under: read, its values kept.
        let zeros = vec!["0"; 999_990].join(",");
        let line = format!("{{\"type\":\"user\",\"content\":\"hi\",\"x\":[{zeros}]}}");
        assert!(parse_line(&line, 1).is_ok());
    }

    #[test]
    fn every_field_round_trips() {
        let mut summary = Message::assistant("## Current State").with_id("s1");
        summary.summary = true;
        let mut tool = Message::tool_result("c1", "ls", "a.txt").with_id("m3");
        tool.is_error = true;
        let messages = vec![
            Message::system("terse").with_id("m0"),
            Message::user("hi").with_id("m1"),
            full_assistant(),
            tool,
            summary,
        ];
        let text = to_string(&messages);
        assert_eq!(text.lines().count(), 5);
        assert_eq!(parse(&text).unwrap(), messages);
        // Writing what was read gives the same bytes.
        assert_eq!(to_string(&parse(&text).unwrap()), text);
    }

    #[test]
    fn unknown_fields_are_kept_in_metadata() {
        let m = parse_line(
            r#"{"type":"user","id":"a","content":"x","future":{"v":2}}"#,
            1,
        )
        .unwrap();
        assert_eq!(m.metadata["future"], serde_json::json!({"v": 2}));
    }

    #[test]
    fn missing_id_is_derived_from_position_and_text() {
        let a = parse_line(r#"{"type":"user","content":"x"}"#, 4).unwrap();
        let b = parse_line(r#"{"type":"user","content":"x"}"#, 4).unwrap();
        assert_eq!(a.id, b.id);
        assert!(a.id.starts_with("jsonl-00004-"), "{}", a.id);
    }

    #[test]
    fn bad_lines_name_line_and_problem() {
        let cases = [
            (
                r#"{"type":"robot","id":"a"}"#,
                "unknown message type `robot`",
            ),
            (r#"{"id":"a","content":"x"}"#, "missing field `type`"),
            (
                r#"{"type":"tool_result","id":"a","content":"x"}"#,
                "needs a `tool_call_id`",
            ),
            (r#"{"type":"summary","id":"a"}"#, "needs a `role`"),
            (
                r#"{"type":"user","role":"assistant","id":"a"}"#,
                "contradicts",
            ),
            (
                r#"{"type":"user","id":"a","timestamp":"yesterday"}"#,
                "`yesterday` is not an RFC 3339 time",
            ),
            (r#"{"type":"user","id":"a","content":"x""#, "EOF"),
            (
                r#"{"type":"user","id":"a"} trailing"#,
                "trailing characters",
            ),
            ("[1,2]", "expected a message object"),
        ];
        for (line, expected) in cases {
            let text = format!("{{\"type\":\"user\",\"id\":\"ok\"}}\n\n{line}\n");
            let err = parse(&text).unwrap_err();
            assert_eq!(err.location.line, Some(3), "{line}");
            let shown = err.to_string();
            assert!(shown.starts_with("jsonl line 3: "), "{shown}");
            assert!(shown.contains(expected), "{line}: {shown}");
        }
    }

    #[test]
    fn null_content_reads_as_empty() {
        let m = parse_line(r#"{"type":"assistant","id":"a","content":null}"#, 1).unwrap();
        assert_eq!(m.content, "");
    }

    /// The quick bound never lets through a message over the limit: at the
    /// limit it says yes, one byte below it says no, for messages whose every
    /// byte is escaped at the worst (`\u0001` is six bytes).
    #[test]
    fn the_size_bound_is_exact_at_the_limit() {
        let worst = "\u{1}".repeat(300);
        let mut call = Message::assistant(worst.clone()).with_id(worst.clone());
        call.push_tool_call(worst.clone(), worst.clone(), worst.clone());
        call.parts.push(Part::Text {
            text: worst.clone(),
        });
        call.reasoning = Some(Reasoning {
            text: worst.clone(),
            signature: Some(worst.clone()),
            redacted: false,
        });
        let mut result = Message::tool_result(worst.clone(), worst.clone(), "");
        result.model = Some(worst.clone());
        result.usage = Some(Usage {
            input_tokens: u64::MAX,
            output_tokens: u64::MAX,
            cache_read_tokens: Some(u64::MAX),
            cache_write_tokens: Some(u64::MAX),
        });
        result.timestamp = Some("2025-05-01T12:00:00.123456789Z".parse().unwrap());
        for m in [call, result, Message::user(""), Message::user("plain")] {
            let len = encoded_len(&m) as u64;
            assert!(encoded_len_within(&m, len), "{m:?}");
            assert!(!encoded_len_within(&m, len - 1), "{m:?}");
        }
    }
}
