//! OpenAI Responses API items, in and out; the Codex CLI's rollouts hold the
//! same items (see [`super::codex`]).
//!
//! Read: a JSON array of items, or an object with an `input` list (a request
//! body; `input` may also be a string) and/or an `output` list (a response).
//! Items:
//! - `message` (roles `system`, `developer`, `user`, `assistant`; content a
//!   string or `input_text`/`output_text`/`refusal`, `input_image`,
//!   `input_file` parts) becomes a message of that role;
//! - `function_call`, `custom_tool_call` (free-form `input`, kept as the
//!   call's arguments) and `local_shell_call` (its `action`, as JSON text)
//!   become tool calls of the assistant turn they are in: the assistant
//!   message just before them, or a new one;
//! - `function_call_output`, `custom_tool_call_output` and
//!   `local_shell_call_output` become tool messages, named after their call;
//! - `reasoning` items (their `summary` and `content` texts, and the
//!   `encrypted_content` a model needs back) belong to the assistant turn
//!   that follows them: its reasoning is their text, and the items themselves
//!   are kept verbatim in its metadata, with any other item this model has no
//!   place for (`web_search_call`, `image_generation_call`, MCP items, ...);
//! - `compaction` items (opaque, encrypted) become a summary checkpoint
//!   message holding the item verbatim.
//!
//! What an item has beyond what the message model holds (item `id`s,
//! `status`, a `developer` role, part annotations, the type of a custom or
//! shell call) is kept in the message's metadata under `"responses"` and
//! written back.
//!
//! Written: the same items. A turn's kept items are written before its
//! message when its reasoning is unchanged; reasoning that was edited is
//! written as a plain summary (the encrypted content no longer matches it),
//! and reasoning that was removed takes its kept items with it. Messages
//! carry no ids in this format; ids are derived from position and text.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::{Format, FormatError, kind_of, openai::data_url_mime};
use crate::message::{MediaRef, Message, Part, Reasoning, Role, ToolCall, document_id};

/// The metadata key under which what this model has no place for is kept.
pub const EXTRA_KEY: &str = "responses";

/// The item types this reader knows (the ones it maps, and the ones it keeps
/// verbatim).
pub const ITEM_TYPES: [&str; 25] = [
    "message",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "local_shell_call_output",
    "reasoning",
    "compaction",
    "compaction_summary",
    "web_search_call",
    "file_search_call",
    "computer_call",
    "computer_call_output",
    "image_generation_call",
    "code_interpreter_call",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "mcp_approval_response",
    "item_reference",
    "shell_call",
    "shell_call_output",
    "apply_patch_call",
    "apply_patch_call_output",
];

/// Whether `item` is a Responses item: an object whose `type` is an item
/// type, or a message whose content parts are Responses parts.
pub(crate) fn is_item(item: &Value) -> bool {
    let kind = item.get("type").and_then(Value::as_str);
    if kind.is_some_and(|k| ITEM_TYPES.contains(&k)) {
        return true;
    }
    kind.is_none()
        && item.get("role").is_some()
        && item
            .get("content")
            .and_then(Value::as_array)
            .is_some_and(|parts| {
                parts.iter().any(|p| {
                    matches!(
                        p.get("type").and_then(Value::as_str),
                        Some("input_text" | "output_text" | "input_image" | "input_file")
                    )
                })
            })
}

/// Whether an object is a Responses request or response: an `input` or
/// `output` list (or a string `input`) and no `messages`.
pub(crate) fn is_document(object: &Map<String, Value>) -> bool {
    !object.contains_key("messages")
        && (matches!(
            object.get("input"),
            Some(Value::Array(_) | Value::String(_))
        ) || matches!(object.get("output"), Some(Value::Array(_))))
}

const FORMAT: Format = Format::Responses;

