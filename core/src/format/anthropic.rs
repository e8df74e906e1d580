//! Anthropic Messages, in and out.
//!
//! Read: a request-shaped object `{"system": ..., "messages": [...]}` (other
//! request fields are ignored) or a bare array of messages. The system prompt
//! (a string or text blocks) becomes a leading system message. Content blocks:
//! `text`, `image` and `document` (base64 or URL sources; base64 becomes a
//! `data:` URL), `thinking` and `redacted_thinking` (kept as the message's
//! reasoning, with its signature), `tool_use` (a tool call whose `input` is kept
//! as JSON text) and `tool_result` (one tool message per block, with the tool's
//! name looked up from its call). A user message holding tool results and text
//! becomes the tool messages followed by a user message. Fields of text blocks
//! such as `cache_control` and `citations` are not kept.
//!
//! Blocks the message model has no place for are kept verbatim in the
//! message's metadata under `"anthropic"` (`{"blocks": [{"at", "block"}]}`),
//! at their places among the blocks the message is written as, and written
//! back there: server tool use and results (`server_tool_use`,
//! `web_search_tool_result`, `web_fetch_tool_result`, the code execution
//! results, MCP blocks), `compaction`, `search_result`, `container_upload`,
//! and images and documents with a source or fields a part cannot hold
//! (`file` and `text` sources, `citations`, `context`). A turn with several
//! thinking blocks (interleaved thinking, redacted blocks beside readable
//! ones) keeps each block verbatim with its signature; its reasoning is their
//! text joined, and they are written back as they were while that text is
//! unchanged (edited reasoning is written as one block, removed reasoning
//! takes them with it).
//!
//! Written: the system messages joined into `system`; tool messages grouped into
//! the user turn that follows the call, as the API requires; thinking first,
//! then text, then tool use in an assistant turn. Tool arguments travel as a
//! JSON object (`input`), so their spacing is not kept; key order is.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::{Format, FormatError, kind_of, parse_document};
use crate::message::{MediaRef, Message, Part, Reasoning, Role, ToolCall, document_id};

const FORMAT: Format = Format::Anthropic;

/// Reads messages from JSON text.
pub fn parse(text: &str) -> Result<Vec<Message>, FormatError> {
    from_value(parse_document(FORMAT, text)?)
}

