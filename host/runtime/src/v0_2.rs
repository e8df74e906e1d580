//! The host side of the `agent-host:history@0.2.0` contract: the generated
//! bindings, the `history` resource backed by the host's own messages, and
//! the conversions of the answer to the shapes [`crate::apply`] checks.
//!
//! The history is moved into the call's resource table for the length of
//! the call and moved out again afterwards, whatever the guest did: nothing
//! is copied into the guest until it asks, and then only what it asks for.
//! Headers carry no string; the link from a tool result to the message
//! whose call it answers is worked out by the host, once, on the first
//! `headers` call.

use std::collections::HashMap;
use std::sync::Arc;

use agent_host_core::{MediaRef, Message, Part, Role};
use wasmtime::component::Resource;

use crate::bindings::wit as v1;
use crate::call::State;

mod lower;

pub(crate) use lower::shadow;

wasmtime::component::bindgen!({
    path: "../../wit/v0.2.0",
    world: "history-processor",
    with: {
        "agent-host:history/types.history": HistoryData,
    },
    imports: { default: trappable },
});

use self::agent_host::history::host::Level;
use self::agent_host::history::services::{Fact, ServiceError, SummarizeCaps, Summary};
pub(crate) use self::agent_host::history::types as wit;
use crate::services::{ServiceAnswer, ServiceRequest};

/// The name of the import that carries the host's services in 0.2.0.
pub(crate) const HOST_INTERFACE: &str = "agent-host:history/host@0.2.0";
/// The name of the export that carries the processor in 0.2.0.
pub(crate) const PROCESSOR_INTERFACE: &str = "agent-host:history/processor@0.2.0";

/// The input history of one call, as the guest's `history` resource.
pub struct HistoryData {
    /// Shared with the results that lower them ([`lower`]) for as long as
    /// a host function's answer is being written into the guest.
    messages: Arc<Vec<Message>>,
    /// The host's token estimate of each message.
    tokens: Vec<u32>,
    /// For each message, the index of the message whose call it answers;
    /// worked out on the first `headers` call.
    answers: Option<Vec<Option<u32>>>,
}

impl HistoryData {
    pub(crate) fn new(messages: Vec<Message>, tokens: Vec<u32>) -> Self {
        HistoryData {
            messages: Arc::new(messages),
            tokens,
            answers: None,
        }
    }

    /// The messages, given back after the call.
    pub(crate) fn into_messages(self) -> Vec<Message> {
        // A result holds a share only while it is lowered, inside its host
        // function: after the call the history is this one's alone.
        Arc::try_unwrap(self.messages).unwrap_or_else(|shared| shared.as_ref().clone())
    }

    /// `[start, end)` cut to the history.
    fn range(&self, start: u32, end: u32) -> std::ops::Range<usize> {
        let n = self.messages.len();
        let start = (start as usize).min(n);
        let end = (end as usize).clamp(start, n);
        start..end
    }

    fn get(&self, index: u32) -> Option<&Message> {
        self.messages.get(index as usize)
    }

    /// The headers of `[start, end)` (cut to the history).
    fn headers(&mut self, start: u32, end: u32) -> Vec<wit::Header> {
        let range = self.range(start, end);
        if self.answers.is_none() {
            self.answers = Some(answers(&self.messages));
        }
        let links = self.answers.as_deref().unwrap_or_default();
        range.map(|i| self.header(i, links[i])).collect()
    }

    fn header(&self, i: usize, answers: Option<u32>) -> wit::Header {
        let m = &self.messages[i];
        wit::Header {
            role: role(m.role),
            flags: flags(m),
            tokens: self.tokens[i],
            timestamp: m.timestamp.map(timestamp),
            answers,
            tool_calls: len32(m.tool_calls.len()),
            parts: len32(m.parts.len()),
            content_bytes: len32(m.content.len()),
            reasoning_bytes: m.reasoning.as_ref().map(|r| len32(r.text.len())),
            metadata_bytes: metadata_text(m).map_or(0, |t| len32(t.len())),
            usage: m.usage.map(usage),
        }
    }

