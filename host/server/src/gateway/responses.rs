//! OpenAI Responses (`POST /v1/responses`) in front of an upstream that
//! speaks Chat Completions or Anthropic Messages.
//!
//! The request's `instructions` and `input` items are read with core's
//! Responses reader ([`agent_host_core::format::responses`]); the view the
//! pipeline and the processors made goes upstream in the upstream's wire,
//! with the request's settings translated (`tools` of type `function`,
//! `tool_choice`, `max_output_tokens`, `temperature`, `top_p`,
//! `parallel_tool_calls`, `text.format`, `reasoning.effort`); the answer
//! comes back as a Responses object, or, streamed, as the event sequence
//! the official SDKs read (`response.created`, `response.in_progress`,
//! `response.output_item.added`, `response.content_part.added`,
//! `response.output_text.delta` ... `response.completed`, each with its
//! `sequence_number`).
//!
//! A response's id (`resp_` and 48 hex digits) holds its session's id, so
//! `previous_response_id` finds the session again after a restart; the
//! newest response of each session is remembered ([`Latest`]) so that
//! continuing from an older one (a fork, which would silently carry the
//! newer turns along) is refused rather than answered wrongly. A request
//! with `store: false` keeps nothing: its answer's id (`resp_` and 32 hex
//! digits) names no session and cannot be continued.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use agent_host_core::format::{anthropic, responses};
use agent_host_core::{Message, Role};
use agent_host_provider::{ChatReply, ProviderKind, ProviderSettings, StreamEvent};
use axum::body::Bytes;
use chrono::Utc;
use serde_json::{Map, Value, json};
use uuid::Uuid;

/// The most items `input` may hold.
pub(crate) const MAX_ITEMS: usize = 100_000;

/// The most tools a request may define.
const MAX_TOOLS: usize = 512;

/// What a Responses request asks for beyond its messages.
#[derive(Clone, Debug, Default)]
pub(crate) struct Ask {
    /// `instructions`, as a system message put before the input.
    pub leading: Option<Message>,
    /// `previous_response_id`.
    pub previous: Option<String>,
    /// `conversation` (its id).
    pub conversation: Option<String>,
    /// The fields echoed in the response object.
    pub echo: Map<String, Value>,
}

impl Ask {
    /// Whether the client sends only what is new (it continues a response
    /// or a conversation), rather than its whole history.
    pub(crate) fn appends(&self) -> bool {
        self.previous.is_some() || self.conversation.is_some()
    }
}

/// The request fields a response object echoes.
const ECHOED: [&str; 10] = [
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "temperature",
    "top_p",
    "max_output_tokens",
    "metadata",
    "store",
    "text",
];

/// What a response object says of an echoed field the request left out.
fn echo_default(key: &str) -> Value {
    match key {
        "tools" => json!([]),
        "tool_choice" => json!("auto"),
        "parallel_tool_calls" | "store" => json!(true),
        "metadata" => json!({}),
        "text" => json!({"format": {"type": "text"}}),
        _ => Value::Null,
    }
}

/// Reads a Responses request's own fields; `Err` names the field (and the
/// item's index in `input`).
pub(crate) fn read(body: &Map<String, Value>) -> Result<(Vec<Message>, Ask), String> {
    let mut ask = Ask::default();
    let input = match body.get("input") {
        None | Some(Value::Null) => return Err("`input` is missing".to_owned()),
        Some(Value::String(text)) => {
            vec![json!({"type": "message", "role": "user", "content": text})]
        }
        Some(Value::Array(items)) => {
            if items.len() > MAX_ITEMS {
                return Err(format!(
                    "`input` holds {} items; at most {MAX_ITEMS} are accepted",
                    items.len()
                ));
            }
            for (index, item) in items.iter().enumerate() {
                check_item(item).map_err(|e| format!("`input[{index}]`: {e}"))?;
            }
            items.clone()
        }
        Some(other) => {
            return Err(format!(
                "`input` must be a string or an array of items, found {}",
                agent_host_core::format::kind_of(other)
            ));
        }
    };
    let messages =
        responses::from_value(json!({ "input": input })).map_err(|e| format!("`input`: {e}"))?;
    if messages.is_empty() {
        return Err("`input` holds no message".to_owned());
    }
    match body.get("instructions") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) if text.is_empty() => {}
        Some(Value::String(text)) => ask.leading = Some(Message::system(text.clone())),
        Some(_) => {
            return Err(
                "`instructions` must be a string (instructions as items go in `input`)".to_owned(),
            );
        }
    }
    ask.previous = match body.get("previous_response_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) if session_of(id).is_some() => Some(id.clone()),
        Some(Value::String(id)) => {
            return Err(format!(
                "`previous_response_id` {:?} is no stored response of this gateway (its ids are `resp_` and 48 hex digits); a response made with `store: false` cannot be continued: send the whole conversation as `input`",
                shortened(id)
            ));
        }
        Some(_) => return Err("`previous_response_id` must be a string".to_owned()),
    };
    ask.conversation = match body.get("conversation") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) if !id.is_empty() => Some(id.clone()),
        Some(Value::Object(c)) => match c.get("id") {
            Some(Value::String(id)) if !id.is_empty() => Some(id.clone()),
            _ => return Err("`conversation.id` must be a non-empty string".to_owned()),
        },
        Some(_) => {
            return Err(
                "`conversation` must be a conversation id or an object with an `id`".to_owned(),
            );
        }
    };
    if ask.previous.is_some() && ask.conversation.is_some() {
        return Err(
            "`previous_response_id` and `conversation` cannot both be given: each names the conversation to continue"
                .to_owned(),
        );
    }
    if matches!(body.get("background"), Some(Value::Bool(true))) {
        return Err(
            "`background`: background responses are not supported by this gateway".to_owned(),
        );
    }
    match body.get("tools") {
        None | Some(Value::Null) => {}
        Some(Value::Array(tools)) => {
            if tools.len() > MAX_TOOLS {
                return Err(format!(
                    "`tools` holds {} tools; at most {MAX_TOOLS} are accepted",
                    tools.len()
                ));
            }
            for (index, tool) in tools.iter().enumerate() {
                check_tool(tool).map_err(|e| format!("`tools[{index}]`: {e}"))?;
            }
        }
        Some(_) => return Err("`tools` must be an array".to_owned()),
    }
    for key in ECHOED {
        let value = body.get(key).filter(|v| !v.is_null()).cloned();
        ask.echo
            .insert(key.to_owned(), value.unwrap_or_else(|| echo_default(key)));
    }
    Ok((messages, ask))
}

