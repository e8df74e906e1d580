//! The dashboard's pages on a long session, measured as a client sees them
//! over loopback HTTP (server time plus the loopback round trip). A bench
//! binary: the figures are percentiles, with the same pages on a short
//! session measured in the same run as the baseline.
//!
//! `cargo bench -p agent-host-server --bench dashboard` prints p50/p99 of
//! the first screen of a session page (`GET /sessions/{id}`: the newest 100
//! messages, the context report, the chart) and of the list page, for a
//! 1,000-message and a 100,000-message session.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_host_core::Message;
use agent_host_engine::{Engine, EngineConfig};
use agent_host_server::{Server, ServerConfig};
use agent_host_store::{FileStore, NewSession, SessionStore};

/// A coding session of `n` messages (user, assistant with a tool call,
/// tool result of about 1 KB, assistant).
fn session(store: &dyn SessionStore, key: &str, n: usize) -> uuid::Uuid {
    let meta = store
        .create(&NewSession::new("default").with_key(key))
        .unwrap();
    let session = meta.reference();
    let mut batch = Vec::new();
    for i in 0..n {
        let m = match i % 4 {
            0 => Message::user(format!("step {i}: read src/file_{i}.rs")),
            1 => {
                let mut m = Message::assistant("");
                m.push_tool_call(
                    format!("c{i}"),
                    "read_file",
                    format!("{{\"path\":\"src/file_{i}.rs\"}}"),
                );
                m
            }
            2 => Message::tool_result(
                format!("c{}", i - 1),
                "read_file",
                format!("fn f{i}() {{}}\n").repeat(80),
            ),
            _ => Message::assistant(format!("file_{i} defines f{i}.")),
        };
        batch.push(m.with_id(format!("m{i}")));
        if batch.len() == 5_000 {
            store.append(&session, &batch).unwrap();
            batch.clear();
        }
    }
    if !batch.is_empty() {
        store.append(&session, &batch).unwrap();
    }
    meta.id
}

async fn percentiles(http: &reqwest::Client, url: &str, n: usize) -> (Duration, Duration) {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        let reply = http.get(url).send().await.unwrap();
        assert!(reply.status().is_success(), "{url}: {}", reply.status());
        let _ = reply.bytes().await.unwrap();
        times.push(started.elapsed());
    }
    times.sort();
    (times[n / 2], times[(n * 99 / 100).min(n - 1)])
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let short = session(&*store, "short", 1_000);
    let long = session(&*store, "long", 100_000);
    let engine = Engine::new(EngineConfig::default(), store, &|_: &str| None).unwrap();
    let server = Server::new(engine, ServerConfig::default()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(server.serve(listener, std::future::pending()));
    let http = reqwest::Client::new();

    println!("page                                   p50        p99");
    for (name, id) in [
        ("1,000 messages (baseline)", short),
        ("100,000 messages", long),
    ] {
        let url = format!("{base}/sessions/{id}");
        // The first read computes the context report; later ones reuse it
        // while the session is unchanged.
        let started = Instant::now();
        http.get(&url).send().await.unwrap().bytes().await.unwrap();
        println!(
            "session page, first read, {name:<26} {}",
            ms(started.elapsed())
        );
        let (p50, p99) = percentiles(&http, &url, 200).await;
        println!("session page, {name:<26} {:>10} {:>10}", ms(p50), ms(p99));
    }
    let (p50, p99) = percentiles(&http, &format!("{base}/"), 200).await;
    println!(
        "list page (2 sessions)                 {:>10} {:>10}",
        ms(p50),
        ms(p99)
    );
}
