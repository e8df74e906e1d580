//! `/v1/memory` over real HTTP: add, extract, search, get, list, update,
//! delete; scoping by user; invalidation; errors as JSON.

use std::sync::Arc;

use agent_host_engine::{Engine, EngineConfig, MemoryConfig};
use agent_host_server::{Server, ServerConfig};
use agent_host_store::memory::MemoryStore;
use agent_host_store::{FileStore, SessionStore};
use reqwest::StatusCode;
use serde_json::{Value, json};

struct Running {
    base: String,
    http: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
    dir: tempfile::TempDir,
}

impl Running {
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let reply = request.send().await.unwrap();
        let status = reply.status();
        (status, reply.json().await.unwrap_or(Value::Null))
    }
}

async fn start(memory: bool) -> Running {
    start_for(memory, None).await
}

/// A server whose turns and views recall `user`'s memory when given.
async fn start_for(memory: bool, user: Option<&str>) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let memory =
        memory.then(|| Arc::new(MemoryStore::open(&dir.path().to_string_lossy()).unwrap()));
    let engine_config = EngineConfig {
        memory: match (&memory, user) {
            (Some(m), Some(user)) => Some(MemoryConfig::new(Arc::clone(m), user)),
            _ => None,
        },
        ..EngineConfig::default()
    };
    let engine = Engine::new(engine_config, store, &|_: &str| None).unwrap();
    let config = ServerConfig {
        memory,
        ..ServerConfig::default()
    };
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
        stop: Some(stop),
        task,
        dir,
    }
}

use reqwest::Method;