/// Reads messages from a parsed document.
pub fn from_value(document: Value) -> Result<Vec<Message>, FormatError> {
    let items = match document {
        Value::Array(items) => items,
        Value::Object(mut object) if is_document(&object) => {
            let mut items = match object.shift_remove("input") {
                Some(Value::Array(items)) => items,
                Some(Value::String(text)) => {
                    vec![json!({"type": "message", "role": "user", "content": text})]
                }
                _ => Vec::new(),
            };
            if let Some(Value::Array(output)) = object.shift_remove("output") {
                items.extend(output);
            }
            items
        }
        other => {
            return Err(FormatError::new(
                FORMAT,
                format!(
                    "expected an array of items or an object with `input`/`output` item lists, \
                     found {}",
                    kind_of(&other)
                ),
            ));
        }
    };
    let mut reader = Items::new(FORMAT);
    for (index, item) in items.into_iter().enumerate() {
        reader.push(item, None).map_err(|e| e.at_message(index))?;
    }
    Ok(reader.finish("responses"))
}

/// Turns a sequence of items into messages, an item at a time.
pub(crate) struct Items {
    format: Format,
    out: Vec<Message>,
    /// The assistant message of the current turn, which function calls join.
    open: Option<usize>,
    /// Reasoning and other kept items waiting for their assistant turn.
    pending: Vec<Value>,
    pending_time: Option<DateTime<Utc>>,
    tool_names: HashMap<String, String>,
    /// The model that answers, stamped on assistant messages (Codex names it
    /// per turn).
    pub(crate) model: Option<String>,
}

impl Items {
    pub(crate) fn new(format: Format) -> Self {
        Items {
            format,
            out: Vec::new(),
            open: None,
            pending: Vec::new(),
            pending_time: None,
            tool_names: HashMap::new(),
            model: None,
        }
    }

    fn error(&self, detail: impl Into<String>) -> FormatError {
        FormatError::new(self.format, detail)
    }

