//! The host side of the `agent-host:history@0.1.0` contract: the generated
//! bindings and the conversions between the WIT message and the core one.

use agent_host_core::{MediaRef, Message, Part, Reasoning, Role, TokenCounter, ToolCall, Usage};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use wasmtime::component::{ComponentType, Lower};

wasmtime::component::bindgen!({
    path: "../../wit/v0.1.0",
    world: "history-processor",
});

pub(crate) use self::agent_host::history::host::Level;
pub(crate) use self::agent_host::history::types as wit;

/// The name of the import that carries the host's services in 0.1.0.
pub(crate) const HOST_INTERFACE: &str = "agent-host:history/host@0.1.0";
/// The name of the export that carries the processor in 0.1.0.
pub(crate) const PROCESSOR_INTERFACE: &str = "agent-host:history/processor@0.1.0";

/// The parameters and results of `process`, with the history borrowed.
pub(crate) type ProcessParams<'a> = (&'a wit::RunContext, &'a [MessageIn<'a>]);
/// The results of `process`.
pub(crate) type ProcessResults = (Result<Vec<wit::Item>, wit::Error>,);

/// A core message as the WIT record, with the host's token estimate.
/// A WIT message from a processor as a core message.
///
/// Fails, saying which field, when the metadata is not a JSON object or the
/// timestamp is out of range. The token estimate is not trusted: the host
/// counts the message again when it needs to.
pub(crate) fn from_wit(m: wit::Message) -> Result<Message, String> {
    let metadata: Map<String, Value> = match m.metadata.as_deref().map(str::trim) {
        None | Some("") => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => map,
            Ok(other) => {
                return Err(format!(
                    "metadata must be a JSON object, got {}",
                    agent_host_core::format::kind_of(&other)
                ));
            }
            Err(e) => return Err(format!("metadata is not valid JSON: {e}")),
        },
    };
    let timestamp = match m.timestamp {
        None => None,
        Some(t) => Some(
            DateTime::<Utc>::from_timestamp(t.seconds, t.nanoseconds).ok_or_else(|| {
                format!(
                    "timestamp {}.{:09} s is out of range",
                    t.seconds, t.nanoseconds
                )
            })?,
        ),
    };
    let mut out = Message::new(role_from_wit(m.role), m.content);
    out.id = m.id;
    out.parts = m.parts.into_iter().map(part_from_wit).collect();
    out.reasoning = m.reasoning.map(|r| Reasoning {
        text: r.text,
        signature: r.signature,
        redacted: r.redacted,
    });
    out.tool_calls = m
        .tool_calls
        .into_iter()
        .map(|c| ToolCall {
            id: c.id,
            name: c.name,
            arguments: c.arguments,
        })
        .collect();
    out.tool_call_id = m.tool_call_id;
    out.tool_name = m.tool_name;
    out.is_error = m.flags.contains(wit::MessageFlags::ERROR);
    out.usage = m.usage.map(usage_from_wit);
    out.model = m.model;
    out.timestamp = timestamp;
    out.agent = m.agent;
    out.channel = m.channel;
    out.synthetic = m.flags.contains(wit::MessageFlags::SYNTHETIC);
    out.summary = m.flags.contains(wit::MessageFlags::SUMMARY);
    out.metadata = metadata;
    Ok(out)
}

/// A message's metadata as JSON text, or `None` when it has none.
fn metadata_text(m: &Message) -> Option<String> {
    // A map of JSON values always serialises.
    (!m.metadata.is_empty()).then(|| serde_json::to_string(&m.metadata).unwrap_or_default())
}

