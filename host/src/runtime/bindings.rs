//! The host side of the `agent-host:history@0.1.0` contract: the generated
//! bindings and the conversions between the WIT message and the core one.

use agent_host_core::{MediaRef, Message, Part, Reasoning, Role, TokenCounter, ToolCall, Usage};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use wasmtime::component::{ComponentType, Lower};

wasmtime::component::bindgen!({
    path: "../wit/v0.1.0",
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
#[cfg(test)]
pub(crate) fn to_wit(m: &Message, counter: &dyn TokenCounter) -> wit::Message {
    let flags = flags_of(m);
    wit::Message {
        id: m.id.clone(),
        role: role_to_wit(m.role),
        content: m.content.clone(),
        parts: m.parts.iter().map(part_to_wit).collect(),
        reasoning: m.reasoning.as_ref().map(|r| wit::Reasoning {
            text: r.text.clone(),
            signature: r.signature.clone(),
            redacted: r.redacted,
        }),
        tool_calls: m
            .tool_calls
            .iter()
            .map(|c| wit::ToolCall {
                id: c.id.clone(),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            })
            .collect(),
        tool_call_id: m.tool_call_id.clone(),
        tool_name: m.tool_name.clone(),
        usage: m.usage.map(usage_to_wit),
        model: m.model.clone(),
        timestamp: m.timestamp.map(timestamp_to_wit),
        agent: m.agent.clone(),
        channel: m.channel.clone(),
        flags,
        metadata: metadata_text(m),
        tokens: m.tokens(counter),
    }
}

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

#[cfg(test)]
fn media_to_wit(m: &MediaRef) -> wit::MediaSource {
    match m {
        MediaRef::Url(u) => wit::MediaSource::Url(u.clone()),
        MediaRef::Path(p) => wit::MediaSource::Path(p.clone()),
    }
}

#[cfg(test)]
fn part_to_wit(p: &Part) -> wit::Part {
    match p {
        Part::Text { text } => wit::Part::Text(text.clone()),
        Part::Image { source, mime_type } => wit::Part::Image(wit::Image {
            source: media_to_wit(source),
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

#[cfg(test)]
mod tests {
    use super::*;
    use agent_host_core::HeuristicCounter;
    use serde_json::json;

    #[test]
    fn a_message_survives_the_round_trip_through_wit() {
        let mut m = Message::assistant("Reading.").with_id("a1");
        m.push_tool_call("c1", "read", r#"{"path":"x"}"#);
        m.reasoning = Some(Reasoning {
            text: "think".into(),
            signature: Some("sig".into()),
            redacted: false,
        });
        m.parts.push(Part::Image {
            source: MediaRef::Url("https://x/y.png".into()),
            mime_type: Some("image/png".into()),
        });
        m.usage = Some(Usage {
            input_tokens: 10,
            output_tokens: 2,
            cache_read_tokens: Some(3),
            cache_write_tokens: None,
        });
        m.timestamp = DateTime::from_timestamp(1_700_000_000, 123);
        m.synthetic = true;
        m.metadata.insert("k".into(), json!({"nested": [1, 2]}));
        let w = to_wit(&m, &HeuristicCounter::default());
        assert!(w.tokens > 0);
        assert_eq!(from_wit(w).unwrap(), m);
    }

    #[test]
    fn metadata_that_is_not_an_object_is_refused_with_its_kind() {
        let mut w = to_wit(&Message::user("hi"), &HeuristicCounter::default());
        w.metadata = Some("[1]".into());
        assert_eq!(
            from_wit(w.clone()).unwrap_err(),
            "metadata must be a JSON object, got an array"
        );
        w.metadata = Some("{".into());
        assert!(
            from_wit(w)
                .unwrap_err()
                .starts_with("metadata is not valid JSON")
        );
    }
}
