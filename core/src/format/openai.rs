//! OpenAI Chat Completions messages, in and out.
//!
//! Read: a JSON array of messages, or an object with a `messages` array (a
//! request body). Roles `system`, `developer`, `user`, `assistant` and `tool`;
//! content as a string, `null`, or an array of `text`, `image_url`,
//! `input_audio` and `file` parts; `tool_calls`, `tool_call_id`, the tool's
//! `name`, and `reasoning_content`. A tool message without `name` (the current
//! API sends none) takes its tool's name from the call it answers. The legacy
//! function calling of the API's first versions reads too: an assistant
//! message's `function_call` is a tool call (its id `call_legacy_N`, N the
//! message's position), and a `function` message answers the earliest
//! unanswered call of its `name`; both are written back as `tool_calls` and
//! `tool` messages. An `input_audio` part is kept as a file part holding a
//! `data:audio/<format>` URL, and written back as `input_audio`. Fields this
//! model has no place for (a participant `name`, `refusal`, `audio`, the
//! `developer` role, ...) are kept in the message's metadata under `"openai"`
//! and written back, so a round trip gives the same JSON. Messages carry no
//! ids in this format; ids are derived from position and text.
//!
//! Reading goes straight from the bytes to messages ([`parse`]); a document
//! that route does not take (any error) is read again through
//! `serde_json::Value` ([`from_value`]), whose errors say where and what.
//! See the `openai` benchmark.
//!
//! Written: the same shapes. An assistant message with tool calls and no text
//! gets `"content": null`, as the API does.

use std::fmt;

use serde::Serialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{self, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value, json};

use super::json_out::{JsonOut, OverCap};
use super::{Format, FormatError, kind_of, parse_document};
use crate::message::{MediaRef, Message, Part, Reasoning, Role, ToolCall, document_ids};

/// The metadata key under which fields without a place in [`Message`] are kept.
pub const EXTRA_KEY: &str = "openai";

const FORMAT: Format = Format::OpenAi;

/// Reads messages from JSON text.
pub fn parse(text: &str) -> Result<Vec<Message>, FormatError> {
    if let Some(messages) = parse_typed(text) {
        return Ok(messages);
    }
    from_value(parse_document(FORMAT, text)?)
}

/// Reads messages straight from the bytes, or `None` when the document is
/// not one this route takes whole (not valid, or not OpenAI messages; also a
/// request with a `system` field, or messages with an item `type`, which
/// detection gives to other readers): the caller then reads it through
/// [`from_value`], which gives the same messages for every document this
/// route takes.
pub(crate) fn parse_typed(text: &str) -> Option<Vec<Message>> {
    let mut de = serde_json::Deserializer::from_str(text);
    let Document(messages) = de::Deserialize::deserialize(&mut de).ok()?;
    de.end().ok()?;
    finish(messages).ok()
}

/// Reads messages from a parsed JSON document.
pub fn from_value(document: Value) -> Result<Vec<Message>, FormatError> {
    let items = match document {
        Value::Array(items) => items,
        Value::Object(mut object) => match object.shift_remove("messages") {
            Some(Value::Array(items)) => items,
            _ => {
                return Err(FormatError::new(
                    FORMAT,
                    "expected an array of messages or an object with a `messages` array",
                ));
            }
        },
        other => {
            return Err(FormatError::new(
                FORMAT,
                format!("expected an array of messages, found {}", kind_of(&other)),
            ));
        }
    };
    let messages = items
        .into_iter()
        .enumerate()
        .map(|(index, item)| message_from_value(item, index).map_err(|e| e.at_message(index)))
        .collect::<Result<Vec<Message>, FormatError>>()?;
    finish(messages)
}

/// What both routes do once every message is read: legacy `function`
/// messages paired with their calls, tool names filled from the calls, ids
/// derived.
fn finish(mut messages: Vec<Message>) -> Result<Vec<Message>, FormatError> {
    // The ids hash the text alone, which nothing below changes.
    let ids = document_ids("openai", &messages);
    // What the tool messages take from their calls, found first with the
    // calls borrowed: (message, the call id of a legacy `function`
    // message, the tool's name where the message has none).
    let mut fills: Vec<(usize, Option<String>, Option<String>)> = Vec::new();
    {
        // Current Chat Completions tool messages carry no `name`: take it from the call.
        let mut names: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
        // Calls not answered yet, in order (for legacy `function` messages).
        let mut open: Vec<(&str, &str)> = Vec::new();
        for (index, m) in messages.iter().enumerate() {
            for call in &m.tool_calls {
                names.insert(&call.id, &call.name);
                open.push((&call.id, &call.name));
            }
            if m.role != Role::Tool {
                continue;
            }
            let legacy = match &m.tool_call_id {
                Some(id) => {
                    open.retain(|(open_id, _)| open_id != id);
                    None
                }
                // A legacy `function` message: the earliest open call of its name.
                None => {
                    let name = m.tool_name.as_deref().unwrap_or_default();
                    let Some(at) = open.iter().position(|(_, n)| *n == name) else {
                        return Err(FormatError::new(
                            FORMAT,
                            format!(
                                "the `function` message of `{name}` answers no earlier \
                                 `function_call` of that name"
                            ),
                        )
                        .at_message(index)
                        .at_field("name"));
                    };
                    Some(open.remove(at).0.to_owned())
                }
            };
            let name = if m.tool_name.is_none() {
                legacy
                    .as_deref()
                    .or(m.tool_call_id.as_deref())
                    .and_then(|id| names.get(id))
                    .map(|name| (*name).to_owned())
            } else {
                None
            };
            if legacy.is_some() || name.is_some() {
                fills.push((index, legacy, name));
            }
        }
    }
    for (index, legacy, name) in fills {
        let m = &mut messages[index];
        if legacy.is_some() {
            m.tool_call_id = legacy;
        }
        if name.is_some() {
            m.tool_name = name;
        }
    }
    for (m, id) in messages.iter_mut().zip(ids) {
        m.id = id;
    }
    Ok(messages)
}

/// `tool_calls` read by the typed route: an array of objects, each with a
/// string `id` and a `function` object with a string `name` and
/// `arguments` (text, or any value written as compact JSON, or absent or
/// `null` for none); other fields are skipped. Anything else (a repeated
/// field too) fails, and the generic route reads the document.
struct TypedToolCalls(Vec<ToolCall>);

impl<'de> de::Deserialize<'de> for TypedToolCalls {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CallsVisitor;
        impl<'de> Visitor<'de> for CallsVisitor {
            type Value = TypedToolCalls;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of tool calls")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TypedToolCalls, A::Error> {
                let mut calls = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                while let Some(call) = seq.next_element::<TypedToolCall>()? {
                    calls.push(call.0);
                }
                Ok(TypedToolCalls(calls))
            }
        }
        deserializer.deserialize_seq(CallsVisitor)
    }
}

/// One tool call of [`TypedToolCalls`].
struct TypedToolCall(ToolCall);