    fn message(&self, i: usize) -> wit::Message {
        let m = &self.messages[i];
        wit::Message {
            id: m.id.clone(),
            role: role(m.role),
            content: m.content.clone(),
            parts: parts(m),
            reasoning: reasoning(m),
            tool_calls: tool_calls(m),
            tool_call_id: m.tool_call_id.clone(),
            tool_name: m.tool_name.clone(),
            usage: m.usage.map(usage),
            model: m.model.clone(),
            timestamp: m.timestamp.map(timestamp),
            agent: m.agent.clone(),
            channel: m.channel.clone(),
            flags: flags(m),
            metadata: metadata_text(m),
            tokens: self.tokens[i],
        }
    }
}

/// For each message, the index of the nearest earlier message with a call
/// of its `tool-call-id`, for tool results (the guest SDK's rule in 0.1.0).
fn answers(messages: &[Message]) -> Vec<Option<u32>> {
    let mut calls: HashMap<&str, u32> = HashMap::new();
    let mut out = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        out.push(match (&m.role, &m.tool_call_id) {
            (Role::Tool, Some(id)) => calls.get(id.as_str()).copied(),
            _ => None,
        });
        for call in &m.tool_calls {
            calls.insert(&call.id, len32(i));
        }
    }
    out
}

/// A length or index as the contract's `u32` (histories and texts over 4
/// GiB are refused long before a call).
fn len32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn role(r: Role) -> wit::Role {
    match r {
        Role::System => wit::Role::System,
        Role::User => wit::Role::User,
        Role::Assistant => wit::Role::Assistant,
        Role::Tool => wit::Role::Tool,
    }
}

fn flags(m: &Message) -> wit::MessageFlags {
    let mut f = wit::MessageFlags::empty();
    if m.synthetic {
        f |= wit::MessageFlags::SYNTHETIC;
    }
    if m.summary {
        f |= wit::MessageFlags::SUMMARY;
    }
    if m.is_error {
        f |= wit::MessageFlags::ERROR;
    }
    f
}

fn timestamp(t: chrono::DateTime<chrono::Utc>) -> wit::Timestamp {
    wit::Timestamp {
        seconds: t.timestamp(),
        nanoseconds: t.timestamp_subsec_nanos(),
    }
}

fn usage(u: agent_host_core::Usage) -> wit::Usage {
    wit::Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cache_read_tokens: u.cache_read_tokens,
        cache_write_tokens: u.cache_write_tokens,
    }
}

fn metadata_text(m: &Message) -> Option<String> {
    // A map of JSON values always serialises.
    (!m.metadata.is_empty()).then(|| serde_json::to_string(&m.metadata).unwrap_or_default())
}

fn parts(m: &Message) -> Vec<wit::Part> {
    m.parts
        .iter()
        .map(|p| match p {
            Part::Text { text } => wit::Part::Text(text.clone()),
            Part::Image { source, mime_type } => wit::Part::Image(wit::Image {
                source: match source {
                    MediaRef::Url(u) => wit::MediaSource::Url(u.clone()),
                    MediaRef::Path(p) => wit::MediaSource::Path(p.clone()),
                },
                mime_type: mime_type.clone(),
            }),
            Part::File {
                name,
                path,
                mime_type,
            } => wit::Part::File(wit::FileRef {
                name: name.clone(),
                path: path.clone(),
                mime_type: mime_type.clone(),
            }),
        })
        .collect()
}

fn reasoning(m: &Message) -> Option<wit::Reasoning> {
    m.reasoning.as_ref().map(|r| wit::Reasoning {
        text: r.text.clone(),
        signature: r.signature.clone(),
        redacted: r.redacted,
    })
}

