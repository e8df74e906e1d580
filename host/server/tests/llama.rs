//! The gateway in front of a real model server: llama.cpp's `llama-server`
//! (built offline from the llama.cpp tree in the PyPI sdist of
//! llama-cpp-python by `tests/gateway/llama.sh`, cached) serving
//! SmolLM2-135M-Instruct, driven by the official OpenAI and Anthropic SDKs
//! (`tests/gateway/sdks.sh`) over real HTTP, streamed and not, on both wires.
//!
//! The model's words are its own: the tests check that the SDKs got whole
//! answers with usage, and that the store holds each conversation once, the
//! answers as the client read them.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use agent_host_core::Role;
use agent_host_engine::{Engine, EngineConfig};
use agent_host_provider::{ProviderKind, ProviderSettings};
use agent_host_server::{Server, ServerConfig};
use agent_host_store::{FileStore, SessionRef, SessionStore};
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The lines a setup script printed last, once per test process. Off CI, a
/// machine that cannot run it skips these tests with a note; under CI that
/// is a failure.
fn setup(script: &str, lines: usize) -> Option<Vec<PathBuf>> {
    let out = Command::new("bash")
        .arg(repo().join(script))
        .output()
        .expect("bash runs");
    if out.status.success() {
        let text = String::from_utf8(out.stdout).unwrap();
        let all: Vec<PathBuf> = text.lines().map(|l| PathBuf::from(l.trim())).collect();
        return Some(all[all.len() - lines..].to_vec());
    }
    let why = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        std::env::var_os("CI").is_none(),
        "{script} failed under CI: {why}"
    );
    eprintln!("skipped: {script} failed: {why}");
    None
}

struct Tools {
    python: PathBuf,
    server: PathBuf,
    model: PathBuf,
}

fn tools() -> Option<&'static Tools> {
    static TOOLS: OnceLock<Option<Tools>> = OnceLock::new();
    TOOLS
        .get_or_init(|| {
            let python = setup("tests/gateway/sdks.sh", 1)?.remove(0);
            let mut llama = setup("tests/gateway/llama.sh", 2)?;
            let model = llama.pop().unwrap();
            let server = llama.pop().unwrap();
            Some(Tools {
                python,
                server,
                model,
            })
        })
        .as_ref()
}

/// A running `llama-server`, killed when dropped.
struct Llama {
    child: Child,
    base: String,
}

