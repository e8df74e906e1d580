//! The model providers against the loopback server, both wire formats,
//! streamed and not: what is sent, what comes back, and every way a request
//! can fail.

use agent_host_config::env_keys;
use std::time::{Duration, Instant};

use agent_host_core::{Message, Role};
use agent_host_provider::{
    ChatReply, ChatRequest, Provider, ProviderError, ProviderKind, ProviderSettings, StreamEvent,
};
use serde_json::{Value, json};

use crate::llm_server::{Answer, LlmServer, Recorded, Scripted, Wire, signature_for};

/// Every wire, streamed and not.
const CASES: [(Wire, bool); 4] = [
    (Wire::OpenAi, false),
    (Wire::OpenAi, true),
    (Wire::Anthropic, false),
    (Wire::Anthropic, true),
];

fn kind(wire: Wire) -> ProviderKind {
    match wire {
        Wire::OpenAi => ProviderKind::OpenAi,
        Wire::Anthropic => ProviderKind::Anthropic,
    }
}

/// Settings for `server`: no key, fast retries, a generous timeout.
fn settings(server: &LlmServer, wire: Wire, stream: bool) -> ProviderSettings {
    let mut settings = ProviderSettings::new(kind(wire), "test-model");
    settings.base_url = server.base_url();
    settings.api_key_env = None;
    settings.stream = stream;
    settings.timeout = Duration::from_secs(10);
    settings.max_retries = 2;
    settings.initial_backoff = Duration::from_millis(5);
    settings
}

fn provider(server: &LlmServer, wire: Wire, stream: bool) -> Provider {
    Provider::new(settings(server, wire, stream), &env_keys).expect("a provider")
}

fn conversation() -> Vec<Message> {
    vec![
        Message::system("You are terse."),
        Message::user("What is in src/?"),
    ]
}

/// Runs one request on a current-thread runtime; returns the result and
/// every event `on_event` saw.
fn complete(
    provider: &Provider,
    messages: Vec<Message>,
) -> (Result<ChatReply, ProviderError>, Vec<StreamEvent>) {
    let request = ChatRequest {
        messages,
        ..ChatRequest::default()
    };
    let mut events = Vec::new();
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(provider.complete(&request, &mut |e| events.push(e)));
    (result, events)
}