fn tool_calls(m: &Message) -> Vec<wit::ToolCall> {
    m.tool_calls
        .iter()
        .map(|c| wit::ToolCall {
            id: c.id.clone(),
            name: c.name.clone(),
            arguments: c.arguments.clone(),
        })
        .collect()
}

fn labels(m: &Message) -> wit::Labels {
    wit::Labels {
        id: m.id.clone(),
        tool_call_id: m.tool_call_id.clone(),
        tool_name: m.tool_name.clone(),
        calls: m
            .tool_calls
            .iter()
            .map(|c| wit::CallLabel {
                id: c.id.clone(),
                name: c.name.clone(),
            })
            .collect(),
        model: m.model.clone(),
        agent: m.agent.clone(),
        channel: m.channel.clone(),
    }
}

fn flags_v1(f: wit::MessageFlags) -> v1::MessageFlags {
    let mut out = v1::MessageFlags::empty();
    for (new, old) in [
        (wit::MessageFlags::SYNTHETIC, v1::MessageFlags::SYNTHETIC),
        (wit::MessageFlags::SUMMARY, v1::MessageFlags::SUMMARY),
        (wit::MessageFlags::ERROR, v1::MessageFlags::ERROR),
    ] {
        if f.contains(new) {
            out |= old;
        }
    }
    out
}

/// The run context in 0.2.0's type (the same fields as 0.1.0's).
pub(crate) fn run_context(c: v1::RunContext) -> wit::RunContext {
    wit::RunContext {
        session_key: c.session_key,
        agent: c.agent,
        model: c.model,
        context_window: c.context_window,
        budget: c.budget,
        total_tokens: c.total_tokens,
        turn: c.turn,
        usage: wit::Usage {
            input_tokens: c.usage.input_tokens,
            output_tokens: c.usage.output_tokens,
            cache_read_tokens: c.usage.cache_read_tokens,
            cache_write_tokens: c.usage.cache_write_tokens,
        },
        now: wit::Timestamp {
            seconds: c.now.seconds,
            nanoseconds: c.now.nanoseconds,
        },
        config: c.config,
    }
}

/// An answer's item in the shape the host checks and applies (0.1.0's,
/// field for field the same).
pub(crate) fn item_v1(item: wit::Item) -> v1::Item {
    match item {
        wit::Item::Keep(i) => v1::Item::Keep(i),
        wit::Item::Replace(r) => v1::Item::Replace(v1::Replacement {
            index: r.index,
            message: message_v1(r.message),
        }),
        wit::Item::Insert(m) => v1::Item::Insert(message_v1(m)),
    }
}

fn message_v1(m: wit::Message) -> v1::Message {
    v1::Message {
        id: m.id,
        role: match m.role {
            wit::Role::System => v1::Role::System,
            wit::Role::User => v1::Role::User,
            wit::Role::Assistant => v1::Role::Assistant,
            wit::Role::Tool => v1::Role::Tool,
        },
        content: m.content,
        parts: m
            .parts
            .into_iter()
            .map(|p| match p {
                wit::Part::Text(t) => v1::Part::Text(t),
                wit::Part::Image(i) => v1::Part::Image(v1::Image {
                    source: match i.source {
                        wit::MediaSource::Url(u) => v1::MediaSource::Url(u),
                        wit::MediaSource::Path(p) => v1::MediaSource::Path(p),
                    },
                    mime_type: i.mime_type,
                }),
                wit::Part::File(f) => v1::Part::File(v1::FileRef {
                    name: f.name,
                    path: f.path,
                    mime_type: f.mime_type,
                }),
            })
            .collect(),
        reasoning: m.reasoning.map(|r| v1::Reasoning {
            text: r.text,
            signature: r.signature,
            redacted: r.redacted,
        }),
        tool_calls: m
            .tool_calls
            .into_iter()
            .map(|c| v1::ToolCall {
                id: c.id,
                name: c.name,
                arguments: c.arguments,
            })
            .collect(),
        tool_call_id: m.tool_call_id,
        tool_name: m.tool_name,
        usage: m.usage.map(|u| v1::Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_tokens: u.cache_read_tokens,
            cache_write_tokens: u.cache_write_tokens,
        }),
        model: m.model,
        timestamp: m.timestamp.map(|t| v1::Timestamp {
            seconds: t.seconds,
            nanoseconds: t.nanoseconds,
        }),
        agent: m.agent,
        channel: m.channel,
        flags: flags_v1(m.flags),
        metadata: m.metadata,
        tokens: m.tokens,
    }
}

