//! Gemini CLI chat recordings (`~/.gemini/tmp/<project>/chats/session-*.json`),
//! import only.
//!
//! A document `{sessionId, projectHash, startTime, lastUpdated, messages,
//! summary?}`; each message `{id, timestamp, type, content, ...}`:
//! - `user` becomes a user message;
//! - `gemini` becomes an assistant message: its `thoughts` (`{subject,
//!   description}`) are its reasoning (and kept verbatim), `tokens` its usage,
//!   `model` its model; each of its `toolCalls` (`{id, name, args, result,
//!   status, ...}`) is a tool call, and the call's `result` (function
//!   responses) a tool message after it, an error when `status` is `error`;
//! - `info`, `error` and `warning` notices were shown to the user, never sent
//!   to the model: they are listed in [`Transcript::skipped`] (their `line` is
//!   the message's 1-based position).
//!
//! `content` is a string or a list of parts (`{text}`; other parts are kept
//! verbatim). A message's id is its `id`; a tool message's is `<id>:<call
//! id>`. What else a message or call carries is kept in its metadata under
//! `"gemini"`; `summary` is the transcript's title.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::{Format, FormatError, Skipped, Transcript, kind_of};
use crate::message::{Message, Reasoning, ToolCall, Usage};

/// The metadata key under which what this model has no place for is kept.
pub const EXTRA_KEY: &str = "gemini";

const FORMAT: Format = Format::GeminiCli;

/// Whether an object is a Gemini CLI recording.
pub(crate) fn is_document(object: &Map<String, Value>) -> bool {
    object.contains_key("projectHash") && matches!(object.get("messages"), Some(Value::Array(_)))
}

/// Reads a recording from a parsed document.
pub fn from_value(document: Value) -> Result<Transcript, FormatError> {
    let Value::Object(mut object) = document else {
        return Err(FormatError::new(
            FORMAT,
            format!(
                "expected a recording object with `messages`, found {}",
                kind_of(&document)
            ),
        ));
    };
    let Some(Value::Array(items)) = object.shift_remove("messages") else {
        return Err(FormatError::new(FORMAT, "missing array `messages`").at_field("messages"));
    };
    let mut transcript = Transcript {
        title: match object.get("summary") {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        },
        ..Transcript::default()
    };
    for (index, item) in items.into_iter().enumerate() {
        read_message(item, index, &mut transcript).map_err(|e| e.at_message(index))?;
    }
    Ok(transcript)
}

fn string(object: &mut Map<String, Value>, key: &str) -> Result<Option<String>, FormatError> {
    match object.shift_remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(FormatError::new(
            FORMAT,
            format!("`{key}` must be a string, found {}", kind_of(&other)),
        )
        .at_field(key)),
    }
}

fn time(text: Option<&str>) -> Result<Option<DateTime<Utc>>, FormatError> {
    text.map(|t| {
        DateTime::parse_from_rfc3339(t)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|e| {
                FormatError::new(FORMAT, format!("`{t}` is not an RFC 3339 time ({e})"))
                    .at_field("timestamp")
            })
    })
    .transpose()
}