impl Llama {
    async fn start(tools: &Tools) -> Llama {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(&tools.server)
            .arg("-m")
            .arg(&tools.model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["-c", "2048", "-np", "1", "-t", "2", "--no-webui"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("llama-server starts");
        let llama = Llama {
            child,
            base: format!("http://127.0.0.1:{port}"),
        };
        let started = Instant::now();
        loop {
            let ready = reqwest::get(format!("{}/health", llama.base))
                .await
                .is_ok_and(|r| r.status().is_success());
            if ready {
                return llama;
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "llama-server did not become ready"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Llama {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Gateway {
    base: String,
    store: Arc<dyn SessionStore>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    _dir: tempfile::TempDir,
}

impl Gateway {
    async fn start(llama: &Llama, kind: ProviderKind) -> Gateway {
        let mut provider = ProviderSettings::new(kind, "smollm2");
        provider.base_url = match kind {
            ProviderKind::OpenAi => format!("{}/v1", llama.base),
            _ => llama.base.clone(),
        };
        provider.api_key_env = None;
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(dir.path()).unwrap());
        let engine = Engine::new(
            EngineConfig {
                provider: Some(provider),
                ..EngineConfig::default()
            },
            store.clone(),
            &|_: &str| None,
        )
        .unwrap();
        let server = Server::new(engine, ServerConfig::default()).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(server.serve(listener, async {
            let _ = stopped.await;
        }));
        Gateway {
            base,
            store,
            stop: Some(stop),
            _dir: dir,
        }
    }

    async fn client(&self, python: &Path, scenario: &str) -> Value {
        let out = tokio::process::Command::new(python)
            .arg(repo().join("tests/gateway/llama_clients.py"))
            .arg(&self.base)
            .arg(scenario)
            .output()
            .await
            .expect("python runs");
        assert!(
            out.status.success(),
            "{scenario}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The session's messages once both of its requests have ended (an
    /// answer is stored just after the client has it).
    async fn stored(&self, key: &str) -> Vec<agent_host_core::Message> {
        let reference = SessionRef::Key {
            agent: agent_host_store::DEFAULT_AGENT.to_owned(),
            key: key.to_owned(),
        };
        for _ in 0..500 {
            if let Ok(history) = self.store.load(&reference)
                && history
                    .messages
                    .iter()
                    .filter(|m| m.role == Role::Assistant)
                    .count()
                    == 2
            {
                return history.messages;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("{key}: the answers were not stored");
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn conversation(kind: ProviderKind, scenario: &str) {
    let Some(tools) = tools() else { return };
    let llama = Llama::start(tools).await;
    let gateway = Gateway::start(&llama, kind).await;
    let got = gateway.client(&tools.python, scenario).await;
    let turns = got["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2, "{got}");
    let responses = scenario.starts_with("responses");
    let (input, output) = match kind {
        ProviderKind::OpenAi if !responses => ("prompt_tokens", "completion_tokens"),
        _ => ("input_tokens", "output_tokens"),
    };
    for turn in turns {
        assert!(!turn["text"].as_str().unwrap().is_empty(), "{got}");
        assert!(turn["usage"][input].as_u64().unwrap() > 0, "{got}");
        assert!(turn["usage"][output].as_u64().unwrap() > 0, "{got}");
        assert!(turn["finish"].is_string(), "{got}");
    }
    if responses {
        // Translated: Responses objects over llama-server's Chat
        // Completions, the second continuing the first.
        assert!(
            turns[0]["id"].as_str().unwrap().starts_with("resp_"),
            "{got}"
        );
        for turn in turns {
            assert!(
                matches!(turn["finish"].as_str(), Some("completed" | "incomplete")),
                "{got}"
            );
        }
    }
    if scenario.ends_with("stream") && responses {
        for turn in turns {
            let events: Vec<&str> = turn["events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e.as_str().unwrap())
                .collect();
            assert_eq!(events.first(), Some(&"response.created"), "{events:?}");
            assert!(
                matches!(
                    events.last(),
                    Some(&"response.completed" | &"response.incomplete")
                ),
                "{events:?}"
            );
            assert!(events.contains(&"response.output_text.delta"), "{events:?}");
        }
    } else if scenario.ends_with("stream") {
        match kind {
            ProviderKind::OpenAi => assert!(turns[0]["chunks"].as_u64().unwrap() > 2, "{got}"),
            _ => {
                let events: Vec<&str> = turns[0]["events"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e.as_str().unwrap())
                    .collect();
                assert_eq!(events.first(), Some(&"message_start"), "{events:?}");
                assert_eq!(events.last(), Some(&"message_stop"), "{events:?}");
            }
        }
    }
    let key = format!("llama-{scenario}");
    let headers = &turns[1]["headers"];
    assert_eq!(headers["x-agent-host-session-key"], key.as_str(), "{got}");
    assert_eq!(headers["x-agent-host-request"], "2", "{got}");

    // Stored once each: the system prompt, two questions, two answers as
    // the client read them, with the upstream's usage.
    let stored = gateway.stored(&key).await;
    let roles: Vec<&str> = stored.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "user", "assistant"],
        "{stored:?}"
    );
    for (answer, turn) in stored
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .zip(turns)
    {
        assert_eq!(answer.text(), turn["text"].as_str().unwrap(), "{got}");
        assert!(answer.usage.is_some(), "{answer:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_sdk_through_the_gateway_to_llama_server() {
    conversation(ProviderKind::OpenAi, "openai").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_sdk_streaming_through_the_gateway_to_llama_server() {
    conversation(ProviderKind::OpenAi, "openai-stream").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_sdk_through_the_gateway_to_llama_server() {
    conversation(ProviderKind::Anthropic, "anthropic").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_sdk_streaming_through_the_gateway_to_llama_server() {
    conversation(ProviderKind::Anthropic, "anthropic-stream").await;
}

/// A Responses client (the official SDK's `client.responses.create`) in
/// front of llama-server, which speaks Chat Completions only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_sdk_through_the_gateway_to_llama_server() {
    conversation(ProviderKind::OpenAi, "responses").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_sdk_streaming_through_the_gateway_to_llama_server() {
    conversation(ProviderKind::OpenAi, "responses-stream").await;
}
