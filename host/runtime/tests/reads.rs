//! What a 0.2.0 guest receives through each `history` method is the host's
//! history, field by field: the test guest `reads` logs every header and
//! message as `headers`, `messages`, `message`, `contents` and `content`
//! hand them over (the host lowers these without the generated bindings'
//! copies, and headers in one block: `src/v0_2/lower.rs`), and this test
//! writes the same lines from the host's messages.

use agent_host_core::message::{MediaRef, Part, Reasoning, Usage};
use agent_host_core::{HeuristicCounter, Message, Role};
use agent_host_runtime::{ProcessorOptions, RunInfo, Runtime, RuntimeConfig};
use chrono::{TimeZone, Utc};

/// Every field a message can carry, each set on some message and absent on
/// another: parts of all three kinds, reasoning with and without a
/// signature, usage with and without cache counts, flags, metadata, tool
/// calls and the results that answer them.
fn history() -> Vec<Message> {
    let mut system = Message::system("rules, with \"quotes\" and é").with_id("s");
    system.synthetic = true;
    let mut user = Message::user("look").with_id("u1");
    user.parts = vec![
        Part::Text {
            text: "look at this".into(),
        },
        Part::Image {
            source: MediaRef::Url("https://example.com/a.png".into()),
            mime_type: Some("image/png".into()),
        },
        Part::Image {
            source: MediaRef::Path("/tmp/b.jpg".into()),
            mime_type: None,
        },
        Part::File {
            name: "report.pdf".into(),
            path: "/tmp/report.pdf".into(),
            mime_type: Some("application/pdf".into()),
        },
    ];
    user.timestamp = Some(Utc.timestamp_opt(1_700_000_000, 123_456_789).unwrap());
    user.agent = Some("planner".into());
    user.channel = Some("slack".into());
    let mut call = Message::assistant("").with_id("a1");
    call.push_tool_call("c1", "search", r#"{"q": "x"}"#);
    call.push_tool_call("c2", "read", r#"{"path": "/etc"}"#);
    call.reasoning = Some(Reasoning {
        text: "think first".into(),
        signature: Some("sig==".into()),
        redacted: false,
    });
    call.usage = Some(Usage {
        input_tokens: 1_000_000_000_000,
        output_tokens: 42,
        cache_read_tokens: Some(7),
        cache_write_tokens: None,
    });
    call.model = Some("gpt-x".into());
    let mut failed = Message::tool_result("c2", "read", "denied").with_id("t2");
    failed.is_error = true;
    let mut summary = Message::assistant("what came before").with_id("sum");
    summary.summary = true;
    summary.reasoning = Some(Reasoning {
        text: String::new(),
        signature: None,
        redacted: true,
    });
    summary.usage = Some(Usage {
        input_tokens: 1,
        output_tokens: 2,
        cache_read_tokens: None,
        cache_write_tokens: Some(3),
    });
    summary
        .metadata
        .insert("k".into(), serde_json::json!({"deep": [1, 2], "s": "v"}));
    vec![
        system,
        user,
        call,
        Message::tool_result("c1", "search", "found ".repeat(300)).with_id("t1"),
        failed,
        summary,
        Message::user("next").with_id("u2"),
    ]
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn role(r: Role) -> u8 {
    match r {
        Role::System => 0,
        Role::User => 1,
        Role::Assistant => 2,
        Role::Tool => 3,
    }
}

fn flags(m: &Message) -> u8 {
    u8::from(m.synthetic) | u8::from(m.summary) << 1 | u8::from(m.is_error) << 2
}

fn timestamp(m: &Message) -> String {
    opt(m
        .timestamp
        .map(|t| format!("{}.{}", t.timestamp(), t.timestamp_subsec_nanos())))
}

fn usage(m: &Message) -> String {
    opt(m.usage.map(|u| {
        format!(
            "{}/{}/{}/{}",
            u.input_tokens,
            u.output_tokens,
            opt(u.cache_read_tokens),
            opt(u.cache_write_tokens)
        )
    }))
}

fn metadata(m: &Message) -> Option<String> {
    (!m.metadata.is_empty()).then(|| serde_json::to_string(&m.metadata).unwrap())
}

/// The lines the guest must log, written from the host's messages.
fn expected(history: &[Message]) -> Vec<String> {
    let counter = HeuristicCounter::default();
    // Which message's call each result answers, worked out by hand.
    let answers = [None, None, None, Some(2), Some(2), None, None];
    let mut lines = Vec::new();
    for (i, m) in history.iter().enumerate() {
        lines.push(format!(
            "h{i} role={} flags={} tokens={} ts={} answers={} calls={} parts={} content={} \
             reasoning={} metadata={} usage={}",
            role(m.role),
            flags(m),
            m.tokens(&counter),
            timestamp(m),
            opt(answers[i]),
            m.tool_calls.len(),
            m.parts.len(),
            m.content.len(),
            opt(m.reasoning.as_ref().map(|r| r.text.len())),
            metadata(m).map_or(0, |t| t.len()),
            usage(m),
        ));
    }
    let message = |m: &Message| {
        let parts: Vec<String> = m
            .parts
            .iter()
            .map(|p| match p {
                Part::Text { text } => format!("text:{text:?}"),
                Part::Image { source, mime_type } => format!(
                    "image:{}:{}",
                    match source {
                        MediaRef::Url(u) => format!("url:{u:?}"),
                        MediaRef::Path(p) => format!("path:{p:?}"),
                    },
                    opt(mime_type.as_ref())
                ),
                Part::File {
                    name,
                    path,
                    mime_type,
                } => format!("file:{name:?}:{path:?}:{}", opt(mime_type.as_ref())),
            })
            .collect();
        let calls: Vec<String> = m
            .tool_calls
            .iter()
            .map(|c| format!("{:?}:{:?}:{:?}", c.id, c.name, c.arguments))
            .collect();
        format!(
            "id={:?} role={} content={:?} parts=[{}] reasoning={} calls=[{}] call-id={} tool={} \
             usage={} model={} ts={} agent={} channel={} flags={} metadata={} tokens={}",
            m.id,
            role(m.role),
            m.content,
            parts.join(","),
            opt(m.reasoning.as_ref().map(|r| format!(
                "{:?}:{}:{}",
                r.text,
                opt(r.signature.as_ref()),
                r.redacted
            ))),
            calls.join(","),
            opt(m.tool_call_id.as_ref()),
            opt(m.tool_name.as_ref()),
            usage(m),
            opt(m.model.as_ref()),
            timestamp(m),
            opt(m.agent.as_ref()),
            opt(m.channel.as_ref()),
            flags(m),
            opt(metadata(m)),
            m.tokens(&counter),
        )
    };
    for (i, m) in history.iter().enumerate() {
        lines.push(format!("m{i} {}", message(m)));
    }
    for (i, m) in history.iter().enumerate() {
        lines.push(format!("one{i} {}", message(m)));
    }
    for (i, m) in history.iter().enumerate() {
        lines.push(format!("c{i} {:?}", m.content));
    }
    for (i, m) in history.iter().enumerate() {
        lines.push(format!("content{i} {:?}", m.content));
    }
    lines.push(
        "past the end: message=false content=false headers=0 messages=1 contents=0".to_owned(),
    );
    lines
}

#[test]
fn a_0_2_0_guest_reads_every_field_of_the_hosts_history() {
    let history = history();
    for pooling in [false, true] {
        let rt = Runtime::new(RuntimeConfig {
            cache_dir: None,
            pooling,
            ..RuntimeConfig::default()
        })
        .unwrap();
        let p = rt
            .load_file(
                agent_host_test_artifacts::READS.as_ref(),
                ProcessorOptions::default(),
            )
            .unwrap();
        assert_eq!(p.contract(), "0.2.0");
        // Twice: a pooled slot reused must not show the first call's bytes.
        for _ in 0..2 {
            let out = rt.run(
                std::slice::from_ref(&p),
                &RunInfo::default(),
                history.clone(),
            );
            let report = &out.reports[0];
            assert!(report.error.is_none(), "{:?}", report.error);
            let logs: Vec<&str> = report.logs.iter().map(|l| l.text.as_str()).collect();
            let expected = expected(&history);
            for (got, want) in logs.iter().zip(&expected) {
                assert_eq!(got, want, "pooling: {pooling}");
            }
            assert_eq!(logs.len(), expected.len(), "pooling: {pooling}");
            // Given back whole.
            assert_eq!(out.messages, history);
        }
    }
}
