//! `agent-host serve` as a process: its first line, graceful shutdown on
//! SIGTERM, and no acknowledged message lost to a `kill -9`.

use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_host_store::SessionRef;
use serde_json::json;

use crate::util::agent_host;

/// Starts `agent-host serve` on a free loopback port with `store`; returns
/// the child and the base URL from its first line.
fn serve(store: &str) -> (Child, String) {
    let mut command = agent_host();
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--store", store])
        .env_remove("AGENT_HOST_API_TOKEN")
        .stderr(Stdio::piped());
    let (child, base) = crate::util::started_server(command);
    let port: u16 = base
        .strip_prefix("http://127.0.0.1:")
        .expect("the real host")
        .parse()
        .expect("the real port");
    assert_ne!(port, 0);
    (child, base)
}

/// Writers appending one native record each request until told to stop;
/// returns the ids the server acknowledged.
async fn writers(base: String, session: String, stop: Arc<Mutex<bool>>) -> Vec<String> {
    let http = reqwest::Client::new();
    let acknowledged = Arc::new(Mutex::new(Vec::new()));
    let tasks = (0..8).map(|w| {
        let (http, base, session, stop, acknowledged) = (
            http.clone(),
            base.clone(),
            session.clone(),
            stop.clone(),
            acknowledged.clone(),
        );
        tokio::spawn(async move {
            for i in 0.. {
                if *stop.lock().unwrap() {
                    break;
                }
                let id = format!("w{w}-{i}");
                let sent = http
                    .post(format!("{base}/v1/sessions/{session}/messages"))
                    .json(&json!({"format": "jsonl", "messages": [{"type": "user", "id": id, "content": "x"}]}))
                    .send()
                    .await;
                match sent {
                    Ok(reply) if reply.status() == reqwest::StatusCode::CREATED => {
                        acknowledged.lock().unwrap().push(id);
                    }
                    // The server went away: nothing more is acknowledged.
                    _ => break,
                }
            }
        })
    });
    futures_util::future::join_all(tasks).await;
    Arc::try_unwrap(acknowledged).unwrap().into_inner().unwrap()
}

fn stored_ids(store: &str, session: &str) -> Vec<String> {
    let store = agent_host_store::open(store).unwrap();
    let id = uuid::Uuid::parse_str(session).unwrap();
    let history = store.load(&SessionRef::Id(id)).unwrap();
    history.messages.into_iter().map(|m| m.id).collect()
}