impl<'de> de::Deserialize<'de> for TypedToolCall {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CallVisitor;
        impl<'de> Visitor<'de> for CallVisitor {
            type Value = TypedToolCall;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a tool call")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TypedToolCall, A::Error> {
                let mut id: Option<String> = None;
                let mut function: Option<(String, String)> = None;
                while let Some(key) = map.next_key::<BorrowedOrOwned<'de>>()? {
                    match key.0.as_ref() {
                        "id" if id.is_none() => id = Some(map.next_value()?),
                        "function" if function.is_none() => {
                            function = Some(map.next_value::<TypedFunction>()?.0);
                        }
                        "id" | "function" => return Err(de::Error::custom("a repeated field")),
                        _ => {
                            map.next_value::<Value>()?;
                        }
                    }
                }
                let id = id.ok_or_else(|| de::Error::custom("no `id`"))?;
                let (name, arguments) =
                    function.ok_or_else(|| de::Error::custom("no `function`"))?;
                Ok(TypedToolCall(ToolCall {
                    id,
                    name,
                    arguments,
                }))
            }
        }
        deserializer.deserialize_map(CallVisitor)
    }
}

/// A tool call's `function` (`name`, `arguments`) for [`TypedToolCall`].
struct TypedFunction((String, String));

impl<'de> de::Deserialize<'de> for TypedFunction {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FunctionVisitor;
        impl<'de> Visitor<'de> for FunctionVisitor {
            type Value = TypedFunction;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a function")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TypedFunction, A::Error> {
                let mut name: Option<String> = None;
                let mut arguments: Option<Value> = None;
                while let Some(key) = map.next_key::<BorrowedOrOwned<'de>>()? {
                    match key.0.as_ref() {
                        "name" if name.is_none() => name = Some(map.next_value()?),
                        "arguments" if arguments.is_none() => arguments = Some(map.next_value()?),
                        "name" | "arguments" => {
                            return Err(de::Error::custom("a repeated field"));
                        }
                        _ => {
                            map.next_value::<Value>()?;
                        }
                    }
                }
                let name = name.ok_or_else(|| de::Error::custom("no `name`"))?;
                let arguments = match arguments {
                    Some(Value::String(text)) => text,
                    other => arguments_text(other.as_ref()),
                };
                Ok(TypedFunction((name, arguments)))
            }
        }
        deserializer.deserialize_map(FunctionVisitor)
    }
}

/// A string borrowed from the document when it has no escapes, else owned.
/// (serde's `Cow<str>` is always owned.)
struct BorrowedOrOwned<'de>(std::borrow::Cow<'de, str>);

