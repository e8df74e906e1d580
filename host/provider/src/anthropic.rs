//! Anthropic Messages: `POST {base_url}/v1/messages`.
//!
//! The request body comes from core's Anthropic writer (system prompt apart,
//! tool results grouped into user turns, thinking blocks with their
//! signatures) and a whole answer's content blocks are read by core's
//! reader. A streamed answer is put back together into the content blocks a
//! whole answer carries and read the same way, so streaming or not gives the
//! same message.
//!
//! Usage: Anthropic counts cached prompt tokens apart from `input_tokens`;
//! the reply's [`Usage::input_tokens`] is the whole prompt (`input_tokens +
//! cache_read_input_tokens + cache_creation_input_tokens`), as OpenAI's
//! `prompt_tokens` is, so that it measures the context on both wires.

use std::collections::BTreeMap;

use agent_host_core::Usage;
use agent_host_core::format::anthropic as format;
use serde_json::{Map, Value, json};

use super::http::{self, ApiError, HttpRequest, Reply, StreamDecoder, StreamError, Wire};
use super::sse::Event;
use super::{ChatReply, ChatRequest, Provider, ProviderError, StreamEvent};

/// The API version this provider speaks.
pub(super) const API_VERSION: &str = "2023-06-01";

/// The content block types a reply message can hold; others (server tool
/// use and its results) have no place in the message model and are skipped.
const KEPT_BLOCKS: [&str; 4] = ["text", "thinking", "redacted_thinking", "tool_use"];

/// Sends `request` to an Anthropic Messages server.
pub(super) async fn complete(
    provider: &Provider,
    request: &ChatRequest,
    on_event: &mut (dyn FnMut(StreamEvent) + Send),
) -> Result<ChatReply, ProviderError> {
    let settings = provider.settings();
    let stream = request.stream.unwrap_or(settings.stream);
    let Value::Object(written) =
        format::to_request(&request.messages).map_err(|e| ProviderError::Request(e.to_string()))?
    else {
        return Err(ProviderError::Request(
            "core's Anthropic writer did not give an object".into(),
        ));
    };
    let mut body = Map::new();
    body.insert("model".into(), json!(settings.model));
    body.insert(
        "max_tokens".into(),
        json!(request.max_tokens.unwrap_or(settings.max_tokens)),
    );
    body.extend(written);
    if let Some(t) = request.temperature.or(settings.temperature) {
        body.insert("temperature".into(), super::temperature(t));
    }
    body.insert("stream".into(), json!(stream));
    let offered = !settings.tools.is_empty() || !request.tools.is_empty();
    if !request.no_tools && offered {
        let tools = settings
            .tools
            .iter()
            .chain(&request.tools)
            .map(tool_definition)
            .collect::<Result<Vec<_>, _>>()?;
        body.insert("tools".into(), Value::Array(tools));
    }
    let mut headers = vec![("anthropic-version", API_VERSION.to_owned())];
    if let Some(key) = &provider.api_key {
        headers.push(("x-api-key", key.clone()));
    }
    let request = HttpRequest {
        url: messages_url(&settings.base_url),
        headers,
        body: serde_json::to_vec(&Value::Object(body))
            .map_err(|e| ProviderError::Request(e.to_string()))?,
        stream,
        message_count: request.messages.len(),
    };
    http::exchange::<Anthropic>(provider, request, on_event).await
}

/// `{base_url}/v1/messages`; a base URL that already ends in `/v1` (a common
/// slip, since the OpenAI one does) is taken as meant.
pub(super) fn messages_url(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    let base = base.strip_suffix("/v1").unwrap_or(base);
    format!("{base}/v1/messages")
}

/// An OpenAI function tool (`{"type": "function", "function": {name,
/// description, parameters}}`) as an Anthropic tool (`{name, description,
/// input_schema}`); a definition already in Anthropic's shape goes as is.
pub fn tool_definition(tool: &Value) -> Result<Value, ProviderError> {
    if tool.get("input_schema").is_some() {
        return Ok(tool.clone());
    }
    let function = tool.get("function").unwrap_or(tool);
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            ProviderError::Request(format!(
                "a tool definition has no `function.name`: {}",
                http::truncate(&tool.to_string(), 200)
            ))
        })?;
    let mut out = Map::new();
    out.insert("name".into(), json!(name));
    if let Some(description) = function.get("description").and_then(Value::as_str) {
        out.insert("description".into(), json!(description));
    }
    out.insert(
        "input_schema".into(),
        function
            .get("parameters")
            .filter(|p| !p.is_null())
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    );
    Ok(Value::Object(out))
}

/// The Messages wire.
pub(super) struct Anthropic;

impl Wire for Anthropic {
    const END_MARKER: &'static str = "`message_stop`";
    type Decoder = Decoder;

    fn parse_reply(body: Value) -> Result<Reply, String> {
        parse_reply(body)
    }
}