#[tokio::test]
async fn memory_over_http() {
    let s = start(true).await;
    // A fact given directly.
    let (status, added) = s
        .send(
            Method::POST,
            "/v1/memory",
            Some(json!({"user": "alice", "text": "prefers tabs over spaces"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{added}");
    let tabs = added["added"][0]["fact"]["id"].as_str().unwrap().to_owned();
    assert_eq!(added["added"][0]["fact"]["entity"], "alice");
    // Facts extracted from messages, then a contradiction.
    let (status, extracted) = s
        .send(Method::POST, "/v1/memory", Some(json!({
            "user": "alice", "source_session": "s1",
            "messages": [
                {"id": "m1", "role": "user", "content": "I live in Lisbon. The repo is at ~/src/agent-host.", "timestamp": "2026-01-01T10:00:00Z"},
                {"id": "m2", "role": "assistant", "content": "Noted.", "timestamp": "2026-01-01T10:00:05Z"}
            ]})))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{extracted}");
    let facts = extracted["added"].as_array().unwrap();
    assert_eq!(facts.len(), 2, "{extracted}");
    assert_eq!(facts[0]["fact"]["attribute"], "lives in");
    assert_eq!(facts[0]["fact"]["source_message"], "m1");
    assert_eq!(facts[1]["fact"]["kind"], "path");
    let lisbon = facts[0]["fact"]["id"].as_str().unwrap().to_owned();
    let (_, moved) = s
        .send(Method::POST, "/v1/memory", Some(json!({
            "user": "alice",
            "messages": [{"id": "m9", "role": "user", "content": "I moved to Porto.", "timestamp": "2026-02-01T10:00:00Z"}]})))
        .await;
    assert_eq!(moved["added"][0]["invalidated"], json!([lisbon]));
    // Search: valid facts only, unless asked.
    let (status, hits) = s
        .send(
            Method::GET,
            "/v1/memory/search?user=alice&q=where%20does%20alice%20live",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let texts: Vec<&str> = hits["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["fact"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts[0], "I moved to Porto.", "{texts:?}");
    assert!(
        !texts.iter().any(|t| t.contains("Lisbon")),
        "an invalidated fact is left out: {texts:?}"
    );
    let (_, all) = s
        .send(
            Method::GET,
            "/v1/memory/search?user=alice&q=Lisbon&include_invalid=true",
            None,
        )
        .await;
    assert_eq!(all["hits"][0]["fact"]["valid"], false);
    assert_eq!(
        all["hits"][0]["fact"]["invalidated_by"],
        moved["added"][0]["fact"]["id"]
    );
    // Another user sees none of it.
    let (_, bob) = s
        .send(Method::GET, "/v1/memory/search?user=bob&q=tabs", None)
        .await;
    assert_eq!(bob["hits"], json!([]));
    let (status, error) = s
        .send(Method::GET, &format!("/v1/memory/{tabs}?user=bob"), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(error["error"]["kind"], "not_found");
    // Get, update, list (pages), everything about an entity, delete.
    let (status, fact) = s
        .send(Method::GET, &format!("/v1/memory/{tabs}?user=alice"), None)
        .await;
    assert_eq!(
        (status, fact["text"].as_str()),
        (StatusCode::OK, Some("prefers tabs over spaces"))
    );
    let (status, edited) = s
        .send(
            Method::PATCH,
            &format!("/v1/memory/{tabs}?user=alice"),
            Some(json!({"text": "prefers spaces over tabs"})),
        )
        .await;
    assert_eq!(
        (status, edited["text"].as_str()),
        (StatusCode::OK, Some("prefers spaces over tabs"))
    );
    let (_, page) = s
        .send(Method::GET, "/v1/memory?user=alice&limit=2", None)
        .await;
    assert_eq!(page["facts"].as_array().unwrap().len(), 2);
    let next = page["next"].as_str().unwrap().to_owned();
    let (_, rest) = s
        .send(
            Method::GET,
            &format!("/v1/memory?user=alice&after={next}"),
            None,
        )
        .await;
    assert_eq!(rest["facts"].as_array().unwrap().len(), 2);
    assert!(rest.get("next").is_none());
    let (_, about) = s
        .send(Method::GET, "/v1/memory?user=alice&entity=alice", None)
        .await;
    assert_eq!(about["facts"].as_array().unwrap().len(), 4);
    let (status, _) = s
        .send(
            Method::DELETE,
            &format!("/v1/memory/{tabs}?user=alice"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = s
        .send(Method::GET, &format!("/v1/memory/{tabs}?user=alice"), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Bad requests say what and where.
    let (status, error) = s
        .send(Method::POST, "/v1/memory", Some(json!({"user": "alice"})))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        error["error"]["message"].as_str().unwrap().contains("text"),
        "{error}"
    );
    let (status, error) = s
        .send(
            Method::POST,
            "/v1/memory",
            Some(json!({"user": "alice", "messages": [{"role": "robot", "content": "x"}]})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("messages[0].role"),
        "{error}"
    );
    let (status, _) = s
        .send(
            Method::POST,
            "/v1/memory",
            Some(json!({"user": "", "text": "x"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = s
        .send(
            Method::GET,
            "/v1/memory/search?user=alice&q=x&limit=0",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, error) = s.send(Method::GET, "/v1/memory/search?q=x", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    // What the server wrote is in the store's memory log, for the CLI to read.
    let reopened = MemoryStore::open(&s.dir.path().to_string_lossy()).unwrap();
    assert_eq!(
        reopened
            .list(&agent_host_core::memory::Filter::user("alice"), None, 100)
            .unwrap()
            .len(),
        3
    );
    // The OpenAPI document describes the routes.
    let (_, doc) = s.send(Method::GET, "/openapi.json", None).await;
    for path in ["/v1/memory", "/v1/memory/search", "/v1/memory/{id}"] {
        assert!(
            doc["paths"].get(path).is_some(),
            "{path} in the OpenAPI document"
        );
    }
    let _ = s.stop.unwrap().send(());
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_server_without_memory_says_so() {
    let s = start(false).await;
    let (status, error) = s
        .send(Method::GET, "/v1/memory/search?user=a&q=x", None)
        .await;
    assert_eq!(status.as_u16() / 100, 5, "{error}");
    assert_eq!(error["error"]["kind"], "configuration");
    let _ = s.stop.unwrap().send(());
    s.task.await.unwrap().unwrap();
}

/// What would be sent now ends with a volatile tail: the facts memory
/// recalls for the newest user message, counted in their own zone and
/// shown on the session's page; without memory the zone is empty.
#[tokio::test]
async fn the_context_shows_the_volatile_tail() {
    let s = start_for(true, Some("alice")).await;
    let (status, _) = s
        .send(
            Method::POST,
            "/v1/memory",
            Some(json!({"user": "alice", "text": "deploys the billing service with the staging key on fridays"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, made) = s
        .send(Method::POST, "/v1/sessions", Some(json!({"key": "ops"})))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let (_, before) = s.send(Method::GET, "/v1/sessions/ops/context", None).await;
    assert_eq!(before["tokens"]["volatile"], 0, "{before}");
    let (status, _) = s
        .send(
            Method::POST,
            "/v1/sessions/ops/messages",
            Some(json!({"messages": [{"role": "user", "content": "How do we deploy billing on fridays?"}]})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, context) = s.send(Method::GET, "/v1/sessions/ops/context", None).await;
    let volatile = context["tokens"]["volatile"].as_u64().unwrap();
    assert!(volatile > 0, "{context}");
    assert_eq!(
        context["volatile_tail"][0], "deploys the billing service with the staging key on fridays",
        "{context}"
    );
    let parts: u64 = ["system", "summary", "recent", "volatile"]
        .iter()
        .map(|z| context["tokens"][z].as_u64().unwrap())
        .sum();
    assert_eq!(
        context["tokens"]["total"].as_u64().unwrap(),
        parts,
        "{context}"
    );
    let id = made["id"].as_str().unwrap();
    let page = s
        .http
        .get(format!("{}/sessions/{id}", s.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(&format!("Volatile tail <strong>{volatile}</strong>")),
        "{page}"
    );
    assert!(page.contains("staging key on fridays"), "{page}");

    // A server whose turns keep no memory shows the zone empty.
    let plain = start_for(true, None).await;
    plain
        .send(Method::POST, "/v1/sessions", Some(json!({"key": "ops"})))
        .await;
    plain
        .send(
            Method::POST,
            "/v1/sessions/ops/messages",
            Some(json!({"messages": [{"role": "user", "content": "How do we deploy billing on fridays?"}]})),
        )
        .await;
    let (_, context) = plain
        .send(Method::GET, "/v1/sessions/ops/context", None)
        .await;
    assert_eq!(context["tokens"]["volatile"], 0, "{context}");
    assert!(context.get("volatile_tail").is_none(), "{context}");
}