impl<'de> de::Deserialize<'de> for BorrowedOrOwned<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl<'de> Visitor<'de> for StrVisitor {
            type Value = BorrowedOrOwned<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(BorrowedOrOwned(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(BorrowedOrOwned(std::borrow::Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(BorrowedOrOwned(std::borrow::Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(StrVisitor)
    }
}

/// The role of a message, and whether it was spelt `developer` (kept as an
/// extra) or `function` (legacy).
fn role_of(role: &str) -> Result<Role, FormatError> {
    match role {
        "system" | "developer" => Ok(Role::System),
        "user" => Ok(Role::User),
        "assistant" => Ok(Role::Assistant),
        "tool" | "function" => Ok(Role::Tool),
        other => Err(FormatError::new(
            FORMAT,
            format!(
                "unknown role `{other}`; expected system, developer, user, assistant, tool or \
                 function"
            ),
        )
        .at_field("role")),
    }
}

fn message_from_value(item: Value, index: usize) -> Result<Message, FormatError> {
    let Value::Object(mut object) = item else {
        return Err(FormatError::new(
            FORMAT,
            format!("expected a message object, found {}", kind_of(&item)),
        ));
    };
    let mut extra = Map::new();
    let role_name = match object.shift_remove("role") {
        Some(Value::String(role)) => role,
        Some(other) => {
            return Err(FormatError::new(
                FORMAT,
                format!("`role` must be a string, found {}", kind_of(&other)),
            )
            .at_field("role"));
        }
        None => return Err(FormatError::new(FORMAT, "missing `role`").at_field("role")),
    };
    let role = role_of(&role_name)?;
    if role_name == "developer" {
        extra.insert("role".into(), Value::String(role_name.clone()));
    }
    let mut m = Message::new(role, "");
    match object.shift_remove("content") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => m.content = text,
        Some(Value::Array(parts)) => {
            for (i, part) in parts.into_iter().enumerate() {
                m.parts
                    .push(part_from_value(part).map_err(|e| e.at_block(i))?);
            }
        }
        Some(other) => {
            return Err(FormatError::new(
                FORMAT,
                format!(
                    "`content` must be a string, null or an array, found {}",
                    kind_of(&other)
                ),
            )
            .at_field("content"));
        }
    }
    if let Some(calls) = object.shift_remove("tool_calls") {
        m.tool_calls = tool_calls_from_value(calls)?;
    }
    if role == Role::Assistant
        && let Some(call) = object.shift_remove("function_call")
    {
        m.tool_calls
            .push(legacy_call(&call, index).map_err(|e| e.at_field("function_call"))?);
    }
    m.tool_call_id = optional_string(&mut object, "tool_call_id")?;
    if role == Role::Tool {
        m.tool_name = optional_string(&mut object, "name")?;
        check_tool_message(&m, &role_name)?;
    }
    if let Some(text) = optional_string(&mut object, "reasoning_content")? {
        m.reasoning = Some(Reasoning {
            text,
            ..Reasoning::default()
        });
    }
    extra.extend(object);
    if !extra.is_empty() {
        m.metadata.insert(EXTRA_KEY.into(), Value::Object(extra));
    }
    Ok(m)
}

/// A tool message names its call; a legacy `function` message its function.
fn check_tool_message(m: &Message, role_name: &str) -> Result<(), FormatError> {
    if role_name == "function" {
        if m.tool_name.is_none() {
            return Err(FormatError::new(
                FORMAT,
                "a `function` message needs the `name` of the function it answers",
            )
            .at_field("name"));
        }
    } else if m.tool_call_id.is_none() {
        return Err(FormatError::new(
            FORMAT,
            "a `tool` message needs a `tool_call_id` naming the call it answers",
        )
        .at_field("tool_call_id"));
    }
    Ok(())
}

/// A legacy `function_call` (`{name, arguments}`) as a tool call of message
/// `index`.
fn legacy_call(call: &Value, index: usize) -> Result<ToolCall, FormatError> {
    let name = call
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| FormatError::new(FORMAT, "a `function_call` needs a string `name`"))?;
    Ok(ToolCall {
        id: format!("call_legacy_{index}"),
        name: name.to_owned(),
        arguments: arguments_text(call.get("arguments")),
    })
}

/// A call's arguments as text: a string as it is, nothing as empty, any
/// other JSON as its text (some servers send an object).
fn arguments_text(arguments: Option<&Value>) -> String {
    match arguments {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// A whole document read by the typed route.
struct Document(Vec<Message>);

impl<'de> de::Deserialize<'de> for Document {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(DocumentVisitor)
    }
}

struct DocumentVisitor;

impl<'de> Visitor<'de> for DocumentVisitor {
    type Value = Document;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of messages or an object with `messages`")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Document, A::Error> {
        MessagesVisitor.visit_seq(seq).map(Document)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Document, A::Error> {
        let mut messages = None;
        while let Some(key) = map.next_key::<BorrowedOrOwned<'de>>()?.map(|key| key.0) {
            match key.as_ref() {
                "messages" => messages = Some(map.next_value_seed(MessagesSeed)?),
                // An Anthropic request: detection's to tell.
                "system" => return Err(de::Error::custom("a `system` field")),
                // Read as a value, not skipped: `IgnoredAny` takes numbers out
                // of range, lone surrogates and any depth, which the generic
                // route refuses.
                _ => {
                    map.next_value::<Value>()?;
                }
            }
        }
        messages
            .map(Document)
            .ok_or_else(|| de::Error::custom("no `messages`"))
    }
}

struct MessagesSeed;

impl<'de> DeserializeSeed<'de> for MessagesSeed {
    type Value = Vec<Message>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(MessagesVisitor)
    }
}

struct MessagesVisitor;

impl<'de> Visitor<'de> for MessagesVisitor {
    type Value = Vec<Message>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of messages")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Message>, A::Error> {
        let mut messages = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(m) = seq.next_element_seed(MessageSeed {
            index: messages.len(),
        })? {
            messages.push(m);
        }
        Ok(messages)
    }
}

/// One message, read by the typed route as [`message_from_value`] reads it.
struct MessageSeed {
    index: usize,
}

impl<'de> DeserializeSeed<'de> for MessageSeed {
    type Value = Message;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Message, D::Error> {
        deserializer.deserialize_map(self)
    }
}

/// Fails the typed route with `e` (its text is never shown: the generic
/// route reads the document again for the error).
fn fail<E: de::Error>(e: FormatError) -> E {
    E::custom(e.detail)
}

impl<'de> Visitor<'de> for MessageSeed {
    type Value = Message;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Message, A::Error> {
        let mut role_name: Option<std::borrow::Cow<'de, str>> = None;
        let mut content: Option<Value> = None;
        let mut text: Option<String> = None;
        let mut tool_calls: Option<Vec<ToolCall>> = None;
        let mut function_call: Option<Value> = None;
        let mut tool_call_id: Option<Option<String>> = None;
        let mut reasoning: Option<Option<String>> = None;
        let mut extra = Map::new();
        // `name`, and where it came among the extras: a tool's name, else a
        // participant's, kept in its place (held apart so that a tool
        // message builds no map of extras).
        let mut name: Option<(usize, Value)> = None;
        while let Some(key) = map.next_key::<BorrowedOrOwned<'de>>()?.map(|key| key.0) {
            // A repeated field: the generic route's (last one wins, where the
            // first one was) is the one to follow.
            let repeated = match key.as_ref() {
                "role" => role_name.is_some(),
                "content" => content.is_some() || text.is_some(),
                "tool_calls" => tool_calls.is_some(),
                "function_call" => function_call.is_some(),
                "tool_call_id" => tool_call_id.is_some(),
                "reasoning_content" => reasoning.is_some(),
                // An item `type`: a Responses item, detection's to tell.
                "type" => true,
                _ => false,
            };
            if repeated {
                return Err(de::Error::custom("a repeated field"));
            }
            match key.as_ref() {
                "role" => role_name = Some(map.next_value::<BorrowedOrOwned<'de>>()?.0),
                "content" => match map.next_value::<Value>()? {
                    Value::String(s) => text = Some(s),
                    other => content = Some(other),
                },
                "tool_calls" => tool_calls = Some(map.next_value::<TypedToolCalls>()?.0),
                "function_call" => function_call = Some(map.next_value()?),
                "tool_call_id" => tool_call_id = Some(map.next_value()?),
                "reasoning_content" => reasoning = Some(map.next_value()?),
                // Repeated, the last value in the first place (as a map keeps it).
                "name" => {
                    let value: Value = map.next_value()?;
                    match &mut name {
                        Some((_, kept)) => *kept = value,
                        None => name = Some((extra.len(), value)),
                    }
                }
                _ => {
                    let value: Value = map.next_value()?;
                    extra.insert(key.into_owned(), value);
                }
            }
        }
        let role_name = role_name.ok_or_else(|| de::Error::custom("missing `role`"))?;
        let role = role_of(&role_name).map_err(fail)?;
        let has_content = content.is_some() || text.is_some();
        let mut m = Message::new(role, text.unwrap_or_default());
        match content {
            None | Some(Value::Null) => {}
            Some(Value::Array(parts)) => {
                for part in parts {
                    m.parts.push(part_from_value(part).map_err(fail)?);
                }
            }
            Some(_) => return Err(de::Error::custom("bad `content`")),
        }
        if let Some(calls) = tool_calls {
            m.tool_calls = calls;
        }
        match function_call {
            Some(call) if role == Role::Assistant => m
                .tool_calls
                .push(legacy_call(&call, self.index).map_err(fail)?),
            // Kept as an extra in its place by the generic route.
            Some(_) => return Err(de::Error::custom("a `function_call` off an assistant")),
            None => {}
        }
        m.tool_call_id = tool_call_id.flatten();
        if role == Role::Tool {
            m.tool_name = match name.map(|(_, value)| value) {
                None | Some(Value::Null) => None,
                Some(Value::String(name)) => Some(name),
                Some(_) => return Err(de::Error::custom("bad `name`")),
            };
            check_tool_message(&m, &role_name).map_err(fail)?;
        } else if let Some((at, value)) = name {
            extra.shift_insert(at, "name".into(), value);
        }
        if let Some(text) = reasoning.flatten() {
            m.reasoning = Some(Reasoning {
                text,
                ..Reasoning::default()
            });
        }
        // A Gemini `Content` (`parts`, no `content`): detection's to refuse.
        if !has_content && extra.contains_key("parts") {
            return Err(de::Error::custom("`parts` without `content`"));
        }
        if role_name == "developer" {
            extra.shift_insert(0, "role".into(), Value::String(role_name.into_owned()));
        }
        if !extra.is_empty() {
            m.metadata.insert(EXTRA_KEY.into(), Value::Object(extra));
        }
        Ok(m)
    }
}

fn optional_string(
    object: &mut Map<String, Value>,
    key: &str,
) -> Result<Option<String>, FormatError> {
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

fn tool_calls_from_value(calls: Value) -> Result<Vec<ToolCall>, FormatError> {
    let Value::Array(calls) = calls else {
        return Err(
            FormatError::new(FORMAT, "`tool_calls` must be an array").at_field("tool_calls")
        );
    };
    calls
        .into_iter()
        .enumerate()
        .map(|(i, call)| {
            let field = |name: &str| format!("tool_calls[{i}].{name}");
            let id = call.get("id").and_then(Value::as_str).ok_or_else(|| {
                FormatError::new(FORMAT, "a tool call needs a string `id`").at_field(field("id"))
            })?;
            let function = call.get("function").ok_or_else(|| {
                FormatError::new(FORMAT, "a tool call needs a `function`")
                    .at_field(field("function"))
            })?;
            let name = function
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    FormatError::new(FORMAT, "a tool call needs a string function name")
                        .at_field(field("function.name"))
                })?;
            // Some servers send the arguments as an object; keep them as text.
            let arguments = arguments_text(function.get("arguments"));
            Ok(ToolCall {
                id: id.to_owned(),
                name: name.to_owned(),
                arguments,
            })
        })
        .collect()
}