fn read_message(item: Value, index: usize, transcript: &mut Transcript) -> Result<(), FormatError> {
    let Value::Object(mut object) = item else {
        return Err(FormatError::new(
            FORMAT,
            format!("expected a message object, found {}", kind_of(&item)),
        ));
    };
    let kind = string(&mut object, "type")?
        .ok_or_else(|| FormatError::new(FORMAT, "missing string `type`").at_field("type"))?;
    let mut m = match kind.as_str() {
        "user" => Message::user(""),
        "gemini" => Message::assistant(""),
        "info" | "error" | "warning" => {
            transcript.skipped.push(Skipped {
                line: index + 1,
                kind,
            });
            return Ok(());
        }
        other => {
            return Err(FormatError::new(
                FORMAT,
                format!(
                    "unknown message type `{other}`; expected user, gemini, info, error or warning"
                ),
            )
            .at_field("type"));
        }
    };
    m.id = string(&mut object, "id")?.unwrap_or_else(|| format!("gemini-{index:05}"));
    let stamp = string(&mut object, "timestamp")?;
    m.timestamp = time(stamp.as_deref())?;
    let mut extra = Map::new();
    match object.shift_remove("content") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => m.content = text,
        Some(Value::Array(parts)) => {
            let (text, other) = split_parts(parts);
            m.content = text;
            if !other.is_empty() {
                extra.insert("parts".into(), Value::Array(other));
            }
        }
        Some(Value::Object(part)) => {
            let (text, other) = split_parts(vec![Value::Object(part)]);
            m.content = text;
            if !other.is_empty() {
                extra.insert("parts".into(), Value::Array(other));
            }
        }
        Some(other) => {
            return Err(FormatError::new(
                FORMAT,
                format!(
                    "`content` must be a string or parts, found {}",
                    kind_of(&other)
                ),
            )
            .at_field("content"));
        }
    }
    let mut results = Vec::new();
    if kind == "gemini" {
        m.model = string(&mut object, "model")?;
        if let Some(Value::Object(tokens)) = object.shift_remove("tokens") {
            let get = |key: &str| tokens.get(key).and_then(Value::as_u64);
            m.usage = Some(Usage {
                input_tokens: get("input").unwrap_or(0),
                output_tokens: get("output").unwrap_or(0),
                cache_read_tokens: get("cached"),
                cache_write_tokens: None,
            });
            extra.insert("tokens".into(), Value::Object(tokens));
        }
        if let Some(thoughts) = object.shift_remove("thoughts") {
            let text = thoughts_text(&thoughts);
            if !text.is_empty() {
                m.reasoning = Some(Reasoning {
                    text,
                    ..Reasoning::default()
                });
            }
            extra.insert("thoughts".into(), thoughts);
        }
        match object.shift_remove("toolCalls") {
            None | Some(Value::Null) => {}
            Some(Value::Array(calls)) => {
                for (i, call) in calls.into_iter().enumerate() {
                    let at = |e: FormatError| {
                        let field = e.location.field.clone().unwrap_or_default();
                        e.at_field(format!("toolCalls[{i}].{field}"))
                    };
                    let (call, result) = tool_call(call, &m.id).map_err(at)?;
                    m.tool_calls.push(call);
                    results.extend(result);
                }
            }
            Some(other) => {
                return Err(FormatError::new(
                    FORMAT,
                    format!("`toolCalls` must be an array, found {}", kind_of(&other)),
                )
                .at_field("toolCalls"));
            }
        }
    }
    extra.extend(object);
    if !extra.is_empty() {
        m.metadata.insert(EXTRA_KEY.into(), Value::Object(extra));
    }
    let timestamp = m.timestamp;
    transcript.messages.push(m);
    for mut result in results {
        result.timestamp = result.timestamp.or(timestamp);
        transcript.messages.push(result);
    }
    Ok(())
}

/// The text of `{text}` parts, joined, and the other parts.
fn split_parts(parts: Vec<Value>) -> (String, Vec<Value>) {
    let mut texts = Vec::new();
    let mut other = Vec::new();
    for part in parts {
        match part {
            Value::String(text) => texts.push(text),
            Value::Object(ref p) if p.len() == 1 && p.get("text").is_some_and(Value::is_string) => {
                texts.push(p["text"].as_str().unwrap_or_default().to_owned());
            }
            part => other.push(part),
        }
    }
    (texts.join("\n"), other)
}

/// Thoughts as text: each `subject` then its `description`.
fn thoughts_text(thoughts: &Value) -> String {
    let Value::Array(thoughts) = thoughts else {
        return String::new();
    };
    let pieces: Vec<String> = thoughts
        .iter()
        .map(|t| {
            let get = |key: &str| t.get(key).and_then(Value::as_str).unwrap_or_default();
            match (get("subject"), get("description")) {
                ("", d) => d.to_owned(),
                (s, "") => s.to_owned(),
                (s, d) => format!("{s}: {d}"),
            }
        })
        .filter(|p| !p.is_empty())
        .collect();
    pieces.join("\n\n")
}

/// A tool call, and the tool message of its result when it has one.
fn tool_call(call: Value, message_id: &str) -> Result<(ToolCall, Option<Message>), FormatError> {
    let Value::Object(mut call) = call else {
        return Err(FormatError::new(
            FORMAT,
            format!("expected a tool call object, found {}", kind_of(&call)),
        ));
    };
    let id = string(&mut call, "id")?.ok_or_else(|| {
        FormatError::new(FORMAT, "a tool call needs a string `id`").at_field("id")
    })?;
    let name = string(&mut call, "name")?.ok_or_else(|| {
        FormatError::new(FORMAT, "a tool call needs a string `name`").at_field("name")
    })?;
    let arguments = match call.shift_remove("args") {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(args) => args.to_string(),
    };
    let result = call.shift_remove("result");
    let tool_call = ToolCall {
        id: id.clone(),
        name: name.clone(),
        arguments,
    };
    let Some(result) = result.filter(|r| !r.is_null()) else {
        return Ok((tool_call, None));
    };
    let mut m = Message::tool_result(id.clone(), name, result_text(&result));
    m.id = format!("{message_id}:{id}");
    m.is_error = call.get("status").and_then(Value::as_str) == Some("error");
    m.timestamp = time(call.get("timestamp").and_then(Value::as_str))?;
    call.insert("result".into(), result);
    m.metadata.insert(EXTRA_KEY.into(), Value::Object(call));
    Ok((tool_call, Some(m)))
}

