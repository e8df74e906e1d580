//! The server on a loopback port, driven over real HTTP with reqwest.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_host_api::ContextReport;
use agent_host_core::Message;
use agent_host_core::budget::BudgetConfig;
use agent_host_core::compact::SummaryConfig;
use agent_host_core::pipeline::PipelineConfig;
use agent_host_engine::{Engine, EngineConfig, SummarizerChoice};
use agent_host_provider::{ProviderKind, ProviderSettings};
use agent_host_server::{Scope, Server, ServerConfig, Tokens, WebhookConfig};
use agent_host_store::{FileStore, SessionRef, SessionStore};
use agent_host_testkit::model_server::{LlmServer, Wire};
use reqwest::StatusCode;
use serde_json::{Value, json};

struct Running {
    base: String,
    http: reqwest::Client,
    /// The server's store, for writes that go around it.
    store: Arc<dyn SessionStore>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    _dir: tempfile::TempDir,
}

impl Running {
    fn store_root(&self) -> std::path::PathBuf {
        self._dir.path().to_path_buf()
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let reply = self
            .http
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = reply.status();
        (status, reply.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        let reply = self.http.get(self.url(path)).send().await.unwrap();
        let status = reply.status();
        (status, reply.json().await.unwrap_or(Value::Null))
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap().unwrap();
    }

    /// Stops this server and starts another on its store.
    async fn restart(mut self) -> Running {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap().unwrap();
        let dir = std::mem::replace(&mut self._dir, tempfile::tempdir().unwrap());
        start_in(dir, ServerConfig::default(), EngineConfig::default()).await
    }
}

async fn start_with(config: ServerConfig, engine_config: EngineConfig) -> Running {
    start_in(tempfile::tempdir().unwrap(), config, engine_config).await
}

/// A server on the file store in `dir`, opened as `agent-host serve` opens
/// it (group commit across sessions).
async fn start_in(
    dir: tempfile::TempDir,
    config: ServerConfig,
    engine_config: EngineConfig,
) -> Running {
    let files = FileStore::open(dir.path())
        .and_then(FileStore::with_group_commit)
        .unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(files);
    let engine = Engine::new(engine_config, store.clone(), &|_: &str| None).unwrap();
    let server = Server::new(engine, config).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(listener, async {
        let _ = stopped.await;
    }));
    Running {
        base,
        http: reqwest::Client::new(),
        store,
        stop: Some(stop),
        task: Some(task),
        _dir: dir,
    }
}

async fn start(config: ServerConfig) -> Running {
    start_with(config, EngineConfig::default()).await
}

/// Reads an event stream until `done` holds for what arrived, failing with
/// `what` after `seconds`.
async fn read_events_until(
    events: &mut reqwest::Response,
    seconds: u64,
    what: &str,
    done: impl Fn(&str) -> bool,
) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
    let mut text = String::new();
    while !done(&text) {
        let chunk = tokio::time::timeout_at(deadline, events.chunk())
            .await
            .unwrap_or_else(|_| panic!("{what}: only {text}"))
            .unwrap()
            .expect("the stream stays open");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    text
}

fn message(field: &Value) -> &str {
    field["error"]["message"].as_str().unwrap_or_default()
}