fn part_from_value(part: Value) -> Result<Part, FormatError> {
    let kind = part.get("type").and_then(Value::as_str).unwrap_or_default();
    match kind {
        "text" => match part.get("text") {
            Some(Value::String(text)) => Ok(Part::Text { text: text.clone() }),
            _ => {
                Err(FormatError::new(FORMAT, "a text part needs a string `text`").at_field("text"))
            }
        },
        "image_url" => {
            let url = part
                .get("image_url")
                .and_then(|i| i.get("url").or(Some(i)))
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    FormatError::new(FORMAT, "an image part needs `image_url.url`")
                        .at_field("image_url")
                })?;
            Ok(Part::Image {
                mime_type: data_url_mime(url),
                source: MediaRef::Url(url.to_owned()),
            })
        }
        "file" => {
            let file = part.get("file").cloned().unwrap_or_default();
            let get = |key: &str| file.get(key).and_then(Value::as_str).map(str::to_owned);
            let path = get("file_data").or_else(|| get("file_id")).ok_or_else(|| {
                FormatError::new(
                    FORMAT,
                    "a file part needs `file.file_data` or `file.file_id`",
                )
                .at_field("file")
            })?;
            Ok(Part::File {
                name: get("filename").unwrap_or_default(),
                mime_type: data_url_mime(&path),
                path,
            })
        }
        "input_audio" => {
            let audio = part.get("input_audio");
            let get = |key: &str| audio.and_then(|a| a.get(key)).and_then(Value::as_str);
            let (Some(data), Some(format)) = (get("data"), get("format")) else {
                return Err(FormatError::new(
                    FORMAT,
                    "an audio part needs string `input_audio.data` and `input_audio.format`",
                )
                .at_field("input_audio"));
            };
            let mime = format!("audio/{format}");
            Ok(Part::File {
                name: String::new(),
                path: format!("data:{mime};base64,{data}"),
                mime_type: Some(mime),
            })
        }
        other => Err(FormatError::new(
            FORMAT,
            format!(
                "unsupported content part type `{other}`; expected text, image_url, input_audio \
                 or file"
            ),
        )
        .at_field("type")),
    }
}

/// The MIME type of a `data:` URL, if it is one.
pub(crate) fn data_url_mime(url: &str) -> Option<String> {
    let rest = url.strip_prefix("data:")?;
    let end = rest.find([';', ','])?;
    Some(rest[..end].to_owned()).filter(|m| !m.is_empty())
}

/// Writes messages as Chat Completions message objects.
pub fn to_values(messages: &[Message]) -> Result<Vec<Value>, FormatError> {
    messages
        .iter()
        .enumerate()
        .map(|(index, m)| message_to_value(m).map_err(|e| e.at_message(index)))
        .collect()
}

