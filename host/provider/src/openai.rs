//! OpenAI-compatible Chat Completions: `POST {base_url}/chat/completions`.
//!
//! The request's messages are written by core's OpenAI writer and a whole
//! answer's message is read by core's reader, so a reply stores exactly what
//! a transcript in this format would. A streamed answer is put back together
//! into the message object a whole answer carries and read the same way, so
//! streaming or not gives the same message.
//!
//! Compatible servers differ in small ways, all accepted: reasoning comes as
//! `reasoning_content` (DeepSeek, vLLM) or `reasoning` (OpenRouter, Ollama);
//! a tool call delta may lack its `index` or its `id`; `usage` may come in
//! every chunk or only in the last one.

use std::collections::BTreeMap;

use agent_host_core::format::openai as format;
use agent_host_core::{Role, Usage};
use serde_json::{Map, Value, json};

use super::http::{self, ApiError, HttpRequest, Reply, StreamDecoder, StreamError, Wire};
use super::sse::Event;
use super::{ChatReply, ChatRequest, Provider, ProviderError, StreamEvent};

/// Sends `request` to an OpenAI-compatible server.
pub(super) async fn complete(
    provider: &Provider,
    request: &ChatRequest,
    on_event: &mut (dyn FnMut(StreamEvent) + Send),
) -> Result<ChatReply, ProviderError> {
    let settings = provider.settings();
    let stream = request.stream.unwrap_or(settings.stream);
    let messages = request_messages(&request.messages)?;
    let mut body = Map::new();
    body.insert("model".into(), json!(settings.model));
    body.insert("messages".into(), Value::Array(messages));
    body.insert(
        settings.max_tokens_field.as_str().into(),
        json!(request.max_tokens.unwrap_or(settings.max_tokens)),
    );
    if let Some(t) = request.temperature.or(settings.temperature) {
        body.insert("temperature".into(), super::temperature(t));
    }
    body.insert("stream".into(), json!(stream));
    if stream {
        // Without it the usage never arrives in a stream.
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    let offered = !settings.tools.is_empty() || !request.tools.is_empty();
    if !request.no_tools && offered {
        let tools = settings
            .tools
            .iter()
            .chain(&request.tools)
            .cloned()
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    let mut headers = Vec::new();
    if let Some(key) = &provider.api_key {
        headers.push(("authorization", format!("Bearer {key}")));
    }
    let request = HttpRequest {
        url: format!(
            "{}/chat/completions",
            settings.base_url.trim_end_matches('/')
        ),
        headers,
        body: serde_json::to_vec(&Value::Object(body))
            .map_err(|e| ProviderError::Request(e.to_string()))?,
        stream,
        message_count: request.messages.len(),
    };
    http::exchange::<OpenAi>(provider, request, on_event).await
}

/// `messages` as a Chat Completions request's `messages`. Reasoning stays
/// in the log but is not sent back: Chat Completions has no input field for
/// it, and servers that return it (DeepSeek) refuse it in a request.
pub fn request_messages(
    messages: &[agent_host_core::Message],
) -> Result<Vec<Value>, ProviderError> {
    let mut values =
        format::to_values(messages).map_err(|e| ProviderError::Request(e.to_string()))?;
    for m in &mut values {
        if let Some(object) = m.as_object_mut() {
            object.remove("reasoning_content");
        }
    }
    Ok(values)
}

/// The Chat Completions wire.
pub(super) struct OpenAi;

impl Wire for OpenAi {
    const END_MARKER: &'static str = "`data: [DONE]`";
    type Decoder = Decoder;

    fn parse_reply(body: Value) -> Result<Reply, String> {
        parse_reply(body)
    }
}

fn parse_reply(mut body: Value) -> Result<Reply, String> {
    if let Some(error) = body.get("error").filter(|e| !e.is_null()) {
        let error = ApiError::from_body(200, &json!({ "error": error }).to_string());
        return Err(format!("the answer is an error: {}", error.message));
    }
    let Some(Value::Array(choices)) = body.get_mut("choices") else {
        return Err(
            "the answer has no `choices` array (is base_url an OpenAI-compatible endpoint?)".into(),
        );
    };
    if choices.is_empty() {
        return Err("the answer's `choices` is empty".into());
    }
    let choice = choices.swap_remove(0);
    let stop_reason = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let Some(Value::Object(mut object)) = choice.get("message").cloned() else {
        return Err("`choices[0]` has no `message` object".into());
    };
    tidy(&mut object);
    let mut message = format::from_value(Value::Array(vec![Value::Object(object)]))
        .map_err(|e| format!("`choices[0].message` is not a chat message: {e}"))?
        .pop()
        .ok_or("`choices[0].message` is empty")?;
    if message.role != Role::Assistant {
        return Err(format!(
            "`choices[0].message` has the role `{}`, not `assistant`",
            message.role
        ));
    }
    message.usage = usage(body.get("usage"));
    message.model = body.get("model").and_then(Value::as_str).map(str::to_owned);
    Ok(Reply {
        message: http::stamp(message),
        stop_reason,
    })
}

/// Prepares a reply's message object for core's reader.
///
/// Core keeps fields it has no place for and writes them back with the next
/// request; the ones a server fills with nothing (`refusal: null`, `audio:
/// null`, `tool_calls: []`) or only ever sends (`annotations`) would then go
/// to servers that may refuse them, so they are dropped here.
fn tidy(object: &mut Map<String, Value>) {
    object
        .entry("role")
        .or_insert_with(|| Value::String("assistant".into()));
    // OpenRouter and Ollama say `reasoning` for what core reads as `reasoning_content`.
    if let Some(Value::String(reasoning)) = object.remove("reasoning") {
        let has_content = object
            .get("reasoning_content")
            .and_then(Value::as_str)
            .is_some_and(|r| !r.is_empty());
        if !has_content {
            object.insert("reasoning_content".into(), Value::String(reasoning));
        }
    }
    object.retain(|key, value| {
        let empty = match value {
            Value::Null => true,
            Value::Array(items) => items.is_empty(),
            Value::Object(fields) => fields.is_empty(),
            Value::String(s) => s.is_empty() && key == "reasoning_content",
            _ => false,
        };
        !empty && key != "annotations"
    });
}

fn usage(usage: Option<&Value>) -> Option<Usage> {
    let usage = usage?.as_object()?;
    let count = |v: Option<&Value>| v.and_then(Value::as_u64);
    Some(Usage {
        input_tokens: count(usage.get("prompt_tokens")).unwrap_or(0),
        output_tokens: count(usage.get("completion_tokens")).unwrap_or(0),
        cache_read_tokens: count(
            usage
                .get("prompt_tokens_details")
                .and_then(|d| d.get("cached_tokens")),
        ),
        cache_write_tokens: None,
    })
}

/// A streamed answer being put together.
#[derive(Debug, Default)]
pub(super) struct Decoder {
    text: String,
    reasoning: String,
    /// Tool calls by their `index`; arguments arrive in pieces.
    calls: BTreeMap<u64, PartialCall>,
    stop_reason: Option<String>,
    usage: Option<Value>,
    model: Option<String>,
    done: bool,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
    announced: bool,
}

impl StreamDecoder for Decoder {
    fn event(
        &mut self,
        event: Event,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<(), StreamError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            StreamError::Malformed(format!(
                "a stream event is not JSON ({e}): {}",
                http::truncate(data, 200)
            ))
        })?;
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(StreamError::Api(stream_error(error)));
        }
        if self.model.is_none() {
            self.model = chunk
                .get("model")
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        if chunk.get("usage").is_some_and(Value::is_object) {
            self.usage = chunk.get("usage").cloned();
        }
        let choices = chunk.get("choices").and_then(Value::as_array);
        // With `n` > 1 only the first choice is kept, as in a whole answer.
        let Some(choice) = choices.and_then(|c| {
            c.iter()
                .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        }) else {
            return Ok(());
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.stop_reason = Some(reason.to_owned());
        }
        let Some(delta) = choice.get("delta") else {
            return Ok(());
        };
        let reasoning = ["reasoning_content", "reasoning"]
            .iter()
            .find_map(|key| delta.get(*key).and_then(Value::as_str))
            .filter(|r| !r.is_empty());
        if let Some(reasoning) = reasoning {
            self.reasoning.push_str(reasoning);
            emit(StreamEvent::Reasoning(reasoning.to_owned()));
        }
        if let Some(text) = delta
            .get("content")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            self.text.push_str(text);
            emit(StreamEvent::Text(text.to_owned()));
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                self.tool_call_delta(call, emit);
            }
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn finish(self) -> Result<Reply, String> {
        let mut message = Map::new();
        message.insert("role".into(), json!("assistant"));
        message.insert(
            "content".into(),
            if self.text.is_empty() && !self.calls.is_empty() {
                Value::Null
            } else {
                Value::String(self.text)
            },
        );
        if !self.reasoning.is_empty() {
            message.insert("reasoning_content".into(), Value::String(self.reasoning));
        }
        if !self.calls.is_empty() {
            let calls = self
                .calls
                .into_iter()
                .map(|(index, call)| {
                    if call.name.is_empty() {
                        return Err(format!("the streamed tool call {index} has no name"));
                    }
                    // llama.cpp and some proxies leave the id out; the
                    // tool result still needs one to answer.
                    let id = if call.id.is_empty() {
                        format!("call_{index}")
                    } else {
                        call.id
                    };
                    Ok(json!({"id": id, "type": "function",
                              "function": {"name": call.name, "arguments": call.arguments}}))
                })
                .collect::<Result<Vec<_>, _>>()?;
            message.insert("tool_calls".into(), Value::Array(calls));
        }
        parse_reply(json!({
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.stop_reason}],
            "usage": self.usage,
        }))
    }
}