/// Reads messages from a parsed JSON document.
pub fn from_value(document: Value) -> Result<Vec<Message>, FormatError> {
    let (system, items) = match document {
        Value::Array(items) => (None, items),
        Value::Object(mut object) => match object.shift_remove("messages") {
            Some(Value::Array(items)) => (object.shift_remove("system"), items),
            _ => {
                return Err(FormatError::new(
                    FORMAT,
                    "expected an object with a `messages` array, or an array of messages",
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
    let mut out = Vec::with_capacity(items.len() + 1);
    match system {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => out.push(Message::system(text)),
        Some(Value::Array(blocks)) => {
            let mut m = Message::system("");
            for (i, block) in blocks.into_iter().enumerate() {
                match content_part(block).map_err(|e| e.at_block(i).at_field("system"))? {
                    Block::Part(text @ Part::Text { .. }) => m.parts.push(text),
                    _ => {
                        return Err(FormatError::new(
                            FORMAT,
                            "the system prompt takes text blocks only",
                        )
                        .at_block(i)
                        .at_field("system"));
                    }
                }
            }
            out.push(m);
        }
        Some(other) => {
            return Err(FormatError::new(
                FORMAT,
                format!(
                    "`system` must be a string or text blocks, found {}",
                    kind_of(&other)
                ),
            )
            .at_field("system"));
        }
    }
    let mut tool_names = ToolNames::default();
    for (index, item) in items.into_iter().enumerate() {
        read_message(item, &mut tool_names, &mut out).map_err(|e| e.at_message(index))?;
    }
    for (index, m) in out.iter_mut().enumerate() {
        m.id = document_id("anthropic", index, &m.text());
    }
    Ok(out)
}

/// Content block types only Anthropic messages have (server tools and their
/// results, documents, thinking, compaction).
pub const BLOCK_TYPES: [&str; 17] = [
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "document",
    "search_result",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "tool_search_tool_result",
    "mcp_tool_use",
    "mcp_tool_result",
    "container_upload",
    "compaction",
];

/// Whether a content block of type `kind` is one only Anthropic messages
/// have (an `image` with a `source` included: OpenAI's is `image_url`).
pub(crate) fn is_anthropic_block(kind: &str, block: &Value) -> bool {
    BLOCK_TYPES.contains(&kind) || (kind == "image" && block.get("source").is_some())
}

/// Tool names by call id, so that a tool result can name its tool.
#[derive(Default)]
pub(crate) struct ToolNames(HashMap<String, String>);

fn read_message(
    item: Value,
    tool_names: &mut ToolNames,
    out: &mut Vec<Message>,
) -> Result<(), FormatError> {
    let Value::Object(mut object) = item else {
        return Err(FormatError::new(
            FORMAT,
            format!("expected a message object, found {}", kind_of(&item)),
        ));
    };
    let content = object.shift_remove("content").unwrap_or(Value::Null);
    match object.get("role").and_then(Value::as_str) {
        Some("user") => {
            let (results, user) = user_content(FORMAT, content, tool_names)?;
            out.extend(results);
            out.extend(user);
        }
        Some("assistant") => {
            let mut m = Message::assistant("");
            assistant_content(FORMAT, content, &mut m, tool_names)?;
            out.push(m);
        }
        Some(other) => {
            return Err(FormatError::new(
                FORMAT,
                format!("unknown role `{other}`; expected user or assistant (the system prompt goes in `system`)"),
            )
            .at_field("role"));
        }
        None => return Err(FormatError::new(FORMAT, "missing string `role`").at_field("role")),
    }
    Ok(())
}

/// Converts a user turn's content: the tool results it carries, then the
/// user message (if any text, image or document remains).
pub(crate) fn user_content(
    format: Format,
    content: Value,
    tool_names: &ToolNames,
) -> Result<(Vec<Message>, Option<Message>), FormatError> {
    let blocks = match content {
        Value::String(text) => return Ok((Vec::new(), Some(Message::user(text)))),
        Value::Array(blocks) => blocks,
        other => return Err(bad_content(format, &other)),
    };
    let mut results = Vec::new();
    let mut user = Message::user("");
    for (i, block) in blocks.into_iter().enumerate() {
        if block.get("type").and_then(Value::as_str) == Some("tool_result") {
            results.push(tool_result(format, block, tool_names).map_err(|e| e.at_block(i))?);
        } else {
            match content_part(block).map_err(|e| with_format(e, format).at_block(i))? {
                Block::Part(part) => user.parts.push(part),
                Block::Kept(block) => keep_block(&mut user, block),
            }
        }
    }
    let any = !user.parts.is_empty() || user.metadata.contains_key(EXTRA_KEY);
    Ok((results, any.then_some(user)))
}

/// The metadata key under which blocks this model has no place for are kept
/// (`{"blocks": [{"at": position, "block": {...}}]}`).
pub const EXTRA_KEY: &str = "anthropic";

/// How many blocks `m` is written as so far (see [`to_request`]): where a
/// block kept now goes back.
fn written_blocks(m: &Message) -> usize {
    let kept = kept_blocks(m).map_or(0, Vec::len);
    let thinking_kept =
        kept_blocks(m).is_some_and(|blocks| blocks.iter().any(|b| is_thinking(&b["block"])));
    usize::from(m.reasoning.is_some() && !thinking_kept)
        + usize::from(!m.content.is_empty())
        + m.parts.len()
        + m.tool_calls.len()
        + kept
}

/// Keeps `block` verbatim at its place in `m`.
fn keep_block(m: &mut Message, block: Value) {
    let at = written_blocks(m);
    let extra = m
        .metadata
        .entry(EXTRA_KEY)
        .or_insert_with(|| json!({"blocks": []}));
    if !extra.is_object() {
        *extra = json!({"blocks": []});
    }
    let blocks = extra
        .as_object_mut()
        .expect("made an object above")
        .entry("blocks")
        .or_insert_with(|| json!([]));
    if !blocks.is_array() {
        *blocks = json!([]);
    }
    if let Value::Array(blocks) = blocks {
        blocks.push(json!({"at": at, "block": block}));
    }
}

/// Whether a block kept in metadata (which a processor or a native log may
/// have written anything into) is one the reader keeps again as it is: the
/// writer writes no other.
fn readable_kept(block: &Value) -> bool {
    let kind = block
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match kind {
        "thinking" => block.get("thinking").is_some_and(Value::is_string),
        "redacted_thinking" => block.get("data").is_some_and(Value::is_string),
        "image" | "document" => matches!(content_part(block.clone()), Ok(Block::Kept(_))),
        "tool_use" | "tool_result" => false,
        kind => BLOCK_TYPES.contains(&kind),
    }
}

/// The blocks kept in `m`'s metadata, if any.
fn kept_blocks(m: &Message) -> Option<&Vec<Value>> {
    m.metadata.get(EXTRA_KEY)?.get("blocks")?.as_array()
}

fn is_thinking(block: &Value) -> bool {
    matches!(
        block.get("type").and_then(Value::as_str),
        Some("thinking" | "redacted_thinking")
    )
}

/// The readable text of kept thinking blocks, joined as [`add_reasoning`]
/// joins them.
fn thinking_text(blocks: &[Value]) -> String {
    let texts: Vec<&str> = blocks
        .iter()
        .map(|b| &b["block"])
        .filter(|b| is_thinking(b))
        .map(|b| {
            b.get("thinking")
                .or_else(|| b.get("data"))
                .and_then(Value::as_str)
                .unwrap_or_default()
        })
        .collect();
    texts.join("\n\n")
}

/// Adds an assistant turn's content to `m`: text parts, reasoning and tool
/// calls. Called once per streamed piece when a turn arrives in pieces.
///
/// Blocks are read and added one at a time: a bad block leaves the blocks
/// before it added (see [`read_assistant_content`] for a turn read whole
/// first).
pub(crate) fn assistant_content(
    format: Format,
    content: Value,
    m: &mut Message,
    tool_names: &mut ToolNames,
) -> Result<(), FormatError> {
    let blocks = match content {
        Value::String(text) => {
            AssistantContent::Text(text).add_to(m, tool_names);
            return Ok(());
        }
        Value::Array(blocks) => blocks,
        other => return Err(bad_content(format, &other)),
    };
    for (i, block) in blocks.into_iter().enumerate() {
        read_assistant_block(format, block)
            .map_err(|e| e.at_block(i))?
            .add_to(m, tool_names);
    }
    Ok(())
}

/// An assistant turn's content, read and checked: adding it to a message
/// cannot fail.
pub(crate) enum AssistantContent {
    /// Content given as a string.
    Text(String),
    /// Content blocks.
    Blocks(Vec<AssistantBlock>),
}

impl AssistantContent {
    /// What [`assistant_content`] adds to `m` for this content.
    pub(crate) fn add_to(self, m: &mut Message, tool_names: &mut ToolNames) {
        match self {
            AssistantContent::Text(text) => {
                if m.parts.is_empty() && m.content.is_empty() {
                    m.content = text;
                } else {
                    m.parts.push(Part::Text { text });
                }
            }
            AssistantContent::Blocks(blocks) => {
                for block in blocks {
                    block.add_to(m, tool_names);
                }
            }
        }
    }
}

/// Reads an assistant turn's content whole, as [`assistant_content`] reads
/// it, without adding it anywhere: the error is the first bad block's.
pub(crate) fn read_assistant_content(
    format: Format,
    content: Value,
) -> Result<AssistantContent, FormatError> {
    match content {
        Value::String(text) => Ok(AssistantContent::Text(text)),
        Value::Array(blocks) => blocks
            .into_iter()
            .enumerate()
            .map(|(i, block)| read_assistant_block(format, block).map_err(|e| e.at_block(i)))
            .collect::<Result<Vec<_>, _>>()
            .map(AssistantContent::Blocks),
        other => Err(bad_content(format, &other)),
    }
}

/// One block of an assistant turn, read and checked.
pub(crate) enum AssistantBlock {
    /// A `thinking` or `redacted_thinking` block, kept whole for a turn of
    /// several.
    Thinking {
        text: String,
        signature: Option<String>,
        redacted: bool,
        block: Value,
    },
    /// A `tool_use` block.
    ToolUse(ToolCall),
    /// A text, image or document block, or one kept verbatim.
    Other(Block),
}

impl AssistantBlock {
    /// Adds the block to `m` (a tool call's name to `tool_names`).
    fn add_to(self, m: &mut Message, tool_names: &mut ToolNames) {
        match self {
            AssistantBlock::Thinking {
                text,
                signature,
                redacted,
                block,
            } => add_reasoning(m, text, signature, redacted, block),
            AssistantBlock::ToolUse(call) => {
                tool_names.0.insert(call.id.clone(), call.name.clone());
                m.tool_calls.push(call);
            }
            // The first text of a turn is its content, as in the other
            // formats; later pieces keep their order as parts.
            AssistantBlock::Other(Block::Part(Part::Text { text }))
                if m.content.is_empty() && m.parts.is_empty() =>
            {
                m.content = text
            }
            AssistantBlock::Other(Block::Part(part)) => m.parts.push(part),
            AssistantBlock::Other(Block::Kept(block)) => keep_block(m, block),
        }
    }
}

/// Reads one block of an assistant turn.
pub(crate) fn read_assistant_block(
    format: Format,
    block: Value,
) -> Result<AssistantBlock, FormatError> {
    let at = |e: FormatError| with_format(e, format);
    match block.get("type").and_then(Value::as_str) {
        Some("thinking") => {
            let text = string_field(&block, "thinking").map_err(at)?;
            let signature = block
                .get("signature")
                .and_then(Value::as_str)
                .map(str::to_owned);
            Ok(AssistantBlock::Thinking {
                text,
                signature,
                redacted: false,
                block,
            })
        }
        Some("redacted_thinking") => {
            let data = string_field(&block, "data").map_err(at)?;
            Ok(AssistantBlock::Thinking {
                text: data,
                signature: None,
                redacted: true,
                block,
            })
        }
        Some("tool_use") => {
            let id = string_field(&block, "id").map_err(at)?;
            let name = string_field(&block, "name").map_err(at)?;
            let arguments = block
                .get("input")
                .map(Value::to_string)
                .unwrap_or_else(|| "{}".into());
            Ok(AssistantBlock::ToolUse(ToolCall {
                id,
                name,
                arguments,
            }))
        }
        _ => content_part(block).map_err(at).map(AssistantBlock::Other),
    }
}

/// Adds a thinking block to `m`'s reasoning. One block is the reasoning
/// (its text, its signature). Several (interleaved thinking, redacted
/// blocks beside readable ones) are kept verbatim each with its signature,
/// at their places among the turn's blocks, and the reasoning is their text
/// joined, for what reads it (summaries, token counts).
fn add_reasoning(
    m: &mut Message,
    text: String,
    signature: Option<String>,
    redacted: bool,
    block: Value,
) {
    match m.reasoning.take() {
        None => {
            m.reasoning = Some(Reasoning {
                text,
                signature,
                redacted,
            })
        }
        Some(mut existing) => {
            let thinking_kept = kept_blocks(m)
                .is_some_and(|blocks| blocks.iter().any(|b| is_thinking(&b["block"])));
            if !thinking_kept {
                // The first block, written first, goes back to its place.
                let first = reasoning_block(&existing);
                m.reasoning = None;
                keep_block(m, first);
                if let Some(Value::Array(blocks)) = m
                    .metadata
                    .get_mut(EXTRA_KEY)
                    .and_then(|e| e.get_mut("blocks"))
                    && let Some(last) = blocks.pop()
                {
                    let mut last = last;
                    last["at"] = json!(0);
                    blocks.insert(0, last);
                }
            }
            m.reasoning = Some(existing.clone());
            keep_block(m, block);
            existing.text.push_str("\n\n");
            existing.text.push_str(&text);
            existing.signature = signature.or(existing.signature.take());
            existing.redacted |= redacted;
            m.reasoning = Some(existing);
        }
    }
}

/// The block a [`Reasoning`] is written as.
fn reasoning_block(r: &Reasoning) -> Value {
    if r.redacted {
        json!({"type": "redacted_thinking", "data": r.text})
    } else {
        let mut block = json!({"type": "thinking", "thinking": r.text});
        if let Some(signature) = &r.signature {
            block["signature"] = Value::String(signature.clone());
        }
        block
    }
}

fn tool_result(
    format: Format,
    mut block: Value,
    tool_names: &ToolNames,
) -> Result<Message, FormatError> {
    let call_id = string_field(&block, "tool_use_id").map_err(|e| with_format(e, format))?;
    let mut m = Message::tool_result(call_id.clone(), "", "");
    m.tool_name = tool_names.0.get(&call_id).cloned();
    m.is_error = block
        .get("is_error")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    // Taken out of the block, which is not kept.
    let content = block
        .as_object_mut()
        .and_then(|block| block.swap_remove("content"));
    match content {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => m.content = text,
        Some(Value::Array(parts)) => {
            for (i, part) in parts.into_iter().enumerate() {
                match content_part(part)
                    .map_err(|e| with_format(e, format).at_field(format!("content[{i}]")))?
                {
                    Block::Part(part) => m.parts.push(part),
                    Block::Kept(block) => keep_block(&mut m, block),
                }
            }
        }
        Some(other) => return Err(bad_content(format, &other)),
    }
    Ok(m)
}

/// A content block read: a [`Part`], or a block this model has no place
/// for, kept verbatim.
pub(crate) enum Block {
    Part(Part),
    Kept(Value),
}

/// A text, image or document block as a [`Part`]; server tool use and
/// results, compaction, search results, and images and documents a part
/// cannot hold as they are (a file or text source, citations, context) are
/// kept verbatim.
fn content_part(block: Value) -> Result<Block, FormatError> {
    let kind = block
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match kind {
        "text" => Ok(Block::Part(Part::Text {
            text: take_string_field(block, "text")?,
        })),
        "image" | "document" => {
            if !as_part(&block) {
                check_source(&block)?;
                return Ok(Block::Kept(block));
            }
            let (url, mime_type) = source_url(&block)?;
            if kind == "image" {
                return Ok(Block::Part(Part::Image {
                    source: MediaRef::Url(url),
                    mime_type,
                }));
            }
            Ok(Block::Part(Part::File {
                name: block
                    .get("title")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                path: url,
                mime_type,
            }))
        }
        "" => {
            Err(FormatError::new(FORMAT, "a content block needs a string `type`").at_field("type"))
        }
        kind if BLOCK_TYPES.contains(&kind) => Ok(Block::Kept(block)),
        other => Err(FormatError::new(
            FORMAT,
            format!(
                "unsupported content block type `{other}`; expected text, image, document, \
                 thinking, redacted_thinking, tool_use, tool_result, or one of {}",
                BLOCK_TYPES[4..].join(", ")
            ),
        )
        .at_field("type")),
    }
}

/// Whether an image or document block is what a part holds exactly: a
/// base64 or URL source, and (for a document) a title, nothing else.
fn as_part(block: &Value) -> bool {
    let Some(object) = block.as_object() else {
        return false;
    };
    let fields_ok = object
        .keys()
        .all(|k| matches!(k.as_str(), "type" | "source" | "title"));
    let source = object.get("source").and_then(Value::as_object);
    let source_ok = source.is_some_and(|s| match s.get("type").and_then(Value::as_str) {
        Some("base64") => s
            .keys()
            .all(|k| matches!(k.as_str(), "type" | "media_type" | "data")),
        Some("url") => s.keys().all(|k| matches!(k.as_str(), "type" | "url")),
        _ => false,
    });
    fields_ok && source_ok && (object.get("title").is_none_or(Value::is_string))
}

/// An image or document kept verbatim still needs a source of some type.
fn check_source(block: &Value) -> Result<(), FormatError> {
    match block.get("source") {
        Some(source) if source.get("type").and_then(Value::as_str).is_some() => Ok(()),
        Some(_) => {
            Err(FormatError::new(FORMAT, "a source needs a string `type`").at_field("source.type"))
        }
        None => Err(FormatError::new(FORMAT, "missing `source`").at_field("source")),
    }
}

/// The URL of an image or document source; base64 data becomes a `data:` URL.
fn source_url(block: &Value) -> Result<(String, Option<String>), FormatError> {
    let source = block
        .get("source")
        .ok_or_else(|| FormatError::new(FORMAT, "missing `source`").at_field("source"))?;
    match source.get("type").and_then(Value::as_str) {
        Some("base64") => {
            let media_type =
                string_field(source, "media_type").map_err(|e| e.at_field("source.media_type"))?;
            let data = string_field(source, "data").map_err(|e| e.at_field("source.data"))?;
            Ok((format!("data:{media_type};base64,{data}"), Some(media_type)))
        }
        Some("url") => Ok((
            string_field(source, "url").map_err(|e| e.at_field("source.url"))?,
            None,
        )),
        _ => Err(FormatError::new(
            FORMAT,
            "unsupported source; expected a `base64` or `url` source",
        )
        .at_field("source.type")),
    }
}

fn string_field(value: &Value, key: &str) -> Result<String, FormatError> {
    match value.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(not_a_string(key, other)),
        None => Err(FormatError::new(FORMAT, format!("missing `{key}`")).at_field(key)),
    }
}

/// [`string_field`] of a value that is not kept: the string is taken out of
/// it rather than copied.
fn take_string_field(value: Value, key: &str) -> Result<String, FormatError> {
    let field = match value {
        Value::Object(mut object) => object.swap_remove(key),
        _ => None,
    };
    match field {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(not_a_string(key, &other)),
        None => Err(FormatError::new(FORMAT, format!("missing `{key}`")).at_field(key)),
    }
}

fn not_a_string(key: &str, found: &Value) -> FormatError {
    FormatError::new(
        FORMAT,
        format!("`{key}` must be a string, found {}", kind_of(found)),
    )
    .at_field(key)
}

fn bad_content(format: Format, found: &Value) -> FormatError {
    FormatError::new(
        format,
        format!(
            "`content` must be a string or an array of blocks, found {}",
            kind_of(found)
        ),
    )
    .at_field("content")
}

/// Block helpers are shared with Claude Code; errors carry the caller's format.
fn with_format(mut e: FormatError, format: Format) -> FormatError {
    e.format = format;
    e
}

/// Writes messages as a Messages API request body: `{"system"?, "messages"}`.
pub fn to_request(messages: &[Message]) -> Result<Value, FormatError> {
    let mut system: Vec<&Message> = Vec::new();
    let mut out: Vec<Value> = Vec::with_capacity(messages.len());
    for (index, m) in messages.iter().enumerate() {
        let at = |e: FormatError| e.at_message(index);
        if m.role != Role::Assistant && (m.has_tool_calls() || m.reasoning.is_some()) {
            return Err(at(FormatError::new(
                FORMAT,
                format!(
                    "a {} message carries tool calls or reasoning, which only assistant turns can hold",
                    m.role
                ),
            )));
        }
        match m.role {
            Role::System => system.push(m),
            Role::User => {
                let blocks = user_blocks(m).map_err(at)?;
                // The API takes alternating turns: a user message after a
                // user turn (tool results, or text such as recalled
                // memories after the question) joins it.
                match last_user_turn(&mut out) {
                    Some(open) => open.extend(blocks.into_blocks()),
                    None => out.push(json!({"role": "user", "content": blocks.into_value()})),
                }
            }
            Role::Tool => {
                let block = tool_result_block(m).map_err(at)?;
                match last_tool_results(&mut out) {
                    Some(open) => open.push(block),
                    None => out.push(json!({"role": "user", "content": [block]})),
                }
            }
            Role::Assistant => {
                out.push(json!({"role": "assistant", "content": assistant_blocks(m).map_err(at)?}));
            }
        }
    }
    let mut request = Map::new();
    if !system.is_empty() {
        request.insert("system".into(), system_value(&system)?);
    }
    request.insert("messages".into(), Value::Array(out));
    Ok(Value::Object(request))
}

/// Content that is either a plain string or blocks.
enum Content {
    Text(String),
    Blocks(Vec<Value>),
}

impl Content {
    fn into_value(self) -> Value {
        match self {
            Content::Text(text) => Value::String(text),
            Content::Blocks(blocks) => Value::Array(blocks),
        }
    }

    fn into_blocks(self) -> Vec<Value> {
        match self {
            Content::Text(text) => vec![json!({"type": "text", "text": text})],
            Content::Blocks(blocks) => blocks,
        }
    }
}

/// The blocks of the last output message, if it is a user turn carrying tool
/// results, which the next tool result or user text must join.
fn last_tool_results(out: &mut [Value]) -> Option<&mut Vec<Value>> {
    let last = out.last_mut()?;
    if last["role"] != "user" {
        return None;
    }
    match last.get_mut("content") {
        Some(Value::Array(blocks))
            if blocks
                .last()
                .and_then(|b| b.get("type"))
                .and_then(Value::as_str)
                == Some("tool_result") =>
        {
            Some(blocks)
        }
        _ => None,
    }
}

/// The blocks of the last output message, if it is a user turn (its text
/// made a text block), which a following user message joins.
fn last_user_turn(out: &mut [Value]) -> Option<&mut Vec<Value>> {
    let last = out.last_mut()?;
    if last["role"] != "user" {
        return None;
    }
    let content = last.get_mut("content")?;
    if let Value::String(text) = content {
        *content = json!([{"type": "text", "text": std::mem::take(text)}]);
    }
    match content {
        Value::Array(blocks) => Some(blocks),
        _ => None,
    }
}

fn user_blocks(m: &Message) -> Result<Content, FormatError> {
    if m.parts.is_empty() && kept_blocks(m).is_none() {
        return Ok(Content::Text(m.content.clone()));
    }
    let mut blocks = text_and_parts(m)?;
    insert_kept(m, &mut blocks, true);
    Ok(Content::Blocks(blocks))
}

/// Puts the blocks kept verbatim in `m` back at their places in `blocks`;
/// kept thinking blocks only with `thinking` (the reasoning they were read
/// into is unchanged).
fn insert_kept(m: &Message, blocks: &mut Vec<Value>, thinking: bool) {
    let Some(kept) = kept_blocks(m) else {
        return;
    };
    for entry in kept {
        let block = &entry["block"];
        if !readable_kept(block) || (is_thinking(block) && !thinking) {
            continue;
        }
        let at = entry["at"]
            .as_u64()
            .map_or(blocks.len(), |at| (at as usize).min(blocks.len()));
        blocks.insert(at, block.clone());
    }
}

fn text_and_parts(m: &Message) -> Result<Vec<Value>, FormatError> {
    let mut blocks = Vec::with_capacity(m.parts.len() + 1);
    if !m.content.is_empty() {
        blocks.push(json!({"type": "text", "text": m.content}));
    }
    for (i, part) in m.parts.iter().enumerate() {
        blocks.push(part_block(part).map_err(|e| e.at_block(i))?);
    }
    Ok(blocks)
}

fn assistant_blocks(m: &Message) -> Result<Value, FormatError> {
    // The API answers with blocks, so blocks are what an assistant turn is
    // written as; only an empty turn stays a string.
    if m.reasoning.is_none()
        && m.tool_calls.is_empty()
        && m.parts.is_empty()
        && m.content.is_empty()
        && kept_blocks(m).is_none_or(Vec::is_empty)
    {
        return Ok(Value::String(String::new()));
    }
    let mut blocks = Vec::new();
    // Several thinking blocks kept verbatim, each with its signature, are
    // written as they were while the reasoning read from them is unchanged;
    // reasoning that was edited is written as one block.
    let thinking_kept = m.reasoning.as_ref().is_some_and(|r| {
        kept_blocks(m).is_some_and(|kept| {
            kept.iter().any(|b| is_thinking(&b["block"])) && thinking_text(kept) == r.text
        })
    });
    if let Some(r) = m.reasoning.as_ref().filter(|_| !thinking_kept) {
        blocks.push(reasoning_block(r));
    }
    blocks.extend(text_and_parts(m)?);
    for (i, call) in m.tool_calls.iter().enumerate() {
        let input: Value = if call.arguments.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(&call.arguments).map_err(|e| {
                FormatError::new(
                    FORMAT,
                    format!("the arguments of tool call `{}` are not valid JSON ({e}); Anthropic needs an object", call.id),
                )
                .at_field(format!("tool_calls[{i}].arguments"))
            })?
        };
        blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
    }
    insert_kept(m, &mut blocks, thinking_kept);
    Ok(Value::Array(blocks))
}

fn tool_result_block(m: &Message) -> Result<Value, FormatError> {
    let call_id = m.tool_call_id.as_deref().ok_or_else(|| {
        FormatError::new(
            FORMAT,
            "a tool result without a `tool_call_id` cannot be sent",
        )
        .at_field("tool_call_id")
    })?;
    let content = user_blocks(m)?.into_value();
    let mut block = json!({"type": "tool_result", "tool_use_id": call_id, "content": content});
    if m.is_error {
        block["is_error"] = Value::Bool(true);
    }
    Ok(block)
}

fn part_block(part: &Part) -> Result<Value, FormatError> {
    let source = |url: &str| -> Value {
        match url
            .strip_prefix("data:")
            .and_then(|rest| rest.split_once(";base64,"))
        {
            Some((media_type, data)) => {
                json!({"type": "base64", "media_type": media_type, "data": data})
            }
            None => json!({"type": "url", "url": url}),
        }
    };
    Ok(match part {
        Part::Text { text } => json!({"type": "text", "text": text}),
        Part::Image {
            source: MediaRef::Url(url),
            ..
        } => json!({"type": "image", "source": source(url)}),
        Part::Image {
            source: MediaRef::Path(path),
            ..
        } => {
            return Err(FormatError::new(
                FORMAT,
                format!(
                    "the image `{path}` is a media path; load it into a data: URL (or strip media) \
                     before writing Anthropic messages"
                ),
            ));
        }
        Part::File { name, path, .. } => {
            let mut block = json!({"type": "document", "source": source(path)});
            if !name.is_empty() {
                block["title"] = Value::String(name.clone());
            }
            block
        }
    })
}

fn system_value(system: &[&Message]) -> Result<Value, FormatError> {
    if system.iter().all(|m| m.parts.is_empty()) {
        let texts: Vec<&str> = system.iter().map(|m| m.content.as_str()).collect();
        return Ok(Value::String(texts.join("\n\n")));
    }
    let mut blocks = Vec::new();
    for m in system {
        for block in text_and_parts(m)? {
            if block["type"] != "text" {
                return Err(
                    FormatError::new(FORMAT, "the system prompt takes text only")
                        .at_field("system"),
                );
            }
            blocks.push(block);
        }
    }
    Ok(Value::Array(blocks))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(document: Value) {
        let messages = from_value(document.clone()).unwrap();
        assert_eq!(to_request(&messages).unwrap(), document);
    }

    /// A request's turns alternate: a user message after a user turn (the
    /// recalled memories placed after the question) joins it, as blocks
    /// in order, and the turns before are written as before.
    #[test]
    fn consecutive_user_messages_join_one_turn_in_a_request() {
        let messages = [
            Message::user("first"),
            Message::assistant("ok"),
            Message::user("what is my dog called?"),
            Message::user("Relevant memories: the dog is Rex"),
        ];
        let request = to_request(&messages).unwrap();
        assert_eq!(
            request["messages"],
            json!([
                {"role": "user", "content": "first"},
                {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
                {"role": "user", "content": [
                    {"type": "text", "text": "what is my dog called?"},
                    {"type": "text", "text": "Relevant memories: the dog is Rex"},
                ]},
            ])
        );
    }

    #[test]
    fn tool_exchange_with_thinking_round_trips_exactly() {
        round_trip(json!({
            "system": "Be brief.",
            "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Use the tool.", "signature": "sig=="},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "time", "input": {}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
                     "content": [{"type": "text", "text": "no clock"}]},
                    {"type": "text", "text": "Thanks"}
                ]},
                {"role": "assistant", "content": [{"type": "text", "text": "18C."}]}
            ]
        }));
    }

    #[test]
    fn media_and_redacted_thinking_round_trip() {
        round_trip(json!({
            "messages": [
                {"role": "user", "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
                    {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}},
                    {"type": "document", "title": "spec", "source": {"type": "url", "url": "https://example.com/a.pdf"}},
                    {"type": "text", "text": "Compare them."}
                ]},
                {"role": "assistant", "content": [
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "Done."}
                ]}
            ]
        }));
    }

    /// Server tools, interleaved thinking (each block with its signature),
    /// code execution, compaction, documents of every source: kept verbatim
    /// at their places, never refused.
    #[test]
    fn blocks_without_a_place_in_the_model_round_trip_exactly() {
        round_trip(json!({
            "system": [{"type": "text", "text": "Research."}],
            "messages": [
                {"role": "user", "content": [
                    {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "Q3 revenue: 4.2M"},
                     "title": "report", "citations": {"enabled": true}},
                    {"type": "document", "source": {"type": "file", "file_id": "file_011"}},
                    {"type": "image", "source": {"type": "file", "file_id": "file_012"}},
                    {"type": "text", "text": "What changed?"}
                ]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Search first.", "signature": "sig-1"},
                    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "Q3"}},
                    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
                     "content": [{"type": "web_search_result", "url": "https://example.com/q3", "title": "Q3", "encrypted_content": "EqgB"}]},
                    {"type": "thinking", "thinking": "Now compute.", "signature": "sig-2"},
                    {"type": "redacted_thinking", "data": "EmwKAhgB"},
                    {"type": "server_tool_use", "id": "srvtoolu_2", "name": "code_execution", "input": {"code": "print(4.2/3.9)"}},
                    {"type": "code_execution_tool_result", "tool_use_id": "srvtoolu_2",
                     "content": {"type": "code_execution_result", "stdout": "1.077\n", "stderr": "", "return_code": 0}},
                    {"type": "text", "text": "Up 7.7%."},
                    {"type": "tool_use", "id": "toolu_1", "name": "save", "input": {"v": 1.077}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                        {"type": "search_result", "source": "db", "title": "saved", "content": [{"type": "text", "text": "ok"}]},
                        {"type": "text", "text": "saved"}
                    ]}
                ]},
                {"role": "assistant", "content": [
                    {"type": "compaction", "content": "Summary of the work so far."},
                    {"type": "text", "text": "Done."}
                ]}
            ]
        }));
        let messages = from_value(json!([{"role": "assistant", "content": [
            {"type": "thinking", "thinking": "a", "signature": "s1"},
            {"type": "thinking", "thinking": "b", "signature": "s2"},
            {"type": "text", "text": "x"}]}]))
        .unwrap();
        let r = messages[0].reasoning.as_ref().unwrap();
        assert_eq!(
            (r.text.as_str(), r.signature.as_deref()),
            ("a\n\nb", Some("s2"))
        );
    }

    #[test]
    fn edited_interleaved_thinking_is_written_as_one_block() {
        let mut messages = from_value(json!([{"role": "assistant", "content": [
            {"type": "thinking", "thinking": "a", "signature": "s1"},
            {"type": "thinking", "thinking": "b", "signature": "s2"},
            {"type": "text", "text": "x"}]}]))
        .unwrap();
        messages[0].reasoning = Some(Reasoning {
            text: "shorter".into(),
            ..Reasoning::default()
        });
        let request = to_request(&messages).unwrap();
        assert_eq!(
            request["messages"][0]["content"],
            json!([{"type": "thinking", "thinking": "shorter"}, {"type": "text", "text": "x"}])
        );
        messages[0].reasoning = None;
        let request = to_request(&messages).unwrap();
        assert_eq!(
            request["messages"][0]["content"],
            json!([{"type": "text", "text": "x"}])
        );
    }

    #[test]
    fn tool_results_become_tool_messages_named_after_their_call() {
        let messages = from_value(json!([
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {"p": "/"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "bin"}]}
        ]))
        .unwrap();
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0].tool_calls[0].arguments, r#"{"p":"/"}"#);
        assert_eq!(messages[1].role, Role::Tool);
        assert_eq!(messages[1].tool_name.as_deref(), Some("ls"));
        assert_eq!(messages[1].content, "bin");
    }

    #[test]
    fn openai_shaped_history_converts_to_a_valid_request() {
        let mut call = Message::assistant("");
        call.push_tool_call("c1", "ls", "");
        let messages = vec![
            Message::system("a"),
            Message::system("b"),
            Message::user("list"),
            call,
            Message::tool_result("c1", "ls", "bin"),
            Message::user("and?"),
        ];
        let request = to_request(&messages).unwrap();
        assert_eq!(request["system"], "a\n\nb");
        let turns = request["messages"].as_array().unwrap();
        assert_eq!(turns.len(), 3, "{request:#}");
        assert_eq!(turns[1]["content"][0]["input"], json!({}));
        assert_eq!(turns[2]["content"][0]["type"], "tool_result");
        assert_eq!(
            turns[2]["content"][1],
            json!({"type": "text", "text": "and?"})
        );
    }

    #[test]
    fn bad_input_names_message_block_and_field() {
        let cases = [
            (
                json!([{"role": "system", "content": "x"}]),
                "message 0, field `role`: unknown role `system`",
            ),
            (
                json!([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "video"}]}]),
                "message 0, block 1, field `type`: unsupported content block type `video`",
            ),
            (
                json!([{"role": "assistant", "content": [{"type": "tool_use", "name": "x"}]}]),
                "block 0, field `id`: missing `id`",
            ),
            (
                json!([{"role": "user", "content": [{"type": "tool_result"}]}]),
                "missing `tool_use_id`",
            ),
            (
                json!([{"role": "user", "content": [{"type": "image", "source": {"kind": "file"}}]}]),
                "field `source.type`",
            ),
            (
                json!([{"role": "user", "content": [{"type": "document"}]}]),
                "field `source`: missing `source`",
            ),
            (
                json!({"system": 3, "messages": []}),
                "`system` must be a string",
            ),
            (
                json!([{"role": "user", "content": 7}]),
                "`content` must be a string or an array",
            ),
        ];
        for (document, expected) in cases {
            let err = from_value(document).unwrap_err();
            assert!(err.to_string().contains(expected), "{err}");
        }
    }

    #[test]
    fn tool_calls_outside_assistant_turns_are_refused_not_dropped() {
        let mut m = Message::user("hi");
        m.push_tool_call("c1", "ls", "{}");
        let err = to_request(&[m]).unwrap_err();
        assert!(
            err.to_string()
                .contains("message 0: a user message carries tool calls"),
            "{err}"
        );
    }

    #[test]
    fn invalid_tool_arguments_are_an_error_when_writing() {
        let mut m = Message::assistant("");
        m.push_tool_call("c9", "ls", "{not json");
        let err = to_request(&[m]).unwrap_err();
        assert_eq!(err.location.message, Some(0));
        assert!(err.detail.contains("`c9`"), "{err}");
    }
}