/// A core message lowered into a guest without first being copied: the
/// borrowed twin of [`wit::Message`], field for field.
#[derive(ComponentType, Lower)]
#[component(record)]
pub(crate) struct MessageIn<'a> {
    id: &'a str,
    role: wit::Role,
    content: &'a str,
    parts: Vec<PartIn<'a>>,
    reasoning: Option<ReasoningIn<'a>>,
    #[component(name = "tool-calls")]
    tool_calls: Vec<ToolCallIn<'a>>,
    #[component(name = "tool-call-id")]
    tool_call_id: Option<&'a str>,
    #[component(name = "tool-name")]
    tool_name: Option<&'a str>,
    usage: Option<wit::Usage>,
    model: Option<&'a str>,
    timestamp: Option<wit::Timestamp>,
    agent: Option<&'a str>,
    channel: Option<&'a str>,
    flags: wit::MessageFlags,
    metadata: Option<String>,
    tokens: u32,
}

#[derive(ComponentType, Lower)]
#[component(variant)]
pub(crate) enum PartIn<'a> {
    #[component(name = "text")]
    Text(&'a str),
    #[component(name = "image")]
    Image(ImageIn<'a>),
    #[component(name = "file")]
    File(FileRefIn<'a>),
}

#[derive(ComponentType, Lower)]
#[component(variant)]
pub(crate) enum MediaIn<'a> {
    #[component(name = "url")]
    Url(&'a str),
    #[component(name = "path")]
    Path(&'a str),
}

#[derive(ComponentType, Lower)]
#[component(record)]
pub(crate) struct ImageIn<'a> {
    source: MediaIn<'a>,
    #[component(name = "mime-type")]
    mime_type: Option<&'a str>,
}

#[derive(ComponentType, Lower)]
#[component(record)]
pub(crate) struct FileRefIn<'a> {
    name: &'a str,
    path: &'a str,
    #[component(name = "mime-type")]
    mime_type: Option<&'a str>,
}

#[derive(ComponentType, Lower)]
#[component(record)]
pub(crate) struct ReasoningIn<'a> {
    text: &'a str,
    signature: Option<&'a str>,
    redacted: bool,
}

#[derive(ComponentType, Lower)]
#[component(record)]
pub(crate) struct ToolCallIn<'a> {
    id: &'a str,
    name: &'a str,
    arguments: &'a str,
}

/// A core message as the borrowed WIT record, with the host's token estimate.
pub(crate) fn message_in<'a>(m: &'a Message, counter: &dyn TokenCounter) -> MessageIn<'a> {
    MessageIn {
        id: &m.id,
        role: role_to_wit(m.role),
        content: &m.content,
        parts: m
            .parts
            .iter()
            .map(|p| match p {
                Part::Text { text } => PartIn::Text(text),
                Part::Image { source, mime_type } => PartIn::Image(ImageIn {
                    source: match source {
                        MediaRef::Url(u) => MediaIn::Url(u),
                        MediaRef::Path(p) => MediaIn::Path(p),
                    },
                    mime_type: mime_type.as_deref(),
                }),
                Part::File {
                    name,
                    path,
                    mime_type,
                } => PartIn::File(FileRefIn {
                    name,
                    path,
                    mime_type: mime_type.as_deref(),
                }),
            })
            .collect(),
        reasoning: m.reasoning.as_ref().map(|r| ReasoningIn {
            text: &r.text,
            signature: r.signature.as_deref(),
            redacted: r.redacted,
        }),
        tool_calls: m
            .tool_calls
            .iter()
            .map(|c| ToolCallIn {
                id: &c.id,
                name: &c.name,
                arguments: &c.arguments,
            })
            .collect(),
        tool_call_id: m.tool_call_id.as_deref(),
        tool_name: m.tool_name.as_deref(),
        usage: m.usage.map(usage_to_wit),
        model: m.model.as_deref(),
        timestamp: m.timestamp.map(timestamp_to_wit),
        agent: m.agent.as_deref(),
        channel: m.channel.as_deref(),
        flags: flags_of(m),
        metadata: metadata_text(m),
        tokens: m.tokens(counter),
    }
}

fn flags_of(m: &Message) -> wit::MessageFlags {
    let mut flags = wit::MessageFlags::empty();
    if m.synthetic {
        flags |= wit::MessageFlags::SYNTHETIC;
    }
    if m.summary {
        flags |= wit::MessageFlags::SUMMARY;
    }
    if m.is_error {
        flags |= wit::MessageFlags::ERROR;
    }
    flags
}