impl Decoder {
    fn tool_call_delta(&mut self, call: &Value, emit: &mut (dyn FnMut(StreamEvent) + Send)) {
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty());
        let index = match call.get("index").and_then(Value::as_u64) {
            Some(index) => index,
            // No index: a known id continues its call, a new id starts one,
            // neither continues the last call.
            None => match id {
                Some(id) => self
                    .calls
                    .iter()
                    .find(|(_, c)| c.id == id)
                    .map(|(i, _)| *i)
                    .unwrap_or_else(|| self.next_index()),
                None => self.calls.keys().next_back().copied().unwrap_or(0),
            },
        };
        let entry = self.calls.entry(index).or_default();
        if let Some(id) = id {
            id.clone_into(&mut entry.id);
        }
        let function = call.get("function");
        if let Some(name) = function
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            name.clone_into(&mut entry.name);
        }
        match function.and_then(|f| f.get("arguments")) {
            Some(Value::String(piece)) => entry.arguments.push_str(piece),
            // Some servers send the arguments whole, as an object.
            Some(object @ Value::Object(_)) => entry.arguments = object.to_string(),
            _ => {}
        }
        if !entry.announced && !entry.name.is_empty() {
            entry.announced = true;
            emit(StreamEvent::ToolCall {
                name: entry.name.clone(),
            });
        }
    }

    fn next_index(&self) -> u64 {
        self.calls.keys().next_back().map_or(0, |i| i + 1)
    }
}

