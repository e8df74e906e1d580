//! pydantic-ai message histories (`ModelMessagesTypeAdapter.dump_json`), in
//! and out.
//!
//! A JSON array of `ModelRequest` (`{"kind": "request", "parts", "instructions"?}`)
//! and `ModelResponse` (`{"kind": "response", "parts", "usage", "model_name",
//! "timestamp", ...}`) objects. Request parts (`part_kind`):
//! - `system-prompt` becomes a system message, `user-prompt` a user message
//!   (content a string, or a list of strings and `image-url`, `audio-url`,
//!   `document-url`, `video-url` and `binary` items: images and files);
//! - `tool-return` becomes a tool message (content that is not a string is
//!   written as JSON text), `retry-prompt` a tool message marked as an error
//!   when it names its call, a user message otherwise.
//!
//! Response parts become one assistant message: `text` its text, `tool-call`
//! its tool calls (`args` as JSON text), `thinking` its reasoning (with the
//! signature); other parts (`builtin-tool-call`, `builtin-tool-return`,
//! `file`) are kept verbatim. A request's `instructions` becomes a system
//! message before its parts. What else a message or part carries is kept in
//! its metadata under `"pydantic_ai"`; ids are derived from position and
//! text.
//!
//! Written ([`to_messages`]): consecutive system, user and tool messages as
//! one `ModelRequest` (a tool error as a `retry-prompt`), each assistant
//! message as a `ModelResponse` (thinking, text, then tool calls, with its
//! model, time and usage); media as `binary` items (`data:` URLs) or URL
//! items. What was kept is written back: structured tool content while its
//! text is unchanged, thinking parts while the reasoning is, other parts as
//! they were.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::{Format, FormatError, kind_of};
use crate::message::{MediaRef, Message, Part, Reasoning, Role, ToolCall, Usage, document_id};

/// The metadata key under which what this model has no place for is kept.
pub const EXTRA_KEY: &str = "pydantic_ai";

const FORMAT: Format = Format::PydanticAi;

/// Whether `item` is a pydantic-ai message (`kind` request or response, and
/// `parts`).
pub(crate) fn is_message(item: &Value) -> bool {
    matches!(
        item.get("kind").and_then(Value::as_str),
        Some("request" | "response")
    ) && item.get("parts").is_some_and(Value::is_array)
}

/// Reads messages from a parsed document.
pub fn from_value(document: Value) -> Result<Vec<Message>, FormatError> {
    let Value::Array(items) = document else {
        return Err(FormatError::new(
            FORMAT,
            format!(
                "expected an array of messages, found {}",
                kind_of(&document)
            ),
        ));
    };
    let mut out = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        read_message(item, &mut out).map_err(|e| e.at_message(index))?;
    }
    for (index, m) in out.iter_mut().enumerate() {
        m.id = document_id("pydantic-ai", index, &m.text());
    }
    Ok(out)
}

fn error(detail: impl Into<String>) -> FormatError {
    FormatError::new(FORMAT, detail)
}

fn time(value: Option<&Value>) -> Result<Option<DateTime<Utc>>, FormatError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(t)) => DateTime::parse_from_rfc3339(t)
            .map(|t| Some(t.with_timezone(&Utc)))
            .map_err(|e| {
                error(format!("`{t}` is not an RFC 3339 time ({e})")).at_field("timestamp")
            }),
        Some(other) => Err(error(format!(
            "`timestamp` must be a string, found {}",
            kind_of(other)
        ))
        .at_field("timestamp")),
    }
}

fn string_of(part: &Map<String, Value>, key: &str) -> Result<String, FormatError> {
    match part.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(error(format!(
            "`{key}` must be a string, found {}",
            kind_of(other)
        ))
        .at_field(key)),
        None => Err(error(format!("missing `{key}`")).at_field(key)),
    }
}