    /// Reads one item, made at `timestamp` when the source says.
    pub(crate) fn push(
        &mut self,
        item: Value,
        timestamp: Option<DateTime<Utc>>,
    ) -> Result<(), FormatError> {
        let Value::Object(item) = item else {
            return Err(self.error(format!("expected an item object, found {}", kind_of(&item))));
        };
        let kind = match item.get("type") {
            Some(Value::String(kind)) => kind.clone(),
            None if item.contains_key("role") => "message".to_owned(),
            _ => {
                return Err(self
                    .error("an item needs a string `type` (or a `role`, for a message)")
                    .at_field("type"));
            }
        };
        match kind.as_str() {
            "message" => self.message(item, timestamp),
            "function_call" | "custom_tool_call" | "local_shell_call" => {
                self.call(&kind, item, timestamp)
            }
            "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
                self.output(&kind, item, timestamp)
            }
            "compaction" | "compaction_summary" => {
                self.close_turn();
                let mut m = Message::user("");
                m.summary = true;
                m.timestamp = timestamp;
                m.metadata
                    .insert(EXTRA_KEY.into(), json!({ "item": Value::Object(item) }));
                self.out.push(m);
                Ok(())
            }
            "reasoning" => {
                if !matches!(
                    item.get("encrypted_content"),
                    None | Some(Value::String(_) | Value::Null)
                ) {
                    return Err(self
                        .error("`encrypted_content` must be a string")
                        .at_field("encrypted_content"));
                }
                self.keep(Value::Object(item), timestamp);
                Ok(())
            }
            _ => {
                self.keep(Value::Object(item), timestamp);
                Ok(())
            }
        }
    }

    /// An item kept verbatim for the next assistant turn.
    fn keep(&mut self, item: Value, timestamp: Option<DateTime<Utc>>) {
        if self.pending.is_empty() {
            self.pending_time = timestamp;
        }
        self.pending.push(item);
    }

    /// Ends the current assistant turn; kept items no turn took become an
    /// assistant message of their own.
    fn close_turn(&mut self) {
        self.open = None;
        if !self.pending.is_empty() {
            let mut m = Message::assistant("");
            m.timestamp = self.pending_time;
            self.start_assistant(m);
            self.open = None;
        }
    }

    /// Adds an assistant message, giving it the kept items and the model.
    fn start_assistant(&mut self, mut m: Message) {
        m.model = self.model.clone();
        if !self.pending.is_empty() {
            let items = std::mem::take(&mut self.pending);
            let text = reasoning_text(&items);
            if items.iter().any(|i| i["type"] == "reasoning") {
                m.reasoning = Some(Reasoning {
                    text,
                    ..Reasoning::default()
                });
            }
            extra(&mut m).insert("items".into(), Value::Array(items));
        }
        self.open = Some(self.out.len());
        self.out.push(m);
    }

    fn message(
        &mut self,
        mut item: Map<String, Value>,
        timestamp: Option<DateTime<Utc>>,
    ) -> Result<(), FormatError> {
        item.shift_remove("type");
        let mut kept = Map::new();
        let role = match item.shift_remove("role") {
            Some(Value::String(role)) => match role.as_str() {
                "system" => Role::System,
                "developer" => {
                    kept.insert("role".into(), Value::String(role));
                    Role::System
                }
                "user" => Role::User,
                "assistant" => Role::Assistant,
                other => {
                    return Err(self
                        .error(format!(
                            "unknown role `{other}`; expected system, developer, user or assistant"
                        ))
                        .at_field("role"));
                }
            },
            _ => {
                return Err(self
                    .error("a message needs a string `role`")
                    .at_field("role"));
            }
        };
        let mut m = Message::new(role, "");
        m.timestamp = timestamp;
        match item.shift_remove("content") {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => m.content = text,
            Some(Value::Array(parts)) => {
                let mut faithful = true;
                for (i, part) in parts.iter().enumerate() {
                    let (part, plain) = self.part(part).map_err(|e| e.at_block(i))?;
                    faithful &= plain;
                    m.parts.push(part);
                }
                // One plain text part is the message's text.
                if let [Part::Text { .. }] = m.parts.as_slice()
                    && faithful
                    && let Some(Part::Text { text }) = m.parts.pop()
                {
                    m.content = text;
                    kept.insert("parts".into(), Value::Bool(true));
                } else if !faithful {
                    kept.insert("content".into(), Value::Array(parts));
                }
            }
            Some(other) => {
                return Err(self
                    .error(format!(
                        "`content` must be a string or an array of parts, found {}",
                        kind_of(&other)
                    ))
                    .at_field("content"));
            }
        }
        kept.extend(item);
        if !kept.is_empty() {
            extra(&mut m).insert("message".into(), Value::Object(kept));
        }
        if role == Role::Assistant {
            self.start_assistant(m);
        } else {
            self.close_turn();
            self.out.push(m);
        }
        Ok(())
    }

    /// A content part, and whether writing it back gives the same JSON.
    fn part(&self, part: &Value) -> Result<(Part, bool), FormatError> {
        read_part(self.format, part)
    }
}

/// A content part, and whether writing it back gives the same JSON.
fn read_part(format: Format, part: &Value) -> Result<(Part, bool), FormatError> {
    Items::new(format).part_of(part)
}

