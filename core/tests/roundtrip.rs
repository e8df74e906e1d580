//! Property: writing messages in a format and reading them back is the
//! identity (for the native log), or keeps everything the format can carry.

use agent_host_core::format::{self, Format, anthropic, jsonl, openai};
use agent_host_core::{MediaRef, Message, Part, Reasoning, Role, ToolCall, Usage};
use chrono::{DateTime, TimeZone, Utc};
use proptest::prelude::*;
use serde_json::{Map, Value};

fn text() -> impl Strategy<Value = String> {
    // Any Unicode, including quotes, backslashes, control characters and CJK.
    prop_oneof![any::<String>(), "[a-z \"\\\\\n\t日本]{0,40}"]
}

fn timestamp() -> impl Strategy<Value = Option<DateTime<Utc>>> {
    proptest::option::of((0i64..4_000_000_000, 0u32..1_000).prop_map(|(secs, ms)| {
        Utc.timestamp_opt(secs, ms * 1_000_000)
            .single()
            .expect("in range")
    }))
}

fn part() -> impl Strategy<Value = Part> {
    prop_oneof![
        text().prop_map(|text| Part::Text { text }),
        "https://[a-z]{1,10}/[a-z]{0,10}".prop_map(|url| Part::Image {
            source: MediaRef::Url(url),
            mime_type: None,
        }),
        (text(), text()).prop_map(|(name, path)| Part::File {
            name,
            path,
            mime_type: None
        }),
    ]
}

fn metadata() -> impl Strategy<Value = Map<String, Value>> {
    proptest::collection::btree_map("[a-z]{1,8}", text(), 0..3)
        .prop_map(|m| m.into_iter().map(|(k, v)| (k, Value::String(v))).collect())
}

prop_compose! {
    fn message()(
        role in prop_oneof![Just(Role::System), Just(Role::User), Just(Role::Assistant), Just(Role::Tool)],
        id in "[a-zA-Z0-9_-]{1,20}",
        content in text(),
        parts in proptest::collection::vec(part(), 0..3),
        reasoning in proptest::option::of((text(), proptest::option::of(text()), any::<bool>())),
        calls in proptest::collection::vec((text(), text(), text()), 0..3),
        call_id in text(),
        tool_name in proptest::option::of(text()),
        is_error in any::<bool>(),
        usage in proptest::option::of((any::<u32>(), any::<u32>(), proptest::option::of(any::<u32>()))),
        model in proptest::option::of(text()),
        timestamp in timestamp(),
        agent in proptest::option::of(text()),
        channel in proptest::option::of(text()),
        flags in (any::<bool>(), any::<bool>()),
        metadata in metadata(),
    ) -> Message {
        let mut m = Message::new(role, content).with_id(id);
        m.parts = parts;
        m.reasoning = reasoning.map(|(text, signature, redacted)| Reasoning { text, signature, redacted });
        m.tool_calls = calls.into_iter().map(|(id, name, arguments)| ToolCall { id, name, arguments }).collect();
        if role == Role::Tool {
            m.tool_call_id = Some(call_id);
            m.tool_name = tool_name;
            m.is_error = is_error;
        }
        m.usage = usage.map(|(i, o, c)| Usage {
            input_tokens: i.into(),
            output_tokens: o.into(),
            cache_read_tokens: c.map(Into::into),
            cache_write_tokens: None,
        });
        m.model = model;
        m.timestamp = timestamp;
        m.agent = agent;
        m.channel = channel;
        (m.synthetic, m.summary) = flags;
        m.metadata = metadata;
        m
    }
}

