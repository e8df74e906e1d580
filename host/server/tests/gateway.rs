//! The gateway driven by the official OpenAI and Anthropic Python SDKs
//! (pinned, installed by `tests/gateway/sdks.sh` into a virtual
//! environment) over real HTTP, in front of the loopback model server.
//!
//! Each conversation resends its whole history on every request, as real
//! agents do; the tests check what the SDKs got back, what the upstream
//! received, and that the store holds every message once.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use agent_host_engine::{Engine, EngineConfig};
use agent_host_provider::{ProviderKind, ProviderSettings};
use agent_host_server::{Server, ServerConfig};
use agent_host_store::{FileStore, SessionRef, SessionStore};
use agent_host_testkit::model_server::{Answer, LlmServer, Scripted, Wire};
use serde_json::{Value, json};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The python of the SDKs' environment, installed once per test run. Off
/// CI, a machine that cannot install it skips these tests with a note.
fn sdk_python() -> Option<PathBuf> {
    client_python("sdks")
}

/// The python of a set of clients `tests/gateway/sdks.sh` installs (`sdks`,
/// `pydantic-ai`), installed once per test run; `None` (with a note) off CI
/// when it cannot be.
fn client_python(set: &'static str) -> Option<PathBuf> {
    static PYTHONS: std::sync::Mutex<Vec<(&str, Option<PathBuf>)>> =
        std::sync::Mutex::new(Vec::new());
    let mut pythons = PYTHONS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, python)) = pythons.iter().find(|(s, _)| *s == set) {
        return python.clone();
    }
    let out = Command::new("bash")
        .arg(repo().join("tests/gateway/sdks.sh"))
        .arg(set)
        .output()
        .expect("bash runs");
    let python = if out.status.success() {
        let text = String::from_utf8(out.stdout).unwrap();
        Some(PathBuf::from(text.lines().last().unwrap().trim()))
    } else {
        let why = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            std::env::var_os("CI").is_none(),
            "the {set} clients could not be installed under CI: {why}"
        );
        eprintln!("skipped: the {set} clients could not be installed: {why}");
        None
    };
    pythons.push((set, python.clone()));
    python
}

struct Gateway {
    base: String,
    store: Arc<dyn SessionStore>,
    upstream: LlmServer,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    _dir: tempfile::TempDir,
}

impl Gateway {
    async fn start(wire: Wire) -> Gateway {
        Self::start_with(wire, EngineConfig::default()).await
    }

    async fn start_with(wire: Wire, config: EngineConfig) -> Gateway {
        Self::start_full(wire, config, ServerConfig::default()).await
    }

    async fn start_full(wire: Wire, config: EngineConfig, server: ServerConfig) -> Gateway {
        let upstream = LlmServer::start(wire);
        let dir = tempfile::tempdir().unwrap();
        Self::start_on(upstream, dir, config, server).await
    }

    /// A gateway whose one upstream serves OpenAI Responses itself (and
    /// Chat Completions), on a file store of its own.
    async fn start_responses_native() -> Gateway {
        let upstream = LlmServer::start(Wire::OpenAi);
        let mut settings = ProviderSettings::new(ProviderKind::OpenAi, "test-model");
        settings.base_url = upstream.base_url();
        settings.api_key_env = None;
        let provider = agent_host_provider::Provider::new(settings, &|_: &str| None).unwrap();
        let server = ServerConfig {
            upstreams: vec![agent_host_server::gateway::Upstream {
                name: "default".into(),
                provider,
                models: Vec::new(),
                default: true,
                responses: true,
            }],
            ..ServerConfig::default()
        };
        let dir = tempfile::tempdir().unwrap();
        Self::start_on(upstream, dir, EngineConfig::default(), server).await
    }