impl Items {
    fn part_of(&self, part: &Value) -> Result<(Part, bool), FormatError> {
        let kind = part.get("type").and_then(Value::as_str).unwrap_or_default();
        let keys = part.as_object().map_or(0, Map::len);
        let string = |key: &str| part.get(key).and_then(Value::as_str).map(str::to_owned);
        match kind {
            "input_text" | "output_text" | "text" => {
                let text = string("text").ok_or_else(|| {
                    self.error("a text part needs a string `text`")
                        .at_field("text")
                })?;
                Ok((Part::Text { text }, keys == 2 && kind != "text"))
            }
            "refusal" => {
                let text = string("refusal").ok_or_else(|| {
                    self.error("a refusal part needs a string `refusal`")
                        .at_field("refusal")
                })?;
                Ok((Part::Text { text }, false))
            }
            "input_image" => {
                let url = string("image_url")
                    .or_else(|| string("file_id"))
                    .ok_or_else(|| {
                        self.error("an image part needs `image_url` or `file_id`")
                            .at_field("image_url")
                    })?;
                let plain = keys == 2 && part.get("image_url").is_some();
                Ok((
                    Part::Image {
                        mime_type: data_url_mime(&url),
                        source: MediaRef::Url(url),
                    },
                    plain,
                ))
            }
            "input_file" => {
                let path = string("file_data")
                    .or_else(|| string("file_url"))
                    .or_else(|| string("file_id"))
                    .ok_or_else(|| {
                        self.error("a file part needs `file_data`, `file_url` or `file_id`")
                            .at_field("file_data")
                    })?;
                Ok((
                    Part::File {
                        name: string("filename").unwrap_or_default(),
                        mime_type: data_url_mime(&path),
                        path,
                    },
                    false,
                ))
            }
            "" => Err(self
                .error("a content part needs a string `type`")
                .at_field("type")),
            other => Err(self
                .error(format!(
                    "unsupported content part type `{other}`; expected input_text, output_text, \
                     refusal, input_image or input_file"
                ))
                .at_field("type")),
        }
    }

    fn call(
        &mut self,
        kind: &str,
        mut item: Map<String, Value>,
        timestamp: Option<DateTime<Utc>>,
    ) -> Result<(), FormatError> {
        item.shift_remove("type");
        let string = |item: &mut Map<String, Value>, key: &str| match item.shift_remove(key) {
            Some(Value::String(s)) => Ok(Some(s)),
            None | Some(Value::Null) => Ok(None),
            Some(other) => Err(FormatError::new(
                self.format,
                format!("`{key}` must be a string, found {}", kind_of(&other)),
            )
            .at_field(key.to_owned())),
        };
        // Chat Completions-era shell calls carry an `id` and no `call_id`.
        let call_id = match string(&mut item, "call_id")? {
            Some(id) => id,
            None if kind == "local_shell_call" => match item.get("id").and_then(Value::as_str) {
                Some(id) => id.to_owned(),
                None => {
                    return Err(self
                        .error("a shell call needs a string `call_id` or `id`")
                        .at_field("call_id"));
                }
            },
            None => {
                return Err(self
                    .error("a call needs a string `call_id`")
                    .at_field("call_id"));
            }
        };
        let (name, arguments) = match kind {
            "function_call" => (
                string(&mut item, "name")?,
                string(&mut item, "arguments")?.unwrap_or_default(),
            ),
            "custom_tool_call" => (
                string(&mut item, "name")?,
                string(&mut item, "input")?.unwrap_or_default(),
            ),
            _ => (
                Some("local_shell".to_owned()),
                item.shift_remove("action")
                    .map(|a| a.to_string())
                    .unwrap_or_default(),
            ),
        };
        let name =
            name.ok_or_else(|| self.error("a call needs a string `name`").at_field("name"))?;
        let mut kept = item;
        if kind != "function_call" {
            kept.insert("type".into(), Value::String(kind.to_owned()));
        }
        self.tool_names.insert(call_id.clone(), name.clone());
        let index = match self.open {
            Some(index) => index,
            None => {
                let mut m = Message::assistant("");
                m.timestamp = timestamp;
                self.start_assistant(m);
                self.out.len() - 1
            }
        };
        let m = &mut self.out[index];
        if !kept.is_empty() {
            let calls = extra(m)
                .entry("calls")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(calls) = calls {
                calls.insert(call_id.clone(), Value::Object(kept));
            }
        }
        m.tool_calls.push(ToolCall {
            id: call_id,
            name,
            arguments,
        });
        Ok(())
    }