/// An `error` object inside a stream (OpenRouter and vLLM send one when the
/// upstream fails mid-answer): its `code` is often the HTTP status it stands
/// for; otherwise it counts as a server error.
fn stream_error(error: &Value) -> ApiError {
    let mut api = ApiError::from_body(200, &json!({ "error": error }).to_string());
    api.status = match api.code.as_deref() {
        Some("context_length_exceeded") => 400,
        Some(code) => code
            .parse::<u16>()
            .ok()
            .filter(|s| (400..600).contains(s))
            .unwrap_or(500),
        None => 500,
    };
    api
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(events: &[&str]) -> (Vec<StreamEvent>, Result<Reply, String>) {
        let mut decoder = Decoder::default();
        let mut seen = Vec::new();
        for data in events {
            let event = Event {
                event: String::new(),
                data: (*data).to_owned(),
            };
            if decoder.event(event, &mut |e| seen.push(e)).is_err() {
                panic!("event refused: {data}");
            }
        }
        assert!(decoder.is_done());
        (seen, decoder.finish())
    }

    #[test]
    fn tool_calls_without_index_are_told_apart_by_id() {
        let (seen, reply) = decode(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"ls","arguments":"{\"p\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"cat","arguments":{"f":"x"}}}]},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ]);
        let message = reply.unwrap().message;
        assert_eq!(message.tool_calls.len(), 2);
        assert_eq!(message.tool_calls[0].arguments, r#"{"p":1}"#);
        assert_eq!(message.tool_calls[1].arguments, r#"{"f":"x"}"#);
        assert_eq!(
            seen,
            vec![
                StreamEvent::ToolCall { name: "ls".into() },
                StreamEvent::ToolCall { name: "cat".into() }
            ]
        );
    }

    #[test]
    fn openrouter_reasoning_field_is_reasoning() {
        let (seen, reply) = decode(&[
            r#"{"model":"m","choices":[{"delta":{"reasoning":"think"}}]}"#,
            r#"{"choices":[{"delta":{"content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#,
            "[DONE]",
        ]);
        let message = reply.unwrap().message;
        assert_eq!(message.reasoning.unwrap().text, "think");
        assert_eq!(message.content, "ok");
        assert_eq!(message.usage.unwrap().input_tokens, 3);
        assert_eq!(seen[0], StreamEvent::Reasoning("think".into()));
    }

    #[test]
    fn whole_answers_drop_empty_fields_core_would_send_back() {
        let reply = parse_reply(json!({
            "model": "gpt-x",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": "hi", "refusal": null,
                "annotations": [], "tool_calls": [], "reasoning": "r"}}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 1,
                      "prompt_tokens_details": {"cached_tokens": 4}}
        }))
        .unwrap();
        let m = reply.message;
        assert!(m.metadata.is_empty(), "{:?}", m.metadata);
        assert_eq!(m.reasoning.unwrap().text, "r");
        assert_eq!(m.usage.unwrap().cache_read_tokens, Some(4));
        assert_eq!(m.id, "");
        assert!(m.timestamp.is_some());
        assert_eq!(reply.stop_reason.as_deref(), Some("stop"));
    }

    #[test]
    fn in_stream_errors_carry_their_status() {
        let e = stream_error(&json!({"code": 502, "message": "upstream"}));
        assert_eq!((e.status, e.message.as_str()), (502, "upstream"));
        let e = stream_error(&json!({"code": "context_length_exceeded", "message": "long"}));
        assert_eq!(e.status, 400);
    }
}
