//! Several `agent-host serve` instances on one PostgreSQL database (a real
//! server, started by the test process): appends from clients spread over
//! both land once each, in order; an event published by one instance
//! reaches the other's `/v1/events`; a session created on one is listed by
//! the other.

#![cfg(unix)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use agent_host_engine::{Engine, EngineConfig};
use agent_host_server::{Server, ServerConfig};
use agent_host_store::testing::postgres_server;
use agent_host_store::{PostgresStore, SessionRef, SessionStore};
use reqwest::StatusCode;
use serde_json::{Value, json};

struct Instance {
    base: String,
    http: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Instance {
    async fn start(url: &str) -> Instance {
        let store: Arc<dyn SessionStore> = Arc::new(PostgresStore::open(url).unwrap());
        let engine = Engine::new(EngineConfig::default(), store, &|_: &str| None).unwrap();
        let server = Server::new(engine, ServerConfig::default()).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(server.serve(listener, async {
            let _ = stopped.await;
        }));
        Instance {
            base,
            http: reqwest::Client::new(),
            stop: Some(stop),
        }
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let reply = self
            .http
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = reply.status();
        (status, reply.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        let reply = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        let status = reply.status();
        (status, reply.json().await.unwrap_or(Value::Null))
    }

    /// The sessions this instance lists, by key.
    async fn listed(&self) -> HashMap<String, Value> {
        let (status, page) = self.get("/v1/sessions?limit=200").await;
        assert_eq!(status, StatusCode::OK, "{page}");
        page["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| Some((s["key"].as_str()?.to_owned(), s.clone())))
            .collect()
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Waits until `check` holds, failing with `what` after ten seconds.
async fn eventually<F: std::future::Future<Output = bool>>(what: &str, check: impl Fn() -> F) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Reads an event stream until `done` holds for what arrived.
async fn read_events_until(
    events: &mut reqwest::Response,
    what: &str,
    done: impl Fn(&str) -> bool,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut text = String::new();
    while !done(&text) {
        let chunk = tokio::time::timeout_at(deadline, events.chunk())
            .await
            .unwrap_or_else(|_| panic!("{what}: only {text}"))
            .unwrap()
            .expect("the stream stays open");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_share_sessions_events_and_every_append() {
    // The helpers block on a runtime of their own.
    let url = tokio::task::spawn_blocking(|| postgres_server::server().map(|pg| pg.fresh_url()))
        .await
        .unwrap();
    let Some(url) = url else { return };
    let (a, b) = (Instance::start(&url).await, Instance::start(&url).await);

    // B listens; A creates a session: B's listeners hear of it, and B lists it.
    let mut events = b
        .http
        .get(format!("{}/v1/events", b.base))
        .send()
        .await
        .unwrap();
    // B's listening connection opens in the background: A creates
    // sessions until B's listeners hear of one.
    let mut heard = None;
    for i in 0..40 {
        let key = format!("from-a-{i}");
        let (status, created) = a.post("/v1/sessions", json!({"key": key})).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        let id = created["id"].as_str().unwrap().to_owned();
        let wanted = format!("\"session\":\"{id}\"");
        let found = tokio::time::timeout(
            Duration::from_millis(500),
            read_events_until(
                &mut events,
                "A's session_created on B's /v1/events",
                |text| text.contains("event: session_created") && text.contains(&wanted),
            ),
        )
        .await;
        if found.is_ok() {
            heard = Some(key);
            break;
        }
    }
    let key = heard.expect("B's /v1/events heard of a session A created");
    eventually("B lists the session A created", || async {
        b.listed().await.contains_key(&key)
    })
    .await;

    // 16 clients over both instances, four shared sessions, 20 appends each.
    for s in 0..4 {
        let (status, body) = b
            .post("/v1/sessions", json!({"key": format!("shared-{s}")}))
            .await;
        assert!(status.is_success(), "{body}");
    }
    let (a, b) = (Arc::new(a), Arc::new(b));
    let clients: Vec<_> = (0..16)
        .map(|c| {
            let instance = Arc::clone(if c % 2 == 0 { &a } else { &b });
            tokio::spawn(async move {
                let mut acked = Vec::new();
                for n in 0..20 {
                    let text = format!("c{c}-{n}");
                    let (status, body) = instance
                        .post(
                            &format!("/v1/sessions/shared-{}/messages", c % 4),
                            json!({"messages": [{"role": "user", "content": text}]}),
                        )
                        .await;
                    assert!(
                        status.is_success(),
                        "client {c}, append {n}: {status} {body}"
                    );
                    acked.push(text);
                }
                (c, acked)
            })
        })
        .collect();
    let mut acked = HashMap::new();
    for client in clients {
        let (c, texts) = client.await.unwrap();
        acked.insert(c, texts);
    }
    let store = PostgresStore::open(&url).unwrap();
    for s in 0..4 {
        let history = store
            .load(&SessionRef::key("default", format!("shared-{s}")))
            .unwrap();
        assert!(history.warnings.is_empty(), "{:?}", history.warnings);
        let texts: Vec<String> = history
            .messages
            .iter()
            .map(|m| m.text().into_owned())
            .collect();
        assert_eq!(texts.len(), 4 * 20, "session shared-{s}: {texts:?}");
        for c in (0..16).filter(|c| c % 4 == s) {
            let positions: Vec<usize> = acked[&c]
                .iter()
                .map(|t| {
                    let found: Vec<usize> = (0..texts.len()).filter(|&i| texts[i] == *t).collect();
                    assert_eq!(found.len(), 1, "{t} in shared-{s}: {found:?}");
                    found[0]
                })
                .collect();
            assert!(
                positions.windows(2).all(|w| w[0] < w[1]),
                "client {c}'s messages out of order in shared-{s}: {positions:?}"
            );
        }
    }
    // Each instance's index follows the other's appends.
    for (name, instance) in [("A", &a), ("B", &b)] {
        eventually(&format!("{name} lists every append"), || async {
            let listed = instance.listed().await;
            (0..4).all(|s| listed[&format!("shared-{s}")]["message_count"] == 80)
        })
        .await;
    }
}

/// Issue 22: a retried append with the same `Idempotency-Key` stores its
/// messages once, through either instance; another key appends again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_with_the_same_idempotency_key_appends_once() {
    let Some(url) =
        tokio::task::spawn_blocking(|| postgres_server::server().map(|pg| pg.fresh_url()))
            .await
            .unwrap()
    else {
        return;
    };
    let (a, b) = (Instance::start(&url).await, Instance::start(&url).await);
    let (status, _) = a.post("/v1/sessions", json!({"key": "retried"})).await;
    assert_eq!(status, StatusCode::CREATED);
    let append = |instance: &Instance, key: &'static str, text: &'static str| {
        instance
            .http
            .post(format!("{}/v1/sessions/retried/messages", instance.base))
            .header("idempotency-key", key)
            .json(&json!({"messages": [{"role": "user", "content": text}]}))
            .send()
    };
    for instance in [&a, &b, &a] {
        let reply = append(instance, "request-1", "once").await.unwrap();
        assert_eq!(reply.status(), StatusCode::CREATED);
    }
    let reply = append(&b, "request-2", "twice").await.unwrap();
    assert_eq!(reply.status(), StatusCode::CREATED);
    let store = PostgresStore::open(&url).unwrap();
    let messages = tokio::task::spawn_blocking(move || {
        store
            .load(&SessionRef::Key {
                agent: agent_host_store::DEFAULT_AGENT.to_owned(),
                key: "retried".to_owned(),
            })
            .unwrap()
            .messages
    })
    .await
    .unwrap();
    let texts: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(texts, ["once", "twice"]);
    let bad = a
        .http
        .post(format!("{}/v1/sessions/retried/messages", a.base))
        .header("idempotency-key", "k".repeat(300))
        .json(&json!({"messages": [{"role": "user", "content": "x"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    let body: Value = bad.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("idempotency-key"),
        "{body}"
    );
}
