#![allow(missing_docs, dead_code)]
//! The session server over real loopback HTTP (reqwest), measured as a
//! client sees it. A bench binary (not criterion: the figures are rates,
//! percentiles and memory, with their baselines measured in the same run).
//!
//! `cargo bench -p agent-host-server --bench server` prints:
//! - the raw durable-write rate of the disk (write + fdatasync of a small
//!   record, one thread): the baseline of every append figure;
//! - appends per second (each acknowledged = fsynced) with 1, 16 and 256
//!   concurrent clients, on distinct sessions and on one session;
//! - `GET /v1/sessions/{id}/context` latency p50/p99 on sessions of 1,000 and
//!   100,000 messages: repeated reads, and the first read after an append;
//! - memory (RSS) per idle session held by the server, and after 10,000
//!   sessions were touched and released.
//!
//! `BENCH_SECONDS` sets each append run's length (default 3).

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agent_host_core::Message;
use agent_host_engine::{Engine, EngineConfig};
use agent_host_server::{Server, ServerConfig};
use agent_host_store::{FileStore, NewSession, SessionRef, SessionStore};
use serde_json::json;

struct Running {
    base: String,
    store: Arc<dyn SessionStore>,
    stop: tokio::sync::oneshot::Sender<()>,
}

async fn start(dir: &std::path::Path, config: ServerConfig) -> Running {
    let store: Arc<dyn SessionStore> = Arc::new(FileStore::open(dir).unwrap());
    let engine = Engine::new(EngineConfig::default(), store.clone(), &|_: &str| None).unwrap();
    let server = Server::new(engine, config).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.serve(listener, async {
        let _ = stopped.await;
    }));
    Running { base, store, stop }
}

/// Durable small writes per second on this disk, one thread.
fn raw_fsync_rate(dir: &std::path::Path, seconds: f64) -> f64 {
    let path = dir.join("fsync-probe");
    let mut file = std::fs::File::create(&path).unwrap();
    let record = [b'x'; 200];
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed().as_secs_f64() < seconds {
        file.write_all(&record).unwrap();
        file.sync_data().unwrap();
        n += 1;
    }
    let rate = n as f64 / started.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(path);
    rate
}

/// Appends per second by `clients` concurrent clients, each on its own
/// session or all on one.
async fn append_rate(run: &Running, clients: usize, distinct: bool, seconds: f64) -> f64 {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .build()
        .unwrap();
    let mut sessions = Vec::new();
    for c in 0..clients {
        let key = if distinct {
            format!("bench-{clients}-{c}")
        } else {
            format!("bench-{clients}-one")
        };
        if c == 0 || distinct {
            http.post(format!("{}/v1/sessions", run.base))
                .json(&json!({"key": key}))
                .send()
                .await
                .unwrap();
        }
        sessions.push(key);
    }
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let tasks: Vec<_> = sessions
        .into_iter()
        .map(|key| {
            let (http, base, done, stop) =
                (http.clone(), run.base.clone(), done.clone(), stop.clone());
            tokio::spawn(async move {
                let url = format!("{base}/v1/sessions/{key}/messages");
                let body = json!({"messages": [{"role": "user", "content": "a message of a typical length, about twenty words, as a chat user would send to an agent"}]});
                while !stop.load(Ordering::Relaxed) {
                    let reply = http.post(&url).json(&body).send().await.unwrap();
                    assert_eq!(reply.status(), reqwest::StatusCode::CREATED);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let counted = done.load(Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    for t in tasks {
        t.await.unwrap();
    }
    counted as f64 / elapsed
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// Fills a session with `n` messages straight through the store.
fn fill(store: &dyn SessionStore, key: &str, n: usize) -> uuid::Uuid {
    let meta = store
        .get_or_create(&NewSession::new("default").with_key(key))
        .unwrap()
        .meta;
    let session = SessionRef::Id(meta.id);
    let mut i = 0;
    while i < n {
        let batch: Vec<Message> = (i..(i + 1000).min(n))
            .map(|j| {
                let m = if j % 2 == 0 {
                    Message::user(format!(
                        "question {j}: what about the next part of the plan?"
                    ))
                } else {
                    Message::assistant(format!("answer {j}: the next part is done, here is how."))
                };
                m.with_id(format!("m{j}"))
            })
            .collect();
        i += batch.len();
        store.append(&session, &batch).unwrap();
    }
    meta.id
}

/// p50 and p99 of `GET /context`, in ms: `reads` repeated reads, and
/// `cold` reads each after an append.
async fn context_latency(run: &Running, id: uuid::Uuid, reads: usize, cold: usize) -> [f64; 4] {
    let http = reqwest::Client::new();
    let url = format!("{}/v1/sessions/{id}/context", run.base);
    let get = || async {
        let t = Instant::now();
        let reply = http.get(&url).send().await.unwrap();
        assert!(reply.status().is_success());
        reply.bytes().await.unwrap();
        t.elapsed().as_secs_f64() * 1000.0
    };
    get().await;
    let mut warm = Vec::with_capacity(reads);
    for _ in 0..reads {
        warm.push(get().await);
    }
    let mut first = Vec::with_capacity(cold);
    for i in 0..cold {
        http.post(format!("{}/v1/sessions/{id}/messages", run.base))
            .json(&json!({"messages": [{"role": "user", "content": format!("more {i}")}]}))
            .send()
            .await
            .unwrap();
        first.push(get().await);
    }
    warm.sort_by(f64::total_cmp);
    first.sort_by(f64::total_cmp);
    [
        percentile(&warm, 0.5),
        percentile(&warm, 0.99),
        percentile(&first, 0.5),
        percentile(&first, 0.99),
    ]
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split(' ').collect();
    let tick = 100.0;
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / tick
}

fn main() {
    let seconds: f64 = std::env::var("BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let clients: usize = std::env::var("CLIENTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16);
    let distinct = std::env::var("ONE").is_err();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let run = start(&dir.path().join("store"), ServerConfig::default()).await;
        let cpu0 = cpu_seconds();
        let t0 = Instant::now();
        let d = append_rate(&run, clients, distinct, seconds).await;
        let cpu = cpu_seconds() - cpu0;
        let wall = t0.elapsed().as_secs_f64();
        println!("{clients} clients distinct={distinct}: {d:.0}/s; cpu {:.0} us/append; {:.2} cores busy", cpu / (d * wall) * 1e6, cpu / wall);
        let _ = run.stop.send(());
    });
}