/// Sessions: get-or-create, channel keys, worker and workspace, rename,
/// delete, and a 400 that names the field for each bad input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_and_bad_fields() {
    let s = start(ServerConfig::default()).await;
    let (status, made) = s
        .post(
            "/v1/sessions",
            json!({"key": "telegram:1", "title": "t", "worker_id": "w-1", "workspace_id": "acme"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(made["state"], "created");
    assert_eq!(made["worker_id"], "w-1");
    let id = made["id"].as_str().unwrap().to_owned();
    let (status, again) = s.post("/v1/sessions", json!({"key": "telegram:1"})).await;
    assert_eq!(
        (status, again["id"].as_str()),
        (StatusCode::OK, Some(id.as_str()))
    );
    // (channel, chat) makes the key, per channel by default.
    let (status, by_chat) = s
        .post("/v1/sessions", json!({"channel": "telegram", "chat": "1"}))
        .await;
    assert_eq!(
        (status, by_chat["id"].as_str()),
        (StatusCode::OK, Some(id.as_str()))
    );
    let (_, got) = s.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(got["workspace_id"], "acme");
    let (status, _) = s.get("/v1/sessions/telegram:1").await;
    assert_eq!(status, StatusCode::OK);

    let patched = s
        .http
        .patch(s.url("/v1/sessions/telegram:1"))
        .json(&json!({"title": "renamed"}))
        .send()
        .await
        .unwrap();
    assert_eq!(patched.status(), StatusCode::OK);
    assert_eq!(patched.json::<Value>().await.unwrap()["title"], "renamed");

    let bad: &[(&str, &str, Value, &str)] = &[
        ("POST", "/v1/sessions", json!({"key": 5}), "body.key"),
        ("POST", "/v1/sessions", json!({"kee": "x"}), "body.kee"),
        ("POST", "/v1/sessions", json!({"key": ""}), "body.key"),
        ("POST", "/v1/sessions", json!({"agent": ""}), "body.agent"),
        ("POST", "/v1/sessions", json!({"chat": "9"}), "body.channel"),
        (
            "POST",
            "/v1/sessions",
            json!({"key": "k".repeat(513)}),
            "body.key",
        ),
        (
            "POST",
            "/v1/sessions",
            json!({"title": "t".repeat(5000)}),
            "body.title",
        ),
        (
            "POST",
            "/v1/sessions",
            json!({"workspace_id": "w".repeat(600)}),
            "body.workspace_id",
        ),
        ("GET", "/v1/sessions?limit=0", Value::Null, "limit"),
        ("GET", "/v1/sessions?limit=201", Value::Null, "limit"),
        ("GET", "/v1/sessions?limit=ten", Value::Null, "limit"),
        ("GET", "/v1/sessions?cursor=nope", Value::Null, "cursor"),
        ("GET", "/v1/sessions?state=sleepy", Value::Null, "state"),
        ("GET", "/v1/sessions?colour=red", Value::Null, "colour"),
        (
            "GET",
            "/v1/sessions/telegram:1/messages?since=yesterday",
            Value::Null,
            "since",
        ),
        (
            "GET",
            "/v1/sessions/telegram:1/messages?roles=user,robot",
            Value::Null,
            "roles",
        ),
        (
            "GET",
            "/v1/sessions/telegram:1/messages?limit=-1",
            Value::Null,
            "limit",
        ),
        (
            "GET",
            "/v1/sessions/telegram:1/messages?include_forwarded=yes",
            Value::Null,
            "include_forwarded",
        ),
        (
            "GET",
            "/v1/sessions/telegram:1/export?format=pdf",
            Value::Null,
            "format",
        ),
        ("GET", "/v1/events?session=abc", Value::Null, "session"),
        (
            "POST",
            "/v1/sessions/telegram:1/messages",
            json!({"messages": []}),
            "body.messages",
        ),
        (
            "POST",
            "/v1/sessions/telegram:1/messages",
            json!({"messages": [{"role": "robot", "content": "x"}]}),
            "body.messages",
        ),
        (
            "POST",
            "/v1/sessions/telegram:1/messages",
            json!({"messages": [{"role": "user", "content": "x"}], "format": "yaml"}),
            "body.format",
        ),
        (
            "POST",
            "/v1/sessions/telegram:1/messages",
            json!({"format": "jsonl", "messages": [{"type": "user", "id": "a", "content": "x"}, {"type": "user", "id": "a", "content": "y"}]}),
            "body.messages[1].id",
        ),
        (
            "POST",
            "/v1/sessions/telegram:1/messages",
            json!({"format": "jsonl", "messages": [{"type": "user", "id": "a", "content": "x"}, {"type": "nobody"}]}),
            "body.messages[1]",
        ),
        (
            "POST",
            "/v1/sessions/telegram:1/turns",
            json!({"text": "  "}),
            "body.text",
        ),
    ];
    for (method, path, body, field) in bad {
        let request = match *method {
            "POST" => s.http.post(s.url(path)).json(body),
            _ => s.http.get(s.url(path)),
        };
        let reply = request.send().await.unwrap();
        let status = reply.status();
        let answer: Value = reply.json().await.unwrap();
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "{method} {path} {body}: {answer}"
        );
        assert_eq!(answer["error"]["kind"], "invalid_input");
        assert!(
            message(&answer).starts_with(&format!("{field}:"))
                || message(&answer).starts_with(&format!("{field}[")),
            "{method} {path} {body}: expected the message to name {field}: {answer}"
        );
    }
    // Not JSON at all, a body too large, an unknown session and route.
    let reply = s
        .http
        .post(s.url("/v1/sessions"))
        .body("key=x")
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), StatusCode::BAD_REQUEST);
    assert!(message(&reply.json().await.unwrap()).starts_with("content-type:"));
    let huge = "x".repeat(17 * 1024 * 1024);
    let reply = s
        .http
        .post(s.url("/v1/sessions/telegram:1/messages"))
        .json(&json!({"messages": [{"role": "user", "content": huge}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), StatusCode::PAYLOAD_TOO_LARGE);
    // The unread rest of the body makes the connection unusable: the client
    // is told not to send another request on it.
    assert_eq!(reply.headers()["connection"], "close");
    let answer: Value = reply.json().await.unwrap();
    assert_eq!(answer["error"]["kind"], "limit_exceeded");
    let (status, answer) = s.get("/v1/sessions/no-such-key").await;
    assert_eq!(
        (status, answer["error"]["kind"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found"))
    );
    let (status, _) = s.get("/v2/anything").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let put = s.http.put(s.url("/v1/sessions")).send().await.unwrap();
    assert_eq!(put.status(), StatusCode::METHOD_NOT_ALLOWED);
    let answer: Value = put.json().await.unwrap();
    assert!(message(&answer).contains("does not take PUT"), "{answer}");

    let deleted = s
        .http
        .delete(s.url(&format!("/v1/sessions/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::OK);
    let (status, _) = s.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    s.stop().await;
}

/// Messages in three formats, queried back; the context report, export and
/// the OpenAPI document.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_context_export_and_openapi() {
    let s = start(ServerConfig::default()).await;
    let (_, made) = s.post("/v1/sessions", json!({"key": "m"})).await;
    let id = made["id"].as_str().unwrap().to_owned();
    let (status, a) = s
        .post(
            "/v1/sessions/m/messages",
            json!({"messages": [{"role": "user", "content": "hello there"}, {"role": "assistant", "content": "hi"}], "channel": "slack"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{a}");
    // The same text again gets new ids, never the first ones.
    let (_, b) = s
        .post(
            "/v1/sessions/m/messages",
            json!({"messages": {"role": "user", "content": "hello there"}}),
        )
        .await;
    assert_ne!(a["ids"][0], b["ids"][0]);
    let (status, c) = s
        .post(
            "/v1/sessions/m/messages",
            json!({"format": "anthropic", "messages": {"system": "Be brief.", "messages": [{"role": "user", "content": [{"type": "text", "text": "third"}]}]}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let (_, d) = s
        .post(
            "/v1/sessions/m/messages",
            json!({"format": "jsonl", "messages": [{"type": "user", "id": "mine-1", "content": "native"}]}),
        )
        .await;
    assert_eq!(d["ids"], json!(["mine-1"]));
    assert_eq!(d["session"]["message_count"], 6);

    let (_, users) = s
        .get("/v1/sessions/m/messages?roles=user&contains=HELLO")
        .await;
    let users = users["messages"].as_array().unwrap();
    assert_eq!(users.len(), 2);
    assert_eq!(users[0]["channel"], "slack");
    let (_, last) = s.get(&format!("/v1/sessions/{id}/messages?limit=1")).await;
    assert_eq!(last["messages"][0]["id"], "mine-1");
    let (_, none) = s.get("/v1/sessions/m/messages?since=2999-01-01").await;
    assert!(none["messages"].as_array().unwrap().is_empty());

    let (status, report) = s.get("/v1/sessions/m/context").await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!(report["session"]["messages"], 6);
    assert!(report["triggers"].as_array().is_some_and(|t| !t.is_empty()));
    // A second read is served from the cache, and an append invalidates it.
    let (_, again) = s.get("/v1/sessions/m/context").await;
    assert_eq!(report, again);
    s.post(
        "/v1/sessions/m/messages",
        json!({"messages": [{"role": "user", "content": "more"}]}),
    )
    .await;
    let (_, after) = s.get("/v1/sessions/m/context").await;
    assert_eq!(after["session"]["messages"], 7);

    for (format, needle) in [
        ("markdown", "hello there"),
        ("openai", "\"role\": \"user\""),
        ("anthropic", "\"messages\""),
        ("jsonl", "\"id\":\"mine-1\""),
    ] {
        let text = s
            .http
            .get(s.url(&format!("/v1/sessions/m/export?format={format}")))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(text.contains(needle), "{format}: {text}");
    }

    let (status, doc) = s.get("/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    for path in [
        "/v1/sessions",
        "/v1/sessions/{session}",
        "/v1/sessions/{session}/messages",
        "/v1/sessions/{session}/context",
        "/v1/sessions/{session}/turns",
        "/v1/events",
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/responses",
        "/v1/models",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} is documented");
    }
    let responses = &doc["paths"]["/v1/responses"]["post"];
    assert_eq!(responses["tags"][0], "gateway", "{responses}");
    assert!(
        responses["requestBody"]["description"]
            .as_str()
            .is_some_and(|d| d.contains("previous_response_id")),
        "{responses}"
    );
    assert!(doc["components"]["schemas"]["SessionView"].is_object());
    assert!(doc["components"]["schemas"]["ErrorBody"].is_object());
    s.stop().await;
}

/// Paging through 1,000 sessions while others are being created: every one
/// of the 1,000 is seen exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_while_sessions_are_created() {
    let s = Arc::new(start(ServerConfig::default()).await);
    let mut made = HashSet::new();
    for chunk in 0..20 {
        let creates = (0..50).map(|i| {
            let s = s.clone();
            async move {
                let (status, v) = s
                    .post("/v1/sessions", json!({"key": format!("p{chunk}-{i}")}))
                    .await;
                assert_eq!(status, StatusCode::CREATED);
                v["id"].as_str().unwrap().to_owned()
            }
        });
        made.extend(futures_util::future::join_all(creates).await);
    }
    assert_eq!(made.len(), 1000);

    let creator = {
        let s = s.clone();
        tokio::spawn(async move {
            for i in 0..200 {
                s.post("/v1/sessions", json!({"key": format!("late-{i}")}))
                    .await;
            }
        })
    };
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/sessions?limit=37&cursor={c}"),
            None => "/v1/sessions?limit=37".to_owned(),
        };
        let (status, page) = s.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        seen.extend(
            page["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v["id"].as_str().unwrap().to_owned()),
        );
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    creator.await.unwrap();
    let unique: HashSet<_> = seen.iter().cloned().collect();
    assert_eq!(unique.len(), seen.len(), "no session is listed twice");
    let missing: Vec<_> = made.difference(&unique).collect();
    assert!(
        missing.is_empty(),
        "{} sessions were skipped",
        missing.len()
    );
    Arc::into_inner(s).unwrap().stop().await;
}

/// 24 writers on 8 sessions, 40 appends each, all at once: the server hands
/// the sessions' appends to the store together (one journal write for
/// several sessions); every message is stored exactly once, in its
/// session, in the order its writer sent them, and each answer counts what
/// its session held then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_on_distinct_sessions() {
    let s = Arc::new(start(ServerConfig::default()).await);
    for k in 0..8 {
        s.post("/v1/sessions", json!({"key": format!("s{k}")}))
            .await;
    }
    let writers = (0..24).map(|w| {
        let s = s.clone();
        tokio::spawn(async move {
            let mut counts = Vec::new();
            for i in 0..40 {
                let (status, v) = s
                    .post(
                        &format!("/v1/sessions/s{}/messages", w % 8),
                        json!({"format": "jsonl", "messages": [{"type": "user", "id": format!("w{w}-{i}"), "content": format!("{w} {i}")}]}),
                    )
                    .await;
                assert_eq!(status, StatusCode::CREATED, "{v}");
                assert_eq!(v["ids"], json!([format!("w{w}-{i}")]));
                counts.push(v["session"]["message_count"].as_u64().unwrap());
            }
            counts
        })
    });
    for writer in futures_util::future::join_all(writers).await {
        let counts = writer.unwrap();
        assert!(counts.is_sorted(), "a session only grows: {counts:?}");
    }
    for k in 0..8 {
        let (_, all) = s.get(&format!("/v1/sessions/s{k}/messages")).await;
        let ids: Vec<&str> = all["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids.len(), 120, "session s{k}");
        assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 120);
        let mut next: HashMap<usize, usize> = HashMap::new();
        for id in ids {
            let (w, i) = id[1..].split_once('-').unwrap();
            let (w, i): (usize, usize) = (w.parse().unwrap(), i.parse().unwrap());
            assert_eq!(w % 8, k, "{id} is in its writer's session");
            let expected = next.entry(w).or_insert(0);
            assert_eq!(i, *expected, "writer {w}'s messages in order");
            *expected += 1;
        }
    }
    Arc::into_inner(s).unwrap().stop().await;
}

/// 32 writers, 100 appends each, on one session: every message is stored
/// exactly once, and each writer's messages in the order it sent them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_on_one_session() {
    let s = Arc::new(start(ServerConfig::default()).await);
    s.post("/v1/sessions", json!({"key": "busy"})).await;
    let writers = (0..32).map(|w| {
        let s = s.clone();
        tokio::spawn(async move {
            for i in 0..100 {
                let (status, v) = s
                    .post(
                        "/v1/sessions/busy/messages",
                        json!({"format": "jsonl", "messages": [{"type": "user", "id": format!("w{w}-{i}"), "content": format!("{w} {i}")}]}),
                    )
                    .await;
                assert_eq!(status, StatusCode::CREATED, "{v}");
            }
        })
    });
    for writer in futures_util::future::join_all(writers).await {
        writer.unwrap();
    }
    let (_, all) = s.get("/v1/sessions/busy/messages").await;
    let ids: Vec<&str> = all["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3200);
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 3200);
    let mut next: HashMap<usize, usize> = HashMap::new();
    for id in ids {
        let (w, i) = id[1..].split_once('-').unwrap();
        let (w, i): (usize, usize) = (w.parse().unwrap(), i.parse().unwrap());
        let expected = next.entry(w).or_default();
        assert_eq!(i, *expected, "writer {w}'s messages are in order");
        *expected += 1;
    }
    Arc::into_inner(s).unwrap().stop().await;
}

/// Tokens: none or a wrong one is 401, a token without the scope 403.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_refuses_missing_wrong_and_unscoped_tokens() {
    const READ: &str = "reader-0123456789abcdef";
    const WRITE: &str = "writer-0123456789abcdef";
    let mut tokens = Tokens::none();
    tokens.add(READ, Scope::Read).unwrap();
    tokens.add(WRITE, Scope::Write).unwrap();
    let s = start(ServerConfig {
        tokens,
        ..ServerConfig::default()
    })
    .await;
    let send = |method: reqwest::Method, path: &str, token: Option<&str>| {
        let mut request = s.http.request(method.clone(), s.url(path));
        if method == reqwest::Method::POST {
            request = request.json(&json!({"key": "a"}));
        }
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    use reqwest::Method;
    let cases = [
        (Method::GET, "/v1/sessions", None, StatusCode::UNAUTHORIZED),
        (
            Method::GET,
            "/v1/sessions",
            Some("not-the-token-at-all"),
            StatusCode::UNAUTHORIZED,
        ),
        (Method::GET, "/v1/sessions", Some(READ), StatusCode::OK),
        (
            Method::POST,
            "/v1/sessions",
            Some(READ),
            StatusCode::FORBIDDEN,
        ),
        (
            Method::POST,
            "/v1/sessions",
            Some(WRITE),
            StatusCode::CREATED,
        ),
        (Method::GET, "/metrics", Some(WRITE), StatusCode::FORBIDDEN),
        (Method::GET, "/healthz", None, StatusCode::OK),
        (Method::GET, "/openapi.json", None, StatusCode::OK),
    ];
    for (method, path, token, expected) in cases {
        let reply = send(method.clone(), path, token).await.unwrap();
        let status = reply.status();
        let body = reply.text().await.unwrap();
        assert_eq!(status, expected, "{method} {path} with {token:?}: {body}");
        if status == StatusCode::UNAUTHORIZED {
            let v: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(v["error"]["kind"], "unauthorized");
        }
    }
    // Serving beyond loopback needs tokens.
    let open: std::net::SocketAddr = "0.0.0.0:8787".parse().unwrap();
    let e = agent_host_server::check_exposure(open, &ServerConfig::default()).unwrap_err();
    assert!(e.to_string().contains("without auth"), "{e}");
    s.stop().await;
}

/// A webhook receiver that checks signatures and counts deliveries.
#[derive(Clone, Default)]
struct Receiver {
    got: Arc<Mutex<Vec<(String, String)>>>,
    fail: bool,
}

async fn receive(
    axum::extract::State(r): axum::extract::State<Receiver>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    if r.fail {
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    let header = |name: &str| headers.get(name).unwrap().to_str().unwrap().to_owned();
    let signature = header("x-agent-host-signature");
    let t: i64 = signature[2..signature.find(',').unwrap()].parse().unwrap();
    assert_eq!(
        signature,
        agent_host_server::hooks::signature(b"0123456789abcdef-secret", t, &body),
        "the signature is over the timestamp and the body"
    );
    let payload: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(payload["event"], header("x-agent-host-event"));
    r.got.lock().unwrap().push((
        header("x-agent-host-event"),
        header("x-agent-host-delivery"),
    ));
    StatusCode::NO_CONTENT
}

async fn receiver(fail: bool) -> (Receiver, reqwest::Url) {
    let r = Receiver {
        fail,
        ..Receiver::default()
    };
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(r.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (r, url.parse().unwrap())
}

/// Every webhook fires exactly once per event; a failing one is an event
/// and never fails or blocks the write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_fire_once_per_event_and_failures_are_events() {
    let (good, good_url) = receiver(false).await;
    let (_bad, bad_url) = receiver(true).await;
    let mut failing = WebhookConfig::new(bad_url, "0123456789abcdef-secret");
    failing.attempts = 2;
    failing.backoff = Duration::from_millis(10);
    let s = start(ServerConfig {
        webhooks: vec![
            WebhookConfig::new(good_url, "0123456789abcdef-secret"),
            failing,
        ],
        ..ServerConfig::default()
    })
    .await;
    let mut events = s.http.get(s.url("/v1/events")).send().await.unwrap();
    let (_, made) = s.post("/v1/sessions", json!({"key": "h"})).await;
    for i in 0..5 {
        let (status, _) = s
            .post("/v1/sessions/h/messages", json!({"messages": [{"role": "user", "content": format!("message {i}: {}", "the deploy of build 7 failed again on the staging host; ".repeat(8))}, {"role": "assistant", "content": "ok"}]}))
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let (status, summary) = s.post("/v1/sessions/h/summarize", Value::Null).await;
    assert_eq!(status, StatusCode::OK, "{summary}");
    assert_eq!(
        summary["pipeline"]["summary"]["outcome"], "summarized",
        "{summary}"
    );
    assert_eq!(summary["session"]["state"], "compacted");
    let deleted = s
        .http
        .delete(s.url(&format!("/v1/sessions/{}", made["id"].as_str().unwrap())))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::OK);

    let expected = [
        ("session_create", 1),
        ("session_save", 5),
        ("before_compaction", 1),
        ("session_delete", 1),
    ];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got = good.got.lock().unwrap().clone();
        if got.len() >= 8 || tokio::time::Instant::now() > deadline {
            let mut count: HashMap<&str, usize> = HashMap::new();
            for (event, _) in &got {
                *count.entry(event.as_str()).or_default() += 1;
            }
            for (event, n) in expected {
                assert_eq!(
                    count.get(event).copied().unwrap_or(0),
                    n,
                    "{event}: {got:?}"
                );
            }
            let deliveries: HashSet<_> = got.iter().map(|(_, d)| d).collect();
            assert_eq!(deliveries.len(), got.len(), "each delivery once");
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The failing webhook: eight hook_failed events on the stream, among the others.
    let text = read_events_until(&mut events, 10, "hook_failed events arrive", |text| {
        text.matches("event: hook_failed").count() >= 8
    })
    .await;
    for event in [
        "session_created",
        "session_saved",
        "context_compacted",
        "session_deleted",
    ] {
        assert!(
            text.contains(&format!("event: {event}")),
            "{event} in {text}"
        );
    }
    s.stop().await;
}

/// Sessions go idle after the idle time, are listed as such, are released
/// from memory, and wake up on the next write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_go_idle_and_wake_up() {
    let s = start(ServerConfig {
        // Long enough that a loaded machine does not make the session idle
        // between the append and the read that expects it active.
        idle_after: Duration::from_millis(1500),
        sweep_every: Duration::from_millis(50),
        ..ServerConfig::default()
    })
    .await;
    let (_, made) = s.post("/v1/sessions", json!({"key": "sleepy"})).await;
    let id = made["id"].as_str().unwrap().to_owned();
    let mut events = s
        .http
        .get(s.url(&format!("/v1/events?session={id}")))
        .send()
        .await
        .unwrap();
    s.post(
        "/v1/sessions/sleepy/messages",
        json!({"messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    let (_, active) = s.get("/v1/sessions/sleepy").await;
    assert_eq!(active["state"], "active");
    let text = read_events_until(&mut events, 5, "the session goes idle", |text| {
        text.contains("\"to\":\"idle\"")
    })
    .await;
    assert!(text.contains("event: state_changed"), "{text}");
    let (_, idle) = s.get("/v1/sessions?state=idle").await;
    assert_eq!(idle["sessions"][0]["id"], id.as_str());
    // Released from memory by the same sweep or the next one.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let metrics = s
            .http
            .get(s.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if metrics.contains("agent_host_hot_sessions 0") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never released: {metrics}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.post(
        "/v1/sessions/sleepy/messages",
        json!({"messages": [{"role": "user", "content": "back"}]}),
    )
    .await;
    let (_, awake) = s.get("/v1/sessions/sleepy").await;
    assert_eq!(awake["state"], "active");
    assert_eq!(awake["message_count"], 2);
    s.stop().await;
}

/// A model turn, as JSON and as server-sent events, against a real
/// (loopback) model server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_answer_as_json_and_as_events() {
    let model = LlmServer::start(Wire::OpenAi);
    let mut provider = ProviderSettings::new(ProviderKind::OpenAi, "test-model");
    provider.base_url = model.base_url();
    provider.api_key_env = None;
    provider.max_retries = 0;
    let s = start_with(
        ServerConfig::default(),
        EngineConfig {
            provider: Some(provider),
            ..EngineConfig::default()
        },
    )
    .await;
    s.post("/v1/sessions", json!({"key": "chat"})).await;
    let (status, turn) = s
        .post(
            "/v1/sessions/chat/turns",
            json!({"text": "hello", "channel": "telegram"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{turn}");
    assert_eq!(turn["user"]["channel"], "telegram");
    assert!(turn["reply"]["content"].is_string(), "{turn}");
    assert_eq!(turn["session"]["message_count"], 2);

    let reply = s
        .http
        .post(s.url("/v1/sessions/chat/turns"))
        .json(&json!({"text": "again", "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        reply.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let text = reply.text().await.unwrap();
    assert!(text.contains("event: text"), "{text}");
    let done = text
        .split("\n\n")
        .find(|frame| frame.starts_with("event: done"))
        .expect("a done frame");
    let data: Value = serde_json::from_str(done.split_once("data: ").unwrap().1).unwrap();
    assert_eq!(data["session"]["message_count"], 4);

    // The model gone: a 502 with the provider's kind, nothing stored.
    drop(model);
    let (status, error) = s
        .post("/v1/sessions/chat/turns", json!({"text": "third"}))
        .await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{error}");
    assert_eq!(error["error"]["kind"], "provider_failed");
    let (_, session) = s.get("/v1/sessions/chat").await;
    assert_eq!(session["message_count"], 4);
    s.stop().await;
}

/// A WebAssembly hook component runs once per event in the sandbox; one
/// that fails or traps is a `hook_failed` event and the write stands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn component_hooks_run_sandboxed_once_per_event() {
    use agent_host_runtime::{HookOptions, Limits, Runtime, RuntimeConfig};
    let cache = tempfile::tempdir().unwrap();
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: Some(cache.path().to_owned()),
        ..RuntimeConfig::default()
    })
    .unwrap();
    let hook = runtime
        .load_hook_file(
            std::path::Path::new(agent_host_test_artifacts::HOOK),
            HookOptions {
                limits: Limits {
                    deadline: Duration::from_millis(300),
                    ..Limits::default()
                },
                ..HookOptions::default()
            },
        )
        .unwrap();
    let s = start(ServerConfig {
        hooks: vec![Arc::new(agent_host_server::hooks::ComponentHook(hook))],
        ..ServerConfig::default()
    })
    .await;
    let mut events = s.http.get(s.url("/v1/events")).send().await.unwrap();
    for key in ["fine", "fail", "trap", "spin"] {
        let (status, _) = s.post("/v1/sessions", json!({"key": key})).await;
        assert_eq!(
            status,
            StatusCode::CREATED,
            "{key}: the hook never blocks the write"
        );
        let (status, _) = s
            .post(
                &format!("/v1/sessions/{key}/messages"),
                json!({"messages": [{"role": "user", "content": "x"}]}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    read_events_until(
        &mut events,
        20,
        "six hook failures: create and save of fail, trap and spin",
        |text| text.matches("event: hook_failed").count() >= 6,
    )
    .await;
    drop(events);
    // The good session's two events were delivered, once each.
    let metrics = s
        .http
        .get(s.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(r#"agent_host_hook_deliveries_total{hook="hook",outcome="delivered"} 2"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"agent_host_hook_deliveries_total{hook="hook",outcome="failed"} 6"#),
        "{metrics}"
    );
    let (_, spun) = s.get("/v1/sessions/spin").await;
    assert_eq!(spun["message_count"], 1);
    // A flood of events for a spinning hook (each call runs to its 300 ms
    // deadline, two at a time) never holds the appends back: all 40 are
    // acknowledged while most of the hook's calls are still waiting.
    for i in 0..40 {
        let (status, _) = s
            .post(
                "/v1/sessions/spin/messages",
                json!({"messages": [{"role": "user", "content": format!("flood {i}")}]}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let metrics = s
        .http
        .get(s.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let failed: u64 = metrics
        .lines()
        .find(|l| {
            l.starts_with(r#"agent_host_hook_deliveries_total{hook="hook",outcome="failed"}"#)
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(
        failed < 6 + 40,
        "the appends waited for the hook: {failed} calls already done"
    );
    s.stop().await;
}

/// The engine's context report of `session`, computed over the whole log
/// as the store holds it, as the server would show it.
fn full_report(store: &dyn SessionStore, session: &SessionRef, config: &PipelineConfig) -> Value {
    let (meta, compaction) = agent_host_engine::context_report(store, session, config).unwrap();
    // Through text, as the served report comes (parsing a float back may
    // not give the same last digit).
    let text = serde_json::to_string(&ContextReport::new(&meta, &compaction)).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// How many context windows the server read from the store.
async fn context_loads(s: &Running) -> u64 {
    let metrics = s
        .http
        .get(s.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("agent_host_context_loads_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no context_loads in {metrics}"))
}

/// The context report comes from the hot session's window of the log, kept
/// up to date by the appends made through the server: after every append
/// it is the report the engine computes over the whole log (with a budget
/// small enough that the window leaves most of the log out). Appends of
/// plain messages, tool calls and results and system messages go through
/// the window; writes that go around the server (appends straight to its
/// store, appends by another store on the same folder, as another process
/// makes them, and a summary's checkpoint) are seen, and the window is read
/// again, only then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_context_report_follows_appends_and_writes_around_the_server() {
    let pipeline = PipelineConfig {
        budget: BudgetConfig::for_window(2_000),
        summary: Some(SummaryConfig {
            max_tokens: Some(2_500),
            window_fraction: None,
            ..SummaryConfig::default()
        }),
        ..PipelineConfig::default()
    };
    let s = start_with(
        ServerConfig::default(),
        EngineConfig {
            pipeline: pipeline.clone(),
            auto_summarize: true,
            summarizer: SummarizerChoice::Extractive,
            ..EngineConfig::default()
        },
    )
    .await;
    let (_, made) = s.post("/v1/sessions", json!({"key": "long"})).await;
    let id: uuid::Uuid = made["id"].as_str().unwrap().parse().unwrap();
    let session = SessionRef::Id(id);
    let other = FileStore::open(s.store_root()).unwrap();
    let check = |what: String| {
        let s = &s;
        let session = session.clone();
        let pipeline = pipeline.clone();
        async move {
            let (status, served) = s.get(&format!("/v1/sessions/{id}/context")).await;
            assert_eq!(status, StatusCode::OK, "{what}: {served}");
            let full = full_report(&*s.store, &session, &pipeline);
            assert_eq!(served, full, "{what}");
            served
        }
    };
    check("a new session".into()).await;
    let mut loads = context_loads(&s).await;
    assert_eq!(loads, 1);
    let mut hidden_seen = false;
    for i in 0..90 {
        let text = format!("{i} {}", "words of a message ".repeat(2 + (i * 7) % 41));
        let around = match i % 10 {
            3 => {
                s.store
                    .append(
                        &session,
                        &[Message::user(text).with_id(format!("direct-{i}"))],
                    )
                    .unwrap();
                true
            }
            7 => {
                other
                    .append(
                        &session,
                        &[Message::assistant(text).with_id(format!("other-{i}"))],
                    )
                    .unwrap();
                true
            }
            5 => {
                // Around the server, then through it, before any report:
                // the window must not take the second as if the first had
                // not happened.
                let first = Message::user(text.clone()).with_id(format!("other-{i}"));
                other.append(&session, &[first]).unwrap();
                let messages = json!([{"role": "assistant", "content": text}]);
                let (status, body) = s
                    .post(
                        &format!("/v1/sessions/{id}/messages"),
                        json!({ "messages": messages }),
                    )
                    .await;
                assert_eq!(status, StatusCode::CREATED, "{body}");
                true
            }
            _ if i == 65 => {
                let (status, body) = s
                    .post(&format!("/v1/sessions/{id}/summarize"), json!({}))
                    .await;
                assert_eq!(status, StatusCode::OK, "{body}");
                assert_eq!(body["session"]["checkpoints"], 1, "{body}");
                true
            }
            _ => {
                let messages = match i % 4 {
                    0 => json!([{"role": "user", "content": text}]),
                    1 => json!([
                        {"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{i}"), "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
                        {"role": "tool", "tool_call_id": format!("c{i}"), "content": text}
                    ]),
                    2 => {
                        json!([{"role": "system", "content": format!("note {i}")}, {"role": "user", "content": text}])
                    }
                    _ => json!([{"role": "assistant", "content": text}]),
                };
                let (status, body) = s
                    .post(
                        &format!("/v1/sessions/{id}/messages"),
                        json!({ "messages": messages }),
                    )
                    .await;
                assert_eq!(status, StatusCode::CREATED, "{body}");
                false
            }
        };
        let served = check(format!("after write {i}")).await;
        hidden_seen |= served["left_out"].as_u64().unwrap_or(0) > 0
            && served["messages_since_summary"].as_u64().unwrap_or(0) > 40;
        let now = context_loads(&s).await;
        if around {
            assert_eq!(
                now,
                loads + 1,
                "write {i} went around the server: read again"
            );
        } else {
            assert_eq!(now, loads, "append {i} went through the window");
        }
        loads = now;
    }
    // The window held a small part of a log much longer than the budget.
    assert!(hidden_seen);
    s.stop().await;
}

/// An `Idempotency-Key` needs a store that keeps keys: the file store
/// refuses it by name and appends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_on_a_store_without_keys_is_refused() {
    let s = start(ServerConfig::default()).await;
    s.post("/v1/sessions", json!({"key": "keyed"})).await;
    let reply = s
        .http
        .post(s.url("/v1/sessions/keyed/messages"))
        .header("idempotency-key", "request-1")
        .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), StatusCode::BAD_REQUEST);
    let body: Value = reply.json().await.unwrap();
    assert!(message(&body).contains("idempotency"), "{body}");
    let (_, session) = s.get("/v1/sessions/keyed").await;
    assert_eq!(session["message_count"], 0);
    s.stop().await;
}

/// The channels a session was created and written through are kept by the
/// store: after a restart the list filters by them as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channels_outlive_a_restart() {
    let s = start(ServerConfig::default()).await;
    let (status, made) = s
        .post(
            "/v1/sessions",
            json!({"key": "tg:1", "channel": "telegram"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let (status, other) = s.post("/v1/sessions", json!({"key": "plain"})).await;
    assert_eq!(status, StatusCode::CREATED, "{other}");
    let (status, _) = s
        .post(
            "/v1/sessions/plain/messages",
            json!({"messages": [{"role": "user", "content": "hi"}], "channel": "web"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);

    let s = s.restart().await;
    let keys = |listed: &Value| -> Vec<String> {
        listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["key"].as_str().unwrap().to_owned())
            .collect()
    };
    let (_, telegram) = s.get("/v1/sessions?channel=telegram").await;
    assert_eq!(keys(&telegram), ["tg:1"], "{telegram}");
    assert_eq!(telegram["sessions"][0]["channels"], json!(["telegram"]));
    let (_, web) = s.get("/v1/sessions?channel=web").await;
    assert_eq!(keys(&web), ["plain"], "{web}");
    s.stop().await;
}