    fn output(
        &mut self,
        kind: &str,
        mut item: Map<String, Value>,
        timestamp: Option<DateTime<Utc>>,
    ) -> Result<(), FormatError> {
        self.close_turn();
        item.shift_remove("type");
        let call_id = match item.shift_remove("call_id") {
            Some(Value::String(id)) => id,
            _ => {
                return Err(self
                    .error("a call's output needs a string `call_id`")
                    .at_field("call_id"));
            }
        };
        let mut m = Message::tool_result(call_id.clone(), "", "");
        m.tool_name = self.tool_names.get(&call_id).cloned();
        m.timestamp = timestamp;
        let mut kept = item;
        match kept.shift_remove("output") {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => m.content = text,
            Some(Value::Array(parts)) => {
                for (i, part) in parts.iter().enumerate() {
                    let (part, _) = self.part(part).map_err(|e| e.at_block(i))?;
                    m.parts.push(part);
                }
                kept.insert("output".into(), Value::Array(parts));
            }
            // Codex's older `{content, success}` payload.
            Some(Value::Object(payload)) => {
                match payload.get("content") {
                    Some(Value::String(text)) => m.content = text.clone(),
                    _ => {
                        return Err(self
                            .error("an output object needs a string `content`")
                            .at_field("output.content"));
                    }
                }
                m.is_error = payload.get("success") == Some(&Value::Bool(false));
                kept.insert("output".into(), Value::Object(payload));
            }
            Some(other) => {
                return Err(self
                    .error(format!(
                        "`output` must be a string or an array of parts, found {}",
                        kind_of(&other)
                    ))
                    .at_field("output"));
            }
        }
        if kind != "function_call_output" {
            kept.insert("type".into(), Value::String(kind.to_owned()));
        }
        if !kept.is_empty() {
            extra(&mut m).insert("output".into(), Value::Object(kept));
        }
        self.out.push(m);
        Ok(())
    }

    /// Adds a message made outside the item stream (a Codex compaction).
    pub(crate) fn push_message(&mut self, m: Message) {
        self.close_turn();
        self.out.push(m);
    }

    /// The messages, with ids derived from `prefix`, position and text.
    pub(crate) fn finish(mut self, prefix: &str) -> Vec<Message> {
        self.close_turn();
        for (index, m) in self.out.iter_mut().enumerate() {
            m.id = document_id(prefix, index, &m.text());
        }
        self.out
    }
}

/// The metadata object under [`EXTRA_KEY`] of `m`, made when missing.
fn extra(m: &mut Message) -> &mut Map<String, Value> {
    let entry = m
        .metadata
        .entry(EXTRA_KEY)
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    match entry {
        Value::Object(map) => map,
        _ => unreachable!("made an object above"),
    }
}

/// The readable text of the reasoning items among `items`: their summary
/// and content texts, joined by blank lines.
fn reasoning_text(items: &[Value]) -> String {
    let mut pieces = Vec::new();
    for item in items.iter().filter(|i| i["type"] == "reasoning") {
        for key in ["summary", "content"] {
            if let Some(Value::Array(parts)) = item.get(key) {
                pieces.extend(parts.iter().filter_map(|p| p.get("text")?.as_str()));
            }
        }
    }
    pieces.join("\n\n")
}

/// Writes messages as Responses input items.
pub fn to_items(messages: &[Message]) -> Result<Vec<Value>, FormatError> {
    let mut out = Vec::with_capacity(messages.len());
    for (index, m) in messages.iter().enumerate() {
        write_message(m, &mut out).map_err(|e| e.at_message(index))?;
    }
    Ok(out)
}