async fn create(base: &str) -> String {
    let reply: serde_json::Value = reqwest::Client::new()
        .post(format!("{base}/v1/sessions"))
        .json(&json!({"key": "burst"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    reply["id"].as_str().unwrap().to_owned()
}

/// A `kill -9` in the middle of a burst of appends: every acknowledged
/// message is in the store afterwards, exactly once (file and SQLite stores).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_appends_loses_no_acknowledged_message() {
    let dir = tempfile::tempdir().unwrap();
    for spec in [
        dir.path().join("files").display().to_string(),
        format!("sqlite:{}", dir.path().join("s.db").display()),
    ] {
        let (mut child, base) = serve(&spec);
        let session = create(&base).await;
        let stop = Arc::new(Mutex::new(false));
        let burst = tokio::spawn(writers(base.clone(), session.clone(), stop.clone()));
        tokio::time::sleep(Duration::from_millis(400)).await;
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        *stop.lock().unwrap() = true;
        let acknowledged = burst.await.unwrap();
        assert!(
            acknowledged.len() > 10,
            "{spec}: the burst ran ({})",
            acknowledged.len()
        );
        let stored = stored_ids(&spec, &session);
        let unique: HashSet<&String> = stored.iter().collect();
        assert_eq!(
            unique.len(),
            stored.len(),
            "{spec}: no message stored twice"
        );
        let missing: Vec<_> = acknowledged
            .iter()
            .filter(|id| !unique.contains(id))
            .collect();
        assert!(
            missing.is_empty(),
            "{spec}: acknowledged but lost: {missing:?}"
        );
        if !spec.starts_with("sqlite:") {
            // The killed server's journal was replayed by the open above,
            // and removed.
            let journals = std::fs::read_dir(dir.path().join("files").join("journal"))
                .map(|d| d.count())
                .unwrap_or(0);
            assert_eq!(journals, 0, "{spec}: the dead server's journal is gone");
        }
    }
}

/// SIGTERM: requests under way finish, the process exits 0, and what was
/// acknowledged is stored.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_shuts_down_gracefully() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().display().to_string();
    let (mut child, base) = serve(&spec);
    let health: serde_json::Value = reqwest::get(format!("{base}/healthz"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");
    let session = create(&base).await;
    let stop = Arc::new(Mutex::new(false));
    let burst = tokio::spawn(writers(base.clone(), session.clone(), stop.clone()));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    *stop.lock().unwrap() = true;
    assert!(status.success(), "a graceful stop exits 0: {status:?}");
    let acknowledged = burst.await.unwrap();
    let journals = std::fs::read_dir(dir.path().join("journal")).map(|d| d.count());
    assert_eq!(
        journals.unwrap_or(0),
        0,
        "a server stopped in order syncs its logs and removes its journal"
    );
    let stored: HashSet<String> = stored_ids(&spec, &session).into_iter().collect();
    assert!(acknowledged.iter().all(|id| stored.contains(id)));
}

/// A non-loopback address without tokens is refused with the configuration
/// exit code and a message that says what to do.
#[test]
fn serving_beyond_loopback_needs_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let out = agent_host()
        .args(["serve", "--listen", "0.0.0.0:0", "--store"])
        .arg(dir.path())
        .env_remove("AGENT_HOST_API_TOKEN")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains("without auth") && stderr.contains("--tokens"),
        "{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "no `listening on` line for a refused address"
    );
}

/// `sessions --server URL` lists, shows, renames, exports and deletes the
/// sessions of a running server; store-only commands say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_commands_talk_to_a_server() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, base) = serve(&dir.path().display().to_string());
    let http = reqwest::Client::new();
    http.post(format!("{base}/v1/sessions"))
        .json(&json!({"key": "team chat/1"}))
        .send()
        .await
        .unwrap();
    let appended = http
        .post(format!("{base}/v1/sessions/team%20chat%2F1/messages"))
        .json(&json!({"messages": [{"role": "user", "content": "where is the report?"}, {"role": "assistant", "content": "in docs/"}, {"role": "user", "content": "\u{1b}]0;owned\u{7}\u{1b}[2Jcleared"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(appended.status(), reqwest::StatusCode::CREATED);
    let server = base.clone();
    let cli = move |args: &[&str]| {
        let out = agent_host()
            .args(["sessions", "--server", &server])
            .args(args)
            .env_remove("AGENT_HOST_API_TOKEN")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, list, err) = tokio::task::spawn_blocking(move || {
        let list = cli(&["list"]);
        let show = cli(&["show", "team chat/1", "--role", "user"]);
        assert_eq!(show.0, Some(0), "{}", show.2);
        assert!(
            show.1.contains("where is the report?") && !show.1.contains("in docs/"),
            "{}",
            show.1
        );
        // A stranger's escape sequences are shown escaped, never sent raw.
        assert!(
            !show.1.contains('\u{1b}') && show.1.contains("\\u{1b}[2Jcleared"),
            "{}",
            show.1
        );
        let renamed = cli(&["rename", "team chat/1", "Reports"]);
        assert!(renamed.1.contains("Reports"), "{renamed:?}");
        let md = cli(&["export", "team chat/1"]);
        assert!(md.1.starts_with("# Reports"), "{}", md.1);
        let info = cli(&["info", "team chat/1"]);
        assert_eq!(info.0, Some(2), "{}", info.2);
        let missing = cli(&["show", "nobody"]);
        assert_eq!(missing.0, Some(1), "{}", missing.2);
        assert!(
            missing.2.contains("no session") && missing.2.contains("404"),
            "{}",
            missing.2
        );
        let gone = cli(&["delete", "team chat/1", "--yes"]);
        assert!(
            gone.1.contains("deleted session team chat/1 (3 messages)"),
            "{gone:?}"
        );
        list
    })
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{err}");
    assert!(
        list.contains("team chat/1") && list.contains("active"),
        "{list}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Bad serve settings are refused before anything listens, each with what
/// to do: a webhook without a signing secret or with a short one, an API
/// token too short to be safe.
#[test]
fn bad_serve_settings_are_refused_before_listening() {
    let dir = tempfile::tempdir().unwrap();
    let serve = |env: &[(&str, &str)], extra: &[&str]| {
        let mut command = agent_host();
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--store"])
            .arg(dir.path())
            .args(extra)
            .env_remove("AGENT_HOST_API_TOKEN")
            .env_remove("AGENT_HOST_WEBHOOK_SECRET");
        for (k, v) in env {
            command.env(k, v);
        }
        let out = command.output().unwrap();
        assert!(!out.status.success());
        assert!(out.stdout.is_empty(), "nothing listened");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let hook = ["--webhook", "http://127.0.0.1:9/hook"];
    let e = serve(&[], &hook);
    assert!(e.contains("AGENT_HOST_WEBHOOK_SECRET"), "{e}");
    let e = serve(&[("AGENT_HOST_WEBHOOK_SECRET", "short")], &hook);
    assert!(e.contains("at least 16"), "{e}");
    let e = serve(&[("AGENT_HOST_API_TOKEN", "tiny")], &[]);
    assert!(
        e.contains("AGENT_HOST_API_TOKEN") && e.contains("16"),
        "{e}"
    );
    let e = serve(&[], &["--memory-user", " "]);
    assert!(e.contains("--memory-user"), "{e}");
    let e = serve(&[], &["--memory-extraction", "model"]);
    assert!(
        e.contains("model extraction of memory facts needs a user") && e.contains("--memory-user"),
        "{e}"
    );
    let e = serve(&[], &["--memory-tools"]);
    assert!(
        e.contains("the memory tools need a user") && e.contains("[memory]"),
        "{e}"
    );
    let e = serve(&[], &["--extraction-threshold", "0"]);
    assert!(e.contains("--extraction-threshold"), "{e}");
    // `[memory]` in a named file: its bad values named with the line.
    let file = dir.path().join("memory.toml");
    std::fs::write(&file, "[memory]\nuser = \"ada\"\nretrieval_limit = 0\n").unwrap();
    let e = serve(&[], &["--config", file.to_str().unwrap()]);
    assert!(
        e.contains("memory.toml:3")
            && e.contains("`memory.retrieval_limit` = 0 must be between 1 and 1000"),
        "{e}"
    );
    std::fs::write(&file, "[memory]\nuser = \"ada\"\nextraction = \"model\"\n").unwrap();
    let e = serve(&[], &["--config", file.to_str().unwrap()]);
    assert!(e.contains("needs a provider"), "{e}");
}
