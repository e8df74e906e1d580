//! A client of one wire in front of an upstream of the other: Chat
//! Completions (`POST /v1/chat/completions`) in front of an Anthropic
//! Messages upstream, and Anthropic Messages (`POST /v1/messages`) in front
//! of a Chat Completions one (llama.cpp, vLLM, DeepSeek, Ollama).
//!
//! The view the pipeline and the processors made goes upstream in the
//! upstream's wire, with the request's settings translated (function
//! `tools`, `tool_choice`, parallel tool use, the output limit,
//! `temperature`, `top_p`, stop sequences); the answer comes back in the
//! client's wire, whole or as the server-sent events its SDKs read, with
//! its tool calls and usage. An upstream's error reaches the client with
//! its status, in the client's error shape, its message capped.
//!
//! Left out on the way: reasoning (an Anthropic client takes thinking back
//! only signed by Anthropic; a Chat Completions client has no field for
//! it), and tools of other kinds than functions (Anthropic's server tools,
//! which a Chat Completions server cannot run), which are refused naming
//! the tool.

use agent_host_core::format::anthropic;
use agent_host_core::{Message, Usage};
use agent_host_provider::{ChatReply, ProviderKind, ProviderSettings, StreamEvent};
use axum::body::Bytes;
use chrono::Utc;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::Wire;

/// The most tools a request may define.
const MAX_TOOLS: usize = 512;

/// The longest upstream error message passed on, in bytes.
const MAX_ERROR: usize = 4096;

/// What the client's answer says besides the upstream's.
#[derive(Clone, Debug)]
pub(crate) struct Crossed {
    /// The client's wire.
    pub wire: Wire,
    /// The answer's id (`chatcmpl-...`, `msg_...`).
    pub id: String,
    /// The model, as the client asked for it.
    pub model: String,
    pub created: i64,
    /// Whether a Chat Completions client asked for the usage in its stream
    /// (`stream_options.include_usage`).
    pub stream_usage: bool,
}

impl Crossed {
    pub(crate) fn new(wire: Wire, model: String, request: &Map<String, Value>) -> Crossed {
        let hex = Uuid::new_v4().simple().to_string();
        let id = match wire {
            Wire::AnthropicMessages => format!("msg_{hex}"),
            _ => format!("chatcmpl-{hex}"),
        };
        let stream_usage = request
            .get("stream_options")
            .and_then(|o| o.get("include_usage"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        Crossed {
            wire,
            id,
            model,
            created: Utc::now().timestamp(),
            stream_usage,
        }
    }
}

/// The request for an upstream of `settings`' wire from a `wire` client's
/// `request` and the `view`; `Err` names the field at fault.
pub(crate) fn upstream_body(
    wire: Wire,
    settings: &ProviderSettings,
    request: &Map<String, Value>,
    view: &[Message],
    stream: bool,
) -> Result<Map<String, Value>, String> {
    match (wire, settings.kind) {
        (Wire::ChatCompletions, ProviderKind::Anthropic) => {
            chat_to_anthropic(settings, request, view, stream)
        }
        (Wire::AnthropicMessages, ProviderKind::OpenAi) => {
            messages_to_chat(settings, request, view, stream)
        }
        (wire, kind) => Err(format!(
            "the gateway does not translate {} requests for a {kind} upstream",
            wire.label()
        )),
    }
}

/// Whether a `wire` client's `request` can go to an upstream of
/// `settings`' wire (its tools, tool choice and stop sequences translate),
/// checked before anything of it is stored; `Err` names the field.
pub(crate) fn check(
    wire: Wire,
    settings: &ProviderSettings,
    request: &Map<String, Value>,
) -> Result<(), String> {
    upstream_body(wire, settings, request, &[], false).map(|_| ())
}

fn model_of(settings: &ProviderSettings, request: &Map<String, Value>) -> Value {
    match request.get("model") {
        Some(Value::String(m)) => json!(m),
        _ => json!(settings.model),
    }
}

fn tools_of(request: &Map<String, Value>) -> Result<&[Value], String> {
    match request.get("tools") {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(tools)) if tools.len() > MAX_TOOLS => Err(format!(
            "`tools` holds {} tools; at most {MAX_TOOLS} are accepted",
            tools.len()
        )),
        Some(Value::Array(tools)) => Ok(tools),
        Some(_) => Err("`tools` must be an array".to_owned()),
    }
}

/// A non-empty string `name`.
fn name_of<'a>(tool: &'a Value, at: &str) -> Result<&'a str, String> {
    match tool.get("name") {
        Some(Value::String(name)) if !name.is_empty() => Ok(name),
        _ => Err(format!("`{at}` needs a non-empty string `name`")),
    }
}