fn parse_reply(body: Value) -> Result<Reply, String> {
    if body.get("type").and_then(Value::as_str) == Some("error") {
        let error = ApiError::from_body(200, &body.to_string());
        return Err(format!("the answer is an error: {}", error.message));
    }
    let Some(Value::Array(blocks)) = body.get("content") else {
        return Err(
            "the answer has no `content` array (is base_url an Anthropic Messages endpoint?)"
                .into(),
        );
    };
    let kept: Vec<Value> = blocks
        .iter()
        .filter(|b| {
            b.get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| KEPT_BLOCKS.contains(&t))
        })
        .cloned()
        .collect();
    let mut message = format::from_value(json!([{"role": "assistant", "content": kept}]))
        .map_err(|e| format!("the answer's `content` is not an assistant turn: {e}"))?
        .pop()
        .ok_or("the answer's `content` gave no message")?;
    message.usage = body.get("usage").and_then(usage);
    message.model = body.get("model").and_then(Value::as_str).map(str::to_owned);
    Ok(Reply {
        message: http::stamp(message),
        stop_reason: body
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

fn usage(usage: &Value) -> Option<Usage> {
    let usage = usage.as_object()?;
    let count = |key: &str| usage.get(key).and_then(Value::as_u64);
    let cache_read = count("cache_read_input_tokens");
    let cache_write = count("cache_creation_input_tokens");
    Some(Usage {
        input_tokens: count("input_tokens").unwrap_or(0)
            + cache_read.unwrap_or(0)
            + cache_write.unwrap_or(0),
        output_tokens: count("output_tokens").unwrap_or(0),
        cache_read_tokens: cache_read,
        cache_write_tokens: cache_write,
    })
}

/// A streamed answer being put together.
#[derive(Debug, Default)]
pub(super) struct Decoder {
    /// Content blocks by index, as `content_block_start` gave them, with
    /// their deltas applied.
    blocks: BTreeMap<u64, Value>,
    /// A tool_use block's `input`, as JSON text arriving in pieces.
    partial_json: BTreeMap<u64, String>,
    model: Option<String>,
    usage: Map<String, Value>,
    stop_reason: Option<String>,
    done: bool,
}

impl StreamDecoder for Decoder {
    fn event(
        &mut self,
        event: Event,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<(), StreamError> {
        let data: Value = serde_json::from_str(&event.data).map_err(|e| {
            StreamError::Malformed(format!(
                "the `{}` event is not JSON ({e}): {}",
                event.event,
                http::truncate(&event.data, 200)
            ))
        })?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event.event.as_str());
        let index = || -> Result<u64, StreamError> {
            data.get("index")
                .and_then(Value::as_u64)
                .ok_or_else(|| StreamError::Malformed(format!("the `{kind}` event has no `index`")))
        };
        match kind {
            "message_start" => {
                let message = data.get("message");
                self.model = message
                    .and_then(|m| m.get("model"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                self.merge_usage(message.and_then(|m| m.get("usage")));
            }
            "content_block_start" => {
                let index = index()?;
                let block = data.get("content_block").cloned().ok_or_else(|| {
                    StreamError::Malformed("`content_block_start` has no `content_block`".into())
                })?;
                let text = |key| {
                    block
                        .get(key)
                        .and_then(Value::as_str)
                        .filter(|t| !t.is_empty())
                };
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if let Some(t) = text("text") {
                            emit(StreamEvent::Text(t.to_owned()));
                        }
                    }
                    Some("thinking") => {
                        if let Some(t) = text("thinking") {
                            emit(StreamEvent::Reasoning(t.to_owned()));
                        }
                    }
                    Some("tool_use") => {
                        emit(StreamEvent::ToolCall {
                            name: text("name").unwrap_or_default().to_owned(),
                        });
                        self.partial_json.insert(index, String::new());
                    }
                    _ => {}
                }
                self.blocks.insert(index, block);
            }
            "content_block_delta" => {
                let index = index()?;
                let delta = data.get("delta").cloned().unwrap_or_default();
                let block = self.blocks.get_mut(&index).ok_or_else(|| {
                    StreamError::Malformed(format!(
                        "a delta for content block {index}, which never started"
                    ))
                })?;
                let piece = |key| {
                    delta
                        .get(key)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        let piece = piece("text");
                        append(block, "text", &piece);
                        if !piece.is_empty() {
                            emit(StreamEvent::Text(piece));
                        }
                    }
                    Some("thinking_delta") => {
                        let piece = piece("thinking");
                        append(block, "thinking", &piece);
                        if !piece.is_empty() {
                            emit(StreamEvent::Reasoning(piece));
                        }
                    }
                    Some("signature_delta") => append(block, "signature", &piece("signature")),
                    Some("input_json_delta") => self
                        .partial_json
                        .entry(index)
                        .or_default()
                        .push_str(&piece("partial_json")),
                    // Citations and deltas of newer block types: nothing to keep.
                    _ => {}
                }
            }
            "content_block_stop" => self.close_block(index()?)?,
            "message_delta" => {
                if let Some(reason) = data
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(reason.to_owned());
                }
                self.merge_usage(data.get("usage"));
            }
            "message_stop" => self.done = true,
            "error" => return Err(StreamError::Api(stream_error(&data))),
            // `ping`, and event types added later (the API says to expect them).
            _ => {}
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn finish(mut self) -> Result<Reply, String> {
        let open: Vec<u64> = self.partial_json.keys().copied().collect();
        for index in open {
            self.close_block(index).map_err(|e| match e {
                StreamError::Malformed(m) => m,
                StreamError::Api(api) => api.message,
            })?;
        }
        parse_reply(json!({
            "model": self.model,
            "content": self.blocks.into_values().collect::<Vec<_>>(),
            "stop_reason": self.stop_reason,
            "usage": self.usage,
        }))
    }
}

impl Decoder {
    /// Later usage (`message_delta`) replaces earlier (`message_start`)
    /// field by field: the output count grows, the input count stays.
    fn merge_usage(&mut self, usage: Option<&Value>) {
        if let Some(Value::Object(usage)) = usage {
            for (key, value) in usage {
                if !value.is_null() {
                    self.usage.insert(key.clone(), value.clone());
                }
            }
        }
    }

    /// A tool_use block is complete: its JSON text becomes its `input`.
    fn close_block(&mut self, index: u64) -> Result<(), StreamError> {
        let Some(json_text) = self.partial_json.remove(&index) else {
            return Ok(());
        };
        let Some(block) = self.blocks.get_mut(&index) else {
            return Ok(());
        };
        if json_text.trim().is_empty() {
            // No input deltas: the start block's `input` (`{}`) stands.
            return Ok(());
        }
        let input: Value = serde_json::from_str(&json_text).map_err(|e| {
            StreamError::Malformed(format!(
                "the streamed input of tool call `{}` is not JSON ({e}): {}",
                block.get("id").and_then(Value::as_str).unwrap_or("?"),
                http::truncate(&json_text, 200)
            ))
        })?;
        block["input"] = input;
        Ok(())
    }
}

fn append(block: &mut Value, key: &str, piece: &str) {
    let mut text = block
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    text.push_str(piece);
    block[key] = Value::String(text);
}

/// An `error` event: its type stands for the status the same error has
/// outside a stream, so it is classified (and retried) the same way.
fn stream_error(data: &Value) -> ApiError {
    let mut api = ApiError::from_body(200, &data.to_string());
    api.status = match api.kind.as_deref() {
        Some("invalid_request_error") => 400,
        Some("authentication_error") => 401,
        Some("permission_error") => 403,
        Some("not_found_error") => 404,
        Some("request_too_large") => 413,
        Some("rate_limit_error") => 429,
        Some("overloaded_error") => 529,
        _ => 500,
    };
    api
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_tools_become_anthropic_tools() {
        let tool = json!({"type": "function", "function": {
            "name": "read_file", "description": "Reads a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}});
        assert_eq!(
            tool_definition(&tool).unwrap(),
            json!({"name": "read_file", "description": "Reads a file",
                   "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}})
        );
        let bare = json!({"type": "function", "function": {"name": "now"}});
        assert_eq!(
            tool_definition(&bare).unwrap()["input_schema"],
            json!({"type": "object", "properties": {}})
        );
        assert!(tool_definition(&json!({"type": "function"})).is_err());
    }

    #[test]
    fn base_urls_with_or_without_v1_reach_the_same_endpoint() {
        for base in [
            "https://api.anthropic.com",
            "https://api.anthropic.com/",
            "https://api.anthropic.com/v1",
            "https://api.anthropic.com/v1/",
        ] {
            assert_eq!(messages_url(base), "https://api.anthropic.com/v1/messages");
        }
    }

    #[test]
    fn usage_counts_the_whole_prompt() {
        let u = usage(&json!({"input_tokens": 5, "cache_read_input_tokens": 100,
                              "cache_creation_input_tokens": 20, "output_tokens": 7}))
        .unwrap();
        assert_eq!(u.input_tokens, 125);
        assert_eq!(u.cache_read_tokens, Some(100));
        assert_eq!(u.cache_write_tokens, Some(20));
    }

    #[test]
    fn server_tool_blocks_are_skipped_not_fatal() {
        let reply = parse_reply(json!({
            "model": "claude-x", "stop_reason": "end_turn",
            "content": [
                {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}},
                {"type": "web_search_tool_result", "tool_use_id": "s1", "content": []},
                {"type": "text", "text": "Found it.", "citations": []}
            ],
            "usage": {"input_tokens": 1, "output_tokens": 2}
        }))
        .unwrap();
        assert_eq!(reply.message.content, "Found it.");
    }
}