/// What a call's result says: the `output` (or `error`) of its function
/// responses, their response as JSON text otherwise, and text parts.
fn result_text(result: &Value) -> String {
    let parts: Vec<&Value> = match result {
        Value::Array(parts) => parts.iter().collect(),
        Value::String(text) => return text.clone(),
        other => vec![other],
    };
    let mut pieces = Vec::new();
    for part in parts {
        if let Some(text) = part
            .as_str()
            .or_else(|| part.get("text").and_then(Value::as_str))
        {
            pieces.push(text.to_owned());
        } else if let Some(response) = part.get("functionResponse").and_then(|f| f.get("response"))
        {
            match response
                .get("output")
                .or_else(|| response.get("error"))
                .and_then(Value::as_str)
            {
                Some(text) => pieces.push(text.to_owned()),
                None => pieces.push(response.to_string()),
            }
        } else {
            pieces.push(part.to_string());
        }
    }
    pieces.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;
    use serde_json::json;

    /// A recording in the shape Gemini CLI 0.x writes (made up for this test
    /// from `ChatRecordingService`'s types).
    fn recording() -> Value {
        json!({
            "sessionId": "9e3a", "projectHash": "5f2c", "startTime": "2025-10-01T10:00:00.000Z",
            "lastUpdated": "2025-10-01T10:01:00.000Z", "summary": "Fix the failing test",
            "messages": [
                {"id": "m1", "timestamp": "2025-10-01T10:00:00.000Z", "type": "user",
                 "content": "Why does test_parse fail?"},
                {"id": "m2", "timestamp": "2025-10-01T10:00:05.000Z", "type": "gemini",
                 "content": "", "model": "gemini-2.5-pro",
                 "thoughts": [{"subject": "Reading the test", "description": "It asserts 3.",
                               "timestamp": "2025-10-01T10:00:03.000Z"}],
                 "tokens": {"input": 900, "output": 40, "cached": 100, "thoughts": 12, "tool": 0, "total": 1052},
                 "toolCalls": [{"id": "run_shell_command-1", "name": "run_shell_command",
                                "args": {"command": "cargo test test_parse"},
                                "result": [{"functionResponse": {"id": "run_shell_command-1", "name": "run_shell_command",
                                            "response": {"output": "src/lib.rs:42: expected 3, got 4"}}}],
                                "status": "error", "timestamp": "2025-10-01T10:00:09.000Z",
                                "displayName": "Shell", "resultDisplay": "expected 3, got 4"}]},
                {"id": "m3", "timestamp": "2025-10-01T10:00:10.000Z", "type": "info", "content": "Request cancelled."},
                {"id": "m4", "timestamp": "2025-10-01T10:00:12.000Z", "type": "gemini",
                 "content": [{"text": "src/lib.rs:42 expects 3"}, {"text": "; it gets 4."}]}
            ]
        })
    }

    #[test]
    fn reads_turns_tool_results_thoughts_and_usage() {
        let t = from_value(recording()).unwrap();
        assert_eq!(t.title.as_deref(), Some("Fix the failing test"));
        let roles: Vec<Role> = t.messages.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
        );
        let turn = &t.messages[1];
        assert_eq!(
            turn.tool_calls[0].arguments,
            r#"{"command":"cargo test test_parse"}"#
        );
        assert_eq!(
            turn.reasoning.as_ref().unwrap().text,
            "Reading the test: It asserts 3."
        );
        assert_eq!(turn.usage.unwrap().cache_read_tokens, Some(100));
        assert_eq!(turn.model.as_deref(), Some("gemini-2.5-pro"));
        let result = &t.messages[2];
        assert_eq!(result.id, "m2:run_shell_command-1");
        assert_eq!(result.content, "src/lib.rs:42: expected 3, got 4");
        assert!(result.is_error);
        assert_eq!(result.metadata[EXTRA_KEY]["displayName"], "Shell");
        assert_eq!(
            t.messages[3].content,
            "src/lib.rs:42 expects 3\n; it gets 4."
        );
        assert_eq!(
            t.skipped,
            [Skipped {
                line: 3,
                kind: "info".into()
            }]
        );
        assert!(crate::pairing::ToolPairing::of(&t.messages).is_complete());
    }

    #[test]
    fn bad_messages_name_index_and_field() {
        let cases = [
            (
                json!({"projectHash": "x", "messages": [{"type": "robot"}]}),
                "message 0, field `type`",
            ),
            (
                json!({"projectHash": "x", "messages": [{"type": "gemini", "toolCalls": [{"name": "x"}]}]}),
                "field `toolCalls[0].id`",
            ),
            (
                json!({"projectHash": "x", "messages": [{"type": "user", "timestamp": "soon"}]}),
                "`soon` is not",
            ),
            (json!({"projectHash": "x"}), "field `messages`"),
        ];
        for (document, expected) in cases {
            let err = from_value(document).unwrap_err().to_string();
            assert!(err.starts_with("gemini-cli "), "{err}");
            assert!(err.contains(expected), "{err}");
        }
    }
}
