//! The gateway in the `agent-host serve` binary, with a standard processor
//! in the sandbox: what reaches the upstream, what is stored.

use std::process::{Child, Stdio};

use agent_host_store::{SessionRef, SessionStore};
use agent_host_testkit::model_server::{LlmServer, Wire};
use serde_json::{Value, json};

use crate::util::{agent_host, standard_processor};

/// `agent-host serve` as a gateway in front of `upstream`, with `extra`
/// flags; the child and its base URL.
fn gateway(store: &std::path::Path, upstream: &LlmServer, extra: &[&str]) -> (Child, String) {
    let mut command = agent_host();
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--store"])
        .arg(store)
        .args([
            "--provider",
            "openai",
            "--model",
            "test-model",
            "--api-key-env",
            "",
        ])
        .args(["--base-url", &upstream.base_url()])
        .args(extra)
        .env_remove("AGENT_HOST_API_TOKEN")
        .stderr(Stdio::inherit());
    crate::util::started_server(command)
}

/// Issue 17: with `redact-secrets` in the chain, a key in the client's
/// history never reaches the upstream, and the stored session keeps it.
#[test]
fn redact_secrets_keeps_keys_from_the_upstream_and_in_the_store() {
    let upstream = LlmServer::start(Wire::OpenAi);
    let dir = tempfile::tempdir().unwrap();
    let redact = standard_processor("redact-secrets");
    let (mut child, base) = gateway(
        dir.path(),
        &upstream,
        &["--processor", redact.to_str().unwrap()],
    );
    let key = "sk-proj-Zq8xV3mN5pL2rT9wK4yB7cH1dF6gJ0sA";
    let aws = "AKIAIOSFODNN7EXAMPLE";
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let reply: Value = runtime.block_on(async {
        let reply = reqwest::Client::new()
            .post(format!("{base}/v1/chat/completions"))
            .header("x-session-id", "with-secrets")
            .json(&json!({"model": "test-model", "messages": [
                {"role": "system", "content": "You are a deploy bot."},
                {"role": "user", "content": format!("Use {key} and {aws} to deploy.")}
            ]}))
            .send()
            .await
            .unwrap();
        let status = reply.status();
        let processors = reply.headers()["x-agent-host-processors"]
            .to_str()
            .unwrap()
            .to_owned();
        assert_eq!(status, 200);
        assert_eq!(processors, "redact-secrets=applied");
        let reply: Value = reply.json().await.unwrap();
        // The exchange is stored just after the client has the answer: wait
        // for its request to end before killing the server.
        for _ in 0..500 {
            let listed: Value = reqwest::get(format!("{base}/v1/sessions/with-secrets/requests"))
                .await
                .unwrap()
                .json()
                .await
                .unwrap_or_default();
            let ended = listed["requests"]
                .as_array()
                .is_some_and(|r| r.iter().all(|r| r["outcome"] != "in_progress"));
            if ended {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        reply
    });
    assert!(
        reply["choices"][0]["message"]["content"].is_string(),
        "{reply}"
    );

    let sent = upstream.requests();
    assert_eq!(sent.len(), 1);
    assert!(!sent[0].contains(key), "the key reached the upstream");
    assert!(!sent[0].contains(aws), "the AWS key reached the upstream");
    assert!(
        sent[0].contains("to deploy."),
        "the rest of the message went"
    );

    child.kill().unwrap();
    child.wait().unwrap();
    let store = agent_host_store::FileStore::open(dir.path()).unwrap();
    let stored = store
        .load(&SessionRef::Key {
            agent: agent_host_store::DEFAULT_AGENT.to_owned(),
            key: "with-secrets".to_owned(),
        })
        .unwrap()
        .messages;
    assert_eq!(stored.len(), 3, "{stored:#?}");
    assert!(
        stored[1].content.contains(key),
        "the store keeps the original"
    );
    assert!(stored[1].content.contains(aws));
}