impl wit::Host for State {}

/// The host functions `bindgen!` asks for. A guest's calls of `headers`,
/// `messages`, `message`, `contents` and `content` reach `lower::shadow`'s
/// twins instead, which give the same answers without host-side copies
/// (`tests/reads.rs` checks them field by field).
impl wit::HostHistory for State {
    fn len(&mut self, h: Resource<HistoryData>) -> wasmtime::Result<u32> {
        Ok(len32(self.table.get(&h)?.messages.len()))
    }

    fn headers(
        &mut self,
        h: Resource<HistoryData>,
        start: u32,
        end: u32,
    ) -> wasmtime::Result<Vec<wit::Header>> {
        Ok(self.table.get_mut(&h)?.headers(start, end))
    }

    fn labels(
        &mut self,
        h: Resource<HistoryData>,
        start: u32,
        end: u32,
    ) -> wasmtime::Result<Vec<wit::Labels>> {
        let data = self.table.get(&h)?;
        Ok(data.messages[data.range(start, end)]
            .iter()
            .map(labels)
            .collect())
    }

    fn contents(
        &mut self,
        h: Resource<HistoryData>,
        start: u32,
        end: u32,
    ) -> wasmtime::Result<Vec<String>> {
        let data = self.table.get(&h)?;
        Ok(data.messages[data.range(start, end)]
            .iter()
            .map(|m| m.content.clone())
            .collect())
    }

    fn message(
        &mut self,
        h: Resource<HistoryData>,
        index: u32,
    ) -> wasmtime::Result<Option<wit::Message>> {
        let data = self.table.get(&h)?;
        Ok(data.get(index).map(|_| data.message(index as usize)))
    }

    fn messages(
        &mut self,
        h: Resource<HistoryData>,
        start: u32,
        end: u32,
    ) -> wasmtime::Result<Vec<wit::Message>> {
        let data = self.table.get(&h)?;
        Ok(data.range(start, end).map(|i| data.message(i)).collect())
    }

    fn content(
        &mut self,
        h: Resource<HistoryData>,
        index: u32,
    ) -> wasmtime::Result<Option<String>> {
        Ok(self.table.get(&h)?.get(index).map(|m| m.content.clone()))
    }

    fn parts(
        &mut self,
        h: Resource<HistoryData>,
        index: u32,
    ) -> wasmtime::Result<Option<Vec<wit::Part>>> {
        Ok(self.table.get(&h)?.get(index).map(parts))
    }

    fn reasoning(
        &mut self,
        h: Resource<HistoryData>,
        index: u32,
    ) -> wasmtime::Result<Option<Option<wit::Reasoning>>> {
        Ok(self.table.get(&h)?.get(index).map(reasoning))
    }

    fn tool_calls(
        &mut self,
        h: Resource<HistoryData>,
        index: u32,
    ) -> wasmtime::Result<Option<Vec<wit::ToolCall>>> {
        Ok(self.table.get(&h)?.get(index).map(tool_calls))
    }

    fn metadata(
        &mut self,
        h: Resource<HistoryData>,
        index: u32,
    ) -> wasmtime::Result<Option<Option<String>>> {
        Ok(self.table.get(&h)?.get(index).map(metadata_text))
    }

    fn drop(&mut self, h: Resource<HistoryData>) -> wasmtime::Result<()> {
        // The guest only ever borrows the history; the host takes it back
        // after the call. A handle it could own is not one to free here.
        let _ = h;
        Ok(())
    }
}