/// What core's reader does not check of an item: it is an object, and a
/// function call has a string `call_id`, `name` and `arguments`.
fn check_item(item: &Value) -> Result<(), String> {
    let Value::Object(item) = item else {
        return Err(format!(
            "an item must be an object, found {}",
            agent_host_core::format::kind_of(item)
        ));
    };
    let kind = item.get("type").and_then(Value::as_str);
    let strings: &[&str] = match kind {
        Some("function_call") => &["call_id", "name", "arguments"],
        Some("function_call_output") => &["call_id"],
        _ => &[],
    };
    for field in strings {
        match item.get(*field) {
            Some(Value::String(s)) if !s.is_empty() || *field == "arguments" => {}
            _ => {
                return Err(format!(
                    "a `{}` item needs a string `{field}`",
                    kind.unwrap_or_default()
                ));
            }
        }
    }
    if kind == Some("function_call_output")
        && !matches!(item.get("output"), Some(Value::String(_) | Value::Array(_)))
    {
        return Err("a `function_call_output` item needs an `output` string or parts".to_owned());
    }
    Ok(())
}

fn check_tool(tool: &Value) -> Result<(), String> {
    match tool.get("type").and_then(Value::as_str) {
        Some("function") => match tool.get("name") {
            Some(Value::String(name)) if !name.is_empty() => Ok(()),
            _ => Err("a function tool needs a non-empty string `name`".to_owned()),
        },
        Some(_) => Ok(()),
        None => Err("a tool needs a string `type`".to_owned()),
    }
}

/// Whether a request's tools can be translated to another wire: only
/// `function` tools can (the built-in ones, `web_search` and the like,
/// exist only where the upstream serves Responses itself).
pub(crate) fn check_translatable(body: &Map<String, Value>) -> Result<(), String> {
    let tools = body.get("tools").and_then(Value::as_array);
    for (index, tool) in tools.into_iter().flatten().enumerate() {
        let kind = tool.get("type").and_then(Value::as_str).unwrap_or_default();
        if kind != "function" {
            return Err(format!(
                "`tools[{index}]`: tools of type `{kind}` are not supported in front of an upstream that does not serve OpenAI Responses itself; only `function` tools are translated (mark an upstream that serves it `responses = true`)"
            ));
        }
    }
    Ok(())
}