    /// A gateway in front of `upstream` on the file store in `dir`.
    async fn start_on(
        upstream: LlmServer,
        dir: tempfile::TempDir,
        config: EngineConfig,
        server: ServerConfig,
    ) -> Gateway {
        let kind = match upstream.wire() {
            Wire::OpenAi => ProviderKind::OpenAi,
            Wire::Anthropic => ProviderKind::Anthropic,
        };
        let mut provider = ProviderSettings::new(kind, "test-model");
        provider.base_url = upstream.base_url();
        provider.api_key_env = None;
        let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(dir.path()).unwrap());
        let engine = Engine::new(
            EngineConfig {
                provider: Some(provider),
                ..config
            },
            store.clone(),
            &|_: &str| None,
        )
        .unwrap();
        let server = Server::new(engine, server).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(server.serve(listener, async {
            let _ = stopped.await;
        }));
        Gateway {
            base,
            store,
            upstream,
            stop: Some(stop),
            task: Some(task),
            _dir: dir,
        }
    }

    /// Shuts the server down gracefully and starts another on the same
    /// store, in front of the same upstream.
    async fn restart(self) -> Gateway {
        self.restart_with(EngineConfig::default()).await
    }

    /// [`Gateway::restart`] with the engine configured by `config`.
    async fn restart_with(mut self, config: EngineConfig) -> Gateway {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap().unwrap();
        let dir = tempfile::TempDir::new().unwrap();
        let old = std::mem::replace(&mut self._dir, dir);
        let upstream = std::mem::replace(&mut self.upstream, LlmServer::start(Wire::OpenAi));
        Self::start_on(upstream, old, config, ServerConfig::default()).await
    }

    /// Runs a scenario of `tests/gateway/clients.py`; its printed JSON.
    async fn client(&self, python: &Path, scenario: &str) -> Value {
        let mut command = tokio::process::Command::new(python);
        command
            .arg(repo().join("tests/gateway/clients.py"))
            .arg(&self.base)
            .arg(scenario);
        let out = command.output().await.expect("python runs");
        assert!(
            out.status.success(),
            "{scenario}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{scenario} printed no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    /// Waits until every request of session `key` ended (an answer is
    /// stored just after the client has it).
    async fn settle(&self, key: &str) {
        for _ in 0..500 {
            let reply = reqwest::get(format!("{}/v1/sessions/{key}/requests", self.base))
                .await
                .unwrap();
            if reply.status() == 200 {
                let listed: Value = reply.json().await.unwrap();
                let busy = listed["requests"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r["outcome"] == "in_progress");
                if !busy {
                    return;
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("the requests of {key} did not end");
    }

    /// Request record `n` of the session `key` (a key or an id), as the
    /// API shows it.
    async fn record(&self, key: &str, n: u64) -> Value {
        reqwest::get(format!("{}/v1/sessions/{key}/requests/{n}", self.base))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    fn session(&self, key: &str) -> Vec<agent_host_core::Message> {
        let reference = SessionRef::Key {
            agent: agent_host_store::DEFAULT_AGENT.to_owned(),
            key: key.to_owned(),
        };
        self.store.load(&reference).unwrap().messages
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The roles of [`script`]'s conversation as stored: the system prompt, the
/// question, the call and its result, the answer, the next question and
/// its answer.
const CONVERSATION_ROLES: [&str; 7] = [
    "system",
    "user",
    "assistant",
    "tool",
    "assistant",
    "user",
    "assistant",
];

/// The upstream's three answers: a tool call, then two texts.
fn script(upstream: &LlmServer) {
    upstream.push(Answer::tool_calls(&[("call_1", "read_file", r#"{"path":"a.rs"}"#)]).into());
    upstream.push(
        Answer::text("It holds an empty main.")
            .with_usage(30, 7)
            .into(),
    );
    upstream.push(Answer::text("Nothing else.").with_usage(40, 3).into());
}

/// Checks one three-request conversation end to end, the upstream
/// speaking `wire` (the scenario's client the same wire, or the other,
/// translated).
async fn conversation(wire: Wire, scenario: &str) {
    let Some(python) = sdk_python() else { return };
    let gateway = Gateway::start(wire).await;
    script(&gateway.upstream);
    let got = gateway.client(&python, scenario).await;
    let turns = got["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 3, "{got}");

    // What the SDKs read: the upstream's answers, as it sent them.
    assert_eq!(turns[0]["calls"][0]["name"], "read_file", "{got}");
    assert_eq!(turns[0]["calls"][0]["id"], "call_1", "{got}");
    let arguments: Value =
        serde_json::from_str(turns[0]["calls"][0]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"path": "a.rs"}));
    assert_eq!(turns[1]["text"], "It holds an empty main.", "{got}");
    assert_eq!(turns[2]["text"], "Nothing else.", "{got}");
    let anthropic_client = scenario.starts_with("anthropic");
    let (input, output) = if anthropic_client {
        ("input_tokens", "output_tokens")
    } else {
        ("prompt_tokens", "completion_tokens")
    };
    assert_eq!(turns[1]["usage"][input], 30, "{got}");
    assert_eq!(turns[1]["usage"][output], 7, "{got}");
    assert_eq!(
        turns[0]["finish"],
        if anthropic_client {
            "tool_use"
        } else {
            "tool_calls"
        },
        "{got}"
    );
    if scenario.ends_with("stream") && anthropic_client {
        let events: Vec<&str> = turns[1]["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap())
            .collect();
        assert_eq!(events.first(), Some(&"message_start"), "{events:?}");
        assert_eq!(events.last(), Some(&"message_stop"), "{events:?}");
    }

    // The headers say which session and what the pipeline did.
    let key = format!("sdk-{scenario}");
    let headers = &turns[2]["headers"];
    assert_eq!(headers["x-agent-host-session-key"], key.as_str(), "{got}");
    assert_eq!(headers["x-agent-host-session-source"], "header", "{got}");
    assert_eq!(headers["x-agent-host-request"], "3", "{got}");
    assert!(
        headers["x-agent-host-tokens-after"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > 0,
        "{got}"
    );

    // The upstream got each request whole, the history growing by the new
    // messages only.
    let sent = gateway.upstream.requests();
    assert_eq!(sent.len(), 3);
    assert_eq!(
        sent[0].streamed(),
        scenario.ends_with("stream"),
        "the stream flag went upstream"
    );
    assert!(sent[2].contains("It holds an empty main."));
    assert!(sent[2].contains("fn main() {}"));
    assert!(
        sent[2].contains("read_file"),
        "the client's tools went upstream"
    );
    if wire == Wire::Anthropic {
        // Prompt-cache breakpoints: the system prompt and the newest turns,
        // never more than the API takes.
        for request in &sent {
            let marks = request.body.to_string().matches("cache_control").count();
            assert!(
                (2..=4).contains(&marks),
                "{marks} breakpoints: {}",
                request.body
            );
            assert!(
                request.body["system"][0]["cache_control"].is_object(),
                "{}",
                request.body
            );
        }
    }

    // Every message stored once, in order, with the answers' usage.
    gateway.settle(&key).await;
    let stored = gateway.session(&key);
    let roles: Vec<&str> = stored.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, CONVERSATION_ROLES, "{stored:#?}");
    assert_eq!(stored[2].tool_calls[0].id, "call_1");
    assert_eq!(stored[4].content, "It holds an empty main.");
    assert_eq!(stored[4].usage.map(|u| u.input_tokens), Some(30));
    assert_eq!(stored[6].content, "Nothing else.");
    assert!(
        stored
            .iter()
            .all(|m| m.channel.as_deref() == Some("gateway"))
    );

    // The request's record names what was stored and sent.
    let record = gateway.record(&key, 3).await;
    assert_eq!(record["outcome"], "stored", "{record}");
    assert_eq!(record["known"], 5, "{record}");
    assert_eq!(record["appended"].as_array().unwrap().len(), 1, "{record}");
    assert_eq!(record["reply"], stored[6].id.as_str(), "{record}");
    assert_eq!(record["sent"].as_array().unwrap().len(), 6, "{record}");
    // The pipeline's stage says where its time went, step by step.
    let steps: Vec<&str> = record["stages"][0]["step_times"]
        .as_array()
        .unwrap_or_else(|| panic!("no step times: {record}"))
        .iter()
        .map(|t| t["step"].as_str().unwrap())
        .collect();
    assert_eq!(steps.first(), Some(&"read"), "{record}");
    assert_eq!(steps.last(), Some(&"view"), "{record}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_sdk_conversation() {
    conversation(Wire::OpenAi, "openai").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_sdk_streamed_conversation() {
    conversation(Wire::OpenAi, "openai-stream").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_sdk_conversation() {
    conversation(Wire::Anthropic, "anthropic").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_sdk_streamed_conversation() {
    conversation(Wire::Anthropic, "anthropic-stream").await;
}

/// Issue 17: a Chat Completions client in front of an Anthropic upstream,
/// translated both ways (tool calls, usage, the stream).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_sdk_conversation_in_front_of_anthropic() {
    conversation(Wire::Anthropic, "openai").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_sdk_streamed_conversation_in_front_of_anthropic() {
    conversation(Wire::Anthropic, "openai-stream").await;
}

/// Issue 17: an Anthropic Messages client in front of a Chat Completions
/// upstream (llama.cpp, DeepSeek), translated both ways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_sdk_conversation_in_front_of_chat_completions() {
    conversation(Wire::OpenAi, "anthropic").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_sdk_streamed_conversation_in_front_of_chat_completions() {
    conversation(Wire::OpenAi, "anthropic-stream").await;
}

/// An upstream error reaches the SDK with its status and message; the
/// user's message is stored, no answer is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_errors_reach_the_sdks_as_they_were() {
    let Some(python) = sdk_python() else { return };
    for (wire, scenario) in [
        (Wire::OpenAi, "openai-error"),
        (Wire::Anthropic, "anthropic-error"),
        // Each client in front of the other wire: its own error shape.
        (Wire::Anthropic, "openai-error"),
        (Wire::OpenAi, "anthropic-error"),
    ] {
        let gateway = Gateway::start(wire).await;
        gateway.upstream.push(Scripted::Status {
            status: 418,
            body: json!({"error": {"type": "teapot", "message": "short and stout"}}).to_string(),
            retry_after: None,
        });
        let got = gateway.client(&python, scenario).await;
        assert_eq!(got["status"], 418, "{got}");
        assert!(
            got["message"].as_str().unwrap().contains("short and stout"),
            "{got}"
        );
        gateway.settle(&format!("sdk-{scenario}")).await;
        let stored = gateway.session(&format!("sdk-{scenario}"));
        assert_eq!(stored.len(), 1, "{stored:#?}");
        assert_eq!(stored[0].content, "hello");
    }
}

async fn post(
    base: &str,
    body: Value,
    headers: &[(&str, &str)],
) -> (u16, Value, reqwest::header::HeaderMap) {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .json(&body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let reply = request.send().await.unwrap();
    let status = reply.status().as_u16();
    let headers = reply.headers().clone();
    (status, reply.json().await.unwrap_or(Value::Null), headers)
}

/// A plain client (no session id) stays in one session by the fingerprint
/// of its leading messages; one that rewrites its history goes to a branch
/// and the first session keeps its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fingerprints_keep_a_plain_client_in_one_session_and_rewrites_branch() {
    let gateway = Gateway::start(Wire::OpenAi).await;
    let base = gateway.base.clone();
    let first = json!({"model": "m", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"}]});
    let (status, reply, headers) = post(&base, first, &[]).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(headers["x-agent-host-session-source"], "fingerprint");
    let key = headers["x-agent-host-session-key"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(key.starts_with("fp-"), "{key}");
    let answer = reply["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned();

    let second = json!({"model": "m", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": "Again"}]});
    let (status, _, headers) = post(&base, second, &[]).await;
    assert_eq!(status, 200);
    assert_eq!(headers["x-agent-host-session-key"].to_str().unwrap(), key);
    gateway.settle(&key).await;
    assert_eq!(gateway.session(&key).len(), 5);

    // The same start, another answer in the middle: a branch.
    let rewritten = json!({"model": "m", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "something else"},
        {"role": "user", "content": "Again"}]});
    let (status, _, headers) = post(&base, rewritten.clone(), &[]).await;
    assert_eq!(status, 200);
    let branch = headers["x-agent-host-session-key"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(branch.starts_with(&format!("{key}~")), "{branch}");
    assert_eq!(headers["x-agent-host-branched-from"].to_str().unwrap(), key);
    assert_eq!(
        gateway.session(&key).len(),
        5,
        "the first session is untouched"
    );
    gateway.settle(&branch).await;
    let branched = gateway.session(&branch);
    assert_eq!(branched.len(), 5, "{branched:#?}");
    assert_eq!(branched[2].content, "something else");

    // The branch's client goes on in the branch.
    let mut more = rewritten;
    let answer = gateway.session(&branch)[4].content.clone();
    more["messages"].as_array_mut().unwrap().extend([
        json!({"role": "assistant", "content": answer}),
        json!({"role": "user", "content": "Once more"}),
    ]);
    let (_, _, headers) = post(&base, more, &[]).await;
    assert_eq!(
        headers["x-agent-host-session-key"].to_str().unwrap(),
        branch
    );
    gateway.settle(&branch).await;
    assert_eq!(gateway.session(&branch).len(), 7);
}

/// Bad requests are refused in the wire's own error shape, naming what is
/// wrong, and store nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_in_the_wires_shape() {
    let gateway = Gateway::start(Wire::OpenAi).await;
    let base = gateway.base.clone();
    for (body, says) in [
        (json!({"model": "m"}), "`messages` is missing"),
        (json!({"model": "m", "messages": []}), "`messages` is empty"),
        (
            json!({"model": "m", "messages": "hi"}),
            "`messages` must be an array",
        ),
        (
            json!({"model": "m", "messages": [{"content": "x"}]}),
            "`messages`",
        ),
        (
            json!({"model": 5, "messages": [{"role": "user", "content": "x"}]}),
            "`model` must be a string",
        ),
        (json!([1, 2]), "not a JSON object"),
    ] {
        let (status, reply, _) = post(&base, body.clone(), &[]).await;
        assert_eq!(status, 400, "{body}: {reply}");
        assert_eq!(reply["error"]["type"], "invalid_request_error", "{reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{body}: {message}");
    }
    let long = "k".repeat(600);
    let (status, reply, _) = post(
        &base,
        json!({"messages": [{"role": "user", "content": "x"}]}),
        &[("x-session-id", &long)],
    )
    .await;
    assert_eq!(status, 400, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 512")
    );
    // The other wire's endpoint is translated, but a tool only Anthropic
    // runs cannot go to this upstream: refused in Anthropic's shape, naming
    // the tool, before anything is stored.
    let reply = reqwest::Client::new()
        .post(format!("{base}/v1/messages"))
        .json(&json!({"model": "m", "max_tokens": 5,
                      "tools": [{"type": "web_search_20250305", "name": "web_search"}],
                      "messages": [{"role": "user", "content": "x"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status().as_u16(), 400);
    let reply: Value = reply.json().await.unwrap();
    assert_eq!(reply["type"], "error");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("`tools[0]`") && message.contains("web_search"),
        "{reply}"
    );
    assert!(gateway.upstream.requests().is_empty());
    let listed: Value = reqwest::get(format!("{base}/v1/sessions"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 0, "{listed}");
}

/// A client that hangs up mid-stream drops the upstream request; nothing
/// of the answer is stored, and the record says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_mid_stream_stores_no_half_answer() {
    let gateway = Gateway::start(Wire::OpenAi).await;
    let long = "word ".repeat(40);
    gateway.upstream.push(Scripted::SlowStream {
        answer: Answer::text(&long),
        every: std::time::Duration::from_millis(50),
    });
    let mut reply = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gateway.base))
        .header("x-session-id", "hangs-up")
        .json(&json!({"model": "m", "stream": true,
                      "messages": [{"role": "user", "content": "talk"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    let first = reply.chunk().await.unwrap().expect("a first piece");
    assert!(String::from_utf8_lossy(&first).contains("data:"));
    drop(reply);
    // Longer than the whole answer would have taken to arrive.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let stored = gateway.session("hangs-up");
    assert_eq!(stored.len(), 1, "only the question: {stored:#?}");
    let record = gateway.record("hangs-up", 1).await;
    assert_eq!(record["outcome"], "client_disconnected", "{record}");
    // The session is free again: the next request goes through.
    let (status, _, _) = post(
        &gateway.base,
        json!({"model": "m", "messages": [{"role": "user", "content": "talk"}]}),
        &[("x-session-id", "hangs-up")],
    )
    .await;
    assert_eq!(status, 200);
    gateway.settle("hangs-up").await;
    assert_eq!(
        gateway.session("hangs-up").len(),
        2,
        "the question once, and the answer"
    );
}

/// A client that hangs up before a whole answer arrives (the upstream
/// still thinking) drops the upstream request with it: its question is
/// stored, nothing of an answer, the record says why instead of staying in
/// progress, and the session is free for its next request. Regression: the
/// record stayed `in_progress` for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_before_a_whole_answer_leaves_a_record_that_says_so() {
    let gateway = Gateway::start(Wire::OpenAi).await;
    gateway
        .upstream
        .push(Scripted::Hang(std::time::Duration::from_secs(3)));
    let gone = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gateway.base))
        .header("x-session-id", "hangs-up-early")
        .timeout(std::time::Duration::from_millis(500))
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "think"}]}))
        .send()
        .await;
    assert!(gone.is_err(), "the client gave up first");
    gateway.settle("hangs-up-early").await;
    let record = gateway.record("hangs-up-early", 1).await;
    assert_eq!(record["outcome"], "client_disconnected", "{record}");
    assert_eq!(gateway.session("hangs-up-early").len(), 1, "the question");
    gateway.upstream.push(Answer::text("Done.").into());
    let (status, _, _) = post(
        &gateway.base,
        json!({"model": "m", "messages": [{"role": "user", "content": "think"}]}),
        &[("x-session-id", "hangs-up-early")],
    )
    .await;
    assert_eq!(status, 200);
    gateway.settle("hangs-up-early").await;
    assert_eq!(gateway.session("hangs-up-early").len(), 2);
}

/// Reads a Chat Completions stream: its text and tool calls.
fn read_stream(text: &str) -> (String, Vec<(String, String, String)>) {
    let mut answer = String::new();
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for line in text.lines() {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            continue;
        }
        let chunk: Value = serde_json::from_str(data).unwrap();
        for choice in chunk["choices"].as_array().unwrap() {
            let delta = &choice["delta"];
            answer.push_str(delta["content"].as_str().unwrap_or(""));
            for call in delta["tool_calls"].as_array().into_iter().flatten() {
                let index = call["index"].as_u64().unwrap() as usize;
                if calls.len() <= index {
                    calls.resize(index + 1, Default::default());
                }
                let entry = &mut calls[index];
                entry.0.push_str(call["id"].as_str().unwrap_or(""));
                entry
                    .1
                    .push_str(call["function"]["name"].as_str().unwrap_or(""));
                entry
                    .2
                    .push_str(call["function"]["arguments"].as_str().unwrap_or(""));
            }
        }
    }
    (answer, calls)
}

/// Issue 17: a client replays 200 turns of real conversations into a
/// 4,000-token window, streaming. Every upstream request is valid
/// (the model server refuses bad role order and broken tool pairs), every
/// answer arrives as the upstream sent it, and the session holds every
/// message once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_real_conversation_through_a_small_window() {
    use agent_host_core::budget::BudgetConfig;
    use agent_host_core::pipeline::PipelineConfig;
    use agent_host_core::{Message, Role};

    let Some(corpus) = agent_host_testkit::corpus_dir() else {
        eprintln!("skipped: no corpus");
        return;
    };
    // The corpus' longest single conversation has 62 messages: one airline
    // agent's conversations (the same system prompt each time) are chained
    // into one session, as a long-running agent serving one customer
    // after another would have it, until it holds 200 answers.
    let text = std::fs::read_to_string(corpus.join("tau-bench-gpt4o-airline/gpt-4o-airline.json"))
        .unwrap();
    let runs: Vec<Value> = serde_json::from_str(&text).unwrap();
    let mut conversation: Vec<Message> = Vec::new();
    for run in runs {
        let messages = agent_host_core::format::openai::from_value(run["traj"].clone()).unwrap();
        let skip = usize::from(!conversation.is_empty() && messages[0].role == Role::System);
        conversation.extend(messages.into_iter().skip(skip).filter(|m| {
            m.role != Role::Assistant || !m.text().trim().is_empty() || !m.tool_calls.is_empty()
        }));
        if conversation
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count()
            >= 200
        {
            break;
        }
    }
    // It ends with the 200th answer.
    let mut answered = 0;
    let last = conversation
        .iter()
        .position(|m| {
            answered += usize::from(m.role == Role::Assistant);
            answered == 200
        })
        .expect("200 answers");
    conversation.truncate(last + 1);
    let answers: Vec<Message> = conversation
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .cloned()
        .collect();
    assert_eq!(answers.len(), 200);

    let mut pipeline = PipelineConfig::default();
    pipeline.budget = BudgetConfig {
        context_limit: 4_000,
        response_reserve: 500,
        ..pipeline.budget
    };
    let gateway = Gateway::start_with(
        Wire::OpenAi,
        EngineConfig {
            pipeline,
            ..EngineConfig::default()
        },
    )
    .await;
    let scripted: Vec<Answer> = answers
        .iter()
        .map(|m| {
            let mut answer = Answer::text(m.text().as_ref());
            for call in &m.tool_calls {
                answer = answer.with_tool_call(&call.id, &call.name, &call.arguments);
            }
            answer
        })
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    gateway.upstream.respond_with(move |_| {
        let n = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Scripted::Answer(scripted[n].clone())
    });

    let http = reqwest::Client::new();
    let mut sent = 0;
    for (i, m) in conversation.iter().enumerate() {
        if m.role != Role::Assistant {
            continue;
        }
        let mut history = agent_host_core::format::openai::to_values(&conversation[..i]).unwrap();
        for h in &mut history {
            h.as_object_mut().unwrap().remove("reasoning_content");
        }
        let reply = http
            .post(format!("{}/v1/chat/completions", gateway.base))
            .header("x-session-id", "long")
            .json(&json!({"model": "m", "stream": true, "messages": history}))
            .send()
            .await
            .unwrap();
        let status = reply.status();
        let text = reply.text().await.unwrap();
        assert_eq!(status, 200, "turn {sent}: {text}");
        let (answer, calls) = read_stream(&text);
        assert_eq!(answer, m.text().as_ref(), "turn {sent}");
        let expected: Vec<(String, String, String)> = m
            .tool_calls
            .iter()
            .map(|c| (c.id.clone(), c.name.clone(), c.arguments.clone()))
            .collect();
        assert_eq!(calls, expected, "turn {sent}");
        sent += 1;
    }
    assert_eq!(sent, answers.len());
    assert_eq!(gateway.upstream.requests().len(), sent);

    gateway.settle("long").await;
    let stored = gateway.session("long");
    let said: Vec<&Message> = stored.iter().filter(|m| !m.summary).collect();
    assert_eq!(said.len(), conversation.len(), "every message once");
    for (kept, original) in said.iter().zip(&conversation) {
        assert!(
            agent_host_core::reconcile::same(kept, original),
            "{kept:#?} != {original:#?}"
        );
    }
    let summaries = stored.iter().filter(|m| m.summary).count();
    assert!(
        summaries > 0,
        "a 4,000-token window makes the gateway summarize"
    );
}

/// With `--anonymous pass-through`, a request that names no session is
/// fitted and sent on, and nothing is stored; one that names a session is
/// stored as ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_requests_pass_through_when_asked() {
    let gateway = Gateway::start_full(
        Wire::OpenAi,
        EngineConfig::default(),
        ServerConfig {
            anonymous: agent_host_server::gateway::Anonymous::PassThrough,
            ..ServerConfig::default()
        },
    )
    .await;
    let body = json!({"model": "m", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"}]});
    let (status, reply, headers) = post(&gateway.base, body.clone(), &[]).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(headers["x-agent-host-session-source"], "none");
    assert!(headers.get("x-agent-host-session").is_none());
    assert_eq!(gateway.upstream.requests().len(), 1);
    let listed: Value = reqwest::get(format!("{}/v1/sessions", gateway.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 0, "{listed}");

    let (status, _, headers) = post(&gateway.base, body, &[("x-session-id", "named")]).await;
    assert_eq!(status, 200);
    assert_eq!(headers["x-agent-host-session-source"], "header");
    gateway.settle("named").await;
    assert_eq!(gateway.session("named").len(), 3);
}

/// Request records are kept in the store: after a restart the session's
/// requests are listed and readable, and the next one is numbered after
/// them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_records_outlive_a_restart() {
    let gateway = Gateway::start(Wire::OpenAi).await;
    let mut messages = vec![
        json!({"role": "system", "content": "Be brief."}),
        json!({"role": "user", "content": "Hi"}),
    ];
    for _ in 0..2 {
        let body = json!({"model": "m", "messages": messages});
        let (status, reply, _) = post(&gateway.base, body, &[("x-session-id", "kept")]).await;
        assert_eq!(status, 200, "{reply}");
        messages.push(reply["choices"][0]["message"].clone());
        messages.push(json!({"role": "user", "content": "And?"}));
    }
    gateway.settle("kept").await;
    let before = gateway.record("kept", 2).await;
    assert_eq!(before["outcome"], "stored", "{before}");

    let gateway = gateway.restart().await;
    let after = gateway.record("kept", 2).await;
    assert_eq!(after, before);
    let page = reqwest::get(format!("{}/", gateway.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("2 gateway requests"), "{page}");

    let body = json!({"model": "m", "messages": messages});
    let (status, reply, headers) = post(&gateway.base, body, &[("x-session-id", "kept")]).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(headers["x-agent-host-request"], "3");
    gateway.settle("kept").await;
    let listed: Value = reqwest::get(format!("{}/v1/sessions/kept/requests", gateway.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let numbers: Vec<u64> = listed["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["n"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [1, 2, 3]);
}

/// Checks a Responses conversation driven by the official OpenAI SDK
/// (`client.responses.create`, streamed or not) against the gateway in
/// front of an upstream of `wire`: a tool call, its output sent with
/// `previous_response_id`, and a text turn; the session the responses
/// continue is the one they were made in.
async fn responses_conversation(wire: Wire, scenario: &str) {
    responses_conversation_to(wire, false, scenario).await;
}

/// [`responses_conversation`], `native` with an upstream that serves
/// Responses itself: then the requests go to it in that wire.
async fn responses_conversation_to(wire: Wire, native: bool, scenario: &str) {
    let Some(python) = sdk_python() else { return };
    let gateway = if native {
        Gateway::start_responses_native().await
    } else {
        Gateway::start(wire).await
    };
    script(&gateway.upstream);
    let got = gateway.client(&python, scenario).await;
    let turns = got["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 3, "{got}");

    // What the SDK read: Responses objects made of the upstream's answers.
    assert_eq!(turns[0]["items"], json!(["function_call"]), "{got}");
    assert_eq!(turns[0]["calls"][0]["name"], "read_file", "{got}");
    assert_eq!(turns[0]["calls"][0]["id"], "call_1", "{got}");
    let arguments: Value =
        serde_json::from_str(turns[0]["calls"][0]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"path": "a.rs"}));
    assert_eq!(turns[1]["text"], "It holds an empty main.", "{got}");
    assert_eq!(turns[1]["items"], json!(["message"]), "{got}");
    assert_eq!(turns[1]["usage"]["input_tokens"], 30, "{got}");
    assert_eq!(turns[1]["usage"]["output_tokens"], 7, "{got}");
    assert_eq!(turns[1]["usage"]["total_tokens"], 37, "{got}");
    assert_eq!(turns[2]["text"], "Nothing else.", "{got}");
    for (i, turn) in turns.iter().enumerate() {
        assert_eq!(turn["status"], "completed", "{got}");
        assert!(turn["id"].as_str().unwrap().starts_with("resp_"), "{got}");
        if i > 0 {
            assert_eq!(turn["previous"], turns[i - 1]["id"], "{got}");
        }
    }
    if scenario.ends_with("stream") {
        let mut events: Vec<&str> = turns[0]["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap())
            .collect();
        // The upstream's own events: its arguments in several deltas.
        events.dedup();
        assert_eq!(
            events,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed"
            ],
            "{got}"
        );
        let events: Vec<&str> = turns[2]["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap())
            .collect();
        assert!(
            events.contains(&"response.output_text.delta")
                && events.contains(&"response.content_part.done"),
            "{events:?}"
        );
        // The SDK's own stream helper put the second answer together.
        assert!(
            turns[1]["events"]
                .as_array()
                .unwrap()
                .contains(&json!("response.output_text.done")),
            "{got}"
        );
    }
    // Continuing from an older response is refused, not answered with the
    // newer turns in tow.
    assert_eq!(got["fork"]["status"], 409, "{got}");

    // The three requests went to one session: found by the fingerprint,
    // then by the response each continued.
    let headers = &turns[2]["headers"];
    assert_eq!(
        headers["x-agent-host-session-source"], "previous_response_id",
        "{got}"
    );
    let key = headers["x-agent-host-session-key"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(key.starts_with("fp-"), "{key}");
    assert_eq!(
        turns[0]["headers"]["x-agent-host-session-key"],
        key.as_str()
    );

    // The upstream got each request in its own wire, the history growing by
    // the new items only.
    let sent = gateway.upstream.requests();
    assert_eq!(sent.len(), 3, "{sent:#?}");
    assert_eq!(sent[0].streamed(), scenario.ends_with("stream"));
    match wire {
        Wire::OpenAi if native => {
            // The whole view each time, as the upstream's own items, and
            // nothing it would have to keep.
            for request in &sent {
                assert_eq!(request.path, "/v1/responses");
                assert!(request.body.get("previous_response_id").is_none());
                assert_eq!(request.body["store"], false);
                assert!(request.contains("reasoning.encrypted_content"));
            }
            assert_eq!(sent[0].body["tools"][0]["name"], "read_file");
            let input = sent[2].body["input"].as_array().unwrap();
            assert_eq!(input[0]["role"], "system", "{}", sent[2].body);
            assert!(input[0].to_string().contains("You read files."));
            let kinds: Vec<&str> = input
                .iter()
                .map(|i| i["type"].as_str().unwrap_or("message"))
                .collect();
            assert_eq!(
                kinds,
                [
                    "message",
                    "message",
                    "function_call",
                    "function_call_output",
                    "message",
                    "message"
                ],
                "{}",
                sent[2].body
            );
        }
        Wire::OpenAi => {
            assert_eq!(sent[0].body["tools"][0]["function"]["name"], "read_file");
            assert_eq!(sent[2].body["messages"][0]["role"], "system");
            assert_eq!(sent[2].body["messages"][0]["content"], "You read files.");
            assert_eq!(sent[2].messages().len(), 6, "{}", sent[2].body);
        }
        Wire::Anthropic => {
            assert_eq!(sent[0].body["tools"][0]["name"], "read_file");
            assert!(sent[0].body["tools"][0]["input_schema"].is_object());
            assert!(sent[2].body.to_string().contains("You read files."));
            assert!(sent[0].body["max_tokens"].is_u64());
        }
    }
    assert!(sent[2].contains("fn main() {}"));
    assert!(sent[2].contains("It holds an empty main."));
    assert_eq!(
        sent[2].body.to_string().matches("You read files.").count(),
        1,
        "the instructions once: {}",
        sent[2].body
    );

    // Every message stored once, the answers with their response ids.
    gateway.settle(&key).await;
    let stored = gateway.session(&key);
    let roles: Vec<&str> = stored.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant"
        ],
        "{stored:#?}"
    );
    assert_eq!(stored[3].tool_call_id.as_deref(), Some("call_1"));
    for (at, turn) in [(2, &turns[0]), (4, &turns[1]), (6, &turns[2])] {
        assert_eq!(
            stored[at].metadata["gateway"]["response_id"], turn["id"],
            "{stored:#?}"
        );
        assert_eq!(stored[at].metadata["gateway"]["upstream"], "default");
    }
    let record = gateway.record(&key, 3).await;
    assert_eq!(record["wire"], "responses", "{record}");
    assert_eq!(record["outcome"], "stored", "{record}");
    assert_eq!(record["identified_by"], "previous_response_id", "{record}");
    assert_eq!(record["appended"].as_array().unwrap().len(), 1, "{record}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_sdk_conversation() {
    responses_conversation(Wire::OpenAi, "responses").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_sdk_streamed_conversation() {
    responses_conversation(Wire::OpenAi, "responses-stream").await;
}

/// A Responses client in front of an upstream that serves Responses
/// itself: its requests go there untranslated, its answers come back as
/// the upstream sent them, made this gateway's (ids, the response each
/// continues).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_sdk_conversation_with_a_responses_upstream() {
    responses_conversation_to(Wire::OpenAi, true, "responses").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_sdk_streamed_conversation_with_a_responses_upstream() {
    responses_conversation_to(Wire::OpenAi, true, "responses-stream").await;
}

/// A Responses client in front of an Anthropic upstream: translated both
/// ways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_sdk_conversation_in_front_of_anthropic() {
    responses_conversation(Wire::Anthropic, "responses-stream").await;
}

async fn post_to(base: &str, path: &str, body: Value) -> (u16, Value) {
    let reply = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = reply.status().as_u16();
    (status, reply.json().await.unwrap_or(Value::Null))
}

/// Malformed Responses requests get a 400 naming the field and the item's
/// index, and reach neither the upstream nor the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_responses_requests_name_the_field_and_item() {
    let gateway = Gateway::start(Wire::OpenAi).await;
    let base = gateway.base.clone();
    let unknown = format!("resp_{}", "ab".repeat(24));
    for (body, says) in [
        (json!({"model": "m"}), "`input` is missing"),
        (json!({"input": 5}), "`input` must be a string or an array"),
        (
            json!({"input": [{"role": "user", "content": "hi"}, 7]}),
            "`input[1]`",
        ),
        (
            json!({"input": [{"role": "user", "content": "hi"},
                             {"type": "function_call", "call_id": "c", "arguments": "{}"}]}),
            "`input[1]`: a `function_call` item needs a string `name`",
        ),
        (
            json!({"input": [{"type": "function_call_output", "call_id": "c"}]}),
            "`input[0]`",
        ),
        (
            json!({"input": [{"type": "message", "role": "robot", "content": "x"}]}),
            "robot",
        ),
        (
            json!({"input": "hi", "tools": [{"type": "web_search"}]}),
            "`tools[0]`",
        ),
        (json!({"input": "hi", "instructions": 3}), "`instructions`"),
        (
            json!({"input": "hi", "previous_response_id": "resp_1"}),
            "`previous_response_id`",
        ),
        (
            json!({"input": "hi", "previous_response_id": unknown}),
            "no session holds",
        ),
        (
            json!({"input": "hi", "previous_response_id": unknown, "conversation": "c"}),
            "cannot both be given",
        ),
        (json!({"input": "hi", "conversation": 5}), "`conversation`"),
    ] {
        let (status, reply) = post_to(&base, "/v1/responses", body.clone()).await;
        assert_eq!(status, 400, "{body}: {reply}");
        assert_eq!(reply["error"]["type"], "invalid_request_error", "{reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{body}: {message}");
    }
    assert!(gateway.upstream.requests().is_empty());
}

/// A `conversation` names the session: each request appends its input to
/// it, whatever the client resends of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_id_names_the_session() {
    let gateway = Gateway::start(Wire::OpenAi).await;
    gateway.upstream.push(Answer::text("One.").into());
    gateway.upstream.push(Answer::text("Two.").into());
    let base = gateway.base.clone();
    let (status, first) = post_to(
        &base,
        "/v1/responses",
        json!({"model": "m", "input": "First?", "conversation": {"id": "conv_7"}}),
    )
    .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["conversation"]["id"], "conv_7");
    assert_eq!(first["output"][0]["content"][0]["text"], "One.");
    let (status, second) = post_to(
        &base,
        "/v1/responses",
        json!({"model": "m", "input": "Second?", "conversation": "conv_7"}),
    )
    .await;
    assert_eq!(status, 200, "{second}");
    gateway.settle("conv_7").await;
    let stored: Vec<String> = gateway
        .session("conv_7")
        .iter()
        .map(|m| m.content.clone())
        .collect();
    assert_eq!(stored, ["First?", "One.", "Second?", "Two."]);
    let sent = gateway.upstream.requests();
    assert_eq!(sent[1].messages().len(), 3, "{}", sent[1].body);
}

/// README's framework, through the gateway: a pydantic-ai agent (pinned,
/// over the OpenAI SDK it needs) with a tool, its second run continuing the
/// first's messages, streamed. The agent gets the upstream's answers, and
/// the session holds every message once though pydantic-ai resends them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pydantic_ai_agent_through_the_gateway() {
    let Some(python) = client_python("pydantic-ai") else {
        return;
    };
    let gateway = Gateway::start(Wire::OpenAi).await;
    script(&gateway.upstream);
    let out = tokio::process::Command::new(&python)
        .arg(repo().join("tests/gateway/pydantic_ai_client.py"))
        .arg(&gateway.base)
        .output()
        .await
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["first"], "It holds an empty main.", "{got}");
    assert_eq!(got["second"], "Nothing else.", "{got}");

    // The tool's result went upstream with the history, the stream flag
    // with the second run.
    let sent = gateway.upstream.requests();
    assert_eq!(sent.len(), 3);
    assert!(sent[1].contains("fn main() {}"), "{}", sent[1].body);
    assert!(sent[2].streamed());
    assert!(sent[2].contains("It holds an empty main."));

    gateway.settle("pydantic-ai").await;
    let stored = gateway.session("pydantic-ai");
    let roles: Vec<&str> = stored.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, CONVERSATION_ROLES, "{stored:#?}");
    assert_eq!(stored[2].tool_calls[0].name, "read_file");
    assert_eq!(stored[6].content, "Nothing else.");
}

/// A Responses request with `store: false` keeps nothing: continuing a
/// stored response it reads the session (the upstream gets the history and
/// the new input) but stores neither; without one it is passed through.
/// Its answer cannot be continued (a 400 that says why), and the stored
/// session goes on from its own newest response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_false_keeps_nothing() {
    let gateway = Gateway::start(Wire::OpenAi).await;
    for answer in ["One.", "Two.", "Three.", "Four."] {
        gateway.upstream.push(Answer::text(answer).into());
    }
    let base = gateway.base.clone();
    let (status, first) = post_to(
        &base,
        "/v1/responses",
        json!({"model": "m", "input": "First?", "instructions": "Be brief."}),
    )
    .await;
    assert_eq!(status, 200, "{first}");
    let first_id = first["id"].as_str().unwrap().to_owned();
    let (status, second) = post_to(
        &base,
        "/v1/responses",
        json!({"model": "m", "input": "Second?", "previous_response_id": first_id,
            "instructions": "Be brief.", "store": false}),
    )
    .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["output"][0]["content"][0]["text"], "Two.");
    assert_eq!(second["store"], false, "{second}");
    let sent = gateway.upstream.requests();
    let texts: Vec<String> = sent[1]
        .messages()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        texts,
        ["Be brief.", "First?", "One.", "Second?"],
        "{}",
        sent[1].body
    );

    // Its answer names no session: continuing from it is refused.
    let unstored_id = second["id"].as_str().unwrap().to_owned();
    let (status, refused) = post_to(
        &base,
        "/v1/responses",
        json!({"model": "m", "input": "Third?", "previous_response_id": unstored_id}),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("store: false"),
        "{refused}"
    );

    // The stored session goes on from its own newest response, which the
    // unstored request did not replace.
    let (status, third) = post_to(
        &base,
        "/v1/responses",
        json!({"model": "m", "input": "Third?", "previous_response_id": first_id}),
    )
    .await;
    assert_eq!(status, 200, "{third}");
    let session = agent_host_store::SessionRef::Id(
        uuid::Uuid::try_parse(&first_id["resp_".len().."resp_".len() + 32]).unwrap(),
    );
    for _ in 0..500 {
        let stored = gateway.store.load(&session).unwrap().messages;
        if stored.len() == 5 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let stored: Vec<String> = gateway
        .store
        .load(&session)
        .unwrap()
        .messages
        .iter()
        .map(|m| m.content.clone())
        .collect();
    assert_eq!(stored, ["Be brief.", "First?", "One.", "Third?", "Three."]);

    // Without a response to continue: passed through, nothing stored.
    let sessions = || {
        let page = agent_host_store::PageRequest::first(100);
        gateway.store.list(&page).unwrap().total
    };
    let before = sessions();
    let (status, alone) = post_to(
        &base,
        "/v1/responses",
        json!({"model": "m", "input": "Alone?", "store": false}),
    )
    .await;
    assert_eq!(status, 200, "{alone}");
    assert_eq!(alone["output"][0]["content"][0]["text"], "Four.");
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(sessions(), before, "nothing stored");
}

/// Several upstreams: a request's model picks one; an unknown model is a
/// 400 naming what is served; the default upstream takes it when there is
/// one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requests_model_picks_its_upstream() {
    let other = LlmServer::start(Wire::OpenAi);
    let upstream = |name: &str, server: &LlmServer, models: &[&str], default: bool| {
        let mut settings = ProviderSettings::new(ProviderKind::OpenAi, models[0]);
        settings.base_url = server.base_url();
        settings.api_key_env = None;
        agent_host_server::gateway::Upstream {
            name: name.to_owned(),
            provider: agent_host_provider::Provider::with_api_key(settings, None).unwrap(),
            models: models.iter().map(|m| (*m).to_owned()).collect(),
            default,
            responses: false,
        }
    };
    // Only `remote` is configured (not the engine's provider, the
    // harness's loopback server): every model goes there.
    let server = ServerConfig {
        upstreams: vec![upstream("remote", &other, &["gpt-5", "gpt-4*"], false)],
        ..ServerConfig::default()
    };
    let gateway = Gateway::start_full(Wire::OpenAi, EngineConfig::default(), server).await;
    other.push(Answer::text("From remote.").into());
    let (status, reply) = post_to(
        &gateway.base,
        "/v1/chat/completions",
        json!({"model": "anything", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["choices"][0]["message"]["content"], "From remote.");
    assert!(gateway.upstream.requests().is_empty());
    drop(gateway);

    let server = ServerConfig {
        upstreams: vec![
            upstream("remote", &other, &["gpt-5", "gpt-4*"], false),
            upstream("local", &LlmServer::start(Wire::OpenAi), &["small"], false),
        ],
        ..ServerConfig::default()
    };
    let gateway = Gateway::start_full(Wire::OpenAi, EngineConfig::default(), server).await;
    other.push(Answer::text("Prefix.").into());
    let (status, reply) = post_to(
        &gateway.base,
        "/v1/responses",
        json!({"model": "gpt-4.1-mini", "input": "hi"}),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["output"][0]["content"][0]["text"], "Prefix.");
    assert_eq!(reply["model"], "gpt-4.1-mini");
    assert_eq!(
        other.requests().last().unwrap().body["model"],
        "gpt-4.1-mini"
    );
    let (status, reply) = post_to(
        &gateway.base,
        "/v1/responses",
        json!({"model": "claude-9", "input": "hi"}),
    )
    .await;
    assert_eq!(status, 400, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("claude-9") && message.contains("gpt-4*") && message.contains("small"),
        "{message}"
    );
    let models: Value = reqwest::get(format!("{}/v1/models", gateway.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["gpt-5", "small"], "{models}");
    drop(gateway);

    let server = ServerConfig {
        upstreams: vec![
            upstream("remote", &other, &["gpt-5"], false),
            upstream("fallback", &other, &["other"], true),
        ],
        ..ServerConfig::default()
    };
    let gateway = Gateway::start_full(Wire::OpenAi, EngineConfig::default(), server).await;
    other.push(Answer::text("Default.").into());
    let (status, reply) = post_to(
        &gateway.base,
        "/v1/responses",
        json!({"model": "claude-9", "input": "hi"}),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["output"][0]["content"][0]["text"], "Default.");
}

/// Issue 17: a thinking block's signature (like encrypted reasoning and
/// compaction items) is readable only by the provider that made it; a
/// session that moves to another upstream must not send it there, and the
/// request's record says what was left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_reasoning_goes_only_to_the_upstream_that_made_it() {
    let a = LlmServer::start(Wire::Anthropic);
    let b = LlmServer::start(Wire::Anthropic);
    let upstream = |name: &str, server: &LlmServer, model: &str| {
        let mut settings = ProviderSettings::new(ProviderKind::Anthropic, model);
        settings.base_url = server.base_url();
        settings.api_key_env = None;
        agent_host_server::gateway::Upstream {
            name: name.to_owned(),
            provider: agent_host_provider::Provider::with_api_key(settings, None).unwrap(),
            models: vec![model.to_owned()],
            default: false,
            responses: false,
        }
    };
    let server = ServerConfig {
        upstreams: vec![upstream("a", &a, "claude-a"), upstream("b", &b, "claude-b")],
        ..ServerConfig::default()
    };
    let gateway = Gateway::start_full(Wire::Anthropic, EngineConfig::default(), server).await;
    a.push(
        Answer::text("Paris.")
            .with_reasoning("The capital of France.")
            .into(),
    );
    b.push(Answer::text("Rome.").into());
    a.push(Answer::text("Berlin.").into());
    let messages = |model: &str, history: &Value| json!({"model": model, "max_tokens": 64, "messages": history});
    let send = |body: Value| {
        let base = gateway.base.clone();
        async move {
            let reply = reqwest::Client::new()
                .post(format!("{base}/v1/messages"))
                .header("x-session-id", "moves")
                .header("anthropic-version", "2023-06-01")
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(reply.status(), 200);
            reply.json::<Value>().await.unwrap()
        }
    };
    let mut history = json!([{"role": "user", "content": "France?"}]);
    let first = send(messages("claude-a", &history)).await;
    assert_eq!(first["content"][0]["type"], "thinking", "{first}");
    let history_items = history.as_array_mut().unwrap();
    history_items.push(json!({"role": "assistant", "content": first["content"]}));
    history_items.push(json!({"role": "user", "content": "Italy?"}));
    gateway.settle("moves").await;
    send(messages("claude-b", &history)).await;
    let to_b = b.requests().pop().unwrap();
    assert!(
        !to_b.body.to_string().contains("signature") && !to_b.contains("EqQBsig"),
        "upstream b got a's signature: {}",
        to_b.body
    );
    assert!(to_b.contains("Paris."), "the answer's text still went");
    gateway.settle("moves").await;
    let record = gateway.record("moves", 2).await;
    assert_eq!(record["upstream"], "b", "{record}");
    let notes = record["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{record}");
    assert!(notes[0].as_str().unwrap().contains("\"a\""), "{record}");

    // Back on `a`, its own signature goes with its reasoning again.
    let history_items = history.as_array_mut().unwrap();
    history_items.push(json!({"role": "assistant", "content": "Rome."}));
    history_items.push(json!({"role": "user", "content": "Germany?"}));
    send(messages("claude-a", &history)).await;
    let to_a = a.requests().pop().unwrap();
    assert!(
        to_a.body
            .to_string()
            .contains(&agent_host_testkit::model_server::signature_for(
                "The capital of France."
            )),
        "{}",
        to_a.body
    );
}

/// A Responses client in front of an upstream that fails: a refusal comes
/// back with its status in OpenAI's error shape; a stream cut off halfway
/// ends with `response.failed`, and no half answer is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_failures_reach_a_responses_client_in_its_shape() {
    let gateway = Gateway::start(Wire::Anthropic).await;
    gateway.upstream.push(Scripted::Status {
        status: 418,
        body: json!({"type": "error", "error": {"type": "teapot", "message": "short and stout"}})
            .to_string(),
        retry_after: None,
    });
    let (status, reply) = post_to(
        &gateway.base,
        "/v1/responses",
        json!({"model": "m", "input": "hello", "prompt_cache_key": "failing"}),
    )
    .await;
    assert_eq!(status, 418, "{reply}");
    assert_eq!(reply["error"]["message"], "short and stout", "{reply}");
    assert_eq!(reply["error"]["type"], "teapot", "{reply}");

    gateway.upstream.push(Scripted::CutOff(Answer::text(
        "A long answer that never ends",
    )));
    let reply = reqwest::Client::new()
        .post(format!("{}/v1/responses", gateway.base))
        .json(
            &json!({"model": "m", "stream": true, "prompt_cache_key": "failing",
                      "input": [{"role": "user", "content": "hello"},
                                {"role": "user", "content": "again"}]}),
        )
        .send()
        .await
        .unwrap();
    let status = reply.status();
    let text = reply.text().await.unwrap();
    assert_eq!(status, 200, "{text}");
    let kinds: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(kinds.first(), Some(&"response.created"), "{text}");
    assert_eq!(kinds.last(), Some(&"response.failed"), "{text}");
    gateway.settle("failing").await;
    let stored: Vec<String> = gateway
        .session("failing")
        .iter()
        .map(|m| format!("{}: {}", m.role.as_str(), m.content))
        .collect();
    assert_eq!(stored, ["user: hello", "user: again"], "{stored:?}");
}

/// The newest Responses answer of a session is kept with its request
/// records: after a restart, continuing from an older response is still
/// refused, and continuing from the newest still works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_responses_fork_is_refused_after_a_restart_too() {
    let gateway = Gateway::start(Wire::OpenAi).await;
    let respond = |base: String, body: Value| async move {
        let reply = reqwest::Client::new()
            .post(format!("{base}/v1/responses"))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = reply.status().as_u16();
        (status, reply.json::<Value>().await.unwrap_or(Value::Null))
    };
    let (status, first) = respond(gateway.base.clone(), json!({"model": "m", "input": "Hi"})).await;
    assert_eq!(status, 200, "{first}");
    let first_id = first["id"].as_str().unwrap().to_owned();
    let (status, second) = respond(
        gateway.base.clone(),
        json!({"model": "m", "input": "And?", "previous_response_id": first_id}),
    )
    .await;
    assert_eq!(status, 200, "{second}");
    let second_id = second["id"].as_str().unwrap().to_owned();
    // Wait until both answers are stored (the records say so).
    let key = {
        let listed: Value = reqwest::get(format!("{}/v1/sessions", gateway.base))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        listed["sessions"][0]["id"].as_str().unwrap().to_owned()
    };
    gateway.settle(&key).await;

    let gateway = gateway.restart().await;
    let (status, fork) = respond(
        gateway.base.clone(),
        json!({"model": "m", "input": "Or?", "previous_response_id": first_id}),
    )
    .await;
    assert_eq!(status, 409, "{fork}");
    assert!(
        fork.to_string().contains(&second_id),
        "the error names the newest response: {fork}"
    );
    let (status, third) = respond(
        gateway.base.clone(),
        json!({"model": "m", "input": "Then?", "previous_response_id": second_id}),
    )
    .await;
    assert_eq!(status, 200, "{third}");
}

/// A processor that inserts `note` into the view (the `edits` test
/// component), in `chains`, on `routes`, for `models`.
fn noting(
    note: &str,
    chains: &[&str],
    routes: Option<Vec<agent_host_server::gateway::Wire>>,
    models: Option<&[&str]>,
) -> agent_host_server::gateway::GatewayProcessor {
    agent_host_server::gateway::GatewayProcessor {
        path: agent_host_test_artifacts::EDITS.into(),
        options: agent_host_runtime::ProcessorOptions {
            config: Some(json!({ "insert": note }).to_string()),
            ..agent_host_runtime::ProcessorOptions::default()
        },
        routes,
        models: models.map(|m| m.iter().map(|m| (*m).to_owned()).collect()),
        chains: chains.iter().map(|c| (*c).to_owned()).collect(),
    }
}

/// Issue 17: processors run per route, per model and per chain (a named
/// chain a request asks for with `x-agent-host-chain`, only among the
/// configured ones); the response header and the request's record say
/// which chain ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processors_run_per_route_per_model_and_per_chain() {
    use agent_host_server::gateway::Wire as Route;
    let server = ServerConfig {
        processors: vec![
            noting("note-everywhere", &["default"], None, None),
            noting(
                "note-chat-only",
                &["default"],
                Some(vec![Route::ChatCompletions]),
                None,
            ),
            noting("note-gpt4o", &["default"], None, Some(&["gpt-4o*"])),
            noting("note-review", &["review"], None, None),
            noting(
                "note-both",
                &["default", "review"],
                Some(vec![Route::Responses]),
                None,
            ),
        ],
        ..ServerConfig::default()
    };
    let gateway = Gateway::start_full(Wire::OpenAi, EngineConfig::default(), server).await;
    let notes = |n: usize| -> Vec<&'static str> {
        let request = &gateway.upstream.requests()[n];
        [
            "note-everywhere",
            "note-chat-only",
            "note-gpt4o",
            "note-review",
            "note-both",
        ]
        .into_iter()
        .filter(|note| request.contains(note))
        .collect()
    };

    // Chat Completions, a model no entry names: the default chain's
    // entries for every model and for this route.
    gateway.upstream.push(Answer::text("One.").into());
    let (status, reply, headers) = post(
        &gateway.base,
        json!({"model": "small", "messages": [{"role": "user", "content": "hi"}]}),
        &[("x-session-id", "per-route")],
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(notes(0), ["note-everywhere", "note-chat-only"]);
    assert_eq!(headers["x-agent-host-chain"], "default");
    let session = headers["x-agent-host-session"].to_str().unwrap().to_owned();
    let record = gateway.record(&session, 1).await;
    assert_eq!(record["chain"], "default", "{record}");
    assert_eq!(
        record["processors"].as_array().unwrap().len(),
        2,
        "{record}"
    );

    // Responses, a gpt-4o model: the model's entry and the route's.
    gateway.upstream.push(Answer::text("Two.").into());
    let (status, reply) = post_to(
        &gateway.base,
        "/v1/responses",
        json!({"model": "gpt-4o-mini", "input": "hello", "user": "per-model"}),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(notes(1), ["note-everywhere", "note-gpt4o", "note-both"]);

    // The review chain, asked for by name: only its entries.
    gateway.upstream.push(Answer::text("Three.").into());
    let (status, reply, headers) = post(
        &gateway.base,
        json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hey"}]}),
        &[
            ("x-session-id", "per-chain"),
            ("x-agent-host-chain", "review"),
        ],
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(notes(2), ["note-review"]);
    assert_eq!(headers["x-agent-host-chain"], "review");

    // Per session: its next request, naming no chain, runs the chain the
    // session ran last; naming another moves the session to it.
    let mut history = vec![
        json!({"role": "user", "content": "hey"}),
        json!({"role": "assistant", "content": "Three."}),
        json!({"role": "user", "content": "and?"}),
    ];
    for (n, (header, expected)) in [
        (None, "review"),
        (Some("default"), "default"),
        (None, "default"),
    ]
    .into_iter()
    .enumerate()
    {
        gateway.upstream.push(Answer::text("More.").into());
        let mut with: Vec<(&str, &str)> = vec![("x-session-id", "per-chain")];
        with.extend(header.map(|h| ("x-agent-host-chain", h)));
        let body = json!({"model": "gpt-4o", "messages": history.clone()});
        let (status, reply, headers) = post(&gateway.base, body, &with).await;
        assert_eq!(status, 200, "{reply}");
        assert_eq!(headers["x-agent-host-chain"], expected, "request {n}");
        let ran = notes(3 + n);
        if expected == "review" {
            assert_eq!(ran, ["note-review"], "request {n}");
        } else {
            assert_eq!(
                ran,
                ["note-everywhere", "note-chat-only", "note-gpt4o"],
                "request {n}"
            );
        }
        gateway.settle("per-chain").await;
        history.push(json!({"role": "assistant", "content": "More."}));
        history.push(json!({"role": "user", "content": "go on"}));
    }

    // A chain the configuration does not name is refused, naming those it
    // does; so is a name that is no chain's.
    for bad in ["strict", "../x.wasm"] {
        let (status, reply, _) = post(
            &gateway.base,
            json!({"model": "small", "messages": [{"role": "user", "content": "hi"}]}),
            &[("x-agent-host-chain", bad)],
        )
        .await;
        assert_eq!(status, 400, "{reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("x-agent-host-chain") || message.contains("default, review"),
            "{message}"
        );
    }
    assert_eq!(gateway.upstream.requests().len(), 6);
}

/// A session whose chain is no longer configured (the server restarted
/// with another file) runs the default chain, and its record says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_chain_removed_from_the_configuration_gives_way_to_the_default() {
    let server = ServerConfig {
        processors: vec![noting("note-review", &["review"], None, None)],
        ..ServerConfig::default()
    };
    let gateway = Gateway::start_full(Wire::OpenAi, EngineConfig::default(), server).await;
    gateway.upstream.push(Answer::text("One.").into());
    let mut history = vec![json!({"role": "user", "content": "hi"})];
    let (status, _, headers) = post(
        &gateway.base,
        json!({"model": "m", "messages": history.clone()}),
        &[("x-session-id", "moved"), ("x-agent-host-chain", "review")],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(headers["x-agent-host-chain"], "review");
    gateway.settle("moved").await;

    // Restarted without that chain: the next request, naming none, runs
    // the default one.
    let gateway = gateway.restart().await;
    gateway.upstream.push(Answer::text("Two.").into());
    history.push(json!({"role": "assistant", "content": "One."}));
    history.push(json!({"role": "user", "content": "again"}));
    let (status, reply, headers) = post(
        &gateway.base,
        json!({"model": "m", "messages": history}),
        &[("x-session-id", "moved")],
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(headers["x-agent-host-chain"], "default");
    let sent = gateway.upstream.requests();
    assert!(sent[0].contains("note-review"));
    assert!(!sent.last().unwrap().contains("note-review"));
    gateway.settle("moved").await;
    let record = gateway.record("moved", 2).await;
    assert!(
        record["notes"].as_array().unwrap().iter().any(|n| n
            .as_str()
            .unwrap()
            .contains("\"review\" last, which is no longer configured")),
        "{record}"
    );
}

/// With no gateway processors configured, the engine's chain runs as the
/// default and no named chain may be asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_gateway_processors_the_engines_chain_is_the_default() {
    let config = EngineConfig {
        processors: vec![(
            agent_host_test_artifacts::EDITS.into(),
            agent_host_runtime::ProcessorOptions {
                config: Some(json!({"insert": "note-engine"}).to_string()),
                ..agent_host_runtime::ProcessorOptions::default()
            },
        )],
        ..EngineConfig::default()
    };
    let gateway = Gateway::start_with(Wire::OpenAi, config).await;
    gateway.upstream.push(Answer::text("One.").into());
    let (status, reply, headers) = post(
        &gateway.base,
        json!({"messages": [{"role": "user", "content": "hi"}]}),
        &[("x-session-id", "engine-chain")],
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert!(gateway.upstream.requests()[0].contains("note-engine"));
    assert_eq!(headers["x-agent-host-chain"], "default");
    let (status, reply, _) = post(
        &gateway.base,
        json!({"messages": [{"role": "user", "content": "hi"}]}),
        &[("x-agent-host-chain", "review")],
    )
    .await;
    assert_eq!(status, 400, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("review"),
        "{reply}"
    );
}

/// The text of an answer as a client of `wire` reads it, whole or
/// streamed (Chat Completions chunks, or Anthropic's events).
fn answer_text(wire: Wire, body: &str) -> String {
    let whole: Option<Value> = serde_json::from_str(body).ok();
    match (wire, whole) {
        (Wire::OpenAi, Some(v)) => v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
        (Wire::Anthropic, Some(v)) => v["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|b| b["text"].as_str())
            .collect(),
        (Wire::OpenAi, None) => read_stream(body).0,
        (Wire::Anthropic, None) => body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .filter(|e| e["type"] == "content_block_delta")
            .filter_map(|e| e["delta"]["text"].as_str().map(str::to_owned))
            .collect(),
    }
}

/// Sends `body` to the gateway's route for `wire` in session `key`: the
/// status, the headers and the body's text.
async fn ask(
    base: &str,
    wire: Wire,
    key: &str,
    body: &Value,
) -> (u16, reqwest::header::HeaderMap, String) {
    let path = match wire {
        Wire::OpenAi => "/v1/chat/completions",
        Wire::Anthropic => "/v1/messages",
    };
    let reply = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("x-session-id", key)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = reply.status().as_u16();
    let headers = reply.headers().clone();
    (status, headers, reply.text().await.unwrap())
}

/// The names of the tools a request offered, in order.
fn offered(request: &agent_host_testkit::model_server::Recorded) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.pointer("/function/name").or_else(|| t.get("name")))
        .filter_map(|n| n.as_str().map(str::to_owned))
        .collect()
}

/// A gateway whose model is offered the memory tools over `ada`'s memory,
/// which knows her dog's name.
async fn memory_gateway(
    wire: Wire,
) -> (
    Gateway,
    Arc<agent_host_store::memory::MemoryStore>,
    tempfile::TempDir,
) {
    use agent_host_core::memory::{Fact, Scope};
    let dir = tempfile::tempdir().unwrap();
    let memory = Arc::new(
        agent_host_store::memory::MemoryStore::open(&dir.path().to_string_lossy()).unwrap(),
    );
    memory
        .add(Fact::new(
            "rex",
            Scope::new("ada", agent_host_store::DEFAULT_AGENT),
            "ada",
            "Ada's dog is named Rex",
            chrono::Utc::now(),
        ))
        .unwrap();
    let mut config = agent_host_engine::MemoryConfig::new(memory.clone(), "ada");
    config.tools = true;
    let engine = EngineConfig {
        memory: Some(config),
        ..EngineConfig::default()
    };
    (Gateway::start_with(wire, engine).await, memory, dir)
}

/// Issue 21 through the gateway: the model is offered the memory tools
/// beside the client's, the gateway runs its calls to them and asks again;
/// the client, whole or streamed, on either wire, gets only the answer.
/// The rounds are stored before the answer, marked host-only, so the
/// client's next request (which never had them) continues the session
/// rather than branching it, and the model reads them in later views.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_uses_memory_through_the_gateway() {
    use agent_host_core::reconcile::HOST_ONLY;
    for (wire, stream) in [
        (Wire::OpenAi, false),
        (Wire::OpenAi, true),
        (Wire::Anthropic, false),
        (Wire::Anthropic, true),
    ] {
        let case = format!("{wire:?}, stream {stream}");
        let (gateway, memory, _memory_dir) = memory_gateway(wire).await;
        let upstream = &gateway.upstream;
        upstream.push(
            Answer::tool_calls(&[("m1", "memory_search", r#"{"query": "dog named"}"#)]).into(),
        );
        upstream.push(
            Answer::tool_calls(&[(
                "m2",
                "memory_write",
                r#"{"text": "Ada's dog Rex is a beagle"}"#,
            )])
            .into(),
        );
        upstream.push(Answer::text("Your dog is Rex.").into());
        upstream.push(Answer::text("A beagle.").into());
        let read_file = match wire {
            Wire::OpenAi => json!({"type": "function", "function": {"name": "read_file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}),
            Wire::Anthropic => json!({"name": "read_file",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}),
        };
        let mut body = json!({"model": "test-model", "max_tokens": 100, "stream": stream,
            "tools": [read_file],
            "messages": [{"role": "user", "content": "What is my dog called? He is a beagle."}]});
        let key = format!("memory-{wire:?}-{stream}");
        let (status, headers, text) = ask(&gateway.base, wire, &key, &body).await;
        assert_eq!(status, 200, "{case}: {text}");
        assert_eq!(
            answer_text(wire, &text),
            "Your dog is Rex.",
            "{case}: {text}"
        );
        assert!(
            !text.contains("memory_"),
            "{case}: the client never sees a memory call: {text}"
        );
        assert_eq!(headers["x-agent-host-memory-calls"], "2", "{case}");

        // Upstream: the memory tools after the client's, the search's
        // answer read in the second request, every request streamed as the
        // client asked.
        let sent = upstream.requests();
        assert_eq!(sent.len(), 3, "{case}");
        assert_eq!(
            offered(&sent[0]),
            [
                "read_file",
                "memory_search",
                "memory_write",
                "memory_recall"
            ],
            "{case}"
        );
        assert!(sent.iter().all(|r| r.streamed() == stream), "{case}");
        assert!(sent[2].contains("beagle"), "{case}");
        // The session's memory snapshot, in the system prompt of every
        // request; the rounds only add to what was sent before.
        let system = |r: &agent_host_testkit::model_server::Recorded| match wire {
            Wire::OpenAi => r.messages()[0].to_string(),
            Wire::Anthropic => r.body["system"].to_string(),
        };
        assert!(
            system(&sent[0]).contains("Ada's dog is named Rex"),
            "{case}"
        );
        if wire == Wire::OpenAi {
            let first = sent[0].messages();
            assert_eq!(&sent[1].messages()[..first.len()], first, "{case}");
        }

        // The written fact, from this session.
        gateway.settle(&key).await;
        let stored = gateway.session(&key);
        let written = memory
            .list(&agent_host_core::memory::Filter::user("ada"), None, 10)
            .unwrap()
            .into_iter()
            .find(|f| f.text == "Ada's dog Rex is a beagle")
            .unwrap_or_else(|| panic!("{case}: the fact was not written"));
        assert_eq!(
            written.source.message.as_deref(),
            Some(stored[4].id.as_str()),
            "{case}: the fact's source is the call that wrote it"
        );

        // Stored: the memory snapshot, the question, two host-only rounds,
        // the answer; every call paired with its result.
        let roles: Vec<&str> = stored.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(
            roles,
            [
                "system",
                "user",
                "assistant",
                "tool",
                "assistant",
                "tool",
                "assistant"
            ],
            "{case}"
        );
        let host_only: Vec<bool> = stored
            .iter()
            .map(|m| m.metadata.get(HOST_ONLY) == Some(&Value::Bool(true)))
            .collect();
        assert_eq!(
            host_only,
            [true, false, true, true, true, true, false],
            "{case}"
        );
        assert_eq!(
            stored[0].metadata.get(agent_host_engine::MEMORY_SNAPSHOT),
            Some(&Value::Bool(true)),
            "{case}"
        );
        assert!(
            agent_host_core::validate::validate(&stored).is_empty(),
            "{case}"
        );
        assert_eq!(stored[6].content, "Your dog is Rex.", "{case}");
        let record = gateway.record(&key, 1).await;
        assert_eq!(
            record["memory_calls"],
            json!([{"tool": "memory_search"}, {"tool": "memory_write"}]),
            "{case}: {record}"
        );
        assert_eq!(record["outcome"], "stored", "{case}: {record}");

        // The client goes on without the rounds: the same session, no
        // branch, and the model still reads them.
        let messages = body["messages"].as_array_mut().unwrap();
        messages.push(json!({"role": "assistant", "content": "Your dog is Rex."}));
        messages.push(json!({"role": "user", "content": "What breed?"}));
        let (status, headers, text) = ask(&gateway.base, wire, &key, &body).await;
        assert_eq!(status, 200, "{case}: {text}");
        assert_eq!(answer_text(wire, &text), "A beagle.", "{case}");
        assert!(
            headers.get("x-agent-host-branched-from").is_none(),
            "{case}"
        );
        assert!(headers.get("x-agent-host-memory-calls").is_none(), "{case}");
        let sent = upstream.requests();
        assert!(sent[3].contains("memory_write"), "{case}");
        // The snapshot is frozen: the fact written since is not in it.
        assert_eq!(system(&sent[3]), system(&sent[0]), "{case}");
        assert!(!system(&sent[3]).contains("beagle"), "{case}");
        gateway.settle(&key).await;
        assert_eq!(gateway.session(&key).len(), 9, "{case}: each message once");
    }
}

/// A reply that calls a memory tool and one of the client's: the memory
/// call runs, the client's is answered "not run" (the model calls it again
/// after reading memory), so the client only ever gets calls it can pair.
/// The rounds are capped: the last request tells the model to call no
/// tool. A client with a tool of a memory tool's name keeps it: the memory
/// tools are not offered, and the record says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_rounds_never_hand_the_client_a_call_it_cannot_pair() {
    let (gateway, _memory, _memory_dir) = memory_gateway(Wire::OpenAi).await;
    let upstream = &gateway.upstream;
    let read_file = json!({"type": "function", "function": {"name": "read_file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}});
    upstream.push(
        Answer::tool_calls(&[
            ("m1", "memory_search", r#"{"query": "project"}"#),
            ("r1", "read_file", r#"{"path": "a.rs"}"#),
        ])
        .into(),
    );
    upstream.push(Answer::tool_calls(&[("r2", "read_file", r#"{"path": "a.rs"}"#)]).into());
    upstream.push(Answer::text("It is empty.").into());
    let mut body = json!({"model": "test-model", "tools": [read_file],
        "messages": [{"role": "user", "content": "What is in a.rs?"}]});
    let (status, _, text) = ask(&gateway.base, Wire::OpenAi, "mixed", &body).await;
    assert_eq!(status, 200, "{text}");
    let reply: Value = serde_json::from_str(&text).unwrap();
    let calls = reply["choices"][0]["message"]["tool_calls"]
        .as_array()
        .unwrap();
    assert_eq!(calls.len(), 1, "{reply}");
    assert_eq!(calls[0]["id"], "r2", "{reply}");
    let sent = upstream.requests();
    let results: Vec<&Value> = sent[1]
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(results.len(), 2, "{}", sent[1].body);
    assert_eq!(results[1]["tool_call_id"], "r1");
    assert!(
        results[1]["content"].as_str().unwrap().contains("not run"),
        "{}",
        sent[1].body
    );
    // The client answers its call and gets the text; the log stays paired.
    let messages = body["messages"].as_array_mut().unwrap();
    messages.push(reply["choices"][0]["message"].clone());
    messages.push(json!({"role": "tool", "tool_call_id": "r2", "content": "fn main() {}"}));
    let (status, headers, text) = ask(&gateway.base, Wire::OpenAi, "mixed", &body).await;
    assert_eq!(status, 200, "{text}");
    assert!(headers.get("x-agent-host-branched-from").is_none());
    gateway.settle("mixed").await;
    let stored = gateway.session("mixed");
    assert_eq!(stored.len(), 7, "{stored:#?}");
    assert!(agent_host_core::validate::validate(&stored).is_empty());

    // A model that only calls memory tools: four rounds, then told to
    // call none; the client gets the answer that follows.
    for n in 0..4 {
        upstream.push(
            Answer::tool_calls(&[(&format!("d{n}"), "memory_recall", r#"{"entity": "ada"}"#)])
                .into(),
        );
    }
    upstream.push(Answer::text("Done.").into());
    let before = upstream.requests().len();
    let looping = json!({"model": "test-model",
        "messages": [{"role": "user", "content": "Tell me everything."}]});
    let (status, _, text) = ask(&gateway.base, Wire::OpenAi, "looping", &looping).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(answer_text(Wire::OpenAi, &text), "Done.");
    let sent = &upstream.requests()[before..];
    assert_eq!(sent.len(), 5);
    assert!(
        sent[..4]
            .iter()
            .all(|r| r.body.get("tool_choice").is_none())
    );
    assert_eq!(sent[4].body["tool_choice"], "none");

    // A client that has a tool named `memory_search` keeps it.
    upstream.push(Answer::text("Fine.").into());
    let own = json!({"model": "test-model",
        "tools": [{"type": "function", "function": {"name": "memory_search", "parameters": {}}}],
        "messages": [{"role": "user", "content": "Search."}]});
    let (status, _, text) = ask(&gateway.base, Wire::OpenAi, "own-tool", &own).await;
    assert_eq!(status, 200, "{text}");
    let last = upstream.requests().pop().unwrap();
    assert_eq!(offered(&last), ["memory_search"]);
    gateway.settle("own-tool").await;
    let record = gateway.record("own-tool", 1).await;
    assert!(
        record["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("not offered")),
        "{record}"
    );
}

/// The summary a scripted upstream writes when asked for one.
const WRITTEN_SUMMARY: &str = "## Files Modified\n- `src/lib.rs`\n## Key Decisions\n- none\n## Important Values\n- `42`\n## Current State\nWorking.\n## Pending Tasks\n- none";

/// Whether `request` asks for a summary: its last message carries the
/// summarizer's headings.
fn asks_for_summary(request: &agent_host_testkit::model_server::Recorded) -> bool {
    let last = request.body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .map(|m| m["content"].to_string())
        .unwrap_or_default();
    let system =
        request.body["messages"][0]["content"].to_string() + &request.body["system"].to_string();
    last.contains("## Files Modified") || system.contains("You summarize the earlier part")
}

/// One request of the session `cached` through the gateway at `base`:
/// whether it summarized, its record's number, the answer's text.
async fn cached_turn(base: &str, path: &str, wire: Wire, body: &Value) -> (String, u64, String) {
    let reply = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("x-session-id", "cached")
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    let header = |name: &str| reply.headers()[name].to_str().unwrap().to_owned();
    let summary = header("x-agent-host-summary");
    let n = header("x-agent-host-request").parse().unwrap();
    let answer = answer_text(wire, &reply.text().await.unwrap());
    (summary, n, answer)
}

/// With a model writing summaries, a gateway summary goes to the request's
/// own upstream as the last request sent for the session with the ask
/// after it: everything before the ask is that request's body, tools and
/// cache breakpoints included, so the provider's cache serves it. After a
/// restart, with no request sent yet, the classic request goes instead,
/// and the record says why.
async fn summaries_reuse_the_last_request(wire: Wire) {
    use agent_host_core::pipeline::PipelineConfig;
    use agent_host_engine::SummarizerChoice;

    let config = || {
        let mut pipeline = PipelineConfig::default();
        let summary = pipeline.summary.as_mut().unwrap();
        summary.max_messages = Some(9);
        summary.window_fraction = None;
        summary.keep_last_turns = 1;
        summary.min_messages = 2;
        EngineConfig {
            pipeline,
            summarizer: SummarizerChoice::Llm,
            ..EngineConfig::default()
        }
    };
    let gateway = Gateway::start_with(wire, config()).await;
    let respond = |upstream: &LlmServer| {
        let n = std::sync::atomic::AtomicUsize::new(0);
        upstream.respond_with(move |request| {
            if asks_for_summary(request) {
                Scripted::Answer(Answer::text(WRITTEN_SUMMARY))
            } else {
                let n = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Scripted::Answer(Answer::text(&format!("answer {n}")))
            }
        });
    };
    respond(&gateway.upstream);
    let (path, tools) = match wire {
        Wire::OpenAi => (
            "/v1/chat/completions",
            json!([{"type": "function", "function": {"name": "grep", "description": "search", "parameters": {"type": "object"}}}]),
        ),
        Wire::Anthropic => (
            "/v1/messages",
            json!([{"name": "grep", "description": "search", "input_schema": {"type": "object"}}]),
        ),
    };
    let mut history: Vec<Value> = Vec::new();
    let body = |history: &[Value]| {
        let mut body =
            json!({"model": "test-model", "max_tokens": 300, "tools": tools, "messages": history});
        match wire {
            Wire::OpenAi => body["messages"]
                .as_array_mut()
                .unwrap()
                .insert(0, json!({"role": "system", "content": "You are terse."})),
            Wire::Anthropic => body["system"] = json!("You are terse."),
        }
        body
    };
    let mut summarized_at = None;
    for turn in 0..8 {
        history.push(
            json!({"role": "user", "content": format!("question {turn}: what is in src/lib.rs?")}),
        );
        let (summary, n, answer) = cached_turn(&gateway.base, path, wire, &body(&history)).await;
        history.push(json!({"role": "assistant", "content": answer}));
        if summary == "created" {
            summarized_at = Some(n);
            break;
        }
    }
    let n = summarized_at.expect("nine messages make a summary");
    gateway.settle("cached").await;
    let requests = gateway.upstream.requests();
    let at = requests
        .iter()
        .position(asks_for_summary)
        .expect("a summary request");
    assert_eq!(
        at + 1,
        requests.len() - 1,
        "the summary request came just before the turn's own"
    );
    let (last, asked) = (&requests[at - 1].body, &requests[at].body);
    let sent = last["messages"].as_array().unwrap();
    let reused = asked["messages"].as_array().unwrap();
    assert_eq!(
        reused[..sent.len()],
        sent[..],
        "the last request's messages, as they were"
    );
    // Then its answer (the span's last message), and the ask.
    assert_eq!(reused.len(), sent.len() + 2);
    assert_eq!(reused[sent.len()]["role"], "assistant");
    assert!(reused[sent.len()].to_string().contains("answer "));
    assert_eq!(asked["tools"], last["tools"]);
    assert_eq!(asked["system"], last["system"]);
    assert_eq!(asked["model"], last["model"]);
    assert_eq!(asked["stream"], json!(false));
    let ask = reused.last().unwrap();
    assert_eq!(ask["role"], "user");
    let ask = ask["content"].as_str().unwrap();
    assert!(
        ask.contains("## Files Modified") && !ask.contains("<span-end>"),
        "{ask}"
    );
    if wire == Wire::Anthropic {
        assert!(
            last.to_string().contains("cache_control"),
            "the breakpoints the last request had are in the reused prefix"
        );
    }
    let record = gateway.record("cached", n).await;
    let notes = record["notes"].to_string();
    assert!(notes.contains("reused the last request"), "{notes}");
    let stored = gateway.session("cached");
    let summary = stored
        .iter()
        .find(|m| m.summary && m.text().contains("src/lib.rs"));
    assert!(
        summary.is_some(),
        "the upstream's summary is the checkpoint's: {stored:#?}"
    );

    // After a restart nothing was sent for the session: a summary in its
    // first request (ten messages more at once) is the classic request, to
    // the same upstream.
    let gateway = gateway.restart_with(config()).await;
    respond(&gateway.upstream);
    let before = gateway.upstream.requests().len();
    for turn in 8..13 {
        history.push(json!({"role": "user", "content": format!("question {turn}")}));
        history.push(json!({"role": "assistant", "content": format!("reply {turn}")}));
    }
    history.push(json!({"role": "user", "content": "question 13"}));
    let (summary, n, answer) = cached_turn(&gateway.base, path, wire, &body(&history)).await;
    assert_eq!(summary, "created");
    history.push(json!({"role": "assistant", "content": answer}));
    gateway.settle("cached").await;
    let requests = gateway.upstream.requests();
    let asked = requests[before..]
        .iter()
        .find(|r| asks_for_summary(r))
        .expect("a summary request");
    assert!(
        asked.body["tools"].is_null(),
        "the classic request offers no tools"
    );
    let notes = gateway.record("cached", n).await["notes"].to_string();
    assert!(
        notes.contains("no request was sent upstream for the session since it was loaded"),
        "{notes}"
    );

    // An upstream that refuses the reused request: the classic one follows,
    // and the record says why.
    let n = std::sync::atomic::AtomicUsize::new(0);
    gateway.upstream.respond_with(move |request| {
        let last = request.body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .map(|m| m["content"].to_string())
            .unwrap_or_default();
        if last.contains("Stop here: do not answer") {
            Scripted::Status {
                status: 400,
                body: json!({"error": {"message": "too long", "type": "invalid_request_error"}})
                    .to_string(),
                retry_after: None,
            }
        } else if asks_for_summary(request) {
            Scripted::Answer(Answer::text(WRITTEN_SUMMARY))
        } else {
            let n = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Scripted::Answer(Answer::text(&format!("later {n}")))
        }
    });
    let before = gateway.upstream.requests().len();
    let mut refused = None;
    for turn in 14..30 {
        history.push(json!({"role": "user", "content": format!("question {turn}")}));
        let (summary, n, answer) = cached_turn(&gateway.base, path, wire, &body(&history)).await;
        history.push(json!({"role": "assistant", "content": answer}));
        if summary == "created" {
            refused = Some(n);
            break;
        }
    }
    let n = refused.expect("a third summary");
    gateway.settle("cached").await;
    let asked: Vec<_> = gateway.upstream.requests()[before..]
        .iter()
        .filter(|r| asks_for_summary(r))
        .map(|r| r.body["tools"].is_null())
        .collect();
    let notes = gateway.record("cached", n).await["notes"].to_string();
    assert_eq!(
        asked,
        [false, true],
        "the refused reuse, then the classic request: {notes}"
    );
    assert!(notes.contains("refused it with status 400"), "{notes}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summaries_reuse_the_last_chat_completions_request() {
    summaries_reuse_the_last_request(Wire::OpenAi).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summaries_reuse_the_last_messages_request() {
    summaries_reuse_the_last_request(Wire::Anthropic).await;
}

/// In front of an upstream that serves Responses itself: the upstream's
/// encrypted reasoning comes back on the next request verbatim (the
/// loopback upstream refuses it altered), built-in tools go through (and
/// are refused, naming the tool, where the request would be translated),
/// and the upstream's errors reach the client as it sent them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_responses_upstream_gets_its_reasoning_and_tools_back() {
    use agent_host_testkit::model_server::responses::encrypted_for;

    let gateway = Gateway::start_responses_native().await;
    gateway.upstream.push(
        Answer::text("Sunny.")
            .with_reasoning("Check the forecast.")
            .into(),
    );
    gateway.upstream.push(Answer::text("Yes, all day.").into());
    let tools = json!([{"type": "web_search"}]);
    let (status, first) = post_to(
        &gateway.base,
        "/v1/responses",
        json!({"model": "test-model", "input": "Weather in Lyon?", "tools": tools}),
    )
    .await;
    assert_eq!(status, 200, "{first}");
    let id = first["id"].as_str().unwrap();
    assert_eq!(
        id.len(),
        "resp_".len() + 48,
        "a response id of this gateway: {id}"
    );
    assert_eq!(first["output"][0]["type"], "reasoning", "{first}");
    assert_eq!(
        first["store"], true,
        "what the client asked, not what was sent"
    );
    let (status, second) = post_to(
        &gateway.base,
        "/v1/responses",
        json!({"model": "test-model", "input": "All day?", "previous_response_id": id, "tools": tools}),
    )
    .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["previous_response_id"], id);
    assert_eq!(second["output"][0]["content"][0]["text"], "Yes, all day.");
    let sent = gateway.upstream.requests();
    assert_eq!(sent[1].body["tools"], tools);
    let reasoning = sent[1].body["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "reasoning")
        .cloned()
        .expect("the reasoning item goes back");
    assert_eq!(
        reasoning["encrypted_content"],
        encrypted_for("Check the forecast.")
    );

    // The upstream's own error, as it sent it.
    let refusal = json!({"error": {"message": "Unsupported tool: web_search", "type": "invalid_request_error", "param": "tools", "code": null}});
    gateway.upstream.push(Scripted::Status {
        status: 400,
        body: refusal.to_string(),
        retry_after: None,
    });
    let (status, body) = post_to(
        &gateway.base,
        "/v1/responses",
        json!({"model": "test-model", "input": "And tomorrow?", "previous_response_id": second["id"]}),
    )
    .await;
    assert_eq!((status, body), (400, refusal));

    // Translated, a built-in tool has nowhere to go.
    let translated = Gateway::start(Wire::OpenAi).await;
    let (status, body) = post_to(
        &translated.base,
        "/v1/responses",
        json!({"model": "test-model", "input": "Weather?", "tools": [{"type": "function", "name": "f"}, {"type": "web_search"}]}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("`tools[1]`") && message.contains("web_search"),
        "{message}"
    );
    assert!(translated.upstream.requests().is_empty());
}