impl agent_host::history::host::Host for State {
    fn log(&mut self, level: Level, text: String) -> wasmtime::Result<()> {
        let level = match level {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        };
        self.push_log(level, text);
        Ok(())
    }

    fn estimate_tokens(&mut self, text: String) -> wasmtime::Result<u32> {
        Ok(self.counter.count_text(&text))
    }

    fn estimate_message_tokens(&mut self, message: wit::Message) -> wasmtime::Result<u32> {
        Ok(match crate::bindings::from_wit(message_v1(message)) {
            Ok(m) => self.counter.count_message(&m),
            Err(_) => 0,
        })
    }
}

impl agent_host::history::services::Host for State {
    fn summarize(
        &mut self,
        prompt: String,
        text: String,
        caps: SummarizeCaps,
    ) -> wasmtime::Result<Result<Summary, ServiceError>> {
        let request = ServiceRequest::Summarize {
            prompt,
            text,
            max_tokens: caps.max_tokens,
            timeout_ms: u64::from(caps.timeout_ms),
        };
        Ok(match self.serve(request) {
            Ok(ServiceAnswer::Summary {
                text,
                input_tokens,
                output_tokens,
                ..
            }) => Ok(Summary {
                text,
                input_tokens,
                output_tokens,
            }),
            Ok(_) => Err(mismatch()),
            Err(e) => Err(service_error(e)),
        })
    }

    fn count_tokens(&mut self, text: String) -> wasmtime::Result<Result<u32, ServiceError>> {
        Ok(match self.serve(ServiceRequest::CountTokens { text }) {
            Ok(ServiceAnswer::Tokens { count }) => Ok(count),
            Ok(_) => Err(mismatch()),
            Err(e) => Err(service_error(e)),
        })
    }

    fn read_memory(
        &mut self,
        query: String,
        limit: u32,
    ) -> wasmtime::Result<Result<Vec<Fact>, ServiceError>> {
        Ok(
            match self.serve(ServiceRequest::ReadMemory { query, limit }) {
                Ok(ServiceAnswer::Memory { facts }) => Ok(facts
                    .into_iter()
                    .map(|f| Fact {
                        id: f.id,
                        entity: f.entity,
                        text: f.text,
                        attribute: f.attribute,
                        value: f.value,
                        recorded: timestamp(f.recorded),
                    })
                    .collect()),
                Ok(_) => Err(mismatch()),
                Err(e) => Err(service_error(e)),
            },
        )
    }
}

/// An answer of another service than asked (the meter refuses those first).
fn mismatch() -> ServiceError {
    ServiceError::Failed("the host answered with another service's answer".into())
}

fn service_error(e: crate::ServiceError) -> ServiceError {
    match e {
        crate::ServiceError::Denied(m) => ServiceError::Denied(m),
        crate::ServiceError::OverBudget(m) => ServiceError::OverBudget(m),
        crate::ServiceError::Failed(m) => ServiceError::Failed(m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_answers_the_nearest_earlier_call_with_its_id() {
        let mut a = Message::assistant("");
        a.push_tool_call("c1", "t", "{}");
        let mut b = Message::assistant("");
        b.push_tool_call("c1", "t", "{}");
        let messages = vec![
            Message::user("q"),
            a,
            Message::tool_result("c1", "t", "one"),
            b,
            Message::tool_result("c1", "t", "two"),
            Message::tool_result("c9", "t", "orphan"),
        ];
        assert_eq!(
            answers(&messages),
            [None, None, Some(1), None, Some(3), None]
        );
    }

    #[test]
    fn ranges_are_cut_to_the_history() {
        let data = HistoryData::new(vec![Message::user("a"), Message::user("b")], vec![1, 1]);
        assert_eq!(data.range(0, 9), 0..2);
        assert_eq!(data.range(1, 0), 1..1);
        assert_eq!(data.range(5, 9), 2..2);
        assert_eq!(data.range(0, u32::MAX), 0..2);
    }
}