fn message_to_value(m: &Message) -> Result<Value, FormatError> {
    let mut object = Map::new();
    object.insert("role".into(), Value::String(m.role.as_str().into()));
    let content = if m.parts.is_empty() {
        if m.content.is_empty() && m.has_tool_calls() {
            Value::Null
        } else {
            Value::String(m.content.clone())
        }
    } else {
        let mut parts = Vec::with_capacity(m.parts.len() + 1);
        if !m.content.is_empty() {
            parts.push(json!({"type": "text", "text": m.content}));
        }
        for (i, part) in m.parts.iter().enumerate() {
            parts.push(part_to_value(part).map_err(|e| e.at_block(i))?);
        }
        Value::Array(parts)
    };
    object.insert("content".into(), content);
    if m.has_tool_calls() {
        let calls = m
            .tool_calls
            .iter()
            .map(|c| {
                json!({"id": c.id, "type": "function",
                       "function": {"name": c.name, "arguments": c.arguments}})
            })
            .collect();
        object.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some(id) = &m.tool_call_id {
        object.insert("tool_call_id".into(), Value::String(id.clone()));
    }
    if m.role == Role::Tool
        && let Some(name) = &m.tool_name
    {
        object.insert("name".into(), Value::String(name.clone()));
    }
    if let Some(reasoning) = m.reasoning.as_ref().filter(|r| !r.redacted) {
        object.insert(
            "reasoning_content".into(),
            Value::String(reasoning.text.clone()),
        );
    }
    if let Some(Value::Object(extra)) = m.metadata.get(EXTRA_KEY) {
        for (key, value) in extra {
            // Kept fields fill gaps only, and never the fields the message
            // itself sets (absent ones included: extras must not add a tool
            // call the host never validated); the one override is the
            // `developer` spelling of a system message's role.
            if is_developer_role(key, value, m.role)
                || (!written_by_host(key, m.role) && !object.contains_key(key))
            {
                object.insert(key.clone(), value.clone());
            }
        }
    }
    Ok(Value::Object(object))
}

/// Writes messages as indented Chat Completions JSON (with a final newline),
/// the text [`super::write`] gives: the same as [`to_values`] indented, but
/// serialized straight from the messages, with no `serde_json::Value` built
/// on the way.
pub(crate) fn write_document(messages: &[Message]) -> Result<String, FormatError> {
    check_writable(messages)?;
    let mut out = JsonOut::new(true, size_hint(messages));
    if write_messages(&mut out, messages).is_ok() && out.check().is_ok() {
        let mut text = out.into_string();
        text.push('\n');
        return Ok(text);
    }
    // Over the indenting cap on the way: measured and written as
    // `to_pretty` does (compact when the whole indented text is over it),
    // the partial text freed first.
    drop(out);
    Ok(super::pretty(&MessagesOut(messages)))
}

/// About the length of the written text: its strings, and room for the rest.
fn size_hint(messages: &[Message]) -> usize {
    messages
        .iter()
        .map(|m| {
            m.content.len()
                + m.tool_calls
                    .iter()
                    .map(|c| c.arguments.len() + 96)
                    .sum::<usize>()
                + 64
        })
        .sum::<usize>()
        .saturating_mul(9)
        / 8
}

/// Messages as [`MessagesOut`] serializes them, written straight (a faster
/// string escape than serde_json's: the writing of a view was mostly that);
/// `Err` once an indented text is over the cap, checked after each message,
/// part and tool call and inside kept fields.
fn write_messages(out: &mut JsonOut, messages: &[Message]) -> Result<(), OverCap> {
    out.begin_array();
    for m in messages {
        out.element();
        write_message(out, m)?;
        out.check()?;
    }
    out.end_array();
    Ok(())
}

/// One message as [`MessageOut`] serializes it.
fn write_message(out: &mut JsonOut, m: &Message) -> Result<(), OverCap> {
    let extra = match m.metadata.get(EXTRA_KEY) {
        Some(Value::Object(extra)) => Some(extra),
        _ => None,
    };
    let developer = extra.is_some_and(|extra| {
        extra
            .iter()
            .any(|(key, value)| is_developer_role(key, value, m.role))
    });
    out.begin_object();
    out.field(
        "role",
        if developer {
            "developer"
        } else {
            m.role.as_str()
        },
    );
    out.key("content");
    if !m.parts.is_empty() {
        out.begin_array();
        if !m.content.is_empty() {
            out.element();
            write_typed(out, "text", "text", |out| out.string(&m.content));
        }
        for part in &m.parts {
            out.element();
            write_part(out, part);
            out.check()?;
        }
        out.end_array();
    } else if m.content.is_empty() && m.has_tool_calls() {
        out.null();
    } else {
        out.string(&m.content);
    }
    if m.has_tool_calls() {
        out.key("tool_calls");
        out.begin_array();
        for call in &m.tool_calls {
            out.element();
            out.begin_object();
            out.field("id", &call.id);
            out.field("type", "function");
            out.key("function");
            out.begin_object();
            out.field("name", &call.name);
            out.field("arguments", &call.arguments);
            out.end_object();
            out.end_object();
            out.check()?;
        }
        out.end_array();
    }
    if let Some(id) = &m.tool_call_id {
        out.field("tool_call_id", id);
    }
    if m.role == Role::Tool
        && let Some(name) = &m.tool_name
    {
        out.field("name", name);
    }
    if let Some(reasoning) = m.reasoning.as_ref().filter(|r| !r.redacted) {
        out.field("reasoning_content", &reasoning.text);
    }
    for (key, value) in extra.into_iter().flatten() {
        if !written_by_host(key, m.role) {
            out.key(key);
            out.value(value)?;
        }
    }
    out.end_object();
    Ok(())
}

/// `{"type": kind, key: body}`, as [`TypedOut`] serializes it.
fn write_typed(out: &mut JsonOut, kind: &str, key: &str, body: impl FnOnce(&mut JsonOut)) {
    out.begin_object();
    out.field("type", kind);
    out.key(key);
    body(out);
    out.end_object();
}

/// String fields in an object, as [`FieldsOut`] serializes them.
fn write_fields(out: &mut JsonOut, fields: &[(&str, &str)]) {
    out.begin_object();
    for (key, value) in fields {
        out.field(key, value);
    }
    out.end_object();
}

/// One content part as [`PartOut`] serializes it (a media path is refused
/// before: `check_writable`).
fn write_part(out: &mut JsonOut, part: &Part) {
    match part {
        Part::Text { text } => write_typed(out, "text", "text", |out| out.string(text)),
        Part::Image {
            source: MediaRef::Url(url),
            ..
        } => write_typed(out, "image_url", "image_url", |out| {
            write_fields(out, &[("url", url)]);
        }),
        Part::Image {
            source: MediaRef::Path(_),
            ..
        } => unreachable!("refused by check_writable"),
        Part::File { name, path, .. } => {
            if let Some((format, data)) = audio_data(name, path) {
                return write_typed(out, "input_audio", "input_audio", |out| {
                    write_fields(out, &[("data", data), ("format", format)]);
                });
            }
            let key = if path.starts_with("data:") {
                "file_data"
            } else {
                "file_id"
            };
            write_typed(out, "file", "file", |out| {
                write_fields(out, &[("filename", name), (key, path)]);
            });
        }
    }
}

/// Writes messages as compact Chat Completions JSON on one line (no final
/// newline), as a request body carries its `messages`: the same as
/// `serde_json::to_string` of [`to_values`], serialized straight from the
/// messages.
///
/// ```
/// use agent_host_core::Message;
/// use agent_host_core::format::openai::write_compact;
///
/// let text = write_compact(&[Message::user("hi")]).unwrap();
/// assert_eq!(text, r#"[{"role":"user","content":"hi"}]"#);
/// ```
pub fn write_compact(messages: &[Message]) -> Result<String, FormatError> {
    check_writable(messages)?;
    let mut out = JsonOut::new(false, size_hint(messages));
    write_messages(&mut out, messages).expect("compact text has no cap");
    Ok(out.into_string())
}

/// The first error [`to_values`] would give for `messages`: an image held as
/// a media path, which Chat Completions has no place for.
fn check_writable(messages: &[Message]) -> Result<(), FormatError> {
    for (index, m) in messages.iter().enumerate() {
        for (i, part) in m.parts.iter().enumerate() {
            if let Part::Image {
                source: MediaRef::Path(path),
                ..
            } = part
            {
                return Err(media_path_error(path).at_block(i).at_message(index));
            }
        }
    }
    Ok(())
}

/// The error for an image held as a media path.
fn media_path_error(path: &str) -> FormatError {
    FormatError::new(
        FORMAT,
        format!(
            "the image `{path}` is a media path; load it into a data: URL (or strip media) \
             before writing OpenAI messages"
        ),
    )
}

/// Messages as a JSON array of Chat Completions messages, as [`to_values`]
/// lays them out.
struct MessagesOut<'a>(&'a [Message]);

impl Serialize for MessagesOut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for m in self.0 {
            seq.serialize_element(&MessageOut(m))?;
        }
        seq.end()
    }
}

/// One message as [`message_to_value`] lays it out: the fields the message
/// sets, in order, then the kept extras that fill gaps.
struct MessageOut<'a>(&'a Message);

impl Serialize for MessageOut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let m = self.0;
        let extra = match m.metadata.get(EXTRA_KEY) {
            Some(Value::Object(extra)) => Some(extra),
            _ => None,
        };
        let developer = extra.is_some_and(|extra| {
            extra
                .iter()
                .any(|(key, value)| is_developer_role(key, value, m.role))
        });
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry(
            "role",
            if developer {
                "developer"
            } else {
                m.role.as_str()
            },
        )?;
        if !m.parts.is_empty() {
            map.serialize_entry("content", &PartsOut(m))?;
        } else if m.content.is_empty() && m.has_tool_calls() {
            map.serialize_entry("content", &())?;
        } else {
            map.serialize_entry("content", &m.content)?;
        }
        if m.has_tool_calls() {
            map.serialize_entry("tool_calls", &ToolCallsOut(&m.tool_calls))?;
        }
        if let Some(id) = &m.tool_call_id {
            map.serialize_entry("tool_call_id", id)?;
        }
        if m.role == Role::Tool
            && let Some(name) = &m.tool_name
        {
            map.serialize_entry("name", name)?;
        }
        if let Some(reasoning) = m.reasoning.as_ref().filter(|r| !r.redacted) {
            map.serialize_entry("reasoning_content", &reasoning.text)?;
        }
        // Every field set above is one `written_by_host` names, so a kept
        // field that is not such one fills a gap.
        for (key, value) in extra.into_iter().flatten() {
            if !written_by_host(key, m.role) {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

/// A message's content as a list of parts: its `content` text first, when
/// it has one.
struct PartsOut<'a>(&'a Message);

impl Serialize for PartsOut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let m = self.0;
        let text = (!m.content.is_empty()).then_some(m.content.as_str());
        let mut seq =
            serializer.serialize_seq(Some(m.parts.len() + usize::from(text.is_some())))?;
        if let Some(text) = text {
            seq.serialize_element(&TypedOut("text", "text", text))?;
        }
        for part in &m.parts {
            seq.serialize_element(&PartOut(part))?;
        }
        seq.end()
    }
}