fn role_to_wit(r: Role) -> wit::Role {
    match r {
        Role::System => wit::Role::System,
        Role::User => wit::Role::User,
        Role::Assistant => wit::Role::Assistant,
        Role::Tool => wit::Role::Tool,
    }
}

fn role_from_wit(r: wit::Role) -> Role {
    match r {
        wit::Role::System => Role::System,
        wit::Role::User => Role::User,
        wit::Role::Assistant => Role::Assistant,
        wit::Role::Tool => Role::Tool,
    }
}

fn part_from_wit(p: wit::Part) -> Part {
    match p {
        wit::Part::Text(text) => Part::Text { text },
        wit::Part::Image(i) => Part::Image {
            source: match i.source {
                wit::MediaSource::Url(u) => MediaRef::Url(u),
                wit::MediaSource::Path(p) => MediaRef::Path(p),
            },
            mime_type: i.mime_type,
        },
        wit::Part::File(f) => Part::File {
            name: f.name,
            path: f.path,
            mime_type: f.mime_type,
        },
    }
}

pub(crate) fn usage_to_wit(u: Usage) -> wit::Usage {
    wit::Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cache_read_tokens: u.cache_read_tokens,
        cache_write_tokens: u.cache_write_tokens,
    }
}

fn usage_from_wit(u: wit::Usage) -> Usage {
    Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cache_read_tokens: u.cache_read_tokens,
        cache_write_tokens: u.cache_write_tokens,
    }
}

pub(crate) fn timestamp_to_wit(t: DateTime<Utc>) -> wit::Timestamp {
    wit::Timestamp {
        seconds: t.timestamp(),
        nanoseconds: t.timestamp_subsec_nanos(),
    }
}

/// A new message as a processor builds it: a role, an id (empty: the host
/// derives one) and plain text, nothing else; for the runtime's tests.
#[cfg(test)]
pub(crate) fn plain_message(role: wit::Role, id: &str, content: &str) -> wit::Message {
    wit::Message {
        id: id.into(),
        role,
        content: content.into(),
        parts: Vec::new(),
        reasoning: None,
        tool_calls: Vec::new(),
        tool_call_id: None,
        tool_name: None,
        usage: None,
        model: None,
        timestamp: None,
        agent: None,
        channel: None,
        flags: wit::MessageFlags::empty(),
        metadata: None,
        tokens: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain user message as a processor would build it.
    fn wit_message(metadata: Option<&str>) -> wit::Message {
        wit::Message {
            timestamp: Some(wit::Timestamp {
                seconds: 1_700_000_000,
                nanoseconds: 5,
            }),
            flags: wit::MessageFlags::SYNTHETIC | wit::MessageFlags::ERROR,
            metadata: metadata.map(str::to_owned),
            ..plain_message(wit::Role::User, "", "hi")
        }
    }

    #[test]
    fn a_new_message_keeps_its_flags_timestamp_and_metadata() {
        let m = from_wit(wit_message(Some(r#"{"k": [1]}"#))).unwrap();
        assert!(m.synthetic && m.is_error && !m.summary);
        assert_eq!(m.timestamp, DateTime::from_timestamp(1_700_000_000, 5));
        assert_eq!(m.metadata["k"], serde_json::json!([1]));
        assert!(from_wit(wit_message(None)).unwrap().metadata.is_empty());
    }

    #[test]
    fn metadata_that_is_not_an_object_is_refused_with_its_kind() {
        assert_eq!(
            from_wit(wit_message(Some("[1]"))).unwrap_err(),
            "metadata must be a JSON object, got an array"
        );
        assert!(
            from_wit(wit_message(Some("{")))
                .unwrap_err()
                .starts_with("metadata is not valid JSON")
        );
    }

    #[test]
    fn an_out_of_range_timestamp_is_refused() {
        let mut w = wit_message(None);
        w.timestamp = Some(wit::Timestamp {
            seconds: i64::MAX,
            nanoseconds: 0,
        });
        assert!(from_wit(w).unwrap_err().contains("out of range"));
    }
}