fn write_message(m: &Message, out: &mut Vec<Value>) -> Result<(), FormatError> {
    let kept = match m.metadata.get(EXTRA_KEY) {
        Some(Value::Object(kept)) => Some(kept),
        _ => None,
    };
    let get = |key: &str| kept.and_then(|k| k.get(key));
    if m.summary
        && let Some(item) = get("item").filter(|i| {
            matches!(
                i.get("type").and_then(Value::as_str),
                Some("compaction" | "compaction_summary")
            )
        })
    {
        out.push(item.clone());
        return Ok(());
    }
    if m.role != Role::Assistant && (m.has_tool_calls() || m.reasoning.is_some()) {
        return Err(FormatError::new(
            FORMAT,
            format!(
                "a {} message carries tool calls or reasoning, which only assistant turns can hold",
                m.role
            ),
        ));
    }
    match m.role {
        Role::Tool => {
            let call_id = m.tool_call_id.as_deref().ok_or_else(|| {
                FormatError::new(
                    FORMAT,
                    "a tool result without a `tool_call_id` cannot be sent",
                )
                .at_field("tool_call_id")
            })?;
            let mut item = Map::new();
            item.insert("type".into(), json!("function_call_output"));
            item.insert("call_id".into(), json!(call_id));
            let output = if m.parts.is_empty() {
                Value::String(m.content.clone())
            } else {
                Value::Array(parts(m, "input_text")?)
            };
            item.insert("output".into(), output);
            if let Some(Value::Object(kept)) = get("output") {
                for (key, value) in kept {
                    match key.as_str() {
                        "type"
                            if matches!(
                                value.as_str(),
                                Some("custom_tool_call_output" | "local_shell_call_output")
                            ) =>
                        {
                            item.insert(key.clone(), value.clone());
                        }
                        // A kept output stands only while the text is its own.
                        "output" if same_output(value, m) => {
                            item.insert(key.clone(), value.clone());
                        }
                        "type" | "output" | "call_id" => {}
                        _ => {
                            item.insert(key.clone(), value.clone());
                        }
                    }
                }
            }
            out.push(Value::Object(item));
        }
        Role::Assistant => {
            let items = match get("items") {
                Some(Value::Array(items)) => items.as_slice(),
                _ => &[],
            };
            let reasoning_kept = m
                .reasoning
                .as_ref()
                .is_some_and(|r| !r.redacted && r.text == reasoning_text(items));
            for item in items.iter().filter(|i| keepable(i)) {
                if item["type"] != "reasoning" || reasoning_kept {
                    out.push(item.clone());
                }
            }
            if let Some(r) = m.reasoning.as_ref().filter(|_| !reasoning_kept) {
                if r.redacted {
                    out.push(
                        json!({"type": "reasoning", "summary": [], "encrypted_content": r.text}),
                    );
                } else {
                    out.push(json!({"type": "reasoning",
                        "summary": [{"type": "summary_text", "text": r.text}]}));
                }
            }
            if !m.content.is_empty() || !m.parts.is_empty() || get("message").is_some() {
                out.push(message_item(m, "output_text", get("message"))?);
            }
            let calls = match get("calls") {
                Some(Value::Object(calls)) => Some(calls),
                _ => None,
            };
            for call in &m.tool_calls {
                let kept = calls
                    .and_then(|c| c.get(&call.id))
                    .and_then(Value::as_object);
                let kind = kept
                    .and_then(|k| k.get("type"))
                    .and_then(Value::as_str)
                    .filter(|k| matches!(*k, "custom_tool_call" | "local_shell_call"))
                    .unwrap_or("function_call");
                let mut item = Map::new();
                item.insert("type".into(), json!(kind));
                match kind {
                    "custom_tool_call" => {
                        item.insert("name".into(), json!(call.name));
                        item.insert("input".into(), json!(call.arguments));
                    }
                    "local_shell_call" => {
                        let action: Value = serde_json::from_str(&call.arguments).map_err(|e| {
                            FormatError::new(
                                FORMAT,
                                format!("the action of shell call `{}` is not JSON ({e})", call.id),
                            )
                        })?;
                        item.insert("action".into(), action);
                    }
                    _ => {
                        item.insert("name".into(), json!(call.name));
                        item.insert("arguments".into(), json!(call.arguments));
                    }
                }
                item.insert("call_id".into(), json!(call.id));
                if let Some(kept) = kept {
                    for (key, value) in kept {
                        if !item.contains_key(key) {
                            item.insert(key.clone(), value.clone());
                        }
                    }
                }
                out.push(Value::Object(item));
            }
        }
        Role::System | Role::User => {
            out.push(message_item(m, "input_text", get("message"))?);
        }
    }
    Ok(())
}