/// One content part as [`part_to_value`] lays it out.
struct PartOut<'a>(&'a Part);

impl Serialize for PartOut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Part::Text { text } => TypedOut("text", "text", text).serialize(serializer),
            Part::Image {
                source: MediaRef::Url(url),
                ..
            } => TypedOut(
                "image_url",
                "image_url",
                &FieldsOut([("url", url.as_str())]),
            )
            .serialize(serializer),
            // Refused before writing (`check_writable`).
            Part::Image {
                source: MediaRef::Path(path),
                ..
            } => Err(ser::Error::custom(media_path_error(path).detail)),
            Part::File { name, path, .. } => {
                if let Some((format, data)) = audio_data(name, path) {
                    return TypedOut(
                        "input_audio",
                        "input_audio",
                        &FieldsOut([("data", data), ("format", format)]),
                    )
                    .serialize(serializer);
                }
                let key = if path.starts_with("data:") {
                    "file_data"
                } else {
                    "file_id"
                };
                TypedOut(
                    "file",
                    "file",
                    &FieldsOut([("filename", name.as_str()), (key, path.as_str())]),
                )
                .serialize(serializer)
            }
        }
    }
}

/// `{"type": .0, .1: .2}`: a part of type `.0` whose body is under `.1`.
struct TypedOut<'a, T: ?Sized>(&'static str, &'static str, &'a T);

impl<T: Serialize + ?Sized> Serialize for TypedOut<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("type", self.0)?;
        map.serialize_entry(self.1, self.2)?;
        map.end()
    }
}

/// An object of string fields, in order.
struct FieldsOut<'a, const N: usize>([(&'a str, &'a str); N]);

impl<const N: usize> Serialize for FieldsOut<'_, N> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(N))?;
        for (key, value) in self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// Tool calls as `{id, type: "function", function: {name, arguments}}`.
struct ToolCallsOut<'a>(&'a [ToolCall]);

impl Serialize for ToolCallsOut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for call in self.0 {
            seq.serialize_element(&ToolCallOut(call))?;
        }
        seq.end()
    }
}

struct ToolCallOut<'a>(&'a ToolCall);

impl Serialize for ToolCallOut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let call = self.0;
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("id", &call.id)?;
        map.serialize_entry("type", "function")?;
        map.serialize_entry(
            "function",
            &FieldsOut([
                ("name", call.name.as_str()),
                ("arguments", call.arguments.as_str()),
            ]),
        )?;
        map.end()
    }
}

/// Whether `key` is a field [`to_values`] writes from the message itself
/// (when the message has it) for a message of `role`: the role, the
/// content, tool calls and results, the tool's name, the reasoning.
fn written_by_host(key: &str, role: Role) -> bool {
    match key {
        "role" | "content" | "tool_calls" | "tool_call_id" | "reasoning_content" => true,
        // On other roles `name` is the participant's name, kept as an extra.
        "name" => role == Role::Tool,
        _ => false,
    }
}

/// Whether an extra is the `developer` spelling of a system message's role.
fn is_developer_role(key: &str, value: &Value, role: Role) -> bool {
    key == "role" && role == Role::System && value == "developer"
}

/// The first key of `m`'s kept OpenAI fields (metadata under [`EXTRA_KEY`])
/// that names a field the writer sets from the message itself, if any.
///
/// The writer ignores such a key, and reading never keeps one (but
/// `"role": "developer"` on a system message); the processor runtime refuses
/// a processor's message that carries one, since it would try to add or
/// change what the host validated (`tool_calls` on a message without any, a
/// `tool_call_id` on a user message).
///
/// ```
/// use agent_host_core::Message;
/// use agent_host_core::format::openai::{EXTRA_KEY, host_key_in_extras};
///
/// let mut m = Message::user("hi");
/// m.metadata.insert(EXTRA_KEY.into(), serde_json::json!({"name": "ann"}));
/// assert_eq!(host_key_in_extras(&m), None);
/// m.metadata.insert(EXTRA_KEY.into(), serde_json::json!({"tool_calls": []}));
/// assert_eq!(host_key_in_extras(&m), Some("tool_calls"));
/// ```
pub fn host_key_in_extras(m: &Message) -> Option<&str> {
    let Some(Value::Object(extra)) = m.metadata.get(EXTRA_KEY) else {
        return None;
    };
    extra
        .iter()
        .find(|(key, value)| written_by_host(key, m.role) && !is_developer_role(key, value, m.role))
        .map(|(key, _)| key.as_str())
}

fn part_to_value(part: &Part) -> Result<Value, FormatError> {
    Ok(match part {
        Part::Text { text } => json!({"type": "text", "text": text}),
        Part::Image {
            source: MediaRef::Url(url),
            ..
        } => json!({"type": "image_url", "image_url": {"url": url}}),
        Part::Image {
            source: MediaRef::Path(path),
            ..
        } => {
            return Err(media_path_error(path));
        }
        Part::File { name, path, .. } => {
            if let Some((format, data)) = audio_data(name, path) {
                return Ok(json!({"type": "input_audio",
                                 "input_audio": {"data": data, "format": format}}));
            }
            let key = if path.starts_with("data:") {
                "file_data"
            } else {
                "file_id"
            };
            json!({"type": "file", "file": {"filename": name, key: path}})
        }
    })
}