/// Content that may be any JSON: a string as it is, anything else as JSON
/// text.
fn text_of(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn read_message(item: Value, out: &mut Vec<Message>) -> Result<(), FormatError> {
    let Value::Object(mut object) = item else {
        return Err(error(format!(
            "expected a message object, found {}",
            kind_of(&item)
        )));
    };
    let kind = match object.shift_remove("kind") {
        Some(Value::String(kind)) => kind,
        _ => return Err(error("missing string `kind`").at_field("kind")),
    };
    let parts = match object.shift_remove("parts") {
        Some(Value::Array(parts)) => parts,
        _ => return Err(error("missing array `parts`").at_field("parts")),
    };
    match kind.as_str() {
        "request" => {
            if let Some(Value::String(text)) = object.shift_remove("instructions") {
                let mut m = Message::system(text);
                m.metadata
                    .insert(EXTRA_KEY.into(), json!({"instructions": true}));
                out.push(m);
            }
            for (i, part) in parts.into_iter().enumerate() {
                out.push(request_part(part).map_err(|e| e.at_block(i))?);
            }
            Ok(())
        }
        "response" => {
            let mut m = Message::assistant("");
            for (i, part) in parts.into_iter().enumerate() {
                response_part(part, &mut m).map_err(|e| e.at_block(i))?;
            }
            m.model = match object.shift_remove("model_name") {
                Some(Value::String(name)) => Some(name),
                _ => None,
            };
            m.timestamp = time(object.get("timestamp"))?;
            object.shift_remove("timestamp");
            if let Some(Value::Object(usage)) = object.get("usage") {
                let get = |key: &str| usage.get(key).and_then(Value::as_u64);
                m.usage = Some(Usage {
                    input_tokens: get("input_tokens").or(get("request_tokens")).unwrap_or(0),
                    output_tokens: get("output_tokens").or(get("response_tokens")).unwrap_or(0),
                    cache_read_tokens: get("cache_read_tokens"),
                    cache_write_tokens: get("cache_write_tokens"),
                });
            }
            if !object.is_empty() {
                let extra = extra(&mut m);
                extra.insert("response".into(), Value::Object(object));
            }
            out.push(m);
            Ok(())
        }
        other => Err(error(format!(
            "unknown kind `{other}`; expected request or response"
        ))
        .at_field("kind")),
    }
}

fn extra(m: &mut Message) -> &mut Map<String, Value> {
    let entry = m
        .metadata
        .entry(EXTRA_KEY)
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut().expect("made an object above")
}

fn request_part(part: Value) -> Result<Message, FormatError> {
    let Value::Object(mut part) = part else {
        return Err(error(format!(
            "expected a part object, found {}",
            kind_of(&part)
        )));
    };
    let kind = match part.shift_remove("part_kind") {
        Some(Value::String(kind)) => kind,
        _ => return Err(error("missing string `part_kind`").at_field("part_kind")),
    };
    let timestamp = time(part.get("timestamp"))?;
    part.shift_remove("timestamp");
    let mut m = match kind.as_str() {
        "system-prompt" => Message::system(string_of(&part, "content")?),
        "user-prompt" => {
            let mut m = Message::user("");
            match part.get("content") {
                Some(Value::String(text)) => m.content = text.clone(),
                Some(Value::Array(items)) => {
                    for (i, item) in items.iter().enumerate() {
                        m.parts.push(
                            user_item(item).map_err(|e| e.at_field(format!("content[{i}]")))?,
                        );
                    }
                }
                _ => {
                    return Err(
                        error("a user prompt's `content` must be a string or a list")
                            .at_field("content"),
                    );
                }
            }
            m
        }
        "tool-return" | "retry-prompt" => {
            let call_id = match part.get("tool_call_id") {
                Some(Value::String(id)) => Some(id.clone()),
                _ => None,
            };
            let name = match part.get("tool_name") {
                Some(Value::String(name)) => Some(name.clone()),
                _ => None,
            };
            let text = text_of(part.get("content"));
            match (call_id, kind.as_str()) {
                (Some(call_id), _) => {
                    let mut m = Message::tool_result(call_id, name.unwrap_or_default(), text);
                    m.is_error = kind == "retry-prompt";
                    m
                }
                (None, "retry-prompt") => Message::user(text),
                (None, _) => {
                    return Err(error("a tool return needs a string `tool_call_id`")
                        .at_field("tool_call_id"));
                }
            }
        }
        other => {
            return Err(error(format!(
                "unknown request part `{other}`; expected system-prompt, user-prompt, \
                 tool-return or retry-prompt"
            ))
            .at_field("part_kind"));
        }
    };
    m.timestamp = timestamp;
    part.shift_remove("tool_call_id");
    part.shift_remove("tool_name");
    // A tool's content that is no string is kept as it was, beside its text.
    let structured = kind != "user-prompt"
        && matches!(
            part.get("content"),
            Some(Value::Array(_) | Value::Object(_))
        );
    if !structured {
        part.shift_remove("content");
    }
    if !part.is_empty() {
        extra(&mut m).insert("part".into(), Value::Object(part));
    }
    Ok(m)
}

/// A user prompt's item: a string, or a media item.
fn user_item(item: &Value) -> Result<Part, FormatError> {
    if let Value::String(text) = item {
        return Ok(Part::Text { text: text.clone() });
    }
    let kind = item.get("kind").and_then(Value::as_str).unwrap_or_default();
    let get = |key: &str| item.get(key).and_then(Value::as_str).map(str::to_owned);
    let media_type = get("media_type");
    match kind {
        "image-url" => Ok(Part::Image {
            source: MediaRef::Url(
                get("url").ok_or_else(|| error("missing string `url`").at_field("url"))?,
            ),
            mime_type: media_type,
        }),
        "audio-url" | "document-url" | "video-url" => Ok(Part::File {
            name: String::new(),
            path: get("url").ok_or_else(|| error("missing string `url`").at_field("url"))?,
            mime_type: media_type,
        }),
        "binary" => {
            let data =
                get("data").ok_or_else(|| error("missing string `data`").at_field("data"))?;
            let mime = media_type.unwrap_or_else(|| "application/octet-stream".into());
            let url = format!("data:{mime};base64,{data}");
            if mime.starts_with("image/") {
                Ok(Part::Image {
                    source: MediaRef::Url(url),
                    mime_type: Some(mime),
                })
            } else {
                Ok(Part::File {
                    name: get("identifier").unwrap_or_default(),
                    path: url,
                    mime_type: Some(mime),
                })
            }
        }
        other => Err(error(format!(
            "unsupported user content `{other}`; expected a string, image-url, audio-url, \
             document-url, video-url or binary"
        ))
        .at_field("kind")),
    }
}

fn response_part(part: Value, m: &mut Message) -> Result<(), FormatError> {
    let Value::Object(mut object) = part else {
        return Err(error(format!(
            "expected a part object, found {}",
            kind_of(&part)
        )));
    };
    let kind = object
        .get("part_kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    match kind.as_str() {
        "text" => {
            let text = string_of(&object, "content")?;
            if m.content.is_empty() && m.parts.is_empty() {
                m.content = text;
            } else {
                m.parts.push(Part::Text { text });
            }
        }
        "tool-call" => {
            let name = string_of(&object, "tool_name")?;
            let id = string_of(&object, "tool_call_id")?;
            let arguments = match object.shift_remove("args") {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s,
                Some(other) => other.to_string(),
            };
            m.tool_calls.push(ToolCall {
                id,
                name,
                arguments,
            });
        }
        "thinking" => {
            let text = string_of(&object, "content")?;
            let signature = object
                .get("signature")
                .and_then(Value::as_str)
                .map(str::to_owned);
            match &mut m.reasoning {
                None => {
                    m.reasoning = Some(Reasoning {
                        text,
                        signature,
                        redacted: false,
                    })
                }
                Some(r) => {
                    r.text.push_str("\n\n");
                    r.text.push_str(&text);
                    r.signature = signature.or(r.signature.take());
                }
            }
            let thinking = extra(m)
                .entry("thinking")
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(list) = thinking {
                list.push(Value::Object(object));
            }
        }
        "" => return Err(error("missing string `part_kind`").at_field("part_kind")),
        _ => {
            let kept = extra(m)
                .entry("parts")
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(list) = kept {
                list.push(Value::Object(object));
            }
        }
    }
    Ok(())
}

/// Writes messages as a `ModelMessage` list.
pub fn to_messages(messages: &[Message]) -> Result<Vec<Value>, FormatError> {
    let mut out: Vec<Value> = Vec::new();
    // The request being filled, while system, user and tool messages follow
    // each other.
    let mut request: Option<Map<String, Value>> = None;
    for (index, m) in messages.iter().enumerate() {
        let at = |e: FormatError| e.at_message(index);
        if m.role != Role::Assistant && (m.has_tool_calls() || m.reasoning.is_some()) {
            return Err(at(error(format!(
                "a {} message carries tool calls or reasoning, which only responses hold",
                m.role
            ))));
        }
        if m.role == Role::Assistant {
            if let Some(done) = request.take() {
                out.push(Value::Object(done));
            }
            out.push(response(m).map_err(at)?);
            continue;
        }
        let request = request.get_or_insert_with(|| {
            let mut r = Map::new();
            r.insert("kind".into(), json!("request"));
            r.insert("parts".into(), json!([]));
            r
        });
        let kept = kept_of(m);
        let is_instructions = m.role == Role::System
            && kept.is_some_and(|k| k.get("instructions") == Some(&Value::Bool(true)))
            && !request.contains_key("instructions")
            && request["parts"].as_array().is_some_and(Vec::is_empty)
            && m.parts.is_empty();
        if is_instructions {
            request.insert("instructions".into(), json!(m.content));
            continue;
        }
        let part = request_part_of(m).map_err(at)?;
        if let Some(Value::Array(parts)) = request.get_mut("parts") {
            parts.push(part);
        }
    }
    if let Some(done) = request {
        out.push(Value::Object(done));
    }
    Ok(out)
}

fn kept_of(m: &Message) -> Option<&Map<String, Value>> {
    m.metadata.get(EXTRA_KEY)?.as_object()
}

/// Adds what `kept` holds under `key` to `object`, without replacing what
/// the message set.
fn merge_kept(object: &mut Map<String, Value>, kept: Option<&Map<String, Value>>, key: &str) {
    if let Some(Value::Object(fields)) = kept.and_then(|k| k.get(key)) {
        for (field, value) in fields {
            if !object.contains_key(field) && field != "part_kind" && field != "kind" {
                object.insert(field.clone(), value.clone());
            }
        }
    }
}

fn request_part_of(m: &Message) -> Result<Value, FormatError> {
    let kept = kept_of(m);
    let mut part = Map::new();
    match m.role {
        Role::System => {
            part.insert("part_kind".into(), json!("system-prompt"));
            part.insert("content".into(), json!(m.text()));
        }
        Role::User => {
            part.insert("part_kind".into(), json!("user-prompt"));
            let content = if m.parts.is_empty() {
                json!(m.content)
            } else {
                let mut items = Vec::new();
                if !m.content.is_empty() {
                    items.push(json!(m.content));
                }
                for (i, p) in m.parts.iter().enumerate() {
                    items.push(user_item_of(p).map_err(|e| e.at_block(i))?);
                }
                Value::Array(items)
            };
            part.insert("content".into(), content);
        }
        Role::Tool => {
            let call_id = m.tool_call_id.as_deref().ok_or_else(|| {
                error("a tool result without a `tool_call_id` cannot be written")
                    .at_field("tool_call_id")
            })?;
            let kind = if m.is_error {
                "retry-prompt"
            } else {
                "tool-return"
            };
            part.insert("part_kind".into(), json!(kind));
            part.insert(
                "tool_name".into(),
                json!(m.tool_name.as_deref().unwrap_or_default()),
            );
            // Structured content kept as read stands while its text is this one.
            let text = m.text();
            let structured = kept
                .and_then(|k| k.get("part"))
                .and_then(|p| p.get("content"))
                .filter(|c| c.to_string() == text);
            part.insert(
                "content".into(),
                structured.cloned().unwrap_or_else(|| json!(text)),
            );
            part.insert("tool_call_id".into(), json!(call_id));
        }
        Role::Assistant => unreachable!("responses are written apart"),
    }
    if let Some(t) = m.timestamp {
        part.insert("timestamp".into(), json!(t.to_rfc3339()));
    }
    merge_kept(&mut part, kept, "part");
    Ok(Value::Object(part))
}

fn user_item_of(part: &Part) -> Result<Value, FormatError> {
    let data = |url: &str| {
        url.strip_prefix("data:")
            .and_then(|rest| rest.split_once(";base64,"))
            .map(|(mime, data)| (mime.to_owned(), data.to_owned()))
    };
    Ok(match part {
        Part::Text { text } => json!(text),
        Part::Image {
            source: MediaRef::Url(url),
            mime_type,
        } => match data(url) {
            Some((mime, data)) => json!({"kind": "binary", "data": data, "media_type": mime}),
            None => {
                let mut item = json!({"kind": "image-url", "url": url});
                if let Some(mime) = mime_type {
                    item["media_type"] = json!(mime);
                }
                item
            }
        },
        Part::Image {
            source: MediaRef::Path(path),
            ..
        } => {
            return Err(error(format!(
                "the image `{path}` is a media path; load it into a data: URL (or strip media) \
                 before writing pydantic-ai messages"
            )));
        }
        Part::File {
            name,
            path,
            mime_type,
        } => match data(path) {
            Some((mime, data)) => {
                let mut item = json!({"kind": "binary", "data": data, "media_type": mime});
                if !name.is_empty() {
                    item["identifier"] = json!(name);
                }
                item
            }
            None => {
                let kind = match mime_type.as_deref() {
                    Some(m) if m.starts_with("audio/") => "audio-url",
                    Some(m) if m.starts_with("video/") => "video-url",
                    _ => "document-url",
                };
                let mut item = json!({"kind": kind, "url": path});
                if let Some(mime) = mime_type {
                    item["media_type"] = json!(mime);
                }
                item
            }
        },
    })
}

/// Whether a part kept in metadata is one the reader keeps again as it is.
fn keepable_part(part: &Value, thinking: bool) -> bool {
    let kind = part
        .get("part_kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if thinking {
        kind == "thinking" && part.get("content").is_some_and(Value::is_string)
    } else {
        part.is_object() && !matches!(kind, "" | "text" | "tool-call" | "thinking")
    }
}

fn response(m: &Message) -> Result<Value, FormatError> {
    let kept = kept_of(m);
    let mut parts = Vec::new();
    if let Some(r) = &m.reasoning {
        let kept_thinking: Vec<&Value> = kept
            .and_then(|k| k.get("thinking"))
            .and_then(Value::as_array)
            .map(|list| list.iter().filter(|p| keepable_part(p, true)).collect())
            .unwrap_or_default();
        let joined: Vec<&str> = kept_thinking
            .iter()
            .filter_map(|p| p.get("content").and_then(Value::as_str))
            .collect();
        if !kept_thinking.is_empty() && joined.join("\n\n") == r.text {
            parts.extend(kept_thinking.into_iter().cloned());
        } else {
            let mut part = json!({"part_kind": "thinking", "content": r.text});
            if let Some(signature) = &r.signature {
                part["signature"] = json!(signature);
            }
            parts.push(part);
        }
    }
    if !m.content.is_empty() {
        parts.push(json!({"part_kind": "text", "content": m.content}));
    }
    for (i, part) in m.parts.iter().enumerate() {
        match part {
            Part::Text { text } => parts.push(json!({"part_kind": "text", "content": text})),
            _ => {
                return Err(
                    error("a response holds text, thinking and tool calls only").at_block(i)
                );
            }
        }
    }
    for call in &m.tool_calls {
        parts.push(json!({"part_kind": "tool-call", "tool_name": call.name,
                          "args": call.arguments, "tool_call_id": call.id}));
    }
    if let Some(Value::Array(other)) = kept.and_then(|k| k.get("parts")) {
        parts.extend(other.iter().filter(|p| keepable_part(p, false)).cloned());
    }
    let mut object = Map::new();
    object.insert("kind".into(), json!("response"));
    object.insert("parts".into(), Value::Array(parts));
    if let Some(model) = &m.model {
        object.insert("model_name".into(), json!(model));
    }
    if let Some(t) = m.timestamp {
        object.insert("timestamp".into(), json!(t.to_rfc3339()));
    }
    // The usage as read (with its details) while it says what the message's does.
    let kept_usage = kept
        .and_then(|k| k.get("response"))
        .and_then(|r| r.get("usage"))
        .filter(|kept| {
            m.usage.is_some_and(|u| {
                let get = |key: &str| kept.get(key).and_then(Value::as_u64);
                get("input_tokens").or(get("request_tokens")).unwrap_or(0) == u.input_tokens
                    && get("output_tokens").or(get("response_tokens")).unwrap_or(0)
                        == u.output_tokens
            })
        });
    if let Some(usage) = kept_usage {
        object.insert("usage".into(), usage.clone());
    } else if let Some(u) = &m.usage {
        let mut usage = json!({"input_tokens": u.input_tokens, "output_tokens": u.output_tokens});
        if let Some(n) = u.cache_read_tokens {
            usage["cache_read_tokens"] = json!(n);
        }
        if let Some(n) = u.cache_write_tokens {
            usage["cache_write_tokens"] = json!(n);
        }
        object.insert("usage".into(), usage);
    }
    merge_kept(&mut object, kept, "response");
    Ok(Value::Object(object))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A history in the shape `ModelMessagesTypeAdapter.dump_json` gives
    /// (pydantic-ai 1.x), made up for this test.
    fn history() -> Value {
        json!([
            {"kind": "request", "instructions": null, "parts": [
                {"part_kind": "system-prompt", "content": "You are a weather bot.", "timestamp": "2025-10-01T10:00:00Z", "dynamic_ref": null},
                {"part_kind": "user-prompt", "content": "Weather in Paris?", "timestamp": "2025-10-01T10:00:00Z"}]},
            {"kind": "response", "model_name": "gpt-5", "timestamp": "2025-10-01T10:00:02Z",
             "usage": {"input_tokens": 50, "output_tokens": 9, "cache_read_tokens": 0, "details": {}},
             "provider_name": "openai", "finish_reason": "tool_call", "parts": [
                {"part_kind": "thinking", "content": "Use the tool.", "id": "rs_1", "signature": null, "provider_name": "openai"},
                {"part_kind": "tool-call", "tool_name": "weather", "args": {"city": "Paris"}, "tool_call_id": "call_1"}]},
            {"kind": "request", "parts": [
                {"part_kind": "tool-return", "tool_name": "weather", "content": {"temp": 18}, "tool_call_id": "call_1",
                 "metadata": null, "timestamp": "2025-10-01T10:00:03Z"},
                {"part_kind": "retry-prompt", "content": "Say it in Celsius.", "tool_name": null, "tool_call_id": null,
                 "timestamp": "2025-10-01T10:00:03Z"}]},
            {"kind": "response", "parts": [{"part_kind": "text", "content": "18°C."}]}
        ])
    }

    #[test]
    fn reads_requests_responses_calls_and_returns() {
        let messages = from_value(history()).unwrap();
        let roles: Vec<Role> = messages.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::System,
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::User,
                Role::Assistant
            ]
        );
        let call = &messages[2];
        assert_eq!(call.tool_calls[0].arguments, r#"{"city":"Paris"}"#);
        assert_eq!(call.reasoning.as_ref().unwrap().text, "Use the tool.");
        assert_eq!(call.usage.unwrap().input_tokens, 50);
        assert_eq!(
            call.metadata[EXTRA_KEY]["response"]["finish_reason"],
            "tool_call"
        );
        let result = &messages[3];
        assert_eq!(
            (result.content.as_str(), result.tool_name.as_deref()),
            (r#"{"temp":18}"#, Some("weather"))
        );
        assert_eq!(
            result.metadata[EXTRA_KEY]["part"]["content"],
            json!({"temp": 18})
        );
        assert!(crate::pairing::ToolPairing::of(&messages).is_complete());
        assert_eq!(messages[5].content, "18°C.");
    }

    #[test]
    fn bad_parts_name_message_block_and_field() {
        let cases = [
            (
                json!([{"kind": "request", "parts": [{"part_kind": "magic"}]}]),
                "message 0, block 0, field `part_kind`",
            ),
            (
                json!([{"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "x"}]}]),
                "field `tool_call_id`",
            ),
            (
                json!([{"kind": "other", "parts": []}]),
                "unknown kind `other`",
            ),
            (json!([{"kind": "request"}]), "field `parts`"),
        ];
        for (document, expected) in cases {
            let err = from_value(document).unwrap_err().to_string();
            assert!(err.starts_with("pydantic-ai "), "{err}");
            assert!(err.contains(expected), "{err}");
        }
    }

    /// Written and read back, a history is the same messages (ids derived
    /// anew), and written again the same JSON.
    #[test]
    fn a_history_round_trips() {
        let messages = from_value(history()).unwrap();
        let written = to_messages(&messages).unwrap();
        let back = from_value(Value::Array(written.clone())).unwrap();
        assert_eq!(back, messages);
        assert_eq!(to_messages(&back).unwrap(), written);
        assert_eq!(written[2]["parts"][0]["content"], json!({"temp": 18}));
        // A retry prompt that names no call was read as the user's words.
        assert_eq!(written[2]["parts"][1]["part_kind"], "user-prompt");
    }

    #[test]
    fn other_formats_write_as_requests_and_responses() {
        let mut call = Message::assistant("Checking.");
        call.push_tool_call("c1", "ls", "{}");
        call.reasoning = Some(Reasoning {
            text: "think".into(),
            signature: Some("sig".into()),
            redacted: false,
        });
        let mut failed = Message::tool_result("c1", "ls", "no such dir");
        failed.is_error = true;
        let written =
            to_messages(&[Message::system("s"), Message::user("u"), call, failed]).unwrap();
        assert_eq!(written.len(), 3);
        assert_eq!(written[0]["parts"].as_array().unwrap().len(), 2);
        assert_eq!(
            written[1]["parts"][0],
            json!({"part_kind": "thinking", "content": "think", "signature": "sig"})
        );
        assert_eq!(written[1]["parts"][2]["tool_call_id"], "c1");
        assert_eq!(written[2]["parts"][0]["part_kind"], "retry-prompt");
        let err = to_messages(&[Message::tool_result("", "x", "y").with_id("t")]).map(|_| ());
        assert!(err.is_ok());
        let mut orphan = Message::tool_result("c", "x", "y");
        orphan.tool_call_id = None;
        let err = to_messages(&[orphan]).unwrap_err().to_string();
        assert!(err.contains("message 0, field `tool_call_id`"), "{err}");
    }
}