fn texts(events: &[StreamEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

fn retries(events: &[StreamEvent]) -> Vec<(u32, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retry {
                attempt, reason, ..
            } => Some((*attempt, reason.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_text_answer_carries_usage_and_the_servers_model() {
    for (wire, stream) in CASES {
        let case = format!("{wire:?} stream={stream}");
        let server = LlmServer::start(wire);
        let text = "The folder holds main.rs, lib.rs and a README — nothing else.";
        server.push(
            Answer::text(text)
                .with_usage(1234, 56)
                .with_model("server-model-7")
                .into(),
        );
        let (result, events) = complete(&provider(&server, wire, stream), conversation());
        let reply = result.unwrap_or_else(|e| panic!("{case}: {e}"));
        let m = &reply.message;
        assert_eq!(m.role, Role::Assistant, "{case}");
        assert_eq!(m.text(), text, "{case}");
        assert_eq!(m.id, "", "{case}: the caller names the message");
        assert!(m.timestamp.is_some(), "{case}");
        assert_eq!(m.model.as_deref(), Some("server-model-7"), "{case}");
        let usage = m.usage.unwrap_or_else(|| panic!("{case}: no usage"));
        assert_eq!(
            (usage.input_tokens, usage.output_tokens),
            (1234, 56),
            "{case}"
        );
        assert_eq!(reply.attempts, 1, "{case}");
        let expected_stop = if wire == Wire::OpenAi {
            "stop"
        } else {
            "end_turn"
        };
        assert_eq!(reply.stop_reason.as_deref(), Some(expected_stop), "{case}");
        if stream {
            let pieces = texts(&events);
            assert!(pieces.len() >= 3, "{case}: {pieces:?}");
            assert_eq!(pieces.concat(), text, "{case}: deltas in order");
        } else {
            assert!(events.is_empty(), "{case}: {events:?}");
        }
    }
}

#[test]
fn parallel_tool_calls_come_back_whole_and_their_results_are_accepted() {
    let calls = [
        (
            "call_a1",
            "read_file",
            r#"{"path": "src/main.rs", "limit": 40}"#,
        ),
        ("call_b2", "list_dir", r#"{"path": ".", "hidden": false}"#),
    ];
    for (wire, stream) in CASES {
        let case = format!("{wire:?} stream={stream}");
        let server = LlmServer::start(wire);
        server.push(Answer::tool_calls(&calls).into());
        server.push(Answer::text("main.rs starts the CLI.").into());
        let provider = provider(&server, wire, stream);
        let (result, events) = complete(&provider, conversation());
        let reply = result.unwrap_or_else(|e| panic!("{case}: {e}"));
        let got = &reply.message.tool_calls;
        assert_eq!(got.len(), 2, "{case}");
        for (call, (id, name, arguments)) in got.iter().zip(calls) {
            assert_eq!((call.id.as_str(), call.name.as_str()), (id, name), "{case}");
            let sent: Value = serde_json::from_str(arguments).unwrap();
            let back: Value = serde_json::from_str(&call.arguments)
                .unwrap_or_else(|e| panic!("{case}: {e}: {}", call.arguments));
            assert_eq!(back, sent, "{case}");
        }
        let expected_stop = if wire == Wire::OpenAi {
            "tool_calls"
        } else {
            "tool_use"
        };
        assert_eq!(reply.stop_reason.as_deref(), Some(expected_stop), "{case}");
        if stream {
            let names: Vec<&str> = events
                .iter()
                .filter_map(|e| match e {
                    StreamEvent::ToolCall { name } => Some(name.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(names, ["read_file", "list_dir"], "{case}");
        }

        // The next turn sends the calls and their results back; the strict
        // server refuses any pairing or ordering mistake.
        let mut messages = conversation();
        messages.push(reply.message.clone());
        messages.push(Message::tool_result("call_a1", "read_file", "fn main() {}"));
        messages.push(Message::tool_result(
            "call_b2",
            "list_dir",
            "src\nCargo.toml",
        ));
        let (result, _) = complete(&provider, messages);
        let reply = result.unwrap_or_else(|e| panic!("{case}: follow-up refused: {e}"));
        assert_eq!(reply.message.text(), "main.rs starts the CLI.", "{case}");
        let second = &server.requests()[1];
        let turns = second.messages();
        match wire {
            Wire::OpenAi => {
                let roles: Vec<&str> = turns.iter().map(|t| t["role"].as_str().unwrap()).collect();
                assert_eq!(
                    roles,
                    ["system", "user", "assistant", "tool", "tool"],
                    "{case}"
                );
                assert_eq!(turns[3]["tool_call_id"], "call_a1", "{case}");
            }
            Wire::Anthropic => {
                let results = turns.last().unwrap()["content"].as_array().unwrap();
                let ids: Vec<&str> = results
                    .iter()
                    .map(|b| b["tool_use_id"].as_str().unwrap())
                    .collect();
                assert_eq!(ids, ["call_a1", "call_b2"], "{case}");
            }
        }
    }
}

#[test]
fn reasoning_is_kept_with_its_signature_and_can_be_sent_back() {
    let thinking = "The user asks about src/. I should list it first, then answer.";
    for (wire, stream) in CASES {
        let case = format!("{wire:?} stream={stream}");
        let server = LlmServer::start(wire);
        server.push(
            Answer::text("It holds the sources.")
                .with_reasoning(thinking)
                .into(),
        );
        let provider = provider(&server, wire, stream);
        let (result, events) = complete(&provider, conversation());
        let reply = result.unwrap_or_else(|e| panic!("{case}: {e}"));
        let reasoning = reply.message.reasoning.clone().expect("reasoning");
        assert_eq!(reasoning.text, thinking, "{case}");
        assert!(!reasoning.redacted, "{case}");
        if wire == Wire::Anthropic {
            assert_eq!(reasoning.signature, Some(signature_for(thinking)), "{case}");
        }
        if stream {
            let pieces: Vec<&str> = events
                .iter()
                .filter_map(|e| match e {
                    StreamEvent::Reasoning(r) => Some(r.as_str()),
                    _ => None,
                })
                .collect();
            assert!(pieces.len() >= 2, "{case}");
            assert_eq!(pieces.concat(), thinking, "{case}");
            // Reasoning comes before the answer, as the model produced it.
            let first_text = events
                .iter()
                .position(|e| matches!(e, StreamEvent::Text(_)))
                .unwrap();
            assert!(
                matches!(events[0], StreamEvent::Reasoning(_)) && first_text > 0,
                "{case}"
            );
        }
        // Anthropic refuses a thinking block whose signature does not match.
        let mut messages = conversation();
        messages.push(reply.message);
        messages.push(Message::user("And tests/?"));
        let (result, _) = complete(&provider, messages);
        result.unwrap_or_else(|e| panic!("{case}: sending the reasoning back: {e}"));
    }
}

#[test]
fn a_rate_limit_is_retried_and_announced() {
    for (wire, stream) in CASES {
        let case = format!("{wire:?} stream={stream}");
        let server = LlmServer::start(wire);
        server.push(Scripted::RateLimited);
        server.push(Answer::text("finally").into());
        let (result, events) = complete(&provider(&server, wire, stream), conversation());
        let reply = result.unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(reply.message.text(), "finally", "{case}");
        assert_eq!(reply.attempts, 2, "{case}");
        let retries = retries(&events);
        assert_eq!(retries.len(), 1, "{case}: {events:?}");
        assert_eq!(retries[0].0, 2, "{case}");
        assert!(retries[0].1.starts_with("429"), "{case}: {}", retries[0].1);
        assert!(
            retries[0].1.to_lowercase().contains("rate limit"),
            "{case}: {}",
            retries[0].1
        );
        assert_eq!(server.requests().len(), 2, "{case}");
    }
}

#[test]
fn server_errors_past_the_retries_keep_the_providers_message() {
    for (wire, stream) in CASES {
        let case = format!("{wire:?} stream={stream}");
        let server = LlmServer::start(wire);
        for _ in 0..3 {
            server.push(Scripted::ServerError);
        }
        server.push(Answer::text("too late").into());
        let (result, events) = complete(&provider(&server, wire, stream), conversation());
        let expected = match wire {
            Wire::OpenAi => {
                "The server had an error while processing your request. Sorry about that!"
            }
            Wire::Anthropic => "Internal server error",
        };
        match result {
            Err(ProviderError::Status {
                status: 500,
                attempts: 3,
                message,
            }) => assert_eq!(message, expected, "{case}"),
            other => panic!("{case}: {other:?}"),
        }
        assert_eq!(retries(&events).len(), 2, "{case}");
        assert_eq!(server.requests().len(), 3, "{case}");
    }
}

#[test]
fn a_rate_limit_that_lasts_is_its_own_error() {
    let server = LlmServer::start(Wire::OpenAi);
    for _ in 0..3 {
        server.push(Scripted::RateLimited);
    }
    let (result, _) = complete(&provider(&server, Wire::OpenAi, false), conversation());
    match result {
        Err(ProviderError::RateLimited {
            attempts: 3,
            message,
        }) => {
            assert!(message.starts_with("Rate limit reached"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn errors_that_retrying_cannot_fix_are_not_retried() {
    for (wire, stream) in CASES {
        let case = format!("{wire:?} stream={stream}");
        let server = LlmServer::start(wire);
        server.push(Scripted::ContextLength);
        let (result, events) = complete(&provider(&server, wire, stream), conversation());
        match result {
            Err(ProviderError::ContextLength {
                status: 400,
                message,
            }) => {
                assert!(message.contains("210000"), "{case}: {message}")
            }
            other => panic!("{case}: {other:?}"),
        }
        assert!(events.is_empty(), "{case}");

        server.push(Scripted::Status {
            status: 400,
            body: match wire {
                Wire::OpenAi => json!({"error": {"message": "Unknown parameter: 'foo'.", "type": "invalid_request_error", "param": "foo", "code": "unknown_parameter"}}),
                Wire::Anthropic => json!({"type": "error", "error": {"type": "invalid_request_error", "message": "foo: Extra inputs are not permitted"}}),
            }
            .to_string(),
            retry_after: None,
        });
        let (result, _) = complete(&provider(&server, wire, stream), conversation());
        match result {
            Err(ProviderError::Status {
                status: 400,
                attempts: 1,
                message,
            }) => assert!(message.contains("foo"), "{case}: {message}"),
            other => panic!("{case}: {other:?}"),
        }
        assert_eq!(server.requests().len(), 2, "{case}: neither was retried");
    }
}

#[test]
fn a_refused_key_is_an_auth_error_with_the_providers_message() {
    for (wire, stream) in CASES {
        let case = format!("{wire:?} stream={stream}");
        let server = LlmServer::start(wire);
        server.require_key("sk-right-key");
        let wrong =
            Provider::with_api_key(settings(&server, wire, stream), Some("sk-wrong-key".into()))
                .unwrap();
        let (result, _) = complete(&wrong, conversation());
        match result {
            Err(ProviderError::Auth {
                status: 401,
                message,
            }) => {
                let expected = match wire {
                    Wire::OpenAi => "Incorrect API key provided: sk-...-key",
                    Wire::Anthropic => "invalid x-api-key",
                };
                assert!(message.contains(expected), "{case}: {message}");
            }
            other => panic!("{case}: {other:?}"),
        }
        assert_eq!(server.requests().len(), 1, "{case}: not retried");
        let right =
            Provider::with_api_key(settings(&server, wire, stream), Some("sk-right-key".into()))
                .unwrap();
        complete(&right, conversation())
            .0
            .unwrap_or_else(|e| panic!("{case}: {e}"));
    }
}

#[test]
fn a_body_that_is_not_the_wire_format_is_malformed() {
    for (wire, stream) in CASES {
        let case = format!("{wire:?} stream={stream}");
        let server = LlmServer::start(wire);
        server.push(Scripted::Malformed);
        let (result, _) = complete(&provider(&server, wire, stream), conversation());
        match result {
            Err(ProviderError::Malformed(message)) => {
                assert!(message.contains("not JSON"), "{case}: {message}")
            }
            other => panic!("{case}: {other:?}"),
        }
        // JSON, but not an answer: the error says what is missing.
        server.push(Scripted::Status {
            status: 200,
            body: r#"{"id": "x", "object": "list"}"#.into(),
            retry_after: None,
        });
        let (result, _) = complete(&provider(&server, wire, stream), conversation());
        let missing = match wire {
            Wire::OpenAi => "no `choices`",
            Wire::Anthropic => "no `content`",
        };
        match result {
            Err(ProviderError::Malformed(message)) => {
                assert!(message.contains(missing), "{case}: {message}")
            }
            other => panic!("{case}: {other:?}"),
        }
        assert_eq!(server.requests().len(), 2, "{case}: not retried");
    }
}

#[test]
fn a_stream_cut_off_after_text_is_not_retried() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let server = LlmServer::start(wire);
        server.push(Scripted::CutOff(Answer::text(
            "This answer is long enough to be cut off in the middle of it.",
        )));
        server.push(Answer::text("a second, different answer").into());
        let (result, events) = complete(&provider(&server, wire, true), conversation());
        match result {
            Err(ProviderError::Connect {
                attempts: 1,
                message,
                ..
            }) => assert!(
                message.contains("dropped during the stream"),
                "{wire:?}: {message}"
            ),
            other => panic!("{wire:?}: {other:?}"),
        }
        assert!(!texts(&events).is_empty(), "{wire:?}: text was shown");
        assert_eq!(
            server.requests().len(),
            1,
            "{wire:?}: a retry would show a second answer after the first"
        );
    }
}

#[test]
fn a_stream_that_ends_without_its_end_marker_is_malformed() {
    let server = LlmServer::start(Wire::OpenAi);
    server.push(Scripted::Events(vec![
        format!("data: {}\n\n", json!({"model": "m", "choices": [{"index": 0, "delta": {"content": "half an"}}]})),
        format!("data: {}\n\n", json!({"model": "m", "choices": [{"index": 0, "delta": {"content": " answer"}, "finish_reason": "stop"}]})),
    ]));
    let (result, events) = complete(&provider(&server, Wire::OpenAi, true), conversation());
    match result {
        Err(ProviderError::Malformed(message)) => {
            assert!(
                message.contains("without `data: [DONE]` after 2 event(s)"),
                "{message}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(texts(&events), ["half an", " answer"]);
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn an_error_event_in_a_stream_is_retried_only_before_any_text() {
    let event = |data: Value| {
        format!(
            "event: {}\ndata: {data}\n\n",
            data["type"].as_str().unwrap()
        )
    };
    let start = event(
        json!({"type": "message_start", "message": {"model": "claude-test", "usage": {"input_tokens": 3, "output_tokens": 1}}}),
    );
    let overloaded = event(
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    );
    let server = LlmServer::start(Wire::Anthropic);
    server.push(Scripted::Events(vec![start.clone(), overloaded.clone()]));
    server.push(Answer::text("after the overload").into());
    let (result, events) = complete(&provider(&server, Wire::Anthropic, true), conversation());
    let reply = result.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(reply.attempts, 2);
    assert!(
        retries(&events)[0].1.starts_with("529: Overloaded"),
        "{events:?}"
    );

    server.push(Scripted::Events(vec![
        start,
        event(json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})),
        event(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Half"}})),
        overloaded,
    ]));
    let (result, events) = complete(&provider(&server, Wire::Anthropic, true), conversation());
    match result {
        Err(ProviderError::Status {
            status: 529,
            attempts: 1,
            message,
        }) => assert_eq!(message, "Overloaded"),
        other => panic!("{other:?}"),
    }
    assert_eq!(texts(&events), ["Half"]);
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn a_connection_dropped_before_any_text_is_retried() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let server = LlmServer::start(wire);
        server.push(Scripted::CutOff(Answer::text("lost")));
        server.push(Answer::text("kept").into());
        let (result, events) = complete(&provider(&server, wire, false), conversation());
        let reply = result.unwrap_or_else(|e| panic!("{wire:?}: {e}"));
        assert_eq!(reply.message.text(), "kept");
        assert_eq!(reply.attempts, 2);
        assert_eq!(retries(&events).len(), 1, "{wire:?}");
    }
}

#[test]
fn a_server_that_does_not_answer_times_out() {
    for (wire, stream) in CASES {
        let case = format!("{wire:?} stream={stream}");
        let server = LlmServer::start(wire);
        server.push(Scripted::Hang(Duration::from_secs(5)));
        let mut settings = settings(&server, wire, stream);
        settings.timeout = Duration::from_millis(300);
        let started = Instant::now();
        let (result, _) = complete(&Provider::new(settings, &env_keys).unwrap(), conversation());
        let took = started.elapsed();
        match result {
            Err(ProviderError::Timeout {
                url, attempts: 1, ..
            }) => {
                assert!(url.starts_with(&server.base_url()), "{case}: {url}")
            }
            other => panic!("{case}: {other:?}"),
        }
        assert!(took < Duration::from_secs(2), "{case}: took {took:?}");
    }
}

#[test]
fn an_unreachable_server_is_a_connect_error_after_the_retries() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut settings = ProviderSettings::new(ProviderKind::OpenAi, "m");
    settings.base_url = format!("http://127.0.0.1:{port}/v1");
    settings.api_key_env = None;
    settings.max_retries = 1;
    settings.initial_backoff = Duration::from_millis(1);
    let (result, events) = complete(&Provider::new(settings, &env_keys).unwrap(), conversation());
    match result {
        Err(ProviderError::Connect {
            attempts: 2, url, ..
        }) => {
            assert_eq!(url, format!("http://127.0.0.1:{port}/v1/chat/completions"))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(retries(&events).len(), 1);
}

#[test]
fn a_missing_key_variable_is_named() {
    for kind in [ProviderKind::OpenAi, ProviderKind::Anthropic] {
        let mut settings = ProviderSettings::new(kind, "m");
        settings.api_key_env = Some("AGENT_HOST_TEST_KEY_THAT_IS_NEVER_SET".into());
        let err = Provider::new(settings, &env_keys).unwrap_err();
        assert_eq!(
            err,
            ProviderError::MissingKey {
                kind,
                var: "AGENT_HOST_TEST_KEY_THAT_IS_NEVER_SET".into()
            }
        );
        assert!(
            err.to_string()
                .contains("AGENT_HOST_TEST_KEY_THAT_IS_NEVER_SET")
        );
    }
}

fn tool_definition() -> Value {
    json!({"type": "function", "function": {
        "name": "read_file",
        "description": "Reads a file of the workspace.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    }})
}

fn sent(wire: Wire, stream: bool, request: ChatRequest, temperature: Option<f32>) -> Recorded {
    let server = LlmServer::start(wire);
    let mut settings = settings(&server, wire, stream);
    settings.tools = vec![tool_definition()];
    settings.temperature = temperature;
    let provider = Provider::with_api_key(settings, Some("sk-test-123".into())).unwrap();
    let mut events = Vec::new();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(provider.complete(&request, &mut |e| events.push(e)))
        .unwrap_or_else(|e| panic!("{wire:?}: {e}"));
    server.requests().remove(0)
}

#[test]
fn the_openai_request_is_what_the_wire_expects() {
    let request = ChatRequest {
        messages: conversation(),
        ..ChatRequest::default()
    };
    let r = sent(Wire::OpenAi, true, request.clone(), Some(0.7));
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(r.header("authorization"), Some("Bearer sk-test-123"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.body["model"], "test-model");
    assert_eq!(r.body["max_tokens"], 4096);
    assert_eq!(r.body["temperature"], json!(0.7));
    assert_eq!(r.body["stream"], true);
    assert_eq!(r.body["stream_options"], json!({"include_usage": true}));
    assert_eq!(r.body["tools"], json!([tool_definition()]));
    assert_eq!(
        r.body["messages"],
        json!([{"role": "system", "content": "You are terse."},
               {"role": "user", "content": "What is in src/?"}])
    );

    // Per-call overrides: no tools (summaries), a smaller answer, no stream.
    let summary = ChatRequest {
        no_tools: true,
        max_tokens: Some(300),
        stream: Some(false),
        temperature: Some(0.0),
        ..request
    };
    let r = sent(Wire::OpenAi, true, summary, Some(0.7));
    assert_eq!(r.body["stream"], false);
    assert!(r.body.get("stream_options").is_none(), "{}", r.body);
    assert!(r.body.get("tools").is_none(), "{}", r.body);
    assert_eq!(r.body["max_tokens"], 300);
    assert_eq!(r.body["temperature"], json!(0.0));
}

#[test]
fn the_anthropic_request_is_what_the_wire_expects() {
    let request = ChatRequest {
        messages: conversation(),
        max_tokens: Some(1000),
        ..ChatRequest::default()
    };
    let r = sent(Wire::Anthropic, true, request.clone(), None);
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(r.header("x-api-key"), Some("sk-test-123"));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(
        r.header("authorization"),
        None,
        "the key goes in x-api-key only"
    );
    assert_eq!(r.body["model"], "test-model");
    assert_eq!(r.body["max_tokens"], 1000);
    assert_eq!(r.body["stream"], true);
    assert!(r.body.get("temperature").is_none());
    assert_eq!(r.body["system"], "You are terse.");
    assert_eq!(
        r.body["messages"],
        json!([{"role": "user", "content": "What is in src/?"}])
    );
    assert_eq!(
        r.body["tools"],
        json!([{"name": "read_file", "description": "Reads a file of the workspace.",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}])
    );
    let r = sent(
        Wire::Anthropic,
        true,
        ChatRequest {
            no_tools: true,
            stream: Some(false),
            ..request
        },
        Some(0.3),
    );
    assert_eq!(r.body["stream"], false);
    assert!(r.body.get("tools").is_none());
    assert_eq!(r.body["temperature"], json!(0.3));
}

#[test]
fn a_request_the_wire_cannot_take_fails_before_sending() {
    // A user message carrying tool calls has no Anthropic form.
    let server = LlmServer::start(Wire::Anthropic);
    let mut bad = Message::user("hi");
    bad.push_tool_call("c1", "ls", "{}");
    let (result, _) = complete(&provider(&server, Wire::Anthropic, false), vec![bad]);
    assert!(
        matches!(result, Err(ProviderError::Request(_))),
        "{result:?}"
    );
    assert!(server.requests().is_empty());
}

#[test]
fn the_default_script_numbers_its_replies_and_respond_with_routes() {
    let server = LlmServer::start(Wire::OpenAi);
    let provider = provider(&server, Wire::OpenAi, false);
    let (first, _) = complete(&provider, conversation());
    assert_eq!(first.unwrap().message.text(), "reply 1");
    server.respond_with(|r| {
        if r.contains("Summarize") {
            Answer::text("a summary").into()
        } else {
            Answer::text("an answer").into()
        }
    });
    let (summary, _) = complete(&provider, vec![Message::user("Summarize this.")]);
    assert_eq!(summary.unwrap().message.text(), "a summary");
    let (other, _) = complete(&provider, conversation());
    assert_eq!(other.unwrap().message.text(), "an answer");
}

/// The path of the wire's endpoint under `server`.
fn endpoint(server: &LlmServer, wire: Wire) -> String {
    match wire {
        Wire::OpenAi => format!("{}/chat/completions", server.base_url()),
        Wire::Anthropic => format!("{}/v1/messages", server.base_url()),
    }
}

/// Security issue: reqwest followed redirects to any origin, and reqwest
/// strips only `Authorization`, so Anthropic's `x-api-key` (and, on a 307,
/// the whole conversation) went to whatever server the redirect named.
#[test]
fn a_redirect_to_another_origin_is_refused_and_sends_nothing_there() {
    for (wire, stream) in CASES {
        let case = format!("{wire:?} stream={stream}");
        let server = LlmServer::start(wire);
        let elsewhere = LlmServer::start(wire);
        server.push(Scripted::Redirect(endpoint(&elsewhere, wire)));
        let provider = Provider::with_api_key(
            settings(&server, wire, stream),
            Some("sk-redirect-key".into()),
        )
        .unwrap();
        let (result, events) = complete(&provider, conversation());
        let origin = |s: &LlmServer| {
            let url = s.base_url();
            url.trim_end_matches("/v1").to_owned()
        };
        match result {
            Err(ProviderError::Redirect { from, to }) => {
                assert_eq!(from, origin(&server), "{case}");
                assert_eq!(to, origin(&elsewhere), "{case}");
            }
            other => panic!("{case}: {other:?}"),
        }
        assert_eq!(
            elsewhere.requests(),
            Vec::new(),
            "{case}: the other origin got a request"
        );
        assert_eq!(
            server.requests().len(),
            1,
            "{case}: a refused redirect is not retried"
        );
        assert!(retries(&events).is_empty(), "{case}: {events:?}");
    }
}

#[test]
fn a_redirect_within_the_origin_is_followed_with_the_request() {
    for (wire, stream) in CASES {
        let case = format!("{wire:?} stream={stream}");
        let server = LlmServer::start(wire);
        server.require_key("sk-same-origin");
        server.push(Scripted::Redirect(endpoint(&server, wire)));
        server.push(Answer::text("moved, answered").into());
        let provider = Provider::with_api_key(
            settings(&server, wire, stream),
            Some("sk-same-origin".into()),
        )
        .unwrap();
        let (result, _) = complete(&provider, conversation());
        let reply = result.unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(reply.message.text(), "moved, answered", "{case}");
        let requests = server.requests();
        assert_eq!(requests.len(), 2, "{case}");
        assert_eq!(
            requests[1].body, requests[0].body,
            "{case}: the 307 resends the body"
        );
    }
}

#[test]
fn a_redirect_loop_within_the_origin_ends_in_an_error() {
    let wire = Wire::OpenAi;
    let server = LlmServer::start(wire);
    let target = endpoint(&server, wire);
    server.respond_with(move |_| Scripted::Redirect(target.clone()));
    let (result, _) = complete(&provider(&server, wire, false), conversation());
    match result {
        Err(ProviderError::Connect { message, .. }) => {
            assert!(message.contains("redirects"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    // The first request and five redirects; no retry.
    assert_eq!(server.requests().len(), 6);
}

/// Issue: the timeout limited a streamed answer in all, so a long answer
/// that streamed steadily was cut. For a stream it is now the longest
/// silence (and the wait for the stream to start).
#[test]
fn a_slow_stream_longer_than_the_timeout_completes() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let server = LlmServer::start(wire);
        let text = "A long answer that arrives in pieces, steadily, for longer than the timeout.";
        server.push(Scripted::SlowStream {
            answer: Answer::text(text),
            every: Duration::from_millis(200),
        });
        let mut settings = settings(&server, wire, true);
        settings.timeout = Duration::from_secs(1);
        let started = Instant::now();
        let (result, events) =
            complete(&Provider::new(settings, &env_keys).unwrap(), conversation());
        let took = started.elapsed();
        let reply = result.unwrap_or_else(|e| panic!("{wire:?} after {took:?}: {e}"));
        assert_eq!(reply.message.text(), text, "{wire:?}");
        assert_eq!(texts(&events).concat(), text, "{wire:?}");
        assert!(
            took > Duration::from_millis(1_300),
            "{wire:?}: the stream took {took:?}, not longer than the timeout"
        );
    }
}

#[test]
fn a_stream_that_goes_silent_for_longer_than_the_timeout_times_out() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let server = LlmServer::start(wire);
        server.push(Scripted::Stall {
            answer: Answer::text("Half of this arrives, then nothing for a long while."),
            silence: Duration::from_secs(3),
        });
        let mut settings = settings(&server, wire, true);
        settings.timeout = Duration::from_millis(500);
        let started = Instant::now();
        let (result, _) = complete(&Provider::new(settings, &env_keys).unwrap(), conversation());
        let took = started.elapsed();
        assert!(
            matches!(result, Err(ProviderError::Timeout { attempts: 1, .. })),
            "{wire:?}: {result:?}"
        );
        assert!(took < Duration::from_secs(2), "{wire:?}: took {took:?}");
    }
}

/// A server that answers every request with `head` and then zeros without
/// end; returns its base URL and a count of the body bytes it managed to
/// send before the client hung up.
fn endless_body_server(
    head: &'static str,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let sent = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = sent.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let counter = counter.clone();
            std::thread::spawn(move || {
                let mut request = [0u8; 65536];
                let _ = stream.read(&mut request);
                if stream.write_all(head.as_bytes()).is_err() {
                    return;
                }
                let zeros = vec![b'0'; 1 << 16];
                while stream.write_all(&zeros).is_ok() {
                    counter.fetch_add(zeros.len(), Ordering::Relaxed);
                }
            });
        }
    });
    (url, sent)
}

/// Hardening issue, item 8: a 1 GiB error body was read whole (2.1 GB of
/// memory); an endless answer was too. Both are read up to a cap, then the
/// connection is dropped.
#[test]
fn an_endless_error_or_answer_body_is_read_only_up_to_a_cap() {
    for (head, expect) in [
        (
            "HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ncontent-length: 1073741824\r\n\r\n",
            "500",
        ),
        (
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1073741824\r\n\r\n",
            "larger than 64 MiB",
        ),
    ] {
        let (url, sent) = endless_body_server(head);
        let mut settings = ProviderSettings::new(ProviderKind::OpenAi, "test-model");
        settings.base_url = url;
        settings.api_key_env = None;
        settings.stream = false;
        settings.max_retries = 0;
        settings.timeout = Duration::from_secs(60);
        let provider = Provider::new(settings, &env_keys).unwrap();
        let (result, _) = complete(&provider, conversation());
        let error = result.expect_err("the answer is refused").to_string();
        assert!(error.contains(expect), "{error}");
        // What the server got out before the client hung up: the cap plus
        // the sockets' buffers, far from the gigabyte it offered.
        std::thread::sleep(Duration::from_millis(200));
        let sent = sent.load(std::sync::atomic::Ordering::Relaxed);
        assert!(sent < 100 << 20, "{sent} bytes were read for {expect}");
    }
}