fn chat_to_anthropic(
    settings: &ProviderSettings,
    request: &Map<String, Value>,
    view: &[Message],
    stream: bool,
) -> Result<Map<String, Value>, String> {
    let mut body = Map::new();
    body.insert("model".into(), model_of(settings, request));
    let Value::Object(mut written) =
        anthropic::to_request(view).map_err(|e| format!("cannot write the view: {e}"))?
    else {
        return Err("core's Anthropic writer did not give an object".to_owned());
    };
    if let Some(system) = written.remove("system") {
        body.insert("system".into(), system);
    }
    if let Some(Value::Array(messages)) = written.remove("messages") {
        body.insert(
            "messages".into(),
            Value::Array(super::responses::alternating(messages)),
        );
    }
    let max = ["max_completion_tokens", "max_tokens"]
        .iter()
        .find_map(|k| request.get(*k).filter(|v| !v.is_null()).cloned());
    body.insert(
        "max_tokens".into(),
        max.unwrap_or(json!(settings.max_tokens)),
    );
    let functions = tools_of(request)?;
    if !functions.is_empty() {
        let mut tools = Vec::with_capacity(functions.len());
        for (i, t) in functions.iter().enumerate() {
            let at = format!("tools[{i}]");
            match t.get("type").and_then(Value::as_str) {
                Some("function") => {}
                other => {
                    return Err(format!(
                        "`{at}`: tools of type {other:?} cannot go to an Anthropic upstream; only `function` tools can"
                    ));
                }
            }
            let function = t
                .get("function")
                .ok_or_else(|| format!("`{at}` needs a `function`"))?;
            let mut tool = Map::new();
            tool.insert(
                "name".into(),
                json!(name_of(function, &format!("{at}.function"))?),
            );
            if let Some(d) = function.get("description").filter(|v| !v.is_null()) {
                tool.insert("description".into(), d.clone());
            }
            tool.insert(
                "input_schema".into(),
                function
                    .get("parameters")
                    .filter(|v| !v.is_null())
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object"})),
            );
            tools.push(Value::Object(tool));
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    let choice = match request.get("tool_choice") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s == "required" => Some(json!({"type": "any"})),
        Some(Value::String(s)) if s == "none" => Some(json!({"type": "none"})),
        Some(Value::String(s)) if s == "auto" => Some(json!({"type": "auto"})),
        Some(Value::Object(c)) => match c.get("function").and_then(|f| f.get("name")) {
            Some(Value::String(name)) => Some(json!({"type": "tool", "name": name})),
            _ => return Err("`tool_choice` names no `function.name`".to_owned()),
        },
        Some(_) => {
            return Err(
                "`tool_choice` must be \"auto\", \"none\", \"required\" or a function".to_owned(),
            );
        }
    };
    let parallel = request.get("parallel_tool_calls").and_then(Value::as_bool);
    let choice = match (choice, parallel) {
        (Some(mut c), Some(false)) if c["type"] != "none" => {
            c["disable_parallel_tool_use"] = json!(true);
            Some(c)
        }
        (None, Some(false)) if !functions.is_empty() => {
            Some(json!({"type": "auto", "disable_parallel_tool_use": true}))
        }
        (c, _) => c,
    };
    if let Some(choice) = choice {
        body.insert("tool_choice".into(), choice);
    }
    for key in ["temperature", "top_p"] {
        if let Some(v) = request.get(key).filter(|v| !v.is_null()) {
            body.insert(key.into(), v.clone());
        }
    }
    match request.get("stop") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => {
            body.insert("stop_sequences".into(), json!([s]));
        }
        Some(Value::Array(all)) if all.iter().all(Value::is_string) => {
            body.insert("stop_sequences".into(), Value::Array(all.clone()));
        }
        Some(_) => return Err("`stop` must be a string or an array of strings".to_owned()),
    }
    super::place_cache_breakpoints(&mut body);
    if stream {
        body.insert("stream".into(), json!(true));
    }
    Ok(body)
}

