//! LangChain message dicts (`messages_to_dict`), import only.
//!
//! A JSON array of `{"type": "human" | "ai" | "system" | "tool" | "chat",
//! "data": {...}}` objects, as `langchain_core.messages.messages_to_dict`
//! writes them (the flat form, the fields beside `type` without `data`,
//! reads too). `data.content` is a string or a list of content blocks
//! (strings and `{"type": "text", "text"}`; `image_url` blocks become
//! images; other blocks are kept verbatim). An `ai` message's `tool_calls`
//! (`{name, args, id}`) become tool calls (`args` as JSON text); a `tool`
//! message answers `tool_call_id`, an error when its `status` is `error`; a
//! `chat` message takes its `role`. `usage_metadata` is the usage; what else
//! a message carries (`id`, `name`, `additional_kwargs`,
//! `response_metadata`, ...) is kept in its metadata under `"langchain"`.
//! Ids are derived from position and text.

use serde_json::{Map, Value};

use super::{Format, FormatError, kind_of};
use crate::message::{MediaRef, Message, Part, Role, ToolCall, Usage, document_id};

/// The metadata key under which what this model has no place for is kept.
pub const EXTRA_KEY: &str = "langchain";

const FORMAT: Format = Format::LangChain;

/// Whether `item` is a LangChain message dict.
pub(crate) fn is_message(item: &Value) -> bool {
    item.get("role").is_none()
        && matches!(
            item.get("type").and_then(Value::as_str),
            Some("human" | "ai" | "system" | "tool" | "chat")
        )
        && (item.get("data").is_some_and(Value::is_object) || item.get("content").is_some())
}

/// Reads messages from a parsed document.
pub fn from_value(document: Value) -> Result<Vec<Message>, FormatError> {
    let Value::Array(items) = document else {
        return Err(FormatError::new(
            FORMAT,
            format!(
                "expected an array of message dicts, found {}",
                kind_of(&document)
            ),
        ));
    };
    let mut out = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        let mut m = read_message(item).map_err(|e| e.at_message(index))?;
        m.id = document_id("langchain", index, &m.text());
        out.push(m);
    }
    Ok(out)
}

fn error(detail: impl Into<String>) -> FormatError {
    FormatError::new(FORMAT, detail)
}

fn read_message(item: Value) -> Result<Message, FormatError> {
    let Value::Object(mut object) = item else {
        return Err(error(format!(
            "expected a message dict, found {}",
            kind_of(&item)
        )));
    };
    let kind = match object.shift_remove("type") {
        Some(Value::String(kind)) => kind,
        _ => return Err(error("missing string `type`").at_field("type")),
    };
    let mut data = match object.shift_remove("data") {
        Some(Value::Object(data)) => data,
        Some(other) => {
            return Err(error(format!(
                "`data` must be an object, found {}",
                kind_of(&other)
            ))
            .at_field("data"));
        }
        None => std::mem::take(&mut object),
    };
    // `data` repeats the type.
    if data.get("type").and_then(Value::as_str) == Some(kind.as_str()) {
        data.shift_remove("type");
    }
    let role = match kind.as_str() {
        "human" => Role::User,
        "ai" => Role::Assistant,
        "system" => Role::System,
        "tool" => Role::Tool,
        "chat" => match data.get("role").and_then(Value::as_str) {
            Some("user" | "human") => Role::User,
            Some("assistant" | "ai") => Role::Assistant,
            Some("system") => Role::System,
            _ => {
                return Err(
                    error("a chat message needs a `role` of user, assistant or system")
                        .at_field("data.role"),
                );
            }
        },
        other => {
            return Err(error(format!(
                "unknown message type `{other}`; expected human, ai, system, tool or chat"
            ))
            .at_field("type"));
        }
    };
    let mut m = Message::new(role, "");
    let mut kept = Map::new();
    match data.shift_remove("content") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => m.content = text,
        Some(Value::Array(blocks)) => {
            let mut other = Vec::new();
            for block in blocks {
                match block_part(&block) {
                    Some(part) => m.parts.push(part),
                    None => other.push(block),
                }
            }
            if !other.is_empty() {
                kept.insert("content".into(), Value::Array(other));
            }
        }
        Some(other) => {
            return Err(error(format!(
                "`content` must be a string or a list of blocks, found {}",
                kind_of(&other)
            ))
            .at_field("data.content"));
        }
    }
    if role == Role::Assistant {
        match data.shift_remove("tool_calls") {
            None | Some(Value::Null) => {}
            Some(Value::Array(calls)) => {
                for (i, call) in calls.iter().enumerate() {
                    let get = |key: &str| call.get(key).and_then(Value::as_str).map(str::to_owned);
                    let (Some(id), Some(name)) = (get("id"), get("name")) else {
                        return Err(error("a tool call needs string `id` and `name`")
                            .at_field(format!("data.tool_calls[{i}]")));
                    };
                    let arguments = match call.get("args") {
                        None | Some(Value::Null) => "{}".to_owned(),
                        Some(args) => args.to_string(),
                    };
                    m.tool_calls.push(ToolCall {
                        id,
                        name,
                        arguments,
                    });
                }
            }
            Some(other) => {
                return Err(error(format!(
                    "`tool_calls` must be a list, found {}",
                    kind_of(&other)
                ))
                .at_field("data.tool_calls"));
            }
        }
        if let Some(Value::Object(usage)) = data.get("usage_metadata") {
            let get = |key: &str| usage.get(key).and_then(Value::as_u64);
            let details = usage.get("input_token_details");
            let detail = |key: &str| details.and_then(|d| d.get(key)).and_then(Value::as_u64);
            m.usage = Some(Usage {
                input_tokens: get("input_tokens").unwrap_or(0),
                output_tokens: get("output_tokens").unwrap_or(0),
                cache_read_tokens: detail("cache_read"),
                cache_write_tokens: detail("cache_creation"),
            });
        }
    }
    if role == Role::Tool {
        match data.shift_remove("tool_call_id") {
            Some(Value::String(id)) => m.tool_call_id = Some(id),
            _ => {
                return Err(error("a tool message needs a string `tool_call_id`")
                    .at_field("data.tool_call_id"));
            }
        }
        m.tool_name = match data.shift_remove("name") {
            Some(Value::String(name)) => Some(name),
            _ => None,
        };
        m.is_error = data.get("status").and_then(Value::as_str) == Some("error");
    }
    // Fields at their defaults say nothing; the rest is kept.
    for (key, value) in data {
        let empty = match &value {
            Value::Null => true,
            Value::Bool(b) => !b,
            Value::Array(a) => a.is_empty(),
            Value::Object(o) => o.is_empty(),
            _ => false,
        };
        if !empty {
            kept.insert(key, value);
        }
    }
    kept.extend(object);
    if !kept.is_empty() {
        m.metadata.insert(EXTRA_KEY.into(), Value::Object(kept));
    }
    Ok(m)
}