/// The format and base64 data of an unnamed `data:audio/<format>;base64,`
/// file: an `input_audio` part as read.
fn audio_data<'a>(name: &str, path: &'a str) -> Option<(&'a str, &'a str)> {
    if !name.is_empty() {
        return None;
    }
    let (format, data) = path.strip_prefix("data:audio/")?.split_once(";base64,")?;
    Some((format, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(document: Value) {
        let messages = from_value(document.clone()).unwrap();
        let back = Value::Array(to_values(&messages).unwrap());
        assert_eq!(back, document);
    }

    /// The text `format::write` gave before it serialized straight from the
    /// messages (issue 23): `to_values` indented.
    fn written_through_values(messages: &[Message]) -> Result<String, FormatError> {
        let values = Value::Array(to_values(messages)?);
        Ok(crate::format::to_pretty(&values).unwrap() + "\n")
    }

    /// Kept fields that put the indented text over the cap of `to_pretty`:
    /// the writer that escapes strings itself gives up and writes the text
    /// the exact way (issue 23), compact when the whole is over the cap,
    /// indented when only a part was.
    #[test]
    fn a_text_over_the_indenting_cap_is_written_as_to_values_is() {
        let deep: Value =
            serde_json::from_str(&format!("{}{}", "[".repeat(120), "]".repeat(120))).unwrap();
        let mut nested = json!("x".repeat(200_000));
        for _ in 0..100 {
            nested = json!([nested]);
        }
        for (extra, indented) in [(deep, false), (nested, true)] {
            let mut m = Message::user("hi \"there\"");
            m.metadata
                .insert(EXTRA_KEY.into(), json!({"x-a": extra, "x-b": "after"}));
            let messages = [Message::system("be brief"), m, Message::user("bye")];
            let text = crate::format::write(FORMAT, &messages).unwrap();
            assert_eq!(text, written_through_values(&messages).unwrap());
            assert_eq!(text.starts_with("[\n"), indented);
        }
    }

    #[test]
    fn the_writer_writes_what_to_values_builds_for_every_part_and_extra() {
        let mut messages = parse(
            r#"[{"role": "developer", "content": "Only JSON.", "x-note": {"a": [1, 2.5, null]}},
                {"role": "user", "name": "ann", "content": [
                    {"type": "text", "text": "What is \"this\"?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}},
                    {"type": "file", "file": {"filename": "a.pdf", "file_id": "file-1"}},
                    {"type": "file", "file": {"filename": "b.txt", "file_data": "data:text/plain;base64,eA=="}}]},
                {"role": "assistant", "content": null, "refusal": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                {"role": "assistant", "content": "done", "reasoning_content": "easy"}]"#,
        )
        .unwrap();
        // Text beside parts, a redacted reasoning, kept fields that name
        // the writer's own ones (skipped) on a message that has none.
        messages[1].content = "first".into();
        messages[4].reasoning.as_mut().unwrap().redacted = true;
        messages[3].metadata.insert(
            EXTRA_KEY.into(),
            json!({"tool_calls": [], "name": "x", "role": "user", "z": 1}),
        );
        messages.push(Message::user(""));
        assert_eq!(
            crate::format::write(FORMAT, &messages).unwrap(),
            written_through_values(&messages).unwrap()
        );
        assert_eq!(crate::format::write(FORMAT, &[]).unwrap(), "[]\n");
        // Compact: `to_values` on one line.
        assert_eq!(
            write_compact(&messages).unwrap(),
            serde_json::to_string(&to_values(&messages).unwrap()).unwrap()
        );
        // An image held as a media path is refused with the same error.
        messages[1].parts.push(Part::Image {
            source: MediaRef::Path("media/a.png".into()),
            mime_type: None,
        });
        let e = crate::format::write(FORMAT, &messages).unwrap_err();
        assert_eq!(e, written_through_values(&messages).unwrap_err());
        assert_eq!(e, write_compact(&messages).unwrap_err());
        assert_eq!(e.location.message, Some(1));
        assert_eq!(e.location.block, Some(5));
    }

    #[test]
    fn tool_exchange_round_trips_exactly() {
        round_trip(json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "name": "weather", "content": "18C"},
            {"role": "assistant", "content": "18C and sunny.", "reasoning_content": "easy"}
        ]));
    }

    #[test]
    fn parts_and_unknown_fields_round_trip() {
        round_trip(json!([
            {"role": "developer", "content": "Only JSON."},
            {"role": "user", "name": "ann", "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "file", "file": {"filename": "a.pdf", "file_id": "file-1"}}
            ]},
            {"role": "assistant", "content": "A cat.", "refusal": null}
        ]));
    }

    /// Found by the `roundtrip` fuzz target: removing the known fields with
    /// `Map::remove` swapped the unknown ones around, so every round trip
    /// wrote them in another order.
    #[test]
    fn unknown_fields_keep_their_order_through_round_trips() {
        let text =
            r#"[{"role":"system","x-first":"1","content":"hi","x-second":"2","x-third":"3"}]"#;
        let once = serde_json::to_string(&to_values(&parse(text).unwrap()).unwrap()).unwrap();
        assert_eq!(
            once,
            r#"[{"role":"system","content":"hi","x-first":"1","x-second":"2","x-third":"3"}]"#
        );
        let twice = serde_json::to_string(&to_values(&parse(&once).unwrap()).unwrap()).unwrap();
        assert_eq!(twice, once);
    }

    #[test]
    fn reads_fields_into_the_model() {
        let messages = parse(
            r#"{"model": "gpt-4o", "messages": [
                {"role": "user", "content": [{"type": "image_url",
                  "image_url": {"url": "data:image/jpeg;base64,/9j/"}}]},
                {"role": "developer", "content": "x"}]}"#,
        )
        .unwrap();
        assert_eq!(
            messages[0].parts[0],
            Part::Image {
                source: MediaRef::Url("data:image/jpeg;base64,/9j/".into()),
                mime_type: Some("image/jpeg".into()),
            }
        );
        assert_eq!(messages[1].role, Role::System);
        assert!(messages[0].id.starts_with("openai-00000-"));
    }

    #[test]
    fn bad_messages_name_index_and_field() {
        let cases = [
            (
                json!([{"role": "user", "content": "ok"}, {"role": "robot"}]),
                "message 1, field `role`: unknown role `robot`",
            ),
            (
                json!([{"content": "x"}]),
                "message 0, field `role`: missing `role`",
            ),
            (
                json!([{"role": "function", "name": "f", "content": "x"}]),
                "message 0, field `name`: the `function` message of `f` answers no earlier `function_call`",
            ),
            (
                json!([{"role": "function", "content": "x"}]),
                "message 0, field `name`: a `function` message needs the `name`",
            ),
            (
                json!([{"role": "assistant", "function_call": {"arguments": "{}"}}]),
                "message 0, field `function_call`: a `function_call` needs a string `name`",
            ),
            (
                json!([{"role": "tool", "content": "x"}]),
                "field `tool_call_id`",
            ),
            (
                json!([{"role": "user", "content": 5}]),
                "`content` must be a string",
            ),
            (
                json!([{"role": "user", "content": [{"type": "audio"}]}]),
                "message 0, block 0, field `type`: unsupported content part type `audio`",
            ),
            (
                json!([{"role": "assistant", "tool_calls": [{"id": "c"}]}]),
                "field `tool_calls[0].function`",
            ),
            (
                json!(["hello"]),
                "message 0: expected a message object, found a string",
            ),
            (json!({"msgs": []}), "an object with a `messages` array"),
        ];
        for (document, expected) in cases {
            let err = from_value(document).unwrap_err();
            assert!(err.to_string().contains(expected), "{err}");
        }
    }

    #[test]
    fn media_paths_must_be_resolved_before_writing() {
        let mut m = Message::user("look");
        m.parts.push(Part::Image {
            source: MediaRef::Path("media/1.png".into()),
            mime_type: None,
        });
        let err = to_values(&[Message::user("ok"), m]).unwrap_err();
        assert_eq!(err.location.message, Some(1));
        assert!(err.detail.contains("media/1.png"));
    }

    /// Regression (hardening item 9): kept OpenAI fields in a message's
    /// metadata filled the gaps of the written message, so a processor could
    /// add `tool_calls` or a `tool_call_id` the host had validated away.
    #[test]
    fn extras_never_write_the_fields_the_host_sets() {
        let mut user = Message::user("hi");
        user.metadata.insert(
            EXTRA_KEY.into(),
            json!({
                "tool_calls": [{"id": "x", "type": "function",
                                "function": {"name": "rm", "arguments": "{}"}}],
                "tool_call_id": "x",
                "reasoning_content": "planted",
                "name": "ann",
            }),
        );
        let mut tool = Message::tool_result("c1", "ls", "a");
        tool.tool_name = None;
        tool.metadata
            .insert(EXTRA_KEY.into(), json!({"name": "rm", "role": "user"}));
        let mut system = Message::system("s");
        system
            .metadata
            .insert(EXTRA_KEY.into(), json!({"role": "developer"}));
        let values = to_values(&[user, tool, system]).unwrap();
        assert_eq!(
            values[0],
            json!({"role": "user", "content": "hi", "name": "ann"})
        );
        assert_eq!(
            values[1],
            json!({"role": "tool", "content": "a", "tool_call_id": "c1"})
        );
        assert_eq!(values[2], json!({"role": "developer", "content": "s"}));
    }

    #[test]
    fn legacy_function_calls_pair_with_their_function_messages() {
        let document = json!([
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {"role": "assistant", "content": null, "function_call": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
            {"role": "assistant", "content": null, "function_call": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}},
            {"role": "function", "name": "weather", "content": "18C"},
            {"role": "function", "name": "weather", "content": "21C"},
            {"role": "assistant", "content": "Paris 18C, Rome 21C."}
        ]);
        let messages = from_value(document.clone()).unwrap();
        assert_eq!(messages[1].tool_calls[0].id, "call_legacy_1");
        assert_eq!(messages[3].tool_call_id.as_deref(), Some("call_legacy_1"));
        assert_eq!(messages[4].tool_call_id.as_deref(), Some("call_legacy_2"));
        assert_eq!(messages[4].tool_name.as_deref(), Some("weather"));
        assert!(crate::pairing::ToolPairing::of(&messages).is_complete());
        // Written in today's shape, which reads back the same.
        let written = to_values(&messages).unwrap();
        assert_eq!(written[1]["tool_calls"][0]["id"], "call_legacy_1");
        assert_eq!(written[3]["role"], "tool");
        assert_eq!(from_value(Value::Array(written)).unwrap(), messages);
        assert_eq!(parse(&document.to_string()).unwrap(), messages);
    }

    #[test]
    fn input_audio_parts_round_trip() {
        round_trip(json!([
            {"role": "user", "content": [
                {"type": "text", "text": "What is said?"},
                {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
            ]}
        ]));
        let m = &from_value(json!([{"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "mp3"}}]}]))
        .unwrap()[0];
        assert!(matches!(&m.parts[0], Part::File { mime_type: Some(t), .. } if t == "audio/mp3"));
    }

    /// The typed route gives what the generic one gives, for every shape it
    /// takes; what it does not take goes to the generic one.
    #[test]
    fn both_routes_read_the_same_messages() {
        let documents = [
            json!([{"role": "developer", "x": 1, "content": "a", "name": "n"}]),
            json!([{"a": 1, "name": "ann", "role": "user", "b": 2, "content": "hi"},
                   {"role": "assistant", "content": "", "tool_calls": [
                       {"id": "c", "function": {"name": "f", "arguments": "{}"}}]},
                   {"name": "f", "role": "tool", "x": [1], "tool_call_id": "c", "content": "ok"},
                   {"role": "tool", "tool_call_id": "c", "name": null, "content": "again"}]),
            json!({"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "t"}]}]}),
            json!([{"role": "assistant", "content": null, "refusal": null,
                    "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}],
                    "reasoning_content": "r"},
                   {"role": "tool", "tool_call_id": "c", "content": "ok"}]),
            json!([{"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}},
                   {"role": "function", "name": "f", "content": "1"}]),
            json!([{"role": "user", "content": "hi", "tool_call_id": null}]),
            // Tool calls read typed (issue 23): arguments absent, `null`,
            // text with escapes, a value; fields skipped at each level.
            json!([{"role": "assistant", "content": "", "tool_calls": [
                {"id": "a", "function": {"name": "f"}},
                {"id": "b", "index": 1, "function": {"name": "g", "arguments": null, "x": [1]}},
                {"id": "c\"d", "type": "function", "function": {"name": "h\n", "arguments": "{\"k\": \"\\/\"}"}},
                {"type": "function", "id": "e", "function": {"arguments": [1, {"b": null}], "name": "i"}}]}]),
        ];
        for document in documents {
            let text = serde_json::to_string_pretty(&document).unwrap();
            let typed = parse_typed(&text).unwrap_or_else(|| panic!("typed route refused {text}"));
            assert_eq!(typed, from_value(document).unwrap(), "{text}");
        }
        // A repeated `name`: the last value, in the first one's place.
        let text = r#"[{"role": "user", "name": "a", "x": 1, "name": "b", "content": "hi"}]"#;
        let typed = parse_typed(text).expect("the typed route takes a repeated name");
        assert_eq!(
            typed,
            from_value(serde_json::from_str(text).unwrap()).unwrap()
        );
        assert_eq!(
            typed[0].metadata[EXTRA_KEY],
            json!({"name": "b", "x": 1}),
            "{:?}",
            typed[0].metadata
        );
        for refused in [
            r#"[{"role": "user", "content": "a", "content": "b"}]"#,
            r#"[{"role": "tool", "tool_call_id": "c", "name": 1, "content": "a"}]"#,
            r#"[{"type": "message", "role": "user", "content": "a"}]"#,
            r#"{"system": "s", "messages": []}"#,
            r#"[{"role": "user", "function_call": {"name": "f"}}]"#,
            r#"[{"role": "robot"}]"#,
            r#"[{"role": "assistant", "tool_calls": [{"id": "a", "id": "b", "function": {"name": "f"}}]}]"#,
            r#"[{"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "name": "g"}}]}]"#,
            r#"[{"role": "assistant", "tool_calls": [{"id": 1, "function": {"name": "f"}}]}]"#,
            r#"[{"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": null}}]}]"#,
            r#"[{"role": "assistant", "tool_calls": [{"id": "a"}]}]"#,
            r#"[{"role": "assistant", "tool_calls": {"id": "a"}}]"#,
        ] {
            assert!(parse_typed(refused).is_none(), "{refused}");
        }
        // What the generic route refuses in a call's other fields, or in the
        // document's, the typed route refuses too: they are read as values,
        // not skipped.
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        for field in ["1e400", r#""\ud800""#, deep.as_str()] {
            for text in [
                format!(
                    r#"[{{"role": "assistant", "tool_calls": [{{"id": "a", "x": {field}, "function": {{"name": "f"}}}}]}}]"#
                ),
                format!(
                    r#"[{{"role": "assistant", "tool_calls": [{{"id": "a", "function": {{"name": "f", "x": {field}}}}}]}}]"#
                ),
                format!(r#"{{"model": {field}, "messages": []}}"#),
            ] {
                assert!(parse_typed(&text).is_none(), "{text}");
                assert!(parse(&text).is_err(), "{text}");
            }
        }
    }
}