fn messages_to_chat(
    settings: &ProviderSettings,
    request: &Map<String, Value>,
    view: &[Message],
    stream: bool,
) -> Result<Map<String, Value>, String> {
    let mut body = Map::new();
    body.insert("model".into(), model_of(settings, request));
    let messages = agent_host_provider::chat_request_messages(view)
        .map_err(|e| format!("cannot write the view: {e}"))?;
    body.insert("messages".into(), Value::Array(messages));
    if let Some(max) = request.get("max_tokens").filter(|v| !v.is_null()) {
        body.insert(settings.max_tokens_field.as_str().into(), max.clone());
    }
    let defined = tools_of(request)?;
    if !defined.is_empty() {
        let mut tools = Vec::with_capacity(defined.len());
        for (i, t) in defined.iter().enumerate() {
            let at = format!("tools[{i}]");
            match t.get("type").and_then(Value::as_str) {
                None | Some("custom") => {}
                Some(other) => {
                    return Err(format!(
                        "`{at}`: the tool of type {other:?} is one Anthropic runs; a Chat Completions upstream cannot, so only client tools (with an `input_schema`) can go to it"
                    ));
                }
            }
            let mut function = Map::new();
            function.insert("name".into(), json!(name_of(t, &at)?));
            if let Some(d) = t.get("description").filter(|v| !v.is_null()) {
                function.insert("description".into(), d.clone());
            }
            function.insert(
                "parameters".into(),
                t.get("input_schema")
                    .filter(|v| !v.is_null())
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object"})),
            );
            tools.push(json!({"type": "function", "function": function}));
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(choice) = request.get("tool_choice").filter(|v| !v.is_null()) {
        let kind = choice.get("type").and_then(Value::as_str);
        let written = match kind {
            Some("auto") => json!("auto"),
            Some("any") => json!("required"),
            Some("none") => json!("none"),
            Some("tool") => match choice.get("name") {
                Some(Value::String(name)) => {
                    json!({"type": "function", "function": {"name": name}})
                }
                _ => return Err("`tool_choice` of type `tool` needs a `name`".to_owned()),
            },
            _ => {
                return Err(
                    "`tool_choice.type` must be \"auto\", \"any\", \"tool\" or \"none\"".to_owned(),
                );
            }
        };
        body.insert("tool_choice".into(), written);
        if choice.get("disable_parallel_tool_use") == Some(&json!(true)) && !defined.is_empty() {
            body.insert("parallel_tool_calls".into(), json!(false));
        }
    }
    for key in ["temperature", "top_p"] {
        if let Some(v) = request.get(key).filter(|v| !v.is_null()) {
            body.insert(key.into(), v.clone());
        }
    }
    match request.get("stop_sequences") {
        None | Some(Value::Null) => {}
        Some(Value::Array(all)) if all.iter().all(Value::is_string) => {
            if !all.is_empty() {
                body.insert("stop".into(), Value::Array(all.clone()));
            }
        }
        Some(_) => return Err("`stop_sequences` must be an array of strings".to_owned()),
    }
    if stream {
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Ok(body)
}

/// Chat Completions' `finish_reason` for an upstream's stop reason.
fn finish_reason(reply: &ChatReply) -> &'static str {
    if !reply.message.tool_calls.is_empty() {
        return "tool_calls";
    }
    match reply.stop_reason.as_deref() {
        Some("max_tokens" | "length" | "model_context_window_exceeded") => "length",
        Some("refusal" | "content_filter") => "content_filter",
        _ => "stop",
    }
}

/// Anthropic's `stop_reason` for an upstream's finish reason.
fn stop_reason(reply: &ChatReply) -> &'static str {
    if !reply.message.tool_calls.is_empty() {
        return "tool_use";
    }
    match reply.stop_reason.as_deref() {
        Some("length" | "max_tokens") => "max_tokens",
        Some("content_filter" | "refusal") => "refusal",
        Some("stop_sequence") => "stop_sequence",
        _ => "end_turn",
    }
}

fn chat_usage(usage: &Usage) -> Value {
    json!({
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens.unwrap_or(0)},
    })
}