/// A content block as a part, when it is text or an image.
fn block_part(block: &Value) -> Option<Part> {
    if let Value::String(text) = block {
        return Some(Part::Text { text: text.clone() });
    }
    match block.get("type").and_then(Value::as_str)? {
        "text" if block.as_object().is_some_and(|o| o.len() == 2) => Some(Part::Text {
            text: block.get("text")?.as_str()?.to_owned(),
        }),
        "image_url" => {
            let url = block
                .get("image_url")
                .and_then(|i| i.get("url").or(Some(i)))
                .and_then(Value::as_str)?;
            Some(Part::Image {
                source: MediaRef::Url(url.to_owned()),
                mime_type: super::openai::data_url_mime(url),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What `messages_to_dict` gives for a tool-calling exchange
    /// (langchain-core 0.3), made up for this test.
    fn history() -> Value {
        json!([
            {"type": "system", "data": {"content": "You are a weather bot.", "additional_kwargs": {},
             "response_metadata": {}, "type": "system", "name": null, "id": null}},
            {"type": "human", "data": {"content": "Weather in Paris?", "additional_kwargs": {},
             "response_metadata": {}, "type": "human", "name": null, "id": null, "example": false}},
            {"type": "ai", "data": {"content": "", "additional_kwargs": {}, "type": "ai", "name": null,
             "response_metadata": {"model_name": "gpt-4o", "finish_reason": "tool_calls"}, "id": "run-1",
             "example": false, "invalid_tool_calls": [],
             "tool_calls": [{"name": "weather", "args": {"city": "Paris"}, "id": "call_1", "type": "tool_call"}],
             "usage_metadata": {"input_tokens": 50, "output_tokens": 9, "total_tokens": 59,
                                "input_token_details": {"cache_read": 10}}}},
            {"type": "tool", "data": {"content": "18C", "type": "tool", "name": "weather", "id": null,
             "tool_call_id": "call_1", "artifact": null, "status": "success", "additional_kwargs": {},
             "response_metadata": {}}},
            {"type": "ai", "content": [{"type": "text", "text": "18C in Paris."},
                                       {"type": "text", "text": "[1]", "annotations": [1]}]}
        ])
    }

    #[test]
    fn reads_every_message_type_with_calls_and_usage() {
        let messages = from_value(history()).unwrap();
        let roles: Vec<Role> = messages.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::System,
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::Assistant
            ]
        );
        let call = &messages[2];
        assert_eq!(call.tool_calls[0].arguments, r#"{"city":"Paris"}"#);
        assert_eq!(call.usage.unwrap().cache_read_tokens, Some(10));
        assert_eq!(call.metadata[EXTRA_KEY]["id"], "run-1");
        assert_eq!(messages[3].tool_call_id.as_deref(), Some("call_1"));
        assert!(messages[1].metadata.is_empty(), "defaults are not kept");
        assert_eq!(messages[4].text(), "18C in Paris.");
        assert_eq!(
            messages[4].metadata[EXTRA_KEY]["content"][0]["annotations"],
            json!([1])
        );
        assert!(crate::pairing::ToolPairing::of(&messages).is_complete());
    }

    #[test]
    fn bad_messages_name_index_and_field() {
        let cases = [
            (
                json!([{"type": "tool", "data": {"content": "x"}}]),
                "message 0, field `data.tool_call_id`",
            ),
            (
                json!([{"type": "chat", "data": {"content": "x", "role": "robot"}}]),
                "field `data.role`",
            ),
            (
                json!([{"type": "ai", "data": {"tool_calls": [{"name": "x"}]}}]),
                "field `data.tool_calls[0]`",
            ),
            (json!([{"type": "human", "data": 3}]), "field `data`"),
        ];
        for (document, expected) in cases {
            let err = from_value(document).unwrap_err().to_string();
            assert!(err.starts_with("langchain "), "{err}");
            assert!(err.contains(expected), "{err}");
        }
    }
}