/// Fields an OpenAI reader keeps under `"openai"`: the writer's own fields
/// among them (which it must skip, but for a `developer` role), others it
/// writes after its own.
fn openai_extras() -> impl Strategy<Value = Option<Value>> {
    let key = prop_oneof![
        Just("role"),
        Just("name"),
        Just("content"),
        Just("tool_calls"),
        Just("tool_call_id"),
        Just("reasoning_content"),
        Just("refusal"),
        Just("audio"),
    ];
    let value = prop_oneof![
        Just(Value::String("developer".into())),
        Just(Value::Null),
        text().prop_map(Value::String),
        Just(serde_json::json!({"data": [1, 2.5, {"x": null}], "id": "a"})),
    ];
    proptest::option::of(
        proptest::collection::vec((key, value), 0..4).prop_map(|fields| {
            Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
        }),
    )
}

proptest! {
    /// The OpenAI writer serializes straight from the messages (issue 23);
    /// `to_values` builds the same document as `Value`s, the reference.
    #[test]
    fn openai_writer_writes_what_to_values_builds(
        messages in proptest::collection::vec((message(), openai_extras()), 0..8),
    ) {
        let messages: Vec<Message> = messages
            .into_iter()
            .map(|(mut m, extras)| {
                if let Some(extras) = extras {
                    m.metadata.insert(openai::EXTRA_KEY.into(), extras);
                }
                m
            })
            .collect();
        let values = Value::Array(openai::to_values(&messages).unwrap());
        let reference = format::to_pretty(&values).unwrap() + "\n";
        prop_assert_eq!(format::write(Format::OpenAi, &messages).unwrap(), reference);
        prop_assert_eq!(openai::write_compact(&messages).unwrap(), serde_json::to_string(&values).unwrap());
    }

    #[test]
    fn native_log_round_trip_is_the_identity(messages in proptest::collection::vec(message(), 0..8)) {
        let text = jsonl::to_string(&messages);
        prop_assert_eq!(text.lines().count(), messages.len());
        prop_assert_eq!(jsonl::parse(&text).unwrap(), messages);
    }

    #[test]
    fn openai_round_trip_keeps_what_openai_carries(messages in proptest::collection::vec(message(), 0..8)) {
        // What OpenAI has a place for: roles, text, parts, tool calls, tool
        // linkage, readable reasoning.
        let expected: Vec<Message> = messages.iter().map(|m| {
            let mut keep = Message::new(m.role, m.content.clone());
            keep.parts = m.parts.clone();
            if !keep.parts.is_empty() && !keep.content.is_empty() {
                // Text beside parts is written as the first text part.
                let text = std::mem::take(&mut keep.content);
                keep.parts.insert(0, Part::Text { text });
            }
            keep.reasoning = m.reasoning.clone().filter(|r| !r.redacted)
                .map(|r| Reasoning { text: r.text, ..Reasoning::default() });
            keep.tool_calls = m.tool_calls.clone();
            keep.tool_call_id = m.tool_call_id.clone();
            keep.tool_name = m.tool_name.clone();
            keep
        }).collect();
        // A tool result without a name takes it from the latest call of its id.
        let mut expected = expected;
        let mut names = std::collections::HashMap::new();
        for m in &mut expected {
            for c in &m.tool_calls {
                names.insert(c.id.clone(), c.name.clone());
            }
            if m.role == Role::Tool && m.tool_name.is_none() {
                m.tool_name = m.tool_call_id.as_ref().and_then(|id| names.get(id)).cloned();
            }
        }
        let back = openai::from_value(Value::Array(openai::to_values(&messages).unwrap())).unwrap();
        let back: Vec<Message> = back.into_iter().map(|m| m.with_id("")).collect();
        prop_assert_eq!(back, expected);
    }

    #[test]
    fn anthropic_writing_never_panics_and_keeps_every_tool_call(messages in proptest::collection::vec(message(), 0..8)) {
        // Writing may refuse (arguments that are not JSON, a result without
        // its call id), but never panics, and what it writes reads back.
        if let Ok(request) = anthropic::to_request(&messages) {
            let back = anthropic::from_value(request).unwrap();
            let calls = |ms: &[Message]| ms.iter().map(|m| m.tool_calls.len()).sum::<usize>();
            prop_assert_eq!(calls(&back), calls(&messages));
        }
    }
}