fn anthropic_usage(usage: Option<&Usage>) -> Value {
    let usage = usage.copied().unwrap_or_default();
    json!({
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens.unwrap_or(0),
        "cache_creation_input_tokens": usage.cache_write_tokens.unwrap_or(0),
    })
}

/// A tool call's arguments as the object Anthropic's `input` is: `{}` for
/// none, the arguments parsed when they are an object, else
/// `{"arguments": TEXT}` (the stored answer keeps them as sent).
fn tool_input(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(input)) => Value::Object(input),
        _ => json!({ "arguments": arguments }),
    }
}

/// The client's whole answer for `reply`.
pub(crate) fn whole(crossed: &Crossed, reply: &ChatReply) -> Value {
    let m = &reply.message;
    let text = m.text();
    match crossed.wire {
        Wire::AnthropicMessages => {
            let mut content = Vec::new();
            if !text.is_empty() {
                content.push(json!({"type": "text", "text": text}));
            }
            for call in &m.tool_calls {
                content.push(json!({"type": "tool_use", "id": call.id, "name": call.name,
                                    "input": tool_input(&call.arguments)}));
            }
            json!({
                "id": crossed.id, "type": "message", "role": "assistant",
                "model": crossed.model, "content": content,
                "stop_reason": stop_reason(reply), "stop_sequence": null,
                "usage": anthropic_usage(m.usage.as_ref()),
            })
        }
        _ => {
            let mut message = Map::new();
            message.insert("role".into(), json!("assistant"));
            message.insert(
                "content".into(),
                if text.is_empty() && !m.tool_calls.is_empty() {
                    Value::Null
                } else {
                    json!(text)
                },
            );
            message.insert("refusal".into(), Value::Null);
            if !m.tool_calls.is_empty() {
                let calls: Vec<Value> = m
                    .tool_calls
                    .iter()
                    .map(|c| {
                        json!({"id": c.id, "type": "function",
                               "function": {"name": c.name, "arguments": c.arguments}})
                    })
                    .collect();
                message.insert("tool_calls".into(), Value::Array(calls));
            }
            let mut object = json!({
                "id": crossed.id, "object": "chat.completion", "created": crossed.created,
                "model": crossed.model,
                "choices": [{"index": 0, "message": message, "logprobs": null,
                             "finish_reason": finish_reason(reply)}],
            });
            if let Some(usage) = &m.usage {
                object["usage"] = chat_usage(usage);
            }
            object
        }
    }
}