/// The request for an upstream that serves Responses itself: the client's
/// own fields, with the view as its `input` (its instructions among it, as
/// the system message they became) and nothing that would make the
/// upstream add a conversation of its own (`previous_response_id`,
/// `conversation`): the gateway sends the whole view each time, so the
/// upstream keeps nothing (`store: false`) and hands back its reasoning
/// encrypted (`include: ["reasoning.encrypted_content"]`) for the next
/// request to carry.
pub(crate) fn native_body(
    request: &Map<String, Value>,
    view: &[Message],
) -> Result<Map<String, Value>, String> {
    const DROPPED: [&str; 5] = [
        "input",
        "instructions",
        "previous_response_id",
        "conversation",
        "store",
    ];
    let mut body: Map<String, Value> = request
        .iter()
        .filter(|(key, _)| !DROPPED.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    let items = responses::to_items(view).map_err(|e| format!("cannot write the view: {e}"))?;
    body.insert("input".into(), Value::Array(items));
    body.insert("store".into(), json!(false));
    let include = body.entry("include").or_insert_with(|| json!([]));
    if let Some(include) = include.as_array_mut()
        && !include.iter().any(|i| i == "reasoning.encrypted_content")
    {
        include.push(json!("reasoning.encrypted_content"));
    }
    Ok(body)
}

/// The session a response id of this gateway holds.
pub(crate) fn session_of(response_id: &str) -> Option<Uuid> {
    let hex = response_id.strip_prefix("resp_")?;
    if hex.len() != 48 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Uuid::try_parse(&hex[..32]).ok()
}

/// A new response id: in `session`'s, or of none (a request passed through,
/// which cannot be continued).
pub(crate) fn new_id(session: Option<Uuid>) -> String {
    let random = Uuid::new_v4().simple().to_string();
    match session {
        Some(session) => format!("resp_{}{}", session.simple(), &random[..16]),
        None => format!("resp_{random}"),
    }
}

fn shortened(text: &str) -> String {
    let mut end = text.len().min(80);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// The newest response of each session, to refuse continuing an older one.
#[derive(Default)]
pub(crate) struct Latest {
    newest: Mutex<HashMap<Uuid, String>>,
}

impl Latest {
    /// Remembers `id` as `session`'s newest response.
    pub(crate) fn set(&self, session: Uuid, id: String) {
        let mut newest = self.newest.lock().unwrap_or_else(PoisonError::into_inner);
        newest.insert(session, id);
    }

    /// `session`'s newest response, if this process answered one.
    pub(crate) fn get(&self, session: Uuid) -> Option<String> {
        let newest = self.newest.lock().unwrap_or_else(PoisonError::into_inner);
        newest.get(&session).cloned()
    }

    /// Forgets a deleted session.
    pub(crate) fn forget(&self, session: Uuid) {
        let mut newest = self.newest.lock().unwrap_or_else(PoisonError::into_inner);
        newest.remove(&session);
    }
}

/// The request body for `settings`' wire: the view, and the Responses
/// request's settings translated.
pub(crate) fn upstream_body(
    settings: &ProviderSettings,
    request: &Map<String, Value>,
    view: &[Message],
    stream: bool,
) -> Result<Map<String, Value>, String> {
    let mut body = Map::new();
    let model = match request.get("model") {
        Some(Value::String(m)) => m.clone(),
        _ => settings.model.clone(),
    };
    body.insert("model".into(), json!(model));
    let functions = request
        .get("tools")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let max_output = request.get("max_output_tokens").filter(|v| !v.is_null());
    match settings.kind {
        ProviderKind::OpenAi => {
            let messages = agent_host_provider::chat_request_messages(view)
                .map_err(|e| format!("cannot write the view: {e}"))?;
            body.insert("messages".into(), Value::Array(messages));
            if !functions.is_empty() {
                let tools = functions
                    .iter()
                    .map(|t| {
                        let mut function = Map::new();
                        for key in ["name", "description", "parameters", "strict"] {
                            if let Some(v) = t.get(key).filter(|v| !v.is_null()) {
                                function.insert(key.into(), v.clone());
                            }
                        }
                        json!({"type": "function", "function": function})
                    })
                    .collect();
                body.insert("tools".into(), Value::Array(tools));
            }
            if let Some(choice) = request.get("tool_choice").filter(|v| !v.is_null()) {
                let choice = match choice.get("name") {
                    Some(name) => json!({"type": "function", "function": {"name": name}}),
                    None => choice.clone(),
                };
                body.insert("tool_choice".into(), choice);
            }
            for key in ["parallel_tool_calls", "temperature", "top_p"] {
                if let Some(v) = request.get(key).filter(|v| !v.is_null()) {
                    body.insert(key.into(), v.clone());
                }
            }
            if let Some(max) = max_output {
                body.insert(settings.max_tokens_field.as_str().into(), max.clone());
            }
            if let Some(effort) = request.get("reasoning").and_then(|r| r.get("effort"))
                && !effort.is_null()
            {
                body.insert("reasoning_effort".into(), effort.clone());
            }
            if let Some(format) = request.get("text").and_then(|t| t.get("format")) {
                match format.get("type").and_then(Value::as_str) {
                    Some("json_schema") => {
                        let mut schema = Map::new();
                        for key in ["name", "description", "schema", "strict"] {
                            if let Some(v) = format.get(key).filter(|v| !v.is_null()) {
                                schema.insert(key.into(), v.clone());
                            }
                        }
                        body.insert(
                            "response_format".into(),
                            json!({"type": "json_schema", "json_schema": schema}),
                        );
                    }
                    Some("json_object") => {
                        body.insert("response_format".into(), json!({"type": "json_object"}));
                    }
                    _ => {}
                }
            }
            if stream {
                body.insert("stream".into(), json!(true));
                body.insert("stream_options".into(), json!({"include_usage": true}));
            }
        }
        ProviderKind::Anthropic => {
            let Value::Object(mut written) =
                anthropic::to_request(view).map_err(|e| format!("cannot write the view: {e}"))?
            else {
                return Err("core's Anthropic writer did not give an object".to_owned());
            };
            if let Some(system) = written.remove("system") {
                body.insert("system".into(), system);
            }
            if let Some(Value::Array(messages)) = written.remove("messages") {
                body.insert("messages".into(), Value::Array(alternating(messages)));
            }
            body.insert(
                "max_tokens".into(),
                max_output.cloned().unwrap_or(json!(settings.max_tokens)),
            );
            if !functions.is_empty() {
                let tools = functions
                    .iter()
                    .map(|t| {
                        let mut tool = Map::new();
                        tool.insert("name".into(), t["name"].clone());
                        if let Some(d) = t.get("description").filter(|v| !v.is_null()) {
                            tool.insert("description".into(), d.clone());
                        }
                        tool.insert(
                            "input_schema".into(),
                            t.get("parameters")
                                .filter(|v| !v.is_null())
                                .cloned()
                                .unwrap_or_else(|| json!({"type": "object"})),
                        );
                        Value::Object(tool)
                    })
                    .collect();
                body.insert("tools".into(), Value::Array(tools));
            }
            let parallel = request.get("parallel_tool_calls").and_then(Value::as_bool);
            let choice = match request.get("tool_choice") {
                Some(Value::String(s)) if s == "required" => Some(json!({"type": "any"})),
                Some(Value::String(s)) if s == "none" => Some(json!({"type": "none"})),
                Some(Value::String(s)) if s == "auto" => Some(json!({"type": "auto"})),
                Some(Value::Object(c)) => c
                    .get("name")
                    .map(|name| json!({"type": "tool", "name": name})),
                _ => None,
            };
            let choice = match (choice, parallel) {
                (Some(mut c), Some(false)) => {
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
            super::place_cache_breakpoints(&mut body);
            if stream {
                body.insert("stream".into(), json!(true));
            }
        }
    }
    Ok(body)
}

/// Anthropic messages with each run of one role joined into one message
/// (a Responses input may hold several user messages in a row, which older
/// Anthropic-compatible servers refuse).
pub(crate) fn alternating(messages: Vec<Value>) -> Vec<Value> {
    let blocks = |content: Value| match content {
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        Value::Array(blocks) => blocks,
        other => vec![other],
    };
    let mut out: Vec<Value> = Vec::with_capacity(messages.len());
    for mut m in messages {
        let role = m.get("role").cloned();
        match out.last_mut() {
            Some(last) if role.is_some() && last.get("role") == role.as_ref() => {
                let mut joined = blocks(last["content"].take());
                joined.extend(blocks(m["content"].take()));
                last["content"] = Value::Array(joined);
            }
            _ => out.push(m),
        }
    }
    out
}

/// A response object's parts known before the answer.
#[derive(Clone, Debug)]
pub(crate) struct Skeleton {
    pub id: String,
    pub created_at: i64,
    pub model: String,
    pub previous: Option<String>,
    pub conversation: Option<String>,
    pub echo: Map<String, Value>,
}

impl Skeleton {
    pub(crate) fn new(ask: &Ask, model: String, id: String) -> Skeleton {
        Skeleton {
            id,
            created_at: Utc::now().timestamp(),
            model,
            previous: ask.previous.clone(),
            conversation: ask.conversation.clone(),
            echo: ask.echo.clone(),
        }
    }

    /// The response object with `output`, its `status` and `usage`.
    fn object(&self, status: &str, output: Vec<Value>, reply: Option<&ChatReply>) -> Value {
        let mut object = Map::new();
        object.insert("id".into(), json!(self.id));
        object.insert("object".into(), json!("response"));
        object.insert("created_at".into(), json!(self.created_at));
        object.insert("status".into(), json!(status));
        object.insert("background".into(), json!(false));
        object.insert("error".into(), Value::Null);
        let incomplete = reply
            .and_then(|r| r.stop_reason.as_deref())
            .is_some_and(|s| matches!(s, "length" | "max_tokens"));
        object.insert(
            "incomplete_details".into(),
            if incomplete && status == "incomplete" {
                json!({"reason": "max_output_tokens"})
            } else {
                Value::Null
            },
        );
        object.insert("model".into(), json!(self.model));
        object.insert("output".into(), Value::Array(output));
        object.insert("previous_response_id".into(), json!(self.previous));
        object.insert(
            "conversation".into(),
            self.conversation
                .as_ref()
                .map_or(Value::Null, |id| json!({ "id": id })),
        );
        for (key, value) in &self.echo {
            object.insert(key.clone(), value.clone());
        }
        object.insert("truncation".into(), json!("disabled"));
        object.insert(
            "usage".into(),
            reply
                .and_then(|r| r.message.usage)
                .map_or(Value::Null, |u| {
                    json!({
                        "input_tokens": u.input_tokens,
                        "input_tokens_details": {"cached_tokens": u.cache_read_tokens.unwrap_or(0)},
                        "output_tokens": u.output_tokens,
                        "output_tokens_details": {"reasoning_tokens": 0},
                        "total_tokens": u.input_tokens + u.output_tokens,
                    })
                }),
        );
        Value::Object(object)
    }
}

impl Skeleton {
    /// Makes an upstream's response object this gateway's: its id, and
    /// what the client asked that the upstream was not sent (the response
    /// it continues, its conversation, whether it is stored).
    pub(crate) fn adopt(&self, response: &mut Map<String, Value>) {
        response.insert("id".into(), json!(self.id));
        response.insert("previous_response_id".into(), json!(self.previous));
        if let Some(id) = &self.conversation {
            response.insert("conversation".into(), json!({ "id": id }));
        }
        if let Some(store) = self.echo.get("store") {
            response.insert("store".into(), store.clone());
        }
    }
}

/// A Responses upstream's whole answer for the client: its response
/// object [adopted](Skeleton::adopt); a body that is no object as it came.
pub(crate) fn adopted(skeleton: &Skeleton, body: &[u8]) -> Bytes {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(mut response)) => {
            skeleton.adopt(&mut response);
            Bytes::from(Value::Object(response).to_string())
        }
        _ => Bytes::copy_from_slice(body),
    }
}

/// The most bytes of one server-sent event held while it is incomplete
/// (a `response.completed` event carries the whole answer).
const MAX_EVENT: usize = 64 << 20;

/// A Responses upstream's stream for the client: each event that carries
/// the response object has it [adopted](Skeleton::adopt), every other
/// event goes on as it came, byte for byte.
pub(crate) struct Adopter {
    skeleton: Skeleton,
    pending: Vec<u8>,
    sequence: u64,
}

impl Adopter {
    pub(crate) fn new(skeleton: Skeleton) -> Adopter {
        Adopter {
            skeleton,
            pending: Vec::new(),
            sequence: 0,
        }
    }

    /// The whole events `bytes` completes.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Bytes {
        self.pending.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(end) = event_end(&self.pending) {
            let event: Vec<u8> = self.pending.drain(..end).collect();
            self.adopt_event(&event, &mut out);
        }
        if self.pending.len() > MAX_EVENT {
            self.pending.clear();
            out.extend_from_slice(&self.fail("an event of the upstream's stream is too large"));
        }
        Bytes::from(out)
    }

    /// What is left once the stream ended.
    pub(crate) fn finish(&mut self) -> Bytes {
        let rest = std::mem::take(&mut self.pending);
        let mut out = Vec::new();
        if !rest.iter().all(u8::is_ascii_whitespace) {
            self.adopt_event(&rest, &mut out);
        }
        Bytes::from(out)
    }

    /// An `error` event saying why the stream ends early.
    pub(crate) fn fail(&mut self, message: &str) -> Bytes {
        let event = json!({
            "type": "error",
            "code": "upstream_error",
            "message": message,
            "param": null,
            "sequence_number": self.sequence + 1,
        });
        Bytes::from(format!("event: error\ndata: {event}\n\n"))
    }

    fn adopt_event(&mut self, event: &[u8], out: &mut Vec<u8>) {
        let Ok(text) = std::str::from_utf8(event) else {
            out.extend_from_slice(event);
            return;
        };
        let mut data = String::new();
        let mut others = Vec::new();
        for line in text.lines() {
            match line.strip_prefix("data:") {
                Some(d) => {
                    if !data.is_empty() {
                        data.push('\n');
                    }
                    data.push_str(d.strip_prefix(' ').unwrap_or(d));
                }
                None if !line.is_empty() => others.push(line),
                None => {}
            }
        }
        let Ok(Value::Object(mut value)) = serde_json::from_str::<Value>(&data) else {
            out.extend_from_slice(event);
            return;
        };
        if let Some(n) = value.get("sequence_number").and_then(Value::as_u64) {
            self.sequence = n;
        }
        let Some(Value::Object(response)) = value.get_mut("response") else {
            out.extend_from_slice(event);
            return;
        };
        self.skeleton.adopt(response);
        for line in others {
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(Value::Object(value).to_string().as_bytes());
        out.extend_from_slice(b"\n\n");
    }
}

/// Where the first whole event of `bytes` ends (after its blank line).
fn event_end(bytes: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\n' {
            match bytes.get(i + 1) {
                Some(b'\n') => return Some(i + 2),
                Some(b'\r') if bytes.get(i + 2) == Some(&b'\n') => return Some(i + 3),
                _ => {}
            }
        }
        i += 1;
    }
    None
}