/// Whether a kept structured `output` still says what `m` says (and reads
/// back).
fn same_output(kept: &Value, m: &Message) -> bool {
    match kept {
        Value::Object(payload) => {
            payload.get("content").and_then(Value::as_str) == Some(&m.content)
        }
        Value::Array(parts) => {
            !m.parts.is_empty()
                && m.content.is_empty()
                && parts.len() == m.parts.len()
                && parts.iter().all(|p| read_part(FORMAT, p).is_ok())
                && same_text(kept, m)
        }
        _ => false,
    }
}

/// Whether an item kept in metadata (which a processor or a native log may
/// have written anything into) is one the reader keeps again as it is: the
/// writer writes no other.
fn keepable(item: &Value) -> bool {
    let Some(kind) = item.get("type").and_then(Value::as_str) else {
        return false;
    };
    match kind {
        "message"
        | "function_call"
        | "function_call_output"
        | "custom_tool_call"
        | "custom_tool_call_output"
        | "local_shell_call"
        | "local_shell_call_output"
        | "compaction"
        | "compaction_summary" => false,
        "reasoning" => matches!(
            item.get("encrypted_content"),
            None | Some(Value::String(_) | Value::Null)
        ),
        _ => item.is_object(),
    }
}

fn message_item(m: &Message, text_type: &str, kept: Option<&Value>) -> Result<Value, FormatError> {
    let kept = kept.and_then(Value::as_object);
    let mut item = Map::new();
    item.insert("type".into(), json!("message"));
    let role = match kept.and_then(|k| k.get("role")) {
        Some(role) if m.role == Role::System && role == "developer" => role.clone(),
        _ => json!(m.role.as_str()),
    };
    item.insert("role".into(), role);
    let verbatim = kept.and_then(|k| k.get("content")).filter(|content| {
        same_text(content, m)
            && content
                .as_array()
                .is_some_and(|parts| parts.iter().all(|p| read_part(FORMAT, p).is_ok()))
    });
    let content = match verbatim {
        Some(content) => content.clone(),
        None if m.parts.is_empty() && kept.and_then(|k| k.get("parts")).is_none() => {
            Value::String(m.content.clone())
        }
        None => Value::Array(parts(m, text_type)?),
    };
    item.insert("content".into(), content);
    if let Some(kept) = kept {
        for (key, value) in kept {
            if !item.contains_key(key) && key != "parts" {
                item.insert(key.clone(), value.clone());
            }
        }
    }
    Ok(Value::Object(item))
}

/// Whether kept content parts hold the text `m` holds now.
fn same_text(content: &Value, m: &Message) -> bool {
    let Value::Array(parts) = content else {
        return false;
    };
    let texts: Vec<&str> = parts
        .iter()
        .filter_map(|p| p.get("text").or_else(|| p.get("refusal"))?.as_str())
        .collect();
    let mine: Vec<&str> = std::iter::once(m.content.as_str())
        .filter(|c| !c.is_empty())
        .chain(m.parts.iter().filter_map(|p| match p {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        }))
        .collect();
    texts == mine && parts.len() == m.parts.len() + usize::from(!m.content.is_empty())
}