/// An upstream's error body (either wire's shape, or any text) in the
/// shape the client's SDKs read.
pub(crate) fn error_body(wire: Wire, body: &[u8]) -> Value {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let mut message = error
        .and_then(|e| {
            e.get("message")
                .and_then(Value::as_str)
                .or_else(|| e.as_str())
        })
        .map(str::to_owned)
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    if message.len() > MAX_ERROR {
        let mut end = MAX_ERROR;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push_str(" [cut]");
    }
    let kind = error
        .and_then(|e| e.get("type"))
        .and_then(Value::as_str)
        .filter(|k| k.len() <= 64)
        .unwrap_or(match wire {
            Wire::AnthropicMessages => "api_error",
            _ => "upstream_error",
        })
        .to_owned();
    match wire {
        Wire::AnthropicMessages => {
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
        _ => json!({"error": {"message": message, "type": kind, "param": null, "code": null}}),
    }
}

/// Turns an upstream's streamed answer into the client's events.
pub(crate) struct Streamer {
    crossed: Crossed,
    started: bool,
    /// Whether text went out (an Anthropic client's text block is open).
    said: bool,
}

impl Streamer {
    pub(crate) fn new(crossed: Crossed) -> Streamer {
        Streamer {
            crossed,
            started: false,
            said: false,
        }
    }

    fn anthropic(out: &mut Vec<u8>, kind: &str, data: Value) {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b"\ndata: ");
        out.extend_from_slice(&serde_json::to_vec(&data).unwrap_or_default());
        out.extend_from_slice(b"\n\n");
    }

    fn data(out: &mut Vec<u8>, data: &Value) {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(&serde_json::to_vec(data).unwrap_or_default());
        out.extend_from_slice(b"\n\n");
    }

    /// A Chat Completions chunk with `delta` and `finish_reason`.
    fn chunk(&self, delta: Value, finish: Option<&str>) -> Value {
        json!({
            "id": self.crossed.id, "object": "chat.completion.chunk",
            "created": self.crossed.created, "model": self.crossed.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        })
    }

    fn start(&mut self, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        match self.crossed.wire {
            Wire::AnthropicMessages => {
                let message = json!({
                    "id": self.crossed.id, "type": "message", "role": "assistant",
                    "model": self.crossed.model, "content": [], "stop_reason": null,
                    "stop_sequence": null, "usage": anthropic_usage(None),
                });
                Self::anthropic(
                    out,
                    "message_start",
                    json!({"type": "message_start", "message": message}),
                );
            }
            _ => {
                let first = self.chunk(json!({"role": "assistant", "content": ""}), None);
                Self::data(out, &first);
            }
        }
    }

    fn text(&mut self, out: &mut Vec<u8>, delta: &str) {
        match self.crossed.wire {
            Wire::AnthropicMessages => {
                if !self.said {
                    Self::anthropic(
                        out,
                        "content_block_start",
                        json!({"type": "content_block_start", "index": 0,
                               "content_block": {"type": "text", "text": ""}}),
                    );
                }
                Self::anthropic(
                    out,
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0,
                           "delta": {"type": "text_delta", "text": delta}}),
                );
            }
            _ => {
                let chunk = self.chunk(json!({ "content": delta }), None);
                Self::data(out, &chunk);
            }
        }
        self.said = true;
    }

    /// The events for what the upstream sent since the last call.
    pub(crate) fn feed(&mut self, events: Vec<StreamEvent>) -> Bytes {
        let mut out = Vec::new();
        self.start(&mut out);
        for event in events {
            if let StreamEvent::Text(delta) = event
                && !delta.is_empty()
            {
                self.text(&mut out, &delta);
            }
        }
        Bytes::from(out)
    }

    /// The last events: text the upstream sent in no delta, the tool
    /// calls, why it stopped, the usage and the end.
    pub(crate) fn finish(&mut self, reply: &ChatReply) -> Bytes {
        let mut out = Vec::new();
        self.start(&mut out);
        let m = &reply.message;
        if !self.said {
            let text = m.text();
            if !text.is_empty() {
                self.text(&mut out, &text);
            }
        }
        match self.crossed.wire {
            Wire::AnthropicMessages => {
                let mut index = 0;
                if self.said {
                    Self::anthropic(
                        &mut out,
                        "content_block_stop",
                        json!({"type": "content_block_stop", "index": 0}),
                    );
                    index = 1;
                }
                for call in &m.tool_calls {
                    Self::anthropic(
                        &mut out,
                        "content_block_start",
                        json!({"type": "content_block_start", "index": index,
                               "content_block": {"type": "tool_use", "id": call.id,
                                                 "name": call.name, "input": {}}}),
                    );
                    let input = tool_input(&call.arguments).to_string();
                    Self::anthropic(
                        &mut out,
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": index,
                               "delta": {"type": "input_json_delta", "partial_json": input}}),
                    );
                    Self::anthropic(
                        &mut out,
                        "content_block_stop",
                        json!({"type": "content_block_stop", "index": index}),
                    );
                    index += 1;
                }
                Self::anthropic(
                    &mut out,
                    "message_delta",
                    json!({"type": "message_delta",
                           "delta": {"stop_reason": stop_reason(reply), "stop_sequence": null},
                           "usage": anthropic_usage(m.usage.as_ref())}),
                );
                Self::anthropic(&mut out, "message_stop", json!({"type": "message_stop"}));
            }
            _ => {
                if !m.tool_calls.is_empty() {
                    let calls: Vec<Value> = m
                        .tool_calls
                        .iter()
                        .enumerate()
                        .map(|(i, c)| {
                            json!({"index": i, "id": c.id, "type": "function",
                                   "function": {"name": c.name, "arguments": c.arguments}})
                        })
                        .collect();
                    let chunk = self.chunk(json!({ "tool_calls": calls }), None);
                    Self::data(&mut out, &chunk);
                }
                let last = self.chunk(json!({}), Some(finish_reason(reply)));
                Self::data(&mut out, &last);
                if self.crossed.stream_usage
                    && let Some(usage) = &m.usage
                {
                    let mut chunk = self.chunk(json!({}), None);
                    chunk["choices"] = json!([]);
                    chunk["usage"] = chat_usage(usage);
                    Self::data(&mut out, &chunk);
                }
                out.extend_from_slice(b"data: [DONE]\n\n");
            }
        }
        Bytes::from(out)
    }

    /// The events of a stream that broke: an error event the SDKs raise.
    pub(crate) fn fail(&mut self, message: &str) -> Bytes {
        let mut out = Vec::new();
        self.start(&mut out);
        match self.crossed.wire {
            Wire::AnthropicMessages => Self::anthropic(
                &mut out,
                "error",
                json!({"type": "error", "error": {"type": "api_error", "message": message}}),
            ),
            _ => Self::data(
                &mut out,
                &json!({"error": {"message": message, "type": "server_error", "param": null, "code": null}}),
            ),
        }
        Bytes::from(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply_with_call() -> ChatReply {
        let mut message = Message::assistant("Looking.");
        message.tool_calls.push(agent_host_core::ToolCall {
            id: "call_1".into(),
            name: "read_file".into(),
            arguments: r#"{"path": "a.rs"}"#.into(),
        });
        message.usage = Some(Usage {
            input_tokens: 10,
            output_tokens: 3,
            ..Usage::default()
        });
        ChatReply {
            message,
            stop_reason: Some("tool_use".into()),
            attempts: 1,
        }
    }

    #[test]
    fn a_chat_client_reads_an_anthropic_answer_with_its_tool_calls_and_usage() {
        let crossed = Crossed::new(Wire::ChatCompletions, "claude-x".into(), &Map::new());
        let answer = whole(&crossed, &reply_with_call());
        assert_eq!(answer["object"], "chat.completion");
        assert_eq!(answer["choices"][0]["finish_reason"], "tool_calls");
        let call = &answer["choices"][0]["message"]["tool_calls"][0];
        assert_eq!(call["function"]["name"], "read_file");
        assert_eq!(call["function"]["arguments"], r#"{"path": "a.rs"}"#);
        assert_eq!(answer["usage"]["total_tokens"], 13);
    }

    #[test]
    fn a_messages_client_reads_a_chat_answer_and_its_stream() {
        let crossed = Crossed::new(Wire::AnthropicMessages, "llama".into(), &Map::new());
        let answer = whole(&crossed, &reply_with_call());
        assert_eq!(answer["stop_reason"], "tool_use");
        assert_eq!(answer["content"][1]["input"]["path"], "a.rs");
        assert_eq!(answer["usage"]["output_tokens"], 3);
        let mut streamer = Streamer::new(crossed);
        let mut bytes = streamer
            .feed(vec![StreamEvent::Text("Look".into())])
            .to_vec();
        bytes.extend_from_slice(&streamer.finish(&reply_with_call()));
        let text = String::from_utf8(bytes).unwrap();
        let kinds: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("event: "))
            .collect();
        assert_eq!(
            kinds,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
    }

    #[test]
    fn server_tools_cannot_go_to_a_chat_upstream() {
        let settings = ProviderSettings::new(ProviderKind::OpenAi, "m");
        let request = json!({"tools": [{"name": "a", "input_schema": {}},
                                       {"type": "web_search_20250305", "name": "web_search"}]});
        let e = upstream_body(
            Wire::AnthropicMessages,
            &settings,
            request.as_object().unwrap(),
            &[Message::user("hi")],
            false,
        )
        .unwrap_err();
        assert!(e.contains("`tools[1]`") && e.contains("web_search"), "{e}");
    }

    #[test]
    fn upstream_errors_are_capped_in_the_clients_shape() {
        let long = "x".repeat(10_000);
        let body = json!({"error": {"message": long, "type": "invalid_request_error"}});
        let e = error_body(Wire::AnthropicMessages, body.to_string().as_bytes());
        assert_eq!(e["type"], "error");
        assert_eq!(e["error"]["type"], "invalid_request_error");
        assert!(e["error"]["message"].as_str().unwrap().len() < 4200);
        let e = error_body(Wire::ChatCompletions, b"<html>bad gateway</html>");
        assert_eq!(e["error"]["message"], "<html>bad gateway</html>");
    }
}