/// The status a finished reply gives its response.
fn status_of(reply: &ChatReply) -> &'static str {
    match reply.stop_reason.as_deref() {
        Some("length" | "max_tokens") => "incomplete",
        _ => "completed",
    }
}

fn item_id(prefix: &str) -> String {
    format!("{prefix}_{}", Uuid::new_v4().simple())
}

fn reasoning_item(id: &str, text: &str) -> Value {
    json!({
        "type": "reasoning", "id": id, "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
        "status": "completed",
    })
}

fn text_part(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

fn message_item(id: &str, status: &str, content: Vec<Value>) -> Value {
    json!({"type": "message", "id": id, "role": "assistant", "status": status, "content": content})
}

fn call_items(message: &Message) -> Vec<Value> {
    message
        .tool_calls
        .iter()
        .map(|call| {
            json!({
                "type": "function_call", "id": item_id("fc"), "call_id": call.id,
                "name": call.name, "arguments": call.arguments, "status": "completed",
            })
        })
        .collect()
}

/// The whole response object for `reply`.
pub(crate) fn whole(skeleton: &Skeleton, reply: &ChatReply) -> Value {
    let m = &reply.message;
    let mut output = Vec::new();
    if let Some(reasoning) = m
        .reasoning
        .as_ref()
        .filter(|r| !r.redacted && !r.text.is_empty())
    {
        output.push(reasoning_item(&item_id("rs"), &reasoning.text));
    }
    let text = m.text();
    if !text.is_empty() || m.tool_calls.is_empty() {
        output.push(message_item(
            &item_id("msg"),
            "completed",
            vec![text_part(&text)],
        ));
    }
    output.extend(call_items(m));
    skeleton.object(status_of(reply), output, Some(reply))
}

/// The item the stream has open.
enum Open {
    None,
    Reasoning { id: String, text: String },
    Message { id: String, text: String },
}

/// Turns an upstream's streamed answer into the Responses events.
pub(crate) struct Streamer {
    skeleton: Skeleton,
    sequence: u64,
    started: bool,
    open: Open,
    output: Vec<Value>,
    /// Whether a message item went out already (its text is the reply's).
    said: bool,
}

impl Streamer {
    pub(crate) fn new(skeleton: Skeleton) -> Streamer {
        Streamer {
            skeleton,
            sequence: 0,
            started: false,
            open: Open::None,
            output: Vec::new(),
            said: false,
        }
    }

    fn emit(&mut self, out: &mut Vec<u8>, kind: &str, mut data: Map<String, Value>) {
        data.insert("type".into(), json!(kind));
        data.insert("sequence_number".into(), json!(self.sequence));
        self.sequence += 1;
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b"\ndata: ");
        // A map of JSON values always serializes.
        out.extend_from_slice(&serde_json::to_vec(&Value::Object(data)).unwrap_or_default());
        out.extend_from_slice(b"\n\n");
    }

    fn event(&mut self, out: &mut Vec<u8>, kind: &str, data: Value) {
        let Value::Object(data) = data else { return };
        self.emit(out, kind, data);
    }

    fn start(&mut self, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        let response = self.skeleton.object("in_progress", Vec::new(), None);
        self.event(out, "response.created", json!({ "response": response }));
        let response = self.skeleton.object("in_progress", Vec::new(), None);
        self.event(out, "response.in_progress", json!({ "response": response }));
    }

    /// The events for what the upstream sent since the last call.
    pub(crate) fn feed(&mut self, events: Vec<StreamEvent>) -> Bytes {
        let mut out = Vec::new();
        self.start(&mut out);
        for event in events {
            match event {
                StreamEvent::Reasoning(delta) if !delta.is_empty() => {
                    if !matches!(self.open, Open::Reasoning { .. }) {
                        self.close(&mut out);
                        let id = item_id("rs");
                        let index = self.output.len();
                        let item = json!({"type": "reasoning", "id": id, "summary": [], "status": "in_progress"});
                        self.event(
                            &mut out,
                            "response.output_item.added",
                            json!({"output_index": index, "item": item}),
                        );
                        self.open = Open::Reasoning {
                            id,
                            text: String::new(),
                        };
                    }
                    let index = self.output.len();
                    if let Open::Reasoning { id, text } = &mut self.open {
                        text.push_str(&delta);
                        let data = json!({"item_id": id.clone(), "output_index": index,
                                          "content_index": 0, "delta": delta});
                        self.event(&mut out, "response.reasoning_text.delta", data);
                    }
                }
                StreamEvent::Text(delta) if !delta.is_empty() => {
                    self.open_message(&mut out);
                    let index = self.output.len();
                    if let Open::Message { id, text } = &mut self.open {
                        text.push_str(&delta);
                        let data = json!({"item_id": id.clone(), "output_index": index,
                                          "content_index": 0, "delta": delta, "logprobs": []});
                        self.event(&mut out, "response.output_text.delta", data);
                    }
                }
                _ => {}
            }
        }
        Bytes::from(out)
    }

    fn open_message(&mut self, out: &mut Vec<u8>) {
        if matches!(self.open, Open::Message { .. }) {
            return;
        }
        self.close(out);
        let id = item_id("msg");
        let index = self.output.len();
        self.event(
            out,
            "response.output_item.added",
            json!({"output_index": index, "item": message_item(&id, "in_progress", Vec::new())}),
        );
        self.event(
            out,
            "response.content_part.added",
            json!({"item_id": id, "output_index": index, "content_index": 0, "part": text_part("")}),
        );
        self.open = Open::Message {
            id,
            text: String::new(),
        };
        self.said = true;
    }

    /// Ends the open item.
    fn close(&mut self, out: &mut Vec<u8>) {
        let index = self.output.len();
        match std::mem::replace(&mut self.open, Open::None) {
            Open::None => {}
            Open::Reasoning { id, text } => {
                let data =
                    json!({"item_id": id, "output_index": index, "content_index": 0, "text": text});
                self.event(out, "response.reasoning_text.done", data);
                let item = reasoning_item(&id, &text);
                self.event(
                    out,
                    "response.output_item.done",
                    json!({"output_index": index, "item": item}),
                );
                self.output.push(item);
            }
            Open::Message { id, text } => {
                let data = json!({"item_id": id, "output_index": index, "content_index": 0,
                                  "text": text, "logprobs": []});
                self.event(out, "response.output_text.done", data);
                let data = json!({"item_id": id, "output_index": index, "content_index": 0,
                                  "part": text_part(&text)});
                self.event(out, "response.content_part.done", data);
                let item = message_item(&id, "completed", vec![text_part(&text)]);
                self.event(
                    out,
                    "response.output_item.done",
                    json!({"output_index": index, "item": item}),
                );
                self.output.push(item);
            }
        }
    }

    /// The last events: the open item ended, the tool calls, and
    /// `response.completed` (or `incomplete`) with the usage.
    pub(crate) fn finish(&mut self, reply: &ChatReply) -> Bytes {
        let mut out = Vec::new();
        self.start(&mut out);
        let text = reply.message.text();
        if !self.said && (!text.is_empty() || reply.message.tool_calls.is_empty()) {
            // An upstream that sent its text in no delta (or none at all).
            self.open_message(&mut out);
            if !text.is_empty() {
                let index = self.output.len();
                if let Open::Message { id, text: said } = &mut self.open {
                    said.push_str(&text);
                    let data = json!({"item_id": id.clone(), "output_index": index,
                                      "content_index": 0, "delta": text, "logprobs": []});
                    self.event(&mut out, "response.output_text.delta", data);
                }
            }
        }
        self.close(&mut out);
        for item in call_items(&reply.message) {
            let index = self.output.len();
            let id = item["id"].clone();
            let mut added = item.clone();
            added["arguments"] = json!("");
            added["status"] = json!("in_progress");
            self.event(
                &mut out,
                "response.output_item.added",
                json!({"output_index": index, "item": added}),
            );
            let data = json!({"item_id": id, "output_index": index, "delta": item["arguments"]});
            self.event(&mut out, "response.function_call_arguments.delta", data);
            let data = json!({"item_id": id, "output_index": index,
                              "name": item["name"], "arguments": item["arguments"]});
            self.event(&mut out, "response.function_call_arguments.done", data);
            self.event(
                &mut out,
                "response.output_item.done",
                json!({"output_index": index, "item": item}),
            );
            self.output.push(item);
        }
        let status = status_of(reply);
        let response = self
            .skeleton
            .object(status, std::mem::take(&mut self.output), Some(reply));
        let kind = if status == "incomplete" {
            "response.incomplete"
        } else {
            "response.completed"
        };
        self.event(&mut out, kind, json!({ "response": response }));
        Bytes::from(out)
    }

    /// The events of a stream that broke: `response.failed`, with what went
    /// wrong.
    pub(crate) fn fail(&mut self, message: &str) -> Bytes {
        let mut out = Vec::new();
        self.start(&mut out);
        self.close(&mut out);
        let mut response = self
            .skeleton
            .object("failed", std::mem::take(&mut self.output), None);
        response["error"] = json!({"code": "server_error", "message": message});
        self.event(&mut out, "response.failed", json!({ "response": response }));
        Bytes::from(out)
    }
}