fn parts(m: &Message, text_type: &str) -> Result<Vec<Value>, FormatError> {
    let mut out = Vec::with_capacity(m.parts.len() + 1);
    if !m.content.is_empty() {
        out.push(json!({"type": text_type, "text": m.content}));
    }
    for (i, part) in m.parts.iter().enumerate() {
        out.push(match part {
            Part::Text { text } => json!({"type": text_type, "text": text}),
            Part::Image {
                source: MediaRef::Url(url),
                ..
            } => json!({"type": "input_image", "image_url": url}),
            Part::Image {
                source: MediaRef::Path(path),
                ..
            } => {
                return Err(FormatError::new(
                    FORMAT,
                    format!(
                        "the image `{path}` is a media path; load it into a data: URL (or strip \
                         media) before writing Responses items"
                    ),
                )
                .at_block(i));
            }
            Part::File { name, path, .. } => {
                let key = if path.starts_with("data:") {
                    "file_data"
                } else if path.starts_with("http://") || path.starts_with("https://") {
                    "file_url"
                } else {
                    "file_id"
                };
                let mut file = json!({"type": "input_file", key: path});
                if !name.is_empty() {
                    file["filename"] = json!(name);
                }
                file
            }
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(document: Value) -> Vec<Message> {
        from_value(document).unwrap()
    }

    #[test]
    fn a_tool_turn_with_encrypted_reasoning_round_trips_exactly() {
        let items = json!([
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Use the tool."}],
             "encrypted_content": "gAAAA-opaque"},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather",
             "arguments": "{\"city\":\"Paris\"}", "status": "completed"},
            {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
            {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "paris"}},
            {"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "18C.", "annotations": []}]},
            {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA-summary"}
        ]);
        let messages = read(items.clone());
        let roles: Vec<Role> = messages.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::System,
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::Assistant,
                Role::User
            ]
        );
        assert_eq!(
            messages[2].reasoning.as_ref().unwrap().text,
            "Use the tool."
        );
        assert_eq!(messages[2].tool_calls[0].arguments, "{\"city\":\"Paris\"}");
        assert_eq!(messages[3].tool_name.as_deref(), Some("weather"));
        assert_eq!(messages[4].text(), "18C.");
        assert!(messages[5].summary);
        assert_eq!(
            to_items(&messages).unwrap(),
            items.as_array().unwrap().clone()
        );
    }

    #[test]
    fn edited_or_stripped_reasoning_does_not_send_stale_encrypted_content() {
        let items = json!([
            {"type": "message", "role": "user", "content": "hi"},
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}], "encrypted_content": "E"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]}
        ]);
        let mut messages = read(items);
        messages[1].reasoning.as_mut().unwrap().text = "other".into();
        let written = to_items(&messages).unwrap();
        assert_eq!(
            written[1],
            json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": "other"}]})
        );
        messages[1].reasoning = None;
        let written = to_items(&messages).unwrap();
        assert_eq!(written.len(), 2);
        assert_eq!(written[1]["type"], "message");
    }

    #[test]
    fn request_and_response_objects_read_in_order() {
        let messages = read(json!({
            "model": "gpt-5",
            "input": "List files",
            "output": [
                {"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": "*** Begin Patch"},
                {"type": "local_shell_call", "call_id": "s", "status": "completed",
                 "action": {"type": "exec", "command": ["ls"]}}
            ]
        }));
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0].content, "List files");
        let calls = &messages[1].tool_calls;
        assert_eq!(
            (calls[0].name.as_str(), calls[0].arguments.as_str()),
            ("apply_patch", "*** Begin Patch")
        );
        assert_eq!(calls[1].name, "local_shell");
        let written = to_items(&messages).unwrap();
        assert_eq!(written[1]["type"], "custom_tool_call");
        assert_eq!(written[2]["action"]["command"], json!(["ls"]));
    }

    #[test]
    fn bad_items_name_item_and_field() {
        let cases = [
            (
                json!([{"type": "function_call", "name": "x"}]),
                "message 0, field `call_id`",
            ),
            (
                json!([{"type": "message", "role": "robot", "content": "x"}]),
                "unknown role `robot`",
            ),
            (
                json!([{"type": "message", "role": "user", "content": [{"type": "input_video"}]}]),
                "message 0, block 0, field `type`",
            ),
            (
                json!([{"type": "function_call_output", "call_id": "c", "output": 3}]),
                "`output` must be",
            ),
            (json!([7]), "expected an item object"),
            (json!("x"), "expected an array of items"),
        ];
        for (document, expected) in cases {
            let err = from_value(document).unwrap_err();
            assert!(err.to_string().starts_with("responses "), "{err}");
            assert!(err.to_string().contains(expected), "{err}");
        }
    }
}