/// An upstream's error body in the shape the OpenAI SDKs read.
pub(crate) fn error_body(body: &[u8]) -> Value {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| {
            let error = v.get("error")?;
            error
                .get("message")
                .and_then(Value::as_str)
                .or_else(|| error.as_str())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    let kind = parsed
        .as_ref()
        .and_then(|v| v.pointer("/error/type")?.as_str().map(str::to_owned))
        .unwrap_or_else(|| "upstream_error".to_owned());
    json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
}

/// Whether `m` carries content only the provider that made it can read:
/// a signature over its reasoning, redacted reasoning, encrypted reasoning
/// or a compaction item.
pub(crate) fn is_opaque(m: &Message) -> bool {
    let signed = m
        .reasoning
        .as_ref()
        .is_some_and(|r| r.signature.is_some() || r.redacted);
    let blocks = m
        .metadata
        .get(anthropic::EXTRA_KEY)
        .and_then(|a| a.get("blocks"))
        .and_then(Value::as_array)
        .is_some_and(|blocks| blocks.iter().any(|b| is_opaque_block(&b["block"])));
    let items = m.metadata.get(responses::EXTRA_KEY).is_some_and(|r| {
        r.get("items")
            .and_then(Value::as_array)
            .is_some_and(|items| items.iter().any(is_opaque_item))
            || r.get("item").is_some_and(is_opaque_item)
    });
    signed || blocks || items
}

fn is_opaque_block(block: &Value) -> bool {
    matches!(
        block.get("type").and_then(Value::as_str),
        Some("thinking" | "redacted_thinking")
    )
}

fn is_opaque_item(item: &Value) -> bool {
    matches!(
        item.get("type").and_then(Value::as_str),
        Some("compaction" | "compaction_summary")
    ) || item.get("encrypted_content").is_some_and(|e| !e.is_null())
}

/// `m` without what only its own provider can read; `None` when nothing
/// of it is left (a compaction item).
pub(crate) fn without_opaque(mut m: Message) -> Option<Message> {
    if m.metadata
        .get(responses::EXTRA_KEY)
        .and_then(|r| r.get("item"))
        .is_some_and(is_opaque_item)
    {
        return None;
    }
    if let Some(reasoning) = &mut m.reasoning {
        reasoning.signature = None;
        if reasoning.redacted {
            m.reasoning = None;
        }
    }
    if let Some(Value::Object(extra)) = m.metadata.get_mut(anthropic::EXTRA_KEY)
        && let Some(Value::Array(blocks)) = extra.get_mut("blocks")
    {
        blocks.retain(|b| !is_opaque_block(&b["block"]));
    }
    if let Some(Value::Object(extra)) = m.metadata.get_mut(responses::EXTRA_KEY)
        && let Some(Value::Array(items)) = extra.get_mut("items")
    {
        items.retain(|i| !is_opaque_item(i));
    }
    // Readable reasoning without its signature is still the model's
    // reasoning, but no provider takes it back unsigned.
    if m.role == Role::Assistant && m.reasoning.as_ref().is_some_and(|r| r.signature.is_none()) {
        m.reasoning = None;
    }
    m.invalidate_tokens();
    Some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_id_holds_its_session() {
        let session = Uuid::new_v4();
        let id = new_id(Some(session));
        assert_eq!(session_of(&id), Some(session));
        assert_eq!(session_of(&new_id(None)), None);
        assert_eq!(session_of("resp_123"), None);
        assert_eq!(session_of(&format!("{id}x")), None);
    }

    #[test]
    fn malformed_items_are_refused_naming_their_index() {
        let body = json!({"input": [
            {"type": "message", "role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "c1", "arguments": "{}"},
        ]});
        let e = read(body.as_object().unwrap()).unwrap_err();
        assert!(e.contains("`input[1]`") && e.contains("`name`"), "{e}");
        // A built-in tool is read (an upstream that serves Responses takes
        // it), and refused where it would be translated.
        let body = json!({"input": "hi", "tools": [{"type": "web_search"}]});
        assert!(read(body.as_object().unwrap()).is_ok());
        let e = check_translatable(body.as_object().unwrap()).unwrap_err();
        assert!(e.contains("`tools[0]`") && e.contains("web_search"), "{e}");
        let body = json!({"input": "hi", "tools": [{"name": "f"}]});
        let e = read(body.as_object().unwrap()).unwrap_err();
        assert!(e.contains("`tools[0]`") && e.contains("`type`"), "{e}");
        let body = json!({"input": [{"type": "message", "role": "robot", "content": "x"}]});
        let e = read(body.as_object().unwrap()).unwrap_err();
        assert!(e.contains("`input`") && e.contains("robot"), "{e}");
    }

    #[test]
    fn a_stream_is_the_event_sequence_the_sdks_read() {
        let skeleton = Skeleton::new(&Ask::default(), "m".into(), new_id(None));
        let mut streamer = Streamer::new(skeleton);
        let mut bytes = streamer
            .feed(vec![StreamEvent::Text("Hel".into())])
            .to_vec();
        bytes.extend_from_slice(&streamer.feed(vec![StreamEvent::Text("lo".into())]));
        let mut message = Message::assistant("Hello");
        message.tool_calls.push(agent_host_core::ToolCall {
            id: "c1".into(),
            name: "f".into(),
            arguments: "{}".into(),
        });
        let reply = ChatReply {
            message,
            stop_reason: Some("tool_calls".into()),
            attempts: 1,
        };
        bytes.extend_from_slice(&streamer.finish(&reply));
        let text = String::from_utf8(bytes).unwrap();
        let kinds: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("event: "))
            .collect();
        assert_eq!(
            kinds,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        let numbers: Vec<u64> = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| {
                serde_json::from_str::<Value>(d).unwrap()["sequence_number"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(numbers, (0..14).collect::<Vec<_>>());
    }
}

#[cfg(test)]
mod adopting {
    use super::*;

    fn skeleton() -> Skeleton {
        let mut echo = Map::new();
        echo.insert("store".into(), json!(true));
        Skeleton {
            id: "resp_ours".into(),
            created_at: 0,
            model: "m".into(),
            previous: Some("resp_before".into()),
            conversation: None,
            echo,
        }
    }

    #[test]
    fn only_events_with_a_response_object_are_rewritten_whatever_the_chunking() {
        let stream = concat!(
            "event: response.created\n",
            "data: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_up\",\"store\":false}}\n\n",
            "event: response.output_text.delta\r\n",
            "data: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"delta\":\"Hi\"}\r\n\r\n",
        );
        for cut in [1, 7, 40, stream.len() - 1] {
            let mut adopter = Adopter::new(skeleton());
            let mut out = adopter.feed(&stream.as_bytes()[..cut]).to_vec();
            out.extend_from_slice(&adopter.feed(&stream.as_bytes()[cut..]));
            out.extend_from_slice(&adopter.finish());
            let out = String::from_utf8(out).unwrap();
            let (created, delta) = out.split_once("\n\n").unwrap();
            assert!(
                created.starts_with("event: response.created\ndata: {"),
                "{out}"
            );
            let data: Value =
                serde_json::from_str(created.split_once("data: ").unwrap().1).unwrap();
            assert_eq!(data["response"]["id"], "resp_ours");
            assert_eq!(data["response"]["previous_response_id"], "resp_before");
            assert_eq!(data["response"]["store"], true);
            // The delta, byte for byte.
            assert_eq!(
                delta,
                &stream[stream.find("event: response.output_text").unwrap()..]
            );
            assert!(adopter.fail("gone").starts_with(b"event: error\ndata: {"));
        }
    }

    #[test]
    fn a_whole_answer_is_adopted_and_a_body_that_is_no_object_left_alone() {
        let body = adopted(&skeleton(), br#"{"id":"resp_up","output":[]}"#);
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["id"], "resp_ours");
        assert_eq!(&adopted(&skeleton(), b"[1]")[..], b"[1]");
    }

    #[test]
    fn the_native_request_carries_the_view_and_asks_the_upstream_to_keep_nothing() {
        let request = json!({
            "model": "m", "input": "old", "instructions": "be brief",
            "previous_response_id": "resp_x", "store": true,
            "include": ["file_search_call.results"], "tools": [{"type": "web_search"}],
        });
        let view = [Message::system("be brief"), Message::user("hi")];
        let body = native_body(request.as_object().unwrap(), &view).unwrap();
        assert_eq!(body["store"], false);
        assert!(!body.contains_key("previous_response_id") && !body.contains_key("instructions"));
        assert_eq!(
            body["include"],
            json!(["file_search_call.results", "reasoning.encrypted_content"])
        );
        assert_eq!(body["tools"], request["tools"]);
        let input = body["input"].as_array().unwrap();
        assert_eq!(input.len(), 2);
        assert_eq!(input[0]["role"], "system");
    }
}
